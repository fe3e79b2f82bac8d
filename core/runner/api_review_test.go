package runner_test

// A Go user's use of the runner with its client closed from another
// goroutine, from a second review (2026-12-04): it failed before its fix.

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// freeingAlloc is an Allocator that poisons what it frees, as a C
// allocator's free makes it garbage: a view read after the free reads
// 0xdd.
type freeingAlloc struct{ freed atomic.Int64 }

func (a *freeingAlloc) Grow(buf []byte, keep, size int) []byte {
	nb := make([]byte, size)
	copy(nb, buf[:keep])
	return nb
}

func (a *freeingAlloc) Free(buf []byte) {
	buf = buf[:cap(buf)]
	for i := range buf {
		buf[i] = 0xdd
	}
	a.freed.Add(1)
}

// TestCloseUnderRunner: Client.Close may be called from any goroutine,
// also while another is inside a call; a runner's Act read the action's
// view and released it after Infer had returned, outside the client's
// call, so a Close landing there freed the receive buffer under the copy
// (a use after free with a C allocator) and raced on the connection (go
// test -race), and the loop's next call got KindBusy. Every action the
// runner gives must be the server's (the refserver's zero policy: 0),
// and the loop must end with KindClosed or KindInterrupted.
func TestCloseUnderRunner(t *testing.T) {
	s := refserver.New(refserver.Config{Horizon: 1, ActionDim: 2, FeedbackTimeout: 5 * time.Second})
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range rounds {
		alloc := &freeingAlloc{}
		c, err := client.Dial(context.Background(), client.Options{URL: url, ReceiveTimeout: 5 * time.Second,
			CloseTimeout: 50 * time.Millisecond, Alloc: alloc})
		if err != nil {
			t.Fatal(err)
		}
		r, err := runner.New(c, runner.Config{Envs: 2})
		if err != nil {
			t.Fatal(err)
		}
		obs := stateObs(2)
		out := &wire.Array{DType: wire.Float32, Data: make([]byte, 2*2*4)}
		done := make(chan error)
		go func() {
			f := make([]bool, 2)
			for {
				if err := r.Act(obs, out); err != nil {
					done <- err
					return
				}
				for _, b := range out.Data {
					if b != 0 {
						done <- &client.Error{Kind: client.KindInternal, Msg: "an action read from freed memory"}
						return
					}
				}
				if err := r.Report(obs, make([]float64, 2), f, f, nil); err != nil {
					done <- err
					return
				}
			}
		}()
		stop := make(chan struct{})
		statsDone := make(chan struct{})
		go func() { // Stats may be read from any goroutine, also while closing
			defer close(statsDone)
			for {
				select {
				case <-stop:
					return
				default:
					_ = r.Stats()
					time.Sleep(50 * time.Microsecond)
				}
			}
		}()
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		c.Close()
		close(stop)
		<-statsDone
		if err := <-done; client.KindOf(err) != client.KindClosed && client.KindOf(err) != client.KindInterrupted {
			t.Fatalf("round %d: the loop ended with %v; want KindClosed or KindInterrupted", i, err)
		}
		r.Close()
	}
}
