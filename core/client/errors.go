package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/plugrl/libplugrl/core/wire"
)

// Kind classifies what went wrong, so a caller can decide what to do next.
// A Kind's value is the C API's plugrl_status of the same name
// (include/plugrl.h): TestKindsMatchHeader checks the two against each
// other, and the C API converts one to the other by value.
//
// Adding a status touches three places: the plugrl_status enum in
// include/plugrl.h (the contract: its value and its documentation); here,
// a Kind constant at that value with its row in Kinds (C name and English
// name); and plugrl_status_str's table in capi/exports.c, C so that a
// signal handler may call it (it never enters Go), which capi's
// TestStatusStrMatchesKinds checks against Kinds. Nothing else names
// statuses: capi converts by value.
type Kind int

// The kinds, numbered as plugrl_status.
const (
	KindOK             Kind = iota // not an error: plugrl_status 0
	KindStopped                    // the server ended the run (plugrl-server-stop): exit, do not reconnect
	KindReconnected                // the connection was replaced; held feedback was dropped; start again with Infer
	KindTimeout                    // a deadline passed
	KindServer                     // the server failed: close 1011, or a text frame (SPEC 7.4)
	KindProtocol                   // the server sent something malformed
	KindInvalid                    // the caller passed something wrong; nothing was sent
	KindOutOfOrder                 // a call in the wrong order (SPEC 4.2); nothing was sent
	KindConnect                    // could not connect (after every allowed attempt)
	KindClosed                     // the client was closed
	KindBusy                       // another goroutine is inside a call on this client
	KindBufferTooSmall             // a caller's buffer is too small (the C API's copies)
	KindNoMemory                   // memory for a server's message could not be had
	KindInternal                   // a bug in the library
	KindInterrupted                // Interrupt ended the call (or the call found one pending)
	numKinds
)

// Kinds is the one table of what each Kind is called: its plugrl_status
// constant in plugrl.h and its English name, which plugrl_status_str
// returns and every error message starts with.
var Kinds = [numKinds]struct{ C, Name string }{
	KindOK:             {"PLUGRL_OK", "ok"},
	KindStopped:        {"PLUGRL_STOPPED", "stopped by server"},
	KindReconnected:    {"PLUGRL_RECONNECTED", "reconnected"},
	KindTimeout:        {"PLUGRL_TIMEOUT", "timeout"},
	KindServer:         {"PLUGRL_SERVER_ERROR", "server error"},
	KindProtocol:       {"PLUGRL_PROTOCOL_ERROR", "protocol error"},
	KindInvalid:        {"PLUGRL_INVALID_ARGUMENT", "invalid argument"},
	KindOutOfOrder:     {"PLUGRL_OUT_OF_ORDER", "call out of order"},
	KindConnect:        {"PLUGRL_CONNECT_FAILED", "connection failed"},
	KindClosed:         {"PLUGRL_CLOSED", "closed or invalid handle"},
	KindBusy:           {"PLUGRL_BUSY", "busy"},
	KindBufferTooSmall: {"PLUGRL_BUFFER_TOO_SMALL", "buffer too small"},
	KindNoMemory:       {"PLUGRL_NO_MEMORY", "out of memory"},
	KindInternal:       {"PLUGRL_INTERNAL", "internal error"},
	KindInterrupted:    {"PLUGRL_INTERRUPTED", "interrupted"},
}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return Kinds[k].Name
	}
	return fmt.Sprintf("kind %d", int(k))
}

// Error is every error this package returns, but one: the step ledger's
// own error from Close, when its file failed (see Close), which is the
// ledger package's and has no Kind (KindOf says KindInternal).
type Error struct {
	Kind Kind
	Msg  string
	Err  error // the underlying cause, if any
}

func (e *Error) Error() string { return e.Kind.String() + ": " + e.detail() }

// detail is the message without the kind: a nested *Error contributes its
// words, not its kind again.
func (e *Error) detail() string {
	msg := e.Msg
	if e.Err != nil {
		var inner string
		if ie, ok := e.Err.(*Error); ok {
			inner = ie.detail()
		} else {
			inner = e.Err.Error()
		}
		if msg == "" {
			return inner
		}
		msg += ": " + inner
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches an *Error of the same Kind, so errors.Is(err, client.ErrStopped)
// works for any message. errors.Is also looks at the causes an error wraps:
// an ErrReconnected whose connection ended in a timeout Is ErrTimeout too,
// and so is a KindConnect that gave up reconnecting after timeouts. What a
// call's outcome is, and what to do next, is its outermost Kind: switch on
// KindOf(err), as the C API's status does, and keep errors.Is for a cause
// (ErrGivenUp, a ledger's error).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Err == nil && t.Kind == e.Kind
}

// Sentinels for errors.Is.
var (
	ErrStopped     = &Error{Kind: KindStopped}
	ErrReconnected = &Error{Kind: KindReconnected}
	ErrTimeout     = &Error{Kind: KindTimeout}
	ErrServer      = &Error{Kind: KindServer}
	ErrProtocol    = &Error{Kind: KindProtocol}
	ErrInvalid     = &Error{Kind: KindInvalid}
	ErrOutOfOrder  = &Error{Kind: KindOutOfOrder}
	ErrConnect     = &Error{Kind: KindConnect}
	ErrClosed      = &Error{Kind: KindClosed}
	ErrBusy        = &Error{Kind: KindBusy}
	ErrNoMemory    = &Error{Kind: KindNoMemory}
	ErrInterrupted = &Error{Kind: KindInterrupted}
)

func newErr(k Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: err}
}

// invalidErr wraps a wire encoder's complaint about the caller's input,
// without repeating its "invalid argument" prefix.
func invalidErr(err error) *Error {
	return &Error{Kind: KindInvalid, Msg: strings.TrimPrefix(err.Error(), wire.ErrInvalid.Error()+": "), Err: nil}
}

// KindOf returns the Kind of err, or KindInternal for a foreign error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
