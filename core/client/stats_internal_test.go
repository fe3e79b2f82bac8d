package client

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBucketOf: buckets are in order, contiguous, and each bucket's
// midpoint is within RTTResolution of every value in it (within 0.5 µs
// below 8 µs).
func TestBucketOf(t *testing.T) {
	prev := 0
	for us := uint64(0); us < 1<<22; us++ {
		i := bucketOf(us)
		if i != prev && i != prev+1 {
			t.Fatalf("bucketOf(%d) = %d after %d: not contiguous", us, i, prev)
		}
		prev = i
		mid := float64(bucketMid(i)) / 1e3
		if us < subBuckets {
			if mid != float64(us)+0.5 { // exact: [us, us+1) µs
				t.Fatalf("bucketMid(%d) = %v for value %d µs", i, mid, us)
			}
		} else {
			if rel := math.Abs(mid-float64(us)) / float64(us); rel > RTTResolution {
				t.Fatalf("value %d µs in bucket %d, midpoint %.2f: off by %.2f %%", us, i, mid, rel*100)
			}
		}
	}
	// Powers of two up to the top bucket, and beyond it (clamped).
	for e := 22; e < 64; e++ {
		us := uint64(1)<<e + uint64(1)<<e/3
		i := bucketOf(us)
		if i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d, beyond %d buckets", us, i, histBuckets)
		}
		if e < maxOctave {
			if rel := math.Abs(float64(bucketMid(i))/1e3-float64(us)) / float64(us); rel > RTTResolution {
				t.Fatalf("value %d µs: midpoint off by %.2f %%", us, rel*100)
			}
		} else if i != histBuckets-1 {
			t.Fatalf("bucketOf(%d) = %d, want the last bucket", us, i)
		}
	}
}

// TestPercentiles checks p50, p99, last and max against the exact values
// of random samples spread over several decades.
func TestPercentiles(t *testing.T) {
	c := &Client{}
	s := &c.stats
	if got := (&Client{}).Stats(); got != (Stats{}) {
		t.Fatalf("empty stats: %+v", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var vals []time.Duration
	for i := 0; i < 20001; i++ {
		// log-uniform from 10 µs to 1 s, and 0.5 % outliers at 30 s
		d := time.Duration(math.Exp(math.Log(10e3) + rng.Float64()*math.Log(1e5)))
		if rng.IntN(200) == 0 {
			d = 30 * time.Second
		}
		vals = append(vals, d)
		s.recordRTT(d)
	}
	got := c.Stats()
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	exact := func(q float64) time.Duration { return sorted[int(math.Ceil(q*float64(len(sorted))))-1] }
	if got.Exchanges != uint64(len(vals)) || got.RTTLast != vals[len(vals)-1] || got.RTTMax != sorted[len(sorted)-1] {
		t.Fatalf("got exchanges %d last %v max %v; want %d %v %v", got.Exchanges, got.RTTLast, got.RTTMax, len(vals), vals[len(vals)-1], sorted[len(sorted)-1])
	}
	for _, q := range []struct {
		name string
		p    float64
		got  time.Duration
	}{{"p50", 0.5, got.RTTP50}, {"p99", 0.99, got.RTTP99}} {
		want := exact(q.p)
		if rel := math.Abs(float64(q.got-want)) / float64(want); rel > RTTResolution {
			t.Errorf("%s = %v, exact %v: off by %.2f %%", q.name, q.got, want, rel*100)
		}
	}
	// One sample: every statistic is that sample (p50/p99 within resolution).
	var one Client
	one.stats.recordRTT(123456 * time.Nanosecond)
	g := one.Stats()
	if g.Exchanges != 1 || g.RTTLast != 123456 || g.RTTMax != 123456 || math.Abs(float64(g.RTTP50-123456))/123456 > RTTResolution || g.RTTP99 != g.RTTP50 {
		t.Fatalf("one sample: %+v", g)
	}
}

// TestStatsAllocs: Stats allocates nothing.
func TestStatsAllocs(t *testing.T) {
	c := wideClient()
	if a := testing.AllocsPerRun(100, func() { _ = c.Stats() }); a != 0 {
		t.Fatalf("Stats allocates %v times", a)
	}
	if a := testing.AllocsPerRun(100, func() { c.stats.recordRTT(50 * time.Microsecond) }); a != 0 {
		t.Fatalf("recordRTT allocates %v times", a)
	}
}

// wideClient has round trips from 10 µs to 100 s: the widest histogram a
// client is likely to see (learn steps), so Stats scans the most buckets.
func wideClient() *Client {
	c := &Client{}
	for d := 10 * time.Microsecond; d < 100*time.Second; d = d * 21 / 20 {
		c.stats.recordRTT(d)
	}
	return c
}

// BenchmarkStats is the cost of one Stats call (the Go side of
// plugrl_stats), with a narrow histogram (a steady loop) and a wide one.
func BenchmarkStats(b *testing.B) {
	narrow := &Client{}
	for i := 0; i < 1000; i++ {
		narrow.stats.recordRTT(time.Duration(40+i%30) * time.Microsecond)
	}
	narrow.stats.recordRTT(3 * time.Millisecond)
	for _, bc := range []struct {
		name string
		c    *Client
	}{{"narrow", narrow}, {"wide", wideClient()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink uint64
			for i := 0; i < b.N; i++ {
				sink += bc.c.Stats().Exchanges
			}
			_ = sink
		})
	}
}

// BenchmarkRecordRTT is what the counters add to an exchange besides the
// clock read: the histogram, and the few counter increments (feedbacks,
// bytes sent and received).
func BenchmarkRecordRTT(b *testing.B) {
	c := &Client{}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.stats.recordRTT(time.Duration(40000 + i&1023))
		c.stats.feedbacks.Add(1)
		c.stats.io.Sent.Add(100)
		c.stats.io.Sent.Add(100)
		c.stats.io.Received.Add(100)
	}
}
