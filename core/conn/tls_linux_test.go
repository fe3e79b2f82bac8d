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
)

// TestTLSLookNeverWaits: the poller's look at a wss:// connection whose
// server does not read (its socket full) neither waits nor fails the
// connection: the pong it owes stays queued. It shares the process's
// poller, so a look that waited would delay every connection's, and their
// receive deadlines; before, the pong's TryWrite waited 20 ms for the
// socket and then failed the connection (a TLS record cannot be left half
// written).
func TestTLSLookNeverWaits(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer c.Close()
		<-release // never reads
	}))
	defer srv.Close()
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := dialT(t, Options{URL: url, TLS: &tls.Config{RootCAs: pool}})
	tt, ok := c.tr.(*tlsTransport)
	if !ok || tt.d.fd == nil {
		t.Skip("no descriptor under the TLS connection")
	}
	// Fill the socket, under TLS's feet: the server reads nothing, so the
	// bytes are never looked at.
	junk := make([]byte, 64<<10)
	filled := 0
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_SENDTO, uintptr(tt.d.fd.fd), uintptr(unsafe.Pointer(&junk[0])), uintptr(len(junk)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
		if e == syscall.EAGAIN {
			break
		}
		if e != 0 {
			t.Fatalf("filling the socket: %v", e)
		}
		filled += int(n)
		if filled > 256<<20 {
			t.Fatal("the socket took 256 MiB")
		}
	}
	time.Sleep(20 * time.Millisecond) // let the last of it settle into the buffers
	for range 10 {
		if _, _, e := syscall.Syscall6(syscall.SYS_SENDTO, uintptr(tt.d.fd.fd), uintptr(unsafe.Pointer(&junk[0])), uintptr(len(junk)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0); e != 0 {
			break
		}
	}
	// A ping came while nobody read: the look owes its pong.
	c.pmu.Lock()
	c.pongLen = copy(c.pongData[:], "p")
	c.pongOwed.Store(true)
	c.pmu.Unlock()
	for i := range 3 {
		t0 := time.Now()
		c.idleLook()
		if d := time.Since(t0); d > 10*time.Millisecond {
			t.Errorf("look %d at a full TLS socket took %v", i, d)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("look %d at a full TLS socket failed the connection: %v", i, err)
		}
	}
	if !c.ctlQueued.Load() {
		t.Fatal("the pong is neither sent nor queued")
	}
	t.Logf("socket filled with %d KiB", filled>>10)
}
