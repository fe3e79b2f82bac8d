package runner_test

// A Go user's misuse of the runner, from a review (2026-12-03): each case
// panicked or was accepted before its fix.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

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

func misuseRunner(t *testing.T, n int) *runner.Runner {
	t.Helper()
	_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 2})
	r, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestChunkNilOut: Chunk(env, nil) dereferenced nil; Act(obs, nil) was
// already KindInvalid.
func TestChunkNilOut(t *testing.T) {
	r := misuseRunner(t, 2)
	if err := r.Act(stateObs(2), &wire.Array{DType: wire.Float32, Data: make([]byte, 2*2*4)}); err != nil {
		t.Fatal(err)
	}
	err := noPanic(func() error { _, err := r.Chunk(0, nil); return err })
	if client.KindOf(err) != client.KindInvalid {
		t.Fatalf("Chunk(0, nil): %v; want KindInvalid", err)
	}
}

// TestImpossibleDTypes: DTypes built by hand with a size their kind does
// not have (|f0, <i3, <f16) passed as numeric: Act and Chunk panicked in
// the conversion or wrote 8-byte values into 16-byte slots, and a state
// of <f3 went on the wire.
func TestImpossibleDTypes(t *testing.T) {
	bad := []wire.DType{{Order: '|', Kind: 'f', Size: 0}, {Order: '<', Kind: 'i', Size: 3}, {Order: '<', Kind: 'f', Size: 16}}
	for _, d := range bad {
		r := misuseRunner(t, 2)
		err := noPanic(func() error { return r.Act(stateObs(2), &wire.Array{DType: d, Data: make([]byte, 2*2*max(d.Size, 1))}) })
		if client.KindOf(err) != client.KindInvalid {
			t.Errorf("Act into %s: %v; want KindInvalid", d, err)
		}
	}
	r := misuseRunner(t, 2)
	if err := r.Act(stateObs(2), &wire.Array{DType: wire.Float32, Data: make([]byte, 2*2*4)}); err != nil {
		t.Fatal(err)
	}
	for _, d := range bad {
		err := noPanic(func() error { _, err := r.Chunk(0, &wire.Array{DType: d, Data: make([]byte, 64)}); return err })
		if client.KindOf(err) != client.KindInvalid {
			t.Errorf("Chunk into %s: %v; want KindInvalid", d, err)
		}
	}
	obs := stateObs(2)
	obs.States[0].Array.DType = wire.DType{Order: '<', Kind: 'f', Size: 3}
	if err := obs.Validate(); err == nil {
		t.Error("a state of <f3 passed Validate")
	}
}

// TestActAfterFreeChunks: Act on a runner whose chunks were freed mid-chunk
// sliced a nil chunk; the runner is done, and says so.
func TestActAfterFreeChunks(t *testing.T) {
	r := misuseRunner(t, 2)
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float32, Data: make([]byte, 2*2*4)}
	f := make([]bool, 2)
	if err := r.Act(obs, out); err != nil {
		t.Fatal(err)
	}
	if err := r.Report(obs, make([]float64, 2), f, f, nil); err != nil {
		t.Fatal(err)
	}
	r.FreeChunks()
	if err := noPanic(func() error { return r.Act(obs, out) }); client.KindOf(err) != client.KindClosed {
		t.Fatalf("Act after FreeChunks: %v; want KindClosed", err)
	}
}

// TestHugeEnvCount: New with 1<<62 envs panicked in make.
func TestHugeEnvCount(t *testing.T) {
	_, c := dialRef(t, refserver.Config{Horizon: 4, ActionDim: 2})
	err := noPanic(func() error { _, err := runner.New(c, runner.Config{Envs: 1 << 62}); return err })
	if client.KindOf(err) != client.KindInvalid {
		t.Fatalf("New with 1<<62 envs: %v; want KindInvalid", err)
	}
}

// TestNilClientAndZeroRunner: New(nil, ...) was accepted and its first
// Act panicked, as did a zero Runner's Stats; a zero Runner's Act said it
// had 0 envs.
func TestNilClientAndZeroRunner(t *testing.T) {
	if err := noPanic(func() error { _, err := runner.New(nil, runner.Config{Envs: 2}); return err }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("New(nil, ...): %v; want KindInvalid", err)
	}
	var r runner.Runner
	obs := stateObs(2)
	out := &wire.Array{DType: wire.Float32, Data: make([]byte, 2*2*4)}
	f := make([]bool, 2)
	if err := noPanic(func() error { return r.Act(obs, out) }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("Act on a zero Runner: %v; want KindInvalid", err)
	}
	if err := noPanic(func() error { return r.Report(obs, make([]float64, 2), f, f, nil) }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("Report on a zero Runner: %v; want KindInvalid", err)
	}
	if err := noPanic(func() error { _, err := r.Chunk(0, out); return err }); client.KindOf(err) != client.KindInvalid {
		t.Errorf("Chunk on a zero Runner: %v; want KindInvalid", err)
	}
	err := noPanic(func() error {
		_ = r.Stats()
		_, _ = r.StepSize()
		r.Close()
		return nil
	})
	if err != nil {
		t.Errorf("the other methods of a zero Runner: %v", err)
	}
}

// TestChunkShortBufferKind: Chunk's ErrShortBuffer was a plain error, so
// client.KindOf called it KindInternal, "a bug in the library"; it is
// KindBufferTooSmall, and still errors.Is ErrShortBuffer.
func TestChunkShortBufferKind(t *testing.T) {
	r := misuseRunner(t, 2)
	if err := r.Act(stateObs(2), &wire.Array{DType: wire.Float32, Data: make([]byte, 2*2*4)}); err != nil {
		t.Fatal(err)
	}
	steps, err := r.Chunk(0, &wire.Array{DType: wire.Float32, Data: make([]byte, 4)})
	if steps != 4 || !errors.Is(err, runner.ErrShortBuffer) || client.KindOf(err) != client.KindBufferTooSmall {
		t.Fatalf("Chunk into 4 bytes: %d, %v (kind %v); want 4 steps, ErrShortBuffer of KindBufferTooSmall", steps, err, client.KindOf(err))
	}
}
