// Command plugrl-hostile runs a PlugRL server that misbehaves in one chosen
// way (internal/hostile), for testing that a client library keeps its
// promises against a server that lies, floods or stalls:
//
//	plugrl-hostile --scenario NAME [--addr 127.0.0.1:0] [--h H --d D]
//	               [--zero-dim-h N] [--action-bytes N] [--action-delay DUR] [--slow-every N] [--stray-gap DUR]
//	               [--trickle-bytes N --trickle-every DUR] [--byte-every DUR] [--vanish-after N] [--vanish-for DUR] [--loss PERCENT]
//	               [--max-conn-time DUR] [--max-time 5m] [--watch-stdin=true] [-v]
//	               [--tls-cert FILE --tls-key FILE | --tls-self-signed FILE [--tls-valid-in DUR]]
//	plugrl-hostile --list
//
// It prints exactly one line to stdout, its URL ("ws://127.0.0.1:PORT"), as
// soon as it is listening, so that a script can read the line and connect.
// With --tls-cert and --tls-key (PEM files), or --tls-self-signed FILE (a
// certificate made for the run, valid for 127.0.0.1, whose PEM is written
// to FILE for the client's CA file), it serves wss:// instead and prints
// "wss://127.0.0.1:PORT": every scenario then runs inside TLS, as the
// package documentation of internal/hostile says.
// It serves until SIGTERM or SIGINT, until its stdin reaches end of file, or
// until --max-time passes, whichever comes first. Watching stdin means that
// a test harness which starts it with a pipe and then dies (closing the
// pipe) does not leave it running. When stdin is /dev/null — a background
// job in a non-interactive shell gets that — it would read end of file at
// once, so stdin is then not watched; --watch-stdin=false turns the watch
// off explicitly.
//
// --list prints the scenario names, one a line. Logs, with -v, go to stderr.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/plugrl/libplugrl/internal/hostile"
	"github.com/plugrl/libplugrl/internal/testcert"
)

// options is a parsed command line.
type options struct {
	cfg        hostile.Config
	maxTime    time.Duration
	watchStdin bool
	list       bool
}

func main() {
	o, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2)
	}
	if o.list {
		for _, sc := range hostile.Scenarios() {
			fmt.Println(sc)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var stdin io.Reader
	if o.watchStdin && !isDevNull(os.Stdin) {
		stdin = os.Stdin
	}
	if err := serve(ctx, o, stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "plugrl-hostile:", err)
		os.Exit(1)
	}
}

// parseArgs parses the command line. Usage and errors go to stderr; -help
// returns flag.ErrHelp.
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("plugrl-hostile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	c := &o.cfg
	var names []string
	for _, sc := range hostile.Scenarios() {
		names = append(names, string(sc))
	}
	scenario := fs.String("scenario", "", "how to misbehave: "+strings.Join(names, ", "))
	fs.StringVar(&c.Addr, "addr", hostile.DefaultAddr, "listen address; only a loopback address (127.0.0.0/8), port 0 picks a free one")
	fs.IntVar(&c.H, "h", 1, "action_horizon in metadata, and the actions' H (normal, slow-action, close-no-reply, stall-mid-frame, width-change)")
	fs.IntVar(&c.D, "d", 1, "action_dim in metadata, and the actions' D (also big-action-one-env's; width-change's even connections: D+2)")
	fs.Int64Var(&c.ZeroDimH, "zero-dim-h", hostile.DefaultZeroDimH, "zero-dim-action: the H claimed")
	fs.IntVar(&c.ActionBytes, "action-bytes", hostile.DefaultActionBytes, "big-action-one-env: action bytes per env")
	fs.DurationVar(&c.ActionDelay, "action-delay", hostile.DefaultActionDelay, "slow-action: delay before each action")
	fs.IntVar(&c.SlowEvery, "slow-every", 0, "slow-action: delay only every N-th infer of a connection, answer the others at once (0: every one)")
	fs.DurationVar(&c.StrayGap, "stray-gap", 0, "double-action: delay before the second copy of each action (0: in the same write)")
	fs.IntVar(&c.VanishAfter, "vanish-after", hostile.DefaultVanishAfter, "vanish, vanish-unacked: infers the first connection answers before it vanishes (vanish-unacked: as it sends that many-th action)")
	fs.IntVar(&c.LossPercent, "loss", hostile.DefaultLossPercent, "lossy: percent of the client's segments dropped at random, 1 to 100")
	fs.DurationVar(&c.VanishFor, "vanish-for", 0, "vanish, vanish-unacked: come back after this long, as a network that returns (0: gone for good)")
	fs.Uint64Var(&c.Seed, "seed", 1, "garble, garble-metadata, garble-frames: the seed of their draws (with each connection's number)")
	fs.IntVar(&c.TrickleBytes, "trickle-bytes", hostile.DefaultTrickleBytes, "huge-length: payload bytes per trickle")
	fs.DurationVar(&c.TrickleEvery, "trickle-every", hostile.DefaultTrickleEvery, "huge-length: interval between trickles")
	fs.DurationVar(&c.ByteEvery, "byte-every", hostile.DefaultByteEvery, "slow-handshake: interval between bytes of the 101 response")
	fs.Int64Var(&c.HeaderBound, "header-bound", hostile.DefaultHeaderBound, "endless-header: bytes of header line before giving up")
	fs.IntVar(&c.RecvBuffer, "recv-buffer", hostile.DefaultRecvBuffer, "no-read, ping-flood: SO_RCVBUF of each connection")
	fs.DurationVar(&c.MaxConnTime, "max-conn-time", hostile.DefaultMaxConnTime, "bound on every connection")
	fs.DurationVar(&o.maxTime, "max-time", 5*time.Minute, "exit after this long")
	fs.BoolVar(&o.watchStdin, "watch-stdin", true, "exit when stdin reaches end of file (ignored when stdin is /dev/null)")
	fs.BoolVar(&o.list, "list", false, "print the scenario names and exit")
	tlsCert := fs.String("tls-cert", "", "serve wss:// with this PEM certificate (chain); with --tls-key")
	tlsKey := fs.String("tls-key", "", "the PEM private key of --tls-cert")
	tlsSelfSigned := fs.String("tls-self-signed", "", "serve wss:// with a new self-signed certificate for 127.0.0.1, ::1 and localhost, valid for a day, and write its PEM to this file (a client's CA file)")
	tlsValidIn := fs.Duration("tls-valid-in", 0, "with --tls-self-signed: the certificate is valid only from this long after the start (the server of a client whose clock is behind)")
	verbose := fs.Bool("v", false, "log connections to stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*options, error) {
		err := fmt.Errorf(format, args...)
		fmt.Fprintln(stderr, "plugrl-hostile:", err)
		fs.Usage()
		return nil, err
	}
	if fs.NArg() > 0 {
		return fail("unexpected arguments %q", fs.Args())
	}
	if o.list {
		return o, nil
	}
	if *scenario == "" {
		return fail("--scenario is required")
	}
	sc, err := hostile.ParseScenario(*scenario)
	if err != nil {
		return fail("%v", err)
	}
	c.Scenario = sc
	if c.H < 1 || c.D < 1 {
		return fail("--h and --d must be at least 1")
	}
	if o.maxTime <= 0 {
		return fail("--max-time must be positive")
	}
	if c.LossPercent < 1 || c.LossPercent > 100 {
		// hostile.Config takes 0 for its default, 20: --loss 0 would lose a fifth.
		return fail("--loss must be 1 to 100 (no loss at all is --scenario normal)")
	}
	if c.TLS, err = testcert.ServerConfig(*tlsCert, *tlsKey, *tlsSelfSigned, *tlsValidIn); err != nil {
		return fail("%v", err)
	}
	if *verbose {
		c.Logf = func(format string, args ...any) {
			fmt.Fprintf(stderr, "plugrl-hostile: "+format+"\n", args...)
		}
	}
	return o, nil
}

// serve runs the server: it prints the URL line to stdout, then serves
// until ctx is done, stdin (when not nil) reaches end of file, or
// o.maxTime passes.
func serve(ctx context.Context, o *options, stdin io.Reader, stdout, stderr io.Writer) error {
	s, err := hostile.Listen(o.cfg)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	fmt.Fprintln(out, s.URL())
	if err := out.Flush(); err != nil {
		s.Close()
		return fmt.Errorf("printing the URL: %v", err)
	}
	eof := make(chan struct{})
	if stdin != nil {
		// Left running if stdin never ends: it holds nothing but the read.
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			close(eof)
		}()
	}
	timer := time.NewTimer(o.maxTime)
	defer timer.Stop()
	var why string
	select {
	case <-ctx.Done():
		why = "signalled"
	case <-eof:
		why = "stdin closed"
	case <-timer.C:
		why = fmt.Sprintf("--max-time %v passed", o.maxTime)
	}
	err = s.Close()
	fmt.Fprintf(stderr, "plugrl-hostile: %s: %s; %+v\n", o.cfg.Scenario, why, s.Stats())
	return err
}

// isDevNull reports whether f is /dev/null, which reads end of file at once.
func isDevNull(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}
