package ledger

import (
	"path/filepath"
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

// TestFlushAllocs: once its buffers have grown, the background writer's
// flush allocates nothing either, on the writer's thread as it runs there
// (backgroundFlush: its short slice and its CPU clock) as well as on
// Close's: the whole steady state is allocation-free. (TestSendAllocs
// covers sends, which are queued as other frames.)
func TestFlushAllocs(t *testing.T) {
	for _, background := range []bool{false, true} {
		flushAllocs(t, background)
	}
}

func flushAllocs(t *testing.T, background bool) {
	w, err := Create(filepath.Join(t.TempDir(), "l"), Options{FlushInterval: 250e6})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	msg := make([]byte, 3000)
	for i := range msg {
		msg[i] = byte(i * 13)
	}
	k := 0
	round := func() {
		for i := 0; i < 20; i++ {
			// A few words change, as an action's values do, and every
			// tenth message changes throughout: spans patch-coded, and
			// whole messages.
			for j := 0; j < 40; j++ {
				msg[(k*97+j)%len(msg)] ^= byte(k) | 1
			}
			if k%10 == 9 {
				for j := range msg {
					msg[j] = ^msg[j]
				}
			}
			k++
			w.Received(msg)
		}
		if background {
			w.backgroundFlush()
		} else {
			w.flush()
		}
	}
	round()
	round()
	if a := testing.AllocsPerRun(20, round); a != 0 {
		t.Fatalf("a flush allocates %v times (background %v)", a, background)
	}
}

// TestSendAllocs: an env loop's sends, infer and feedback alternating with
// their data changing, recorded and flushed at each level, allocate nothing
// once the buffers have grown.
func TestSendAllocs(t *testing.T) {
	for _, level := range []Level{Digest, Full} {
		w, err := Create(filepath.Join(t.TempDir(), "l"), Options{Level: level, FlushInterval: 250e6})
		if err != nil {
			t.Fatal(err)
		}
		state := make([]float64, 8)
		obs := &wire.Observation{States: []wire.NamedArray{{Name: "q", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 8}, Data: wire.BytesOf(state)}}}}
		steps, rewards, flags := []int64{0}, []float32{0}, []bool{false}
		in := &wire.Infer{EnvIndices: []int64{0}, StepIDs: steps, Obs: obs}
		fb := &wire.Feedback{EnvIndices: []int64{0}, StepIDs: steps, Obs: obs, Rewards: rewards, Terminated: flags, Truncated: flags}
		var mi, mf wire.Message
		round := func() {
			for i := 0; i < 20; i++ {
				steps[0]++
				state[3] += 0.5
				rewards[0] = float32(i)
				if wire.EncodeInfer(&mi, in) != nil || wire.EncodeFeedback(&mf, fb) != nil {
					t.Fatal("encoding failed")
				}
				w.Sent(&mi, obs)
				w.Received([]byte("action"))
				w.Sent(&mf, obs)
			}
			w.flush()
		}
		round()
		round()
		if a := testing.AllocsPerRun(20, round); a != 0 {
			t.Fatalf("%s: a round of sends and a flush allocate %v times", level, a)
		}
		w.Close()
	}
}
