package conn

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// TestIdleLookAnswersTheServersClose: a server's close that arrives while
// nobody reads is found by the idle poller's look, which holds the write
// side as well as the read side; the close must still be answered with a
// close (RFC 6455 5.5.1), not only the socket shut. The look's own hold
// of the write lock made the answer's try for it fail, and the server saw
// the connection end without one. So did a violation the look found (a
// data message when no reply was due), which is answered 1002.
func TestIdleLookAnswersTheServersClose(t *testing.T) {
	t.Run("close", func(t *testing.T) { idleLookAnswers(t, stopClose, ws.StatusNormalClosure) })
	t.Run("violation", func(t *testing.T) {
		idleLookAnswers(t, ws.NewBinaryFrame([]byte("unasked")), ws.StatusProtocolError)
	})
}

// idleLookAnswers: the server sends frame while the client is idle, and
// the idle look must answer with a close frame of code want.
func idleLookAnswers(t *testing.T, frame ws.Frame, want ws.StatusCode) {
	sent := make(chan struct{})
	answer := make(chan error, 1)
	url := rawServer(t, func(s net.Conn, r *http.Request) {
		_ = wsutil.WriteServerBinary(s, []byte("metadata"))
		_ = ws.WriteFrame(s, frame)
		close(sent)
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			h, err := ws.ReadHeader(s)
			if err != nil {
				answer <- err
				return
			}
			p := make([]byte, h.Length)
			if _, err := io.ReadFull(s, p); err != nil {
				answer <- err
				return
			}
			if h.OpCode == ws.OpClose {
				ws.Cipher(p, h.Mask, 0)
				if code, _ := ws.ParseCloseFrameData(p); code != want {
					answer <- &CloseError{Code: int(code)}
					return
				}
				answer <- nil
				return
			}
		}
	})
	c := dialT(t, Options{URL: url})
	c.stopPolling() // this test makes the poller's look itself
	if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "metadata" {
		t.Fatalf("metadata: %q, %v", msg, err)
	}
	<-sent
	// Look until the look finds what the server sent (it is on its way
	// over loopback), as the poller would at its next tick.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, open := c.idleLook(); !open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the look did not end the connection in 5 s")
		}
	}
	if err := <-answer; err != nil {
		t.Fatalf("seen by the idle look: the server got %v; want a close frame with code %d", err, want)
	}
}
