package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/hostile"
)

// TestExchangesCountAnsweredActsThatFailed: the statistics' exchanges count
// infers answered with a valid action, also when the act then failed (no
// memory for the chunk here). plugrl.h used to say "One per successful
// plugrl_infer (or runner infer)", which two failed acts counted as 2
// contradicted; the header now says which failed calls count.
func TestExchangesCountAnsweredActsThatFailed(t *testing.T) {
	s, err := hostile.Listen(hostile.Config{Scenario: hostile.Normal, H: 4, D: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := client.Dial(context.Background(), client.Options{URL: s.URL(), ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := runner.New(c, runner.Config{Envs: 1, Alloc: noMemory{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	state := make([]float64, 1)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: wire.BytesOf(state)}}}}
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 16)}
	for i := 0; i < 2; i++ {
		if err := r.Act(obs, out); !errors.Is(err, client.ErrNoMemory) {
			t.Fatalf("act %d: got %v, want out of memory", i, err)
		}
	}
	if st := r.Stats(); st.Exchanges != 2 || st.RTTMax <= 0 {
		t.Fatalf("exchanges = %d, rtt max %v after two acts answered with valid actions that failed for want of memory; want 2, and their round trips", st.Exchanges, st.RTTMax)
	}
}
