// Package ledger records what an env client sent and received, so that a
// run can be audited after the fact (docs/LEDGER.md is the format's
// reference).
//
// A ledger file is a 16-byte header followed by blocks. Each block is one
// zstd frame of records and the records' literals behind a 16-byte block
// header:
//
//	header: "plugrl-ledger\x00" (14 bytes), version (uint16, little endian)
//	block:  compressed length (uint32 LE), raw length (uint32 LE),
//	        CRC-32C of the zstd frame, the literal length and the
//	        literals (uint32 LE), literal length (uint32 LE), the zstd
//	        frame, the literals
//
// A block's frame decompresses to a run of records; its literals, stored
// as they are, are the new bytes of the records' patches (see history),
// and the times of recv records and the times and values of same-layout
// sends (version 5), in record order. Every block decodes on its own, so a file cut short (a
// process killed mid-run) reads back up to its last whole block. A record
// is one msgpack map with short string keys; readers skip keys they do
// not know, so a record can gain fields without a new version.
//
// The literals are apart from the records for the writer's sake: an env
// loop's new bytes are mostly a policy's action values, whose mantissas
// no compressor shrinks, and zstd's match finder probed every few of
// those bytes where they sat between records (1.0-1.3 us of a SMALL
// exchange's 2 us of writing, against 0.3 us with the literals in one run
// at the frame's end, format version 3, and none with them stored after
// it, version 4).
//
// The Writer keeps the caller's thread to copying and digesting: it appends
// each record's raw material (a frame) to a bounded buffer under a mutex
// that is held for an append, and a background goroutine turns the frames
// into records, patch-codes, compresses and writes them every
// FlushInterval. A send whose message kept its layout is queued as the
// bytes that can have changed, and written as a same-layout record that
// names its slot, its time and those bytes going to the block's literals
// (sent.go). When the buffer is
// full a record is not written but counted, and the next block carries a
// "lost" record saying how many.
package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/plugrl/libplugrl/core/maskcopy"
	"github.com/tinylib/msgp/msgp"
)

// Version is the format version this package writes. Version 5 moved the
// time of recv records and the time and values of same-layout sends into
// the block's literals (appendSendSame says why). Version 4 added
// same-layout send records (sent.go, Reader.repeat). Its reader also
// reads versions 4, 3 and 2 (2: written by libplugrl up to commit
// b48fbdd: a 12-byte block header without the literal length, and each
// patch's new bytes inline). Version 1 (its row digests were CRC-32C) is
// refused: a digest means one thing per version.
const Version = 5

const (
	magic       = "plugrl-ledger\x00"
	headerSize  = len(magic) + 2
	blockHeader = 16
	// blockHeaderV2 is a version 2 block's header: no literal length.
	blockHeaderV2 = 12
	// maxBlock bounds a block's raw size, for the reader's sake: the
	// writer never queues more than this between two flushes.
	maxBlock = 64 << 20
	// maxWindow bounds the zstd window a reader accepts: a writer's
	// frames use at most 4 MiB (256 KiB since ccf1923).
	maxWindow = 8 << 20
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
	keyAddr    = "addr" // connect: the server's address the connection went to (IP and port)
	keyMsg     = "m"    // the message, with observation data cut out at digest level
	keyPatch   = "p"    // how m is coded: 0 the message, k > 0 a patch of the k-th previous of its kind (see history)
	keyLen     = "len"  // the message's length on the wire (before cuts)
	keyCuts    = "cuts" // [[offset, length, row bytes], ...] where m had observation data
	keyDigests = "d"    // Adler-32 per cut row, uint32 little endian, in message order
	keySlot    = "s"    // send: the slot of the client's messages it is the last whole record of (0 or 1)
	keyRefs    = "r"    // send: the runs of m a same-layout send of its slot replaces, (offset, length) uint32 LE each
	keySame    = "same" // send: the slot whose last whole send this one repeats, but for its digests and runs (in the literals; "v" in version 4)
	keyValues  = "v"    // send (same layout, version 4 only): its digests, then the bytes of each of its slot's runs
	keyBy      = "by"   // close: "server", "client" or "local"
	keyCode    = "code"
	keyReason  = "reason"
	keyErr     = "err"
	keyDropped = "dropped" // close: env indices whose owed feedback was dropped
	keyUnsent  = "unsent"  // close: 1 if the connection's last send record never left the client (a held feedback)
	keyCause   = "cause"   // reconnect: why
	keyCount   = "n"       // lost: records
	keyBytes   = "bytes"   // lost: their bytes
	keyCPU     = "cpu"     // end: the CPU time of the background writer's flushes, in ns (Linux)
)

// appendKey appends a record key, a msgpack fixstr (every key is shorter
// than 32 bytes): what msgp.AppendString would, but inlined, as the caller's
// path appends several keys per record.
func appendKey(b []byte, key string) []byte {
	return append(append(b, 0xa0|byte(len(key))), key...)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blockSum is a block's checksum: the CRC-32C of its zstd frame z, then of
// its literal length as the header holds it (litLen, 4 bytes; nil in
// format version 2, whose blocks have none), then of its literals as
// stored (lits: version 4 stores them after the frame; nil before, when
// they were in it), so that a damaged header cannot move the boundary
// between records and literals unseen; from version 5 on, then of the
// file's format version (uint16 LE), which says how the records take
// their literals: versions 4 and 5 have the same block layout, and a
// file header damaged from 5 to 4 would otherwise read each recv record
// with a time of 0 until an error far into the block.
func blockSum(z, litLen, lits []byte, version uint16) uint32 {
	sum := crc32.Update(crc32.Checksum(z, castagnoli), castagnoli, litLen)
	sum = crc32.Update(sum, castagnoli, lits)
	if version >= 5 && int(version) < len(versionLE) {
		sum = crc32.Update(sum, castagnoli, versionLE[version][:])
	}
	return sum
}

// versionLE holds each format version's two bytes (uint16 LE), for
// blockSum: a slice of a variable would escape to the heap on the
// writer's path.
var versionLE = func() (b [Version + 1][2]byte) {
	for v := range b {
		b[v] = [2]byte{byte(v), byte(v >> 8)}
	}
	return b
}()

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
// patch is a fraction of the message, which keeps the writer's
// compression cheap and the file small. Sends alternate
// infer and feedback, so a send is patched against the send two back when
// it can be. The writer and the reader keep the same history: every whole
// send record and every recv record written is remembered, in order; one
// dropped from a full queue is not, nor a same-layout send record (format
// version 4), which names its slot's last whole send instead.
//
// A record's "p" says how its "m" is coded: 0, the message itself; k > 0,
// a patch of the k-th previous message of its kind: a sequence of
// (uvarint bytes to keep, uvarint n) runs, the rest kept, whose n new
// bytes each are the next n of the block's literals (in version 2, they
// followed the run's n in "m").
type history struct {
	prev    [2][]byte // prev[0] is the newest
	valid   [2]bool
	scratch []byte // the message being recorded or decoded
}

// maxDelta bounds the messages the history keeps: a larger one (a full
// ledger's images, a digest ledger's long text observations) is recorded
// as is, and clears the history. Writer and reader apply it to the bytes
// a record keeps, after the cuts.
const maxDelta = 64 << 10

func (h *history) forget() { h.valid = [2]bool{} }

// appendCoded appends the "p" and "m" keys for msg, as a patch when an
// earlier message (up to depth back) has its length, and makes it the
// newest message. A message over maxDelta is recorded whole and clears the
// history, as decode does.
//
// msg differs from the message depth back, when that is the one it is
// patched against, only within msg[lo:hi]; a caller that knows no better
// passes 0, len(msg). The writer knows better for a send queued by its
// changes: only that range is then compared and copied. The usual case is
// that one: the message patched against is the oldest, which this one
// replaces, so it is updated in place and made the newest.
//
// The patch's new bytes are appended to lits, the block's literals.
func (h *history) appendCoded(b, lits, msg []byte, depth, lo, hi int) ([]byte, []byte) {
	n := len(msg)
	if n > maxDelta {
		h.forget()
		b = appendKey(b, keyPatch)
		b = append(b, 0)
		b = appendKey(b, keyMsg)
		return msgp.AppendBytes(b, msg), lits
	}
	ref := 0
	for j := depth; j >= 1; j-- {
		if h.valid[j-1] && len(h.prev[j-1]) == n {
			ref = j
			break
		}
	}
	if ref == 0 {
		b = appendKey(b, keyPatch)
		b = append(b, 0)
		b = appendKey(b, keyMsg)
		h.scratch = append(h.scratch[:0], msg...)
		b = msgp.AppendBytes(b, h.scratch)
		h.remember(depth)
		return b, lits
	}
	b, at := patchHeader(b, ref)
	if ref == depth {
		// Outside [lo, hi) every byte is equal, so the patch of that
		// range, placed at its offset, is the patch of the whole message.
		if old := h.prev[ref-1]; lo < hi {
			b, lits = appendPatch(b, lits, msg[lo:hi], old[lo:hi], lo)
			copy(old[lo:hi], msg[lo:hi])
		}
		h.prev[0], h.prev[depth-1] = h.prev[depth-1], h.prev[0]
		h.valid[depth-1], h.valid[0] = h.valid[0], true
	} else {
		b, lits = appendPatch(b, lits, msg, h.prev[ref-1], 0)
		h.scratch = append(h.scratch[:0], msg...)
		h.remember(depth)
	}
	return patchEnd(b, at), lits
}

// appendSpan is appendCoded, at depth 1 (a receive's history), of a
// message of length n that differs from the newest one only in span at
// offset lo, given only the span: a patch of the span alone, or, when
// oneRun says the span has no run of minEqualRun equal bytes and its
// first and last bytes differ, that patch's one run without the scan.
// The span becomes the newest message's bytes. It reports false,
// appending nothing that counts (b and lits keep their lengths), when the
// newest message is not of length n or the span lies outside it.
func (h *history) appendSpan(b, lits []byte, n, lo int, span []byte, oneRun bool) ([]byte, []byte, bool) {
	if !h.valid[0] || len(h.prev[0]) != n || lo > n || len(span) > n-lo {
		return b, lits, false
	}
	b, at := patchHeader(b, 1)
	if len(span) > 0 {
		old := h.prev[0][lo : lo+len(span)]
		if oneRun {
			b = binary.AppendUvarint(b, uint64(lo))
			b = binary.AppendUvarint(b, uint64(len(span)))
			lits = append(lits, span...)
		} else {
			b, lits = appendPatch(b, lits, span, old, lo)
		}
		copy(old, span)
	}
	return patchEnd(b, at), lits, true
}

// patchHeader appends the "p" key, ref (a msgpack positive fixint: ref
// <= depth <= 2), and the "m" key with a bin 32 header whose length
// patchEnd fills in once the runs that follow at are appended.
func patchHeader(b []byte, ref int) ([]byte, int) {
	b = appendKey(b, keyPatch)
	b = append(b, byte(ref))
	b = appendKey(b, keyMsg)
	b = append(b, 0xc6, 0, 0, 0, 0)
	return b, len(b)
}

// patchEnd fills in the bin 32 length of the patch that started at at.
func patchEnd(b []byte, at int) []byte {
	binary.BigEndian.PutUint32(b[at-4:], uint32(len(b)-at))
	return b
}

// minEqualRun is the shortest run of equal bytes that ends a change in a
// patch: a shorter one is folded into the change, as the next run's header
// (two uvarints) would cost about as much as the bytes it skips. The word
// scan in appendPatch (equalRunStarts) is written for this value.
const minEqualRun = 4

// appendPatch appends to dst the runs of cur that differ from prev (same
// length), and their new bytes to lits: cur and prev are the bytes from
// offset on of a message and of the earlier one it is patched against,
// whose bytes before offset are equal (0: the whole messages). A change
// runs from a differing byte up to the next run of minEqualRun equal
// bytes, or to its last differing byte when the message ends first.
//
// It works on 8-byte words: an action's float32 data changes in most of its
// bytes every exchange, and scanning it a byte at a time was the writer's
// largest cost. A word's XOR marks its differing bytes; equalLanes turns
// that into a mask of its equal bytes, in which equalRunStarts finds the
// runs of 4, inside the word and across its boundary with the previous
// one, without a branch per byte. The patches are byte for byte those of
// a byte-at-a-time scan (appendPatchBytewise, in the tests).
func appendPatch(dst, lits, cur, prev []byte, offset int) ([]byte, []byte) {
	n := len(cur)
	prev = prev[:n]
	i, kept := 0, -offset // kept: the end of the last run, relative to cur
	for i < n {
		// Find the word holding the next differing byte: 64-byte blocks
		// first (the long equal stretches of a large message), then words.
		for i+64 <= n && bytes.Equal(cur[i:i+64], prev[i:i+64]) {
			i += 64
		}
		var x uint64
		for ; i+8 <= n; i += 8 {
			if x = wordDiff(cur, prev, i); x != 0 {
				break
			}
		}
		if x == 0 {
			if i >= n {
				break
			}
			if x = tailDiff(cur, prev, i); x == 0 {
				break // the rest is equal
			}
		}
		// The change starts at the word's first differing byte (i); the
		// word is at j. The bytes before i are not the change's: they count
		// as differing, so that no equal run starts among them.
		j := i
		i += bits.TrailingZeros64(x) / 8
		eq := equalLanes(x) &^ (1<<(8*(i-j)) - 1)
		eqPrev := uint64(0) // the previous word's equal lanes
		end := 0
		for {
			// A run starting in the previous word's last 3 bytes comes
			// before any starting in this word.
			if r := equalRunStarts(eqPrev>>40 | eq<<24); r != 0 {
				end = j - 3 + bits.TrailingZeros64(r)/8
				break
			}
			if r := equalRunStarts(eq); r != 0 {
				end = j + bits.TrailingZeros64(r)/8
				break
			}
			last := x
			if j += 8; j >= n {
				// The message ends in the change: it ends at its last
				// differing byte (the equal bytes after it, fewer than
				// minEqualRun, and the lanes past the end are zero).
				end = j - bits.LeadingZeros64(last)/8
				break
			}
			if j+8 <= n {
				x = wordDiff(cur, prev, j)
			} else {
				x = tailDiff(cur, prev, j)
			}
			eqPrev, eq = eq, equalLanes(x)
		}
		dst = binary.AppendUvarint(dst, uint64(i-kept))
		dst = binary.AppendUvarint(dst, uint64(end-i))
		lits = append(lits, cur[i:end]...)
		i, kept = end, end
	}
	return dst, lits
}

// wordDiff is cur and prev's difference in the 8 bytes from i, as a
// little-endian word: its byte k is nonzero where cur[i+k] != prev[i+k].
func wordDiff(cur, prev []byte, i int) uint64 {
	return binary.LittleEndian.Uint64(cur[i:]) ^ binary.LittleEndian.Uint64(prev[i:])
}

// tailDiff is wordDiff for the fewer than 8 bytes left from i to the end
// of cur: the lanes past the end are zero, as if equal.
func tailDiff(cur, prev []byte, i int) uint64 {
	if last := len(cur) - 8; last >= 0 {
		// The message's last word, less the bytes before i.
		return wordDiff(cur, prev, last) >> (8 * (i - last))
	}
	var x uint64 // a message shorter than a word
	for k := len(cur) - 1; k >= i; k-- {
		x = x<<8 | uint64(cur[k]^prev[k])
	}
	return x
}

// equalLanes maps a word of byte differences to its equal bytes: the high
// bit of byte k is set when byte k of x is zero. Adding 0x7f to a byte's
// low 7 bits carries into its bit 7 unless they are all zero, and never
// into the next byte.
func equalLanes(x uint64) uint64 {
	const low7, high = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
	return ^(((x & low7) + low7) | x) & high
}

// equalRunStarts marks in a mask of equal lanes each lane that starts a
// run of 4 (minEqualRun) equal lanes within the word: lane k stays set
// when lanes k to k+3 are all set.
func equalRunStarts(eq uint64) uint64 {
	return eq & (eq >> 8) & (eq >> 16) & (eq >> 24)
}

// decode undoes appendCoded: m coded as ref gives the message, which it
// remembers. A patch's new bytes are taken from the front of *lits, the
// block's literals not yet taken, or, when lits is nil (format version 2),
// from the patch itself. The result is valid until the history moves on.
func (h *history) decode(m []byte, ref, depth int, lits *[]byte) ([]byte, error) {
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
	src := &m // where the runs' bytes are
	if lits != nil {
		src = lits
	}
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
		if skip > uint64(len(out)-pos) || n > uint64(len(out)-pos)-skip {
			return nil, fmt.Errorf("a patch run (%d bytes at %d) outside the %d-byte message", n, uint64(pos)+skip, len(out))
		}
		if n > uint64(len(*src)) {
			return nil, fmt.Errorf("a patch run of %d new bytes, where %d are left", n, len(*src))
		}
		pos += int(skip)
		copy(out[pos:], (*src)[:n])
		pos += int(n)
		*src = (*src)[n:]
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
