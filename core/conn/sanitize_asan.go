//go:build asan

package conn

/*
#include <stddef.h>
#include <sanitizer/asan_interface.h>

// plugrl_asan_check reports, as Go's syscall.Read and syscall.Write do
// under -asan, a system call's access to n bytes at p that are not all the
// program's (past a heap block's end, freed).
static void plugrl_asan_check(void *p, size_t n, int write) {
	void *bad = __asan_region_is_poisoned(p, n);
	if (bad != NULL) {
		__asan_report_error(__builtin_return_address(0), __builtin_frame_address(0),
			__builtin_frame_address(0), bad, write, n);
	}
}
*/
import "C"

import "unsafe"

// kernelWrote checks, as syscall.Read does under -asan, that the bytes the
// kernel just wrote (a receive straight into a C buffer among them) are
// all addressable: the kernel itself writes past a block's end silently.
func kernelWrote(p []byte, n int) {
	if p = p[:n]; len(p) > 0 {
		C.plugrl_asan_check(unsafe.Pointer(&p[0]), C.size_t(len(p)), 1)
	}
}

// kernelRead checks, as syscall.Write does under -asan, that the bytes the
// kernel just sent are all addressable.
func kernelRead(p []byte, n int) {
	if p = p[:n]; len(p) > 0 {
		C.plugrl_asan_check(unsafe.Pointer(&p[0]), C.size_t(len(p)), 0)
	}
}
