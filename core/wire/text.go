package wire

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// TextWidth is the <U width numpy would choose for strs: the longest string
// in code points, and at least 1 (numpy's width for an array of "").
func TextWidth(strs []string) int {
	w := 1
	for _, s := range strs {
		if n := utf8.RuneCountInString(s); n > w {
			w = n
		}
	}
	return w
}

// AppendUTF32 appends s as width code points of UTF-32 in host byte order,
// NUL-padded (SPEC 3.4). Invalid UTF-8 becomes U+FFFD, as in Python's
// "replace" error handler; s must not be longer than width code points.
func AppendUTF32(dst []byte, s string, width int) []byte {
	n0 := len(dst)
	dst = slices.Grow(dst, 4*width)[:n0+4*width]
	out := dst[n0:]
	clear(out) // the NUL padding, and the zero bytes of ASCII code points
	lo := 0    // the byte of a code point below 0x100 within its word
	if NativeOrder != '<' {
		lo = 3
	}
	n := 0
	for i := 0; i < len(s) && n < width; n++ {
		if c := s[i]; c < utf8.RuneSelf { // ASCII: one byte of the word
			out[4*n+lo] = c
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:]) // RuneError for bad bytes, as range does
		i += size
		if NativeOrder == '<' {
			binary.LittleEndian.PutUint32(out[4*n:], uint32(r))
		} else {
			binary.BigEndian.PutUint32(out[4*n:], uint32(r))
		}
	}
	return dst
}

// DecodeUTF32 splits a <U or >U array's data into strings, stripping the NUL
// padding. Code points that are not valid Unicode become U+FFFD.
func DecodeUTF32(data []byte, d DType) []string {
	width := d.ItemSize()
	if width == 0 {
		return nil
	}
	order := d.byteOrder()
	out := make([]string, 0, len(data)/width)
	var sb strings.Builder
	for i := 0; i+width <= len(data); i += width {
		sb.Reset()
		item := data[i : i+width]
		end := len(item)
		for end >= 4 && order.Uint32(item[end-4:end]) == 0 {
			end -= 4
		}
		for j := 0; j+4 <= end; j += 4 {
			r := rune(order.Uint32(item[j:]))
			if !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			sb.WriteRune(r)
		}
		out = append(out, sb.String())
	}
	return out
}

// DecodeText reads an observation's text value, either form of SPEC 3.4: a
// <U ndarray, or a msgpack array of strings.
func DecodeText(b []byte) ([]string, []byte, error) { return decodeText(b, -1) }

// decodeText is DecodeText of the text of an observation of rows rows (-1:
// any number). A count other than rows is refused before any string is
// made: the count is the peer's claim, and its strings cost more than
// their bytes on the wire (16 bytes a string header, for an empty str of
// one byte), so 4 MiB of empty strings naming one env took 64 MiB before
// the observation's check refused them.
func decodeText(b []byte, rows int) ([]string, []byte, error) {
	switch msgp.NextType(b) {
	case msgp.ArrayType:
		n, rest, err := arrayLen(b)
		if err != nil {
			return nil, b, err
		}
		if rows >= 0 && n != rows {
			return nil, b, textRows(n, rows)
		}
		out := make([]string, 0, n)
		for i := 0; i < n; i++ {
			var s string
			if msgp.NextType(rest) == msgp.BinType {
				var v []byte
				v, rest, err = msgp.ReadBytesZC(rest)
				s = string(v)
			} else {
				s, rest, err = msgp.ReadStringBytes(rest)
			}
			if err != nil {
				return nil, b, fmt.Errorf("text[%d]: %v", i, err)
			}
			out = append(out, s)
		}
		return out, rest, nil
	case msgp.MapType:
		var shape [MaxDims]int
		var a Array
		rest, err := DecodeArray(b, shape[:], &a)
		if err != nil {
			return nil, b, err
		}
		if a.DType.Kind != 'U' {
			return nil, b, fmt.Errorf("text array has dtype %s, want <U", a.DType)
		}
		if len(a.Shape) != 1 {
			return nil, b, fmt.Errorf("text array has shape %v, want [n]", a.Shape)
		}
		if rows >= 0 && a.Shape[0] != rows {
			return nil, b, textRows(a.Shape[0], rows)
		}
		return DecodeUTF32(a.Data, a.DType), rest, nil
	case msgp.NilType:
		rest, err := msgp.ReadNilBytes(b)
		return nil, rest, err
	}
	return nil, b, fmt.Errorf("text is a %s, want a <U array or an array of strings", msgp.NextType(b))
}

// textRows is decodeText's error for a text of n strings where rows are
// wanted.
func textRows(n, rows int) error {
	return fmt.Errorf("has %d strings, want %d (one per row)", n, rows)
}
