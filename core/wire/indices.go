package wire

import (
	"fmt"
	"slices"
	"sync"
)

// indexSet finds the first env index that is negative or repeats an earlier
// one, in O(n). Both sides of the wire need it: the encoders for a caller's
// env_indices (a Message keeps one, so the check allocates nothing once its
// scratch has grown) and the server's decoders for a client's. Comparing
// each index with every earlier one, as this used to, took seconds for
// 131072 envs.
//
// Env indices are normally small and dense (0..n-1 of a vector env), so the
// common case is a bitset indexed by value. Indices too large and sparse for
// a bitset of bounded size are sorted instead.
type indexSet struct {
	// bits has one bit per index value up to its length. Every word is zero
	// between calls: a call clears the words it set, which costs O(n) rather
	// than O(max index).
	bits []uint64
	// sorted is the scratch copy that the sparse case sorts.
	sorted []int64
}

const (
	// smallIndices is the count up to which the plain quadratic scan is
	// used: it needs no scratch, which matters to the server's per-message
	// check, and 120 comparisons are no slower than the bitset.
	smallIndices = 16
	// minDenseWords is the bitset size (32 KiB, indices below 262144) always
	// allowed; above it the bitset may be as large as the indices themselves
	// (one word per index), so what the check keeps is bounded by what the
	// caller passed.
	minDenseWords = 1 << 12
)

// firstBad returns the position of the first index in idx that is negative
// or equal to an earlier index, or -1 when all are unique and non-negative.
// "First" is in idx's order, as a one-pass scan would find it, so that error
// messages do not depend on which of the strategies below was taken.
func (s *indexSet) firstBad(idx []int64) int {
	if len(idx) <= smallIndices {
		return firstBadQuadratic(idx)
	}
	var hi int64
	for _, v := range idx {
		hi = max(hi, v)
	}
	if words := uint64(hi)>>6 + 1; words <= uint64(max(len(idx), minDenseWords)) {
		return s.dense(idx, int(words))
	}
	return s.sparse(idx)
}

func (s *indexSet) dense(idx []int64, words int) int {
	if cap(s.bits) < words {
		s.bits = make([]uint64, words)
	}
	bits := s.bits[:words]
	bad := -1
	for i, v := range idx {
		if v < 0 {
			bad = i
			break
		}
		w, b := v>>6, uint64(1)<<(v&63)
		if bits[w]&b != 0 {
			bad = i
			break
		}
		bits[w] |= b
	}
	set := idx
	if bad >= 0 {
		set = idx[:bad]
	}
	for _, v := range set {
		bits[v>>6] = 0 // every bit in the word was set by this call
	}
	return bad
}

// sparse sorts a copy; it only has to say whether a bad index exists, since
// that is the rare case, and leaves finding the first one to a map.
func (s *indexSet) sparse(idx []int64) int {
	s.sorted = append(s.sorted[:0], idx...)
	slices.Sort(s.sorted)
	ok := s.sorted[0] >= 0
	for i := 1; ok && i < len(s.sorted); i++ {
		ok = s.sorted[i] != s.sorted[i-1]
	}
	if ok {
		return -1
	}
	seen := make(map[int64]struct{}, len(idx))
	for i, v := range idx {
		if _, dup := seen[v]; dup || v < 0 {
			return i
		}
		seen[v] = struct{}{}
	}
	return -1 // not reached: the sort found a bad index
}

func firstBadQuadratic(idx []int64) int {
	for i, v := range idx {
		if v < 0 {
			return i
		}
		for _, w := range idx[:i] {
			if w == v {
				return i
			}
		}
	}
	return -1
}

// envIndicesRule is the rule for env_indices (SPEC 4.4), the same for a
// caller's indices and a peer's: nil, or what is wrong with the first
// negative or repeated index. s is scratch (see indexSet).
func envIndicesRule(s *indexSet, idx []int64) error {
	i := s.firstBad(idx)
	switch {
	case i < 0:
		return nil
	case idx[i] < 0:
		return fmt.Errorf("env_indices[%d] is %d; env indices are non-negative", i, idx[i])
	}
	return fmt.Errorf("env index %d appears twice", idx[i])
}

// MaxEnvs bounds the envs of one infer or feedback the encoders take:
// far beyond any env loop (the C API allows 1<<20), and low enough that
// every per-env array of a message (8 bytes an env at most) stays under
// msgpack's 4 GiB bin limit, so those arrays' headers cannot fail.
const MaxEnvs = 1 << 26

// checkEnvIndices checks a caller's env indices for EncodeInfer and
// EncodeFeedback, using the Message's scratch s.
func checkEnvIndices(s *indexSet, what string, idx []int64) error {
	if len(idx) > MaxEnvs {
		return invalidf("%s: %d envs in one message, at most %d", what, len(idx), MaxEnvs)
	}
	if err := envIndicesRule(s, idx); err != nil {
		return invalidf("%s: %v", what, err)
	}
	return nil
}

// serverIndexSets lends the server's decoders an indexSet: DecodeInfer and
// DecodeFeedback are plain functions, called from many connections at once.
var serverIndexSets = sync.Pool{New: func() any { return new(indexSet) }}

// checkIndices checks a client's env indices, for the server's decoders
// (kind is the message's type).
func checkIndices(kind string, idx []int64) error {
	s := serverIndexSets.Get().(*indexSet)
	err := envIndicesRule(s, idx)
	serverIndexSets.Put(s)
	if err != nil {
		return malformed(kind, err)
	}
	return nil
}

// decodeEnvs reads the env_indices and step_ids that infer and feedback
// both carry: one length n >= 1, indices unique and non-negative.
func decodeEnvs(kind string, rawIdx, rawSteps []byte) (idx, steps []int64, err error) {
	var shape [MaxDims]int
	var a Array
	if err = intArray(kind+".env_indices", rawIdx, shape[:], &a); err != nil {
		return nil, nil, err
	}
	n := a.Shape[0]
	if n == 0 {
		return nil, nil, malformedf(kind+".env_indices", "is empty; every %s names at least one env", kind)
	}
	// More entries than the dtype has non-negative values (256 of |u1)
	// repeat one or hold a negative one within the first that many + 1:
	// only those are made into int64s, for checkIndices to name the
	// first. All of them took 8 bytes an entry, for 1 on the wire.
	m := n
	if v, ok := nonNegativeValues(a.DType); ok && n > v {
		m = v + 1
	}
	if idx, err = int64s(kind+".env_indices", &a, m); err != nil {
		return nil, nil, err
	}
	if err = checkIndices(kind, idx); err != nil {
		return nil, nil, err
	}
	if m < n { // not reached: the first m hold a bad index
		return nil, nil, malformedf(kind+".env_indices", "has %d entries of %s, which has %d non-negative values", n, a.DType, m-1)
	}
	if err = intArray(kind+".step_ids", rawSteps, shape[:], &a); err != nil {
		return nil, nil, err
	}
	// The length first: step_ids of another length are refused before
	// their int64s are made.
	if a.Shape[0] != n {
		return nil, nil, malformedf(kind+".step_ids", "has %d entries for %d env_indices", a.Shape[0], n)
	}
	if steps, err = int64s(kind+".step_ids", &a, n); err != nil {
		return nil, nil, err
	}
	return idx, steps, nil
}

// nonNegativeValues is how many non-negative values an integer dtype of 1
// or 2 bytes has; ok is false for wider ones, whose entries take at least
// half the bytes of their int64s.
func nonNegativeValues(d DType) (v int, ok bool) {
	if d.Size > 2 {
		return 0, false
	}
	bits := 8 * d.Size
	if d.Kind == 'i' {
		bits--
	}
	return 1 << bits, true
}
