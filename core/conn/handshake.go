package conn

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/ws"
)

// connectionFilter sits between gobwas/ws and the connection (above TLS)
// while gobwas/ws reads the handshake response, and hands the response on
// line by line as it arrives (so that a status other than 101 fails at
// once), but for its Connection header fields: those it holds back until
// the blank line, and hands on as one "Connection:Upgrade" if any lists
// the token "upgrade", else the first of them as it came.
//
// RFC 6455 4.1 has a client fail the connection only if the response's
// Connection header does not contain the token "Upgrade", compared
// case-insensitively: "keep-alive, Upgrade", which a proxy may send, is a
// valid answer, and so are two fields "Connection: keep-alive" and
// "Connection: Upgrade" (RFC 7230 3.2.2: fields of one name are one
// comma-separated list). gobwas/ws (v1.5.0, dialer.go) takes only one
// field that is exactly "Upgrade", saying that a server's must be; the
// server's is, but a client must not be stricter than 4.1. Every other
// check of the response stays gobwas/ws's (it checks that the header is
// there only at the blank line, so where it comes does not matter).
//
// The bytes after the blank line (a server may send its first frame in
// the same packet) stay here, in Rest, for the connection to read first:
// what is handed on ends at the blank line, and gobwas/ws reads no
// further. The response is copied once more than it was: a handshake's
// few hundred bytes, once per connection, and at most the handshake cap
// (the connection under the filter stops there).
type connectionFilter struct {
	net.Conn
	pending []byte // read from Conn, not yet handed on
	scanned int    // pending[:scanned] has been looked at for '\n': each byte once
	out     []byte // the part of a line being handed on
	status  bool   // the status line has been handed on
	interim bool   // inside an interim 1xx response, which is dropped (see interimStatus)
	done    bool   // the blank line has been handed on
	err     error  // Conn's read error, returned once pending is handed on

	upgrade bool   // a Connection field listed "upgrade"
	prev    field  // the kind of the last header field, which an obs-fold line continues
	first   []byte // the first Connection field, if none has yet (a copy)
	last    []byte // what the blank line hands on: the Connection field, then it

	// What a refusal's message quotes (see refusal): the status line, and
	// the first Sec-WebSocket-Protocol field and the first non-empty
	// Sec-WebSocket-Extensions field (those gobwas/ws refuses, as this
	// client offers neither), each cut to maxQuoted bytes.
	statusLine, protocol, extensions []byte
	sawProtocol                      bool
	// lastLine is the last line handed on but the blank one: the one
	// gobwas/ws refused, when it finds a line malformed (it reads a
	// line a Read, and the filter hands on one).
	lastLine []byte
	inHeader bool // lastLine is a header field's, not the status line
}

// maxQuoted caps what an error message quotes of a server's response.
const maxQuoted = 200

// Read hands on the rest of the line being handed on, or the next whole
// line (a partial one only when Conn's read failed), until the blank line
// (see connectionFilter); after it, what is pending, then Conn's bytes as
// they come (gobwas/ws reads no further than the blank line, so this is a
// guard).
func (f *connectionFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.done {
			if len(f.pending) == 0 {
				return f.Conn.Read(p)
			}
			f.out, f.pending = f.pending, nil
			break
		}
		if i := bytes.IndexByte(f.pending[f.scanned:], '\n'); i >= 0 {
			line := f.pending[:f.scanned+i+1]
			f.pending, f.scanned = f.pending[len(line):], 0
			if f.interim {
				// A line of an interim response, dropped up to its
				// blank line; a status line comes next again.
				f.interim = len(lineText(line)) > 0
				continue
			}
			if !f.status && interimStatus(lineText(line)) {
				f.interim = true
				f.statusLine = quoted(lineText(line)) // the final one's replaces it
				continue
			}
			if !f.status {
				// The status line, as it came, whatever it holds: a
				// "Connection:" line in its place is no header field,
				// and gobwas/ws refuses it.
				f.status, f.out = true, line
				f.statusLine = quoted(lineText(line))
				f.lastLine = f.statusLine
				continue
			}
			f.out = f.take(line)
			continue
		}
		f.scanned = len(f.pending)
		if f.err != nil {
			if len(f.pending) == 0 {
				return 0, f.err
			}
			f.out, f.pending, f.scanned = f.pending, nil, 0
			break
		}
		// At most 4 KiB a read, so that Rest stays under 4 KiB, and into
		// pending itself (a buffer of the read's own escaped to the heap:
		// 4 KiB a read of one byte).
		f.pending = slices.Grow(f.pending, 4096)
		n, err := f.Conn.Read(f.pending[len(f.pending) : len(f.pending)+4096])
		f.pending = f.pending[:len(f.pending)+n]
		f.err = err
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// interimStatus reports whether text, a status line, is an interim 1xx
// response's other than 101: 100 Continue, 102 Processing, 103 Early
// Hints. RFC 6455 4.1 has a client handle a status other than 101 per
// HTTP, and HTTP has a client accept any number of 1xx responses ahead of
// the final one, expected or not (RFC 2616 10.1, RFC 9110 15.2); gobwas/ws
// takes the first status line for the answer, and refused them. The
// filter drops them (their lines count towards the handshake cap, and the
// dial's deadline bounds them), so that gobwas/ws and a refusal's message
// see the final response's status line.
func interimStatus(text []byte) bool {
	proto, rest, ok := bytes.Cut(text, []byte(" "))
	if !ok || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return false
	}
	code, _, _ := bytes.Cut(rest, []byte(" "))
	return len(code) == 3 && code[0] == '1' && '0' <= code[1] && code[1] <= '9' && '0' <= code[2] && code[2] <= '9' &&
		string(code) != "101"
}

// field is the kind of a header field, for a line that continues it
// (obs-fold; see take).
type field uint8

const (
	fieldNone       field = iota // no field yet, or a line that is none
	fieldConnection              // a Connection field: its tokens are noted
	fieldChecked                 // one gobwas/ws reads: Upgrade, Sec-WebSocket-*
	fieldOther                   // one nobody here reads
)

// kindOf is the kind of the header field whose name is name.
func kindOf(name []byte) field {
	for _, checked := range []string{"Upgrade", "Sec-WebSocket-Accept", "Sec-WebSocket-Extensions", "Sec-WebSocket-Protocol"} {
		if bytes.EqualFold(name, []byte(checked)) {
			return fieldChecked
		}
	}
	return fieldOther
}

// take returns what to hand on for line, a whole line of the response:
// line itself, nothing for a Connection field (noted), or, for the blank
// line (CRLF or LF, as gobwas/ws's), the Connection field decided on and
// then the blank line.
//
// A line that begins with a space or a tab continues the field before it
// (obs-fold): RFC 2616 2.2, by which RFC 6455 reads the handshake, allows
// folding any field, and RFC 9112 5.2 has a user agent read the fold as a
// space (MUST). gobwas/ws takes such a line for a field with no colon and
// refuses the answer, so the filter takes it itself: a Connection field's
// continuation is looked at for the token as the field is (a token never
// spans a fold, which stands for whitespace), and one of a field nobody
// here reads is dropped. One of a field gobwas/ws reads is handed on, and
// refused there: dropped, it would leave gobwas/ws the part before the
// fold ("Sec-WebSocket-Extensions:", then the extension, would pass for
// none). So is one with no field before it (RFC 9112 2.2 lets a recipient
// reject that).
func (f *connectionFilter) take(line []byte) []byte {
	text := lineText(line)
	if len(text) > 0 && (text[0] == ' ' || text[0] == '\t') {
		switch f.prev {
		case fieldConnection:
			if !f.upgrade && hasToken(text, "upgrade") {
				f.upgrade, f.first = true, nil
			}
			return nil
		case fieldOther:
			return nil
		}
		f.lastLine, f.inHeader = quoted(text), true
		return line
	}
	if value, ok := connectionValue(line); ok {
		f.prev = fieldConnection
		switch {
		case f.upgrade:
		case hasToken(lineText(value), "upgrade"):
			f.upgrade, f.first = true, nil
		case f.first == nil:
			f.first = bytes.Clone(line)
		}
		return nil
	}
	if len(text) > 0 {
		f.prev = fieldNone
		if name, _, ok := headerField(text); ok {
			f.prev = kindOf(name)
		}
		f.note(text)
		f.lastLine, f.inHeader = quoted(text), true
		return line
	}
	f.done = true
	if f.upgrade {
		f.last = append(f.last, "Connection:Upgrade\r\n"...)
	}
	f.last = append(append(f.last, f.first...), line...)
	return f.last
}

// note keeps what a refusal may quote of the header field text.
func (f *connectionFilter) note(text []byte) {
	name, value, ok := headerField(text)
	if !ok {
		return
	}
	switch {
	case !f.sawProtocol && bytes.EqualFold(name, []byte("Sec-WebSocket-Protocol")):
		f.sawProtocol, f.protocol = true, quoted(value)
	case f.extensions == nil && len(value) > 0 && bytes.EqualFold(name, []byte("Sec-WebSocket-Extensions")):
		f.extensions = quoted(value)
	}
}

// quoted is a copy of b cut to maxQuoted bytes.
func quoted(b []byte) []byte { return bytes.Clone(b[:min(len(b), maxQuoted)]) }

// refusal is err, a refusal of the response by gobwas/ws, said with what
// in the response was wrong, or err itself. gobwas/ws's own words name
// the Sec-WebSocket-Protocol header for an extension the client did not
// offer, and give a status other than 101 as its number alone: a
// redirect did not say where to. Only bytes already read are looked at
// (the Location of a redirect, if it came with the status line): a
// status other than 101 still fails at once.
func (f *connectionFilter) refusal(err error) error {
	var status ws.StatusError
	switch {
	case errors.As(err, &status):
		msg := fmt.Sprintf("the server answered %q, not 101 Switching Protocols", f.statusLine)
		if status >= 300 && status < 400 {
			if loc := f.fieldAhead("Location"); loc != nil {
				msg += fmt.Sprintf(": a redirect to %q, which this client does not follow (give that URL)", loc)
			} else {
				msg += ": a redirect, which this client does not follow"
			}
		}
		e := &refusedError{msg: msg, err: err}
		if field := f.fieldAhead("Retry-After"); field != nil {
			if d, ok := parseRetryAfter(field, f.serverNow()); ok {
				e.retryAfter, e.hasRetryAfter = d, true
				e.msg += fmt.Sprintf(", and asks to be tried again in %v (Retry-After: %q)", d, field)
			} else {
				e.msg += fmt.Sprintf(", with a Retry-After this client cannot read: %q", field)
			}
		}
		return e
	case errors.Is(err, ws.ErrHandshakeBadProtocol):
		return &refusedError{msg: fmt.Sprintf("the server answered %q: not HTTP/1.1 or later, which a WebSocket handshake needs", f.statusLine), err: err}
	case errors.Is(err, ws.ErrMalformedResponse) && f.inHeader && isField(f.lastLine, "Sec-WebSocket-Extensions"):
		// gobwas/ws parses this field's value (an extension list), and
		// says the same for one that does not parse as for a line with
		// no colon: this line is a header field.
		return &refusedError{msg: fmt.Sprintf("the server's 101 answer has a Sec-WebSocket-Extensions field whose value does not parse: %q (this client offered no extension; SPEC 1.1)", f.lastLine), err: err}
	case errors.Is(err, ws.ErrMalformedResponse) && f.lastLine != nil:
		what := "a line that is no header field"
		if !f.inHeader {
			what = "a malformed status line (is this port another service's?)"
		}
		return &refusedError{msg: fmt.Sprintf("the server's answer is not a valid HTTP response: %s: %q", what, f.lastLine), err: err}
	case errors.Is(err, ws.ErrHandshakeBadExtensions):
		return &refusedError{msg: fmt.Sprintf("the server's 101 answer accepts an extension this client offered none of: Sec-WebSocket-Extensions: %q (SPEC 1.1: no compression)", f.extensions), err: err}
	case errors.Is(err, ws.ErrHandshakeBadSubProtocol):
		return &refusedError{msg: fmt.Sprintf("the server's 101 answer chooses a subprotocol this client offered none of: Sec-WebSocket-Protocol: %q", f.protocol), err: err}
	}
	return err
}

// fieldAhead is the value of the header field name among the whole lines
// read but not handed on, before a blank line, or nil.
func (f *connectionFilter) fieldAhead(name string) []byte {
	for rest := f.pending; ; {
		line, more, ok := bytes.Cut(rest, []byte("\n"))
		text := lineText(line)
		if !ok || len(text) == 0 {
			return nil
		}
		if k, v, ok := headerField(text); ok && bytes.EqualFold(k, []byte(name)) {
			return quoted(v)
		}
		rest = more
	}
}

// isField reports whether text is a header field named name.
func isField(text []byte, name string) bool {
	k, _, ok := headerField(text)
	return ok && bytes.EqualFold(k, []byte(name))
}

// headerField splits a header field's text into its name and value,
// spaces trimmed; ok is false for a line with no colon.
func headerField(text []byte) (name, value []byte, ok bool) {
	name, value, ok = bytes.Cut(text, []byte(":"))
	return bytes.TrimSpace(name), bytes.TrimSpace(value), ok
}

// cutShortError: the server closed the connection after the status line
// of its handshake answer had come (statusLine, the last one) and before
// the answer's blank line. It is ErrClosedBeforeHandshake for errors.Is
// (to the open wait, a server restarting as much as one that closes at
// once), but says that the server did answer: ErrClosedBeforeHandshake's
// own words ("before it answered"), and its hint that a TLS port drops a
// ws:// client so, are wrong once a status line has come.
type cutShortError struct {
	statusLine []byte
	err        error // io.EOF or io.ErrUnexpectedEOF
}

func (e *cutShortError) Error() string {
	return fmt.Sprintf("the server closed the connection in the middle of its WebSocket handshake answer, after the status line %q and before the answer's end (%v)", e.statusLine, e.err)
}
func (e *cutShortError) Is(target error) bool { return target == ErrClosedBeforeHandshake }
func (e *cutShortError) Unwrap() error        { return e.err }

// refusedError is a refused handshake response said in the library's
// words; it unwraps to gobwas/ws's error (errors.Is, errors.As).
type refusedError struct {
	msg string
	err error
	// The wait a Retry-After field asked for (a full or rate-limiting
	// server's 503 or 429; see RetryAfter).
	retryAfter    time.Duration
	hasRetryAfter bool
}

// RetryAfter is the wait before another attempt that the server asked for
// in the Retry-After field of its refusal of the handshake (RFC 9110
// 10.2.3: a 503 or 429 from a server or proxy that is restarting, full or
// limiting its rate), as the server said it: the caller bounds it. ok is
// false if err is no such refusal, or the server named no wait this
// client can read.
func RetryAfter(err error) (wait time.Duration, ok bool) {
	var r *refusedError
	if errors.As(err, &r) && r.hasRetryAfter {
		return r.retryAfter, true
	}
	return 0, false
}

// maxRetryAfter caps a Retry-After's wait, so that any number a server
// writes is a duration (callers bound it further).
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads a Retry-After field's value (RFC 9110 10.2.3):
// delay-seconds, or an HTTP-date (the IMF-fixdate, or the obsolete RFC
// 850 and asctime forms RFC 9110 5.6.7 has recipients accept), as a wait
// from now; a date in the past is no wait. Waits over maxRetryAfter are
// maxRetryAfter.
func parseRetryAfter(value []byte, now time.Time) (time.Duration, bool) {
	v := string(value)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(maxRetryAfter/time.Second) { // only overflow fails
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, ok := parseHTTPDate(v, now); ok {
		return min(max(t.Sub(now), 0), maxRetryAfter), true
	}
	return 0, false
}

// parseHTTPDate reads an HTTP-date (RFC 9110 5.6.7): the IMF-fixdate, or
// the obsolete RFC 850 and asctime forms, an RFC 850 year's century
// chosen as RFC 9110 says, against now.
func parseHTTPDate(v string, now time.Time) (time.Time, bool) {
	for _, layout := range []string{
		"Mon, 02 Jan 2006 15:04:05 GMT", // IMF-fixdate
		rfc850Layout,
		"Mon Jan _2 15:04:05 2006",
	} {
		if t, err := time.Parse(layout, v); err == nil {
			if layout == rfc850Layout {
				t = rfc850Year(t, now)
			}
			return t, true
		}
	}
	return time.Time{}, false
}

// serverNow is the time a Retry-After date is counted from: the
// response's own Date, where it has one that reads, so that the wait is
// the server's clock against the server's clock. A robot's computer
// without a battery-backed clock boots in 1970 (see ErrClockBehind), and
// against its clock any date a server gives would be decades away (the
// caller's bound would then cut it to max_backoff_ms); a server whose
// clock is off is no different. Else this machine's clock.
func (f *connectionFilter) serverNow() time.Time {
	now := time.Now()
	if date := f.fieldAhead("Date"); date != nil {
		if t, ok := parseHTTPDate(string(date), now); ok {
			return t
		}
	}
	return now
}

// rfc850Layout is RFC 9110's obsolete RFC 850 date, with a two-digit year.
const rfc850Layout = "Monday, 02-Jan-06 15:04:05 GMT"

// rfc850Year is t, parsed from an RFC 850 date, in the century RFC 9110
// 5.6.7 has a recipient choose: its two-digit year is the year ending so
// that is not more than 50 years after now (nor 50 or more before it).
// time.Parse puts 69-99 in the 1900s and 00-68 in the 2000s whatever the
// date: in 2026 it read "-70" as 1970, a date gone (no wait), where the
// RFC says 2070.
func rfc850Year(t, now time.Time) time.Time {
	y := now.Year() - now.Year()%100 + t.Year()%100
	switch {
	case y > now.Year()+50:
		y -= 100
	case y <= now.Year()-50:
		y += 100
	}
	return time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.err }

// lineText is line without its line ending, cut as gobwas/ws cuts it: the
// LF, and one CR before it. A CR more is the line's, as it is gobwas/ws's
// ("Connection: upgrade\r\r\n" is not the token "upgrade", nor "\r\r\n"
// a blank line).
func lineText(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}

// Rest returns the bytes read after the response's blank line and not
// handed on.
func (f *connectionFilter) Rest() []byte { return f.pending }

// hasToken reports whether the comma-separated list v holds token, in any
// case, with optional whitespace around it; no slice a token, as a field
// may hold many.
func hasToken(v []byte, token string) bool {
	for rest, more := v, true; more; {
		var t []byte
		t, rest, more = bytes.Cut(rest, []byte(","))
		if bytes.EqualFold(bytes.Trim(t, " \t"), []byte(token)) {
			return true
		}
	}
	return false
}

// connectionValue returns the value of line (with its line ending) if
// line is a Connection header field.
func connectionValue(line []byte) ([]byte, bool) {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok || !bytes.EqualFold(name, []byte("Connection")) {
		return nil, false
	}
	return value, true
}
