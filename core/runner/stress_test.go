package runner_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestStressInterruptsAndCloses runs a runner in a tight loop against a
// server that ends connections at every point of the exchange (resyncs,
// drops, plain closes, feedback timeouts), while another goroutine
// interrupts the client at random moments and a third reads the stats.
// Whatever lands where, nothing the protocol forbids may reach the wire:
// the server sees no feedback for an env without an action on its
// connection (SPEC 7.6) and refuses no message, and the client's own
// ledger of the run audits clean. Interrupts landing as a call completes
// are what broke the feedback owed (f52c878); a seeded schedule of closes
// and a random one of interrupts cover the windows between.
func TestStressInterruptsAndCloses(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of random interrupts")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var closes []refserver.CloseFault
	for k := 5; k < 4000; k += 3 + rng.IntN(20) {
		f := refserver.CloseFault{Exchange: k, When: refserver.Point(rng.IntN(3))}
		switch rng.IntN(4) {
		case 0:
			f.Code, f.Reason = 1001, client.ReasonResync
		case 1:
			f.Drop = true
		case 2:
			f.Code = 1000
		case 3:
			f.Code, f.Reason = 1001, client.ReasonFeedbackTimeout
		}
		closes = append(closes, f)
	}
	s := refserver.New(refserver.Config{Horizon: 3, ActionDim: 2, Features: []string{client.FeatureReuse},
		FeedbackTimeout: 5 * time.Second, Faults: refserver.Faults{Closes: closes}})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	path := filepath.Join(t.TempDir(), "stress.ledger")
	c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second,
		ReconnectBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, LedgerPath: path})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	r, err := runner.New(c, runner.Config{Envs: n, MaxRestarts: 50})
	if err != nil {
		t.Fatal(err)
	}
	state := make([]float64, n)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "t", Array: wire.Array{DType: wire.Float64, Shape: []int{n, 1}, Data: wire.BytesOf(state)}}}}
	out := &wire.Array{DType: wire.Float32, Shape: []int{n, 2}, Data: make([]byte, n*2*4)}
	rewards, done, none := []float64{1, 1, 1}, make([]bool, n), make([]bool, n)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acts atomic.Int64 // acts that returned an action
	wg.Add(2)
	go func() { // the interrupter
		defer wg.Done()
		irng := rand.New(rand.NewPCG(3, 4))
		last := int64(0)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(irng.IntN(3000)) * time.Microsecond):
				// At a random moment, but only after a few acts since the
				// last interrupt: on a slow machine (arm64 under qemu)
				// interrupts every few milliseconds left nothing else.
				if n := acts.Load(); n-last >= int64(1+irng.IntN(8)) {
					last = n
					c.Interrupt()
				}
			}
		}
	}()
	go func() { // a monitor reading the stats as a control loop's UI would
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Microsecond):
				_, _ = c.Stats(), r.Stats()
			}
		}
	}()
	allowed := func(err error) bool {
		switch client.KindOf(err) {
		case client.KindInterrupted, client.KindConnect, client.KindTimeout:
			return true
		}
		return false
	}
	errs := map[client.Kind]int{}
	// 3 s, and 300 acts at least (at most 20 s: a slow machine's).
	start := time.Now()
	for d := time.Duration(0); d < 3*time.Second || acts.Load() < 300 && d < 20*time.Second; d = time.Since(start) {
		if err := r.Act(obs, out); err != nil {
			if !allowed(err) {
				t.Fatalf("act: %v", err)
			}
			errs[client.KindOf(err)]++
			continue
		}
		acts.Add(1)
		for i := range state {
			state[i]++
			done[i] = rng.IntN(7) == 0
		}
		if err := r.Report(obs, rewards, done, none, nil); err != nil {
			if !allowed(err) {
				t.Fatalf("report: %v", err)
			}
			errs[client.KindOf(err)]++
		}
		for i := range state {
			if done[i] {
				state[i] = 0
			}
		}
	}
	close(stop)
	wg.Wait()
	r.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("server: %d connections, %d exchanges, %d resyncs; client errors %v; client stats %+v", st.Connections, st.Exchanges, st.Resyncs, errs, c.Stats())
	if st.Exchanges < 100 || errs[client.KindInterrupted] < 10 {
		t.Fatalf("the run did too little to test anything: %d exchanges, %d interrupted calls", st.Exchanges, errs[client.KindInterrupted])
	}
	if st.Orphans != 0 {
		t.Errorf("the server saw %d feedback rows for envs without an action on their connection (SPEC 7.6)", st.Orphans)
	}
	crossed := 0
	for _, m := range st.Received {
		switch m.Refused {
		case "":
		case "arrived after the server's close frame":
			crossed++ // sent as the server's close was on its way: no client can know
		default:
			t.Errorf("the server refused a message: %+v", m)
		}
	}
	t.Logf("%d messages crossed the server's close frame", crossed)
	a := ledgertool.NewAuditor()
	truncated, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { a.Add(ev); return nil })
	if err != nil || truncated {
		t.Fatalf("reading the ledger: %v (truncated %v)", err, truncated)
	}
	for i, v := range a.Violations {
		if i == 10 {
			break
		}
		t.Errorf("audit: %v", v)
	}
}
