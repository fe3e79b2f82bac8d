package client_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// limitingProxy stands before a reference server as a rate-limiting proxy
// does: the connections numbered in refuse (1 the first) get answer, an
// HTTP refusal, and the others are piped to the server. It notes when each
// connection came, and Cut ends the piped ones (the server's side lost).
type limitingProxy struct {
	url    string
	answer string
	refuse map[int]bool

	mu     sync.Mutex
	came   []time.Time
	piped  []net.Conn
	closed bool
}

func newLimitingProxy(t *testing.T, answer string, refuse ...int) *limitingProxy {
	t.Helper()
	s := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1, FeedbackTimeout: 5 * time.Second})
	backend, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &limitingProxy{url: "ws://" + l.Addr().String(), answer: answer, refuse: map[int]bool{}}
	for _, n := range refuse {
		p.refuse[n] = true
	}
	t.Cleanup(func() {
		l.Close()
		p.cut(true)
		s.Close()
	})
	backendAddr := strings.TrimPrefix(backend, "ws://")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.came = append(p.came, time.Now())
			n := len(p.came)
			p.mu.Unlock()
			if p.refuse[n] {
				go func() {
					defer c.Close()
					buf := make([]byte, 4096)
					c.Read(buf) // the request (one read holds it)
					io.WriteString(c, p.answer)
				}()
				continue
			}
			b, err := net.Dial("tcp", backendAddr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				c.Close()
				b.Close()
				return
			}
			p.piped = append(p.piped, c, b)
			p.mu.Unlock()
			go func() { io.Copy(b, c); b.Close() }()
			go func() { io.Copy(c, b); c.Close() }()
		}
	}()
	return p
}

// cut closes the piped connections (and, with forever, any later one).
func (p *limitingProxy) cut(forever bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.piped {
		c.Close()
	}
	p.piped = nil
	p.closed = p.closed || forever
}

// arrivals returns when each connection came.
func (p *limitingProxy) arrivals() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.came...)
}

// TestOpenWaitRetryAfter: a proxy that limits its rate (429) or a server
// that is full (503) says with Retry-After when to come back. The open's
// wait keeps trying on 429 and 408 as on 5xx, and pauses as long as
// Retry-After asks (here 1 s, against a backoff of 20 ms), but never past
// MaxBackoff: the caller's bound holds whatever a server asks. Without a
// wait the open fails at once, and the message quotes the answer and the
// wait asked for.
func TestOpenWaitRetryAfter(t *testing.T) {
	const tooMany = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"
	t.Run("429 waits as asked", func(t *testing.T) {
		p := newLimitingProxy(t, tooMany, 1)
		o := waitOptions(p.url, 10*time.Second)
		o.MaxBackoff = 2 * time.Second
		c, err := client.Dial(context.Background(), o)
		if err != nil {
			t.Fatalf("a proxy that refused the first attempt with 429, Retry-After 1: %v", err)
		}
		defer c.Close()
		came := p.arrivals()
		if len(came) != 2 {
			t.Fatalf("%d attempts; want 2 (the refused one, then the one after the asked wait)", len(came))
		}
		if gap := came[1].Sub(came[0]); gap < time.Second {
			t.Errorf("the second attempt came %v after the first; the proxy asked for 1 s (Retry-After: 1)", gap)
		}
		w := newWorld()
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MaxBackoff bounds it", func(t *testing.T) {
		// An hour asked for: with the open's 10 s wait the client would
		// give up if it paused as long; it tries again within MaxBackoff.
		p := newLimitingProxy(t, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 3600\r\n\r\n", 1, 2)
		c, err := client.Dial(context.Background(), waitOptions(p.url, 10*time.Second))
		if err != nil {
			t.Fatalf("a server refusing twice with 503, Retry-After an hour, MaxBackoff 100 ms, a 10 s wait: %v", err)
		}
		c.Close()
		if n := len(p.arrivals()); n != 3 {
			t.Errorf("%d attempts; want 3", n)
		}
	})
	t.Run("408 is waited for", func(t *testing.T) {
		p := newLimitingProxy(t, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n", 1)
		c, err := client.Dial(context.Background(), waitOptions(p.url, 10*time.Second))
		if err != nil {
			t.Fatalf("a server that answered the first attempt 408: %v", err)
		}
		c.Close()
	})
	t.Run("no wait", func(t *testing.T) {
		p := newLimitingProxy(t, tooMany, 1)
		_, err := client.Dial(context.Background(), waitOptions(p.url, 0))
		if client.KindOf(err) != client.KindConnect {
			t.Fatalf("429 without a wait: %v (kind %v); want a connect failure", err, client.KindOf(err))
		}
		for _, want := range []string{"429 Too Many Requests", "tried again in 1s", `Retry-After: "1"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("429 without a wait: %q; want it to say %q", err, want)
			}
		}
	})
}

// TestReconnectRetryAfter: a reconnect refused with 429 and Retry-After
// pauses as asked before its next attempt, as the open's wait does.
func TestReconnectRetryAfter(t *testing.T) {
	p := newLimitingProxy(t, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\n\r\n", 2)
	o := waitOptions(p.url, 0)
	o.MaxBackoff = 2 * time.Second
	o.ReconnectTimeout = 10 * time.Second
	o.MaxReconnects = 5
	c, err := client.Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	p.cut(false)
	for i := 0; ; i++ {
		_, err := w.infer(c)
		if err == nil {
			break
		}
		if client.KindOf(err) != client.KindReconnected || i > 3 {
			t.Fatalf("infer after the connection was cut: %v", err)
		}
	}
	came := p.arrivals()
	if len(came) != 3 {
		t.Fatalf("%d connections; want 3 (the first, the refused reconnect, the one after the asked wait)", len(came))
	}
	if gap := came[2].Sub(came[1]); gap < time.Second {
		t.Errorf("the reconnect's second attempt came %v after the refused one; the proxy asked for 1 s", gap)
	}
}
