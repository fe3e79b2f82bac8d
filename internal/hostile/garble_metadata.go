package hostile

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/tinylib/msgp/msgp"
)

// garbleVerdict is what a correct client must do with a garbled metadata
// message, where the generator can know it.
type garbleVerdict int

const (
	// metaTaken: every lie told is one SPEC 5.1 allows (an odd type for a
	// key is the key absent, never an error), so the message must be taken
	// with the typed values metaTruth gives.
	metaTaken garbleVerdict = iota
	// metaRefused: the message is not a metadata message (message_type,
	// data, a key given twice, a key that is not a string) and must be
	// refused.
	metaRefused
	// metaEither: bytes were flipped, cut or added, or a map header lies
	// about its count; what that did to the message is not worked out.
	metaEither
)

// metaTruth is what garbleMetadata drew, for a test to hold a client's
// decoder to: the verdict, and for a taken message the typed keys (SPEC
// 5.1) as a client must read them. An absent key, or one whose value is
// not of the key's type, is missing from the maps.
type metaTruth struct {
	verdict  garbleVerdict
	ints     map[string]int64
	strs     map[string]string
	features []string // nil: absent (an empty list is []string{})
}

// garbleMetaKeys are the extra keys garbleMetadata may add, in order; a
// client reading every key reads these too.
var garbleMetaKeys = []string{"x0", "x1", "x2", "x3", "x4", "x5"}

// garbleMetadata is GarbleMetadata's first message on a connection whose
// actions are [h, n, d]. About one in five is honest: every key of SPEC
// 5.1 with its true value (protocol_version 1, action_horizon h,
// action_dim d). In the others each key may be absent, or written in
// another encoding of the same value (a wider int, a float, a numpy
// scalar or one-element ndarray: still the value), or as another value,
// or as a value of another type (which SPEC 5.1 makes the key absent);
// strings may be empty, long, invalid UTF-8 or hold a NUL; extra keys
// carry values of every msgpack type, numpy arrays and nests deeper than
// any JSON reader keeps. About one in four of those then breaks the
// message itself: its message_type or data, a key given twice or one
// that is not a string, a map's count, or bytes flipped, cut or added.
// The frame around it is always whole.
func garbleMetadata(rng *rand.Rand, h, d int) ([]byte, metaTruth) {
	honest := rng.IntN(5) == 0
	lie := func(oneIn int) bool { return !honest && rng.IntN(oneIn) == 0 }
	truth := metaTruth{ints: map[string]int64{}, strs: map[string]string{}}

	type entry struct{ key, val []byte }
	var entries []entry
	key := func(k string) []byte {
		if lie(10) {
			return msgp.AppendBytes(nil, []byte(k)) // a bin key names the same key
		}
		return msgp.AppendString(nil, k)
	}
	for _, kv := range []struct {
		key string
		v   int64
	}{{"protocol_version", 1}, {"action_horizon", int64(h)}, {"action_dim", int64(d)}} {
		if lie(6) {
			continue
		}
		val, v, ok := garbleInt(rng, kv.v, lie(2))
		if ok {
			truth.ints[kv.key] = v
		}
		entries = append(entries, entry{key(kv.key), val})
	}
	for _, kv := range []struct{ key, v string }{
		{"server", "plugrl-hostile"}, {"server_version", "0.1.0"}, {"algorithm", "Garble"}, {"policy", "hostile:garble-metadata"},
	} {
		if lie(6) {
			continue
		}
		val, s, ok := garbleStr(rng, kv.v, lie(2))
		if ok {
			truth.strs[kv.key] = s
		}
		entries = append(entries, entry{key(kv.key), val})
	}
	if !lie(4) {
		val, fs := garbleFeatures(rng, lie(2))
		truth.features = fs
		entries = append(entries, entry{key("features"), val})
	}
	if !honest {
		for _, k := range garbleMetaKeys[:rng.IntN(len(garbleMetaKeys)+1)] {
			entries = append(entries, entry{key(k), garbleValue(rng, nil, 0)})
		}
	}
	rng.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })

	// The data map, and the lies about the map itself.
	verdict := metaTaken
	if len(entries) > 0 && lie(25) {
		e := entries[rng.IntN(len(entries))]
		entries = append(entries, entry{e.key, garbleValue(rng, nil, 0)})
		verdict = metaRefused
	}
	if lie(40) {
		entries = append(entries, entry{msgp.AppendInt64(nil, 7), msgp.AppendNil(nil)})
		verdict = metaRefused
	}
	count := uint32(len(entries))
	if lie(40) {
		count = []uint32{count + 1, count - 1, 1 << 31}[rng.IntN(3)]
		verdict = max(verdict, metaEither)
	}
	data := msgp.AppendMapHeader(nil, count)
	for _, e := range entries {
		data = append(append(data, e.key...), e.val...)
	}

	// The envelope: {message_type, data}, in either order, sometimes with
	// a key more (which a client ignores).
	mt := msgp.AppendString(nil, "metadata")
	if lie(25) {
		mt = []func() []byte{
			func() []byte { return msgp.AppendString(nil, "action") },
			func() []byte { return msgp.AppendString(nil, "") },
			func() []byte { return msgp.AppendString(nil, "Metadata") },
			func() []byte { return msgp.AppendInt64(nil, 5) },
		}[rng.IntN(4)]()
		verdict = max(verdict, metaRefused)
	}
	fields := []entry{{msgp.AppendString(nil, "message_type"), mt}}
	if lie(30) {
		switch rng.IntN(4) {
		case 0: // no data key
		case 1:
			fields = append(fields, entry{msgp.AppendString(nil, "data"), msgp.AppendNil(nil)})
		case 2:
			fields = append(fields, entry{msgp.AppendString(nil, "data"), msgp.AppendArrayHeader(nil, 0)})
		case 3:
			fields = append(fields, entry{msgp.AppendString(nil, "data"), msgp.AppendString(nil, "{}")})
		}
		verdict = max(verdict, metaRefused)
	} else {
		fields = append(fields, entry{msgp.AppendString(nil, "data"), data})
	}
	if lie(8) {
		fields = append(fields, entry{msgp.AppendString(nil, "run"), msgp.AppendString(nil, "x")})
	}
	rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	b := msgp.AppendMapHeader(nil, uint32(len(fields)))
	for _, f := range fields {
		b = append(append(b, f.key...), f.val...)
	}

	if lie(10) {
		b = garbleBytes(rng, b)
		verdict = metaEither
	}
	truth.verdict = verdict
	return b, truth
}

// garbleInt writes v, an integer key's true value: honestly, or (when
// garble) in another encoding of v, as another integer, or as a value
// that is no integer. It returns what was written and the integer a
// client must read from it (ok false: the key reads as absent).
func garbleInt(rng *rand.Rand, v int64, garble bool) (val []byte, read int64, ok bool) {
	if !garble {
		return msgp.AppendInt64(nil, v), v, true
	}
	le := binary.LittleEndian.AppendUint64(nil, uint64(v))
	switch rng.IntN(15) {
	case 0: // int 64 whatever the value
		return binary.BigEndian.AppendUint64([]byte{0xd3}, uint64(v)), v, true
	case 1: // uint 64
		return binary.BigEndian.AppendUint64([]byte{0xcf}, uint64(v)), v, v >= 0
	case 2:
		return msgp.AppendFloat64(nil, float64(v)), v, true
	case 3:
		return msgp.AppendFloat32(nil, float32(v)), v, true
	case 4: // a zero-dimensional ndarray, as numpy sends np.int64(v) in an array
		return appendNDArray(nil, "<i8", []int64{}, le), v, true
	case 5: // a one-element ndarray, big-endian
		return appendNDArray(nil, ">i4", []int64{1}, binary.BigEndian.AppendUint32(nil, uint32(v))), v, true
	case 6: // a numpy scalar (SPEC 3.2)
		b := msgp.AppendMapHeader(nil, 3)
		b = msgp.AppendBytes(b, []byte("__npgeneric__"))
		b = msgp.AppendBool(b, true)
		b = msgp.AppendBytes(b, []byte("data"))
		b = msgp.AppendInt64(b, v)
		b = msgp.AppendBytes(b, []byte("dtype"))
		return msgp.AppendString(b, "<i8"), v, true
	case 7: // another integer
		w := []int64{v + 1, v - 1, 0, -1, 1 << 40, math.MaxInt64, math.MinInt64}[rng.IntN(7)]
		return msgp.AppendInt64(nil, w), w, true
	case 8:
		return msgp.AppendUint64(nil, math.MaxUint64), 0, false
	case 9:
		f := []float64{float64(v) + 0.5, math.NaN(), math.Inf(1), 1e300}[rng.IntN(4)]
		return msgp.AppendFloat64(nil, f), 0, false
	case 10:
		return msgp.AppendString(nil, strconv.FormatInt(v, 10)), 0, false
	case 11:
		return msgp.AppendBool(nil, true), 0, false
	case 12:
		return msgp.AppendNil(nil), 0, false
	case 13:
		return msgp.AppendInt64(msgp.AppendArrayHeader(nil, 1), v), 0, false
	default: // two elements: no scalar
		return appendNDArray(nil, "<i8", []int64{2}, append(le, le...)), 0, false
	}
}

// garbleStr writes s, a string key's true value, as garbleInt does an
// integer's: the string a client must read, or ok false.
func garbleStr(rng *rand.Rand, s string, garble bool) (val []byte, read string, ok bool) {
	if garble {
		switch rng.IntN(9) {
		case 0:
			s = ""
		case 1:
			long := make([]byte, 1+rng.IntN(64<<10))
			for i := range long {
				long[i] = byte(' ' + rng.IntN(95))
			}
			s = string(long)
		case 2: // what JSON must escape, and a NUL
			s = "a\x00b\"c\\d\ne\tf\x01g\x7f\u2028é" + s
		case 3: // not UTF-8
			bad := make([]byte, rng.IntN(64))
			for i := range bad {
				bad[i] = byte(0x80 + rng.IntN(128))
			}
			s = string(bad)
		case 4: // str 32 whatever the length
			return append(binary.BigEndian.AppendUint32([]byte{0xdb}, uint32(len(s))), s...), s, true
		case 5: // bytes are not a string
			return msgp.AppendBytes(nil, []byte(s)), "", false
		case 6:
			return msgp.AppendInt64(nil, 7), "", false
		case 7:
			return msgp.AppendNil(nil), "", false
		default:
			return msgp.AppendString(msgp.AppendArrayHeader(nil, 1), s), "", false
		}
	}
	return msgp.AppendString(nil, s), s, true
}

// garbleFeatures writes a features list (SPEC 10.1) and returns the names
// a client must read from it, nil if it must read none (absent).
func garbleFeatures(rng *rand.Rand, garble bool) ([]byte, []string) {
	names := []string{"f-a", "f-b"}
	if rng.IntN(2) == 0 {
		names = append(names, "reuse-feedback-obs")
	}
	list := func(names []string) []byte {
		b := msgp.AppendArrayHeader(nil, uint32(len(names)))
		for _, n := range names {
			b = msgp.AppendString(b, n)
		}
		return b
	}
	if !garble {
		return list(names), names
	}
	switch rng.IntN(8) {
	case 0:
		return list([]string{}), []string{}
	case 1: // the most a client keeps typed (wire's maxFeatures), then one more
		many := make([]string, 1024)
		for i := range many {
			many[i] = "f-" + strconv.Itoa(i)
		}
		if rng.IntN(2) == 0 {
			return list(many), many
		}
		return list(append(many, "f-a")), nil
	case 2: // a name that is bytes
		b := msgp.AppendArrayHeader(nil, 2)
		b = msgp.AppendString(b, names[0])
		return msgp.AppendBytes(b, []byte(names[1])), nil
	case 3:
		b := msgp.AppendArrayHeader(nil, 2)
		b = msgp.AppendString(b, names[0])
		return msgp.AppendInt64(b, 1), nil
	case 4:
		return msgp.AppendString(nil, names[0]), nil
	case 5:
		return msgp.AppendNil(nil), nil
	case 6: // odd names are still names
		odd := []string{"", "f\x00a", "\xff\xfe", names[0]}
		return list(odd), odd
	default: // a name twice is still a list of names
		twice := []string{names[0], names[0]}
		return list(twice), twice
	}
}

// garbleValue appends a random msgpack value: any type msgpack has, numpy
// arrays and scalars (some malformed), maps with keys that are not
// strings, and now and then a nest of 60 to 70 arrays and maps, about the
// 64 levels past which a client may refuse to show a value as JSON.
func garbleValue(rng *rand.Rand, b []byte, depth int) []byte {
	if depth == 0 && rng.IntN(12) == 0 {
		n := 60 + rng.IntN(11)
		for i := 0; i < n; i++ {
			if rng.IntN(2) == 0 {
				b = msgp.AppendArrayHeader(b, 1)
			} else {
				b = msgp.AppendString(msgp.AppendMapHeader(b, 1), "k")
			}
		}
		return msgp.AppendNil(b)
	}
	leaf := depth >= 3
	switch k := rng.IntN(16); {
	case k == 0:
		return msgp.AppendNil(b)
	case k == 1:
		return msgp.AppendBool(b, rng.IntN(2) == 0)
	case k == 2:
		return msgp.AppendInt64(b, int64(rng.Uint64())>>rng.IntN(64))
	case k == 3:
		return msgp.AppendUint64(b, rng.Uint64())
	case k == 4:
		return msgp.AppendFloat64(b, []float64{math.NaN(), math.Inf(-1), -0.0, 5e-324, 1e308, rng.NormFloat64()}[rng.IntN(6)])
	case k == 5:
		return msgp.AppendFloat32(b, math.Float32frombits(rng.Uint32()))
	case k == 6, k == 7:
		s := randomBytes(rng, rng.IntN(40)) // control characters, quotes, invalid UTF-8
		if k == 6 {
			return msgp.AppendString(b, string(s))
		}
		return msgp.AppendBytes(b, s)
	case k == 8:
		data := randomBytes(rng, rng.IntN(17))
		// An ext of any type and length: fixext, ext 8, the timestamp's -1.
		ext, err := msgp.AppendExtension(b, &msgp.RawExtension{Type: int8(rng.IntN(256) - 128), Data: data})
		if err != nil { // RawExtension marshals by copying: it cannot fail
			return msgp.AppendNil(b)
		}
		return ext
	case k == 9: // an ndarray of any dtype, honest or not
		dtype := garbleDTypes[rng.IntN(len(garbleDTypes))]
		shape := []int64{int64(rng.IntN(4)), int64(1 + rng.IntN(3))}[:rng.IntN(3)]
		size := max(1, garbleDTypeSize(dtype))
		n := 1
		for _, v := range shape {
			n *= int(v)
		}
		data := randomBytes(rng, n*size+[]int{0, 0, 0, 1, -1}[rng.IntN(5)]*min(1, n))
		return appendFields(b, ndarrayFields(dtype, shape, data, func(oneIn int) bool { return rng.IntN(oneIn) == 0 }))
	case k == 10: // a numpy scalar, its data a number or not
		b = msgp.AppendMapHeader(b, 3)
		b = msgp.AppendBytes(b, []byte("__npgeneric__"))
		b = msgp.AppendBool(b, true)
		b = msgp.AppendBytes(b, []byte("data"))
		b = garbleValue(rng, b, 3)
		b = msgp.AppendBytes(b, []byte("dtype"))
		return msgp.AppendString(b, garbleDTypes[rng.IntN(len(garbleDTypes))])
	case leaf || k == 11:
		return msgp.AppendString(b, "leaf")
	case k <= 13:
		n := rng.IntN(4)
		b = msgp.AppendArrayHeader(b, uint32(n))
		for i := 0; i < n; i++ {
			b = garbleValue(rng, b, depth+1)
		}
		return b
	default: // a map, its keys strings or any value (JSON spells those as strings)
		n := rng.IntN(4)
		b = msgp.AppendMapHeader(b, uint32(n))
		for i := 0; i < n; i++ {
			if rng.IntN(3) == 0 {
				b = garbleValue(rng, b, depth+1)
			} else {
				b = msgp.AppendString(b, "k"+strconv.Itoa(i))
			}
			b = garbleValue(rng, b, depth+1)
		}
		return b
	}
}
