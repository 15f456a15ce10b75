//! emend's evaluation layer: how a strategy gets evaluated.
//!
//! - [`backend`]: the contract the loop sees (the `Backend` trait, ask/tell)
//!   and every way an evaluation can fail.
//! - [`builtin`]: the built-in memory QA harness, in process or as Ray shards.
//! - [`command`]: an external system run as a command, shard by shard.
//! - [`collision`]: the entity-collision grid of `emend collision`.
//! - [`open`]: the backend a project's `harness.kind` names.
//! - `fake` (feature `test-support`): the scripted backend of the tests above.
//! - `test_server` (feature `test-support`): an OpenAI-compatible HTTP server
//!   for the tests and benchmarks of the model roles.
//! - [`llm`]: the model roles over OpenAI-compatible endpoints (HTTP behind
//!   the `llm` feature).
//!
//! The rule: this crate depends on `emend-core` (and the crates below it)
//! only; the loop above it sees only the `Backend` trait.

pub mod backend;
pub mod builtin;
pub mod collision;
pub mod command;
#[cfg(any(test, feature = "test-support"))]
pub mod fake;
pub mod llm;
#[cfg(feature = "test-support")]
pub mod test_server;

use emend_core::config::{HarnessKind, Project};
use emend_core::schema::StrategySchema;
use emend_core::setup::SetupError;

/// The backend `harness.kind` names: the built-in harness or a command.
pub fn open(project: &Project, schema: &StrategySchema) -> Result<Box<dyn backend::Backend>, SetupError> {
    Ok(match project.config.harness.kind {
        HarnessKind::Builtin => Box::new(builtin::BuiltinBackend::from_project(project)?),
        HarnessKind::Command => Box::new(command::CommandBackend::from_project(project, schema)?),
    })
}
