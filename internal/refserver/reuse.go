package refserver

import (
	"fmt"
	"slices"

	"github.com/plugrl/libplugrl/core/wire"
)

// obsBatch is one observation as it arrived, every row of it: a feedback's
// (copied, since the cache outlives the message) or an infer's (viewed).
// The cache refers to its rows by index. Splitting it into a copy per row
// and per array made memory rows x arrays: a 103 KB feedback of 2000 envs
// and 1000 zero-width arrays took 187 MB. Kept whole, a batch costs what
// its bytes cost, and lives as long as one env still refers to it.
type obsBatch struct {
	images, states []wire.NamedArray
	text           []string
}

func (b *obsBatch) group(images bool) []wire.NamedArray {
	if images {
		return b.images
	}
	return b.states
}

// keepBatch copies an observation's arrays out of the message they view,
// all their data in one allocation.
func keepBatch(o *wire.Observation) *obsBatch {
	size := 0
	for _, g := range [2][]wire.NamedArray{o.Images, o.States} {
		for i := range g {
			size += len(g[i].Array.Data)
		}
	}
	data := make([]byte, 0, size)
	b := &obsBatch{text: o.Text}
	for gi, g := range [2][]wire.NamedArray{o.Images, o.States} {
		out := make([]wire.NamedArray, len(g))
		for i := range g {
			a := &g[i].Array
			at := len(data)
			data = append(data, a.Data...)
			out[i] = wire.NamedArray{Name: g[i].Name, Array: wire.Array{DType: a.DType, Shape: a.Shape, Data: data[at:len(data):len(data)]}}
		}
		if gi == 0 {
			b.images = out
		} else {
			b.states = out
		}
	}
	return b
}

// obsRef is one env's observation: row row of batch b. A zero obsRef is a
// terminal observation, which may not be reused.
type obsRef struct {
	b   *obsBatch
	row int
}

// obsCache is one connection's last fed-back observation per env (SPEC
// 10.1).
type obsCache struct {
	held map[int64]obsRef
}

func (c *obsCache) remember(fb *wire.FeedbackMsg) {
	if c.held == nil {
		c.held = make(map[int64]obsRef)
	}
	b := keepBatch(&fb.Obs)
	for i, env := range fb.EnvIndices {
		if fb.Terminated[i] || fb.Truncated[i] {
			c.held[env] = obsRef{}
		} else {
			c.held[env] = obsRef{b, i}
		}
	}
}

// complete returns the infer's full observation, n rows in env order, with
// each reused row taken from the cache; and how many rows were reused.
func (c *obsCache) complete(in *wire.InferMsg) (*wire.Observation, int, error) {
	if in.Reuse == nil {
		return &in.Obs, 0, nil
	}
	sent := &obsBatch{images: in.Obs.Images, states: in.Obs.States, text: in.Obs.Text}
	refs := make([]obsRef, len(in.EnvIndices))
	reused, j := 0, 0
	for i, env := range in.EnvIndices {
		if !in.Reuse[i] {
			refs[i] = obsRef{sent, j}
			j++
			continue
		}
		ref, ok := c.held[env]
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("env %d reuses an observation it never fed back on this connection (SPEC 10.1)", env)
		case ref.b == nil:
			return nil, 0, fmt.Errorf("env %d reuses a terminal observation: its last feedback ended its episode (SPEC 10.1)", env)
		}
		refs[i] = ref
		reused++
	}
	o, err := join(refs, &in.Obs)
	return o, reused, err
}

// join stacks rows into one observation. Every row must have the same names,
// dtypes and row shapes as row 0. Rows are checked per batch, not per row:
// the rows of one batch agree with each other already.
func join(refs []obsRef, like *wire.Observation) (*wire.Observation, error) {
	o := &wire.Observation{TextAsStrings: like.TextAsStrings}
	proto := refs[0].b
	where := make(map[*obsBatch][]int) // for each batch, where each of proto's arrays is in it
	at := make([][]int, len(refs))     // where[refs[i].b]
	for gi, group := range [2]string{"images", "states"} {
		pg := proto.group(gi == 0)
		index := make(map[string]int, len(pg))
		for k := range pg {
			index[pg[k].Name] = k
		}
		clear(where)
		// Most batches list their arrays in row 0's order (a client sends
		// its observation the same way every time): they share one
		// identity permutation instead of a new one each, which an infer
		// reusing rows of many cached batches made per batch (a review
		// measured 100 MB for 20 infers of 1000 one-env batches).
		identity := make([]int, len(pg))
		for k := range identity {
			identity[k] = k
		}
		for ri, r := range refs {
			if perm, ok := where[r.b]; ok {
				at[ri] = perm
				continue
			}
			g := r.b.group(gi == 0)
			if len(g) != len(pg) {
				return nil, fmt.Errorf("rows disagree on their %s: row 0 has %d arrays, row %d has %d", group, len(pg), ri, len(g))
			}
			if sameLayout(g, pg) {
				where[r.b] = identity
				at[ri] = identity
				continue
			}
			perm := make([]int, len(pg))
			for k := range g {
				p, ok := index[g[k].Name]
				if !ok {
					return nil, fmt.Errorf("rows disagree on their %s: row %d has %q, row 0 has not", group, ri, g[k].Name)
				}
				a, pa := &g[k].Array, &pg[p].Array
				if a.DType != pa.DType || !slices.Equal(a.Shape[1:], pa.Shape[1:]) {
					return nil, fmt.Errorf("rows disagree on %s[%q]: %s %v in row 0, %s %v in row %d", group, pg[p].Name, pa.DType, pa.Shape[1:], a.DType, a.Shape[1:], ri)
				}
				perm[p] = k // names are unique in a batch (the decoder checks), so perm is one-to-one
			}
			where[r.b] = perm
			at[ri] = perm
		}
		out := make([]wire.NamedArray, len(pg))
		for p := range pg {
			pa := &pg[p].Array
			shape := slices.Clone(pa.Shape)
			shape[0] = len(refs)
			data := make([]byte, 0, pa.RowBytes()*len(refs))
			for ri, r := range refs {
				data = append(data, r.b.group(gi == 0)[at[ri][p]].Array.Row(r.row)...)
			}
			out[p] = wire.NamedArray{Name: pg[p].Name, Array: wire.Array{DType: pa.DType, Shape: shape, Data: data}}
		}
		if gi == 0 {
			o.Images = out
		} else {
			o.States = out
		}
	}
	o.Text = make([]string, len(refs))
	for i, r := range refs {
		if r.row < len(r.b.text) {
			o.Text[i] = r.b.text[r.row]
		}
	}
	return o, nil
}

// sameLayout reports whether g lists pg's arrays in pg's order, with the
// same dtypes and row shapes.
func sameLayout(g, pg []wire.NamedArray) bool {
	for k := range g {
		a, pa := &g[k].Array, &pg[k].Array
		if g[k].Name != pg[k].Name || a.DType != pa.DType || !slices.Equal(a.Shape[1:], pa.Shape[1:]) {
			return false
		}
	}
	return true
}
