package wire

import (
	"slices"
	"unsafe"
)

// The plan: a Message remembers what its last successful EncodeInfer or
// EncodeFeedback was made from, apart from the array data it references
// (the env_indices, step_ids, rewards, episode numbers and observation
// arrays). When the next request of the same kind has the same structure
// (the same envs, flags, names, dtypes, shapes, rows and text), its
// msgpack bytes are the same, so the encoder keeps them and only points the
// data segments at the new request's memory. An env loop sends the same
// structure on every exchange; this made a small exchange measurably
// cheaper (see README, Performance).

// Where a referenced segment's bytes come from.
const (
	srcNone uint8 = iota
	srcEnvs
	srcSteps
	srcRewards
	srcReturns
	srcLengths
	srcImage // + index
	srcState // + index
)

type segSrc struct {
	kind uint8
	idx  int32
}

// setSrc names the source of the next refs; base is its memory, from which
// each ref's offset is taken.
func (m *Message) setSrc(kind uint8, idx int, base []byte) {
	m.src = segSrc{kind: kind, idx: int32(idx)}
	m.srcBase = base
}

// srcOffset is where b starts within the current source.
func (m *Message) srcOffset(b []byte) int {
	if m.src.kind == srcNone || len(m.srcBase) == 0 {
		return 0
	}
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(m.srcBase))))
}

// planKind says what the plan describes.
const (
	planNone = iota
	planInfer
	planFeedback
)

// planKey is a copy of everything in a request, other than referenced data,
// that the encoded bytes (or their validity) depend on.
type planKey struct {
	kind  int
	n     int
	envs  []int64
	flags []bool // reuse, or terminated + truncated (+ success + mask)
	ints  []int  // obsRows, then per array its shape
	strs  []byte // names, then text
	arrs  []arrKey
	texts []int // end of each text in strs

	reuse, rows, text, textAsStrings, episode, success            bool // presence
	nImages, nStates, nSteps, nRewards, nReturns, nLengths, nRows int

	// The message as the plan left it: an append since means no match.
	segs, head, total int
}

type arrKey struct {
	dtype   DType
	dataLen int
	ndim    int
	name    int // end of the name in strs
}

func (m *Message) planMatchInfer(in *Infer) bool {
	k := &m.plan
	if k.kind != planInfer || !m.planIntact() || in.Obs == nil || len(in.EnvIndices) != k.n ||
		len(in.StepIDs) != k.nSteps || (in.Reuse != nil) != k.reuse || (in.Reuse != nil && len(in.Reuse) != k.n) ||
		(in.ObsRows != nil) != k.rows || len(in.ObsRows) != k.nRows || !slices.Equal(in.EnvIndices, k.envs) {
		return false
	}
	flags := k.flags
	if in.Reuse != nil {
		if !equalBools(in.Reuse, flags[:len(in.Reuse)]) {
			return false
		}
	}
	return k.matchRowsObs(in.ObsRows, in.Obs)
}

func (m *Message) planSaveInfer(in *Infer) {
	k := &m.plan
	k.reset(planInfer, len(in.EnvIndices))
	k.envs = append(k.envs, in.EnvIndices...)
	k.nSteps = len(in.StepIDs)
	k.reuse, k.rows, k.nRows = in.Reuse != nil, in.ObsRows != nil, len(in.ObsRows)
	k.flags = append(k.flags, in.Reuse...)
	k.ints = append(k.ints, in.ObsRows...)
	k.saveObs(in.Obs)
	m.planMark()
}

func (m *Message) planMatchFeedback(f *Feedback) bool {
	k := &m.plan
	e := f.Episode
	if k.kind != planFeedback || !m.planIntact() || f.Obs == nil || len(f.EnvIndices) != k.n ||
		len(f.StepIDs) != k.nSteps || len(f.Rewards) != k.nRewards || (f.ObsRows != nil) != k.rows ||
		len(f.ObsRows) != k.nRows || (e != nil) != k.episode || !slices.Equal(f.EnvIndices, k.envs) {
		return false
	}
	flags := k.flags
	for _, b := range [][]bool{f.Terminated, f.Truncated} {
		if len(b) > len(flags) || !equalBools(b, flags[:len(b)]) || len(b) != k.n {
			return false
		}
		flags = flags[len(b):]
	}
	if e != nil {
		if len(e.Return) != k.nReturns || len(e.Length) != k.nLengths || (e.Success != nil) != k.success ||
			len(e.Mask) != k.n || len(e.Success)+len(e.Mask) != len(flags) ||
			!equalBools(e.Success, flags[:len(e.Success)]) || !equalBools(e.Mask, flags[len(e.Success):]) {
			return false
		}
	}
	return k.matchRowsObs(f.ObsRows, f.Obs)
}

func (m *Message) planSaveFeedback(f *Feedback) {
	k := &m.plan
	k.reset(planFeedback, len(f.EnvIndices))
	k.envs = append(k.envs, f.EnvIndices...)
	k.nSteps, k.nRewards = len(f.StepIDs), len(f.Rewards)
	k.rows, k.nRows = f.ObsRows != nil, len(f.ObsRows)
	k.flags = append(k.flags, f.Terminated...)
	k.flags = append(k.flags, f.Truncated...)
	if e := f.Episode; e != nil {
		k.episode, k.success = true, e.Success != nil
		k.nReturns, k.nLengths = len(e.Return), len(e.Length)
		k.flags = append(k.flags, e.Success...)
		k.flags = append(k.flags, e.Mask...)
	}
	k.ints = append(k.ints, f.ObsRows...)
	k.saveObs(f.Obs)
	m.planMark()
}

// planMark records the message's extent for planIntact.
func (m *Message) planMark() {
	m.plan.segs, m.plan.head, m.plan.total = len(m.segs), len(m.head), m.total
}

func (m *Message) planIntact() bool {
	return len(m.segs) == m.plan.segs && len(m.head) == m.plan.head && m.total == m.plan.total && m.mark == len(m.head)
}

func (k *planKey) reset(kind, n int) {
	*k = planKey{kind: kind, n: n, envs: k.envs[:0], flags: k.flags[:0], ints: k.ints[:0], strs: k.strs[:0],
		arrs: k.arrs[:0], texts: k.texts[:0]}
}

func (k *planKey) saveObs(o *Observation) {
	k.nImages, k.nStates = len(o.Images), len(o.States)
	for _, g := range [2][]NamedArray{o.Images, o.States} {
		for i := range g {
			a := &g[i].Array
			k.strs = append(k.strs, g[i].Name...)
			k.ints = append(k.ints, a.Shape...)
			k.arrs = append(k.arrs, arrKey{dtype: a.DType, dataLen: len(a.Data), ndim: len(a.Shape), name: len(k.strs)})
		}
	}
	k.text, k.textAsStrings = o.Text != nil, o.TextAsStrings
	for _, s := range o.Text {
		k.strs = append(k.strs, s...)
		k.texts = append(k.texts, len(k.strs))
	}
}

// matchObs compares o with the saved observation; ints holds the saved
// shapes.
// matchRowsObs matches a message's observation rows (saved first in ints,
// their count already checked) and then its observation.
func (k *planKey) matchRowsObs(rows []int, o *Observation) bool {
	ints := k.ints
	if rows != nil {
		if !slices.Equal(rows, ints[:len(rows)]) {
			return false
		}
		ints = ints[len(rows):]
	}
	return k.matchObs(o, ints)
}

func (k *planKey) matchObs(o *Observation, ints []int) bool {
	if len(o.Images) != k.nImages || len(o.States) != k.nStates || (o.Text != nil) != k.text ||
		o.TextAsStrings != k.textAsStrings || len(o.Text) != len(k.texts) {
		return false
	}
	arrs, name := k.arrs, 0
	for _, g := range [2][]NamedArray{o.Images, o.States} {
		for i := range g {
			a, s := &g[i].Array, &arrs[0]
			arrs = arrs[1:]
			if a.DType != s.dtype || len(a.Data) != s.dataLen || len(a.Shape) != s.ndim ||
				g[i].Name != string(k.strs[name:s.name]) || !slices.Equal(a.Shape, ints[:s.ndim]) {
				return false
			}
			ints, name = ints[s.ndim:], s.name
		}
	}
	for i, s := range o.Text {
		if s != string(k.strs[name:k.texts[i]]) {
			return false
		}
		name = k.texts[i]
	}
	return true
}

// planRefresh points the referenced segments at the request's memory (in
// or f): the request matched the plan, so every source has the length it
// had.
func (m *Message) planRefresh(in *Infer, f *Feedback) {
	for i := range m.segs {
		sg := &m.segs[i]
		if sg.ext == nil {
			continue
		}
		var b []byte
		var obs *Observation
		switch {
		case in != nil:
			obs = in.Obs
			switch sg.src.kind {
			case srcEnvs:
				b = BytesOf(in.EnvIndices)
			case srcSteps:
				b = BytesOf(in.StepIDs)
			}
		default:
			obs = f.Obs
			switch sg.src.kind {
			case srcEnvs:
				b = BytesOf(f.EnvIndices)
			case srcSteps:
				b = BytesOf(f.StepIDs)
			case srcRewards:
				b = BytesOf(f.Rewards)
			case srcReturns:
				b = BytesOf(f.Episode.Return)
			case srcLengths:
				b = BytesOf(f.Episode.Length)
			}
		}
		switch sg.src.kind {
		case srcImage:
			b = obs.Images[sg.src.idx].Array.Data
		case srcState:
			b = obs.States[sg.src.idx].Array.Data
		case srcNone:
			panic("wire: a planned message references memory of unknown origin")
		}
		sg.ext = b[sg.lo : sg.lo+len(sg.ext)]
	}
}

// equalBools compares as the encoder sees flags: any nonzero byte is true
// (a C caller's bool may hold any nonzero value).
func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	ab, bb := BytesOf(a), BytesOf(b)
	for i := range ab {
		if (ab[i] != 0) != (bb[i] != 0) {
			return false
		}
	}
	return true
}
