package refserver_test

// Stop and Close: what every connection sees, and that one client cannot
// hold up the others or the server.

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// within fails the test unless f returns within d: a liveness bound, far
// above what f takes when it works.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v", what, d)
	}
}

// expectMetadataFirst reads the first message on a fresh connection and
// fails unless it is the metadata (SPEC 8.2).
func expectMetadataFirst(t *testing.T, c *client) {
	t.Helper()
	op, b, err := c.recv()
	if err != nil || op != ws.OpBinary {
		t.Fatalf("first frame: op %v, %v; want the metadata before anything else (SPEC 8.2)", op, err)
	}
	if _, err := wire.DecodeMetadata(b); err != nil {
		t.Fatal(err)
	}
}

// TestStopBeforeMetadata: Stop during a connection's MetadataDelay still
// sends the metadata first, then the stop, and without waiting out the
// delay. Stop used to write the close frame straight away.
func TestStopBeforeMetadata(t *testing.T) {
	s, url := start(t, refserver.Config{Faults: refserver.Faults{MetadataDelay: time.Minute}})
	c := dialRaw(t, url)
	waitFor(t, s, "the handshake", func(st refserver.Stats) bool { return st.Open == 1 })
	within(t, 10*time.Second, "Stop", s.Stop)
	expectMetadataFirst(t, c)
	c.expectClose(1001, refserver.StopReason)
}

// TestCloseBeforeMetadata: the same for Close, which also must not wait
// out the delay.
func TestCloseBeforeMetadata(t *testing.T) {
	s, url := start(t, refserver.Config{Faults: refserver.Faults{MetadataDelay: time.Minute}})
	c := dialRaw(t, url)
	waitFor(t, s, "the handshake", func(st refserver.Stats) bool { return st.Open == 1 })
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	expectMetadataFirst(t, c)
	c.expectClose(1001, "")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited out the MetadataDelay")
	}
}

// TestCloseCutsHandshake: Close does not wait for a client that opened a
// TCP connection and never finished its handshake (its deadline is 10 s).
func TestCloseCutsHandshake(t *testing.T) {
	s, url := start(t, refserver.Config{})
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "ws://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("GET / HTTP/1.1\r\n")); err != nil { // and no more
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the server accept it
	within(t, 5*time.Second, "Close, with a handshake pending", func() { s.Close() })
}

// actSignal is ZeroPolicy that says when it is first asked for an action.
type actSignal struct {
	refserver.ZeroPolicy
	once  sync.Once
	acted chan struct{}
}

func (p *actSignal) Act(conn int, ids []int64, o *wire.Observation, out *wire.Array) error {
	p.once.Do(func() { close(p.acted) })
	return nil
}

// TestStopWithNonReader: a client that sends a large infer and never reads
// the action holds its connection's write lock for up to FeedbackTimeout.
// Stop must still reach the other clients at once, return, and cut the
// non-reader; Close must then return. Stop used to close connections one
// after another, each waiting for that lock.
func TestStopWithNonReader(t *testing.T) {
	pol := &actSignal{acted: make(chan struct{})}
	s, url := start(t, refserver.Config{FeedbackTimeout: time.Hour, Policy: pol, Logf: func(string, ...any) {}})
	bad := dial(t, url)  // conn 1: closed first, when one at a time
	good := dial(t, url) // conn 2
	const n = 100000     // a 22 MB action: more than the socket buffers hold
	envs := make([]int64, n)
	for i := range envs {
		envs[i] = int64(i)
	}
	if err := wire.EncodeInfer(&bad.msg, &wire.Infer{EnvIndices: envs, StepIDs: make([]int64, n), Obs: &wire.Observation{}}); err != nil {
		t.Fatal(err)
	}
	bad.send(bad.msg.AppendTo(nil))
	<-pol.acted
	time.Sleep(300 * time.Millisecond) // for the action's write to fill the buffers and block

	stopped := make(chan struct{})
	go func() {
		s.Stop()
		close(stopped)
	}()
	_ = good.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	good.expectClose(1001, refserver.StopReason)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop has not returned: it is waiting for the client that does not read")
	}
	within(t, 10*time.Second, "Close", func() { s.Close() })
	var cut *refserver.Closed
	for _, cl := range s.Stats().Closes {
		if cl.Conn == 1 {
			cut = &cl
		}
	}
	if cut == nil || cut.Code != 0 || !strings.Contains(cut.Detail, "connection cut") {
		t.Fatalf("the non-reader's close: %+v", cut)
	}
	// The non-reader's connection ends: whatever it reads, it comes to an
	// end of stream, not a hang.
	_ = bad.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var err error
	for err == nil {
		_, _, err = bad.recv()
	}
	var ne net.Error
	var ce wsutil.ClosedError
	if errors.As(err, &ne) && ne.Timeout() && !errors.As(err, &ce) {
		t.Fatalf("the non-reader's connection was not ended: %v", err)
	}
}
