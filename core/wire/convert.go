package wire

import (
	"fmt"
	"math"
)

// Convert copies count elements from src (of type from) into dst (of type
// to), converting each value as C would: floats to integers truncate toward
// zero and saturate at the type's range, NaN becomes 0. Both must be
// numeric; src must be in host byte order (as decoded actions are).
func Convert(dst []byte, to DType, src []byte, from DType, count int) error {
	if !to.Numeric() || !from.Numeric() {
		return fmt.Errorf("%w: cannot convert %s to %s: both must be numeric", ErrInvalid, from, to)
	}
	if len(src) < count*from.Size || len(dst) < count*to.Size {
		return fmt.Errorf("%w: converting %d elements needs %d source and %d destination bytes, have %d and %d",
			ErrInvalid, count, count*from.Size, count*to.Size, len(src), len(dst))
	}
	if from.Swapped() || to.Swapped() {
		return fmt.Errorf("%w: Convert works in host byte order", ErrInvalid)
	}
	if from.Kind == to.Kind && from.Size == to.Size {
		copy(dst, src[:count*from.Size])
		if to.Kind == 'b' { // a bool byte is 0 or 1 whatever the source held
			for i, v := range dst[:count] {
				if v > 1 {
					dst[i] = 1
				}
			}
		}
		return nil
	}
	aligned := count > 0 && aligned(src, from.Size) && aligned(dst, to.Size)
	switch {
	case !aligned:
	case from.Kind == 'f' && from.Size == 4 && to.Kind == 'f' && to.Size == 8:
		s, d := float32s(src[:count*4]), float64s(dst[:count*8])
		for i, v := range s {
			d[i] = float64(v)
		}
		return nil
	case from.Kind == 'f' && from.Size == 8 && to.Kind == 'f' && to.Size == 4:
		s, d := float64s(src[:count*8]), float32s(dst[:count*4])
		for i, v := range s {
			d[i] = float32(v)
		}
		return nil
	}
	for i := 0; i < count; i++ {
		v := elementScalar(from, src[i*from.Size:])
		putScalar(dst[i*to.Size:], to, v)
	}
	return nil
}

func putScalar(dst []byte, d DType, s Scalar) {
	order := d.byteOrder()
	var f float64
	var iv int64
	isFloat := false
	switch s.Kind {
	case 'b':
		if s.Bool {
			iv = 1
		}
	case 'i':
		iv = s.Int
	case 'u':
		iv = math.MaxInt64 // only values past MaxInt64 stay 'u'
		if d.Kind == 'u' && d.Size == 8 {
			order.PutUint64(dst, s.Uint)
			return
		}
	case 'f':
		f, isFloat = s.Float, true
	}
	if d.Kind == 'f' {
		if !isFloat {
			f = float64(iv)
		}
		switch d.Size {
		case 2:
			order.PutUint16(dst, Float32ToFloat16(float32(f)))
		case 4:
			order.PutUint32(dst, math.Float32bits(float32(f)))
		default:
			order.PutUint64(dst, math.Float64bits(f))
		}
		return
	}
	if d.Kind == 'b' {
		if (isFloat && f != 0) || (!isFloat && iv != 0) {
			dst[0] = 1
		} else {
			dst[0] = 0
		}
		return
	}
	lo, hi := intRange(d)
	if isFloat {
		switch {
		case math.IsNaN(f):
			iv = 0
		case f <= float64(lo):
			iv = lo
		case f >= float64(hi):
			iv = hi
		default:
			iv = int64(f)
		}
	}
	if iv < lo {
		iv = lo
	} else if iv > hi {
		iv = hi
	}
	switch d.Size {
	case 1:
		dst[0] = byte(iv)
	case 2:
		order.PutUint16(dst, uint16(iv))
	case 4:
		order.PutUint32(dst, uint32(iv))
	default:
		order.PutUint64(dst, uint64(iv))
	}
}

func intRange(d DType) (lo, hi int64) {
	bitsN := uint(8 * d.Size)
	if d.Kind == 'u' {
		if bitsN == 64 {
			return 0, math.MaxInt64
		}
		return 0, int64(1)<<bitsN - 1
	}
	if bitsN == 64 {
		return math.MinInt64, math.MaxInt64
	}
	return -(int64(1) << (bitsN - 1)), int64(1)<<(bitsN-1) - 1
}

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
