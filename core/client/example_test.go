package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// exampleServer starts the bundled reference server for an example; a
// real client dials its trainer's URL instead.
func exampleServer() (url string, stop func()) {
	s := refserver.New(refserver.Config{Horizon: 4, ActionDim: 2, MaxLog: -1})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	return url, func() { s.Close() }
}

// One env's exchange: infer, step the env through the action chunk, feed
// back (SPEC 4.2). A runner (core/runner) does this bookkeeping for N envs.
func Example() {
	url, stop := exampleServer()
	defer stop()

	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("action_horizon:", c.Metadata().ActionHorizon.Value)

	// The observation is the caller's memory, sent without a copy of its own.
	state := []float64{0.1, 0.2, 0.3}
	obs := wire.Observation{States: []wire.NamedArray{{Name: "state",
		Array: wire.Array{DType: wire.Float64, Shape: []int{1, 3}, Data: wire.BytesOf(state)}}}}
	envs, stepIDs := []int64{0}, []int64{0}

	a, err := c.Infer(&client.Request{EnvIndices: envs, StepIDs: stepIDs, Obs: &obs})
	if errors.Is(err, client.ErrReconnected) {
		// The connection was replaced; nothing is owed: infer again.
	} else if err != nil {
		log.Fatal(err)
	}
	// a views the receive buffer until the next call on c: step the env
	// through the chunk (or copy it out) before the feedback.
	fmt.Println("chunk [H, n, da]:", a.Chunk.Shape, "of", a.Chunk.DType.Kind == 'f')
	da := 1 // values per env per step
	for _, d := range a.ActionShape() {
		da *= d
	}
	reward := float32(0)
	for k := range a.Horizon() {
		u := a.Chunk.Float64((k*a.Envs() + 0) * da) // env 0's step k: its first value
		_ = u                                       // apply it to the env
		reward++
	}

	err = c.Feedback(&client.Feedback{EnvIndices: envs, StepIDs: stepIDs, Obs: &obs,
		Rewards: []float32{reward}, Terminated: []bool{false}, Truncated: []bool{false}})
	if err != nil {
		log.Fatal(err)
	}
	st := c.Stats()
	fmt.Println("exchanges:", st.Exchanges, "feedbacks:", st.Feedbacks)
	// Output:
	// action_horizon: 4
	// chunk [H, n, da]: [4 1 2] of true
	// exchanges: 1 feedbacks: 1
}

// Interrupt, from any goroutine, ends a call that waits on the server
// (a Ctrl-C handler's, an e-stop's); Close then closes in order.
func ExampleClient_Interrupt() {
	url, stop := exampleServer()
	defer stop()
	c, err := client.Dial(context.Background(), client.Options{URL: url})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	c.Interrupt() // no call is running: the next Infer is ended before it sends
	_, err = c.Infer(&client.Request{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &wire.Observation{}})
	fmt.Println(client.KindOf(err), errors.Is(err, client.ErrInterrupted))
	// Output:
	// interrupted true
}
