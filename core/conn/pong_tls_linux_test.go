//go:build linux

package conn

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// TestQueuedPongDuringReceive: a ping arrives while the caller is in
// Receive and the socket is full (the server is slow to read a burst of
// messages), so the reader's TryWrite finds no room and queues the pong.
// The server then reads everything and waits for the pong, sending
// nothing. Over ws:// the poller's look sends it within a second; over
// wss://, where the look leaves a connection being read alone, the reader
// itself tries again every ctlRetry (it waited for its deadline, 20 s
// here, before: found by review).
func TestQueuedPongDuringReceive(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		name := "ws"
		if tlsOn {
			name = "wss"
		}
		t.Run(name, func(t *testing.T) {
			filled := make(chan struct{})
			pong := make(chan time.Duration, 1)
			// Closed when the handler has returned, its last log written:
			// srv.Close does not wait for a hijacked connection's handler,
			// and a t.Logf after the subtest ended is a data race (go test
			// -race blamed the next test, TestReceiveTimeouts, once in CI).
			handled := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(handled)
				c, _, _, err := ws.UpgradeHTTP(r, w)
				if err != nil {
					return
				}
				defer c.Close()
				<-filled
				if err := ws.WriteFrame(c, ws.NewPingFrame([]byte("p"))); err != nil {
					return
				}
				t.Logf("server: ping written")
				time.Sleep(300 * time.Millisecond) // the client reads the ping meanwhile
				t0 := time.Now()
				frames := 0
				defer func() { t.Logf("server read %d frames", frames) }()
				for {
					f, err := ws.ReadFrame(c)
					if err != nil {
						t.Logf("server read error %v", err)
						return
					}
					frames++
					if f.Header.OpCode == ws.OpPong {
						pong <- time.Since(t0)
						return
					}
				}
			})
			var srv *httptest.Server
			if tlsOn {
				srv = httptest.NewUnstartedServer(h)
				srv.StartTLS()
			} else {
				srv = httptest.NewServer(h)
			}
			defer srv.Close()
			o := Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http"), SendTimeout: 30 * time.Second}
			if tlsOn {
				o.TLS = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
			}
			c := dialT(t, o)
			var fd *fdConn
			switch tr := c.tr.(type) {
			case *tlsTransport:
				fd = tr.d.fd
			case *dialConn:
				fd = tr.fd
			}
			if fd == nil {
				t.Skip("no descriptor")
			}
			// Fill the socket with whole messages until it reports no room.
			m := heldTestMessage(t, 1000)
			n := 0
			for still := 0; still < 5; {
				if !fd.writable() {
					still++
					time.Sleep(20 * time.Millisecond)
					continue
				}
				still = 0
				if err := c.WriteMessage(m); err != nil {
					t.Fatal(err)
				}
				n++
			}
			t.Logf("%d messages written before POLLOUT cleared", n)
			go c.Receive(20 * time.Second) // the caller waits for its action
			time.Sleep(50 * time.Millisecond)
			t.Logf("writable before ping: %v", fd.writable())
			close(filled)
			time.Sleep(150 * time.Millisecond)
			t.Logf("writable after ping: %v queued=%v owed=%v sent=%d recvd=%d", fd.writable(), c.ctlQueued.Load(), c.pongOwed.Load(), c.counters.Sent.Load(), c.counters.Received.Load())
			select {
			case d := <-pong:
				t.Logf("pong %v after the server began to read", d)
			case <-time.After(4 * time.Second):
				t.Errorf("%s: no pong 4 s after the server read everything (queued=%v owed=%v)", name, c.ctlQueued.Load(), c.pongOwed.Load())
			}
			c.Abort()
			select {
			case <-handled:
			case <-time.After(5 * time.Second):
				t.Errorf("%s: the server's handler did not return 5 s after the client's abort", name)
			}
		})
	}
}
