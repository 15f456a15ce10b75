//! The mechanism-fidelity audit: for every mechanism of the pipeline (a group
//! of the schema's evolvable fields), was it eligible, did it run, did it
//! produce output, was its output selected and included in the final
//! context, and does a controlled contrast show an effect?
//!
//! Per mechanism and question, the trace counts (all from the served
//! evaluation's trace and its contrast on the same question):
//! - `eligible`: switched on, and applicable to the question (intent
//!   overrides: the question's intent has a multiplier other than 1);
//! - `executed`: eligible and run to an answer, or failed on the question
//!   with the mechanism on only;
//! - `failed`: executed with an error that the contrast (without the
//!   mechanism) does not have;
//! - `produced`: executed with output: the trace's (expansion terms, an
//!   intent read), or, for a mechanism whose output the trace does not keep,
//!   every execution;
//! - `selected`: its output changed which memory was retrieved or which items
//!   the context holds (the contrast retrieves or holds other items);
//! - `included`: its output reached the final context (the contrast's context
//!   differs in size, gold turns, or items and their order); for the answer
//!   prompt, which is always part of the final prompt, every execution.
//!
//! The outcomes, in order:
//! 1. `unexercised`: switched off in the served strategy (its parameters
//!    change nothing; only its `switch` can), never eligible, never executed,
//!    or executed without a trace of output and with no context changing
//!    without it (nothing to act on here).
//! 2. `defective`: executed and failed: an error that goes away without it,
//!    no output where the trace expects one (expansion that adds no term),
//!    or output the trace shows that is never selected or included.
//! 3. Otherwise its output reached a context, and the contrast decides, by
//!    the two-sided exact McNemar test with Holm's correction across the
//!    mechanisms that reach this step (raw and adjusted p in the record):
//!    `contributing` when the served strategy wins significantly more
//!    questions (adjusted p < [`ALPHA`]), `harmful` when the contrast does (it
//!    runs, and costs accuracy here), `inconclusive` otherwise.
//!
//! A contrast the schema refuses (a range or an invariant) is
//! `inconclusive`, with the schema's reason. The labels are the served
//! configuration's: another strategy may exercise a mechanism this one
//! leaves idle.
//!
//! The search's proposer calls [`audit`] to skip the fields of unexercised
//! mechanisms.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use emend_eval::backend::{Backend, BackendError};
use emend_model::artifact::{self, Artifact};
use emend_model::outcome::{Evaluation, OutcomeRecord};
use emend_model::schema::{StrategySchema, get_path, set_path};
use emend_model::stats;

/// A mechanism's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Contributing,
    Harmful,
    Unexercised,
    Defective,
    Inconclusive,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Contributing => "contributing",
            Status::Harmful => "harmful",
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

/// How far a mechanism got, counted over the questions (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    pub questions: usize,
    pub eligible: usize,
    pub executed: usize,
    pub failed: usize,
    pub produced: usize,
    pub selected: usize,
    pub included: usize,
}

impl Trace {
    /// `eligible/executed/produced/selected/included` (and failed when any).
    pub fn counts(&self) -> String {
        let failed = if self.failed > 0 { format!(", {} failed", self.failed) } else { String::new() };
        format!("{}/{}/{}/{}/{}{failed}", self.eligible, self.executed, self.produced, self.selected, self.included)
    }
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
    /// Per question: eligible, executed, failed, produced, selected, included.
    pub trace: Trace,
    /// The contrast's two-sided exact McNemar p-value, when it was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Holm-adjusted across the mechanisms judged by their contrast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adjusted_p: Option<f64>,
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
    /// Whether it applies to a question (None: whenever it is on).
    eligible: Option<fn(&Value, &OutcomeRecord) -> bool>,
    /// Whether the trace shows its output on a question (None: the trace
    /// keeps none, and every execution counts as producing).
    output: Option<fn(&Value, &OutcomeRecord) -> bool>,
    /// Its output is part of the final prompt whenever it runs (the answer prompt).
    in_prompt: bool,
}

fn expansion_output(_: &Value, o: &OutcomeRecord) -> bool {
    !o.expansion_terms.is_empty()
}

fn intent_eligible(doc: &Value, o: &OutcomeRecord) -> bool {
    o.intent.as_deref().is_some_and(|i| num(doc, &format!("retrieve.intent_overrides.{i}.top_k_multiplier")) != 1.0)
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
        eligible: None,
        output: None,
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("ingest.dedup_threshold", json!(1.0)), ("assemble.dedup", json!(false))],
    },
    Mechanism {
        name: "date stamps",
        fields: &["ingest.stamp_date"],
        switch: Some("ingest.stamp_date"),
        off: |d| (get_path(d, "ingest.stamp_date") == Some(&json!(false))).then(|| "ingest.stamp_date is false".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("ingest.unit", json!("window"))],
    },
    Mechanism {
        name: "bm25",
        fields: &["index.bm25_k1", "index.bm25_b", "retrieve.weights.bm25"],
        switch: None,
        off: |d| (num(d, "retrieve.weights.bm25") == 0.0).then(|| "retrieve.weights.bm25 is 0".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("retrieve.weights.dense", json!(0.0))],
    },
    Mechanism {
        name: "fusion",
        fields: &["retrieve.fusion", "retrieve.rrf_kappa"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |d| {
            vec![("retrieve.fusion", json!(if text(d, "retrieve.fusion") == "rrf" { "weighted_sum" } else { "rrf" }))]
        },
    },
    Mechanism {
        name: "expansion",
        fields: &["retrieve.expansion.enabled", "retrieve.expansion.terms", "retrieve.weights.expansion"],
        switch: Some("retrieve.expansion.enabled"),
        ran: Some(expansion_ran),
        eligible: None,
        output: Some(expansion_output),
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("retrieve.recency_half_life_days", json!(0))],
    },
    Mechanism {
        name: "intent overrides",
        ran: Some(intent_ran),
        eligible: Some(intent_eligible),
        output: None,
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("retrieve.rerank_top_n", json!(0))],
    },
    Mechanism {
        name: "retrieval depth",
        fields: &["retrieve.top_k", "retrieve.pool"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |d| vec![("assemble.token_budget", json!(((num(d, "assemble.token_budget") / 2.0) as u64).max(1)))],
    },
    Mechanism {
        name: "backfill",
        fields: &["assemble.backfill_window"],
        switch: Some("assemble.backfill_window"),
        off: |d| (num(d, "assemble.backfill_window") == 0.0).then(|| "assemble.backfill_window is 0".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("assemble.backfill_window", json!(0))],
    },
    Mechanism {
        name: "ordering",
        fields: &["assemble.order"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
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
        eligible: None,
        output: None,
        in_prompt: true,
        contrast: |d| {
            vec![("answer.format", json!(if text(d, "answer.format") == "short" { "sentence" } else { "short" }))]
        },
    },
];

/// The fields an audit covers, mechanism by mechanism (for the proposer and tests).
pub fn mechanism_fields() -> Vec<(&'static str, &'static [&'static str])> {
    MECHANISMS.iter().map(|m| (m.name, m.fields)).collect()
}

/// The context of an outcome as the audit compares it: size, gold turns in
/// it, and its items in order.
fn context_of(o: &OutcomeRecord) -> (Option<f64>, Option<Vec<bool>>, &[String]) {
    (o.context_tokens, o.evidence_trace.as_ref().map(|t| t.iter().map(|s| s.in_context).collect()), &o.context_ids)
}

/// Which memory was retrieved, and which items the context holds (as a set).
fn selection_of(o: &OutcomeRecord) -> (Option<Vec<bool>>, std::collections::BTreeSet<&str>) {
    (
        o.evidence_trace.as_ref().map(|t| t.iter().map(|s| s.retrieved).collect()),
        o.context_ids.iter().map(String::as_str).collect(),
    )
}

/// Compares two evaluations question by question, and traces the mechanism
/// on each question (the served evaluation `served` runs it, `other` does not).
fn compare(
    m: &Mechanism,
    doc: &Value,
    served: &Evaluation,
    other: &Evaluation,
    changes: Vec<String>,
) -> (Contrast, Trace) {
    let by_id: BTreeMap<&str, &OutcomeRecord> = other.outcomes.iter().map(|o| (o.id.as_str(), o)).collect();
    let mut c = Contrast { changes, questions: 0, changed_contexts: 0, served_only: 0, contrast_only: 0 };
    let mut t = Trace { questions: served.outcomes.len(), ..Trace::default() };
    for a in &served.outcomes {
        let Some(b) = by_id.get(a.id.as_str()) else { continue };
        c.questions += 1;
        let changed = context_of(a) != context_of(b);
        c.changed_contexts += usize::from(changed);
        match (a.correct, b.correct) {
            (true, false) => c.served_only += 1,
            (false, true) => c.contrast_only += 1,
            _ => {}
        }
        if !m.eligible.is_none_or(|f| f(doc, a)) {
            continue;
        }
        t.eligible += 1;
        let failed = a.error.is_some() && b.error.is_none();
        if a.error.is_some() && !failed {
            // The pipeline failed with and without it: not this mechanism's run.
            continue;
        }
        t.executed += 1;
        if failed {
            t.failed += 1;
            continue;
        }
        if !m.output.is_none_or(|f| f(doc, a)) {
            continue;
        }
        t.produced += 1;
        let included = m.in_prompt || changed;
        t.selected += usize::from(included || selection_of(a) != selection_of(b));
        t.included += usize::from(included);
    }
    (c, t)
}

/// Level of the two-sided exact McNemar test ([`contrast_p`], Holm-adjusted
/// across the audited mechanisms) that gives a changed outcome a direction:
/// the direction is the sign of the contrast once that test rejects.
pub const ALPHA: f64 = 0.05;

/// The outcome of a mechanism that ran, from its trace alone: `unexercised`
/// or `defective` (with why), or None when its output reached a context and
/// the contrast decides.
pub fn judge_trace(t: &Trace, traced_output: bool) -> Option<(Status, String)> {
    let counts =
        format!("trace eligible/executed/produced/selected/included {} of {} questions", t.counts(), t.questions);
    Some(if t.eligible == 0 {
        (Status::Unexercised, format!("never eligible on this task set ({counts})"))
    } else if t.executed == 0 {
        (Status::Unexercised, format!("never executed ({counts})"))
    } else if t.failed > 0 {
        (Status::Defective, format!("failed on {} questions: an error that goes away without it ({counts})", t.failed))
    } else if traced_output && t.produced == 0 {
        (
            Status::Defective,
            format!(
                "executed on {} questions and produced no output where the trace expects it ({counts})",
                t.executed
            ),
        )
    } else if t.included == 0 && traced_output {
        (
            Status::Defective,
            format!("its output (on {} questions) is never selected or included in a context ({counts})", t.produced),
        )
    } else if t.included == 0 {
        (Status::Unexercised, format!("it runs, but no context changes without it: nothing to act on here ({counts})"))
    } else {
        return None;
    })
}

/// The contrast's two-sided exact McNemar p-value.
pub fn contrast_p(c: &Contrast) -> f64 {
    stats::mcnemar(c.served_only as u64, c.contrast_only as u64).exact_p
}

/// Holm's step-down adjustment of `p` (same order, each at most 1).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let (m, mut running) = (p.len(), 0.0f64);
    let mut out = vec![0.0; m];
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// The verdict of a contrast whose mechanism reached a context, at its Holm-adjusted p.
pub fn judge_contrast(c: &Contrast, adjusted_p: f64) -> (Status, String) {
    let counts = format!(
        "{} of {} questions change outcome ({} better served, {} better without), {} contexts change; \
         exact McNemar p = {:.2e}, Holm-adjusted {:.2e}",
        c.served_only + c.contrast_only,
        c.questions,
        c.served_only,
        c.contrast_only,
        c.changed_contexts,
        contrast_p(c),
        adjusted_p
    );
    if adjusted_p < ALPHA && c.served_only > c.contrast_only {
        (Status::Contributing, counts)
    } else if adjusted_p < ALPHA && c.contrast_only > c.served_only {
        (Status::Harmful, format!("the contrast is more accurate: {counts}"))
    } else {
        (Status::Inconclusive, format!("its output reaches contexts, with no significant effect: {counts}"))
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
    let mut out = Vec::new();
    for m in MECHANISMS {
        out.push(audit_one(m, schema, backend, served, &base, ids)?);
    }
    // The contrasts that decide, adjusted together (Holm).
    let judged: Vec<usize> = (0..out.len()).filter(|&i| out[i].p_value.is_some()).collect();
    let raw: Vec<f64> = judged.iter().map(|&i| out[i].p_value.expect("judged")).collect();
    for (&i, adjusted) in judged.iter().zip(holm(&raw)) {
        let a = &mut out[i];
        let c = a.contrast.as_ref().expect("a judged mechanism has its contrast");
        let (status, evidence) = judge_contrast(c, adjusted);
        a.status = status;
        a.adjusted_p = Some(adjusted);
        a.evidence = format!("{}; {}", a.evidence, evidence);
    }
    Ok(out)
}

/// One mechanism: switched off, refused, or its contrast evaluated and
/// traced. A mechanism whose output reached a context is left `inconclusive`
/// with its raw p-value, for [`audit`] to judge after the correction.
fn audit_one(
    m: &Mechanism,
    schema: &StrategySchema,
    backend: &dyn Backend,
    served: &Artifact,
    base: &Evaluation,
    ids: Option<&[String]>,
) -> Result<MechanismAudit, AuditError> {
    let doc = &served.value;
    let mut a = MechanismAudit {
        mechanism: m.name.into(),
        fields: m.fields.iter().map(|f| f.to_string()).collect(),
        switch: m.switch.map(str::to_string),
        status: Status::Unexercised,
        evidence: String::new(),
        contrast: None,
        trace: Trace { questions: base.outcomes.len(), ..Trace::default() },
        p_value: None,
        adjusted_p: None,
    };
    if let Some(why) = (m.off)(doc) {
        a.evidence = format!("switched off: {why}");
        return Ok(a);
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
    let contrast = match artifact::from_value(&format!("the {} contrast", m.name), value, schema) {
        Ok(c) => c,
        Err(e) => {
            a.status = Status::Inconclusive;
            a.evidence = format!("no legal contrast: {e}");
            return Ok(a);
        }
    };
    let other =
        backend.evaluate(&contrast, ids).map_err(|source| AuditError::Evaluate { mechanism: m.name.into(), source })?;
    let (c, trace) = compare(m, doc, base, &other, changes);
    let ran = m.ran.map_or(String::new(), |ran| format!("; {}", ran(doc, base)));
    let head = format!("contrast {}", c.changes.join(", "));
    match judge_trace(&trace, m.output.is_some()) {
        Some((status, why)) => {
            a.status = status;
            a.evidence = format!("{head}: {why}{ran}");
        }
        None => {
            a.status = Status::Inconclusive;
            a.p_value = Some(contrast_p(&c));
            a.evidence = format!(
                "{head}: output reaches the context (trace eligible/executed/produced/selected/included {} of {}){ran}",
                trace.counts(),
                trace.questions
            );
        }
    }
    a.trace = trace;
    a.contrast = Some(c);
    Ok(a)
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
    use emend_eval::fake::FakeBackend;
    use emend_model::outcome::{EvidenceStep, OutcomeRecord};

    #[derive(Clone, Copy, PartialEq)]
    enum Broken {
        None,
        /// Rerank on: an error on q20..q23 that goes away without it.
        RerankErrors,
        /// Expansion on, adding terms, which never reach a context.
        ExpansionIgnored,
    }

    fn fake() -> FakeBackend {
        broken_fake(Broken::None)
    }

    /// A backend whose outcomes are a function of a few strategy fields:
    /// top_k decides q0..q9 (the depth contributes), the fusion decides
    /// q10..q19 against the served strategy (harmful), the order changes
    /// context size only (inconclusive), the answer format nothing (its
    /// prompt is always included: inconclusive). `broken` breaks a mechanism
    /// on purpose.
    fn broken_fake(broken: Broken) -> FakeBackend {
        let questions = (0..24).map(|i| (format!("q{i}"), "single-hop".to_string())).collect();
        FakeBackend::new(questions, move |a, _| Ok(outcomes(a, broken)))
    }

    fn outcomes(a: &Artifact, broken: Broken) -> Vec<OutcomeRecord> {
        let s = a.typed().unwrap();
        let deep = s.retrieve.top_k > 4;
        let weighted = s.retrieve.fusion == harness::strategy::Fusion::WeightedSum;
        let chrono = s.assemble.order == harness::strategy::ContextOrder::Chronological;
        let rerank = s.retrieve.rerank_top_n > 0;
        let expanding = s.retrieve.expansion.enabled && broken == Broken::ExpansionIgnored;
        (0..24)
            .map(|i| {
                let correct = match i {
                    0..=9 => deep,
                    10..=19 => weighted,
                    _ => false,
                };
                let error = (rerank && broken == Broken::RerankErrors && i >= 20).then(|| "rerank: no scores".into());
                OutcomeRecord {
                    conversation: Some("c".into()),
                    evidence: Some(vec!["D1:1".into()]),
                    unresolved_evidence: Some(vec![]),
                    evidence_trace: Some(vec![EvidenceStep {
                        turn: "D1:1".into(),
                        memory_ids: vec!["m".into()],
                        retrieved: correct,
                        in_context: correct,
                    }]),
                    context_tokens: Some(if chrono { 101.0 } else { 100.0 }),
                    error,
                    expansion_terms: if expanding { vec!["moved".into()] } else { vec![] },
                    ..OutcomeRecord::new(&format!("q{i}"), "single-hop", correct)
                }
            })
            .collect()
    }

    fn served() -> Artifact {
        let schema = StrategySchema::builtin();
        let mut doc = artifact::parse_yaml(include_str!("../../strategies/default.yaml")).unwrap();
        set_path(&mut doc, "retrieve.top_k", json!(8));
        artifact::from_value("served", doc, &schema).unwrap()
    }

    #[test]
    fn each_status_on_a_constructed_case() {
        let backend = fake();
        let audits = audit(&StrategySchema::builtin(), &backend, &served(), None).unwrap();
        let status: BTreeMap<&str, Status> = audits.iter().map(|a| (a.mechanism.as_str(), a.status)).collect();
        assert_eq!(status["retrieval depth"], Status::Contributing);
        // The ablation wins: harmful here, not defective (it ran and did not fail).
        assert_eq!(status["fusion"], Status::Harmful);
        assert_eq!(status["ordering"], Status::Inconclusive);
        assert_eq!(status["answer"], Status::Inconclusive);
        // Nothing is defective: no mechanism executed and failed.
        assert!(audits.iter().all(|a| a.status != Status::Defective), "{audits:#?}");
        // Switched off in the default strategy: no contrast is run for them.
        for m in ["expansion", "rerank", "backfill", "recency decay", "intent overrides", "extraction", "date stamps"] {
            let a = audits.iter().find(|a| a.mechanism == m).unwrap();
            assert_eq!((a.status, a.trace.eligible), (Status::Unexercised, 0), "{m}");
            assert!(a.contrast.is_none());
        }
        let depth = audits.iter().find(|a| a.mechanism == "retrieval depth").unwrap();
        let c = depth.contrast.as_ref().unwrap();
        assert_eq!((c.served_only, c.contrast_only, c.changed_contexts), (10, 0, 10));
        assert_eq!(c.changes, vec!["retrieve.top_k: 8 -> 4".to_string()]);
        let t = depth.trace;
        assert_eq!((t.questions, t.eligible, t.executed, t.produced, t.selected, t.included), (24, 24, 24, 24, 10, 10));
        // Four mechanisms reach the contrast (depth, fusion, ordering, answer): Holm multiplies the smallest p by 4.
        assert!((depth.p_value.unwrap() - 2.0 / 1024.0).abs() < 1e-15, "{depth:?}");
        assert!((depth.adjusted_p.unwrap() - 4.0 * 2.0 / 1024.0).abs() < 1e-12, "{depth:?}");
        assert_eq!(audits.iter().filter(|a| a.adjusted_p.is_some()).count(), 4);
        let ordering = audits.iter().find(|a| a.mechanism == "ordering").unwrap();
        assert_eq!(ordering.adjusted_p, Some(1.0));
        // The served evaluation and one per mechanism that is on.
        let on = audits.iter().filter(|a| a.contrast.is_some()).count();
        assert_eq!(backend.calls(), 1 + on);
        // Every evolvable field of the schema belongs to some mechanism.
        let covered: Vec<&str> = mechanism_fields().iter().flat_map(|(_, f)| f.iter().copied()).collect();
        for f in StrategySchema::builtin().evolvable() {
            assert!(covered.contains(&f.path.as_str()), "{} is in no mechanism", f.path);
        }
    }

    #[test]
    fn defective_is_a_mechanism_that_executed_and_failed() {
        let schema = StrategySchema::builtin();
        let with = |path: &str, v: Value| {
            let mut doc = served().value;
            set_path(&mut doc, path, v);
            artifact::from_value("served", doc, &schema).unwrap()
        };
        let find = |audits: &[MechanismAudit], m: &str| audits.iter().find(|a| a.mechanism == m).unwrap().clone();
        // Rerank errors on four questions, which answer without it.
        let broken = broken_fake(Broken::RerankErrors);
        let audits = audit(&schema, &broken, &with("retrieve.rerank_top_n", json!(4)), None).unwrap();
        let rerank = find(&audits, "rerank");
        assert_eq!(
            (rerank.status, rerank.trace.failed, rerank.trace.executed),
            (Status::Defective, 4, 24),
            "{rerank:?}"
        );
        assert!(rerank.evidence.contains("failed on 4 questions"), "{}", rerank.evidence);
        assert_eq!(audits.iter().filter(|a| a.status == Status::Defective).count(), 1);
        // Expansion adds terms that never reach a context.
        let ignored = broken_fake(Broken::ExpansionIgnored);
        let audits = audit(&schema, &ignored, &with("retrieve.expansion.enabled", json!(true)), None).unwrap();
        let e = find(&audits, "expansion");
        assert_eq!((e.status, e.trace.produced, e.trace.included), (Status::Defective, 24, 0), "{e:?}");
        assert!(e.evidence.contains("never selected or included"), "{}", e.evidence);
        // Expansion on that adds no term at all: empty where output was expected.
        let audits = audit(&schema, &fake(), &with("retrieve.expansion.enabled", json!(true)), None).unwrap();
        let e = find(&audits, "expansion");
        assert_eq!((e.status, e.trace.executed, e.trace.produced), (Status::Defective, 24, 0), "{e:?}");
        assert!(e.evidence.contains("produced no output"), "{}", e.evidence);
    }

    #[test]
    fn holm_adjusts_step_down_and_keeps_the_order() {
        let adj = holm(&[0.01, 0.04, 0.03, 0.5]);
        let want = [0.04, 0.09, 0.09, 0.5];
        for (a, w) in adj.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adj:?}");
        }
        assert_eq!(holm(&[0.6, 0.6]), vec![1.0, 1.0]);
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn the_proposer_skips_unexercised_parameters_but_not_their_switch() {
        let backend = fake();
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
        set_path(&mut doc, "retrieve.intent_overrides.temporal.top_k_multiplier", json!(2.0));
        let a = artifact::from_value("served", doc, &schema).unwrap();
        let audits = audit(&schema, &fake(), &a, None).unwrap();
        let find = |m: &str| audits.iter().find(|a| a.mechanism == m).unwrap();
        // The fake's trace records no intent: no question is eligible.
        let intents = find("intent overrides");
        assert_eq!((intents.status, intents.trace.eligible), (Status::Unexercised, 0));
        assert!(intents.evidence.contains("never eligible"), "{}", intents.evidence);
        assert!(intents.evidence.contains("trace: 0 of 24 questions show an intent"), "{}", intents.evidence);
    }

    #[test]
    fn the_trace_decides_before_the_contrast() {
        let tr = |eligible, executed, failed, produced, included| Trace {
            questions: 100,
            eligible,
            executed,
            failed,
            produced,
            selected: included,
            included,
        };
        assert_eq!(judge_trace(&tr(0, 0, 0, 0, 0), false).unwrap().0, Status::Unexercised);
        assert_eq!(judge_trace(&tr(10, 0, 0, 0, 0), false).unwrap().0, Status::Unexercised);
        assert_eq!(judge_trace(&tr(10, 10, 2, 8, 8), false).unwrap().0, Status::Defective);
        assert_eq!(judge_trace(&tr(10, 10, 0, 0, 0), true).unwrap().0, Status::Defective);
        assert_eq!(judge_trace(&tr(10, 10, 0, 10, 0), true).unwrap().0, Status::Defective);
        // Without a traced output, no context changing means nothing to act on.
        assert_eq!(judge_trace(&tr(10, 10, 0, 10, 0), false).unwrap().0, Status::Unexercised);
        assert_eq!(judge_trace(&tr(10, 10, 0, 10, 3), true), None);
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
        let judge = |c: Contrast| judge_contrast(&c, contrast_p(&c)).0;
        assert_eq!(judge(c(0, 1, 3)), Status::Inconclusive);
        assert_eq!(judge(c(5, 4, 9)), Status::Inconclusive);
        assert_eq!(judge(c(0, 0, 2)), Status::Inconclusive);
        assert_eq!(judge(c(10, 0, 10)), Status::Contributing);
        assert_eq!(judge(c(1, 12, 13)), Status::Harmful);
        // Significant alone, not after the correction.
        assert_eq!(judge_contrast(&c(10, 0, 10), 0.08).0, Status::Inconclusive);
    }

    #[test]
    fn an_illegal_contrast_is_inconclusive_with_the_reason() {
        // rerank_top_n may not exceed top_k: a top_k contrast below it is refused.
        let schema = StrategySchema::builtin();
        let mut doc = served().value;
        set_path(&mut doc, "retrieve.rerank_top_n", json!(8));
        let a = artifact::from_value("served", doc, &schema).unwrap();
        let audits = audit(&schema, &fake(), &a, None).unwrap();
        let depth = audits.iter().find(|a| a.mechanism == "retrieval depth").unwrap();
        assert_eq!(depth.status, Status::Inconclusive);
        assert!(depth.evidence.starts_with("no legal contrast"), "{}", depth.evidence);
    }
}
