package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestRunnerStepAllocs: a runner's steps (Act, then Report) allocate
// nothing on the Go heap in steady state, episode ends included: the
// C API's plugrl_runner_act and plugrl_runner_report are these calls, on
// a control loop's thread. It runs without -race (the detector
// allocates).
func TestRunnerStepAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const envs, dim = 4, 2
	c, err := client.Dial(context.Background(), client.Options{URL: childServer(t), ReceiveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := runner.New(c, runner.Config{Envs: envs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	state := make([]byte, envs*8*4)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "state", Array: wire.Array{DType: wire.Float32, Shape: []int{envs, 8}, Data: state}}}}
	out := wire.Array{DType: wire.Float64, Data: make([]byte, envs*dim*8)}
	rewards := make([]float64, envs)
	terminated, truncated := make([]bool, envs), make([]bool, envs)
	steps := 0
	step := func() {
		steps++
		// The state and rewards change as an env's do, and env 0 ends an
		// episode every 25 steps (the runner then keeps its statistics).
		state[steps%len(state)]++
		rewards[steps%envs] = float64(steps % 7)
		terminated[0] = steps%25 == 0
		if err := r.Act(obs, &out); err != nil {
			t.Fatal(err)
		}
		if err := r.Report(obs, rewards, terminated, truncated, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 {
		step()
	}
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Fatalf("a runner's step allocates %v times", allocs)
	}
}
