package client_test

// A Go user's misuse of the API, from a review (2026-12-03): each case
// failed before its fix.

import (
	"context"
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
