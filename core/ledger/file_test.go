//go:build unix

package ledger_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/ledger"
)

// TestCreateRefusesSocket: a Unix socket's path is refused, and the
// error says what it is (its open fails as a FIFO's without a reader
// does, ENXIO, which the error called a FIFO).
func TestCreateRefusesSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	w, err := ledger.Create(path, ledger.Options{})
	if err == nil {
		w.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "socket") {
		t.Fatalf("Create(a socket): %v; want an error saying it is a socket", err)
	}
}

// TestCreateRefusesFIFO: a FIFO is refused at once, saying so. Its open
// waited for a reader, and a writer blocked on one held Close for ever.
func TestCreateRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() {
		w, err := ledger.Create(fifo, ledger.Options{})
		if err == nil {
			w.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("Create(a FIFO): %v; want an error saying it is a FIFO", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Create(a FIFO) has not returned after 5 s")
	}
	// With a reader, the open succeeds, and the type is what refuses it.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if w, err := ledger.Create(fifo, ledger.Options{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		if err == nil {
			w.Close()
		}
		t.Fatalf("Create(a FIFO with a reader): %v; want an error saying it is not a regular file", err)
	}
}

// TestCreateSkipsALockedFile: a file another ledger holds (here, the
// lock another process's ledger would hold) is neither truncated nor
// written: the ledger goes to the next name.
func TestCreateSkipsALockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ledger")
	other, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	theirs := []byte("another process's ledger, being written")
	if _, err := other.Write(theirs); err != nil {
		t.Fatal(err)
	}
	w, err := ledger.Create(path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Path() != path+".2" {
		t.Fatalf("the ledger went to %s; want %s.2", w.Path(), path)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, theirs) {
		t.Fatalf("the locked file now holds %q", got)
	}
	if _, _, err := readAll(t, w.Path()); err != nil {
		t.Fatal(err)
	}
}

// TestCreateInDirKeepsOldLedgers: in a directory, a file that exists (an
// earlier process's ledger with this pid) is kept, not truncated; and two
// spellings of one directory count as one.
func TestCreateInDirKeepsOldLedgers(t *testing.T) {
	dir := t.TempDir()
	first := ledger.Resolve(dir) // the name the next ledger in dir would take
	old := []byte("an earlier run's ledger")
	if err := os.WriteFile(first, old, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := ledger.Create(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ledger.Create(dir+"/", ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, _ := os.ReadFile(first); !bytes.Equal(got, old) {
		t.Fatalf("%s was overwritten", first)
	}
	if a.Path() == first || b.Path() == first || filepath.Clean(a.Path()) == filepath.Clean(b.Path()) {
		t.Fatalf("ledgers at %s and %s (the existing file: %s)", a.Path(), b.Path(), first)
	}
}

// TestRefusedCPUsLeavePathAlone: a writer CPU set the kernel refuses fails
// Create before the file is touched (it truncated the file, and removed
// the path: a symlink's target was left holding a header).
func TestRefusedCPUsLeavePathAlone(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	want := []byte("keep me")
	if err := os.WriteFile(target, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	w, err := ledger.Create(link, ledger.Options{CPUs: []int{1000}})
	if err == nil {
		w.Close()
		t.Skip("the kernel gave this process CPU 1000")
	}
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("the path is gone: %v", err)
	}
	if got, _ := os.ReadFile(target); !bytes.Equal(got, want) {
		t.Fatalf("the file now holds %q", got)
	}
}
