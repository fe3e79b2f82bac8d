package conn

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestLengthMSBIsProtocolError: a 64-bit payload length with its most
// significant bit set breaks RFC 6455 5.2 ("the most significant bit MUST
// be 0"), which is the server's violation, as a reserved opcode or an RSV
// bit is: the connection fails with ErrProtocol and a close 1002, whether
// Receive or a look between calls (Poll) finds it. Taken for a transport
// error, it was ErrLost ("connection lost: reading: header error: ..."),
// which the client reports as a lost connection and reconnects from
// (PLUGRL_RECONNECTED, reconnects_lost, and an open wait that tries again),
// where plugrl.h has a malformed message from the server be
// PLUGRL_PROTOCOL_ERROR; and no close frame was sent.
func TestLengthMSBIsProtocolError(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   byte
		idle bool // found by a look between calls, not by Receive
	}{
		{"binary, in Receive", 0x82, false},
		{"ping, in Receive", 0x89, false},
		{"binary, between calls", 0x82, true},
		{"ping, between calls", 0x89, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := make(chan int, 1)
			url := rawServer(t, func(c net.Conn, _ *http.Request) {
				if tc.idle {
					_ = wsutil.WriteServerBinary(c, []byte("metadata"))
				}
				_, _ = c.Write([]byte{tc.op, 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 'x'})
				answer <- readCloseCode(c)
				_, _ = io.Copy(io.Discard, c)
			})
			c := dialT(t, Options{URL: url})
			var err error
			if tc.idle {
				if _, err := c.Receive(5 * time.Second); err != nil {
					t.Fatal(err)
				}
				for end := time.Now().Add(5 * time.Second); c.Err() == nil && time.Now().Before(end); {
					time.Sleep(time.Millisecond)
					c.PollNow()
				}
				err = c.Err()
			} else {
				_, err = c.Receive(5 * time.Second)
			}
			if !errors.Is(err, ErrProtocol) || errors.Is(err, ErrLost) {
				t.Errorf("a 64-bit length with its top bit set: %v; want a protocol violation, not a lost connection", err)
			}
			select {
			case code := <-answer:
				if code != int(ws.StatusProtocolError) {
					t.Errorf("the client answered with close code %d, want 1002 (RFC 6455 7.4.1)", code)
				}
			case <-time.After(5 * time.Second):
				t.Error("no answer from the client")
			}
		})
	}
}

// TestCloseBeforeResetSeenByAFailedWrite: a server that ends the run
// (SPEC 7.1: close 1001 "plugrl-server-stop") and then resets the
// connection (it closed its socket with the client's bytes unread, or
// with SO_LINGER 0) between the client's look before a send and the send.
// The send fails (ECONNRESET, EPIPE), and the stop is already in the
// client's socket, readable: the kernel returns what had arrived before
// the error. The connection's error was the write's, ErrLost, which the
// client reports as a lost connection and reconnects from, where the
// server said to stop (PLUGRL_STOPPED, SPEC 7.1: exit, do not
// reconnect). The error must be the server's close.
func TestCloseBeforeResetSeenByAFailedWrite(t *testing.T) {
	closed := make(chan struct{})
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = wsutil.WriteServerBinary(c, []byte("metadata"))
		_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusGoingAway, "plugrl-server-stop")))
		// An abortive close: RST, not FIN, so that the next send fails.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
		close(closed)
	})
	c := dialT(t, Options{URL: url})
	// No idle look between the metadata and the send: the close must be
	// found by the send's failure, as it is when it arrives just after
	// the client's own look before the send.
	c.stopPolling()
	if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "metadata" {
		t.Fatalf("metadata: %q, %v", msg, err)
	}
	<-closed
	var err error
	for end := time.Now().Add(5 * time.Second); err == nil && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond) // the reset is on its way over loopback
		var m wire.Message
		m.Str("feedback")
		m.Finish()
		err = c.WriteMessage(&m)
	}
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != 1001 || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("a send after the server's stop and reset: %v; want the server's close 1001 plugrl-server-stop", err)
	}
}
