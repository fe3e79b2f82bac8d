package ledger

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

// smallExchange encodes a SMALL exchange's messages (one env, 8 float64s,
// H = 8 x 7 float32 action), as the client records them; actionData is
// the action's float32 data, within action.
func smallExchange(tb testing.TB) (in, fb *wire.Message, obs *wire.Observation, action, actionData []byte) {
	state := make([]float64, 8)
	obs = &wire.Observation{States: []wire.NamedArray{{Name: "state", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 8}, Data: wire.BytesOf(state)}}}}
	env, steps := []int64{0}, []int64{0}
	in, fb = new(wire.Message), new(wire.Message)
	if err := wire.EncodeInfer(in, &wire.Infer{EnvIndices: env, StepIDs: steps, Obs: obs}); err != nil {
		tb.Fatal(err)
	}
	f := []bool{false}
	if err := wire.EncodeFeedback(fb, &wire.Feedback{EnvIndices: env, StepIDs: steps, Obs: obs, Rewards: []float32{1}, Terminated: f, Truncated: f}); err != nil {
		tb.Fatal(err)
	}
	var am wire.Message
	chunk := wire.Array{DType: wire.Float32, Shape: []int{8, 1, 7}, Data: make([]byte, 8*7*4)}
	if err := wire.EncodeAction(&am, env, &chunk); err != nil {
		tb.Fatal(err)
	}
	action = am.AppendTo(nil)
	for i, off := 0, 0; i < am.Segments(); i++ {
		if seg := am.Segment(i); &seg[0] == &chunk.Data[0] { // the data, referenced in place
			return in, fb, obs, action, action[off : off+len(seg)]
		}
		off += len(am.Segment(i))
	}
	tb.Fatal("the action's data is not a segment of its message")
	return
}

// newAction writes new float32 values in [-1, 1) into an action's data, as
// a policy's output changes (sign, exponent, every mantissa bit), the way
// the bench server does (cmd/plugrl-bench-server), from the xorshift32
// state rng, and returns the next state.
func newAction(data []byte, rng uint32) uint32 {
	for k := 0; k+4 <= len(data); k += 4 {
		rng ^= rng << 13
		rng ^= rng >> 17
		rng ^= rng << 5
		v := float32(int32(rng)>>8) / (1 << 23)
		binary.LittleEndian.PutUint32(data[k:], math.Float32bits(v))
	}
	return rng
}

// BenchmarkRecordExchange is the caller's share of recording one SMALL
// exchange: two sends and a receive into the queue, with the times the
// client reads anyway (SentAt, ReceivedAt), so no clock of the ledger's.
// "fixed": the same action every time (its receive queues an empty span);
// "varying": a new action every exchange, as a policy's, so that each
// receive is compared and queued as the span that changed (64 actions
// made beforehand, in turn, so no new values are computed on the clock).
func BenchmarkRecordExchange(b *testing.B) {
	for _, varying := range []bool{false, true} {
		name := "fixed"
		if varying {
			name = "varying"
		}
		b.Run(name, func(b *testing.B) {
			in, fb, obs, action, data := smallExchange(b)
			actions := [][]byte{action}
			if varying { // 64 different actions (newAction rewrites action's data)
				actions = actions[:0]
				for rng := uint32(1); len(actions) < 64; {
					rng = newAction(data, rng)
					actions = append(actions, bytes.Clone(action))
				}
			}
			w, err := Create(filepath.Join(b.TempDir(), "l"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			at := w.clock()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				w.SentAt(at, in, obs)
				w.ReceivedAt(at, actions[i%len(actions)])
				w.SentAt(at, fb, obs)
				if i%1000 == 999 { // keep the queue from filling, off the clock
					b.StopTimer()
					w.flush()
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkFlush is the whole cost of recording a SMALL exchange whose
// action changes: the caller's share, as BenchmarkRecordExchange, and the
// background writer's, compressing and writing the records every 1000
// exchanges.
func BenchmarkFlush(b *testing.B) {
	in, fb, obs, action, data := smallExchange(b)
	w, err := Create(filepath.Join(b.TempDir(), "l"), Options{QueueBytes: 64 << 20, FlushInterval: 250e6})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ReportAllocs()
	rng := uint32(1)
	for i := 0; i < b.N; i++ {
		rng = newAction(data, rng)
		w.Sent(in, obs)
		w.Received(action)
		w.Sent(fb, obs)
		if i%1000 == 999 {
			w.flush()
		}
	}
	b.StopTimer()
	w.mu.Lock()
	b.ReportMetric(float64(len(w.queue)), "queued-bytes")
	w.mu.Unlock()
}

// BenchmarkWriter is the background writer's share of recording a SMALL
// exchange: the caller's records are queued off the clock, 3000 exchanges
// at a time (what a 100 ms flush finds at the bench's rate), and only the
// flush is timed. "fixed": the same action every time; "varying": new
// values every exchange, as a policy's and the bench server's.
func BenchmarkWriter(b *testing.B) {
	for _, lv := range []Level{Digest, Full} {
		for _, varying := range []bool{false, true} {
			name := lv.String() + "/fixed"
			if varying {
				name = lv.String() + "/varying"
			}
			b.Run(name, func(b *testing.B) {
				in, fb, obs, action, data := smallExchange(b)
				w, err := Create(filepath.Join(b.TempDir(), "l"), Options{Level: lv, QueueBytes: maxQueue, FlushInterval: 250e6})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				b.ReportAllocs()
				b.StopTimer()
				rng := uint32(1)
				for done := 0; done < b.N; {
					n := min(b.N-done, 3000)
					for i := 0; i < n; i++ {
						if varying {
							rng = newAction(data, rng)
						}
						w.Sent(in, obs)
						w.Received(action)
						w.Sent(fb, obs)
					}
					b.StartTimer()
					w.flush()
					b.StopTimer()
					done += n
				}
			})
		}
	}
}
