//! `emend show rN`: one round's record, with the digest the planner read.

use std::path::Path;

use emend_core::events::{RoundRecord, T_ROUNDS, round_key};
use emend_core::exit;
use emend_core::percent::percent;
use emend_journal::EventLog;

use super::common;
use super::term;
use super::{CmdResult, Failure};

/// `r3` -> 3 (a candidate id such as `r3c2` is not a round).
pub fn parse_round(spec: &str) -> Option<u64> {
    let digits = spec.strip_prefix('r')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Prints round `round`'s record and digest (as JSON with `json`).
pub fn show(round: u64, json: bool, no_color: bool, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let value = log
        .get(T_ROUNDS, &round_key(round))
        .map_err(common::journal_failure)?
        .ok_or_else(|| Failure::bad_input(anyhow::anyhow!("no round r{round} in the journal")))?;
    if json {
        common::print_json(&value);
        return Ok(exit::OK);
    }
    let record: RoundRecord = serde_json::from_value(value)
        .map_err(|e| Failure::failed(anyhow::anyhow!("round r{round}'s record does not read: {e}")))?;
    term::print_stdout(&render(&record), no_color);
    Ok(exit::OK)
}

/// The round's lines: what was served before and after, then the digest.
pub fn render(r: &RoundRecord) -> String {
    let mut out = format!(
        "round {}: served v{} -> v{} ({} on the whole task set){}\n",
        r.round,
        r.served_version_before,
        r.served_version_after,
        percent(r.served_accuracy, 1),
        r.accepted.as_ref().map_or(String::new(), |a| format!(", accepted {a}"))
    );
    out.push_str(&format!(
        "candidates: {} ({} probes, {} confirm tests)\n",
        r.candidates, r.probe_evaluations, r.full_evaluations
    ));
    match &r.digest {
        Some(d) => {
            out.push_str("digest (what the planner read, search part):\n");
            for line in d.describe() {
                out.push_str(&format!("  {line}\n"));
            }
        }
        None => out.push_str("digest: none (the round was journaled before the digester)\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_parse_and_candidate_ids_do_not() {
        assert_eq!(parse_round("r3"), Some(3));
        assert_eq!(parse_round("r12"), Some(12));
        assert_eq!(parse_round("r3c2"), None);
        assert_eq!(parse_round("r"), None);
        assert_eq!(parse_round("v3"), None);
    }
}
