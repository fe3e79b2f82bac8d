//go:build linux

package conn

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/wire"
)

// alertAfterFullSocket connects to a wss:// server that sends metadata
// and then reads nothing; the client writes a message (its send deadline
// 10 s ahead) and fills its socket (at a fixed size: the kernel would
// grow it otherwise). The returned function has the server send a record
// the client cannot decrypt, to which crypto/tls answers with an alert:
// a write from within a read, which the full socket makes wait.
func alertAfterFullSocket(t *testing.T) (*Conn, func()) {
	t.Helper()
	bad := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer c.Close()
		_ = wsutil.WriteServerBinary(c, []byte("metadata"))
		<-bad
		// An application-data record of junk, under TLS's feet: the
		// client fails to decrypt it and answers bad_record_mac.
		rec := append([]byte{23, 3, 3, 0, 40}, make([]byte, 40)...)
		_, _ = c.(*tls.Conn).NetConn().Write(rec)
		<-release // never reads
	}))
	t.Cleanup(srv.Close)
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := dialT(t, Options{URL: url, TLS: &tls.Config{RootCAs: pool}, SendTimeout: 10 * time.Second})
	tt, ok := c.tr.(*tlsTransport)
	if !ok || tt.d.fd == nil {
		t.Skip("no descriptor under the TLS connection")
	}
	if _, err := c.Receive(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.Release()
	var m wire.Message
	m.Str("infer")
	m.Finish()
	c.ExpectMessage()
	if err := c.WriteMessage(&m); err != nil { // the send deadline: 10 s from now
		t.Fatal(err)
	}
	if err := syscall.SetsockoptInt(tt.d.fd.fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 64<<10); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 64<<10)
	for filled, full := 0, 0; full < 3; {
		n, _, e := syscall.Syscall6(syscall.SYS_SENDTO, uintptr(tt.d.fd.fd), uintptr(unsafe.Pointer(&junk[0])), uintptr(len(junk)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
		if e == syscall.EAGAIN {
			full++
			time.Sleep(50 * time.Millisecond) // until what the kernel moves on is taken too
			continue
		}
		if e != 0 {
			t.Fatalf("filling the socket: %v", e)
		}
		full = 0
		if filled += int(n); filled > 256<<20 {
			t.Fatal("the socket took 256 MiB")
		}
	}
	if n, err := tt.d.fd.tryWrite([]byte{0}); n != 0 || err != nil {
		t.Fatalf("the socket took a byte more: %d, %v", n, err)
	}
	return c, func() { close(bad) }
}

// TestTLSAlertDuringReceiveKeepsDeadline: a wss:// server that has not
// read the client's last message (its socket full) sends a record the
// client cannot decrypt. crypto/tls answers with an alert from within the
// read, under the send deadline the last message left (10 s ahead). A
// 200 ms Receive must still return by its deadline: it took 9.8 s.
func TestTLSAlertDuringReceiveKeepsDeadline(t *testing.T) {
	c, sendBad := alertAfterFullSocket(t)
	sendBad()
	start := time.Now()
	_, err := c.Receive(200 * time.Millisecond)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a 200 ms Receive returned after %v (%v)", d.Round(time.Millisecond), err)
	}
	t.Logf("returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestTLSAlertDuringPollDoesNotWait: the same alert, met by Poll (which
// an infer and a feedback make before they send), must not wait for the
// full socket either: Poll reads only what has arrived.
func TestTLSAlertDuringPollDoesNotWait(t *testing.T) {
	c, sendBad := alertAfterFullSocket(t)
	sendBad()
	time.Sleep(100 * time.Millisecond) // the record arrives
	start := time.Now()
	c.PollNow()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Poll returned after %v (%v)", d.Round(time.Millisecond), c.Err())
	}
	t.Logf("returned after %v: %v", time.Since(start).Round(time.Millisecond), c.Err())
}
