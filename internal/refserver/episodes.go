package refserver

import (
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/plugrl/libplugrl/core/wire"
)

// episodeLog writes an episode log in the columns of plugrl-bridges' (step,
// slot, episode, return, length), plus conn, one line per episode a
// feedback ends, from what crossed the wire. It is not the bridge's log:
// there a slot is global across clients and length counts env steps. Here
// step is the ordinal, from 1, of the feedback (across all connections)
// that ended the episode; conn the connection, from 1; slot the env index
// on that connection; episode the ordinal, from 0, of the env's episodes on
// that connection; return the sum of the rewards fed back for the env over
// the episode; length info.episode.l when the client sent it, else the
// number of chunks fed back (up to H steps each, so not a step count).
//
// Envs are keyed by connection and env index: env indices are
// connection-scoped (SPEC 4.4), so two clients' env 0 are two envs, and a
// reconnecting client starts afresh, as the server's per-env state does.
// `plugrl ledger compare` matches rows by (slot, episode), so it compares
// one client's ledger with the log of a run in which that client was the
// only one and kept its one connection.
type episodeLog struct {
	mu        sync.Mutex
	w         io.Writer
	feedbacks int64
	envs      map[episodeKey]*episodeAcc
}

type episodeKey struct {
	conn int
	env  int64
}

type episodeAcc struct {
	sum            float64
	chunks, number int64
}

func newEpisodeLog(w io.Writer) *episodeLog {
	fmt.Fprintln(w, "step,slot,episode,return,length,conn")
	return &episodeLog{w: w, envs: map[episodeKey]*episodeAcc{}}
}

// feedback takes one decoded feedback message of connection conn.
func (l *episodeLog) feedback(conn int, fb *wire.FeedbackMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.feedbacks++
	for i, e := range fb.EnvIndices {
		k := episodeKey{conn, e}
		a := l.envs[k]
		if a == nil {
			a = &episodeAcc{}
			l.envs[k] = a
		}
		a.sum += fb.Rewards[i]
		a.chunks++
		if !fb.Terminated[i] && !fb.Truncated[i] {
			continue
		}
		length := a.chunks
		if ep := fb.Episode; ep != nil && ep.Mask[i] && ep.Length != nil {
			length = ep.Length[i]
		}
		fmt.Fprintf(l.w, "%d,%d,%d,%s,%d,%d\n", l.feedbacks, e, a.number, strconv.FormatFloat(a.sum, 'g', -1, 64), length, conn)
		a.number++
		a.sum, a.chunks = 0, 0
	}
}

// connClosed forgets a connection's envs: their episodes cannot go on.
func (l *episodeLog) connClosed(conn int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.envs {
		if k.conn == conn {
			delete(l.envs, k)
		}
	}
}
