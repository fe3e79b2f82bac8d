package conn

import (
	"bytes"
	"net"
	"net/http"
	"testing"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
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

// TestCopyObserverSeesEveryByte: small and large messages, segments longer
// than a piece and than the write buffer: the observer is shown every byte
// of every segment once, in order, and the server gets the message intact.
func TestCopyObserverSeesEveryByte(t *testing.T) {
	for _, size := range []int{100, 3 * observedPiece / 2, 5 << 20} {
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
		ob := &collector{segs: map[int][]byte{}}
		if err := c.WriteMessageObserved(&m, ob); err != nil {
			t.Fatal(err)
		}
		if len(ob.order) != m.Segments() {
			t.Fatalf("size %d: shown segments %v of %d", size, ob.order, m.Segments())
		}
		for i := 0; i < m.Segments(); i++ {
			if ob.order[i] != i || !bytes.Equal(ob.segs[i], m.Segment(i)) {
				t.Fatalf("size %d: segment %d shown as %d bytes, is %d", size, i, len(ob.segs[i]), len(m.Segment(i)))
			}
		}
		if msg := <-got; !bytes.Equal(msg, m.AppendTo(nil)) {
			t.Fatalf("size %d: the server got %d bytes, not the message", size, len(msg))
		}
	}
}
