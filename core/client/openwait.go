package client

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/conn"
)

// Waiting for a server that is not there yet.
//
// A robot often starts before its trainer: both come up at boot, or a
// launch file starts them together, or the trainer is restarting. With
// Options.OpenWait, Connect keeps trying while the server cannot be
// reached, with the reconnect backoff between attempts, instead of failing
// at the first refused connection and leaving the loop to every caller.
// It stops at once on what no wait can mend: a URL or port that is wrong,
// a certificate that does not verify (but for one not valid yet by a clock
// that NTP has not set yet: a robot's computer without a battery-backed
// clock boots with the wrong time), an HTTP answer other than 5xx, 429 or
// 408, a protocol error, the server's stop. A refusal's Retry-After (a
// 503's or 429's) lengthens the next pause to it, up to MaxBackoff.

// minAttempt is the least of the open wait an attempt after the first
// starts with; with less left, the last pause runs to the wait's end and
// the open fails with the last attempt's error. An attempt with a sliver
// left can only time out, and its timeout then hid why the attempts
// before it failed: under a loaded CI machine, a 200 ms wait on a refused
// port once ended in an attempt with 140 us left, and the open failed as
// a timeout instead of a refused connection. 20 ms covers a connection
// and its handshake on a LAN many times over.
const minAttempt = 20 * time.Millisecond

// open is Connect's connection: one attempt, or attempts until OpenWait
// has passed (negative: until one succeeds), Interrupt or a failure that
// waiting cannot mend.
func (c *Client) open(ctx context.Context) error {
	if c.opts.OpenWait == 0 {
		return c.connect(ctx, time.Time{})
	}
	var deadline time.Time // zero: no end
	if c.opts.OpenWait > 0 {
		deadline = time.Now().Add(c.opts.OpenWait)
	}
	wait := c.opts.ReconnectBackoff
	for attempt := 1; ; attempt++ {
		err := c.connect(ctx, deadline)
		if err == nil {
			if attempt > 1 {
				c.logf(LevelInfo, "connected to %s at attempt %d", conn.RedactedURL(c.opts.URL), attempt)
			}
			return nil
		}
		if !waitMends(err) {
			return err
		}
		ended := func() error {
			return newErr(KindOf(err), err, "no server answered within the open wait (%v, %d attempts); the last attempt", c.opts.OpenWait, attempt)
		}
		var pause time.Duration
		pause, wait = c.backoff(wait)
		pause = c.retryPause(pause, err)
		last := false // no attempt after this pause: the wait ends in it
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return ended()
			}
			if left-pause < minAttempt {
				pause, last = left, true
			}
		}
		then := "waiting for the server (next attempt in %v)"
		if last {
			then = "too little of the open wait is left for another (%v)"
		}
		c.logf(LevelInfo, "connect attempt %d failed: %v; "+then, attempt, err, pause.Round(time.Millisecond))
		// ctx too: connect's context.AfterFunc covers only an attempt,
		// and a pause may be MaxBackoff long.
		if c.sleep(ctx, pause) {
			if ctx.Err() != nil {
				return newErr(KindInterrupted, context.Cause(ctx), "waiting for the server: the context ended")
			}
			return newErr(KindInterrupted, nil, "waiting for the server to answer (attempt %d failed: %v): interrupted", attempt, err)
		}
		if last || !deadline.IsZero() && time.Until(deadline) <= 0 {
			return ended() // no time for another attempt
		}
	}
}

// waitMends says whether a failed connect may succeed later without
// anything on this side changing: the server not running yet, its
// machine or network not up, its name not published yet (mDNS at boot),
// a server or proxy that is full, restarting or limiting its rate (HTTP
// 5xx, 429 or 408, a connection
// closed before the handshake, or lost or closed with 1001, 1012, 1013 or
// 1014 before the metadata), a connect or metadata timeout, and this
// machine's clock not set yet (before the server's certificate starts).
func waitMends(err error) bool {
	switch KindOf(err) {
	case KindTimeout:
		return true
	case KindConnect:
	default:
		return false // a protocol error, the server's stop, an interrupt, ...
	}
	var status ws.StatusError
	if errors.As(err, &status) {
		// 5xx: the server or a proxy before it is failing, full or
		// restarting; 429: it limits how fast clients may come (a proxy's
		// rate limit); 408: it tired of waiting for the request. Each
		// says to try again later; any other answer says this request is
		// wrong.
		return status >= 500 || status == 429 || status == 408
	}
	var closeErr *conn.CloseError
	if errors.As(err, &closeErr) {
		// A close before the metadata (the server's stop is KindStopped,
		// above): one that says the server is going away or restarting,
		// or a proxy's backend is down, is mended by waiting; any other
		// (1008 policy violation, say) says this client is wrong.
		switch closeErr.Code {
		case 1001, 1012, 1013, 1014: // going away, service restart, try again later, bad gateway
			return true
		}
		return false
	}
	if errors.Is(err, conn.ErrLost) {
		// The WebSocket was made and then reset or ended before the
		// metadata: a server restarting, as ErrClosedBeforeHandshake
		// one step earlier. (Lost's text keeps the errno but does not
		// wrap it.)
		return true
	}
	var addrErr *net.AddrError // a port out of range, an address that is not one
	if errors.As(err, &addrErr) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	for _, mendable := range []error{
		conn.ErrClockBehind, // a robot's clock not set yet after boot: NTP sets it
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EHOSTUNREACH,
		syscall.ENETUNREACH, syscall.ENETDOWN, syscall.EHOSTDOWN, syscall.ETIMEDOUT,
		conn.ErrClosedBeforeHandshake, context.DeadlineExceeded,
	} {
		if errors.Is(err, mendable) {
			return true
		}
	}
	return false
}
