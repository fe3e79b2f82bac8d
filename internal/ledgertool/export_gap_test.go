package ledgertool_test

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// TestExportAcrossLostRecords: a full ledger whose queue dropped an infer
// (a record larger than the queue: here a long text observation, at any
// rate a burst) keeps the action that answered it, after a lost record.
// Export gave that action to the envs of the last infer it had seen, so
// env 0, still holding its own chunk, took env 1's new chunk, and its
// next row stacked its observation with another env's actions. After a
// gap, what an env holds is unknown until its next infer and action:
// such a row is not exported (as the audit checks nothing across a gap).
func TestExportAcrossLostRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: ledger.Full, QueueBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var meta wire.Message
	if err := wire.EncodeMetadata(&meta, &wire.Metadata{}); err != nil {
		t.Fatal(err)
	}
	w.Connected("ws://127.0.0.1:1", "127.0.0.1:1", meta.AppendTo(nil))
	obs := func(text string, v ...float32) *wire.Observation {
		o := stateObs(v)
		if text != "" {
			o.Text = []string{text}
		}
		return o
	}
	infer := func(envs []int64, o *wire.Observation) {
		var m wire.Message
		if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, len(envs)), Obs: o}); err != nil {
			t.Fatal(err)
		}
		w.Sent(&m, o)
	}
	action := func(envs []int64, first ...float32) { // [2, n, 1]: env j's steps are first[j], first[j]+1
		n := len(envs)
		chunk := make([]float32, 2*n)
		for j := range n {
			chunk[j], chunk[n+j] = first[j], first[j]+1
		}
		var m wire.Message
		if err := wire.EncodeAction(&m, envs, &wire.Array{DType: wire.Float32, Shape: []int{2, n, 1}, Data: wire.BytesOf(chunk)}); err != nil {
			t.Fatal(err)
		}
		w.Received(m.AppendTo(nil))
	}
	feedback := func(envs []int64, o *wire.Observation) {
		n := len(envs)
		rewards := make([]float32, n)
		for i := range rewards {
			rewards[i] = 1
		}
		var m wire.Message
		if err := wire.EncodeFeedback(&m, &wire.Feedback{EnvIndices: envs, StepIDs: make([]int64, n), Obs: o,
			Rewards: rewards, Terminated: make([]bool, n), Truncated: make([]bool, n)}); err != nil {
			t.Fatal(err)
		}
		w.Sent(&m, o)
	}
	both, one := []int64{0, 1}, []int64{1}
	infer(both, obs("", 10, 11))
	action(both, 0, 100)
	feedback(one, obs("", 21))                                 // env 0 still holds its chunk, 0 and 1
	infer(one, obs(strings.Repeat("long prompt ", 4<<10), 21)) // 48 KiB: never recorded
	action(one, 200)                                           // recorded, after a lost record
	feedback(both, obs("", 20, 22))
	infer(both, obs("", 20, 22))
	action(both, 300, 400)
	feedback(both, obs("", 30, 32))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := ledgertool.NewSummary()
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { s.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if s.Lost != 1 {
		t.Fatalf("%d records lost; the test needs the long infer, and only it, lost", s.Lost)
	}
	dir := t.TempDir()
	if err := export(path, dir); err != nil {
		t.Fatal(err)
	}
	values := func(file string, size int) (v []float64) {
		_, _, d := readNpy(t, filepath.Join(dir, file))
		for i := 0; i+size <= len(d); i += size {
			if size == 4 {
				v = append(v, float64(math.Float32frombits(binary.LittleEndian.Uint32(d[i:]))))
			} else {
				v = append(v, math.Float64frombits(binary.LittleEndian.Uint64(d[i:])))
			}
		}
		return v
	}
	// Each row: the observation its chunk started from, and that chunk.
	for _, want := range []struct {
		env       string
		obs, acts []float64
	}{
		{"env0", []float64{20}, []float64{300, 301}},
		{"env1", []float64{11, 22}, []float64{100, 101, 400, 401}},
	} {
		obs, acts := values(want.env+"_states.x.npy", 4), values(want.env+"_action.npy", 8)
		if !slices.Equal(obs, want.obs) || !slices.Equal(acts, want.acts) {
			t.Errorf("%s: observations %v with actions %v; want %v with %v", want.env, obs, acts, want.obs, want.acts)
		}
	}
}
