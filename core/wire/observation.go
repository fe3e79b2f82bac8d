package wire

// The observation (SPEC 5.2) that infer and feedback carry: its Go form,
// its rule, its encoder (with the choice of rows) and its decoder.

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// NamedArray is one named entry of an observation's images or states.
type NamedArray struct {
	Name  string
	Array Array
}

// Observation is one batch of observations (SPEC 5.2): every array and the
// text list share one leading dimension.
type Observation struct {
	Images []NamedArray // each |u1 [N, h, w, c]
	States []NamedArray // each numeric [N, ...]
	// Text holds one string per row; nil sends empty strings.
	Text []string
	// TextAsStrings sends text as a msgpack array of str instead of numpy's
	// <U form (SPEC 3.4 Gap). The default, <U, is what plugrl-env-client sends.
	TextAsStrings bool
}

// Rows is the observation's leading dimension, or -1 when it has no arrays
// and no text (then any row count is accepted and empty text is sent).
func (o *Observation) Rows() int {
	for _, g := range [2][]NamedArray{o.Images, o.States} {
		for i := range g {
			return g[i].Array.Len()
		}
	}
	if o.Text != nil {
		return len(o.Text)
	}
	return -1
}

// obsArrayRule is SPEC 5.2's rule for an array of an observation, the same
// for a caller's arrays and a peer's: "" when a fits its group, else what
// the group wants. An image is |u1 [n, h, w, c]; a state any numeric array
// [n, ...].
func obsArrayRule(image bool, a *Array) (want string) {
	switch {
	case image && (a.DType.Kind != 'u' || a.DType.Size != 1 || len(a.Shape) != 4):
		return "|u1 [n, h, w, c] (SPEC 5.2)"
	case !image && (!a.DType.Numeric() || len(a.Shape) < 1):
		return "a numeric array [n, ...]"
	}
	return ""
}

// Validate checks shapes, dtypes and lengths against each other.
func (o *Observation) Validate() error {
	rows := o.Rows()
	for gi, g := range [2][]NamedArray{o.Images, o.States} {
		group := [2]string{"images", "states"}[gi]
		for i := range g {
			a := &g[i].Array
			if !utf8.ValidString(g[i].Name) {
				// msgpack's str is UTF-8: a server decoding it as text
				// (Python's msgpack does) fails on the whole message.
				return invalidf("%s has an array name that is not UTF-8: %q", group, g[i].Name)
			}
			if err := a.Check(); err != nil {
				return invalidf("%s[%q]: %v", group, g[i].Name, err)
			}
			if want := obsArrayRule(gi == 0, a); want != "" {
				return invalidf("%s[%q] is %s of shape %v, want %s", group, g[i].Name, a.DType, a.Shape, want)
			}
			if a.Shape[0] != rows {
				return invalidf("%s[%q] has leading dimension %d, the observation has %d rows (SPEC 5.2: every array shares n)", group, g[i].Name, a.Shape[0], rows)
			}
		}
		if name, dup := duplicateName(g); dup { // the decoder's check: pairwise up to 16 names, sorted past
			return invalidf("%s has two arrays named %q", group, name)
		}
	}
	if o.Text != nil && len(o.Text) != rows {
		return invalidf("text has %d strings, the observation has %d rows", len(o.Text), rows)
	}
	for r, t := range o.Text {
		if !utf8.ValidString(t) {
			// Not replaced (U+FFFD) or sent raw: what the server would
			// read is not what the caller meant.
			return invalidf("text row %d is not UTF-8: %q", r, t)
		}
	}
	return nil
}

// observation appends the observation map with the given rows.
func (m *Message) observation(o *Observation, rows []int) error {
	m.Map(3)
	for gi, g := range [2][]NamedArray{o.Images, o.States} {
		m.raw([2][]byte{strImages, strStates}[gi])
		m.Map(len(g))
		for i := range g {
			m.Str(g[i].Name)
			m.setSrc([2]uint8{srcImage, srcState}[gi], i, g[i].Array.Data)
			err := m.rowsArray(&g[i].Array, rows)
			m.setSrc(srcNone, 0, nil)
			if err != nil {
				return err
			}
		}
	}
	m.raw(strText)
	text := func(r int) string {
		if o.Text == nil {
			return ""
		}
		return o.Text[r]
	}
	if o.TextAsStrings {
		m.List(len(rows))
		for _, r := range rows {
			m.Str(text(r))
		}
		return nil
	}
	width := 1
	for _, r := range rows {
		if w := runeCount(text(r)); w > width {
			width = w
		}
	}
	d := DType{Order: NativeOrder, Kind: 'U', Size: width}
	if err := m.arrayStart(4 * width * len(rows)); err != nil {
		return invalidf("text: %d rows of up to %d characters take %d bytes as UTF-32 (4 per character, every row padded to the longest), "+
			"over msgpack's 4 GiB bin limit; send shorter text, or text as strings", len(rows), width, 4*width*len(rows))
	}
	for _, r := range rows {
		m.head = AppendUTF32(m.head, text(r), width)
	}
	m.arrayEnd(d, -1, []int{len(rows)})
	return nil
}

func runeCount(s string) int { return utf8.RuneCountInString(s) }

// requestRows checks what infer and feedback share (what names the message,
// env indices, an observation) and returns the observation's rows to send,
// in env order.
func (m *Message) requestRows(what string, envs []int64, obs *Observation, obsRows []int, reuse []bool) ([]int, error) {
	if err := checkEnvIndices(&m.envs, what, envs); err != nil {
		return nil, err
	}
	if obs == nil {
		return nil, invalidf("%s: no observation", what)
	}
	if err := obs.Validate(); err != nil {
		return nil, err
	}
	return m.selectRows(what, len(envs), obs, obsRows, reuse)
}

// selectRows works out which rows of obs to send, in env order, skipping
// reused envs.
func (m *Message) selectRows(what string, n int, obs *Observation, obsRows []int, reuse []bool) ([]int, error) {
	have := obs.Rows()
	sent := n
	for _, r := range reuse {
		if r {
			sent--
		}
	}
	m.rows = m.rows[:0]
	switch {
	case obsRows != nil:
		if len(obsRows) != n {
			return nil, invalidf("%s: %d observation rows for %d envs", what, len(obsRows), n)
		}
		for i, r := range obsRows {
			if reuse != nil && reuse[i] {
				continue
			}
			if r < 0 || (have >= 0 && r >= have) {
				return nil, invalidf("%s: env %d's observation row %d is outside the %d rows given", what, i, r, have)
			}
			m.rows = append(m.rows, r)
		}
	case have < 0 || have == n:
		for i := 0; i < n; i++ {
			if reuse == nil || !reuse[i] {
				m.rows = append(m.rows, i)
			}
		}
	case have == sent:
		for i := 0; i < sent; i++ {
			m.rows = append(m.rows, i)
		}
	default:
		if sent != n {
			return nil, invalidf("%s: observation has %d rows, want %d (one per env) or %d (one per env not reused)", what, have, n, sent)
		}
		return nil, invalidf("%s: observation has %d rows, want %d (one per env)", what, have, n)
	}
	return m.rows, nil
}

// decodeObservation reads an observation map (SPEC 5.2) whose arrays must
// all lead with rows. Arrays view b.
func decodeObservation(where string, b []byte, rows int, o *Observation) error {
	if msgp.NextType(b) != msgp.MapType {
		return malformedf(where, "is a %s, want a map of images, states and text (SPEC 5.2)", msgp.NextType(b))
	}
	it, err := iterMap(b)
	if err != nil {
		return malformed(where, err)
	}
	var seen [3]bool
	for it.next() {
		k, val := it.key, it.val
		var j int
		switch string(k) {
		case "images":
			j = 0
		case "states":
			j = 1
		case "text":
			j = 2
		default:
			return malformedf(where, "unexpected key %q; an observation has images, states and text (SPEC 5.2)", k)
		}
		if seen[j] {
			return malformedf(where, "key %q appears twice", k)
		}
		seen[j] = true
		sub := where + "." + string(k)
		switch j {
		case 0, 1:
			dst := &o.Images
			if j == 1 {
				dst = &o.States
			}
			named, err := decodeNamed(sub, val, j == 0, rows, *dst)
			if err != nil {
				return err
			}
			*dst = named
		case 2:
			o.TextAsStrings = msgp.NextType(val) == msgp.ArrayType
			// decodeText checks the count against rows before it makes
			// the strings.
			if o.Text, _, err = decodeText(val, rows); err != nil {
				return malformed(sub, err)
			}
		}
	}
	if it.err != nil {
		return it.malformed(where)
	}
	for j, k := range []string{"images", "states", "text"} {
		if !seen[j] {
			return malformedf(where, "no %s key (SPEC 5.2)", k)
		}
	}
	return nil
}

// decodeNamed reads the images or states map: names to ndarrays leading with
// rows. Images are |u1 [rows, h, w, c]; states any numeric dtype. The entries
// are appended to out[:0], reusing its capacity: the map's entry count is
// the peer's claim, so nothing is sized from it, and out grows only as
// entries decode.
func decodeNamed(where string, b []byte, images bool, rows int, out []NamedArray) ([]NamedArray, error) {
	if msgp.NextType(b) != msgp.MapType {
		return nil, malformedf(where, "is a %s, want a map of named arrays", msgp.NextType(b))
	}
	it, err := iterMap(b)
	if err != nil {
		return nil, malformed(where, err)
	}
	out = out[:0]
	// Each shape is decoded into scratch, then copied at its own length:
	// an array kept MaxDims long would cost 256 bytes per entry, whatever
	// the entry's size on the wire.
	scratch := make([]int, MaxDims)
	for it.nextKey() { // one pass: DecodeArray reads the value
		if !utf8.Valid(it.key) {
			// msgpack's str is UTF-8, and Validate refuses such a name on
			// the way out: a decoded observation must encode again (a
			// server relaying it, the ledger's tools), and Python's
			// msgpack fails on the whole message.
			return nil, malformedf(where, "has an array name that is not UTF-8: %q", it.key)
		}
		out = append(out, NamedArray{Name: string(it.key)})
		e := &out[len(out)-1]
		a := &e.Array
		sub := func() string { return fmt.Sprintf("%s[%q]", where, e.Name) }
		if it.rest, err = DecodeArray(it.rest, scratch, a); err != nil {
			return nil, malformed(sub(), err)
		}
		a.Shape = slices.Clip(slices.Clone(a.Shape))
		if want := obsArrayRule(images, a); want != "" {
			return nil, malformedf(sub(), "is %s of shape %v, want %s", a.DType, a.Shape, want)
		}
		if a.Shape[0] != rows {
			return nil, malformedf(sub(), "leads with %d, want %d (SPEC 5.2: every array shares the batch dimension)", a.Shape[0], rows)
		}
	}
	if it.err != nil {
		return nil, malformed(where, it.err)
	}
	if name, dup := duplicateName(out); dup {
		return nil, malformedf(where, "name %q appears twice", name)
	}
	return out, nil
}

// smallNames is the most names duplicateName compares pairwise; past it,
// it sorts.
const smallNames = 16

// nameOrder is duplicateName's scratch, pooled so that a server decoding
// message after message with many names does not allocate it each time.
var nameOrder = sync.Pool{New: func() any { return new([]int32) }}

// duplicateName reports a name that appears twice in g. Comparing every
// pair is quadratic, and a peer chooses how many names it sends (40000
// took seconds); past smallNames it sorts an index instead, O(n log n).
func duplicateName(g []NamedArray) (string, bool) {
	if len(g) <= smallNames {
		for i := range g {
			for j := 0; j < i; j++ {
				if g[j].Name == g[i].Name {
					return g[i].Name, true
				}
			}
		}
		return "", false
	}
	p := nameOrder.Get().(*[]int32)
	defer nameOrder.Put(p)
	idx := (*p)[:0]
	for i := range g {
		idx = append(idx, int32(i))
	}
	*p = idx
	slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(g[a].Name, g[b].Name) })
	for i := 1; i < len(idx); i++ {
		if name := g[idx[i]].Name; name == g[idx[i-1]].Name {
			return name, true
		}
	}
	return "", false
}
