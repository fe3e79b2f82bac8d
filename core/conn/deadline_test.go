//go:build linux

package conn

import (
	"errors"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestReceiveDeadlineUnderSignals: with a socket timeout set, Linux ends a
// blocked recvfrom with EINTR at every signal; a signal every 10 ms must
// not keep a 200 ms receive deadline from firing (it restarted the socket
// timeout for ever).
func TestReceiveDeadlineUnderSignals(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) { time.Sleep(3 * time.Second) })
	c := dialT(t, Options{URL: url})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := syscall.Getpid(), syscall.Gettid()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				_ = syscall.Tgkill(pid, tid, syscall.SIGURG) // the runtime's own signal: harmless
			}
		}
	}()
	start := time.Now()
	if _, err := c.Receive(200 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 450*time.Millisecond {
		t.Fatalf("a 200 ms receive under a signal every 10 ms took %v", d)
	}
}

// TestSendDeadlineSlowReader: a server that reads a little in every socket
// timeout must not stretch a send past its deadline.
func TestSendDeadlineSlowReader(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		b := make([]byte, 64<<10)
		for i := 0; i < 200; i++ {
			if _, err := c.Read(b); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	c := dialT(t, Options{URL: url, SendTimeout: 300 * time.Millisecond})
	var m wire.Message
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{1, 32 << 20}, Data: make([]byte, 32<<20)}}}}
	if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := c.WriteMessage(&m)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("a send with a 300 ms deadline to a slow reader took %v", d)
	}
}

// TestFragmentLengthOverflow: a continuation frame whose length added to
// the bytes already received overflows int64 must still hit the cap.
func TestFragmentLengthOverflow(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteFrame(c, ws.NewFrame(ws.OpBinary, false, []byte{1}))
		_ = ws.WriteHeader(c, ws.Header{Fin: true, OpCode: ws.OpContinuation, Length: 1<<63 - 1})
		for i := 0; i < 100; i++ {
			if _, err := c.Write(make([]byte, 64<<10)); err != nil {
				return
			}
		}
	})
	var alloc liveAlloc
	c := dialT(t, Options{URL: url, MaxMessageSize: 1024, Alloc: &alloc})
	if _, err := c.Receive(2 * time.Second); !errors.Is(err, ErrTooBig) {
		t.Fatalf("got %v, want ErrTooBig", err)
	}
	if alloc.peak > 64<<10 {
		t.Fatalf("the claim made the reader allocate %d bytes", alloc.peak)
	}
}
