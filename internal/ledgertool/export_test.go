package ledgertool_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// fullLedger records, at full level, one exchange per observation given
// (infer, a [1, 1, 1] action, feedback of the same observation) for env 0,
// and returns the ledger's path.
func fullLedger(t *testing.T, obs []*wire.Observation) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{Level: ledger.Full})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range obs {
		recordExchange(t, w, []int64{0}, o)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordExchange records one exchange of envs (step id 0) in w: an infer
// of o, an action chunk of [1, len(envs), 1] float32 zeros, and feedback
// of o with reward 1 each, no episode ending.
func recordExchange(t testing.TB, w *ledger.Writer, envs []int64, o *wire.Observation) {
	t.Helper()
	n := len(envs)
	steps, rewards, flags := make([]int64, n), make([]float32, n), make([]bool, n)
	for i := range rewards {
		rewards[i] = 1
	}
	var in, fb, act wire.Message
	if err := wire.EncodeInfer(&in, &wire.Infer{EnvIndices: envs, StepIDs: steps, Obs: o}); err != nil {
		t.Fatal(err)
	}
	w.Sent(&in, o)
	chunk := wire.Array{DType: wire.Float32, Shape: []int{1, n, 1}, Data: make([]byte, 4*n)}
	if err := wire.EncodeAction(&act, envs, &chunk); err != nil {
		t.Fatal(err)
	}
	w.Received(act.AppendTo(nil))
	if err := wire.EncodeFeedback(&fb, &wire.Feedback{EnvIndices: envs, StepIDs: steps, Obs: o, Rewards: rewards, Terminated: flags, Truncated: flags}); err != nil {
		t.Fatal(err)
	}
	w.Sent(&fb, o)
}

// states is an observation of one row per array, each of width floats.
func states(width int, names ...string) *wire.Observation {
	o := &wire.Observation{}
	for _, n := range names {
		o.States = append(o.States, wire.NamedArray{Name: n, Array: wire.Array{DType: wire.Float32, Shape: []int{1, width}, Data: make([]byte, 4*width)}})
	}
	return o
}

// export walks a ledger into an Exporter and writes it to dir.
func export(path, dir string) error {
	x := ledgertool.NewExporter()
	if _, err := ledgertool.Walk(path, x.Add); err != nil {
		return err
	}
	_, err := x.Write(dir)
	return err
}

// TestExportHostileLedger: a ledger whose array names or shapes would make
// export write outside its directory, panic, or write .npy files whose
// headers do not match their data, fails with an error saying why.
func TestExportHostileLedger(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  []*wire.Observation
		want string
	}{
		{"a name that climbs out", []*wire.Observation{states(1, "a/../../../escaped")}, "cannot be part of a file name"},
		{"a name with a backslash", []*wire.Observation{states(1, `..\x`)}, "cannot be part of a file name"},
		{"names joined to look the same", []*wire.Observation{states(1, "a", "b"), states(1, "a,states.b")}, "arrays changed"},
		{"rows that change width", []*wire.Observation{states(4, "x"), states(1, "x")}, "changed from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "a", "b", "out")
			err := export(fullLedger(t, tc.obs), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !strings.HasPrefix(p, dir+string(filepath.Separator)) {
					t.Errorf("export wrote %s, outside %s", p, dir)
				}
				return nil
			})
		})
	}
	// The control: a ledger whose arrays keep their names and shapes exports.
	dir := t.TempDir()
	if err := export(fullLedger(t, []*wire.Observation{states(2, "x"), states(2, "x")}), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "env0_states.x.npy")); err != nil {
		t.Fatal(err)
	}
}

// TestCompareEpisodesNaN: a NaN return on one side is a difference (every
// comparison with NaN is false, and hid it); NaN against NaN and equal
// infinities are not, nor a return of 0 against a rounding's 1e-9 (the
// tolerance is absolute near zero, not relative to 0).
func TestCompareEpisodesNaN(t *testing.T) {
	row := func(ret float64) []ledgertool.EpisodeRow {
		return []ledgertool.EpisodeRow{{Slot: 0, Episode: 1, Return: ret, Length: 5}}
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		client, server float64
		differ         bool
	}{{nan, 1, true}, {1, nan, true}, {nan, nan, false}, {inf, inf, false}, {inf, 1, true}, {1, 1 + 1e-9, false}, {1e-9, 0, false}} {
		if got := len(ledgertool.CompareEpisodes(row(tc.client), row(tc.server))) > 0; got != tc.differ {
			t.Errorf("client %v, server %v: differ %v, want %v", tc.client, tc.server, got, tc.differ)
		}
	}
}

// TestCompareEpisodesTwice: a log that holds an episode twice (a server's
// log of two clients at once, each with its own env 0) is reported, where
// the later row used to replace the earlier one silently.
func TestCompareEpisodesTwice(t *testing.T) {
	ep := ledgertool.EpisodeRow{Slot: 0, Episode: 0, Return: 1, Length: 2}
	other := ledgertool.EpisodeRow{Slot: 0, Episode: 0, Return: 7, Length: 9}
	d := ledgertool.CompareEpisodes([]ledgertool.EpisodeRow{ep}, []ledgertool.EpisodeRow{ep, other})
	if len(d) != 1 || d[0].What != "twice" || d[0].Log != "server" || d[0].Server != other {
		t.Fatalf("server log with an episode twice: %+v", d)
	}
	d = ledgertool.CompareEpisodes([]ledgertool.EpisodeRow{ep, ep}, []ledgertool.EpisodeRow{ep})
	if len(d) != 1 || d[0].What != "twice" || d[0].Log != "ledger" {
		t.Fatalf("ledger with an episode twice: %+v", d)
	}
}

// TestAuditKeepsBoundedViolations: past MaxViolations the audit counts
// violations instead of keeping each as a string (a crafted ledger repeats
// a faulty message millions of times in a few kilobytes).
func TestAuditKeepsBoundedViolations(t *testing.T) {
	a := ledgertool.NewAuditor()
	bad := errors.New("not a message")
	const n = ledgertool.MaxViolations + 5
	a.Add(&ledgertool.Event{Record: &ledger.Record{Kind: ledger.KindConnect}})
	for i := 1; i <= n; i++ {
		a.Add(&ledgertool.Event{Record: &ledger.Record{Kind: ledger.KindSend, Seq: i}, DecodeErr: bad})
	}
	if len(a.Violations) != ledgertool.MaxViolations || a.Unkept != 5 {
		t.Fatalf("kept %d violations and counted %d more, want %d and 5", len(a.Violations), a.Unkept, ledgertool.MaxViolations)
	}
}

// TestExportNamesOneFile: two arrays whose files the file system takes
// for one (on macOS's or Windows' case-insensitive file systems, "Pos"
// and "pos") fail the export, naming both, instead of the second's
// trajectory silently replacing the first's. This file system is case
// sensitive, so the alias is made as the test's own: a symbolic link from
// the second name to the first, which the export follows as it would a
// case-insensitive lookup. A second export into the same directory, whose
// files all exist then, is not taken for such a collision.
func TestExportNamesOneFile(t *testing.T) {
	for _, order := range [][]string{{"Pos", "pos"}, {"pos", "Pos"}} {
		t.Run(strings.Join(order, "_then_"), func(t *testing.T) {
			dir := t.TempDir()
			first, second := "env0_states."+order[0]+".npy", "env0_states."+order[1]+".npy"
			if err := os.Symlink(first, filepath.Join(dir, second)); err != nil {
				t.Fatal(err)
			}
			led := fullLedger(t, []*wire.Observation{states(2, order...)})
			err := export(led, dir)
			if err == nil || !strings.Contains(err.Error(), first+" and "+second+" are one file") {
				t.Fatalf("got %v, want the export refused, naming %s and %s", err, first, second)
			}
			// Without the alias the same ledger exports both, twice over.
			clean := t.TempDir()
			for range 2 {
				if err := export(led, clean); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range []string{first, second} {
				if _, err := os.Stat(filepath.Join(clean, name)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestExportReplacesHardLinkedFiles: an earlier export's directory whose
// identical files a deduplicating tool hard-linked (env0_terminated.npy
// and env0_truncated.npy often are) exports again: each file is replaced,
// not written through the link, so neither takes the other's data and
// the two are not taken for one name the file system folds.
func TestExportReplacesHardLinkedFiles(t *testing.T) {
	dir := t.TempDir()
	led := fullLedger(t, []*wire.Observation{states(2, "x")})
	if err := export(led, dir); err != nil {
		t.Fatal(err)
	}
	term, trunc := filepath.Join(dir, "env0_terminated.npy"), filepath.Join(dir, "env0_truncated.npy")
	if err := os.Remove(trunc); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(term, trunc); err != nil {
		t.Fatal(err)
	}
	if err := export(led, dir); err != nil {
		t.Fatalf("export into a directory of hard-linked files: %v", err)
	}
	a, err := os.Stat(term)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(trunc)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(a, b) {
		t.Fatal("the export wrote through the hard link: terminated and truncated are still one file")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.partial")); len(left) > 0 {
		t.Fatalf("export left %v behind", left)
	}
}

// TestExportRenameFailureLeavesNoPartial: when a file cannot take its
// name (here a directory with a file in it already has it, so the rename
// over it fails), the export fails naming the file, and the file it had
// written beside the name is removed, not left as a stray .partial.
func TestExportRenameFailureLeavesNoPartial(t *testing.T) {
	dir := t.TempDir()
	led := fullLedger(t, []*wire.Observation{states(2, "x")})
	taken := filepath.Join(dir, "env0_action.npy")
	if err := os.MkdirAll(filepath.Join(taken, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := export(led, dir)
	if err == nil {
		t.Fatal("export over a directory that has the file's name succeeded")
	}
	if !strings.Contains(err.Error(), "env0_action.npy") {
		t.Fatalf("the error does not name the file: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.partial")); len(left) > 0 {
		t.Fatalf("export left %v behind after its rename failed", left)
	}
	if _, err := os.Stat(filepath.Join(taken, "keep")); err != nil {
		t.Fatalf("the directory in the way was changed: %v", err)
	}
}
