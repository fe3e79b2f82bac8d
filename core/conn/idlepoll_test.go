package conn

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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
	url := rawServer(t, func(c net.Conn, _ *http.Request) { pingThenTimePong(c, pongs) })
	idle.mu.Lock()
	looks0 := idle.ticks
	idle.mu.Unlock()
	t0 := time.Now()
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = dialT(t, Options{URL: url})
	}
	pongsFromOnePoller(t, pongs, n, looks0, t0)
	listed := func(c *Conn) bool { // between ticks, when conns is the whole set
		for {
			idle.mu.Lock()
			if !idle.running {
				defer idle.mu.Unlock()
				return slices.Contains(idle.conns, c)
			}
			idle.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}
	for i, c := range conns {
		if c.poller != &idle || !listed(c) {
			t.Fatalf("connection %d is not in the process's poller's set", i)
		}
	}
	for _, c := range conns[:n/2] {
		c.Close(time.Second)
		if listed(c) {
			t.Fatal("a closed connection is still in the poller's set")
		}
	}
	for _, c := range conns[n/2:] {
		c.Abort()
	}
	waitTickerEmpty(t, &idle, 5*idlePoll, "the poller, after every connection of this test closed (has another test left one open?)")
}

// TestIdlePollerTLS: wss:// connections share the process's poller too
// (their looks never wait: see tlsTransport.NeverWaits). Each one's ping
// is answered while nobody reads, with one look a second for all of them:
// a poller per TLS connection, as before, woke the process once a second
// for each, and 64 idle wss:// handles cost 0.6 % of a core against 0.04
// % for ws:// (CTest hostile_tls, case idle-cpu).
func TestIdlePollerTLS(t *testing.T) {
	const n = 8
	pongs := make(chan time.Duration, n)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer c.Close()
		pingThenTimePong(c, pongs)
	}))
	defer srv.Close()
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	idle.mu.Lock()
	looks0 := idle.ticks
	idle.mu.Unlock()
	t0 := time.Now()
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = dialT(t, Options{URL: url, TLS: &tls.Config{RootCAs: pool}})
		if conns[i].poller != &idle {
			t.Fatalf("wss:// connection %d has a poller of its own; want the process's", i)
		}
	}
	pongsFromOnePoller(t, pongs, n, looks0, t0)
	for _, c := range conns {
		c.Abort()
	}
	waitTickerEmpty(t, &idle, 5*idlePoll, "the poller, after every connection of this test closed (has another test left one open?)")
}

// waitTickerEmpty waits up to limit for p to hold no connection and to
// have stopped ticking, and fails the test naming what if it does not.
func waitTickerEmpty(t *testing.T, p *connTicker, limit time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		p.mu.Lock()
		left, ticking := len(p.conns), p.ticking
		p.mu.Unlock()
		if left == 0 && !ticking {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %d connections listed (ticking %v) after %v", what, left, ticking, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pingThenTimePong is a server's side of a connection: it pings, then
// reads frames until the connection ends or a close frame arrives, and
// reports how long after the ping each pong came.
func pingThenTimePong(c net.Conn, pongs chan<- time.Duration) {
	t0 := time.Now()
	if err := ws.WriteFrame(c, ws.NewPingFrame([]byte("p"))); err != nil {
		return
	}
	for {
		f, err := ws.ReadFrame(c)
		if err != nil || f.Header.OpCode == ws.OpClose {
			return
		}
		if f.Header.OpCode == ws.OpPong {
			pongs <- time.Since(t0)
		}
	}
}

// pongsFromOnePoller waits for n pongs, each within 3 idlePolls of its
// ping, and checks that the process's poller looked once an idlePoll for
// all of them since t0 (its tick count then was looks0).
func pongsFromOnePoller(t *testing.T, pongs <-chan time.Duration, n int, looks0 int, t0 time.Time) {
	t.Helper()
	for i := range n {
		select {
		case d := <-pongs:
			if d > 3*idlePoll {
				t.Fatalf("pong %d after %v; want one within 3 idlePolls (%v each)", i, d, idlePoll)
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
}
