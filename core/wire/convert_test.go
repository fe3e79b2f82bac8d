package wire

import (
	"math"
	"testing"
)

func TestConvert(t *testing.T) {
	src := []float64{1.5, -2.7, 300, -1e30, math.NaN(), 0}
	check := func(name string, to DType, want []float64) {
		t.Helper()
		dst := make([]byte, len(src)*to.Size+1)
		// An odd offset: the caller's buffer need not be aligned.
		if err := Convert(dst[1:], to, BytesOf(src), Float64, len(src)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, w := range want {
			got := elementScalar(to, dst[1+i*to.Size:])
			v := got.Float
			if got.Kind != 'f' {
				v = float64(got.Int)
				if got.Kind == 'b' && got.Bool {
					v = 1
				} else if got.Kind == 'b' {
					v = 0
				}
			}
			if v != w && !(math.IsNaN(v) && math.IsNaN(w)) {
				t.Fatalf("%s: element %d = %v, want %v", name, i, v, w)
			}
		}
	}
	check("f8->f4", Float32, []float64{1.5, float64(float32(-2.7)), 300, float64(float32(-1e30)), math.NaN(), 0})
	check("f8->i4 truncates and saturates, NaN is 0", MustParseDType("<i4"), []float64{1, -2, 300, math.MinInt32, 0, 0})
	check("f8->u1 saturates", Uint8, []float64{1, 0, 255, 0, 0, 0})
	check("f8->b1 (NaN is true, as in C and numpy)", Bool, []float64{1, 1, 1, 1, 1, 0})
	check("f8->f2", MustParseDType("<f2"), []float64{1.5, float64(Float16ToFloat32(Float32ToFloat16(-2.7))), 300, math.Inf(-1), math.NaN(), 0})

	// And back from float32, aligned, on the fast path.
	f32 := []float32{0.25, -8}
	out := make([]float64, 2)
	if err := Convert(BytesOf(out), Float64, BytesOf(f32), Float32, 2); err != nil || out[0] != 0.25 || out[1] != -8 {
		t.Fatalf("f4->f8: %v %v", out, err)
	}
	if err := Convert(make([]byte, 4), Float64, BytesOf(f32), Float32, 2); err == nil {
		t.Fatal("a short destination must be refused")
	}
	if err := Convert(make([]byte, 16), DType{Order: '<', Kind: 'U', Size: 1}, BytesOf(f32), Float32, 2); err == nil {
		t.Fatal("converting to text must be refused")
	}
}

func TestFloat16RoundTrip(t *testing.T) {
	for _, v := range []float32{0, 1, -1, 0.5, 65504, 6.1035156e-05, 5.9604645e-08, float32(math.Inf(1))} {
		if got := Float16ToFloat32(Float32ToFloat16(v)); got != v {
			t.Fatalf("%v -> %v", v, got)
		}
	}
	if h := Float32ToFloat16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Fatalf("NaN -> %#x", h)
	}
}
