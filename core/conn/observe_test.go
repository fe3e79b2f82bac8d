package conn

import (
	"bytes"
	"net"
	"net/http"
	"testing"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/maskcopy"
	"github.com/plugrl/libplugrl/core/wire"
)

// collector keeps what a CopyObserver is shown, per segment.
type collector struct {
	segs  map[int][]byte
	order []int
}

func (c *collector) Copied(seg int, b []byte) {
	if n := len(c.order); n == 0 || c.order[n-1] != seg {
		c.order = append(c.order, seg)
	}
	c.segs[seg] = append(c.segs[seg], b...)
}

// copyingCollector is a collector that makes the masked copies itself
// (a MaskCopier), counting the bytes it copied.
type copyingCollector struct {
	collector
	copied int
}

func (c *copyingCollector) MaskCopy(seg int, dst, src []byte, key uint32) {
	maskcopy.Copy(dst, src, key)
	c.copied += len(src)
	c.Copied(seg, src)
}

type observer interface {
	CopyObserver
	shown() *collector
}

func (c *collector) shown() *collector { return c }

// TestCopyObserverSeesEveryByte: large messages, segments longer than a
// piece and than the write buffer: the observer is shown every byte of
// every segment once, in order, and the server gets the message intact; a
// MaskCopier makes the copies of the long segments, correctly masked. A
// small message is sent intact and shown to no one.
func TestCopyObserverSeesEveryByte(t *testing.T) {
	for _, tc := range []struct {
		size    int
		copying bool
	}{{100, false}, {3 * observedPiece / 2, false}, {5 << 20, false}, {100, true}, {3 * observedPiece / 2, true}, {5 << 20, true}} {
		size := tc.size
		got := make(chan []byte, 1)
		url := rawServer(t, func(c net.Conn, _ *http.Request) {
			msg, _ := wsutil.ReadClientBinary(c)
			got <- msg
			_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))
		})
		c := dialT(t, Options{URL: url})
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 31)
		}
		var m wire.Message
		m.Map(1)
		m.Str("x")
		if err := m.Array(&wire.Array{DType: wire.Uint8, Shape: []int{size}, Data: data}); err != nil {
			t.Fatal(err)
		}
		m.Finish()
		var ob observer = &collector{segs: map[int][]byte{}}
		cc := &copyingCollector{collector: collector{segs: map[int][]byte{}}}
		if tc.copying {
			ob = cc
		}
		if err := c.WriteMessageObserved(&m, ob); err != nil {
			t.Fatal(err)
		}
		if tc.copying && size > smallMessage && cc.copied < size {
			t.Fatalf("size %d: the MaskCopier copied %d bytes of the %d-byte array", size, cc.copied, size)
		}
		if tc.copying && size <= smallMessage && cc.copied != 0 {
			t.Fatalf("size %d: a small message's segments went to MaskCopy", size)
		}
		shown := ob.shown()
		if size <= smallMessage {
			if len(shown.order) != 0 {
				t.Fatalf("size %d: a small message's segments %v were shown", size, shown.order)
			}
		} else if len(shown.order) != m.Segments() {
			t.Fatalf("size %d: shown segments %v of %d", size, shown.order, m.Segments())
		}
		for i := 0; i < len(shown.order); i++ {
			if shown.order[i] != i || !bytes.Equal(shown.segs[i], m.Segment(i)) {
				t.Fatalf("size %d: segment %d shown as %d bytes, is %d", size, i, len(shown.segs[i]), len(m.Segment(i)))
			}
		}
		if msg := <-got; !bytes.Equal(msg, m.AppendTo(nil)) {
			t.Fatalf("size %d: the server got %d bytes, not the message", size, len(msg))
		}
	}
}
