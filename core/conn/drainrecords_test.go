package conn

import (
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
