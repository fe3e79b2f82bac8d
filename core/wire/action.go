package wire

// The action message (SPEC 5.3): EncodeAction, a server's side; Action and
// its Decode, the client's, with a shortcut for the structure a server
// repeats.

import (
	"fmt"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
)

// Action is a decoded action message (SPEC 5.3). Its arrays are views into
// the message, aligned and in host byte order.
type Action struct {
	// EnvIDs are the server's env_ids, or nil when it sent none (the Ray
	// dialect of SPEC 5.3; the caller then uses its request's env_indices).
	EnvIDs []int64
	// Chunk is [H, n, *da], time-major.
	Chunk Array
	// MaxEnvIDs, if positive, is the most env_ids Decode accepts: the
	// request's env count. A longer list is refused before any memory is
	// taken for it, so a server cannot make the client hold 8 bytes per
	// id it claims (a 60 MiB list of one-byte ids would take 480 MiB).
	MaxEnvIDs int

	envIDs  Array
	idStore []int64

	// The structure of the last message decoded, for Decode's shortcut: its
	// length, where the chunk's data sat in it before toHost, and the bytes
	// around that data as received. A message equal to it outside the data
	// has the same env_ids, dtype and shape (a server sends the same
	// structure every time), so Decode takes only its data. Only the bytes
	// around the data are kept: a copy of the whole message would hold every
	// action twice, once in the caller's buffer and once here, for as long
	// as the Action lives. A message with more than maxAround bytes around
	// its data (a long env_ids, or keys the client skips) gets no
	// shortcut, so that what the Action keeps does not follow what a
	// server sends.
	same       bool
	sameLen    int
	sameOff    int // of the chunk's data, as received
	sameData   int // the data's length
	sameDims   int // len(Chunk.Shape)
	sameDType  DType
	sameWindow int
	sameIDs    int    // len(EnvIDs), or -1 when the message had none
	around     []byte // msg[:sameOff] then msg[sameOff+sameData:], as received

	// The shapes' storage, last: a decode uses their first few entries, and
	// the rest would keep the fields above it apart in memory.
	chunkShape [MaxDims]int
	idShape    [MaxDims]int
}

// Decode decodes an action message in place: it may move and
// byte-swap bytes inside msg, and the result views msg.
func (a *Action) Decode(msg []byte) error {
	// The shortcut keeps the last message's env_ids: only if they are
	// still within MaxEnvIDs, which the caller may have lowered since.
	if a.same && len(msg) == a.sameLen && (a.MaxEnvIDs <= 0 || a.sameIDs <= a.MaxEnvIDs) {
		end := a.sameOff + a.sameData
		if string(msg[:a.sameOff]) == string(a.around[:a.sameOff]) && string(msg[end:]) == string(a.around[a.sameOff:]) {
			a.Chunk.DType = a.sameDType
			a.Chunk.Shape = a.chunkShape[:a.sameDims]
			a.Chunk.Data = msg[a.sameOff:end:end]
			a.Chunk.toHost(a.sameWindow)
			a.EnvIDs = nil
			if a.sameIDs >= 0 {
				a.EnvIDs = a.idStore[:a.sameIDs]
			}
			return nil
		}
	}
	a.same = false
	off, window, err := a.decode(msg)
	if err != nil {
		return err
	}
	// decode has not written to msg, so these are the bytes as received;
	// toHost may now write over the window before the data.
	end := off + len(a.Chunk.Data)
	if len(msg)-len(a.Chunk.Data) > maxAround {
		a.around = nil // what an earlier message left, if it was large
		a.Chunk.toHost(window)
		return nil
	}
	a.around = append(append(a.around[:0], msg[:off]...), msg[end:]...)
	a.sameLen, a.sameOff, a.sameData = len(msg), off, len(a.Chunk.Data)
	a.sameDims, a.sameDType, a.sameWindow = len(a.Chunk.Shape), a.Chunk.DType, window
	a.Chunk.toHost(window)
	a.sameIDs = -1
	if a.EnvIDs != nil {
		a.sameIDs = len(a.EnvIDs)
	}
	a.same = true
	return nil
}

// maxAround bounds the bytes around an action's data that Decode keeps for
// its shortcut: a few hundred in practice, plus 8 per env of env_ids.
const maxAround = 64 << 10

// decode is Decode without the shortcut, and without writing to msg: off is
// where the chunk's data is in msg, and window how many bytes before it
// toHost may write over. The chunk is left as received, for Decode to copy
// the bytes around it before toHost moves or swaps it.
func (a *Action) decode(msg []byte) (off, window int, err error) {
	kind, data, err := Envelope(msg)
	if err != nil {
		return 0, 0, err
	}
	if string(kind) != TypeAction {
		return 0, 0, malformedf("message_type", "got %q, want %q", kind, TypeAction)
	}
	if data == nil {
		return 0, 0, malformedf("action", "no data key (SPEC 5.3)")
	}
	it, err := iterMap(data)
	if err != nil {
		return 0, 0, malformed("action.data", err)
	}
	a.EnvIDs = nil
	haveChunk := false
	for it.nextKey() {
		k, rest := it.key, it.rest
		switch string(k) {
		case "action":
			if rest, window, err = decodeArrayRaw(rest, a.chunkShape[:], &a.Chunk); err != nil {
				return 0, 0, malformed("action.data.action", err)
			}
			haveChunk = true
		case "env_ids":
			// Read as received: elementScalar reads either byte order at
			// any alignment, so there is no need to write to msg.
			if rest, err = DecodeArray(rest, a.idShape[:], &a.envIDs); err != nil {
				return 0, 0, malformed("action.data.env_ids", err)
			}
			ids := &a.envIDs
			if ids.DType.Kind != 'i' && ids.DType.Kind != 'u' || len(ids.Shape) != 1 {
				return 0, 0, malformedf("action.data.env_ids", "is %s of shape %v, want a one-dimensional integer array", ids.DType, ids.Shape)
			}
			if a.MaxEnvIDs > 0 && ids.Shape[0] > a.MaxEnvIDs {
				return 0, 0, malformedf("action.data.env_ids", "has %d entries, the infer named %d envs (SPEC 4.3)", ids.Shape[0], a.MaxEnvIDs)
			}
			if cap(a.idStore) < ids.Shape[0] {
				a.idStore = make([]int64, ids.Shape[0])
			}
			a.EnvIDs = a.idStore[:ids.Shape[0]]
			for j := range a.EnvIDs {
				s := elementScalar(ids.DType, ids.Data[j*ids.DType.Size:])
				if s.Kind != 'i' {
					return 0, 0, malformedf("action.data.env_ids", "env_ids[%d] does not fit an int64", j)
				}
				a.EnvIDs[j] = s.Int
			}
		default:
			if rest, err = msgp.Skip(rest); err != nil {
				return 0, 0, malformed("action.data."+string(k), err)
			}
		}
		it.rest = rest
	}
	if it.err != nil {
		return 0, 0, malformed("action.data", it.err)
	}
	if !haveChunk {
		return 0, 0, malformedf("action.data", "no action key (SPEC 5.3)")
	}
	c := &a.Chunk
	if !c.DType.Numeric() {
		return 0, 0, malformedf("action.data.action", "dtype %s is not numeric", c.DType)
	}
	if len(c.Shape) < 2 {
		return 0, 0, malformedf("action.data.action", "shape %v, want [H, n, *da] (SPEC 5.3)", c.Shape)
	}
	// A zero dimension leaves no data to check the others against (Check
	// only bounds their product), so a chunk of shape [4e18, 1, 0] and no
	// bytes would have a client step through H empty rows. A server has no
	// reason to send an empty chunk: it answers an infer, which names at
	// least one env, with at least one step. With every dimension non-zero,
	// Check (in decodeArrayRaw) has matched the data's length to the
	// shape, so no dimension exceeds what the bytes hold.
	for i, d := range c.Shape {
		if d == 0 {
			return 0, 0, malformedf("action.data.action", "shape %v has %s = 0, want at least one step of one env (SPEC 5.3)", c.Shape, dimName(i))
		}
	}
	return int(uintptr(unsafe.Pointer(&c.Data[0])) - uintptr(unsafe.Pointer(&msg[0]))), window, nil
}

// dimName names dimension i of an action chunk [H, n, *da].
func dimName(i int) string {
	switch i {
	case 0:
		return "H"
	case 1:
		return "n"
	}
	return fmt.Sprintf("da[%d]", i-2)
}

// Horizon is H, the chunk's leading dimension.
func (a *Action) Horizon() int { return a.Chunk.Shape[0] }

// Envs is n, the chunk's second dimension.
func (a *Action) Envs() int { return a.Chunk.Shape[1] }

// ActionShape is da, the per-step action shape.
func (a *Action) ActionShape() []int { return a.Chunk.Shape[2:] }

// EncodeAction encodes an action message (SPEC 5.3) into m (which it
// resets): chunk is [H, n, *da], time-major, and is referenced rather than
// copied, as are envIDs, so both must stay unchanged until m is written.
// envIDs, normally the infer's env_indices in order, must have n entries;
// nil omits the env_ids key (the Ray dialect of SPEC 5.3).
func EncodeAction(m *Message, envIDs []int64, chunk *Array) error {
	m.Reset()
	if chunk == nil {
		return invalidf("action: no chunk")
	}
	if err := chunk.Check(); err != nil {
		return invalidf("action: %v", err)
	}
	if !chunk.DType.Numeric() || len(chunk.Shape) < 2 {
		return invalidf("action: chunk is %s of shape %v, want a numeric array [H, n, *da] (SPEC 5.3)", chunk.DType, chunk.Shape)
	}
	if len(envIDs) > MaxEnvs {
		return invalidf("action: %d env_ids, at most %d", len(envIDs), MaxEnvs)
	}
	if envIDs != nil && len(envIDs) != chunk.Shape[1] {
		return invalidf("action: %d env_ids for a chunk of %d envs (shape %v)", len(envIDs), chunk.Shape[1], chunk.Shape)
	}
	StartAction(m, TypeAction, envIDs)
	if err := m.Array(chunk); err != nil {
		return err
	}
	m.Finish()
	return nil
}

// StartAction writes an action message up to its chunk into m (which must
// be empty): the envelope with message_type kind (TypeAction; a test
// server may send another), data's env_ids (nil: no env_ids key) and the
// action key. The caller appends the chunk and calls m.Finish, as
// EncodeAction does; the test servers of internal/ append chunks it would
// refuse.
func StartAction(m *Message, kind string, envIDs []int64) {
	m.Map(2)
	m.Str("message_type")
	m.Str(kind)
	m.Str("data")
	if envIDs == nil {
		m.Map(1)
	} else {
		m.Map(2)
		m.Str("env_ids")
		m.int64s(envIDs)
	}
	m.Str("action")
}
