package refserver_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// zeroWidthStates is an observation of rows rows and k states of shape
// [rows, 0]: many arrays in few bytes.
func zeroWidthStates(rows, k int) *wire.Observation {
	o := &wire.Observation{}
	for j := 0; j < k; j++ {
		o.States = append(o.States, wire.NamedArray{Name: fmt.Sprintf("s%d", j), Array: wire.Array{DType: wire.Float64, Shape: []int{rows, 0}, Data: []byte{}}})
	}
	return o
}

// TestReuseCacheMemory: with reuse-feedback-obs, what the server keeps of
// a feedback's observation, and what it builds for an infer that reuses
// it, follows the bytes received. A 100 KB feedback of 2000 envs and 1000
// zero-width arrays used to be split into a copy per row and per array:
// 187 MB, and the reusing infer compared names row by row.
func TestReuseCacheMemory(t *testing.T) {
	pol := &shapes{}
	s, url := start(t, refserver.Config{Features: []string{refserver.FeatureReuseFeedbackObs}, Policy: pol, Logf: func(string, ...any) {}})
	c := dial(t, url)
	const m, k = 2000, 1000
	envs := make([]int64, m)
	for i := range envs {
		envs[i] = int64(i)
	}
	obs := zeroWidthStates(m, k)
	if err := wire.EncodeInfer(&c.msg, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, m), Obs: obs}); err != nil {
		t.Fatal(err)
	}
	c.send(c.msg.AppendTo(nil))
	if _, _, err := c.recv(); err != nil {
		t.Fatal(err)
	}
	err := wire.EncodeFeedback(&c.msg, &wire.Feedback{EnvIndices: envs, StepIDs: make([]int64, m), Obs: obs,
		Rewards: make([]float32, m), Terminated: make([]bool, m), Truncated: make([]bool, m)})
	if err != nil {
		t.Fatal(err)
	}
	fb := c.msg.AppendTo(nil)
	reuse := make([]bool, m)
	for i := range reuse {
		reuse[i] = true
	}
	if err := wire.EncodeInfer(&c.msg, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, m), Obs: zeroWidthStates(0, k), Reuse: reuse}); err != nil {
		t.Fatal(err)
	}
	in := c.msg.AppendTo(nil)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c.send(fb)
	c.send(in)
	if _, _, err := c.recv(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// Decoding and recording each message costs a few times its size; the
	// old per-row copies cost 1000 times as much.
	limit := uint64(64 * (len(fb) + len(in)))
	if grew := after.TotalAlloc - before.TotalAlloc; grew > limit {
		t.Errorf("a %d-byte feedback and a %d-byte infer reusing it allocated %d MB; want under %d MB", len(fb), len(in), grew>>20, limit>>20)
	}
	if st := s.Stats(); st.ReusedRows != m {
		t.Fatalf("reused rows %d, want %d", st.ReusedRows, m)
	}
	if got := pol.last(); got.states != k || got.rows != m {
		t.Fatalf("the policy saw %d states of %d rows, want %d of %d", got.states, got.rows, k, m)
	}
}

// shapes is a policy that keeps the shape of the last observation it saw.
type shapes struct {
	refserver.ZeroPolicy
	mu   sync.Mutex
	seen struct{ states, rows int }
}

func (p *shapes) Act(conn int, ids []int64, o *wire.Observation, out *wire.Array) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen.states, p.seen.rows = len(o.States), -1
	if len(o.States) > 0 {
		p.seen.rows = o.States[len(o.States)-1].Array.Len()
	}
	return nil
}

func (p *shapes) last() struct{ states, rows int } {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// TestReuseManyBatches: an infer that reuses rows of many cached
// feedbacks (here 1000, one env each, 500 zero-width states) costs what
// the observation it builds costs, not an index of every array per batch:
// a review measured 100 MB for 20 such infers.
func TestReuseManyBatches(t *testing.T) {
	s, url := start(t, refserver.Config{Features: []string{refserver.FeatureReuseFeedbackObs}, Logf: func(string, ...any) {}})
	c := dial(t, url)
	// 1000 exchanges of 500 names: over 20 s under qemu (cross_arm64).
	_ = c.nc.SetDeadline(time.Now().Add(3 * time.Minute))
	const m, k = 1000, 500
	one := zeroWidthStates(1, k)
	for i := int64(0); i < m; i++ {
		env := []int64{i}
		if err := wire.EncodeInfer(&c.msg, &wire.Infer{EnvIndices: env, StepIDs: []int64{0}, Obs: one}); err != nil {
			t.Fatal(err)
		}
		c.send(c.msg.AppendTo(nil))
		if _, _, err := c.recv(); err != nil {
			t.Fatal(err)
		}
		err := wire.EncodeFeedback(&c.msg, &wire.Feedback{EnvIndices: env, StepIDs: []int64{0}, Obs: one,
			Rewards: []float32{0}, Terminated: []bool{false}, Truncated: []bool{false}})
		if err != nil {
			t.Fatal(err)
		}
		c.send(c.msg.AppendTo(nil))
	}
	envs, reuse := make([]int64, m), make([]bool, m)
	for i := range envs {
		envs[i], reuse[i] = int64(i), true
	}
	if err := wire.EncodeInfer(&c.msg, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, m), Obs: zeroWidthStates(0, k), Reuse: reuse}); err != nil {
		t.Fatal(err)
	}
	in := c.msg.AppendTo(nil)
	waitFor(t, s, "the feedbacks", func(st refserver.Stats) bool { return st.Exchanges == m })
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c.send(in)
	if _, _, err := c.recv(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// The observation built (500 arrays of 1000 rows: names, shapes, empty
	// data), the infer's decoding and the action took 1.3 MB; an index per
	// batch, 500 ints each, added 4 MB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2<<20 {
		t.Errorf("a %d-byte infer reusing %d cached feedbacks allocated %d KB; want under 2048 KB", len(in), m, grew>>10)
	}
	if st := s.Stats(); st.ReusedRows != m {
		t.Fatalf("reused rows %d, want %d", st.ReusedRows, m)
	}
}
