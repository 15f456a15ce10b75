//! A backend for tests: a fixed list of questions, and a function that
//! answers each evaluation. The tests of the crates above build their
//! scripted systems on it (through the `test-support` feature) instead of
//! each implementing [`Backend`] again.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::backend::{Backend, BackendError};
use emend_core::artifact::{self, Artifact};
use emend_core::outcome::{BackendOutcome, Evaluation};

/// What a [`FakeBackend`] answers an evaluation of `artifact` on the
/// questions `ids` (the subset asked, else every question, in order).
pub type Answer = dyn Fn(&Artifact, &[String]) -> Result<Vec<BackendOutcome>, BackendError> + Send + Sync;

/// A scripted backend. Its harness hash is the SHA-256 of its harness name
/// (so two names are two harnesses) and its dataset hash that of its
/// question ids; it counts the evaluations it ran.
pub struct FakeBackend {
    harness: String,
    questions: Vec<(String, String)>,
    answer: Box<Answer>,
    calls: AtomicUsize,
}

impl FakeBackend {
    /// `questions` as `(id, category)`, answered by `answer`.
    pub fn new(
        questions: Vec<(String, String)>,
        answer: impl Fn(&Artifact, &[String]) -> Result<Vec<BackendOutcome>, BackendError> + Send + Sync + 'static,
    ) -> FakeBackend {
        FakeBackend { harness: "fake".into(), questions, answer: Box::new(answer), calls: AtomicUsize::new(0) }
    }

    /// The same backend under another harness name (another harness hash).
    pub fn with_harness(mut self, name: &str) -> FakeBackend {
        self.harness = name.into();
        self
    }

    /// Evaluations run so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Backend for FakeBackend {
    fn harness_hash(&self) -> String {
        artifact::sha256_hex(self.harness.as_bytes())
    }
    fn dataset_hash(&self) -> String {
        let ids: Vec<&str> = self.questions.iter().map(|(id, _)| id.as_str()).collect();
        artifact::sha256_hex(ids.join("\n").as_bytes())
    }
    fn questions(&self) -> Vec<(String, String)> {
        self.questions.clone()
    }
    fn roles(&self) -> Vec<String> {
        Vec::new()
    }
    fn evaluate(&self, artifact: &Artifact, subset: Option<&[String]>) -> Result<Evaluation, BackendError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let ids: Vec<String> = match subset {
            Some(s) => s.to_vec(),
            None => self.questions.iter().map(|(id, _)| id.clone()).collect(),
        };
        (self.answer)(artifact, &ids).map(Evaluation::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::schema::StrategySchema;

    #[test]
    fn answers_the_subset_asked_and_counts_its_calls() {
        let questions = (0..3).map(|i| (format!("q{i}"), "c".to_string())).collect();
        let backend = FakeBackend::new(questions, |_, ids| {
            Ok(ids.iter().map(|id| BackendOutcome::new(id, "c", id == "q1")).collect())
        });
        let schema = StrategySchema::builtin();
        let a = artifact::from_yaml("s", emend_core::artifact::DEFAULT_STRATEGY, &schema).unwrap();
        assert_eq!(backend.evaluate(&a, None).unwrap().outcomes.len(), 3);
        let one = backend.evaluate(&a, Some(&["q1".to_string()])).unwrap();
        assert_eq!((one.outcomes.len(), one.outcomes[0].correct), (1, true));
        assert_eq!(backend.calls(), 2);
        assert_ne!(
            backend.harness_hash(),
            FakeBackend::new(vec![], |_, _| Ok(vec![])).with_harness("b").harness_hash()
        );
    }
}
