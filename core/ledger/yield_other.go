//go:build !linux

package ledger

import "runtime"

// yieldThread lets other goroutines run between blocks (see
// yield_linux.go); the thread-level yield is Linux's.
func yieldThread() { runtime.Gosched() }
