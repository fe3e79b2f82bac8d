//! Env clients on the `plugrl` crate, and what their tests share.
//!
//! - `probe_client` (src/bin/probe_client.rs): the probe env of SPEC 8.1 on
//!   a [`plugrl::Runner`], with the command line of the C and C++ probe
//!   clients; `plugrl-conformance --probe` checks it.
//! - `cartpole` (src/bin/cartpole.rs): the classic-control cartpole
//!   ([`cartpole`]), N envs trained by `plugrl serve --policy cem`.
//! - [`testing`]: finding `plugrl`, the checker, and running servers, for
//!   the integration tests in `tests/`.

pub mod cartpole;
pub mod cli;
pub mod probe;
pub mod testing;
