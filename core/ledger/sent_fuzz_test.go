package ledger

import (
	"path/filepath"
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

// FuzzSends drives the writer with a client's sends in any order (infer
// and feedback, from one message or the other in a row), their data and
// layouts changing, observations not the one encoded, receives, refusals
// by the queue and flushes anywhere, and checks that the ledger reads back
// every send the queue took, byte for byte (at digest level, with zeros
// for the observation data; digested as the connection does, or not), and
// counts the ones it refused as lost. The
// queue's frames and the writer's rebuilding of sends are what it tests;
// the reader is fuzzed on its own (FuzzReader, FuzzRecord).
func FuzzSends(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 0, 1, 10, 0, 0, 3, 0, 1, 5, 1, 0, 6, 0, 0, 4, 1, 7, 0, 1})
	f.Add([]byte{1, 0, 0, 0, 2, 0, 1, 5, 1, 5, 1, 0, 9, 0, 11, 1, 3, 0, 0, 7})
	// Digested sends, two of them recorded without their observation
	// (a Digester begun with it, Sent given none): a reviewer's find.
	f.Add([]byte{0, 14, 0, 14, 6, 0, 14, 6, 0, 14, 1, 14, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 || len(ops) > 400 {
			return
		}
		level := Level(ops[0] & 1)
		// The file is read back from w.Path(): temporary names repeat over
		// a long run, and Create gives a path this process already used
		// a name of its own (path.2, ...), as it must (see Resolve).
		path := filepath.Join(t.TempDir(), "l")
		w, err := Create(path, Options{Level: level, FlushInterval: 250e6})
		if err != nil {
			t.Fatal(err)
		}
		release := HoldFlushes(w) // flushes where ops say, and at Close
		img := make([]byte, 2*2*2*3)
		state := make([]float64, 4)
		obs := &wire.Observation{
			Images: []wire.NamedArray{{Name: "cam", Array: wire.Array{DType: wire.Uint8, Shape: []int{2, 2, 2, 3}, Data: img}}},
			States: []wire.NamedArray{{Name: "q", Array: wire.Array{DType: wire.Float64, Shape: []int{2, 2}, Data: wire.BytesOf(state)}}},
		}
		steps, rewards := []int64{0, 0}, []float32{0, 0}
		terminated, truncated := []bool{false, false}, []bool{false, false}
		in := &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: steps, Obs: obs}
		fb := &wire.Feedback{EnvIndices: []int64{0, 1}, StepIDs: steps, Obs: obs, Rewards: rewards, Terminated: terminated, Truncated: truncated}
		var mi, mf wire.Message
		var want [][]byte
		refuse, noObs, digested, refusedN := false, false, false, 0
		for _, b := range ops[1:] {
			switch b % 8 {
			case 0, 1:
				m := &mi
				err := error(nil)
				if b%8 == 0 {
					err = wire.EncodeInfer(m, in)
				} else {
					m = &mf
					err = wire.EncodeFeedback(m, fb)
				}
				if err != nil {
					t.Fatal(err)
				}
				o := obs
				if noObs {
					o = nil
				}
				// As the connection does: the Digester is shown every
				// byte it copies, with the observation it was begun
				// with (which Sent may not be given).
				if sendAs(w, m, obs, o, digested, refuse) {
					want = append(want, rebuiltAt(m, o, level))
				} else {
					refusedN++
				}
				refuse, noObs, digested = false, false, false
			case 2:
				v := b >> 3
				steps[v&1] += int64(v)
				state[v&3] += float64(v)
				img[int(v)%len(img)] ^= v
				rewards[v&1] = float32(v)
			case 3:
				if obs.Text == nil {
					obs.Text = []string{"a", string(rune('a' + b>>3))}
				} else {
					obs.Text = nil
				}
			case 4:
				terminated[1] = !terminated[1]
			case 5:
				refuse = true
			case 6:
				if b&8 != 0 {
					digested = true
				} else {
					noObs = true
				}
			case 7:
				if b&8 != 0 {
					w.Received(ops[:min(len(ops), int(b>>4))])
				} else {
					release = flushNow(w, release)
				}
			}
		}
		release()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, lost := readBack(t, w.Path(), KindSend)
		checkReadBack(t, "sends", got, want, lost, refusedN)
	})
}
