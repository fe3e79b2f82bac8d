package conn

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// scriptTr is a transport that reads a fixed byte string in pieces and
// accepts every write.
type scriptTr struct {
	data  []byte
	piece int
}

func (s *scriptTr) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.piece)], s.data)
	s.data = s.data[n:]
	return n, nil
}
func (s *scriptTr) TryRead(p []byte) (int, error)     { return 0, nil }
func (s *scriptTr) Write(p []byte) (int, error)       { return len(p), nil }
func (s *scriptTr) TryWrite(p []byte) (int, error)    { return len(p), nil }
func (s *scriptTr) BeginWrite(time.Duration)          {}
func (s *scriptTr) Holds() bool                       { return false }
func (s *scriptTr) NeverWaits() bool                  { return true }
func (s *scriptTr) SetReadDeadline(t time.Time) error { return nil }
func (s *scriptTr) Shutdown()                         {}
func (s *scriptTr) Close() error                      { return nil }

// liveAlloc is a heap Allocator that tracks the bytes it has out.
type liveAlloc struct{ live, peak int64 }

func (a *liveAlloc) Grow(buf []byte, keep, size int) []byte {
	nb := make([]byte, size)
	copy(nb, buf[:keep])
	a.live += int64(size - cap(buf))
	a.peak = max(a.peak, a.live)
	return nb
}
func (a *liveAlloc) Free(buf []byte) { a.live -= int64(cap(buf)) }

// frame builds one server frame for the seed corpus.
func frame(op ws.OpCode, fin bool, length int64, payload []byte) []byte {
	var b bytes.Buffer
	_ = ws.WriteHeader(&b, ws.Header{Fin: fin, OpCode: op, Length: length})
	b.Write(payload)
	return b.Bytes()
}

// FuzzFrameReader feeds arbitrary server bytes to Receive. Whatever they
// say, the reader must not panic, and the receive memory must follow the
// bytes that arrived (a header's claimed length allocates nothing).
func FuzzFrameReader(f *testing.F) {
	f.Add(uint8(7), frame(ws.OpBinary, true, 5, []byte("hello")))
	f.Add(uint8(1), append(frame(ws.OpBinary, false, 3, []byte("hel")), append(frame(ws.OpPing, true, 1, []byte{1}), frame(ws.OpContinuation, true, 2, []byte("lo"))...)...))
	f.Add(uint8(64), frame(ws.OpBinary, true, 1<<62, []byte("trickle")))
	f.Add(uint8(3), frame(ws.OpClose, true, 4, []byte{0x03, 0xe9, 'o', 'k'}))
	f.Add(uint8(9), frame(ws.OpText, true, 2, []byte("hi")))
	f.Add(uint8(2), frame(ws.OpPing, true, 200, bytes.Repeat([]byte{1}, 200)))
	f.Fuzz(func(t *testing.T, piece uint8, data []byte) {
		var alloc liveAlloc
		c := newConn(&scriptTr{data: bytes.Clone(data), piece: 1 + int(piece)}, Options{MaxMessageSize: 1 << 20, Alloc: &alloc})
		c.startPolling()
		for i := 0; i < 64; i++ {
			msg, err := c.Receive(0)
			if err != nil {
				break
			}
			if len(msg) > 1<<20 {
				t.Fatalf("a %d-byte message got past the 1 MiB cap", len(msg))
			}
		}
		if limit := 2*int64(len(data)) + minReadChunk; alloc.peak > limit {
			t.Fatalf("%d bytes of input made the reader allocate %d", len(data), alloc.peak)
		}
		c.Abort()
	})
}

// FuzzHandshake answers the client's upgrade request with arbitrary bytes.
// Dial must not panic, must fail or succeed by its deadline, and must read
// no more than the handshake cap (plus one read buffer) of an answer that
// never ends; a Retry-After it reads is a wait of 0 to maxRetryAfter.
func FuzzHandshake(f *testing.F) {
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nX-Junk: " + string(bytes.Repeat([]byte{'a'}, 9000))))
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: keep-alive,\r\n Upgrade\r\nX: a\r\n\tb\r\nUpgrade: websocket\r\n \r\n\r\n"))
	f.Add([]byte("HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n"))
	f.Add([]byte("\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n\r\n"))
	f.Fuzz(func(t *testing.T, answer []byte) {
		const limit = 4096
		var read atomic.Int64
		orig := netDial
		defer func() { netDial = orig }()
		netDial = func(ctx context.Context, network, addr, _ string) (net.Conn, error) {
			cli, srv := net.Pipe()
			go func() {
				defer srv.Close()
				br := bufio.NewReader(srv)
				for { // the request, up to its blank line
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				// Answer, then keep repeating the last bytes, as an endless
				// header would, until the client goes.
				_ = srv.SetWriteDeadline(time.Now().Add(2 * time.Second))
				if _, err := srv.Write(answer); err != nil || len(answer) == 0 {
					return
				}
				tail := answer[len(answer)-1:]
				for {
					if _, err := srv.Write(bytes.Repeat(tail, 1024)); err != nil {
						return
					}
				}
			}()
			return &countConn{Conn: cli, n: &read}, nil
		}
		start := time.Now()
		c, err := Dial(context.Background(), Options{URL: "ws://127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxHandshakeSize: limit})
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Dial took %v with a 100 ms deadline", d)
		}
		if got := read.Load(); got > limit+8192 {
			t.Fatalf("the handshake read %d bytes; the cap is %d", got, limit)
		}
		if wait, ok := RetryAfter(err); ok && (wait < 0 || wait > maxRetryAfter) {
			t.Fatalf("the server's Retry-After made a wait of %v; want 0 to %v", wait, maxRetryAfter)
		}
		if err == nil {
			c.Abort()
		}
	})
}

// countConn counts the bytes read through it.
type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}
