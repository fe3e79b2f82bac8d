// Package ledgertool reads ledgers (core/ledger) and answers questions
// about them: the summary, the audit against the SPEC, the episode log,
// dumps and dataset exports that `plugrl ledger` prints.
package ledgertool

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// Event is one ledger record with its message decoded.
type Event struct {
	*ledger.Record
	// Exactly one of these is set for a connect, send or recv record whose
	// message decodes; DecodeErr says why one does not.
	Meta      *wire.Metadata
	Infer     *wire.InferMsg
	Feedback  *wire.FeedbackMsg
	Action    *wire.Action
	DecodeErr error
	// Wire is the sent message rebuilt (zeros where a digest-level ledger
	// cut observation data), for send records. It, and the Infer or
	// Feedback decoded from it, view the reader's buffer: valid during
	// the walk's call for this event only (ledger.Reader.Message).
	Wire []byte
	// RowDigest[k][r] is the digest of row r of the k-th observation array
	// of a send record (images, then states, in message order); nil when
	// the array's rows are empty.
	RowDigest [][]uint32
	// arrayKeys[k] names the k-th array of RowDigest (its group and name,
	// hashed), for ObsDigest.
	arrayKeys []uint64
	// textRows[r] is a hash of the observation's text row r (never 0),
	// or 0 for an empty string; nil when every row is empty or the
	// observation has no text. Text is part of an observation (SPEC 5.2),
	// and a digest-level ledger keeps it whole.
	textRows []uint64
	// What obsDigests works out once, for ObsDigest and maxRows: whether
	// it has, the arrays of RowDigest with rows, the sum of the others'
	// mixes, and the most rows an array has.
	digestsReady bool
	withRows     []int
	noRows       uint64
	maxRows      int
}

// Walk reads the ledger at path and calls fn for each record, in order.
// A truncated ledger (a writer killed mid-run) is not an error: Walk
// returns truncated=true after the last whole record. A ledger damaged in
// the middle (ledger.ErrDamaged) is: its records past the damage are not
// read, and a summary or an audit of the rest would pass for one of the
// whole file.
func Walk(path string, fn func(ev *Event) error) (truncated bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return WalkReader(f, fn)
}

// WalkReader is Walk over a reader.
func WalkReader(r io.Reader, fn func(ev *Event) error) (truncated bool, err error) {
	lr, err := ledger.NewReader(r)
	if err != nil {
		return false, err
	}
	defer lr.Close()
	lastSeq := -1 // the last record read, for the error of a damaged block
	for {
		rec, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if errors.Is(err, ledger.ErrDamaged) {
			where := "before its first record"
			if lastSeq >= 0 {
				where = fmt.Sprintf("after record %d", lastSeq)
			}
			return false, fmt.Errorf("%s: %w", where, err)
		}
		if errors.Is(err, ledger.ErrTruncated) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		lastSeq = rec.Seq
		ev := &Event{Record: rec}
		decode(lr, ev)
		if err := fn(ev); err != nil {
			return false, err
		}
	}
}

func decode(lr *ledger.Reader, ev *Event) {
	switch ev.Kind {
	case ledger.KindConnect:
		ev.Meta, ev.DecodeErr = wire.DecodeMetadata(ev.Msg)
	case ledger.KindRecv:
		a := new(wire.Action)
		msg := append([]byte(nil), ev.Msg...) // Decode works in place
		if ev.DecodeErr = a.Decode(msg); ev.DecodeErr == nil {
			ev.Action = a
		}
	case ledger.KindSend:
		msg, err := lr.Message(ev.Record)
		if err != nil {
			ev.DecodeErr = err
			return
		}
		ev.Wire = msg
		kind, _, err := wire.Envelope(msg)
		if err != nil {
			ev.DecodeErr = err
			return
		}
		var obs *wire.Observation
		switch string(kind) {
		case wire.TypeInfer:
			if ev.Infer, ev.DecodeErr = wire.DecodeInfer(msg); ev.DecodeErr == nil {
				obs = &ev.Infer.Obs
			}
		case wire.TypeFeedback:
			if ev.Feedback, ev.DecodeErr = wire.DecodeFeedback(msg); ev.DecodeErr == nil {
				obs = &ev.Feedback.Obs
			}
		default:
			ev.DecodeErr = fmt.Errorf("a client sent a %q message", kind)
		}
		if obs != nil {
			ev.DecodeErr = ev.digests(obs)
		}
	}
}

// digests fills RowDigest from the record's digests, or, in a full
// ledger, from the data.
func (ev *Event) digests(obs *wire.Observation) error {
	next := ev.Digests
	for gi, g := range [2][]wire.NamedArray{obs.Images, obs.States} {
		for i := range g {
			ev.arrayKeys = append(ev.arrayKeys, arrayKey(gi, g[i].Name))
			a := &g[i].Array
			rows, rb := a.Len(), a.RowBytes()
			if rows <= 0 || rb == 0 {
				ev.RowDigest = append(ev.RowDigest, nil)
				continue
			}
			d := make([]uint32, rows)
			if len(ev.Cuts) > 0 {
				if len(next) < rows {
					return fmt.Errorf("record %d: %d digests left for %s's %d rows", ev.Seq, len(next), g[i].Name, rows)
				}
				copy(d, next[:rows])
				next = next[rows:]
			} else {
				for r := range d {
					d[r] = ledger.RowDigest(a.Row(r))
				}
			}
			ev.RowDigest = append(ev.RowDigest, d)
		}
	}
	if len(next) != 0 {
		return fmt.Errorf("record %d: %d digests more than the observation's rows", ev.Seq, len(next))
	}
	for r, t := range obs.Text {
		if t == "" {
			continue // as no text at all: an encoder sends "" for nil text
		}
		if ev.textRows == nil {
			ev.textRows = make([]uint64, len(obs.Text))
		}
		h := fnv.New64a()
		io.WriteString(h, t)
		ev.textRows[r] = max(h.Sum64(), 1)
	}
	return nil
}

// textKey is the key ObsDigest mixes text rows with, as arrayKey names
// an array: group 2, beside images (0) and states (1).
var textKey = arrayKey(2, "")

// arrayKey hashes an observation array's group (0 images, 1 states) and
// name (FNV-1a).
func arrayKey(group int, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte{byte(group)})
	io.WriteString(h, name)
	return h.Sum64()
}

// ObsDigest combines the row digests of env row r across the observation's
// arrays into one value: two rows with the same arrays' contents have the
// same ObsDigest, in whatever order the message lists the arrays. A
// msgpack map is unordered, and a client may build its feedback's
// observation and its next infer's in different orders: a digest that
// followed the order called the same observation a different one (SPEC
// 5.4's "rows swapped"). So each array's value is mixed with its name and
// the mixes are summed, which no order changes. An event built without
// names (arrayKeys shorter) keys its arrays by position.
//
// The arrays without rows (nil in RowDigest: no rows sent, or rows of no
// bytes) add the same mix to every row's value, which is worked out once
// per event (obsDigests): an array of rows of no bytes costs a message a
// few bytes whatever its row count, and summing every array for every
// env row made one infer of n envs and n such arrays cost n^2 (8000 of
// each, a 320 KB message: 0.3 s; an 8 MiB one, minutes).
func (ev *Event) ObsDigest(r int) uint64 {
	ev.obsDigests()
	sum := ev.noRows
	for _, k := range ev.withRows {
		d := ev.RowDigest[k]
		v := uint64(0xffffffff)
		if r < len(d) {
			v = uint64(d[r])
		}
		sum += mix64(ev.arrayKey(k) ^ v*0x9e3779b97f4a7c15)
	}
	// The text row: without it, envs whose rows differ only in their
	// text (a language env's instruction) could be swapped between a
	// feedback and the next infer unseen. An empty one adds nothing, so
	// that text sent as empty strings and no text at all are one.
	if r < len(ev.textRows) && ev.textRows[r] != 0 {
		sum += mix64(textKey ^ ev.textRows[r]*0x9e3779b97f4a7c15)
	}
	return sum
}

// arrayKey is the key ObsDigest mixes array k's values with.
func (ev *Event) arrayKey(k int) uint64 {
	if k < len(ev.arrayKeys) {
		return ev.arrayKeys[k]
	}
	return uint64(k)
}

// obsDigests works out, once per event, what ObsDigest and maxRows need:
// the arrays with rows, the mix the others add to every row, and the most
// rows an array has.
func (ev *Event) obsDigests() {
	if ev.digestsReady {
		return
	}
	ev.digestsReady = true
	ev.noRows, ev.withRows, ev.maxRows = 0, ev.withRows[:0], 0
	none := uint64(0xffffffff) // ObsDigest's value of a row an array lacks
	for k, d := range ev.RowDigest {
		if d == nil {
			ev.noRows += mix64(ev.arrayKey(k) ^ none*0x9e3779b97f4a7c15)
			continue
		}
		ev.withRows = append(ev.withRows, k)
		ev.maxRows = max(ev.maxRows, len(d))
	}
	ev.maxRows = max(ev.maxRows, len(ev.textRows))
}

// mix64 is splitmix64's finalizer: every input bit moves every output bit,
// so that a sum of mixes does not cancel as a sum of raw values would.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
