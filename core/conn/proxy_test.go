package conn

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestProxyEnvironmentIgnored pins what plugrl.h says ("Proxies"): the
// client connects to the URL's host itself, whatever HTTP_PROXY,
// HTTPS_PROXY, ALL_PROXY or NO_PROXY say (a robot's environment often
// has a proxy set for its package manager). A proxy named there sees
// nothing, over ws:// and wss:// alike.
func TestProxyEnvironmentIgnored(t *testing.T) {
	proxy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	reached := make(chan struct{}, 4)
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			reached <- struct{}{}
			c.Close()
		}
	}()
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(v, "http://"+proxy.Addr().String())
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	addr, seen := upgradeServer(t, "tcp4", "127.0.0.1:0", nil)
	c, err := Dial(context.Background(), Options{URL: "ws://" + addr, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Abort()
	<-seen
	select {
	case <-reached:
		t.Error("the proxy in the environment was connected to")
	case <-time.After(50 * time.Millisecond):
	}
}
