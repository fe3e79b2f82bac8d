package wire

// Message, the encoded form every encoder writes: the msgpack structure in
// its own buffer, array data referenced in place.

import (
	"math"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
)

// Message is one encoded message, held as a list of segments rather than one
// buffer: the msgpack structure is written into the Message's own reusable
// buffer, and array data is referenced where the caller keeps it. The
// connection copies each segment once, masking as it goes, so an
// observation's bytes are copied exactly once between the caller's memory
// and the socket. A Message is reused across exchanges and allocates nothing
// once its buffers have grown to the workload's size.
type Message struct {
	head  []byte
	segs  []segment
	mark  int // head[mark:] is not yet covered by a segment
	total int

	plan    planKey      // what the last EncodeInfer/EncodeFeedback was made from (plan.go)
	obs     *Observation // the observation m was encoded from, if a plan says so (EncodedObs)
	layout  uint64       // counts Resets and runs of own bytes (see Layout)
	src     segSrc       // the source of the next refs
	srcBase []byte

	// Scratch of a message built anew, last: a message its plan matches
	// (an exchange's usual case) does not touch it.
	rows    []int    // scratch for row selection
	envs    indexSet // scratch for checking env_indices (indices.go)
	typestr [24]byte // scratch for a dtype's text with a two-digit item size (dtypeStr writes the others in line)
}

// segment is one run of a message's bytes: n bytes of caller memory at
// ext, or when ext is nil head[off:off+n]. It is kept to 32 bytes (a
// slice, three ints and the source took 56): an exchange reads every
// segment of its two messages, and with many clients taking turns on a
// core they are cache lines it fetches again each time.
type segment struct {
	ext unsafe.Pointer // caller memory; nil: the segment is in head
	n   int
	off int    // in head; for caller memory, its offset in its source (plan.go)
	src segSrc // where ext comes from
}

// bytes is the caller memory the segment references.
func (s *segment) bytes() []byte { return unsafe.Slice((*byte)(s.ext), s.n) }

// Reset empties m, keeping its buffers.
func (m *Message) Reset() {
	m.layout++
	m.head = m.head[:0]
	m.segs = m.segs[:0]
	m.mark = 0
	m.total = 0
	m.plan.kind = planNone
	m.obs = nil
	m.setSrc(srcNone, 0, nil)
}

// Len is the encoded length in bytes.
func (m *Message) Len() int { return m.total }

// Segments is the number of segments; Segment(i) returns each in order.
func (m *Message) Segments() int { return len(m.segs) }

// Segment returns the i-th run of encoded bytes. It must not be modified.
func (m *Message) Segment(i int) []byte {
	s := &m.segs[i]
	if s.ext != nil {
		return s.bytes()
	}
	return m.head[s.off : s.off+s.n : s.off+s.n]
}

// Layout identifies the message's own bytes: it changes with every Reset,
// which every encoder does unless it reuses its plan (plan.go), and with
// every new run of them. Two encodings with the same Layout, Segments and
// Len differ only in the bytes of their Referenced segments, which have
// the same lengths: the ledger records only those when it can.
func (m *Message) Layout() uint64 { return m.layout }

// EncodedObs is the observation of the request m was last encoded from
// by EncodeInfer or EncodeFeedback, made (or reused) by its plan; nil for
// any other encoding. Two encodings from the same one with the same
// Layout were made from an observation with the same names, dtypes and
// shapes (the plan compared them), so ObsRowBytes says the same of their
// segments: the ledger takes the row sizes it found for the first when
// given that observation again (ledger.Writer.Sent).
func (m *Message) EncodedObs() *Observation { return m.obs }

// Referenced reports whether segment i is caller memory the message
// references (array data, env ids, step ids, rewards: what the plan does
// not compare) rather than the message's own msgpack bytes.
func (m *Message) Referenced(i int) bool { return m.segs[i].ext != nil }

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
			w += copy(dst[w:], s.bytes())
		} else {
			w += copy(dst[w:], m.head[s.off:s.off+s.n])
		}
	}
	return w
}

// seal closes the pending run of head bytes into a segment.
func (m *Message) seal() {
	if len(m.head) > m.mark {
		m.layout++ // its own bytes changed (see Layout)
		m.segs = append(m.segs, segment{off: m.mark, n: len(m.head) - m.mark})
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
	m.segs = append(m.segs, segment{ext: unsafe.Pointer(unsafe.SliceData(b)), n: len(b), src: m.src, off: m.srcOffset(b)})
	m.total += len(b)
}

// Finish seals the message; call it once the last value has been appended.
func (m *Message) Finish() { m.seal() }

// Raw appends already-encoded msgpack bytes (copied into the head).
func (m *Message) Raw(b []byte) { m.head = append(m.head, b...) }

// Map appends a map header for n key-value pairs. Map, Str, Key and
// friends append msgpack values to the structure. The small cases
// (fixmap, fixarray, positive fixint) are written inline: an exchange's
// structure is made of them.
func (m *Message) Map(n int) {
	if n < 16 {
		m.head = append(m.head, 0x80|byte(n))
		return
	}
	m.head = msgp.AppendMapHeader(m.head, uint32(n))
}

// List appends an array header for n values.
func (m *Message) List(n int) {
	if n < 16 {
		m.head = append(m.head, 0x90|byte(n))
		return
	}
	m.head = msgp.AppendArrayHeader(m.head, uint32(n))
}

// Str appends a str.
func (m *Message) Str(s string) { m.head = msgp.AppendString(m.head, s) }

// Int appends an integer in the encoding msgpack-python chooses.
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

// Bool appends a bool.
func (m *Message) Bool(v bool) { m.head = msgp.AppendBool(m.head, v) }

// Float appends a float64.
func (m *Message) Float(v float64) { m.head = msgp.AppendFloat64(m.head, v) }

// Nil appends nil.
func (m *Message) Nil() { m.head = msgp.AppendNil(m.head) }

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
	_ = m.arrayStart(8 * len(vs)) // per env: under 4 GiB (MaxEnvs)
	m.ref(BytesOf(vs))
	m.arrayEnd(Int64, -1, []int{len(vs)})
}

// int64sFrom is int64s of a request field the plan knows as kind.
func (m *Message) int64sFrom(kind uint8, vs []int64) {
	m.setSrc(kind, 0, BytesOf(vs))
	m.int64s(vs)
	m.setSrc(srcNone, 0, nil)
}

// envFields appends the env_indices and step_ids keys that infer and
// feedback both carry.
func (m *Message) envFields(envs, steps []int64) {
	m.raw(strEnvIndices)
	m.int64sFrom(srcEnvs, envs)
	m.raw(strStepIDs)
	m.int64sFrom(srcSteps, steps)
}

// bools appends a |b1 array, normalising every byte to 0 or 1 (a C caller's
// bool may hold any nonzero value) by writing the bytes into the head.
func (m *Message) bools(vs []bool) {
	_ = m.arrayStart(len(vs)) // per env: under 4 GiB (MaxEnvs)
	for _, b := range BytesOf(vs) {
		if b != 0 {
			b = 1
		}
		m.head = append(m.head, b)
	}
	m.arrayEnd(Bool, -1, []int{len(vs)})
}
