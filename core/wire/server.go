package wire

// The server's side of the wire: decoders for the two messages a client
// sends (infer, feedback) and encoders for the two a server sends (metadata,
// action). internal/refserver is built on them; a client never needs them, except
// in tests.

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// InferMsg is an infer message as a server decodes it (SPEC 5.2, 10.1).
//
// Its arrays are views into the message it was decoded from, in the byte
// order the client sent (their DType says which): keep the message alive and
// unmodified while using them. Array.Float64 and Array.Int64 read elements of
// any numeric dtype and byte order.
type InferMsg struct {
	EnvIndices []int64 // n unique, non-negative env indices
	StepIDs    []int64 // n step ids (SPEC 5.2: accepted and otherwise ignored)
	// Reuse is the reuse key of SPEC 10.1, one flag per env, or nil when the
	// message has none.
	Reuse []bool
	// Obs is the observation, batched to the rows that are not reused, in
	// env_indices order. Obs.TextAsStrings records which form of SPEC 3.4 the
	// text came in; Obs.Text is nil when the message's text was nil.
	Obs Observation
}

// Sent is the number of rows the observation carries: n minus reused rows.
func (in *InferMsg) Sent() int {
	sent := len(in.EnvIndices)
	for _, r := range in.Reuse {
		if r {
			sent--
		}
	}
	return sent
}

// FeedbackMsg is a feedback message as a server decodes it (SPEC 5.4). Its
// arrays and Info are views into the message, as for InferMsg.
type FeedbackMsg struct {
	EnvIndices []int64 // m unique, non-negative env indices
	StepIDs    []int64
	Obs        Observation // the next observation, m rows
	// Rewards are the chunk sums, converted to float64 from whatever float
	// dtype the client sent (RewardDType).
	Rewards     []float64
	RewardDType DType
	Terminated  []bool
	Truncated   []bool
	// Info is the raw msgpack map of data.info.
	Info []byte
	// Episode is info.episode parsed (SPEC 5.4), or nil when info has no
	// episode key. Return, Length or Success is nil when its key is absent;
	// a missing mask counts as true, so Mask is always m long.
	Episode *Episode
}

// clientField is one top-level value of a client message.
type clientField struct {
	raw  []byte
	seen bool
}

// clientFields reads the top-level map of a client message, checks its
// message_type, and returns the values of the keys in want (by index).
func clientFields(msg []byte, kind string, want []string) ([]clientField, error) {
	if msgp.NextType(msg) != msgp.MapType {
		return nil, malformedf(kind, "top level is a %s, want a map (SPEC 2)", msgp.NextType(msg))
	}
	n, rest, err := mapLen(msg)
	if err != nil {
		return nil, malformed(kind, err)
	}
	out := make([]clientField, len(want))
	var gotKind []byte
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, malformed(kind, err)
		}
		val := rest
		if rest, err = msgp.Skip(rest); err != nil {
			return nil, malformed(kind+"."+string(k), err)
		}
		val = val[:len(val)-len(rest)]
		if string(k) == "message_type" {
			if gotKind != nil {
				return nil, malformedf(kind, "message_type appears twice")
			}
			if msgp.NextType(val) != msgp.StrType {
				return nil, malformedf("message_type", "is a %s, want str (SPEC 2)", msgp.NextType(val))
			}
			gotKind, _, _ = msgp.ReadStringZC(val)
			if gotKind == nil {
				gotKind = []byte{}
			}
			continue
		}
		for j, w := range want {
			if string(k) == w {
				if out[j].seen {
					return nil, malformedf(kind, "key %q appears twice", w)
				}
				out[j] = clientField{raw: val, seen: true}
			}
		}
		// Other top-level keys are ignored: a feature may add some.
	}
	if gotKind == nil {
		return nil, malformedf(kind, "no message_type key (SPEC 2)")
	}
	if string(gotKind) != kind {
		hint := ""
		if kind == TypeFeedback && string(gotKind) == TypeInfer {
			hint = ": two infers in a row (SPEC 4.2)"
		}
		return nil, malformedf("message_type", "got %q, want %q%s", gotKind, kind, hint)
	}
	for j, w := range want {
		if !out[j].seen && w != "reuse" {
			return nil, malformedf(kind, "no %s key (SPEC 5.2, 5.4)", w)
		}
	}
	return out, nil
}

// DecodeInfer decodes an infer message, as a server receives it. It does not
// modify msg; the result views it. Every error wraps ErrMalformed and names
// the key it is about. It checks what SPEC 5.2 and 10.1 say an infer is:
// env_indices and step_ids one-dimensional integer arrays of one length n >=
// 1, env indices unique and non-negative, reuse (when present) a bool array
// of length n, and an observation map of images, states and text whose every
// array leads with the number of rows not reused. Unknown top-level keys are
// ignored.
func DecodeInfer(msg []byte) (*InferMsg, error) {
	f, err := clientFields(msg, TypeInfer, []string{"data", "env_indices", "step_ids", "reuse"})
	if err != nil {
		return nil, err
	}
	in := &InferMsg{}
	if in.EnvIndices, in.StepIDs, err = decodeEnvs(TypeInfer, f[1].raw, f[2].raw); err != nil {
		return nil, err
	}
	n := len(in.EnvIndices)
	if f[3].seen {
		if in.Reuse, err = decodeBools("infer.reuse", f[3].raw); err != nil {
			return nil, err
		}
		if len(in.Reuse) != n {
			return nil, malformedf("infer.reuse", "has %d flags for %d env_indices (SPEC 10.1)", len(in.Reuse), n)
		}
	}
	if err = decodeObservation("infer.data", f[0].raw, in.Sent(), &in.Obs); err != nil {
		return nil, err
	}
	return in, nil
}

// decodeEnvs reads the env_indices and step_ids that infer and feedback
// both carry: one length n >= 1, indices unique and non-negative.
func decodeEnvs(kind string, rawIdx, rawSteps []byte) (idx, steps []int64, err error) {
	if idx, err = decodeInts(kind+".env_indices", rawIdx); err != nil {
		return nil, nil, err
	}
	n := len(idx)
	if n == 0 {
		return nil, nil, malformedf(kind+".env_indices", "is empty; every %s names at least one env", kind)
	}
	if err = checkIndices(kind+".env_indices", idx); err != nil {
		return nil, nil, err
	}
	if steps, err = decodeInts(kind+".step_ids", rawSteps); err != nil {
		return nil, nil, err
	}
	if len(steps) != n {
		return nil, nil, malformedf(kind+".step_ids", "has %d entries for %d env_indices", len(steps), n)
	}
	return idx, steps, nil
}

// DecodeFeedback decodes a feedback message, as a server receives it. It does
// not modify msg; the result views it. Every error wraps ErrMalformed and
// names the key it is about. It checks what SPEC 5.4 says a feedback is:
// env_indices and step_ids of one length m >= 1 (indices unique and
// non-negative), a data map of exactly obs, rewards (any float dtype),
// terminated and truncated (bool arrays) and info (a map), each holding m
// entries; and that info can be split per env as plugrl-server splits it: a
// non-empty info must hold at least one ndarray, at the top level or one
// level into a nested map, and every such ndarray must lead with m, unless m
// is 1. A message that would fail plugrl-server's check is refused here, so a
// server built on this decoder closes it with a resync.
func DecodeFeedback(msg []byte) (*FeedbackMsg, error) {
	f, err := clientFields(msg, TypeFeedback, []string{"data", "env_indices", "step_ids"})
	if err != nil {
		return nil, err
	}
	fb := &FeedbackMsg{}
	if fb.EnvIndices, fb.StepIDs, err = decodeEnvs(TypeFeedback, f[1].raw, f[2].raw); err != nil {
		return nil, err
	}
	m := len(fb.EnvIndices)
	data := f[0].raw
	if msgp.NextType(data) != msgp.MapType {
		return nil, malformedf("feedback.data", "is a %s, want a map (SPEC 5.4)", msgp.NextType(data))
	}
	keys := []string{"obs", "rewards", "terminated", "truncated", "info"}
	var vals [5][]byte
	cnt, rest, err := mapLen(data)
	if err != nil {
		return nil, malformed("feedback.data", err)
	}
	for i := 0; i < cnt; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, malformed("feedback.data", err)
		}
		val := rest
		if rest, err = msgp.Skip(rest); err != nil {
			return nil, malformed("feedback.data."+string(k), err)
		}
		val = val[:len(val)-len(rest)]
		j := 0
		for j < len(keys) && keys[j] != string(k) {
			j++
		}
		if j == len(keys) {
			return nil, malformedf("feedback.data", "unexpected key %q; SPEC 5.4 defines obs, rewards, terminated, truncated and info", k)
		}
		if vals[j] != nil {
			return nil, malformedf("feedback.data", "key %q appears twice", k)
		}
		vals[j] = val
	}
	for j, k := range keys {
		if vals[j] == nil {
			return nil, malformedf("feedback.data", "no %s key (SPEC 5.4)", k)
		}
	}
	if err = decodeObservation("feedback.data.obs", vals[0], m, &fb.Obs); err != nil {
		return nil, err
	}
	var shape [MaxDims]int
	var a Array
	if _, err = DecodeArray(vals[1], shape[:], &a); err != nil {
		return nil, malformed("feedback.data.rewards", err)
	}
	if a.DType.Kind != 'f' || len(a.Shape) != 1 || a.Shape[0] != m {
		return nil, malformedf("feedback.data.rewards", "is %s of shape %v, want a float array of shape [%d] (SPEC 5.4)", a.DType, a.Shape, m)
	}
	fb.RewardDType = a.DType
	fb.Rewards = make([]float64, m)
	for i := range fb.Rewards {
		fb.Rewards[i] = a.Float64(i)
	}
	for j, dst := range []*[]bool{&fb.Terminated, &fb.Truncated} {
		where := "feedback.data." + keys[2+j]
		if *dst, err = decodeBools(where, vals[2+j]); err != nil {
			return nil, err
		}
		if len(*dst) != m {
			return nil, malformedf(where, "has %d flags for %d env_indices (SPEC 5.4)", len(*dst), m)
		}
	}
	fb.Info = vals[4]
	if fb.Episode, err = checkInfo(fb.Info, m); err != nil {
		return nil, err
	}
	return fb, nil
}

// decodeInts reads a one-dimensional integer ndarray (any width, either byte
// order) into int64s.
func decodeInts(where string, b []byte) ([]int64, error) {
	var shape [MaxDims]int
	var a Array
	if _, err := DecodeArray(b, shape[:], &a); err != nil {
		return nil, malformed(where, err)
	}
	if (a.DType.Kind != 'i' && a.DType.Kind != 'u') || len(a.Shape) != 1 {
		return nil, malformedf(where, "is %s of shape %v, want a one-dimensional integer array (\"<i8\")", a.DType, a.Shape)
	}
	out := make([]int64, a.Shape[0])
	for i := range out {
		v, ok := a.Int64(i)
		if !ok {
			return nil, malformedf(where, "[%d] does not fit an int64", i)
		}
		out[i] = v
	}
	return out, nil
}

// decodeBools reads a one-dimensional |b1 ndarray.
func decodeBools(where string, b []byte) ([]bool, error) {
	var shape [MaxDims]int
	var a Array
	if _, err := DecodeArray(b, shape[:], &a); err != nil {
		return nil, malformed(where, err)
	}
	if a.DType.Kind != 'b' || len(a.Shape) != 1 {
		return nil, malformedf(where, "is %s of shape %v, want a one-dimensional \"|b1\" array", a.DType, a.Shape)
	}
	out := make([]bool, len(a.Data))
	for i, v := range a.Data {
		out[i] = v != 0
	}
	return out, nil
}

// decodeObservation reads an observation map (SPEC 5.2) whose arrays must
// all lead with rows. Arrays view b.
func decodeObservation(where string, b []byte, rows int, o *Observation) error {
	if msgp.NextType(b) != msgp.MapType {
		return malformedf(where, "is a %s, want a map of images, states and text (SPEC 5.2)", msgp.NextType(b))
	}
	n, rest, err := mapLen(b)
	if err != nil {
		return malformed(where, err)
	}
	var seen [3]bool
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return malformed(where, err)
		}
		val := rest
		if rest, err = msgp.Skip(rest); err != nil {
			return malformed(where+"."+string(k), err)
		}
		val = val[:len(val)-len(rest)]
		var j int
		switch string(k) {
		case "images":
			j = 0
		case "states":
			j = 1
		case "text":
			j = 2
		default:
			return malformedf(where, "unexpected key %q; an observation has images, states and text (SPEC 5.2)", k)
		}
		if seen[j] {
			return malformedf(where, "key %q appears twice", k)
		}
		seen[j] = true
		sub := where + "." + string(k)
		switch j {
		case 0, 1:
			named, err := decodeNamed(sub, val, j == 0, rows)
			if err != nil {
				return err
			}
			if j == 0 {
				o.Images = named
			} else {
				o.States = named
			}
		case 2:
			o.TextAsStrings = msgp.NextType(val) == msgp.ArrayType
			if o.Text, _, err = DecodeText(val); err != nil {
				return malformed(sub, err)
			}
			if o.Text != nil && len(o.Text) != rows {
				return malformedf(sub, "has %d strings, want %d (one per row)", len(o.Text), rows)
			}
		}
	}
	for j, k := range []string{"images", "states", "text"} {
		if !seen[j] {
			return malformedf(where, "no %s key (SPEC 5.2)", k)
		}
	}
	return nil
}

// decodeNamed reads the images or states map: names to ndarrays leading with
// rows. Images are |u1 [rows, h, w, c]; states any numeric dtype.
func decodeNamed(where string, b []byte, images bool, rows int) ([]NamedArray, error) {
	if msgp.NextType(b) != msgp.MapType {
		return nil, malformedf(where, "is a %s, want a map of named arrays", msgp.NextType(b))
	}
	n, rest, err := mapLen(b)
	if err != nil {
		return nil, malformed(where, err)
	}
	out := make([]NamedArray, n)
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, malformed(where, err)
		}
		name := string(k)
		for j := 0; j < i; j++ {
			if out[j].Name == name {
				return nil, malformedf(where, "name %q appears twice", name)
			}
		}
		sub := fmt.Sprintf("%s[%q]", where, name)
		shape := make([]int, MaxDims)
		out[i].Name = name
		a := &out[i].Array
		if rest, err = DecodeArray(rest, shape, a); err != nil {
			return nil, malformed(sub, err)
		}
		a.Shape = a.Shape[:len(a.Shape):len(a.Shape)]
		switch {
		case images && (a.DType.Kind != 'u' || a.DType.Size != 1 || len(a.Shape) != 4):
			return nil, malformedf(sub, "is %s of shape %v, want \"|u1\" [n, h, w, c] (SPEC 5.2)", a.DType, a.Shape)
		case !images && (!a.DType.Numeric() || len(a.Shape) < 1):
			return nil, malformedf(sub, "is %s of shape %v, want a numeric array [n, ...] (SPEC 5.2)", a.DType, a.Shape)
		case a.Shape[0] != rows:
			return nil, malformedf(sub, "leads with %d, want %d (SPEC 5.2: every array shares the batch dimension)", a.Shape[0], rows)
		}
	}
	return out, nil
}

// checkInfo checks that info is a map plugrl-server can split into m
// per-env entries (SPEC 5.4), and parses info.episode when present.
func checkInfo(info []byte, m int) (*Episode, error) {
	const where = "feedback.data.info"
	if msgp.NextType(info) != msgp.MapType {
		return nil, malformedf(where, "is a %s, want a map (SPEC 5.4)", msgp.NextType(info))
	}
	n, rest, err := mapLen(info)
	if err != nil {
		return nil, malformed(where, err)
	}
	arrays := 0
	var episode []byte
	// lead checks one value that plugrl-server would slice per env.
	lead := func(key string, v []byte) error {
		var shape [MaxDims]int
		var a Array
		if _, err := DecodeArray(v, shape[:], &a); err != nil {
			return malformed(where+"."+key, err)
		}
		if len(a.Shape) == 0 || a.Shape[0] != m {
			return malformedf(where+"."+key, "has shape %v; an info ndarray must lead with m = %d to be split per env (SPEC 5.4)", a.Shape, m)
		}
		arrays++
		return nil
	}
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, malformed(where, err)
		}
		val := rest
		if rest, err = msgp.Skip(rest); err != nil {
			return nil, malformed(where+"."+string(k), err)
		}
		val = val[:len(val)-len(rest)]
		key := string(k)
		if key == "episode" {
			episode = val
		}
		switch {
		case IsNDArray(val):
			if err := lead(key, val); err != nil {
				return nil, err
			}
		case msgp.NextType(val) == msgp.MapType && !IsNPGeneric(val):
			// One level into a nested map, as plugrl-server looks.
			cn, crest, err := mapLen(val)
			if err != nil {
				return nil, malformed(where+"."+key, err)
			}
			for j := 0; j < cn; j++ {
				var ck []byte
				if ck, crest, err = readKey(crest); err != nil {
					return nil, malformed(where+"."+key, err)
				}
				cval := crest
				if crest, err = msgp.Skip(crest); err != nil {
					return nil, malformed(where+"."+key+"."+string(ck), err)
				}
				if IsNDArray(cval) {
					if err := lead(key+"."+string(ck), cval[:len(cval)-len(crest)]); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	if n > 0 && arrays == 0 && m != 1 {
		return nil, malformedf(where, "holds no ndarray, so plugrl-server cannot split it across %d envs (SPEC 5.4); send {} or batch a value to length %d", m, m)
	}
	if episode == nil {
		return nil, nil
	}
	return decodeEpisode(where+".episode", episode, m)
}

// decodeEpisode parses info.episode: r, l, s and mask, each of length m.
func decodeEpisode(where string, b []byte, m int) (*Episode, error) {
	if msgp.NextType(b) != msgp.MapType || IsNDArray(b) || IsNPGeneric(b) {
		return nil, malformedf(where, "is a %s, want a map of r, l, s and mask (SPEC 5.4)", msgp.NextType(b))
	}
	n, rest, err := mapLen(b)
	if err != nil {
		return nil, malformed(where, err)
	}
	e := &Episode{}
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, malformed(where, err)
		}
		val := rest
		if rest, err = msgp.Skip(rest); err != nil {
			return nil, malformed(where+"."+string(k), err)
		}
		key := string(k)
		if key != "r" && key != "l" && key != "s" && key != "mask" {
			continue // e.g. mean_success_rate: sent by plugrl-env-client, read by nobody
		}
		sub := where + "." + key
		var shape [MaxDims]int
		var a Array
		if _, err := DecodeArray(val, shape[:], &a); err != nil {
			return nil, malformed(sub, err)
		}
		if len(a.Shape) != 1 || a.Shape[0] != m {
			return nil, malformedf(sub, "has shape %v, want [%d]", a.Shape, m)
		}
		switch key {
		case "r":
			if a.DType.Kind != 'f' && a.DType.Kind != 'i' && a.DType.Kind != 'u' {
				return nil, malformedf(sub, "is %s, want a float array", a.DType)
			}
			e.Return = make([]float64, m)
			for j := range e.Return {
				e.Return[j] = a.Float64(j)
			}
		case "l":
			if a.DType.Kind != 'i' && a.DType.Kind != 'u' {
				return nil, malformedf(sub, "is %s, want an integer array", a.DType)
			}
			e.Length = make([]int64, m)
			for j := range e.Length {
				v, ok := a.Int64(j)
				if !ok {
					return nil, malformedf(sub, "[%d] does not fit an int64", j)
				}
				e.Length[j] = v
			}
		default:
			if a.DType.Kind != 'b' {
				return nil, malformedf(sub, "is %s, want \"|b1\"", a.DType)
			}
			out := make([]bool, m)
			for j := range out {
				out[j] = a.Data[j] != 0
			}
			if key == "s" {
				e.Success = out
			} else {
				e.Mask = out
			}
		}
	}
	if e.Mask == nil {
		e.Mask = make([]bool, m)
		for j := range e.Mask {
			e.Mask[j] = true
		}
	}
	return e, nil
}

// Float64 returns element i (counting in C order) of a numeric array as a
// float64, whatever its dtype and byte order; bools read as 0 or 1. It
// panics if i is out of range or the dtype is not numeric.
func (a *Array) Float64(i int) float64 {
	s := a.element(i)
	switch s.Kind {
	case 'b':
		if s.Bool {
			return 1
		}
		return 0
	case 'i':
		return float64(s.Int)
	case 'u':
		return float64(s.Uint)
	}
	return s.Float
}

// Int64 returns element i of an integer or bool array, and false if the
// value does not fit an int64 or the array holds floats that are not whole.
func (a *Array) Int64(i int) (int64, bool) {
	s := a.element(i)
	if s.Kind == 'b' {
		if s.Bool {
			return 1, true
		}
		return 0, true
	}
	return s.AsInt()
}

func (a *Array) element(i int) Scalar {
	if !a.DType.Numeric() {
		panic(fmt.Sprintf("wire: element of a %s array", a.DType))
	}
	size := a.DType.ItemSize()
	return elementScalar(a.DType, a.Data[i*size:(i+1)*size])
}

// SetFloat64 stores v as element i of a numeric array, in the array's dtype
// and byte order: floats are rounded to the dtype's width, integers truncate
// toward zero and saturate at the type's range (NaN becomes 0), bools store
// v != 0. It panics if i is out of range or the dtype is not numeric.
func (a *Array) SetFloat64(i int, v float64) {
	if !a.DType.Numeric() {
		panic(fmt.Sprintf("wire: SetFloat64 on a %s array", a.DType))
	}
	size := a.DType.ItemSize()
	putScalar(a.Data[i*size:(i+1)*size], a.DType, Scalar{Kind: 'f', Float: v})
}

// MetaKey is one extra key of a metadata message, its value already
// encoded as msgpack (msgp.AppendIntf makes one from a Go value).
type MetaKey struct {
	Key   string
	Value []byte
}

// EncodeMetadata encodes a metadata message (SPEC 5.1) into m (which it
// resets). The typed fields of md that are Set are written in SPEC 5.1's
// order (md.Raw is ignored); then the extra keys, each replacing a typed key
// of the same name in place, as the server merges its caller's keys over
// the top. An extra key given twice keeps its last value.
func EncodeMetadata(m *Message, md *Metadata, extra ...MetaKey) error {
	m.Reset()
	type kv struct {
		key string
		put func()
	}
	var kvs []kv
	add := func(key string, put func()) {
		for i := range kvs {
			if kvs[i].key == key {
				kvs[i].put = put
				return
			}
		}
		kvs = append(kvs, kv{key, put})
	}
	if md != nil {
		optI := func(key string, o Opt[int64]) {
			if o.Set {
				add(key, func() { m.Int(o.Value) })
			}
		}
		optS := func(key string, o Opt[string]) {
			if o.Set {
				add(key, func() { m.Str(o.Value) })
			}
		}
		optI("protocol_version", md.ProtocolVersion)
		optS("server", md.Server)
		optS("server_version", md.ServerVersion)
		optS("algorithm", md.Algorithm)
		optS("policy", md.Policy)
		optI("action_horizon", md.ActionHorizon)
		optI("action_dim", md.ActionDim)
		if md.Features.Set {
			fs := md.Features.Value
			add("features", func() {
				m.List(len(fs))
				for _, f := range fs {
					m.Str(f)
				}
			})
		}
	}
	for _, e := range extra {
		v := e.Value
		if _, err := msgp.Skip(v); err != nil || len(v) == 0 {
			return invalidf("metadata key %q: value is not one msgpack value", e.Key)
		}
		if rest, _ := msgp.Skip(v); len(rest) != 0 {
			return invalidf("metadata key %q: value has %d bytes after one msgpack value", e.Key, len(rest))
		}
		add(e.Key, func() { m.Raw(v) })
	}
	m.Map(2)
	m.Str("message_type")
	m.Str(TypeMetadata)
	m.Str("data")
	m.Map(len(kvs))
	for _, e := range kvs {
		m.Str(e.key)
		e.put()
	}
	m.Finish()
	return nil
}

// EncodeAction encodes an action message (SPEC 5.3) into m (which it
// resets): chunk is [H, n, *da], time-major, and is referenced rather than
// copied, as are envIDs, so both must stay unchanged until m is written.
// envIDs, normally the infer's env_indices in order, must have n entries;
// nil omits the env_ids key (the Ray dialect of SPEC 5.3).
func EncodeAction(m *Message, envIDs []int64, chunk *Array) error {
	m.Reset()
	if chunk == nil {
		return invalidf("action: no chunk")
	}
	if err := chunk.Check(); err != nil {
		return invalidf("action: %v", err)
	}
	if !chunk.DType.Numeric() || len(chunk.Shape) < 2 {
		return invalidf("action: chunk is %s of shape %v, want a numeric array [H, n, *da] (SPEC 5.3)", chunk.DType, chunk.Shape)
	}
	if envIDs != nil && len(envIDs) != chunk.Shape[1] {
		return invalidf("action: %d env_ids for a chunk of %d envs (shape %v)", len(envIDs), chunk.Shape[1], chunk.Shape)
	}
	m.Map(2)
	m.Str("message_type")
	m.Str(TypeAction)
	m.Str("data")
	if envIDs == nil {
		m.Map(1)
	} else {
		m.Map(2)
		m.Str("env_ids")
		m.int64s(envIDs)
	}
	m.Str("action")
	if err := m.Array(chunk); err != nil {
		return err
	}
	m.Finish()
	return nil
}
