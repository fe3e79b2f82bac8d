package ledger

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"
)

// ErrTruncated ends a ledger whose last block is incomplete or damaged: a
// writer killed mid-run leaves one. Every record before it was read.
var ErrTruncated = errors.New("ledger: truncated: the file ends inside a block (the writer was stopped before it closed the ledger)")

// ErrDamaged ends a ledger at a block that is whole but wrong (it fails
// its checksum, does not decompress as its header says, or claims more
// than a writer writes) when more of the file follows it. A writer
// stopped mid-block leaves its damage at the file's end; a block with
// bytes after it is a file damaged in the middle, whose records past the
// block are not read, and a reader that called it truncated let `plugrl
// ledger audit` call a ledger clean from its first records alone (one
// flipped bit in block 0: "clean: 0 records"). errors.Is(ErrDamaged,
// ErrTruncated) holds, so that a caller that stops at either still does.
var ErrDamaged error = damagedError{}

type damagedError struct{}

func (damagedError) Error() string {
	return "ledger: damaged: a block in the middle of the file is not what its writer wrote, and the records after it cannot be read"
}

func (damagedError) Is(target error) bool { return target == ErrTruncated }

// Record is one ledger record. Which fields are set depends on Kind (see
// the Kind constants and docs/LEDGER.md); keys a reader does not know are
// skipped.
type Record struct {
	Seq  int    // position in the ledger, from 0
	Kind string // a Kind constant
	Time int64  // nanoseconds since the ledger was opened
	Conn int    // connection number, from 1 (connect, send, recv, close; lost: of the records after it)

	Wall    int64  // open: Unix time in nanoseconds
	Level   string // open
	Version string // open: the library's version
	PID     int64  // open
	URL     string // connect
	Addr    string // connect: the server's IP and port ("" in ledgers of earlier libraries)

	Msg     []byte   // connect, send, recv: the message, with cuts at digest level
	Len     int64    // send: the message's length on the wire (len(Msg) when nothing was cut)
	Cuts    []Cut    // send: where observation data was cut out
	Digests []uint32 // send: one per cut row, in message order

	By      string  // close: "server", "client" or "local"
	Code    int64   // close
	Reason  string  // close
	Err     string  // close
	Dropped []int64 // close: envs whose owed feedback was dropped
	// Unsent (close): 1 if the connection's last send record, a feedback
	// the client held to leave with its next infer, never left the client
	// (its envs are in Dropped).
	Unsent int64
	Cause  string // reconnect
	Count  int64  // lost: records
	Bytes  int64  // lost: bytes
	CPU    int64  // end: the background writer's flushes' CPU time in ns, 0 where not measured

	patch int64 // how Msg is coded (see history)
	// Version 4's send keys (see readSlot): the slot a whole send record
	// is the base of, and its runs; the slot a same-layout send repeats.
	slot, same      int64
	hasSlot, isSame bool
	refs, values    []byte
	// Whether the record had a "t" and a "v": version 5 keeps a recv's
	// and a same-layout send's in the block's literals instead.
	hasTime, hasValues bool
}

// Cut is a run of observation data a digest-level ledger left out of a
// sent message: Len bytes at Offset of the original message, in rows of
// RowBytes, each with one digest.
type Cut struct {
	Offset, Len, RowBytes int64
}

// Rows is the number of rows the cut holds.
func (c Cut) Rows() int64 {
	if c.RowBytes <= 0 {
		return 0
	}
	return c.Len / c.RowBytes
}

// Reader reads a ledger's records in order.
type Reader struct {
	r    *bufio.Reader
	dec  *zstd.Decoder
	raw  []byte // the current block, decompressed
	rest []byte // its records not yet read
	lits []byte // its literals not yet taken (versions 3 to 5)
	zbuf []byte
	zr   bytes.Reader // zbuf, for the decoder
	// version is the file's format version: 2 to 5 (see Version).
	version uint16
	seq     int
	conn    int     // the current connection
	sends   history // as the writer's (see history)
	recvs   history
	slots   [2]readSlot
	Block   int // blocks read so far; errors number blocks from 0
	// MaxMessage bounds a message Message reconstructs (the sum of its
	// cuts): 1 GiB unless set.
	MaxMessage int64

	// rebuilt is where Message rebuilds a message with cuts, kept from
	// one call to the next (freeRebuilt unmaps it). It is zero but for
	// the ranges in dirty, the kept bytes the last call copied in: a cut
	// row is never written, so it stays a page the kernel has not backed.
	// A record of a few bytes may claim a gigabyte of cut rows (one 4-byte
	// digest stands for a row of any size); memory and work then follow
	// the bytes the file holds, not the claim.
	rebuilt     []byte
	freeRebuilt func()
	dirty       [][2]int
}

// readSlot is the last whole send record of a slot (format version 4):
// what a same-layout send of the slot repeats, but for its digests and
// runs, which it carries. msg is updated in place by each of them, which
// is all a reader's work on one: the bytes it carries.
type readSlot struct {
	msg     []byte
	refs    []byte // (offset, length) uint32 LE pairs, each within msg, in order, none empty
	values  int    // the bytes of a same-layout send's values (its literals after its time; "v" in version 4): its digests and the runs' bytes
	wireLen int64
	cuts    []Cut
	digests int // bytes
	ok      bool
}

// NewReader checks the ledger header and returns a reader of its records.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var h [headerSize]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, fmt.Errorf("ledger: reading the header: %w", err)
	}
	if string(h[:len(magic)]) != magic {
		return nil, errors.New("ledger: not a plugrl ledger (bad magic)")
	}
	v := binary.LittleEndian.Uint16(h[len(magic):])
	switch {
	case v == 1:
		return nil, fmt.Errorf("ledger: format version 1 (CRC-32C row digests, libplugrl before the digest became Adler-32): this reader knows versions 2 to %d", Version)
	case v < 2 || v > Version:
		return nil, fmt.Errorf("ledger: format version %d, this reader knows versions 2 to %d", v, Version)
	}
	// Blocks are decoded as a stream (nextBlock), into a buffer that
	// grows with the bytes decoded, never with a size a header claims.
	// The decoder's own state follows the frame's window, which is
	// bounded here: the writer's is 256 KiB (before ccf1923, the
	// encoder's default of 4 MiB; 8 MiB leaves a margin).
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBlock),
		zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return nil, fmt.Errorf("ledger: zstd decoder: %w", err)
	}
	return &Reader{r: br, dec: dec, MaxMessage: 1 << 30, version: v}, nil
}

// Close releases the decoder.
func (r *Reader) Close() {
	r.dec.Close()
	if r.freeRebuilt != nil {
		r.freeRebuilt()
		r.rebuilt, r.freeRebuilt, r.dirty = nil, nil, nil
	}
}

// rebuildBuffer returns Message's buffer of n zero bytes (see rebuilt).
func (r *Reader) rebuildBuffer(n int) []byte {
	if n > len(r.rebuilt) {
		if r.freeRebuilt != nil {
			r.freeRebuilt()
		}
		r.rebuilt, r.freeRebuilt = sparseZeros(max(n, 64<<10))
		r.dirty = r.dirty[:0]
	}
	for _, d := range r.dirty {
		clear(r.rebuilt[d[0]:d[1]])
	}
	r.dirty = r.dirty[:0]
	return r.rebuilt[:n]
}

// Next returns the next record: io.EOF after the last one of a whole file,
// ErrTruncated (wrapped) after the last one of a file cut short, another
// error for a damaged record. The record's slices are valid until the
// next call.
func (r *Reader) Next() (*Record, error) {
	for len(r.rest) == 0 {
		if err := r.nextBlock(); err != nil {
			return nil, err
		}
	}
	rec := &Record{Seq: r.seq}
	rest, err := rec.decode(r.rest)
	if err == nil {
		switch rec.Kind {
		case KindConnect:
			r.conn = rec.Conn
		case KindLost:
			// The connect records in the gap may be lost: the lost record
			// names the connection of the records after it (ledgers
			// written before it did name none).
			if rec.Conn > 0 {
				r.conn = rec.Conn
			}
		}
		switch rec.Kind {
		case KindSend, KindRecv:
			rec.Conn = r.conn // the connection of the last connect record
		}
		var lits *[]byte // version 2: each patch holds its new bytes
		if r.version != 2 {
			lits = &r.lits
		}
		switch {
		case rec.Kind == KindSend && rec.isSame:
			err = r.repeat(rec)
		case rec.Kind == KindSend:
			rec.Msg, err = r.sends.decode(rec.Msg, int(rec.patch), 2, lits)
			if err == nil && len(rec.Cuts) == 0 && rec.Len == 0 {
				// A send with nothing cut out (every send of a full
				// ledger) carries no len: its message is whole.
				rec.Len = int64(len(rec.Msg))
			}
			if err == nil && rec.hasSlot {
				err = r.setSlot(rec)
			}
		case rec.Kind == KindRecv:
			if err = r.literalTime(rec, "a recv record"); err == nil {
				rec.Msg, err = r.recvs.decode(rec.Msg, int(rec.patch), 1, lits)
			}
		}
	}
	if err == nil && len(rest) == 0 && len(r.lits) > 0 {
		// The block's last record: every literal must have been taken.
		err = fmt.Errorf("the block's records leave %d of its literal bytes, which no record took", len(r.lits))
	}
	if err != nil {
		r.rest, r.lits = nil, nil
		return nil, fmt.Errorf("ledger: record %d (block %d): %w", r.seq, r.Block-1, err)
	}
	r.rest = rest
	r.seq++
	return rec, nil
}

// setSlot makes rec, a whole send record naming its slot, the base of
// that slot's same-layout sends.
func (r *Reader) setSlot(rec *Record) error {
	if r.version < 4 {
		return fmt.Errorf("a send naming a slot, which format version %d does not have", r.version)
	}
	if rec.slot < 0 || rec.slot >= int64(len(r.slots)) {
		return fmt.Errorf("a send naming slot %d, where a client has 0 and 1", rec.slot)
	}
	s := &r.slots[rec.slot]
	s.ok = false
	if len(rec.refs)%sendRef != 0 {
		return fmt.Errorf("%d bytes of runs: not whole (offset, length) pairs", len(rec.refs))
	}
	le := binary.LittleEndian
	end, values := 0, 4*len(rec.Digests)
	for b := rec.refs; len(b) > 0; b = b[sendRef:] {
		off, n := int64(le.Uint32(b)), int64(le.Uint32(b[4:]))
		if n == 0 || off < int64(end) || off+n > int64(len(rec.Msg)) {
			return fmt.Errorf("a run of %d bytes at %d: empty, out of order or outside the %d-byte message", n, off, len(rec.Msg))
		}
		end = int(off + n)
		values += int(n)
	}
	if len(rec.Msg) > maxDelta {
		return nil // the writer repeats no message this long (sent.go): its slot has no base
	}
	s.msg = append(s.msg[:0], rec.Msg...)
	s.refs = append(s.refs[:0], rec.refs...)
	s.wireLen, s.cuts, s.digests, s.values, s.ok = rec.Len, rec.Cuts, 4*len(rec.Digests), values, true
	return nil
}

// literalTime sets the time of rec, a recv or same-layout send record
// (what, for errors) of a version 5 ledger, from the block's literals:
// the record has none of its own (a "t" in it is an error). It does
// nothing in earlier versions.
func (r *Reader) literalTime(rec *Record, what string) error {
	if r.version < 5 {
		return nil
	}
	if rec.hasTime {
		return fmt.Errorf("%s with a \"t\": version 5 keeps its time in the block's literals", what)
	}
	b, err := r.takeLiterals(8, what+"'s time")
	if err == nil {
		rec.Time = int64(binary.LittleEndian.Uint64(b))
	}
	return err
}

// takeLiterals takes the next n bytes of the block's literals, for what
// (a record's part, for the error).
func (r *Reader) takeLiterals(n int, what string) ([]byte, error) {
	if n > len(r.lits) {
		return nil, fmt.Errorf("%s needs %d literal bytes, where the block has %d left", what, n, len(r.lits))
	}
	b := r.lits[:n:n]
	r.lits = r.lits[n:]
	return b, nil
}

// repeat makes rec, a same-layout send, the message it stands for: its
// slot's base with the runs replaced by the bytes it carries, after its
// digests.
func (r *Reader) repeat(rec *Record) error {
	switch {
	case r.version < 4:
		return fmt.Errorf("a same-layout send, which format version %d does not have", r.version)
	case rec.Msg != nil || rec.Cuts != nil || rec.Digests != nil || rec.Len != 0 || rec.hasSlot || rec.patch != 0:
		return errors.New("a same-layout send with a message of its own")
	case rec.same < 0 || rec.same >= int64(len(r.slots)) || !r.slots[rec.same].ok:
		return fmt.Errorf("a same-layout send of slot %d, which no whole send before it set", rec.same)
	}
	s := &r.slots[rec.same]
	if r.version >= 5 {
		if rec.hasTime || rec.hasValues {
			return errors.New("a same-layout send with a \"t\" or a \"v\": version 5 keeps its time and values in the block's literals")
		}
		if err := r.literalTime(rec, "a same-layout send"); err != nil {
			return err
		}
		var err error
		if rec.values, err = r.takeLiterals(s.values, "a same-layout send's values (slot "+strconv.Itoa(int(rec.same))+")"); err != nil {
			return err
		}
	}
	if len(rec.values) != s.values {
		return fmt.Errorf("a same-layout send of %d bytes, where its slot's digests and runs take %d", len(rec.values), s.values)
	}
	le := binary.LittleEndian
	v := rec.values
	if s.digests > 0 {
		rec.Digests = make([]uint32, s.digests/4)
		for i := range rec.Digests {
			rec.Digests[i] = le.Uint32(v[4*i:])
		}
		v = v[s.digests:]
	}
	for b := s.refs; len(b) > 0; b = b[sendRef:] {
		off, n := int(le.Uint32(b)), int(le.Uint32(b[4:]))
		copy(s.msg[off:off+n], v[:n])
		v = v[n:]
	}
	rec.Msg, rec.Len, rec.Cuts = s.msg, s.wireLen, s.cuts
	return nil
}

// damaged is the error for a block that is whole but wrong: ErrDamaged
// if more of the file follows it, else ErrTruncated (a writer stopped
// mid-block, or a file whose last writes did not reach the disk, leaves
// its damage at the end).
func (r *Reader) damaged(format string, args ...any) error {
	why := fmt.Sprintf(format, args...)
	if _, err := r.r.Peek(1); err == nil {
		return fmt.Errorf("%w (%s)", ErrDamaged, why)
	}
	return fmt.Errorf("%w (%s)", ErrTruncated, why)
}

func (r *Reader) nextBlock() error {
	var hb [blockHeader]byte
	h := hb[:]
	if r.version == 2 {
		h = hb[:blockHeaderV2]
	}
	n, err := io.ReadFull(r.r, h)
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return fmt.Errorf("%w (block %d's header has %d of its %d bytes)", ErrTruncated, r.Block, n, len(h))
	}
	le := binary.LittleEndian
	zlen, rawLen, sum, litLen := le.Uint32(h[0:]), le.Uint32(h[4:]), le.Uint32(h[8:]), uint32(0)
	if r.version != 2 {
		litLen = le.Uint32(h[12:])
	}
	if zlen > maxBlock || rawLen > maxBlock || litLen > maxBlock {
		return r.damaged("block %d claims %d bytes, %d raw, %d literal: more than a writer writes", r.Block, zlen, rawLen, litLen)
	}
	// Version 4 stores the literals after the frame, as they are; before,
	// they were the last litLen of the frame's rawLen bytes.
	stored := uint32(0)
	switch {
	case r.version >= 4:
		stored = litLen
		if litLen > 0 && rawLen == 0 {
			return fmt.Errorf("ledger: block %d: %d literal bytes and no record to take them", r.Block, litLen)
		}
	case litLen > rawLen:
		return r.damaged("block %d claims %d literal bytes of %d raw", r.Block, litLen, rawLen)
	case litLen > 0 && litLen == rawLen:
		return fmt.Errorf("ledger: block %d: %d literal bytes and no record to take them", r.Block, litLen)
	}
	// Grow with the bytes that arrive, not with what the header claims.
	r.zbuf, err = readGrowing(r.zbuf[:0], io.LimitReader(r.r, int64(zlen)+int64(stored)))
	if err != nil {
		return fmt.Errorf("ledger: reading block %d: %w", r.Block, err)
	}
	if len(r.zbuf) < int(zlen+stored) {
		return fmt.Errorf("%w (block %d has %d of its %d bytes)", ErrTruncated, r.Block, len(r.zbuf), zlen+stored)
	}
	z, lits := r.zbuf[:zlen], r.zbuf[zlen:]
	if blockSum(z, h[blockHeaderV2:], lits, r.version) != sum {
		return r.damaged("block %d fails its checksum", r.Block)
	}
	// Decoded as a stream, not with DecodeAll, which sizes its output
	// from the frame's content size before decoding a byte (up to 32 KiB
	// per compressed byte): the buffer grows with what is decoded, and
	// one byte past the header's raw length is enough to refuse it.
	r.zr.Reset(z)
	if err := r.dec.Reset(&r.zr); err != nil {
		return r.damaged("block %d does not decompress: %v", r.Block, err)
	}
	raw, err := readGrowing(r.raw[:0], io.LimitReader(r.dec, int64(rawLen)+1))
	if err != nil {
		return r.damaged("block %d does not decompress: %v", r.Block, err)
	}
	if len(raw) > int(rawLen) {
		return r.damaged("block %d decompresses to more than the %d bytes its header says", r.Block, rawLen)
	}
	if len(raw) != int(rawLen) {
		return r.damaged("block %d decompresses to %d bytes, its header says %d", r.Block, len(raw), rawLen)
	}
	r.setBlock(append(raw, lits...), int(litLen))
	return nil
}

// readGrowing appends what rd gives until io.EOF to dst, growing it as
// bytes arrive.
func readGrowing(dst []byte, rd io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		m, err := rd.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+m]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// setBlock makes raw, a block's bytes decompressed, whose last lits bytes
// (at most len(raw)) are its literals, the block being read.
func (r *Reader) setBlock(raw []byte, lits int) {
	records := len(raw) - lits
	r.raw, r.rest, r.lits = raw, raw[:records], raw[records:]
	r.Block++
}

// decode reads one record from b.
func (rec *Record) decode(b []byte) ([]byte, error) {
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return nil, err
	}
	for ; n > 0; n-- {
		var key []byte
		key, b, err = msgp.ReadMapKeyZC(b)
		if err != nil {
			return nil, err
		}
		if b, err = rec.field(string(key), b); err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
	}
	if rec.Kind == "" {
		return nil, errors.New("a record without a kind")
	}
	return b, nil
}

func (rec *Record) field(key string, b []byte) (rest []byte, err error) {
	str := func(dst *string) { *dst, rest, err = msgp.ReadStringBytes(b) }
	num := func(dst *int64) { *dst, rest, err = msgp.ReadInt64Bytes(b) }
	switch key {
	case keyKind:
		str(&rec.Kind)
	case keyTime:
		num(&rec.Time)
		rec.hasTime = true
	case keyConn:
		var c int64
		num(&c)
		rec.Conn = int(c)
	case keyWall:
		num(&rec.Wall)
	case keyLevel:
		str(&rec.Level)
	case keyVersion:
		str(&rec.Version)
	case keyPID:
		num(&rec.PID)
	case keyURL:
		str(&rec.URL)
	case keyAddr:
		str(&rec.Addr)
	case keyMsg:
		rec.Msg, rest, err = msgp.ReadBytesZC(b)
	case keyLen:
		num(&rec.Len)
	case keyPatch:
		num(&rec.patch)
	case keyCuts:
		return rec.readCuts(b)
	case keyDigests:
		var d []byte
		if d, rest, err = msgp.ReadBytesZC(b); err == nil {
			if len(d)%4 != 0 {
				return nil, fmt.Errorf("%d digest bytes: not whole uint32s", len(d))
			}
			rec.Digests = make([]uint32, len(d)/4)
			for i := range rec.Digests {
				rec.Digests[i] = binary.LittleEndian.Uint32(d[4*i:])
			}
		}
	case keyBy:
		str(&rec.By)
	case keyCode:
		num(&rec.Code)
	case keyReason:
		str(&rec.Reason)
	case keyErr:
		str(&rec.Err)
	case keyDropped:
		var n uint32
		if n, rest, err = msgp.ReadArrayHeaderBytes(b); err != nil {
			return nil, err
		}
		if int(n) > len(rest) { // each entry takes a byte at least
			return nil, fmt.Errorf("%d dropped envs in %d bytes", n, len(rest))
		}
		if n > maxDropped {
			return nil, fmt.Errorf("%d dropped envs: more than a writer can queue (at most %d)", n, maxDropped)
		}
		rec.Dropped = make([]int64, n)
		for i := range rec.Dropped {
			if rec.Dropped[i], rest, err = msgp.ReadInt64Bytes(rest); err != nil {
				return nil, err
			}
		}
	case keyUnsent:
		num(&rec.Unsent)
	case keyCause:
		str(&rec.Cause)
	case keyCount:
		num(&rec.Count)
	case keyBytes:
		num(&rec.Bytes)
	case keyCPU:
		num(&rec.CPU)
	case keySlot:
		num(&rec.slot)
		rec.hasSlot = true
	case keySame:
		num(&rec.same)
		rec.isSame = true
	case keyRefs:
		rec.refs, rest, err = msgp.ReadBytesZC(b)
	case keyValues:
		rec.values, rest, err = msgp.ReadBytesZC(b)
		rec.hasValues = true
	default:
		rest, err = msgp.Skip(b)
	}
	return rest, err
}

// Bounds on lists a record holds, so that what a reader allocates for one
// follows what a writer can write, not what a file claims. A writer's
// queue takes at most maxQueue (32 MiB; a version-2 writer's, maxBlock)
// per flush: a closed record holds 9 bytes of it per dropped env, and a
// send sendCut per cut. A cut is a run of consecutive rows of one array,
// so an infer of scattered envs has one per env and array: far more than
// the arrays.
const (
	maxDropped = 1 << 24
	maxCuts    = maxBlock / sendCut
)

func (rec *Record) readCuts(b []byte) ([]byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, err
	}
	if int(n) > len(b)/4 { // each cut takes four bytes at least
		return nil, fmt.Errorf("%d cuts in %d bytes", n, len(b))
	}
	if n > maxCuts {
		return nil, fmt.Errorf("%d cuts in one message: more than a writer can queue (at most %d)", n, maxCuts)
	}
	rec.Cuts = make([]Cut, 0, n)
	for i := range int(n) {
		var k uint32
		if k, b, err = msgp.ReadArrayHeaderBytes(b); err != nil {
			return nil, err
		}
		if k != 3 {
			return nil, fmt.Errorf("cut %d has %d fields, want 3", i, k)
		}
		var c Cut
		for _, dst := range []*int64{&c.Offset, &c.Len, &c.RowBytes} {
			if *dst, b, err = msgp.ReadInt64Bytes(b); err != nil {
				return nil, err
			}
		}
		rec.Cuts = append(rec.Cuts, c)
	}
	return b, nil
}

// Message rebuilds a sent message as it was on the wire, with zeros where a
// digest-level ledger cut observation data out; rows lists, per cut row in
// message order, its digest. It checks that the cuts fit the record. A
// message with cuts is rebuilt in the reader's buffer: it is valid until
// the next Message or Close, and must not be written to.
func (r *Reader) Message(rec *Record) (msg []byte, err error) {
	if len(rec.Cuts) == 0 {
		return rec.Msg, nil
	}
	var total, rows int64 = int64(len(rec.Msg)), 0
	prev := int64(0)
	for i, c := range rec.Cuts {
		if c.Len < 0 || c.RowBytes < 0 || c.Offset < prev || c.Offset-prev > int64(len(rec.Msg)) {
			return nil, fmt.Errorf("record %d: cut %d (offset %d, %d bytes) does not fit the message", rec.Seq, i, c.Offset, c.Len)
		}
		if c.Len > 0 && c.RowBytes == 0 {
			// The writer cuts rows it digests: a cut with bytes and no
			// rows would rebuild zeros that no digest in the file stands
			// for.
			return nil, fmt.Errorf("record %d: cut %d of %d bytes has no rows", rec.Seq, i, c.Len)
		}
		if c.RowBytes > 0 && c.Len%c.RowBytes != 0 {
			return nil, fmt.Errorf("record %d: cut %d of %d bytes is not whole rows of %d", rec.Seq, i, c.Len, c.RowBytes)
		}
		if c.Len > r.MaxMessage-total { // before adding: a Len near 2^63 would wrap
			return nil, fmt.Errorf("record %d: its cuts make a message over %d bytes", rec.Seq, r.MaxMessage)
		}
		total += c.Len
		rows += c.Rows()
		prev = c.Offset + c.Len
	}
	if rows != int64(len(rec.Digests)) {
		return nil, fmt.Errorf("record %d: %d digests for %d cut rows", rec.Seq, len(rec.Digests), rows)
	}
	if rec.Len != 0 && total != rec.Len {
		return nil, fmt.Errorf("record %d: rebuilt %d bytes, the message had %d", rec.Seq, total, rec.Len)
	}
	// Check the offsets before the buffer is had: a bad record costs no
	// memory.
	end, left := int64(0), int64(len(rec.Msg)) // the last cut's end; the kept bytes not yet placed
	for _, c := range rec.Cuts {
		take := c.Offset - end
		if take > left {
			return nil, fmt.Errorf("record %d: cut at %d is past the message's %d kept bytes", rec.Seq, c.Offset, len(rec.Msg))
		}
		left -= take
		end = c.Offset + c.Len
	}
	out := r.rebuildBuffer(int(total))
	kept, at := rec.Msg, 0
	put := func(b []byte) {
		if len(b) > 0 {
			copy(out[at:], b)
			r.dirty = append(r.dirty, [2]int{at, at + len(b)})
			at += len(b)
		}
	}
	for _, c := range rec.Cuts {
		take := int(c.Offset) - at
		put(kept[:take])
		kept = kept[take:]
		at += int(c.Len) // the cut's rows: zeros, never written
	}
	put(kept)
	return out, nil
}
