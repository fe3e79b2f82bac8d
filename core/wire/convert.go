package wire

import (
	"fmt"
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
