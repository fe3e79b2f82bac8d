package client

import (
	"errors"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/plugrl/libplugrl/core/conn"
)

// Stats is a snapshot of a client's counters (see Client.Stats). Every
// count covers the client's whole life: it never resets, and it
// accumulates across reconnects.
type Stats struct {
	// Exchanges counts infers answered: actions received that passed the
	// checks against their request.
	Exchanges uint64
	// Feedbacks counts feedback messages sent whole: counted once their
	// last byte went to the kernel. One held to leave with the next infer
	// is counted when it leaves; one whose connection ends first never is
	// (its rows are then in FeedbackRowsDropped). It never decreases.
	Feedbacks uint64
	// BytesSent and BytesReceived count the bytes of WebSocket frames
	// written and read, headers and control frames (pings, pongs, close)
	// included; not the HTTP handshake, not TLS's own overhead.
	BytesSent, BytesReceived uint64
	// Reconnects counts successful reconnects by the cause of the
	// connection's end (see ReconnectCause); Reconnects[Cause...] index it.
	Reconnects [NumReconnectCauses]uint64
	// FeedbackRowsDropped counts, in envs, feedback that was owed on a
	// connection that ended and was therefore never sent (SPEC 7.6).
	FeedbackRowsDropped uint64
	// RowsReused counts observation rows not sent because of
	// reuse-feedback-obs (SPEC 10.1), in infers that were sent.
	RowsReused uint64
	// Interrupts counts Infer and Feedback calls that returned
	// KindInterrupted.
	Interrupts uint64
	// The infer round trip: from when the infer had been written to the
	// socket to when the whole action had been read (before decoding).
	// RTTLast and RTTMax are exact; RTTP50 and RTTP99 come from a
	// log-scale histogram (see RTTResolution). All are zero before the
	// first exchange.
	RTTLast, RTTP50, RTTP99, RTTMax time.Duration
}

// ReconnectCause is why a connection ended before a reconnect.
type ReconnectCause int

// Reconnect causes, as the client can tell them apart.
const (
	// CauseResync: the server closed with reason plugrl-server-resync (SPEC 7.2).
	CauseResync ReconnectCause = iota
	// CauseFeedbackTimeout: the server closed with reason
	// "Feedback timeout" (SPEC 7.3).
	CauseFeedbackTimeout
	// CauseTimeout: this client's receive or send deadline passed.
	CauseTimeout
	// CauseLost: the connection ended without a close frame, or the
	// server closed it with another code or reason (1011 included), or
	// sent a text frame.
	CauseLost
	// CauseOther: this client dropped the connection itself: an
	// interrupt, a malformed or inconsistent message from the server, a
	// message over the size cap, memory that ran out, or Abandon.
	CauseOther
	NumReconnectCauses = iota
)

// The round-trip histogram: bucket i holds microsecond values u with
// bucketOf(u) == i. Below 2^subBits µs each value has its own bucket;
// above, each power of two is split into 2^subBits equal buckets, so a
// bucket is at most 1/2^subBits (12.5 %) of its values wide, and its
// midpoint, which the percentiles report, is within 6.25 % of any value in
// it (within 0.5 µs below 8 µs). The last bucket also takes everything from 2^maxOctave µs (about 18
// minutes) up.
const (
	subBits     = 3
	subBuckets  = 1 << subBits
	maxOctave   = 30
	histBuckets = subBuckets + (maxOctave-subBits)*subBuckets // 224
	// Groups of subBuckets buckets (one power of two each, but the first)
	// keep their sums too, so that a percentile is found by scanning at
	// most histGroups sums and then subBuckets buckets.
	histGroups = histBuckets / subBuckets
)

// RTTResolution is the largest relative error of Stats.RTTP50 and RTTP99
// (for round trips of 8 µs or more; below, they are within 0.5 µs).
const RTTResolution = 1.0 / (2 * subBuckets)

func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us)
	}
	e := bits.Len64(us) - 1 // >= subBits
	i := (e-subBits+1)<<subBits | int(us>>(e-subBits))&(subBuckets-1)
	return min(i, histBuckets-1)
}

// bucketMid is the midpoint of bucket i (integer arithmetic only).
func bucketMid(i int) time.Duration {
	if i < subBuckets {
		return time.Duration(i)*time.Microsecond + 500
	}
	sh := i>>subBits - 1 // log2 of the bucket's width in µs
	lo := int64(subBuckets|i&(subBuckets-1)) << sh
	return time.Duration(lo*1000 + int64(500)<<sh)
}

// stats holds the counters. The client's calling goroutine writes them
// (conn's counters: whoever holds its read or write lock); any goroutine
// reads them. Each is atomic on its own; a snapshot is not atomic across
// them.
type stats struct {
	// What every exchange updates first, together (see Client's order).
	io              conn.Counters
	feedbacks       atomic.Uint64
	rttCount        atomic.Uint64 // = exchanges
	rttLast, rttMax atomic.Int64  // ns
	rttMinUS        atomic.Uint64 // µs +1 of the shortest: the first occupied bucket (0: none yet)
	reconnects      [NumReconnectCauses]atomic.Uint64
	rowsDropped     atomic.Uint64
	rowsReused      atomic.Uint64
	interrupts      atomic.Uint64
	hist            [histBuckets]atomic.Uint64
	groups          [histGroups]atomic.Uint64 // sums of hist's groups of subBuckets buckets
	cause           ReconnectCause            // why the connection ended; caller's goroutine only
	_               [0]func()                 // not comparable
}

// recordRTT adds one round trip of d: a few atomic operations, no
// allocation.
func (s *stats) recordRTT(d time.Duration) {
	ns := max(int64(d), 0)
	us := uint64(ns) / 1000
	i := bucketOf(us)
	s.hist[i].Add(1)
	s.groups[i/subBuckets].Add(1)
	s.rttLast.Store(ns)
	if ns > s.rttMax.Load() {
		s.rttMax.Store(ns) // one writer: no compare-and-swap needed
	}
	if m := s.rttMinUS.Load(); m == 0 || us+1 < m {
		s.rttMinUS.Store(us + 1)
	}
	s.rttCount.Add(1) // last: a reader that sees the count sees the bucket
}

// String names the cause, as the ledger records it.
func (rc ReconnectCause) String() string {
	switch rc {
	case CauseResync:
		return "resync"
	case CauseFeedbackTimeout:
		return "feedback-timeout"
	case CauseTimeout:
		return "timeout"
	case CauseLost:
		return "lost"
	}
	return "other"
}

// causeOf is the reconnect cause of a connection error.
func causeOf(err error) ReconnectCause {
	var ce *conn.CloseError
	switch {
	case errors.As(err, &ce):
		switch ce.Reason {
		case ReasonResync:
			return CauseResync
		case ReasonFeedbackTimeout:
			return CauseFeedbackTimeout
		}
		return CauseLost
	case errors.Is(err, conn.ErrTimeout):
		return CauseTimeout
	case errors.Is(err, conn.ErrLost), errors.Is(err, conn.ErrTextFrame):
		return CauseLost
	}
	return CauseOther
}

// Stats returns the client's counters. It may be called from any
// goroutine at any time, also while another is inside a call on the
// client or closing it. It allocates nothing and takes no lock. Each field
// is read atomically (never torn), but the snapshot is not atomic across
// fields: a call running meanwhile may show in some fields and not yet in
// others.
func (c *Client) Stats() Stats {
	s := &c.stats
	out := Stats{
		Feedbacks:           s.feedbacks.Load() + s.io.HeldPathSent.Load(),
		BytesSent:           s.io.Sent.Load(),
		BytesReceived:       s.io.Received.Load(),
		FeedbackRowsDropped: s.rowsDropped.Load(),
		RowsReused:          s.rowsReused.Load(),
		Interrupts:          s.interrupts.Load(),
	}
	for i := range s.reconnects {
		out.Reconnects[i] = s.reconnects[i].Load()
	}
	n := s.rttCount.Load()
	out.Exchanges = n
	if n == 0 {
		return out
	}
	out.RTTLast = time.Duration(s.rttLast.Load())
	out.RTTMax = time.Duration(s.rttMax.Load())
	lo, hi := s.rttMinUS.Load(), uint64(out.RTTMax)/1000
	if lo == 0 { // cannot happen once n > 0; kept safe
		return out
	}
	first, last := bucketOf(lo-1), bucketOf(hi)
	out.RTTP50 = s.percentile(n, 50, first, last, out.RTTMax)
	out.RTTP99 = s.percentile(n, 99, first, last, out.RTTMax)
	return out
}

// percentile finds the bucket holding the pct-th percentile of n values: it
// scans the group sums of the occupied buckets [first, last] from the
// nearer end, then the buckets of the group found. Never above max.
func (s *stats) percentile(n uint64, pct uint64, first, last int, maxRTT time.Duration) time.Duration {
	rank := n - n*(100-pct)/100 // ceil(pct/100 * n): the 1-based rank of the value
	rank = max(rank, 1)
	g0, g1 := first/subBuckets, last/subBuckets
	var i int
	if pct <= 50 {
		var cum uint64 // values below group g
		g := g0
		for ; g < g1; g++ {
			v := s.groups[g].Load()
			if cum+v >= rank {
				break
			}
			cum += v
		}
		end := min(g*subBuckets+subBuckets-1, last)
		for i = max(g*subBuckets, first); i < end; i++ {
			if cum += s.hist[i].Load(); cum >= rank {
				break
			}
		}
	} else {
		above := n - rank // values above the one sought
		var cum uint64    // values above group g
		g := g1
		for ; g > g0; g-- {
			v := s.groups[g].Load()
			if cum+v > above {
				break
			}
			cum += v
		}
		start := max(g*subBuckets, first)
		for i = min(g*subBuckets+subBuckets-1, last); i > start; i-- {
			if cum += s.hist[i].Load(); cum > above {
				break
			}
		}
	}
	return min(bucketMid(i), maxRTT)
}
