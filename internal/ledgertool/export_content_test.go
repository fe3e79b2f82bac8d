package ledgertool_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// exportStep is one exchange of exportLedger: an infer of envs (reuse
// marks the ones whose observation the server holds; obs has a value per
// other env), an action chunk of horizon 2 whose value at step s for the
// j-th env is act[j]+s, and, unless fb is nil, a feedback of the same envs.
type exportStep struct {
	envs    []int64
	reuse   []bool
	obs     []float32
	act     []float32
	fbObs   []float32
	rewards []float32
	term    []bool
	trunc   []bool
}

func stateObs(v []float32) *wire.Observation {
	return &wire.Observation{States: []wire.NamedArray{{Name: "x", Array: wire.Array{DType: wire.Float32, Shape: []int{len(v), 1}, Data: wire.BytesOf(v)}}}}
}

// exportLedger records steps at full level and returns the ledger's path.
func exportLedger(t *testing.T, steps []exportStep) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: ledger.Full})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		ids := make([]int64, len(s.envs))
		var in, act, fb wire.Message
		o := stateObs(s.obs)
		if err := wire.EncodeInfer(&in, &wire.Infer{EnvIndices: s.envs, StepIDs: ids, Obs: o, Reuse: s.reuse}); err != nil {
			t.Fatal(err)
		}
		w.Sent(&in, o)
		n := len(s.envs)
		chunk := make([]float32, 2*n) // [H, n, 1], time-major
		for st := 0; st < 2; st++ {
			for j := 0; j < n; j++ {
				chunk[st*n+j] = s.act[j] + float32(st)
			}
		}
		if err := wire.EncodeAction(&act, s.envs, &wire.Array{DType: wire.Float32, Shape: []int{2, n, 1}, Data: wire.BytesOf(chunk)}); err != nil {
			t.Fatal(err)
		}
		w.Received(act.AppendTo(nil))
		if s.fbObs == nil {
			continue
		}
		fo := stateObs(s.fbObs)
		if err := wire.EncodeFeedback(&fb, &wire.Feedback{EnvIndices: s.envs, StepIDs: ids, Obs: fo, Rewards: s.rewards, Terminated: s.term, Truncated: s.trunc}); err != nil {
			t.Fatal(err)
		}
		w.Sent(&fb, fo)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readNpy reads a .npy file export wrote: its header's descr and shape,
// as written, and its data. The header is padded to 64 bytes, as the
// format asks.
func readNpy(t *testing.T, path string) (descr, shape string, data []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 10 || string(b[:8]) != "\x93NUMPY\x01\x00" {
		t.Fatalf("%s: not a .npy file of version 1.0", path)
	}
	n := int(binary.LittleEndian.Uint16(b[8:]))
	if (10+n)%64 != 0 || len(b) < 10+n {
		t.Fatalf("%s: a %d-byte header, not padded to 64", path, n)
	}
	m := regexp.MustCompile(`^\{'descr': '([^']*)', 'fortran_order': False, 'shape': \(([^)]*)\), \} *\n$`).FindStringSubmatch(string(b[10 : 10+n]))
	if m == nil {
		t.Fatalf("%s: header %q", path, b[10:10+n])
	}
	return m[1], m[2], b[10+n:]
}

// TestExportTrajectories: export stacks, per env, the observation each
// chunk started from (the infer's row, or for a reused env the last
// observation it sent), the chunk's own actions out of the time-major
// [H, n, ...] chunk of all envs, and the reward and flags fed back for
// it; a chunk never fed back (its connection lost) is not stacked, and
// an env with none fed back gets no files. Each file is a .npy that
// numpy reads: 1-D shapes are spelt (T, ).
func TestExportTrajectories(t *testing.T) {
	F, T := false, true
	path := exportLedger(t, []exportStep{
		{envs: []int64{0, 1}, obs: []float32{10, 11}, act: []float32{0, 100},
			fbObs: []float32{20, 21}, rewards: []float32{0.5, 1.5}, term: []bool{F, T}, trunc: []bool{T, F}},
		// env 1 reused: its observation is the one its feedback sent.
		{envs: []int64{0, 1}, reuse: []bool{F, T}, obs: []float32{30}, act: []float32{2, 102},
			fbObs: []float32{40, 41}, rewards: []float32{2.5, 3.5}, term: []bool{F, F}, trunc: []bool{F, F}},
		// env 0 reused, before an env that is not: env 1 takes row 0.
		{envs: []int64{0, 1}, reuse: []bool{T, F}, obs: []float32{51}, act: []float32{4, 104},
			fbObs: []float32{60, 61}, rewards: []float32{4.5, 5.5}, term: []bool{F, F}, trunc: []bool{F, F}},
		// A chunk not fed back, then one that is.
		{envs: []int64{0}, obs: []float32{70}, act: []float32{6}},
		{envs: []int64{0}, obs: []float32{80}, act: []float32{8},
			fbObs: []float32{90}, rewards: []float32{6.5}, term: []bool{F}, trunc: []bool{F}},
		// env 2: no chunk fed back.
		{envs: []int64{2}, obs: []float32{100}, act: []float32{10}},
	})
	dir := t.TempDir()
	if err := export(path, dir); err != nil {
		t.Fatal(err)
	}
	f32 := func(b []byte) (v []float64) {
		for i := 0; i+4 <= len(b); i += 4 {
			v = append(v, float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))))
		}
		return v
	}
	f64 := func(b []byte) (v []float64) {
		for i := 0; i+8 <= len(b); i += 8 {
			v = append(v, math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
		}
		return v
	}
	flags := func(b []byte) (v []bool) {
		for _, c := range b {
			v = append(v, c != 0)
		}
		return v
	}
	for _, want := range []struct {
		env               string
		obs, act, reward  []float64
		actShape, steps   string
		terminated, trunc []bool
	}{
		{"env0", []float64{10, 30, 40, 80}, []float64{0, 1, 2, 3, 4, 5, 8, 9}, []float64{0.5, 2.5, 4.5, 6.5}, "4, 2, 1", "4, ", []bool{F, F, F, F}, []bool{T, F, F, F}},
		{"env1", []float64{11, 21, 51}, []float64{100, 101, 102, 103, 104, 105}, []float64{1.5, 3.5, 5.5}, "3, 2, 1", "3, ", []bool{T, F, F}, []bool{F, F, F}},
	} {
		file := func(name string) string { return filepath.Join(dir, want.env+"_"+name+".npy") }
		check := func(name, wantDescr, wantShape string, got any, wantV any) {
			t.Helper()
			descr, shape, _ := readNpy(t, file(name))
			if descr != wantDescr || shape != wantShape {
				t.Errorf("%s_%s: descr %q shape (%s), want %q (%s)", want.env, name, descr, shape, wantDescr, wantShape)
			}
			if !equalValues(got, wantV) {
				t.Errorf("%s_%s: %v, want %v", want.env, name, got, wantV)
			}
		}
		obsShape := want.steps + "1"
		_, _, d := readNpy(t, file("states.x"))
		check("states.x", "<f4", obsShape, f32(d), want.obs)
		_, _, d = readNpy(t, file("action"))
		check("action", "<f8", want.actShape, f64(d), want.act)
		_, _, d = readNpy(t, file("reward"))
		check("reward", "<f8", want.steps, f64(d), want.reward)
		_, _, d = readNpy(t, file("terminated"))
		check("terminated", "|b1", want.steps, flags(d), want.terminated)
		_, _, d = readNpy(t, file("truncated"))
		check("truncated", "|b1", want.steps, flags(d), want.trunc)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "env2_*")); len(m) != 0 {
		t.Errorf("env 2, with no chunk fed back, has files %v", m)
	}
}

func equalValues(got, want any) bool {
	switch g := got.(type) {
	case []float64:
		return slices.Equal(g, want.([]float64))
	case []bool:
		return slices.Equal(g, want.([]bool))
	}
	return false
}
