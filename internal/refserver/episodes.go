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
// that ended the episode; conn the connection, from 1; slot the env index;
// episode the ordinal, from 0, of the slot's episodes; return the sum of
// the rewards fed back for the env over the episode; length info.episode.l
// when the client sent it, else the number of chunks fed back (up to H
// steps each, so not a step count).
//
// Env indices are connection-scoped (SPEC 4.4): clients connected at once
// each have their own env 0, and each connection keeps its envs' episodes
// apart. A connection that ends (its close frame sent or received, or the
// connection lost, not its closing handshake over) leaves its envs' counts
// to the next connection opened after it that feeds the same index back, which the
// server takes for the same client reconnecting: a client's ledger counts
// an env's episodes, and sums its rewards, across its reconnects, and
// `plugrl ledger compare` matches one client's ledger with this log by
// (slot, episode). A connection already open when another ended starts
// the index afresh, and so does every connection after two ended
// connections both left the index (whose counts go on is then unknown).
// The log is one client's record: with several clients at once it holds
// each slot's episodes more than once (compare says so), and a client run
// after another against the same server continues its counts.
type episodeLog struct {
	mu        sync.Mutex
	w         io.Writer
	feedbacks int64
	live      map[int]map[int64]*episodeAcc // by connection, then env index
	left      map[int64]leftEnv             // ended connections' envs, by env index
}

// leftEnv is an env an ended connection left: its counts go on in the
// first connection numbered after `after` that feeds its index back.
// ambiguous: two ended connections left the index, so it starts afresh.
type leftEnv struct {
	acc       *episodeAcc
	after     int
	ambiguous bool
}

type episodeAcc struct {
	sum            float64
	chunks, number int64
}

func newEpisodeLog(w io.Writer) *episodeLog {
	fmt.Fprintln(w, "step,slot,episode,return,length,conn")
	return &episodeLog{w: w, live: map[int]map[int64]*episodeAcc{}, left: map[int64]leftEnv{}}
}

// feedback takes one decoded feedback message of connection conn.
func (l *episodeLog) feedback(conn int, fb *wire.FeedbackMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.feedbacks++
	envs := l.live[conn]
	if envs == nil {
		envs = map[int64]*episodeAcc{}
		l.live[conn] = envs
	}
	for i, e := range fb.EnvIndices {
		a := envs[e]
		if a == nil {
			if prev, ok := l.left[e]; ok && conn > prev.after {
				delete(l.left, e)
				a = prev.acc // the env of an ended connection goes on here; nil if ambiguous
			}
			if a == nil {
				a = &episodeAcc{}
			}
			envs[e] = a
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

// connClosed leaves a connection's envs to the next connection numbered
// after last (the highest number given so far) that feeds their indices
// back (see episodeLog). Its cost is that connection's envs.
func (l *episodeLog) connClosed(conn, last int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for e, a := range l.live[conn] {
		if prev, ok := l.left[e]; ok {
			l.left[e] = leftEnv{after: max(prev.after, last), ambiguous: true}
		} else {
			l.left[e] = leftEnv{acc: a, after: last}
		}
	}
	delete(l.live, conn)
}
