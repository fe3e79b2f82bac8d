//go:build !linux

package ledger

// Scheduler slices cannot be asked for here.
func slicesAvailable() bool { return false }

func shortSlice() sliceRestore { return sliceRestore{} }

// sliceRestore: nothing to restore here.
type sliceRestore struct{}

func (*sliceRestore) restore() bool { return true }
