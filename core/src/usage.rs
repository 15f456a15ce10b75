//! What the model roles cost, role by role: requests (retries included),
//! tokens the server reported, replies served from the cache, failed calls.
//! The journal records it with every round; the model roles count it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What one role cost: requests sent (retries included), tokens the server
/// reported, replies served from the cache, calls that failed after retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleUsage {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cache_hits: u64,
    pub errors: u64,
    #[serde(default)]
    pub retries: u64,
}

impl RoleUsage {
    fn minus(&self, before: &RoleUsage) -> RoleUsage {
        RoleUsage {
            requests: self.requests.saturating_sub(before.requests),
            prompt_tokens: self.prompt_tokens.saturating_sub(before.prompt_tokens),
            completion_tokens: self.completion_tokens.saturating_sub(before.completion_tokens),
            cache_hits: self.cache_hits.saturating_sub(before.cache_hits),
            errors: self.errors.saturating_sub(before.errors),
            retries: self.retries.saturating_sub(before.retries),
        }
    }

    pub fn add(&mut self, other: &RoleUsage) {
        self.requests += other.requests;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cache_hits += other.cache_hits;
        self.errors += other.errors;
        self.retries += other.retries;
    }

    pub fn is_zero(&self) -> bool {
        *self == RoleUsage::default()
    }
}

/// Usage per role name.
pub type Usage = BTreeMap<String, RoleUsage>;

/// `now - before`, role by role (roles with nothing to show are left out).
pub fn usage_since(now: &Usage, before: &Usage) -> Usage {
    now.iter()
        .map(|(role, u)| (role.clone(), before.get(role).map_or(*u, |b| u.minus(b))))
        .filter(|(_, u)| !u.is_zero())
        .collect()
}
