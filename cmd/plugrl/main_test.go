package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/plugrl/libplugrl/core/wire"
)

// TestServe runs `plugrl serve` until its --stop-after, driving it with a
// raw client, and checks its first line (the URL) and its summary.
func TestServe(t *testing.T) {
	pr, pw := io.Pipe()
	var stderr strings.Builder
	status := make(chan int, 1)
	go func() {
		status <- run([]string{"serve", "--addr", "127.0.0.1:0", "--horizon", "3", "--action-dim", "2",
			"--action-dtype", "float64", "--stop-after", "2", "--policy", "probe",
			"--features", "reuse-feedback-obs", "--quiet"}, pw, &stderr)
		pw.Close()
	}()
	out := bufio.NewReader(pr)
	url, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(url, "ws://127.0.0.1:") {
		t.Fatalf("first line %q, %v; stderr %s", url, err, stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, br, _, err := ws.Dial(ctx, strings.TrimSpace(url))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var rw io.ReadWriter = nc
	if br != nil {
		rw = struct {
			io.Reader
			io.Writer
		}{br, nc}
	}
	b, err := wsutil.ReadServerBinary(rw)
	if err != nil {
		t.Fatal(err)
	}
	md, err := wire.DecodeMetadata(b)
	if err != nil || md.ActionHorizon.Value != 3 || md.Policy.Value != "ProbePolicy" || !md.Has("reuse-feedback-obs") {
		t.Fatalf("metadata %+v %v", md, err)
	}
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "obs", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: make([]byte, 8)}}}}
	var m wire.Message
	for i := 0; i < 2; i++ {
		if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: []int64{4}, StepIDs: []int64{0}, Obs: obs}); err != nil {
			t.Fatal(err)
		}
		if err := wsutil.WriteClientBinary(nc, m.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		b, err := wsutil.ReadServerBinary(rw)
		if err != nil {
			t.Fatal(err)
		}
		var a wire.Action
		if err := a.Decode(b); err != nil || a.Chunk.DType.Size != 8 || a.Chunk.Float64(5) != 20041 {
			t.Fatalf("action %v %v", a.Chunk.Shape, err)
		}
		err = wire.EncodeFeedback(&m, &wire.Feedback{EnvIndices: []int64{4}, StepIDs: []int64{1}, Obs: obs,
			Rewards: []float32{3}, Terminated: []bool{false}, Truncated: []bool{false}})
		if err != nil {
			t.Fatal(err)
		}
		if err := wsutil.WriteClientBinary(nc, m.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = wsutil.ReadServerBinary(rw)
	var ce wsutil.ClosedError
	if !errors.As(err, &ce) || ce.Code != 1001 || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("want the stop, got %v", err)
	}
	rest, _ := io.ReadAll(out)
	if s := <-status; s != 0 {
		t.Fatalf("exit status %d; stderr %s", s, stderr.String())
	}
	if !strings.Contains(string(rest), "run stopped") || !strings.Contains(string(rest), "2 exchanges") {
		t.Fatalf("summary %q", rest)
	}
}

func TestUsage(t *testing.T) {
	var out, errs strings.Builder
	if s := run(nil, &out, &errs); s != 2 || !strings.Contains(errs.String(), "serve") {
		t.Fatalf("status %d, usage %q", s, errs.String())
	}
	if s := run([]string{"serve", "--policy", "nope"}, &out, &errs); s != 2 || !strings.Contains(errs.String(), "cem|probe|random|zero") {
		t.Fatalf("status %d: %q", s, errs.String())
	}
	if s := run([]string{"serve", "--action-dtype", "<U4"}, &out, &errs); s != 2 {
		t.Fatalf("status %d", s)
	}
}
