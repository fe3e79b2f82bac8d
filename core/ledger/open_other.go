//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package ledger

import (
	"errors"
	"io/fs"
	"os"
)

// openFile opens path for a new ledger (see open_unix.go): here without
// a lock, so another process writing the same file is not detected.
func openFile(path string, exclusive, invented bool) (*os.File, bool, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if exclusive {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if exclusive && errors.Is(err, fs.ErrExist) {
		return nil, false, errOccupied
	}
	return f, !exclusive && err == nil, err
}

// fileSizeLimit: no file size limit that signals the process here (see
// open_unix.go).
func fileSizeLimit() (limit int64, ok bool) { return 0, false }

func errFileSize(limit int64) error { return nil }

// fileChanged: not known here (see open_unix.go).
func fileChanged(fd int, size int64) error { return nil }

func rawFD(f *os.File) int { return -1 }
