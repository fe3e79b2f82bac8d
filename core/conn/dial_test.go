package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws/wsutil"
)

// deadListener returns the 127.0.0.1 address of a listening socket that
// never accepts and whose accept queue is full, so that the kernel drops
// every further SYN to it: to a client, an address on a network that is
// not there. It skips the test where that cannot be made.
func deadListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Skip(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Skip(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Skip(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	// A backlog of 0 queues one connection (Linux: the backlog plus one);
	// the next SYN is dropped, which a short dial sees as a timeout.
	for i := 0; i < 8; i++ {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the kernel queued every connection to a listener of backlog 0: cannot make an address that drops SYNs")
	return ""
}

// refusedAddr returns a 127.0.0.1 address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// fakeNames makes name resolve to the fake IPs 192.0.2.1, 192.0.2.2, ...
// (TEST-NET-1), and a dial to fake IP k go to the k-th of real (on
// 127.0.0.1), for the rest of the test. It counts lookups and dials.
func fakeNames(t *testing.T, name string, real ...string) *fakeCounts {
	t.Helper()
	n := &fakeCounts{}
	fake := map[string]string{}
	var ips []net.IPAddr
	for i, r := range real {
		ip := net.IPv4(192, 0, 2, byte(i+1))
		ips = append(ips, net.IPAddr{IP: ip})
		fake[ip.String()] = r
	}
	origLookup, origDial := lookupIPAddr, dialAddr
	t.Cleanup(func() { lookupIPAddr, dialAddr = origLookup, origDial })
	lookupIPAddr = func(ctx context.Context, host string) ([]net.IPAddr, error) {
		n.lookups.Add(1)
		if host != name {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return ips, nil
	}
	dialAddr = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		r, ok := fake[host]
		if !ok {
			return nil, fmt.Errorf("dial to %s: not one of the test's addresses", addr)
		}
		n.dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, r)
	}
	return n
}

type fakeCounts struct{ lookups, dials atomic.Int32 }

// TestDialPastADeadAddress: a name whose first address drops SYNs and
// whose second answers connects to the second, under a 2 s deadline.
// net.Dialer gave the first the whole 2 s and never tried the second
// (and, under 10 s, 5 s of it at every connect).
func TestDialPastADeadAddress(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		_ = wsutil.WriteServerBinary(c, []byte{0x80})
		_, _ = wsutil.ReadClientBinary(c)
	})
	live := strings.TrimPrefix(url, "ws://")
	fakeNames(t, "trainer.test", deadListener(t), live)
	c := dialT(t, Options{URL: "ws://trainer.test:80", DialTimeout: 2 * time.Second})
	if _, err := c.Receive(time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestDialLoserClosed: when two addresses both connect, the one that
// connected later is closed, not leaked.
func TestDialLoserClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fakeNames(t, "trainer.test", l.Addr().String(), l.Addr().String())
	slow := make(chan struct{})
	dialAddr = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "192.0.2.1:") {
			<-slow // the first address answers only after the second won
			ctx = context.Background()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, l.Addr().String())
	}
	c, err := dialAddrs(context.Background(), "tcp", "trainer.test:80", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	close(slow)
	// Both connections reach the listener; the loser's must be closed.
	for i := 0; i < 2; i++ {
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.RemoteAddr().String() == c.LocalAddr().String() {
			continue // the winner
		}
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := s.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("the losing connection was not closed: read %d, %v", n, err)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the losing connection is still open 5 s after the race ended")
		}
	}
}

// TestDialEveryAddressFails: the error names every address and why, and
// keeps its causes for errors.Is (a timeout is a timeout to Dial).
func TestDialEveryAddressFails(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		fakeNames(t, "trainer.test", refusedAddr(t), refusedAddr(t))
		_, err := dialAddrs(context.Background(), "tcp", "trainer.test:80", "")
		if err == nil {
			t.Fatal("dial succeeded with nothing listening")
		}
		msg := err.Error()
		for _, want := range []string{"2 tried", "192.0.2.1:80", "192.0.2.2:80", "connection refused"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("error %v does not unwrap to ECONNREFUSED", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		fakeNames(t, "trainer.test", deadListener(t), deadListener(t))
		_, err := Dial(context.Background(), Options{URL: "ws://trainer.test:80", DialTimeout: 600 * time.Millisecond})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("dial to two dead addresses: %v; want ErrTimeout", err)
		}
		if !strings.Contains(err.Error(), "2 tried") {
			t.Errorf("error %q does not say both addresses were tried", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		n := fakeNames(t, "trainer.test", deadListener(t), deadListener(t), deadListener(t))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := Dial(ctx, Options{URL: "ws://trainer.test:80", DialTimeout: time.Minute})
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("dial cancelled: %v; want ErrInterrupted", err)
		}
		if d := n.dials.Load(); d != 1 {
			t.Errorf("%d attempts; want the one that ran when the dial was cancelled", d)
		}
	})
}

// TestDialNames: an IP literal is not looked up; a name's lookup error is
// the resolver's own; a name's addresses are tried up to maxAddrs.
func TestDialNames(t *testing.T) {
	n := fakeNames(t, "trainer.test", refusedAddr(t))
	if _, err := dialAddrs(context.Background(), "tcp", refusedAddr(t), ""); err == nil {
		t.Fatal("dial succeeded with nothing listening")
	}
	if l := n.lookups.Load(); l != 0 {
		t.Errorf("an IP literal was looked up %d times", l)
	}
	_, err := dialAddrs(context.Background(), "tcp", "nowhere.test:80", "")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("unknown name: %v; want the resolver's not-found error", err)
	}

	fakeNames(t, "empty.test") // a resolver that answers with no address and no error
	if _, err := dialAddrs(context.Background(), "tcp", "empty.test:80", ""); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("a name with no address: %v; want a not-found error", err)
	}
	if _, err := dialAddrs(context.Background(), "tcp", "no-port", ""); err == nil || !strings.Contains(err.Error(), "missing port") {
		t.Errorf("an address with no port: %v; want it refused", err)
	}

	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, refusedAddr(t))
	}
	fakeNames(t, "many.test", many...)
	_, err = dialAddrs(context.Background(), "tcp", "many.test:80", "")
	var de *dialError
	if !errors.As(err, &de) || len(de.addrs) != maxAddrs || len(de.errs) != maxAddrs {
		t.Fatalf("40 refusing addresses: %v; want %d tried", err, maxAddrs)
	}
}

func TestInterleaveFamilies(t *testing.T) {
	ip := func(s string) net.IPAddr { return net.IPAddr{IP: net.ParseIP(s)} }
	in := []net.IPAddr{ip("2001:db8::1"), ip("2001:db8::2"), ip("2001:db8::3"), ip("192.0.2.1"), ip("192.0.2.2")}
	want := "2001:db8::1 192.0.2.1 2001:db8::2 192.0.2.2 2001:db8::3"
	var got []string
	for _, a := range interleaveFamilies(in) {
		got = append(got, a.String())
	}
	if strings.Join(got, " ") != want {
		t.Errorf("interleaved %v; want %s", got, want)
	}
	in = []net.IPAddr{ip("192.0.2.1"), ip("2001:db8::1"), ip("192.0.2.2")}
	got = got[:0]
	for _, a := range interleaveFamilies(in) {
		got = append(got, a.String())
	}
	if strings.Join(got, " ") != "192.0.2.1 2001:db8::1 192.0.2.2" {
		t.Errorf("interleaved %v", got)
	}
}

// TestDialEmptyHost: "ws://:PORT" (the C API takes it: its host is not
// empty) is the local system, as net.Dialer has it, not a lookup of "".
func TestDialEmptyHost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	c, err := dialAddrs(context.Background(), "tcp", ":"+port, "")
	if err != nil {
		t.Fatalf("dial :%s: %v; net.Dialer connects to the local system", port, err)
	}
	c.Close()
}

// TestDialDuplicateAddresses: a name whose resolver lists an address more
// than once (both resolvers keep an /etc/hosts name's repeated lines; a
// DNS server may repeat a record) tries it once: a dead address repeated
// costs one attempt delay, not one per copy, and copies do not fill the
// cap ahead of a live address.
func TestDialDuplicateAddresses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := fakeNames(t, "trainer.test", deadListener(t), l.Addr().String())
	inner := lookupIPAddr
	lookupIPAddr = func(ctx context.Context, host string) ([]net.IPAddr, error) {
		ips, err := inner(ctx, host)
		if err != nil {
			return nil, err
		}
		var dup []net.IPAddr
		for i := 0; i < maxAddrs; i++ {
			dup = append(dup, ips[0]) // the dead address, maxAddrs times
		}
		return append(dup, ips[1:]...), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t0 := time.Now()
	c, err := dialAddrs(ctx, "tcp", "trainer.test:80", "")
	if err != nil {
		t.Fatalf("a dead address listed %d times, then a live one: %v", maxAddrs, err)
	}
	c.Close()
	if took := time.Since(t0); took > 3*attemptDelay {
		t.Errorf("connected after %v: the copies of the dead address were tried one by one", took)
	}
	if d := n.dials.Load(); d != 2 {
		t.Errorf("%d attempts; want 2, one per distinct address", d)
	}
}

// TestDialPrefersLastAddress: the address the last connection went to
// goes first when the name still has it, so a reconnect does not wait an
// attempt delay behind a dead address; one the name no longer has is
// ignored, and one past the cap still goes first.
func TestDialPrefersLastAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// A refusing address first, so that the next starts at once, and an
	// attempt delay no test machine can outlast: the count of attempts
	// started says which address went first.
	orig := attemptDelay
	attemptDelay = time.Minute
	defer func() { attemptDelay = orig }()
	refused, live := refusedAddr(t), l.Addr().String()
	for _, tc := range []struct {
		prefer string
		dials  int32 // attempts started
	}{
		{"", 2},               // the refusing one first, then the live one
		{"192.0.2.2:80", 1},   // the live one first
		{"192.0.2.9:80", 2},   // not the name's: ignored
		{"192.0.2.2:8080", 2}, // the live IP at another port: not this URL's address
	} {
		n := fakeNames(t, "trainer.test", refused, live)
		c, err := dialAddrs(context.Background(), "tcp", "trainer.test:80", tc.prefer)
		if err != nil {
			t.Fatalf("prefer %q: %v", tc.prefer, err)
		}
		c.Close()
		if got := n.dials.Load(); got != tc.dials {
			t.Errorf("prefer %q: %d attempts; want %d", tc.prefer, got, tc.dials)
		}
	}

	// Past the cap: 20 refusing addresses, then the live one, preferred.
	var many []string
	for i := 0; i < 20; i++ {
		many = append(many, refusedAddr(t))
	}
	n := fakeNames(t, "many.test", append(many, live)...)
	c, err := dialAddrs(context.Background(), "tcp", "many.test:80", "192.0.2.21:80")
	if err != nil {
		t.Fatalf("the preferred 21st address: %v", err)
	}
	c.Close()
	if got := n.dials.Load(); got != 1 {
		t.Errorf("the preferred 21st address: %d attempts; want 1", got)
	}
}
