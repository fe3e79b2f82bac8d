package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/internal/refserver"
	"github.com/plugrl/libplugrl/internal/testcert"
)

// freeAddr returns a 127.0.0.1 address where nothing listens (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func waitOptions(url string, wait time.Duration) client.Options {
	return client.Options{URL: url, OpenWait: wait, ConnectTimeout: time.Second,
		ReconnectBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, ReceiveTimeout: 5 * time.Second}
}

// TestOpenWaitsForTheServer: a client that starts before its server (a
// robot booting before its trainer) connects once the server comes, with
// OpenWait; without it, the first refused connection ends the open.
func TestOpenWaitsForTheServer(t *testing.T) {
	addr := freeAddr(t)
	url := "ws://" + addr
	if _, err := client.Dial(context.Background(), waitOptions(url, 0)); client.KindOf(err) != client.KindConnect {
		t.Fatalf("no server, no wait: %v; want a connect failure at once", err)
	}
	var logs []string
	o := waitOptions(url, 10*time.Second)
	o.Logf = func(_ client.Level, msg string) { logs = append(logs, msg) }
	s := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1, FeedbackTimeout: 5 * time.Second})
	t.Cleanup(func() { s.Close() })
	started := make(chan error, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		_, err := s.Listen(addr)
		started <- err
	})
	c, err := client.Dial(context.Background(), o)
	if lerr := <-started; lerr != nil {
		t.Skipf("the server could not take the port back: %v", lerr)
	}
	if err != nil {
		t.Fatalf("open with a 10 s wait, the server up after 300 ms: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	if len(logs) < 2 || !strings.Contains(logs[0], "connect attempt 1 failed") || !strings.Contains(logs[len(logs)-1], "connected to") {
		t.Errorf("the log does not tell the wait: %q", logs)
	}
}

// TestOpenWaitEnds: the wait ends when OpenWait has passed, saying so and
// how many attempts it made; and at once on what waiting cannot mend,
// whatever the wait.
func TestOpenWaitEnds(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		t0 := time.Now()
		_, err := client.Dial(context.Background(), waitOptions("ws://"+freeAddr(t), 500*time.Millisecond))
		took := time.Since(t0)
		if client.KindOf(err) != client.KindConnect || !strings.Contains(err.Error(), "within the open wait (500ms, ") {
			t.Fatalf("no server in 500 ms: %v; want a connect failure that names the wait", err)
		}
		if took < 400*time.Millisecond || took > 3*time.Second {
			t.Errorf("the open returned after %v; its wait was 500 ms", took)
		}
	})
	t.Run("http 503", func(t *testing.T) {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			n.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer srv.Close()
		_, err := client.Dial(context.Background(), waitOptions(strings.Replace(srv.URL, "http", "ws", 1), 400*time.Millisecond))
		if err == nil || n.Load() < 2 {
			t.Fatalf("a server answering 503 for 400 ms: %v after %d attempts; want several, then a failure", err, n.Load())
		}
	})
	for _, tc := range []struct {
		name   string
		status int
	}{{"http 404", http.StatusNotFound}, {"http 401", http.StatusUnauthorized}} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				n.Add(1)
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			_, err := client.Dial(context.Background(), waitOptions(strings.Replace(srv.URL, "http", "ws", 1), -1))
			if err == nil || n.Load() != 1 {
				t.Fatalf("a server answering %d, waiting for ever: %v after %d attempts; want one attempt", tc.status, err, n.Load())
			}
		})
	}
	t.Run("bad port", func(t *testing.T) {
		_, err := client.Dial(context.Background(), waitOptions("ws://127.0.0.1:99999", -1))
		if err == nil || !strings.Contains(err.Error(), "invalid port") {
			t.Fatalf("port 99999, waiting for ever: %v; want the port refused at once", err)
		}
	})
}

// TestOpenWaitNoSliver: no attempt starts with less than 20 ms of the wait
// left; the last pause runs to its end instead, and the open fails with
// the last real attempt's error. Before, a pause that ended just before
// the wait did (a loaded machine) started an attempt with microseconds
// left, which timed out, and a refused port failed as a timeout. Here
// the first pause (16-32 ms of a 35 ms wait) always ends with less than
// 20 ms left and, before the change, always started a second attempt.
func TestOpenWaitNoSliver(t *testing.T) {
	var logs []string
	o := waitOptions("ws://"+freeAddr(t), 35*time.Millisecond)
	o.ReconnectBackoff, o.MaxBackoff = 32*time.Millisecond, 32*time.Millisecond
	o.Logf = func(_ client.Level, msg string) { logs = append(logs, msg) }
	_, err := client.Dial(context.Background(), o)
	if client.KindOf(err) != client.KindConnect || !strings.Contains(err.Error(), "(35ms, 1 attempts)") ||
		!strings.Contains(err.Error(), "refused") {
		t.Fatalf("a refused port, 35 ms of wait: %v; want the one attempt's refusal", err)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "too little of the open wait is left") {
		t.Errorf("the log does not say why no second attempt was made: %q", logs)
	}
}

// TestOpenWaitInterrupted: Interrupt, or the context, ends a wait with no
// end at once, between attempts or in one.
func TestOpenWaitInterrupted(t *testing.T) {
	url := "ws://" + freeAddr(t)
	c, err := client.New(waitOptions(url, -1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(200*time.Millisecond, c.Interrupt)
	t0 := time.Now()
	err = c.Connect(context.Background())
	if client.KindOf(err) != client.KindInterrupted {
		t.Fatalf("interrupted wait: %v", err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("the interrupted wait returned after %v", took)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = client.Dial(ctx, waitOptions(url, -1))
	if client.KindOf(err) != client.KindInterrupted || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait whose context ended: %v; want KindInterrupted and the context's error", err)
	}
}

// TestOpenWaitContextEndsPause: the end of the context ends the wait at
// once also between attempts, not only in one: here the pause is 2-4 s,
// and the context ends 100 ms in, during the first.
func TestOpenWaitContextEndsPause(t *testing.T) {
	o := waitOptions("ws://"+freeAddr(t), -1)
	o.ReconnectBackoff, o.MaxBackoff = 4*time.Second, 4*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := client.Dial(ctx, o)
	took := time.Since(t0)
	if client.KindOf(err) != client.KindInterrupted || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait whose context ended: %v; want KindInterrupted and the context's error", err)
	}
	if took > time.Second {
		t.Errorf("the context ended 100 ms in, in the pause between attempts; the open returned after %v", took)
	}
}

// TestOpenWaitServerGoingAway: a server that takes the WebSocket and then
// ends it before its metadata (restarting: a reset, an EOF, a close with
// 1001 going away, 1012 service restart, 1013 try again later, 1014 bad
// gateway), or closes the TCP connection before it answers the handshake,
// is waited for, as one that refuses is; a close that says the client is
// wrong (1008 policy violation) ends the wait at once.
func TestOpenWaitServerGoingAway(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      ws.StatusCode // 0: no close frame
		rst       bool
		mended    bool
		noUpgrade bool // closed before the handshake's answer
	}{
		{"eof", 0, false, true, false},
		{"reset", 0, true, true, false},
		{"1001", 1001, false, true, false},
		{"1012", 1012, false, true, false},
		{"1013", 1013, false, true, false},
		{"1014", 1014, false, true, false},
		{"1008", 1008, false, false, false},
		{"before the handshake", 0, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var n atomic.Int32
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					n.Add(1)
					go func() {
						defer c.Close()
						if tc.noUpgrade {
							return
						}
						if _, err := ws.Upgrade(c); err != nil {
							return
						}
						switch {
						case tc.code != 0:
							ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(tc.code, "")))
							time.Sleep(20 * time.Millisecond)
						case tc.rst:
							c.(*net.TCPConn).SetLinger(0)
						}
					}()
				}
			}()
			_, err = client.Dial(context.Background(), waitOptions("ws://"+l.Addr().String(), 400*time.Millisecond))
			if tc.mended && (n.Load() < 2 || !strings.Contains(err.Error(), "within the open wait")) {
				t.Errorf("a server that ends every connection before its metadata (%s): %v after %d attempts; want it waited for", tc.name, err, n.Load())
			}
			if !tc.mended && (n.Load() != 1 || err == nil) {
				t.Errorf("a server that closes with %d before its metadata: %v after %d attempts; want one attempt", tc.code, err, n.Load())
			}
		})
	}
}

// TestOpenWaitForTheClock: a robot's computer without a battery-backed
// clock boots with the wrong time, and the server's certificate is not
// valid yet by it until NTP sets it. Played here by a certificate that
// starts 1.5 s after the server does (1.5-2.5 s: a certificate's times
// are in whole seconds, rounded up): without a wait the open fails at
// once, saying the clock is behind and from when the certificate is
// valid; with one it connects once the certificate is valid, still fully
// verified. An expired certificate is not waited for.
func TestOpenWaitForTheClock(t *testing.T) {
	const validIn = 1500 * time.Millisecond
	cfg, err := testcert.ServerConfig("", "", t.TempDir()+"/ca.pem", validIn)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(leaf)
	s := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1, FeedbackTimeout: 5 * time.Second, TLS: cfg})
	t.Cleanup(func() { s.Close() })
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := waitOptions(url, 0)
	o.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	c0, err := client.Dial(context.Background(), o)
	if err == nil {
		c0.Close()
		if !time.Now().Before(leaf.NotBefore) {
			t.Skip("the certificate became valid before the first attempt (a slow machine)")
		}
	}
	if client.KindOf(err) != client.KindConnect || !errors.Is(err, conn.ErrClockBehind) ||
		!strings.Contains(err.Error(), leaf.NotBefore.UTC().Format(time.RFC3339)) {
		t.Fatalf("no wait, the clock behind the certificate: %v; want a connect failure saying so, with the certificate's start", err)
	}
	if !time.Now().Before(leaf.NotBefore) {
		t.Skip("the certificate became valid before the first attempt ended (a slow machine)")
	}
	o.OpenWait = 10 * time.Second
	c, err := client.Dial(context.Background(), o)
	if err != nil {
		t.Fatalf("a 10 s wait, the certificate valid after 1.5 s: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if time.Now().Before(leaf.NotBefore) {
		t.Fatalf("connected at %v, before the certificate's start %v", time.Now(), leaf.NotBefore)
	}
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}

	// Expired: the clock is past it, and no wait mends that.
	old, err := testcert.ServerConfig("", "", t.TempDir()+"/old.pem", 0)
	if err != nil {
		t.Fatal(err)
	}
	oldLeaf, err := x509.ParseCertificate(old.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	o.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, Time: func() time.Time { return oldLeaf.NotAfter.Add(time.Hour) }}
	o.TLS.RootCAs.AddCert(oldLeaf)
	s2 := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1, TLS: old})
	t.Cleanup(func() { s2.Close() })
	url2, err := s2.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.URL = url2
	t0 := time.Now()
	if _, err := client.Dial(context.Background(), o); client.KindOf(err) != client.KindConnect || errors.Is(err, conn.ErrClockBehind) || time.Since(t0) > 5*time.Second {
		t.Fatalf("an expired certificate under a 10 s wait: %v after %v; want a connect failure at once, not the clock's", err, time.Since(t0))
	}
}
