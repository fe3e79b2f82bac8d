package frames

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestReadPayloadClaimedLength: a frame that claims a terabyte and sends
// one byte must not make the reader reserve memory for the claim.
func TestReadPayloadClaimedLength(t *testing.T) {
	buf, err := ReadPayload(bytes.NewReader([]byte{0x80}), nil, 1<<40)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want io.ErrUnexpectedEOF", err)
	}
	if len(buf) != 1 || cap(buf) > 2*minGrow {
		t.Fatalf("one byte received into a buffer of len %d, cap %d: grown by the claim, not by what arrived", len(buf), cap(buf))
	}
}

// TestReadPayloadGrowsWithData: memory follows the bytes received, within a
// factor of two, as a large frame arrives.
func TestReadPayloadGrowsWithData(t *testing.T) {
	const sent = 3<<20 + 17
	data := make([]byte, sent)
	for i := range data {
		data[i] = byte(i * 7)
	}
	buf, err := ReadPayload(bytes.NewReader(data), nil, 1<<40)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v", err)
	}
	if !bytes.Equal(buf, data) {
		t.Fatalf("read %d bytes, not the %d sent", len(buf), sent)
	}
	if cap(buf) > 2*sent+minGrow {
		t.Fatalf("cap %d for %d bytes received", cap(buf), sent)
	}
}

// TestReadPayloadAppends: a continuation frame's payload is appended to the
// fragments before it, exactly n bytes, leaving the rest of r unread.
func TestReadPayloadAppends(t *testing.T) {
	r := bytes.NewReader([]byte("worldXYZ"))
	buf, err := ReadPayload(r, []byte("hello "), 5)
	if err != nil || string(buf) != "hello world" {
		t.Fatalf("%q, %v", buf, err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "XYZ" {
		t.Fatalf("left %q unread, want XYZ", rest)
	}
	if buf, err = ReadPayload(r, buf, 0); err != nil || string(buf) != "hello world" {
		t.Fatalf("n = 0: %q, %v", buf, err)
	}
}
