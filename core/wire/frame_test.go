package wire

import (
	"errors"
	"testing"
)

// TestOneMessagePerFrame: a frame is one msgpack map (SPEC 1: one message
// per frame). Bytes after that map, a stray byte or a second message, are
// malformed, as msgpack.unpackb (the Python client's and server's
// decoder) refuses them with ExtraData; taken, the second of two messages
// in a frame was dropped without a word. Every decoder of a frame
// refuses them: Envelope, DecodeMetadata, Action.Decode (full and
// shortcut), DecodeInfer and DecodeFeedback.
func TestOneMessagePerFrame(t *testing.T) {
	meta := mp(nil).m(2).s("message_type").s("metadata").s("data").m(1).s("protocol_version").i(1)
	action := actionMsg(mp(nil).m(1).s("action").val(nd("<f4", make([]byte, 8), 1, 2)))
	var m Message
	obs := &Observation{States: []NamedArray{{Name: "s", Array: state(1, 2, 0)}}}
	if err := EncodeInfer(&m, &Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs}); err != nil {
		t.Fatal(err)
	}
	infer := m.AppendTo(nil)
	f := &Feedback{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs, Rewards: []float32{1}, Terminated: []bool{false}, Truncated: []bool{false}}
	if err := EncodeFeedback(&m, f); err != nil {
		t.Fatal(err)
	}
	feedback := m.AppendTo(nil)

	decoders := map[string]func([]byte) error{
		"Envelope":       func(b []byte) error { _, _, err := Envelope(b); return err },
		"DecodeMetadata": func(b []byte) error { _, err := DecodeMetadata(b); return err },
		"Action.Decode":  func(b []byte) error { var a Action; return a.Decode(b) },
		"DecodeInfer":    func(b []byte) error { _, err := DecodeInfer(b); return err },
		"DecodeFeedback": func(b []byte) error { _, err := DecodeFeedback(b); return err },
	}
	msgs := map[string][]byte{"DecodeMetadata": meta, "Action.Decode": action, "DecodeInfer": infer, "DecodeFeedback": feedback, "Envelope": action}
	for name, dec := range decoders {
		msg := msgs[name]
		if err := dec(append([]byte(nil), msg...)); err != nil {
			t.Fatalf("%s of the message alone: %v", name, err)
		}
		for what, extra := range map[string][]byte{"a nil byte": {0xc0}, "a second message": action} {
			err := dec(append(append([]byte(nil), msg...), extra...))
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s of a message followed by %s: %v, want ErrMalformed", name, what, err)
				continue
			}
			errContains(t, err, "a frame holds one message")
		}
	}

	// The shortcut for a message of the last one's structure takes no
	// trailing bytes either: it is taken only for the same length.
	var a Action
	if err := a.Decode(append([]byte(nil), action...)); err != nil {
		t.Fatal(err)
	}
	if err := a.Decode(append(append([]byte(nil), action...), 0xc0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("Action.Decode after a decode of the same structure, with a byte more: %v", err)
	}
}
