package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
)

// Handles. A plugrl_client* or plugrl_runner* is a token: an integer in a
// range that is never a valid address of Go or C memory, looked up in a
// table here and never dereferenced. So a NULL, closed or made-up handle
// finds nothing and gets PLUGRL_CLOSED instead of reading freed memory, a
// closed handle's value is never reused (no ABA), and C never holds a Go
// pointer. Tokens start at 64 KiB (above mmap_min_addr's unmapped page
// zero region Go's checks care about, below any program or heap mapping).
const (
	tokenBase  = 0x10000
	tokenLimit = 0x3f0000
)

var registry = struct {
	sync.RWMutex
	next    uintptr
	clients map[uintptr]*clientHandle
	runners map[uintptr]*runnerHandle
}{next: tokenBase, clients: map[uintptr]*clientHandle{}, runners: map[uintptr]*runnerHandle{}}

// handleBase is what client and runner handles share: the busy flag that
// serialises calls, and the last error message in C memory.
type handleBase struct {
	id     uintptr // the token; set before the handle is published
	busy   atomic.Bool
	closed atomic.Bool
	msg    *C.char // NUL-terminated, C memory
	msgCap int
}

func newToken() (uintptr, bool) {
	if registry.next >= tokenLimit {
		return 0, false
	}
	id := registry.next
	registry.next++
	return id, true
}

// setMsg stores a message for plugrl_errmsg in the handle's C buffer.
func (h *handleBase) setMsg(msg string) {
	if len(msg)+1 > h.msgCap {
		p := C.realloc(unsafe.Pointer(h.msg), C.size_t(len(msg)+1))
		if p == nil {
			return
		}
		h.msg, h.msgCap = (*C.char)(p), len(msg)+1
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(h.msg)), h.msgCap)
	n := copy(b, msg)
	b[n] = 0
}

func (h *handleBase) freeMsg() {
	C.free(unsafe.Pointer(h.msg))
	h.msg, h.msgCap = nil, 0
}

// errmsg returns the message for C; "" before any error. While another
// thread is inside a call, the only thread asking is one that was just
// refused with PLUGRL_BUSY, so it gets that message (and the buffer, which
// the running call may be writing, is not read).
func (h *handleBase) errmsg() *C.plugrl_cchar {
	if h.busy.Load() {
		return busyMsg
	}
	if h.msg == nil {
		return emptyString
	}
	return (*C.plugrl_cchar)(h.msg)
}

// enter marks the handle busy; the returned status is non-OK if it is not
// usable. leave must follow an OK enter.
func (h *handleBase) enter() C.plugrl_status {
	if !h.busy.CompareAndSwap(false, true) {
		return C.PLUGRL_BUSY // no message: it belongs to the call in progress
	}
	if h.closed.Load() {
		h.busy.Store(false)
		return C.PLUGRL_CLOSED
	}
	return C.PLUGRL_OK
}

func (h *handleBase) leave() { h.busy.Store(false) }

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

// recoverTo turns a panic into PLUGRL_INTERNAL with the stack in the
// message, so no panic crosses into C. Use: defer h.recoverTo(&st).
func (h *handleBase) recoverTo(st *C.plugrl_status) {
	if r := recover(); r != nil {
		h.setMsg(fmt.Sprintf("internal error (a bug in libplugrl; please report it): %v\n%s", r, debug.Stack()))
		*st = C.PLUGRL_INTERNAL
	}
}

// recoverString is for the exports that return a string: a panic gives
// the static "internal error" text instead.
func recoverString(s **C.plugrl_cchar) {
	if recover() != nil {
		*s = (*C.plugrl_cchar)(C.plugrl__status_name(C.PLUGRL_INTERNAL))
	}
}

// recoverPlain is recoverTo for calls without a usable handle.
func recoverPlain(st *C.plugrl_status) {
	if r := recover(); r != nil {
		*st = C.PLUGRL_INTERNAL
	}
}

var statusOfKind = map[client.Kind]C.plugrl_status{
	client.KindInternal:    C.PLUGRL_INTERNAL,
	client.KindStopped:     C.PLUGRL_STOPPED,
	client.KindReconnected: C.PLUGRL_RECONNECTED,
	client.KindTimeout:     C.PLUGRL_TIMEOUT,
	client.KindServer:      C.PLUGRL_SERVER_ERROR,
	client.KindProtocol:    C.PLUGRL_PROTOCOL_ERROR,
	client.KindInvalid:     C.PLUGRL_INVALID_ARGUMENT,
	client.KindOutOfOrder:  C.PLUGRL_OUT_OF_ORDER,
	client.KindConnect:     C.PLUGRL_CONNECT_FAILED,
	client.KindClosed:      C.PLUGRL_CLOSED,
	client.KindBusy:        C.PLUGRL_BUSY,
}

func statusOf(err error) C.plugrl_status {
	var e *client.Error
	if errors.As(err, &e) {
		if st, ok := statusOfKind[e.Kind]; ok {
			return st
		}
	}
	return C.PLUGRL_INTERNAL
}

// Static C strings, allocated once and never freed.
var (
	emptyString     = (*C.plugrl_cchar)(C.CString(""))
	deadHandleMsg   = (*C.plugrl_cchar)(C.CString("not an open handle: NULL, already closed or freed, or never returned by libplugrl"))
	busyMsg         = (*C.plugrl_cchar)(C.CString("busy: another thread is inside a call on this handle; a handle serves one thread at a time"))
	versionCString  = (*C.plugrl_cchar)(C.CString(version))
	unknownDTypeMsg = "dtype %d is not a plugrl_dtype value (1..12)"
)
