package refserver_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/plugrl/libplugrl/internal/ledgertool"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// lockedBuffer is a bytes.Buffer the server's goroutines may write to while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEpisodeLogPerConnection: env indices are connection-scoped (SPEC
// 4.4), and so are the episode log's episodes. Two clients each using env
// 0 used to be summed into one episode.
func TestEpisodeLogPerConnection(t *testing.T) {
	var log lockedBuffer
	s, url := start(t, refserver.Config{EpisodeLog: &log})
	a := dial(t, url)
	b := dial(t, url)
	a.infer([]int64{0}, nil)
	a.feedback([]int64{0}, nil) // reward 0.5, the episode goes on
	// The log's step counts feedbacks in the order the server takes them,
	// and each connection is read by a goroutine of its own: let a's be
	// taken before b's.
	waitFor(t, s, "a's feedback", func(st refserver.Stats) bool { return st.Exchanges == 1 })
	b.infer([]int64{0}, nil)
	b.feedback([]int64{0}, []bool{true}) // reward 0.5, done after 1 chunk
	waitFor(t, s, "b's feedback", func(st refserver.Stats) bool { return st.Exchanges == 2 })
	a.infer([]int64{0}, nil)
	a.feedback([]int64{0}, []bool{true}) // done after 2 chunks, return 1
	waitFor(t, s, "3 exchanges", func(st refserver.Stats) bool { return st.Exchanges == 3 })
	want := "step,slot,episode,return,length,conn\n2,0,0,0.5,1,2\n3,0,0,1,2,1\n"
	if got := log.String(); got != want {
		t.Fatalf("episode log:\n%s\nwant:\n%s", got, want)
	}
	rows, err := ledgertool.ReadEpisodes(strings.NewReader(log.String()))
	if err != nil || len(rows) != 2 {
		t.Fatalf("plugrl ledger cannot read the log: %v, %d rows", err, len(rows))
	}
}

// TestEpisodeLogAcrossReconnect: a client's ledger counts an env's
// episodes, and sums its rewards, across its reconnects, and so does the
// log: an episode begun on one connection and ended on the next is one
// episode, which plugrl ledger compare matches (a review found 33
// differences in a run with a resync and a drop when the log started each
// connection afresh).
func TestEpisodeLogAcrossReconnect(t *testing.T) {
	var log lockedBuffer
	s, url := start(t, refserver.Config{EpisodeLog: &log})
	a := dial(t, url)
	a.infer([]int64{0, 1}, nil)
	a.feedback([]int64{0, 1}, []bool{true, false}) // env 0: episode 0 ends; env 1 goes on
	waitFor(t, s, "a's feedback", func(st refserver.Stats) bool { return st.Exchanges == 1 })
	a.nc.Close()
	waitFor(t, s, "a's end", func(st refserver.Stats) bool { return st.Open == 0 })
	b := dial(t, url)
	b.infer([]int64{0, 1}, nil)
	b.feedback([]int64{0, 1}, []bool{true, true})
	waitFor(t, s, "b's feedback", func(st refserver.Stats) bool { return st.Exchanges == 2 })
	want := "step,slot,episode,return,length,conn\n1,0,0,0.5,1,1\n2,0,1,0.5,1,2\n2,1,0,3,2,2\n" // env 1: 1.5 a chunk
	if got := log.String(); got != want {
		t.Fatalf("episode log:\n%s\nwant:\n%s", got, want)
	}
	server, err := ledgertool.ReadEpisodes(strings.NewReader(log.String()))
	if err != nil {
		t.Fatal(err)
	}
	client := []ledgertool.EpisodeRow{{Slot: 0, Episode: 0, Return: 0.5, Length: 1}, {Slot: 0, Episode: 1, Return: 0.5, Length: 1}, {Slot: 1, Episode: 0, Return: 3, Length: 2}}
	if d := ledgertool.CompareEpisodes(client, server); len(d) != 0 {
		t.Fatalf("compare: %+v", d)
	}
}

// TestEpisodeLogHandOverOnlyToLaterConn: an ended connection's env goes on
// only in a connection opened after it ended (its client reconnecting),
// never in one already open (another client, SPEC 4.4), and not at all
// when two ended connections left the same index.
func TestEpisodeLogHandOverOnlyToLaterConn(t *testing.T) {
	var log lockedBuffer
	s, url := start(t, refserver.Config{EpisodeLog: &log})
	a, b := dial(t, url), dial(t, url)
	a.infer([]int64{1}, nil)
	a.feedback([]int64{1}, nil) // 0.5, not ended
	b.infer([]int64{1}, nil)
	waitFor(t, s, "a's feedback", func(st refserver.Stats) bool { return st.Exchanges == 1 })
	a.nc.Close()
	waitFor(t, s, "a's end", func(st refserver.Stats) bool { return st.Open == 1 })
	b.feedback([]int64{1}, []bool{true}) // b's own first episode: 0.5 over one chunk
	waitFor(t, s, "b's feedback", func(st refserver.Stats) bool { return st.Exchanges == 2 })
	want := "step,slot,episode,return,length,conn\n2,1,0,0.5,1,2\n"
	if got := log.String(); got != want {
		t.Fatalf("a connection open before another ended took over its env:\n%s\nwant:\n%s", got, want)
	}

	// a and b both left env 1 (a: 0.5 over one chunk; b: nothing after
	// its episode ended, so b's counts are fresh); c starts it afresh.
	b.infer([]int64{1}, nil)
	b.feedback([]int64{1}, nil)
	waitFor(t, s, "b's second feedback", func(st refserver.Stats) bool { return st.Exchanges == 3 })
	b.nc.Close()
	waitFor(t, s, "b's end", func(st refserver.Stats) bool { return st.Open == 0 })
	c := dial(t, url)
	c.infer([]int64{1}, nil)
	c.feedback([]int64{1}, []bool{true})
	waitFor(t, s, "c's feedback", func(st refserver.Stats) bool { return st.Exchanges == 4 })
	want += "4,1,0,0.5,1,3\n"
	if got := log.String(); got != want {
		t.Fatalf("an env two ended connections left went on in a third:\n%s\nwant:\n%s", got, want)
	}
}

// TestEpisodeLogReconnectBeforeCloseEnds: a client that reconnects as soon
// as it reads the server's close frame, before the closing handshake on the
// old connection has ended, is still the same client reconnecting: its env
// goes on in the new connection, as its ledger says. The log used to hand
// an env over only once the old connection's goroutine had finished its
// closing handshake, so a reconnect quicker than that (here, one that
// answers the old close after the new connection's first feedback) started
// the env afresh, and plugrl ledger compare found the episode differing.
func TestEpisodeLogReconnectBeforeCloseEnds(t *testing.T) {
	var log lockedBuffer
	s, url := start(t, refserver.Config{EpisodeLog: &log, Faults: refserver.Faults{Closes: []refserver.CloseFault{
		{Exchange: 1, When: refserver.AfterFeedback, Code: 1001, Reason: refserver.ResyncReason},
	}}})
	a := dial(t, url)
	a.infer([]int64{0}, nil)
	a.feedback([]int64{0}, nil) // 0.5, the episode goes on
	a.expectClose(1001, refserver.ResyncReason)
	b := dial(t, url) // a's close not answered yet
	b.infer([]int64{0}, nil)
	b.feedback([]int64{0}, []bool{true}) // 0.5 more: the episode's return is 1, over 2 chunks
	waitFor(t, s, "b's feedback", func(st refserver.Stats) bool { return st.Exchanges == 2 })
	a.nc.Close()
	want := "step,slot,episode,return,length,conn\n2,0,0,1,2,2\n"
	if got := log.String(); got != want {
		t.Fatalf("episode log:\n%s\nwant:\n%s", got, want)
	}
}
