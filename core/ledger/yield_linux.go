//go:build linux

package ledger

import "syscall"

// yieldThread gives the core to any thread waiting for it: the writer
// calls it between blocks, so that a client thread woken by its server
// (on the same core, under CFS) waits for one block's work at most,
// not for a whole flush.
func yieldThread() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
