package ledger

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/plugrl/libplugrl/core/wire"
)

// A send is queued in one of two frames.
//
// frameSend holds the message as recorded (its kept bytes):
//
//	time, length on the wire            int64 LE each
//	slot, kept bytes, cuts, digest      uint32 LE each
//	bytes, referenced runs
//	each cut: offset, length, row bytes int64 LE each
//	each referenced run: offset in the
//	kept bytes, length                  uint32 LE each
//	the digests
//	the kept bytes
//
// frameSendSame holds only what changed since the slot's last frameSend:
// the message has the same layout (wire.Message.Layout: the encoder
// reused its plan), so its own msgpack bytes, its cuts and the lengths of
// its referenced runs are the same, and only the referenced bytes (ids,
// rewards, array data that is not cut) and the digests can differ:
//
//	time                                int64 LE
//	slot, digest bytes                  uint32 LE each
//	the digests
//	the referenced runs' bytes, in order
//
// An env loop sends the same layout on every exchange, so the caller's
// thread copies a few dozen bytes per send instead of the message: the
// queue's lines it writes are cold after every wait for the server, and a
// send measured 800-900 ns in a real run when it patch-coded the message
// on the caller's thread, 430-580 ns this way (docs/LEDGER.md).
const (
	sendFixed     = 8 + 8 + 5*4
	sendCut       = 3 * 8
	sendRef       = 2 * 4
	sendSameFixed = 8 + 2*4
)

// sendSlot is what the caller's side knows of a message whose last
// recording was a frameSend the queue took: enough to record the next
// encoding of the same layout as a frameSendSame.
type sendSlot struct {
	m       *wire.Message
	layout  uint64
	segs, n int      // the message's segments and length then
	kept    int      // the bytes it kept
	refs    int      // the bytes of its referenced kept segments
	digests int      // the bytes of its digests
	refSegs []refSeg // its referenced segments, in order: all a frameSendSame reads
	based   bool     // the queue took the frameSend: the writer has it (a slot just taken has not, whatever its message's Layout)
	// byPlan: refSegs' cutRow were found (at digest level) with the
	// observation the message was encoded from (its EncodedObs). Every
	// encoding of one Layout was made from an observation with the same
	// names, dtypes and shapes (the plan compared them), and ObsRowBytes
	// depends only on those and on the segment's source, fixed by the
	// Layout: a send of the layout given its own observation has those
	// cuts (sentSame). One given another observation may not: the cuts
	// found with it say nothing of the next's, even of the same pointer
	// (the C API's one scratch Observation, reshaped in place).
	byPlan bool
}

// refSeg is a referenced segment of a slot's message: its index and, at
// digest level, cutRow of what ObsRowBytes said of it. Only referenced
// segments can change under one Layout, or be observation data, so a
// frameSendSame walks these and no other.
type refSeg struct {
	seg, cutRow int32
}

// sendBase is the writer's side of a slot: what its last frameSend
// said, which each frameSendSame of the slot must match.
type sendBase struct {
	digests, refs int // the bytes of its digests and of its referenced runs
	ok            bool
}

// slot is the slot of m, a message of the caller's (a client has two: its
// infer and its feedback); a message it has not seen takes the slot of the
// one seen least recently.
func (w *Writer) slot(m *wire.Message) int {
	for i := range w.slots {
		if w.slots[i].m == m {
			w.oldest = 1 - i
			return i
		}
	}
	i := w.oldest
	w.slots[i] = sendSlot{m: m, refSegs: w.slots[i].refSegs[:0]}
	w.oldest = 1 - i
	return i
}

// Sent records a message the client sent; obs is the observation it was
// encoded from. At Digest level the observation's array data is cut out
// and each of its rows digested. This runs on the caller's thread: it
// walks the message's segments once, sorting them into cuts and kept ones,
// and copies into the queue the kept ones, or only their referenced bytes
// when the message has the layout it had last time (see frameSendSame).
// The background writer records the first as a whole send record,
// patch-coded, and the second as a same-layout record (appendSendSame).
func (w *Writer) Sent(m *wire.Message, obs *wire.Observation) {
	if w == nil {
		return
	}
	w.SentAt(w.clock(), m, obs)
}

// SentAt is Sent of a message whose send ended at at, a reading of
// Options.Clock: for a caller that reads the clock after the send anyway
// (a round trip's start, a loop's pace), so that the record costs no
// reading of its own.
func (w *Writer) SentAt(at time.Duration, m *wire.Message, obs *wire.Observation) {
	if w == nil {
		return
	}
	t := w.since(at)
	// The digests, if the connection computed them as it copied m (it
	// shows a Digester no small message: those rows are read here, from
	// the cache, in the walk over the segments that Sent makes anyway).
	// Only digests of the rows of obs: a Digester shown m with another
	// observation digested other rows, or rows this record does not cut.
	digested := w.dig.active && w.dig.m == m && w.dig.obs == obs && w.dig.seg >= 0
	w.dig.active = false
	si := w.slot(m)
	s := &w.slots[si]
	// A message longer than maxDelta is recorded whole every time (the
	// writer does not patch it), so it is queued whole: the queue's limit
	// bounds the writer's work too.
	if s.based && s.layout == m.Layout() && s.segs == m.Segments() && s.n == m.Len() && s.kept <= maxDelta &&
		w.sentSame(m, obs, si, t, digested) {
		return
	}
	if digested && w.level == Digest && !rowsDivide(m, obs) {
		digested = false // the Digester's rows are not the cuts': digest them here
	}
	w.kept, w.cuts, w.refs, w.digests = w.kept[:0], w.cuts[:0], w.refs[:0], w.digests[:0]
	w.refSegs = w.refSegs[:0]
	off, kept := 0, 0
	for i := 0; i < m.Segments(); i++ {
		seg := m.Segment(i)
		if !m.Referenced(i) { // the message's own bytes: kept
			w.kept = append(w.kept, seg)
			kept += len(seg)
			off += len(seg)
			continue
		}
		rs := refSeg{seg: int32(i)}
		if w.level == Digest {
			rb, ok := rowCut(m, i, seg, obs)
			rs.cutRow = cutRow(rb, ok)
			w.refSegs = append(w.refSegs, rs)
			if ok {
				w.cuts = append(w.cuts, Cut{Offset: int64(off), Len: int64(len(seg)), RowBytes: int64(rb)})
				for r := 0; !digested && rb > 0 && r+rb <= len(seg); r += rb {
					w.digests = binary.LittleEndian.AppendUint32(w.digests, RowDigest(seg[r:r+rb]))
				}
				off += len(seg)
				continue
			}
		} else {
			w.refSegs = append(w.refSegs, rs)
		}
		w.kept = append(w.kept, seg)
		if len(seg) > 0 { // the record's runs are never empty (see appendSend)
			w.refs = append(w.refs, uint32(kept), uint32(len(seg)))
		}
		kept += len(seg)
		off += len(seg)
	}
	if digested {
		w.digests = append(w.digests, w.dig.out...)
	}
	if len(w.cuts) == 0 {
		// No row cut, no digest: the record has no "d" (appendSend), and
		// its slot's same-layout sends must carry none either.
		w.digests = w.digests[:0]
	}
	payload := sendFixed + sendCut*len(w.cuts) + sendRef*len(w.refs)/2 + len(w.digests) + kept
	if !w.reserve(frameHeader + payload) {
		// The slot stays as it was, and so do the writer's base and
		// the reader's: a later frameSendSame carries every referenced
		// byte, so its record stands for its message on that base
		// whatever was lost between.
		return
	}
	le := binary.LittleEndian
	b := append(w.queue, frameSend)
	b = le.AppendUint32(b, uint32(payload))
	b = le.AppendUint64(b, uint64(t))
	b = le.AppendUint64(b, uint64(m.Len()))
	b = le.AppendUint32(b, uint32(si))
	b = le.AppendUint32(b, uint32(kept))
	b = le.AppendUint32(b, uint32(len(w.cuts)))
	b = le.AppendUint32(b, uint32(len(w.digests)))
	b = le.AppendUint32(b, uint32(len(w.refs)/2))
	for _, c := range w.cuts {
		b = le.AppendUint64(b, uint64(c.Offset))
		b = le.AppendUint64(b, uint64(c.Len))
		b = le.AppendUint64(b, uint64(c.RowBytes))
	}
	refs := 0
	for k := 0; k < len(w.refs); k += 2 {
		b = le.AppendUint32(b, w.refs[k])
		b = le.AppendUint32(b, w.refs[k+1])
		refs += int(w.refs[k+1])
	}
	b = append(b, w.digests...)
	for _, seg := range w.kept {
		b = append(b, seg...)
	}
	w.endFrame(b, len(b)-payload)
	w.mu.Unlock()
	*s = sendSlot{m: m, layout: m.Layout(), segs: m.Segments(), n: m.Len(), kept: kept, refs: refs, digests: len(w.digests),
		refSegs: append(s.refSegs[:0], w.refSegs...), based: true, byPlan: encodedFrom(m, obs)}
}

// rowCut is the row size of m's segment i, seg, as observation data of
// obs (ObsRowBytes), and whether the segment is cut as such rows: only if
// they divide it (a reader refuses a cut that is not whole rows). Given
// the observation m was encoded from they always do; another one's arrays
// may give rows of another size, and the segment is then kept whole, as
// bytes that are not observation data are, rather than cut into a record
// no reader takes.
func rowCut(m *wire.Message, i int, seg []byte, obs *wire.Observation) (rowBytes int, ok bool) {
	rb, ok := m.ObsRowBytes(i, obs)
	if ok && !wholeRows(len(seg), rb) {
		return 0, false
	}
	return rb, ok
}

// wholeRows reports whether n bytes are whole rows of rowBytes (rows of
// no bytes only in no bytes).
func wholeRows(n, rowBytes int) bool {
	if rowBytes <= 0 {
		return rowBytes == 0 && n == 0
	}
	return n%rowBytes == 0
}

// rowsDivide reports whether every segment of m that ObsRowBytes says is
// observation data of obs is whole rows of it (rowCut cuts them all).
func rowsDivide(m *wire.Message, obs *wire.Observation) bool {
	for i := 0; i < m.Segments(); i++ {
		if rb, isObs := m.ObsRowBytes(i, obs); isObs && !wholeRows(len(m.Segment(i)), rb) {
			return false
		}
	}
	return true
}

// cutRow is a segment's refSeg.cutRow: 1 + its row size if
// ObsRowBytes said it is observation data (ok), else 0.
func cutRow(rowBytes int, ok bool) int32 {
	if !ok {
		return 0
	}
	return 1 + int32(rowBytes)
}

// sentSame queues the frameSendSame of m, which has the layout of slot
// si's last frameSend: its digests and referenced kept bytes, written
// straight into the queue in one walk over the referenced segments the
// slot lists (the fewest lines the caller's thread can touch: an own
// segment cannot change under one Layout, so it is not even read). It
// reports false, having queued nothing, if m's cuts (which segments, their
// row sizes) are not the slot's, as with an obs other than the one m was
// encoded from: Sent then records m whole.
//
// The cuts are checked (ObsRowBytes, for each referenced segment) unless
// both this send and the slot's cuts were given the observation their
// message was encoded from, as a client's are: a message of one Layout
// then has the cuts it had, since the encoder kept its plan only because
// the observation's arrays had the names, dtypes and shapes they had
// (sendSlot.byPlan). The walk then reads neither obs nor its arrays, and
// takes each row size from the slot: 13 ns of the 204 of
// BenchmarkRecordExchange/fixed (varying: within its noise), and the
// lines of obs's arrays and shapes in a real run. (Skipping the check
// whenever obs was the slot's pointer recorded wrong row sizes, and
// digests of the wrong rows, for an observation given to a send it was
// not encoded for and reshaped in place before the next.)
func (w *Writer) sentSame(m *wire.Message, obs *wire.Observation, si int, t int64, digested bool) bool {
	s := &w.slots[si]
	payload := sendSameFixed + s.digests + s.refs
	if !w.reserve(frameHeader + payload) {
		return true // lost, and counted; the writer's base is still the slot's last frameSend
	}
	le := binary.LittleEndian
	start := len(w.queue)
	b := append(w.queue, frameSendSame)
	b = le.AppendUint32(b, uint32(payload))
	b = le.AppendUint64(b, uint64(t))
	b = le.AppendUint32(b, uint32(si))
	b = le.AppendUint32(b, uint32(s.digests))
	d := len(b) // the digests go at b[d:], the referenced bytes at b[r:]
	r := d + s.digests
	b = slices.Grow(b, s.digests+s.refs)[:r+s.refs]
	end := len(b)
	if digested {
		if len(w.dig.out) != s.digests {
			return w.unqueue(start)
		}
		copy(b[d:], w.dig.out)
		d = r
	}
	cutting := w.level == Digest
	byPlan := encodedFrom(m, obs)
	check := cutting && !(byPlan && s.byPlan)
	for _, rs := range s.refSegs {
		i := int(rs.seg)
		seg := m.Segment(i)
		if !m.Referenced(i) { // not under one Layout; but never trust, check
			return w.unqueue(start)
		}
		if check {
			if rb, ok := rowCut(m, i, seg, obs); cutRow(rb, ok) != rs.cutRow {
				return w.unqueue(start)
			}
		}
		if cutting && rs.cutRow != 0 {
			rb := int(rs.cutRow) - 1
			for k := 0; !digested && rb > 0 && k+rb <= len(seg); k += rb {
				if d+4 > r {
					return w.unqueue(start)
				}
				le.PutUint32(b[d:], RowDigest(seg[k:k+rb]))
				d += 4
			}
			continue
		}
		if r+len(seg) > end {
			return w.unqueue(start)
		}
		if len(seg) == 8 { // an id, a step id, a float64: a store, not a call to memmove
			le.PutUint64(b[r:], le.Uint64(seg))
			r += 8
			continue
		}
		r += copy(b[r:], seg)
	}
	if d != len(b)-s.refs || r != end {
		return w.unqueue(start)
	}
	w.endFrame(b, end-payload)
	w.mu.Unlock()
	s.byPlan = s.byPlan || byPlan // checked, if it was not
	return true
}

// encodedFrom reports whether obs is the observation m was encoded from
// (wire.Message.EncodedObs): the one whose shapes its Layout stands for.
func encodedFrom(m *wire.Message, obs *wire.Observation) bool {
	return obs != nil && obs == m.EncodedObs()
}

// unqueue abandons the frame sentSame was writing (w.queue is as it was
// before it), and reports false: the message is not what its slot says.
func (w *Writer) unqueue(start int) bool {
	w.queue = w.queue[:start]
	w.mu.Unlock()
	return false
}

// appendSend appends the send record of a frameSend's payload p, whose
// slot's same-layout sends then refer to it: the record names the slot
// ("s") and the runs of its kept bytes that a frameSendSame replaces
// ("r"), so that a reader can rebuild those sends from it.
func (w *Writer) appendSend(raw, p []byte) []byte {
	le := binary.LittleEndian
	t, wireLen := int64(le.Uint64(p)), int64(le.Uint64(p[8:]))
	si, kept := int(le.Uint32(p[16:])), int(le.Uint32(p[20:]))
	ncuts, ndig, nrefs := int(le.Uint32(p[24:])), int(le.Uint32(p[28:])), int(le.Uint32(p[32:]))
	p = p[sendFixed:]
	cuts, p := p[:sendCut*ncuts], p[sendCut*ncuts:]
	refs, p := p[:sendRef*nrefs], p[sendRef*nrefs:]
	digests, msg := p[:ndig], p[ndig:][:kept]
	refBytes := 0
	for r := refs; len(r) > 0; r = r[sendRef:] {
		refBytes += int(le.Uint32(r[4:]))
	}
	w.bases[si] = sendBase{digests: ndig, refs: refBytes, ok: true}
	keys := 4
	if ncuts > 0 {
		keys = 7
	}
	raw = msgp.AppendInt64(append(raw, prefixes[KindSend][keys]...), t)
	raw, w.lits = w.sends.appendCoded(raw, w.lits, msg, 2, 0, len(msg))
	raw = appendKey(raw, keySlot)
	raw = append(raw, byte(si)) // a msgpack positive fixint: 0 or 1
	raw = appendBin(raw, keyRefs, refs)
	if ncuts > 0 {
		raw = appendInt64(raw, keyLen, wireLen)
		raw = appendKey(raw, keyCuts)
		raw = msgp.AppendArrayHeader(raw, uint32(ncuts))
		for c := cuts; len(c) > 0; c = c[sendCut:] {
			raw = msgp.AppendArrayHeader(raw, 3)
			raw = msgp.AppendInt64(raw, int64(le.Uint64(c)))
			raw = msgp.AppendInt64(raw, int64(le.Uint64(c[8:])))
			raw = msgp.AppendInt64(raw, int64(le.Uint64(c[16:])))
		}
		raw = appendBin(raw, keyDigests, digests)
	}
	return raw
}

// appendSendSame appends the send record of a frameSendSame's payload p:
// a same-layout record, {"k": "send", "same": slot}, and to the block's
// literals its time (int64 LE) and its values: the frame's digests and
// referenced bytes as they are. Nothing else is done with them: the
// message is its slot's last whole send record with its runs replaced,
// which a reader rebuilds (format version 4). Building the whole record
// here instead (the message patched against the send two back, its cuts
// and length again) was most of the writer's work per SMALL exchange, for
// bytes that zstd then compressed away (docs/LEDGER.md).
//
// The time and values are in the literals, not the record (format
// version 5), so that zstd sees a record that repeats byte for byte:
// among the records, each few bytes that changed made its match finder
// stop and start again, and its tables swept the cache that the control
// loop sharing the core then missed. In the SMALL bench on one core, with
// the recv records' times moved as well, the client's CPU per exchange
// over no ledger went from +2.17 to +1.35 us (12 rotated triplets), and
// the file grew by about 15 %. (In version 3, whose literals zstd
// compressed, the same move had cost more: the match finder restarted
// among the random action values instead.)
//
// It reports false, appending nothing, for a frame that does not match
// its slot's last frameSend (none, or other sizes), which Sent never
// queues (it queues a frameSendSame only after the queue took its slot's
// frameSend, and the writer reads frames in order): the flush counts it
// as lost rather than writing a record no reader could rebuild.
func (w *Writer) appendSendSame(raw, p []byte) ([]byte, bool) {
	le := binary.LittleEndian
	si, ndig := int(le.Uint32(p[8:])), int(le.Uint32(p[12:]))
	base := &w.bases[si]
	if !base.ok || ndig != base.digests || len(p)-sendSameFixed != base.digests+base.refs {
		return raw, false
	}
	w.lits = append(append(w.lits, p[:8]...), p[sendSameFixed:]...) // its time, then its values
	return append(raw, sameRecords[si]...), true
}
