package wire

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"unsafe"
)

// TestPlanMatchesFreshEncoding: a Message reused across requests (which
// keeps its plan when the structure repeats) encodes every request exactly
// as a fresh Message does, byte for byte and error for error, while the
// requests change one thing at a time: data, env indices, flags, names,
// dtypes, shapes, rows, text, episode stats, or nothing at all. Its
// Layout stays the same exactly when the plan is reused, and then only its
// referenced segments' bytes differ from the last encoding (the ledger
// records just those).
func TestPlanMatchesFreshEncoding(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var mi, mf Message
	var last [2]lastEncoding
	hits := 0
	for step := 0; step < 4000; step++ {
		in, fb := randomRequests(rng, step)
		for k, kind := range []string{"infer", "feedback"} {
			var reused, fresh Message
			var errR, errF error
			var before bool
			if kind == "infer" {
				before = mi.plan.kind == planInfer && mi.planMatch(viewOf(in, nil))
				errR = EncodeInfer(&mi, in)
				errF = EncodeInfer(&fresh, in)
				reused = mi
				if before {
					hits++
				}
			} else {
				before = mf.plan.kind == planFeedback && mf.planMatch(viewOf(nil, fb))
				errR = EncodeFeedback(&mf, fb)
				errF = EncodeFeedback(&fresh, fb)
				reused = mf
				if before {
					hits++
				}
			}
			if (errR == nil) != (errF == nil) || (errR != nil && errR.Error() != errF.Error()) {
				t.Fatalf("step %d %s: reused message gives %v, a fresh one %v", step, kind, errR, errF)
			}
			if errR != nil {
				last[k] = lastEncoding{}
				continue
			}
			if err := last[k].check(&reused, before); err != "" {
				t.Fatalf("step %d %s: %s", step, kind, err)
			}
			got, want := reused.AppendTo(nil), fresh.AppendTo(nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("step %d %s: reused message's bytes differ from a fresh encoding", step, kind)
			}
			if reused.Len() != len(want) {
				t.Fatalf("step %d %s: Len %d, %d bytes", step, kind, reused.Len(), len(want))
			}
			// Referenced segments point into this request's memory.
			for i := 0; i < reused.Segments(); i++ {
				s := reused.Segment(i)
				if reused.segs[i].ext != nil && !ownedBy(s, in, fb) {
					t.Fatalf("step %d %s: segment %d references memory outside the request", step, kind, i)
				}
			}
		}
	}
	if hits < 1000 {
		t.Fatalf("only %d of 8000 encodings reused a plan; the test does not exercise it", hits)
	}
}

// lastEncoding is what TestPlanMatchesFreshEncoding keeps of a message's
// last successful encoding, to check its Layout.
type lastEncoding struct {
	ok     bool
	layout uint64
	own    [][]byte // each segment's bytes; nil where referenced
	lens   []int
}

// check compares m, just encoded (planned: by reusing its plan), with the
// last encoding, and makes m the last one; it returns what is wrong.
func (l *lastEncoding) check(m *Message, planned bool) string {
	defer func() {
		*l = lastEncoding{ok: true, layout: m.Layout()}
		for i := 0; i < m.Segments(); i++ {
			var own []byte
			if !m.Referenced(i) {
				own = bytes.Clone(m.Segment(i))
			}
			l.own, l.lens = append(l.own, own), append(l.lens, len(m.Segment(i)))
		}
	}()
	if !l.ok {
		return ""
	}
	if planned != (m.Layout() == l.layout) {
		return fmt.Sprintf("plan reused %v, but Layout %d after %d", planned, m.Layout(), l.layout)
	}
	if !planned {
		return ""
	}
	if m.Segments() != len(l.lens) {
		return fmt.Sprintf("the same Layout with %d segments, %d before", m.Segments(), len(l.lens))
	}
	for i := 0; i < m.Segments(); i++ {
		seg := m.Segment(i)
		if m.Referenced(i) != (l.own[i] == nil && l.lens[i] > 0) || len(seg) != l.lens[i] ||
			!m.Referenced(i) && !bytes.Equal(seg, l.own[i]) {
			return fmt.Sprintf("the same Layout, but segment %d (%d bytes, referenced %v) is not what it was", i, len(seg), m.Referenced(i))
		}
	}
	return ""
}

// planWorld is the state randomRequests mutates step by step.
var planWorld struct {
	envs          []int64
	names         []string
	dtypes        []DType
	shapes        [][]int
	text          []string
	textAsStrings bool
	flags         []bool
	episode       bool
	obsRows       []int
	bad           bool
}

func randomRequests(rng *rand.Rand, step int) (*Infer, *Feedback) {
	w := &planWorld
	if step == 0 {
		w.envs = []int64{0, 1}
		w.names = []string{"cam0", "state"}
		w.dtypes = []DType{Uint8, Float64}
		w.shapes = [][]int{{2, 2, 2, 3}, {2, 3}}
		w.text = []string{"pick", "place"}
		w.flags = []bool{false, false}
	}
	// Mostly nothing changes but the data (the plan's case); sometimes one
	// thing changes.
	switch r := rng.Intn(20); r {
	case 0:
		w.envs[rng.Intn(len(w.envs))] = int64(rng.Intn(4)) // may duplicate: invalid
	case 1:
		w.names[rng.Intn(2)] = []string{"cam0", "cam1", "state", "s"}[rng.Intn(4)]
	case 2:
		w.dtypes[1] = []DType{Float64, Float32, Int64, MustParseDType(">f8")}[rng.Intn(4)]
	case 3:
		w.shapes[1] = []int{2, 1 + rng.Intn(4)}
	case 4:
		w.text[rng.Intn(2)] = []string{"pick", "place", "", "héllo", "pick up the red block"}[rng.Intn(5)]
	case 5:
		w.textAsStrings = !w.textAsStrings
	case 6:
		i := rng.Intn(2)
		w.flags[i] = !w.flags[i]
	case 7:
		w.episode = !w.episode
	case 8:
		if w.obsRows == nil {
			w.obsRows = []int{1, 0}
		} else {
			w.obsRows = nil
		}
	case 9:
		w.bad = !w.bad // a text list of the wrong length
	}
	obs := &Observation{TextAsStrings: w.textAsStrings}
	for i := range w.names {
		n, _ := ByteLen(w.dtypes[i], w.shapes[i])
		data := make([]byte, n) // fresh memory every step, random bytes
		rng.Read(data)
		na := NamedArray{Name: w.names[i], Array: Array{DType: w.dtypes[i], Shape: append([]int(nil), w.shapes[i]...), Data: data}}
		if i == 0 {
			obs.Images = append(obs.Images, na)
		} else {
			obs.States = append(obs.States, na)
		}
	}
	obs.Text = append([]string(nil), w.text...)
	if w.bad {
		obs.Text = obs.Text[:1]
	}
	envs := append([]int64(nil), w.envs...)
	steps := []int64{int64(rng.Intn(3)), int64(rng.Intn(3))}
	in := &Infer{EnvIndices: envs, StepIDs: steps, Obs: obs, ObsRows: append([]int(nil), w.obsRows...)}
	if w.obsRows == nil {
		in.ObsRows = nil
	}
	flags := append([]bool(nil), w.flags...)
	fb := &Feedback{EnvIndices: envs, StepIDs: steps, Obs: obs, ObsRows: in.ObsRows,
		Rewards: []float32{rng.Float32(), rng.Float32()}, Terminated: flags, Truncated: []bool{flags[1], flags[0]}}
	if w.episode {
		fb.Episode = &Episode{Return: []float64{rng.Float64(), 1}, Length: []int64{int64(rng.Intn(9)), 3},
			Success: []bool{true, false}, Mask: []bool{flags[0], true}}
	}
	// A C caller's true may be any nonzero byte.
	if rng.Intn(3) == 0 {
		for _, b := range [][]bool{fb.Terminated, fb.Truncated} {
			for i := range b {
				if b[i] {
					*(*byte)(unsafe.Pointer(&b[i])) = 2
				}
			}
		}
	}
	return in, fb
}

// ownedBy reports whether s lies within the memory of one of the requests'
// referenced fields.
func ownedBy(s []byte, in *Infer, fb *Feedback) bool {
	srcs := [][]byte{BytesOf(in.EnvIndices), BytesOf(in.StepIDs), BytesOf(fb.Rewards)}
	if fb.Episode != nil {
		srcs = append(srcs, BytesOf(fb.Episode.Return), BytesOf(fb.Episode.Length))
	}
	for _, g := range [][]NamedArray{in.Obs.Images, in.Obs.States} {
		for i := range g {
			srcs = append(srcs, g[i].Array.Data)
		}
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	for _, b := range srcs {
		if len(b) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(b)) {
			return true
		}
	}
	return false
}

// viewOf is the plan's view of in or fb.
func viewOf(in *Infer, fb *Feedback) *reqView {
	v := &reqView{}
	if in != nil {
		in.view(v)
	} else {
		fb.view(v)
	}
	return v
}

// TestSegmentSize: a segment stays 32 bytes on a 64-bit machine. An
// exchange reads every segment of its two messages, and with many clients
// taking turns on a core each of those cache lines is fetched again every
// time (docs/PERFORMANCE.md); a field added here costs that on every
// exchange, so it should be a deliberate choice.
func TestSegmentSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit machines")
	}
	if got := unsafe.Sizeof(segment{}); got != 32 {
		t.Errorf("segment is %d bytes, want 32", got)
	}
}
