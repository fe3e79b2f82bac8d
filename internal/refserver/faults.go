package refserver

import "time"

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
