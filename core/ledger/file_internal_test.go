//go:build unix

package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stalled is a ledger whose file is swapped for a pipe: one nobody reads
// (writes block once its buffer is full), or one whose reader is gone
// (writes fail).
func stalled(t *testing.T, readerGone bool, o Options) (*Writer, *os.File) {
	t.Helper()
	w, err := Create(filepath.Join(t.TempDir(), "l"), o)
	if err != nil {
		t.Fatal(err)
	}
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if readerGone {
		r.Close()
	}
	w.flushMu.Lock() // no flush while the file is swapped
	real := w.file
	w.file = pw
	w.fd = -1 // the pipe is not a file whose size or links say anything (fileChanged)
	w.flushMu.Unlock()
	real.Close()
	return w, r
}

// TestCloseBoundedByAStalledFile: a file that stops taking writes holds
// Close for CloseTimeout at most, and Close says what happened.
func TestCloseBoundedByAStalledFile(t *testing.T) {
	w, r := stalled(t, false, Options{FlushInterval: 10 * time.Millisecond, CloseTimeout: 300 * time.Millisecond})
	defer r.Close()
	for i := range 16 { // 512 KiB: more than a pipe holds
		w.Received(incompressible(32<<10, uint64(i)))
	}
	time.Sleep(100 * time.Millisecond) // the background flush blocks in write
	start := time.Now()
	err := w.Close()
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "not written within") {
		t.Fatalf("Close: %v; want an error saying the last records were not written", err)
	}
	if took > 3*time.Second {
		t.Fatalf("Close took %v with a 300ms CloseTimeout", took)
	}
	if err2 := w.Close(); err2 != err {
		t.Fatalf("a second Close returned %v, the first %v", err2, err)
	}
	t.Logf("Close returned after %v: %v", took, err)
}

// TestWriteErrorReported: a write that fails is told to Warn once, on the
// next record's call, the records after it are refused, and Close returns
// it.
func TestWriteErrorReported(t *testing.T) {
	var mu sync.Mutex
	var warned []string
	w, _ := stalled(t, true, Options{FlushInterval: 10 * time.Millisecond, Warn: func(m string) {
		mu.Lock()
		warned = append(warned, m)
		mu.Unlock()
	}})
	w.Received([]byte("one"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		failed := w.failed
		w.mu.Unlock()
		if failed != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write to a pipe without a reader did not fail")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 3 {
		w.Received([]byte("after"))
	}
	mu.Lock()
	got := append([]string(nil), warned...)
	mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], "writing") || !strings.Contains(got[0], "records nothing more") {
		t.Fatalf("warnings: %q; want one saying the write failed", got)
	}
	w.mu.Lock()
	queued := len(w.queue)
	w.mu.Unlock()
	if queued != 0 {
		t.Fatalf("%d bytes queued after the failure", queued)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "writing") {
		t.Fatalf("Close: %v; want the write error", err)
	}
}

// TestBurstBuffersLetGo: the buffers a burst of large records grew (8 MiB
// of distinct 1 MiB messages) are let go once the flushes after it need
// far less; they were kept for the ledger's life (33 MiB a ledger).
func TestBurstBuffersLetGo(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{Level: Full, FlushInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Only this test's flushes: the background writer's wait until the end
	// (one between the burst's records took part of it, under -race).
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	for i := range 8 {
		w.Received(incompressible(1<<20, uint64(i)))
	}
	w.flushLocked(nil)
	grown := cap(w.spare) + cap(w.raw) + cap(w.out)
	for range 40 { // 4 s of a quiet loop's flushes
		w.Received([]byte("small"))
		w.flushLocked(nil)
	}
	w.mu.Lock()
	queue := cap(w.queue)
	w.mu.Unlock()
	kept := cap(w.spare) + cap(w.raw) + cap(w.lits) + cap(w.out) + queue
	if grown < 8<<20 || kept > 4*trimAbove { // four buffers, each at most trimAbove
		t.Fatalf("buffers: %d bytes after the burst, %d kept after 40 quiet flushes", grown, kept)
	}
	t.Logf("buffers: %d bytes after the burst, %d after 40 quiet flushes", grown, kept)
}

// TestTrimKeepsTheCallerFromAllocating: after one late flush (a writer
// that yielded the core for a while takes four flushes' worth at once),
// the steady rate that follows allocates nothing on the caller's thread
// while the queue is trimmed back (it grew a queue from nothing, MBs at a
// time, when the trimmed spare was nil).
func TestTrimKeepsTheCallerFromAllocating(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{Level: Full, QueueBytes: 32 << 20, FlushInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	msgs := make([][]byte, 12)
	for i := range msgs {
		msgs[i] = incompressible(512<<10, uint64(i))
	}
	step := 0
	records := func(n int) {
		for range n {
			w.Received(msgs[step%len(msgs)])
			step++
		}
	}
	// Only this test's flushes, at its cadence: the background writer's
	// wait for flushMu until the end.
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	for range 4 { // the steady rate: 3 records a flush
		records(3)
		w.flushLocked(nil)
	}
	records(12) // one late flush
	w.flushLocked(nil)
	// The caller's only allocation would be the queue's growth (the
	// process's malloc count, which this measured first, also counts other
	// tests' goroutines: a CI run saw 7 of theirs).
	queueCap := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return cap(w.queue)
	}
	for i := range 30 {
		before := queueCap()
		records(3)
		if after := queueCap(); after != before {
			t.Fatalf("flush %d after the late one: the caller's queue grew from %d to %d bytes for its 3 records", i+1, before, after)
		}
		w.flushLocked(nil)
	}
}

// TestCreateInDirOfManyRuns: a directory holding more earlier ledgers of
// this pid than Create tries names (a crash-looping container's pid 1)
// still gets a ledger: taken names are skipped by doubling steps. It
// failed plugrl_open once there were maxNames of them (10000).
func TestCreateInDirOfManyRuns(t *testing.T) {
	defer func(n int) { maxNames = n }(maxNames)
	maxNames = 20
	dir := t.TempDir()
	const runs = 500 // 25 times the names tried
	for n := 1; n <= runs; n++ {
		name := filepath.Join(dir, fmt.Sprintf("plugrl-%d-%d.ledger", os.Getpid(), n))
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := Create(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var n int
	if _, err := fmt.Sscanf(filepath.Base(w.Path()), fmt.Sprintf("plugrl-%d-%%d.ledger", os.Getpid()), &n); err != nil || n <= runs {
		t.Fatalf("the ledger went to %s; want a name past the %d taken", w.Path(), runs)
	}
}

// TestCloseSyncsToDisk: Close asks for the file to reach the disk after
// its last block (the end record) is written, so that a ledger closed
// without an error survives a power cut; it never did (no fsync at all,
// strace of a whole run). A sync that fails is Close's error.
func TestCloseSyncsToDisk(t *testing.T) {
	real := syncToDisk
	t.Cleanup(func() { syncToDisk = real })
	var synced []int64 // the file's size at each sync
	syncToDisk = func(f *os.File) error {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		synced = append(synced, st.Size())
		return real(f)
	}
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Received([]byte("one"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != st.Size() {
		t.Fatalf("syncs at file sizes %v; want one, after the last block (%d bytes)", synced, st.Size())
	}

	syncToDisk = func(*os.File) error { return fmt.Errorf("input/output error") }
	w, err = Create(filepath.Join(t.TempDir(), "l"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "syncing") {
		t.Fatalf("Close with a sync that fails: %v; want the sync's error", err)
	}
}

// TestCloseSlowSyncSaysSo: a sync to disk that outlasts CloseTimeout (a
// slow SD card or eMMC with much else to write back) leaves a file that
// holds every record, its end record too: Close's error says that the
// sync did not finish, not that the last records were not written.
func TestCloseSlowSyncSaysSo(t *testing.T) {
	real := syncToDisk
	entered, release := make(chan struct{}), make(chan struct{})
	syncToDisk = func(*os.File) error { close(entered); <-release; return nil }
	t.Cleanup(func() {
		<-entered // Close's goroutine has read syncToDisk: put it back
		syncToDisk = real
		close(release)
	})
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{CloseTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Received([]byte("one"))
	err = w.Close()
	if err == nil {
		t.Fatal("Close returned no error with the sync still running")
	}
	if strings.Contains(err.Error(), "last records were not written") || !strings.Contains(err.Error(), "sync to disk did not finish") {
		t.Fatalf("Close with the records written and the sync slow: %v; want it to say the sync did not finish", err)
	}
}
