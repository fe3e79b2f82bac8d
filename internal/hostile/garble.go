package hostile

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/tinylib/msgp/msgp"
)

// garbleMaxData bounds the data of one garbled action: shapes are drawn
// small, and a lie about a big one is told by its shape, not its bytes.
const garbleMaxData = 1 << 20

// garbleDTypes are the dtypes a garbled action may claim: the honest one
// first, then others SPEC 3.3 allows (which a client must convert or
// refuse, never misread), then strings that are no dtype at all.
var garbleDTypes = []string{
	"<f4", "<f8", "<f2", "|u1", "|i1", "<i4", "<i8", "<u8", "|b1", ">f4", ">i8",
	"<c8", "|V4", "|O", "f4", "", "<f4 ", "<f16", "<f-4", "\xff\xfe",
}

// garbleDTypeSize is the element size a dtype string names, for drawing a
// data length that matches the claimed shape; 0 where it names none.
func garbleDTypeSize(dt string) int {
	switch dt {
	case "|u1", "|i1", "|b1":
		return 1
	case "<f2":
		return 2
	case "<f4", ">f4", "<i4", "|V4", "f4":
		return 4
	case "<f8", "<i8", ">i8", "<u8", "<c8":
		return 8
	}
	return 0
}

// garbleAction is Garble's reply to an infer naming envIDs, on a
// connection whose metadata declared action_horizon h and action_dim d.
// About one reply in five is an honest action of "<f4" values (random bits,
// NaNs among them) of shape [h, n, d]. The others are built field by field
// as SPEC 5.3 has them, each field wrong with some chance in one of a few
// ways (message type, env_ids, the ndarray's keys, shape, dtype, data
// length, key order); and one in four of those then has a few bytes
// flipped, is cut short or has bytes added. Each lie is drawn on its own,
// so about one in eight of those others tells none, and some lies are
// ones SPEC allows (no env_ids, keys in another order, another numeric
// dtype, a per-step shape of [d, 1] or [1, d], flipped bytes that land in
// the data): about two in five replies are actions a client may take.
// The frame around it is always whole: the faults are of the message, not
// of WebSocket.
func garbleAction(rng *rand.Rand, envIDs []int64, h, d int) []byte {
	honest := rng.IntN(5) == 0
	lie := func(oneIn int) bool { return !honest && rng.IntN(oneIn) == 0 }
	n := len(envIDs)

	// The shape, then the dtype, then data to match them, then the lies
	// about each.
	shape := []int64{int64(h), int64(n), int64(d)}
	if lie(4) {
		switch rng.IntN(9) {
		case 0:
			shape[0] = []int64{0, -1, int64(h) - 1, int64(h) + 1, 1 << 40, 1 << 62}[rng.IntN(6)]
		case 1:
			shape[1] += []int64{-1, 1}[rng.IntN(2)]
		case 2:
			shape[2] = []int64{0, int64(d) + 1, int64(d) - 1, -int64(d)}[rng.IntN(4)]
		case 3:
			shape = shape[:2] // [h, n]: no per-env shape
		case 4:
			shape = append(shape, 1) // [h, n, d, 1]: the same values, one more axis
		case 5:
			shape = []int64{int64(h), int64(n), 1, int64(d)}
		case 6:
			shape = shape[:1]
		case 7:
			shape = nil
		case 8:
			shape = make([]int64, 40) // more axes than any client keeps
			for i := range shape {
				shape[i] = 1
			}
			shape[0], shape[1], shape[2] = int64(h), int64(n), int64(d)
		}
	}
	dtype := garbleDTypes[0]
	if lie(4) {
		dtype = garbleDTypes[1+rng.IntN(len(garbleDTypes)-1)]
	}
	size := garbleDTypeSize(dtype)
	if size == 0 {
		size = 4
	}
	count := int64(1)
	for _, v := range shape {
		if v < 0 || (v > 0 && count > garbleMaxData/v) {
			count = -1
			break
		}
		count *= v
	}
	dataLen := 0
	if count >= 0 && count*int64(size) <= garbleMaxData {
		dataLen = int(count) * size
	}
	if lie(5) {
		dataLen = max(0, dataLen+[]int{-1, 1, -size, size, -dataLen / 2}[rng.IntN(5)])
	}
	data := randomBytes(rng, dataLen)

	ids := envIDs
	if n > 0 && lie(5) { // an infer names at least one env; if not, no lie needs ids[0]
		ids = append([]int64(nil), envIDs...)
		switch rng.IntN(5) {
		case 0:
			if n > 1 {
				ids[0], ids[n-1] = ids[n-1], ids[0]
			} else {
				ids[0]++
			}
		case 1:
			ids[rng.IntN(n)] += int64(1 + rng.IntN(3))
		case 2:
			ids = ids[:n-1]
		case 3:
			ids = append(ids, ids[0])
		case 4:
			ids[rng.IntN(n)] = -1
		}
	}

	b := make([]byte, 0, 128+dataLen)
	// The envelope: {message_type, data: {env_ids, action}}.
	b = msgp.AppendMapHeader(b, 2)
	b = msgp.AppendString(b, "message_type")
	switch {
	case lie(12):
		b = msgp.AppendString(b, []string{"infer", "feedback", "actio", "ACTION", ""}[rng.IntN(5)])
	case lie(20):
		b = msgp.AppendInt64(b, 5)
	default:
		b = msgp.AppendString(b, "action")
	}
	b = msgp.AppendString(b, "data")
	if lie(25) {
		// No env_ids: allowed (SPEC 5.3: the request's own, then).
		b = msgp.AppendMapHeader(b, 1)
	} else {
		b = msgp.AppendMapHeader(b, 2)
		b = msgp.AppendString(b, "env_ids")
		idBytes := make([]byte, 0, 8*len(ids))
		u4Bytes := make([]byte, 0, 4*len(ids))
		for _, id := range ids {
			idBytes = binary.LittleEndian.AppendUint64(idBytes, uint64(id))
			u4Bytes = binary.LittleEndian.AppendUint32(u4Bytes, uint32(id))
		}
		switch {
		case lie(20):
			b = msgp.AppendNil(b)
		case lie(20):
			b = msgp.AppendArrayHeader(b, uint32(len(ids))) // a list, not an ndarray
			for _, id := range ids {
				b = msgp.AppendInt64(b, id)
			}
		case lie(20):
			// The same ids as "<u4" (SPEC 5.3 has "<i8"), not the first
			// 4n bytes of their "<i8" form, which are other values.
			b = appendNDArray(b, "<u4", []int64{int64(len(ids))}, u4Bytes)
		default:
			b = appendNDArray(b, "<i8", []int64{int64(len(ids))}, idBytes)
		}
	}
	b = msgp.AppendString(b, "action")

	// The ndarray (SPEC 3.2), its keys as bin in numpy's order, or shuffled.
	fields := ndarrayFields(dtype, shape, data, lie)
	if lie(6) {
		rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	}
	if lie(15) {
		// fields[:i] then fields[j:]: keys missing when i < j, repeated
		// (each value drawn again) when i > j, none changed when i == j.
		fields = append(fields[:rng.IntN(len(fields))], fields[rng.IntN(len(fields)):]...)
	}
	b = appendFields(b, fields)

	if lie(4) {
		b = garbleBytes(rng, b)
	}
	return b
}

// garbleBytes lies about a whole message's bytes, one of three ways: 1 to
// 3 bytes flipped, the message cut short, or 1 to 8 bytes added.
func garbleBytes(rng *rand.Rand, b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	switch rng.IntN(3) {
	case 0:
		for k := 1 + rng.IntN(3); k > 0; k-- {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
	case 1:
		b = b[:rng.IntN(len(b))]
	case 2:
		for k := 1 + rng.IntN(8); k > 0; k-- {
			b = append(b, byte(rng.Uint32()))
		}
	}
	return b
}

// ndarrayField appends one key of an ndarray and its value.
type ndarrayField func([]byte) []byte

// ndarrayFields are an ndarray's keys and values (SPEC 3.2), as bin keys in
// numpy's order, each appended by its own function so that a garbled
// action can shuffle, drop or repeat them. lie(k) says, one time in k,
// whether to write a value wrong (__ndarray__ false, data as str, shape as
// a map), and is asked as each is written.
func ndarrayFields(dtype string, shape []int64, data []byte, lie func(oneIn int) bool) []ndarrayField {
	return []ndarrayField{
		func(b []byte) []byte {
			b = msgp.AppendBytes(b, []byte("__ndarray__"))
			return msgp.AppendBool(b, !lie(15))
		},
		func(b []byte) []byte {
			b = msgp.AppendBytes(b, []byte("data"))
			if lie(20) {
				return msgp.AppendString(b, string(data))
			}
			return msgp.AppendBytes(b, data)
		},
		func(b []byte) []byte {
			b = msgp.AppendBytes(b, []byte("dtype"))
			return msgp.AppendString(b, dtype)
		},
		func(b []byte) []byte {
			b = msgp.AppendBytes(b, []byte("shape"))
			if lie(20) {
				return msgp.AppendMapHeader(b, 0)
			}
			b = msgp.AppendArrayHeader(b, uint32(len(shape)))
			for _, v := range shape {
				b = msgp.AppendInt64(b, v)
			}
			return b
		},
	}
}

// appendNDArray appends an honest ndarray (SPEC 3.2).
func appendNDArray(b []byte, dtype string, shape []int64, data []byte) []byte {
	never := func(int) bool { return false }
	return appendFields(b, ndarrayFields(dtype, shape, data, never))
}

// appendFields appends a map of fields, as many entries as there are.
func appendFields(b []byte, fields []ndarrayField) []byte {
	b = msgp.AppendMapHeader(b, uint32(len(fields)))
	for _, f := range fields {
		b = f(b)
	}
	return b
}

// randomBytes is n bytes of rng's, one draw a byte.
func randomBytes(rng *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// draws is the generator of the garble scenarios for one connection: the
// seed, and the connection's number among those drawn for.
func (s *Server) draws() *rand.Rand {
	return rand.New(rand.NewPCG(s.cfg.Seed, s.garbled.Add(1)))
}
