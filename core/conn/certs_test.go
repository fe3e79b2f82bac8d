package conn

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"
)

// testCA is a CA made for one test, and the pool that trusts it.
type testCA struct {
	pool *x509.CertPool
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{pool: pool, cert: cert, key: key}
}

// leaf is a server certificate for names and ips, valid for an hour.
func (ca *testCA) leaf(t *testing.T, names []string, ips ...net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// upgradeSeen is what an upgradeServer saw of one connection: the TLS
// server name the client sent (SNI), whether the client was asked for a
// certificate, and the request (nil if none came).
type upgradeSeen struct {
	sni string
	req *http.Request
}

// upgradeServer listens on addr (network tcp4 or tcp6), over TLS when
// cfg is set, and answers each upgrade request 101; it reports what each
// connection showed. It skips the test where addr cannot be listened on
// (no IPv6 loopback).
func upgradeServer(t *testing.T, network, addr string, cfg *tls.Config) (string, <-chan upgradeSeen) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("listen %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	seen := make(chan upgradeSeen, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(3 * time.Second))
				var s upgradeSeen
				if cfg != nil {
					cc := cfg.Clone()
					cc.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
						s.sni = h.ServerName
						return nil, nil
					}
					tc := tls.Server(c, cc)
					if err := tc.Handshake(); err != nil {
						seen <- s
						return
					}
					c = tc
				}
				br := bufio.NewReader(c)
				s.req, _ = http.ReadRequest(br)
				seen <- s
				if s.req == nil {
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
					acceptKey(s.req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n"))
				_, _ = br.ReadByte() // until the client goes
			}(c)
		}
	}()
	return ln.Addr().String(), seen
}
