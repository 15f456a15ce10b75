//! The operator's flow where unattended runs and people meet: an approval of
//! a version tested against another served version is refused unless retested
//! (served only when the retest passes) or forced; a rollback preempts a
//! running evolve (or waits for it); SIGTERM, SIGINT and a closed output stop
//! a run cleanly (no hook left running, the lock released, the journal whole,
//! the next run going on); and `who` is the OS account, `by` what the caller
//! declared.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::support::{command, edit_config, emend, events, json, ok, served};
use emend_core::events::{EngineProjector, Event};
use emend_journal::EventLog;
use serde_json::Value;

fn verified(dir: &Path) {
    let out = ok(dir, &["journal", "verify"]);
    assert!(out.contains("projections: ok"), "{out}");
}

/// A project on the embedded dataset whose every evaluation takes at least
/// `pause` (a shard command that sleeps, then runs the built-in pipeline as
/// `emend worker`), so a run is reliably mid-search when it is stopped.
fn slow_project(tmp: &Path, pause: &str) -> PathBuf {
    let emend = crate::support::bin();
    let script = format!("sleep {pause}; exec \"{}\" worker {{strategy}} {{tasks}} {{out}}", emend.display());
    ok(tmp, &["init", "p", "--tasks", "builtin", "--harness-command", "sh", "-c", &script]);
    let dir = tmp.join("p");
    // The rule evolver: a round is a few evaluations (the global search makes hundreds).
    edit_config(&dir, "  method: null", "  method: rules");
    // The rule evolver's bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    edit_config(&dir, "confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    dir
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `emend evolve`, its output in files of `dir`.
fn start_evolve(dir: &Path, args: &[&str]) -> Child {
    let mut all = vec!["evolve"];
    all.extend_from_slice(args);
    command(dir, &all)
        .stdout(std::fs::File::create(dir.join("evolve.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("evolve.err")).unwrap())
        .spawn()
        .expect("emend evolve starts")
}

/// Waits for `child` to exit, for up to `timeout`; its exit code (or 128 + signal).
fn exit_of(child: &mut Child, timeout: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            return status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("evolve did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a round has started evaluating: the served strategy's evaluation is journaled.
fn searching(dir: &Path) -> bool {
    emend_journal::open_view(dir.join(".emend/journal"), EngineProjector)
        .ok()
        .and_then(|log| log.read_from(0).ok())
        .is_some_and(|records| records.iter().any(|r| r.kind == "evaluated"))
}

fn interrupted(dir: &Path) -> Vec<(u64, String)> {
    events(dir)
        .into_iter()
        .filter_map(|e| match e {
            Event::Interrupted { round, cause, .. } => Some((round, cause)),
            _ => None,
        })
        .collect()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn rollback_preempt_stops_a_running_evolve_and_wait_waits_for_the_run_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = slow_project(tmp.path(), "0.3");
    let mut run = start_evolve(&dir, &["--rounds", "50", "--quiet"]);
    wait_until("the run to search", Duration::from_secs(120), || searching(&dir));
    std::thread::sleep(Duration::from_millis(500));
    // Without --preempt or --wait: exit 3, naming the running pid.
    let (code, _, err) = emend(&dir, &["rollback", "--to", "v1"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&run.id().to_string()), "{err}");
    let asked = Instant::now();
    let out = json(&dir, &["rollback", "--to", "v1", "--reason", "3 a.m.", "--preempt", "--json"]);
    let took = asked.elapsed();
    assert_eq!(out["record"]["to"], 1, "{out}");
    assert!(took < Duration::from_secs(5), "the rollback took {took:?}");
    assert_eq!(
        exit_of(&mut run, Duration::from_secs(10)),
        4,
        "{}",
        std::fs::read_to_string(dir.join("evolve.err")).unwrap()
    );
    let stops = interrupted(&dir);
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!(stops[0].1, "preempted");
    assert!(!dir.join(".emend/journal/STOP").exists(), "the stop request is cleared");
    verified(&dir);
    let log = ok(&dir, &["log"]);
    assert!(log.contains(&format!("round {} interrupted (preempted by rollback --to v1", stops[0].0)), "{log}");
    // The next run goes on, and uses the interrupted round's number again.
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert!(json(&dir, &["status", "--json"]).get("interrupted").is_none(), "a finished round closes it");

    // --wait waits for a running evolve to finish instead of stopping it.
    let mut run = start_evolve(&dir, &["--rounds", "1", "--quiet"]);
    wait_until("the run to hold the journal", Duration::from_secs(60), || {
        std::fs::read_to_string(dir.join(".emend/journal/LOCK")).is_ok_and(|t| t.contains(&run.id().to_string()))
    });
    ok(&dir, &["rollback", "--to", "v1", "--reason", "after the run", "--wait=5m"]);
    assert_eq!(exit_of(&mut run, Duration::from_secs(60)), 0);
    assert_eq!(interrupted(&dir).len(), 1, "--wait interrupts nothing");
    verified(&dir);
}

fn hook_script(dir: &Path, body: &str) {
    let path = dir.join("hook.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn sigterm_and_sigint_stop_a_run_cleanly_and_kill_a_running_hook() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = slow_project(tmp.path(), "0.2");
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let mut run = start_evolve(&dir, &["--rounds", "50", "--quiet"]);
        let before = interrupted(&dir).len();
        std::thread::sleep(Duration::from_millis(1500));
        wait_until("the run to search", Duration::from_secs(120), || searching(&dir));
        // SAFETY: sending a signal to the child this test started.
        unsafe { libc::kill(run.id() as i32, signal) };
        assert_eq!(exit_of(&mut run, Duration::from_secs(10)), code);
        let stops = interrupted(&dir);
        assert_eq!(stops.len(), before + 1, "{stops:?}");
        assert_eq!(stops.last().unwrap().1, if signal == libc::SIGTERM { "SIGTERM" } else { "SIGINT" });
        let lock = std::fs::read_to_string(dir.join(".emend/journal/LOCK")).unwrap();
        assert!(lock.trim().is_empty(), "the lock is released cleanly: {lock}");
        verified(&dir);
    }
    // With a hook running a long sleep when the signal comes: the hook's process goes too.
    edit_config(&dir, "  on_served: null", "  on_served: [\"./hook.sh\"]");
    hook_script(&dir, "echo $$ > hook.pid; exec sleep 60");
    let mut run = start_evolve(&dir, &["--rounds", "50", "--quiet"]);
    wait_until("the hook to run", Duration::from_secs(300), || dir.join("hook.pid").exists());
    std::thread::sleep(Duration::from_millis(200));
    let hook: i32 = std::fs::read_to_string(dir.join("hook.pid")).unwrap().trim().parse().unwrap();
    assert!(alive(hook));
    // SAFETY: as above.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    assert_eq!(exit_of(&mut run, Duration::from_secs(10)), 143);
    wait_until("the hook's process to be gone", Duration::from_secs(2), || !alive(hook));
    let failed =
        events(&dir).into_iter().any(|e| matches!(e, Event::HookFailed { error, .. } if error.contains("signal")));
    assert!(failed, "the killed hook is journaled as failed");
    verified(&dir);
    // The next run continues from the journal.
    edit_config(&dir, "  on_served: [\"./hook.sh\"]", "  on_served: null");
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    verified(&dir);
}

#[test]
fn a_second_sigint_exits_at_once_and_the_journal_still_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = slow_project(tmp.path(), "2");
    let mut run = start_evolve(&dir, &["--rounds", "50", "--quiet"]);
    wait_until("the run to search", Duration::from_secs(120), || searching(&dir));
    // SAFETY: signals to the child this test started.
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(50));
    let second = Instant::now();
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    assert_eq!(exit_of(&mut run, Duration::from_secs(10)), 130);
    assert!(second.elapsed() < Duration::from_secs(1), "the second Ctrl-C exits at once");
    verified(&dir);
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
}

#[test]
fn a_closed_output_ends_the_output_not_the_journal() {
    let tmp = tempfile::tempdir().unwrap();
    ok(tmp.path(), &["init", "p", "--tasks", "builtin"]);
    let dir = tmp.path().join("p");
    // `emend evolve | head -1`, and the same with the progress lines in the pipe.
    let emend = crate::support::bin();
    for redirect in ["", "2>&1"] {
        let line = format!("\"{}\" evolve --rounds 2 {redirect} | head -1; exit ${{PIPESTATUS[0]}}", emend.display());
        let out = Command::new("bash").current_dir(&dir).args(["-c", &line]).output().unwrap();
        let code = out.status.code().unwrap();
        assert!(code == 0 || code == 141, "exit {code}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
        if code == 141 {
            assert_eq!(interrupted(&dir).last().map(|i| i.1.as_str()), Some("output closed"));
        }
        verified(&dir);
    }
}

#[test]
fn who_is_the_os_account_and_by_is_what_the_caller_declared() {
    let tmp = tempfile::tempdir().unwrap();
    ok(tmp.path(), &["init", "p", "--tasks", "builtin"]);
    let dir = tmp.path().join("p");
    let me = Command::new("id").arg("-un").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    // A rollback to the served version pins it: an event that names a person.
    let out = command(&dir, &["rollback", "--to", "v1", "--reason", "pin", "--by", "alice"])
        .env("USER", "mallory")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let log = emend_journal::open_view(dir.join(".emend/journal"), EngineProjector).unwrap();
    let records = log.read_from(0).unwrap();
    let moved = records.iter().rev().find(|r| r.kind == "served_changed").unwrap();
    let who = moved.payload["who"].as_str().unwrap();
    assert!(!who.starts_with("mallory@"), "$USER is not read: {who}");
    if let Some(me) = me.filter(|m| !m.is_empty()) {
        assert!(who.starts_with(&format!("{me}@")), "{who} is not the OS account {me}");
    }
    // SAFETY: getuid has no preconditions.
    assert_eq!(moved.payload["uid"].as_u64(), Some(u64::from(unsafe { libc::getuid() })));
    assert_eq!(moved.payload["by"], "alice");
    // EMEND_ACTOR declares it as well; the log shows both.
    let out =
        command(&dir, &["rollback", "--to", "v1", "--reason", "pin again"]).env("EMEND_ACTOR", "bob").output().unwrap();
    assert!(out.status.success());
    let log = ok(&dir, &["log"]);
    assert!(log.contains("(declared: alice)") && log.contains("(declared: bob)"), "{log}");
}

/// The events of kind `candidate_judged` whose hypothesis is a retest: (id, accepted).
fn retests(dir: &Path) -> Vec<(String, bool)> {
    events(dir)
        .into_iter()
        .filter_map(|e| match e {
            Event::CandidateJudged(c) if c.hypothesis == emend_loop::evolve::RETEST => {
                Some((c.id.clone(), c.outcome == emend_core::candidate::Resolution::Accepted))
            }
            _ => None,
        })
        .collect()
}

/// Replaces the first line of the served file that starts with `key` (indented) by `key value`.
fn hand_edit(dir: &Path, key: &str, value: &str) {
    let path = dir.join("strategies/served.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut done = false;
    let edited: Vec<String> = text
        .lines()
        .map(|l| match l.trim_start().strip_prefix(key) {
            Some(_) if !done => {
                done = true;
                format!("{}{key} {value}", &l[..l.len() - l.trim_start().len()])
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(done, "no {key} in the served file");
    std::fs::write(&path, edited.join("\n") + "\n").unwrap();
}

#[test]
fn an_approval_is_of_a_tested_pair_a_stale_one_needs_a_passed_retest_or_force() {
    let tmp = tempfile::tempdir().unwrap();
    ok(tmp.path(), &["init", "p", "--tasks", "builtin"]);
    let dir = tmp.path().join("p");
    // Several accepted versions (as in the serving tests), then back to v1.
    edit_config(
        &dir,
        "random choice (probe samples, bootstrap).\n  seed: 0\n",
        "random choice (probe samples, bootstrap).\n  seed: 1\n",
    );
    edit_config(&dir, "  method: null\n", "  method: steps\n");
    edit_config(&dir, "  cost_bound: null\n", "  cost_bound: 1.5\n");
    // The bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    edit_config(&dir, "confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    ok(&dir, &["evolve", "--rounds", "10", "--quiet"]);
    let top = served(&dir);
    assert!(top > 2, "the run must serve something after v2");
    ok(&dir, &["rollback", "--to", "v1", "--reason", "back"]);
    edit_config(&dir, "  approval: auto", "  approval: manual");
    // The rollback froze every field v{top} changed; lifting its quarantine lifts the freeze.
    ok(&dir, &["unquarantine", &format!("v{top}"), "--reason", "serve it again"]);
    ok(&dir, &["evolve", "--rounds", "3", "--quiet"]);
    let pending = json(&dir, &["pending", "--json"]);
    let Some(p) = pending["pending"][0]["version"].as_u64() else { panic!("no pending version: {pending}") };
    assert_eq!(pending["pending"][0]["tested_against"], 1, "{pending}");

    // The served version moves on: the pending version's test no longer speaks for it.
    ok(&dir, &["rollback", "--to", &format!("v{top}"), "--reason", "the better one"]);
    let (code, _, err) = emend(&dir, &["approve", &format!("v{p}")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("tested against v1, but v{top} is served now")), "{err}");
    assert_eq!(json(&dir, &["pending", "--json"])["pending"][0]["stale"], true);
    let (code, _, err) = emend(&dir, &["approve", &format!("v{p}"), "--force"]);
    assert_eq!(code, 2, "--force needs a reason: {err}");
    // Retested against the better served version, it fails: not served, the test journaled.
    let (code, _, err) = emend(&dir, &["approve", &format!("v{p}"), "--retest"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("was not served"), "{err}");
    assert_eq!(served(&dir), top);
    assert_eq!(retests(&dir).iter().map(|r| r.1).collect::<Vec<_>>(), [false]);

    // A worse served version (a hand edit, journaled and served): the retest passes and serves it
    // (without the per-step cost bound, which a version with far smaller contexts would fail).
    edit_config(&dir, "  cost_bound: 1.5\n", "  cost_bound: null\n");
    hand_edit(&dir, "top_k:", "1");
    ok(&dir, &["rollback", "--to", &format!("v{top}"), "--force", "--reason", "journal the edit"]);
    let edited = json(&dir, &["log", "--json"])["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|e| (e["kind"] == "hand_edit").then(|| e["version"].as_u64().unwrap()))
        .expect("the hand edit is a version");
    ok(&dir, &["rollback", "--to", &format!("v{edited}"), "--reason", "a worse one"]);
    let out = json(&dir, &["approve", &format!("v{p}"), "--retest", "--json"]);
    assert_eq!(served(&dir), p, "{out}");
    let tests = retests(&dir);
    assert_eq!(tests.iter().map(|r| r.1).collect::<Vec<_>>(), [false, true]);
    assert_eq!(out["retest"], tests[1].0.as_str());
    let log = ok(&dir, &["log"]);
    assert!(log.contains(&format!("approved v{p} (after a passed retest, {})", tests[1].0)), "{log}");
    verified(&dir);

    // --force serves a stale version untested, and says so wherever it is read. (The rollback from
    // v{top} froze the fields it changed; lifting its quarantine lets the search move them again.)
    ok(&dir, &["unquarantine", &format!("v{top}"), "--reason", "search its fields again"]);
    // A run stops at its first pending version: enough rounds to find one.
    let run = json(&dir, &["evolve", "--rounds", "12", "--json", "--quiet"]);
    let pending = json(&dir, &["pending", "--json"]);
    let Some(q) = pending["pending"][0]["version"].as_u64() else { panic!("no pending version: {pending} {run}") };
    ok(&dir, &["unquarantine", "v1", "--reason", "serve it again"]);
    ok(&dir, &["rollback", "--to", "v1", "--reason", "again"]);
    ok(&dir, &["approve", &format!("v{q}"), "--force", "--reason", "the operator takes it"]);
    assert_eq!(served(&dir), q);
    assert!(ok(&dir, &["log"]).contains(&format!("approved v{q} (forced over v1, which it was never tested against)")));
    assert!(
        ok(&dir, &["show", &format!("v{q}")]).contains("serving: approved (forced over v1, never tested against it)")
    );
    verified(&dir);
}

/// The number of events in the journal (what a refused command must leave as it was).
fn journal_len(dir: &Path) -> usize {
    events(dir).len()
}

#[test]
fn preempt_runs_every_refusal_before_it_asks_a_running_evolve_to_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = slow_project(tmp.path(), "0.3");
    let mut run = start_evolve(&dir, &["--rounds", "50", "--quiet"]);
    wait_until("the run to search", Duration::from_secs(120), || searching(&dir));
    let refused: [&[&str]; 5] = [
        &["rollback", "--to", "v99", "--reason", "t", "--preempt"],
        &["rollback", "--to", "v1", "--reason", "", "--preempt"],
        &["approve", "v1", "--preempt"],
        &["approve", "v99", "--preempt"],
        &["rollback", "--to", "v99", "--wait=5m"],
    ];
    for args in refused {
        let before = journal_len(&dir);
        let asked = Instant::now();
        let (code, out, err) = emend(&dir, args);
        assert_eq!(code, 2, "emend {args:?}: {out}{err}");
        assert!(asked.elapsed() < Duration::from_secs(5), "emend {args:?} refused at once, without waiting");
        assert!(!err.contains("asked pid"), "emend {args:?} asked the run to stop: {err}");
        assert!(run.try_wait().unwrap().is_none(), "emend {args:?} stopped the run");
        assert!(!dir.join(".emend/journal/STOP").exists(), "emend {args:?} left a stop request");
        // The run may have journaled more meanwhile, never an interruption.
        assert!(journal_len(&dir) >= before && interrupted(&dir).is_empty(), "emend {args:?}");
    }
    // A request that passes its checks still preempts the run.
    ok(&dir, &["rollback", "--to", "v1", "--reason", "3 a.m.", "--preempt"]);
    assert_eq!(exit_of(&mut run, Duration::from_secs(10)), 4);
    verified(&dir);
}

/// A manual-approval project (the rule evolver, `serve.max_pending: 1`) with a
/// superseded and a live pending version: (dir, the superseded one, the live one).
/// v2 waits against v1; a hand edit journaled as a version and served by rollback
/// makes it stale, and the next run's pending version supersedes it (the cap).
fn superseded_pair(tmp: &Path) -> (PathBuf, u64, u64) {
    ok(tmp, &["init", "p", "--tasks", "builtin"]);
    let dir = tmp.join("p");
    edit_config(&dir, "  approval: auto", "  approval: manual");
    edit_config(&dir, "  max_pending: null", "  max_pending: 1");
    edit_config(&dir, "  method: null", "  method: rules");
    // The rule evolver's bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    edit_config(&dir, "confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    hand_edit(&dir, "rrf_kappa:", "61");
    ok(&dir, &["rollback", "--to", "v1", "--force", "--reason", "journal the edit"]);
    let edited = json(&dir, &["log", "--json"])["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|e| (e["kind"] == "hand_edit").then(|| e["version"].as_u64().unwrap()))
        .expect("the hand edit is a version");
    ok(&dir, &["rollback", "--to", &format!("v{edited}"), "--reason", "serve the edit"]);
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    let all = json(&dir, &["pending", "--all", "--json"]);
    let all = all["pending"].as_array().unwrap().clone();
    let of = |state: &str| all.iter().find(|p| p["state"] == state).and_then(|p| p["version"].as_u64());
    let (Some(old), Some(live)) = (of("superseded"), of("pending")) else { panic!("no superseded pair: {all:?}") };
    (dir, old, live)
}

#[test]
fn a_version_that_never_passed_serving_is_served_only_by_approve_never_by_rollback() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, old, live) = superseded_pair(tmp.path());
    let serving = served(&dir);
    for (v, says) in [(old, "superseded"), (live, "pending approval")] {
        let before = journal_len(&dir);
        let (code, out, err) = emend(&dir, &["rollback", "--to", &format!("v{v}"), "--reason", "t"]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains(says), "{err}");
        assert_eq!(journal_len(&dir), before, "a refused rollback journals nothing");
    }
    ok(&dir, &["reject", &format!("v{live}"), "--reason", "no"]);
    let (code, _, err) = emend(&dir, &["rollback", "--to", &format!("v{live}"), "--reason", "t"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("rejected"), "{err}");
    assert_eq!(served(&dir), serving);
    verified(&dir);
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    verified(&dir);
}

#[test]
fn verify_fails_on_a_serving_state_the_next_writer_fails_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, old, _) = superseded_pair(tmp.path());
    // The state an older emend's rollback to a superseded version left: it served, the one before quarantined.
    {
        let mut log = emend_journal::open_writer(dir.join(".emend/journal"), EngineProjector).unwrap();
        let hash = emend_core::store::Store::new(&log).version(old).unwrap().unwrap().hash;
        let from = emend_core::store::Store::new(&log).served().unwrap().unwrap().version;
        let moved = |v: u64| Event::Quarantined {
            version: v,
            cause: "rollback".into(),
            reason: "t".into(),
            who: "operator".into(),
            at: "2026-12-05T23:00:00Z".into(),
        };
        let served = Event::ServedChanged {
            from: Some(from),
            to: old,
            hash,
            cause: "rollback".into(),
            reason: "t".into(),
            who: "operator".into(),
            pinned: true,
            best_version: Some(1),
            best_accuracy: None,
            at: "2026-12-05T23:00:00Z".into(),
        };
        log.append(vec![moved(from).to_new(), served.to_new()]).unwrap();
    }
    let (code, out, err) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(&format!("serving state: the served v{old} is superseded")), "{out}");
    assert!(out.contains("no version can be the best-ever"), "{out}");
    let report: Value = serde_json::from_str(&emend(&dir, &["journal", "verify", "--json"]).1).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["serving_problems"].as_array().map(Vec::len), Some(2), "{report}");
}
