package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// allowedCPUs is the CPUs the calling thread may run on.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	var set cpuSet
	if err := affinity(syscall.SYS_SCHED_GETAFFINITY, &set); err != nil {
		t.Fatalf("sched_getaffinity: %v", err)
	}
	return set.cpus()
}

// threadCPUs is what the kernel says thread tid of this process may run on.
func threadCPUs(t *testing.T, tid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for thread %d", tid)
	return ""
}

// TestWriterCPUs checks that Options.CPUs puts the writer's thread, and
// only it, on the CPUs asked for, with an encoder of its own (sharing would
// make it wait for writers starved elsewhere), that it still records, and
// that the thread has its own CPUs back after Close.
func TestWriterCPUs(t *testing.T) {
	allowed := allowedCPUs(t)
	last := allowed[len(allowed)-1]
	path := filepath.Join(t.TempDir(), "l")
	w, err := Create(path, Options{CPUs: []int{last}})
	if err != nil {
		t.Fatal(err)
	}
	if w.tid == 0 {
		t.Fatal("the writer has no thread of its own")
	}
	if shared, _ := sharedEncoder(); w.enc == shared {
		t.Fatal("a writer on CPUs of its own shares the process's encoder; want its own")
	}
	if got := threadCPUs(t, w.tid); got != strconv.Itoa(last) {
		t.Fatalf("the writer's thread may run on %q; want %d", got, last)
	}
	if got := FormatCPUs(allowedCPUs(t)); got != FormatCPUs(allowed) {
		t.Fatalf("the test's own thread now runs on %s; it ran on %s", got, FormatCPUs(allowed))
	}
	in, fb, obs, action, _ := smallExchange(t)
	for i := 0; i < 100; i++ {
		w.Sent(in, obs)
		w.Received(action)
		w.Sent(fb, obs)
	}
	tid := w.tid
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if sends, lost := readBack(t, path, KindSend); len(sends) != 200 || lost != 0 {
		t.Fatalf("read back %d sends, %d lost; want 200, none lost", len(sends), lost)
	}
	// The thread has its own CPUs back, if it still runs, before other
	// work may run on it.
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err == nil {
		if got := threadCPUs(t, tid); got != cpuList(allowed) {
			t.Fatalf("after Close, the writer's thread may run on %q; want %q, what it had", got, cpuList(allowed))
		}
	}
}

// cpuList writes cpus as the kernel's Cpus_allowed_list does: ranges.
func cpuList(cpus []int) string {
	var s []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			s = append(s, strconv.Itoa(cpus[i]))
		} else {
			s = append(s, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(s, ",")
}

// TestWriterCPUsRefused checks that a CPU set the kernel refuses fails
// Create with a message naming it, and leaves no file behind.
func TestWriterCPUsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "l")
	_, err := Create(path, Options{CPUs: []int{maxCPU - 1}}) // no machine here has 1024 CPUs online
	if err == nil || !strings.Contains(err.Error(), "CPUs 1023") {
		t.Fatalf("Create on CPU 1023: %v; want an error naming the CPUs", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused ledger left its file: %v", err)
	}
	if _, err := Create(path, Options{CPUs: []int{-1}}); err == nil || !strings.Contains(err.Error(), "not a CPU number") {
		t.Fatalf("Create on CPU -1: %v; want an error", err)
	}
}

// TestWriterCPUsPartlyRefused checks that a list the kernel could give
// only in part fails too, naming what it would give, instead of the writer
// running on fewer CPUs than asked; and that a retry without the bad CPU
// gets the file asked for, not the next one.
func TestWriterCPUsPartlyRefused(t *testing.T) {
	first := allowedCPUs(t)[0]
	path := filepath.Join(t.TempDir(), "l")
	_, err := Create(path, Options{CPUs: []int{first, maxCPU - 1}})
	if err == nil || !strings.Contains(err.Error(), "would give only CPUs "+strconv.Itoa(first)) {
		t.Fatalf("Create on CPUs %d,1023: %v; want an error saying only %d would be given", first, err, first)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused ledger left its file: %v", err)
	}
	w, err := Create(path, Options{CPUs: []int{first}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Path() != path {
		t.Fatalf("after a refused Create, the retry writes %s; want %s", w.Path(), path)
	}
	if got := threadCPUs(t, w.tid); got != strconv.Itoa(first) {
		t.Fatalf("the writer's thread may run on %q; want %d", got, first)
	}
}
