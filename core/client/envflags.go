package client

// Per-env state on the current connection.

// envFlags holds each env index's flags on the current connection: a slice
// for the small indices every caller uses (no hashing on the hot path), a
// map for any others.
type envFlags struct {
	dense []uint8
	other map[int64]uint8
}

const denseEnvs = 1 << 16

func (f *envFlags) get(e int64) uint8 {
	if e >= 0 && e < int64(len(f.dense)) {
		return f.dense[e]
	}
	return f.other[e] // 0 when absent, and for a nil map
}

func (f *envFlags) set(e int64, v uint8) {
	if e >= 0 && e < denseEnvs {
		if e >= int64(len(f.dense)) {
			if v == 0 {
				return
			}
			f.dense = append(f.dense, make([]uint8, int(e)+1-len(f.dense))...)
		}
		f.dense[e] = v
		return
	}
	if v == 0 {
		// An env holding nothing has no entry: a caller naming its envs
		// by ever new large indices (an id per episode) would otherwise
		// grow the map for as long as the connection lives.
		delete(f.other, e)
		return
	}
	if f.other == nil {
		f.other = make(map[int64]uint8)
	}
	f.other[e] = v
}

// appendOutstanding appends the envs holding an action chunk to dst.
func (f *envFlags) appendOutstanding(dst []int64) []int64 {
	for e, v := range f.dense {
		if v&envOutstanding != 0 {
			dst = append(dst, int64(e))
		}
	}
	for e, v := range f.other {
		if v&envOutstanding != 0 {
			dst = append(dst, e)
		}
	}
	return dst
}

// outstanding counts the envs holding an action chunk not yet fed back.
func (f *envFlags) outstanding() int {
	n := 0
	for _, v := range f.dense {
		n += int(v & envOutstanding)
	}
	for _, v := range f.other {
		n += int(v & envOutstanding)
	}
	return n
}

func (f *envFlags) clear() {
	clear(f.dense)
	clear(f.other)
}
