// Command plugrl-bench-server is the lean server of `./build.sh bench`: it
// measures how many infer/action/feedback exchanges per second its clients
// achieve, and how long each half of an exchange takes, the same way for
// every client, so that libplugrl can be put beside the transport floor
// (bench/bench_floor.cpp) that sends frames of exactly the same sizes with
// no encoding at all.
//
//	plugrl-bench-server [--addr 127.0.0.1:0] --envs N [--horizon 8] [--action-dim 7]
//	                    [--warmup 500ms] [--seconds 2s] [--conns 1] [--think 0]
//	plugrl-bench-server --sizes --envs N --cams C --img S --state D
//
// Serving, it prints its ws:// URL as the first line of stdout, accepts
// --conns connections, sends each metadata (action_horizon, action_dim), and
// then serves each on its own goroutine: read one data frame (the infer; its
// bytes are not parsed, so the floor client's frames, which are not msgpack,
// are served the same way), send an action message ([H, n, D] <f4,
// env_ids 0..n-1; encoded once, with new values in [-1, 1) written into its
// data before each send, as a policy's actions change every step: a
// client that records its traffic, libplugrl's step ledger, would compress
// a fixed action to nothing), read one data frame (the feedback). The
// window is the same for every connection: it opens --warmup after the
// last connection's metadata went out and lasts --seconds; an exchange
// counts when its feedback is read inside it. A connection's first exchange
// to end after the window closes it with 1001 "plugrl-server-stop". Before
// the first close, the server prints the window as CLOCK_MONOTONIC
// nanoseconds:
//
//	window_ns START END
//
// so that a client on the same machine, which has just been stopped and
// reads this output (bench.sh points it at the file), can measure its CPU
// time over exactly the server's window. At the end it prints
//
//	C exchanges in W s
//	exchanges/s X                     (all connections together)
//	conn_exchanges min A max B        (the evenness across connections)
//	latency_us turnaround n N p50 .. p90 .. p99 .. p99.9 .. p99.99 .. max ..
//	latency_us infer_feedback n N p50 .. (same percentiles)
//
// turnaround is, for each exchange in the window, the time from having
// written the previous action to having read this infer: the client's side
// of the loop (reading the action, its feedback, the env step, which is
// nothing here, and its next infer). infer_feedback is the time from having
// read an infer to having read its feedback: the server's action write, the
// client's reading of it and its feedback. Both are taken with the monotonic
// clock into arrays allocated before the run; the loop allocates nothing.
// N is the number of exchanges timed. A percentile q is printed only where
// N >= 10/(1-q), so that at least 10 samples lie beyond it (p99 needs 1000,
// p99.9 10000, p99.99 100000), and as "-" otherwise: with fewer, p99.9 and
// p99.99 are the largest sample or next to it, the maximum again (LARGE
// has 250-400 exchanges in a window).
//
// With --think T it spins for T after reading each infer before it sends
// the action, as a policy's inference takes time: the client then waits
// that long in each Receive, as it would for a real policy (the default,
// 0, answers at once, which no policy does). It spins rather than sleeps,
// so that T is kept to the microsecond: give the server a core of its
// own. T counts in infer_feedback, not in turnaround.
//
// With --sizes it prints the payload sizes libplugrl's encoder (core/wire)
// gives the bench workload's infer and feedback, and the action's, as
// "infer=I feedback=F action=A", for the floor client's --infer-bytes and
// --feedback-bytes.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gobwas/ws"

	"github.com/plugrl/libplugrl/core/wire"
)

const stopReason = wire.ReasonStop

// latencyPerSecond bounds the latency samples kept: no loopback WebSocket
// exchange takes less than 2 us, so the arrays are never full in practice;
// were they, the samples would be the window's first ones (and the server
// says how many it dropped).
const latencyPerSecond = 500_000

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugrl-bench-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address; port 0 picks a free one")
	envs := fs.Int("envs", 1, "envs per infer: the action is [H, envs, D]")
	horizon := fs.Int("horizon", 8, "action horizon H")
	dim := fs.Int("action-dim", 7, "action width D")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "exchanges before the window are not counted")
	window := fs.Duration("seconds", 2*time.Second, "length of the measured window")
	conns := fs.Int("conns", 1, "connections to accept and serve, each on its own goroutine")
	think := fs.Duration("think", 0, "spin this long after each infer before sending the action, as a policy computes (0: answer at once)")
	sizes := fs.Bool("sizes", false, "print the workload's infer/feedback/action payload sizes and exit")
	cams := fs.Int("cams", 0, "with --sizes: images cam0..cam{C-1}")
	img := fs.Int("img", 0, "with --sizes: image side S ([N, S, S, 3] u8)")
	state := fs.Int("state", 0, "with --sizes: state width D ([N, D] f64; none when 0)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *envs < 1 || *horizon < 1 || *dim < 1 || *conns < 1 {
		fmt.Fprintln(stderr, "plugrl-bench-server: --envs, --horizon, --action-dim and --conns must be positive")
		return 2
	}
	if *window <= 0 || *warmup < 0 || *think < 0 {
		fmt.Fprintln(stderr, "plugrl-bench-server: --seconds must be positive and --warmup and --think not negative")
		return 2
	}
	action, data, err := actionMessage(*envs, *horizon, *dim)
	if err != nil {
		fmt.Fprintln(stderr, "plugrl-bench-server:", err)
		return 1
	}
	if *sizes {
		in, fb, err := workloadSizes(*envs, *cams, *img, *state)
		if err != nil {
			fmt.Fprintln(stderr, "plugrl-bench-server:", err)
			return 1
		}
		fmt.Fprintf(stdout, "infer=%d feedback=%d action=%d\n", in, fb, len(action))
		return 0
	}
	meta, err := metadataMessage(*horizon, *dim)
	if err != nil {
		fmt.Fprintln(stderr, "plugrl-bench-server:", err)
		return 1
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "plugrl-bench-server:", err)
		return 1
	}
	fmt.Fprintf(stdout, "ws://%s\n", ln.Addr())
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	// A client that dies before connecting must not leave the server
	// waiting for ever.
	if tl, ok := ln.(*net.TCPListener); ok {
		_ = tl.SetDeadline(time.Now().Add(60 * time.Second))
	}
	perConn := max(1024, int(window.Seconds()*latencyPerSecond)/(*conns))
	servers := make([]*server, 0, *conns)
	defer func() {
		for _, s := range servers {
			s.nc.Close()
		}
	}()
	for len(servers) < *conns {
		nc, err := ln.Accept()
		if err != nil {
			ln.Close()
			fmt.Fprintln(stderr, "plugrl-bench-server:", err)
			return 1
		}
		s, err := accept(nc, meta, perConn)
		if err != nil {
			ln.Close()
			nc.Close()
			fmt.Fprintln(stderr, "plugrl-bench-server:", err)
			return 1
		}
		servers = append(servers, s)
	}
	ln.Close()

	w := newWindow(*warmup, *window)
	stop := frame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusGoingAway, stopReason))
	var once sync.Once
	announce := func() {
		// Written before any connection is stopped: a client that reads
		// this output after its stop finds the line there.
		fmt.Fprintf(stdout, "window_ns %d %d\n", w.mono(w.start), w.mono(w.end))
		if f, ok := stdout.(*os.File); ok {
			_ = f.Sync()
		}
	}
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.think = *think
			errs[i] = s.serve(newActions(action, data, uint32(i)), w, func() { once.Do(announce) })
			// End the run as a PlugRL server does, then wait briefly for
			// the client's close (its next infer may come first).
			_ = s.send(stop)
			_ = s.nc.SetReadDeadline(time.Now().Add(3 * time.Second))
			for s.readMessage() == nil {
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(stderr, "plugrl-bench-server:", err)
			return 1
		}
	}
	report(stdout, servers, w.length)
	return 0
}

// accept upgrades nc and sends the metadata.
func accept(nc net.Conn, meta []byte, latencies int) (*server, error) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := ws.Upgrade(nc); err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	_ = nc.SetDeadline(time.Time{})
	s := &server{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), sink: make([]byte, 256<<10),
		turn: make([]uint32, 0, latencies), inferFeedback: make([]uint32, 0, latencies)}
	if err := s.send(frame(ws.OpBinary, meta)); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return s, nil
}

// window is the measured interval, as offsets from base on Go's monotonic
// clock, which is also how every exchange is timed.
type window struct {
	base       time.Time
	baseMono   int64 // CLOCK_MONOTONIC at base, in ns
	start, end time.Duration
	length     time.Duration
	// clock, when set, replaces time.Since(base): the tests' fake clock,
	// which makes the window's counting and the latencies exact numbers.
	clock func() time.Duration
}

func newWindow(warmup, length time.Duration) *window {
	// Go's monotonic readings are not CLOCK_MONOTONIC's values, which the
	// clients read; the two are tied once, here, to well under a
	// microsecond.
	m := clockMonotonic()
	return &window{base: time.Now(), baseMono: m, start: warmup, end: warmup + length, length: length}
}

func (w *window) since() time.Duration {
	if w.clock != nil {
		return w.clock()
	}
	return time.Since(w.base)
}
func (w *window) mono(d time.Duration) int64 {
	return w.baseMono + int64(d)
}

func clockMonotonic() int64 {
	var ts syscall.Timespec
	const clockMonotonicID = 1 // CLOCK_MONOTONIC in <linux/time.h>
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonicID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}

type server struct {
	nc   net.Conn
	br   *bufio.Reader
	hdr  [ws.MaxHeaderSize]byte
	ctrl [ws.MaxControlFramePayloadSize]byte
	sink []byte

	think time.Duration // --think: the policy's time per infer
	count int           // exchanges in the window
	// Latencies of the window's exchanges in ns (saturated at ~4.3 s),
	// appended within their preallocated capacity; dropped counts those
	// that did not fit.
	turn, inferFeedback []uint32
	dropped             int
}

// serve runs exchanges until the first whose feedback is read after the
// window, then calls stopping and returns (the caller closes).
func (s *server) serve(actions *actions, w *window, stopping func()) error {
	var sent time.Duration // when the previous action was written; 0: none yet
	for {
		if err := s.readMessage(); err != nil {
			return fmt.Errorf("reading an infer: %w", err)
		}
		infer := w.since()
		for s.think > 0 && w.since()-infer < s.think {
			// A policy computing: spun, not slept, so that the wait
			// is as long as asked (a sleep's timer overshoots it).
		}
		if err := s.send(actions.next()); err != nil {
			return fmt.Errorf("sending an action: %w", err)
		}
		prev := sent
		sent = w.since()
		if err := s.readMessage(); err != nil {
			return fmt.Errorf("reading a feedback: %w", err)
		}
		fb := w.since()
		if fb >= w.end {
			stopping()
			return nil
		}
		if fb < w.start {
			continue
		}
		s.count++
		if prev == 0 || len(s.turn) == cap(s.turn) {
			s.dropped++
			continue
		}
		s.turn = append(s.turn, saturate(infer-prev))
		s.inferFeedback = append(s.inferFeedback, saturate(fb-infer))
	}
}

func saturate(d time.Duration) uint32 {
	if d < 0 {
		return 0
	}
	if d > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(d)
}

// report prints the run's totals, evenness and latency percentiles.
func report(out io.Writer, servers []*server, length time.Duration) {
	total, least, most, dropped := 0, math.MaxInt, 0, 0
	var turn, ifb []uint32
	for _, s := range servers {
		total += s.count
		least, most = min(least, s.count), max(most, s.count)
		dropped += s.dropped
		turn = append(turn, s.turn...)
		ifb = append(ifb, s.inferFeedback...)
	}
	fmt.Fprintf(out, "%d exchanges in %.3f s\n", total, length.Seconds())
	fmt.Fprintf(out, "exchanges/s %.1f\n", float64(total)/length.Seconds())
	fmt.Fprintf(out, "conn_exchanges min %d max %d\n", least, most)
	fmt.Fprintf(out, "latency_us turnaround %s\n", percentiles(turn))
	fmt.Fprintf(out, "latency_us infer_feedback %s\n", percentiles(ifb))
	if dropped > len(servers) {
		// One per connection is expected: a first exchange has no
		// previous action.
		fmt.Fprintf(out, "latency_unrecorded %d\n", dropped)
	}
}

// quantiles are those percentiles prints, as fractions, as labels, and
// the fewest samples each needs: 10/(1-q), at least 10 samples beyond it
// (the maximum needs one).
var quantiles = []struct {
	q     float64
	label string
	least int
}{{0.5, "p50", 20}, {0.9, "p90", 100}, {0.99, "p99", 1000}, {0.999, "p99.9", 10_000}, {0.9999, "p99.99", 100_000},
	{1, "max", 1}}

// percentiles sorts ns (nanoseconds) and returns "n N p50 X p90 X ... max
// X" in microseconds, nearest rank, with "-" for a percentile that has too
// few samples (quantiles).
func percentiles(ns []uint32) string {
	slices.Sort(ns)
	var b strings.Builder
	fmt.Fprintf(&b, "n %d", len(ns))
	for _, q := range quantiles {
		if len(ns) < q.least {
			fmt.Fprintf(&b, " %s -", q.label)
			continue
		}
		k := int(math.Ceil(q.q*float64(len(ns)))) - 1
		fmt.Fprintf(&b, " %s %.1f", q.label, float64(ns[max(0, min(k, len(ns)-1))])/1e3)
	}
	return b.String()
}

var errClosed = errors.New("the client closed the connection")

// readMessage reads and discards one data message (all its frames),
// answering pings on the way.
func (s *server) readMessage() error {
	for {
		h, err := ws.ReadHeaderBuffer(s.br, s.hdr[:])
		if err != nil {
			return err
		}
		if h.OpCode.IsControl() {
			if h.Length > int64(len(s.ctrl)) {
				return fmt.Errorf("control frame of %d bytes", h.Length)
			}
			p := s.ctrl[:h.Length]
			if _, err := io.ReadFull(s.br, p); err != nil {
				return err
			}
			switch h.OpCode {
			case ws.OpClose:
				return errClosed
			case ws.OpPing:
				if h.Masked {
					ws.Cipher(p, h.Mask, 0)
				}
				if err := s.send(frame(ws.OpPong, p)); err != nil {
					return err
				}
			}
			continue
		}
		// The payload is discarded without unmasking: the server's work is
		// the same for every client and as small as it can be.
		for left := h.Length; left > 0; {
			k := int64(len(s.sink))
			if k > left {
				k = left
			}
			n, err := s.br.Read(s.sink[:k])
			left -= int64(n)
			if err != nil && left > 0 {
				return err
			}
		}
		if h.Fin {
			return nil
		}
	}
}

func (s *server) send(b []byte) error {
	_, err := s.nc.Write(b)
	return err
}

// frame is one unmasked server frame holding payload.
func frame(op ws.OpCode, payload []byte) []byte {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(payload))}
	var b strings.Builder
	_ = ws.WriteHeader(&b, h)
	return append([]byte(b.String()), payload...)
}

// actionMessage encodes the action of n envs and says where its float32
// data is in it: msg[data[0]:data[1]].
func actionMessage(n, horizon, dim int) (msg []byte, data [2]int, err error) {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	chunk := wire.Array{DType: wire.Float32, Shape: []int{horizon, n, dim}, Data: make([]byte, 4*horizon*n*dim)}
	var m wire.Message
	if err := wire.EncodeAction(&m, ids, &chunk); err != nil {
		return nil, data, err
	}
	for i, off := 0, 0; i < m.Segments(); i++ {
		if seg := m.Segment(i); len(seg) > 0 && &seg[0] == &chunk.Data[0] { // the data, referenced in place
			return m.AppendTo(nil), [2]int{off, off + len(seg)}, nil
		}
		off += len(m.Segment(i))
	}
	return nil, data, errors.New("the action's data is not a segment of its message")
}

// actions is one connection's action frame, whose float32 data next
// rewrites before each send.
type actions struct {
	frame []byte
	data  []byte // within frame
	rng   uint32 // xorshift32 state, never 0
}

// newActions frames action, whose float32 data is action[data[0]:data[1]]
// (actionMessage), for one connection (seed tells connections apart).
func newActions(action []byte, data [2]int, seed uint32) *actions {
	f := frame(ws.OpBinary, action)
	at := len(f) - len(action)
	return &actions{frame: f, data: f[at+data[0] : at+data[1]], rng: 2463534242 ^ seed*0x9e3779b9 | 1}
}

// next writes new values in [-1, 1) into the data, as a policy's output
// would vary (sign, exponent and mantissa: most bytes change), and
// returns the frame. About 3 ns a value.
func (a *actions) next() []byte {
	x := a.rng
	for k := 0; k+4 <= len(a.data); k += 4 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		v := float32(int32(x)>>8) / (1 << 23) // 24 bits: exact in a float32, so never 1
		binary.LittleEndian.PutUint32(a.data[k:], math.Float32bits(v))
	}
	a.rng = x
	return a.frame
}

func metadataMessage(horizon, dim int) ([]byte, error) {
	md := wire.Metadata{
		ProtocolVersion: wire.Opt[int64]{Value: 1, Set: true},
		Server:          wire.Opt[string]{Value: "plugrl-bench-server", Set: true},
		ActionHorizon:   wire.Opt[int64]{Value: int64(horizon), Set: true},
		ActionDim:       wire.Opt[int64]{Value: int64(dim), Set: true},
	}
	var m wire.Message
	if err := wire.EncodeMetadata(&m, &md); err != nil {
		return nil, err
	}
	return m.AppendTo(nil), nil
}

// workloadSizes encodes the bench workload (bench/bench_client.cpp's)
// with core/wire and returns the infer's and the feedback's lengths.
func workloadSizes(n, cams, img, state int) (infer, feedback int, err error) {
	var obs wire.Observation
	for c := 0; c < cams; c++ {
		obs.Images = append(obs.Images, wire.NamedArray{Name: fmt.Sprintf("cam%d", c),
			Array: wire.Array{DType: wire.Uint8, Shape: []int{n, img, img, 3}, Data: make([]byte, n*img*img*3)}})
	}
	if state > 0 {
		obs.States = []wire.NamedArray{{Name: "state",
			Array: wire.Array{DType: wire.Float64, Shape: []int{n, state}, Data: make([]byte, 8*n*state)}}}
	}
	for i := 0; i < n; i++ {
		obs.Text = append(obs.Text, "pick up the red block")
	}
	idx := make([]int64, n)
	for i := range idx {
		idx[i] = int64(i)
	}
	zeros := make([]int64, n)
	flags := make([]bool, n)
	var m wire.Message
	if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: idx, StepIDs: zeros, Obs: &obs}); err != nil {
		return 0, 0, err
	}
	infer = m.Len()
	fb := wire.Feedback{EnvIndices: idx, StepIDs: zeros, Obs: &obs, Rewards: make([]float32, n), Terminated: flags, Truncated: flags}
	if err := wire.EncodeFeedback(&m, &fb); err != nil {
		return 0, 0, err
	}
	return infer, m.Len(), nil
}
