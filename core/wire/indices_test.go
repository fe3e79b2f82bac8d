package wire

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// quadraticCheck is the env index check as it was before indices.go: the
// reference the linear one must agree with, error text included.
func quadraticCheck(what string, idx []int64) error {
	for i, v := range idx {
		if v < 0 {
			return invalidf("%s: env_indices[%d] is %d; env indices are non-negative", what, i, v)
		}
		for j := 0; j < i; j++ {
			if idx[j] == v {
				return invalidf("%s: env index %d appears twice", what, v)
			}
		}
	}
	return nil
}

// quadraticServerCheck is the server's check as it was, with a map.
func quadraticServerCheck(where string, idx []int64) error {
	seen := make(map[int64]struct{}, len(idx))
	for i, v := range idx {
		if v < 0 {
			return malformedf(where, "env_indices[%d] is %d; env indices are non-negative", i, v)
		}
		if _, dup := seen[v]; dup {
			return malformedf(where, "env index %d appears twice", v)
		}
		seen[v] = struct{}{}
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// checkAgainstReference runs both checks on idx with the shared scratch s and
// compares them with the references.
func checkAgainstReference(t testing.TB, s *indexSet, idx []int64) {
	t.Helper()
	if got, want := errText(checkEnvIndices(s, "infer", idx)), errText(quadraticCheck("infer", idx)); got != want {
		t.Fatalf("%v: got %s, want %s", idx, got, want)
	}
	if got, want := errText(checkIndices("infer", idx)), errText(quadraticServerCheck("infer", idx)); got != want {
		t.Fatalf("%v (server): got %s, want %s", idx, got, want)
	}
}

// TestEnvIndicesMatchReference: the linear check reports what the quadratic
// one did (the first negative or repeated index in order, with the same
// text) on the small, dense and sparse paths, with one scratch reused
// throughout, which checks that a call leaves the bitset clear.
func TestEnvIndicesMatchReference(t *testing.T) {
	var s indexSet
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 15, 16, 17, 64, 1000, 3000} {
		for _, spread := range []int64{1, 2, 64, 1 << 20, 1 << 40, 1 << 62} {
			for trial := 0; trial < 10; trial++ {
				idx := make([]int64, n)
				for i := range idx {
					idx[i] = int64(i) * spread
				}
				r.Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
				switch trial % 5 {
				case 1: // a duplicate
					if n > 1 {
						idx[r.IntN(n)] = idx[r.IntN(n)]
					}
				case 2: // a negative
					if n > 0 {
						idx[r.IntN(n)] = -1 - r.Int64N(5)
					}
				case 3: // both, and more
					for k := 0; k < 3 && n > 1; k++ {
						idx[r.IntN(n)] = idx[r.IntN(n)]
						idx[r.IntN(n)] = -r.Int64N(3)
					}
				case 4: // one huge index among small ones
					if n > 0 {
						idx[r.IntN(n)] = 1<<63 - 1
					}
				}
				checkAgainstReference(t, &s, idx)
			}
		}
	}
	for _, idx := range [][]int64{
		{5, 5, -1}, // the duplicate comes first
		{-1, 5, 5}, // the negative comes first
		{0, 1 << 62, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1 << 62},
		{1<<63 - 1, 1<<63 - 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	} {
		checkAgainstReference(t, &s, idx)
	}
	// The same orders past smallIndices, dense and sparse.
	for _, scale := range []int64{1, 1 << 40} {
		for _, head := range [][]int64{{5, 5, -1}, {-1, 5, 5}, {7, -2, 7}} {
			idx := make([]int64, 0, 40)
			for _, v := range head {
				idx = append(idx, v*scale)
			}
			for v := int64(100); len(idx) < cap(idx); v++ {
				idx = append(idx, v*scale)
			}
			checkAgainstReference(t, &s, idx)
		}
	}
	for i, w := range s.bits {
		if w != 0 {
			t.Fatalf("bits[%d] = %x after the calls", i, w)
		}
	}
}

// TestEnvIndicesAllocs: with a plan that never matches, so that every call
// checks the env indices, encoding allocates nothing once the Message's
// scratch has grown, for dense indices and for sparse ones.
func TestEnvIndicesAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -cover and -race")
	}
	for _, spread := range []int64{1, 1 << 40} {
		const n = 4096
		up, down := make([]int64, n), make([]int64, n)
		for i := range up {
			up[i], down[i] = int64(i)*spread, int64(n-1-i)*spread
		}
		obs := &Observation{}
		ins := [2]*Infer{{EnvIndices: up, StepIDs: make([]int64, n), Obs: obs}, {EnvIndices: down, StepIDs: make([]int64, n), Obs: obs}}
		var m Message
		i := 0
		encode := func() {
			if err := EncodeInfer(&m, ins[i&1]); err != nil {
				t.Fatal(err)
			}
			i++
		}
		encode()
		encode()
		if a := testing.AllocsPerRun(50, encode); a != 0 {
			t.Errorf("spread %d: %v allocations per EncodeInfer", spread, a)
		}
	}
}

// BenchmarkEncodeInferPlanMiss encodes infers whose plan never matches, so
// each one checks its env indices: 3.15 s/op for n=131072 when the check
// was quadratic.
func BenchmarkEncodeInferPlanMiss(b *testing.B) {
	for _, n := range []int{16, 1024, 131072} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			up, down := make([]int64, n), make([]int64, n)
			for i := range up {
				up[i], down[i] = int64(i), int64(n-1-i)
			}
			obs := &Observation{}
			ins := [2]*Infer{{EnvIndices: up, StepIDs: make([]int64, n), Obs: obs}, {EnvIndices: down, StepIDs: make([]int64, n), Obs: obs}}
			var m Message
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := EncodeInfer(&m, ins[i&1]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// FuzzEnvIndices compares the linear check with the quadratic reference.
// The input is read as one-byte indices (dense, many repeats; 0xff is -1)
// or, when wide, as eight-byte ones (sparse, negatives, extremes); it is
// checked whole and as its first half, with one scratch.
func FuzzEnvIndices(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 3}, false)
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0xff}, false)
	f.Add(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(make([]byte, 8*17), 1<<62), 1<<62), true)
	f.Add(binary.LittleEndian.AppendUint64(make([]byte, 8), 1<<63), true)
	f.Fuzz(func(t *testing.T, b []byte, wide bool) {
		if len(b) > 1024 {
			// Larger inputs find nothing the paths above 16 indices do
			// not, and the minimiser would spend its minute on one.
			return
		}
		var idx []int64
		if wide {
			for i := 0; i+8 <= len(b); i += 8 {
				idx = append(idx, int64(binary.LittleEndian.Uint64(b[i:])))
			}
		} else {
			for _, v := range b {
				if v == 0xff {
					idx = append(idx, -1)
				} else {
					idx = append(idx, int64(v))
				}
			}
		}
		var s indexSet
		checkAgainstReference(t, &s, idx)
		checkAgainstReference(t, &s, idx[:len(idx)/2])
		for i, w := range s.bits {
			if w != 0 {
				t.Fatalf("bits[%d] = %x after the calls", i, w)
			}
		}
	})
}
