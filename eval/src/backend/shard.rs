//! Why a shard of an external harness failed: which shard and how often it ran
//! ([`ShardFailed`]), what went wrong on its last attempt ([`ShardFailure`]), and,
//! for output that breaks the protocol, where in the outcomes file
//! ([`OutcomeFileError`], [`LineProblem`]).
//!
//! Every message is one line that names the shard, the file, the line and the field,
//! and carries the text of its cause, because the loop journals an errored
//! candidate's reason as that one line.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// The file name of a shard's outcomes, as error messages name it.
pub(crate) const OUT_FILE: &str = "out.jsonl";

/// Largest outcomes file read: a runaway command must not exhaust memory.
pub(crate) const MAX_OUTPUT_BYTES: u64 = 512 * 1024 * 1024;

/// Bad lines reported in full; the rest are counted.
const MAX_MISSING_SHOWN: usize = 5;

/// A shard that failed, on its last attempt, after a retry when the failure
/// was of a kind a second run may not repeat ([`ShardFailure::is_retried`]).
#[derive(Debug, thiserror::Error)]
pub struct ShardFailed {
    /// 1-based.
    pub shard: usize,
    /// Shards of the evaluation.
    pub count: usize,
    /// Why the first attempt failed, when the shard ran twice.
    pub first_attempt: Option<Box<ShardFailure>>,
    /// Why the last attempt failed.
    #[source]
    pub kind: ShardFailure,
}

impl ShardFailed {
    /// How often the shard's command ran: 1, or 2 with a retry.
    pub fn attempts(&self) -> u32 {
        if self.first_attempt.is_some() { 2 } else { 1 }
    }
}

impl fmt::Display for ShardFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {}/{}: {}", self.shard, self.count, self.kind)?;
        let Some(first) = &self.first_attempt else { return Ok(()) };
        if !self.kind.is_retried() {
            return write!(f, " (on the retry; first attempt: {first})");
        }
        let (last, first) = (self.kind.to_string(), first.to_string());
        if last == first {
            write!(f, " after retry")?;
        } else {
            write!(f, " after retry (first attempt: {first})")?;
        }
        match self.kind.stderr() {
            Some("") => write!(f, "; stderr: (empty)"),
            Some(tail) => write!(f, "; stderr: {tail}"),
            None => Ok(()),
        }
    }
}

/// What went wrong on one attempt of a shard.
#[derive(Debug, thiserror::Error)]
pub enum ShardFailure {
    /// The command could not be started (or waited for).
    #[error("cannot start {program:?} in {}: {source}", workdir.display())]
    Spawn {
        program: String,
        workdir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The command ran past its timeout and was killed.
    #[error("timed out after {after:?} (killed)")]
    TimedOut {
        after: Duration,
        /// The tail of its stderr, on one line.
        stderr: String,
    },
    /// The command exited unsuccessfully or was killed by a signal.
    #[error("{}", describe_status(*status))]
    Exited {
        status: ExitStatus,
        /// The tail of its stderr, on one line.
        stderr: String,
    },
    /// The outcomes follow the protocol, but some carry an `error`.
    #[error("{OUT_FILE}:{line}: question {id} not answered: {error}{}", more(*others, "unanswered"))]
    Unanswered {
        /// The first unanswered question's line.
        line: usize,
        id: String,
        /// The error the command reported for it.
        error: String,
        /// Further unanswered questions.
        others: usize,
    },
    /// The outcomes file breaks the protocol.
    #[error(transparent)]
    Output(#[from] OutcomeFileError),
    /// A file of the shard's working directory could not be made.
    #[error(transparent)]
    Io(super::FileError),
}

impl ShardFailure {
    /// Whether the shard runs once more after this failure. A process that failed
    /// (exit status, signal, timeout, a question it could not answer) may be bad
    /// luck; output that breaks the protocol is a bug in the command, and a
    /// working directory that cannot be written fails the same way twice.
    pub fn is_retried(&self) -> bool {
        match self {
            ShardFailure::Spawn { .. }
            | ShardFailure::TimedOut { .. }
            | ShardFailure::Exited { .. }
            | ShardFailure::Unanswered { .. } => true,
            ShardFailure::Output(_) | ShardFailure::Io(_) => false,
        }
    }

    /// The tail of the command's stderr, when the command ran and failed.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            ShardFailure::TimedOut { stderr, .. } | ShardFailure::Exited { stderr, .. } => Some(stderr),
            _ => None,
        }
    }
}

/// An outcomes file (`out.jsonl`) that breaks the protocol.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeFileError {
    #[error("the command exited 0 but wrote no {OUT_FILE} (the {{out}} path)")]
    NotWritten,
    #[error("{OUT_FILE}: cannot read: {source}")]
    Unreadable {
        #[source]
        source: std::io::Error,
    },
    #[error("{OUT_FILE}: {bytes} bytes; an outcomes file is at most {MAX_OUTPUT_BYTES} bytes")]
    TooLarge { bytes: u64 },
    #[error("{OUT_FILE}:{line}: not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { line: usize, offset: usize },
    /// The first bad line; the others are counted.
    #[error("{OUT_FILE}:{line}: {problem}{}", more(*others, "bad lines"))]
    BadLine {
        line: usize,
        #[source]
        problem: LineProblem,
        others: usize,
    },
    /// Questions of the shard with no line.
    #[error("{OUT_FILE}: {} of {expected} questions missing: {}", missing.len(), shown(missing))]
    Missing {
        /// In dataset order.
        missing: Vec<String>,
        /// Questions of the shard.
        expected: usize,
    },
}

/// What is wrong with one line of an outcomes file.
#[derive(Debug, thiserror::Error)]
pub enum LineProblem {
    /// `message` is the parser's, without its position: the line is parsed on its
    /// own, so the parser's "line 1" would contradict the file's line number.
    #[error("not valid JSON (column {column}): {message}")]
    NotJson { column: usize, message: String },
    /// The record breaks the outcome schema; at most three problems are shown.
    #[error("{}", schema_problems(problems))]
    Schema { problems: Vec<FieldProblem> },
    #[error("field \"id\": {id:?} is not a question of this shard")]
    NotInShard { id: String },
    #[error("field \"id\": duplicate {id:?} (first on line {first_line})")]
    Duplicate { id: String, first_line: usize },
    #[error("field \"category\": expected {expected:?} (the task's category), got {got:?}")]
    WrongCategory { expected: String, got: String },
    #[error("field \"conversation\": expected {expected:?} (the question's sample_id), got {got:?}")]
    WrongConversation { expected: String, got: String },
    #[error("does not fit an outcome record: {source}")]
    NotARecord {
        #[source]
        source: serde_json::Error,
    },
}

/// One schema violation: the field's path (empty for the record itself) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FieldProblem {
    pub field: String,
    pub message: String,
}

/// Schema problems shown in a message; the record's first few say enough to fix it.
const SCHEMA_PROBLEMS_SHOWN: usize = 3;

fn schema_problems(problems: &[FieldProblem]) -> String {
    let text: Vec<String> = problems
        .iter()
        .take(SCHEMA_PROBLEMS_SHOWN)
        .map(|p| {
            if p.field.is_empty() {
                p.message.clone()
            } else {
                format!("field {field:?}: {}", p.message, field = p.field)
            }
        })
        .collect();
    text.join("; ")
}

fn shown(missing: &[String]) -> String {
    let list = missing.iter().take(MAX_MISSING_SHOWN).map(String::as_str).collect::<Vec<_>>().join(", ");
    let hidden = missing.len().saturating_sub(MAX_MISSING_SHOWN);
    if hidden > 0 { format!("{list} (and {hidden} more)") } else { list }
}

fn more(others: usize, what: &str) -> String {
    if others > 0 { format!(" (and {others} more {what})") } else { String::new() }
}

/// ` (and N more failed shards)`, or nothing.
pub(crate) fn more_failed_shards(others: usize) -> String {
    more(others, "failed shards")
}

fn describe_status(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                13 => " (SIGPIPE)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("killed by signal {sig}{name}");
        }
    }
    status.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed_out(stderr: &str) -> ShardFailure {
        ShardFailure::TimedOut { after: Duration::from_secs(2), stderr: stderr.into() }
    }

    fn bad_json() -> ShardFailure {
        OutcomeFileError::BadLine {
            line: 3,
            problem: LineProblem::NotJson { column: 1, message: "expected value".into() },
            others: 0,
        }
        .into()
    }

    #[test]
    fn a_retried_failure_says_both_attempts_and_the_last_stderr() {
        let same =
            ShardFailed { shard: 2, count: 3, first_attempt: Some(Box::new(timed_out("a"))), kind: timed_out("b") };
        assert_eq!(same.attempts(), 2);
        assert_eq!(same.to_string(), "shard 2/3: timed out after 2s (killed) after retry; stderr: b");
        let unanswered = ShardFailure::Unanswered { line: 4, id: "q1".into(), error: "rate limited".into(), others: 2 };
        let differ = ShardFailed { shard: 1, count: 1, first_attempt: Some(Box::new(unanswered)), kind: timed_out("") };
        assert_eq!(
            differ.to_string(),
            "shard 1/1: timed out after 2s (killed) after retry (first attempt: out.jsonl:4: question q1 not answered: \
             rate limited (and 2 more unanswered)); stderr: (empty)"
        );
    }

    #[test]
    fn broken_output_is_not_retried_and_says_which_attempt_broke_it() {
        assert!(!bad_json().is_retried());
        let once = ShardFailed { shard: 1, count: 2, first_attempt: None, kind: bad_json() };
        assert_eq!(once.attempts(), 1);
        assert_eq!(once.to_string(), "shard 1/2: out.jsonl:3: not valid JSON (column 1): expected value");
        let retry = ShardFailed { shard: 1, count: 2, first_attempt: Some(Box::new(timed_out("x"))), kind: bad_json() };
        assert_eq!(
            retry.to_string(),
            "shard 1/2: out.jsonl:3: not valid JSON (column 1): expected value \
             (on the retry; first attempt: timed out after 2s (killed))"
        );
    }

    #[test]
    fn missing_questions_show_the_first_few() {
        let missing: Vec<String> = (0..7).map(|i| format!("q{i}")).collect();
        let e = OutcomeFileError::Missing { missing, expected: 9 };
        assert_eq!(e.to_string(), "out.jsonl: 7 of 9 questions missing: q0, q1, q2, q3, q4 (and 2 more)");
    }

    #[test]
    fn schema_problems_show_at_most_three_and_name_their_field() {
        let p = |field: &str, message: &str| FieldProblem { field: field.into(), message: message.into() };
        let problems = vec![p("", "expected an object"), p("a", "missing"), p("b", "missing"), p("c", "missing")];
        assert_eq!(
            LineProblem::Schema { problems }.to_string(),
            r#"expected an object; field "a": missing; field "b": missing"#
        );
    }
}
