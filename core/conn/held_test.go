package conn

import (
	"net"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
)

// frameSeen is one frame a test server read: its opcode, payload length and
// when it was read.
type frameSeen struct {
	op  ws.OpCode
	n   int
	at  time.Time
	err error
}

// frameServer reads the client's frames and reports each on the channel
// until the connection ends; first, if ping, it sends a ping.
func frameServer(t *testing.T, ping bool) (string, <-chan frameSeen) {
	seen := make(chan frameSeen, 16)
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		defer close(seen)
		if ping {
			if err := ws.WriteFrame(c, ws.NewPingFrame([]byte("p"))); err != nil {
				seen <- frameSeen{err: err}
				return
			}
		}
		for {
			f, err := ws.ReadFrame(c)
			if err != nil {
				return
			}
			seen <- frameSeen{op: f.Header.OpCode, n: len(f.Payload), at: time.Now()}
			if f.Header.OpCode == ws.OpClose {
				return
			}
		}
	})
	return url, seen
}

// heldTestMessage is a binary message of about size bytes.
func heldTestMessage(t *testing.T, size int) *wire.Message {
	m := new(wire.Message)
	m.Map(1)
	m.Str("x")
	if err := m.Array(&wire.Array{DType: wire.Uint8, Shape: []int{size}, Data: make([]byte, size)}); err != nil {
		t.Fatal(err)
	}
	m.Finish()
	return m
}

// heldThenNext holds held, runs meanwhile (if not nil), writes next, and
// checks that the server read both, whole, in that order.
func heldThenNext(t *testing.T, c *Conn, seen <-chan frameSeen, held, next *wire.Message, meanwhile func()) {
	t.Helper()
	if err := c.WriteHeldMessage(held, nil); err != nil {
		t.Fatal(err)
	}
	if meanwhile != nil {
		meanwhile()
	}
	if err := c.WriteMessage(next); err != nil {
		t.Fatal(err)
	}
	if a, b := nextFrame(t, seen, "the held message"), nextFrame(t, seen, "the next one"); a.n != held.Len() || b.n != next.Len() {
		t.Fatalf("frames of %d and %d bytes; want the held %d, then %d", a.n, b.n, held.Len(), next.Len())
	}
}

func nextFrame(t *testing.T, seen <-chan frameSeen, what string) frameSeen {
	t.Helper()
	select {
	case f, ok := <-seen:
		if !ok {
			t.Fatalf("%s: the connection ended first", what)
		}
		if f.err != nil {
			t.Fatalf("%s: %v", what, f.err)
		}
		return f
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: nothing arrived", what)
	}
	return frameSeen{}
}

// TestHeldMessage: a held message stays in the write buffer (nothing is
// sent) until the next message, which takes it along in the same write;
// without one, the timer sends it after one to two ticks (heldDelay), and
// Close and Interrupt send it first. One over heldMax is sent at once.
func TestHeldMessage(t *testing.T) {
	t.Run("then a message", func(t *testing.T) {
		url, seen := frameServer(t, false)
		var cnt Counters
		c := dialT(t, Options{URL: url, Counters: &cnt})
		heldThenNext(t, c, seen, heldTestMessage(t, 100), heldTestMessage(t, 200), func() {
			if n := cnt.Sent.Load(); n != 0 {
				t.Fatalf("%d bytes sent for a held message; want none until the next write", n)
			}
		})
	})
	t.Run("nothing after", func(t *testing.T) {
		url, seen := frameServer(t, false)
		c := dialT(t, Options{URL: url})
		t0 := time.Now()
		if err := c.WriteHeldMessage(heldTestMessage(t, 100), nil); err != nil {
			t.Fatal(err)
		}
		if d := nextFrame(t, seen, "the held message").at.Sub(t0); d < heldDelay {
			t.Fatalf("the held message arrived after %v; want heldDelay (%v) or more", d, heldDelay)
		}
	})
	for _, end := range []string{"close", "interrupt"} {
		t.Run("then "+end, func(t *testing.T) {
			url, seen := frameServer(t, false)
			c := dialT(t, Options{URL: url})
			// The sweeper sends nothing meanwhile: only the close or
			// interrupt can send the held message (timing it, "before
			// heldDelay", failed on a loaded machine).
			sweeperPaused.Store(true)
			defer sweeperPaused.Store(false)
			if err := c.WriteHeldMessage(heldTestMessage(t, 100), nil); err != nil {
				t.Fatal(err)
			}
			if end == "close" {
				c.Close(time.Second)
			} else {
				c.Interrupt()
			}
			if f := nextFrame(t, seen, "the held message"); f.op != ws.OpBinary {
				t.Fatalf("first frame: opcode %v; want the held message", f.op)
			}
			if f := nextFrame(t, seen, "the close frame"); f.op != ws.OpClose {
				t.Fatalf("then opcode %v; want a close frame", f.op)
			}
		})
	}
	t.Run("then SendHeld", func(t *testing.T) {
		url, seen := frameServer(t, false)
		var cnt Counters
		c := dialT(t, Options{URL: url, Counters: &cnt})
		sweeperPaused.Store(true) // only SendHeld can send it
		defer sweeperPaused.Store(false)
		if err := c.WriteHeldMessage(heldTestMessage(t, 100), nil); err != nil {
			t.Fatal(err)
		}
		if n := cnt.HeldPathSent.Load(); n != 0 {
			t.Fatalf("HeldPathSent = %d while the message is held; want 0", n)
		}
		if done, _ := c.SendHeld(); !done {
			t.Fatal("SendHeld: the socket did not take 120 bytes")
		}
		if f := nextFrame(t, seen, "the held message"); f.op != ws.OpBinary {
			t.Fatalf("first frame: opcode %v; want the held message", f.op)
		}
		if n := cnt.HeldPathSent.Load(); n != 1 {
			t.Fatalf("HeldPathSent = %d after it left; want 1", n)
		}
		if done, busy := c.SendHeld(); !done || busy || cnt.HeldPathSent.Load() != 1 {
			t.Fatal("SendHeld with nothing held sent or counted something")
		}
	})
	t.Run("a pong waits for it", func(t *testing.T) {
		url, seen := frameServer(t, true)
		c := dialT(t, Options{URL: url})
		if err := c.WriteHeldMessage(heldTestMessage(t, 100), nil); err != nil {
			t.Fatal(err)
		}
		// Reading the ping owes a pong, which must not cut in before
		// (or into) the held message.
		if _, err := c.Receive(50 * time.Millisecond); err == nil {
			t.Fatal("a message arrived; want none")
		}
		if f := nextFrame(t, seen, "the held message"); f.op != ws.OpBinary {
			t.Fatalf("first frame: opcode %v; want the held message", f.op)
		}
		if f := nextFrame(t, seen, "the pong"); f.op != ws.OpPong {
			t.Fatalf("then opcode %v; want the pong", f.op)
		}
	})
	t.Run("a small write buffer, nearly full", func(t *testing.T) {
		// What is held leaves too little room for the next header: it
		// must go first, and both frames arrive whole.
		url, seen := frameServer(t, false)
		c := dialT(t, Options{URL: url, WriteBufferSize: minWBuf})
		probe := heldTestMessage(t, 0)
		held := heldTestMessage(t, minWBuf-2-probe.Len()-4-3) // header 2 + mask 4: 3 bytes to spare
		heldThenNext(t, c, seen, held, heldTestMessage(t, 10), nil)
	})
	t.Run("over heldMax", func(t *testing.T) {
		url, seen := frameServer(t, false)
		var cnt Counters
		c := dialT(t, Options{URL: url, Counters: &cnt})
		m := heldTestMessage(t, heldMax+1)
		if err := c.WriteHeldMessage(m, nil); err != nil {
			t.Fatal(err)
		}
		if n := cnt.Sent.Load(); n < uint64(m.Len()) {
			t.Fatalf("%d bytes sent for a message over heldMax; want all %d at once", n, m.Len())
		}
		nextFrame(t, seen, "the message")
	})
}

// partialTransport is a transport whose TryWrite takes at most max bytes
// at a time, as a socket whose buffer is nearly full does.
type partialTransport struct {
	transport
	max int
}

func (p *partialTransport) TryWrite(b []byte) (int, error) {
	return p.transport.TryWrite(b[:min(len(b), p.max)])
}

// TestHeldMessageTimerPaths: the timer's tick that finds the write lock
// taken looks again a tick later, and one whose write the socket takes
// only part of sends the rest at the next ticks; either way the held
// message arrives whole, without another write to take it along.
func TestHeldMessageTimerPaths(t *testing.T) {
	t.Run("write lock taken at the ticks", func(t *testing.T) {
		url, seen := frameServer(t, false)
		var cnt Counters
		c := dialT(t, Options{URL: url, Counters: &cnt})
		m := heldTestMessage(t, 100)
		if err := c.WriteHeldMessage(m, nil); err != nil {
			t.Fatal(err)
		}
		c.wmu.Lock() // a writer in the middle of something, for a few ticks
		time.Sleep(5 * heldDelay)
		if n := cnt.Sent.Load(); n != 0 {
			t.Fatalf("%d bytes sent while the write lock was taken", n)
		}
		c.wmu.Unlock()
		if f := nextFrame(t, seen, "the held message"); f.n != m.Len() {
			t.Fatalf("a frame of %d bytes; want the held %d", f.n, m.Len())
		}
	})
	t.Run("the socket takes part of it", func(t *testing.T) {
		url, seen := frameServer(t, false)
		c := dialT(t, Options{URL: url})
		swapTransport(c, func(tr transport) transport { return &partialTransport{transport: tr, max: 16} })
		m := heldTestMessage(t, 100)
		if err := c.WriteHeldMessage(m, nil); err != nil {
			t.Fatal(err)
		}
		if f := nextFrame(t, seen, "the held message"); f.n != m.Len() {
			t.Fatalf("a frame of %d bytes; want the held %d", f.n, m.Len())
		}
	})
}

// TestHeldSweeper: the connections holding at once share one timer. Each
// one's held messages arrive no sooner than a tick after its holds, a
// connection held again and again is looked at (and listed) once, and
// once every held message has left or its connection has closed, the
// sweeper lets go of them all and stops ticking.
func TestHeldSweeper(t *testing.T) {
	const n = 24
	conns := make([]*Conn, n)
	seens := make([]<-chan frameSeen, n)
	for i := range conns {
		url, seen := frameServer(t, false)
		conns[i], seens[i] = dialT(t, Options{URL: url}), seen
	}
	m := heldTestMessage(t, 100)
	t0 := time.Now()
	for _, c := range conns {
		for range 3 { // held one after another: all three stay, and leave together
			if err := c.WriteHeldMessage(m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// With every write lock taken, the sweeper's looks keep each
	// connection listed and send nothing; its list is whole between sweeps.
	for _, c := range conns {
		c.wmu.Lock()
	}
	// Before a tick has passed since the first hold, none has left (and a
	// connection whose messages have left is no longer listed).
	early := time.Since(t0) < heldDelay
	var listed map[*Conn]int
	for listed == nil {
		sweeper.mu.Lock()
		if !sweeper.running {
			listed = map[*Conn]int{}
			for _, l := range sweeper.conns {
				listed[l]++
			}
		}
		sweeper.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	for _, c := range conns {
		c.wmu.Unlock()
	}
	for i, c := range conns {
		if k := listed[c]; k > 1 || k == 0 && early {
			t.Fatalf("connection %d listed %d times by the sweeper; want once", i, k)
		}
	}
	for i, seen := range seens {
		for j := range 3 {
			f := nextFrame(t, seen, "a held message")
			if f.n != m.Len() {
				t.Fatalf("connection %d, message %d: a frame of %d bytes; want %d", i, j, f.n, m.Len())
			}
			if j == 2 && f.at.Sub(t0) < heldDelay {
				t.Fatalf("connection %d: the last held message arrived after %v; want heldDelay (%v) or more", i, f.at.Sub(t0), heldDelay)
			}
		}
	}
	// Half hold once more, and close with it held (Close sends it).
	for _, c := range conns[:n/2] {
		if err := c.WriteHeldMessage(m, nil); err != nil {
			t.Fatal(err)
		}
		c.Close(time.Second)
	}
	waitTickerEmpty(t, &sweeper, 5*time.Second, "the sweeper, after every held message left")
	for i, seen := range seens[:n/2] {
		if f := nextFrame(t, seen, "the message held at close"); f.op != ws.OpBinary || f.n != m.Len() {
			t.Fatalf("connection %d: opcode %v, %d bytes; want the held message", i, f.op, f.n)
		}
	}
}

// brokenTransport is a transport whose writes take at most left more
// bytes, then fail, as a socket the peer has reset does.
type brokenTransport struct {
	transport
	left int
}

func (b *brokenTransport) write(p []byte) (int, error) {
	n := min(len(p), b.left)
	b.left -= n
	if n < len(p) {
		return n, syscall.ECONNRESET
	}
	return n, nil
}

func (b *brokenTransport) Write(p []byte) (int, error)    { return b.write(p) }
func (b *brokenTransport) TryWrite(p []byte) (int, error) { return b.write(p) }

// TestHeldLost: HeldLost says whether the held message left whole: not
// when the next write took it along, or failed only past its last byte;
// yes when that write failed before its last byte, or the connection
// ended while it was held. (A client's ledger and stats count its envs as
// dropped by it.)
func TestHeldLost(t *testing.T) {
	held := heldTestMessage(t, 100)
	for _, tc := range []struct {
		name string
		left int // bytes the socket takes after the hold; -1: all
		fail bool
		want bool
	}{
		{"the next write takes it", -1, false, false},
		{"the next write fails at once", 0, false, true},
		{"the next write fails inside it", 50, false, true},
		{"the next write fails past it", 0, false, false}, // left set to the held frame's size below
		{"the connection ends with it held", -1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := frameServer(t, false)
			c := dialT(t, Options{URL: url})
			if err := c.WriteHeldMessage(held, nil); err != nil {
				t.Fatal(err)
			}
			c.wmu.Lock()
			frame := c.held
			c.wmu.Unlock()
			switch {
			case tc.name == "the next write fails past it":
				swapTransport(c, func(tr transport) transport { return &brokenTransport{transport: tr, left: frame} })
			case tc.left >= 0:
				swapTransport(c, func(tr transport) transport { return &brokenTransport{transport: tr, left: tc.left} })
			}
			if tc.fail {
				c.fail(ErrLost) // a close read meanwhile, say: nothing writes after
				c.Abort()
			} else {
				err := c.WriteMessage(heldTestMessage(t, 10))
				if tc.left >= 0 && err == nil {
					t.Fatal("the write over a broken socket succeeded")
				}
				c.Close(0)
			}
			if got := c.HeldLost(); got != tc.want {
				t.Fatalf("HeldLost() = %v, want %v (held frame %d bytes)", got, tc.want, frame)
			}
		})
	}
}

// TestHeldPathSentCounts: Counters.HeldPathSent counts a held message when
// it leaves with the next write, one WriteHeldMessage sent at once (over
// heldMax) when it goes, and never one lost with its connection.
func TestHeldPathSentCounts(t *testing.T) {
	url, seen := frameServer(t, false)
	var cnt Counters
	c := dialT(t, Options{URL: url, Counters: &cnt})
	sweeperPaused.Store(true)
	defer sweeperPaused.Store(false)
	if err := c.WriteHeldMessage(heldTestMessage(t, 100), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(heldTestMessage(t, 10)); err != nil {
		t.Fatal(err)
	}
	nextFrame(t, seen, "the held message")
	nextFrame(t, seen, "the next")
	if n := cnt.HeldPathSent.Load(); n != 1 {
		t.Fatalf("after the next write: HeldPathSent = %d, want 1", n)
	}
	if err := c.WriteHeldMessage(heldTestMessage(t, heldMax+1), nil); err != nil {
		t.Fatal(err)
	}
	nextFrame(t, seen, "the message over heldMax")
	if n := cnt.HeldPathSent.Load(); n != 2 {
		t.Fatalf("after one over heldMax: HeldPathSent = %d, want 2", n)
	}

	// One whose socket takes no more bytes (shut down under it): Abort
	// cannot send it, and it is not counted.
	var lost Counters
	url, _ = frameServer(t, false)
	c = dialT(t, Options{URL: url, Counters: &lost})
	if err := c.WriteHeldMessage(heldTestMessage(t, 100), nil); err != nil {
		t.Fatal(err)
	}
	c.shutdown()
	c.Abort()
	if n := lost.HeldPathSent.Load(); n != 0 || !c.HeldLost() {
		t.Fatalf("after a held message was lost: HeldPathSent = %d (want 0), HeldLost %v", n, c.HeldLost())
	}
}

// TestHeldPathSentTwoHeld: two messages held together, of which the next
// write's failed send took the first whole and the second in part: the
// first is counted, the second is not (it was counted all or nothing).
func TestHeldPathSentTwoHeld(t *testing.T) {
	url, _ := frameServer(t, false)
	var cnt Counters
	c := dialT(t, Options{URL: url, Counters: &cnt})
	sweeperPaused.Store(true)
	defer sweeperPaused.Store(false)
	first, second := heldTestMessage(t, 100), heldTestMessage(t, 100)
	for _, m := range []*wire.Message{first, second} {
		if err := c.WriteHeldMessage(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.wmu.Lock()
	firstEnd := c.heldEnds[0]
	c.wmu.Unlock()
	swapTransport(c, func(tr transport) transport { return &brokenTransport{transport: tr, left: firstEnd + 10} })
	if err := c.WriteMessage(heldTestMessage(t, 10)); err == nil {
		t.Fatal("the write through a broken socket succeeded")
	}
	if n := cnt.HeldPathSent.Load(); n != 1 || !c.HeldLost() {
		t.Fatalf("HeldPathSent = %d, HeldLost %v; want 1 (the first left whole) and the second lost", n, c.HeldLost())
	}
}

// swapTransport wraps c's transport for a test's fault, with the idle
// poller kept off c while it does: the poller's look reads c.tr without a
// lock (in use it never changes), and a look at the moment of a swap made
// under wmu alone was a data race (CI's -race run caught one). It waits
// for a tick in progress to end, takes c from the poller's set, swaps, and
// puts c back.
func swapTransport(c *Conn, wrap func(transport) transport) {
	p := c.poller
	for {
		p.mu.Lock()
		if !p.running {
			if i := slices.Index(p.conns, c); i >= 0 {
				p.conns = slices.Delete(p.conns, i, i+1)
			}
			p.mu.Unlock()
			break
		}
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	c.wmu.Lock()
	c.tr = wrap(c.tr)
	c.wmu.Unlock()
	p.add(c)
}
