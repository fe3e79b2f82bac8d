package conn

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestURLCredentialsRefused: a URL with userinfo (ws://user:password@host,
// or a token as the user name) connected as if the credentials were
// sent, but nothing sent them (no Authorization field: the server never
// saw them), and a user name alone showed whole in every message. Such a
// URL is now refused before anything is sent, and its message holds
// neither the user name nor the password.
func TestURLCredentialsRefused(t *testing.T) {
	requests := make(chan http.Header, 8)
	url := rawServer(t, func(c net.Conn, r *http.Request) { requests <- r.Header.Clone() })
	host := strings.TrimPrefix(url, "ws://")
	for _, u := range []string{"ws://robot:s3cret@" + host, "ws://s3cret@" + host, "ws://s3cret:@" + host, "ws://:s3cret@" + host + "/p?q"} {
		dialRefused(t, Options{URL: u}, ErrURLCredentials, requests)
	}
	noRequest(t, requests)
	// A user name alone is a token as often as not: RedactedURL hides it.
	if got := RedactedURL("wss://s3cret@host:1/p"); got != "wss://xxxxx@host:1/p" {
		t.Errorf("RedactedURL: %q", got)
	}
}
