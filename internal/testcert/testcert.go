// Package testcert gives test servers (plugrl serve, plugrl-hostile) a
// TLS configuration from their flags: a certificate the operator gives, or
// one made up for a test run, whose PEM is written where a client's CA file
// option can name it.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// ServerConfig is the TLS configuration the flags ask for: nil for plain
// ws:// when all three are empty. certFile and keyFile are PEM files
// (--tls-cert, --tls-key); selfSigned, when not empty (--tls-self-signed),
// is where a new self-signed certificate's PEM goes: it is its own CA,
// valid for 127.0.0.1, ::1 and localhost for a day. validIn, when
// positive (--tls-valid-in), makes that certificate valid only from
// validIn after now: the server of a client whose clock is behind.
func ServerConfig(certFile, keyFile, selfSigned string, validIn time.Duration) (*tls.Config, error) {
	switch {
	case selfSigned != "" && (certFile != "" || keyFile != ""):
		return nil, errors.New("--tls-self-signed makes its own certificate: give it or --tls-cert and --tls-key, not both")
	case validIn < 0:
		return nil, errors.New("--tls-valid-in must not be negative")
	case validIn > 0 && selfSigned == "":
		return nil, errors.New("--tls-valid-in is for the certificate --tls-self-signed makes")
	case (certFile == "") != (keyFile == ""):
		return nil, errors.New("--tls-cert and --tls-key go together")
	case certFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	case selfSigned != "":
		var from time.Time
		if validIn > 0 {
			from = time.Now().Add(validIn)
		}
		cert, certPEM, err := SelfSigned(from)
		if err != nil {
			return nil, fmt.Errorf("--tls-self-signed: %w", err)
		}
		if err := os.WriteFile(selfSigned, certPEM, 0o644); err != nil {
			return nil, fmt.Errorf("--tls-self-signed: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	}
	return nil, nil
}

// SelfSigned makes a P-256 certificate that is its own CA, for the
// loopback names, valid from validFrom (zero: an hour ago) for a day, and
// returns it with its PEM. A certificate's times are whole seconds: a
// validFrom within a second is rounded up, never down, so that the
// certificate is not valid before it (a test's "not valid yet" keeps all
// the margin it asked for).
func SelfSigned(validFrom time.Time) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	if validFrom.IsZero() {
		validFrom = time.Now().Add(-time.Hour)
	} else if s := validFrom.Truncate(time.Second); s.Before(validFrom) {
		validFrom = s.Add(time.Second)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "plugrl serve (self-signed)"},
		NotBefore:             validFrom,
		NotAfter:              validFrom.Add(25 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certPEM, nil
}
