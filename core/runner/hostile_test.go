package runner_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/hostile"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// script is what scriptedServer does on one connection: it sends meta,
// answers the k-th infer with a zero f4 action of horizon horizons[k] (the
// last one repeats) and width values per env per step, and reads feedback
// and ignores it, or, with resyncAtFeedback, closes with
// plugrl-server-resync at the first one (a server restarted with another
// policy).
type script struct {
	meta             wire.Metadata
	horizons         []int
	width            int
	resyncAtFeedback bool
}

// scriptedServer plays scripts[k] on its k-th connection (the last one
// repeats).
func scriptedServer(t *testing.T, scripts ...script) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for k := 0; ; k++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go scripts[min(k, len(scripts)-1)].play(nc)
		}
	}()
	return "ws://" + ln.Addr().String()
}

func (sc script) play(nc net.Conn) {
	defer nc.Close()
	if _, err := ws.Upgrade(nc); err != nil {
		return
	}
	var m wire.Message
	_ = wire.EncodeMetadata(&m, &sc.meta)
	if wsutil.WriteServerBinary(nc, m.AppendTo(nil)) != nil {
		return
	}
	for k := 0; ; {
		msg, err := wsutil.ReadClientBinary(nc)
		if err != nil {
			return
		}
		in, err := wire.DecodeInfer(msg)
		if err != nil { // a feedback
			if sc.resyncAtFeedback {
				_ = ws.WriteFrame(nc, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, client.ReasonResync)))
				time.Sleep(50 * time.Millisecond)
				return
			}
			continue
		}
		h := sc.horizons[min(k, len(sc.horizons)-1)]
		k++
		n := len(in.EnvIndices)
		chunk := wire.Array{DType: wire.Float32, Shape: []int{h, n, sc.width}, Data: make([]byte, 4*h*n*sc.width)}
		if wire.EncodeAction(&m, in.EnvIndices, &chunk) != nil || wsutil.WriteServerBinary(nc, m.AppendTo(nil)) != nil {
			return
		}
	}
}

// TestRunnerMemoryFollowsBytes: a 4096-env runner whose one env gets a
// long chunk (65536 steps, 256 KiB on the wire) keeps that chunk, not
// 4096 x its size (1 GiB, which aborted a process with less memory).
func TestRunnerMemoryFollowsBytes(t *testing.T) {
	const n = 4096
	// Metadata without action_horizon/action_dim: nothing bounds the chunk
	// but the bytes.
	url := scriptedServer(t, script{meta: wire.Metadata{ProtocolVersion: wire.Opt[int64]{Value: 1, Set: true}}, horizons: []int{2, 65536}, width: 1})
	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	state := make([]float64, n)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{n, 1}, Data: wire.BytesOf(state)}}}}
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 8*n)}
	rew := make([]float64, n)
	term, trunc := make([]bool, n), make([]bool, n)
	if err := r.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	term[0] = true // env 0's chunk ends early: the next Act infers for it alone
	if err := r.Report(obs, rew, term, trunc, nil); err != nil {
		t.Fatal(err)
	}
	term[0] = false
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := r.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("a 256 KiB action for one env made the runner allocate %d bytes", got)
	}
}

// TestRunnerZeroDimAction: an action of shape [4e18, n, 0] is refused at
// once; the runner used to step through H = 4e18 empty steps.
func TestRunnerZeroDimAction(t *testing.T) {
	s, err := hostile.Listen(hostile.Config{Scenario: hostile.ZeroDimAction})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := client.Dial(context.Background(), client.Options{URL: s.URL(), ReceiveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := runner.New(c, runner.Config{Envs: 1}) // [4e18, 1, 0]: its element count does not overflow
	if err != nil {
		t.Fatal(err)
	}
	state := make([]float64, 1)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: wire.BytesOf(state)}}}}
	out := &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}
	done := make(chan error, 1)
	go func() { done <- r.Act(obs, out) }()
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrProtocol) {
			t.Fatalf("got %v, want a protocol error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Act on a [4e18, n, 0] action did not return")
	}
}

// noMemory is an Allocator that has none.
type noMemory struct{}

func (noMemory) Grow([]byte, int, int) []byte { return nil }
func (noMemory) Free([]byte)                  {}

// TestRunnerNoMemory: when a chunk's memory cannot be had, Act returns
// KindNoMemory (not a panic, not an abort), the connection the action came
// on is dropped (its feedback is never owed), and the runner is still
// usable: the next Act reconnects and tries again.
func TestRunnerNoMemory(t *testing.T) {
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
	if st := c.Stats(); st.Reconnects[client.CauseOther] != 1 {
		t.Fatalf("reconnects after the dropped connection: %v, want one (the second act's)", st.Reconnects)
	}
	// The statistics' exchanges count infers answered with a valid
	// action, also when the act then failed: plugrl.h said "one per
	// successful plugrl_infer (or runner infer)", which these two acts
	// contradicted; the header now says which failed calls count.
	if st := r.Stats(); st.Exchanges != 2 || st.RTTMax <= 0 {
		t.Fatalf("exchanges = %d, rtt max %v after two acts answered with valid actions that failed for want of memory; want 2, and their round trips", st.Exchanges, st.RTTMax)
	}
}

// TestRunnerStepSizeFromMetadata: metadata's action_dim gives the step size
// before the first action only when an action could have it; a claim of
// 2^40, or of less than 1, leaves it unknown, since wrappers size the
// caller's action buffer from it (plugrl.hpp's Runner::act resized a
// vector to 2^40 doubles).
func TestRunnerStepSizeFromMetadata(t *testing.T) {
	for _, tc := range []struct {
		dim   any
		want  int
		known bool
	}{
		{int64(7), 7, true},
		{int64(1) << 40, 0, false},
		{int64(-3), 0, false},
		{int64(0), 0, false},
		{"7", 0, false},
	} {
		s := refserver.New(refserver.Config{ExtraMetadata: map[string]any{"action_dim": tc.dim}})
		url, err := s.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second})
		if err != nil {
			s.Close()
			t.Fatalf("action_dim %v: %v", tc.dim, err)
		}
		r, err := runner.New(c, runner.Config{Envs: 4})
		if err != nil {
			t.Fatal(err)
		}
		if got, known := r.StepSize(); got != tc.want || known != tc.known {
			t.Errorf("metadata action_dim %v: StepSize() = %d, %v; want %d, %v", tc.dim, got, known, tc.want, tc.known)
		}
		c.Close()
		s.Close()
	}
}

// TestRunnerRefusesWrongBufferOnceWidthLearned: with no usable action_dim
// in metadata, Act cannot check the caller's buffer before it sends; it
// learns the step's size from the first action, and then refuses a buffer
// of another size, a larger one too (a check that refused only a smaller
// buffer survived mutation testing: the caller's buffer would be left
// partly unwritten, with no error).
func TestRunnerRefusesWrongBufferOnceWidthLearned(t *testing.T) {
	_, c := dialRef(t, refserver.Config{Horizon: 2, ActionDim: 3, ExtraMetadata: map[string]any{"action_dim": "three"}})
	r, err := runner.New(c, runner.Config{Envs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, known := r.StepSize(); known {
		t.Fatal("the step size is known before any action; the test needs it unknown")
	}
	obs := stateObs(2)
	big := &wire.Array{DType: wire.Float64, Data: make([]byte, 8*(2*3+1))}
	err = r.Act(obs, big)
	if client.KindOf(err) != client.KindInvalid || !strings.Contains(err.Error(), "need 48") {
		t.Fatalf("Act with a buffer of 7 values for 2 envs x 3: %v; want invalid argument naming the 48 bytes needed", err)
	}
	if got, known := r.StepSize(); !known || got != 3 {
		t.Fatalf("after the first action StepSize() = %d, %v; want 3, true", got, known)
	}
}
