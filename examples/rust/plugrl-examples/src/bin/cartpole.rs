//! cartpole: N classic-control cartpoles (plugrl_examples::cartpole),
//! trained through PlugRL: the server's policy pushes each cart, this
//! program steps the physics, and `plugrl::Runner` does the protocol's
//! bookkeeping. Against `plugrl serve --policy cem --horizon 1
//! --action-dim 1` it learns to balance.
//!
//! Usage:
//!   cartpole --url ws://HOST:PORT [--envs N] [--episodes K] [--max-steps T]
//!            [--seed S] [--csv PATH] [--quiet] [--timeout-ms MS]
//!
//! The command line of the C++ MuJoCo cartpole. Prints each episode's
//! return as it ends (not with --quiet) and a summary; --csv writes one
//! line per episode: episode,env,seconds,return,length,success. Runs until
//! K episodes have ended (K = 0: until the server stops the run), then
//! exits 0; any other end exits 1 with the library's message (2 for a usage
//! error).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use plugrl::{Client, Error, Flow, LogLevel, Runner};
use plugrl_examples::cartpole::Cartpoles;
use plugrl_examples::cli::{Args, CliError};

const PROG: &str = "cartpole";
const USAGE: &str = "usage: cartpole --url ws://HOST:PORT [--envs N] [--episodes K] [--max-steps T]
                [--seed S] [--csv PATH] [--quiet] [--timeout-ms MS]
Runs N classic-control cartpoles on plugrl::Runner until K episodes have
ended (K = 0: until the server stops the run). Episodes last at most T steps.";

struct Config {
    url: String,
    envs: usize,
    episodes: usize,
    max_steps: u64,
    seed: u64,
    csv: Option<String>,
    quiet: bool,
    timeout: Duration,
}

fn parse() -> Result<Config, CliError> {
    let a = Args::parse(
        std::env::args().skip(1),
        &[
            "--url",
            "--envs",
            "--episodes",
            "--max-steps",
            "--seed",
            "--csv",
            "--timeout-ms",
        ],
        &["--quiet"],
    )?;
    Ok(Config {
        url: a.required("--url")?.to_string(),
        envs: a.int("--envs", 1, 999, 8)?,
        episodes: a.int("--episodes", 0, 1_000_000_000, 0)?,
        max_steps: a.int("--max-steps", 1, 1_000_000_000, 500)?,
        seed: a.int("--seed", 0, u64::MAX, 1)?,
        csv: a.value("--csv").map(str::to_string),
        quiet: a.switch("--quiet"),
        timeout: Duration::from_millis(a.int("--timeout-ms", 1, i32::MAX as u64, 30_000)?),
    })
}

/// An episode as recorded.
struct Record {
    env: usize,
    seconds: f64,
    ret: f64,
    length: i64,
    success: bool,
}

fn mean(r: &[Record]) -> f64 {
    if r.is_empty() {
        return 0.0;
    }
    r.iter().map(|e| e.ret).sum::<f64>() / r.len() as f64
}

fn run(cfg: &Config) -> Result<(), Box<dyn std::error::Error>> {
    let n = cfg.envs;
    let mut envs = Cartpoles::new(n, cfg.max_steps, cfg.seed);
    let mut csv = match &cfg.csv {
        Some(path) => {
            let mut f = BufWriter::new(
                File::create(path).map_err(|e| format!("cannot write {path}: {e}"))?,
            );
            writeln!(f, "episode,env,seconds,return,length,success")?;
            Some(f)
        }
        None => None,
    };

    let mut client = Client::builder(&cfg.url)
        .connect_timeout(cfg.timeout)
        .metadata_timeout(cfg.timeout)
        .receive_timeout(cfg.timeout)
        .log(|level, msg| {
            if level >= LogLevel::Info {
                eprintln!("{PROG}: {msg}");
            }
        })
        .open()?;
    if let Some(d) = client.action_dim() {
        if d != Cartpoles::ACTION_WIDTH as i64 {
            return Err(Error::InvalidArgument(format!(
                "the server's action_dim is {d}; the cartpole has one actuator (serve with --action-dim 1)"
            ))
            .into());
        }
    }
    let text = |key: &str| client.metadata_string(key).unwrap_or_else(|| "?".into());
    println!(
        "{PROG}: {n} cartpoles, episodes of at most {} steps, server {} (algorithm {}, policy {}, horizon {})",
        cfg.max_steps,
        text("server"),
        text("algorithm"),
        text("policy"),
        client.action_horizon().unwrap_or(0)
    );

    let mut runner = Runner::new(&mut client, n)?;
    let start = Instant::now();
    let mut done: Vec<Record> = Vec::new();
    let mut actions: Vec<f64> = Vec::new();
    let mut rewards = vec![0.0; n];
    let mut terminated = vec![false; n];
    let mut truncated = vec![false; n];
    let mut steps: u64 = 0;
    let mut stopped = false;
    loop {
        if runner.act(&envs.observation()?, &mut actions)? == Flow::Stopped {
            stopped = true;
            break;
        }
        if actions.len() != n * Cartpoles::ACTION_WIDTH {
            return Err(Error::ProtocolError(format!(
                "the server's actions have {} values per step; the cartpole has one actuator",
                actions.len() / n
            ))
            .into());
        }
        for i in 0..n {
            let r = envs.step(i, actions[i]);
            rewards[i] = r.reward;
            terminated[i] = r.terminated;
            truncated[i] = r.truncated;
        }
        steps += n as u64;
        // The state after every env's step: the terminal observation for
        // those that ended. Success: it lasted all T steps.
        let next = envs.observation()?;
        if runner.report(&next, &rewards, &terminated, &truncated, Some(&truncated))?
            == Flow::Stopped
        {
            stopped = true;
            break;
        }
        for e in runner.episodes() {
            let r = Record {
                env: e.env,
                seconds: start.elapsed().as_secs_f64(),
                ret: e.episode_return,
                length: e.length,
                success: e.success,
            };
            let k = done.len() + 1;
            if !cfg.quiet {
                println!(
                    "episode {k} env {} return {} length {}{} at {:.1} s",
                    r.env,
                    r.ret,
                    r.length,
                    if r.success { " success" } else { "" },
                    r.seconds
                );
            }
            if let Some(f) = &mut csv {
                writeln!(
                    f,
                    "{k},{},{:.3},{},{},{}",
                    r.env,
                    r.seconds,
                    r.ret,
                    r.length,
                    u8::from(r.success)
                )?;
            }
            done.push(r);
        }
        if cfg.episodes > 0 && done.len() >= cfg.episodes {
            break;
        }
        for i in 0..n {
            if terminated[i] || truncated[i] {
                envs.reset(i);
            }
        }
    }
    if let Some(mut f) = csv {
        f.flush()?;
    }
    let wall = start.elapsed().as_secs_f64();
    println!(
        "{PROG}: {} after {} episodes, {steps} env steps in {wall:.1} s ({:.0} steps/s)",
        if stopped {
            "the server stopped the run"
        } else {
            "done"
        },
        done.len(),
        if wall > 0.0 { steps as f64 / wall } else { 0.0 }
    );
    if !done.is_empty() {
        let k = (done.len() / 2).clamp(1, 20);
        let best = done.iter().map(|r| r.ret).fold(f64::MIN, f64::max);
        let wins = done.iter().filter(|r| r.success).count();
        println!(
            "{PROG}: mean return {:.1}, best {best:.1}, {wins} episodes balanced all {} steps; \
             first {k} episodes' mean {:.1}, last {k} episodes' mean {:.1}",
            mean(&done),
            cfg.max_steps,
            mean(&done[..k]),
            mean(&done[done.len() - k..])
        );
    }
    Ok(())
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
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<Error>() {
            Some(Error::Stopped(_)) => {
                println!("{PROG}: the server stopped the run");
                ExitCode::SUCCESS
            }
            _ => {
                eprintln!("{PROG}: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
