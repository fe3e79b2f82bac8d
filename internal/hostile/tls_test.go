package hostile

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/plugrl/libplugrl/internal/testcert"
)

// The scenarios over TLS: the tests that overBoth runs go once over TCP
// ("tcp") and once over TLS ("tls"), where start, dial and rawDial speak
// wss:// with one certificate made for the test process.

// overBoth runs f as the subtests tcp and tls.
func overBoth(t *testing.T, f func(t *testing.T)) {
	t.Run("tcp", f)
	t.Run("tls", f)
}

// useTLS reports whether t runs under overBoth's tls.
func useTLS(t *testing.T) bool { return strings.Contains(t.Name()+"/", "/tls/") }

var testCert struct {
	once   sync.Once
	cert   tls.Certificate
	roots  *x509.CertPool
	failed error
}

func loadTestCert(t *testing.T) {
	t.Helper()
	testCert.once.Do(func() {
		cert, pemBytes, err := testcert.SelfSigned(time.Time{})
		if err != nil {
			testCert.failed = err
			return
		}
		testCert.cert = cert
		testCert.roots = x509.NewCertPool()
		testCert.roots.AppendCertsFromPEM(pemBytes)
	})
	if testCert.failed != nil {
		t.Fatal(testCert.failed)
	}
}

// serverTLS is the servers' TLS configuration in the tests.
func serverTLS(t *testing.T) *tls.Config {
	loadTestCert(t)
	return &tls.Config{Certificates: []tls.Certificate{testCert.cert}, MinVersion: tls.VersionTLS12}
}

// clientTLS trusts serverTLS's certificate.
func clientTLS(t *testing.T) *tls.Config {
	loadTestCert(t)
	return &tls.Config{RootCAs: testCert.roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// TestTLSWrittenPEM: with testcert's --tls-self-signed configuration the
// URL is wss://, and a client that trusts exactly the PEM written (and
// nothing else) gets the metadata and an action; one that trusts only the
// system's roots is refused in the TLS handshake.
func TestTLSWrittenPEM(t *testing.T) {
	pemFile := filepath.Join(t.TempDir(), "ca.pem")
	cfg, err := testcert.ServerConfig("", "", pemFile, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(Config{Scenario: Normal, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePromptly(t, s) })
	if !strings.HasPrefix(s.URL(), "wss://127.0.0.1:") || strings.TrimPrefix(s.URL(), "wss://") != s.Addr() {
		t.Fatalf("URL %q, Addr %q", s.URL(), s.Addr())
	}
	pemBytes, err := os.ReadFile(pemFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("no certificate in %s", pemFile)
	}
	nc, br, _, err := ws.Dialer{Timeout: 2 * time.Second, TLSConfig: &tls.Config{RootCAs: roots}}.Dial(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, ok := nc.(*tls.Conn); !ok {
		t.Fatalf("the dialer's connection is a %T, not TLS", nc)
	}
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	c := &client{t: t, nc: nc, r: br}
	if c.r == nil {
		c.r = bufio.NewReader(nc)
	}
	c.metadata()
	c.infer(4)
	if a, _ := c.action(); a.Envs() != 1 || a.EnvIDs[0] != 4 {
		t.Fatalf("action %v env_ids %v", a.Chunk.Shape, a.EnvIDs)
	}

	// The system's roots do not know the certificate.
	if nc, _, _, err := (ws.Dialer{Timeout: 2 * time.Second}).Dial(context.Background(), s.URL()); err == nil {
		nc.Close()
		t.Fatal("a client with the system's roots was let in")
	}
	// And a plain ws:// client at the TLS port gets no WebSocket.
	if nc, _, _, err := (ws.Dialer{Timeout: 2 * time.Second}).Dial(context.Background(), "ws://"+s.Addr()); err == nil {
		nc.Close()
		t.Fatal("a ws:// client at the TLS port was let in")
	}
}

// TestTLSHandshakeTimeout: the handshake timeout covers the TLS handshake
// and the upgrade request together: a client that connects and says
// nothing, or completes TLS and then sends no request, is dropped when it
// passes, not at MaxConnTime.
func TestTLSHandshakeTimeout(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	s, err := Listen(Config{Scenario: Normal, TLS: serverTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePromptly(t, s) })
	for _, tc := range []struct {
		what string
		tls  bool
	}{{"silent TCP", false}, {"TLS, then no request", true}} {
		t.Run(tc.what, func(t *testing.T) {
			raw, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			t0 := time.Now()
			_ = raw.SetDeadline(t0.Add(5 * time.Second))
			var nc net.Conn = raw
			if tc.tls {
				tc := tls.Client(raw, clientTLS(t))
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				nc = tc
			}
			// The server ends the connection; a TLS client may first
			// read a session ticket, which Read consumes.
			_, err = io.ReadAll(nc)
			took := time.Since(t0)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection was still open after %v", took)
			}
			if took < 250*time.Millisecond || took > 2*time.Second {
				t.Fatalf("the server dropped the connection after %v; its handshake timeout is 300 ms", took)
			}
		})
	}
	waitFor(t, "the connections to end", func() bool { return s.Stats().Active == 0 })
}
