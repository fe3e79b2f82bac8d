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
