package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
)

// decodedObs is an observation read back with the package's decoders.
type decodedObs struct {
	images, states map[string]Array
	imageOrder     []string
	stateOrder     []string
	text           []string
}

// readMap reads a str-keyed map, calling f for each value.
func readMap(t *testing.T, b []byte, f func(key string, v []byte) []byte) []byte {
	t.Helper()
	n, rest, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint32(0); i < n; i++ {
		if msgp.NextType(rest) != msgp.StrType {
			t.Fatalf("schema key is a %s, want str (SPEC 3.1)", msgp.NextType(rest))
		}
		var k string
		if k, rest, err = msgp.ReadStringBytes(rest); err != nil {
			t.Fatal(err)
		}
		rest = f(k, rest)
	}
	return rest
}

func readArray(t *testing.T, b []byte) (Array, []byte) {
	t.Helper()
	shape := make([]int, MaxDims)
	var a Array
	rest, err := DecodeArray(b, shape, &a)
	if err != nil {
		t.Fatal(err)
	}
	return a, rest
}

func readInt64s(t *testing.T, b []byte) ([]int64, []byte) {
	t.Helper()
	a, rest := readArray(t, b)
	if a.DType != Int64 || len(a.Shape) != 1 {
		t.Fatalf("got %s %v, want <i8 [n]", a.DType, a.Shape)
	}
	out := make([]int64, a.Shape[0])
	for i := range out {
		out[i] = elementScalar(a.DType, a.Data[8*i:]).Int
	}
	return out, rest
}

func readBools(t *testing.T, b []byte) ([]bool, []byte) {
	t.Helper()
	a, rest := readArray(t, b)
	if a.DType != Bool || len(a.Shape) != 1 {
		t.Fatalf("got %s %v, want |b1 [n]", a.DType, a.Shape)
	}
	out := make([]bool, len(a.Data))
	for i, v := range a.Data {
		if v > 1 {
			t.Fatalf("bool byte %d", v)
		}
		out[i] = v == 1
	}
	return out, rest
}

func readObs(t *testing.T, b []byte) (*decodedObs, []byte) {
	t.Helper()
	o := &decodedObs{images: map[string]Array{}, states: map[string]Array{}}
	var keys []string
	rest := readMap(t, b, func(k string, v []byte) []byte {
		keys = append(keys, k)
		switch k {
		case "images", "states":
			return readMap(t, v, func(name string, v []byte) []byte {
				a, rest := readArray(t, v)
				if k == "images" {
					o.images[name] = a
					o.imageOrder = append(o.imageOrder, name)
				} else {
					o.states[name] = a
					o.stateOrder = append(o.stateOrder, name)
				}
				return rest
			})
		case "text":
			txt, rest, err := DecodeText(v)
			if err != nil {
				t.Fatal(err)
			}
			o.text = txt
			return rest
		}
		t.Fatalf("observation key %q", k)
		return nil
	})
	if !reflect.DeepEqual(keys, []string{"images", "states", "text"}) {
		t.Fatalf("observation keys %q", keys)
	}
	return o, rest
}

// checkObs compares a decoded observation with rows of the source.
func checkObs(t *testing.T, got *decodedObs, src *Observation, rows []int) {
	t.Helper()
	for gi, g := range [2][]NamedArray{src.Images, src.States} {
		dec, order := got.images, got.imageOrder
		if gi == 1 {
			dec, order = got.states, got.stateOrder
		}
		if len(order) != len(g) {
			t.Fatalf("%d arrays, want %d", len(order), len(g))
		}
		for i, na := range g {
			if order[i] != na.Name {
				t.Fatalf("array %d is %q, want %q", i, order[i], na.Name)
			}
			a := dec[na.Name]
			if a.DType != na.Array.DType || a.Shape[0] != len(rows) || !reflect.DeepEqual(a.Shape[1:], na.Array.Shape[1:]) {
				t.Fatalf("%s: %s %v", na.Name, a.DType, a.Shape)
			}
			for j, r := range rows {
				if !bytes.Equal(a.Row(j), na.Array.Row(r)) {
					t.Fatalf("%s row %d is not source row %d", na.Name, j, r)
				}
			}
		}
	}
	if len(got.text) != len(rows) {
		t.Fatalf("%d strings for %d rows", len(got.text), len(rows))
	}
	for j, r := range rows {
		want := ""
		if src.Text != nil {
			want = src.Text[r]
		}
		if got.text[j] != want {
			t.Fatalf("text %d = %q, want %q", j, got.text[j], want)
		}
	}
}

type decodedInfer struct {
	kind           string
	obs            *decodedObs
	env, steps     []int64
	reuse          []bool
	hasReuse       bool
	keys           []string
	dataLen, total int
}

func decodeInfer(t *testing.T, msg []byte) *decodedInfer {
	t.Helper()
	var d decodedInfer
	rest := readMap(t, msg, func(k string, v []byte) []byte {
		d.keys = append(d.keys, k)
		var rest []byte
		var err error
		switch k {
		case "message_type":
			d.kind, rest, err = msgp.ReadStringBytes(v)
			if err != nil {
				t.Fatal(err)
			}
		case "data":
			d.obs, rest = readObs(t, v)
		case "env_indices":
			d.env, rest = readInt64s(t, v)
		case "step_ids":
			d.steps, rest = readInt64s(t, v)
		case "reuse":
			d.hasReuse = true
			d.reuse, rest = readBools(t, v)
		default:
			t.Fatalf("infer key %q", k)
		}
		return rest
	})
	if len(rest) != 0 {
		t.Fatalf("%d trailing bytes", len(rest))
	}
	return &d
}

func TestInferRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var m Message
	for iter := 0; iter < 200; iter++ {
		n := 1 + rng.Intn(5)
		rowsHave := n
		in := &Infer{}
		for _, v := range rng.Perm(1000)[:n] {
			in.EnvIndices = append(in.EnvIndices, int64(v))
		}
		for i := 0; i < n; i++ {
			in.StepIDs = append(in.StepIDs, rng.Int63n(1<<40))
		}
		if rng.Intn(2) == 0 {
			in.Reuse = make([]bool, n)
			for i := range in.Reuse {
				in.Reuse[i] = rng.Intn(3) == 0
			}
		}
		mode := rng.Intn(3)
		if mode == 2 {
			rowsHave = n + rng.Intn(3)
			in.ObsRows = make([]int, n)
			for i := range in.ObsRows {
				in.ObsRows[i] = rng.Intn(rowsHave)
			}
		}
		obs := &Observation{TextAsStrings: rng.Intn(4) == 0}
		for c := rng.Intn(3); c > 0; c-- {
			obs.Images = append(obs.Images, NamedArray{fmt.Sprintf("cam%d", c), image(rowsHave, 1+rng.Intn(3), 1+rng.Intn(200), 3, rng.Intn(256))})
		}
		for c := rng.Intn(3); c > 0; c-- {
			obs.States = append(obs.States, NamedArray{fmt.Sprintf("s%d", c), state(rowsHave, rng.Intn(4), rng.Intn(9))})
		}
		if rng.Intn(4) != 0 {
			pool := []string{"", "a", "pick up the red block", "héllo ☃", "🤖🤖", "\x00x"} // invalid UTF-8: TestInvalidUTF8Refused
			for i := 0; i < rowsHave; i++ {
				obs.Text = append(obs.Text, pool[rng.Intn(len(pool))])
			}
		}
		in.Obs = obs
		if err := EncodeInfer(&m, in); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		msg := m.AppendTo(nil)
		d := decodeInfer(t, msg)
		wantKeys := []string{"message_type", "data", "env_indices", "step_ids"}
		if in.Reuse != nil {
			wantKeys = append(wantKeys, "reuse")
		}
		if !reflect.DeepEqual(d.keys, wantKeys) || d.kind != TypeInfer {
			t.Fatalf("keys %q kind %q", d.keys, d.kind)
		}
		if !reflect.DeepEqual(d.env, in.EnvIndices) || !reflect.DeepEqual(d.steps, in.StepIDs) {
			t.Fatalf("env %v steps %v", d.env, d.steps)
		}
		if in.Reuse != nil && !reflect.DeepEqual(d.reuse, in.Reuse) {
			t.Fatalf("reuse %v, want %v", d.reuse, in.Reuse)
		}
		var rows []int
		for i := 0; i < n; i++ {
			if in.Reuse != nil && in.Reuse[i] {
				continue
			}
			if in.ObsRows != nil {
				rows = append(rows, in.ObsRows[i])
			} else {
				rows = append(rows, i)
			}
		}
		// A text that is not valid UTF-8 goes out with U+FFFD, as Python's
		// "replace" would; and numpy strips trailing NULs only.
		src := *obs
		if src.Text != nil && !obs.TextAsStrings {
			src.Text = nil
			for _, s := range obs.Text {
				src.Text = append(src.Text, string([]rune(s)))
			}
		}
		checkObs(t, d.obs, &src, rows)
		// and the whole message converts to JSON
		if js, rest, err := AppendJSON(nil, msg); err != nil || len(rest) != 0 || !jsonValid(js) {
			t.Fatalf("AppendJSON: %v", err)
		}
	}
}

func TestFeedbackRoundTrip(t *testing.T) {
	f := vectorFeedbacks()["feedback_episode.msgpack"]
	var m Message
	if err := EncodeFeedback(&m, f); err != nil {
		t.Fatal(err)
	}
	msg := m.AppendTo(nil)
	var keys, dataKeys, epKeys []string
	readMap(t, msg, func(k string, v []byte) []byte {
		keys = append(keys, k)
		switch k {
		case "message_type":
			s, rest, _ := msgp.ReadStringBytes(v)
			if s != TypeFeedback {
				t.Fatalf("message_type %q", s)
			}
			return rest
		case "env_indices", "step_ids":
			got, rest := readInt64s(t, v)
			want := f.EnvIndices
			if k == "step_ids" {
				want = f.StepIDs
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %v", k, got)
			}
			return rest
		}
		return readMap(t, v, func(k string, v []byte) []byte {
			dataKeys = append(dataKeys, k)
			switch k {
			case "obs":
				o, rest := readObs(t, v)
				checkObs(t, o, f.Obs, []int{0, 1, 2})
				return rest
			case "rewards":
				a, rest := readArray(t, v)
				if a.DType != Float32 || !bytes.Equal(a.Data, BytesOf(f.Rewards)) {
					t.Fatalf("rewards %s %x", a.DType, a.Data)
				}
				return rest
			case "terminated", "truncated":
				got, rest := readBools(t, v)
				want := f.Terminated
				if k == "truncated" {
					want = f.Truncated
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s %v", k, got)
				}
				return rest
			case "info":
				return readMap(t, v, func(k string, v []byte) []byte {
					if k != "episode" {
						t.Fatalf("info key %q", k)
					}
					return readMap(t, v, func(k string, v []byte) []byte {
						epKeys = append(epKeys, k)
						switch k {
						case "r":
							a, rest := readArray(t, v)
							if a.DType != Float64 || !bytes.Equal(a.Data, BytesOf(f.Episode.Return)) {
								t.Fatalf("r %s", a.DType)
							}
							return rest
						case "l":
							got, rest := readInt64s(t, v)
							if !reflect.DeepEqual(got, f.Episode.Length) {
								t.Fatalf("l %v", got)
							}
							return rest
						}
						got, rest := readBools(t, v)
						want := f.Episode.Mask
						if k == "s" {
							want = f.Episode.Success
						}
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("%s %v", k, got)
						}
						return rest
					})
				})
			}
			t.Fatalf("data key %q", k)
			return nil
		})
	})
	if !reflect.DeepEqual(keys, []string{"message_type", "env_indices", "step_ids", "data"}) ||
		!reflect.DeepEqual(dataKeys, []string{"obs", "rewards", "terminated", "truncated", "info"}) ||
		!reflect.DeepEqual(epKeys, []string{"r", "l", "s", "mask"}) {
		t.Fatalf("keys %q %q %q", keys, dataKeys, epKeys)
	}
}

// Every dtype goes through Message.Array and comes back from DecodeArray.
func TestArrayRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	dtypes := []string{"|b1", "|u1", "<u2", "<u4", "<u8", "|i1", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8",
		">u2", ">i4", ">f8", "<U1", "<U7", ">U3"}
	for _, ds := range dtypes {
		d := MustParseDType(ds)
		for _, shape := range [][]int{{}, {0}, {3}, {2, 0, 4}, {2, 3}, {1, 1, 1, 1, 1}, {129, 2}} {
			n, _ := Elements(shape)
			data := make([]byte, n*d.ItemSize())
			rng.Read(data)
			a := Array{DType: d, Shape: shape, Data: data}
			var m Message
			if err := m.Array(&a); err != nil {
				t.Fatal(err)
			}
			m.Finish()
			msg := m.AppendTo(nil)
			got, rest := readArray(t, msg)
			if len(rest) != 0 || got.DType != d || !reflect.DeepEqual(append([]int{}, got.Shape...), append([]int{}, shape...)) || !bytes.Equal(got.Data, data) {
				t.Fatalf("%s %v: got %s %v", ds, shape, got.DType, got.Shape)
			}
			if n > 0 && m.Segments() != 3 {
				t.Fatalf("%s %v: %d segments, want head, data, tail", ds, shape, m.Segments())
			}
		}
	}
}

// The encoder references array memory instead of copying it.
func TestMessageReferencesData(t *testing.T) {
	in := vectorInfers()["infer_basic.msgpack"][0]
	var m Message
	if err := EncodeInfer(&m, in); err != nil {
		t.Fatal(err)
	}
	before := m.AppendTo(nil)
	img := in.Obs.Images[0].Array.Data
	found := false
	for i := 0; i < m.Segments(); i++ {
		s := m.Segment(i)
		if len(s) > 0 && unsafe.SliceData(s) == unsafe.SliceData(img) {
			found = true
		}
	}
	if !found {
		t.Fatal("the image is not referenced by a segment")
	}
	img[0] ^= 0xff
	after := m.AppendTo(nil)
	if bytes.Equal(before, after) {
		t.Fatal("changing the image did not change the message")
	}
	img[0] ^= 0xff
	total := 0
	for i := 0; i < m.Segments(); i++ {
		total += len(m.Segment(i))
	}
	if total != m.Len() || m.Len() != len(before) {
		t.Fatalf("segments %d, Len %d, bytes %d", total, m.Len(), len(before))
	}
}

// Reused rows are sent as runs: rows 0-1 of the image are one segment.
func TestRowsArrayRuns(t *testing.T) {
	a := image(5, 1, 1, 1, 0)
	var m Message
	if err := m.rowsArray(&a, []int{0, 1, 3, 3, 4, 2}); err != nil {
		t.Fatal(err)
	}
	m.Finish()
	got, _ := readArray(t, m.AppendTo(nil))
	want := []byte{a.Data[0], a.Data[1], a.Data[3], a.Data[3], a.Data[4], a.Data[2]}
	if !bytes.Equal(got.Data, want) || got.Shape[0] != 6 {
		t.Fatalf("data %v shape %v", got.Data, got.Shape)
	}
	ext := 0
	for i := range m.segs {
		if m.segs[i].ext != nil {
			ext++
		}
	}
	if ext != 4 { // [0,1] [3] [3,4] [2]
		t.Fatalf("%d referenced runs, want 4", ext)
	}
}

func TestBoolsNormalised(t *testing.T) {
	flags := []bool{true, false, true}
	*(*byte)(unsafe.Pointer(&flags[2])) = 7 // a C caller's "true"
	f := &Feedback{EnvIndices: []int64{0, 1, 2}, StepIDs: make([]int64, 3), Obs: &Observation{},
		Rewards: make([]float32, 3), Terminated: flags, Truncated: flags}
	var m Message
	if err := EncodeFeedback(&m, f); err != nil {
		t.Fatal(err)
	}
	msg := m.AppendTo(nil)
	if !bytes.Contains(msg, []byte{0xc4, 3, 1, 0, 1}) || bytes.Contains(msg, []byte{7}) {
		t.Fatalf("bools not normalised: %x", msg)
	}
}

func TestMessageInt(t *testing.T) {
	// Non-negative ints take msgpack-python's unsigned forms.
	for _, c := range []struct {
		v    int64
		want []byte
	}{
		{0, []byte{0}}, {127, []byte{0x7f}}, {128, []byte{0xcc, 0x80}}, {255, []byte{0xcc, 0xff}},
		{256, []byte{0xcd, 1, 0}}, {65536, []byte{0xce, 0, 1, 0, 0}}, {1 << 32, []byte{0xcf, 0, 0, 0, 1, 0, 0, 0, 0}},
		{-1, []byte{0xff}}, {-32, []byte{0xe0}}, {-33, []byte{0xd0, 0xdf}}, {-129, []byte{0xd1, 0xff, 0x7f}},
		{math.MinInt64, []byte{0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	} {
		var m Message
		m.Int(c.v)
		m.Finish()
		if got := m.AppendTo(nil); !bytes.Equal(got, c.want) {
			t.Errorf("Int(%d) = %x, want %x", c.v, got, c.want)
		}
	}
	var m Message
	m.Map(2)
	m.Str("a")
	m.Float(1.5)
	m.Str("b")
	m.List(3)
	m.Bool(true)
	m.Nil()
	m.Raw([]byte{0x05})
	m.Finish()
	js, _, err := AppendJSON(nil, m.AppendTo(nil))
	if err != nil || string(js) != `{"a":1.5,"b":[true,null,5]}` {
		t.Fatalf("%s %v", js, err)
	}
}

func TestTextWidthAndUTF32(t *testing.T) {
	if w := TextWidth(nil); w != 1 {
		t.Fatalf("TextWidth(nil) = %d", w)
	}
	if w := TextWidth([]string{"ab", "日本語x", ""}); w != 4 {
		t.Fatalf("TextWidth = %d", w)
	}
	got := AppendUTF32([]byte{9}, "é🤖", 3)
	want := []byte{9}
	for _, r := range []uint32{0xe9, 0x1f916, 0} {
		var w [4]byte
		if NativeOrder == '<' {
			w = [4]byte{byte(r), byte(r >> 8), byte(r >> 16), byte(r >> 24)}
		} else {
			w = [4]byte{byte(r >> 24), byte(r >> 16), byte(r >> 8), byte(r)}
		}
		want = append(want, w[:]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendUTF32 = %x, want %x", got, want)
	}
	if got := AppendUTF32(nil, "abcdef", 2); len(got) != 8 {
		t.Fatalf("truncation: %d bytes", len(got))
	}
}

func TestEncodeErrors(t *testing.T) {
	img := func(n int) NamedArray { return NamedArray{"cam", image(n, 1, 1, 3, 0)} }
	obs2 := &Observation{Images: []NamedArray{img(2)}}
	badLen := &Observation{States: []NamedArray{{"s", Array{DType: Float32, Shape: []int{2}, Data: make([]byte, 7)}}}}
	for _, c := range []struct {
		name string
		in   *Infer
		want string
	}{
		{"no envs", &Infer{Obs: obs2}, "no env indices"},
		{"step ids", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0}, Obs: obs2}, "1 step_ids for 2"},
		{"reuse length", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Reuse: []bool{true}, Obs: obs2}, "1 reuse flags"},
		{"negative env", &Infer{EnvIndices: []int64{0, -1}, StepIDs: []int64{0, 0}, Obs: obs2}, "non-negative"},
		{"duplicate env", &Infer{EnvIndices: []int64{4, 4}, StepIDs: []int64{0, 0}, Obs: obs2}, "appears twice"},
		{"nil obs", &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}}, "no observation"},
		{"image dtype", &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &Observation{Images: []NamedArray{{"c", state(1, 4, 0)}}}}, "want |u1 [n, h, w, c]"},
		{"image rank", &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &Observation{Images: []NamedArray{{"c", Array{DType: Uint8, Shape: []int{1, 3}, Data: make([]byte, 3)}}}}}, "want |u1 [n, h, w, c]"},
		{"state text", &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &Observation{States: []NamedArray{{"s", Array{DType: MustParseDType("<U1"), Shape: []int{1}, Data: make([]byte, 4)}}}}}, "want a numeric array"},
		{"state 0-d", &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &Observation{States: []NamedArray{{"s", Array{DType: Float64, Data: make([]byte, 8)}}}}}, "want a numeric array"},
		{"state bad length", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: badLen}, "needs 8 bytes, data has 7"},
		{"leading dims differ", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: &Observation{Images: []NamedArray{img(2)}, States: []NamedArray{{"s", state(3, 1, 0)}}}}, "leading dimension 3"},
		{"duplicate names", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: &Observation{Images: []NamedArray{img(2), img(2)}}}, `two arrays named "cam"`},
		{"text length", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: &Observation{Images: []NamedArray{img(2)}, Text: []string{"a"}}}, "text has 1 strings"},
		{"rows mismatch", &Infer{EnvIndices: []int64{0, 1, 2}, StepIDs: []int64{0, 0, 0}, Obs: obs2}, "want 3 (one per env)"},
		{"rows mismatch reuse", &Infer{EnvIndices: []int64{0, 1, 2}, StepIDs: []int64{0, 0, 0}, Reuse: []bool{true, true, false}, Obs: obs2}, "or 1 (one per env not reused)"},
		{"obs rows length", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, ObsRows: []int{0}, Obs: obs2}, "1 observation rows for 2 envs"},
		{"obs row out of range", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, ObsRows: []int{0, 2}, Obs: obs2}, "row 2 is outside"},
		{"obs row negative", &Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, ObsRows: []int{-1, 0}, Obs: obs2}, "row -1 is outside"},
	} {
		var m Message
		err := EncodeInfer(&m, c.in)
		errContains(t, err, c.want)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v is not ErrInvalid", c.name, err)
		}
	}
	good := func() *Feedback {
		return &Feedback{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs2,
			Rewards: []float32{0, 0}, Terminated: []bool{false, false}, Truncated: []bool{false, false}}
	}
	for _, c := range []struct {
		name string
		mod  func(*Feedback)
		want string
	}{
		{"no envs", func(f *Feedback) { f.EnvIndices = nil }, "no env indices"},
		{"step ids", func(f *Feedback) { f.StepIDs = nil }, "0 step_ids"},
		{"rewards", func(f *Feedback) { f.Rewards = f.Rewards[:1] }, "1 rewards"},
		{"terminated", func(f *Feedback) { f.Terminated = nil }, "0 terminated"},
		{"truncated", func(f *Feedback) { f.Truncated = []bool{true, true, true} }, "3 truncated"},
		{"duplicate env", func(f *Feedback) { f.EnvIndices = []int64{1, 1} }, "appears twice"},
		{"nil obs", func(f *Feedback) { f.Obs = nil }, "no observation"},
		{"bad obs", func(f *Feedback) { f.Obs = badLen }, "needs 8 bytes"},
		{"obs rows", func(f *Feedback) { f.Obs = &Observation{Images: []NamedArray{img(3)}} }, "observation has 3 rows"},
		{"episode lengths", func(f *Feedback) {
			f.Episode = &Episode{Return: []float64{1}, Length: []int64{1, 2}, Mask: []bool{true, true}}
		}, "episode stats need 2"},
		{"episode success", func(f *Feedback) {
			f.Episode = &Episode{Return: []float64{1, 2}, Length: []int64{1, 2}, Mask: []bool{true, true}, Success: []bool{true}}
		}, "success 1"},
	} {
		f := good()
		c.mod(f)
		var m Message
		err := EncodeFeedback(&m, f)
		errContains(t, err, c.want)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v is not ErrInvalid", c.name, err)
		}
	}
	var m Message
	if err := m.Array(&Array{DType: Float32, Shape: []int{3}, Data: make([]byte, 8)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Message.Array of a bad array: %v", err)
	}
}

// A failed encode leaves a Message that encodes the next message correctly.
func TestMessageReuseAfterError(t *testing.T) {
	var m Message
	in := vectorInfers()["infer_basic.msgpack"][0]
	if err := EncodeInfer(&m, in); err != nil {
		t.Fatal(err)
	}
	want := m.AppendTo(nil)
	if err := EncodeInfer(&m, &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &Observation{Images: []NamedArray{{"x", state(1, 1, 0)}}}}); err == nil {
		t.Fatal("want an error")
	}
	if err := EncodeInfer(&m, in); err != nil {
		t.Fatal(err)
	}
	if got := m.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatal("a reused Message encodes differently")
	}
}

// --- allocations and benchmarks -------------------------------------------------

func benchInfer() *Infer {
	n := 8
	return &Infer{
		EnvIndices: []int64{0, 1, 2, 3, 4, 5, 6, 7},
		StepIDs:    make([]int64, n),
		Obs: &Observation{
			Images: []NamedArray{{"front", image(n, 224, 224, 3, 1)}, {"wrist", image(n, 96, 96, 3, 2)}},
			States: []NamedArray{{"qpos", state(n, 14, 0)}},
			Text:   []string{"pick up the red block", "stack", "open the drawer", "", "a", "b", "c", "push the button"},
		},
		Reuse: []bool{false, true, false, false, true, false, false, false},
	}
}

func benchFeedback() *Feedback {
	in := benchInfer()
	n := len(in.EnvIndices)
	return &Feedback{
		EnvIndices: in.EnvIndices, StepIDs: in.StepIDs, Obs: in.Obs,
		Rewards: make([]float32, n), Terminated: make([]bool, n), Truncated: make([]bool, n),
		Episode: &Episode{Return: make([]float64, n), Length: make([]int64, n), Success: make([]bool, n), Mask: make([]bool, n)},
	}
}

func TestEncodeAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -cover and -race")
	}
	var m Message
	in := benchInfer()
	if err := EncodeInfer(&m, in); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() {
		if err := EncodeInfer(&m, in); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("EncodeInfer into a reused Message: %v allocations", a)
	}
	in.Obs.TextAsStrings = true
	if a := testing.AllocsPerRun(100, func() { _ = EncodeInfer(&m, in) }); a != 0 {
		t.Errorf("EncodeInfer, text as strings: %v allocations", a)
	}
	f := benchFeedback()
	if err := EncodeFeedback(&m, f); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() {
		if err := EncodeFeedback(&m, f); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("EncodeFeedback into a reused Message: %v allocations", a)
	}
	f.Episode = nil
	if a := testing.AllocsPerRun(100, func() { _ = EncodeFeedback(&m, f) }); a != 0 {
		t.Errorf("EncodeFeedback without episode: %v allocations", a)
	}
}

func TestDecodeAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -cover and -race")
	}
	for _, name := range []string{"action_f4.msgpack", "action_f8_be.msgpack", "action_f4_no_ids.msgpack", "action_f2.msgpack"} {
		raw := readVector(t, name)
		buf := make([]byte, len(raw)+1)
		var act Action
		if err := act.Decode(append(buf[:1], raw...)[1:]); err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(100, func() {
			copy(buf[1:], raw) // odd offset: the data is moved every time
			if err := act.Decode(buf[1:]); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("Action.Decode(%s) of a reused buffer: %v allocations", name, a)
		}
	}
	raw := readVector(t, "array_f8_be.msgpack")
	var shape [MaxDims]int
	var arr Array
	buf := make([]byte, len(raw))
	if a := testing.AllocsPerRun(100, func() {
		copy(buf, raw)
		if _, err := DecodeArrayHost(buf, shape[:], &arr); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("DecodeArrayHost: %v allocations", a)
	}
	sraw := readVector(t, "scalar_int64.msgpack")
	if a := testing.AllocsPerRun(100, func() { _, _, _ = DecodeScalar(sraw) }); a != 0 {
		t.Errorf("DecodeScalar: %v allocations", a)
	}
	mraw := readVector(t, "metadata_full.msgpack")
	if a := testing.AllocsPerRun(100, func() { _, _, _ = Envelope(mraw) }); a != 0 {
		t.Errorf("Envelope: %v allocations", a)
	}
}

func BenchmarkEncodeInfer(b *testing.B) {
	var m Message
	in := benchInfer()
	b.ReportAllocs()
	for b.Loop() {
		if err := EncodeInfer(&m, in); err != nil {
			b.Fatal(err)
		}
	}
	// The arrays are referenced, not copied, so bytes per second would
	// mislead: report the message size instead.
	b.ReportMetric(float64(m.Len()), "msg-bytes")
}

func BenchmarkEncodeFeedback(b *testing.B) {
	var m Message
	f := benchFeedback()
	b.ReportAllocs()
	for b.Loop() {
		if err := EncodeFeedback(&m, f); err != nil {
			b.Fatal(err)
		}
	}
	// The arrays are referenced, not copied, so bytes per second would
	// mislead: report the message size instead.
	b.ReportMetric(float64(m.Len()), "msg-bytes")
}

func BenchmarkDecodeAction(b *testing.B) {
	// H=16, n=8, da=7 float32, big-endian and misaligned: the worst case.
	h, n, da := 16, 8, 7
	data := make([]byte, 4*h*n*da)
	for i := range data {
		data[i] = byte(i)
	}
	ids := make([]byte, 8*n)
	raw := actionMsg(mp(nil).m(2).s("env_ids").val(nd(">i8", ids, int64(n))).s("action").val(nd(">f4", data, int64(h), int64(n), int64(da))))
	buf := make([]byte, len(raw)+1)
	var act Action
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		copy(buf[1:], raw)
		if err := act.Decode(buf[1:]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeActionNative(b *testing.B) {
	raw := readVector(b, "action_f4.msgpack")
	buf := make([]byte, len(raw))
	var act Action
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		copy(buf, raw)
		if err := act.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEncodeTextTooLong: text whose UTF-32 array would pass msgpack's 4 GiB
// bin limit is refused with an error that says why (it was sent without
// its ndarray header, a malformed message), before any of it is built.
func TestEncodeTextTooLong(t *testing.T) {
	const n = 1 << 20
	envs, steps := make([]int64, n), make([]int64, n)
	for i := range envs {
		envs[i] = int64(i)
	}
	text := make([]string, n)
	text[0] = strings.Repeat("x", 1025) // every row is padded to it: 4 x 1025 x 2^20 bytes > 4 GiB
	state := make([]byte, n)
	obs := &Observation{States: []NamedArray{{Name: "s", Array: Array{DType: Uint8, Shape: []int{n, 1}, Data: state}}}, Text: text}
	var m Message
	err := EncodeInfer(&m, &Infer{EnvIndices: envs, StepIDs: steps, Obs: obs})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "UTF-32") {
		t.Fatalf("got %v, want an invalid-argument error about the text's size", err)
	}
}

// TestInvalidUTF8Refused: text and array names that are not UTF-8 are the
// caller's error, found before anything is encoded: msgpack's str is
// UTF-8 (a Python server's decoder fails on the whole message), and <U
// text would arrive with U+FFFD where the caller's bytes were.
func TestInvalidUTF8Refused(t *testing.T) {
	for _, obs := range []*Observation{
		{States: []NamedArray{{"x", state(1, 1, 1)}}, Text: []string{"bad \xff utf8"}},
		{States: []NamedArray{{"x", state(1, 1, 1)}}, Text: []string{"bad \xff utf8"}, TextAsStrings: true},
		{States: []NamedArray{{"\xc3(", state(1, 1, 1)}}},
		{Images: []NamedArray{{"cam\xff", image(1, 1, 2, 3, 0)}}},
	} {
		var m Message
		err := EncodeInfer(&m, &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not UTF-8") {
			t.Errorf("%+v: %v; want ErrInvalid naming the UTF-8", obs, err)
		}
	}
}
