package ledger

import (
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

// TestShortSlice: the writer's thread gets the short slice for a flush and
// its own attributes back after it; a real-time thread is left alone.
func TestShortSlice(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	was, ok := threadAttr()
	if !ok {
		t.Skip("sched_getattr refused here: the writer keeps its slice")
	}
	if was.runtime == 0 {
		t.Skip("this kernel reports no slice for SCHED_OTHER threads (before Linux 6.12): nothing to shorten")
	}
	restore := shortSlice()
	during, _ := threadAttr()
	restore()
	after, _ := threadAttr()
	if during.runtime != writerSlice {
		t.Errorf("during a flush the slice is %d ns, want %d", during.runtime, writerSlice)
	}
	if during.policy != was.policy || during.nice != was.nice {
		t.Errorf("during a flush policy %d nice %d, want the thread's %d %d", during.policy, during.nice, was.policy, was.nice)
	}
	if after != was {
		t.Errorf("after the flush the thread's attributes are %+v, want %+v as before", after, was)
	}
	if sliceRefused.Load() {
		t.Error("a call was refused")
	}

	// A SCHED_FIFO thread (where this process may make one) keeps its
	// attributes: its slice means nothing, and it is the caller's.
	fifo := schedAttr{policy: 1, priority: 1}
	if !setRealTime(&fifo) {
		t.Log("SCHED_FIFO not permitted here: the real-time case is not tried")
		return
	}
	defer setRealTime(&was)
	before, _ := threadAttr()
	restore = shortSlice()
	during, _ = threadAttr()
	restore()
	if during != before {
		t.Errorf("a SCHED_FIFO thread's attributes became %+v, want %+v untouched", during, before)
	}
}

// setRealTime sets the thread's attributes without marking the slice calls
// refused when the kernel says no.
func setRealTime(a *schedAttr) bool {
	a.size = uint32(unsafe.Sizeof(*a))
	_, _, e := syscall.RawSyscall(setAttrCall, 0, uintptr(unsafe.Pointer(a)), 0)
	return e == 0
}
