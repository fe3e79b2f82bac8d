package ledgertool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// Exporter collects, per env, the transitions of a full ledger: for each
// chunk fed back, the observation the chunk started from, its action
// chunk, the reward fed back for it and the flags. Write saves them as
// .npy files numpy loads.
type Exporter struct {
	envs      map[int64]*trajectory
	names     []string     // observation arrays, in the first message's order
	shapes    []arrayShape // their dtypes and row shapes
	rowBytes  []int        // their row sizes
	obsBytes  int          // the sum of rowBytes: a trajectory's row of every array
	seen      bool         // names and shapes are set (an observation may have no arrays)
	level     string
	lastInfer []int64 // the env_indices of the infer the next action answers
	gaps      int     // lost records so far (see env)
	// index is names' positions, for a message that lists them in
	// another order (arrays).
	index map[string]int
}

// An observation's rows are kept as one run of bytes: the row of each
// array in turn (Exporter.rowBytes). A slice per array and env cost 24
// bytes each whatever the row's size, and an array of rows of no bytes
// costs a message a few bytes: an infer of n envs and n such arrays, a
// 19 KB ledger at n = 2000, allocated 286 MiB (n^2).
type trajectory struct {
	obs        []byte // per step fed back, its observation's rows
	held       []byte // the last observation seen (infer or feedback), for reuse
	pending    []byte // the observation of the chunk in flight
	hasHeld    bool
	hasPending bool
	action     []float64
	actShape   []int     // of the chunks stacked
	chunk      []float64 // the chunk in flight
	chunkShape []int     // its shape
	reward     []float64
	terminated []bool
	truncated  []bool
	steps      int
	gaps       int // Exporter.gaps when it was last brought up to date (see env)
}

// NewExporter returns an empty exporter.
func NewExporter() *Exporter { return &Exporter{envs: map[int64]*trajectory{}} }

func (x *Exporter) env(e int64) *trajectory {
	t := x.envs[e]
	if t == nil {
		t = &trajectory{gaps: x.gaps}
		x.envs[e] = t
	}
	if t.gaps != x.gaps {
		// Records were lost since it was last seen: an infer, action or
		// feedback of it among them would make its chunk in flight, its
		// observation or the one the server holds for a reuse another
		// than the ledger shows. It is learned again from its next infer
		// and action (lazily: a pass over every env per lost record would
		// cost a crafted ledger envs x records).
		t.pending, t.hasPending, t.chunk = t.pending[:0], false, nil
		t.held, t.hasHeld = t.held[:0], false
		t.gaps = x.gaps
	}
	return t
}

var errDigestLedger = errors.New("export needs a full ledger: this one is at digest level, it holds no observation data (record with level full)")

// Add takes one event.
func (x *Exporter) Add(ev *Event) error {
	switch {
	case ev.Kind == ledger.KindOpen:
		x.level = ev.Level
		if ev.Level != ledger.Full.String() {
			return errDigestLedger
		}
	case ev.Kind == ledger.KindLost:
		// The queue dropped records here. The action after the gap may
		// answer an infer in it, whose envs are not the last infer's:
		// given to those, one env's chunk was stacked with another's
		// observation. No env takes it, and every env's chunk in flight
		// is forgotten (env).
		x.gaps++
		x.lastInfer = x.lastInfer[:0]
	case ev.Kind == ledger.KindSend && len(ev.Cuts) > 0:
		// A digest-level record: its observation data was cut out, and
		// what the reader rebuilds in its place is zeros, which a cut
		// row of any size costs the file 4 bytes of digest.
		return fmt.Errorf("record %d: a send whose observation data was cut out (digest level), in a ledger whose open record says full: there is no observation to export", ev.Seq)
	case ev.Infer != nil:
		return x.infer(ev.Infer)
	case ev.Action != nil:
		return x.action(ev.Action)
	case ev.Feedback != nil:
		return x.feedback(ev.Feedback)
	}
	return nil
}

// arrays lists an observation's arrays in the order of the first
// observation seen (x.names), and checks they are the ones seen so far:
// the same names, dtypes and row shapes, since each becomes one file of
// stacked rows. A msgpack map is unordered: a message may list them in
// another order (a client's infers one way, its feedback another), and
// they are matched by name, as the audit matches them. A name must also
// be usable as part of a file name in the export's directory.
func (x *Exporter) arrays(o *wire.Observation) ([]*wire.Array, error) {
	var out []*wire.Array
	var names []string
	for gi, g := range [2][]wire.NamedArray{o.Images, o.States} {
		for i := range g {
			if !safeName(g[i].Name) {
				return nil, fmt.Errorf("an observation array is named %q, which cannot be part of a file name", g[i].Name)
			}
			out = append(out, &g[i].Array)
			names = append(names, [2]string{"images.", "states."}[gi]+g[i].Name)
		}
	}
	shapes := shapesOf(out)
	if !x.seen {
		x.names, x.shapes, x.seen = names, shapes, true
		x.rowBytes, x.obsBytes = make([]int, len(out)), 0
		for k, a := range out {
			x.rowBytes[k] = a.RowBytes()
			x.obsBytes += x.rowBytes[k]
		}
		return out, nil
	}
	if !slices.Equal(x.names, names) {
		changed := fmt.Errorf("the observation's arrays changed from %q to %q: one trajectory file per array needs them fixed", x.names, names)
		if len(names) != len(x.names) {
			return nil, changed
		}
		if x.index == nil {
			x.index = make(map[string]int, len(x.names))
			for k, n := range x.names {
				x.index[n] = k
			}
		}
		// Names are unique within a group (the decoder refuses a repeat),
		// so as many names, each found, are the same set.
		byName, shapesByName := make([]*wire.Array, len(out)), make([]arrayShape, len(out))
		for i, n := range names {
			k, ok := x.index[n]
			if !ok {
				return nil, changed
			}
			byName[k], shapesByName[k] = out[i], shapes[i]
		}
		out, shapes, names = byName, shapesByName, x.names
	}
	for k := range shapes {
		if shapes[k].dtype != x.shapes[k].dtype || !slices.Equal(shapes[k].row, x.shapes[k].row) {
			return nil, fmt.Errorf("observation array %s changed from %s rows of %v to %s rows of %v: one trajectory file per array needs them fixed",
				names[k], x.shapes[k].dtype, x.shapes[k].row, shapes[k].dtype, shapes[k].row)
		}
	}
	return out, nil
}

// safeName reports whether an array's name can be part of a file name in
// the export's directory (env<E>_states.<name>.npy): no path separator and
// no NUL.
func safeName(name string) bool {
	return !strings.ContainsAny(name, "/\\\x00")
}

func (x *Exporter) infer(in *wire.InferMsg) error {
	arrs, err := x.arrays(&in.Obs)
	if err != nil {
		return err
	}
	x.lastInfer = append(x.lastInfer[:0], in.EnvIndices...)
	row := 0
	for i, e := range in.EnvIndices {
		t := x.env(e)
		if in.Reuse != nil && in.Reuse[i] {
			t.pending, t.hasPending = append(t.pending[:0], t.held...), t.hasHeld
			continue
		}
		t.pending, t.hasPending = x.rows(t.pending[:0], arrs, row), true
		row++
	}
	return nil
}

func (x *Exporter) action(a *wire.Action) error {
	h, n := a.Horizon(), a.Envs()
	per := 1
	for _, d := range a.ActionShape() {
		per *= d
	}
	shape := append([]int{h}, a.ActionShape()...)
	for j, e := range x.lastInfer {
		if j >= n {
			break
		}
		t := x.env(e)
		t.chunkShape = shape
		t.chunk = t.chunk[:0]
		for s := 0; s < h; s++ {
			for k := 0; k < per; k++ {
				t.chunk = append(t.chunk, a.Chunk.Float64((s*n+j)*per+k))
			}
		}
	}
	return nil
}

func (x *Exporter) feedback(fb *wire.FeedbackMsg) error {
	arrs, err := x.arrays(&fb.Obs)
	if err != nil {
		return err
	}
	for i, e := range fb.EnvIndices {
		t := x.env(e)
		if t.hasPending && t.chunk != nil {
			// Only chunks fed back are stacked: one dropped with its
			// connection may have had another shape.
			if t.actShape != nil && !slices.Equal(t.actShape, t.chunkShape) {
				return fmt.Errorf("env %d's action chunks changed shape from %v to %v: its action file stacks them", e, t.actShape, t.chunkShape)
			}
			t.actShape = t.chunkShape
			t.obs = append(t.obs, t.pending...)
			t.action = append(t.action, t.chunk...)
			t.reward = append(t.reward, fb.Rewards[i])
			t.terminated = append(t.terminated, fb.Terminated[i])
			t.truncated = append(t.truncated, fb.Truncated[i])
			t.steps++
		}
		t.pending, t.hasPending, t.chunk = t.pending[:0], false, nil
		t.held, t.hasHeld = x.rows(t.held[:0], arrs, i), true
	}
	return nil
}

// rows appends row r of each array to dst.
func (x *Exporter) rows(dst []byte, arrs []*wire.Array, r int) []byte {
	for _, a := range arrs {
		dst = append(dst, a.Row(r)...)
	}
	return dst
}

// arrayShape is an array's dtype and row shape, fixed for a ledger.
type arrayShape struct {
	dtype wire.DType
	row   []int
}

func shapesOf(arrs []*wire.Array) []arrayShape {
	out := make([]arrayShape, len(arrs))
	for k, a := range arrs {
		out[k] = arrayShape{a.DType, append([]int(nil), a.Shape[1:]...)}
	}
	return out
}

// maxExportFiles bounds the files one export writes: a real run's full
// ledger of 1024 envs with 16 arrays each writes 20,480.
const maxExportFiles = 100_000

// filesPerEnv is the files Write saves per env beside its observation
// arrays: action, reward, terminated, truncated.
const filesPerEnv = 4

// Write saves env<E>_<array>.npy, env<E>_action.npy, env<E>_reward.npy,
// env<E>_terminated.npy and env<E>_truncated.npy for each env into dir, and
// returns the files written.
func (x *Exporter) Write(dir string) ([]string, error) {
	if x.level != ledger.Full.String() {
		return nil, errDigestLedger
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Every file is written through a Root: whatever a ledger's names
	// hold, nothing lands outside dir (safeName refuses them before).
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	envs := make([]int64, 0, len(x.envs))
	for e := range x.envs {
		if x.envs[e].steps > 0 {
			envs = append(envs, e)
		}
	}
	sort.Slice(envs, func(i, j int) bool { return envs[i] < envs[j] })
	// A file per env per array: counted first, so that a ledger of a few
	// KB naming thousands of envs and arrays (rows of no bytes cost a
	// message almost nothing) does not fill the directory with millions.
	if n := len(envs) * (len(x.names) + filesPerEnv); n > maxExportFiles {
		return nil, fmt.Errorf("export would write %d files (%d envs, %d observation arrays each, and %d more per env), more than the %d it writes at most", n, len(envs), len(x.names), filesPerEnv, maxExportFiles)
	}
	var files []string
	var made madeFiles
	save := func(name, descr string, shape []int, data []byte) error {
		if err := made.check(root, name); err != nil {
			return err
		}
		files = append(files, filepath.Join(dir, name))
		// Written beside, then renamed over the name: an earlier export's
		// file is replaced, not written through (files that a tool
		// deduplicating the directory hard-linked would take each
		// other's data), and an export stopped midway leaves no file cut
		// short under an array's name.
		part := name + ".partial"
		if err := root.WriteFile(part, npy(descr, shape, data), 0o644); err != nil {
			return err
		}
		if err := root.Rename(part, name); err != nil {
			_ = root.Remove(part)
			return err
		}
		return made.add(root, name)
	}
	for _, e := range envs {
		t := x.envs[e]
		made.reset()
		T := t.steps
		if len(t.obs) != T*x.obsBytes {
			return nil, fmt.Errorf("env %d: %d bytes of observations for %d steps of %d", e, len(t.obs), T, x.obsBytes)
		}
		off := 0
		for k, name := range x.names {
			s, rb := x.shapes[k], x.rowBytes[k]
			data := make([]byte, 0, T*rb)
			for step := range T {
				at := step*x.obsBytes + off
				data = append(data, t.obs[at:at+rb]...)
			}
			off += rb
			if err := save(fmt.Sprintf("env%d_%s.npy", e, name), s.dtype.String(), append([]int{T}, s.row...), data); err != nil {
				return nil, err
			}
		}
		if len(t.action)%T != 0 {
			return nil, fmt.Errorf("env %d: action chunks of different sizes cannot be stacked", e)
		}
		if err := save(fmt.Sprintf("env%d_action.npy", e), "<f8", append([]int{T}, t.actShape...), f64bytes(t.action)); err != nil {
			return nil, err
		}
		if err := save(fmt.Sprintf("env%d_reward.npy", e), "<f8", []int{T}, f64bytes(t.reward)); err != nil {
			return nil, err
		}
		for _, f := range []struct {
			name string
			v    []bool
		}{{"terminated", t.terminated}, {"truncated", t.truncated}} {
			if err := save(fmt.Sprintf("env%d_%s.npy", e, f.name), "|b1", []int{T}, wire.BytesOf(f.v)); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// madeFiles are the files Write has written for one env, so that two of
// its names that the file system takes for one file are an error, not
// one array's trajectory silently replaced by another's: arrays "Pos" and
// "pos" on a case-insensitive file system (macOS's and Windows' by
// default), or one name in two Unicode normalizations on macOS's. Only the
// file system can tell (its rules differ, and this package has no Unicode
// normalization): a name that already exists is compared with what this
// export wrote, by identity (os.SameFile). Names of different envs never
// meet (env<E>_ before each), so the set is one env's; in a directory of
// an earlier export every name exists, and is that export's file.
type madeFiles struct {
	byID  map[fileID]string // where the file system gives an identity (unix)
	infos []os.FileInfo     // elsewhere
	names []string          // beside infos
}

func (m *madeFiles) reset() {
	clear(m.byID)
	m.infos, m.names = m.infos[:0], m.names[:0]
}

// check fails if name, about to be written, is a file this env's export
// already wrote under another name.
func (m *madeFiles) check(root *os.Root, name string) error {
	fi, err := root.Stat(name)
	if err != nil {
		return nil // not there: no file of this export has that name either
	}
	first := ""
	if id, ok := idOf(fi); ok {
		first = m.byID[id]
	} else {
		for i, was := range m.infos {
			if os.SameFile(fi, was) {
				first = m.names[i]
				break
			}
		}
	}
	if first == "" {
		return nil // an earlier export's file: replaced
	}
	return fmt.Errorf("%s and %s are one file on this file system (names that differ only in case or in Unicode normalization name one file there): "+
		"writing the second would replace the first's data, so the export stopped there, with %s written; "+
		"export to a case-sensitive file system, or give the env's arrays names that differ otherwise", first, name, first)
}

// add notes name, just written.
func (m *madeFiles) add(root *os.Root, name string) error {
	fi, err := root.Stat(name)
	if err != nil {
		return err
	}
	if id, ok := idOf(fi); ok {
		if m.byID == nil {
			m.byID = map[fileID]string{}
		}
		m.byID[id] = name
		return nil
	}
	m.infos, m.names = append(m.infos, fi), append(m.names, name)
	return nil
}

func f64bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
	return b
}

// npy encodes an array in NumPy's .npy format, version 1.0.
func npy(descr string, shape []int, data []byte) []byte {
	dims := ""
	for _, d := range shape {
		dims += fmt.Sprintf("%d, ", d)
	}
	if len(shape) > 1 {
		dims = strings.TrimSuffix(dims, ", ")
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims)
	// magic (6) + version (2) + header length (2) + header + '\n', padded to 64.
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(header)), byte(len(header)>>8))
	out = append(out, header...)
	return append(out, data...)
}
