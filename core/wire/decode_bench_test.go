package wire

import "testing"

// The decoders' walks over msgpack maps, without Action.Decode's shortcut:
// a fresh Action per message, and the server's decoders of the bench
// workloads' infer and feedback.

func BenchmarkDecodeActionFresh(b *testing.B) {
	raw := readVector(b, "action_f4.msgpack")
	buf := make([]byte, len(raw))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, raw)
		var act Action
		if err := act.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeInferServer(b *testing.B) {
	in, _ := benchWorkload(16, 2, 8, 32)
	var m Message
	if err := EncodeInfer(&m, in); err != nil {
		b.Fatal(err)
	}
	raw := m.AppendTo(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeInfer(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeFeedbackServer(b *testing.B) {
	_, fb := benchWorkload(16, 2, 8, 32)
	fb.Episode = &Episode{Return: make([]float64, 16), Length: make([]int64, 16), Mask: make([]bool, 16)}
	var m Message
	if err := EncodeFeedback(&m, fb); err != nil {
		b.Fatal(err)
	}
	raw := m.AppendTo(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeFeedback(raw); err != nil {
			b.Fatal(err)
		}
	}
}
