package refserver_test

// Control frames: pongs and the client's close frame.

import (
	"bytes"
	"io"
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

// TestClientCloseCodes: the server echoes a client's close code only when
// it is one a close frame may carry (RFC 6455 7.4), and answers any other
// with 1002. It used to echo 1005, 1006, 1015 and out-of-range codes.
func TestClientCloseCodes(t *testing.T) {
	cases := []struct {
		body []byte
		want ws.StatusCode // 0: an empty close body
	}{
		{nil, 0},
		{ws.NewCloseFrameBody(1000, "done"), 1000},
		{ws.NewCloseFrameBody(1001, ""), 1001},
		{ws.NewCloseFrameBody(1011, ""), 1011},
		{ws.NewCloseFrameBody(1013, ""), 1013},
		{ws.NewCloseFrameBody(3000, ""), 3000},
		{ws.NewCloseFrameBody(4999, ""), 4999},
		{ws.NewCloseFrameBody(1004, ""), 1002},
		{ws.NewCloseFrameBody(1005, ""), 1002},
		{ws.NewCloseFrameBody(1006, ""), 1002},
		{ws.NewCloseFrameBody(1015, ""), 1002},
		{ws.NewCloseFrameBody(999, ""), 1002},
		{ws.NewCloseFrameBody(2000, ""), 1002},
		{ws.NewCloseFrameBody(5000, ""), 1002},
		{[]byte{0x03}, 1002},
	}
	_, url := start(t, refserver.Config{Logf: func(string, ...any) {}})
	for _, tc := range cases {
		c := dial(t, url)
		if err := ws.WriteFrame(c.nc, ws.MaskFrame(ws.NewCloseFrame(tc.body))); err != nil {
			t.Fatal(err)
		}
		h, err := ws.ReadHeader(c.br)
		if err != nil || h.OpCode != ws.OpClose {
			t.Fatalf("close %x: reply %+v, %v", tc.body, h, err)
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(c.br, p); err != nil {
			t.Fatal(err)
		}
		got, _ := ws.ParseCloseFrameData(p)
		if got != tc.want || (tc.want == 0 && len(p) != 0) {
			t.Errorf("client closed with body %x: server answered %x (code %d), want code %d", tc.body, p, got, tc.want)
		}
	}
}
