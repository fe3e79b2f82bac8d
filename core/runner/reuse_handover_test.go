package runner_test

import (
	"sync"
	"testing"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// obsPolicy records the observation the server acted on, per infer: the
// value of state "x" of each row, reused rows filled in (SPEC 10.1).
type obsPolicy struct {
	mu   sync.Mutex
	seen [][]float64
}

func (p *obsPolicy) Act(_ int, _ []int64, obs *wire.Observation, _ *wire.Array) error {
	a := obs.States[0].Array
	row := make([]float64, a.Shape[0])
	for i := range row {
		row[i] = a.Float64(i)
	}
	p.mu.Lock()
	p.seen = append(p.seen, row)
	p.mu.Unlock()
	return nil
}

func (p *obsPolicy) Feedback(int, *wire.FeedbackMsg) error { return nil }

// TestNewRunnerDoesNotReuseAnotherUsersObservation: a runner reuses only
// observations it fed back itself (the package doc: the observation
// passed to its previous Report). Another user of the client may have fed
// back env 0 on the connection first and left it open, owing nothing: an
// earlier runner that fed back every chunk (H = 1) and was closed, or the
// caller's own infer and feedback. A new runner's first infer must send
// its caller's observation for env 0, not mark it reused: the server
// would act, and train, on the earlier user's last observation instead.
func TestNewRunnerDoesNotReuseAnotherUsersObservation(t *testing.T) {
	obs := func(v float64) *wire.Observation {
		x := []float64{v}
		return &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: wire.BytesOf(x)}}}}
	}
	no := []bool{false}
	earlier := map[string]func(t *testing.T, c *client.Client){
		// A runner that fed back every chunk, closed owing nothing.
		"runner": func(t *testing.T, c *client.Client) {
			a, err := runner.New(c, runner.Config{Envs: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Act(obs(1), &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}); err != nil {
				t.Fatal(err)
			}
			if err := a.Report(obs(7), []float64{1}, no, no, nil); err != nil { // fed back: env 0 at 7
				t.Fatal(err)
			}
			a.Close() // owes nothing: the connection is kept
		},
		// The caller's own exchange on the client.
		"direct": func(t *testing.T, c *client.Client) {
			if _, err := c.Infer(&wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs(1)}); err != nil {
				t.Fatal(err)
			}
			if err := c.Feedback(&wire.Feedback{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs(7), Rewards: []float32{1}, Terminated: no, Truncated: no}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, before := range earlier {
		t.Run(name, func(t *testing.T) {
			p := &obsPolicy{}
			s, c := dialRef(t, refserver.Config{Horizon: 1, ActionDim: 1, Policy: p, Features: []string{client.FeatureReuse}})
			before(t, c)
			b, err := runner.New(c, runner.Config{Envs: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.Act(obs(3), &wire.Array{DType: wire.Float64, Data: make([]byte, 8)}); err != nil { // the new runner's env 0 is at 3
				t.Fatal(err)
			}
			// The policy ran before the action was sent: its record is there.
			p.mu.Lock()
			got := p.seen[len(p.seen)-1][0]
			p.mu.Unlock()
			if got != 3 {
				t.Fatalf("the new runner's first infer was acted on with env 0's observation %v, want its own 3 (server reused %d rows): "+
					"it reused the observation an earlier user fed back", got, s.Stats().ReusedRows)
			}
		})
	}
}
