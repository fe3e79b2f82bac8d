// Package client is the PlugRL protocol session of an env client: it reads
// metadata, sends infer and feedback in the order SPEC 4.2 allows, checks
// every action against its request, and handles each way a connection can
// end as SPEC 7 says.
//
// A Client is used by one goroutine at a time; a second goroutine that calls
// in while a call is running gets ErrBusy rather than a corrupted stream.
// Interrupt and Close may be called from any goroutine: Interrupt ends a
// blocked call at once, Close interrupts it and waits for it to return.
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
	"math"
	"math/rand/v2"
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

	ConnectTimeout  time.Duration // TCP + TLS + WebSocket handshake; 10 s
	MetadataTimeout time.Duration // for the metadata after the handshake; 30 s
	ReceiveTimeout  time.Duration // for an action after an infer; 300 s (a learn step can take minutes)
	SendTimeout     time.Duration // for sending one message once the server stops reading; 10 s
	CloseTimeout    time.Duration // Close's wait for the server's close frame; 1 s

	// MaxReconnects bounds the attempts after a lost connection or resync;
	// 0 means 5, negative means never reconnect.
	MaxReconnects int
	// ReconnectBackoff is the first wait between attempts (100 ms); it
	// doubles up to MaxBackoff (5 s), with jitter.
	ReconnectBackoff, MaxBackoff time.Duration
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
	// dropped feedback, warnings.
	Logf func(level Level, msg string)

	// LedgerPath, if set, records every message and connection event into
	// a ledger file there (docs/LEDGER.md), at LedgerLevel. The file is
	// created (or truncated) by Dial and closed by Close.
	LedgerPath  string
	LedgerLevel ledger.Level
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
	opts  Options
	conn  *conn.Conn
	meta  *wire.Metadata
	phase phase
	busy  atomic.Bool
	// One message per kind: each keeps the plan of its last encoding, and
	// a loop that sends the same structure every time reuses it.
	inferMsg, feedbackMsg wire.Message
	action                wire.Action
	envs                  envFlags
	reqEnv                []int64 // the last infer's env_indices (for the Ray dialect)

	reconnects int // successful reconnects over the client's life
	stats      stats
	ledger     *ledger.Writer // nil: no ledger
	owedLost   []int64        // envs of a feedback whose send failed, for the ledger

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
}

// Dial connects, reads the server's metadata, and returns the client.
func Dial(ctx context.Context, o Options) (*Client, error) {
	o.setDefaults()
	c := &Client{opts: o, wake: make(chan struct{}, 1)}
	if o.LedgerPath != "" {
		w, err := ledger.Create(o.LedgerPath, ledger.Options{Level: o.LedgerLevel, Version: o.Version,
			Warn: func(msg string) { c.logf(LevelWarn, "%s", msg) }})
		if err != nil {
			return nil, newErr(KindInvalid, err, "opening the ledger")
		}
		c.ledger = w
		c.logf(LevelInfo, "recording a %s ledger to %s", o.LedgerLevel, w.Path())
	}
	if err := c.connect(ctx, time.Time{}); err != nil {
		c.ledger.Closed("local", 0, "", err.Error(), nil)
		c.ledger.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) logf(l Level, format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(l, fmt.Sprintf(format, args...))
	}
}

// connect dials once and reads metadata, by deadline if it is not zero.
// Interrupt (or cancelling ctx) ends it with KindInterrupted.
func (c *Client) connect(ctx context.Context, deadline time.Time) error {
	dialTimeout, metaTimeout := c.opts.ConnectTimeout, c.opts.MetadataTimeout
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			return newErr(KindTimeout, nil, "connecting to %s: no time left", c.opts.URL)
		}
		dialTimeout, metaTimeout = min(dialTimeout, left), min(metaTimeout, left)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.setDialCancel(cancel)
	defer c.setDialCancel(nil)
	cn, err := conn.Dial(ctx, conn.Options{
		URL:              c.opts.URL,
		APIKey:           c.opts.APIKey,
		DialTimeout:      dialTimeout,
		SendTimeout:      c.opts.SendTimeout,
		TLS:              c.opts.TLS,
		MaxMessageSize:   c.metadataCap(),
		MaxHandshakeSize: c.opts.MaxHandshakeSize,
		Alloc:            c.opts.Alloc,
		Counters:         &c.stats.io,
	})
	if err != nil {
		return c.classify(err, "connecting to "+c.opts.URL)
	}
	c.setLive(cn)
	if !deadline.IsZero() {
		metaTimeout = min(metaTimeout, max(time.Until(deadline), time.Millisecond))
	}
	raw, err := cn.Receive(metaTimeout)
	if err != nil {
		c.setLive(nil)
		cn.Abort()
		return c.classify(err, "waiting for metadata")
	}
	meta, err := wire.DecodeMetadata(raw)
	if err != nil {
		c.setLive(nil)
		cn.Abort()
		return newErr(KindProtocol, err, "the server's first message is not a metadata message")
	}
	c.ledger.Connected(c.opts.URL, raw)
	cn.Release()
	c.conn, c.meta = cn, meta
	c.phase = phaseIdle
	c.envs.clear()
	return nil
}

// metadataCap is the size cap for the metadata message.
func (c *Client) metadataCap() int64 {
	if c.opts.MaxMessageSize != 0 {
		return c.opts.MaxMessageSize
	}
	return DefaultMaxMetadataSize
}

// actionCap is the size cap for the action answering an infer of n envs:
// what the action can legitimately take when metadata fixes its shape (H x
// n x action_dim elements of at most 8 bytes, plus the message's keys,
// env_ids and room for extra keys), else DefaultMaxMessageSize.
func (c *Client) actionCap(n int) int64 {
	if c.opts.MaxMessageSize != 0 {
		return c.opts.MaxMessageSize
	}
	h, d := c.meta.ActionHorizon, c.meta.ActionDim
	if !h.Set || !d.Set || h.Value < 1 || d.Value < 1 {
		return DefaultMaxMessageSize
	}
	const structure = 64 << 10 // keys, typestr, shape, extra keys
	if h.Value > math.MaxInt64/16/int64(n)/d.Value {
		return DefaultMaxMessageSize
	}
	// Metadata is the server's word too: the derived cap is never above
	// the default one; a caller expecting larger actions says so.
	return min(h.Value*d.Value*int64(n)*8+int64(n)*64+structure, DefaultMaxMessageSize)
}

// classify turns a connection error into a client error without acting on it.
func (c *Client) classify(err error, during string) *Error {
	var ce *conn.CloseError
	switch {
	case errors.As(err, &ce) && ce.Reason == ReasonStop:
		return newErr(KindStopped, err, "%s: the server ended the run", during)
	case errors.As(err, &ce) && ce.Code == 1011:
		return newErr(KindServer, err, "%s: the server failed (1011)", during)
	case errors.Is(err, conn.ErrInterrupted):
		return newErr(KindInterrupted, err, "%s", during)
	case errors.Is(err, conn.ErrNoMemory):
		return newErr(KindNoMemory, err, "%s", during)
	case errors.Is(err, conn.ErrTextFrame):
		return newErr(KindServer, err, "%s", during)
	case errors.Is(err, conn.ErrProtocol), errors.Is(err, conn.ErrTooBig):
		return newErr(KindProtocol, err, "%s", during)
	case errors.Is(err, conn.ErrTimeout):
		return newErr(KindTimeout, err, "%s", during)
	case errors.Is(err, conn.ErrClosed):
		return newErr(KindClosed, err, "%s", during)
	}
	return newErr(KindConnect, err, "%s", during)
}

// lost handles a failed connection: it drops held state, and either reports
// a final error or reconnects and reports ErrReconnected.
func (c *Client) lost(err error, during string) error {
	e := c.classify(err, during)
	held := c.phase == phaseHolding
	c.dropConnection(causeOf(err), err)
	switch e.Kind {
	case KindStopped:
		c.phase = phaseStopped
		return e
	case KindInterrupted:
		if c.intr.Swap(false) { // taken: one interrupt ends one call
			e.Msg += "; the connection was dropped (any feedback owed is never sent, SPEC 7.6) and the next infer reconnects"
			return e
		}
		// An interrupt that an earlier call took (it landed as that call
		// completed) had ended this connection: now it is just a lost
		// connection, and reconnecting below is what SPEC 7 asks.
	case KindServer, KindProtocol, KindTimeout, KindClosed, KindNoMemory:
		return e
	}
	// A resync, a feedback timeout, another close or a lost connection:
	// reconnect (SPEC 7.2, 7.3, 7.6).
	if held {
		c.logf(LevelWarn, "%s: %v; reconnecting and dropping the feedback this client owed (SPEC 7.6)", during, err)
	} else {
		c.logf(LevelInfo, "%s: %v; reconnecting", during, err)
	}
	if rerr := c.reconnect(); rerr != nil {
		return rerr
	}
	return newErr(KindReconnected, err, "%s: reconnected after the connection ended; any feedback owed was dropped (SPEC 7.6), start again with infer", during)
}

// dropConnection ends the connection without waiting for the server (it
// is out of step, or gone) and forgets what was held on it; cause is why,
// for the reconnect that follows.
func (c *Client) dropConnection(cause ReconnectCause, err error) {
	if c.conn != nil {
		c.setLive(nil)
		c.conn.Abort()
		c.conn = nil
		c.stats.cause = cause
		if c.ledger != nil {
			c.ledgerClosed(err)
		}
	}
	c.owedLost = c.owedLost[:0]
	if n := c.envs.outstanding(); n > 0 {
		c.stats.rowsDropped.Add(uint64(n))
	}
	c.envs.clear()
	c.phase = phaseDisconnected
}

// digester is what the connection shows m's bytes to as it sends them, so
// that the ledger digests observation rows while they are in the cache; nil
// when there is no ledger at digest level.
func (c *Client) digester(m *wire.Message, obs *wire.Observation) conn.CopyObserver {
	if d := c.ledger.BeginSend(m, obs); d != nil {
		return d
	}
	return nil
}

// ledgerClosed records the end of the connection by err, with the envs
// whose owed feedback goes with it.
func (c *Client) ledgerClosed(err error) {
	dropped := append([]int64(nil), c.owedLost...)
	dropped = c.envs.appendOutstanding(dropped)
	var ce *conn.CloseError
	if errors.As(err, &ce) {
		c.ledger.Closed("server", int(ce.Code), ce.Reason, err.Error(), dropped)
		return
	}
	c.ledger.Closed("local", 0, "", err.Error(), dropped)
}

// reconnect tries up to MaxReconnects times with exponential backoff, all
// within ReconnectTimeout; Interrupt ends it.
func (c *Client) reconnect() error {
	if c.opts.MaxReconnects < 0 {
		return newErr(KindConnect, nil, "the connection ended and reconnecting is disabled")
	}
	c.ledger.Reconnecting(c.stats.cause.String())
	deadline := time.Now().Add(c.opts.ReconnectTimeout)
	wait := c.opts.ReconnectBackoff
	var last error
	for attempt := 1; attempt <= c.opts.MaxReconnects; attempt++ {
		jitter := time.Duration(rand.Int64N(int64(wait)/2 + 1))
		if err := c.sleep(min(wait/2+jitter, time.Until(deadline))); err != nil {
			return err
		}
		if wait *= 2; wait > c.opts.MaxBackoff {
			wait = c.opts.MaxBackoff
		}
		if time.Until(deadline) <= 0 {
			break
		}
		err := c.connect(context.Background(), deadline)
		if err == nil {
			c.reconnects++
			c.stats.reconnects[c.stats.cause].Add(1)
			c.logf(LevelInfo, "reconnected to %s (attempt %d)", c.opts.URL, attempt)
			return nil
		}
		switch KindOf(err) {
		case KindStopped:
			c.phase = phaseStopped
			return err
		case KindInterrupted:
			c.intr.Store(false)
			return newErr(KindInterrupted, err, "reconnecting: interrupted; the next infer tries again")
		}
		last = err
		c.logf(LevelWarn, "reconnect attempt %d of %d failed: %v", attempt, c.opts.MaxReconnects, err)
	}
	if time.Until(deadline) <= 0 {
		return newErr(KindConnect, last, "gave up reconnecting after the reconnect timeout (%v)", c.opts.ReconnectTimeout)
	}
	return newErr(KindConnect, last, "gave up after %d reconnect attempts", c.opts.MaxReconnects)
}

// sleep waits d, or less if Interrupt is called (then KindInterrupted).
func (c *Client) sleep(d time.Duration) error {
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.wake:
			t.Stop()
		}
	}
	if c.intr.Swap(false) {
		return newErr(KindInterrupted, nil, "reconnecting: interrupted during the backoff; the next infer tries again")
	}
	return nil
}

// Interrupt makes the call running on this client return KindInterrupted
// at once, or, if none is blocked, the next Infer (before it sends
// anything). It may be called from any goroutine, any number of times. A
// call interrupted while it waited on the server drops the connection
// (the stream may be mid-message); SPEC 7.6 holds: feedback owed on it is
// never sent, and the next Infer reconnects. One interrupt ends at most
// one call.
func (c *Client) Interrupt() { c.interrupt(true) }

// InterruptBlocked interrupts the call that is blocked now, if any, and
// leaves nothing pending otherwise: for a closer that waits for a call to
// end and must not leave an interrupt behind for the next user.
func (c *Client) InterruptBlocked() { c.interrupt(false) }

func (c *Client) interrupt(pending bool) {
	c.imu.Lock()
	defer c.imu.Unlock()
	if !c.blocking {
		if pending {
			c.intr.Store(true)
		}
		return
	}
	c.intr.Store(true)
	if c.live != nil {
		c.live.Interrupt()
	}
	if c.dialCancel != nil {
		c.dialCancel()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// block begins a blocking section of a call that an interrupt pending
// from before may refuse: it returns KindInterrupted (taking the
// interrupt) when one is.
func (c *Client) block() error {
	c.imu.Lock()
	defer c.imu.Unlock()
	if c.intr.Swap(false) {
		return newErr(KindInterrupted, nil, "an interrupt was pending: nothing was sent")
	}
	c.beginBlocking()
	return nil
}

// blockOwed begins a blocking section that a pending interrupt does not
// refuse (a feedback is owed): only one that comes during it, or a
// reconnect it needs, is interrupted.
func (c *Client) blockOwed() {
	c.imu.Lock()
	c.beginBlocking()
	c.imu.Unlock()
}

// beginBlocking marks the section; imu must be held.
func (c *Client) beginBlocking() {
	c.blocking = true
	select { // a wake-up left by an interrupt of an earlier section
	case <-c.wake:
	default:
	}
}

func (c *Client) unblock() {
	c.imu.Lock()
	c.blocking = false
	c.imu.Unlock()
}

// setLive publishes the connection a blocking section waits on; one that
// an interrupt already hit during the section is interrupted at once.
func (c *Client) setLive(cn *conn.Conn) {
	c.imu.Lock()
	defer c.imu.Unlock()
	c.live = cn
	if cn != nil && c.blocking && c.intr.Load() {
		cn.Interrupt()
	}
}

// setDialCancel publishes (or, with nil, withdraws) the cancel of a dial
// in progress, as setLive does a connection.
func (c *Client) setDialCancel(cancel context.CancelFunc) {
	c.imu.Lock()
	defer c.imu.Unlock()
	c.dialCancel = cancel
	if cancel != nil && c.blocking && c.intr.Load() {
		cancel()
	}
}

// enter guards against concurrent use and calls on a finished client.
func (c *Client) enter() error {
	if !c.busy.CompareAndSwap(false, true) {
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

// Metadata is the current connection's metadata (it changes on reconnect).
func (c *Client) Metadata() *wire.Metadata { return c.meta }

// Reconnects counts the reconnects this client has made.
func (c *Client) Reconnects() int { return c.reconnects }

// ReuseOffered reports whether the server offers reuse-feedback-obs and the
// client may use it.
func (c *Client) ReuseOffered() bool {
	return !c.opts.DisableReuse && c.meta != nil && c.meta.Has(FeatureReuse)
}

// CanReuse reports whether env's observation may be reused in the next
// infer (SPEC 10.1): the feature is offered, env was fed back on this
// connection, and that feedback did not end its episode.
func (c *Client) CanReuse(env int64) bool {
	return c.ReuseOffered() && c.envs.get(env)&envReusable != 0
}

// Infer sends an infer and waits for its action. The returned Action views
// the receive buffer and is valid until the next call on this client. On
// ErrReconnected nothing is owed: build a fresh request and infer again.
func (c *Client) Infer(req *Request) (*wire.Action, error) {
	a, err := c.infer(req)
	if err != nil {
		c.countErr(err)
	}
	return a, err
}

// countErr counts an interrupted call for Stats.
func (c *Client) countErr(err error) {
	if KindOf(err) == KindInterrupted {
		c.stats.interrupts.Add(1)
		c.ledger.Interrupted()
	}
}

func (c *Client) infer(req *Request) (*wire.Action, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	if c.phase == phaseHolding {
		return nil, newErr(KindOutOfOrder, nil, "infer while a feedback is owed for the last action: send feedback first (SPEC 4.2)")
	}
	if req == nil {
		return nil, newErr(KindInvalid, nil, "infer: request is nil")
	}
	if err := c.block(); err != nil {
		return nil, err
	}
	defer c.unblock()
	if c.phase == phaseDisconnected {
		if err := c.reconnect(); err != nil {
			return nil, err
		}
		return nil, newErr(KindReconnected, nil, "reconnected; build a fresh request and infer again")
	}
	reused := 0
	if req.Reuse != nil {
		for i, r := range req.Reuse {
			if !r || i >= len(req.EnvIndices) {
				continue
			}
			reused++
			if !c.CanReuse(req.EnvIndices[i]) {
				why := "the server does not offer reuse-feedback-obs"
				if c.ReuseOffered() {
					why = "it has no non-terminal feedback on this connection"
				}
				return nil, newErr(KindInvalid, nil, "infer: env %d cannot reuse its observation: %s (SPEC 10.1)", req.EnvIndices[i], why)
			}
		}
	}
	if err := wire.EncodeInfer(&c.inferMsg, req); err != nil {
		return nil, invalidErr(err)
	}
	if err := c.conn.WriteMessageObserved(&c.inferMsg, c.digester(&c.inferMsg, req.Obs)); err != nil {
		return nil, c.lost(err, "sending infer")
	}
	c.ledger.Sent(&c.inferMsg, req.Obs)
	if reused > 0 {
		c.stats.rowsReused.Add(uint64(reused))
	}
	c.conn.SetMaxMessageSize(c.actionCap(len(req.EnvIndices)))
	raw, err := c.conn.Receive(c.opts.ReceiveTimeout)
	if err != nil {
		if errors.Is(err, conn.ErrTimeout) {
			// The stream is now out of step: an action may still come.
			c.dropConnection(CauseTimeout, err)
			return nil, newErr(KindTimeout, err, "waiting for an action; the connection was closed and the next infer reconnects")
		}
		return nil, c.lost(err, "waiting for an action")
	}
	c.ledger.Received(raw) // before Decode, which aligns the data in place
	// The round trip: from the start of the wait, which began as the
	// infer's last byte went out (Receive read the clock then), to now.
	rtt := conn.Mono() - c.conn.ReceiveStarted()
	if err := c.action.Decode(raw); err != nil {
		e := newErr(KindProtocol, err, "the server's reply to infer")
		c.dropConnection(CauseOther, e)
		return nil, e
	}
	if err := c.checkAction(req.EnvIndices); err != nil {
		c.dropConnection(CauseOther, err)
		return nil, err
	}
	c.stats.recordRTT(rtt)
	if c.action.EnvIDs == nil { // the Ray dialect of SPEC 5.3
		c.reqEnv = append(c.reqEnv[:0], req.EnvIndices...)
		c.action.EnvIDs = c.reqEnv
	}
	for _, e := range req.EnvIndices {
		c.envs.set(e, c.envs.get(e)|envOutstanding)
	}
	c.phase = phaseHolding
	return &c.action, nil
}

func (c *Client) checkAction(sent []int64) error {
	a := &c.action
	if ids := a.EnvIDs; ids != nil {
		if len(ids) != len(sent) {
			return newErr(KindProtocol, nil, "action env_ids has %d entries, the infer named %d envs (SPEC 4.3)", len(ids), len(sent))
		}
		for i := range ids {
			if ids[i] != sent[i] {
				return newErr(KindProtocol, nil, "action env_ids[%d] is %d, the infer's env_indices[%d] is %d (SPEC 4.3: same envs, same order)", i, ids[i], i, sent[i])
			}
		}
	}
	if a.Envs() != len(sent) {
		return newErr(KindProtocol, nil, "action has shape %v, want [H, %d, ...]: its second axis is the infer's %d envs (SPEC 5.3)", a.Chunk.Shape, len(sent), len(sent))
	}
	if a.Horizon() < 1 {
		return newErr(KindProtocol, nil, "action has shape %v: an empty horizon", a.Chunk.Shape)
	}
	if h := c.meta.ActionHorizon; h.Set && int64(a.Horizon()) != h.Value {
		return newErr(KindProtocol, nil, "action horizon %d disagrees with metadata action_horizon %d", a.Horizon(), h.Value)
	}
	if d := c.meta.ActionDim; d.Set {
		width := 1
		for _, v := range a.ActionShape() {
			width *= v
		}
		if int64(width) != d.Value {
			return newErr(KindProtocol, nil, "action shape %v gives each step %d values, metadata action_dim is %d", a.Chunk.Shape, width, d.Value)
		}
	}
	return nil
}

// Feedback sends the feedback owed for the last action (SPEC 5.4). Its envs
// may be any that hold an action chunk on this connection. On
// ErrReconnected the feedback was dropped, not sent, as SPEC 7.6 requires.
func (c *Client) Feedback(f *Feedback) error {
	err := c.feedback(f)
	if err != nil {
		c.countErr(err)
	}
	return err
}

func (c *Client) feedback(f *Feedback) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	if c.phase != phaseHolding {
		return newErr(KindOutOfOrder, nil, "feedback with no action outstanding: each feedback answers one action (SPEC 4.2)")
	}
	if f == nil {
		return newErr(KindInvalid, nil, "feedback is nil")
	}
	for _, e := range f.EnvIndices {
		if c.envs.get(e)&envOutstanding == 0 {
			return newErr(KindInvalid, nil, "feedback names env %d, which holds no action chunk on this connection (SPEC 4.3)", e)
		}
	}
	if err := wire.EncodeFeedback(&c.feedbackMsg, f); err != nil {
		return invalidErr(err)
	}
	// From here the call may wait (on the send, or on a reconnect if the
	// connection ended): an interrupt that comes now ends it. One pending
	// from before is not taken (the feedback is owed, and the runner's
	// bookkeeping has moved on), except by a reconnect.
	c.blockOwed()
	defer c.unblock()
	// The connection may have closed while the caller stepped its envs:
	// then the feedback must not be sent anywhere (SPEC 7.6). Poll reads
	// what arrived meanwhile (a caller back within microseconds of the
	// action skips that system call).
	c.conn.Poll()
	if err := c.conn.Err(); err != nil {
		return c.lost(err, "before sending feedback")
	}
	c.conn.Release() // the action view is no longer valid
	// The env flags are updated before the send, so that as little as
	// possible runs between this send and the caller's next infer (the
	// server then more often reads both at once; see README, Performance).
	// A failed send drops them all anyway (lost).
	for i, e := range f.EnvIndices {
		flags := c.envs.get(e) &^ (envOutstanding | envReusable)
		if !f.Terminated[i] && !f.Truncated[i] {
			flags |= envReusable
		}
		c.envs.set(e, flags)
	}
	if err := c.conn.WriteMessageObserved(&c.feedbackMsg, c.digester(&c.feedbackMsg, f.Obs)); err != nil {
		// Its envs' flags were cleared above: count them here.
		c.stats.rowsDropped.Add(uint64(len(f.EnvIndices)))
		if c.ledger != nil {
			c.owedLost = append(c.owedLost[:0], f.EnvIndices...)
		}
		return c.lost(err, "sending feedback")
	}
	c.ledger.Sent(&c.feedbackMsg, f.Obs)
	c.stats.feedbacks.Add(1)
	c.phase = phaseIdle
	return nil
}

// ReleaseAction ends the use of the last action's view: a large receive
// buffer is freed now instead of at the next call. The runner calls it once
// it has copied the chunks out.
func (c *Client) ReleaseAction() {
	if c.conn != nil {
		c.conn.Release()
	}
}

// Close sends a close frame with status 1000 (SPEC 7.5) and releases the
// connection. Calls after Close return ErrClosed.
//
// Close may be called from any goroutine, also while another is inside a
// call: that call is interrupted (it returns KindInterrupted or KindClosed)
// and Close waits for it to return, so nothing leaks. Close blocks at most
// CloseTimeout waiting for the server's answer; Interrupt cuts that short.
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
		if c.ledger != nil {
			c.ledger.Closed("client", 1000, "", "", c.envs.appendOutstanding(nil))
		}
		c.blockOwed() // Interrupt cuts the wait for the server's answer short
		c.conn.Close(c.opts.CloseTimeout)
		c.setLive(nil)
		c.unblock()
		c.conn = nil
	}
	c.phase = phaseClosed
	return c.ledger.Close()
}

// envFlags holds each env index's flags on the current connection: a slice
// for the small indices every caller uses (no hashing on the hot path), a
// map for any others.
type envFlags struct {
	dense []uint8
	other map[int64]uint8
}

const denseEnvs = 1 << 16

func (f *envFlags) get(e int64) uint8 {
	if e >= 0 && e < int64(len(f.dense)) {
		return f.dense[e]
	}
	return f.other[e] // 0 when absent, and for a nil map
}

func (f *envFlags) set(e int64, v uint8) {
	if e >= 0 && e < denseEnvs {
		if e >= int64(len(f.dense)) {
			if v == 0 {
				return
			}
			f.dense = append(f.dense, make([]uint8, int(e)+1-len(f.dense))...)
		}
		f.dense[e] = v
		return
	}
	if f.other == nil {
		if v == 0 {
			return
		}
		f.other = make(map[int64]uint8)
	}
	f.other[e] = v
}

// appendOutstanding appends the envs holding an action chunk to dst.
func (f *envFlags) appendOutstanding(dst []int64) []int64 {
	for e, v := range f.dense {
		if v&envOutstanding != 0 {
			dst = append(dst, int64(e))
		}
	}
	for e, v := range f.other {
		if v&envOutstanding != 0 {
			dst = append(dst, e)
		}
	}
	return dst
}

// outstanding counts the envs holding an action chunk not yet fed back.
func (f *envFlags) outstanding() int {
	n := 0
	for _, v := range f.dense {
		n += int(v & envOutstanding)
	}
	for _, v := range f.other {
		n += int(v & envOutstanding)
	}
	return n
}

func (f *envFlags) clear() {
	clear(f.dense)
	clear(f.other)
}

var errAbandoned = errors.New("the caller abandoned the action (no memory for it, or a shape it cannot step)")

// Abandon drops the connection because the caller cannot use the action it
// received (the runner found no memory for it, or a shape it cannot
// step): feedback owed on it is never sent (SPEC 7.6), and the next Infer
// reconnects.
func (c *Client) Abandon() {
	if c.phase == phaseIdle || c.phase == phaseHolding {
		c.dropConnection(CauseOther, errAbandoned)
	}
}
