//go:build linux

package ledger

import "syscall"

// sparseZeros returns n zero bytes that take memory only where they are
// written: anonymous pages the kernel backs on first touch. free unmaps
// them; nothing may use the bytes after.
func sparseZeros(n int) (b []byte, free func()) {
	if n <= 0 {
		return nil, func() {}
	}
	m, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return make([]byte, n), func() {} // the heap's, then
	}
	return m, func() { _ = syscall.Munmap(m) }
}
