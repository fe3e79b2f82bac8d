package wire

import (
	"bytes"
	"math/bits"
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
// cheaper (see docs/PERFORMANCE.md).

// The plan's table of field sources: every field of a request that the
// encoded bytes depend on, one row each. A row is a name here and one line
// in its message's view (Infer.view in infer.go, Feedback.view in
// feedback.go) saying where the field is and how the plan compares it.
// Adding a field to infer or feedback adds that row; matching, saving and
// refreshing read the table. The encoder names the source of the data it
// references (setSrc, int64sFrom), so that planRefresh can point the
// segment at the next request's field.
const (
	srcNone    uint8 = iota
	srcEnvs          // env_indices: compared, referenced
	srcSteps         // step_ids: referenced
	srcReuse         // infer's reuse flags: compared
	srcRows          // ObsRows: compared
	srcRewards       // feedback's rewards: referenced
	srcTerminated
	srcTruncated
	srcEpisode // feedback's info.episode: present or not
	srcReturns // episode r: referenced
	srcLengths // episode l: referenced
	srcSuccess
	srcMask
	srcFields // number of field sources; the observation's follow
	srcImage  // + index
	srcState  // + index
)

// How the plan compares a field with the one it saved: presence and
// length always; with cmpBytes its bytes, with cmpFlags its flags (any
// nonzero byte is true). A field it does not compare is data the message
// references.
const (
	cmpLen uint8 = iota
	cmpBytes
	cmpFlags
)

// reqView is a request as the plan sees it, built on the stack by its
// message's view method: its kind, observation, and each field's memory
// and comparison by source.
type reqView struct {
	kind  uint8
	has   uint32 // bit per present (non-nil) field
	exact uint32 // bit per field compared as cmpBytes
	flags uint32 // bit per field compared as cmpFlags
	obs   *Observation
	p     [srcFields]unsafe.Pointer // each field's memory
	n     [srcFields]int            // and its length in bytes
}

// field is source s's memory.
func (v *reqView) field(s int) []byte { return unsafe.Slice((*byte)(v.p[s]), v.n[s]) }

// field puts x in v as source s, compared as cmp.
func field[T int | int64 | float32 | float64 | bool](v *reqView, s, cmp uint8, x []T) {
	if x == nil {
		return
	}
	v.has |= 1 << s
	var z T
	v.p[s], v.n[s] = unsafe.Pointer(unsafe.SliceData(x)), len(x)*int(unsafe.Sizeof(z))
	switch cmp {
	case cmpBytes:
		v.exact |= 1 << s
	case cmpFlags:
		v.flags |= 1 << s
	}
}

// request puts in v the fields infer and feedback share.
func (v *reqView) request(kind uint8, envs, steps []int64, obs *Observation, rows []int) {
	v.kind, v.obs = kind, obs
	field(v, srcEnvs, cmpBytes, envs)
	field(v, srcSteps, cmpLen, steps)
	field(v, srcRows, cmpBytes, rows)
}

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
	planNone uint8 = iota
	planInfer
	planFeedback
)

// planKey is a copy of everything in a request, other than referenced data,
// that the encoded bytes (or their validity) depend on.
type planKey struct {
	kind  uint8
	has   uint32         // present fields
	lens  [srcFields]int // each field's length in bytes
	saved []byte         // compared fields' bytes, in source order
	ints  []int          // per observation array its shape
	strs  []byte         // names, then text
	arrs  []arrKey
	texts []int // end of each text in strs

	text, textAsStrings bool // presence
	nImages, nStates    int

	// The message as the plan left it: an append since means no match.
	segs, head, total int
}

type arrKey struct {
	dtype   DType
	dataLen int
	ndim    int
	name    int // end of the name in strs
}

// planned reports whether the request v views matched the plan, its
// segments now pointing at the request's memory; if not, m is reset for a
// fresh encoding.
func (m *Message) planned(v *reqView) bool {
	if m.planMatch(v) {
		m.planRefresh(v)
		m.obs = v.obs
		return true
	}
	m.Reset()
	return false
}

// planMatch reports whether the request v views has the structure of the
// one the plan was saved from.
func (m *Message) planMatch(v *reqView) bool {
	k := &m.plan
	if k.kind != v.kind || k.has != v.has || v.obs == nil || !m.planIntact() {
		return false
	}
	// Every field's length, then the bytes of those compared, saved in
	// source order.
	if v.n != k.lens {
		return false
	}
	saved := k.saved
	for set := v.exact | v.flags; set != 0; set &= set - 1 {
		s := bits.TrailingZeros32(set)
		b, was := v.field(s), saved[:v.n[s]]
		saved = saved[v.n[s]:]
		if v.exact&(1<<s) != 0 && !sameBytes(b, was) || v.flags&(1<<s) != 0 && !sameFlags(b, was) {
			return false
		}
	}
	return k.matchObs(v.obs)
}

// planSave records the request v views, just encoded into m.
func (m *Message) planSave(v *reqView) {
	k := &m.plan
	*k = planKey{kind: v.kind, has: v.has, saved: k.saved[:0], ints: k.ints[:0], strs: k.strs[:0],
		arrs: k.arrs[:0], texts: k.texts[:0]}
	k.lens = v.n
	for set := v.exact | v.flags; set != 0; set &= set - 1 {
		k.saved = append(k.saved, v.field(bits.TrailingZeros32(set))...)
	}
	k.saveObs(v.obs)
	m.planMark()
	m.obs = v.obs
}

// planMark records the message's extent for planIntact.
func (m *Message) planMark() {
	m.plan.segs, m.plan.head, m.plan.total = len(m.segs), len(m.head), m.total
}

func (m *Message) planIntact() bool {
	return len(m.segs) == m.plan.segs && len(m.head) == m.plan.head && m.total == m.plan.total && m.mark == len(m.head)
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

// matchObs compares o with the saved observation.
func (k *planKey) matchObs(o *Observation) bool {
	ints := k.ints
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

// planRefresh points the referenced segments at the memory of the request v
// views: it matched the plan, so every source has the length it had.
func (m *Message) planRefresh(v *reqView) {
	for i := range m.segs {
		sg := &m.segs[i]
		if sg.ext == nil {
			continue
		}
		var b []byte
		switch k := sg.src.kind; {
		case k == srcImage:
			b = v.obs.Images[sg.src.idx].Array.Data
		case k == srcState:
			b = v.obs.States[sg.src.idx].Array.Data
		case k > srcNone && k < srcFields:
			b = v.field(int(k))
		default:
			panic("wire: a planned message references memory of unknown origin")
		}
		sg.ext = unsafe.Pointer(unsafe.SliceData(b[sg.off : sg.off+sg.n]))
	}
}

// sameBytes is bytes.Equal, in line for the few bytes of a small request
// (a call to memequal costs more than comparing them).
func sameBytes(a, b []byte) bool {
	if len(a) > 32 {
		return bytes.Equal(a, b)
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameFlags compares flags as the encoder sees them: any nonzero byte is
// true (a C caller's bool may hold any nonzero value). Many flags that are
// the same bytes, the usual case, are compared a word at a time.
func sameFlags(a, b []byte) bool {
	if len(a) > 32 && bytes.Equal(a, b) {
		return true
	}
	for i := range a {
		if (a[i] != 0) != (b[i] != 0) {
			return false
		}
	}
	return true
}
