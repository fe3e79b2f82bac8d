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
