//! Paired statistics for the confirm test: is a candidate strategy better
//! than the served one on the same questions?
//!
//! The pipeline, each step a pure function over frozen records:
//!
//! 1. [`pair`]: align two runs' [`Outcome`]s by question id into a [`Paired`]
//!    set (improved, regressed, both-correct, both-wrong, per-category deltas).
//! 2. [`mcnemar`]: McNemar's test on the discordant counts (|I|, |R|), exact
//!    binomial for few discordant pairs, continuity-corrected chi-square otherwise.
//! 3. [`paired_bootstrap`]: a seeded percentile CI of the accuracy difference,
//!    resampling questions or whole conversations.
//! 4. [`verdict`]: every acceptance rule with its number and pass/fail.
//!
//! [`compare`] runs all four.
//!
//! The confirm gate (issue 13) adds: [`split()`] (a seeded, stratified
//! search/confirm split), [`better_test`] (one-sided exact McNemar with a lower
//! bound at the test's own alpha) and [`minimum_detectable_effect`],
//! [`Lord`] (LORD++ online error control indexed by tests run) and
//! [`cluster_check`] (CR2 with Bell-McCaffrey degrees of freedom, or "too few clusters to tell"),
//! and [`adjusted_gain`] (an accepted candidate's gain adjusted for the
//! winner's curse of being reported because the test accepted).
//! When the split's unit is the conversation, the confirm test is
//! [`conversation_test`] (an exact sign-flip test over conversation totals).
//! Under longitudinal replay the confirm test takes the probe as its unit
//! ([`better_test_by_probe`]: the final checkpoint's exact test and a
//! probe-clustered test across checkpoints).
//! When the operator prices tokens (`cost.per_1k_tokens`), the priced confirm
//! test is [`utility_test`]: a sign-flip test of the mean utility difference
//! (accuracy net of the token cost), by question or by conversation.
//!
//! Nothing here reads files, clocks or global randomness: seeds and
//! thresholds are arguments, and the same inputs give the same output.

mod bootstrap;
#[cfg(test)]
mod calibration;
mod cluster;
mod comparison;
mod curse;
mod lord;
mod mcnemar;
mod noninferior;
mod onesided;
mod pairing;
mod probe;
mod race;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod sim_conversation;
#[cfg(test)]
mod sim_curse;
#[cfg(test)]
mod sim_lord;
#[cfg(test)]
mod sim_noninferior;
#[cfg(test)]
mod sim_replay;
#[cfg(test)]
mod sim_utility;
mod split;
#[cfg(test)]
mod testdata;
mod unit;
mod utility;
mod verdict;

pub use bootstrap::{BootstrapCi, BootstrapConfig, BootstrapError, BootstrapUnit, paired_bootstrap};
pub use cluster::{
    ClusterCheck, ConversationTest, EXACT_SIGN_FLIPS_UP_TO, MIN_CLUSTERS, SIGN_FLIP_DRAWS, bell_mccaffrey_df,
    cluster_check, conversation_test,
};
pub use comparison::{CompareConfig, Comparison, StatsError, compare};
pub use curse::adjusted_gain;
pub use lord::{Deployment, Gamma, JM_CONSTANT, Lord, LordConfig, LordError, LordTest};
pub use mcnemar::{EXACT_BELOW, McNemar, McNemarTest, mcnemar};
pub use noninferior::{NonInferiorTest, noninferiority_test, tango_statistic};
pub use onesided::{BetterTest, better_p_value, better_test, lower_bound, minimum_detectable_effect, power};
pub use pairing::{CategoryDelta, Outcome, Pair, Paired, PairingError, Side, pair};
pub use probe::{
    ProbeCounts, better_test_by_conversation, better_test_by_probe, gate_test, has_observation_ids, mcnemar_by_probe,
    probe_counts,
};
pub use race::{race_drops, race_looks};
pub use split::{
    DEFAULT_CONFIRM_FRACTION, MIN_CONFIRM_CONVERSATIONS, Split, SplitDesign, SplitError, SplitUnit, TaskKey, auto_unit,
    split, split_by, unit_position,
};
pub use unit::{ProbeDetail, TestUnit};
pub use utility::{UtilityPair, UtilityTest, utility_test};
pub use verdict::{Cost, Rule, RuleKind, ThresholdError, Thresholds, Verdict, category_floor, keeps_category, verdict};
