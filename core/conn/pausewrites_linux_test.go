//go:build linux

package conn

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/wire"
)

// pauseOnce is a CopyObserver that pauses once, after more than after
// bytes were copied: the process stopped, or starved, between two of a
// message's writes.
type pauseOnce struct {
	after, copied int
	pause         time.Duration
	done          bool
}

func (p *pauseOnce) Copied(_ int, b []byte) {
	p.copied += len(b)
	if !p.done && p.copied > p.after {
		p.done = true
		time.Sleep(p.pause)
	}
}

// TestPauseBetweenWritesOfAMessage: a message larger than the write buffer
// goes in several writes; the send timeout counts from when the server
// stops taking bytes, so a pause between two of them (the next buffer's
// copy, a stopped or starved process) while the server reads everything
// does not count. A write over dontWaitMax that more of the message
// followed went straight to the blocking send and fixed the deadline as it
// began: the pause then ran it out, and the message failed as "the server
// is not reading".
func TestPauseBetweenWritesOfAMessage(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) { _, _ = io.Copy(io.Discard, c) })
	c := dialT(t, Options{URL: url, SendTimeout: time.Second, WriteBufferSize: 1 << 20})
	var m wire.Message
	obs := &wire.Observation{States: []wire.NamedArray{{Name: "s", Array: wire.Array{DType: wire.Uint8, Shape: []int{1, 64 << 20}, Data: make([]byte, 64<<20)}}}}
	if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: []int64{0}, StepIDs: []int64{0}, Obs: obs}); err != nil {
		t.Fatal(err)
	}
	// The pause comes in the second buffer's copy, after the first 1 MiB
	// went out.
	if err := c.WriteMessageObserved(&m, &pauseOnce{after: 1<<20 + 100<<10, pause: 1200 * time.Millisecond}); err != nil {
		t.Fatalf("a message to a server that reads everything, paused once between its writes: %v", err)
	}
}

// TestWriteMoreKeepsTheClockLazy: the same on the descriptor: a write of
// over dontWaitMax that more of the message follows, taken whole at once,
// leaves the deadline unfixed, and the next write, after a pause longer
// than the timeout, gets the whole timeout.
func TestWriteMoreKeepsTheClockLazy(t *testing.T) {
	f, got := fdPairDrained(t)
	f.beginWrite(100 * time.Millisecond)
	if n, err := f.writeMore(make([]byte, 1<<20)); n != 1<<20 || err != nil {
		t.Fatalf("the first write: %d, %v", n, err)
	}
	time.Sleep(150 * time.Millisecond)
	n, err := f.Write(make([]byte, 8<<20))
	f.shutdown()
	if r := <-got; err != nil || r != 9<<20 {
		t.Fatalf("the last write, after a pause: %d, %v; the peer read %d of %d", n, err, r, 9<<20)
	}
}
