// Package runner steps N local environments in lockstep against a PlugRL
// server, and owns the parts of the protocol a caller should not have to
// think about (SPEC 4.3, 5.3, 5.4, 7, 10.1):
//
//   - it asks for an action chunk only for envs whose chunk ran out;
//   - it sums rewards over each chunk and flushes a chunk early at a done,
//     sending that step's (terminal) observation;
//   - it fills step_ids and info.episode (return, length, success);
//   - it reuses fed-back observations when the server offers the feature;
//   - it survives resyncs and reconnects by starting every env's next chunk
//     fresh, and reports the server's stop.
//
// The caller's loop is
//
//	for {
//	    r.Act(obs, actions)                  // this step's action per env
//	    step every env with its action
//	    r.Report(nextObs, rewards, terminated, truncated, success)
//	    obs = nextObs, with done envs reset
//	}
//
// The observation passed to Act for an env that did not finish its episode
// must be the one passed to the previous Report: that is what lockstep means,
// and what lets the runner reuse it.
package runner

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/wire"
)

// Episode is a finished episode's statistics.
type Episode struct {
	Env     int
	Return  float64
	Length  int64
	Success bool
}

// Config configures a Runner.
type Config struct {
	Envs int // N, the number of local envs; indices 0..N-1 are their env_indices
	// OnEpisode, if set, is called for each episode as it finishes.
	OnEpisode func(Episode)
	// MaxRestarts bounds how many reconnects one Act may ride through,
	// and how many connections in a row may end before a feedback goes
	// through on one (Act's and Report's reconnects together); 0 means 3.
	// Past the first, Act fails with KindConnect; past the second, Report
	// does: the server ends every connection, and a runner that rode on
	// would step its envs with no feedback ever reaching the server. The reconnect a runner's
	// first Act makes to give up feedback an earlier user of the client
	// left owed is not counted.
	MaxRestarts int
	// Alloc supplies the memory each env's chunk is kept in; nil means
	// the Go heap. The C API passes malloc, so that memory a server's
	// action needs is fallible (KindNoMemory) instead of an abort.
	Alloc conn.Allocator
}

type envState struct {
	step      int     // steps of the current chunk already taken
	remaining int     // steps left in the chunk; 0: needs a chunk
	chunkSum  float64 // reward summed over the chunk so far
	epReturn  float64
	epLen     int64
	chunks    int64 // chunks completed in this episode: the step_id
	// The env's current chunk, copied out of the receive buffer: remaining
	// steps of stepBytes each from step. Sized to the chunk, so memory
	// follows what the server actually sent for this env.
	chunk []byte
}

// Runner is a lockstep N-env chunk runner. Not safe for concurrent use,
// but for Stats; its client's Interrupt and Close may be called from any
// goroutine while Act or Report runs (they then return KindInterrupted or
// KindClosed).
type Runner struct {
	c    *client.Client
	cfg  Config
	envs []envState

	// What every env's chunk holds: values of chunkType, stepBytes per
	// step, stepShape per step (known once an action arrived).
	chunkType wire.DType
	stepShape []int
	stepBytes int
	horizon   int // of the last action
	alloc     conn.Allocator

	acted   bool // Act was called and Report is owed
	freed   bool // FreeChunks (or Close) ran: the runner is done
	adopted bool // the client's feedback owed from before this runner was given up
	// conn is the client's reconnect count (client.Reconnects) as of this
	// runner's chunks: when they came, or when it last rode through a
	// reconnect. A count that moved since means that the connection they
	// came from was replaced outside this runner (another runner over the
	// same client, whose first act gave them up, or the client used
	// directly): their feedback was dropped with it (SPEC 7.6), and must
	// never be sent on the connection that replaced it, where the same
	// envs may hold the other user's chunks.
	conn int
	// replaced is set when a replaced connection was found (see conn),
	// until the next chunks are stored: Act then names the cause of a
	// refusal its infer meets.
	replaced bool

	// Scratch reused across calls so the loop allocates nothing.
	idx      []int64
	rows     []int
	stepIDs  []int64
	reuse    []bool
	rewards  []float32
	term     []bool
	trunc    []bool
	epRet    []float64
	epLen    []int64
	epSucc   []bool
	epMask   []bool
	req      wire.Infer
	store    func(*wire.Action) error // storeChunks, bound once: InferFunc's use, without an allocation per infer
	fb       wire.Feedback
	episode  wire.Episode
	restarts int
	// ownInfer: an infer of this runner's was answered on the client's
	// current connection. Until one is, an observation the server holds
	// for one of its envs (client.CanReuse) was fed back by another user
	// of the client (an earlier runner closed with nothing owed, which
	// keeps the connection, or the caller's own feedback), and is not the
	// one this runner's caller passes for the env: it is not reused.
	// From then on each env infers again only after this runner's own
	// feedback for it on the connection, or after a restart, which
	// clears the mark.
	ownInfer bool
	// lostInARow counts the connections that ended, in Act or Report,
	// since a feedback last went through (MaxRestarts).
	lostInARow int

	// For Stats, which any goroutine may call.
	episodes, steps atomic.Uint64
}

// Stats is a snapshot of a runner's counters: its client's, and its own.
// They never reset.
type Stats struct {
	client.Stats
	// Episodes counts episodes that ended (terminated or truncated) in a
	// Report.
	Episodes uint64
	// EnvSteps counts env steps reported: N for every Report accepted.
	EnvSteps uint64
}

// Stats returns the runner's counters and its client's (see
// client.Client.Stats). Unlike the runner's other methods it may be called
// from any goroutine at any time, also while another is inside Act or
// Report; it allocates nothing and takes no lock. Each field is read
// atomically, but not all of them at one instant.
func (r *Runner) Stats() Stats {
	if r.c == nil {
		return Stats{} // a zero Runner
	}
	return Stats{Stats: r.c.Stats(), Episodes: r.episodes.Load(), EnvSteps: r.steps.Load()}
}

// New creates a runner over a connected client.
func New(c *client.Client, cfg Config) (*Runner, error) {
	if c == nil {
		return nil, &client.Error{Kind: client.KindInvalid, Msg: "runner needs a client (from client.Dial), got nil"}
	}
	if cfg.Envs <= 0 || cfg.Envs > wire.MaxEnvs {
		return nil, &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("runner needs between 1 and %d envs, got %d", wire.MaxEnvs, cfg.Envs)}
	}
	if cfg.MaxRestarts <= 0 {
		cfg.MaxRestarts = 3
	}
	alloc := cfg.Alloc
	if alloc == nil {
		alloc = conn.HeapAllocator{}
	}
	r := &Runner{c: c, cfg: cfg, envs: make([]envState, cfg.Envs), alloc: alloc, conn: c.Reconnects()}
	r.store = r.storeChunks
	return r, nil
}

// EnvStateBytes is the memory New takes per env, besides the chunks: for
// a caller that must check it can be had (Go's allocation aborts the
// process when it cannot).
const EnvStateBytes = int(unsafe.Sizeof(envState{}))

// Close ends the runner. Feedback it still owes (an env's chunk not fed
// back yet, or an Act without its Report) is given up (client.GiveUpOwed):
// the client's next infer, a new runner's or the caller's own, reconnects,
// where it would otherwise be refused for ever as out of order, and the
// client's Close closes in order, as at the end of any run. Then the
// chunks' memory is freed. The client must not be in a call on another
// goroutine; the runner must not be used afterwards.
func (r *Runner) Close() {
	if r.owes() && !r.connReplaced() {
		// A closing client drops what was owed with its connection; a
		// busy one is misuse, which the doc above rules out. Chunks whose
		// connection was replaced are owed no more, and what the client
		// owes now is another user's, not this runner's to give up.
		_ = r.c.GiveUpOwed()
	}
	r.FreeChunks()
}

// FreeChunks frees the chunks' memory, and leaves the client as it is:
// for a closer that cannot use the client now (another call is in it).
// The runner must not be used afterwards: its calls return KindClosed.
func (r *Runner) FreeChunks() {
	for i := range r.envs {
		r.freeChunk(i)
	}
	r.freed = true
}

// errFreed is the error of a call on a runner whose chunks were freed.
var errFreed = &client.Error{Kind: client.KindClosed, Msg: "the runner was closed (its chunks freed)"}

// errNotMade is the error of a call on a zero Runner, which has no client.
var errNotMade = &client.Error{Kind: client.KindInvalid, Msg: "this Runner was not made by New"}

// usable is the error of a call on a runner that cannot take one, or nil.
func (r *Runner) usable() error {
	switch {
	case r.c == nil:
		return errNotMade
	case r.freed:
		return errFreed
	}
	return nil
}

// connReplaced reports whether the client reconnected outside this
// runner since its chunks came (see conn).
func (r *Runner) connReplaced() bool { return r.c.Reconnects() != r.conn }

// forgetReplaced drops the chunks if their connection was replaced
// outside this runner, noting it for Act's refusal, and reports whether
// it did.
func (r *Runner) forgetReplaced() bool {
	if !r.connReplaced() {
		return false
	}
	r.replaced = true
	r.restart()
	return true
}

// owes reports whether the server still waits for feedback from this
// runner: an Act without its Report, or a chunk not stepped through.
func (r *Runner) owes() bool {
	if r.acted {
		return true
	}
	for i := range r.envs {
		if r.envs[i].remaining > 0 {
			return true
		}
	}
	return false
}

// keepChunk: a chunk buffer larger than this is freed when its chunk has
// been stepped through, so a server's one big action is not held after use.
const keepChunk = 1 << 20

func (r *Runner) freeChunk(i int) {
	if e := &r.envs[i]; e.chunk != nil {
		r.alloc.Free(e.chunk)
		e.chunk = nil
	}
}

// Client returns the runner's client.
func (r *Runner) Client() *client.Client { return r.c }

// ActionType is the dtype of the server's actions, known after the first Act.
func (r *Runner) ActionType() wire.DType { return r.chunkType }

// StepShape is one env's per-step action shape (da), known after the first
// Act. It is the runner's own: read it, do not change it (Act checks
// output sizes against it).
func (r *Runner) StepShape() []int { return r.stepShape }

// StepSize is the number of action values per env per step, prod(da):
// from this connection's metadata action_dim when it is plausible
// (client.MetadataActionDim; every action is checked against it), or else
// from the last action on this connection; ok is false when neither is
// known yet (before the first action, or after a reconnect to a server
// whose metadata has no action_dim).
func (r *Runner) StepSize() (int, bool) {
	if r.c == nil {
		return 0, false
	}
	if n, ok := r.c.MetadataActionDim(len(r.envs)); ok {
		return n, true
	}
	if r.stepBytes > 0 {
		n := 1
		for _, d := range r.stepShape {
			n *= d
		}
		return n, true
	}
	return 0, false
}

// Restarts counts reconnects the runner rode through.
func (r *Runner) Restarts() int { return r.restarts }

// Act returns this step's action for every env, written into out as
// [N, *da] of out.DType (converted from the server's dtype). out.Shape may
// be nil, in which case only its size is checked (and otherwise only its
// size and leading dimension). It infers for the envs whose chunk ran
// out, sending their rows of obs. Steps within chunks already held need
// no server: after the client is closed, Act and Report go on until a
// chunk runs out (the Report whose feedback cannot be sent, and the Act
// that must infer, return the client's KindClosed), and the rewards of
// those steps reach no one.
func (r *Runner) Act(obs *wire.Observation, out *wire.Array) error {
	if err := r.usable(); err != nil {
		return err
	}
	if r.acted {
		return &client.Error{Kind: client.KindOutOfOrder, Msg: "act called twice without a report in between (act, step the envs, report, act, ...)"}
	}
	if obs == nil || out == nil {
		return &client.Error{Kind: client.KindInvalid, Msg: "act needs an observation and an output array"}
	}
	if rows := obs.Rows(); rows >= 0 && rows != len(r.envs) {
		return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("observation has %d rows, the runner has %d envs", rows, len(r.envs))}
	}
	if err := obs.Validate(); err != nil {
		return &client.Error{Kind: client.KindInvalid, Msg: "act", Err: err}
	}
	// Check the output buffer before anything is sent, when its size is known.
	per, known := r.StepSize()
	if known && out.DType.Numeric() && len(out.Data) != len(r.envs)*per*out.DType.Size {
		return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("action output has %d bytes; %d envs x %d values of %s need %d", len(out.Data), len(r.envs), per, out.DType, len(r.envs)*per*out.DType.Size)}
	}
	// An interrupt ends Act even when it sends nothing (every env in the
	// middle of its chunk): a loop stopped by Ctrl-C must not go on
	// stepping for the rest of a chunk.
	if r.c.TakeInterrupt() {
		return &client.Error{Kind: client.KindInterrupted, Msg: "an interrupt was pending: no action was given and nothing was sent"}
	}
	budget := r.cfg.MaxRestarts
	if !r.adopted {
		// Chunks an earlier user left on the client (a runner freed while
		// the client was in a call, or the caller's own infers) are not
		// this runner's to feed back: they are given up, as Close gives
		// up its own, or every infer naming their envs would be refused
		// (SPEC 4.3: an env asks for a chunk only after its last one is
		// fed back). The client's next infer then reconnects. A client
		// in a call on another goroutine (misuse) gives up nothing: Act
		// sends nothing either, and the next Act tries again.
		if err := r.c.GiveUpOwed(); err != nil {
			return err
		}
		r.adopted = true
	}
	// The chunks' connection may be gone, and their feedback with it:
	// every env then starts a fresh chunk, as after a reconnect of its own.
	r.forgetReplaced()
	for attempt := 0; ; attempt++ {
		err := r.inferNeeded(obs)
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrReconnected) {
			if r.replaced && errors.Is(err, client.ErrOutOfOrder) {
				return &client.Error{Kind: client.KindOutOfOrder, Err: err, Msg: "the client's connection was replaced outside this runner " +
					"(by another runner over the same client, or by the client used directly), and this runner's chunks went with it; " +
					"its envs now hold the other user's chunks: use one runner at a time on a client, and free the old one first"}
			}
			return err
		}
		if errors.Is(err, client.ErrGivenUp) {
			// The reconnect the give-up above made: this runner's own
			// doing, not the server's, so not one of MaxRestarts.
			budget++
		} else {
			r.lostInARow++ // Report's check counts these too
		}
		if attempt >= budget {
			// Not ErrReconnected: a runner's caller never infers, and
			// cannot start again with one.
			ended := attempt + 1 - (budget - r.cfg.MaxRestarts) // less the give-up's own
			return &client.Error{Kind: client.KindConnect, Err: endOf(err), Msg: fmt.Sprintf(
				"the connection ended during each of %d infers in a row (the server ends every connection, or a proxy does); the last ended", ended)}
		}
		r.restart()
	}
	if err := r.writeActions(out); err != nil {
		if now, ok := r.StepSize(); ok && known && now != per {
			return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf(
				"the server's actions changed width across a reconnect during this act (%d values per env per step, were %d): act again with %d envs x %d values; the chunks are kept", now, per, len(r.envs), now)}
		}
		return err
	}
	r.acted = true
	return nil
}

// Abandon drops the client's connection and every chunk held, for a
// caller whose Act or Report broke off in the middle (the C API's, when
// the caller's memory faulted): what was owed on the connection is never
// sent (SPEC 7.6), as after a reconnect, and the next Act infers afresh
// for every env. Episodes go on; the chunks' steps are not fed back.
func (r *Runner) Abandon() { r.AbandonBecause(nil) }

// AbandonBecause is Abandon for a reason, why, which the ledger's close
// record gives (see client.Client.AbandonBecause).
func (r *Runner) AbandonBecause(why error) {
	r.c.AbandonBecause(why)
	r.forgetChunks() // the next Act's reconnect counts as the restart
	r.acted = false
}

// restart forgets every chunk after a reconnect: the server kept nothing
// (and a chunk buffer over keepChunk goes, as when a chunk ends). The
// action's shape is learned again: the server may have changed.
func (r *Runner) restart() {
	r.restarts++
	r.forgetChunks()
	r.conn = r.c.Reconnects()
}

// forgetChunks drops every env's chunk, keeping its episode.
func (r *Runner) forgetChunks() {
	for i := range r.envs {
		e := &r.envs[i]
		e.step, e.remaining, e.chunkSum = 0, 0, 0
		if cap(e.chunk) > keepChunk {
			r.freeChunk(i)
		}
	}
	r.stepBytes = 0
	r.ownInfer = false
}

func (r *Runner) inferNeeded(obs *wire.Observation) error {
	r.idx, r.rows, r.stepIDs, r.reuse = r.idx[:0], r.rows[:0], r.stepIDs[:0], r.reuse[:0]
	reuseOffered := r.c.ReuseOffered()
	anyReuse := false
	for i := range r.envs {
		if r.envs[i].remaining > 0 {
			continue
		}
		r.idx = append(r.idx, int64(i))
		r.rows = append(r.rows, i)
		r.stepIDs = append(r.stepIDs, r.envs[i].chunks)
		can := reuseOffered && r.ownInfer && r.c.CanReuse(int64(i))
		anyReuse = anyReuse || can
		r.reuse = append(r.reuse, can)
	}
	if len(r.idx) == 0 {
		return nil
	}
	r.req = wire.Infer{EnvIndices: r.idx, StepIDs: r.stepIDs, Obs: obs, ObsRows: r.rows}
	if reuseOffered {
		r.req.Reuse = r.reuse
	}
	// The chunks are copied out inside the client's call: a Close on
	// another goroutine waits for the copy instead of releasing the
	// receive buffer under it.
	err := r.c.InferFunc(&r.req, r.store)
	if err == nil {
		r.ownInfer = true
	}
	return err
}

// storeChunks copies each env's chunk out of the receive buffer, so that
// envs inferred at different times can be stepped together. The client
// has checked the action against the request and metadata (its shape is
// [H, n, *da] with H, n and every da >= 1, and its bytes are there). It
// runs inside the client's InferFunc, which abandons the action when it
// fails.
func (r *Runner) storeChunks(a *wire.Action) error {
	h, n := a.Horizon(), a.Envs()
	stepBytes := a.Chunk.RowBytes() / n // bytes of one env's one step
	if stepBytes != r.stepBytes || a.Chunk.DType != r.chunkType || !sameInts(r.stepShape, a.ActionShape()) {
		for i := range r.envs {
			if r.envs[i].remaining > 0 { // (envs in the request have none)
				// Envs mid-chunk hold steps of another shape, which one
				// output array cannot take.
				return &client.Error{Kind: client.KindProtocol, Msg: fmt.Sprintf("the server changed the action's per-step shape or dtype (%v %s, was %v %s) while env %d was in the middle of a chunk; the connection was dropped", a.ActionShape(), a.Chunk.DType, r.stepShape, r.chunkType, i)}
			}
		}
		r.stepBytes, r.chunkType = stepBytes, a.Chunk.DType
		r.stepShape = append(r.stepShape[:0], a.ActionShape()...)
	}
	r.horizon = h
	r.conn, r.replaced = r.c.Reconnects(), false
	size := h * stepBytes
	for j, env := range r.req.EnvIndices {
		e := &r.envs[env]
		if cap(e.chunk) < size {
			nb := r.alloc.Grow(e.chunk[:0], 0, size)
			if nb == nil {
				return &client.Error{Kind: client.KindNoMemory, Msg: fmt.Sprintf("no memory for env %d's action chunk of %d bytes; the connection was dropped and the next act reconnects", env, size)}
			}
			e.chunk = nb
		}
		e.chunk = e.chunk[:size]
		for k := 0; k < h; k++ {
			src := a.Chunk.Data[(k*n+j)*stepBytes:]
			copy(e.chunk[k*stepBytes:(k+1)*stepBytes], src[:stepBytes])
		}
		e.step, e.remaining, e.chunkSum = 0, h, 0
	}
	return nil
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (r *Runner) writeActions(out *wire.Array) error {
	per := 1
	for _, d := range r.stepShape {
		per *= d
	}
	want := len(r.envs) * per * out.DType.Size
	if !out.DType.Numeric() {
		return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("action output dtype %s is not numeric", out.DType)}
	}
	if len(out.Data) != want {
		return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("action output has %d bytes; %d envs x %d values of %s need %d", len(out.Data), len(r.envs), per, out.DType, want)}
	}
	if out.Shape != nil {
		if err := out.Check(); err != nil || len(out.Shape) < 1 || out.Shape[0] != len(r.envs) {
			return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("action output shape %v, want [%d, %v...]", out.Shape, len(r.envs), r.stepShape)}
		}
	}
	outStep := per * out.DType.Size
	for i := range r.envs {
		e := &r.envs[i]
		src := e.chunk[e.step*r.stepBytes:]
		if err := wire.Convert(out.Data[i*outStep:(i+1)*outStep], out.DType, src[:r.stepBytes], r.chunkType, per); err != nil {
			return &client.Error{Kind: client.KindInvalid, Msg: "converting the action", Err: err}
		}
	}
	return nil
}

// ErrShortBuffer is the cause (errors.Is) of Chunk's error, of
// KindBufferTooSmall, for an out array too small for the steps left (the
// count is returned with it).
var ErrShortBuffer = errors.New("the output holds fewer steps than the chunk has left")

// Chunk writes the rest of env's action chunk into out, converted to
// out.DType: the step the last Act gave it, then each step after it in
// the chunk, step after step, and returns how many steps that is. It is
// what a controller that plans ahead needs (a ROS 2 JointTrajectory of
// the chunk, say). Call it between Act and Report. An out too small for
// them all gets ErrShortBuffer (KindBufferTooSmall) with the count, so a
// caller can size it.
func (r *Runner) Chunk(env int, out *wire.Array) (steps int, err error) {
	if err := r.usable(); err != nil {
		return 0, err
	}
	if out == nil {
		return 0, &client.Error{Kind: client.KindInvalid, Msg: "chunk needs an output array"}
	}
	if !r.acted {
		return 0, &client.Error{Kind: client.KindOutOfOrder, Msg: "the chunk is read between act and report: its current step is the one act gave"}
	}
	if env < 0 || env >= len(r.envs) {
		return 0, &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("env %d is not one of the runner's %d envs", env, len(r.envs))}
	}
	if !out.DType.Numeric() {
		return 0, &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("chunk output dtype %s is not numeric", out.DType)}
	}
	e := &r.envs[env]
	per := 1
	for _, d := range r.stepShape {
		per *= d
	}
	steps = e.remaining
	if need := steps * per * out.DType.Size; len(out.Data) < need {
		// KindBufferTooSmall, so that client.KindOf does not call it a bug
		// of the library (KindInternal); errors.Is finds ErrShortBuffer.
		return steps, &client.Error{Kind: client.KindBufferTooSmall, Err: ErrShortBuffer, Msg: fmt.Sprintf(
			"chunk output has %d bytes for %d steps of %d values of %s, which need %d", len(out.Data), steps, per, out.DType, need)}
	}
	src := e.chunk[e.step*r.stepBytes : (e.step+steps)*r.stepBytes]
	if err := wire.Convert(out.Data[:steps*per*out.DType.Size], out.DType, src, r.chunkType, steps*per); err != nil {
		return 0, &client.Error{Kind: client.KindInvalid, Msg: "converting the chunk", Err: err}
	}
	return steps, nil
}

// Report records one step of every env: the observation it returned (the
// terminal one for an env that ended), its reward and done flags, and
// optionally whether a finished episode succeeded (success may be nil). It
// sends the feedback for every env whose chunk ended.
func (r *Runner) Report(next *wire.Observation, rewards []float64, terminated, truncated, success []bool) error {
	if err := r.usable(); err != nil {
		return err
	}
	if !r.acted {
		return &client.Error{Kind: client.KindOutOfOrder, Msg: "report called without an act before it"}
	}
	n := len(r.envs)
	if next == nil || len(rewards) != n || len(terminated) != n || len(truncated) != n || (success != nil && len(success) != n) {
		return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("Report needs an observation and %d rewards, terminated and truncated flags (and success, if given); got %d, %d, %d, %d", n, len(rewards), len(terminated), len(truncated), len(success))}
	}
	if rows := next.Rows(); rows >= 0 && rows != n {
		return &client.Error{Kind: client.KindInvalid, Msg: fmt.Sprintf("observation has %d rows, the runner has %d envs", rows, n)}
	}
	if err := next.Validate(); err != nil {
		return &client.Error{Kind: client.KindInvalid, Msg: "report", Err: err}
	}
	r.acted = false
	r.steps.Add(uint64(n))
	r.idx, r.rows, r.stepIDs, r.rewards = r.idx[:0], r.rows[:0], r.stepIDs[:0], r.rewards[:0]
	r.term, r.trunc = r.term[:0], r.trunc[:0]
	r.epRet, r.epLen, r.epSucc, r.epMask = r.epRet[:0], r.epLen[:0], r.epSucc[:0], r.epMask[:0]
	anyDone, ended := false, 0
	for i := range r.envs {
		e := &r.envs[i]
		e.step++
		e.remaining--
		e.chunkSum += rewards[i]
		e.epReturn += rewards[i]
		e.epLen++
		done := terminated[i] || truncated[i]
		if !done && e.remaining > 0 {
			continue
		}
		succ := success != nil && success[i]
		r.idx = append(r.idx, int64(i))
		r.rows = append(r.rows, i)
		r.stepIDs = append(r.stepIDs, e.chunks)
		r.rewards = append(r.rewards, float32(e.chunkSum))
		r.term = append(r.term, terminated[i])
		r.trunc = append(r.trunc, truncated[i])
		r.epRet = append(r.epRet, 0)
		r.epLen = append(r.epLen, 0)
		r.epSucc = append(r.epSucc, false)
		r.epMask = append(r.epMask, done)
		if done {
			anyDone = true
			ended++
			k := len(r.epRet) - 1
			r.epRet[k], r.epLen[k], r.epSucc[k] = e.epReturn, e.epLen, succ
			if r.cfg.OnEpisode != nil {
				r.cfg.OnEpisode(Episode{Env: i, Return: e.epReturn, Length: e.epLen, Success: succ})
			}
			e.epReturn, e.epLen, e.chunks = 0, 0, 0
		} else {
			e.chunks++
		}
		e.step, e.remaining, e.chunkSum = 0, 0, 0
		if cap(e.chunk) > keepChunk {
			r.freeChunk(i)
		}
	}
	if ended > 0 {
		r.episodes.Add(uint64(ended))
	}
	if len(r.idx) == 0 {
		return nil
	}
	if r.forgetReplaced() {
		// Not sent: the chunks' connection was replaced outside this
		// runner (see conn), which dropped their feedback (SPEC 7.6). On
		// the new connection the same envs may hold another user's
		// chunks, which this feedback would pass for the answer to.
		return nil
	}
	r.fb = wire.Feedback{
		EnvIndices: r.idx, StepIDs: r.stepIDs, Obs: next, ObsRows: r.rows,
		Rewards: r.rewards, Terminated: r.term, Truncated: r.trunc,
	}
	if anyDone {
		r.episode = wire.Episode{Return: r.epRet, Length: r.epLen, Mask: r.epMask}
		if success != nil {
			r.episode.Success = r.epSucc
		}
		r.fb.Episode = &r.episode
	}
	err := r.c.Feedback(&r.fb)
	if errors.Is(err, client.ErrReconnected) {
		// The feedback was dropped (SPEC 7.6); every env starts a fresh
		// chunk at the next Act.
		r.restart()
		if r.lostInARow++; r.lostInARow > r.cfg.MaxRestarts {
			return r.lostTooOften(err)
		}
		return nil
	}
	if err == nil {
		r.lostInARow = 0
	}
	return err
}

// lostTooOften is Report's error after more than MaxRestarts connections
// in a row ended before a feedback went through; err is the last end.
// The count starts again: a caller that goes on gets MaxRestarts more.
func (r *Runner) lostTooOften(err error) error {
	n := r.lostInARow
	r.lostInARow = 0
	return &client.Error{Kind: client.KindConnect, Err: endOf(err), Msg: fmt.Sprintf(
		"%d connections in a row ended before a feedback went through (the server ends each one after an action, or a proxy does): no feedback reaches the server; the last ended", n)}
}

// endOf is why the connection ended, from a client's ErrReconnected.
func endOf(err error) error {
	if ce := (*client.Error)(nil); errors.As(err, &ce) && ce.Err != nil {
		return ce.Err
	}
	return err
}
