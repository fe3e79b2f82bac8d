package conn

import (
	"testing"
	"time"
)

// TestYieldGap: the process yields once per yieldEvery per P in use: a
// lone connection every yieldEvery however many Ps the host has, 64 on 2
// Ps twice as often, 8 on 64 Ps once per connection.
func TestYieldGap(t *testing.T) {
	for _, tc := range []struct {
		busy, procs int32
		want        time.Duration
	}{
		{1, 64, yieldEvery},
		{1, 2, yieldEvery},
		{64, 2, yieldEvery / 2},
		{8, 64, yieldEvery / 8},
		{0, 2, yieldEvery},
	} {
		if got := yieldGap(tc.busy, tc.procs); got != tc.want {
			t.Errorf("yieldGap(%d busy, %d procs) = %v, want %v", tc.busy, tc.procs, got, tc.want)
		}
	}
}
