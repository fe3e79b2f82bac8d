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

use std::process::ExitCode;
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

/// Runs until the server stops the run; returns the episodes finished.
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
    match run(&cfg) {
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
