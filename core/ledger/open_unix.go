//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"syscall"
)

// openFile opens path for a new ledger. Only a regular file will do: a
// FIFO's open waits for a reader (O_NONBLOCK makes one without a reader
// fail at once, ENXIO), and a write to a FIFO, socket or device that
// stops taking bytes would hold the writer, and Close, for ever. The file
// is truncated only once this ledger holds its lock (flock, for the
// ledger's life): another ledger writing it, in this process or another
// (workers that inherit PLUGRL_LEDGER), is left alone, and errOccupied
// sends the caller to the next name. exclusive (a file of a directory's)
// also refuses a file that exists: a finished ledger of an earlier
// process with the same pid (a container's pid 1) is not overwritten.
//
// unlocked says the file system gave no lock (NFS without lockd, some
// FUSE file systems): the file is written as before locks, and the caller
// says so.
//
// invented says the library made the name up (path.2, ...): a symlink
// there is not followed but skipped as occupied, so that one planted in
// a shared directory cannot turn the ledger onto another file.
func openFile(path string, exclusive, invented bool) (f *os.File, unlocked bool, err error) {
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_NONBLOCK
	if exclusive {
		flags |= os.O_EXCL
	}
	if invented {
		flags |= syscall.O_NOFOLLOW
	}
	f, err = os.OpenFile(path, flags, 0o644)
	switch {
	case err == nil:
	case invented && (errors.Is(err, syscall.ELOOP) || isSymlink(path)):
		// ELOOP on Linux, macOS and OpenBSD; FreeBSD and DragonFly say
		// EMLINK, NetBSD EFTYPE: a symlink there is skipped all the same.
		return nil, false, errOccupied
	case errors.Is(err, syscall.ENXIO):
		// A FIFO without a reader, or a Unix socket, whose open fails
		// the same way: the error names which.
		what := "a FIFO"
		if fi, serr := os.Stat(path); serr == nil && fi.Mode().Type() == fs.ModeSocket {
			what = "a socket"
		}
		return nil, false, fmt.Errorf("%s is %s: a ledger is written to a regular file, or to a directory", path, what)
	case exclusive && errors.Is(err, fs.ErrExist):
		return nil, false, errOccupied
	default:
		return nil, false, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%v): a ledger is written to a regular file, or to a directory", path, fi.Mode().Type())
	}
	if err == nil {
		// Back to blocking writes: a file system that answers EAGAIN
		// (FUSE, NFS) must make the writer wait, not end the ledger.
		err = syscall.SetNonblock(int(f.Fd()), false)
	}
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			err = errOccupied
		case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOTSUP),
			errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EINVAL):
			err, unlocked = nil, true // a file system without locks: write it unlocked, as before locks
		}
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, unlocked, nil
}

// isSymlink reports whether path names a symbolic link.
func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSymlink
}

// fileSizeLimit is the process's file size limit (RLIMIT_FSIZE, ulimit
// -f), if it has one. A write that starts at the limit raises SIGXFSZ,
// whose default action ends the process: a Go program ignores it, but
// libplugrl.so leaves it to the host program, so the writer must never
// make that write. It is read at each write, as setrlimit may change it:
// a system call every few hundred KiB.
func fileSizeLimit() (limit int64, ok bool) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_FSIZE, &l) != nil || uint64(l.Cur) >= math.MaxInt64 { // RLIM_INFINITY
		return 0, false
	}
	return int64(l.Cur), true
}

// errFileSize is the error of a ledger that reached limit.
func errFileSize(limit int64) error {
	return fmt.Errorf("%w: the ledger has reached the process's file size limit (RLIMIT_FSIZE, %d bytes)", syscall.EFBIG, limit)
}

// fileChanged says what happened to the file of descriptor fd (rawFD's)
// under the ledger, which has written size bytes to it: nil, or
// errDeleted when it has no name left (st_nlink 0: it was deleted, or its
// directory was), or errCut when it is shorter than the ledger wrote it
// (truncated by someone else: logrotate's copytruncate, `: > file` to
// free a full disk). The ledger's next write would go at its own offset,
// past the end: the file would become a hole of zeros and then blocks,
// unreadable from its first byte. It allocates nothing (os.File.Stat
// would), as a flush must not.
func fileChanged(fd int, size int64) error {
	var st syscall.Stat_t
	if fd < 0 || syscall.Fstat(fd, &st) != nil {
		return nil
	}
	switch {
	case st.Nlink == 0:
		return errDeleted
	case st.Size < size:
		return errCut
	}
	return nil
}

// rawFD is f's descriptor, or -1, without os.File.Fd's switch of the
// file to blocking mode.
func rawFD(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(d uintptr) { fd = int(d) })
	}
	return fd
}
