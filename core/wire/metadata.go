package wire

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// Metadata is the decoded data map of a metadata message (SPEC 5.1). Every
// typed field may be absent: absent means the server does not know, never a
// default. Raw keeps the whole map so that any key can be read.
type Metadata struct {
	ProtocolVersion Opt[int64]
	Server          Opt[string]
	ServerVersion   Opt[string]
	Algorithm       Opt[string]
	Policy          Opt[string]
	ActionHorizon   Opt[int64]
	ActionDim       Opt[int64]
	Features        Opt[[]string]

	// Raw is the msgpack encoding of the data map, owned by Metadata.
	Raw []byte
}

// Opt is a value that a server may leave out.
type Opt[T any] struct {
	Value T
	Set   bool
}

// Has reports whether Features lists name.
func (m *Metadata) Has(feature string) bool {
	for _, f := range m.Features.Value {
		if f == feature {
			return true
		}
	}
	return false
}

// DecodeMetadata decodes a metadata message. It copies what it keeps, so msg
// may be reused afterwards. A key of an unexpected type is left absent rather
// than refused (SPEC 5.1: a client must not require any key), but stays
// readable through Lookup and JSON.
func DecodeMetadata(msg []byte) (*Metadata, error) {
	kind, data, err := Envelope(msg)
	if err != nil {
		return nil, err
	}
	if string(kind) != TypeMetadata {
		return nil, malformedf("message_type", "got %q, want %q: the server speaks first with metadata (SPEC 4.1)", kind, TypeMetadata)
	}
	if data == nil {
		return nil, malformedf("metadata", "no data key (SPEC 5.1)")
	}
	if msgp.NextType(data) != msgp.MapType {
		return nil, malformedf("metadata.data", "is a %s, want a map", msgp.NextType(data))
	}
	m := &Metadata{Raw: append([]byte(nil), data...)}
	n, rest, err := mapLen(m.Raw)
	if err != nil {
		return nil, malformed("metadata.data", err)
	}
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, malformed("metadata.data", err)
		}
		val := rest
		if rest, err = msgp.Skip(rest); err != nil {
			return nil, malformed("metadata.data."+string(k), err)
		}
		val = val[:len(val)-len(rest)]
		switch string(k) {
		case "protocol_version":
			m.ProtocolVersion = optInt(val)
		case "server":
			m.Server = optString(val)
		case "server_version":
			m.ServerVersion = optString(val)
		case "algorithm":
			m.Algorithm = optString(val)
		case "policy":
			m.Policy = optString(val)
		case "action_horizon":
			m.ActionHorizon = optInt(val)
		case "action_dim":
			m.ActionDim = optInt(val)
		case "features":
			m.Features = optStrings(val)
		}
	}
	return m, nil
}

func optInt(b []byte) Opt[int64] {
	s, _, err := DecodeScalar(b)
	if err != nil {
		return Opt[int64]{}
	}
	v, ok := s.AsInt()
	return Opt[int64]{Value: v, Set: ok}
}

func optString(b []byte) Opt[string] {
	if msgp.NextType(b) != msgp.StrType {
		return Opt[string]{}
	}
	s, _, err := msgp.ReadStringBytes(b)
	return Opt[string]{Value: s, Set: err == nil}
}

func optStrings(b []byte) Opt[[]string] {
	n, rest, err := arrayLen(b)
	if err != nil {
		return Opt[[]string]{}
	}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var s string
		if msgp.NextType(rest) != msgp.StrType {
			return Opt[[]string]{}
		}
		if s, rest, err = msgp.ReadStringBytes(rest); err != nil {
			return Opt[[]string]{}
		}
		out = append(out, s)
	}
	return Opt[[]string]{Value: out, Set: true}
}

// Lookup returns the raw msgpack encoding of key's value, and whether the key
// is present.
func (m *Metadata) Lookup(key string) ([]byte, bool) {
	n, rest, err := mapLen(m.Raw)
	if err != nil {
		return nil, false
	}
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, false
		}
		val := rest
		if rest, err = msgp.Skip(rest); err != nil {
			return nil, false
		}
		if string(k) == key {
			return val[:len(val)-len(rest)], true
		}
	}
	return nil, false
}

// Keys lists the keys of the metadata map in wire order.
func (m *Metadata) Keys() []string {
	var keys []string
	n, rest, err := mapLen(m.Raw)
	if err != nil {
		return nil
	}
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return keys
		}
		keys = append(keys, string(k))
		if rest, err = msgp.Skip(rest); err != nil {
			return keys
		}
	}
	return keys
}

// JSON returns key's value as JSON (see AppendJSON), or ok=false if absent.
func (m *Metadata) JSON(key string) (js []byte, ok bool, err error) {
	raw, ok := m.Lookup(key)
	if !ok {
		return nil, false, nil
	}
	js, _, err = AppendJSON(nil, raw)
	return js, true, err
}

// maxJSONDepth bounds nesting, so a hostile message cannot exhaust the stack.
const maxJSONDepth = 64

// AppendJSON converts one msgpack value to JSON. Numpy values become what a
// reader wants: an `__npgeneric__` scalar becomes the number, an ndarray
// becomes {"dtype": ..., "shape": [...], "data": [flat values]} (text arrays
// as strings). bin becomes a string when it is UTF-8 and base64 otherwise;
// non-finite floats become null, as JSON has no spelling for them.
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
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, rest, err = appendJSON(dst, rest, depth+1, inKey); err != nil {
				return dst, b, err
			}
		}
		return append(dst, ']'), rest, nil
	case msgp.MapType:
		if IsNPGeneric(b) {
			s, rest, err := DecodeScalar(b)
			return appendScalarJSON(dst, s), rest, err
		}
		if IsNDArray(b) {
			return appendArrayJSON(dst, b)
		}
		n, rest, err := mapLen(b)
		if err != nil {
			return dst, b, err
		}
		dst = append(dst, '{')
		for i := 0; i < n; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
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
	case msgp.ExtensionType:
		rest, err := msgp.Skip(b)
		return append(dst, "null"...), rest, err
	}
	if len(b) == 0 {
		return dst, b, msgp.ErrShortBytes
	}
	return dst, b, fmt.Errorf("byte 0x%02x starts no msgpack value", b[0])
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
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(d), 10)
	}
	dst = append(dst, `],"data":[`...)
	if a.DType.Kind == 'U' {
		for i, s := range DecodeUTF32(a.Data, a.DType) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, []byte(s))
		}
	} else {
		size := a.DType.ItemSize()
		for i := 0; i+size <= len(a.Data); i += size {
			if i > 0 {
				dst = append(dst, ',')
			}
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

// StringValue returns the bytes of a msgpack str (or bin) value.
func StringValue(b []byte) ([]byte, bool) {
	switch msgp.NextType(b) {
	case msgp.StrType:
		v, _, err := msgp.ReadStringZC(b)
		return v, err == nil
	case msgp.BinType:
		v, _, err := msgp.ReadBytesZC(b)
		return v, err == nil
	}
	return nil, false
}
