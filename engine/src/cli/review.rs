//! For the people who review and operate: `show` (what changed and why),
//! `diff`, `rollback` and `restore-best`.
//!
//! A rollback is decided here and applied by `engine::evolve::apply_rollback`:
//! the journal record first, then the atomic rewrite of the served file. A
//! served file edited by hand is never overwritten silently: the command
//! refuses (exit 2) unless `--force`, which journals the edit first.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use engine::artifact;
use engine::candidate::Outcome;
use engine::config::Project;
use engine::events::CandidateRecord;
use engine::events::T_QUESTIONS;
use engine::evolve::{self, FileState};
use engine::exit;
use engine::report::{self, QuestionText};
use engine::schema::StrategySchema;
use engine::store::Store;
use journal::EventLog;
use serde_json::{Value, json};

use super::common;
use super::{CmdResult, Failure};

/// What a `served`, `best`, `vN` or candidate id names.
pub enum Target {
    Version { version: u64, hash: String, parent: Option<u64>, document: Value, origin: String, note: String },
    Candidate { record: Value },
}

fn parse_version(spec: &str) -> Option<u64> {
    spec.strip_prefix('v').and_then(|n| n.parse::<u64>().ok())
}

pub fn resolve(log: &dyn EventLog, spec: &str) -> Result<Target, Failure> {
    let store = Store::new(log);
    let version =
        match spec {
            "served" => Some(
                store
                    .served()
                    .map_err(common::store_failure)?
                    .map(|s| s.version)
                    .ok_or_else(|| Failure::failed(anyhow::anyhow!("the journal has no served strategy")))?,
            ),
            "best" => {
                Some(store.best().map_err(common::store_failure)?.map(|b| b.version).ok_or_else(|| {
                    Failure::bad_input(anyhow::anyhow!("no best-ever version yet (no round has run)"))
                })?)
            }
            s => parse_version(s),
        };
    if let Some(v) = version {
        let info = store.version(v).map_err(common::store_failure)?.ok_or_else(|| {
            Failure::bad_input(anyhow::anyhow!(
                "no version v{v} in the journal (it has v1..v{})",
                store.max_version().unwrap_or(0)
            ))
        })?;
        let document = store
            .document(&info.hash)
            .map_err(common::store_failure)?
            .ok_or_else(|| Failure::failed(anyhow::anyhow!("v{v} has no stored document")))?;
        return Ok(Target::Version {
            version: v,
            hash: info.hash,
            parent: info.parent,
            document,
            origin: info.origin,
            note: info.note,
        });
    }
    let candidates = store.candidates().map_err(common::store_failure)?;
    if let Some(record) = candidates.into_iter().find(|c| c.id == spec) {
        return Ok(Target::Candidate { record: serde_json::to_value(&record).expect("records serialize") });
    }
    Err(Failure::bad_input(anyhow::anyhow!("{spec}: not a version (served, best, vN) nor a candidate id (like r3c2)")))
}

/// `v2 (served, best)`: a version's name with the pointers that name it.
fn version_name(log: &dyn EventLog, version: u64) -> Result<String, Failure> {
    let store = Store::new(log);
    let mut tags = Vec::new();
    if store.served().map_err(common::store_failure)?.is_some_and(|s| s.version == version) {
        tags.push("served");
    }
    if store.best().map_err(common::store_failure)?.is_some_and(|b| b.version == version) {
        tags.push("best");
    }
    Ok(if tags.is_empty() { format!("v{version}") } else { format!("v{version} ({})", tags.join(", ")) })
}

/// Colour on a terminal only, and never with `--no-color` or `NO_COLOR` set.
fn use_color(no_color: bool) -> bool {
    !no_color && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// ANSI colours for a unified diff.
pub fn colorize(d: &str) -> String {
    let mut out = String::new();
    for l in d.lines() {
        let code = if l.starts_with("+++") || l.starts_with("---") {
            "1"
        } else if l.starts_with('+') {
            "32"
        } else if l.starts_with('-') {
            "31"
        } else if l.starts_with("@@") {
            "36"
        } else {
            ""
        };
        if code.is_empty() {
            out.push_str(l);
        } else {
            out.push_str(&format!("\x1b[{code}m{l}\x1b[0m"));
        }
        out.push('\n');
    }
    out
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// served, best, vN, or a candidate id (r3c2).
    pub target: String,
    /// Print the strategy artifact itself (as `emend` writes the served file).
    #[arg(long, conflicts_with = "json")]
    pub yaml: bool,
    /// Print everything as JSON.
    #[arg(long)]
    pub json: bool,
    /// Never colour (also off when stdout is not a terminal, or NO_COLOR is set).
    #[arg(long)]
    pub no_color: bool,
}

/// Which stage held a question's evidence under a strategy: its Layer A
/// label, `correct`, or `?` when no evaluation of that strategy is recorded.
fn stage_of(log: &dyn EventLog, qid: &str, hash: &str) -> String {
    match log.get(T_QUESTIONS, &format!("{qid}|{hash}")) {
        Ok(Some(v)) => match v["label"].as_str() {
            Some(l) => l.to_string(),
            None if v["correct"] == json!(true) => "correct".to_string(),
            None => "wrong".to_string(),
        },
        _ => "?".to_string(),
    }
}

fn question_json(id: &str, texts: &BTreeMap<String, QuestionText>) -> Value {
    let t = texts.get(id).cloned().unwrap_or_default();
    json!({"id": id, "category": t.category, "question": t.question, "gold_answer": t.gold, "evidence": t.evidence})
}

/// The Layer A diagnosis of the parent that motivated a candidate: all
/// labels, the motivating labels by category, and example questions.
fn layer_a_json(
    log: &dyn EventLog,
    parent_hash: &str,
    motivation: &Value,
    texts: &BTreeMap<String, QuestionText>,
) -> Result<Value, Failure> {
    // The latest recorded diagnosis of the parent (one per harness and dataset).
    let store = Store::new(log);
    let latest = store.latest_evaluation(parent_hash).map_err(common::store_failure)?;
    let Some(d) = latest.map(|(key, _)| store.diagnosis(&key)).transpose().map_err(common::store_failure)?.flatten()
    else {
        return Ok(Value::Null);
    };
    let d = serde_json::to_value(&d).expect("diagnoses serialize");
    let motivating: Vec<&String> = motivation.as_object().map(|m| m.keys().collect()).unwrap_or_default();
    let mut by_category = serde_json::Map::new();
    for (cat, labels) in d["by_category"].as_object().into_iter().flatten() {
        let counts: serde_json::Map<String, Value> = labels
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(l, _)| motivating.contains(l))
            .map(|(l, n)| (l.clone(), n.clone()))
            .collect();
        if !counts.is_empty() {
            by_category.insert(cat.clone(), Value::Object(counts));
        }
    }
    let mut examples = serde_json::Map::new();
    for label in &motivating {
        let list: Vec<Value> = d["examples"][label.as_str()]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .take(3)
            .map(|id| question_json(id, texts))
            .collect();
        examples.insert((*label).clone(), Value::Array(list));
    }
    Ok(json!({
        "n": d["n"], "failures": d["failures"], "counts": d["counts"],
        "motivating_by_category": by_category, "examples": examples,
    }))
}

/// The full "what changed and why" of a version or candidate, as JSON.
pub fn explain(project: &Project, log: &dyn EventLog, target: &Target) -> Result<Value, Failure> {
    let store = Store::new(log);
    let texts = report::question_texts(project);
    let best = store.best().map_err(common::store_failure)?;
    let accuracy_of = |hash: &str| -> Result<Option<f64>, Failure> {
        Ok(report::recorded_evaluation(log, hash, best.as_ref())
            .map_err(common::store_failure)?
            .map(|(_, s)| s.accuracy))
    };
    let (record, version_info) = match target {
        Target::Candidate { record } => (Some(record.clone()), None),
        Target::Version { version, hash, parent, origin, note, .. } => {
            let rec = store
                .candidates()
                .map_err(common::store_failure)?
                .into_iter()
                .find(|c| c.accepted_version == Some(*version))
                .map(|c| serde_json::to_value(&c).expect("records serialize"));
            let round = store.version(*version).map_err(common::store_failure)?.and_then(|i| i.round);
            (
                rec,
                Some(json!({
                    "version": version, "name": version_name(log, *version)?, "hash": hash, "parent": parent,
                    "origin": origin, "round": round, "note": note, "accuracy": accuracy_of(hash)?,
                })),
            )
        }
    };
    let (doc, parent_doc, name, parent_name) = match target {
        Target::Version { version, document, parent, .. } => {
            let pdoc = match parent {
                Some(p) => match resolve(log, &format!("v{p}"))? {
                    Target::Version { document, .. } => Some(document),
                    Target::Candidate { .. } => None,
                },
                None => None,
            };
            (document.clone(), pdoc, format!("v{version}"), parent.map(|p| format!("v{p}")))
        }
        Target::Candidate { record } => {
            let parent_hash = record["parent_hash"].as_str().unwrap_or("");
            let pdoc = store.document(parent_hash).map_err(common::store_failure)?;
            (
                record["document"].clone(),
                pdoc,
                record["id"].as_str().unwrap_or("candidate").to_string(),
                Some(format!("v{}", record["parent_version"])),
            )
        }
    };
    let diff = match (&parent_doc, &parent_name) {
        (Some(p), Some(pn)) if !doc.is_null() => Some(report::unified_diff(p, &doc, pn, &name)),
        _ => None,
    };
    let mut examples = json!({"improved": [], "regressed": [], "improved_total": 0, "regressed_total": 0});
    let mut layer_a = Value::Null;
    let mut hypothesis = Value::Null;
    if let Some(rec) = &record {
        let parent_hash = rec["parent_hash"].as_str().unwrap_or("");
        layer_a = layer_a_json(log, parent_hash, &rec["motivation"], &texts)?;
        if let Some(key) = rec["hypothesis"].as_str() {
            hypothesis = store.tree().map_err(common::store_failure)?.get(key).map_or(Value::Null, |h| {
                json!({"key": h.key, "status": h.status.as_str(), "visits": h.visits, "mean_reward": h.mean_reward(),
                       "best_delta": h.best_delta, "evidence_for": h.evidence_for, "evidence_against": h.evidence_against})
            });
        }
        if let (Some(full), Some(hash)) = (rec.get("full").filter(|f| f.is_object()), rec["hash"].as_str()) {
            for side in ["improved", "regressed"] {
                let list: Vec<Value> = full[format!("{side}_examples").as_str()]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .take(5)
                    .map(|qid| {
                        let mut q = question_json(qid, &texts);
                        q["before"] = json!(stage_of(log, qid, parent_hash));
                        q["after"] = json!(stage_of(log, qid, hash));
                        q
                    })
                    .collect();
                examples[side] = Value::Array(list);
                examples[format!("{side}_total")] = full[side].clone();
            }
        }
    }
    Ok(json!({
        "target": name,
        "version": version_info,
        "parent": parent_name,
        "diff": diff,
        "candidate": record,
        "layer_a": layer_a,
        "hypothesis_now": hypothesis,
        "examples": examples,
    }))
}

fn verdict_word(pass: bool, color: bool) -> &'static str {
    match (pass, color) {
        (true, false) => "pass",
        (false, false) => "FAIL",
        (true, true) => "\x1b[32mpass\x1b[0m",
        (false, true) => "\x1b[1;31mFAIL\x1b[0m",
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn s_(v: &Value) -> &str {
    v.as_str().unwrap_or("?")
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn render_question(out: &mut String, q: &Value, stages: bool) {
    out.push_str(&format!(
        "  {} [{}] {}\n    gold: {}  evidence: {}{}\n",
        s(&q["id"]),
        s(&q["category"]),
        s(&q["question"]),
        if s(&q["gold_answer"]).is_empty() { "-" } else { s(&q["gold_answer"]) },
        q["evidence"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
            .unwrap_or_default(),
        if stages { format!("  stage: {} -> {}", s(&q["before"]), s(&q["after"])) } else { String::new() }
    ));
}

/// The one-screen text form of [`explain`]. The candidate part reads the
/// typed gate record the view was built from.
pub fn render_show(v: &Value, color: bool) -> String {
    let mut out = String::new();
    let bold = |t: &str| if color { format!("\x1b[1m{t}\x1b[0m") } else { t.to_string() };
    let record: Option<CandidateRecord> = v["candidate"]
        .is_object()
        .then(|| serde_json::from_value(v["candidate"].clone()).expect("the view's candidate is a gate record"));
    if let Some(info) = v["version"].as_object() {
        render_version(&mut out, info, record.as_ref(), &bold);
    }
    match &record {
        Some(c) => {
            render_why(&mut out, v, c, &bold);
            render_screens(&mut out, c, color, &bold);
            render_full(&mut out, c, color, &bold);
        }
        None => match v["version"]["origin"].as_str() {
            Some("init") => out.push_str("no gate record: the starting point\n"),
            Some("hand_edit") => out.push_str("no gate record: a hand edit, kept so nothing is lost\n"),
            _ => out.push_str("no gate record found for this version\n"),
        },
    }
    let has_full = record.as_ref().is_some_and(|c| c.full.is_some());
    for side in ["improved", "regressed"] {
        let list = v["examples"][side].as_array().cloned().unwrap_or_default();
        let total = v["examples"][format!("{side}_total")].as_u64().unwrap_or(0);
        if list.is_empty() {
            if has_full {
                out.push_str(&format!("{} none\n", bold(&format!("{side} questions:"))));
            }
            continue;
        }
        out.push_str(&format!("{} {total}, e.g.:\n", bold(&format!("{side} questions:"))));
        for q in list {
            render_question(&mut out, &q, true);
        }
    }
    match v["diff"].as_str() {
        Some("") => out.push_str(&format!("{} none: same content as {}\n", bold("diff:"), s(&v["parent"]))),
        Some(d) => {
            out.push_str(&format!("{}\n", bold("diff:")));
            out.push_str(&if color { colorize(d) } else { d.to_string() });
        }
        None if record.as_ref().is_some_and(|c| c.document.is_none()) => {
            out.push_str(&format!("{} none (no strategy was proposed)\n", bold("diff:")))
        }
        None => out.push_str(&format!("{} none (no parent)\n", bold("diff:"))),
    }
    out
}

/// The version's name, origin, parent, accuracy and note.
fn render_version(
    out: &mut String,
    info: &serde_json::Map<String, Value>,
    c: Option<&CandidateRecord>,
    bold: &dyn Fn(&str) -> String,
) {
    let origin = match (s(&info["origin"]), info["round"].as_u64()) {
        ("accepted", Some(r)) => format!("accepted in round {r}"),
        ("init", _) => "the first version".to_string(),
        ("hand_edit", _) => "a hand edit journaled by `rollback --force`".to_string(),
        (o, _) => o.replace('_', " "),
    };
    out.push_str(&format!(
        "{}  {origin}, parent {}, accuracy {}\n  hash {}\n",
        bold(s(&info["name"])),
        info["parent"].as_u64().map_or("none".to_string(), |p| format!("v{p}")),
        info["accuracy"].as_f64().map_or("not evaluated".to_string(), |a| format!("{a:.4}")),
        s(&info["hash"])
    ));
    let note = s(&info["note"]);
    if !note.is_empty() && Some(note) != c.map(|c| c.reason.as_str()) {
        out.push_str(&format!("  {note}\n"));
    }
}

/// The candidate's change and outcome, and why it was proposed: Layer A on
/// the parent and the hypothesis as it stands now.
fn render_why(out: &mut String, v: &Value, c: &CandidateRecord, bold: &dyn Fn(&str) -> String) {
    let change = match &c.change {
        Some(ch) => format!("{} {} -> {}", ch.path, ch.from, ch.to),
        None => "no change proposed".to_string(),
    };
    out.push_str(&format!(
        "{} {}: {change}\n  round {}, hypothesis {}, outcome {}{}\n",
        bold("candidate"),
        c.id,
        c.round,
        c.hypothesis,
        c.outcome,
        c.rejected_by.map_or(String::new(), |r| format!(" (stopped by {r})"))
    ));
    if !c.reason.is_empty() {
        out.push_str(&format!("  {}\n", c.reason));
    }
    let motivation: Vec<String> = c.motivation.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    out.push_str(&format!(
        "{} Layer A on v{}: {} (actionability {:.2}, UCB {})\n",
        bold("why:"),
        c.parent_version,
        if motivation.is_empty() { "-".to_string() } else { motivation.join(", ") },
        c.actionability,
        Some(c.ucb).filter(|u| *u >= 0.0).map_or("unvisited".to_string(), |u| format!("{u:.3}"))
    ));
    let la = &v["layer_a"];
    if la.is_object() {
        let counts: Vec<String> =
            la["counts"].as_object().into_iter().flatten().map(|(k, n)| format!("{k} {n}")).collect();
        out.push_str(&format!(
            "  v{} failed {} of {} questions: {}\n",
            c.parent_version,
            la["failures"],
            la["n"],
            counts.join(", ")
        ));
        let cats: Vec<String> = la["motivating_by_category"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(cat, m)| {
                let n: u64 = m.as_object().into_iter().flatten().filter_map(|(_, n)| n.as_u64()).sum();
                format!("{cat} {n}")
            })
            .collect();
        if !cats.is_empty() {
            out.push_str(&format!("  motivating failures by category: {}\n", cats.join(", ")));
        }
        for (label, list) in la["examples"].as_object().into_iter().flatten() {
            let list = list.as_array().cloned().unwrap_or_default();
            if list.is_empty() {
                continue;
            }
            out.push_str(&format!("  {label}, e.g.:\n"));
            for q in list.iter().take(2) {
                let mut text = String::new();
                render_question(&mut text, q, false);
                out.push_str(&text.lines().map(|l| format!("  {l}\n")).collect::<String>());
            }
        }
    }
    let h = &v["hypothesis_now"];
    if h.is_object() {
        out.push_str(&format!(
            "  hypothesis now: {} (visits {}, mean reward {:+.3}, best delta {}, evidence +{} -{})\n",
            s(&h["status"]),
            h["visits"],
            f(&h["mean_reward"]),
            h["best_delta"].as_f64().map_or("-".to_string(), |d| format!("{d:+.4}")),
            h["evidence_for"],
            h["evidence_against"]
        ));
    }
}

/// Gates, critic and probe.
fn render_screens(out: &mut String, c: &CandidateRecord, color: bool, bold: &dyn Fn(&str) -> String) {
    if c.gates.is_empty() {
        out.push_str(&format!("{} none run (blocked before a strategy was proposed)\n", bold("gates:")));
    } else {
        out.push_str(&format!("{}\n", bold("gates:")));
        for g in &c.gates {
            out.push_str(&format!("  {:<18} {}  {}\n", g.gate.as_str(), verdict_word(g.pass, color), g.detail));
        }
    }
    if let Some(cr) = &c.critic {
        out.push_str(&format!(
            "{} {}{} ({})\n",
            bold("critic:"),
            cr.label.as_str(),
            if cr.reject { ", rejects" } else { "" },
            cr.reason
        ));
    }
    if let Some(p) = &c.probe {
        out.push_str(&format!(
            "{} {}  {} questions, served {:.4}, candidate {:.4}, delta {:+.4}, tolerance {:.4}\n",
            bold("probe:"),
            verdict_word(p.pass, color),
            p.n,
            p.served_accuracy,
            p.candidate_accuracy,
            p.delta,
            p.tolerance
        ));
    }
}

/// The full test: counts, accuracy, interval, McNemar and every rule.
fn render_full(out: &mut String, c: &CandidateRecord, color: bool, bold: &dyn Fn(&str) -> String) {
    let Some(fu) = &c.full else {
        if c.outcome != Outcome::Blocked {
            out.push_str(&format!("{} not run\n", bold("full:")));
        }
        return;
    };
    out.push_str(&format!(
        "{} {}  n {}, improved {}, regressed {}, both correct {}, both wrong {}\n",
        bold("full:"),
        verdict_word(fu.accept, color),
        fu.n,
        fu.improved,
        fu.regressed,
        fu.both_correct,
        fu.both_wrong
    ));
    out.push_str(&format!(
        "  accuracy {:.4} -> {:.4}, delta {:+.4}, {} CI [{:+.4}, {:+.4}] by {} ({} resamples)\n",
        fu.base_accuracy,
        fu.cand_accuracy,
        fu.delta,
        level_label(fu.ci_level()),
        fu.ci_low,
        fu.ci_high,
        fu.unit,
        fu.resamples
    ));
    out.push_str(&format!(
        "  McNemar ({}) p = {:.3e} at alpha {:.3e}\n",
        fu.mcnemar_test.name(),
        fu.mcnemar_p,
        fu.alpha
    ));
    for r in &fu.rules {
        out.push_str(&format!("  {} {:<28} {}\n", verdict_word(r.pass, color), r.name.as_str(), r.detail));
    }
}

pub fn show(args: &ShowArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let target = resolve(&log, &args.target)?;
    if args.yaml {
        match &target {
            Target::Version { version, parent, document, hash, .. } => {
                print!(
                    "{}",
                    artifact::render_yaml(document, Some(*version), *parent, &evolve::served_header(*version, hash))
                );
            }
            Target::Candidate { record } if record["document"].is_null() => {
                return Err(Failure::bad_input(anyhow::anyhow!(
                    "{}: blocked before a strategy was proposed; there is no artifact",
                    args.target
                )));
            }
            Target::Candidate { record } => print!("{}", report::document_yaml(&record["document"])),
        }
        return Ok(exit::OK);
    }
    let mut v = explain(&project, &log, &target)?;
    // The version's serving state: pending/approved/rejected review and quarantine.
    let serving = match &target {
        Target::Version { version, .. } => {
            let store = Store::new(&log);
            let review = store.reviews().map_err(common::store_failure)?.remove(version);
            let quarantine = store.quarantined().map_err(common::store_failure)?.remove(version);
            Some(json!({"review": review, "quarantine": quarantine}))
        }
        Target::Candidate { .. } => None,
    };
    if let (Some(s), Some(m)) = (&serving, v.as_object_mut()) {
        m.insert("serving".into(), s.clone());
    }
    if args.json {
        common::print_json(&v);
    } else {
        print!("{}", render_show(&v, use_color(args.no_color)));
        if let Some(s) = serving {
            let r = &s["review"];
            if !r.is_null() {
                let by = &r["review"];
                let who = if by.is_null() {
                    String::new()
                } else {
                    format!(" by {} at {}: {}", s_(&by["who"]), s_(&by["at"]), s_(&by["reason"]))
                };
                println!("serving: {}{who}", s_(&r["status"]));
            }
            let q = &s["quarantine"];
            if !q.is_null() {
                println!(
                    "serving: quarantined ({}) by {} at {}: {}",
                    s_(&q["cause"]),
                    s_(&q["who"]),
                    s_(&q["at"]),
                    s_(&q["reason"])
                );
            }
        }
    }
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// A version (served, best, vN), a candidate id, or a strategy file.
    pub a: String,
    /// A version (served, best, vN), a candidate id, or a strategy file.
    pub b: String,
    /// Print the diff and the two names as JSON.
    #[arg(long)]
    pub json: bool,
    /// Never colour (also off when stdout is not a terminal, or NO_COLOR is set).
    #[arg(long)]
    pub no_color: bool,
}

/// A diff side: a journaled version or candidate, else a file (parsed as
/// YAML only, so a hand edit that breaks the schema can still be compared).
fn document_of(log: &dyn EventLog, spec: &str) -> Result<(String, Value), Failure> {
    match resolve(log, spec) {
        Ok(Target::Version { version, document, .. }) => {
            let name = if parse_version(spec).is_some() { format!("v{version}") } else { version_name(log, version)? };
            Ok((name, document))
        }
        Ok(Target::Candidate { record }) if record["document"].is_null() => Err(Failure::bad_input(anyhow::anyhow!(
            "{spec}: blocked before a strategy was proposed; there is nothing to diff"
        ))),
        Ok(Target::Candidate { record }) => {
            Ok((record["id"].as_str().unwrap_or(spec).to_string(), record["document"].clone()))
        }
        Err(e) if e.code == exit::BAD_INPUT && PathBuf::from(spec).is_file() => {
            let text = std::fs::read_to_string(spec).map_err(|e| Failure::bad_input(anyhow::anyhow!("{spec}: {e}")))?;
            let value = artifact::parse_yaml(&text)
                .map_err(|kind| Failure::bad_input(artifact::ArtifactError { origin: spec.to_string(), kind }))?;
            Ok((spec.to_string(), evolve::strip_metadata(&value)))
        }
        Err(e) if e.code == exit::BAD_INPUT && parse_version(spec).is_none() && !matches!(spec, "served" | "best") => {
            Err(Failure::bad_input(anyhow::anyhow!(
                "{spec}: not a version (served, best, vN), a candidate id (like r3c2) nor a file"
            )))
        }
        Err(e) => Err(e),
    }
}

pub fn diff(args: &DiffArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let (an, a) = document_of(&log, &args.a)?;
    let (bn, b) = document_of(&log, &args.b)?;
    let text = report::unified_diff(&a, &b, &an, &bn);
    if args.json {
        common::print_json(&json!({"a": an, "b": bn, "identical": text.is_empty(), "diff": text}));
    } else if text.is_empty() {
        println!("{an} and {bn} are identical");
    } else if use_color(args.no_color) {
        print!("{}", colorize(&text));
    } else {
        print!("{text}");
    }
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The version to serve (vN).
    #[arg(long)]
    pub to: String,
    /// Why (kept in the rollback record).
    #[arg(long, default_value = "operator rollback")]
    pub reason: String,
    /// Replace a hand-edited served file, journaling its content first.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RestoreBestArgs {
    /// Why (kept in the rollback record).
    #[arg(long, default_value = "operator restored the best-ever version")]
    pub reason: String,
    /// Replace a hand-edited served file, journaling its content first.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

/// What happened to a hand-edited served file before it was replaced.
enum HandEdit {
    /// Journaled as this new version.
    Journaled(u64),
    /// Its content is already a journaled version.
    Known,
    /// Not a valid strategy: kept byte for byte beside the journal (the message says where).
    Kept(String),
}

/// Refuses to overwrite a hand-edited (or unreadable) served file unless
/// `force`; with `force`, journals the edited content first.
fn guard_hand_edit(
    project: &Project,
    schema: &StrategySchema,
    log: &mut journal::SledJournal,
    force: bool,
) -> Result<Option<HandEdit>, Failure> {
    let path = project.strategy_path();
    let served = Store::new(&*log).served().map_err(common::store_failure)?;
    let serving = served.map_or("nothing".to_string(), |s| format!("v{} (hash {:.12})", s.version, s.hash));
    match evolve::served_file_state(project, schema, &*log).map_err(common::evolve_failure)? {
        FileState::HandEdited { file_hash } if !force => Err(Failure::bad_input(anyhow::anyhow!(
            "{}: edited by hand since emend last wrote it (content hash {file_hash:.12}, but the journal serves \
             {serving}); refusing to replace it. See the edit with `emend diff served {}`; pass --force to journal \
             the edited content as a new version first, then replace it",
            path.display(),
            path.display()
        ))),
        FileState::Unreadable { reason, .. } if !force => Err(Failure::bad_input(anyhow::anyhow!(
            "{}: cannot be read ({reason}), so emend cannot tell whether it was edited by hand; refusing to \
             replace it. Pass --force to replace it anyway",
            path.display()
        ))),
        FileState::HandEdited { .. } => {
            let valid = artifact::load_file(&path, schema).is_ok();
            match evolve::journal_hand_edit(project, schema, log) {
                Ok(Some(v)) => Ok(Some(HandEdit::Journaled(v))),
                Ok(None) => Ok(Some(HandEdit::Known)),
                // An invalid strategy cannot become a version: journal_hand_edit kept its bytes.
                Err(e @ evolve::EvolveError::InvalidHandEdit { .. }) if !valid => {
                    Ok(Some(HandEdit::Kept(format!("{:#}", anyhow::Error::new(e)))))
                }
                Err(e) => Err(common::evolve_failure(e)),
            }
        }
        _ => Ok(None),
    }
}

/// Where a rollback goes.
enum Destination {
    Version(u64),
    /// The best-ever version, read under the writer lock.
    Best,
}

fn do_rollback(
    project: &Project,
    destination: Destination,
    cause: &str,
    reason: &str,
    pin: bool,
    force: bool,
    json_out: bool,
) -> CmdResult {
    let schema = common::schema(project)?;
    let mut log = common::writer(project)?;
    let store = Store::new(&log);
    let target = match destination {
        Destination::Version(v) => v,
        Destination::Best => store
            .best()
            .map_err(common::store_failure)?
            .map(|b| b.version)
            .ok_or_else(|| Failure::bad_input(anyhow::anyhow!("no best-ever version yet (no round has run)")))?,
    };
    // An unknown version is refused before anything is written.
    if store.version(target).map_err(common::store_failure)?.is_none() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "no version v{target} in the journal (it has v1..v{}; see `emend log`)",
            store.max_version().unwrap_or(0)
        )));
    }
    let served = store
        .served()
        .map_err(common::store_failure)?
        .ok_or_else(|| Failure::failed(anyhow::anyhow!("the journal has no served strategy")))?;
    let file_state = evolve::served_file_state(project, &schema, &log).map_err(common::evolve_failure)?;
    // restore-best with the best already served, unpinned, and its file intact: nothing to record.
    if !pin && served.version == target && !served.pinned && file_state == FileState::Consistent {
        if json_out {
            common::print_json(&json!({"record": null, "served": target, "unchanged": true}));
        } else {
            println!("v{target} is already served and not pinned; nothing to do");
        }
        return Ok(exit::OK);
    }
    // An operator cannot serve a quarantined, pending or rejected version by rollback.
    if let Err(msg) = engine::served::check_servable(&log, target).map_err(common::evolve_failure)? {
        return Err(Failure::bad_input(anyhow::anyhow!(msg)));
    }
    let edit = guard_hand_edit(project, &schema, &mut log, force)?;
    let mut reason = reason.to_string();
    if let Some(HandEdit::Kept(msg)) = &edit {
        eprintln!("warning: {msg}");
        reason.push_str(" (the hand-edited served file was not a valid strategy; it was kept beside the journal)");
    }
    // A rollback quarantines what it rolls back from (journaled before the move), so that
    // neither auto-restore nor the best-ever pointer brings it back.
    let quarantined: Vec<u64> = if cause == "rollback" {
        let history = engine::served::served_history(&log).map_err(common::evolve_failure)?;
        let from = engine::served::rolled_back_from(&history, served.version, target);
        let why = format!("rolled back to v{target}: {reason}");
        engine::served::quarantine(&mut log, &from, "rollback", &why).map_err(common::evolve_failure)?;
        from
    } else {
        vec![]
    };
    let event = evolve::apply_rollback(project, &schema, &mut log, target, cause, &reason, pin)
        .map_err(common::evolve_failure)?;
    let change = if cause == "rollback" { engine::hooks::Change::Rollback } else { engine::hooks::Change::RestoreBest };
    let hook = match &event {
        engine::events::Event::ServedChanged { from, to, hash, .. } if from != &Some(*to) => {
            engine::hooks::on_served(project, &mut log, *from, *to, hash, change)
        }
        _ => None,
    };
    let v = serde_json::to_value(&event).expect("events serialize");
    if json_out {
        let journaled = match &edit {
            Some(HandEdit::Journaled(v)) => Some(*v),
            _ => None,
        };
        common::print_json(
            &json!({"record": v, "hand_edit_version": journaled, "quarantined": quarantined, "hook_failure": hook}),
        );
        return Ok(exit::OK);
    }
    if let Some(HandEdit::Journaled(k)) = edit {
        println!("the hand-edited served file was journaled as v{k} before it was replaced (see `emend show v{k}`)");
    }
    let best = match (v["best_version"].as_u64(), v["best_accuracy"].as_f64()) {
        (Some(b), Some(a)) => format!("; best-ever is v{b} ({a:.4})"),
        _ => String::new(),
    };
    println!(
        "{}: served v{} -> v{} by {} ({reason}){best}\n{} written",
        cause.replace('_', " "),
        v["from"],
        v["to"],
        s(&v["who"]),
        project.strategy_path().display()
    );
    if !quarantined.is_empty() {
        let names: Vec<String> = quarantined.iter().map(|q| format!("v{q}")).collect();
        println!(
            "quarantined {}: never served automatically again (`emend unquarantine vN` lifts it)",
            names.join(", ")
        );
    }
    if served.version == target {
        println!("v{target} was already served; the record {}", if pin { "pins it" } else { "unpins it" });
    }
    if pin {
        println!("pinned: best-ever auto-restore is suspended until `emend restore-best` or an accepted change");
    }
    Ok(exit::OK)
}

pub fn rollback(args: &RollbackArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let version = args
        .to
        .strip_prefix('v')
        .unwrap_or(&args.to)
        .parse::<u64>()
        .map_err(|_| Failure::bad_input(anyhow::anyhow!("--to {}: expected a version like v3", args.to)))?;
    do_rollback(&project, Destination::Version(version), "rollback", &args.reason, true, args.force, args.json)
}

pub fn restore_best(args: &RestoreBestArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    do_rollback(&project, Destination::Best, "restore_best", &args.reason, false, args.force, args.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(fail: bool) -> Value {
        json!({
            "target": "r1c1",
            "version": null,
            "parent": "v1",
            "diff": "--- v1\n+++ r1c1\n@@ -1 +1 @@\n-top_k: 5\n+top_k: 15\n",
            "candidate": {
                "id": "r1c1", "round": 1, "hypothesis": "retrieve.top_k::increase", "outcome": "rejected",
                "rejected_by": "probe", "reason": "probe fell", "parent_version": 1, "parent_hash": "h1", "motivation": {"retrieval_gap": 3},
                "actionability": 0.5, "ucb": 1.25, "document": {"top_k": 15},
                "change": {"path": "retrieve.top_k", "from": 5, "to": 15},
                "gates": [{"gate": "novelty", "pass": true, "detail": "new"}],
                "probe": {"n": 10, "served_accuracy": 0.5, "candidate_accuracy": 0.4, "delta": -0.1, "tolerance": 0.02, "pass": !fail},
            },
            "layer_a": null, "hypothesis_now": null,
            "examples": {"improved": [], "regressed": []},
        })
    }

    #[test]
    fn colour_only_when_asked() {
        let plain = render_show(&shown(true), false);
        assert!(!plain.contains('\x1b'), "{plain}");
        assert!(plain.contains("probe: FAIL  10 questions"), "{plain}");
        assert!(plain.contains("diff:\n--- v1\n+++ r1c1\n"), "{plain}");
        let coloured = render_show(&shown(true), true);
        assert!(coloured.contains("\x1b[1;31mFAIL\x1b[0m"), "{coloured}");
        assert!(coloured.contains("\x1b[32m+top_k: 15\x1b[0m"), "{coloured}");
        assert!(coloured.contains("\x1b[31m-top_k: 5\x1b[0m"), "{coloured}");
        assert!(render_show(&shown(false), true).contains("\x1b[32mpass\x1b[0m"));
    }

    #[test]
    fn colorize_keeps_every_line() {
        let d = "--- a\n+++ b\n@@ -1 +1 @@\n x\n-y\n+z\n";
        let c = colorize(d);
        assert_eq!(c.lines().count(), d.lines().count());
        assert!(c.contains("\n x\n"), "context lines stay plain: {c:?}");
    }
}

/// An interval's level as a percentage, with as many decimals as it needs (95%, 97%, 99.9%).
fn level_label(level: f64) -> String {
    let pct = format!("{:.4}", level * 100.0);
    format!("{}%", pct.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod level_tests {
    use super::level_label;

    #[test]
    fn levels_print_with_the_decimals_they_need() {
        assert_eq!(level_label(0.95), "95%");
        assert_eq!(level_label(1.0 - 2.0 * 0.015), "97%");
        assert_eq!(level_label(1.0 - 2.0 * 0.0005), "99.9%");
        assert_eq!(level_label(1.0 - 2.0 * 1.348e-5), "99.9973%");
    }
}
