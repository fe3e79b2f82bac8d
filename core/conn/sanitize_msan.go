//go:build msan

package conn

// #include <sanitizer/msan_interface.h>
import "C"

import "unsafe"

// kernelWrote marks p[:n] initialised, as MemorySanitizer's interceptor of
// recv does for a C program: the bytes came from the peer. Without it every
// read of a received message is reported as a read of bytes never written.
func kernelWrote(p []byte, n int) {
	if p = p[:n]; len(p) > 0 {
		C.__msan_unpoison(unsafe.Pointer(&p[0]), C.size_t(len(p)))
	}
}

// kernelRead checks, as syscall.Write does under -msan, that every byte
// sent was written first. Only C memory can fail it: every Go allocation
// is unpoisoned when it is made (runtime.msanmalloc), so a gap in a frame
// built in Go memory passes; every send today is from Go memory (wbuf,
// the control frames, crypto/tls's records), and the copies into it are
// what check the caller's bytes. It is for a send straight from C memory.
func kernelRead(p []byte, n int) {
	if p = p[:n]; len(p) > 0 {
		C.__msan_check_mem_is_initialized(unsafe.Pointer(&p[0]), C.size_t(len(p)))
	}
}
