package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"
)

// Options configure a Writer. Zero values choose the defaults noted.
type Options struct {
	Level Level
	// QueueBytes bounds the records waiting for the background writer:
	// 8 MiB, at most 32 MiB. A record that does not fit is counted as
	// lost instead of stalling the caller.
	QueueBytes int
	// FlushInterval is how often the background writer compresses and
	// writes what is queued: 100 ms, at most 250 ms. A process killed
	// without Close loses at most the records of the last interval and
	// of the flush under way.
	FlushInterval time.Duration
	// Version is the library version the open record names.
	Version string
	// Warn, if set, is told on the recording goroutine, once each: when
	// the file could not be locked (Create: no locks on its file system),
	// when the queue first overflows and records start to be lost, when a
	// record larger than the whole queue is first lost (every such record
	// is), and when a write to the file has failed (the ledger then ends
	// at its last block written, and records no more).
	Warn func(msg string)
	// CloseTimeout bounds how long Close waits for the background writer
	// to write what is queued (5 s): a file that stops taking writes (a
	// stalled disk or network file system) must not hold the caller for
	// ever. Close then returns an error, and the ledger ends at its last
	// block written.
	CloseTimeout time.Duration
	// Clock, if set, is the monotonic clock (a duration since any fixed
	// point) that the times given to ReceivedAt were read from, and that
	// the Writer reads for the records it times itself. A client that
	// reads the clock after each receive anyway passes that reading on: a
	// clock read is about 40 ns of the caller's time per record. Nil: the
	// time since Create.
	Clock func() time.Duration
	// CPUs, if set, are the only CPUs the background writer's thread may
	// run on (ParseCPUs reads a list such as "2-3"): a control loop
	// pinned to a core of its own keeps the ledger's compression off it.
	// The writer then has an OS thread of its own while the ledger is
	// open. Linux only; Create fails if the kernel refuses the set (a CPU
	// that is offline, or outside the process's cpuset). Empty: wherever
	// the Go runtime runs it, which for a process pinned to one core is
	// that core.
	CPUs []int
}

// Writer records one client's traffic into a ledger file. Its record
// methods may be called from one goroutine at a time (the client's), and
// Close from any; every method of a nil *Writer does nothing, so a client
// without a ledger calls them unconditionally.
//
// The work is split so that the caller's thread touches as little memory
// as it can: after each wait for the server its caches are cold, and each
// line it reads or writes is a miss. A record method appends a frame to
// the queue: a receive as the message, or as the span that changed since
// the last (received.go), a send as its kept bytes, or as
// only the bytes that can have changed when its message kept its layout
// (sent.go), and any other record already encoded. The background writer
// turns the frames into records (msgpack, messages patch-coded against the
// last of their kind, a send of a known layout as a same-layout record),
// compresses them and writes them (docs/LEDGER.md has the costs measured).
type Writer struct {
	// First, what every record on the caller's path touches, together:
	// its lines are cold after each wait for the server. (The clock and
	// the time it started from, which a client's records do not read,
	// giving their times to SentAt and ReceivedAt, are further down; and
	// the Digester's fields that SentAt reads are here: before, they were
	// 200 bytes past the rest, a line of their own.)
	mu     sync.Mutex // guards queue to closed; held for an append, never across I/O
	queue  []byte     // frames (see frameRecord)
	limit  int
	closed bool
	level  Level
	base   time.Duration // clock's reading at start: a record's time is clock - base
	slots  [2]sendSlot   // the messages a send was recorded from (sent.go)
	oldest int           // the slot a new message takes
	// lastRecv is the last message received, and recvBased says that the
	// queue took its frame and the writer will keep it (up to maxDelta):
	// the writer's recv history then ends with it, and the next message
	// of its length is queued as the span that changed (frameRecvSpan).
	// Without recvBased, lastRecv is stale.
	lastRecv  []byte
	recvBased bool
	// spanLo and spanHi are the last receive's span (its length twice
	// when it was the message before it again): changedSpan's guess at
	// the next.
	spanLo, spanHi int

	lostCount int // guarded by mu
	lostBytes int // guarded by mu
	// lostConn is conn as of the caller's last reserve (guarded by mu):
	// the connection a lost record written at the end of a flush names
	// (see reserve).
	lostConn int
	// lostAt is the record time of the last record refused (guarded by
	// mu): a lost record's time (see reserve).
	lostAt int64
	// failed is the first write error's message, set by the writer under
	// mu: the caller's next record is refused, and Warn told once.
	failed       string
	failedWarned bool
	dig          Digester // the digests of the message being sent (BeginSend)

	start time.Time
	clock func() time.Duration

	path     string
	conn     int // the current connection's number
	file     *os.File
	size     int64 // the bytes written to file (by writeOut, under flushMu, once Create has returned)
	fd       int   // file's descriptor, for fileDeleted
	interval time.Duration
	// closeTimeout is Options.CloseTimeout; closeErr is what Close
	// returned, for a later call (set before finished is closed).
	closeTimeout time.Duration
	closeErr     error

	// The recording goroutine's own state.
	warn    func(string)
	warned  [2]bool  // Warn was told: the queue overflowed; a record larger than the whole queue was lost
	kept    [][]byte // scratch for Sent: the segments it records (held until the next Sent, as the caller's message holds them)
	cuts    []Cut    // scratch for Sent
	refs    []uint32 // scratch for Sent: offset and length of each referenced kept segment
	digests []byte   // scratch for Sent
	refSegs []refSeg // scratch for Sent (sendSlot.refSegs)

	flushMu sync.Mutex // one flush at a time (the ticker's or Close's); guards what follows
	spare   []byte
	raw     []byte        // a block's records, before compression
	lits    []byte        // a block's literals: its patches' new bytes, recv and same-layout send times and values (see format.go)
	out     []byte        // blocks, compressed, with their headers, for one write (writeOut); it keeps up to outTarget plus the largest block
	sends   history       // the last two whole send records' messages, for patch coding
	recvs   history       // the last recv record's message
	bases   [2]sendBase   // per slot, what its last frameSend said (sent.go)
	enc     *zstd.Encoder // the process's (sharedEncoder), or its own with CPUs
	werr    error         // the first write error; later blocks are not written
	// The most each buffer held in recent flushes (see trimmed): peaks
	// of this flush, and their decaying maxima over the flushes.
	rawPeak, outPeak      int
	queueHW, rawHW, outHW int

	stop     chan struct{}
	done     chan struct{} // closed when the background writer has stopped
	finished chan struct{} // closed when Close has written and closed the file
	cpus     []int         // Options.CPUs
	tid      int           // the writer's thread, when it has one of its own (cpus): for tests
	// flushCPU is the CPU time of the background flushes so far, in ns
	// (the end record's cpu): written by the writer's goroutine only, and
	// read by Close once that has stopped.
	flushCPU int64
}

// The queue holds frames, each a record as the caller's thread left it:
//
//	tag (1 byte), payload length (uint32 LE), payload
//
// A frameRecord's payload is the record itself; a frameRecv's is the time
// (int64 LE) and the message; a frameRecvSpan's the time, the message's
// length and the offset of the span that changed since the last message
// received (uint32 LE each), then the span's bytes, and a frameRecvRun's
// the same, for a span the writer records as one run (received.go);
// frameSend and frameSendSame are described in sent.go.
const (
	frameRecord = iota + 1
	frameSend
	frameSendSame
	frameRecv
	frameRecvSpan
	frameRecvRun

	frameHeader = 5
	maxQueue    = 32 << 20
	// blockRawTarget is the size of the blocks a flush writes (a record
	// larger than it is a block of its own). Small blocks keep the
	// writer's bursts short: it yields the core between them, so that a
	// client thread sharing the core waits for one block's work at most.
	// In the SMALL bench on one core, a 100 ms flush in one go made the
	// turnaround's p99.99 1.4-1.7 ms; 32 KiB blocks with yields 0.65-1.0
	// ms, at the price of p99.9 (0.15-0.25 ms to 0.37-0.50; 8 KiB blocks:
	// 0.3 ms, and 20 % fewer exchanges). And zstd does better on them: on
	// a SMALL ledger, 32 KiB blocks compress 12.2:1 at 700 MB/s, one
	// 230 KiB block 9.8:1 at 370 MB/s (its tables stay in the cache).
	blockRawTarget = 32 << 10
	windowBytes    = 256 << 10
	// outTarget is how many bytes of blocks the writer gathers before it
	// writes them (writeOut).
	outTarget = 256 << 10
)

// sharedEncoder is the zstd encoder of the process's ledgers whose
// writers run where the scheduler puts them (no Options.CPUs). Each block
// is compressed on its own (EncodeAll: every call starts from an empty
// history), so ledgers can share one, and its calls wait for each other
// (concurrency 1); a flush is a few milliseconds every FlushInterval, so
// they rarely meet. One per ledger, as before, cost 1.6 MiB of memory
// each, whose tables a flush found cold. A writer given CPUs of its own
// has its own encoder: sharing would make it wait for writers starved on
// the loop's core.
var sharedEncoder = sync.OnceValues(newEncoder)

// newEncoder makes a ledger's encoder. A 256 KiB window: an env loop's
// records repeat within far less; WithLowerEncoderMem, used before, kept
// the encoder at 4.5 MiB (the default window) and cost the writer a third
// more time per block.
func newEncoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithNoEntropyCompression(true), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(windowBytes))
}

// used counts, per path (absolute, so that two spellings of one path
// count together), the ledgers this process has asked for there.
var used = struct {
	sync.Mutex
	paths map[string]int
}{paths: map[string]int{}}

// usedKey is path as used counts it: absolute, where that can be had.
func usedKey(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// Resolve is the file the next ledger asked for at path is written to,
// if no other ledger is writing it: for an existing directory, a file of
// its own in it (plugrl-<pid>-<n>.ledger); for a file this process has
// already asked for, path.<n> (n = 2, 3, ...), so that handles given one
// path (PLUGRL_LEDGER) never truncate each other's ledgers; else path
// itself. Create skips a name another ledger holds (see openFile).
func Resolve(path string) string {
	file, _, _ := resolve(path)
	return file
}

// resolve is Resolve, the use of path it counted (for unresolve), and
// whether the file is one of a directory's.
func resolve(path string) (file string, n int, inDir bool) {
	key := usedKey(path)
	used.Lock()
	defer used.Unlock()
	n = used.paths[key] + 1
	used.paths[key] = n
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return filepath.Join(path, fmt.Sprintf("plugrl-%d-%d.ledger", os.Getpid(), n)), n, true
	}
	if n == 1 {
		return path, n, false
	}
	return fmt.Sprintf("%s.%d", path, n), n, false
}

// unresolve gives back the n-th use of path, which did not become a
// ledger, if no later use was counted since: a caller retrying after an
// error gets the file it asked for.
func unresolve(path string, n int) {
	key := usedKey(path)
	used.Lock()
	defer used.Unlock()
	if used.paths[key] == n {
		used.paths[key] = n - 1
	}
}

// errOccupied is openFile's word that another ledger has the file (or,
// in a directory, that it exists): Create tries the next name.
var errOccupied = errors.New("the file is another ledger's")

// maxNames bounds the names Create tries for one ledger (a variable for
// tests).
var maxNames = 10000

// createFile opens the file of a new ledger asked for at asked (see
// Resolve), skipping names another ledger holds, and writes the file
// header. In a directory, taken names are skipped by steps that double
// (1, 2, 4, ...): a directory of many earlier runs' ledgers costs a few
// tries, not one per ledger.
func createFile(asked string, warn func(string)) (*os.File, error) {
	skip := 1
	for range maxNames {
		path, use, inDir := resolve(asked)
		f, unlocked, err := openFile(path, inDir, use > 1 && !inDir)
		if err == errOccupied {
			// The next name; this use stays counted, as its name is taken.
			if inDir {
				skipUses(asked, skip-1)
				skip = min(2*skip, 1<<20)
			}
			continue
		}
		// A file of a directory's that could not take its header (a full
		// disk, a file size limit) is removed: this open made it
		// (O_EXCL), and it is no ledger; each failed open (a supervisor
		// restarting the process) left another empty file, which
		// `plugrl ledger` cannot read.
		discard := func() {
			if inDir {
				_ = os.Remove(path)
			}
			f.Close()
		}
		header := appendHeader(nil)
		if limit, ok := fileSizeLimit(); err == nil && ok && limit < int64(len(header)) {
			discard()
			err = errFileSize(limit) // not even the header fits: its write would raise SIGXFSZ
		}
		if err == nil {
			if unlocked && !inDir && warn != nil {
				warn(fmt.Sprintf("ledger %s: written without a lock (none on this file system, or on this platform): another process given the same path would overwrite it", path))
			}
			if _, err = f.Write(header); err != nil {
				discard()
				err = fmt.Errorf("writing %s: %w", path, err)
			}
		}
		if err != nil {
			unresolve(asked, use)
			return nil, fmt.Errorf("ledger: %w", err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("ledger: %s: %d names tried, each taken by another ledger", asked, maxNames)
}

// skipUses counts n more uses of path, so that the next resolve skips n
// names.
func skipUses(path string, n int) {
	key := usedKey(path)
	used.Lock()
	defer used.Unlock()
	used.paths[key] += n
}

// Create creates (or truncates) the ledger file for path (see Resolve) and
// starts its background writer.
func Create(path string, o Options) (*Writer, error) {
	for _, c := range o.CPUs {
		if c < 0 || c >= maxCPU {
			return nil, fmt.Errorf("ledger: writer CPU %d is not a CPU number (0-%d)", c, maxCPU-1)
		}
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 8 << 20
	}
	o.QueueBytes = min(o.QueueBytes, maxQueue)
	if o.FlushInterval <= 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	o.FlushInterval = min(o.FlushInterval, 250*time.Millisecond)
	encoder := sharedEncoder
	if len(o.CPUs) > 0 {
		encoder = newEncoder
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 5 * time.Second
	}
	enc, err := encoder()
	if err != nil {
		return nil, fmt.Errorf("ledger: zstd encoder: %w", err)
	}
	w := &Writer{
		level: o.Level, start: time.Now(), clock: o.Clock, interval: o.FlushInterval, warn: o.Warn,
		limit: o.QueueBytes, enc: enc, closeTimeout: o.CloseTimeout,
		stop: make(chan struct{}), done: make(chan struct{}), finished: make(chan struct{}),
	}
	if w.clock == nil {
		w.clock = func() time.Duration { return time.Since(w.start) }
	}
	w.base = w.clock()
	w.cpus = o.CPUs
	b, at := w.begin(KindOpen, 4)
	b = appendInt64(b, keyWall, w.start.UnixNano())
	b = appendStr(b, keyLevel, o.Level.String())
	b = appendStr(b, keyVersion, o.Version)
	b = appendInt64(b, keyPID, int64(os.Getpid()))
	w.endFrame(b, at)
	// The writer first, on the CPUs asked for, and then the file: a set
	// the kernel refuses leaves the path as it was.
	started, ready := make(chan error, 1), make(chan struct{})
	go w.run(started, ready)
	if err := <-started; err != nil {
		<-w.done
		return nil, fmt.Errorf("ledger: running the writer on CPUs %s: %w", FormatCPUs(o.CPUs), err)
	}
	f, err := createFile(path, o.Warn)
	if err != nil {
		close(w.stop)
		<-w.done
		return nil, err
	}
	w.file, w.path, w.size, w.fd = f, f.Name(), int64(len(appendHeader(nil))), rawFD(f)
	close(ready)
	return w, nil
}

// Path is the file the ledger is written to.
func (w *Writer) Path() string { return w.path }

// Level is the level the ledger records at.
func (w *Writer) Level() Level { return w.level }

// begin starts a frameRecord in the queue, for a record of kind with
// extra more keys, and returns the queue and where the payload starts, for
// endFrame; mu must be held.
func (w *Writer) begin(kind string, extra int) ([]byte, int) {
	return w.beginAt(kind, extra, w.now())
}

// beginAt is begin for a record of time t.
func (w *Writer) beginAt(kind string, extra int, t int64) ([]byte, int) {
	b := append(w.queue, frameRecord, 0, 0, 0, 0)
	return msgp.AppendInt64(append(b, recordPrefix(kind, extra)...), t), len(b)
}

// endFrame ends the frame whose payload starts at at, and makes b the
// queue.
//
// It does not wake the writer early when the queue fills: a full ledger
// of LARGE, woken at half its queue, recorded more but cost the loop 60 %
// of its exchanges on a shared core (75-87 a second against 190-205),
// the writer's compression taking the core. Records that do not fit in
// the queue between two flushes are dropped, and counted, instead.
func (w *Writer) endFrame(b []byte, at int) {
	binary.LittleEndian.PutUint32(b[at-4:], uint32(len(b)-at))
	w.queue = b
}

// now is the records' time: nanoseconds since the ledger was opened, on
// the monotonic clock.
func (w *Writer) now() int64 { return w.since(w.clock()) }

// since is the record time of at, a reading of the clock.
func (w *Writer) since(at time.Duration) int64 { return int64(at - w.base) }

// prefixes holds each record kind's first bytes for each count of extra
// keys: the map header, the kind, and the time's key. Precomputed, as
// every record on the caller's path starts with them.
var (
	prefixes = map[string][8][]byte{}
	// sameRecords are a same-layout send record, per slot: the whole of
	// it, as its time and values are in the block's literals
	// (appendSendSame).
	sameRecords [2][]byte
	// recvTimeless is a recv record's bytes before its message's keys
	// (format version 5: its time is in the block's literals).
	recvTimeless []byte
)

func init() {
	for _, k := range []string{KindOpen, KindConnect, KindSend, KindRecv, KindClose, KindReconnect, KindInterrupt, KindLost, KindEnd} {
		var p [8][]byte
		for extra := range p {
			b := msgp.AppendMapHeader(nil, uint32(2+extra))
			b = appendStr(b, keyKind, k)
			p[extra] = appendKey(b, keyTime)
		}
		prefixes[k] = p
	}
	for si := range sameRecords {
		b := msgp.AppendMapHeader(nil, 2)
		b = appendStr(b, keyKind, KindSend)
		b = appendKey(b, keySame)
		sameRecords[si] = msgp.AppendInt64(b, int64(si))
	}
	recvTimeless = appendStr(msgp.AppendMapHeader(nil, 3), keyKind, KindRecv)
}

// recordPrefix is the first bytes of a record of kind with extra more
// keys than its kind and time. Sends and receives, the records of every
// exchange, do not come here: their frames are made into records by the
// writer (appendSend, appendSendSame, recvTimeless).
func recordPrefix(kind string, extra int) []byte { return prefixes[kind][extra] }

// lostMarkerMax bounds a lost record's frame (see reserve).
const lostMarkerMax = frameHeader + 64

// reserve locks the queue for a record of at most size bytes. It returns
// false, with the lock released, when the record does not fit (counting it
// as lost) or the ledger is closed. The first record taken after some
// were lost is preceded by a lost record saying how many: a reader sees
// where the gap is, not only that there was one.
func (w *Writer) reserve(size int) bool {
	w.mu.Lock()
	w.lostConn = w.conn // conn is the caller's: read on its thread, kept for the writer's
	if w.closed {
		w.mu.Unlock()
		return false
	}
	if w.failed != "" {
		tell := !w.failedWarned
		w.failedWarned = true
		w.mu.Unlock()
		if tell && w.warn != nil {
			w.warn(w.failed + "; the ledger ends at its last block written, and records nothing more")
		}
		return false
	}
	need := size
	if w.lostCount > 0 {
		need += lostMarkerMax
	}
	if len(w.queue)+need > w.limit {
		w.lostCount++
		w.lostBytes += size
		// A clock reading when a record is refused, for the lost record
		// that stands for the gap: no earlier than the records before it,
		// no later than any after it, whose times (a send's and a
		// receive's: readings the caller took before recording) are read
		// after this call. Timing the lost record as it is written put it
		// after the record it precedes (reserve), or after every record
		// queued during the flush that wrote it.
		w.lostAt = w.now()
		w.mu.Unlock()
		if size > w.limit {
			// No flush makes room for it: every record this large is
			// lost, at any rate, and the warning says so, not that the
			// writer is slow (a slower loop would not help).
			if !w.warned[1] && w.warn != nil {
				w.warned[1] = true
				w.warn(fmt.Sprintf("ledger %s: a %d-byte record is larger than the whole %d-byte queue: records this large are never recorded at level %s "+
					"(each block says how many were dropped)", w.path, size, w.limit, w.level))
			}
			return false
		}
		if !w.warned[0] && w.warn != nil {
			w.warned[0] = true
			w.warn(fmt.Sprintf("ledger %s: the %d-byte queue is full: records are being dropped (each block says how many); "+
				"the writer cannot keep up with this rate at level %s", w.path, w.limit, w.level))
		}
		return false
	}
	if w.lostCount > 0 {
		// It names the connection the records after it are on: send and
		// recv records name none, and the reader would otherwise put them
		// on the connection of the last connect record, which may be in
		// the gap (a connection is counted whether or not its record is).
		b, at := w.beginAt(KindLost, 3, w.lostAt)
		b = appendInt64(b, keyConn, int64(w.conn))
		b = appendInt64(b, keyCount, int64(w.lostCount))
		b = appendInt64(b, keyBytes, int64(w.lostBytes))
		w.endFrame(b, at)
		w.lostCount, w.lostBytes = 0, 0
	}
	return true
}

// Connected records a new connection and the metadata message it read.
func (w *Writer) Connected(url, addr string, metadata []byte) {
	if w == nil {
		return
	}
	// Counted whether or not the queue takes the record: the records
	// after a gap name the connection they belong to, not the last one
	// recorded (connect records number the client's connections).
	w.conn++
	if !w.reserve(len(metadata) + len(url) + len(addr) + 64) {
		return
	}
	keys := 3
	if addr != "" {
		keys++
	}
	b, at := w.begin(KindConnect, keys)
	b = appendInt64(b, keyConn, int64(w.conn))
	b = appendStr(b, keyURL, url)
	if addr != "" {
		b = appendStr(b, keyAddr, addr)
	}
	b = appendBin(b, keyMsg, metadata)
	w.endFrame(b, at)
	w.mu.Unlock()
}

// appendStr, appendInt64 and appendBin append a key and its value.
func appendStr(b []byte, key, v string) []byte {
	return msgp.AppendString(appendKey(b, key), v)
}

func appendInt64(b []byte, key string, v int64) []byte {
	return msgp.AppendInt64(appendKey(b, key), v)
}

func appendBin(b []byte, key string, v []byte) []byte {
	return msgp.AppendBytes(appendKey(b, key), v)
}

// Closed records the end of the current connection: by "server" (its close
// frame's code and reason), "client" (Close: the code of the close frame
// it sent, 1000, or 0 if none could be sent) or "local" (the client
// dropped it: a lost link, a timeout, a protocol error, an interrupt, or
// the caller abandoning it), with the error and the envs whose owed
// feedback will never be sent (SPEC 7.6). unsent says the last send
// recorded on the connection, a feedback held to leave with the next
// infer, never left (its envs are among dropped).
func (w *Writer) Closed(by string, code int, reason, err string, dropped []int64, unsent bool) {
	if w == nil || !w.reserve(len(reason)+len(err)+9*len(dropped)+112) {
		return
	}
	extra := 6
	if unsent {
		extra++
	}
	b, at := w.begin(KindClose, extra)
	if unsent {
		b = appendInt64(b, keyUnsent, 1)
	}
	b = appendInt64(b, keyConn, int64(w.conn))
	b = appendStr(b, keyBy, by)
	b = appendInt64(b, keyCode, int64(code))
	b = appendStr(b, keyReason, reason)
	b = appendStr(b, keyErr, err)
	b = appendKey(b, keyDropped)
	b = msgp.AppendArrayHeader(b, uint32(len(dropped)))
	for _, e := range dropped {
		b = msgp.AppendInt64(b, e)
	}
	w.endFrame(b, at)
	w.mu.Unlock()
}

// Reconnecting records that the client starts reconnecting, and why.
func (w *Writer) Reconnecting(cause string) {
	if w == nil || !w.reserve(len(cause)+48) {
		return
	}
	b, at := w.begin(KindReconnect, 1)
	b = appendStr(b, keyCause, cause)
	w.endFrame(b, at)
	w.mu.Unlock()
}

// Interrupted records a call ended by an interrupt.
func (w *Writer) Interrupted() {
	if w == nil || !w.reserve(32) {
		return
	}
	w.endFrame(w.begin(KindInterrupt, 0))
	w.mu.Unlock()
}

// Close writes what is queued and an end record, and closes the file,
// within Options.CloseTimeout. It may be called from any goroutine, more
// than once: a later call returns once the first has, with its error (the
// first write error, or the timeout's).
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.finished
		return w.closeErr
	}
	w.closed = true // no record is taken after this one
	w.mu.Unlock()
	close(w.stop)
	flushed := make(chan error, 1)
	var written atomic.Bool // every record is in the file; only the sync may be left
	go func() {
		<-w.done
		// The end record is the last, after what was queued and the count
		// of what was not, with the background writer's CPU time, final
		// now that it has stopped; it is timed as it is appended, after
		// the lost record's time.
		w.flushWith(func() []byte {
			end := msgp.AppendInt64(append([]byte(nil), recordPrefix(KindEnd, 1)...), w.now())
			return appendInt64(end, keyCPU, w.flushCPU)
		})
		if w.werr == nil {
			written.Store(true)
			if err := syncToDisk(w.file); err != nil {
				w.werr = fmt.Errorf("ledger: syncing %s to disk: %w", w.file.Name(), err)
			}
		}
		flushed <- w.werr
	}()
	timer := time.NewTimer(w.closeTimeout)
	defer timer.Stop()
	select {
	case err := <-flushed:
		w.closeErr = errors.Join(err, w.file.Close())
	case <-timer.C:
		// A write that has not returned: the writer is left to it (a pipe
		// or socket would wake when the file closes; a stalled disk's
		// write returns when the disk does, and then finds the file
		// closed). Or only the sync: the file holds every record, and
		// the sync goes on (the descriptor is closed once it returns).
		w.file.Close()
		if written.Load() {
			w.closeErr = fmt.Errorf("ledger: %s: every record was written, but its sync to disk did not finish within %v (a slow disk): a power cut may still lose what the kernel has not written back",
				w.path, w.closeTimeout)
			break
		}
		w.closeErr = fmt.Errorf("ledger: %s: the last records were not written within %v (the file is not taking writes); the ledger ends at its last block written",
			w.path, w.closeTimeout)
	}
	close(w.finished)
	return w.closeErr
}

// syncToDisk asks for f's blocks to reach the disk before Close returns,
// so that a ledger closed without an error survives a power cut (an
// e-stop that cuts the computer's power too): the kernel otherwise keeps
// written blocks in memory for up to about 30 s on Linux's defaults, and
// a robot's run is often shorter. Once per ledger, off the exchanges'
// path, within Close's timeout. A file that cannot be synced (a pipe, a
// device: EINVAL) is not an error: there is no disk behind it. A variable
// so that a test can see the call.
var syncToDisk = func(f *os.File) error {
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// run is the background writer: it flushes every interval until Close.
// It reports on started whether it runs where Options.CPUs asked.
func (w *Writer) run(started chan<- error, ready <-chan struct{}) {
	defer close(w.done)
	if len(w.cpus) > 0 {
		// The thread is the writer's alone while it has the writer's
		// CPUs; it has its own back before other work may run on it.
		runtime.LockOSThread()
		restore, err := pinThread(w.cpus)
		if err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		defer func() {
			if restore() == nil {
				runtime.UnlockOSThread()
			} // else it stays locked, and Go ends it with this goroutine
		}()
		w.tid = threadID()
	}
	started <- nil
	select {
	case <-ready: // the file is open
	case <-w.stop: // it could not be
		return
	}
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.backgroundFlush()
		}
	}
}

// backgroundFlush is a flush of the background writer: on a thread of its
// own for the flush's time, whose CPU clock it reads around the flush (the
// end record's cpu: what recording took off the caller's path, which
// `plugrl ledger summary` prints per exchange) and whose scheduler slice
// it shortens (slice_linux.go), so that a control loop's thread that
// shares the core takes it back as soon as it is woken. Close's last flush
// runs on a goroutine of its own, whose thread it never changes. Where the
// thread's attributes cannot be put back, it stays locked to the writer
// and ends with it, so that no other goroutine runs with the short slice.
func (w *Writer) backgroundFlush() {
	if !slicesAvailable() && !cpuClockAvailable {
		w.flush() // neither would work: no thread to keep (off Linux, Gosched between blocks would hand it off)
		return
	}
	runtime.LockOSThread()
	slice := shortSlice() // does nothing where slices are not available
	start := threadCPU()
	w.flush()
	if end := threadCPU(); start > 0 && end >= start {
		w.flushCPU += end - start
	}
	if slice.restore() {
		runtime.UnlockOSThread()
	}
}

// flush takes the frames queued, turns them into records and writes them,
// in blocks of about blockRawTarget bytes, yielding the core between
// blocks.
func (w *Writer) flush() { w.flushWith(nil) }

// flushWith is flush with a last record, tail's (Close's end record),
// after every other, the count of records lost included.
func (w *Writer) flushWith(tail func() []byte) {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.flushLocked(tail)
}

// flushLocked is flushWith with flushMu held.
func (w *Writer) flushLocked(tail func() []byte) {
	w.mu.Lock()
	queued := w.queue
	w.queue = w.spare[:0]
	lostN, lostB, lostConn, lostT := w.lostCount, w.lostBytes, w.lostConn, w.lostAt
	w.lostCount, w.lostBytes = 0, 0
	w.mu.Unlock()
	raw := w.raw[:0]
	w.rawPeak, w.outPeak = 0, 0
	defer func() {
		// A burst's buffers (a full ledger of large messages) are not
		// kept for the ledger's life once the flushes no longer need
		// them; a steady rate keeps them, and allocates nothing.
		decay(&w.queueHW, len(queued))
		decay(&w.rawHW, w.rawPeak)
		decay(&w.outHW, w.outPeak)
		w.spare = trimmed(queued[:0], w.queueHW)
		w.raw, w.lits = trimmed(w.raw, w.rawHW), trimmed(w.lits, w.rawHW)
		w.out = trimmed(w.out, w.outHW)
	}()
	for frames := queued; len(frames) > 0; {
		tag, n := frames[0], int(binary.LittleEndian.Uint32(frames[1:]))
		p := frames[frameHeader : frameHeader+n]
		frames = frames[frameHeader+n:]
		switch tag {
		case frameRecord:
			raw = append(raw, p...)
		case frameSend:
			raw = w.appendSend(raw, p)
		case frameSendSame:
			var ok bool
			if raw, ok = w.appendSendSame(raw, p); !ok {
				lostN, lostB, lostT = lostN+1, lostB+frameHeader+n, max(lostT, int64(binary.LittleEndian.Uint64(p)))
			}
		case frameRecv:
			w.lits = append(w.lits, p[:8]...) // its time (format version 5)
			raw, w.lits = w.recvs.appendCoded(append(raw, recvTimeless...), w.lits, p[8:], 1, 0, len(p)-8)
		case frameRecvSpan, frameRecvRun:
			var ok bool
			if raw, ok = w.appendRecvSpan(raw, p, tag == frameRecvRun); !ok {
				lostN, lostB, lostT = lostN+1, lostB+frameHeader+n, max(lostT, int64(binary.LittleEndian.Uint64(p)))
			}
		}
		if len(raw)+len(w.lits) >= blockRawTarget {
			raw = w.writeBlock(raw)
			yieldThread()
		}
	}
	if lostN > 0 { // lost after the last record queued (a gap before one is marked there, by reserve)
		raw = msgp.AppendMapHeader(raw, 5)
		raw = appendStr(raw, keyKind, KindLost)
		raw = appendInt64(raw, keyTime, lostT)           // when the last was refused (see reserve), not now: the caller queued on meanwhile
		raw = appendInt64(raw, keyConn, int64(lostConn)) // as reserve's lost record: the connection of the records after it
		raw = appendInt64(raw, keyCount, int64(lostN))
		raw = appendInt64(raw, keyBytes, int64(lostB))
	}
	if tail != nil {
		raw = append(raw, tail()...)
	}
	w.raw = w.writeBlock(raw)
	w.writeOut()
}

// writeBlock compresses raw, a run of whole records, into one block at
// the end of w.out, followed by w.lits, their literals, as they are; it
// writes w.out when it holds outTarget bytes. It empties w.lits and
// returns raw emptied, for the next block.
//
// The literals are not compressed (format version 4): they are mostly a
// policy's action values, whose mantissas no compressor shrinks, and
// zstd's pass over them, even in the long strides it takes through bytes
// it finds no match in, was a quarter of the writer's time per SMALL
// exchange (BenchmarkWriter/digest/varying: 0.75 us through zstd, 0.55
// us stored).
func (w *Writer) writeBlock(raw []byte) []byte {
	lits := len(w.lits)
	if len(raw) == 0 || w.werr != nil {
		w.lits = w.lits[:0]
		return raw[:0]
	}
	w.rawPeak = max(w.rawPeak, len(raw)+lits)
	start := len(w.out)
	w.out = append(w.out, make([]byte, blockHeader)...)
	w.out = w.enc.EncodeAll(raw, w.out)
	zlen := len(w.out) - start - blockHeader
	w.out = append(w.out, w.lits...)
	w.lits = w.lits[:0]
	block := w.out[start:]
	le := binary.LittleEndian
	le.PutUint32(block[0:], uint32(zlen))
	le.PutUint32(block[4:], uint32(len(raw)))
	le.PutUint32(block[12:], uint32(lits))
	z := block[blockHeader:][:zlen]
	le.PutUint32(block[8:], blockSum(z, block[12:16], block[blockHeader+zlen:], Version))
	w.outPeak = max(w.outPeak, len(w.out))
	if len(w.out) >= outTarget {
		w.writeOut()
	}
	return raw[:0]
}

// trimAbove is the capacity past which a buffer of the writer is let go
// when recent flushes needed less than a quarter of it.
const trimAbove = 1 << 20

// decay updates *hw, the most recent flushes needed of a buffer, with
// peak, this flush's need: it decays by an eighth a flush (halving in
// about half a second) and never falls below peak.
func decay(hw *int, peak int) { *hw = max(peak, *hw-*hw/8) }

// trimmed returns b, or a new empty buffer of twice hw when b is over
// trimAbove and more than four times hw, what recent flushes needed of it
// (so that a buffer shrinks every few flushes while hw decays, not at
// every one): not nil, since the queue's spare becomes the caller's
// queue, which must not grow from nothing on the caller's thread.
func trimmed(b []byte, hw int) []byte {
	if cap(b) > trimAbove && cap(b) > 4*hw {
		return make([]byte, 0, 2*hw)
	}
	return b
}

// writeOut writes the blocks in w.out, and empties it. Blocks are written
// together, once they reach outTarget bytes (more with a large record's
// block) and at the end of each flush, because a write to a file costs
// more per call than per byte: a SMALL ledger's writer spent 0.44-0.54 us
// of thread CPU per exchange writing each 21 KiB block as it was made,
// 0.31-0.32 us writing them together (ext4). A process killed mid-run
// loses what it queued after its last flush, and the blocks of a flush
// under way not yet written.
//
// Blocks that would pass the process's file size limit are not written
// (the limit's write would raise SIGXFSZ: fileSizeLimit): the ledger ends
// at the last whole block within it, as at any other write error.
func (w *Writer) writeOut() {
	if len(w.out) > 0 && w.werr == nil {
		out, err := w.out, error(nil)
		if limit, ok := fileSizeLimit(); ok && w.size+int64(len(out)) > limit {
			out, err = wholeBlocks(out, limit-w.size), errFileSize(limit)
		}
		// A file deleted under the ledger (a clean-up job, its directory
		// removed) takes every write and keeps none where anyone can read
		// it, while it holds the disk's space until Close; one truncated
		// under it would be written on past its end, leaving a hole
		// before the blocks that makes the whole file unreadable. Either
		// way the ledger ends, before this write, and says so, as at a
		// failed write (an fstat a flush).
		if cerr := fileChanged(w.fd, w.size); cerr != nil {
			out, err = nil, cerr
		}
		if len(out) > 0 { // at the limit already: no write at all (a 0-byte one may still signal)
			n, werr := w.file.Write(out)
			w.size += int64(n)
			if werr != nil {
				err = werr
			}
		}
		if err != nil {
			w.werr = fmt.Errorf("ledger: writing %s: %w", w.file.Name(), err)
			w.mu.Lock()
			w.failed = w.werr.Error()
			w.mu.Unlock()
		}
	}
	w.out = w.out[:0]
}

// errDeleted is the error of a ledger whose file was deleted.
var errDeleted = errors.New("the file was deleted (or its directory was) while the ledger wrote it: what it wrote cannot be read back")

// errCut is the error of a ledger whose file was truncated under it.
var errCut = errors.New("the file was truncated by another program while the ledger wrote it (it keeps what the cut left)")

// wholeBlocks is the longest run of whole blocks at the start of out (as
// writeBlock made them) that takes at most room bytes.
func wholeBlocks(out []byte, room int64) []byte {
	n := 0
	for n+blockHeader <= len(out) {
		le := binary.LittleEndian
		next := n + blockHeader + int(le.Uint32(out[n:])) + int(le.Uint32(out[n+12:]))
		if int64(next) > room {
			break
		}
		n = next
	}
	return out[:n]
}
