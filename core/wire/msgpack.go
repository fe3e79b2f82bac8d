package wire

// msgpack reading shared by the decoders: keys, map and array headers
// checked against the input, and tags.

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"

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

// mapIter walks the entries of a msgpack map: each key (str or bin, as
// readKey reads it) and its value, both views of the input. It is the one
// loop of the decoders over a map, over msgp's ReadMapHeaderBytes and Skip,
// and a value on the stack, so walking allocates nothing:
//
//	it, err := iterMap(b)
//	for it.next() {
//		... it.key, it.val ...
//	}
//	if it.err != nil { ... it.malformed(where) ... }
//
// Once next has returned false with no error, rest is what follows the map.
type mapIter struct {
	key, val []byte
	rest     []byte
	n, left  int // entries in the map, and not yet read
	err      error
	errKey   []byte // the key whose value is not one msgpack value, or nil
}

// duplicateKey reports a key that appears twice in the msgpack map m
// (str and bin keys compared by their bytes, as readKey gives them), or
// false if there is none or m is not a map whose entries can be read.
// Up to smallNames keys it compares every pair, with nothing allocated;
// past that it sorts the keys' hashes (8 bytes a key, against at least 2
// bytes of the map's), since a peer chooses how many keys it sends, and
// compares the keys of a hash found twice. Sorting the keys' offsets,
// each comparison reading both keys again, took 420 ms for 4 MiB of
// 3-byte keys (30 walks of the map); the hashes sort as integers, in 75
// ms. The seed is drawn for each call, so a peer cannot choose keys whose
// hashes collide.
func duplicateKey(m []byte) (string, bool) {
	it, err := iterMap(m)
	if err != nil {
		return "", false
	}
	if it.n <= smallNames {
		var keys [smallNames][]byte
		n := 0
		for it.next() {
			for _, k := range keys[:n] {
				if string(k) == string(it.key) {
					return string(it.key), true
				}
			}
			keys[n] = it.key
			n++
		}
		return "", false
	}
	seed := maphash.MakeSeed()
	hs := make([]uint64, 0, it.n)
	for it.next() {
		hs = append(hs, maphash.Bytes(seed, it.key))
	}
	slices.Sort(hs)
	for i := 1; i < len(hs); i++ {
		if hs[i] == hs[i-1] && (i < 2 || hs[i] != hs[i-2]) {
			if k, dup := keyHashedTwice(m, seed, hs[i]); dup {
				return k, true
			}
		}
	}
	return "", false
}

// keyHashedTwice reports a key of map m that appears twice among those
// whose hash is h: a walk of m, for a hash found twice, which is a key
// given twice but for a collision (one in 2^64 a pair).
func keyHashedTwice(m []byte, seed maphash.Seed, h uint64) (string, bool) {
	var same [][]byte
	it, _ := iterMap(m)
	for it.next() {
		if maphash.Bytes(seed, it.key) != h {
			continue
		}
		for _, k := range same {
			if bytes.Equal(k, it.key) {
				return string(it.key), true
			}
		}
		same = append(same, it.key)
	}
	return "", false
}

// iterMap reads the map header at b (checked by mapLen).
func iterMap(b []byte) (mapIter, error) {
	n, rest, err := mapLen(b)
	return mapIter{rest: rest, n: n, left: n}, err
}

// next moves to the next entry, reporting false at the end of the map or
// at an entry it cannot read (then err says why).
func (it *mapIter) next() bool {
	if !it.nextKey() {
		return false
	}
	rest, err := msgp.Skip(it.rest)
	if err != nil {
		it.err, it.errKey = err, it.key
		return false
	}
	it.val, it.rest = it.rest[:len(it.rest)-len(rest)], rest
	return true
}

// nextKey is next for a caller that reads each value itself, in one pass:
// it reads the key only, leaving rest at the value, and the caller sets
// rest to what follows the value before the next call.
func (it *mapIter) nextKey() bool {
	if it.left == 0 || it.err != nil {
		return false
	}
	it.left--
	k, rest, err := readKey(it.rest)
	if err != nil {
		it.err = err
		return false
	}
	it.key, it.rest = k, rest
	return true
}

// malformed is it.err as a malformed-message error about the map at
// where, or about where.key for a value that could not be read.
func (it *mapIter) malformed(where string) error {
	if it.errKey != nil {
		return malformed(where+"."+string(it.errKey), it.err)
	}
	return malformed(where, it.err)
}

// isTagged reports whether the map at b carries key tag (e.g.
// "__ndarray__"), as numpy's msgpack maps do. Their values are scalars,
// strings, bytes and a shape (an array of scalars), so a map that holds a
// container before its tag is not one, and isTagged leaves it there,
// without skipping the container. That keeps its callers linear in the
// input: JSON and the decoders ask at every level of nested maps, and
// skipping each level's subtree cost depth x size (4.2 s for 4 MiB of
// metadata 63 maps deep).
func isTagged(b []byte, tag string) bool {
	if msgp.NextType(b) != msgp.MapType {
		return false
	}
	it, err := iterMap(b)
	if err != nil {
		return false
	}
	for it.nextKey() {
		if string(it.key) == tag {
			return true
		}
		rest, ok := skipFlat(it.rest)
		if !ok {
			return false
		}
		it.rest = rest
	}
	return false
}

// skipFlat skips the value at b if it is a scalar, a string, bytes, or an
// array of those; ok is false for any other value (a map, an array holding
// a container) or a malformed one.
func skipFlat(b []byte) (rest []byte, ok bool) {
	switch msgp.NextType(b) {
	case msgp.MapType:
		return b, false
	case msgp.ArrayType:
		n, rest, err := arrayLen(b)
		if err != nil {
			return b, false
		}
		for i := 0; i < n; i++ {
			if t := msgp.NextType(rest); t == msgp.MapType || t == msgp.ArrayType {
				return b, false
			}
			if rest, err = msgp.Skip(rest); err != nil {
				return b, false
			}
		}
		return rest, true
	}
	rest, err := msgp.Skip(b)
	return rest, err == nil
}

// IsNDArray reports whether the msgpack value at b is an ndarray map (SPEC 3.2).
func IsNDArray(b []byte) bool { return isTagged(b, "__ndarray__") }

// IsNPGeneric reports whether the msgpack value at b is a numpy scalar map.
func IsNPGeneric(b []byte) bool { return isTagged(b, "__npgeneric__") }

// StringValue returns the bytes of a msgpack str value, as a view of b. A
// bin is bytes, not a string (Python's msgpack gives bytes for it, and the
// vector metadata_wrong_types has an algorithm of b"PPO" absent): it
// reports false, as for any other type.
func StringValue(b []byte) ([]byte, bool) {
	if msgp.NextType(b) != msgp.StrType {
		return nil, false
	}
	v, _, err := msgp.ReadStringZC(b)
	return v, err == nil
}
