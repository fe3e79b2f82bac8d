package ledgertool

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/plugrl/libplugrl/core/ledger"
)

// Summary is what `plugrl ledger summary` prints.
type Summary struct {
	Level, Version string
	Opened         time.Time
	Duration       time.Duration
	Records        int
	Truncated      bool
	Clean          bool // the ledger ends with an end record

	Connections, Exchanges, Feedbacks int            // feedbacks that left the client
	Unsent                            int            // feedbacks recorded, held in the client, that never left (a close's unsent)
	Reconnects                        map[string]int // by cause
	Closes                            map[string]int // by who closed and why
	FeedbackDropped                   int            // env rows
	Interrupts                        int
	Lost, LostBytes                   int64
	WriterCPU                         time.Duration // the end record's cpu: the background writer's flushes
	BytesSent, BytesReceived          int64
	Chunks                            map[int]int // action horizon -> actions
	Latency                           latencies   // infer -> action, one per exchange
	// Servers are the addresses the connections went to (connect
	// records' addr: a name's addresses may differ from one connection to
	// the next), in the order first seen, at most maxServers of them;
	// OtherServers counts the connections to any address past those.
	Servers      []ServerCount
	OtherServers int
	// Episodes is what AddEpisode was given: how many, their returns'
	// and lengths' sums and range, and the last ten (not every row: a
	// run's episodes may be millions).
	Episodes     int
	ReturnSum    float64
	ReturnMin    float64
	ReturnMax    float64
	LengthSum    float64
	LastEpisodes []EpisodeRow

	envs    map[int64]bool
	inferAt int64
}

// ServerCount is one server address and its connections.
type ServerCount struct {
	Addr        string
	Connections int
}

// maxServers bounds Summary.Servers: the addresses come from the file.
const maxServers = 16

// NewSummary returns an empty summary; feed it events with Add.
func NewSummary() *Summary {
	return &Summary{Reconnects: map[string]int{}, Closes: map[string]int{}, Chunks: map[int]int{}, envs: map[int64]bool{}, inferAt: -1}
}

func connections(n int) string {
	if n == 1 {
		return "1 connection"
	}
	return fmt.Sprintf("%d connections", n)
}

func (s *Summary) countServer(addr string) {
	addr = cutString(addr, maxReasonBytes) // an IP and port, unless the file is crafted
	for i := range s.Servers {
		if s.Servers[i].Addr == addr {
			s.Servers[i].Connections++
			return
		}
	}
	if len(s.Servers) < maxServers {
		s.Servers = append(s.Servers, ServerCount{addr, 1})
	} else {
		s.OtherServers++
	}
}

// maxReasons and maxReasonBytes bound Summary.Closes and Reconnects:
// their keys are a close's reason and error and a reconnect's cause, as
// the file gives them. A run has a handful; a crafted file of 2000 closes
// whose 32 KB errors differ in a byte (zstd keeps each in a few bytes)
// made a 174 KB ledger's summary hold 79 MiB, and print all of it.
const (
	maxReasons     = 64
	maxReasonBytes = 256
)

// otherReasons counts what comes past maxReasons distinct keys.
const otherReasons = "(other reasons, not told apart)"

// countReason counts key in m, or, once m holds maxReasons other keys,
// under otherReasons.
func countReason(m map[string]int, key string) {
	key = cutString(key, maxReasonBytes)
	if _, ok := m[key]; ok || len(m) < maxReasons {
		m[key]++
		return
	}
	m[otherReasons]++
}

// cutString is s, or a copy of its first n bytes (at a rune's start) with
// "..." after them: a slice of s would keep all of it.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n]) + "..."
}

// lastEpisodes is how many of the last episodes a summary prints.
const lastEpisodes = 10

// AddEpisode counts one episode (an Auditor's OnEpisode).
func (s *Summary) AddEpisode(e EpisodeRow) {
	if s.Episodes == 0 {
		s.ReturnMin, s.ReturnMax = e.Return, e.Return
	}
	s.Episodes++
	s.ReturnSum += e.Return
	s.LengthSum += float64(e.Length)
	s.ReturnMin, s.ReturnMax = min(s.ReturnMin, e.Return), max(s.ReturnMax, e.Return)
	if len(s.LastEpisodes) == lastEpisodes {
		copy(s.LastEpisodes, s.LastEpisodes[1:])
		s.LastEpisodes = s.LastEpisodes[:lastEpisodes-1]
	}
	s.LastEpisodes = append(s.LastEpisodes, e)
}

// Add counts one event.
func (s *Summary) Add(ev *Event) {
	s.Records++
	s.Duration = time.Duration(ev.Time)
	switch ev.Kind {
	case ledger.KindOpen:
		s.Level, s.Version, s.Opened = ev.Level, ev.Version, time.Unix(0, ev.Wall)
	case ledger.KindConnect:
		s.Connections++
		if ev.Addr != "" {
			s.countServer(ev.Addr)
		}
	case ledger.KindReconnect:
		countReason(s.Reconnects, ev.Cause)
	case ledger.KindClose:
		why := ev.By
		switch {
		case ev.By == "server":
			why = fmt.Sprintf("server %d %q", ev.Code, cutString(ev.Reason, maxReasonBytes))
		case ev.Err != "":
			why = ev.By + ": " + cutString(ev.Err, maxReasonBytes)
		}
		countReason(s.Closes, why)
		s.FeedbackDropped += len(ev.Dropped)
		if ev.Unsent > 0 && s.Feedbacks > 0 {
			s.Feedbacks--
			s.Unsent++
		}
	case ledger.KindInterrupt:
		s.Interrupts++
	case ledger.KindLost:
		s.Lost += ev.Count
		s.LostBytes += ev.Bytes
	case ledger.KindEnd:
		s.Clean = true
		s.WriterCPU = time.Duration(ev.CPU)
	case ledger.KindSend:
		s.BytesSent += ev.Len
		switch {
		case ev.Infer != nil:
			s.inferAt = ev.Time
			for _, e := range ev.Infer.EnvIndices {
				s.envs[e] = true
			}
		case ev.Feedback != nil:
			s.Feedbacks++
		}
	case ledger.KindRecv:
		s.BytesReceived += int64(len(ev.Msg))
		s.Exchanges++
		if s.inferAt >= 0 {
			s.Latency.add(time.Duration(ev.Time - s.inferAt))
			s.inferAt = -1
		}
		if ev.Action != nil {
			s.Chunks[ev.Action.Horizon()]++
		}
	}
}

// latencies is a log-scale histogram of durations, to 1/64 (1.6 %) of
// each value: a fixed 30 KiB whatever the number of exchanges. A list of
// them grew 8 bytes an exchange, and a crafted ledger repeats an exchange
// in a few bytes of file (a patch of no bytes repeats a message). Values
// under 128 ns have a bucket each; above, bucket 128+64(e-1)+m-64 holds
// those whose top seven bits are m (64..127) at a shift of e.
type latencies struct {
	n       int64
	max     time.Duration
	buckets [128 + 64*57]int64
}

func latencyBucket(v time.Duration) int {
	u := uint64(max(v, 0))
	if u < 128 {
		return int(u)
	}
	e := bits.Len64(u) - 7
	return 128 + 64*(e-1) + int(u>>e) - 64
}

// bucketTop is the largest value of bucket i.
func bucketTop(i int) time.Duration {
	if i < 128 {
		return time.Duration(i)
	}
	e, m := (i-128)/64+1, uint64((i-128)%64+64)
	return time.Duration((m+1)<<e - 1)
}

func (l *latencies) add(v time.Duration) {
	l.n++
	l.max = max(l.max, v)
	l.buckets[latencyBucket(v)]++
}

// percentile is the value at rank p/100 x (n-1) among the values, from
// below, as a sorted list's index would give it, to 1.6 % (never over the
// largest value).
func (l *latencies) percentile(p float64) time.Duration {
	rank := int64(p / 100 * float64(l.n-1))
	var seen int64
	for i, c := range l.buckets {
		if seen += c; seen > rank {
			return min(bucketTop(i), l.max)
		}
	}
	return l.max
}

// Print writes the summary for a person.
func (s *Summary) Print(w io.Writer) {
	state := "closed cleanly"
	switch {
	case s.Truncated:
		state = "TRUNCATED (the writer stopped without closing it, or its file stopped taking writes; read up to its last whole block)"
	case !s.Clean:
		state = "no end record"
	}
	fmt.Fprintf(w, "ledger: %s level, library %s, opened %s, %d records over %v, %s\n",
		s.Level, s.Version, s.Opened.UTC().Format(time.RFC3339), s.Records, s.Duration.Round(time.Millisecond), state)
	unsent := ""
	if s.Unsent > 0 {
		unsent = fmt.Sprintf(" (and %d held in the client that never left: their rows are among those dropped)", s.Unsent)
	}
	fmt.Fprintf(w, "connections: %d; exchanges: %d; feedbacks: %d%s; envs: %d\n", s.Connections, s.Exchanges, s.Feedbacks, unsent, len(s.envs))
	if len(s.Servers) > 0 {
		fmt.Fprint(w, "server addresses:")
		for i, sv := range s.Servers {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %s (%s)", sep, sv.Addr, connections(sv.Connections))
		}
		if s.OtherServers > 0 {
			fmt.Fprintf(w, ", and %s to other addresses", connections(s.OtherServers))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "bytes: %d sent, %d received (messages, before WebSocket framing)\n", s.BytesSent, s.BytesReceived)
	fmt.Fprintf(w, "chunks (horizon: actions):%s\n", counts(s.Chunks, " %d: %d"))
	if l := &s.Latency; l.n > 0 {
		fmt.Fprintf(w, "infer->action latency: p50 %v  p90 %v  p99 %v  max %v  (n=%d)\n",
			l.percentile(50), l.percentile(90), l.percentile(99), l.max, l.n)
	}
	fmt.Fprintf(w, "reconnects: %d%s\n", sumCounts(s.Reconnects), counts(s.Reconnects, " [%s: %d]"))
	fmt.Fprintf(w, "closes:%s\n", counts(s.Closes, " [%s: %d]"))
	fmt.Fprintf(w, "feedback rows dropped on a lost connection: %d; interrupts: %d\n", s.FeedbackDropped, s.Interrupts)
	if s.WriterCPU > 0 && s.Exchanges > 0 && s.Duration > 0 {
		fmt.Fprintf(w, "recording: the background writer's flushes used %v of CPU, %.2f us per exchange, %.1f %% of a core over the ledger's time (the caller's copies and the last flush, in close, not counted)\n",
			s.WriterCPU.Round(time.Microsecond), float64(s.WriterCPU.Nanoseconds())/1e3/float64(s.Exchanges),
			100*float64(s.WriterCPU)/float64(s.Duration))
	}
	if s.Lost > 0 {
		fmt.Fprintf(w, "NOT RECORDED: %d records (%d bytes): the ledger's queue was full\n", s.Lost, s.LostBytes)
	}
	fmt.Fprintf(w, "episodes: %d\n", s.Episodes)
	if n := s.Episodes; n > 0 {
		fmt.Fprintf(w, "  return: mean %.4g  min %.4g  max %.4g; length: mean %.4g\n", s.ReturnSum/float64(n), s.ReturnMin, s.ReturnMax, s.LengthSum/float64(n))
		fmt.Fprintf(w, "  last %d:", len(s.LastEpisodes))
		for _, e := range s.LastEpisodes {
			fmt.Fprintf(w, " env %d ep %d: %.4g/%d;", e.Slot, e.Episode, e.Return, e.Length)
		}
		fmt.Fprintln(w)
	}
}

// counts spells m's entries in the order of their keys, each as format
// (of the key and its count).
func counts[K cmp.Ordered](m map[K]int, format string) string {
	var out strings.Builder // linear: += was quadratic in distinct keys (80,000 close reasons: 20 s)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&out, format, k, m[k])
	}
	return out.String()
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
