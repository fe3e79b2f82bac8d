package conn

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// TestPollGraceCountsFromLastLook: Poll's grace counts from the
// connection's last read of its socket, not from the start of the last
// Receive. After a Receive that waited longer than pollGrace (a slow
// server), a Poll right after ReceiveEnded makes no system call; a Poll
// that read starts a grace of its own; and past the grace a Poll reads
// and sees what arrived (here the server's close).
func TestPollGraceCountsFromLastLook(t *testing.T) {
	closeNow, closed := make(chan struct{}), make(chan struct{})
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte("metadata")))
		<-closeNow
		_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, "bye")))
		close(closed) // on loopback the frame is in the client's socket now
		_, _ = io.Copy(io.Discard, c)
	})
	var ctr Counters
	c := dialT(t, Options{URL: url, Counters: &ctr})
	if _, err := c.Receive(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.wmu.Lock() // keeps the idle poller out (see TestPollNowWithinGrace)
	defer c.wmu.Unlock()
	longAgo := func() time.Duration { return mono() - 10*pollGrace }

	// A Receive that began long ago and has just ended: the look right
	// after it reads nothing. A descheduled test thread may take longer
	// than the grace between the two; only a read within it fails.
	skipped := false
	for try := 0; try < 20 && !skipped; try++ {
		c.lastRecv, c.lastLook = longAgo(), longAgo()
		before := ctr.PollReads.Load()
		ended := mono()
		c.ReceiveEnded(ended)
		c.Poll()
		if ctr.PollReads.Load() == before {
			skipped = true
		} else if mono()-ended < pollGrace {
			t.Fatalf("Poll read the socket %v after ReceiveEnded, within the %v grace", mono()-ended, pollGrace)
		}
	}
	if !skipped {
		t.Fatal("Poll read the socket after ReceiveEnded in 20 tries: the grace counts from the Receive's start")
	}
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	// An earlier reading than the last look changes nothing.
	c.lastLook = mono()
	kept := c.lastLook
	c.ReceiveEnded(kept - time.Second)
	if c.lastLook != kept {
		t.Fatalf("ReceiveEnded moved the last look back from %v to %v", kept, c.lastLook)
	}

	// A Poll past the grace reads, and its read is the new last look.
	c.lastLook = longAgo()
	before, start := ctr.PollReads.Load(), mono()
	c.Poll()
	if got := ctr.PollReads.Load() - before; got != 1 {
		t.Fatalf("a Poll past the grace read %d times, want 1", got)
	}
	if c.lastLook < start {
		t.Fatalf("the Poll that read left the last look at %v, before its start %v", c.lastLook, start)
	}

	// Past the grace a Poll sees the close that arrived meanwhile.
	close(closeNow)
	<-closed
	c.lastLook = longAgo()
	c.Poll()
	var ce *CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != 1001 {
		t.Fatalf("Poll past the grace: %v, want the server's close 1001", c.Err())
	}
}
