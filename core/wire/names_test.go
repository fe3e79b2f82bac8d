package wire

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// inferWithStates is an infer for env 0 whose states map holds one <f8
// [1, 0] array per name (a zero-width array: the smallest valid entry).
// Built by hand: the encoder's own checks are not under test here.
func inferWithStates(names []string) []byte {
	one := []byte{0, 0, 0, 0, 0, 0, 0, 0}
	e := mp(nil).m(4).s("message_type").s("infer").
		s("env_indices").val(nd("<i8", one, 1)).
		s("step_ids").val(nd("<i8", one, 1)).
		s("data").m(3).s("images").m(0).s("text").null().
		s("states").m(len(names))
	for _, n := range names {
		e = e.s(n).val(nd("<f8", nil, 1, 0))
	}
	return e
}

// TestDecodeManyStateNames: the duplicate-name check of an observation's
// map is not quadratic. 131072 names, the message 6 MB, take well under a
// second when sorted and minutes pairwise (40000 names took 3.4 s). The
// bound is a generous liveness bound, not a speed requirement; a run that
// overstays is left behind, as in within1s.
func TestDecodeManyStateNames(t *testing.T) {
	const n = 1 << 17
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("state-%07d", n-i) // not in sorted order
	}
	msg := inferWithStates(names)
	done := make(chan error, 1)
	go func() {
		in, err := DecodeInfer(msg)
		if err == nil && len(in.Obs.States) != n {
			err = fmt.Errorf("%d states decoded, want %d", len(in.Obs.States), n)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("decoding %d state names did not finish in 30 s: the duplicate check is quadratic", n)
	}
	// The order of the map is kept, and a duplicate far apart is found.
	names[n-1] = names[0]
	_, err := DecodeInfer(inferWithStates(names))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), fmt.Sprintf("name %q appears twice", names[0])) {
		t.Fatalf("duplicate at the two ends: %v", err)
	}
}

// TestDecodeNamesSmallDuplicate: the pairwise path for a few names.
func TestDecodeNamesSmallDuplicate(t *testing.T) {
	_, err := DecodeInfer(inferWithStates([]string{"a", "b", "a"}))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), `infer.data.states: name "a" appears twice`) {
		t.Fatalf("%v", err)
	}
	in, err := DecodeInfer(inferWithStates([]string{"b", "a", "c"}))
	if err != nil || in.Obs.States[0].Name != "b" || in.Obs.States[2].Name != "c" {
		t.Fatalf("%v", err)
	}
}

// TestDecodeNamesClaimedCount: a states map that claims 2M entries and
// holds 2M empty names with nil values (4 MB) costs memory for what
// decodes, not for the claim: it fails at its first entry. Sizing the
// entries from the header allocated over 300 MB.
func TestDecodeNamesClaimedCount(t *testing.T) {
	const n = 2 << 20
	b := mp(nil).m(4).s("message_type").s("infer").
		s("env_indices").val(nd("<i8", make([]byte, 8), 1)).
		s("step_ids").val(nd("<i8", make([]byte, 8), 1)).
		s("data").m(3).s("images").m(0).s("text").null().
		s("states").m(n)
	for i := 0; i < n; i++ {
		b = append(b, 0xa0, 0xc0) // "" -> nil
	}
	// A header claiming 2^32 - 1 entries with one behind it.
	lying := mp(nil).m(4).s("message_type").s("infer").
		s("env_indices").val(nd("<i8", make([]byte, 8), 1)).
		s("step_ids").val(nd("<i8", make([]byte, 8), 1)).
		s("data").m(3).s("images").m(0).s("text").null().
		raw(0xa6, 's', 't', 'a', 't', 'e', 's', 0xdf, 0xff, 0xff, 0xff, 0xff).s("x").val(nd("<f8", nil, 1, 0))
	for _, msg := range [][]byte{b, lying} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := DecodeInfer(msg)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("err %v", err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("a %d-byte infer that fails at its first state allocated %d bytes", len(msg), grew)
		}
	}
}

// TestDuplicateNameNoAllocs: in the steady state the sorted check
// allocates nothing (its index is pooled), and decodeNamed reuses the
// caller's slice.
func TestDuplicateNameNoAllocs(t *testing.T) {
	g := make([]NamedArray, 100)
	for i := range g {
		g[i].Name = fmt.Sprint(i)
	}
	duplicateName(g)
	// The race detector empties sync.Pools at random, on purpose.
	if a := testing.AllocsPerRun(100, func() {
		if _, dup := duplicateName(g); dup {
			t.Fatal("false duplicate")
		}
	}); a != 0 && !raceEnabled {
		t.Errorf("duplicateName allocates %v times per call", a)
	}
	g[99].Name = "7"
	if name, dup := duplicateName(g); !dup || name != "7" {
		t.Errorf("duplicate %q %v", name, dup)
	}

	body := mp(nil).m(2).s("a").val(nd("<f8", nil, 1, 0)).s("b").val(nd("<f8", nil, 1, 0))
	dst := make([]NamedArray, 0, 8)
	out, err := decodeNamed("states", body, false, 1, dst)
	if err != nil || len(out) != 2 || &out[:1][0] != &dst[:1][0] {
		t.Fatalf("decodeNamed did not reuse the caller's slice: %v", err)
	}
}
