package wire

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
)

// MaxDims bounds the rank of an array on the wire. numpy's own limit is 64;
// nothing in PlugRL goes past 5, and a bound keeps decoding allocation-free.
const MaxDims = 32

// Array is a C-contiguous n-dimensional array: element bytes in row-major
// order, Data exactly prod(Shape) * DType.ItemSize() long. When it comes from
// a decoder it is a view into that decoder's input, valid as long as the
// input is.
type Array struct {
	DType DType
	Shape []int
	Data  []byte
}

// maxCount bounds an array's element count and byte length, below
// math.MaxInt64; decodeArrayRaw applies it to each dimension as well.
const maxCount = math.MaxInt32 * (1 << 31)

// nonZeroProduct returns size times the product of shape's non-zero
// dimensions, and whether a dimension is zero. It refuses a shape whose
// product overflows even when a zero dimension makes the element count 0:
// numpy does the same ("array is too big"), so no peer can have made such an
// array, and code that walks one dimension of it (a chunk's H, say) must
// not be handed a count no memory backs.
func nonZeroProduct(shape []int, size int) (p uint64, zero, ok bool) {
	p = uint64(size)
	if p > maxCount { // a negative size too: a caller's DType, not ParseDType's
		return 0, false, false
	}
	for _, d := range shape {
		if d == 0 {
			zero = true
			continue
		}
		hi, lo := bits.Mul64(p, uint64(d))
		if hi != 0 || lo > maxCount {
			return 0, zero, false
		}
		p = lo
	}
	return p, zero, true
}

func checkDims(shape []int) error {
	for i, d := range shape {
		if d < 0 {
			return fmt.Errorf("shape %v: dimension %d is negative", shape, i)
		}
	}
	return nil
}

// Elements returns prod(Shape), or an error if a dimension is negative or the
// product of the non-zero dimensions overflows.
func Elements(shape []int) (int, error) {
	if err := checkDims(shape); err != nil {
		return 0, err
	}
	n, zero, ok := nonZeroProduct(shape, 1)
	switch {
	case !ok:
		return 0, fmt.Errorf("shape %v: element count overflows", shape)
	case zero:
		return 0, nil
	}
	return int(n), nil
}

// ByteLen returns the byte length the shape and dtype require, or an error
// if a dimension is negative or the product of the non-zero dimensions and
// the item size overflows.
func ByteLen(d DType, shape []int) (int, error) {
	// One pass for the usual shape: with an item size of at least 1, a
	// byte length that fits means the element count fits too, and a
	// negative dimension cannot fit (as a uint64 it is over maxCount).
	// Anything else (a zero or negative dimension, an overflow, an odd
	// size) takes the checks below, which name what is wrong.
	if size := d.ItemSize(); size >= 1 {
		if n, zero, ok := nonZeroProduct(shape, size); ok && !zero {
			return int(n), nil
		}
	}
	if _, err := Elements(shape); err != nil {
		return 0, err
	}
	n, zero, ok := nonZeroProduct(shape, d.ItemSize())
	switch {
	case !ok:
		return 0, fmt.Errorf("shape %v of %s: byte length overflows", shape, d)
	case zero:
		return 0, nil
	}
	return int(n), nil
}

// Check validates that Data holds exactly the bytes Shape and DType require.
func (a *Array) Check() error {
	if len(a.Shape) > MaxDims {
		return fmt.Errorf("array has %d dimensions, more than %d", len(a.Shape), MaxDims)
	}
	want, err := ByteLen(a.DType, a.Shape)
	if err != nil {
		return err
	}
	if want != len(a.Data) {
		return fmt.Errorf("shape %v of %s needs %d bytes, data has %d", a.Shape, a.DType, want, len(a.Data))
	}
	return nil
}

// RowBytes is the byte size of one slice along the leading axis.
func (a *Array) RowBytes() int {
	if len(a.Shape) == 0 {
		return a.DType.ItemSize()
	}
	n := a.DType.ItemSize()
	for _, d := range a.Shape[1:] {
		n *= d
	}
	return n
}

// Row returns the bytes of row i along the leading axis.
func (a *Array) Row(i int) []byte {
	rb := a.RowBytes()
	return a.Data[i*rb : (i+1)*rb]
}

// Len is the leading dimension, or 0 for a scalar.
func (a *Array) Len() int {
	if len(a.Shape) == 0 {
		return 0
	}
	return a.Shape[0]
}

// ToHost rewrites a decoded array in place so that its data is aligned for
// its item size and in host byte order, and its bools are 0 or 1. It may move Data up to 7 bytes
// towards lower addresses, over the "data" key and bin header that precede
// it in the message; callers must have finished reading those bytes, which
// every decoder here has once the array is returned.
func (a *Array) toHost(window int) {
	size := a.DType.ItemSize()
	if a.DType.Kind == 'U' {
		size = 4
	}
	if len(a.Data) > 0 && size > 1 {
		align := size
		if align > 8 {
			align = 8
		}
		if off := int(uintptr(unsafe.Pointer(&a.Data[0])) % uintptr(align)); off != 0 && off <= window {
			n := len(a.Data)
			whole := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&a.Data[0]), -off)), n+off)
			copy(whole, whole[off:])
			a.Data = whole[:n:n]
		}
	}
	if a.DType.Swapped() {
		swapInPlace(a.Data, size)
		a.DType.Order = NativeOrder
	}
	if a.DType.Kind == 'b' {
		// numpy's |b1 is one byte, 0 or 1, and so is C's plugrl bool and
		// C++'s bool, where any other byte is undefined behaviour: a
		// server's 2 becomes 1 here, where it is read.
		for i, v := range a.Data {
			if v > 1 {
				a.Data[i] = 1
			}
		}
	}
}

// Aligned reports whether Data's address is a multiple of its item size (up to 8).
func (a *Array) Aligned() bool {
	size := a.DType.ItemSize()
	if a.DType.Kind == 'U' {
		size = 4
	}
	if size > 8 {
		size = 8
	}
	return len(a.Data) == 0 || uintptr(unsafe.Pointer(&a.Data[0]))%uintptr(size) == 0
}

func swapInPlace(b []byte, size int) {
	switch size {
	case 2:
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			b[i], b[i+1], b[i+2], b[i+3], b[i+4], b[i+5], b[i+6], b[i+7] =
				b[i+7], b[i+6], b[i+5], b[i+4], b[i+3], b[i+2], b[i+1], b[i]
		}
	}
}

// BytesOf views a slice of fixed-size numbers as its bytes in host order,
// without copying. It is how []int64, []float32 and friends are encoded.
func BytesOf[T int64 | float32 | float64 | uint8 | bool](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// Float32s views aligned host-order bytes as []float32, without copying.
func float32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func float64s(b []byte) []float64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

func aligned(b []byte, size int) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0
}

// DecodeArray decodes the ndarray map at b into a, whose Shape is backed by
// shape (which must have room for MaxDims). a.Data is a view into b. Keys may
// be bin (as numpy sends them) or str.
func DecodeArray(b []byte, shape []int, a *Array) (rest []byte, err error) {
	return decodeArray(b, shape, a, false)
}

// DecodeArrayHost is DecodeArray, then aligns and byte-swaps the data in
// place so it can be read as host-order elements. It writes to b.
func DecodeArrayHost(b []byte, shape []int, a *Array) (rest []byte, err error) {
	return decodeArray(b, shape, a, true)
}

func decodeArray(b []byte, shape []int, a *Array, host bool) (rest []byte, err error) {
	rest, window, err := decodeArrayRaw(b, shape, a)
	if err == nil && host {
		a.toHost(window)
	}
	return rest, err
}

// decodeArrayRaw decodes without touching b; window is the number of bytes
// before the data that toHost may write over.
func decodeArrayRaw(b []byte, shape []int, a *Array) (rest []byte, window int, err error) {
	it, err := iterMap(b)
	if err != nil {
		return b, 0, err
	}
	var tagged, haveData, haveDtype, haveShape bool
	var dtypeBytes []byte
	a.Shape = shape[:0]
	for it.nextKey() {
		k, rest := it.key, it.rest
		switch string(k) {
		case "__ndarray__":
			var v bool
			if v, rest, err = msgp.ReadBoolBytes(rest); err != nil {
				return b, 0, fmt.Errorf("__ndarray__: %v", err)
			}
			tagged = v
		case "data":
			before := len(rest)
			if a.Data, rest, err = msgp.ReadBytesZC(rest); err != nil {
				return b, 0, fmt.Errorf("data: %v", err)
			}
			// The key and the bin header just read are free to overwrite.
			window = before - len(rest) - len(a.Data) + len(k) + 1
			haveData = true
		case "dtype":
			switch msgp.NextType(rest) {
			case msgp.StrType:
				dtypeBytes, rest, err = msgp.ReadStringZC(rest)
			default:
				dtypeBytes, rest, err = msgp.ReadBytesZC(rest)
			}
			if err != nil {
				return b, 0, fmt.Errorf("dtype: %v", err)
			}
			haveDtype = true
		case "shape":
			var dims int
			if dims, rest, err = arrayLen(rest); err != nil {
				return b, 0, fmt.Errorf("shape: %v", err)
			}
			if dims > MaxDims || dims > cap(shape) {
				return b, 0, fmt.Errorf("shape has %d dimensions, at most %d are supported", dims, MaxDims)
			}
			a.Shape = shape[:dims]
			for d := 0; d < dims; d++ {
				var v int
				if v, rest, err = readDim(rest, d); err != nil {
					return b, 0, err
				}
				a.Shape[d] = v
			}
			haveShape = true
		default:
			if rest, err = msgp.Skip(rest); err != nil {
				return b, 0, fmt.Errorf("key %q: %v", k, err)
			}
		}
		it.rest = rest
	}
	if it.err != nil {
		return b, 0, it.err
	}
	switch {
	case !tagged:
		return b, 0, errors.New("map is not an ndarray: __ndarray__ is missing or false")
	case !haveData:
		return b, 0, errors.New("ndarray has no data")
	case !haveDtype:
		return b, 0, errors.New("ndarray has no dtype")
	case !haveShape:
		return b, 0, errors.New("ndarray has no shape")
	}
	if a.DType, err = ParseDType(dtypeBytes); err != nil {
		return b, 0, err
	}
	if err = a.Check(); err != nil {
		return b, 0, err
	}
	return it.rest, window, nil
}

// readDim reads dimension d of a shape: an integer from 0 to maxCount. A
// uint is read as one, so that one past int64's range is refused with the
// bound it passes, not with msgp's "overflows uint64" (of a value that
// fits a uint64).
func readDim(b []byte, d int) (int, []byte, error) {
	var v int64
	var rest []byte
	var err error
	if msgp.NextType(b) == msgp.UintType {
		var u uint64
		if u, rest, err = msgp.ReadUint64Bytes(b); err == nil && u > maxCount {
			return 0, b, fmt.Errorf("shape[%d] is %d, want at most %d, the largest dimension taken", d, u, uint64(maxCount))
		}
		v = int64(u)
	} else {
		v, rest, err = msgp.ReadInt64Bytes(b)
	}
	switch {
	case err != nil:
		return 0, b, fmt.Errorf("shape[%d]: %v", d, err)
	case v < 0:
		return 0, b, fmt.Errorf("shape[%d] is %d, want a non-negative dimension", d, v)
	case v > maxCount:
		return 0, b, fmt.Errorf("shape[%d] is %d, want at most %d, the largest dimension taken", d, v, int64(maxCount))
	}
	return int(v), rest, nil
}

// intArray reads a one-dimensional integer ndarray (any width, either byte
// order) into a, whose Shape is backed by shape; int64s then converts it.
// They are apart so that a caller can check the length, the peer's
// claim, before the int64s are made: 8 bytes each, for as little as 1 on
// the wire.
func intArray(where string, b []byte, shape []int, a *Array) error {
	if _, err := DecodeArray(b, shape, a); err != nil {
		return malformed(where, err)
	}
	if (a.DType.Kind != 'i' && a.DType.Kind != 'u') || len(a.Shape) != 1 {
		return malformedf(where, "is %s of shape %v, want a one-dimensional integer array (\"<i8\")", a.DType, a.Shape)
	}
	return nil
}

// int64s converts the first n entries of an intArray to int64s.
func int64s(where string, a *Array, n int) ([]int64, error) {
	out := make([]int64, n)
	for i := range out {
		v, ok := a.Int64(i)
		if !ok {
			return nil, malformedf(where, "[%d] does not fit an int64", i)
		}
		out[i] = v
	}
	return out, nil
}

// decodeBools reads a one-dimensional |b1 ndarray.
func decodeBools(where string, b []byte) ([]bool, error) {
	var shape [MaxDims]int
	var a Array
	if _, err := DecodeArray(b, shape[:], &a); err != nil {
		return nil, malformed(where, err)
	}
	if a.DType.Kind != 'b' || len(a.Shape) != 1 {
		return nil, malformedf(where, "is %s of shape %v, want a one-dimensional \"|b1\" array", a.DType, a.Shape)
	}
	out := make([]bool, len(a.Data))
	for i, v := range a.Data {
		out[i] = v != 0
	}
	return out, nil
}

// Float64 returns element i (counting in C order) of a numeric array as a
// float64, whatever its dtype and byte order; bools read as 0 or 1. It
// panics if i is out of range or the dtype is not numeric.
func (a *Array) Float64(i int) float64 {
	s := a.element(i)
	switch s.Kind {
	case 'b':
		if s.Bool {
			return 1
		}
		return 0
	case 'i':
		return float64(s.Int)
	case 'u':
		return float64(s.Uint)
	}
	return s.Float
}

// Int64 returns element i of an integer or bool array, and false if the
// value does not fit an int64 or the array holds floats that are not whole.
func (a *Array) Int64(i int) (int64, bool) {
	s := a.element(i)
	if s.Kind == 'b' {
		if s.Bool {
			return 1, true
		}
		return 0, true
	}
	return s.AsInt()
}

func (a *Array) element(i int) Scalar {
	if !a.DType.Numeric() {
		panic(fmt.Sprintf("wire: element of a %s array", a.DType))
	}
	size := a.DType.ItemSize()
	return elementScalar(a.DType, a.Data[i*size:(i+1)*size])
}

// SetFloat64 stores v as element i of a numeric array, in the array's dtype
// and byte order: floats are rounded to the dtype's width, integers truncate
// toward zero and saturate at the type's range (NaN becomes 0), bools store
// v != 0. It panics if i is out of range or the dtype is not numeric.
func (a *Array) SetFloat64(i int, v float64) {
	if !a.DType.Numeric() {
		panic(fmt.Sprintf("wire: SetFloat64 on a %s array", a.DType))
	}
	size := a.DType.ItemSize()
	putScalar(a.Data[i*size:(i+1)*size], a.DType, Scalar{Kind: 'f', Float: v})
}
