//! The evaluation contract: what the loop asks to evaluate a strategy (the
//! [`Backend`] trait) and every way an evaluation can fail, a command
//! shard's failures included ([`shard`]). The built-in harness
//! (`builtin.rs`) runs in process; an external system runs as a command
//! (`command.rs`). The loop sees only this trait (ask/tell), so the
//! evaluator is swappable.

use std::path::PathBuf;
use std::sync::Arc;

use crate::llm::Models;
use emend_core::artifact::Artifact;
use emend_core::outcome::Evaluation;

pub mod shard;

pub use shard::{FieldProblem, LineProblem, OutcomeFileError, ShardFailed, ShardFailure};

/// Why an evaluation could not complete. The candidate is rejected as
/// `errored`; for the served strategy the run fails.
///
/// Each message is one line that carries its cause's text as well as keeping
/// the cause as its source: the loop journals an errored candidate's reason as
/// that one line.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The artifact is not a strategy the built-in harness can run.
    #[error(transparent)]
    Strategy(#[from] emend_core::artifact::ArtifactError),
    /// The built-in harness could not run the evaluation.
    #[error(transparent)]
    Harness(#[from] emend_harness::EvalError),
    /// A subset named a question the task set does not have.
    #[error("question {id} is not in the task set")]
    UnknownQuestion { id: String },
    /// A file of the evaluation's working directory could not be made.
    #[error(transparent)]
    Io(FileError),
    /// A shard of the external harness failed: the first by shard index; the
    /// others that failed are counted.
    #[error("{failed}{}", shard::more_failed_shards(*others))]
    Shard {
        #[source]
        failed: Box<ShardFailed>,
        others: usize,
    },
    /// An evaluation returned questions in error, or not one outcome per question asked.
    #[error("{}", incomplete_message(*expected, *got, *answered, first_error.as_ref()))]
    Incomplete {
        /// Questions asked.
        expected: usize,
        /// Outcomes returned.
        got: usize,
        /// Outcomes without an error.
        answered: usize,
        /// The first outcome with an error, in outcome order.
        first_error: Option<QuestionError>,
    },
    /// A stop was requested (a signal, `--preempt`, a closed output) before this evaluation began.
    #[error("not evaluated: the run was asked to stop ({cause})")]
    Interrupted { cause: &'static str },
}

impl BackendError {
    /// `Err(Interrupted)` once the run was asked to stop: backends check it
    /// before each evaluation, so a stop request waits for at most one.
    pub fn unless_stopped() -> Result<(), BackendError> {
        match emend_core::stop::requested() {
            Some(cause) => Err(BackendError::Interrupted { cause: cause.as_str() }),
            None => Ok(()),
        }
    }
}

fn incomplete_message(expected: usize, got: usize, answered: usize, first_error: Option<&QuestionError>) -> String {
    let mut m = format!("{answered} of {expected} questions answered");
    if got != expected {
        m.push_str(&format!(" ({got} outcomes returned)"));
    }
    if let Some(q) = first_error {
        m.push_str(&format!("; {} could not be evaluated (first: {}: {})", got - answered, q.id, q.error));
    }
    m
}

/// A question whose outcome carries an error, and that error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionError {
    pub id: String,
    pub error: String,
}

/// A file the file system refused, and what emend was doing to it: the one
/// type of both the evaluation's working directory ([`BackendError::Io`]) and
/// a shard's ([`shard::ShardFailure::Io`]).
#[derive(Debug, thiserror::Error)]
#[error("{}: {action}: {source}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    pub action: FileAction,
    #[source]
    pub source: std::io::Error,
}

/// What emend was doing to a file when the file system refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAction {
    CreateTempDir,
    CreateDir,
    Create,
    Write,
}

impl std::fmt::Display for FileAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileAction::CreateTempDir => "cannot create a temporary directory",
            FileAction::CreateDir => "cannot create the directory",
            FileAction::Create => "cannot create",
            FileAction::Write => "cannot write",
        })
    }
}

/// Evaluates strategies on a locked task set.
pub trait Backend: Send + Sync {
    /// Identity of the evaluation framework and its locked settings.
    fn harness_hash(&self) -> String;
    /// Identity of the task set.
    fn dataset_hash(&self) -> String;
    /// `(id, category)` of every question of the task set, sorted by id.
    fn questions(&self) -> Vec<(String, String)>;
    /// LLM roles available to strategies (fields with `x-needs-role`), and the
    /// installed models (`minilm`, fields with `x-needs-model`).
    fn roles(&self) -> Vec<String>;
    /// The configured model roles (the loop's critic and evolver live here too).
    fn models(&self) -> Option<&Arc<Models>> {
        None
    }
    /// Evaluates on every question, or on `subset` (sorted ids) for a probe.
    fn evaluate(&self, artifact: &Artifact, subset: Option<&[String]>) -> Result<Evaluation, BackendError>;
}

impl BackendError {
    /// Describes `eval`, returned for `expected` questions, as incomplete. Whether it
    /// is (an outcome in error, or not one outcome per question) is the caller's test.
    pub fn incomplete(eval: &Evaluation, expected: usize) -> BackendError {
        let first_error = eval
            .outcomes
            .iter()
            .find_map(|o| o.error.as_ref().map(|e| QuestionError { id: o.id.clone(), error: e.clone() }));
        BackendError::Incomplete { expected, got: eval.n(), answered: eval.n() - eval.errors(), first_error }
    }

    /// An evaluation that could not complete is a failed run (exit 1), never bad input:
    /// even an unknown question id is the engine's own subset, not the user's.
    pub fn exit_class(&self) -> emend_journal::ErrorClass {
        match self {
            BackendError::Strategy(_)
            | BackendError::Harness(_)
            | BackendError::UnknownQuestion { .. }
            | BackendError::Io(_)
            | BackendError::Shard { .. }
            | BackendError::Incomplete { .. }
            | BackendError::Interrupted { .. } => emend_journal::ErrorClass::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::outcome::BackendOutcome;

    fn outcome(id: &str, error: Option<&str>) -> BackendOutcome {
        let mut o: BackendOutcome = serde_json::from_value(serde_json::json!({
            "id": id, "conversation": "c", "category": "single-hop", "correct": false
        }))
        .expect("a minimal outcome record");
        o.error = error.map(str::to_string);
        o
    }

    #[test]
    fn an_incomplete_evaluation_says_what_came_back_and_the_first_error() {
        let eval = Evaluation::new(vec![
            outcome("q1", None),
            outcome("q3", Some("roles.judge: HTTP 500")),
            outcome("q2", Some("timeout")),
        ]);
        let e = BackendError::incomplete(&eval, 3);
        assert_eq!(e.to_string(), "1 of 3 questions answered; 2 could not be evaluated (first: q2: timeout)");
        assert_eq!(e.exit_class(), emend_journal::ErrorClass::Failed);
        let short = BackendError::incomplete(&Evaluation::new(vec![outcome("q1", None)]), 2);
        assert_eq!(short.to_string(), "1 of 2 questions answered (1 outcomes returned)");
    }
}
