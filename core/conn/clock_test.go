package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/internal/testcert"
)

// calledFromTLS reports whether its caller was called from crypto/tls (the
// handshake verifying a certificate), not from this package.
func calledFromTLS() bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(3, pc)])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "crypto/tls.") {
			return true
		}
		if !more {
			return false
		}
	}
}

// TestClockStepDuringDial: NTP sets the clock while an attempt is under
// way, after the handshake refused the certificate as not valid yet and
// before Dial looks at the clock to say why (once, or between two looks).
// The attempt is still ErrClockBehind, which an open wait tries again,
// not Go's "expired or not yet valid", which ends it, and not a panic.
func TestClockStepDuringDial(t *testing.T) {
	cert, _, err := testcert.SelfSigned(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	for _, behindLooks := range []int64{0, 1, 2} { // Dial's looks before the step
		var looks atomic.Int64
		cfg := &tls.Config{RootCAs: roots, Time: func() time.Time {
			if calledFromTLS() || looks.Add(1) <= behindLooks {
				return leaf.NotBefore.Add(-time.Minute) // the clock not set yet
			}
			return leaf.NotBefore.Add(time.Minute) // NTP has set it
		}}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("the clock set after %d of Dial's looks: panic: %v", behindLooks, r)
				}
			}()
			_, err := Dial(context.Background(), Options{URL: url, TLS: cfg, DialTimeout: 5 * time.Second})
			if !errors.Is(err, ErrClockBehind) {
				t.Errorf("the clock set after %d of Dial's looks: %v; want ErrClockBehind", behindLooks, err)
			}
		}()
	}
}
