package conn

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// heldTLSConn connects to a wss:// server and receives its metadata; the
// server then, once send is closed, writes the frames of burst in one TCP
// write (their TLS records in one segment), or, with apart > 0, in writes
// of their own apart apart, closes written (on loopback they are then in
// the client's socket), and reads until the client goes.
func heldTLSConn(t *testing.T, burst []ws.Frame, apart time.Duration) (c *Conn, send, written chan struct{}) {
	got := make(chan *segmentConn, 1)
	send, written = make(chan struct{}), make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer c.Close()
		sc := <-got
		_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte("metadata")))
		<-send
		if apart > 0 {
			for i, f := range burst {
				if i > 0 {
					time.Sleep(apart)
				}
				_ = ws.WriteFrame(c, f)
			}
		} else {
			sc.gather()
			for _, f := range burst {
				_ = ws.WriteFrame(c, f)
			}
			sc.flush()
		}
		close(written)
		_, _ = io.Copy(io.Discard, c)
	}))
	srv.Listener = segmentListener{srv.Listener, got}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c = dialT(t, Options{URL: "wss" + strings.TrimPrefix(srv.URL, "https"), TLS: &tls.Config{RootCAs: roots}})
	if _, err := c.Receive(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c, send, written
}

var stopClose = ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "plugrl-server-stop"))

// TestPollOverTLSSeesCloseBehindPing: the action, a keepalive ping and a
// stop arrive together; crypto/tls returns one record a read, so the look
// before the feedback must read on past the ping's records to the close.
func TestPollOverTLSSeesCloseBehindPing(t *testing.T) {
	c, send, _ := heldTLSConn(t, []ws.Frame{
		ws.NewBinaryFrame([]byte("action")), ws.NewPingFrame([]byte("k")), stopClose,
	}, 0)
	c.wmu.Lock() // keeps the idle poller out
	defer c.wmu.Unlock()
	c.ExpectMessage()
	close(send)
	if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "action" {
		t.Fatalf("Receive: %q, %v", msg, err)
	}
	c.ReceiveEnded(mono())
	c.Poll()
	var ce *CloseError
	if !errors.As(c.Err(), &ce) || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("the look after the action: %v; want the stop that came with it, behind a ping", c.Err())
	}
}

// TestPollOverTLSSeesCloseArrivedWhileAway: the same without a shared
// segment: a ping, then a stop 30 ms later, while the caller steps its
// envs. The look before the feedback takes both from the socket into
// crypto/tls in one read, and must read on to the stop.
func TestPollOverTLSSeesCloseArrivedWhileAway(t *testing.T) {
	c, send, written := heldTLSConn(t, []ws.Frame{ws.NewPingFrame([]byte("k")), stopClose}, 30*time.Millisecond)
	c.wmu.Lock() // keeps the idle poller out
	defer c.wmu.Unlock()
	close(send)
	<-written // the caller steps its envs meanwhile
	c.Poll()
	var ce *CloseError
	if !errors.As(c.Err(), &ce) || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("the look before the feedback: %v; want the stop that arrived while the caller was away", c.Err())
	}
}

// TestIdleLookOverTLSSeesCloseBehindPing: a ping and a close that arrive
// together while nobody reads are both seen by one look of the poller, not
// the close a look (a second) later.
func TestIdleLookOverTLSSeesCloseBehindPing(t *testing.T) {
	c, send, written := heldTLSConn(t, []ws.Frame{ws.NewPingFrame([]byte("k")), stopClose}, 0)
	c.stopPolling() // this test makes the looks
	close(send)
	<-written // all of it in the socket
	c.idleLook()
	var ce *CloseError
	if !errors.As(c.Err(), &ce) {
		t.Fatalf("after one look at a ping and a close: %v; want the close", c.Err())
	}
}

// TestPollNowOverTLSBeforeCloseSeesPeerClose: the client's Close looks
// (PollNow) before it sends its own close, to record the server's end if
// it came first. A close behind a ping, in crypto/tls, must be seen then:
// else Close sends 1000 first and the server's close counts as its answer.
func TestPollNowOverTLSBeforeCloseSeesPeerClose(t *testing.T) {
	c, send, written := heldTLSConn(t, []ws.Frame{ws.NewPingFrame([]byte("k")), stopClose}, 0)
	c.stopPolling()
	close(send)
	<-written
	c.PollNow()
	ended := c.Err()
	c.Close(time.Second)
	if ended == nil || !c.PeerClosedFirst() {
		t.Fatalf("PollNow before Close: %v, PeerClosedFirst %v; want the server's close, first", ended, c.PeerClosedFirst())
	}
}

// TestPollOverTLSSeesSecondReplyBehindPings: a second reply to one infer
// (SPEC 4.2), sent with the action behind two keepalive pings, is found
// by the looks before the next infer, as over TCP; before, each look
// read one ping, and the next Receive took the stray reply as the answer
// to the next infer.
func TestPollOverTLSSeesSecondReplyBehindPings(t *testing.T) {
	c, send, _ := heldTLSConn(t, []ws.Frame{
		ws.NewBinaryFrame([]byte("action")), ws.NewPingFrame([]byte("1")), ws.NewPingFrame([]byte("2")),
		ws.NewBinaryFrame([]byte("stray")),
	}, 0)
	c.wmu.Lock() // keeps the idle poller out
	c.ExpectMessage()
	close(send)
	if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "action" {
		t.Fatalf("Receive: %q, %v", msg, err)
	}
	c.Poll() // before the feedback
	c.Poll() // before the next infer
	c.wmu.Unlock()
	if err := c.Err(); !errors.Is(err, ErrProtocol) {
		c.ExpectMessage()
		msg, rerr := c.Receive(time.Second)
		t.Fatalf("after the looks before the next infer: %v; the next infer's Receive then returned %q, %v", err, msg, rerr)
	}
}
