//! The Rust cartpole learns to balance through PlugRL, the check of
//! tests/cartpole_learns.sh for the C++ MuJoCo demo: the cartpole client (8
//! envs, H = 1) runs 200 episodes against `plugrl serve --policy random`,
//! then twice 320 episodes against `plugrl serve --policy cem --seed 1`. It
//! passes if the two cem runs gave the same episodes, and the mean return
//! of cem's last 40 episodes is at least 3 times its first 40's and at
//! least 5 times the random policy's. Everything is seeded and runs on one
//! connection, so the returns are the same on every run and machine speed;
//! nothing here is a timing.

use std::path::Path;
use std::process::Command;

use plugrl_examples::testing::{say, Server};

const WINDOW: usize = 40;

/// One CSV row without its wall-clock column: episode, env, return,
/// length, success.
type Row = (String, String, String, String, String);

fn run(policy: &str, episodes: usize, csv: &Path) -> Vec<Row> {
    let server = Server::serve(&[
        "--policy",
        policy,
        "--horizon",
        "1",
        "--action-dim",
        "1",
        "--action-dtype",
        "float64",
        "--seed",
        "1",
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_cartpole"))
        .args(["--envs", "8", "--episodes", &episodes.to_string()])
        .args(["--seed", "1", "--quiet", "--csv"])
        .arg(csv)
        .args(["--url", &server.url])
        .output()
        .expect("run the cartpole client");
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "cartpole against {policy}: {}",
        out.status
    );
    if let Some(summary) = text.lines().last() {
        say(&format!("  {policy}: {summary}"));
    }
    let rows: Vec<Row> = std::fs::read_to_string(csv)
        .expect("read the CSV")
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 6, "bad CSV line {l:?}");
            let s = |i: usize| f[i].to_string();
            (s(0), s(1), s(3), s(4), s(5))
        })
        .collect();
    assert!(
        rows.len() >= episodes,
        "{} episodes in {}",
        rows.len(),
        csv.display()
    );
    rows
}

fn returns(rows: &[Row]) -> Vec<f64> {
    rows.iter()
        .map(|r| r.2.parse().expect("a return"))
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn cartpole_learns_with_cem_and_beats_random() {
    let dir = std::env::temp_dir().join(format!("plugrl-cartpole-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let random = returns(&run("random", 200, &dir.join("random.csv")));
    let cem_rows = run("cem", 320, &dir.join("cem.csv"));
    let cem_again = run("cem", 320, &dir.join("cem2.csv"));
    std::fs::remove_dir_all(&dir).unwrap();

    assert_eq!(
        cem_rows, cem_again,
        "two runs with the same seeds gave different episodes"
    );
    let cem = returns(&cem_rows);
    let (first, last) = (mean(&cem[..WINDOW]), mean(&cem[cem.len() - WINDOW..]));
    let random_mean = mean(&random);
    say(&format!(
        "cartpole: two seeded cem runs gave the same {} episodes; mean return of the first {WINDOW}: \
         {first:.1}, of the last {WINDOW}: {last:.1} ({:.1} x); random policy: {random_mean:.1} over \
         {} episodes, the learner's last {WINDOW}: {:.1} x that",
        cem.len(),
        last / first,
        random.len(),
        last / random_mean
    ));
    assert!(
        last >= 3.0 * first,
        "no gain: first {first:.1}, last {last:.1}"
    );
    assert!(
        last >= 5.0 * random_mean,
        "last {last:.1} is not 5 x random's {random_mean:.1}"
    );
}
