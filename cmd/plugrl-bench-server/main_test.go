package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestServesAndStops: the bench server answers a client's exchanges with
// [H, n, D] actions, ends the run with plugrl-server-stop after its window,
// and prints its rate.
func TestServesAndStops(t *testing.T) {
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var out strings.Builder
	go func() {
		done <- run([]string{"--envs", "2", "--horizon", "3", "--action-dim", "2", "--warmup", "50ms", "--seconds", "200ms"},
			pw, io.Discard)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	url, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, br); close(copied) }()

	c, err := client.Dial(context.Background(), client.Options{URL: strings.TrimSpace(url), MaxReconnects: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obs := wire.Observation{States: []wire.NamedArray{{Name: "state", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 4}, Data: make([]byte, 64)}}}}
	envs, zeros, flags := []int64{0, 1}, []int64{0, 0}, []bool{false, false}
	exchanges := 0
	for {
		a, err := c.Infer(&wire.Infer{EnvIndices: envs, StepIDs: zeros, Obs: &obs})
		if err == nil {
			if a.Horizon() != 3 || a.Envs() != 2 {
				t.Fatalf("action of shape %v", a.Chunk.Shape)
			}
			err = c.Feedback(&wire.Feedback{EnvIndices: envs, StepIDs: zeros, Obs: &obs, Rewards: make([]float32, 2), Terminated: flags, Truncated: flags})
		}
		if errors.Is(err, client.ErrStopped) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		exchanges++
	}
	select {
	case rc := <-done:
		if rc != 0 {
			t.Fatalf("exit status %d", rc)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
	<-copied // the server's output is complete
	if exchanges == 0 || !strings.Contains(out.String(), "exchanges/s ") {
		t.Fatalf("%d exchanges; server printed %q", exchanges, out.String())
	}
	// The window comes before the totals (it is written before the stop),
	// and the latencies after them.
	o := out.String()
	w, r := strings.Index(o, "window_ns "), strings.Index(o, "exchanges/s ")
	if w < 0 || w > r || !strings.Contains(o, "latency_us turnaround n ") ||
		!strings.Contains(o, "latency_us infer_feedback n ") || !strings.Contains(o, "conn_exchanges min ") {
		t.Fatalf("server printed %q", o)
	}
	var start, end int64
	if _, err := fmt.Sscanf(o[w:], "window_ns %d %d", &start, &end); err != nil || end-start != int64(200*time.Millisecond) {
		t.Fatalf("window %d..%d (%v) in %q", start, end, err, o)
	}
	// The rate is the count over the window's length, not over the run's
	// (which has the warm-up besides).
	var count int
	var secs, rate float64
	if _, err := fmt.Sscanf(o[strings.LastIndex(o[:strings.Index(o, " exchanges in ")], "\n")+1:], "%d exchanges in %f s\nexchanges/s %f", &count, &secs, &rate); err != nil ||
		secs != 0.2 || count == 0 || math.Abs(rate-float64(count)/0.2) > 0.05 {
		t.Fatalf("%d exchanges in %v s at %v/s (%v) in %q", count, secs, rate, err, o)
	}
}

// TestConns: with --conns N the server serves N clients at once, counts
// every one of them, and reports the least and the most served.
func TestConns(t *testing.T) {
	const n = 3
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"--conns", "3", "--warmup", "20ms", "--seconds", "200ms"}, pw, io.Discard)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	url, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, br); close(copied) }()
	counts := make(chan int, n)
	for range n {
		go func() {
			c, err := client.Dial(context.Background(), client.Options{URL: strings.TrimSpace(url), MaxReconnects: -1})
			if err != nil {
				t.Error(err)
				counts <- 0
				return
			}
			defer c.Close()
			envs, zeros, flags := []int64{0}, []int64{0}, []bool{false}
			obs := wire.Observation{}
			k := 0
			for {
				_, err := c.Infer(&wire.Infer{EnvIndices: envs, StepIDs: zeros, Obs: &obs})
				if err == nil {
					err = c.Feedback(&wire.Feedback{EnvIndices: envs, StepIDs: zeros, Obs: &obs, Rewards: make([]float32, 1), Terminated: flags, Truncated: flags})
				}
				if err != nil {
					if !errors.Is(err, client.ErrStopped) {
						t.Error(err)
					}
					counts <- k
					return
				}
				k++
			}
		}()
	}
	for range n {
		if k := <-counts; k == 0 {
			t.Fatal("a client made no exchange")
		}
	}
	if rc := <-done; rc != 0 {
		t.Fatalf("exit status %d", rc)
	}
	<-copied
	var least, most int
	o := out.String()
	i := strings.Index(o, "conn_exchanges ")
	if i < 0 {
		t.Fatalf("server printed %q", o)
	}
	if _, err := fmt.Sscanf(o[i:], "conn_exchanges min %d max %d", &least, &most); err != nil || least == 0 || most < least {
		t.Fatalf("min %d max %d (%v) in %q", least, most, err, o)
	}
}

// TestPercentiles: nearest rank, in microseconds, from nanoseconds, and
// "-" for a percentile q of fewer than 10/(1-q) samples.
func TestPercentiles(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{100_000, "n 100000 p50 50000.0 p90 90000.0 p99 99000.0 p99.9 99900.0 p99.99 99990.0 max 100000.0"},
		{99_999, "n 99999 p50 50000.0 p90 90000.0 p99 99000.0 p99.9 99900.0 p99.99 - max 99999.0"},
		{10_000, "n 10000 p50 5000.0 p90 9000.0 p99 9900.0 p99.9 9990.0 p99.99 - max 10000.0"},
		{1000, "n 1000 p50 500.0 p90 900.0 p99 990.0 p99.9 - p99.99 - max 1000.0"},
		{999, "n 999 p50 500.0 p90 900.0 p99 - p99.9 - p99.99 - max 999.0"},
		{400, "n 400 p50 200.0 p90 360.0 p99 - p99.9 - p99.99 - max 400.0"},
		{100, "n 100 p50 50.0 p90 90.0 p99 - p99.9 - p99.99 - max 100.0"},
		{99, "n 99 p50 50.0 p90 - p99 - p99.9 - p99.99 - max 99.0"},
		{20, "n 20 p50 10.0 p90 - p99 - p99.9 - p99.99 - max 20.0"},
		{19, "n 19 p50 - p90 - p99 - p99.9 - p99.99 - max 19.0"},
		{0, "n 0 p50 - p90 - p99 - p99.9 - p99.99 - max -"},
	} {
		ns := make([]uint32, c.n)
		for i := range ns {
			ns[i] = uint32(len(ns)-i) * 1000 // n us .. 1 us, unsorted
		}
		if got := percentiles(ns); got != c.want {
			t.Fatalf("%d samples: got %q, want %q", c.n, got, c.want)
		}
	}
	if saturate(-1) != 0 || saturate(time.Hour) != math.MaxUint32 || saturate(time.Microsecond) != 1000 {
		t.Fatal("saturate")
	}
}

// TestServeAllocs: a steady-state exchange allocates nothing, latency
// recording included (a raw client that allocates nothing either drives
// the server's loop over a window on a real socket).
func TestServeAllocs(t *testing.T) {
	s, actions := rawPair(t, 1<<20) // room for every latency: no append grows
	w := newWindow(50*time.Millisecond, 300*time.Millisecond)
	// Warm the loop up (buffers, the poller) before counting.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := s.serve(actions, w, func() {}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if s.count < 100 || len(s.turn) == 0 {
		t.Fatalf("%d exchanges, %d latencies", s.count, len(s.turn))
	}
	// A handful of allocations may come from the runtime (the poller's
	// first wait); none may come per exchange.
	if n := after.Mallocs - before.Mallocs; n > 10 {
		t.Fatalf("%d allocations over %d exchanges", n, s.count)
	}
}

// TestSizes: --sizes prints the encoder's sizes of the workload.
func TestSizes(t *testing.T) {
	var out strings.Builder
	if rc := run([]string{"--sizes", "--envs", "1", "--state", "8"}, &out, io.Discard); rc != 0 {
		t.Fatalf("exit status %d", rc)
	}
	if got := out.String(); !strings.HasPrefix(got, "infer=412 feedback=590 action=") {
		t.Fatalf("got %q", got)
	}
}

// TestActionsVary checks that each action sent decodes as the action of
// its envs, with new values in [-1, 1) in most of its data's bytes, as a
// policy's would be.
func TestActionsVary(t *testing.T) {
	const envs, horizon, dim = 3, 8, 7
	action, data, err := actionMessage(envs, horizon, dim)
	if err != nil {
		t.Fatal(err)
	}
	a := newActions(action, data, 7)
	var prev []float32
	for i := 0; i < 3; i++ {
		f := a.next()
		msg := slices.Clone(f[len(f)-len(action):])
		var got wire.Action
		if err := got.Decode(msg); err != nil {
			t.Fatalf("action %d does not decode: %v", i, err)
		}
		if !slices.Equal(got.EnvIDs, []int64{0, 1, 2}) || !slices.Equal(got.Chunk.Shape, []int{horizon, envs, dim}) {
			t.Fatalf("action %d: env_ids %v, shape %v", i, got.EnvIDs, got.Chunk.Shape)
		}
		vals := make([]float32, horizon*envs*dim)
		for k := range vals {
			vals[k] = math.Float32frombits(binary.LittleEndian.Uint32(got.Chunk.Data[4*k:]))
			if vals[k] < -1 || vals[k] >= 1 {
				t.Fatalf("action %d value %d is %v; want [-1, 1)", i, k, vals[k])
			}
		}
		if prev != nil {
			same := 0
			for k := range vals {
				if vals[k] == prev[k] {
					same++
				}
			}
			if same > len(vals)/10 {
				t.Fatalf("action %d repeats %d of %d values of the one before", i, same, len(vals))
			}
		}
		prev = vals
	}
}

// rawPair is a server on one end of a loopback connection whose other end
// a goroutine drives as a client would: an infer frame, the action read,
// a feedback frame, over and over, until the connection closes. The
// server's latency slices hold latencies values before they grow.
func rawPair(t *testing.T, latencies int) (*server, *actions) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	s := &server{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), sink: make([]byte, 256<<10),
		turn: make([]uint32, 0, latencies), inferFeedback: make([]uint32, 0, latencies)}
	action, data, err := actionMessage(1, 8, 7)
	if err != nil {
		t.Fatal(err)
	}
	a := newActions(action, data, 1)
	msg := append([]byte{0x82, 0x80 | 126, 400 >> 8, 400 & 0xff, 0, 0, 0, 0}, make([]byte, 400)...)
	reply := make([]byte, len(a.frame))
	go func() {
		for {
			if _, err := cc.Write(msg); err != nil {
				return
			}
			if _, err := io.ReadFull(cc, reply); err != nil {
				return
			}
			if _, err := cc.Write(msg); err != nil {
				return
			}
		}
	}()
	return s, a
}

// fakeClock advances by the next of steps at each reading: serve reads the
// clock three times an exchange (infer read, action written, feedback
// read), so steps {5, 1, 3} us make every exchange's times exact.
func fakeClock(steps ...time.Duration) func() time.Duration {
	var now time.Duration
	k := 0
	return func() time.Duration {
		now += steps[k%len(steps)]
		k++
		return now
	}
}

// TestServeWindow: an exchange counts when its feedback is read in
// [start, end) (both ends exact); turnaround is from the previous action's
// write to this infer's read, infer_feedback from the infer's read to the
// feedback's; the first exchange, with no previous action, is counted but
// not timed. With readings 5, 1, 3 us apart exchange i (0-based) reads its
// infer at 9i+5, writes its action at 9i+6 and reads its feedback at 9i+9:
// turnaround 8 us, infer_feedback 4 us.
func TestServeWindow(t *testing.T) {
	const us = time.Microsecond
	for _, c := range []struct {
		start, end      time.Duration
		count, timed    int
		dropped, stopAt int
	}{
		// Feedbacks at 36, 45, 54, 63 are in [36, 72); the one at 72 stops.
		{36 * us, 72 * us, 4, 4, 0, 8},
		// From 0: the first exchange (feedback at 9) counts, untimed.
		{0, 27 * us, 2, 1, 1, 3},
	} {
		s, a := rawPair(t, 1<<10)
		w := &window{start: c.start, end: c.end, length: c.end - c.start, clock: fakeClock(5*us, 1*us, 3*us)}
		stops := 0
		if err := s.serve(a, w, func() { stops++ }); err != nil {
			t.Fatal(err)
		}
		if s.count != c.count || len(s.turn) != c.timed || len(s.inferFeedback) != c.timed || s.dropped != c.dropped || stops != 1 {
			t.Fatalf("window %v..%v: count %d, timed %d/%d, dropped %d, stops %d; want %d, %d, %d, 1",
				c.start, c.end, s.count, len(s.turn), len(s.inferFeedback), s.dropped, stops, c.count, c.timed, c.dropped)
		}
		if now := w.since(); now != time.Duration(9*c.stopAt+5)*us {
			t.Fatalf("window %v..%v: served until %v; want it to stop at the feedback at %v", c.start, c.end, now-5*us,
				time.Duration(9*c.stopAt)*us)
		}
		for i := range s.turn {
			if s.turn[i] != 8000 || s.inferFeedback[i] != 4000 {
				t.Fatalf("exchange %d: turnaround %d ns, infer_feedback %d ns; want 8000, 4000", i, s.turn[i], s.inferFeedback[i])
			}
		}
	}
}

// TestServeThink: with --think, the action goes out only once think has
// passed since its infer was read: the wait counts in infer_feedback, and
// turnaround (the client's side) is as without it. The clock steps 1 us
// at each reading; serve reads it once per spin.
func TestServeThink(t *testing.T) {
	const us = time.Microsecond
	s, a := rawPair(t, 1<<10)
	s.think = 50 * us
	w := &window{start: 0, end: 1000 * us, length: 1000 * us, clock: fakeClock(us)}
	if err := s.serve(a, w, func() {}); err != nil {
		t.Fatal(err)
	}
	if len(s.inferFeedback) == 0 {
		t.Fatal("no exchange timed")
	}
	for i := range s.inferFeedback {
		if s.inferFeedback[i] < 50000 || s.turn[i] >= 50000 {
			t.Fatalf("exchange %d: infer_feedback %d ns, turnaround %d ns; want the first at least the 50 us think, the second below it", i, s.inferFeedback[i], s.turn[i])
		}
	}
}

// TestReport: totals over the window's length, the fewest and most
// exchanges of one connection, each latency column from its own samples,
// and the unrecorded latencies beyond the one per connection expected.
func TestReport(t *testing.T) {
	a := &server{count: 7, turn: []uint32{3000, 1000}, inferFeedback: []uint32{9000, 8000}, dropped: 1}
	b := &server{count: 3, turn: []uint32{2000}, inferFeedback: []uint32{7000}, dropped: 3}
	c := &server{count: 5, dropped: 0}
	var out strings.Builder
	report(&out, []*server{a, b, c}, 4*time.Second)
	want := "15 exchanges in 4.000 s\n" +
		"exchanges/s 3.8\n" +
		"conn_exchanges min 3 max 7\n" +
		"latency_us turnaround n 3 p50 - p90 - p99 - p99.9 - p99.99 - max 3.0\n" +
		"latency_us infer_feedback n 3 p50 - p90 - p99 - p99.9 - p99.99 - max 9.0\n" +
		"latency_unrecorded 4\n"
	if got := out.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	out.Reset()
	a.dropped, b.dropped, c.dropped = 1, 1, 1 // one a connection: expected, not reported
	report(&out, []*server{a, b, c}, 4*time.Second)
	if strings.Contains(out.String(), "latency_unrecorded") {
		t.Fatalf("got %q", out.String())
	}
}
