//go:build !purego

package maskcopy

// useAVX2Flag lists the vector paths this CPU can test, the current first.
func useAVX2Flag() []bool {
	if useAVX2 {
		return []bool{true, false}
	}
	return []bool{false}
}

func setAVX2(v bool) { useAVX2 = v }
