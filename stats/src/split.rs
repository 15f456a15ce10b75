//! A seeded split of the task set into a *search* part and a *confirm* part.
//!
//! Everything before the paired confirm test (diagnosis, planning, examples,
//! probes, line searches, surrogate fits) may read the search part; only the
//! confirm test reads the confirm part. Splitting by a seed and the task keys
//! alone, never by outcomes, keeps the confirm part independent of anything
//! the search learns.
//!
//! One design ([`SplitDesign`]): the *unit* (a question, or a whole
//! conversation), the confirm *share* and the *seed*. Each unit's part is
//! derived from a hash of (seed, unit id) alone: the unit goes to the confirm
//! part when `hash(seed, id) / 2^64 < share`. So a unit's part never depends on
//! which other units exist: adding questions (or conversations) to a task set
//! never moves an existing one between parts, and removing some moves none
//! of the others. The price is that the parts' sizes are binomial around
//! `share * units` rather than exact (with 762 questions at 0.4, 305 ± 14).
//!
//! Under `question` every conversation is in both parts, so a confirm test's
//! guarantee covers new questions about these conversations; under
//! `conversation` the parts share no conversation, and the confirm test (a
//! test over conversations) speaks for new conversations like these.
//!
//! The hash is FNV-1a 64 over the id's bytes, mixed with the seed by
//! SplitMix64's finalizer: fixed here, so a split does not change with the
//! compiler, the platform or a dependency's version.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The keys of one question that the split may look at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskKey {
    pub id: String,
    pub conversation: String,
    pub category: String,
}

impl TaskKey {
    pub fn new(id: impl Into<String>, conversation: impl Into<String>, category: impl Into<String>) -> Self {
        TaskKey { id: id.into(), conversation: conversation.into(), category: category.into() }
    }
}

/// The two parts, each a sorted list of question ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    pub search: Vec<String>,
    pub confirm: Vec<String>,
}

/// What the split assigns to a part as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitUnit {
    /// Each question on its own: every conversation is in both parts.
    Question,
    /// Whole conversations: the parts share no conversation.
    Conversation,
}

impl SplitUnit {
    pub fn name(self) -> &'static str {
        match self {
            SplitUnit::Question => "question",
            SplitUnit::Conversation => "conversation",
        }
    }
}

/// The split's design: unit, confirm share and seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SplitDesign {
    pub unit: SplitUnit,
    pub confirm_fraction: f64,
    pub seed: u64,
}

/// Why a split could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SplitError {
    #[error("harness.split: the confirm fraction must be in (0, 1), got {0}")]
    Fraction(f64),
    #[error("harness.split: question id {0:?} appears twice in the task set")]
    Duplicate(String),
    #[error("harness.split: the task set is empty")]
    Empty,
    #[error(
        "harness.split: with unit {unit} and seed {seed}, all {units} {unit}s went to the {part} part; \
         the other part would be empty and no confirm test could run ({hint})"
    )]
    EmptyPart { unit: &'static str, units: usize, seed: u64, part: &'static str, hint: &'static str },
    #[error(
        "harness.split.unit: conversation put {confirm} conversations in the confirm part with seed {seed}; the \
         test over conversations needs at least {MIN_CONFIRM_CONVERSATIONS} to be able to accept (use unit auto or \
         question, or a task set with more conversations)"
    )]
    TooFewConversations { confirm: usize, seed: u64 },
}

/// The default share of the task set in the confirm part
/// (`harness.split.confirm_fraction`). Chosen on the peer benchmark
/// (docs/benchmarks.md: 0.5, 0.4, 0.3 and 0.25 measured on five held-out
/// conversations): the first jump is +15 to +29 pp, which 40% of the
/// questions detect with power near 1, and the larger search part overfits
/// the pruned winner less. The null simulations in `sim.rs` run at it.
pub const DEFAULT_CONFIRM_FRACTION: f64 = 0.4;

/// The fewest conversations a split by conversation puts in the confirm
/// part. The test over conversations (an exact sign-flip test) cannot
/// reach a p-value below `2^-k` with k conversations, so with 6 it cannot
/// accept at LORD++'s first alpha (0.0152) at all; with 7 its power for a
/// +10 pp step is 0.61 there (`sim_conversation.rs`). `unit: auto` splits
/// by conversation only when the split puts at least this many
/// conversations in the confirm part (at share 0.4 that needs about 17 or
/// more in the task set); `unit: conversation` with fewer is refused.
pub const MIN_CONFIRM_CONVERSATIONS: usize = 7;

/// The unit's position in [0, 1): FNV-1a 64 of the id, mixed with the seed
/// by SplitMix64's finalizer.
pub fn unit_position(seed: u64, id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut z = h ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The unit `harness.split.unit: auto` picks: conversation when splitting
/// by conversation puts at least [`MIN_CONFIRM_CONVERSATIONS`] conversations
/// in the confirm part and at least one in the search part; question otherwise.
pub fn auto_unit(tasks: &[TaskKey], confirm_fraction: f64, seed: u64) -> SplitUnit {
    let conversations: BTreeSet<&str> = tasks.iter().map(|t| t.conversation.as_str()).collect();
    let confirm = conversations.iter().filter(|c| unit_position(seed, c) < confirm_fraction).count();
    if confirm >= MIN_CONFIRM_CONVERSATIONS && confirm < conversations.len() {
        SplitUnit::Conversation
    } else {
        SplitUnit::Question
    }
}

/// Splits `tasks` by question: each question goes to the confirm part when
/// its hash position is below `confirm_fraction`. Same tasks (in any
/// order), fraction and seed: same split.
pub fn split(tasks: &[TaskKey], confirm_fraction: f64, seed: u64) -> Result<Split, SplitError> {
    split_by(tasks, &SplitDesign { unit: SplitUnit::Question, confirm_fraction, seed })
}

/// Splits `tasks` by the design's unit. A unit's part depends only on the
/// seed, the share and its own id. Fails when either part would be empty.
pub fn split_by(tasks: &[TaskKey], design: &SplitDesign) -> Result<Split, SplitError> {
    let f = design.confirm_fraction;
    if !(f > 0.0 && f < 1.0) {
        return Err(SplitError::Fraction(f));
    }
    if tasks.is_empty() {
        return Err(SplitError::Empty);
    }
    let mut seen = BTreeSet::new();
    let mut out = Split { search: Vec::new(), confirm: Vec::new() };
    for t in tasks {
        if !seen.insert(t.id.as_str()) {
            return Err(SplitError::Duplicate(t.id.clone()));
        }
        let unit = match design.unit {
            SplitUnit::Question => &t.id,
            SplitUnit::Conversation => &t.conversation,
        };
        if unit_position(design.seed, unit) < f {
            out.confirm.push(t.id.clone());
        } else {
            out.search.push(t.id.clone());
        }
    }
    if design.unit == SplitUnit::Conversation {
        let confirm: BTreeSet<&str> = tasks
            .iter()
            .filter(|t| unit_position(design.seed, &t.conversation) < f)
            .map(|t| t.conversation.as_str())
            .collect();
        if !confirm.is_empty() && confirm.len() < MIN_CONFIRM_CONVERSATIONS {
            return Err(SplitError::TooFewConversations { confirm: confirm.len(), seed: design.seed });
        }
    }
    if out.search.is_empty() || out.confirm.is_empty() {
        let units = match design.unit {
            SplitUnit::Question => tasks.len(),
            SplitUnit::Conversation => tasks.iter().map(|t| &t.conversation).collect::<BTreeSet<_>>().len(),
        };
        let part = if out.search.is_empty() { "confirm" } else { "search" };
        let hint = match design.unit {
            SplitUnit::Question => "add questions to the task set, or try another harness.split.seed",
            SplitUnit::Conversation => "try another harness.split.seed, or unit question",
        };
        return Err(SplitError::EmptyPart { unit: design.unit.name(), units, seed: design.seed, part, hint });
    }
    out.search.sort();
    out.confirm.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn tasks(conversations: usize) -> Vec<TaskKey> {
        // Conversations of 16 to 32 questions, in four categories.
        let mut out = Vec::new();
        for conv in 0..conversations {
            for cat in 1..=4 {
                for q in 0..(3 + (conv % 5) * 2 + cat) {
                    out.push(TaskKey::new(format!("c{conv}-k{cat}-q{q}"), format!("c{conv}"), format!("{cat}")));
                }
            }
        }
        out
    }

    fn design(unit: SplitUnit, confirm_fraction: f64, seed: u64) -> SplitDesign {
        SplitDesign { unit, confirm_fraction, seed }
    }

    #[test]
    fn the_confirm_share_is_binomial_around_the_fraction() {
        let tasks = tasks(40);
        for (f, seed) in [(0.5, 1), (0.4, 2), (0.25, 3), (0.7, 4)] {
            let s = split(&tasks, f, seed).unwrap();
            assert_eq!(s.search.len() + s.confirm.len(), tasks.len());
            let n = tasks.len() as f64;
            let sd = (n * f * (1.0 - f)).sqrt();
            assert!((s.confirm.len() as f64 - f * n).abs() < 4.0 * sd, "f = {f}: {} of {n}", s.confirm.len());
        }
    }

    #[test]
    fn the_split_depends_on_the_seed_but_not_on_input_order() {
        let tasks = tasks(40);
        for unit in [SplitUnit::Question, SplitUnit::Conversation] {
            let a = split_by(&tasks, &design(unit, 0.5, 7)).unwrap();
            let mut reversed = tasks.clone();
            reversed.reverse();
            assert_eq!(split_by(&reversed, &design(unit, 0.5, 7)).unwrap(), a);
            let ids: BTreeSet<&String> = a.search.iter().chain(&a.confirm).collect();
            assert_eq!(ids.len(), tasks.len(), "the parts are disjoint and cover the task set");
        }
        assert_ne!(split(&tasks, 0.5, 8).unwrap(), split(&tasks, 0.5, 7).unwrap());
    }

    #[test]
    fn adding_ten_percent_new_questions_never_moves_an_existing_one() {
        let old = tasks(40);
        let mut grown = old.clone();
        // 10% more: new questions in existing conversations and two new conversations.
        for i in 0..old.len() / 10 {
            let conv = if i % 3 == 0 { format!("new{}", i % 2) } else { format!("c{}", i % 40) };
            grown.push(TaskKey::new(format!("added-{i}"), conv, "2"));
        }
        for unit in [SplitUnit::Question, SplitUnit::Conversation] {
            for seed in 0..5 {
                let d = design(unit, DEFAULT_CONFIRM_FRACTION, seed);
                let (before, after) = (split_by(&old, &d).unwrap(), split_by(&grown, &d).unwrap());
                let confirm: BTreeSet<&String> = after.confirm.iter().collect();
                let search: BTreeSet<&String> = after.search.iter().collect();
                assert!(before.confirm.iter().all(|id| confirm.contains(id)), "{unit:?} seed {seed}");
                assert!(before.search.iter().all(|id| search.contains(id)), "{unit:?} seed {seed}");
                // And removing the added ones gives the old split back.
                assert_eq!(split_by(&grown[..old.len()], &d).unwrap(), before);
            }
        }
    }

    #[test]
    fn by_conversation_the_parts_share_no_conversation() {
        let tasks = tasks(30);
        let s = split_by(&tasks, &design(SplitUnit::Conversation, 0.4, 3)).unwrap();
        let part: BTreeMap<&str, bool> = s.confirm.iter().map(|id| (id.as_str(), true)).collect();
        let mut convs: BTreeMap<&str, BTreeSet<bool>> = BTreeMap::new();
        for t in &tasks {
            convs.entry(&t.conversation).or_default().insert(part.contains_key(t.id.as_str()));
        }
        assert!(convs.values().all(|parts| parts.len() == 1), "a conversation in both parts");
        let confirm = convs.values().filter(|p| p.contains(&true)).count();
        assert!((6..=18).contains(&confirm), "{confirm} of 30 conversations in the confirm part");
    }

    #[test]
    fn auto_splits_by_conversation_only_with_enough_confirm_conversations() {
        let d = |g: usize, seed: u64| auto_unit(&tasks(g), DEFAULT_CONFIRM_FRACTION, seed);
        assert!((0..20).all(|seed| d(5, seed) == SplitUnit::Question), "5 conversations: by question");
        assert!((0..20).all(|seed| d(60, seed) == SplitUnit::Conversation), "60 conversations: by conversation");
        for g in [12, 17, 20, 25] {
            for seed in 0..20 {
                let convs = tasks(g).into_iter().map(|t| t.conversation).collect::<BTreeSet<_>>();
                let confirm = convs.iter().filter(|c| unit_position(seed, c) < DEFAULT_CONFIRM_FRACTION).count();
                let want =
                    if confirm >= MIN_CONFIRM_CONVERSATIONS { SplitUnit::Conversation } else { SplitUnit::Question };
                assert_eq!(d(g, seed), want, "{g} conversations, seed {seed}: {confirm} in the confirm part");
                if want == SplitUnit::Conversation {
                    split_by(&tasks(g), &design(SplitUnit::Conversation, DEFAULT_CONFIRM_FRACTION, seed)).unwrap();
                }
            }
        }
    }

    #[test]
    fn the_hash_is_pinned() {
        // A changed hash would move every project's questions between parts:
        // these values must never change.
        let got: Vec<String> = [(0, "conv-26_q0"), (0, "conv-30"), (7, "conv-26_q0"), (u64::MAX, "")]
            .iter()
            .map(|&(s, id)| format!("{:.12}", unit_position(s, id)))
            .collect();
        assert_eq!(got, PINNED);
    }

    const PINNED: [&str; 4] = ["0.957071320062", "0.280044264388", "0.249500003198", "0.355403845919"];

    #[test]
    fn bad_input_is_named() {
        let tasks = tasks(5);
        assert_eq!(split(&tasks, 0.0, 1), Err(SplitError::Fraction(0.0)));
        assert_eq!(split(&tasks, 1.0, 1), Err(SplitError::Fraction(1.0)));
        assert!(matches!(split(&tasks, f64::NAN, 1), Err(SplitError::Fraction(_))));
        assert_eq!(split(&[], 0.5, 1), Err(SplitError::Empty));
        let mut dup = tasks.clone();
        dup.push(tasks[3].clone());
        assert_eq!(split(&dup, 0.5, 1), Err(SplitError::Duplicate(tasks[3].id.clone())));
        let few = split_by(&tasks, &design(SplitUnit::Conversation, 0.4, 1)).unwrap_err();
        assert!(matches!(few, SplitError::TooFewConversations { .. }), "{few}");
        assert!(few.to_string().contains("needs at least 7"), "{few}");
        let one = vec![TaskKey::new("a", "c", "1"), TaskKey::new("b", "c", "1")];
        let err = split_by(&one, &design(SplitUnit::Conversation, 0.4, 0)).unwrap_err();
        assert!(matches!(err, SplitError::EmptyPart { units: 1, .. }), "{err}");
        assert!(err.to_string().contains("all 1 conversations"), "{err}");
    }
}
