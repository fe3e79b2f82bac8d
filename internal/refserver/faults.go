package refserver

import (
	"fmt"
	"slices"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
)

// Faults makes the server misbehave on purpose, so that a client's handling
// of each failure can be tested. The zero value injects nothing.
//
// Faults that fire once are keyed by exchange number: the 1-based,
// server-wide count of infers the server has accepted, so with one client the
// k-th infer it sends (across reconnects) is exchange k. Stats.Infers is the
// latest exchange number.
//
//   - Closes: at exchange k, at the chosen Point, close the connection with
//     any code and reason (a CloseFault); with Drop, end the TCP connection
//     with no close frame instead. AtInfer answers the infer with nothing;
//     AfterAction closes right after sending the action, while the client
//     holds a feedback; AfterFeedback closes once the feedback has arrived,
//     so the client holds nothing.
//   - Replies: answer the k-th infer with something other than a good action
//     (a ReplyFault; see ReplyKind for each kind). After a reply fault the
//     server sends nothing more on that connection: it logs whatever the
//     client sends (a conforming client sends nothing and closes, or drops)
//     until the client closes, or closes it itself with "Feedback timeout"
//     when Config.FeedbackTimeout passes. Except for ReplyLyingLength and
//     ReplyInternalError, which end the connection themselves.
//   - Fragments: when more than 1, send every action as that many frames (a
//     binary frame and continuation frames), with a ping between each two
//     fragments, which the client must answer and otherwise ignore.
//   - PingStorm: send this many pings before every action.
//   - MetadataDelay: wait this long after the handshake before sending
//     metadata, so a client that sends before reading metadata is caught
//     (its message is refused with a resync).
type Faults struct {
	Closes        []CloseFault
	Replies       []ReplyFault
	Fragments     int
	PingStorm     int
	MetadataDelay time.Duration
}

// Point is where in an exchange a CloseFault fires.
type Point int

const (
	// AtInfer: the exchange's infer has arrived and no action is sent.
	AtInfer Point = iota
	// AfterAction: the action has been sent; the client holds a feedback.
	AfterAction
	// AfterFeedback: the exchange's feedback has arrived; the client holds
	// nothing.
	AfterFeedback
)

func (p Point) String() string {
	switch p {
	case AtInfer:
		return "at the infer"
	case AfterAction:
		return "after the action"
	case AfterFeedback:
		return "after the feedback"
	}
	return "at an unknown point"
}

// CloseFault closes the connection serving exchange Exchange at When.
type CloseFault struct {
	Exchange int
	When     Point
	// Code and Reason go in the close frame; Code 0 sends 1001. For
	// example {1001, "plugrl-server-resync"}, {1001, "plugrl-server-stop"},
	// {1011, "Internal server error."}, {1000, ""}.
	Code   int
	Reason string
	// Drop ends the TCP connection without a close frame (Code and Reason
	// are then unused), as a crashed server or a cut link would.
	Drop bool
}

// ReplyKind is how a ReplyFault answers an infer.
type ReplyKind int

const (
	// ReplyText sends a text frame in place of the action (SPEC 7.4: a
	// client must treat it as fatal).
	ReplyText ReplyKind = iota + 1
	// ReplyGarbage sends a binary frame that is not msgpack (0xc1, a byte
	// msgpack never uses, then ASCII).
	ReplyGarbage
	// ReplyWrongEnvIDs sends a good chunk whose env_ids are the infer's
	// env_indices plus one (SPEC 4.3: they must be equal, in order).
	ReplyWrongEnvIDs
	// ReplyWrongShape sends a chunk of [H, n+1, da] with the infer's n
	// env_ids: the chunk and env_ids disagree.
	ReplyWrongShape
	// ReplyWrongHorizon sends a chunk of [H+1, n, da]: longer than the
	// action_horizon the metadata declared.
	ReplyWrongHorizon
	// ReplyWrongType sends the action with message_type "feedback".
	ReplyWrongType
	// ReplyLyingLength sends a frame header claiming 1 MiB more than the
	// action it then sends, and drops the TCP connection: the client's read
	// of the frame hits end of stream.
	ReplyLyingLength
	// ReplyInternalError closes with 1011 "Internal server error." instead
	// of answering (SPEC 7.4), as an unhandled exception in a policy does.
	ReplyInternalError
)

func (k ReplyKind) String() string {
	switch k {
	case ReplyText:
		return "text frame"
	case ReplyGarbage:
		return "garbage binary frame"
	case ReplyWrongEnvIDs:
		return "action with wrong env_ids"
	case ReplyWrongShape:
		return "action chunk of the wrong env count"
	case ReplyWrongHorizon:
		return "action chunk longer than the horizon"
	case ReplyWrongType:
		return "action with the wrong message_type"
	case ReplyLyingLength:
		return "frame length header that lies, then a dropped connection"
	case ReplyInternalError:
		return "1011 Internal server error. close"
	}
	return "unknown reply fault"
}

// ReplyFault answers the infer of exchange Exchange with Kind.
type ReplyFault struct {
	Exchange int
	Kind     ReplyKind
}

func (f *Faults) closeAt(k int, p Point) *CloseFault {
	for i := range f.Closes {
		if f.Closes[i].Exchange == k && f.Closes[i].When == p {
			return &f.Closes[i]
		}
	}
	return nil
}

func (f *Faults) replyAt(k int) ReplyKind {
	for _, r := range f.Replies {
		if r.Exchange == k {
			return r.Kind
		}
	}
	return 0
}

// closeFault applies a CloseFault.
func (c *conn) closeFault(f *CloseFault) {
	detail := fmt.Sprintf("fault at exchange %d, %s", f.Exchange, f.When)
	if f.Drop {
		c.drop(detail + ": dropped the TCP connection")
		return
	}
	code := f.Code
	if code == 0 {
		code = 1001
	}
	c.sendClose(code, f.Reason, detail)
	c.drain()
}

// replyFault answers an infer with a fault.
func (c *conn) replyFault(k int, kind ReplyKind, in *wire.InferMsg, obs *wire.Observation) {
	cfg := &c.s.cfg
	c.logf("fault: answering the infer of exchange %d with: %s", k, kind)
	n := len(in.EnvIndices)
	var err error
	switch kind {
	case ReplyText:
		err = c.send(ws.OpText, []byte("Traceback (most recent call last): refserver fault: a text frame in place of an action"))
	case ReplyGarbage:
		err = c.send(ws.OpBinary, []byte("\xc1\xc1\xc1\xc1 refserver fault: not msgpack"))
	case ReplyWrongEnvIDs:
		ids := make([]int64, n)
		for i, e := range in.EnvIndices {
			ids[i] = e + 1
		}
		err = c.sendBadAction(wire.TypeAction, ids, obs, in.EnvIndices, cfg.Horizon, n)
	case ReplyWrongShape:
		err = c.sendBadAction(wire.TypeAction, in.EnvIndices, obs, append(slices.Clone(in.EnvIndices), -1), cfg.Horizon, n+1)
	case ReplyWrongHorizon:
		err = c.sendBadAction(wire.TypeAction, in.EnvIndices, obs, in.EnvIndices, cfg.Horizon+1, n)
	case ReplyWrongType:
		err = c.sendBadAction(wire.TypeFeedback, in.EnvIndices, obs, in.EnvIndices, cfg.Horizon, n)
	case ReplyLyingLength:
		c.lyingFrame(in, obs)
		return
	case ReplyInternalError:
		c.sendClose(1011, InternalErrorReason, "fault: answered the infer with 1011")
		c.drain()
		return
	default:
		err = fmt.Errorf("unknown reply fault %d", kind)
	}
	if err != nil {
		c.writeFailed(err)
		return
	}
	c.poisoned()
}

// sendBadAction sends an action message built by hand: kind as its
// message_type, envIDs as env_ids, and a chunk of [h, rows, da] filled by
// the policy for policyIDs (rows of them).
func (c *conn) sendBadAction(kind string, envIDs []int64, obs *wire.Observation, policyIDs []int64, h, rows int) error {
	chunk, err := c.act(policyIDs[:rows:rows], obs, h, rows)
	if err != nil {
		// A policy may refuse a chunk it cannot fill; zeros do as well.
		size, _ := wire.ByteLen(c.s.cfg.ActionDType, []int{h, rows, c.s.cfg.ActionDim})
		chunk = &wire.Array{DType: c.s.cfg.ActionDType, Shape: []int{h, rows, c.s.cfg.ActionDim}, Data: make([]byte, size)}
	}
	m := &c.msg
	m.Reset()
	wire.StartAction(m, kind, envIDs)
	if err := m.Array(chunk); err != nil {
		return err
	}
	m.Finish()
	return c.sendAction(m)
}

// lyingFrame sends the action under a header claiming 1 MiB more than it
// holds, then drops the connection.
func (c *conn) lyingFrame(in *wire.InferMsg, obs *wire.Observation) {
	chunk, err := c.act(in.EnvIndices, obs, c.s.cfg.Horizon, len(in.EnvIndices))
	if err == nil {
		err = wire.EncodeAction(&c.msg, in.EnvIndices, chunk)
	}
	if err != nil {
		c.internalError(err)
		return
	}
	b := c.msg.AppendTo(nil)
	c.wmu.Lock()
	if !c.closeSent {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.FeedbackTimeout))
		_ = ws.WriteHeader(c.bw, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: int64(len(b)) + 1<<20})
		_, _ = c.bw.Write(b)
		_ = c.bw.Flush()
	}
	c.wmu.Unlock()
	c.drop("fault: a frame header claiming 1 MiB more than was sent, then dropped the TCP connection")
}

// poisoned follows a reply fault: the server sends nothing more, logs what
// the client sends, and ends at the client's close or the feedback timeout.
func (c *conn) poisoned() {
	c.setReadDeadline(time.Now().Add(c.s.cfg.FeedbackTimeout))
	for {
		op, msg, err := c.readMessage()
		if err != nil {
			c.readFailed(err, true)
			return
		}
		typ := "text-frame"
		if op == ws.OpBinary {
			typ = typeOf(msg)
		}
		c.s.record(Received{Conn: c.id, Type: typ, Refused: "arrived after a reply fault; the client should have closed"})
	}
}
