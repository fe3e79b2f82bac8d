package hostile

import (
	"fmt"

	"github.com/plugrl/libplugrl/core/wire"
)

// maxAction bounds an honest action the server will build: an infer naming
// a thousand envs in BigActionOneEnv must not make the test machine's
// hostile server allocate 8 GiB.
const maxAction = 1 << 30

// f4 is the actions' dtype, spelled as SPEC 5.3's examples spell it
// whatever the host's byte order (zeros read the same either way).
var f4 = wire.MustParseDType("<f4")

// metadataMessage encodes the metadata a connection gets (SPEC 5.1), with
// action_dim d. It declares action_horizon and action_dim except in the
// scenarios whose point is that the client cannot know the shape in
// advance.
func metadataMessage(cfg *Config, d int) ([]byte, error) {
	md := &wire.Metadata{
		ProtocolVersion: wire.Opt[int64]{Value: 1, Set: true},
		Server:          wire.Opt[string]{Value: "plugrl-hostile", Set: true},
		Policy:          wire.Opt[string]{Value: "hostile:" + string(cfg.Scenario), Set: true},
	}
	if cfg.Scenario != ZeroDimAction && cfg.Scenario != BigActionOneEnv {
		md.ActionHorizon = wire.Opt[int64]{Value: int64(cfg.H), Set: true}
		md.ActionDim = wire.Opt[int64]{Value: int64(d), Set: true}
	}
	// An unknown key, which a client must ignore, and which says in a
	// client's log what it was talking to.
	var name wire.Message
	name.Str(string(cfg.Scenario))
	name.Finish()
	var m wire.Message
	if err := wire.EncodeMetadata(&m, md, wire.MetaKey{Key: "hostile_scenario", Value: name.AppendTo(nil)}); err != nil {
		return nil, err
	}
	return m.AppendTo(nil), nil
}

// encodeZeroAction encodes an honest action (SPEC 5.3): "<f4" zeros of shape
// [h, n, d], n = len(envIDs), env_ids = envIDs. zeros supplies the data.
func encodeZeroAction(m *wire.Message, envIDs []int64, h, d int, zeros func(int) []byte) error {
	shape := []int{h, len(envIDs), d}
	size, err := wire.ByteLen(f4, shape)
	if err != nil {
		return err
	}
	if size > maxAction {
		return fmt.Errorf("an action of shape %v would be %d bytes, more than this server builds (%d)", shape, size, maxAction)
	}
	chunk := &wire.Array{DType: f4, Shape: shape, Data: zeros(size)}
	return wire.EncodeAction(m, envIDs, chunk)
}

// encodeZeroDimAction encodes ZeroDimAction's action: shape [h, n, 0],
// "<f4", no data, env_ids = envIDs. It is written key by key rather than by
// wire.EncodeAction, which is entitled to refuse the lie (h * n * 4 bytes
// overflows int64), but in exactly the layout EncodeAction uses:
// {message_type, data: {env_ids, action}}, the ndarray keys as bin in
// numpy's order __ndarray__, data, dtype, shape (SPEC 3.2). A test checks
// the bytes against EncodeAction's for [5, n, 0] with the 5 replaced.
func encodeZeroDimAction(m *wire.Message, envIDs []int64, h int64) error {
	m.Reset()
	wire.StartAction(m, wire.TypeAction, envIDs)
	m.Map(4)
	m.Raw(binKey("__ndarray__"))
	m.Bool(true)
	m.Raw(binKey("data"))
	m.Raw([]byte{0xc4, 0x00}) // bin 8 of length 0
	m.Raw(binKey("dtype"))
	m.Str(f4.String())
	m.Raw(binKey("shape"))
	m.List(3)
	m.Int(h)
	m.Int(int64(len(envIDs)))
	m.Int(0)
	m.Finish()
	return nil
}

// binKey is a short key as msgpack bin 8, the form numpy's keys take.
func binKey(k string) []byte {
	return append([]byte{0xc4, byte(len(k))}, k...)
}
