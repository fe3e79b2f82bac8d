//go:build linux

package ledger

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// writerSlice is the scheduler slice the background writer asks for while
// it flushes: the least Linux grants (EEVDF clamps a custom slice of a
// SCHED_OTHER thread to 0.1-100 ms; before Linux 6.12 there are none, and
// the writer does not ask).
//
// Why: a flush is CPU work of a few milliseconds. With the default slice
// (0.7-3 ms; 1.4 ms on the 2-core machine it was measured on) a thread of
// the control loop woken by its server on the same core may wait for the
// writer to reach its slice's end. With 100 us it is preempted as soon as
// that thread is eligible, and still gets its fair share of the core (the
// slice sets how soon it yields the core, not how much of it it gets,
// unlike nice, which starved it). SMALL with a digest ledger on the
// server's core, 30 alternating pairs: 1.026 of the exchanges of the
// default slice (90 % interval 1.001-1.093), 1.1 us less client CPU per
// exchange (0.3-2.4) (docs/LEDGER.md).
const writerSlice = 100_000 // ns

// schedAttr is struct sched_attr of sched_setattr(2), its first version
// (SCHED_ATTR_SIZE_VER0, 48 bytes).
type schedAttr struct {
	size     uint32
	policy   uint32
	flags    uint64
	nice     int32
	priority uint32
	runtime  uint64 // for SCHED_OTHER and SCHED_BATCH since Linux 6.12: the slice
	deadline uint64
	period   uint64
}

// Linux's scheduling policies that a slice applies to.
const (
	schedOther = 0
	schedBatch = 3

	schedResetOnFork = 0x01
)

// schedAttrCalls are sched_getattr's and sched_setattr's numbers on this
// architecture (the syscall package has them for some only); 0: unknown
// here, and the writer keeps its thread's slice.
var getAttrCall, setAttrCall = func() (uintptr, uintptr) {
	switch runtime.GOARCH {
	case "amd64":
		return 315, 314
	case "arm64", "riscv64", "loong64":
		return 275, 274
	case "386":
		return 352, 351
	case "arm":
		return 381, 380
	}
	return 0, 0
}()

// slicesUnavailable is set when slices cannot be asked for here: the
// kernel (or a seccomp filter) refused sched_getattr or sched_setattr
// once, or reports no slice for a SCHED_OTHER thread (before Linux 6.12).
// The writer then stops asking, and stops locking its thread for it.
var slicesUnavailable atomic.Bool

// slicesAvailable reports whether a flush should try shortSlice.
func slicesAvailable() bool { return setAttrCall != 0 && !slicesUnavailable.Load() }

// shortSlice gives the calling thread, which must be locked to its
// goroutine, a writerSlice slice, if it is a SCHED_OTHER or SCHED_BATCH
// thread (a real-time one, possible in a Go program run under chrt, is
// left alone: libplugrl.so makes its runtime's threads SCHED_OTHER).
// restore gives the thread its policy and nice value back and its slice:
// the kernel's default (a runtime of 0), unless that is not what it had,
// which was then a slice of its own (inherited from a process started
// with one), given back as read. Restoring the value read in every case
// would fix a default slice at that length for good, as a slice of the
// thread's own. It reports false if the kernel refused, and the thread
// must then never run another goroutine.
func shortSlice() sliceRestore {
	was, ok := threadAttr()
	if !ok || (was.policy != schedOther && was.policy != schedBatch) || was.runtime == writerSlice {
		return sliceRestore{}
	}
	if was.runtime == 0 { // a kernel before EEVDF's custom slices
		slicesUnavailable.Store(true)
		return sliceRestore{}
	}
	short := was
	short.runtime = writerSlice
	if !setThreadAttr(&short) {
		return sliceRestore{}
	}
	return sliceRestore{was: was, changed: true}
}

// sliceRestore is what shortSlice changed: a value, not a closure, so
// that a flush allocates nothing (a closure over the attributes took 3
// allocations a flush, which TestFlushAllocs caught once it ran the
// background flush).
type sliceRestore struct {
	was     schedAttr
	changed bool
}

// restore undoes shortSlice (see there); it reports false if the kernel
// refused.
func (r *sliceRestore) restore() bool {
	if !r.changed {
		return true
	}
	back := r.was
	back.runtime = 0
	if !setThreadAttr(&back) {
		return false
	}
	if now, ok := threadAttr(); ok && now.runtime != r.was.runtime {
		return setThreadAttr(&r.was) // its own slice, not the default
	}
	return true
}

// threadAttr reads the calling thread's scheduling attributes.
func threadAttr() (schedAttr, bool) {
	var a schedAttr
	if !slicesAvailable() {
		return a, false
	}
	if e := getAttr(&a); e != 0 {
		slicesUnavailable.Store(true)
		return a, false
	}
	return a, true
}

// getAttr is sched_getattr(2) of the calling thread.
func getAttr(a *schedAttr) syscall.Errno {
	_, _, e := syscall.RawSyscall6(getAttrCall, 0, uintptr(unsafe.Pointer(a)), unsafe.Sizeof(*a), 0, 0, 0)
	return e
}

// setThreadAttr sets the calling thread's scheduling attributes to a. Of
// a's flags only reset-on-fork is passed on: the others sched_getattr may
// report (utilization clamps) need a larger struct than this one.
func setThreadAttr(a *schedAttr) bool {
	a.size = uint32(unsafe.Sizeof(*a))
	a.flags &= schedResetOnFork
	_, _, e := syscall.RawSyscall(setAttrCall, 0, uintptr(unsafe.Pointer(a)), 0)
	if e != 0 {
		slicesUnavailable.Store(true)
		return false
	}
	return true
}
