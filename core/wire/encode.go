package wire

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// ErrInvalid wraps every error about what a caller asked to encode, so it can
// be told apart from a malformed peer message.
var ErrInvalid = errors.New("invalid argument")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Message is one encoded message, held as a list of segments rather than one
// buffer: the msgpack structure is written into the Message's own reusable
// buffer, and array data is referenced where the caller keeps it. The
// connection copies each segment once, masking as it goes, so an
// observation's bytes are copied exactly once between the caller's memory
// and the socket. A Message is reused across exchanges and allocates nothing
// once its buffers have grown to the workload's size.
type Message struct {
	head    []byte
	segs    []segment
	mark    int // head[mark:] is not yet covered by a segment
	total   int
	rows    []int    // scratch for row selection
	envs    indexSet // scratch for checking env_indices (indices.go)
	typestr [24]byte // scratch for a dtype's text

	plan    planKey // what the last EncodeInfer/EncodeFeedback was made from (plan.go)
	src     segSrc  // the source of the next refs
	srcBase []byte
}

type segment struct {
	ext        []byte // caller memory; when nil, the segment is head[start:end]
	start, end int
	src        segSrc // where ext comes from, and at which offset (plan.go)
	lo         int
}

// Reset empties m, keeping its buffers.
func (m *Message) Reset() {
	m.head = m.head[:0]
	m.segs = m.segs[:0]
	m.mark = 0
	m.total = 0
	m.plan.kind = planNone
	m.setSrc(srcNone, 0, nil)
}

// Len is the encoded length in bytes.
func (m *Message) Len() int { return m.total }

// Segments is the number of segments; Segment(i) returns each in order.
func (m *Message) Segments() int { return len(m.segs) }

// Segment returns the i-th run of encoded bytes. It must not be modified.
func (m *Message) Segment(i int) []byte {
	s := m.segs[i]
	if s.ext != nil {
		return s.ext
	}
	return m.head[s.start:s.end]
}

// ObsRowBytes reports whether segment i is observation data (rows of an
// image or state array of obs, the observation the message was encoded
// from) and, if it is, the size of one row: the ledger digests such a
// segment row by row instead of recording it.
func (m *Message) ObsRowBytes(i int, obs *Observation) (rowBytes int, ok bool) {
	s := &m.segs[i]
	if s.ext == nil || obs == nil {
		return 0, false
	}
	var g []NamedArray
	switch s.src.kind {
	case srcImage:
		g = obs.Images
	case srcState:
		g = obs.States
	default:
		return 0, false
	}
	if int(s.src.idx) >= len(g) {
		return 0, false
	}
	return g[s.src.idx].Array.RowBytes(), true
}

// AppendTo appends the whole encoded message to dst: for tests and for
// peers that want one buffer.
func (m *Message) AppendTo(dst []byte) []byte {
	for i := range m.segs {
		dst = append(dst, m.Segment(i)...)
	}
	return dst
}

// CopyTo copies the whole encoded message to the front of dst, which must
// hold Len bytes, and returns Len: the connection's path for a message that
// fits its buffer, one plain copy per segment.
func (m *Message) CopyTo(dst []byte) int {
	dst = dst[:m.total]
	w := 0
	for i := range m.segs {
		s := &m.segs[i]
		if s.ext != nil {
			w += copy(dst[w:], s.ext)
		} else {
			w += copy(dst[w:], m.head[s.start:s.end])
		}
	}
	return w
}

// seal closes the pending run of head bytes into a segment.
func (m *Message) seal() {
	if len(m.head) > m.mark {
		m.segs = append(m.segs, segment{start: m.mark, end: len(m.head)})
		m.total += len(m.head) - m.mark
		m.mark = len(m.head)
	}
}

// ref adds caller memory as a segment without copying it.
func (m *Message) ref(b []byte) {
	if len(b) == 0 {
		return
	}
	m.seal()
	m.segs = append(m.segs, segment{ext: b, src: m.src, lo: m.srcOffset(b)})
	m.total += len(b)
}

// Finish seals the message; call it once the last value has been appended.
func (m *Message) Finish() { m.seal() }

// Raw appends already-encoded msgpack bytes (copied into the head).
func (m *Message) Raw(b []byte) { m.head = append(m.head, b...) }

// Map, Str, Key and friends append msgpack values to the structure. The
// small cases (fixmap, fixarray, positive fixint) are written inline: an
// exchange's structure is made of them.
func (m *Message) Map(n int) {
	if n < 16 {
		m.head = append(m.head, 0x80|byte(n))
		return
	}
	m.head = msgp.AppendMapHeader(m.head, uint32(n))
}
func (m *Message) List(n int) {
	if n < 16 {
		m.head = append(m.head, 0x90|byte(n))
		return
	}
	m.head = msgp.AppendArrayHeader(m.head, uint32(n))
}
func (m *Message) Str(s string) { m.head = msgp.AppendString(m.head, s) }
func (m *Message) Int(v int64) {
	// msgpack-python packs a non-negative int as fixint or uint8/16/32/64;
	// msgp.AppendInt64 would use int16 for 128..255 and so on. Python's
	// choice is the one that makes shapes like [n, 224, 224, 3] byte-equal.
	if v >= 0 {
		if v < 128 {
			m.head = append(m.head, byte(v))
			return
		}
		m.head = msgp.AppendUint64(m.head, uint64(v))
		return
	}
	m.head = msgp.AppendInt64(m.head, v)
}

// raw appends precomputed msgpack bytes (the constant keys below).
func (m *Message) raw(b []byte) { m.head = append(m.head, b...) }

// The constant parts of the messages, encoded once.
var (
	// An ndarray map up to its data's bin header: {__ndarray__: true, data:
	// (SPEC 3.2, numpy's key order, keys as bin as numpy sends them).
	ndarrayHead = func() []byte {
		b := msgp.AppendMapHeader(nil, 4)
		b = appendBinKey(b, "__ndarray__")
		b = msgp.AppendBool(b, true)
		return appendBinKey(b, "data")
	}()
	keyDType = appendBinKey(nil, "dtype")
	keyShape = appendBinKey(nil, "shape")

	strMessageType = msgp.AppendString(nil, "message_type")
	strData        = msgp.AppendString(nil, "data")
	strImages      = msgp.AppendString(nil, "images")
	strStates      = msgp.AppendString(nil, "states")
	strText        = msgp.AppendString(nil, "text")
	strEnvIndices  = msgp.AppendString(nil, "env_indices")
	strStepIDs     = msgp.AppendString(nil, "step_ids")
	strReuse       = msgp.AppendString(nil, "reuse")
	strInfer       = msgp.AppendString(nil, TypeInfer)
	strFeedback    = msgp.AppendString(nil, TypeFeedback)
	strObs         = msgp.AppendString(nil, "obs")
	strRewards     = msgp.AppendString(nil, "rewards")
	strTerminated  = msgp.AppendString(nil, "terminated")
	strTruncated   = msgp.AppendString(nil, "truncated")
	strInfo        = msgp.AppendString(nil, "info")
)

func appendBinKey(b []byte, k string) []byte {
	b = msgp.AppendBytesHeader(b, uint32(len(k)))
	return append(b, k...)
}
func (m *Message) Bool(v bool)     { m.head = msgp.AppendBool(m.head, v) }
func (m *Message) Float(v float64) { m.head = msgp.AppendFloat64(m.head, v) }
func (m *Message) Nil()            { m.head = msgp.AppendNil(m.head) }
func (m *Message) binKey(k string) {
	m.head = msgp.AppendBytesHeader(m.head, uint32(len(k)))
	m.head = append(m.head, k...)
}
func (m *Message) binHeader(n int) { m.head = msgp.AppendBytesHeader(m.head, uint32(n)) }
func (m *Message) dtypeStr(d DType) {
	if d.Size < 10 {
		// "<f8", "|u1": a fixstr of three bytes.
		m.head = append(m.head, 0xa3, d.Order, d.Kind, '0'+byte(d.Size))
		return
	}
	m.head = msgp.AppendStringFromBytes(m.head, d.AppendTo(m.typestr[:0]))
}

// arrayStart writes an ndarray map up to and including the data's bin
// header; the caller then adds the data and calls arrayEnd for dtype and
// shape (lead, when not negative, replaces the leading dimension).
// Key order is numpy's: __ndarray__, data, dtype, shape (SPEC 3.2).
func (m *Message) arrayStart(dataLen int) error {
	if uint64(dataLen) > math.MaxUint32 {
		return invalidf("array of %d bytes is larger than msgpack's 4 GiB bin limit", dataLen)
	}
	m.raw(ndarrayHead)
	m.binHeader(dataLen)
	return nil
}

func (m *Message) arrayEnd(d DType, lead int, shape []int) {
	m.raw(keyDType)
	m.dtypeStr(d)
	m.raw(keyShape)
	m.List(len(shape))
	for i, v := range shape {
		if i == 0 && lead >= 0 {
			v = lead
		}
		m.Int(int64(v))
	}
}

// Array appends a whole array; its data is referenced, not copied.
func (m *Message) Array(a *Array) error {
	if err := a.Check(); err != nil {
		return invalidf("%v", err)
	}
	if err := m.arrayStart(len(a.Data)); err != nil {
		return err
	}
	m.ref(a.Data)
	m.arrayEnd(a.DType, -1, a.Shape)
	return nil
}

// rowsArray appends the rows of a (along its leading axis) listed in rows,
// referencing each contiguous run of rows once.
func (m *Message) rowsArray(a *Array, rows []int) error {
	rb := a.RowBytes()
	if err := m.arrayStart(rb * len(rows)); err != nil {
		return err
	}
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j] == rows[j-1]+1 {
			j++
		}
		m.ref(a.Data[rows[i]*rb : (rows[j-1]+1)*rb])
		i = j
	}
	m.arrayEnd(a.DType, len(rows), a.Shape)
	return nil
}

// int64s appends a one-dimensional <i8 array of vs.
func (m *Message) int64s(vs []int64) {
	_ = m.arrayStart(8 * len(vs))
	m.ref(BytesOf(vs))
	m.arrayEnd(Int64, -1, []int{len(vs)})
}

// int64sFrom is int64s of a request field the plan knows as kind.
func (m *Message) int64sFrom(kind uint8, vs []int64) {
	m.setSrc(kind, 0, BytesOf(vs))
	m.int64s(vs)
	m.setSrc(srcNone, 0, nil)
}

// bools appends a |b1 array, normalising every byte to 0 or 1 (a C caller's
// bool may hold any nonzero value) by writing the bytes into the head.
func (m *Message) bools(vs []bool) {
	_ = m.arrayStart(len(vs))
	for _, b := range BytesOf(vs) {
		if b != 0 {
			b = 1
		}
		m.head = append(m.head, b)
	}
	m.arrayEnd(Bool, -1, []int{len(vs)})
}

// NamedArray is one named entry of an observation's images or states.
type NamedArray struct {
	Name  string
	Array Array
}

// Observation is one batch of observations (SPEC 5.2): every array and the
// text list share one leading dimension.
type Observation struct {
	Images []NamedArray // each |u1 [N, h, w, c]
	States []NamedArray // each numeric [N, ...]
	// Text holds one string per row; nil sends empty strings.
	Text []string
	// TextAsStrings sends text as a msgpack array of str instead of numpy's
	// <U form (SPEC 3.4 Gap). The default, <U, is what plugrl-env-client sends.
	TextAsStrings bool
}

// Rows is the observation's leading dimension, or -1 when it has no arrays
// and no text (then any row count is accepted and empty text is sent).
func (o *Observation) Rows() int {
	for _, g := range [2][]NamedArray{o.Images, o.States} {
		for i := range g {
			return g[i].Array.Len()
		}
	}
	if o.Text != nil {
		return len(o.Text)
	}
	return -1
}

// Validate checks shapes, dtypes and lengths against each other.
func (o *Observation) Validate() error {
	rows := o.Rows()
	for gi, g := range [2][]NamedArray{o.Images, o.States} {
		group := [2]string{"images", "states"}[gi]
		for i := range g {
			a := &g[i].Array
			if err := a.Check(); err != nil {
				return invalidf("%s[%q]: %v", group, g[i].Name, err)
			}
			if gi == 0 && (a.DType.Kind != 'u' || a.DType.Size != 1 || len(a.Shape) != 4) {
				return invalidf("images[%q] is %s of shape %v, want |u1 [n, h, w, c] (SPEC 5.2)", g[i].Name, a.DType, a.Shape)
			}
			if gi == 1 && (!a.DType.Numeric() || len(a.Shape) < 1) {
				return invalidf("states[%q] is %s of shape %v, want a numeric array [n, ...]", g[i].Name, a.DType, a.Shape)
			}
			if a.Shape[0] != rows {
				return invalidf("%s[%q] has leading dimension %d, the observation has %d rows (SPEC 5.2: every array shares n)", group, g[i].Name, a.Shape[0], rows)
			}
			for j := 0; j < i; j++ {
				if g[j].Name == g[i].Name {
					return invalidf("%s has two arrays named %q", group, g[i].Name)
				}
			}
		}
	}
	if o.Text != nil && len(o.Text) != rows {
		return invalidf("text has %d strings, the observation has %d rows", len(o.Text), rows)
	}
	return nil
}

// observation appends the observation map with the given rows.
func (m *Message) observation(o *Observation, rows []int) error {
	m.Map(3)
	for gi, g := range [2][]NamedArray{o.Images, o.States} {
		m.raw([2][]byte{strImages, strStates}[gi])
		m.Map(len(g))
		for i := range g {
			m.Str(g[i].Name)
			m.setSrc([2]uint8{srcImage, srcState}[gi], i, g[i].Array.Data)
			err := m.rowsArray(&g[i].Array, rows)
			m.setSrc(srcNone, 0, nil)
			if err != nil {
				return err
			}
		}
	}
	m.raw(strText)
	text := func(r int) string {
		if o.Text == nil {
			return ""
		}
		return o.Text[r]
	}
	if o.TextAsStrings {
		m.List(len(rows))
		for _, r := range rows {
			m.Str(text(r))
		}
		return nil
	}
	width := 1
	for _, r := range rows {
		if w := runeCount(text(r)); w > width {
			width = w
		}
	}
	d := DType{Order: NativeOrder, Kind: 'U', Size: width}
	_ = m.arrayStart(4 * width * len(rows))
	for _, r := range rows {
		m.head = AppendUTF32(m.head, text(r), width)
	}
	m.arrayEnd(d, -1, []int{len(rows)})
	return nil
}

func runeCount(s string) int { return utf8.RuneCountInString(s) }

// Infer is the content of an infer message (SPEC 5.2, 10.1).
type Infer struct {
	EnvIndices []int64
	StepIDs    []int64 // one per env: chunks completed in its episode
	Obs        *Observation
	// ObsRows maps env i (of EnvIndices) to its row in Obs; nil means row i,
	// or, when Reuse is set and Obs has exactly the non-reused rows, the
	// next unreused row.
	ObsRows []int
	// Reuse marks envs whose observation the server already holds (SPEC
	// 10.1); nil sends no reuse key.
	Reuse []bool
}

// selectRows works out which rows of obs to send, in env order, skipping
// reused envs.
func (m *Message) selectRows(what string, n int, obs *Observation, obsRows []int, reuse []bool) ([]int, error) {
	have := obs.Rows()
	sent := n
	for _, r := range reuse {
		if r {
			sent--
		}
	}
	m.rows = m.rows[:0]
	switch {
	case obsRows != nil:
		if len(obsRows) != n {
			return nil, invalidf("%s: %d observation rows for %d envs", what, len(obsRows), n)
		}
		for i, r := range obsRows {
			if reuse != nil && reuse[i] {
				continue
			}
			if r < 0 || (have >= 0 && r >= have) {
				return nil, invalidf("%s: env %d's observation row %d is outside the %d rows given", what, i, r, have)
			}
			m.rows = append(m.rows, r)
		}
	case have < 0 || have == n:
		for i := 0; i < n; i++ {
			if reuse == nil || !reuse[i] {
				m.rows = append(m.rows, i)
			}
		}
	case have == sent:
		for i := 0; i < sent; i++ {
			m.rows = append(m.rows, i)
		}
	default:
		if sent != n {
			return nil, invalidf("%s: observation has %d rows, want %d (one per env) or %d (one per env not reused)", what, have, n, sent)
		}
		return nil, invalidf("%s: observation has %d rows, want %d (one per env)", what, have, n)
	}
	return m.rows, nil
}

// EncodeInfer encodes an infer message into m (which it resets).
func EncodeInfer(m *Message, in *Infer) error {
	if m.planMatchInfer(in) {
		m.planRefresh(in, nil)
		return nil
	}
	m.Reset()
	n := len(in.EnvIndices)
	if n == 0 {
		return invalidf("infer: no env indices; an infer names at least one env")
	}
	if len(in.StepIDs) != n {
		return invalidf("infer: %d step_ids for %d env_indices", len(in.StepIDs), n)
	}
	if in.Reuse != nil && len(in.Reuse) != n {
		return invalidf("infer: %d reuse flags for %d env_indices", len(in.Reuse), n)
	}
	if err := checkEnvIndices(&m.envs, "infer", in.EnvIndices); err != nil {
		return err
	}
	if in.Obs == nil {
		return invalidf("infer: no observation")
	}
	if err := in.Obs.Validate(); err != nil {
		return err
	}
	rows, err := m.selectRows("infer", n, in.Obs, in.ObsRows, in.Reuse)
	if err != nil {
		return err
	}
	keys := 4
	if in.Reuse != nil {
		keys = 5
	}
	m.Map(keys)
	m.raw(strMessageType)
	m.raw(strInfer)
	m.raw(strData)
	if err := m.observation(in.Obs, rows); err != nil {
		return err
	}
	m.raw(strEnvIndices)
	m.int64sFrom(srcEnvs, in.EnvIndices)
	m.raw(strStepIDs)
	m.int64sFrom(srcSteps, in.StepIDs)
	if in.Reuse != nil {
		m.raw(strReuse)
		m.bools(in.Reuse)
	}
	m.Finish()
	m.planSaveInfer(in)
	return nil
}

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
	if m.planMatchFeedback(f) {
		m.planRefresh(nil, f)
		return nil
	}
	m.Reset()
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
	if err := checkEnvIndices(&m.envs, "feedback", f.EnvIndices); err != nil {
		return err
	}
	if f.Obs == nil {
		return invalidf("feedback: no observation")
	}
	if err := f.Obs.Validate(); err != nil {
		return err
	}
	if e := f.Episode; e != nil {
		if len(e.Return) != n || len(e.Length) != n || len(e.Mask) != n || (e.Success != nil && len(e.Success) != n) {
			return invalidf("feedback: episode stats need %d entries each (return %d, length %d, success %d, mask %d)", n, len(e.Return), len(e.Length), len(e.Success), len(e.Mask))
		}
	}
	rows, err := m.selectRows("feedback", n, f.Obs, f.ObsRows, nil)
	if err != nil {
		return err
	}
	m.Map(4)
	m.raw(strMessageType)
	m.raw(strFeedback)
	m.raw(strEnvIndices)
	m.int64sFrom(srcEnvs, f.EnvIndices)
	m.raw(strStepIDs)
	m.int64sFrom(srcSteps, f.StepIDs)
	m.raw(strData)
	m.Map(5)
	m.raw(strObs)
	if err := m.observation(f.Obs, rows); err != nil {
		return err
	}
	m.raw(strRewards)
	_ = m.arrayStart(4 * n)
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
		_ = m.arrayStart(8 * n)
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
	m.planSaveFeedback(f)
	return nil
}
