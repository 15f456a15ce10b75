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
//!   it compare every record of the view with the store ([`judge`]), as `verify` always
//!   does, to name the first differing seq;
//! - a reader never opens the store: it checks the view against the seal it read before
//!   the view: the view must reach the sealed seq and carry the sealed hash there. A
//!   forger who rewrites both the view and the seal with a recomputed chain is found by
//!   the next writer and by `verify`, not by a reader.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::projection::Projector;
use crate::verify::ChainCheck;
use crate::view::{self, VIEW_FILE};

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

/// What a pass over the view's bytes found.
#[derive(Debug, Default)]
pub(crate) struct ViewScan {
    /// The hash of each record, seq 1 first, up to the first problem.
    pub hashes: Vec<String>,
    /// Bytes up to the end of the last complete, intact frame.
    pub good_len: u64,
    /// Bytes after it: a frame cut short (a write in progress or a crash).
    pub torn: u64,
    /// The first problem: the seq it concerns and what it is.
    pub problem: Option<ViewDifference>,
}

impl ViewScan {
    pub(crate) fn last_seq(&self) -> u64 {
        self.hashes.len() as u64
    }
}

/// Where and how the view differs from the store (or from itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDifference {
    /// The first seq that differs (for a view that lacks records: the first one it lacks).
    pub seq: u64,
    pub detail: String,
}

impl std::fmt::Display for ViewDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seq {}: {}", self.seq, self.detail)
    }
}

/// Check every frame and record of the view: checksums, seqs, hashes and links.
pub(crate) fn scan(bytes: &[u8], projector: &dyn Projector) -> ViewScan {
    let declared = Default::default();
    let mut check = ChainCheck::chain_only(projector, &declared);
    let mut out = ViewScan::default();
    let frames = match view::frames(bytes) {
        Ok(f) => f,
        Err(detail) => {
            out.problem = Some(ViewDifference { seq: 1, detail });
            return out;
        }
    };
    for body in &frames.bodies {
        let text = match view::body_text(body) {
            Ok(t) => t,
            Err(detail) => {
                out.problem = Some(ViewDifference { seq: check.last_good().seq + 1, detail });
                return out;
            }
        };
        for line in view::body_lines(&text) {
            let seq = check.last_good().seq + 1;
            if !check.feed(&seq.to_be_bytes(), line) {
                let (report, _) = check.finish(None);
                let b = report.chain_break.expect("a failed feed is a break");
                out.problem = Some(ViewDifference { seq: b.seq, detail: format!("{VIEW_FILE}: {b}") });
                return out;
            }
            out.hashes.push(check.last_good().hash);
        }
    }
    out.good_len = frames.good_len;
    if let Some(detail) = frames.damaged {
        out.problem = Some(ViewDifference { seq: out.last_seq() + 1, detail });
        return out;
    }
    match frames.bad_tail {
        Some(at) => {
            out.problem = Some(ViewDifference {
                seq: out.last_seq() + 1,
                detail: format!(
                    "{VIEW_FILE}: the last frame, at byte {at}, is complete but fails its checksum (edited)"
                ),
            })
        }
        None => out.torn = frames.trailing,
    }
    out
}

/// How the view stands against the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ViewState {
    /// Every record the same, and the view's length is the one the store recorded.
    InSync,
    /// A true prefix lacking only the store's last batch: a crash between the store's
    /// commit and the view's write.
    BehindByLastBatch {
        from: u64,
        to: u64,
    },
    Differs(ViewDifference),
}

/// Judge a scanned view against the store's record hashes (seq 1 first) and the binding
/// the store recorded (`None` for a journal written before bindings).
pub(crate) fn judge(view: &ViewScan, store: &[String], binding: Option<&ViewBinding>) -> ViewState {
    let differs = |seq: u64, detail: String| ViewState::Differs(ViewDifference { seq, detail });
    if let Some(b) = binding
        && (b.seq != store.len() as u64 || store.last().is_some_and(|h| *h != b.hash))
    {
        let last = store.len();
        return differs(
            (last as u64 + 1).min(b.seq),
            format!(
                "the store's head is seq {last}, but with its last batch it recorded a view ending at seq {} \
                 (the store was truncated or rewritten)",
                b.seq
            ),
        );
    }
    for (i, (v, s)) in view.hashes.iter().zip(store).enumerate() {
        if v != s {
            return differs(i as u64 + 1, format!("the view's record has hash {v}, the store's has hash {s}"));
        }
    }
    if let Some(p) = &view.problem {
        return ViewState::Differs(p.clone());
    }
    let (v_last, s_last) = (view.last_seq(), store.len() as u64);
    if v_last > s_last {
        return differs(
            s_last + 1,
            format!("the view holds seq {}..{v_last}, which the store does not hold", s_last + 1),
        );
    }
    match binding {
        Some(b) if v_last == s_last && view.good_len != b.len => {
            differs(v_last, format!("the view is {} bytes long, but the store recorded {} bytes", view.good_len, b.len))
        }
        _ if v_last == s_last => ViewState::InSync,
        Some(b) if v_last == b.prev_seq && view.good_len == b.prev_len => {
            ViewState::BehindByLastBatch { from: v_last + 1, to: s_last }
        }
        // A journal from before bindings: a true prefix is what a crash left.
        None => ViewState::BehindByLastBatch { from: v_last + 1, to: s_last },
        Some(_) => differs(
            v_last + 1,
            format!("the view ends at seq {v_last}, but the store holds up to seq {s_last} (the view was truncated)"),
        ),
    }
}
