package conn

import (
	"errors"
	"net"
	"sync"
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
	url, closeNow, closed := closingServer(t)
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

// TestPollOverTLSAlwaysReads: over TLS the close a server sent right
// after the action, in the same TCP segment, is taken from the socket by
// the Receive's crypto/tls read, which returns only the action's record;
// the close waits in crypto/tls, where only a Poll that reads finds it.
// So over TLS the look after the action reads, whether the action came
// fast or slow; with the grace of plain TCP it looked only at rb, and the
// feedback went to a connection the server had closed (a slow server,
// since cc1ebc3; a fast one, always before).
func TestPollOverTLSAlwaysReads(t *testing.T) {
	for _, slow := range []bool{false, true} {
		name := "fast server"
		if slow {
			name = "slow server"
		}
		t.Run(name, func(t *testing.T) { pollAfterTLSAction(t, slow) })
	}
}

func pollAfterTLSAction(t *testing.T, slow bool) {
	c, send, _ := heldTLSConn(t, []ws.Frame{
		ws.NewBinaryFrame([]byte("action")),
		ws.NewCloseFrame(ws.NewCloseFrameBody(1001, "bye")),
	}, 0)
	c.wmu.Lock() // keeps the idle poller out (see TestPollNowWithinGrace)
	defer c.wmu.Unlock()
	c.ExpectMessage()
	close(send)
	start := mono() // a fast server: the Receive began just now
	if slow {
		start -= 10 * pollGrace // a Receive that began long ago
	}
	if msg, err := c.ReceiveFrom(start, 5*time.Second); err != nil || string(msg) != "action" {
		t.Fatalf("Receive: %q, %v", msg, err)
	}
	c.ReceiveEnded(mono())
	c.Poll()
	var ce *CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != 1001 {
		t.Fatalf("the look after the action: %v, want the close 1001 that came with it", c.Err())
	}
}

// segmentConn is a server's connection whose writes, between gather and
// flush, leave in one write.
type segmentConn struct {
	net.Conn
	mu       sync.Mutex
	gathered bool
	buf      []byte
}

func (s *segmentConn) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gathered {
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	return s.Conn.Write(p)
}

func (s *segmentConn) gather() {
	s.mu.Lock()
	s.gathered = true
	s.mu.Unlock()
}

func (s *segmentConn) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gathered = false
	_, _ = s.Conn.Write(s.buf)
	s.buf = nil
}

type segmentListener struct {
	net.Listener
	got chan<- *segmentConn
}

func (l segmentListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &segmentConn{Conn: c}
	select {
	case l.got <- sc:
	default:
	}
	return sc, nil
}
