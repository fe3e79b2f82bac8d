package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/hostile"
)

// TestConnectRefusedByPendingInterruptLeavesClientClosed: a Connect that
// an interrupt pending from before refuses has failed like any other
// Connect ("After an error the client is not connected: Close it"), and
// the client does not connect later behind its caller's back. It used to
// stay "disconnected": the next Infer reconnected (a connection the
// caller had interrupted before it was made) and returned ErrReconnected,
// where after every other failed Connect it returns KindClosed.
func TestConnectRefusedByPendingInterruptLeavesClientClosed(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.Normal})
	c, err := client.New(client.Options{URL: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Interrupt()
	if err := c.Connect(context.Background()); !errors.Is(err, client.ErrInterrupted) {
		t.Fatalf("Connect with an interrupt pending: %v", err)
	}
	x := []float64{0}
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: wire.BytesOf(x)}}}}
	_, err = c.Infer(&wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs})
	if !errors.Is(err, client.ErrClosed) || s.Stats().Connections != 0 {
		t.Fatalf("Infer after the refused Connect: %v, %d connection(s) made; want KindClosed and none, as after any failed Connect",
			err, s.Stats().Connections)
	}
}
