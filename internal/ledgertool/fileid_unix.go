//go:build unix

package ledgertool

import (
	"os"
	"syscall"
)

// fileID is a file's identity: its device and inode.
type fileID [2]uint64

// idOf is fi's identity, where its Sys is a syscall.Stat_t.
func idOf(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}
