//! probe_client: N probe envs of SPEC 8.1 on `plugrl::Runner`, which does
//! the chunk bookkeeping (chunk sums, early flush at a done, terminal
//! observations, step_ids, observation reuse, reconnects).
//!
//! Usage:
//!   probe_client --url ws://HOST:PORT [--envs N] [--api-key KEY]
//!                [--max-reconnects N] [--timeout-ms MS]
//!
//! The command line of the C and C++ probe clients. Exits 0 when the
//! server stops the run; on any other end prints the library's message and
//! exits 1 (2 for a usage error). `plugrl-conformance --probe --scenario
//! all --client "probe_client --url ..."` checks it.
//!
//! SIGINT (Ctrl-C) or SIGTERM ends the call that waits on the server at
//! once (connecting included), the client is dropped (which closes the
//! connection with a close frame and ends a ledger cleanly), and the
//! program ends by that signal, as the C and C++ probe clients do (a shell
//! sees 130 for SIGINT). A signal the program was started with ignored
//! (SIGINT in a script's background job) stays ignored, as the shell that
//! started it asks: stop such a program with SIGTERM. The handler needs
//! only the C library, which std links already: `sigaction(2)`, with the
//! `SA_ONSTACK` flag the Go runtime inside wants from the first instant
//! (a handler without it that runs on one of the runtime's threads writes
//! the signal frame on a goroutine's small stack).

use std::os::raw::c_int;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use plugrl::{Client, Error, Flow, LogLevel, Runner};
use plugrl_examples::cli::{Args, CliError};
use plugrl_examples::probe::ProbeEnvs;

const PROG: &str = "probe_client";
const USAGE: &str = "usage: probe_client --url ws://HOST:PORT [--envs N] [--api-key KEY]
                    [--max-reconnects N] [--timeout-ms MS]
Runs N probe envs (SPEC 8.1) on plugrl::Runner until the server stops the
run (exit 0); any other end exits 1 with the library's message.";

struct Config {
    url: String,
    api_key: Option<String>,
    envs: usize,
    max_reconnects: i64,
    timeout: Duration,
}

fn parse() -> Result<Config, CliError> {
    let a = Args::parse(
        std::env::args().skip(1),
        &[
            "--url",
            "--envs",
            "--api-key",
            "--max-reconnects",
            "--timeout-ms",
        ],
        &[],
    )?;
    Ok(Config {
        url: a.required("--url")?.to_string(),
        api_key: a.value("--api-key").map(str::to_string),
        envs: a.int("--envs", 1, 999, 3)?,
        max_reconnects: a.int("--max-reconnects", -1, 1_000_000, 5)?,
        timeout: Duration::from_millis(a.int("--timeout-ms", 1, i32::MAX as u64, 30_000)?),
    })
}

const SIGINT: c_int = 2; // the same on every Linux architecture
const SIGTERM: c_int = 15;
const SIG_DFL: usize = 0;
const SIG_IGN: usize = 1;
const SA_ONSTACK: c_int = 0x0800_0000;

/// The C library's `struct sigaction` on Linux, the same in glibc and musl
/// on x86_64 and aarch64 (the library's platforms): the handler's address
/// (or SIG_DFL, SIG_IGN), a 1024-bit mask, the flags, the restorer (which
/// the C library fills in). Another platform needs its own layout.
#[repr(C)]
struct SigAction {
    handler: usize,
    mask: [u64; 16],
    flags: c_int,
    restorer: usize,
}
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("probe_client's SigAction is struct sigaction of Linux on x86_64 and aarch64 only");
const _: () = assert!(std::mem::size_of::<SigAction>() == 152);

impl SigAction {
    fn new(handler: usize, flags: c_int) -> SigAction {
        SigAction {
            handler,
            mask: [0; 16],
            flags,
            restorer: 0,
        }
    }
}

extern "C" {
    // From the C library.
    fn sigaction(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int;
    fn raise(sig: c_int) -> c_int;
}

/// The signal that asked the program to stop (SIGINT, SIGTERM), or 0.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Async-signal-safe: an atomic store, and an interrupt of whatever call
/// waits on the server (`plugrl::interrupt_all` allocates nothing); a
/// client not in a call gets it pending, and its next call returns at once.
extern "C" fn on_signal(sig: c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    let _ = plugrl::interrupt_all();
}

fn stop_signal() -> c_int {
    STOP_SIGNAL.load(Ordering::SeqCst)
}

fn install_signal_handlers() -> Result<(), String> {
    let handler = SigAction::new(on_signal as extern "C" fn(c_int) as usize, SA_ONSTACK);
    for sig in [SIGINT, SIGTERM] {
        let mut old = SigAction::new(SIG_DFL, 0);
        // SAFETY: both point to SigActions of the C library's layout (see
        // SigAction); on_signal is async-signal-safe (above); no other
        // thread changes signal handlers while main installs them.
        let ok = unsafe {
            sigaction(sig, std::ptr::null(), &mut old) == 0
                && (old.handler == SIG_IGN // ignored at start: left so (see the top)
                    || sigaction(sig, &handler, std::ptr::null_mut()) == 0)
        };
        if !ok {
            return Err(format!(
                "sigaction for signal {sig}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Ends the program by the signal that asked it to stop, with a line
/// saying so, once the client is dropped (closed).
fn die_by_signal(sig: c_int) -> ExitCode {
    use std::io::Write;
    let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
    println!("{PROG}: interrupted ({name})");
    let _ = std::io::stdout().flush();
    // SAFETY: restores the default action and raises it in this thread;
    // the default action ends the process.
    unsafe {
        sigaction(sig, &SigAction::new(SIG_DFL, 0), std::ptr::null_mut());
        raise(sig);
    }
    ExitCode::from(128 + sig as u8) // not reached
}

/// Runs until the server stops the run, or a signal asks it to stop;
/// returns the episodes finished.
fn run(cfg: &Config) -> Result<usize, Error> {
    let n = cfg.envs;
    let mut builder = Client::builder(&cfg.url)
        .connect_timeout(cfg.timeout)
        .metadata_timeout(cfg.timeout)
        .receive_timeout(cfg.timeout)
        // The flag's 0 and -1 both mean "never"; the builder's 0 does too.
        .max_reconnects(u32::try_from(cfg.max_reconnects.max(0)).unwrap_or(u32::MAX))
        .log(|level, msg| {
            if level >= LogLevel::Info {
                eprintln!("{PROG}: {msg}");
            }
        });
    if let Some(key) = &cfg.api_key {
        builder = builder.api_key(key);
    }
    // A signal from here on ends the open, but not one that came before it
    // began: look first.
    if stop_signal() != 0 {
        return Ok(0);
    }
    let mut client = builder.open()?;

    let dim = client.action_dim().filter(|&d| d > 0);
    let mut width_known = dim.is_some();
    let mut probe = ProbeEnvs::new(n, dim.map_or(1, |d| d as usize));

    let mut runner = Runner::new(&mut client, n)?;
    let mut actions: Vec<f64> = Vec::new();
    let rewards = vec![1.0; n]; // the probe env pays 1 per step
    let truncated = vec![false; n]; // and never truncates
    let mut terminated = vec![false; n];
    let mut episodes = 0;
    loop {
        if stop_signal() != 0 {
            break; // the signal came between calls
        }
        if runner.act(&probe.observation()?, &mut actions)? == Flow::Stopped {
            break;
        }
        let width = actions.len() / n;
        if width != probe.width() {
            if width_known {
                return Err(Error::ProtocolError(format!(
                    "the server's actions have {width} values per step, metadata action_dim said {}",
                    probe.width()
                )));
            }
            // No action_dim in the metadata: the first action tells the width.
            probe.set_width(width);
            width_known = true;
        }
        probe.step(&actions, &mut terminated);
        // The observation after the step: the terminal one for envs that ended.
        let next = probe.observation()?;
        if runner.report(&next, &rewards, &terminated, &truncated, None)? == Flow::Stopped {
            break;
        }
        episodes += runner.episodes().len();
        probe.reset_ended(&terminated);
    }
    Ok(episodes)
}

fn main() -> ExitCode {
    let cfg = match parse() {
        Ok(c) => c,
        Err(CliError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(CliError::Usage(msg)) => {
            eprintln!("{PROG}: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Err(msg) = install_signal_handlers() {
        eprintln!("{PROG}: {msg}");
        return ExitCode::FAILURE;
    }
    let result = run(&cfg); // the client is dropped, so closed, by now
    if stop_signal() != 0 {
        return die_by_signal(stop_signal());
    }
    match result {
        Ok(episodes) => {
            println!("{PROG}: the server stopped the run after {episodes} episodes");
            ExitCode::SUCCESS
        }
        // e.g. the server stopped the run while we connected
        Err(Error::Stopped(_)) => {
            println!("{PROG}: the server stopped the run");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{PROG}: {e}");
            ExitCode::FAILURE
        }
    }
}
