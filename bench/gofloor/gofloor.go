// Command gofloor is not a command: built with -buildmode=c-shared it is
// libplugrl_gofloor.so, the floor of any Go library a C program calls for
// each exchange. plugrl_bench_gofloor (bench/bench_floor.cpp built with
// PLUGRL_FLOOR_VIA_GO) makes every socket call of the C floor through it:
// the same frames, masked in C, and between the C program and the kernel
// only what the Go runtime costs a thread that calls in from C. It keeps
// the runtime the way libplugrl keeps it, so that the difference between
// the two is libplugrl's own path:
//
//   - at least 2 Ps from the start, a P per calling thread and one more,
//     up to 80 threads (17 beyond), and no change once a real-time thread
//     has called in; GOMAXPROCS in the environment overrides all of it
//     (capi/runtime.go, init and wantProcs);
//   - the same yield before each receive (core/conn/read.go, yieldDue):
//     each connection every 8 ms while the receives in progress are fewer
//     than the Ps, else the process once every 8 ms per P;
//   - the same system calls: a send of up to 64 KiB tried without telling
//     the scheduler and without waiting, the rest blocking; a blocking
//     receive (core/conn/fd_linux.go);
//   - the runtime's threads created SCHED_OTHER from a real-time creator,
//     and sysmon at the highest priority of the real-time callers
//     (threads.c; capi/helpers.c).
//
// It allocates nothing after its first calls, so the collector has nothing
// to do. It does not count threads that exit (the bench's live as long as
// the process), nor block the runtime's threads' signals as libplugrl
// does. A descriptor of 65536 or more never yields. Not a part of
// libplugrl: the bench's third floor (tests/bench.sh, PLUGRL_BENCH_GOFLOOR=1).
package main

/*
#cgo LDFLAGS: -ldl
#include <stddef.h>
int plugrl_gofloor_ceiling(void);
*/
import "C"

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// yieldEvery is libplugrl's (core/conn/conn.go).
const yieldEvery = 8 * time.Millisecond

// The Ps, as capi/runtime.go sets them (threadProcs, wantProcs), and the
// largest send tried without waiting (core/conn/fd_linux.go).
const (
	perThreadProcsMax = 80
	sharedProcs       = 17
	maxTrySend        = 64 << 10
)

var (
	procsMu   sync.Mutex
	threads   int
	baseProcs int
	procsEnv  = os.Getenv("GOMAXPROCS") != ""
	rtSeen    bool
	procs     atomic.Int32
	receiving atomic.Int32
	lastYield atomic.Int64 // the process's last yield (since epoch)
	epoch     = time.Now()
	// connYield is each connection's last yield, by descriptor. Each
	// descriptor's receives run on one thread at a time.
	connYield [1 << 16]time.Duration
)

func init() {
	if !procsEnv && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	baseProcs = runtime.GOMAXPROCS(0)
	procs.Store(int32(baseProcs))
}

// gf_bind is a thread's first call: it gets its P, as in libplugrl.
//
//export gf_bind
func gf_bind() {
	procsMu.Lock()
	defer procsMu.Unlock()
	threads++
	if C.plugrl_gofloor_ceiling() != 0 {
		rtSeen = true
	}
	if rtSeen || procsEnv {
		return
	}
	want := sharedProcs
	if threads <= perThreadProcsMax {
		want = threads + 1
	}
	runtime.GOMAXPROCS(max(baseProcs, want))
	procs.Store(int32(runtime.GOMAXPROCS(0)))
}

// yieldDue is core/conn/read.go's yieldDue.
func yieldDue(fd int, now time.Duration, busy, procs int32) bool {
	if busy < procs {
		if now-connYield[fd] < yieldEvery {
			return false
		}
		connYield[fd] = now
		lastYield.Store(int64(now))
		return true
	}
	last := time.Duration(lastYield.Load())
	gap := yieldEvery / time.Duration(max(1, min(busy, procs)))
	if now-last < gap || !lastYield.CompareAndSwap(int64(last), int64(now)) {
		return false
	}
	connYield[fd] = now
	return true
}

// gf_recv is recv(2) on a blocking socket, after libplugrl's yield; it
// returns the count, or minus the errno.
//
//export gf_recv
func gf_recv(fd C.int, p unsafe.Pointer, n C.size_t, flags C.int) C.long {
	busy := receiving.Add(1)
	defer receiving.Add(-1)
	if fd >= 0 && int(fd) < len(connYield) && yieldDue(int(fd), time.Since(epoch), busy, procs.Load()) {
		runtime.Gosched()
	}
	r, _, e := syscall.Syscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(n), uintptr(flags), 0, 0)
	if e != 0 {
		return -C.long(e)
	}
	return C.long(r)
}

// gf_send is send(2); it returns the count, or minus the errno.
//
//export gf_send
func gf_send(fd C.int, p unsafe.Pointer, n C.size_t, flags C.int) C.long {
	return send(syscall.SYS_SENDTO, [6]uintptr{uintptr(fd), uintptr(p), uintptr(n), uintptr(flags)}, 3, n)
}

// gf_sendmsg is sendmsg(2), of total bytes in all; it returns the count,
// or minus the errno.
//
//export gf_sendmsg
func gf_sendmsg(fd C.int, msg unsafe.Pointer, total C.size_t, flags C.int) C.long {
	return send(syscall.SYS_SENDMSG, [6]uintptr{uintptr(fd), uintptr(msg), uintptr(flags)}, 2, total)
}

// send makes the system call trap with args, whose flags are
// args[flagsAt], as libplugrl sends: up to maxTrySend bytes first without
// waiting and without the scheduler's system-call bookkeeping; if the
// socket took nothing, with a blocking call.
func send(trap uintptr, args [6]uintptr, flagsAt int, size C.size_t) C.long {
	if size <= maxTrySend {
		try := args
		try[flagsAt] |= syscall.MSG_DONTWAIT
		r, _, e := syscall.RawSyscall6(trap, try[0], try[1], try[2], try[3], try[4], try[5])
		if e == 0 {
			return C.long(r)
		}
		if e != syscall.EAGAIN {
			return -C.long(e)
		}
	}
	r, _, e := syscall.Syscall6(trap, args[0], args[1], args[2], args[3], args[4], args[5])
	if e != 0 {
		return -C.long(e)
	}
	return C.long(r)
}

func main() {}
