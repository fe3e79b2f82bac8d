package client_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// workload is one exchange's arrays, filled once, as a real env would hand
// them over: the numbers measure the library, not an environment.
type workload struct {
	obs   wire.Observation
	infer wire.Infer
	fb    wire.Feedback
}

func newWorkload(envs, cams, img, state int, text bool) *workload {
	w := &workload{}
	for c := 0; c < cams; c++ {
		pix := make([]byte, envs*img*img*3)
		for i := range pix {
			pix[i] = byte(i * 7)
		}
		w.obs.Images = append(w.obs.Images, wire.NamedArray{Name: "cam" + string(rune('0'+c)), Array: wire.Array{DType: wire.Uint8, Shape: []int{envs, img, img, 3}, Data: pix}})
	}
	st := make([]float64, envs*state)
	w.obs.States = []wire.NamedArray{{Name: "state", Array: wire.Array{DType: wire.Float64, Shape: []int{envs, state}, Data: wire.BytesOf(st)}}}
	if text {
		for i := 0; i < envs; i++ {
			w.obs.Text = append(w.obs.Text, "pick up the red block")
		}
	}
	idx := make([]int64, envs)
	for i := range idx {
		idx[i] = int64(i)
	}
	zeros := make([]int64, envs)
	flags := make([]bool, envs)
	w.infer = wire.Infer{EnvIndices: idx, StepIDs: zeros, Obs: &w.obs}
	w.fb = wire.Feedback{EnvIndices: idx, StepIDs: zeros, Obs: &w.obs, Rewards: make([]float32, envs), Terminated: flags, Truncated: flags}
	return w
}

var workloads = []struct {
	name                    string
	envs, cams, img, states int
	text                    bool
}{
	{"SMALL", 1, 0, 0, 8, false},
	{"LARGE", 16, 2, 224, 32, true},
}

func exchange(tb testing.TB, c *client.Client, w *workload) {
	if _, err := c.Infer(&w.infer); err != nil {
		tb.Fatal(err)
	}
	if err := c.Feedback(&w.fb); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkExchange is one infer/action/feedback cycle against the
// reference server on loopback (H=8, D=7).
// The /ledger=digest and /ledger=full cases record a ledger on the way.
func BenchmarkExchange(b *testing.B) {
	for _, wl := range workloads {
		for _, lv := range ledgerCases {
			b.Run(lv.name(wl.name), func(b *testing.B) {
				c := dial(b, childServer(b), lv.options(b))
				w := newWorkload(wl.envs, wl.cams, wl.img, wl.states, wl.text)
				exchange(b, c, w) // warm the buffers
				b.SetBytes(int64(2 * (wl.envs*wl.cams*wl.img*wl.img*3 + wl.envs*wl.states*8)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					exchange(b, c, w)
				}
			})
		}
	}
}

// ledgerCase is a benchmark or allocation test's ledger: none, or one at
// a level, written to the test's temporary directory.
type ledgerCase struct {
	on    bool
	level ledger.Level
}

var ledgerCases = []ledgerCase{{false, 0}, {true, ledger.Digest}, {true, ledger.Full}}

func (lc ledgerCase) options(tb testing.TB) func(*client.Options) {
	if !lc.on {
		return nil
	}
	return func(o *client.Options) {
		o.LedgerPath = filepath.Join(tb.TempDir(), "bench.ledger")
		o.LedgerLevel = lc.level
	}
}

func (lc ledgerCase) name(workload string) string {
	if !lc.on {
		return workload
	}
	return workload + "/ledger=" + lc.level.String()
}

// TestExchangeAllocs proves that a steady-state exchange allocates nothing
// on the Go heap on the client side.
func TestExchangeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, wl := range workloads {
		for _, lv := range ledgerCases {
			t.Run(lv.name(wl.name), func(t *testing.T) {
				c := dial(t, childServer(t), lv.options(t))
				w := newWorkload(wl.envs, wl.cams, wl.img, wl.states, wl.text)
				exchange(t, c, w)
				// A ledger reaches its steady state once its writer has
				// flushed a few blocks: both queue buffers have grown to
				// an interval's records and zstd has built its tables.
				for start := time.Now(); lv.on && time.Since(start) < 400*time.Millisecond; {
					exchange(t, c, w)
				}
				// AllocsPerRun counts the whole process's allocations,
				// and the ledger's writer may grow or trim a buffer while
				// the 50 exchanges run (seen once, with the machine
				// loaded: LARGE at full level). An allocation of the
				// exchange itself happens on every run, so it shows in
				// each of three measurements: the fewest is the
				// exchange's.
				allocs := testing.AllocsPerRun(50, func() { exchange(t, c, w) })
				for try := 1; try < 3 && allocs != 0; try++ {
					allocs = min(allocs, testing.AllocsPerRun(50, func() { exchange(t, c, w) }))
				}
				if allocs != 0 {
					t.Fatalf("%s exchange allocates %v times", lv.name(wl.name), allocs)
				}
			})
		}
	}
}
