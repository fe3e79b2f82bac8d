package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// lateInterruptClient connects a client to a refserver and returns an
// infer and a feedback for one env.
func lateInterruptClient(t *testing.T) (*Client, *refserver.Server, func() (*wire.Action, error), func() error) {
	t.Helper()
	s := refserver.New(refserver.Config{Horizon: 2, ActionDim: 1, FeedbackTimeout: 5 * time.Second})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := Dial(context.Background(), Options{URL: url, ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	state := make([]float64, 4)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 4}, Data: wire.BytesOf(state)}}}}
	env, zero, no := []int64{0}, []int64{0}, []bool{false}
	infer := func() (*wire.Action, error) {
		return c.Infer(&wire.Infer{EnvIndices: env, StepIDs: zero, Obs: obs})
	}
	feedback := func() error {
		return c.Feedback(&wire.Feedback{EnvIndices: env, StepIDs: zero, Obs: obs, Rewards: []float32{1}, Terminated: no, Truncated: no})
	}
	return c, s, infer, feedback
}

// TestInterruptAsInferCompletes: an interrupt that lands after the action
// arrived, while Infer decodes and checks it, is pending for the next
// call. It does not end the connection, so the feedback owed for that
// action is sent (plugrl.h: owed feedback is not refused for an interrupt
// that came before it). The infer after it is the call the interrupt ends.
func TestInterruptAsInferCompletes(t *testing.T) {
	_, s, infer, feedback := lateInterruptClient(t)
	testInferDone = func(c *Client) { c.Interrupt() }
	_, err := infer()
	testInferDone = nil
	if err != nil {
		t.Fatalf("infer: %v", err)
	}
	if err := feedback(); err != nil {
		t.Fatalf("feedback owed for the action, after an interrupt as the infer completed: %v (want it sent)", err)
	}
	if _, err := infer(); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("the infer after: got %v, want interrupted", err)
	}
	if _, err := infer(); err != nil {
		t.Fatalf("the infer after the interrupted one: %v (want the same connection)", err)
	}
	if st := s.Stats(); st.Connections != 1 {
		t.Fatalf("server saw %d connections, want 1: the interrupt must not have ended the connection", st.Connections)
	}
}

// TestInterruptAsActionArrives: an interrupt that lands in Infer's wait
// just as the action is read has ended the connection; Infer reports it
// instead of handing out an action whose feedback could not be sent.
func TestInterruptAsActionArrives(t *testing.T) {
	c, _, infer, feedback := lateInterruptClient(t)
	testActionRead = func(c *Client) { c.Interrupt() }
	_, err := infer()
	testActionRead = nil
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("infer: got %v, want interrupted", err)
	}
	if err := feedback(); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("feedback after an interrupted infer: got %v, want out of order (nothing is owed)", err)
	}
	if _, err := infer(); !errors.Is(err, ErrReconnected) {
		t.Fatalf("the infer after: got %v, want reconnected", err)
	}
	if _, err := infer(); err != nil {
		t.Fatal(err)
	}
	if err := feedback(); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Interrupts; got != 1 {
		t.Fatalf("stats count %d interrupts, want 1", got)
	}
}
