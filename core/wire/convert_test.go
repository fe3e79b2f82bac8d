package wire

import (
	"math"
	"testing"
	"unsafe"
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

// TestConvertUint64 checks the range past int64's: a uint64 of 2^63 or more
// keeps its value into a float (it was written as 2^63), and a float of
// 2^63 or more saturates at 2^64 - 1 into a uint64 (it saturated at
// 2^63 - 1).
func TestConvertUint64(t *testing.T) {
	u64 := MustParseDType("<u8")
	big := []uint64{1 << 63, 12814853506554321000, math.MaxUint64, 5}
	f64 := make([]float64, len(big))
	if err := Convert(BytesOf(f64), Float64, u64Bytes(big), u64, len(big)); err != nil {
		t.Fatal(err)
	}
	f32 := make([]float32, len(big))
	if err := Convert(BytesOf(f32), Float32, u64Bytes(big), u64, len(big)); err != nil {
		t.Fatal(err)
	}
	for i, v := range big {
		if f64[i] != float64(v) || f32[i] != float32(v) {
			t.Fatalf("u8 %d -> f8 %v, f4 %v; want %v, %v", v, f64[i], f32[i], float64(v), float32(v))
		}
	}
	src := []float64{1 << 63, 1.5e19, 1e30, -1, math.NaN(), 7.9}
	want := []uint64{1 << 63, 15000000000000000000, math.MaxUint64, 0, 0, 7}
	out := make([]uint64, len(src))
	if err := Convert(u64Bytes(out), u64, BytesOf(src), Float64, len(src)); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if out[i] != want[i] {
			t.Fatalf("f8 %v -> u8 %d, want %d", src[i], out[i], want[i])
		}
	}
}

func u64Bytes(s []uint64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s)) }

// TestConvertFloat64ToFloat16RoundsOnce: a float64 becomes a half with one
// rounding to nearest even, as numpy's astype(float16) and C's (_Float16)
// give. Through float32 it rounded twice, and the values below, each just
// past a tie between two halves, went to the wrong one. The wanted bits
// are numpy 1.24's np.array([v]).astype(np.float16).
func TestConvertFloat64ToFloat16RoundsOnce(t *testing.T) {
	f2 := MustParseDType("<f2")
	for _, c := range []struct {
		v    float64
		want uint16
	}{
		{1 + 0x1p-11 + 0x1p-40, 0x3c01},    // past the tie of 1 and 1 + 2^-10
		{-(1 + 0x1p-11 + 0x1p-40), 0xbc01}, // the same, negative
		{0x1p-25 + 0x1p-60, 0x0001},        // past half the least subnormal
		{65520 - 0x1p-30, 0x7bff},          // below the tie of 65504 and infinity
		{1 + 0x1p-11, 0x3c00},              // a tie: to even
		{0.1, 0x2e66},
		{70000, 0x7c00},
		{math.MaxFloat64, 0x7c00},
		{-0x1p-200, 0x8000},
	} {
		dst := make([]byte, 2)
		if err := Convert(dst, f2, BytesOf([]float64{c.v}), Float64, 1); err != nil {
			t.Fatal(err)
		}
		if got := uint16(dst[0]) | uint16(dst[1])<<8; got != c.want {
			t.Errorf("Convert <f8 %v to <f2: %#04x, want %#04x", c.v, got, c.want)
		}
		a := Array{DType: f2, Shape: []int{1}, Data: make([]byte, 2)}
		a.SetFloat64(0, c.v)
		if got := uint16(a.Data[0]) | uint16(a.Data[1])<<8; got != c.want {
			t.Errorf("SetFloat64(%v) on <f2: %#04x, want %#04x", c.v, got, c.want)
		}
	}
}
