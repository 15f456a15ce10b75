//! The engine's journal events and the projector that derives the stores
//! from them: rounds, dimension_effects, scoreboard, question_history,
//! candidate_outcomes, stage_audits, layer_a_logs, hypothesis_tree, and the
//! strategy store with the served and best-ever pointers (plus evaluations,
//! for reuse, and escalations).
//!
//! Events carry everything their projections need, so every store can be
//! rebuilt from the events alone. Keys zero-pad numbers so they sort.

use emend_journal::{EventRecord, NewEvent, ProjectError, ProjectionState, Projector};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::candidate::Resolution;
use crate::hypothesis::Hypothesis;
use crate::layer_a::Diagnosis;
pub use crate::outcome::{EvalSummary, LabeledOutcome};
use crate::planner::DimensionEffect;

mod records;
pub use records::{CandidateRecord, ChangeKind, Credit, HASH_ASSIGNMENT, RoundRecord, SplitRecord};
mod search;
pub use search::{GlobalRecord, PruneStep, ScoredPoint, SearchRecord, bits_to_hex, hex_to_bits};

pub const T_ROUNDS: &str = "rounds";
pub const T_EFFECTS: &str = "dimension_effects";
pub const T_SCOREBOARD: &str = "scoreboard";
pub const T_QUESTIONS: &str = "question_history";
pub const T_CANDIDATES: &str = "candidate_outcomes";
pub const T_AUDITS: &str = "stage_audits";
pub const T_LAYER_A: &str = "layer_a_logs";
pub const T_TREE: &str = "hypothesis_tree";
pub const T_STRATEGIES: &str = "strategies";
pub const T_POINTERS: &str = "pointers";
pub const T_EVALUATIONS: &str = "evaluations";
pub const T_ESCALATIONS: &str = "escalations";
pub const T_SEARCHES: &str = "searches";

pub const TREES: [&str; 13] = [
    T_ROUNDS,
    T_EFFECTS,
    T_SCOREBOARD,
    T_QUESTIONS,
    T_CANDIDATES,
    T_AUDITS,
    T_LAYER_A,
    T_TREE,
    T_STRATEGIES,
    T_POINTERS,
    T_EVALUATIONS,
    T_ESCALATIONS,
    T_SEARCHES,
];

pub fn round_key(round: u64) -> String {
    format!("{round:010}")
}

pub fn version_key(version: u64) -> String {
    format!("v/{version:010}")
}

pub fn hash_key(hash: &str) -> String {
    format!("h/{hash}")
}

pub fn evaluation_key(strategy: &str, harness: &str, dataset: &str) -> String {
    format!("{strategy}/{harness}/{dataset}")
}

/// The engine's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A strategy became a numbered version (init, accepted candidate, hand edit).
    StrategyVersioned {
        version: u64,
        parent: Option<u64>,
        hash: String,
        document: Value,
        origin: String,
        round: Option<u64>,
        note: String,
    },
    /// A full evaluation under a harness and dataset.
    Evaluated {
        strategy_hash: String,
        harness_hash: String,
        dataset_hash: String,
        summary: EvalSummary,
        diagnosis: Diagnosis,
        questions: Vec<LabeledOutcome>,
        /// Under longitudinal replay, the lifecycle schedule the evaluation ran
        /// (append-only, no maintenance, no query side effects, the recency clock).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lifecycle: Option<Box<emend_harness::replay::Lifecycle>>,
    },
    /// The served pointer moved. For rollbacks this is the rollback record.
    ServedChanged {
        from: Option<u64>,
        to: u64,
        hash: String,
        /// init, accept, rollback, restore_best, auto_restore
        cause: String,
        reason: String,
        who: String,
        pinned: bool,
        best_version: Option<u64>,
        best_accuracy: Option<f64>,
        at: String,
    },
    /// The best-ever pointer moved (a better version, or a re-scoring under a changed harness).
    BestChanged {
        version: u64,
        hash: String,
        accuracy: f64,
        harness_hash: String,
        dataset_hash: String,
    },
    /// One candidate's complete gate record.
    CandidateJudged(Box<CandidateRecord>),
    HypothesisUpdated {
        node: Hypothesis,
    },
    /// A candidate class blocked three times as out of scope.
    Escalated {
        class: String,
        round: u64,
        reasons: Vec<String>,
    },
    /// A round's summary.
    RoundFinished(Box<RoundRecord>),
    /// A version may no longer be served automatically nor be the best-ever
    /// (`cause`: `rollback` when a rollback moved away from it, `operator` by hand).
    Quarantined {
        version: u64,
        cause: String,
        reason: String,
        who: String,
        at: String,
    },
    /// An operator lifted a quarantine.
    Unquarantined {
        version: u64,
        reason: String,
        who: String,
        at: String,
    },
    /// A person's verdict on a pending version: approved (the `served_changed`
    /// with cause `approve` follows in the same batch) or rejected (closed).
    PendingReviewed {
        version: u64,
        approved: bool,
        reason: String,
        who: String,
        at: String,
        /// Approved with `--force` although it was tested against another
        /// version than the one served when it was approved (which it names).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forced_over: Option<u64>,
        /// Approved after `approve --retest`: the id of the candidate record of
        /// its confirm test against the version served then.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retest: Option<String>,
    },
    /// A person resolved an escalation (its direction may be proposed again) or reopened it.
    EscalationReviewed {
        class: String,
        resolved: bool,
        reason: String,
        who: String,
        at: String,
    },
    /// A hook failed (non-zero exit, spawn error, timeout) after the change it reported was committed.
    /// One search of the search proposer: what it screened and scored, so
    /// that a later run (or a resumed one) goes on from the same state.
    Searched(Box<SearchRecord>),
    /// `emend journal repair` rebuilt the read view from the store: where the view first
    /// differed from the store (`seq`) and how.
    ViewRepaired {
        seq: u64,
        detail: String,
        who: String,
        at: String,
    },
    HookFailed {
        /// `on_served` or `on_pending`.
        hook: String,
        version: u64,
        /// What changed: accepted, approved, rollback, restore-best, auto-restore, pending.
        change: String,
        error: String,
        at: String,
    },
    /// A newer pending version tested against the same served version replaced
    /// this one as the live option; it stays in the journal and is listed by
    /// `pending --all`.
    PendingSuperseded {
        version: u64,
        superseded_by: u64,
        at: String,
    },
    /// The operator's token budget for the project's next runs (`rollback
    /// --max-tokens`): the search and the confirm test keep the smaller of it
    /// and `cost.max_tokens`.
    BudgetSet {
        max_tokens: u64,
        reason: String,
        who: String,
        at: String,
    },
    /// A run stopped before round `round` finished (or started): nothing of
    /// that round was journaled; the next run uses its number again.
    Interrupted {
        round: u64,
        /// `preempted`, `SIGINT`, `SIGTERM` or `output closed`.
        cause: String,
        /// For a preemption: the operator's command that asked, and who.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested_by: Option<String>,
        who: String,
        at: String,
    },
}

/// Keys of the serving state in the strategies tree (beside `v/` and `h/`).
pub fn pending_key(version: u64) -> String {
    format!("p/{version:010}")
}

pub fn quarantine_key(version: u64) -> String {
    format!("q/{version:010}")
}

impl Event {
    pub fn kind(&self) -> &'static str {
        match self {
            Event::StrategyVersioned { .. } => "strategy_versioned",
            Event::Evaluated { .. } => "evaluated",
            Event::ServedChanged { .. } => "served_changed",
            Event::BestChanged { .. } => "best_changed",
            Event::CandidateJudged(_) => "candidate_judged",
            Event::HypothesisUpdated { .. } => "hypothesis_updated",
            Event::Escalated { .. } => "escalated",
            Event::RoundFinished(_) => "round_finished",
            Event::Quarantined { .. } => "quarantined",
            Event::Unquarantined { .. } => "unquarantined",
            Event::PendingReviewed { .. } => "pending_reviewed",
            Event::EscalationReviewed { .. } => "escalation_reviewed",
            Event::HookFailed { .. } => "hook_failed",
            Event::ViewRepaired { .. } => "view_repaired",
            Event::Searched(_) => "searched",
            Event::PendingSuperseded { .. } => "pending_superseded",
            Event::Interrupted { .. } => "interrupted",
            Event::BudgetSet { .. } => "budget_set",
        }
    }

    /// The journal's generic form: kind + payload.
    pub fn to_new(&self) -> NewEvent {
        let mut payload = serde_json::to_value(self).expect("events serialize");
        if let Some(m) = payload.as_object_mut() {
            m.remove("kind");
            stamp_actor(m);
        }
        NewEvent::new(self.kind(), payload)
    }

    /// Back from a stored record.
    pub fn from_record(r: &EventRecord) -> Result<Event, String> {
        let mut payload = r.payload.clone();
        match payload.as_object_mut() {
            Some(m) => {
                m.insert("kind".into(), Value::String(r.kind.clone()));
            }
            None => return Err(format!("event {} ({}) has a non-object payload", r.seq, r.kind)),
        }
        serde_json::from_value(payload).map_err(|e| format!("event {} ({}): {e}", r.seq, r.kind))
    }
}

/// Derives the engine's stores from its events.
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineProjector;

fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("projection values serialize")
}

impl Projector for EngineProjector {
    fn trees(&self) -> Vec<String> {
        TREES.iter().map(|t| t.to_string()).collect()
    }

    /// What an `evaluated` event carries, copied per question and strategy (thousands of
    /// entries per evaluation) or whole (results and diagnosis): kept in memory, rebuilt
    /// from the events when the journal is opened, instead of stored a second time.
    fn memory_trees(&self) -> Vec<String> {
        vec![T_QUESTIONS.to_string(), T_EVALUATIONS.to_string(), T_LAYER_A.to_string()]
    }

    fn project(&self, state: &mut dyn ProjectionState, record: &EventRecord) -> Result<(), ProjectError> {
        let event = Event::from_record(record)?;
        match event {
            Event::StrategyVersioned { version, parent, hash, document, origin, round, note } => {
                state.put(
                    T_STRATEGIES,
                    &version_key(version),
                    json!({"version": version, "parent": parent, "hash": hash, "origin": origin, "round": round, "note": note, "seq": record.seq}),
                );
                state.put(T_STRATEGIES, &hash_key(&hash), json!({"document": document, "version": version}));
                if origin == "pending" {
                    state.put(
                        T_STRATEGIES,
                        &pending_key(version),
                        json!({"version": version, "status": "pending", "parent": parent, "round": round, "seq": record.seq}),
                    );
                }
            }
            Event::Evaluated { strategy_hash, harness_hash, dataset_hash, summary, diagnosis, questions, .. } => {
                let key = evaluation_key(&strategy_hash, &harness_hash, &dataset_hash);
                state.put(T_EVALUATIONS, &key, json!({"summary": summary, "questions": questions, "seq": record.seq}));
                state.put(T_LAYER_A, &key, to_value(&diagnosis));
                project_question_history(state, record.seq, &strategy_hash, &harness_hash, &dataset_hash, &questions);
            }
            Event::ServedChanged { to, hash, cause, pinned, reason, .. } => {
                state.put(
                    T_POINTERS,
                    "served",
                    json!({"version": to, "hash": hash, "pinned": pinned, "cause": cause, "reason": reason, "seq": record.seq}),
                );
            }
            Event::BestChanged { version, hash, accuracy, harness_hash, dataset_hash } => {
                state.put(
                    T_POINTERS,
                    "best",
                    json!({"version": version, "hash": hash, "accuracy": accuracy, "harness_hash": harness_hash, "dataset_hash": dataset_hash}),
                );
            }
            Event::CandidateJudged(c) => project_candidate(state, &c)?,
            Event::HypothesisUpdated { node } => {
                state.put(T_TREE, &node.key.clone(), to_value(&node));
            }
            Event::Escalated { class, round, reasons } => {
                state.put(
                    T_ESCALATIONS,
                    &class,
                    json!({"class": class, "round": round, "reasons": reasons, "seq": record.seq}),
                );
            }
            // An escalation without `status` is open (journals before reviews existed project the same).
            Event::EscalationReviewed { class, resolved, reason, who, at } => {
                let review = json!({"resolved": resolved, "reason": reason, "who": who, "at": at, "seq": record.seq});
                let status = if resolved { "resolved" } else { "open" };
                record_review(state, T_ESCALATIONS, &class, status, review).ok_or_else(|| {
                    ProjectError::from(format!("event {}: escalation {class} was never raised", record.seq))
                })?;
            }
            Event::Quarantined { version, cause, reason, who, at } => {
                state.put(
                    T_STRATEGIES,
                    &quarantine_key(version),
                    json!({"version": version, "cause": cause, "reason": reason, "who": who, "at": at, "seq": record.seq}),
                );
            }
            Event::Unquarantined { version, .. } => {
                state.remove(T_STRATEGIES, &quarantine_key(version));
            }
            Event::PendingReviewed { version, approved, reason, who, at, forced_over, retest } => {
                let mut review = json!({"reason": reason, "who": who, "at": at, "seq": record.seq});
                if let Some(f) = forced_over {
                    review["forced_over"] = json!(f);
                }
                if let Some(r) = retest {
                    review["retest"] = json!(r);
                }
                let status = if approved { "approved" } else { "rejected" };
                record_review(state, T_STRATEGIES, &pending_key(version), status, review)
                    .ok_or_else(|| ProjectError::from(format!("event {}: v{version} was never pending", record.seq)))?;
            }
            Event::HookFailed { hook, version, change, error, at } => {
                state.put(
                    T_POINTERS,
                    "hook_failed",
                    json!({"hook": hook, "version": version, "change": change, "error": error, "at": at, "seq": record.seq}),
                );
            }
            e @ (Event::PendingSuperseded { .. } | Event::Interrupted { .. } | Event::BudgetSet { .. }) => {
                project_stop(state, record.seq, e)?
            }
            Event::RoundFinished(r) => project_round(state, &r),
            // The journal's own housekeeping: it changes no projection.
            Event::ViewRepaired { .. } => {}
            Event::Searched(r) => state.put(T_SEARCHES, &format!("{:012}", record.seq), to_value(&r)),
        }
        Ok(())
    }
}

/// A superseded pending version's review, the last interruption of a run, or the operator's budget.
fn project_stop(state: &mut dyn ProjectionState, seq: u64, event: Event) -> Result<(), ProjectError> {
    match event {
        Event::PendingSuperseded { version, superseded_by, at } => {
            let review = json!({"superseded_by": superseded_by, "at": at, "seq": seq});
            record_review(state, T_STRATEGIES, &pending_key(version), "superseded", review)
                .ok_or_else(|| ProjectError::from(format!("event {seq}: v{version} was never pending")))?;
        }
        Event::Interrupted { round, cause, requested_by, who, at } => state.put(
            T_POINTERS,
            "interrupted",
            json!({"round": round, "cause": cause, "requested_by": requested_by, "who": who, "at": at, "seq": seq}),
        ),
        Event::BudgetSet { max_tokens, reason, who, at } => state.put(
            T_POINTERS,
            "budget",
            json!({"max_tokens": max_tokens, "reason": reason, "who": who, "at": at, "seq": seq}),
        ),
        _ => {}
    }
    Ok(())
}

/// One row per question of an evaluation, keyed by question and strategy.
fn project_question_history(
    state: &mut dyn ProjectionState,
    seq: u64,
    strategy_hash: &str,
    harness_hash: &str,
    dataset_hash: &str,
    questions: &[LabeledOutcome],
) {
    for q in questions {
        state.put(
            T_QUESTIONS,
            &format!("{}|{}", q.id, strategy_hash),
            json!({"correct": q.correct, "label": q.label, "harness": harness_hash, "dataset": dataset_hash, "seq": seq}),
        );
    }
}

/// A finished round: its record, and its line of the scoreboard.
fn project_round(state: &mut dyn ProjectionState, r: &RoundRecord) {
    state.put(T_ROUNDS, &round_key(r.round), to_value(r));
    // A finished round closes an earlier interruption.
    state.remove(T_POINTERS, "interrupted");
    state.put(
        T_SCOREBOARD,
        &round_key(r.round),
        json!({"round": r.round, "served_version": r.served_version_after, "served_accuracy": r.served_accuracy,
               "best_version": r.best_version, "best_accuracy": r.best_accuracy, "accepted": r.accepted}),
    );
}

/// A judged candidate: its record, its strategy document (when no version holds
/// it yet), its stage in the round's gate funnel, and its dimension's effect.
fn project_candidate(state: &mut dyn ProjectionState, c: &CandidateRecord) -> Result<(), ProjectError> {
    let key = format!("{}/{}", round_key(c.round), c.id);
    state.put(T_CANDIDATES, &key, to_value(c));
    if let (Some(hash), Some(doc)) = (&c.hash, &c.document)
        && state.get(T_STRATEGIES, &hash_key(hash)).is_none()
    {
        state.put(T_STRATEGIES, &hash_key(hash), json!({"document": doc, "version": null}));
    }
    count_in_funnel(state, c);
    // A candidate with credits counts once per field it changes, each with its own contribution.
    for (credit, delta) in c.credit_deltas() {
        let effect: DimensionEffect =
            state.get(T_EFFECTS, &credit.path).map(serde_json::from_value).transpose()?.unwrap_or_default();
        state.put(T_EFFECTS, &credit.path, to_value(&with_credit(effect, c.outcome, delta)));
    }
    if let Some(change) = c.change.as_ref().filter(|_| c.credits.is_empty()) {
        let effect: DimensionEffect =
            state.get(T_EFFECTS, &change.path).map(serde_json::from_value).transpose()?.unwrap_or_default();
        state.put(T_EFFECTS, &change.path, to_value(&with_candidate(effect, c)));
    }
    Ok(())
}

/// Counts `c` in its round's gate funnel: at the stage that rejected it, or as accepted.
fn count_in_funnel(state: &mut dyn ProjectionState, c: &CandidateRecord) {
    let audit_key = round_key(c.round);
    let mut audit = state.get(T_AUDITS, &audit_key).unwrap_or_else(|| json!({}));
    let stage = c.rejected_by.map_or_else(|| "accepted".to_string(), |s| s.to_string());
    let count = audit.get(&stage).and_then(Value::as_u64).unwrap_or(0) + 1;
    audit[stage.as_str()] = json!(count);
    state.put(T_AUDITS, &audit_key, audit);
}

/// A dimension's effect record with one credited field of a candidate added:
/// its own search-part contribution, not the candidate's confirm-part delta.
fn with_credit(mut effect: DimensionEffect, outcome: Resolution, delta: Option<f64>) -> DimensionEffect {
    effect.tried += 1;
    if outcome == Resolution::Accepted {
        effect.accepted += 1;
    } else if delta.is_some_and(|d| d <= 0.0) {
        effect.reverted += 1;
    }
    effect.total_delta += delta.unwrap_or(0.0);
    effect
}

/// A dimension's effect record with candidate `c` of that dimension added: a candidate
/// that was not accepted and did not help on the search part (probe delta at
/// most 0) counts as reverted. The confirm test's delta is never read.
fn with_candidate(mut effect: DimensionEffect, c: &CandidateRecord) -> DimensionEffect {
    let delta = c.search_delta();
    effect.tried += 1;
    if c.outcome == Resolution::Accepted {
        effect.accepted += 1;
    } else if delta.is_some_and(|d| d <= 0.0) {
        effect.reverted += 1;
    }
    effect.total_delta += delta.unwrap_or(0.0);
    effect
}

/// Sets the `status` and `review` of the entry at `key` of `tree`; `None` when there
/// is no such entry (a review of something never raised).
fn record_review(state: &mut dyn ProjectionState, tree: &str, key: &str, status: &str, review: Value) -> Option<()> {
    let mut entry = state.get(tree, key)?;
    entry["status"] = json!(status);
    entry["review"] = review;
    state.put(tree, key, entry);
    Some(())
}

/// UTC now as RFC 3339, whole seconds (`2026-11-29T14:03:23Z`).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// UTC now as RFC 3339 with milliseconds (`2026-11-29T14:03:23.417Z`).
pub fn now_rfc3339_millis() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let ms = i64::try_from(ms).unwrap_or(i64::MAX).min(jiff::Timestamp::MAX.as_millisecond());
    jiff::Timestamp::from_millisecond(ms).expect("clamped to jiff's range").to_string()
}

/// `secs` since the epoch as RFC 3339 UTC, whole seconds (clamped to year 9999).
pub fn rfc3339(secs: u64) -> String {
    let secs = i64::try_from(secs).unwrap_or(i64::MAX).min(jiff::Timestamp::MAX.as_second());
    jiff::Timestamp::from_second(secs).expect("clamped to jiff's range").to_string()
}

/// The name of this process's real user in the password database (NSS, so
/// LDAP and similar sources count too).
fn user_from_uid() -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd = std::mem::MaybeUninit::<libc::passwd>::uninit();
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; on success `found` points at
    // `pwd`, whose strings live in `buf`, both alive while they are read below.
    let rc = unsafe { libc::getpwuid_r(libc::getuid(), pwd.as_mut_ptr(), buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() {
        return None;
    }
    // SAFETY: `found` is non-null, so `pwd` was filled and `pw_name` is a C string in `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr((*found).pw_name) };
    Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// `name@host`: the process's real user as the password database names it
/// (`getuid`; `$USER` is not read, so a caller cannot rename itself), or
/// `uid N@host` when the database has no name for it.
pub fn who() -> String {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let user = user_from_uid().unwrap_or_else(|| format!("uid {uid}"));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into());
    format!("{user}@{host}")
}

/// What the caller declared with `--by` or `EMEND_ACTOR` (unverified: any
/// caller can say anything), recorded beside `who`.
static DECLARED_ACTOR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records the declared actor of this process (the first call wins; empty is ignored).
pub fn declare_actor(by: &str) {
    let by = by.trim();
    if !by.is_empty() {
        let _ = DECLARED_ACTOR.set(by.to_string());
    }
}

pub fn declared_actor() -> Option<&'static str> {
    DECLARED_ACTOR.get().map(String::as_str)
}

/// An event that names a person (`who`) also records the process's uid and,
/// when the caller declared one, `by`: stamped where every event is written.
fn stamp_actor(m: &mut serde_json::Map<String, Value>) {
    if m.contains_key("who") {
        // SAFETY: getuid has no preconditions and cannot fail.
        m.insert("uid".into(), json!(unsafe { libc::getuid() }));
        if let Some(by) = declared_actor() {
            m.insert("by".into(), json!(by));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::Change;
    use emend_journal::{EventLog, MemoryJournal};
    use std::collections::BTreeMap;

    #[test]
    fn a_contribution_measured_on_few_questions_shows_how_little_it_pins_down() {
        let credit = |questions: usize, discordant: Option<(u64, u64)>| Credit {
            key: "retrieve.top_k::increase".into(),
            path: "retrieve.top_k".into(),
            from: serde_json::json!(5),
            to: serde_json::json!(40),
            delta: Some(0.25),
            questions,
            discordant,
            earlier: false,
        };
        // Raced out after 24 questions: 6 only the kept strategy answers, none the other way.
        let few = credit(24, Some((6, 0)));
        let (low, high) = few.interval().unwrap();
        // Conditional on 6 discordant questions the upper end is 6 / 24: the lower end is what is in doubt.
        assert!(low > 0.0 && low < 0.05 && (high - 0.25).abs() < 1e-12, "[{low}, {high}]");
        let line = few.describe();
        assert!(line.starts_with("retrieve.top_k 5 -> 40 (+25.0 pp on 24 search questions, 95% interval +"), "{line}");
        // The same gain on eight times the questions pins it down far better.
        let many = credit(192, Some((48, 0)));
        let (l2, h2) = many.interval().unwrap();
        assert!(h2 - l2 < (high - low) / 2.0, "[{l2}, {h2}] against [{low}, {high}]");
        // An older record without counts says what it has and no interval.
        assert_eq!(credit(24, None).describe(), "retrieve.top_k 5 -> 40 (+25.0 pp on 24 search questions)");
    }

    #[test]
    fn a_change_summary_counts_the_fields_beyond_the_first() {
        let change = |path: &str| Change { path: path.into(), from: serde_json::json!(5), to: serde_json::json!(15) };
        let mut c = CandidateRecord::new("r1c1", 1, 1, "h", "retrieve.top_k::increase");
        assert_eq!(c.change_summary(), None);
        c.change = Some(change("retrieve.top_k"));
        assert_eq!(c.change_summary().as_deref(), Some("retrieve.top_k 5 -> 15"));
        c.more_changes = vec![change("retrieve.pool")];
        assert_eq!(c.change_summary().as_deref(), Some("retrieve.top_k 5 -> 15 (and 1 more field)"));
        c.more_changes.push(change("assemble.token_budget"));
        assert_eq!(c.change_summary().as_deref(), Some("retrieve.top_k 5 -> 15 (and 2 more fields)"));
    }

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_961_003), "2026-11-29T14:03:23Z");
        // jiff's last instant, which leaves room for every UTC offset.
        assert_eq!(rfc3339(u64::MAX), "9999-12-30T22:00:00Z");
        let now = now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z'), "{now}");
    }

    #[test]
    fn the_user_name_comes_from_the_password_database() {
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let listed = passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
        });
        // A uid served by another NSS source (LDAP) is not in /etc/passwd: nothing to compare with.
        if let Some(name) = listed {
            assert_eq!(user_from_uid().as_deref(), Some(name.as_str()));
        }
    }

    #[test]
    fn events_round_trip_and_project() {
        let mut j = MemoryJournal::new(EngineProjector);
        let ev = Event::StrategyVersioned {
            version: 1,
            parent: None,
            hash: "ab".into(),
            document: json!({"x": 1}),
            origin: "init".into(),
            round: None,
            note: String::new(),
        };
        let recs = j.append(vec![ev.to_new()]).unwrap();
        assert_eq!(Event::from_record(&recs[0]).unwrap(), ev);
        assert_eq!(j.get(T_STRATEGIES, "v/0000000001").unwrap().unwrap()["hash"], "ab");
        assert_eq!(j.get(T_STRATEGIES, "h/ab").unwrap().unwrap()["document"]["x"], 1);
        assert!(j.verify().unwrap().is_ok());
    }

    fn judged(outcome: Resolution, delta: Option<f64>) -> CandidateRecord {
        CandidateRecord {
            id: "c1".into(),
            round: 1,
            hash: None,
            parent_version: 1,
            parent_hash: "p".into(),
            hypothesis: "retrieval.top_k::increase".into(),
            change: Some(Change { path: "retrieval.top_k".into(), from: json!(5), to: json!(8) }),
            document: None,
            motivation: BTreeMap::new(),
            actionability: 0.5,
            ucb: 1.0,
            gates: vec![],
            critic: None,
            // The probe's search-part delta; the record's `delta` is a confirm-part
            // figure of the opposite sign, which no effect may read.
            probe: delta.map(|d| crate::gates::ProbeVerdict {
                n: 50,
                served_accuracy: 0.5,
                candidate_accuracy: 0.5 + d,
                delta: d,
                tolerance: 0.02,
                pass: true,
            }),
            full: None,
            outcome,
            rejected_by: None,
            reason: String::new(),
            delta: delta.map(|d| -d - 0.5),
            alpha: None,
            accepted_version: None,
            more_changes: vec![],
            credits: vec![],
            asked: None,
            change_kind: ChangeKind::Better,
            prediction: None,
        }
    }

    #[test]
    fn a_dimension_effect_counts_search_part_deltas_only() {
        let effect = [
            judged(Resolution::Accepted, Some(0.05)),
            judged(Resolution::Rejected, Some(0.0)),
            judged(Resolution::Rejected, Some(0.01)),
            judged(Resolution::Errored, None),
        ]
        .iter()
        .fold(DimensionEffect::default(), with_candidate);
        assert_eq!((effect.tried, effect.accepted, effect.reverted), (4, 1, 1));
        assert!((effect.total_delta - 0.06).abs() < 1e-12, "{}", effect.total_delta);
    }

    #[test]
    fn a_review_marks_its_escalation_and_a_review_of_nothing_is_refused() {
        let mut j = MemoryJournal::new(EngineProjector);
        let review = |class: &str| Event::EscalationReviewed {
            class: class.into(),
            resolved: true,
            reason: "schema changed".into(),
            who: "ann".into(),
            at: "2026-12-01T00:00:00Z".into(),
        };
        assert!(j.append(vec![review("prompt").to_new()]).is_err(), "never raised");
        let raised = Event::Escalated { class: "prompt".into(), round: 3, reasons: vec!["out of scope".into()] };
        j.append(vec![raised.to_new(), review("prompt").to_new()]).unwrap();
        let e = j.get(T_ESCALATIONS, "prompt").unwrap().unwrap();
        assert_eq!((&e["status"], &e["review"]["who"], &e["round"]), (&json!("resolved"), &json!("ann"), &json!(3)));
    }
}
