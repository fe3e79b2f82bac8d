//go:build linux

package conn

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// fdConn is a TCP socket in blocking mode, owned by this package and not
// registered with Go's network poller. Read and Write are system calls on
// the calling thread; deadlines become SO_RCVTIMEO / SO_SNDTIMEO, set only
// when they would otherwise overshoot, so a steady stream of calls with the
// same timeout makes no extra system call.
type fdConn struct {
	fd       int
	rdl, wdl deadline      // set by SetReadDeadline / SetWriteDeadline
	rto, wto time.Duration // the socket's SO_RCVTIMEO / SO_SNDTIMEO; 0: none
	nonblock bool          // Read does not wait (tlsTransport.TryRead)
	// wlazy, when set, is the write timeout of the current message, whose
	// deadline is not yet fixed: Write first tries without waiting, and
	// only a write that would wait reads the clock (see beginWrite).
	wlazy time.Duration
	// savedWdl and savedWlazy hold a message's write deadline (wdl,
	// wlazy) while noWait has replaced it.
	savedWdl   int64
	savedWlazy time.Duration
	noWaiting  bool // between noWait(true) and noWait(false)
	// lateUntil ends the current message's last look past its write
	// deadline (sendLate): zero until a Write finds the deadline passed.
	// One window per message, not per Write: crypto/tls writes a message
	// in many records, and a socket that takes a little now and then must
	// not carry each one past the deadline in turn.
	lateUntil time.Time
	// wlock guards the write side's state (wlazy, wto): with TLS,
	// crypto/tls writes on its own from within a read (a key update, an
	// alert) while a message may be written.
	wlock sync.Mutex
	once  sync.Once
	// Over TLS, crypto/tls writes on its own from within a read (an
	// alert, the answer to a KeyUpdate): reads counts the reads in
	// progress, writes the Conn's own writes through TLS, and rbound is
	// the deadline of the Receive under way (zero: none of its own). A
	// Write made during a read and no write of the Conn's is the read's,
	// and waits no longer than rbound: not until the send deadline that
	// the last message left, which a socket the server does not empty
	// made a 200 ms Receive wait out (10 s). See tlsTransport.
	reads, writes atomic.Int32
	rbound        deadline
}

// timeoSlack is how far a socket timeout may run past a deadline before it
// is set again: the kernel counts it in scheduler ticks anyway.
const timeoSlack = time.Millisecond

// maxTimeo caps one socket timeout; a longer deadline takes several. The
// kernel's timer wheel rounds a timeout of more than 63 ticks up to 8 ticks
// or more (12.5 %): a 300 ms SO_RCVTIMEO fired 17-30 ms late here. At 50
// ms a timeout stays on the wheel's first level for any HZ up to 1000, so
// it fires within a tick; the waits this costs come only while a call is
// blocked, once per maxTimeo.
const maxTimeo = 50 * time.Millisecond

// takeover moves a *net.TCPConn to an fdConn: a duplicate of its descriptor
// in blocking mode; the original is closed, which removes it from Go's
// poller (and with it the poller's wake-ups on every arrival).
func (d *dialConn) takeover() error {
	tc, ok := d.Conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = os.NewSyscallError("fcntl", e)
			return
		}
		nfd = int(r)
	}); err != nil {
		return err
	}
	if derr != nil {
		return derr
	}
	if err := syscall.SetNonblock(nfd, false); err != nil {
		syscall.Close(nfd)
		return os.NewSyscallError("fcntl", err)
	}
	_ = tc.Close()
	d.fd = &fdConn{fd: nfd}
	return nil
}

func (f *fdConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if f.nonblock {
		return f.recv(p, false)
	}
	if err := f.arm(syscall.SO_RCVTIMEO, &f.rto, &f.rdl, false); err != nil {
		return 0, err
	}
	return f.recv(p, true)
}

// tryRead reads without waiting; nothing to read is os.ErrDeadlineExceeded.
func (f *fdConn) tryRead(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return f.recv(p, false)
}

// recv receives into p (not empty). With wait it blocks up to the read
// deadline, armed as SO_RCVTIMEO; without, nothing to read is
// os.ErrDeadlineExceeded.
func (f *fdConn) recv(p []byte, wait bool) (int, error) {
	for {
		var n uintptr
		var e syscall.Errno
		if wait {
			n, _, e = syscall.Syscall6(syscall.SYS_RECVFROM, uintptr(f.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
		} else {
			// MSG_DONTWAIT never blocks, so the scheduler need not know.
			n, _, e = syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(f.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_DONTWAIT, 0, 0)
		}
		switch {
		case e == 0 && n == 0:
			return 0, io.EOF
		case e == 0:
			kernelWrote(p, int(n))
			return int(n), nil
		case e == syscall.EINTR && wait:
			// With a socket timeout set, Linux ends the wait with EINTR
			// at every signal, SA_RESTART or not: a signal every few ms
			// would restart the timeout for ever unless the deadline is
			// checked here.
			if err := f.arm(syscall.SO_RCVTIMEO, &f.rto, &f.rdl, false); err != nil {
				return 0, err
			}
		case e == syscall.EINTR:
		case e == syscall.EAGAIN && wait: // SO_RCVTIMEO ran out
			if err := f.arm(syscall.SO_RCVTIMEO, &f.rto, &f.rdl, true); err != nil {
				return 0, err
			}
		case e == syscall.EAGAIN:
			return 0, os.ErrDeadlineExceeded
		default:
			return 0, os.NewSyscallError("recvfrom", e)
		}
	}
}

// beginWrite starts a message that must be written within timeout. Most
// messages go out in one send that does not wait, so the deadline is fixed
// (and the clock read) only when a send would wait: the bound then counts
// from there, after sends that took no waiting. A message's last Write
// of over dontWaitMax fixes it at once (Write).
func (f *fdConn) beginWrite(timeout time.Duration) {
	f.wlock.Lock()
	f.wdl.set(time.Time{})
	f.wlazy = timeout
	f.lateUntil = time.Time{}
	f.wlock.Unlock()
}

// noWait, on, makes Write send what the socket takes at once and fail
// (os.ErrDeadlineExceeded) rather than wait for the rest, until noWait
// (off) restores the write deadline it found. For a poller's look at a
// TLS connection (tlsTransport.setLooking), when nothing else writes.
func (f *fdConn) noWait(on bool) {
	f.wlock.Lock()
	defer f.wlock.Unlock()
	if on {
		f.savedWdl, f.savedWlazy = f.wdl.ns.Load(), f.wlazy
		// A lazy deadline of 1 ns: Write's first send does not wait,
		// and the deadline it then fixes has passed.
		f.wdl.set(time.Time{})
		f.wlazy = time.Nanosecond
		f.noWaiting = true
		return
	}
	f.wdl.ns.Store(f.savedWdl)
	f.wlazy = f.savedWlazy
	f.noWaiting = false
}

// writable reports whether a send of a few hundred bytes is taken whole
// without waiting: POLLOUT, which Linux sets only while the send queue is
// under its limit (and then a small send is taken whole), or an error or
// hang-up, which the write will report.
func (f *fdConn) writable() bool {
	pfd := struct {
		fd              int32
		events, revents int16
	}{fd: int32(f.fd), events: pollOut}
	var ts syscall.Timespec // zero: do not wait
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return true // let the write find out
		}
		return n == 1 && pfd.revents&(pollOut|pollErr|pollHup) != 0
	}
}

// poll(2)'s event bits.
const (
	pollOut = 0x4
	pollErr = 0x8
	pollHup = 0x10
)

// setWriteDeadline is SetWriteDeadline on the descriptor.
func (f *fdConn) setWriteDeadline(t time.Time) {
	f.wlock.Lock()
	f.wdl.set(t)
	f.wlazy = 0
	f.lateUntil = time.Time{}
	f.wlock.Unlock()
}

// dontWaitMax bounds the sends made with RawSyscall (not telling the
// scheduler): a non-blocking send of this much takes microseconds. It is
// also the largest write tried without waiting first (Write).
const dontWaitMax = 64 << 10

// Write sends p whole by the write deadline: p is the last of a message's
// bytes (or all of them). A write of up to dontWaitMax bytes under a lazy
// deadline first tries a send that does not wait (so does any write in a
// poller's look, noWait); a larger one goes straight to the blocking send,
// as one system call, like a client in C: a camera frame of megabytes does
// not fit the socket's buffer, and the send that does not wait only split
// it in two. With the server on the client's core, that split moved kernel
// work to the client: in the bench's LARGE workload (two 4.8 MB frames an
// exchange) the client spent 110 us (8 %) more CPU per exchange than the C
// floor, and 18 us without it; exchanges/s and CPU split across cores
// stayed the same (10 and 16 interleaved rounds, 2026-12-06). The deadline
// is then fixed as the send begins, which moves it by no more than the
// time the socket takes to take what fits.
func (f *fdConn) Write(p []byte) (int, error) { return f.write(p, false) }

// writeMore is Write for bytes of a message that more of its bytes follow,
// in a later Write (a message larger than the write buffer, or a held one
// before the next): it always tries without waiting first, under a lazy
// deadline, so that the deadline is fixed only when a send would wait. Had
// a large one gone straight to the blocking send, the deadline would start
// while the server still took every byte, and the pause before the next
// Write (the copy of the next buffer, a stopped or starved process) would
// count against it: a 64 MiB message written in 1 MiB buffers to a server
// that read everything timed out after a 1.2 s pause with a 1 s send
// timeout, as "the server is not reading".
func (f *fdConn) writeMore(p []byte) (int, error) { return f.write(p, true) }

// write is Write; more says more of the message follows (writeMore).
func (f *fdConn) write(p []byte, more bool) (int, error) {
	f.wlock.Lock()
	defer f.wlock.Unlock()
	done := 0
	if f.wlazy > 0 {
		if len(p) > 0 && (len(p) <= dontWaitMax || f.noWaiting || more) {
			var n uintptr
			var e syscall.Errno
			for {
				if len(p) <= dontWaitMax {
					n, _, e = syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(f.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_NOSIGNAL|syscall.MSG_DONTWAIT, 0, 0)
				} else {
					n, _, e = syscall.Syscall6(syscall.SYS_SENDTO, uintptr(f.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_NOSIGNAL|syscall.MSG_DONTWAIT, 0, 0)
				}
				if e != syscall.EINTR {
					break
				}
			}
			switch e {
			case 0:
				done = int(n)
				kernelRead(p, done)
			case syscall.EAGAIN:
			default:
				return 0, os.NewSyscallError("sendto", e)
			}
			if done == len(p) {
				return done, nil
			}
		}
		// The send would wait: the message's deadline starts now.
		f.wdl.set(time.Now().Add(f.wlazy))
		f.wlazy = 0
	}
	dl := &f.wdl
	var within deadline // a write within a read: the read's deadline, if sooner
	if f.reads.Load() > 0 && f.writes.Load() == 0 {
		if r := f.rbound.ns.Load(); r != 0 {
			if w := f.wdl.ns.Load(); w == 0 || r < w {
				within.ns.Store(r)
				dl = &within
			}
		}
	}
	if err := f.arm(syscall.SO_SNDTIMEO, &f.wto, dl, false); err != nil {
		return f.sendLate(p, done, err)
	}
	for done < len(p) {
		n, _, e := syscall.Syscall6(syscall.SYS_SENDTO, uintptr(f.fd), uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done), syscall.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			kernelRead(p[done:], int(n))
			done += int(n)
			// A server that takes a little in every socket timeout
			// would otherwise stretch the send past its deadline.
			if done < len(p) {
				if err := f.arm(syscall.SO_SNDTIMEO, &f.wto, dl, false); err != nil {
					return f.sendLate(p, done, err)
				}
			}
		case syscall.EINTR: // as in Read
			if err := f.arm(syscall.SO_SNDTIMEO, &f.wto, dl, false); err != nil {
				return f.sendLate(p, done, err)
			}
		case syscall.EAGAIN: // SO_SNDTIMEO ran out
			if err := f.arm(syscall.SO_SNDTIMEO, &f.wto, dl, true); err != nil {
				return f.sendLate(p, done, err)
			}
		default:
			return done, os.NewSyscallError("sendto", e)
		}
	}
	return done, nil
}

// sendLate is Write's last look once its deadline has passed (err): it
// sends what the socket takes without waiting, within lateGrace of the
// first Write of the message to find the deadline passed (lateUntil), as
// Conn.read takes what has arrived. A process stopped past the deadline
// (a debugger, SIGSTOP, a frozen container) finds its socket drained when
// it runs again: the message goes whole instead of ending the connection.
// A poller's look (noWait) never waits and gets err as it is. wlock must
// be held.
func (f *fdConn) sendLate(p []byte, done int, err error) (int, error) {
	if err != os.ErrDeadlineExceeded || f.noWaiting {
		return done, err
	}
	if f.lateUntil.IsZero() {
		f.lateUntil = time.Now().Add(lateGrace)
	}
	for done < len(p) && time.Now().Before(f.lateUntil) {
		n, werr := f.tryWrite(p[done:min(len(p), done+dontWaitMax)])
		if werr != nil {
			return done, werr
		}
		if n == 0 {
			break // the socket is full
		}
		done += n
	}
	if done < len(p) {
		return done, err
	}
	return done, nil
}

// tryWrite writes what the socket takes of p without waiting.
func (f *fdConn) tryWrite(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(f.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_NOSIGNAL|syscall.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			kernelRead(p, int(n))
			return int(n), nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			return 0, nil
		default:
			return 0, os.NewSyscallError("sendto", e)
		}
	}
}

// arm sets the socket timeout opt (whose current value is *cur) so that a
// blocking call returns by deadline; ranOut says the last call's timeout
// ran out. A deadline that has passed is os.ErrDeadlineExceeded.
func (f *fdConn) arm(opt int, cur *time.Duration, dl *deadline, ranOut bool) error {
	var want time.Duration // 0: no timeout
	if d, ok := dl.get(); ok {
		if want = time.Until(d); want <= 0 {
			return os.ErrDeadlineExceeded
		}
		if want < time.Microsecond {
			want = time.Microsecond // a zero timeval would mean none
		}
		want = min(want, maxTimeo)
	}
	switch {
	case want == 0 && *cur == 0:
		return nil
	case want != 0 && !ranOut && *cur != 0 && *cur <= want+timeoSlack:
		return nil // the current timeout ends by the deadline
	}
	tv := syscall.NsecToTimeval(int64(want))
	if want != 0 && tv.Sec == 0 && tv.Usec == 0 {
		tv.Usec = 1
	}
	if err := syscall.SetsockoptTimeval(f.fd, syscall.SOL_SOCKET, opt, &tv); err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	*cur = want
	return nil
}

func (f *fdConn) shutdown() { _ = syscall.Shutdown(f.fd, syscall.SHUT_RDWR) }

func (f *fdConn) close() error {
	var err error
	f.once.Do(func() { err = syscall.Close(f.fd) })
	return err
}

// peerSilence reports, from the kernel's TCP_INFO, how long ago the peer's
// machine last acknowledged anything (tcpi_last_ack_recv), and whether it
// owes an answer meanwhile: data in flight unacknowledged (tcpi_unacked)
// or a keepalive probe unanswered (tcpi_probes), while its window is open
// (tcpi_snd_wnd). A server whose window is closed is there, and not
// reading: its window probes go out ever more rarely and Linux counts
// them, answered or not, as unanswered (measured: tcpi_probes 1 and
// tcpi_last_ack_recv over a second, a closed window, against a live
// server), so the send and receive timeouts stay its bounds. ok is false
// where the kernel does not say (tcpi_snd_wnd came in Linux 5.4).
func (f *fdConn) peerSilence() (since time.Duration, owed, ok bool) {
	var info [tcpInfoSize]byte
	n := uint32(len(info))
	_, _, e := syscall.RawSyscall6(syscall.SYS_GETSOCKOPT, uintptr(f.fd), syscall.IPPROTO_TCP, syscall.TCP_INFO,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 || n < tcpInfoSize {
		return 0, false, false
	}
	u32 := func(off int) uint32 { return *(*uint32)(unsafe.Pointer(&info[off])) }
	probes, unacked, lastAck, window := info[tcpiProbes], u32(tcpiUnacked), u32(tcpiLastAckRecv), u32(tcpiSndWnd)
	return time.Duration(lastAck) * time.Millisecond, (unacked > 0 || probes > 0) && window > 0, true
}

// Offsets in struct tcp_info (linux/tcp.h), and the bytes up to the last
// one read.
const (
	tcpiProbes      = 3
	tcpiUnacked     = 24
	tcpiLastAckRecv = 56
	tcpiSndWnd      = 228
	tcpInfoSize     = tcpiSndWnd + 4
)
