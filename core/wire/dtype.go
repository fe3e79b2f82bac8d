package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"unsafe"
)

// DType is a parsed numpy typestr (SPEC 3.3): a byte order, a kind and a
// size. For kind 'U' Size counts code points; every other kind counts bytes.
type DType struct {
	Order byte // '<' little-endian, '>' big-endian, '|' not applicable
	Kind  byte // 'b' bool, 'u' unsigned, 'i' signed, 'f' float, 'U' UTF-32 text
	Size  int
}

// NativeOrder is this host's byte-order character, '<' or '>'.
var NativeOrder = func() byte {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return '<'
	}
	return '>'
}()

// Common dtypes of the protocol, in host byte order.
var (
	Bool    = DType{Order: '|', Kind: 'b', Size: 1}
	Uint8   = DType{Order: '|', Kind: 'u', Size: 1}
	Int8    = DType{Order: '|', Kind: 'i', Size: 1}
	Int64   = DType{Order: NativeOrder, Kind: 'i', Size: 8}
	Float32 = DType{Order: NativeOrder, Kind: 'f', Size: 4}
	Float64 = DType{Order: NativeOrder, Kind: 'f', Size: 8}
)

// maxTextWidth bounds the code points of one <U element; numpy itself
// refuses widths past 2^31/4, and a larger one is a lie in the typestr.
const maxTextWidth = 1 << 28

// ParseDType parses a typestr such as "<f4", "|u1" or "<U21". Kinds V, O and
// c are refused by name, as are sizes a kind cannot have.
func ParseDType(s []byte) (DType, error) {
	if len(s) >= 2 && (s[1] == 'V' || s[1] == 'O' || s[1] == 'c') {
		// Named even without a size: numpy spells an object array "|O".
		return DType{}, rejectedKind(s)
	}
	if len(s) < 3 {
		return DType{}, fmt.Errorf("dtype %q: want a byte order, a kind and a size, like \"<f4\"", s)
	}
	d := DType{Order: s[0], Kind: s[1]}
	switch d.Order {
	case '<', '>', '|', '=':
	default:
		return DType{}, fmt.Errorf("dtype %q: byte order %q is not one of '<', '>', '|'", s, s[0])
	}
	if d.Order == '=' {
		d.Order = NativeOrder
	}
	// strconv.Atoi alone would also take a sign, as in "<f+4".
	size, err := strconv.Atoi(string(s[2:]))
	if err != nil || size <= 0 || s[2] < '0' || s[2] > '9' {
		return DType{}, fmt.Errorf("dtype %q: size %q is not a positive decimal", s, s[2:])
	}
	d.Size = size
	switch d.Kind {
	case 'b':
		if size != 1 {
			return DType{}, fmt.Errorf("dtype %q: bool has item size 1", s)
		}
	case 'u', 'i':
		if size != 1 && size != 2 && size != 4 && size != 8 {
			return DType{}, fmt.Errorf("dtype %q: integer item size must be 1, 2, 4 or 8", s)
		}
	case 'f':
		if size != 2 && size != 4 && size != 8 {
			return DType{}, fmt.Errorf("dtype %q: float item size must be 2, 4 or 8", s)
		}
	case 'U':
		if size > maxTextWidth {
			return DType{}, fmt.Errorf("dtype %q: text width %d is larger than %d", s, size, maxTextWidth)
		}
	default:
		return DType{}, fmt.Errorf("dtype %q: unknown kind %q; want one of b, u, i, f, U", s, s[1])
	}
	if d.Order == '|' && d.ItemSize() > 1 && d.Kind != 'U' {
		return DType{}, fmt.Errorf("dtype %q: a %d-byte item needs byte order '<' or '>'", s, d.ItemSize())
	}
	if d.ItemSize() == 1 {
		d.Order = '|'
	}
	return d, nil
}

func rejectedKind(s []byte) error {
	names := map[byte]string{'V': "structured (V)", 'O': "object (O)", 'c': "complex (c)"}
	return fmt.Errorf("dtype %q: kind %s has no wire form in PlugRL (SPEC 3.3)", s, names[s[1]])
}

// MustParseDType is ParseDType for constants known to be valid.
func MustParseDType(s string) DType {
	d, err := ParseDType([]byte(s))
	if err != nil {
		panic(err)
	}
	return d
}

// ItemSize is the number of bytes one element occupies.
func (d DType) ItemSize() int {
	if d.Kind == 'U' {
		return 4 * d.Size
	}
	return d.Size
}

// Numeric reports whether the kind is b, u, i or f, with a size that kind
// has (ParseDType's rules: b 1; u and i 1, 2, 4 or 8; f 2, 4 or 8): a
// DType built by hand as <f3 or |f0 is not numeric, so no conversion or
// message ever works on it.
func (d DType) Numeric() bool {
	switch d.Kind {
	case 'b':
		return d.Size == 1
	case 'u', 'i':
		return d.Size == 1 || d.Size == 2 || d.Size == 4 || d.Size == 8
	case 'f':
		return d.Size == 2 || d.Size == 4 || d.Size == 8
	}
	return false
}

// Swapped reports whether elements are in the other byte order than the host's.
func (d DType) Swapped() bool {
	return d.Order != '|' && d.Order != NativeOrder
}

// AppendTo appends the typestr to b without allocating.
func (d DType) AppendTo(b []byte) []byte {
	b = append(b, d.Order, d.Kind)
	return strconv.AppendInt(b, int64(d.Size), 10)
}

func (d DType) String() string { return string(d.AppendTo(nil)) }

// byteOrder is the encoding/binary order of a multi-byte dtype.
func (d DType) byteOrder() binary.ByteOrder {
	if d.Order == '>' {
		return binary.BigEndian
	}
	return binary.LittleEndian
}
