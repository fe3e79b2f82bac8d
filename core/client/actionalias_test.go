package client_test

import (
	"bytes"
	"testing"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// poisonAlloc is a receive allocator whose Free overwrites what it frees,
// as a C allocator's free does (its list pointers at the front, or the
// pages unmapped): memory the client frees too early shows up as 0xEE.
type poisonAlloc struct{}

func (poisonAlloc) Grow(buf []byte, keep, size int) []byte {
	nb := make([]byte, size)
	copy(nb, buf[:keep])
	return nb
}

func (poisonAlloc) Free(buf []byte) {
	buf = buf[:cap(buf)]
	for i := range buf {
		buf[i] = 0xEE
	}
}

// patternPolicy fills every action with i%251 + 1 and sends each
// feedback's first observation array to fed.
type patternPolicy struct{ fed chan []byte }

func (patternPolicy) Act(_ int, _ []int64, _ *wire.Observation, out *wire.Array) error {
	for i := 0; i < len(out.Data)/out.DType.Size; i++ {
		out.SetFloat64(i, float64(i%251+1))
	}
	return nil
}

func (p patternPolicy) Feedback(_ int, fb *wire.FeedbackMsg) error {
	p.fed <- bytes.Clone(fb.Obs.States[0].Array.Data)
	return nil
}

// TestFeedbackObservationMayViewTheAction: an env whose observation holds
// its last action (a common one: the previous action as an input) may
// point the feedback's observation at the action the client returned,
// which stays valid until the next call, through that call's reading of
// it. The client used to release the receive buffer before the send read
// the observation: a buffer over 1 MiB went back to the allocator first,
// so the server got what free left there (or, in C, a fault).
func TestFeedbackObservationMayViewTheAction(t *testing.T) {
	const da = 300_000 // 1.2 MB of <f4: over the 1 MiB the client keeps
	p := patternPolicy{fed: make(chan []byte, 1)}
	_, url := serve(t, refserver.Config{Horizon: 1, ActionDim: da, Policy: p, MaxMessage: 8 << 20})
	c := dial(t, url, func(o *client.Options) { o.Alloc = poisonAlloc{} })
	w := newWorld()
	a, err := w.infer(c)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(a.Chunk.Data)
	if len(want) != 4*da {
		t.Fatalf("action of %d bytes, want %d", len(want), 4*da)
	}
	obs := wire.Observation{States: []wire.NamedArray{{Name: "last_action", Array: wire.Array{DType: a.Chunk.DType, Shape: []int{1, da}, Data: a.Chunk.Data}}}}
	if err := c.Feedback(&wire.Feedback{EnvIndices: w.env, StepIDs: w.steps, Obs: &obs, Rewards: w.rew, Terminated: w.f, Truncated: w.f}); err != nil {
		t.Fatal(err)
	}
	got := <-p.fed
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the server got a feedback observation that differs from the action it viewed from byte %d on (%d bytes, want %d): the receive buffer was freed before the send read it", i, len(got), len(want))
	}
}
