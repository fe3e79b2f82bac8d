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
	"encoding/binary"
	"hash/crc32"
)

// Version is the format version this package writes and reads.
const Version = 1

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
	// replaces by a CRC-32C digest per env row.
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
	keyLen     = "len"  // the message's length on the wire (before cuts)
	keyCuts    = "cuts" // [[offset, length, row bytes], ...] where m had observation data
	keyDigests = "d"    // CRC-32C per cut row, uint32 little endian, in message order
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
// CRC-32C (Castagnoli), as hash/crc32 computes it.
func RowDigest(row []byte) uint32 { return crc32.Checksum(row, castagnoli) }

func appendHeader(b []byte) []byte {
	b = append(b, magic...)
	return binary.LittleEndian.AppendUint16(b, Version)
}
