package refserver

// Frames on a connection: writing them under the write lock (data, pings,
// an action in fragments with pings between) and reading one data message,
// answering pings and the close on the way.

import (
	"fmt"
	"io"
	"time"

	"github.com/gobwas/ws"
	clientconn "github.com/plugrl/libplugrl/core/conn" // its close-code rule, which a server shares
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/frames"
)

// writeLocked writes one unfragmented data frame; c.wmu must be held.
func (c *conn) writeLocked(op ws.OpCode, payload []byte) error {
	if c.closeSent {
		return errCloseSent
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.FeedbackTimeout))
	if err := ws.WriteHeader(c.bw, ws.Header{Fin: true, OpCode: op, Length: int64(len(payload))}); err != nil {
		return err
	}
	if _, err := c.bw.Write(payload); err != nil {
		return err
	}
	return c.bw.Flush()
}

func (c *conn) send(op ws.OpCode, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(op, payload)
}

// pingLocked writes one ping; c.wmu must be held.
func (c *conn) pingLocked(payload string) error {
	return ws.WriteFrame(c.bw, ws.NewPingFrame([]byte(payload)))
}

// closeReply is the body of the close frame that answers a client's close
// frame p (code as parsed from it), and how the connection ended in words.
// A valid code is echoed (RFC 6455 5.5.1); an empty body gets an empty one.
// A code that may not appear on the wire (RFC 6455 7.4: 1005, 1006 and 1015
// are for reporting only, others are reserved or out of range), or a body
// too short to hold a code, is a protocol error: answered with 1002.
func closeReply(p []byte, code ws.StatusCode) (body []byte, detail string) {
	switch {
	case len(p) == 0:
		return nil, "the client closed"
	case len(p) == 1:
		return ws.NewCloseFrameBody(ws.StatusProtocolError, "close frame body of 1 byte"), "the client closed with a 1-byte close body (RFC 6455 5.5.1); answered 1002"
	case clientconn.SendableCloseCode(code):
		return ws.NewCloseFrameBody(code, ""), "the client closed"
	}
	return ws.NewCloseFrameBody(ws.StatusProtocolError, "invalid close code"),
		fmt.Sprintf("the client closed with code %d, which RFC 6455 7.4 does not allow in a close frame; answered 1002", code)
}

// pong answers a ping, under a write deadline of its own. The deadline left
// by the last data write (FeedbackTimeout after it) has passed for a client
// that pings while idle, and a write under it fails; bufio.Writer then
// refuses every later write. A pong that cannot be written ends the
// connection: nothing more can go out on it.
func (c *conn) pong(p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(closeGrace))
	err := ws.WriteFrame(c.bw, ws.NewPongFrame(p))
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		c.closeSent = true
		return &controlWriteError{"a pong", err}
	}
	return nil
}

// controlWriteError is a control frame the server could not write: the
// connection is over.
type controlWriteError struct {
	what string
	err  error
}

func (e *controlWriteError) Error() string { return fmt.Sprintf("writing %s: %v", e.what, e.err) }
func (e *controlWriteError) Unwrap() error { return e.err }

// sendAction writes an action message, with the PingStorm and Fragments
// faults applied.
func (c *conn) sendAction(m *wire.Message) error {
	faults := &c.s.cfg.Faults
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return errCloseSent
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.FeedbackTimeout))
	for i := 0; i < faults.PingStorm; i++ {
		if err := c.pingLocked(fmt.Sprintf("storm %d", i)); err != nil {
			return err
		}
	}
	if faults.Fragments <= 1 {
		if err := ws.WriteHeader(c.bw, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: int64(m.Len())}); err != nil {
			return err
		}
		for i := 0; i < m.Segments(); i++ {
			if _, err := c.bw.Write(m.Segment(i)); err != nil {
				return err
			}
		}
		return c.bw.Flush()
	}
	c.buf = m.AppendTo(c.buf[:0])
	b := c.buf
	parts := min(faults.Fragments, max(len(b), 1))
	for i := 0; i < parts; i++ {
		op := ws.OpContinuation
		if i == 0 {
			op = ws.OpBinary
		}
		p := b[len(b)*i/parts : len(b)*(i+1)/parts]
		if err := ws.WriteHeader(c.bw, ws.Header{Fin: i == parts-1, OpCode: op, Length: int64(len(p))}); err != nil {
			return err
		}
		if _, err := c.bw.Write(p); err != nil {
			return err
		}
		if i < parts-1 {
			if err := c.pingLocked(fmt.Sprintf("between fragments %d and %d", i+1, i+2)); err != nil {
				return err
			}
		}
	}
	return c.bw.Flush()
}

// readMessage reads one data message, answering pings and the client's close
// frame on the way. Fragments are joined; the payload is freshly allocated.
func (c *conn) readMessage() (ws.OpCode, []byte, error) {
	var op ws.OpCode
	var buf []byte
	started := false
	for {
		h, err := ws.ReadHeader(c.br)
		if err != nil {
			return 0, nil, err
		}
		switch {
		case h.OpCode.IsReserved():
			return 0, nil, &protocolError{msg: fmt.Sprintf("reserved opcode %d", h.OpCode)}
		case h.Rsv != 0:
			return 0, nil, &protocolError{msg: "reserved bits set, and no extension was negotiated"}
		case !h.Masked:
			return 0, nil, &protocolError{msg: "client frame not masked (RFC 6455 5.1)"}
		}
		if h.OpCode.IsControl() {
			if h.Length > 125 || !h.Fin {
				return 0, nil, &protocolError{msg: "control frame fragmented or longer than 125 bytes"}
			}
			p := make([]byte, h.Length)
			if _, err := io.ReadFull(c.br, p); err != nil {
				return 0, nil, err
			}
			ws.Cipher(p, h.Mask, 0)
			switch h.OpCode {
			case ws.OpPing:
				if err := c.pong(p); err != nil {
					return 0, nil, err
				}
			case ws.OpClose:
				code, reason := ws.ParseCloseFrameData(p)
				c.wmu.Lock()
				if !c.closeSent {
					c.closeSent = true
					body, detail := closeReply(p, code)
					_ = c.nc.SetWriteDeadline(time.Now().Add(closeGrace))
					_ = ws.WriteFrame(c.bw, ws.NewCloseFrame(body))
					_ = c.bw.Flush()
					c.wmu.Unlock()
					c.end("client", int(code), reason, detail)
				} else {
					c.wmu.Unlock()
				}
				return 0, nil, &peerClosed{code, reason}
			}
			continue
		}
		switch {
		case h.OpCode == ws.OpContinuation && !started:
			return 0, nil, &protocolError{msg: "continuation frame with no message to continue"}
		case h.OpCode != ws.OpContinuation && started:
			return 0, nil, &protocolError{msg: "new data frame inside a fragmented message"}
		}
		if !started {
			op, started = h.OpCode, true
		}
		n := len(buf)
		if most := c.s.cfg.MaxMessage; most > 0 && (h.Length > most || int64(n) > most-h.Length) {
			return 0, nil, &protocolError{code: ws.StatusMessageTooBig, skip: h.Length, msg: fmt.Sprintf(
				"a message of at least %d bytes, more than the %d this server takes (Config.MaxMessage, plugrl serve --max-message)",
				uint64(n)+uint64(h.Length), most)}
		}
		if buf, err = frames.ReadPayload(c.br, buf, h.Length); err != nil {
			return 0, nil, err
		}
		ws.Cipher(buf[n:], h.Mask, 0)
		if h.Fin {
			return op, buf, nil
		}
	}
}
