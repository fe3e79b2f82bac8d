package conn

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestCloseBeforeResetSeenByAReceiveWhosePongFails: over wss://, a
// keepalive ping, the server's stop (SPEC 7.1) and a reset arrive
// together while a Receive waits for the action. crypto/tls gives the
// ping's record alone; the Receive owes a pong and sends it before its
// next read, and that write fails (the reset). The stop is in the
// socket, behind the ping: the connection's error must be the server's
// close (PLUGRL_STOPPED: exit), not a lost connection (reconnect). The
// write that failed was the reader's own, so writeFailed could not take
// the read side to look, as it does for a sender's.
func TestCloseBeforeResetSeenByAReceiveWhosePongFails(t *testing.T) {
	got := make(chan *segmentConn, 1)
	reset := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		sc := <-got
		_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte("metadata")))
		_, _ = c.Read(make([]byte, 64)) // the client's request
		sc.gather()
		_ = ws.WriteFrame(c, ws.NewPingFrame([]byte("k")))
		_ = ws.WriteFrame(c, stopClose)
		sc.flush()
		// An abortive close: RST, not FIN, so that the client's pong fails.
		if tc, ok := sc.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		sc.Conn.Close()
		close(reset)
	}))
	srv.Listener = segmentListener{srv.Listener, got}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := dialT(t, Options{URL: "wss" + strings.TrimPrefix(srv.URL, "https"), TLS: &tls.Config{RootCAs: roots}})
	// No idle look: only the Receive may read what came.
	c.stopPolling()
	if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "metadata" {
		t.Fatalf("metadata: %q, %v", msg, err)
	}
	var m wire.Message
	m.Str("infer")
	m.Finish()
	if err := c.WriteMessage(&m); err != nil {
		t.Fatal(err)
	}
	<-reset
	time.Sleep(20 * time.Millisecond) // the reset is on its way over loopback
	c.ExpectMessage()
	_, err := c.Receive(5 * time.Second)
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("a Receive that read a ping, the server's stop and a reset: %v; want the server's close (plugrl-server-stop)", err)
	}
}
