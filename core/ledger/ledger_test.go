package ledger_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/maskcopy"
	"github.com/plugrl/libplugrl/core/wire"
)

// request builds an infer of two envs with an image and a state array.
func request() (*wire.Infer, []byte, []byte) {
	img := make([]byte, 2*4*4*3)
	for i := range img {
		img[i] = byte(i * 7)
	}
	state := []float64{1, 2, 3, 4, 5, 6}
	obs := &wire.Observation{
		Images: []wire.NamedArray{{Name: "cam", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 4, 4, 3}, Data: img}}},
		States: []wire.NamedArray{{Name: "q", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 3}, Data: wire.BytesOf(state)}}},
		Text:   []string{"a", "b"},
	}
	return &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{0, 0}, Obs: obs}, img, wire.BytesOf(state)
}

// encodedRequest is request() encoded as an infer.
func encodedRequest(t *testing.T) (*wire.Message, *wire.Infer, []byte, []byte) {
	t.Helper()
	in, img, state := request()
	m := new(wire.Message)
	if err := wire.EncodeInfer(m, in); err != nil {
		t.Fatal(err)
	}
	return m, in, img, state
}

// checkDigests checks the digests recorded for request()'s two rows of
// image and of state, in message order.
func checkDigests(t *testing.T, what string, got []uint32, img, state []byte) {
	t.Helper()
	want := []uint32{
		ledger.RowDigest(img[:48]), ledger.RowDigest(img[48:]),
		ledger.RowDigest(state[:24]), ledger.RowDigest(state[24:]),
	}
	if len(got) != len(want) {
		t.Fatalf("%s: digests %x, want %x", what, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: digest %d is %x, want %x", what, i, got[i], want[i])
		}
	}
}

func readAll(t *testing.T, path string) ([]ledger.Record, [][]byte, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ledger.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []ledger.Record
	var msgs [][]byte
	for {
		rec, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return recs, msgs, err
		}
		var m []byte
		if rec.Kind == ledger.KindSend {
			if m, err = r.Message(rec); err != nil {
				t.Fatal(err)
			}
		}
		c := *rec
		c.Msg = append([]byte(nil), rec.Msg...)
		recs = append(recs, c)
		msgs = append(msgs, append([]byte(nil), m...))
	}
}

func TestRoundTrip(t *testing.T) {
	for _, level := range []ledger.Level{ledger.Digest, ledger.Full} {
		t.Run(level.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l")
			w, err := ledger.Create(path, ledger.Options{Level: level, Version: "v"})
			if err != nil {
				t.Fatal(err)
			}
			m, in, img, state := encodedRequest(t)
			w.Connected("ws://x", "127.0.0.1:1", []byte("meta"))
			w.Sent(m, in.Obs)
			w.Received([]byte("action"))
			w.Interrupted()
			w.Reconnecting("lost")
			w.Closed("server", 1001, "plugrl-server-resync", "err", []int64{3, 4}, true)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil { // twice is fine
				t.Fatal(err)
			}
			recs, msgs, err := readAll(t, path)
			if err != nil {
				t.Fatal(err)
			}
			kinds := ""
			for _, r := range recs {
				kinds += r.Kind + " "
			}
			if kinds != "open connect send recv interrupt reconnect close end " {
				t.Fatalf("kinds: %s", kinds)
			}
			if recs[0].Level != level.String() || recs[0].Version != "v" || recs[0].PID != int64(os.Getpid()) {
				t.Fatalf("open record: %+v", recs[0])
			}
			if string(recs[1].Msg) != "meta" || recs[1].Conn != 1 || string(recs[3].Msg) != "action" {
				t.Fatalf("connect/recv: %+v %+v", recs[1], recs[3])
			}
			c := recs[6]
			if c.By != "server" || c.Code != 1001 || c.Reason != "plugrl-server-resync" || len(c.Dropped) != 2 || c.Dropped[1] != 4 || c.Unsent != 1 {
				t.Fatalf("close record: %+v", c)
			}
			want := m.AppendTo(nil)
			got := msgs[2]
			send := recs[2]
			if send.Len != int64(len(want)) || len(got) != len(want) { // a full send's length is its message's
				t.Fatalf("send: len %d, rebuilt %d, want %d", send.Len, len(got), len(want))
			}
			if level == ledger.Full {
				if !bytes.Equal(got, want) || len(send.Cuts) != 0 {
					t.Fatal("a full ledger changed the message")
				}
				return
			}
			// Digest: the observation data is cut out, the rest is kept.
			if len(send.Msg) != len(want)-len(img)-len(state) {
				t.Fatalf("kept %d bytes, want %d", len(send.Msg), len(want)-len(img)-len(state))
			}
			checkDigests(t, "Sent", send.Digests, img, state)
			if _, err := wire.DecodeInfer(got); err != nil {
				t.Fatalf("the rebuilt message does not decode: %v", err)
			}
		})
	}
}

// TestMessagesRoundTrip records a run of exchanges at both levels, as an
// env loop makes them (infer and feedback alternating, step ids, rewards,
// images and actions changing a few bytes at a time or all at once), with
// messages larger than the patch history keeps among them (at digest
// level, a text observation's kept bytes; at full level, images), and
// checks that the reader rebuilds every message sent and received: the
// patch coding loses nothing.
func TestMessagesRoundTrip(t *testing.T) {
	for _, level := range []ledger.Level{ledger.Digest, ledger.Full} {
		t.Run(level.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l")
			w, err := ledger.Create(path, ledger.Options{Level: level})
			if err != nil {
				t.Fatal(err)
			}
			want := recordLoop(t, w, level)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			checkMessages(t, path, want)
		})
	}
}

// TestManyLedgersAtOnce: ledgers recorded at once from many goroutines,
// all compressed by the process's one encoder (with a short flush
// interval, so that their flushes meet), each read back message for
// message, its own first (a writer on CPUs of its own has its own encoder:
// TestWriterCPUs).
func TestManyLedgersAtOnce(t *testing.T) {
	const n = 8
	dir := t.TempDir()
	paths := make([]string, n)
	wants := make([][][]byte, n)
	var wg sync.WaitGroup
	defer wg.Wait() // before TempDir's cleanup, if the test ends early
	var first any
	for i := range n {
		paths[i] = filepath.Join(dir, fmt.Sprint(i))
		w, err := ledger.Create(paths[i], ledger.Options{Level: ledger.Digest, FlushInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if enc := ledger.EncoderOf(w); i > 0 && enc != first {
			t.Fatalf("ledger %d has an encoder of its own; want the process's one", i)
		} else if i == 0 {
			first = enc
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if err := w.Close(); err != nil {
					t.Error(err)
				}
			}()
			own := []byte(fmt.Sprintf("ledger %d", i)) // so that no ledger reads back as another
			w.Received(own)
			wants[i] = append([][]byte{own}, recordLoop(t, w, ledger.Digest)...)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := range n {
		checkMessages(t, paths[i], wants[i])
	}
}

// checkMessages checks that the ledger at path reads back as the messages
// want, sends and recvs in order.
func checkMessages(t *testing.T, path string, want [][]byte) {
	t.Helper()
	recs, msgs, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for i, r := range recs {
		switch r.Kind {
		case ledger.KindSend:
			got = append(got, msgs[i])
		case ledger.KindRecv:
			got = append(got, r.Msg)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages read back, %d recorded", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("message %d (%d bytes) reads back as %d other bytes", i, len(want[i]), len(got[i]))
		}
	}
}

// recordLoop records into w the exchanges of TestMessagesRoundTrip and
// returns each message as the reader rebuilds it: each send (with zeros
// for the observation data at digest level) and each recv.
func recordLoop(t *testing.T, w *ledger.Writer, level ledger.Level) [][]byte {
	var want [][]byte // each send as the reader rebuilds it, each recv
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 40; i++ {
		in, img, _ := request()
		in.StepIDs = []int64{int64(i), int64(i / 3)}
		img[i%len(img)] = byte(i)
		if i%8 >= 5 { // 2 x 9000 characters of <U text: over 64 KiB
			in.Obs.Text = []string{strings.Repeat("x", 9000), strings.Repeat("y", i)}
		}
		if level == ledger.Full && i%8 == 3 { // images over 64 KiB
			big := make([]byte, 2*120*100*3)
			for k := range big {
				big[k] = byte(rng.Uint32())
			}
			in.Obs.Images[0].Array = wire.Array{DType: wire.Uint8, Shape: []int{2, 120, 100, 3}, Data: big}
		}
		var m, fm wire.Message
		if err := wire.EncodeInfer(&m, in); err != nil {
			t.Fatal(err)
		}
		fb := &wire.Feedback{EnvIndices: in.EnvIndices, StepIDs: in.StepIDs, Obs: in.Obs,
			Rewards: []float32{float32(i), 1}, Terminated: []bool{i%5 == 4, false}, Truncated: []bool{false, false}}
		if err := wire.EncodeFeedback(&fm, fb); err != nil {
			t.Fatal(err)
		}
		action := make([]byte, 300)
		for k := 100; i%4 != 0 && k < 100+i*5; k++ {
			action[k] = byte(rng.Uint32())
		}
		w.Sent(&m, in.Obs)
		w.Received(action)
		w.Sent(&fm, in.Obs)
		want = append(want, rebuilt(&m, in.Obs, level), action, rebuilt(&fm, in.Obs, level))
	}
	return want
}

// rebuilt is m as a reader rebuilds it from a ledger at level: at digest
// level, with zeros for the observation data.
func rebuilt(m *wire.Message, obs *wire.Observation, level ledger.Level) []byte {
	var b []byte
	for i := 0; i < m.Segments(); i++ {
		seg := m.Segment(i)
		if _, ok := m.ObsRowBytes(i, obs); ok && level == ledger.Digest {
			seg = make([]byte, len(seg))
		}
		b = append(b, seg...)
	}
	return b
}

// TestDigestedWhileCopied: digests computed from the pieces a connection
// shows a Digester as it copies (any piece sizes), or from the masked
// copies it has the Digester make (MaskCopy), are the rows' digests, and
// those copies are masked right.
func TestDigestedWhileCopied(t *testing.T) {
	for _, tc := range []struct {
		piece   int
		copying bool
	}{{1, false}, {7, false}, {48, false}, {1 << 20, false}, {1, true}, {7, true}, {48, true}, {1 << 20, true}} {
		piece := tc.piece
		path := filepath.Join(t.TempDir(), "l")
		w, err := ledger.Create(path, ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, in, img, state := encodedRequest(t)
		d := w.BeginSend(m, in.Obs)
		mask := [4]byte{0x12, 0x34, 0x56, 0x78}
		masked, pos := make([]byte, m.Len()), 0
		for i := 0; i < m.Segments(); i++ {
			for b := m.Segment(i); len(b) > 0; {
				n := min(piece, len(b))
				if tc.copying {
					d.MaskCopy(i, masked[pos:pos+n], b[:n], maskcopy.Key(mask, pos))
				} else {
					d.Copied(i, b[:n])
				}
				b, pos = b[n:], pos+n
			}
		}
		if want := m.AppendTo(nil); tc.copying {
			ws.Cipher(want, mask, 0)
			if !bytes.Equal(masked, want) {
				t.Fatalf("pieces of %d: MaskCopy's copies are not the masked message", piece)
			}
		}
		w.Sent(m, in.Obs)
		w.Close()
		recs, _, err := readAll(t, path)
		if err != nil {
			t.Fatal(err)
		}
		checkDigests(t, fmt.Sprintf("pieces of %d, copying %v", piece, tc.copying), recs[1].Digests, img, state)
	}
	if (*ledger.Writer)(nil).BeginSend(nil, nil) != nil {
		t.Fatal("a nil writer has a digester")
	}
}

// fiveBlocks writes a ledger of five blocks, a received message each, and
// returns its bytes and its records.
func fiveBlocks(t *testing.T) (full []byte, whole []ledger.Record) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		w.Received(bytes.Repeat([]byte{byte(i)}, 100))
		time.Sleep(5 * time.Millisecond) // a block each
	}
	w.Close()
	if full, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if whole, _, err = readAll(t, path); err != nil {
		t.Fatal(err)
	}
	return full, whole
}

// TestTruncated cuts a ledger at every length: the reader returns the
// records of the whole blocks before the cut, then ErrTruncated, and never
// fails otherwise.
func TestTruncated(t *testing.T) {
	full, whole := fiveBlocks(t)
	for n := 16; n < len(full); n++ {
		cut := filepath.Join(t.TempDir(), "cut")
		os.WriteFile(cut, full[:n], 0o644)
		recs, _, err := readAll(t, cut)
		if err != nil && !errors.Is(err, ledger.ErrTruncated) {
			t.Fatalf("cut at %d: %v", n, err)
		}
		if len(recs) > len(whole) {
			t.Fatalf("cut at %d: %d records, the whole file has %d", n, len(recs), len(whole))
		}
		for i := range recs {
			if recs[i].Kind != whole[i].Kind || !bytes.Equal(recs[i].Msg, whole[i].Msg) {
				t.Fatalf("cut at %d: record %d differs", n, i)
			}
		}
	}
}

// TestQueueFull: a queue that cannot take a record drops it and says so,
// in a lost record timed before the end record after it.
func TestQueueFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	warnings := 0
	var now atomic.Int64 // a clock that moves 1 us a reading
	w, err := ledger.Create(path, ledger.Options{QueueBytes: 4096, FlushInterval: 250 * time.Millisecond,
		Warn: func(string) { warnings++ }, Clock: func() time.Duration { return time.Duration(now.Add(1000)) }})
	if err != nil {
		t.Fatal(err)
	}
	release := ledger.HoldFlushes(w) // no flush (the ticker's) between the records
	for i := 0; i < 100; i++ {
		// Each message differs from the last in every byte, so each is
		// queued whole, a 1013-byte frame (not as its changed span).
		w.Received(bytes.Repeat([]byte{byte(i + 1)}, 1000))
	}
	release()
	if warnings != 1 {
		t.Fatalf("warned %d times of a full queue, want once", warnings)
	}
	w.Close()
	recs, _, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	kept, lost := 0, int64(0)
	for _, r := range recs {
		switch r.Kind {
		case ledger.KindRecv:
			kept++
		case ledger.KindLost:
			lost += r.Count
		}
	}
	if kept != 3 || lost != 97 {
		t.Fatalf("kept %d, lost %d: want 3 kept (the open record and three 1013-byte frames fill the 4096-byte queue), 97 lost", kept, lost)
	}
	if k := recs[len(recs)-1].Kind; k != ledger.KindEnd {
		t.Fatalf("the last record is %q; want end, after the lost record", k)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Time < recs[i-1].Time {
			t.Fatalf("record %d (%s) at %d ns, before record %d (%s) at %d", i, recs[i].Kind, recs[i].Time, i-1, recs[i-1].Kind, recs[i-1].Time)
		}
	}
}

// TestRecordLargerThanTheQueue: a record that no queue of its size can
// ever hold (a full ledger of large camera images: a message over the
// 8 MiB queue) is dropped every time, whatever the rate; Warn says so,
// instead of blaming a writer that cannot keep up with the rate, which a
// slower loop would not help.
func TestRecordLargerThanTheQueue(t *testing.T) {
	var warnings []string
	w, err := ledger.Create(filepath.Join(t.TempDir(), "l"), ledger.Options{QueueBytes: 4096,
		Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Received(bytes.Repeat([]byte{1}, 5000))
	if len(warnings) != 1 || !strings.Contains(warnings[0], "larger than the whole") || strings.Contains(warnings[0], "rate") {
		t.Fatalf("warnings: %q; want one saying the record is larger than the queue", warnings)
	}
	w.Received(bytes.Repeat([]byte{2}, 5000))
	if len(warnings) != 1 {
		t.Fatalf("warnings: %q; want the first only", warnings)
	}
	release := ledger.HoldFlushes(w)
	for i := range 8 { // more than the queue holds between two flushes
		w.Received(bytes.Repeat([]byte{byte(i + 3)}, 1000))
	}
	release()
	if len(warnings) != 2 || !strings.Contains(warnings[1], "queue is full") {
		t.Fatalf("warnings: %q; want a second, saying the queue is full", warnings)
	}
}

// TestConnectionsCountedAcrossAGap: a connect record the full queue
// dropped still counts its connection, so that the records after the gap
// name their connections by their real numbers, not by the dropped one's
// predecessor's (a close record of connection 2 saying 1, which then has
// two).
func TestConnectionsCountedAcrossAGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{QueueBytes: 4096, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := ledger.HoldFlushes(w)
	w.Connected("ws://a", "", []byte("meta"))
	w.Closed("server", 1000, "", "", nil, false)
	w.Received(bytes.Repeat([]byte{1}, 3500))                // the queue is full now
	w.Connected("ws://a", "", bytes.Repeat([]byte{2}, 1000)) // connection 2: dropped
	release()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if recs, _, err := readAll(t, path); err == nil && len(recs) >= 5 {
			break // the queue was taken: the gap is recorded
		}
		if time.Now().After(deadline) {
			t.Fatal("the queue was not flushed")
		}
	}
	w.Closed("local", 0, "", "lost", nil, false) // connection 2's end
	w.Connected("ws://a", "", []byte("meta"))    // connection 3
	w.Closed("client", 1000, "", "", nil, false)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Kind == ledger.KindConnect || r.Kind == ledger.KindClose {
			got = append(got, fmt.Sprintf("%s %d", r.Kind, r.Conn))
		}
	}
	want := []string{"connect 1", "close 1", "close 2", "connect 3", "close 3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("connections recorded as %q; want %q", got, want)
	}
}

// TestFlushedWhileOpen: records reach the file within the flush interval,
// without Close.
func TestFlushedWhileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Received([]byte("x"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		recs, _, err := readAll(t, path)
		if err == nil && len(recs) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("records not in the file 5 s later: %v, %v", recs, err)
		}
	}
}

// TestFileDeleted: a ledger whose file is deleted while it records (a
// clean-up job, its directory removed) ends, says so once, and Close
// returns why; before, it went on writing into the deleted file, which
// nobody could read and which held its disk space until Close, and Close
// returned nil.
func TestFileDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "l")
	warned := make(chan string, 8)
	w, err := ledger.Create(path, ledger.Options{FlushInterval: 5 * time.Millisecond,
		Warn: func(m string) { warned <- m }})
	if err != nil {
		t.Fatal(err)
	}
	w.Received([]byte("before"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// The next flush finds the file gone; the records after it are
	// refused, and the first refused one says why.
	if said := warningAfter(w, warned); !strings.Contains(said, "deleted") {
		t.Fatalf("warned %q; want a warning that the file was deleted", said)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("Close returned %v; want the deleted file's error", err)
	}
}

// warningAfter records on w until its Warn callback (which sends to
// warned) says something, for at most 5 s, and returns what it said ("" if
// nothing): a ledger that ended tells the next record's call.
func warningAfter(w *ledger.Writer, warned <-chan string) string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		w.Received([]byte("after"))
		select {
		case said := <-warned:
			return said
		case <-time.After(10 * time.Millisecond):
		}
	}
	return ""
}

// TestFileTruncated: a ledger whose file is truncated under it while it
// records (logrotate's copytruncate, or `: > file` to free a full disk)
// ends, says so once, and Close returns why, leaving what the truncation
// left readable. Before, it wrote on at its own offset: the file became a
// hole of zeros followed by blocks, which read as "not a plugrl ledger"
// (cut to 0) or as damaged in the middle (cut inside), hiding every
// record, and nothing said so.
func TestFileTruncated(t *testing.T) {
	for _, cut := range []string{"empty", "half"} {
		t.Run(cut, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l")
			warned := make(chan string, 8)
			w, err := ledger.Create(path, ledger.Options{FlushInterval: 5 * time.Millisecond,
				Warn: func(m string) { warned <- m }})
			if err != nil {
				t.Fatal(err)
			}
			var size int64
			for i := 0; size < 2048; i++ {
				w.Received([]byte{byte(i), byte(i >> 8), 1, 2, 3})
				time.Sleep(time.Millisecond)
				if i > 5000 {
					t.Fatal("no blocks written")
				}
				if fi, err := os.Stat(path); err == nil {
					size = fi.Size()
				}
			}
			to := int64(0)
			if cut == "half" {
				to = size / 2
			}
			if err := os.Truncate(path, to); err != nil {
				t.Fatal(err)
			}
			if said := warningAfter(w, warned); !strings.Contains(said, "truncated") {
				t.Fatalf("warned %q; want a warning that the file was truncated", said)
			}
			if err := w.Close(); err == nil || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("Close returned %v; want the truncated file's error", err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != to {
				t.Fatalf("the file holds %d bytes after it was cut to %d: the ledger wrote on past the cut", fi.Size(), to)
			}
			if to > 0 {
				recs, _, err := readAll(t, path)
				if errors.Is(err, ledger.ErrDamaged) || len(recs) == 0 || recs[0].Kind != ledger.KindOpen {
					t.Fatalf("what the cut left reads as %d records, %v; want its records up to the cut", len(recs), err)
				}
			}
		})
	}
}

const childEnv = "PLUGRL_LEDGER_TEST_CHILD"

// TestKilled kills a writer with SIGKILL mid-run and reads what it left.
func TestKilled(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		w, err := ledger.Create(path, ledger.Options{})
		if err != nil {
			os.Exit(3)
		}
		for i := 0; ; i++ {
			w.Received([]byte{byte(i), byte(i >> 8)})
			time.Sleep(20 * time.Microsecond)
		}
	}
	path := filepath.Join(t.TempDir(), "killed")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilled$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Let it write a few blocks, then kill it wherever it is.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 4096 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child wrote no blocks")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	recs, _, err := readAll(t, path)
	if err != nil && !errors.Is(err, ledger.ErrTruncated) {
		t.Fatal(err)
	}
	if len(recs) < 100 || recs[0].Kind != ledger.KindOpen || recs[len(recs)-1].Kind == ledger.KindEnd {
		t.Fatalf("%d records read back (first %v)", len(recs), recs[0].Kind)
	}
	for i, r := range recs[1:] {
		if r.Kind != ledger.KindRecv || r.Msg[0] != byte(i) {
			t.Fatalf("record %d: %s %v: out of order", i+1, r.Kind, r.Msg)
		}
	}
	t.Logf("%d records read back from a ledger killed mid-run (truncated: %v)", len(recs), err != nil)
}

// TestResolve: a directory gets a file per ledger, a file used twice gets
// a numbered sibling: no ledger truncates another of this process's.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	a, b := ledger.Resolve(dir), ledger.Resolve(dir)
	if a == b || filepath.Dir(a) != dir || filepath.Dir(b) != dir {
		t.Fatalf("a directory resolved to %s and %s", a, b)
	}
	file := filepath.Join(dir, "run.ledger")
	if got := ledger.Resolve(file); got != file {
		t.Fatalf("first use of %s resolved to %s", file, got)
	}
	if got := ledger.Resolve(file); got != file+".2" {
		t.Fatalf("second use of %s resolved to %s", file, got)
	}
	w, err := ledger.Create(file, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Path() != file+".3" {
		t.Fatalf("Create wrote to %s", w.Path())
	}
}

// TestInventedNameSymlink: a name the library makes up (path.2, ...) that
// is a symlink, as one planted in a shared directory would be, is skipped
// like a name another ledger holds, never followed; the path the caller
// gave may be a symlink.
func TestInventedNameSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "run.ledger")
	if err := os.Symlink(victim, file+".2"); err != nil {
		t.Fatal(err)
	}
	first, err := ledger.Create(file, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := ledger.Create(file, ledger.Options{}) // file is first's: the next name
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if second.Path() != file+".3" {
		t.Fatalf("the second ledger went to %s; want %s.3 (%s.2 is a planted symlink)", second.Path(), file, file)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me" {
		t.Fatalf("the symlink's target now holds %q (%v)", b, err)
	}
}

// TestCreateFails: a ledger that cannot be written says so at Create, with
// the path, instead of recording nowhere.
func TestCreateFails(t *testing.T) {
	for _, path := range []string{"/dev/full", filepath.Join(t.TempDir(), "no-such-dir", "l")} {
		if _, err := os.Stat(filepath.Dir(path)); path == "/dev/full" && err != nil {
			continue
		}
		w, err := ledger.Create(path, ledger.Options{})
		if err == nil {
			w.Close()
			t.Fatalf("Create(%s) succeeded", path)
		}
		t.Logf("Create(%s): %v", path, err)
	}
}

// TestOtherVersions: a ledger of format version 1 (CRC-32C row digests) or
// of an unknown version is refused at NewReader, saying which it is.
func TestOtherVersions(t *testing.T) {
	for _, tc := range []struct {
		version uint16
		want    string
	}{{0, "format version 0, this reader knows"}, {1, "format version 1 (CRC-32C"}, {ledger.Version + 1, fmt.Sprintf("format version %d, this reader knows versions 2 to %d", ledger.Version+1, ledger.Version)}} {
		head := append([]byte("plugrl-ledger\x00"), byte(tc.version), byte(tc.version>>8))
		_, err := ledger.NewReader(bytes.NewReader(head))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("version %d: NewReader error %v, want one containing %q", tc.version, err, tc.want)
		}
	}
}

// TestReadsOlderVersions: ledgers of format versions 2 (before the
// literals moved to the end of each block; written by commit b48fbdd), 3
// (before same-layout sends were recorded by their slot; commit 55216d7)
// and 4 (times in every record; commit fe9d756), of recordLoop at digest
// level, read back message for message (recordLoop has no same-layout
// sends: TestReadsVersion4SameLayout reads those, and their times).
func TestReadsOlderVersions(t *testing.T) {
	for _, version := range []int{2, 3, 4} {
		path := filepath.Join("testdata", fmt.Sprintf("v%d-digest.ledger", version))
		head, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if v := int(head[14]) | int(head[15])<<8; v != version {
			t.Fatalf("%s is format version %d, want %d", path, v, version)
		}
		w, err := ledger.Create(filepath.Join(t.TempDir(), "l"), ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := recordLoop(t, w, ledger.Digest) // the messages; this ledger is not read
		w.Close()
		checkMessages(t, path, want)
	}
}

// TestEndRecordCPU: the end record is the last, after every record the
// caller made, and carries the background writer's CPU time (Linux): more
// than nothing once it has flushed records, less than the time it ran.
func TestEndRecordCPU(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 20; i++ {
		recordLoop(t, w, ledger.Digest)
		time.Sleep(2 * time.Millisecond) // a background flush takes them
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ran := time.Since(start)
	recs, _, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	end := recs[len(recs)-1]
	if end.Kind != ledger.KindEnd {
		t.Fatalf("the last record is %q; want end", end.Kind)
	}
	for _, r := range recs[:len(recs)-1] {
		if r.Kind == ledger.KindEnd {
			t.Fatal("an end record before the last")
		}
	}
	if runtime.GOOS != "linux" {
		if end.CPU != 0 {
			t.Fatalf("cpu %d off Linux; want 0 (not measured)", end.CPU)
		}
		return
	}
	if end.CPU <= 0 || time.Duration(end.CPU) > ran {
		t.Fatalf("the end record's cpu is %v; want more than 0 and at most the %v the writer ran", time.Duration(end.CPU), ran)
	}
}

// TestCloseWhileRecording: Close from another goroutine while the client's
// goroutine records: the ledger holds the records taken before Close, in
// order and none missing, then the end record, last; a second Close
// returns only once the file is closed.
func TestCloseWhileRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The client's goroutine records up to 50,000 small messages (under 1
	// MiB queued: none is lost, however slow the writer) until stopped.
	const most = 50_000
	var made atomic.Int64
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for n := 0; n < most; n++ {
			select {
			case <-stop:
				return
			default:
			}
			w.Received(binary.LittleEndian.AppendUint32(nil, uint32(n)))
			made.Add(1)
		}
	}()
	for made.Load() < 1000 { // Close while it records
		time.Sleep(100 * time.Microsecond)
	}
	// With flushes held, neither Close may return: the file is not whole.
	release := sync.OnceFunc(ledger.HoldFlushes(w))
	defer release()
	closed := make(chan error, 2)
	go func() { closed <- w.Close() }()
	go func() { closed <- w.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("a Close returned (%v) before the last flush could run", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-closed; err != nil { // either: the file is whole once it returns
		t.Fatal(err)
	}
	close(stop)
	<-stopped
	recs, _, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if k := recs[len(recs)-1].Kind; k != ledger.KindEnd {
		t.Fatalf("the last record is %q; want end", k)
	}
	next := uint32(0)
	for _, r := range recs[:len(recs)-1] {
		switch r.Kind {
		case ledger.KindRecv:
			if got := binary.LittleEndian.Uint32(r.Msg); got != next {
				t.Fatalf("recv %d where %d was next: records missing or out of order", got, next)
			}
			next++
		case ledger.KindLost, ledger.KindEnd:
			t.Fatalf("a %s record before the last", r.Kind)
		}
	}
	if next < 1000 || int64(next) > made.Load() {
		t.Fatalf("%d records of the %d calls made; want the 1000 made before Close at least, and no more than were made", next, made.Load())
	}
}

// TestManyCutsReadBack: an infer of scattered envs (every other row of
// the observation) is one cut per env; a digest ledger of 10,000 of them
// reads back (a bound of one cut per array refused it).
func TestManyCutsReadBack(t *testing.T) {
	const rows = 20000
	state := make([]byte, rows*4)
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Float32, Shape: []int{rows, 1}, Data: state}}}}
	var envs, steps []int64
	var pick []int
	for r := 0; r < rows; r += 2 {
		envs, steps, pick = append(envs, int64(r)), append(steps, 0), append(pick, r)
	}
	var m wire.Message
	if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: envs, StepIDs: steps, Obs: obs, ObsRows: pick}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: ledger.Digest})
	if err != nil {
		t.Fatal(err)
	}
	w.Sent(&m, obs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _, err := readAll(t, path) // it rebuilds each send's message too
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	for _, rec := range recs {
		if rec.Kind == ledger.KindSend {
			if len(rec.Cuts) != rows/2 {
				t.Fatalf("%d cuts, want %d", len(rec.Cuts), rows/2)
			}
			return
		}
	}
	t.Fatal("no send record read back")
}

// TestDamagedInTheMiddle: a block that fails its checksum with more of
// the file after it is damage, not a writer stopped mid-block: the reader
// says ErrDamaged (which is also ErrTruncated), where it said truncated
// and a caller took the records before it for the whole ledger. The same
// damage in the last block is a truncation still.
func TestDamagedInTheMiddle(t *testing.T) {
	full, whole := fiveBlocks(t)
	for _, c := range []struct {
		at      int // the byte flipped
		damaged bool
	}{{16 + 20, true}, {len(full) - 3, false}} {
		b := append([]byte(nil), full...)
		b[c.at] ^= 0x40
		bad := filepath.Join(t.TempDir(), "bad")
		os.WriteFile(bad, b, 0o644)
		recs, _, err := readAll(t, bad)
		if !errors.Is(err, ledger.ErrTruncated) || errors.Is(err, ledger.ErrDamaged) != c.damaged {
			t.Fatalf("byte %d of %d flipped: %v; want ErrTruncated, and ErrDamaged %v", c.at, len(full), err, c.damaged)
		}
		if len(recs) >= len(whole) {
			t.Fatalf("byte %d flipped: %d records of %d read", c.at, len(recs), len(whole))
		}
		t.Logf("byte %d flipped: %d of %d records: %v", c.at, len(recs), len(whole), err)
	}
}
