package client_test

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// TestReuseKeyWithoutFeature: SPEC 10: "Without the feature the key is not
// sent". A request whose Reuse flags are all false (what CanReuse gives on a
// connection whose server does not offer reuse-feedback-obs) goes without
// the key; it used to carry it, and the reference server resynced every
// such infer.
func TestReuseKeyWithoutFeature(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 1, ActionDim: 1}) // no features
	c := dial(t, url, nil)
	w := newWorld()
	if c.ReuseOffered() {
		t.Fatal("server offers no feature")
	}
	reuse := []bool{c.CanReuse(0)} // false: not offered
	_, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: reuse})
	if err != nil {
		t.Errorf("infer with an all-false reuse on a server without the feature: %v (want it sent without the reuse key, or refused with nothing sent)", err)
	}
	time.Sleep(50 * time.Millisecond)
	st := s.Stats()
	for _, r := range st.Received {
		if r.Reuse != nil || r.Refused != "" {
			t.Errorf("server received %+v: the reuse key went to a server whose metadata does not list reuse-feedback-obs (SPEC 5.2, 10)", r)
		}
	}
	if st.Resyncs != 0 {
		t.Errorf("server resynced %d connection(s)", st.Resyncs)
	}
}

// rawServerLn runs handle on every accepted connection after the WebSocket
// upgrade; k is the connection's number from 1.
func rawServerLn(t *testing.T, handle func(k int, nc net.Conn)) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for k := 1; ; k++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func(k int) {
				defer nc.Close()
				if _, err := ws.Upgrade(nc); err != nil {
					return
				}
				handle(k, nc)
			}(k)
		}
	}()
	return ln, "ws://" + ln.Addr().String()
}

func metaBytes(md wire.Metadata) []byte {
	var m wire.Message
	_ = wire.EncodeMetadata(&m, &md)
	return m.AppendTo(nil)
}

// TestStopThenResetWhileIdle: the server ends the run between exchanges:
// close 1001 plugrl-server-stop, then the TCP connection is reset (a server
// process that exits). The client, idle meanwhile (its poller looks once a
// second), then infers: it reads the stop before it writes (SPEC 7.1: exit,
// no reconnect). It used to write first, fail on the reset, and reconnect
// as for a lost connection.
func TestStopThenResetWhileIdle(t *testing.T) {
	var conns atomic.Int64
	var ln net.Listener
	ln, url := rawServerLn(t, func(k int, nc net.Conn) {
		conns.Add(1)
		_ = wsutil.WriteServerBinary(nc, metaBytes(wire.Metadata{ActionHorizon: wire.Opt[int64]{Value: 1, Set: true}, ActionDim: wire.Opt[int64]{Value: 1, Set: true}}))
		for {
			msg, err := wsutil.ReadClientBinary(nc)
			if err != nil {
				return
			}
			in, err := wire.DecodeInfer(msg)
			if err != nil { // the feedback: the run ends here
				_ = ws.WriteFrame(nc, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, client.ReasonStop)))
				// The server process exits: the listener goes, and the
				// connection is reset.
				ln.Close()
				nc.(*net.TCPConn).SetLinger(0)
				return
			}
			var m wire.Message
			chunk := wire.Array{DType: wire.Float32, Shape: []int{1, len(in.EnvIndices), 1}, Data: make([]byte, 4*len(in.EnvIndices))}
			_ = wire.EncodeAction(&m, in.EnvIndices, &chunk)
			_ = wsutil.WriteServerBinary(nc, m.AppendTo(nil))
		}
	})
	c := dial(t, url, func(o *client.Options) {
		o.ReconnectTimeout = 2 * time.Second
		o.ReconnectBackoff = 50 * time.Millisecond
	})
	w := newWorld()
	if _, err := w.infer(c); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the stop and the reset arrive; the poller (once a second) has most likely not looked
	start := time.Now()
	_, err := w.infer(c)
	t.Logf("infer after %v: %v; connections %d", time.Since(start), err, conns.Load())
	if !errors.Is(err, client.ErrStopped) {
		t.Fatalf("infer after the server's stop: %v; want stopped (SPEC 7.1), not a reconnect (%d connections)", err, conns.Load())
	}
}

// TestReuseAcrossFeatureChange: features change across a reconnect (the
// new server does not list reuse-feedback-obs). A caller that fills
// reuse[i] = CanReuse(env), as plugrl.h describes, gets actions from the
// new server; the all-false key it used to send made every infer resync.
func TestReuseAcrossFeatureChange(t *testing.T) {
	s1 := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1, Features: []string{client.FeatureReuse}})
	url, err := s1.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, url, func(o *client.Options) { o.ReconnectBackoff = 20 * time.Millisecond; o.MaxReconnects = 20 })
	w := newWorld()
	infer := func() error {
		_, err := c.Infer(&wire.Infer{EnvIndices: w.env, StepIDs: w.steps, Obs: &w.obs, Reuse: []bool{c.CanReuse(0)}})
		return err
	}
	if err := infer(); err != nil {
		t.Fatal(err)
	}
	if err := w.feedback(c); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s2 := refserver.New(refserver.Config{Horizon: 1, ActionDim: 1}) // no features now
	if _, err := s2.Listen(url[len("ws://"):]); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var last error
	for i := 0; i < 4; i++ {
		if last = infer(); last == nil {
			break
		}
	}
	if last != nil {
		t.Fatalf("after reconnecting to a server without reuse-feedback-obs, every infer fails: %v (server resyncs: %d)", last, s2.Stats().Resyncs)
	}
}

// TestReconnectStormBacksOff: a server that sends metadata and then
// resyncs every connection at once. Each infer reports the reconnect
// (ErrReconnected), and the reconnects keep backing off, up to
// MaxBackoff, instead of starting again at ReconnectBackoff each time
// (114 connections a second here before, about 14 with the defaults).
func TestReconnectStormBacksOff(t *testing.T) {
	var conns atomic.Int64
	_, url := rawServerLn(t, func(k int, nc net.Conn) {
		conns.Add(1)
		var m wire.Message
		_ = wire.EncodeMetadata(&m, &wire.Metadata{})
		_ = wsutil.WriteServerBinary(nc, m.AppendTo(nil))
		_ = ws.WriteFrame(nc, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, client.ReasonResync)))
		time.Sleep(100 * time.Millisecond)
	})
	c := dial(t, url, func(o *client.Options) {
		o.ReconnectBackoff = 10 * time.Millisecond
		o.MaxBackoff = 320 * time.Millisecond
	})
	w := newWorld()
	start := time.Now()
	infers := 0
	for time.Since(start) < time.Second {
		if _, err := w.infer(c); !errors.Is(err, client.ErrReconnected) {
			t.Fatalf("infer %d against a server that resyncs every connection: %v; want ErrReconnected", infers, err)
		}
		infers++
	}
	// Backing off from 10 ms (waits of half to all of 10, 20, 40, ...,
	// 320 ms) allows about 10 in a second; starting again each time, 100.
	if n := conns.Load(); n > 25 {
		t.Fatalf("%d connections in a second (%d infers): the reconnects did not back off", n, infers)
	}
}
