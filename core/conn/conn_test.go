package conn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/wire"
)

// rawServer accepts one WebSocket connection and hands it to script, which
// speaks raw frames; it returns the ws:// URL.
func rawServer(t *testing.T, script func(c net.Conn, r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer c.Close()
		script(c, r)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func dialT(t *testing.T, o Options) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(time.Second) })
	return c
}

func TestAPIKeyAndNoCompression(t *testing.T) {
	got := make(chan http.Header, 1)
	url := rawServer(t, func(c net.Conn, r *http.Request) {
		got <- r.Header.Clone()
		_ = wsutil.WriteServerBinary(c, []byte{0x80})
		_, _ = wsutil.ReadClientBinary(c)
	})
	c := dialT(t, Options{URL: url, APIKey: "s3cret"})
	if _, err := c.Receive(time.Second); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("Authorization") != "Api-Key s3cret" {
		t.Fatalf("Authorization header %q", h.Get("Authorization"))
	}
	if ext := h.Get("Sec-WebSocket-Extensions"); ext != "" {
		t.Fatalf("offered extensions %q; SPEC 1.1 wants no compression", ext)
	}
}

// TestLyingLength: a header that claims 1 TiB and then 10 bytes must not
// make the connection allocate for the claim.
func TestLyingLength(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteHeader(c, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: 1 << 40})
		_, _ = c.Write(make([]byte, 10))
	})
	c := dialT(t, Options{URL: url})
	_, err := c.Receive(5 * time.Second)
	if !errors.Is(err, ErrLost) {
		t.Fatalf("got %v, want a lost connection", err)
	}
	if cap(c.rbuf) > minReadChunk {
		t.Fatalf("receive buffer grew to %d bytes for 10 received", cap(c.rbuf))
	}
}

func TestMaxMessageSize(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = wsutil.WriteServerBinary(c, make([]byte, 4096))
		time.Sleep(time.Second)
	})
	c := dialT(t, Options{URL: url, MaxMessageSize: 1024})
	if _, err := c.Receive(5 * time.Second); !errors.Is(err, ErrTooBig) {
		t.Fatalf("got %v, want too big", err)
	}
}

// TestFragmentsAndPingsWhileBusy: the server fragments a message around
// pings, and pings while the caller holds a message and calls nothing; the
// latest ping must be answered (RFC 6455 5.5.3 lets pings that arrive
// together share the pong of the last one).
func TestFragmentsAndPingsWhileBusy(t *testing.T) {
	pongs := make(chan int, 1)
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		parts := [][]byte{[]byte("hel"), []byte("lo "), []byte("world")}
		for i, p := range parts {
			op := ws.OpContinuation
			if i == 0 {
				op = ws.OpBinary
			}
			_ = ws.WriteFrame(c, ws.NewFrame(op, i == len(parts)-1, p))
			_ = ws.WriteFrame(c, ws.NewPingFrame([]byte{byte(i)}))
		}
		for i := 0; i < 5; i++ { // the client is busy now
			_ = ws.WriteFrame(c, ws.NewPingFrame([]byte{byte(10 + i)}))
		}
		n := 0
		for {
			f, err := ws.ReadFrame(c)
			if err != nil {
				break
			}
			if f.Header.OpCode == ws.OpPong {
				n++
				ws.Cipher(f.Payload, f.Header.Mask, 0)
				if len(f.Payload) == 1 && f.Payload[0] == 14 {
					break
				}
			}
		}
		pongs <- n
	})
	c := dialT(t, Options{URL: url})
	msg, err := c.Receive(5 * time.Second)
	if err != nil || string(msg) != "hello world" {
		t.Fatalf("got %q, %v", msg, err)
	}
	select { // no further call on c: the reader answers on its own
	case n := <-pongs:
		if n < 1 {
			t.Fatalf("the last ping was not answered")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pings were not answered while the caller was busy")
	}
}

func TestTextFrameIsFatal(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = wsutil.WriteServerText(c, []byte("Traceback"))
		_, _ = io.Copy(io.Discard, c)
	})
	c := dialT(t, Options{URL: url})
	if _, err := c.Receive(5 * time.Second); !errors.Is(err, ErrTextFrame) {
		t.Fatalf("got %v, want text frame", err)
	}
}

func TestMaskedServerFrameIsProtocolError(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteFrame(c, ws.MaskFrame(ws.NewBinaryFrame([]byte("x"))))
		_, _ = io.Copy(io.Discard, c)
	})
	c := dialT(t, Options{URL: url})
	if _, err := c.Receive(5 * time.Second); !errors.Is(err, ErrProtocol) {
		t.Fatalf("got %v, want protocol error", err)
	}
}

// TestCloseCodes: the server's close code and reason surface as a
// *CloseError, and Close sends 1000.
// readCloseCode reads the client's next frame and returns its close code,
// or -1 if it is not a close frame.
func readCloseCode(c net.Conn) int {
	f, err := ws.ReadFrame(c)
	if err != nil || f.Header.OpCode != ws.OpClose {
		return -1
	}
	ws.Cipher(f.Payload, f.Header.Mask, 0)
	code, _ := ws.ParseCloseFrameData(f.Payload)
	return int(code)
}

func TestCloseCodes(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, "plugrl-server-resync")))
		_, _ = io.Copy(io.Discard, c)
	})
	c := dialT(t, Options{URL: url})
	_, err := c.Receive(5 * time.Second)
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != 1001 || ce.Reason != "plugrl-server-resync" {
		t.Fatalf("got %v, want close 1001 plugrl-server-resync", err)
	}

	codes := make(chan int, 1)
	url = rawServer(t, func(c net.Conn, _ *http.Request) { codes <- readCloseCode(c) })
	c2, err := Dial(context.Background(), Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	c2.Close(time.Second)
	if code := <-codes; code != 1000 {
		t.Fatalf("Close sent code %d, want 1000 (SPEC 7.5)", code)
	}
	if !c.PeerClosedFirst() || c2.PeerClosedFirst() {
		t.Fatalf("PeerClosedFirst: %v after the server's close, %v after the client's; want true, false", c.PeerClosedFirst(), c2.PeerClosedFirst())
	}

	// The answer to a server's close echoes its code, but never one no
	// endpoint may send, nor one of a body that breaks RFC 6455 5.5.1.
	for _, tc := range []struct {
		name string
		body []byte
		want int
	}{
		{"1001", ws.NewCloseFrameBody(1001, "bye"), 1001},
		{"empty", nil, 1000},
		{"1005", ws.NewCloseFrameBody(1005, ""), 1002},
		{"1006", ws.NewCloseFrameBody(1006, ""), 1002},
		{"1015", ws.NewCloseFrameBody(1015, ""), 1002},
		{"999", ws.NewCloseFrameBody(999, ""), 1002},
		{"1012", ws.NewCloseFrameBody(1012, "restart"), 1012},
		{"4000", ws.NewCloseFrameBody(4000, ""), 4000},
		{"5000", ws.NewCloseFrameBody(5000, ""), 1002},
		{"one byte", []byte{3}, 1002},
		{"code 0", []byte{0, 0}, 1002},
		{"code 0 with a reason", []byte{0, 0, 'h', 'i'}, 1002},
		{"reason not UTF-8", append(ws.NewCloseFrameBody(1001, ""), 0xff, 0xfe), 1002},
	} {
		answer := make(chan int, 1)
		url = rawServer(t, func(c net.Conn, _ *http.Request) {
			_ = ws.WriteFrame(c, ws.NewCloseFrame(tc.body))
			answer <- readCloseCode(c)
		})
		c3 := dialT(t, Options{URL: url})
		if _, err := c3.Receive(5 * time.Second); err == nil {
			t.Fatalf("%s: a close frame, and Receive returned a message", tc.name)
		}
		if got := <-answer; got != tc.want {
			t.Errorf("the server closed with %s: the client answered %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestWSS: wss:// with a CA the caller supplies; the masked payload arrives
// intact, segments and all.
func TestWSS(t *testing.T) {
	got := make(chan []byte, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer c.Close()
		_ = wsutil.WriteServerBinary(c, []byte("metadata"))
		p, _ := wsutil.ReadClientBinary(c)
		got <- p
	}))
	defer srv.Close()
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := dialT(t, Options{URL: url, TLS: &tls.Config{RootCAs: pool}, WriteBufferSize: 7})
	if _, err := c.Receive(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	var m wire.Message
	m.Str("a fairly long string that spans several 7-byte write chunks")
	m.Finish()
	if err := c.WriteMessage(&m); err != nil {
		t.Fatal(err)
	}
	want := m.AppendTo(nil)
	if p := <-got; string(p) != string(want) {
		t.Fatalf("server got %q, want %q", p, want)
	}
	// And without the CA the handshake must fail, saying what mends it:
	// with the system's roots, and with a CA file of another server's.
	_, err := Dial(context.Background(), Options{URL: url, DialTimeout: 2 * time.Second})
	hint := "none of the system's CA certificates"
	if noSystemRoots() { // a machine without ca-certificates
		hint = "this machine has no CA certificates"
	}
	if err == nil || !strings.Contains(err.Error(), hint) || !strings.Contains(err.Error(), "tls_ca_file") {
		t.Fatalf("dialing wss with an unknown CA: %v; want a refusal saying %q and naming tls_ca_file", err, hint)
	}
	_, err = Dial(context.Background(), Options{URL: url, DialTimeout: 2 * time.Second, TLS: &tls.Config{RootCAs: x509.NewCertPool()}})
	if err == nil || !strings.Contains(err.Error(), "none of the CA file given") {
		t.Fatalf("dialing wss with another CA file: %v; want a refusal saying the CA file does not sign it", err)
	}
	if h := trustHint(fmt.Errorf("tls: %w", x509.SystemRootsError{}), nil); !strings.Contains(h, "no CA certificates") {
		t.Fatalf("no system roots: the hint is %q", h)
	}
	if h := trustHint(errors.New("x509: certificate is valid for a, not b"), nil); h != "" {
		t.Fatalf("a name mismatch got a trust hint: %q", h)
	}
}

// TestPlainToTLSPort: a ws:// client at a TLS port is dropped in its
// handshake; the error says what is likely wrong, not just "EOF".
func TestPlainToTLSPort(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := tls.NewListener(ln, srv.TLS.Clone())
	defer tln.Close()
	go func() {
		for {
			nc, err := tln.Accept()
			if err != nil {
				return
			}
			_ = nc.(*tls.Conn).Handshake() // fails: not TLS
			nc.Close()
		}
	}()
	_, err = Dial(context.Background(), Options{URL: "ws://" + ln.Addr().String(), DialTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "check the URL's scheme") {
		t.Fatalf("ws:// to a TLS port: %v; want the scheme named", err)
	}
}

// growCounter is a heap Allocator that counts its Grow calls.
type growCounter struct {
	HeapAllocator
	grows int
}

func (a *growCounter) Grow(buf []byte, keep, size int) []byte {
	a.grows++
	return a.HeapAllocator.Grow(buf, keep, size)
}

// TestOneByteFragments: a message sent as one-byte fragments grows the
// receive buffer geometrically, not once per fragment (each growth copies
// what has arrived: quadratic, 57 s of CPU for 512 KiB).
func TestOneByteFragments(t *testing.T) {
	const size = 64 << 10
	const single = 600 << 10
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		var wire []byte
		for i := 0; i < size; i++ {
			op := ws.OpContinuation
			if i == 0 {
				op = ws.OpBinary
			}
			f := ws.NewFrame(op, i == size-1, []byte{byte(i)})
			var b bytes.Buffer
			_ = ws.WriteFrame(&b, f)
			wire = append(wire, b.Bytes()...)
		}
		_, _ = c.Write(wire)
		_ = ws.WriteFrame(c, ws.NewBinaryFrame(make([]byte, single)))
		time.Sleep(5 * time.Second)
	})
	alloc := &growCounter{}
	c := dialT(t, Options{URL: url, Alloc: alloc})
	msg, err := c.Receive(10 * time.Second)
	if err != nil || len(msg) != size {
		t.Fatalf("got %d bytes, %v; want %d", len(msg), err, size)
	}
	for i, b := range msg {
		if b != byte(i) {
			t.Fatalf("byte %d is %d", i, b)
		}
	}
	if alloc.grows > 20 {
		t.Errorf("%d one-byte fragments grew the receive buffer %d times", size, alloc.grows)
	}
	// An unfragmented message gets exactly the buffer it needs.
	c.Release()
	if msg, err := c.Receive(10 * time.Second); err != nil || len(msg) != single {
		t.Fatalf("got %d bytes, %v; want %d", len(msg), err, single)
	}
	if cap(c.rbuf) != single {
		t.Errorf("a %d-byte message in one frame took a %d-byte buffer", single, cap(c.rbuf))
	}
}

// TestStrayMessages: a data message the server sends when none is due
// fails the connection at the next look (a text frame as the server's
// failure, SPEC 7.4); one announced with ExpectMessage is left for Receive,
// however often the connection is looked at before it.
func TestStrayMessages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame ws.Frame
		want  error
	}{
		{"binary", ws.NewBinaryFrame([]byte("stray")), ErrProtocol},
		{"text", ws.NewTextFrame([]byte("Traceback")), ErrTextFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := rawServer(t, func(c net.Conn, _ *http.Request) {
				_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte("metadata")))
				_ = ws.WriteFrame(c, tc.frame)
				_, _ = io.Copy(io.Discard, c)
			})
			c := dialT(t, Options{URL: url})
			if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "metadata" {
				t.Fatalf("the first message: %q, %v", msg, err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for c.Err() == nil && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				c.Poll()
			}
			if !errors.Is(c.Err(), tc.want) {
				t.Fatalf("after a %s message out of turn: %v, want %v", tc.name, c.Err(), tc.want)
			}
		})
	}
	t.Run("announced", func(t *testing.T) {
		url := rawServer(t, func(c net.Conn, _ *http.Request) {
			_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte("metadata")))
			time.Sleep(50 * time.Millisecond)
			_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte("reply")))
			_, _ = io.Copy(io.Discard, c)
		})
		c := dialT(t, Options{URL: url})
		if _, err := c.Receive(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		c.ExpectMessage()
		for i := 0; i < 100; i++ { // looks between the request and the wait, as the poller's
			time.Sleep(time.Millisecond)
			c.Poll()
		}
		if msg, err := c.Receive(5 * time.Second); err != nil || string(msg) != "reply" {
			t.Fatalf("the announced message: %q, %v", msg, err)
		}
	})
}

// TestRedactedURL: a URL's password is never shown, also when the URL does
// not parse (a typo in the port, a password with unescaped characters):
// then nothing before its last @ is.
func TestRedactedURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ws://127.0.0.1:1", "ws://127.0.0.1:1"},
		{"ws://robot:s3cret@127.0.0.1:1", "ws://robot:xxxxx@127.0.0.1:1"},
		{"ws://robot:s3cret@127.0.0.1:99x", "ws://xxxxx@127.0.0.1:99x"},
		{"ws://robot:s3c ret@127.0.0.1:1", "ws://xxxxx@127.0.0.1:1"},
		{"ws://robot:s3%zzcret@127.0.0.1:1", "ws://xxxxx@127.0.0.1:1"},
		{"robot:s3cret@host", "xxxxx@host"},
		{"ws://robot:2024#s3cret@127.0.0.1:1", "ws://xxxxx@127.0.0.1:1"},
		{"ws://robot:2024?s3cret@127.0.0.1:1", "ws://xxxxx@127.0.0.1:1"},
		{"ws://robot:2024/s3cret@127.0.0.1:1", "ws://xxxxx@127.0.0.1:1"},
		{"ws:/robot:s3cret@127.0.0.1:1", "xxxxx@127.0.0.1:1"},
		{"ws:///robot:s3cret@127.0.0.1:1", "ws://xxxxx@127.0.0.1:1"},
		// Control characters make it unparseable; they must not reach a
		// log line raw (a Go caller's message quotes the URL).
		{"ws://127.0.0.1:1/\r\nX-Evil: 1", `ws://127.0.0.1:1/\r\nX-Evil: 1`},
		{"ws://robot:s3cret@127.0.0.1:1/\n", `ws://xxxxx@127.0.0.1:1/\n`},
	} {
		if got := RedactedURL(tc.in); got != tc.want {
			t.Errorf("RedactedURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, u := range []string{"ws://robot:s3c ret@127.0.0.1:1", "ws://robot:s3%zzcret@127.0.0.1:1", "ws://robot:2024#s3cret@127.0.0.1:1"} {
		_, err := Dial(context.Background(), Options{URL: u, DialTimeout: time.Second})
		if err == nil || strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "zz") {
			t.Fatalf("Dial(%q): %v; want an error without the password", u, err)
		}
	}
}

// closingServer serves the metadata, and a close 1001 once closeNow is
// closed; closed is closed when the close frame has been written (on
// loopback it is then in the client's socket).
func closingServer(t *testing.T) (url string, closeNow, closed chan struct{}) {
	closeNow, closed = make(chan struct{}), make(chan struct{})
	url = rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte("metadata")))
		<-closeNow
		_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, "bye")))
		close(closed)
		_, _ = io.Copy(io.Discard, c)
	})
	return url, closeNow, closed
}

// TestPollNowWithinGrace: Poll right after a Receive makes no system call
// (pollGrace), so a close that arrived since is not seen; PollNow reads
// it. The test holds the write lock, which keeps the idle poller out.
func TestPollNowWithinGrace(t *testing.T) {
	url, closeNow, closed := closingServer(t)
	c := dialT(t, Options{URL: url})
	if _, err := c.Receive(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.wmu.Lock()
	close(closeNow)
	<-closed
	// A look that has just been made, dated an hour ahead so that no
	// descheduling of this thread before the Poll can end its grace.
	c.lastLook = mono() + time.Hour
	c.Poll()
	pollErr := c.Err()
	c.PollNow()
	c.wmu.Unlock()
	var ce *CloseError
	if pollErr != nil || !errors.As(c.Err(), &ce) || ce.Code != 1001 {
		t.Fatalf("Poll within the grace: %v (want nil); PollNow: %v (want the server's close 1001)", pollErr, c.Err())
	}
}

// TestPongOwedGoesFirst: a ping read while another held the write lock
// (the poller, or a writer on another thread) leaves its pong owed; the
// next message must not go out ahead of it (read.go promises the pong
// before the next message, and the hostile garble-frames server fails a
// client that sends a message before the pongs of the pings it read).
func TestPongOwedGoesFirst(t *testing.T) {
	order := make(chan []ws.OpCode, 1)
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = ws.WriteFrame(c, ws.NewPingFrame([]byte("p1")))
		_ = ws.WriteFrame(c, ws.NewBinaryFrame([]byte{0x80}))
		var ops []ws.OpCode
		for len(ops) < 2 {
			f, err := ws.ReadFrame(c)
			if err != nil {
				break
			}
			ops = append(ops, f.Header.OpCode)
		}
		order <- ops
	})
	c := dialT(t, Options{URL: url})
	c.wmu.Lock() // another holds the write lock while the ping is read
	_, err := c.Receive(5 * time.Second)
	c.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	var m wire.Message
	m.Str("next")
	m.Finish()
	if err := c.WriteMessage(&m); err != nil {
		t.Fatal(err)
	}
	if ops := <-order; len(ops) != 2 || ops[0] != ws.OpPong || ops[1] != ws.OpBinary {
		t.Fatalf("the server read %v; want the pong, then the message", ops)
	}
}
