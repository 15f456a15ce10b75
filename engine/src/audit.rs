//! The mechanism-fidelity audit: for every mechanism of the pipeline (a group
//! of the schema's evolvable fields), did it run on this task set, did its
//! output reach any context, and does a controlled contrast change outcomes?
//!
//! Per mechanism, in order:
//! 1. Switched off in the served strategy (expansion disabled, no rerank, no
//!    backfill, neutral intent multipliers, ...): `unexercised`, and its
//!    parameters change nothing; only its `switch` field can.
//! 2. Otherwise the contrast (the mechanism off, or moved when it cannot be
//!    off: fusion toggled, windows resized) is evaluated through the
//!    [`Backend`] on the same questions, and compared question by question:
//!    - the served strategy wins significantly more questions than the
//!      contrast (one-sided exact McNemar, p < [`ALPHA`]): `contributing`;
//!    - the contrast wins significantly more: `defective` (it runs and costs
//!      accuracy);
//!    - contexts change (size, gold turns, or items and their order when
//!      the trace reports them) or outcomes change without a significant
//!      direction: `inconclusive`;
//!    - nothing observable changes: `unexercised` (on this task set its
//!      output changes no context and no outcome).
//!
//!    A contrast the schema refuses (a range or an invariant) is
//!    `inconclusive`, with the schema's reason.
//!
//! The search's proposer calls [`audit`] to skip the fields of unexercised
//! mechanisms.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::artifact::{self, Artifact};
use crate::backend::{Backend, BackendError};
use crate::outcome::{Evaluation, OutcomeRecord};
use crate::schema::{StrategySchema, get_path, set_path};
use crate::stats;

/// A mechanism's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Contributing,
    Unexercised,
    Defective,
    Inconclusive,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Contributing => "contributing",
            Status::Unexercised => "unexercised",
            Status::Defective => "defective",
            Status::Inconclusive => "inconclusive",
        }
    }
}

/// What the contrast evaluation showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contrast {
    /// `path: from -> to` of each field the contrast moved.
    pub changes: Vec<String>,
    pub questions: usize,
    /// Questions whose context differs (size, which gold turns it holds, or
    /// which items it holds in which order, when the trace reports them).
    pub changed_contexts: usize,
    /// Correct with the served strategy, wrong with the contrast.
    pub served_only: usize,
    /// Wrong with the served strategy, correct with the contrast.
    pub contrast_only: usize,
}

/// One mechanism's audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MechanismAudit {
    pub mechanism: String,
    /// The evolvable fields it groups.
    pub fields: Vec<String>,
    /// The field that turns it on, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
    pub status: Status,
    /// One sentence saying why.
    pub evidence: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contrast: Option<Contrast>,
}

/// Why an audit could not run.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the served strategy: {0}")]
    Served(String),
    #[error("evaluating the {mechanism} contrast: {source}")]
    Evaluate {
        mechanism: String,
        #[source]
        source: BackendError,
    },
}

/// One mechanism: its fields, how to tell it is off, and its contrast.
struct Mechanism {
    name: &'static str,
    fields: &'static [&'static str],
    switch: Option<&'static str>,
    /// Why it is off in `doc`, if it is.
    off: fn(&Value) -> Option<String>,
    /// The field moves of the contrast, from `doc`.
    contrast: fn(&Value) -> Vec<(&'static str, Value)>,
    /// What the served evaluation's trace says about its execution, when the
    /// trace records it (the built-in harness does; an external one may not,
    /// so this is evidence, never a status on its own).
    ran: Option<fn(&Value, &Evaluation) -> String>,
}

fn expansion_ran(_: &Value, e: &Evaluation) -> String {
    let n = e.outcomes.iter().filter(|o| !o.expansion_terms.is_empty()).count();
    format!("trace: expansion added terms on {n} of {} questions", e.outcomes.len())
}

fn intent_ran(doc: &Value, e: &Evaluation) -> String {
    let n = e
        .outcomes
        .iter()
        .filter(|o| {
            o.intent
                .as_deref()
                .is_some_and(|i| num(doc, &format!("retrieve.intent_overrides.{i}.top_k_multiplier")) != 1.0)
        })
        .count();
    format!("trace: {n} of {} questions show an intent whose multiplier is not 1", e.outcomes.len())
}

fn num(doc: &Value, path: &str) -> f64 {
    get_path(doc, path).and_then(Value::as_f64).unwrap_or(0.0)
}

fn text<'a>(doc: &'a Value, path: &str) -> &'a str {
    get_path(doc, path).and_then(Value::as_str).unwrap_or("")
}

fn never(_: &Value) -> Option<String> {
    None
}

const MECHANISMS: &[Mechanism] = &[
    Mechanism {
        name: "windows",
        fields: &["ingest.window_size", "ingest.window_overlap"],
        switch: None,
        off: never,
        ran: None,
        contrast: |d| {
            let size = num(d, "ingest.window_size");
            vec![("ingest.window_size", json!(if size > 1.0 { 1 } else { 2 })), ("ingest.window_overlap", json!(0))]
        },
    },
    Mechanism {
        name: "ingest filters",
        fields: &["ingest.min_chars", "ingest.max_items_per_session"],
        switch: None,
        off: |d| (num(d, "ingest.min_chars") == 0.0).then(|| "ingest.min_chars is 0 (the session cap stays)".into()),
        ran: None,
        contrast: |_| vec![("ingest.min_chars", json!(0))],
    },
    Mechanism {
        name: "dedup",
        fields: &["ingest.dedup_threshold", "assemble.dedup"],
        switch: Some("assemble.dedup"),
        off: |d| {
            (num(d, "ingest.dedup_threshold") >= 1.0 && get_path(d, "assemble.dedup") == Some(&json!(false)))
                .then(|| "ingest.dedup_threshold is 1 and assemble.dedup is false".into())
        },
        ran: None,
        contrast: |_| vec![("ingest.dedup_threshold", json!(1.0)), ("assemble.dedup", json!(false))],
    },
    Mechanism {
        name: "date stamps",
        fields: &["ingest.stamp_date"],
        switch: Some("ingest.stamp_date"),
        off: |d| (get_path(d, "ingest.stamp_date") == Some(&json!(false))).then(|| "ingest.stamp_date is false".into()),
        ran: None,
        contrast: |_| vec![("ingest.stamp_date", json!(false))],
    },
    Mechanism {
        name: "extraction",
        fields: &["ingest.extraction_prompt"],
        switch: None,
        off: |d| {
            (text(d, "ingest.unit") != "fact")
                .then(|| format!("ingest.unit is {}: the extraction prompt is never sent", text(d, "ingest.unit")))
        },
        ran: None,
        contrast: |_| vec![("ingest.unit", json!("window"))],
    },
    Mechanism {
        name: "bm25",
        fields: &["index.bm25_k1", "index.bm25_b", "retrieve.weights.bm25"],
        switch: None,
        off: |d| (num(d, "retrieve.weights.bm25") == 0.0).then(|| "retrieve.weights.bm25 is 0".into()),
        ran: None,
        contrast: |_| vec![("retrieve.weights.bm25", json!(0.0))],
    },
    Mechanism {
        name: "dense channel",
        fields: &["index.dense_kind", "index.dense_dim", "retrieve.weights.dense"],
        switch: Some("index.dense_kind"),
        off: |d| {
            if text(d, "index.dense_kind") == "none" {
                Some("index.dense_kind is none".into())
            } else {
                (num(d, "retrieve.weights.dense") == 0.0).then(|| "retrieve.weights.dense is 0".into())
            }
        },
        ran: None,
        contrast: |_| vec![("retrieve.weights.dense", json!(0.0))],
    },
    Mechanism {
        name: "fusion",
        fields: &["retrieve.fusion", "retrieve.rrf_kappa"],
        switch: None,
        off: never,
        ran: None,
        contrast: |d| {
            vec![("retrieve.fusion", json!(if text(d, "retrieve.fusion") == "rrf" { "weighted_sum" } else { "rrf" }))]
        },
    },
    Mechanism {
        name: "expansion",
        fields: &["retrieve.expansion.enabled", "retrieve.expansion.terms", "retrieve.weights.expansion"],
        switch: Some("retrieve.expansion.enabled"),
        ran: Some(expansion_ran),
        off: |d| {
            (get_path(d, "retrieve.expansion.enabled") == Some(&json!(false)))
                .then(|| "retrieve.expansion.enabled is false: its terms and weight change nothing".into())
        },
        contrast: |_| vec![("retrieve.expansion.enabled", json!(false))],
    },
    Mechanism {
        name: "recency decay",
        fields: &["retrieve.recency_half_life_days"],
        switch: Some("retrieve.recency_half_life_days"),
        off: |d| {
            (num(d, "retrieve.recency_half_life_days") == 0.0)
                .then(|| "retrieve.recency_half_life_days is 0 (no decay)".into())
        },
        ran: None,
        contrast: |_| vec![("retrieve.recency_half_life_days", json!(0))],
    },
    Mechanism {
        name: "intent overrides",
        ran: Some(intent_ran),
        fields: &[
            "retrieve.intent_overrides.temporal.top_k_multiplier",
            "retrieve.intent_overrides.quantity.top_k_multiplier",
            "retrieve.intent_overrides.reasoning.top_k_multiplier",
        ],
        switch: None,
        off: |d| {
            ["temporal", "quantity", "reasoning"]
                .iter()
                .all(|i| num(d, &format!("retrieve.intent_overrides.{i}.top_k_multiplier")) == 1.0)
                .then(|| "every intent's top_k_multiplier is 1".into())
        },
        contrast: |_| {
            vec![
                ("retrieve.intent_overrides.temporal.top_k_multiplier", json!(1.0)),
                ("retrieve.intent_overrides.quantity.top_k_multiplier", json!(1.0)),
                ("retrieve.intent_overrides.reasoning.top_k_multiplier", json!(1.0)),
            ]
        },
    },
    Mechanism {
        name: "rerank",
        fields: &["retrieve.rerank_top_n"],
        switch: Some("retrieve.rerank_top_n"),
        off: |d| (num(d, "retrieve.rerank_top_n") == 0.0).then(|| "retrieve.rerank_top_n is 0".into()),
        ran: None,
        contrast: |_| vec![("retrieve.rerank_top_n", json!(0))],
    },
    Mechanism {
        name: "retrieval depth",
        fields: &["retrieve.top_k", "retrieve.pool"],
        switch: None,
        off: never,
        ran: None,
        contrast: |d| {
            let k = num(d, "retrieve.top_k");
            vec![("retrieve.top_k", json!(((k / 2.0).floor() as u64).max(1)))]
        },
    },
    Mechanism {
        name: "context budget",
        fields: &["assemble.token_budget"],
        switch: None,
        off: never,
        ran: None,
        contrast: |d| vec![("assemble.token_budget", json!(((num(d, "assemble.token_budget") / 2.0) as u64).max(1)))],
    },
    Mechanism {
        name: "backfill",
        fields: &["assemble.backfill_window"],
        switch: Some("assemble.backfill_window"),
        off: |d| (num(d, "assemble.backfill_window") == 0.0).then(|| "assemble.backfill_window is 0".into()),
        ran: None,
        contrast: |_| vec![("assemble.backfill_window", json!(0))],
    },
    Mechanism {
        name: "ordering",
        fields: &["assemble.order"],
        switch: None,
        off: never,
        ran: None,
        contrast: |d| {
            vec![(
                "assemble.order",
                json!(if text(d, "assemble.order") == "score" { "chronological" } else { "score" }),
            )]
        },
    },
    Mechanism {
        name: "answer",
        fields: &["answer.prompt", "answer.format"],
        switch: None,
        off: never,
        ran: None,
        contrast: |d| {
            vec![("answer.format", json!(if text(d, "answer.format") == "short" { "sentence" } else { "short" }))]
        },
    },
];

/// The fields an audit covers, mechanism by mechanism (for the proposer and tests).
pub fn mechanism_fields() -> Vec<(&'static str, &'static [&'static str])> {
    MECHANISMS.iter().map(|m| (m.name, m.fields)).collect()
}

/// Compares two evaluations question by question.
fn compare(served: &Evaluation, other: &Evaluation, changes: Vec<String>) -> Contrast {
    let by_id: BTreeMap<&str, &OutcomeRecord> = other.outcomes.iter().map(|o| (o.id.as_str(), o)).collect();
    let mut c = Contrast { changes, questions: 0, changed_contexts: 0, served_only: 0, contrast_only: 0 };
    for a in &served.outcomes {
        let Some(b) = by_id.get(a.id.as_str()) else { continue };
        c.questions += 1;
        let in_context = |o: &OutcomeRecord| -> Option<Vec<bool>> {
            o.evidence_trace.as_ref().map(|t| t.iter().map(|s| s.in_context).collect())
        };
        if a.context_tokens != b.context_tokens || in_context(a) != in_context(b) || a.context_ids != b.context_ids {
            c.changed_contexts += 1;
        }
        match (a.correct, b.correct) {
            (true, false) => c.served_only += 1,
            (false, true) => c.contrast_only += 1,
            _ => {}
        }
    }
    c
}

/// One-sided level of the exact McNemar test that gives a changed outcome a direction.
pub const ALPHA: f64 = 0.05;

/// The verdict of a contrast (rules in the module doc).
pub fn judge_contrast(c: &Contrast) -> (Status, String) {
    let changed = c.served_only + c.contrast_only;
    let (a, b) = (c.served_only as u64, c.contrast_only as u64);
    let counts = format!(
        "{} of {} questions change outcome ({} better served, {} better without), {} contexts change",
        changed, c.questions, c.served_only, c.contrast_only, c.changed_contexts
    );
    if changed > 0 && stats::better_p_value(a, b) < ALPHA {
        (Status::Contributing, format!("{counts}; exact McNemar p = {:.2e}", stats::better_p_value(a, b)))
    } else if changed > 0 && stats::better_p_value(b, a) < ALPHA {
        (
            Status::Defective,
            format!("the contrast is more accurate: {counts}; exact McNemar p = {:.2e}", stats::better_p_value(b, a)),
        )
    } else if changed > 0 || c.changed_contexts > 0 {
        (Status::Inconclusive, format!("it changes contexts or outcomes, with no significant direction: {counts}"))
    } else {
        (Status::Unexercised, format!("nothing observable changes on this task set: {counts}"))
    }
}

/// Audits every mechanism of `served` on the task set (or on `ids`).
pub fn audit(
    schema: &StrategySchema,
    backend: &dyn Backend,
    served: &Artifact,
    ids: Option<&[String]>,
) -> Result<Vec<MechanismAudit>, AuditError> {
    let base = backend
        .evaluate(served, ids)
        .map_err(|source| AuditError::Evaluate { mechanism: "served strategy".into(), source })?;
    let doc = &served.value;
    let mut out = Vec::new();
    for m in MECHANISMS {
        let fields = m.fields.iter().map(|f| f.to_string()).collect();
        let switch = m.switch.map(str::to_string);
        if let Some(why) = (m.off)(doc) {
            out.push(MechanismAudit {
                mechanism: m.name.into(),
                fields,
                switch,
                status: Status::Unexercised,
                evidence: format!("switched off: {why}"),
                contrast: None,
            });
            continue;
        }
        let mut value = doc.clone();
        let mut changes = Vec::new();
        for (path, to) in (m.contrast)(doc) {
            let from = get_path(doc, path).cloned().unwrap_or(Value::Null);
            if from != to {
                changes.push(format!("{path}: {from} -> {to}"));
            }
            set_path(&mut value, path, to);
        }
        let origin = format!("the {} contrast", m.name);
        let contrast = match artifact::from_value(&origin, value, schema) {
            Ok(a) => a,
            Err(e) => {
                out.push(MechanismAudit {
                    mechanism: m.name.into(),
                    fields,
                    switch,
                    status: Status::Inconclusive,
                    evidence: format!("no legal contrast: {e}"),
                    contrast: None,
                });
                continue;
            }
        };
        let other = backend
            .evaluate(&contrast, ids)
            .map_err(|source| AuditError::Evaluate { mechanism: m.name.into(), source })?;
        let c = compare(&base, &other, changes);
        let (status, mut evidence) = judge_contrast(&c);
        if let Some(ran) = m.ran {
            evidence = format!("{evidence}; {}", ran(doc, &base));
        }
        out.push(MechanismAudit {
            mechanism: m.name.into(),
            fields,
            switch,
            status,
            evidence: format!("contrast {}: {evidence}", c.changes.join(", ")),
            contrast: Some(c),
        });
    }
    Ok(out)
}

/// The fields the proposer can skip: those of unexercised mechanisms, but
/// never a mechanism's switch (turning it on is the one move that matters).
pub fn skippable_fields(audits: &[MechanismAudit]) -> Vec<String> {
    audits
        .iter()
        .filter(|a| a.status == Status::Unexercised)
        .flat_map(|a| a.fields.iter().filter(|f| Some(*f) != a.switch.as_ref()).cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::EvidenceStep;
    use std::sync::Mutex;

    /// A backend whose outcomes are a function of a few strategy fields:
    /// top_k decides q0..q5 (the depth contributes), the fusion decides
    /// q6..q11 against the served strategy (defective), the order changes
    /// context size only (inconclusive), the answer format nothing.
    struct Fake {
        calls: Mutex<usize>,
    }

    impl Backend for Fake {
        fn harness_hash(&self) -> String {
            "h".into()
        }
        fn dataset_hash(&self) -> String {
            "d".into()
        }
        fn questions(&self) -> Vec<(String, String)> {
            (0..16).map(|i| (format!("q{i}"), "single-hop".into())).collect()
        }
        fn roles(&self) -> Vec<String> {
            vec![]
        }
        fn evaluate(&self, a: &Artifact, _: Option<&[String]>) -> Result<Evaluation, BackendError> {
            *self.calls.lock().unwrap() += 1;
            let s = a.typed().unwrap();
            let deep = s.retrieve.top_k > 4;
            let weighted = s.retrieve.fusion == harness::strategy::Fusion::WeightedSum;
            let chrono = s.assemble.order == harness::strategy::ContextOrder::Chronological;
            let outcomes = (0..16)
                .map(|i| {
                    let correct = match i {
                        0..=5 => deep,
                        6..=11 => weighted,
                        _ => false,
                    };
                    OutcomeRecord {
                        id: format!("q{i}"),
                        conversation: Some("c".into()),
                        category: "single-hop".into(),
                        correct,
                        question: None,
                        gold_answer: None,
                        answer: None,
                        evidence: Some(vec!["D1:1".into()]),
                        unresolved_evidence: Some(vec![]),
                        evidence_trace: Some(vec![EvidenceStep {
                            turn: "D1:1".into(),
                            memory_ids: vec!["m".into()],
                            retrieved: correct,
                            in_context: correct,
                        }]),
                        context_tokens: Some(if chrono { 101.0 } else { 100.0 }),
                        error: None,
                        answer_coverage: None,
                        intent: None,
                        expansion_terms: vec![],
                        context_ids: vec![],
                    }
                })
                .collect();
            Ok(Evaluation::new(outcomes))
        }
    }

    fn served() -> Artifact {
        let schema = StrategySchema::builtin();
        let mut doc = artifact::parse_yaml(include_str!("../../strategies/default.yaml")).unwrap();
        set_path(&mut doc, "retrieve.top_k", json!(8));
        artifact::from_value("served", doc, &schema).unwrap()
    }

    #[test]
    fn each_status_on_a_constructed_case() {
        let backend = Fake { calls: Mutex::new(0) };
        let audits = audit(&StrategySchema::builtin(), &backend, &served(), None).unwrap();
        let status: BTreeMap<&str, Status> = audits.iter().map(|a| (a.mechanism.as_str(), a.status)).collect();
        assert_eq!(status["retrieval depth"], Status::Contributing);
        assert_eq!(status["fusion"], Status::Defective);
        assert_eq!(status["ordering"], Status::Inconclusive);
        assert_eq!(status["answer"], Status::Unexercised);
        // Switched off in the default strategy: no contrast is run for them.
        for m in ["expansion", "rerank", "backfill", "recency decay", "intent overrides", "extraction", "date stamps"] {
            assert_eq!(status[m], Status::Unexercised, "{m}");
            assert!(audits.iter().find(|a| a.mechanism == m).unwrap().contrast.is_none());
        }
        let depth = audits.iter().find(|a| a.mechanism == "retrieval depth").unwrap();
        let c = depth.contrast.as_ref().unwrap();
        assert_eq!((c.served_only, c.contrast_only, c.changed_contexts), (6, 0, 6));
        assert_eq!(c.changes, vec!["retrieve.top_k: 8 -> 4".to_string()]);
        // The served evaluation and one per mechanism that is on.
        let on = audits.iter().filter(|a| a.contrast.is_some()).count();
        assert_eq!(*backend.calls.lock().unwrap(), 1 + on);
        // Every evolvable field of the schema belongs to some mechanism.
        let covered: Vec<&str> = mechanism_fields().iter().flat_map(|(_, f)| f.iter().copied()).collect();
        for f in StrategySchema::builtin().evolvable() {
            assert!(covered.contains(&f.path.as_str()), "{} is in no mechanism", f.path);
        }
    }

    #[test]
    fn the_proposer_skips_unexercised_parameters_but_not_their_switch() {
        let backend = Fake { calls: Mutex::new(0) };
        let audits = audit(&StrategySchema::builtin(), &backend, &served(), None).unwrap();
        let skip = skippable_fields(&audits);
        assert!(skip.contains(&"retrieve.expansion.terms".to_string()));
        assert!(skip.contains(&"retrieve.weights.expansion".to_string()));
        assert!(!skip.contains(&"retrieve.expansion.enabled".to_string()));
        assert!(!skip.contains(&"retrieve.top_k".to_string()));
    }

    #[test]
    fn the_trace_says_whether_expansion_and_intents_ran() {
        let schema = StrategySchema::builtin();
        let mut doc = served().value;
        set_path(&mut doc, "retrieve.expansion.enabled", json!(true));
        set_path(&mut doc, "retrieve.intent_overrides.temporal.top_k_multiplier", json!(2.0));
        let a = artifact::from_value("served", doc, &schema).unwrap();
        let audits = audit(&schema, &Fake { calls: Mutex::new(0) }, &a, None).unwrap();
        let find = |m: &str| audits.iter().find(|a| a.mechanism == m).unwrap();
        // The fake's trace records no expansion term and no intent: the contrast
        // changes nothing, and the trace says why.
        assert_eq!(find("expansion").status, Status::Unexercised);
        assert!(find("expansion").evidence.ends_with("trace: expansion added terms on 0 of 16 questions"));
        assert!(find("intent overrides").evidence.contains("trace: 0 of 16 questions show an intent"));
    }

    #[test]
    fn a_change_without_a_significant_direction_is_inconclusive() {
        let c = |s, o, ctx| Contrast {
            changes: vec![],
            questions: 100,
            changed_contexts: ctx,
            served_only: s,
            contrast_only: o,
        };
        assert_eq!(judge_contrast(&c(0, 1, 3)).0, Status::Inconclusive);
        assert_eq!(judge_contrast(&c(5, 4, 9)).0, Status::Inconclusive);
        assert_eq!(judge_contrast(&c(0, 0, 2)).0, Status::Inconclusive);
        assert_eq!(judge_contrast(&c(0, 0, 0)).0, Status::Unexercised);
        assert_eq!(judge_contrast(&c(10, 0, 10)).0, Status::Contributing);
        assert_eq!(judge_contrast(&c(1, 12, 13)).0, Status::Defective);
    }

    #[test]
    fn an_illegal_contrast_is_inconclusive_with_the_reason() {
        // rerank_top_n may not exceed top_k: a top_k contrast below it is refused.
        let schema = StrategySchema::builtin();
        let mut doc = served().value;
        set_path(&mut doc, "retrieve.rerank_top_n", json!(8));
        let a = artifact::from_value("served", doc, &schema).unwrap();
        let audits = audit(&schema, &Fake { calls: Mutex::new(0) }, &a, None).unwrap();
        let depth = audits.iter().find(|a| a.mechanism == "retrieval depth").unwrap();
        assert_eq!(depth.status, Status::Inconclusive);
        assert!(depth.evidence.starts_with("no legal contrast"), "{}", depth.evidence);
    }
}
