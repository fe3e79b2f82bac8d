package conn

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gobwas/ws"
)

// recordTr is a scriptTr whose TryRead returns one record at a time, as a
// read of crypto/tls does.
type recordTr struct {
	scriptTr
	records [][]byte
	reads   int
}

func (r *recordTr) TryRead(p []byte) (int, error) {
	r.reads++
	if len(r.records) == 0 {
		return 0, nil
	}
	n := copy(p, r.records[0])
	if r.records[0] = r.records[0][n:]; len(r.records[0]) == 0 {
		r.records = r.records[1:]
	}
	return n, nil
}

// TestPollSeesControlFrameAcrossRecords: a server that writes a close
// frame's header and payload as two TLS records (gobwas/ws's WriteFrame
// on a tls.Conn does) is seen to close by one look, as by one over TCP:
// before, the look read the header's record alone and the close waited
// for the next look, so a feedback checked by that look went out to a
// server that had said stop.
func TestPollSeesControlFrameAcrossRecords(t *testing.T) {
	f := ws.MustCompileFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "plugrl-server-stop")))
	tr := &recordTr{records: [][]byte{f[:2], f[2:]}}
	c := newConn(tr, Options{})
	c.PollNow()
	var ce *CloseError
	if err := c.Err(); !errors.As(err, &ce) {
		t.Fatalf("after one look at a close frame in two records: %v, want the server's close", err)
	}
	// A data frame cut short is Receive's to read: no reads for it.
	tr = &recordTr{records: [][]byte{ws.MustCompileFrame(ws.NewBinaryFrame([]byte("action")))[:3], []byte("ion")}}
	c = newConn(tr, Options{})
	c.ExpectMessage()
	c.PollNow()
	if c.Err() != nil || tr.reads != 1 {
		t.Fatalf("a data frame cut short: %d reads, %v; want 1 read and no error", tr.reads, c.Err())
	}
}

// TestPollOverTLSReadsOnToTheClose pins drain's TLS case with records
// that each make a read of their own (the header and the payload of every
// frame apart, as gobwas/ws's WriteFrame on a tls.Conn writes them): a
// close behind two keepalive pings is seen by one look (six reads, which
// maxDrainReads must allow: the reason it went from 4 to 8), and a look
// reads no further than a data frame that is due, which is Receive's.
func TestPollOverTLSReadsOnToTheClose(t *testing.T) {
	split := func(f ws.Frame) [][]byte {
		b := ws.MustCompileFrame(f)
		return [][]byte{b[:2], b[2:]}
	}
	ping := split(ws.NewPingFrame([]byte("k")))
	stop := split(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "plugrl-server-stop")))

	tr := &recordTr{records: append(append(append([][]byte{}, ping...), ping...), stop...)}
	c := newConn(tr, Options{})
	c.tlsBuffers = true
	c.PollNow()
	var ce *CloseError
	if err := c.Err(); !errors.As(err, &ce) || tr.reads != 6 {
		t.Fatalf("one look at a close behind two pings, each frame two records: %d reads, %v; want 6 reads and the close", tr.reads, err)
	}

	action := ws.MustCompileFrame(ws.NewBinaryFrame([]byte("action")))
	tr = &recordTr{records: append(append(append([][]byte{}, ping...), action), stop...)}
	c = newConn(tr, Options{})
	c.tlsBuffers = true
	c.ExpectMessage()
	c.PollNow()
	if c.Err() != nil || tr.reads != 3 {
		t.Fatalf("a look at a ping, then the due action: %d reads, %v; want 3 (none past the action) and no error", tr.reads, c.Err())
	}
	c.Abort()
}

// FuzzPoll: looks between calls (Poll) at what a server sent, as records
// of any size, over TCP and over TLS (tlsBuffers: drain reads on past the
// control frames it handled), never panic, keep the read buffer's bounds,
// make at most maxDrainReads reads a look, and leave a data frame to
// Receive.
func FuzzPoll(f *testing.F) {
	closeFrame := ws.MustCompileFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "plugrl-server-stop")))
	f.Add(uint8(2), false, closeFrame)
	f.Add(uint8(1), true, append(frame(ws.OpPing, true, 3, []byte("abc")), frame(ws.OpBinary, true, 2, []byte("hi"))...))
	f.Add(uint8(7), false, frame(ws.OpPing, true, 125, bytes.Repeat([]byte{7}, 125)))
	f.Add(uint8(0), true, frame(ws.OpBinary, true, 1<<40, nil))
	f.Fuzz(func(t *testing.T, piece uint8, due bool, data []byte) {
		for _, overTLS := range []bool{false, true} {
			fuzzPollOnce(t, piece, due, data, overTLS)
		}
	})
}

func fuzzPollOnce(t *testing.T, piece uint8, due bool, data []byte, overTLS bool) {
	var records [][]byte
	for rest := bytes.Clone(data); len(rest) > 0; {
		n := min(len(rest), 1+int(piece))
		records = append(records, rest[:n])
		rest = rest[n:]
	}
	tr := &recordTr{records: records}
	c := newConn(tr, Options{MaxMessageSize: 1 << 20})
	c.tlsBuffers = overTLS
	if due {
		c.ExpectMessage()
	}
	for i := 0; i < 2*len(records)+2 && c.Err() == nil; i++ {
		before := tr.reads
		c.PollNow()
		if got := tr.reads - before; got > maxDrainReads {
			t.Fatalf("one look made %d reads, at most %d", got, maxDrainReads)
		}
		if c.rr < 0 || c.rr > c.rw || c.rw > len(c.rb) {
			t.Fatalf("read buffer out of bounds: rr %d rw %d len %d", c.rr, c.rw, len(c.rb))
		}
	}
	c.Abort()
}
