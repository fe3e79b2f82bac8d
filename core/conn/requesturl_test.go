package conn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRequestTarget: the request line carries the URL's path and query
// as one request target. A query's space ended it early ("GET /p?task=
// pick up HTTP/1.1", which a server refuses as malformed), and other bytes
// a URI's query cannot hold went out raw: they are percent-encoded now,
// and an escape written in the URL is kept. A fragment was sent as part
// of the path ("/p#x" as "/p%23x", another resource): refused, as RFC
// 6455 3 forbids one, before anything is sent.
func TestRequestTarget(t *testing.T) {
	addr, seen := upgradeServer(t, "tcp4", "127.0.0.1:0", nil)
	for in, want := range map[string]string{
		"/p?task=pick up&x=1":        "/p?task=pick%20up&x=1",
		"/p?a=%22b%22&c=<d>|{e}^`\\": "/p?a=%22b%22&c=%3Cd%3E%7C%7Be%7D%5E%60%5C",
		"/p?name=trainer é":          "/p?name=trainer%20%C3%A9",
		"/a%20b/c?x=1&y=a%20b;z:@/?": "/a%20b/c?x=1&y=a%20b;z:@/?",
		"/p a":                       "/p%20a",
		"/p?done=100%":               "/p?done=100%25",
		"/p?a=%zz&b=%4&c=%4a":        "/p?a=%25zz&b=%254&c=%4a",
	} {
		c, err := Dial(context.Background(), Options{URL: "ws://" + addr + in, DialTimeout: 2 * time.Second})
		s := <-seen
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		c.Abort()
		if s.req == nil || s.req.RequestURI != want {
			got := "(no request)"
			if s.req != nil {
				got = s.req.RequestURI
			}
			t.Errorf("%q sent as %q; want %q", in, got, want)
		}
	}
	for _, in := range []string{"/p#frag", "/p?q=1#", "#x"} {
		c, err := Dial(context.Background(), Options{URL: "ws://" + addr + in, DialTimeout: time.Second})
		if err == nil {
			c.Abort()
			<-seen
			t.Errorf("%q: connected; want it refused", in)
		} else if !errors.Is(err, ErrURLFragment) || !strings.Contains(err.Error(), "%23") {
			t.Errorf("%q: %v; want ErrURLFragment", in, err)
		}
	}
}
