package wire

import "testing"

// TestNPGenericDataNotNested: a numpy scalar's data is a plain number
// (SPEC 3.2), never another map. DecodeScalar does not recurse into one:
// nested __npgeneric__ maps would make its stack follow the depth a server
// chose (about 20 bytes a level, within the message cap), and a Go stack
// overflow ends the process rather than returning an error. The
// existing "npgeneric data map" case nests a map without data, which
// fails either way; a mutant that recursed survived it.
func TestNPGenericDataNotNested(t *testing.T) {
	inner := mp(nil).m(2).k("__npgeneric__").t(true).k("data").i(3)
	outer := mp(nil).m(2).k("__npgeneric__").t(true).k("data").val(inner)
	if s, _, err := DecodeScalar(outer); err == nil {
		t.Fatalf("a __npgeneric__ whose data is another one decoded as %+v; want an error", s)
	}
	if s, _, err := DecodeScalar(inner); err != nil || s.Kind != 'i' || s.Int != 3 {
		t.Fatalf("the inner one alone: %+v, %v", s, err)
	}
}
