// Package badmem gives tests memory whose reading faults, as the C API's
// callers' memory can (an unmapped camera buffer, a freed array, a GPU's
// device pointer), to check what a fault in the middle of a call leaves.
package badmem

import (
	"syscall"
	"testing"
)

// TwoPages returns two pages, of which the second cannot be read or
// written, and the page size; they are unmapped when the test ends. The
// second page is PROT_NONE rather than unmapped, so that the runtime's
// next mmap cannot take its place. Where mmap or mprotect is refused, the
// test is skipped.
//
// A read of the second page faults: under debug.SetPanicOnFault, as the
// C API sets it, that is a panic the test can recover. The race detector
// and the sanitizers take such a fault themselves, so tests that use it
// are built without them.
func TwoPages(tb testing.TB) (mem []byte, page int) {
	tb.Helper()
	page = syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		tb.Skip(err)
	}
	tb.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		tb.Skip(err)
	}
	return mem, page
}
