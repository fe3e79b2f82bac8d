package ledgertool_test

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// TestDumpNonFinite: a server's action with NaN and infinities in it, and
// a client's NaN reward, are recorded as they were, and dump writes every
// record as JSON, with those values as "NaN", "Inf" and "-Inf"
// (encoding/json refuses them: the dump used to stop at that record).
func TestDumpNonFinite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nan.ledger")
	w, err := ledger.Create(path, ledger.Options{Level: ledger.Full, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var m wire.Message
	wholeOf := func() []byte { b := make([]byte, m.Len()); m.CopyTo(b); return b }
	if err := wire.EncodeMetadata(&m, &wire.Metadata{}); err != nil {
		t.Fatal(err)
	}
	w.Connected("ws://127.0.0.1:1", "127.0.0.1:1", wholeOf())
	in := &wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &wire.Observation{}}
	if err := wire.EncodeInfer(&m, in); err != nil {
		t.Fatal(err)
	}
	w.Sent(&m, in.Obs)
	vals := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0.5}
	chunk := wire.Array{DType: wire.Float32, Shape: []int{1, 1, 4}, Data: wire.BytesOf(vals)}
	if err := wire.EncodeAction(&m, []int64{0}, &chunk); err != nil {
		t.Fatal(err)
	}
	w.Received(wholeOf())
	fb := &wire.Feedback{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: &wire.Observation{},
		Rewards: []float32{float32(math.NaN())}, Terminated: []bool{false}, Truncated: []bool{false}}
	if err := wire.EncodeFeedback(&m, fb); err != nil {
		t.Fatal(err)
	}
	w.Sent(&m, fb.Obs)
	w.Closed("client", 1000, "", "", nil, false)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	for _, whole := range []bool{false, true} {
		var out bytes.Buffer
		d := ledgertool.NewDumper(&out, whole)
		records := 0
		if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { records++; return d.Add(ev) }); err != nil {
			t.Fatalf("dump (whole arrays %v): %v", whole, err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != records {
			t.Fatalf("dump (whole arrays %v): %d lines for %d records", whole, len(lines), records)
		}
		var sawReward, sawAction, sawAddr bool
		for _, l := range lines {
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("dump (whole arrays %v) wrote a line that is not JSON: %v\n%s", whole, err, l)
			}
			if rec["k"] == "connect" {
				sawAddr = rec["addr"] == "127.0.0.1:1"
			}
			if rec["type"] == "feedback" {
				sawReward = strings.Contains(l, `"rewards":["NaN"]`)
			}
			if rec["type"] == "action" && whole {
				sawAction = strings.Contains(l, `"values":["NaN","Inf","-Inf",0.5]`)
			}
		}
		if !sawAddr {
			t.Errorf("dump (whole arrays %v): no connect line with the server's address:\n%s", whole, out.String())
		}
		if !sawReward {
			t.Errorf("dump (whole arrays %v): no feedback line with the reward as \"NaN\":\n%s", whole, out.String())
		}
		if whole && !sawAction {
			t.Errorf("dump --arrays: no action line with its values as \"NaN\", \"Inf\", \"-Inf\", 0.5:\n%s", out.String())
		}
	}
}
