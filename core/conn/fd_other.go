//go:build !linux

package conn

import (
	"net"
	"os"
	"time"
)

// fdConn exists only on Linux; elsewhere the connection stays a net.Conn
// and takeover does nothing.
type fdConn struct {
	rdl, wdl deadline
	nonblock bool
	wlazy    time.Duration
}

func (f *fdConn) beginWrite(time.Duration)   {}
func (f *fdConn) setWriteDeadline(time.Time) {}

func (d *dialConn) takeover(time.Duration) error { return nil }

func (f *fdConn) Read([]byte) (int, error)     { return 0, os.ErrInvalid }
func (f *fdConn) Write([]byte) (int, error)    { return 0, os.ErrInvalid }
func (f *fdConn) tryRead([]byte) (int, error)  { return 0, os.ErrInvalid }
func (f *fdConn) tryWrite([]byte) (int, error) { return 0, os.ErrInvalid }
func (f *fdConn) shutdown()                    {}
func (f *fdConn) noWait(bool)                  {}
func (f *fdConn) writable() bool               { return true }
func (f *fdConn) close() error                 { return nil }

// setUserTimeout does nothing here: keepalive alone bounds a silent
// connection's dead peer, and data left unacknowledged waits for the
// kernel's own retransmission limit or the call's deadline.
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
