package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestAppendJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"nil", mp(nil).null(), `null`},
		{"bools", mp(nil).a(2).t(true).t(false), `[true,false]`},
		{"ints", mp(nil).a(4).i(-1).i(300).u(1 << 63).i(-1 << 63), `[-1,300,9223372036854775808,-9223372036854775808]`},
		{"floats", mp(nil).a(3).f(0.1).raw(0xca, 0x3f, 0xc0, 0, 0).f(-1e300), `[0.1,1.5,-1e+300]`},
		{"non-finite", mp(nil).a(3).f(posInf).f(negInf).f(nan), `[null,null,null]`},
		{"string escapes", mp(nil).s("a\"b\\c\n\x01\x7f/</script>é"), `"a\"b\\c\u000a\u0001` + "\x7f" + `/</script>é"`},
		{"invalid utf8 str", mp(nil).s("a\xffb\xc3"), `"a\ufffdb\ufffd"`},
		{"bin utf8", mp(nil).bin([]byte("hi")), `"hi"`},
		{"bin binary", mp(nil).bin([]byte{0xff, 0, 1}), `"/wAB"`},
		{"empty map", mp(nil).m(0), `{}`},
		{"empty list", mp(nil).a(0), `[]`},
		{"nested", mp(nil).m(2).s("a").m(1).k("b").a(1).null().s("c").s("d"), `{"a":{"b":[null]},"c":"d"}`},
		{"int key", mp(nil).m(2).i(1).s("x").f(2.5).s("y"), `{"1":"x","2.5":"y"}`},
		{"nil and bool keys", mp(nil).m(2).null().i(0).t(true).i(1), `{"null":0,"true":1}`},
		{"list key", mp(nil).m(1).a(2).i(1).s("a").i(0), `{"[1,\"a\"]":0}`},
		{"map key", mp(nil).m(1).m(1).s("k").i(1).i(0), `{"{\"k\":1}":0}`},
		{"ext", mp(nil).a(2).raw(0xd4, 1, 2).i(3), `[null,3]`},
		// Ext types msgp calls a time (-1, msgpack's timestamp; 5) or a
		// complex (3, 4) when bytes follow them: ext values all the same.
		{"ext timestamp", mp(nil).a(2).raw(0xd6, 0xff, 0, 0, 0, 1).i(3), `[null,3]`},
		{"ext 8 timestamp", mp(nil).raw(0xc7, 12, 0xff).raw(make([]byte, 12)...), `null`},
		{"ext 5", mp(nil).a(2).raw(0xd7, 5, 0, 0, 0, 0, 0, 0, 0, 0).i(3), `[null,3]`},
		{"ext 3", mp(nil).a(2).raw(0xd7, 3, 0, 0, 0, 0, 0, 0, 0, 0).i(3), `[null,3]`},
		{"ext 4", mp(nil).a(2).raw(0xd8, 4).raw(make([]byte, 16)...).i(3), `[null,3]`},
		{"ext 3, of another length", mp(nil).a(2).raw(0xd4, 3, 0).i(3), `[null,3]`},
		{"npgeneric", mp(nil).m(3).k("__npgeneric__").t(true).k("data").i(5).k("dtype").s("<i8"), `5`},
		{"npgeneric nan", mp(nil).m(3).k("__npgeneric__").t(true).k("data").f(nan).k("dtype").s("<f4"), `null`},
		{"ndarray", nd("<i4", []byte{1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}, 2, 1), `{"dtype":"<i4","shape":[2,1],"data":[1,-2]}`},
		{"ndarray be", nd(">u2", []byte{1, 2}, 1), `{"dtype":">u2","shape":[1],"data":[258]}`},
		{"ndarray bool", nd("|b1", []byte{1, 0}, 2), `{"dtype":"|b1","shape":[2],"data":[true,false]}`},
		{"ndarray f2", nd("<f2", []byte{0, 0x7c, 0, 0x38}, 2), `{"dtype":"<f2","shape":[2],"data":[null,0.5]}`},
		{"ndarray empty", nd("<f8", nil, 0, 3), `{"dtype":"<f8","shape":[0,3],"data":[]}`},
		// Tagged as numpy's but not decodable as such: the maps they are.
		{"bad ndarray", nd("<f4", []byte{1}, 1), `{"__ndarray__":true,"data":"\u0001","dtype":"<f4","shape":[1]}`},
		{"ndarray false", mp(nil).m(1).k("__ndarray__").t(false), `{"__ndarray__":false}`},
		{"npgeneric without data", mp(nil).m(1).k("__npgeneric__").t(true), `{"__npgeneric__":true}`},
		{"npgeneric of a string", mp(nil).m(2).k("__npgeneric__").t(true).k("data").s("x"), `{"__npgeneric__":true,"data":"x"}`},
		{"npgeneric holding a map", mp(nil).m(3).k("__npgeneric__").t(true).k("data").i(5).s("x").m(0), `{"__npgeneric__":true,"data":5,"x":{}}`},
		{"npgeneric holding a flat list", mp(nil).m(3).k("__npgeneric__").t(true).k("data").i(5).s("x").a(1).i(1), `5`},
		{"ndarray text", nd("<U2", []byte{'"', 0, 0, 0, 0, 0, 0, 0, 0xe9, 0, 0, 0, 'x', 0, 0, 0}, 2), `{"dtype":"<U2","shape":[2],"data":["\"","éx"]}`},
	} {
		got, rest, err := AppendJSON([]byte("prefix:"), c.b)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(rest) != 0 {
			t.Errorf("%s: %d bytes left", c.name, len(rest))
		}
		if !bytes.HasPrefix(got, []byte("prefix:")) {
			t.Errorf("%s: dst not appended to", c.name)
			continue
		}
		got = got[len("prefix:"):]
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if !jsonValid(got) {
			t.Errorf("%s: %s is not valid JSON", c.name, got)
		}
		jsonEqual(t, c.name, got, []byte(c.want))
	}
}

var (
	posInf = 1 / zero
	negInf = -1 / zero
	nan    = zero / zero
	zero   = 0.0
)

// Every control character and every escape comes out as encoding/json reads it.
func TestAppendJSONStringRoundTrip(t *testing.T) {
	var sb strings.Builder
	for r := rune(0); r < 0x300; r++ {
		sb.WriteRune(r)
	}
	sb.WriteString("\u2028\u2029\U0001F916\uFFFD")
	s := sb.String()
	js, _, err := AppendJSON(nil, mp(nil).s(s))
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	if got != s {
		t.Fatal("string did not survive AppendJSON + encoding/json")
	}
}

func TestAppendJSONErrors(t *testing.T) {
	deep := mp(nil)
	for i := 0; i < 70; i++ {
		deep = deep.a(1)
	}
	deep = deep.i(1)
	deepMaps := mp(nil)
	for i := 0; i < 70; i++ {
		deepMaps = deepMaps.m(1).s("k")
	}
	deepMaps = deepMaps.i(1)
	// Keys within keys: each level would escape the key's JSON once more,
	// doubling its size; 40 bytes of input must not make 2^20 bytes.
	keyInKey := mp(nil)
	for i := 0; i < 20; i++ {
		keyInKey = keyInKey.m(1)
	}
	keyInKey = keyInKey.s("x").i(1)
	for i := 0; i < 19; i++ {
		keyInKey = keyInKey.i(1)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too few bytes"},
		{"reserved byte", []byte{0xc1}, "0xc1 starts no msgpack value"},
		{"deep lists", deep, "deeper than 64"},
		{"deep maps", deepMaps, "deeper than 64"},
		{"key in key", keyInKey, "holds another such key"},
		{"list count lie", mp(nil).raw(0xdd, 0, 1, 0, 0).i(1), "elements in"},
		{"map count lie", mp(nil).raw(0xdf, 0, 1, 0, 0).i(1), "entries in"},
		{"truncated element", mp(nil).a(2).i(1).raw(0xcb, 0), "too few bytes"},
		{"truncated str", mp(nil).raw(0xa5, 'a'), "too few bytes"},
		{"truncated bin", mp(nil).raw(0xc4, 3, 1), "too few bytes"},
		{"truncated key", mp(nil).m(1).raw(0xa5, 'a'), "too few bytes"},
	} {
		out, _, err := AppendJSON(nil, c.b)
		errContains(t, err, c.want)
		if len(out) > 64*len(c.b)+64 {
			t.Errorf("%s: %d bytes of output for %d of input", c.name, len(out), len(c.b))
		}
	}
	// One level of non-string keys is fine.
	for _, one := range []mp{mp(nil).m(1).a(1).i(1).i(2), mp(nil).m(1).m(1).s("k").a(0).i(2)} {
		if js, _, err := AppendJSON(nil, one); err != nil || !json.Valid(js) {
			t.Fatalf("map key holding a list or a map: %s %v", js, err)
		}
	}
	// Exactly 64 levels is allowed.
	ok := mp(nil)
	for i := 0; i < 64; i++ {
		ok = ok.a(1)
	}
	ok = ok.i(1)
	if js, _, err := AppendJSON(nil, ok); err != nil || !json.Valid(js) {
		t.Fatalf("64 levels: %v", err)
	}
}

// All vectors convert to valid JSON, and the output stays proportional to
// the input.
func TestAppendJSONVectors(t *testing.T) {
	for name, raw := range allVectors(t) {
		js, rest, err := AppendJSON(nil, raw)
		if err != nil || len(rest) != 0 {
			t.Errorf("%s: %v, %d left", name, err, len(rest))
			continue
		}
		if !jsonValid(js) {
			t.Errorf("%s: invalid JSON", name)
		}
		if len(js) > 32*len(raw)+64 {
			t.Errorf("%s: %d bytes of JSON from %d", name, len(js), len(raw))
		}
	}
}

// deepMaps is depth single-key maps around an array of n small ints.
func deepMaps(depth, n int) []byte {
	b := mp(nil)
	for i := 0; i < depth; i++ {
		b = b.m(1).s("k")
	}
	b = b.a(n)
	for i := 0; i < n; i++ {
		b = b.i(int64(i % 100))
	}
	return b
}

// TestAppendJSONDeep: nested maps, with and without a numpy value at the
// bottom, come out as nested objects and the array or value inside them.
func TestAppendJSONDeep(t *testing.T) {
	js, _, err := AppendJSON(nil, deepMaps(3, 2))
	if err != nil || string(js) != `{"k":{"k":{"k":[0,1]}}}` {
		t.Fatalf("got %s, %v", js, err)
	}
	// A map that holds a container before its tag is not a numpy value.
	b := mp(nil).m(2).s("shape").a(1).a(1).i(1).s("__ndarray__").t(true)
	if IsNDArray(b) {
		t.Error("a map with a nested array before its tag is taken for an ndarray")
	}
	b = mp(nil).m(1).s("k").val(nd("<i4", []byte{7, 0, 0, 0}, 1))
	if js, _, err = AppendJSON(nil, b); err != nil || string(js) != `{"k":{"dtype":"<i4","shape":[1],"data":[7]}}` {
		t.Fatalf("an ndarray in a map: got %s, %v", js, err)
	}
}

// BenchmarkAppendJSONDeep is the cost of a metadata value's JSON against its
// nesting: 63 maps deep costs about what 1 does, per byte (it cost 63 times
// as much when every level skipped its whole subtree looking for a tag).
func BenchmarkAppendJSONDeep(b *testing.B) {
	for _, depth := range []int{1, 63} {
		in := deepMaps(depth, 1<<20)
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			var out []byte
			for i := 0; i < b.N; i++ {
				var err error
				if out, _, err = AppendJSON(out[:0], in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
