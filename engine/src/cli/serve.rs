//! Serving under human control: `pending`, `approve`, `reject`,
//! `quarantine`, `unquarantine` and `escalations resolve|reopen`. Every
//! command journals who, when and why; a change of the served version runs
//! `hooks.on_served` (a failed hook is journaled and reported, exit 0).

use std::path::Path;

use emend_core::events::{Event, who};
use emend_core::exit;
use emend_core::hypothesis::Status;
use emend_core::served;
use emend_core::store::Store;
use emend_journal::EventLog;
use emend_loop::operate::{self, ApproveError, ApproveRequest};
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
    print!("{}", emend_core::sanitize::escape_controls(&render_pending(&list, served_now, superseded)));
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
    let credits: Vec<emend_core::events::Credit> = serde_json::from_value(credits.clone()).unwrap_or_default();
    if credits.is_empty() {
        return String::new();
    }
    let mut out = format!("  {}:\n", emend_report::views::KEPT_FIELDS);
    for c in emend_report::views::kept_fields(&credits) {
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

fn approve_request(args: &ApproveArgs) -> Result<ApproveRequest, Failure> {
    let version = version_arg(&args.version)?;
    Ok(ApproveRequest { version, reason: args.reason.clone(), retest: args.retest, force: args.force })
}

/// An approval's error as an exit code: a refusal is bad input (2), a test
/// that ran and failed is a failure (1) after its verdict line.
fn approve_failure(project: &emend_core::config::Project, e: ApproveError) -> Failure {
    match e {
        ApproveError::Refused(msg) => bad(msg),
        ApproveError::NotServed { verdict, message } => {
            if let Some(verdict) = verdict {
                eprintln!("{}", emend_core::sanitize::escape_controls(&verdict));
            }
            Failure::failed(anyhow::anyhow!(message))
        }
        ApproveError::Setup(e) => common::setup_failure(project, e),
        ApproveError::Evolve(e) => common::evolve_failure(e),
        ApproveError::Served(e) => common::served_failure(e),
        ApproveError::Store(e) => common::store_failure(e),
        ApproveError::Journal(e) => common::journal_failure(e),
    }
}

pub fn approve(args: &ApproveArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let request = approve_request(args)?;
    let schema = common::schema(&project)?;
    let refuse = |log: &dyn EventLog| {
        operate::approve_refusal(&project, &schema, log, &request).map_err(|e| approve_failure(&project, e))
    };
    let command = format!("approve v{}", request.version);
    let mut log = common::operator_writer(&project, args.takeover, &command, &refuse)?;
    let done =
        operate::approve(&project, &schema, &mut log, &request, &who()).map_err(|e| approve_failure(&project, e))?;
    if let Some(verdict) = &done.retest_reason {
        eprintln!("{}", emend_core::sanitize::escape_controls(verdict));
    }
    common::warn_hook_failures(&done.hook);
    let (v, from) = (done.version, done.from);
    if args.json {
        common::print_json(
            &json!({"approved": v, "from": from, "retest": done.retest, "events": done.events, "hook_failure": done.hook}),
        );
    } else {
        println!(
            "approved: served v{} -> v{v} ({})\n{} written",
            from.unwrap_or(0),
            emend_core::sanitize::escape_controls(&done.reason),
            project.strategy_path().display()
        );
    }
    Ok(exit::OK)
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
        println!("rejected v{v} ({}); it will never be served", emend_core::sanitize::escape_controls(&reason));
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
            emend_core::sanitize::escape_controls(&reason)
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
            emend_core::sanitize::escape_controls(&reason)
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
        at: emend_core::events::now_rfc3339(),
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
        emend_core::sanitize::escape_controls(&reason),
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
    project: &emend_core::config::Project,
    log: &mut emend_journal::SledJournal,
) -> Result<Option<emend_loop::evolve::Proposal>, Failure> {
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
    // The rollback-frozen schema the proposal's test will use, so a change it would refuse is refused now.
    let setup = emend_loop::evolve::Setup::new(&*log, &schema, backend).map_err(common::served_failure)?;
    setup.evolution(project, log).check_proposal(&proposal).map_err(common::evolve_failure)?;
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
