package hostile

// The WebSocket handshake as the hostile server does it: reading the
// upgrade request, answering it, or a fault in its place (a header that never
// ends, a response trickled byte by byte).

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"strings"
)

// readRequest reads the client's upgrade request up to its blank line and
// returns its Sec-WebSocket-Key ("" if it has none). Bytes the client sends
// after the request stay in c.br for the frame reader.
func (c *conn) readRequest() (string, error) {
	_ = c.nc.SetReadDeadline(c.handshake)
	defer func() { _ = c.nc.SetReadDeadline(c.deadline) }()
	var line []byte
	key := ""
	total := 0
	first := true
	for {
		part, err := c.br.ReadSlice('\n')
		total += len(part)
		if total > maxRequest {
			return "", fmt.Errorf("request longer than %d bytes", maxRequest)
		}
		line = append(line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", err
		}
		text := strings.TrimRight(string(line), "\r\n")
		line = line[:0]
		if first {
			if !strings.HasPrefix(text, "GET ") {
				return "", fmt.Errorf("request line %q is not a GET", text)
			}
			first = false
			continue
		}
		if text == "" {
			return key, nil
		}
		name, value, ok := strings.Cut(text, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "Sec-WebSocket-Key") {
			key = strings.TrimSpace(value)
		}
	}
}

// acceptKey is RFC 6455's Sec-WebSocket-Accept for key.
func acceptKey(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// upgradeResponse is a complete, valid 101 response. It offers no
// extension, so no compression (SPEC 1.1), and no subprotocol.
func upgradeResponse(key string) []byte {
	return []byte("HTTP/1.1 101 Switching Protocols\r\n" +
		"Upgrade: websocket\r\n" +
		"Connection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + acceptKey(key) + "\r\n\r\n")
}

// endlessHeader is EndlessHeader after the request.
func (c *conn) endlessHeader() error {
	if err := c.writeRaw([]byte("HTTP/1.1 101 Switching Protocols\r\nX-Junk: ")); err != nil {
		return err
	}
	junk := bytes.Repeat([]byte{'a'}, 64<<10)
	// Unbuffered writes: TCP's flow control paces them to the client's reads.
	for sent := int64(0); sent < c.s.cfg.HeaderBound; {
		if err := c.alive(); err != nil {
			return err
		}
		n := int(min(int64(len(junk)), c.s.cfg.HeaderBound-sent))
		if _, err := c.nc.Write(junk[:n]); err != nil {
			return err
		}
		sent += int64(n)
	}
	return fmt.Errorf("sent the header bound of %d bytes", c.s.cfg.HeaderBound)
}

// slowHandshake sends the 101 response a byte at a time.
func (c *conn) slowHandshake(key string) error {
	resp := upgradeResponse(key)
	for i := range resp {
		if i > 0 {
			if err := c.sleep(c.s.cfg.ByteEvery, nil); err != nil {
				return err
			}
		}
		if _, err := c.nc.Write(resp[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}
