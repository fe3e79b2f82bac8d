// Package cem is a small learner for the reference server: the
// cross-entropy method over linear policies, scored by the episode returns
// that come back in feedback. It is a demo and a test partner, kept small:
// `plugrl serve --policy cem` trains a native env client through PlugRL.
//
// The policy is linear in the observation: action[d] = b[d] + sum_i
// W[d][i] x[i], where x concatenates every state array of the observation
// (in name order, each row flattened; images and text are ignored). Its
// parameters theta = (W, b) are drawn from a diagonal Gaussian. Each
// iteration draws Population parameter vectors, runs each for one episode,
// keeps the best EliteFrac of them by episode return, and refits the
// Gaussian's mean and standard deviation to those elites (plus a little
// constant noise, so that the search does not collapse too early).
//
// Which candidate an env runs: env episodes are tracked per (connection,
// env index). The first infer of an episode (for an env never seen, or the
// first after a feedback that ended its episode) assigns the lowest-numbered
// candidate of the current iteration that no env runs yet; when every
// candidate is taken, the env runs the current mean while it waits, and that
// episode's return is not scored. An episode's score is info.episode.r of
// the feedback that ends it (SPEC 5.4), or, without episode statistics, the
// sum of the chunk rewards it was sent. When every candidate has a score the
// Gaussian is refit, a row of the table (iteration, episodes, mean, best and
// elite-mean return, mean standard deviation, seconds) is printed, and the
// next iteration begins. A candidate whose connection closes before its
// episode ends is handed to the next env that starts one.
//
// An action chunk of H > 1 steps repeats the same action H times (open
// loop): for closed-loop control serve with --horizon 1. Actions are not
// clipped: the env applies its own limits. With one connection the run is
// deterministic for a given Seed.
package cem

import (
	"fmt"
	"io"
	"math"
	"math/rand"
	"sort"
	"sync"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
)

// Config configures a Learner. Zero values mean the defaults.
type Config struct {
	Population int     // candidates per iteration; default 32
	EliteFrac  float64 // fraction of them refit to; default 0.2 (at least 2 elites)
	InitStd    float64 // initial standard deviation of every parameter; default 1
	NoiseStd   float64 // added to the refit deviation, sqrt(var + NoiseStd^2); default 0.05
	Seed       int64   // seeds the sampling
	// Out, if not nil, gets the header and one table row per iteration.
	Out io.Writer
	// Now is the clock of the table's seconds column; nil means time.Now.
	Now func() time.Time
}

// Iteration is the summary of one finished iteration, as printed.
type Iteration struct {
	Iter       int     // 1, 2, ...
	Episodes   int     // episodes that ended so far, scored or not
	Mean       float64 // mean score of the population
	Best       float64
	EliteMean  float64
	Std        float64 // mean standard deviation of the refit Gaussian
	Seconds    float64 // since the first infer
	Population int
}

type key struct {
	conn int
	env  int64
}

// episode is what an env runs in its current episode.
type episode struct {
	cand int // index into Learner.cands, or -1 for the mean
	sum  float64
	done bool // its episode ended: the next infer starts another
}

const (
	unassigned = iota
	running
	scored
)

type candidate struct {
	theta []float64
	state int
	score float64
}

// Learner is the cross-entropy method over linear policies. It implements
// refserver.Policy, refserver.Describer and refserver.ConnCloser, and is
// safe for concurrent use.
type Learner struct {
	cfg    Config
	elites int

	mu       sync.Mutex
	rng      *rand.Rand
	obsDim   int // -1 until the first infer
	actDim   int
	mean     []float64
	std      []float64
	cands    []candidate
	nScored  int
	envs     map[key]*episode
	episodes int
	start    time.Time
	history  []Iteration
	x        []float64 // scratch: one row's features
}

// New returns a Learner for cfg.
func New(cfg Config) *Learner {
	if cfg.Population <= 0 {
		cfg.Population = 32
	}
	if cfg.EliteFrac <= 0 || cfg.EliteFrac > 1 {
		cfg.EliteFrac = 0.2
	}
	if cfg.InitStd <= 0 {
		cfg.InitStd = 1
	}
	if cfg.NoiseStd < 0 {
		cfg.NoiseStd = 0
	} else if cfg.NoiseStd == 0 {
		cfg.NoiseStd = 0.05
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	elites := int(math.Round(cfg.EliteFrac * float64(cfg.Population)))
	if elites < 2 {
		elites = 2
	}
	if elites > cfg.Population {
		elites = cfg.Population
	}
	return &Learner{
		cfg:    cfg,
		elites: elites,
		rng:    rand.New(rand.NewSource(cfg.Seed)),
		obsDim: -1,
		envs:   make(map[key]*episode),
	}
}

// Describe names the learner in metadata (SPEC 5.1).
func (l *Learner) Describe() (algorithm, policy string) { return "cem", "linear" }

// Iterations returns the summaries of the iterations finished so far.
func (l *Learner) Iterations() []Iteration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Iteration(nil), l.history...)
}

// Mean returns a copy of the current mean parameters, laid out as
// theta[d*(obsDim+1)+i] = W[d][i] and theta[d*(obsDim+1)+obsDim] = b[d];
// nil before the first infer.
func (l *Learner) Mean() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]float64(nil), l.mean...)
}

// features returns row's features, every state of obs in the given order
// (name order) flattened, appended to x[:0].
func features(obs *wire.Observation, order []int, row int, x []float64) []float64 {
	x = x[:0]
	for _, si := range order {
		a := &obs.States[si].Array
		per := 1
		for _, d := range a.Shape[1:] {
			per *= d
		}
		for i := 0; i < per; i++ {
			x = append(x, a.Float64(row*per+i))
		}
	}
	return x
}

// stateOrder returns the indices of obs.States sorted by name.
func stateOrder(obs *wire.Observation) []int {
	order := make([]int, len(obs.States))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return obs.States[order[a]].Name < obs.States[order[b]].Name })
	return order
}

// Act fills the chunk: every step of env row's chunk is the linear policy
// of the candidate that env runs, applied to its observation.
func (l *Learner) Act(conn int, envIDs []int64, obs *wire.Observation, out *wire.Array) error {
	h, n := out.Shape[0], out.Shape[1]
	da := 1
	for _, d := range out.Shape[2:] {
		da *= d
	}
	order := stateOrder(obs)
	obsDim := 0
	for _, si := range order {
		obsDim += obs.States[si].Array.RowBytes() / obs.States[si].Array.DType.ItemSize()
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.obsDim < 0 {
		if obsDim == 0 {
			return fmt.Errorf("cem: the observation has no state arrays to act on")
		}
		l.init(obsDim, da)
	}
	if obsDim != l.obsDim || da != l.actDim {
		return fmt.Errorf("cem: observation of %d state values and actions of %d values, want %d and %d (fixed by the first infer)",
			obsDim, da, l.obsDim, l.actDim)
	}
	for row := 0; row < n; row++ {
		k := key{conn, envIDs[row]}
		ep := l.envs[k]
		if ep == nil || ep.done {
			ep = &episode{cand: l.assign()}
			l.envs[k] = ep
		}
		theta := l.mean
		if ep.cand >= 0 {
			theta = l.cands[ep.cand].theta
		}
		l.x = features(obs, order, row, l.x)
		for d := 0; d < da; d++ {
			w := theta[d*(obsDim+1) : (d+1)*(obsDim+1)]
			v := w[obsDim]
			for i, xi := range l.x {
				v += w[i] * xi
			}
			for s := 0; s < h; s++ {
				out.SetFloat64((s*n+row)*da+d, v)
			}
		}
	}
	return nil
}

// Feedback adds the chunk rewards to each env's episode and scores the
// candidates whose episodes ended.
func (l *Learner) Feedback(conn int, fb *wire.FeedbackMsg) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for j, env := range fb.EnvIndices {
		ep := l.envs[key{conn, env}]
		if ep == nil || ep.done {
			continue // no action of ours is outstanding for it
		}
		ep.sum += fb.Rewards[j]
		if !fb.Terminated[j] && !fb.Truncated[j] {
			continue
		}
		ep.done = true
		l.episodes++
		score := ep.sum
		if e := fb.Episode; e != nil && e.Return != nil && e.Mask[j] {
			score = e.Return[j]
		}
		if ep.cand < 0 {
			continue
		}
		c := &l.cands[ep.cand]
		c.state, c.score = scored, score
		l.nScored++
		if l.nScored == len(l.cands) {
			l.refit()
		}
	}
	return nil
}

// ConnClosed hands the candidates that conn's envs were running back to
// the pool.
func (l *Learner) ConnClosed(conn int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, ep := range l.envs {
		if k.conn != conn {
			continue
		}
		if !ep.done && ep.cand >= 0 && l.cands[ep.cand].state == running {
			l.cands[ep.cand].state = unassigned
		}
		delete(l.envs, k)
	}
}

// init sizes the parameters for obsDim features and da actions and draws
// the first population.
func (l *Learner) init(obsDim, da int) {
	l.obsDim, l.actDim = obsDim, da
	dim := (obsDim + 1) * da
	l.mean = make([]float64, dim)
	l.std = make([]float64, dim)
	for i := range l.std {
		l.std[i] = l.cfg.InitStd
	}
	l.x = make([]float64, 0, obsDim)
	l.start = l.cfg.Now()
	l.sample()
}

// sample draws a new population from the current Gaussian.
func (l *Learner) sample() {
	l.cands = make([]candidate, l.cfg.Population)
	for c := range l.cands {
		theta := make([]float64, len(l.mean))
		for i := range theta {
			theta[i] = l.mean[i] + l.std[i]*l.rng.NormFloat64()
		}
		l.cands[c] = candidate{theta: theta}
	}
	l.nScored = 0
}

// assign returns the lowest-numbered unassigned candidate, now running, or
// -1 (the mean) when there is none.
func (l *Learner) assign() int {
	for c := range l.cands {
		if l.cands[c].state == unassigned {
			l.cands[c].state = running
			return c
		}
	}
	return -1
}

// refit moves the Gaussian to the elites, records and prints the
// iteration, and draws the next population.
func (l *Learner) refit() {
	idx := make([]int, len(l.cands))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return l.cands[idx[a]].score > l.cands[idx[b]].score })
	it := Iteration{Iter: len(l.history) + 1, Episodes: l.episodes, Population: len(l.cands), Best: l.cands[idx[0]].score}
	for _, c := range l.cands {
		it.Mean += c.score
	}
	it.Mean /= float64(len(l.cands))
	elites := idx[:l.elites]
	for _, e := range elites {
		it.EliteMean += l.cands[e].score
	}
	it.EliteMean /= float64(len(elites))
	for i := range l.mean {
		m := 0.0
		for _, e := range elites {
			m += l.cands[e].theta[i]
		}
		m /= float64(len(elites))
		v := 0.0
		for _, e := range elites {
			d := l.cands[e].theta[i] - m
			v += d * d
		}
		v /= float64(len(elites))
		l.mean[i] = m
		l.std[i] = math.Sqrt(v + l.cfg.NoiseStd*l.cfg.NoiseStd)
		it.Std += l.std[i]
	}
	it.Std /= float64(len(l.std))
	it.Seconds = l.cfg.Now().Sub(l.start).Seconds()
	l.history = append(l.history, it)
	if w := l.cfg.Out; w != nil {
		if it.Iter == 1 {
			fmt.Fprintf(w, "cem: population %d, %d elites, %d parameters (%d state values + bias, x %d action values)\n",
				len(l.cands), l.elites, len(l.mean), l.obsDim, l.actDim)
			fmt.Fprintf(w, "%5s %9s %10s %10s %10s %8s %8s\n", "iter", "episodes", "mean", "best", "elite-mean", "std", "seconds")
		}
		fmt.Fprintf(w, "%5d %9d %10.1f %10.1f %10.1f %8.3f %8.1f\n",
			it.Iter, it.Episodes, it.Mean, it.Best, it.EliteMean, it.Std, it.Seconds)
	}
	l.sample()
}
