//go:build !linux

package conn

import (
	"os"
	"sync/atomic"
	"time"
)

// fdConn exists only on Linux; elsewhere the connection stays a net.Conn
// and takeover does nothing.
type fdConn struct {
	rdl, wdl deadline
	nonblock bool
	wlazy    time.Duration
	// As on Linux, for tlsTransport (never used: fd is nil here).
	reads, writes atomic.Int32
	rbound        deadline
}

func (f *fdConn) beginWrite(time.Duration)   {}
func (f *fdConn) setWriteDeadline(time.Time) {}

func (d *dialConn) takeover() error { return nil }

func (f *fdConn) Read([]byte) (int, error)      { return 0, os.ErrInvalid }
func (f *fdConn) Write([]byte) (int, error)     { return 0, os.ErrInvalid }
func (f *fdConn) writeMore([]byte) (int, error) { return 0, os.ErrInvalid }
func (f *fdConn) tryRead([]byte) (int, error)   { return 0, os.ErrInvalid }
func (f *fdConn) tryWrite([]byte) (int, error)  { return 0, os.ErrInvalid }
func (f *fdConn) shutdown()                     {}
func (f *fdConn) noWait(bool)                   {}
func (f *fdConn) writable() bool                { return true }
func (f *fdConn) close() error                  { return nil }

// peerSilence: no TCP_INFO here; keepalive alone ends a connection whose
// peer is gone.
func (f *fdConn) peerSilence() (time.Duration, bool, bool) { return 0, false, false }
