package client

// A connection's life: connecting and reading metadata, the size caps,
// classifying how a connection ended, dropping it, and reconnecting (SPEC 7).

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/wire"
)

// connect dials once and reads metadata, by deadline if it is not zero.
// Interrupt (or cancelling ctx) ends it with KindInterrupted.
func (c *Client) connect(ctx context.Context, deadline time.Time) (err error) {
	c.refusedEnded = false
	dialTimeout, metaTimeout := c.opts.ConnectTimeout, c.opts.MetadataTimeout
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			return newErr(KindTimeout, nil, "connecting to %s: no time left", conn.RedactedURL(c.opts.URL))
		}
		dialTimeout, metaTimeout = min(dialTimeout, left), min(metaTimeout, left)
	}
	// Cancelling the caller's ctx ends the metadata wait too (it ends the
	// dial through the derived ctx): it interrupts the blocked section,
	// leaving nothing pending if it comes as connect returns.
	stop := context.AfterFunc(ctx, c.InterruptBlocked)
	defer stop()
	caller := ctx
	defer func() {
		// An end the caller's ctx made is said as its own (the deadline
		// passed, or it was cancelled), so that errors.Is finds
		// context.DeadlineExceeded or context.Canceled; an Interrupt's is
		// left as it is.
		if e, ok := err.(*Error); ok && e.Kind == KindInterrupted && caller.Err() != nil {
			err = newErr(KindInterrupted, context.Cause(caller), "%s: the context ended", e.Msg)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.setDialCancel(cancel)
	defer c.setDialCancel(nil)
	cn, err := conn.Dial(ctx, conn.Options{
		URL:              c.opts.URL,
		APIKey:           c.opts.APIKey,
		DialTimeout:      dialTimeout,
		PreferAddr:       c.lastAddr,
		SendTimeout:      c.opts.SendTimeout,
		DeadPeerTimeout:  c.opts.DeadPeerTimeout,
		TLS:              c.opts.TLS,
		MaxMessageSize:   c.metadataCap(),
		MaxHandshakeSize: c.opts.MaxHandshakeSize,
		Alloc:            c.opts.Alloc,
		Counters:         &c.stats.io,
	})
	if err != nil {
		// conn.Dial's errors begin "connect to URL" (its password
		// redacted): said once, not twice.
		return c.classify(err, "")
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
		e := newErr(KindProtocol, err, "the server's first message is not a metadata message")
		// The connection is the ledger's as any other: its connect
		// record holds the message as received (before Abort frees it),
		// which the audit names (SPEC 5.1), and its close why it ended.
		// Without them a reconnect through a server that sent anything
		// but metadata left no trace of that connection or its message.
		if c.ledger != nil {
			c.ledger.Connected(conn.RedactedURL(c.opts.URL), cn.RemoteAddr(), raw)
		}
		c.setLive(nil)
		cn.Abort()
		if c.ledger != nil {
			c.ledger.Closed("local", cn.SentCloseCode(), "", e.Error(), nil, false)
			c.refusedEnded = true
		}
		return e
	}
	if c.ledger != nil {
		c.ledger.Connected(conn.RedactedURL(c.opts.URL), cn.RemoteAddr(), raw)
	}
	cn.Release()
	c.conn, c.meta = cn, meta
	c.lastAddr = cn.RemoteAddr()
	c.connectedAt = time.Now()
	c.reuseOffered = !c.opts.DisableReuse && meta.Has(FeatureReuse) // once: CanReuse runs per env per step
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
	case errors.As(err, &ce) && ce.Code == 1011 && ce.Reason == wire.ReasonKeepaliveTimeout:
		// Not the server failing: this client did not answer its pings
		// in time. A lost connection: reconnect.
		return newErr(KindConnect, err, "%s: the server dropped this client for pings it left unanswered (was the process stopped, in a debugger or by SIGSTOP, or unable to run?)", during)
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
	// e.Msg is during, or says more (a keepalive timeout).
	if held {
		c.logf(LevelWarn, "%s: %v; reconnecting and dropping the feedback this client owed (SPEC 7.6)", e.Msg, err)
	} else {
		c.logf(LevelInfo, "%s: %v; reconnecting", e.Msg, err)
	}
	if rerr := c.reconnect(); rerr != nil {
		return rerr
	}
	return newErr(KindReconnected, err, "%s: reconnected after the connection ended; any feedback owed was dropped (SPEC 7.6), start again with infer", e.Msg)
}

// dropConnection ends the connection without waiting for the server (it
// is out of step, or gone) and forgets what was held on it; cause is why,
// for the reconnect that follows.
func (c *Client) dropConnection(cause ReconnectCause, err error) {
	if c.conn != nil {
		c.setLive(nil)
		c.conn.Abort()
		held, unsent := c.heldDropped(nil)
		c.stats.rowsDropped.Add(uint64(len(held)))
		sent := c.conn.SentCloseCode()
		c.conn = nil
		c.stats.cause = cause
		if c.ledger != nil {
			c.ledgerClosed(err, sent, held, unsent)
		}
	}
	c.owedLost = c.owedLost[:0]
	c.givenUp = false // whatever was owed goes with this connection
	if n := c.envs.outstanding(); n > 0 {
		c.stats.rowsDropped.Add(uint64(n))
	}
	c.envs.clear()
	c.phase = phaseDisconnected
}

// digester is what the connection shows m's bytes to as it sends them, so
// that the ledger digests observation rows in the pass that copies them; nil
// when there is no ledger at digest level.
func (c *Client) digester(m *wire.Message, obs *wire.Observation) conn.CopyObserver {
	if d := c.ledger.BeginSend(m, obs); d != nil {
		return d
	}
	return nil
}

// ledgerClosed records the end of the connection by err, with the envs
// whose owed feedback goes with it: those of a feedback whose send
// failed, of a held one that never left (unsent), and those holding an
// action.
func (c *Client) ledgerClosed(err error, sentCode int, held []int64, unsent bool) {
	dropped := append(append([]int64(nil), c.owedLost...), held...)
	dropped = c.envs.appendOutstanding(dropped)
	var ce *conn.CloseError
	if errors.As(err, &ce) {
		c.ledger.Closed("server", int(ce.Code), ce.Reason, err.Error(), dropped, unsent)
		return
	}
	// A local end: the code is the close frame the client sent, if any
	// (1000, or 1002/1009 for a server's violation).
	c.ledger.Closed("local", sentCode, "", err.Error(), dropped, unsent)
}

// heldDropped appends to dst the envs of the connection's last held
// feedback if it never left (conn.HeldLost), and says whether it did
// not. The connection must be over.
func (c *Client) heldDropped(dst []int64) ([]int64, bool) {
	if !c.conn.HeldLost() {
		return dst, false
	}
	return append(dst, c.heldEnvs...), true
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
	serverEnded := c.stats.cause == CauseResync || c.stats.cause == CauseLost
	if serverEnded && c.carried > wait && time.Since(c.connectedAt) < settled(c.opts) {
		// The server (or the network) ended the last connection soon
		// after it was made, as one that resyncs or drops every
		// connection does: its reconnects go on backing off, instead of
		// starting again at ReconnectBackoff each time, which made such a
		// server take 10-20 connections a second. Not after the client's
		// own ends (an interrupt, a timeout): a caller that interrupts
		// each call reconnects as fast as ever.
		wait = c.carried
	}
	var last error
	for attempt := 1; attempt <= c.opts.MaxReconnects; attempt++ {
		var pause time.Duration
		pause, wait = c.backoff(wait)
		pause = c.retryPause(pause, last)
		if c.sleep(context.Background(), min(pause, time.Until(deadline))) {
			return newErr(KindInterrupted, nil, "reconnecting: interrupted during the backoff; the next infer tries again")
		}
		if time.Until(deadline) <= 0 {
			break
		}
		err := c.connect(context.Background(), deadline)
		if err == nil {
			c.carried = wait // already doubled: where a quick end's next reconnect starts
			c.reconnects++
			c.stats.reconnects[c.stats.cause].Add(1)
			c.logf(LevelInfo, "reconnected to %s (attempt %d)", conn.RedactedURL(c.opts.URL), attempt)
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

// settled is how long a connection must have lasted for the reconnect
// after it to start again at ReconnectBackoff: twice the longest backoff.
func settled(o Options) time.Duration { return 2 * o.MaxBackoff }

// backoff is the pause before an attempt when the backoff stands at wait
// (half of it, plus up to half again at random, so that clients that lost
// one server together do not come back together), and the backoff after
// it (doubled, up to MaxBackoff). Reconnects and the open's wait share it.
func (c *Client) backoff(wait time.Duration) (pause, next time.Duration) {
	pause = wait/2 + time.Duration(rand.Int64N(int64(wait)/2+1))
	return pause, min(2*wait, c.opts.MaxBackoff)
}

// retryPause is the pause before the attempt after one that failed with
// err: the backoff's pause, or the wait the server asked for in its
// refusal (a 503's or 429's Retry-After, conn.RetryAfter) if that is
// longer, up to MaxBackoff. The caller's bound holds whatever a server
// asks: a Retry-After of an hour still has the client try again within
// MaxBackoff, and is refused again until the server takes it.
func (c *Client) retryPause(pause time.Duration, err error) time.Duration {
	if asked, ok := conn.RetryAfter(err); ok {
		return max(pause, min(asked, c.opts.MaxBackoff))
	}
	return pause
}

// sleep waits d, or less if Interrupt is called or ctx ends, and reports
// whether either did (an interrupt is taken).
func (c *Client) sleep(ctx context.Context, d time.Duration) (interrupted bool) {
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.wake:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return c.intr.Swap(false) || ctx.Err() != nil
}
