//! A version's measured accuracies: on the whole task set, on the search part
//! and on the confirm part, all from the one recorded whole-set evaluation of
//! that version, so every view prints the same figure for the same version
//! and part. Nothing here is estimated: a version without a recorded
//! evaluation has no figures.

use emend_journal::EventLog;
use serde::Serialize;
use serde_json::Value;

use emend_core::confirm::Parts;
use emend_core::events::{LabeledOutcome, SplitRecord, T_EVALUATIONS};
use emend_core::store::{Best, Store, StoreError};

/// What a reader of the search-part figure must know.
pub const SEARCH_NOTE: &str = "optimistic for a strategy the search chose: it was searched on";
/// What a reader of the confirm-part figure must know.
pub const CONFIRM_NOTE: &str = "unbiased only for the confirm test that first read it";

/// One measured accuracy on one part of the task set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PartFigure {
    pub accuracy: f64,
    pub correct: usize,
    pub n: usize,
}

impl PartFigure {
    fn of<'a>(results: impl Iterator<Item = &'a LabeledOutcome>) -> Option<PartFigure> {
        let (mut correct, mut n) = (0, 0);
        for q in results {
            n += 1;
            correct += usize::from(q.correct);
        }
        (n > 0).then(|| PartFigure { accuracy: correct as f64 / n as f64, correct, n })
    }
}

/// A version's accuracies, measured by evaluating it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// The evaluation they come from (`strategy/harness/dataset`).
    pub evaluation: String,
    /// The whole task set (the figure best-ever and auto-restore compare).
    pub whole: PartFigure,
    /// The search part of the run's split; `None` before any round split the set.
    pub search: Option<PartFigure>,
    /// The confirm part of the run's split; `None` before any round split the set.
    pub confirm: Option<PartFigure>,
}

impl Figures {
    /// The figures of `results`, split as `split` records (when its confirm
    /// part is the one these results split into).
    pub fn of(evaluation: String, results: &[LabeledOutcome], split: Option<&SplitRecord>) -> Option<Figures> {
        let whole = PartFigure::of(results.iter())?;
        let parts = split.and_then(|s| {
            let parts = Parts::of(results, &s.config()).ok()?;
            let hash = emend_core::artifact::sha256_hex(parts.confirm_ids.join("\n").as_bytes());
            (hash == s.confirm_hash).then_some(parts)
        });
        let part = |confirm: bool| {
            parts.as_ref().and_then(|p| PartFigure::of(results.iter().filter(|q| p.confirm.contains(&q.id) == confirm)))
        };
        Some(Figures { evaluation, whole, search: part(false), confirm: part(true) })
    }

    /// `0.6365 (whole set, 999 questions); search part 0.6512 (optimistic); confirm part 0.6218`
    pub fn describe(&self) -> String {
        let mut s = format!("{:.4} on the whole task set ({} questions)", self.whole.accuracy, self.whole.n);
        if let Some(p) = self.search {
            s.push_str(&format!("; search part {:.4} of {} ({SEARCH_NOTE})", p.accuracy, p.n));
        }
        if let Some(p) = self.confirm {
            s.push_str(&format!("; confirm part {:.4} of {} ({CONFIRM_NOTE})", p.accuracy, p.n));
        }
        s
    }
}

/// The figures of the strategy `hash` from the evaluation `show` reads
/// ([`Store::recorded_evaluation`]: under the best-ever pointer's harness and
/// dataset first, else the latest), split as `split` records (the journal's
/// last round's, [`last_split`]).
pub fn recorded_figures<L: EventLog + ?Sized>(
    log: &L,
    hash: &str,
    best: Option<&Best>,
    split: Option<&SplitRecord>,
) -> Result<Option<Figures>, StoreError> {
    let Some((key, _)) = Store::new(log).recorded_evaluation(hash, best)? else { return Ok(None) };
    let Some(v) = log.get(T_EVALUATIONS, &key)? else { return Ok(None) };
    let results: Vec<LabeledOutcome> = serde_json::from_value(v.get("questions").cloned().unwrap_or(Value::Null))
        .map_err(|e| StoreError::Corrupt(format!("evaluation {key}: {e}")))?;
    Ok(Figures::of(key, &results, split))
}

/// The split the journal's last round recorded.
pub fn last_split<L: EventLog + ?Sized>(log: &L) -> Result<Option<SplitRecord>, StoreError> {
    Ok(Store::new(log).last_split()?.map(|(_, s)| s))
}
