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
// Setting GOMAXPROCS in the environment overrides this.
func init() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}

// One more P once a client records a step ledger. Its background writer
// compresses on a P of its own for milliseconds at a time, and then the P
// that the comment above keeps idle is busy: sysmon takes the caller's P
// at every wait for the server meanwhile, and wakes every 20 us. In the
// SMALL bench on one core that cost 1.1 us of client CPU per exchange
// (sysmon woke 2,700 times a second instead of 800; 22 rotated runs, with
// GOMAXPROCS=3 against the default). The process's first client with a
// ledger adds the P; it stays (an idle P costs nothing, and changing
// GOMAXPROCS stops the world). Setting GOMAXPROCS in the environment
// overrides this too.
var ledgerP atomic.Bool

// spareLedgerP adds that P, if it has not been added, on the thread of an
// open that made a client with a ledger. Changing GOMAXPROCS stops the
// world, which, like a collection, must not meet a real-time caller in a
// call: it is done through the collection's gate, only when no other
// thread is in a call, else left to a later open.
func spareLedgerP() {
	if ledgerP.Load() || os.Getenv("GOMAXPROCS") != "" || !collectBegin() {
		return
	}
	defer collectEnd()
	if ledgerP.CompareAndSwap(false, true) {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}

// plugrl__go_bind_thread is a thread's first call into Go, made alone
// (exports.c, enter): it binds the thread to a spare M, and the runtime makes
// the next spare on the way in.
//
//export plugrl__go_bind_thread
func plugrl__go_bind_thread() {}

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
// leaves the garbage for a later one, or for the memory limit.
func collectAfterClose() {
	if !gc.managed.Load() || !collectBegin() {
		return
	}
	defer collectEnd()
	runtime.GC() // noticeNextGC's finalizer then resets the limit
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
