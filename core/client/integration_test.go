package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// serve starts a refserver for the test and returns its URL.
func serve(t testing.TB, cfg refserver.Config) (*refserver.Server, string) {
	t.Helper()
	if cfg.FeedbackTimeout == 0 {
		cfg.FeedbackTimeout = 5 * time.Second
	}
	s := refserver.New(cfg)
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

func dial(t testing.TB, url string, mod func(*client.Options)) *client.Client {
	t.Helper()
	o := client.Options{URL: url, ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	c, err := client.Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// world is one env's observation and the request/feedback around it.
type world struct {
	state []float64
	obs   wire.Observation
	env   []int64
	steps []int64
	rew   []float32
	f     []bool
}

func newWorld() *world {
	w := &world{state: make([]float64, 4), env: []int64{0}, steps: []int64{0}, rew: []float32{1}, f: []bool{false}}
	w.obs = wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 4}, Data: wire.BytesOf(w.state)}}}}
	return w
}

func (w *world) infer(c *client.Client) (*wire.Action, error) {
	return c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs})
}

func (w *world) feedback(c *client.Client) error {
	return c.Feedback(&wire.Feedback{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Rewards: w.rew, Terminated: w.f, Truncated: w.f})
}

func TestExchangeAndOrder(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 4, ActionDim: 2, Policy: refserver.ProbePolicy{}})
	c := dial(t, url, nil)
	if h := c.Metadata().ActionHorizon; !h.Set || h.Value != 4 {
		t.Fatalf("metadata action_horizon = %+v", h)
	}
	w := newWorld()
	if err := w.feedback(c); !errors.Is(err, client.ErrOutOfOrder) {
		t.Fatalf("feedback before infer: got %v, want out of order", err)
	}
	a, err := w.infer(c)
	if err != nil {
		t.Fatal(err)
	}
	if a.Horizon() != 4 || a.Envs() != 1 || a.EnvIDs[0] != 0 {
		t.Fatalf("action shape %v env_ids %v", a.Chunk.Shape, a.EnvIDs)
	}
	if _, err := w.infer(c); !errors.Is(err, client.ErrOutOfOrder) {
		t.Fatalf("second infer: got %v, want out of order", err)
	}
	bad := &wire.Feedback{EnvIndices: []int64{7}, StepIDs: []int64{0}, Obs: &w.obs, Rewards: w.rew, Terminated: w.f, Truncated: w.f}
	if err := c.Feedback(bad); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("feedback for env without a chunk: got %v, want invalid", err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	st := waitStats(s, func(st refserver.Stats) bool { return st.Exchanges == 1 })
	if st.Exchanges != 1 || st.Resyncs != 0 {
		t.Fatalf("server saw %+v", st)
	}
	// Nothing was sent for the refused calls: exactly one infer and one feedback.
	if len(st.Received) != 2 {
		t.Fatalf("server received %d messages, want 2: %+v", len(st.Received), st.Received)
	}
}

// TestInferOfHeldEnv: an env whose chunk is not fed back cannot ask for
// another (SPEC 4.3). Envs 0 and 1 get a chunk, only env 0 is fed back,
// and an infer for env 1 is refused with nothing sent; env 0 may go on.
func TestInferOfHeldEnv(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Policy: refserver.ProbePolicy{}})
	c := dial(t, url, nil)
	state := make([]float64, 8)
	obs := func(n int) *wire.Observation {
		return &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{n, 4}, Data: wire.BytesOf(state[:4*n])}}}}
	}
	infer := func(envs ...int64) error {
		_, err := c.Infer(&wire.Infer{EnvIndices: envs, StepIDs: make([]int64, len(envs)), Obs: obs(len(envs))})
		return err
	}
	feedback := func(envs ...int64) error {
		n := len(envs)
		return c.Feedback(&wire.Feedback{EnvIndices: envs, StepIDs: make([]int64, n), Obs: obs(n), Rewards: make([]float32, n), Terminated: make([]bool, n), Truncated: make([]bool, n)})
	}
	if err := infer(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := feedback(0); err != nil {
		t.Fatal(err)
	}
	err := infer(1)
	if !errors.Is(err, client.ErrOutOfOrder) || !strings.Contains(err.Error(), "env 1") {
		t.Fatalf("infer for env 1, still holding its chunk: got %v, want out of order naming env 1", err)
	}
	if err := infer(1, 0); !errors.Is(err, client.ErrOutOfOrder) {
		t.Fatalf("infer for envs 1 and 0: got %v, want out of order", err)
	}
	st := waitStats(s, func(st refserver.Stats) bool { return len(st.Received) >= 2 })
	if len(st.Received) != 2 {
		t.Fatalf("server received %d messages, want 2 (the refused infers send nothing): %+v", len(st.Received), st.Received)
	}
	// Env 0 was fed back: it may ask again, and one feedback ends both.
	if err := infer(0); err != nil {
		t.Fatal(err)
	}
	if err := feedback(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := infer(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := feedback(1, 0); err != nil {
		t.Fatal(err)
	}
	st = waitStats(s, func(st refserver.Stats) bool { return st.Exchanges == 3 })
	if st.Exchanges != 3 || st.Resyncs != 0 {
		t.Fatalf("server saw %+v", st)
	}
}

// TestClosePaths drives every way a connection can end and checks the
// error kind and that no held feedback is ever resent (SPEC 7.6).
func TestClosePaths(t *testing.T) {
	cases := []struct {
		name  string
		fault refserver.Faults
		// after is where the failure surfaces: "infer" or "feedback".
		after string
		want  *client.Error
	}{
		{"stop while holding", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AfterAction, Code: 1001, Reason: "plugrl-server-stop"}}}, "feedback", client.ErrStopped},
		{"stop at infer", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AtInfer, Code: 1001, Reason: "plugrl-server-stop"}}}, "infer", client.ErrStopped},
		{"resync while holding", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AfterAction, Code: 1001, Reason: "plugrl-server-resync"}}}, "feedback", client.ErrReconnected},
		{"feedback timeout", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AfterAction, Code: 1001, Reason: "Feedback timeout"}}}, "feedback", client.ErrReconnected},
		{"drop while holding", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AfterAction, Drop: true}}}, "feedback", client.ErrReconnected},
		{"drop at infer", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AtInfer, Drop: true}}}, "infer", client.ErrReconnected},
		{"plain close after feedback", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 1, When: refserver.AfterFeedback, Code: 1000}}}, "infer", client.ErrReconnected},
		{"1011", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyInternalError}}}, "infer", client.ErrServer},
		// Python websockets' keepalive: 1011 too, but this client's pongs were late, the server did not fail.
		{"keepalive timeout at infer", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AtInfer, Code: 1011, Reason: "keepalive ping timeout"}}}, "infer", client.ErrReconnected},
		{"keepalive timeout while holding", refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 2, When: refserver.AfterAction, Code: 1011, Reason: "keepalive ping timeout"}}}, "feedback", client.ErrReconnected},
		{"text frame", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyText}}}, "infer", client.ErrServer},
		{"garbage", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyGarbage}}}, "infer", client.ErrProtocol},
		{"wrong env_ids", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyWrongEnvIDs}}}, "infer", client.ErrProtocol},
		{"wrong shape", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyWrongShape}}}, "infer", client.ErrProtocol},
		{"wrong horizon", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyWrongHorizon}}}, "infer", client.ErrProtocol},
		{"wrong type", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyWrongType}}}, "infer", client.ErrProtocol},
		{"lying length", refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 2, Kind: refserver.ReplyLyingLength}}}, "infer", client.ErrProtocol}, // over the cap the request implies: refused before a byte is read
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, url := serve(t, refserver.Config{Horizon: 4, ActionDim: 2, Faults: tc.fault})
			c := dial(t, url, nil)
			w := newWorld()
			if _, err := w.infer(c); err != nil {
				t.Fatal(err)
			}
			if err := w.feedback(c); err != nil {
				t.Fatal(err)
			}
			_, err := w.infer(c)
			if tc.after == "feedback" {
				if err != nil {
					t.Fatalf("infer 2: %v", err)
				}
				time.Sleep(50 * time.Millisecond) // let the close arrive while the env steps
				err = w.feedback(c)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if errors.Is(err, client.ErrReconnected) {
				// The session goes on from a fresh infer on the new connection.
				if _, err := w.infer(c); err != nil {
					t.Fatalf("infer after reconnect: %v", err)
				}
				if err := w.feedback(c); err != nil {
					t.Fatalf("feedback after reconnect: %v", err)
				}
			}
			if errors.Is(err, client.ErrStopped) {
				if _, err := w.infer(c); !errors.Is(err, client.ErrStopped) {
					t.Fatalf("infer after stop: %v, want stopped again", err)
				}
			}
			time.Sleep(50 * time.Millisecond) // let the server log the last messages
			checkNoResend(t, s.Stats())
		})
	}
}

// waitStats waits (up to 5 s) for the server to have processed what the
// client sent: a feedback has no reply, so only the server knows.
func waitStats(s *refserver.Server, ok func(refserver.Stats) bool) refserver.Stats {
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.Stats()
		if ok(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkNoResend asserts that every connection's first message is an infer
// and that no feedback names an env without an action on its connection.
func checkNoResend(t *testing.T, st refserver.Stats) {
	t.Helper()
	first := map[int]string{}
	for _, r := range st.Received {
		if _, ok := first[r.Conn]; !ok {
			first[r.Conn] = r.Type
		}
		if len(r.Orphans) > 0 {
			t.Errorf("connection %d: feedback for envs %v with no action on that connection (resent held feedback)", r.Conn, r.Orphans)
		}
	}
	for conn, typ := range first {
		if typ != wire.TypeInfer {
			t.Errorf("connection %d began with %q, want infer", conn, typ)
		}
	}
	if st.Orphans != 0 {
		t.Errorf("server counted %d orphan feedback rows", st.Orphans)
	}
}

func TestFragmentsPingsAndRay(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 3, ActionDim: 2, OmitEnvIDs: true, Faults: refserver.Faults{Fragments: 4, PingStorm: 20}})
	c := dial(t, url, nil)
	w := newWorld()
	for i := 0; i < 5; i++ {
		a, err := w.infer(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.EnvIDs) != 1 || a.EnvIDs[0] != 0 {
			t.Fatalf("Ray dialect: env_ids %v, want the request's [0]", a.EnvIDs)
		}
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBigEndianAndFloat64Actions(t *testing.T) {
	for _, dt := range []string{">f4", "<f8", ">f8", "<i4"} {
		_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 3, ActionDType: wire.MustParseDType(dt), Policy: refserver.ProbePolicy{}})
		c := dial(t, url, nil)
		w := newWorld()
		w.env[0] = 5
		a, err := w.infer(c)
		if err != nil {
			t.Fatal(err)
		}
		if a.Chunk.DType.Swapped() || !a.Chunk.Aligned() {
			t.Fatalf("%s: action not in host order / aligned: %s", dt, a.Chunk.DType)
		}
		got := make([]float64, 6)
		if err := wire.Convert(wire.BytesOf(got), wire.Float64, a.Chunk.Data, a.Chunk.DType, 6); err != nil {
			t.Fatal(err)
		}
		// Probe values: 10000*k + 10*env + d.
		want := []float64{50, 51, 52, 10050, 10051, 10052}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: action %v, want %v", dt, got, want)
			}
		}
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMetadataTimeout(t *testing.T) {
	_, url := serve(t, refserver.Config{Faults: refserver.Faults{MetadataDelay: 2 * time.Second}})
	_, err := client.Dial(context.Background(), client.Options{URL: url, MetadataTimeout: 200 * time.Millisecond})
	if !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("got %v, want timeout", err)
	}
}

func TestReconnectGivesUp(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Faults: refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 1, When: refserver.AtInfer, Drop: true}}}})
	c := dial(t, url, func(o *client.Options) { o.MaxReconnects = 2 })
	s.Close() // nothing to reconnect to
	w := newWorld()
	if _, err := w.infer(c); !errors.Is(err, client.ErrConnect) {
		t.Fatalf("got %v, want connection failed after the attempts", err)
	}
}

func TestReuseEligibility(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Features: []string{client.FeatureReuse}})
	c := dial(t, url, nil)
	w := newWorld()
	reuse := []bool{true}
	if _, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: reuse}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("reuse before any feedback: %v, want invalid", err)
	}
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	if !c.CanReuse(0) {
		t.Fatal("env 0 was fed back, not terminal: reusable")
	}
	if _, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: reuse}); err != nil {
		t.Fatal(err)
	}
	w.f[0] = true // terminal: not reusable afterwards
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	w.f[0] = false
	if c.CanReuse(0) {
		t.Fatal("after a terminal feedback env 0 must not be reusable")
	}
	if st := waitStats(s, func(st refserver.Stats) bool { return st.Exchanges == 2 }); st.ReusedRows != 1 || st.Resyncs != 0 {
		t.Fatalf("server: reused %d rows, %d resyncs", st.ReusedRows, st.Resyncs)
	}
}

func TestBusy(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Faults: refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 1, When: refserver.AtInfer, Drop: true}}}})
	c := dial(t, url, func(o *client.Options) { o.MaxReconnects = 3; o.ReconnectBackoff = 300 * time.Millisecond })
	w := newWorld()
	done := make(chan struct{})
	go func() { defer close(done); w.infer(c) }()
	time.Sleep(100 * time.Millisecond) // the infer is now reconnecting
	if err := c.Feedback(&wire.Feedback{}); !errors.Is(err, client.ErrBusy) {
		t.Fatalf("second goroutine: %v, want busy", err)
	}
	<-done
}

// TestServerRestart: the server goes away and comes back on the same
// address; the client reconnects to the new one and carries on.
func TestServerRestart(t *testing.T) {
	s1 := refserver.New(refserver.Config{Horizon: 2, ActionDim: 1})
	url, err := s1.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, url, func(o *client.Options) { o.ReconnectBackoff = 50 * time.Millisecond; o.MaxReconnects = 10 })
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	s1.Close() // the client holds a feedback it can no longer send
	s2 := refserver.New(refserver.Config{Horizon: 2, ActionDim: 1})
	if _, err := s2.Listen(strings.TrimPrefix(url, "ws://")); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := w.feedback(c); !errors.Is(err, client.ErrReconnected) {
		t.Fatalf("feedback across a restart: %v, want reconnected", err)
	}
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	st := waitStats(s2, func(st refserver.Stats) bool { return st.Exchanges == 1 })
	if st.Exchanges != 1 || st.Orphans != 0 {
		t.Fatalf("new server saw %d exchanges, %d orphans", st.Exchanges, st.Orphans)
	}
	checkNoResend(t, st)
}
