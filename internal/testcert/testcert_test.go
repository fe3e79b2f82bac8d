package testcert

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// TestSelfSigned: the written PEM verifies the served certificate for the
// loopback names, as a client's CA file would.
func TestSelfSigned(t *testing.T) {
	pemFile := filepath.Join(t.TempDir(), "ca.pem")
	cfg, err := ServerConfig("", "", pemFile)
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
	if cfg, err := ServerConfig("", "", ""); cfg != nil || err != nil {
		t.Fatalf("no flags: %v, %v; want plain ws://", cfg, err)
	}
	for _, args := range [][3]string{{"c.pem", "", ""}, {"", "k.pem", ""}, {"c.pem", "k.pem", "ca.pem"}, {"/nonexistent/c", "/nonexistent/k", ""}} {
		if _, err := ServerConfig(args[0], args[1], args[2]); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
