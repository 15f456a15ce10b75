//! The mechanism-fidelity audit: for every mechanism of the pipeline (a group
//! of the schema's evolvable fields), was it eligible, did it run, did it
//! produce output, was its output selected and included in the final
//! context; and, as a separate step, does a controlled contrast show an
//! effect on accuracy?
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
//!   prompt, which is part of the final prompt whenever the answer is
//!   computed, every execution.
//!
//! Each mechanism gets two outcomes.
//!
//! The **mechanistic** outcome, from the trace alone (no accuracy in it):
//! 1. `unexercised`: switched off in the served strategy (its parameters
//!    change nothing; only its `switch` can), never eligible, never executed
//!    (the answer prompt under the evidence judge, which computes no answer),
//!    or executed without a trace of output and with nothing retrieved or in
//!    a context changing without it.
//! 2. `defective`: executed and failed: an error that goes away without it,
//!    no output where the trace expects one (expansion that adds no term),
//!    or output the trace shows that is never selected or included.
//! 3. `never_isolated`: no contrast isolates it (the schema refuses the
//!    contrast, or the contrast's setting is the served one): a constant
//!    ablation flag, which makes no claim either way.
//! 4. `contributing`: executed, and its output changed the retrieved memory
//!    or the context on some question.
//!
//! The **quality** attribution, for a mechanism that is mechanistically
//! contributing (`not_tested` otherwise): the two-sided exact McNemar test of
//! the served strategy against the contrast, with Holm's correction across
//! the mechanisms tested (raw and adjusted p in the record): `contributing`
//! when the served strategy wins significantly more pairs (adjusted p <
//! [`ALPHA`]), `harmful` when the contrast does, `inconclusive` otherwise. A
//! pair is a question, or under longitudinal replay a probe at its last
//! observation (see [`paired`]).
//!
//! `status` keeps the single label of earlier versions for its readers: the
//! mechanistic outcome when it is `unexercised` or `defective`, the quality
//! attribution when the mechanism is contributing, `inconclusive` when it is
//! never isolated.
//!
//! The labels are the served configuration's: another strategy may exercise
//! a mechanism this one leaves idle. The search's proposer can call
//! [`audit`] to skip the fields of unexercised mechanisms
//! ([`skippable_fields`]); [`buildup`] adds the mechanisms back one at a time.

pub mod buildup;
pub mod mechanisms;
pub mod paired;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use emend_core::artifact::{self, Artifact};
use emend_core::outcome::{BackendOutcome, Evaluation};
use emend_core::schema::StrategySchema;
use emend_eval::backend::{Backend, BackendError};
use emend_stats::TestUnit;

pub use buildup::{Buildup, BuildupStep, buildup};
pub use mechanisms::mechanism_fields;
use mechanisms::{MECHANISMS, Mechanism};
use paired::PairedCounts;

/// A mechanism's single label (the `status` of earlier versions; see the module doc).
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

/// What the trace shows a mechanism did (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanistic {
    Contributing,
    Unexercised,
    Defective,
    NeverIsolated,
}

impl Mechanistic {
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanistic::Contributing => "contributing",
            Mechanistic::Unexercised => "unexercised",
            Mechanistic::Defective => "defective",
            Mechanistic::NeverIsolated => "never_isolated",
        }
    }
}

/// What its contrast says about accuracy (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quality {
    Contributing,
    Harmful,
    Inconclusive,
    NotTested,
}

impl Quality {
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Contributing => "contributing",
            Quality::Harmful => "harmful",
            Quality::Inconclusive => "inconclusive",
            Quality::NotTested => "not_tested",
        }
    }
}

/// The single label of the two outcomes.
pub fn status_of(m: Mechanistic, q: Quality) -> Status {
    match (m, q) {
        (Mechanistic::Unexercised, _) => Status::Unexercised,
        (Mechanistic::Defective, _) => Status::Defective,
        (Mechanistic::Contributing, Quality::Contributing) => Status::Contributing,
        (Mechanistic::Contributing, Quality::Harmful) => Status::Harmful,
        _ => Status::Inconclusive,
    }
}

/// What the contrast evaluation showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contrast {
    /// `path: from -> to` of each field the contrast moved.
    pub changes: Vec<String>,
    /// Outcomes compared: questions, or observations under replay.
    pub questions: usize,
    /// Outcomes whose context differs (size, which gold turns it holds, or
    /// which items it holds in which order, when the trace reports them).
    pub changed_contexts: usize,
    /// What one pair of the test is: a question, or a probe under replay.
    #[serde(default)]
    pub unit: TestUnit,
    /// Pairs of the test (questions, or probes).
    #[serde(default)]
    pub pairs: usize,
    /// Pairs right with the served strategy only (a probe at its last observation).
    pub served_only: usize,
    /// Pairs right with the contrast only.
    pub contrast_only: usize,
    /// Under replay, the observations right with one side only (not independent pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations_served_only: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations_contrast_only: Option<usize>,
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
    /// From the trace alone.
    pub mechanistic: Mechanistic,
    /// From the contrast's accuracy (only for a mechanistically contributing mechanism).
    pub quality: Quality,
    /// The single label of earlier versions ([`status_of`]).
    pub status: Status,
    /// Why: the mechanistic outcome's sentence, then the quality's.
    pub evidence: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contrast: Option<Contrast>,
    /// Per question: eligible, executed, failed, produced, selected, included.
    pub trace: Trace,
    /// The contrast's two-sided exact McNemar p-value, when it was tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Holm-adjusted across the mechanisms tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adjusted_p: Option<f64>,
}

impl MechanismAudit {
    fn set(&mut self, mechanistic: Mechanistic, quality: Quality) {
        self.mechanistic = mechanistic;
        self.quality = quality;
        self.status = status_of(mechanistic, quality);
    }
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
    #[error("buildup: {0}")]
    Buildup(String),
}

/// The context of an outcome as the audit compares it: size, gold turns in
/// it, and its items in order.
fn context_of(o: &BackendOutcome) -> (Option<f64>, Option<Vec<bool>>, &[String]) {
    (o.context_tokens, o.evidence_trace.as_ref().map(|t| t.iter().map(|s| s.in_context).collect()), &o.context_ids)
}

/// Which memory was retrieved, and which items the context holds (as a set).
fn selection_of(o: &BackendOutcome) -> (Option<Vec<bool>>, std::collections::BTreeSet<&str>) {
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
    let by_id: BTreeMap<&str, &BackendOutcome> = other.outcomes.iter().map(|o| (o.id.as_str(), o)).collect();
    let p = paired::paired(served, other);
    let mut c = contrast_of(changes, &p);
    let mut t = Trace { questions: served.outcomes.len(), ..Trace::default() };
    for a in &served.outcomes {
        let Some(b) = by_id.get(a.id.as_str()) else { continue };
        let changed = context_of(a) != context_of(b);
        c.changed_contexts += usize::from(changed);
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

/// The contrast record of a paired comparison (served first), before the
/// context counts.
fn contrast_of(changes: Vec<String>, p: &PairedCounts) -> Contrast {
    let replay = p.unit == TestUnit::Probe;
    Contrast {
        changes,
        questions: p.observations,
        changed_contexts: 0,
        unit: p.unit,
        pairs: p.pairs,
        served_only: p.first_only,
        contrast_only: p.second_only,
        observations_served_only: replay.then_some(p.observations_first_only),
        observations_contrast_only: replay.then_some(p.observations_second_only),
    }
}

/// Level of the two-sided exact McNemar test ([`contrast_p`], Holm-adjusted
/// across the audited mechanisms) that gives a changed outcome a direction:
/// the direction is the sign of the contrast once that test rejects.
pub const ALPHA: f64 = 0.05;

/// The mechanistic outcome of a mechanism whose contrast ran, from its trace
/// alone, with why.
pub fn judge_trace(t: &Trace, traced_output: bool) -> (Mechanistic, String) {
    let counts =
        format!("trace eligible/executed/produced/selected/included {} of {} questions", t.counts(), t.questions);
    if t.eligible == 0 {
        (Mechanistic::Unexercised, format!("never eligible on this task set ({counts})"))
    } else if t.executed == 0 {
        (Mechanistic::Unexercised, format!("never executed ({counts})"))
    } else if t.failed > 0 {
        (
            Mechanistic::Defective,
            format!("failed on {} questions: an error that goes away without it ({counts})", t.failed),
        )
    } else if traced_output && t.produced == 0 {
        (
            Mechanistic::Defective,
            format!(
                "executed on {} questions and produced no output where the trace expects it ({counts})",
                t.executed
            ),
        )
    } else if t.selected == 0 && traced_output {
        (
            Mechanistic::Defective,
            format!("its output (on {} questions) is never selected or included in a context ({counts})", t.produced),
        )
    } else if t.selected == 0 {
        (
            Mechanistic::Unexercised,
            format!("it runs, but nothing retrieved or in a context changes without it ({counts})"),
        )
    } else {
        (
            Mechanistic::Contributing,
            format!(
                "executed, and its output changed the retrieved memory or context on {} and reached the context on \
                 {} questions ({counts})",
                t.selected, t.included
            ),
        )
    }
}

/// The contrast's two-sided exact McNemar p-value on its pairs.
pub fn contrast_p(c: &Contrast) -> f64 {
    emend_stats::mcnemar(c.served_only as u64, c.contrast_only as u64).exact_p
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

/// The quality attribution of a tested contrast, at its Holm-adjusted p.
pub fn judge_contrast(c: &Contrast, adjusted_p: f64) -> (Quality, String) {
    let unit = c.unit.plural();
    let observations = match (c.observations_served_only, c.observations_contrast_only) {
        (Some(s), Some(o)) => format!(" (observations: {s} better served, {o} better without, of {})", c.questions),
        _ => String::new(),
    };
    let counts = format!(
        "{} of {} {unit} change outcome ({} better served, {} better without){observations}; exact McNemar p = \
         {:.2e}, Holm-adjusted {:.2e}",
        c.served_only + c.contrast_only,
        c.pairs,
        c.served_only,
        c.contrast_only,
        contrast_p(c),
        adjusted_p
    );
    if adjusted_p < ALPHA && c.served_only > c.contrast_only {
        (Quality::Contributing, format!("quality: the served strategy is more accurate: {counts}"))
    } else if adjusted_p < ALPHA && c.contrast_only > c.served_only {
        (Quality::Harmful, format!("quality: the contrast is more accurate: {counts}"))
    } else {
        (Quality::Inconclusive, format!("quality: no significant effect: {counts}"))
    }
}

/// The harness facts the audit reads (`{"judge": ...}` for the built-in
/// harness): whether the answer is computed at all.
pub fn answer_computed(harness: &Value) -> bool {
    harness.get("judge").and_then(Value::as_str) != Some("evidence")
}

/// Audits every mechanism of `served` on the task set (or on `ids`);
/// `harness` holds the harness facts (`{"judge": "evidence"}`, as the
/// search's `x-inert-when` conditions read them).
pub fn audit(
    schema: &StrategySchema,
    backend: &dyn Backend,
    served: &Artifact,
    ids: Option<&[String]>,
    harness: &Value,
) -> Result<Vec<MechanismAudit>, AuditError> {
    let base = backend
        .evaluate(served, ids)
        .map_err(|source| AuditError::Evaluate { mechanism: "served strategy".into(), source })?;
    let mut out = Vec::new();
    for m in MECHANISMS {
        out.push(audit_one(m, schema, backend, served, &base, ids, harness)?);
    }
    // The contrasts tested for quality, adjusted together (Holm).
    let judged: Vec<usize> = (0..out.len()).filter(|&i| out[i].p_value.is_some()).collect();
    let raw: Vec<f64> = judged.iter().map(|&i| out[i].p_value.expect("judged")).collect();
    for (&i, adjusted) in judged.iter().zip(holm(&raw)) {
        let a = &mut out[i];
        let c = a.contrast.as_ref().expect("a judged mechanism has its contrast");
        let (quality, evidence) = judge_contrast(c, adjusted);
        a.set(a.mechanistic, quality);
        a.adjusted_p = Some(adjusted);
        a.evidence = format!("{}; {}", a.evidence, evidence);
    }
    Ok(out)
}

/// One mechanism: switched off, idle, never isolated, or its contrast
/// evaluated and traced. A mechanistically contributing one is left
/// `inconclusive` in quality with its raw p-value, for [`audit`] to judge
/// after the correction.
fn audit_one(
    m: &Mechanism,
    schema: &StrategySchema,
    backend: &dyn Backend,
    served: &Artifact,
    base: &Evaluation,
    ids: Option<&[String]>,
    harness: &Value,
) -> Result<MechanismAudit, AuditError> {
    let doc = &served.value;
    let questions = base.outcomes.len();
    let mut a = MechanismAudit {
        mechanism: m.name.into(),
        fields: m.fields.iter().map(|f| f.to_string()).collect(),
        switch: m.switch.map(str::to_string),
        mechanistic: Mechanistic::Unexercised,
        quality: Quality::NotTested,
        status: Status::Unexercised,
        evidence: String::new(),
        contrast: None,
        trace: Trace { questions, ..Trace::default() },
        p_value: None,
        adjusted_p: None,
    };
    if let Some(why) = (m.off)(doc) {
        a.evidence = format!("switched off: {why}");
        return Ok(a);
    }
    if m.in_prompt && !answer_computed(harness) {
        a.trace.eligible = questions;
        a.evidence = "never executed: under harness.judge: evidence no answer is computed, so the answer prompt \
                      reaches no context and is not judged"
            .into();
        return Ok(a);
    }
    let (changes, value) = m.contrasted(doc);
    if changes.is_empty() {
        a.set(Mechanistic::NeverIsolated, Quality::NotTested);
        a.evidence =
            "never isolated: its contrast setting is the served one (a constant ablation flag): no claim".into();
        return Ok(a);
    }
    let contrast = match artifact::from_value(&format!("the {} contrast", m.name), value, schema) {
        Ok(c) => c,
        Err(e) => {
            a.set(Mechanistic::NeverIsolated, Quality::NotTested);
            a.evidence = format!("never isolated: the schema refuses its contrast ({e}): no claim");
            return Ok(a);
        }
    };
    let other =
        backend.evaluate(&contrast, ids).map_err(|source| AuditError::Evaluate { mechanism: m.name.into(), source })?;
    let (c, trace) = compare(m, doc, base, &other, changes);
    let ran = m.ran.map_or(String::new(), |ran| format!("; {}", ran(doc, base)));
    let (mechanistic, why) = judge_trace(&trace, m.output.is_some());
    a.set(mechanistic, Quality::NotTested);
    a.evidence = format!("contrast {}: {why}{ran}", c.changes.join(", "));
    if mechanistic == Mechanistic::Contributing {
        a.set(mechanistic, Quality::Inconclusive);
        a.p_value = Some(contrast_p(&c));
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
        .filter(|a| a.mechanistic == Mechanistic::Unexercised)
        .flat_map(|a| a.fields.iter().filter(|f| Some(*f) != a.switch.as_ref()).cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::outcome::{BackendOutcome, EvidenceStep};
    use emend_core::schema::set_path;
    use emend_eval::fake::FakeBackend;
    use emend_stats;
    use serde_json::json;

    #[derive(Clone, Copy, PartialEq)]
    enum Broken {
        None,
        /// Rerank on: an error on q20..q23 that goes away without it.
        RerankErrors,
        /// Expansion on, adding terms, which never reach a context.
        ExpansionIgnored,
    }

    /// The harness facts of a judge that reads the answer.
    fn f1() -> Value {
        json!({"judge": "f1"})
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

    fn outcomes(a: &Artifact, broken: Broken) -> Vec<BackendOutcome> {
        let s = a.typed().unwrap();
        let deep = s.retrieve.top_k > 4;
        let weighted = s.retrieve.fusion == emend_harness::strategy::Fusion::WeightedSum;
        let chrono = s.assemble.order == emend_harness::strategy::ContextOrder::Chronological;
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
                BackendOutcome {
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
                    ..BackendOutcome::new(&format!("q{i}"), "single-hop", correct)
                }
            })
            .collect()
    }

    fn served() -> Artifact {
        let schema = StrategySchema::builtin();
        let mut doc = artifact::parse_yaml(emend_core::artifact::DEFAULT_STRATEGY).unwrap();
        set_path(&mut doc, "retrieve.top_k", json!(8));
        artifact::from_value("served", doc, &schema).unwrap()
    }

    #[test]
    fn each_status_on_a_constructed_case() {
        let backend = fake();
        let audits = audit(&StrategySchema::builtin(), &backend, &served(), None, &f1()).unwrap();
        let status: BTreeMap<&str, Status> = audits.iter().map(|a| (a.mechanism.as_str(), a.status)).collect();
        assert_eq!(status["retrieval depth"], Status::Contributing);
        // The ablation wins: harmful here, not defective (it ran and did not fail).
        assert_eq!(status["fusion"], Status::Harmful);
        assert_eq!(status["ordering"], Status::Inconclusive);
        assert_eq!(status["answer"], Status::Inconclusive);
        let both = |m: &str| {
            let a = audits.iter().find(|a| a.mechanism == m).unwrap();
            (a.mechanistic, a.quality)
        };
        assert_eq!(both("retrieval depth"), (Mechanistic::Contributing, Quality::Contributing));
        assert_eq!(both("fusion"), (Mechanistic::Contributing, Quality::Harmful));
        // Ordering changes every context and no answer: contributing by the
        // trace, inconclusive in quality.
        assert_eq!(both("ordering"), (Mechanistic::Contributing, Quality::Inconclusive));
        assert_eq!(both("answer"), (Mechanistic::Contributing, Quality::Inconclusive));
        // Nothing changes without the windows: unexercised here, and not tested.
        assert_eq!(both("windows"), (Mechanistic::Unexercised, Quality::NotTested));
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
        let audits = audit(&schema, &broken, &with("retrieve.rerank_top_n", json!(4)), None, &f1()).unwrap();
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
        let audits = audit(&schema, &ignored, &with("retrieve.expansion.enabled", json!(true)), None, &f1()).unwrap();
        let e = find(&audits, "expansion");
        assert_eq!((e.status, e.trace.produced, e.trace.included), (Status::Defective, 24, 0), "{e:?}");
        assert!(e.evidence.contains("never selected or included"), "{}", e.evidence);
        // Expansion on that adds no term at all: empty where output was expected.
        let audits = audit(&schema, &fake(), &with("retrieve.expansion.enabled", json!(true)), None, &f1()).unwrap();
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
        let audits = audit(&StrategySchema::builtin(), &backend, &served(), None, &f1()).unwrap();
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
        let audits = audit(&schema, &fake(), &a, None, &f1()).unwrap();
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
        assert_eq!(judge_trace(&tr(0, 0, 0, 0, 0), false).0, Mechanistic::Unexercised);
        assert_eq!(judge_trace(&tr(10, 0, 0, 0, 0), false).0, Mechanistic::Unexercised);
        assert_eq!(judge_trace(&tr(10, 10, 2, 8, 8), false).0, Mechanistic::Defective);
        assert_eq!(judge_trace(&tr(10, 10, 0, 0, 0), true).0, Mechanistic::Defective);
        assert_eq!(judge_trace(&tr(10, 10, 0, 10, 0), true).0, Mechanistic::Defective);
        // Without a traced output, no context changing means nothing to act on.
        assert_eq!(judge_trace(&tr(10, 10, 0, 10, 0), false).0, Mechanistic::Unexercised);
        assert_eq!(judge_trace(&tr(10, 10, 0, 10, 3), true).0, Mechanistic::Contributing);
        // Output that changes what is retrieved, though no context: contributing.
        let retrieved_only = Trace { selected: 2, ..tr(10, 10, 0, 10, 0) };
        assert_eq!(judge_trace(&retrieved_only, false).0, Mechanistic::Contributing);
    }

    #[test]
    fn a_change_without_a_significant_direction_is_inconclusive() {
        let c = |s, o, ctx| Contrast {
            changes: vec![],
            questions: 100,
            changed_contexts: ctx,
            unit: TestUnit::Question,
            pairs: 100,
            served_only: s,
            contrast_only: o,
            observations_served_only: None,
            observations_contrast_only: None,
        };
        let judge = |c: Contrast| judge_contrast(&c, contrast_p(&c)).0;
        assert_eq!(judge(c(0, 1, 3)), Quality::Inconclusive);
        assert_eq!(judge(c(5, 4, 9)), Quality::Inconclusive);
        assert_eq!(judge(c(0, 0, 2)), Quality::Inconclusive);
        assert_eq!(judge(c(10, 0, 10)), Quality::Contributing);
        assert_eq!(judge(c(1, 12, 13)), Quality::Harmful);
        // Significant alone, not after the correction.
        assert_eq!(judge_contrast(&c(10, 0, 10), 0.08).0, Quality::Inconclusive);
    }

    #[test]
    fn an_illegal_contrast_is_inconclusive_with_the_reason() {
        // rerank_top_n may not exceed top_k: a top_k contrast below it is refused.
        let schema = StrategySchema::builtin();
        let mut doc = served().value;
        set_path(&mut doc, "retrieve.rerank_top_n", json!(8));
        let a = artifact::from_value("served", doc, &schema).unwrap();
        let audits = audit(&schema, &fake(), &a, None, &f1()).unwrap();
        let depth = audits.iter().find(|a| a.mechanism == "retrieval depth").unwrap();
        assert_eq!(depth.status, Status::Inconclusive);
        assert_eq!((depth.mechanistic, depth.quality), (Mechanistic::NeverIsolated, Quality::NotTested));
        assert!(depth.evidence.starts_with("never isolated: the schema refuses its contrast"), "{}", depth.evidence);
        assert!(depth.contrast.is_none() && depth.p_value.is_none());
    }

    #[test]
    fn a_contrast_that_moves_nothing_never_isolates_its_mechanism() {
        // top_k 1 halves to 1: the contrast's setting is the served one.
        let schema = StrategySchema::builtin();
        let mut doc = served().value;
        set_path(&mut doc, "retrieve.top_k", json!(1));
        let a = artifact::from_value("served", doc, &schema).unwrap();
        let backend = fake();
        let audits = audit(&schema, &backend, &a, None, &f1()).unwrap();
        let depth = audits.iter().find(|a| a.mechanism == "retrieval depth").unwrap();
        assert_eq!((depth.mechanistic, depth.quality), (Mechanistic::NeverIsolated, Quality::NotTested));
        assert!(depth.evidence.contains("constant ablation flag"), "{}", depth.evidence);
        let json = serde_json::to_value(depth).unwrap();
        assert_eq!(
            (json["mechanistic"].as_str(), json["status"].as_str()),
            (Some("never_isolated"), Some("inconclusive"))
        );
        // Never evaluated: the served evaluation and one per other contrast.
        assert_eq!(backend.calls(), 1 + audits.iter().filter(|a| a.contrast.is_some()).count());
    }

    #[test]
    fn under_the_evidence_judge_the_answer_is_never_executed() {
        let backend = fake();
        let audits =
            audit(&StrategySchema::builtin(), &backend, &served(), None, &json!({"judge": "evidence"})).unwrap();
        let answer = audits.iter().find(|a| a.mechanism == "answer").unwrap();
        assert_eq!((answer.mechanistic, answer.quality), (Mechanistic::Unexercised, Quality::NotTested));
        assert_eq!((answer.trace.executed, answer.trace.included), (0, 0));
        assert!(answer.evidence.contains("reaches no context and is not judged"), "{}", answer.evidence);
        assert!(answer.contrast.is_none());
        // Three mechanisms are tested now (depth, fusion, ordering).
        assert_eq!(audits.iter().filter(|a| a.adjusted_p.is_some()).count(), 3);
        assert!(skippable_fields(&audits).contains(&"answer.format".to_string()));
    }

    /// Probes `c#p` observed at checkpoints 1..=10: deep retrieval gets
    /// probes 0..5 right at every checkpoint, nothing else is right.
    fn replay_fake() -> FakeBackend {
        let ids: Vec<String> = (0..12).flat_map(|p| (1..=10).map(move |k| format!("c#{p}@{k}"))).collect();
        let questions = ids.iter().map(|id| (id.clone(), "single-hop".to_string())).collect();
        FakeBackend::new(questions, move |a, _| {
            let deep = a.typed().unwrap().retrieve.top_k > 4;
            Ok(ids
                .iter()
                .map(|id| {
                    let probe: usize = id[2..id.find('@').unwrap()].parse().unwrap();
                    let correct = deep && probe < 5;
                    BackendOutcome {
                        conversation: Some("c".into()),
                        context_tokens: Some(if deep { 200.0 } else { 100.0 }),
                        ..BackendOutcome::new(id, "single-hop", correct)
                    }
                })
                .collect())
        })
    }

    #[test]
    fn under_replay_the_contrast_counts_probes_not_observations() {
        let audits = audit(&StrategySchema::builtin(), &replay_fake(), &served(), None, &f1()).unwrap();
        let depth = audits.iter().find(|a| a.mechanism == "retrieval depth").unwrap();
        let c = depth.contrast.as_ref().unwrap();
        assert_eq!((c.unit, c.pairs, c.questions), (TestUnit::Probe, 12, 120));
        assert_eq!((c.served_only, c.contrast_only), (5, 0));
        assert_eq!((c.observations_served_only, c.observations_contrast_only), (Some(50), Some(0)));
        // By observation 50 of 50 discordant would be p = 2^-49; by probe it is 2^-4.
        assert!(emend_stats::mcnemar(50, 0).exact_p < 1e-14);
        assert!((depth.p_value.unwrap() - 0.0625).abs() < 1e-12, "{depth:?}");
        assert_eq!((depth.mechanistic, depth.quality), (Mechanistic::Contributing, Quality::Inconclusive));
        assert!(depth.evidence.contains("5 of 12 probes change outcome"), "{}", depth.evidence);
        // The endpoint outcomes of the same probes keep the question as the unit.
        let endpoint = audit(&StrategySchema::builtin(), &fake(), &served(), None, &f1()).unwrap();
        let c = endpoint.iter().find(|a| a.mechanism == "retrieval depth").unwrap().contrast.clone().unwrap();
        assert_eq!((c.unit, c.pairs, c.observations_served_only), (TestUnit::Question, 24, None));
    }
}
