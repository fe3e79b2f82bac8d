// Command plugrl-bench-server is the lean server of `./build.sh bench`: it
// measures how many infer/action/feedback exchanges per second one client
// achieves, the same way for every client, so that libplugrl can be put
// beside the transport floor (bench/bench_floor.cpp) that sends
// frames of exactly the same sizes with no encoding at all.
//
//	plugrl-bench-server [--addr 127.0.0.1:0] --envs N [--horizon 8] [--action-dim 7]
//	                    [--warmup 500ms] [--seconds 2s]
//	plugrl-bench-server --sizes --envs N --cams C --img S --state D
//
// Serving, it prints its ws:// URL as the first line of stdout, accepts one
// connection, sends metadata (action_horizon, action_dim), and then loops:
// read one data frame (the infer; its bytes are not parsed, so the floor
// client's frames, which are not msgpack, are served the same way), send a
// precomputed action message ([H, n, D] <f4 zeros, env_ids 0..n-1), read
// one data frame (the feedback). After the warm-up it counts exchanges for
// the window, then closes with 1001 "plugrl-server-stop" and prints
// "exchanges/s X" as the last line of stdout. The loop allocates nothing.
//
// With --sizes it prints the payload sizes libplugrl's encoder (core/wire)
// gives the bench workload's infer and feedback, and the action's, as
// "infer=I feedback=F action=A", for the floor client's --infer-bytes and
// --feedback-bytes.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/plugrl/libplugrl/core/wire"
)

const stopReason = wire.ReasonStop

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
	if *envs < 1 || *horizon < 1 || *dim < 1 {
		fmt.Fprintln(stderr, "plugrl-bench-server: --envs, --horizon and --action-dim must be positive")
		return 2
	}
	action, err := actionMessage(*envs, *horizon, *dim)
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
	nc, err := ln.Accept()
	ln.Close()
	if err != nil {
		fmt.Fprintln(stderr, "plugrl-bench-server:", err)
		return 1
	}
	defer nc.Close()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := ws.Upgrade(nc); err != nil {
		fmt.Fprintln(stderr, "plugrl-bench-server: handshake:", err)
		return 1
	}
	_ = nc.SetDeadline(time.Time{})
	s := &server{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), sink: make([]byte, 256<<10)}
	if err := s.send(frame(ws.OpBinary, meta)); err != nil {
		fmt.Fprintln(stderr, "plugrl-bench-server: metadata:", err)
		return 1
	}
	actionFrame := frame(ws.OpBinary, action)

	var (
		count      int
		start, now time.Time
		counting   bool
	)
	begin := time.Now()
	for {
		if err := s.readMessage(); err != nil {
			fmt.Fprintln(stderr, "plugrl-bench-server: reading an infer:", err)
			return 1
		}
		if err := s.send(actionFrame); err != nil {
			fmt.Fprintln(stderr, "plugrl-bench-server: sending an action:", err)
			return 1
		}
		if err := s.readMessage(); err != nil {
			fmt.Fprintln(stderr, "plugrl-bench-server: reading a feedback:", err)
			return 1
		}
		now = time.Now()
		if !counting {
			if now.Sub(begin) >= *warmup {
				counting, start = true, now
			}
			continue
		}
		count++
		if now.Sub(start) >= *window {
			break
		}
	}
	elapsed := now.Sub(start)
	// End the run as a PlugRL server does, then wait briefly for the
	// client's close (its next infer may come first).
	_ = s.send(frame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusGoingAway, stopReason)))
	_ = nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	for s.readMessage() == nil {
	}
	rate := float64(count) / elapsed.Seconds()
	fmt.Fprintf(stdout, "%d exchanges in %.3f s\n", count, elapsed.Seconds())
	fmt.Fprintf(stdout, "exchanges/s %.1f\n", rate)
	return 0
}

type server struct {
	nc   net.Conn
	br   *bufio.Reader
	hdr  [ws.MaxHeaderSize]byte
	ctrl [ws.MaxControlFramePayloadSize]byte
	sink []byte
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

func actionMessage(n, horizon, dim int) ([]byte, error) {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	chunk := wire.Array{DType: wire.Float32, Shape: []int{horizon, n, dim}, Data: make([]byte, 4*horizon*n*dim)}
	var m wire.Message
	if err := wire.EncodeAction(&m, ids, &chunk); err != nil {
		return nil, err
	}
	return m.AppendTo(nil), nil
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
