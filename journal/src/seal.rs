//! The binding between the store and its read view.
//!
//! The view (`events.log`) is a cache of the store. With each batch the writer records in
//! the store, in the same transaction as the batch and its head, a [`ViewBinding`]: the
//! seq and hash the view ends at after that batch, its length in bytes and the SHA-256 of
//! its bytes, and the same before the batch. After it publishes the batch to the view it
//! writes the same binding to `events.seal` (atomically, by rename), a small file readers
//! read. So:
//!
//! - a writer hashes the view and compares it with the binding; only on a mismatch does
//!   it compare every record of the view with the store (`compare::judge`), as `verify` always
//!   does, to name the first differing seq;
//! - a reader never opens the store: it checks the view against the seal it read before
//!   the view: the view must reach the sealed seq and carry the sealed hash there. A
//!   forger who rewrites both the view and the seal with a recomputed chain is found by
//!   the next writer and by `verify`, not by a reader.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Name of the seal file inside the journal directory.
pub const SEAL_FILE: &str = "events.seal";
const SEAL_TMP: &str = "events.seal.tmp";

/// Where the view ends after a batch, and where it ended before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ViewBinding {
    /// The view's last seq and its hash (the store's head).
    pub seq: u64,
    pub hash: String,
    /// The view's length in bytes, header included.
    pub len: u64,
    /// The view's last seq and length before this batch (equal to the above after a
    /// rewrite): a view that ends there lacks only the last batch, as after a crash between
    /// the store's commit and the view's write.
    pub prev_seq: u64,
    pub prev_len: u64,
    /// SHA-256 (hex) of the view's bytes after this batch and before it: a writer that
    /// finds the view hashing to one of them knows it matches (or lacks only the last
    /// batch) without reading its records (`None` in bindings written before digests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_digest: Option<String>,
}

impl ViewBinding {
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a binding serializes")
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("the recorded view binding is not valid: {e}"))
    }
}

/// Read the seal file; `Ok(None)` when there is none (a journal written before seals).
pub(crate) fn read_seal(dir: &Path) -> Result<Option<ViewBinding>, String> {
    match std::fs::read(dir.join(SEAL_FILE)) {
        Ok(bytes) => ViewBinding::decode(&bytes).map(Some).map_err(|e| format!("{SEAL_FILE}: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", dir.join(SEAL_FILE).display())),
    }
}

/// Write the seal file atomically. A failure is logged: readers then check the view
/// against an older seal, which the view still satisfies.
pub(crate) fn write_seal(dir: &Path, binding: &ViewBinding) {
    let tmp = dir.join(SEAL_TMP);
    let written = std::fs::write(&tmp, binding.encode()).and_then(|()| std::fs::rename(&tmp, dir.join(SEAL_FILE)));
    if let Err(e) = written {
        tracing::warn!(seal = %dir.join(SEAL_FILE).display(), "could not write the view's seal: {e}");
    }
}
