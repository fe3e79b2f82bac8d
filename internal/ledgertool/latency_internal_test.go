package ledgertool

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestLatencies: the histogram's percentiles are a sorted list's to 1/64,
// never above the largest value, from nanoseconds to hours, in a fixed
// size whatever the count.
func TestLatencies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, scale := range []time.Duration{100, 50 * time.Microsecond, 3 * time.Millisecond, 2 * time.Hour} {
		var l latencies
		var all []time.Duration
		for range 20000 {
			v := time.Duration(rng.ExpFloat64() * float64(scale))
			l.add(v)
			all = append(all, v)
		}
		slices.Sort(all)
		for _, p := range []float64{0, 50, 90, 99, 100} {
			want := all[int(p/100*float64(len(all)-1))]
			got := l.percentile(p)
			if got < want || float64(got-want) > float64(want)/64+1 {
				t.Errorf("scale %v: p%g = %v, a sorted list's is %v", scale, p, got, want)
			}
		}
		if l.max != all[len(all)-1] || l.n != int64(len(all)) {
			t.Errorf("scale %v: max %v n %d, want %v %d", scale, l.max, l.n, all[len(all)-1], len(all))
		}
	}
	// Values under 128 ns have a bucket each, so a few of them show the
	// rank exactly: p50 of four values is the second (rank 1.5, rounded
	// down, as a sorted list's index), not the third.
	var small latencies
	for _, v := range []time.Duration{10, 20, 30, 40} {
		small.add(v)
	}
	for p, want := range map[float64]time.Duration{0: 10, 50: 20, 90: 30, 100: 40} {
		if got := small.percentile(p); got != want {
			t.Errorf("10, 20, 30, 40 ns: p%g = %v, want %v", p, got, want)
		}
	}
	for _, v := range []time.Duration{0, 1, 127, 128, 129, 1<<62 + 12345, 1<<63 - 1} {
		if i := latencyBucket(v); i >= len(latencies{}.buckets) || bucketTop(i) < v || (i > 0 && bucketTop(i-1) >= v) {
			t.Errorf("value %d: bucket %d of [%d, %d]", v, i, bucketTop(i-1)+1, bucketTop(i))
		}
	}
}
