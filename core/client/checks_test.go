package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestReuseAfterTruncated: SPEC 10.1 says reuse MUST be false for an env
// whose last feedback reported terminated OR truncated. TestReuseEligibility
// covers terminated only, and a mutant that marked a truncated env
// reusable survived: the server would then take the observation of a
// cut-short episode's last step as the first of the next one.
func TestReuseAfterTruncated(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Features: []string{client.FeatureReuse}})
	c := dial(t, url, nil)
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	no, yes := []bool{false}, []bool{true}
	if err := c.Feedback(&wire.Feedback{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Rewards: w.rew, Terminated: no, Truncated: yes}); err != nil {
		t.Fatal(err)
	}
	if c.CanReuse(0) {
		t.Fatal("after a truncated feedback env 0 must not be reusable (SPEC 10.1)")
	}
	if _, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: yes}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an infer reusing a truncated env's observation: %v, want invalid", err)
	}
}

// TestActionDisagreesWithMetadata: an action whose horizon or width differs
// from what metadata declared is a protocol error in either direction.
// Mutants that refused only an action larger than declared survived the
// other tests; a smaller one is just as wrong (a caller sized its buffers from metadata, and
// reads H x action_dim values).
func TestActionDisagreesWithMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		val  int
	}{
		{"horizon declared larger", "action_horizon", 4},
		{"horizon declared smaller", "action_horizon", 1},
		{"width declared larger", "action_dim", 5},
		{"width declared smaller", "action_dim", 2},
	} {
		// The server sends [2, n, 3]; its metadata, corrected over the
		// top (SPEC 5.1), says otherwise.
		_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 3, ExtraMetadata: map[string]any{tc.key: tc.val}})
		c := dial(t, url, nil)
		if _, err := newWorld().infer(c); !errors.Is(err, client.ErrProtocol) {
			t.Errorf("%s (%s %d for an action [2, 1, 3]): %v, want a protocol error", tc.name, tc.key, tc.val, err)
		}
	}
	// And agreeing metadata is no error, so the refusals above are about
	// the disagreement.
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 3})
	if _, err := newWorld().infer(dial(t, url, nil)); err != nil {
		t.Fatal(err)
	}
}

// TestActionCapAdmitsFloat64: with action_horizon and action_dim in
// metadata the client caps the action message at what that shape can take
// (actionCap), and the largest element the protocol has is 8 bytes: a
// float64 chunk of the declared shape must pass. The chunk here is far
// larger than the cap's fixed allowance for keys, so a mutant that counted
// 4 bytes per element (float32, the usual action dtype) survived the
// small chunks of the other tests but fails here.
func TestActionCapAdmitsFloat64(t *testing.T) {
	const h, d = 500, 100 // 800 KB of float64 for 2 envs
	_, url := serve(t, refserver.Config{Horizon: h, ActionDim: d, ActionDType: wire.Float64})
	c := dial(t, url, nil)
	state := make([]float64, 8)
	obs := wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 4}, Data: wire.BytesOf(state)}}}}
	a, err := c.Infer(&wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: &obs})
	if err != nil {
		t.Fatalf("a float64 action of the declared shape [%d, 2, %d]: %v", h, d, err)
	}
	if a.Horizon() != h || a.Envs() != 2 || a.Chunk.DType != wire.Float64 {
		t.Fatalf("action %s %v", a.Chunk.DType, a.Chunk.Shape)
	}
}

// TestDisableReuse: Options.DisableReuse keeps the client from using
// reuse-feedback-obs even when the server lists it: ReuseOffered and
// CanReuse say no, so a runner never sets a reuse flag, and an infer that
// sets one is refused before anything is sent. A mutant ignoring the
// option survived every other test.
func TestDisableReuse(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Features: []string{client.FeatureReuse}})
	c := dial(t, url, func(o *client.Options) { o.DisableReuse = true })
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	if c.ReuseOffered() || c.CanReuse(0) {
		t.Fatalf("DisableReuse: ReuseOffered %v, CanReuse(0) %v; want both false", c.ReuseOffered(), c.CanReuse(0))
	}
	if _, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: []bool{true}}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an infer reusing with DisableReuse: %v, want invalid", err)
	}
	if st := s.Stats(); st.ReusedRows != 0 {
		t.Fatalf("the server took %d reused rows", st.ReusedRows)
	}
}

// TestLongEnvIDsTakeNoMemory: an action whose env_ids list is longer than
// the infer's env count is refused before memory is taken for it. The
// wire decoder does so only when told the count (Action.MaxEnvIDs); a
// mutant in which Infer no longer told it survived, since the reply is
// refused as a protocol error either way, only later: after 8 bytes of
// heap per claimed id, 32 MiB for this 4 MiB message, 512 MiB for one at
// the 64 MiB default cap (DESIGN: memory follows bytes received, never
// numbers a server claims).
func TestLongEnvIDsTakeNoMemory(t *testing.T) {
	const ids = 4 << 20
	var act wire.Message
	act.Map(2)
	act.Str("message_type")
	act.Str(wire.TypeAction)
	act.Str("data")
	act.Map(2)
	act.Str("env_ids")
	if err := act.Array(&wire.Array{DType: wire.Uint8, Shape: []int{ids}, Data: make([]byte, ids)}); err != nil {
		t.Fatal(err)
	}
	act.Str("action")
	if err := act.Array(&wire.Array{DType: wire.Float32, Shape: []int{1, 1, 1}, Data: make([]byte, 4)}); err != nil {
		t.Fatal(err)
	}
	act.Finish()
	actBytes := act.AppendTo(nil)
	var meta wire.Message
	if err := wire.EncodeMetadata(&meta, &wire.Metadata{}); err != nil { // no shape: the 64 MiB default cap
		t.Fatal(err)
	}
	metaBytes := meta.AppendTo(nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer nc.Close()
		if wsutil.WriteServerBinary(nc, metaBytes) != nil {
			return
		}
		if _, err := wsutil.ReadClientBinary(nc); err != nil {
			return
		}
		_ = wsutil.WriteServerBinary(nc, actBytes)
		_, _ = io.Copy(io.Discard, nc)
	}))
	defer srv.Close()
	c := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"), func(o *client.Options) { o.MaxReconnects = -1 })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := newWorld().infer(c)
	runtime.ReadMemStats(&after)
	// The decoder's own refusal, which it gives only when told the
	// infer's env count (a later check refuses the same reply in other
	// words, after decoding every id).
	if !errors.Is(err, client.ErrProtocol) || !strings.Contains(err.Error(), "action.data.env_ids") {
		t.Fatalf("env_ids of %d entries for an infer of 1 env: %v, want the decoder's protocol error (action.data.env_ids)", ids, err)
	}
	// Receiving it takes about 12 MiB (the buffer grows by doubling as
	// bytes arrive); the ids would take 32 MiB more. A loose second check:
	// the whole process's allocations count here.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 24<<20 {
		t.Errorf("refusing a %d-byte action with %d env_ids took %d bytes of heap", len(actBytes), ids, grew)
	}
}

// wsServer starts a WebSocket server on 127.0.0.1 whose connections, numbered
// from 1, are handed to script; it returns the ws:// URL and the count of
// connections so far.
func wsServer(t *testing.T, script func(k int, nc net.Conn)) (string, *atomic.Int32) {
	t.Helper()
	conns := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer nc.Close()
		script(int(conns.Add(1)), nc)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), conns
}

// TestMetadataCapByDefault: with MaxMessageSize zero the metadata message
// is capped at DefaultMaxMetadataSize, refused from its frame header. A
// mutant that left metadata uncapped survived: every other test's server
// sends small metadata, or lies in an action. Uncapped, this client would
// wait for (and take memory for) whatever a server sends first.
func TestMetadataCapByDefault(t *testing.T) {
	url, _ := wsServer(t, func(_ int, nc net.Conn) {
		_ = ws.WriteHeader(nc, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: client.DefaultMaxMetadataSize + 1})
		_, _ = nc.Write(make([]byte, 1024))
		_, _ = io.Copy(io.Discard, nc)
	})
	_, err := client.Dial(context.Background(), client.Options{URL: url, MetadataTimeout: 10 * time.Second})
	if !errors.Is(err, client.ErrProtocol) {
		t.Fatalf("metadata of %d bytes: %v, want a protocol error (message too big)", client.DefaultMaxMetadataSize+1, err)
	}
}

// TestStopWhileReconnecting: a server whose fresh connection ends the run
// (1001 plugrl-server-stop) before its metadata stops the client's
// reconnect there: SPEC 7.1, exit rather than reconnect. A mutant that
// went on to its next attempt survived, since every other test's server
// sends its metadata before its stop.
func TestStopWhileReconnecting(t *testing.T) {
	url, conns := wsServer(t, func(k int, nc net.Conn) {
		if k > 1 {
			_ = ws.WriteFrame(nc, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, client.ReasonStop)))
			_, _ = io.Copy(io.Discard, nc)
			return
		}
		var m wire.Message
		if err := wire.EncodeMetadata(&m, &wire.Metadata{}); err != nil {
			t.Error(err)
			return
		}
		_ = wsutil.WriteServerBinary(nc, m.AppendTo(nil))
		if _, err := wsutil.ReadClientBinary(nc); err != nil { // the infer
			return
		}
		_ = ws.WriteFrame(nc, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, client.ReasonResync)))
		_, _ = io.Copy(io.Discard, nc)
	})
	c := dial(t, url, func(o *client.Options) { o.MaxReconnects = 4 })
	// KindOf, not errors.Is: a KindConnect that gave up after attempts
	// that each met the stop wraps a KindStopped, which errors.Is finds.
	_, err := newWorld().infer(c)
	if client.KindOf(err) != client.KindStopped {
		t.Fatalf("a resync, then a stop on the reconnect: %v, want stopped", err)
	}
	if _, err := newWorld().infer(c); client.KindOf(err) != client.KindStopped {
		t.Fatalf("an infer after the stop: %v, want stopped again, with no reconnect", err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("the client opened %d connections; want 2, none after the stop", n)
	}
}

// TestGiveUpOwedAfterClose: GiveUpOwed on a closed client gives nothing up
// and says why (KindClosed), as a runner's first Act then returns it.
func TestGiveUpOwedAfterClose(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 3})
	c := dial(t, url, nil)
	if err := c.GiveUpOwed(); err != nil {
		t.Fatalf("GiveUpOwed on an open client: %v", err)
	}
	_ = c.Close()
	if err := c.GiveUpOwed(); client.KindOf(err) != client.KindClosed {
		t.Fatalf("GiveUpOwed after Close: %v; want KindClosed", err)
	}
}
