package ledger

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/plugrl/libplugrl/core/wire"
)

// obsShape is one way to lay out FuzzSendsReshaped's observation bytes:
// its rows, its image's shape, its state's dtype and shape, and whether
// it has an array of zero-size rows. Every one holds the same 48 image
// and 64 state bytes, so that a change from one to another in place
// changes no array's length: only the plan's comparison of shapes and
// dtypes can tell the encodings apart.
type obsShape struct {
	rows  int
	image []int
	dtype wire.DType
	state []int
	empty bool
}

var obsShapes = []obsShape{
	{2, []int{2, 2, 2, 6}, wire.Float64, []int{2, 4}, false},
	{2, []int{2, 1, 4, 6}, wire.Int64, []int{2, 2, 2}, false},
	{2, []int{2, 4, 3, 2}, wire.Float32, []int{2, 8}, true},
	{4, []int{4, 2, 2, 3}, wire.Float64, []int{4, 2}, false},
	{4, []int{4, 1, 1, 12}, wire.Float32, []int{4, 4}, true},
	{4, []int{4, 1, 3, 4}, wire.Uint8, []int{4, 16}, false},
	{2, []int{2, 2, 2, 6}, wire.Float64, []int{2, 4}, true},
}

// FuzzSendsReshaped is FuzzSends for the observation a client's sends
// are encoded from changing under the same pointer, as the C API's one
// scratch Observation does (capi/convert.go): its arrays' shapes, dtypes
// and rows changed in place (their lengths the same), the Observation
// rebuilt in place with new slices, an array of zero-size rows coming
// and going, another Observation taking its place, ObsRows choosing
// rows; sends given their observation, another or none, digested as the
// connection does or not, refused by the queue, flushes between. Every
// send record must read back as sent (sentSame takes a same-layout
// send's row sizes from its slot when given its slot's observation):
// its message (zeros for cut data), length, cuts and every row's digest,
// against what ObsRowBytes says of the message and the observation it
// was given at the time of its send. (Its find: testdata's 30f6adcadc6e907a,
// TestSendCutsOfAnObsReshapedSince.)
func FuzzSendsReshaped(f *testing.F) {
	f.Add([]byte{1, 0, 0, 2, 0, 3 | 1<<3, 0, 0, 1, 1, 4, 0, 0, 5, 0, 0})
	f.Add([]byte{1, 0, 0, 3 | 3<<3, 0, 0, 3 | 4<<3, 0, 0, 2, 0, 1, 1})
	f.Add([]byte{1, 6 | 1<<3, 0, 0, 6 | 1<<3, 0, 2, 6 | 1<<3, 0, 3 | 2<<3, 6 | 1<<3, 0, 0})
	f.Add([]byte{0, 0, 0, 6 | 2<<3, 0, 0, 5, 0, 0, 6 | 3<<3, 0, 0, 7, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 || len(ops) > 400 {
			return
		}
		level := Level(ops[0] & 1)
		path := filepath.Join(t.TempDir(), "l")
		w, err := Create(path, Options{Level: level, FlushInterval: 250e6})
		if err != nil {
			t.Fatal(err)
		}
		release := HoldFlushes(w)
		img, state := make([]byte, 48), make([]byte, 64)
		for i := range img {
			img[i] = byte(i)
		}
		shapes := map[*wire.Observation]obsShape{} // each observation's
		// build makes o the observation of shape sh in place: o's own
		// slices reused (their elements overwritten) unless fresh.
		build := func(o *wire.Observation, sh obsShape, fresh bool) {
			shapes[o] = sh
			if fresh || len(o.Images) != 1 {
				*o = wire.Observation{Images: make([]wire.NamedArray, 1), States: make([]wire.NamedArray, 0, 2)}
			}
			im := &o.Images[0]
			im.Name, im.Array.DType, im.Array.Data = "cam", wire.Uint8, img
			im.Array.Shape = append(im.Array.Shape[:0], sh.image...)
			o.States = o.States[:1]
			st := &o.States[0]
			st.Name, st.Array.DType, st.Array.Data = "q", sh.dtype, state
			st.Array.Shape = append(st.Array.Shape[:0], sh.state...)
			if sh.empty {
				o.States = append(o.States, wire.NamedArray{Name: "z", Array: wire.Array{DType: wire.Float32, Shape: []int{sh.rows, 0}, Data: []byte{}}})
			}
			o.Text = nil
		}
		obsA, obsB := &wire.Observation{}, &wire.Observation{}
		build(obsA, obsShapes[0], true)
		build(obsB, obsShapes[0], true)
		cur := obsA // the observation the next encoding is made from
		steps, rewards := []int64{0, 0}, []float32{0, 0}
		terminated, truncated := []bool{false, false}, []bool{false, false}
		rowsOf4 := []int{3, 1} // ObsRows when the observation has 4 rows
		in := &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: steps}
		fb := &wire.Feedback{EnvIndices: []int64{0, 1}, StepIDs: steps, Rewards: rewards, Terminated: terminated, Truncated: truncated}
		var mi, mf wire.Message
		type sent struct {
			msg     []byte
			len     int64
			cuts    []Cut
			digests []uint32
		}
		var want []sent
		refuse, given, digested, refusedN := false, 0, false, 0
		for _, b := range ops[1:] {
			switch b % 8 {
			case 0, 1:
				in.Obs, fb.Obs = cur, cur
				in.ObsRows, fb.ObsRows = nil, nil
				if shapes[cur].rows == 4 {
					in.ObsRows, fb.ObsRows = rowsOf4, rowsOf4
				}
				m := &mi
				if b%8 == 0 {
					err = wire.EncodeInfer(m, in)
				} else {
					m = &mf
					err = wire.EncodeFeedback(m, fb)
				}
				if err != nil {
					t.Fatal(err)
				}
				o := cur // the observation Sent is given
				switch given {
				case 1:
					o = nil
				case 2:
					o = obsA
					if cur == obsA {
						o = obsB
					}
				}
				if !sendAs(w, m, cur, o, digested, refuse) {
					refusedN++
				} else {
					s := sent{msg: rebuiltAt(m, o, level), len: int64(m.Len())}
					off := 0
					for i := 0; i < m.Segments(); i++ {
						seg := m.Segment(i)
						if rb, ok := rowCut(m, i, seg, o); ok && level == Digest {
							s.cuts = append(s.cuts, Cut{Offset: int64(off), Len: int64(len(seg)), RowBytes: int64(rb)})
							for k := 0; rb > 0 && k+rb <= len(seg); k += rb {
								s.digests = append(s.digests, RowDigest(seg[k:k+rb]))
							}
						}
						off += len(seg)
					}
					want = append(want, s)
				}
				refuse, given, digested = false, 0, false
			case 2: // new values, in place
				v := b >> 3
				steps[v&1] += int64(v) + 1
				rewards[v&1] = float32(v)
				img[int(v)%len(img)] ^= v | 1
				state[int(v)*5%len(state)] += v | 1
			case 3: // another shape, dtype, rows, in place
				shape := obsShapes[int(b>>3)%len(obsShapes)]
				build(cur, shape, false)
				if b&0x80 != 0 { // the other observation too
					build(obsA, shape, false)
					build(obsB, shape, false)
				}
			case 4: // the Observation rebuilt in place with new slices
				build(cur, shapes[cur], true)
				if b&8 != 0 {
					rowsOf4 = []int{int(b>>4) & 3, int(b>>6) & 3}
					if rowsOf4[0] == rowsOf4[1] {
						rowsOf4[1] ^= 1
					}
				}
			case 5: // the other Observation, of the same shape, or of one of its own
				if cur == obsA {
					cur = obsB
				} else {
					cur = obsA
				}
				if b&8 != 0 {
					other := obsA
					if cur == obsA {
						other = obsB
					}
					build(cur, shapes[other], false)
				}
			case 6:
				switch b >> 3 & 3 {
				case 0:
					refuse = true
				case 1:
					digested = true
				case 2:
					given = 1
				case 3:
					given = 2
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
		var lost int64
		var got []sent
		eachRecord(t, w.Path(), func(r *Reader, rec *Record) {
			switch rec.Kind {
			case KindLost:
				lost += rec.Count
			case KindSend:
				msg, err := r.Message(rec)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, sent{bytes.Clone(msg), rec.Len, slices.Clone(rec.Cuts), slices.Clone(rec.Digests)})
			}
		})
		if int(lost) != refusedN {
			t.Fatalf("%d records lost, %d refused", lost, refusedN)
		}
		if len(got) != len(want) {
			t.Fatalf("%d sends read back, %d taken", len(got), len(want))
		}
		for i, g := range got {
			s := want[i]
			if !bytes.Equal(g.msg, s.msg) || g.len != s.len || !slices.Equal(g.cuts, s.cuts) || !slices.Equal(g.digests, s.digests) {
				t.Fatalf("send %d reads back as\n %x, length %d, cuts %v, digests %x; want\n %x, length %d, cuts %v, digests %x",
					i, g.msg, g.len, g.cuts, g.digests, s.msg, s.len, s.cuts, s.digests)
			}
		}
	})
}
