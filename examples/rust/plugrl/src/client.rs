//! [`Client`] (one session with a server), its builder, and the low-level
//! infer/feedback calls.

use std::borrow::Cow;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::ptr;
use std::time::Duration;

use plugrl_sys as sys;

use crate::element::{mut_ptr_or_null, ptr_or_null, Numeric};
use crate::{Dtype, Error, Interrupt, Observation};

const OK: sys::plugrl_status = sys::plugrl_status::PLUGRL_OK;

/// The level of a log message from the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `PLUGRL_LOG_DEBUG`.
    Debug,
    /// `PLUGRL_LOG_INFO`: e.g. a reconnect.
    Info,
    /// `PLUGRL_LOG_WARN`: e.g. dropped feedback.
    Warn,
    /// `PLUGRL_LOG_ERROR` (and any level this crate does not know).
    Error,
}

impl LogLevel {
    fn from_raw(level: c_int) -> LogLevel {
        match level {
            sys::PLUGRL_LOG_DEBUG => LogLevel::Debug,
            sys::PLUGRL_LOG_INFO => LogLevel::Info,
            sys::PLUGRL_LOG_WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}

/// The log callback as stored: `Box<LogFn>` is a thin pointer for C.
type LogFn = dyn FnMut(LogLevel, &str) + Send + 'static;

/// Owns the log callback that the library calls through a raw pointer.
///
/// Kept as a raw pointer rather than a `Box` field so that moving the
/// [`Client`] does not move (or re-assert unique ownership of) memory the
/// library holds a pointer to.
struct LogBox(*mut Box<LogFn>);

impl LogBox {
    fn new(f: Box<LogFn>) -> LogBox {
        LogBox(Box::into_raw(Box::new(f)))
    }
}

impl Drop for LogBox {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw in LogBox::new and is
        // freed once, here. A LogBox is dropped only after plugrl_close
        // returned (Client's Drop runs before its fields'; open drops it
        // after closing a failed handle), so the library never calls it again.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// Called by the library, during a call on the client, on that call's thread.
extern "C" fn log_trampoline(user: *mut c_void, level: c_int, message: *const c_char) {
    if user.is_null() {
        return;
    }
    let msg: Cow<'_, str> = if message.is_null() {
        Cow::Borrowed("")
    } else {
        // SAFETY: message is NUL-terminated and valid during the callback
        // (plugrl.h, plugrl_log_fn).
        unsafe { CStr::from_ptr(message) }.to_string_lossy()
    };
    // SAFETY: user is the pointer of the client's LogBox, alive until after
    // plugrl_close. The library calls it only during a call on that client,
    // on the calling thread; calls on one client never overlap (a Client is
    // not Sync and its calls borrow it), so this is the only reference.
    let f = unsafe { &mut *user.cast::<Box<LogFn>>() };
    // A panic must not unwind into the library (it would abort): drop it.
    if let Err(payload) =
        panic::catch_unwind(AssertUnwindSafe(|| f(LogLevel::from_raw(level), &msg)))
    {
        drop_panic_payload(payload);
    }
}

/// Drops a caught panic's payload without unwinding: the payload's own
/// `Drop` may panic too (`panic_any` of such a value), and that panic would
/// leave the `extern "C"` callback and abort. Such a payload is leaked.
fn drop_panic_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// How much of each observation a step ledger keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerLevel {
    /// Every message whole except observation arrays, kept as an Adler-32
    /// per env row.
    Digest,
    /// Every byte, so that a ledger can become a dataset.
    Full,
}

/// Options for [`Client`], a builder over `plugrl_options`. Durations are
/// rounded up to milliseconds. A zero (duration or size), like every option
/// not set, means the library's default (see `plugrl.h`).
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> Result<(), plugrl::Error> {
/// let client = plugrl::Client::builder("ws://127.0.0.1:8000")
///     .api_key("secret")
///     .connect_timeout(Duration::from_secs(5))
///     .max_reconnects(3)
///     .log(|level, msg| eprintln!("plugrl [{level:?}] {msg}"))
///     .open()?;
/// # Ok(())
/// # }
/// ```
pub struct ClientBuilder {
    url: String,
    api_key: Option<String>,
    tls_ca_file: Option<std::path::PathBuf>,
    ledger_path: Option<std::path::PathBuf>,
    ledger_cpus: Option<String>,
    log: Option<Box<LogFn>>,
    n: Numbers,
}

/// The numeric options; 0 means the library's default.
#[derive(Debug, Default, Clone, Copy)]
struct Numbers {
    connect_timeout_ms: i32,
    metadata_timeout_ms: i32,
    receive_timeout_ms: i32,
    max_reconnects: i32,
    reconnect_backoff_ms: i32,
    max_backoff_ms: i32,
    tls_insecure: i32,
    disable_reuse: i32,
    max_message_size: i64,
    send_timeout_ms: i32,
    close_timeout_ms: i32,
    reconnect_timeout_ms: i32,
    max_handshake_size: i32,
    ledger_level: i32,
    dead_peer_timeout_ms: i32,
    open_wait_ms: i32,
}

/// Milliseconds for a C field: 0 stays 0 (the default), anything else is
/// rounded up to at least 1 ms and saturates at `i32::MAX`.
fn millis(d: Duration) -> i32 {
    if d.is_zero() {
        return 0;
    }
    let ms = d.as_nanos().div_ceil(1_000_000);
    i32::try_from(ms).unwrap_or(i32::MAX)
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("tls_ca_file", &self.tls_ca_file)
            .field("log", &self.log.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    fn new(url: &str) -> ClientBuilder {
        ClientBuilder {
            url: url.to_string(),
            api_key: None,
            tls_ca_file: None,
            ledger_path: None,
            ledger_cpus: None,
            log: None,
            n: Numbers::default(),
        }
    }

    /// Sent as `Authorization: Api-Key <key>` in the handshake.
    pub fn api_key(mut self, key: &str) -> Self {
        self.api_key = Some(key.to_string());
        self
    }

    /// Name lookup + TCP + TLS + handshake (default 10 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.n.connect_timeout_ms = millis(d);
        self
    }

    /// Waiting for the server's metadata (default 30 s).
    pub fn metadata_timeout(mut self, d: Duration) -> Self {
        self.n.metadata_timeout_ms = millis(d);
        self
    }

    /// Waiting for an action after an infer (default 300 s).
    pub fn receive_timeout(mut self, d: Duration) -> Self {
        self.n.receive_timeout_ms = millis(d);
        self
    }

    /// Sending one message, counted from when the server stops taking bytes
    /// (default 10 s).
    pub fn send_timeout(mut self, d: Duration) -> Self {
        self.n.send_timeout_ms = millis(d);
        self
    }

    /// How long the server's machine may acknowledge nothing this client
    /// sent, nor its TCP keepalive probes, before the connection counts as
    /// lost: a server that lost power, or a network gone, is noticed then
    /// instead of at the receive timeout (default 20 s; at least 2 s, or
    /// `open` fails with `Error::InvalidArgument`). `None` turns it off.
    /// plugrl.h, "A server that vanishes", says what it covers.
    pub fn dead_peer_timeout(mut self, d: Option<Duration>) -> Self {
        self.n.dead_peer_timeout_ms = match d {
            None => -1,
            Some(d) if d.is_zero() => 1, // not "the default": refused, as any bound under 2 s
            Some(d) => millis(d),
        };
        self
    }

    /// How long `open` keeps trying while the server cannot be reached yet
    /// (a robot that boots before its trainer), with the reconnect backoff
    /// between attempts: `Some(d)` for up to `d`, `None` until the server
    /// answers or an [`Interrupt`] ends it. By default `open` makes one
    /// attempt. Failures no wait can mend (a certificate that does not
    /// verify, an HTTP answer other than 5xx, 429 or 408, a protocol error)
    /// end it at once; a certificate not valid yet by a clock NTP has not
    /// set yet is waited for, and a refusal's `Retry-After` lengthens the
    /// next pause up to `max_backoff`. plugrl.h, "Waiting for the server",
    /// says which.
    pub fn open_wait(mut self, d: Option<Duration>) -> Self {
        self.n.open_wait_ms = match d {
            None => -1,
            Some(d) => millis(d),
        };
        self
    }

    /// How long dropping the client waits for the server's close frame
    /// (default 1 s).
    pub fn close_timeout(mut self, d: Duration) -> Self {
        self.n.close_timeout_ms = millis(d);
        self
    }

    /// Reconnect attempts after a lost connection (default 5); `0` means
    /// never reconnect.
    pub fn max_reconnects(mut self, attempts: u32) -> Self {
        // The C field's 0 is "default" and -1 is "never".
        self.n.max_reconnects = if attempts == 0 {
            -1
        } else {
            i32::try_from(attempts).unwrap_or(i32::MAX)
        };
        self
    }

    /// The first wait between reconnect attempts, doubling (default 100 ms).
    pub fn reconnect_backoff(mut self, d: Duration) -> Self {
        self.n.reconnect_backoff_ms = millis(d);
        self
    }

    /// The cap on that wait (default 5 s).
    pub fn max_backoff(mut self, d: Duration) -> Self {
        self.n.max_backoff_ms = millis(d);
        self
    }

    /// All attempts of one reconnect, backoff included (default 30 s).
    pub fn reconnect_timeout(mut self, d: Duration) -> Self {
        self.n.reconnect_timeout_ms = millis(d);
        self
    }

    /// A PEM file of CAs to trust for `wss://` (default: the system's roots).
    pub fn tls_ca_file(mut self, path: impl AsRef<Path>) -> Self {
        self.tls_ca_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// Do not verify the server's certificate. For tests only.
    pub fn tls_insecure(mut self, yes: bool) -> Self {
        self.n.tls_insecure = i32::from(yes);
        self
    }

    /// Never use the `reuse-feedback-obs` feature (SPEC 10.1).
    pub fn disable_reuse(mut self, yes: bool) -> Self {
        self.n.disable_reuse = i32::from(yes);
        self
    }

    /// The cap on one received message, in bytes (default, and `0`: derived
    /// from the metadata's action shape, see `plugrl.h`).
    pub fn max_message_size(mut self, bytes: u64) -> Self {
        self.n.max_message_size = i64::try_from(bytes).unwrap_or(i64::MAX);
        self
    }

    /// No cap on received messages (SPEC 1.1's default): for trusted
    /// servers only.
    pub fn unlimited_message_size(mut self) -> Self {
        self.n.max_message_size = -1;
        self
    }

    /// Bytes read before the WebSocket handshake completes, TLS included
    /// (default 256 KiB).
    pub fn max_handshake_size(mut self, bytes: u32) -> Self {
        self.n.max_handshake_size = i32::try_from(bytes).unwrap_or(i32::MAX);
        self
    }

    /// Records a step ledger at `path`: every message sent and received and
    /// every connection event, zstd-compressed, off the calling thread
    /// (`plugrl ledger summary|audit|episodes|compare|dump|export` reads it;
    /// see docs/LEDGER.md). A directory gets one file per client. Without
    /// it, the `PLUGRL_LEDGER` environment variable is used if set.
    pub fn ledger_path(mut self, path: impl AsRef<Path>) -> Self {
        self.ledger_path = Some(path.as_ref().to_path_buf());
        self
    }

    /// The CPUs the ledger's background writer runs on, as `taskset -c`
    /// lists them (`"3"`, `"2-3,6"`; Linux only), so that a control loop
    /// on a core of its own keeps the ledger's compression off it.
    /// Without it, the `PLUGRL_LEDGER_CPUS` environment variable is used if
    /// set. A list that does not parse, or that the kernel refuses, makes
    /// [`ClientBuilder::open`] fail with [`Error::InvalidArgument`].
    pub fn ledger_cpus(mut self, list: impl Into<String>) -> Self {
        self.ledger_cpus = Some(list.into());
        self
    }

    /// How much of each observation the ledger keeps (default: the
    /// `PLUGRL_LEDGER_LEVEL` environment variable, else [`LedgerLevel::Digest`]).
    pub fn ledger_level(mut self, level: LedgerLevel) -> Self {
        self.n.ledger_level = match level {
            LedgerLevel::Digest => sys::PLUGRL_LEDGER_DIGEST,
            LedgerLevel::Full => sys::PLUGRL_LEDGER_FULL,
        };
        self
    }

    /// A log callback for what the library does on its own (reconnects,
    /// dropped feedback). It runs on the thread of the call that caused it,
    /// during that call, and must not call into the library. A panic in it
    /// is caught and dropped: it cannot unwind into C.
    pub fn log(mut self, f: impl FnMut(LogLevel, &str) + Send + 'static) -> Self {
        self.log = Some(Box::new(f));
        self
    }

    /// Connects, waits for the server's metadata and returns the client.
    /// Blocks up to the connect and metadata timeouts.
    ///
    /// Errors: [`Error::ConnectFailed`], [`Error::Timeout`],
    /// [`Error::Stopped`] (the server stopped the run while we connected),
    /// [`Error::InvalidArgument`] (e.g. a string with a NUL byte), ...
    pub fn open(self) -> Result<Client, Error> {
        let url = c_string("url", self.url.as_bytes())?;
        let api_key = opt_c_string("api_key", self.api_key.as_deref().map(str::as_bytes))?;
        let ca = opt_c_string("tls_ca_file", self.tls_ca_file.as_deref().map(path_bytes))?;
        let ledger = opt_c_string("ledger_path", self.ledger_path.as_deref().map(path_bytes))?;
        let ledger_cpus = opt_c_string(
            "ledger_cpus",
            self.ledger_cpus.as_deref().map(str::as_bytes),
        )?;

        // Every field zero (its default: the builder sets each one below,
        // 0 where the caller chose nothing) and the size, which is what
        // plugrl_options_init gives once the fields are set. Not that call:
        // it is a call into the library, and the first one from a thread
        // attaches the thread to the Go runtime, hundreds of microseconds
        // or more in which a program's SIGINT handler could call
        // interrupt_all after the program's last look at its flag and
        // before plugrl_open, which honours only those from its start on.
        // plugrl_open is now the first call.
        let mut o = sys::plugrl_options {
            size: std::mem::size_of::<sys::plugrl_options>(),
            ..Default::default()
        };
        o.url = url.as_ptr();
        o.api_key = opt_ptr(&api_key);
        o.tls_ca_file = opt_ptr(&ca);
        o.ledger_path = opt_ptr(&ledger);
        o.ledger_cpus = opt_ptr(&ledger_cpus);
        let n = self.n;
        o.connect_timeout_ms = n.connect_timeout_ms;
        o.metadata_timeout_ms = n.metadata_timeout_ms;
        o.receive_timeout_ms = n.receive_timeout_ms;
        o.max_reconnects = n.max_reconnects;
        o.reconnect_backoff_ms = n.reconnect_backoff_ms;
        o.max_backoff_ms = n.max_backoff_ms;
        o.tls_insecure = n.tls_insecure;
        o.disable_reuse = n.disable_reuse;
        o.max_message_size = n.max_message_size;
        o.send_timeout_ms = n.send_timeout_ms;
        o.close_timeout_ms = n.close_timeout_ms;
        o.reconnect_timeout_ms = n.reconnect_timeout_ms;
        o.max_handshake_size = n.max_handshake_size;
        o.ledger_level = n.ledger_level;
        o.dead_peer_timeout_ms = n.dead_peer_timeout_ms;
        o.open_wait_ms = n.open_wait_ms;
        let log = self.log.map(LogBox::new);
        if let Some(l) = &log {
            o.log = Some(log_trampoline);
            o.log_user = l.0.cast();
        }

        let mut raw: *mut sys::plugrl_client = ptr::null_mut();
        // SAFETY: o and the strings it points to are valid for the call (the
        // library copies them); raw is writable; the log callback outlives
        // the handle (see LogBox).
        let status = unsafe { sys::plugrl_open(&o, &mut raw) };
        if status == OK && !raw.is_null() {
            return Ok(Client { raw, _log: log });
        }
        if raw.is_null() {
            let msg = format!("plugrl_open returned no handle for {}", self.url);
            return Err(Error::new(status, msg));
        }
        let err = if status == OK {
            Error::internal("plugrl_open returned PLUGRL_OK")
        } else {
            Error::from_client(status, raw)
        };
        // plugrl.h: the handle of a failed open must still be closed.
        // SAFETY: raw is the handle plugrl_open just set, closed once here.
        unsafe { sys::plugrl_close(raw) };
        Err(err) // `log` is dropped after the close, as LogBox requires
    }
}

fn c_string(what: &str, bytes: &[u8]) -> Result<CString, Error> {
    CString::new(bytes).map_err(|_| Error::invalid(format!("{what} holds a NUL byte")))
}

fn opt_c_string(what: &str, bytes: Option<&[u8]>) -> Result<Option<CString>, Error> {
    bytes.map(|b| c_string(what, b)).transpose()
}

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

fn path_bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

/// One session with a server (`plugrl_client`): connects when opened,
/// closes (with a 1000 close frame) when dropped.
///
/// Use it through a [`Runner`](crate::Runner) (most programs), or directly
/// with [`infer`](Client::infer) and [`feedback`](Client::feedback).
///
/// # Threads
///
/// A `Client` is `Send` but not `Sync`: it may move to another thread, but
/// only one thread at a time can call it, which is the library's rule
/// ("one handle serves one thread at a time"; a second thread would only
/// get `PLUGRL_BUSY`). To stop a blocked call from another thread, hand
/// that thread an [`Interrupt`] ([`Client::interrupter`]).
///
/// ```
/// fn assert_send<T: Send>() {}
/// assert_send::<plugrl::Client>();
/// ```
///
/// ```compile_fail,E0277
/// fn assert_sync<T: Sync>() {}
/// assert_sync::<plugrl::Client>();
/// ```
pub struct Client {
    raw: *mut sys::plugrl_client,
    // Dropped after Drop::drop closed the handle (fields drop last).
    _log: Option<LogBox>,
}

// SAFETY: the handle may be used from any thread, one thread at a time
// (plugrl.h, Threads), which `&mut`/`&` borrows of a non-Sync value
// guarantee; the log callback it owns is Send.
unsafe impl Send for Client {}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("raw", &self.raw).finish()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: raw is this client's handle, closed exactly once, here.
        // No call on it is running (drop has the client by value), and no
        // Runner is left (a Runner borrows the client).
        unsafe { sys::plugrl_close(self.raw) };
    }
}

/// What [`Client::infer`] got.
#[derive(Debug)]
#[must_use]
pub enum Infer<'c> {
    /// The action chunk, valid until the next call on the client.
    Action(ActionView<'c>),
    /// The connection was replaced (SPEC 7.6): nothing is owed, every chunk
    /// held is void; infer again for every env.
    Reconnected,
    /// The server stopped the run: exit, do not reconnect.
    Stopped,
}

/// What [`Client::feedback`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum FeedbackOutcome {
    /// Sent.
    Sent,
    /// The connection had ended, so the feedback was dropped (SPEC 7.6):
    /// every chunk held is void; infer again.
    Reconnected,
    /// The server stopped the run.
    Stopped,
}

/// Finished episodes' statistics for a feedback's `info.episode` (SPEC
/// 5.4): one entry per feedback env; `mask[i]` marks the envs whose episode
/// ended at this step (other entries are ignored).
#[derive(Debug, Clone, Copy)]
pub struct EpisodeStats<'a> {
    /// The episodes' returns.
    pub returns: &'a [f64],
    /// Their lengths in env steps.
    pub lengths: &'a [i64],
    /// Whether each succeeded, or `None`.
    pub success: Option<&'a [bool]>,
    /// Which envs' episodes ended here.
    pub mask: &'a [bool],
}

/// The arguments of [`Client::feedback`] for `m` envs: every slice holds
/// one entry per env of `env_indices`.
#[derive(Debug, Clone, Copy)]
pub struct Feedback<'a> {
    /// The envs, each holding an action chunk on this connection.
    pub env_indices: &'a [i64],
    /// Their step_ids (chunks completed in their episodes).
    pub step_ids: &'a [i64],
    /// The observation after each env's chunk (the terminal one for an env
    /// that ended), `m` rows.
    pub next_obs: &'a Observation<'a>,
    /// Each chunk's summed reward.
    pub rewards: &'a [f32],
    /// The last step's terminated flags.
    pub terminated: &'a [bool],
    /// The last step's truncated flags.
    pub truncated: &'a [bool],
    /// The statistics of episodes that ended here, if any.
    pub episode: Option<EpisodeStats<'a>>,
}

type CopyFn = unsafe extern "C" fn(
    *mut sys::plugrl_client,
    *const c_char,
    *mut c_char,
    usize,
    *mut usize,
    *mut c_int,
) -> sys::plugrl_status;

impl Client {
    /// A builder for a client of the server at `url` (`ws://host:port` or
    /// `wss://host:port`).
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// Connects to `url` with default options (`Client::builder(url).open()`).
    pub fn connect(url: &str) -> Result<Client, Error> {
        Client::builder(url).open()
    }

    /// A handle that interrupts this client's running call from any
    /// thread, or, when none is running, its next `infer` (or a runner's
    /// `act`): a pending interrupt does not refuse a `feedback` or a
    /// runner's `report`, which owe the server an answer (`plugrl.h`,
    /// `plugrl_interrupt`). See [`Interrupt`].
    pub fn interrupter(&self) -> Interrupt {
        Interrupt::client(self.raw)
    }

    /// The C handle, for calls this crate does not cover. It stays valid
    /// while the client lives; follow `plugrl.h`'s rules when using it.
    pub fn as_raw(&self) -> *mut sys::plugrl_client {
        self.raw
    }

    // ------------------------------------------------------------ metadata

    /// An integer metadata key (numpy scalars included), or `None` when the
    /// key is absent or not an integer. Absent never means zero.
    pub fn metadata_int(&self, key: &str) -> Option<i64> {
        let key = CString::new(key).ok()?;
        let (mut value, mut present) = (0i64, 0 as c_int);
        // SAFETY: raw is live; key is NUL-terminated; value and present are
        // writable.
        let status =
            unsafe { sys::plugrl_metadata_int(self.raw, key.as_ptr(), &mut value, &mut present) };
        (status == OK && present != 0).then_some(value)
    }

    /// A string metadata key (e.g. `"server"`, `"algorithm"`, `"policy"`),
    /// or `None` when absent or not a string.
    pub fn metadata_string(&self, key: &str) -> Option<String> {
        let key = CString::new(key).ok()?;
        self.copy_out(sys::plugrl_metadata_string, key.as_ptr())
            .ok()?
    }

    /// One metadata key as JSON, `Ok(None)` when absent. An error when the
    /// library cannot show the value as JSON (a server's metadata it cannot
    /// read, `PLUGRL_PROTOCOL_ERROR`), the client is closed, or `key`
    /// contains a NUL (`InvalidArgument`; the other getters answer `None`
    /// for such a key).
    pub fn metadata_json(&self, key: &str) -> Result<Option<String>, Error> {
        let key = CString::new(key).map_err(|_| {
            Error::new(
                sys::plugrl_status::PLUGRL_INVALID_ARGUMENT,
                "a metadata key must not contain NUL".to_string(),
            )
        })?;
        self.copy_out(sys::plugrl_metadata_json, key.as_ptr())
    }

    /// The whole metadata map as JSON; errors as for
    /// [`metadata_json`](Client::metadata_json), never an empty map in
    /// their place.
    pub fn metadata_json_all(&self) -> Result<String, Error> {
        Ok(self
            .copy_out(sys::plugrl_metadata_json, ptr::null())?
            .unwrap_or_else(|| "{}".to_string()))
    }

    /// Whether metadata `features` lists `feature` (e.g.
    /// `"reuse-feedback-obs"`).
    pub fn has_feature(&self, feature: &str) -> bool {
        let Ok(feature) = CString::new(feature) else {
            return false;
        };
        let mut present: c_int = 0;
        // SAFETY: raw is live; feature is NUL-terminated; present is writable.
        let status =
            unsafe { sys::plugrl_metadata_has_feature(self.raw, feature.as_ptr(), &mut present) };
        status == OK && present != 0
    }

    /// Metadata `protocol_version`.
    pub fn protocol_version(&self) -> Option<i64> {
        self.metadata_int("protocol_version")
    }

    /// Metadata `action_horizon`: H, the steps of an action chunk.
    pub fn action_horizon(&self) -> Option<i64> {
        self.metadata_int("action_horizon")
    }

    /// Metadata `action_dim`: the values of one step's action.
    pub fn action_dim(&self) -> Option<i64> {
        self.metadata_int("action_dim")
    }

    /// Asks for the length, then copies; again if it grew in between.
    /// `Ok(None)`: absent.
    fn copy_out(&self, f: CopyFn, key: *const c_char) -> Result<Option<String>, Error> {
        for _ in 0..4 {
            let (mut len, mut present) = (0usize, 0 as c_int);
            // SAFETY: raw is live; key is NUL-terminated or NULL (whole map,
            // for plugrl_metadata_json only); buf NULL with size 0 asks for
            // the length; len and present are writable.
            let status = unsafe { f(self.raw, key, ptr::null_mut(), 0, &mut len, &mut present) };
            if status != OK {
                return Err(Error::from_client(status, self.raw));
            }
            if present == 0 {
                return Ok(None);
            }
            let size = len.checked_add(1).ok_or_else(|| {
                Error::new(
                    sys::plugrl_status::PLUGRL_NO_MEMORY,
                    "a metadata value too long to copy".to_string(),
                )
            })?;
            let mut buf = vec![0u8; size];
            // SAFETY: as above, with buf writable for buf.len() bytes.
            let status = unsafe {
                f(
                    self.raw,
                    key,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut len,
                    &mut present,
                )
            };
            if status == OK {
                if present == 0 {
                    return Ok(None);
                }
                buf.truncate(len.min(buf.len() - 1));
                return Ok(Some(String::from_utf8(buf).unwrap_or_else(|e| {
                    String::from_utf8_lossy(e.as_bytes()).into_owned()
                })));
            }
            if status != sys::plugrl_status::PLUGRL_BUFFER_TOO_SMALL {
                return Err(Error::from_client(status, self.raw));
            }
        }
        Err(Error::new(
            sys::plugrl_status::PLUGRL_INTERNAL,
            "a metadata value kept changing size while it was copied".to_string(),
        ))
    }

    // ----------------------------------------------------------- low level

    /// Sends an infer for the envs `env_indices` (distinct, >= 0) with their
    /// `step_ids`, and waits for the action (SPEC 4). `obs` holds one row per
    /// env, in `env_indices` order. `reuse`, if given, has one flag per env:
    /// `true` where the env's observation is the one its last feedback on
    /// this connection sent ([`can_reuse`](Client::can_reuse)), which is
    /// then not sent again; `obs` may then hold all rows or only the others.
    ///
    /// The [`ActionView`] borrows the client mutably: the chunk lives in
    /// library memory that the next call on the client reuses, and the
    /// borrow checker refuses that call while the view is alive:
    ///
    /// ```compile_fail,E0502
    /// # fn f(client: &mut plugrl::Client, obs: &plugrl::Observation) -> Result<(), plugrl::Error> {
    /// if let plugrl::Infer::Action(view) = client.infer(&[0], &[0], obs, None)? {
    ///     let _ = client.can_reuse(0); // a call on the client: refused
    ///     println!("{}", view.horizon());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Blocks up to the send and receive timeouts (plus a reconnect if the
    /// connection had ended). Errors on any status but OK, RECONNECTED and
    /// STOPPED, which are [`Infer`]'s cases.
    pub fn infer(
        &mut self,
        env_indices: &[i64],
        step_ids: &[i64],
        obs: &Observation<'_>,
        reuse: Option<&[bool]>,
    ) -> Result<Infer<'_>, Error> {
        let n = env_indices.len();
        if step_ids.len() != n {
            return Err(Error::invalid(format!(
                "infer: {n} env_indices but {} step_ids",
                step_ids.len()
            )));
        }
        if let Some(r) = reuse {
            if r.len() != n {
                return Err(Error::invalid(format!(
                    "infer: {n} env_indices but {} reuse flags",
                    r.len()
                )));
            }
        }
        let reuse_ptr: *const u8 = reuse.map_or(ptr::null(), |r| ptr_or_null(r).cast());
        let raw = self.raw;
        let mut action = sys::plugrl_action::default();
        let status = obs.with_raw(|o| {
            // SAFETY: raw is live; env_indices, step_ids and reuse each hold
            // n values (checked above; NULL for n = 0, which the library
            // refuses); a bool is one byte holding 0 or 1, what the library
            // reads as a uint8_t flag; o is valid during this closure
            // (Observation::with_raw); action is writable.
            unsafe {
                sys::plugrl_infer(
                    raw,
                    ptr_or_null(env_indices),
                    ptr_or_null(step_ids),
                    n,
                    o,
                    reuse_ptr,
                    &mut action,
                )
            }
        })?;
        match status {
            sys::plugrl_status::PLUGRL_OK => ActionView::new(action, self, n).map(Infer::Action),
            sys::plugrl_status::PLUGRL_RECONNECTED => Ok(Infer::Reconnected),
            sys::plugrl_status::PLUGRL_STOPPED => Ok(Infer::Stopped),
            s => Err(Error::from_client(s, raw)),
        }
    }

    /// Sends the feedback owed for the last action (SPEC 5.4). Errors on any
    /// status but OK, RECONNECTED and STOPPED, which are
    /// [`FeedbackOutcome`]'s cases.
    pub fn feedback(&mut self, fb: &Feedback<'_>) -> Result<FeedbackOutcome, Error> {
        let m = fb.env_indices.len();
        let lens = [
            fb.step_ids.len(),
            fb.rewards.len(),
            fb.terminated.len(),
            fb.truncated.len(),
        ];
        if lens.iter().any(|&l| l != m) {
            return Err(Error::invalid(format!(
                "feedback: env_indices, step_ids, rewards, terminated and truncated need the same \
                 length, got {m}, {}, {}, {} and {}",
                lens[0], lens[1], lens[2], lens[3]
            )));
        }
        let episode = match &fb.episode {
            None => None,
            Some(e) => {
                let ok = e.returns.len() == m
                    && e.lengths.len() == m
                    && e.mask.len() == m
                    && e.success.map_or(true, |s| s.len() == m);
                if !ok {
                    return Err(Error::invalid(format!(
                        "feedback: episode stats need {m} returns, lengths, mask (and success) entries"
                    )));
                }
                Some(sys::plugrl_episode {
                    returns: ptr_or_null(e.returns),
                    lengths: ptr_or_null(e.lengths),
                    success: e.success.map_or(ptr::null(), |s| ptr_or_null(s).cast()),
                    mask: ptr_or_null(e.mask).cast(),
                })
            }
        };
        let episode_ptr = episode
            .as_ref()
            .map_or(ptr::null(), |e| e as *const sys::plugrl_episode);
        let raw = self.raw;
        let status = fb.next_obs.with_raw(|o| {
            // SAFETY: raw is live; every array holds m values (checked
            // above; NULL for m = 0, which the library refuses); bools are
            // bytes of 0 or 1; episode_ptr is NULL or points to `episode`,
            // whose arrays hold m values; o is valid during this closure.
            unsafe {
                sys::plugrl_feedback(
                    raw,
                    ptr_or_null(fb.env_indices),
                    ptr_or_null(fb.step_ids),
                    m,
                    o,
                    ptr_or_null(fb.rewards),
                    ptr_or_null(fb.terminated).cast(),
                    ptr_or_null(fb.truncated).cast(),
                    episode_ptr,
                )
            }
        })?;
        match status {
            sys::plugrl_status::PLUGRL_OK => Ok(FeedbackOutcome::Sent),
            sys::plugrl_status::PLUGRL_RECONNECTED => Ok(FeedbackOutcome::Reconnected),
            sys::plugrl_status::PLUGRL_STOPPED => Ok(FeedbackOutcome::Stopped),
            s => Err(Error::from_client(s, raw)),
        }
    }

    /// Whether `env`'s observation may be reused in the next infer (SPEC
    /// 10.1): the server offers the feature and the env's last feedback on
    /// this connection did not end its episode.
    pub fn can_reuse(&self, env: i64) -> Result<bool, Error> {
        let mut yes: c_int = 0;
        // SAFETY: raw is live; yes is writable.
        let status = unsafe { sys::plugrl_can_reuse(self.raw, env, &mut yes) };
        if status != OK {
            return Err(Error::from_client(status, self.raw));
        }
        Ok(yes != 0)
    }

    /// The client's live counters (`plugrl_stats`): exchanges, bytes,
    /// reconnects by cause, round-trip times... Cheap enough for every
    /// control step: no allocation, well under a microsecond.
    pub fn stats(&self) -> Result<crate::Stats, Error> {
        crate::stats::read(
            // SAFETY: raw is live; the struct is writable and its size is set.
            |out| unsafe { sys::plugrl_stats(self.raw, out) },
            |status| Error::from_client(status, self.raw),
        )
    }

    /// A [`StatsReader`](crate::StatsReader) of this client's counters, for
    /// another thread: `Client` is not `Sync`, and the library allows
    /// `plugrl_stats` from any thread at any time.
    pub fn stats_reader(&self) -> crate::StatsReader {
        crate::StatsReader::client(self.raw)
    }
}

/// An action chunk as received (`plugrl_action`): a view of library memory
/// that borrows its [`Client`] mutably, so no other call on the client can
/// happen while it is alive (see [`Client::infer`]).
///
/// Shape `[H, n, *da]`, time-major: step `k` of the request's `j`-th env
/// starts at element `(k * n + j) * step_size`.
pub struct ActionView<'c> {
    raw: sys::plugrl_action,
    dtype: Dtype,
    len: usize,
    client: &'c Client,
}

impl std::fmt::Debug for ActionView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionView")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .field("env_ids", &self.env_ids())
            .finish()
    }
}

impl<'c> ActionView<'c> {
    /// Checks what the library returned, so that the accessors below never
    /// read outside it even if the library had a bug.
    fn new(raw: sys::plugrl_action, client: &'c Client, n: usize) -> Result<Self, Error> {
        let bad = |what: String| {
            Err(Error::internal(format!(
                "libplugrl returned an inconsistent action: {what}"
            )))
        };
        let Some(dtype) = Dtype::from_raw(raw.dtype) else {
            return bad(format!("unknown dtype {}", raw.dtype.0));
        };
        if raw.ndim < 2 || raw.ndim > sys::PLUGRL_MAX_DIMS || raw.shape.is_null() {
            return bad(format!("ndim {} (shape {:?})", raw.ndim, raw.shape));
        }
        // SAFETY: shape points to ndim int64s of library memory, valid until
        // the next call on the client, which `client`'s borrow prevents.
        let shape = unsafe { std::slice::from_raw_parts(raw.shape, raw.ndim as usize) };
        let step: Option<i64> = shape[2..].iter().try_fold(1i64, |a, &d| a.checked_mul(d));
        if shape[0] != raw.horizon
            || shape[1] != raw.num_envs
            || raw.num_envs != n as i64
            || raw.horizon < 1
            || step != Some(raw.step_size)
            || shape.iter().any(|&d| d < 0)
        {
            return bad(format!(
                "shape {shape:?}, horizon {}, num_envs {} (asked for {n}), step_size {}",
                raw.horizon, raw.num_envs, raw.step_size
            ));
        }
        let len = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?));
        let Some(len) = len.filter(|&l| {
            l.checked_mul(dtype.size())
                .is_some_and(|b| b <= isize::MAX as usize)
        }) else {
            return bad(format!("shape {shape:?} is too large"));
        };
        if len > 0 && raw.data.is_null() {
            return bad("NULL data".into());
        }
        if n > 0 && raw.env_ids.is_null() {
            return bad("NULL env_ids".into());
        }
        Ok(ActionView {
            raw,
            dtype,
            len,
            client,
        })
    }

    /// The element type the server sent.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// H, the steps of the chunk.
    pub fn horizon(&self) -> usize {
        self.raw.horizon as usize
    }

    /// n, the envs of the request.
    pub fn num_envs(&self) -> usize {
        self.raw.num_envs as usize
    }

    /// Elements of one env's one step: the product of `shape[2..]`.
    pub fn step_size(&self) -> usize {
        self.raw.step_size as usize
    }

    /// Elements in the chunk: H * n * step_size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chunk has no elements (a zero step size).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The shape `[H, n, *da]`.
    pub fn shape(&self) -> &[i64] {
        // SAFETY: checked in new: shape points to ndim >= 2 int64s, valid
        // while this view borrows the client.
        unsafe { std::slice::from_raw_parts(self.raw.shape, self.raw.ndim as usize) }
    }

    /// The n envs of the request, in its order.
    pub fn env_ids(&self) -> &[i64] {
        let n = self.num_envs();
        if n == 0 {
            return &[];
        }
        // SAFETY: checked in new: env_ids is non-NULL and (plugrl.h) lists
        // n int64s, valid while this view borrows the client.
        unsafe { std::slice::from_raw_parts(self.raw.env_ids, n) }
    }

    /// The chunk's elements as `T`, without copying. Errors with
    /// [`Error::InvalidArgument`] unless the chunk's dtype is `T`'s (use
    /// [`copy_to`](Self::copy_to) to convert).
    pub fn as_slice<T: Numeric>(&self) -> Result<&[T], Error> {
        if self.dtype != T::DTYPE {
            return Err(Error::invalid(format!(
                "the action's dtype is {}, not {}: use ActionView::copy_to to convert",
                self.dtype,
                T::DTYPE
            )));
        }
        if self.len == 0 {
            return Ok(&[]);
        }
        if (self.raw.data as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::internal(format!(
                "libplugrl returned action data at {:?}, not aligned for {}",
                self.raw.data,
                T::DTYPE
            )));
        }
        // SAFETY: data is non-NULL and aligned (checked), and holds len
        // elements of dtype == T's (plugrl.h, checked in new), valid while
        // this view borrows the client; T: Numeric, so every bit pattern is
        // a valid T.
        Ok(unsafe { std::slice::from_raw_parts(self.raw.data.cast::<T>(), self.len) })
    }

    /// The `step_size` elements of step `k` of the request's `j`-th env.
    pub fn step<T: Numeric>(&self, k: usize, j: usize) -> Result<&[T], Error> {
        let all = self.as_slice::<T>()?;
        if k >= self.horizon() || j >= self.num_envs() {
            return Err(Error::invalid(format!(
                "action step [{k}, {j}] is outside [{}, {}]",
                self.horizon(),
                self.num_envs()
            )));
        }
        let d = self.step_size();
        let start = (k * self.num_envs() + j) * d;
        Ok(&all[start..start + d])
    }

    /// Copies the chunk into `dst` (resized to [`len`](Self::len)),
    /// converting every element to `T` as C would (`plugrl_action_copy`:
    /// floats to integers truncate toward zero and saturate).
    ///
    /// It consumes the view: the copy is itself a call on the client, after
    /// which `plugrl.h` no longer promises the chunk's memory. Read
    /// [`env_ids`](Self::env_ids) and the shape first if you need them.
    pub fn copy_to<T: Numeric>(self, dst: &mut Vec<T>) -> Result<(), Error> {
        dst.clear();
        dst.resize(self.len, T::default());
        let bytes = self.len * std::mem::size_of::<T>();
        // SAFETY: the client's last call was the infer that made this view
        // (the borrow rules out any other); dst holds len elements of T,
        // bytes bytes, and T's dtype is T::DTYPE, so the library writes
        // valid T values inside dst.
        let status = unsafe {
            sys::plugrl_action_copy(
                self.client.raw,
                mut_ptr_or_null(dst).cast(),
                bytes,
                T::DTYPE.to_raw(),
            )
        };
        if status != OK {
            return Err(Error::from_client(status, self.client.raw));
        }
        Ok(())
    }

    /// [`copy_to`](Self::copy_to) into a new `Vec`.
    pub fn to_vec<T: Numeric>(self) -> Result<Vec<T>, Error> {
        let mut v = Vec::new();
        self.copy_to(&mut v)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_rounds_up_and_saturates() {
        assert_eq!(millis(Duration::ZERO), 0);
        assert_eq!(millis(Duration::from_nanos(1)), 1);
        assert_eq!(millis(Duration::from_micros(1500)), 2);
        assert_eq!(millis(Duration::from_secs(5)), 5000);
        assert_eq!(millis(Duration::from_secs(u64::MAX)), i32::MAX);
    }

    #[test]
    fn bad_strings_are_refused_before_connecting() {
        let e = Client::builder("ws://127.0.0.1:1\0").open().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let e = Client::builder("ws://127.0.0.1:1")
            .api_key("a\0b")
            .open()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // Paths too: C would read one cut at the NUL, another file. (For
        // the ledger that is a usable path; the library may refuse a CA
        // file that does not exist, but must not be asked: hence "NUL".)
        let cut = std::env::temp_dir().join("plugrl-rust-nul-test");
        let mut with_nul = cut.into_os_string();
        with_nul.push("\0tail");
        let builders = [
            (
                "tls_ca_file",
                Client::builder("ws://127.0.0.1:1").tls_ca_file(&with_nul),
            ),
            (
                "ledger_path",
                Client::builder("ws://127.0.0.1:1").ledger_path(&with_nul),
            ),
        ];
        for (what, b) in builders {
            let e = b.max_reconnects(0).open().unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{what}: {e}");
            let said = e.message();
            assert!(said.contains(what) && said.contains("NUL"), "{what}: {e}");
        }
    }

    /// A panic value whose own drop panics.
    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("the payload's drop panics too");
        }
    }

    #[test]
    fn a_log_panic_whose_payload_panics_on_drop_does_not_abort() {
        const TEST: &str = "client::tests::a_log_panic_whose_payload_panics_on_drop_does_not_abort";
        // The panic would abort the process: run the callback in a child.
        if std::env::var_os("PLUGRL_TEST_CHILD").is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", TEST, "--test-threads", "1"])
                .env("PLUGRL_TEST_CHILD", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "the child died: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            // A TEST that names no test (a renamed module or function)
            // runs none, and that child succeeds too.
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("test result: ok. 1 passed;"),
                "the child did not run {TEST}:\n{stdout}"
            );
            return;
        }
        // Opening a ledger logs (at Info) before connecting.
        let dir =
            std::env::temp_dir().join(format!("plugrl-rust-log-panic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let logged = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = logged.clone();
        let _ = Client::builder("ws://127.0.0.1:1")
            .connect_timeout(Duration::from_millis(500))
            .max_reconnects(0)
            .ledger_path(&dir)
            .log(move |_, _| {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
                std::panic::panic_any(PanicsOnDrop)
            })
            .open();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            logged.load(std::sync::atomic::Ordering::SeqCst),
            "nothing was logged"
        );
    }

    #[test]
    fn connect_failure_carries_the_library_message() {
        // Port 1 on loopback: nothing listens there, the connection is
        // refused at once. No reconnects, short timeouts.
        let logged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = logged.clone();
        let e = Client::builder("ws://127.0.0.1:1")
            .connect_timeout(Duration::from_millis(500))
            .max_reconnects(0)
            .log(move |level, msg| sink.lock().unwrap().push((level, msg.to_string())))
            .open()
            .unwrap_err();
        assert!(
            matches!(e, Error::ConnectFailed(_) | Error::Timeout(_)),
            "{e:?}"
        );
        assert!(!e.message().is_empty(), "{e:?}");
    }
}
