package hostile

import (
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// Classic BPF socket filters, which need no privilege. The kernel runs a
// TCP socket's filter before TCP processes a segment, with the segment's
// data starting at its TCP header, and keeps as many bytes of it as the
// filter returns (never fewer than the TCP header).
var (
	// dropAll keeps nothing: the segment is dropped, so it is never
	// acknowledged and a keepalive probe never answered.
	dropAll = []syscall.SockFilter{{Code: syscall.BPF_RET | syscall.BPF_K, K: 0}}
	// acksOnly keeps the TCP header only (its data offset, the high
	// nibble of byte 12, times 4): the segment's acknowledgement counts,
	// its payload is cut away unseen and so never acknowledged.
	acksOnly = []syscall.SockFilter{
		{Code: syscall.BPF_LD | syscall.BPF_B | syscall.BPF_ABS, K: 12},
		{Code: syscall.BPF_ALU | syscall.BPF_RSH | syscall.BPF_K, K: 4},
		{Code: syscall.BPF_ALU | syscall.BPF_LSH | syscall.BPF_K, K: 2},
		{Code: syscall.BPF_RET | syscall.BPF_A},
	}
)

// dropSome makes nc a lossy link for what the client sends: percent of its
// segments dropped at random (classic BPF's random ancillary load).
func dropSome(nc net.Conn, percent int) error { return attach(nc, lossFilter(percent)) }

// lossFilter drops percent (0 to 100) of what it sees, at random: a random
// 32-bit number below percent/100 of 2^32 drops the packet.
func lossFilter(percent int) []syscall.SockFilter {
	if percent >= 100 {
		return dropAll // 2^32 does not fit the comparison's 32 bits
	}
	threshold := uint32(uint64(max(percent, 0)) << 32 / 100)
	return []syscall.SockFilter{
		{Code: syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS, K: skfAdRandom},
		{Code: syscall.BPF_JMP | syscall.BPF_JGE | syscall.BPF_K, K: threshold, Jt: 1, Jf: 0},
		{Code: syscall.BPF_RET | syscall.BPF_K, K: 0},          // drop
		{Code: syscall.BPF_RET | syscall.BPF_K, K: 0xffffffff}, // keep it whole
	}
}

// skfAdRandom is SKF_AD_OFF + SKF_AD_RANDOM (linux/filter.h: -0x1000 +
// 56) as the unsigned offset BPF takes: a load from it gives a random
// 32-bit number.
const skfAdRandom = 0xfffff000 + 56

// dropEverythingFrom makes nc, a TCP connection, a black hole for what the
// client sends: from the client's side the server's machine has gone.
func dropEverythingFrom(nc net.Conn) error { return attach(nc, dropAll) }

// hearEverything removes nc's socket filter: the client's segments, and
// its kernel's retransmissions of what was dropped, get through again.
func hearEverything(nc net.Conn) error {
	_, rc, err := rawConn(nc)
	if err != nil {
		return err
	}
	var derr error
	if err := rc.Control(func(fd uintptr) { derr = syscall.DetachLsf(int(fd)) }); err != nil {
		return fmt.Errorf("coming back: %v", err)
	}
	if derr != nil {
		return fmt.Errorf("coming back: removing the socket filter: %v", derr)
	}
	return nil
}

// vanishAfter sends what send writes to nc and then makes nc a black hole,
// once the client has acknowledged all of it: the client's own data is
// dropped from before send on (acksOnly), but the acknowledgements of what
// send wrote still come in, so that this side's kernel has nothing left
// to retransmit, which a machine that is gone would not do (each
// retransmission would tell the client's kernel the peer lives). It waits
// for those acknowledgements up to a second.
func vanishAfter(nc net.Conn, send func() error) error {
	if err := attach(nc, acksOnly); err != nil {
		return err
	}
	if err := send(); err != nil {
		return err
	}
	_, rc, err := rawConn(nc)
	if err != nil {
		return err
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		var queued int32
		var e syscall.Errno
		if err := rc.Control(func(fd uintptr) {
			_, _, e = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&queued)))
		}); err != nil || e != 0 {
			break // attach all the same
		}
		if queued == 0 {
			break
		}
	}
	return attach(nc, dropAll)
}

func rawConn(nc net.Conn) (*net.TCPConn, syscall.RawConn, error) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil, nil, fmt.Errorf("vanishing: not a TCP connection (%T)", nc)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, nil, fmt.Errorf("vanishing: %v", err)
	}
	return tc, rc, nil
}

// attach sets nc's socket filter to prog, replacing any before it.
func attach(nc net.Conn, prog []syscall.SockFilter) error {
	_, rc, err := rawConn(nc)
	if err != nil {
		return err
	}
	var aerr error
	if err := rc.Control(func(fd uintptr) { aerr = syscall.AttachLsf(int(fd), prog) }); err != nil {
		return fmt.Errorf("vanishing: %v", err)
	}
	if aerr != nil {
		return fmt.Errorf("vanishing: attaching a socket filter: %v", aerr)
	}
	return nil
}
