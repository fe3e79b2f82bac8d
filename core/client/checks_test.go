package client_test

import (
	"errors"
	"testing"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestReuseAfterTruncated: SPEC 10.1 says reuse MUST be false for an env
// whose last feedback reported terminated OR truncated. TestReuseEligibility
// covers terminated only, and a mutant that marked a truncated env
// reusable survived: the server would then take the observation of a
// cut-short episode's last step as the first of the next one.
func TestReuseAfterTruncated(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Features: []string{client.FeatureReuse}})
	c := dial(t, url, nil)
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	no, yes := []bool{false}, []bool{true}
	if err := c.Feedback(&wire.Feedback{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Rewards: w.rew, Terminated: no, Truncated: yes}); err != nil {
		t.Fatal(err)
	}
	if c.CanReuse(0) {
		t.Fatal("after a truncated feedback env 0 must not be reusable (SPEC 10.1)")
	}
	if _, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: yes}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an infer reusing a truncated env's observation: %v, want invalid", err)
	}
}

// TestActionDisagreesWithMetadata: an action whose horizon or width differs
// from what metadata declared is a protocol error in either direction.
// Mutants that refused only an action larger than declared survived the
// other tests; a smaller one is just as wrong (a caller sized its buffers from metadata, and
// reads H x action_dim values).
func TestActionDisagreesWithMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		val  int
	}{
		{"horizon declared larger", "action_horizon", 4},
		{"horizon declared smaller", "action_horizon", 1},
		{"width declared larger", "action_dim", 5},
		{"width declared smaller", "action_dim", 2},
	} {
		// The server sends [2, n, 3]; its metadata, corrected over the
		// top (SPEC 5.1), says otherwise.
		_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 3, ExtraMetadata: map[string]any{tc.key: tc.val}})
		c := dial(t, url, nil)
		if _, err := newWorld().infer(c); !errors.Is(err, client.ErrProtocol) {
			t.Errorf("%s (%s %d for an action [2, 1, 3]): %v, want a protocol error", tc.name, tc.key, tc.val, err)
		}
	}
	// And agreeing metadata is no error, so the refusals above are about
	// the disagreement.
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 3})
	if _, err := newWorld().infer(dial(t, url, nil)); err != nil {
		t.Fatal(err)
	}
}

// TestActionCapAdmitsFloat64: with action_horizon and action_dim in
// metadata the client caps the action message at what that shape can take
// (actionCap), and the largest element the protocol has is 8 bytes: a
// float64 chunk of the declared shape must pass. The chunk here is far
// larger than the cap's fixed allowance for keys, so a mutant that counted
// 4 bytes per element (float32, the usual action dtype) survived the
// small chunks of the other tests but fails here.
func TestActionCapAdmitsFloat64(t *testing.T) {
	const h, d = 500, 100 // 800 KB of float64 for 2 envs
	_, url := serve(t, refserver.Config{Horizon: h, ActionDim: d, ActionDType: wire.Float64})
	c := dial(t, url, nil)
	state := make([]float64, 8)
	obs := wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 4}, Data: wire.BytesOf(state)}}}}
	a, err := c.Infer(&wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: &obs})
	if err != nil {
		t.Fatalf("a float64 action of the declared shape [%d, 2, %d]: %v", h, d, err)
	}
	if a.Horizon() != h || a.Envs() != 2 || a.Chunk.DType != wire.Float64 {
		t.Fatalf("action %s %v", a.Chunk.DType, a.Chunk.Shape)
	}
}

// TestDisableReuse: Options.DisableReuse keeps the client from using
// reuse-feedback-obs even when the server lists it: ReuseOffered and
// CanReuse say no, so a runner never sets a reuse flag, and an infer that
// sets one is refused before anything is sent. A mutant ignoring the
// option survived every other test.
func TestDisableReuse(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Features: []string{client.FeatureReuse}})
	c := dial(t, url, func(o *client.Options) { o.DisableReuse = true })
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	if c.ReuseOffered() || c.CanReuse(0) {
		t.Fatalf("DisableReuse: ReuseOffered %v, CanReuse(0) %v; want both false", c.ReuseOffered(), c.CanReuse(0))
	}
	if _, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: []bool{true}}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an infer reusing with DisableReuse: %v, want invalid", err)
	}
	if st := s.Stats(); st.ReusedRows != 0 {
		t.Fatalf("the server took %d reused rows", st.ReusedRows)
	}
}
