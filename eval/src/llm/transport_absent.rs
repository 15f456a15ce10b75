//! A role's transport in a binary built without the `llm` feature: none.
//! [`super::Models::new`] refuses every configured role first, so no
//! [`Transport`] exists and its methods are never reached.

use std::convert::Infallible;

use super::wire::{Attempt, Message};
use emend_core::config::RoleConfig;

/// Whether this binary can call a model endpoint.
pub const BUILT: bool = false;

/// A connection this binary cannot make.
pub struct Transport {
    never: Infallible,
}

impl Transport {
    pub fn new(_endpoint: &str, _key: &str) -> Transport {
        unreachable!("Models::new refuses roles in a binary built without the llm feature")
    }

    pub(super) async fn send(
        &self,
        _settings: &RoleConfig,
        _messages: &[Message],
    ) -> Result<(String, u64, u64), Attempt> {
        match self.never {}
    }
}
