package main

import (
	"testing"

	"github.com/plugrl/libplugrl/core/client"
)

// TestStatusStrMatchesKinds: plugrl_status_str, which answers in C so that
// a signal handler may call it (exports.c), names every status as
// core/client's Kinds does, the one table of the statuses' names, and
// any other value "unknown status".
func TestStatusStrMatchesKinds(t *testing.T) {
	for i, k := range client.Kinds {
		if got := cStatusStr(i); got != k.Name {
			t.Errorf("plugrl_status_str(%s) = %q; want %q (client.Kinds)", k.C, got, k.Name)
		}
	}
	for _, v := range []int{-1, -1 << 31, len(client.Kinds), len(client.Kinds) + 1, 1000, 1<<31 - 1} {
		if got := cStatusStr(v); got != "unknown status" {
			t.Errorf("plugrl_status_str(%d) = %q; want \"unknown status\"", v, got)
		}
	}
}

// TestDtypeSizeMatchesWire: plugrl_dtype_size, C as well, gives each
// dtype's size as the wire's dtype of that enum value has it, and 0 for a
// value that is no dtype.
func TestDtypeSizeMatchesWire(t *testing.T) {
	for d := -2; d < len(dtypes)+3; d++ {
		if got, want := cDtypeSize(d), wireDtypeSize(d); got != want {
			t.Errorf("plugrl_dtype_size(%d) = %d; want %d", d, got, want)
		}
	}
}
