package refserver

import (
	"math/rand"
	"reflect"
	"sync"

	"github.com/plugrl/libplugrl/core/wire"
)

// Policy produces action chunks and receives feedback. The server calls it
// from one goroutine per connection, so an implementation must be safe for
// concurrent use. Env indices are connection-scoped (SPEC 4.4): a policy that
// keeps per-env state keys it by (conn, env index).
type Policy interface {
	// Act fills out, a zeroed [H, n, da] array of the configured action
	// dtype (time-major, SPEC 5.3), with the chunks for envIDs, whose
	// observation obs has n rows in envIDs order (reused rows already filled
	// in, SPEC 10.1). out.SetFloat64 writes any dtype. An error closes the
	// connection with 1011 "Internal server error." (SPEC 7.4).
	Act(conn int, envIDs []int64, obs *wire.Observation, out *wire.Array) error
	// Feedback receives a decoded feedback message of connection conn. Its
	// env set need not match the previous infer's (SPEC 4.3). An error
	// closes the connection with 1011.
	Feedback(conn int, fb *wire.FeedbackMsg) error
}

// Describer is implemented by a policy that names itself in metadata's
// algorithm and policy keys (SPEC 5.1). Without it the policy key is the
// policy's type name and the algorithm key is "none".
type Describer interface {
	Describe() (algorithm, policy string)
}

// ConnCloser is implemented by a policy that wants to drop per-connection
// state when a connection ends.
type ConnCloser interface {
	ConnClosed(conn int)
}

// ZeroPolicy answers every infer with zeros and ignores feedback.
type ZeroPolicy struct{}

func (ZeroPolicy) Act(int, []int64, *wire.Observation, *wire.Array) error { return nil }
func (ZeroPolicy) Feedback(int, *wire.FeedbackMsg) error                  { return nil }

// ProbePolicy answers with the action values of SPEC 8.1: element [k, row, d]
// of the chunk, for env j = envIDs[row], is 10000 k + 10 j + d, so a probe
// client's feedback shows what it did with each chunk. It ignores feedback.
type ProbePolicy struct{}

func (ProbePolicy) Act(_ int, envIDs []int64, _ *wire.Observation, out *wire.Array) error {
	h, n := out.Shape[0], out.Shape[1]
	da := 1
	for _, d := range out.Shape[2:] {
		da *= d
	}
	for k := 0; k < h; k++ {
		for row := 0; row < n; row++ {
			for d := 0; d < da; d++ {
				out.SetFloat64((k*n+row)*da+d, ProbeValue(k, envIDs[row], d))
			}
		}
	}
	return nil
}

func (ProbePolicy) Feedback(int, *wire.FeedbackMsg) error { return nil }

// ProbeValue is the value ProbePolicy sends at step k, for env j, dimension d.
func ProbeValue(k int, env int64, d int) float64 {
	return float64(10000*k) + float64(10*env) + float64(d)
}

// describe returns metadata's algorithm and policy for p.
func describe(p Policy) (algorithm, policy string) {
	if d, ok := p.(Describer); ok {
		return d.Describe()
	}
	t := reflect.TypeOf(p)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return "none", t.Name()
}

// RandomPolicy answers with actions drawn uniformly from [-1, 1], seeded,
// and ignores feedback: the baseline a learner is compared with. It is safe
// for concurrent use.
type RandomPolicy struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// NewRandomPolicy returns a RandomPolicy whose draws follow seed.
func NewRandomPolicy(seed int64) *RandomPolicy {
	return &RandomPolicy{rng: rand.New(rand.NewSource(seed))}
}

func (p *RandomPolicy) Act(_ int, _ []int64, _ *wire.Observation, out *wire.Array) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, n := 0, out.Len()*out.RowBytes()/out.DType.ItemSize(); i < n; i++ {
		out.SetFloat64(i, 2*p.rng.Float64()-1)
	}
	return nil
}

func (*RandomPolicy) Feedback(int, *wire.FeedbackMsg) error { return nil }

// Describe names it in metadata: algorithm "none", policy "random".
func (*RandomPolicy) Describe() (algorithm, policy string) { return "none", "random" }
