//! For the people who review and operate: `show`, `diff`, `rollback`,
//! `restore-best`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use engine::artifact;
use engine::config::Project;
use engine::events::T_QUESTIONS;
use engine::evolve::{self, FileState};
use engine::exit;
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

pub fn resolve(log: &dyn EventLog, spec: &str) -> Result<Target, Failure> {
    let store = Store::new(log);
    let version =
        match spec {
            "served" => Some(store.served().map_err(common::store_failure)?.map(|s| s.version).unwrap_or(0)),
            "best" => {
                Some(store.best().map_err(common::store_failure)?.map(|b| b.version).ok_or_else(|| {
                    Failure::bad_input(anyhow::anyhow!("no best-ever version yet (no round has run)"))
                })?)
            }
            s if s.starts_with('v') && s[1..].parse::<u64>().is_ok() => Some(s[1..].parse::<u64>().expect("checked")),
            _ => None,
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
    if let Some((_, record)) = candidates.into_iter().find(|(_, v)| v["id"].as_str() == Some(spec)) {
        return Ok(Target::Candidate { record });
    }
    Err(Failure::bad_input(anyhow::anyhow!("{spec}: not a version (served, best, vN) nor a candidate id (like r3c2)")))
}

fn version_yaml(document: &Value, version: Option<u64>, parent: Option<u64>) -> String {
    artifact::render_yaml(document, version, parent, "")
}

/// A unified diff, coloured for a terminal.
pub fn unified(a: &str, b: &str, a_name: &str, b_name: &str, color: bool) -> String {
    let diff = similar::TextDiff::from_lines(a, b);
    let text = diff.unified_diff().context_radius(3).header(a_name, b_name).to_string();
    if !color {
        return text;
    }
    text.lines()
        .map(|l| {
            if l.starts_with("+++") || l.starts_with("---") {
                format!("\x1b[1m{l}\x1b[0m")
            } else if l.starts_with('+') {
                format!("\x1b[32m{l}\x1b[0m")
            } else if l.starts_with('-') {
                format!("\x1b[31m{l}\x1b[0m")
            } else if l.starts_with("@@") {
                format!("\x1b[36m{l}\x1b[0m")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// served, best, vN, or a candidate id (r3c2).
    pub target: String,
    /// Print the strategy artifact itself.
    #[arg(long)]
    pub yaml: bool,
    #[arg(long)]
    pub json: bool,
    /// Never colour the diff.
    #[arg(long)]
    pub no_color: bool,
}

/// Question texts and gold answers, when the task set can be loaded.
fn question_texts(project: &Project) -> BTreeMap<String, (String, String, Vec<String>)> {
    let Ok(dataset) = engine::backend::load_tasks(&project.config.harness.tasks, &project.dir) else {
        return BTreeMap::new();
    };
    dataset
        .questions()
        .map(|q| (q.id.clone(), (q.question.clone(), q.answer.clone().unwrap_or_default(), q.raw_evidence.clone())))
        .collect()
}

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

/// The full "what changed and why" of a version or candidate, as JSON.
pub fn explain(project: &Project, log: &dyn EventLog, target: &Target) -> Result<Value, Failure> {
    let store = Store::new(log);
    let (record, version_info) = match target {
        Target::Candidate { record } => (Some(record.clone()), None),
        Target::Version { version, hash, parent, origin, note, .. } => {
            let rec = store
                .candidates()
                .map_err(common::store_failure)?
                .into_iter()
                .map(|(_, v)| v)
                .find(|v| v["accepted_version"].as_u64() == Some(*version));
            (rec, Some(json!({"version": version, "hash": hash, "parent": parent, "origin": origin, "note": note})))
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
        (Some(p), Some(pn)) if !doc.is_null() => {
            Some(unified(&version_yaml(p, None, None), &version_yaml(&doc, None, None), pn, &name, false))
        }
        _ => None,
    };
    let mut examples = json!({"improved": [], "regressed": []});
    if let Some(rec) = &record
        && let (Some(full), Some(hash), Some(parent_hash)) =
            (rec.get("full"), rec["hash"].as_str(), rec["parent_hash"].as_str())
    {
        let texts = question_texts(project);
        for (side, key) in [("improved", "improved_examples"), ("regressed", "regressed_examples")] {
            let list: Vec<Value> = full[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .take(5)
                .map(|qid| {
                    let (q, a, ev) = texts.get(qid).cloned().unwrap_or_default();
                    json!({"id": qid, "question": q, "gold_answer": a, "evidence": ev,
                           "before": stage_of(log, qid, parent_hash), "after": stage_of(log, qid, hash)})
                })
                .collect();
            examples[side] = Value::Array(list);
        }
    }
    Ok(json!({
        "target": name,
        "version": version_info,
        "parent": parent_name,
        "diff": diff,
        "candidate": record,
        "examples": examples,
    }))
}

fn render_show(v: &Value, color: bool) -> String {
    let mut out = String::new();
    let name = v["target"].as_str().unwrap_or("");
    if let Some(info) = v["version"].as_object() {
        out.push_str(&format!(
            "{name}  hash {}  origin {}  parent {}\n",
            info["hash"].as_str().unwrap_or(""),
            info["origin"].as_str().unwrap_or(""),
            info["parent"].as_u64().map_or("none".to_string(), |p| format!("v{p}"))
        ));
        if let Some(note) = info["note"].as_str().filter(|n| !n.is_empty()) {
            out.push_str(&format!("  {note}\n"));
        }
    }
    let c = &v["candidate"];
    if c.is_object() {
        out.push_str(&format!(
            "candidate {} (round {}): {}  outcome {}{}\n",
            c["id"].as_str().unwrap_or(""),
            c["round"],
            c["hypothesis"].as_str().unwrap_or(""),
            c["outcome"].as_str().unwrap_or(""),
            c["rejected_by"].as_str().map_or(String::new(), |r| format!(" ({r})"))
        ));
        if let Some(r) = c["reason"].as_str() {
            out.push_str(&format!("  {r}\n"));
        }
        let motivation: Vec<String> =
            c["motivation"].as_object().into_iter().flatten().map(|(k, n)| format!("{k} x{n}")).collect();
        out.push_str(&format!(
            "why: Layer A on v{}: {} (actionability {:.2})\n",
            c["parent_version"],
            if motivation.is_empty() { "-".to_string() } else { motivation.join(", ") },
            c["actionability"].as_f64().unwrap_or(0.0)
        ));
        out.push_str("gates:\n");
        for g in c["gates"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  {:<18} {}  {}\n",
                g["gate"].as_str().unwrap_or(""),
                if g["pass"] == json!(true) { "pass" } else { "FAIL" },
                g["detail"].as_str().unwrap_or("")
            ));
        }
        if c["critic"].is_object() {
            out.push_str(&format!(
                "critic: {} ({})\n",
                c["critic"]["label"].as_str().unwrap_or(""),
                c["critic"]["reason"].as_str().unwrap_or("")
            ));
        }
        if c["probe"].is_object() {
            let p = &c["probe"];
            out.push_str(&format!(
                "probe: {} questions, served {:.4}, candidate {:.4}, delta {:+.4}, tolerance {:.4}: {}\n",
                p["n"],
                p["served_accuracy"].as_f64().unwrap_or(0.0),
                p["candidate_accuracy"].as_f64().unwrap_or(0.0),
                p["delta"].as_f64().unwrap_or(0.0),
                p["tolerance"].as_f64().unwrap_or(0.0),
                if p["pass"] == json!(true) { "pass" } else { "FAIL" }
            ));
        }
        if c["full"].is_object() {
            let f = &c["full"];
            out.push_str(&format!(
                "full: n {}, improved {}, regressed {}, both correct {}, both wrong {}\n",
                f["n"], f["improved"], f["regressed"], f["both_correct"], f["both_wrong"]
            ));
            out.push_str(&format!(
                "  accuracy {:.4} -> {:.4}, delta {:+.4}, 95% CI [{:+.4}, {:+.4}] by {} ({} resamples)\n",
                f["base_accuracy"].as_f64().unwrap_or(0.0),
                f["cand_accuracy"].as_f64().unwrap_or(0.0),
                f["delta"].as_f64().unwrap_or(0.0),
                f["ci_low"].as_f64().unwrap_or(0.0),
                f["ci_high"].as_f64().unwrap_or(0.0),
                f["unit"].as_str().unwrap_or(""),
                f["resamples"]
            ));
            out.push_str(&format!(
                "  McNemar {} p = {:.3e} at alpha {:.3e}\n",
                f["mcnemar_test"].as_str().unwrap_or(""),
                f["mcnemar_p"].as_f64().unwrap_or(1.0),
                f["alpha"].as_f64().unwrap_or(0.0)
            ));
            for r in f["rules"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  {} {:<28} {}\n",
                    if r["pass"] == json!(true) { "pass" } else { "FAIL" },
                    r["name"].as_str().unwrap_or(""),
                    r["detail"].as_str().unwrap_or("")
                ));
            }
        }
    } else if v["version"]["origin"].as_str() == Some("init") {
        out.push_str("the first version: no gate record (it is the starting point)\n");
    }
    for side in ["improved", "regressed"] {
        let list = v["examples"][side].as_array().cloned().unwrap_or_default();
        if list.is_empty() {
            continue;
        }
        out.push_str(&format!("{side} questions, e.g.:\n"));
        for q in list {
            out.push_str(&format!(
                "  {} {}\n    gold: {}  evidence: {}  stage: {} -> {}\n",
                q["id"].as_str().unwrap_or(""),
                q["question"].as_str().unwrap_or(""),
                q["gold_answer"].as_str().unwrap_or(""),
                q["evidence"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default(),
                q["before"].as_str().unwrap_or(""),
                q["after"].as_str().unwrap_or("")
            ));
        }
    }
    match v["diff"].as_str() {
        Some(d) => {
            out.push_str("diff:\n");
            if color {
                out.push_str(&colorize(d));
            } else {
                out.push_str(d);
            }
        }
        None => out.push_str("diff: none (no parent)\n"),
    }
    out
}

fn colorize(d: &str) -> String {
    d.lines()
        .map(|l| {
            if l.starts_with("+++") || l.starts_with("---") {
                format!("\x1b[1m{l}\x1b[0m")
            } else if l.starts_with('+') {
                format!("\x1b[32m{l}\x1b[0m")
            } else if l.starts_with('-') {
                format!("\x1b[31m{l}\x1b[0m")
            } else if l.starts_with("@@") {
                format!("\x1b[36m{l}\x1b[0m")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
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
            Target::Candidate { record } => {
                print!("{}", version_yaml(&record["document"], None, None));
            }
        }
        return Ok(exit::OK);
    }
    let v = explain(&project, &log, &target)?;
    if args.json {
        common::print_json(&v);
    } else {
        let color = !args.no_color && std::io::stdout().is_terminal();
        print!("{}", render_show(&v, color));
    }
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// A version (served, best, vN), a candidate id, or a strategy file.
    pub a: String,
    /// A version (served, best, vN), a candidate id, or a strategy file.
    pub b: String,
    #[arg(long)]
    pub no_color: bool,
}

fn document_of(log: &dyn EventLog, spec: &str, schema: &StrategySchema) -> Result<(String, Value), Failure> {
    let path = PathBuf::from(spec);
    if path.is_file() {
        let a = artifact::load_file(&path, schema).map_err(Failure::bad_input)?;
        return Ok((spec.to_string(), evolve::strip_metadata(&a.value)));
    }
    match resolve(log, spec)? {
        Target::Version { version, document, .. } => Ok((format!("v{version}"), document)),
        Target::Candidate { record } => {
            Ok((record["id"].as_str().unwrap_or(spec).to_string(), record["document"].clone()))
        }
    }
}

pub fn diff(args: &DiffArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let log = common::reader(&project)?;
    let (an, a) = document_of(&log, &args.a, &schema)?;
    let (bn, b) = document_of(&log, &args.b, &schema)?;
    let color = !args.no_color && std::io::stdout().is_terminal();
    let text = unified(&version_yaml(&a, None, None), &version_yaml(&b, None, None), &an, &bn, color);
    if text.trim().is_empty() {
        println!("{an} and {bn} are identical");
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
    #[arg(long, default_value = "operator restored the best-ever version")]
    pub reason: String,
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

fn guard_hand_edit(
    project: &Project,
    schema: &StrategySchema,
    log: &mut journal::SledJournal,
    force: bool,
) -> Result<Option<u64>, Failure> {
    match evolve::served_file_state(project, schema, &*log).map_err(common::evolve_failure)? {
        FileState::HandEdited { file_hash } if !force => Err(Failure::bad_input(anyhow::anyhow!(
            "{}: edited by hand (content hash {file_hash:.12}) since emend last wrote it; refusing. \
             Pass --force to journal the edited content as a new version first, then replace it",
            project.strategy_path().display()
        ))),
        FileState::HandEdited { .. } => evolve::journal_hand_edit(project, schema, log).map_err(common::evolve_failure),
        _ => Ok(None),
    }
}

fn do_rollback(
    project: &Project,
    target: u64,
    cause: &str,
    reason: &str,
    pin: bool,
    force: bool,
    json_out: bool,
) -> CmdResult {
    let schema = common::schema(project)?;
    let mut log = common::writer(project)?;
    let kept = guard_hand_edit(project, &schema, &mut log, force)?;
    let event = evolve::apply_rollback(project, &schema, &mut log, target, cause, reason, pin)
        .map_err(common::evolve_failure)?;
    let v = serde_json::to_value(&event).expect("events serialize");
    if json_out {
        common::print_json(&json!({"record": v, "hand_edit_version": kept}));
    } else {
        if let Some(k) = kept {
            println!("the hand-edited served file was journaled as v{k} before it was replaced");
        }
        println!(
            "{}: served v{} -> v{} by {} ({}); {} written",
            cause.replace('_', " "),
            v["from"],
            v["to"],
            v["who"].as_str().unwrap_or(""),
            reason,
            project.strategy_path().display()
        );
        if pin {
            println!("pinned: best-ever auto-restore is suspended until `emend restore-best`");
        }
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
    do_rollback(&project, version, "rollback", &args.reason, true, args.force, args.json)
}

pub fn restore_best(args: &RestoreBestArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let best = {
        let log = common::reader(&project)?;
        Store::new(&log)
            .best()
            .map_err(common::store_failure)?
            .ok_or_else(|| Failure::bad_input(anyhow::anyhow!("no best-ever version yet (no round has run)")))?
    };
    do_rollback(&project, best.version, "restore_best", &args.reason, false, args.force, args.json)
}
