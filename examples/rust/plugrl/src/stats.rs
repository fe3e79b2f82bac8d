//! Live statistics of a client or a runner (`plugrl_stats`,
//! `plugrl_runner_stats`).

use std::time::Duration;

use crate::error::Error;
use crate::sys;
use crate::token::Token;

/// A snapshot of a client's (or a runner's) counters: see
/// `plugrl_statistics` in `plugrl.h` for exactly what each counts. Counts
/// never reset; they accumulate across reconnects. The fields are read one
/// by one (each atomically), not all at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Infers answered: actions received and accepted.
    pub exchanges: u64,
    /// Feedback messages sent.
    pub feedbacks: u64,
    /// Bytes of WebSocket frames written (headers and control frames
    /// included; not the HTTP handshake or TLS overhead).
    pub bytes_sent: u64,
    /// Bytes of WebSocket frames read, likewise.
    pub bytes_received: u64,
    /// Successful reconnects, the sum of the five causes below.
    pub reconnects: u64,
    /// Reconnects after the server closed with reason plugrl-server-resync.
    pub reconnects_resync: u64,
    /// Reconnects after the server closed with reason "Feedback timeout".
    pub reconnects_feedback_timeout: u64,
    /// Reconnects after this client's receive or send deadline passed.
    pub reconnects_timeout: u64,
    /// Reconnects after the connection ended without a close frame, or the
    /// server closed it otherwise (1011 included), or sent a text frame.
    pub reconnects_lost: u64,
    /// Reconnects after the library dropped the connection itself (an
    /// interrupt, a malformed message, a message over the cap, no memory).
    pub reconnects_other: u64,
    /// Feedback owed on a connection that ended, never sent, in envs.
    pub feedback_rows_dropped: u64,
    /// Observation rows not sent thanks to reuse-feedback-obs.
    pub rows_reused: u64,
    /// Calls that returned `Error::Interrupted`.
    pub interrupts: u64,
    /// The last infer round trip (send to action received).
    pub rtt_last: Duration,
    /// The median round trip (from a histogram: within 6.25 %).
    pub rtt_p50: Duration,
    /// The 99th percentile round trip (within 6.25 %).
    pub rtt_p99: Duration,
    /// The longest round trip.
    pub rtt_max: Duration,
    /// Runner only (0 for a client): episodes that ended.
    pub episodes: u64,
    /// Runner only (0 for a client): env steps reported.
    pub env_steps: u64,
}

fn micros(us: f64) -> Duration {
    if us.is_finite() && us > 0.0 {
        Duration::from_secs_f64(us / 1e6)
    } else {
        Duration::ZERO
    }
}

impl From<&sys::plugrl_statistics> for Stats {
    fn from(s: &sys::plugrl_statistics) -> Stats {
        Stats {
            exchanges: s.exchanges,
            feedbacks: s.feedbacks,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            reconnects: s.reconnects,
            reconnects_resync: s.reconnects_resync,
            reconnects_feedback_timeout: s.reconnects_feedback_timeout,
            reconnects_timeout: s.reconnects_timeout,
            reconnects_lost: s.reconnects_lost,
            reconnects_other: s.reconnects_other,
            feedback_rows_dropped: s.feedback_rows_dropped,
            rows_reused: s.rows_reused,
            interrupts: s.interrupts,
            rtt_last: micros(s.rtt_last_us),
            rtt_p50: micros(s.rtt_p50_us),
            rtt_p99: micros(s.rtt_p99_us),
            rtt_max: micros(s.rtt_max_us),
            episodes: s.episodes,
            env_steps: s.env_steps,
        }
    }
}

/// Reads a [`Client`](crate::Client)'s or [`Runner`](crate::Runner)'s live
/// counters from any thread, also while another thread is in a call on it
/// (`plugrl_stats` and `plugrl_runner_stats` allow both): a diagnostics or
/// telemetry thread beside the control loop.
///
/// Like [`Interrupt`](crate::Interrupt) it is `Copy`, `Send` and `Sync`
/// and does not borrow the client. Once the client (or runner) is dropped,
/// [`read`](Self::read) returns [`Error::Closed`]: the handle is a token
/// the library looks up, never an address it reads.
#[derive(Debug, Clone, Copy)]
pub struct StatsReader {
    target: Token, // Send + Sync: see Token
}

impl StatsReader {
    pub(crate) fn client(raw: *mut sys::plugrl_client) -> StatsReader {
        StatsReader {
            target: Token::Client(raw),
        }
    }

    pub(crate) fn runner(raw: *mut sys::plugrl_runner) -> StatsReader {
        StatsReader {
            target: Token::Runner(raw),
        }
    }

    /// The counters now (a runner's include its episodes and env steps).
    /// Allocates nothing unless it fails.
    pub fn read(&self) -> Result<Stats, Error> {
        match self.target {
            Token::Client(c) => read(
                // SAFETY: plugrl_stats takes any handle value from any
                // thread; the struct is writable and its size is set.
                |out| unsafe { sys::plugrl_stats(c, out) },
                |status| Error::from_client(status, c),
            ),
            Token::Runner(r) => read(
                // SAFETY: as for plugrl_stats.
                |out| unsafe { sys::plugrl_runner_stats(r, out) },
                |status| Error::from_runner(status, r),
            ),
        }
    }
}

/// Calls `f` (plugrl_stats or plugrl_runner_stats) with a zeroed struct
/// whose size is set, and converts the result; `err` builds the error.
pub(crate) fn read(
    f: impl FnOnce(*mut sys::plugrl_statistics) -> sys::plugrl_status,
    err: impl FnOnce(sys::plugrl_status) -> Error,
) -> Result<Stats, Error> {
    // SAFETY: plugrl_statistics is plain old data (integers and doubles),
    // for which all-zero bytes are a valid value.
    let mut raw: sys::plugrl_statistics = unsafe { std::mem::zeroed() };
    raw.size = std::mem::size_of::<sys::plugrl_statistics>();
    let status = f(&mut raw);
    if status != sys::plugrl_status::PLUGRL_OK {
        return Err(err(status));
    }
    Ok(Stats::from(&raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_converts_and_clamps() {
        assert_eq!(micros(0.0), Duration::ZERO);
        assert_eq!(micros(-1.0), Duration::ZERO);
        assert_eq!(micros(f64::NAN), Duration::ZERO);
        assert_eq!(micros(1500.0), Duration::from_micros(1500));
    }

    #[test]
    fn fields_copy_over() {
        // SAFETY: all-zero bytes are a valid plugrl_statistics.
        let mut raw: sys::plugrl_statistics = unsafe { std::mem::zeroed() };
        raw.exchanges = 3;
        raw.env_steps = 7;
        raw.rtt_max_us = 250.0;
        let s = Stats::from(&raw);
        assert_eq!((s.exchanges, s.env_steps), (3, 7));
        assert_eq!(s.rtt_max, Duration::from_micros(250));
    }
}
