package main

/*
#include "capi.h"
*/
import "C"

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The Go runtime inside libplugrl is the library's own, so the library
// tunes it for a caller that blocks in system calls on its own thread.
//
// GOMAXPROCS at least 2. With one P (a process pinned to one core gets
// GOMAXPROCS=1), Go's sysmon takes the P away from a thread that has sat in
// a system call for two of its ticks (20 us or more) whenever no other P is
// idle, and each time it does, it goes back to waking every 20 us. A
// caller that waits milliseconds for an action (or for the socket to drain
// a large observation) then pays dozens of sysmon wake-ups per exchange:
// measured, 11 % of the core for the 16-env image workload. A second, idle
// P makes sysmon leave such a thread alone until 10 ms have passed. No more
// threads run: the second P only ever runs the process's poller and its
// sweeper of held messages (core/conn/ticker.go).
//
// And a P for every thread that calls in (fitProcs), up to 80 threads
// (threadProcs). Any Go code needs a P, and a caller's thread keeps its P
// while it waits in a system call or is back in C, so with fewer Ps than
// threads in calls a thread whose server answered waits for sysmon to take
// a P from another thread's wait (20 us to 10 ms) and for the runtime to
// hand it over through a spare thread (two futex wake-ups); the kernel,
// which would run it at once, cannot. Eight threads with a handle each, on
// a client core of their own, made 28-36k exchanges/s with 2 Ps against
// the C floor's 55-65k, and 81-84k with 9; 64 threads 26-34k against
// 76-78k, and 68-72k with 65 (2026-12-02, 2 cores). A P costs memory once
// used (the allocation caches of a busy one: about 200 KiB of RSS each, 64
// threads 20 MB with 2 Ps, 24 MB with 17, 32 MB with 65) and, when busy,
// the Receive yield that keeps sysmon asleep (core/conn/read.go, once per
// P in use every 8 ms: a thread hand-off each), never CPU when idle.
//
// Setting GOMAXPROCS in the environment overrides all of this.
func init() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
		procsSet = true
	}
	baseProcs = runtime.GOMAXPROCS(0)
}

// threadProcs is the Ps that fitProcs gives threads threads that have
// called in and live: a P each and one more, up to perThreadProcsMax
// threads; beyond that they share sharedProcs Ps. A thread counts from
// its first call (plugrl_options_init too) until it exits, so a main
// thread that opened the handles counts beside their 64 threads: the
// bound is above 64 for such a process.
//
// Two costs set the bounds, both measured with the bench's SMALL clients
// and the C floor (2026-12-06, 2 cores, GOMAXPROCS in the environment,
// 5-8 interleaved rounds; exchanges/s over the floor's on the server's
// core):
//
//   - Threads that share Ps hand them over: a thread whose server
//     answered waits for sysmon to take a P from a thread still waiting
//     (20 us to 10 ms) and for a hand-off through a spare thread, and the
//     Receive yields of shared Ps come as process-wide turns
//     (core/conn/read.go). 32 threads: 0.90 with 17 Ps, 1.08 with 33; 64
//     threads: 0.88 with 17, 0.70 with 33, 0.95 with 65 (on a client core
//     of their own 0.81 with 17, 0.91 with 65).
//   - Each P is work for the runtime's scans: a spinning thread looking
//     for work steals from every P (runtime.stealWork), sysmon looks at
//     every P at each of its ticks (retake), and every busy P yields
//     every 8 ms (a hand-off through a spare thread). Past about 80
//     threads that outweighs the Ps' gain: 80 threads 0.875 with 17 Ps,
//     0.925 with 81; 96 threads 0.85 with 17, 0.82 with 97; 128 threads
//     0.84 with 17, 0.77 with 65, 0.69 with 129 (perf: stealWork, runqgrab and setBlockOnExitSyscall took 2.4 % of
//     the client's samples with 64 threads and 65 Ps, 4.9 % with 128
//     threads and 129 Ps).
//
// The bench with this rule (PLUGRL_BENCH_HANDLES="8 64", 6 repetitions,
// 2026-12-06): 64 handles 1.01 of the floor's exchanges on the server's
// core and 0.93 on a core of their own (paired medians), with the floor's
// even progress per connection. One case loses: 64 threads on a core of
// their own that low-priority work shares (a nice 19 busy loop) kept
// 0.70-0.74 of the floor's exchanges against 0.85-0.86 with 17 Ps; on the
// server's core, under the same load, 0.94 against 0.86
// (docs/PERFORMANCE.md, "A P each for up to 80 threads").
//
// Until 2026-12-03 the Receives yielded in process-wide turns however
// many Ps there were, and then 64 threads made fewer exchanges with 65 Ps
// than with 17 (14.9-23.8k against 19.4-32.0k): the cap was 17 for every
// thread count.
//
// Not a number per CPU: the Ps are for threads that wait, and the bench's
// clients, pinned to one core, wait as much as any. Each P's memory (the
// comment above: 64 threads peaked at 35 MB of RSS with 65 Ps, 27 MB with
// 17) and the collector's dedicated workers (a quarter of GOMAXPROCS)
// grow with them too.
func threadProcs(threads int) int {
	if threads <= perThreadProcsMax {
		return threads + 1
	}
	return sharedProcs
}

const (
	perThreadProcsMax = 80
	sharedProcs       = 17
)

var (
	// baseProcs is the runtime's default GOMAXPROCS, 2 at least: as init
	// found it, and, until the library first sets GOMAXPROCS (procsSet),
	// as the runtime updates it (Go 1.25 and later follow the process's
	// CPU quota and affinity until GOMAXPROCS is set).
	baseProcs int
	procsSet  bool
	// boundThreads counts the threads that have called in and not exited
	// (helpers.c, plugrl__gate_bind_thread).
	boundThreads = (*int32)(unsafe.Pointer(C.plugrl__bound_threads()))
	// procsMu orders the changes of GOMAXPROCS.
	procsMu sync.Mutex
)

// One more P once a client records a step ledger. Its background writer
// compresses on a P of its own for milliseconds at a time, and then the P
// that the comment above keeps idle is busy: sysmon takes the caller's P
// at every wait for the server meanwhile, and wakes every 20 us. In the
// SMALL bench on one core that cost 1.1 us of client CPU per exchange
// (sysmon woke 2,700 times a second instead of 800; 22 rotated runs, with
// GOMAXPROCS=3 against the default). The process's first client with a
// ledger adds the P; it stays (an idle P costs nothing).
var ledgerP atomic.Bool

// wantProcs is the GOMAXPROCS the library wants now: the default, or a P
// per bound thread and one more while threads are few, and the ledger's.
// Once a real-time caller has called in, not a P per thread: each busy P's
// yield (core/conn/read.go) hands its thread's goroutine over through one
// of the runtime's SCHED_OTHER threads, which gets the core only when
// every real-time thread on it sleeps. 64 SCHED_FIFO threads with a handle
// each and GOMAXPROCS=65 made 8.4-9.3k exchanges/s against 11.6-12.1k with
// the default, with a p99.99 of 0.3-0.9 s (README, "Real-time callers").
func wantProcs() int {
	n := baseProcs
	if atomic.LoadInt32(rtSeen) == 0 {
		n = max(n, threadProcs(int(atomic.LoadInt32(boundThreads))))
	}
	if ledgerP.Load() {
		n++
	}
	return n
}

// fitProcs sets GOMAXPROCS to wantProcs, unless GOMAXPROCS is set in the
// environment. It runs on a thread's first call (plugrl__go_bind_thread),
// so the Ps follow the threads up and, at the next thread's first call
// after others exited, down; on each open that makes a client with a
// ledger; and, with real-time callers, after a close's collection
// (collectAfterClose), which brings back the default Ps of a process
// whose threads became real-time after they had theirs.
//
// Changing GOMAXPROCS stops the world, which, like a collection, must not
// meet a real-time caller in a call (the collection's comment below). So
// the change goes through the collection's gate, and waits for a moment
// when no other thread is in a call (else it is left to a later first
// call, open or close), whenever a real-time thread has called in
// (rtSeen) or a bound thread runs real-time now (plugrl__bound_realtime
// asks the kernel about each: plugrl__rt_ceiling looks at a thread's
// policy only every 256th call). Without one, no thread that could spin
// against the stop is in Go or can enter it: new threads wait at
// first_call_mu (exports.c), and the binding thread's own policy was
// looked at on its way in (enter: plugrl__rt_ceiling first). Left open: a
// thread made real-time, by itself or from outside, in the microseconds
// between that look and the stop's end.
func fitProcs() { fitProcsGate(false) }

// fitProcsGate is fitProcs; gateHeld says the caller holds the
// collection's gate already (collectBegin).
func fitProcsGate(gateHeld bool) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	procsMu.Lock()
	defer procsMu.Unlock()
	have := runtime.GOMAXPROCS(0)
	if !procsSet {
		baseProcs = max(2, have)
	}
	want := wantProcs()
	if want == have {
		return
	}
	// A system call per bound thread, so only when a change is due; a
	// real-time thread found now changes what is wanted.
	realtime := atomic.LoadInt32(rtSeen) != 0
	if !realtime && C.plugrl__bound_realtime() != 0 {
		realtime = true
		if want = wantProcs(); want == have {
			return
		}
	}
	if realtime && !gateHeld {
		if !collectBegin() {
			return
		}
		defer collectEnd()
	}
	runtime.GOMAXPROCS(want)
	procsSet = true
}

// spareLedgerP adds the ledger's P (see ledgerP), on the thread of an open
// that made a client with a ledger.
func spareLedgerP() {
	ledgerP.Store(true)
	fitProcs() // again at each such open, until it is done
}

// plugrl__go_bind_thread is a thread's first call into Go, made alone
// (exports.c, enter): it binds the thread to a spare M, and the runtime makes
// the next spare on the way in. The thread is counted already: it gets
// its P here.
//
// It also makes a memory fault on this thread's goroutine a panic, which
// the call's recover turns into PLUGRL_INVALID_ARGUMENT (handleBase.internal),
// instead of a fatal error that ends the process ("unexpected fault
// address"): a caller's array whose memory was freed or unmapped (a
// camera's buffer given back to its driver, a GPU's device pointer) ended
// the robot's whole control process. The setting is the goroutine's, and
// each of the thread's calls runs on the same one. Faults inside the
// runtime itself still end the process.
//
//export plugrl__go_bind_thread
func plugrl__go_bind_thread() {
	debug.SetPanicOnFault(true)
	fitProcs()
}

// Real-time callers and the garbage collector. A collection scans every
// goroutine's stack, a caller's too while it waits in a system call or is
// back in C, holding that goroutine's scan bit meanwhile: the caller's
// thread, returning to Go then, spins until the scan ends, as it does
// behind sysmon (helpers.c, plugrl__rt_ceiling). The collector's workers
// run SCHED_OTHER, so a real-time caller that preempts one in the middle
// of its scan, on its own core, spins, and the worker never runs again to
// finish: a stall until the kernel's real-time throttling, a hang without
// it. An exchange allocates nothing, so the one collection left to hit a
// real-time loop is Go's periodic one, every two minutes.
//
// So once a real-time thread has called in (helpers.c raises the flag),
// the library turns automatic collection off and collects on its own
// terms: after a successful plugrl_close or plugrl_runner_free, on the
// closing thread, which waits for it (a millisecond or so for this
// library's heap), when no other thread is in a call into the library,
// with the calls that begin meanwhile held at the door (helpers.c, the
// collection's gate): no caller's goroutine is scanned then. As a
// backstop for reconnect storms, for handles opened and never closed and
// for closes that always find another call inside, it collects when
// memory grows rtGCSlack past what lives (a memory limit, reset after
// each collection): that collection can still meet a real-time loop, once
// per rtGCSlack of garbage, where Go's own schedule would every two
// minutes. A GOGC or GOMEMLIMIT in the environment is the user's choice:
// the library then leaves the collector alone.
const rtGCSlack = 256 << 20

var (
	rtSeen = (*int32)(unsafe.Pointer(C.plugrl__rt_seen()))
	gc     gcManager
)

// gcManager takes the collector over once (see above).
type gcManager struct {
	once    sync.Once
	decided atomic.Bool // it has looked at a real-time caller
	managed atomic.Bool // and turned automatic collection off
}

// tameGC turns automatic collection off once a real-time thread has called
// in (see above): every entry into a handle calls it, at the cost of a
// load or two.
func tameGC() {
	if !gc.decided.Load() && atomic.LoadInt32(rtSeen) != 0 {
		gc.take(os.Getenv)
	}
}

// take turns automatic collection off, unless getenv shows GOGC or
// GOMEMLIMIT set; only the first call does anything.
func (m *gcManager) take(getenv func(string) string) {
	m.once.Do(func() {
		defer m.decided.Store(true)
		if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
			return
		}
		debug.SetGCPercent(-1)
		setGCLimit()
		noticeNextGC()
		m.managed.Store(true)
	})
}

// collectAfterClose collects the garbage a close left, on the closing
// thread, when the library manages the collector and no other thread is
// in a call into the library; calls that begin meanwhile wait for it (see
// plugrl__collect_begin, helpers.c: the collector's stack scans must not
// meet a real-time caller). A close that finds another thread inside
// leaves the garbage for a later one, or for the memory limit. Behind the
// same gate it fits the runtime's Ps to the threads (fitProcs).
func collectAfterClose() {
	if !gc.managed.Load() || !collectBegin() {
		return
	}
	defer collectEnd()
	runtime.GC() // noticeNextGC's finalizer then resets the limit
	fitProcsGate(true)
}

// setGCLimit sets the memory limit rtGCSlack above the memory that lives:
// the heap the last collection marked live, plus what is not heap objects
// (stacks, the runtime's own structures). Not the memory mapped: right
// after a collection that still counts the heap just freed, and a limit
// set from it would ratchet up by the slack at every collection.
func setGCLimit() {
	debug.SetMemoryLimit(liveMemory() + rtGCSlack)
}

// liveMemory is the memory setGCLimit counts as living.
func liveMemory() int64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(s)
	v := func(i int) int64 { return int64(s[i].Value.Uint64()) }
	objects := v(3)
	if v(6) > 0 { // a collection has marked what lives
		objects = v(5)
	}
	return v(0) - v(1) - v(2) - v(3) - v(4) + objects
}

// gcSentinel is an object whose finalizer runs after the collection that
// found it unreachable; it holds a pointer so that it is not a tiny
// allocation (whose finalizer may never run).
type gcSentinel struct{ _ *int }

// noticeNextGC resets the memory limit after the next collection, and so on
// after every one, so that it follows what lives.
func noticeNextGC() {
	runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
		setGCLimit()
		noticeNextGC()
	})
}
