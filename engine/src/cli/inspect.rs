//! Read-only views of a project: `status`, `diagnose`, `hypotheses`,
//! `escalations`, `log`, and `journal verify|export`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use emend_core::events::T_LAYER_A;
use emend_core::exit;
use emend_core::planner::{self, PlannerSettings};
use emend_core::served;
use emend_core::store::Store;
use emend_journal::EventLog;
use emend_report::views::{ConfirmView, LogEntry, LogView, StatusView};
use serde_json::{Value, json};

use super::common;
use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct JsonArg {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn status(args: &JsonArg, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let schema = common::schema(&project)?;
    let file = served::served_file_state(&project, &schema, &log).map_err(common::served_failure)?;
    let view = StatusView::build(&project, &log, &file).map_err(|e| common::classified(e.exit_class(), e))?;
    if args.json {
        common::print_json(&serde_json::to_value(&view).expect("views serialize"));
    } else {
        print!("{}", emend_core::sanitize::escape_controls(&render_status(&view)));
    }
    Ok(exit::OK)
}

/// The text form of a [`StatusView`].
pub fn render_status(v: &StatusView) -> String {
    let mut out = String::new();
    let acc = |a: Option<f64>| a.map_or("not evaluated".to_string(), |a| format!("{a:.4}"));
    let pinned =
        if v.served_pinned { format!("  [pinned by {}: {}]", v.served_cause, v.served_reason) } else { String::new() };
    let _ = writeln!(
        out,
        "served: v{} (hash {:.12}) accuracy {}{pinned}",
        v.served_version,
        v.served_hash,
        acc(v.served_accuracy)
    );
    if let Some(f) = &v.served_figures {
        let _ = writeln!(out, "  measured: {}", f.describe());
    }
    if let Some(c) = &v.served_cost {
        let _ = writeln!(out, "  cost: {}", c.describe());
    }
    if let Some(n) = v.max_tokens {
        let set = match &v.budget {
            Some(b) if b["max_tokens"].as_u64() == Some(u64::from(n)) => format!(
                "; set by {} at {}: {}",
                b["who"].as_str().unwrap_or("?"),
                b["at"].as_str().unwrap_or("?"),
                b["reason"].as_str().unwrap_or("")
            ),
            _ => " (cost.max_tokens)".to_string(),
        };
        let _ = writeln!(out, "budget: at most {n} mean context tokens a question{set}");
    }
    let _ = match (v.best_version, &v.best_hash, v.best_accuracy) {
        (Some(b), Some(h), Some(a)) => writeln!(out, "best-ever: v{b} (hash {h:.12}) accuracy {a:.4}"),
        (Some(b), Some(h), None) => writeln!(out, "best-ever: v{b} (hash {h:.12}) not evaluated"),
        _ => writeln!(out, "best-ever: none yet (no round has run)"),
    };
    let _ = writeln!(out, "served file: {} ({})", v.served_path, v.served_file);
    let _ = match &v.last_round {
        Some(r) => writeln!(
            out,
            "rounds: {} (last: round {}, {}, at {})",
            v.rounds,
            r["round"],
            match r["accepted"].as_str() {
                Some(c) => format!("accepted {c}"),
                None => "nothing accepted".to_string(),
            },
            r["at"].as_str().unwrap_or("?")
        ),
        None => writeln!(out, "rounds: 0"),
    };
    for (role, u) in &v.llm.total {
        let _ = writeln!(
            out,
            "model {role}: {} requests, {} cache hits, {} prompt + {} completion tokens, {} errors (all rounds)",
            u.requests, u.cache_hits, u.prompt_tokens, u.completion_tokens, u.errors
        );
    }
    render_confirm(&mut out, &v.confirm);
    let open = v.escalations.iter().filter(|e| e["status"].as_str() != Some("resolved")).count();
    if v.escalations.is_empty() {
        out.push_str("escalations: none\n");
    } else {
        let _ = writeln!(
            out,
            "escalations: {open} open, {} resolved (see `emend escalations`)",
            v.escalations.len() - open
        );
    }
    render_serving(&mut out, v);
    out
}

/// Approval mode, pending, quarantined and reviewed versions, the last hook failure.
fn render_serving(out: &mut String, v: &StatusView) {
    let names = |vs: &mut dyn Iterator<Item = u64>| vs.map(|v| format!("v{v}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(out, "approval: {}", v.approval);
    if !v.pending_versions.is_empty() {
        // A pending version tested against another served version than today's needs --retest or --force.
        let tested = |p: u64| {
            let parent = v.reviews.iter().find(|r| r["version"] == p).and_then(|r| r["parent"].as_u64());
            match parent {
                Some(t) if t != v.served_version => {
                    format!("v{p} (tested against v{t}, not the served v{})", v.served_version)
                }
                _ => format!("v{p}"),
            }
        };
        let list: Vec<String> = v.pending_versions.iter().map(|p| tested(*p)).collect();
        let _ = writeln!(out, "pending approval: {} (see `emend pending`)", list.join(", "));
    }
    if !v.quarantined.is_empty() {
        let _ =
            writeln!(out, "quarantined: {}", names(&mut v.quarantined.iter().filter_map(|q| q["version"].as_u64())));
    }
    for status in ["approved", "rejected", "superseded"] {
        let mut vs =
            v.reviews.iter().filter(|r| r["status"] == status).filter_map(|r| r["version"].as_u64()).peekable();
        if vs.peek().is_some() {
            let _ = writeln!(out, "{status}: {}", names(&mut vs));
        }
    }
    if let Some(i) = &v.interrupted {
        let _ = writeln!(
            out,
            "last run interrupted before round {} finished ({}{}) at {}; the next evolve runs it again",
            i["round"],
            i["cause"].as_str().unwrap_or("?"),
            i["requested_by"].as_str().map_or(String::new(), |r| format!(", by {r}")),
            i["at"].as_str().unwrap_or("?"),
        );
    }
    if let Some(h) = &v.last_hook_failure {
        let _ = writeln!(
            out,
            "last hook failure: hooks.{} for v{} ({}) at {}: {}",
            h["hook"].as_str().unwrap_or("?"),
            h["version"],
            h["change"].as_str().unwrap_or("?"),
            h["at"].as_str().unwrap_or("?"),
            h["error"].as_str().unwrap_or("?")
        );
    }
}

/// The confirm part, the next test's power and what its reuse guarantees.
fn render_confirm(out: &mut String, c: &ConfirmView) {
    let (alpha, wealth) = (c.next_alpha, c.lord_wealth);
    let _ = match c.questions {
        Some(n) => writeln!(
            out,
            "confirm part: {n} questions; next test at alpha {alpha:.3e} (LORD++ test {}), wealth {wealth:.3e}",
            c.tests + 1
        ),
        None => writeln!(
            out,
            "confirm part: not split yet (no round has run); next test at alpha {alpha:.3e}, wealth {wealth:.3e}"
        ),
    };
    let _ = match (c.mde_80, c.discordance_rate) {
        (Some(m), Some(q)) => writeln!(
            out,
            "the next confirm test sees a gain of {:.2} pp with 80% power ({} {}, discordance rate {:.1}% so far)",
            m * 100.0,
            c.mde_n.unwrap_or(0),
            c.mde_unit,
            q * 100.0
        ),
        (None, Some(q)) => writeln!(
            out,
            "the next confirm test cannot see any gain up to the discordance rate ({:.1}%) with 80% power at its alpha",
            q * 100.0
        ),
        _ if c.mde_unit == "conversations" => writeln!(
            out,
            "minimum detectable effect: not computed for the test over conversations (its power by simulation: \
             docs/statistics.md, which population a guarantee covers)"
        ),
        _ => writeln!(out, "minimum detectable effect: unknown until a confirm test has observed a discordance rate"),
    };
    if let (Some(split), Some(guarantee)) = (&c.split, &c.guarantee) {
        let _ = writeln!(out, "split: {split}; {guarantee}");
    }
    let _ = writeln!(out, "confirm-part reuse: {}", c.reuse);
}

pub fn escalations(args: &JsonArg, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let list = Store::new(&log).escalations().map_err(common::store_failure)?;
    if args.json {
        common::print_json(&json!({ "escalations": list }));
    } else {
        print!("{}", emend_core::sanitize::escape_controls(&render_escalations(&list)));
    }
    Ok(exit::OK)
}

/// The escalations as `escalations` prints them (journaled text included: escape before printing).
fn render_escalations(list: &[Value]) -> String {
    if list.is_empty() {
        return "no escalations\n".into();
    }
    let mut out = String::new();
    for e in list {
        let _ = writeln!(
            out,
            "{} (round {}): blocked 3 times as out of scope [{}]",
            e["class"].as_str().unwrap_or("?"),
            e["round"],
            e["status"].as_str().unwrap_or("open")
        );
        if let Some(r) = e.get("review") {
            let (who, at) = (r["who"].as_str().unwrap_or("?"), r["at"].as_str().unwrap_or("?"));
            let _ = writeln!(out, "  reviewed by {who} at {at}: {}", r["reason"].as_str().unwrap_or(""));
        }
        for r in e["reasons"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  {}", r.as_str().unwrap_or(""));
        }
    }
    out.push_str(
        "these need a change outside the strategy (schema bounds, model roles, the harness); emend no longer retries them\n",
    );
    out
}

/// The served strategy as the journal has it, else the project's strategy file.
pub(super) fn served_artifact(
    project: &emend_core::config::Project,
    schema: &emend_core::schema::StrategySchema,
) -> Result<emend_core::artifact::Artifact, Failure> {
    match emend_journal::open_view(project.journal_dir(), emend_core::events::EngineProjector) {
        Ok(log) => {
            let store = Store::new(&log);
            match store.served().map_err(common::store_failure)? {
                Some(s) => {
                    let doc = store.document(&s.hash).map_err(common::store_failure)?.unwrap_or(Value::Null);
                    let mut a = served::artifact_of(schema, &s.hash, doc).map_err(common::served_failure)?;
                    a.version = Some(s.version);
                    Ok(a)
                }
                None => emend_core::artifact::load_file(&project.strategy_path(), schema).map_err(Failure::bad_input),
            }
        }
        Err(e) if matches!(e.kind(), emend_journal::ErrorKind::NotFound { .. }) => {
            emend_core::artifact::load_file(&project.strategy_path(), schema).map_err(Failure::bad_input)
        }
        Err(e) => Err(common::journal_failure(e)),
    }
}

pub fn hypotheses(args: &JsonArg, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let log = common::reader(&project)?;
    let store = Store::new(&log);
    let tree = store.tree().map_err(common::store_failure)?;
    let effects = store.effects().map_err(common::store_failure)?;
    let served = store.served().map_err(common::store_failure)?;
    // Actionability from the served strategy's latest diagnosis.
    let diagnosis: emend_core::layer_a::Diagnosis = match &served {
        Some(s) => log
            .scan(T_LAYER_A, &format!("{}/", s.hash))
            .map_err(common::journal_failure)?
            .pop()
            .and_then(|(_, v)| serde_json::from_value(v).ok())
            .unwrap_or_default(),
        None => Default::default(),
    };
    // The last round's digest, when it digested the served version: what the planner read.
    let digest: Option<emend_core::digest::Digest> = store
        .rounds()
        .map_err(common::store_failure)?
        .pop()
        .and_then(|mut r| serde_json::from_value(r["digest"].take()).ok())
        .filter(|d: &emend_core::digest::Digest| served.as_ref().is_some_and(|s| s.version == d.version));
    let plans = planner::plan(
        &schema,
        &diagnosis,
        digest.as_ref(),
        &tree,
        &effects,
        PlannerSettings { exploration: project.config.loop_.exploration, ..Default::default() },
    );
    let by_key: BTreeMap<&str, &planner::Plan> = plans.iter().map(|p| (p.key.as_str(), p)).collect();
    let total: u32 = tree.values().map(|h| h.visits).sum();
    let mut rows: Vec<Value> = tree
        .values()
        .map(|h| {
            let a = by_key.get(h.key.as_str()).map_or(0.0, |p| p.actionability);
            let ucb = h.ucb(total, a, project.config.loop_.exploration);
            json!({
                "key": h.key, "path": h.path, "direction": h.direction, "visits": h.visits,
                "mean_reward": h.mean_reward(), "ucb": if ucb.is_finite() { json!(ucb) } else { Value::Null },
                "actionability": a, "status": h.status, "best_delta": h.best_delta,
                "evidence_for": h.evidence_for, "evidence_against": h.evidence_against, "blocked": h.blocked,
            })
        })
        .collect();
    rows.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()).then(a["key"].as_str().cmp(&b["key"].as_str())));
    if args.json {
        common::print_json(&json!({"total_visits": total, "hypotheses": rows}));
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        println!("no hypotheses yet (run `emend evolve`)");
        return Ok(exit::OK);
    }
    println!(
        "{:<58} {:>6} {:>8} {:>8} {:>10} {:>9}  evidence",
        "hypothesis", "visits", "reward", "ucb", "status", "best"
    );
    let mut last_path = String::new();
    for r in &rows {
        let path = r["path"].as_str().unwrap_or("");
        if path != last_path {
            println!("{path}");
            last_path = path.to_string();
        }
        println!(
            "  {:<56} {:>6} {:>8.3} {:>8} {:>10} {:>9}  +{} -{}{}",
            format!("::{}", r["direction"].as_str().unwrap_or("")),
            r["visits"],
            r["mean_reward"].as_f64().unwrap_or(0.0),
            r["ucb"].as_f64().map_or("inf".to_string(), |u| format!("{u:.3}")),
            r["status"].as_str().unwrap_or(""),
            r["best_delta"].as_f64().map_or("-".to_string(), |d| format!("{d:+.4}")),
            r["evidence_for"],
            r["evidence_against"],
            if r["blocked"].as_u64().unwrap_or(0) > 0 { format!(" blocked x{}", r["blocked"]) } else { String::new() }
        );
    }
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Show only the last N entries.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print `{"entries": [...]}` on stdout: the rounds and reviews as listed, served accuracies from recorded evaluations.
    #[arg(long)]
    pub json: bool,
}

/// The text form of a [`LogView`].
pub fn render_log(view: &LogView) -> String {
    let mut out = String::new();
    for e in &view.entries {
        let _ = match e {
            LogEntry::Round { round, served_after, served_accuracy, served_cost, accepted, candidates, .. } => {
                let waiting = candidates.iter().find_map(|c| c.review.as_ref().and(c.version));
                let decision = match (accepted, waiting) {
                    (Some(id), _) => format!("accepted {id}"),
                    (None, Some(v)) => format!("v{v} passed every gate for approval, nothing served"),
                    (None, None) => "nothing accepted".into(),
                };
                let cost = served_cost.as_ref().map_or(String::new(), |c| format!(", {}", c.describe()));
                let _ =
                    writeln!(out, "round {round}: {decision} -> served v{served_after} ({served_accuracy:.4}{cost})");
                for c in candidates {
                    let what = c.change.as_deref().unwrap_or(&c.hypothesis);
                    // ACCEPTED only for a version the loop served; a version that
                    // waited for approval says where it stands now.
                    let mut gain = match &c.adjusted {
                        Some(a) => format!("{:+.4}; {}", c.delta.unwrap_or(0.0), a.describe()),
                        None => format!("{:+.4}", c.delta.unwrap_or(0.0)),
                    };
                    match (&c.claim, &c.cost) {
                        (Some(claim), _) => gain = claim.clone(),
                        (None, Some(cost)) => gain.push_str(&format!("; {}", emend_core::cost::describe_change(cost))),
                        (None, None) => {}
                    }
                    let verdict = match (c.rejected_by, &c.review, c.version) {
                        (None, Some(review), Some(v)) => format!("{} as v{v} ({gain})", review.to_uppercase()),
                        (None, ..) => format!("ACCEPTED ({gain})"),
                        (Some(by), ..) => format!("{} by {by}: {}", c.outcome, c.reason),
                    };
                    let _ = writeln!(out, "  {} {what}: {verdict}", c.id);
                    if let Some(kept) = emend_report::views::kept_summary(&c.credits) {
                        let _ = writeln!(out, "    {kept}");
                    }
                    if let Some(cr) = &c.critic {
                        let cost = cr.cost_line().map_or(String::new(), |l| format!("; read {l}"));
                        let _ = writeln!(out, "    critic: {} ({}){cost}", cr.label.as_str(), cr.reason);
                    }
                    if let Some(p) = &c.prediction {
                        let _ = writeln!(out, "    {}", p.heading());
                        for v in &p.verdicts {
                            let _ = writeln!(out, "      {}", v.line());
                        }
                    }
                }
                Ok(())
            }
            LogEntry::Moved { kind, to, reason, .. } if kind == "init" => {
                writeln!(out, "init: served v{to} ({reason})")
            }
            LogEntry::Moved { kind, from, to, reason, who, at, .. } => writeln!(
                out,
                "{}: v{} -> v{to} by {who} at {at}: {reason}",
                kind.replace('_', " "),
                from.map_or("?".into(), |v| v.to_string()),
            ),
            LogEntry::Escalated { class, round, reason, .. } => {
                writeln!(out, "escalated {class} in round {round}: {reason}")
            }
            LogEntry::HandEdit { version, reason, .. } => writeln!(out, "hand edit journaled as v{version}: {reason}"),
            LogEntry::Serving { text, .. } => writeln!(out, "{text}"),
        };
    }
    out
}

pub fn log(args: &LogArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let mut view = LogView::build(&log).map_err(common::store_failure)?;
    if let Some(n) = args.limit {
        view.keep_last(n);
    }
    if args.json {
        common::print_json(&serde_json::to_value(&view).expect("views serialize"));
    } else {
        print!("{}", emend_core::sanitize::escape_controls(&render_log(&view)));
    }
    Ok(exit::OK)
}

#[derive(Debug, clap::Subcommand)]
pub enum JournalCommand {
    /// Check the hash chain and rebuild every projection from the events (exit 1 on any problem).
    Verify(VerifyArgs),
    /// Print the head of the chain (seq and hash), to store elsewhere and check later with
    /// `emend journal verify --expect-head HASH`.
    Head(JsonArg),
    /// Write events as JSONL for audit and other tools.
    Export(ExportArgs),
    /// Rebuild the read view (events.log) from the store when it differs, journaling that
    /// it did and where the view first differed (exit 0; nothing to do when it matches).
    Repair(JsonArg),
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Also require the chain to contain an event with this hash (a head printed earlier by
    /// `emend journal head`): a rewritten chain then fails even if it is consistent.
    #[arg(long, value_name = "HASH")]
    pub expect_head: Option<String>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// First event sequence number to export.
    #[arg(long, default_value_t = 1)]
    pub from: u64,
    /// Output file (default: stdout). Written atomically.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Whether an event with hash `expected` is in the chain (None when no hash was given).
fn expected_in(log: &dyn EventLog, expected: Option<&str>) -> Result<Option<bool>, Failure> {
    let Some(expected) = expected else { return Ok(None) };
    let expected = expected.trim().to_ascii_lowercase();
    if expected.len() != 64 || !expected.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Failure::bad_input(anyhow::anyhow!("--expect-head {expected}: expected 64 hex digits")));
    }
    Ok(Some(log.read_from(1).map_err(common::journal_failure)?.iter().any(|r| r.hash == expected)))
}

/// What `journal verify` found: its report, the head, whether the expected head is in the
/// chain, what it checked, and why the view could not be compared with the store (`None`:
/// it was compared).
type Verified = (emend_journal::VerifyReport, emend_journal::Head, Option<bool>, &'static str, Option<String>);

/// The view compared with the store when nobody writes to it. While a writer holds the
/// store (or the directory is read-only) the view is checked on its own, and verification
/// fails: the view could not be compared with the store.
fn verified(project: &emend_core::config::Project, expect_head: Option<&str>) -> Result<Verified, Failure> {
    match emend_journal::open_reader(project.journal_dir(), emend_core::events::EngineProjector) {
        Ok(log) => {
            let report = log.verify().map_err(common::journal_failure)?;
            let found = expected_in(&log, expect_head)?;
            Ok((report, log.head(), found, "the store and the read view", None))
        }
        Err(e) if matches!(e.kind(), emend_journal::ErrorKind::Locked { .. } | emend_journal::ErrorKind::Io { .. }) => {
            let log = common::reader(project)?;
            let report = log.verify().map_err(common::journal_failure)?;
            let found = expected_in(&log, expect_head)?;
            Ok((report, log.head(), found, "the read view alone", Some(e.kind().to_string())))
        }
        Err(e) => Err(common::journal_failure(e)),
    }
}

pub fn journal(cmd: &JournalCommand, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    match cmd {
        JournalCommand::Verify(args) => {
            let dir = project.journal_dir();
            let expect_head = args.expect_head.as_deref().or(project.config.journal.expect_head.as_deref());
            let (report, head, expected_found, what, uncompared) = verified(&project, expect_head)?;
            let anchor_ok = expected_found.unwrap_or(true);
            // A chain that verifies can still hold a serving state the next writer fails on.
            let serving = match report.is_ok() {
                true => {
                    emend_core::served::serving_problems(&common::reader(&project)?).map_err(common::served_failure)?
                }
                false => vec![],
            };
            let ok = report.is_ok() && anchor_ok && uncompared.is_none() && serving.is_empty();
            if args.json {
                common::print_json(&json!({
                    "ok": ok,
                    "head": head.seq,
                    "head_hash": head.hash,
                    "events_checked": report.events_checked,
                    "first_broken_seq": report.chain_break.as_ref().map(|b| b.seq),
                    "view_first_differing_seq": match &report.view {
                        emend_journal::ViewCheck::Differs(d) => Some(d.seq),
                        _ => None,
                    },
                    "expected_head_found": expected_found,
                    "checked": what,
                    "compared_with_store": uncompared.is_none(),
                    "serving_problems": serving,
                    "report": report.to_string(),
                }));
            } else {
                if let Some(why) = &uncompared {
                    print!(
                        "journal {} NOT fully verified: the read view could not be compared with the store ({why}); \
                         its frames and chain were checked on their own:\n{report}run `emend journal verify` again \
                         when no writer holds the journal, on a writable project\n",
                        dir.display()
                    );
                } else if !serving.is_empty() {
                    print!("journal {} FAILED verification, checked {what}:\n{report}", dir.display());
                    for problem in &serving {
                        println!("serving state: {}", emend_core::sanitize::escape_controls(problem));
                    }
                } else if report.is_ok() {
                    print!("ok, checked {what}\n{report}");
                } else {
                    print!("journal {} FAILED verification, checked {what}:\n{report}", dir.display());
                }
                if let (Some(hash), Some(found)) = (expect_head, expected_found) {
                    if found {
                        println!("expected head {hash}: present in the chain");
                    } else {
                        println!(
                            "expected head {hash}: NOT in the chain (the chain was rewritten or cut since that head was recorded)"
                        );
                    }
                }
            }
            Ok(if ok { exit::OK } else { exit::FAILED })
        }
        JournalCommand::Repair(args) => super::journal_repair::repair(&project, args.json),
        JournalCommand::Head(args) => {
            let log = common::reader(&project)?;
            let head = log.head();
            if args.json {
                common::print_json(&json!({"seq": head.seq, "hash": head.hash}));
            } else {
                println!("{} {}", head.seq, head.hash);
            }
            Ok(exit::OK)
        }
        JournalCommand::Export(args) => {
            if let Some(path) = &args.out {
                common::check_output_dir("--out", path)?;
            }
            let log = common::reader(&project)?;
            match &args.out {
                None => {
                    let stdout = std::io::stdout();
                    let mut lock = stdout.lock();
                    export_with_times(&log, args.from, &mut lock)?;
                    lock.flush().map_err(Failure::failed)?;
                }
                Some(path) => {
                    let mut buf = Vec::new();
                    let n = export_with_times(&log, args.from, &mut buf)?;
                    common::write_output("--out", path, &buf)?;
                    eprintln!("exported {n} events to {}", path.display());
                }
            }
            Ok(exit::OK)
        }
    }
}

/// Where an exported event's `at` comes from (the journal itself keeps no clock:
/// only `served_changed` and `round_finished` events carry a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtSource {
    /// The event's own `at`.
    Event,
    /// The `at` of the next event that has one: this event was committed in the
    /// same batch or before it, so no later than that time.
    Next,
    /// The `at` of the last event before it that has one (nothing later carries a
    /// time): this event was committed no earlier than that.
    Previous,
}

impl AtSource {
    fn as_str(self) -> &'static str {
        match self {
            AtSource::Event => "event",
            AtSource::Next => "next",
            AtSource::Previous => "previous",
        }
    }
}

fn own_time(r: &emend_journal::EventRecord) -> Option<&str> {
    r.payload.get("at").and_then(Value::as_str)
}

/// One exported line: the journal record (as `emend_journal::export_jsonl` writes it,
/// so its hash still checks) followed by `at` and `at_source`.
fn export_line(r: &emend_journal::EventRecord, at: Option<&str>, source: AtSource) -> String {
    let mut line = r.to_json_line();
    debug_assert!(line.ends_with('}'));
    line.pop();
    line.push_str(&format!(
        ",\"at\":{},\"at_source\":\"{}\"}}\n",
        serde_json::to_string(&at).expect("JSON renders"),
        source.as_str()
    ));
    line
}

/// `journal export`: every record from `from` on with a time. Records are read a
/// page at a time; only the records waiting for the next timed event are held.
fn export_with_times(log: &dyn EventLog, from: u64, out: &mut dyn Write) -> Result<u64, Failure> {
    const PAGE: usize = 256;
    let write = |out: &mut dyn Write, line: String| {
        out.write_all(line.as_bytes()).map_err(|e| Failure::failed(anyhow::anyhow!("writing the export: {e}")))
    };
    let mut waiting: Vec<emend_journal::EventRecord> = Vec::new();
    let mut previous: Option<String> = None;
    let mut next = from.max(1);
    let mut written = 0u64;
    loop {
        let page = log.read_range(next, PAGE).map_err(common::journal_failure)?;
        for r in &page {
            match own_time(r) {
                Some(at) => {
                    for w in waiting.drain(..) {
                        write(out, export_line(&w, Some(at), AtSource::Next))?;
                        written += 1;
                    }
                    write(out, export_line(r, Some(at), AtSource::Event))?;
                    written += 1;
                    previous = Some(at.to_string());
                }
                None => waiting.push(r.clone()),
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => next = last.seq + 1,
            _ => break,
        }
    }
    if !waiting.is_empty() {
        if previous.is_none() {
            previous = last_time_before(log, from.max(1))?;
        }
        for w in waiting.drain(..) {
            write(out, export_line(&w, previous.as_deref(), AtSource::Previous))?;
            written += 1;
        }
    }
    Ok(written)
}

/// The `at` of the last timed event before seq `before`, read backwards a page at a time.
fn last_time_before(log: &dyn EventLog, before: u64) -> Result<Option<String>, Failure> {
    const PAGE: u64 = 256;
    let mut end = before; // exclusive
    while end > 1 {
        let start = end.saturating_sub(PAGE).max(1);
        let page = log.read_range(start, (end - start) as usize).map_err(common::journal_failure)?;
        if let Some(at) = page.iter().rev().find_map(own_time) {
            return Ok(Some(at.to_string()));
        }
        end = start;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_journal::{MemoryJournal, NewEvent, ProjectError, ProjectionState, Projector};

    struct Nothing;
    impl Projector for Nothing {
        fn trees(&self) -> Vec<String> {
            vec![]
        }
        fn project(&self, _: &mut dyn ProjectionState, _: &emend_journal::EventRecord) -> Result<(), ProjectError> {
            Ok(())
        }
    }

    fn exported(log: &dyn EventLog, from: u64) -> Vec<(u64, Option<String>, String)> {
        let mut out = Vec::new();
        export_with_times(log, from, &mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let record: emend_journal::EventRecord = serde_json::from_value(json!({
                    "seq": v["seq"], "kind": v["kind"], "payload": v["payload"],
                    "prev_hash": v["prev_hash"], "hash": v["hash"]
                }))
                .unwrap();
                assert_eq!(record.compute_hash(), record.hash, "the exported record is the stored one");
                (
                    v["seq"].as_u64().unwrap(),
                    v["at"].as_str().map(String::from),
                    v["at_source"].as_str().unwrap().into(),
                )
            })
            .collect()
    }

    #[test]
    fn export_times_every_event_from_its_own_the_next_or_the_previous_time() {
        let mut j = MemoryJournal::new(Nothing);
        let e = |at: Option<&str>| match at {
            Some(at) => NewEvent::new("timed", json!({"at": at})),
            None => NewEvent::new("untimed", json!({"n": 1})),
        };
        j.append(vec![e(None), e(Some("2026-01-01T00:00:01Z"))]).unwrap();
        j.append(vec![e(None)]).unwrap();
        j.append(vec![e(None), e(Some("2026-01-01T00:00:03Z"))]).unwrap();
        j.append(vec![e(None), e(None)]).unwrap();
        let t1 = Some("2026-01-01T00:00:01Z".to_string());
        let t3 = Some("2026-01-01T00:00:03Z".to_string());
        let all = exported(&j, 1);
        assert_eq!(
            all,
            vec![
                (1, t1.clone(), "next".into()),
                (2, t1.clone(), "event".into()),
                (3, t3.clone(), "next".into()),
                (4, t3.clone(), "next".into()),
                (5, t3.clone(), "event".into()),
                (6, t3.clone(), "previous".into()),
                (7, t3.clone(), "previous".into()),
            ]
        );
        // From the middle: the same times, the previous one found before `from`.
        assert_eq!(exported(&j, 6), all[5..].to_vec());
        assert_eq!(exported(&j, 3), all[2..].to_vec());
    }
}
