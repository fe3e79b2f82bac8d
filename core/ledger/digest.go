package ledger

import (
	"encoding/binary"

	"github.com/plugrl/libplugrl/core/maskcopy"
	"github.com/plugrl/libplugrl/core/wire"
)

// Digester computes the digests of a message's observation rows while the
// connection copies the message to the socket (it is a conn.MaskCopier):
// it makes the masked copies of the long segments itself, with
// maskcopy.CopySum, so each row is read once from the caller's memory,
// by a pass that both copies it and digests it, at the speed of the copy
// alone. Short segments are shown to it (Copied) right after their copy.
// Without it, Sent reads the rows again after the send.
type Digester struct {
	m      *wire.Message
	obs    *wire.Observation
	active bool
	seg    int // the segment being copied
	rb     int // its row size, if it is observation data
	isObs  bool
	sum    uint32 // the current row's Adler-32 so far
	fill   int    // bytes of the current row digested
	out    []byte // the digests so far, uint32 LE, in message order
}

// BeginSend prepares the digests of m's observation rows for the send
// about to start: pass the result to the connection's
// WriteMessageObserved, then call Sent. It returns nil when there is
// nothing to digest (no ledger, or a full one).
func (w *Writer) BeginSend(m *wire.Message, obs *wire.Observation) *Digester {
	if w == nil || w.level != Digest {
		return nil
	}
	d := &w.dig
	d.m, d.obs, d.active = m, obs, true
	d.seg, d.sum, d.fill, d.out = -1, 1, 0, d.out[:0]
	return d
}

// Copied digests b, the next bytes of segment seg, already copied.
func (d *Digester) Copied(seg int, b []byte) {
	if !d.enter(seg) {
		return
	}
	for len(b) > 0 {
		n := min(len(b), d.rb-d.fill)
		d.sum = maskcopy.Sum(d.sum, b[:n])
		b = b[n:]
		d.rowDone(n)
	}
}

// MaskCopy makes the masked copy of src, the next bytes of segment seg,
// into dst, digesting them in the same pass when they are observation
// rows.
func (d *Digester) MaskCopy(seg int, dst, src []byte, key uint32) {
	if !d.enter(seg) {
		maskcopy.Copy(dst, src, key)
		return
	}
	for len(src) > 0 {
		n := min(len(src), d.rb-d.fill)
		d.sum = maskcopy.CopySum(dst, src[:n], key, d.sum)
		key = maskcopy.RotateKey(key, n)
		dst, src = dst[n:], src[n:]
		d.rowDone(n)
	}
}

// enter starts segment seg if it is new and reports whether its bytes are
// observation rows to digest.
func (d *Digester) enter(seg int) bool {
	if seg != d.seg {
		d.seg, d.sum, d.fill = seg, 1, 0
		d.rb, d.isObs = d.m.ObsRowBytes(seg, d.obs)
	}
	return d.isObs && d.rb > 0
}

// rowDone counts n more bytes of the current row digested and, at the
// row's end, keeps its digest and starts the next.
func (d *Digester) rowDone(n int) {
	d.fill += n
	if d.fill == d.rb {
		d.out = binary.LittleEndian.AppendUint32(d.out, d.sum)
		d.sum, d.fill = 1, 0
	}
}
