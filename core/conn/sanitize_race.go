//go:build race

package conn

import (
	"runtime"
	"unsafe"
)

// kernelWrote tells the race detector that p was just written, as
// syscall.Read does: a goroutine touching the receive buffer while a
// receive fills it is then reported.
func kernelWrote(p []byte, n int) {
	if p = p[:n]; len(p) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), len(p))
	}
}

// kernelRead tells the race detector that p was just read, as
// syscall.Write does: a goroutine writing the send buffer while a send
// reads it is then reported.
func kernelRead(p []byte, n int) {
	if p = p[:n]; len(p) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&p[0]), len(p))
	}
}
