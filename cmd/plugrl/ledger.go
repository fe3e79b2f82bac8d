package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/plugrl/libplugrl/internal/ledgertool"
)

const ledgerUsage = `usage: plugrl ledger <verb> FILE [...]
  summary FILE                      connections, exchanges, envs, episodes, chunk sizes,
                                    reconnects and why, latency percentiles, bytes
  audit FILE                        check every SPEC rule a ledger shows; exit 1 on a violation
                                    (notes, likely faults that may be right, do not fail it)
  episodes FILE                     the episode log (CSV: step,slot,episode,return,length)
  compare FILE SERVER_EPISODE_LOG   missing, extra and differing episodes; exit 1 on any
  dump [--arrays] FILE              one JSON line per record (--arrays: values too)
  export FILE --npz DIR             per-env trajectories of a full ledger as .npy files`

// ledgerCmd runs `plugrl ledger`. Exit status: 0 fine, 1 the ledger shows a
// problem (violations, differences), 2 usage or an unreadable file.
func ledgerCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, ledgerUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	verb := args[0]
	fs := flag.NewFlagSet("plugrl ledger "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, ledgerUsage) }
	arrays := fs.Bool("arrays", false, "dump: whole arrays, not summaries")
	npzDir := fs.String("npz", "", "export: the directory to write .npy files into")
	// Flags may come before or after the file.
	var pos []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); errors.Is(err, flag.ErrHelp) {
			return 0 // asked for: the usage is printed
		} else if err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	want := 1
	if verb == "compare" {
		want = 2
	}
	if len(pos) != want {
		fmt.Fprintf(stderr, "plugrl ledger %s: want %d file argument(s), got %d\n%s\n", verb, want, len(pos), ledgerUsage)
		return 2
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	fail := func(err error) int {
		out.Flush()
		fmt.Fprintf(stderr, "plugrl ledger %s: %v\n", verb, err)
		return 2
	}
	file := pos[0]
	// walk gives add each event of the file, saying if the file is truncated.
	walk := func(add func(*ledgertool.Event) error) error {
		truncated, err := ledgertool.Walk(file, add)
		if err == nil && truncated {
			fmt.Fprintf(stderr, "plugrl ledger: %s is truncated (its writer stopped without closing it): read up to its last whole block\n", file)
		}
		return err
	}
	// audited walks the file through an auditor, which gives each episode
	// to onEpisode if that is not nil (else it keeps them, up to
	// ledgertool.MaxEpisodes); n counts the records.
	audited := func(onEpisode func(ledgertool.EpisodeRow)) (a *ledgertool.Auditor, n int, err error) {
		a = ledgertool.NewAuditor()
		a.OnEpisode = onEpisode
		err = walk(func(ev *ledgertool.Event) error { a.Add(ev); n++; return nil })
		return a, n, err
	}
	switch verb {
	case "summary":
		s, a := ledgertool.NewSummary(), ledgertool.NewAuditor()
		a.OnEpisode = s.AddEpisode
		truncated, err := ledgertool.Walk(file, func(ev *ledgertool.Event) error { s.Add(ev); a.Add(ev); return nil })
		if err != nil {
			return fail(err)
		}
		s.Truncated = truncated
		s.Print(out)
		return 0
	case "audit":
		a, n, err := audited(func(ledgertool.EpisodeRow) {})
		if err != nil {
			return fail(err)
		}
		// A file with no whole block read as truncated with no records:
		// that is nothing audited, not a clean run.
		if n == 0 {
			return fail(fmt.Errorf("%s: no record could be read, so nothing was audited (a ledger's first block holds its open record; this file has no whole block)", file))
		}
		for _, v := range a.Violations {
			fmt.Fprintln(out, v)
		}
		if a.Unkept > 0 {
			fmt.Fprintf(out, "... and %d more violation(s), not shown (the first %d are)\n", a.Unkept, ledgertool.MaxViolations)
		}
		// Notes: likely faults that may be right; they do not fail the
		// audit.
		for _, v := range a.Notes {
			fmt.Fprintln(out, "note: "+v.String())
		}
		if a.NotesUnkept > 0 {
			fmt.Fprintf(out, "... and %d more note(s), not shown\n", a.NotesUnkept)
		}
		notes := ""
		if total := len(a.Notes) + a.NotesUnkept; total > 0 {
			notes = fmt.Sprintf("; %d note(s) above, which are not violations", total)
		}
		if total := len(a.Violations) + a.Unkept; total > 0 {
			fmt.Fprintf(out, "%d violation(s) in %d records%s\n", total, n, notes)
			return 1
		}
		fmt.Fprintf(out, "clean: %d records, %d episodes, no violation of the rules a ledger shows (SPEC 4.2, 4.3, 5.1-5.4, 7.6, 10.1)%s\n", n, a.EpisodeCount, notes)
		return 0
	case "episodes":
		// Row by row as the episodes end: a run's may be millions.
		ew := ledgertool.NewEpisodeWriter(out)
		if _, _, err := audited(ew.Write); err != nil {
			return fail(err)
		}
		if err := ew.Close(); err != nil {
			return fail(err)
		}
		return 0
	case "compare":
		a, _, err := audited(nil)
		if err != nil {
			return fail(err)
		}
		if a.EpisodesUnkept > 0 {
			return fail(fmt.Errorf("the ledger has %d episodes; compare keeps at most %d (`plugrl ledger episodes` writes them all as CSV)", a.EpisodeCount, ledgertool.MaxEpisodes))
		}
		f, err := os.Open(pos[1])
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		server, err := ledgertool.ReadEpisodes(f)
		if err != nil {
			return fail(err)
		}
		diffs := ledgertool.CompareEpisodes(a.Episodes, server)
		for _, d := range diffs {
			switch d.What {
			case "missing":
				fmt.Fprintf(out, "missing: env %d episode %d (server: return %g, length %d) is not in the ledger\n", d.Server.Slot, d.Server.Episode, d.Server.Return, d.Server.Length)
			case "extra":
				fmt.Fprintf(out, "extra: env %d episode %d (ledger: return %g, length %d) is not in the server's log\n", d.Client.Slot, d.Client.Episode, d.Client.Return, d.Client.Length)
			case "twice":
				if d.Log == "server" {
					fmt.Fprintf(out, "twice: env %d episode %d is in the server's log twice (several clients at once?); its first row is the one compared\n", d.Server.Slot, d.Server.Episode)
				} else {
					fmt.Fprintf(out, "twice: env %d episode %d is in the ledger twice\n", d.Client.Slot, d.Client.Episode)
				}
			default:
				fmt.Fprintf(out, "differs: env %d episode %d: ledger return %g length %d, server return %g length %d\n", d.Client.Slot, d.Client.Episode, d.Client.Return, d.Client.Length, d.Server.Return, d.Server.Length)
			}
		}
		fmt.Fprintf(out, "%d episodes in the ledger, %d in the server's log, %d differences\n", len(a.Episodes), len(server), len(diffs))
		if len(diffs) > 0 {
			return 1
		}
		return 0
	case "dump":
		d := ledgertool.NewDumper(out, *arrays)
		if err := walk(d.Add); err != nil {
			return fail(err)
		}
		return 0
	case "export":
		if *npzDir == "" {
			fmt.Fprintln(stderr, "plugrl ledger export: --npz DIR is required")
			return 2
		}
		x := ledgertool.NewExporter()
		if err := walk(x.Add); err != nil {
			return fail(err)
		}
		files, err := x.Write(*npzDir)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(out, "wrote %d files to %s\n", len(files), *npzDir)
		return 0
	}
	fmt.Fprintf(stderr, "plugrl ledger: unknown verb %q\n%s\n", verb, ledgerUsage)
	return 2
}
