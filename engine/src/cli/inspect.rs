//! Read-only views of a project: `status`, `diagnose`, `hypotheses`,
//! `escalations`, `log`, and `journal verify|export`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use engine::events::{Event, T_LAYER_A};
use engine::evolve;
use engine::exit;
use engine::planner::{self, PlannerSettings};
use engine::store::Store;
use journal::EventLog;
use serde_json::{Value, json};

use super::common;
use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct JsonArg {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Accuracy of the most recent evaluation of `hash` (any harness), with its key.
fn latest_accuracy(log: &dyn EventLog, hash: &str) -> Result<Option<(f64, String)>, Failure> {
    let latest = Store::new(log).latest_evaluation(hash).map_err(common::store_failure)?;
    Ok(latest.map(|(k, s)| (s.accuracy, k)))
}

/// Model usage per role summed over the journal's rounds.
fn model_usage(rounds: &[Value]) -> engine::llm::Usage {
    let mut total = engine::llm::Usage::new();
    for r in rounds {
        let Some(Ok(usage)) = r.get("llm").map(|v| serde_json::from_value::<engine::llm::Usage>(v.clone())) else {
            continue;
        };
        for (role, u) in usage {
            total.entry(role).or_default().add(&u);
        }
    }
    total
}

pub fn status(args: &JsonArg, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let store = Store::new(&log);
    let served = store
        .served()
        .map_err(common::store_failure)?
        .ok_or_else(|| Failure::failed(anyhow::anyhow!("the journal has no served strategy")))?;
    let best = store.best().map_err(common::store_failure)?;
    let rounds = store.rounds().map_err(common::store_failure)?;
    let escalations = store.escalations().map_err(common::store_failure)?;
    let served_acc = latest_accuracy(&log, &served.hash)?.map(|a| a.0);
    let quarantined = store.quarantined().map_err(common::store_failure)?;
    let reviews = store.reviews().map_err(common::store_failure)?;
    let pending: Vec<u64> = reviews.iter().filter(|(_, r)| r["status"] == "pending").map(|(v, _)| *v).collect();
    let hook_failed = store.last_hook_failure().map_err(common::store_failure)?;
    let schema = common::schema(&project)?;
    let file = evolve::served_file_state(&project, &schema, &log).map_err(common::evolve_failure)?;
    let file_state = match &file {
        evolve::FileState::Consistent => "consistent".to_string(),
        evolve::FileState::Missing => "missing (evolve rewrites it)".to_string(),
        evolve::FileState::Stale { holds } => format!("holds v{holds} (evolve rewrites it)"),
        evolve::FileState::HandEdited { file_hash } => format!("edited by hand (hash {file_hash:.12})"),
        evolve::FileState::Unreadable { reason, .. } => format!("unreadable: {reason}"),
    };
    let last = rounds.last().cloned();
    let llm_total = model_usage(&rounds);
    let totals = rounds.iter().fold(BTreeMap::<String, u64>::new(), |mut m, r| {
        if let Some(map) = r["rejected_by"].as_object() {
            for (k, v) in map {
                *m.entry(k.clone()).or_default() += v.as_u64().unwrap_or(0);
            }
        }
        m
    });
    // What the next confirm test can see, replayed from the journal.
    let cfg = &project.config;
    let confirm_state = engine::confirm::ConfirmState::replay(
        &cfg.gates,
        cfg.loop_.seed,
        &store.candidates().map_err(common::store_failure)?,
    );
    let confirm_size = rounds.iter().rev().find_map(|r| r["split"]["confirm"].as_u64());
    let next_alpha = confirm_state.lord.next_alpha();
    let wealth = confirm_state.lord.wealth();
    let holdout_left = confirm_state.holdout.budget_left();
    let mde = confirm_size.and_then(|n| confirm_state.next_mde(n));
    let discordance = confirm_state.discordance();
    let holdout_advice = if holdout_left == 0 {
        "spent: no more numbers flow back from the confirm part; start a fresh one (change harness.split.seed or add questions)"
    } else {
        "when it runs out, start a fresh confirm part (change harness.split.seed or add questions)"
    };
    if args.json {
        common::print_json(&json!({
            "confirm": {
                "questions": confirm_size,
                "tests": confirm_state.lord.tests,
                "next_alpha": next_alpha,
                "lord_wealth": wealth,
                "holdout_budget_left": holdout_left,
                "holdout_budget": confirm_state.holdout.config.budget,
                "holdout_advice": holdout_advice,
                "discordance_rate": discordance,
                "mde_80": mde,
            },
            "served_version": served.version,
            "served_hash": served.hash,
            "served_accuracy": served_acc,
            "served_pinned": served.pinned,
            "served_file": file_state,
            "best_version": best.as_ref().map(|b| b.version),
            "best_hash": best.as_ref().map(|b| b.hash.clone()),
            "best_accuracy": best.as_ref().map(|b| b.accuracy),
            "rounds": rounds.len(),
            "last_round": last,
            "rejected_by": totals,
            "escalations": escalations,
            "approval": cfg.serve.approval.as_str(),
            "pending_versions": pending,
            "quarantined": quarantined.values().collect::<Vec<_>>(),
            "reviews": reviews.values().collect::<Vec<_>>(),
            "last_hook_failure": hook_failed,
            "llm": {
                "last_round": last.as_ref().map(|r| r.get("llm").cloned().unwrap_or_else(|| json!({}))),
                "total": llm_total,
            },
        }));
        return Ok(exit::OK);
    }
    let acc = |a: Option<f64>| a.map_or("not evaluated".to_string(), |a| format!("{a:.4}"));
    println!(
        "served: v{} (hash {:.12}) accuracy {}{}",
        served.version,
        served.hash,
        acc(served_acc),
        if served.pinned { format!("  [pinned by {}: {}]", served.cause, served.reason) } else { String::new() }
    );
    match &best {
        Some(b) => println!("best-ever: v{} (hash {:.12}) accuracy {:.4}", b.version, b.hash, b.accuracy),
        None => println!("best-ever: none yet (no round has run)"),
    }
    println!("served file: {} ({file_state})", project.strategy_path().display());
    match &last {
        Some(r) => println!(
            "rounds: {} (last: round {}, {}, at {})",
            rounds.len(),
            r["round"],
            match r["accepted"].as_str() {
                Some(c) => format!("accepted {c}"),
                None => "nothing accepted".to_string(),
            },
            r["at"].as_str().unwrap_or("?")
        ),
        None => println!("rounds: 0"),
    }
    for (role, u) in &llm_total {
        println!(
            "model {role}: {} requests, {} cache hits, {} prompt + {} completion tokens, {} errors (all rounds)",
            u.requests, u.cache_hits, u.prompt_tokens, u.completion_tokens, u.errors
        );
    }
    match confirm_size {
        Some(n) => println!(
            "confirm part: {n} questions; next test at alpha {next_alpha:.3e} (LORD++ test {}), wealth {wealth:.3e}",
            confirm_state.lord.tests + 1
        ),
        None => println!(
            "confirm part: not split yet (no round has run); next test at alpha {next_alpha:.3e}, wealth {wealth:.3e}"
        ),
    }
    match (mde, discordance) {
        (Some(m), Some(q)) => println!(
            "the next confirm test sees a gain of {:.2} pp with 80% power (discordance rate {:.1}% so far)",
            m * 100.0,
            q * 100.0
        ),
        (None, Some(q)) => println!(
            "the next confirm test cannot see any gain up to the discordance rate ({:.1}%) with 80% power at its alpha",
            q * 100.0
        ),
        _ => println!("minimum detectable effect: unknown until a confirm test has observed a discordance rate"),
    }
    println!("holdout budget: {holdout_left} of {} left; {holdout_advice}", confirm_state.holdout.config.budget);
    let open = escalations.iter().filter(|e| e["status"].as_str() != Some("resolved")).count();
    if escalations.is_empty() {
        println!("escalations: none");
    } else {
        println!("escalations: {open} open, {} resolved (see `emend escalations`)", escalations.len() - open);
    }
    let names = |vs: &mut dyn Iterator<Item = u64>| vs.map(|v| format!("v{v}")).collect::<Vec<_>>().join(", ");
    println!("approval: {}", cfg.serve.approval.as_str());
    if !pending.is_empty() {
        println!("pending approval: {} (see `emend pending`)", names(&mut pending.iter().copied()));
    }
    if !quarantined.is_empty() {
        println!("quarantined: {}", names(&mut quarantined.keys().copied()));
    }
    for status in ["approved", "rejected"] {
        let vs: Vec<u64> = reviews.iter().filter(|(_, r)| r["status"] == status).map(|(v, _)| *v).collect();
        if !vs.is_empty() {
            println!("{status}: {}", names(&mut vs.into_iter()));
        }
    }
    if let Some(h) = hook_failed {
        println!(
            "last hook failure: hooks.{} for v{} ({}) at {}: {}",
            h["hook"].as_str().unwrap_or("?"),
            h["version"],
            h["change"].as_str().unwrap_or("?"),
            h["at"].as_str().unwrap_or("?"),
            h["error"].as_str().unwrap_or("?")
        );
    }
    Ok(exit::OK)
}

pub fn escalations(args: &JsonArg, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let list = Store::new(&log).escalations().map_err(common::store_failure)?;
    if args.json {
        common::print_json(&json!({ "escalations": list }));
    } else if list.is_empty() {
        println!("no escalations");
    } else {
        for e in &list {
            println!(
                "{} (round {}): blocked 3 times as out of scope [{}]",
                e["class"].as_str().unwrap_or("?"),
                e["round"],
                e["status"].as_str().unwrap_or("open")
            );
            if let Some(r) = e.get("review") {
                println!(
                    "  reviewed by {} at {}: {}",
                    r["who"].as_str().unwrap_or("?"),
                    r["at"].as_str().unwrap_or("?"),
                    r["reason"].as_str().unwrap_or("")
                );
            }
            for r in e["reasons"].as_array().into_iter().flatten() {
                println!("  {}", r.as_str().unwrap_or(""));
            }
        }
        println!(
            "these need a change outside the strategy (schema bounds, model roles, the harness); emend no longer retries them"
        );
    }
    Ok(exit::OK)
}

pub fn diagnose(args: &JsonArg, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    // The served strategy as the journal has it, else the file.
    let artifact = match journal::open_view(project.journal_dir(), engine::events::EngineProjector) {
        Ok(log) => {
            let store = Store::new(&log);
            match store.served().map_err(common::store_failure)? {
                Some(s) => {
                    let doc = store.document(&s.hash).map_err(common::store_failure)?.unwrap_or(Value::Null);
                    let mut a = evolve::artifact_of(&schema, &s.hash, doc).map_err(common::evolve_failure)?;
                    a.version = Some(s.version);
                    a
                }
                None => engine::artifact::load_file(&project.strategy_path(), &schema).map_err(Failure::bad_input)?,
            }
        }
        Err(e) if matches!(e.kind(), journal::ErrorKind::NotFound { .. }) => {
            engine::artifact::load_file(&project.strategy_path(), &schema).map_err(Failure::bad_input)?
        }
        Err(e) => return Err(common::journal_failure(e)),
    };
    let eval = backend.evaluate(&artifact, None).map_err(Failure::failed)?;
    let d = engine::layer_a::diagnose(&engine::records::question_results(&eval), 3);
    let texts: BTreeMap<&str, &engine::outcome::OutcomeRecord> =
        eval.outcomes.iter().map(|o| (o.id.as_str(), o)).collect();
    if args.json {
        let examples: BTreeMap<&String, Vec<Value>> = d
            .examples
            .iter()
            .map(|(l, ids)| {
                (l, ids.iter().map(|id| {
                    let o = texts[id.as_str()];
                    json!({"id": id, "category": o.category, "question": o.question, "gold_answer": o.gold_answer, "evidence": o.evidence})
                }).collect())
            })
            .collect();
        common::print_json(&json!({
            "strategy_hash": artifact.hash,
            "version": artifact.version,
            "n": d.n,
            "accuracy": eval.accuracy(),
            "failures": d.failures,
            "counts": d.counts,
            "by_category": d.by_category,
            "examples": examples,
        }));
        return Ok(exit::OK);
    }
    println!(
        "strategy {}{:.12}: accuracy {:.4} ({} of {}), {} failures",
        artifact.version.map_or(String::new(), |v| format!("v{v} ")),
        artifact.hash,
        eval.accuracy(),
        eval.correct(),
        eval.n(),
        d.failures
    );
    let cats: Vec<&String> = d.by_category.keys().collect();
    print!("{:<20} {:>6}", "label", "total");
    for c in &cats {
        print!(" {:>12}", c);
    }
    println!();
    for label in engine::layer_a::Label::ALL {
        let total = d.count(label);
        if total == 0 {
            continue;
        }
        print!("{:<20} {:>6}", label.as_str(), total);
        for c in &cats {
            print!(" {:>12}", d.by_category[*c].get(label.as_str()).copied().unwrap_or(0));
        }
        println!();
    }
    for (label, ids) in &d.examples {
        println!("\n{label}, e.g.:");
        for id in ids {
            let o = texts[id.as_str()];
            println!(
                "  {id} [{}] {}  (gold: {}; evidence {})",
                o.category,
                o.question.as_deref().unwrap_or("?"),
                o.gold_answer.as_ref().map_or("-".to_string(), |g| g.as_str().map_or(g.to_string(), str::to_string)),
                o.evidence.as_ref().map_or("-".to_string(), |e| e.join(", "))
            );
        }
    }
    Ok(exit::OK)
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
    let diagnosis: engine::layer_a::Diagnosis = match &served {
        Some(s) => log
            .scan(T_LAYER_A, &format!("{}/", s.hash))
            .map_err(common::journal_failure)?
            .pop()
            .and_then(|(_, v)| serde_json::from_value(v).ok())
            .unwrap_or_default(),
        None => Default::default(),
    };
    let plans = planner::plan(
        &schema,
        &diagnosis,
        &tree,
        &effects,
        PlannerSettings { ucb_c: project.config.loop_.ucb_c, ..Default::default() },
    );
    let by_key: BTreeMap<&str, &planner::Plan> = plans.iter().map(|p| (p.key.as_str(), p)).collect();
    let total: u32 = tree.values().map(|h| h.visits).sum();
    let mut rows: Vec<Value> = tree
        .values()
        .map(|h| {
            let a = by_key.get(h.key.as_str()).map_or(0.0, |p| p.actionability);
            let ucb = h.ucb(total, a, project.config.loop_.ucb_c);
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
    #[arg(long)]
    pub json: bool,
}

/// The readable history: rounds with their decisions and rejections, and every served-pointer move.
pub fn log_entries(log: &dyn EventLog) -> Result<Vec<Value>, Failure> {
    let mut entries = Vec::new();
    let mut pending: Vec<Value> = Vec::new();
    for record in log.read_from(1).map_err(common::journal_failure)? {
        let event = Event::from_record(&record).map_err(|e| Failure::failed(anyhow::anyhow!(e)))?;
        match event {
            Event::CandidateJudged(c) => pending.push(json!({
                "id": c.id, "hypothesis": c.hypothesis,
                "change": c.change.as_ref().map(|ch| format!("{} {} -> {}", ch.path, ch.from, ch.to)),
                "outcome": c.outcome, "rejected_by": c.rejected_by, "reason": c.reason, "delta": c.delta,
            })),
            Event::RoundFinished(r) => {
                entries.push(json!({
                    "seq": record.seq, "kind": "round", "round": r.round, "at": r.at,
                    "served_before": r.served_version_before, "served_after": r.served_version_after,
                    "served_accuracy": r.served_accuracy, "accepted": r.accepted,
                    "candidates": std::mem::take(&mut pending),
                }));
            }
            Event::ServedChanged { from, to, cause, reason, who, at, .. } if cause != "accept" => {
                entries.push(json!({"seq": record.seq, "kind": cause, "from": from, "to": to, "reason": reason, "who": who, "at": at}));
            }
            Event::StrategyVersioned { version, origin, note, .. } if origin == "hand_edit" => {
                entries.push(json!({"seq": record.seq, "kind": "hand_edit", "version": version, "reason": note}));
            }
            Event::Escalated { class, round, reasons } => {
                entries.push(json!({"seq": record.seq, "kind": "escalated", "class": class, "round": round, "reason": reasons.join("; ")}));
            }
            Event::StrategyVersioned { version, parent, round, .. } if origin_is(&record, "pending") => {
                let text = format!(
                    "pending: v{version} (child of v{}, round {}) passed every gate and waits for approval",
                    parent.unwrap_or(0),
                    round.unwrap_or(0)
                );
                entries.push(json!({"seq": record.seq, "kind": "pending", "version": version, "text": text}));
            }
            Event::Quarantined { version, cause, reason, who, at } => {
                let text = format!("quarantined v{version} ({cause}) by {who} at {at}: {reason}");
                entries.push(json!({"seq": record.seq, "kind": "quarantined", "version": version, "text": text}));
            }
            Event::Unquarantined { version, reason, who, at } => {
                let text = format!("unquarantined v{version} by {who} at {at}: {reason}");
                entries.push(json!({"seq": record.seq, "kind": "unquarantined", "version": version, "text": text}));
            }
            Event::PendingReviewed { version, approved, reason, who, at } => {
                let verdict = if approved { "approved" } else { "rejected" };
                let text = format!("{verdict} v{version} by {who} at {at}: {reason}");
                entries.push(json!({"seq": record.seq, "kind": verdict, "version": version, "text": text}));
            }
            Event::EscalationReviewed { class, resolved, reason, who, at } => {
                let verdict = if resolved { "resolved" } else { "reopened" };
                let text = format!("escalation {class} {verdict} by {who} at {at}: {reason}");
                entries.push(
                    json!({"seq": record.seq, "kind": format!("escalation_{verdict}"), "class": class, "text": text}),
                );
            }
            Event::HookFailed { hook, version, change, error, at } => {
                let text = format!("hooks.{hook} failed for v{version} ({change}) at {at}: {error}");
                entries.push(json!({"seq": record.seq, "kind": "hook_failed", "version": version, "text": text}));
            }
            _ => {}
        }
    }
    Ok(entries)
}

/// Whether a `strategy_versioned` record has this origin.
fn origin_is(record: &journal::EventRecord, origin: &str) -> bool {
    record.payload.get("origin").and_then(Value::as_str) == Some(origin)
}

pub fn render_log(entries: &[Value]) -> String {
    let mut out = String::new();
    for e in entries {
        if let Some(text) = e["text"].as_str() {
            out.push_str(text);
            out.push('\n');
            continue;
        }
        match e["kind"].as_str().unwrap_or("") {
            "round" => {
                let accepted = e["accepted"].as_str();
                out.push_str(&format!(
                    "round {}: {} -> served v{} ({:.4})\n",
                    e["round"],
                    match accepted {
                        Some(id) => format!("accepted {id}"),
                        None => "nothing accepted".into(),
                    },
                    e["served_after"],
                    e["served_accuracy"].as_f64().unwrap_or(0.0)
                ));
                for c in e["candidates"].as_array().into_iter().flatten() {
                    let what = c["change"].as_str().unwrap_or_else(|| c["hypothesis"].as_str().unwrap_or(""));
                    let verdict = match c["rejected_by"].as_str() {
                        None => format!("ACCEPTED ({:+.4})", c["delta"].as_f64().unwrap_or(0.0)),
                        Some(by) => format!(
                            "{} by {by}: {}",
                            c["outcome"].as_str().unwrap_or("rejected"),
                            c["reason"].as_str().unwrap_or("")
                        ),
                    };
                    out.push_str(&format!("  {} {what}: {verdict}\n", c["id"].as_str().unwrap_or("")));
                }
            }
            "init" => out.push_str(&format!("init: served v{} ({})\n", e["to"], e["reason"].as_str().unwrap_or(""))),
            "escalated" => out.push_str(&format!(
                "escalated {} in round {}: {}\n",
                e["class"].as_str().unwrap_or(""),
                e["round"],
                e["reason"].as_str().unwrap_or("")
            )),
            "hand_edit" => out.push_str(&format!(
                "hand edit journaled as v{}: {}\n",
                e["version"],
                e["reason"].as_str().unwrap_or("")
            )),
            kind => out.push_str(&format!(
                "{}: v{} -> v{} by {} at {}: {}\n",
                kind.replace('_', " "),
                e["from"].as_u64().map_or("?".into(), |v| v.to_string()),
                e["to"],
                e["who"].as_str().unwrap_or("?"),
                e["at"].as_str().unwrap_or("?"),
                e["reason"].as_str().unwrap_or("")
            )),
        }
    }
    out
}

pub fn log(args: &LogArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let mut entries = log_entries(&log)?;
    if let Some(n) = args.limit {
        let skip = entries.len().saturating_sub(n);
        entries.drain(..skip);
    }
    if args.json {
        common::print_json(&json!({"entries": entries}));
    } else {
        print!("{}", render_log(&entries));
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

pub fn journal(cmd: &JournalCommand, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    match cmd {
        JournalCommand::Verify(args) => {
            // The store itself when nobody writes to it; the published view while a writer
            // does (or when the directory is read-only).
            let dir = project.journal_dir();
            let (report, head, expected_found, what) = match journal::open_reader(&dir, engine::events::EngineProjector)
            {
                Ok(log) => {
                    let report = log.verify().map_err(common::journal_failure)?;
                    let found = expected_in(&log, args.expect_head.as_deref())?;
                    (report, log.head(), found, "the store")
                }
                Err(e) if matches!(e.kind(), journal::ErrorKind::Locked { .. } | journal::ErrorKind::Io { .. }) => {
                    let log = common::reader(&project)?;
                    let report = log.verify().map_err(common::journal_failure)?;
                    let found = expected_in(&log, args.expect_head.as_deref())?;
                    (report, log.head(), found, "the published read view: a writer holds the store, or it is read-only")
                }
                Err(e) => return Err(common::journal_failure(e)),
            };
            let anchor_ok = expected_found.unwrap_or(true);
            let ok = report.is_ok() && anchor_ok;
            if args.json {
                common::print_json(&json!({
                    "ok": ok,
                    "head": head.seq,
                    "head_hash": head.hash,
                    "events_checked": report.events_checked,
                    "first_broken_seq": report.chain_break.as_ref().map(|b| b.seq),
                    "expected_head_found": expected_found,
                    "checked": what,
                    "report": report.to_string(),
                }));
            } else {
                if report.is_ok() {
                    print!("ok, checked {what}\n{report}");
                } else {
                    print!("journal {} FAILED verification, checked {what}:\n{report}", dir.display());
                }
                if let (Some(hash), Some(found)) = (&args.expect_head, expected_found) {
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
            let log = common::reader(&project)?;
            match &args.out {
                None => {
                    let stdout = std::io::stdout();
                    let mut lock = stdout.lock();
                    journal::export_jsonl(&log, args.from, &mut lock).map_err(common::journal_failure)?;
                    lock.flush().map_err(Failure::failed)?;
                }
                Some(path) => {
                    let mut buf = Vec::new();
                    let n = journal::export_jsonl(&log, args.from, &mut buf).map_err(common::journal_failure)?;
                    engine::artifact::write_atomic(path, &buf)
                        .map_err(|e| Failure::failed(anyhow::anyhow!("{}: {e}", path.display())))?;
                    eprintln!("exported {n} events to {}", path.display());
                }
            }
            Ok(exit::OK)
        }
    }
}
