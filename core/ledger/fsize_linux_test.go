package ledger_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/plugrl/libplugrl/core/ledger"
)

// fsizeChildEnv names the file a TestFileSizeLimit child records to.
const fsizeChildEnv = "PLUGRL_LEDGER_TEST_FSIZE_CHILD"

// fsizeLimit is the file size limit (RLIMIT_FSIZE) the child runs under.
const fsizeLimit = 96 << 10

// TestFileSizeLimit: a ledger that reaches the process's file size limit
// (ulimit -f) ends at its last whole block, as docs/LEDGER.md says of "a
// file size limit", and the process goes on. A write past the limit
// raises SIGXFSZ, whose default action kills the process: a Go program
// ignores it, but in libplugrl.so the Go runtime leaves it to the host
// program, which a robot's control process does not ignore (the
// cartpole under `ulimit -f 200` died of it, status 153). The child
// emulates that host: SIGXFSZ at its default action.
func TestFileSizeLimit(t *testing.T) {
	if path := os.Getenv(fsizeChildEnv); path != "" {
		fsizeChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "l")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileSizeLimit$")
	cmd.Env = append(os.Environ(), fsizeChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child recording past its file size limit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "closed:") {
		t.Fatalf("the child said:\n%s", out)
	}
	recs, _, rerr := readAll(t, path)
	if rerr != nil {
		t.Fatalf("the ledger does not read back whole up to its last block: %v", rerr)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > fsizeLimit || len(recs) < 2 || recs[len(recs)-1].Kind == ledger.KindEnd {
		t.Fatalf("%d bytes, %d records (last %s): want at most %d bytes, whole blocks, no end record", fi.Size(), len(recs), recs[len(recs)-1].Kind, fsizeLimit)
	}
	t.Logf("%d records in %d bytes; the child said: %s", len(recs), fi.Size(), bytes.TrimSpace(out))
}

// fsizeChild records to path, past a file size limit, with SIGXFSZ at
// its default action, and prints what Close returned.
func fsizeChild(path string) {
	// The kernel's struct sigaction, all zero: SIG_DFL.
	var act [4]uint64
	if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGXFSZ), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
		fmt.Println("rt_sigaction:", e)
		os.Exit(3)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: fsizeLimit, Max: fsizeLimit}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(3)
	}
	warned := make(chan string, 4)
	w, err := ledger.Create(path, ledger.Options{FlushInterval: 5 * time.Millisecond, Warn: func(m string) { warned <- m }})
	if err != nil {
		fmt.Println("create:", err)
		os.Exit(3)
	}
	for i := range 64 { // 256 KiB that zstd cannot shrink: past the limit
		w.Received(ledger.Incompressible(4<<10, uint64(i)))
		time.Sleep(2 * time.Millisecond)
	}
	err = w.Close()
	if err == nil || !errors.Is(err, syscall.EFBIG) {
		fmt.Println("Close returned", err, "; want the file size limit's error")
		os.Exit(4)
	}
	fmt.Println("closed:", err)
	// A limit below the file's header: Create fails, the process goes on.
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 8, Max: fsizeLimit}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(3)
	}
	if w, err := ledger.Create(path+".small", ledger.Options{}); !errors.Is(err, syscall.EFBIG) {
		fmt.Println("Create under an 8-byte limit returned", err, "; want the file size limit's error")
		w.Close()
		os.Exit(4)
	}
	// In a directory, the failed Create leaves no file behind: it made
	// the file, which holds no header, and a process restarted after
	// each failure left one more.
	dir := path + ".d"
	if err := os.Mkdir(dir, 0o755); err != nil {
		fmt.Println("mkdir:", err)
		os.Exit(3)
	}
	for range 2 {
		if w, err := ledger.Create(dir, ledger.Options{}); !errors.Is(err, syscall.EFBIG) {
			fmt.Println("Create(a directory) under an 8-byte limit returned", err, "; want the file size limit's error")
			w.Close()
			os.Exit(4)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		fmt.Printf("Create(a directory) failed and left %d file(s) there: %s\n", len(left), left[0].Name())
		os.Exit(4)
	}
}
