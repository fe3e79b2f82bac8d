package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestServesAndStops: the bench server answers a client's exchanges with
// [H, n, D] actions, ends the run with plugrl-server-stop after its window,
// and prints its rate.
func TestServesAndStops(t *testing.T) {
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var out strings.Builder
	go func() {
		done <- run([]string{"--envs", "2", "--horizon", "3", "--action-dim", "2", "--warmup", "50ms", "--seconds", "200ms"},
			pw, io.Discard)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	url, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, br); close(copied) }()

	c, err := client.Dial(context.Background(), client.Options{URL: strings.TrimSpace(url), MaxReconnects: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obs := wire.Observation{States: []wire.NamedArray{{Name: "state", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 4}, Data: make([]byte, 64)}}}}
	envs, zeros, flags := []int64{0, 1}, []int64{0, 0}, []bool{false, false}
	exchanges := 0
	for {
		a, err := c.Infer(&wire.Infer{EnvIndices: envs, StepIDs: zeros, Obs: &obs})
		if err == nil {
			if a.Horizon() != 3 || a.Envs() != 2 {
				t.Fatalf("action of shape %v", a.Chunk.Shape)
			}
			err = c.Feedback(&wire.Feedback{EnvIndices: envs, StepIDs: zeros, Obs: &obs, Rewards: make([]float32, 2), Terminated: flags, Truncated: flags})
		}
		if errors.Is(err, client.ErrStopped) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		exchanges++
	}
	select {
	case rc := <-done:
		if rc != 0 {
			t.Fatalf("exit status %d", rc)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
	<-copied // the server's output is complete
	if exchanges == 0 || !strings.Contains(out.String(), "exchanges/s ") {
		t.Fatalf("%d exchanges; server printed %q", exchanges, out.String())
	}
}

// TestSizes: --sizes prints the encoder's sizes of the workload.
func TestSizes(t *testing.T) {
	var out strings.Builder
	if rc := run([]string{"--sizes", "--envs", "1", "--state", "8"}, &out, io.Discard); rc != 0 {
		t.Fatalf("exit status %d", rc)
	}
	if got := out.String(); !strings.HasPrefix(got, "infer=412 feedback=590 action=") {
		t.Fatalf("got %q", got)
	}
}
