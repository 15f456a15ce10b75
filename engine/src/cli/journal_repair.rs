//! `emend journal repair`: rebuild the read view from the store when it differs, and
//! journal that it did.

use emend_journal::EventLog;
use serde_json::json;

use emend_core::config::Project;
use emend_core::events::{EngineProjector, Event, now_rfc3339, who};
use emend_core::exit;

use super::{CmdResult, common};

pub fn repair(project: &Project, as_json: bool) -> CmdResult {
    let dir = project.journal_dir();
    let (mut log, found) = emend_journal::repair(&dir, EngineProjector).map_err(common::journal_failure)?;
    let Some(found) = found else {
        let head = log.head();
        if as_json {
            common::print_json(&json!({"repaired": false, "head": head.seq}));
        } else {
            println!("the read view matches the store up to seq {}: nothing to repair", head.seq);
        }
        return Ok(exit::OK);
    };
    let event = Event::ViewRepaired { seq: found.seq, detail: found.detail.clone(), who: who(), at: now_rfc3339() };
    let records = log.append(vec![event.to_new()]).map_err(common::journal_failure)?;
    let seq = records.first().map_or(0, |r| r.seq);
    if as_json {
        common::print_json(&json!({
            "repaired": true,
            "differed_at": found.seq,
            "detail": found.detail,
            "journaled_seq": seq,
        }));
    } else {
        println!(
            "the read view differed from the store at {found}; rebuilt it from the store (journaled as seq {seq})"
        );
    }
    Ok(exit::OK)
}
