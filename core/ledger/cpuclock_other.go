//go:build !linux

package ledger

const cpuClockAvailable = false

// threadCPU is not measured here: the end record's cpu stays 0.
func threadCPU() int64 { return 0 }
