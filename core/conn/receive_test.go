package conn

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws/wsutil"
)

// TestReceiveTimeouts: a short timeout is the socket's and leaves the
// connection usable; a long one is the poller's, to at its deadline,
// and ends the connection. Either way the error is ErrTimeout.
func TestReceiveTimeouts(t *testing.T) {
	release := make(chan struct{})
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		<-release
		_ = wsutil.WriteServerBinary(c, []byte("late"))
		time.Sleep(2 * time.Second)
	})
	c := dialT(t, Options{URL: url})

	start := time.Now()
	_, err := c.Receive(100 * time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > time.Second {
		t.Fatalf("a 100 ms timeout took %v", d)
	}
	close(release)
	if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "late" {
		t.Fatalf("after a short timeout: %q, %v; want the message", msg, err)
	}

	start = time.Now()
	_, err = c.Receive(watchedTimeout)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	// A poller's look held up more than lateSlack (a loaded machine: a
	// stall of 15 ms is enough) gives the Receive lateGrace more, by design
	// (see idleLook); only a look on time ends it within 50 ms.
	if d := time.Since(start); d < watchedTimeout || d > watchedTimeout+lateGrace+50*time.Millisecond {
		t.Fatalf("a %v timeout took %v", watchedTimeout, d)
	}
	if !errors.Is(c.Err(), ErrTimeout) {
		t.Fatalf("after a long timeout the connection's error is %v, want a timeout", c.Err())
	}
}
