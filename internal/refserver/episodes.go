package refserver

import (
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/plugrl/libplugrl/core/wire"
)

// episodeLog writes the bridge server's episode log (plugrl-bridges:
// step,slot,episode,return,length), one line per episode a feedback ends,
// from what crossed the wire: return is the sum of the rewards fed back for
// the env over the episode, length info.episode.l when the client sent it,
// else the number of chunks fed back; step is the ordinal, from 1, of the
// feedback that ended it. Envs are keyed by env index across connections,
// as the slots of one client, so that `plugrl ledger compare` can match a
// client's ledger against it.
type episodeLog struct {
	mu        sync.Mutex
	w         io.Writer
	feedbacks int64
	envs      map[int64]*episodeAcc
}

type episodeAcc struct {
	sum            float64
	chunks, number int64
}

func newEpisodeLog(w io.Writer) *episodeLog {
	fmt.Fprintln(w, "step,slot,episode,return,length")
	return &episodeLog{w: w, envs: map[int64]*episodeAcc{}}
}

// feedback takes one decoded feedback message.
func (l *episodeLog) feedback(fb *wire.FeedbackMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.feedbacks++
	for i, e := range fb.EnvIndices {
		a := l.envs[e]
		if a == nil {
			a = &episodeAcc{}
			l.envs[e] = a
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
		fmt.Fprintf(l.w, "%d,%d,%d,%s,%d\n", l.feedbacks, e, a.number, strconv.FormatFloat(a.sum, 'g', -1, 64), length)
		a.number++
		a.sum, a.chunks = 0, 0
	}
}
