package conn

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// receiveScript receives from a connection reading data (in pieces of 7
// bytes) with the given message size cap.
func receiveScript(t *testing.T, max int64, data []byte) ([]byte, error) {
	t.Helper()
	c := newConn(&scriptTr{data: data, piece: 7}, Options{MaxMessageSize: max})
	defer c.Abort()
	msg, err := c.Receive(0)
	return bytes.Clone(msg), err
}

// TestMaxMessageSizeCountsFragments: the cap is on the message, not on each
// of its frames, and a message of exactly the cap is taken. A server that
// splits a message into fragments each under the cap must not get more
// past it than one frame could: mutants that compared each frame's length
// with the cap alone, or refused a message of exactly the cap, survived
// every other test (TestMaxMessageSize sends one frame 4 times the cap).
func TestMaxMessageSizeCountsFragments(t *testing.T) {
	const max = 1024
	payload := bytes.Repeat([]byte{0xab}, 3*max)
	for _, tc := range []struct {
		name   string
		frames []int // fragment lengths
		ok     bool
	}{
		{"one frame of the cap", []int{max}, true},
		{"one frame over it", []int{max + 1}, false},
		{"fragments adding up to the cap", []int{max / 2, max/2 - 1, 1}, true},
		{"fragments each under it, adding up to one byte more", []int{max / 2, max / 2, 1}, false},
		{"three fragments of 600", []int{600, 600, 600}, false},
		{"a last fragment that alone is over it", []int{1, max}, false},
	} {
		var data []byte
		total := 0
		for i, n := range tc.frames {
			op := ws.OpContinuation
			if i == 0 {
				op = ws.OpBinary
			}
			data = append(data, frame(op, i == len(tc.frames)-1, int64(n), payload[total:total+n])...)
			total += n
		}
		msg, err := receiveScript(t, max, data)
		switch {
		case tc.ok && (err != nil || len(msg) != total):
			t.Errorf("%s: got %d bytes, %v; want the %d-byte message", tc.name, len(msg), err, total)
		case !tc.ok && !errors.Is(err, ErrTooBig):
			t.Errorf("%s: got %d bytes, %v; want ErrTooBig for %d bytes past a cap of %d", tc.name, len(msg), err, total, max)
		}
	}
}

// TestLengthWithMostSignificantBit: RFC 6455 5.2 says the most significant
// bit of a 64-bit payload length must be 0. One that is set reads as a
// negative length, which must end the connection rather than deliver an
// empty message and then parse the payload as frames (a mutant dropping
// the check did exactly that, and survived).
func TestLengthWithMostSignificantBit(t *testing.T) {
	data := []byte{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 5}
	data = append(data, frame(ws.OpBinary, true, 2, []byte("hi"))...)
	for _, max := range []int64{0, 1 << 20} {
		if msg, err := receiveScript(t, max, data); err == nil {
			t.Errorf("cap %d: a length with its top bit set gave a %d-byte message %q and no error", max, len(msg), msg)
		}
	}
}

// TestTimeoutInsideMessage: a short timeout that passes between two
// fragments of one message leaves half a message read, so, unlike one
// between messages (TestReceiveTimeouts), it must end the connection: a
// later Receive would otherwise start at a continuation frame, or return
// the rest as a message of its own. A mutant that took every timeout
// while waiting for a header as one between messages survived.
func TestTimeoutInsideMessage(t *testing.T) {
	release, sent := make(chan struct{}), make(chan struct{})
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteFrame(c, ws.NewFrame(ws.OpBinary, false, []byte("first half, ")))
		close(sent)
		<-release
		_ = ws.WriteFrame(c, ws.NewFrame(ws.OpContinuation, true, []byte("second half")))
		_ = wsutil.WriteServerBinary(c, []byte("next"))
	})
	c := dialT(t, Options{URL: url})
	defer close(release)
	// The first half is in the client's socket (a loopback write has
	// delivered it when it returns) before the wait begins: the timeout
	// then passes inside the message however slowly the machine runs.
	<-sent
	if msg, err := c.Receive(100 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %q, %v; want a timeout", msg, err)
	}
	if c.Err() == nil {
		t.Fatal("a timeout in the middle of a message left the connection usable")
	}
}

// TestHugeTimeout: a timeout near the largest Duration means "wait", not
// "already passed": the deadline saturates instead of overflowing (a
// mutant that let it overflow survived).
func TestHugeTimeout(t *testing.T) {
	release := make(chan struct{})
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		<-release
		_ = wsutil.WriteServerBinary(c, []byte("late"))
	})
	c := dialT(t, Options{URL: url})
	// Once Receive has begun to wait, its deadline (the one the poller
	// enforces, at its next look, which may be up to idlePoll away) must
	// lie ahead; then the message is sent, and must be received.
	ahead := make(chan bool, 1)
	go func() {
		d := c.recvDeadline.Load()
		for d == 0 {
			time.Sleep(time.Millisecond)
			d = c.recvDeadline.Load()
		}
		ahead <- d > int64(mono())
		close(release)
	}()
	if msg, err := c.Receive(time.Duration(math.MaxInt64)); err != nil || string(msg) != "late" {
		t.Fatalf("Receive(MaxInt64): %q, %v; want the message", msg, err)
	}
	if !<-ahead {
		t.Fatal("Receive(MaxInt64) set a deadline that had already passed")
	}
}

// TestBadControlFrameWhileIdle: a control frame that breaks RFC 6455 (a
// fragmented ping, a masked one, one with reserved bits) fails the
// connection when the poll between calls finds it, as it does when
// Receive reads it. A mutant that dropped that check on the poll path
// survived: the frame was answered as a ping. The loop waits for the
// frame to arrive; its limit is against a hang, not a timing assertion.
func TestBadControlFrameWhileIdle(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    ws.Header
	}{
		{"fragmented ping", ws.Header{Fin: false, OpCode: ws.OpPing, Length: 1}},
		{"masked ping", ws.Header{Fin: true, OpCode: ws.OpPing, Length: 1, Masked: true, Mask: [4]byte{1, 2, 3, 4}}},
		{"ping with RSV1", ws.Header{Fin: true, Rsv: 4, OpCode: ws.OpPing, Length: 1}},
	} {
		url := rawServer(t, func(c net.Conn, _ *http.Request) {
			_ = wsutil.WriteServerBinary(c, []byte("metadata"))
			_ = ws.WriteHeader(c, tc.h)
			_, _ = c.Write([]byte{'p'})
			_, _ = io.Copy(io.Discard, c)
		})
		c := dialT(t, Options{URL: url})
		if _, err := c.Receive(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(5 * time.Second); c.Err() == nil && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
			c.PollNow()
		}
		if !errors.Is(c.Err(), ErrProtocol) {
			t.Errorf("%s between calls: the connection's error is %v, want a protocol violation", tc.name, c.Err())
		}
	}
}
