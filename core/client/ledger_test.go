package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/internal/hostile"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// walkLedger reads the ledger at path, record after record, and calls fn
// with each (and the reader, for a send's message).
func walkLedger(t *testing.T, path string, fn func(r *ledger.Reader, rec *ledger.Record)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ledger.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(r, rec)
	}
}

// ledgerKinds lists the kinds of the records of the ledger at path.
func ledgerKinds(t *testing.T, path string) []string {
	t.Helper()
	var kinds []string
	walkLedger(t, path, func(_ *ledger.Reader, rec *ledger.Record) { kinds = append(kinds, rec.Kind) })
	return kinds
}

// ledgerCloses lists the close records of the ledger at path.
func ledgerCloses(t *testing.T, path string) []*ledger.Record {
	t.Helper()
	var closes []*ledger.Record
	walkLedger(t, path, func(_ *ledger.Reader, rec *ledger.Record) {
		if rec.Kind == ledger.KindClose {
			closes = append(closes, rec)
		}
	})
	return closes
}

// TestLedgerRecordsAnInterruptedConnect: a Connect ended by Interrupt is
// an interrupt record, as every other call's is (it was only a close).
func TestLedgerRecordsAnInterruptedConnect(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.NoMetadata})
	path := filepath.Join(t.TempDir(), "l")
	c, err := client.New(client.Options{URL: s.URL(), LedgerPath: path, MetadataTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, c.Interrupt)
	if err := c.Connect(context.Background()); client.KindOf(err) != client.KindInterrupted {
		t.Fatalf("Connect: %v; want it interrupted", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	kinds := ledgerKinds(t, path)
	if i := slices.Index(kinds, ledger.KindInterrupt); i < 0 || i > slices.Index(kinds, ledger.KindClose) {
		t.Fatalf("records %v; want an interrupt before the close", kinds)
	}
}

// resetProxy forwards TCP to a server, and can reset the client's side of
// the current connection (an RST, as a crashed middlebox sends).
type resetProxy struct {
	ln  net.Listener
	mu  sync.Mutex
	cur *net.TCPConn
}

func newResetProxy(t *testing.T, target string) *resetProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.cur = c.(*net.TCPConn)
			p.mu.Unlock()
			go func() { io.Copy(c, s); c.Close() }()
			go func() { io.Copy(s, c); s.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *resetProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur.SetLinger(0)
	p.cur.Close()
}

// TestHeldFeedbackNeverSent: a feedback held to leave with the next infer
// (a tight loop) that never leaves, because the connection is reset first,
// is dropped like any feedback owed on a lost connection: the ledger's
// close names its env and says its last send never left (unsent), and the
// stats count its row, and not the feedback as sent. It was recorded as
// TestInterruptSendsHeldFeedback: an interrupt between calls (a program's
// SIGINT handler, which may exit next) sends the feedback held for the next
// infer at once, as plugrl.h says, instead of leaving it to the timer;
// Stats.Feedbacks counts it when it leaves, never before, and never takes
// one back.
func TestInterruptSendsHeldFeedback(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Policy: refserver.ZeroPolicy{}})
	c := dial(t, url, nil)
	w := newWorld()
	held := false
	var sent, fed uint64
	for range 200 {
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		sent, fed = c.Stats().BytesSent, c.Stats().Feedbacks
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
		if held = c.Stats().BytesSent == sent; held {
			break
		}
	}
	if !held {
		t.Skip("no feedback was held: this machine was too slow for a tight loop")
	}
	if st := c.Stats(); st.BytesSent == sent && st.Feedbacks != fed {
		t.Fatalf("Feedbacks = %d with the feedback still held; want %d (counted when it leaves)", st.Feedbacks, fed)
	}
	c.Interrupt()
	if st := c.Stats(); st.BytesSent == sent || st.Feedbacks != fed+1 {
		t.Fatalf("after Interrupt: %d bytes sent (%d before), Feedbacks %d; want the held feedback gone and counted (%d)",
			st.BytesSent, sent, st.Feedbacks, fed+1)
	}
	want := int(fed + 1)
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Exchanges < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := s.Stats().Exchanges; got != want {
		t.Fatalf("the server completed %d exchanges (one per feedback); want %d", got, want)
	}
	if _, err := w.infer(c); !errors.Is(err, client.ErrInterrupted) {
		t.Fatalf("the infer after the interrupt: %v; want ErrInterrupted", err)
	}
}

// sent, and the close named no env.
func TestHeldFeedbackNeverSent(t *testing.T) {
	s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Policy: refserver.ZeroPolicy{}})
	p := newResetProxy(t, strings.TrimPrefix(url, "ws://"))
	path := filepath.Join(t.TempDir(), "l")
	c := dial(t, "ws://"+p.ln.Addr().String(), func(o *client.Options) { o.LedgerPath = path })
	w := newWorld()
	held := false
	var before uint64
	for range 200 {
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		before = c.Stats().BytesSent
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
		if held = c.Stats().BytesSent == before; held {
			break
		}
	}
	if !held {
		t.Skip("no feedback was held: this machine was too slow for a tight loop")
	}
	p.reset()
	if c.Stats().BytesSent != before {
		t.Skip("the held feedback left (the timer's tick) before the reset: this machine was too slow")
	}
	time.Sleep(2 * time.Millisecond) // the RST arrives; the sweeper's tick is 10 ms away
	if _, err := w.infer(c); !errors.Is(err, client.ErrReconnected) {
		t.Logf("infer after the reset: %v", err)
	}
	st := c.Stats()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	serverFeedbacks := 0
	for _, r := range s.Stats().Received {
		if r.Type == "feedback" && r.Refused == "" {
			serverFeedbacks++
		}
	}
	recorded, unsent := 0, 0
	var firstClose *ledger.Record
	walkLedger(t, path, func(r *ledger.Reader, rec *ledger.Record) {
		switch rec.Kind {
		case ledger.KindSend:
			if m, err := r.Message(rec); err == nil && strings.Contains(string(m), "feedback") {
				recorded++
			}
		case ledger.KindClose:
			if firstClose == nil {
				firstClose = rec
			}
			unsent += int(rec.Unsent)
		}
	})
	if firstClose == nil || firstClose.Unsent != 1 || !slices.Contains(firstClose.Dropped, 0) {
		t.Fatalf("the reset connection's close record: %+v; want unsent 1 and env 0 dropped", firstClose)
	}
	if recorded-unsent != serverFeedbacks {
		t.Fatalf("the ledger records %d feedbacks sent (%d of them unsent); the server took %d", recorded, unsent, serverFeedbacks)
	}
	if st.FeedbackRowsDropped < 1 {
		t.Fatalf("FeedbackRowsDropped = %d; want the held feedback's row", st.FeedbackRowsDropped)
	}
	// Counted when held, it is taken back when it never left: it was in
	// Feedbacks and in FeedbackRowsDropped both.
	if st.Feedbacks != uint64(serverFeedbacks) {
		t.Fatalf("Stats.Feedbacks = %d; the server took %d feedbacks", st.Feedbacks, serverFeedbacks)
	}
}

// TestLedgerRedactsURLPassword: a URL with credentials in it (a password,
// or a token as the user name) is refused, as nothing would send them to
// the server (it once connected, and recorded the URL with its password
// replaced but a user name whole); neither the error nor the ledger holds
// the secret. The API key never is recorded.
func TestLedgerRedactsURLPassword(t *testing.T) {
	_, url := serve(t, refserver.Config{Horizon: 1, ActionDim: 1})
	for _, cred := range []string{"robot:s3cret@", "s3cret@"} {
		path := filepath.Join(t.TempDir(), "l")
		c, err := client.New(client.Options{URL: strings.Replace(url, "ws://", "ws://"+cred, 1), LedgerPath: path, ConnectTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Connect(context.Background())
		if !errors.Is(err, conn.ErrURLCredentials) || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%s: Connect: %v; want ErrURLCredentials, without the secret", cred, err)
		}
		c.Close()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		walkLedger(t, path, func(_ *ledger.Reader, rec *ledger.Record) {
			if rec.Kind == ledger.KindConnect {
				t.Fatalf("%s: a connect record: %+v", cred, rec)
			}
			if strings.Contains(rec.Err+rec.URL+rec.Reason, "s3cret") {
				t.Fatalf("a %s record holds the secret: %+v", rec.Kind, rec)
			}
		})
		if strings.Contains(string(raw), "s3cret") {
			t.Fatal("the secret is in the file")
		}
	}
}

// TestPasswordNotInConnectErrors: a connect that fails does not put the
// URL's password in its error, which the ledger's close record, the log
// and plugrl_errmsg carry; also for a password url.Parse reads as a port
// and a fragment.
func TestPasswordNotInConnectErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, u := range []string{"ws://robot:s3cret@" + addr, "ws://robot:2024#s3cret@" + addr} {
		path := filepath.Join(t.TempDir(), "l")
		c, err := client.New(client.Options{URL: u, LedgerPath: path, ConnectTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Connect(context.Background())
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "xxxxx@") {
			t.Fatalf("Connect(%q): %v; want an error naming the URL without its password", u, err)
		}
		c.Close()
		walkLedger(t, path, func(_ *ledger.Reader, rec *ledger.Record) {
			if strings.Contains(rec.Err+rec.URL+rec.Reason, "s3cret") {
				t.Fatalf("a %s record holds the password: %+v", rec.Kind, rec)
			}
		})
	}
}

// TestLedgerLocalCloseCode: a connection the client ends for a server's
// violation records the close code the client sent (1009 for a message
// over the cap), not 0.
func TestLedgerLocalCloseCode(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.HugeLength})
	path := filepath.Join(t.TempDir(), "l")
	c, err := client.Dial(context.Background(), client.Options{URL: s.URL(), LedgerPath: path, MaxReconnects: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	if _, err := w.infer(c); client.KindOf(err) != client.KindProtocol {
		t.Fatalf("infer: %v; want a protocol error", err)
	}
	c.Close()
	if closes := ledgerCloses(t, path); len(closes) != 1 || closes[0].By != "local" || closes[0].Code != 1009 {
		t.Fatalf("close records %+v; want one, local, 1009", closes)
	}
}

// TestLedgerCloseRecordsWhoEnded: Close records the end the connection
// really had. A server's close frame that came before Close (here, its
// stop while the client holds an action) is recorded by the server, with
// its code and reason; an ordinary Close on a live connection is the
// client's 1000.
func TestLedgerCloseRecordsWhoEnded(t *testing.T) {
	stop := refserver.Faults{Closes: []refserver.CloseFault{{Exchange: 1, When: refserver.AfterAction, Code: 1001, Reason: client.ReasonStop}}}
	for _, tc := range []struct {
		name   string
		faults refserver.Faults
		by     string
		code   int64
		reason string
	}{
		{"server stopped first", stop, "server", 1001, client.ReasonStop},
		{"live connection", refserver.Faults{}, "client", 1000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1, Faults: tc.faults})
			path := filepath.Join(t.TempDir(), "l")
			c := dial(t, url, func(o *client.Options) { o.LedgerPath = path })
			w := newWorld()
			if _, err := w.infer(c); err != nil {
				t.Fatal(err)
			}
			if tc.by == "server" { // its close frame is in the client's socket by then
				waitStats(s, func(st refserver.Stats) bool { return len(st.Closes) == 1 })
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			closes := ledgerCloses(t, path)
			if len(closes) != 1 {
				t.Fatalf("%d close records, want 1", len(closes))
			}
			r := closes[0]
			if r.By != tc.by || r.Code != tc.code || r.Reason != tc.reason || !slices.Equal(r.Dropped, []int64{0}) {
				t.Fatalf("close recorded by %q code %d reason %q dropped %v; want by %q code %d reason %q dropped [0]", r.By, r.Code, r.Reason, r.Dropped, tc.by, tc.code, tc.reason)
			}
		})
	}
}

// TestLedgerAbandonRecordsWhy: the close record of a connection dropped
// by AbandonBecause gives its reason (the C API's memory fault names the
// address), and Abandon's gives its own; both drop the action owed.
func TestLedgerAbandonRecordsWhy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		abandon func(*client.Client)
		want    string
	}{
		{"AbandonBecause", func(c *client.Client) { c.AbandonBecause(errors.New("memory the caller gave faulted at 0x7f00")) }, "memory the caller gave faulted at 0x7f00"},
		{"Abandon", (*client.Client).Abandon, "the caller abandoned the action"},
		{"AbandonBecause(nil)", func(c *client.Client) { c.AbandonBecause(nil) }, "the caller abandoned the action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := serve(t, refserver.Config{Horizon: 2, ActionDim: 1})
			path := filepath.Join(t.TempDir(), "l")
			c := dial(t, url, func(o *client.Options) { o.LedgerPath = path })
			w := newWorld()
			if _, err := w.infer(c); err != nil {
				t.Fatal(err)
			}
			tc.abandon(c)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			closes := ledgerCloses(t, path)
			if len(closes) != 1 {
				t.Fatalf("%d close records, want 1", len(closes))
			}
			if r := closes[0]; r.By != "local" || !strings.Contains(r.Err, tc.want) || !slices.Equal(r.Dropped, []int64{0}) {
				t.Fatalf("close recorded by %q error %q dropped %v; want local, an error with %q, dropped [0]", r.By, r.Err, r.Dropped, tc.want)
			}
		})
	}
}
