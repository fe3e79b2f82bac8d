package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

// The vectors in testdata were written by numpy and msgpack-python
// (testdata/make_vectors.py); these tests hold the Go side to them.

func requireLittleEndian(t *testing.T) {
	t.Helper()
	if NativeOrder != '<' {
		t.Skip("the Python vectors were written on a little-endian host")
	}
}

func TestVectorsArrays(t *testing.T) {
	man := loadManifest(t)
	if len(man.Arrays) < 30 {
		t.Fatalf("manifest lists %d arrays", len(man.Arrays))
	}
	for _, v := range man.Arrays {
		t.Run(v.File, func(t *testing.T) {
			raw := readVector(t, v.File)
			wantD := MustParseDType(v.DType)
			if got := wantD.String(); got != v.DType {
				t.Fatalf("ParseDType(%q).String() = %q", v.DType, got)
			}
			var shape [MaxDims]int
			var a Array
			msg := append([]byte(nil), raw...)
			rest, err := DecodeArray(msg, shape[:], &a)
			if err != nil {
				t.Fatalf("DecodeArray: %v", err)
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes left over", len(rest))
			}
			if a.DType != wantD || !reflect.DeepEqual(append([]int{}, a.Shape...), append([]int{}, v.Shape...)) {
				t.Fatalf("got %s %v, want %s %v", a.DType, a.Shape, v.DType, v.Shape)
			}
			if !within(a.Data, msg) {
				t.Fatal("DecodeArray's data is not a view into its input")
			}
			if !bytes.Equal(msg, raw) {
				t.Fatal("DecodeArray wrote to its input")
			}
			checkBytes(t, "data", a.Data, v.DataHex, v.DataSHA256)

			// The same through DecodeArrayHost, at every alignment.
			for off := 0; off < 8; off++ {
				buf := make([]byte, len(raw)+16)
				msg := buf[off : off+len(raw)]
				copy(msg, raw)
				var h Array
				if _, err := DecodeArrayHost(msg, shape[:], &h); err != nil {
					t.Fatalf("offset %d: DecodeArrayHost: %v", off, err)
				}
				if h.DType != hostDType(wantD) {
					t.Fatalf("offset %d: host dtype %s, want %s", off, h.DType, hostDType(wantD))
				}
				if !h.Aligned() {
					t.Fatalf("offset %d: data at %p is not aligned", off, unsafe.SliceData(h.Data))
				}
				if !within(h.Data, msg) {
					t.Fatalf("offset %d: host data is not in the message", off)
				}
				checkBytes(t, "host data", h.Data, v.HostHex, v.HostSHA256)
				if off == 0 {
					checkValues(t, &h, v.Values, v.Strings)
				}
			}
		})
	}
}

func checkBytes(t *testing.T, what string, got []byte, wantHex, wantSHA string) {
	t.Helper()
	if wantSHA != "" {
		sum := sha256.Sum256(got)
		if hex.EncodeToString(sum[:]) != wantSHA {
			t.Fatalf("%s: sha256 differs from numpy's", what)
		}
		return
	}
	if want := mustHex(t, wantHex); !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %x\nwant %x", what, got, want)
	}
}

// checkValues reads every element of a host-order array and compares it to
// the manifest's values (numbers) or strings (text).
func checkValues(t *testing.T, a *Array, values, strs []string) {
	t.Helper()
	if a.DType.Kind == 'U' {
		got := DecodeUTF32(a.Data, a.DType)
		if len(got) != len(strs) {
			t.Fatalf("got %d strings, want %d", len(got), len(strs))
		}
		for i := range strs {
			if got[i] != strs[i] {
				t.Errorf("string %d: got %q, want %q", i, got[i], strs[i])
			}
		}
		return
	}
	if values == nil {
		return // a large array, checked by digest
	}
	n, _ := Elements(a.Shape)
	if n != len(values) {
		t.Fatalf("%d elements, manifest has %d values", n, len(values))
	}
	size := a.DType.ItemSize()
	for i, want := range values {
		s := elementScalar(a.DType, a.Data[i*size:])
		kind := string(a.DType.Kind)
		switch {
		case kind == "u" && s.Kind == 'i':
			kind = "i" // uints that fit int64 are reported signed
		case kind == "b":
		case kind == "f":
		}
		checkScalar(t, "element", s, kind, want)
	}
}

func TestVectorsScalars(t *testing.T) {
	man := loadManifest(t)
	for _, v := range man.Scalars {
		raw := readVector(t, v.File)
		s, rest, err := DecodeScalar(raw)
		if err != nil {
			t.Errorf("%s: %v", v.File, err)
			continue
		}
		if len(rest) != 0 {
			t.Errorf("%s: %d bytes left", v.File, len(rest))
		}
		checkScalar(t, v.File, s, v.Kind, v.Value)
		// AppendJSON spells the same number.
		js, _, err := AppendJSON(nil, raw)
		if err != nil {
			t.Errorf("%s: AppendJSON: %v", v.File, err)
			continue
		}
		var got any
		if err := json.Unmarshal(js, &got); err != nil {
			t.Errorf("%s: AppendJSON wrote %s: %v", v.File, js, err)
		}
		if IsNPGeneric(raw) != bytes.Contains(raw, []byte("__npgeneric__")) {
			t.Errorf("%s: IsNPGeneric wrong", v.File)
		}
	}
}

func TestVectorsText(t *testing.T) {
	man := loadManifest(t)
	for _, v := range man.Texts {
		raw := readVector(t, v.File)
		got, rest, err := DecodeText(raw)
		if err != nil {
			t.Errorf("%s: %v", v.File, err)
			continue
		}
		if len(rest) != 0 {
			t.Errorf("%s: %d bytes left", v.File, len(rest))
		}
		if !reflect.DeepEqual(got, v.Strings) {
			t.Errorf("%s: got %q, want %q", v.File, got, v.Strings)
		}
	}
}

// vectorInfers are the Infer values that make_vectors.py's infer vectors
// encode; several spellings of one message must give the same bytes.
func vectorInfers() map[string][]*Infer {
	basicObs := func() *Observation {
		return &Observation{
			Images: []NamedArray{{"wrist", image(2, 3, 130, 3, 1)}, {"front", image(2, 2, 2, 3, 5)}},
			States: []NamedArray{{"qpos", state(2, 7, 1)}},
			Text:   []string{"pick up the red block", "stack"},
		}
	}
	reuseFull := &Observation{
		Images: []NamedArray{{"cam", image(3, 2, 2, 1, 9)}},
		States: []NamedArray{{"qvel", state(3, 2, 3)}},
		Text:   []string{"a", "a much longer prompt nobody sends", "ccc"},
	}
	// The same two rows the server receives, as an observation of only the
	// non-reused rows.
	img, st := image(3, 2, 2, 1, 9), state(3, 2, 3)
	reuseSent := &Observation{
		Images: []NamedArray{{"cam", Array{DType: Uint8, Shape: []int{2, 2, 2, 1},
			Data: append(append([]byte{}, img.Row(0)...), img.Row(2)...)}}},
		States: []NamedArray{{"qvel", Array{DType: Float64, Shape: []int{2, 2},
			Data: append(append([]byte{}, st.Row(0)...), st.Row(2)...)}}},
		Text: []string{"a", "ccc"},
	}
	reuse := []bool{false, true, false}
	return map[string][]*Infer{
		"infer_basic.msgpack": {
			{EnvIndices: []int64{3, 7}, StepIDs: []int64{0, 12}, Obs: basicObs()},
			{EnvIndices: []int64{3, 7}, StepIDs: []int64{0, 12}, Obs: basicObs(), ObsRows: []int{0, 1}},
		},
		"infer_text_only.msgpack": {
			{EnvIndices: []int64{0, 1, 2}, StepIDs: []int64{5, 0, 300},
				Obs: &Observation{Text: []string{"héllo wörld ☃", "🤖", ""}}},
			{EnvIndices: []int64{0, 1, 2}, StepIDs: []int64{5, 0, 300}, ObsRows: []int{1, 2, 0},
				Obs: &Observation{Text: []string{"", "héllo wörld ☃", "🤖"}}},
		},
		"infer_reuse.msgpack": {
			{EnvIndices: []int64{10, 11, 12}, StepIDs: []int64{1, 2, 3}, Reuse: reuse, Obs: reuseFull},
			{EnvIndices: []int64{10, 11, 12}, StepIDs: []int64{1, 2, 3}, Reuse: reuse, Obs: reuseSent},
			{EnvIndices: []int64{10, 11, 12}, StepIDs: []int64{1, 2, 3}, Reuse: reuse, Obs: reuseSent, ObsRows: []int{0, -1, 1}},
		},
		"infer_text_list.msgpack": {
			{EnvIndices: []int64{4}, StepIDs: []int64{0},
				Obs: &Observation{States: []NamedArray{{"qpos", state(1, 3, 0)}}, Text: []string{"go"}, TextAsStrings: true}},
		},
		"infer_empty_text.msgpack": {
			{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0},
				Obs: &Observation{States: []NamedArray{{"qpos", state(2, 1, 2)}}}},
			{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0},
				Obs: &Observation{States: []NamedArray{{"qpos", state(2, 1, 2)}}, Text: []string{"", ""}}},
		},
	}
}

func vectorFeedbacks() map[string]*Feedback {
	return map[string]*Feedback{
		"feedback_basic.msgpack": {
			EnvIndices: []int64{3, 7}, StepIDs: []int64{1, 13},
			Obs: &Observation{
				Images: []NamedArray{{"wrist", image(2, 3, 130, 3, 1)}, {"front", image(2, 2, 2, 3, 5)}},
				States: []NamedArray{{"qpos", state(2, 7, 1)}},
				Text:   []string{"pick up the red block", "stack"},
			},
			Rewards: []float32{1.5, -0.25}, Terminated: []bool{false, false}, Truncated: []bool{false, false},
		},
		"feedback_episode.msgpack": {
			EnvIndices: []int64{0, 1, 2}, StepIDs: []int64{4, 0, 9},
			Obs:     &Observation{States: []NamedArray{{"qpos", state(3, 2, 4)}}, Text: []string{"a", "b", "c"}},
			Rewards: []float32{0.5, 2, -1}, Terminated: []bool{true, false, false}, Truncated: []bool{false, false, true},
			Episode: &Episode{
				Return: []float64{10.5, 0, -3.25}, Length: []int64{200, 0, 1000},
				Success: []bool{true, false, false}, Mask: []bool{true, false, true},
			},
		},
		"feedback_episode_no_success.msgpack": {
			EnvIndices: []int64{5}, StepIDs: []int64{2},
			Obs:     &Observation{Images: []NamedArray{{"cam", image(1, 2, 2, 3, 2)}}, Text: []string{"x"}},
			Rewards: []float32{3}, Terminated: []bool{false}, Truncated: []bool{true},
			Episode: &Episode{Return: []float64{7}, Length: []int64{150}, Mask: []bool{true}},
		},
	}
}

func TestVectorsInferBytes(t *testing.T) {
	requireLittleEndian(t)
	var m Message
	seen := 0
	for name, ins := range vectorInfers() {
		want := readVector(t, name)
		for i, in := range ins {
			if err := EncodeInfer(&m, in); err != nil {
				t.Fatalf("%s #%d: %v", name, i, err)
			}
			got := m.AppendTo(nil)
			if !bytes.Equal(got, want) {
				t.Errorf("%s #%d: EncodeInfer differs from Python at byte %d\n got %x\nwant %x", name, i, firstDiff(got, want), got, want)
			}
			if m.Len() != len(got) {
				t.Errorf("%s #%d: Len %d, AppendTo wrote %d", name, i, m.Len(), len(got))
			}
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no infer vectors")
	}
}

func TestVectorsFeedbackBytes(t *testing.T) {
	requireLittleEndian(t)
	var m Message
	for name, f := range vectorFeedbacks() {
		want := readVector(t, name)
		if err := EncodeFeedback(&m, f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := m.AppendTo(nil)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: EncodeFeedback differs from Python at byte %d\n got %x\nwant %x", name, firstDiff(got, want), got, want)
		}
	}
}

// Every infer and feedback vector of the manifest has a Go counterpart.
func TestVectorsAllMessagesCovered(t *testing.T) {
	man := loadManifest(t)
	infers, feedbacks := vectorInfers(), vectorFeedbacks()
	for _, v := range man.Messages {
		switch v.Kind {
		case "infer":
			if infers[v.File] == nil {
				t.Errorf("%s has no Infer in vectorInfers", v.File)
			}
		case "feedback":
			if feedbacks[v.File] == nil {
				t.Errorf("%s has no Feedback in vectorFeedbacks", v.File)
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestVectorsAction(t *testing.T) {
	man := loadManifest(t)
	n := 0
	for _, v := range man.Messages {
		if v.Kind != "action" {
			continue
		}
		n++
		raw := readVector(t, v.File)
		wantD := hostDType(MustParseDType(v.DType))
		wantData := mustHex(t, v.HostHex)
		var act Action
		for off := 0; off < 8; off++ {
			buf := make([]byte, len(raw)+16)
			msg := buf[off : off+len(raw)]
			copy(msg, raw)
			if err := act.Decode(msg); err != nil {
				t.Fatalf("%s at offset %d: %v", v.File, off, err)
			}
			if act.Chunk.DType != wantD {
				t.Errorf("%s: dtype %s, want %s", v.File, act.Chunk.DType, wantD)
			}
			if !reflect.DeepEqual(act.Chunk.Shape, v.Shape) {
				t.Errorf("%s: shape %v, want %v", v.File, act.Chunk.Shape, v.Shape)
			}
			if act.Horizon() != v.Shape[0] || act.Envs() != v.Shape[1] || !reflect.DeepEqual(act.ActionShape(), v.Shape[2:]) {
				t.Errorf("%s: H %d n %d da %v", v.File, act.Horizon(), act.Envs(), act.ActionShape())
			}
			if !bytes.Equal(act.Chunk.Data, wantData) {
				t.Errorf("%s at offset %d: data\n got %x\nwant %x", v.File, off, act.Chunk.Data, wantData)
			}
			if !act.Chunk.Aligned() {
				t.Errorf("%s at offset %d: chunk data not aligned", v.File, off)
			}
			if !within(act.Chunk.Data, msg) {
				t.Errorf("%s at offset %d: chunk is not a view of the message", v.File, off)
			}
			if v.EnvIDs == nil {
				if act.EnvIDs != nil {
					t.Errorf("%s: EnvIDs %v, want nil (Ray dialect)", v.File, act.EnvIDs)
				}
			} else if !reflect.DeepEqual(act.EnvIDs, v.EnvIDs) {
				t.Errorf("%s: EnvIDs %v, want %v", v.File, act.EnvIDs, v.EnvIDs)
			}
		}
		// Reading the values as host numbers gives the chunk formula.
		switch wantD.Kind {
		case 'f':
			size := wantD.Size
			for i := 0; i*size < len(act.Chunk.Data); i++ {
				s := elementScalar(act.Chunk.DType, act.Chunk.Data[i*size:])
				if want := float64(i)*0.5 - 1; s.Float != want {
					t.Errorf("%s: element %d is %v, want %v", v.File, i, s.Float, want)
					break
				}
			}
		}
	}
	if n < 8 {
		t.Fatalf("only %d action vectors", n)
	}
}

// A >f4 chunk decodes to host-order float32s that can be read through a
// []float32 view once aligned.
func TestActionFloat32View(t *testing.T) {
	raw := readVector(t, "action_f4_be.msgpack")
	for off := 0; off < 8; off++ {
		buf := make([]byte, len(raw)+8)
		msg := buf[off : off+len(raw)]
		copy(msg, raw)
		var act Action
		if err := act.Decode(msg); err != nil {
			t.Fatal(err)
		}
		if !act.Chunk.Aligned() || act.Chunk.DType != Float32 {
			t.Fatalf("offset %d: %s aligned=%v", off, act.Chunk.DType, act.Chunk.Aligned())
		}
		fs := unsafe.Slice((*float32)(unsafe.Pointer(&act.Chunk.Data[0])), len(act.Chunk.Data)/4)
		for i, f := range fs {
			if want := float32(i)*0.5 - 1; f != want {
				t.Fatalf("offset %d: element %d = %v, want %v", off, i, f, want)
			}
		}
		if !reflect.DeepEqual(act.EnvIDs, []int64{1, 2}) {
			t.Fatalf("env ids %v", act.EnvIDs)
		}
	}
}

func TestVectorsMetadata(t *testing.T) {
	man := loadManifest(t)
	n := 0
	for _, v := range man.Messages {
		if v.Kind != "metadata" {
			continue
		}
		n++
		raw := readVector(t, v.File)
		msg := append([]byte(nil), raw...)
		md, err := DecodeMetadata(msg)
		if err != nil {
			t.Fatalf("%s: %v", v.File, err)
		}
		for i := range msg {
			msg[i] = 0xc1 // DecodeMetadata copies what it keeps
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(v.Expect, &want); err != nil {
			t.Fatal(err)
		}
		checkOptInt(t, v.File+" protocol_version", md.ProtocolVersion, want["protocol_version"])
		checkOptInt(t, v.File+" action_horizon", md.ActionHorizon, want["action_horizon"])
		checkOptInt(t, v.File+" action_dim", md.ActionDim, want["action_dim"])
		checkOptStr(t, v.File+" server", md.Server, want["server"])
		checkOptStr(t, v.File+" server_version", md.ServerVersion, want["server_version"])
		checkOptStr(t, v.File+" algorithm", md.Algorithm, want["algorithm"])
		checkOptStr(t, v.File+" policy", md.Policy, want["policy"])
		if w, ok := want["features"]; ok {
			var f []string
			if err := json.Unmarshal(w, &f); err != nil {
				t.Fatal(err)
			}
			if !md.Features.Set || !reflect.DeepEqual(append([]string{}, md.Features.Value...), f) {
				t.Errorf("%s: features %+v, want %q", v.File, md.Features, f)
			}
			for _, name := range f {
				if !md.Has(name) {
					t.Errorf("%s: Has(%q) = false", v.File, name)
				}
			}
		} else if md.Features.Set {
			t.Errorf("%s: features set to %q, want absent", v.File, md.Features.Value)
		}
		if md.Has("no-such-feature") {
			t.Errorf("%s: Has(no-such-feature)", v.File)
		}
		// Every key reads back through Lookup and converts to valid JSON.
		for _, k := range md.Keys() {
			val, ok := md.Lookup(k)
			if !ok || len(val) == 0 {
				t.Errorf("%s: Lookup(%q) missing", v.File, k)
			}
			js, ok, err := md.JSON(k)
			if err != nil || !ok || !json.Valid(js) {
				t.Errorf("%s: JSON(%q) = %s, %v, %v", v.File, k, js, ok, err)
			}
		}
		if _, ok := md.Lookup("absent-key"); ok {
			t.Errorf("%s: Lookup(absent-key) found", v.File)
		}
		if js, ok, err := md.JSON("absent-key"); ok || err != nil || js != nil {
			t.Errorf("%s: JSON(absent-key) = %s, %v, %v", v.File, js, ok, err)
		}
	}
	if n < 5 {
		t.Fatalf("only %d metadata vectors", n)
	}
}

func checkOptInt(t *testing.T, what string, got Opt[int64], want json.RawMessage) {
	t.Helper()
	if want == nil {
		if got.Set {
			t.Errorf("%s: set to %d, want absent", what, got.Value)
		}
		return
	}
	var w int64
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !got.Set || got.Value != w {
		t.Errorf("%s: %+v, want %d", what, got, w)
	}
}

func checkOptStr(t *testing.T, what string, got Opt[string], want json.RawMessage) {
	t.Helper()
	if want == nil {
		if got.Set {
			t.Errorf("%s: set to %q, want absent", what, got.Value)
		}
		return
	}
	var w string
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !got.Set || got.Value != w {
		t.Errorf("%s: %+v, want %q", what, got, w)
	}
}

func TestMetadataJSONValues(t *testing.T) {
	md, err := DecodeMetadata(readVector(t, "metadata_unknown.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"run_id", "action_dim", "nested", "gains", "prompts", "seed", "server", "big", "neg", "half", "flag", "features"}
	if got := md.Keys(); !reflect.DeepEqual(got, wantKeys) {
		t.Fatalf("Keys() = %q, want %q", got, wantKeys)
	}
	for key, want := range map[string]string{
		"run_id":     `"exp-2026-09-30/α"`,
		"action_dim": `{"dtype":"<i8","shape":[1],"data":[4]}`,
		"nested":     `{"a":{"b":[1,2.5,null,true,"s","/wA="]},"arr":{"dtype":"<i2","shape":[1,2],"data":[1,2]}}`,
		"gains":      `{"dtype":"<f4","shape":[2],"data":[0.5,null]}`,
		"prompts":    `{"dtype":"<U1","shape":[2],"data":["a","ü"]}`,
		"seed":       `18446744073709551615`,
		"big":        `18446744073709551615`,
		"neg":        `-9223372036854775808`,
		"half":       `0.5`,
		"flag":       `true`,
		"features":   `["reuse-feedback-obs","future-thing"]`,
	} {
		js, ok, err := md.JSON(key)
		if err != nil || !ok {
			t.Errorf("JSON(%q): ok=%v err=%v", key, ok, err)
			continue
		}
		if string(js) != want {
			t.Errorf("JSON(%q) = %s, want %s", key, js, want)
		}
		jsonEqual(t, key, js, []byte(want))
	}
}

// jsonEqual compares two JSON texts as values decoded by encoding/json.
func jsonEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	dec := func(b []byte) any {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", what, b, err)
		}
		if d.More() {
			t.Fatalf("%s: %s has trailing data", what, b)
		}
		return v
	}
	if g, w := dec(got), dec(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: JSON %s, want %s", what, got, want)
	}
}
