package conn

import (
	"bytes"
	"testing"

	"github.com/gobwas/ws"
)

// writeCountTr is a scriptTr that counts the writes made on it.
type writeCountTr struct {
	scriptTr
	writes, written int
}

func (w *writeCountTr) TryWrite(p []byte) (int, error) {
	w.writes++
	w.written += len(p)
	return len(p), nil
}

func (w *writeCountTr) Write(p []byte) (int, error) { return w.TryWrite(p) }

// TestPingsReadTogetherShareAPong: pings that arrive together, in one
// read, are answered with one pong (RFC 6455 5.5.3 lets the latest ping's
// pong answer them all). A pong written per ping made a server's flood of
// 2-byte empty pings cost the client a system call per 2 bytes received
// (1.7 us of CPU each, 80 times the CPU per byte of a flood of data
// frames), sent three bytes back for each byte received, and, as one
// 64 KiB read of them took some 55 ms to answer, carried a 200 ms
// Receive to 308 ms.
func TestPingsReadTogetherShareAPong(t *testing.T) {
	ping := ws.MustCompileFrame(ws.NewPingFrame(nil))
	data := bytes.Repeat(ping, 10000)
	data = append(data, ws.MustCompileFrame(ws.NewBinaryFrame([]byte("action")))...)
	tr := &writeCountTr{scriptTr: scriptTr{data: data, piece: readBufferSize}}
	c := newConn(tr, Options{})
	msg, err := c.Receive(0)
	if err != nil || string(msg) != "action" {
		t.Fatalf("got %q, %v", msg, err)
	}
	c.Poll()
	if tr.writes == 0 {
		t.Fatal("the pings were not answered")
	}
	if tr.writes > 2 {
		t.Fatalf("10000 pings read at once were answered with %d writes (%d bytes); want one pong for them all", tr.writes, tr.written)
	}
}
