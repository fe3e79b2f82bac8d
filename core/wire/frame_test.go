package wire

import (
	"errors"
	"fmt"
	"math"
	"strings"
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

// TestShapeDimTooLarge: a dimension past what any array can have is
// refused with the bound it passes, whichever msgpack integer carries it.
// The message said "want a non-negative dimension" of 2^62 and of 2^63 -
// 1, and msgp's "overflows uint64" of 2^64 - 1 sent as a uint64: neither
// says what was wrong.
func TestShapeDimTooLarge(t *testing.T) {
	for _, b := range []mp{
		nd("|u1", nil, 1<<62),
		nd("|u1", nil, math.MaxInt64),
		mp(nil).m(4).k("__ndarray__").t(true).k("data").bin(nil).k("dtype").s("|u1").k("shape").a(2).i(0).u(math.MaxUint64),
		mp(nil).m(4).k("__ndarray__").t(true).k("data").bin(nil).k("dtype").s("|u1").k("shape").a(1).u(1 << 63),
	} {
		_, _, err := decodeArr(b)
		if err == nil || strings.Contains(err.Error(), "non-negative") || strings.Contains(err.Error(), "overflows uint64") {
			t.Errorf("%v: want the bound a dimension passed", err)
			continue
		}
		errContains(t, err, fmt.Sprintf("at most %d", maxCount))
	}
	// A negative dimension is still named as one.
	_, _, err := decodeArr(nd("|u1", nil, 2, -1))
	errContains(t, err, "shape[1] is -1, want a non-negative dimension")
	// The bound itself is a dimension.
	if _, _, err := decodeArr(nd("|u1", nil, 0, maxCount)); err != nil {
		t.Errorf("shape [0 %d]: %v", maxCount, err)
	}
	if _, _, err := decodeArr(mp(nil).m(4).k("__ndarray__").t(true).k("data").bin([]byte{7}).k("dtype").s("|u1").k("shape").a(1).raw(0xcf, 0, 0, 0, 0, 0, 0, 0, 1)); err != nil {
		t.Errorf("a dimension sent as uint64: %v", err)
	}
}
