//! The operator matrix: every operator command (`approve`, `reject`,
//! `rollback`, `restore-best`, `unquarantine`, `escalations resolve`) against
//! every version state (served, pending, stale pending, superseded, rejected,
//! quarantined, pinned, unknown), without and with `--preempt` while a run is
//! going. Each cell either does what docs/serving.md says or refuses with exit 2
//! before anything is journaled and before any run is stopped; after every
//! cell `journal verify` passes and the next `evolve --max-evals 2` exits with
//! a documented code. The observed matrix is docs/operator.md's table
//! (`EMEND_WRITE_MATRIX=1` rewrites it from this test).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use emend_core::events::{EngineProjector, Event};
use emend_journal::EventLog;
use serde_json::Value;

use crate::support;
use crate::support::{command, edit_config, emend, events, json, ok};

const KEY: &str = "retrieve.top_k::increase";

/// The events an operator's command writes (a run writes evaluations, rounds and interruptions).
fn operator_events(dir: &Path) -> usize {
    events(dir)
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::ServedChanged { .. }
                    | Event::Quarantined { .. }
                    | Event::Unquarantined { .. }
                    | Event::PendingReviewed { .. }
                    | Event::EscalationReviewed { .. }
                    | Event::BestChanged { .. }
            )
        })
        .count()
}

fn interruptions(dir: &Path) -> Vec<String> {
    events(dir)
        .into_iter()
        .filter_map(|e| match e {
            Event::Interrupted { cause, .. } => Some(cause),
            _ => None,
        })
        .collect()
}

/// The version a run made pending, running up to 40 rounds (a run stops at its first pending version).
fn run_to_pending(dir: &Path) -> u64 {
    let run = json(dir, &["evolve", "--rounds", "40", "--json", "--quiet"]);
    run["waiting"].as_u64().unwrap_or_else(|| panic!("no pending version: {run}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    Served,
    Pending,
    StalePending,
    Superseded,
    Rejected,
    Quarantined,
    Pinned,
    Unknown,
}

const STATES: [State; 8] = [
    State::Served,
    State::Pending,
    State::StalePending,
    State::Superseded,
    State::Rejected,
    State::Quarantined,
    State::Pinned,
    State::Unknown,
];

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Served => "served",
            State::Pending => "pending",
            State::StalePending => "stale pending",
            State::Superseded => "superseded",
            State::Rejected => "rejected",
            State::Quarantined => "quarantined",
            State::Pinned => "pinned",
            State::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Approve,
    Reject,
    Rollback,
    RestoreBest,
    Unquarantine,
    Resolve,
}

const OPS: [Op; 6] = [Op::Approve, Op::Reject, Op::Rollback, Op::RestoreBest, Op::Unquarantine, Op::Resolve];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Approve => "approve vN",
            Op::Reject => "reject vN",
            Op::Rollback => "rollback --to vN",
            Op::RestoreBest => "restore-best",
            Op::Unquarantine => "unquarantine vN",
            Op::Resolve => "escalations resolve KEY",
        }
    }

    /// Whether the command takes `--preempt` (and `--wait`).
    fn takes_over(self) -> bool {
        matches!(self, Op::Approve | Op::Rollback | Op::RestoreBest)
    }

    fn args(self, v: u64, preempt: bool) -> Vec<String> {
        let v = format!("v{v}");
        let mut args: Vec<String> = match self {
            Op::Approve => vec!["approve".into(), v],
            Op::Reject => vec!["reject".into(), v],
            Op::Rollback => vec!["rollback".into(), "--to".into(), v],
            Op::RestoreBest => vec!["restore-best".into()],
            Op::Unquarantine => vec!["unquarantine".into(), v],
            Op::Resolve => vec!["escalations".into(), "resolve".into(), KEY.into()],
        };
        args.extend(["--reason".to_string(), "matrix".to_string()]);
        if preempt {
            args.push("--preempt".into());
        }
        args
    }

    /// What docs/serving.md says the command does to a version in `state`: exit 0 or 2.
    fn expected(self, state: State) -> i32 {
        let done = match self {
            Op::Approve => state == State::Pending,
            Op::Reject => matches!(state, State::Pending | State::StalePending),
            Op::Rollback => matches!(state, State::Served | State::Pinned),
            // restore-best and escalations resolve name no version: they act whatever the states.
            Op::RestoreBest | Op::Resolve => true,
            Op::Unquarantine => state == State::Quarantined,
        };
        if done { 0 } else { 2 }
    }
}

/// Two projects whose versions hold every state, on the built-in pipeline run as
/// a command (`EMEND_PAUSE` seconds of sleep per shard slow a run down), with an
/// open escalation. `a`: served (unpinned), pending, superseded, rejected,
/// quarantined. `b` (after a rollback to v1): stale pending, pinned.
struct Fixtures {
    a: PathBuf,
    b: PathBuf,
    versions: BTreeMap<State, (bool, u64)>,
}

fn fixtures(tmp: &Path) -> Fixtures {
    let emend = support::bin();
    let script =
        format!("sleep ${{EMEND_PAUSE:-0}}; exec \"{}\" worker {{strategy}} {{tasks}} {{out}}", emend.display());
    ok(tmp, &["init", "p", "--tasks", "builtin", "--harness-command", "sh", "-c", &script]);
    let dir = tmp.join("p");
    edit_config(&dir, "  approval: auto", "  approval: manual");
    edit_config(&dir, "  max_pending: null", "  max_pending: 1");
    edit_config(&dir, "  method: null", "  method: rules");
    // The rule evolver's bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    edit_config(&dir, "confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    let rejected = run_to_pending(&dir);
    ok(&dir, &["reject", &format!("v{rejected}"), "--reason", "fixture"]);
    let superseded = run_to_pending(&dir);
    // A hand edit journaled as a version and served: the pending version is stale, v1 quarantined.
    let served = dir.join("strategies/served.yaml");
    let text = std::fs::read_to_string(&served).unwrap();
    // A worse strategy (one retrieved item), which the search improves on at once.
    let edited_text: Vec<String> = text
        .lines()
        .map(|l| match l.trim_start().strip_prefix("top_k:") {
            Some(_) => format!("{}top_k: 1", &l[..l.len() - l.trim_start().len()]),
            None => l.to_string(),
        })
        .collect();
    std::fs::write(&served, edited_text.join("\n") + "\n").unwrap();
    ok(&dir, &["rollback", "--to", "v1", "--force", "--reason", "journal the edit"]);
    let edited = events(&dir)
        .into_iter()
        .rev()
        .find_map(|e| match e {
            Event::StrategyVersioned { version, origin, .. } if origin == "hand_edit" => Some(version),
            _ => None,
        })
        .expect("the hand edit is a version");
    ok(&dir, &["rollback", "--to", &format!("v{edited}"), "--reason", "serve the edit"]);
    // Its pending version supersedes the stale one (serve.max_pending: 1).
    let pending = run_to_pending(&dir);
    // restore-best unpins the served version (the best-ever once v1 is quarantined).
    ok(&dir, &["restore-best", "--reason", "fixture"]);
    assert_eq!(json(&dir, &["status", "--json"])["served_version"], edited);
    {
        let mut log = emend_journal::open_writer(dir.join(".emend/journal"), EngineProjector).unwrap();
        let raised = Event::Escalated { class: KEY.into(), round: 1, reasons: vec!["out of scope".into()] };
        log.append(vec![raised.to_new()]).unwrap();
    }
    let a = tmp.join("a");
    support::copy_dir(&dir, &a);
    ok(&dir, &["unquarantine", "v1", "--reason", "fixture"]);
    ok(&dir, &["rollback", "--to", "v1", "--reason", "fixture"]);
    let b = tmp.join("b");
    support::copy_dir(&dir, &b);
    let versions = BTreeMap::from([
        (State::Served, (true, edited)),
        (State::Pending, (true, pending)),
        (State::StalePending, (false, pending)),
        (State::Superseded, (true, superseded)),
        (State::Rejected, (true, rejected)),
        (State::Quarantined, (true, 1)),
        (State::Pinned, (false, 1)),
        (State::Unknown, (true, 99)),
    ]);
    Fixtures { a, b, versions }
}

/// A running `emend evolve` in `dir` (approval auto, so that no waiting version stops it at once),
/// slowed down to be mid-run when the operator's command comes.
fn start_run(dir: &Path) -> Child {
    edit_config(dir, "  approval: manual", "  approval: auto");
    let child = command(dir, &["evolve", "--rounds", "50", "--quiet"])
        .env("EMEND_PAUSE", "0.5")
        .stdout(std::fs::File::create(dir.join("evolve.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("evolve.err")).unwrap())
        .spawn()
        .expect("emend evolve starts");
    let start = Instant::now();
    let pid = child.id().to_string();
    while !std::fs::read_to_string(dir.join(".emend/journal/LOCK")).is_ok_and(|t| t.contains(&pid)) {
        assert!(start.elapsed() < Duration::from_secs(60), "the run never held the journal");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    child
}

fn exit_of(child: &mut Child, timeout: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            return status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        }
        assert!(start.elapsed() < timeout, "the run did not exit within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What docs/serving.md says a command did, checked in the journal's state.
fn check_done(dir: &Path, op: Op, v: u64) {
    let status = json(dir, &["status", "--json"]);
    match op {
        Op::Approve => assert_eq!(status["served_version"], v, "{status}"),
        Op::Rollback => assert_eq!(status["served_version"], v, "{status}"),
        Op::RestoreBest => assert_eq!(status["served_version"], status["best_version"], "{status}"),
        Op::Reject => {
            let all = json(dir, &["pending", "--all", "--json"]);
            let entry = all["pending"].as_array().unwrap().iter().find(|p| p["version"] == v).cloned();
            assert_eq!(entry.map(|p| p["state"].clone()), Some(Value::from("rejected")), "{all}");
        }
        Op::Unquarantine => {
            let unquarantined =
                events(dir).iter().any(|e| matches!(e, Event::Unquarantined { version, .. } if *version == v));
            assert!(unquarantined, "v{v} was not unquarantined");
        }
        Op::Resolve => {
            let list = json(dir, &["escalations", "--json"]);
            let ours = list["escalations"].as_array().unwrap().iter().find(|e| e["class"] == KEY).cloned();
            assert_eq!(ours.map(|e| e["status"].clone()), Some(Value::from("resolved")), "{list}");
        }
    }
}

/// One cell: the command on a fresh copy of the fixture holding `state`; its exit code.
fn cell(tmp: &Path, fx: &Fixtures, op: Op, state: State, preempt: bool) -> i32 {
    let (in_a, v) = fx.versions[&state];
    let dir = tmp.join(format!("{}-{}-{preempt}", op.name(), state.name()).replace([' ', '-'], "_"));
    support::copy_dir(if in_a { &fx.a } else { &fx.b }, &dir);
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    let mut run = preempt.then(|| start_run(&dir));
    let before = operator_events(&dir);
    let args = op.args(v, preempt);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = emend(&dir, &args);
    let what = format!("emend {args:?} on {} v{v}", state.name());
    if code == 2 {
        assert_eq!(operator_events(&dir), before, "{what}: refused, but journaled: {err}");
        assert!(!err.contains("asked pid"), "{what}: refused after asking the run to stop: {err}");
        assert!(!dir.join(".emend/journal/STOP").exists(), "{what}: left a stop request");
        if let Some(run) = run.as_mut() {
            assert!(run.try_wait().unwrap().is_none(), "{what}: refused, but the run stopped");
            // SAFETY: a signal to the child this test started.
            unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
            assert_eq!(exit_of(run, Duration::from_secs(30)), 143, "{what}");
            assert_eq!(interruptions(&dir).last().map(String::as_str), Some("SIGTERM"), "{what}");
        }
    } else {
        assert_eq!(code, 0, "{what}: {out}{err}");
        if let Some(run) = run.as_mut() {
            assert_eq!(exit_of(run, Duration::from_secs(30)), 4, "{what}: the run was not preempted");
        }
        check_done(&dir, op, v);
    }
    std::fs::write(dir.join("emend.yaml"), config).unwrap();
    let (vcode, vout, verr) = emend(&dir, &["journal", "verify"]);
    assert_eq!(vcode, 0, "{what}: journal verify after it:\n{vout}{verr}");
    let (ecode, eout, eerr) = emend(&dir, &["evolve", "--max-evals", "2", "--quiet"]);
    assert!(ecode == 0 || ecode == 5, "{what}: the next evolve exited {ecode}:\n{eout}{eerr}");
    let _ = std::fs::remove_dir_all(&dir);
    code
}

/// A cell as docs/operator.md prints it.
fn mark(code: Option<i32>) -> &'static str {
    match code {
        Some(0) => "does it",
        Some(2) => "refused (2)",
        Some(_) => "?",
        None => "no --preempt",
    }
}

#[test]
fn every_operator_command_on_every_version_state_acts_as_documented_or_refuses_first() {
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixtures(tmp.path());
    let mut table = String::from("| command | ");
    table.push_str(&STATES.iter().map(|s| s.name()).collect::<Vec<_>>().join(" | "));
    table.push_str(" |\n|---|");
    table.push_str(&"---|".repeat(STATES.len()));
    table.push('\n');
    for op in OPS {
        for preempt in [false, true] {
            let mut row = format!("| `{}`{} |", op.name(), if preempt { " `--preempt`, a run going" } else { "" });
            for state in STATES {
                let code = (!preempt || op.takes_over()).then(|| cell(tmp.path(), &fx, op, state, preempt));
                if let Some(code) = code {
                    assert_eq!(code, op.expected(state), "{} on {} (preempt: {preempt})", op.name(), state.name());
                }
                row.push_str(&format!(" {} |", mark(code)));
            }
            table.push_str(&row);
            table.push('\n');
        }
    }
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operator.md");
    if std::env::var_os("EMEND_WRITE_MATRIX").is_some() {
        let doc = std::fs::read_to_string(&doc_path).unwrap_or_default();
        let (head, tail) = match (doc.find("<!-- matrix -->"), doc.find("<!-- /matrix -->")) {
            (Some(s), Some(e)) => (doc[..s].to_string(), doc[e..].to_string()),
            _ => (doc.clone(), "<!-- /matrix -->\n".to_string()),
        };
        std::fs::write(&doc_path, format!("{head}<!-- matrix -->\n{table}{tail}")).unwrap();
    }
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    assert!(doc.contains(&table), "docs/operator.md does not print the observed matrix:\n{table}");
}
