package wire

// The envelope every message shares (SPEC 2): a map with message_type and
// data.

import (
	"github.com/tinylib/msgp/msgp"
)

// Envelope reads the top-level map at msg and returns its message_type, and
// a view of the value under key "data" (nil when absent).
func Envelope(msg []byte) (kind []byte, data []byte, err error) {
	if msgp.NextType(msg) != msgp.MapType {
		return nil, nil, malformedf("message", "top level is a %s, want a map (SPEC 2)", msgp.NextType(msg))
	}
	it, err := iterMap(msg)
	if err != nil {
		return nil, nil, malformed("message", err)
	}
	for it.next() {
		switch string(it.key) {
		case "message_type":
			if msgp.NextType(it.val) != msgp.StrType {
				return nil, nil, malformedf("message_type", "is a %s, want str", msgp.NextType(it.val))
			}
			if kind, _, err = msgp.ReadStringZC(it.val); err != nil {
				return nil, nil, malformed("message_type", err)
			}
		case "data":
			data = it.val
		}
	}
	if it.errKey != nil {
		return nil, nil, malformed(string(it.errKey), it.err)
	}
	if it.err != nil {
		return nil, nil, malformed("message", it.err)
	}
	if err := oneMessage(it.rest); err != nil {
		return nil, nil, err
	}
	if kind == nil {
		return nil, nil, malformedf("message", "no message_type key (SPEC 2)")
	}
	return kind, data, nil
}

// oneMessage refuses bytes after a message's top-level map (rest). A frame
// holds one message (SPEC 1), and msgpack.unpackb, the Python endpoints'
// decoder, refuses more with ExtraData: taken, a second message sharing
// the frame would be dropped without a word, and the peer left waiting
// for a reply to it.
func oneMessage(rest []byte) error {
	if len(rest) != 0 {
		return malformedf("message", "%d bytes after the message's map; a frame holds one message (SPEC 1)", len(rest))
	}
	return nil
}

// clientField is one top-level value of a client message.
type clientField struct {
	raw  []byte
	seen bool
}

// clientFields reads the top-level map of a client message, checks its
// message_type, and returns the values of the keys in want (by index).
func clientFields(msg []byte, kind string, want []string) ([]clientField, error) {
	if msgp.NextType(msg) != msgp.MapType {
		return nil, malformedf(kind, "top level is a %s, want a map (SPEC 2)", msgp.NextType(msg))
	}
	it, err := iterMap(msg)
	if err != nil {
		return nil, malformed(kind, err)
	}
	out := make([]clientField, len(want))
	var gotKind []byte
	for it.next() {
		k, val := it.key, it.val
		if string(k) == "message_type" {
			if gotKind != nil {
				return nil, malformedf(kind, "message_type appears twice")
			}
			if msgp.NextType(val) != msgp.StrType {
				return nil, malformedf("message_type", "is a %s, want str (SPEC 2)", msgp.NextType(val))
			}
			gotKind, _, _ = msgp.ReadStringZC(val)
			if gotKind == nil {
				gotKind = []byte{}
			}
			continue
		}
		for j, w := range want {
			if string(k) == w {
				if out[j].seen {
					return nil, malformedf(kind, "key %q appears twice", w)
				}
				out[j] = clientField{raw: val, seen: true}
			}
		}
		// Other top-level keys are ignored: a feature may add some.
	}
	if it.err != nil {
		return nil, it.malformed(kind)
	}
	if err := oneMessage(it.rest); err != nil {
		return nil, err
	}
	if gotKind == nil {
		return nil, malformedf(kind, "no message_type key (SPEC 2)")
	}
	if string(gotKind) != kind {
		hint := ""
		if kind == TypeFeedback && string(gotKind) == TypeInfer {
			hint = ": two infers in a row (SPEC 4.2)"
		}
		return nil, malformedf("message_type", "got %q, want %q%s", gotKind, kind, hint)
	}
	for j, w := range want {
		if !out[j].seen && w != "reuse" {
			return nil, malformedf(kind, "no %s key (SPEC 5.2, 5.4)", w)
		}
	}
	return out, nil
}
