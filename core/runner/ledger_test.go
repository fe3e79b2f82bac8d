package runner_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestLedgerOfARealRun records a runner's run with reuse-feedback-obs on,
// at both levels. Through a resync (feedback held and dropped), a cut TCP
// connection and the server's stop, the ledger audits clean and names each
// close, why, and what it dropped. Without faults, its episode log equals
// the server's. (With them it need not: a feedback the client wrote just
// as the server closed was sent, and is in the ledger, but the server
// never took it; compare shows exactly those.)
func TestLedgerOfARealRun(t *testing.T) {
	for _, level := range []ledger.Level{ledger.Digest, ledger.Full} {
		for _, faults := range []bool{true, false} {
			name := level.String() + "/clean"
			if faults {
				name = level.String() + "/faults"
			}
			t.Run(name, func(t *testing.T) { ledgerRun(t, level, faults) })
		}
	}
}

func ledgerRun(t *testing.T, level ledger.Level, faults bool) {
	var serverLog bytes.Buffer
	cfg := refserver.Config{Horizon: 4, ActionDim: 2, Features: []string{client.FeatureReuse}, EpisodeLog: &serverLog}
	if faults {
		cfg.StopAfter = 60
		cfg.Faults.Closes = []refserver.CloseFault{
			{Exchange: 10, When: refserver.AfterAction, Code: 1001, Reason: client.ReasonResync},
			{Exchange: 30, When: refserver.AfterAction, Drop: true},
		}
	}
	s := refserver.New(cfg)
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(t.TempDir(), "run.ledger")
	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second,
		ReconnectBackoff: time.Millisecond, LedgerPath: path, LedgerLevel: level, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	r, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	t0 := make([]float64, n)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "t", Array: wire.Array{DType: wire.Float64, Shape: []int{n, 1}, Data: wire.BytesOf(t0)}}}}
	out := &wire.Array{DType: wire.Float32, Shape: []int{n, 2}, Data: make([]byte, 4*n*2)}
	rewards := []float64{1, 0.5, 0.25}
	term, none := make([]bool, n), make([]bool, n)
	for step := 0; step < 200; step++ {
		if err := r.Act(obs, out); errors.Is(err, client.ErrStopped) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for i := range t0 {
			t0[i]++
			term[i] = int(t0[i]) == 3+3*i
		}
		if err := r.Report(obs, rewards, term, none, nil); errors.Is(err, client.ErrStopped) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for i := range t0 {
			if term[i] {
				t0[i] = 0
			}
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	a, sum := ledgertool.NewAuditor(), ledgertool.NewSummary()
	truncated, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { a.Add(ev); sum.Add(ev); return nil })
	if err != nil || truncated {
		t.Fatalf("reading the ledger: %v, truncated %v", err, truncated)
	}
	if len(a.Violations) != 0 {
		t.Fatalf("a correct run's ledger has violations: %v", a.Violations)
	}
	if !sum.Clean {
		t.Fatal("the ledger has no end record")
	}
	if !faults {
		server, err := ledgertool.ReadEpisodes(&serverLog)
		if err != nil {
			t.Fatal(err)
		}
		if d := ledgertool.CompareEpisodes(a.Episodes, server); len(d) != 0 || len(server) < 50 {
			t.Fatalf("%d episodes in the ledger, %d in the server's log; differences: %+v", len(a.Episodes), len(server), d)
		}
		return
	}
	if sum.Connections != 3 || sum.Reconnects["resync"] != 1 || sum.Reconnects["lost"] != 1 {
		t.Fatalf("summary: %d connections, reconnects %v", sum.Connections, sum.Reconnects)
	}
	dropped := c.Stats().FeedbackRowsDropped
	if sum.Closes[`server 1001 "plugrl-server-resync"`] != 1 || sum.Closes[`server 1001 "plugrl-server-stop"`] != 1 || uint64(sum.FeedbackDropped) != dropped || dropped == 0 {
		t.Fatalf("closes %v, %d feedback rows dropped; the client counted %d", sum.Closes, sum.FeedbackDropped, dropped)
	}
}
