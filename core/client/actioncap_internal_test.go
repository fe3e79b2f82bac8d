package client

import (
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

// TestActionCapNeverAboveDefault: metadata is the server's word, so the
// action cap it derives may lower DefaultMaxMessageSize but never raise
// it: a server declaring a huge action_horizon x action_dim must not make
// the client accept (and allocate for) more than the default. A mutant
// that dropped the clamp survived every other test, whose metadata
// declares small shapes.
func TestActionCapNeverAboveDefault(t *testing.T) {
	for _, tc := range []struct{ h, d, n int64 }{
		{1 << 20, 1 << 10, 1}, // 8 GiB of float64, within the overflow guard
		{1 << 16, 1 << 8, 64},
		{1000, 1000, 1}, // 8 MB of float64: the derived cap is below the default
		{8, 7, 1},
	} {
		c := &Client{meta: &wire.Metadata{
			ActionHorizon: wire.Opt[int64]{Value: tc.h, Set: true},
			ActionDim:     wire.Opt[int64]{Value: tc.d, Set: true},
		}}
		got := c.actionCap(int(tc.n))
		if got > DefaultMaxMessageSize {
			t.Errorf("action_horizon %d, action_dim %d, %d envs: cap %d, above the default %d", tc.h, tc.d, tc.n, got, int64(DefaultMaxMessageSize))
		}
		if need := tc.h * tc.d * tc.n * 8; need < DefaultMaxMessageSize && got < need {
			t.Errorf("action_horizon %d, action_dim %d, %d envs: cap %d below the %d bytes of a float64 action", tc.h, tc.d, tc.n, got, need)
		}
	}
}
