package conn

import (
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// TestIdlePoller: idle connections share one poller. It answers every
// one's ping while nobody reads, with one look a second for all of them
// (not one each); a closed connection is let go of at once, and once none
// is open the poller stops.
func TestIdlePoller(t *testing.T) {
	const n = 16
	pongs := make(chan time.Duration, n)
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		t0 := time.Now()
		if err := ws.WriteFrame(c, ws.NewPingFrame([]byte("p"))); err != nil {
			return
		}
		for {
			f, err := ws.ReadFrame(c)
			if err != nil {
				return
			}
			if f.Header.OpCode == ws.OpPong {
				pongs <- time.Since(t0)
			}
			if f.Header.OpCode == ws.OpClose {
				return
			}
		}
	})
	idle.mu.Lock()
	looks0 := idle.ticks
	idle.mu.Unlock()
	t0 := time.Now()
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = dialT(t, Options{URL: url})
	}
	for i := range n {
		select {
		case d := <-pongs:
			if d > 3*idlePoll {
				t.Fatalf("pong %d after %v; want one within two looks (idlePoll %v)", i, d, idlePoll)
			}
		case <-time.After(10 * idlePoll):
			t.Fatalf("%d of %d pings answered", i, n)
		}
	}
	idle.mu.Lock()
	looks := idle.ticks - looks0
	idle.mu.Unlock()
	if most := int(time.Since(t0)/idlePoll) + 2; looks > most {
		t.Fatalf("%d looks in %v for %d idle connections; want at most %d, one a second for all", looks, time.Since(t0), n, most)
	}
	listed := func(c *Conn) bool {
		idle.mu.Lock()
		defer idle.mu.Unlock()
		return slices.Contains(idle.conns, c)
	}
	for _, c := range conns[:n/2] {
		c.Close(time.Second)
		if listed(c) {
			t.Fatal("a closed connection is still in the poller's list")
		}
	}
	for _, c := range conns[n/2:] {
		c.Abort()
	}
	deadline := time.Now().Add(5 * idlePoll)
	for {
		idle.mu.Lock()
		left, ticking := len(idle.conns), idle.ticking
		idle.mu.Unlock()
		if left == 0 && !ticking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the poller still lists %d connections (ticking %v) after every one was closed", left, ticking)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
