//! The reviewer's static HTML report of a journal: the accuracy trajectory
//! over rounds (an inline SVG chart marking accepted, rejected and
//! rolled-back steps), per-category accuracy of the served strategy against
//! the start, the gate funnel, the search (each `searched` event, the
//! strategies it scored and the run's true funnel from trials drawn to
//! candidates confirmed), the hypothesis tree, every served-pointer move
//! and each journaled version's diff against its parent.
//!
//! [`gather`] reads the journal into a frozen [`ReportData`]; [`render`] turns
//! that into one self-contained HTML document (inline CSS and SVG, no
//! scripts, no network) through maud templates, which escape every
//! interpolated value: dataset questions and operator reasons can hold
//! markup. Both are deterministic: the same journal (and task set, for
//! question texts) gives byte-identical HTML, so nothing here reads a clock,
//! a host name or a path.
//!
//! The unified-diff helpers shared with `emend show` and `emend diff` live
//! here too: both sides are rendered as key-sorted YAML so a diff shows
//! changed values, never reordered keys.

use std::collections::{BTreeMap, BTreeSet};

use emend_journal::EventLog;
use serde_json::Value;

use crate::texts::{QuestionText, unified_diff};
use crate::views::{Examples, SearchFunnel, TrialsView};
use emend_core::candidate::{FullRecord, Resolution, Rule, StoppedBy};
use emend_core::events::{CandidateRecord, Event, RoundRecord, T_EVALUATIONS, evaluation_key};
use emend_core::gates::Gate;
use emend_core::hypothesis::Hypothesis;
use emend_core::percent::percent;
use emend_core::store::{Best, Served, Store, StoreError};

mod chart;
mod html;

pub use html::render;

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
    /// The row of accepted candidates.
    pub accepted: bool,
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
    /// Its measured accuracies on the whole set and each part (as `show` prints them).
    pub figures: Option<crate::views::Figures>,
    /// Its mean context tokens beside its parent's and v1's (as `show` prints them).
    pub cost: Option<emend_core::cost::VersionCost>,
    pub candidate: Option<CandidateRecord>,
    /// The full test's improved and regressed questions (the same view `show` lists).
    pub examples: Examples,
    /// Its serving state over time, in journal order: pending, approved,
    /// rejected, quarantined, unquarantined (who, why).
    pub serving: Vec<String>,
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
    /// Every search and every strategy it scored.
    pub search: TrialsView,
    /// The run's true funnel: trials drawn, raced out, pruned, proposed, confirmed.
    pub search_funnel: SearchFunnel,
    pub hypotheses: Vec<Hypothesis>,
    pub versions: Vec<VersionSection>,
    pub moves: Vec<ServedMove>,
    /// Versions waiting for approval: (version, hash).
    pub pending: Vec<(u64, String)>,
    /// When the served evaluation is a longitudinal replay: its results by checkpoint.
    pub checkpoints: Vec<emend_harness::replay::CheckpointSummary>,
    /// How the Layer A labels moved from the start to the served strategy
    /// (their recorded evaluations under the best pointer's harness).
    pub shift: Option<emend_core::layer_a::Shift>,
    /// Each round's digest (round, digest), in journal order.
    pub digests: Vec<(u64, emend_core::digest::Digest)>,
    /// A person's proposals (`emend propose --predict`), in journal order:
    /// what each changed, how it ended and how its prediction fared.
    pub proposals: Vec<String>,
}

/// Examples of improved and regressed questions shown per version.
const EXAMPLES: usize = 3;

/// Reads the journal into the report's data. `texts` gives question texts
/// for the examples (may be empty).
pub fn gather<L: EventLog + ?Sized>(log: &L, texts: &BTreeMap<String, QuestionText>) -> Result<ReportData, StoreError> {
    let store = Store::new(log);
    let head = log.head();
    let served = store.served()?;
    let mut best = store.best()?;
    // The best-ever's accuracy as its recorded evaluation gives it (older
    // journals could hold an estimate in the pointer).
    let best_eval = match &best {
        Some(b) => Store::new(log).recorded_evaluation(&b.hash, Some(b))?,
        None => None,
    };
    if let (Some(b), Some((_, e))) = (best.as_mut(), best_eval) {
        b.accuracy = e.accuracy;
    }
    let split = crate::views::last_split(log)?;

    let mut walk = Walk::default();
    for record in log.read_from(1)? {
        let event = Event::from_record(&record).map_err(StoreError::Corrupt)?;
        walk.event(record.seq, event);
    }
    let tail_x = walk.points.last().map_or(1.0, |p| p.x + 1.0);
    walk.place_ops(tail_x);

    // Versions: accuracy, the gate record that produced them, examples.
    for s in &mut walk.sections {
        // The figures `show` prints for this version (the current harness's evaluation first).
        s.figures = crate::views::recorded_figures(log, &s.hash, best.as_ref(), split.as_ref())?;
        s.accuracy = s.figures.as_ref().map(|f| f.whole.accuracy);
        s.cost = store.version_cost(s.version)?;
        s.candidate = walk.all_cands.iter().find(|c| c.accepted_version == Some(s.version)).cloned();
        s.attach_examples(texts);
    }

    let start_version = walk.start_version.or(if walk.sections.is_empty() { None } else { Some(1) });
    let start_hash = start_version.map(|sv| walk.version_hash.get(&sv).cloned().unwrap_or_default());
    let shift = match (&start_hash, &served, &best) {
        (Some(start), Some(served), Some(b)) => {
            match (recorded_results(log, start, b)?, recorded_results(log, &served.hash, b)?) {
                (Some(a), Some(z)) => Some(emend_core::layer_a::shift(&a, &z)),
                _ => None,
            }
        }
        _ => None,
    };
    let (categories, category_note) = match (start_hash, &served) {
        (Some(start_hash), Some(served)) => category_rows(log, &start_hash, &served.hash, best.as_ref())?,
        _ => (Vec::new(), None),
    };

    let checkpoints = match (&served, &best) {
        (Some(served), Some(b)) => served_checkpoints(log, &served.hash, b)?,
        _ => Vec::new(),
    };
    let search = TrialsView::build(log)?;
    let search_funnel = search.funnel(&walk.all_cands);
    let pending =
        store.live_pending()?.into_keys().filter_map(|v| walk.version_hash.get(&v).map(|h| (v, h.clone()))).collect();
    Ok(ReportData {
        shift,
        digests: walk.digests,
        pending,
        search,
        search_funnel,
        checkpoints,
        head_seq: head.seq,
        head_hash: head.hash,
        served,
        best,
        rounds: walk.rounds,
        first_at: walk.first_at,
        last_at: walk.last_at,
        points: walk.points,
        best_line: walk.best_line,
        rejected: walk.rejected,
        start_version,
        categories,
        category_note,
        proposals: walk.all_cands.iter().filter_map(proposal_line).collect(),
        candidates: walk.all_cands.len(),
        funnel: funnel(&walk.all_cands),
        hypotheses: store.tree()?.into_values().collect(),
        versions: walk.sections,
        moves: walk.moves,
    })
}

/// An operator's move between rounds, waiting for its place on the x axis:
/// (version moved to, accuracy, label).
type PendingOp = (u64, f64, String);

/// The journal read in order, event by event, into the report's parts.
#[derive(Default)]
struct Walk {
    documents: BTreeMap<u64, Value>,
    version_hash: BTreeMap<u64, String>,
    latest_acc: BTreeMap<String, f64>,
    round_cands: Vec<CandidateRecord>,
    all_cands: Vec<CandidateRecord>,
    round_restored: bool,
    pending_ops: Vec<PendingOp>,
    points: Vec<Point>,
    best_line: Vec<(f64, f64)>,
    rejected: Vec<RejectedPoint>,
    moves: Vec<ServedMove>,
    sections: Vec<VersionSection>,
    rounds: u64,
    first_at: Option<String>,
    last_at: Option<String>,
    start_version: Option<u64>,
    digests: Vec<(u64, emend_core::digest::Digest)>,
}

impl Walk {
    fn event(&mut self, seq: u64, event: Event) {
        match event {
            Event::StrategyVersioned { version, parent, hash, document, origin, round, note } => {
                let diff = match parent.and_then(|p| self.documents.get(&p)) {
                    Some(pdoc) => {
                        unified_diff(pdoc, &document, &format!("v{}", parent.unwrap_or(0)), &format!("v{version}"))
                    }
                    None => String::new(),
                };
                self.documents.insert(version, document);
                self.version_hash.insert(version, hash.clone());
                self.sections.push(VersionSection::new(version, parent, hash, origin, round, note, diff));
            }
            Event::Evaluated { strategy_hash, summary, .. } => {
                self.latest_acc.insert(strategy_hash, summary.accuracy);
            }
            Event::CandidateJudged(c) => {
                self.round_cands.push((*c).clone());
                self.all_cands.push(*c);
            }
            Event::ServedChanged { from, to, hash, cause, reason, who, pinned, best_version, best_accuracy, at } => {
                let m = ServedMove { seq, at, cause, from, to, who, reason, pinned, best_version, best_accuracy };
                self.served_changed(&hash, m);
            }
            Event::RoundFinished(r) => self.round_finished(&r),
            Event::Quarantined { version, cause, reason, who, at } => {
                self.serving_note(version, format!("quarantined ({cause}) by {who} at {at}: {reason}"));
            }
            Event::Unquarantined { version, reason, who, at } => {
                self.serving_note(version, format!("quarantine lifted by {who} at {at}: {reason}"));
            }
            Event::PendingReviewed { version, approved, reason, who, at, forced_over, .. } => {
                let verdict = match (approved, forced_over) {
                    (true, Some(s)) => format!("approved (forced over v{s}, never tested against it)"),
                    (true, None) => "approved".to_string(),
                    (false, _) => "rejected".to_string(),
                };
                self.serving_note(version, format!("{verdict} by {who} at {at}: {reason}"));
            }
            Event::PendingSuperseded { version, superseded_by, at } => {
                self.serving_note(version, format!("superseded by v{superseded_by} at {at}"));
            }
            Event::BestChanged { .. }
            | Event::Interrupted { .. }
            | Event::BudgetSet { .. }
            | Event::HypothesisUpdated { .. }
            | Event::Escalated { .. }
            | Event::EscalationReviewed { .. }
            | Event::HookFailed { .. }
            | Event::ViewRepaired { .. }
            | Event::Searched(_) => {}
        }
    }

    fn serving_note(&mut self, version: u64, note: String) {
        if let Some(s) = self.sections.iter_mut().find(|s| s.version == version) {
            s.serving.push(note);
        }
    }

    /// Records a served-pointer move; an operator's move also becomes a chart point.
    fn served_changed(&mut self, hash: &str, m: ServedMove) {
        match m.cause.as_str() {
            "init" | "accept" => {}
            "auto_restore" => self.round_restored = true,
            _ => {
                if let Some(acc) = self.latest_acc.get(hash) {
                    let label = format!(
                        "{} by {}: v{} -> v{} ({}), {}",
                        m.cause.replace('_', " "),
                        m.who,
                        m.from.map_or("?".to_string(), |f| f.to_string()),
                        m.to,
                        percent(*acc, 1),
                        m.reason
                    );
                    self.pending_ops.push((m.to, *acc, label));
                }
            }
        }
        self.moves.push(m);
    }

    fn round_finished(&mut self, r: &RoundRecord) {
        let x = r.round as f64;
        if self.rounds == 0 {
            let start_hash = self.version_hash.get(&r.served_version_before);
            if let Some(acc) = start_hash.and_then(|h| self.latest_acc.get(h)).copied() {
                self.place_ops(x - 1.0);
                self.points.push(Point {
                    x: x - 1.0,
                    accuracy: acc,
                    kind: PointKind::Start,
                    version: r.served_version_before,
                    label: format!(
                        "before round {}: served v{} at {}",
                        r.round,
                        r.served_version_before,
                        percent(acc, 1)
                    ),
                });
            }
            self.first_at = Some(r.at.clone());
        }
        self.place_ops(x);
        // The served and best-ever versions' recorded evaluations (older
        // journals could hold an estimate in the round record).
        let measured = |v: u64| self.version_hash.get(&v).and_then(|h| self.latest_acc.get(h)).copied();
        let served = measured(r.served_version_after).unwrap_or(r.served_accuracy);
        let best = r.best_version.and_then(measured).or(r.best_accuracy);
        self.points.push(round_point(r, served, self.round_restored));
        if let Some(b) = best {
            self.best_line.push((x, b));
        }
        self.rejected.extend(self.round_cands.drain(..).filter_map(|c| rejected_point(r.round, &c)));
        self.round_restored = false;
        if let Some(d) = &r.digest {
            self.digests.push((r.round, (**d).clone()));
        }
        self.rounds += 1;
        self.last_at = Some(r.at.clone());
        if self.start_version.is_none() {
            self.start_version = Some(r.served_version_before);
        }
    }

    /// Operator moves between rounds sit evenly between the last point and `next_x`.
    fn place_ops(&mut self, next_x: f64) {
        let last_x = self.points.last().map_or(next_x - 1.0, |p| p.x);
        let m = self.pending_ops.len() as f64;
        for (i, (to, acc, label)) in self.pending_ops.drain(..).enumerate() {
            let x = last_x + (next_x - last_x) * (i as f64 + 1.0) / (m + 1.0);
            self.points.push(Point { x, accuracy: acc, kind: PointKind::Rollback, version: to, label });
        }
    }
}

impl VersionSection {
    fn new(
        version: u64,
        parent: Option<u64>,
        hash: String,
        origin: String,
        round: Option<u64>,
        note: String,
        diff: String,
    ) -> VersionSection {
        let origin_is_pending = origin == "pending";
        VersionSection {
            version,
            parent,
            hash,
            origin,
            round,
            note,
            diff,
            accuracy: None,
            figures: None,
            cost: None,
            candidate: None,
            examples: Examples::default(),
            serving: if origin_is_pending { vec!["pending approval".to_string()] } else { vec![] },
        }
    }

    /// Improved and regressed examples of the full test that accepted it.
    fn attach_examples(&mut self, texts: &BTreeMap<String, QuestionText>) {
        if let Some(full) = self.candidate.as_ref().and_then(|c| c.full.as_ref()) {
            self.examples = Examples::of(full, EXAMPLES, texts);
        }
    }
}

/// The served strategy's point at the end of a round.
fn round_point(r: &RoundRecord, accuracy: f64, restored: bool) -> Point {
    let kind = if restored {
        PointKind::AutoRestored
    } else if r.accepted.is_some() {
        PointKind::Accepted
    } else {
        PointKind::Unchanged
    };
    let what = match (&r.accepted, restored) {
        (_, true) => format!("best-ever v{} auto-restored", r.served_version_after),
        (Some(id), false) => format!("accepted {id} as v{}", r.served_version_after),
        (None, false) => format!("nothing accepted of {} candidates", r.candidates),
    };
    Point {
        x: r.round as f64,
        accuracy,
        kind,
        version: r.served_version_after,
        label: format!(
            "round {}: {what}; served v{} at {} on the whole task set",
            r.round,
            r.served_version_after,
            percent(accuracy, 1)
        ),
    }
}

/// A person's proposal: its change, how it ended, and its prediction's verdict.
fn proposal_line(c: &CandidateRecord) -> Option<String> {
    let p = c.prediction.as_ref()?;
    let change = c.change_summary().unwrap_or_else(|| c.hypothesis.clone());
    let ended = match (c.accepted_version, c.rejected_by) {
        (Some(v), _) => format!("accepted as v{v}"),
        (None, Some(r)) => format!("{} by {r}", c.outcome),
        (None, None) => c.outcome.to_string(),
    };
    Some(format!("{} {change}: {ended}; {}", c.id, p.describe()))
}

/// A fully tested candidate that was not accepted, for the trajectory chart.
fn rejected_point(round: u64, c: &CandidateRecord) -> Option<RejectedPoint> {
    let full = c.full.as_ref().filter(|_| c.accepted_version.is_none())?;
    let acc = full.cand_accuracy;
    let change = c.change_summary().unwrap_or_else(|| c.hypothesis.clone());
    Some(RejectedPoint {
        round,
        accuracy: acc,
        label: format!(
            "{} {change}: {} by {} at {} on the confirm part ({} questions; the served strategy {} on the same part)",
            c.id,
            c.outcome,
            c.rejected_by.map_or_else(|| "?".to_string(), |r| r.to_string()),
            percent(acc, 1),
            full.n,
            percent(full.base_accuracy, 1)
        ),
    })
}

/// Per category: the served strategy against the start, under the current
/// harness when recorded; a note when the two were evaluated under different ones.
fn category_rows<L: EventLog + ?Sized>(
    log: &L,
    start_hash: &str,
    served_hash: &str,
    best: Option<&Best>,
) -> Result<(Vec<CategoryRow>, Option<String>), StoreError> {
    let start_eval = Store::new(log).recorded_evaluation(start_hash, best)?;
    let served_eval = Store::new(log).recorded_evaluation(served_hash, best)?;
    let mut note = None;
    if let (Some((sk, _)), Some((vk, _))) = (&start_eval, &served_eval) {
        let tail = |k: &str| k.split_once('/').map(|(_, t)| t.to_string()).unwrap_or_default();
        if tail(sk) != tail(vk) {
            note = Some(
                "the start and the served strategy were evaluated under different harness or dataset hashes"
                    .to_string(),
            );
        }
    }
    let start_cats = start_eval.map(|(_, s)| s.per_category).unwrap_or_default();
    let served_cats = served_eval.map(|(_, s)| s.per_category).unwrap_or_default();
    let names: BTreeSet<&String> = start_cats.keys().chain(served_cats.keys()).collect();
    let rows = names
        .into_iter()
        .map(|c| CategoryRow {
            category: c.clone(),
            start: start_cats.get(c).copied(),
            served: served_cats.get(c).copied(),
        })
        .collect();
    Ok((rows, note))
}

/// The per-question results recorded for `hash` under the best pointer's
/// harness and dataset; None when there is no such evaluation.
fn recorded_results<L: EventLog + ?Sized>(
    log: &L,
    hash: &str,
    best: &Best,
) -> Result<Option<Vec<emend_core::events::LabeledOutcome>>, StoreError> {
    let key = evaluation_key(hash, &best.harness_hash, &best.dataset_hash);
    let Some(v) = log.get(T_EVALUATIONS, &key)? else { return Ok(None) };
    Ok(serde_json::from_value(v.get("questions").cloned().unwrap_or(Value::Null)).ok())
}

/// The served evaluation's results by checkpoint, when its question results
/// are replay observations (`<question>@<checkpoint>`); empty otherwise.
fn served_checkpoints<L: EventLog + ?Sized>(
    log: &L,
    hash: &str,
    best: &Best,
) -> Result<Vec<emend_harness::replay::CheckpointSummary>, StoreError> {
    let results = recorded_results(log, hash, best)?.unwrap_or_default();
    let observed: Vec<emend_harness::replay::Observed> = results
        .iter()
        .filter_map(|q| {
            Some(emend_harness::replay::Observed {
                conversation: q.conversation.clone().unwrap_or_default(),
                id: q.id.clone(),
                checkpoint: emend_harness::replay::checkpoint_of(&q.id)?,
                correct: Some(q.correct),
                context_tokens: q.tokens.map(|t| t.round() as u32),
            })
        })
        .collect();
    Ok(emend_harness::replay::checkpoint_summaries(&observed))
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
        let blocked = c.outcome == Resolution::Blocked;
        let stage = match (&c.rejected_by, blocked) {
            (Some(r), true) => format!("{r} (blocked before a change)"),
            (Some(r), false) => r.to_string(),
            (None, _) if c.accepted_version.is_some() => "accepted".to_string(),
            (None, _) => c.outcome.to_string(),
        };
        // A record that names neither a stage nor an accepted version sits after the rules.
        let rank = match (c.rejected_by, c.accepted_version) {
            (None, None) => (6, 0),
            _ => stage_rank(c.rejected_by, blocked),
        };
        *stopped.entry((rank, stage)).or_default() += 1;
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
            // Only accepted candidates have no stage that stopped them.
            (rank, FunnelRow { stage, stopped: n, failed_any, accepted: rank == stage_rank(None, false) })
        })
        .collect();
    // Rules that failed somewhere but never first still belong in the table.
    for (rule, n) in failed_any {
        let stage = StoppedBy::FullRule(rule).to_string();
        if !rows.iter().any(|(_, r)| r.stage == stage) {
            let rank = stage_rank(Some(StoppedBy::FullRule(rule)), false);
            rows.push((rank, FunnelRow { stage, stopped: 0, failed_any: Some(n), accepted: false }));
        }
    }
    rows.sort_by_key(|(rank, _)| *rank);
    rows.into_iter().map(|(_, r)| r).collect()
}

fn ratio(nc: Option<(usize, usize)>) -> Option<f64> {
    nc.filter(|(n, _)| *n > 0).map(|(n, c)| c as f64 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::events::{EngineProjector, EvalSummary};
    use emend_journal::MemoryJournal;
    use emend_stats::RuleKind;
    use serde_json::json;

    #[test]
    fn nice_steps() {
        let steps = [0.01, 0.02, 0.05, 0.1];
        assert_eq!(chart::nice_step(0.07, 8.0, &steps), 0.01);
        assert_eq!(chart::nice_step(0.3, 8.0, &steps), 0.05);
        assert_eq!(chart::nice_step(5.0, 8.0, &steps), 0.1);
    }

    fn cand(id: &str, rejected_by: Option<&str>, outcome: &str, accepted: Option<u64>) -> CandidateRecord {
        let outcome: Resolution = serde_json::from_value(json!(outcome)).unwrap();
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
            credits: vec![],
            asked: None,
            change_kind: Default::default(),
            prediction: None,
        }
    }

    #[test]
    fn funnel_follows_fail_fast_order() {
        let mut failing = cand("c5", Some("full:mcnemar_p_below_alpha"), "rejected", None);
        failing.full = Some(emend_core::candidate::sample_full(
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
            digest: None,
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
            lifecycle: None,
        };
        let mut accepted = cand("r1c1", None, "accepted", Some(2));
        accepted.hash = Some("h2".into());
        let mut full = emend_core::candidate::sample_full(0.2, true, &[]);
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
        assert_eq!(data.versions[1].examples.improved.len(), 2);
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
        assert!(html.contains("No search journaled yet."));
        assert!(html.ends_with("</html>"));
    }

    #[test]
    fn the_search_section_shows_each_search_and_the_true_funnel() {
        let mut j = journal_with_rollback();
        let point = |hash: &str, questions: usize, score: f64, stage: &str| {
            let mut p =
                emend_core::events::ScoredPoint::new(BTreeMap::from([("retrieve.top_k".into(), json!(15))]), score);
            (p.hash, p.questions, p.stage) = (Some(hash.into()), Some(questions), Some(stage.into()));
            p
        };
        let record = emend_core::events::SearchRecord {
            round: 2,
            served_hash: "h1".into(),
            searches: 1,
            draws: 2,
            misses: 0,
            spent: 1.25,
            screened: vec!["t1".into(), "h2".into(), "p1".into()],
            scored: vec![point("t1", 24, 0.4, "trial"), point("h2", 96, 0.7, "trial"), point("p1", 96, 0.6, "prune")],
            proposed: Some("h2".into()),
            global: Some(emend_core::events::GlobalRecord {
                part: "P".into(),
                trials: 2,
                since_best: 0,
                ended: "proposed".into(),
                prune: vec![],
                credits: vec![],
                raced_out: None,
            }),
        };
        j.append(vec![Event::Searched(Box::new(record)).to_new()]).unwrap();
        let data = gather(&j, &BTreeMap::new()).unwrap();
        let f = &data.search_funnel;
        assert_eq!(
            (f.screened, f.raced_out, f.whole_part, f.prune_tests, f.proposed, f.confirmed),
            (2, 1, 1, 1, 1, 1),
            "h2 was accepted as v2"
        );
        let html = render(&data);
        assert!(html.contains("<h2 id=\"search\">Search</h2>"), "{html}");
        assert!(html.contains("<svg id=\"search-chart\""));
        assert!(html.contains("<td class=\"num\">2 / 1 / 0</td>"), "two trials, one prune test");
        assert!(html.contains("70.0% <code>h2</code> (1 field changed) <b>proposed</b>"), "{html}");
        assert_eq!(html, render(&gather(&j, &BTreeMap::new()).unwrap()), "deterministic");
    }
}
