package ledgertool

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// EpisodeHeader is the episode log's header line: the bridge server's
// columns (plugrl-bridges' episode_log).
var EpisodeHeader = []string{"step", "slot", "episode", "return", "length"}

// An EpisodeWriter writes the episode log's CSV a row at a time (an
// Auditor's OnEpisode), header first; Close flushes it and reports the
// first error.
type EpisodeWriter struct {
	cw  *csv.Writer
	rec []string
	err error
}

// NewEpisodeWriter writes the header to w.
func NewEpisodeWriter(w io.Writer) *EpisodeWriter {
	ew := &EpisodeWriter{cw: csv.NewWriter(w), rec: make([]string, len(EpisodeHeader))}
	ew.err = ew.cw.Write(EpisodeHeader)
	return ew
}

// Write writes one row; after an error it does nothing.
func (ew *EpisodeWriter) Write(r EpisodeRow) {
	if ew.err != nil {
		return
	}
	ew.rec[0], ew.rec[1], ew.rec[2] = strconv.FormatInt(r.Step, 10), strconv.FormatInt(r.Slot, 10), strconv.FormatInt(r.Episode, 10)
	ew.rec[3], ew.rec[4] = strconv.FormatFloat(r.Return, 'g', -1, 64), strconv.FormatInt(r.Length, 10)
	ew.err = ew.cw.Write(ew.rec)
}

// Close flushes the rows and reports the first error.
func (ew *EpisodeWriter) Close() error {
	if ew.err != nil {
		return ew.err
	}
	ew.cw.Flush()
	return ew.cw.Error()
}

// ReadEpisodes reads an episode log: a header naming at least slot,
// episode, return and length (in any order; step is optional), then one
// row per episode.
func ReadEpisodes(r io.Reader) ([]EpisodeRow, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("episode log: reading the header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, need := range []string{"slot", "episode", "return", "length"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("episode log: no %q column in the header %v", need, head)
		}
	}
	var rows []EpisodeRow
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("episode log: %w", err)
		}
		var row EpisodeRow
		ints := []struct {
			name string
			dst  *int64
		}{{"step", &row.Step}, {"slot", &row.Slot}, {"episode", &row.Episode}, {"length", &row.Length}}
		for _, f := range ints {
			i, ok := col[f.name]
			if !ok {
				continue
			}
			if *f.dst, err = strconv.ParseInt(rec[i], 10, 64); err != nil {
				return nil, fmt.Errorf("episode log line %d: %s: %w", line, f.name, err)
			}
		}
		if row.Return, err = strconv.ParseFloat(rec[col["return"]], 64); err != nil {
			return nil, fmt.Errorf("episode log line %d: return: %w", line, err)
		}
		rows = append(rows, row)
	}
}

// Difference is one way two episode logs disagree.
type Difference struct {
	What           string // "missing" (only in the server's log), "extra" (only in the client's), "differs", "twice" (a log holds it twice)
	Log            string // "twice": the log that holds it twice, "ledger" or "server"
	Client, Server EpisodeRow
}

// sameReturn reports whether two returns agree within 1e-6 relative. A NaN
// agrees only with a NaN (a comparison with NaN is false, and would have
// hidden the difference).
func sameReturn(c, s float64) bool {
	if c == s { // infinities too
		return true
	}
	if math.IsNaN(c) || math.IsNaN(s) {
		return math.IsNaN(c) && math.IsNaN(s)
	}
	return math.Abs(c-s) <= 1e-6*max(1, math.Abs(s))
}

// CompareEpisodes matches episodes by (slot, episode) and reports those
// that are in one log only or whose return or length differ. Returns are
// equal within 1e-6 relative (both sides sum the same float32 chunk sums).
// An episode that one log holds twice is reported as "twice" (the server's
// log of several clients at once, each with its own env 0), and only its
// first row is compared.
func CompareEpisodes(client, server []EpisodeRow) []Difference {
	type key struct{ slot, ep int64 }
	var out []Difference
	idx := func(rows []EpisodeRow, isServer bool) map[key]EpisodeRow {
		m := make(map[key]EpisodeRow, len(rows))
		for _, r := range rows {
			k := key{r.Slot, r.Episode}
			if _, seen := m[k]; !seen {
				m[k] = r
			} else if isServer {
				out = append(out, Difference{What: "twice", Log: "server", Server: r})
			} else {
				out = append(out, Difference{What: "twice", Log: "ledger", Client: r})
			}
		}
		return m
	}
	cm, sm := idx(client, false), idx(server, true)
	for k, s := range sm {
		c, ok := cm[k]
		switch {
		case !ok:
			out = append(out, Difference{What: "missing", Server: s})
		case c.Length != s.Length || !sameReturn(c.Return, s.Return):
			out = append(out, Difference{What: "differs", Client: c, Server: s})
		}
	}
	for k, c := range cm {
		if _, ok := sm[k]; !ok {
			out = append(out, Difference{What: "extra", Client: c})
		}
	}
	row := func(d Difference) EpisodeRow {
		if d.What == "missing" || d.Log == "server" {
			return d.Server
		}
		return d.Client
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := row(out[i]), row(out[j])
		if a.Slot != b.Slot {
			return a.Slot < b.Slot
		}
		return a.Episode < b.Episode
	})
	return out
}
