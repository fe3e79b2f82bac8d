package cem

import (
	"encoding/binary"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

// f64 is a float64 array of shape, holding vs.
func f64(shape []int, vs ...float64) wire.Array {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.NativeEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return wire.Array{DType: wire.Float64, Shape: shape, Data: b}
}

// synthetic is a batch of n envs of a tiny task: the observation is two
// states, "b" [n, 1] and "a" [n, 2] (given out of name order), drawn at
// random every step; the reward of a step is -(u - target)^2 for the action
// u, with target = 2 a0 - a1 + 0.5 b; an episode lasts 5 steps.
type synthetic struct {
	n    int
	rng  *rand.Rand
	a, b []float64
	t    []int
}

func newSynthetic(n int, seed int64) *synthetic {
	s := &synthetic{n: n, rng: rand.New(rand.NewSource(seed)), a: make([]float64, 2*n), b: make([]float64, n), t: make([]int, n)}
	for i := 0; i < n; i++ {
		s.draw(i)
	}
	return s
}

func (s *synthetic) draw(i int) {
	s.a[2*i], s.a[2*i+1], s.b[i] = s.rng.Float64()*2-1, s.rng.Float64()*2-1, s.rng.Float64()*2-1
}

func (s *synthetic) obs() *wire.Observation {
	return &wire.Observation{States: []wire.NamedArray{
		{Name: "b", Array: f64([]int{s.n, 1}, s.b...)},
		{Name: "a", Array: f64([]int{s.n, 2}, s.a...)},
	}}
}

// step applies the actions and returns the feedback; envs with an even
// index send info.episode, the others only rewards.
func (s *synthetic) step(u []float64, ret []float64) *wire.FeedbackMsg {
	fb := &wire.FeedbackMsg{EnvIndices: make([]int64, s.n), Rewards: make([]float64, s.n),
		Terminated: make([]bool, s.n), Truncated: make([]bool, s.n),
		Episode: &wire.Episode{Return: make([]float64, s.n), Length: make([]int64, s.n), Mask: make([]bool, s.n)}}
	for i := 0; i < s.n; i++ {
		target := 2*s.a[2*i] - s.a[2*i+1] + 0.5*s.b[i]
		r := -(u[i] - target) * (u[i] - target)
		fb.EnvIndices[i] = int64(i)
		fb.Rewards[i] = r
		ret[i] += r
		s.t[i]++
		s.draw(i)
		if s.t[i] == 5 {
			fb.Truncated[i] = true
			if i%2 == 0 {
				fb.Episode.Return[i], fb.Episode.Length[i], fb.Episode.Mask[i] = ret[i], 5, true
			}
			s.t[i], ret[i] = 0, 0
		}
	}
	return fb
}

// run drives l with n synthetic envs until it has finished iters iterations.
func run(t *testing.T, l *Learner, n, iters int) {
	t.Helper()
	env := newSynthetic(n, 7)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	ret := make([]float64, n)
	for step := 0; len(l.Iterations()) < iters; step++ {
		if step > 100000 {
			t.Fatalf("no progress: %d iterations after %d steps", len(l.Iterations()), step)
		}
		out := wire.Array{DType: wire.Float64, Shape: []int{1, n, 1}, Data: make([]byte, 8*n)}
		if err := l.Act(0, ids, env.obs(), &out); err != nil {
			t.Fatal(err)
		}
		u := make([]float64, n)
		for i := range u {
			u[i] = out.Float64(i)
		}
		if err := l.Feedback(0, env.step(u, ret)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLearnsSyntheticTask(t *testing.T) {
	var table strings.Builder
	l := New(Config{Population: 24, Seed: 1, Out: &table})
	run(t, l, 6, 25)
	its := l.Iterations()
	first, last := its[0], its[len(its)-1]
	t.Logf("\n%s", table.String())
	if !(last.Mean > -0.05 && first.Mean < 10*last.Mean) {
		t.Errorf("mean return went from %.3f to %.3f; want it near 0", first.Mean, last.Mean)
	}
	// Parameters: W over the features in name order (a0, a1, b), then the bias.
	want := []float64{2, -1, 0.5, 0}
	got := l.Mean()
	for i := range want {
		if math.Abs(got[i]-want[i]) > 0.1 {
			t.Errorf("mean parameters %.3f, want %v", got, want)
			break
		}
	}
	if !strings.Contains(table.String(), "elite-mean") || strings.Count(table.String(), "\n") != 25+2 {
		t.Errorf("table:\n%s", table.String())
	}
}

func TestDeterministic(t *testing.T) {
	a, b := New(Config{Population: 8, Seed: 3}), New(Config{Population: 8, Seed: 3})
	run(t, a, 3, 4)
	run(t, b, 3, 4)
	ha, hb := a.Iterations(), b.Iterations()
	for i := range ha {
		ha[i].Seconds, hb[i].Seconds = 0, 0
		if ha[i] != hb[i] {
			t.Fatalf("iteration %d: %+v vs %+v", i+1, ha[i], hb[i])
		}
	}
}

// The score is info.episode.r when the feedback has it, else the summed
// rewards; envs beyond the population run the mean, unscored; a closed
// connection's candidates go to the next env that starts an episode.
func TestScoringAndAssignment(t *testing.T) {
	l := New(Config{Population: 2})
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: f64([]int{3, 1}, 0, 0, 0)}}}
	out := wire.Array{DType: wire.Float64, Shape: []int{1, 3, 1}, Data: make([]byte, 24)}
	if err := l.Act(1, []int64{0, 1, 2}, obs, &out); err != nil {
		t.Fatal(err)
	}
	if got := []int{l.envs[key{1, 0}].cand, l.envs[key{1, 1}].cand, l.envs[key{1, 2}].cand}; got[0] != 0 || got[1] != 1 || got[2] != -1 {
		t.Fatalf("candidates %v, want [0 1 -1]", got)
	}
	l.ConnClosed(1)
	obs1 := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: f64([]int{1, 1}, 0)}}}
	out1 := wire.Array{DType: wire.Float64, Shape: []int{1, 1, 1}, Data: make([]byte, 8)}
	for env := int64(5); env < 7; env++ {
		if err := l.Act(2, []int64{env}, obs1, &out1); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := l.envs[key{2, 5}].cand, l.envs[key{2, 6}].cand; a != 0 || b != 1 {
		t.Fatalf("after the close, candidates %d %d, want 0 1", a, b)
	}
	// Env 5: two chunks of reward 3, and episode stats saying 100.
	fb := func(env int64, r float64, done bool, ep *wire.Episode) *wire.FeedbackMsg {
		return &wire.FeedbackMsg{EnvIndices: []int64{env}, Rewards: []float64{r}, Terminated: []bool{done},
			Truncated: []bool{false}, Episode: ep}
	}
	for _, m := range []*wire.FeedbackMsg{
		fb(5, 3, false, nil),
		fb(5, 3, true, &wire.Episode{Return: []float64{100}, Mask: []bool{true}}),
		fb(6, 4, false, nil),
		fb(6, 4, true, &wire.Episode{Return: []float64{1000}, Mask: []bool{false}}), // masked out: sum 8
	} {
		if err := l.Feedback(2, m); err != nil {
			t.Fatal(err)
		}
	}
	its := l.Iterations()
	if len(its) != 1 || its[0].Best != 100 || its[0].Mean != 54 || its[0].Episodes != 2 {
		t.Fatalf("iterations %+v, want one with best 100, mean 54", its)
	}
	// A different observation width is an error (the connection closes).
	obs2 := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: f64([]int{1, 2}, 0, 0)}}}
	if err := l.Act(2, []int64{5}, obs2, &out1); err == nil || !strings.Contains(err.Error(), "want 1 and 1") {
		t.Fatalf("err %v", err)
	}
}
