//! Serving under human control, end to end on the embedded dataset: manual
//! approval (pending versions, approve with the on_served hook's
//! environment, reject), rollbacks that stick (quarantine of what was rolled
//! back from; best-ever and restore-best never bring it back), quarantine by
//! hand, resolving and reopening an escalation, and a failing hook that is
//! journaled and reported while the command exits 0.

use std::path::{Path, PathBuf};

use emend_core::events::{EngineProjector, Event};
use emend_journal::EventLog;
use serde_json::Value;

use crate::support::{edit_config, events};

fn emend(dir: &Path, args: &[&str]) -> (i32, String, String) {
    crate::support::emend_env(dir, args, &[("USER", "operator")])
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = emend(dir, args);
    assert_eq!(code, 0, "emend {args:?} exited {code}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let out = ok(dir, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("emend {args:?}: not JSON ({e}):\n{out}"))
}

fn project(tmp: &Path) -> PathBuf {
    ok(tmp, &["init", "p", "--tasks", "builtin"]);
    tmp.join("p")
}

fn served_changes(dir: &Path) -> Vec<(u64, String)> {
    events(dir)
        .into_iter()
        .filter_map(|e| match e {
            Event::ServedChanged { to, cause, .. } => Some((to, cause)),
            _ => None,
        })
        .collect()
}

fn hook_script(dir: &Path, body: &str) {
    let path = dir.join("hook.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn manual_approval_leaves_pending_versions_and_approve_serves_one_with_the_hook() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    edit_config(&dir, "  approval: auto", "  approval: manual");
    edit_config(&dir, "  max_pending: null", "  max_pending: 1");
    // The rule evolver: its one-field candidates are what the pending list shows below.
    edit_config(&dir, "  method: null", "  method: rules");
    // The rule evolver's bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    edit_config(&dir, "confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    edit_config(&dir, "  on_pending: null", "  on_pending: [\"./pending.sh\"]");
    std::fs::write(
        dir.join("pending.sh"),
        "#!/bin/sh\necho \"$EMEND_PENDING_VERSION:$EMEND_PENDING_SUPERSEDES\" >> pending.runs\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("pending.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    // While a version waits for approval against the served one, a run does not search.
    let run = json(&dir, &["evolve", "--rounds", "4", "--json", "--quiet"]);
    assert_eq!((run["stopped"].as_str(), run["rounds"].as_u64()), (Some("pending"), Some(1)), "{run}");
    let waiting = run["waiting"].as_u64().expect("the version it waits for");
    assert_eq!(run["pending_versions"], serde_json::json!([waiting]), "{run}");
    let again = json(&dir, &["evolve", "--rounds", "4", "--json", "--quiet"]);
    assert_eq!((again["stopped"].as_str(), again["rounds"].as_u64()), (Some("pending"), Some(0)), "{again}");
    assert_eq!((again["candidates"].as_u64(), again["evaluations_used"].as_f64()), (Some(0), Some(0.0)), "{again}");
    let status = json(&dir, &["status", "--json"]);
    assert_eq!(status["served_version"], 1, "nothing is served without approval: {status}");
    assert_eq!(status["best_version"], 1, "a pending version is never the best-ever: {status}");
    // The served version moves (a hand edit journaled, then served): the waiting version is stale, a run
    // searches again, and its pending version supersedes the stale one (serve.max_pending: 1).
    let served_file = dir.join("strategies/served.yaml");
    let text = std::fs::read_to_string(&served_file).unwrap();
    std::fs::write(&served_file, text.replacen("rrf_kappa: 60", "rrf_kappa: 61", 1)).unwrap();
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
    let run = json(&dir, &["evolve", "--rounds", "4", "--json", "--quiet"]);
    assert_eq!(run["stopped"], "pending", "{run}");
    edit_config(&dir, "  on_served: null", "  on_served: [\"./hook.sh\"]");
    hook_script(&dir, "env | grep '^EMEND_' | sort > hook.env; echo run >> hook.runs");
    let pending = json(&dir, &["pending", "--json"]);
    let list = pending["pending"].as_array().unwrap();
    assert_eq!(list.len(), 1, "one live pending version: {pending}");
    let all = json(&dir, &["pending", "--all", "--json"]);
    let all = all["pending"].as_array().unwrap().clone();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!((all[0]["version"].as_u64(), &all[0]["state"]), (Some(waiting), &serde_json::json!("superseded")));
    // hooks.on_pending ran once per pending version and named the one each superseded.
    let runs = std::fs::read_to_string(dir.join("pending.runs")).unwrap();
    let expected = vec![format!("{waiting}:"), format!("{}:{waiting}", all[1]["version"])];
    assert_eq!(runs.lines().collect::<Vec<_>>(), expected, "{runs}");
    assert!(!dir.join("hook.runs").exists(), "no served change yet, so no hook run");
    let third = list[0]["version"].as_u64().unwrap();
    let second = waiting;
    assert_eq!(
        (list[0]["tested_against"].as_u64(), list[0]["stale"].as_bool()),
        (Some(edited), Some(false)),
        "{pending}"
    );
    assert!(list[0]["delta"].as_f64().unwrap() > 0.0 && list[0]["changed"].as_array().unwrap().len() == 1);
    assert!(list[0]["ci"].is_array() && list[0]["alpha"].is_number(), "{pending}");
    // A superseded version is no live option.
    let (code, _, err) = emend(&dir, &["approve", &format!("v{second}")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("superseded"), "{err}");

    // A superseded version cannot be rejected either: it is closed already.
    let (code, _, err) = emend(&dir, &["reject", &format!("v{second}"), "--reason", "not now"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("superseded"), "{err}");
    let first = third;
    ok(&dir, &["approve", &format!("v{first}"), "--reason", "looks right"]);
    let status = json(&dir, &["status", "--json"]);
    assert_eq!(status["served_version"], first);
    let served = std::fs::read_to_string(dir.join("strategies/served.yaml")).unwrap();
    assert!(served.contains(&format!("v{first}")), "{served}");
    assert_eq!(std::fs::read_to_string(dir.join("hook.runs")).unwrap(), "run\n", "the hook ran exactly once");
    let env = std::fs::read_to_string(dir.join("hook.env")).unwrap();
    let abs = std::fs::canonicalize(&dir).unwrap();
    let hash = status["served_hash"].as_str().unwrap();
    for line in [
        format!("EMEND_SERVED_VERSION={first}"),
        format!("EMEND_PREVIOUS_VERSION={edited}"),
        "EMEND_CHANGE=approved".to_string(),
        format!("EMEND_SERVED_HASH={hash}"),
        format!("EMEND_SERVED_FILE={}", abs.join("strategies/served.yaml").display()),
        format!("EMEND_PROJECT={}", abs.display()),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing from the hook's environment:\n{env}");
    }
    assert!(served_changes(&dir).contains(&(first, "approve".to_string())));

    let log = ok(&dir, &["log"]);
    assert!(log.contains(&format!("approved v{first} by")), "{log}");
    // The log's words match the states: no version that waited for approval reads ACCEPTED.
    for (v, word) in [(first, "APPROVED"), (second, "SUPERSEDED")] {
        assert!(log.contains(&format!("{word} as v{v} (")), "{word} v{v} missing:\n{log}");
    }
    assert!(!log.contains("ACCEPTED"), "{log}");
    let status = ok(&dir, &["status"]);
    assert!(status.contains(&format!("approved: v{first}")) && status.contains("superseded: "), "{status}");
    ok(&dir, &["report", "--out", "r.html"]);
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert!(
        html.contains("serving: approved by") && html.contains("serving: superseded by"),
        "report lacks the reviews"
    );
    assert!(ok(&dir, &["journal", "verify"]).contains("projections: ok"));
}

#[test]
fn a_rejected_pending_version_is_closed_and_never_served() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    edit_config(&dir, "  approval: auto", "  approval: manual");
    edit_config(&dir, "  method: null", "  method: rules");
    // The rule evolver's bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    edit_config(&dir, "confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    let pending = json(&dir, &["pending", "--json"]);
    let Some(v) = pending["pending"][0]["version"].as_u64() else { panic!("no pending version: {pending}") };
    let (code, _, err) = emend(&dir, &["reject", &format!("v{v}")]);
    assert_eq!(code, 2, "reject needs a reason: {err}");
    ok(&dir, &["reject", &format!("v{v}"), "--reason", "not now"]);
    let (code, _, err) = emend(&dir, &["approve", &format!("v{v}")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("rejected"), "{err}");
    assert!(ok(&dir, &["show", &format!("v{v}")]).contains("serving: rejected by"));
    let log = ok(&dir, &["log"]);
    assert!(log.contains(&format!("REJECTED as v{v} (")) && !log.contains("ACCEPTED"), "{log}");
    assert!(ok(&dir, &["status"]).contains(&format!("rejected: v{v}")));
    ok(&dir, &["report", "--out", "r.html"]);
    assert!(std::fs::read_to_string(dir.join("r.html")).unwrap().contains("serving: rejected by"));
    assert_eq!(json(&dir, &["status", "--json"])["served_version"], 1);
}

#[test]
fn a_rollback_sticks_the_version_rolled_back_from_is_never_served_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    // A run that accepts more than one version: bounded steps (the conservative
    // mode, whose steps the confirm test sees one by one) with a seed that
    // accepts several on this set. The global search makes one jump here.
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
    let before = json(&dir, &["status", "--json"]);
    let rolled_from = before["served_version"].as_u64().unwrap();
    assert!(rolled_from > 2, "the run must serve something after v2: {before}");
    assert_eq!(before["best_version"], rolled_from);
    let out = json(&dir, &["rollback", "--to", "v2", "--reason", "test", "--json"]);
    assert!(out["quarantined"].as_array().unwrap().iter().any(|v| v == rolled_from), "{out}");
    let status = json(&dir, &["status", "--json"]);
    assert_eq!(status["served_version"], 2);
    assert_ne!(status["best_version"], rolled_from, "a quarantined version is never the best-ever: {status}");
    ok(&dir, &["evolve", "--rounds", "3", "--quiet"]);
    // restore-best (an operator's request for the best-ever) never picks it either.
    ok(&dir, &["restore-best"]);
    let changes = served_changes(&dir);
    let rollback_at = changes.iter().rposition(|(_, c)| c == "rollback").unwrap();
    assert!(
        changes[rollback_at + 1..].iter().all(|(to, _)| *to != rolled_from),
        "v{rolled_from} was served again after the rollback: {changes:?}"
    );
    assert_ne!(json(&dir, &["status", "--json"])["served_version"], rolled_from);
    let status = ok(&dir, &["status"]);
    let quarantined = status.lines().find(|l| l.starts_with("quarantined: ")).unwrap_or_default();
    assert!(quarantined.split([' ', ',']).any(|v| v == format!("v{rolled_from}")), "{status}");
    let log = ok(&dir, &["log"]);
    assert!(log.contains(&format!("quarantined v{rolled_from} (rollback)")), "{log}");
    let show = ok(&dir, &["show", &format!("v{rolled_from}")]);
    assert!(show.contains("serving: quarantined (rollback)"), "{show}");
    // Serving it by hand needs the quarantine lifted first.
    let (code, _, err) = emend(&dir, &["rollback", "--to", &format!("v{rolled_from}")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("quarantined"), "{err}");
    ok(&dir, &["unquarantine", &format!("v{rolled_from}"), "--reason", "fixed downstream"]);
    ok(&dir, &["rollback", "--to", &format!("v{rolled_from}"), "--reason", "back"]);
    assert_eq!(json(&dir, &["status", "--json"])["served_version"], rolled_from);
    assert!(ok(&dir, &["journal", "verify"]).contains("projections: ok"));
}

#[test]
fn quarantine_by_hand_moves_the_best_ever_and_unquarantine_lifts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    ok(&dir, &["evolve", "--rounds", "3", "--quiet"]);
    let served = json(&dir, &["status", "--json"])["served_version"].as_u64().unwrap();
    assert!(served >= 2);
    // The served version cannot be quarantined without rolling back from it.
    let (code, _, err) = emend(&dir, &["quarantine", &format!("v{served}"), "--reason", "bad"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = emend(&dir, &["quarantine", "v1"]);
    assert_eq!(code, 2, "a reason is required: {err}");
    ok(&dir, &["quarantine", "v1", "--reason", "bad downstream"]);
    let status = json(&dir, &["status", "--json"]);
    assert_eq!(status["quarantined"][0]["version"], 1, "{status}");
    // `who` is the OS account ($USER is set to "operator" above and not read).
    let me = std::process::Command::new("id").arg("-un").output().unwrap();
    let me = String::from_utf8_lossy(&me.stdout).trim().to_string();
    assert_eq!(status["quarantined"][0]["who"].as_str().unwrap().split('@').next(), Some(me.as_str()));
    ok(&dir, &["unquarantine", "v1"]);
    assert_eq!(json(&dir, &["status", "--json"])["quarantined"], serde_json::json!([]));
    let evs = events(&dir);
    let kinds: Vec<&str> = evs.iter().map(|e| e.kind()).collect();
    assert!(kinds.contains(&"quarantined") && kinds.contains(&"unquarantined"));
    assert!(ok(&dir, &["journal", "verify"]).contains("projections: ok"));
}

#[test]
fn an_escalation_is_resolved_and_reopened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    // Escalate a direction as three out-of-scope blocks would.
    let key = "retrieve.top_k::increase";
    {
        let mut log = emend_journal::open_writer(dir.join(".emend/journal"), EngineProjector).unwrap();
        let mut node =
            emend_core::hypothesis::Hypothesis::new("retrieve.top_k", emend_core::schema::Direction::Increase);
        for _ in 0..3 {
            node.block();
        }
        assert_eq!(node.status, emend_core::hypothesis::Status::Escalated);
        let evs = [
            Event::HypothesisUpdated { node },
            Event::Escalated { class: key.into(), round: 1, reasons: vec!["needs a schema change".into()] },
        ];
        log.append(evs.iter().map(Event::to_new).collect()).unwrap();
    }
    assert!(ok(&dir, &["escalations"]).contains("[open]"));
    let (code, _, err) = emend(&dir, &["escalations", "resolve", "no::such", "--reason", "x"]);
    assert_eq!(code, 2, "{err}");
    ok(&dir, &["escalations", "resolve", key, "--reason", "schema bound raised"]);
    let listed = ok(&dir, &["escalations"]);
    assert!(listed.contains("[resolved]") && listed.contains("schema bound raised"), "{listed}");
    let tree = json(&dir, &["hypotheses", "--json"]).to_string();
    assert!(!tree.contains("\"escalated\""), "the resolved direction may be proposed again: {tree}");
    let (code, _, _) = emend(&dir, &["escalations", "resolve", key, "--reason", "again"]);
    assert_eq!(code, 2, "resolving twice is refused");
    ok(&dir, &["escalations", "reopen", key]);
    assert!(ok(&dir, &["escalations"]).contains("[open]"));
    assert!(json(&dir, &["hypotheses", "--json"]).to_string().contains("\"escalated\""));
    assert!(ok(&dir, &["journal", "verify"]).contains("projections: ok"));
}

#[test]
fn a_failing_hook_is_journaled_and_reported_and_the_exit_code_stays_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    edit_config(&dir, "  on_served: null", "  on_served: [\"./hook.sh\"]");
    hook_script(&dir, "exit 7");
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "2", "--quiet", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("hooks.on_served failed"), "{err}");
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert!(!summary["hook_failures"].as_array().unwrap().is_empty(), "{summary}");
    let failed: Vec<Event> = events(&dir).into_iter().filter(|e| matches!(e, Event::HookFailed { .. })).collect();
    assert!(!failed.is_empty());
    let Event::HookFailed { hook, change, error, .. } = &failed[0] else { unreachable!() };
    assert_eq!((hook.as_str(), change.as_str()), ("on_served", "accepted"));
    assert!(error.contains("exit status: 7"), "{error}");
    assert!(ok(&dir, &["status"]).contains("last hook failure: hooks.on_served"));
    assert!(ok(&dir, &["journal", "verify"]).contains("projections: ok"));
}

/// The paths a candidate record changes (its change and more_changes).
fn changed_paths(c: &emend_core::events::CandidateRecord) -> Vec<String> {
    c.change.iter().chain(c.more_changes.iter()).map(|ch| ch.path.clone()).collect()
}

#[test]
fn a_rollback_freezes_the_rolled_back_fields_until_unquarantine() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    edit_config(&dir, "  method: null", "  method: rules");
    // The rule evolver's bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    edit_config(&dir, "confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    // Runs until a version is accepted, then rolls back from it.
    let mut accepted = None;
    for _ in 0..4 {
        let summary = json(&dir, &["evolve", "--rounds", "1", "--json", "--quiet"]);
        if let Some(v) = summary["accepted_versions"].as_array().and_then(|a| a.first()).and_then(Value::as_u64) {
            accepted = Some(v);
            break;
        }
    }
    let v = accepted.expect("a version accepted in four rounds");
    let rolled_back: Vec<String> = events(&dir)
        .iter()
        .find_map(|e| match e {
            Event::CandidateJudged(c) if c.accepted_version == Some(v) => Some(changed_paths(c)),
            _ => None,
        })
        .expect("the accepted candidate's record");
    assert!(!rolled_back.is_empty());
    ok(&dir, &["rollback", "--to", "v1", "--reason", "context cost 6x"]);
    let help = ok(&dir, &["help", "rollback"]);
    assert!(help.contains("freezes") && help.contains("unquarantine"), "{help}");
    let seen = events(&dir).len();
    let summary = json(&dir, &["evolve", "--rounds", "3", "--json", "--quiet"]);
    let frozen = summary["frozen"].as_object().unwrap();
    for path in &rolled_back {
        assert_eq!(frozen.get(path).and_then(Value::as_u64), Some(v), "{summary}");
    }
    // No candidate after the rollback changes a frozen field.
    for e in &events(&dir)[seen..] {
        if let Event::CandidateJudged(c) = e {
            let again: Vec<String> = changed_paths(c).into_iter().filter(|p| frozen.contains_key(p)).collect();
            assert!(again.is_empty(), "{} changes the frozen {again:?}", c.id);
        }
    }
    ok(&dir, &["unquarantine", &format!("v{v}"), "--reason", "cost is fine now"]);
    let summary = json(&dir, &["evolve", "--rounds", "1", "--json", "--quiet"]);
    assert!(summary["frozen"].as_object().unwrap().is_empty(), "{summary}");
}
