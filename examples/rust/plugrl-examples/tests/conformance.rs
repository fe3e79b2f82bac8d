//! The Rust probe client under the protocol authors' checker, as CTest runs
//! the C and C++ ones (tests/conformance.sh): `plugrl-conformance --probe
//! --scenario all --timeout 40 --port P --client "probe_client --url
//! ws://127.0.0.1:P --envs 3" [--action-dtype D] [--features F]`, which
//! must exit 0 with "no violations" and no "advisory note".
//!
//! Skipped (with a message) when the checker or the Python modules it
//! needs are missing.

use std::process::Command;

use plugrl_examples::testing::{checker_or_skip, free_port, say, sh_quote};

fn check(test: &str, dtype: &str, reuse: bool) {
    let Some(checker) = checker_or_skip(test) else {
        return;
    };
    // The port is free when picked, and another process (a test running
    // beside this one) may take it before the checker binds it: then the
    // checker fails at once with "address already in use", and another
    // port is tried, as tests/conformance.sh does.
    let mut attempt = 1;
    let (out, report) = loop {
        let port = free_port().to_string();
        let client = format!(
            "{} --url ws://127.0.0.1:{port} --envs 3",
            sh_quote(env!("CARGO_BIN_EXE_probe_client"))
        );
        let mut cmd = Command::new(&checker);
        cmd.args(["--probe", "--scenario", "all", "--timeout", "40"])
            .args(["--port", &port, "--client", &client])
            .args(["--action-dtype", dtype]);
        if reuse {
            cmd.args(["--features", "reuse-feedback-obs"]);
        }
        let out = cmd.output().expect("run plugrl-conformance");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let taken =
            !out.status.success() && report.to_lowercase().contains("address already in use");
        if !taken || attempt == 3 {
            break (out, report);
        }
        say(&format!(
            "{test}: port {port} was taken before the checker bound it (attempt {attempt}); another port"
        ));
        attempt += 1;
    };
    // Shown by the harness when the test fails (or with --nocapture).
    println!("{report}");
    assert!(
        out.status.success(),
        "the checker exited with {}",
        out.status
    );
    assert!(
        report.contains("no violations"),
        "the report does not say \"no violations\""
    );
    assert!(
        !report.contains("advisory note"),
        "the report has advisory notes"
    );
    let clauses = report
        .lines()
        .filter(|l| l.trim_start().starts_with("ok "))
        .count();
    say(&format!(
        "{test}: no violations, no advisory notes ({clauses} clauses ok)"
    ));
}

#[test]
fn conformance_float32() {
    check("conformance_float32", "float32", false);
}

#[test]
fn conformance_float64() {
    check("conformance_float64", "float64", false);
}

#[test]
fn conformance_reuse_float32() {
    check("conformance_reuse_float32", "float32", true);
}

#[test]
fn conformance_reuse_float64() {
    check("conformance_reuse_float64", "float64", true);
}
