package wire

import (
	"errors"
	"math"
	"testing"
)

// byteLenChecked is ByteLen as it was before its one-pass path: the
// element count checked first, then the byte length.
func byteLenChecked(d DType, shape []int) (int, error) {
	if _, err := Elements(shape); err != nil {
		return 0, err
	}
	n, zero, ok := nonZeroProduct(shape, d.ItemSize())
	switch {
	case !ok:
		return 0, errors.New("byte length overflows")
	case zero:
		return 0, nil
	}
	return int(n), nil
}

// TestByteLenOnePass: ByteLen's one-pass path gives what the two checks
// give, for every combination of item sizes (odd ones included) and
// dimensions around zero, the negative, and overflow.
func TestByteLenOnePass(t *testing.T) {
	dims := []int{-1, 0, 1, 2, 3, 7, 1 << 20, 1 << 31, 1 << 40, math.MaxInt64}
	dtypes := []DType{Bool, Uint8, Float32, Float64, {Kind: 'U', Size: 5}, {Kind: 'f', Size: 0}, {Kind: 'f', Size: -4}, {Kind: 'V', Size: 1 << 62}}
	for _, d := range dtypes {
		for _, a := range dims {
			for _, b := range dims {
				for _, shape := range [][]int{{a}, {a, b}, {b, a, 3}} {
					got, gerr := ByteLen(d, shape)
					want, werr := byteLenChecked(d, shape)
					if (gerr == nil) != (werr == nil) || gerr == nil && got != want {
						t.Fatalf("ByteLen(%v, %v) = %d, %v; the two checks give %d, %v", d, shape, got, gerr, want, werr)
					}
				}
			}
		}
	}
}
