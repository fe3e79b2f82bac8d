// Package client is the PlugRL protocol session of an env client: it reads
// metadata, sends infer and feedback in the order SPEC 4.2 allows, checks
// every action against its request, and handles each way a connection can
// end as SPEC 7 says.
//
// A Client is used by one goroutine at a time: a second goroutine that calls
// Connect, Infer or Feedback while a call is running gets ErrBusy rather
// than a corrupted stream, and every other method but those below belongs
// to the goroutine that makes the calls (they read and change the same
// state unguarded). Interrupt, InterruptBlocked, InterruptClose, Close and
// Stats may be called from any goroutine: Interrupt ends a blocked call at
// once, Close interrupts it and waits for it to return. What a method
// returns (Metadata, an Action) is the client's own: read it, do not
// change it.
// Steady-state Infer/Feedback exchanges allocate nothing on the Go heap.
//
// Every blocking call returns by a deadline the caller chose (Options), and
// the memory a server can make a client use is bounded by the size the
// request's action can legitimately have, or by MaxMessageSize.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// The close reasons of SPEC 7 and the feature of SPEC 10.1 (defined in wire).
const (
	ReasonStop            = wire.ReasonStop
	ReasonResync          = wire.ReasonResync
	ReasonFeedbackTimeout = wire.ReasonFeedbackTimeout
	FeatureReuse          = wire.FeatureReuse
)

// Level is a log message's severity.
type Level int

// Log levels.
const (
	LevelDebug Level = iota
	LevelInfo
	LevelWarn
	LevelError
)

// Options configure a Client. The zero value of every field has a sensible
// default, noted beside it.
type Options struct {
	URL    string // ws://host:port or wss://host:port
	APIKey string // sent as Authorization: Api-Key <key> (SPEC 1.2)

	ConnectTimeout  time.Duration // name lookup + TCP + TLS + WebSocket handshake; 10 s
	MetadataTimeout time.Duration // for the metadata after the handshake; 30 s
	ReceiveTimeout  time.Duration // for an action after an infer; 300 s (a learn step can take minutes)
	SendTimeout     time.Duration // for sending one message once the server stops reading; 10 s
	CloseTimeout    time.Duration // Close's wait for the server's close frame; 1 s
	// DeadPeerTimeout bounds how long the server's machine may leave what
	// this client sent, or its TCP keepalive probes, unanswered before the
	// connection counts as lost (a server that lost power, a network
	// gone): it is noticed then, inside a call or between calls, instead of
	// at ReceiveTimeout or after the kernel's 15 minutes. A slow, busy or
	// not-reading server still answers at the TCP level and is not
	// affected (conn.Options.DeadPeerTimeout says how). 0: 20 s
	// (conn.DefaultDeadPeerTimeout); below 2 s (conn.MinDeadPeerTimeout):
	// 2 s; negative: off.
	DeadPeerTimeout time.Duration

	// MaxReconnects bounds the attempts after a lost connection or resync;
	// 0 means 5, negative means never reconnect.
	MaxReconnects int
	// ReconnectBackoff is the first wait between attempts (100 ms); it
	// doubles up to MaxBackoff (5 s), with jitter. When the server ended
	// the last connection less than 2 x MaxBackoff after it was made, the
	// next reconnect's waits go on from where the last one's were.
	ReconnectBackoff, MaxBackoff time.Duration
	// OpenWait is how long Connect (and Dial) keeps trying while the
	// server cannot be reached yet: a robot that boots before its trainer,
	// a trainer restarting (openwait.go says which failures count). Zero:
	// one attempt. Positive: attempts with the reconnect backoff
	// (ReconnectBackoff doubling up to MaxBackoff, with jitter) until
	// OpenWait has passed, each attempt's timeouts cut to what is left of
	// it (none starts with less than 20 ms left: the last pause then runs
	// to the wait's end). Negative: until the server answers. Interrupt,
	// or the context, ends the wait at once, and a failure no wait can
	// mend (a URL that does not parse or a bad port, a certificate that is
	// wrong, an HTTP answer other than 5xx, 429 or 408, a protocol error)
	// ends it too; a refusal's Retry-After lengthens the next pause to it,
	// up to MaxBackoff; a name not found is waited for (it may not be
	// published yet), also a misspelt one, and so is a certificate not
	// valid yet by this machine's clock (conn.ErrClockBehind: a clock NTP
	// has not set yet since boot).
	OpenWait time.Duration
	// ReconnectTimeout bounds all the attempts of one reconnect, backoff
	// included: each attempt's connect and metadata timeouts are cut to
	// what is left of it. 30 s.
	ReconnectTimeout time.Duration

	TLS *tls.Config // for wss://
	// MaxMessageSize caps every message the client receives. Zero (the
	// default) derives the cap of an action from the request and the
	// metadata: H x n x action_dim x 8 bytes plus room for the message's
	// structure when metadata gives action_horizon and action_dim, never
	// more than DefaultMaxMessageSize, which is the cap otherwise;
	// metadata gets DefaultMaxMetadataSize.
	// Negative: no cap at all (SPEC 1.1's default, for trusted servers).
	MaxMessageSize int64
	// MaxHandshakeSize caps the handshake response; 0: 256 KiB.
	MaxHandshakeSize int
	Alloc            conn.Allocator // receive memory; nil: Go heap

	// DisableReuse keeps the client from using reuse-feedback-obs even
	// when the server offers it.
	DisableReuse bool

	// Logf, if set, receives what the client does on its own: reconnects,
	// dropped feedback, warnings. It runs inside the call that logs, on its
	// goroutine: it may call Interrupt and Stats, nothing else of the
	// client's (Close there would wait for ever for the call it runs in).
	Logf func(level Level, msg string)

	// LedgerPath, if set, records every message and connection event into
	// a ledger file there (docs/LEDGER.md), at LedgerLevel. The file is
	// created (or truncated) by Dial and closed by Close. Its background
	// writer compresses on one of the runtime's Ps: a program whose
	// callers wait in the client on every P but one, as libplugrl's C
	// callers do, gives the runtime one more (capi/runtime.go,
	// spareLedgerP, says why).
	LedgerPath  string
	LedgerLevel ledger.Level
	// LedgerCPUs, if set, are the CPUs the ledger's background writer
	// runs on (ledger.Options.CPUs): a control loop on a core of its own
	// keeps the ledger's compression off that core.
	LedgerCPUs []int
	// Version is the library version a ledger's first record names.
	Version string
}

func (o *Options) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ConnectTimeout, 10*time.Second)
	def(&o.MetadataTimeout, 30*time.Second)
	def(&o.ReceiveTimeout, 300*time.Second)
	def(&o.SendTimeout, 10*time.Second)
	def(&o.CloseTimeout, time.Second)
	def(&o.ReconnectTimeout, 30*time.Second)
	def(&o.ReconnectBackoff, 100*time.Millisecond)
	def(&o.MaxBackoff, 5*time.Second)
	if o.MaxReconnects == 0 {
		o.MaxReconnects = 5
	}
}

// The caps MaxMessageSize zero chooses where the request and metadata do
// not say enough.
const (
	DefaultMaxMessageSize  = 64 << 20
	DefaultMaxMetadataSize = 4 << 20
)

type phase int

const (
	phaseIdle         phase = iota // may infer
	phaseHolding                   // an action arrived; one feedback is owed
	phaseDisconnected              // no connection; the next Infer reconnects
	phaseStopped                   // the server ended the run
	phaseClosed                    // Close was called
)

// env flags, per env index on the current connection.
const (
	envOutstanding = 1 << iota // holds an action chunk not yet fed back
	envReusable                // last feedback on this connection was not terminal
)

// Request is an infer request (SPEC 5.2). Obs has one row per env (or, with
// Reuse, optionally only the rows of envs not reused); ObsRows may instead
// map each env to a row of a larger batch.
type Request = wire.Infer

// Feedback is a feedback message's content (SPEC 5.4).
type Feedback = wire.Feedback

// Client is one env client session. Create it with Dial.
type Client struct {
	// The fields are in the order an exchange reads them, the ones it
	// does not touch last: with many clients taking turns on a core, each
	// exchange finds its client's memory gone from the caches, and fewer
	// cache lines to fetch make it cheaper (docs/PERFORMANCE.md).
	busy  atomic.Bool
	phase phase
	conn  *conn.Conn
	meta  *wire.Metadata

	// Interrupt's state, shared with any goroutine. intr is an interrupt
	// no call has taken yet. blocking says a call is in a blocking
	// section, where Interrupt also ends what it waits on: the live
	// connection, a dial (dialCancel) or a backoff sleep (wake). imu
	// guards blocking, live and dialCancel together, so that an Interrupt
	// acts on one call's state as it is at one instant, never on the
	// next call's dial with an earlier call's interrupt.
	intr       atomic.Bool
	closing    atomic.Bool
	imu        sync.Mutex
	blocking   bool
	live       *conn.Conn
	dialCancel context.CancelFunc
	wake       chan struct{}

	// The caller's pace, for holding feedback back (see tightLoop):
	// when the last feedback returned (conn.Mono; 0 once an infer has
	// looked), and whether the infer after it came within tightLoop.
	feedbackDone time.Duration
	tight        bool

	givenUp bool // GiveUpOwed: the next Infer drops the connection first
	// givenUpDrop: the connection was dropped for GiveUpOwed, and the
	// reconnect that follows (in this Infer or a later one, if this one's
	// failed) is reported with ErrGivenUp.
	givenUpDrop bool
	envs        envFlags
	ledger      *ledger.Writer // nil: no ledger
	heldEnvs    []int64        // envs of the last feedback the connection held (conn.WriteHeldMessage), in case it never leaves
	reqEnv      []int64        // the last infer's env_indices (for the Ray dialect)

	// One message per kind: each keeps the plan of its last encoding, and
	// a loop that sends the same structure every time reuses it.
	inferMsg, feedbackMsg wire.Message
	action                wire.Action
	stats                 stats
	plainReq              wire.Infer // an infer's request without its all-false reuse flags (Infer)

	opts Options
	// closeIntr is set by InterruptClose: Close does not wait for the
	// server's close frame.
	closeIntr atomic.Bool
	// reuseOffered is ReuseOffered, decided once per connection's
	// metadata.
	reuseOffered bool
	reconnects   int // successful reconnects over the client's life
	// connectedAt is when the connection was made; carried is the backoff
	// the next reconnect starts from if the server ends it soon (reconnect).
	connectedAt time.Time
	carried     time.Duration
	// lastAddr is the server address (IP and port) of the last connection
	// that got as far as metadata: a reconnect tries it first.
	lastAddr string
	owedLost []int64 // envs of a feedback whose send failed, for the ledger
	// refusedEnded: the last connect recorded the connection it refused
	// (metadata that is not), its close included: Connect's failure
	// records no second close.
	refusedEnded bool
}

// Dial connects, reads the server's metadata, and returns the client: New
// and Connect in one call.
func Dial(ctx context.Context, o Options) (*Client, error) {
	c, err := New(o)
	if err != nil {
		return nil, err
	}
	if err := c.Connect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// New returns a client that is not connected yet (its ledger, if any, is
// open): call Connect. Interrupt from another goroutine then ends a
// Connect that waits, which Dial cannot offer (there is no client to
// interrupt until it returns).
func New(o Options) (*Client, error) {
	o.setDefaults()
	c := &Client{opts: o, wake: make(chan struct{}, 1), phase: phaseDisconnected}
	if o.LedgerPath != "" {
		w, err := ledger.Create(o.LedgerPath, ledger.Options{Level: o.LedgerLevel, Version: o.Version,
			Warn: func(msg string) { c.logf(LevelWarn, "%s", msg) }, Clock: conn.Mono, CPUs: o.LedgerCPUs})
		if err != nil {
			return nil, newErr(KindInvalid, err, "opening the ledger")
		}
		c.ledger = w
		where := ""
		if len(o.LedgerCPUs) > 0 {
			where = ", its writer on CPUs " + ledger.FormatCPUs(o.LedgerCPUs)
		}
		c.logf(LevelInfo, "recording a %s ledger to %s%s", o.LedgerLevel, w.Path(), where)
	}
	return c, nil
}

// Connect makes the first connection of a client from New: the dial, the
// handshake and the metadata, within ConnectTimeout and MetadataTimeout.
// Interrupt ends it (KindInterrupted), as does the end of ctx (its
// deadline or its cancel: the error then wraps context.Cause(ctx)). After
// an error the client is not connected: Close it.
func (c *Client) Connect(ctx context.Context) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	if ctx == nil {
		return newErr(KindInvalid, nil, "Connect: nil Context (use context.Background())")
	}
	if c.phase != phaseDisconnected || c.conn != nil {
		return newErr(KindOutOfOrder, nil, "Connect is for a client from New that has not connected yet")
	}
	err := c.block() // an interrupt pending from before refuses the Connect
	if err == nil {
		defer c.unblock()
		err = c.open(ctx)
	}
	if err != nil {
		// Every failed Connect leaves the client closed, this one too: a
		// client left disconnected would connect at its next Infer (a
		// reconnect), which a caller that interrupted the Connect, or
		// was told to close the client, did not ask for.
		if KindOf(err) == KindInterrupted {
			c.ledger.Interrupted() // as every other call's interrupt is
		}
		if !c.refusedEnded {
			c.ledger.Closed("local", 0, "", err.Error(), nil, false)
		}
		c.phase = phaseClosed // nothing to reconnect to: Connect failed
		if KindOf(err) == KindInterrupted {
			c.intr.Store(false) // taken: it ended this call
		}
	}
	return err
}

func (c *Client) logf(l Level, format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(l, fmt.Sprintf(format, args...))
	}
}

// enter guards against concurrent use and calls on a finished client.
func (c *Client) enter() error {
	if c.wake == nil {
		// A zero Client (New makes wake): its phase reads as connected,
		// with no connection.
		return newErr(KindInvalid, nil, "this Client was not made by New or Dial")
	}
	if !c.busy.CompareAndSwap(false, true) {
		if c.closing.Load() {
			// The call in progress is Close (or one Close waits for): this
			// call would find the client closed, and a loop that stops at
			// KindClosed must not take a close for a second thread.
			return newErr(KindClosed, nil, "the client is closing")
		}
		return newErr(KindBusy, nil, "another call on this client is in progress; a client serves one thread at a time")
	}
	if c.closing.Load() {
		c.busy.Store(false)
		return newErr(KindClosed, nil, "the client is closed")
	}
	switch c.phase {
	case phaseClosed:
		c.busy.Store(false)
		return newErr(KindClosed, nil, "the client is closed")
	case phaseStopped:
		c.busy.Store(false)
		return newErr(KindStopped, nil, "the server ended the run (%s); this client does not reconnect", ReasonStop)
	}
	return nil
}

func (c *Client) leave() { c.busy.Store(false) }

// tryEnter is the guard of a method that does not block and has nothing
// to do once Close has begun (ReleaseAction, Abandon, GiveUpOwed): they
// belong to the goroutine that makes the calls, but Close may run on
// another meanwhile, and changes the same state (the connection, the
// phase). It reports whether the method may go on; leave must follow.
func (c *Client) tryEnter() bool {
	if !c.busy.CompareAndSwap(false, true) {
		return false // Close (or a call misused from another goroutine)
	}
	if c.closing.Load() {
		c.busy.Store(false)
		return false
	}
	return true
}

// Metadata is the current connection's metadata (it changes on reconnect).
func (c *Client) Metadata() *wire.Metadata { return c.meta }

// MetadataActionDim is metadata's action_dim when it is at least 1 and
// H x n x action_dim values of 8 bytes fit the message cap
// (MaxMessageSize when positive, else DefaultMaxMessageSize; H is
// metadata's action_horizon, or 1). Otherwise, and before metadata, ok is
// false. A server's word sizes a caller's buffer this way (the wrappers
// allocate n x action_dim values of up to 8 bytes from it), so that
// buffer is at most the message cap: a claimed 2^40 had a wrapper
// allocate terabytes.
func (c *Client) MetadataActionDim(n int) (dim int, ok bool) {
	m := c.meta
	if m == nil || !m.ActionDim.Set || n < 1 {
		return 0, false
	}
	limit := int64(DefaultMaxMessageSize)
	if c.opts.MaxMessageSize > 0 {
		limit = c.opts.MaxMessageSize
	}
	h := int64(1)
	if m.ActionHorizon.Set {
		h = max(h, m.ActionHorizon.Value)
	}
	if d := m.ActionDim.Value; d >= 1 && d <= limit/8/int64(n)/h {
		return int(d), true
	}
	return 0, false
}

// Reconnects counts the reconnects this client has made.
func (c *Client) Reconnects() int { return c.reconnects }

// ReuseOffered reports whether the server offers reuse-feedback-obs and the
// client may use it.
func (c *Client) ReuseOffered() bool { return c.reuseOffered }

// CanReuse reports whether env's observation may be reused in the next
// infer (SPEC 10.1): the feature is offered, env was fed back on this
// connection, and that feedback did not end its episode.
func (c *Client) CanReuse(env int64) bool {
	return c.ReuseOffered() && c.envs.get(env)&envReusable != 0
}

// Close sends a close frame with status 1000 (SPEC 7.5) and releases the
// connection. Calls after Close return ErrClosed.
//
// Close may be called from any goroutine, also while another is inside a
// call: that call is interrupted (it returns KindInterrupted or KindClosed,
// or its own result when the close came too late to stop it: its action
// already in, its feedback already on its way) and Close waits for it to
// return, so nothing leaks. Close blocks at most
// CloseTimeout waiting for the server's answer; Interrupt cuts that short.
//
// Close returns nil, also when the connection ended badly (that was the
// last call's error), or the step ledger's error when its file could not
// take its last records (a full disk, a file that stopped taking writes
// for 5 s): the ledger package's error, not an *Error, since the
// connection did nothing wrong; it is also logged. The client is closed
// either way.
func (c *Client) Close() error {
	c.closing.Store(true)
	for i := 0; !c.busy.CompareAndSwap(false, true); i++ {
		if i%16 == 0 {
			c.Interrupt() // again now and then: the call may not have blocked yet
		}
		time.Sleep(100 * time.Microsecond)
	}
	defer c.leave()
	c.intr.Store(false)
	if c.conn != nil {
		// The connection may have ended before this Close: by a server's
		// close frame read meanwhile, or an interrupt or failure that
		// ended it under an earlier call. The ledger records that end,
		// not one this Close did not make.
		c.conn.PollNow()
		ended := c.conn.Err()
		c.blockOwed() // Interrupt cuts the wait for the server's answer short
		if c.closeIntr.Load() {
			// InterruptClose came before the wait began (its interrupt
			// may have been cleared above): do not wait.
			c.conn.Interrupt()
		}
		c.conn.Close(c.opts.CloseTimeout)
		if ended == nil && c.conn.PeerClosedFirst() {
			// The poller read the server's close after the look above:
			// Close then only answered it.
			ended = c.conn.Err()
		}
		c.setLive(nil)
		c.unblock()
		// Recorded once the close frame went, or did not: a feedback
		// held for an infer that never came leaves before it, or is lost.
		dropped, unsent := c.heldDropped(nil) // not in the stats: not counted at Close
		if c.ledger != nil {
			if ended != nil {
				c.ledgerClosed(ended, c.conn.SentCloseCode(), dropped, unsent)
			} else {
				// Code 0: the close frame could not be sent (a peer that
				// stopped reading, an interrupt mid-write).
				c.ledger.Closed("client", c.conn.SentCloseCode(), "", "", c.envs.appendOutstanding(dropped), unsent)
			}
		}
		c.conn = nil
	}
	c.phase = phaseClosed
	if err := c.ledger.Close(); err != nil {
		c.logf(LevelError, "%v", err)
		return err
	}
	return nil
}

var errAbandoned = errors.New("the caller abandoned the action (no memory for it, or a shape it cannot step)")

// Abandon drops the connection because the caller cannot use the action it
// received (the runner found no memory for it, or a shape it cannot
// step): feedback owed on it is never sent (SPEC 7.6), and the next Infer
// reconnects.
func (c *Client) Abandon() { c.AbandonBecause(errAbandoned) }

// AbandonBecause is Abandon for another reason, why, which the ledger's
// close record gives (the C API's: the caller's memory faulted in the
// middle of a call); nil is Abandon's.
func (c *Client) AbandonBecause(why error) {
	if why == nil {
		why = errAbandoned
	}
	if !c.tryEnter() {
		return // Close drops the connection
	}
	defer c.leave()
	c.abandon(why)
}

func (c *Client) abandon(why error) {
	if c.phase == phaseIdle || c.phase == phaseHolding {
		c.dropConnection(CauseOther, why)
	}
}

// ErrGivenUp is the cause (errors.Is) of the ErrReconnected that an
// Infer returns for the reconnect GiveUpOwed made it do: the connection
// was ended by this client, to drop feedback its caller gave up, not by
// the server or the network. A runner does not count that reconnect as
// one of its restarts.
var ErrGivenUp = errors.New("the feedback owed on it was given up (a runner closed in the middle of its chunks)")

// GiveUpOwed gives up the feedback this client owes, if any (an action
// not fed back, or envs still holding chunks), for a caller that will
// never send it (a runner closed in the middle of its chunks). SPEC 7.6
// drops it with the connection, which ends when the client is next used:
// the next Infer drops it and reconnects (returning ErrReconnected, as
// after any lost connection; without this it would be refused as out of
// order for ever), unless the connection had already ended, which it
// reports as any call would (a server's stop, a 1011); and Close closes
// it in order, as always. A feedback sent before then that leaves nothing
// owed cancels it, and so does the end of the connection. The
// ErrReconnected of the reconnect it causes wraps ErrGivenUp.
//
// It returns nil once it has looked at the client, and otherwise the error
// a call would get: KindClosed once Close has begun (which ends the
// connection, and what was owed with it), KindBusy while a call on another
// goroutine is in progress (misuse: nothing was given up, and a caller
// that must give up what is owed, as a runner's first Act does, tries
// again once it can use the client).
func (c *Client) GiveUpOwed() error {
	if !c.tryEnter() {
		if c.closing.Load() {
			return newErr(KindClosed, nil, "the client is closing")
		}
		return newErr(KindBusy, nil, "another call on this client is in progress; a client serves one thread at a time")
	}
	defer c.leave()
	if c.phase == phaseHolding || c.envs.outstanding() > 0 {
		c.givenUp = true
	}
	return nil
}
