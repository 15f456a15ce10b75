//! Exit codes a scheduler can act on. One place, documented.

/// The command did what it was asked (an evolve run that accepted nothing still succeeded).
pub const OK: u8 = 0;
/// The run failed: an evaluation, a verification or the journal could not complete.
pub const FAILED: u8 = 1;
/// Bad input or usage: a malformed file, a strategy that breaks the schema, a bad flag.
pub const BAD_INPUT: u8 = 2;
/// Another process holds the journal's writer lock.
pub const LOCKED: u8 = 3;
/// An `evolve` run stopped early because an operator's command (`rollback`,
/// `approve` or `restore-best` with `--preempt`) asked for the journal: the
/// round in progress was journaled as interrupted, nothing of it applied.
pub const PREEMPTED: u8 = 4;
/// An `evolve` run whose every candidate errored (the harness, the evolver or
/// the comparison failed each time): `stopped: errored`, naming the first error.
/// The served strategy itself could be evaluated (else the run exits 1).
pub const ERRORED: u8 = 5;
