package wire

import (
	"testing"
	"time"
)

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

// BenchmarkMetadataManyKeys: decoding a 4 MiB metadata message of 838860
// distinct 3-byte keys, which a server may send at every connect, against
// one walk of the same map (walks/op: what refusing a key given twice
// costs in walks). Sorting the keys' offsets, each comparison reading
// both keys again, took 37 walks (420-440 ms here); sorting their hashes
// 6-12.
func BenchmarkMetadataManyKeys(b *testing.B) {
	msg := mp(nil).m(2).s("message_type").s("metadata").s("data").val(manyKeysData(4 << 20 / 5))
	md, err := DecodeMetadata(msg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	md.Lookup("absent")
	walk := time.Since(start)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeMetadata(msg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(walk), "walks/op")
}

// BenchmarkJSONTaggedNest: AppendJSON of a 1 MiB nest 62 maps deep,
// tagged as numpy's (which they are not) and not. Each tagged level
// decoded its map, skipping all it held, before showing it as a map:
// 310 ms against 22 ms untagged; now the same.
func BenchmarkJSONTaggedNest(b *testing.B) {
	for _, tag := range []string{"__npgeneric__", "__ndarray__", "__untagged__"} {
		nest := taggedNest(tag)
		b.Run(tag, func(b *testing.B) {
			b.SetBytes(int64(len(nest)))
			for i := 0; i < b.N; i++ {
				if _, _, err := AppendJSON(nil, nest); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
