package conn

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// lateServer sends metadata, then, on each value from send, frames of the
// message it names ("whole", "half", "pings"), and reports on sent once
// they are written (a loopback write has delivered them when it returns).
func lateServer(t *testing.T, send <-chan string, sent chan<- struct{}) string {
	return rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = wsutil.WriteServerBinary(c, []byte("metadata"))
		for what := range send {
			switch what {
			case "whole":
				_ = wsutil.WriteServerBinary(c, []byte("action"))
			case "half":
				_ = ws.WriteHeader(c, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: 8})
				_, _ = c.Write([]byte("acti"))
			case "pings":
				// A flood of pings, faster than any reader: until the
				// client goes away.
				frame := ws.MustCompileFrame(ws.NewPingFrame([]byte("p")))
				var batch []byte
				for len(batch) < 256<<10 {
					batch = append(batch, frame...)
				}
				sent <- struct{}{}
				for {
					if _, err := c.Write(batch); err != nil {
						return
					}
				}
			}
			sent <- struct{}{}
		}
	})
}

// lateConn connects to a lateServer and reads its metadata: the
// connection then waits for a message (ExpectMessage) the test has the
// server send.
func lateConn(t *testing.T, send <-chan string, sent chan<- struct{}) *Conn {
	t.Helper()
	c := dialT(t, Options{URL: lateServer(t, send, sent)})
	if _, err := c.Receive(time.Second); err != nil {
		t.Fatal(err)
	}
	c.Release()
	c.ExpectMessage()
	return c
}

// waitArrived waits (up to 10 s) until c's socket holds n bytes, where
// the platform can tell (socketQueued): a loopback write has usually
// delivered its bytes when it returns, but a loaded kernel may defer that.
func waitArrived(t *testing.T, c *Conn, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if q, ok := socketQueued(c); !ok || q >= n {
			return
		}
	}
	t.Fatalf("%d bytes the server wrote had not reached the client's socket after 10 s", n)
}

// TestReceiveTakesWhatArrivedBeforeItLooked: a Receive whose deadline had
// passed before it could look (its thread stopped, in a debugger or by
// SIGSTOP, since the wait began) returns a message that is waiting whole
// in its socket. Before, it timed out and the connection was dropped with
// the message in it.
func TestReceiveTakesWhatArrivedBeforeItLooked(t *testing.T) {
	send, sent := make(chan string), make(chan struct{})
	defer close(send)
	c := lateConn(t, send, sent)
	send <- "whole"
	<-sent
	waitArrived(t, c, 8) // 2 bytes of header, "action"
	// The wait began a second ago, with a 100 ms timeout: the socket's
	// deadline (under watchedTimeout) passed 900 ms ago.
	msg, err := c.ReceiveFrom(mono()-time.Second, 100*time.Millisecond)
	if err != nil || string(msg) != "action" {
		t.Fatalf("got %q, %v; want the action that was waiting", msg, err)
	}
	c.Release()
}

// TestLateLookTakesNoMoreThanHasArrived: past its deadline a Receive
// waits for nothing. Half a message waiting is a timeout in the middle of
// a message (the connection fails); nothing waiting is a timeout between
// messages (the connection goes on, and a message that comes later is
// received).
func TestLateLookTakesNoMoreThanHasArrived(t *testing.T) {
	send, sent := make(chan string), make(chan struct{})
	defer close(send)
	c := lateConn(t, send, sent)
	if msg, err := c.ReceiveFrom(mono()-time.Second, 100*time.Millisecond); !errors.Is(err, ErrTimeout) || c.Err() != nil {
		t.Fatalf("nothing waiting: got %q, %v (connection: %v); want a timeout that leaves it usable", msg, err, c.Err())
	}
	send <- "whole"
	<-sent
	if msg, err := c.Receive(time.Second); err != nil || string(msg) != "action" {
		t.Fatalf("after a timeout between messages: got %q, %v; want the action", msg, err)
	}
	c.Release()
	c.ExpectMessage()
	send <- "half"
	<-sent
	waitArrived(t, c, 6) // 2 bytes of header, "acti"
	if msg, err := c.ReceiveFrom(mono()-time.Second, 100*time.Millisecond); !errors.Is(err, ErrTimeout) || c.Err() == nil {
		t.Fatalf("half a message waiting: got %q, %v (connection: %v); want a timeout that fails it", msg, err, c.Err())
	}
}

// TestLateLookEndsUnderAFlood: a server that never stops sending (pings
// faster than the client reads them) cannot keep a Receive past its
// deadline: the last look reads for at most lateGrace. Without that bound
// the Receive never returned. The limit is a hang guard, not a timing
// assertion.
func TestLateLookEndsUnderAFlood(t *testing.T) {
	send, sent := make(chan string, 1), make(chan struct{}, 1)
	c := lateConn(t, send, sent)
	send <- "pings"
	<-sent
	done := make(chan error, 1)
	go func() {
		_, err := c.ReceiveFrom(mono()-time.Second, 100*time.Millisecond)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("got %v, want a timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a Receive past its deadline under a flood of pings did not return")
	}
	close(send)
}

// TestLatePollerLookGivesGrace: the poller, looking at a watched deadline
// later than lateSlack (the process could not run at it), gives the
// Receive lateGrace once, marked by an odd deadline; at the grace's end
// it ends the connection. The deadline is set by hand, as a Receive
// stopped since it began would have it, and the looks are called as the
// poller calls them.
func TestLatePollerLookGivesGrace(t *testing.T) {
	send, sent := make(chan string), make(chan struct{})
	defer close(send)
	c := lateConn(t, send, sent)
	d := int64(mono()-time.Second) &^ 1
	c.recvDeadline.Store(d)
	if _, open := c.idleLook(); !open {
		t.Fatalf("a look a second late ended the connection (%v); want a grace", c.Err())
	}
	g := c.recvDeadline.Load()
	if g&1 == 0 || g <= d || time.Duration(g) > mono()+lateGrace {
		t.Fatalf("after a late look the deadline is %d (was %d, now %d); want an odd one within lateGrace", g, d, int64(mono()))
	}
	for mono() <= time.Duration(g) {
		time.Sleep(time.Millisecond)
	}
	// However late this look is, the grace was given once.
	if _, open := c.idleLook(); open || !errors.Is(c.Err(), ErrTimeout) {
		t.Fatalf("a look past the grace left the connection open (%v); want it ended by the timeout", c.Err())
	}
	if c.recvDeadline.Load() != 0 {
		t.Fatal("the look that ended the connection left the deadline set")
	}
}
