// Command plugrl is libplugrl's command line.
//
//	plugrl serve [--addr 127.0.0.1:8000] [--horizon 8] [--action-dim 7]
//	             [--action-dtype float32|float64] [--stop-after N]
//	             [--features reuse-feedback-obs] [--policy zero|probe|random|cem]
//	             [--feedback-timeout 60s] [--max-conns 1024] [--quiet]
//	             [--seed N] [--population N] [--elite-frac F] [--init-std S]
//	             [--episode-log FILE]
//	plugrl ledger summary|audit|episodes|dump FILE
//	plugrl ledger compare FILE SERVER_EPISODE_LOG
//	plugrl ledger export FILE --npz DIR
//
// serve runs the reference server (internal/refserver) until SIGINT, SIGTERM or
// the end of the run (--stop-after exchanges), printing its ws:// URL as the
// first line of stdout and a summary at the end. The first signal ends the
// run with plugrl-server-stop; a signal while the server then closes its
// connections (after a first signal, or after the run ended) exits at
// once, with status 1. A flag value
// out of range is refused with exit status 2, never replaced by a default.
// The server is deliberately strict: a test peer, it closes with a resync
// on some messages SPEC only tolerates (step_ids not an integer array of
// length n, keys SPEC does not define inside data and the observation).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/learn/cem"
	"github.com/plugrl/libplugrl/internal/refserver"
	"github.com/plugrl/libplugrl/internal/testcert"
)

// commands maps a subcommand to its entry point, which gets the remaining
// arguments and returns the exit status.
var commands = map[string]struct {
	run     func(args []string, stdout, stderr io.Writer) int
	summary string
}{
	"serve":  {serve, "run the reference PlugRL training server"},
	"ledger": {ledgerCmd, "read a client's ledger: summary, audit, episodes, compare, dump, export"},
}

// policyOptions are the serve flags a policy's constructor may use.
type policyOptions struct {
	seed       int64
	population int
	eliteFrac  float64
	initStd    float64
	out        io.Writer // serve's stdout, for a learner's progress table
}

// policies maps --policy names to constructors.
var policies = map[string]struct {
	make    func(o policyOptions) refserver.Policy
	summary string
}{
	"zero":  {func(policyOptions) refserver.Policy { return refserver.ZeroPolicy{} }, "all-zero actions"},
	"probe": {func(policyOptions) refserver.Policy { return refserver.ProbePolicy{} }, "SPEC 8.1 position-encoding actions: 10000 k + 10 env + d"},
	"random": {func(o policyOptions) refserver.Policy { return refserver.NewRandomPolicy(o.seed) },
		"actions uniform in [-1, 1] (--seed): a baseline"},
	"cem": {func(o policyOptions) refserver.Policy {
		return cem.New(cem.Config{Population: o.population, EliteFrac: o.eliteFrac, InitStd: o.initStd, Seed: o.seed, Out: o.out})
	}, "learns: the cross-entropy method over linear policies, scored by episode returns (--seed, --population, --elite-frac, --init-std); prints a table per iteration"},
}

// notifySignals and exit are serve's hooks into the process, replaced by
// tests.
var (
	notifySignals = func(c chan<- os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }
	exit          = os.Exit
)

// features lists the --features names the server implements: metadata must
// not offer what the server does not do.
var features = []string{refserver.FeatureReuseFeedbackObs}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "plugrl: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: plugrl <command> [flags]")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
}

func policyNames() string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugrl serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8000", "listen address; port 0 picks a free one")
	horizon := fs.Int("horizon", 8, "action horizon H")
	actionDim := fs.Int("action-dim", 7, "action width da")
	dtype := fs.String("action-dtype", "float32", "action dtype: float32, float64, or a numpy typestr such as >f8")
	stopAfter := fs.Int("stop-after", 0, "end the run with plugrl-server-stop after this many exchanges (0: never)")
	featureList := fs.String("features", "", "comma-separated features to offer: "+strings.Join(features, ", "))
	policy := fs.String("policy", "zero", "policy: "+policyNames())
	feedbackTimeout := fs.Duration("feedback-timeout", refserver.DefaultFeedbackTimeout, "close with \"Feedback timeout\" after this long without a feedback")
	maxMessage := fs.Int64("max-message", refserver.DefaultMaxMessage, "largest message taken or sent, in bytes; a larger one, or an infer whose action would be, is closed with 1009 (0: no limit)")
	maxConns := fs.Int("max-conns", refserver.DefaultMaxConns, "most connections served at once; one more is refused with HTTP 503 and Retry-After: 1, 64 refusals at a time, and past those closed unanswered (0: no limit)")
	quiet := fs.Bool("quiet", false, "do not log connections and closes to stderr")
	episodeLog := fs.String("episode-log", "", "write an episode log to this file, for plugrl ledger compare: CSV in plugrl-bridges' columns step,slot,episode,return,length, then conn; "+
		"not the bridge's log: slot is the env index on connection conn, and length is info.episode.l when the client sends it, else the number of chunks fed back (not steps)")
	seed := fs.Int64("seed", 1, "seed of the random and cem policies")
	population := fs.Int("population", 32, "cem: candidate policies per iteration")
	eliteFrac := fs.Float64("elite-frac", 0.2, "cem: fraction of the population the next iteration is fit to")
	initStd := fs.Float64("init-std", 1, "cem: initial standard deviation of every parameter")
	tlsCert := fs.String("tls-cert", "", "serve wss:// with this PEM certificate (chain); with --tls-key")
	tlsKey := fs.String("tls-key", "", "the PEM private key of --tls-cert")
	tlsSelfSigned := fs.String("tls-self-signed", "", "serve wss:// with a new self-signed certificate for 127.0.0.1, ::1 and localhost, valid for a day, and write its PEM to this file (a client's CA file; tests only)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: plugrl serve [flags]

Runs the reference PlugRL training server until SIGINT or SIGTERM or the
end of the run (--stop-after; a signal while it then closes its
connections exits at once, status 1), printing its URL
first and a summary last. It is deliberately strict: a test peer, it closes
with a resync on some messages SPEC only tolerates (step_ids not an integer
array of length n, keys SPEC does not define inside data and the
observation).

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "plugrl serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var dt wire.DType
	switch *dtype {
	case "float32", "f4":
		dt = wire.Float32
	case "float64", "f8":
		dt = wire.Float64
	default:
		var err error
		if dt, err = wire.ParseDType([]byte(*dtype)); err != nil || !dt.Numeric() {
			fmt.Fprintf(stderr, "plugrl serve: --action-dtype %q: want float32, float64 or a numeric typestr\n", *dtype)
			return 2
		}
	}
	p, ok := policies[*policy]
	if !ok {
		fmt.Fprintf(stderr, "plugrl serve: unknown --policy %q; known: %s\n", *policy, policyNames())
		return 2
	}
	var feats []string
	for _, f := range strings.Split(*featureList, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(features, f) {
			fmt.Fprintf(stderr, "plugrl serve: --features: unknown feature %q; this server implements: %s\n", f, strings.Join(features, ", "))
			return 2
		}
		feats = append(feats, f)
	}
	// Each check refuses what would otherwise be silently replaced by a
	// default (refserver.New, cem.New) or ignored.
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{*horizon < 1 || *actionDim < 1, "--horizon and --action-dim must be positive"},
		{*stopAfter < 0, "--stop-after must be 0 (never) or positive"},
		{*feedbackTimeout <= 0, "--feedback-timeout must be positive"},
		{*maxConns < 0, "--max-conns must be 0 (no limit) or positive"},
		{*maxMessage < 0, "--max-message must be 0 (no limit) or positive"},
		{*population < 1, "--population must be positive"},
		{!(*eliteFrac > 0 && *eliteFrac <= 1), "--elite-frac must be in (0, 1]"},
		{!(*initStd > 0) || math.IsInf(*initStd, 1), "--init-std must be positive and finite"},
	} {
		if c.bad {
			fmt.Fprintln(stderr, "plugrl serve: "+c.msg)
			return 2
		}
	}
	if *maxMessage == 0 {
		*maxMessage = -1 // refserver: negative is no limit, zero the default
	}
	if *maxConns == 0 {
		*maxConns = -1 // refserver: negative is no limit, zero the default
	}
	cfg := refserver.Config{
		Horizon:         *horizon,
		ActionDim:       *actionDim,
		ActionDType:     dt,
		StopAfter:       *stopAfter,
		Features:        feats,
		Policy:          p.make(policyOptions{seed: *seed, population: *population, eliteFrac: *eliteFrac, initStd: *initStd, out: stdout}),
		FeedbackTimeout: *feedbackTimeout,
		MaxConns:        *maxConns,
		MaxMessage:      *maxMessage,
		MaxLog:          -1, // a long run would otherwise keep every message
	}
	tlsConfig, err := testcert.ServerConfig(*tlsCert, *tlsKey, *tlsSelfSigned, 0)
	if err != nil {
		fmt.Fprintf(stderr, "plugrl serve: %v\n", err)
		return 2
	}
	cfg.TLS = tlsConfig
	if *episodeLog != "" {
		f, err := os.Create(*episodeLog)
		if err != nil {
			fmt.Fprintf(stderr, "plugrl serve: %v\n", err)
			return 1
		}
		defer f.Close()
		cfg.EpisodeLog = f
	}
	if !*quiet {
		logger := log.New(stderr, "plugrl serve: ", log.LstdFlags|log.Lmicroseconds)
		cfg.Logf = logger.Printf
	}
	// Catch signals before printing the URL: a script that reads it and
	// signals at once must not kill the server uncleanly.
	sig := make(chan os.Signal, 2)
	notifySignals(sig)
	defer signal.Stop(sig)
	srv := refserver.New(cfg)
	url, err := srv.Listen(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "plugrl serve: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, url) // os.Stdout is unbuffered: the line is out now

	start := time.Now()
	why := "run stopped"
	signalled := false
	select {
	case s := <-sig:
		why = "signal " + s.String()
		signalled = true
	case <-srv.Done():
	}
	// From here a signal means now: an operator who signals again while
	// the clients are being closed is not kept waiting for them.
	finished := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(stderr, "plugrl serve: %v while closing: exiting now\n", s)
			exit(1)
		case <-finished:
		}
	}()
	if signalled {
		// End the run properly: clients see plugrl-server-stop and exit.
		srv.Stop()
	}
	_ = srv.Close()
	close(finished) // closed: the summary is not cut short
	st := srv.Stats()
	fmt.Fprintf(stdout, "%s after %s: %d connections, %d exchanges, %d feedback rows, %d reused rows, %d resyncs, %d orphan feedback rows\n",
		why, time.Since(start).Round(time.Millisecond), st.Connections, st.Exchanges, st.FeedbackRows, st.ReusedRows, st.Resyncs, st.Orphans)
	return 0
}
