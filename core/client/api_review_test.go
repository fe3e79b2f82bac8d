package client_test

// A Go user's use of the API from other goroutines, from a second review
// (2026-12-04): each case failed before its fix.

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/hostile"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestCallDuringCloseIsClosed: a call that begins while Close, on another
// goroutine, waits for the server's close frame got KindBusy ("a client
// serves one thread at a time"), which a loop that stops at KindClosed
// took for a bug of its own.
func TestCallDuringCloseIsClosed(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.CloseNoReply})
	c, err := hostileDial(t, s.URL(), func(o *client.Options) { o.CloseTimeout = time.Second })
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	time.Sleep(200 * time.Millisecond) // Close is waiting for the close frame that never comes
	w := newWorld()
	_, err = w.infer(c)
	if client.KindOf(err) != client.KindClosed {
		t.Errorf("Infer while another goroutine closes: %v; want KindClosed", err)
	}
	if err := w.feedback(c); client.KindOf(err) != client.KindClosed {
		t.Errorf("Feedback while another goroutine closes: %v; want KindClosed", err)
	}
	<-closed
}

// TestOwnerMethodsDuringClose: ReleaseAction, Abandon and GiveUpOwed
// belong to the goroutine that makes the calls, and Close may run on any
// other meanwhile; they read and changed the connection Close was
// closing, unguarded (go test -race; Abandon could find it gone halfway).
func TestOwnerMethodsDuringClose(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1})
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 100 {
		c := dial(t, url, func(o *client.Options) { o.CloseTimeout = 50 * time.Millisecond })
		w := newWorld()
		done := make(chan error)
		go func() {
			for k := 0; ; k++ {
				if _, err := w.infer(c); err != nil {
					if client.KindOf(err) == client.KindReconnected {
						continue
					}
					done <- err
					return
				}
				c.ReleaseAction()
				switch k % 3 {
				case 1:
					c.GiveUpOwed()
				case 2:
					c.Abandon()
					continue
				}
				if err := w.feedback(c); err != nil {
					done <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
		c.Close()
		if err := <-done; client.KindOf(err) != client.KindClosed && client.KindOf(err) != client.KindInterrupted {
			t.Fatalf("round %d: the loop ended with %v; want KindClosed or KindInterrupted", i, err)
		}
	}
}

// TestInferFuncUse: InferFunc's use sees the action inside the call, and
// its error abandons the action: the next infer reconnects.
func TestInferFuncUse(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1})
	c := dial(t, url, nil)
	w := newWorld()
	req := &wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs}
	var h int
	if err := c.InferFunc(req, func(a *wire.Action) error { h = a.Horizon(); return nil }); err != nil || h != 2 {
		t.Fatalf("InferFunc: %v, horizon %d; want nil, 2", err, h)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	mine := errors.New("cannot step this")
	if err := c.InferFunc(req, func(*wire.Action) error { return mine }); err != mine {
		t.Fatalf("InferFunc whose use fails: %v; want use's error", err)
	}
	if _, err := w.infer(c); !errors.Is(err, client.ErrReconnected) {
		t.Fatalf("infer after an abandoned action: %v; want ErrReconnected", err)
	}
	if err := c.InferFunc(req, nil); client.KindOf(err) != client.KindInvalid {
		t.Fatalf("InferFunc with nil use: %v; want KindInvalid", err)
	}
}
