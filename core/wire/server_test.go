package wire_test

// Tests of server.go: the server-side decoders (DecodeInfer, DecodeFeedback)
// and encoders (EncodeMetadata, EncodeAction). An external test package, so
// its helpers cannot collide with the package's own tests.

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/plugrl/libplugrl/core/wire"
)

// svKV and svMap build msgpack maps with keys in a chosen order.
type svKV struct {
	k string
	v any
}
type svMap []svKV

// svAppend appends v: svMap, string, int, bool, nil, []string, []any, a
// wire.Array (ndarray), or svRaw (bytes as they are).
type svRaw []byte

func svAppend(t testing.TB, m *wire.Message, v any) {
	switch v := v.(type) {
	case svMap:
		m.Map(len(v))
		for _, e := range v {
			m.Str(e.k)
			svAppend(t, m, e.v)
		}
	case string:
		m.Str(v)
	case int:
		m.Int(int64(v))
	case bool:
		m.Bool(v)
	case nil:
		m.Nil()
	case []string:
		m.List(len(v))
		for _, s := range v {
			m.Str(s)
		}
	case []any:
		m.List(len(v))
		for _, e := range v {
			svAppend(t, m, e)
		}
	case wire.Array:
		if err := m.Array(&v); err != nil {
			t.Fatalf("svAppend: %v", err)
		}
	case svRaw:
		m.Raw(v)
	default:
		t.Fatalf("svAppend: %T", v)
	}
}

func svPack(t testing.TB, v any) []byte {
	var m wire.Message
	svAppend(t, &m, v)
	m.Finish()
	return m.AppendTo(nil)
}

func svI8(vs ...int64) wire.Array {
	return wire.Array{DType: wire.Int64, Shape: []int{len(vs)}, Data: slices.Clone(wire.BytesOf(vs))}
}

func svB1(vs ...bool) wire.Array {
	return wire.Array{DType: wire.Bool, Shape: []int{len(vs)}, Data: slices.Clone(wire.BytesOf(vs))}
}

func svF4(vs ...float32) wire.Array {
	return wire.Array{DType: wire.Float32, Shape: []int{len(vs)}, Data: slices.Clone(wire.BytesOf(vs))}
}

func svF8(shape []int, vs ...float64) wire.Array {
	return wire.Array{DType: wire.Float64, Shape: shape, Data: slices.Clone(wire.BytesOf(vs))}
}

func svU1(shape ...int) wire.Array {
	n, _ := wire.Elements(shape)
	d := make([]byte, n)
	for i := range d {
		d[i] = byte(i*3 + 1)
	}
	return wire.Array{DType: wire.Uint8, Shape: shape, Data: d}
}

// svObs is an observation of n rows: one camera, one state, text.
func svObs(n int) svMap {
	st := make([]float64, 2*n)
	for i := range st {
		st[i] = float64(i) / 4
	}
	text := make([]string, n)
	for i := range text {
		text[i] = strings.Repeat("t", i)
	}
	return svMap{
		{"images", svMap{{"cam", svU1(n, 2, 2, 3)}}},
		{"states", svMap{{"qpos", svF8([]int{n, 2}, st...)}}},
		{"text", text},
	}
}

func svInfer(n int, extra ...svKV) svMap {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return append(svMap{
		{"message_type", "infer"},
		{"data", svObs(n)},
		{"env_indices", svI8(ids...)},
		{"step_ids", svI8(make([]int64, n)...)},
	}, extra...)
}

func svFeedback(m int, info any) svMap {
	ids := make([]int64, m)
	for i := range ids {
		ids[i] = int64(i)
	}
	return svMap{
		{"message_type", "feedback"},
		{"env_indices", svI8(ids...)},
		{"step_ids", svI8(make([]int64, m)...)},
		{"data", svMap{
			{"obs", svObs(m)},
			{"rewards", svF4(make([]float32, m)...)},
			{"terminated", svB1(make([]bool, m)...)},
			{"truncated", svB1(make([]bool, m)...)},
			{"info", info},
		}},
	}
}

// with returns a copy of mp with key k's value replaced (or appended).
func (mp svMap) with(k string, v any) svMap {
	out := slices.Clone(mp)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
			return out
		}
	}
	return append(out, svKV{k, v})
}

func (mp svMap) without(k string) svMap {
	return slices.DeleteFunc(slices.Clone(mp), func(e svKV) bool { return e.k == k })
}

func (mp svMap) get(k string) any {
	for _, e := range mp {
		if e.k == k {
			return e.v
		}
	}
	return nil
}

func svVector(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func floats(a *wire.Array) []float64 {
	n, _ := wire.Elements(a.Shape)
	out := make([]float64, n)
	for i := range out {
		out[i] = a.Float64(i)
	}
	return out
}

// TestDecodeInferVectors decodes infer messages numpy + msgpack wrote
// (testdata/make_vectors.py).
func TestDecodeInferVectors(t *testing.T) {
	in, err := wire.DecodeInfer(svVector(t, "infer_basic.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.EnvIndices, []int64{3, 7}) || !slices.Equal(in.StepIDs, []int64{0, 12}) || in.Reuse != nil {
		t.Fatalf("got env_indices %v step_ids %v reuse %v", in.EnvIndices, in.StepIDs, in.Reuse)
	}
	if len(in.Obs.Images) != 2 || in.Obs.Images[0].Name != "wrist" || in.Obs.Images[1].Name != "front" {
		t.Fatalf("images %+v", in.Obs.Images)
	}
	wrist := &in.Obs.Images[0].Array
	if !slices.Equal(wrist.Shape, []int{2, 3, 130, 3}) || wrist.Data[5] != (5*7+1)%256 {
		t.Fatalf("wrist %v %v", wrist.Shape, wrist.Data[:6])
	}
	qpos := &in.Obs.States[0].Array
	if in.Obs.States[0].Name != "qpos" || !slices.Equal(qpos.Shape, []int{2, 7}) || qpos.Float64(13) != 13*0.25-1 {
		t.Fatalf("qpos %v %v", qpos.Shape, floats(qpos))
	}
	if !slices.Equal(in.Obs.Text, []string{"pick up the red block", "stack"}) || in.Obs.TextAsStrings {
		t.Fatalf("text %q (as strings %v)", in.Obs.Text, in.Obs.TextAsStrings)
	}

	in, err = wire.DecodeInfer(svVector(t, "infer_text_only.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Obs.Text, []string{"héllo wörld ☃", "🤖", ""}) || len(in.Obs.Images)+len(in.Obs.States) != 0 {
		t.Fatalf("text-only: %+v", in.Obs)
	}

	in, err = wire.DecodeInfer(svVector(t, "infer_reuse.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Reuse, []bool{false, true, false}) || in.Sent() != 2 || in.Obs.Images[0].Array.Shape[0] != 2 {
		t.Fatalf("reuse: %v sent %d obs %+v", in.Reuse, in.Sent(), in.Obs.Images)
	}
	if !slices.Equal(in.Obs.Text, []string{"a", "ccc"}) {
		t.Fatalf("reuse text %q", in.Obs.Text)
	}

	in, err = wire.DecodeInfer(svVector(t, "infer_text_list.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Obs.Text, []string{"go"}) || !in.Obs.TextAsStrings {
		t.Fatalf("text list: %q %v", in.Obs.Text, in.Obs.TextAsStrings)
	}

	in, err = wire.DecodeInfer(svVector(t, "infer_empty_text.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Obs.Text, []string{"", ""}) {
		t.Fatalf("empty text %q", in.Obs.Text)
	}
}

func TestDecodeFeedbackVectors(t *testing.T) {
	fb, err := wire.DecodeFeedback(svVector(t, "feedback_basic.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fb.EnvIndices, []int64{3, 7}) || !slices.Equal(fb.StepIDs, []int64{1, 13}) {
		t.Fatalf("ids %v %v", fb.EnvIndices, fb.StepIDs)
	}
	if !slices.Equal(fb.Rewards, []float64{1.5, -0.25}) || fb.RewardDType != wire.MustParseDType("<f4") {
		t.Fatalf("rewards %v %s", fb.Rewards, fb.RewardDType)
	}
	if fb.Episode != nil || string(fb.Info) != "\x80" {
		t.Fatalf("info %x episode %+v", fb.Info, fb.Episode)
	}

	fb, err = wire.DecodeFeedback(svVector(t, "feedback_episode.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fb.Terminated, []bool{true, false, false}) || !slices.Equal(fb.Truncated, []bool{false, false, true}) {
		t.Fatalf("flags %v %v", fb.Terminated, fb.Truncated)
	}
	want := &wire.Episode{
		Return:  []float64{10.5, 0, -3.25},
		Length:  []int64{200, 0, 1000},
		Success: []bool{true, false, false},
		Mask:    []bool{true, false, true},
	}
	if !reflect.DeepEqual(fb.Episode, want) {
		t.Fatalf("episode %+v, want %+v", fb.Episode, want)
	}

	fb, err = wire.DecodeFeedback(svVector(t, "feedback_episode_no_success.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	want = &wire.Episode{Return: []float64{7}, Length: []int64{150}, Mask: []bool{true}}
	if !reflect.DeepEqual(fb.Episode, want) {
		t.Fatalf("episode %+v, want %+v", fb.Episode, want)
	}
}

// TestDecodeInferRoundTrip decodes what EncodeInfer writes, in every text
// form and with reuse.
func TestDecodeInferRoundTrip(t *testing.T) {
	imgs := svU1(3, 2, 2, 1)
	st := svF8([]int{3, 2}, 1, 2, 3, 4, 5, 6)
	for _, asStrings := range []bool{false, true} {
		obs := &wire.Observation{
			Images:        []wire.NamedArray{{Name: "cam", Array: imgs}},
			States:        []wire.NamedArray{{Name: "s", Array: st}},
			Text:          []string{"pick", "", "ünïcode ☃"},
			TextAsStrings: asStrings,
		}
		var m wire.Message
		err := wire.EncodeInfer(&m, &wire.Infer{
			EnvIndices: []int64{5, 0, 9}, StepIDs: []int64{1, 2, 3}, Obs: obs,
			Reuse: []bool{false, true, false},
		})
		if err != nil {
			t.Fatal(err)
		}
		in, err := wire.DecodeInfer(m.AppendTo(nil))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(in.EnvIndices, []int64{5, 0, 9}) || !slices.Equal(in.StepIDs, []int64{1, 2, 3}) || !slices.Equal(in.Reuse, []bool{false, true, false}) {
			t.Fatalf("ids %v %v %v", in.EnvIndices, in.StepIDs, in.Reuse)
		}
		if got := floats(&in.Obs.States[0].Array); !slices.Equal(got, []float64{1, 2, 5, 6}) {
			t.Fatalf("states %v: rows 0 and 2 were sent", got)
		}
		if !slices.Equal(in.Obs.Text, []string{"pick", "ünïcode ☃"}) || in.Obs.TextAsStrings != asStrings {
			t.Fatalf("text %q as strings %v", in.Obs.Text, in.Obs.TextAsStrings)
		}
		cam := in.Obs.Images[0].Array
		if !slices.Equal(cam.Shape, []int{2, 2, 2, 1}) || !slices.Equal(cam.Data, append(slices.Clone(imgs.Row(0)), imgs.Row(2)...)) {
			t.Fatalf("cam %v %v", cam.Shape, cam.Data)
		}
	}
}

func TestDecodeFeedbackRoundTrip(t *testing.T) {
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: svF8([]int{2, 1}, 7, 8)}}}
	var m wire.Message
	err := wire.EncodeFeedback(&m, &wire.Feedback{
		EnvIndices: []int64{4, 2}, StepIDs: []int64{0, 0}, Obs: obs,
		Rewards: []float32{3, -1}, Terminated: []bool{true, false}, Truncated: []bool{false, false},
		Episode: &wire.Episode{Return: []float64{3, 0}, Length: []int64{3, 0}, Mask: []bool{true, false}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := wire.DecodeFeedback(m.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fb.Rewards, []float64{3, -1}) || !slices.Equal(fb.Terminated, []bool{true, false}) {
		t.Fatalf("rewards %v terminated %v", fb.Rewards, fb.Terminated)
	}
	if fb.Episode == nil || !slices.Equal(fb.Episode.Return, []float64{3, 0}) || fb.Episode.Success != nil {
		t.Fatalf("episode %+v", fb.Episode)
	}
	if !slices.Equal(fb.Obs.Text, []string{"", ""}) {
		t.Fatalf("text %q", fb.Obs.Text)
	}
}

// TestDecodeFeedbackAccepts covers what SPEC 5.4 lets a client send.
func TestDecodeFeedbackAccepts(t *testing.T) {
	be := wire.Array{DType: wire.MustParseDType(">f8"), Shape: []int{2}, Data: []byte{
		0x3f, 0xf8, 0, 0, 0, 0, 0, 0, // 1.5
		0xc0, 0, 0, 0, 0, 0, 0, 0, // -2
	}}
	cases := []struct {
		name string
		msg  svMap
	}{
		{
			name: "float64 big-endian rewards",
			msg:  svFeedback(2, svMap{}).with("data", svFeedback(2, svMap{}).get("data").(svMap).with("rewards", be)),
		},
		{
			name: "info with a batched array and a broadcast scalar",
			msg:  svFeedback(2, svMap{{"is_step_success", svB1(true, false)}, {"task", "pick"}}),
		},
		{
			name: "info with only episode, split one level in",
			msg:  svFeedback(2, svMap{{"episode", svMap{{"r", svF8([]int{2}, 1, 2)}, {"l", svI8(3, 4)}, {"mean_success_rate", svRaw(msgp.AppendFloat64(nil, 0.5))}}}}),
		},
		{
			name: "info without arrays when m is 1",
			msg:  svFeedback(1, svMap{{"task", "pick"}}),
		},
		{
			name: "unknown top-level key",
			msg:  append(svFeedback(1, svMap{}), svKV{"future", 1}),
		},
		{
			name: "text as nil",
			msg:  svFeedback(1, svMap{}).with("data", svFeedback(1, svMap{}).get("data").(svMap).with("obs", svObs(1).with("text", nil))),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb, err := wire.DecodeFeedback(svPack(t, c.msg))
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "float64 big-endian rewards" && !slices.Equal(fb.Rewards, []float64{1.5, -2}) {
				t.Fatalf("rewards %v", fb.Rewards)
			}
			if strings.HasPrefix(c.name, "info with only episode") {
				if fb.Episode == nil || !slices.Equal(fb.Episode.Length, []int64{3, 4}) || !slices.Equal(fb.Episode.Mask, []bool{true, true}) {
					t.Fatalf("episode %+v: a missing mask counts as true", fb.Episode)
				}
			}
		})
	}
}

func TestDecodeInferErrors(t *testing.T) {
	cases := []struct {
		name string
		msg  any
		want string // a substring of the error
	}{
		{
			name: "not a map",
			msg:  []string{"infer"},
			want: "top level is a array",
		},
		{
			name: "no message_type",
			msg:  svInfer(1).without("message_type"),
			want: "no message_type",
		},
		{
			name: "a feedback",
			msg:  svFeedback(1, svMap{}),
			want: `got "feedback", want "infer"`,
		},
		{
			name: "no env_indices",
			msg:  svInfer(1).without("env_indices"),
			want: "no env_indices",
		},
		{
			name: "no step_ids",
			msg:  svInfer(1).without("step_ids"),
			want: "no step_ids",
		},
		{
			name: "float env_indices",
			msg:  svInfer(1).with("env_indices", svF4(0)),
			want: "infer.env_indices: is <f4",
		},
		{
			name: "empty env_indices",
			msg:  svInfer(0),
			want: "at least one env",
		},
		{
			name: "duplicate env index",
			msg:  svInfer(2).with("env_indices", svI8(1, 1)),
			want: "env index 1 appears twice",
		},
		{
			name: "negative env index",
			msg:  svInfer(1).with("env_indices", svI8(-1)),
			want: "non-negative",
		},
		{
			name: "step_ids length",
			msg:  svInfer(2).with("step_ids", svI8(0)),
			want: "infer.step_ids: has 1 entries for 2",
		},
		{
			name: "reuse length",
			msg:  svInfer(2, svKV{"reuse", svB1(false)}),
			want: "infer.reuse: has 1 flags for 2",
		},
		{
			name: "reuse not bool",
			msg:  svInfer(1, svKV{"reuse", svI8(0)}),
			want: "infer.reuse: is <i8",
		},
		{
			name: "reused rows still sent",
			msg:  svInfer(2, svKV{"reuse", svB1(true, false)}),
			want: "leads with 2, want 1",
		},
		{
			name: "observation rows",
			msg:  svInfer(2).with("data", svObs(3)),
			want: `infer.data.images["cam"]: leads with 3, want 2`,
		},
		{
			name: "text rows",
			msg:  svInfer(2).with("data", svObs(2).with("text", []string{"x"})),
			want: "infer.data.text: has 1 strings, want 2",
		},
		{
			name: "observation extra key",
			msg:  svInfer(1).with("data", append(svObs(1), svKV{"prompt", "x"})),
			want: `unexpected key "prompt"`,
		},
		{
			name: "observation missing states",
			msg:  svInfer(1).with("data", svObs(1).without("states")),
			want: "infer.data: no states key",
		},
		{
			name: "image not u1",
			msg:  svInfer(1).with("data", svObs(1).with("images", svMap{{"cam", svF8([]int{1, 1, 1, 1}, 0)}})),
			want: `infer.data.images["cam"]: is <f8`,
		},
		{
			name: "image not 4-d",
			msg:  svInfer(1).with("data", svObs(1).with("images", svMap{{"cam", svU1(1, 4)}})),
			want: "[n, h, w, c]",
		},
		{
			name: "state not numeric",
			msg:  svInfer(1).with("data", svObs(1).with("states", svMap{{"s", "x"}})),
			want: `infer.data.states["s"]`,
		},
		{
			name: "state 0-d",
			msg:  svInfer(1).with("data", svObs(1).with("states", svMap{{"s", svF8(nil, 1)}})),
			want: "want a numeric array [n, ...]",
		},
		{
			name: "text a number",
			msg:  svInfer(1).with("data", svObs(1).with("text", 3)),
			want: "infer.data.text",
		},
		{
			name: "truncated",
			msg:  svRaw(svPack(t, svInfer(1))[:40]),
			want: "infer",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := wire.DecodeInfer(svPack(t, c.msg))
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestDecodeFeedbackErrors(t *testing.T) {
	data := svFeedback(2, svMap{}).get("data").(svMap)
	cases := []struct {
		name string
		msg  any
		want string
	}{
		{
			name: "an infer: two in a row",
			msg:  svInfer(1),
			want: "two infers in a row",
		},
		{
			name: "no data",
			msg:  svFeedback(2, svMap{}).without("data"),
			want: "no data key",
		},
		{
			name: "data not a map",
			msg:  svFeedback(2, svMap{}).with("data", 1),
			want: "feedback.data: is a int",
		},
		{
			name: "data missing info",
			msg:  svFeedback(2, svMap{}).with("data", data.without("info")),
			want: "no info key",
		},
		{
			name: "data extra key",
			msg:  svFeedback(2, svMap{}).with("data", append(slices.Clone(data), svKV{"extra", 1})),
			want: `unexpected key "extra"`,
		},
		{
			name: "rewards int",
			msg:  svFeedback(2, svMap{}).with("data", data.with("rewards", svI8(1, 2))),
			want: "feedback.data.rewards: is <i8",
		},
		{
			name: "rewards length",
			msg:  svFeedback(2, svMap{}).with("data", data.with("rewards", svF4(1))),
			want: "want a float array of shape [2]",
		},
		{
			name: "terminated length",
			msg:  svFeedback(2, svMap{}).with("data", data.with("terminated", svB1(true))),
			want: "feedback.data.terminated: has 1 flags for 2",
		},
		{
			name: "truncated not bool",
			msg:  svFeedback(2, svMap{}).with("data", data.with("truncated", svI8(0, 0))),
			want: "feedback.data.truncated",
		},
		{
			name: "obs rows",
			msg:  svFeedback(2, svMap{}).with("data", data.with("obs", svObs(1))),
			want: "feedback.data.obs",
		},
		{
			name: "info not a map",
			msg:  svFeedback(2, []string{}),
			want: "feedback.data.info: is a array",
		},
		{
			name: "info unsplittable: no ndarray",
			msg:  svFeedback(2, svMap{{"task", "pick"}}),
			want: "cannot split it across 2 envs",
		},
		{
			name: "info unsplittable: a list is not an ndarray",
			msg:  svFeedback(2, svMap{{"task", []string{"a", "b"}}}),
			want: "cannot split it across 2 envs",
		},
		{
			name: "info ndarray of the wrong length",
			msg:  svFeedback(2, svMap{{"is_step_success", svB1(true)}}),
			want: "feedback.data.info.is_step_success: has shape [1]",
		},
		{
			name: "info nested ndarray of the wrong length",
			msg:  svFeedback(2, svMap{{"extra", svMap{{"x", svF4(1, 2, 3)}}}}),
			want: "feedback.data.info.extra.x",
		},
		{
			name: "episode wrong length",
			msg:  svFeedback(2, svMap{{"episode", svMap{{"r", svF8([]int{2}, 1, 2)}, {"l", svI8(1, 2)}, {"mask", svB1(true)}}}}),
			want: "episode.mask",
		},
		{
			name: "episode length float",
			msg:  svFeedback(2, svMap{{"episode", svMap{{"l", svF8([]int{2}, 1, 2)}}}}),
			want: "want an integer array",
		},
		{
			name: "episode not a map",
			msg:  svFeedback(2, svMap{{"x", svB1(true, true)}, {"episode", "done"}}),
			want: "feedback.data.info.episode: is a str",
		},
		{
			name: "duplicate key",
			msg:  append(svFeedback(2, svMap{}), svKV{"step_ids", svI8(0, 0)}),
			want: `"step_ids" appears twice`,
		},
		{
			name: "message_type not str",
			msg:  svFeedback(2, svMap{}).with("message_type", 3),
			want: "message_type: is a int",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := wire.DecodeFeedback(svPack(t, c.msg))
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestEncodeAction(t *testing.T) {
	chunk := svF8([]int{2, 3, 1}, 0, 1, 2, 3, 4, 5)
	var m wire.Message
	if err := wire.EncodeAction(&m, []int64{4, 5, 6}, &chunk); err != nil {
		t.Fatal(err)
	}
	var a wire.Action
	if err := a.Decode(m.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.EnvIDs, []int64{4, 5, 6}) || a.Horizon() != 2 || a.Envs() != 3 || a.Chunk.Float64(4) != 4 {
		t.Fatalf("env_ids %v shape %v", a.EnvIDs, a.Chunk.Shape)
	}
	if err := wire.EncodeAction(&m, nil, &chunk); err != nil {
		t.Fatal(err)
	}
	if err := a.Decode(m.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if a.EnvIDs != nil {
		t.Fatalf("env_ids %v, want none (Ray dialect)", a.EnvIDs)
	}
	for _, c := range []struct {
		name  string
		ids   []int64
		chunk wire.Array
	}{
		{
			name:  "env_ids count",
			ids:   []int64{1},
			chunk: chunk,
		},
		{
			name:  "rank 1",
			ids:   nil,
			chunk: svF4(1, 2),
		},
		{
			name:  "data length",
			ids:   nil,
			chunk: wire.Array{DType: wire.Float32, Shape: []int{1, 1, 2}, Data: make([]byte, 4)},
		},
	} {
		if err := wire.EncodeAction(&m, c.ids, &c.chunk); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", c.name, err)
		}
	}
}

func TestEncodeMetadata(t *testing.T) {
	md := &wire.Metadata{
		ProtocolVersion: wire.Opt[int64]{Value: 1, Set: true},
		Server:          wire.Opt[string]{Value: "s", Set: true},
		ActionHorizon:   wire.Opt[int64]{Value: 8, Set: true},
		ActionDim:       wire.Opt[int64]{Value: 7, Set: true},
		Features:        wire.Opt[[]string]{Value: []string{"reuse-feedback-obs"}, Set: true},
	}
	pad := strings.Repeat("x", 2<<20)
	var m wire.Message
	err := wire.EncodeMetadata(&m, md,
		wire.MetaKey{Key: "server", Value: msgp.AppendString(nil, "override")},
		wire.MetaKey{Key: "padding", Value: msgp.AppendString(nil, pad)},
		wire.MetaKey{Key: "run", Value: msgp.AppendInt64(nil, 42)},
	)
	if err != nil {
		t.Fatal(err)
	}
	got, err := wire.DecodeMetadata(m.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Keys(), []string{"protocol_version", "server", "action_horizon", "action_dim", "features", "padding", "run"}) {
		t.Fatalf("keys %v", got.Keys())
	}
	if got.Server.Value != "override" || got.ActionHorizon.Value != 8 || !got.Has("reuse-feedback-obs") || got.Algorithm.Set {
		t.Fatalf("metadata %+v", got)
	}
	if raw, ok := got.Lookup("padding"); !ok || len(raw) != len(pad)+5 {
		t.Fatalf("padding of %d bytes", len(raw))
	}
	if err := wire.EncodeMetadata(&m, nil, wire.MetaKey{Key: "bad", Value: []byte{0x92, 1}}); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("truncated extra value: %v", err)
	}
	if err := wire.EncodeMetadata(&m, nil, wire.MetaKey{Key: "bad", Value: []byte{1, 2}}); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("two values: %v", err)
	}
	if err := wire.EncodeMetadata(&m, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := wire.DecodeMetadata(m.AppendTo(nil)); err != nil || len(got.Keys()) != 0 {
		t.Fatalf("empty metadata: %v %v", got, err)
	}
}

func TestArrayElements(t *testing.T) {
	for _, ts := range []string{"<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<i2", ">i4", "|i1", "<i8", "|u1", ">u2", "<u8", "|b1"} {
		d := wire.MustParseDType(ts)
		a := wire.Array{DType: d, Shape: []int{3}, Data: make([]byte, 3*d.ItemSize())}
		vals := []float64{0, 1, 100}
		if d.Kind == 'b' {
			vals = []float64{0, 1, 1}
		}
		for i, v := range vals {
			a.SetFloat64(i, v)
		}
		for i, v := range vals {
			if got := a.Float64(i); got != v {
				t.Errorf("%s[%d] = %v, want %v", ts, i, got, v)
			}
			if d.Kind != 'f' {
				if got, ok := a.Int64(i); !ok || got != int64(v) {
					t.Errorf("%s Int64(%d) = %v %v", ts, i, got, ok)
				}
			}
		}
	}
	a := wire.Array{DType: wire.MustParseDType("|i1"), Shape: []int{1}, Data: make([]byte, 1)}
	a.SetFloat64(0, 1000)
	if a.Float64(0) != 127 {
		t.Errorf("|i1 1000 stored as %v, want 127 (saturated)", a.Float64(0))
	}
	f := svF8([]int{1}, 2.5)
	if _, ok := f.Int64(0); ok {
		t.Errorf("Int64 of 2.5 succeeded")
	}
	big := wire.Array{DType: wire.MustParseDType("<u8"), Shape: []int{1}, Data: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	if _, ok := big.Int64(0); ok || big.Float64(0) != math.MaxUint64 {
		t.Errorf("max uint64: Int64 ok, or Float64 %v", big.Float64(0))
	}
}

// checkInfer checks invariants of a successful decode, and that
// re-encoding what was decoded decodes to the same thing.
func checkInfer(t *testing.T, in *wire.InferMsg) {
	n := len(in.EnvIndices)
	if n == 0 || len(in.StepIDs) != n || (in.Reuse != nil && len(in.Reuse) != n) {
		t.Fatalf("lengths: %d env_indices, %d step_ids, %d reuse", n, len(in.StepIDs), len(in.Reuse))
	}
	for _, g := range [][]wire.NamedArray{in.Obs.Images, in.Obs.States} {
		for _, a := range g {
			if err := a.Array.Check(); err != nil || a.Array.Shape[0] != in.Sent() {
				t.Fatalf("%q: %v, shape %v for %d rows", a.Name, err, a.Array.Shape, in.Sent())
			}
		}
	}
	// Text goes as strings: re-encoding as <U pads every string to the
	// longest, which a fuzzer turns into gigabytes.
	obs := in.Obs
	obs.TextAsStrings = true
	var m wire.Message
	err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: in.EnvIndices, StepIDs: in.StepIDs, Obs: &obs, Reuse: in.Reuse})
	if err != nil {
		t.Fatalf("re-encoding a decoded infer: %v", err)
	}
	again, err := wire.DecodeInfer(m.AppendTo(nil))
	if err != nil {
		t.Fatalf("decoding a re-encoded infer: %v", err)
	}
	if !slices.Equal(again.EnvIndices, in.EnvIndices) || !slices.Equal(again.StepIDs, in.StepIDs) || !slices.Equal(again.Reuse, in.Reuse) {
		t.Fatalf("round trip changed ids")
	}
	for gi, g := range [][]wire.NamedArray{in.Obs.Images, in.Obs.States} {
		ag := [][]wire.NamedArray{again.Obs.Images, again.Obs.States}[gi]
		for i := range g {
			if ag[i].Name != g[i].Name || ag[i].Array.DType != g[i].Array.DType || !slices.Equal(ag[i].Array.Data, g[i].Array.Data) {
				t.Fatalf("round trip changed %q", g[i].Name)
			}
		}
	}
}

func FuzzDecodeInfer(f *testing.F) {
	for _, name := range []string{"infer_basic", "infer_text_only", "infer_reuse", "infer_text_list", "infer_empty_text"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".msgpack"))
		if err == nil {
			f.Add(b)
		}
	}
	f.Add(svPack(f, svInfer(2)))
	f.Add(svPack(f, svInfer(3, svKV{"reuse", svB1(true, false, true)}).with("data", svObs(1))))
	f.Add(svPack(f, svFeedback(1, svMap{})))
	f.Fuzz(func(t *testing.T, msg []byte) {
		orig := slices.Clone(msg)
		in, err := wire.DecodeInfer(msg)
		if !slices.Equal(orig, msg) {
			t.Fatalf("DecodeInfer modified its input")
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		checkInfer(t, in)
	})
}

func FuzzDecodeFeedback(f *testing.F) {
	for _, name := range []string{"feedback_basic", "feedback_episode", "feedback_episode_no_success"} {
		// Under 1 kB, as seedVectors keeps them: feedback_basic's 3 kB
		// held a 60 s run at 9 executions, minimising its first mutant.
		b, err := os.ReadFile(filepath.Join("testdata", name+".msgpack"))
		if err == nil && len(b) <= 1024 {
			f.Add(b)
		}
	}
	f.Add(svPack(f, svFeedback(2, svMap{{"is_step_success", svB1(true, false)}, {"task", "x"}})))
	f.Add(svPack(f, svFeedback(2, svMap{{"episode", svMap{{"r", svF8([]int{2}, 1, 2)}, {"l", svI8(3, 4)}, {"s", svB1(true, false)}}}})))
	f.Add(svPack(f, svInfer(1)))
	f.Fuzz(func(t *testing.T, msg []byte) {
		orig := slices.Clone(msg)
		fb, err := wire.DecodeFeedback(msg)
		if !slices.Equal(orig, msg) {
			t.Fatalf("DecodeFeedback modified its input")
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		m := len(fb.EnvIndices)
		if m == 0 || len(fb.StepIDs) != m || len(fb.Rewards) != m || len(fb.Terminated) != m || len(fb.Truncated) != m {
			t.Fatalf("lengths do not agree with m = %d", m)
		}
		if e := fb.Episode; e != nil {
			if len(e.Mask) != m || (e.Return != nil && len(e.Return) != m) || (e.Length != nil && len(e.Length) != m) || (e.Success != nil && len(e.Success) != m) {
				t.Fatalf("episode lengths do not agree with m = %d", m)
			}
		}
		// Re-encode the observation as an infer, to check it is well formed.
		ids := slices.Clone(fb.EnvIndices)
		checkInfer(t, &wire.InferMsg{EnvIndices: ids, StepIDs: fb.StepIDs, Obs: fb.Obs})
	})
}
