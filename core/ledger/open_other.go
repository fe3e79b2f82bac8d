//go:build !unix

package ledger

import (
	"errors"
	"io/fs"
	"os"
)

// openFile opens path for a new ledger (see open_unix.go; without flock,
// another process writing the same file is not detected here).
func openFile(path string, exclusive bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if exclusive {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if exclusive && errors.Is(err, fs.ErrExist) {
		return nil, errOccupied
	}
	return f, err
}
