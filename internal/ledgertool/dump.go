package ledgertool

import (
	"encoding/json"
	"io"
	"math"
	"strconv"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// Dumper writes one JSON object per record. Arrays are summarised (dtype,
// shape, and the digest of each observation row) unless Whole is set.
type Dumper struct {
	enc   *json.Encoder
	Whole bool
}

// NewDumper writes to w.
func NewDumper(w io.Writer, whole bool) *Dumper {
	return &Dumper{enc: json.NewEncoder(w), Whole: whole}
}

// Add writes one event.
func (d *Dumper) Add(ev *Event) error {
	out := map[string]any{"seq": ev.Seq, "k": ev.Kind, "t_ns": ev.Time}
	put := func(k string, v any, ok bool) {
		if ok {
			out[k] = v
		}
	}
	put("conn", ev.Conn, ev.Conn != 0)
	switch ev.Kind {
	case ledger.KindOpen:
		out["wall_ns"], out["level"], out["version"], out["pid"] = ev.Wall, ev.Level, ev.Version, ev.PID
	case ledger.KindConnect:
		out["url"] = ev.URL
		put("addr", ev.Addr, ev.Addr != "")
		if ev.Meta != nil {
			out["metadata"] = json.RawMessage(metaJSON(ev.Meta))
		}
	case ledger.KindClose:
		out["by"], out["code"], out["reason"], out["err"], out["dropped"] = ev.By, ev.Code, ev.Reason, ev.Err, ev.Dropped
		if ev.Unsent != 0 {
			out["unsent"] = ev.Unsent
		}
	case ledger.KindReconnect:
		out["cause"] = ev.Cause
	case ledger.KindLost:
		out["records"], out["bytes"] = ev.Count, ev.Bytes
	case ledger.KindEnd:
		put("writer_cpu_ns", ev.CPU, ev.CPU != 0)
	case ledger.KindSend:
		out["len"] = ev.Len
		switch {
		case ev.Infer != nil:
			in := ev.Infer
			out["type"], out["env_indices"], out["step_ids"] = "infer", in.EnvIndices, in.StepIDs
			put("reuse", in.Reuse, in.Reuse != nil)
			out["obs"] = d.obs(ev, &in.Obs)
		case ev.Feedback != nil:
			fb := ev.Feedback
			out["type"], out["env_indices"], out["step_ids"] = "feedback", fb.EnvIndices, fb.StepIDs
			out["rewards"], out["terminated"], out["truncated"] = jsonFloats(fb.Rewards), fb.Terminated, fb.Truncated
			out["obs"] = d.obs(ev, &fb.Obs)
			if e := fb.Episode; e != nil {
				out["episode"] = map[string]any{"r": jsonFloats(e.Return), "l": e.Length, "s": e.Success, "mask": e.Mask}
			}
		}
	case ledger.KindRecv:
		out["len"] = len(ev.Msg)
		if a := ev.Action; a != nil {
			out["type"], out["env_ids"] = "action", a.EnvIDs
			act := map[string]any{"dtype": a.Chunk.DType.String(), "shape": a.Chunk.Shape}
			if d.Whole {
				act["values"] = floats(&a.Chunk)
			}
			out["action"] = act
		}
	}
	if ev.DecodeErr != nil {
		out["decode_error"] = ev.DecodeErr.Error()
	}
	return d.enc.Encode(out)
}

func (d *Dumper) obs(ev *Event, o *wire.Observation) map[string]any {
	k := 0
	arrays := func(g []wire.NamedArray) map[string]any {
		m := map[string]any{}
		for i := range g {
			a := &g[i].Array
			v := map[string]any{"dtype": a.DType.String(), "shape": a.Shape}
			if k < len(ev.RowDigest) {
				v["row_adler32"] = ev.RowDigest[k]
			}
			if d.Whole && len(ev.Cuts) == 0 {
				v["values"] = floats(a)
			}
			k++
			m[g[i].Name] = v
		}
		return m
	}
	return map[string]any{"images": arrays(o.Images), "states": arrays(o.States), "text": o.Text}
}

// floats returns an array's elements as float64s, in order.
func floats(a *wire.Array) jsonFloats {
	n, err := wire.Elements(a.Shape)
	if err != nil || a.DType.Kind == 'U' {
		return nil
	}
	out := make(jsonFloats, n)
	for i := range out {
		out[i] = a.Float64(i)
	}
	return out
}

func metaJSON(m *wire.Metadata) []byte {
	js, _, err := wire.AppendJSON(nil, m.Raw)
	if err != nil {
		return []byte("null")
	}
	return js
}

// jsonFloats is a float array as JSON, with NaN and the
// infinities as the strings "NaN", "Inf" and "-Inf" (which Python's
// float() reads): encoding/json refuses them, and one NaN in a server's
// action or a client's reward stopped the dump at that record. A nil one
// is null, as encoding/json writes a nil slice.
type jsonFloats []float64

func (f jsonFloats) MarshalJSON() ([]byte, error) {
	if f == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+8*len(f))
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONFloat(b, v)
	}
	return append(b, ']'), nil
}

func appendJSONFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
