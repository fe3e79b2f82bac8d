//go:build !linux

package ledger

// Scheduler slices cannot be asked for here.
func slicesAvailable() bool { return false }

func shortSlice() (restore func() bool) { return func() bool { return true } }
