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
