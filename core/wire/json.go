package wire

// JSON spelling of msgpack values, for plugrl_metadata_json and tools.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// maxJSONDepth bounds nesting, so a hostile message cannot exhaust the stack.
const maxJSONDepth = 64

// AppendJSON converts one msgpack value to JSON. Numpy values become what a
// reader wants: an `__npgeneric__` scalar becomes the number, an ndarray
// becomes {"dtype": ..., "shape": [...], "data": [flat values]} (text arrays
// as strings); either, when it does not decode or holds a map or an array
// of containers (as numpy's never do), the map it is. bin becomes a
// string when it is UTF-8 and base64 otherwise; non-finite floats and ext
// values become null, as JSON has no spelling for them. It fails only on
// bytes that are not msgpack, a value nested deeper than 64 levels, and a
// map key that is not a string holding another such key.
func AppendJSON(dst, b []byte) (out, rest []byte, err error) {
	return appendJSON(dst, b, 0, false)
}

// appendJSON converts the value at b; inKey is set while spelling a map key
// that is not a string, whose JSON text is then quoted as a string.
func appendJSON(dst, b []byte, depth int, inKey bool) ([]byte, []byte, error) {
	if depth > maxJSONDepth {
		return dst, b, errors.New("value nested deeper than 64 levels")
	}
	switch msgp.NextType(b) {
	case msgp.NilType:
		rest, err := msgp.ReadNilBytes(b)
		return append(dst, "null"...), rest, err
	case msgp.BoolType:
		v, rest, err := msgp.ReadBoolBytes(b)
		return strconv.AppendBool(dst, v), rest, err
	case msgp.IntType, msgp.UintType, msgp.Float32Type, msgp.Float64Type:
		s, rest, err := DecodeScalar(b)
		return appendScalarJSON(dst, s), rest, err
	case msgp.StrType:
		v, rest, err := msgp.ReadStringZC(b)
		return appendJSONString(dst, v), rest, err
	case msgp.BinType:
		v, rest, err := msgp.ReadBytesZC(b)
		if utf8.Valid(v) {
			return appendJSONString(dst, v), rest, err
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v)
		return append(dst, '"'), rest, err
	case msgp.ArrayType:
		n, rest, err := arrayLen(b)
		if err != nil {
			return dst, b, err
		}
		dst = append(dst, '[')
		for i := 0; i < n; i++ {
			dst = comma(dst, i)
			if dst, rest, err = appendJSON(dst, rest, depth+1, inKey); err != nil {
				return dst, b, err
			}
		}
		return append(dst, ']'), rest, nil
	case msgp.MapType:
		// A map tagged as numpy's that does not decode as one (a dtype
		// that is none, data of the wrong length) is shown as the map it
		// is: it has a JSON form, and one odd value must not hide the
		// rest of a metadata map. So is one holding a map or an array of
		// containers, as numpy's never do: decoding it skips what it
		// holds, and showing it then reads that again, at every level of
		// a nest (1.2 s for 4 MiB 62 tagged maps deep).
		if generic := IsNPGeneric(b); (generic || IsNDArray(b)) && flatMap(b) {
			if generic {
				if s, rest, err := DecodeScalar(b); err == nil {
					return appendScalarJSON(dst, s), rest, nil
				}
			} else if out, rest, err := appendArrayJSON(dst, b); err == nil {
				return out, rest, nil
			}
		}
		n, rest, err := mapLen(b)
		if err != nil {
			return dst, b, err
		}
		dst = append(dst, '{')
		for i := 0; i < n; i++ {
			dst = comma(dst, i)
			switch msgp.NextType(rest) {
			case msgp.StrType, msgp.BinType:
				var k []byte
				if k, rest, err = readKey(rest); err != nil {
					return dst, b, err
				}
				dst = appendJSONString(dst, k)
			default: // JSON keys are strings: spell the key as its JSON text
				// Quoting escapes the key's JSON once more for every level
				// of keys within keys, doubling its size each time: allow
				// one level, so output stays linear in the input.
				if inKey {
					return dst, b, errors.New("a map key that is not a string holds another such key")
				}
				var key []byte
				if key, rest, err = appendJSON(nil, rest, depth+1, true); err != nil {
					return dst, b, err
				}
				dst = appendJSONString(dst, key)
			}
			dst = append(dst, ':')
			if dst, rest, err = appendJSON(dst, rest, depth+1, inKey); err != nil {
				return dst, b, err
			}
		}
		return append(dst, '}'), rest, nil
	case msgp.ExtensionType, msgp.TimeType, msgp.Complex64Type, msgp.Complex128Type:
		// msgp names an ext by its type byte: -1 (msgpack's timestamp)
		// and 5 a time, 3 and 4 a complex. Each is an ext all the same.
		rest, err := msgp.Skip(b)
		return append(dst, "null"...), rest, err
	}
	if len(b) == 0 {
		return dst, b, msgp.ErrShortBytes
	}
	return dst, b, fmt.Errorf("byte 0x%02x starts no msgpack value", b[0])
}

// flatMap reports whether every value of the map at b is flat (skipFlat):
// what it reads is the map's own, never a container it holds.
func flatMap(b []byte) bool {
	it, err := iterMap(b)
	if err != nil {
		return false
	}
	for it.nextKey() {
		rest, ok := skipFlat(it.rest)
		if !ok {
			return false
		}
		it.rest = rest
	}
	return it.err == nil
}

func appendScalarJSON(dst []byte, s Scalar) []byte {
	switch s.Kind {
	case 'b':
		return strconv.AppendBool(dst, s.Bool)
	case 'i':
		return strconv.AppendInt(dst, s.Int, 10)
	case 'u':
		return strconv.AppendUint(dst, s.Uint, 10)
	}
	if math.IsNaN(s.Float) || math.IsInf(s.Float, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, s.Float, 'g', -1, 64)
}

func appendArrayJSON(dst, b []byte) ([]byte, []byte, error) {
	var shape [MaxDims]int
	var a Array
	rest, err := DecodeArray(b, shape[:], &a)
	if err != nil {
		return dst, b, err
	}
	dst = append(dst, `{"dtype":`...)
	dst = appendJSONString(dst, a.DType.AppendTo(nil))
	dst = append(dst, `,"shape":[`...)
	for i, d := range a.Shape {
		dst = comma(dst, i)
		dst = strconv.AppendInt(dst, int64(d), 10)
	}
	dst = append(dst, `],"data":[`...)
	if a.DType.Kind == 'U' {
		for i, s := range DecodeUTF32(a.Data, a.DType) {
			dst = comma(dst, i)
			dst = appendJSONString(dst, []byte(s))
		}
	} else {
		size := a.DType.ItemSize()
		for i := 0; i+size <= len(a.Data); i += size {
			dst = comma(dst, i)
			dst = appendScalarJSON(dst, elementScalar(a.DType, a.Data[i:]))
		}
	}
	return append(dst, "]}"...), rest, nil
}

func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// comma appends the separator before element i of a JSON array or object.
func comma(dst []byte, i int) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	return dst
}
