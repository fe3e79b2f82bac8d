//go:build !linux

package ledger

import "errors"

func pinThread(cpus []int) (restore func() error, err error) {
	return nil, errors.New("placing the ledger's writer on given CPUs is supported on Linux only")
}

func threadID() int { return 0 }
