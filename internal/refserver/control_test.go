package refserver_test

// Control frames: pongs and the client's close frame.

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestPongAfterIdle: a client that pings after idling longer than the
// FeedbackTimeout gets its pong, and is still served. The pong used to go
// out under the write deadline left by the metadata write, long passed: it
// failed silently, and every later write on the connection failed with it.
func TestPongAfterIdle(t *testing.T) {
	_, url := start(t, refserver.Config{FeedbackTimeout: 200 * time.Millisecond})
	c := dial(t, url)
	time.Sleep(500 * time.Millisecond) // past the metadata write's deadline
	if err := ws.WriteFrame(c.nc, ws.MaskFrame(ws.NewPingFrame([]byte("idle")))); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, err := ws.ReadHeader(c.br)
	if err != nil || h.OpCode != ws.OpPong {
		t.Fatalf("after the ping: %+v, %v; want a pong", h, err)
	}
	p := make([]byte, h.Length)
	if _, err := c.br.Read(p); err != nil || string(p) != "idle" {
		t.Fatalf("pong payload %q, %v", p, err)
	}
	c.infer([]int64{0}, nil)
}

// TestPongWriteFailureEndsConnection: a client that pings and never reads
// fills the socket until a pong cannot be written within its deadline; the
// server then ends the connection and says so, rather than ignoring the
// failure and keeping a connection it can no longer write to.
func TestPongWriteFailureEndsConnection(t *testing.T) {
	s, url := start(t, refserver.Config{Logf: func(string, ...any) {}})
	// The socket buffers are left as they are: shrinking the client's
	// receive buffer after the window was advertised makes Linux drop the
	// server's segments, and with them the acks of the client's pings, so
	// that both sides stall with the server reading.
	nc := dialRaw(t, url).nc
	ping := ws.MaskFrame(ws.NewPingFrame(bytes.Repeat([]byte("p"), 125)))
	go func() {
		// Until the server cuts the connection (or the test ends).
		_ = nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		for ws.WriteFrame(nc, ping) == nil {
		}
	}()
	st := waitFor(t, s, "the connection to end", func(st refserver.Stats) bool { return len(st.Closes) == 1 })
	if cl := st.Closes[0]; cl.By != "server" || cl.Code != 0 || !strings.Contains(cl.Detail, "writing a pong") {
		t.Fatalf("close %+v, want the server to cut the connection on a failed pong", cl)
	}
}
