package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/plugrl/libplugrl/core/wire"
)

// The tests drive each scenario with a minimal raw client: gobwas/ws for
// the handshake and frame headers, core/wire for messages, nothing of
// core/conn or core/client, so that they test the server and nothing else.

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	if useTLS(t) {
		cfg.TLS = serverTLS(t)
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "ws://127.0.0.1:") && cfg.TLS == nil {
		t.Fatalf("URL %q", s.URL())
	}
	t.Cleanup(func() { closePromptly(t, s) })
	return s
}

// closePromptly closes s and fails if that took more than a second: Close
// must return promptly in the middle of any scenario.
func closePromptly(t *testing.T, s *Server) {
	t.Helper()
	t0 := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if a := s.Stats().Active; a != 0 {
		t.Errorf("after Close, %d connections still active", a)
	}
}

type client struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
	m  wire.Message
}

func dial(t *testing.T, url string) *client {
	t.Helper()
	nc, br, _, err := ws.Dialer{Timeout: 2 * time.Second, TLSConfig: clientTLS(t)}.Dial(context.Background(), url)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		if tc, ok := nc.(*tls.Conn); ok {
			// Not tc.Close: its close_notify waits up to 5 s for a
			// server that does not read (NoRead).
			tc.NetConn().Close()
			return
		}
		nc.Close()
	})
	if br == nil {
		br = bufio.NewReader(nc)
	}
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	return &client{t: t, nc: nc, r: br}
}

// frame reads one frame; payloads are read whole (the tests never read a
// lying one through here).
func (c *client) frame() (ws.Header, []byte, error) {
	h, err := ws.ReadHeader(c.r)
	if err != nil {
		return h, nil, err
	}
	if h.Masked {
		c.t.Fatalf("server frame masked: %+v", h)
	}
	if h.Length > 64<<20 {
		c.t.Fatalf("frame of %d bytes", h.Length)
	}
	p := make([]byte, h.Length)
	_, err = io.ReadFull(c.r, p)
	return h, p, err
}

// message reads the next data frame, skipping pings.
func (c *client) message() (ws.OpCode, []byte) {
	c.t.Helper()
	for {
		h, p, err := c.frame()
		if err != nil {
			c.t.Fatalf("reading a message: %v", err)
		}
		if h.OpCode == ws.OpPing {
			continue
		}
		if !h.Fin {
			c.t.Fatalf("fragmented server message: %+v", h)
		}
		return h.OpCode, p
	}
}

func (c *client) metadata() *wire.Metadata {
	c.t.Helper()
	op, p := c.message()
	if op != ws.OpBinary {
		c.t.Fatalf("metadata in a frame of opcode %v", op)
	}
	md, err := wire.DecodeMetadata(p)
	if err != nil {
		c.t.Fatalf("metadata: %v", err)
	}
	if v, ok := md.Lookup("hostile_scenario"); !ok || len(v) == 0 {
		c.t.Errorf("metadata has no hostile_scenario key")
	}
	return md
}

// send writes one masked frame, as a client must.
func (c *client) send(op ws.OpCode, payload []byte) error {
	p := bytes.Clone(payload)
	h := ws.Header{Fin: true, OpCode: op, Masked: true, Mask: ws.NewMask(), Length: int64(len(p))}
	ws.Cipher(p, h.Mask, 0)
	if err := ws.WriteHeader(c.nc, h); err != nil {
		return err
	}
	_, err := c.nc.Write(p)
	return err
}

func (c *client) mustSend(op ws.OpCode, payload []byte) {
	c.t.Helper()
	if err := c.send(op, payload); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func observation(n int) *wire.Observation {
	return &wire.Observation{States: []wire.NamedArray{{
		Name:  "s",
		Array: wire.Array{DType: wire.Float64, Shape: []int{n, 1}, Data: make([]byte, 8*n)},
	}}}
}

func (c *client) infer(envs ...int64) {
	c.t.Helper()
	err := wire.EncodeInfer(&c.m, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, len(envs)), Obs: observation(len(envs))})
	if err != nil {
		c.t.Fatal(err)
	}
	c.mustSend(ws.OpBinary, c.m.AppendTo(nil))
}

func (c *client) feedback(envs ...int64) {
	c.t.Helper()
	n := len(envs)
	err := wire.EncodeFeedback(&c.m, &wire.Feedback{
		EnvIndices: envs, StepIDs: make([]int64, n), Obs: observation(n),
		Rewards: make([]float32, n), Terminated: make([]bool, n), Truncated: make([]bool, n),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.mustSend(ws.OpBinary, c.m.AppendTo(nil))
}

// action reads and decodes an action message.
func (c *client) action() (*wire.Action, []byte) {
	c.t.Helper()
	op, p := c.message()
	if op != ws.OpBinary {
		c.t.Fatalf("action in a frame of opcode %v", op)
	}
	raw := bytes.Clone(p)
	var a wire.Action
	if err := a.Decode(p); err != nil {
		c.t.Fatalf("action: %v", err)
	}
	return &a, raw
}

// expectSilence checks that nothing arrives for d.
func (c *client) expectSilence(d time.Duration) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	b, err := c.r.ReadByte()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("expected nothing for %v, got byte %#x, err %v", d, b, err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
}

// waitFor polls cond for up to two seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const upgradeRequest = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

// rawDial opens a TCP connection and sends upgradeRequest, for the
// scenarios a WebSocket library's dialer would not survive.
func rawDial(t *testing.T, s *Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if s.cfg.TLS != nil {
		nc = tls.Client(nc, clientTLS(t))
	}
	if _, err := io.WriteString(nc, upgradeRequest); err != nil {
		t.Fatal(err)
	}
	return nc, bufio.NewReader(nc)
}

func TestAcceptKey(t *testing.T) {
	// RFC 6455 section 1.3's example.
	if got := acceptKey("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("acceptKey = %q", got)
	}
}

func TestListenRefuses(t *testing.T) {
	for _, cfg := range []Config{
		{Scenario: "nonsense"},
		{},
		{Scenario: Normal, Addr: "0.0.0.0:0"},
		{Scenario: Normal, Addr: "localhost:0"},
		{Scenario: Normal, Addr: "127.0.0.1"},
		{Scenario: Normal, Addr: "[::]:0"},
		{Scenario: Normal, Addr: "[::ffff:10.0.0.1]:0"},
		{Scenario: Normal, Addr: "10.0.0.1:0"},
		{Scenario: Normal, H: -1},
	} {
		if s, err := Listen(cfg); err == nil {
			s.Close()
			t.Errorf("Listen(%+v) succeeded", cfg)
		}
	}
	for _, sc := range Scenarios() {
		if got, err := ParseScenario(string(sc)); err != nil || got != sc {
			t.Errorf("ParseScenario(%q) = %q, %v", sc, got, err)
		}
	}
}

func TestNormal(t *testing.T) { overBoth(t, testNormal) }

func testNormal(t *testing.T) {
	s := start(t, Config{Scenario: Normal, H: 2, D: 3})
	c := dial(t, s.URL())
	md := c.metadata()
	if md.ActionHorizon != (wire.Opt[int64]{Value: 2, Set: true}) || md.ActionDim != (wire.Opt[int64]{Value: 3, Set: true}) {
		t.Fatalf("metadata horizon %+v dim %+v", md.ActionHorizon, md.ActionDim)
	}
	for i := 0; i < 2; i++ {
		c.infer(3, 5)
		a, _ := c.action()
		if got := a.Chunk.Shape; len(got) != 3 || got[0] != 2 || got[1] != 2 || got[2] != 3 || a.Chunk.DType != f4 {
			t.Fatalf("action %s %v", a.Chunk.DType, got)
		}
		if len(a.EnvIDs) != 2 || a.EnvIDs[0] != 3 || a.EnvIDs[1] != 5 {
			t.Fatalf("env_ids %v", a.EnvIDs)
		}
		if len(a.Chunk.Data) != 2*2*3*4 || !bytes.Equal(a.Chunk.Data, make([]byte, 48)) {
			t.Fatalf("data %x", a.Chunk.Data)
		}
		c.feedback(5)
	}
	c.mustSend(ws.OpPing, []byte("hi"))
	h, p, err := c.frame()
	if err != nil || h.OpCode != ws.OpPong || string(p) != "hi" {
		t.Fatalf("pong: %+v %q %v", h, p, err)
	}
	c.mustSend(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, "bye"))
	h, p, err = c.frame()
	if err != nil || h.OpCode != ws.OpClose {
		t.Fatalf("close reply: %+v %v", h, err)
	}
	if code, _ := ws.ParseCloseFrameData(p); code != ws.StatusNormalClosure {
		t.Fatalf("close reply code %d", code)
	}
	// The server drops the TCP connection after the closing handshake.
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("after the close: %v", err)
	}
	waitFor(t, "the connection to end", func() bool { return s.Stats().Active == 0 })
	st := s.Stats()
	if st.Connections != 1 || st.Infers != 2 || st.Feedbacks != 2 || st.Actions != 2 || st.CloseFrames != 1 ||
		st.BytesRead < int64(len(upgradeRequest)) || st.BytesWritten < 200 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNoKeyIsRefused(t *testing.T) {
	s := start(t, Config{Scenario: Normal})
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(nc)
	if !strings.HasPrefix(string(b), "HTTP/1.1 400 ") {
		t.Fatalf("got %q", b)
	}
}

func TestEndlessHeader(t *testing.T) { overBoth(t, testEndlessHeader) }

func testEndlessHeader(t *testing.T) {
	s := start(t, Config{Scenario: EndlessHeader})
	_, r := rawDial(t, s)
	line, err := r.ReadString('\n')
	if err != nil || line != "HTTP/1.1 101 Switching Protocols\r\n" {
		t.Fatalf("status line %q, %v", line, err)
	}
	head := make([]byte, len("X-Junk: "))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != "X-Junk: " {
		t.Fatalf("header start %q, %v", head, err)
	}
	buf := make([]byte, 64<<10)
	total := 0
	for total < 2<<20 {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			if b != 'a' {
				t.Fatalf("byte %#x at %d of the header line", b, total)
			}
		}
		total += n
		if err != nil {
			t.Fatalf("after %d bytes: %v", total, err)
		}
	}
}

func TestSlowHandshake(t *testing.T) { overBoth(t, testSlowHandshake) }

func testSlowHandshake(t *testing.T) {
	s := start(t, Config{Scenario: SlowHandshake})
	nc, r := rawDial(t, s)
	_ = nc.SetReadDeadline(time.Now().Add(600 * time.Millisecond))
	got, err := io.ReadAll(r)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read: %v", err)
	}
	// One byte every 100 ms: about 6 in 600 ms, and far from the whole.
	want := string(upgradeResponse("dGhlIHNhbXBsZSBub25jZQ=="))
	if len(got) < 2 || len(got) > 9 || !strings.HasPrefix(want, string(got)) {
		t.Fatalf("got %q in 600 ms", got)
	}
	// Close (in Cleanup) returns promptly with the handshake half sent.
}

func TestSlowHandshakeCompletes(t *testing.T) { overBoth(t, testSlowHandshakeCompletes) }

func testSlowHandshakeCompletes(t *testing.T) {
	// Paced fast, the dribbled response is a valid handshake, and the
	// connection goes on as Normal.
	s := start(t, Config{Scenario: SlowHandshake, ByteEvery: time.Millisecond})
	c := dial(t, s.URL())
	c.metadata()
	c.infer(0)
	if a, _ := c.action(); a.Horizon() != 1 || a.Envs() != 1 {
		t.Fatalf("action shape %v", a.Chunk.Shape)
	}
}

func TestNoMetadata(t *testing.T) { overBoth(t, testNoMetadata) }

func testNoMetadata(t *testing.T) {
	s := start(t, Config{Scenario: NoMetadata})
	c := dial(t, s.URL())
	c.expectSilence(200 * time.Millisecond)
	before := s.Stats().BytesRead
	c.infer(0)
	c.mustSend(ws.OpPing, []byte("x"))
	c.mustSend(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	// Read and discarded, and nothing answered.
	waitFor(t, "the server to read the client's frames", func() bool { return s.Stats().BytesRead > before+50 })
	c.expectSilence(200 * time.Millisecond)
	if st := s.Stats(); st.Infers != 0 || st.CloseFrames != 0 {
		t.Fatalf("stats %+v: the frames should have been discarded unparsed", st)
	}
}

func TestZeroDimAction(t *testing.T) {
	s := start(t, Config{Scenario: ZeroDimAction})
	c := dial(t, s.URL())
	md := c.metadata()
	if md.ActionHorizon.Set || md.ActionDim.Set {
		t.Fatalf("metadata declares horizon %+v dim %+v", md.ActionHorizon, md.ActionDim)
	}
	for _, envs := range [][]int64{{7}, {0, 1, 2}} {
		c.infer(envs...)
		op, raw := c.message()
		if op != ws.OpBinary {
			t.Fatalf("opcode %v", op)
		}
		// The lie must be byte for byte what core/wire's encoder makes of
		// an honest action [5, n, 0] with the 5 replaced by 4e18. (wire
		// may refuse to encode the lie itself: 4e18 * n * 4 bytes
		// overflows before the 0.)
		var m wire.Message
		if err := wire.EncodeAction(&m, envs, &wire.Array{DType: f4, Shape: []int{5, len(envs), 0}}); err != nil {
			t.Fatal(err)
		}
		honest := m.AppendTo(nil)
		tail := []byte{0x93, 0x05, byte(len(envs)), 0x00}
		if !bytes.HasSuffix(honest, tail) {
			t.Fatalf("wire's action %x does not end with the shape [5, %d, 0]", honest, len(envs))
		}
		want := bytes.Clone(honest[:len(honest)-3])
		want = append(want, 0xcf)
		want = binary.BigEndian.AppendUint64(want, uint64(DefaultZeroDimH))
		want = append(want, byte(len(envs)), 0x00)
		if !bytes.Equal(raw, want) {
			t.Fatalf("action bytes\n%x\nwant\n%x", raw, want)
		}
		// What core/wire's decoder makes of the lie is its business (it is
		// free to refuse H beyond any limit, or a zero action width); the
		// test only logs it.
		var lie wire.Action
		if err := lie.Decode(raw); err != nil {
			t.Logf("n=%d: core/wire refuses the action: %v", len(envs), err)
		} else {
			if got := lie.Chunk.Shape; len(got) != 3 || got[0] != 4e18 || got[1] != len(envs) || got[2] != 0 || len(lie.EnvIDs) != len(envs) {
				t.Fatalf("core/wire decodes shape %v env_ids %v", got, lie.EnvIDs)
			}
			t.Logf("n=%d: core/wire accepts the action as %v", len(envs), lie.Chunk.Shape)
		}
		c.feedback(envs[0])
	}
}

func TestBigActionOneEnv(t *testing.T) {
	s := start(t, Config{Scenario: BigActionOneEnv})
	c := dial(t, s.URL())
	if md := c.metadata(); md.ActionHorizon.Set || md.ActionDim.Set {
		t.Fatalf("metadata declares horizon %+v dim %+v", md.ActionHorizon, md.ActionDim)
	}
	c.infer(4)
	a, _ := c.action()
	if got := a.Chunk.Shape; len(got) != 3 || got[0] != DefaultActionBytes/4 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("shape %v", got)
	}
	if len(a.Chunk.Data) != DefaultActionBytes || a.EnvIDs[0] != 4 {
		t.Fatalf("data %d bytes, env_ids %v", len(a.Chunk.Data), a.EnvIDs)
	}
	c.feedback(4)
	// 200 envs would be 1.6 GiB: the server ends the connection rather
	// than build it.
	envs := make([]int64, 200)
	for i := range envs {
		envs[i] = int64(i)
	}
	c.infer(envs...)
	if h, _, err := c.frame(); err != io.EOF {
		t.Fatalf("after an infer of 200 envs: %+v, %v", h, err)
	}
}

func TestHugeLength(t *testing.T) { overBoth(t, testHugeLength) }

func testHugeLength(t *testing.T) {
	s := start(t, Config{Scenario: HugeLength, H: 2, D: 3})
	c := dial(t, s.URL())
	if md := c.metadata(); md.ActionHorizon.Value != 2 || md.ActionDim.Value != 3 {
		t.Fatalf("metadata %+v %+v", md.ActionHorizon, md.ActionDim)
	}
	c.infer(0)
	h, err := ws.ReadHeader(c.r)
	if err != nil || h.Length != 1<<62 || h.OpCode != ws.OpBinary || !h.Fin || h.Masked {
		t.Fatalf("header %+v, %v", h, err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64<<10)
	total := 0
	for {
		n, err := c.r.Read(buf)
		if !bytes.Equal(buf[:n], make([]byte, n)) {
			t.Fatal("payload bytes are not zeros")
		}
		total += n
		if err != nil {
			break
		}
	}
	// 64 KiB every 10 ms: about 2 MiB in 300 ms.
	if total < 256<<10 {
		t.Fatalf("%d payload bytes in 300 ms", total)
	}
	// The trickle ends when the client goes.
	c.nc.Close()
	waitFor(t, "the trickle to stop", func() bool { return s.Stats().Active == 0 })
}

func TestStallMidFrame(t *testing.T) { overBoth(t, testStallMidFrame) }

func testStallMidFrame(t *testing.T) {
	s := start(t, Config{Scenario: StallMidFrame, H: 4, D: 2})
	c := dial(t, s.URL())
	c.metadata()
	c.infer(1, 2)
	h, err := ws.ReadHeader(c.r)
	if err != nil || h.OpCode != ws.OpBinary || !h.Fin {
		t.Fatalf("header %+v, %v", h, err)
	}
	// The whole message would be: check the claim is honest.
	var m wire.Message
	if err := encodeZeroAction(&m, []int64{1, 2}, 4, 2, func(n int) []byte { return make([]byte, n) }); err != nil {
		t.Fatal(err)
	}
	if h.Length != int64(m.Len()) {
		t.Fatalf("header claims %d bytes, the action is %d", h.Length, m.Len())
	}
	c.mustSend(ws.OpPing, []byte("x"))
	_ = c.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	got, err := io.ReadAll(c.r)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read: %v", err)
	}
	if len(got) == 0 || int64(len(got)) >= h.Length || !bytes.Equal(got, m.AppendTo(nil)[:len(got)]) {
		t.Fatalf("got %d of %d payload bytes: %x", len(got), h.Length, got)
	}
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	// Still reading, never answering.
	c.mustSend(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	waitFor(t, "the close frame to be read", func() bool { return s.Stats().CloseFrames == 1 })
	c.expectSilence(100 * time.Millisecond)
}

func TestNoRead(t *testing.T) { overBoth(t, testNoRead) }

func testNoRead(t *testing.T) {
	s := start(t, Config{Scenario: NoRead})
	c := dial(t, s.URL())
	c.metadata()
	checkSmallRecvBuffer(t, s)
	read := s.Stats().BytesRead
	chunk := make([]byte, 1<<20)
	_ = c.nc.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
	written := 0
	for written < 256<<20 {
		n, err := c.nc.Write(chunk)
		written += n
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("write: %v", err)
			}
			break
		}
	}
	// The client's socket buffer plus the server's tiny receive buffer.
	if written >= 64<<20 {
		t.Fatalf("wrote %d bytes to a server that does not read", written)
	}
	if st := s.Stats(); st.BytesRead != read {
		t.Fatalf("the server read %d bytes after the metadata", st.BytesRead-read)
	}
	t.Logf("the client's writes blocked after %d KiB", written>>10)
}

// checkSmallRecvBuffer checks that the server's side of its one connection
// has the tiny receive buffer NoRead and PingFlood promise. Without it the
// server still reads nothing, but the kernel's default buffer (128 KiB and
// more) takes what a client sends, and a client test meant to see its send
// block waits for an action instead: the write limit above cannot tell,
// because the client's own send buffer dwarfs the difference.
func checkSmallRecvBuffer(t *testing.T, s *Server) {
	t.Helper()
	n := serverRecvBuffer(t, s)
	if n < 0 {
		t.Log("SO_RCVBUF cannot be read on this system; not checked")
		return
	}
	// Linux doubles the size asked for; 4 times leaves room for a kernel
	// that rounds up, and is far below its default.
	if n > 4*s.cfg.RecvBuffer {
		t.Fatalf("the server's SO_RCVBUF is %d bytes; the scenario sets %d", n, s.cfg.RecvBuffer)
	}
}

func TestPingFlood(t *testing.T) { overBoth(t, testPingFlood) }

func testPingFlood(t *testing.T) {
	s := start(t, Config{Scenario: PingFlood})
	c := dial(t, s.URL())
	c.metadata()
	checkSmallRecvBuffer(t, s)
	// The upgrade request is all the server ever reads: the dial returned
	// after its 101, so it has been read, and nothing more has been sent.
	read := s.Stats().BytesRead
	c.infer(0)
	pings := 0
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		h, p, err := c.frame()
		if err != nil {
			t.Fatal(err)
		}
		if h.OpCode != ws.OpPing || len(p) != 125 {
			t.Fatalf("frame %+v in the flood", h)
		}
		pings++
	}
	if pings < 1000 {
		t.Fatalf("%d pings in 200 ms", pings)
	}
	if st := s.Stats(); st.Pings < int64(pings) || st.Infers != 0 {
		t.Fatalf("stats %+v after reading %d pings", st, pings)
	}
	// Never reading is the point: the client's pongs and infer must pile
	// up unread. A flood that read and discarded them would pass every
	// other check here (no infer is parsed either way).
	if st := s.Stats(); st.BytesRead != read {
		t.Fatalf("the server read %d bytes after the handshake", st.BytesRead-read)
	}
}

func TestSlowAction(t *testing.T) { overBoth(t, testSlowAction) }

func testSlowAction(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := start(t, Config{Scenario: SlowAction, H: 2, D: 2, ActionDelay: delay})
	c := dial(t, s.URL())
	c.metadata()
	t0 := time.Now()
	c.infer(0)
	// Pings are answered during the wait.
	c.mustSend(ws.OpPing, []byte("p"))
	if h, _, err := c.frame(); err != nil || h.OpCode != ws.OpPong {
		t.Fatalf("pong: %+v %v", h, err)
	}
	if d := time.Since(t0); d > delay/2 {
		t.Fatalf("pong after %v", d)
	}
	a, _ := c.action()
	if d := time.Since(t0); d < delay-20*time.Millisecond {
		t.Fatalf("action after %v, want %v", d, delay)
	}
	if a.Horizon() != 2 || a.Envs() != 1 || a.ActionShape()[0] != 2 {
		t.Fatalf("shape %v", a.Chunk.Shape)
	}
	c.feedback(0)
	// A close during the wait is answered at once.
	c.infer(0)
	time.Sleep(20 * time.Millisecond)
	t0 = time.Now()
	c.mustSend(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	h, _, err := c.frame()
	if err != nil || h.OpCode != ws.OpClose {
		t.Fatalf("close reply: %+v %v", h, err)
	}
	if d := time.Since(t0); d > delay/2 {
		t.Fatalf("close answered after %v", d)
	}
}

// With SlowEvery 3 only every third infer waits: a server that stalls now
// and then, after its client has started acting.
func TestSlowActionEvery(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := start(t, Config{Scenario: SlowAction, ActionDelay: delay, SlowEvery: 3})
	c := dial(t, s.URL())
	c.metadata()
	for i := 1; i <= 6; i++ {
		t0 := time.Now()
		c.infer(0)
		c.action()
		d := time.Since(t0)
		if slow := i%3 == 0; slow && d < delay-20*time.Millisecond {
			t.Fatalf("infer %d answered after %v, want %v", i, d, delay)
		} else if !slow && d > delay/2 {
			t.Fatalf("infer %d answered after %v, want at once", i, d)
		}
		c.feedback(0)
	}
	if _, err := (Config{Scenario: SlowAction, SlowEvery: -1}).withDefaults(); err == nil {
		t.Fatal("SlowEvery -1 accepted")
	}
}

// TestDoubleAction checks that every infer is answered twice with the same
// action: the clients' tests only see a protocol error, which a server
// that sent one action and something else could cause as well.
func TestDoubleAction(t *testing.T) { overBoth(t, testDoubleAction) }

func testDoubleAction(t *testing.T) {
	s := start(t, Config{Scenario: DoubleAction, H: 2, D: 3})
	c := dial(t, s.URL())
	c.metadata()
	for i := 0; i < 2; i++ {
		c.infer(4, 6)
		a, first := c.action()
		if !slices.Equal(a.Chunk.Shape, []int{2, 2, 3}) || !slices.Equal(a.EnvIDs, []int64{4, 6}) {
			t.Fatalf("action shape %v env_ids %v", a.Chunk.Shape, a.EnvIDs)
		}
		if _, stray := c.action(); !bytes.Equal(stray, first) {
			t.Fatalf("the second action differs from the first:\n%x\n%x", stray, first)
		}
		c.feedback(4, 6)
	}
	waitFor(t, "4 actions", func() bool { return s.Stats().Actions == 4 })
}

// TestDoubleActionGap checks that with a StrayGap the stray comes apart
// from its action, after it: a ping sent once the action has been read is
// answered before a stray an hour late. The clients' "later" case cannot
// tell a gap from none, since either way the stray is out of turn.
func TestDoubleActionGap(t *testing.T) { overBoth(t, testDoubleActionGap) }

func testDoubleActionGap(t *testing.T) {
	s := start(t, Config{Scenario: DoubleAction, StrayGap: time.Hour})
	c := dial(t, s.URL())
	c.metadata()
	c.infer(0)
	c.action()
	c.mustSend(ws.OpPing, []byte("after the action"))
	h, p, err := c.frame()
	if err != nil || h.OpCode != ws.OpPong || string(p) != "after the action" {
		t.Fatalf("want the pong before the stray, got %+v %q %v", h, p, err)
	}
	// Close (in Cleanup) ends the hour's wait.
}

func TestCloseNoReply(t *testing.T) { overBoth(t, testCloseNoReply) }

func testCloseNoReply(t *testing.T) {
	s := start(t, Config{Scenario: CloseNoReply})
	c := dial(t, s.URL())
	c.metadata()
	c.infer(0)
	c.action()
	c.feedback(0)
	c.mustSend(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	c.expectSilence(300 * time.Millisecond)
	if st := s.Stats(); st.CloseFrames != 1 || st.Active != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWidthChange(t *testing.T) {
	s := start(t, Config{Scenario: WidthChange, H: 2, D: 3})
	// The first connection: action_dim 3 until its second infer, which is
	// answered with a resync close.
	c := dial(t, s.URL())
	if md := c.metadata(); md.ActionDim != (wire.Opt[int64]{Value: 3, Set: true}) {
		t.Fatalf("first metadata action_dim %+v", md.ActionDim)
	}
	c.infer(0, 1)
	if a, _ := c.action(); !slices.Equal(a.Chunk.Shape, []int{2, 2, 3}) {
		t.Fatalf("first action shape %v", a.Chunk.Shape)
	}
	c.feedback(0, 1)
	c.infer(0)
	h, p, err := c.frame()
	if err != nil || h.OpCode != ws.OpClose {
		t.Fatalf("want a close frame for the second infer, got %+v %v", h, err)
	}
	if code, reason := ws.ParseCloseFrameData(p); code != ws.StatusGoingAway || reason != wire.ReasonResync {
		t.Fatalf("close %d %q, want 1001 %q", code, reason, wire.ReasonResync)
	}
	// The client's answer ends the closing handshake: the server drops the
	// connection.
	c.mustSend(ws.OpClose, ws.NewCloseFrameBody(ws.StatusGoingAway, ""))
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("after the closing handshake: %v", err)
	}
	// The second connection: action_dim 5, served as Normal.
	c = dial(t, s.URL())
	if md := c.metadata(); md.ActionDim != (wire.Opt[int64]{Value: 5, Set: true}) {
		t.Fatalf("second metadata action_dim %+v", md.ActionDim)
	}
	for k := 0; k < 3; k++ {
		c.infer(0)
		if a, _ := c.action(); !slices.Equal(a.Chunk.Shape, []int{2, 1, 5}) {
			t.Fatalf("second connection's action shape %v", a.Chunk.Shape)
		}
		c.feedback(0)
	}
	// The third: narrow again, and closed again at its second infer.
	c = dial(t, s.URL())
	if md := c.metadata(); md.ActionDim != (wire.Opt[int64]{Value: 3, Set: true}) {
		t.Fatalf("third metadata action_dim %+v", md.ActionDim)
	}
	c.infer(0)
	if a, _ := c.action(); !slices.Equal(a.Chunk.Shape, []int{2, 1, 3}) {
		t.Fatalf("third connection's action shape %v", a.Chunk.Shape)
	}
	c.feedback(0)
	c.infer(0)
	if h, _, err := c.frame(); err != nil || h.OpCode != ws.OpClose {
		t.Fatalf("want a close frame for the third connection's second infer, got %+v %v", h, err)
	}
	// Each connection's server goroutine counts an action after writing it
	// and a feedback after reading it, so the second connection's may still
	// be behind the client here (seen once under qemu: 4 actions, 4
	// feedbacks, the second connection's last of each not yet counted).
	waitFor(t, "3 connections, 5 actions and 1 close frame in the server's stats", func() bool {
		st := s.Stats()
		return st.Connections == 3 && st.Actions == 1+3+1 && st.CloseFrames == 1
	})
}

// TestCloseMidScenario checks that Close returns promptly while a
// connection is in the thick of each blocking scenario.
func TestCloseMidScenario(t *testing.T) {
	for _, tc := range []struct {
		sc   Scenario
		into func(t *testing.T, s *Server)
	}{
		{EndlessHeader, func(t *testing.T, s *Server) {
			// A client that sent its request and reads nothing: the
			// server is blocked in a write.
			rawDial(t, s)
			waitFor(t, "the socket buffers to fill", func() bool { return s.Stats().BytesWritten > 256<<10 })
		}},
		{SlowHandshake, func(t *testing.T, s *Server) {
			rawDial(t, s)
			waitFor(t, "the first byte", func() bool { return s.Stats().BytesWritten > 0 })
		}},
		{NoMetadata, func(t *testing.T, s *Server) { dial(t, s.URL()) }},
		{HugeLength, func(t *testing.T, s *Server) {
			c := dial(t, s.URL())
			c.metadata()
			c.infer(0)
			waitFor(t, "the trickle", func() bool { return s.Stats().BytesWritten > 256<<10 })
		}},
		{StallMidFrame, func(t *testing.T, s *Server) {
			c := dial(t, s.URL())
			c.metadata()
			c.infer(0)
			waitFor(t, "the half frame", func() bool { return s.Stats().Actions == 1 })
		}},
		{NoRead, func(t *testing.T, s *Server) { dial(t, s.URL()).metadata() }},
		{PingFlood, func(t *testing.T, s *Server) {
			dial(t, s.URL())
			waitFor(t, "the flood to fill the buffers", func() bool { return s.Stats().BytesWritten > 256<<10 })
		}},
		{SlowAction, func(t *testing.T, s *Server) {
			c := dial(t, s.URL())
			c.metadata()
			c.infer(0)
			waitFor(t, "the infer", func() bool { return s.Stats().Infers == 1 })
		}},
		{CloseNoReply, func(t *testing.T, s *Server) {
			c := dial(t, s.URL())
			c.metadata()
			c.mustSend(ws.OpClose, nil)
			waitFor(t, "the close frame", func() bool { return s.Stats().CloseFrames == 1 })
		}},
		{WidthChange, func(t *testing.T, s *Server) {
			// The resync close is sent and never answered.
			c := dial(t, s.URL())
			c.metadata()
			c.infer(0)
			c.action()
			c.feedback(0)
			c.infer(0)
			waitFor(t, "the second infer", func() bool { return s.Stats().Infers == 2 })
		}},
	} {
		t.Run(string(tc.sc), func(t *testing.T) {
			overBoth(t, func(t *testing.T) {
				cfg := Config{Scenario: tc.sc}
				if useTLS(t) {
					cfg.TLS = serverTLS(t)
				}
				s, err := Listen(cfg)
				if err != nil {
					t.Fatal(err)
				}
				tc.into(t, s)
				if a := s.Stats().Active; a != 1 {
					t.Fatalf("%d active connections", a)
				}
				closePromptly(t, s)
			})
		})
	}
}

func TestMaxConnTime(t *testing.T) { overBoth(t, testMaxConnTime) }

func testMaxConnTime(t *testing.T) {
	// Every connection ends at MaxConnTime, whatever it is doing.
	s := start(t, Config{Scenario: NoRead, MaxConnTime: 200 * time.Millisecond})
	c := dial(t, s.URL())
	c.metadata()
	waitFor(t, "MaxConnTime", func() bool { return s.Stats().Active == 0 })
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("after MaxConnTime: %v", err)
	}
}

// TestGarbleAction checks Garble's draws: the same seed gives the same
// bytes, another seed others, and of 2000 replies to an infer for 3 envs
// (H 2, D 3) a good share decode as actions (the honest fifth and the
// lies that are still true: no env_ids, a per-step shape of [1, 3]) and a
// good share do not.
func TestGarbleAction(t *testing.T) {
	envs := []int64{0, 1, 2}
	draw := func(seed uint64) [][]byte {
		rng := rand.New(rand.NewPCG(seed, 1))
		out := make([][]byte, 2000)
		for i := range out {
			out[i] = garbleAction(rng, envs, 2, 3)
		}
		return out
	}
	a, b, other := draw(1), draw(1), draw(2)
	same := 0
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("draw %d differs under the same seed", i)
		}
		if bytes.Equal(a[i], other[i]) {
			same++
		}
	}
	if same > len(a)/2 {
		t.Fatalf("%d of %d draws are the same under another seed", same, len(a))
	}
	decoded, honest := 0, 0
	for _, msg := range a {
		var act wire.Action
		if act.Decode(msg) != nil {
			continue
		}
		decoded++
		if act.Chunk.DType.String() == "<f4" && slices.Equal(act.Chunk.Shape, []int{2, 3, 3}) && slices.Equal(act.EnvIDs, envs) {
			honest++
		}
	}
	if decoded < 300 || decoded > 1700 || honest < 300 {
		t.Fatalf("of %d draws %d decode, %d of them as the honest [2, 3, 3] <f4 action: want a good share of each", len(a), decoded, honest)
	}
	t.Logf("of %d draws %d decode, %d as the honest action", len(a), decoded, honest)

	// No draw panics for one env or none (the server refuses an infer of
	// none, but garbleAction must not index ids that are not there).
	rng := rand.New(rand.NewPCG(3, 1))
	for _, ids := range [][]int64{{5}, {}} {
		for i := 0; i < 2000; i++ {
			garbleAction(rng, ids, 2, 3)
		}
	}
}

// TestGarble checks the scenario end to end: metadata, then an answer to
// every infer at once, in a whole binary frame, drawn by garbleAction.
func TestGarble(t *testing.T) { overBoth(t, testGarble) }

func testGarble(t *testing.T) {
	s := start(t, Config{Scenario: Garble, H: 2, D: 3, Seed: 7})
	// Each connection draws from (Seed, its number): a second one does
	// not repeat the first's draws.
	for conn := uint64(1); conn <= 2; conn++ {
		c := dial(t, s.URL())
		c.metadata()
		rng := rand.New(rand.NewPCG(7, conn))
		for i := 0; i < 50; i++ {
			c.infer(0, 1, 2)
			op, p := c.message()
			if want := garbleAction(rng, []int64{0, 1, 2}, 2, 3); op != ws.OpBinary || !bytes.Equal(p, want) {
				t.Fatalf("connection %d, reply %d: opcode %v, %d bytes; want the draw of seed 7, connection %d (%d bytes)", conn, i, op, len(p), conn, len(want))
			}
		}
	}
	waitFor(t, "100 actions", func() bool { return s.Stats().Actions == 100 })
}

// TestGarbleMetadata holds the client's metadata decoder to what
// garbleMetadata drew: a message whose every lie SPEC 5.1 allows is taken
// with the typed values drawn, one that is no metadata message is
// refused, and every value of a message taken can be asked for as JSON
// (an answer or an error, never a panic). The draws must be a mix.
func TestGarbleMetadata(t *testing.T) {
	draw := func(seed uint64) ([][]byte, []metaTruth) {
		rng := rand.New(rand.NewPCG(seed, 1))
		msgs, truths := make([][]byte, 3000), make([]metaTruth, 3000)
		for i := range msgs {
			msgs[i], truths[i] = garbleMetadata(rng, 2, 3)
		}
		return msgs, truths
	}
	msgs, truths := draw(11)
	again, _ := draw(11)
	for i := range msgs {
		if !bytes.Equal(msgs[i], again[i]) {
			t.Fatalf("draw %d differs under the same seed", i)
		}
	}
	counts := map[garbleVerdict]int{}
	taken, honest, noJSON := 0, 0, 0
	for i, msg := range msgs {
		tr := truths[i]
		counts[tr.verdict]++
		md, err := wire.DecodeMetadata(msg)
		switch {
		case tr.verdict == metaTaken && err != nil:
			t.Fatalf("draw %d: refused (%v), but every lie in it is one SPEC 5.1 allows", i, err)
		case tr.verdict == metaRefused && err == nil:
			t.Fatalf("draw %d: taken, but it is no metadata message", i)
		case err != nil:
			continue
		}
		taken++
		if tr.verdict == metaTaken {
			checkTruth(t, i, md, tr)
			if len(tr.ints) == 3 && tr.ints["action_horizon"] == 2 && tr.ints["action_dim"] == 3 {
				honest++
			}
		}
		for _, k := range md.Keys() {
			if _, ok, err := md.JSON(k); !ok {
				t.Fatalf("draw %d: key %q listed but not found", i, k)
			} else if err != nil {
				noJSON++
			}
		}
	}
	t.Logf("of %d draws: %d to take, %d to refuse, %d either; %d taken, %d with the true shape, %d values with no JSON",
		len(msgs), counts[metaTaken], counts[metaRefused], counts[metaEither], taken, honest, noJSON)
	if counts[metaTaken] < 1500 || counts[metaRefused] < 150 || counts[metaEither] < 100 || honest < 600 || noJSON < 30 {
		t.Fatal("want a good share of each")
	}
}

// checkTruth compares the typed keys md read with those drawn.
func checkTruth(t *testing.T, i int, md *wire.Metadata, tr metaTruth) {
	t.Helper()
	for key, got := range map[string]wire.Opt[int64]{
		"protocol_version": md.ProtocolVersion, "action_horizon": md.ActionHorizon, "action_dim": md.ActionDim,
	} {
		want, ok := tr.ints[key]
		if got.Set != ok || got.Value != want {
			t.Fatalf("draw %d: %s read as %+v, drawn %d (present %v)", i, key, got, want, ok)
		}
	}
	for key, got := range map[string]wire.Opt[string]{
		"server": md.Server, "server_version": md.ServerVersion, "algorithm": md.Algorithm, "policy": md.Policy,
	} {
		want, ok := tr.strs[key]
		if got.Set != ok || got.Value != want {
			t.Fatalf("draw %d: %s read as %+v, drawn %q (present %v)", i, key, got, want, ok)
		}
	}
	if md.Features.Set != (tr.features != nil) || !slices.Equal(md.Features.Value, tr.features) {
		t.Fatalf("draw %d: features read as %+v, drawn %q", i, md.Features, tr.features)
	}
}

// TestGarbleMetadataScenario checks the scenario end to end: each
// connection gets the metadata of its own draw, then honest actions.
func TestGarbleMetadataScenario(t *testing.T) { overBoth(t, testGarbleMetadataScenario) }

func testGarbleMetadataScenario(t *testing.T) {
	s := start(t, Config{Scenario: GarbleMetadata, H: 2, D: 3, Seed: 5})
	for conn := uint64(1); conn <= 3; conn++ {
		c := dial(t, s.URL())
		op, p := c.message()
		want, _ := garbleMetadata(rand.New(rand.NewPCG(5, conn)), 2, 3)
		if op != ws.OpBinary || !bytes.Equal(p, want) {
			t.Fatalf("connection %d: opcode %v, %d bytes; want the draw of seed 5, connection %d (%d bytes)", conn, op, len(p), conn, len(want))
		}
		c.infer(0, 1)
		act, _ := c.action()
		if !slices.Equal(act.Chunk.Shape, []int{2, 2, 3}) {
			t.Fatalf("connection %d: action of shape %v, want [2 2 3]", conn, act.Chunk.Shape)
		}
	}
}

// readFrames parses what garbleFrames wrote as a client would (gobwas's
// header checks in the client's state), returning the message, its
// opcode, the pings' payloads, how many data frames carried it, and the
// first error.
func readFrames(b []byte) (msg []byte, op ws.OpCode, pings [][]byte, data int, err error) {
	r := bytes.NewReader(b)
	fragmented := false
	for {
		h, err := ws.ReadHeader(r)
		if err != nil {
			return nil, 0, pings, data, err
		}
		state := ws.StateClientSide
		if fragmented {
			state |= ws.StateFragmented
		}
		if err := ws.CheckHeader(h, state); err != nil {
			return nil, 0, pings, data, err
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, 0, pings, data, err
		}
		switch {
		case h.OpCode == ws.OpPing:
			pings = append(pings, p)
			continue
		case h.OpCode.IsControl():
			continue
		case !fragmented:
			op = h.OpCode
		}
		msg = append(msg, p...)
		data++
		fragmented = !h.Fin
		if h.Fin {
			if r.Len() != 0 {
				return nil, 0, pings, data, fmt.Errorf("%d bytes after the message", r.Len())
			}
			return msg, op, pings, data, nil
		}
	}
}

// TestGarbleFrames: every legal draw is one message, the payload whole,
// its pings those garbleFrames says, in fragments and with control
// frames often enough; every other mode breaks RFC 6455 as its name
// says, before the message is whole (or, text, is one of the wrong type).
func TestGarbleFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var seq uint32
	payload := framesAction(2, 3, 5, 9)
	fragmented, withPings := 0, 0
	for mode := int64(0); mode < framesModes; mode++ {
		for i := 0; i < 500; i++ {
			out, pings := garbleFrames(rng, payload, mode, &seq)
			msg, op, read, frames, err := readFrames(out)
			switch mode {
			case framesLegal:
				if err != nil || op != ws.OpBinary || !bytes.Equal(msg, payload) {
					t.Fatalf("legal draw %d: %v, opcode %v, %d of %d bytes", i, err, op, len(msg), len(payload))
				}
				if !slices.EqualFunc(read, pings, bytes.Equal) {
					t.Fatalf("legal draw %d: pings read %d, said %d", i, len(read), len(pings))
				}
				if frames > 1 {
					fragmented++
				}
				if len(pings) > 0 {
					withPings++
				}
			case framesText:
				if err != nil || op != ws.OpText || !bytes.Equal(msg, payload) {
					t.Fatalf("text draw %d: %v, opcode %v", i, err, op)
				}
			default:
				if err == nil {
					t.Fatalf("mode %d draw %d: read as a legal message", mode, i)
				}
			}
		}
	}
	if fragmented < 250 || withPings < 100 {
		t.Fatalf("of 500 legal draws %d were fragmented and %d had pings: want many of both", fragmented, withPings)
	}
}

// TestGarbleFramesScenario: the scenario end to end: an action framed as
// the infer asks, its values from the nonce, the pong check, and a
// connection ended by a pong that echoes nothing.
func TestGarbleFramesScenario(t *testing.T) { overBoth(t, testGarbleFramesScenario) }

func testGarbleFramesScenario(t *testing.T) {
	s := start(t, Config{Scenario: GarbleFrames, H: 2, D: 5, Seed: 3})
	c := dial(t, s.URL())
	c.metadata()
	for i := int64(0); i < 20; i++ {
		msg, _ := c.framesExchange(100+i, true)
		var a wire.Action
		if err := a.Decode(msg); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Chunk.Shape, []int{2, 2, 5}) || !bytes.Equal(a.Chunk.Data, framesAction(2, 2, 5, 100+i)) {
			t.Fatalf("action %d: shape %v, values not those of nonce %d", i, a.Chunk.Shape, 100+i)
		}
		c.feedback(0, 1)
	}
	waitFor(t, "20 feedbacks", func() bool { return s.Stats().Feedbacks == 20 })
	c.mustSend(ws.OpPong, []byte("no such ping"))
	c.closedFor("echoes no ping")

	// A client that reads an action's pings and sends its next message
	// without answering them.
	c = dial(t, s.URL())
	c.metadata()
	for i := int64(0); ; i++ {
		if i == 50 {
			t.Fatal("50 actions and not one ping among their frames")
		}
		_, pings := c.framesExchange(i, false)
		c.feedback(0, 1)
		if pings > 0 {
			break
		}
	}
	c.closedFor("before the pongs")
}

// framesExchange sends a GarbleFrames infer of envs 0 and 1 asking for
// legal framing with nonce, and reads the action's frames, answering its
// pings if pong is set; it returns the message and how many pings came.
func (c *client) framesExchange(nonce int64, pong bool) (msg []byte, pings int) {
	c.t.Helper()
	err := wire.EncodeInfer(&c.m, &wire.Infer{EnvIndices: []int64{0, 1}, StepIDs: []int64{framesLegal, nonce}, Obs: observation(2)})
	if err != nil {
		c.t.Fatal(err)
	}
	c.mustSend(ws.OpBinary, c.m.AppendTo(nil))
	for {
		h, p, err := c.frame()
		if err != nil {
			c.t.Fatal(err)
		}
		switch {
		case h.OpCode == ws.OpPing:
			pings++
			if pong {
				c.mustSend(ws.OpPong, p)
			}
		case h.OpCode.IsControl():
		default:
			msg = append(msg, p...)
			if h.Fin {
				return msg, pings
			}
		}
	}
}

// closedFor reads a close 1002 whose reason holds why, then the end of
// the connection.
func (c *client) closedFor(why string) {
	c.t.Helper()
	h, p, err := c.frame()
	if code, reason := ws.ParseCloseFrameData(p); err != nil || h.OpCode != ws.OpClose || code != ws.StatusProtocolError || !strings.Contains(reason, why) {
		c.t.Fatalf("%v, opcode %v, close %d %q; want a close 1002 saying %q", err, h.OpCode, code, reason, why)
	}
	if _, _, err := c.frame(); err == nil {
		c.t.Fatal("the connection outlived its close")
	}
}
