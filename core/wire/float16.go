package wire

// IEEE 754 half precision, both ways.

import (
	"math"
)

// Float32ToFloat16 converts to IEEE 754 half precision, rounding to nearest even.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	frac := b & 0x7fffff
	switch {
	case (b>>23)&0xff == 0xff: // inf or NaN
		if frac != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		frac |= 0x800000
		shift := uint(14 - exp)
		half := uint32(1) << (shift - 1)
		r := frac >> shift
		if rem := frac & (1<<shift - 1); rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint16(exp)<<10 | uint16(frac>>13)
	if rem := frac & 0x1fff; rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | r
}

// float64ToFloat16 converts to IEEE 754 half precision, rounding once to
// nearest even, as C's (_Float16) and numpy's astype do. Through float32
// with two roundings to nearest it would be wrong on the values that the
// first rounding turns into a tie between two halves: 1 + 2^-11 + 2^-40
// becomes the float32 1 + 2^-11, which goes to the even half 1, where
// the nearest half is 1 + 2^-10. So the step to float32 rounds to odd
// (toward zero, then the last bit set if anything was cut): float32 has
// more than half's 11 bits plus 2, so rounding that to nearest gives what
// one rounding of f would.
func float64ToFloat16(f float64) uint16 {
	f32 := float32(f)
	if g := float64(f32); g != f && !math.IsNaN(f) {
		b := math.Float32bits(f32)
		if math.Abs(g) > math.Abs(f) {
			b-- // the float32 next to it toward zero (an infinity to the largest finite)
		}
		f32 = math.Float32frombits(b | 1)
	}
	return Float32ToFloat16(f32)
}

// Float16ToFloat32 converts an IEEE 754 half-precision value.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(frac) / 1024 / 16384
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
