// Package frames holds what the test servers of internal/ (refserver,
// hostile) share for reading a client's WebSocket frames.
package frames

import (
	"io"
	"slices"
)

// minGrow is the least ReadPayload grows a buffer by: small frames take one
// allocation, and a claimed length reserves no more than this up front.
const minGrow = 4 << 10

// ReadPayload appends n bytes from r to buf. A frame header's length is only
// a claim: the buffer grows as bytes arrive, each time by at most what it
// already holds (at least minGrow), so memory stays within about twice what
// the peer has actually sent however large a length it declared. On error
// buf holds what arrived.
func ReadPayload(r io.Reader, buf []byte, n int64) ([]byte, error) {
	for n > 0 {
		if len(buf) == cap(buf) {
			grow := min(n, int64(max(len(buf), minGrow)))
			buf = slices.Grow(buf, int(grow))
		}
		l := len(buf)
		room := min(n, int64(cap(buf)-l))
		k, err := io.ReadFull(r, buf[l:l+int(room)])
		buf = buf[:l+k]
		n -= int64(k)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}
