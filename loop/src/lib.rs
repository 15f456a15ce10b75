//! emend's loop: Observe -> Improve -> Verify, one round at a time.
//!
//! - [`evolve`]: the round (observe the served strategy, propose, screen:
//!   the fail-fast gates and the critic before a confirm test, confirm,
//!   decide, apply) and a run's summary.
//! - The proposers: the planner's one-field moves ([`propose`]), the global
//!   search with one confirmed jump per served change ([`jump`], the
//!   default), and the step search of the conservative mode
//!   ([`step_search`], `search.method: steps`).
//! - [`hooks`]: the commands a project runs on events.
//! - [`progress`]: what a run reports as it goes (to a callback).
//! - [`audit`]: the fidelity audit of the pipeline's mechanisms.
//! - [`operate`]: operator workflows (rollback, restore-best, approve) for the binary to print.
//! - [`init`]: creating a project (`emend init`), checked before it writes, undone on failure.
//!
//! The rule: this crate depends on `emend-core` and `emend-eval` (and the
//! crates below them); it prints nothing.

pub mod audit;
pub mod evolve;
pub mod hooks;
pub mod init;
pub mod jump;
pub mod operate;
pub mod progress;
pub mod propose;
pub mod step_search;
