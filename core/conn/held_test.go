package conn

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestHeldMessage: a held message waits in the kernel for the next write
// (here, none: it leaves when TCP's retransmission timer fires, 200 ms or
// more), a close sends it at once, and one over heldMax is not held.
func TestHeldMessage(t *testing.T) {
	const heldAtLeast = 150 * time.Millisecond
	for _, tc := range []struct {
		name  string
		size  int
		close bool
		held  bool
	}{
		{"small, nothing after", 100, false, true},
		{"small, then close", 100, true, false},
		{"over heldMax", heldMax + 1, false, false},
	} {
		arrived := make(chan time.Time, 1)
		url := rawServer(t, func(c net.Conn, _ *http.Request) {
			if _, err := wsutil.ReadClientBinary(c); err == nil {
				arrived <- time.Now()
			}
		})
		c := dialT(t, Options{URL: url})
		var m wire.Message
		m.Map(1)
		m.Str("x")
		if err := m.Array(&wire.Array{DType: wire.Uint8, Shape: []int{tc.size}, Data: make([]byte, tc.size)}); err != nil {
			t.Fatal(err)
		}
		m.Finish()
		t0 := time.Now()
		if err := c.WriteHeldMessage(&m, nil); err != nil {
			t.Fatal(err)
		}
		if tc.close {
			if err := c.Close(time.Second); err != nil {
				t.Fatalf("%s: close: %v", tc.name, err)
			}
		}
		select {
		case at := <-arrived:
			if d := at.Sub(t0); tc.held != (d >= heldAtLeast) {
				t.Fatalf("%s: the message arrived after %v; held: want %v", tc.name, d, tc.held)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: the message never arrived", tc.name)
		}
	}
}
