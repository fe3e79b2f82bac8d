package ledgertool_test

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestExportArrayOrder: msgpack maps are unordered, and a client may list
// an observation's arrays in one order in its infers and another in its
// feedback (the audit takes them for the same observation: arrays are
// matched by name). Export refused such a ledger, "the observation's
// arrays changed", though every array kept its name, dtype and row
// shape; it must match them by name, and stack each array's own rows.
func TestExportArrayOrder(t *testing.T) {
	two := func(x, y float32, swap bool) *wire.Observation {
		a := wire.NamedArray{Name: "x", Array: wire.Array{DType: wire.Float32, Shape: []int{1, 1}, Data: wire.BytesOf([]float32{x})}}
		b := wire.NamedArray{Name: "y", Array: wire.Array{DType: wire.Float32, Shape: []int{1, 2}, Data: wire.BytesOf([]float32{y, y})}}
		if swap {
			a, b = b, a
		}
		return &wire.Observation{States: []wire.NamedArray{a, b}}
	}
	// Each exchange: an infer listing x then y, a feedback y then x.
	path := fullLedgerOf(t, [][2]*wire.Observation{{two(1, 10, false), two(2, 20, true)}, {two(2, 20, false), two(3, 30, true)}})
	dir := t.TempDir()
	if err := export(path, dir); err != nil {
		t.Fatalf("export of a ledger whose infers and feedbacks list the same arrays in other orders: %v", err)
	}
	f32 := func(name string) (v []float64) {
		_, _, d := readNpy(t, filepath.Join(dir, name))
		for i := 0; i+4 <= len(d); i += 4 {
			v = append(v, float64(math.Float32frombits(binary.LittleEndian.Uint32(d[i:]))))
		}
		return v
	}
	if x, y := f32("env0_states.x.npy"), f32("env0_states.y.npy"); !slices.Equal(x, []float64{1, 2}) || !slices.Equal(y, []float64{10, 10, 20, 20}) {
		t.Fatalf("x %v, y %v; want x [1 2], y [10 10 20 20]", x, y)
	}
}

// fullLedgerOf records, at full level, one exchange of env 0 per pair:
// an infer of pair[0], a [1, 1, 1] action, a feedback of pair[1].
func fullLedgerOf(t *testing.T, pairs [][2]*wire.Observation) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: ledger.Full})
	if err != nil {
		t.Fatal(err)
	}
	env := []int64{0}
	for _, p := range pairs {
		var in, act, fb wire.Message
		if err := wire.EncodeInfer(&in, &wire.Infer{EnvIndices: env, StepIDs: []int64{0}, Obs: p[0]}); err != nil {
			t.Fatal(err)
		}
		w.Sent(&in, p[0])
		if err := wire.EncodeAction(&act, env, &wire.Array{DType: wire.Float32, Shape: []int{1, 1, 1}, Data: make([]byte, 4)}); err != nil {
			t.Fatal(err)
		}
		w.Received(act.AppendTo(nil))
		if err := wire.EncodeFeedback(&fb, &wire.Feedback{EnvIndices: env, StepIDs: []int64{0}, Obs: p[1], Rewards: []float32{1},
			Terminated: []bool{false}, Truncated: []bool{false}}); err != nil {
			t.Fatal(err)
		}
		w.Sent(&fb, p[1])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
