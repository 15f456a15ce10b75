//! For the people who review and operate: `show` (what changed and why),
//! `diff`, `rollback` and `restore-best`.
//!
//! A rollback runs in `emend_loop::operate::rollback` and is applied by
//! `emend_core::served::apply_rollback`: the journal record first, then the
//! atomic rewrite of the served file; this module parses, prints and exits.
//! A served file edited by hand is never overwritten silently: the command
//! refuses (exit 2) unless `--force`, which journals the edit first.

use std::path::{Path, PathBuf};

use anstyle::Style;
use emend_core::artifact;
use emend_core::candidate::Resolution;
use emend_core::config::Project;
use emend_core::events::{CandidateRecord, Event};
use emend_core::exit;
use emend_core::served;
use emend_core::store::Store;
use emend_journal::EventLog;
use emend_loop::operate::{self, Destination, HandEdit, Rollback, RollbackError, RollbackRequest, RolledBack};
use emend_report::texts;
use emend_report::views::{self, QuestionView, ShowView, VersionView};
use serde_json::{Value, json};

use super::common;
use super::term::{self, DIFF_ADD, DIFF_DEL, DIFF_FILE, DIFF_HUNK, FAIL, HEADING, PASS};
use super::{CmdResult, Failure};

/// What a `served`, `best`, `vN` or candidate id names.
pub enum Target {
    Version { version: u64, hash: String, parent: Option<u64>, document: Value },
    Candidate(Box<CandidateRecord>),
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
        return Ok(Target::Version { version: v, hash: info.hash, parent: info.parent, document });
    }
    let candidates = store.candidates().map_err(common::store_failure)?;
    if let Some(record) = candidates.into_iter().find(|c| c.id == spec) {
        return Ok(Target::Candidate(Box::new(record)));
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

/// `text` in `style` (the codes are stripped when the output is plain).
fn styled(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// A unified diff styled line by line: file names bold, additions green,
/// removals red, hunk headers cyan.
pub fn colorize(d: &str) -> String {
    let mut out = String::new();
    for l in d.lines() {
        let style = if l.starts_with("+++") || l.starts_with("---") {
            Some(DIFF_FILE)
        } else if l.starts_with('+') {
            Some(DIFF_ADD)
        } else if l.starts_with('-') {
            Some(DIFF_DEL)
        } else if l.starts_with("@@") {
            Some(DIFF_HUNK)
        } else {
            None
        };
        match style {
            Some(style) => out.push_str(&styled(style, l)),
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// served, best, vN, a candidate id (r3c2), or a round (r3: its record and digest).
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

/// The typed "what changed and why" of a version or candidate.
pub fn explain(project: &Project, log: &dyn EventLog, target: &Target) -> Result<ShowView, Failure> {
    let texts = texts::question_texts(project);
    match target {
        Target::Version { version, .. } => ShowView::of_version(log, &texts, *version)
            .map_err(common::store_failure)?
            .ok_or_else(|| Failure::bad_input(anyhow::anyhow!("no version v{version} in the journal"))),
        Target::Candidate(record) => {
            ShowView::of_candidate(log, &texts, (**record).clone()).map_err(common::store_failure)
        }
    }
}

fn verdict_word(pass: bool) -> String {
    if pass { styled(PASS, "pass") } else { styled(FAIL, "FAIL") }
}

fn bold(t: &str) -> String {
    styled(HEADING, t)
}

fn s_(v: &Value) -> &str {
    v.as_str().unwrap_or("?")
}

fn render_question(out: &mut String, q: &QuestionView) {
    let stages = match (&q.before, &q.after) {
        (Some(b), Some(a)) => format!("  stage: {b} -> {a}"),
        _ => String::new(),
    };
    out.push_str(&format!(
        "  {} [{}] {}\n    gold: {}  evidence: {}{stages}\n",
        q.id,
        q.category,
        q.question,
        if q.gold_answer.is_empty() { "-" } else { &q.gold_answer },
        q.evidence.join(", "),
    ));
}

/// The one-screen text form of a [`ShowView`], styled (the caller's stream
/// strips the styles when the output is plain).
pub fn render_show(v: &ShowView) -> String {
    let mut out = String::new();
    let record = v.candidate.as_ref();
    if let Some(info) = &v.version {
        render_version(&mut out, info, record);
    }
    match record {
        Some(c) => {
            render_why(&mut out, v, c);
            render_kept(&mut out, c);
            render_prediction(&mut out, c);
            render_screens(&mut out, c);
            render_full(&mut out, c);
            if let Some(g) = &v.guarantee {
                out.push_str(&format!("  guarantee: {g}\n"));
            }
        }
        None => match v.version.as_ref().map(|i| i.origin.as_str()) {
            Some("init") => out.push_str("no gate record: the starting point\n"),
            Some("hand_edit") => out.push_str("no gate record: a hand edit, kept so nothing is lost\n"),
            _ => out.push_str("no gate record found for this version\n"),
        },
    }
    let has_full = record.is_some_and(|c| c.full.is_some());
    let e = &v.examples;
    for (side, list, total) in
        [("improved", &e.improved, e.improved_total), ("regressed", &e.regressed, e.regressed_total)]
    {
        if list.is_empty() {
            if has_full {
                out.push_str(&format!("{} none\n", bold(&format!("{side} questions:"))));
            }
            continue;
        }
        out.push_str(&format!("{} {total}, e.g.:\n", bold(&format!("{side} questions:"))));
        for q in list {
            render_question(&mut out, q);
        }
    }
    match v.diff.as_deref() {
        Some("") => {
            out.push_str(&format!("{} none: same content as {}\n", bold("diff:"), v.parent.as_deref().unwrap_or("")))
        }
        Some(d) => {
            out.push_str(&format!("{}\n", bold("diff:")));
            out.push_str(&colorize(d));
        }
        None if record.is_some_and(|c| c.document.is_none()) => {
            out.push_str(&format!("{} none (no strategy was proposed)\n", bold("diff:")))
        }
        None => out.push_str(&format!("{} none (no parent)\n", bold("diff:"))),
    }
    out
}

/// The version's name, origin, parent, accuracy and note.
fn render_version(out: &mut String, info: &VersionView, c: Option<&CandidateRecord>) {
    let origin = match (info.origin.as_str(), info.round) {
        ("accepted", Some(r)) => format!("accepted in round {r}"),
        ("init", _) => "the first version".to_string(),
        ("hand_edit", _) => "a hand edit journaled by `rollback --force`".to_string(),
        (o, _) => o.replace('_', " "),
    };
    out.push_str(&format!(
        "{}  {origin}, parent {}, accuracy {}\n  hash {}\n",
        bold(&info.name),
        info.parent.map_or("none".to_string(), |p| format!("v{p}")),
        info.accuracy.map_or("not evaluated".to_string(), |a| format!("{a:.4}")),
        info.hash
    ));
    if let Some(f) = &info.figures {
        out.push_str(&format!("  measured: {}\n", f.describe()));
    }
    if let Some(c) = &info.cost {
        out.push_str(&format!("  cost: {}\n", c.describe()));
    }
    if !info.note.is_empty() && Some(info.note.as_str()) != c.map(|c| c.reason.as_str()) {
        out.push_str(&format!("  {}\n", info.note));
    }
}

/// The candidate's change and outcome, and why it was proposed: Layer A on
/// the parent and the hypothesis as it stands now.
fn render_why(out: &mut String, v: &ShowView, c: &CandidateRecord) {
    let change = c.change_summary().unwrap_or_else(|| "no change proposed".to_string());
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
    if let Some(la) = &v.layer_a {
        let counts: Vec<String> = la.counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
        out.push_str(&format!(
            "  v{} failed {} of {} questions: {}\n",
            c.parent_version,
            la.failures,
            la.n,
            counts.join(", ")
        ));
        let cats: Vec<String> =
            la.motivating_by_category.iter().map(|(cat, m)| format!("{cat} {}", m.values().sum::<usize>())).collect();
        if !cats.is_empty() {
            out.push_str(&format!("  motivating failures by category: {}\n", cats.join(", ")));
        }
        for (label, list) in la.examples.iter().filter(|(_, l)| !l.is_empty()) {
            out.push_str(&format!("  {label}, e.g.:\n"));
            for q in list.iter().take(2) {
                let mut text = String::new();
                render_question(&mut text, q);
                out.push_str(&text.lines().map(|l| format!("  {l}\n")).collect::<String>());
            }
        }
    }
    if let Some(h) = &v.hypothesis_now {
        out.push_str(&format!(
            "  hypothesis now: {} (visits {}, mean reward {:+.3}, best delta {}, evidence +{} -{})\n",
            h.status,
            h.visits,
            h.mean_reward,
            h.best_delta.map_or("-".to_string(), |d| format!("{d:+.4}")),
            h.evidence_for,
            h.evidence_against
        ));
    }
}

/// A searched candidate's kept fields, largest search-part contribution first.
fn render_kept(out: &mut String, c: &CandidateRecord) {
    if c.credits.is_empty() {
        return;
    }
    out.push_str(&format!("{}\n", bold(&format!("{}:", views::KEPT_FIELDS))));
    for credit in views::kept_fields(&c.credits) {
        out.push_str(&format!("  {}\n", credit.describe()));
    }
}

/// A person's prediction (`emend propose`) and its verdict per category.
fn render_prediction(out: &mut String, c: &CandidateRecord) {
    let Some(p) = &c.prediction else { return };
    out.push_str(&format!("{} {}\n", bold("prediction:"), p.heading()));
    for v in &p.verdicts {
        out.push_str(&format!("  {}\n", v.line()));
    }
}

/// Gates, critic and probe.
fn render_screens(out: &mut String, c: &CandidateRecord) {
    if c.gates.is_empty() {
        out.push_str(&format!("{} none run (blocked before a strategy was proposed)\n", bold("gates:")));
    } else {
        out.push_str(&format!("{}\n", bold("gates:")));
        for g in &c.gates {
            out.push_str(&format!("  {:<18} {}  {}\n", g.gate.as_str(), verdict_word(g.pass), g.detail));
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
        for line in cr.detail_lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    if let Some(p) = &c.probe {
        out.push_str(&format!(
            "{} {}  {} questions, served {:.4}, candidate {:.4}, delta {:+.4}, tolerance {:.4}\n",
            bold("probe:"),
            verdict_word(p.pass),
            p.n,
            p.served_accuracy,
            p.candidate_accuracy,
            p.delta,
            p.tolerance
        ));
    }
}

/// The full test: counts, accuracy, interval, McNemar and every rule.
fn render_full(out: &mut String, c: &CandidateRecord) {
    let Some(fu) = &c.full else {
        if c.outcome != Resolution::Blocked {
            out.push_str(&format!("{} not run\n", bold("full:")));
        }
        return;
    };
    out.push_str(&format!(
        "{} {}  n {}, improved {}, regressed {}, both correct {}, both wrong {}\n",
        bold("full:"),
        verdict_word(fu.accept),
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
    if let Some(a) = fu.adjusted_gain() {
        out.push_str(&format!(
            "  gain: {}; the raw delta {:+.4} is reported because the test accepted, which overstates it \
             ({})\n",
            a.describe(),
            fu.delta,
            if a.method == "median_unbiased" {
                "median-unbiased given acceptance"
            } else {
                "the test's one-sided lower bound"
            }
        ));
    }
    if let Some(cost) = &fu.cost {
        out.push_str(&format!("  cost: {} on the confirm part\n", emend_core::cost::describe_change(cost)));
    }
    out.push_str(&format!(
        "  McNemar ({}) p = {:.3e} at alpha {:.3e}\n",
        fu.mcnemar_test.name(),
        fu.mcnemar_p,
        fu.alpha
    ));
    for r in &fu.rules {
        out.push_str(&format!("  {} {:<28} {}\n", verdict_word(r.pass), r.name.as_str(), r.detail));
    }
}

pub fn show(args: &ShowArgs, project_dir: Option<&Path>) -> CmdResult {
    if let Some(round) = super::round::parse_round(&args.target) {
        if args.yaml {
            return Err(Failure::bad_input(anyhow::anyhow!("{}: a round has no artifact (--yaml)", args.target)));
        }
        return super::round::show(round, args.json, args.no_color, project_dir);
    }
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let target = resolve(&log, &args.target)?;
    if args.yaml {
        match &target {
            Target::Version { version, parent, document, hash } => {
                // As the served file would hold it: the modeline is relative to the served file's directory.
                let served = project.strategy_path();
                let schema = emend_core::served::schema_reference(&project, served.parent().unwrap_or(Path::new(".")));
                print!(
                    "{}",
                    artifact::render_strategy(
                        document,
                        Some(*version),
                        *parent,
                        &served::served_header(*version, hash),
                        schema.as_deref()
                    )
                );
            }
            Target::Candidate(record) => match &record.document {
                Some(document) => print!("{}", texts::document_yaml(document)),
                None => {
                    return Err(Failure::bad_input(anyhow::anyhow!(
                        "{}: blocked before a strategy was proposed; there is no artifact",
                        args.target
                    )));
                }
            },
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
            let served = store.served().map_err(common::store_failure)?.is_some_and(|s| s.version == *version);
            Some(json!({"review": review, "quarantine": quarantine, "served": served}))
        }
        Target::Candidate { .. } => None,
    };
    v.serving = serving.clone();
    if args.json {
        common::print_json(&serde_json::to_value(&v).expect("views serialize"));
    } else {
        // Journaled text (a review's or quarantine's reason, who) goes through the one sanitizer with the rest.
        let mut text = render_show(&v);
        if let Some(s) = serving {
            text.push_str(&serving_lines(&s));
        }
        term::print_stdout(&text, args.no_color);
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
/// A side's mean context tokens a question come from its recorded evaluation (none for a file).
fn document_of(log: &dyn EventLog, spec: &str) -> Result<(String, Value, Option<f64>), Failure> {
    let store = Store::new(log);
    let best = store.best().map_err(common::store_failure)?;
    match resolve(log, spec) {
        Ok(Target::Version { version, document, .. }) => {
            let name = if parse_version(spec).is_some() { format!("v{version}") } else { version_name(log, version)? };
            let tokens = store.version_tokens(version, best.as_ref()).map_err(common::store_failure)?;
            Ok((name, document, tokens))
        }
        Ok(Target::Candidate(record)) => match record.document {
            Some(document) => {
                let recorded = match &record.hash {
                    Some(h) => store.recorded_evaluation(h, best.as_ref()).map_err(common::store_failure)?,
                    None => None,
                };
                Ok((record.id, document, recorded.and_then(|(_, s)| s.mean_context_tokens)))
            }
            None => Err(Failure::bad_input(anyhow::anyhow!(
                "{spec}: blocked before a strategy was proposed; there is nothing to diff"
            ))),
        },
        Err(e) if e.code == exit::BAD_INPUT && PathBuf::from(spec).is_file() => {
            let text = std::fs::read_to_string(spec).map_err(|e| Failure::bad_input(anyhow::anyhow!("{spec}: {e}")))?;
            let value = artifact::parse_yaml(&text)
                .map_err(|kind| Failure::bad_input(artifact::ArtifactError { origin: spec.to_string(), kind }))?;
            Ok((spec.to_string(), served::strip_metadata(&value), None))
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
    let (an, a, at) = document_of(&log, &args.a)?;
    let (bn, b, bt) = document_of(&log, &args.b)?;
    let text = texts::unified_diff(&a, &b, &an, &bn);
    let ratio = match (at, bt) {
        (Some(x), Some(y)) if x > 0.0 => Some(y / x),
        _ => None,
    };
    if args.json {
        let tokens = json!({"a": at, "b": bt, "ratio": ratio});
        common::print_json(&json!({"a": an, "b": bn, "identical": text.is_empty(), "diff": text, "tokens": tokens}));
        return Ok(exit::OK);
    }
    if text.is_empty() {
        println!("{an} and {bn} are identical");
        return Ok(exit::OK);
    }
    term::print_stdout(&colorize(&text), args.no_color);
    let side = |n: &str, t: Option<f64>| t.map_or(format!("{n} not evaluated"), |t| format!("{n} {t:.0}"));
    let ratio = ratio.map_or(String::new(), |r| format!(" ({r:.2}x)"));
    println!("context tokens a question: {}, {}{ratio}", side(&an, at), side(&bn, bt));
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The version to serve (vN).
    #[arg(long)]
    pub to: String,
    /// Also keep the project's next runs within this many mean context tokens a question
    /// (journaled; the search and the confirm test keep the smaller of it and cost.max_tokens).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: Option<u64>,
    /// Why (kept in the rollback record).
    #[arg(long, default_value = "operator rollback")]
    pub reason: String,
    /// Replace a hand-edited served file, journaling its content first.
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object on stdout: the rollback record journaled, any hand-edit version, quarantines and hook failure.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub takeover: common::Takeover,
}

#[derive(Debug, clap::Args)]
pub struct RestoreBestArgs {
    /// Why (kept in the rollback record).
    #[arg(long, default_value = "operator restored the best-ever version")]
    pub reason: String,
    /// Replace a hand-edited served file, journaling its content first.
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object on stdout: the rollback record journaled, any hand-edit version, quarantines and hook failure.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub takeover: common::Takeover,
}

/// A version's review as `show` prints it: `pending (tested against v1)`,
/// `approved by ... at ...: reason`, `superseded by v7 at ...`.
fn review_line(r: &serde_json::Value) -> String {
    let by = &r["review"];
    match s_(&r["status"]) {
        "pending" => format!("pending (tested against v{})", r["parent"]),
        "superseded" => format!("superseded by v{} at {}", by["superseded_by"], s_(&by["at"])),
        status if by.is_null() => status.to_string(),
        status => {
            let how = match (by["forced_over"].as_u64(), by["retest"].as_str()) {
                (Some(f), _) => format!(" (forced over v{f}, never tested against it)"),
                (None, Some(id)) => format!(" (after a passed retest, {id})"),
                (None, None) => String::new(),
            };
            format!("{status}{how} by {} at {}: {}", s_(&by["who"]), s_(&by["at"]), s_(&by["reason"]))
        }
    }
}

/// A version's serving state as `show` prints it below the rest: served, its review, its quarantine.
fn serving_lines(s: &Value) -> String {
    let mut out = String::new();
    if s["served"] == true {
        out.push_str("serving: served\n");
    }
    let r = &s["review"];
    if !r.is_null() {
        out.push_str(&format!("serving: {}\n", review_line(r)));
    }
    let q = &s["quarantine"];
    if !q.is_null() {
        out.push_str(&format!(
            "serving: quarantined ({}) by {} at {}: {}\n",
            s_(&q["cause"]),
            s_(&q["who"]),
            s_(&q["at"]),
            s_(&q["reason"])
        ));
    }
    out
}

/// An operator's rollback or restore-best, as asked, with how to open the journal and print.
struct Request {
    rollback: RollbackRequest,
    json_out: bool,
    takeover: common::Takeover,
    /// The command line as a stop request names it (`rollback --to v3`).
    command: String,
}

fn do_rollback(project: &Project, request: Request) -> CmdResult {
    let Request { rollback, json_out, takeover, command } = request;
    let schema = common::schema(project)?;
    let refuse = |log: &dyn emend_journal::EventLog| {
        operate::check_rollback(project, &schema, log, &rollback).map(|_| ()).map_err(rollback_failure)
    };
    let mut log = common::operator_writer(project, takeover, &command, &refuse)?;
    let mut warn = |msg: &str| eprintln!("warning: {msg}");
    let done = match operate::rollback(project, &schema, &mut log, &rollback, &mut warn).map_err(rollback_failure)? {
        Rollback::Unchanged { target } => {
            if json_out {
                common::print_json(&json!({"record": null, "served": target, "unchanged": true}));
            } else {
                println!("v{target} is already served and not pinned; nothing to do");
            }
            return Ok(exit::OK);
        }
        Rollback::RolledBack(done) => done,
    };
    common::warn_hook_failures(&done.hook);
    if json_out {
        common::print_json(&rolled_back_json(&done));
    } else {
        print!("{}", emend_core::sanitize::escape_controls(&rolled_back_human(&done, rollback.cause(), project)));
    }
    Ok(exit::OK)
}

fn rollback_failure(e: RollbackError) -> Failure {
    match e {
        RollbackError::BadInput(msg) => Failure::bad_input(anyhow::anyhow!(msg)),
        RollbackError::Failed(msg) => Failure::failed(anyhow::anyhow!(msg)),
        RollbackError::Served(e) => common::served_failure(e),
        RollbackError::Store(e) => common::store_failure(e),
    }
}

/// A rollback's report as `--json` prints it.
fn rolled_back_json(done: &RolledBack) -> serde_json::Value {
    let journaled = match &done.edit {
        Some(HandEdit::Journaled(v)) => Some(*v),
        _ => None,
    };
    let record = serde_json::to_value(&done.event).expect("events serialize");
    let budget = done.budget.as_ref().map(|b| serde_json::to_value(b).expect("events serialize"));
    json!({
        "record": record, "hand_edit_version": journaled, "quarantined": done.quarantined, "hook_failure": done.hook,
        "budget": budget,
    })
}

/// A rollback's report for a person; `cause` is `rollback` or `restore_best`.
fn rolled_back_human(done: &RolledBack, cause: &str, project: &Project) -> String {
    let v = serde_json::to_value(&done.event).expect("events serialize");
    let pin = v["pinned"].as_bool().unwrap_or(false);
    let mut out = String::new();
    if let Some(HandEdit::Journaled(k)) = done.edit {
        out += &format!(
            "the hand-edited served file was journaled as v{k} before it was replaced (see `emend show v{k}`)\n"
        );
    }
    let best = match (v["best_version"].as_u64(), v["best_accuracy"].as_f64()) {
        (Some(b), Some(a)) => format!("; best-ever is v{b} ({a:.4})"),
        _ => String::new(),
    };
    out += &format!(
        "{}: served v{} -> v{} by {} ({}){best}\n{} written\n",
        cause.replace('_', " "),
        v["from"],
        v["to"],
        v["who"].as_str().unwrap_or(""),
        done.reason,
        project.strategy_path().display()
    );
    if !done.quarantined.is_empty() {
        let names: Vec<String> = done.quarantined.iter().map(|q| format!("v{q}")).collect();
        out += &format!(
            "quarantined {}: never served automatically again (`emend unquarantine vN` lifts it)\n",
            names.join(", ")
        );
    }
    if let Some(Event::BudgetSet { max_tokens, .. }) = &done.budget {
        out += &format!(
            "budget: the next runs keep {max_tokens} mean context tokens a question (the smaller of it and \
             cost.max_tokens; journaled)\n"
        );
    }
    if done.already_served {
        let what = if pin { "pins it" } else { "unpins it" };
        out += &format!("v{} was already served; the record {what}\n", done.target);
    }
    if pin {
        out += "pinned: best-ever auto-restore is suspended until `emend restore-best` or an accepted change\n";
    }
    out
}

pub fn rollback(args: &RollbackArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let version = args
        .to
        .strip_prefix('v')
        .unwrap_or(&args.to)
        .parse::<u64>()
        .map_err(|_| Failure::bad_input(anyhow::anyhow!("--to {}: expected a version like v3", args.to)))?;
    let request = Request {
        rollback: RollbackRequest {
            destination: Destination::Version(version),
            pin: true,
            force: args.force,
            reason: args.reason.clone(),
            max_tokens: args.max_tokens,
        },
        json_out: args.json,
        takeover: args.takeover,
        command: format!("rollback --to v{version}"),
    };
    do_rollback(&project, request)
}

pub fn restore_best(args: &RestoreBestArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let request = Request {
        rollback: RollbackRequest {
            destination: Destination::Best,
            pin: false,
            force: args.force,
            reason: args.reason.clone(),
            max_tokens: None,
        },
        json_out: args.json,
        takeover: args.takeover,
        command: "restore-best".into(),
    };
    do_rollback(&project, request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_report::views::Examples;

    fn shown(fail: bool) -> ShowView {
        let candidate: CandidateRecord = serde_json::from_value(json!({
            "id": "r1c1", "round": 1, "hash": null, "hypothesis": "retrieve.top_k::increase", "outcome": "rejected",
            "rejected_by": "probe", "reason": "probe fell", "parent_version": 1, "parent_hash": "h1",
            "motivation": {"retrieval_gap": 3}, "actionability": 0.5, "ucb": 1.25, "document": {"top_k": 15},
            "change": {"path": "retrieve.top_k", "from": 5, "to": 15},
            "gates": [{"gate": "novelty", "pass": true, "detail": "new"}], "critic": null, "full": null,
            "probe": {"n": 10, "served_accuracy": 0.5, "candidate_accuracy": 0.4, "delta": -0.1, "tolerance": 0.02, "pass": !fail},
            "delta": -0.1, "alpha": null, "accepted_version": null,
        }))
        .expect("a gate record");
        ShowView {
            target: "r1c1".into(),
            version: None,
            parent: Some("v1".into()),
            diff: Some("--- v1\n+++ r1c1\n@@ -1 +1 @@\n-top_k: 5\n+top_k: 15\n".into()),
            candidate: Some(candidate),
            layer_a: None,
            hypothesis_now: None,
            examples: Examples::default(),
            serving: None,
            guarantee: None,
        }
    }

    fn plain(styled: &str) -> String {
        let mut out = anstream::AutoStream::new(Vec::<u8>::new(), anstream::ColorChoice::Never);
        std::io::Write::write_all(&mut out, styled.as_bytes()).unwrap();
        String::from_utf8(out.into_inner()).unwrap()
    }

    #[test]
    fn styles_mark_verdicts_and_diff_lines_and_strip_to_plain_text() {
        let styled = render_show(&shown(true));
        assert!(styled.contains(&format!("{FAIL}FAIL{FAIL:#}")), "{styled:?}");
        assert!(styled.contains(&format!("{DIFF_ADD}+top_k: 15{DIFF_ADD:#}")), "{styled:?}");
        assert!(styled.contains(&format!("{DIFF_DEL}-top_k: 5{DIFF_DEL:#}")), "{styled:?}");
        assert!(render_show(&shown(false)).contains(&format!("{PASS}pass{PASS:#}")));
        let text = plain(&styled);
        assert!(!text.contains('\x1b'), "{text}");
        assert!(text.contains("probe: FAIL  10 questions"), "{text}");
        assert!(text.contains("diff:\n--- v1\n+++ r1c1\n@@ -1 +1 @@\n-top_k: 5\n+top_k: 15\n"), "{text}");
        assert!(text.contains("candidate r1c1: retrieve.top_k 5 -> 15\n"), "{text}");
        assert!(!text.contains("fields kept"), "no credits, no heading: {text}");
    }

    #[test]
    fn a_searched_candidate_lists_its_kept_fields_largest_contribution_first() {
        let mut v = shown(false);
        let credits = json!([
            {"key": "retrieve.pool::increase", "path": "retrieve.pool", "from": 50, "to": 480, "delta": null, "questions": 0},
            {"key": "retrieve.top_k::increase", "path": "retrieve.top_k", "from": 5, "to": 15, "delta": 0.062, "questions": 193},
        ]);
        v.candidate.as_mut().unwrap().credits = serde_json::from_value(credits).unwrap();
        let text = plain(&render_show(&v));
        let expected = "fields kept after pruning (search-part contribution when reverted alone):\n  \
                        retrieve.top_k 5 -> 15 (+6.2 pp on 193 search questions)\n  \
                        retrieve.pool 50 -> 480 (not measured)\n";
        assert!(text.contains(expected), "{text}");
    }

    #[test]
    fn colorize_keeps_every_line() {
        let d = "--- a\n+++ b\n@@ -1 +1 @@\n x\n-y\n+z\n";
        let c = colorize(d);
        assert_eq!(c.lines().count(), d.lines().count());
        assert!(c.contains("\n x\n"), "context lines stay unstyled: {c:?}");
        assert_eq!(plain(&c), d);
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
