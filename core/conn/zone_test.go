package conn

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// TestIPv6ZoneURL: a URL's IPv6 literal may carry a zone (RFC 6874,
// ws://[fe80::1%25eth0]:8000: a robot cabled straight to its trainer
// reaches it at a link-local address, and plugrl.h shows how to write
// one). The zone names an interface of this machine, not part of the
// server's address as the server knows it. Over wss:// the certificate
// was checked against "[::1%lo]", which is no IP address, so a certificate
// for the address never verified ("certificate is not valid for any
// names, but wanted to match [::1%lo]"), leaving tls_insecure as the only
// way to connect; and the Host field carried the zone, which RFC 6874 has
// a client leave out (net/http does). Here on ::1 with the loopback
// interface's zone: the certificate is verified against the address, no
// server name is sent (an IP is none), and the Host field has no zone. A
// certificate for another address is still refused.
func TestIPv6ZoneURL(t *testing.T) {
	lo := loopbackName(t)
	ca := newTestCA(t)
	good := ca.leaf(t, nil, net.ParseIP("::1"))
	addr, seen := upgradeServer(t, "tcp6", "[::1]:0", &tls.Config{Certificates: []tls.Certificate{good}})
	_, port, _ := net.SplitHostPort(addr)
	for _, cfg := range []*tls.Config{{RootCAs: ca.pool}, {RootCAs: ca.pool, MinVersion: tls.VersionTLS13}} {
		c, err := Dial(context.Background(), Options{URL: "wss://[::1%25" + lo + "]:" + port + "/p", TLS: cfg, DialTimeout: 2 * time.Second})
		s := <-seen
		if err != nil {
			t.Fatalf("wss with a zone: %v", err)
		}
		c.Abort()
		if s.sni != "" || s.req == nil || s.req.Host != "[::1]:"+port {
			t.Errorf("wss with a zone: server name %q, Host %q; want none and [::1]:%s", s.sni, s.req.Host, port)
		}
	}

	other := ca.leaf(t, nil, net.ParseIP("::2"))
	addr, seen = upgradeServer(t, "tcp6", "[::1]:0", &tls.Config{Certificates: []tls.Certificate{other}})
	_, port, _ = net.SplitHostPort(addr)
	if c, err := Dial(context.Background(), Options{URL: "wss://[::1%25" + lo + "]:" + port, TLS: &tls.Config{RootCAs: ca.pool}, DialTimeout: 2 * time.Second}); err == nil {
		c.Abort()
		t.Error("a certificate for ::2 was taken for ::1")
	}
	<-seen

	addr, seen = upgradeServer(t, "tcp6", "[::1]:0", nil)
	_, port, _ = net.SplitHostPort(addr)
	c, err := Dial(context.Background(), Options{URL: "ws://[::1%25" + lo + "]:" + port + "/q?a=1", DialTimeout: 2 * time.Second})
	s := <-seen
	if err != nil {
		t.Fatalf("ws with a zone: %v", err)
	}
	c.Abort()
	if s.req.Host != "[::1]:"+port || s.req.RequestURI != "/q?a=1" {
		t.Errorf("ws with a zone: Host %q, request %q", s.req.Host, s.req.RequestURI)
	}
}

// loopbackName is the name of the loopback interface (lo on Linux).
func loopbackName(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name
		}
	}
	t.Skip("no loopback interface")
	return ""
}
