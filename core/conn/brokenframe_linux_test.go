//go:build linux && !race && !asan && !msan

// The sanitizers take such a fault themselves (tests/c/bad_memory.c says so too).

package conn

import (
	"errors"
	"net"
	"net/http"
	"runtime/debug"
	"testing"
	"time"
	"unsafe"

	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/badmem"
)

// TestFaultMidFrameEndsConnection: a write that a panic breaks off in the
// middle of a frame (the caller's array faulting under
// debug.SetPanicOnFault, as the C API sets it, after the first write
// buffer's worth went out) ends the connection, instead of leaving it
// open with part of a frame on the wire: the next message would be read
// as the rest of that frame's payload, and its caller wait for ever.
func TestFaultMidFrameEndsConnection(t *testing.T) {
	mem, page := badmem.TwoPages(t)
	base := unsafe.Pointer(&mem[0])
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = wsutil.WriteServerBinary(c, []byte{0x80})
		_, _ = wsutil.ReadClientBinary(c)
	})
	c := dialT(t, Options{URL: url, WriteBufferSize: 256})
	if _, err := c.Receive(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	var m wire.Message
	if err := m.Array(&wire.Array{DType: wire.Uint8, Shape: []int{2 * page}, Data: unsafe.Slice((*byte)(base), 2*page)}); err != nil {
		t.Fatal(err)
	}
	m.Finish()
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("the write over an unmapped page did not fault")
			}
		}()
		_ = c.WriteMessage(&m)
	}()
	if err := c.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("after a write broken off mid-frame: connection error %v, want ErrLost", err)
	}
	var next wire.Message
	next.Str("next")
	next.Finish()
	if err := c.WriteMessage(&next); err == nil {
		t.Fatal("a message was written after part of a frame")
	}
}
