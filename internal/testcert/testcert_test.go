package testcert

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSelfSigned: the written PEM verifies the served certificate for the
// loopback names, as a client's CA file would.
func TestSelfSigned(t *testing.T) {
	pemFile := filepath.Join(t.TempDir(), "ca.pem")
	cfg, err := ServerConfig("", "", pemFile, 0)
	if err != nil || cfg == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("ServerConfig: %v, %v", cfg, err)
	}
	b, err := os.ReadFile(pemFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("no certificate in %q", b)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "::1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"}); err == nil {
		t.Error("verified for example.com")
	}
}

func TestServerConfigFlags(t *testing.T) {
	if cfg, err := ServerConfig("", "", "", 0); cfg != nil || err != nil {
		t.Fatalf("no flags: %v, %v; want plain ws://", cfg, err)
	}
	for _, args := range [][3]string{{"c.pem", "", ""}, {"", "k.pem", ""}, {"c.pem", "k.pem", "ca.pem"}, {"/nonexistent/c", "/nonexistent/k", ""}} {
		if _, err := ServerConfig(args[0], args[1], args[2], 0); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	for _, validIn := range []time.Duration{-time.Second, time.Second} {
		if _, err := ServerConfig("", "", "", validIn); err == nil {
			t.Errorf("--tls-valid-in %v without --tls-self-signed: no error", validIn)
		}
	}
}

// TestValidIn: --tls-valid-in's certificate is refused until its start,
// as a client whose clock is behind it refuses it, and verifies after.
func TestValidIn(t *testing.T) {
	pemFile := filepath.Join(t.TempDir(), "ca.pem")
	asked := time.Now().Add(time.Hour)
	cfg, err := ServerConfig("", "", pemFile, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pemFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.NotBefore.Before(asked) {
		t.Fatalf("valid from %v, before the hour asked for (%v): a whole second rounded down", leaf.NotBefore, asked)
	}
	var invalid x509.CertificateInvalidError
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Fatalf("verified now: %v; want not yet valid", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", CurrentTime: time.Now().Add(2 * time.Hour)}); err != nil {
		t.Fatalf("two hours on: %v", err)
	}
}
