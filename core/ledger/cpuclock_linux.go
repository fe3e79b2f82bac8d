//go:build linux

package ledger

import (
	"syscall"
	"unsafe"
)

// cpuClockAvailable: threadCPU reads a thread's CPU clock here.
const cpuClockAvailable = true

// threadCPU is the calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID;
// a system call, not the vDSO: the writer reads it twice a flush), 0 if
// the kernel refuses.
func threadCPU() int64 {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}
