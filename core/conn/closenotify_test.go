package conn

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// TestCloseFrameThenEndSeenBetweenCalls: a server that ends the run (a
// close frame, 1000 plugrl-server-stop) and at once ends the connection
// (over wss://, its close_notify and FIN follow in the same instant),
// while the client is between calls. The look between calls (Poll, and
// the poller's, which reads the same way) must report the server's close
// frame, whose reason tells a stop (no reconnect, SPEC 7.1) from a lost
// connection. Over TLS 1.2, crypto/tls returns the frame's bytes together
// with io.EOF when the close_notify is already there: drain took the
// error alone, and the stop became ErrLost, which a client answers by
// reconnecting.
func TestCloseFrameThenEndSeenBetweenCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  uint16 // the server's highest TLS version; 0: ws://
	}{{"ws", 0}, {"wss TLS 1.2", tls.VersionTLS12}, {"wss TLS 1.3", tls.VersionTLS13}} {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, _, _, err := ws.UpgradeHTTP(r, w)
				if err != nil {
					return
				}
				_ = wsutil.WriteServerBinary(c, []byte("metadata"))
				<-stop
				// The frame in one write (one TLS record), then the end.
				_, _ = c.Write(ws.MustCompileFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(1000, "plugrl-server-stop"))))
				c.Close() // over TLS: close_notify, then FIN
			})
			srv := httptest.NewUnstartedServer(h)
			o := Options{}
			if tc.tls != 0 {
				srv.TLS = &tls.Config{MaxVersion: tc.tls}
				srv.StartTLS()
				o.TLS = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
			} else {
				srv.Start()
			}
			defer srv.Close()
			o.URL = "ws" + strings.TrimPrefix(srv.URL, "http")
			c := dialT(t, o)
			if _, err := c.Receive(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			c.Release()
			close(stop)
			time.Sleep(200 * time.Millisecond) // all of it has arrived
			c.PollNow()
			var ce *CloseError
			if err := c.Err(); !errors.As(err, &ce) || ce.Reason != "plugrl-server-stop" {
				t.Fatalf("%s: the connection's error is %v; want the server's close frame (1000 plugrl-server-stop)", tc.name, err)
			}
		})
	}
}
