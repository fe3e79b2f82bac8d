//! [`Error`]: a failed call's status and the library's message.

use std::ffi::CStr;
use std::fmt;

use plugrl_sys as sys;

/// A call that failed: which `plugrl_status` it returned, with the
/// library's message saying what was wrong and what was expected.
///
/// The statuses that are a normal outcome a caller reacts to are not
/// errors: `act`/`report` return [`Flow::Stopped`](crate::Flow::Stopped),
/// `infer` returns [`Infer::Reconnected`](crate::Infer::Reconnected) or
/// [`Infer::Stopped`](crate::Infer::Stopped). A server that stops the run
/// while a [`Client`](crate::Client) connects gives [`Error::Stopped`].
///
/// `Display` shows `"<status name>: <message>"`, e.g. `"invalid argument:
/// observation state \"t\": shape [3, 1] holds 3 elements, its data has 4"`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// `PLUGRL_STOPPED`: the server ended the run. Exit; do not reconnect.
    Stopped(String),
    /// `PLUGRL_RECONNECTED`: the connection was replaced and any feedback
    /// owed was dropped. Only seen where a call cannot report it otherwise.
    Reconnected(String),
    /// `PLUGRL_TIMEOUT`: a deadline of the client's options passed.
    Timeout(String),
    /// `PLUGRL_SERVER_ERROR`: the server failed (close code 1011, or a text
    /// frame; not 1011 "keepalive ping timeout", a lost connection that
    /// reconnects).
    ServerError(String),
    /// `PLUGRL_PROTOCOL_ERROR`: the server sent a malformed or inconsistent
    /// message.
    ProtocolError(String),
    /// `PLUGRL_INVALID_ARGUMENT`: an argument had the wrong length, shape or
    /// dtype, or was inconsistent. Nothing was sent.
    InvalidArgument(String),
    /// `PLUGRL_OUT_OF_ORDER`: a call in the wrong order, e.g. an infer while
    /// a feedback is owed, or one naming an env that still holds an action
    /// chunk. Nothing was sent.
    OutOfOrder(String),
    /// `PLUGRL_CONNECT_FAILED`: could not connect, after every allowed
    /// attempt.
    ConnectFailed(String),
    /// `PLUGRL_CLOSED`: the handle was closed, e.g. an
    /// [`Interrupt`](crate::Interrupt) used after its client was dropped.
    Closed(String),
    /// `PLUGRL_BUSY`: another thread was inside a call on the handle.
    Busy(String),
    /// `PLUGRL_BUFFER_TOO_SMALL`: a buffer was too small.
    BufferTooSmall(String),
    /// `PLUGRL_NO_MEMORY`: out of memory.
    NoMemory(String),
    /// `PLUGRL_INTERNAL`: a bug in libplugrl, or a library answer that this
    /// crate found inconsistent. Please report it.
    Internal(String),
    /// `PLUGRL_INTERRUPTED`: [`Interrupt::interrupt`](crate::Interrupt::interrupt)
    /// ended the call.
    Interrupted(String),
    /// A status this crate does not know, from a newer libplugrl.
    Unknown {
        /// The `plugrl_status` value.
        status: u32,
        /// The library's message.
        message: String,
    },
}

impl Error {
    /// The error for a status other than `PLUGRL_OK`, with `message`.
    pub(crate) fn new(status: sys::plugrl_status, message: String) -> Error {
        type S = sys::plugrl_status;
        match status {
            S::PLUGRL_STOPPED => Error::Stopped(message),
            S::PLUGRL_RECONNECTED => Error::Reconnected(message),
            S::PLUGRL_TIMEOUT => Error::Timeout(message),
            S::PLUGRL_SERVER_ERROR => Error::ServerError(message),
            S::PLUGRL_PROTOCOL_ERROR => Error::ProtocolError(message),
            S::PLUGRL_INVALID_ARGUMENT => Error::InvalidArgument(message),
            S::PLUGRL_OUT_OF_ORDER => Error::OutOfOrder(message),
            S::PLUGRL_CONNECT_FAILED => Error::ConnectFailed(message),
            S::PLUGRL_CLOSED => Error::Closed(message),
            S::PLUGRL_BUSY => Error::Busy(message),
            S::PLUGRL_BUFFER_TOO_SMALL => Error::BufferTooSmall(message),
            S::PLUGRL_NO_MEMORY => Error::NoMemory(message),
            S::PLUGRL_INTERNAL => Error::Internal(message),
            S::PLUGRL_INTERRUPTED => Error::Interrupted(message),
            sys::plugrl_status(status) => Error::Unknown { status, message },
        }
    }

    /// An argument error found by this crate before calling the library.
    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidArgument(message.into())
    }

    /// A library answer this crate cannot use safely (a library bug).
    pub(crate) fn internal(message: impl Into<String>) -> Error {
        Error::Internal(message.into())
    }

    /// The error for `status` returned by a call on `client`, with the
    /// library's message for it.
    pub(crate) fn from_client(
        status: sys::plugrl_status,
        client: *mut sys::plugrl_client,
    ) -> Error {
        // SAFETY: plugrl_errmsg accepts any handle value (a token it looks
        // up, never dereferences) and returns a NUL-terminated string.
        let msg = unsafe { sys::plugrl_errmsg(client) };
        Error::new(status, copy_message(msg))
    }

    /// Like [`Error::from_client`], for a runner.
    pub(crate) fn from_runner(
        status: sys::plugrl_status,
        runner: *mut sys::plugrl_runner,
    ) -> Error {
        // SAFETY: as for plugrl_errmsg: any handle value is accepted.
        let msg = unsafe { sys::plugrl_runner_errmsg(runner) };
        Error::new(status, copy_message(msg))
    }

    /// The `plugrl_status` value of this error (never `PLUGRL_OK`, 0).
    pub fn status_code(&self) -> u32 {
        type S = sys::plugrl_status;
        let s = match self {
            Error::Stopped(_) => S::PLUGRL_STOPPED,
            Error::Reconnected(_) => S::PLUGRL_RECONNECTED,
            Error::Timeout(_) => S::PLUGRL_TIMEOUT,
            Error::ServerError(_) => S::PLUGRL_SERVER_ERROR,
            Error::ProtocolError(_) => S::PLUGRL_PROTOCOL_ERROR,
            Error::InvalidArgument(_) => S::PLUGRL_INVALID_ARGUMENT,
            Error::OutOfOrder(_) => S::PLUGRL_OUT_OF_ORDER,
            Error::ConnectFailed(_) => S::PLUGRL_CONNECT_FAILED,
            Error::Closed(_) => S::PLUGRL_CLOSED,
            Error::Busy(_) => S::PLUGRL_BUSY,
            Error::BufferTooSmall(_) => S::PLUGRL_BUFFER_TOO_SMALL,
            Error::NoMemory(_) => S::PLUGRL_NO_MEMORY,
            Error::Internal(_) => S::PLUGRL_INTERNAL,
            Error::Interrupted(_) => S::PLUGRL_INTERRUPTED,
            Error::Unknown { status, .. } => sys::plugrl_status(*status),
        };
        s.0
    }

    /// The library's English name of the status, e.g. `"stopped by server"`.
    pub fn status_name(&self) -> &'static str {
        status_name(sys::plugrl_status(self.status_code()))
    }

    /// The library's message alone (may be empty).
    pub fn message(&self) -> &str {
        match self {
            Error::Stopped(m)
            | Error::Reconnected(m)
            | Error::Timeout(m)
            | Error::ServerError(m)
            | Error::ProtocolError(m)
            | Error::InvalidArgument(m)
            | Error::OutOfOrder(m)
            | Error::ConnectFailed(m)
            | Error::Closed(m)
            | Error::Busy(m)
            | Error::BufferTooSmall(m)
            | Error::NoMemory(m)
            | Error::Internal(m)
            | Error::Interrupted(m) => m,
            Error::Unknown { message, .. } => message,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.status_name();
        let msg = self.message();
        // The library's messages often start with the status name already.
        if msg.is_empty() {
            f.write_str(name)
        } else if msg.starts_with(name) {
            f.write_str(msg)
        } else {
            write!(f, "{name}: {msg}")
        }
    }
}

impl std::error::Error for Error {}

/// The static English name of a status.
pub(crate) fn status_name(status: sys::plugrl_status) -> &'static str {
    // SAFETY: plugrl_status_str takes any value and returns a static,
    // NUL-terminated string, never NULL (plugrl.h).
    let p = unsafe { sys::plugrl_status_str(status) };
    if p.is_null() {
        return "unknown status";
    }
    // SAFETY: p is non-NULL, NUL-terminated and static, so 'static is right.
    let s: &'static CStr = unsafe { CStr::from_ptr(p) };
    s.to_str().unwrap_or("unknown status")
}

/// Copies a message the library returned (NUL-terminated, or NULL).
pub(crate) fn copy_message(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: p is non-NULL and NUL-terminated, valid until this thread's
    // next errmsg call (plugrl.h); it is copied out right here.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 1..=14u32 {
            let e = Error::new(sys::plugrl_status(code), "m".into());
            assert_eq!(e.status_code(), code);
            assert!(!matches!(e, Error::Unknown { .. }), "{code}");
        }
        let e = Error::new(sys::plugrl_status(99), "m".into());
        assert_eq!(
            e,
            Error::Unknown {
                status: 99,
                message: "m".into()
            }
        );
        assert_eq!(e.status_name(), "unknown status");
    }

    /// Each status gives the variant of its own name. The round trip above
    /// cannot see two variants swapped in both directions at once.
    #[test]
    fn every_status_maps_to_its_own_variant() {
        type S = sys::plugrl_status;
        let table = [
            (S::PLUGRL_STOPPED, "Stopped"),
            (S::PLUGRL_RECONNECTED, "Reconnected"),
            (S::PLUGRL_TIMEOUT, "Timeout"),
            (S::PLUGRL_SERVER_ERROR, "ServerError"),
            (S::PLUGRL_PROTOCOL_ERROR, "ProtocolError"),
            (S::PLUGRL_INVALID_ARGUMENT, "InvalidArgument"),
            (S::PLUGRL_OUT_OF_ORDER, "OutOfOrder"),
            (S::PLUGRL_CONNECT_FAILED, "ConnectFailed"),
            (S::PLUGRL_CLOSED, "Closed"),
            (S::PLUGRL_BUSY, "Busy"),
            (S::PLUGRL_BUFFER_TOO_SMALL, "BufferTooSmall"),
            (S::PLUGRL_NO_MEMORY, "NoMemory"),
            (S::PLUGRL_INTERNAL, "Internal"),
            (S::PLUGRL_INTERRUPTED, "Interrupted"),
        ];
        for (status, variant) in table {
            let e = Error::new(status, "m".into());
            assert_eq!(format!("{e:?}"), format!("{variant}(\"m\")"));
            assert_eq!(e.status_code(), status.0, "{e:?}");
            assert_eq!(e.status_name(), status_name(status), "{e:?}");
        }
    }

    #[test]
    fn display_names_the_status_once() {
        let name = Error::Timeout(String::new()).status_name();
        assert!(!name.is_empty());
        assert_eq!(Error::Timeout(String::new()).to_string(), name);
        assert_eq!(
            Error::Timeout("no action in 5 s".into()).to_string(),
            format!("{name}: no action in 5 s")
        );
        let already = format!("{name}: waiting for metadata");
        assert_eq!(Error::Timeout(already.clone()).to_string(), already);
    }
}
