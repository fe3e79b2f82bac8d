//go:build linux

package conn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// socketQueued is how many bytes c's socket holds unread (SIOCINQ), and
// whether it could tell.
func socketQueued(c *Conn) (int, bool) {
	d, ok := c.tr.(*dialConn)
	if t, isTLS := c.tr.(*tlsTransport); isTLS {
		d, ok = t.d, true
	}
	if !ok || d.fd == nil {
		return 0, false
	}
	var n int32
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(d.fd.fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	return int(n), e == 0
}

// fdPair is a loopback TCP connection whose client end is an fdConn.
func fdPair(t *testing.T) (*fdConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	d := &dialConn{Conn: nc}
	if err := d.takeover(); err != nil || d.fd == nil {
		t.Fatalf("takeover: %v", err)
	}
	t.Cleanup(func() { d.fd.close() })
	return d.fd, peer
}

// fdPairDrained is fdPair with a peer that reads everything: the channel
// gives how many bytes it read once the client end shuts down.
func fdPairDrained(t *testing.T) (*fdConn, <-chan int64) {
	t.Helper()
	f, peer := fdPair(t)
	read := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, peer)
		read <- n
	}()
	return f, read
}

// TestWritePastDeadlineSendsWhatFits: a write whose deadline passed before
// it could send (its thread stopped since the deadline was set) sends what
// the socket takes at once: the whole message when there is room. A
// socket that stays full still times out, and a poller's look (noWait)
// never sends late.
func TestWritePastDeadlineSendsWhatFits(t *testing.T) {
	f, peer := fdPair(t)
	msg := []byte("a feedback message")
	f.setWriteDeadline(time.Now().Add(-time.Second))
	if n, err := f.Write(msg); err != nil || n != len(msg) {
		t.Fatalf("Write past its deadline, with room: %d, %v; want all %d bytes", n, err, len(msg))
	}
	got := make([]byte, len(msg))
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != string(msg) {
		t.Fatalf("the peer read %q, %v", got, err)
	}

	// One window per message, however many Writes it takes (crypto/tls
	// writes one per record): a later Write of the same message, past
	// lateGrace, fails even with room. Each record used to get a window
	// of its own, and a socket that took a little now and then carried a
	// 4 MiB message over wss:// 0.8-0.9 s past its deadline.
	f.setWriteDeadline(time.Now().Add(-time.Second))
	if n, err := f.Write(msg); err != nil || n != len(msg) {
		t.Fatalf("the message's first Write past its deadline: %d, %v; want all of it", n, err)
	}
	time.Sleep(lateGrace + 10*time.Millisecond)
	if n, err := f.Write(msg); !errors.Is(err, os.ErrDeadlineExceeded) || n != 0 {
		t.Fatalf("a Write of the same message after its late window: %d, %v; want a timeout", n, err)
	}
	got = make([]byte, len(msg))
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != string(msg) {
		t.Fatalf("the peer read %q, %v", got, err)
	}

	// Fill the socket: the peer reads nothing.
	f.setWriteDeadline(time.Now().Add(200 * time.Millisecond))
	big := make([]byte, 64<<20)
	n, err := f.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n == len(big) {
		t.Fatalf("Write of 64 MiB to a peer that reads nothing: %d, %v; want a timeout", n, err)
	}
	f.setWriteDeadline(time.Now().Add(-time.Second))
	if n, err := f.Write(msg); !errors.Is(err, os.ErrDeadlineExceeded) || n != 0 {
		t.Fatalf("Write past its deadline to a full socket: %d, %v; want nothing sent and a timeout", n, err)
	}
}

// TestLateLookWhileControlQueued: over wss:// with a control frame queued
// (a pong the full socket did not take), the reader waits in slices
// (fillSliced) so that it can retry it; a slice that ends past the
// Receive's deadline takes the last look too, and returns a message that
// is waiting whole. Before the late look, that slice's timeout was the
// Receive's.
func TestLateLookWhileControlQueued(t *testing.T) {
	sent := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer c.Close()
		_ = wsutil.WriteServerBinary(c, []byte("metadata"))
		<-sent
		_ = wsutil.WriteServerBinary(c, []byte("action"))
		time.Sleep(5 * time.Second) // until the client is done
	}))
	defer srv.Close()
	c := dialT(t, Options{URL: "wss" + strings.TrimPrefix(srv.URL, "https"),
		TLS: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}})
	if _, err := c.Receive(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.Release()
	c.ExpectMessage()
	sent <- struct{}{}
	waitArrived(t, c, 8+22) // the frame, in a TLS record (22 bytes of header and tag)
	c.ctlQueued.Store(true) // as if a pong had found the socket full
	msg, err := c.ReceiveFrom(mono()-time.Second, 100*time.Millisecond)
	if err != nil || string(msg) != "action" {
		t.Fatalf("got %q, %v; want the action that was waiting", msg, err)
	}
}
