package refserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
)

// conn is one client connection. Its handler goroutine is the only reader;
// writes are serialised by wmu, since Stop and Close write close frames from
// other goroutines.
type conn struct {
	s  *Server
	id int
	nc net.Conn
	br *bufio.Reader

	wmu       sync.Mutex
	bw        *bufio.Writer
	metaSent  bool
	closeSent bool      // no data may be written after a close frame
	pending   *closeReq // a close requested before metadata was sent
	wake      chan struct{}
	ended     atomic.Bool // Stats.Closes has this connection's entry

	outstanding map[int64]bool // envs given an action and not yet fed back
	cache       obsCache
	msg         wire.Message
	buf         []byte
}

type closeReq struct {
	code           int
	reason, detail string
}

// peerClosed is returned by readMessage when the client sent a close frame.
type peerClosed struct {
	code   ws.StatusCode
	reason string
}

func (e *peerClosed) Error() string {
	return fmt.Sprintf("client closed with %d %q", e.code, e.reason)
}

// protocolError is a WebSocket-level violation by the client (RFC 6455),
// closed with 1002, or with code where it is set (1009: too big). skip is
// the payload left unread in the stream (a frame refused from its header),
// to pass over before reading anything else.
type protocolError struct {
	msg  string
	code ws.StatusCode
	skip int64
}

func (e *protocolError) Error() string { return e.msg }

var errCloseSent = errors.New("the connection is closing")

func (s *Server) serve(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.admitted--
		s.mu.Unlock()
	}()
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	_, err := (ws.Upgrader{}).Upgrade(nc)
	s.mu.Lock()
	delete(s.shaking, nc)
	s.mu.Unlock()
	if err != nil {
		s.logf("handshake from %s: %v", nc.RemoteAddr(), err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	c := &conn{
		s:           s,
		nc:          nc,
		br:          bufio.NewReaderSize(nc, connBuffer),
		bw:          bufio.NewWriterSize(nc, connBuffer),
		wake:        make(chan struct{}, 1),
		outstanding: make(map[int64]bool),
	}
	s.mu.Lock()
	s.nextID++
	c.id = s.nextID
	s.conns[c.id] = c
	s.stats.Connections++
	closed := s.closed
	s.mu.Unlock()
	s.logf("conn %d: connected from %s", c.id, nc.RemoteAddr())
	if closed {
		reason, detail := s.goingAway()
		c.requestClose(1001, reason, detail)
	}
	c.run()
	if s.episodes != nil {
		// end has handed the connection's envs over already; this hands
		// over any that a feedback taken meanwhile (Stop's close, from
		// another goroutine) added, and those of a connection that ended
		// without end. Before the connection leaves Stats.Open.
		s.episodes.connClosed(c.id, s.lastConn())
	}
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	if cc, ok := s.policy.(ConnCloser); ok {
		cc.ConnClosed(c.id)
	}
}

func (c *conn) logf(format string, args ...any) {
	c.s.logf("conn %d: %s", c.id, fmt.Sprintf(format, args...))
}

// end records how the connection ended, once.
func (c *conn) end(by string, code int, reason, detail string) {
	if c.ended.Swap(true) {
		return
	}
	c.s.count(func(st *Stats) {
		if len(st.Closes) < MaxCloses {
			st.Closes = append(st.Closes, Closed{Conn: c.id, By: by, Code: code, Reason: reason, Detail: detail})
		} else {
			st.ClosesDropped++
		}
		if by == "server" && reason == ResyncReason {
			st.Resyncs++
		}
	})
	if c.s.episodes != nil {
		// Now, not once the closing handshake is over: a client reconnects
		// as soon as it has the close, and its envs go on in the
		// connection it opens after this point.
		c.s.episodes.connClosed(c.id, c.s.lastConn())
	}
	if code != 0 {
		c.logf("closed by %s with %d %q: %s", by, code, reason, detail)
	} else {
		c.logf("ended by %s with no close frame: %s", by, detail)
	}
}

func (c *conn) run() {
	if d := c.s.cfg.Faults.MetadataDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.wake:
			t.Stop()
		}
	}
	// A client that spoke before the metadata has broken SPEC 4.1; only
	// detectable when there was a delay to speak in.
	var early []byte
	var earlyType string
	if c.s.cfg.Faults.MetadataDelay > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		b, err := c.br.Peek(1)
		// Only a data frame counts (opcode 0, 1 or 2); a ping may come early.
		if err == nil && b[0]&0x0f <= 2 {
			_ = c.nc.SetReadDeadline(time.Now().Add(closeGrace))
			op, msg, err := c.readMessage()
			_ = c.nc.SetReadDeadline(time.Time{})
			if err != nil {
				c.readFailed(err, false)
				return
			}
			early = msg
			earlyType = typeOf(msg)
			if op == ws.OpText {
				earlyType = "text-frame"
			}
		}
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	c.wmu.Lock()
	err := c.writeLocked(ws.OpBinary, c.s.metadata)
	c.metaSent = true
	pending := c.pending
	c.wmu.Unlock()
	if err != nil {
		c.end("server", 0, "", "writing metadata: "+err.Error())
		return
	}
	switch {
	case pending != nil:
		c.sendClose(pending.code, pending.reason, pending.detail)
		c.drain()
	case early != nil:
		c.s.record(Received{Conn: c.id, Type: earlyType, Refused: "sent before the server's metadata (SPEC 4.1)"})
		c.resync("the client sent a message before the server's metadata (SPEC 4.1)")
	case c.s.stopped():
		c.sendClose(1001, StopReason, "the run has stopped")
		c.drain()
	default:
		c.loop()
	}
}

// loop serves exchanges until the connection ends.
func (c *conn) loop() {
	cfg := &c.s.cfg
	faults := &cfg.Faults
	for {
		in := receive(c, time.Time{}, wire.DecodeInfer)
		if in == nil {
			return
		}
		var err error
		rec := Received{Conn: c.id, Type: wire.TypeInfer, EnvIndices: in.EnvIndices, StepIDs: in.StepIDs, Reuse: in.Reuse}
		obs, reused := &in.Obs, 0
		if in.Reuse != nil {
			if !c.s.features[FeatureReuseFeedbackObs] {
				err = errors.New("the infer carries reuse, and this server's metadata does not list reuse-feedback-obs (SPEC 10)")
			} else {
				obs, reused, err = c.cache.complete(in)
			}
			if err != nil {
				rec.Refused = err.Error()
				c.s.record(rec)
				c.resync(err.Error())
				return
			}
		}
		if why := c.s.actionTooBig(len(in.EnvIndices)); why != "" {
			rec.Refused = why
			c.s.record(rec)
			c.sendClose(int(ws.StatusMessageTooBig), "message too big", why)
			c.drain()
			return
		}
		// Only an accepted infer takes an exchange number (Stats.Infers, and
		// the numbering Faults are keyed by): not one refused above, nor one
		// that crossed a close frame Stop or Close sent meanwhile.
		k, ok := c.number()
		if !ok {
			rec.Refused = "arrived after the server's close frame"
			c.s.record(rec)
			c.drain()
			return
		}
		rec.Exchange = k
		c.s.record(rec)
		if reused > 0 {
			c.s.count(func(st *Stats) { st.ReusedRows += reused })
		}

		if f := faults.closeAt(k, AtInfer); f != nil {
			c.closeFault(f)
			return
		}
		if kind := faults.replyAt(k); kind != 0 {
			c.replyFault(k, kind, in, obs)
			return
		}
		n := len(in.EnvIndices)
		chunk, err := c.act(in.EnvIndices, obs, cfg.Horizon, n)
		if err != nil {
			c.internalError(err)
			return
		}
		ids := in.EnvIndices
		if cfg.OmitEnvIDs {
			ids = nil
		}
		if err = wire.EncodeAction(&c.msg, ids, chunk); err != nil {
			c.internalError(err)
			return
		}
		if err = c.sendAction(&c.msg); err != nil {
			c.writeFailed(err)
			return
		}
		for _, e := range in.EnvIndices {
			c.outstanding[e] = true
		}
		c.s.count(func(st *Stats) { st.Actions++ })
		if f := faults.closeAt(k, AfterAction); f != nil {
			c.closeFault(f)
			return
		}

		fb := receive(c, time.Now().Add(cfg.FeedbackTimeout), wire.DecodeFeedback)
		if fb == nil {
			return
		}
		rec = Received{
			Conn: c.id, Type: wire.TypeFeedback, Exchange: k,
			EnvIndices: fb.EnvIndices, StepIDs: fb.StepIDs,
			Rewards: fb.Rewards, Terminated: fb.Terminated, Truncated: fb.Truncated,
		}
		for _, e := range fb.EnvIndices {
			if !c.outstanding[e] {
				rec.Orphans = append(rec.Orphans, e)
			}
			delete(c.outstanding, e)
		}
		if len(rec.Orphans) > 0 {
			c.logf("feedback for env(s) %v, which have no action outstanding on this connection: a transition built from nothing (SPEC 7.6)", rec.Orphans)
		}
		if c.s.features[FeatureReuseFeedbackObs] {
			c.cache.remember(fb)
		}
		if c.s.episodes != nil {
			c.s.episodes.feedback(c.id, fb)
		}
		c.s.record(rec)
		c.s.count(func(st *Stats) {
			st.FeedbackRows += len(fb.EnvIndices)
			st.Orphans += len(rec.Orphans)
		})
		if err = c.s.policy.Feedback(c.id, fb); err != nil {
			c.internalError(err)
			return
		}
		ex := c.s.exchanges.Add(1)
		if f := faults.closeAt(k, AfterFeedback); f != nil {
			c.closeFault(f)
			return
		}
		if cfg.StopAfter > 0 && ex >= int64(cfg.StopAfter) {
			c.s.Stop()
			c.drain()
			return
		}
	}
}

// number gives an accepted infer the next exchange number, unless a close
// frame has gone out on the connection; under the write lock, so that a
// close from Stop or Close either comes before the number or after it.
func (c *conn) number() (int, bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return 0, false
	}
	return int(c.s.infers.Add(1)), true
}

// receive reads the next message, by the deadline feedbackBy when awaiting
// a feedback (zero otherwise), and decodes it as a client's request; nil
// means the connection has ended (the reason handled: a read failure, a
// text frame, a message decode refuses).
func receive[T any](c *conn, feedbackBy time.Time, decode func([]byte) (*T, error)) *T {
	awaitingFeedback := !feedbackBy.IsZero()
	if awaitingFeedback {
		c.setReadDeadline(feedbackBy)
	}
	op, msg, err := c.readMessage()
	if awaitingFeedback {
		c.setReadDeadline(time.Time{})
	}
	if err != nil {
		c.readFailed(err, awaitingFeedback)
		return nil
	}
	if op == ws.OpText {
		c.refuseText()
		return nil
	}
	v, err := decode(msg)
	if err != nil {
		c.refuse(msg, err)
		return nil
	}
	return v
}

// actionTooBig says why the action answering an infer of n envs would be
// larger than MaxMessage, or "" when it is not. MaxMessage bounds what the
// server sends as well as what it takes: an infer costs a client as little
// as a few bytes an env, and its action H * da elements an env, so without
// this bound an infer well within MaxMessage could make the server allocate
// any amount.
func (s *Server) actionTooBig(n int) string {
	most := s.cfg.MaxMessage
	if most <= 0 {
		return ""
	}
	size, err := wire.ByteLen(s.cfg.ActionDType, []int{s.cfg.Horizon, n, s.cfg.ActionDim})
	if err == nil && int64(size) <= most-8*int64(n) { // and env_ids, 8 bytes an env
		return ""
	}
	return fmt.Sprintf("an infer of %d envs, whose action [%d, %d, %d] would be larger than the %d bytes this server sends or takes (Config.MaxMessage, plugrl serve --max-message)",
		n, s.cfg.Horizon, n, s.cfg.ActionDim, most)
}

// act runs the policy on a zeroed [h, n, da] chunk.
func (c *conn) act(envIDs []int64, obs *wire.Observation, h, n int) (*wire.Array, error) {
	cfg := &c.s.cfg
	shape := []int{h, n, cfg.ActionDim}
	size, err := wire.ByteLen(cfg.ActionDType, shape)
	if err != nil {
		return nil, err
	}
	chunk := &wire.Array{DType: cfg.ActionDType, Shape: shape, Data: make([]byte, size)}
	if err := c.s.policy.Act(c.id, envIDs, obs, chunk); err != nil {
		return nil, fmt.Errorf("policy: %v", err)
	}
	return chunk, nil
}

// typeOf names a message for the log.
func typeOf(msg []byte) string {
	kind, _, err := wire.Envelope(msg)
	if err != nil {
		return "undecodable"
	}
	return string(kind)
}

// refuse logs a message that failed validation and closes for a resync.
func (c *conn) refuse(msg []byte, err error) {
	rec := Received{Conn: c.id, Type: typeOf(msg), Refused: err.Error()}
	// Say what it was, as far as it decodes: e.g. the second of two infers.
	switch rec.Type {
	case wire.TypeInfer:
		if in, err := wire.DecodeInfer(msg); err == nil {
			rec.EnvIndices, rec.StepIDs, rec.Reuse = in.EnvIndices, in.StepIDs, in.Reuse
		}
	case wire.TypeFeedback:
		if fb, err := wire.DecodeFeedback(msg); err == nil {
			rec.EnvIndices, rec.StepIDs = fb.EnvIndices, fb.StepIDs
			rec.Rewards, rec.Terminated, rec.Truncated = fb.Rewards, fb.Terminated, fb.Truncated
		}
	}
	c.s.record(rec)
	c.resync(err.Error())
}

func (c *conn) refuseText() {
	const why = "the client sent a text frame (SPEC 1: binary frames only)"
	c.s.record(Received{Conn: c.id, Type: "text-frame", Refused: why})
	c.resync(why)
}

// resync closes with 1001 plugrl-server-resync (SPEC 7.2).
func (c *conn) resync(detail string) {
	c.sendClose(1001, ResyncReason, detail)
	c.drain()
}

func (c *conn) internalError(err error) {
	c.sendClose(1011, InternalErrorReason, err.Error())
	c.drain()
}

// readFailed ends the connection after a failed read.
func (c *conn) readFailed(err error, awaitingFeedback bool) {
	var pc *peerClosed
	var pe *protocolError
	var ne net.Error
	var we *controlWriteError
	switch {
	case errors.As(err, &pc): // recorded by readMessage
	case errors.As(err, &we):
		c.end("server", 0, "", "connection cut: "+we.Error())
		_ = c.nc.Close()
	case c.isCloseSent(): // the closing handshake ended, or timed out
	case errors.As(err, &pe) && pe.code == ws.StatusMessageTooBig:
		c.sendClose(int(pe.code), "message too big", pe.msg)
		// The frame's payload is still in the stream: passed over unread
		// (within the close's read deadline), or its bytes would be read
		// as frames.
		if _, err := io.CopyN(io.Discard, c.br, pe.skip); err == nil {
			c.drain()
		}
	case errors.As(err, &pe):
		c.sendClose(1002, "protocol error", pe.msg)
		c.drain()
	case awaitingFeedback && errors.As(err, &ne) && ne.Timeout():
		c.sendClose(1001, FeedbackTimeoutReason, fmt.Sprintf("no feedback %v after the action (SPEC 7.3)", c.s.cfg.FeedbackTimeout))
		c.drain()
	default:
		what := "waiting for an infer"
		if awaitingFeedback {
			what = "waiting for a feedback"
		}
		c.end("client", 0, "", fmt.Sprintf("connection ended %s: %v", what, err))
	}
}

func (c *conn) writeFailed(err error) {
	if errors.Is(err, errCloseSent) {
		c.drain()
		return
	}
	c.end("server", 0, "", "write failed: "+err.Error())
}

func (c *conn) isCloseSent() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.closeSent
}

// setReadDeadline sets a read deadline unless the connection is closing,
// whose handshake has its own.
func (c *conn) setReadDeadline(t time.Time) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.closeSent {
		_ = c.nc.SetReadDeadline(t)
	}
}

// requestClose closes from another goroutine (Stop, Close). Before the
// metadata is sent it only leaves the request for the handler, so metadata
// is still the first message on every connection.
func (c *conn) requestClose(code int, reason, detail string) {
	c.wmu.Lock()
	if !c.metaSent {
		if c.pending == nil {
			c.pending = &closeReq{code, reason, detail}
		}
		c.wmu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
		return
	}
	c.wmu.Unlock()
	c.sendClose(code, reason, detail)
}

// closeFromOutside closes from a goroutine other than the handler (Stop,
// Close), through requestClose, and returns within about closeGrace. The
// close frame waits for the write lock, which the handler holds while it
// writes an action; to a client that does not read, that is up to
// FeedbackTimeout. Past closeGrace the connection is cut instead, which also
// ends the handler's write.
func (c *conn) closeFromOutside(code int, reason, detail string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.requestClose(code, reason, detail)
	}()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.end("server", 0, "", fmt.Sprintf("%s; the close frame (%d %q) could not be written within %v, the client is not reading: connection cut", detail, code, reason, closeGrace))
		_ = c.nc.Close()
		<-done // promptly: every write on a closed socket fails at once
	}
}

// sendClose sends a close frame, once, and bounds the closing handshake. A
// close frame that cannot be written within closeGrace cuts the connection:
// the closing handshake cannot happen, and the handler would otherwise wait
// for the client's close until the read deadline.
func (c *conn) sendClose(code int, reason, detail string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return
	}
	c.closeSent = true
	c.end("server", code, reason, detail)
	if len(reason) > 123 {
		reason = reason[:123]
	}
	now := time.Now()
	_ = c.nc.SetWriteDeadline(now.Add(closeGrace))
	err := ws.WriteFrame(c.bw, ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusCode(code), reason)))
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		c.logf("writing the close frame: %v; connection cut", err)
		_ = c.nc.Close()
		return
	}
	_ = c.nc.SetReadDeadline(now.Add(closeGrace))
}

// drop ends the TCP connection with no close frame.
func (c *conn) drop(detail string) {
	c.wmu.Lock()
	c.closeSent = true
	c.wmu.Unlock()
	c.end("server", 0, "", detail)
	_ = c.nc.Close()
}

// drain reads until the client's close frame, the end of the stream or the
// closing handshake's deadline, logging any message that still arrives.
func (c *conn) drain() {
	for {
		op, msg, err := c.readMessage()
		if err != nil {
			return
		}
		typ := "text-frame"
		if op == ws.OpBinary {
			typ = typeOf(msg)
		}
		c.s.record(Received{Conn: c.id, Type: typ, Refused: "arrived after the server's close frame"})
	}
}
