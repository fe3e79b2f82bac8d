package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/plugrl/libplugrl/internal/hostile"
)

// The command is tested in-process: parseArgs and serve are all of main but
// the signal wiring.

func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{
		"--scenario", "slow-action", "--h", "4", "--d", "7", "--action-delay", "250ms",
		"--action-bytes", "1024", "--zero-dim-h", "12", "--max-time", "1m", "--watch-stdin=false",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Scenario != hostile.SlowAction || c.H != 4 || c.D != 7 || c.ActionDelay != 250*time.Millisecond ||
		c.ActionBytes != 1024 || c.ZeroDimH != 12 || o.maxTime != time.Minute || o.watchStdin ||
		c.Addr != "127.0.0.1:0" || c.TrickleEvery != hostile.DefaultTrickleEvery {
		t.Fatalf("options %+v", o)
	}
	if o, err := parseArgs([]string{"--list"}, io.Discard); err != nil || !o.list {
		t.Fatalf("--list: %+v, %v", o, err)
	}
	if _, err := parseArgs([]string{"-help"}, io.Discard); err != flag.ErrHelp {
		t.Fatalf("-help: %v", err)
	}
	for _, bad := range [][]string{
		{},
		{"--scenario", "polite"},
		{"--scenario", "normal", "--h", "0"},
		{"--scenario", "lossy", "--loss", "0"}, // Config's 0 is its default, 20
		{"--scenario", "lossy", "--loss", "101"},
		{"--scenario", "normal", "--max-time", "0s"},
		{"--scenario", "normal", "extra"},
		{"--scenario", "normal", "--action-delay", "soon"},
		{"--scenario", "normal", "--tls-cert", "c.pem"},
		{"--scenario", "normal", "--tls-self-signed", "x.pem", "--tls-key", "k.pem"},
	} {
		var stderr bytes.Buffer
		if _, err := parseArgs(bad, &stderr); err == nil {
			t.Errorf("parseArgs(%q) succeeded", bad)
		} else if stderr.Len() == 0 {
			t.Errorf("parseArgs(%q): nothing said on stderr", bad)
		}
	}
}

var urlLine = regexp.MustCompile(`^wss?://127\.0\.0\.1:[0-9]+\n$`)

// run starts serve with a stdin pipe and returns the URL it printed, a
// function that waits for serve's end (and returns stdout's whole text),
// and stdin's writer.
func run(t *testing.T, ctx context.Context, args ...string) (url string, wait func() (string, error), stdinW io.WriteCloser) {
	t.Helper()
	o, err := parseArgs(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := serve(ctx, o, stdinR, outW, io.Discard)
		outW.Close()
		done <- err
	}()
	r := bufio.NewReader(outR)
	line, err := r.ReadString('\n')
	if !urlLine.MatchString(line) {
		t.Fatalf("first stdout line %q, %v", line, err)
	}
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		rest <- string(b)
	}()
	wait = func() (string, error) {
		select {
		case err := <-done:
			return line + <-rest, err
		case <-time.After(2 * time.Second):
			t.Fatal("serve did not return")
			return "", nil
		}
	}
	t.Cleanup(func() { stdinW.Close() })
	return strings.TrimSuffix(line, "\n"), wait, stdinW
}

func TestServeUntilStdinCloses(t *testing.T) {
	url, wait, stdin := run(t, context.Background(), "--scenario", "normal", "--h", "3")
	if !strings.HasPrefix(url, "ws://") {
		t.Fatalf("URL %q without TLS flags", url)
	}
	metadataOver(t, url, nil)
	// Input on stdin is not an end; its end is.
	io.WriteString(stdin, "ignored\n")
	stdin.Close()
	out, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if !urlLine.MatchString(out) {
		t.Fatalf("stdout %q: want exactly the URL line", out)
	}
}

// TestServeTLS: --tls-self-signed FILE serves wss://, and a client that
// trusts the PEM written to FILE gets the metadata.
func TestServeTLS(t *testing.T) {
	pemFile := filepath.Join(t.TempDir(), "ca.pem")
	url, wait, stdin := run(t, context.Background(), "--scenario", "normal", "--tls-self-signed", pemFile)
	if !strings.HasPrefix(url, "wss://127.0.0.1:") {
		t.Fatalf("URL %q with --tls-self-signed", url)
	}
	b, err := os.ReadFile(pemFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b) {
		t.Fatalf("%s holds no certificate", pemFile)
	}
	metadataOver(t, url, &tls.Config{RootCAs: roots})
	stdin.Close()
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
}

// metadataOver dials url and reads the metadata frame.
func metadataOver(t *testing.T, url string, clientTLS *tls.Config) {
	t.Helper()
	nc, br, _, err := ws.Dialer{Timeout: 2 * time.Second, TLSConfig: clientTLS}.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := io.Reader(nc)
	if br != nil {
		r = br
	}
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	if h, err := ws.ReadHeader(r); err != nil || h.OpCode != ws.OpBinary || h.Length == 0 {
		t.Fatalf("metadata frame %+v, %v", h, err)
	}
}

func TestServeUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, wait, _ := run(t, ctx, "--scenario", "ping-flood")
	cancel()
	if out, err := wait(); err != nil || !urlLine.MatchString(out) {
		t.Fatalf("stdout %q, %v", out, err)
	}
}

func TestServeUntilMaxTime(t *testing.T) {
	t0 := time.Now()
	_, wait, _ := run(t, context.Background(), "--scenario", "no-read", "--max-time", "100ms")
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 100*time.Millisecond {
		t.Fatalf("returned after %v", d)
	}
}

func TestIsDevNull(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Skip(err)
	}
	defer null.Close()
	if !isDevNull(null) {
		t.Fatal("/dev/null not recognised")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isDevNull(r) {
		t.Fatal("a pipe taken for /dev/null")
	}
}
