//! Serving under human control: `pending`, `approve`, `reject`,
//! `quarantine`, `unquarantine` and `escalations resolve|reopen`. Every
//! command journals who, when and why; a change of the served version runs
//! `hooks.on_served` (a failed hook is journaled and reported, exit 0).

use std::path::Path;

use engine::events::{Event, who};
use engine::exit;
use engine::hooks::{self, Change};
use engine::hypothesis::Status;
use engine::served;
use engine::store::Store;
use journal::EventLog;
use serde_json::{Value, json};

use super::common;
use super::{CmdResult, Failure};

pub(super) fn version_arg(spec: &str) -> Result<u64, Failure> {
    spec.strip_prefix('v')
        .unwrap_or(spec)
        .parse::<u64>()
        .map_err(|_| Failure::bad_input(anyhow::anyhow!("{spec}: expected a version like v3")))
}

fn bad(msg: String) -> Failure {
    Failure::bad_input(anyhow::anyhow!(msg))
}

#[derive(Debug, clap::Args)]
pub struct PendingArgs {
    /// Print `{"pending": [...]}` on stdout: per version its state, the version it was tested against, round, candidate, confirm-part delta, alpha, CI, changed fields and credits.
    #[arg(long)]
    pub json: bool,
    /// Also list the versions that are no longer pending: superseded, approved and rejected.
    #[arg(long)]
    pub all: bool,
}

/// Versions waiting for approval, with the evidence of the test that made them.
pub fn pending(args: &PendingArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let store = Store::new(&log);
    let candidates = store.candidates().map_err(common::store_failure)?;
    let served_now = store.served().map_err(common::store_failure)?.map_or(0, |s| s.version);
    let mut list = Vec::new();
    for (v, r) in store.reviews().map_err(common::store_failure)? {
        if r["status"] != "pending" && !args.all {
            continue;
        }
        let c = candidates.iter().find(|c| c.accepted_version == Some(v));
        let mut changed: Vec<Value> = vec![];
        if let Some(c) = c {
            for ch in c.change.iter().chain(c.more_changes.iter()) {
                changed.push(json!({"path": ch.path, "from": ch.from, "to": ch.to}));
            }
        }
        let full = c.and_then(|c| c.full.as_ref());
        let cost = store.version_cost(v).map_err(common::store_failure)?;
        list.push(json!({
            "version": v,
            "state": r["status"],
            "parent": r["parent"],
            // The served version it was tested against, and whether that is still the one served.
            "tested_against": r["parent"],
            "stale": r["parent"].as_u64() != Some(served_now),
            "round": r["round"],
            "candidate": c.map(|c| c.id.clone()),
            "delta": c.and_then(|c| c.delta),
            "alpha": c.and_then(|c| c.alpha),
            "ci": full.map(|f| json!([f.ci_low, f.ci_high])),
            "changed": changed,
            "credits": c.map(|c| c.credits.clone()).unwrap_or_default(),
            "cost": cost,
            "cost_text": cost.map(|c| c.describe()),
        }));
    }
    if args.json {
        common::print_json(&json!({ "pending": list }));
        return Ok(exit::OK);
    }
    let superseded = store.reviews().map_err(common::store_failure)?.values().any(|r| r["status"] == "superseded");
    print!("{}", engine::sanitize::escape_controls(&render_pending(&list, served_now, superseded)));
    Ok(exit::OK)
}

/// The pending list as `pending` prints it (journaled text included: escape before printing).
fn render_pending(list: &[Value], served_now: u64, superseded: bool) -> String {
    let mut out = String::new();
    if list.is_empty() {
        out.push_str(&format!(
            "no pending versions{}\n",
            if superseded { " (superseded ones: `emend pending --all`)" } else { "" }
        ));
    }
    for p in list {
        let changes: Vec<String> = p["changed"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| format!("{} {} -> {}", c["path"].as_str().unwrap_or("?"), c["from"], c["to"]))
            .collect();
        let state = match (p["state"].as_str().unwrap_or("?"), p["stale"].as_bool()) {
            ("pending", Some(true)) => format!(
                "pending; tested against v{}, but v{served_now} is served: approve needs --retest or --force",
                p["parent"]
            ),
            ("pending", _) => format!("pending; tested against the served v{served_now}"),
            (other, _) => other.to_string(),
        };
        out.push_str(&format!(
            "v{} [{state}] (child of v{}, round {}, candidate {}): confirm delta {}, alpha {}, CI {}; {}\n",
            p["version"],
            p["parent"],
            p["round"],
            p["candidate"].as_str().unwrap_or("?"),
            p["delta"].as_f64().map_or("?".into(), |d| format!("{d:+.4}")),
            p["alpha"].as_f64().map_or("?".into(), |a| format!("{a:.3e}")),
            p["ci"].as_array().map_or("?".into(), |c| format!(
                "[{:+.4}, {:+.4}]",
                c[0].as_f64().unwrap_or(f64::NAN),
                c[1].as_f64().unwrap_or(f64::NAN)
            )),
            changes.join(", ")
        ));
        if let Some(cost) = p["cost_text"].as_str() {
            out.push_str(&format!("  cost: {cost}\n"));
        }
        out.push_str(&render_kept(&p["credits"]));
    }
    if !list.is_empty() {
        out.push_str("serve one with `emend approve vN`, close one with `emend reject vN --reason ...`\n");
    }
    out
}

/// A pending version's kept fields (its candidate's credits as `pending --json` lists them),
/// largest search-part contribution first, under their heading; empty without credits.
fn render_kept(credits: &Value) -> String {
    let credits: Vec<engine::events::Credit> = serde_json::from_value(credits.clone()).unwrap_or_default();
    if credits.is_empty() {
        return String::new();
    }
    let mut out = format!("  {}:\n", engine::views::KEPT_FIELDS);
    for c in engine::views::kept_fields(&credits) {
        out.push_str(&format!("    {}\n", c.describe()));
    }
    out
}

#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// The version (vN).
    pub version: String,
    /// Why (journaled).
    #[arg(long)]
    pub reason: Option<String>,
    /// Print one JSON object on stdout: the version acted on and the journal events written.
    #[arg(long)]
    pub json: bool,
}

fn pending_status(log: &dyn EventLog, v: u64) -> Result<String, Failure> {
    let reviews = Store::new(log).reviews().map_err(common::store_failure)?;
    match reviews.get(&v) {
        Some(r) => Ok(r["status"].as_str().unwrap_or("?").to_string()),
        None => Err(bad(format!("v{v} is not pending approval (see `emend pending`)"))),
    }
}

#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The pending version (vN).
    pub version: String,
    /// Why (journaled). Required with --force.
    #[arg(long)]
    pub reason: Option<String>,
    /// When another version is served than the one vN was tested against: test vN against the served version
    /// now (one confirm test at the next LORD++ alpha, journaled whatever its verdict) and serve it only if it passes.
    #[arg(long, conflicts_with = "force")]
    pub retest: bool,
    /// When another version is served than the one vN was tested against: serve vN without testing it against
    /// the served version (journaled as forced; needs --reason).
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object on stdout: the version acted on and the journal events written.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub takeover: common::Takeover,
}

/// Refuses to approve over a hand-edited served file.
fn refuse_hand_edit(
    project: &engine::config::Project,
    schema: &engine::schema::StrategySchema,
    log: &dyn EventLog,
) -> Result<(), Failure> {
    let state = engine::served::served_file_state(project, schema, log).map_err(common::served_failure)?;
    if let engine::served::FileState::HandEdited { file_hash } = state {
        return Err(bad(format!(
            "{}: edited by hand (hash {file_hash:.12}); refusing to replace it (see `emend rollback --force`)",
            project.strategy_path().display()
        )));
    }
    Ok(())
}

/// Every refusal of `approve` (the version's review state, a quarantine, a hand-edited served file, a stale
/// tested pair without --retest or --force), on any view of the journal: nothing is written.
fn approve_refusal(
    project: &engine::config::Project,
    schema: &engine::schema::StrategySchema,
    log: &dyn EventLog,
    v: u64,
    args: &ApproveArgs,
) -> Result<(), Failure> {
    match pending_status(log, v)?.as_str() {
        "pending" => {}
        "superseded" => {
            return Err(bad(format!(
                "v{v} was superseded by a newer pending version tested against the same served version \
                 (see `emend pending --all`); it is no longer a live option"
            )));
        }
        other => return Err(bad(format!("v{v} is not pending: it was {other}"))),
    }
    let store = Store::new(log);
    if let Some(q) = store.quarantined().map_err(common::store_failure)?.get(&v) {
        return Err(bad(format!("v{v} is quarantined ({}); unquarantine it first", q["reason"])));
    }
    refuse_hand_edit(project, schema, log)?;
    let tested = store.live_pending().map_err(common::store_failure)?.get(&v).copied();
    let served_now = store.served().map_err(common::store_failure)?.map_or(0, |s| s.version);
    if tested != Some(served_now) && !args.force && !args.retest {
        return Err(stale_pair(v, tested, served_now));
    }
    Ok(())
}

/// The refusal of an approval of `v`, tested against `tested`, while `served_now` is served.
fn stale_pair(v: u64, tested: Option<u64>, served_now: u64) -> Failure {
    let against = tested.map_or("a version the journal does not name".to_string(), |t| format!("v{t}"));
    bad(format!(
        "v{v} was tested against {against}, but v{served_now} is served now; approve it with --retest (a confirm \
         test against v{served_now} at the next LORD++ alpha, served only if it passes) or with --force --reason \
         ... (served untested against v{served_now}, journaled as forced)"
    ))
}

pub fn approve(args: &ApproveArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let v = version_arg(&args.version)?;
    if args.force && args.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(bad("approve --force: --reason is required (it is journaled with the forced approval)".into()));
    }
    let schema = common::schema(&project)?;
    let refuse = |log: &dyn EventLog| approve_refusal(&project, &schema, log, v, args);
    let mut log = common::operator_writer(&project, args.takeover, &format!("approve v{v}"), &refuse)?;
    let reason = args.reason.clone().unwrap_or_else(|| format!("approved by {}", who()));
    let approval = tested_pair(&project, &schema, &mut log, v, args, reason)?;
    let retested = approval.retest.clone();
    let events = served::approve(&project, &schema, &mut log, v, approval).map_err(common::served_failure)?;
    let Some(Event::ServedChanged { from, hash, reason, .. }) = events.last().cloned() else {
        return Err(Failure::failed(anyhow::anyhow!("approve wrote no served change")));
    };
    let hook = hooks::on_served(&project, &mut log, from, v, &hash, Change::Approved);
    common::warn_hook_failures(&hook);
    if args.json {
        common::print_json(
            &json!({"approved": v, "from": from, "retest": retested, "events": events, "hook_failure": hook}),
        );
    } else {
        println!(
            "approved: served v{} -> v{v} ({})\n{} written",
            from.unwrap_or(0),
            engine::sanitize::escape_controls(&reason),
            project.strategy_path().display()
        );
    }
    Ok(exit::OK)
}

/// The approval of pending `v` as a tested pair: as it is when the served
/// version is the one `v` was tested against; else after a passed retest
/// (`--retest`), or forced (`--force`), or refused (exit 2).
fn tested_pair(
    project: &engine::config::Project,
    schema: &engine::schema::StrategySchema,
    log: &mut journal::SledJournal,
    v: u64,
    args: &ApproveArgs,
    reason: String,
) -> Result<served::Approval, Failure> {
    let store = Store::new(&*log);
    let tested = store.live_pending().map_err(common::store_failure)?.get(&v).copied();
    let served_now = store.served().map_err(common::store_failure)?.map_or(0, |s| s.version);
    let mut approval = served::Approval { reason, ..Default::default() };
    if tested == Some(served_now) {
        return Ok(approval);
    }
    if args.force {
        approval.forced_over = Some(served_now);
        return Ok(approval);
    }
    if !args.retest {
        return Err(stale_pair(v, tested, served_now));
    }
    let backend = common::backend(project, schema)?;
    let mut evolution = engine::evolve::Evolution { project, schema, backend: backend.as_ref(), log: &mut *log };
    let retested = evolution.retest(v).map_err(common::evolve_failure)?;
    eprintln!("{}", retested.record.reason);
    if !retested.passed {
        log.append(vec![engine::evolve::retest_judged(&retested).to_new()]).map_err(common::journal_failure)?;
        return Err(Failure::failed(anyhow::anyhow!(
            "v{v} was not served: {} (the test is journaled as {})",
            retested.record.reason,
            retested.record.id
        )));
    }
    approval.retest = Some(retested.record.id.clone());
    approval.evidence = vec![engine::evolve::retest_judged(&retested)];
    Ok(approval)
}

pub fn reject(args: &ReviewArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let v = version_arg(&args.version)?;
    let reason = args.reason.clone().ok_or_else(|| bad("reject: --reason is required".into()))?;
    let mut log = common::writer(&project)?;
    match pending_status(&log, v)?.as_str() {
        "pending" => {}
        other => return Err(bad(format!("v{v} is not pending: it was {other}"))),
    }
    let event = served::reject(&mut log, v, &reason).map_err(common::served_failure)?;
    if args.json {
        common::print_json(&json!({"rejected": v, "event": event}));
    } else {
        println!("rejected v{v} ({}); it will never be served", engine::sanitize::escape_controls(&reason));
    }
    Ok(exit::OK)
}

pub fn quarantine(args: &ReviewArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let v = version_arg(&args.version)?;
    let reason = args.reason.clone().ok_or_else(|| bad("quarantine: --reason is required".into()))?;
    let mut log = common::writer(&project)?;
    let store = Store::new(&log);
    if store.version(v).map_err(common::store_failure)?.is_none() {
        return Err(bad(format!("no version v{v} in the journal")));
    }
    let served_now = store.served().map_err(common::store_failure)?.map(|s| s.version);
    if served_now == Some(v) {
        return Err(bad(format!(
            "v{v} is served; roll back from it (`emend rollback --to vN --reason ...`), which quarantines it"
        )));
    }
    if store.quarantined().map_err(common::store_failure)?.contains_key(&v) {
        return Err(bad(format!("v{v} is already quarantined")));
    }
    let events = served::quarantine(&mut log, &[v], "operator", &reason).map_err(common::served_failure)?;
    if args.json {
        common::print_json(&json!({"quarantined": [v], "events": events}));
    } else {
        println!(
            "quarantined v{v} ({}): never served automatically, never the best-ever",
            engine::sanitize::escape_controls(&reason)
        );
        for e in &events {
            if let Event::BestChanged { version, accuracy, .. } = e {
                println!("best-ever is now v{version} ({accuracy:.4})");
            }
        }
    }
    Ok(exit::OK)
}

pub fn unquarantine(args: &ReviewArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let v = version_arg(&args.version)?;
    let reason = args.reason.clone().unwrap_or_else(|| format!("lifted by {}", who()));
    let mut log = common::writer(&project)?;
    if !Store::new(&log).quarantined().map_err(common::store_failure)?.contains_key(&v) {
        return Err(bad(format!("v{v} is not quarantined")));
    }
    let events = served::unquarantine(&mut log, v, &reason).map_err(common::served_failure)?;
    if args.json {
        common::print_json(&json!({"unquarantined": v, "events": events}));
    } else {
        println!(
            "v{v} is no longer quarantined ({}); it may be served and be the best-ever again",
            engine::sanitize::escape_controls(&reason)
        );
        if events.len() > 1 {
            println!("best-ever is v{v} again");
        }
    }
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct EscalationsArgs {
    #[command(subcommand)]
    pub action: Option<EscalationAction>,
    /// Print JSON on stdout (the list).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum EscalationAction {
    /// Close an escalation (e.g. after a schema change): its direction may be proposed again.
    Resolve {
        /// The escalated class (a hypothesis key such as `retrieve.top_k::increase`).
        key: String,
        /// Why it is closed (journaled with the review).
        #[arg(long)]
        reason: String,
        /// A person's change that answers the escalation, PATH=VALUE (repeatable; needs --predict): once the
        /// escalation is resolved it is tested as `emend propose` tests it.
        #[arg(long = "propose", value_name = "PATH=VALUE", requires = "predict")]
        propose: Vec<String>,
        /// The change's predicted per-category movement ("temporal +3pp, single-hop >= 0"; needs --propose).
        #[arg(long, value_name = "PREDICTION", requires = "propose")]
        predict: Option<String>,
        /// Serve the proposed change though its prediction failed, when every other rule passes.
        #[arg(long, requires = "propose")]
        accept_unpredicted: bool,
    },
    /// Open a resolved escalation again: its direction is held back again.
    Reopen {
        /// The escalated class (a hypothesis key such as `retrieve.top_k::increase`).
        key: String,
        /// Why it is opened again (journaled with the review).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// `escalations resolve|reopen`: the review, and the hypothesis node opened or held back, in one batch.
pub fn escalation(action: &EscalationAction, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let mut log = common::writer(&project)?;
    let (key, resolved, reason) = match action {
        EscalationAction::Resolve { key, reason, .. } => (key, true, reason.clone()),
        EscalationAction::Reopen { key, reason } => {
            (key, false, reason.clone().unwrap_or_else(|| format!("reopened by {}", who())))
        }
    };
    let proposal = resolution_proposal(action, &project, &mut log)?;
    let store = Store::new(&log);
    let list = store.escalations().map_err(common::store_failure)?;
    let Some(e) = list.iter().find(|e| e["class"] == key.as_str()) else {
        let known: Vec<&str> = list.iter().filter_map(|e| e["class"].as_str()).collect();
        return Err(bad(format!(
            "no escalation {key} (escalations: {})",
            if known.is_empty() { "none".into() } else { known.join(", ") }
        )));
    };
    let open = e["status"].as_str() != Some("resolved");
    if resolved != open {
        return Err(bad(format!("escalation {key} is already {}", if open { "open" } else { "resolved" })));
    }
    let mut events = vec![Event::EscalationReviewed {
        class: key.clone(),
        resolved,
        reason: reason.clone(),
        who: who(),
        at: engine::events::now_rfc3339(),
    }];
    if let Some(mut node) = store.tree().map_err(common::store_failure)?.get(key.as_str()).cloned() {
        if resolved {
            node.status = if node.evidence_for > 0 { Status::Confirmed } else { Status::Active };
            node.blocked = 0;
        } else {
            node.status = Status::Escalated;
        }
        events.push(Event::HypothesisUpdated { node });
    }
    log.append(events.iter().map(Event::to_new).collect()).map_err(common::journal_failure)?;
    println!(
        "escalation {key} {} ({}){}",
        if resolved { "resolved" } else { "reopened" },
        engine::sanitize::escape_controls(&reason),
        if resolved { "; its direction may be proposed again" } else { "; its direction is held back again" }
    );
    let Some(proposal) = proposal else { return Ok(exit::OK) };
    // The proposal takes the journal's writer lock itself.
    drop(log);
    let outcome = super::propose::test(&project, &proposal, false)?;
    super::propose::print(&outcome, false)
}

/// The proposal `escalations resolve --propose ... --predict ...` carries,
/// checked (fields, categories, novelty) before the escalation is resolved.
fn resolution_proposal(
    action: &EscalationAction,
    project: &engine::config::Project,
    log: &mut journal::SledJournal,
) -> Result<Option<engine::evolve::Proposal>, Failure> {
    let EscalationAction::Resolve { propose, predict: Some(predict), accept_unpredicted, .. } = action else {
        return Ok(None);
    };
    let change = super::propose::ChangeArgs {
        fields: propose.clone(),
        predict: predict.clone(),
        accept_unpredicted: *accept_unpredicted,
    };
    let proposal = change.proposal()?;
    let schema = common::schema(project)?;
    let backend = common::backend(project, &schema)?;
    let evolution = engine::evolve::Evolution { project, schema: &schema, backend: backend.as_ref(), log };
    evolution.check_proposal(&proposal).map_err(common::evolve_failure)?;
    Ok(Some(proposal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_version_lists_its_kept_fields_largest_contribution_first() {
        let credits = json!([
            {"key": "a::increase", "path": "retrieve.pool", "from": 50, "to": 480, "delta": 0.01, "questions": 96},
            {"key": "b::toggle", "path": "ingest.stamp_date", "from": false, "to": true, "delta": 0.03, "questions": 174},
        ]);
        assert_eq!(
            render_kept(&credits),
            "  fields kept after pruning (search-part contribution when reverted alone):\n    \
             ingest.stamp_date false -> true (+3.0 pp on 174 search questions)\n    \
             retrieve.pool 50 -> 480 (+1.0 pp on 96 search questions)\n"
        );
        assert_eq!(render_kept(&json!([])), "");
        assert_eq!(render_kept(&Value::Null), "");
    }
}
