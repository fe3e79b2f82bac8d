package wire

import "testing"

// TestParseDTypeRefuses: typestrs that no numpy makes are refused, each by
// the check meant for it. FuzzParseDType seeds some of them, but its
// property (what parses round-trips through String) holds for a sign in
// the size ("<f+4" parses as <f4) and for a multi-byte item with no byte
// order ("|i2" prints as itself), so mutants removing either check
// survived it.
func TestParseDTypeRefuses(t *testing.T) {
	for _, s := range []string{
		"<f+4", "<i+8", "<f-4", "<f 4", "<f4 ", // size: a positive decimal, digits only
		"|i2", "|u8", "|f4", "|f8", // more than one byte needs '<' or '>'
		"<f0", "<b2", "<f3", "<i3", "<u16", "<f16", // sizes the kind cannot have
		"<U0", "<U268435457", // text width
		"<x4", "f4", "", "<", "!f4", // kind, order, length
	} {
		if d, err := ParseDType([]byte(s)); err == nil {
			t.Errorf("ParseDType(%q) = %+v, want an error", s, d)
		}
	}
	// And their neighbours that numpy does make parse, so that the list
	// above is not passing by refusing everything.
	for s, want := range map[string]DType{
		"<f4":  {'<', 'f', 4},
		">i2":  {'>', 'i', 2},
		"|u1":  {'|', 'u', 1},
		"<u1":  {'|', 'u', 1}, // one byte: order is not applicable
		"|b1":  {'|', 'b', 1},
		"<U21": {'<', 'U', 21},
	} {
		if d, err := ParseDType([]byte(s)); err != nil || d != want {
			t.Errorf("ParseDType(%q) = %+v, %v, want %+v", s, d, err, want)
		}
	}
}
