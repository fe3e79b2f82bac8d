package wire

// msgpack reading shared by the decoders: keys, map and array headers
// checked against the input, and tags.

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// readKey reads a map key that is a msgpack str or bin, returning its bytes
// as a view into b.
func readKey(b []byte) (key, rest []byte, err error) {
	switch msgp.NextType(b) {
	case msgp.StrType:
		return msgp.ReadStringZC(b)
	case msgp.BinType:
		return msgp.ReadBytesZC(b)
	case msgp.InvalidType:
		if len(b) == 0 {
			return nil, b, msgp.ErrShortBytes
		}
	}
	return nil, b, fmt.Errorf("map key is a %s, want str or bin", msgp.NextType(b))
}

// mapLen reads a map header and checks the count against the input: each
// entry needs at least two bytes, so a larger count is a lie.
func mapLen(b []byte) (int, []byte, error) {
	n, rest, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return 0, b, err
	}
	if uint64(n)*2 > uint64(len(rest)) {
		return 0, b, fmt.Errorf("map of %d entries in %d bytes", n, len(rest))
	}
	return int(n), rest, nil
}

func arrayLen(b []byte) (int, []byte, error) {
	n, rest, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return 0, b, err
	}
	if uint64(n) > uint64(len(rest)) {
		return 0, b, fmt.Errorf("array of %d elements in %d bytes", n, len(rest))
	}
	return int(n), rest, nil
}

// isTagged reports whether the map at b carries key tag (e.g. "__ndarray__"),
// without decoding it.
func isTagged(b []byte, tag string) bool {
	if msgp.NextType(b) != msgp.MapType {
		return false
	}
	n, rest, err := mapLen(b)
	if err != nil {
		return false
	}
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return false
		}
		if string(k) == tag {
			return true
		}
		if rest, err = msgp.Skip(rest); err != nil {
			return false
		}
	}
	return false
}

// IsNDArray reports whether the msgpack value at b is an ndarray map (SPEC 3.2).
func IsNDArray(b []byte) bool { return isTagged(b, "__ndarray__") }

// IsNPGeneric reports whether the msgpack value at b is a numpy scalar map.
func IsNPGeneric(b []byte) bool { return isTagged(b, "__npgeneric__") }

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
