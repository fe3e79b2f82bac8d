//go:build !linux

package hostile

import (
	"errors"
	"net"
)

// dropEverythingFrom needs Linux's socket filters; elsewhere Vanish and
// VanishUnacked end the connection with this error instead.
func dropEverythingFrom(net.Conn) error {
	return errors.New("vanishing needs Linux (SO_ATTACH_FILTER)")
}

// vanishAfter sends and then fails likewise.
func vanishAfter(nc net.Conn, send func() error) error {
	if err := send(); err != nil {
		return err
	}
	return dropEverythingFrom(nc)
}

// hearEverything is never reached here: vanishing failed first.
func hearEverything(net.Conn) error { return nil }

// dropSome needs Linux's socket filters too.
func dropSome(net.Conn, int) error { return errors.New("a lossy link needs Linux (SO_ATTACH_FILTER)") }
