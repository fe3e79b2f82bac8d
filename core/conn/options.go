package conn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrBadAPIKey: Options.APIKey cannot go into an HTTP header field.
var ErrBadAPIKey = errors.New("the API key cannot be sent")

// CheckAPIKey refuses an API key that an HTTP header field cannot hold
// (RFC 9110 5.5): one with a control character, a line break above all,
// or one that ends in a space or tab (which the field's value drops).
// net/http's header writer, which sends the upgrade request's fields,
// turned CR and LF into spaces (so "k\r\nX: y" went out as the key
// "k  X: y", never as a second field) and trimmed the ends, and let other
// control bytes through: the server was sent a key other than the one
// given. The message names the byte, never the key.
func CheckAPIKey(key string) error {
	for i := 0; i < len(key); i++ {
		if b := key[i]; b < 0x20 && b != '\t' || b == 0x7f {
			hint := ""
			if b == '\r' || b == '\n' {
				hint = " (a line ending read with the key from a file?)"
			}
			return fmt.Errorf("%w: it holds a control character (byte 0x%02x at offset %d of %d)%s, which an HTTP header field cannot", ErrBadAPIKey, b, i, len(key), hint)
		}
	}
	if n := len(key); n > 0 && (key[n-1] == ' ' || key[n-1] == '\t') {
		// The field's value ends with the key, and a field value's
		// trailing spaces and tabs are no part of it (RFC 9110 5.5): the
		// header writer trims them, as a server's parser would, and the
		// server was given the key without them.
		return fmt.Errorf("%w: it ends in a space or tab (%d bytes), which an HTTP header field drops: the server would be given another key", ErrBadAPIKey, len(key))
	}
	return nil
}

// ErrURLCredentials: the URL has a user name or password in it.
var ErrURLCredentials = errors.New("the URL has a user name or password (user:password@), which this client does not send")

// CheckURL refuses a URL that this client would not connect to as it
// reads: one with a fragment (ErrURLFragment), or one with userinfo (ws://user:password@host). Nothing read it:
// gobwas/ws sends no Authorization for it, so the server was never given
// the credentials the caller wrote, and the connection went ahead as if
// they had been (a reverse proxy's basic authentication refused it with
// a 401 that did not say why); a user name alone, a token's usual place
// in such a URL, also showed in every message and ledger (RedactedURL
// hid a password only). A URL that does not parse is left to the dialer.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	if u.User != nil {
		return fmt.Errorf("%w: give the server's key as the API key (options.api_key), sent as SPEC 1.2's Authorization: Api-Key", ErrURLCredentials)
	}
	if strings.IndexByte(raw, '#') >= 0 {
		// gobwas/ws reads the URL as a request target, where "#" is no
		// delimiter, and sent the fragment as part of the path, escaped
		// ("/p#x" went as "GET /p%23x"): another resource than the URL
		// names.
		return ErrURLFragment
	}
	return nil
}

// ErrURLFragment: the URL has a fragment (#...), which RFC 6455 3 forbids
// a WebSocket URI.
var ErrURLFragment = errors.New("the URL has a fragment (#...), which a WebSocket URL may not have (RFC 6455 section 3); a # in a path or query is written %23")

// unzoned reads raw's host, when it is an IPv6 literal with a zone
// (ws://[fe80::1%25eth0]:8000, RFC 6874), as the Host field gives it
// (the address and port without the zone: RFC 6874 section 4 has the
// zone left out of it, as net/http does) and as a certificate is checked
// against (the address alone). The zone names an interface of this
// machine and is only for the connect. gobwas/ws gave both as written:
// the certificate was checked against "[fe80::1%eth0]", which is no
// address, and so never matched a certificate for fe80::1.
func unzoned(raw string) (host, name string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", false
	}
	addr, zone, found := strings.Cut(u.Hostname(), "%")
	if !found || zone == "" || net.ParseIP(addr) == nil || !strings.HasPrefix(u.Host, "[") {
		return "", "", false
	}
	host = "[" + addr + "]"
	if port := u.Port(); port != "" {
		host = net.JoinHostPort(addr, port)
	}
	return host, addr, true
}

// requestURL is raw with its query's bytes that a request line cannot
// carry percent-encoded (RFC 3986 3.4: a query is pchars, "/" and "?";
// the IRI mapping of RFC 3987 3.1 for bytes past ASCII). url.Parse keeps
// a query as written, and gobwas/ws wrote it into the request line as
// it was: a space in it ("?task=pick up") ended the request target early
// ("GET /?task=pick up HTTP/1.1"), a request servers refuse as malformed
// with a 400 that does not say why, and a query may so put words of its
// own in the request line. The path needs nothing: url.URL escapes it.
func requestURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(u.RawQuery); i++ {
		c := u.RawQuery[i]
		if queryByte(c) || c == '%' && isEscape(u.RawQuery[i:]) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.String() == u.RawQuery {
		return raw
	}
	u.RawQuery = b.String()
	return u.String()
}

// queryByte reports whether c may stand as it is in a URI's query:
// unreserved, sub-delims, ":", "@", "/" and "?". A "%" stands only as the
// start of an escape the caller wrote (isEscape); any other "%" ("?done=
// 100%", "%zz") is no escape, a byte a request target cannot carry
// either, and goes as %25.
func queryByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/?", c) >= 0
}

// isEscape reports whether s begins with a percent-encoded byte: "%"
// and two hex digits (RFC 3986 2.1).
func isEscape(s string) bool {
	return len(s) >= 3 && s[0] == '%' && isHex(s[1]) && isHex(s[2])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
