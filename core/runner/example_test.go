package runner_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// The lockstep loop of N envs: Act, step every env, Report. The runner
// asks for chunks, sums rewards over them, fills step_ids and episode
// statistics, and rides through reconnects.
func Example() {
	// The bundled reference server, for the example; a real client dials
	// its trainer's URL instead.
	srv := refserver.New(refserver.Config{Horizon: 4, ActionDim: 2, MaxLog: -1})
	url, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	const n = 3
	r, err := runner.New(c, runner.Config{Envs: n, OnEpisode: func(e runner.Episode) {
		fmt.Printf("env %d: return %.0f in %d steps\n", e.Env, e.Return, e.Length)
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// Observations and actions are the caller's memory, one row per env.
	state := make([]float64, n*2)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "state",
		Array: wire.Array{DType: wire.Float64, Shape: []int{n, 2}, Data: wire.BytesOf(state)}}}}
	actions := make([]float32, n*2) // [n, action_dim]
	out := &wire.Array{DType: wire.Float32, Shape: []int{n, 2}, Data: wire.BytesOf(actions)}
	rewards := make([]float64, n)
	terminated, truncated := make([]bool, n), make([]bool, n)

	for step := 1; step <= 6; step++ {
		if err := r.Act(obs, out); err != nil {
			log.Fatal(err) // KindStopped: the server ended the run
		}
		for i := range n { // step env i with actions[2*i : 2*i+2]
			state[2*i]++
			rewards[i] = 1
			truncated[i] = i == 0 && step == 5 // env 0's episode ends at step 5
		}
		if err := r.Report(obs, rewards, terminated, truncated, nil); err != nil {
			log.Fatal(err)
		}
		// Then reset the envs that ended; the next Act sends their first
		// observation.
	}
	st := r.Stats()
	fmt.Println("env steps:", st.EnvSteps, "exchanges:", st.Exchanges)
	// Output:
	// env 0: return 5 in 5 steps
	// env steps: 18 exchanges: 3
}
