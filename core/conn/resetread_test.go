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
	askThenAwaitReset(t, c, reset)
	c.ExpectMessage()
	_, err := c.Receive(5 * time.Second)
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("a Receive that read a ping, the server's stop and a reset: %v; want the server's close (plugrl-server-stop)", err)
	}
}

// TestCloseBeforeResetSeenByAReaderWhosePongThePollerSends: over ws://,
// a reader took a keepalive ping (a pong is owed) and has not yet taken
// the server's stop behind it, and the server has reset the connection.
// The idle poller, finding the write side free but the read side held,
// sends the pong, and the write fails (the reset). The stop is still in
// the socket, ahead of the error, and only the reader may read it: the
// connection's end must be left to the reader, whose next read gives the
// server's close (PLUGRL_STOPPED: exit), not be reported at once as a
// lost connection (reconnect).
func TestCloseBeforeResetSeenByAReaderWhosePongThePollerSends(t *testing.T) {
	url, reset := stopThenResetServer(t)
	c := dialT(t, Options{URL: url})
	c.stopPolling() // this test makes the poller's looks itself
	askThenAwaitReset(t, c, reset)
	// A reader between two reads: it holds the read side and owes the
	// pong of the ping it just took.
	c.rmu.Lock()
	c.control(ws.Header{OpCode: ws.OpPing}, []byte("k"))
	c.idleLook()
	if c.pongOwed.Load() {
		c.rmu.Unlock()
		t.Fatalf("the poller's look did not try to send the pong owed (connection error %v)", c.Err())
	}
	c.rmu.Unlock()
	c.ExpectMessage()
	_, err := c.Receive(5 * time.Second)
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("a reader's Receive after the poller's pong met the reset: %v; want the server's close (plugrl-server-stop)", err)
	}
}

// askThenAwaitReset takes the server's metadata on c, sends a request,
// and returns once the server has reset the connection (reset closed).
func askThenAwaitReset(t *testing.T, c *Conn, reset <-chan struct{}) {
	t.Helper()
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
}

// TestCloseBeforeResetSeenByClose: the server's stop and a reset arrived
// while the caller was away, and nothing has read them (no Poll, no
// look). Close's close frame meets the reset; the stop is still in the
// socket, ahead of it. Close must read it, as a message's write does
// (writeFailed), so that the connection's end is the server's close, and
// PeerClosedFirst says so (the client's ledger records the stop, not a
// close of its own that never left): not skip its read, and release the
// connection with the stop unread.
func TestCloseBeforeResetSeenByClose(t *testing.T) {
	url, reset := stopThenResetServer(t)
	c := dialT(t, Options{URL: url})
	c.stopPolling() // no look: only Close may read what came
	askThenAwaitReset(t, c, reset)
	c.Close(time.Second)
	var ce *CloseError
	if err := c.Err(); !errors.As(err, &ce) || ce.Reason != "plugrl-server-stop" || !c.PeerClosedFirst() {
		t.Fatalf("Close after the server's stop and reset: %v (peer closed first: %v); want the server's close (plugrl-server-stop), read first", err, c.PeerClosedFirst())
	}
}

// TestReplyAndStopBeforeResetSeenByALookWhosePongFails: while the
// caller was between sending a request and calling Receive, a keepalive
// ping, the reply, the server's stop and a reset all arrived. The
// poller's look takes the ping and stops at the reply (a data frame due:
// Receive's); its pong meets the reset, and its second read finds the
// socket's end. The reply and the stop came before that end: Receive
// must return the reply, and the next read the server's close
// (PLUGRL_STOPPED: exit), not both be lost to a connection failed at the
// look as lost (reconnect).
func TestReplyAndStopBeforeResetSeenByALookWhosePongFails(t *testing.T) {
	url, reset := stopThenResetServer(t, ws.NewPingFrame([]byte("k")), ws.NewBinaryFrame([]byte("action")))
	c := dialT(t, Options{URL: url})
	c.stopPolling() // this test makes the poller's look itself
	askThenAwaitReset(t, c, reset)
	c.ExpectMessage()
	c.idleLook()
	if c.pongOwed.Load() || !c.writeReset {
		t.Fatalf("the look's pong did not meet the reset (pong still owed: %v; connection error %v): the test did not reach the case", c.pongOwed.Load(), c.Err())
	}
	if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "action" {
		t.Fatalf("Receive after the look's pong met the reset: %q, %v; want the reply (\"action\"), which came before the reset", msg, err)
	}
	c.Release()
	c.ExpectMessage()
	_, err := c.Receive(5 * time.Second)
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("the Receive after the reply: %v; want the server's close (plugrl-server-stop), which came before the reset", err)
	}
}

// stopThenResetServer serves one ws:// connection that sends the
// metadata, reads the request, sends the frames given (if any) and the
// server's stop, and then resets the connection (RST, not FIN, so that
// the client's next write fails); reset is closed once it has.
func stopThenResetServer(t *testing.T, before ...ws.Frame) (url string, reset <-chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	url = rawServer(t, func(s net.Conn, r *http.Request) {
		_ = ws.WriteFrame(s, ws.NewBinaryFrame([]byte("metadata")))
		_, _ = s.Read(make([]byte, 64)) // the client's request
		for _, f := range before {
			_ = ws.WriteFrame(s, f)
		}
		_ = ws.WriteFrame(s, stopClose)
		if tc, ok := s.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		s.Close()
		close(done)
	})
	return url, done
}
