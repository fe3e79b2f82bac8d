package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/plugrl/libplugrl/core/wire"
)

// TestServe runs `plugrl serve` until its --stop-after, driving it with a
// raw client, and checks its first line (the URL) and its summary.
func TestServe(t *testing.T) {
	pr, pw := io.Pipe()
	var stderr strings.Builder
	status := make(chan int, 1)
	go func() {
		status <- run([]string{"serve", "--addr", "127.0.0.1:0", "--horizon", "3", "--action-dim", "2",
			"--action-dtype", "float64", "--stop-after", "2", "--policy", "probe",
			"--features", "reuse-feedback-obs", "--quiet"}, pw, &stderr)
		pw.Close()
	}()
	out := bufio.NewReader(pr)
	url, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(url, "ws://127.0.0.1:") {
		t.Fatalf("first line %q, %v; stderr %s", url, err, stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, br, _, err := ws.Dial(ctx, strings.TrimSpace(url))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var rw io.ReadWriter = nc
	if br != nil {
		rw = struct {
			io.Reader
			io.Writer
		}{br, nc}
	}
	b, err := wsutil.ReadServerBinary(rw)
	if err != nil {
		t.Fatal(err)
	}
	md, err := wire.DecodeMetadata(b)
	if err != nil || md.ActionHorizon.Value != 3 || md.Policy.Value != "ProbePolicy" || !md.Has("reuse-feedback-obs") {
		t.Fatalf("metadata %+v %v", md, err)
	}
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "obs", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 1}, Data: make([]byte, 8)}}}}
	var m wire.Message
	for i := 0; i < 2; i++ {
		if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: []int64{4}, StepIDs: []int64{0}, Obs: obs}); err != nil {
			t.Fatal(err)
		}
		if err := wsutil.WriteClientBinary(nc, m.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		b, err := wsutil.ReadServerBinary(rw)
		if err != nil {
			t.Fatal(err)
		}
		var a wire.Action
		if err := a.Decode(b); err != nil || a.Chunk.DType.Size != 8 || a.Chunk.Float64(5) != 20041 {
			t.Fatalf("action %v %v", a.Chunk.Shape, err)
		}
		err = wire.EncodeFeedback(&m, &wire.Feedback{EnvIndices: []int64{4}, StepIDs: []int64{1}, Obs: obs,
			Rewards: []float32{3}, Terminated: []bool{false}, Truncated: []bool{false}})
		if err != nil {
			t.Fatal(err)
		}
		if err := wsutil.WriteClientBinary(nc, m.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = wsutil.ReadServerBinary(rw)
	var ce wsutil.ClosedError
	if !errors.As(err, &ce) || ce.Code != 1001 || ce.Reason != "plugrl-server-stop" {
		t.Fatalf("want the stop, got %v", err)
	}
	rest, _ := io.ReadAll(out)
	if s := <-status; s != 0 {
		t.Fatalf("exit status %d; stderr %s", s, stderr.String())
	}
	if !strings.Contains(string(rest), "run stopped") || !strings.Contains(string(rest), "2 exchanges") {
		t.Fatalf("summary %q", rest)
	}
}

func TestUsage(t *testing.T) {
	var out, errs strings.Builder
	if s := run(nil, &out, &errs); s != 2 || !strings.Contains(errs.String(), "serve") {
		t.Fatalf("status %d, usage %q", s, errs.String())
	}
	if s := run([]string{"serve", "--policy", "nope"}, &out, &errs); s != 2 || !strings.Contains(errs.String(), "cem|probe|random|zero") {
		t.Fatalf("status %d: %q", s, errs.String())
	}
	if s := run([]string{"serve", "--action-dtype", "<U4"}, &out, &errs); s != 2 {
		t.Fatalf("status %d", s)
	}
	// A verb's --help is asked for: the usage, status 0 (it was 2, as an
	// unknown flag is).
	errs.Reset()
	if s := run([]string{"ledger", "audit", "--help"}, &out, &errs); s != 0 || !strings.Contains(errs.String(), "usage: plugrl ledger") {
		t.Fatalf("ledger audit --help: status %d, %q", s, errs.String())
	}
	if s := run([]string{"ledger", "audit", "--bogus", "x"}, &out, &errs); s != 2 {
		t.Fatalf("ledger audit --bogus: status %d", s)
	}
}

// TestServeRejectsBadFlags: a value out of range is refused with status 2
// and a message naming the flag. Each used to be replaced by a default
// (--feedback-timeout 0 by 60 s, --population 0 by 32, ...) or, for an
// unknown feature, offered in metadata though the server does not do it.
func TestServeRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--features", "reuse-feedback-obs,teleport"}, `unknown feature "teleport"`},
		{[]string{"--feedback-timeout", "0s"}, "--feedback-timeout"},
		{[]string{"--feedback-timeout", "-5s"}, "--feedback-timeout"},
		{[]string{"--stop-after", "-1"}, "--stop-after"},
		{[]string{"--max-conns", "-1"}, "--max-conns"},
		{[]string{"--policy", "cem", "--population", "0"}, "--population"},
		{[]string{"--elite-frac", "0"}, "--elite-frac"},
		{[]string{"--elite-frac", "1.5"}, "--elite-frac"},
		{[]string{"--elite-frac", "NaN"}, "--elite-frac"},
		{[]string{"--init-std", "-1"}, "--init-std"},
		{[]string{"--init-std", "+Inf"}, "--init-std"},
		{[]string{"--tls-cert", "cert.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, "--tls-cert/--tls-key"},
		{[]string{"--tls-self-signed", "/nonexistent/dir/ca.pem"}, "--tls-self-signed"},
		{[]string{"--tls-self-signed", "ca.pem", "--tls-key", "key.pem"}, "not both"},
	} {
		var out, errs lockedBuilder
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--quiet"}, tc.args...)
		status := make(chan int, 1)
		go func() { status <- run(args, &out, &errs) }()
		select {
		case s := <-status:
			if s != 2 || !strings.Contains(errs.String(), tc.want) {
				t.Errorf("%v: status %d, stderr %q; want 2 and %q", tc.args, s, errs.String(), tc.want)
			}
		case <-time.After(5 * time.Second):
			// It is serving, and waits for a signal: stop it.
			t.Errorf("%v: the server started: %q", tc.args, out.String())
			p, _ := os.FindProcess(os.Getpid())
			_ = p.Signal(os.Interrupt)
			<-status
		}
	}
}

// TestServeTLS: --tls-self-signed serves wss:// and writes the PEM a
// client trusts it with; without it the certificate is refused. (The C
// ABI's wss:// path end to end: CTest wss.)
func TestServeTLS(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pr, pw := io.Pipe()
	var stderr lockedBuilder
	status := make(chan int, 1)
	go func() {
		status <- run([]string{"serve", "--addr", "127.0.0.1:0", "--quiet", "--tls-self-signed", caFile}, pw, &stderr)
		pw.Close()
	}()
	defer func() {
		p, _ := os.FindProcess(os.Getpid())
		_ = p.Signal(os.Interrupt)
		go io.Copy(io.Discard, pr) // the summary line
		if s := <-status; s != 0 {
			t.Errorf("serve exited %d: %s", s, stderr.String())
		}
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	url = strings.TrimSpace(url)
	if err != nil || !strings.HasPrefix(url, "wss://127.0.0.1:") {
		t.Fatalf("first line %q, %v; stderr %s", url, err, stderr.String())
	}
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("%s holds no certificate: %q", caFile, pemBytes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, _, err := (ws.Dialer{TLSConfig: &tls.Config{RootCAs: x509.NewCertPool()}}).Dial(ctx, url); err == nil {
		t.Fatal("a client that does not trust the certificate connected")
	}
	nc, _, _, err := (ws.Dialer{TLSConfig: &tls.Config{RootCAs: pool}}).Dial(ctx, url)
	if err != nil {
		t.Fatalf("dial %s with the written CA: %v", url, err)
	}
	defer nc.Close()
	msg, err := wsutil.ReadServerBinary(nc)
	if err != nil {
		t.Fatalf("reading metadata over TLS: %v", err)
	}
	if md, err := wire.DecodeMetadata(msg); err != nil || md.ActionDim.Value != 7 {
		t.Fatalf("metadata over TLS: %+v, %v", md, err)
	}
}

// TestServeSecondSignalExits: after the first signal, serve stops the run
// and closes its clients; a second signal meanwhile exits at once. It used
// to be caught and never read, leaving the process to wait for the clients.
func TestServeSecondSignalExits(t *testing.T) {
	sigs := make(chan chan<- os.Signal, 1)
	exited := make(chan int, 1)
	notifySignals = func(c chan<- os.Signal) { sigs <- c }
	exit = func(code int) { exited <- code }
	defer func() {
		notifySignals, exit = func(c chan<- os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }, os.Exit
	}()

	pr, pw := io.Pipe()
	var stderr lockedBuilder
	status := make(chan int, 1)
	go func() {
		status <- run([]string{"serve", "--addr", "127.0.0.1:0", "--quiet"}, pw, &stderr)
		pw.Close()
	}()
	var sig chan<- os.Signal
	select {
	case sig = <-sigs:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not ask for signals")
	}
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A client that never answers the close keeps Close busy for the
	// closing handshake's grace.
	nc, _, _, err := ws.Dial(ctx, strings.TrimSpace(url))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sig <- os.Interrupt
	sig <- syscall.SIGTERM
	select {
	case code := <-exited:
		if code == 0 {
			t.Fatalf("exit status 0 after a second signal")
		}
	case s := <-status:
		t.Fatalf("serve returned %d without exiting on the second signal", s)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after a second signal")
	}
	if !strings.Contains(stderr.String(), "exiting now") {
		t.Fatalf("stderr %q", stderr.String())
	}
	<-status
}

// lockedBuilder is a strings.Builder written by serve's goroutines while
// the test reads it.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
