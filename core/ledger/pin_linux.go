package ledger

import (
	"syscall"
	"unsafe"
)

type cpuSet [maxCPU / 64]uint64

func affinity(op uintptr, set *cpuSet) error {
	_, _, e := syscall.RawSyscall(op, 0, unsafe.Sizeof(*set), uintptr(unsafe.Pointer(set)))
	if e != 0 {
		return e
	}
	return nil
}

// pinThread restricts the calling thread, which must be locked to its
// goroutine, to cpus (each below maxCPU). restore gives the thread back
// the CPUs it had.
func pinThread(cpus []int) (restore func() error, err error) {
	var was, set cpuSet
	if err := affinity(syscall.SYS_SCHED_GETAFFINITY, &was); err != nil {
		return nil, err
	}
	for _, c := range cpus {
		set[c/64] |= 1 << (c % 64)
	}
	if err := affinity(syscall.SYS_SCHED_SETAFFINITY, &set); err != nil {
		return nil, err
	}
	return func() error { return affinity(syscall.SYS_SCHED_SETAFFINITY, &was) }, nil
}

// threadID is the calling thread's id (for tests).
func threadID() int { return syscall.Gettid() }
