package wire

// The feedback message (SPEC 5.4): Feedback and EncodeFeedback, the
// client's side; FeedbackMsg and DecodeFeedback, a server's, with the
// checks of info and info.episode.

import (
	"github.com/tinylib/msgp/msgp"
)

// Episode carries finished episodes' statistics in feedback's info.episode
// (SPEC 5.4). Each slice has one entry per feedback env; Mask marks the
// entries that are finished episodes. Success may be nil.
type Episode struct {
	Return  []float64
	Length  []int64
	Success []bool
	Mask    []bool
}

// Feedback is the content of a feedback message (SPEC 5.4).
type Feedback struct {
	EnvIndices []int64
	StepIDs    []int64
	Obs        *Observation // the next observation, batched to the envs
	ObsRows    []int        // as in Infer
	Rewards    []float32    // chunk sums
	Terminated []bool
	Truncated  []bool
	Episode    *Episode // nil sends info {}
}

// EncodeFeedback encodes a feedback message into m (which it resets).
func EncodeFeedback(m *Message, f *Feedback) error {
	var v reqView
	f.view(&v)
	if m.planned(&v) {
		return nil
	}
	n := len(f.EnvIndices)
	if n == 0 {
		return invalidf("feedback: no env indices")
	}
	for _, c := range []struct {
		name string
		l    int
	}{{"step_ids", len(f.StepIDs)}, {"rewards", len(f.Rewards)}, {"terminated", len(f.Terminated)}, {"truncated", len(f.Truncated)}} {
		if c.l != n {
			return invalidf("feedback: %d %s for %d env_indices", c.l, c.name, n)
		}
	}
	if e := f.Episode; e != nil {
		if len(e.Return) != n || len(e.Length) != n || len(e.Mask) != n || (e.Success != nil && len(e.Success) != n) {
			return invalidf("feedback: episode stats need %d entries each (return %d, length %d, success %d, mask %d)", n, len(e.Return), len(e.Length), len(e.Success), len(e.Mask))
		}
	}
	rows, err := m.requestRows("feedback", f.EnvIndices, f.Obs, f.ObsRows, nil)
	if err != nil {
		return err
	}
	m.Map(4)
	m.raw(strMessageType)
	m.raw(strFeedback)
	m.envFields(f.EnvIndices, f.StepIDs)
	m.raw(strData)
	m.Map(5)
	m.raw(strObs)
	if err := m.observation(f.Obs, rows); err != nil {
		return err
	}
	m.raw(strRewards)
	_ = m.arrayStart(4 * n) // per env: under 4 GiB (MaxEnvs)
	m.setSrc(srcRewards, 0, BytesOf(f.Rewards))
	m.ref(BytesOf(f.Rewards))
	m.setSrc(srcNone, 0, nil)
	m.arrayEnd(Float32, -1, []int{n})
	m.raw(strTerminated)
	m.bools(f.Terminated)
	m.raw(strTruncated)
	m.bools(f.Truncated)
	m.raw(strInfo)
	if e := f.Episode; e == nil {
		m.Map(0)
	} else {
		m.Map(1)
		m.Str("episode")
		keys := 3
		if e.Success != nil {
			keys = 4
		}
		m.Map(keys)
		m.Str("r")
		_ = m.arrayStart(8 * n) // per env: under 4 GiB (MaxEnvs)
		m.setSrc(srcReturns, 0, BytesOf(e.Return))
		m.ref(BytesOf(e.Return))
		m.setSrc(srcNone, 0, nil)
		m.arrayEnd(Float64, -1, []int{n})
		m.Str("l")
		m.int64sFrom(srcLengths, e.Length)
		if e.Success != nil {
			m.Str("s")
			m.bools(e.Success)
		}
		m.Str("mask")
		m.bools(e.Mask)
	}
	m.Finish()
	m.planSave(&v)
	return nil
}

// view is the feedback as the plan sees it (plan.go): a new field is a row
// here.
func (f *Feedback) view(v *reqView) {
	v.request(planFeedback, f.EnvIndices, f.StepIDs, f.Obs, f.ObsRows)
	field(v, srcRewards, cmpLen, f.Rewards)
	field(v, srcTerminated, cmpFlags, f.Terminated)
	field(v, srcTruncated, cmpFlags, f.Truncated)
	if e := f.Episode; e != nil {
		v.has |= 1 << srcEpisode
		field(v, srcReturns, cmpLen, e.Return)
		field(v, srcLengths, cmpLen, e.Length)
		field(v, srcSuccess, cmpFlags, e.Success)
		field(v, srcMask, cmpFlags, e.Mask)
	}
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
	it, err := iterMap(data)
	if err != nil {
		return nil, malformed("feedback.data", err)
	}
	for it.next() {
		k, val := it.key, it.val
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
	if it.err != nil {
		return nil, it.malformed("feedback.data")
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

// checkInfo checks that info is a map plugrl-server can split into m
// per-env entries (SPEC 5.4), and parses info.episode when present.
func checkInfo(info []byte, m int) (*Episode, error) {
	const where = "feedback.data.info"
	if msgp.NextType(info) != msgp.MapType {
		return nil, malformedf(where, "is a %s, want a map (SPEC 5.4)", msgp.NextType(info))
	}
	it, err := iterMap(info)
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
	for it.next() {
		val, key := it.val, string(it.key)
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
			child, err := iterMap(val)
			if err != nil {
				return nil, malformed(where+"."+key, err)
			}
			for child.next() {
				if IsNDArray(child.val) {
					if err := lead(key+"."+string(child.key), child.val); err != nil {
						return nil, err
					}
				}
			}
			if child.err != nil {
				return nil, child.malformed(where + "." + key)
			}
		}
	}
	if it.err != nil {
		return nil, it.malformed(where)
	}
	if it.n > 0 && arrays == 0 && m != 1 {
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
	it, err := iterMap(b)
	if err != nil {
		return nil, malformed(where, err)
	}
	e := &Episode{}
	for it.next() {
		val, key := it.val, string(it.key)
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
	if it.err != nil {
		return nil, it.malformed(where)
	}
	if e.Mask == nil {
		e.Mask = make([]bool, m)
		for j := range e.Mask {
			e.Mask[j] = true
		}
	}
	return e, nil
}
