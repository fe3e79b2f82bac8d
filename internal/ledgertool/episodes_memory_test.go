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
)

// oneBlockLedger is a ledger file (format version 5) of one block holding
// the raw records raw, no literals: what a hostile file can hold.
func oneBlockLedger(t *testing.T, raw []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	z := enc.EncodeAll(raw, nil)
	le := binary.LittleEndian
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	litLen := le.AppendUint32(nil, 0)
	sum := crc32.Update(crc32.Checksum(z, castagnoli), castagnoli, litLen)
	sum = crc32.Update(sum, castagnoli, []byte{5, 0})
	file := append([]byte("plugrl-ledger\x00"), 5, 0)
	file = le.AppendUint32(le.AppendUint32(file, uint32(len(z))), uint32(len(raw)))
	file = le.AppendUint32(file, sum)
	return append(append(file, litLen...), z...)
}

// sendRecord appends a send record: message m patched against the last
// send (patch 1, m empty: the last send again) or whole (patch 0).
func sendRecord(b []byte, patch int, m []byte) []byte { return coded(b, "send", patch, m) }

// TestEpisodesFollowTheCaller: one feedback that ends 512 episodes, then
// thousands of records of a few bytes that repeat it, each ending 512 more.
// An Auditor with OnEpisode keeps none of them (summary, audit and
// episodes stream them); one without keeps MaxEpisodes and counts the
// rest. Before, every one was kept: a 1 KB file held 10 million rows.
func TestEpisodesFollowTheCaller(t *testing.T) {
	const envs, repeats = 512, 3000
	idx, term := make([]int64, envs), make([]bool, envs)
	for i := range idx {
		idx[i], term[i] = int64(i), true
	}
	var m wire.Message
	if err := wire.EncodeFeedback(&m, &wire.Feedback{EnvIndices: idx, StepIDs: make([]int64, envs), Obs: &wire.Observation{},
		Rewards: make([]float32, envs), Terminated: term, Truncated: make([]bool, envs)}); err != nil {
		t.Fatal(err)
	}
	fb := make([]byte, m.Len())
	m.CopyTo(fb)
	raw := sendRecord(nil, 0, fb)
	for range repeats {
		raw = sendRecord(raw, 1, nil)
	}
	file := oneBlockLedger(t, raw)
	const total = envs * (repeats + 1)
	if total <= ledgertool.MaxEpisodes {
		t.Fatalf("the test needs more than MaxEpisodes (%d) episodes, has %d", ledgertool.MaxEpisodes, total)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	streamed, s := ledgertool.NewAuditor(), ledgertool.NewSummary()
	streamed.OnEpisode = s.AddEpisode
	if _, err := ledgertool.WalkReader(bytes.NewReader(file), func(ev *ledgertool.Event) error { streamed.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if streamed.EpisodeCount != total || s.Episodes != total || len(streamed.Episodes) != 0 || len(s.LastEpisodes) != 10 {
		t.Fatalf("streamed: %d episodes counted, %d summarised, %d kept, %d last; want %d, %d, 0, 10",
			streamed.EpisodeCount, s.Episodes, len(streamed.Episodes), len(s.LastEpisodes), total, total)
	}
	// What stays is the violations (every repeat breaks 4.2), which
	// MaxViolations bounds: about 12 MiB; the 1.5 million rows were 70.
	if held := int64(after.HeapInuse) - int64(before.HeapInuse); held > 32<<20 {
		t.Errorf("a %d-byte ledger of %d episodes, streamed, holds %d MiB after the walk", len(file), total, held>>20)
	}
	runtime.KeepAlive(streamed)

	kept := ledgertool.NewAuditor()
	if _, err := ledgertool.WalkReader(bytes.NewReader(file), func(ev *ledgertool.Event) error { kept.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(kept.Episodes) != ledgertool.MaxEpisodes || kept.EpisodesUnkept != total-ledgertool.MaxEpisodes || kept.EpisodeCount != total {
		t.Fatalf("kept: %d episodes, %d unkept, %d counted; want %d, %d, %d",
			len(kept.Episodes), kept.EpisodesUnkept, kept.EpisodeCount, ledgertool.MaxEpisodes, total-ledgertool.MaxEpisodes, total)
	}
}
