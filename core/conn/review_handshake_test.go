package conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// TestHandshakeInterimResponses: a server, or a proxy before it, may send
// interim 1xx responses (100 Continue, 103 Early Hints) ahead of its 101.
// RFC 6455 4.1 has a client handle a status other than 101 "per HTTP
// procedures", and HTTP has a client accept one or more 1xx responses
// before the final one even if it did not expect any (RFC 2616 10.1, RFC
// 9110 15.2: a MUST). The client refused the first of them as the
// server's answer ("the server answered \"HTTP/1.1 103 Early Hints\", not
// 101 Switching Protocols"), an answer no open wait retries. Over TCP and
// TLS; the frame sent with the 101 still arrives whole.
func TestHandshakeInterimResponses(t *testing.T) {
	final := func(a string) string {
		return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\n\r\n"
	}
	for _, useTLS := range []bool{false, true} {
		for name, interim := range map[string]string{
			"100 Continue":     "HTTP/1.1 100 Continue\r\n\r\n",
			"103 Early Hints":  "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\nConnection: keep-alive\r\n\r\n",
			"two, bare LFs":    "HTTP/1.1 100 Continue\n\nHTTP/1.1 102 Processing\n\n",
			"with no reason":   "HTTP/1.1 100 \r\n\r\n",
			"a long hint list": "HTTP/1.1 103 Early Hints\r\nLink: " + strings.Repeat("</x.js>; rel=preload, ", 400) + "</y.js>\r\n\r\n",
		} {
			url, tc := handshakeServer(t, useTLS, func(a string) string { return interim + final(a) })
			c, err := Dial(context.Background(), Options{URL: url, TLS: tc, DialTimeout: 2 * time.Second})
			if err != nil {
				t.Errorf("tls %v, %s before the 101: %v", useTLS, name, err)
				continue
			}
			if msg, err := c.Receive(2 * time.Second); err != nil || string(msg) != "hi" {
				t.Errorf("tls %v, %s: the frame sent with the response: %q, %v", useTLS, name, msg, err)
			}
			c.Abort()
		}
	}
	// An interim response ahead of a refusal: the refusal is what the
	// error quotes, and a 101 alone is no interim response.
	url, _ := handshakeServer(t, false, func(string) string {
		return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n"
	})
	_, err := Dial(context.Background(), Options{URL: url, DialTimeout: 2 * time.Second})
	if wait, ok := RetryAfter(err); err == nil || !strings.Contains(err.Error(), `"HTTP/1.1 503 Service Unavailable"`) || !ok || wait != 7*time.Second {
		t.Errorf("100 then 503: %v (Retry-After %v, %v); want the 503 quoted and its Retry-After read", err, wait, ok)
	}
}

// TestHandshakeCutShortSaysSo: a server that closes the connection after
// the status line of its answer, before the answer's blank line, did
// answer: the error must not say that it closed "before it answered the
// WebSocket handshake", nor send the user to check the URL's scheme (a
// TLS port answers a ws:// client with no status line). It quotes the
// status line, and is still ErrClosedBeforeHandshake for the open wait,
// which retries it as a server restarting. A connection closed with no
// answer, or with bytes that are no status line, keeps the old message.
func TestHandshakeCutShortSaysSo(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		for name, tc := range map[string]struct {
			answer   string
			cutShort bool
		}{
			"after the status line":   {"HTTP/1.1 101 Switching Protocols\r\n", true},
			"after a header field":    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n", true},
			"in a header field":       {"HTTP/1.1 101 Switching Protocols\r\nUpgr", true},
			"after an interim answer": {"HTTP/1.1 100 Continue\r\n\r\n", true},
			"in the status line":      {"HTTP/1.1 10", false},
			"at once":                 {"", false},
		} {
			url, tcfg := cutShortServer(t, useTLS, tc.answer)
			_, err := Dial(context.Background(), Options{URL: url, TLS: tcfg, DialTimeout: 2 * time.Second})
			if !errors.Is(err, ErrClosedBeforeHandshake) {
				t.Errorf("tls %v, %s: %v; want ErrClosedBeforeHandshake", useTLS, name, err)
				continue
			}
			msg := err.Error()
			said := strings.Contains(msg, "before it answered") || strings.Contains(msg, "URL's scheme")
			switch {
			case tc.cutShort && said:
				t.Errorf("tls %v, %s: %v; the server did answer, and no TLS port does that", useTLS, name, err)
			case tc.cutShort && !strings.Contains(msg, "HTTP/1.1 10"):
				t.Errorf("tls %v, %s: %v; want the status line quoted", useTLS, name, err)
			case !tc.cutShort && !strings.Contains(msg, "before it answered"):
				t.Errorf("tls %v, %s: %v; want \"before it answered\"", useTLS, name, err)
			}
		}
	}
}

// cutShortServer writes answer to the upgrade request and closes the
// connection.
func cutShortServer(t *testing.T, useTLS bool, answer string) (string, *tls.Config) {
	t.Helper()
	return hijackServer(t, useTLS, func(_ net.Conn, rw *bufio.ReadWriter, _ *http.Request) {
		_, _ = rw.WriteString(answer)
		_ = rw.Flush()
	})
}

// TestHandshakeBadExtensionsValueSaysSo: a 101 answer whose
// Sec-WebSocket-Extensions value does not parse is refused (this client
// offered no extension), and gobwas/ws says only "malformed HTTP
// response". The refusal said "a line that is no header field", quoting
// the Sec-WebSocket-Extensions field, which is a header field: it must
// say that the field's value does not parse, and name the field.
func TestHandshakeBadExtensionsValueSaysSo(t *testing.T) {
	for _, value := range []string{";", ",", "x; =", `"`} {
		url, _ := handshakeServer(t, false, func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a +
				"\r\nSec-WebSocket-Extensions: " + value + "\r\n\r\n"
		})
		c, err := Dial(context.Background(), Options{URL: url, DialTimeout: 2 * time.Second})
		if err == nil {
			c.Abort()
			t.Errorf("Sec-WebSocket-Extensions: %s: taken", value)
			continue
		}
		if strings.Contains(err.Error(), "no header field") || !strings.Contains(err.Error(), "Sec-WebSocket-Extensions") ||
			!errors.Is(err, ws.ErrMalformedResponse) {
			t.Errorf("Sec-WebSocket-Extensions: %s: %v; want it to say the field's value does not parse", value, err)
		}
	}
}

// TestHandshakeFoldedFields: a header field value folded onto a second
// line that begins with a space or a tab (obs-fold). RFC 6455 4.1 reads
// the handshake by RFC 2616, which allows folding any field (2.2, 4.2),
// and RFC 9112 5.2 has a user agent replace each obs-fold with a space
// before it reads the value (MUST). gobwas/ws takes the second line for a
// field without a colon, and the answer was refused ("a line that is no
// header field: \" Upgrade\""). A folded Connection field's tokens count
// wherever the fold falls; a fold in a field the client does not read
// changes nothing; a fold in one that gobwas/ws checks (Upgrade,
// Sec-WebSocket-*) is still refused, never read as the part before the
// fold (a folded Sec-WebSocket-Extensions would otherwise pass as empty).
func TestHandshakeFoldedFields(t *testing.T) {
	answer := func(fields string) func(string) string {
		return func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + a + "\r\n" + fields + "\r\n"
		}
	}
	for name, tc := range map[string]struct {
		fields string
		taken  bool
	}{
		"connection, upgrade folded":      {"Connection: keep-alive,\r\n Upgrade\r\n", true},
		"connection, tab, bare LF":        {"Connection: keep-alive,\n\tUpgrade\n", true},
		"connection folded twice":         {"Connection: keep-alive\r\n ,\r\n \t upgrade\r\n", true},
		"connection, upgrade first":       {"Connection: Upgrade,\r\n keep-alive\r\n", true},
		"another field folded":            {"Connection: Upgrade\r\nLink: </a.js>; rel=preload,\r\n </b.js>; rel=preload\r\n", true},
		"another field, fold last":        {"Connection: Upgrade\r\nX-Info: a\r\n b\r\n", true},
		"connection folded, no upgrade":   {"Connection: keep-alive,\r\n close\r\n", false},
		"extensions folded":               {"Connection: Upgrade\r\nSec-WebSocket-Extensions:\r\n permessage-deflate\r\n", false},
		"no fold":                         {"Connection: Upgrade\r\n", true},
		"accept folded into a wrong one":  {"Connection: Upgrade\r\nSec-WebSocket-Accept: x\r\n y\r\n", false},
		"upgrade folded into another one": {"Connection: Upgrade\r\nUpgrade: websocket\r\n h2c\r\n", false},
	} {
		url, _ := handshakeServer(t, false, answer(tc.fields))
		c, err := Dial(context.Background(), Options{URL: url, DialTimeout: 2 * time.Second})
		switch {
		case tc.taken && err != nil:
			t.Errorf("%s: %v; want it taken", name, err)
		case !tc.taken && err == nil:
			c.Abort()
			t.Errorf("%s: taken; want it refused", name)
		case tc.taken:
			if msg, err := c.Receive(2 * time.Second); err != nil || string(msg) != "hi" {
				t.Errorf("%s: the frame sent with the response: %q, %v", name, msg, err)
			}
			c.Abort()
		}
	}
}
