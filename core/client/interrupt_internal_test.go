package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// lateInterruptClient connects a client to a refserver with faults and
// returns an infer and a feedback for one env.
func lateInterruptClient(t *testing.T, faults refserver.Faults) (*Client, *refserver.Server, func() (*wire.Action, error), func() error) {
	t.Helper()
	s := refserver.New(refserver.Config{Horizon: 2, ActionDim: 1, FeedbackTimeout: 5 * time.Second, Faults: faults})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := Dial(context.Background(), Options{URL: url, ReceiveTimeout: 5 * time.Second, ReconnectBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	state := make([]float64, 4)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 4}, Data: wire.BytesOf(state)}}}}
	env, zero, no := []int64{0}, []int64{0}, []bool{false}
	infer := func() (*wire.Action, error) {
		return c.Infer(&wire.Infer{EnvIndices: env, StepIDs: zero, Obs: obs})
	}
	feedback := func() error {
		return c.Feedback(&wire.Feedback{EnvIndices: env, StepIDs: zero, Obs: obs, Rewards: []float32{1}, Terminated: no, Truncated: no})
	}
	return c, s, infer, feedback
}

// TestInterruptAsInferCompletes: an interrupt that lands after the action
// arrived, while Infer decodes and checks it, is pending for the next
// call. It does not end the connection, so the feedback owed for that
// action is sent (plugrl.h: owed feedback is not refused for an interrupt
// that came before it). The infer after it is the call the interrupt ends.
func TestInterruptAsInferCompletes(t *testing.T) {
	_, s, infer, feedback := lateInterruptClient(t, refserver.Faults{})
	testInferDone = func(c *Client) { c.Interrupt() }
	_, err := infer()
	testInferDone = nil
	if err != nil {
		t.Fatalf("infer: %v", err)
	}
	if err := feedback(); err != nil {
		t.Fatalf("feedback owed for the action, after an interrupt as the infer completed: %v (want it sent)", err)
	}
	if _, err := infer(); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("the infer after: got %v, want interrupted", err)
	}
	if _, err := infer(); err != nil {
		t.Fatalf("the infer after the interrupted one: %v (want the same connection)", err)
	}
	if st := s.Stats(); st.Connections != 1 {
		t.Fatalf("server saw %d connections, want 1: the interrupt must not have ended the connection", st.Connections)
	}
}

// TestInterruptAsActionArrives: an interrupt that lands in Infer's wait
// just as the action is read has ended the connection; Infer reports it
// instead of handing out an action whose feedback could not be sent.
func TestInterruptAsActionArrives(t *testing.T) {
	c, _, infer, feedback := lateInterruptClient(t, refserver.Faults{})
	testActionRead = func(c *Client) { c.Interrupt() }
	_, err := infer()
	testActionRead = nil
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("infer: got %v, want interrupted", err)
	}
	if err := feedback(); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("feedback after an interrupted infer: got %v, want out of order (nothing is owed)", err)
	}
	if _, err := infer(); !errors.Is(err, ErrReconnected) {
		t.Fatalf("the infer after: got %v, want reconnected", err)
	}
	if _, err := infer(); err != nil {
		t.Fatal(err)
	}
	if err := feedback(); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Interrupts; got != 1 {
		t.Fatalf("stats count %d interrupts, want 1", got)
	}
	// The server sent env 0 its action: the feedback it is owed went
	// with the connection, and is counted as dropped.
	if got := c.Stats().FeedbackRowsDropped; got != 1 {
		t.Fatalf("stats count %d feedback rows dropped, want 1 (the action's env)", got)
	}
}

// stallingProxy forwards its first connection to target until armed; then the
// first bytes the client sends reset it (RST). Later connections are
// accepted and never answered (a handshake that hangs).
type stallingProxy struct {
	ln       net.Listener
	armed    atomic.Bool
	accepted chan struct{} // a later connection was accepted
	mu       sync.Mutex
	conns    []net.Conn
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{ln: ln, accepted: make(chan struct{}, 16)}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			if n > 0 {
				p.accepted <- struct{}{}
				go io.Copy(io.Discard, c)
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, s)
			p.mu.Unlock()
			go io.Copy(c, s)
			go func() {
				buf := make([]byte, 64<<10)
				for {
					k, err := c.Read(buf)
					if k > 0 && p.armed.Load() {
						c.(*net.TCPConn).SetLinger(0)
						c.Close()
						s.Close()
						return
					}
					if k > 0 {
						if _, err := s.Write(buf[:k]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// TestInterruptEndsFeedbackReconnect: a Feedback whose send fails
// reconnects; an Interrupt (or a Close, a runner free) from another
// goroutine during that reconnect ends it at once, not when the connect
// attempt times out: the reconnect is inside the call's blocking section.
func TestInterruptEndsFeedbackReconnect(t *testing.T) {
	s := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1, FeedbackTimeout: 30 * time.Second})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := newStallingProxy(t, url[len("ws://"):])
	const connectTimeout = 3 * time.Second
	c, err := Dial(context.Background(), Options{URL: "ws://" + p.ln.Addr().String(), ConnectTimeout: connectTimeout,
		MetadataTimeout: connectTimeout, ReceiveTimeout: 5 * time.Second, ReconnectTimeout: 20 * time.Second,
		ReconnectBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	small := make([]float64, 4)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 4}, Data: wire.BytesOf(small)}}}}
	if _, err := c.Infer(&wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs}); err != nil {
		t.Fatal(err)
	}
	big := make([]float64, 4<<20) // 32 MiB: the send blocks until the proxy resets it
	bigObs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float64, Shape: []int{1, len(big)}, Data: wire.BytesOf(big)}}}}
	p.armed.Store(true)
	var interruptedAt atomic.Int64
	go func() {
		<-p.accepted // Feedback's send failed, and its reconnect is dialling
		time.Sleep(100 * time.Millisecond)
		interruptedAt.Store(time.Now().UnixNano())
		c.Interrupt()
	}()
	err = c.Feedback(&wire.Feedback{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: bigObs, Rewards: []float32{1}, Terminated: []bool{false}, Truncated: []bool{false}})
	done := time.Now()
	at := interruptedAt.Load()
	if at == 0 {
		t.Fatalf("feedback returned %v before the reconnect was interrupted", err)
	}
	took := done.Sub(time.Unix(0, at))
	t.Logf("feedback: %v; returned %v after the interrupt", err, took)
	if took > time.Second {
		t.Fatalf("Feedback returned %v after Interrupt (its reconnect was not interrupted; connect timeout %v)", took, connectTimeout)
	}
}
