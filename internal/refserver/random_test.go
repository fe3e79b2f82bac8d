package refserver

import (
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

func TestRandomPolicy(t *testing.T) {
	draw := func(seed int64) []float64 {
		out := &wire.Array{DType: wire.Float64, Shape: []int{2, 3, 2}, Data: make([]byte, 8*12)}
		if err := NewRandomPolicy(seed).Act(0, []int64{0, 1, 2}, &wire.Observation{}, out); err != nil {
			t.Fatal(err)
		}
		vs := make([]float64, 12)
		for i := range vs {
			vs[i] = out.Float64(i)
			if vs[i] < -1 || vs[i] > 1 {
				t.Fatalf("element %d is %v, outside [-1, 1]", i, vs[i])
			}
		}
		return vs
	}
	a, b, c := draw(1), draw(1), draw(2)
	same, differ := true, false
	for i := range a {
		same = same && a[i] == b[i]
		differ = differ || a[i] != c[i]
	}
	if !same || !differ {
		t.Fatalf("seed 1 twice: %v, %v; seed 2: %v", a, b, c)
	}
	if alg, pol := describe(NewRandomPolicy(1)); alg != "none" || pol != "random" {
		t.Fatalf("describe: %q %q", alg, pol)
	}
}
