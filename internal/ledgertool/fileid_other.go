//go:build !unix

package ledgertool

import "os"

// fileID is a file's identity, where the platform gives one by Stat
// (unix); elsewhere madeFiles compares with os.SameFile.
type fileID [2]uint64

func idOf(os.FileInfo) (fileID, bool) { return fileID{}, false }
