//! The read side: typed views of what `show`, `log` and `status` print,
//! built from [`Store`] queries. The CLI renders a view as text or
//! serializes the same value as `--json`, and the HTML report reads the same
//! example type, so the three cannot disagree.
//!
//! Views hold no terminal codes and no formatting: they are the facts, named.

use std::collections::BTreeMap;

use emend_journal::EventLog;
use serde::Serialize;
use serde_json::Value;

use crate::texts::{self, QuestionText};
use emend_core::candidate::{FullRecord, Resolution, StoppedBy};
use emend_core::config::Project;
use emend_core::confirm::ConfirmState;
use emend_core::cost::VersionCost;
use emend_core::events::{CandidateRecord, Credit, Event, T_QUESTIONS};
use emend_core::percent::points;
use emend_core::served::FileState;
use emend_core::store::{Store, StoreError, VersionInfo};

mod figures;
mod status;
mod trials;

pub use figures::{Figures, PartFigure, last_split, recorded_figures};
pub use status::{ConfirmView, LlmView, StatusError, StatusView};
pub use trials::{SearchFunnel, SearchSummary, TrialRow, TrialState, TrialsView};

type Result<T> = std::result::Result<T, StoreError>;

/// The heading over a searched candidate's kept fields, wherever a reviewer reads them.
pub const KEPT_FIELDS: &str = "fields kept after pruning (search-part contribution when reverted alone)";

/// A candidate's credits, largest contribution first (unmeasured ones last, then by path).
pub fn kept_fields(credits: &[Credit]) -> Vec<&Credit> {
    let mut out: Vec<&Credit> = credits.iter().collect();
    out.sort_by(|a, b| {
        let key = |c: &Credit| c.delta.unwrap_or(f64::NEG_INFINITY);
        key(b).total_cmp(&key(a)).then(a.path.cmp(&b.path))
    });
    out
}

/// One line on a searched candidate's kept fields: `3 fields kept, largest
/// contribution retrieve.top_k +6.2 pp`; None without credits.
pub fn kept_summary(credits: &[Credit]) -> Option<String> {
    let n = credits.len();
    let plural = if n == 1 { "" } else { "s" };
    let largest = kept_fields(credits).into_iter().next()?;
    Some(match largest.delta {
        Some(d) => format!("{n} field{plural} kept, largest contribution {} {} pp", largest.path, points(d, 1)),
        None => format!("{n} field{plural} kept, contribution{plural} not measured"),
    })
}

/// A dataset question as `show` and the report present it; `before` and
/// `after` are its stage under the parent and the candidate when known.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QuestionView {
    pub id: String,
    pub category: String,
    pub question: String,
    pub gold_answer: String,
    pub evidence: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

impl QuestionView {
    /// The question's text when the task set has it (ids only otherwise).
    pub fn of(id: &str, texts: &BTreeMap<String, QuestionText>) -> QuestionView {
        let t = texts.get(id).cloned().unwrap_or_default();
        QuestionView {
            id: id.to_string(),
            category: t.category,
            question: t.question,
            gold_answer: t.gold,
            evidence: t.evidence,
            before: None,
            after: None,
        }
    }

    /// Whether the task set gave this question a text.
    pub fn has_text(&self) -> bool {
        !self.question.is_empty()
    }
}

/// Improved and regressed questions of a full test: the first few of each
/// side, and how many there were.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Examples {
    pub improved: Vec<QuestionView>,
    pub regressed: Vec<QuestionView>,
    pub improved_total: usize,
    pub regressed_total: usize,
}

impl Examples {
    /// The first `limit` examples of each side of `full`.
    pub fn of(full: &FullRecord, limit: usize, texts: &BTreeMap<String, QuestionText>) -> Examples {
        let pick = |ids: &[String]| ids.iter().take(limit).map(|id| QuestionView::of(id, texts)).collect();
        Examples {
            improved: pick(&full.improved_examples),
            regressed: pick(&full.regressed_examples),
            improved_total: full.improved,
            regressed_total: full.regressed,
        }
    }
}

/// A journaled version: its name with the pointers that name it, origin,
/// parent and recorded accuracy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionView {
    pub version: u64,
    /// `v2 (served, best)`.
    pub name: String,
    pub hash: String,
    pub parent: Option<u64>,
    pub origin: String,
    pub round: Option<u64>,
    pub note: String,
    /// Its measured whole-task-set accuracy (`figures.whole`).
    pub accuracy: Option<f64>,
    /// Its measured accuracies on the whole set and on each part.
    pub figures: Option<Figures>,
    /// Its mean context tokens a question on the whole set, beside its parent's and v1's.
    pub cost: Option<VersionCost>,
}

/// The parent's Layer A diagnosis that motivated a candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerAView {
    pub n: usize,
    pub failures: usize,
    /// label -> count, every label.
    pub counts: BTreeMap<String, usize>,
    /// category -> motivating label -> count.
    pub motivating_by_category: BTreeMap<String, BTreeMap<String, usize>>,
    /// motivating label -> up to three example questions.
    pub examples: BTreeMap<String, Vec<QuestionView>>,
}

/// A hypothesis node as it stands now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HypothesisView {
    pub key: String,
    pub status: String,
    pub visits: u32,
    pub mean_reward: f64,
    pub best_delta: Option<f64>,
    pub evidence_for: u32,
    pub evidence_against: u32,
}

/// `emend show`: what changed and why, for a version or a candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShowView {
    /// `v2` or the candidate id.
    pub target: String,
    /// Set when the target is a version.
    pub version: Option<VersionView>,
    /// The name of what the diff is against (`v1`).
    pub parent: Option<String>,
    /// Unified diff against the parent (empty: same content; absent: no parent or no document).
    pub diff: Option<String>,
    /// The gate record of the candidate (for a version: the one it accepted).
    pub candidate: Option<CandidateRecord>,
    pub layer_a: Option<LayerAView>,
    pub hypothesis_now: Option<HypothesisView>,
    pub examples: Examples,
    /// A version's serving state: its review (pending, approved, rejected) and quarantine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving: Option<Value>,
    /// Which population the candidate's confirm test speaks for, under the
    /// split of its round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<String>,
}

/// Examples of improved and regressed questions `show` lists per side.
const SHOW_EXAMPLES: usize = 5;
/// Example questions per motivating label.
const LAYER_A_EXAMPLES: usize = 3;

impl ShowView {
    /// The view of journaled version `version` (None when there is none).
    pub fn of_version<L: EventLog + ?Sized>(
        log: &L,
        texts: &BTreeMap<String, QuestionText>,
        version: u64,
    ) -> Result<Option<ShowView>> {
        let store = Store::new(log);
        let Some(info) = store.version(version)? else { return Ok(None) };
        let document = store.document(&info.hash)?;
        let parent_doc = match info.parent {
            Some(p) => match store.version(p)? {
                Some(pi) => store.document(&pi.hash)?,
                None => None,
            },
            None => None,
        };
        let record = store.candidates()?.into_iter().find(|c| c.accepted_version == Some(version));
        let name = format!("v{version}");
        let parent = info.parent.map(|p| format!("v{p}"));
        let diff = diff_of(parent_doc.as_ref(), parent.as_deref(), document.as_ref(), &name);
        let version = version_view(log, info)?;
        let mut view = ShowView::bare(name, Some(version), parent, diff);
        view.attach(log, texts, record)?;
        Ok(Some(view))
    }

    /// The view of a candidate's gate record.
    pub fn of_candidate<L: EventLog + ?Sized>(
        log: &L,
        texts: &BTreeMap<String, QuestionText>,
        record: CandidateRecord,
    ) -> Result<ShowView> {
        let parent_doc = Store::new(log).document(&record.parent_hash)?;
        let parent = format!("v{}", record.parent_version);
        let diff = diff_of(parent_doc.as_ref(), Some(&parent), record.document.as_ref(), &record.id);
        let mut view = ShowView::bare(record.id.clone(), None, Some(parent), diff);
        view.attach(log, texts, Some(record))?;
        Ok(view)
    }

    fn bare(target: String, version: Option<VersionView>, parent: Option<String>, diff: Option<String>) -> ShowView {
        ShowView {
            target,
            version,
            parent,
            diff,
            candidate: None,
            layer_a: None,
            hypothesis_now: None,
            examples: Examples::default(),
            serving: None,
            guarantee: None,
        }
    }

    /// The candidate's diagnosis, hypothesis and examples.
    fn attach<L: EventLog + ?Sized>(
        &mut self,
        log: &L,
        texts: &BTreeMap<String, QuestionText>,
        record: Option<CandidateRecord>,
    ) -> Result<()> {
        let Some(rec) = record else { return Ok(()) };
        let store = Store::new(log);
        self.layer_a = layer_a_view(log, &rec, texts)?;
        self.hypothesis_now = store.tree()?.get(&rec.hypothesis).map(|h| HypothesisView {
            key: h.key.clone(),
            status: h.status.as_str().to_string(),
            visits: h.visits,
            mean_reward: h.mean_reward(),
            best_delta: h.best_delta,
            evidence_for: h.evidence_for,
            evidence_against: h.evidence_against,
        });
        if let (Some(full), Some(hash)) = (&rec.full, &rec.hash) {
            let mut examples = Examples::of(full, SHOW_EXAMPLES, texts);
            for q in examples.improved.iter_mut().chain(examples.regressed.iter_mut()) {
                q.before = Some(stage_of(log, &q.id, &rec.parent_hash));
                q.after = Some(stage_of(log, &q.id, hash));
            }
            self.examples = examples;
        }
        if rec.full.is_some() {
            self.guarantee = store.split_of_round(rec.round)?.map(|s| s.population());
        }
        self.candidate = Some(rec);
        Ok(())
    }
}

fn diff_of(parent_doc: Option<&Value>, parent: Option<&str>, doc: Option<&Value>, name: &str) -> Option<String> {
    match (parent_doc, parent, doc) {
        (Some(p), Some(pn), Some(d)) if !d.is_null() => Some(texts::unified_diff(p, d, pn, name)),
        _ => None,
    }
}

fn version_view<L: EventLog + ?Sized>(log: &L, info: VersionInfo) -> Result<VersionView> {
    let store = Store::new(log);
    let served = store.served()?;
    let best = store.best()?;
    let mut tags = Vec::new();
    if served.is_some_and(|s| s.version == info.version) {
        tags.push("served");
    }
    if best.as_ref().is_some_and(|b| b.version == info.version) {
        tags.push("best");
    }
    let name =
        if tags.is_empty() { format!("v{}", info.version) } else { format!("v{} ({})", info.version, tags.join(", ")) };
    let figures = recorded_figures(log, &info.hash, best.as_ref(), last_split(log)?.as_ref())?;
    let accuracy = figures.as_ref().map(|f| f.whole.accuracy);
    let cost = store.version_cost(info.version)?;
    Ok(VersionView {
        version: info.version,
        name,
        hash: info.hash,
        parent: info.parent,
        origin: info.origin,
        round: info.round,
        note: info.note,
        accuracy,
        figures,
        cost,
    })
}

/// Which stage held a question's evidence under a strategy: its Layer A
/// label, `correct`, or `?` when no evaluation of that strategy is recorded.
fn stage_of<L: EventLog + ?Sized>(log: &L, qid: &str, hash: &str) -> String {
    match log.get(T_QUESTIONS, &format!("{qid}|{hash}")) {
        Ok(Some(v)) => match v["label"].as_str() {
            Some(l) => l.to_string(),
            None if v["correct"] == Value::Bool(true) => "correct".to_string(),
            None => "wrong".to_string(),
        },
        _ => "?".to_string(),
    }
}

/// The latest recorded diagnosis of the candidate's parent, narrowed to the
/// labels that motivated the candidate.
fn layer_a_view<L: EventLog + ?Sized>(
    log: &L,
    rec: &CandidateRecord,
    texts: &BTreeMap<String, QuestionText>,
) -> Result<Option<LayerAView>> {
    let store = Store::new(log);
    let Some((key, _)) = store.latest_evaluation(&rec.parent_hash)? else { return Ok(None) };
    let Some(d) = store.diagnosis(&key)? else { return Ok(None) };
    let motivating = |label: &String| rec.motivation.contains_key(label);
    let motivating_by_category = d
        .by_category
        .iter()
        .map(|(cat, labels)| {
            let m: BTreeMap<String, usize> =
                labels.iter().filter(|(l, _)| motivating(l)).map(|(l, n)| (l.clone(), *n)).collect();
            (cat.clone(), m)
        })
        .filter(|(_, m)| !m.is_empty())
        .collect();
    let examples = rec
        .motivation
        .keys()
        .map(|label| {
            let ids = d.examples.get(label).map(Vec::as_slice).unwrap_or_default();
            (label.clone(), ids.iter().take(LAYER_A_EXAMPLES).map(|id| QuestionView::of(id, texts)).collect())
        })
        .collect();
    Ok(Some(LayerAView { n: d.n, failures: d.failures, counts: d.counts, motivating_by_category, examples }))
}

/// One candidate of a round in `emend log`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogCandidate {
    pub id: String,
    pub hypothesis: String,
    /// `path from -> to`, when a change was proposed (with how many more
    /// fields a multi-field candidate moves).
    pub change: Option<String>,
    pub outcome: Resolution,
    pub rejected_by: Option<StoppedBy>,
    pub reason: String,
    pub delta: Option<f64>,
    /// Beside an accepted candidate's raw confirm delta: the selection-adjusted gain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjusted: Option<emend_core::candidate::AdjustedGain>,
    /// The confirm part's mean context tokens, served and candidate, when the confirm test ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<emend_stats::Cost>,
    /// What a priced or cheaper candidate showed ([`emend_core::candidate::FullRecord::claim_summary`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// `cheaper` for a candidate that claims the same quality for less context.
    #[serde(skip_serializing_if = "emend_core::events::ChangeKind::is_better")]
    pub change_kind: emend_core::events::ChangeKind,
    /// A searched candidate's kept fields and their search-part contributions, as recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub credits: Vec<Credit>,
    /// The critic's verdict on a candidate of several fields (its label for
    /// each field, the share of failures they target, the tokens it read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critic: Option<emend_core::critic::CriticVerdict>,
    /// The version the candidate became, when it passed every gate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// For a version that went through manual approval, its state now:
    /// `pending`, `approved`, `rejected` or `superseded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<String>,
    /// A person's proposal (`emend propose`): its prediction and verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction: Option<emend_core::prediction::PredictionRecord>,
}

/// One entry of `emend log`, with the journal sequence number of its event.
/// `kind` is `round`, `hand_edit`, `escalated`, or the served pointer's
/// cause (`init`, `rollback`, `restore_best`, `auto_restore`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LogEntry {
    Round {
        seq: u64,
        kind: &'static str,
        round: u64,
        at: String,
        served_before: u64,
        served_after: u64,
        served_accuracy: f64,
        /// The served version's mean context tokens, beside its parent's and v1's.
        served_cost: Option<VersionCost>,
        accepted: Option<String>,
        candidates: Vec<LogCandidate>,
    },
    Moved {
        seq: u64,
        kind: String,
        from: Option<u64>,
        to: u64,
        reason: String,
        who: String,
        at: String,
    },
    HandEdit {
        seq: u64,
        kind: &'static str,
        version: u64,
        reason: String,
    },
    Escalated {
        seq: u64,
        kind: &'static str,
        class: String,
        round: u64,
        reason: String,
    },
    /// A serving event (pending, quarantine, review, escalation review, hook
    /// failure) or a search that found nothing (`searched`), with its sentence.
    Serving {
        seq: u64,
        kind: String,
        version: Option<u64>,
        text: String,
    },
}

/// `emend log`: rounds with their decisions and rejections, and every
/// served-pointer move that was not an accept, in journal order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogView {
    pub entries: Vec<LogEntry>,
}

/// Whether a `strategy_versioned` record has this origin.
fn origin_is(record: &emend_journal::EventRecord, origin: &str) -> bool {
    record.payload.get("origin").and_then(Value::as_str) == Some(origin)
}

impl LogView {
    pub fn build<L: EventLog + ?Sized>(log: &L) -> Result<LogView> {
        let mut entries = Vec::new();
        let mut pending = Vec::new();
        // Each version's hash and each strategy's latest whole-set accuracy:
        // a round prints the served version's recorded evaluation (older
        // journals could hold an estimate in the round record).
        let mut hashes: BTreeMap<u64, String> = BTreeMap::new();
        let mut measured: BTreeMap<String, f64> = BTreeMap::new();
        for record in log.read_from(1)? {
            let event = Event::from_record(&record).map_err(StoreError::Corrupt)?;
            let seq = record.seq;
            note_measured(&event, &mut hashes, &mut measured);
            // `who` is the OS account; a declared actor (`--by`, EMEND_ACTOR) is shown beside it.
            let declared = record.payload.get("by").and_then(Value::as_str);
            let w = |who: String| match declared {
                Some(by) => format!("{who} (declared: {by})"),
                None => who,
            };
            match event {
                Event::CandidateJudged(c) if c.hypothesis != emend_core::candidate::RETEST => {
                    pending.push(LogCandidate {
                        change: c.change_summary(),
                        id: c.id,
                        hypothesis: c.hypothesis,
                        outcome: c.outcome,
                        rejected_by: c.rejected_by,
                        reason: c.reason,
                        delta: c.delta,
                        adjusted: c.full.as_ref().and_then(|f| f.adjusted_gain()),
                        cost: c.full.as_ref().and_then(|f| f.cost),
                        claim: c.full.as_ref().and_then(|f| f.claim_summary()),
                        change_kind: c.change_kind,
                        credits: c.credits,
                        critic: c.critic.filter(|v| v.fields.len() > 1),
                        version: c.accepted_version,
                        review: None,
                        prediction: c.prediction,
                    })
                }
                Event::RoundFinished(r) => entries.push(LogEntry::Round {
                    seq,
                    kind: "round",
                    round: r.round,
                    at: r.at,
                    served_before: r.served_version_before,
                    served_after: r.served_version_after,
                    served_accuracy: hashes
                        .get(&r.served_version_after)
                        .and_then(|h| measured.get(h))
                        .copied()
                        .unwrap_or(r.served_accuracy),
                    served_cost: None,
                    accepted: r.accepted,
                    candidates: std::mem::take(&mut pending),
                }),
                Event::ServedChanged { from, to, cause, reason, who, at, .. } if cause != "accept" => {
                    entries.push(LogEntry::Moved { seq, kind: cause, from, to, reason, who: w(who), at })
                }
                Event::StrategyVersioned { version, origin, note, .. } if origin == "hand_edit" => {
                    entries.push(LogEntry::HandEdit { seq, kind: "hand_edit", version, reason: note })
                }
                Event::Escalated { class, round, reasons } => entries.push(LogEntry::Escalated {
                    seq,
                    kind: "escalated",
                    class,
                    round,
                    reason: reasons.join("; "),
                }),
                other => entries.extend(serving_entry(&record, other)),
            }
        }
        let store = Store::new(log);
        let reviews = store.reviews()?;
        let mut costs: BTreeMap<u64, Option<VersionCost>> = BTreeMap::new();
        for entry in &mut entries {
            if let LogEntry::Round { candidates, served_after, served_cost, .. } = entry {
                // Most rounds serve a version an earlier round served: read each version's cost once.
                if !costs.contains_key(served_after) {
                    costs.insert(*served_after, store.version_cost(*served_after)?);
                }
                *served_cost = costs[served_after];
                for c in candidates.iter_mut() {
                    let review = c.version.and_then(|v| reviews.get(&v));
                    c.review = review.and_then(|r| r["status"].as_str()).map(str::to_string);
                }
            }
        }
        Ok(LogView { entries })
    }

    /// Keeps the last `n` entries.
    pub fn keep_last(&mut self, n: usize) {
        let skip = self.entries.len().saturating_sub(n);
        self.entries.drain(..skip);
    }
}

/// A serving event's line of the log (pending, quarantine, review, supersession,
/// interruption, retest, hook failure, a search that sent nothing on); `None` for the rest.
fn serving_entry(record: &emend_journal::EventRecord, event: Event) -> Option<LogEntry> {
    let seq = record.seq;
    // `who` is the OS account; a declared actor (`--by`, EMEND_ACTOR) is shown beside it.
    let declared = record.payload.get("by").and_then(Value::as_str);
    let w = |who: String| match declared {
        Some(by) => format!("{who} (declared: {by})"),
        None => who,
    };
    match event {
        Event::StrategyVersioned { version, parent, round, .. } if origin_is(record, "pending") => {
            let text = format!(
                "pending: v{version} (child of v{}, round {}) passed every gate and waits for approval",
                parent.unwrap_or(0),
                round.unwrap_or(0)
            );
            Some(LogEntry::Serving { seq, kind: "pending".into(), version: Some(version), text })
        }
        Event::Quarantined { version, cause, reason, who, at } => {
            let text = format!("quarantined v{version} ({cause}) by {} at {at}: {reason}", w(who));
            Some(LogEntry::Serving { seq, kind: "quarantined".into(), version: Some(version), text })
        }
        Event::Unquarantined { version, reason, who, at } => {
            let text = format!("unquarantined v{version} by {} at {at}: {reason}", w(who));
            Some(LogEntry::Serving { seq, kind: "unquarantined".into(), version: Some(version), text })
        }
        Event::PendingReviewed { version, approved, reason, who, at, forced_over, retest } => {
            let verdict = if approved { "approved" } else { "rejected" };
            let how = match (forced_over, retest) {
                (Some(s), _) => format!(" (forced over v{s}, which it was never tested against)"),
                (None, Some(id)) => format!(" (after a passed retest, {id})"),
                (None, None) => String::new(),
            };
            let text = format!("{verdict} v{version}{how} by {} at {at}: {reason}", w(who));
            Some(LogEntry::Serving { seq, kind: verdict.into(), version: Some(version), text })
        }
        Event::EscalationReviewed { class, resolved, reason, who, at } => {
            let verdict = if resolved { "resolved" } else { "reopened" };
            let text = format!("escalation {class} {verdict} by {} at {at}: {reason}", w(who));
            Some(LogEntry::Serving { seq, kind: format!("escalation_{verdict}"), version: None, text })
        }
        Event::PendingSuperseded { version, superseded_by, at } => {
            let text = format!(
                "superseded v{version} by v{superseded_by} (pending, tested against the same served version) at {at}"
            );
            Some(LogEntry::Serving { seq, kind: "superseded".into(), version: Some(version), text })
        }
        Event::Interrupted { round, cause, requested_by, at, .. } => {
            let by = requested_by.map_or(String::new(), |r| format!(" by {r}"));
            let text = format!("round {round} interrupted ({cause}{by}) at {at}: nothing of it was journaled");
            Some(LogEntry::Serving { seq, kind: "interrupted".into(), version: None, text })
        }
        Event::ViewRepaired { seq: differed, detail, who, at } => {
            Some(view_repaired(seq, differed, &detail, &w(who), &at))
        }
        Event::BudgetSet { max_tokens, reason, who, at } => {
            let text = format!(
                "budget: the next runs keep {max_tokens} mean context tokens a question (cost.max_tokens), set by {} \
                 at {at}: {reason}",
                w(who)
            );
            Some(LogEntry::Serving { seq, kind: "budget_set".into(), version: None, text })
        }
        Event::HookFailed { hook, version, change, error, at } => {
            let text = format!("hooks.{hook} failed for v{version} ({change}) at {at}: {error}");
            Some(LogEntry::Serving { seq, kind: "hook_failed".into(), version: Some(version), text })
        }
        // A search that sent a candidate on shows as that round's candidate.
        Event::Searched(r) if r.proposed.is_none() => {
            let text = format!(
                "round {}: a search around {} screened {} strategies ({:.2} full-evaluation equivalents) \
                 and found nothing worth a confirm test",
                r.round,
                &r.served_hash[..12.min(r.served_hash.len())],
                r.screened.len(),
                r.spent
            );
            Some(LogEntry::Serving { seq, kind: "searched".into(), version: None, text })
        }
        Event::CandidateJudged(c) if c.hypothesis == emend_core::candidate::RETEST => {
            let text = format!("{}: {}", c.id, c.reason);
            Some(LogEntry::Serving { seq, kind: "retest".into(), version: None, text })
        }
        _ => None,
    }
}

/// Notes a version's hash or a strategy's whole-set accuracy as the log walks the journal.
fn note_measured(event: &Event, hashes: &mut BTreeMap<u64, String>, measured: &mut BTreeMap<String, f64>) {
    match event {
        Event::StrategyVersioned { version, hash, .. } => {
            hashes.insert(*version, hash.clone());
        }
        Event::Evaluated { strategy_hash, summary, .. } => {
            measured.insert(strategy_hash.clone(), summary.accuracy);
        }
        _ => {}
    }
}

/// The log's line for a rebuilt read view.
fn view_repaired(seq: u64, differed: u64, detail: &str, who: &str, at: &str) -> LogEntry {
    let text =
        format!("the read view was rebuilt from the store by {who} at {at}: it differed at seq {differed}: {detail}");
    LogEntry::Serving { seq, kind: "view_repaired".into(), version: None, text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn credit(path: &str, delta: Option<f64>, questions: usize) -> Credit {
        Credit {
            key: format!("{path}::increase"),
            path: path.into(),
            from: json!(5),
            to: json!(40),
            delta,
            questions,
            discordant: None,
            earlier: false,
        }
    }

    #[test]
    fn kept_fields_list_the_largest_contribution_first_and_unmeasured_ones_last() {
        let credits = vec![
            credit("b.x", None, 0),
            credit("a.y", Some(0.01), 96),
            credit("c.z", Some(0.062), 193),
            credit("a.a", None, 0),
        ];
        let order: Vec<&str> = kept_fields(&credits).iter().map(|c| c.path.as_str()).collect();
        assert_eq!(order, vec!["c.z", "a.y", "a.a", "b.x"]);
        assert_eq!(kept_summary(&credits).as_deref(), Some("4 fields kept, largest contribution c.z +6.2 pp"));
        assert_eq!(kept_summary(&credits[..1]).as_deref(), Some("1 field kept, contribution not measured"));
        assert_eq!(kept_summary(&[]), None);
        assert_eq!(credits[2].describe(), "c.z 5 -> 40 (+6.2 pp on 193 search questions)");
    }
}
