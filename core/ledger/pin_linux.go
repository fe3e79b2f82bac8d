package ledger

import (
	"fmt"
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

// cpus is the set's CPUs, in order.
func (s *cpuSet) cpus() []int {
	var cpus []int
	for c := 0; c < maxCPU; c++ {
		if s[c/64]&(1<<(c%64)) != 0 {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// list is the set's CPUs, in a CPU list ParseCPUs reads.
func (s *cpuSet) list() string { return FormatCPUs(s.cpus()) }

// pinThread restricts the calling thread, which must be locked to its
// goroutine, to cpus (each below maxCPU), all of them or it fails: the
// kernel alone would drop the CPUs it cannot give (offline, outside the
// cpuset) and keep the rest. restore gives the thread back the CPUs it
// had.
func pinThread(cpus []int) (restore func() error, err error) {
	var was, set, got cpuSet
	if err := affinity(syscall.SYS_SCHED_GETAFFINITY, &was); err != nil {
		return nil, err
	}
	for _, c := range cpus {
		set[c/64] |= 1 << (c % 64)
	}
	if err := affinity(syscall.SYS_SCHED_SETAFFINITY, &set); err != nil {
		return nil, fmt.Errorf("the kernel refused them (%w); this thread may run on CPUs %s", err, was.list())
	}
	restore = func() error { return affinity(syscall.SYS_SCHED_SETAFFINITY, &was) }
	if err := affinity(syscall.SYS_SCHED_GETAFFINITY, &got); err != nil || got != set {
		restore()
		return nil, fmt.Errorf("the kernel would give only CPUs %s of them (offline, or outside the process's cpuset); this thread may run on CPUs %s",
			got.list(), was.list())
	}
	return restore, nil
}

// threadID is the calling thread's id (for tests).
func threadID() int { return syscall.Gettid() }
