package wire

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
)

// manifest mirrors testdata/vectors.json, written by testdata/make_vectors.py.
type manifest struct {
	Arrays []struct {
		File       string   `json:"file"`
		DType      string   `json:"dtype"`
		Shape      []int    `json:"shape"`
		DataHex    string   `json:"data_hex"`
		HostHex    string   `json:"host_hex"`
		DataSHA256 string   `json:"data_sha256"`
		HostSHA256 string   `json:"host_sha256"`
		Values     []string `json:"values"`
		Strings    []string `json:"strings"`
	} `json:"arrays"`
	Scalars []struct {
		File  string `json:"file"`
		Kind  string `json:"kind"`
		Value string `json:"value"`
	} `json:"scalars"`
	Texts []struct {
		File    string   `json:"file"`
		Strings []string `json:"strings"`
	} `json:"texts"`
	Messages []struct {
		File    string          `json:"file"`
		Kind    string          `json:"kind"`
		DType   string          `json:"dtype"`
		Shape   []int           `json:"shape"`
		HostHex string          `json:"host_hex"`
		EnvIDs  []int64         `json:"env_ids"`
		Expect  json.RawMessage `json:"expect"`
	} `json:"messages"`
}

func loadManifest(t testing.TB) *manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vectors.json"))
	if err != nil {
		t.Fatalf("read manifest (regenerate with /usr/bin/python3 testdata/make_vectors.py): %v", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func readVector(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allVectors returns every .msgpack file under testdata, sorted by name.
func allVectors(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "*.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no test vectors in testdata")
	}
	sort.Strings(names)
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	return out
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseFloat reads the manifest's spelling of a float: hex, inf or nan.
func parseFloat(t testing.TB, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("manifest float %q: %v", s, err)
	}
	return f
}

// sameFloat compares floats bit-for-bit except that any NaN equals any NaN.
func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

// checkScalar compares a Scalar to the manifest's kind and value.
func checkScalar(t testing.TB, what string, s Scalar, kind, value string) {
	t.Helper()
	switch kind {
	case "i":
		want, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if s.Kind != 'i' || s.Int != want {
			t.Errorf("%s: got %+v, want int %d", what, s, want)
		}
	case "u":
		want, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if s.Kind != 'u' || s.Uint != want {
			t.Errorf("%s: got %+v, want uint %d", what, s, want)
		}
	case "b":
		if s.Kind != 'b' || s.Bool != (value == "true") {
			t.Errorf("%s: got %+v, want bool %s", what, s, value)
		}
	case "f":
		want := parseFloat(t, value)
		if s.Kind != 'f' || !sameFloat(s.Float, want) {
			t.Errorf("%s: got %+v, want float %v", what, s, want)
		}
	default:
		t.Fatalf("%s: manifest kind %q", what, kind)
	}
}

// hostDType is d with its byte order made the host's.
func hostDType(d DType) DType {
	if d.Order != '|' {
		d.Order = NativeOrder
	}
	return d
}

// within reports whether sub lies inside whole's memory.
func within(sub, whole []byte) bool {
	if len(sub) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= lo && p+uintptr(len(sub)) <= lo+uintptr(cap(whole))
}

// isSuffix reports whether rest is a suffix of b (the same memory).
func isSuffix(rest, b []byte) bool {
	if len(rest) > len(b) {
		return false
	}
	if len(rest) == 0 {
		return true
	}
	return &b[len(b)-len(rest)] == &rest[0]
}

// mp builds msgpack by hand, for messages no encoder would write.
type mp []byte

func (e mp) m(n int) mp       { return msgp.AppendMapHeader(e, uint32(n)) }
func (e mp) a(n int) mp       { return msgp.AppendArrayHeader(e, uint32(n)) }
func (e mp) s(v string) mp    { return msgp.AppendString(e, v) }
func (e mp) k(v string) mp    { return msgp.AppendBytes(e, []byte(v)) } // bin key, as numpy writes
func (e mp) bin(v []byte) mp  { return msgp.AppendBytes(e, v) }
func (e mp) i(v int64) mp     { return msgp.AppendInt64(e, v) }
func (e mp) u(v uint64) mp    { return msgp.AppendUint64(e, v) }
func (e mp) f(v float64) mp   { return msgp.AppendFloat64(e, v) }
func (e mp) t(v bool) mp      { return msgp.AppendBool(e, v) }
func (e mp) null() mp         { return msgp.AppendNil(e) }
func (e mp) raw(b ...byte) mp { return append(e, b...) }
func (e mp) val(b []byte) mp  { return append(e, b...) }
func (e mp) shape(s ...int64) mp {
	e = e.a(len(s))
	for _, d := range s {
		e = e.i(d)
	}
	return e
}

// nd is an ndarray map in numpy's key order.
func nd(dtype string, data []byte, shape ...int64) mp {
	return mp(nil).m(4).k("__ndarray__").t(true).k("data").bin(data).k("dtype").s(dtype).k("shape").shape(shape...)
}

// actionMsg is an action message around an already-encoded data map.
func actionMsg(data mp) []byte {
	return mp(nil).m(2).s("message_type").s("action").s("data").val(data)
}

// image and state are the formulas make_vectors.py uses.
func image(n, h, w, c, seed int) Array {
	data := make([]byte, n*h*w*c)
	for i := range data {
		data[i] = byte((i*7 + seed) % 256)
	}
	return Array{DType: Uint8, Shape: []int{n, h, w, c}, Data: data}
}

func stateValues(n, d, seed int) []float64 {
	v := make([]float64, n*d)
	for i := range v {
		v[i] = float64(i)*0.25 - float64(seed)
	}
	return v
}

func state(n, d, seed int) Array {
	return Array{DType: Float64, Shape: []int{n, d}, Data: BytesOf(stateValues(n, d, seed))}
}

func errContains(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

// jsonValid is json.Valid and valid UTF-8: what encoding/json will read.
func jsonValid(b []byte) bool { return json.Valid(b) && utf8.Valid(b) }
