package hostile

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestLossFilter: lossFilter drops what it says, on a UDP socket (the same
// classic BPF program runs on any socket): none at 0 %, all at 100 %, about
// a fifth at 20 %, and no overflow of the threshold near 100 %.
func TestLossFilter(t *testing.T) {
	const n, batch = 2000, 100 // batches: the receive buffer must not drop any
	for _, tc := range []struct{ percent, lo, hi int }{
		{0, n, n},
		{20, n*80/100 - 100, n*80/100 + 100}, // 5.6 standard deviations
		{99, 0, 60},
		{100, 0, 0},
	} {
		rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rx.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var aerr error
		if err := rc.Control(func(fd uintptr) { aerr = syscall.AttachLsf(int(fd), lossFilter(tc.percent)) }); err != nil || aerr != nil {
			t.Fatalf("attaching: %v %v", err, aerr)
		}
		tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		buf := make([]byte, 16)
		for sent := 0; sent < n; sent += batch {
			for i := 0; i < batch; i++ {
				if _, err := tx.Write([]byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			for {
				_ = rx.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				if _, err := rx.Read(buf); err != nil {
					break
				}
				got++
			}
		}
		tx.Close()
		rx.Close()
		if got < tc.lo || got > tc.hi {
			t.Errorf("%d %% loss: %d of %d datagrams came through, want %d to %d", tc.percent, got, n, tc.lo, tc.hi)
		}
	}
}
