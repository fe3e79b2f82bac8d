package conn

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// The TCP connection to a server whose name has more than one address.
//
// A trainer's machine often has several: a workstation publishes over
// mDNS (trainer.local) the address of every interface it has, a Docker
// bridge's and a cable's that is not plugged in among them, and a DNS
// record may still hold an old one. Go's net.Dialer tries the addresses of
// one family in turn, giving each an equal share of what is left of the
// deadline (at least 2 s): an address that drops the SYN (a network that
// is not there) cost 5 s of the default 10 s connect timeout, at every
// connect and reconnect, and under a connect timeout of 2 s it took the
// whole of it, so the address that would have answered was never tried.
//
// dialAddrs races them instead, as RFC 8305 (Happy Eyeballs) does across
// families: the first address gets attemptDelay to connect, then the next
// starts beside it, and so on (an attempt that fails starts the next at
// once); the first connection made wins and the others are cancelled, or
// closed if they connect anyway. Families alternate, starting with the
// resolver's first (RFC 8305 section 4), so this also covers what
// net.Dialer's own fallback between IPv6 and IPv4 did. Every attempt runs
// to the caller's deadline, so each address gets as long as there is.

// attemptDelay is how long an attempt has to itself before the next
// address is tried beside it: RFC 8305's recommended Connection Attempt
// Delay. A server on the same network connects in well under a
// millisecond; one behind a slow link that takes longer merely has a
// second SYN to another of its addresses race its own. A variable only so
// that tests can lengthen it.
var attemptDelay = 250 * time.Millisecond

// maxAddrs caps the addresses tried for one name: the number is the
// resolver's (a DNS server's), and each attempt is a socket and a
// goroutine until the deadline.
const maxAddrs = 16

// lookupIPAddr resolves a host name; tests replace it.
var lookupIPAddr = net.DefaultResolver.LookupIPAddr

// dialAddr connects to one address (an IP and a port); tests replace it.
var dialAddr = func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// dialAddrs connects to addr (host:port): an IP literal directly, a name
// by racing its addresses (above), prefer first when the name has it
// (Options.PreferAddr). ctx bounds the lookup and every attempt; its end
// ends them all.
func dialAddrs(ctx context.Context, network, addr, prefer string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	// An IP literal, or no host at all (":port", which a URL's host may
	// be): net.Dialer's, the latter the local system, as it always was.
	if ip, _, _ := strings.Cut(host, "%"); host == "" || net.ParseIP(ip) != nil {
		return dialAddr(ctx, network, addr)
	}
	ips, err := lookupIPAddr(ctx, host)
	if err != nil {
		return nil, err // a *net.DNSError: "lookup host on server: why"
	}
	if len(ips) == 0 { // the resolvers say no such host instead; kept safe
		return nil, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
	}
	addrs := interleaveFamilies(distinct(ips))
	targets := make([]string, len(addrs))
	for i, a := range addrs {
		targets[i] = net.JoinHostPort(a.String(), port)
	}
	if i := slices.Index(targets, prefer); i > 0 {
		copy(targets[1:i+1], targets[:i])
		targets[0] = prefer
	}
	if len(targets) > maxAddrs {
		targets = targets[:maxAddrs]
	}
	return race(ctx, network, targets)
}

// distinct is ips without repeats, in their order. Both resolvers keep
// the repeated lines of /etc/hosts, and a DNS server may repeat a record:
// a dead address listed n times would cost n attempt delays, and its
// copies could fill maxAddrs ahead of the address that answers.
func distinct(ips []net.IPAddr) []net.IPAddr {
	out := make([]net.IPAddr, 0, len(ips))
	seen := make(map[string]bool, len(ips))
	for _, a := range ips {
		if k := a.String(); !seen[k] { // the zone included
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}

// interleaveFamilies orders ips with the families alternating, each
// family in the resolver's order, starting with the resolver's first.
func interleaveFamilies(ips []net.IPAddr) []net.IPAddr {
	var first, other []net.IPAddr
	firstIs4 := ips[0].IP.To4() != nil
	for _, a := range ips {
		if (a.IP.To4() != nil) == firstIs4 {
			first = append(first, a)
		} else {
			other = append(other, a)
		}
	}
	out := make([]net.IPAddr, 0, len(ips))
	for i := 0; i < len(first) || i < len(other); i++ {
		if i < len(first) {
			out = append(out, first[i])
		}
		if i < len(other) {
			out = append(out, other[i])
		}
	}
	return out
}

type attempt struct {
	c   net.Conn
	err error // net.Dialer's errors name the address
}

// race dials targets in order, each attemptDelay after the last or at
// once when every attempt running has failed, and returns the first
// connection made. When all fail, the error names each address's failure.
func race(ctx context.Context, network string, targets []string) (net.Conn, error) {
	if len(targets) == 1 {
		return dialAddr(ctx, network, targets[0])
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan attempt, len(targets)) // never blocks a loser
	delay := time.NewTimer(attemptDelay)
	defer delay.Stop()
	next, running := 0, 0
	// start begins the next target's attempt, and the next attempt delay.
	start := func() {
		a := targets[next]
		next++
		running++
		go func() {
			c, err := dialAddr(rctx, network, a)
			done <- attempt{c, err}
		}()
		delay.Reset(attemptDelay)
	}
	start()
	errs := make([]error, 0, len(targets))
	for running > 0 {
		select {
		case r := <-done:
			running--
			if r.err == nil {
				cancel()
				go closeLosers(done, running)
				return r.c, nil
			}
			errs = append(errs, r.err)
			if running == 0 && next < len(targets) && rctx.Err() == nil {
				start()
			}
		case <-delay.C:
			if next < len(targets) && rctx.Err() == nil {
				start()
			}
		}
	}
	return nil, &dialError{addrs: targets[:next], errs: errs}
}

// closeLosers closes what the n attempts still running return.
func closeLosers(done <-chan attempt, n int) {
	for ; n > 0; n-- {
		if r := <-done; r.c != nil {
			r.c.Close()
		}
	}
}

// dialError is every attempt's failure. It unwraps to each, so that
// errors.Is and errors.As see a timeout or a cancellation in any.
type dialError struct {
	addrs []string // tried, in order
	errs  []error  // in the order they failed
}

func (e *dialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no address answered (%d tried: %s): ", len(e.addrs), strings.Join(e.addrs, ", "))
	for i, err := range e.errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *dialError) Unwrap() []error { return e.errs }
