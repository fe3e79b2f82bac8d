package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestLedgerExitStatus: `plugrl ledger audit` and `compare` say what they
// found in their exit status, which is all tests/ledger.sh,
// tests/cartpole_client.sh and tests/rust.sh look at (a clean audit, equal
// episodes). With either command's `return 1` made `return 0`, every test
// still passed: each shell check of a ledger would have passed whatever
// the ledger held.
func TestLedgerExitStatus(t *testing.T) {
	const testdata = "../../core/ledger/testdata/"
	var out, errs strings.Builder
	ledger := func(args ...string) int {
		t.Helper()
		out.Reset()
		errs.Reset()
		return run(append([]string{"ledger"}, args...), &out, &errs)
	}

	// v4-digest.ledger is a crafted ledger with violations (a feedback
	// for an env that holds no chunk, and more); v4-same.ledger, written
	// by a test without a connect record, breaks only the ledger's own
	// rule; a connection that opens and closes is clean.
	if s := ledger("audit", testdata+"v4-digest.ledger"); s != 1 || !strings.Contains(out.String(), "violation(s) in") ||
		!strings.Contains(out.String(), "SPEC 4.3: feedback for env 1, which holds no action chunk") {
		t.Fatalf("audit of a ledger with violations: status %d (want 1), output %q", s, tail(out.String()))
	}
	if s := ledger("audit", testdata+"v4-same.ledger"); s != 1 || !strings.Contains(out.String(), "not as the ledger is written: a message sent with no connection open") {
		t.Fatalf("audit of a ledger with no connect record: status %d (want 1), output %q %q", s, tail(out.String()), errs.String())
	}
	if s := ledger("audit", openAndClose(t)); s != 0 || !strings.HasPrefix(out.String(), "clean: ") {
		t.Fatalf("audit of a clean ledger: status %d (want 0), output %q %q", s, tail(out.String()), errs.String())
	}

	// A file with its header and no whole block (garbage after it) has no
	// record to audit: an error, not "clean" with status 0, which it was.
	head, err := os.ReadFile(testdata + "v4-same.ledger")
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "header-only.ledger")
	if err := os.WriteFile(empty, append(head[:16:16], "garbage"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := ledger("audit", empty); s != 2 || !strings.Contains(errs.String(), "nothing was audited") {
		t.Fatalf("audit of a file with no readable record: status %d (want 2), output %q %q", s, tail(out.String()), errs.String())
	}

	// compare: the ledger's own episode log is equal; one with a return
	// changed, or a row left out, is not.
	if s := ledger("episodes", testdata+"v4-digest.ledger"); s != 0 {
		t.Fatalf("episodes: status %d: %s", s, errs.String())
	}
	csv := out.String()
	lines := strings.Split(strings.TrimSuffix(csv, "\n"), "\n")
	if len(lines) < 3 || lines[0] != "step,slot,episode,return,length" {
		t.Fatalf("episodes: want a header and at least two rows, got %q", csv)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, csv, want string
		status          int
	}{
		{"equal", csv, "0 differences", 0},
		{"return changed", strings.Replace(csv, lines[1], changeReturn(t, lines[1]), 1), "differs: env", 1},
		{"row left out", strings.Replace(csv, lines[2]+"\n", "", 1), "extra: env", 1},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".csv")
		if err := os.WriteFile(path, []byte(c.csv), 0o644); err != nil {
			t.Fatal(err)
		}
		if s := ledger("compare", testdata+"v4-digest.ledger", path); s != c.status || !strings.Contains(out.String(), c.want) {
			t.Errorf("compare with the episode log %s: status %d (want %d), output %q (want %q)", c.name, s, c.status,
				tail(out.String()), c.want)
		}
	}
}

// changeReturn adds 1 to the return of an episode log's row.
func changeReturn(t *testing.T, row string) string {
	f := strings.Split(row, ",")
	if len(f) != 5 {
		t.Fatalf("episode row %q", row)
	}
	f[3] += "1" // 10 -> 101: another return
	return strings.Join(f, ",")
}

// tail is the end of a command's output, for a message.
func tail(s string) string {
	if len(s) > 300 {
		return "..." + s[len(s)-300:]
	}
	return s
}

// openAndClose writes a ledger of one connection that opens (its
// metadata) and closes: clean.
func openAndClose(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clean.ledger")
	w, err := ledger.Create(path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var meta wire.Message
	if err := wire.EncodeMetadata(&meta, &wire.Metadata{}); err != nil {
		t.Fatal(err)
	}
	w.Connected("ws://127.0.0.1:1", "127.0.0.1:1", meta.AppendTo(nil))
	w.Closed("local", 1000, "", "the client closed", nil, false)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
