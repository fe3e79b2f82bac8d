package wire

// The metadata message (SPEC 5.1): Metadata and DecodeMetadata, the
// client's side; EncodeMetadata, a server's. A new typed key is one field
// of Metadata and one entry of metaKeys.

import (
	"github.com/tinylib/msgp/msgp"
)

// Metadata is the decoded data map of a metadata message (SPEC 5.1). Every
// typed field may be absent: absent means the server does not know, never a
// default. Raw keeps the whole map so that any key can be read.
type Metadata struct {
	ProtocolVersion Opt[int64]
	Server          Opt[string]
	ServerVersion   Opt[string]
	Algorithm       Opt[string]
	Policy          Opt[string]
	ActionHorizon   Opt[int64]
	ActionDim       Opt[int64]
	Features        Opt[[]string]

	// Raw is the msgpack encoding of the data map, owned by Metadata.
	Raw []byte
}

// Opt is a value that a server may leave out.
type Opt[T any] struct {
	Value T
	Set   bool
}

// Has reports whether Features lists name.
func (m *Metadata) Has(feature string) bool {
	for _, f := range m.Features.Value {
		if f == feature {
			return true
		}
	}
	return false
}

// DecodeMetadata decodes a metadata message. It copies what it keeps, so msg
// may be reused afterwards. A key of an unexpected type is left absent rather
// than refused (SPEC 5.1: a client must not require any key), but stays
// readable through Lookup and JSON. A map that gives a key twice is
// refused, so each key has one value, whichever way it is read.
func DecodeMetadata(msg []byte) (*Metadata, error) {
	kind, data, err := Envelope(msg)
	if err != nil {
		return nil, err
	}
	if string(kind) != TypeMetadata {
		return nil, malformedf("message_type", "got %q, want %q: the server speaks first with metadata (SPEC 4.1)", kind, TypeMetadata)
	}
	if data == nil {
		return nil, malformedf("metadata", "no data key (SPEC 5.1)")
	}
	if msgp.NextType(data) != msgp.MapType {
		return nil, malformedf("metadata.data", "is a %s, want a map", msgp.NextType(data))
	}
	m := &Metadata{Raw: append([]byte(nil), data...)}
	it, err := iterMap(m.Raw)
	if err != nil {
		return nil, malformed("metadata.data", err)
	}
	for it.next() {
		for _, f := range &metaKeys {
			if f.key == string(it.key) {
				f.decode(m, it.val)
			}
		}
	}
	if it.err != nil {
		return nil, it.malformed("metadata.data")
	}
	// A key given twice would have two truths: the typed field (the last
	// value, which the client checks actions against) and Lookup (the
	// first, which the getters show the caller). msgpack leaves repeated
	// keys undefined. A map read once (an action's, an ndarray's) keeps
	// the last, as Python's dict does; metadata is read by key and whole
	// (the getters, JSON), so it is refused with the key named, as the
	// decoders of client messages refuse one.
	if k, dup := duplicateKey(m.Raw); dup {
		return nil, malformedf("metadata.data", "key %q appears twice", k)
	}
	return m, nil
}

// metaKeys are the typed keys of Metadata, in SPEC 5.1's order: a new typed
// key is a field of Metadata and a row here, and DecodeMetadata and
// EncodeMetadata both follow the table.
var metaKeys = [...]metaKey{
	optKey("protocol_version", func(d *Metadata) *Opt[int64] { return &d.ProtocolVersion }, optInt, (*Message).Int),
	optKey("server", func(d *Metadata) *Opt[string] { return &d.Server }, optString, (*Message).Str),
	optKey("server_version", func(d *Metadata) *Opt[string] { return &d.ServerVersion }, optString, (*Message).Str),
	optKey("algorithm", func(d *Metadata) *Opt[string] { return &d.Algorithm }, optString, (*Message).Str),
	optKey("policy", func(d *Metadata) *Opt[string] { return &d.Policy }, optString, (*Message).Str),
	optKey("action_horizon", func(d *Metadata) *Opt[int64] { return &d.ActionHorizon }, optInt, (*Message).Int),
	optKey("action_dim", func(d *Metadata) *Opt[int64] { return &d.ActionDim }, optInt, (*Message).Int),
	optKey("features", func(d *Metadata) *Opt[[]string] { return &d.Features }, optStrings, (*Message).strs),
}

// metaKey is one typed key: decode sets its field from a value (absent
// when the value has another type); encode appends the field's value to m
// and reports whether it is set (m nil: only report).
type metaKey struct {
	key    string
	decode func(d *Metadata, val []byte)
	encode func(d *Metadata, m *Message) bool
}

func optKey[T any](key string, field func(*Metadata) *Opt[T], dec func([]byte) Opt[T], enc func(*Message, T)) metaKey {
	return metaKey{
		key:    key,
		decode: func(d *Metadata, val []byte) { *field(d) = dec(val) },
		encode: func(d *Metadata, m *Message) bool {
			o := field(d)
			if o.Set && m != nil {
				enc(m, o.Value)
			}
			return o.Set
		},
	}
}

// strs appends a list of strings.
func (m *Message) strs(ss []string) {
	m.List(len(ss))
	for _, s := range ss {
		m.Str(s)
	}
}

func optInt(b []byte) Opt[int64] {
	s, _, err := DecodeScalar(b)
	if err != nil {
		return Opt[int64]{}
	}
	v, ok := s.AsInt()
	return Opt[int64]{Value: v, Set: ok}
}

// optString is StringValue, copied: the typed field and the C API's
// plugrl_metadata_string take the same values.
func optString(b []byte) Opt[string] {
	v, ok := StringValue(b)
	if !ok {
		return Opt[string]{}
	}
	return Opt[string]{Value: string(v), Set: true}
}

// maxFeatures bounds the features list Metadata keeps typed: a server has
// a handful, and a list of millions of empty strings (4 MiB of metadata)
// took 63 MiB of Go heap as strings. A longer list is left absent, and
// stays readable raw (Lookup, JSON).
const maxFeatures = 1024

func optStrings(b []byte) Opt[[]string] {
	n, rest, err := arrayLen(b)
	if err != nil || n > maxFeatures {
		return Opt[[]string]{}
	}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var s string
		if msgp.NextType(rest) != msgp.StrType {
			return Opt[[]string]{}
		}
		if s, rest, err = msgp.ReadStringBytes(rest); err != nil {
			return Opt[[]string]{}
		}
		out = append(out, s)
	}
	return Opt[[]string]{Value: out, Set: true}
}

// Lookup returns the raw msgpack encoding of key's value, and whether the key
// is present.
func (m *Metadata) Lookup(key string) ([]byte, bool) {
	it, err := iterMap(m.Raw)
	if err != nil {
		return nil, false
	}
	for it.next() {
		if string(it.key) == key {
			return it.val, true
		}
	}
	return nil, false
}

// Keys lists the keys of the metadata map in wire order.
func (m *Metadata) Keys() []string {
	var keys []string
	it, err := iterMap(m.Raw)
	if err != nil {
		return nil
	}
	for it.next() {
		keys = append(keys, string(it.key))
	}
	return keys
}

// JSON returns key's value as JSON (see AppendJSON), or ok=false if absent.
func (m *Metadata) JSON(key string) (js []byte, ok bool, err error) {
	raw, ok := m.Lookup(key)
	if !ok {
		return nil, false, nil
	}
	js, _, err = AppendJSON(nil, raw)
	return js, true, err
}

// MetaKey is one extra key of a metadata message, its value already
// encoded as msgpack (msgp.AppendIntf makes one from a Go value).
type MetaKey struct {
	Key   string
	Value []byte
}

// EncodeMetadata encodes a metadata message (SPEC 5.1) into m (which it
// resets). The typed fields of md that are Set are written in SPEC 5.1's
// order (md.Raw is ignored); then the extra keys, each replacing a typed key
// of the same name in place, as the server merges its caller's keys over
// the top. An extra key given twice keeps its last value.
func EncodeMetadata(m *Message, md *Metadata, extra ...MetaKey) error {
	m.Reset()
	type kv struct {
		key string
		put func()
	}
	var kvs []kv
	add := func(key string, put func()) {
		for i := range kvs {
			if kvs[i].key == key {
				kvs[i].put = put
				return
			}
		}
		kvs = append(kvs, kv{key, put})
	}
	if md != nil {
		for _, f := range &metaKeys {
			if f.encode(md, nil) {
				add(f.key, func() { f.encode(md, m) })
			}
		}
	}
	for _, e := range extra {
		v := e.Value
		if _, err := msgp.Skip(v); err != nil || len(v) == 0 {
			return invalidf("metadata key %q: value is not one msgpack value", e.Key)
		}
		if rest, _ := msgp.Skip(v); len(rest) != 0 {
			return invalidf("metadata key %q: value has %d bytes after one msgpack value", e.Key, len(rest))
		}
		add(e.Key, func() { m.Raw(v) })
	}
	m.Map(2)
	m.Str("message_type")
	m.Str(TypeMetadata)
	m.Str("data")
	m.Map(len(kvs))
	for _, e := range kvs {
		m.Str(e.key)
		e.put()
	}
	m.Finish()
	return nil
}
