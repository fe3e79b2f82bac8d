package client

// The exchange: infer, its action's checks, feedback (SPEC 4, 5).

import (
	"errors"
	"fmt"
	"time"

	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/wire"
)

// countErr counts an interrupted call for Stats and the ledger. It runs
// inside the call (before leave): a Close on another goroutine waits for
// it, and its ledger record is not lost to that Close.
func (c *Client) countErr(err error) {
	if KindOf(err) == KindInterrupted {
		c.countInterrupted()
	}
}

func (c *Client) countInterrupted() {
	c.stats.interrupts.Add(1)
	c.ledger.Interrupted()
}

// Infer sends an infer and waits for its action. The returned Action views
// the receive buffer and is valid until the next call on this client, a
// Close on another goroutine included (InferFunc's use is not cut short by
// one). On ErrReconnected nothing is owed: build a fresh request and infer
// again.
func (c *Client) Infer(req *Request) (*wire.Action, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	return c.infer(req)
}

// InferFunc is Infer for a caller that uses the action inside the call:
// use runs on it before the call returns, so that a Close on another
// goroutine waits for use to return instead of releasing the receive
// buffer under it (freeing it, with a C Allocator), and the view is
// released after use, as ReleaseAction does. A runner copies its chunks
// out this way. use must not call the client. An error from use abandons
// the action (see Abandon: its feedback is never sent, and the next Infer
// reconnects) and is returned as it is.
func (c *Client) InferFunc(req *Request, use func(*wire.Action) error) error {
	if use == nil {
		return newErr(KindInvalid, nil, "InferFunc: use is nil")
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	a, err := c.infer(req)
	if err != nil {
		return err
	}
	if err := use(a); err != nil {
		c.abandon(fmt.Errorf("InferFunc's use of the action failed: %w", err))
		return err
	}
	c.releaseAction()
	return nil
}

// infer is Infer inside the call guard.
//
// The exchange is split into three functions so that each defer is
// open-coded: the compiler runs a deferred call in line at the return only
// in a function with few defers and returns (returns x defers at most 15),
// and a defer it cannot open-code costs the runtime's defer records, about
// 100 instructions a call, more than the rest of this function's own work.
func (c *Client) infer(req *Request) (*wire.Action, error) {
	a, err := c.inferSection(req)
	if err != nil {
		c.countErr(err)
	}
	return a, err
}

// inferSection checks that an infer may begin, and runs it as a blocking
// section: an interrupt that comes during it ends it.
func (c *Client) inferSection(req *Request) (*wire.Action, error) {
	if c.feedbackDone != 0 {
		c.tight = conn.Mono()-c.feedbackDone < tightLoop
		c.feedbackDone = 0
	}
	if c.phase == phaseHolding && !c.givenUp {
		return nil, newErr(KindOutOfOrder, nil, "infer while a feedback is owed for the last action: send feedback first (SPEC 4.2)")
	}
	if req == nil {
		return nil, newErr(KindInvalid, nil, "infer: request is nil")
	}
	if err := c.block(); err != nil {
		return nil, err
	}
	defer c.unblock()
	return c.inferBlocking(req)
}

// inferBlocking is the infer itself, in its blocking section: it sends the
// request and waits for the action.
func (c *Client) inferBlocking(req *Request) (*wire.Action, error) {
	if c.phase == phaseIdle || c.phase == phaseHolding {
		// What the server sent while the caller was away: a stop, a resync,
		// a feedback timeout, perhaps then a reset that would fail the
		// write below and pass for a lost connection (SPEC 7.1: after a
		// stop, no reconnect). That end is the one to report and record.
		// Over ws:// Poll makes no system call for a caller back within
		// 100 us of its last read (over wss:// it always reads).
		c.conn.Poll()
		if err := c.conn.Err(); err != nil {
			return nil, c.lost(err, "before the infer")
		}
	}
	if c.givenUp { // GiveUpOwed: the feedback owed goes with this connection
		c.givenUp = false
		if c.phase == phaseIdle || c.phase == phaseHolding {
			c.dropConnection(CauseOther, ErrGivenUp) // reconnected below
			c.givenUpDrop = true
		}
	}
	if c.phase == phaseDisconnected {
		if err := c.reconnect(); err != nil {
			return nil, err
		}
		if c.givenUpDrop {
			c.givenUpDrop = false
			return nil, newErr(KindReconnected, ErrGivenUp, "reconnected, the feedback owed having been given up; build a fresh request and infer again")
		}
		return nil, newErr(KindReconnected, nil, "reconnected; build a fresh request and infer again")
	}
	reused := 0
	if req.Reuse != nil {
		if len(req.Reuse) != len(req.EnvIndices) {
			return nil, newErr(KindInvalid, nil, "infer: %d reuse flags for %d env_indices; want one per env, or none", len(req.Reuse), len(req.EnvIndices))
		}
		for i, r := range req.Reuse {
			if !r {
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
	// An env asks for a chunk only once its last one is fed back (SPEC
	// 4.3): the server keeps one chunk per env, so a second infer for it
	// would replace the first, and the first's feedback would never come.
	for _, e := range req.EnvIndices {
		if c.envs.get(e)&envOutstanding != 0 {
			return nil, newErr(KindOutOfOrder, nil, "infer names env %d, which still holds an action chunk on this connection: send its feedback first (SPEC 4.3)", e)
		}
	}
	enc := req
	if req.Reuse != nil && reused == 0 {
		// No env reuses: the key is left out. Without the feature it must
		// not be sent (SPEC 10), and a caller that fills the flags from
		// CanReuse sends all false to a server that does not offer it
		// (one that dropped the feature at a reconnect), which resyncs
		// every such infer. The message is encoded from a copy of the
		// request without them, kept in the client so that the call
		// allocates nothing.
		c.plainReq = *req
		c.plainReq.Reuse = nil
		enc = &c.plainReq
	}
	err := wire.EncodeInfer(&c.inferMsg, enc)
	if enc != req {
		c.plainReq = wire.Infer{} // the caller's slices are not kept
	}
	if err != nil {
		return nil, invalidErr(err)
	}
	c.conn.ExpectMessage() // before the send: a look between the send and the wait must not take the reply for a stray
	if err := c.conn.WriteMessageObserved(&c.inferMsg, c.digester(&c.inferMsg, req.Obs)); err != nil {
		return nil, c.lost(err, "sending infer")
	}
	// The infer is out: one clock reading is the ledger's record time and
	// the start of the wait (the round trip's start).
	sent := conn.Mono()
	c.ledger.SentAt(sent, &c.inferMsg, req.Obs)
	if reused > 0 {
		c.stats.rowsReused.Add(uint64(reused))
	}
	c.conn.SetMaxMessageSize(c.actionCap(len(req.EnvIndices)))
	raw, err := c.conn.ReceiveFrom(sent, c.opts.ReceiveTimeout)
	if err != nil {
		if errors.Is(err, conn.ErrTimeout) {
			// The stream is now out of step: an action may still come.
			c.dropConnection(CauseTimeout, err)
			return nil, newErr(KindTimeout, err, "waiting for an action; the connection was closed and the next infer reconnects")
		}
		return nil, c.lost(err, "waiting for an action")
	}
	now := conn.Mono()
	c.conn.ReceiveEnded(now)      // Poll's grace counts from here (ws://): a look within it skips its system call
	c.ledger.ReceivedAt(now, raw) // before Decode, which aligns the data in place
	if testActionRead != nil {
		testActionRead(c)
	}
	// The wait is over: an interrupt from here on is pending for the next
	// call, and no longer ends the connection under an action the caller
	// is about to run. One that landed as the action arrived has ended it:
	// this call reports that, rather than hand out an action whose
	// feedback could never be sent.
	if c.endBlocking() {
		// A valid action for these envs: their feedback was owed, and is
		// dropped with the connection. A reply that is not one owes
		// nothing, interrupt or not.
		c.action.MaxEnvIDs = len(req.EnvIndices)
		if c.action.Decode(raw) == nil && c.checkAction(req.EnvIndices) == nil {
			c.owe(req.EnvIndices)
			c.stats.recordRTT(now - c.conn.ReceiveStarted()) // an exchange all the same: answered
		}
		return nil, c.lost(conn.ErrInterrupted, "as the action arrived")
	}
	// The round trip: from the start of the wait, which began as the
	// infer's last byte went out (sent, above), to now.
	rtt := now - c.conn.ReceiveStarted()
	c.action.MaxEnvIDs = len(req.EnvIndices)
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
	c.owe(req.EnvIndices)
	c.phase = phaseHolding
	if testInferDone != nil {
		testInferDone(c)
	}
	return &c.action, nil
}

// owe marks envs as holding an action: the server has sent one for them
// (even one an interrupt then kept from the caller), so their feedback is
// owed, and a connection that ends before it is sent drops it (the stats'
// FeedbackRowsDropped and the ledger's close record count it). A reply
// that is no valid action for them (a protocol error) owes nothing.
func (c *Client) owe(envs []int64) {
	for _, e := range envs {
		c.envs.set(e, c.envs.get(e)|envOutstanding)
	}
}

// Test seams, nil outside tests: where an interrupt's timing matters.
var (
	testActionRead func(*Client) // Infer: the action is read, the wait not yet ended
	testInferDone  func(*Client) // Infer: about to return the action
)

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
// In a loop that infers at once after each feedback, it may leave with the
// next infer (see tightLoop).
func (c *Client) Feedback(f *Feedback) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	err := c.feedback(f) // split for open-coded defers, as infer is
	if err != nil {
		c.countErr(err)
	}
	return err
}

// feedback is Feedback inside the call guard: it checks and encodes the
// feedback, then sends it in a blocking section.
func (c *Client) feedback(f *Feedback) error {
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
	return c.sendFeedback(f)
}

// sendFeedback sends the encoded feedback, in the blocking section
// blockOwed began.
func (c *Client) sendFeedback(f *Feedback) (err error) {
	defer c.unblock()
	// The connection may have closed while the caller stepped its envs:
	// then the feedback must not be sent anywhere (SPEC 7.6). Poll reads
	// what arrived meanwhile (over ws:// a caller back within 100 us of
	// the action skips that system call; over wss:// it always reads).
	c.conn.Poll()
	if err := c.conn.Err(); err != nil {
		return c.lost(err, "before sending feedback")
	}
	// The env flags are updated before the send, so that as little as
	// possible runs between this send and the caller's next infer (the
	// server then more often reads both at once; see docs/PERFORMANCE.md).
	// A failed send drops them all anyway (lost).
	episodeEnds := false
	for i, e := range f.EnvIndices {
		flags := c.envs.get(e) &^ (envOutstanding | envReusable)
		if !f.Terminated[i] && !f.Truncated[i] {
			flags |= envReusable
		} else {
			episodeEnds = true
		}
		c.envs.set(e, flags)
	}
	// tightLoop paces the caller from the end of the send: a failed one's
	// end is read here, a successful one's below. A send that never
	// returns (a panic in it: the C API's caller's memory faulted while it
	// was copied, and the conn ended the broken frame) loses its envs'
	// feedback as a failed one does, before the caller's recover drops the
	// connection (AbandonBecause): its close record then names them.
	var done time.Duration
	broke := true // until the send returns
	defer func() {
		if broke {
			c.feedbackLost(f.EnvIndices)
		}
		if done == 0 {
			done = conn.Mono()
		}
		c.feedbackDone = done
	}()
	ob := c.digester(&c.feedbackMsg, f.Obs)
	heldPath := c.tight && !episodeEnds // counted by the connection when it leaves
	if heldPath {
		// Its envs are kept: the message leaves with the next infer, or
		// with the sweeper's tick, and if it never does they are dropped
		// (heldDropped).
		c.heldEnvs = append(c.heldEnvs[:0], f.EnvIndices...)
		err = c.conn.WriteHeldMessage(&c.feedbackMsg, ob)
	} else {
		err = c.conn.WriteMessageObserved(&c.feedbackMsg, ob)
	}
	broke = false
	if err != nil {
		c.feedbackLost(f.EnvIndices)
		return c.lost(err, "sending feedback") // inside the section: an interrupt ends its reconnect
	}
	// The send is done: an interrupt from here on is pending for the next
	// call rather than ending the connection under the caller's next infer.
	c.unblock()
	done = conn.Mono() // the ledger's record time too
	c.ledger.SentAt(done, &c.feedbackMsg, f.Obs)
	// The action view ends here, not before the send: until this call
	// returns it is valid, and an observation may view it (an env whose
	// input is its last action), which the send and the ledger read.
	c.conn.Release()
	if !heldPath {
		c.stats.feedbacks.Add(1)
	}
	if c.givenUp && c.envs.outstanding() == 0 {
		c.givenUp = false // nothing is owed any more
	}
	c.phase = phaseIdle
	return nil
}

// feedbackLost counts the feedback of envs, whose flags Feedback cleared
// before a send that failed, as dropped, and keeps them for the ledger's
// close record (dropConnection's).
func (c *Client) feedbackLost(envs []int64) {
	c.stats.rowsDropped.Add(uint64(len(envs)))
	if c.ledger != nil {
		c.owedLost = append(c.owedLost[:0], envs...)
	}
}

// tightLoop is the pace at which feedback is held back. When the caller's
// last infer came within tightLoop of the feedback before it, the next
// feedback is held (conn.WriteHeldMessage): it leaves with the infer that
// follows, in the same system call and TCP segment, so the client makes
// one send per exchange and the server wakes once for both. A loop that
// then takes longer than that delays the feedback's arrival by as long, or
// until the connection's sweeper sends it (10-20 ms); a feedback that
// ends an episode is never held, since a reset often follows.
const tightLoop = time.Millisecond

// ReleaseAction ends the use of the last action's view: a large receive
// buffer is freed now instead of at the next call. A Close running on
// another goroutine releases it anyway, and is not raced: ReleaseAction
// then does nothing.
func (c *Client) ReleaseAction() {
	if !c.tryEnter() {
		return
	}
	defer c.leave()
	c.releaseAction()
}

func (c *Client) releaseAction() {
	if c.conn != nil {
		c.conn.Release()
	}
}
