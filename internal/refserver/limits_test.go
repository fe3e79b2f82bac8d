package refserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestMaxConns: past MaxConns open connections, one more is refused in its
// handshake with HTTP 503 (so it never becomes a WebSocket connection, and
// gets no close before metadata), and a slot that frees up is served again.
func TestMaxConns(t *testing.T) {
	s, url := start(t, refserver.Config{MaxConns: 2})
	a := dial(t, url)
	dial(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, _, err := ws.Dial(ctx, url)
	var se ws.StatusError
	if !errors.As(err, &se) || int(se) != 503 {
		t.Fatalf("a third connection with MaxConns 2: %v, want HTTP 503", err)
	}
	// It asks the client to come back in a second, as libplugrl's
	// clients read it.
	if _, err := conn.Dial(ctx, conn.Options{URL: url}); err == nil {
		t.Fatal("a third connection with MaxConns 2 was taken")
	} else if wait, ok := conn.RetryAfter(err); !ok || wait != time.Second {
		t.Fatalf("a third connection with MaxConns 2: %v; want a Retry-After of 1 s, got %v, %v", err, wait, ok)
	}
	if st := s.Stats(); st.Refused != 2 || st.Open != 2 || st.Connections != 2 {
		t.Fatalf("stats %+v", st)
	}
	a.nc.Close()
	waitFor(t, s, "a slot to free up", func(st refserver.Stats) bool { return st.Open == 1 })
	dial(t, url).infer([]int64{0}, nil)
	if cfg := refserver.New(refserver.Config{}).Config(); cfg.MaxConns != refserver.DefaultMaxConns {
		t.Fatalf("the zero Config has MaxConns %d, want DefaultMaxConns", cfg.MaxConns)
	}
}

// TestRefusalsBounded: connections past MaxConns that never send their
// request each hold a refusal for up to closeGrace; past MaxRefusing such
// refusals, one more is closed at once, unanswered, instead of holding a
// goroutine and a socket too.
func TestRefusalsBounded(t *testing.T) {
	s, url := start(t, refserver.Config{MaxConns: 1, Logf: func(string, ...any) {}})
	dial(t, url)
	addr := strings.TrimPrefix(url, "ws://")
	for i := 0; i < refserver.MaxRefusing; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
	}
	waitFor(t, s, "the refusals", func(st refserver.Stats) bool { return st.Refused == refserver.MaxRefusing })
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(time.Second)) // a refusal would wait 2 s for the request
	if n, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a connection past %d refusals under way: read %d bytes, %v; want it closed at once (EOF)", refserver.MaxRefusing, n, err)
	}
	if st := s.Stats(); st.Cut != 1 || st.Refused != refserver.MaxRefusing {
		t.Fatalf("stats: Cut %d, Refused %d; want 1 and %d", st.Cut, st.Refused, refserver.MaxRefusing)
	}
}

// TestMaxMessage: a message larger than MaxMessage, in one frame or in
// fragments, is closed with 1009 from its frame header, before its bytes
// are read; one within it is served.
func TestMaxMessage(t *testing.T) {
	_, url := start(t, refserver.Config{MaxMessage: 4096, Logf: func(string, ...any) {}})
	dial(t, url).infer([]int64{0}, nil) // a small infer is served

	c := dial(t, url)
	hdr := ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Length: 1 << 40}
	if err := ws.WriteHeader(c.nc, hdr); err != nil { // claims a terabyte, sends nothing more
		t.Fatal(err)
	}
	expectTooBig(t, c)

	c = dial(t, url)
	part := make([]byte, 3000)
	for i, fin := range []bool{false, true} { // 6000 bytes in two fragments of 3000
		op := ws.OpBinary
		if i > 0 {
			op = ws.OpContinuation
		}
		f := ws.MaskFrame(ws.NewFrame(op, fin, part))
		if err := ws.WriteFrame(c.nc, f); err != nil {
			t.Fatal(err)
		}
	}
	expectTooBig(t, c)
	if cfg := refserver.New(refserver.Config{}).Config(); cfg.MaxMessage != refserver.DefaultMaxMessage {
		t.Fatalf("the zero Config has MaxMessage %d, want DefaultMaxMessage", cfg.MaxMessage)
	}
}

// expectTooBig reads frames up to the server's close frame, without
// answering it (the server closes with the rest of the message unread, and
// an answer can meet a reset connection), and wants it to be 1009.
func expectTooBig(t *testing.T, c *client) {
	t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := ws.ReadFrame(c.br)
		if err != nil {
			t.Fatalf("want a close frame with 1009, got %v", err)
		}
		if f.Header.OpCode == ws.OpClose {
			if code, reason := ws.ParseCloseFrameData(f.Payload); code != ws.StatusMessageTooBig || reason != "message too big" {
				t.Fatalf("closed with %d %q, want 1009 \"message too big\"", code, reason)
			}
			return
		}
	}
}

// TestMaxMessageSkipsThePayload: after closing with 1009 from a frame's
// header, the server passes over that frame's payload unread, as the
// client goes on sending it: a frame hidden in it is not read as one.
func TestMaxMessageSkipsThePayload(t *testing.T) {
	s, url := start(t, refserver.Config{MaxMessage: 4096, Logf: func(string, ...any) {}})
	c := dial(t, url)
	var hidden bytes.Buffer
	if err := ws.WriteFrame(&hidden, ws.MaskFrame(ws.NewBinaryFrame([]byte("0123456789")))); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 5000) // a zero mask: the hidden frame's bytes are on the wire as they are
	copy(payload, hidden.Bytes())
	if err := ws.WriteHeader(c.nc, ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Length: int64(len(payload))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nc.Write(payload); err != nil {
		t.Fatal(err)
	}
	expectTooBig(t, c)
	c.nc.Close()
	st := waitFor(t, s, "the connection to end", func(st refserver.Stats) bool { return st.Open == 0 })
	for _, r := range st.Received {
		t.Errorf("received %+v: a frame hidden in a refused frame's payload was read as one", r)
	}
}

// TestMaxMessagePayloadCut: a client that stops sending a refused frame's
// payload part of the way, and stays, or goes away, is not waited for past
// the close's grace: the connection ends, closed by the server with 1009.
func TestMaxMessagePayloadCut(t *testing.T) {
	for _, leaves := range []bool{false, true} {
		name := "stays"
		if leaves {
			name = "leaves"
		}
		t.Run(name, func(t *testing.T) {
			s, url := start(t, refserver.Config{MaxMessage: 4096, Logf: func(string, ...any) {}})
			c := dial(t, url)
			if err := ws.WriteHeader(c.nc, ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Length: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.nc.Write(make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
			expectTooBig(t, c)
			began := time.Now()
			if leaves {
				c.nc.Close()
			}
			st := waitFor(t, s, "the connection to end", func(st refserver.Stats) bool { return st.Open == 0 })
			if waited := time.Since(began); waited > 4*time.Second {
				t.Errorf("the connection ended %v after the close frame; the close's grace is 2 s", waited)
			}
			if len(st.Closes) != 1 || st.Closes[0].By != "server" || st.Closes[0].Code != 1009 {
				t.Errorf("closes %+v, want one, by the server with 1009", st.Closes)
			}
			if !leaves {
				_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.br.Read(make([]byte, 1)); err == nil {
					t.Error("the server wrote after its close frame")
				} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Error("the server left the TCP connection open")
				}
			}
		})
	}
}

// TestIdleConnectionMemory: an idle connection costs little server memory.
// Each used to hold two 64 KiB buffers from its first moment.
func TestIdleConnectionMemory(t *testing.T) {
	s, url := start(t, refserver.Config{Logf: func(string, ...any) {}})
	const n = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		dial(t, url) // both ends are in this process: the client's share counts too
	}
	waitFor(t, s, "the connections", func(st refserver.Stats) bool { return st.Open == n })
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapInuse) - int64(before.HeapInuse)) / n
	if per > 40<<10 {
		t.Fatalf("%d idle connections: %d KB of heap each", n, per>>10)
	}
	t.Logf("%d idle connections: %d KB of heap each, both ends", n, per>>10)
}

// TestMaxMessageBoundsTheAction: an infer within MaxMessage whose action
// would not be is closed with 1009 before the chunk is allocated. An infer
// of n envs and no observation costs the client 17 bytes an env, and its
// action [H, n, da] 224 of them at the defaults: a 5 MiB infer took 230 MiB
// of server memory, so one infer within the default 256 MiB limit could
// ask for 11 GiB and take the server down with every client on it. Here,
// with H = 64, a 1.1 MiB infer asked for 117 MiB.
func TestMaxMessageBoundsTheAction(t *testing.T) {
	const most = 2 << 20
	s, url := start(t, refserver.Config{MaxMessage: most, Horizon: 64, Logf: func(string, ...any) {}})
	c := dial(t, url)
	n := 1 << 16
	envs := make([]int64, n)
	for i := range envs {
		envs[i] = int64(i)
	}
	var m wire.Message
	if err := wire.EncodeInfer(&m, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, n), Obs: &wire.Observation{}}); err != nil {
		t.Fatal(err)
	}
	if m.Len() > most {
		t.Fatalf("the infer is %d bytes, over MaxMessage itself", m.Len())
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c.send(m.AppendTo(nil))
	op, b, err := c.recv()
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatalf("an infer whose action is %d bytes (MaxMessage %d) was answered: op %v, %d bytes", 64*n*7*4, most, op, len(b))
	}
	var ce wsutil.ClosedError
	if !errors.As(err, &ce) || ce.Code != ws.StatusMessageTooBig || ce.Reason != "message too big" {
		t.Fatalf("got %v, want a close with 1009 \"message too big\"", err)
	}
	// Both ends are in this process: the infer's copy, the server's read
	// and decode of it count too.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8*most {
		t.Errorf("the refused infer cost %d MiB of allocations, MaxMessage is %d MiB", grew>>20, most>>20)
	}
	if st := s.Stats(); st.Actions != 0 {
		t.Errorf("%d actions sent", st.Actions)
	}
	dial(t, url).infer([]int64{0}, nil) // the others are served
}
