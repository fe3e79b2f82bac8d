package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestGCTaken: once a real-time caller is seen, automatic collection is
// off, the memory limit sits rtGCSlack above the memory in use and follows
// it after every collection, and a close collects; a GOGC or GOMEMLIMIT in
// the environment leaves the collector alone.
func TestGCTaken(t *testing.T) {
	// A close's collection fits GOMAXPROCS too.
	withProcs(t)
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})

	var user gcManager
	user.take(func(k string) string {
		if k == "GOGC" {
			return "200"
		}
		return ""
	})
	if user.managed.Load() || debug.SetGCPercent(100) != 100 {
		t.Fatal("GOGC set in the environment: the collector was taken over anyway")
	}

	var m gcManager
	m.take(func(string) string { return "" })
	if !m.managed.Load() || !m.decided.Load() {
		t.Fatal("no GOGC or GOMEMLIMIT: the collector was not taken over")
	}
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC is %d; want off (-1)", p)
	}
	near := func(what string) {
		t.Helper()
		got, want := debug.SetMemoryLimit(-1), liveMemory()+rtGCSlack
		if d := got - want; d < -(32<<20) || d > 32<<20 {
			t.Fatalf("%s: memory limit %d; want about %d (living memory + rtGCSlack)", what, got, want)
		}
	}
	near("at once")

	// Memory in use grows: the limit follows after the next collection.
	keep := make([][]byte, 0, 64)
	for i := 0; i < 64; i++ {
		keep = append(keep, make([]byte, 1<<20))
	}
	before := debug.SetMemoryLimit(-1)
	n := gcCycles()
	gc.managed.Store(true) // collectAfterClose reads the package's manager
	t.Cleanup(func() { gc.managed.Store(false) })
	enterCall() // as plugrl_close's wrapper does
	defer leaveCall()
	collectAfterClose()
	if gcCycles() == n {
		t.Fatal("collectAfterClose ran no collection")
	}
	deadline := time.Now().Add(5 * time.Second)
	for debug.SetMemoryLimit(-1) == before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if after := debug.SetMemoryLimit(-1); after < before+(32<<20) {
		t.Fatalf("64 MiB more in use: the limit went from %d to %d after a collection; want it to follow", before, after)
	}
	near("after a collection")
	runtime.KeepAlive(keep)

	// Garbage, collected: the limit must come back down with what lives,
	// not ratchet up with the memory the collection just freed.
	keep = nil
	high := debug.SetMemoryLimit(-1)
	collectAfterClose()
	deadline = time.Now().Add(5 * time.Second)
	for debug.SetMemoryLimit(-1) >= high-(32<<20) && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if after := debug.SetMemoryLimit(-1); after >= high-(32<<20) {
		t.Fatalf("64 MiB let go and collected: the limit stayed at %d (was %d); want it back near living memory + slack", after, high)
	}
	near("after the garbage was collected")
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestThreadExitBracket: a C thread that has called into the library and
// exits is counted in and out again around the runtime's unbinding of it
// (helpers.c, exit_bracket): after many such threads the gate counts no
// call in progress, so closes can still collect.
func TestThreadExitBracket(t *testing.T) {
	base := callsInside()
	if n := callsFromExitingThreads(200); n != 200 {
		t.Fatalf("started %d threads of 200", n)
	}
	if n := callsInside(); n != base {
		t.Fatalf("%d calls counted in progress after 200 threads called in and exited, %d before: a thread's exit is not counted out", n, base)
	}
}

// TestThreadExitBracketWithoutKey: where the exit bracket's key cannot
// store a thread's state (out of memory), a thread is not counted at its
// first call, and a counted thread that cannot ask for the bracket's
// second round at its exit is counted out at once, without entering the
// collection's gate: a gate entered and never left would hold every later
// collection off.
func TestThreadExitBracketWithoutKey(t *testing.T) {
	t.Cleanup(func() { exitKeyFails(false); releaseThreads() })
	inside, bound := callsInside(), atomic.LoadInt32(boundThreads)

	exitKeyFails(true)
	startLiveThreads(1)
	exitKeyFails(false)
	if n := atomic.LoadInt32(boundThreads); n != bound {
		t.Fatalf("a first call with no exit bracket: %d threads counted, want %d (its exit could not count it out)", n, bound)
	}
	releaseThreads()
	if n, b := callsInside(), atomic.LoadInt32(boundThreads); n != inside || b != bound {
		t.Fatalf("after it exited: %d calls inside, %d threads counted; want %d, %d", n, b, inside, bound)
	}

	startLiveThreads(1)
	if n := atomic.LoadInt32(boundThreads); n != bound+1 {
		t.Fatalf("a first call: %d threads counted, want %d", n, bound+1)
	}
	exitKeyFails(true)
	releaseThreads()
	exitKeyFails(false)
	if n, b := callsInside(), atomic.LoadInt32(boundThreads); n != inside || b != bound {
		t.Fatalf("a thread whose exit could not ask for the second round: %d calls inside, %d threads counted; want %d, %d", n, b, inside, bound)
	}
}

// TestCollectionGate: a close collects only when its call is the only one
// in the library, a call that begins during the collection waits for its
// end, and every exported C function counts its call in and out (capi/
// helpers.c says why).
func TestCollectionGate(t *testing.T) {
	// A close's collection fits GOMAXPROCS too.
	withProcs(t)
	percent := debug.SetGCPercent(-1) // no collection but the ones counted here
	gc.managed.Store(true)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		gc.managed.Store(false)
	})

	base := callsInside()
	callThroughWrappers()
	if n := callsInside(); n != base {
		t.Fatalf("%d calls counted in progress after calls through the C wrappers returned, %d before: a wrapper does not count its call out", n, base)
	}

	enterCall() // the closing call
	t.Cleanup(leaveCall)
	n := gcCycles()
	collectAfterClose()
	if gcCycles() == n {
		t.Fatal("the only call in the library: no collection after the close")
	}

	enterCall() // another thread's call, waiting for its server
	n = gcCycles()
	collectAfterClose()
	leaveCall()
	if gcCycles() != n {
		t.Fatal("another call was in the library: the close collected anyway")
	}

	if !collectBegin() {
		t.Fatal("the only call in the library: collectBegin refused")
	}
	ended := false
	t.Cleanup(func() {
		if !ended {
			collectEnd()
		}
	})
	entered, left := make(chan struct{}), make(chan struct{})
	go func() {
		enterCall()
		close(entered)
		leaveCall()
		close(left)
	}()
	// Its leaveCall before the next test: a call still counted in made
	// TestSpareLedgerP's collectBegin refuse (a clean-clone CI run, -race).
	t.Cleanup(func() {
		select {
		case <-left:
		case <-time.After(10 * time.Second): // the gate is broken: failed below already
		}
	})
	select {
	case <-entered:
		t.Fatal("a call entered the library while it collected")
	case <-time.After(50 * time.Millisecond):
	}
	collectEnd()
	ended = true
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the collection ended, and a call waiting at the gate did not enter")
	}
}

// withProcs restores GOMAXPROCS, the environment's GOMAXPROCS, the
// ledger's P and rtSeen after a test that changes them.
// The tests run as on a 2-core machine (baseProcs 2), with no GOMAXPROCS
// in the environment: with a default of 17 or more, every expectation
// would be the default, fitting or not.
func withProcs(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	env, had := os.LookupEnv("GOMAXPROCS")
	seen := atomic.LoadInt32(rtSeen)
	procsMu.Lock()
	base, set := baseProcs, procsSet
	baseProcs, procsSet = 2, true
	procsMu.Unlock()
	os.Unsetenv("GOMAXPROCS")
	t.Cleanup(func() {
		ledgerP.Store(false)
		atomic.StoreInt32(rtSeen, seen)
		if had {
			os.Setenv("GOMAXPROCS", env)
		} else {
			os.Unsetenv("GOMAXPROCS")
		}
		procsMu.Lock()
		baseProcs, procsSet = base, set
		procsMu.Unlock()
		runtime.GOMAXPROCS(procs)
	})
}

func checkProcs(t *testing.T, what string, want int) {
	t.Helper()
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("%s: GOMAXPROCS %d, want %d", what, got, want)
	}
}

// TestSpareLedgerP: the first open of a client with a ledger gives the
// runtime one more P, once, unless GOMAXPROCS is set in the environment;
// once a real-time caller has called in, only when the open is the only
// call in the library (changing GOMAXPROCS stops the world), and a later
// open with a ledger tries again.
func TestSpareLedgerP(t *testing.T) {
	withProcs(t)
	procs := baseProcs // with a real-time caller seen, threads get no Ps of their own
	runtime.GOMAXPROCS(procs)
	enterCall() // the open's call
	defer leaveCall()

	os.Setenv("GOMAXPROCS", "2")
	spareLedgerP()
	checkProcs(t, "GOMAXPROCS set in the environment", procs)
	os.Unsetenv("GOMAXPROCS")
	ledgerP.Store(false)

	atomic.StoreInt32(rtSeen, 1)
	enterCall() // another thread's call, waiting for its server
	spareLedgerP()
	leaveCall()
	checkProcs(t, "a real-time caller seen, another call in the library", procs)

	spareLedgerP()
	checkProcs(t, "a real-time caller seen, the only call", procs+1)
	spareLedgerP()
	checkProcs(t, "a second open with a ledger", procs+1)

	ledgerP.Store(false)
	atomic.StoreInt32(rtSeen, 0)
	procs = max(baseProcs, threadProcs(int(atomic.LoadInt32(boundThreads))))
	runtime.GOMAXPROCS(procs)
	enterCall() // another thread's call
	spareLedgerP()
	leaveCall()
	checkProcs(t, "no real-time caller, another call in the library", procs+1)
}

// TestFitProcs: the runtime gets a P for every thread that has called in
// and lives (and one more), so that threads waiting for their servers do
// not hold every P while a thread whose server answered waits for one;
// it gives them back at the next thread's first call after they exited,
// and leaves GOMAXPROCS alone when the environment sets it. Once a
// real-time caller has called in, the Ps go back to the default, when
// no other thread is in a call (changing GOMAXPROCS stops the world).
func TestFitProcs(t *testing.T) {
	withProcs(t)
	base := baseProcs
	live := int(atomic.LoadInt32(boundThreads)) // the process's threads bound so far (exited ones are not counted)
	runtime.GOMAXPROCS(base)
	want := func(threads int) int { return max(base, threadProcs(live+threads)) }

	t.Cleanup(releaseThreads)
	if n := startLiveThreads(8); n != 8 {
		t.Fatalf("started %d threads of 8", n)
	}
	checkProcs(t, "8 threads called in and live", want(8))
	if got := int(atomic.LoadInt32(boundThreads)); got != live+8 {
		t.Errorf("%d threads counted bound, want %d", got, live+8)
	}
	releaseThreads()
	if got := int(atomic.LoadInt32(boundThreads)); got != live {
		t.Fatalf("%d threads counted bound after 8 exited, want %d: an exit is not counted", got, live)
	}
	callsFromExitingThreads(1) // a next thread's first call
	checkProcs(t, "the 8 threads exited, another called in", want(1))

	// Up to perThreadProcsMax threads a P each; one more, and they share
	// sharedProcs (threadProcs says why).
	if live >= perThreadProcsMax {
		t.Fatalf("%d threads bound before the test: no room to check the Ps of %d", live, perThreadProcsMax)
	}
	if n := startLiveThreads(perThreadProcsMax - live); n != perThreadProcsMax-live {
		t.Fatalf("started %d threads of %d", n, perThreadProcsMax-live)
	}
	checkProcs(t, fmt.Sprintf("%d threads called in and live", perThreadProcsMax), perThreadProcsMax+1)
	startLiveThreads(1)
	checkProcs(t, fmt.Sprintf("%d threads called in and live", perThreadProcsMax+1), max(base, sharedProcs))
	releaseThreads()
	callsFromExitingThreads(1)
	checkProcs(t, "those threads exited, another called in", want(1))

	os.Setenv("GOMAXPROCS", "2")
	startLiveThreads(8)
	checkProcs(t, "GOMAXPROCS set in the environment", want(1))
	releaseThreads()
	os.Unsetenv("GOMAXPROCS")

	startLiveThreads(8)
	checkProcs(t, "8 threads called in and live, again", want(8))
	atomic.StoreInt32(rtSeen, 1)
	enterCall() // another thread's call, waiting for its server
	startLiveThreads(1)
	leaveCall()
	checkProcs(t, "a real-time caller seen, another call in the library", want(8))
	startLiveThreads(1) // its first call the only call
	checkProcs(t, "a real-time caller seen, then a first call alone", base)
	releaseThreads()
}

// TestFitProcsUnlistedThread: a thread the list of bound threads could not
// take (out of memory) makes whether a bound thread runs real-time
// unknown: a change of GOMAXPROCS then waits for the collection's gate, as
// with a real-time caller, without taking the process for real-time
// (rtSeen, which would turn automatic collection off for good); once that
// thread has exited the list is whole again.
func TestFitProcsUnlistedThread(t *testing.T) {
	withProcs(t)
	base := baseProcs
	live := int(atomic.LoadInt32(boundThreads))
	want := func(threads int) int { return max(base, threadProcs(live+threads)) }
	atomic.StoreInt32(rtSeen, 0)
	runtime.GOMAXPROCS(base)
	t.Cleanup(func() { listFails(false); releaseThreads() })

	enterCall() // another thread's call, waiting for its server
	listFails(true)
	startLiveThreads(1)
	listFails(false)
	leaveCall()
	if got := boundRealtime(); got != 2 {
		t.Fatalf("a bound thread not listed: plugrl__bound_realtime %d, want 2 (unknown)", got)
	}
	if atomic.LoadInt32(rtSeen) != 0 {
		t.Fatal("a bound thread not listed raised rtSeen")
	}
	checkProcs(t, "a first call not listed, another call in the library", base)

	startLiveThreads(1) // its first call the only call
	checkProcs(t, "then a first call alone", want(2))
	releaseThreads()
	if got := boundRealtime(); got != 0 {
		t.Fatalf("after the threads exited: plugrl__bound_realtime %d, want 0", got)
	}
}

// TestFitProcsSeesThreadsMadeRealTime: a thread made SCHED_FIFO after its
// first call (set up, then go real-time, here as chrt -p does it) is seen
// before the library stops the world to change GOMAXPROCS, though
// plugrl__rt_ceiling looks at its policy only every 256th call: the change
// then waits for the gate, and a close's collection brings the Ps back to
// the default. SCHED_BATCH and SCHED_OTHER|SCHED_RESET_ON_FORK are not
// taken for real-time.
func TestFitProcsSeesThreadsMadeRealTime(t *testing.T) {
	withProcs(t)
	base := baseProcs
	live := int(atomic.LoadInt32(boundThreads))
	want := func(threads int) int { return max(base, threadProcs(live+threads)) }
	atomic.StoreInt32(rtSeen, 0)
	runtime.GOMAXPROCS(base)
	t.Cleanup(releaseThreads)
	startLiveThreads(4)
	checkProcs(t, "4 threads called in and live", want(4))
	// Not real-time: SCHED_BATCH, SCHED_OTHER with SCHED_RESET_ON_FORK
	// (as rtkit leaves threads), both permitted to anyone.
	for _, p := range []struct {
		name   string
		policy int
	}{{"SCHED_BATCH", policyBatch}, {"SCHED_OTHER|SCHED_RESET_ON_FORK", policyOther | policyResetOnFork}} {
		if err := setLivePolicy(0, p.policy, 0); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if got := boundRealtime(); got != 0 || atomic.LoadInt32(rtSeen) != 0 {
			t.Fatalf("a bound thread at %s: plugrl__bound_realtime %d, rtSeen %d; want 0, 0", p.name, got, atomic.LoadInt32(rtSeen))
		}
	}
	if err := setLivePolicy(0, policyFIFO, 1); err != nil {
		t.Skipf("SCHED_FIFO not permitted here (%v): nothing more to check", err)
	}
	t.Cleanup(func() { _ = setLivePolicy(0, policyOther, 0) })

	enterCall() // another thread's call, waiting for its server
	startLiveThreads(1)
	leaveCall()
	if atomic.LoadInt32(rtSeen) == 0 {
		t.Fatal("a bound thread runs SCHED_FIFO, and a first call did not see it")
	}
	checkProcs(t, "a bound thread made real-time, another call in the library", want(4))

	gc.managed.Store(true)
	t.Cleanup(func() { gc.managed.Store(false) })
	enterCall() // the closing call, alone
	collectAfterClose()
	leaveCall()
	checkProcs(t, "real-time, after a close's collection alone", base)
}

// Release 0.1's plugrl_options is what the exported plugrl_options_init
// fills for binaries built against that header, for ever: on LP64 it ends
// at ledger_cpus, byte 128.
func TestOptionsSize01IsFrozen(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 && optionsSize01 != 128 {
		t.Fatalf("optionsSize01 = %d, want 128: release 0.1's plugrl_options must keep its size", optionsSize01)
	}
}

// TestSpareDescriptors: with k descriptors left under RLIMIT_NOFILE, a
// check for 3 fails with EMFILE for k < 3 and passes from k = 3, and
// leaves the process's descriptors as they were either way: the first
// plugrl_open relies on it to refuse, instead of letting Go's network
// poller start without its descriptors, which ends the process.
func TestSpareDescriptors(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	if lim.Cur > 256 {
		lim.Cur = 256
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	for k := 0; k <= 4; k++ {
		var fds []int
		for {
			fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				if err != syscall.EMFILE {
					t.Fatalf("filling the descriptor table: %v", err)
				}
				break
			}
			fds = append(fds, fd)
		}
		for i := 0; i < k && len(fds) > 0; i++ {
			syscall.Close(fds[len(fds)-1])
			fds = fds[:len(fds)-1]
		}
		err := spareDescriptors(3)
		// The descriptors it made are closed again: k can still be had.
		var again []int
		for i := 0; i < k; i++ {
			fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				t.Errorf("k=%d: descriptor %d of %d left after the check: %v", k, i+1, k, err)
				break
			}
			again = append(again, fd)
		}
		for _, fd := range append(fds, again...) {
			syscall.Close(fd)
		}
		switch {
		case k < 3 && !errors.Is(err, syscall.EMFILE):
			t.Errorf("k=%d: spareDescriptors(3) = %v, want EMFILE", k, err)
		case k >= 3 && err != nil:
			t.Errorf("k=%d: spareDescriptors(3) = %v, want nil", k, err)
		}
	}
}
