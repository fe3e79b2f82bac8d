package conn

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAPIKeyControlCharactersRefused: the API key goes into a header field
// of the upgrade request, which cannot hold a line break or another control
// character. net/http's header writer, which gobwas/ws uses, turned CR and
// LF into spaces and trimmed the ends: "k\r\nX-Evil: 1" went out as
// "Authorization: Api-Key k  X-Evil: 1" (no injection, but a key other than
// the one given), and other control bytes went out raw. Such a key is
// refused before anything is sent, and the message does not quote it.
func TestAPIKeyControlCharactersRefused(t *testing.T) {
	requests := make(chan http.Header, 8)
	url := rawServer(t, func(c net.Conn, r *http.Request) { requests <- r.Header.Clone() })
	for _, key := range []string{"s3cret\r\nX-Evil: 1", "s3cret\n", "s3cret\r", "s3\x00cret", "s3\x1bcret", "s3\x7fcret"} {
		dialRefused(t, Options{URL: url, APIKey: key}, ErrBadAPIKey, requests)
	}
	noRequest(t, requests)
	// A tab and bytes past ASCII are a field value's (RFC 9110 5.5).
	for _, key := range []string{"s3\tcret", "s3crét"} {
		c, err := Dial(context.Background(), Options{URL: url, APIKey: key, DialTimeout: time.Second})
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		if got := (<-requests).Get("Authorization"); got != "Api-Key "+key {
			t.Errorf("key %q sent as %q", key, got)
		}
		c.Abort()
	}
	// A key that ends in a space or tab: the header writer trims a field
	// value's ends (and a server's parser would), so "s3cret " went out as
	// "s3cret", a key other than the one given, refused by the server with
	// a 401 that did not say why. Refused here, before anything is sent.
	for _, key := range []string{"s3cret ", "s3cret\t", "s3cret \t "} {
		dialRefused(t, Options{URL: url, APIKey: key}, ErrBadAPIKey, requests)
	}
}

// dialRefused dials o, which must fail with want before anything is sent,
// its message holding no secret (the tests' secrets all start "s3"). A
// connection made instead is reported with the Authorization field its
// request sent (taken from requests, a rawServer's), and closed.
func dialRefused(t *testing.T, o Options, want error, requests <-chan http.Header) {
	t.Helper()
	o.DialTimeout = time.Second
	c, err := Dial(context.Background(), o)
	if err == nil {
		got := (<-requests).Get("Authorization")
		c.Abort()
		t.Errorf("%s, key %q: connected, Authorization %q; want it refused", o.URL, o.APIKey, got)
		return
	}
	if !errors.Is(err, want) || strings.Contains(err.Error(), "s3") {
		t.Errorf("%s, key %q: %v; want %v, without the secret", o.URL, o.APIKey, err, want)
	}
}

// noRequest checks that no request reached the rawServer of requests.
func noRequest(t *testing.T, requests <-chan http.Header) {
	t.Helper()
	select {
	case h := <-requests:
		t.Errorf("a request was sent, Authorization %q", h.Get("Authorization"))
	case <-time.After(50 * time.Millisecond):
	}
}
