package conn

import (
	"bytes"
	"net"
	"slices"
)

// connectionFilter sits between gobwas/ws and the connection (above TLS)
// while gobwas/ws reads the handshake response, and hands the response on
// line by line, a Connection header that lists the token "upgrade" among
// others rewritten to "Connection: Upgrade".
//
// RFC 6455 4.1 has a client fail the connection only if the response's
// Connection header does not contain the token "Upgrade", compared
// case-insensitively: "keep-alive, Upgrade", which a proxy may send, is a
// valid answer. gobwas/ws (v1.5.0, dialer.go) takes only a header that is
// exactly "Upgrade", saying that a server's must be; the server's is, but
// a client must not be stricter than 4.1. Every other check of the
// response stays gobwas/ws's.
//
// The response's bytes after its blank line (a server may send its first
// frame in the same packet) stay here, in Rest, for the connection to read
// first: gobwas/ws reads no further than the blank line, as each Read
// hands on at most one line. Each line is copied once more than it was:
// a handshake's few hundred bytes, once per connection.
type connectionFilter struct {
	net.Conn
	pending []byte // read from Conn, not yet handed on
	scanned int    // pending[:scanned] holds no '\n': each byte looked at once
	out     []byte // the part of a line being handed on
	done    bool   // the blank line has been handed on
	err     error  // Conn's read error, returned once pending is handed on
}

// Read hands on the rest of the current line, or the next whole line (a
// partial one only when Conn's read failed), until the blank line; after
// it, what is pending, then Conn's bytes as they come (gobwas/ws reads no
// further than the blank line, so this is a guard).
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
			i += f.scanned
			f.scanned = 0
			line := f.pending[:i+1]
			f.pending = f.pending[i+1:]
			f.done = len(bytes.TrimRight(line, "\r\n")) == 0
			f.out = connectionUpgrade(line)
			break
		}
		if f.err != nil {
			if len(f.pending) == 0 {
				return 0, f.err
			}
			f.out, f.pending, f.scanned = f.pending, nil, 0
			break
		}
		// At most 4 KiB a read, into pending itself (a buffer of the
		// read's own escaped to the heap: 4 KiB a read of one byte).
		f.scanned = len(f.pending)
		f.pending = slices.Grow(f.pending, 4096)
		n, err := f.Conn.Read(f.pending[f.scanned : f.scanned+4096])
		f.pending = f.pending[:f.scanned+n]
		f.err = err
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// Rest returns the bytes read after the response's blank line and not
// handed on.
func (f *connectionFilter) Rest() []byte { return f.pending }

// connectionUpgrade returns line, or "Connection: Upgrade" with line's
// ending if line is a Connection header whose comma-separated tokens
// include "upgrade" in any case (RFC 7230 3.2: the name is
// case-insensitive, optional whitespace around the value and the tokens).
func connectionUpgrade(line []byte) []byte {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok || !bytes.EqualFold(name, []byte("Connection")) {
		return line
	}
	body := bytes.TrimRight(value, "\r\n")
	ending := value[len(body):]
	upgrade := false
	for rest, more := body, true; more && !upgrade; { // no slice a token: a header may hold many
		var token []byte
		token, rest, more = bytes.Cut(rest, []byte(","))
		upgrade = bytes.EqualFold(bytes.Trim(token, " \t"), []byte("upgrade"))
	}
	if !upgrade || bytes.EqualFold(bytes.Trim(body, " \t"), []byte("upgrade")) {
		return line
	}
	return append([]byte("Connection: Upgrade"), ending...)
}
