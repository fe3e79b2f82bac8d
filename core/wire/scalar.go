package wire

// Scalars: numbers read from msgpack, numpy scalars or array elements, and
// written back into an element of any numeric dtype.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tinylib/msgp/msgp"
)

func putScalar(dst []byte, d DType, s Scalar) {
	order := d.byteOrder()
	if d.Kind == 'f' {
		putFloat(dst, d.Size, order, s)
		return
	}
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
		// Only values past MaxInt64 stay 'u': their own value into a
		// uint64, the top of the range into any other integer.
		if d.Kind == 'u' && d.Size == 8 {
			order.PutUint64(dst, s.Uint)
			return
		}
		iv = math.MaxInt64
	case 'f':
		f, isFloat = s.Float, true
	}
	// A float of 2^63 or more into a uint64: the range past int64's.
	if isFloat && d.Kind == 'u' && d.Size == 8 && f >= 1<<63 {
		u := uint64(math.MaxUint64)
		if f < 1<<64 {
			u = uint64(f)
		}
		order.PutUint64(dst, u)
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

// putFloat writes s into a float element of size bytes. Each value is
// rounded once, as C's conversions round: an integer goes to float32
// directly, not through float64, and a uint64 past int64's range keeps its
// value.
func putFloat(dst []byte, size int, order binary.ByteOrder, s Scalar) {
	var f64 float64
	var f32 float32
	switch s.Kind {
	case 'b':
		if s.Bool {
			f64, f32 = 1, 1
		}
	case 'i':
		f64, f32 = float64(s.Int), float32(s.Int)
	case 'u':
		f64, f32 = float64(s.Uint), float32(s.Uint)
	default:
		f64, f32 = s.Float, float32(s.Float)
	}
	switch size {
	case 2:
		// From f64, not f32: float64 to float32 to half rounds twice
		// (float64ToFloat16). f64 holds every value exactly but integers
		// past 2^53, which are past half's range either way.
		order.PutUint16(dst, float64ToFloat16(f64))
	case 4:
		order.PutUint32(dst, math.Float32bits(f32))
	default:
		order.PutUint64(dst, math.Float64bits(f64))
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

// Scalar is a decoded number from a msgpack int/float/bool or a numpy scalar
// (`__npgeneric__`) map.
type Scalar struct {
	Kind  byte // 'i', 'u', 'f', 'b'
	Int   int64
	Uint  uint64
	Float float64
	Bool  bool
}

// AsInt returns the scalar as an int64 if it holds an integral value.
func (s Scalar) AsInt() (int64, bool) {
	switch s.Kind {
	case 'i':
		return s.Int, true
	case 'u':
		if s.Uint <= math.MaxInt64 {
			return int64(s.Uint), true
		}
	case 'f':
		if s.Float == math.Trunc(s.Float) && math.Abs(s.Float) < 1<<53 {
			return int64(s.Float), true
		}
	}
	return 0, false
}

// DecodeScalar reads a number or bool at b, unwrapping `__npgeneric__` maps
// and zero-dimensional or single-element ndarrays.
func DecodeScalar(b []byte) (Scalar, []byte, error) {
	switch msgp.NextType(b) {
	case msgp.IntType:
		v, rest, err := msgp.ReadInt64Bytes(b)
		return Scalar{Kind: 'i', Int: v}, rest, err
	case msgp.UintType:
		v, rest, err := msgp.ReadUint64Bytes(b)
		if v <= math.MaxInt64 {
			return Scalar{Kind: 'i', Int: int64(v)}, rest, err
		}
		return Scalar{Kind: 'u', Uint: v}, rest, err
	case msgp.Float32Type, msgp.Float64Type:
		v, rest, err := msgp.ReadFloat64Bytes(b)
		return Scalar{Kind: 'f', Float: v}, rest, err
	case msgp.BoolType:
		v, rest, err := msgp.ReadBoolBytes(b)
		return Scalar{Kind: 'b', Bool: v}, rest, err
	case msgp.MapType:
		if IsNPGeneric(b) {
			return decodeNPGeneric(b)
		}
		if IsNDArray(b) {
			var shape [MaxDims]int
			var a Array
			rest, err := DecodeArray(b, shape[:], &a)
			if err != nil {
				return Scalar{}, b, err
			}
			if n, _ := Elements(a.Shape); n != 1 || !a.DType.Numeric() {
				return Scalar{}, b, fmt.Errorf("ndarray of shape %v %s is not a scalar", a.Shape, a.DType)
			}
			return elementScalar(a.DType, a.Data), rest, nil
		}
	}
	return Scalar{}, b, fmt.Errorf("value is a %s, want a number", msgp.NextType(b))
}

func decodeNPGeneric(b []byte) (Scalar, []byte, error) {
	it, err := iterMap(b)
	if err != nil {
		return Scalar{}, b, err
	}
	var s Scalar
	haveData := false
	for it.nextKey() {
		if string(it.key) == "data" && msgp.NextType(it.rest) != msgp.MapType {
			if s, it.rest, err = DecodeScalar(it.rest); err != nil {
				return Scalar{}, b, fmt.Errorf("__npgeneric__ data: %v", err)
			}
			haveData = true
			continue
		}
		if it.rest, err = msgp.Skip(it.rest); err != nil {
			return Scalar{}, b, err
		}
	}
	if it.err != nil {
		return Scalar{}, b, it.err
	}
	if !haveData {
		return Scalar{}, b, errors.New("__npgeneric__ map has no numeric data")
	}
	return s, it.rest, nil
}

// elementScalar reads the first element of data as dtype d.
func elementScalar(d DType, data []byte) Scalar {
	order := d.byteOrder()
	switch d.Kind {
	case 'b':
		return Scalar{Kind: 'b', Bool: data[0] != 0}
	case 'u':
		var v uint64
		switch d.Size {
		case 1:
			v = uint64(data[0])
		case 2:
			v = uint64(order.Uint16(data))
		case 4:
			v = uint64(order.Uint32(data))
		default:
			v = order.Uint64(data)
		}
		if v <= math.MaxInt64 {
			return Scalar{Kind: 'i', Int: int64(v)}
		}
		return Scalar{Kind: 'u', Uint: v}
	case 'i':
		var v int64
		switch d.Size {
		case 1:
			v = int64(int8(data[0]))
		case 2:
			v = int64(int16(order.Uint16(data)))
		case 4:
			v = int64(int32(order.Uint32(data)))
		default:
			v = int64(order.Uint64(data))
		}
		return Scalar{Kind: 'i', Int: v}
	default:
		switch d.Size {
		case 2:
			return Scalar{Kind: 'f', Float: float64(Float16ToFloat32(order.Uint16(data)))}
		case 4:
			return Scalar{Kind: 'f', Float: float64(math.Float32frombits(order.Uint32(data)))}
		default:
			return Scalar{Kind: 'f', Float: math.Float64frombits(order.Uint64(data))}
		}
	}
}
