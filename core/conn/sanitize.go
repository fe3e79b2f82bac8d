//go:build !msan && !race && !asan

package conn

// The descriptor's system calls are made with syscall.Syscall6 and
// RawSyscall6, which, unlike syscall.Read and syscall.Write, do not tell
// Go's sanitizers what the kernel read or wrote. In a plain build these
// do nothing and compile to nothing; sanitize_msan.go, sanitize_race.go
// and sanitize_asan.go are the instrumented builds' versions (the msan,
// race and asan build tags are set by go build -msan, -race and -asan).

// kernelWrote notes that the kernel has just written p (a receive).
func kernelWrote(p []byte) {}

// kernelRead notes that the kernel has just read p (a send).
func kernelRead(p []byte) {}
