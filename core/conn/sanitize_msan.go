//go:build msan

package conn

// #include <sanitizer/msan_interface.h>
import "C"

import "unsafe"

// kernelWrote marks p initialised, as MemorySanitizer's interceptor of
// recv does for a C program: the bytes came from the peer. Without it every
// read of a received message is reported as a read of bytes never written.
func kernelWrote(p []byte) {
	if len(p) > 0 {
		C.__msan_unpoison(unsafe.Pointer(&p[0]), C.size_t(len(p)))
	}
}

// kernelRead checks, as syscall.Write does under -msan, that every byte
// sent was written first: bytes the library never wrote (a stale tail of a
// C buffer, a gap in a frame) would leak whatever memory held onto the wire.
func kernelRead(p []byte) {
	if len(p) > 0 {
		C.__msan_check_mem_is_initialized(unsafe.Pointer(&p[0]), C.size_t(len(p)))
	}
}
