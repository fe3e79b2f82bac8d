//! [`Token`]: a client's or runner's handle, held by the types that other
//! threads may use ([`Interrupt`](crate::Interrupt),
//! [`StatsReader`](crate::StatsReader)).

use plugrl_sys as sys;

/// The C handle of a client or a runner, kept as a value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Token {
    Client(*mut sys::plugrl_client),
    Runner(*mut sys::plugrl_runner),
}

// SAFETY: a token is only ever passed to the calls that take any handle
// value from any thread at any time: plugrl_interrupt,
// plugrl_runner_interrupt, plugrl_stats, plugrl_runner_stats and the
// errmsg calls (plugrl.h: a handle is looked up, never dereferenced; a
// dead one gets PLUGRL_CLOSED, and its value is never reused).
unsafe impl Send for Token {}
// SAFETY: as for Send: sharing the token shares nothing but its value.
unsafe impl Sync for Token {}
