package ledger

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"time"
)

// recvSpanFixed is a frameRecvSpan's (or frameRecvRun's) payload before
// the span's bytes: the time (int64 LE), the message's length and the
// span's offset (uint32 LE each).
const recvSpanFixed = 8 + 4 + 4

// Received records a message received after the metadata, as it arrived.
func (w *Writer) Received(msg []byte) {
	if w == nil {
		return
	}
	w.ReceivedAt(w.clock(), msg)
}

// ReceivedAt is Received of a message that arrived at at, a reading of
// Options.Clock.
//
// A server's replies to an env loop keep their layout: an action message
// differs from the last one in the action's values (and its ids, when
// they change), the bytes around them equal. So when the last message
// received is the writer's (recvBased) and has msg's length, the caller's
// thread compares the two, finds the span between the first and last
// bytes that differ, and queues only that span (frameRecvSpan), saying
// whether it has no 4 equal bytes within (frameRecvRun: a policy's
// continuous values), which it checks while both are in its cache: the
// writer then records the span as one run, where it would otherwise
// patch-code it (appendRecvSpan), scanning only the span. The record is
// the same either way, and the same as the whole message's would be.
// A SMALL action (362 bytes, 224 of them values) queues 245 bytes instead
// of 375, and the writer copies its values instead of scanning them
// (docs/LEDGER.md). A span that would not save its frame's 8 more bytes
// (a short message, one that changed throughout) is queued whole.
func (w *Writer) ReceivedAt(at time.Duration, msg []byte) {
	if w == nil {
		return
	}
	t := w.since(at)
	le := binary.LittleEndian
	if w.recvBased && len(msg) == len(w.lastRecv) {
		lo, hi := changedSpan(msg, w.lastRecv, w.spanLo, w.spanHi)
		w.spanLo, w.spanHi = lo, hi
		if lo == hi { // the same message again: the next guess is the whole message equal
			w.spanLo, w.spanHi = len(msg), len(msg)
		}
		if hi-lo+8 >= len(msg) {
			w.receivedWhole(t, msg)
			return
		}
		payload := recvSpanFixed + hi - lo
		tag := byte(frameRecvSpan)
		if oneRun(msg[lo:hi], w.lastRecv[lo:hi]) {
			tag = frameRecvRun
		}
		if !w.reserve(frameHeader + payload) {
			w.recvBased = false // the writer's history does not end with lastRecv now
			return
		}
		b := append(w.queue, tag)
		b = le.AppendUint32(b, uint32(payload))
		b = le.AppendUint64(b, uint64(t))
		b = le.AppendUint32(b, uint32(len(msg)))
		b = le.AppendUint32(b, uint32(lo))
		b = append(b, msg[lo:hi]...)
		w.endFrame(b, len(b)-payload)
		w.mu.Unlock()
		copy(w.lastRecv[lo:hi], msg[lo:hi])
		return
	}
	w.receivedWhole(t, msg)
}

// receivedWhole queues msg, received at t, as a frameRecv: the whole
// message, which the writer patch-codes against its last (appendCoded).
func (w *Writer) receivedWhole(t int64, msg []byte) {
	le := binary.LittleEndian
	w.recvBased = false
	if !w.reserve(frameHeader + 8 + len(msg)) {
		return
	}
	b := append(w.queue, frameRecv)
	b = le.AppendUint32(b, uint32(8+len(msg)))
	b = le.AppendUint64(b, uint64(t))
	b = append(b, msg...)
	w.endFrame(b, len(b)-8-len(msg))
	w.mu.Unlock()
	// The writer patch-codes a message up to maxDelta against the last
	// (history.appendCoded); a longer one clears its history.
	if len(msg) <= maxDelta {
		w.lastRecv = append(w.lastRecv[:0], msg...)
		w.recvBased = true
	}
}

// changedSpan returns the span msg[lo:hi] outside which msg and last, of
// equal length, are equal: from the first byte that differs to just past
// the last; lo == hi when none does. It compares 8-byte words from either
// end, or from lo0 and hi0, a guess (the last span found), when msg[:lo0]
// and msg[hi0:] equal last's, which it checks with bytes.Equal's vector
// loop: a wrong guess costs those compares, and the scan from the ends.
// A server's replies change in the same bytes each time (a SMALL
// action's values, bytes 116 to 340 of 362): 21-23 ns a word at a time
// from either end, 14-16 ns so.
func changedSpan(msg, last []byte, lo0, hi0 int) (lo, hi int) {
	n := len(msg)
	last = last[:n]
	if lo0 > 0 && lo0 <= n && bytes.Equal(msg[:lo0], last[:lo0]) {
		lo = lo0
	}
	for lo+8 <= n {
		if x := wordDiff(msg, last, lo); x != 0 {
			lo += bits.TrailingZeros64(x) / 8
			break
		}
		lo += 8
	}
	for lo < n && lo+8 > n && msg[lo] == last[lo] { // the tail, past the last whole word
		lo++
	}
	if lo == n {
		return 0, 0
	}
	hi = n
	if lo < hi0 && hi0 < n && bytes.Equal(msg[hi0:], last[hi0:]) { // msg[lo] differs, so the span ends past lo
		hi = hi0
	}
	for hi-8 >= lo {
		if x := wordDiff(msg, last, hi-8); x != 0 {
			return lo, hi - bits.LeadingZeros64(x)/8
		}
		hi -= 8
	}
	for msg[hi-1] == last[hi-1] { // fewer than 8 bytes from lo; msg[lo] differs
		hi--
	}
	return lo, hi
}

// oneRun reports whether cur and prev, of equal length, have no run of
// minEqualRun equal bytes: appendPatch codes them as one run when they
// also differ in their first and last bytes.
//
// Every run of 4 equal bytes holds an aligned pair of equal bytes (at an
// even offset): a 16-bit lane of zero in a word of their XOR. A policy's
// float32 values have few (a value's two halves rarely repeat the last
// one's), so oneRun first looks for such lanes, 16 bytes at a time, in a
// few instructions a word and a branch that is almost never taken, and
// checks the runs around one it finds (noEqualRun), from the word before
// it to the word after; the words after the last whole 16 bytes are
// checked that way too. A SMALL action's 245 bytes of new values, 64
// actions in turn (BenchmarkOneRun): 68-69 ns with noEqualRun over the
// whole span, 36-37 this way (about one span in 11 holds a pair).
func oneRun(cur, prev []byte) bool {
	n := len(cur)
	prev = prev[:n]
	le := binary.LittleEndian
	i := 0
	for ; i+16 <= n; i += 16 {
		c, p := cur[i:i+16], prev[i:i+16]
		if equalPairs(le.Uint64(c)^le.Uint64(p))|equalPairs(le.Uint64(c[8:])^le.Uint64(p[8:])) != 0 {
			// A run holding an equal pair of these 16 bytes lies
			// within them and the 2 either side.
			if lo, hi := max(i-8, 0), min(i+24, n); !noEqualRun(cur[lo:hi], prev[lo:hi]) {
				return false
			}
		}
	}
	lo := max(i-8, 0) // the rest, and runs that start in the last 16 bytes checked
	return noEqualRun(cur[lo:], prev[lo:])
}

// equalPairs marks, in a word of byte differences, each 16-bit lane that
// is zero (its high bit set; lanes above a zero one may be marked too, so
// only its being nonzero counts).
func equalPairs(x uint64) uint64 {
	return (x - 0x0001000100010001) &^ x & 0x8000800080008000
}

// noEqualRun is oneRun's exact check: it reads cur and prev a word at a
// time, as appendPatch does, and a run may cross from one word to the
// next; lanes past the end count as differing. A word with no equal byte
// is passed in one test (about half of a policy's float32 words: their
// sign and exponent bytes are often equal): BenchmarkOneRun (then one
// pair, checked again and again) 115-157 ns before, 85-119 after, for a
// SMALL action's 245 bytes.
func noEqualRun(cur, prev []byte) bool {
	n := len(cur)
	prev = prev[:n]
	var eqPrev uint64 // the previous word's equal lanes
	i := 0
	for ; i+8 <= n; i += 8 {
		eq := equalLanes(wordDiff(cur, prev, i))
		if eq == 0 { // no equal byte here, so no run through this word
			eqPrev = 0
			continue
		}
		if equalRunStarts(eq) != 0 || equalRunStarts(eqPrev>>40|eq<<24) != 0 {
			return false
		}
		eqPrev = eq
	}
	if i < n {
		x := ^uint64(0) // the lanes past the end: all bits differ
		for k := n - 1; k >= i; k-- {
			x = x<<8 | uint64(cur[k]^prev[k])
		}
		eq := equalLanes(x)
		if equalRunStarts(eq) != 0 || equalRunStarts(eqPrev>>40|eq<<24) != 0 {
			return false
		}
	}
	return true
}

// appendRecvSpan appends the recv record of a frameRecvSpan's or
// frameRecvRun's payload p: the span patch-coded against the same bytes
// of the last recv record's message, which outside the span it equals,
// and to the block's literals the time and the patch's new bytes
// (history.appendSpan). The record is the one appendCoded makes of the
// whole message. A frameRecvRun (oneRun) is that patch's one run, without
// the scan. (Writing every span as one run stored the unchanged bytes of
// a sparse one among the literals, which zstd does not see: an action of
// discrete values, one changed byte in eight, made a file five times
// larger.)
//
// It reports false, appending nothing, when the history does not hold a
// message of the frame's length (ReceivedAt queues a span only after the
// queue took a whole message, and the writer reads frames in order): the
// flush counts it as lost rather than write a record no reader could
// rebuild.
func (w *Writer) appendRecvSpan(raw, p []byte, oneRun bool) ([]byte, bool) {
	le := binary.LittleEndian
	n, lo := int(le.Uint32(p[8:])), int(le.Uint32(p[12:]))
	// The record's prefix and its time (format version 5) first; they
	// count only if the span fits.
	b, lits, ok := w.recvs.appendSpan(append(raw, recvTimeless...), append(w.lits, p[:8]...), n, lo, p[recvSpanFixed:], oneRun)
	if !ok {
		return raw, false
	}
	w.lits = lits
	return b, true
}
