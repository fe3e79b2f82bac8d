//go:build !msan && !race && !asan

package conn

// The descriptor's system calls are made with syscall.Syscall6 and
// RawSyscall6, which, unlike syscall.Read and syscall.Write, do not tell
// Go's sanitizers what the kernel read or wrote. In a plain build these
// do nothing and compile to nothing; sanitize_msan.go, sanitize_race.go
// and sanitize_asan.go are the instrumented builds' versions (the msan,
// race and asan build tags are set by go build -msan, -race and -asan).

// kernelWrote notes that the kernel has just written p[:n] (a receive).
// The length is passed, not p[:n]: an argument sliced at the call would
// keep its bounds check in the plain build.
func kernelWrote(p []byte, n int) {}

// kernelRead notes that the kernel has just read p[:n] (a send).
func kernelRead(p []byte, n int) {}
