//go:build unix

package hostile

import (
	"net"
	"syscall"
	"testing"
)

// serverRecvBuffer is the SO_RCVBUF of the server's side of its one
// connection, as the kernel reports it (Linux doubles what was asked for),
// or -1 where it cannot be read.
func serverRecvBuffer(t *testing.T, s *Server) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) != 1 {
		t.Fatalf("%d connections, want 1", len(s.conns))
	}
	for nc := range s.conns {
		tc, ok := tcpOf(nc).(*net.TCPConn)
		if !ok {
			return -1
		}
		rc, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		n, serr := -1, error(nil)
		if err := rc.Control(func(fd uintptr) { n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) }); err != nil {
			t.Fatal(err)
		}
		if serr != nil {
			t.Fatalf("getsockopt SO_RCVBUF: %v", serr)
		}
		return n
	}
	return -1
}
