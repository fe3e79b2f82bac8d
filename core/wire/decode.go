package wire

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
)

// Message types of SPEC 2.
const (
	TypeMetadata = "metadata"
	TypeInfer    = "infer"
	TypeAction   = "action"
	TypeFeedback = "feedback"
)

// ErrMalformed wraps every decoding error, so callers can tell a malformed
// peer message from their own mistakes with errors.Is.
var ErrMalformed = errors.New("malformed message")

func malformed(where string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrMalformed, where, err)
}

func malformedf(where, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, where, fmt.Sprintf(format, args...))
}

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
	n, rest, err := mapLen(b)
	if err != nil {
		return b, 0, err
	}
	var tagged, haveData, haveDtype, haveShape bool
	var dtypeBytes []byte
	a.Shape = shape[:0]
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return b, 0, err
		}
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
				var v int64
				if v, rest, err = msgp.ReadInt64Bytes(rest); err != nil {
					return b, 0, fmt.Errorf("shape[%d]: %v", d, err)
				}
				if v < 0 || v > maxCount {
					return b, 0, fmt.Errorf("shape[%d] is %d, want a non-negative dimension", d, v)
				}
				a.Shape[d] = int(v)
			}
			haveShape = true
		default:
			if rest, err = msgp.Skip(rest); err != nil {
				return b, 0, fmt.Errorf("key %q: %v", k, err)
			}
		}
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
	return rest, window, nil
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
	n, rest, err := mapLen(b)
	if err != nil {
		return Scalar{}, b, err
	}
	var s Scalar
	haveData := false
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return Scalar{}, b, err
		}
		if string(k) == "data" && msgp.NextType(rest) != msgp.MapType {
			if s, rest, err = DecodeScalar(rest); err != nil {
				return Scalar{}, b, fmt.Errorf("__npgeneric__ data: %v", err)
			}
			haveData = true
			continue
		}
		if rest, err = msgp.Skip(rest); err != nil {
			return Scalar{}, b, err
		}
	}
	if !haveData {
		return Scalar{}, b, errors.New("__npgeneric__ map has no numeric data")
	}
	return s, rest, nil
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

// Float16ToFloat32 converts an IEEE 754 half-precision value.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(frac) / 1024 / 16384
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

// Envelope reads the top-level map at msg and returns its message_type, and
// a view of the value under key "data" (nil when absent).
func Envelope(msg []byte) (kind []byte, data []byte, err error) {
	if msgp.NextType(msg) != msgp.MapType {
		return nil, nil, malformedf("message", "top level is a %s, want a map (SPEC 2)", msgp.NextType(msg))
	}
	n, rest, err := mapLen(msg)
	if err != nil {
		return nil, nil, malformed("message", err)
	}
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return nil, nil, malformed("message", err)
		}
		start := rest
		switch string(k) {
		case "message_type":
			if msgp.NextType(rest) != msgp.StrType {
				return nil, nil, malformedf("message_type", "is a %s, want str", msgp.NextType(rest))
			}
			if kind, rest, err = msgp.ReadStringZC(rest); err != nil {
				return nil, nil, malformed("message_type", err)
			}
			continue
		}
		if rest, err = msgp.Skip(rest); err != nil {
			return nil, nil, malformed(string(k), err)
		}
		if string(k) == "data" {
			data = start[:len(start)-len(rest)]
		}
	}
	if kind == nil {
		return nil, nil, malformedf("message", "no message_type key (SPEC 2)")
	}
	return kind, data, nil
}

// Action is a decoded action message (SPEC 5.3). Its arrays are views into
// the message, aligned and in host byte order.
type Action struct {
	// EnvIDs are the server's env_ids, or nil when it sent none (the Ray
	// dialect of SPEC 5.3; the caller then uses its request's env_indices).
	EnvIDs []int64
	// Chunk is [H, n, *da], time-major.
	Chunk Array

	envIDs     Array
	idStore    []int64
	chunkShape [MaxDims]int
	idShape    [MaxDims]int

	// The structure of the last message decoded, for Decode's shortcut: its
	// length, where the chunk's data sat in it before toHost, and the bytes
	// around that data as received. A message equal to it outside the data
	// has the same env_ids, dtype and shape (a server sends the same
	// structure every time), so Decode takes only its data. Only the bytes
	// around the data are kept: a copy of the whole message would hold every
	// action twice, once in the caller's buffer and once here, for as long
	// as the Action lives.
	same       bool
	sameLen    int
	sameOff    int // of the chunk's data, as received
	sameData   int // the data's length
	sameDims   int // len(Chunk.Shape)
	sameDType  DType
	sameWindow int
	sameIDs    int    // len(EnvIDs), or -1 when the message had none
	around     []byte // msg[:sameOff] then msg[sameOff+sameData:], as received
}

// Decode decodes an action message in place: it may move and
// byte-swap bytes inside msg, and the result views msg.
func (a *Action) Decode(msg []byte) error {
	if a.same && len(msg) == a.sameLen {
		end := a.sameOff + a.sameData
		if string(msg[:a.sameOff]) == string(a.around[:a.sameOff]) && string(msg[end:]) == string(a.around[a.sameOff:]) {
			a.Chunk.DType = a.sameDType
			a.Chunk.Shape = a.chunkShape[:a.sameDims]
			a.Chunk.Data = msg[a.sameOff:end:end]
			a.Chunk.toHost(a.sameWindow)
			a.EnvIDs = nil
			if a.sameIDs >= 0 {
				a.EnvIDs = a.idStore[:a.sameIDs]
			}
			return nil
		}
	}
	a.same = false
	off, window, err := a.decode(msg)
	if err != nil {
		return err
	}
	// decode has not written to msg, so these are the bytes as received;
	// toHost may now write over the window before the data.
	end := off + len(a.Chunk.Data)
	a.around = append(append(a.around[:0], msg[:off]...), msg[end:]...)
	a.sameLen, a.sameOff, a.sameData = len(msg), off, len(a.Chunk.Data)
	a.sameDims, a.sameDType, a.sameWindow = len(a.Chunk.Shape), a.Chunk.DType, window
	a.Chunk.toHost(window)
	a.sameIDs = -1
	if a.EnvIDs != nil {
		a.sameIDs = len(a.EnvIDs)
	}
	a.same = true
	return nil
}

// decode is Decode without the shortcut, and without writing to msg: off is
// where the chunk's data is in msg, and window how many bytes before it
// toHost may write over. The chunk is left as received, for Decode to copy
// the bytes around it before toHost moves or swaps it.
func (a *Action) decode(msg []byte) (off, window int, err error) {
	kind, data, err := Envelope(msg)
	if err != nil {
		return 0, 0, err
	}
	if string(kind) != TypeAction {
		return 0, 0, malformedf("message_type", "got %q, want %q", kind, TypeAction)
	}
	if data == nil {
		return 0, 0, malformedf("action", "no data key (SPEC 5.3)")
	}
	n, rest, err := mapLen(data)
	if err != nil {
		return 0, 0, malformed("action.data", err)
	}
	a.EnvIDs = nil
	haveChunk := false
	for i := 0; i < n; i++ {
		var k []byte
		if k, rest, err = readKey(rest); err != nil {
			return 0, 0, malformed("action.data", err)
		}
		switch string(k) {
		case "action":
			if rest, window, err = decodeArrayRaw(rest, a.chunkShape[:], &a.Chunk); err != nil {
				return 0, 0, malformed("action.data.action", err)
			}
			haveChunk = true
		case "env_ids":
			// Read as received: elementScalar reads either byte order at
			// any alignment, so there is no need to write to msg.
			if rest, err = DecodeArray(rest, a.idShape[:], &a.envIDs); err != nil {
				return 0, 0, malformed("action.data.env_ids", err)
			}
			ids := &a.envIDs
			if ids.DType.Kind != 'i' && ids.DType.Kind != 'u' || len(ids.Shape) != 1 {
				return 0, 0, malformedf("action.data.env_ids", "is %s of shape %v, want a one-dimensional integer array", ids.DType, ids.Shape)
			}
			if cap(a.idStore) < ids.Shape[0] {
				a.idStore = make([]int64, ids.Shape[0])
			}
			a.EnvIDs = a.idStore[:ids.Shape[0]]
			for j := range a.EnvIDs {
				s := elementScalar(ids.DType, ids.Data[j*ids.DType.Size:])
				if s.Kind != 'i' {
					return 0, 0, malformedf("action.data.env_ids", "env_ids[%d] does not fit an int64", j)
				}
				a.EnvIDs[j] = s.Int
			}
		default:
			if rest, err = msgp.Skip(rest); err != nil {
				return 0, 0, malformed("action.data."+string(k), err)
			}
		}
	}
	if !haveChunk {
		return 0, 0, malformedf("action.data", "no action key (SPEC 5.3)")
	}
	c := &a.Chunk
	if !c.DType.Numeric() {
		return 0, 0, malformedf("action.data.action", "dtype %s is not numeric", c.DType)
	}
	if len(c.Shape) < 2 {
		return 0, 0, malformedf("action.data.action", "shape %v, want [H, n, *da] (SPEC 5.3)", c.Shape)
	}
	// A zero dimension leaves no data to check the others against (Check
	// only bounds their product), so a chunk of shape [4e18, 1, 0] and no
	// bytes would have a client step through H empty rows. A server has no
	// reason to send an empty chunk: it answers an infer, which names at
	// least one env, with at least one step. With every dimension non-zero,
	// Check (in decodeArrayRaw) has matched the data's length to the
	// shape, so no dimension exceeds what the bytes hold.
	for i, d := range c.Shape {
		if d == 0 {
			return 0, 0, malformedf("action.data.action", "shape %v has %s = 0, want at least one step of one env (SPEC 5.3)", c.Shape, dimName(i))
		}
	}
	return int(uintptr(unsafe.Pointer(&c.Data[0])) - uintptr(unsafe.Pointer(&msg[0]))), window, nil
}

// dimName names dimension i of an action chunk [H, n, *da].
func dimName(i int) string {
	switch i {
	case 0:
		return "H"
	case 1:
		return "n"
	}
	return fmt.Sprintf("da[%d]", i-2)
}

// Horizon is H, the chunk's leading dimension.
func (a *Action) Horizon() int { return a.Chunk.Shape[0] }

// Envs is n, the chunk's second dimension.
func (a *Action) Envs() int { return a.Chunk.Shape[1] }

// ActionShape is da, the per-step action shape.
func (a *Action) ActionShape() []int { return a.Chunk.Shape[2:] }
