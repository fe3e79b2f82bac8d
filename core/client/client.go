// Package client is the PlugRL protocol session of an env client: it reads
// metadata, sends infer and feedback in the order SPEC 4.2 allows, checks
// every action against its request, and handles each way a connection can
// end as SPEC 7 says.
//
// A Client is used by one goroutine at a time; a second goroutine that calls
// in while a call is running gets ErrBusy rather than a corrupted stream.
// Steady-state Infer/Feedback exchanges allocate nothing on the Go heap.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/wire"
)

// The close reasons of SPEC 7 and the feature of SPEC 10.1.
const (
	ReasonStop            = "plugrl-server-stop"
	ReasonResync          = "plugrl-server-resync"
	ReasonFeedbackTimeout = "Feedback timeout"
	FeatureReuse          = "reuse-feedback-obs"
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

	// MaxReconnects bounds the attempts after a lost connection or resync;
	// 0 means 5, negative means never reconnect.
	MaxReconnects int
	// ReconnectBackoff is the first wait between attempts (100 ms); it
	// doubles up to MaxBackoff (5 s), with jitter.
	ReconnectBackoff, MaxBackoff time.Duration

	TLS            *tls.Config    // for wss://
	MaxMessageSize int64          // 0: no cap (SPEC 1.1)
	Alloc          conn.Allocator // receive memory; nil: Go heap

	// DisableReuse keeps the client from using reuse-feedback-obs even
	// when the server offers it.
	DisableReuse bool

	// Logf, if set, receives what the client does on its own: reconnects,
	// dropped feedback, warnings.
	Logf func(level Level, msg string)
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
	def(&o.ReconnectBackoff, 100*time.Millisecond)
	def(&o.MaxBackoff, 5*time.Second)
	if o.MaxReconnects == 0 {
		o.MaxReconnects = 5
	}
}

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
}

// Dial connects, reads the server's metadata, and returns the client.
func Dial(ctx context.Context, o Options) (*Client, error) {
	o.setDefaults()
	c := &Client{opts: o}
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) logf(l Level, format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(l, fmt.Sprintf(format, args...))
	}
}

// connect dials once and reads metadata.
func (c *Client) connect(ctx context.Context) error {
	cn, err := conn.Dial(ctx, conn.Options{
		URL:            c.opts.URL,
		APIKey:         c.opts.APIKey,
		DialTimeout:    c.opts.ConnectTimeout,
		TLS:            c.opts.TLS,
		MaxMessageSize: c.opts.MaxMessageSize,
		Alloc:          c.opts.Alloc,
	})
	if err != nil {
		if errors.Is(err, conn.ErrTimeout) {
			return newErr(KindTimeout, err, "connecting to %s", c.opts.URL)
		}
		return newErr(KindConnect, err, "connecting to %s", c.opts.URL)
	}
	raw, err := cn.Receive(c.opts.MetadataTimeout)
	if err != nil {
		cn.Close()
		return c.classify(err, "waiting for metadata")
	}
	meta, err := wire.DecodeMetadata(raw)
	if err != nil {
		cn.Close()
		return newErr(KindProtocol, err, "the server's first message is not a metadata message")
	}
	cn.Release()
	c.conn, c.meta = cn, meta
	c.phase = phaseIdle
	c.envs.clear()
	return nil
}

// classify turns a connection error into a client error without acting on it.
func (c *Client) classify(err error, during string) *Error {
	var ce *conn.CloseError
	switch {
	case errors.As(err, &ce) && ce.Reason == ReasonStop:
		return newErr(KindStopped, err, "%s: the server ended the run", during)
	case errors.As(err, &ce) && ce.Code == 1011:
		return newErr(KindServer, err, "%s: the server failed (1011)", during)
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
	c.dropConnection()
	switch e.Kind {
	case KindStopped:
		c.phase = phaseStopped
		return e
	case KindServer, KindProtocol, KindTimeout, KindClosed:
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

func (c *Client) dropConnection() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	c.envs.clear()
	c.phase = phaseDisconnected
}

// reconnect tries up to MaxReconnects times with exponential backoff.
func (c *Client) reconnect() error {
	if c.opts.MaxReconnects < 0 {
		return newErr(KindConnect, nil, "the connection ended and reconnecting is disabled")
	}
	wait := c.opts.ReconnectBackoff
	var last error
	for attempt := 1; attempt <= c.opts.MaxReconnects; attempt++ {
		jitter := time.Duration(rand.Int64N(int64(wait)/2 + 1))
		time.Sleep(wait/2 + jitter)
		if wait *= 2; wait > c.opts.MaxBackoff {
			wait = c.opts.MaxBackoff
		}
		err := c.connect(context.Background())
		if err == nil {
			c.reconnects++
			c.logf(LevelInfo, "reconnected to %s (attempt %d)", c.opts.URL, attempt)
			return nil
		}
		if KindOf(err) == KindStopped {
			c.phase = phaseStopped
			return err
		}
		last = err
		c.logf(LevelWarn, "reconnect attempt %d of %d failed: %v", attempt, c.opts.MaxReconnects, err)
	}
	return newErr(KindConnect, last, "gave up after %d reconnect attempts", c.opts.MaxReconnects)
}

// enter guards against concurrent use and calls on a finished client.
func (c *Client) enter() error {
	if !c.busy.CompareAndSwap(false, true) {
		return newErr(KindBusy, nil, "another call on this client is in progress; a client serves one thread at a time")
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
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	switch c.phase {
	case phaseHolding:
		return nil, newErr(KindOutOfOrder, nil, "infer while a feedback is owed for the last action: send feedback first (SPEC 4.2)")
	case phaseDisconnected:
		if err := c.reconnect(); err != nil {
			return nil, err
		}
		return nil, newErr(KindReconnected, nil, "reconnected; build a fresh request and infer again")
	}
	if req == nil {
		return nil, newErr(KindInvalid, nil, "infer: request is nil")
	}
	if req.Reuse != nil {
		for i, r := range req.Reuse {
			if r && i < len(req.EnvIndices) && !c.CanReuse(req.EnvIndices[i]) {
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
	if err := c.conn.WriteMessage(&c.inferMsg); err != nil {
		return nil, c.lost(err, "sending infer")
	}
	raw, err := c.conn.Receive(c.opts.ReceiveTimeout)
	if err != nil {
		if errors.Is(err, conn.ErrTimeout) {
			// The stream is now out of step: an action may still come.
			c.dropConnection()
			return nil, newErr(KindTimeout, err, "waiting for an action; the connection was closed and the next infer reconnects")
		}
		return nil, c.lost(err, "waiting for an action")
	}
	if err := c.action.Decode(raw); err != nil {
		c.dropConnection()
		return nil, newErr(KindProtocol, err, "the server's reply to infer")
	}
	if err := c.checkAction(req.EnvIndices); err != nil {
		c.dropConnection()
		return nil, err
	}
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
	if err := c.conn.WriteMessage(&c.feedbackMsg); err != nil {
		return c.lost(err, "sending feedback")
	}
	c.phase = phaseIdle
	return nil
}

// Close sends a close frame with status 1000 (SPEC 7.5) and releases the
// connection. Calls after Close return ErrClosed.
func (c *Client) Close() error {
	if !c.busy.CompareAndSwap(false, true) {
		return newErr(KindBusy, nil, "close while another call on this client is in progress")
	}
	defer c.leave()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	c.phase = phaseClosed
	return nil
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

func (f *envFlags) clear() {
	clear(f.dense)
	clear(f.other)
}
