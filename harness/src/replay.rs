//! Longitudinal replay: the plan of checkpoints and probe observations, and
//! the per-checkpoint summaries.
//!
//! Each conversation is replayed in order with a checkpoint after every
//! `every_sessions` sessions (and one after its last session). At checkpoint
//! `k` the memory holds the turns of the sessions seen so far. A question (a
//! probe) becomes eligible at the first checkpoint where its reference holds
//! and its evidence is available, and is then asked again at every later
//! checkpoint of its conversation, each time against the reference valid then
//! ([`crate::dataset::Question::reference_at`]). A question with evidence ids
//! that cannot be resolved (they may lie anywhere) is asked at the last
//! checkpoint only. Every probe is therefore observed at its conversation's
//! last checkpoint, where all history is in: on a dataset without reference
//! versions, the last observations are the endpoint evaluation.
//!
//! Observation ids are `<question id>@<checkpoint>`. Summaries count, at
//! checkpoint `k`, the probes eligible at `k`; a conversation with fewer
//! checkpoints counts with its last ones (its history is complete), so probe
//! counts never fall from one checkpoint to the next. An observation that is
//! missing (an output a system did not write) counts as wrong, like a missing
//! output under endpoint evaluation.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::dataset::{Question, Sample};

/// How a task set is evaluated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Protocol {
    /// Ingest whole conversations, ask every question once at the end.
    #[default]
    Endpoint,
    /// Replay conversations with a checkpoint every `every_sessions` sessions.
    Replay { every_sessions: u32 },
}

impl Protocol {
    pub fn is_endpoint(&self) -> bool {
        matches!(self, Protocol::Endpoint)
    }
}

/// The number of checkpoints of a conversation of `sessions` sessions.
pub fn checkpoint_count(sessions: usize, every_sessions: u32) -> u32 {
    let n = every_sessions.max(1) as usize;
    sessions.div_ceil(n) as u32
}

/// The sessions (a count from the first) available at checkpoint `k` (1-based).
pub fn sessions_at(sessions: usize, every_sessions: u32, k: u32) -> usize {
    (k as usize).saturating_mul(every_sessions.max(1) as usize).min(sessions)
}

/// The checkpoint at which a question becomes eligible.
pub fn first_checkpoint(sample: &Sample, q: &Question, every_sessions: u32) -> u32 {
    let total = checkpoint_count(sample.sessions.len(), every_sessions);
    if !q.unresolved.is_empty() && q.reference_versions.is_empty() {
        return total;
    }
    (1..=total)
        .find(|&k| {
            let n = sessions_at(sample.sessions.len(), every_sessions, k);
            let last_number = sample.sessions[n - 1].number;
            match q.reference_at(last_number) {
                None => false,
                Some(r) => r.evidence.iter().all(|e| sample.session_index(e).is_some_and(|s| s < n)),
            }
        })
        .unwrap_or(total)
}

/// The observation id of a probe at a checkpoint.
pub fn observation_id(question_id: &str, checkpoint: u32) -> String {
    format!("{question_id}@{checkpoint}")
}

/// The probe (question id) an observation id belongs to; an id without a
/// checkpoint suffix is its own probe.
pub fn probe_of(id: &str) -> &str {
    match id.rsplit_once('@') {
        Some((probe, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => probe,
        _ => id,
    }
}

/// The checkpoint of an observation id, if it has one.
pub fn checkpoint_of(id: &str) -> Option<u32> {
    let (_, k) = id.rsplit_once('@')?;
    k.parse().ok()
}

/// One planned observation: a question as asked at a checkpoint.
#[derive(Debug, Clone)]
pub struct Observation {
    pub checkpoint: u32,
    /// The sessions (a count from the first) available then.
    pub sessions: usize,
    /// The question with its reference at the checkpoint and the observation id.
    pub question: Question,
}

/// Every observation of one question, in checkpoint order.
pub fn observations(sample: &Sample, q: &Question, every_sessions: u32) -> Vec<Observation> {
    let total = checkpoint_count(sample.sessions.len(), every_sessions);
    let first = first_checkpoint(sample, q, every_sessions);
    (first..=total)
        .map(|k| {
            let n = sessions_at(sample.sessions.len(), every_sessions, k);
            let last_number = sample.sessions[n - 1].number;
            let mut question = q.reference_at(last_number).unwrap_or_else(|| q.clone());
            question.id = observation_id(&q.id, k);
            Observation { checkpoint: k, sessions: n, question }
        })
        .collect()
}

/// Replay's lifecycle schedule: what runs on memory between checkpoints and
/// what answering a probe does to it, as every replay states it: between
/// checkpoints the next sessions' turns are appended (ingest filters look
/// only backwards, the index is rebuilt over the items present); one
/// maintenance job may run at each checkpoint, `ingest.consolidate`
/// (retiring an item that is a near-duplicate of a newer one, see
/// [`crate::consolidate`]), and none otherwise (no merging, forgetting or
/// re-ingest); answering writes nothing back (no reinforcement, no
/// reordering). Recency decay, when the strategy has it,
/// is measured from the clock of the checkpoint: the latest session date the
/// memory holds then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lifecycle {
    pub every_sessions: u32,
    /// `append-only`.
    pub between_checkpoints: String,
    /// `none`, or `consolidate (threshold T)`: at each checkpoint an item
    /// that is a near-duplicate of a newer one is retired ([`crate::consolidate`]).
    pub maintenance: String,
    /// `none`.
    pub query_side_effects: String,
    /// The strategy's `retrieve.recency_half_life_days` (0: no ageing).
    pub recency_half_life_days: f64,
    /// `latest-session-date`: the clock recency decay is measured from.
    pub clock: String,
    /// With ageing, each conversation's clock at each of its checkpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clocks: Vec<ConversationClocks>,
}

/// One conversation's clock by checkpoint (`8 May 2023`; null when no session
/// held then is dated, and recency decay does not apply).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationClocks {
    pub conversation: String,
    pub clocks: Vec<Option<String>>,
}

impl Lifecycle {
    /// The schedule of a replay every `every_sessions` sessions, with the
    /// clocks of `samples` when `recency_half_life_days > 0`.
    pub fn new(every_sessions: u32, recency_half_life_days: f64, samples: &[Sample]) -> Lifecycle {
        let clocks = if recency_half_life_days > 0.0 {
            samples
                .iter()
                .map(|s| ConversationClocks { conversation: s.id.clone(), clocks: clocks(s, every_sessions) })
                .collect()
        } else {
            Vec::new()
        };
        Lifecycle {
            every_sessions,
            between_checkpoints: "append-only".into(),
            maintenance: "none".into(),
            query_side_effects: "none".into(),
            recency_half_life_days,
            clock: "latest-session-date".into(),
            clocks,
        }
    }

    /// The schedule with the strategy's maintenance (`ingest.consolidate`).
    pub fn with_maintenance(mut self, consolidate: &crate::strategy::Consolidate) -> Lifecycle {
        if !consolidate.is_off() {
            self.maintenance = format!("consolidate (threshold {})", consolidate.threshold);
        }
        self
    }

    /// One line for a terminal.
    pub fn line(&self) -> String {
        let ageing = if self.recency_half_life_days > 0.0 {
            format!(
                "recency decay (half-life {} days) measured from each checkpoint's latest session date",
                self.recency_half_life_days
            )
        } else {
            "no ageing (recency decay off)".into()
        };
        format!(
            "{} between checkpoints, maintenance {}, query side effects {}; {ageing}",
            self.between_checkpoints, self.maintenance, self.query_side_effects
        )
    }
}

/// The latest session date held at each checkpoint of a conversation.
fn clocks(sample: &Sample, every_sessions: u32) -> Vec<Option<String>> {
    (1..=checkpoint_count(sample.sessions.len(), every_sessions))
        .map(|k| {
            let n = sessions_at(sample.sessions.len(), every_sessions, k);
            sample.sessions[..n]
                .iter()
                .filter_map(|s| s.date)
                .max_by(|a, b| a.days().total_cmp(&b.days()))
                .map(|d| d.stamp())
        })
        .collect()
}

/// One observation as the summaries read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub conversation: String,
    /// The observation id (`<question id>@<checkpoint>`).
    pub id: String,
    pub checkpoint: u32,
    /// None when the observation is missing: it counts as wrong.
    pub correct: Option<bool>,
    pub context_tokens: Option<u32>,
}

/// The results at one checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    pub checkpoint: u32,
    /// Probes eligible at this checkpoint (conversations already ended count with their last checkpoint).
    pub probes: usize,
    pub correct: usize,
    pub accuracy: f64,
    /// Over the observations present (a missing one has no context).
    pub mean_context_tokens: f64,
    /// Observations planned but missing (counted wrong).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// An accuracy, as [`crate::Summary`] computes it (0 of 0 is 0).
fn ratio(a: f64, n: usize) -> f64 {
    if n == 0 { 0.0 } else { a / n as f64 }
}

/// Per-checkpoint summaries of a replay's observations (the planned ones,
/// missing ones marked). A conversation's last checkpoint is the largest one
/// among its observations; at later checkpoints its last observations count.
pub fn checkpoint_summaries(observed: &[Observed]) -> Vec<CheckpointSummary> {
    let mut last: HashMap<&str, u32> = HashMap::new();
    for o in observed {
        let e = last.entry(o.conversation.as_str()).or_default();
        *e = (*e).max(o.checkpoint);
    }
    let top = last.values().copied().max().unwrap_or(0);
    let mut out = Vec::with_capacity(top as usize);
    for k in 1..=top {
        let (mut probes, mut correct, mut missing, mut tokens, mut present) = (0usize, 0usize, 0usize, 0u64, 0usize);
        for o in observed {
            let at = k.min(last[o.conversation.as_str()]);
            if o.checkpoint != at {
                continue;
            }
            probes += 1;
            match o.correct {
                Some(c) => {
                    correct += usize::from(c);
                    present += 1;
                    tokens += u64::from(o.context_tokens.unwrap_or(0));
                }
                None => missing += 1,
            }
        }
        out.push(CheckpointSummary {
            checkpoint: k,
            probes,
            correct,
            accuracy: ratio(correct as f64, probes),
            mean_context_tokens: (ratio(tokens as f64, present) * 1000.0).round() / 1000.0,
            missing,
        });
    }
    out
}

/// The accuracy of each probe's last observation (missing counts as wrong).
pub fn final_accuracy(observed: &[Observed]) -> f64 {
    let mut last: BTreeMap<&str, (u32, bool)> = BTreeMap::new();
    for o in observed {
        let e = last.entry(probe_of(&o.id)).or_insert((0, false));
        if o.checkpoint >= e.0 {
            *e = (o.checkpoint, o.correct.unwrap_or(false));
        }
    }
    ratio(last.values().filter(|v| v.1).count() as f64, last.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(conv: &str, q: &str, k: u32, correct: Option<bool>) -> Observed {
        Observed {
            conversation: conv.into(),
            id: observation_id(q, k),
            checkpoint: k,
            correct,
            context_tokens: correct.map(|_| 10),
        }
    }

    #[test]
    fn ids_round_trip_and_checkpoints_cover_every_session() {
        assert_eq!(probe_of("conv-26#3@12"), "conv-26#3");
        assert_eq!(probe_of("conv-26#3"), "conv-26#3");
        assert_eq!(probe_of("a@b#3"), "a@b#3");
        assert_eq!(checkpoint_of("c#1@4"), Some(4));
        assert_eq!(checkpoint_count(19, 1), 19);
        assert_eq!(checkpoint_count(19, 4), 5);
        assert_eq!(sessions_at(19, 4, 5), 19);
        assert_eq!(sessions_at(19, 4, 2), 8);
    }

    #[test]
    fn ended_conversations_carry_their_last_checkpoint_and_missing_counts_wrong() {
        let o = vec![
            obs("a", "a#0", 1, Some(true)),
            obs("a", "a#0", 2, Some(false)),
            obs("b", "b#0", 1, Some(true)),
            obs("a", "a#1", 2, None),
        ];
        let s = checkpoint_summaries(&o);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].probes, s[0].correct), (2, 2));
        // b ended at 1: its observation counts at 2 as well; a#1 is missing.
        assert_eq!((s[1].probes, s[1].correct, s[1].missing), (3, 1, 1));
        assert_eq!(final_accuracy(&o), ratio(1.0, 3));
    }

    #[test]
    fn the_lifecycle_states_its_schedule_and_the_clock_of_each_checkpoint() {
        let d = crate::Dataset::builtin();
        let plain = Lifecycle::new(4, 0.0, d.samples());
        assert!(plain.clocks.is_empty());
        assert_eq!(
            (plain.between_checkpoints.as_str(), plain.maintenance.as_str(), plain.query_side_effects.as_str()),
            ("append-only", "none", "none")
        );
        assert!(plain.line().contains("no ageing"), "{}", plain.line());
        let aged = Lifecycle::new(4, 30.0, d.samples());
        assert_eq!(aged.clocks.len(), d.samples().len());
        for (c, s) in aged.clocks.iter().zip(d.samples()) {
            assert_eq!(c.clocks.len(), checkpoint_count(s.sessions.len(), 4) as usize);
            let last = s.sessions.iter().rev().find_map(|x| x.date).map(|x| x.stamp());
            assert_eq!(c.clocks.last().cloned().flatten(), last, "{}", c.conversation);
        }
    }
}
