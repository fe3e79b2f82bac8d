package client

import (
	"context"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// A caller of the low-level API may name its envs by indices past the
// dense slice's (a robot's serial number, an episode's own id), a new one
// for each episode. An env whose episode has ended holds nothing, so what
// the client keeps for it must go: one connection lives for days, and a
// map entry per episode ever run grew the process without bound (and made
// every count of the outstanding envs slower).
func TestEnvFlagsForgetFinishedEnvs(t *testing.T) {
	var f envFlags
	const episodes = 10000
	for i := range int64(episodes) {
		e := denseEnvs + i
		f.set(e, f.get(e)|envOutstanding)
		f.set(e, f.get(e)&^envOutstanding|envReusable) // a step's feedback
		f.set(e, f.get(e)|envOutstanding)
		f.set(e, f.get(e)&^(envOutstanding|envReusable)) // the episode's last
	}
	if n := len(f.other); n != 0 {
		t.Fatalf("%d envs past the dense slice kept after %d finished episodes, want 0", n, episodes)
	}
	if n := f.outstanding(); n != 0 {
		t.Fatalf("outstanding = %d, want 0", n)
	}

	// The same through a client: an infer and a terminal feedback for a
	// new env index each time.
	s := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1, FeedbackTimeout: 5 * time.Second, MaxLog: -1})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := Dial(context.Background(), Options{URL: url, ReceiveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	state := make([]float64, 2)
	obs := wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 2}, Data: wire.BytesOf(state)}}}}
	env, steps, done := []int64{0}, []int64{0}, []bool{true}
	const exchanges = 300
	for i := range int64(exchanges) {
		env[0] = 1<<40 + i
		if _, err := c.Infer(&wire.Infer{EnvIndices: env, StepIDs: steps, Obs: &obs}); err != nil {
			t.Fatalf("infer %d: %v", i, err)
		}
		if err := c.Feedback(&wire.Feedback{EnvIndices: env, StepIDs: steps, Obs: &obs, Rewards: []float32{1}, Terminated: done, Truncated: []bool{false}}); err != nil {
			t.Fatalf("feedback %d: %v", i, err)
		}
	}
	if n := len(c.envs.other); n > 1 {
		t.Fatalf("%d envs kept after %d episodes of one env each on one connection, want at most 1", n, exchanges)
	}
}
