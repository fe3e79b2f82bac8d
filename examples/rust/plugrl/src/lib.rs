//! Safe Rust bindings to libplugrl: make a Rust program an env client of a
//! PlugRL training server (WebSocket + msgpack + numpy arrays, SPEC.md
//! version 1), without a WebSocket or msgpack library of its own.
//!
//! The server holds the policy; this program runs the environments. Most
//! programs use a [`Runner`], which steps N envs in lockstep and does the
//! protocol's bookkeeping (action chunks, chunk reward sums, terminal
//! observations, step_ids, episode statistics, observation reuse,
//! reconnects). [`Client::infer`] and [`Client::feedback`] are the low
//! level, for programs that keep their own chunks.
//!
//! # Example
//!
//! Three envs whose state is a step counter, driven by whatever policy the
//! server at `url` runs, until the server stops the run:
//!
//! ```no_run
//! use plugrl::{Client, Flow, Observation, Runner};
//!
//! fn main() -> Result<(), plugrl::Error> {
//!     let url = "ws://127.0.0.1:8000";
//!     let n = 3;
//!     let mut client = Client::builder(url).max_reconnects(5).open()?;
//!     println!("server {:?}, action_dim {:?}", client.metadata_string("server"), client.action_dim());
//!
//!     let mut runner = Runner::new(&mut client, n)?;
//!     let mut t = vec![0.0f64; n]; // state "t", shape [n, 1]
//!     let mut actions: Vec<f64> = Vec::new();
//!     let (rewards, truncated) = (vec![1.0; n], vec![false; n]);
//!     let mut terminated = vec![false; n];
//!     loop {
//!         let mut obs = Observation::new();
//!         obs.state("t", &t, &[n, 1])?;
//!         if runner.act(&obs, &mut actions)? == Flow::Stopped {
//!             break;
//!         }
//!         // Step every env with its actions[i * step .. (i + 1) * step] ...
//!         for i in 0..n {
//!             t[i] += 1.0;
//!             terminated[i] = t[i] >= 10.0;
//!         }
//!         // ... report the observation after the step (terminal for envs that ended) ...
//!         let mut next = Observation::new();
//!         next.state("t", &t, &[n, 1])?;
//!         if runner.report(&next, &rewards, &terminated, &truncated, None)?.is_stopped() {
//!             break;
//!         }
//!         for e in runner.episodes() {
//!             println!("env {} return {} in {} steps", e.env, e.episode_return, e.length);
//!         }
//!         // ... and reset the envs that ended.
//!         for i in 0..n {
//!             if terminated[i] {
//!                 t[i] = 0.0;
//!             }
//!         }
//!     }
//!     Ok(()) // dropping the runner, then the client, closes the connection
//! }
//! ```
//!
//! # Errors
//!
//! Every call returns a `Result` whose [`Error`] names the library's status
//! and carries its message. Outcomes a program must react to are values,
//! not errors: [`Flow::Stopped`], [`Infer::Reconnected`], [`Infer::Stopped`].
//!
//! # Lifetimes and threads
//!
//! - [`Client`] closes its connection when dropped. A [`Runner`] borrows
//!   its client mutably, and an [`ActionView`] borrows it mutably too, so
//!   `plugrl.h`'s rules (free the runner before closing the client; the
//!   action is valid until the next call on the client) are compile-time
//!   errors rather than documentation.
//! - [`Observation`] borrows the caller's arrays and checks each one's
//!   length against its shape, so the library never reads past a slice.
//! - Handles are `Send` but not `Sync`: one thread at a time, as the
//!   library requires. [`Interrupt`] (`Send + Sync + Copy`) ends a blocked
//!   call from another thread; after its client is dropped it returns
//!   [`Error::Closed`], never undefined behaviour. [`interrupt_all`] ends
//!   every client's call, also an open that is still connecting.
//!
//! # Linking
//!
//! `plugrl-sys` finds `libplugrl.so` with pkg-config (`plugrl.pc` on
//! `PKG_CONFIG_PATH`), else in `PLUGRL_LIB_DIR`; the program then needs the
//! library at run time (`LD_LIBRARY_PATH`, or an installed copy). The Go
//! runtime inside it means: load it once per process, and do not `fork`
//! without `exec` once it runs (see `plugrl.h`, PROCESS FACTS).
//!
//! The raw bindings are re-exported as [`sys`].

mod client;
mod element;
mod error;
mod interrupt;
mod observation;
mod runner;
mod stats;
mod token;

pub use client::{
    ActionView, Client, ClientBuilder, EpisodeStats, Feedback, FeedbackOutcome, Infer, LedgerLevel,
    LogLevel,
};
pub use element::{Dtype, Element, Numeric, F16};
pub use error::Error;
pub use interrupt::{interrupt_all, Interrupt};
pub use observation::Observation;
pub use plugrl_sys as sys;
pub use runner::{Episode, Flow, Runner};
pub use stats::{Stats, StatsReader};

// The workspace README's Rust example compiles (doctests only).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The library's version string, e.g. `"0.2.0"`.
pub fn version() -> &'static str {
    // SAFETY: plugrl_version returns a static, NUL-terminated string, never
    // NULL (plugrl.h).
    let p = unsafe { sys::plugrl_version() };
    if p.is_null() {
        return "";
    }
    // SAFETY: p is non-NULL, NUL-terminated and static.
    let s: &'static std::ffi::CStr = unsafe { std::ffi::CStr::from_ptr(p) };
    s.to_str().unwrap_or("")
}

/// The library's version number: MAJOR * 1000000 + MINOR * 1000 + PATCH.
pub fn version_number() -> i32 {
    // SAFETY: no arguments; returns a number.
    unsafe { sys::plugrl_version_number() }
}

/// Whether the loaded library has the major and minor version of the
/// header these bindings were generated from (a newer patch is fine).
pub fn version_matches() -> bool {
    version_number() / 1000 == sys::PLUGRL_VERSION_NUMBER / 1000
}

/// Adds `SA_ONSTACK` to every installed signal handler that lacks it
/// (`plugrl_fix_signal_handlers`) and returns how many it changed. Call it
/// after installing such handlers: without the flag, a signal landing while
/// a thread runs the library's Go code can crash the process.
///
/// # Safety
///
/// It reads and rewrites process-wide signal dispositions with `sigaction`.
/// No other thread may change signal handlers at the same time, or a
/// handler installed in between may be replaced by the one read before it.
pub unsafe fn fix_signal_handlers() -> i32 {
    // SAFETY: the caller guarantees no concurrent sigaction (see # Safety).
    unsafe { sys::plugrl_fix_signal_handlers() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_are_send_and_interrupt_and_stats_reader_are_sync() {
        // Not Sync is checked by the compile_fail examples on Client and
        // Runner.
        assert_send::<Client>();
        assert_send::<Runner<'static>>();
        assert_send_sync::<Interrupt>();
        assert_send_sync::<StatsReader>();
        assert_send_sync::<Error>();
        assert_send_sync::<Observation<'static>>();
    }

    #[test]
    fn library_matches_the_header() {
        assert!(
            version_matches(),
            "library {} ({})",
            version(),
            version_number()
        );
        assert_eq!(version().split('.').count(), 3);
    }
}
