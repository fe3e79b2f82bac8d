package ledger

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/plugrl/libplugrl/core/wire"
)

// Digester computes the digests of a message's observation rows while the
// connection copies the message to the socket (it is a conn.CopyObserver):
// each row is then read once from the caller's memory, by the digest, and
// the copy finds it in the cache. Without it, Sent reads the rows again
// after the send, which for camera images costs a pass over memory.
type Digester struct {
	m      *wire.Message
	obs    *wire.Observation
	active bool
	seg    int // the segment being copied
	rb     int // its row size, if it is observation data
	isObs  bool
	crc    uint32
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
	d.seg, d.crc, d.fill, d.out = -1, 0, 0, d.out[:0]
	return d
}

// Copied digests b, the next bytes of segment seg.
func (d *Digester) Copied(seg int, b []byte) {
	if seg != d.seg {
		d.seg, d.crc, d.fill = seg, 0, 0
		d.rb, d.isObs = d.m.ObsRowBytes(seg, d.obs)
	}
	if !d.isObs || d.rb == 0 {
		return
	}
	for len(b) > 0 {
		n := min(len(b), d.rb-d.fill)
		d.crc = crc32.Update(d.crc, castagnoli, b[:n])
		d.fill += n
		b = b[n:]
		if d.fill == d.rb {
			d.out = binary.LittleEndian.AppendUint32(d.out, d.crc)
			d.crc, d.fill = 0, 0
		}
	}
}
