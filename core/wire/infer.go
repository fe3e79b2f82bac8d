package wire

// The infer message (SPEC 5.2, 10.1): Infer and EncodeInfer, the client's
// side; InferMsg and DecodeInfer, a server's (internal/refserver is built on
// them). The observation it carries is in observation.go, the env indices'
// rule in indices.go, the encoder's plan in plan.go.

// Infer is the content of an infer message (SPEC 5.2, 10.1).
type Infer struct {
	EnvIndices []int64
	StepIDs    []int64 // one per env: chunks completed in its episode
	Obs        *Observation
	// ObsRows maps env i (of EnvIndices) to its row in Obs; nil means row i,
	// or, when Reuse is set and Obs has exactly the non-reused rows, the
	// next unreused row.
	ObsRows []int
	// Reuse marks envs whose observation the server already holds (SPEC
	// 10.1); nil sends no reuse key.
	Reuse []bool
}

// EncodeInfer encodes an infer message into m (which it resets).
func EncodeInfer(m *Message, in *Infer) error {
	var v reqView
	in.view(&v)
	if m.planned(&v) {
		return nil
	}
	n := len(in.EnvIndices)
	if n == 0 {
		return invalidf("infer: no env indices; an infer names at least one env")
	}
	if len(in.StepIDs) != n {
		return invalidf("infer: %d step_ids for %d env_indices", len(in.StepIDs), n)
	}
	if in.Reuse != nil && len(in.Reuse) != n {
		return invalidf("infer: %d reuse flags for %d env_indices", len(in.Reuse), n)
	}
	rows, err := m.requestRows("infer", in.EnvIndices, in.Obs, in.ObsRows, in.Reuse)
	if err != nil {
		return err
	}
	keys := 4
	if in.Reuse != nil {
		keys = 5
	}
	m.Map(keys)
	m.raw(strMessageType)
	m.raw(strInfer)
	m.raw(strData)
	if err := m.observation(in.Obs, rows); err != nil {
		return err
	}
	m.envFields(in.EnvIndices, in.StepIDs)
	if in.Reuse != nil {
		m.raw(strReuse)
		m.bools(in.Reuse)
	}
	m.Finish()
	m.planSave(&v)
	return nil
}

// view is the infer as the plan sees it (plan.go): a new field is a row here.
func (in *Infer) view(v *reqView) {
	v.request(planInfer, in.EnvIndices, in.StepIDs, in.Obs, in.ObsRows)
	field(v, srcReuse, cmpFlags, in.Reuse)
}

// InferMsg is an infer message as a server decodes it (SPEC 5.2, 10.1).
//
// Its arrays are views into the message it was decoded from, in the byte
// order the client sent (their DType says which): keep the message alive and
// unmodified while using them. Array.Float64 and Array.Int64 read elements of
// any numeric dtype and byte order.
type InferMsg struct {
	EnvIndices []int64 // n unique, non-negative env indices
	StepIDs    []int64 // n step ids (SPEC 5.2: accepted and otherwise ignored)
	// Reuse is the reuse key of SPEC 10.1, one flag per env, or nil when the
	// message has none.
	Reuse []bool
	// Obs is the observation, batched to the rows that are not reused, in
	// env_indices order. Obs.TextAsStrings records which form of SPEC 3.4 the
	// text came in; Obs.Text is nil when the message's text was nil.
	Obs Observation
}

// Sent is the number of rows the observation carries: n minus reused rows.
func (in *InferMsg) Sent() int {
	sent := len(in.EnvIndices)
	for _, r := range in.Reuse {
		if r {
			sent--
		}
	}
	return sent
}

// DecodeInfer decodes an infer message, as a server receives it. It does not
// modify msg; the result views it. Every error wraps ErrMalformed and names
// the key it is about. It checks what SPEC 5.2 and 10.1 say an infer is:
// env_indices and step_ids one-dimensional integer arrays of one length n >=
// 1, env indices unique and non-negative, reuse (when present) a bool array
// of length n, and an observation map of images, states and text whose every
// array leads with the number of rows not reused. Unknown top-level keys are
// ignored.
func DecodeInfer(msg []byte) (*InferMsg, error) {
	f, err := clientFields(msg, TypeInfer, []string{"data", "env_indices", "step_ids", "reuse"})
	if err != nil {
		return nil, err
	}
	in := &InferMsg{}
	if in.EnvIndices, in.StepIDs, err = decodeEnvs(TypeInfer, f[1].raw, f[2].raw); err != nil {
		return nil, err
	}
	n := len(in.EnvIndices)
	if f[3].seen {
		if in.Reuse, err = decodeBools("infer.reuse", f[3].raw); err != nil {
			return nil, err
		}
		if len(in.Reuse) != n {
			return nil, malformedf("infer.reuse", "has %d flags for %d env_indices (SPEC 10.1)", len(in.Reuse), n)
		}
	}
	if err = decodeObservation("infer.data", f[0].raw, in.Sent(), &in.Obs); err != nil {
		return nil, err
	}
	return in, nil
}
