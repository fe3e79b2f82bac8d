package client_test

// A Go user's misuse of the API, from a review (2026-12-03): each case
// failed before its fix.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/hostile"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestDialCancelDuringMetadata: Connect's doc says cancelling ctx ends it
// with KindInterrupted; while it waited for metadata, the cancel reached
// only the finished dial, and Dial waited for MetadataTimeout.
func TestDialCancelDuringMetadata(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.NoMetadata})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := client.Dial(ctx, client.Options{URL: s.URL(), MetadataTimeout: time.Minute, CloseTimeout: 100 * time.Millisecond})
	if client.KindOf(err) != client.KindInterrupted {
		t.Fatalf("Dial with ctx cancelled during the metadata wait: %v; want KindInterrupted", err)
	}
}

// TestHugeTimeoutsSaturate: a receive or metadata timeout near
// math.MaxInt64 overflowed the poller's deadline, which then ended the
// wait at its next look (after about 1 s) as a timeout.
func TestHugeTimeoutsSaturate(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.SlowAction, ActionDelay: 2500 * time.Millisecond})
	c, err := hostileDial(t, s.URL(), func(o *client.Options) {
		o.ReceiveTimeout = time.Duration(1<<63 - 1)
		o.MetadataTimeout = time.Duration(1<<63 - 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newWorld().infer(c); err != nil {
		t.Fatalf("a 292-year receive timeout, an action after 2.5 s: %v", err)
	}
}

// TestReuseFlagsMatchEnvs: reuse flags past the env count were dropped
// and the request sent; EncodeInfer refuses them, and so does Infer now.
func TestReuseFlagsMatchEnvs(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1})
	c := dial(t, url, nil)
	w := newWorld()
	_, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: []bool{false, true, true}})
	if client.KindOf(err) != client.KindInvalid {
		t.Fatalf("3 reuse flags for 1 env: %v; want KindInvalid", err)
	}
	if _, err := w.infer(c); err != nil {
		t.Fatalf("the client after the refused request: %v", err)
	}
}

// noPanic runs f and turns a panic into an error, so that a case reports
// rather than ends the test binary.
func noPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("PANIC: %v", p)
		}
	}()
	return f()
}

// TestZeroValueClient: a Client not made by New or Dial (a zero value, a
// struct field never set) panicked in Infer; every call says what is
// wrong instead, and the rest do nothing.
func TestZeroValueClient(t *testing.T) {
	var c client.Client
	w := newWorld()
	if err := noPanic(func() error { _, err := w.infer(&c); return err }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("Infer on a zero Client: %v; want KindInvalid", err)
	}
	if err := noPanic(func() error { return w.feedback(&c) }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("Feedback on a zero Client: %v; want KindInvalid", err)
	}
	if err := noPanic(func() error { return c.Connect(context.Background()) }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("Connect on a zero Client: %v; want KindInvalid", err)
	}
	err := noPanic(func() error {
		c.Interrupt()
		c.ReleaseAction()
		c.Abandon()
		c.GiveUpOwed()
		_ = c.Stats()
		return c.Close()
	})
	if err != nil {
		t.Errorf("the other methods of a zero Client: %v", err)
	}
}

// TestNilContext: Dial(nil, ...) and Connect(nil) panicked in
// context.AfterFunc; they are KindInvalid, as net/http's nil Context is
// an error.
func TestNilContext(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1})
	if err := noPanic(func() error { _, err := client.Dial(nil, client.Options{URL: url}); return err }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("Dial(nil, ...): %v; want KindInvalid", err)
	}
}

// TestConnectContextCause: a ctx that ended Dial came back as a bare
// "interrupted", which errors.Is(err, context.DeadlineExceeded) or
// context.Canceled did not find, and whose message did not say that the
// caller's deadline had passed. It is still KindInterrupted.
func TestConnectContextCause(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.NoMetadata})
	o := client.Options{URL: s.URL(), MetadataTimeout: time.Minute, CloseTimeout: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := client.Dial(ctx, o)
	if client.KindOf(err) != client.KindInterrupted || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial past its ctx's deadline: %v; want KindInterrupted that errors.Is context.DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = client.Dial(ctx, o)
	if client.KindOf(err) != client.KindInterrupted || !errors.Is(err, context.Canceled) {
		t.Errorf("Dial with a cancelled ctx: %v; want KindInterrupted that errors.Is context.Canceled", err)
	}
	c, err := client.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(100*time.Millisecond, c.Interrupt)
	if err := c.Connect(context.Background()); client.KindOf(err) != client.KindInterrupted || errors.Is(err, context.Canceled) {
		t.Errorf("Connect ended by Interrupt: %v; want KindInterrupted, not a context's end", err)
	}
}
