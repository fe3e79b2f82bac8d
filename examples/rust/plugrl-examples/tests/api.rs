//! The safe crate against real servers: `plugrl serve` (the reference
//! server) and `plugrl-hostile` (a server that misbehaves on purpose), both
//! from PLUGRL_BIN_DIR (default: the repository's build/bin).

use std::thread;
use std::time::{Duration, Instant};

use plugrl::{
    Client, Dtype, EpisodeStats, Error, Feedback, FeedbackOutcome, Flow, Infer, Observation, Runner,
};
use plugrl_examples::probe::ProbeEnvs;
use plugrl_examples::testing::{bin_dir, say, Server};

/// What `plugrl serve --policy probe` sends at step k for env j, value d.
fn probe_value(k: usize, env: i64, d: usize) -> f64 {
    (10000 * k) as f64 + (10 * env) as f64 + d as f64
}

fn probe_server(dtype: &str) -> Server {
    Server::serve(&[
        "--policy",
        "probe",
        "--horizon",
        "4",
        "--action-dim",
        "2",
        "--action-dtype",
        dtype,
        "--features",
        "reuse-feedback-obs",
    ])
}

fn connect(server: &Server) -> Client {
    Client::builder(&server.url)
        .connect_timeout(Duration::from_secs(10))
        .receive_timeout(Duration::from_secs(30))
        .open()
        .expect("connect to plugrl serve")
}

#[test]
fn metadata_getters() {
    let server = probe_server("float32");
    let client = connect(&server);
    assert_eq!(client.protocol_version(), Some(1));
    assert_eq!(client.action_horizon(), Some(4));
    assert_eq!(client.action_dim(), Some(2));
    assert_eq!(client.metadata_int("action_dim"), Some(2));
    assert!(client
        .metadata_string("server")
        .is_some_and(|s| !s.is_empty()));
    assert!(client.metadata_string("policy").is_some());
    // Absent, or of another type: None, never a zero or an empty string.
    assert_eq!(client.metadata_string("no-such-key"), None);
    assert_eq!(client.metadata_int("no-such-key"), None);
    assert_eq!(client.metadata_int("server"), None);
    assert_eq!(client.metadata_string("action_dim"), None);
    assert_eq!(client.metadata_int("with\0nul"), None);
    assert!(client.has_feature("reuse-feedback-obs"));
    assert!(!client.has_feature("no-such-feature"));
    assert_eq!(
        client.metadata_json("action_dim").unwrap().as_deref(),
        Some("2")
    );
    assert_eq!(
        client.metadata_json("features").unwrap().as_deref(),
        Some(r#"["reuse-feedback-obs"]"#)
    );
    assert_eq!(client.metadata_json("no-such-key").unwrap(), None);
    assert!(matches!(
        client.metadata_json("with\0nul"),
        Err(Error::InvalidArgument(_))
    ));
    let all = client.metadata_json_all().unwrap();
    assert!(
        all.starts_with('{') && all.contains("\"action_horizon\""),
        "{all}"
    );
}

#[test]
fn low_level_infer_view_copy_and_feedback() {
    let server = probe_server("float32");
    let mut client = connect(&server);
    let t = [0.0f64, 0.0];
    let mut obs = Observation::new();
    obs.state("t", &t, &[2, 1]).unwrap();
    let envs = [2i64, 0];

    let Infer::Action(view) = client.infer(&envs, &[0, 0], &obs, None).unwrap() else {
        panic!("no action");
    };
    assert_eq!(view.dtype(), Dtype::F32);
    assert_eq!(view.shape(), &[4, 2, 2]);
    assert_eq!(view.env_ids(), &envs);
    assert_eq!(
        (view.horizon(), view.num_envs(), view.step_size()),
        (4, 2, 2)
    );
    assert_eq!(view.len(), 16);
    // Time-major [H, n, d], row j is env envs[j].
    let data = view.as_slice::<f32>().unwrap();
    for k in 0..4 {
        for (j, &env) in envs.iter().enumerate() {
            for d in 0..2 {
                assert_eq!(data[(k * 2 + j) * 2 + d] as f64, probe_value(k, env, d));
            }
        }
    }
    assert_eq!(view.step::<f32>(3, 0).unwrap(), &[30020.0, 30021.0]);
    assert!(matches!(
        view.step::<f32>(4, 0),
        Err(Error::InvalidArgument(_))
    ));
    // Env 2 of 2 is outside too, though its start is inside the data.
    assert!(matches!(
        view.step::<f32>(0, 2),
        Err(Error::InvalidArgument(_))
    ));
    // Another element type is refused without a copy, converted with one;
    // also one of the same size (the bits of an f32 are not an i32).
    assert!(matches!(
        view.as_slice::<f64>(),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        view.as_slice::<i32>(),
        Err(Error::InvalidArgument(_))
    ));
    let as_f64 = view.to_vec::<f64>().unwrap();
    assert_eq!(as_f64[15], probe_value(3, 0, 1));

    // Infer again while a feedback is owed: refused, nothing sent.
    let e = client.infer(&envs, &[0, 0], &obs, None).unwrap_err();
    assert!(matches!(e, Error::OutOfOrder(_)), "{e}");

    // Lengths are checked before the library is called.
    let e = client
        .feedback(&Feedback {
            env_indices: &envs,
            step_ids: &[0, 0],
            next_obs: &obs,
            rewards: &[4.0],
            terminated: &[false, false],
            truncated: &[false, false],
            episode: None,
        })
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    let t_after = [4.0f64, 4.0];
    let mut next = Observation::new();
    next.state("t", &t_after, &[2, 1]).unwrap();
    let sent = client
        .feedback(&Feedback {
            env_indices: &envs,
            step_ids: &[0, 0],
            next_obs: &next,
            rewards: &[4.0, 4.0],
            terminated: &[false, false],
            truncated: &[false, false],
            episode: None,
        })
        .unwrap();
    assert_eq!(sent, FeedbackOutcome::Sent);

    // The server offers reuse-feedback-obs and neither episode ended: env
    // 2's observation is not sent again; obs holds only env 0's row.
    assert!(client.can_reuse(2).unwrap());
    let only_env0 = [4.0f64];
    let mut partial = Observation::new();
    partial.state("t", &only_env0, &[1, 1]).unwrap();
    let Infer::Action(view) = client
        .infer(&envs, &[1, 1], &partial, Some(&[true, false]))
        .unwrap()
    else {
        panic!("no action");
    };
    assert_eq!(view.env_ids(), &envs);
}

/// Every slice that plugrl_infer and plugrl_feedback read `n` values from
/// is checked against `n` first. Each short slice here is the front of a
/// longer array, so a call that skipped a check would read valid memory and
/// go through, and the test would see it succeed.
#[test]
fn infer_and_feedback_refuse_short_slices_before_the_library_reads_them() {
    let server = probe_server("float32");
    let mut client = connect(&server);
    let t = [0.0f64, 0.0];
    let mut obs = Observation::new();
    obs.state("t", &t, &[2, 1]).unwrap();
    let (envs, zeros, flags) = ([0i64, 1], [0i64, 0], [false, false]);

    let e = client.infer(&envs, &zeros[..1], &obs, None).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "step_ids: {e}");
    let e = client
        .infer(&envs, &zeros, &obs, Some(&flags[..1]))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "reuse: {e}");
    // Nothing was sent: the connection takes the infer.
    assert!(matches!(
        client.infer(&envs, &zeros, &obs, None).unwrap(),
        Infer::Action(_)
    ));

    let (rewards, returns, lengths) = ([1.0f32, 1.0], [1.0f64, 1.0], [1i64, 1]);
    let good = Feedback {
        env_indices: &envs,
        step_ids: &zeros,
        next_obs: &obs,
        rewards: &rewards,
        terminated: &flags,
        truncated: &flags,
        episode: None,
    };
    let stats = EpisodeStats {
        returns: &returns,
        lengths: &lengths,
        success: Some(&flags),
        mask: &flags,
    };
    let short = [
        (
            "step_ids",
            Feedback {
                step_ids: &zeros[..1],
                ..good
            },
        ),
        (
            "rewards",
            Feedback {
                rewards: &rewards[..1],
                ..good
            },
        ),
        (
            "terminated",
            Feedback {
                terminated: &flags[..1],
                ..good
            },
        ),
        (
            "truncated",
            Feedback {
                truncated: &flags[..1],
                ..good
            },
        ),
        (
            "returns",
            Feedback {
                episode: Some(EpisodeStats {
                    returns: &returns[..1],
                    ..stats
                }),
                ..good
            },
        ),
        (
            "lengths",
            Feedback {
                episode: Some(EpisodeStats {
                    lengths: &lengths[..1],
                    ..stats
                }),
                ..good
            },
        ),
        (
            "success",
            Feedback {
                episode: Some(EpisodeStats {
                    success: Some(&flags[..1]),
                    ..stats
                }),
                ..good
            },
        ),
        (
            "mask",
            Feedback {
                episode: Some(EpisodeStats {
                    mask: &flags[..1],
                    ..stats
                }),
                ..good
            },
        ),
    ];
    for (what, fb) in short {
        let e = client.feedback(&fb).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{what}: {e}");
    }
    assert_eq!(
        client
            .feedback(&Feedback {
                episode: Some(stats),
                ..good
            })
            .unwrap(),
        FeedbackOutcome::Sent
    );
}

/// report checks each slice against num_envs before the library reads
/// num_envs values from it (each short slice is the front of a longer
/// array, as above), and keeps every episode when all envs end at once.
#[test]
fn report_refuses_short_slices_and_keeps_episodes_that_end_together() {
    let server = probe_server("float64");
    let mut client = connect(&server);
    let n = 2;
    let mut runner = Runner::new(&mut client, n).unwrap();
    let t = [0.0f64; 2];
    let mut obs = Observation::new();
    obs.state("t", &t, &[2, 1]).unwrap();
    let mut actions: Vec<f64> = Vec::new();
    assert_eq!(runner.act(&obs, &mut actions).unwrap(), Flow::Continue);
    let (rewards, no, yes) = ([1.0f64; 2], [false; 2], [true; 2]);
    // What is short, then rewards, terminated, truncated and success.
    type Args<'a> = (
        &'a str,
        &'a [f64],
        &'a [bool],
        &'a [bool],
        Option<&'a [bool]>,
    );
    let short: [Args; 4] = [
        ("rewards", &rewards[..1], &yes, &no, None),
        ("terminated", &rewards, &yes[..1], &no, None),
        ("truncated", &rewards, &yes, &no[..1], None),
        ("success", &rewards, &yes, &no, Some(&yes[..1])),
    ];
    for (what, r, term, trunc, success) in short {
        let e = runner.report(&obs, r, term, trunc, success).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{what}: {e}");
    }
    let flow = runner
        .report(&obs, &rewards, &yes, &no, Some(&yes))
        .unwrap();
    assert_eq!(flow, Flow::Continue);
    let mut ended = runner.episodes().to_vec();
    ended.sort_by_key(|e| e.env);
    let want = |env| plugrl::Episode {
        env,
        episode_return: 1.0,
        length: 1,
        success: true,
    };
    assert_eq!(ended, [want(0), want(1)]);
}

/// An open that fails still gets its handle closed (plugrl.h: as with
/// sqlite3_open, the caller must close it): the ledger the open began then
/// ends with its end record, which a handle left open never writes.
#[test]
fn a_failed_open_closes_its_handle() {
    let dir = std::env::temp_dir().join(format!("plugrl-rust-failed-open-{}", std::process::id()));
    // A run that failed before its cleanup, under a process id reused
    // since (fresh containers start from the same ids), left its files.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Port 1 on loopback: nothing listens, the connection is refused.
    let e = Client::builder("ws://127.0.0.1:1")
        .connect_timeout(Duration::from_millis(500))
        .max_reconnects(0)
        .ledger_path(&dir)
        .open()
        .unwrap_err();
    assert!(
        matches!(e, Error::ConnectFailed(_) | Error::Timeout(_)),
        "{e}"
    );
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let summary = std::process::Command::new(plugrl_examples::testing::require_bin("plugrl"))
        .args(["ledger", "summary"])
        .arg(&files[0])
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&summary.stdout);
    assert!(summary.contains("closed cleanly"), "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runner_steps_probe_envs_and_reports_episodes() {
    let server = probe_server("float64");
    let mut client = connect(&server);
    let n = 3;
    let mut probe = ProbeEnvs::new(n, 2);
    let mut runner = Runner::new(&mut client, n).unwrap();
    assert_eq!(runner.step_size(), Some(2));
    assert_eq!(runner.client().action_dim(), Some(2));

    let (rewards, truncated) = (vec![1.0; n], vec![false; n]);
    let mut terminated = vec![false; n];
    let mut actions: Vec<i32> = Vec::new(); // converted from float64
    let mut episodes = Vec::new();
    for _ in 0..21 {
        let flow = runner
            .act(&probe.observation().unwrap(), &mut actions)
            .unwrap();
        assert_eq!(flow, Flow::Continue);
        assert_eq!(actions.len(), n * 2);
        for i in 0..n {
            for d in 0..2 {
                // The step within the chunk varies; env and value do not.
                assert_eq!(actions[i * 2 + d] % 10000, (10 * i + d) as i32);
            }
        }
        // The rest of the last env's chunk starts with the step act gave
        // it (the probe policy, H = 4: 10000 k + 10 env + d).
        let mut plan: Vec<f64> = Vec::new();
        let left = runner.chunk(n - 1, &mut plan).unwrap();
        assert!((1..=4).contains(&left), "{left} steps left");
        assert_eq!(plan.len(), left * 2);
        for d in 0..2 {
            assert_eq!(plan[d], actions[(n - 1) * 2 + d] as f64);
        }
        for k in 1..left {
            assert_eq!(plan[k * 2], plan[0] + 10000.0 * k as f64);
        }
        let e = runner.chunk(n, &mut plan).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let as_f64: Vec<f64> = actions.iter().map(|&v| v as f64).collect();
        probe.step(&as_f64, &mut terminated);
        let next = probe.observation().unwrap();
        let flow = runner
            .report(&next, &rewards, &terminated, &truncated, None)
            .unwrap();
        assert_eq!(flow, Flow::Continue);
        episodes.extend_from_slice(runner.episodes());
        probe.reset_ended(&terminated);
        // Between report and the next act there is no chunk to ask for.
        let e = runner.chunk(0, &mut Vec::<f64>::new()).unwrap_err();
        assert!(matches!(e, Error::OutOfOrder(_)), "{e}");
    }
    // 21 steps: env 0 ends 7 episodes of 3 steps, env 1 four of 5, env 2
    // three of 7.
    let count = |env: usize| episodes.iter().filter(|e| e.env == env).count();
    assert_eq!((count(0), count(1), count(2)), (7, 4, 3));
    for e in &episodes {
        let len = ProbeEnvs::episode_length(e.env);
        assert_eq!((e.episode_return, e.length as f64), (len, len), "{e:?}");
    }

    // Live statistics: 21 steps of 3 envs, the episodes above, and the
    // client's exchanges with their round trips.
    let st = runner.stats().unwrap();
    assert_eq!(st.env_steps, 21 * n as u64, "{st:?}");
    assert_eq!(st.episodes, episodes.len() as u64, "{st:?}");
    assert!(
        st.exchanges > 0 && st.feedbacks > 0 && st.bytes_sent > 0,
        "{st:?}"
    );
    assert!(
        st.rtt_p50 > Duration::ZERO && st.rtt_p50 <= st.rtt_p99 && st.rtt_p99 <= st.rtt_max,
        "{st:?}"
    );
    let cst = runner.client().stats().unwrap();
    assert_eq!((cst.exchanges, cst.env_steps), (st.exchanges, 0));

    // The lengths of report's slices are checked before the library reads them.
    let next = probe.observation().unwrap();
    let e = runner
        .report(&next, &rewards[..2], &terminated, &truncated, None)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn interrupt_before_a_call_and_after_drop() {
    let server = probe_server("float32");
    let mut client = connect(&server);
    let stop = client.interrupter();
    let t = [0.0f64];
    let mut obs = Observation::new();
    obs.state("t", &t, &[1, 1]).unwrap();

    // No call running: the next infer returns Interrupted at once, sending
    // nothing, and the connection is unchanged.
    stop.interrupt().unwrap();
    let e = client.infer(&[0], &[0], &obs, None).unwrap_err();
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert!(matches!(
        client.infer(&[0], &[0], &obs, None).unwrap(),
        Infer::Action(_)
    ));

    let runner_stop = {
        let runner = Runner::new(&mut client, 1).unwrap();
        runner.interrupter()
    };
    assert!(runner_stop.is_runner());
    // Dropped handles answer Closed: the library looks handles up, it
    // never dereferences them.
    assert!(matches!(runner_stop.interrupt(), Err(Error::Closed(_))));
    drop(client);
    let e = stop.interrupt().unwrap_err();
    assert!(matches!(e, Error::Closed(_)), "{e}");
    assert_eq!(e.to_string(), e.status_name());
}

#[test]
fn interrupt_from_another_thread_ends_a_blocked_act() {
    let hostile = bin_dir().join("plugrl-hostile");
    if !hostile.is_file() {
        say(&format!(
            "SKIPPED interrupt_from_another_thread_ends_a_blocked_act: no {}",
            hostile.display()
        ));
        return;
    }
    // slow-action: metadata at once, then every action only after 60 s.
    let server = Server::start(
        &hostile,
        &[
            "-scenario",
            "slow-action",
            "-action-delay",
            "60s",
            "-addr",
            "127.0.0.1:0",
        ],
    )
    .expect("start plugrl-hostile");
    let mut client = Client::builder(&server.url)
        .receive_timeout(Duration::from_secs(120))
        .open()
        .unwrap();
    let mut runner = Runner::new(&mut client, 2).unwrap();
    let stop = runner.interrupter();
    let waker = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        stop.interrupt()
    });
    let x = [0.0f64; 2];
    let mut obs = Observation::new();
    obs.state("x", &x, &[2, 1]).unwrap();
    let mut actions: Vec<f64> = Vec::new();
    let started = Instant::now();
    let e = runner.act(&obs, &mut actions).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert!(took < Duration::from_secs(10), "interrupted after {took:?}");
    waker.join().unwrap().unwrap();
}

/// A reconnect inside an act to a server of another action width:
/// `plugrl-hostile --scenario width-change -d 2` declares action_dim 2,
/// closes with a resync at the second infer (sent inside the second act),
/// and declares action_dim 4 on the connection the runner reconnects to.
/// The act gives every env's action at the new width, and the run goes on.
#[test]
fn act_rides_a_reconnect_to_another_action_width() {
    let server = Server::hostile("width-change", &["-d", "2"]);
    let mut client = connect(&server);
    let n = 2;
    let mut runner = Runner::new(&mut client, n).unwrap();
    assert_eq!(runner.step_size(), Some(2));
    let x = [0.0f64; 2];
    let mut obs = Observation::new();
    obs.state("x", &x, &[2, 1]).unwrap();
    let (rewards, done) = ([0.0; 2], [false; 2]);
    let mut actions: Vec<f32> = Vec::new();
    for step in 0..5 {
        let flow = runner.act(&obs, &mut actions).unwrap();
        assert_eq!(flow, Flow::Continue, "act {step}");
        let width = if step == 0 { 2 } else { 4 };
        assert_eq!(actions.len(), n * width, "act {step}");
        assert_eq!(runner.step_size(), Some(width), "act {step}");
        let flow = runner.report(&obs, &rewards, &done, &done, None).unwrap();
        assert_eq!(flow, Flow::Continue, "report {step}");
    }
    assert_eq!(runner.client().action_dim(), Some(4));
    let st = runner.stats().unwrap();
    assert_eq!((st.reconnects, st.reconnects_resync), (1, 1), "{st:?}");
    assert_eq!(st.env_steps, 5 * n as u64, "{st:?}");
}

/// A StatsReader reads the counters from another thread while the control
/// loop runs (Client and Runner are not Sync), and gets Error::Closed, not
/// undefined behaviour, once they are dropped.
#[test]
fn stats_read_from_another_thread_while_the_loop_runs() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let server = probe_server("float64");
    let mut client = connect(&server);
    let client_reader = client.stats_reader();
    let n = 2;
    let mut probe = ProbeEnvs::new(n, 2);
    let mut runner = Runner::new(&mut client, n).unwrap();
    let reader = runner.stats_reader();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = thread::spawn({
        let done = done.clone();
        move || {
            let (mut reads, mut last) = (0u64, 0u64);
            while !done.load(Ordering::Acquire) {
                let st = reader.read().unwrap();
                assert!(st.env_steps >= last, "env_steps went back: {st:?}");
                last = st.env_steps;
                reads += 1;
            }
            reads
        }
    });
    let (rewards, truncated) = (vec![1.0; n], vec![false; n]);
    let mut terminated = vec![false; n];
    let mut actions: Vec<f64> = Vec::new();
    for _ in 0..200 {
        let flow = runner
            .act(&probe.observation().unwrap(), &mut actions)
            .unwrap();
        assert_eq!(flow, Flow::Continue);
        probe.step(&actions, &mut terminated);
        let next = probe.observation().unwrap();
        let flow = runner
            .report(&next, &rewards, &terminated, &truncated, None)
            .unwrap();
        assert_eq!(flow, Flow::Continue);
        probe.reset_ended(&terminated);
    }
    done.store(true, Ordering::Release);
    let reads = watcher.join().unwrap();
    assert!(reads > 0);
    assert_eq!(reader.read().unwrap().env_steps, 200 * n as u64);
    assert_eq!(
        client_reader.read().unwrap().exchanges,
        runner.stats().unwrap().exchanges
    );
    drop(runner);
    assert!(matches!(reader.read(), Err(Error::Closed(_))));
    assert!(client_reader.read().is_ok()); // the client lives on
    drop(client);
    assert!(matches!(client_reader.read(), Err(Error::Closed(_))));
}

#[test]
fn a_client_moves_to_another_thread() {
    let server = probe_server("float32");
    let client = connect(&server);
    let steps = thread::spawn(move || {
        let mut client = client; // Send: moved here
        let mut runner = Runner::new(&mut client, 1).unwrap();
        let t = [0.0f64];
        let mut obs = Observation::new();
        obs.state("t", &t, &[1, 1]).unwrap();
        let mut actions: Vec<f32> = Vec::new();
        assert_eq!(runner.act(&obs, &mut actions).unwrap(), Flow::Continue);
        actions.len()
    })
    .join()
    .unwrap();
    assert_eq!(steps, 2);
}

#[test]
fn a_stopped_run_is_a_flow_not_an_error() {
    // --stop-after 3: the server ends the run after three exchanges.
    let server = Server::serve(&[
        "--policy",
        "zero",
        "--horizon",
        "1",
        "--action-dim",
        "1",
        "--stop-after",
        "3",
    ]);
    let mut client = connect(&server);
    let mut runner = Runner::new(&mut client, 1).unwrap();
    let t = [0.0f64];
    let mut actions: Vec<f64> = Vec::new();
    let mut acts = 0;
    let stopped = loop {
        let mut obs = Observation::new();
        obs.state("t", &t, &[1, 1]).unwrap();
        if runner.act(&obs, &mut actions).unwrap().is_stopped() {
            break true;
        }
        acts += 1;
        if runner
            .report(&obs, &[0.0], &[false], &[false], None)
            .unwrap()
            .is_stopped()
        {
            break true;
        }
        if acts > 100 {
            break false;
        }
    };
    assert!(stopped, "the run did not stop");
    assert!((3..=4).contains(&acts), "{acts} acts");
}

/// A step ledger recorded from Rust (full level, into a directory: one
/// file per client) reads back, audits clean against the SPEC, and holds
/// the episodes the runner reported.
#[test]
fn ledger_records_a_run_that_audits_clean() {
    ledger_run(None);
}

/// The same, with the ledger's writer placed on the last CPU this process
/// may use; and a CPU list that does not parse is refused at open.
#[test]
fn ledger_writer_on_given_cpus() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list");
    let last = allowed
        .trim()
        .rsplit([',', '-'])
        .next()
        .unwrap()
        .to_string();
    ledger_run(Some(&last));
    let e = Client::builder("ws://127.0.0.1:1")
        .ledger_path(std::env::temp_dir().join("plugrl-rust-bad-cpus.ledger"))
        .ledger_cpus("2-x")
        .open()
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("ledger_cpus"), "{e}");
}

#[test]
fn dead_peer_timeout_below_two_seconds_is_refused() {
    for d in [Duration::ZERO, Duration::from_millis(1999)] {
        let e = Client::builder("ws://127.0.0.1:1")
            .dead_peer_timeout(Some(d))
            .open()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{d:?}: {e}");
        assert!(e.to_string().contains("dead_peer_timeout_ms"), "{e}");
    }
    // Off, or two seconds: accepted (then no server answers there).
    for d in [None, Some(Duration::from_secs(2))] {
        let e = Client::builder("ws://127.0.0.1:1")
            .dead_peer_timeout(d)
            .max_reconnects(0)
            .connect_timeout(Duration::from_millis(500))
            .open()
            .unwrap_err();
        assert!(!matches!(e, Error::InvalidArgument(_)), "{d:?}: {e}");
    }
}

#[test]
fn open_wait_ends_with_the_wait() {
    // Nothing listens at port 1: without a wait the open fails at once;
    // with 300 ms it tries until then and says so.
    let e = Client::builder("ws://127.0.0.1:1").open().unwrap_err();
    assert!(matches!(e, Error::ConnectFailed(_)), "{e}");
    let t0 = std::time::Instant::now();
    let e = Client::builder("ws://127.0.0.1:1")
        .open_wait(Some(Duration::from_millis(300)))
        .reconnect_backoff(Duration::from_millis(20))
        .open()
        .unwrap_err();
    assert!(matches!(e, Error::ConnectFailed(_)), "{e}");
    assert!(e.to_string().contains("open wait"), "{e}");
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "returned after {:?}",
        t0.elapsed()
    );
}

fn ledger_run(cpus: Option<&str>) {
    let dir = std::env::temp_dir().join(format!(
        "plugrl-rust-ledger-{}-{}",
        std::process::id(),
        cpus.is_some()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let server = probe_server("float64");
    let mut builder = Client::builder(&server.url)
        .receive_timeout(Duration::from_secs(30))
        .ledger_path(&dir)
        .ledger_level(plugrl::LedgerLevel::Full);
    if let Some(list) = cpus {
        builder = builder.ledger_cpus(list);
    }
    let mut client = builder.open().expect("connect to plugrl serve");
    let n = 3;
    let mut probe = ProbeEnvs::new(n, 2);
    let mut runner = Runner::new(&mut client, n).unwrap();
    let (rewards, truncated) = (vec![1.0; n], vec![false; n]);
    let mut terminated = vec![false; n];
    let mut actions: Vec<f64> = Vec::new();
    let mut episodes = 0;
    for _ in 0..21 {
        let flow = runner
            .act(&probe.observation().unwrap(), &mut actions)
            .unwrap();
        assert_eq!(flow, Flow::Continue);
        probe.step(&actions, &mut terminated);
        let flow = runner
            .report(
                &probe.observation().unwrap(),
                &rewards,
                &terminated,
                &truncated,
                None,
            )
            .unwrap();
        assert_eq!(flow, Flow::Continue);
        episodes += runner.episodes().len();
        probe.reset_ended(&terminated);
    }
    drop(runner);
    drop(client); // closes the ledger
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let plugrl = plugrl_examples::testing::require_bin("plugrl");
    let audit = std::process::Command::new(&plugrl)
        .args(["ledger", "audit"])
        .arg(&files[0])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&audit.stdout);
    assert!(audit.status.success(), "{report}");
    let summary = std::process::Command::new(&plugrl)
        .args(["ledger", "summary"])
        .arg(&files[0])
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&summary.stdout);
    assert!(
        summary.contains("full level") && summary.contains("closed cleanly"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("episodes: {episodes}\n")),
        "{summary}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    say(&format!(
        "a Rust client's ledger: {} episodes, audits clean",
        episodes
    ));
}

/// The C getter `f` for `key` through the raw handle, with its size
/// protocol: `Some(bytes)` when present, `None` when absent, `Err` with the
/// status otherwise.
fn raw_copy(
    client: &Client,
    f: unsafe extern "C" fn(
        *mut plugrl::sys::plugrl_client,
        *const std::os::raw::c_char,
        *mut std::os::raw::c_char,
        usize,
        *mut usize,
        *mut std::os::raw::c_int,
    ) -> plugrl::sys::plugrl_status,
    key: Option<&std::ffi::CStr>,
) -> Result<Option<Vec<u8>>, plugrl::sys::plugrl_status> {
    const PLUGRL_OK: plugrl::sys::plugrl_status = plugrl::sys::plugrl_status::PLUGRL_OK;
    let key = key.map_or(std::ptr::null(), |k| k.as_ptr());
    let (mut len, mut present) = (0usize, 0);
    // SAFETY: the handle is live; key is NUL-terminated or NULL; NULL with
    // size 0 asks for the length.
    let s = unsafe {
        f(
            client.as_raw(),
            key,
            std::ptr::null_mut(),
            0,
            &mut len,
            &mut present,
        )
    };
    if s != PLUGRL_OK {
        return Err(s);
    }
    if present == 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; len + 1];
    // SAFETY: buf is writable for its length.
    let s = unsafe {
        f(
            client.as_raw(),
            key,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut len,
            &mut present,
        )
    };
    if s != PLUGRL_OK {
        return Err(s);
    }
    buf.truncate(len);
    Ok(Some(buf))
}

/// Metadata drawn at random for each connection by `plugrl-hostile
/// --scenario garble-metadata` (keys absent, in other encodings or of other
/// types; strings empty, 64 KiB, not UTF-8 or holding a NUL; extra keys of
/// every msgpack type and nests past any JSON reader's depth; about one map
/// in five no metadata message at all). Every open succeeds or is a
/// protocol error, and on each client opened every getter of the crate, on
/// every key the generator writes, gives what the C call beneath it gives:
/// integers as they are, strings as their bytes (lossily where they are not
/// UTF-8), JSON as given, or the C call's status as the error.
#[test]
fn metadata_getters_agree_with_the_c_api_on_garbled_metadata() {
    use plugrl::sys;
    use std::ffi::CString;

    let server = Server::hostile("garble-metadata", &["--h", "2", "--d", "3", "--seed", "7"]);
    let keys = [
        "protocol_version",
        "action_horizon",
        "action_dim",
        "server",
        "algorithm",
        "policy",
        "features",
        "x0",
        "x1",
        "x2",
        "x3",
        "x4",
        "x5",
    ];
    let lossy = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    let (mut opened, mut refused, mut strings, mut not_utf8, mut no_json) = (0, 0, 0, 0, 0);
    for i in 0..150 {
        let client = match Client::builder(&server.url)
            .connect_timeout(Duration::from_secs(10))
            .metadata_timeout(Duration::from_secs(10))
            .open()
        {
            Ok(c) => c,
            Err(Error::ProtocolError(m)) => {
                refused += 1;
                assert!(!m.is_empty(), "open {i}: a refusal with no message");
                continue;
            }
            Err(e) => panic!("open {i}: {e}"),
        };
        opened += 1;
        for key in keys {
            let ckey = CString::new(key).unwrap();
            let (mut v, mut present) = (0i64, 0);
            // SAFETY: live handle, NUL-terminated key, writable outputs.
            let s = unsafe {
                sys::plugrl_metadata_int(client.as_raw(), ckey.as_ptr(), &mut v, &mut present)
            };
            assert_eq!(
                s,
                sys::plugrl_status::PLUGRL_OK,
                "open {i}: plugrl_metadata_int({key})"
            );
            assert_eq!(
                client.metadata_int(key),
                (present != 0).then_some(v),
                "open {i}: {key}"
            );

            let raw = raw_copy(&client, sys::plugrl_metadata_string, Some(&ckey))
                .unwrap_or_else(|s| panic!("open {i}: plugrl_metadata_string({key}): {s:?}"));
            if let Some(b) = &raw {
                strings += 1;
                not_utf8 += usize::from(std::str::from_utf8(b).is_err());
            }
            assert_eq!(
                client.metadata_string(key),
                raw.map(lossy),
                "open {i}: {key}"
            );

            let raw = raw_copy(&client, sys::plugrl_metadata_json, Some(&ckey));
            match (client.metadata_json(key), raw) {
                (Ok(got), Ok(want)) => assert_eq!(got, want.map(lossy), "open {i}: {key} as JSON"),
                (Err(e), Err(s)) => {
                    no_json += 1;
                    assert_eq!(e.status_code(), s.0, "open {i}: {key} as JSON: {e}");
                }
                (got, want) => {
                    panic!("open {i}: {key} as JSON: the crate gave {got:?}, the C API {want:?}")
                }
            }
        }
        let whole = raw_copy(&client, sys::plugrl_metadata_json, None);
        match (client.metadata_json_all(), whole) {
            (Ok(got), Ok(want)) => {
                assert_eq!(Some(got), want.map(lossy), "open {i}: the whole map")
            }
            (Err(e), Err(s)) => assert_eq!(e.status_code(), s.0, "open {i}: the whole map: {e}"),
            (got, want) => {
                panic!("open {i}: the whole map: the crate gave {got:?}, the C API {want:?}")
            }
        }
        for feature in ["reuse-feedback-obs", "x"] {
            let cf = CString::new(feature).unwrap();
            let mut present = 0;
            // SAFETY: live handle, NUL-terminated name, writable output.
            let s = unsafe {
                sys::plugrl_metadata_has_feature(client.as_raw(), cf.as_ptr(), &mut present)
            };
            assert_eq!(s, sys::plugrl_status::PLUGRL_OK);
            assert_eq!(
                client.has_feature(feature),
                present != 0,
                "open {i}: {feature}"
            );
        }
        assert_eq!(client.action_dim(), client.metadata_int("action_dim"));
        assert_eq!(
            client.action_horizon(),
            client.metadata_int("action_horizon")
        );
    }
    assert!(
        opened > 0 && refused > 0 && strings > 0 && not_utf8 > 0,
        "{opened} opened, {refused} refused, {strings} strings ({not_utf8} not UTF-8): want some of each"
    );
    say(&format!(
        "garbled metadata: {opened} opened, {refused} refused; {strings} strings ({not_utf8} not UTF-8), \
         {no_json} values with no JSON, each getter as the C API"
    ));
}
