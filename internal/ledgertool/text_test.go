package ledgertool_test

import (
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// textObs is an observation of one text row per env, and, if zeroWidth,
// a state of rows of no bytes beside it.
func textObs(zeroWidth bool, text ...string) *wire.Observation {
	o := &wire.Observation{Text: text}
	if zeroWidth {
		o.States = []wire.NamedArray{{Name: "none", Array: wire.Array{DType: wire.Float32, Shape: []int{len(text), 0}}}}
	}
	return o
}

// TestAuditSwappedTextRows: text is part of the observation (SPEC 5.2:
// images, states and text), which a digest ledger keeps whole. Envs whose
// observation is text (an instruction, a language env), with their rows
// swapped between the feedback and the next infer, break SPEC 5.4's rule
// as swapped state rows do; the audit compared only images and states,
// and passed them. A correct run of such envs, text changing only across
// a reset, audits clean.
func TestAuditSwappedTextRows(t *testing.T) {
	for _, level := range []ledger.Level{ledger.Digest, ledger.Full} {
		for _, zeroWidth := range []bool{false, true} {
			b, path := newBroken(t, refserver.Config{}, level)
			e := []int64{0, 1}
			b.infer(e, []int64{0, 0}, textObs(zeroWidth, "pick the red block", "open the drawer"), nil)
			b.feedback(fb(e, []int64{0, 0}, textObs(zeroWidth, "red block held", "drawer half open"), []float32{1, 1}, []bool{false, false}, nil))
			b.infer(e, []int64{1, 1}, textObs(zeroWidth, "drawer half open", "red block held"), nil) // env 0 gets env 1's row and back
			vs := audit(t, b, path)
			wantViolation(t, vs, "5.4", "env 0's observation is not the one its last feedback sent")
			wantViolation(t, vs, "5.4", "env 1's observation")

			b, path = newBroken(t, refserver.Config{}, level)
			b.infer(e, []int64{0, 0}, textObs(zeroWidth, "pick the red block", "open the drawer"), nil)
			b.feedback(fb(e, []int64{0, 0}, textObs(zeroWidth, "red block held", "drawer open"), []float32{1, 1}, []bool{false, true},
				&wire.Episode{Return: []float64{0, 1}, Length: []int64{0, 1}, Mask: []bool{false, true}}))
			b.infer(e, []int64{1, 0}, textObs(zeroWidth, "red block held", "open the drawer"), nil) // env 1 reset
			if vs := audit(t, b, path); len(vs) != 0 {
				t.Fatalf("%v: a correct run of text envs has violations: %v", level, vs)
			}
		}
	}
}
