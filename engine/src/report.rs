//! The reviewer's static HTML report of a journal: the accuracy trajectory
//! over rounds (an inline SVG chart marking accepted, rejected and
//! rolled-back steps), per-category accuracy of the served strategy against
//! the start, the gate funnel, the hypothesis tree, every served-pointer move
//! and each journaled version's diff against its parent.
//!
//! [`gather`] reads the journal into a frozen [`ReportData`]; [`render`] turns
//! that into one self-contained HTML document (inline CSS and SVG, no
//! scripts, no network). Both are deterministic: the same journal (and task
//! set, for question texts) gives byte-identical HTML, so nothing here reads
//! a clock, a host name or a path. Every piece of text goes through [`esc`],
//! because dataset questions and operator reasons can hold markup.
//!
//! The unified-diff helpers shared with `emend show` and `emend diff` live
//! here too: both sides are rendered as key-sorted YAML so a diff shows
//! changed values, never reordered keys.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use journal::EventLog;
use serde_json::{Map, Value};

use crate::artifact;
use crate::candidate::{FullRecord, Outcome, Rule, StoppedBy};
use crate::config::Project;
use crate::events::{CandidateRecord, EvalSummary, Event, T_EVALUATIONS, evaluation_key};
use crate::gates::Gate;
use crate::hypothesis::Hypothesis;
use crate::store::{Best, Served, Store, StoreError};

/// A dataset question as a reviewer reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuestionText {
    pub question: String,
    /// The gold answer (empty when the dataset has none).
    pub gold: String,
    /// Evidence ids as written in the dataset.
    pub evidence: Vec<String>,
    pub category: String,
}

/// Question texts of the project's task set by question id; empty when the
/// task set cannot be loaded (the views then show ids only).
pub fn question_texts(project: &Project) -> BTreeMap<String, QuestionText> {
    let Ok(dataset) = crate::backend::load_tasks(&project.config.harness.tasks, &project.dir) else {
        return BTreeMap::new();
    };
    dataset
        .questions()
        .map(|q| {
            (
                q.id.clone(),
                QuestionText {
                    question: q.question.clone(),
                    gold: q.answer.clone().or_else(|| q.adversarial_answer.clone()).unwrap_or_default(),
                    evidence: q.raw_evidence.clone(),
                    category: q.category.to_string(),
                },
            )
        })
        .collect()
}

/// `v` with every object's keys sorted, recursively.
pub fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let keys: BTreeSet<&String> = m.keys().collect();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted_keys(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// A strategy document as key-sorted YAML without the version metadata: the
/// form both sides of every diff take.
pub fn document_yaml(doc: &Value) -> String {
    artifact::render_yaml(&sorted_keys(doc), None, None, "")
}

/// The unified diff (3 lines of context) of two strategy documents; empty
/// when they render the same.
pub fn unified_diff(a: &Value, b: &Value, a_name: &str, b_name: &str) -> String {
    let (a, b) = (document_yaml(a), document_yaml(b));
    if a == b {
        return String::new();
    }
    similar::TextDiff::from_lines(&a, &b).unified_diff().context_radius(3).header(a_name, b_name).to_string()
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// How a point of the trajectory came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointKind {
    /// The served strategy before the first round.
    Start,
    /// A round that accepted a candidate.
    Accepted,
    /// A round that accepted nothing.
    Unchanged,
    /// A round that ended with the best-ever auto-restore.
    AutoRestored,
    /// An operator's rollback or restore-best between rounds.
    Rollback,
}

/// One point of the served strategy's accuracy trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The round (fractional for an operator's move between rounds).
    pub x: f64,
    pub accuracy: f64,
    pub kind: PointKind,
    pub version: u64,
    pub label: String,
}

/// A fully evaluated candidate that was not accepted, drawn at its accuracy.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedPoint {
    pub round: u64,
    pub accuracy: f64,
    pub label: String,
}

/// One category of the served strategy against the start.
#[derive(Debug, Clone, PartialEq)]
pub struct CategoryRow {
    pub category: String,
    pub start: Option<(usize, usize)>,
    pub served: Option<(usize, usize)>,
}

/// How many candidates one gate or rule stopped (the first that failed).
#[derive(Debug, Clone, PartialEq)]
pub struct FunnelRow {
    pub stage: String,
    pub stopped: usize,
    /// Candidates that failed this full-test rule at all (also after another one failed).
    pub failed_any: Option<usize>,
}

/// One journaled version with what produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionSection {
    pub version: u64,
    pub parent: Option<u64>,
    pub hash: String,
    pub origin: String,
    pub round: Option<u64>,
    pub note: String,
    pub diff: String,
    pub accuracy: Option<f64>,
    pub candidate: Option<CandidateRecord>,
    pub improved: Vec<(String, Option<QuestionText>)>,
    pub regressed: Vec<(String, Option<QuestionText>)>,
    pub improved_total: usize,
    pub regressed_total: usize,
}

/// A served-pointer move: the rollback records, acceptances, restores.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedMove {
    pub seq: u64,
    pub at: String,
    pub cause: String,
    pub from: Option<u64>,
    pub to: u64,
    pub who: String,
    pub reason: String,
    pub pinned: bool,
    pub best_version: Option<u64>,
    pub best_accuracy: Option<f64>,
}

/// Everything the report shows, read from the journal.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportData {
    pub head_seq: u64,
    pub head_hash: String,
    pub served: Option<Served>,
    pub best: Option<Best>,
    pub rounds: u64,
    pub first_at: Option<String>,
    pub last_at: Option<String>,
    pub points: Vec<Point>,
    /// (round, best-ever accuracy after it)
    pub best_line: Vec<(f64, f64)>,
    pub rejected: Vec<RejectedPoint>,
    pub start_version: Option<u64>,
    pub categories: Vec<CategoryRow>,
    /// Set when the start and served evaluations come from different harnesses or datasets.
    pub category_note: Option<String>,
    pub candidates: usize,
    pub funnel: Vec<FunnelRow>,
    pub hypotheses: Vec<Hypothesis>,
    pub versions: Vec<VersionSection>,
    pub moves: Vec<ServedMove>,
}

/// Examples of improved and regressed questions shown per version.
const EXAMPLES: usize = 3;

/// Reads the journal into the report's data. `texts` gives question texts
/// for the examples (may be empty).
pub fn gather<L: EventLog + ?Sized>(log: &L, texts: &BTreeMap<String, QuestionText>) -> Result<ReportData, StoreError> {
    let store = Store::new(log);
    let head = log.head();
    let served = store.served()?;
    let best = store.best()?;

    let mut documents: BTreeMap<u64, Value> = BTreeMap::new();
    let mut version_hash: BTreeMap<u64, String> = BTreeMap::new();
    let mut latest_acc: BTreeMap<String, f64> = BTreeMap::new();
    let mut round_cands: Vec<CandidateRecord> = Vec::new();
    let mut all_cands: Vec<CandidateRecord> = Vec::new();
    let mut round_restored = false;
    let mut pending_ops: Vec<(u64, String, f64, String)> = Vec::new();
    let mut points: Vec<Point> = Vec::new();
    let mut best_line = Vec::new();
    let mut rejected = Vec::new();
    let mut moves = Vec::new();
    let mut sections: Vec<VersionSection> = Vec::new();
    let (mut rounds, mut first_at, mut last_at, mut start_version) = (0u64, None, None, None);

    // Operator moves between rounds sit evenly between the last point and `next_x`.
    let place_ops = |points: &mut Vec<Point>, ops: &mut Vec<(u64, String, f64, String)>, next_x: f64| {
        let last_x = points.last().map_or(next_x - 1.0, |p| p.x);
        let m = ops.len() as f64;
        for (i, (to, _, acc, label)) in ops.drain(..).enumerate() {
            let x = last_x + (next_x - last_x) * (i as f64 + 1.0) / (m + 1.0);
            points.push(Point { x, accuracy: acc, kind: PointKind::Rollback, version: to, label });
        }
    };

    for record in log.read_from(1)? {
        let event = Event::from_record(&record).map_err(StoreError::Corrupt)?;
        match event {
            Event::StrategyVersioned { version, parent, hash, document, origin, round, note } => {
                let diff = match parent.and_then(|p| documents.get(&p)) {
                    Some(pdoc) => {
                        unified_diff(pdoc, &document, &format!("v{}", parent.unwrap_or(0)), &format!("v{version}"))
                    }
                    None => String::new(),
                };
                documents.insert(version, document);
                version_hash.insert(version, hash.clone());
                sections.push(VersionSection {
                    version,
                    parent,
                    hash,
                    origin,
                    round,
                    note,
                    diff,
                    accuracy: None,
                    candidate: None,
                    improved: vec![],
                    regressed: vec![],
                    improved_total: 0,
                    regressed_total: 0,
                });
            }
            Event::Evaluated { strategy_hash, summary, .. } => {
                latest_acc.insert(strategy_hash, summary.accuracy);
            }
            Event::CandidateJudged(c) => {
                round_cands.push((*c).clone());
                all_cands.push(*c);
            }
            Event::ServedChanged { from, to, hash, cause, reason, who, pinned, best_version, best_accuracy, at } => {
                match cause.as_str() {
                    "init" | "accept" => {}
                    "auto_restore" => round_restored = true,
                    _ => {
                        if let Some(acc) = latest_acc.get(&hash) {
                            let label = format!(
                                "{} by {}: v{} -> v{to} ({}), {reason}",
                                cause.replace('_', " "),
                                who,
                                from.map_or("?".to_string(), |f| f.to_string()),
                                pct(*acc)
                            );
                            pending_ops.push((to, cause.clone(), *acc, label));
                        }
                    }
                }
                moves.push(ServedMove {
                    seq: record.seq,
                    at,
                    cause,
                    from,
                    to,
                    who,
                    reason,
                    pinned,
                    best_version,
                    best_accuracy,
                });
            }
            Event::RoundFinished(r) => {
                let x = r.round as f64;
                if rounds == 0 {
                    let start_hash = version_hash.get(&r.served_version_before);
                    if let Some(acc) = start_hash.and_then(|h| latest_acc.get(h)) {
                        place_ops(&mut points, &mut pending_ops, x - 1.0);
                        points.push(Point {
                            x: x - 1.0,
                            accuracy: *acc,
                            kind: PointKind::Start,
                            version: r.served_version_before,
                            label: format!(
                                "before round {}: served v{} at {}",
                                r.round,
                                r.served_version_before,
                                pct(*acc)
                            ),
                        });
                    }
                    first_at = Some(r.at.clone());
                }
                place_ops(&mut points, &mut pending_ops, x);
                let kind = if round_restored {
                    PointKind::AutoRestored
                } else if r.accepted.is_some() {
                    PointKind::Accepted
                } else {
                    PointKind::Unchanged
                };
                let what = match (&r.accepted, round_restored) {
                    (_, true) => format!("best-ever v{} auto-restored", r.served_version_after),
                    (Some(id), false) => format!("accepted {id} as v{}", r.served_version_after),
                    (None, false) => format!("nothing accepted of {} candidates", r.candidates),
                };
                points.push(Point {
                    x,
                    accuracy: r.served_accuracy,
                    kind,
                    version: r.served_version_after,
                    label: format!(
                        "round {}: {what}; served v{} at {}",
                        r.round,
                        r.served_version_after,
                        pct(r.served_accuracy)
                    ),
                });
                if let Some(b) = r.best_accuracy {
                    best_line.push((x, b));
                }
                for c in round_cands.drain(..) {
                    let cand_acc = c.full.as_ref().map(|f| f.cand_accuracy);
                    if let (Some(acc), true) = (cand_acc, c.accepted_version.is_none()) {
                        let change = c
                            .change
                            .as_ref()
                            .map_or(c.hypothesis.clone(), |ch| format!("{} {} -> {}", ch.path, ch.from, ch.to));
                        rejected.push(RejectedPoint {
                            round: r.round,
                            accuracy: acc,
                            label: format!(
                                "{} {change}: {} by {} at {}",
                                c.id,
                                c.outcome,
                                c.rejected_by.map_or_else(|| "?".to_string(), |r| r.to_string()),
                                pct(acc)
                            ),
                        });
                    }
                }
                round_restored = false;
                rounds += 1;
                last_at = Some(r.at.clone());
                if start_version.is_none() {
                    start_version = Some(r.served_version_before);
                }
            }
            Event::BestChanged { .. } | Event::HypothesisUpdated { .. } | Event::Escalated { .. } => {}
        }
    }
    let tail_x = points.last().map_or(1.0, |p| p.x + 1.0);
    place_ops(&mut points, &mut pending_ops, tail_x);

    // Versions: accuracy, the gate record that produced them, examples.
    for s in &mut sections {
        s.accuracy = latest_acc.get(&s.hash).copied();
        s.candidate = all_cands.iter().find(|c| c.accepted_version == Some(s.version)).cloned();
        if let Some(full) = s.candidate.as_ref().and_then(|c| c.full.as_ref()) {
            let pick = |ids: Vec<String>| {
                ids.into_iter().take(EXAMPLES).map(|id| {
                    let t = texts.get(&id).cloned();
                    (id, t)
                })
            };
            s.improved_total = full.improved;
            s.regressed_total = full.regressed;
            s.improved = pick(full.improved_examples.clone()).collect();
            s.regressed = pick(full.regressed_examples.clone()).collect();
        }
    }

    // Per category: the served strategy against the start, under the current harness when recorded.
    let start_version = start_version.or(if sections.is_empty() { None } else { Some(1) });
    let mut category_note = None;
    let mut categories = Vec::new();
    if let (Some(sv), Some(served)) = (start_version, &served) {
        let start_hash = version_hash.get(&sv).cloned().unwrap_or_default();
        let start_eval = recorded_evaluation(log, &start_hash, best.as_ref())?;
        let served_eval = recorded_evaluation(log, &served.hash, best.as_ref())?;
        if let (Some((sk, _)), Some((vk, _))) = (&start_eval, &served_eval) {
            let tail = |k: &str| k.split_once('/').map(|(_, t)| t.to_string()).unwrap_or_default();
            if tail(sk) != tail(vk) {
                category_note = Some(
                    "the start and the served strategy were evaluated under different harness or dataset hashes"
                        .to_string(),
                );
            }
        }
        let start_cats = start_eval.map(|(_, s)| s.per_category).unwrap_or_default();
        let served_cats = served_eval.map(|(_, s)| s.per_category).unwrap_or_default();
        let names: BTreeSet<&String> = start_cats.keys().chain(served_cats.keys()).collect();
        categories = names
            .into_iter()
            .map(|c| CategoryRow {
                category: c.clone(),
                start: start_cats.get(c).copied(),
                served: served_cats.get(c).copied(),
            })
            .collect();
    }

    Ok(ReportData {
        head_seq: head.seq,
        head_hash: head.hash,
        served,
        best,
        rounds,
        first_at,
        last_at,
        points,
        best_line,
        rejected,
        start_version,
        categories,
        category_note,
        candidates: all_cands.len(),
        funnel: funnel(&all_cands),
        hypotheses: store.tree()?.into_values().collect(),
        versions: sections,
        moves,
    })
}

/// The recorded evaluation of `hash` under the best pointer's harness and dataset (the current ones),
/// else its most recent one; with its key.
pub fn recorded_evaluation<L: EventLog + ?Sized>(
    log: &L,
    hash: &str,
    best: Option<&Best>,
) -> Result<Option<(String, EvalSummary)>, StoreError> {
    if hash.is_empty() {
        return Ok(None);
    }
    let decode = |k: String, v: Value| -> Result<(String, EvalSummary), StoreError> {
        let s = serde_json::from_value(v.get("summary").cloned().unwrap_or(Value::Null))
            .map_err(|e| StoreError::Corrupt(format!("evaluation {k}: {e}")))?;
        Ok((k, s))
    };
    if let Some(b) = best {
        let key = evaluation_key(hash, &b.harness_hash, &b.dataset_hash);
        if let Some(v) = log.get(T_EVALUATIONS, &key)? {
            return decode(key, v).map(Some);
        }
    }
    Store::new(log).latest_evaluation(hash)
}

/// Where a stage sits in the fail-fast order: blocked, gates (in their
/// order), critic, errored, probe, full-test rules (in their order), then accepted.
fn stage_rank(stage: Option<StoppedBy>, blocked: bool) -> (u8, usize) {
    if blocked {
        return (0, 0);
    }
    let rule_pos = |r: Rule| Rule::ALL.iter().position(|x| *x == r).unwrap_or(Rule::ALL.len());
    match stage {
        None => (7, 0),
        Some(StoppedBy::Gate(g)) => (1, Gate::ALL.iter().position(|x| *x == g).unwrap_or(Gate::ALL.len())),
        Some(StoppedBy::Critic(_)) => (2, 0),
        Some(StoppedBy::Errored) => (3, 0),
        Some(StoppedBy::Probe) => (4, 0),
        Some(StoppedBy::NotSelected) => (4, 1),
        Some(StoppedBy::FullRule(r)) => (5, rule_pos(r)),
        Some(StoppedBy::NotBest) => (5, Rule::ALL.len()),
    }
}

/// The gate funnel: per stage, how many candidates it stopped first.
pub fn funnel(cands: &[CandidateRecord]) -> Vec<FunnelRow> {
    // (rank, stage as shown) -> count
    let mut stopped: BTreeMap<((u8, usize), String), usize> = BTreeMap::new();
    let mut failed_any: Vec<(Rule, usize)> = Vec::new();
    for c in cands {
        let blocked = c.outcome == Outcome::Blocked;
        let stage = match (&c.rejected_by, blocked) {
            (Some(r), true) => format!("{r} (blocked before a change)"),
            (Some(r), false) => r.to_string(),
            (None, _) if c.accepted_version.is_some() => "accepted".to_string(),
            (None, _) => c.outcome.to_string(),
        };
        *stopped.entry((stage_rank(c.rejected_by, blocked), stage)).or_default() += 1;
        for rule in c.full.as_ref().map(FullRecord::failed).unwrap_or_default() {
            match failed_any.iter_mut().find(|(r, _)| *r == rule) {
                Some((_, n)) => *n += 1,
                None => failed_any.push((rule, 1)),
            }
        }
    }
    let mut rows: Vec<((u8, usize), FunnelRow)> = stopped
        .into_iter()
        .map(|((rank, stage), n)| {
            let rule = match rank.0 {
                5 => Rule::ALL.get(rank.1).copied(),
                _ => None,
            };
            let failed_any = rule.and_then(|r| failed_any.iter().find(|(x, _)| *x == r).map(|(_, n)| *n));
            (rank, FunnelRow { stage, stopped: n, failed_any })
        })
        .collect();
    // Rules that failed somewhere but never first still belong in the table.
    for (rule, n) in failed_any {
        let stage = StoppedBy::FullRule(rule).to_string();
        if !rows.iter().any(|(_, r)| r.stage == stage) {
            let rank = stage_rank(Some(StoppedBy::FullRule(rule)), false);
            rows.push((rank, FunnelRow { stage, stopped: 0, failed_any: Some(n) }));
        }
    }
    rows.sort_by_key(|(rank, _)| *rank);
    rows.into_iter().map(|(_, r)| r).collect()
}

fn pct(a: f64) -> String {
    format!("{:.1}%", a * 100.0)
}

fn pp(d: f64) -> String {
    format!("{:+.1} pp", d * 100.0)
}

fn ratio(nc: Option<(usize, usize)>) -> Option<f64> {
    nc.filter(|(n, _)| *n > 0).map(|(n, c)| c as f64 / n as f64)
}

/// Renders the report as one HTML document.
pub fn render(d: &ReportData) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>emend report</title>\n<style>\n");
    h.push_str(CSS);
    h.push_str("</style>\n</head>\n<body>\n");
    render_summary(&mut h, d);
    render_trajectory(&mut h, d);
    render_categories(&mut h, d);
    render_funnel(&mut h, d);
    render_hypotheses(&mut h, d);
    render_moves(&mut h, d);
    render_versions(&mut h, d);
    let _ = writeln!(
        h,
        "<footer>Generated by emend from the journal up to event {} (hash <code>{}</code>). \
         Check it with <code>emend journal verify</code>.</footer>",
        d.head_seq,
        esc(&d.head_hash)
    );
    h.push_str("</body>\n</html>\n");
    h
}

const CSS: &str = "\
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif;
  margin: 0 auto; max-width: 1180px; padding: 24px 28px 48px; color: #1d2330; background: #ffffff; line-height: 1.45; }
h1 { font-size: 1.7em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #e3e7ee; }
h3 { font-size: 1.05em; margin: 22px 0 6px; }
p.sub, .muted { color: #5b6578; }
code, pre { font-family: ui-monospace, 'SFMono-Regular', Menlo, Consolas, 'DejaVu Sans Mono', monospace; font-size: 0.88em; }
table { border-collapse: collapse; margin: 8px 0 4px; font-size: 0.92em; }
th, td { border-bottom: 1px solid #e3e7ee; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f4f6fa; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.nowrap { white-space: nowrap; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 14px 0; }
.card { border: 1px solid #e3e7ee; border-radius: 8px; padding: 10px 14px; min-width: 150px; background: #fafbfd; }
.card b { display: block; font-size: 1.35em; }
.bar { display: inline-block; height: 10px; border-radius: 2px; vertical-align: middle; }
.bar.stop { background: #d9534f; }
.bar.pass { background: #3a9d5d; }
.bar.neg { background: #d9534f; }
.bar.pos { background: #3a9d5d; }
.up { color: #1f7a3f; } .down { color: #b3261e; }
.status-confirmed { color: #1f7a3f; font-weight: 600; } .status-refuted { color: #b3261e; }
.status-exhausted, .status-escalated { color: #8a5a00; }
pre.diff { background: #f7f8fa; border: 1px solid #e3e7ee; border-radius: 6px; padding: 8px 10px; overflow-x: auto; margin: 6px 0; }
pre.diff span { display: block; white-space: pre; }
pre.diff .add { background: #e6f4ea; color: #14532d; }
pre.diff .del { background: #fdecea; color: #7f1d1d; }
pre.diff .hunk { color: #0b6b8a; }
pre.diff .file { font-weight: 700; }
section.version { border-left: 4px solid #3a9d5d; padding: 2px 0 6px 14px; margin: 18px 0; }
section.version.hand_edit { border-left-color: #e0a100; }
section.version.init { border-left-color: #5b6578; }
svg text { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif; }
footer { margin-top: 40px; color: #5b6578; font-size: 0.85em; }
";

fn render_summary(h: &mut String, d: &ReportData) {
    h.push_str("<h1>emend report</h1>\n");
    let span = match (&d.first_at, &d.last_at) {
        (Some(a), Some(b)) => format!("rounds from {} to {}", esc(a), esc(b)),
        _ => "no rounds yet".to_string(),
    };
    let _ = writeln!(h, "<p class=\"sub\">{} rounds, {} candidates judged; {span}.</p>", d.rounds, d.candidates);
    let start = d.points.iter().find(|p| p.kind == PointKind::Start);
    let served_acc =
        d.served.as_ref().and_then(|s| d.versions.iter().find(|v| v.version == s.version)).and_then(|v| v.accuracy);
    let accepted = d.versions.iter().filter(|v| v.origin == "accepted").count();
    let rollbacks = d.moves.iter().filter(|m| !matches!(m.cause.as_str(), "init" | "accept")).count();
    h.push_str("<div class=\"cards\">\n");
    let mut card = |title: &str, value: String, note: String| {
        let _ =
            writeln!(h, "<div class=\"card\">{}<b>{value}</b><span class=\"muted\">{note}</span></div>", esc(title));
    };
    if let Some(s) = &d.served {
        card(
            "served",
            format!("v{}", s.version),
            format!("{}{}", served_acc.map_or("not evaluated".into(), pct), if s.pinned { ", pinned" } else { "" }),
        );
    }
    if let Some(b) = &d.best {
        card("best-ever", format!("v{}", b.version), pct(b.accuracy));
    }
    if let Some(p) = start {
        card("start", format!("v{}", p.version), pct(p.accuracy));
    }
    card("accepted versions", accepted.to_string(), format!("of {} candidates", d.candidates));
    card("rollbacks and restores", rollbacks.to_string(), "operator and automatic".to_string());
    h.push_str("</div>\n");
}

/// A "nice" tick step giving at most `max_ticks` intervals over `span`.
fn nice_step(span: f64, max_ticks: f64, steps: &[f64]) -> f64 {
    steps.iter().copied().find(|s| span / s <= max_ticks).unwrap_or(*steps.last().expect("steps"))
}

fn render_trajectory(h: &mut String, d: &ReportData) {
    h.push_str("<h2 id=\"trajectory\">Accuracy over rounds</h2>\n");
    if d.points.is_empty() {
        h.push_str("<p class=\"muted\">No round has finished yet: run <code>emend evolve</code>.</p>\n");
        return;
    }
    h.push_str(
        "<p class=\"sub\">The served strategy's accuracy on the full task set after each round, the best-ever \
         accuracy, and every fully evaluated candidate that was not accepted. Hover a marker for details.</p>\n",
    );
    let (w, ht) = (1040.0_f64, 420.0_f64);
    let (ml, mr, mt, mb) = (70.0, 24.0, 44.0, 56.0);
    let (pw, ph) = (w - ml - mr, ht - mt - mb);
    let xs = d.points.iter().map(|p| p.x).chain(d.best_line.iter().map(|b| b.0));
    let x0 = xs.clone().fold(f64::INFINITY, f64::min);
    let mut x1 = xs.fold(f64::NEG_INFINITY, f64::max);
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let ys: Vec<f64> = d
        .points
        .iter()
        .map(|p| p.accuracy)
        .chain(d.best_line.iter().map(|b| b.1))
        .chain(d.rejected.iter().map(|r| r.accuracy))
        .collect();
    let (ymin_raw, ymax_raw) =
        ys.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| (lo.min(*y), hi.max(*y)));
    let ystep = nice_step((ymax_raw - ymin_raw).max(0.01), 8.0, &[0.005, 0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25]);
    let mut y0 = ((ymin_raw / ystep) - 1e-9).floor() * ystep;
    let mut y1 = ((ymax_raw / ystep) + 1e-9).ceil() * ystep;
    if y1 - y0 < ystep {
        y1 = y0 + ystep;
    }
    y0 = y0.max(0.0);
    y1 = y1.min(1.0).max(y0 + ystep.min(1.0 - y0).max(1e-6));
    let px = |x: f64| ml + (x - x0) / (x1 - x0) * pw;
    let py = |y: f64| mt + (1.0 - (y - y0) / (y1 - y0)) * ph;

    let _ = writeln!(
        h,
        "<svg id=\"trajectory-chart\" class=\"chart\" role=\"img\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" \
         aria-label=\"Served accuracy per round\">"
    );
    let _ =
        writeln!(h, "<rect x=\"{ml}\" y=\"{mt}\" width=\"{pw}\" height=\"{ph}\" fill=\"#fbfcfe\" stroke=\"#c9d0dc\"/>");
    // Horizontal grid and y labels.
    let ny = ((y1 - y0) / ystep).round() as i64;
    for i in 0..=ny {
        let y = y0 + i as f64 * ystep;
        let yy = py(y);
        let _ = writeln!(
            h,
            "<line x1=\"{ml}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#e3e7ee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\" fill=\"#3b4456\">{}</text>",
            ml + pw,
            ml - 8.0,
            yy + 4.0,
            if ystep < 0.01 { format!("{:.1}%", y * 100.0) } else { format!("{:.0}%", y * 100.0) }
        );
    }
    // Vertical ticks at whole rounds.
    let xstep = nice_step(x1 - x0, 14.0, &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]);
    let mut x = (x0 / xstep).ceil() * xstep;
    while x <= x1 + 1e-9 {
        let xx = px(x);
        let _ = writeln!(
            h,
            "<line x1=\"{xx:.1}\" y1=\"{mt}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#eef1f5\"/>\
             <line x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#3b4456\"/>\
             <text x=\"{xx:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#3b4456\">{}</text>",
            mt + ph,
            mt + ph,
            mt + ph + 5.0,
            mt + ph + 19.0,
            x as i64
        );
        x += xstep;
    }
    // Axes and their titles.
    let _ = writeln!(
        h,
        "<line x1=\"{ml}\" y1=\"{mt}\" x2=\"{ml}\" y2=\"{:.1}\" stroke=\"#3b4456\"/>\
         <line x1=\"{ml}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#3b4456\"/>",
        mt + ph,
        mt + ph,
        ml + pw,
        mt + ph
    );
    let _ = writeln!(
        h,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\" fill=\"#1d2330\">round</text>",
        ml + pw / 2.0,
        ht - 12.0
    );
    let _ = writeln!(
        h,
        "<text x=\"18\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\" fill=\"#1d2330\" \
         transform=\"rotate(-90 18 {:.1})\">accuracy (full task set)</text>",
        mt + ph / 2.0,
        mt + ph / 2.0
    );
    // Best-ever, as a dashed step line.
    if !d.best_line.is_empty() {
        let mut pts = String::new();
        for (i, (bx, by)) in d.best_line.iter().enumerate() {
            if i > 0 {
                let _ = write!(pts, "{:.1},{:.1} ", px(*bx), py(d.best_line[i - 1].1));
            }
            let _ = write!(pts, "{:.1},{:.1} ", px(*bx), py(*by));
        }
        let _ = writeln!(
            h,
            "<polyline class=\"best\" points=\"{}\" fill=\"none\" stroke=\"#7b61c4\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>",
            pts.trim_end()
        );
    }
    // Served, a line through every point in order.
    let served_pts: Vec<String> = d.points.iter().map(|p| format!("{:.1},{:.1}", px(p.x), py(p.accuracy))).collect();
    let _ = writeln!(
        h,
        "<polyline class=\"served\" points=\"{}\" fill=\"none\" stroke=\"#2f6fb5\" stroke-width=\"2.5\" stroke-linejoin=\"round\"/>",
        served_pts.join(" ")
    );
    // Rejected candidates.
    for r in &d.rejected {
        let (cx, cy) = (px(r.round as f64), py(r.accuracy));
        let _ = writeln!(
            h,
            "<g class=\"rejected\"><title>{}</title><path d=\"M{:.1} {:.1} l7 7 M{:.1} {:.1} l-7 7\" stroke=\"#d9534f\" \
             stroke-width=\"1.8\"/></g>",
            esc(&r.label),
            cx - 3.5,
            cy - 3.5,
            cx + 3.5,
            cy - 3.5
        );
    }
    // Served points, marked by what happened.
    for p in &d.points {
        let (cx, cy) = (px(p.x), py(p.accuracy));
        let shape = match p.kind {
            PointKind::Start => format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"#2f6fb5\"/>",
                cx - 5.0,
                cy - 5.0
            ),
            PointKind::Accepted => {
                format!(
                    "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"6.5\" fill=\"#3a9d5d\" stroke=\"#1f5f37\" stroke-width=\"1.2\"/>"
                )
            }
            PointKind::Unchanged => {
                format!(
                    "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"4.5\" fill=\"#ffffff\" stroke=\"#2f6fb5\" stroke-width=\"2\"/>"
                )
            }
            PointKind::AutoRestored | PointKind::Rollback => format!(
                "<path d=\"M{cx:.1} {:.1} L{:.1} {cy:.1} L{cx:.1} {:.1} L{:.1} {cy:.1} Z\" fill=\"#f0a020\" stroke=\"#8a5a00\" stroke-width=\"1.2\"/>",
                cy - 8.0,
                cx + 8.0,
                cy + 8.0,
                cx - 8.0
            ),
        };
        let class = match p.kind {
            PointKind::Start => "start",
            PointKind::Accepted => "accepted",
            PointKind::Unchanged => "unchanged",
            PointKind::AutoRestored => "auto-restored",
            PointKind::Rollback => "rollback",
        };
        let _ = writeln!(h, "<g class=\"point {class}\"><title>{}</title>{shape}</g>", esc(&p.label));
        if matches!(p.kind, PointKind::Accepted | PointKind::Start | PointKind::Rollback | PointKind::AutoRestored) {
            let _ = writeln!(
                h,
                "<text x=\"{cx:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#1d2330\">v{}</text>",
                cy - 11.0,
                p.version
            );
        }
    }
    // Legend, above the plot.
    let items: [(&str, &str); 6] = [
        ("served", "<line x1=\"0\" y1=\"0\" x2=\"22\" y2=\"0\" stroke=\"#2f6fb5\" stroke-width=\"2.5\"/>"),
        (
            "best-ever",
            "<line x1=\"0\" y1=\"0\" x2=\"22\" y2=\"0\" stroke=\"#7b61c4\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>",
        ),
        ("accepted", "<circle cx=\"11\" cy=\"0\" r=\"6\" fill=\"#3a9d5d\" stroke=\"#1f5f37\"/>"),
        (
            "nothing accepted",
            "<circle cx=\"11\" cy=\"0\" r=\"4.5\" fill=\"#ffffff\" stroke=\"#2f6fb5\" stroke-width=\"2\"/>",
        ),
        ("rejected candidate", "<path d=\"M7.5 -3.5 l7 7 M14.5 -3.5 l-7 7\" stroke=\"#d9534f\" stroke-width=\"1.8\"/>"),
        ("rollback / restore", "<path d=\"M11 -7 L18 0 L11 7 L4 0 Z\" fill=\"#f0a020\" stroke=\"#8a5a00\"/>"),
    ];
    let mut lx = ml;
    for (name, symbol) in items {
        let _ = writeln!(
            h,
            "<g class=\"legend\" transform=\"translate({lx:.1} 18)\">{symbol}<text x=\"28\" y=\"4\" font-size=\"12\" fill=\"#1d2330\">{}</text></g>",
            esc(name)
        );
        lx += 40.0 + name.len() as f64 * 6.6;
    }
    h.push_str("</svg>\n");
}

fn render_categories(h: &mut String, d: &ReportData) {
    h.push_str("<h2 id=\"categories\">Per category: served against the start</h2>\n");
    if d.categories.is_empty() {
        h.push_str("<p class=\"muted\">No recorded evaluation to compare.</p>\n");
        return;
    }
    let served = d.served.as_ref().map_or(0, |s| s.version);
    let start = d.start_version.unwrap_or(1);
    let _ = writeln!(
        h,
        "<p class=\"sub\">Accuracy of the served strategy v{served} against v{start}, where the journal's rounds \
         started, on the same questions.</p>"
    );
    if let Some(n) = &d.category_note {
        let _ = writeln!(h, "<p class=\"muted\">Note: {}.</p>", esc(n));
    }
    let _ = writeln!(
        h,
        "<table class=\"categories\">\n<tr><th>category</th><th class=\"num\">questions</th><th class=\"num\">start v{start}</th>\
         <th class=\"num\">served v{served}</th><th class=\"num\">delta</th><th>change</th></tr>"
    );
    let mut tot = ((0, 0), (0, 0));
    for r in &d.categories {
        if let Some((n, c)) = r.start {
            tot.0 = (tot.0.0 + n, tot.0.1 + c);
        }
        if let Some((n, c)) = r.served {
            tot.1 = (tot.1.0 + n, tot.1.1 + c);
        }
        category_row(h, &r.category, r.start, r.served, false);
    }
    category_row(h, "all", Some(tot.0), Some(tot.1), true);
    h.push_str("</table>\n");
}

fn category_row(h: &mut String, name: &str, start: Option<(usize, usize)>, served: Option<(usize, usize)>, bold: bool) {
    let n = served.or(start).map_or(0, |(n, _)| n);
    let cell = |nc: Option<(usize, usize)>| {
        nc.map_or("-".to_string(), |(n, c)| {
            format!("{} <span class=\"muted\">({c}/{n})</span>", pct(ratio(Some((n, c))).unwrap_or(0.0)))
        })
    };
    let (delta, bar) = match (ratio(start), ratio(served)) {
        (Some(a), Some(b)) => {
            let dd = b - a;
            let class = if dd > 1e-12 {
                "up"
            } else if dd < -1e-12 {
                "down"
            } else {
                "muted"
            };
            let width = (dd.abs() * 100.0 * 6.0).min(240.0);
            let bar_class = if dd >= 0.0 { "pos" } else { "neg" };
            (
                format!("<span class=\"{class}\">{}</span>", pp(dd)),
                format!("<span class=\"bar {bar_class}\" style=\"width:{width:.0}px\"></span>"),
            )
        }
        _ => ("-".to_string(), String::new()),
    };
    let (o, c) = if bold { ("<b>", "</b>") } else { ("", "") };
    let _ = writeln!(
        h,
        "<tr><td>{o}{}{c}</td><td class=\"num\">{n}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{delta}</td><td>{bar}</td></tr>",
        esc(name),
        cell(start),
        cell(served)
    );
}

fn render_funnel(h: &mut String, d: &ReportData) {
    h.push_str("<h2 id=\"funnel\">Gate funnel</h2>\n");
    if d.candidates == 0 {
        h.push_str("<p class=\"muted\">No candidate judged yet.</p>\n");
        return;
    }
    let _ = writeln!(
        h,
        "<p class=\"sub\">{} candidates, in fail-fast order: the hard gates, the critic, the Stage-1 probe and the \
         rules of the full paired test. Each candidate counts once, at the first gate or rule that stopped it; \
         \"failed at all\" counts every candidate that failed a full-test rule.</p>",
        d.candidates
    );
    h.push_str(
        "<table class=\"funnel\">\n<tr><th>stopped by</th><th class=\"num\">stopped</th><th class=\"num\">still in</th>\
         <th class=\"num\">failed at all</th><th></th></tr>\n",
    );
    let mut remaining = d.candidates;
    for r in &d.funnel {
        remaining = remaining.saturating_sub(r.stopped);
        let accepted = r.stage == "accepted";
        let width = (r.stopped as f64 / d.candidates as f64 * 300.0).round();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td><span class=\"bar {}\" style=\"width:{width:.0}px\"></span></td></tr>",
            if accepted { "<b>accepted</b>".to_string() } else { format!("<code>{}</code>", esc(&r.stage)) },
            r.stopped,
            if accepted { "-".to_string() } else { remaining.to_string() },
            r.failed_any.map_or("-".to_string(), |n| n.to_string()),
            if accepted { "pass" } else { "stop" }
        );
    }
    h.push_str("</table>\n");
}

fn render_hypotheses(h: &mut String, d: &ReportData) {
    h.push_str("<h2 id=\"hypotheses\">Hypothesis tree</h2>\n");
    if d.hypotheses.is_empty() {
        h.push_str("<p class=\"muted\">No hypothesis yet.</p>\n");
        return;
    }
    h.push_str(
        "<p class=\"sub\">Each dimension (grouped by pipeline stage) and the directions tried on it. Reward is the \
         paired accuracy delta scaled so that 5 pp is 1, clipped to [-1, 1].</p>\n",
    );
    h.push_str(
        "<table class=\"hypotheses\">\n<tr><th>hypothesis</th><th>status</th><th class=\"num\">visits</th>\
         <th class=\"num\">mean reward</th><th></th><th class=\"num\">total reward</th><th class=\"num\">best delta</th>\
         <th class=\"num\">evidence for / against</th><th class=\"num\">blocked</th></tr>\n",
    );
    let mut nodes: Vec<&Hypothesis> = d.hypotheses.iter().collect();
    nodes.sort_by(|a, b| a.path.cmp(&b.path).then(a.key.cmp(&b.key)));
    let (mut stage, mut path) = (String::new(), String::new());
    for n in nodes {
        let s = n.path.split('.').next().unwrap_or("").to_string();
        if s != stage {
            let _ = writeln!(h, "<tr><th colspan=\"9\">{}</th></tr>", esc(&s));
            stage = s;
        }
        if n.path != path {
            let _ = writeln!(h, "<tr><td colspan=\"9\"><code>{}</code></td></tr>", esc(&n.path));
            path = n.path.clone();
        }
        let mean = n.mean_reward();
        let width = (mean.abs() * 60.0).round();
        let status = n.status.as_str();
        let _ = writeln!(
            h,
            "<tr><td>&nbsp;&nbsp;&#8627; {}</td><td class=\"status-{status}\">{status}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{mean:+.3}</td><td><span class=\"bar {}\" style=\"width:{width:.0}px\"></span></td>\
             <td class=\"num\">{:+.3}</td><td class=\"num\">{}</td><td class=\"num\">{} / {}</td><td class=\"num\">{}</td></tr>",
            esc(n.direction.as_str()),
            n.visits,
            if mean >= 0.0 { "pos" } else { "neg" },
            n.total_reward,
            n.best_delta.map_or("-".to_string(), pp),
            n.evidence_for,
            n.evidence_against,
            n.blocked
        );
    }
    h.push_str("</table>\n");
}

fn render_moves(h: &mut String, d: &ReportData) {
    h.push_str("<h2 id=\"served-history\">Served strategy history</h2>\n");
    h.push_str(
        "<p class=\"sub\">Every move of the served pointer, with its rollback record: before, after, who, why, \
         and the best-ever version at the time.</p>\n",
    );
    h.push_str(
        "<table class=\"moves\">\n<tr><th class=\"num\">event</th><th>at</th><th>cause</th><th>served</th><th>who</th>\
         <th>reason</th><th>best-ever then</th></tr>\n",
    );
    for m in &d.moves {
        let _ = writeln!(
            h,
            "<tr><td class=\"num\">{}</td><td class=\"nowrap\">{}</td><td>{}{}</td><td class=\"nowrap\">{} &#8594; v{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            m.seq,
            esc(&m.at),
            esc(&m.cause.replace('_', " ")),
            if m.pinned { " (pinned)" } else { "" },
            m.from.map_or("-".to_string(), |f| format!("v{f}")),
            m.to,
            esc(&m.who),
            esc(&m.reason),
            match (m.best_version, m.best_accuracy) {
                (Some(v), Some(a)) => format!("v{v} ({})", pct(a)),
                _ => "-".to_string(),
            }
        );
    }
    h.push_str("</table>\n");
}

fn diff_html(diff: &str) -> String {
    let mut out = String::from("<pre class=\"diff\">");
    for line in diff.lines() {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "file"
        } else if line.starts_with('+') {
            "add"
        } else if line.starts_with('-') {
            "del"
        } else if line.starts_with("@@") {
            "hunk"
        } else {
            "ctx"
        };
        let _ = write!(out, "<span class=\"{class}\">{}</span>", esc(line));
    }
    out.push_str("</pre>\n");
    out
}

fn examples_html(side: &str, total: usize, list: &[(String, Option<QuestionText>)]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let mut out = format!("<p>{} questions ({total}), e.g.:</p>\n<ul class=\"examples\">\n", esc(side));
    for (id, t) in list {
        match t {
            Some(t) => {
                let _ = writeln!(
                    out,
                    "<li><code>{}</code> [{}] {} <span class=\"muted\">gold: {}; evidence: {}</span></li>",
                    esc(id),
                    esc(&t.category),
                    esc(&t.question),
                    esc(&t.gold),
                    esc(&t.evidence.join(", "))
                );
            }
            None => {
                let _ = writeln!(out, "<li><code>{}</code></li>", esc(id));
            }
        }
    }
    out.push_str("</ul>\n");
    out
}

fn render_versions(h: &mut String, d: &ReportData) {
    h.push_str("<h2 id=\"versions\">Versions and their diffs</h2>\n");
    for v in &d.versions {
        let origin_class = match v.origin.as_str() {
            "init" => "init",
            "hand_edit" => "hand_edit",
            _ => "accepted",
        };
        let _ = writeln!(h, "<section class=\"version {origin_class}\" id=\"v{}\">", v.version);
        let _ = writeln!(
            h,
            "<h3>v{}{} <span class=\"muted\">{}{}, accuracy {}</span></h3>",
            v.version,
            v.parent.map_or(String::new(), |p| format!(" &#8592; v{p}")),
            esc(&v.origin.replace('_', " ")),
            v.round.map_or(String::new(), |r| format!(" in round {r}")),
            v.accuracy.map_or("not evaluated".to_string(), pct)
        );
        let _ = writeln!(h, "<p class=\"muted\">hash <code>{}</code></p>", esc(&v.hash));
        if !v.note.is_empty() {
            let _ = writeln!(h, "<p>{}</p>", esc(&v.note));
        }
        if let Some(c) = &v.candidate {
            let motivation: Vec<String> = c.motivation.iter().map(|(k, n)| format!("{} \u{d7}{n}", esc(k))).collect();
            let _ = writeln!(
                h,
                "<p><b>{}</b> <code>{}</code>{}: motivated by Layer A on v{}: {} (actionability {:.2}).</p>",
                esc(&c.id),
                esc(&c.hypothesis),
                c.change.as_ref().map_or(String::new(), |ch| format!(
                    ", <code>{}</code> {} &#8594; {}",
                    esc(&ch.path),
                    esc(&ch.from.to_string()),
                    esc(&ch.to.to_string())
                )),
                c.parent_version,
                if motivation.is_empty() { "-".to_string() } else { motivation.join(", ") },
                c.actionability
            );
            let gates: Vec<String> = c
                .gates
                .iter()
                .map(|g| format!("{} {}", g.gate.as_str(), if g.pass { "pass" } else { "FAIL" }))
                .collect();
            let mut facts = vec![format!("gates: {}", gates.join(", "))];
            if let Some(cr) = &c.critic {
                facts.push(format!("critic: {} ({})", cr.label.as_str(), cr.reason));
            }
            if let Some(p) = &c.probe {
                facts.push(format!(
                    "probe: {} questions, {} -> {} ({}), tolerance {}",
                    p.n,
                    pct(p.served_accuracy),
                    pct(p.candidate_accuracy),
                    pp(p.delta),
                    pp(p.tolerance)
                ));
            }
            if let Some(f) = &c.full {
                facts.push(format!(
                    "full: {} questions, {} -> {} ({}), 95% CI [{}, {}] by {}, improved {} / regressed {}, \
                     McNemar {} p = {:.2e} at alpha {:.2e}",
                    f.n,
                    pct(f.base_accuracy),
                    pct(f.cand_accuracy),
                    pp(f.delta),
                    pp(f.ci_low),
                    pp(f.ci_high),
                    f.unit,
                    f.improved,
                    f.regressed,
                    f.mcnemar_test.name(),
                    f.mcnemar_p,
                    f.alpha
                ));
            }
            h.push_str("<ul class=\"facts\">\n");
            for f in facts {
                let _ = writeln!(h, "<li>{}</li>", esc(&f));
            }
            h.push_str("</ul>\n");
            h.push_str(&examples_html("improved", v.improved_total, &v.improved));
            h.push_str(&examples_html("regressed", v.regressed_total, &v.regressed));
        } else if v.origin == "init" {
            h.push_str("<p class=\"muted\">The starting point: no gate record.</p>\n");
        } else if v.origin == "hand_edit" {
            h.push_str("<p class=\"muted\">A hand edit journaled before a rollback replaced it: no gate record.</p>\n");
        }
        if !v.diff.is_empty() {
            h.push_str(&diff_html(&v.diff));
        } else if v.parent.is_some() {
            h.push_str("<p class=\"muted\">Same content as its parent.</p>\n");
        }
        h.push_str("</section>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{EngineProjector, RoundRecord};
    use crate::stats::RuleKind;
    use journal::MemoryJournal;
    use serde_json::json;

    #[test]
    fn esc_covers_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn diffs_ignore_key_order() {
        let a = json!({"b": {"y": 1, "x": 2}, "a": 1});
        let b = json!({"a": 1, "b": {"x": 2, "y": 1}});
        assert_eq!(unified_diff(&a, &b, "a", "b"), "");
        let c = json!({"a": 1, "b": {"x": 3, "y": 1}});
        let d = unified_diff(&a, &c, "a", "c");
        assert!(d.contains("-  x: 2\n+  x: 3\n"), "{d}");
    }

    #[test]
    fn nice_steps() {
        let steps = [0.01, 0.02, 0.05, 0.1];
        assert_eq!(nice_step(0.07, 8.0, &steps), 0.01);
        assert_eq!(nice_step(0.3, 8.0, &steps), 0.05);
        assert_eq!(nice_step(5.0, 8.0, &steps), 0.1);
    }

    fn cand(id: &str, rejected_by: Option<&str>, outcome: &str, accepted: Option<u64>) -> CandidateRecord {
        let outcome: Outcome = serde_json::from_value(json!(outcome)).unwrap();
        CandidateRecord {
            id: id.into(),
            round: 1,
            hash: None,
            parent_version: 1,
            parent_hash: "h1".into(),
            hypothesis: "retrieve.top_k::increase".into(),
            change: None,
            document: None,
            motivation: BTreeMap::new(),
            actionability: 0.5,
            ucb: 0.0,
            gates: vec![],
            critic: None,
            probe: None,
            full: None,
            outcome,
            rejected_by: rejected_by.map(|r| r.parse().unwrap()),
            reason: String::new(),
            delta: None,
            alpha: None,
            accepted_version: accepted,
            more_changes: vec![],
        }
    }

    #[test]
    fn funnel_follows_fail_fast_order() {
        let mut failing = cand("c5", Some("full:mcnemar_p_below_alpha"), "rejected", None);
        failing.full = Some(crate::candidate::sample_full(
            -0.01,
            false,
            &[Rule::Stats(RuleKind::McnemarPBelowAlpha), Rule::Stats(RuleKind::CiExcludesZero)],
        ));
        let cands = vec![
            cand("c1", None, "accepted", Some(2)),
            cand("c2", Some("probe"), "rejected", None),
            cand("c7", Some("probe:not_selected"), "rejected", None),
            cand("c3", Some("gate:novelty"), "rejected", None),
            cand("c4", Some("critic:out_of_scope"), "blocked", None),
            failing,
            cand("c6", Some("gate:schema_legality"), "rejected", None),
        ];
        let stages: Vec<(String, usize, Option<usize>)> =
            funnel(&cands).into_iter().map(|r| (r.stage, r.stopped, r.failed_any)).collect();
        assert_eq!(
            stages,
            vec![
                ("critic:out_of_scope (blocked before a change)".into(), 1, None),
                ("gate:schema_legality".into(), 1, None),
                ("gate:novelty".into(), 1, None),
                ("probe".into(), 1, None),
                ("probe:not_selected".into(), 1, None),
                ("full:mcnemar_p_below_alpha".into(), 1, Some(1)),
                ("full:ci_excludes_zero".into(), 0, Some(1)),
                ("accepted".into(), 1, None),
            ]
        );
    }

    fn summary(acc: f64) -> EvalSummary {
        EvalSummary {
            n: 10,
            correct: (acc * 10.0) as usize,
            accuracy: acc,
            per_category: BTreeMap::from([("single-hop".to_string(), (10, (acc * 10.0) as usize))]),
            mean_context_tokens: None,
        }
    }

    fn round(round: u64, before: u64, after: u64, acc: f64, accepted: Option<&str>) -> Event {
        Event::RoundFinished(Box::new(RoundRecord {
            round,
            served_version_before: before,
            served_version_after: after,
            served_accuracy: acc,
            best_version: Some(after),
            best_accuracy: Some(acc),
            accepted: accepted.map(String::from),
            candidates: 1,
            probe_evaluations: 0,
            full_evaluations: 0,
            rejected_by: BTreeMap::new(),
            diagnosis: BTreeMap::new(),
            alpha: 0.05,
            at: format!("2026-01-0{round}T00:00:00Z"),
            llm: Default::default(),
            split: None,
            evaluations_used: 0.0,
        }))
    }

    fn served(from: Option<u64>, to: u64, hash: &str, cause: &str, reason: &str) -> Event {
        Event::ServedChanged {
            from,
            to,
            hash: hash.into(),
            cause: cause.into(),
            reason: reason.into(),
            who: "op@host".into(),
            pinned: cause == "rollback",
            best_version: None,
            best_accuracy: None,
            at: "2026-01-05T00:00:00Z".into(),
        }
    }

    fn journal_with_rollback() -> MemoryJournal {
        let mut j = MemoryJournal::new(EngineProjector);
        let version = |v: u64, parent: Option<u64>, hash: &str, k: u64| Event::StrategyVersioned {
            version: v,
            parent,
            hash: hash.into(),
            document: json!({"retrieve": {"top_k": k}}),
            origin: if v == 1 { "init".into() } else { "accepted".into() },
            round: parent.map(|_| 1),
            note: String::new(),
        };
        let evaluated = |hash: &str, acc: f64| Event::Evaluated {
            strategy_hash: hash.into(),
            harness_hash: "H".into(),
            dataset_hash: "D".into(),
            summary: summary(acc),
            diagnosis: Default::default(),
            questions: vec![],
        };
        let mut accepted = cand("r1c1", None, "accepted", Some(2));
        let mut full = crate::candidate::sample_full(0.2, true, &[]);
        full.improved = 2;
        full.improved_examples = vec!["q1".into(), "q2".into()];
        accepted.full = Some(full);
        let events = vec![
            version(1, None, "h1", 5),
            served(None, 1, "h1", "init", "init"),
            evaluated("h1", 0.5),
            evaluated("h2", 0.7),
            Event::CandidateJudged(Box::new(accepted)),
            version(2, Some(1), "h2", 15),
            served(Some(1), 2, "h2", "accept", "round 1"),
            round(1, 1, 2, 0.7, Some("r1c1")),
            served(Some(2), 1, "h1", "rollback", "<script>alert(1)</script>"),
        ];
        j.append(events.iter().map(Event::to_new).collect()).unwrap();
        j
    }

    #[test]
    fn gathers_trajectory_with_rollback_and_escapes() {
        let j = journal_with_rollback();
        let texts = BTreeMap::from([(
            "q1".to_string(),
            QuestionText {
                question: "<b>who</b>?".into(),
                gold: "x".into(),
                evidence: vec!["D1:1".into()],
                category: "single-hop".into(),
            },
        )]);
        let data = gather(&j, &texts).unwrap();
        let kinds: Vec<(f64, PointKind, u64)> = data.points.iter().map(|p| (p.x, p.kind, p.version)).collect();
        assert_eq!(
            kinds,
            vec![(0.0, PointKind::Start, 1), (1.0, PointKind::Accepted, 2), (1.5, PointKind::Rollback, 1)]
        );
        assert_eq!(data.versions.len(), 2);
        assert!(data.versions[1].diff.contains("-  top_k: 5\n+  top_k: 15\n"), "{}", data.versions[1].diff);
        assert_eq!(data.versions[1].improved.len(), 2);
        let html = render(&data);
        assert!(!html.contains("<script"), "unescaped markup");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("&lt;b&gt;who&lt;/b&gt;?"));
        assert!(html.contains("<svg id=\"trajectory-chart\""));
        assert_eq!(html, render(&gather(&j, &texts).unwrap()), "deterministic");
        // Served is v1 again: the category table compares v1 with v1.
        assert_eq!(data.categories.len(), 1);
        assert_eq!(data.categories[0].start, data.categories[0].served);
    }

    #[test]
    fn an_empty_journal_still_renders() {
        let j = MemoryJournal::new(EngineProjector);
        let html = render(&gather(&j, &BTreeMap::new()).unwrap());
        assert!(html.contains("No round has finished yet"));
        assert!(html.ends_with("</html>\n"));
    }
}
