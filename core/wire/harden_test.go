package wire

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Tests against a hostile peer and a quadratic check. They use only what the
// package has always exported and the test helpers, so that each one can be
// run against the code before its fix, and fails there.

// within1s runs f and fails the test if it has not returned after a second.
// A run that overstays is left behind: it is a quadratic loop that ends on
// its own, and the test has already failed.
func within1s(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
		t.Logf("%s: %v", what, time.Since(start))
	case <-time.After(time.Second):
		t.Fatalf("%s took over a second: the env index check is not linear", what)
	}
}

// TestEncodeManyEnvIndices: checking 262144 env indices for duplicates is
// linear. Comparing each with every earlier one took seconds at half that.
// The Message is fresh each time, so no plan stands in for the check.
func TestEncodeManyEnvIndices(t *testing.T) {
	const n = 1 << 18
	idx := make([]int64, n)
	for i := range idx {
		idx[i] = int64(n - 1 - i)
	}
	steps := make([]int64, n)
	obs := &Observation{}
	flags := make([]bool, n)
	within1s(t, "EncodeInfer", func() {
		var m Message
		if err := EncodeInfer(&m, &Infer{EnvIndices: idx, StepIDs: steps, Obs: obs}); err != nil {
			t.Error(err)
		}
	})
	within1s(t, "EncodeFeedback", func() {
		var m Message
		f := &Feedback{EnvIndices: idx, StepIDs: steps, Obs: obs, Rewards: make([]float32, n), Terminated: flags, Truncated: flags}
		if err := EncodeFeedback(&m, f); err != nil {
			t.Error(err)
		}
	})
	// Sparse indices, too large for a bitset, take the other path.
	sparse := make([]int64, n)
	for i := range sparse {
		sparse[i] = int64(n-i) << 40
	}
	within1s(t, "EncodeInfer, sparse indices", func() {
		var m Message
		if err := EncodeInfer(&m, &Infer{EnvIndices: sparse, StepIDs: steps, Obs: obs}); err != nil {
			t.Error(err)
		}
	})
	// A duplicate at the far end is still found, in either case.
	for _, ids := range [][]int64{idx, sparse} {
		ids[n-1] = ids[0]
		var m Message
		err := EncodeInfer(&m, &Infer{EnvIndices: ids, StepIDs: steps, Obs: obs})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "appears twice") {
			t.Errorf("duplicate at the end: %v", err)
		}
	}
}

// TestZeroElementHugeShape: a shape whose element count is 0 because of a
// zero dimension is still refused when its other dimensions multiply past
// what numpy allows ("array is too big"), on both sides of the wire.
func TestZeroElementHugeShape(t *testing.T) {
	for _, c := range []struct {
		shape []int
		ok    bool
	}{
		{[]int{0, 1 << 40, 1 << 40}, false},
		{[]int{1 << 40, 0, 1 << 40}, false},
		{[]int{0, 1 << 62}, false},
		{[]int{0, 1 << 31, 1 << 30}, true}, // 2^61 elements: numpy allows it for one byte each
		{[]int{0, 3}, true},
		{[]int{0}, true},
	} {
		n, err := Elements(c.shape)
		if (err == nil) != c.ok || n != 0 {
			t.Errorf("Elements(%v) = %d, %v; want 0 and ok %v", c.shape, n, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "overflows") {
			t.Errorf("Elements(%v): %v", c.shape, err)
		}
		if n, err := ByteLen(Uint8, c.shape); (err == nil) != c.ok || n != 0 {
			t.Errorf("ByteLen(|u1, %v) = %d, %v; want 0 and ok %v", c.shape, n, err, c.ok)
		}
	}
	// The item size counts: 2^60 eight-byte items are 2^63 bytes.
	if _, err := ByteLen(Float64, []int{0, 1 << 60}); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("ByteLen(<f8, [0 2^60]): %v", err)
	}
	if _, err := ByteLen(Float64, []int{0, 1 << 58}); err != nil {
		t.Errorf("ByteLen(<f8, [0 2^58]): %v", err)
	}

	// Encoding: the caller's array is refused as invalid, naming its shape.
	huge := Array{DType: Float64, Shape: []int{0, 1 << 40, 1 << 40}}
	var m Message
	err := m.Array(&huge)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "[0 1099511627776 1099511627776]") {
		t.Errorf("Message.Array: %v", err)
	}
	obs := &Observation{States: []NamedArray{{Name: "s", Array: Array{DType: Float64, Shape: []int{1, 0, 1 << 60}}}}}
	err = EncodeInfer(&m, &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "[1 0 1152921504606846976]") {
		t.Errorf("EncodeInfer: %v", err)
	}

	// Decoding: the server's array is malformed.
	for _, b := range [][]byte{nd("<f8", nil, 0, 1<<40, 1<<40), nd("<f8", nil, 0, 1<<60), nd("|u1", nil, 1<<40, 1<<40, 0)} {
		var shape [MaxDims]int
		var a Array
		if _, err := DecodeArray(b, shape[:], &a); err == nil || !strings.Contains(err.Error(), "overflows") {
			t.Errorf("DecodeArray of shape %v: %v", a.Shape, err)
		}
	}
	var act Action
	err = act.Decode(actionMsg(mp(nil).m(1).s("action").val(nd("<f4", nil, 1<<40, 1<<40, 0))))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("Action.Decode: %v", err)
	}
}

// TestActionDecodeZeroDims: an action chunk with a zero dimension is
// malformed. Its data cannot bound the other dimensions, so [4e18, 1, 0]
// with no bytes would have a client step through 4e18 empty steps.
func TestActionDecodeZeroDims(t *testing.T) {
	for _, c := range []struct {
		shape []int64
		want  string
	}{
		{[]int64{0, 1, 2}, "H = 0"},
		{[]int64{1, 0, 2}, "n = 0"},
		{[]int64{2, 1, 0}, "da[0] = 0"},
		{[]int64{4e18, 1, 0}, "da[0] = 0"},
		{[]int64{0, 0}, "H = 0"},
		{[]int64{3, 2, 4, 0}, "da[1] = 0"},
	} {
		var act Action
		// |u1, so that even 4e18 passes the byte length bound.
		err := act.Decode(actionMsg(mp(nil).m(1).s("action").val(nd("|u1", nil, c.shape...))))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "action.data.action") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("shape %v: %v, want malformed action.data.action ... %s", c.shape, err, c.want)
		}
	}
	// With no zero dimension, the data's length bounds every dimension.
	for _, c := range []struct {
		shape []int64
		data  int
	}{
		{[]int64{4e18, 1, 1}, 4},
		{[]int64{1 << 40, 1}, 8},
		{[]int64{2, 1 << 40}, 8},
	} {
		var act Action
		err := act.Decode(actionMsg(mp(nil).m(1).s("action").val(nd("<f4", make([]byte, c.data), c.shape...))))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "action.data.action") {
			t.Errorf("shape %v with %d bytes: %v", c.shape, c.data, err)
		}
	}
}

// TestActionDecodeKeepsNoData: Action.Decode keeps no copy of the chunk's
// data. A 4 MiB action costs no Go memory of its size, on the full decode
// or on the shortcut for the next one of the same structure.
func TestActionDecodeKeepsNoData(t *testing.T) {
	const size = 4 << 20
	chunk := make([]byte, size)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	ids := []byte{3, 0, 0, 0, 0, 0, 0, 0}
	msg := actionMsg(mp(nil).m(2).s("env_ids").val(nd("<i8", ids, 1)).s("action").val(nd("<f4", chunk, 2, 1, size/8)))
	off := bytes.Index(msg, chunk)
	// Two messages of the same structure, the data at an aligned address.
	bufs := make([][]byte, 2)
	for i := range bufs {
		buf := make([]byte, len(msg)+8)
		pad := int((8 - (uintptr(off)+uintptr(unsafe.Pointer(&buf[0])))%8) % 8)
		bufs[i] = buf[pad : pad+len(msg)]
	}
	copy(bufs[0], msg)
	copy(bufs[1], msg)
	bufs[1][off] ^= 0xff

	var act Action
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := act.Decode(bufs[0])
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("decoding a %d-byte action allocated %d bytes", len(msg), grew)
	}
	if !bytes.Equal(act.Chunk.Data, chunk) || act.EnvIDs[0] != 3 {
		t.Fatal("wrong chunk or env_ids")
	}
	runtime.ReadMemStats(&before)
	err = act.Decode(bufs[1])
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("the same structure again allocated %d bytes", grew)
	}
	if act.Chunk.Data[0] != chunk[0]^0xff || !bytes.Equal(act.Chunk.Data[1:], chunk[1:]) || act.EnvIDs[0] != 3 || len(act.Chunk.Shape) != 3 {
		t.Fatal("the shortcut gave the wrong chunk")
	}
}

// TestBoolActionNormalised: a |b1 action byte of 2 reads as 1 (C's and
// C++'s bool hold 0 or 1; anything else is undefined behaviour there), and
// Convert from bool to bool does the same.
func TestBoolActionNormalised(t *testing.T) {
	var m Message
	chunk := Array{DType: Bool, Shape: []int{1, 1, 3}, Data: []byte{2, 0, 255}}
	if err := EncodeAction(&m, []int64{0}, &chunk); err != nil {
		t.Fatal(err)
	}
	var a Action
	for i := 0; i < 2; i++ { // the full decode, then the same-structure shortcut
		msg := m.AppendTo(nil)
		if err := a.Decode(msg); err != nil {
			t.Fatal(err)
		}
		if got := a.Chunk.Data; got[0] != 1 || got[1] != 0 || got[2] != 1 {
			t.Fatalf("decode %d: bool bytes %v, want [1 0 1]", i, got)
		}
	}
	dst := make([]byte, 3)
	if err := Convert(dst, Bool, []byte{7, 0, 1}, Bool, 3); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 1 || dst[1] != 0 || dst[2] != 1 {
		t.Fatalf("Convert bool to bool: %v, want [1 0 1]", dst)
	}
}

// manyKeysData is a metadata data map of n distinct 3-byte keys with nil
// values: 4 MiB / 5 of them fill a message of the default metadata cap.
func manyKeysData(n int) mp {
	data := mp(nil).m(n)
	for i := 0; i < n; i++ {
		data = data.s(string([]byte{byte(i), byte(i >> 8), byte(i >> 16)})).null()
	}
	return data
}

// TestMetadataManyKeys: among 838860 distinct keys none is taken for
// another (the hashes duplicateKey sorts may collide; the keys decide),
// and a key given again at the far end is found and named.
// BenchmarkMetadataManyKeys measures the cost.
func TestMetadataManyKeys(t *testing.T) {
	data := manyKeysData(4 << 20 / 5)
	if _, err := DecodeMetadata(mp(nil).m(2).s("message_type").s("metadata").s("data").val(data)); err != nil {
		t.Fatal(err)
	}
	data = append(data[:len(data)-5], mp(nil).s("\x00\x00\x00").null()...)
	_, err := DecodeMetadata(mp(nil).m(2).s("message_type").s("metadata").s("data").val(data))
	errContains(t, err, `key "\x00\x00\x00" appears twice`)
}

// taggedNest is a 1 MiB msgpack value: 62 nested maps {tag: true, "x":
// ...} around an array of nils.
func taggedNest(tag string) []byte {
	b := mp(nil)
	for i := 0; i < 62; i++ {
		b = b.m(2).k(tag).t(true).s("x")
	}
	n := 1<<20 - len(b) - 5
	b = b.raw(0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	return append(b, bytes.Repeat([]byte{0xc0}, n)...)
}

// TestJSONTaggedNest: a nest of maps tagged as numpy's that hold maps is
// shown as the maps it is, level by level. BenchmarkJSONTaggedNest
// measures that it costs what the same nest untagged does.
func TestJSONTaggedNest(t *testing.T) {
	for _, tag := range []string{"__npgeneric__", "__ndarray__"} {
		js, _, err := AppendJSON(nil, taggedNest(tag))
		if err != nil || !jsonValid(js) || bytes.Count(js, []byte(`{"`+tag+`":true,"x":`)) != 62 {
			t.Fatalf("%s: %v, %d bytes", tag, err, len(js))
		}
	}
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestTextCountBeforeStrings: an observation's text whose count is not
// the observation's rows is refused before its strings are made. A 4 MiB
// infer or feedback naming one env, its text 4M empty strings, took 64
// MiB (16 bytes a string header per byte on the wire) before the count
// was checked; as a <U1 array, 24 MiB. A server's memory per connection
// is meant to stay within about twice its message cap (refserver's
// MaxMessage).
func TestTextCountBeforeStrings(t *testing.T) {
	const n = 4 << 20
	strs := mp(nil).a(n).val(bytes.Repeat([]byte{0xa0}, n))
	utf32 := nd("<U1", bytes.Repeat([]byte{'a', 0, 0, 0}, n/4), n/4)
	one := nd("<i8", make([]byte, 8), 1)
	for name, text := range map[string]mp{"strings": strs, "<U1": utf32} {
		obs := mp(nil).m(3).s("images").m(0).s("states").m(0).s("text").val(text)
		infer := mp(nil).m(4).s("message_type").s("infer").s("data").val(obs).s("env_indices").val(one).s("step_ids").val(one)
		data := mp(nil).m(5).s("obs").val(obs).s("rewards").val(nd("<f4", make([]byte, 4), 1)).
			s("terminated").val(nd("|b1", []byte{0}, 1)).s("truncated").val(nd("|b1", []byte{0}, 1)).s("info").m(0)
		feedback := mp(nil).m(4).s("message_type").s("feedback").s("data").val(data).s("env_indices").val(one).s("step_ids").val(one)
		for kind, msg := range map[string][]byte{"infer": infer, "feedback": feedback} {
			var err error
			got := allocated(func() {
				if kind == "infer" {
					_, err = DecodeInfer(msg)
				} else {
					_, err = DecodeFeedback(msg)
				}
			})
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), kind+".data") || !strings.Contains(err.Error(), "strings, want 1 (one per row)") {
				t.Errorf("%s, text as %s: %v", kind, name, err)
			}
			if got > uint64(len(msg)) {
				t.Errorf("%s, text as %s: a %d-byte message took %d bytes (%.1fx) to refuse", kind, name, len(msg), got, float64(got)/float64(len(msg)))
			}
		}
	}
}

// envsMsgs is an infer and a feedback around env_indices ids and step_ids
// steps, with an observation of rows rows and no arrays.
func envsMsgs(ids, steps mp, rows int) map[string][]byte {
	obs := mp(nil).m(3).s("images").m(0).s("states").m(0).s("text").null()
	data := mp(nil).m(5).s("obs").val(obs).s("rewards").val(nd("<f4", make([]byte, 4*rows), int64(rows))).
		s("terminated").val(nd("|b1", make([]byte, rows), int64(rows))).s("truncated").val(nd("|b1", make([]byte, rows), int64(rows))).s("info").m(0)
	return map[string][]byte{
		"infer":    mp(nil).m(4).s("message_type").s("infer").s("data").val(obs).s("env_indices").val(ids).s("step_ids").val(steps),
		"feedback": mp(nil).m(4).s("message_type").s("feedback").s("data").val(data).s("env_indices").val(ids).s("step_ids").val(steps),
	}
}

// decodeClient is DecodeInfer or DecodeFeedback of msg, by kind.
func decodeClient(kind string, msg []byte) error {
	if kind == "infer" {
		_, err := DecodeInfer(msg)
		return err
	}
	_, err := DecodeFeedback(msg)
	return err
}

// TestStepIDsCountBeforeInt64s: step_ids of another length than
// env_indices are refused before they are made into int64s. A 4 MiB infer
// or feedback naming one env, its step_ids 4M |u1 entries, took 32 MiB (8
// bytes an entry, 1 on the wire) before the length was checked.
func TestStepIDsCountBeforeInt64s(t *testing.T) {
	const n = 4 << 20
	for kind, msg := range envsMsgs(nd("<i8", make([]byte, 8), 1), nd("|u1", make([]byte, n), n), 1) {
		var err error
		got := allocated(func() { err = decodeClient(kind, msg) })
		errContains(t, err, kind+".step_ids: has 4194304 entries for 1 env_indices")
		if got > uint64(len(msg)) {
			t.Errorf("%s: a %d-byte message took %d bytes (%.1fx) to refuse", kind, len(msg), got, float64(got)/float64(len(msg)))
		}
	}
}

// TestEnvIndicesNarrowDType: env_indices of more entries than their
// dtype has non-negative values (256 of |u1, 32768 of <i2) hold a bad
// index within the first that many + 1, and only those are made into
// int64s. A 4 MiB infer or feedback of 4M |u1 env_indices took 32 MiB (8
// bytes an entry, 1 on the wire) before the repeat was named. The first
// bad index is named as before, wherever it is.
func TestEnvIndicesNarrowDType(t *testing.T) {
	const n = 4 << 20
	one := nd("<i8", make([]byte, 8), 1)
	for kind, msg := range envsMsgs(nd("|u1", make([]byte, n), n), one, 1) {
		var err error
		got := allocated(func() { err = decodeClient(kind, msg) })
		errContains(t, err, kind+": env index 0 appears twice")
		if got > uint64(len(msg)) {
			t.Errorf("%s: a %d-byte message took %d bytes (%.1fx) to refuse", kind, len(msg), got, float64(got)/float64(len(msg)))
		}
	}
	seq := func(k int, then ...byte) []byte {
		b := make([]byte, 0, k+len(then))
		for i := 0; i < k; i++ {
			b = append(b, byte(i))
		}
		return append(b, then...)
	}
	i2 := func(vs ...int) []byte {
		b := make([]byte, 0, 2*len(vs))
		for _, v := range vs {
			b = append(b, byte(v), byte(v>>8))
		}
		return b
	}
	span := make([]int, 32770)
	for i := range span {
		span[i] = i // 32768 and on are negative as <i2
	}
	for _, c := range []struct {
		name string
		ids  mp
		want string
	}{
		{"|u1 0..255, 7", nd("|u1", seq(256, 7, 0, 0), 259), "env index 7 appears twice"},
		{"|u1 0..255, 255", nd("|u1", seq(256, 255, 1), 258), "env index 255 appears twice"},
		{"|i1 0..129", nd("|i1", seq(130), 130), "env_indices[128] is -128"},
		{"<i2 0..32769", nd("<i2", i2(span...), int64(len(span))), "env_indices[32768] is -32768"},
		{"|u1 0..255", nd("|u1", seq(256), 256), ""},
	} {
		rows := 256
		if c.want != "" {
			rows = 1
		}
		steps := nd("|u1", make([]byte, rows), int64(rows))
		for kind, msg := range envsMsgs(c.ids, steps, rows) {
			err := decodeClient(kind, msg)
			if c.want == "" {
				if err != nil {
					t.Errorf("%s, env_indices %s: %v", kind, c.name, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, env_indices %s: %v, want %q", kind, c.name, err, c.want)
			}
		}
	}
}
