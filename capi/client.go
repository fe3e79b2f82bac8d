package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/wire"
)

// clientHandle is what a plugrl_client token stands for.
type clientHandle struct {
	handleBase
	c       *client.Client                // from plugrl_open's start; release closes it
	cl      atomic.Pointer[client.Client] // c once connected, for other goroutines (interrupt, stats)
	opening atomic.Pointer[client.Client] // c while plugrl_open connects, for interrupt
	openErr error                         // why plugrl_open failed
	// early is set by every interrupt of the handle, before it looks for
	// a client to interrupt: one raised while plugrl_open has not made its
	// client yet (its options, its ledger file) finds none, and open takes
	// this once it has published the client. Setting it before the look,
	// and open taking it after publishing, means that one of the two sees
	// the other, whatever their order.
	early atomic.Bool

	obs    obsScratch
	req    wire.Infer
	fb     wire.Feedback
	ep     wire.Episode
	reuse  []bool
	term   []bool
	trunc  []bool
	succ   []bool
	mask   []bool
	action *wire.Action // the last action, valid until the next call

	shape  *C.int64_t // PLUGRL_MAX_DIMS entries
	envIDs cBuffer
	copy   cBuffer // an aligned copy of an action the decoder could not align
}

func lookupClient(p *C.plugrl_client) *clientHandle { return clients.lookup(unsafe.Pointer(p)) }

// interrupt interrupts the call running on the client, if any, or the
// next blocking one (see client.Interrupt). Any goroutine.
func (h *clientHandle) interrupt() {
	h.early.Store(true)
	if c := h.target(); c != nil {
		c.Interrupt()
	}
}

// target is the client an interrupt acts on: the connected one, or the
// one plugrl_open is connecting.
func (h *clientHandle) target() *client.Client {
	if c := h.cl.Load(); c != nil {
		return c
	}
	return h.opening.Load()
}

// interruptBlocked interrupts the call blocked on the client now, if any,
// and leaves no interrupt pending (see client.InterruptBlocked).
func (h *clientHandle) interruptBlocked() {
	if c := h.target(); c != nil {
		c.InterruptBlocked()
	}
}

// outOfDescriptors reports whether err is the process's want of a file
// descriptor (EMFILE, ENFILE): plugrl_open says PLUGRL_CONNECT_FAILED for
// it, whatever it was opening (plugrl.h, "File descriptors").
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// noDescriptor fails plugrl_open for a file it could not open for want of
// a descriptor: the process's state, not a wrong argument, whatever kind
// err was given (client.New's is KindInvalid, whose "invalid argument: "
// prefix is left out).
func (h *clientHandle) noDescriptor(err error) C.plugrl_status {
	msg := err.Error()
	var e *client.Error
	if errors.As(err, &e) && e.Err != nil {
		msg = e.Msg + ": " + e.Err.Error()
	}
	h.setMsg("connection failed: the process is out of file descriptors: " + msg)
	return C.PLUGRL_CONNECT_FAILED
}

// interruptsAtEntry is plugrl_interrupt_all's count when plugrl_open began.
//
//export plugrl__go_open
func plugrl__go_open(o *C.plugrl_coptions, out **C.plugrl_client, interruptsAtEntry C.uint64_t) (st C.plugrl_status) {
	defer recoverPlain(&st)
	tameGC()
	if out == nil {
		return C.PLUGRL_INVALID_ARGUMENT
	}
	*out = nil
	h := &clientHandle{shape: (*C.int64_t)(C.calloc(C.PLUGRL_MAX_DIMS, 8))}
	if h.shape == nil {
		return C.PLUGRL_NO_MEMORY
	}
	// Busy until open returns: the token is out (in *out) before the
	// dial, and a plugrl_close racing with this open (misuse, but
	// possible) waits for it instead of freeing what it uses.
	h.busy.Store(true)
	defer h.busy.Store(false)
	id, ok := register(h, 0)
	if !ok {
		C.free(unsafe.Pointer(h.shape))
		return C.PLUGRL_NO_MEMORY
	}
	*out = C.plugrl__client_token(C.uintptr_t(id))
	// Every failed open leaves its reason for the calls after it (use
	// quotes it): a fault reading the caller's options, which recoverTo
	// below turns into the status and message, left openErr nil, and
	// every later call said "plugrl_open failed (<nil>)". Deferred before
	// recoverTo, so that it runs after it.
	defer func() {
		if st != C.PLUGRL_OK && h.openErr == nil {
			h.openErr = errors.New(h.message())
		}
	}()
	defer h.recoverTo(&st)
	if C.plugrl__interrupt_all_count() != interruptsAtEntry {
		// A plugrl_interrupt_all (a SIGINT handler's) came after this open
		// began but before its handle was there to raise: it ends the
		// open all the same, as one a moment later would. Those from now
		// on raise the handle.
		h.early.Store(true)
	}

	var logf func(client.Level, string)
	if o != nil && uintptr(o.size) >= unsafe.Offsetof(o.log_user)+unsafe.Sizeof(o.log_user) && o.log != nil {
		fn, user := o.log, o.log_user
		logf = func(l client.Level, msg string) {
			cs := C.CString(msg)
			// A plugrl_close of this client, or plugrl_runner_free of a
			// runner on it, from the callback is refused (BUSY) instead
			// of waiting for ever for the call the callback is inside of.
			prev := h.inCallback.Swap(uint64(C.plugrl__thread_self()))
			C.plugrl__call_log(fn, user, C.int(l), cs)
			h.inCallback.Store(prev)
			C.free(unsafe.Pointer(cs))
		}
	}
	if err := startInterruptWatcher(); err != nil {
		// Out of descriptors, most likely: the connection would need one
		// more anyway. The handle is there to say so.
		h.openErr = err
		h.setMsg("connection failed: " + err.Error())
		return C.PLUGRL_CONNECT_FAILED
	}
	opts, err := goOptions(o, logf)
	if err != nil {
		h.openErr = err
		if outOfDescriptors(err) { // the CA file's open
			return h.noDescriptor(err)
		}
		h.setMsg("invalid argument: " + err.Error())
		return C.PLUGRL_INVALID_ARGUMENT
	}
	// The handlers installed since this thread's first call get SA_ONSTACK
	// (helpers.c, plugrl__onstack_all): here, once the options are good,
	// rather than before every open, since the pass costs about 15 us (60
	// sigaction calls) and an open refused for its options is made in a
	// loop by some callers (hostile.c's tokens case: 4.2 million of them,
	// 15.8 us per open and close with the pass before every open, 0.94 us
	// without, as before it).
	C.plugrl__onstack_all()
	c, err := client.New(opts)
	if err != nil {
		h.openErr = err
		if outOfDescriptors(err) { // the ledger file's open
			return h.noDescriptor(err)
		}
		return h.fail(err)
	}
	if opts.LedgerPath != "" {
		spareLedgerP()
	}
	// Published before connecting, so that plugrl_interrupt on the token
	// (already in *out) ends the connect, and plugrl_close releases it.
	h.c = c
	h.abandon = c.AbandonBecause
	h.opening.Store(c)
	if h.takeInterrupt() || h.early.Swap(false) { // raised before the client was there to take it
		c.Interrupt()
	}
	h.midway = true
	err = c.Connect(context.Background())
	if err == nil {
		h.cl.Store(c) // before opening is cleared: an interrupt always finds a client
	}
	h.opening.Store(nil)
	if err != nil {
		h.openErr = err
		return h.fail(err)
	}
	return C.PLUGRL_OK
}

//export plugrl__go_close
func plugrl__go_close(p *C.plugrl_client) C.plugrl_status {
	st := clients.close(unsafe.Pointer(p))
	if st == C.PLUGRL_OK {
		collectAfterClose()
	}
	return st
}

// stop interrupts a call running on another thread (or a runner's on this
// client), for close.
func (h *clientHandle) stop() { h.interrupt() }

func (h *clientHandle) release() {
	if h.c != nil {
		h.c.Close()
	}
	h.envIDs.free()
	h.copy.free()
	C.free(unsafe.Pointer(h.shape))
	h.shape = nil
}

//export plugrl__go_errmsg
func plugrl__go_errmsg(p *C.plugrl_client) *C.plugrl_cchar { return clients.errmsg(unsafe.Pointer(p)) }

// use enters a client handle for a call. On a non-OK status the call
// returns it at once (and must not call leave).
func use(p *C.plugrl_client) (*clientHandle, C.plugrl_status) {
	h := lookupClient(p)
	if h == nil {
		return nil, C.PLUGRL_CLOSED
	}
	if st := h.enter(); st != C.PLUGRL_OK {
		return nil, st
	}
	if h.c == nil || h.openErr != nil { // the client exists before it connects (plugrl_open sets it first)
		h.setMsg(fmt.Sprintf("connection failed: this handle's plugrl_open failed (%v); close it", h.openErr))
		h.leave()
		return nil, C.PLUGRL_CONNECT_FAILED
	}
	if h.takeInterrupt() {
		h.c.Interrupt() // pending now: the next blocking call takes it
	}
	return h, C.PLUGRL_OK
}

//export plugrl__go_metadata_int
func plugrl__go_metadata_int(p *C.plugrl_client, key *C.plugrl_cchar, value *C.int64_t, present *C.int) (st C.plugrl_status) {
	zero(value)
	zero(present)
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if key == nil || value == nil || present == nil {
		return h.invalid("plugrl_metadata_int needs key, value and present (none may be NULL)")
	}
	*present, *value = 0, 0
	raw, ok := h.c.Metadata().Lookup(goString(key))
	if !ok {
		return C.PLUGRL_OK
	}
	s, _, err := wire.DecodeScalar(raw)
	if err != nil {
		return C.PLUGRL_OK
	}
	if v, ok := s.AsInt(); ok && s.Kind != 'b' {
		*value, *present = C.int64_t(v), 1
	}
	return C.PLUGRL_OK
}

// copyOut copies s and a NUL into (buf, size), with *length = len(s).
func (h *clientHandle) copyOut(s []byte, buf *C.char, size C.size_t, length *C.size_t) C.plugrl_status {
	if length != nil {
		*length = C.size_t(len(s))
	}
	if buf == nil && size == 0 {
		return C.PLUGRL_OK
	}
	if buf == nil {
		return h.invalid("buf is NULL but size is %d", size)
	}
	n, ok := bufferSize(size)
	if !ok {
		return h.invalid(badSizeMsg, "size", uint64(size))
	}
	if n <= len(s) {
		if size > 0 {
			*buf = 0
		}
		h.setMsg(fmt.Sprintf("buffer too small: the value needs %d bytes with its NUL, the buffer has %d", len(s)+1, size))
		return C.PLUGRL_BUFFER_TOO_SMALL
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), n)
	dst[copy(dst, s)] = 0
	return C.PLUGRL_OK
}

// clearOut sets a metadata lookup's outputs to "not present" before it
// looks: what the caller sees if the key is absent.
func clearOut(present *C.int, length *C.size_t) {
	*present = 0
	if length != nil {
		*length = 0
	}
}

//export plugrl__go_metadata_string
func plugrl__go_metadata_string(p *C.plugrl_client, key *C.plugrl_cchar, buf *C.char, size C.size_t, length *C.size_t, present *C.int) (st C.plugrl_status) {
	zero(length)
	zero(present)
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if key == nil || present == nil {
		return h.invalid("plugrl_metadata_string needs key and present (neither may be NULL)")
	}
	clearOut(present, length)
	raw, ok := h.c.Metadata().Lookup(goString(key))
	if !ok {
		return C.PLUGRL_OK
	}
	s, ok := wire.StringValue(raw)
	if !ok {
		return C.PLUGRL_OK
	}
	*present = 1
	return h.copyOut(s, buf, size, length)
}

//export plugrl__go_metadata_has_feature
func plugrl__go_metadata_has_feature(p *C.plugrl_client, feature *C.plugrl_cchar, present *C.int) (st C.plugrl_status) {
	zero(present)
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if feature == nil || present == nil {
		return h.invalid("plugrl_metadata_has_feature needs feature and present (neither may be NULL)")
	}
	*present = 0
	if h.c.Metadata().Has(goString(feature)) {
		*present = 1
	}
	return C.PLUGRL_OK
}

//export plugrl__go_metadata_json
func plugrl__go_metadata_json(p *C.plugrl_client, key *C.plugrl_cchar, buf *C.char, size C.size_t, length *C.size_t, present *C.int) (st C.plugrl_status) {
	zero(length)
	zero(present)
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if present == nil {
		return h.invalid("plugrl_metadata_json needs present (not NULL)")
	}
	clearOut(present, length)
	raw := h.c.Metadata().Raw
	if key != nil {
		var ok bool
		if raw, ok = h.c.Metadata().Lookup(goString(key)); !ok {
			return C.PLUGRL_OK
		}
	}
	js, _, err := wire.AppendJSON(nil, raw)
	if err != nil {
		h.setMsg("protocol error: metadata value cannot be shown as JSON: " + err.Error())
		return C.PLUGRL_PROTOCOL_ERROR
	}
	*present = 1
	return h.copyOut(js, buf, size, length)
}

//export plugrl__go_infer
func plugrl__go_infer(p *C.plugrl_client, envIndices *C.plugrl_cint64, stepIDs *C.plugrl_cint64, n C.size_t,
	obs *C.plugrl_cobservation, reuse *C.plugrl_cuint8, action *C.plugrl_action) (st C.plugrl_status) {
	zero(action)
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	h.action = nil
	if action == nil {
		return h.invalid("plugrl_infer: action is NULL; pass a plugrl_action to receive the chunk")
	}
	*action = C.plugrl_action{}
	if n == 0 || n > 1<<20 {
		return h.invalid("plugrl_infer: n is %d; want 1..%d envs", n, 1<<20)
	}
	if envIndices == nil || stepIDs == nil {
		return h.invalid("plugrl_infer: env_indices and step_ids must point to n = %d values each", n)
	}
	o, err := h.obs.convert(obs, "obs", int(n))
	if err != nil {
		return h.invalid("plugrl_infer: %v", err)
	}
	h.req = wire.Infer{EnvIndices: int64s(envIndices, int(n)), StepIDs: int64s(stepIDs, int(n)), Obs: o}
	if reuse != nil {
		h.reuse = flags(h.reuse, reuse, int(n))
		h.req.Reuse = h.reuse
	}
	h.midway = true
	a, err := h.c.Infer(&h.req)
	if err != nil {
		return h.fail(err)
	}
	return h.exportAction(a, action)
}

// exportAction fills the caller's plugrl_action with views of C memory.
func (h *clientHandle) exportAction(a *wire.Action, out *C.plugrl_action) C.plugrl_status {
	dt, ok := cDTypeOf(a.Chunk.DType)
	if !ok {
		h.setMsg(fmt.Sprintf("protocol error: action dtype %s has no plugrl_dtype", a.Chunk.DType))
		return C.PLUGRL_PROTOCOL_ERROR
	}
	data := unsafe.Pointer(h.shape) // any valid pointer for an empty chunk
	if len(a.Chunk.Data) > 0 {
		data = unsafe.Pointer(&a.Chunk.Data[0])
		if !a.Chunk.Aligned() { // cannot happen for numpy's encoding; kept correct anyway
			data = h.copy.reserve(len(a.Chunk.Data))
			if data == nil {
				return h.noMemory("no memory for an aligned copy of the %d-byte action", len(a.Chunk.Data))
			}
			copy(unsafe.Slice((*byte)(data), len(a.Chunk.Data)), a.Chunk.Data)
		}
	}
	shape := unsafe.Slice((*int64)(unsafe.Pointer(h.shape)), C.PLUGRL_MAX_DIMS)
	step := int64(1)
	for i, d := range a.Chunk.Shape {
		shape[i] = int64(d)
		if i >= 2 {
			step *= int64(d)
		}
	}
	ids := h.envIDs.reserve(8 * (len(a.EnvIDs) + 1))
	if ids == nil {
		return h.noMemory("no memory for the action's %d env_ids", len(a.EnvIDs))
	}
	copy(unsafe.Slice((*int64)(ids), len(a.EnvIDs)), a.EnvIDs)
	*out = C.plugrl_action{
		data:      data,
		dtype:     dt,
		ndim:      C.int32_t(len(a.Chunk.Shape)),
		shape:     h.shape,
		env_ids:   (*C.int64_t)(ids),
		horizon:   C.int64_t(a.Horizon()),
		num_envs:  C.int64_t(a.Envs()),
		step_size: C.int64_t(step),
	}
	h.action = a
	return C.PLUGRL_OK
}

//export plugrl__go_action_copy
func plugrl__go_action_copy(p *C.plugrl_client, dst unsafe.Pointer, dstSize C.size_t, dtype C.plugrl_dtype) (st C.plugrl_status) {
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if h.action == nil {
		h.setMsg("call out of order: plugrl_action_copy needs an action: call it right after a successful plugrl_infer")
		return C.PLUGRL_OUT_OF_ORDER
	}
	d, ok := dtypeOf(dtype)
	if !ok {
		return h.invalid(unknownDTypeMsg, int(dtype))
	}
	size, ok := bufferSize(dstSize)
	if !ok {
		return h.invalid(badSizeMsg, "plugrl_action_copy: dst_size", uint64(dstSize))
	}
	a := &h.action.Chunk
	count := len(a.Data) / a.DType.Size
	if size < count*d.Size {
		if length := count * d.Size; length > 0 {
			h.setMsg(fmt.Sprintf("buffer too small: plugrl_action_copy's dst has %d bytes; the action's %d elements of %s need %d", dstSize, count, d, length))
		}
		return C.PLUGRL_BUFFER_TOO_SMALL
	}
	if dst == nil && count > 0 {
		return h.invalid("plugrl_action_copy: dst is NULL")
	}
	if count == 0 {
		return C.PLUGRL_OK
	}
	if err := wire.Convert(unsafe.Slice((*byte)(dst), count*d.Size), d, a.Data, a.DType, count); err != nil {
		return h.invalid("plugrl_action_copy: %v", err)
	}
	return C.PLUGRL_OK
}

//export plugrl__go_feedback
func plugrl__go_feedback(p *C.plugrl_client, envIndices *C.plugrl_cint64, stepIDs *C.plugrl_cint64, m C.size_t,
	next *C.plugrl_cobservation, rewards *C.plugrl_cfloat, terminated *C.plugrl_cuint8, truncated *C.plugrl_cuint8,
	episode *C.plugrl_cepisode) (st C.plugrl_status) {
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	h.action = nil
	if m == 0 || m > 1<<20 {
		return h.invalid("plugrl_feedback: m is %d; want 1..%d envs", m, 1<<20)
	}
	if envIndices == nil || stepIDs == nil || rewards == nil || terminated == nil || truncated == nil {
		return h.invalid("plugrl_feedback: env_indices, step_ids, rewards, terminated and truncated must each point to m = %d values", m)
	}
	o, err := h.obs.convert(next, "next_obs", int(m))
	if err != nil {
		return h.invalid("plugrl_feedback: %v", err)
	}
	n := int(m)
	h.term = flags(h.term, terminated, n)
	h.trunc = flags(h.trunc, truncated, n)
	h.fb = wire.Feedback{
		EnvIndices: int64s(envIndices, n), StepIDs: int64s(stepIDs, n), Obs: o,
		Rewards:    unsafe.Slice((*float32)(unsafe.Pointer(rewards)), n),
		Terminated: h.term, Truncated: h.trunc,
	}
	if episode != nil {
		if episode.returns == nil || episode.lengths == nil || episode.mask == nil {
			return h.invalid("plugrl_feedback: episode needs returns, lengths and mask (success may be NULL)")
		}
		h.mask = flags(h.mask, (*C.plugrl_cuint8)(episode.mask), n)
		h.ep = wire.Episode{
			Return: unsafe.Slice((*float64)(unsafe.Pointer(episode.returns)), n),
			Length: unsafe.Slice((*int64)(unsafe.Pointer(episode.lengths)), n),
			Mask:   h.mask,
		}
		if episode.success != nil {
			h.succ = flags(h.succ, (*C.plugrl_cuint8)(episode.success), n)
			h.ep.Success = h.succ
		}
		h.fb.Episode = &h.ep
	}
	h.midway = true
	if err := h.c.Feedback(&h.fb); err != nil {
		return h.fail(err)
	}
	return C.PLUGRL_OK
}

//export plugrl__go_can_reuse
func plugrl__go_can_reuse(p *C.plugrl_client, env C.int64_t, yes *C.int) (st C.plugrl_status) {
	zero(yes)
	h, st := use(p)
	if st != C.PLUGRL_OK {
		return st
	}
	defer h.done(&st)
	if yes == nil {
		return h.invalid("plugrl_can_reuse: yes is NULL")
	}
	*yes = 0
	if env < 0 {
		return h.invalid("plugrl_can_reuse: env %d; env indices are 0 or more", int64(env))
	}
	if h.c.CanReuse(int64(env)) {
		*yes = 1
	}
	return C.PLUGRL_OK
}
