package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
)

// Handles. A plugrl_client* or plugrl_runner* is a token, never an address
// the library reads: TAG | generation << slotBits | slot, where TAG (bit 62)
// puts every token outside any address a 64-bit process can map (and
// outside Go's heap arenas, so the garbage collector ignores it). The slot
// indexes the handle table; the generation changes each time a slot is
// reused, so a closed handle's token never names a later handle (no ABA)
// and slots, unlike tokens, are recycled: handles never run out. A NULL,
// closed, freed or made-up handle finds nothing and gets PLUGRL_CLOSED.
// C never holds a Go pointer.
const (
	slotBits = C.PLUGRL__SLOT_BITS
	maxSlots = 1 << slotBits
	tokenTag = uint64(C.PLUGRL__TOKEN_TAG)
	genMask  = uint64(1)<<(62-slotBits) - 1
)

func init() {
	if unsafe.Sizeof(uintptr(0)) < 8 {
		panic("libplugrl: handle tokens need a 64-bit address space")
	}
}

// handle is what a slot holds: a client or a runner. stop interrupts the
// call in progress for a close; release frees what the handle holds once
// it is closed.
type handle interface {
	base() *handleBase
	stop()
	release()
}

// genBase is where each slot's generations start: a number drawn once per
// process (math/rand/v2, which the runtime seeds from the kernel's
// AT_RANDOM at start, without a system call that a seccomp filter could
// refuse). Counted from 0, every process's first handle was the same token
// (0x4000000000100000), its second the same, and so on: a handle's value
// from another process (shared memory, a file a restarted program read
// back) named this process's live handle of that slot, and a call on it
// acted on that handle, where a made-up handle gets PLUGRL_CLOSED. Now two
// processes' tokens meet once in 2^42.
var genBase = rand.Uint64() & genMask

var registry = struct {
	sync.RWMutex
	slots []slotEntry
	free  []uint32 // slots to reuse
}{}

type slotEntry struct {
	gen uint64
	h   handle // nil: free
}

// register gives h a slot and a token, publishing the token to C (for
// plugrl_interrupt) with target, the token whose flag an interrupt of h
// raises (0: h's own). It fails only when memory or slots ran out.
func register(h handle, target uintptr) (uintptr, bool) {
	registry.Lock()
	defer registry.Unlock()
	var slot uint32
	if n := len(registry.free); n > 0 {
		slot = registry.free[n-1]
		registry.free = registry.free[:n-1]
	} else {
		if len(registry.slots) >= maxSlots {
			return 0, false
		}
		slot = uint32(len(registry.slots))
		registry.slots = append(registry.slots, slotEntry{gen: genBase})
	}
	e := &registry.slots[slot]
	e.gen = (e.gen + 1) & genMask
	if e.gen == 0 {
		e.gen = 1
	}
	token := uintptr(tokenTag | e.gen<<slotBits | uint64(slot))
	if target == 0 {
		target = token
	}
	if C.plugrl__slot_publish(C.uint32_t(slot), C.uint64_t(token), C.uint64_t(target)) != 0 {
		registry.free = append(registry.free, slot)
		return 0, false
	}
	e.h = h
	b := h.base()
	b.id, b.slot = token, slot
	b.raised = (*uint64)(unsafe.Pointer(C.plugrl__slot_raised(C.uint32_t(slot))))
	return token, true
}

// unregister retires h's token; its slot is reused with a new generation.
func unregister(h handle) {
	b := h.base()
	registry.Lock()
	defer registry.Unlock()
	if e := &registry.slots[b.slot]; e.h == h {
		C.plugrl__slot_retire(C.uint32_t(b.slot))
		e.h = nil
		registry.free = append(registry.free, b.slot)
	}
}

// lookup finds the live handle whose token is p; nil for anything else.
// (A forked child never gets here: see exports.c.)
func lookup(p unsafe.Pointer) handle {
	token := uint64(uintptr(p))
	if token&^(genMask<<slotBits|(maxSlots-1)) != tokenTag {
		return nil
	}
	slot := token & (maxSlots - 1)
	registry.RLock()
	defer registry.RUnlock()
	if slot >= uint64(len(registry.slots)) {
		return nil
	}
	e := &registry.slots[slot]
	if e.h == nil || e.gen != token>>slotBits&genMask {
		return nil
	}
	return e.h
}

// handles is the registry seen as one kind of handle, T: lookup with a
// cache of the last handle found, and the exports every kind has (close,
// errmsg). clients and runners are its two instances.
type handles[T any, H interface {
	*T
	handle
}] struct {
	last atomic.Pointer[T]
}

var (
	clients handles[clientHandle, *clientHandle]
	runners handles[runnerHandle, *runnerHandle]
)

// lookup is lookup for handles of kind T, with a cache of the last one
// found: a thread calls the same handle over and over, and the cache
// spares each call the registry's lock. A closed handle is never returned
// from it (nor is its token reused).
func (t *handles[T, H]) lookup(p unsafe.Pointer) H {
	if h := H(t.last.Load()); h != nil && h.base().id == uintptr(p) && !h.base().closed.Load() {
		return h
	}
	h, _ := lookup(p).(H)
	if h != nil {
		t.last.Store((*T)(h))
	}
	return h
}

// close is plugrl_close or plugrl_runner_free: no call enters any more,
// the call in progress (if any) is interrupted (h.stop) and waited for,
// so closing never leaks; the token is retired, and h.release frees what
// the handle holds.
func (t *handles[T, H]) close(p unsafe.Pointer) (st C.plugrl_status) {
	defer recoverPlain(&st)
	h := t.lookup(p)
	if h == nil {
		return C.PLUGRL_CLOSED
	}
	b := h.base()
	self := uint64(C.plugrl__thread_self())
	if t := b.inCallback.Load(); t != 0 && t == self {
		// The callback's thread is inside a call on this handle (the
		// episode callback runs inside plugrl_runner_report, a log
		// callback inside the call that logs), which a close waits for.
		return C.PLUGRL_BUSY
	}
	if r, ok := any(h).(*runnerHandle); ok {
		if t := r.client.inCallback.Load(); t != 0 && t == self {
			return C.PLUGRL_BUSY // a log callback of its client's, inside this runner's call
		}
	}
	if ch, ok := any(h).(*clientHandle); ok {
		// From here plugrl_interrupt_all, a program's Ctrl-C, cuts the
		// close's wait for the server's close frame (close_timeout_ms)
		// short: the token is retired below, so plugrl_interrupt
		// cannot name the client then.
		closingClients.add(ch)
		defer closingClients.remove(ch)
	}
	if !b.beginClose(h.stop) {
		return C.PLUGRL_CLOSED
	}
	unregister(h)
	b.closed.Store(true) // runners borrowing a client see it
	h.release()
	return C.PLUGRL_OK
}

// closingClients are the handles plugrl_close is closing, which
// plugrl_interrupt_all interrupts whether or not they are still in the
// registry.
var closingClients = handleSet{m: map[*clientHandle]int{}}

// handleSet counts each handle's closes under way: two threads may close
// one handle at once (the second returns PLUGRL_CLOSED), and the second's
// end must not take the first's entry.
type handleSet struct {
	mu sync.Mutex
	m  map[*clientHandle]int
}

func (s *handleSet) add(h *clientHandle) {
	s.mu.Lock()
	s.m[h]++
	s.mu.Unlock()
}

func (s *handleSet) remove(h *clientHandle) {
	s.mu.Lock()
	if s.m[h]--; s.m[h] <= 0 {
		delete(s.m, h)
	}
	s.mu.Unlock()
}

// interruptClosing ends the close of every handle in the set: the call
// its close waits for, and its wait for the server's close frame.
func (s *handleSet) interruptClosing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.m {
		if c := h.target(); c != nil {
			c.InterruptClose()
		}
	}
}

// interruptAllSeen is the count of plugrl_interrupt_all calls that
// takeInterrupts has acted on (the watcher's goroutine only).
var interruptAllSeen uint64

// errmsg is plugrl_errmsg or plugrl_runner_errmsg.
func (t *handles[T, H]) errmsg(p unsafe.Pointer) (s *C.plugrl_cchar) {
	defer recoverString(&s)
	h := t.lookup(p)
	if h == nil {
		return deadHandleMsg
	}
	if r, ok := any(h).(*runnerHandle); ok && r.busy.Load() && r.client.callbackHere() {
		// Asked from a log callback of the runner's client, which runs
		// inside this runner's call on this thread (a reconnect during an
		// act or a report): the call in progress is this thread's own,
		// not another thread's (close makes the same check).
		return busyCallbackMsg
	}
	return h.base().errmsg()
}

// The interrupt watcher: one goroutine for the process, blocked (in Go's
// network poller: no thread, no wake-ups) on the eventfd that
// plugrl_interrupt writes to. It takes the interrupts plugrl_interrupt
// raised and interrupts those clients. Started by the first plugrl_open;
// if the eventfd cannot be made (the process is out of descriptors), that
// open fails, saying so, and the next one tries again.
var interruptWatcher bool

// spareDescriptors reports whether n (at most 8) more descriptors can be
// made now: nil, or the errno that refused one (EMFILE, ENFILE). It makes
// them and closes them again (capi/helpers.c).
func spareDescriptors(n int) error {
	if errno := C.plugrl__spare_descriptors(C.int(n)); errno != 0 {
		return syscall.Errno(errno)
	}
	return nil
}

// startInterruptWatcher starts the watcher if it is not running yet.
func startInterruptWatcher() error {
	registry.Lock()
	defer registry.Unlock()
	if interruptWatcher {
		return nil
	}
	// The watcher is usually the first user of Go's network poller, which
	// starts then (earlier only if os's init registered a non-blocking
	// stdin, stdout or stderr at load: the check below then asks for two
	// more than needed): it makes an epoll instance and an eventfd, and a runtime that
	// cannot make them ends the process ("fatal error: runtime:
	// netpollinit failed", seen with one or two descriptors left). So the
	// three this takes, with the watcher's own eventfd, are made sure of
	// first and closed again for it to take. Not at load: a daemon that
	// closes every descriptor as it starts would close the poller's.
	// (Another thread that takes them in between, two system calls wide,
	// still wins.)
	if err := spareDescriptors(3); err != nil {
		return fmt.Errorf("the process is out of file descriptors: the first handle needs 3, for the runtime's network poller and plugrl_interrupt, and more for each connection (%w)", err)
	}
	fd, errno := C.plugrl__interrupt_fd()
	if fd < 0 {
		return fmt.Errorf("no eventfd for plugrl_interrupt, which every handle needs: %w", errno)
	}
	interruptWatcher = true
	f := os.NewFile(uintptr(fd), "plugrl-interrupt")
	go func() {
		var b [8]byte
		for {
			if _, err := f.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				time.Sleep(10 * time.Millisecond) // cannot happen; never spin
				continue
			}
			takeInterrupts()
		}
	}()
	return nil
}

func takeInterrupts() {
	if n := uint64(C.plugrl__interrupt_all_count()); n != interruptAllSeen {
		interruptAllSeen = n
		closingClients.interruptClosing()
	}
	registry.RLock()
	var hit []*clientHandle
	for i := range registry.slots {
		ch, ok := registry.slots[i].h.(*clientHandle)
		if !ok || ch.raised == nil {
			C.plugrl__slot_take(C.uint32_t(i)) // raised for no client here now
			continue
		}
		if atomic.LoadUint64(ch.raised) != 0 {
			ch.delivering.Store(true) // before the mailbox is emptied: see takeInterrupt
			hit = append(hit, ch)
		}
	}
	registry.RUnlock()
	for _, ch := range hit {
		ch.intrMu.Lock()
		// Only ch's own token: ch may have been closed since the loop
		// above and its slot given to a new handle, whose raised token
		// is left for its next call or the watcher's next pass (its
		// raise woke the watcher again).
		if atomic.CompareAndSwapUint64(ch.raised, uint64(ch.id), 0) {
			ch.interrupt()
		}
		ch.intrMu.Unlock()
		ch.delivering.Store(false)
	}
}

// handleBase is what client and runner handles share: the busy flag that
// serialises calls, and the last error message in C memory.
type handleBase struct {
	id      uintptr // the token; set before the handle is published
	slot    uint32
	busy    atomic.Bool
	closing atomic.Bool // close (or free) has begun: no new call may enter
	closed  atomic.Bool
	// inCallback is the thread (plugrl__thread_self) running a caller's
	// callback from inside a call on this handle, or 0: a close from that
	// thread would wait for the call it is inside of, for ever.
	inCallback atomic.Uint64
	// raised is the slot's interrupt mailbox in C memory: the token
	// plugrl_interrupt raised an interrupt for (for a runner, its
	// client's is raised), or 0.
	raised *uint64
	// The watcher takes a raised interrupt and delivers it (makes it
	// pending on the client) under intrMu, with delivering set from
	// before it takes it until after: a call that begins in between
	// waits for the delivery instead of finding the mailbox empty and
	// nothing pending yet (an Act mid-chunk then went on, and the
	// interrupt ended the call after it).
	intrMu     sync.Mutex
	delivering atomic.Bool

	// The last message, in Go memory under msgMu. plugrl_errmsg copies
	// it, under the same lock, into a buffer of the calling thread's
	// (see errmsg): no thread sees a message half written, and no
	// thread's copy changes under it.
	msgMu sync.Mutex
	msg   string

	// abandon drops the connection after a memory fault inside a call on
	// this handle that had begun to use it (see midway and internal): the
	// client's AbandonBecause, or the runner's, which also forgets its
	// chunks. Set while the handle is busy (open, runner_new), and called
	// only inside calls on it.
	abandon func(why error)
	// midway is set by a call just before it hands the caller's memory to
	// the client or runner (an infer's, a feedback's, an act's or a
	// report's, and open's connect), and cleared when the call ends. A
	// fault from then on may have come in the middle of a message, or of
	// the runner's steps, and drops the connection; one before it (a
	// call's own arguments, the metadata getters, plugrl_action_copy,
	// plugrl_runner_chunk) changed nothing, and leaves the connection and
	// what it owes as they were. Read and written only by the thread
	// inside the call.
	midway bool
}

func (h *handleBase) base() *handleBase { return h }

// setMsg stores a message for plugrl_errmsg.
func (h *handleBase) setMsg(msg string) {
	h.msgMu.Lock()
	h.msg = msg
	h.msgMu.Unlock()
}

// message is the last message stored, for Go.
func (h *handleBase) message() string {
	h.msgMu.Lock()
	defer h.msgMu.Unlock()
	return h.msg
}

// errmsg returns the message for C: a copy in the calling thread's own
// buffer, valid until that thread's next errmsg; "" before any error.
// While another thread is inside a call, the only thread asking is
// normally one that was just refused with PLUGRL_BUSY, so it gets that
// message.
func (h *handleBase) errmsg() *C.plugrl_cchar {
	if h.busy.Load() {
		if h.callbackHere() {
			return busyCallbackMsg // asked from inside its own callback
		}
		return busyMsg
	}
	h.msgMu.Lock()
	defer h.msgMu.Unlock()
	if h.msg == "" {
		return emptyString
	}
	p := C.plugrl__thread_buffer(C.size_t(len(h.msg) + 1))
	if p == nil {
		return noMemoryMsg
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), len(h.msg)+1)
	b[copy(b, h.msg)] = 0
	return (*C.plugrl_cchar)(p)
}

// callbackHere reports whether the calling thread is running a caller's
// callback from inside a call on this handle (see inCallback).
func (h *handleBase) callbackHere() bool {
	t := h.inCallback.Load()
	return t != 0 && t == uint64(C.plugrl__thread_self())
}

// enter marks the handle busy; the returned status is non-OK if it is not
// usable. leave must follow an OK enter.
func (h *handleBase) enter() C.plugrl_status {
	tameGC()
	if !h.busy.CompareAndSwap(false, true) {
		if h.closing.Load() {
			// plugrl_close has begun (it waits for the call in progress):
			// the handle is going, which is what the caller needs to know.
			return C.PLUGRL_CLOSED
		}
		return C.PLUGRL_BUSY // no message: it belongs to the call in progress
	}
	if h.closing.Load() {
		h.busy.Store(false)
		return C.PLUGRL_CLOSED
	}
	return C.PLUGRL_OK
}

func (h *handleBase) leave() { h.busy.Store(false) }

// takeInterrupt takes an interrupt plugrl_interrupt raised for this slot
// that the watcher has not taken yet, or waits for the watcher to deliver
// one it took, so that a call that starts after plugrl_interrupt returned
// always sees it: two atomic loads per call when none is raised. The
// mailbox is read before delivering, which the watcher sets before it
// empties the mailbox: one of the two shows a raised interrupt.
func (h *handleBase) takeInterrupt() bool {
	if h.raised == nil || (atomic.LoadUint64(h.raised) == 0 && !h.delivering.Load()) {
		return false // one call and two loads at every call's entry (not inlined: cost 86 > 80)
	}
	return h.takeInterruptSlow()
}

func (h *handleBase) takeInterruptSlow() bool {
	h.intrMu.Lock()
	took := atomic.SwapUint64(h.raised, 0) == uint64(h.id)
	h.intrMu.Unlock()
	return took
}

// beginClose starts closing the handle: no call enters any more, the call
// in progress (if any) is interrupted with interrupt, and beginClose waits
// for it to return, which the interrupt makes prompt. It reports false if
// another close got there first.
func (h *handleBase) beginClose(interrupt func()) bool {
	if !h.closing.CompareAndSwap(false, true) {
		return false
	}
	for i := 0; !h.busy.CompareAndSwap(false, true); i++ {
		if i%16 == 0 && interrupt != nil {
			interrupt() // again now and then: the call may not have blocked yet
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// fail records err's message and returns the status for its kind.
func (h *handleBase) fail(err error) C.plugrl_status {
	h.setMsg(err.Error())
	return statusOf(err)
}

// invalid records a caller error.
func (h *handleBase) invalid(format string, args ...any) C.plugrl_status {
	h.setMsg("invalid argument: " + fmt.Sprintf(format, args...))
	return C.PLUGRL_INVALID_ARGUMENT
}

// noMemory records an allocation that failed.
func (h *handleBase) noMemory(format string, args ...any) C.plugrl_status {
	h.setMsg("out of memory: " + fmt.Sprintf(format, args...))
	return C.PLUGRL_NO_MEMORY
}

// done ends a call that use or useRunner entered: a panic becomes
// PLUGRL_INTERNAL with the stack in the message, so no panic crosses into
// C, and the handle is left. Every export on a handle begins
//
//	h, st := use(p)
//	if st != C.PLUGRL_OK {
//		return st
//	}
//	defer h.done(&st)
func (h *handleBase) done(st *C.plugrl_status) {
	if r := recover(); r != nil {
		h.internal(r, st)
	}
	h.midway = false
	h.leave()
}

// recoverTo is done for a call that leaves the handle itself (open). Use:
// defer h.recoverTo(&st).
func (h *handleBase) recoverTo(st *C.plugrl_status) {
	if r := recover(); r != nil {
		h.internal(r, st)
	}
	h.midway = false
}

// internal records a panic's value and stack for plugrl_errmsg.
//
// A memory fault is not a panic of the library's own making: every
// thread that calls in faults into a panic instead of ending the process
// (bindThread, debug.SetPanicOnFault), and what faults is nearly always
// memory the caller pointed at (an array's data that was freed or
// unmapped, a GPU's device pointer, an output buffer it cannot write).
// It is told as PLUGRL_INVALID_ARGUMENT. If the call was midway (see
// midway), the client's connection is dropped: the fault may have come in
// the middle of a message, part of which was sent, and SPEC 7.6 then
// drops what was owed on it (the next infer reconnects). Otherwise
// nothing was changed, and the caller may make the call again with good
// memory.
//
// Any other panic is PLUGRL_INTERNAL, and midway it drops the connection
// too: a pointer into the first page faults as a nil dereference, which
// names no address, and leaves the client as far into the call as a
// fault with one (a feedback's envs let go of, its frame broken off).
// Left alone, the client owed a feedback it could no longer send, and
// every infer after it was out of order.
func (h *handleBase) internal(r any, st *C.plugrl_status) {
	addr, fault := faultAddr(r)
	dropped := false
	if h.midway && h.abandon != nil {
		why := fmt.Errorf("%w at address %#x, in the middle of the call", errCallerMemory, addr)
		if !fault {
			why = fmt.Errorf("%w, in the middle of the call: %v", errMidwayPanic, r)
		}
		h.abandon(why)
		dropped = true
	}
	if fault {
		after := "nothing was changed: the connection, and what is owed on it, are as they were"
		if dropped {
			after = "the connection was dropped, and the next call reconnects"
		}
		h.setMsg(fmt.Sprintf("invalid argument: reading or writing memory the call was given faulted at address %#x: "+
			"an array's data, a name, a text or an output buffer points to memory this process cannot read or write "+
			"%s; %s (if every pointer given was good, this is a bug in libplugrl: please report it)", addr, unreachableMemory, after))
		*st = C.PLUGRL_INVALID_ARGUMENT
		return
	}
	after := ""
	if dropped {
		after = "; the connection was dropped, and the next call reconnects"
	}
	h.setMsg(fmt.Sprintf("internal error (a bug in libplugrl; please report it): %v%s\n%s", r, after, debug.Stack()))
	*st = C.PLUGRL_INTERNAL
}

// errCallerMemory is why a connection was dropped after a memory fault
// midway through a call: the reason the ledger's close record gives.
var errCallerMemory = errors.New("memory the caller gave faulted")

// errMidwayPanic is why a connection was dropped after any other panic
// midway through a call (see internal).
var errMidwayPanic = errors.New("the call broke off in a panic")

// faultAddr is the address a recovered panic's value r names when it is a
// memory fault (the runtime.Error of debug.SetPanicOnFault; one below the
// first page is a nil dereference and names none).
func faultAddr(r any) (uintptr, bool) {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return 0, false
	}
	return f.Addr(), true
}

// unreachableMemory is what faulting memory usually was, for the messages.
const unreachableMemory = "(freed, unmapped, or a GPU's device memory)"

// recoverString is for the exports that return a string: a panic gives
// the static "internal error" text instead.
func recoverString(s **C.plugrl_cchar) {
	if recover() != nil {
		*s = internalText
	}
}

// recoverPlain is recoverTo for calls without a usable handle: a memory
// fault (see internal) is the caller's PLUGRL_INVALID_ARGUMENT here too
// (plugrl_options_init's options, plugrl_open's client), any other panic
// PLUGRL_INTERNAL.
func recoverPlain(st *C.plugrl_status) {
	if r := recover(); r != nil {
		*st = C.PLUGRL_INTERNAL
		if _, ok := faultAddr(r); ok {
			*st = C.PLUGRL_INVALID_ARGUMENT
		}
	}
}

// recoverStats is for plugrl_stats and plugrl_runner_stats, which do not
// enter the handle (they read while another thread's call runs): a fault
// writing the caller's out is PLUGRL_INVALID_ARGUMENT with a message, and
// the connection, which that call may be using, is left alone. Any other
// panic goes on to recoverPlain.
func (h *handleBase) recoverStats(st *C.plugrl_status) {
	r := recover()
	if r == nil {
		return
	}
	addr, ok := faultAddr(r)
	if !ok {
		panic(r)
	}
	h.setMsg(fmt.Sprintf("invalid argument: writing the statistics faulted at address %#x: out points to memory this process cannot write "+
		"%s; nothing else was changed", addr, unreachableMemory))
	*st = C.PLUGRL_INVALID_ARGUMENT
}

// statusOf is the plugrl_status of err: a client.Kind's value is its
// status (see client.Kinds).
func statusOf(err error) C.plugrl_status {
	var e *client.Error
	if errors.As(err, &e) && e.Kind > client.KindOK && int(e.Kind) < len(client.Kinds) {
		return C.plugrl_status(e.Kind)
	}
	return C.PLUGRL_INTERNAL
}

// Static C strings, allocated once and never freed.
var (
	emptyString     = (*C.plugrl_cchar)(C.CString(""))
	deadHandleMsg   = (*C.plugrl_cchar)(C.CString("not an open handle: NULL, already closed or freed, never returned by libplugrl, or inherited across fork()"))
	busyMsg         = (*C.plugrl_cchar)(C.CString("busy: another thread is inside a call on this handle; a handle serves one thread at a time"))
	busyCallbackMsg = (*C.plugrl_cchar)(C.CString("busy: this thread is inside a callback (log or episode) of a call on this handle, which is still running; make the call after it returns"))
	noMemoryMsg     = (*C.plugrl_cchar)(C.CString("out of memory: no room to copy this handle's message"))
	unknownDTypeMsg = "dtype %d is not a plugrl_dtype value (1..12)"
)
