package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
)

// statsV1 is sizeof(plugrl_statistics) in its first version: the smallest
// size a caller may pass. It must not change when fields are appended.
const statsV1 = unsafe.Offsetof(C.plugrl_statistics{}.env_steps) + unsafe.Sizeof(C.plugrl_statistics{}.env_steps)

// Stats calls do not enter the handle (no busy flag): any thread may call
// them at any time, also during a call on the handle or while it closes.
// They read only the core's atomic counters, which live in Go memory as
// long as the handle's client does.

//export plugrl__go_stats
func plugrl__go_stats(p *C.plugrl_client, out *C.plugrl_statistics) (st C.plugrl_status) {
	defer recoverPlain(&st)
	h := lookupClient(p)
	if h == nil || h.closing.Load() {
		return C.PLUGRL_CLOSED
	}
	defer h.recoverStats(&st)
	if st := checkStatsOut(&h.handleBase, out, "plugrl_stats"); st != C.PLUGRL_OK {
		return st
	}
	c := h.cl.Load()
	if c == nil {
		return C.PLUGRL_CONNECT_FAILED // open failed (or is still running on another thread)
	}
	var full C.plugrl_statistics
	fillStats(&full, c.Stats())
	copyStats(out, &full)
	return C.PLUGRL_OK
}

//export plugrl__go_runner_stats
func plugrl__go_runner_stats(p *C.plugrl_runner, out *C.plugrl_statistics) (st C.plugrl_status) {
	defer recoverPlain(&st)
	h := lookupRunner(p)
	if h == nil || h.closing.Load() || h.client.closing.Load() {
		return C.PLUGRL_CLOSED
	}
	defer h.recoverStats(&st)
	if st := checkStatsOut(&h.handleBase, out, "plugrl_runner_stats"); st != C.PLUGRL_OK {
		return st
	}
	var full C.plugrl_statistics
	fillRunnerStats(&full, h.r.Stats())
	copyStats(out, &full)
	return C.PLUGRL_OK
}

func checkStatsOut(h *handleBase, out *C.plugrl_statistics, fn string) C.plugrl_status {
	if out == nil {
		return h.invalid("%s: out is NULL", fn)
	}
	if uintptr(out.size) < statsV1 {
		return h.invalid("%s: out->size is %d; set it to sizeof(plugrl_statistics) (this library's is %d, the smallest accepted %d)", fn, out.size, unsafe.Sizeof(*out), statsV1)
	}
	return C.PLUGRL_OK
}

// copyStats copies the fields of full that fit wholly in out.size bytes,
// leaving out.size as the caller set it.
func copyStats(out, full *C.plugrl_statistics) {
	const head = unsafe.Sizeof(full.size)
	n := min(uintptr(out.size), unsafe.Sizeof(*full))
	n -= n % 8 // every field is 8 bytes
	dst := unsafe.Slice((*byte)(unsafe.Pointer(out)), n)
	src := unsafe.Slice((*byte)(unsafe.Pointer(full)), n)
	copy(dst[head:], src[head:])
}

func us(d time.Duration) C.double { return C.double(float64(d) / 1e3) }

func fillStats(o *C.plugrl_statistics, s client.Stats) {
	o.exchanges = C.uint64_t(s.Exchanges)
	o.feedbacks = C.uint64_t(s.Feedbacks)
	o.bytes_sent = C.uint64_t(s.BytesSent)
	o.bytes_received = C.uint64_t(s.BytesReceived)
	var total uint64
	for _, v := range s.Reconnects {
		total += v
	}
	o.reconnects = C.uint64_t(total)
	o.reconnects_resync = C.uint64_t(s.Reconnects[client.CauseResync])
	o.reconnects_feedback_timeout = C.uint64_t(s.Reconnects[client.CauseFeedbackTimeout])
	o.reconnects_timeout = C.uint64_t(s.Reconnects[client.CauseTimeout])
	o.reconnects_lost = C.uint64_t(s.Reconnects[client.CauseLost])
	o.reconnects_other = C.uint64_t(s.Reconnects[client.CauseOther])
	o.feedback_rows_dropped = C.uint64_t(s.FeedbackRowsDropped)
	o.rows_reused = C.uint64_t(s.RowsReused)
	o.interrupts = C.uint64_t(s.Interrupts)
	o.rtt_last_us = us(s.RTTLast)
	o.rtt_p50_us = us(s.RTTP50)
	o.rtt_p99_us = us(s.RTTP99)
	o.rtt_max_us = us(s.RTTMax)
}

func fillRunnerStats(o *C.plugrl_statistics, s runner.Stats) {
	fillStats(o, s.Stats)
	o.episodes = C.uint64_t(s.Episodes)
	o.env_steps = C.uint64_t(s.EnvSteps)
}
