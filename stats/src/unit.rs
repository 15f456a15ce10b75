//! What one pair of a paired confirm test is: a question, or under
//! longitudinal replay a probe's trajectory ([`crate::better_test_by_probe`]),
//! and the probe-level test's parts. Both the question-level test
//! (`onesided`) and the probe-level one (`probe`) record it.

use serde::{Deserialize, Serialize};

/// What one pair of the confirm test is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestUnit {
    /// A question, observed once (endpoint evaluation).
    #[default]
    Question,
    /// A probe's whole trajectory over the checkpoints (longitudinal replay).
    Probe,
    /// A conversation (`harness.split.unit: conversation`): the exact
    /// sign-flip test over the confirm part's conversations decides.
    Conversation,
}

impl TestUnit {
    pub fn is_question(&self) -> bool {
        *self == TestUnit::Question
    }

    /// The plural a report counts pairs in.
    pub fn plural(self) -> &'static str {
        match self {
            TestUnit::Question => "questions",
            TestUnit::Probe => "probes",
            TestUnit::Conversation => "conversations",
        }
    }
}

/// The parts of a probe-level test besides the final checkpoint's counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeDetail {
    pub observations: u64,
    /// Observations the candidate got right and the served strategy wrong.
    pub improved: u64,
    pub regressed: u64,
    /// The one-sided exact p on the probes' last observations.
    pub final_p: f64,
    /// The accuracy difference over every observation.
    pub estimate: f64,
    /// Its CR2 t statistic clustered by probe (0 with too few probes).
    pub t: f64,
    /// Bell-McCaffrey degrees of freedom (0 with too few probes).
    pub df: f64,
    /// Its one-sided p-value (1 with too few probes).
    pub clustered_p: f64,
}
