package client_test

// A Go user's use of the API from other goroutines, from a second review
// (2026-12-04): each case failed before its fix.

import (
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/internal/hostile"
)

// TestCallDuringCloseIsClosed: a call that begins while Close, on another
// goroutine, waits for the server's close frame got KindBusy ("a client
// serves one thread at a time"), which a loop that stops at KindClosed
// took for a bug of its own.
func TestCallDuringCloseIsClosed(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.CloseNoReply})
	c, err := hostileDial(t, s.URL(), func(o *client.Options) { o.CloseTimeout = time.Second })
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	time.Sleep(200 * time.Millisecond) // Close is waiting for the close frame that never comes
	w := newWorld()
	_, err = w.infer(c)
	if client.KindOf(err) != client.KindClosed {
		t.Errorf("Infer while another goroutine closes: %v; want KindClosed", err)
	}
	if err := w.feedback(c); client.KindOf(err) != client.KindClosed {
		t.Errorf("Feedback while another goroutine closes: %v; want KindClosed", err)
	}
	<-closed
}
