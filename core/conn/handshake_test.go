package conn

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// acceptKey is RFC 6455 4.2.2's Sec-WebSocket-Accept for key.
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// handshakeServer answers one upgrade request with response(accept key),
// and in the same write a binary frame holding "hi"; it returns the URL
// and the server's certificate pool when tls is set.
func handshakeServer(t *testing.T, useTLS bool, response func(accept string) string) (string, *tls.Config) {
	t.Helper()
	frame := func() []byte {
		var b bytes.Buffer
		_ = ws.WriteFrame(&b, ws.NewBinaryFrame([]byte("hi")))
		return b.Bytes()
	}()
	return hijackServer(t, useTLS, func(c net.Conn, rw *bufio.ReadWriter, r *http.Request) {
		_, _ = rw.WriteString(response(acceptKey(r.Header.Get("Sec-WebSocket-Key"))))
		_, _ = rw.Write(frame)
		_ = rw.Flush()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = bufio.NewReader(c).ReadByte() // until the client goes
	})
}

// hijackServer serves each request with serve, given the hijacked
// connection (closed after serve returns), over TLS when useTLS is set;
// it returns the ws:// or wss:// URL and the server's certificate pool.
func hijackServer(t *testing.T, useTLS bool, serve func(c net.Conn, rw *bufio.ReadWriter, r *http.Request)) (string, *tls.Config) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c, rw, r)
	})
	if !useTLS {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return "ws" + strings.TrimPrefix(srv.URL, "http"), nil
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	return "wss" + strings.TrimPrefix(srv.URL, "https"), &tls.Config{RootCAs: pool}
}

// TestHandshakeResponses: the responses RFC 6455 4.1 has a client take are
// taken, with the frame the server sent in the same packet received
// whole; those it has a client refuse are refused, saying which header.
// Over TCP and TLS (the filter sits above TLS).
func TestHandshakeResponses(t *testing.T) {
	status := "HTTP/1.1 101 Switching Protocols\r\n"
	rest := func(connection string) func(string) string {
		return func(a string) string {
			return status + "Upgrade: websocket\r\n" + connection + "Sec-WebSocket-Accept: " + a + "\r\n\r\n"
		}
	}
	taken := map[string]func(string) string{
		"exact":               rest("Connection: Upgrade\r\n"),
		"lower case":          rest("connection: upgrade\r\n"),
		"keep-alive first":    rest("Connection: keep-alive, Upgrade\r\n"),
		"keep-alive after":    rest("Connection: Upgrade,keep-alive\r\n"),
		"whitespace":          rest("Connection:\t keep-alive ,  UPGRADE \r\n"),
		"bare LF":             func(a string) string { return rest("Connection: keep-alive, Upgrade\n")(a) },
		"other headers, long": rest("Server: x\r\nX-Long: " + strings.Repeat("y", 5000) + "\r\nConnection: Upgrade\r\n"),
		"upgrade mixed case": func(a string) string {
			return strings.Replace(rest("Connection: Upgrade\r\n")(a), "websocket", "WebSocket", 1)
		},
		"no reason phrase": func(a string) string {
			return strings.Replace(rest("Connection: Upgrade\r\n")(a), " Switching Protocols", " ", 1)
		},
		"connection header last": func(a string) string {
			return status + "Upgrade: websocket\r\nSec-WebSocket-Accept: " + a + "\r\nConnection: close, upgrade\r\n\r\n"
		},
		"two fields":                rest("Connection: keep-alive\r\nConnection: Upgrade\r\n"),
		"two fields, upgrade first": rest("Connection: upgrade\r\nX: y\r\nConnection: keep-alive\r\n"),
	}
	refused := map[string]struct {
		response func(string) string
		want     string
	}{
		"keep-alive only": {rest("Connection: keep-alive\r\n"), `"Connection"`},
		"two, neither":    {rest("Connection: keep-alive\r\nConnection: close\r\n"), `"Connection"`},
		"upgrades":        {rest("Connection: upgrades, keep-alive\r\n"), `"Connection"`},
		"no connection":   {rest(""), `"Connection"`},
		"wrong accept":    {func(string) string { return rest("Connection: Upgrade\r\n")("x") }, "Sec-WebSocket-Accept"},
		"status 200":      {func(string) string { return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" }, "200"},
		"upgrade to h2c": {func(a string) string {
			return strings.Replace(rest("Connection: Upgrade\r\n")(a), "websocket", "h2c", 1)
		}, `"Upgrade"`},
		"extension unasked": {rest("Connection: Upgrade\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"), "xtension"},
	}
	for _, useTLS := range []bool{false, true} {
		for name, response := range taken {
			url, tc := handshakeServer(t, useTLS, response)
			c, err := Dial(context.Background(), Options{URL: url, TLS: tc, DialTimeout: 2 * time.Second})
			if err != nil {
				t.Errorf("tls %v, %s: %v", useTLS, name, err)
				continue
			}
			msg, err := c.Receive(2 * time.Second)
			if err != nil || string(msg) != "hi" {
				t.Errorf("tls %v, %s: the frame sent with the response: %q, %v", useTLS, name, msg, err)
			}
			c.Abort()
		}
		for name, r := range refused {
			url, tc := handshakeServer(t, useTLS, r.response)
			c, err := Dial(context.Background(), Options{URL: url, TLS: tc, DialTimeout: 2 * time.Second})
			if err == nil {
				c.Abort()
				t.Errorf("tls %v, %s: taken", useTLS, name)
				continue
			}
			if !strings.Contains(err.Error(), r.want) {
				t.Errorf("tls %v, %s: %v; want it to say %s", useTLS, name, err, r.want)
			}
		}
	}
}

// filterHeader is what a connectionFilter hands on of the header fields
// in (the lines after a status line, up to and with the blank line).
func filterHeader(in string) string {
	f := &connectionFilter{Conn: &byteConn{b: []byte("HTTP/1.1 101 OK\r\n" + in), chunk: len(in) + 20}}
	br := bufio.NewReader(f)
	var out strings.Builder
	for {
		line, err := br.ReadString('\n')
		out.WriteString(line)
		if err != nil || strings.TrimRight(line, "\r\n") == "" {
			return strings.TrimPrefix(out.String(), "HTTP/1.1 101 OK\r\n")
		}
	}
}

// TestConnectionUpgrade: the Connection fields, one or several, as handed
// on: one "Connection:Upgrade" at the blank line if any lists the token,
// else the first as it came; every other line at once, as it came.
func TestConnectionUpgrade(t *testing.T) {
	for in, want := range map[string]string{
		"A: b\r\nConnection: keep-alive\r\nC: d\r\nconnection: x, upgrade\n\r\n": "A: b\r\nC: d\r\nConnection:Upgrade\r\n\r\n",
		"Connection: Upgrade\r\nConnection: keep-alive\r\n\r\n":                  "Connection:Upgrade\r\n\r\n",
		"Connection: keep-alive\r\nConnection: close\r\n\r\n":                    "Connection: keep-alive\r\n\r\n",
		"Connection: keep-alive, Upgrade\r\n\r\n":                                "Connection:Upgrade\r\n\r\n",
		"CONNECTION:upgrade,x\n\n":                                               "Connection:Upgrade\r\n\n",
		"Connection:\t keep-alive ,  UPGRADE \r\n\r\n":                           "Connection:Upgrade\r\n\r\n",
		"Connection: upgraded, x\r\n\r\n":                                        "Connection: upgraded, x\r\n\r\n",
		"X-Connection: upgrade, x\r\n\r\n":                                       "X-Connection: upgrade, x\r\n\r\n",
		// A space before the colon (RFC 7230 3.2.4): not a field of that
		// name here; gobwas/ws trims it and refuses the value.
		"Connection : upgrade, x\r\n\r\n": "Connection : upgrade, x\r\n\r\n",
		"\r\n":                            "\r\n",
		// A CR more than the line ending's is the value's, as it is
		// gobwas/ws's: not the token, and refused.
		"Connection: upgrade\r\r\n\r\n":             "Connection: upgrade\r\r\n\r\n",
		"Connection: keep-alive, upgrade\r\r\n\r\n": "Connection: keep-alive, upgrade\r\r\n\r\n",
	} {
		if got := filterHeader(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// TestConnectionFilterPieces: the filter hands on whole lines however the
// response arrives (a byte at a time here), and keeps what follows the
// blank line for the connection.
func TestConnectionFilterPieces(t *testing.T) {
	response := "HTTP/1.1 101 Switching Protocols\r\nConnection: keep-alive, Upgrade\r\n\r\nFRAME"
	cli, srv := net.Pipe()
	go func() {
		for i := 0; i < len(response); i++ {
			if _, err := srv.Write([]byte{response[i]}); err != nil {
				return
			}
		}
		srv.Close()
	}()
	f := &connectionFilter{Conn: cli}
	br := bufio.NewReader(f)
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", lines, err)
		}
		lines = append(lines, line)
		if line == "\r\n" {
			break
		}
	}
	want := []string{"HTTP/1.1 101 Switching Protocols\r\n", "Connection:Upgrade\r\n", "\r\n"}
	if strings.Join(lines, "|") != strings.Join(want, "|") || br.Buffered() != 0 {
		t.Fatalf("lines %q (%d bytes buffered), want %q", lines, br.Buffered(), want)
	}
	// What follows: what is pending, then the connection's bytes.
	if rest, err := io.ReadAll(f); err != nil || string(rest) != "FRAME" {
		t.Fatalf("after the blank line: %q, %v", rest, err)
	}
}

// byteConn hands out b chunk bytes a read (one if chunk is 0), then
// errHandshakeTooBig (what dialConn returns at the cap).
type byteConn struct {
	net.Conn
	b     []byte
	chunk int // bytes a read: 1 if 0
}

func (c *byteConn) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, errHandshakeTooBig
	}
	n := copy(p[:min(len(p), max(c.chunk, 1))], c.b)
	c.b = c.b[n:]
	return n, nil
}

// TestConnectionFilterTrickle: a server that sends a long header line a
// byte a packet costs the filter time and memory linear in the bytes:
// each read's byte is looked at once, not the whole line again (which
// took 0.58 s for the default cap's 256 KiB, and would take minutes for
// 2 MiB), and a read allocates no buffer of its own (4 KiB a read: 8 GiB
// for 2 MiB). The time limit is against a hang, not a timing assertion.
func TestConnectionFilterTrickle(t *testing.T) {
	line := append([]byte("HTTP/1.1 101 Switching Protocols\r\nX: "), bytes.Repeat([]byte("y"), 2<<20)...)
	done := make(chan error, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	go func() {
		br := bufio.NewReaderSize(&connectionFilter{Conn: &byteConn{b: line}}, 4096)
		for {
			if _, err := br.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != errHandshakeTooBig {
			t.Fatalf("got %v, want the cap's error", err)
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 8*uint64(len(line)) {
			t.Fatalf("%d bytes allocated for %d read", n, len(line))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("2 MiB a byte a read not through the filter in 20 s")
	}
}

// TestConnectionUpgradeMemory: a Connection field of many tokens costs
// no memory in proportion to their number (bytes.Split allocated 24
// bytes a token: 6.3 MB for a 256 KiB line of commas).
func TestConnectionUpgradeMemory(t *testing.T) {
	line := append([]byte("Connection: "), bytes.Repeat([]byte(","), 256<<10)...)
	line = append(line, "upgrade\r\n"...)
	f := &connectionFilter{}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := f.take(line)
	runtime.ReadMemStats(&after)
	if got != nil || !f.upgrade {
		t.Fatalf("handed on %.40q, upgrade %v", got, f.upgrade)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("%d bytes allocated for a line of %d", n, len(line))
	}
}

// TestHandshakeStatusAtOnce: a response whose status is not 101 is
// refused for its status line, though the server sends nothing more: the
// filter hands each line on as it comes (only Connection fields wait for
// the blank line), so gobwas/ws sees the status at once instead of a
// timeout when the dial's deadline passes.
func TestHandshakeStatusAtOnce(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		url, tc := handshakeServer(t, useTLS, func(string) string {
			return "HTTP/1.1 404 Not Found\r\nConnection: keep-alive\r\n" // and no blank line
		})
		c, err := Dial(context.Background(), Options{URL: url, TLS: tc, DialTimeout: 3 * time.Second})
		if err == nil {
			c.Abort()
			t.Fatalf("tls %v: taken", useTLS)
		}
		if !strings.Contains(err.Error(), "404") || errors.Is(err, ErrTimeout) {
			t.Errorf("tls %v: %v; want the status, not a timeout", useTLS, err)
		}
	}
}

// upgradeConn answers the upgrade request written to it with response,
// where ACCEPT stands for the request's Sec-WebSocket-Accept, a byte a
// read, then io.EOF.
type upgradeConn struct {
	net.Conn
	req      bytes.Buffer
	response string
	answer   []byte
	answered bool
}

func (c *upgradeConn) Write(p []byte) (int, error) { return c.req.Write(p) }

func (c *upgradeConn) Read(p []byte) (int, error) {
	if !c.answered {
		c.answered = true
		r, _ := http.ReadRequest(bufio.NewReader(&c.req))
		accept := acceptKey(r.Header.Get("Sec-WebSocket-Key"))
		c.answer = []byte(strings.ReplaceAll(c.response, "ACCEPT", accept))
	}
	if len(c.answer) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:1], c.answer)
	c.answer = c.answer[n:]
	return n, nil
}

// TestConnectionFilterRefusals: responses gobwas/ws refuses for anything
// but a Connection field with more than the token "Upgrade" in it are
// refused through the filter too: the filter changes nothing else.
func TestConnectionFilterRefusals(t *testing.T) {
	status := "HTTP/1.1 101 Switching Protocols\r\n"
	rest := "Upgrade: websocket\r\nSec-WebSocket-Accept: ACCEPT\r\n"
	u, _ := url.Parse("ws://example.com/")
	for _, response := range []string{
		// A Connection field in the status line's place: no status line.
		"Connection: Upgrade\r\n" + status + rest + "\r\n",
		"Connection: keep-alive, upgrade\r\n" + status + rest + "\r\n",
		// A CR before the line ending: the value is "upgrade\r".
		status + rest + "Connection: upgrade\r\r\n\r\n",
		status + rest + "Connection: keep-alive, upgrade\r\r\n\r\n",
		// "\r\r\n" is no blank line.
		status + rest + "Connection: upgrade\r\n\r\r\n",
	} {
		for _, filter := range []bool{false, true} {
			var c net.Conn = &upgradeConn{response: response}
			if filter {
				c = &connectionFilter{Conn: c}
			}
			if _, _, err := (ws.Dialer{}).Upgrade(c, u); err == nil {
				t.Errorf("%q taken (filter %v)", response, filter)
			}
		}
	}
	// And what the filter is for is taken.
	c := &connectionFilter{Conn: &upgradeConn{response: status + rest + "Connection: keep-alive, upgrade\r\n\r\n"}}
	if _, _, err := (ws.Dialer{}).Upgrade(c, u); err != nil {
		t.Errorf("a Connection field listing upgrade: %v", err)
	}
}

// TestHandshakeRefusalsSayWhy: a refused handshake's error names what the
// server sent that was wrong. gobwas/ws's error for an extension the client
// did not offer names the Sec-WebSocket-Protocol header (its text reuses
// the subprotocol's header name), and its error for a status other than 101
// gives only the number: a redirect did not say where to, which is what the
// user needs to mend the URL. The errors still match gobwas/ws's for
// errors.Is and errors.As (the open wait decides on ws.StatusError).
func TestHandshakeRefusalsSayWhy(t *testing.T) {
	ok := func(extra string) func(string) string {
		return func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\n" + extra + "\r\n"
		}
	}
	for _, useTLS := range []bool{false, true} {
		for name, tc := range map[string]struct {
			response func(string) string
			want     []string
			not      string
			is       error
		}{
			"extension": {ok("Sec-WebSocket-Extensions: permessage-deflate\r\n"),
				[]string{"Sec-WebSocket-Extensions", "permessage-deflate", "offered none"}, "Sec-WebSocket-Protocol", ws.ErrHandshakeBadExtensions},
			"subprotocol": {ok("Sec-WebSocket-Protocol: chat\r\n"),
				[]string{"Sec-WebSocket-Protocol", "chat", "offered none"}, "", ws.ErrHandshakeBadSubProtocol},
			"redirect": {func(string) string {
				return "HTTP/1.1 302 Found\r\nLocation: ws://elsewhere.example:9/x\r\nContent-Length: 0\r\n\r\n"
			}, []string{"302 Found", "ws://elsewhere.example:9/x", "redirect"}, "", nil},
			"redirect nowhere": {func(string) string {
				return "HTTP/1.1 301 Moved Permanently\r\nContent-Length: 0\r\n\r\n"
			}, []string{"301 Moved Permanently", "a redirect, which this client does not follow"}, "redirect to", nil},
			"not found": {func(string) string {
				return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
			}, []string{"404 Not Found"}, "", nil},
			"full, back in 2 minutes": {func(string) string {
				return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n"
			}, []string{"503 Service Unavailable", "tried again in 2m0s", `Retry-After: "120"`}, "cannot read", nil},
			"full, back when it says in words": {func(string) string {
				return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n"
			}, []string{"503 Service Unavailable", `a Retry-After this client cannot read: "soon"`}, "tried again", nil},
		} {
			url, cfg := handshakeServer(t, useTLS, tc.response)
			c, err := Dial(context.Background(), Options{URL: url, TLS: cfg, DialTimeout: 2 * time.Second})
			if err == nil {
				c.Abort()
				t.Errorf("tls %v, %s: taken", useTLS, name)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("tls %v, %s: %v; want it to say %q", useTLS, name, err, w)
				}
			}
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("tls %v, %s: %v; names %s, which the server's answer did not get wrong", useTLS, name, err, tc.not)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("tls %v, %s: %v is not %v", useTLS, name, err, tc.is)
			}
			var status ws.StatusError
			if tc.is == nil && !errors.As(err, &status) {
				t.Errorf("tls %v, %s: %v is no ws.StatusError", useTLS, name, err)
			}
		}
	}
}

// TestHandshakeMalformedSaysWhich: an answer that is not HTTP (another
// service on the port), an HTTP/1.0 one, or one with a line that is no
// header field is refused quoting the line: gobwas/ws says only
// "malformed HTTP response" or "bad HTTP protocol version".
func TestHandshakeMalformedSaysWhich(t *testing.T) {
	for name, tc := range map[string]struct {
		response func(string) string
		want     string
		is       error
	}{
		"ssh": {func(string) string { return "SSH-2.0-OpenSSH_9.6\r\n" }, `"SSH-2.0-OpenSSH_9.6"`, ws.ErrMalformedResponse},
		"http/1.0": {func(a string) string {
			return "HTTP/1.0 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\n\r\n"
		}, `"HTTP/1.0 101 Switching Protocols"`, ws.ErrHandshakeBadProtocol},
		"no colon": {func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nbroken line\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\n\r\n"
		}, `"broken line"`, ws.ErrMalformedResponse},
	} {
		url, _ := handshakeServer(t, false, tc.response)
		c, err := Dial(context.Background(), Options{URL: url, DialTimeout: 2 * time.Second})
		if err == nil {
			c.Abort()
			t.Errorf("%s: taken", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
			t.Errorf("%s: %v; want it to quote %s, and to be %v", name, err, tc.want, tc.is)
		}
	}
}

// TestParseRetryAfter: delay-seconds and the three HTTP-date forms RFC
// 9110 has a recipient accept, as a wait from now; a date gone is no wait,
// any number a server writes is at most maxRetryAfter, and anything else
// is not read (the caller keeps its own backoff).
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"120", 2 * time.Minute, true},
		{"0", 0, true},
		{"86401", maxRetryAfter, true},
		{"99999999999999999999999", maxRetryAfter, true},
		{"Wed, 21 Oct 2015 07:28:30 GMT", 30 * time.Second, true},
		{"Wednesday, 21-Oct-15 07:29:00 GMT", time.Minute, true},
		{"Wed Oct 21 07:28:05 2015", 5 * time.Second, true},
		{"Wed, 21 Oct 2015 07:00:00 GMT", 0, true},
		{"Fri, 21 Oct 2016 07:28:00 GMT", maxRetryAfter, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"Wed, 21 Oct 2015 07:28:30 PST", 0, false},
	} {
		got, ok := parseRetryAfter([]byte(tc.value), now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Retry-After %q: %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

// TestParseRetryAfterTwoDigitYear: an RFC 850 date's two-digit year is
// read as RFC 9110 5.6.7 says, as not more than 50 years after now (a
// MUST): in 2026 "-70" is 2070, a wait of a day at most, not 1970 (no
// wait); in 2015 "-66" is 1966 (no wait), not 2066.
func TestParseRetryAfterTwoDigitYear(t *testing.T) {
	for _, tc := range []struct {
		now   time.Time
		value string
		want  time.Duration
	}{
		{time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC), "Saturday, 06-Dec-70 08:00:00 GMT", maxRetryAfter},
		{time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC), "Sunday, 06-Dec-26 08:00:30 GMT", 30 * time.Second},
		{time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC), "Wednesday, 06-Dec-77 08:00:00 GMT", 0},
		{time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC), "Friday, 21-Oct-66 07:28:30 GMT", 0},
		{time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC), "Wednesday, 21-Oct-15 07:29:00 GMT", time.Minute},
		{time.Date(2099, 12, 31, 23, 59, 0, 0, time.UTC), "Friday, 01-Jan-00 00:00:30 GMT", 90 * time.Second},
	} {
		got, ok := parseRetryAfter([]byte(tc.value), tc.now)
		if got != tc.want || !ok {
			t.Errorf("Retry-After %q at %v: %v, %v; want %v, true", tc.value, tc.now, got, ok, tc.want)
		}
	}
}

// TestRetryAfterCountsFromTheResponseDate: a Retry-After date is counted
// from the response's own Date, so that the wait is the server's clock
// against itself: a robot whose clock still says 1970 waits the 2 s the
// server asked, not decades (then cut to MaxBackoff). With no Date, or
// one that does not read, from this machine's clock (here a date long
// gone: no wait).
func TestRetryAfterCountsFromTheResponseDate(t *testing.T) {
	for name, tc := range map[string]struct {
		date string
		want time.Duration
	}{
		"with the server's date":  {"Date: Wed, 21 Oct 2015 07:28:00 GMT\r\n", 2 * time.Second},
		"with no date":            {"", 0},
		"with a date that is bad": {"Date: yesterday\r\n", 0},
	} {
		url, cfg := handshakeServer(t, false, func(string) string {
			return "HTTP/1.1 503 Service Unavailable\r\n" + tc.date + "Retry-After: Wed, 21 Oct 2015 07:28:02 GMT\r\nContent-Length: 0\r\n\r\n"
		})
		_, err := Dial(context.Background(), Options{URL: url, TLS: cfg, DialTimeout: 2 * time.Second})
		got, ok := RetryAfter(err)
		if !ok || got != tc.want {
			t.Errorf("%s: RetryAfter %v, %v (%v); want %v", name, got, ok, err, tc.want)
		}
	}
}
