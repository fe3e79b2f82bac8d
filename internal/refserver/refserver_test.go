package refserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// start runs a server for the test and returns it and its URL.
func start(t *testing.T, cfg refserver.Config) (*refserver.Server, string) {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	s := refserver.New(cfg)
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// client is a tiny raw PlugRL client: wire + gobwas/ws, nothing else.
type client struct {
	t     *testing.T
	nc    net.Conn
	br    io.Reader
	md    *wire.Metadata
	pings int
	msg   wire.Message
}

// dial connects and reads the metadata.
func dial(t *testing.T, url string) *client {
	t.Helper()
	c := dialRaw(t, url)
	op, b, err := c.recv()
	if err != nil || op != ws.OpBinary {
		t.Fatalf("reading metadata: op %v, %v", op, err)
	}
	if c.md, err = wire.DecodeMetadata(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// dialRaw connects without reading anything.
func dialRaw(t *testing.T, url string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, br, _, err := ws.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &client{t: t, nc: nc, br: nc}
	if br != nil {
		c.br = br
	}
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// recv reads one data message, answering and counting pings. A close frame
// is returned as a wsutil.ClosedError.
func (c *client) recv() (ws.OpCode, []byte, error) {
	ctl := wsutil.ControlFrameHandler(c.nc, ws.StateClientSide)
	count := func(h ws.Header, r io.Reader) error {
		if h.OpCode == ws.OpPing {
			c.pings++
		}
		return ctl(h, r)
	}
	rd := &wsutil.Reader{Source: c.br, State: ws.StateClientSide, OnIntermediate: count}
	for {
		h, err := rd.NextFrame()
		if err != nil {
			return 0, nil, err
		}
		if h.OpCode.IsControl() {
			if err := count(h, rd); err != nil {
				return 0, nil, err
			}
			continue
		}
		b, err := io.ReadAll(rd)
		return h.OpCode, b, err
	}
}

func (c *client) send(b []byte) {
	c.t.Helper()
	if err := wsutil.WriteClientBinary(c.nc, b); err != nil {
		c.t.Fatal(err)
	}
}

// obs is a states-only observation of the given envs: states["obs"] row i
// is [env, 1, 2], and one 2x2 RGB image.
func obs(envs ...int64) *wire.Observation {
	st := make([]float64, 0, 3*len(envs))
	img := make([]byte, 0, 12*len(envs))
	for _, e := range envs {
		st = append(st, float64(e), 1, 2)
		for i := 0; i < 12; i++ {
			img = append(img, byte(e))
		}
	}
	return &wire.Observation{
		Images: []wire.NamedArray{{Name: "cam", Array: wire.Array{DType: wire.Uint8, Shape: []int{len(envs), 2, 2, 3}, Data: img}}},
		States: []wire.NamedArray{{Name: "obs", Array: wire.Array{DType: wire.Float64, Shape: []int{len(envs), 3}, Data: wire.BytesOf(st)}}},
		Text:   make([]string, len(envs)),
	}
}

func (c *client) sendInfer(envs []int64, reuse []bool) {
	c.t.Helper()
	var sent []int64
	for i, e := range envs {
		if reuse == nil || !reuse[i] {
			sent = append(sent, e)
		}
	}
	err := wire.EncodeInfer(&c.msg, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, len(envs)), Obs: obs(sent...), Reuse: reuse})
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(c.msg.AppendTo(nil))
}

// infer sends an infer and returns the decoded action.
func (c *client) infer(envs []int64, reuse []bool) *wire.Action {
	c.t.Helper()
	c.sendInfer(envs, reuse)
	op, b, err := c.recv()
	if err != nil || op != ws.OpBinary {
		c.t.Fatalf("reading action: op %v, %v", op, err)
	}
	var a wire.Action
	if err := a.Decode(b); err != nil {
		c.t.Fatal(err)
	}
	return &a
}

func (c *client) feedbackMsg(envs []int64, done []bool) []byte {
	c.t.Helper()
	if done == nil {
		done = make([]bool, len(envs))
	}
	rewards := make([]float32, len(envs))
	for i := range rewards {
		rewards[i] = float32(i) + 0.5
	}
	err := wire.EncodeFeedback(&c.msg, &wire.Feedback{
		EnvIndices: envs, StepIDs: make([]int64, len(envs)), Obs: obs(envs...),
		Rewards: rewards, Terminated: done, Truncated: make([]bool, len(envs)),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return c.msg.AppendTo(nil)
}

func (c *client) feedback(envs []int64, done []bool) {
	c.t.Helper()
	c.send(c.feedbackMsg(envs, done))
}

// expectClose reads until the server's close frame and checks it.
func (c *client) expectClose(code ws.StatusCode, reason string) {
	c.t.Helper()
	for {
		op, b, err := c.recv()
		var ce wsutil.ClosedError
		if errors.As(err, &ce) {
			if ce.Code != code || ce.Reason != reason {
				c.t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Reason, code, reason)
			}
			return
		}
		if err != nil {
			c.t.Fatalf("want close %d %q, got error %v", code, reason, err)
		}
		c.t.Fatalf("want close %d %q, got a %v frame of %d bytes", code, reason, op, len(b))
	}
}

// waitFor polls the server's stats until cond holds.
func waitFor(t *testing.T, s *refserver.Server, what string, cond func(st refserver.Stats) bool) refserver.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stats %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMetadata(t *testing.T) {
	pad := strings.Repeat("p", 2<<20)
	_, url := start(t, refserver.Config{
		Horizon: 4, ActionDim: 2, Features: []string{refserver.FeatureReuseFeedbackObs, "unknown-feature"},
		Policy:        refserver.ProbePolicy{},
		ExtraMetadata: map[string]any{"run_id": "r1", "seed": 7, "tags": []string{"a", "b"}, "padding": pad, "server": "renamed"},
	})
	c := dial(t, url)
	md := c.md
	for _, k := range []string{"protocol_version", "server", "server_version", "algorithm", "policy", "action_horizon", "action_dim", "features"} {
		if _, ok := md.Lookup(k); !ok {
			t.Errorf("metadata has no %q (SPEC 5.1)", k)
		}
	}
	if md.ProtocolVersion.Value != 1 || md.ActionHorizon.Value != 4 || md.ActionDim.Value != 2 {
		t.Errorf("metadata %+v", md)
	}
	if md.Server.Value != "renamed" || md.ServerVersion.Value != refserver.Version || md.Policy.Value != "ProbePolicy" || md.Algorithm.Value != "none" {
		t.Errorf("server %q version %q policy %q algorithm %q", md.Server.Value, md.ServerVersion.Value, md.Policy.Value, md.Algorithm.Value)
	}
	if !md.Has(refserver.FeatureReuseFeedbackObs) || !md.Has("unknown-feature") {
		t.Errorf("features %v", md.Features.Value)
	}
	if js, _, _ := md.JSON("tags"); string(js) != `["a","b"]` {
		t.Errorf("tags %s", js)
	}
	if raw, ok := md.Lookup("padding"); !ok || len(raw) < 2<<20 {
		t.Errorf("padding of %d bytes", len(raw))
	}
}

func TestExchangeProbe(t *testing.T) {
	s, url := start(t, refserver.Config{Horizon: 3, ActionDim: 2, Policy: refserver.ProbePolicy{}})
	c := dial(t, url)
	if c.md.Server.Value != refserver.ServerName {
		t.Fatalf("server %q", c.md.Server.Value)
	}
	a := c.infer([]int64{2, 0, 5}, nil)
	if !slices.Equal(a.EnvIDs, []int64{2, 0, 5}) {
		t.Fatalf("env_ids %v, want the infer's env_indices in order", a.EnvIDs)
	}
	if !slices.Equal(a.Chunk.Shape, []int{3, 3, 2}) || a.Chunk.DType != wire.Float32 {
		t.Fatalf("chunk %s %v, want <f4 [H=3, n=3, da=2]", a.Chunk.DType, a.Chunk.Shape)
	}
	for k := 0; k < 3; k++ {
		for row, env := range []int64{2, 0, 5} {
			for d := 0; d < 2; d++ {
				if got, want := a.Chunk.Float64((k*3+row)*2+d), refserver.ProbeValue(k, env, d); got != want {
					t.Fatalf("chunk[%d, %d, %d] = %v, want %v (time-major)", k, row, d, got, want)
				}
			}
		}
	}
	// The feedback's env set need not match the infer's (SPEC 4.3).
	c.feedback([]int64{5}, nil)
	a = c.infer([]int64{5}, nil)
	if a.Envs() != 1 || a.Chunk.Float64(0) != 50 {
		t.Fatalf("second chunk %v %v", a.Chunk.Shape, a.Chunk.Float64(0))
	}
	c.feedback([]int64{2, 0}, []bool{true, false})
	st := waitFor(t, s, "two exchanges", func(st refserver.Stats) bool { return st.Exchanges == 2 })
	if st.Actions != 2 || st.FeedbackRows != 3 || st.Orphans != 0 || st.Connections != 1 || st.Open != 1 {
		t.Fatalf("stats %+v", st)
	}
	var kinds []string
	for _, r := range st.Received {
		kinds = append(kinds, fmt.Sprintf("%d:%s:%v:%d", r.Conn, r.Type, r.EnvIndices, r.Exchange))
	}
	want := []string{"1:infer:[2 0 5]:1", "1:feedback:[5]:1", "1:infer:[5]:2", "1:feedback:[2 0]:2"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("log %v, want %v", kinds, want)
	}
	if r := st.Received[3]; !slices.Equal(r.Terminated, []bool{true, false}) || !slices.Equal(r.Rewards, []float64{0.5, 1.5}) {
		t.Fatalf("feedback record %+v", r)
	}
}

func TestActionDTypesAndRay(t *testing.T) {
	for _, ts := range []string{"<f8", ">f4", ">f8"} {
		t.Run(ts, func(t *testing.T) {
			_, url := start(t, refserver.Config{Horizon: 2, ActionDim: 1, ActionDType: wire.MustParseDType(ts), Policy: refserver.ProbePolicy{}, OmitEnvIDs: ts == ">f8"})
			c := dial(t, url)
			a := c.infer([]int64{3}, nil)
			if a.Chunk.DType.Kind != 'f' || a.Chunk.DType.Size != wire.MustParseDType(ts).Size {
				t.Fatalf("dtype %s, want %s", a.Chunk.DType, ts)
			}
			if got := a.Chunk.Float64(1); got != 10030 {
				t.Fatalf("chunk[1, 0, 0] = %v, want 10030", got)
			}
			if (a.EnvIDs == nil) != (ts == ">f8") {
				t.Fatalf("env_ids %v with OmitEnvIDs %v", a.EnvIDs, ts == ">f8")
			}
		})
	}
}

func TestStopAfter(t *testing.T) {
	s, url := start(t, refserver.Config{Horizon: 2, ActionDim: 1, StopAfter: 3})
	c := dial(t, url)
	for i := 0; i < 3; i++ {
		c.infer([]int64{0}, nil)
		c.feedback([]int64{0}, nil)
	}
	c.expectClose(1001, refserver.StopReason)
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the stop")
	}
	// A client connecting after the stop gets metadata, then the stop.
	c2 := dial(t, url)
	c2.expectClose(1001, refserver.StopReason)
	st := s.Stats()
	if !st.Stopped || st.Exchanges != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStopClosesEveryone: the stop reaches a connection mid-exchange too.
func TestStopClosesEveryone(t *testing.T) {
	s, url := start(t, refserver.Config{StopAfter: 1})
	idle := dial(t, url)
	holding := dial(t, url)
	holding.infer([]int64{0}, nil) // holds a feedback
	c := dial(t, url)
	c.infer([]int64{0}, nil)
	c.feedback([]int64{0}, nil)
	for _, cl := range []*client{c, idle, holding} {
		cl.expectClose(1001, refserver.StopReason)
	}
	waitFor(t, s, "all closed", func(st refserver.Stats) bool { return st.Open == 0 })
}

func TestResyncTwoInfersKeepsOthers(t *testing.T) {
	s, url := start(t, refserver.Config{Horizon: 2, ActionDim: 1})
	good := dial(t, url)
	bad := dial(t, url)
	good.infer([]int64{0}, nil)
	bad.infer([]int64{0, 1}, nil)
	bad.sendInfer([]int64{0}, nil) // a second infer with no feedback between
	bad.expectClose(1001, refserver.ResyncReason)
	// The good client is unaffected, and a new connection works.
	good.feedback([]int64{0}, nil)
	good.infer([]int64{0}, nil)
	good.feedback([]int64{0}, nil)
	again := dial(t, url)
	again.infer([]int64{0}, nil)
	st := waitFor(t, s, "the resync", func(st refserver.Stats) bool { return st.Resyncs == 1 })
	var refused *refserver.Received
	for i := range st.Received {
		if st.Received[i].Refused != "" {
			refused = &st.Received[i]
		}
	}
	if refused == nil || refused.Type != "infer" || refused.Conn != 2 || !slices.Equal(refused.EnvIndices, []int64{0}) || !strings.Contains(refused.Refused, "two infers in a row") {
		t.Fatalf("refused record %+v", refused)
	}
	var closes []string
	for _, cl := range st.Closes {
		closes = append(closes, fmt.Sprintf("%d %s %d %s", cl.Conn, cl.By, cl.Code, cl.Reason))
	}
	if !slices.Equal(closes, []string{"2 server 1001 plugrl-server-resync"}) {
		t.Fatalf("closes %q", closes)
	}
}

func TestResyncCases(t *testing.T) {
	info := func(c *client) []byte {
		// A feedback for two envs whose info holds no ndarray: plugrl-server
		// cannot split it (SPEC 5.4).
		var m wire.Message
		m.Map(4)
		m.Str("message_type")
		m.Str("feedback")
		m.Str("env_indices")
		ids := wire.Array{DType: wire.Int64, Shape: []int{2}, Data: wire.BytesOf([]int64{0, 1})}
		_ = m.Array(&ids)
		m.Str("step_ids")
		_ = m.Array(&ids)
		m.Str("data")
		m.Map(5)
		m.Str("obs")
		m.Map(3)
		m.Str("images")
		m.Map(0)
		m.Str("states")
		m.Map(0)
		m.Str("text")
		m.List(2)
		m.Str("a")
		m.Str("b")
		m.Str("rewards")
		r := wire.Array{DType: wire.Float32, Shape: []int{2}, Data: make([]byte, 8)}
		_ = m.Array(&r)
		for _, k := range []string{"terminated", "truncated"} {
			m.Str(k)
			b := wire.Array{DType: wire.Bool, Shape: []int{2}, Data: make([]byte, 2)}
			_ = m.Array(&b)
		}
		m.Str("info")
		m.Map(1)
		m.Str("task")
		m.Str("pick")
		m.Finish()
		return m.AppendTo(nil)
	}
	cases := []struct {
		name string
		// run drives the client up to the message that should be refused.
		run  func(c *client)
		want string // in the Refused of the last received message
	}{
		{
			name: "garbage",
			run:  func(c *client) { c.send([]byte{0xc1, 0x00}) },
			want: "malformed",
		},
		{
			name: "feedback first",
			run:  func(c *client) { c.feedback([]int64{0}, nil) },
			want: `got "feedback", want "infer"`,
		},
		{
			name: "text frame",
			run: func(c *client) {
				if err := wsutil.WriteClientText(c.nc, []byte("hello")); err != nil {
					c.t.Fatal(err)
				}
			},
			want: "text frame",
		},
		{
			name: "unsplittable info",
			run: func(c *client) {
				c.infer([]int64{0, 1}, nil)
				c.send(info(c))
			},
			want: "cannot split it across 2 envs",
		},
		{
			name: "reuse without the feature",
			run:  func(c *client) { c.sendInfer([]int64{0}, []bool{false}) },
			want: "does not list reuse-feedback-obs",
		},
		{
			name: "malformed feedback",
			run: func(c *client) {
				c.infer([]int64{0}, nil)
				b := c.feedbackMsg([]int64{0}, nil)
				c.send(b[:len(b)-3])
			},
			want: "feedback",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, url := start(t, refserver.Config{Horizon: 2, ActionDim: 1})
			c := dial(t, url)
			tc.run(c)
			c.expectClose(1001, refserver.ResyncReason)
			st := waitFor(t, s, "the resync", func(st refserver.Stats) bool { return st.Resyncs == 1 })
			last := st.Received[len(st.Received)-1]
			if !strings.Contains(last.Refused, tc.want) {
				t.Fatalf("refused %q, want it to say %q", last.Refused, tc.want)
			}
			// The server still serves.
			dial(t, url).infer([]int64{0}, nil)
		})
	}
}

// recorder is a policy that keeps what it was given.
type recorder struct {
	mu   sync.Mutex
	acts []recorded
}

type recorded struct {
	conn   int
	envIDs []int64
	states []float64
	images []byte
	text   []string
}

func (r *recorder) Act(conn int, envIDs []int64, o *wire.Observation, out *wire.Array) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := recorded{conn: conn, envIDs: slices.Clone(envIDs), text: slices.Clone(o.Text)}
	st := &o.States[0].Array
	n, _ := wire.Elements(st.Shape)
	for i := 0; i < n; i++ {
		rec.states = append(rec.states, st.Float64(i))
	}
	rec.images = slices.Clone(o.Images[0].Array.Data)
	r.acts = append(r.acts, rec)
	return nil
}

func (r *recorder) Feedback(int, *wire.FeedbackMsg) error { return nil }

func (r *recorder) last() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acts[len(r.acts)-1]
}

func TestReuseFeedbackObs(t *testing.T) {
	pol := &recorder{}
	s, url := start(t, refserver.Config{Horizon: 2, ActionDim: 1, Features: []string{refserver.FeatureReuseFeedbackObs}, Policy: pol})
	c := dial(t, url)
	if !c.md.Has(refserver.FeatureReuseFeedbackObs) {
		t.Fatal("feature not listed")
	}
	c.infer([]int64{0, 1, 2}, nil)
	c.feedback([]int64{0, 1, 2}, []bool{false, true, false}) // env 1's episode ended
	// Env 0 and 2 reuse; env 1 may not, and sends its reset observation.
	c.infer([]int64{2, 1, 0}, []bool{true, false, true})
	got := pol.last()
	want := []float64{2, 1, 2, 1, 1, 2, 0, 1, 2}
	if !slices.Equal(got.states, want) || !slices.Equal(got.envIDs, []int64{2, 1, 0}) {
		t.Fatalf("policy saw states %v for %v, want %v", got.states, got.envIDs, want)
	}
	if got.images[0] != 2 || got.images[12] != 1 || got.images[24] != 0 || len(got.images) != 36 {
		t.Fatalf("policy saw images %v", got.images)
	}
	c.feedback([]int64{0}, nil)
	// Every row reused: the observation has a leading dimension of 0.
	c.infer([]int64{0}, []bool{true})
	if got := pol.last(); !slices.Equal(got.states, []float64{0, 1, 2}) {
		t.Fatalf("all-reused infer: states %v", got.states)
	}
	c.feedback([]int64{0, 1, 2}, []bool{false, true, false})
	// Reusing env 1's terminal observation is a resync (SPEC 10.1).
	c.sendInfer([]int64{1}, []bool{true})
	c.expectClose(1001, refserver.ResyncReason)
	st := waitFor(t, s, "the resync", func(st refserver.Stats) bool { return st.Resyncs == 1 })
	if st.ReusedRows != 3 {
		t.Fatalf("reused rows %d, want 3", st.ReusedRows)
	}
	if last := st.Received[len(st.Received)-1]; !strings.Contains(last.Refused, "terminal") {
		t.Fatalf("refused %q", last.Refused)
	}

	// Env indices are connection-scoped: a new connection holds nothing,
	// even for env 0, which the old one fed back.
	c2 := dial(t, url)
	c2.sendInfer([]int64{0}, []bool{true})
	c2.expectClose(1001, refserver.ResyncReason)
	st = waitFor(t, s, "the second resync", func(st refserver.Stats) bool { return st.Resyncs == 2 })
	if last := st.Received[len(st.Received)-1]; !strings.Contains(last.Refused, "never fed back on this connection") {
		t.Fatalf("refused %q", last.Refused)
	}
}

// TestOrphanFeedback: a feedback for an env with no outstanding action on
// this connection is counted and logged (SPEC 7.6).
func TestOrphanFeedback(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	s, url := start(t, refserver.Config{Logf: func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	c := dial(t, url)
	c.infer([]int64{0}, nil)
	c.feedback([]int64{0, 7}, nil)
	st := waitFor(t, s, "the feedback", func(st refserver.Stats) bool { return st.Exchanges == 1 })
	if st.Orphans != 1 || !slices.Equal(st.Received[1].Orphans, []int64{7}) {
		t.Fatalf("orphans %d %v", st.Orphans, st.Received[1].Orphans)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range lines {
		found = found || strings.Contains(l, "SPEC 7.6")
	}
	if !found {
		t.Fatalf("nothing logged: %q", lines)
	}
}

func TestManyClients(t *testing.T) {
	s, url := start(t, refserver.Config{Horizon: 4, ActionDim: 3, Policy: refserver.ProbePolicy{}})
	const clients, rounds = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, url)
			for r := 0; r < rounds; r++ {
				envs := []int64{int64(r % 3), 10 + int64(i)}
				c.sendInfer(envs, nil)
				op, b, err := c.recv()
				if err != nil || op != ws.OpBinary {
					errs <- fmt.Errorf("client %d: %v", i, err)
					return
				}
				var a wire.Action
				if err := a.Decode(b); err != nil || !slices.Equal(a.EnvIDs, envs) || a.Chunk.Float64(3) != refserver.ProbeValue(0, envs[1], 0) {
					errs <- fmt.Errorf("client %d: action %v %v", i, a.EnvIDs, err)
					return
				}
				c.send(c.feedbackMsg(envs, nil))
			}
			if err := wsutil.WriteClientMessage(c.nc, ws.OpClose, ws.NewCloseFrameBody(1000, "")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := waitFor(t, s, "all exchanges", func(st refserver.Stats) bool { return st.Exchanges == clients*rounds && st.Open == 0 })
	if st.Connections != clients || len(st.Closes) != clients {
		t.Fatalf("stats %+v", st)
	}
	for _, cl := range st.Closes {
		if cl.By != "client" || cl.Code != 1000 {
			t.Fatalf("close %+v, want the client's 1000", cl)
		}
	}
}

func TestCloseGoesAway(t *testing.T) {
	s := refserver.New(refserver.Config{Logf: t.Logf})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, url)
	c.infer([]int64{0}, nil)
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	c.expectClose(1001, "")
	<-done
	if _, _, _, err := ws.Dial(context.Background(), url); err == nil {
		t.Fatal("dial after Close succeeded")
	}
}

func TestFeedbackTimeout(t *testing.T) {
	_, url := start(t, refserver.Config{FeedbackTimeout: 200 * time.Millisecond})
	c := dial(t, url)
	c.infer([]int64{0}, nil)
	c.expectClose(1001, refserver.FeedbackTimeoutReason)
}

// failing is a policy whose Act fails.
type failing struct{ refserver.ZeroPolicy }

func (failing) Act(int, []int64, *wire.Observation, *wire.Array) error {
	return errors.New("boom")
}

func TestPolicyErrorIs1011(t *testing.T) {
	_, url := start(t, refserver.Config{Policy: failing{}})
	c := dial(t, url)
	c.sendInfer([]int64{0}, nil)
	c.expectClose(1011, refserver.InternalErrorReason)
}

func TestFaultCloses(t *testing.T) {
	cases := []struct {
		name  string
		fault refserver.CloseFault
		// holding: the client got the action before the close
		holding bool
		// fed: the client's feedback was accepted before the close
		fed bool
	}{
		{
			name:  "resync at infer",
			fault: refserver.CloseFault{Exchange: 2, When: refserver.AtInfer, Code: 1001, Reason: refserver.ResyncReason},
		},
		{
			name:    "resync while holding feedback",
			fault:   refserver.CloseFault{Exchange: 2, When: refserver.AfterAction, Code: 1001, Reason: refserver.ResyncReason},
			holding: true,
		},
		{
			name:    "1011 after feedback",
			fault:   refserver.CloseFault{Exchange: 2, When: refserver.AfterFeedback, Code: 1011, Reason: refserver.InternalErrorReason},
			holding: true,
			fed:     true,
		},
		{
			name:    "plain 1000 while holding",
			fault:   refserver.CloseFault{Exchange: 2, When: refserver.AfterAction, Code: 1000},
			holding: true,
		},
		{
			name:    "drop while holding",
			fault:   refserver.CloseFault{Exchange: 2, When: refserver.AfterAction, Drop: true},
			holding: true,
		},
		{
			name:  "drop at infer",
			fault: refserver.CloseFault{Exchange: 2, When: refserver.AtInfer, Drop: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, url := start(t, refserver.Config{Faults: refserver.Faults{Closes: []refserver.CloseFault{tc.fault}}})
			c := dial(t, url)
			c.infer([]int64{0}, nil)
			c.feedback([]int64{0}, nil)
			c.sendInfer([]int64{0}, nil)
			if tc.holding {
				if op, _, err := c.recv(); err != nil || op != ws.OpBinary {
					t.Fatalf("action: %v %v", op, err)
				}
			}
			if tc.fed {
				c.feedback([]int64{0}, nil)
			}
			if tc.fault.Drop {
				_, _, err := c.recv()
				var ce wsutil.ClosedError
				if err == nil || errors.As(err, &ce) {
					t.Fatalf("want the connection to end with no close frame, got %v", err)
				}
			} else {
				c.expectClose(ws.StatusCode(tc.fault.Code), tc.fault.Reason)
			}
			st := waitFor(t, s, "the close", func(st refserver.Stats) bool { return len(st.Closes) == 1 })
			if cl := st.Closes[0]; cl.By != "server" || (tc.fault.Drop && cl.Code != 0) || (!tc.fault.Drop && cl.Code != tc.fault.Code) {
				t.Fatalf("close %+v", cl)
			}
			if want := map[bool]int{false: 1, true: 2}[tc.fed]; st.Exchanges != want {
				t.Fatalf("exchanges %d, want %d", st.Exchanges, want)
			}
			// The fault fired once: a reconnecting client is served.
			c2 := dial(t, url)
			c2.infer([]int64{0}, nil)
			c2.feedback([]int64{0}, nil)
		})
	}
}

func TestFaultReplies(t *testing.T) {
	cases := []struct {
		kind  refserver.ReplyKind
		check func(t *testing.T, op ws.OpCode, b []byte, err error)
	}{
		{
			kind: refserver.ReplyText,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				if err != nil || op != ws.OpText {
					t.Fatalf("want a text frame, got %v %v", op, err)
				}
			},
		},
		{
			kind: refserver.ReplyGarbage,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				var a wire.Action
				if err != nil || op != ws.OpBinary || !errors.Is(a.Decode(b), wire.ErrMalformed) {
					t.Fatalf("want a binary frame that does not decode, got %v %v", op, err)
				}
			},
		},
		{
			kind: refserver.ReplyWrongEnvIDs,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				var a wire.Action
				if err != nil || a.Decode(b) != nil || !slices.Equal(a.EnvIDs, []int64{4, 6}) {
					t.Fatalf("want env_ids [4 6], got %v (%v)", a.EnvIDs, err)
				}
			},
		},
		{
			kind: refserver.ReplyWrongShape,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				var a wire.Action
				if err != nil || a.Decode(b) != nil || a.Envs() != 3 || len(a.EnvIDs) != 2 {
					t.Fatalf("want 3 envs in the chunk and 2 env_ids, got %v %v (%v)", a.Chunk.Shape, a.EnvIDs, err)
				}
			},
		},
		{
			kind: refserver.ReplyWrongHorizon,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				var a wire.Action
				if err != nil || a.Decode(b) != nil || a.Horizon() != 9 {
					t.Fatalf("want H = 9, got %v (%v)", a.Chunk.Shape, err)
				}
			},
		},
		{
			kind: refserver.ReplyWrongType,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				var a wire.Action
				if err != nil || !strings.Contains(fmt.Sprint(a.Decode(b)), `got "feedback"`) {
					t.Fatalf("want an action-shaped feedback, got %v", err)
				}
			},
		},
		{
			kind: refserver.ReplyLyingLength,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
					t.Fatalf("want the frame cut short, got %v %v", op, err)
				}
			},
		},
		{
			kind: refserver.ReplyInternalError,
			check: func(t *testing.T, op ws.OpCode, b []byte, err error) {
				var ce wsutil.ClosedError
				if !errors.As(err, &ce) || ce.Code != 1011 || ce.Reason != refserver.InternalErrorReason {
					t.Fatalf("want 1011, got %v", err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			s, url := start(t, refserver.Config{
				Policy:          refserver.ProbePolicy{},
				FeedbackTimeout: 300 * time.Millisecond,
				Faults:          refserver.Faults{Replies: []refserver.ReplyFault{{Exchange: 1, Kind: tc.kind}}},
			})
			c := dial(t, url)
			c.sendInfer([]int64{3, 5}, nil)
			op, b, err := c.recv()
			tc.check(t, op, b, err)
			// A client that closes is logged as closing; one that goes on
			// has its message logged as arriving after the fault.
			if tc.kind == refserver.ReplyWrongEnvIDs {
				c.feedback([]int64{3, 5}, nil)
				st := waitFor(t, s, "the logged feedback", func(st refserver.Stats) bool { return len(st.Received) == 2 })
				if !strings.Contains(st.Received[1].Refused, "after a reply fault") {
					t.Fatalf("refused %q", st.Received[1].Refused)
				}
				c.expectClose(1001, refserver.FeedbackTimeoutReason)
			}
			dial(t, url).infer([]int64{0}, nil)
		})
	}
}

func TestFaultFragmentsAndPings(t *testing.T) {
	s, url := start(t, refserver.Config{
		Horizon: 16, ActionDim: 7, Policy: refserver.ProbePolicy{},
		Faults: refserver.Faults{Fragments: 4, PingStorm: 5},
	})
	c := dial(t, url)
	for i := 0; i < 3; i++ {
		a := c.infer([]int64{1, 2}, nil)
		if a.Chunk.Float64(16*2*7-1) != refserver.ProbeValue(15, 2, 6) {
			t.Fatalf("last element %v", a.Chunk.Float64(16*2*7-1))
		}
		c.feedback([]int64{1, 2}, nil)
	}
	if c.pings != 3*(5+3) {
		t.Fatalf("got %d pings, want %d (5 per storm + 3 between 4 fragments, per action)", c.pings, 3*8)
	}
	waitFor(t, s, "3 exchanges", func(st refserver.Stats) bool { return st.Exchanges == 3 })
}

// TestFaultFragmentsOnTheWire reads the frames themselves: the storm's
// pings, then the action as a binary frame and continuations, Fin on the
// last only, a ping between each two. TestFaultFragmentsAndPings reads
// through a reader that joins fragments, so an action sent whole, with the
// same number of pings around it, passed it (and every client test that
// uses Fragments): a mutation that stopped fragmenting survived.
func TestFaultFragmentsOnTheWire(t *testing.T) {
	const parts, storm = 3, 2
	_, url := start(t, refserver.Config{Horizon: 4, ActionDim: 5, Faults: refserver.Faults{Fragments: parts, PingStorm: storm}})
	c := dial(t, url)
	c.sendInfer([]int64{7}, nil)
	var ops []ws.OpCode
	var fins []bool
	var msg []byte
	for len(fins) == 0 || !fins[len(fins)-1] {
		f, err := ws.ReadFrame(c.br)
		if err != nil {
			t.Fatalf("after frames %v: %v", ops, err)
		}
		ops = append(ops, f.Header.OpCode)
		if f.Header.OpCode.IsControl() {
			continue
		}
		fins = append(fins, f.Header.Fin)
		msg = append(msg, f.Payload...)
		if len(fins) > parts {
			t.Fatalf("more than %d data frames: %v", parts, ops)
		}
	}
	want := []ws.OpCode{ws.OpPing, ws.OpPing, ws.OpBinary, ws.OpPing, ws.OpContinuation, ws.OpPing, ws.OpContinuation}
	if !slices.Equal(ops, want) || !slices.Equal(fins, []bool{false, false, true}) {
		t.Fatalf("frames %v with Fin %v; want %v, Fin on the last only", ops, fins, want)
	}
	var a wire.Action
	if err := a.Decode(msg); err != nil || !slices.Equal(a.Chunk.Shape, []int{4, 1, 5}) {
		t.Fatalf("the joined fragments: shape %v, %v", a.Chunk.Shape, err)
	}
}

func TestFaultMetadataDelay(t *testing.T) {
	s, url := start(t, refserver.Config{Faults: refserver.Faults{MetadataDelay: 300 * time.Millisecond}})
	// A patient client is served.
	t0 := time.Now()
	c := dial(t, url)
	if time.Since(t0) < 250*time.Millisecond {
		t.Fatalf("metadata after %v", time.Since(t0))
	}
	c.infer([]int64{0}, nil)
	// An impatient one, which sends before the metadata, is resynced after it.
	e := dialRaw(t, url)
	e.sendInfer([]int64{0}, nil)
	if op, b, err := e.recv(); err != nil || op != ws.OpBinary || !strings.Contains(string(b), "metadata") {
		t.Fatalf("want the metadata first: %v %v", op, err)
	}
	e.expectClose(1001, refserver.ResyncReason)
	st := waitFor(t, s, "the resync", func(st refserver.Stats) bool { return st.Resyncs == 1 })
	if last := st.Received[len(st.Received)-1]; last.Conn != 2 || !strings.Contains(last.Refused, "before the server's metadata") {
		t.Fatalf("record %+v", last)
	}
}

func TestListenErrors(t *testing.T) {
	s := refserver.New(refserver.Config{ActionDType: wire.DType{Order: '<', Kind: 'U', Size: 1}})
	if _, err := s.Listen("127.0.0.1:0"); err == nil {
		t.Fatal("a text action dtype was accepted")
	}
	s = refserver.New(refserver.Config{ExtraMetadata: map[string]any{"bad": make(chan int)}})
	if _, err := s.Listen("127.0.0.1:0"); err == nil {
		t.Fatal("unencodable metadata was accepted")
	}
	s = refserver.New(refserver.Config{})
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen("127.0.0.1:0"); err == nil {
		t.Fatal("second Listen succeeded")
	}
	s.Close()
}

// TestLargeFrames: frames past the 1 MiB library default pass both ways
// (SPEC 1.1, 8.2).
func TestLargeFrames(t *testing.T) {
	pol := &recorder{}
	_, url := start(t, refserver.Config{Horizon: 64, ActionDim: 4096, ActionDType: wire.Float64, Policy: pol})
	c := dial(t, url)
	img := make([]byte, 2*640*480*3) // 1.8 MB
	for i := range img {
		img[i] = byte(i)
	}
	o := &wire.Observation{
		Images: []wire.NamedArray{{Name: "cam", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 480, 640, 3}, Data: img}}},
		States: []wire.NamedArray{{Name: "obs", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 1}, Data: wire.BytesOf([]float64{1, 2})}}},
	}
	if err := wire.EncodeInfer(&c.msg, &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: o}); err != nil {
		t.Fatal(err)
	}
	c.send(c.msg.AppendTo(nil))
	op, b, err := c.recv()
	if err != nil || op != ws.OpBinary || len(b) < 64*2*4096*8 {
		t.Fatalf("action: %v %v, %d bytes", op, err, len(b))
	}
	if got := pol.last(); !slices.Equal(got.images, img) {
		t.Fatal("the policy saw a different image")
	}
}

// TestClosesBounded: Stats.Closes keeps the first MaxCloses connections'
// ends and counts the rest, so that a long `plugrl serve` under
// connection churn does not grow without bound (it kept one entry per
// connection ever).
func TestClosesBounded(t *testing.T) {
	defer func(was int) { refserver.MaxCloses = was }(refserver.MaxCloses)
	refserver.MaxCloses = 3
	s := refserver.New(refserver.Config{Logf: t.Logf})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 5 {
		c := dial(t, url)
		c.nc.Close() // the connection ends, with no close frame
	}
	st := waitFor(t, s, "5 ends", func(st refserver.Stats) bool { return len(st.Closes)+st.ClosesDropped == 5 })
	if len(st.Closes) != 3 || st.ClosesDropped != 2 {
		t.Fatalf("%d closes kept, %d dropped; want 3 and 2", len(st.Closes), st.ClosesDropped)
	}
}
