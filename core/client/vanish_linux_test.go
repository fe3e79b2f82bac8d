package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/internal/hostile"
)

// TestHostileVanish: a server whose machine vanishes (internal/hostile's
// Vanish scenarios: every packet from the client dropped unacknowledged,
// nothing more sent, no FIN or RST) is noticed within the dead-peer timeout,
// not at the receive deadline (the library waited the whole 300 s of it
// before, with its infer unacknowledged, and Go's keepalive took 151 s
// with it acknowledged, which it then called the receive deadline), and
// the client goes on on a new connection. A feedback or infer in flight
// is never resent (SPEC 7.6): the next infer starts afresh.
func TestHostileVanish(t *testing.T) {
	const dead = 2 * time.Second
	// Keepalive probes go once a second at the least, and the kernel
	// checks the bound at its timers: up to a probe's interval late.
	const late = 2 * time.Second
	for _, tc := range []struct {
		scenario hostile.Scenario
		idle     bool // wait between calls, not inside one
	}{
		{hostile.Vanish, false},
		{hostile.VanishUnacked, false},
		{hostile.VanishUnacked, true},
	} {
		name := string(tc.scenario)
		if tc.idle {
			name += "/between-calls"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := hostileServer(t, hostile.Config{Scenario: tc.scenario, VanishAfter: 2})
			c, err := hostileDial(t, s.URL(), func(o *client.Options) {
				o.ReceiveTimeout = time.Minute
				o.DeadPeerTimeout = dead
			})
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld()
			for i := 0; i < 2; i++ {
				if _, err := w.infer(c); err != nil {
					t.Fatalf("infer %d: %v", i, err)
				}
				if i == 1 && tc.idle {
					// The server vanished as it sent this action: the
					// connection is silent, and only keepalive can tell.
					time.Sleep(dead + late + 1500*time.Millisecond) // + the poller's look
					start := time.Now()
					err := w.feedback(c)
					within(t, "the feedback after the peer vanished", time.Since(start), 0)
					if err == nil || !strings.Contains(err.Error(), "dead-peer timeout") {
						t.Fatalf("feedback on a connection whose peer vanished: got %v, want the dead-peer timeout named", err)
					}
					break
				}
				if err := w.feedback(c); err != nil {
					t.Fatalf("feedback %d: %v", i, err)
				}
			}
			if !tc.idle {
				start := time.Now()
				_, err = w.infer(c)
				took := time.Since(start)
				t.Logf("infer after the peer vanished: %v after %v", err, took)
				within(t, "noticing the vanished peer", took, dead+late)
				if !errors.Is(err, client.ErrReconnected) || !strings.Contains(err.Error(), "dead-peer timeout") {
					t.Fatalf("infer to a vanished peer: got %v, want reconnected, naming the dead-peer timeout", err)
				}
			}
			// The next connection is Normal: act on it (an idle client's
			// first infer is the one that finds the connection gone).
			for i := 0; i < 2; i++ {
				_, err := w.infer(c)
				if tc.idle && i == 0 && errors.Is(err, client.ErrReconnected) {
					_, err = w.infer(c)
				}
				if err != nil {
					t.Fatalf("infer %d on the next connection: %v", i, err)
				}
				if err := w.feedback(c); err != nil {
					t.Fatalf("feedback %d on the next connection: %v", i, err)
				}
			}
			st := c.Stats()
			if st.Reconnects[client.CauseLost] != 1 || st.Reconnects[client.CauseTimeout] != 0 {
				t.Fatalf("reconnects by cause %v: want one, lost, and no timeout", st.Reconnects)
			}
		})
	}
}

// TestHostileNoReadOutlastsDeadPeer: a server that is there but takes no
// bytes keeps its window closed, which Linux's TCP_USER_TIMEOUT would end
// as it ends a vanished peer. The send timeout is the bound for that
// server, so the dead-peer timeout is lifted while a send waits: with the
// dead-peer timeout shorter than the send timeout, the send still ends at
// the send timeout, as a timeout (it ended at the dead-peer timeout, as a
// lost connection blaming the server's machine, before).
func TestHostileNoReadOutlastsDeadPeer(t *testing.T) {
	const send = 3 * time.Second
	s := hostileServer(t, hostile.Config{Scenario: hostile.NoRead})
	c, err := hostileDial(t, s.URL(), func(o *client.Options) {
		o.SendTimeout = send
		o.DeadPeerTimeout = time.Second
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = bigWorld().infer(c)
	took := time.Since(start)
	if !errors.Is(err, client.ErrTimeout) || strings.Contains(err.Error(), "dead-peer") {
		t.Fatalf("a server that does not read: got %v after %v, want the send timeout", err, took)
	}
	if took < send-100*time.Millisecond {
		t.Fatalf("the send ended after %v, before the send timeout of %v: %v", took, send, err)
	}
	within(t, "the send", took, send)
}

// TestHostileBriefOutage: a network that goes away for less than the
// dead-peer timeout and comes back (internal/hostile's Vanish with
// VanishFor) costs the connection nothing: the infer in flight gets its
// action once the server's machine is heard again (its acknowledgement
// or, unacknowledged, the client's kernel's next retransmission), and no
// reconnect is made.
func TestHostileBriefOutage(t *testing.T) {
	const outage = time.Second
	for _, sc := range []hostile.Scenario{hostile.Vanish, hostile.VanishUnacked} {
		t.Run(string(sc), func(t *testing.T) {
			t.Parallel()
			s := hostileServer(t, hostile.Config{Scenario: sc, VanishAfter: 2, VanishFor: outage})
			c, err := hostileDial(t, s.URL(), func(o *client.Options) {
				o.ReceiveTimeout = time.Minute
				o.DeadPeerTimeout = 4 * time.Second
			})
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld()
			for i := 0; i < 5; i++ {
				start := time.Now()
				if _, err := w.infer(c); err != nil {
					t.Fatalf("infer %d, across an outage of %v: %v after %v", i, outage, err, time.Since(start))
				}
				if took := time.Since(start); took > outage/2 {
					t.Logf("infer %d took %v: the outage", i, took)
				}
				if err := w.feedback(c); err != nil {
					t.Fatalf("feedback %d: %v", i, err)
				}
			}
			if st := c.Stats(); st.Reconnects != ([len(st.Reconnects)]uint64{}) || st.Exchanges != 5 {
				t.Fatalf("stats %+v: want 5 exchanges on one connection", st)
			}
		})
	}
}
