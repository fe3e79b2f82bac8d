// Package ledger records what an env client sent and received, so that a
// run can be audited after the fact (docs/LEDGER.md is the format's
// reference).
//
// A ledger file is a 16-byte header followed by blocks. Each block is one
// zstd frame holding a run of records, behind a 12-byte block header:
//
//	header: "plugrl-ledger\x00" (14 bytes), version (uint16, little endian)
//	block:  compressed length (uint32 LE), raw length (uint32 LE),
//	        CRC-32C of the compressed bytes (uint32 LE), the zstd frame
//
// Every block decodes on its own, so a file cut short (a process killed
// mid-run) reads back up to its last whole block. A record is one msgpack
// map with short string keys; readers skip keys they do not know, so a
// record can gain fields without a new version.
//
// The Writer keeps the caller's thread to copying and digesting: it appends
// records to a bounded buffer under a mutex that is held for an append, and
// a background goroutine compresses and writes that buffer every
// FlushInterval. When the buffer is full a record is not written but
// counted, and the next block carries a "lost" record saying how many.
package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/plugrl/libplugrl/core/maskcopy"
	"github.com/tinylib/msgp/msgp"
)

// Version is the format version this package writes and reads. Version 1
// (its row digests were CRC-32C) is refused: nothing else changed, but a
// digest means one thing per version.
const Version = 2

const (
	magic       = "plugrl-ledger\x00"
	headerSize  = len(magic) + 2
	blockHeader = 12
	// maxBlock bounds a block's raw size, for the reader's sake: the
	// writer never queues more than this between two flushes.
	maxBlock = 64 << 20
)

// Level is how much of each observation a ledger keeps.
type Level int

const (
	// Digest keeps every message whole except observation arrays, which it
	// replaces by an Adler-32 digest per env row.
	Digest Level = iota
	// Full keeps every message byte for byte.
	Full
)

// String names the level as PLUGRL_LEDGER_LEVEL and the ledger spell it.
func (l Level) String() string {
	if l == Full {
		return "full"
	}
	return "digest"
}

// ParseLevel reads "digest" or "full" ("" is digest).
func ParseLevel(s string) (Level, bool) {
	switch s {
	case "", "digest":
		return Digest, true
	case "full":
		return Full, true
	}
	return Digest, false
}

// Record kinds: the value of every record's "k".
const (
	KindOpen      = "open"      // the ledger's first record: wall clock, level, library version, pid
	KindConnect   = "connect"   // a connection is up; carries the metadata message as received
	KindSend      = "send"      // a message the client sent (infer or feedback)
	KindRecv      = "recv"      // a message the client received after the metadata (an action)
	KindClose     = "close"     // a connection ended: by whom, code, reason, error, feedback dropped
	KindReconnect = "reconnect" // the client starts reconnecting, and why
	KindInterrupt = "interrupt" // a call ended by plugrl_interrupt / Client.Interrupt
	KindLost      = "lost"      // records not written because the queue was full
	KindEnd       = "end"       // the ledger was closed cleanly
)

// Record keys.
const (
	keyKind    = "k"
	keyTime    = "t"     // nanoseconds since the ledger was opened (monotonic)
	keyConn    = "c"     // connection number, from 1
	keyWall    = "wall"  // open: Unix time in nanoseconds
	keyLevel   = "level" // open: "digest" or "full"
	keyVersion = "version"
	keyPID     = "pid"
	keyURL     = "url"
	keyMsg     = "m"    // the message, with observation data cut out at digest level
	keyPatch   = "p"    // how m is coded: 0 the message, k > 0 a patch of the k-th previous of its kind (see history)
	keyLen     = "len"  // the message's length on the wire (before cuts)
	keyCuts    = "cuts" // [[offset, length, row bytes], ...] where m had observation data
	keyDigests = "d"    // Adler-32 per cut row, uint32 little endian, in message order
	keyBy      = "by"   // close: "server", "client" or "local"
	keyCode    = "code"
	keyReason  = "reason"
	keyErr     = "err"
	keyDropped = "dropped" // close: env indices whose owed feedback was dropped
	keyCause   = "cause"   // reconnect: why
	keyCount   = "n"       // lost: records
	keyBytes   = "bytes"   // lost: their bytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RowDigest is the content digest the ledger keeps of one observation row:
// its Adler-32 (RFC 1950), as hash/adler32 and zlib.adler32 compute it.
// Adler-32 rather than a CRC because the connection computes it in the
// pass that copies the row to the socket, at the speed of the copy alone
// (maskcopy); CRC-32C, the digest of format version 1, read the rows again
// at a third of that speed.
func RowDigest(row []byte) uint32 { return maskcopy.Sum(1, row) }

func appendHeader(b []byte) []byte {
	b = append(b, magic...)
	return binary.LittleEndian.AppendUint16(b, Version)
}

// history keeps the last messages of one record kind (send or recv), so
// that a message can be recorded as a patch of an earlier one of the same
// length. An env loop's messages differ from the last ones of their kind
// only in a few bytes (ids, rewards, flags, the action's values): the
// patch is a fraction of the message, which is what keeps both the
// caller's copy and the background compression cheap. Sends alternate
// infer and feedback, so a send is patched against the send two back when
// it can be. The writer and the reader keep the same history: every send
// or recv record written is remembered, in order; one dropped from a full
// queue is not.
//
// A record's "p" says how its "m" is coded: 0, the message itself; k > 0,
// a patch of the k-th previous message of its kind: a sequence of
// (uvarint bytes to keep, uvarint n, n new bytes), the rest kept.
type history struct {
	prev    [2][]byte // prev[0] is the newest
	valid   [2]bool
	scratch []byte // the message being recorded
}

// maxDelta bounds the messages the history keeps: a larger one (a full
// ledger's images) is recorded as is, and clears the history.
const maxDelta = 64 << 10

func (h *history) forget() { h.valid = [2]bool{} }

// appendCoded appends the "p" and "m" keys for the message in scratch,
// as a patch when an earlier message (up to depth back) has its length,
// and makes it the newest message.
func (h *history) appendCoded(b []byte, depth int) []byte {
	cur, ref := h.scratch, 0
	for j := depth; j >= 1; j-- {
		if h.valid[j-1] && len(h.prev[j-1]) == len(cur) {
			ref = j
			break
		}
	}
	b = msgp.AppendString(b, keyPatch)
	b = msgp.AppendInt(b, ref)
	b = msgp.AppendString(b, keyMsg)
	if ref == 0 {
		b = msgp.AppendBytes(b, cur)
	} else {
		// bin 32 header, its length filled in below
		b = append(b, 0xc6, 0, 0, 0, 0)
		at := len(b)
		b = appendPatch(b, cur, h.prev[ref-1])
		binary.BigEndian.PutUint32(b[at-4:], uint32(len(b)-at))
	}
	h.remember(depth)
	return b
}

// appendPatch appends the runs of cur that differ from prev (same length).
// Equal runs shorter than a run header are folded into the changes.
func appendPatch(dst, cur, prev []byte) []byte {
	n, i, kept := len(cur), 0, 0
	for i < n {
		for i+64 <= n && bytes.Equal(cur[i:i+64], prev[i:i+64]) {
			i += 64
		}
		for i+8 <= n && binary.LittleEndian.Uint64(cur[i:]) == binary.LittleEndian.Uint64(prev[i:]) {
			i += 8
		}
		for i < n && cur[i] == prev[i] {
			i++
		}
		if i == n {
			break
		}
		j := i + 1
		for j < n {
			if cur[j] != prev[j] {
				j++
				continue
			}
			k := j // an equal run: end the change if it is long enough
			for k < n && k-j < 4 && cur[k] == prev[k] {
				k++
			}
			if k-j >= 4 || k == n {
				break
			}
			j = k
		}
		dst = binary.AppendUvarint(dst, uint64(i-kept))
		dst = binary.AppendUvarint(dst, uint64(j-i))
		dst = append(dst, cur[i:j]...)
		i, kept = j, j
	}
	return dst
}

// decode undoes appendCoded: m coded as ref gives the message, which it
// remembers. The result is valid until the history moves on.
func (h *history) decode(m []byte, ref, depth int) ([]byte, error) {
	if ref == 0 {
		if len(m) > maxDelta {
			h.forget()
			return m, nil
		}
		h.scratch = append(h.scratch[:0], m...)
		h.remember(depth)
		return h.prev[0], nil
	}
	if ref < 0 || ref > depth || !h.valid[ref-1] {
		return nil, fmt.Errorf("a message patched against earlier message %d, which the ledger does not have", ref)
	}
	h.scratch = append(h.scratch[:0], h.prev[ref-1]...)
	out, pos := h.scratch, 0
	for len(m) > 0 {
		skip, k := binary.Uvarint(m)
		if k <= 0 {
			return nil, errors.New("a patch run's offset is not a uvarint")
		}
		m = m[k:]
		n, k := binary.Uvarint(m)
		if k <= 0 {
			return nil, errors.New("a patch run's length is not a uvarint")
		}
		m = m[k:]
		if skip > uint64(len(out)-pos) || n > uint64(len(out)-pos)-skip || n > uint64(len(m)) {
			return nil, fmt.Errorf("a patch run (%d bytes at %d) outside the %d-byte message", n, uint64(pos)+skip, len(out))
		}
		pos += int(skip)
		copy(out[pos:], m[:n])
		pos += int(n)
		m = m[n:]
	}
	h.remember(depth)
	return h.prev[0], nil
}

// remember makes scratch the newest message.
func (h *history) remember(depth int) {
	if depth == 1 {
		h.prev[0], h.scratch = h.scratch, h.prev[0]
		h.valid[0] = true
		return
	}
	h.prev[1], h.prev[0], h.scratch = h.prev[0], h.scratch, h.prev[1]
	h.valid[1], h.valid[0] = h.valid[0], true
}
