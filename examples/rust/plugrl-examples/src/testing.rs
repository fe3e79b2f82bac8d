//! What the integration tests share: where `plugrl` and the protocol
//! checker are, running a server on a free port, and skipping a test whose
//! tools are missing.
//!
//! - `PLUGRL_BIN_DIR`: the directory of `plugrl` (and `plugrl-hostile`);
//!   default `../../build/bin` relative to the workspace (`examples/rust`),
//!   where `./build.sh` puts them.
//! - `PLUGRL_CONFORMANCE`: the checker; default
//!   `<repository>/../shared/conformance/plugrl-conformance`, as CMake finds it.
//! - `PLUGRL_CONFORMANCE_REQUIRED=1`: a checker run that cannot be made (no
//!   checker, or its Python modules missing) fails instead of skipping.
//!   tests/rust.sh sets it whenever the checker is there, as CTest's C and
//!   C++ conformance runs fail when the checker cannot run.

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The libplugrl repository (three levels above this package).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The directory of `plugrl`: `PLUGRL_BIN_DIR`, or the repository's
/// `build/bin`.
pub fn bin_dir() -> PathBuf {
    match std::env::var_os("PLUGRL_BIN_DIR") {
        Some(d) => PathBuf::from(d),
        None => repo_root().join("build/bin"),
    }
}

/// `name` in [`bin_dir`], or a panic that says how to get it.
pub fn require_bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{} does not exist: build libplugrl with ./build.sh, or set PLUGRL_BIN_DIR to the \
         directory holding {name}",
        p.display()
    );
    p
}

/// Prints a line that the test harness does not capture, e.g. why a test
/// was skipped, so that it shows in `cargo test`'s output.
pub fn say(line: &str) {
    // io::stderr() bypasses the harness's capture of print!/eprint!.
    let _ = writeln!(io::stderr(), "{line}");
}

/// Set to `1`, a checker run that cannot be made fails instead of being
/// skipped (see the top of this module).
pub const CONFORMANCE_REQUIRED: &str = "PLUGRL_CONFORMANCE_REQUIRED";

/// The protocol checker, or `None` (after printing why the test is
/// skipped) when it or the Python modules it needs are missing. Panics
/// instead of skipping when [`CONFORMANCE_REQUIRED`] is `1`: a skipped
/// check is otherwise a passed test, which `cargo test` (and so
/// tests/rust.sh and CTest) cannot tell from a checked one.
pub fn checker_or_skip(test: &str) -> Option<PathBuf> {
    let required = std::env::var_os(CONFORMANCE_REQUIRED).is_some_and(|v| v == "1");
    let checker = match std::env::var_os("PLUGRL_CONFORMANCE") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join("../shared/conformance/plugrl-conformance"),
    };
    if !checker.is_file() {
        return skip(
            required,
            test,
            &format!(
                "no protocol checker at {} (set PLUGRL_CONFORMANCE)",
                checker.display()
            ),
        );
    }
    // The checker runs under the interpreter of its #! line.
    let python = interpreter(&checker).unwrap_or_else(|| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import websockets, msgpack, numpy"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return skip(
            required,
            test,
            &format!(
                "{python} lacks websockets, msgpack or numpy, which the checker needs \
                 (Debian: apt-get install python3-websockets python3-msgpack python3-numpy)"
            ),
        );
    }
    Some(checker)
}

/// Skips `test` saying `why`, or, when the check is `required`, fails it.
fn skip(required: bool, test: &str, why: &str) -> Option<PathBuf> {
    assert!(
        !required,
        "{test}: {why}; {CONFORMANCE_REQUIRED}=1 says the checker must run"
    );
    say(&format!("SKIPPED {test}: {why}"));
    None
}

/// The program of a script's `#!` line (`#!/usr/bin/env X` gives `X`).
fn interpreter(script: &Path) -> Option<String> {
    let file = std::fs::File::open(script).ok()?;
    let mut line = String::new();
    BufReader::new(file).read_line(&mut line).ok()?;
    let words: Vec<&str> = line.strip_prefix("#!")?.split_whitespace().collect();
    match words.as_slice() {
        [env, prog, ..] if env.ends_with("/env") => Some(prog.to_string()),
        [prog, ..] => Some(prog.to_string()),
        [] => None,
    }
}

/// A TCP port on 127.0.0.1 that is free right now (the kernel's pick for
/// port 0).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local_addr").port()
}

/// Quotes `s` for a POSIX shell.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A server process on a free port of 127.0.0.1, stopped when dropped.
pub struct Server {
    child: Child,
    /// The `ws://` URL it printed.
    pub url: String,
    stdout: mpsc::Receiver<String>,
}

impl Server {
    /// Runs `program args...` (e.g. `plugrl serve --addr 127.0.0.1:0 ...`)
    /// and waits up to 20 s for the `ws://` URL it prints first on stdout.
    pub fn start(program: &Path, args: &[&str]) -> io::Result<Server> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        // Read stdout on a thread: for the URL, then so that the server
        // never blocks on a full pipe (cem prints its table there).
        let out = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let url = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => line
                .split_whitespace()
                .find(|w| w.starts_with("ws://") || w.starts_with("wss://"))
                .map(str::to_string),
            Err(_) => None,
        };
        match url {
            Some(url) => Ok(Server {
                child,
                url,
                stdout: rx,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(io::Error::other(format!(
                    "{} {args:?} printed no ws:// URL",
                    program.display()
                )))
            }
        }
    }

    /// `plugrl serve --addr 127.0.0.1:0 --quiet <flags>` from [`bin_dir`].
    pub fn serve(flags: &[&str]) -> Server {
        let plugrl = require_bin("plugrl");
        let mut args = vec!["serve", "--addr", "127.0.0.1:0", "--quiet"];
        args.extend_from_slice(flags);
        Server::start(&plugrl, &args).expect("start plugrl serve")
    }

    /// `plugrl-hostile --scenario <scenario> --addr 127.0.0.1:0 <flags>`
    /// from [`bin_dir`]: a server that misbehaves in the way the scenario
    /// names (`plugrl-hostile --list`).
    pub fn hostile(scenario: &str, flags: &[&str]) -> Server {
        let hostile = require_bin("plugrl-hostile");
        let mut args = vec!["--scenario", scenario, "--addr", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        Server::start(&hostile, &args).expect("start plugrl-hostile")
    }

    /// The lines the server printed after its URL, so far.
    pub fn output(&self) -> Vec<String> {
        self.stdout.try_iter().collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Only this child, by its pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "PLUGRL_CONFORMANCE_REQUIRED=1 says the checker must run")]
    fn a_required_check_fails_instead_of_skipping() {
        let _ = skip(
            true,
            "conformance_float32",
            "no protocol checker at /nowhere",
        );
    }

    #[test]
    fn a_check_not_required_is_skipped() {
        assert_eq!(
            skip(
                false,
                "conformance_float32",
                "no protocol checker at /nowhere"
            ),
            None
        );
    }

    #[test]
    fn quoting_survives_a_shell() {
        let s = "/tmp/it's here/probe";
        let out = Command::new("sh")
            .args(["-c", &format!("printf %s {}", sh_quote(s))])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), s);
    }

    #[test]
    fn shebangs() {
        let dir = std::env::temp_dir().join(format!("plugrl-shebang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s");
        for (line, want) in [
            ("#!/usr/bin/python3\n", Some("/usr/bin/python3")),
            ("#!/usr/bin/env python3 -u\n", Some("python3")),
            ("print()\n", None),
        ] {
            std::fs::write(&f, line).unwrap();
            assert_eq!(interpreter(&f).as_deref(), want, "{line}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
