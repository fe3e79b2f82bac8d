//go:build linux && !race && !asan && !msan

// The race detector and the sanitizers take such a fault themselves.

package client_test

import (
	"errors"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/badmem"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestFeedbackFaultDropsItsEnvs: a feedback whose observation faults while
// it is sent (the C API's caller gave an unmapped array: its recover then
// abandons the connection) loses its envs' feedback as a failed send
// does: FeedbackRowsDropped counts them and the ledger's close record
// names them, with the abandon's reason. Before, their flags were cleared
// and the panic skipped the count: the record said nothing was dropped.
func TestFeedbackFaultDropsItsEnvs(t *testing.T) {
	mem, page := badmem.TwoPages(t)
	_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1})
	path := filepath.Join(t.TempDir(), "l")
	c := dial(t, url, func(o *client.Options) { o.LedgerPath = path; o.MaxReconnects = -1 })
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	bad := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{
		DType: wire.Uint8, Shape: []int{1, 2 * page}, Data: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), 2*page)}}}}
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if recover() == nil {
				t.Fatal("a feedback over an unreadable page did not fault")
			}
			c.AbandonBecause(errors.New("the observation faulted"))
		}()
		_ = c.Feedback(&wire.Feedback{EnvIndices: w.env, StepIDs: w.steps, Obs: bad, Rewards: w.rew, Terminated: w.f, Truncated: w.f})
	}()
	if n := c.Stats().FeedbackRowsDropped; n != 1 {
		t.Errorf("FeedbackRowsDropped %d after the faulted feedback, want 1", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	closes := ledgerCloses(t, path)
	if len(closes) != 1 {
		t.Fatalf("%d close records, want 1", len(closes))
	}
	if r := closes[0]; r.Err != "the observation faulted" || !slices.Equal(r.Dropped, []int64{0}) {
		t.Fatalf("close record: error %q dropped %v; want the abandon's reason and dropped [0]", r.Err, r.Dropped)
	}
}
