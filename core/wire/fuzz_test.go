package wire

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// Fuzz targets for every decoder of network bytes. Run one with
//
//	go test -run=NONE -fuzz=FuzzDecodeArray -fuzztime=60s -parallel=1 ./core/wire
//
// They are seeded from testdata's Python vectors; crashers the fuzzer finds
// are kept under testdata/fuzz/<target>/ and rerun by plain `go test`.

// maxJSONGrowth bounds AppendJSON's output per input byte: the widest case
// is a <f2 element, 2 bytes spelled as up to 23 ("-5.960464477539063e-08,").
const maxJSONGrowth = 32

// seedVectors adds the testdata vectors whose names start with one of
// prefixes (all when none is given). Seeds stay under 1 kB: when a mutation
// of a larger one finds new coverage, the fuzzer spends up to a minute
// minimising it (the default -fuzzminimizetime), and a 3 kB infer vector
// held a 60 s run at a few thousand executions.
func seedVectors(f *testing.F, prefixes ...string) {
	for name, b := range allVectors(f) {
		if len(b) > 1024 {
			continue
		}
		ok := len(prefixes) == 0
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(name, p)
		}
		if ok {
			f.Add(b)
		}
	}
	// and a few hand-made oddities
	f.Add([]byte{})
	f.Add([]byte{0xc1})
	f.Add([]byte(nd(">f8", make([]byte, 8), 1, 1)))
	f.Add([]byte(nd("<U2", []byte{0, 0xd8, 0, 0, 0, 0, 0, 0}, 1)))
	f.Add(actionMsg(mp(nil).m(2).s("env_ids").val(nd(">u8", bytes.Repeat([]byte{0xff}, 8), 1)).s("action").val(nd(">f4", make([]byte, 4), 1, 1))))
	f.Add([]byte(mp(nil).m(1).m(1).m(1).i(1).i(2).i(3)))
}

func FuzzDecodeArray(f *testing.F) {
	seedVectors(f, "array_", "scalar_ndarray", "text_U")
	// Zero elements, and non-zero dimensions that overflow (refused) or
	// come close (accepted).
	f.Add([]byte(nd("<f8", nil, 0, 1<<40, 1<<40)))
	f.Add([]byte(nd("<f8", nil, 0, 1<<60)))
	f.Add([]byte(nd("|u1", nil, 1<<31, 1<<30, 0)))
	f.Add([]byte(nd("<f4", nil, 0, 3)))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		var shape [MaxDims]int
		var a Array
		rest, err := DecodeArray(in, shape[:], &a)
		if !bytes.Equal(in, b) {
			t.Fatal("DecodeArray wrote to its input")
		}
		in2 := append([]byte(nil), b...)
		var shape2 [MaxDims]int
		var h Array
		rest2, err2 := DecodeArrayHost(in2, shape2[:], &h)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("DecodeArray %v, DecodeArrayHost %v", err, err2)
		}
		if err != nil {
			if !bytes.Equal(in2, b) {
				t.Fatal("a failed DecodeArrayHost wrote to its input")
			}
			return
		}
		if !isSuffix(rest, in) || !isSuffix(rest2, in2) || len(rest) != len(rest2) {
			t.Fatal("rest is not a suffix of the input")
		}
		if !bytes.Equal(in2[len(in2)-len(rest2):], b[len(b)-len(rest):]) {
			t.Fatal("DecodeArrayHost wrote past the array")
		}
		if len(a.Shape) > MaxDims || len(a.Data) > len(b) || !within(a.Data, in) {
			t.Fatalf("shape %v, %d data bytes from %d input bytes", a.Shape, len(a.Data), len(b))
		}
		if err := a.Check(); err != nil {
			t.Fatalf("decoded array fails Check: %v", err)
		}
		if n, err := Elements(a.Shape); err != nil || n > len(a.Data) {
			t.Fatalf("%d elements from %d bytes (%v)", n, len(b), err)
		}
		// numpy's bound holds even with a zero dimension: the non-zero
		// dimensions times the item size fit.
		if _, _, ok := nonZeroProduct(a.Shape, a.DType.ItemSize()); !ok {
			t.Fatalf("shape %v of %s was accepted", a.Shape, a.DType)
		}
		// The host view: same shape, aligned, host order, the same values.
		if h.DType != hostDType(a.DType) || !slices.Equal(h.Shape, a.Shape) || !h.Aligned() || h.DType.Swapped() || !within(h.Data, in2) {
			t.Fatalf("host %s %v aligned %v", h.DType, h.Shape, h.Aligned())
		}
		want := append([]byte(nil), a.Data...)
		if a.DType.Swapped() {
			size := a.DType.ItemSize()
			if a.DType.Kind == 'U' {
				size = 4
			}
			swapInPlace(want, size)
		}
		if a.DType.Kind == 'b' { // the host view reads any non-zero bool byte as 1
			for i, v := range want {
				want[i] = boolByte(v != 0)
			}
		}
		if !bytes.Equal(h.Data, want) {
			t.Fatal("host data is not the byte-swapped data")
		}
		// Encoding the array again gives an array that decodes the same.
		var m Message
		if err := m.Array(&a); err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		m.Finish()
		var a2 Array
		var shape3 [MaxDims]int
		if _, err := DecodeArray(m.AppendTo(nil), shape3[:], &a2); err != nil {
			t.Fatalf("decoding the re-encoded array: %v", err)
		}
		if a2.DType != a.DType || !slices.Equal(a2.Shape, a.Shape) || !bytes.Equal(a2.Data, a.Data) {
			t.Fatal("round trip changed the array")
		}
		_ = a.Len()
		_ = a.RowBytes()
		if a.Len() > 0 && a.RowBytes() > 0 {
			_ = a.Row(a.Len() - 1)
		}
	})
}

func FuzzActionDecode(f *testing.F) {
	seedVectors(f, "action_")
	// Zero dimensions, refused: a huge H over an empty da, and the same
	// shapes with data.
	for _, shape := range [][]int64{{0, 1, 2}, {1, 0, 2}, {2, 1, 0}, {4e18, 1, 0}, {0, 0}, {1, 1, 1, 0}} {
		f.Add(actionMsg(mp(nil).m(1).s("action").val(nd("|u1", nil, shape...))))
		f.Add(actionMsg(mp(nil).m(2).s("env_ids").val(nd("<i8", make([]byte, 8), 1)).s("action").val(nd("<f4", make([]byte, 8), shape...))))
	}
	f.Add(actionMsg(mp(nil).m(1).s("action").val(nd("|u1", []byte{1}, 4e18, 1, 1))))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		var act Action
		err := act.Decode(in)
		if err != nil {
			return
		}
		c := &act.Chunk
		if err := c.Check(); err != nil {
			t.Fatalf("decoded chunk fails Check: %v", err)
		}
		if !c.Aligned() || c.DType.Swapped() || !c.DType.Numeric() || len(c.Shape) < 2 || !within(c.Data, in) {
			t.Fatalf("chunk %s %v aligned %v", c.DType, c.Shape, c.Aligned())
		}
		for i, d := range c.Shape {
			if d == 0 {
				t.Fatalf("chunk of shape %v accepted: dimension %d is zero", c.Shape, i)
			}
		}
		// The shortcut keeps the message without its data, nothing more.
		if len(act.around) != len(b)-len(c.Data) {
			t.Fatalf("kept %d bytes of a %d-byte message with %d bytes of data", len(act.around), len(b), len(c.Data))
		}
		if len(act.EnvIDs) > len(b) || len(c.Data) > len(b) {
			t.Fatalf("%d env ids, %d data bytes from %d input bytes", len(act.EnvIDs), len(c.Data), len(b))
		}
		_, _, _ = act.Horizon(), act.Envs(), act.ActionShape()
		// Decoding a fresh copy into the used Action gives the same result.
		ids := append([]int64(nil), act.EnvIDs...)
		hadIDs := act.EnvIDs != nil
		data := append([]byte(nil), c.Data...)
		shape := append([]int(nil), c.Shape...)
		if err := act.Decode(append([]byte(nil), b...)); err != nil {
			t.Fatalf("second decode: %v", err)
		}
		if (act.EnvIDs != nil) != hadIDs || len(act.EnvIDs) != len(ids) || !bytes.Equal(act.Chunk.Data, data) || !slices.Equal(act.Chunk.Shape, shape) {
			t.Fatal("decoding into a reused Action differs")
		}
		for i := range ids {
			if act.EnvIDs[i] != ids[i] {
				t.Fatal("env ids differ on reuse")
			}
		}
		// The same structure with other data takes the shortcut, which
		// moves and swaps the new data as a full decode does: flipping
		// every bit of the data as received flips every bit of the result.
		flipped := append([]byte(nil), b...)
		for i := act.sameOff; i < act.sameOff+act.sameData; i++ {
			flipped[i] ^= 0xff
		}
		if err := act.Decode(flipped); err != nil {
			t.Fatalf("decode with other data: %v", err)
		}
		for i, v := range act.Chunk.Data {
			if act.Chunk.DType.Kind == 'b' { // a bool byte reads as 0 or 1
				if want := boolByte(flipped[act.sameOff+i] != 0); v != want {
					t.Fatalf("bool byte %d is %#x, want %#x", i, v, want)
				}
				continue
			}
			if v != data[i]^0xff {
				t.Fatalf("data byte %d is %#x, want %#x", i, v, data[i]^0xff)
			}
		}
		if !slices.Equal(act.Chunk.Shape, shape) || (act.EnvIDs != nil) != hadIDs || len(act.EnvIDs) != len(ids) {
			t.Fatal("decoding other data changed the structure")
		}
	})
}

func FuzzDecodeMetadata(f *testing.F) {
	seedVectors(f, "metadata_")
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		md, err := DecodeMetadata(in)
		if err != nil {
			return
		}
		if len(md.Raw) > len(b) || (len(md.Raw) > 0 && within(md.Raw, in)) {
			t.Fatal("Raw is not a copy of part of the input")
		}
		if len(md.Features.Value) > len(b) {
			t.Fatalf("%d features from %d bytes", len(md.Features.Value), len(b))
		}
		for i := range in {
			in[i] = 0 // the result must not view the input
		}
		keys := md.Keys()
		if len(keys) > len(b) {
			t.Fatalf("%d keys from %d bytes", len(keys), len(b))
		}
		seen := make(map[string]bool, len(keys))
		for _, k := range keys {
			if seen[k] {
				t.Fatalf("key %q taken twice", k)
			}
			seen[k] = true
		}
		// One truth per key: the typed fields are what Lookup's values decode to.
		again := Metadata{Raw: md.Raw}
		for _, f := range &metaKeys {
			if raw, ok := md.Lookup(f.key); ok {
				f.decode(&again, raw)
			}
		}
		if !reflect.DeepEqual(&again, md) {
			t.Fatalf("typed fields %+v, Lookup's values %+v", md, &again)
		}
		for _, k := range keys {
			raw, ok := md.Lookup(k)
			if !ok || len(raw) == 0 || !within(raw, md.Raw) {
				t.Fatalf("Lookup(%q) failed", k)
			}
			js, ok, err := md.JSON(k)
			if !ok {
				t.Fatalf("JSON(%q) not found", k)
			}
			if len(js) > maxJSONGrowth*len(raw)+64 {
				t.Fatalf("JSON(%q): %d bytes from %d", k, len(js), len(raw))
			}
			if err == nil && !jsonValid(js) {
				t.Fatalf("JSON(%q) = %q is not valid", k, js)
			}
		}
		_ = md.Has("reuse-feedback-obs")
		_, _ = md.Lookup("")
	})
}

func FuzzDecodeText(f *testing.F) {
	seedVectors(f, "text_", "array_U")
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		strs, rest, err := DecodeText(in)
		if !bytes.Equal(in, b) {
			t.Fatal("DecodeText wrote to its input")
		}
		if err != nil {
			return
		}
		if !isSuffix(rest, in) {
			t.Fatal("rest is not a suffix of the input")
		}
		total := 0
		for _, s := range strs {
			total += len(s)
		}
		if len(strs) > len(b) || total > len(b) {
			t.Fatalf("%d strings of %d bytes from %d input bytes", len(strs), total, len(b))
		}
		if msgp.NextType(b) == msgp.MapType {
			for _, s := range strs {
				if !utf8.ValidString(s) || strings.HasSuffix(s, "\x00") {
					t.Fatalf("text element %q is not valid UTF-8 or keeps its padding", s)
				}
			}
		}
	})
}

func FuzzEnvelope(f *testing.F) {
	seedVectors(f, "action_", "metadata_", "infer_", "feedback_")
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, data, err := Envelope(b)
		if err != nil {
			return
		}
		if kind == nil || !within(kind, b) || (data != nil && !within(data, b)) {
			t.Fatal("kind or data is not a view of the message")
		}
		if data != nil {
			if rest, err := msgp.Skip(data); err != nil || len(rest) != 0 {
				t.Fatalf("data is not exactly one value: %v, %d left", err, len(rest))
			}
		}
	})
}

func FuzzAppendJSON(f *testing.F) {
	seedVectors(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		out, rest, err := AppendJSON(nil, in)
		if !bytes.Equal(in, b) {
			t.Fatal("AppendJSON wrote to its input")
		}
		if len(out) > maxJSONGrowth*len(b)+64 {
			t.Fatalf("%d bytes of JSON from %d bytes", len(out), len(b))
		}
		if err != nil {
			return
		}
		if !isSuffix(rest, in) {
			t.Fatal("rest is not a suffix of the input")
		}
		if !jsonValid(out) {
			t.Fatalf("invalid JSON %q", out)
		}
	})
}

func FuzzDecodeScalar(f *testing.F) {
	seedVectors(f, "scalar_", "array_f4_0d", "array_i8_0d")
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		s, rest, err := DecodeScalar(in)
		if !bytes.Equal(in, b) {
			t.Fatal("DecodeScalar wrote to its input")
		}
		if err != nil {
			return
		}
		if !isSuffix(rest, in) || len(rest) == len(in) {
			t.Fatal("rest is not a proper suffix of the input")
		}
		if !strings.ContainsRune("iufb", rune(s.Kind)) {
			t.Fatalf("kind %q", s.Kind)
		}
		if v, ok := s.AsInt(); ok && s.Kind == 'i' && v != s.Int {
			t.Fatal("AsInt differs from Int")
		}
	})
}

func FuzzParseDType(f *testing.F) {
	for _, s := range []string{"<f4", "|u1", "<U21", ">U3", "|b1", "<i8", ">f8", "=f4", "<f2", "|V8", "|O8", "<c16",
		"<M8[ns]", "|O", "<f+4", "<f04", "<U268435457", "<f", "", "|i2", "<f99999999999999999999"} {
		f.Add([]byte(s))
	}
	for _, a := range loadManifest(f).Arrays {
		f.Add([]byte(a.DType))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDType(b)
		if err != nil {
			if len(b) >= 2 && (b[1] == 'V' || b[1] == 'O' || b[1] == 'c') && !strings.Contains(err.Error(), "("+string(b[1])+")") {
				t.Fatalf("kind %c refused without naming it: %v", b[1], err)
			}
			return
		}
		if !strings.ContainsRune("buifU", rune(d.Kind)) || !strings.ContainsRune("<>|", rune(d.Order)) {
			t.Fatalf("ParseDType(%q) = %+v", b, d)
		}
		if d.ItemSize() <= 0 || d.ItemSize() > 4*maxTextWidth {
			t.Fatalf("ParseDType(%q): item size %d", b, d.ItemSize())
		}
		s := d.String()
		d2, err := ParseDType([]byte(s))
		if err != nil || d2 != d {
			t.Fatalf("ParseDType(%q) = %+v, whose String %q parses to %+v, %v", b, d, s, d2, err)
		}
		if d.Numeric() == (d.Kind == 'U') {
			t.Fatal("Numeric wrong")
		}
	})
}

// FuzzInferText sends arbitrary strings through EncodeInfer's <U text and
// reads them back with DecodeText.
func FuzzInferText(f *testing.F) {
	f.Add("pick up the red block\nstack", false)
	f.Add("héllo ☃\n\n🤖", false)
	f.Add("a\xffb\x00c\nd", true)
	f.Fuzz(func(t *testing.T, joined string, asStrings bool) {
		rows := strings.Split(joined, "\n")
		if len(rows) > 64 {
			rows = rows[:64]
		}
		env := make([]int64, len(rows))
		for i := range env {
			env[i] = int64(i)
		}
		in := &Infer{EnvIndices: env, StepIDs: make([]int64, len(rows)), Obs: &Observation{Text: rows, TextAsStrings: asStrings}}
		var m Message
		err := EncodeInfer(&m, in)
		if !utf8.ValidString(joined) {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("text that is not UTF-8: %v; want ErrInvalid", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		d := decodeInfer(t, m.AppendTo(nil))
		for i, s := range rows {
			want := s
			if !asStrings {
				want = strings.TrimRight(s, "\x00") // numpy strips trailing NULs
			}
			if d.obs.text[i] != want {
				t.Fatalf("row %d: %q came back as %q", i, want, d.obs.text[i])
			}
		}
	})
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// FuzzDecodeClientMessage feeds arbitrary bytes to the decoders of the
// messages a client sends (DecodeInfer, DecodeFeedback): a server reads
// them from the network (internal/refserver, the bench server), and
// `plugrl ledger` from files anyone may hand it. Nothing may panic; what
// decodes must hold SPEC 5.2/5.4's shape (n >= 1 unique, non-negative
// env indices, as many step ids, observation rows matching); and the
// memory taken follows the bytes given (at most 32 times them and 1 MiB),
// never a count the bytes claim.
func FuzzDecodeClientMessage(f *testing.F) {
	seedVectors(f, "infer_", "feedback_")
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		in, inErr := DecodeInfer(b)
		fb, fbErr := DecodeFeedback(b)
		runtime.ReadMemStats(&after)
		if took, most := after.TotalAlloc-before.TotalAlloc, uint64(32*len(b)+1<<20); took > most {
			t.Fatalf("decoding %d bytes took %d bytes of memory, over %d", len(b), took, most)
		}
		if inErr == nil {
			checkEnvs(t, "infer", in.EnvIndices, in.StepIDs)
			if in.Reuse != nil && len(in.Reuse) != len(in.EnvIndices) {
				t.Fatalf("infer: %d reuse flags for %d envs", len(in.Reuse), len(in.EnvIndices))
			}
			checkRows(t, "infer", &in.Obs, in.Sent())
		}
		if fbErr == nil {
			checkEnvs(t, "feedback", fb.EnvIndices, fb.StepIDs)
			n := len(fb.EnvIndices)
			if len(fb.Rewards) != n || len(fb.Terminated) != n || len(fb.Truncated) != n {
				t.Fatalf("feedback: %d rewards, %d terminated, %d truncated for %d envs", len(fb.Rewards), len(fb.Terminated), len(fb.Truncated), n)
			}
			checkRows(t, "feedback", &fb.Obs, n)
		}
	})
}

// checkEnvs fails t unless idx holds n >= 1 unique, non-negative env
// indices and steps n step ids.
func checkEnvs(t *testing.T, kind string, idx, steps []int64) {
	t.Helper()
	if len(idx) == 0 || len(steps) != len(idx) {
		t.Fatalf("%s decoded with %d env indices and %d step ids", kind, len(idx), len(steps))
	}
	seen := make(map[int64]bool, len(idx))
	for _, e := range idx {
		if e < 0 || seen[e] {
			t.Fatalf("%s decoded with env indices %v: want unique, non-negative ones", kind, idx)
		}
		seen[e] = true
	}
}

// checkRows fails t unless every array and the text of o has rows rows
// (an observation with none may have any: Rows is -1).
func checkRows(t *testing.T, kind string, o *Observation, rows int) {
	t.Helper()
	for _, g := range [2][]NamedArray{o.Images, o.States} {
		for _, a := range g {
			if a.Array.Len() != rows {
				t.Fatalf("%s decoded with array %q of shape %v for %d rows", kind, a.Name, a.Array.Shape, rows)
			}
		}
	}
	if o.Text != nil && len(o.Text) != rows {
		t.Fatalf("%s decoded with %d strings for %d rows", kind, len(o.Text), rows)
	}
}
