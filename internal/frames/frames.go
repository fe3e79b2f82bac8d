// Package frames holds what the test servers of internal/ (refserver,
// hostile) share for reading a client's WebSocket frames.
package frames

import (
	"io"
	"slices"
)

// ReadPayload appends n bytes from r to buf, growing buf as bytes arrive
// (a megabyte at a time) rather than trusting the declared length.
func ReadPayload(r io.Reader, buf []byte, n int64) ([]byte, error) {
	for n > 0 {
		chunk := min(n, 1<<20)
		l := len(buf)
		buf = slices.Grow(buf, int(chunk))[:l+int(chunk)]
		if _, err := io.ReadFull(r, buf[l:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf[:l], err
		}
		n -= chunk
	}
	return buf, nil
}
