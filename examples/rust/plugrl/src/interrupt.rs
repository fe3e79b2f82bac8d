//! [`Interrupt`]: ends a blocked call from another thread.

use plugrl_sys as sys;

use crate::token::Token;
use crate::Error;

/// A handle that ends the call running on a [`Client`](crate::Client) or
/// [`Runner`](crate::Runner) (`plugrl_interrupt`), from any thread.
///
/// It is `Copy`, `Send` and `Sync`, and does not borrow the client: give
/// it to a watchdog thread, or keep it in a `static` for a signal handler.
/// The call it interrupts returns [`Error::Interrupted`] within
/// milliseconds; if no call is running, the next `act` or `infer` returns
/// it at once without sending anything (see `PLUGRL_INTERRUPTED` in
/// `plugrl.h` for the state of the connection).
///
/// **After the client (or runner) is dropped**, [`interrupt`](Self::interrupt)
/// returns [`Error::Closed`]: the library answers `PLUGRL_CLOSED` for a
/// dead handle. This is never undefined behaviour: the handle is a token
/// the library looks up in a table, never an address it reads, and a
/// closed handle's value is never reused for a later one.
///
/// ```no_run
/// # fn main() -> Result<(), plugrl::Error> {
/// let mut client = plugrl::Client::connect("ws://127.0.0.1:8000")?;
/// let stop = client.interrupter();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_secs(60));
///     let _ = stop.interrupt(); // the running act/infer returns Error::Interrupted
/// });
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Interrupt {
    target: Token, // Send + Sync: see Token
}

impl Interrupt {
    pub(crate) fn client(raw: *mut sys::plugrl_client) -> Interrupt {
        Interrupt {
            target: Token::Client(raw),
        }
    }

    pub(crate) fn runner(raw: *mut sys::plugrl_runner) -> Interrupt {
        Interrupt {
            target: Token::Runner(raw),
        }
    }

    /// Interrupts the call running on the handle (or the next `act` or
    /// `infer`). Returns [`Error::Closed`] once the client or runner was
    /// dropped.
    ///
    /// Async-signal-safe: it raises a flag and writes to an eventfd, keeps
    /// `errno`, and allocates nothing, not even for its error (whose message
    /// is empty).
    pub fn interrupt(&self) -> Result<(), Error> {
        let status = match self.target {
            // SAFETY: plugrl_interrupt is async-signal-safe and thread-safe
            // and takes any handle value (see Token).
            Token::Client(c) => unsafe { sys::plugrl_interrupt(c) },
            // SAFETY: as for plugrl_interrupt.
            Token::Runner(r) => unsafe { sys::plugrl_runner_interrupt(r) },
        };
        if status == sys::plugrl_status::PLUGRL_OK {
            Ok(())
        } else {
            // String::new() does not allocate: this stays signal-safe.
            Err(Error::new(status, String::new()))
        }
    }

    /// The C handle value, for C code or a signal handler that calls
    /// [`plugrl_sys::plugrl_interrupt`] (or `plugrl_runner_interrupt` when
    /// [`is_runner`](Self::is_runner)) itself.
    pub fn as_raw(&self) -> *mut std::os::raw::c_void {
        match self.target {
            Token::Client(c) => c.cast(),
            Token::Runner(r) => r.cast(),
        }
    }

    /// Whether this interrupts a runner (else a client).
    pub fn is_runner(&self) -> bool {
        matches!(self.target, Token::Runner(_))
    }
}

/// Interrupts every client of the process, and so every runner over them
/// (`plugrl_interrupt_all`): for a signal handler with no handle at hand,
/// and the one way to end a [`ClientBuilder::open`](crate::ClientBuilder::open)
/// that is still connecting (it returns [`Error::Interrupted`]), since no
/// [`Interrupt`] exists before it returns. A client that is not in a call
/// gets the interrupt pending, as [`Interrupt::interrupt`] says; a client
/// being dropped stops waiting for the server's close frame.
///
/// Async-signal-safe, like [`Interrupt::interrupt`]. Returns
/// [`Error::Closed`] only in a forked child, where the library cannot be
/// used.
pub fn interrupt_all() -> Result<(), Error> {
    // SAFETY: plugrl_interrupt_all takes no arguments and is thread-safe
    // and async-signal-safe (plugrl.h).
    let status = unsafe { sys::plugrl_interrupt_all() };
    if status == sys::plugrl_status::PLUGRL_OK {
        Ok(())
    } else {
        // String::new() does not allocate: this stays signal-safe.
        Err(Error::new(status, String::new()))
    }
}
