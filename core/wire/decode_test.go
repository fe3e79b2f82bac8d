package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
)

func decodeArr(b []byte) (Array, []byte, error) {
	var shape [MaxDims]int
	var a Array
	rest, err := DecodeArray(b, shape[:], &a)
	return a, rest, err
}

func TestDecodeArrayStrKeys(t *testing.T) {
	// str keys are accepted as well as numpy's bin keys, and extra keys are
	// skipped, in any order.
	b := mp(nil).m(6).s("shape").shape(2).s("extra").m(1).s("x").a(2).i(1).null().
		s("dtype").s("<i2").s("data").bin([]byte{1, 0, 2, 0}).s("__ndarray__").t(true).k("dtype").k("<u2")
	a, rest, err := decodeArr(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 0 || a.DType != MustParseDType("<u2") || len(a.Shape) != 1 || a.Shape[0] != 2 {
		t.Fatalf("got %s %v rest %d", a.DType, a.Shape, len(rest))
	}
	// rest is what follows the array
	b2 := append(nd("|u1", []byte{9}, 1), 0xc0)
	if _, rest, err := decodeArr(b2); err != nil || len(rest) != 1 || rest[0] != 0xc0 {
		t.Fatalf("rest %x err %v", rest, err)
	}
}

func TestDecodeArrayZeroD(t *testing.T) {
	a, _, err := decodeArr(nd("<f8", BytesOf([]float64{2.5}))) // shape []
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Shape) != 0 || a.Len() != 0 || a.RowBytes() != 8 {
		t.Fatalf("shape %v len %d rowbytes %d", a.Shape, a.Len(), a.RowBytes())
	}
	if s, _, err := DecodeScalar(nd("<f8", BytesOf([]float64{2.5}))); err != nil || s.Float != 2.5 {
		t.Fatalf("DecodeScalar of 0-d: %+v %v", s, err)
	}
}

func TestDecodeArrayErrors(t *testing.T) {
	big := uint64(math.MaxInt64) + 1
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too few bytes"},
		{"not a map", mp(nil).i(3), "map"},
		{"array", mp(nil).a(0), "map"},
		{"map count lie", mp(nil).raw(0xdf, 0xff, 0xff, 0xff, 0xff).k("x"), "entries in"},
		{"int key", mp(nil).m(1).i(1).t(true), "map key is a int"},
		{"nil key", mp(nil).m(1).null().t(true), "map key is a nil"},
		{"__ndarray__ not bool", mp(nil).m(1).k("__ndarray__").i(1), "__ndarray__"},
		{"__ndarray__ false", mp(nil).m(4).k("__ndarray__").t(false).k("data").bin(nil).k("dtype").s("|u1").k("shape").shape(0), "not an ndarray"},
		{"no __ndarray__", mp(nil).m(3).k("data").bin(nil).k("dtype").s("|u1").k("shape").shape(0), "not an ndarray"},
		{"no data", mp(nil).m(3).k("__ndarray__").t(true).k("dtype").s("|u1").k("shape").shape(0), "no data"},
		{"no dtype", mp(nil).m(3).k("__ndarray__").t(true).k("data").bin(nil).k("shape").shape(0), "no dtype"},
		{"no shape", mp(nil).m(3).k("__ndarray__").t(true).k("data").bin(nil).k("dtype").s("|u1"), "no shape"},
		{"data is str", mp(nil).m(1).k("data").s("abc"), "data"},
		{"data is int", mp(nil).m(1).k("data").i(1), "data"},
		{"dtype is int", mp(nil).m(1).k("dtype").i(4), "dtype"},
		{"dtype is nil", mp(nil).m(1).k("dtype").null(), "dtype"},
		{"shape is map", mp(nil).m(1).k("shape").m(0), "shape"},
		{"shape is int", mp(nil).m(1).k("shape").i(3), "shape"},
		{"shape element float", mp(nil).m(1).k("shape").a(1).f(2), "shape[0]"},
		{"shape element str", mp(nil).m(1).k("shape").a(1).s("2"), "shape[0]"},
		{"shape element nil", mp(nil).m(1).k("shape").a(2).i(1).null(), "shape[1]"},
		{"shape negative", nd("|u1", nil, -1), "non-negative"},
		{"shape huge", nd("|u1", nil, 1<<62), "want at most"},
		{"shape uint64 past int64", mp(nil).m(1).k("shape").a(1).u(big), "shape[0]"},
		{"shape product overflows", nd("<f8", nil, 1<<31, 1<<31, 1<<31), "overflows"},
		{"byte length overflows", nd("<f8", nil, 1<<31, 1<<31-1), "overflows"},
		{"text byte length overflows", nd("<U268435456", nil, 1<<31, 1<<31-1), "overflows"},
		{"shape too many dims", nd("|u1", []byte{1}, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), "33 dimensions"},
		{"shape count lie", mp(nil).m(1).k("shape").raw(0xdd, 0x7f, 0xff, 0xff, 0xff, 1), "elements in"},
		{"data short", nd("<f4", make([]byte, 7), 2), "needs 8 bytes, data has 7"},
		{"data long", nd("<f4", make([]byte, 9), 2), "needs 8 bytes, data has 9"},
		{"data for empty", nd("<f4", make([]byte, 4), 0, 3), "needs 0 bytes"},
		{"text data short", nd("<U3", make([]byte, 20), 2), "needs 24 bytes"},
		{"bin longer than input", mp(nil).m(1).k("data").raw(0xc6, 0x7f, 0xff, 0xff, 0xff, 0), "data"},
		{"kind V", nd("|V8", make([]byte, 8), 1), "structured (V)"},
		{"kind O", nd("|O", make([]byte, 8), 1), "object (O)"},
		{"kind O8", nd("|O8", make([]byte, 8), 1), "object (O)"},
		{"kind c", nd("<c16", make([]byte, 16), 1), "complex (c)"},
		{"kind c8", nd("<c8", make([]byte, 8), 1), "complex (c)"},
		{"kind M", nd("<M8", make([]byte, 8), 1), "unknown kind"},
		{"unknown value truncated", mp(nil).m(1).k("extra").raw(0xd9, 10, 'a'), "extra"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := append([]byte(nil), c.b...)
			_, rest, err := decodeArr(in)
			errContains(t, err, c.want)
			if !bytes.Equal(rest, c.b) {
				t.Errorf("rest on error is not the input")
			}
			var shape [MaxDims]int
			var a Array
			if _, err := DecodeArrayHost(in, shape[:], &a); err == nil {
				t.Error("DecodeArrayHost accepted it")
			}
			if !bytes.Equal(in, c.b) {
				t.Error("a failed decode wrote to its input")
			}
		})
	}
}

func TestDecodeArrayShapeCapacity(t *testing.T) {
	b := nd("|u1", make([]byte, 6), 1, 2, 3)
	var a Array
	var small [2]int
	_, err := DecodeArray(b, small[:], &a)
	errContains(t, err, "3 dimensions")
	var exact [3]int
	if _, err := DecodeArray(b, exact[:], &a); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeArray(nd("|u1", []byte{1}), nil, &a); err != nil {
		t.Fatalf("0-d array into nil shape: %v", err)
	}
}

// Every strict prefix of every vector is refused without a panic, by every
// decoder that reads it.
func TestTruncatedVectors(t *testing.T) {
	for name, full := range allVectors(t) {
		var act Action
		var shape [MaxDims]int
		var a Array
		for n := 0; n < len(full); n++ {
			// Large arrays: every prefix up to the data, then a stride.
			if n > 4096 && n < len(full)-64 && n%509 != 0 {
				continue
			}
			in := append([]byte(nil), full[:n]...)
			if _, err := DecodeArray(in, shape[:], &a); err == nil {
				t.Fatalf("%s[:%d]: DecodeArray accepted a prefix", name, n)
			}
			if _, err := DecodeArrayHost(in, shape[:], &a); err == nil {
				t.Fatalf("%s[:%d]: DecodeArrayHost accepted a prefix", name, n)
			}
			if err := act.Decode(in); err == nil {
				t.Fatalf("%s[:%d]: Action.Decode accepted a prefix", name, n)
			}
			if _, err := DecodeMetadata(in); err == nil {
				t.Fatalf("%s[:%d]: DecodeMetadata accepted a prefix", name, n)
			}
			if _, _, err := Envelope(in); err == nil {
				t.Fatalf("%s[:%d]: Envelope accepted a prefix", name, n)
			}
			if _, _, err := DecodeText(in); err == nil {
				t.Fatalf("%s[:%d]: DecodeText accepted a prefix", name, n)
			}
			if _, _, err := DecodeScalar(in); err == nil {
				t.Fatalf("%s[:%d]: DecodeScalar accepted a prefix", name, n)
			}
			if _, _, err := AppendJSON(nil, in); err == nil {
				t.Fatalf("%s[:%d]: AppendJSON accepted a prefix", name, n)
			}
		}
	}
}

func TestEnvelope(t *testing.T) {
	msg := mp(nil).m(3).s("x").a(2).i(1).i(2).s("data").m(1).s("k").i(5).s("message_type").s("action")
	kind, data, err := Envelope(msg)
	if err != nil || string(kind) != "action" {
		t.Fatalf("kind %q err %v", kind, err)
	}
	if !bytes.Equal(data, mp(nil).m(1).s("k").i(5)) {
		t.Fatalf("data %x", data)
	}
	if !within(kind, msg) || !within(data, msg) {
		t.Fatal("views are copies")
	}
	// no data key: data is nil
	if _, data, err := Envelope(mp(nil).m(1).s("message_type").s("metadata")); err != nil || data != nil {
		t.Fatalf("data %x err %v", data, err)
	}
	// bin keys are accepted too
	if kind, _, err := Envelope(mp(nil).m(1).k("message_type").s("infer")); err != nil || string(kind) != "infer" {
		t.Fatalf("bin key: %q %v", kind, err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "want a map"},
		{"int", mp(nil).i(1), "want a map"},
		{"array", mp(nil).a(1).s("action"), "want a map"},
		{"no message_type", mp(nil).m(1).s("data").m(0), "no message_type"},
		{"message_type int", mp(nil).m(1).s("message_type").i(1), "want str"},
		{"message_type bin", mp(nil).m(1).s("message_type").bin([]byte("action")), "want str"},
		{"message_type nil", mp(nil).m(1).s("message_type").null(), "want str"},
		{"int key", mp(nil).m(1).i(7).s("action"), "map key"},
		{"count lie", mp(nil).raw(0xde, 0xff, 0xff).s("message_type").s("action"), "entries in"},
		{"truncated data", mp(nil).m(2).s("message_type").s("action").s("data").raw(0x92, 0x01), "data"},
		{"truncated message_type", mp(nil).m(1).s("message_type").raw(0xa6, 'a', 'c'), "message_type"},
	} {
		_, _, err := Envelope(c.b)
		errContains(t, err, c.want)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v is not ErrMalformed", c.name, err)
		}
	}
}

func TestActionDecodeErrors(t *testing.T) {
	chunk := nd("<f4", make([]byte, 8), 1, 2)
	ids := nd("<i8", make([]byte, 16), 2)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"not a map", mp(nil).i(1), "want a map"},
		{"infer", mp(nil).m(2).s("message_type").s("infer").s("data").m(1).s("action").val(chunk), `got "infer", want "action"`},
		{"metadata", mp(nil).m(2).s("message_type").s("metadata").s("data").m(0), `want "action"`},
		{"no data", mp(nil).m(1).s("message_type").s("action"), "no data key"},
		{"data nil", actionMsg(mp(nil).null()), "action.data"},
		{"data array", actionMsg(mp(nil).a(1).val(chunk)), "action.data"},
		{"no action", actionMsg(mp(nil).m(1).s("env_ids").val(ids)), "no action key"},
		{"empty data", actionMsg(mp(nil).m(0)), "no action key"},
		{"action not ndarray", actionMsg(mp(nil).m(1).s("action").a(2).f(1).f(2)), "action.data.action"},
		{"action list", actionMsg(mp(nil).m(1).s("action").m(0)), "not an ndarray"},
		{"action text", actionMsg(mp(nil).m(1).s("action").val(nd("<U1", make([]byte, 8), 1, 2))), "not numeric"},
		{"action 1-d", actionMsg(mp(nil).m(1).s("action").val(nd("<f4", make([]byte, 8), 2))), "want [H, n, *da]"},
		{"action 0-d", actionMsg(mp(nil).m(1).s("action").val(nd("<f4", make([]byte, 4)))), "want [H, n, *da]"},
		{"action bad length", actionMsg(mp(nil).m(1).s("action").val(nd("<f4", make([]byte, 7), 1, 2))), "needs 8 bytes"},
		{"action complex", actionMsg(mp(nil).m(1).s("action").val(nd("<c8", make([]byte, 16), 1, 2))), "complex (c)"},
		{"env_ids float", actionMsg(mp(nil).m(2).s("env_ids").val(nd("<f8", make([]byte, 16), 2)).s("action").val(chunk)), "one-dimensional integer"},
		{"env_ids bool", actionMsg(mp(nil).m(2).s("env_ids").val(nd("|b1", make([]byte, 2), 2)).s("action").val(chunk)), "one-dimensional integer"},
		{"env_ids 2-d", actionMsg(mp(nil).m(2).s("env_ids").val(nd("<i8", make([]byte, 16), 1, 2)).s("action").val(chunk)), "one-dimensional integer"},
		{"env_ids 0-d", actionMsg(mp(nil).m(2).s("env_ids").val(nd("<i8", make([]byte, 8))).s("action").val(chunk)), "one-dimensional integer"},
		{"env_ids list", actionMsg(mp(nil).m(2).s("env_ids").a(2).i(0).i(1).s("action").val(chunk)), "action.data.env_ids"},
		{"env_ids u8 too big", actionMsg(mp(nil).m(2).s("env_ids").val(nd("<u8", bytes.Repeat([]byte{0xff}, 8), 1)).s("action").val(chunk)), "does not fit an int64"},
		{"int key", actionMsg(mp(nil).m(1).i(1).val(chunk)), "action.data"},
		{"unknown key truncated", actionMsg(mp(nil).m(2).s("action").val(chunk).s("x").raw(0xc4, 9)), "malformed message: data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var act Action
			err := act.Decode(append([]byte(nil), c.b...))
			errContains(t, err, c.want)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%v is not ErrMalformed", err)
			}
		})
	}
}

func TestActionDecodeUnknownKeysAndOrders(t *testing.T) {
	chunk := nd(">i2", []byte{0, 1, 0xff, 0xfe}, 2, 1)
	msg := mp(nil).m(3).s("extra").m(1).s("deep").a(1).null().
		s("data").m(3).s("note").s("hello").s("action").val(chunk).s("env_ids").val(nd("|u1", []byte{200}, 1)).
		s("message_type").s("action")
	var act Action
	if err := act.Decode(msg); err != nil {
		t.Fatal(err)
	}
	if act.Chunk.DType != hostDType(MustParseDType("<i2")) || act.Horizon() != 2 || act.Envs() != 1 || len(act.ActionShape()) != 0 {
		t.Fatalf("%s %v", act.Chunk.DType, act.Chunk.Shape)
	}
	if s := elementScalar(act.Chunk.DType, act.Chunk.Data[2:]); s.Int != -2 {
		t.Fatalf("second element %+v", s)
	}
	if len(act.EnvIDs) != 1 || act.EnvIDs[0] != 200 {
		t.Fatalf("env ids %v", act.EnvIDs)
	}
	// Decoding a message without env_ids into the same Action clears them.
	if err := act.Decode(actionMsg(mp(nil).m(1).s("action").val(nd("<f4", make([]byte, 4), 1, 1)))); err != nil {
		t.Fatal(err)
	}
	if act.EnvIDs != nil {
		t.Fatalf("stale env ids %v", act.EnvIDs)
	}
}

// Action.Decode works in place: data at every misalignment is moved over
// the bytes before it, and the bytes after it are left alone.
func TestActionDecodeInPlace(t *testing.T) {
	vals := []float64{1, -2, 3.5, 1e300}
	be := make([]byte, 0, 32)
	for _, v := range vals {
		bits := math.Float64bits(v)
		for s := 56; s >= 0; s -= 8 {
			be = append(be, byte(bits>>s))
		}
	}
	tail := mp(nil).s("env_ids").val(nd(">i8", []byte{0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 3}, 2))
	for pad := 0; pad < 8; pad++ {
		// padding in an extra key shifts the data by pad bytes
		data := mp(nil).m(3).s("pad").bin(make([]byte, pad)).s("action").val(nd(">f8", be, 2, 2, 1)).val(tail)
		raw := actionMsg(data)
		for off := 0; off < 8; off++ {
			buf := make([]byte, len(raw)+8)
			msg := buf[off : off+len(raw)]
			copy(msg, raw)
			var act Action
			if err := act.Decode(msg); err != nil {
				t.Fatal(err)
			}
			if !act.Chunk.Aligned() || act.Chunk.DType != Float64 {
				t.Fatalf("pad %d off %d: aligned %v dtype %s", pad, off, act.Chunk.Aligned(), act.Chunk.DType)
			}
			for i, v := range vals {
				if s := elementScalar(act.Chunk.DType, act.Chunk.Data[8*i:]); s.Float != v {
					t.Fatalf("pad %d off %d: element %d = %v", pad, off, i, s.Float)
				}
			}
			if act.EnvIDs[0] != 258 || act.EnvIDs[1] != 3 {
				t.Fatalf("env ids %v", act.EnvIDs)
			}
			// The moved data stays inside its own map entry: everything from
			// the env_ids key on is as it was... except env_ids' own data.
			i := bytes.Index(raw, []byte("env_ids"))
			j := bytes.Index(raw[i:], []byte("__ndarray__"))
			if !bytes.Equal(msg[i:i+j], raw[i:i+j]) {
				t.Fatalf("pad %d off %d: bytes after the chunk changed", pad, off)
			}
			if !bytes.Equal(buf[:off], make([]byte, off)) || !bytes.Equal(buf[off+len(raw):], make([]byte, 8-off)) {
				t.Fatal("wrote outside the message")
			}
		}
	}
}

func TestDecodeMetadataErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"action first", mp(nil).m(2).s("message_type").s("action").s("data").m(0), "server speaks first"},
		{"no data", mp(nil).m(1).s("message_type").s("metadata"), "no data key"},
		{"data nil", mp(nil).m(2).s("message_type").s("metadata").s("data").null(), "want a map"},
		{"data list", mp(nil).m(2).s("message_type").s("metadata").s("data").a(0), "want a map"},
		{"int key", mp(nil).m(2).s("message_type").s("metadata").s("data").m(1).i(1).i(2), "map key"},
		{"not a map", mp(nil).s("metadata"), "want a map"},
		{"typed key twice", mp(nil).m(2).s("message_type").s("metadata").s("data").m(2).s("action_horizon").i(2).s("action_horizon").i(3), `"action_horizon" appears twice`},
		{"key twice, str and bin", mp(nil).m(2).s("message_type").s("metadata").s("data").m(3).s("run").i(1).s("x").null().k("run").s("a"), `"run" appears twice`},
		{"key twice among many", manyKeys(40, 7), `"k07" appears twice`},
	} {
		_, err := DecodeMetadata(c.b)
		errContains(t, err, c.want)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v is not ErrMalformed", c.name, err)
		}
	}
}

// manyKeys is a metadata message of n keys "k00", "k01", ..., the last one
// repeating key dup (-1: none), so that duplicateKey sorts.
func manyKeys(n, dup int) []byte {
	data := mp(nil).m(n)
	for i := 0; i < n; i++ {
		k := i
		if i == n-1 && dup >= 0 {
			k = dup
		}
		data = data.s(fmt.Sprintf("k%02d", k)).i(int64(i))
	}
	return mp(nil).m(2).s("message_type").s("metadata").s("data").val(data)
}

// TestMetadataKeysOnce: a metadata map of unique keys, few or many, is
// taken whole, each key read back with its own value.
func TestMetadataKeysOnce(t *testing.T) {
	for _, n := range []int{0, 1, smallNames, smallNames + 1, 200} {
		md, err := DecodeMetadata(manyKeys(n, -1))
		if err != nil {
			t.Fatalf("%d keys: %v", n, err)
		}
		if len(md.Keys()) != n {
			t.Fatalf("%d keys: Keys gives %d", n, len(md.Keys()))
		}
		for i := 0; i < n; i++ {
			raw, ok := md.Lookup(fmt.Sprintf("k%02d", i))
			if s, _, err := DecodeScalar(raw); !ok || err != nil || s.Int != int64(i) {
				t.Fatalf("%d keys: key %d reads %v %v %v", n, i, s, ok, err)
			}
		}
	}
}

func TestMetadataOddValues(t *testing.T) {
	data := mp(nil).m(7).s("protocol_version").f(1.0).s("action_horizon").f(2.5).s("action_dim").u(math.MaxUint64).
		s("features").a(2).s("a").i(1).s("server").bin([]byte("x")).k("policy").s("P").s("algorithm").val(nd("<i8", make([]byte, 8), 1))
	md, err := DecodeMetadata(mp(nil).m(2).s("data").val(data).s("message_type").s("metadata"))
	if err != nil {
		t.Fatal(err)
	}
	if !md.ProtocolVersion.Set || md.ProtocolVersion.Value != 1 {
		t.Errorf("integral float protocol_version: %+v", md.ProtocolVersion)
	}
	if md.ActionHorizon.Set || md.ActionDim.Set || md.Features.Set || md.Server.Set || md.Algorithm.Set {
		t.Errorf("ill-typed keys set: %+v", md)
	}
	if !md.Policy.Set || md.Policy.Value != "P" {
		t.Errorf("bin key policy: %+v", md.Policy)
	}
	if !bytes.Equal(md.Raw, data) {
		t.Errorf("Raw is not the data map")
	}
	// plugrl_metadata_string reads any key through StringValue: the same
	// verdicts as the typed fields.
	for key, want := range map[string]bool{"server": false, "policy": true, "algorithm": false, "action_dim": false} {
		raw, _ := md.Lookup(key)
		if _, ok := StringValue(raw); ok != want {
			t.Errorf("StringValue(%s) ok = %v, want %v", key, ok, want)
		}
	}
}

// TestMetadataLongFeatures: a features list far longer than any server's
// is left absent (a list of 4M empty strings took 63 MiB of heap, and every
// Has a scan of it), and stays readable raw; one of usual length is kept.
func TestMetadataLongFeatures(t *testing.T) {
	long := mp(nil).a(maxFeatures + 1)
	for i := 0; i < maxFeatures; i++ {
		long = long.s("")
	}
	long = long.s(FeatureReuse)
	for _, tc := range []struct {
		name     string
		features mp
		set      bool
	}{
		{"usual", mp(nil).a(2).s("x").s(FeatureReuse), true},
		{"long", long, false},
	} {
		md, err := DecodeMetadata(mp(nil).m(2).s("data").val(mp(nil).m(1).s("features").val(tc.features)).s("message_type").s("metadata"))
		if err != nil {
			t.Fatal(err)
		}
		if md.Features.Set != tc.set || md.Has(FeatureReuse) != tc.set {
			t.Errorf("%s list: Features.Set %v, Has %v; want %v", tc.name, md.Features.Set, md.Has(FeatureReuse), tc.set)
		}
		if raw, ok := md.Lookup("features"); !ok || !bytes.Equal(raw, tc.features) {
			t.Errorf("%s list: not readable raw", tc.name)
		}
	}
}

func TestDecodeScalar(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want Scalar
	}{
		{"fixint", mp(nil).i(5), Scalar{Kind: 'i', Int: 5}},
		{"neg", mp(nil).i(-1000), Scalar{Kind: 'i', Int: -1000}},
		{"uint64 small", mp(nil).raw(0xcf, 0, 0, 0, 0, 0, 0, 0, 9), Scalar{Kind: 'i', Int: 9}},
		{"uint64 big", mp(nil).u(math.MaxUint64), Scalar{Kind: 'u', Uint: math.MaxUint64}},
		{"float32", mp(nil).raw(0xca, 0x3f, 0xc0, 0, 0), Scalar{Kind: 'f', Float: 1.5}},
		{"float64", mp(nil).f(-0.25), Scalar{Kind: 'f', Float: -0.25}},
		{"bool", mp(nil).t(true), Scalar{Kind: 'b', Bool: true}},
		{"npgeneric str keys", mp(nil).m(3).s("__npgeneric__").t(true).s("dtype").s("<i4").s("data").i(-3), Scalar{Kind: 'i', Int: -3}},
		{"npgeneric extra", mp(nil).m(3).k("x").a(1).null().k("data").f(2).k("__npgeneric__").t(true), Scalar{Kind: 'f', Float: 2}},
		{"ndarray 1 elem u8", nd("<u8", bytes.Repeat([]byte{0xff}, 8), 1, 1), Scalar{Kind: 'u', Uint: math.MaxUint64}},
		{"ndarray |b1", nd("|b1", []byte{1}, 1), Scalar{Kind: 'b', Bool: true}},
		{"ndarray >i2", nd(">i2", []byte{0xff, 0xfe}), Scalar{Kind: 'i', Int: -2}},
		{"ndarray |i1", nd("|i1", []byte{0x80}), Scalar{Kind: 'i', Int: -128}},
		{"ndarray >u4", nd(">u4", []byte{0, 0, 1, 0}), Scalar{Kind: 'i', Int: 256}},
		{"ndarray <f2", nd("<f2", []byte{0, 0x3c}), Scalar{Kind: 'f', Float: 1}},
	} {
		s, rest, err := DecodeScalar(c.b)
		if err != nil || s != c.want || len(rest) != 0 {
			t.Errorf("%s: got %+v rest %d err %v, want %+v", c.name, s, len(rest), err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "want a number"},
		{"str", mp(nil).s("1"), "want a number"},
		{"nil", mp(nil).null(), "want a number"},
		{"array", mp(nil).a(1).i(1), "want a number"},
		{"plain map", mp(nil).m(1).s("data").i(1), "want a number"},
		{"npgeneric no data", mp(nil).m(2).k("__npgeneric__").t(true).k("dtype").s("<i8"), "no numeric data"},
		{"npgeneric data map", mp(nil).m(2).k("__npgeneric__").t(true).k("data").m(1).k("__npgeneric__").t(true), "no numeric data"},
		{"npgeneric data str", mp(nil).m(2).k("__npgeneric__").t(true).k("data").s("x"), "__npgeneric__ data"},
		{"npgeneric data list", mp(nil).m(2).k("__npgeneric__").t(true).k("data").a(1).i(1), "__npgeneric__ data"},
		{"ndarray 2 elems", nd("<i8", make([]byte, 16), 2), "not a scalar"},
		{"ndarray empty", nd("<i8", nil, 0), "not a scalar"},
		{"ndarray text", nd("<U1", make([]byte, 4), 1), "not a scalar"},
		{"ndarray broken", nd("<i8", make([]byte, 4), 1), "needs 8 bytes"},
		{"truncated int", mp(nil).raw(0xd3, 1, 2), "too few bytes"},
	} {
		_, rest, err := DecodeScalar(c.b)
		errContains(t, err, c.want)
		_ = rest
	}
	for _, c := range []struct {
		s    Scalar
		want int64
		ok   bool
	}{
		{Scalar{Kind: 'i', Int: -4}, -4, true},
		{Scalar{Kind: 'u', Uint: math.MaxUint64}, 0, false},
		{Scalar{Kind: 'u', Uint: 7}, 7, true},
		{Scalar{Kind: 'f', Float: 8}, 8, true},
		{Scalar{Kind: 'f', Float: 8.5}, 0, false},
		{Scalar{Kind: 'f', Float: math.NaN()}, 0, false},
		{Scalar{Kind: 'f', Float: math.Inf(1)}, 0, false},
		{Scalar{Kind: 'f', Float: 1 << 60}, 0, false},
		{Scalar{Kind: 'b', Bool: true}, 0, false},
	} {
		if v, ok := c.s.AsInt(); v != c.want || ok != c.ok {
			t.Errorf("%+v.AsInt() = %d, %v", c.s, v, ok)
		}
	}
}

func TestDecodeText(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"int", mp(nil).i(1), "want a <U array"},
		{"str", mp(nil).s("a"), "want a <U array"},
		{"list of int", mp(nil).a(2).s("a").i(1), "text[1]"},
		{"list of nil", mp(nil).a(1).null(), "text[0]"},
		{"list count lie", mp(nil).raw(0xdd, 0, 0, 1, 0).s("a"), "elements in"},
		{"f4 array", nd("<f4", make([]byte, 4), 1), "want <U"},
		{"2-d text", nd("<U1", make([]byte, 8), 1, 2), "want [n]"},
		{"0-d text", nd("<U1", make([]byte, 4)), "want [n]"},
		{"bad text length", nd("<U2", make([]byte, 12), 2), "needs 16 bytes"},
		{"not an ndarray", mp(nil).m(1).s("a").s("b"), "not an ndarray"},
	} {
		_, _, err := DecodeText(c.b)
		errContains(t, err, c.want)
	}
}

func TestDecodeUTF32(t *testing.T) {
	le := func(rs ...uint32) []byte {
		var b []byte
		for _, r := range rs {
			b = append(b, byte(r), byte(r>>8), byte(r>>16), byte(r>>24))
		}
		return b
	}
	d := DType{Order: '<', Kind: 'U', Size: 3}
	got := DecodeUTF32(le('a', 0, 'b', 0xD800, 0x110000, 0xffffffff, 0, 0, 0), d)
	// NULs are stripped only from the end; surrogates and out-of-range code
	// points become U+FFFD.
	want := []string{"a\x00b", "\ufffd\ufffd\ufffd", ""}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("element %d: %q, want %q", i, got[i], want[i])
		}
	}
	// A partial trailing element is ignored.
	if got := DecodeUTF32(le('x', 'y'), DType{Order: '<', Kind: 'U', Size: 1})[:2]; got[0] != "x" || got[1] != "y" {
		t.Fatalf("%q", got)
	}
	if got := DecodeUTF32([]byte{'x', 0, 0, 0, 'y'}, DType{Order: '<', Kind: 'U', Size: 1}); len(got) != 1 {
		t.Fatalf("%q", got)
	}
	if got := DecodeUTF32(nil, DType{Kind: 'U'}); got != nil {
		t.Fatalf("width 0: %q", got)
	}
}

func TestFloat16(t *testing.T) {
	// Every half-precision bit pattern against the definition.
	for h := 0; h < 1<<16; h++ {
		sign := 1.0
		if h&0x8000 != 0 {
			sign = -1
		}
		exp := (h >> 10) & 0x1f
		frac := h & 0x3ff
		var want float64
		switch exp {
		case 0:
			want = sign * math.Ldexp(float64(frac), -24)
		case 0x1f:
			if frac == 0 {
				want = math.Inf(int(sign))
			} else {
				want = math.NaN()
			}
		default:
			want = sign * math.Ldexp(float64(1024+frac), exp-25)
		}
		got := float64(Float16ToFloat32(uint16(h)))
		if !sameFloat(got, want) {
			t.Fatalf("Float16ToFloat32(%#04x) = %v, want %v", h, got, want)
		}
		if exp == 0x1f && frac != 0 && math.Float32bits(Float16ToFloat32(uint16(h)))&0x7fffff != uint32(frac)<<13 {
			t.Fatalf("NaN %#04x loses its payload", h)
		}
	}
	if b := math.Float32bits(Float16ToFloat32(0x8000)); b != 0x80000000 {
		t.Fatalf("-0 is %#x", b)
	}
}

// TestActionDecodeKeepsLittle: what an Action keeps follows the request and
// a bound, never what a server claims. A long env_ids list is refused, when
// the request named fewer envs, before memory is taken for it (8 bytes per
// claimed id); and a message with much besides its data (a key the client
// skips) leaves no copy of it behind.
func TestActionDecodeKeepsLittle(t *testing.T) {
	const claimed = 4 << 20
	chunk := nd("<f4", make([]byte, 4), 1, 1)
	longIDs := actionMsg(mp(nil).m(2).s("action").val(chunk).s("env_ids").val(nd("|u1", make([]byte, claimed), claimed)))
	act := Action{MaxEnvIDs: 1}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := act.Decode(longIDs)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "has 4194304 entries, the infer named 1 envs") {
		t.Fatalf("env_ids of %d entries for a request of 1: got %v", claimed, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("refusing a %d-entry env_ids took %d bytes of heap", claimed, grew)
	}

	padded := actionMsg(mp(nil).m(3).s("pad").bin(make([]byte, 1<<20)).s("action").val(chunk).s("env_ids").val(nd("|u1", []byte{0}, 1)))
	if err := act.Decode(append([]byte(nil), padded...)); err != nil { // a copy: Decode works in place
		t.Fatal(err)
	}
	if cap(act.around) > maxAround {
		t.Errorf("after a message with 1 MiB besides its data the Action keeps %d bytes of it", cap(act.around))
	}
	// Decoded in full each time, it still reads right, and a normal
	// message after it gets the shortcut again.
	if err := act.Decode(append([]byte(nil), padded...)); err != nil || len(act.EnvIDs) != 1 || act.Horizon() != 1 {
		t.Fatalf("the padded message again: %v, env_ids %v", err, act.EnvIDs)
	}
	plain := actionMsg(mp(nil).m(2).s("action").val(chunk).s("env_ids").val(nd("|u1", []byte{0}, 1)))
	for i := 0; i < 2; i++ {
		if err := act.Decode(append([]byte(nil), plain...)); err != nil {
			t.Fatal(err)
		}
	}
	if !act.same {
		t.Error("a plain message after a padded one gets no shortcut")
	}
	// The shortcut honours a MaxEnvIDs lowered since: two env_ids, then
	// the same message for a request of one env.
	act = Action{}
	two := actionMsg(mp(nil).m(2).s("action").val(nd("<f4", make([]byte, 8), 1, 2)).s("env_ids").val(nd("|u1", []byte{0, 1}, 2)))
	for i := 0; i < 2; i++ {
		if err := act.Decode(append([]byte(nil), two...)); err != nil {
			t.Fatal(err)
		}
	}
	act.MaxEnvIDs = 1
	if err := act.Decode(append([]byte(nil), two...)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("2 env_ids, MaxEnvIDs 1, the message decoded before: got %v, want malformed", err)
	}
}
