package ledgertool

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// Violation is one SPEC rule a ledger shows broken, or one of the
// ledger's own (ClauseLedger).
type Violation struct {
	Seq    int    // the record's position in the ledger
	Clause string // the SPEC section, e.g. "7.6", or ClauseLedger
	Msg    string
}

// ClauseLedger is the Clause of a violation of what the ledger's writer
// guarantees (docs/LEDGER.md), not of the SPEC: a ledger that breaks it
// was not written by this library as it is, or was altered.
const ClauseLedger = "ledger"

func (v Violation) String() string {
	if v.Clause == ClauseLedger {
		return fmt.Sprintf("record %d: not as the ledger is written: %s", v.Seq, v.Msg)
	}
	return fmt.Sprintf("record %d: SPEC %s: %s", v.Seq, v.Clause, v.Msg)
}

// EpisodeRow is one line of the episode log (the bridge's columns: step,
// slot, episode, return, length). Step is the ordinal, from 1, of the
// feedback message that ended the episode; slot the env index; episode
// the env's episode ordinal, from 0; return the sum of the rewards fed
// back for the env over the episode; length info.episode.l when the client
// sent it, else the number of chunks fed back.
type EpisodeRow struct {
	Step, Slot, Episode int64
	Return              float64
	Length              int64
}

// connection phases (SPEC 4.2: metadata (infer action feedback)*).
const (
	phaseIdle = iota
	phaseAwaitAction
	phaseHolding
	phaseUnknown // after a lost record: learned again from the next infer
	phaseClosed  // no connection open: before the first connect record, after a close
)

// envState is what the audit knows of one env index.
type envState struct {
	// On the current connection.
	holding    bool  // an action chunk not yet fed back
	chunkStep  int64 // the step_id of the infer that asked for it
	fedBack    bool  // a feedback named it
	terminal   bool  // ... and ended its episode
	nextObs    uint64
	stepKnown  bool
	nextStep   int64
	counting   bool // a step_id other than 0 on this connection this episode: the env counts its chunks, and must go on
	zeros      bool // a step_id of 0 where the count was above it: the env sends zeros, and must go on
	heldOnConn int  // the connection its last chunk came on (0: none held)
	connects   int  // Auditor.connects when it was last brought up to date (see env)
	gaps       int  // Auditor.gaps, likewise
	unsure     bool // records about it may have been lost: what it holds and fed back is learned again from its next feedback

	// The episode, across connections.
	epSum     float64
	epAbs     float64 // sum of |reward|, for the tolerance
	epChunks  int64
	epKnown   bool // every chunk of the episode so far was fed back on one connection
	epOrdinal int64
	horizon   int64 // the largest chunk seen this episode

	// The observations (their digests) of the episode, for the note on
	// a terminal observation sent again as the next episode's first.
	lastObs      uint64 // the last observation sent for it
	haveLast     bool
	epVaried     bool   // the episode's observations were not all one
	prevVaried   bool   // ... and so were the last episode's
	termObs      uint64 // the last episode's terminal observation
	termObsKnown bool
}

// observe takes note of an observation sent for the env.
func (s *envState) observe(d uint64) {
	if s.haveLast && d != s.lastObs {
		s.epVaried = true
	}
	s.lastObs, s.haveLast = d, true
}

// Auditor checks a ledger's records against the SPEC rules they show.
// Feed it every event in order with Add, then read Violations and
// Episodes.
type Auditor struct {
	Violations []Violation
	Unkept     int // violations past MaxViolations, counted only
	// Notes are what a ledger shows that is likely a fault but may be
	// right (an env may reset to the state it ended in): reported, not
	// counted as violations. Past MaxViolations they are counted only.
	Notes       []Violation
	NotesUnkept int
	// OnEpisode, if set, is given each episode as it ends, and Episodes
	// stays empty; else Episodes keeps the first MaxEpisodes, and the rest
	// are counted in EpisodesUnkept.
	OnEpisode      func(EpisodeRow)
	Episodes       []EpisodeRow
	EpisodesUnkept int
	EpisodeCount   int // every episode that ended

	conn      int
	connects  int // connect records so far (see env)
	gaps      int // lost records so far (see env)
	phase     int
	meta      *wire.Metadata
	envs      map[int64]*envState
	infer     []int64 // the outstanding infer's env_indices
	inferStep []int64
	feedbacks int64
	// stopSeq is the record of the server's plugrl-server-stop that ended
	// the last connection, or -1: a connect after it is noted (SPEC 7.1).
	stopSeq int
	// The connection's last feedback, if it ended no episode: a close
	// that says it never left the client (unsent) takes it back.
	lastFbEnvs    []int64
	lastFbRewards []float64
	// connGaps is gaps at the last connect record: a gap since then may
	// have held records of the current connection, one before it cannot
	// (see env).
	connGaps int
}

// NewAuditor returns an empty auditor.
func NewAuditor() *Auditor {
	return &Auditor{envs: map[int64]*envState{}, stopSeq: -1, phase: phaseClosed}
}

// MaxViolations bounds the violations an Auditor keeps; the rest are
// counted in Unkept. A broken client shows its faults in the first few;
// a crafted ledger can repeat a faulty message millions of times in a few
// kilobytes (a patch of no bytes repeats a message), and each kept
// violation is a formatted string.
const MaxViolations = 100000

// MaxEpisodes bounds the episodes an Auditor keeps (about 40 bytes each)
// when it has no OnEpisode. One feedback record may end as many episodes as
// the message has envs, and a patch of no bytes repeats it: a 1 KB ledger
// of 20,000 repeats of a 512-env terminal feedback held 10 million rows
// (494 MiB). A real run with more episodes than this is compared a part
// at a time, or streamed (OnEpisode: summary, audit and episodes do).
const MaxEpisodes = 1 << 20

func (a *Auditor) episode(r EpisodeRow) {
	a.EpisodeCount++
	switch {
	case a.OnEpisode != nil:
		a.OnEpisode(r)
	case len(a.Episodes) < MaxEpisodes:
		a.Episodes = append(a.Episodes, r)
	default:
		a.EpisodesUnkept++
	}
}

func (a *Auditor) flag(ev *Event, clause, format string, args ...any) {
	if len(a.Violations) >= MaxViolations {
		a.Unkept++
		return
	}
	a.Violations = append(a.Violations, Violation{Seq: ev.Seq, Clause: clause, Msg: boundedMsg(format, args...)})
}

// note is flag for a Note.
func (a *Auditor) note(ev *Event, clause, format string, args ...any) {
	if len(a.Notes) >= MaxViolations {
		a.NotesUnkept++
		return
	}
	a.Notes = append(a.Notes, Violation{Seq: ev.Seq, Clause: clause, Msg: boundedMsg(format, args...)})
}

// MaxViolationBytes bounds a violation's or note's message. MaxViolations
// bounds how many are kept, not what each holds: a message quotes what
// the ledger's file holds (a decoding error a key of any length, an
// action's env_ids), and records of a few bytes repeat a message (a patch
// of no bytes), so a 45 KB ledger of actions answering 2500 envs in
// another order kept 4001 violations of 23 KB each, 94 MiB.
const MaxViolationBytes = 1024

// boundedMsg formats a violation's message, cut at MaxViolationBytes.
func boundedMsg(format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	if len(msg) <= MaxViolationBytes {
		return msg
	}
	cut := MaxViolationBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	// A new string: a slice of msg would keep all of it.
	return fmt.Sprintf("%s... (cut: %d bytes in all)", msg[:cut], len(msg))
}

// idList spells env indices for a message, the first few of a long list
// only: the message is cut short anyway (boundedMsg), and a list of
// thousands took as long to format as the rest of the audit's work on
// its record.
func idList(ids []int64) string {
	const shown = 16
	if len(ids) <= shown {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v... (%d in all)", ids[:shown], len(ids))
}

// env is env e's state, brought up to date with the connects since it
// was last used (newConnection): lazily, since a connect record costs a
// few bytes of a file and a pass over every env would make a crafted
// ledger's audit cost envs x connects (1M envs and 1000 connects, 1 MB of
// file, took 133 s).
func (a *Auditor) env(e int64) *envState {
	s := a.envs[e]
	if s == nil {
		s = &envState{epKnown: true, connects: a.connects}
		a.envs[e] = s
	}
	if s.connects != a.connects {
		s.newConnection()
		s.connects = a.connects
	}
	if s.gaps != a.gaps {
		// Records were lost since it was last seen: any of them may have
		// been about it.
		s.epKnown = false
		s.stepKnown, s.counting, s.zeros = false, false, false
		// What it holds and fed back on this connection is unknown only
		// if a gap came after the connection's connect record: the
		// records of a connection whose connect record came after every
		// gap are all in the ledger, and it began with nothing held and
		// nothing fed back (newConnection). Taking it as unknown then hid
		// a feedback resent after the reconnect (SPEC 7.6) and a reuse of
		// an observation never fed back on it (10.1), recorded whole.
		s.unsure = a.gaps != a.connGaps
		s.gaps = a.gaps
	}
	return s
}

// newConnection is what a new connection does to an env's state.
func (s *envState) newConnection() {
	// A connection ended: what was held on it is gone, and an episode
	// that crossed it cannot be checked against its rewards.
	if s.holding || s.epChunks > 0 {
		s.epKnown = false
	}
	s.holding, s.fedBack, s.terminal, s.stepKnown = false, false, false, false
	// A gap on the old connection says nothing of what it holds and fed
	// back on the new one (env says whether a gap came since).
	s.unsure = false
	// An episode's end may have gone with the old connection (SPEC 7.6):
	// the step_ids are re-learned from the next chunk.
	s.counting, s.zeros = false, false
}

// Add audits one event.
func (a *Auditor) Add(ev *Event) {
	switch ev.Kind {
	case ledger.KindConnect:
		a.connect(ev)
	case ledger.KindLost:
		a.gaps++ // every env catches up when next used (env)
		a.phase = phaseUnknown
		a.forgetFeedback()
	case ledger.KindClose:
		a.phase = phaseClosed
		if ev.By == "server" && ev.Reason == wire.ReasonStop {
			a.stopSeq = ev.Seq
		}
		if ev.Unsent > 0 {
			a.unsend()
		}
		a.forgetFeedback()
	case ledger.KindSend:
		a.onConnection(ev, "sent")
		switch {
		case ev.DecodeErr != nil:
			a.flag(ev, "5", "the client sent a message a server cannot decode: %v", ev.DecodeErr)
		case ev.Infer != nil:
			a.sendInfer(ev)
		case ev.Feedback != nil:
			a.sendFeedback(ev)
		}
	case ledger.KindRecv:
		a.onConnection(ev, "received")
		a.recv(ev)
	}
}

// onConnection flags a message sent or received with no connection open:
// the writer records a connection's connect before its first message and
// its close after its last, so such a ledger is not what the library
// wrote (or lost the record between, which a lost record would say). The
// message is then checked as after a gap.
func (a *Auditor) onConnection(ev *Event, how string) {
	if a.phase != phaseClosed {
		return
	}
	a.flag(ev, ClauseLedger, "a message %s with no connection open (no connect record since the start or the last close)", how)
	a.phase = phaseUnknown
}

func (a *Auditor) connect(ev *Event) {
	a.conn, a.phase, a.meta = ev.Conn, phaseIdle, ev.Meta
	if a.stopSeq >= 0 {
		// A SHOULD, and a client may be configured to wait for the
		// next run: a note, not a violation.
		a.note(ev, "7.1", "a new connection after the server ended the run (%s, record %d): a client should exit rather than reconnect, unless configured to wait for the next run", wire.ReasonStop, a.stopSeq)
		a.stopSeq = -1
	}
	if ev.DecodeErr != nil {
		a.flag(ev, "5.1", "the server's first message is not metadata: %v", ev.DecodeErr)
	}
	a.connects++ // every env's state catches up when next used (env)
	a.connGaps = a.gaps
}

func (a *Auditor) sendInfer(ev *Event) {
	in := ev.Infer
	if a.phase != phaseIdle && a.phase != phaseUnknown {
		a.flag(ev, "4.2", "an infer while %s: messages must alternate infer, action, feedback", phaseName(a.phase))
	}
	reuseOffered := a.meta != nil && a.meta.Has(wire.FeatureReuse)
	if in.Reuse != nil && !reuseOffered && !slices.Contains(in.Reuse, true) {
		// A reused row is flagged below; all false is still the key, which
		// a server without the feature need not know (plugrl serve
		// resyncs it).
		a.flag(ev, "10.1", "an infer carries a reuse key, but the server does not offer reuse-feedback-obs: without the feature the key is not sent (SPEC 5.2)")
	}
	row := 0
	for i, e := range in.EnvIndices {
		s := a.env(e)
		if s.holding && !s.unsure {
			a.flag(ev, "4.3", "an infer for env %d, which still holds an action chunk: an env asks for a chunk only after its last one is fed back, and the server keeps one chunk per env", e)
		}
		reused := in.Reuse != nil && in.Reuse[i]
		switch {
		case reused && !reuseOffered:
			a.flag(ev, "10.1", "env %d reuses its observation, but the server does not offer reuse-feedback-obs", e)
		case s.unsure:
			// What it fed back may be in the gap.
		case reused && !s.fedBack:
			a.flag(ev, "10.1", "env %d reuses an observation it never fed back on this connection", e)
		case reused && s.terminal:
			a.flag(ev, "10.1", "env %d reuses a terminal observation: its last feedback ended its episode", e)
		case !reused && s.fedBack && !s.terminal && row < maxRows(ev):
			if got := ev.ObsDigest(row); got != s.nextObs {
				a.flag(ev, "5.4", "env %d's observation is not the one its last feedback sent: rows swapped, or the env changed between feedback and infer", e)
			}
		}
		if !reused && row < maxRows(ev) {
			d := ev.ObsDigest(row)
			// SPEC 5.4's terminal observations: the feedback that ends an
			// episode carries the terminal observation, the next infer
			// the reset one. The same again, where the episode's
			// observations had changed, is an env that was not reset, or
			// a terminal observation that was the reset one. A note: an
			// env may reset to where it ended.
			if s.fedBack && s.terminal && !s.unsure && s.termObsKnown && s.prevVaried && d == s.termObs {
				a.note(ev, "5.4", "env %d starts its episode with the terminal observation that ended its last one: an env not reset, or a reset observation sent as the terminal one (the feedback that ends an episode carries the terminal observation, the next infer the reset one)", e)
			}
			s.observe(d)
		}
		if !reused {
			row++
		}
		// SPEC 5.2's Gap: a client may send zeros. An episode is either
		// counted from its start or all zeros: an env that sent 0 where
		// the count was above it sends zeros; one that sent a count goes
		// on counting.
		if step := in.StepIDs[i]; step < 0 {
			// Not a count of chunks, whatever the env's history (the
			// first infer of a connection is otherwise not checked).
			a.flag(ev, "5.2", "env %d's step_id is %d: want the chunks completed in its episode, or 0", e, step)
		} else if s.stepKnown {
			switch {
			case s.zeros && step != 0:
				a.flag(ev, "5.2", "env %d's step_id is %d after zeros earlier in its episode: want 0 throughout the episode, or counts from its start", e, step)
			case step == s.nextStep:
			case step == 0 && !s.counting:
				s.zeros = true
			case step == 0:
				a.flag(ev, "5.2", "env %d's step_id is 0 after counts earlier in its episode: want %d (a client that counts goes on until the episode ends)", e, s.nextStep)
			case s.counting:
				a.flag(ev, "5.2", "env %d's step_id is %d, want %d (chunks completed in its episode)", e, step, s.nextStep)
			default:
				a.flag(ev, "5.2", "env %d's step_id is %d, want %d (chunks completed in its episode) or 0 throughout it", e, step, s.nextStep)
			}
		}
		s.counting = s.counting || in.StepIDs[i] != 0
		s.chunkStep = in.StepIDs[i]
	}
	a.infer = append(a.infer[:0], in.EnvIndices...)
	a.phase = phaseAwaitAction
}

// maxRows is how many observation rows a send record carries.
func maxRows(ev *Event) int {
	if len(ev.RowDigest) == 0 {
		return math.MaxInt
	}
	ev.obsDigests() // once per event: a pass per env row was n^2 (ObsDigest)
	return ev.maxRows
}

func (a *Auditor) recv(ev *Event) {
	if a.phase == phaseUnknown {
		// Its infer may be in the gap: nothing to check it against.
		a.phase = phaseHolding
		return
	}
	if a.phase != phaseAwaitAction {
		a.flag(ev, "4.2", "the server sent a message while %s", phaseName(a.phase))
		return
	}
	a.phase = phaseHolding
	if ev.DecodeErr != nil {
		a.flag(ev, "5.3", "the server's reply is not an action: %v", ev.DecodeErr)
		return
	}
	act := ev.Action
	if act.EnvIDs != nil && !slices.Equal(act.EnvIDs, a.infer) {
		a.flag(ev, "5.3", "action env_ids %s, the infer's env_indices %s (SPEC 4.3: same envs, same order)", idList(act.EnvIDs), idList(a.infer))
	}
	if act.Envs() != len(a.infer) {
		a.flag(ev, "5.3", "action shape %v for an infer of %d envs", act.Chunk.Shape, len(a.infer))
	}
	if m := a.meta; m != nil {
		if h := m.ActionHorizon; h.Set && int64(act.Horizon()) != h.Value {
			a.flag(ev, "5.1", "action horizon %d, metadata action_horizon %d", act.Horizon(), h.Value)
		}
		if d := m.ActionDim; d.Set {
			w := 1
			for _, v := range act.ActionShape() {
				w *= v
			}
			if int64(w) != d.Value {
				a.flag(ev, "5.1", "action shape %v, metadata action_dim %d", act.Chunk.Shape, d.Value)
			}
		}
	}
	for _, e := range a.infer {
		s := a.env(e)
		s.holding, s.heldOnConn = true, a.conn
		s.unsure = false // what it holds is known again (its episode's sum is not)
		s.horizon = max(s.horizon, int64(act.Horizon()))
	}
}

func (a *Auditor) sendFeedback(ev *Event) {
	fb := ev.Feedback
	a.feedbacks++
	if a.phase != phaseHolding && a.phase != phaseUnknown {
		a.flag(ev, "4.2", "a feedback while %s: each feedback answers one action", phaseName(a.phase))
	}
	a.phase = phaseIdle
	a.forgetFeedback()
	if !slices.Contains(fb.Terminated, true) && !slices.Contains(fb.Truncated, true) {
		a.lastFbEnvs = append(a.lastFbEnvs, fb.EnvIndices...)
		a.lastFbRewards = append(a.lastFbRewards, fb.Rewards...)
	}
	for i, e := range fb.EnvIndices {
		s := a.env(e)
		switch {
		case s.unsure:
			// Its chunk's infer and action may be in the gap.
			s.unsure, s.epKnown = false, false
		case !s.holding && s.heldOnConn != 0 && s.heldOnConn != a.conn:
			a.flag(ev, "7.6", "feedback for env %d, whose action came on connection %d, sent on connection %d: feedback must be dropped on a reconnect", e, s.heldOnConn, a.conn)
			s.epKnown = false
		case !s.holding:
			a.flag(ev, "4.3", "feedback for env %d, which holds no action chunk on this connection", e)
			s.epKnown = false
		case fb.StepIDs[i] != s.chunkStep:
			a.flag(ev, "5.2", "env %d's feedback step_id is %d, its chunk's infer said %d", e, fb.StepIDs[i], s.chunkStep)
		}
		s.holding = false
		r := fb.Rewards[i]
		s.epSum += r
		s.epAbs += math.Abs(r)
		s.epChunks++
		done := fb.Terminated[i] || fb.Truncated[i]
		ep := fb.Episode
		masked := ep != nil && ep.Mask[i]
		if masked && !done {
			a.flag(ev, "5.4", "env %d sends info.episode (mask true) on a row that is neither terminated nor truncated", e)
		}
		if done {
			length := s.epChunks
			if masked && ep.Length != nil {
				length = ep.Length[i]
			}
			if masked && s.epKnown {
				a.checkEpisode(ev, e, s, ep, i)
			}
			a.episode(EpisodeRow{Step: a.feedbacks, Slot: e, Episode: s.epOrdinal, Return: s.epSum, Length: length})
			s.epOrdinal++
			s.epSum, s.epAbs, s.epChunks, s.epKnown, s.horizon = 0, 0, 0, true, 0
		}
		s.fedBack, s.terminal = true, done
		if i < maxRows(ev) {
			d := ev.ObsDigest(i)
			s.observe(d)
			if !done {
				s.nextObs = d
			}
		}
		if done {
			s.termObs, s.termObsKnown = s.lastObs, s.haveLast && i < maxRows(ev)
			s.prevVaried = s.epVaried
			s.epVaried, s.haveLast = false, false
		}
		s.stepKnown = true
		if done {
			s.nextStep, s.counting, s.zeros = 0, false, false
		} else {
			s.nextStep = fb.StepIDs[i] + 1
		}
	}
}

// forgetFeedback forgets the last feedback: it can no longer be taken
// back (a later send, a gap, the connection's end).
func (a *Auditor) forgetFeedback() {
	a.lastFbEnvs, a.lastFbRewards = a.lastFbEnvs[:0], a.lastFbRewards[:0]
}

// unsend takes back the connection's last feedback, which its close says
// never left the client (a feedback held for the next infer): the server
// never had its rewards, and its episodes go on without them. The client
// holds only feedback that ends no episode; one that did is left as it
// was counted. The client's own episode statistics (info.episode) still
// count those rewards, as its env had them, so the episode can no longer
// be checked against what was fed back.
func (a *Auditor) unsend() {
	if len(a.lastFbEnvs) == 0 {
		return
	}
	a.feedbacks--
	for i, e := range a.lastFbEnvs {
		s := a.env(e)
		r := a.lastFbRewards[i]
		s.epSum -= r
		s.epAbs -= math.Abs(r)
		s.epChunks--
		s.epKnown = false
	}
}

func (a *Auditor) checkEpisode(ev *Event, e int64, s *envState, ep *wire.Episode, i int) {
	if r := ep.Return; r != nil && r[i] != s.epSum { // equal: infinities too
		// Written as "not within" so that a NaN on either side, where a
		// comparison is false, is flagged, unless both are NaN: a client
		// whose env paid a NaN reward and summed it is consistent. An
		// infinite reward makes the tolerance infinite: an infinite
		// difference is flagged still.
		tol := 1e-3 + 1e-4*s.epAbs
		d := math.Abs(r[i] - s.epSum)
		if (!(d <= tol) || math.IsInf(d, 1)) && !(math.IsNaN(r[i]) && math.IsNaN(s.epSum)) {
			a.flag(ev, "5.4", "env %d's info.episode.r is %g, the rewards fed back over its episode sum to %g", e, ep.Return[i], s.epSum)
		}
	}
	if ep.Length != nil {
		l := ep.Length[i]
		if l < s.epChunks {
			a.flag(ev, "5.4", "env %d's info.episode.l is %d, but %d chunks were fed back over its episode", e, l, s.epChunks)
		} else if s.horizon > 0 && l > s.epChunks*s.horizon {
			a.flag(ev, "5.4", "env %d's info.episode.l is %d, more than its %d chunks of at most %d steps", e, l, s.epChunks, s.horizon)
		}
	}
}

func phaseName(p int) string {
	switch p {
	case phaseAwaitAction:
		return "an action is awaited"
	case phaseHolding:
		return "a feedback is owed"
	case phaseClosed:
		return "no connection is open"
	}
	return "no action is outstanding"
}
