//! Comparing a view with the store: scanning every frame and record of the
//! view (checksums, seqs, hashes, links) and judging it against the store's
//! record hashes and the binding the store recorded. Writers and `verify`
//! use it; readers check the view against the seal (`reader.rs`).

use crate::projection::Projector;
use crate::seal::ViewBinding;
use crate::verify::{ChainCheck, ViewDifference};
use crate::view::{self, VIEW_FILE};

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
