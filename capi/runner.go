package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
)

// runnerHandle is what a plugrl_runner token stands for. It borrows its
// client's handle: calls check that the client is still open.
type runnerHandle struct {
	handleBase
	client *clientHandle
	r      *runner.Runner
	n      int

	obs     obsScratch
	out     wire.Array
	rewards []float64
	term    []bool
	trunc   []bool
	succ    []bool

	onEpisode C.plugrl_episode_fn
	user      unsafe.Pointer

	// borrowed: this call holds the client (borrow), until done.
	borrowed bool
}

// done is handleBase.done for a runner: the client a call borrowed is
// left after the panic's recover, so that a fault's abandon (internal)
// drops the connection while the client is still the runner's, and before
// the runner is left, so that a plugrl_runner_free waiting for the call
// finds the client free and gives up what the runner owed on it.
func (h *runnerHandle) done(st *C.plugrl_status) {
	if r := recover(); r != nil {
		h.internal(r, st)
	}
	h.midway = false
	if h.borrowed {
		h.borrowed = false
		h.client.leave()
	}
	h.leave()
}

func lookupRunner(p *C.plugrl_runner) *runnerHandle { return runners.lookup(unsafe.Pointer(p)) }

// useRunner enters a runner handle and its client for a call.
func useRunner(p *C.plugrl_runner) (*runnerHandle, C.plugrl_status) {
	h := lookupRunner(p)
	if h == nil {
		return nil, C.PLUGRL_CLOSED
	}
	if st := h.enter(); st != C.PLUGRL_OK {
		return nil, st
	}
	if h.client.closed.Load() {
		h.setMsg(client.KindClosed.String() + ": this runner's client was closed; free the runner")
		h.leave()
		return nil, C.PLUGRL_CLOSED
	}
	return h, C.PLUGRL_OK
}

//export plugrl__go_runner_new
func plugrl__go_runner_new(cp *C.plugrl_client, numEnvs C.size_t, out **C.plugrl_runner) (st C.plugrl_status) {
	zero(out)
	c, st := use(cp)
	if st != C.PLUGRL_OK {
		return st
	}
	defer c.done(&st)
	if out == nil {
		return c.invalid("plugrl_runner_new: runner is NULL")
	}
	*out = nil
	if numEnvs == 0 || numEnvs > 1<<20 {
		return c.invalid("plugrl_runner_new: num_envs is %d; want 1..%d", numEnvs, 1<<20)
	}
	// Go's allocation of the runner's state aborts the process when the
	// memory is not there: ask malloc for as much first (75 MB at most).
	if bytes := C.size_t(numEnvs) * C.size_t(runner.EnvStateBytes); bytes > 1<<20 {
		p := C.malloc(bytes)
		if p == nil {
			return c.noMemory("plugrl_runner_new: no memory for the state of %d envs (%d bytes)", numEnvs, bytes)
		}
		C.free(p)
	}
	h := &runnerHandle{client: c, n: int(numEnvs)}
	r, err := runner.New(c.c, runner.Config{Envs: h.n, OnEpisode: h.episode, Alloc: cAllocator{}})
	if err != nil {
		return c.fail(err)
	}
	h.r = r
	h.abandon = r.AbandonBecause
	// An interrupt of the runner is one of its client: the call it waits
	// in is the client's.
	id, ok := register(h, c.id)
	if !ok {
		r.Close() // nothing owed yet: frees whatever chunks it holds
		return c.noMemory("no memory for another handle")
	}
	*out = C.plugrl__runner_token(C.uintptr_t(id))
	return C.PLUGRL_OK
}

func (h *runnerHandle) episode(e runner.Episode) {
	if h.onEpisode != nil {
		succ := 0
		if e.Success {
			succ = 1
		}
		// A free or close of the runner or its client from the callback
		// is refused (BUSY) instead of waiting for this call for ever.
		self := uint64(C.plugrl__thread_self())
		h.inCallback.Store(self)
		h.client.inCallback.Store(self)
		C.plugrl__call_episode(h.onEpisode, h.user, C.int64_t(e.Env), C.double(e.Return), C.int64_t(e.Length), C.int(succ))
		h.client.inCallback.Store(0)
		h.inCallback.Store(0)
	}
}

//export plugrl__go_runner_free
func plugrl__go_runner_free(p *C.plugrl_runner) C.plugrl_status {
	st := runners.close(unsafe.Pointer(p))
	if st == C.PLUGRL_OK {
		collectAfterClose()
	}
	return st
}

// stop interrupts a call running on another thread, for free. Only a
// blocked call is interrupted: the client lives on, and must not be left
// with an interrupt pending for its next user.
func (h *runnerHandle) stop() { h.client.interruptBlocked() }

// release frees the runner. Feedback it still owed is given up
// (runner.Close, client.GiveUpOwed): the client's next infer reconnects
// instead of being refused as out of order, and its close closes in
// order. When the client is in a call on another thread, or closing, it
// is left alone and only the chunks are freed.
func (h *runnerHandle) release() {
	if h.client.enter() != C.PLUGRL_OK {
		h.r.FreeChunks()
		return
	}
	defer h.client.leave()
	h.r.Close()
}

//export plugrl__go_runner_errmsg
func plugrl__go_runner_errmsg(p *C.plugrl_runner) *C.plugrl_cchar {
	return runners.errmsg(unsafe.Pointer(p))
}

//export plugrl__go_runner_on_episode
func plugrl__go_runner_on_episode(p *C.plugrl_runner, fn C.plugrl_episode_fn, user unsafe.Pointer) (st C.plugrl_status) {
	h, st := useRunner(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	h.onEpisode, h.user = fn, user
	return C.PLUGRL_OK
}

//export plugrl__go_runner_step_size
func plugrl__go_runner_step_size(p *C.plugrl_runner, stepSize *C.int64_t, known *C.int) (st C.plugrl_status) {
	zero(stepSize)
	zero(known)
	h, st := useRunner(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if stepSize == nil || known == nil {
		return h.invalid("plugrl_runner_step_size: step_size and known must not be NULL")
	}
	*stepSize, *known = 0, 0
	if v, ok := h.r.StepSize(); ok {
		*stepSize, *known = C.int64_t(v), 1
	}
	return C.PLUGRL_OK
}

//export plugrl__go_runner_chunk
func plugrl__go_runner_chunk(p *C.plugrl_runner, env C.int64_t, dst unsafe.Pointer, size C.size_t, dtype C.plugrl_dtype, steps *C.int64_t) (st C.plugrl_status) {
	zero(steps)
	h, st := useRunner(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if steps == nil {
		return h.invalid("plugrl_runner_chunk: steps must not be NULL")
	}
	*steps = 0
	d, ok := dtypeOf(dtype)
	if !ok {
		return h.invalid(unknownDTypeMsg, int(dtype))
	}
	if dst == nil && size != 0 {
		return h.invalid("plugrl_runner_chunk: dst is NULL but dst_size is %d", size)
	}
	if env < 0 || int64(env) >= int64(h.n) {
		return h.invalid("plugrl_runner_chunk: env %d is not one of the runner's %d envs", int64(env), h.n)
	}
	dstLen, ok := bufferSize(size)
	if !ok {
		return h.invalid(badSizeMsg, "plugrl_runner_chunk: dst_size", uint64(size))
	}
	out := wire.Array{DType: d}
	if dst != nil {
		out.Data = unsafe.Slice((*byte)(dst), dstLen)
	}
	n, err := h.r.Chunk(int(env), &out)
	*steps = C.int64_t(n)
	if errors.Is(err, runner.ErrShortBuffer) {
		h.setMsg(err.Error()) // "buffer too small: ...": its Kind's name leads
		return C.PLUGRL_BUFFER_TOO_SMALL
	}
	if err != nil {
		return h.fail(err)
	}
	return C.PLUGRL_OK
}

// borrow marks the runner's client busy for the call, so the client is not
// used directly at the same time.
func (h *runnerHandle) borrow() C.plugrl_status {
	if st := h.client.enter(); st != C.PLUGRL_OK {
		switch st {
		case C.PLUGRL_BUSY:
			h.setMsg("busy: the runner's client is in use by another call")
		case C.PLUGRL_CLOSED:
			h.setMsg(client.KindClosed.String() + ": the runner's client is closing or closed; free the runner")
		}
		return st
	}
	// The runner's infers (and the reconnects of its acts and reports)
	// replace or free the receive buffer that the client's last action
	// views: plugrl_action_copy on the client afterwards is out of order,
	// as after any other infer, instead of reading freed memory (a fault
	// that ended the process, for an action that malloc had mapped).
	h.client.action = nil
	h.borrowed = true // done leaves the client
	h.midway = true   // the runner works from here: a fault drops the connection
	if h.client.takeInterrupt() {
		h.client.c.Interrupt() // pending now: the next blocking call takes it
	}
	return C.PLUGRL_OK
}

//export plugrl__go_runner_act
func plugrl__go_runner_act(p *C.plugrl_runner, obs *C.plugrl_cobservation, actions unsafe.Pointer, size C.size_t, dtype C.plugrl_dtype) (st C.plugrl_status) {
	h, st := useRunner(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	d, ok := dtypeOf(dtype)
	if !ok {
		return h.invalid(unknownDTypeMsg, int(dtype))
	}
	if actions == nil || size == 0 {
		what := "actions is NULL"
		if actions != nil {
			what = "actions_size is 0"
		}
		if per, ok := h.r.StepSize(); ok {
			return h.invalid("plugrl_runner_act: %s; want a buffer of %d envs x %d values of the dtype asked for", what, h.n, per)
		}
		return h.invalid("plugrl_runner_act: %s; want a buffer of %d envs x the step size (plugrl_runner_step_size)", what, h.n)
	}
	actionsLen, ok := bufferSize(size)
	if !ok {
		return h.invalid(badSizeMsg, "plugrl_runner_act: actions_size", uint64(size))
	}
	o, err := h.obs.convert(obs, "obs", h.n)
	if err != nil {
		return h.invalid("plugrl_runner_act: %v", err)
	}
	if st := h.borrow(); st != C.PLUGRL_OK {
		return st
	}
	h.out = wire.Array{DType: d, Data: unsafe.Slice((*byte)(actions), actionsLen)}
	if err := h.r.Act(o, &h.out); err != nil {
		return h.fail(err)
	}
	return C.PLUGRL_OK
}

//export plugrl__go_runner_report
func plugrl__go_runner_report(p *C.plugrl_runner, next *C.plugrl_cobservation, rewards *C.plugrl_cdouble,
	terminated *C.plugrl_cuint8, truncated *C.plugrl_cuint8, success *C.plugrl_cuint8) (st C.plugrl_status) {
	h, st := useRunner(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if rewards == nil || terminated == nil || truncated == nil {
		return h.invalid("plugrl_runner_report: rewards, terminated and truncated must each point to num_envs = %d values", h.n)
	}
	o, err := h.obs.convert(next, "next_obs", h.n)
	if err != nil {
		return h.invalid("plugrl_runner_report: %v", err)
	}
	// The rewards are copied, as the flags are, before the runner steps:
	// a fault reading them then changes nothing (no step counted, no
	// connection dropped), and the caller may report again.
	h.rewards = append(h.rewards[:0], unsafe.Slice((*float64)(unsafe.Pointer(rewards)), h.n)...)
	h.term = flags(h.term, terminated, h.n)
	h.trunc = flags(h.trunc, truncated, h.n)
	var succ []bool
	if success != nil {
		h.succ = flags(h.succ, success, h.n)
		succ = h.succ
	}
	if st := h.borrow(); st != C.PLUGRL_OK {
		return st
	}
	if err := h.r.Report(o, h.rewards, h.term, h.trunc, succ); err != nil {
		return h.fail(err)
	}
	return C.PLUGRL_OK
}
