package refserver

import (
	"fmt"
	"slices"

	"github.com/plugrl/libplugrl/core/wire"
)

// obsRow is one env's observation: every array with a leading dimension of
// 1, holding its own copy of the bytes.
type obsRow struct {
	images, states []wire.NamedArray
	text           string
}

// rowsOf splits an observation into its rows, copying.
func rowsOf(o *wire.Observation, n int) []*obsRow {
	rows := make([]*obsRow, n)
	for i := range rows {
		r := &obsRow{}
		for gi, g := range [2][]wire.NamedArray{o.Images, o.States} {
			out := make([]wire.NamedArray, len(g))
			for j := range g {
				a := &g[j].Array
				shape := slices.Clone(a.Shape)
				shape[0] = 1
				out[j] = wire.NamedArray{Name: g[j].Name, Array: wire.Array{
					DType: a.DType, Shape: shape, Data: slices.Clone(a.Row(i)),
				}}
			}
			if gi == 0 {
				r.images = out
			} else {
				r.states = out
			}
		}
		if i < len(o.Text) {
			r.text = o.Text[i]
		}
		rows[i] = r
	}
	return rows
}

// obsCache is one connection's last fed-back observation per env (SPEC
// 10.1). A nil entry is a terminal observation, which may not be reused.
type obsCache struct {
	held map[int64]*obsRow
}

func (c *obsCache) remember(fb *wire.FeedbackMsg) {
	if c.held == nil {
		c.held = make(map[int64]*obsRow)
	}
	rows := rowsOf(&fb.Obs, len(fb.EnvIndices))
	for i, env := range fb.EnvIndices {
		if fb.Terminated[i] || fb.Truncated[i] {
			c.held[env] = nil
		} else {
			c.held[env] = rows[i]
		}
	}
}

// complete returns the infer's full observation, n rows in env order, with
// each reused row taken from the cache; and how many rows were reused.
func (c *obsCache) complete(in *wire.InferMsg) (*wire.Observation, int, error) {
	if in.Reuse == nil {
		return &in.Obs, 0, nil
	}
	sent := rowsOf(&in.Obs, in.Sent())
	rows := make([]*obsRow, len(in.EnvIndices))
	reused, j := 0, 0
	for i, env := range in.EnvIndices {
		if !in.Reuse[i] {
			rows[i] = sent[j]
			j++
			continue
		}
		row, ok := c.held[env]
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("env %d reuses an observation it never fed back on this connection (SPEC 10.1)", env)
		case row == nil:
			return nil, 0, fmt.Errorf("env %d reuses a terminal observation: its last feedback ended its episode (SPEC 10.1)", env)
		}
		rows[i] = row
		reused++
	}
	o, err := join(rows, &in.Obs)
	return o, reused, err
}

// join stacks rows into one observation. Every row must have the same names,
// dtypes and row shapes.
func join(rows []*obsRow, like *wire.Observation) (*wire.Observation, error) {
	o := &wire.Observation{TextAsStrings: like.TextAsStrings}
	first := rows[0]
	for gi, group := range [2]string{"images", "states"} {
		pick := func(r *obsRow) []wire.NamedArray {
			if gi == 0 {
				return r.images
			}
			return r.states
		}
		var out []wire.NamedArray
		for _, proto := range pick(first) {
			shape := slices.Clone(proto.Array.Shape)
			shape[0] = len(rows)
			data := make([]byte, 0, len(proto.Array.Data)*len(rows))
			for ri, r := range rows {
				g := pick(r)
				if len(g) != len(pick(first)) {
					return nil, fmt.Errorf("rows disagree on their %s: row 0 has %d arrays, row %d has %d", group, len(pick(first)), ri, len(g))
				}
				var a *wire.Array
				for k := range g {
					if g[k].Name == proto.Name {
						a = &g[k].Array
					}
				}
				if a == nil {
					return nil, fmt.Errorf("rows disagree on their %s: row %d has no %q", group, ri, proto.Name)
				}
				if a.DType != proto.Array.DType || !slices.Equal(a.Shape[1:], proto.Array.Shape[1:]) {
					return nil, fmt.Errorf("rows disagree on %s[%q]: %s %v in row 0, %s %v in row %d", group, proto.Name, proto.Array.DType, proto.Array.Shape[1:], a.DType, a.Shape[1:], ri)
				}
				data = append(data, a.Data...)
			}
			out = append(out, wire.NamedArray{Name: proto.Name, Array: wire.Array{DType: proto.Array.DType, Shape: shape, Data: data}})
		}
		if gi == 0 {
			o.Images = out
		} else {
			o.States = out
		}
	}
	o.Text = make([]string, len(rows))
	for i, r := range rows {
		o.Text[i] = r.text
	}
	return o, nil
}
