package hostile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/frames"
)

const (
	// maxRequest bounds the client's upgrade request: the server must not
	// do itself what it tests clients for.
	maxRequest = 16 << 10
	// wsGUID is RFC 6455's magic string for Sec-WebSocket-Accept.
	wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
)

// handshakeTimeout bounds the TLS handshake (with Config.TLS) and the wait
// for the upgrade request, together, from the accept. A variable for tests.
var handshakeTimeout = 10 * time.Second

var (
	errServerClosed = errors.New("server closed")
	errConnDeadline = errors.New("the connection's MaxConnTime passed")
	errReaderEnded  = errors.New("the client's side of the connection ended")
	errPeerClosed   = errors.New("the client closed, and the close was answered")
	errCloseDone    = errors.New("the client answered the server's close")
	errClosing      = errors.New("the connection is closing")
)

// conn is one client connection. Its serve goroutine runs the scenario; in
// the scenarios that read frames, one reader goroutine more answers control
// frames, so writes are serialised by wmu.
type conn struct {
	s        *Server
	nc       *countingConn
	br       *bufio.Reader
	deadline time.Time // MaxConnTime from the accept
	// handshake bounds the TLS handshake and the upgrade request:
	// handshakeTimeout from the accept, at most deadline.
	handshake time.Time

	wmu       sync.Mutex
	bw        *bufio.Writer
	closeSent bool // a close frame went out: nothing may follow it
	// silent is set once a frame has been left unfinished on purpose: a
	// pong or close written after it would land inside that frame's
	// payload, and the scenario is that nothing more ever arrives.
	silent bool

	// stalled: read, never answer. StallMidFrame sent its one reply, or
	// WidthChange its close.
	stalled bool
	msg     wire.Message
	d       int        // the action_dim declared and sent: Config.D (WidthChange: D+2 on its even connections)
	infers  int        // infers received on this connection
	first   bool       // the server's first connection (Vanish's and VanishUnacked's)
	garble  *rand.Rand // Garble's and GarbleFrames' draws

	// GarbleFrames' pings: the payloads sent and not yet answered, in
	// order (the reader checks each pong against them), and the number
	// the next one starts with.
	pmu      sync.Mutex
	pingsOut [][]byte
	pingSeq  uint32
}

func (c *conn) run() error {
	key, err := c.readRequest()
	if err != nil {
		return fmt.Errorf("reading the upgrade request: %v", err)
	}
	sc := c.s.cfg.Scenario
	if sc == EndlessHeader {
		return c.endlessHeader()
	}
	if key == "" {
		_ = c.writeRaw([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"))
		return errors.New("the upgrade request has no Sec-WebSocket-Key")
	}
	if sc == RateLimited && !c.s.admit(time.Now()) {
		_ = c.writeRaw([]byte(fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\nRetry-After: %d\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", int(rateLimitWait/time.Second))))
		return errors.New("refused with 429: too soon after the last refusal, or the first request after a connection")
	}
	if sc == SlowHandshake {
		if err := c.slowHandshake(key); err != nil {
			return err
		}
	} else if err := c.writeRaw(upgradeResponse(key)); err != nil {
		return err
	}
	if sc == NoMetadata {
		// Read so the client's sends never block on us, answer nothing.
		_, err := io.Copy(io.Discard, c.br)
		return err
	}
	meta := c.s.meta
	c.d = c.s.cfg.D
	if sc == WidthChange && c.s.metaSent.Add(1)%2 == 0 {
		meta, c.d = c.s.wideMeta, c.s.cfg.D+2
	}
	if sc == GarbleMetadata {
		meta, _ = garbleMetadata(c.s.draws(), c.s.cfg.H, c.d)
	}
	if err := c.writeFrame(ws.OpBinary, meta); err != nil {
		return fmt.Errorf("writing metadata: %v", err)
	}
	switch sc {
	case NoRead:
		// Nothing is read from here on; only Close or MaxConnTime end it.
		// The client's disconnect goes unnoticed, by design.
		return c.sleep(time.Until(c.deadline), nil)
	case PingFlood:
		return c.pingFlood()
	}
	return c.exchange()
}

// pingFlood is PingFlood after the metadata. Nothing reads, so this
// goroutine is the only writer.
func (c *conn) pingFlood() error {
	var frame bytes.Buffer
	if err := ws.WriteFrame(&frame, ws.NewPingFrame(bytes.Repeat([]byte{'p'}, 125))); err != nil {
		return err
	}
	one := frame.Len()
	block := bytes.Repeat(frame.Bytes(), (64<<10)/one)
	for {
		if err := c.alive(); err != nil {
			return err
		}
		// Counted before the write, and corrected after it: a client
		// reads the block's first frames while the write of the rest is
		// still under way (over TLS, record by record), and Stats must
		// never say fewer pings than a client has read.
		c.s.pings.Add(int64(len(block) / one))
		n, err := c.nc.Write(block)
		c.s.pings.Add(int64(n/one - len(block)/one))
		if err != nil {
			return err
		}
	}
}

// exchange serves infers until the connection ends, answering them as the
// scenario says. A reader goroutine reads frames, answers control frames
// and hands data messages over, so that a pending answer (SlowAction) or a
// trickle (HugeLength) does not stop the server from reading.
func (c *conn) exchange() error {
	msgs := make(chan []byte)
	quit := make(chan struct{})
	rdone := make(chan struct{})
	var rerr error
	defer close(quit)
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		defer close(rdone)
		rerr = c.readLoop(msgs, quit)
	}()
	for {
		var msg []byte
		select {
		case <-c.s.done:
			return errServerClosed
		case <-rdone:
			return rerr
		case msg = <-msgs:
		}
		kind, _, err := wire.Envelope(msg)
		switch {
		case err != nil:
			c.s.logf("%s: ignored a message that is not a PlugRL message: %v", c.s.cfg.Scenario, err)
			continue
		case string(kind) == wire.TypeFeedback:
			c.s.feedbacks.Add(1)
			continue
		case string(kind) != wire.TypeInfer:
			c.s.logf("%s: ignored a message of type %q", c.s.cfg.Scenario, kind)
			continue
		}
		c.s.infers.Add(1)
		c.infers++
		if c.stalled {
			continue
		}
		in, err := wire.DecodeInfer(msg)
		if err != nil {
			// Nothing to answer it with: an env_ids list needs env_indices.
			return fmt.Errorf("undecodable infer: %v", err)
		}
		if err := c.answer(in, rdone); err != nil {
			if err == errReaderEnded {
				<-rdone
				return rerr
			}
			return err
		}
	}
}

// answer replies to one infer as the scenario says.
func (c *conn) answer(in *wire.InferMsg, rdone <-chan struct{}) error {
	cfg := &c.s.cfg
	switch cfg.Scenario {
	case ZeroDimAction:
		if err := encodeZeroDimAction(&c.msg, in.EnvIndices, cfg.ZeroDimH); err != nil {
			return err
		}
		return c.sendAction()
	case BigActionOneEnv:
		return c.zeroAction(in.EnvIndices, bigHorizon(cfg), cfg.D)
	case HugeLength:
		return c.hugeLength(rdone)
	case StallMidFrame:
		return c.stallMidFrame(in.EnvIndices)
	case SlowAction:
		if cfg.SlowEvery > 1 && c.infers%cfg.SlowEvery != 0 {
			break
		}
		if err := c.sleep(cfg.ActionDelay, rdone); err != nil {
			return err
		}
	case DoubleAction:
		if err := encodeZeroAction(&c.msg, in.EnvIndices, cfg.H, cfg.D, c.s.zeroBytes); err != nil {
			return err
		}
		return c.sendActions(2, cfg.StrayGap, rdone)
	case WidthChange:
		if c.d == cfg.D && c.infers > 1 {
			return c.resync()
		}
	case Vanish:
		if c.first && c.infers == cfg.VanishAfter+1 {
			if err := c.vanish(rdone); err != nil {
				return err
			}
			// Back (VanishFor): answer the infer it vanished on.
		}
	case VanishUnacked:
		if c.first && c.infers == cfg.VanishAfter {
			send := func() error { return c.zeroAction(in.EnvIndices, cfg.H, c.d) }
			if err := vanishAfter(tcpOf(c.nc.Conn), send); err != nil {
				return err
			}
			c.s.logf("%s: vanished with its action %d", cfg.Scenario, c.infers)
			return c.gone(rdone)
		}
	case GarbleFrames:
		return c.framesAnswer(in)
	case Garble:
		if c.garble == nil {
			c.garble = c.s.draws()
		}
		if err := c.writeFrame(ws.OpBinary, garbleAction(c.garble, in.EnvIndices, cfg.H, c.d)); err != nil {
			return err
		}
		c.s.actions.Add(1)
		return nil
	}
	return c.zeroAction(in.EnvIndices, cfg.H, c.d)
}

// vanish makes the connection a black hole (Vanish): every packet from the
// client dropped unacknowledged, nothing more sent.
func (c *conn) vanish(rdone <-chan struct{}) error {
	if err := dropEverythingFrom(tcpOf(c.nc.Conn)); err != nil {
		return err
	}
	c.s.logf("%s: vanished after infer %d", c.s.cfg.Scenario, c.infers)
	return c.gone(rdone)
}

// gone stays silent until the connection's MaxConnTime or Close: a
// vanished peer sends no FIN or RST the client could see. The frames that
// wmu guards are closed to the reader's pongs and closes meanwhile. With
// Config.VanishFor it comes back after that long instead: the filter is
// removed and gone returns nil.
func (c *conn) gone(rdone <-chan struct{}) error {
	c.wmu.Lock()
	c.silent = true
	c.wmu.Unlock()
	back := c.s.cfg.VanishFor
	if back <= 0 {
		err := c.sleep(time.Until(c.deadline), rdone)
		if err == nil || err == errReaderEnded {
			err = errConnDeadline
		}
		return err
	}
	if err := c.sleep(back, rdone); err != nil {
		return err
	}
	if err := hearEverything(tcpOf(c.nc.Conn)); err != nil {
		return err
	}
	c.wmu.Lock()
	c.silent = false
	c.wmu.Unlock()
	c.s.logf("%s: back after %v", c.s.cfg.Scenario, back)
	return nil
}

// framesAnswer is GarbleFrames' answer to in: an honest action whose
// values say in.StepIDs[1] (framesAction), framed as in.StepIDs[0] says
// (garbleFrames), written in pieces.
func (c *conn) framesAnswer(in *wire.InferMsg) error {
	cfg := &c.s.cfg
	if c.garble == nil {
		c.garble = c.s.draws()
	}
	mode, nonce := int64(framesLegal), int64(0)
	if len(in.StepIDs) >= 2 {
		mode, nonce = in.StepIDs[0], in.StepIDs[1]
	}
	n := len(in.EnvIndices)
	if int64(cfg.H)*int64(n)*int64(c.d) > maxAction/4 {
		return fmt.Errorf("an action of [%d, %d, %d] is more than this server builds", cfg.H, n, c.d)
	}
	chunk := &wire.Array{DType: f4, Shape: []int{cfg.H, n, c.d}, Data: framesAction(cfg.H, n, c.d, nonce)}
	if err := wire.EncodeAction(&c.msg, in.EnvIndices, chunk); err != nil {
		return err
	}
	frames, pings := garbleFrames(c.garble, c.msg.AppendTo(nil), mode, &c.pingSeq)
	c.pmu.Lock()
	c.pingsOut = append(c.pingsOut, pings...)
	c.pmu.Unlock()
	if err := c.writePieces(frames); err != nil {
		return err
	}
	c.s.actions.Add(1)
	return nil
}

// writePieces writes b in pieces, half of them 1 to 8 bytes (a frame
// header split across a client's reads), each flushed on its own (over
// TLS, a record of its own), with a pause of up to a millisecond after
// one in sixteen. wmu is held throughout: the reader's pongs and closes
// must not land inside a frame.
func (c *conn) writePieces(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent || c.silent {
		return errClosing
	}
	for len(b) > 0 {
		n := 1 + c.garble.IntN(8)
		if c.garble.IntN(2) == 0 {
			n = 1 + c.garble.IntN(len(b))
		}
		n = min(n, len(b))
		if _, err := c.bw.Write(b[:n]); err != nil {
			return err
		}
		if err := c.bw.Flush(); err != nil {
			return err
		}
		b = b[n:]
		if c.garble.IntN(16) == 0 {
			time.Sleep(time.Duration(c.garble.IntN(1000)) * time.Microsecond)
		}
	}
	return nil
}

// pongAnswers reports whether p echoes a ping sent and not yet answered,
// and drops that ping and those before it: a client may answer only the
// latest of the pings it has read (RFC 6455 5.5.3).
func (c *conn) pongAnswers(p []byte) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	for i, ping := range c.pingsOut {
		if bytes.Equal(ping, p) {
			c.pingsOut = c.pingsOut[i+1:]
			return true
		}
	}
	return false
}

// framesFault ends a GarbleFrames connection whose client broke the ping
// rules: a close 1002 whose reason (at most 123 bytes) says what, so that
// the client's error shows it, and the reason as the connection's error.
func (c *conn) framesFault(reason string) error {
	c.control(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusProtocolError, reason)))
	return errors.New(reason)
}

// pingsOwed counts the pings sent and not answered.
func (c *conn) pingsOwed() int {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return len(c.pingsOut)
}

// resync leaves the infer unanswered and closes as a server that found the
// stream out of step does (SPEC 7.2: 1001 plugrl-server-resync). The
// connection then reads, never answers, until the client answers the close
// or drops the connection.
func (c *conn) resync() error {
	c.stalled = true
	if !c.control(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusGoingAway, wire.ReasonResync))) {
		return errClosing
	}
	return nil
}

// bigHorizon is BigActionOneEnv's H: H*D*4 bytes per env is about
// ActionBytes.
func bigHorizon(cfg *Config) int {
	return max(1, cfg.ActionBytes/(4*cfg.D))
}

// zeroAction sends an action of "<f4" zeros of shape [h, n, d].
func (c *conn) zeroAction(envIDs []int64, h, d int) error {
	if err := encodeZeroAction(&c.msg, envIDs, h, d, c.s.zeroBytes); err != nil {
		return err
	}
	return c.sendAction()
}

// hugeLength is HugeLength's reply: a header claiming 2^62 bytes, then a
// trickle of zeros that never completes it.
func (c *conn) hugeLength(rdone <-chan struct{}) error {
	c.wmu.Lock()
	if c.closeSent {
		c.wmu.Unlock()
		return errClosing
	}
	c.silent = true
	err := ws.WriteHeader(c.bw, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: 1 << 62})
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	c.s.actions.Add(1)
	zeros := make([]byte, c.s.cfg.TrickleBytes)
	for {
		if err := c.sleep(c.s.cfg.TrickleEvery, rdone); err != nil {
			return err
		}
		// silent keeps every other writer away; the lock is for form.
		c.wmu.Lock()
		_, err := c.nc.Write(zeros)
		c.wmu.Unlock()
		if err != nil {
			return err
		}
	}
}

// stallMidFrame is StallMidFrame's reply: the first half of a valid action
// frame, then silence.
func (c *conn) stallMidFrame(envIDs []int64) error {
	cfg := &c.s.cfg
	if err := encodeZeroAction(&c.msg, envIDs, cfg.H, cfg.D, c.s.zeroBytes); err != nil {
		return err
	}
	var frame bytes.Buffer
	h := ws.Header{Fin: true, OpCode: ws.OpBinary, Length: int64(c.msg.Len())}
	if err := ws.WriteHeader(&frame, h); err != nil {
		return err
	}
	head := frame.Len()
	frame.Write(c.msg.AppendTo(nil))
	// Half, but always the whole header and at least one payload byte, so
	// the client is committed to the frame.
	half := max(frame.Len()/2, head+1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return errClosing
	}
	c.silent = true
	c.stalled = true
	if _, err := c.bw.Write(frame.Bytes()[:half]); err != nil {
		return err
	}
	c.s.actions.Add(1)
	return c.bw.Flush()
}

// sendAction writes c.msg as one binary frame.
func (c *conn) sendAction() error { return c.sendActions(1, 0, nil) }

// sendActions sends c.msg n times, gap apart; with no gap, in one write.
func (c *conn) sendActions(n int, gap time.Duration, rdone <-chan struct{}) error {
	for i := 0; i < n; i++ {
		if i > 0 && gap > 0 {
			if err := c.sleep(gap, rdone); err != nil {
				return err
			}
		}
		if err := c.writeAction(gap > 0 || i == n-1); err != nil {
			return err
		}
	}
	return nil
}

// writeAction writes c.msg as one frame, and flushes if flush is set.
func (c *conn) writeAction(flush bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent || c.silent {
		return errClosing
	}
	m := &c.msg
	if err := ws.WriteHeader(c.bw, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: int64(m.Len())}); err != nil {
		return err
	}
	for i := 0; i < m.Segments(); i++ {
		if _, err := c.bw.Write(m.Segment(i)); err != nil {
			return err
		}
	}
	if flush {
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
	c.s.actions.Add(1)
	return nil
}

// writeFrame writes one unfragmented, unmasked frame.
func (c *conn) writeFrame(op ws.OpCode, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent || c.silent {
		return errClosing
	}
	if err := ws.WriteHeader(c.bw, ws.Header{Fin: true, OpCode: op, Length: int64(len(payload))}); err != nil {
		return err
	}
	if _, err := c.bw.Write(payload); err != nil {
		return err
	}
	return c.bw.Flush()
}

// control writes a control frame unless the connection is closing or
// silent, and reports whether it did.
func (c *conn) control(f ws.Frame) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent || c.silent {
		return false
	}
	if f.Header.OpCode == ws.OpClose {
		c.closeSent = true
	}
	if ws.WriteFrame(c.bw, f) != nil {
		return false
	}
	return c.bw.Flush() == nil
}

// closing reports whether a close frame went out.
func (c *conn) closing() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.closeSent
}

// writeRaw writes bytes that are not a frame (the handshake).
func (c *conn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.bw.Write(b); err != nil {
		return err
	}
	return c.bw.Flush()
}

// readLoop reads the client's frames until the connection ends: it answers
// pings, answers a close frame (except in CloseNoReply, or once silent),
// ends at the client's answer to a close the server sent, and hands each
// complete binary message to msgs. Text messages are dropped.
func (c *conn) readLoop(msgs chan<- []byte, quit <-chan struct{}) error {
	var buf []byte
	var op ws.OpCode
	started := false
	for {
		h, err := ws.ReadHeader(c.br)
		if err != nil {
			return err
		}
		if !h.Masked {
			return errors.New("client frame not masked (RFC 6455 5.1)")
		}
		if h.OpCode.IsControl() {
			if h.Length > 125 || !h.Fin {
				return errors.New("control frame fragmented or longer than 125 bytes (RFC 6455 5.5)")
			}
			p := make([]byte, h.Length)
			if _, err := io.ReadFull(c.br, p); err != nil {
				return err
			}
			ws.Cipher(p, h.Mask, 0)
			switch h.OpCode {
			case ws.OpPing:
				c.control(ws.NewPongFrame(p))
			case ws.OpPong:
				if c.s.cfg.Scenario == GarbleFrames && !c.pongAnswers(p) {
					return c.framesFault(fmt.Sprintf("garble-frames: a pong of %d bytes echoes no ping sent", len(p)))
				}
			case ws.OpClose:
				c.s.closeFrames.Add(1)
				if c.s.cfg.Scenario == CloseNoReply {
					// Never answered: read on until the client drops the
					// connection.
					continue
				}
				if c.closing() {
					// The answer to the server's own close (WidthChange):
					// the closing handshake is done.
					return errCloseDone
				}
				code, _ := ws.ParseCloseFrameData(p)
				var body []byte
				if code != 0 {
					body = ws.NewCloseFrameBody(code, "")
				}
				if c.control(ws.NewCloseFrame(body)) {
					return errPeerClosed
				}
			}
			continue
		}
		switch {
		case h.OpCode == ws.OpContinuation && !started:
			return errors.New("continuation frame with no message to continue")
		case h.OpCode != ws.OpContinuation && started:
			return errors.New("new data frame inside a fragmented message")
		}
		if !started {
			op, started = h.OpCode, true
		}
		if h.Length > c.s.cfg.MaxMessage-int64(len(buf)) {
			return fmt.Errorf("client message longer than MaxMessage (%d bytes)", c.s.cfg.MaxMessage)
		}
		n := len(buf)
		if buf, err = frames.ReadPayload(c.br, buf, h.Length); err != nil {
			return err
		}
		ws.Cipher(buf[n:], h.Mask, 0)
		if !h.Fin {
			continue
		}
		started = false
		if c.s.cfg.Scenario == GarbleFrames {
			// Every ping went before the last fragment of its action,
			// and this message came after the action: libplugrl sends
			// the pongs it owes before its next message.
			if owed := c.pingsOwed(); owed > 0 {
				return c.framesFault(fmt.Sprintf("garble-frames: a message before the pongs of %d pings read", owed))
			}
		}
		if op == ws.OpBinary {
			select {
			case msgs <- buf:
			case <-quit:
				return errServerClosed
			}
		}
		buf = nil
	}
}

// alive returns an error once the server is closed or the connection's
// MaxConnTime has passed: the check of the loops that only write.
func (c *conn) alive() error {
	select {
	case <-c.s.done:
		return errServerClosed
	default:
	}
	if !time.Now().Before(c.deadline) {
		return errConnDeadline
	}
	return nil
}

// sleep waits d, and returns early with an error when the server closes,
// the connection's MaxConnTime passes, or stop (which may be nil) closes.
func (c *conn) sleep(d time.Duration, stop <-chan struct{}) error {
	var err error
	if left := time.Until(c.deadline); left < d {
		d, err = max(left, 0), errConnDeadline
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.s.done:
		return errServerClosed
	case <-stop:
		return errReaderEnded
	case <-t.C:
		return err
	}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
