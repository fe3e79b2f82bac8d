//! [`Runner`]: N envs in lockstep over a [`Client`].

use std::os::raw::{c_int, c_void};
use std::ptr;

use plugrl_sys as sys;

use crate::element::{mut_ptr_or_null, ptr_or_null, Numeric};
use crate::{Client, Error, Interrupt, Observation};

/// Whether the run goes on after [`Runner::act`] or [`Runner::report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Flow {
    /// Go on.
    Continue,
    /// The server stopped the run (`PLUGRL_STOPPED`): exit, do not
    /// reconnect.
    Stopped,
}

impl Flow {
    /// Whether the server stopped the run.
    pub fn is_stopped(self) -> bool {
        self == Flow::Stopped
    }
}

/// An episode that ended at the last [`Runner::report`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    /// The env (0..num_envs).
    pub env: usize,
    /// The sum of its rewards.
    pub episode_return: f64,
    /// Its length in env steps.
    pub length: i64,
    /// Whether it succeeded (as reported).
    pub success: bool,
}

/// Owns the episode list that the library's callback fills through a raw
/// pointer (a raw pointer, not a `Box` field, so that moving the Runner
/// does not move or re-borrow memory the library points to).
struct EpisodeBox(*mut Vec<Episode>);

impl Drop for EpisodeBox {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw in Runner::new and is
        // freed once, here, after Runner's Drop freed the runner handle (a
        // struct's fields drop after its Drop::drop), so the library no
        // longer calls the callback.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// Called by the library during plugrl_runner_report, on its thread.
extern "C" fn episode_trampoline(
    user: *mut c_void,
    env: i64,
    episode_return: f64,
    length: i64,
    success: c_int,
) {
    // SAFETY: user is the runner's EpisodeBox pointer, alive while the
    // runner handle is. The library calls this only during
    // plugrl_runner_report, which Runner::report calls with `&mut self`
    // held and no other reference to the list alive.
    let list = unsafe { &mut *user.cast::<Vec<Episode>>() };
    // At most num_envs episodes end per report and the list has that
    // capacity, so push does not allocate (and cannot panic into C).
    if list.len() < list.capacity() {
        list.push(Episode {
            env: usize::try_from(env).unwrap_or(usize::MAX),
            episode_return,
            length,
            success: success != 0,
        });
    }
}

/// N envs in lockstep (`plugrl_runner`): give it every env's observation,
/// get every env's action for this step, report rewards and done flags.
/// Chunking, chunk reward sums, terminal observations, step_ids,
/// `info.episode`, observation reuse and reconnects are its job.
///
/// Env `i` of the runner is env index `i` on the wire. Each step:
///
/// 1. [`act`](Runner::act) with every env's current observation;
/// 2. step every env with its action;
/// 3. [`report`](Runner::report) the step (the terminal observation for an
///    env that ended);
/// 4. reset the envs that ended.
///
/// # Borrowing
///
/// A runner borrows its client mutably for its whole life, so the borrow
/// checker enforces `plugrl.h`'s rules "free the runner before closing the
/// client" and "do not use the client directly while the runner is in
/// use". Metadata stays readable through [`Runner::client`].
///
/// ```compile_fail,E0505
/// # fn f() -> Result<(), plugrl::Error> {
/// let mut client = plugrl::Client::connect("ws://127.0.0.1:8000")?;
/// let runner = plugrl::Runner::new(&mut client, 4)?;
/// drop(client); // the runner still borrows the client: refused
/// let _ = runner.num_envs();
/// # Ok(())
/// # }
/// ```
///
/// # Threads
///
/// `Send` (with its borrowed client) but not `Sync`, like [`Client`]; use
/// [`Runner::interrupter`] to stop a call from another thread.
///
/// ```compile_fail,E0277
/// fn assert_sync<T: Sync>() {}
/// assert_sync::<plugrl::Runner<'static>>();
/// ```
pub struct Runner<'c> {
    raw: *mut sys::plugrl_runner,
    num_envs: usize,
    // Dropped after Drop::drop freed the handle (fields drop last).
    episodes: EpisodeBox,
    client: &'c mut Client,
}

// SAFETY: the runner handle may be used from any thread, one at a time
// (plugrl.h, Threads), which borrows of a non-Sync value guarantee; the
// client it borrows mutably is Send, and so is its episode list.
unsafe impl Send for Runner<'_> {}

impl std::fmt::Debug for Runner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("raw", &self.raw)
            .field("num_envs", &self.num_envs)
            .finish()
    }
}

impl Drop for Runner<'_> {
    fn drop(&mut self) {
        // SAFETY: raw is this runner's handle, freed exactly once, here; no
        // call on it is running (drop has the runner by value).
        unsafe { sys::plugrl_runner_free(self.raw) };
    }
}

impl<'c> Runner<'c> {
    /// A runner of `num_envs` envs over `client`, which it borrows until it
    /// is dropped.
    pub fn new(client: &'c mut Client, num_envs: usize) -> Result<Runner<'c>, Error> {
        let mut raw: *mut sys::plugrl_runner = ptr::null_mut();
        // SAFETY: client.as_raw() is a live client handle; raw is writable.
        let status = unsafe { sys::plugrl_runner_new(client.as_raw(), num_envs, &mut raw) };
        if status != sys::plugrl_status::PLUGRL_OK || raw.is_null() {
            let err = if raw.is_null() {
                Error::from_client(status, client.as_raw())
            } else {
                Error::from_runner(status, raw)
            };
            if !raw.is_null() {
                // SAFETY: raw is the handle plugrl_runner_new set; freed once.
                unsafe { sys::plugrl_runner_free(raw) };
            }
            return Err(err);
        }
        let episodes = EpisodeBox(Box::into_raw(Box::new(Vec::with_capacity(num_envs))));
        let runner = Runner {
            raw,
            num_envs,
            episodes,
            client,
        };
        // SAFETY: raw is live; the callback's user pointer lives as long as
        // the handle (EpisodeBox drops after the handle is freed).
        let status = unsafe {
            sys::plugrl_runner_on_episode(raw, Some(episode_trampoline), runner.episodes.0.cast())
        };
        if status != sys::plugrl_status::PLUGRL_OK {
            return Err(Error::from_runner(status, raw)); // drops (frees) the runner
        }
        Ok(runner)
    }

    /// The number of envs.
    pub fn num_envs(&self) -> usize {
        self.num_envs
    }

    /// The client, for reading its metadata.
    pub fn client(&self) -> &Client {
        self.client
    }

    /// A handle that interrupts this runner's running (or next) `act` from
    /// any thread; see [`Interrupt`].
    pub fn interrupter(&self) -> Interrupt {
        Interrupt::runner(self.raw)
    }

    /// The C handle, for calls this crate does not cover.
    pub fn as_raw(&self) -> *mut sys::plugrl_runner {
        self.raw
    }

    /// The runner's live counters (`plugrl_runner_stats`): its client's,
    /// plus the episodes that ended and the env steps reported.
    pub fn stats(&self) -> Result<crate::Stats, Error> {
        crate::stats::read(
            // SAFETY: raw is live; the struct is writable and its size is set.
            |out| unsafe { sys::plugrl_runner_stats(self.raw, out) },
            |status| Error::from_runner(status, self.raw),
        )
    }

    /// A [`StatsReader`](crate::StatsReader) of this runner's counters,
    /// for another thread (a diagnostics thread beside the control loop).
    pub fn stats_reader(&self) -> crate::StatsReader {
        crate::StatsReader::runner(self.raw)
    }

    /// Elements per env per step of the server's actions, once known (from
    /// metadata `action_dim`, or after the first action).
    pub fn step_size(&self) -> Option<usize> {
        let (mut step, mut known) = (0i64, 0 as c_int);
        // SAFETY: raw is live; step and known are writable.
        let status = unsafe { sys::plugrl_runner_step_size(self.raw, &mut step, &mut known) };
        if status != sys::plugrl_status::PLUGRL_OK || known == 0 {
            return None;
        }
        usize::try_from(step).ok()
    }

    /// This step's action for every env into `actions`, resized to
    /// `num_envs * step_size` (env `i`'s at `i * step_size`), converted to
    /// `T` from the server's dtype. `obs` has `num_envs` rows: every env's
    /// current observation.
    ///
    /// When the step size is not known yet (no metadata `action_dim` and no
    /// action so far), the first call learns it from the library's answer,
    /// and so does a call during which a reconnect found a server of another
    /// action width: the library keeps the chunk and refuses the buffer
    /// (`PLUGRL_INVALID_ARGUMENT`), and this acts once more at the new size.
    ///
    /// Blocks when an infer is needed, up to the client's timeouts, once per
    /// reconnect it rides through. [`Flow::Stopped`] when the server stopped
    /// the run.
    pub fn act<T: Numeric>(
        &mut self,
        obs: &Observation<'_>,
        actions: &mut Vec<T>,
    ) -> Result<Flow, Error> {
        let step = match self.step_size() {
            Some(step) => step,
            None => {
                // Not known yet (no metadata action_dim, no action so far):
                // act into one element. The runner infers to learn the size
                // and, if one element is wrong, refuses it with
                // INVALID_ARGUMENT while keeping the chunk for the retry.
                let mut one = [T::default()];
                match self.act_status(obs, &mut one)? {
                    sys::plugrl_status::PLUGRL_OK => {
                        actions.clear();
                        actions.push(one[0]);
                        return Ok(Flow::Continue);
                    }
                    sys::plugrl_status::PLUGRL_STOPPED => return Ok(Flow::Stopped),
                    status => match self.step_size() {
                        Some(step) if status == sys::plugrl_status::PLUGRL_INVALID_ARGUMENT => step,
                        _ => return Err(Error::from_runner(status, self.raw)),
                    },
                }
            }
        };
        self.resize_actions(actions, step)?;
        match self.act_status(obs, actions)? {
            sys::plugrl_status::PLUGRL_OK => Ok(Flow::Continue),
            sys::plugrl_status::PLUGRL_STOPPED => Ok(Flow::Stopped),
            status => match self.step_size() {
                // A reconnect during the call found a server of another
                // action width: the chunk is kept, act again at its size.
                Some(now)
                    if status == sys::plugrl_status::PLUGRL_INVALID_ARGUMENT && now != step =>
                {
                    self.resize_actions(actions, now)?;
                    self.act_into(obs, actions)
                }
                _ => Err(Error::from_runner(status, self.raw)),
            },
        }
    }

    /// Resizes `actions` to `num_envs * step` default elements.
    fn resize_actions<T: Numeric>(&self, actions: &mut Vec<T>, step: usize) -> Result<(), Error> {
        let len = self.num_envs.checked_mul(step).ok_or_else(|| {
            Error::internal(format!(
                "{} envs x step size {step} overflows",
                self.num_envs
            ))
        })?;
        actions.clear();
        actions.resize(len, T::default());
        Ok(())
    }

    /// [`act`](Runner::act) into a slice of exactly `num_envs * step_size`
    /// elements (a wrong size is [`Error::InvalidArgument`] and the message
    /// says the size needed).
    pub fn act_into<T: Numeric>(
        &mut self,
        obs: &Observation<'_>,
        actions: &mut [T],
    ) -> Result<Flow, Error> {
        match self.act_status(obs, actions)? {
            sys::plugrl_status::PLUGRL_OK => Ok(Flow::Continue),
            sys::plugrl_status::PLUGRL_STOPPED => Ok(Flow::Stopped),
            status => Err(Error::from_runner(status, self.raw)),
        }
    }

    fn act_status<T: Numeric>(
        &mut self,
        obs: &Observation<'_>,
        actions: &mut [T],
    ) -> Result<sys::plugrl_status, Error> {
        let raw = self.raw;
        let bytes = std::mem::size_of_val(actions);
        let out: *mut c_void = mut_ptr_or_null(actions).cast();
        obs.with_raw(|o| {
            // SAFETY: raw is live; o is valid during this closure; out is
            // writable for bytes bytes (NULL for 0), and the library writes
            // at most that many, as T::DTYPE, whose every bit pattern is a
            // valid T (T: Numeric).
            unsafe { sys::plugrl_runner_act(raw, o, out, bytes, T::DTYPE.to_raw()) }
        })
    }

    /// The rest of `env`'s action chunk, for a controller that plans
    /// ahead (a trajectory of the whole chunk, say): the step the last
    /// [`act`](Runner::act) gave `env`, then each later step of its chunk,
    /// into `chunk` (resized to `steps * step_size`, step after step,
    /// converted to `T`); returns the steps. At most the server's action
    /// horizon. Between `act` and [`report`](Runner::report) only: elsewhere
    /// [`Error::OutOfOrder`]. Does not block and sends nothing
    /// (`plugrl_runner_chunk`).
    pub fn chunk<T: Numeric>(&self, env: usize, chunk: &mut Vec<T>) -> Result<usize, Error> {
        let env_index = i64::try_from(env)
            .map_err(|_| Error::invalid(format!("chunk: env {env} does not fit an int64")))?;
        let mut steps = 0i64;
        // SAFETY: raw is live; a NULL destination of 0 bytes only asks for
        // the steps, written to steps.
        let status = unsafe {
            sys::plugrl_runner_chunk(
                self.raw,
                env_index,
                ptr::null_mut(),
                0,
                T::DTYPE.to_raw(),
                &mut steps,
            )
        };
        if status != sys::plugrl_status::PLUGRL_OK
            && status != sys::plugrl_status::PLUGRL_BUFFER_TOO_SMALL
        {
            return Err(Error::from_runner(status, self.raw));
        }
        // Known once an action came; steps is at most the action horizon.
        let step = self.step_size().unwrap_or(0);
        let len = usize::try_from(steps)
            .ok()
            .and_then(|steps| steps.checked_mul(step))
            .ok_or_else(|| Error::internal(format!("chunk: {steps} steps of {step} elements")))?;
        chunk.clear();
        chunk.resize(len, T::default());
        let bytes = std::mem::size_of_val(chunk.as_slice());
        // SAFETY: raw is live; chunk is writable for bytes bytes (NULL for
        // 0), and the library writes at most that many, as T::DTYPE, whose
        // every bit pattern is a valid T (T: Numeric).
        let status = unsafe {
            sys::plugrl_runner_chunk(
                self.raw,
                env_index,
                mut_ptr_or_null(chunk).cast(),
                bytes,
                T::DTYPE.to_raw(),
                &mut steps,
            )
        };
        if status != sys::plugrl_status::PLUGRL_OK {
            return Err(Error::from_runner(status, self.raw));
        }
        usize::try_from(steps)
            .map_err(|_| Error::internal(format!("chunk: the library gave {steps} steps")))
    }

    /// Reports the step every env just took: `next_obs` (`num_envs` rows;
    /// the terminal observation for an env that ended), and `num_envs`
    /// rewards, terminated and truncated flags, and optionally success flags
    /// (read for the envs that ended). Sends the feedback for every env whose
    /// chunk ended. The episodes that ended are then in
    /// [`episodes`](Runner::episodes).
    pub fn report(
        &mut self,
        next_obs: &Observation<'_>,
        rewards: &[f64],
        terminated: &[bool],
        truncated: &[bool],
        success: Option<&[bool]>,
    ) -> Result<Flow, Error> {
        let n = self.num_envs;
        if rewards.len() != n
            || terminated.len() != n
            || truncated.len() != n
            || success.is_some_and(|s| s.len() != n)
        {
            return Err(Error::invalid(format!(
                "report: the runner has {n} envs, got {} rewards, {} terminated, {} truncated and \
                 {} success flags",
                rewards.len(),
                terminated.len(),
                truncated.len(),
                success.map_or(0, <[bool]>::len)
            )));
        }
        {
            // SAFETY: the list is only touched by the callback during
            // plugrl_runner_report (not running: we hold &mut self) and by
            // `episodes`, whose borrow of self cannot be alive here.
            let list = unsafe { &mut *self.episodes.0 };
            list.clear();
        }
        let raw = self.raw;
        let success_ptr: *const u8 = success.map_or(ptr::null(), |s| ptr_or_null(s).cast());
        let status = next_obs.with_raw(|o| {
            // SAFETY: raw is live; rewards, terminated, truncated (and
            // success) hold num_envs values each (checked above); bools are
            // bytes of 0 or 1; o is valid during this closure.
            unsafe {
                sys::plugrl_runner_report(
                    raw,
                    o,
                    ptr_or_null(rewards),
                    ptr_or_null(terminated).cast(),
                    ptr_or_null(truncated).cast(),
                    success_ptr,
                )
            }
        })?;
        match status {
            sys::plugrl_status::PLUGRL_OK => Ok(Flow::Continue),
            sys::plugrl_status::PLUGRL_STOPPED => Ok(Flow::Stopped),
            s => Err(Error::from_runner(s, raw)),
        }
    }

    /// The episodes that ended at the last [`report`](Runner::report), in
    /// the order the library reported them.
    pub fn episodes(&self) -> &[Episode] {
        // SAFETY: the list is written only during report, which needs
        // &mut self, so it cannot change while this shared borrow lives.
        unsafe { &*self.episodes.0 }
    }
}
