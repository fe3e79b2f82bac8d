package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// onThrowawayThread runs f on a goroutine locked to a thread that ends
// with it, so that whatever f does to the thread's attributes never
// reaches another test, and resets the package's record of refusals
// after. f reports through its results, as only the test's own goroutine
// may end the test: a reason to skip it, and failures.
func onThrowawayThread(t *testing.T, f func() (skip string, failures []string)) {
	t.Helper()
	var skip string
	var failures []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		skip, failures = f()
	}()
	<-done
	t.Cleanup(func() { slicesUnavailable.Store(false) })
	for _, f := range failures {
		t.Error(f)
	}
	if skip != "" && len(failures) == 0 {
		t.Skip(skip)
	}
}

// probeSlices reads the calling thread's attributes, and says why a test
// of slices should be skipped here (the kernel cannot give a SCHED_OTHER
// thread a slice of its own) or fail (EINVAL: a wrong call number or
// struct size for this architecture).
func probeSlices() (a schedAttr, skip, fail string) {
	if setAttrCall == 0 {
		return a, fmt.Sprintf("no sched_setattr number for %s: the writer keeps its slice", runtime.GOARCH), ""
	}
	switch e := getAttr(&a); e {
	case 0:
	case syscall.ENOSYS, syscall.EPERM:
		return a, fmt.Sprintf("sched_getattr refused here (%v): the writer keeps its slice", e), ""
	default:
		return a, "", fmt.Sprintf("sched_getattr: %v; want it to work (is the call number %d right for %s?)", e, getAttrCall, runtime.GOARCH)
	}
	if a.runtime == 0 {
		return a, "this kernel reports no slice for SCHED_OTHER threads (before Linux 6.12): nothing to shorten", ""
	}
	return a, "", ""
}

// TestShortSlice: shortSlice gives the thread the short slice and its own
// policy and nice value, and restore the kernel's default slice back; a
// real-time thread is left as it is.
func TestShortSlice(t *testing.T) {
	onThrowawayThread(t, func() (string, []string) {
		was, skip, fail := probeSlices()
		if skip != "" || fail != "" {
			return skip, nonEmpty(fail)
		}
		var failures []string
		errorf := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
		slice := shortSlice()
		during, _ := threadAttr()
		ok := slice.restore()
		after, _ := threadAttr()
		if !ok || slicesUnavailable.Load() {
			errorf("a call was refused (restore %v)", ok)
		}
		if during.runtime != writerSlice {
			errorf("during a flush the slice is %d ns, want %d", during.runtime, writerSlice)
		}
		if during.policy != was.policy || during.nice != was.nice {
			errorf("during a flush policy %d nice %d, want the thread's %d %d", during.policy, during.nice, was.policy, was.nice)
		}
		if after != was {
			errorf("after the flush the thread's attributes are %+v, want %+v as before", after, was)
		}

		// A SCHED_FIFO writer thread (a process run under chrt -f, where
		// this one may make one) keeps what it has.
		fifo := schedAttr{size: uint32(unsafe.Sizeof(schedAttr{})), policy: 1, priority: 1}
		if _, _, e := syscall.RawSyscall(setAttrCall, 0, uintptr(unsafe.Pointer(&fifo)), 0); e != 0 {
			return "", failures // SCHED_FIFO not permitted here: the real-time case is not tried
		}
		before, _ := threadAttr()
		slice = shortSlice()
		during, _ = threadAttr()
		if !slice.restore() {
			errorf("restore of an untouched thread failed")
		}
		if during != before {
			errorf("a SCHED_FIFO thread's attributes became %+v, want %+v untouched", during, before)
		}
		return "", failures
	})
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// TestFlushSlice: the background writer's thread has the short slice while
// it flushes and the default one between flushes (a writer on CPUs of its
// own, whose thread the test can name).
func TestFlushSlice(t *testing.T) {
	onThrowawayThread(t, func() (string, []string) {
		_, skip, fail := probeSlices()
		return skip, nonEmpty(fail)
	})
	allowed := allowedCPUs(t)
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{CPUs: allowed[len(allowed)-1:], FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	slice := func() int {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(w.tid) + "/sched")
		if errors.Is(err, fs.ErrNotExist) {
			t.Skip("this kernel has no /proc/<pid>/task/<tid>/sched (CONFIG_SCHED_DEBUG off)")
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "se.slice" {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					t.Fatalf("se.slice %q: %v", v, err)
				}
				return n
			}
		}
		t.Skip("this kernel's /proc/<pid>/task/<tid>/sched has no se.slice")
		return 0
	}
	waitFor := func(what string, ok func(int) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if n := slice(); ok(n) {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("the writer's thread's slice is %d ns; want %s", n, what)
			}
		}
	}
	// Held flushes: the writer's next flush waits for the queue with its
	// slice already short.
	// (released before the deferred Close, which waits for the writer,
	// also when the test fails)
	release := sync.OnceFunc(HoldFlushes(w))
	defer release()
	waitFor("the short slice during a flush", func(n int) bool { return n == writerSlice })
	release()
	waitFor("the default slice back between flushes", func(n int) bool { return n != writerSlice })
}
