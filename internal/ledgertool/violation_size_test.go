package ledgertool_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
	"github.com/tinylib/msgp/msgp"
)

// literalBlockLedger is a ledger file (format version 5) of one block
// holding the raw records raw and the literals lits.
func literalBlockLedger(t *testing.T, raw, lits []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	z := enc.EncodeAll(raw, nil)
	le := binary.LittleEndian
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	litLen := le.AppendUint32(nil, uint32(len(lits)))
	sum := crc32.Update(crc32.Checksum(z, castagnoli), castagnoli, litLen)
	sum = crc32.Update(sum, castagnoli, lits)
	sum = crc32.Update(sum, castagnoli, []byte{5, 0})
	file := append([]byte("plugrl-ledger\x00"), 5, 0)
	file = le.AppendUint32(le.AppendUint32(file, uint32(len(z))), uint32(len(raw)))
	file = le.AppendUint32(file, sum)
	return append(append(append(file, litLen...), z...), lits...)
}

// coded appends a record of kind (send or recv) whose message is m coded
// as patch (0: m whole; k > 0 with m empty: the k-th previous message of
// its kind again).
func coded(b []byte, kind string, patch int, m []byte) []byte {
	b = msgp.AppendMapHeader(b, 3)
	b = msgp.AppendString(b, "k")
	b = msgp.AppendString(b, kind)
	b = msgp.AppendString(b, "p")
	b = msgp.AppendInt(b, patch)
	b = msgp.AppendString(b, "m")
	return msgp.AppendBytes(b, m)
}

// TestViolationsFollowTheFile: a violation keeps a string, and the audit
// keeps MaxViolations of them; each was as long as what it quoted. An
// action whose env_ids are the infer's env_indices reversed, 2500 of
// them, named both lists whole in each violation (23 KB), and records of
// a few bytes repeat the exchange (a patch of no bytes repeats a
// message): a 29 KB file held 47 MiB of violations, and a file of about
// 1.5 MB would hold MaxViolations of them, 2.3 GB. A violation's message
// is bounded, and what it quotes is cut short.
func TestViolationsFollowTheFile(t *testing.T) {
	const envs, repeats = 2500, 2000
	idx, rev := make([]int64, envs), make([]int64, envs)
	for i := range idx {
		idx[i], rev[envs-1-i] = int64(i), int64(i)
	}
	whole := func(m *wire.Message) []byte { return m.AppendTo(nil) }
	var meta, in, act, fb wire.Message
	if err := wire.EncodeMetadata(&meta, &wire.Metadata{}); err != nil {
		t.Fatal(err)
	}
	if err := wire.EncodeInfer(&in, &wire.Infer{EnvIndices: idx, StepIDs: make([]int64, envs), Obs: &wire.Observation{}}); err != nil {
		t.Fatal(err)
	}
	if err := wire.EncodeAction(&act, rev, &wire.Array{DType: wire.Uint8, Shape: []int{1, envs, 1}, Data: make([]byte, envs)}); err != nil {
		t.Fatal(err)
	}
	if err := wire.EncodeFeedback(&fb, &wire.Feedback{EnvIndices: idx, StepIDs: make([]int64, envs), Obs: &wire.Observation{},
		Rewards: make([]float32, envs), Terminated: make([]bool, envs), Truncated: make([]bool, envs)}); err != nil {
		t.Fatal(err)
	}
	raw := msgp.AppendMapHeader(nil, 3)
	raw = msgp.AppendString(raw, "k")
	raw = msgp.AppendString(raw, "connect")
	raw = msgp.AppendString(raw, "c")
	raw = msgp.AppendInt(raw, 1)
	raw = msgp.AppendString(raw, "m")
	raw = msgp.AppendBytes(raw, whole(&meta))
	var lits []byte
	for i := range repeats + 1 {
		if i == 0 {
			raw = coded(raw, "send", 0, whole(&in))
			raw = coded(raw, "recv", 0, whole(&act))
			raw = coded(raw, "send", 0, whole(&fb))
		} else {
			raw = coded(raw, "send", 2, nil)
			raw = coded(raw, "recv", 1, nil)
			raw = coded(raw, "send", 2, nil)
		}
		lits = binary.LittleEndian.AppendUint64(lits, uint64(i)) // the recv's time
	}
	file := literalBlockLedger(t, raw, lits)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := ledgertool.NewAuditor()
	a.OnEpisode = func(ledgertool.EpisodeRow) {}
	if _, err := ledgertool.WalkReader(bytes.NewReader(file), func(ev *ledgertool.Event) error { a.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(a.Violations) != repeats+1 || a.Violations[0].Clause != "5.3" {
		t.Fatalf("%d violations, the first %v; want %d of SPEC 5.3", len(a.Violations), a.Violations[0], repeats+1)
	}
	held := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("a %d-byte ledger: %d violations, each %d bytes long; %d MiB held", len(file), len(a.Violations), len(a.Violations[0].Msg), held>>20)
	if n := len(a.Violations[0].Msg); n > 4096 {
		t.Errorf("a violation of %d bytes: %.200s...", n, a.Violations[0].Msg)
	}
	if held > 16<<20 {
		t.Errorf("a %d-byte ledger's audit holds %d MiB", len(file), held>>20)
	}
	runtime.KeepAlive(a)
}

// TestViolationQuotingALongKey: a decoding error quotes the key it is
// about, of any length; the violation that names it is bounded.
func TestViolationQuotingALongKey(t *testing.T) {
	var fb wire.Message
	if err := wire.EncodeFeedback(&fb, &wire.Feedback{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &wire.Observation{},
		Rewards: []float32{1}, Terminated: []bool{false}, Truncated: []bool{false}}); err != nil {
		t.Fatal(err)
	}
	long := bytes.Repeat([]byte("k"), 60000)
	key := binary.BigEndian.AppendUint32([]byte{0xdb}, uint32(len(long))) // msgpack str32
	msg := bytes.Replace(fb.AppendTo(nil), []byte("\xa4info"), append(key, long...), 1)
	_, err := wire.DecodeFeedback(msg)
	if err == nil {
		t.Fatal("a feedback with an unknown data key decodes")
	}
	s := newScript(nil)
	s.add("send", &ledgertool.Event{DecodeErr: err})
	vs := s.a.Violations
	if len(vs) != 1 || vs[0].Clause != "5" || len(vs[0].Msg) > 4096 {
		t.Fatalf("violations %d, the first of SPEC %s and %d bytes; want one of SPEC 5, at most %d bytes (its error is %d)",
			len(vs), vs[0].Clause, len(vs[0].Msg), 4096, len(err.Error()))
	}
}
