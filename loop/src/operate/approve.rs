//! The sequence behind `emend approve`, as a plain request and a plain
//! result: the version's review state (pending, not superseded, not
//! quarantined), a hand-edited served file refused, the tested pair (as
//! tested; else retested against the version served now, or forced), the
//! served move ([`served::approve`]: journal first, then the file) and the
//! `on_served` hook. The binary parses the arguments, opens the journal with
//! the operator's takeover flags (checking [`approve_refusal`] on whatever
//! view it holds), prints the [`Approved`] and maps an [`ApproveError`] to
//! its exit code.

use emend_core::config::Project;
use emend_core::events::Event;
use emend_core::schema::StrategySchema;
use emend_core::served::{self, ServedError};
use emend_core::setup::SetupError;
use emend_core::store::{Store, StoreError};
use emend_journal::{EventLog, JournalError};

use crate::evolve::{Evolution, EvolveError, retest_judged};
use crate::hooks::{self, Change};

/// An operator's approval of a pending version, as asked.
#[derive(Debug, Clone, Default)]
pub struct ApproveRequest {
    pub version: u64,
    /// Why (journaled); the default names who approved.
    pub reason: Option<String>,
    /// When another version is served than the one it was tested against:
    /// test it against the served version now and serve it only if it passes.
    pub retest: bool,
    /// ... or serve it untested against the served version (needs a reason).
    pub force: bool,
}

/// What an approval did.
#[derive(Debug, Clone)]
pub struct Approved {
    pub version: u64,
    /// The version served before.
    pub from: Option<u64>,
    /// The reason journaled with the served move.
    pub reason: String,
    /// The passed retest's record id, when the pair was retested.
    pub retest: Option<String>,
    /// The retest's verdict line, when the pair was retested.
    pub retest_reason: Option<String>,
    /// The events written, the served move last.
    pub events: Vec<Event>,
    /// Why the `on_served` hook failed, if it did (journaled; the change stands).
    pub hook: Option<String>,
}

/// Why an approval was refused or could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    /// Refused as asked (exit 2), before anything was written.
    #[error("{0}")]
    Refused(String),
    /// Nothing was served (exit 1): the retest ran, failed and is journaled
    /// (`verdict` is its verdict line), or the served move wrote nothing.
    #[error("{message}")]
    NotServed { verdict: Option<String>, message: String },
    /// The project's backend could not be set up for the retest.
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Evolve(#[from] EvolveError),
    #[error(transparent)]
    Served(#[from] ServedError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// The review state of `version` (`pending`, `superseded`, `approved`...).
fn review_status(log: &dyn EventLog, version: u64) -> Result<String, ApproveError> {
    match Store::new(log).reviews()?.get(&version) {
        Some(r) => Ok(r["status"].as_str().unwrap_or("?").to_string()),
        None => Err(ApproveError::Refused(format!("v{version} is not pending approval (see `emend pending`)"))),
    }
}

/// Every refusal of an approval (the version's review state, a quarantine, a
/// hand-edited served file, a stale tested pair without retest or force), on
/// any view of the journal: nothing is written.
pub fn approve_refusal(
    project: &Project,
    schema: &StrategySchema,
    log: &dyn EventLog,
    request: &ApproveRequest,
) -> Result<(), ApproveError> {
    let v = request.version;
    if request.force && request.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(ApproveError::Refused(
            "approve --force: --reason is required (it is journaled with the forced approval)".into(),
        ));
    }
    match review_status(log, v)?.as_str() {
        "pending" => {}
        "superseded" => {
            return Err(ApproveError::Refused(format!(
                "v{v} was superseded by a newer pending version tested against the same served version \
                 (see `emend pending --all`); it is no longer a live option"
            )));
        }
        other => return Err(ApproveError::Refused(format!("v{v} is not pending: it was {other}"))),
    }
    let store = Store::new(log);
    if let Some(q) = store.quarantined()?.get(&v) {
        return Err(ApproveError::Refused(format!("v{v} is quarantined ({}); unquarantine it first", q["reason"])));
    }
    if let served::FileState::HandEdited { file_hash } = served::served_file_state(project, schema, log)? {
        return Err(ApproveError::Refused(format!(
            "{}: edited by hand (hash {file_hash:.12}); refusing to replace it (see `emend rollback --force`)",
            project.strategy_path().display()
        )));
    }
    let tested = store.live_pending()?.get(&v).copied();
    let served_now = store.served()?.map_or(0, |s| s.version);
    if tested != Some(served_now) && !request.force && !request.retest {
        return Err(stale_pair(v, tested, served_now));
    }
    Ok(())
}

/// The refusal of an approval of `v`, tested against `tested`, while `served_now` is served.
fn stale_pair(v: u64, tested: Option<u64>, served_now: u64) -> ApproveError {
    let against = tested.map_or("a version the journal does not name".to_string(), |t| format!("v{t}"));
    ApproveError::Refused(format!(
        "v{v} was tested against {against}, but v{served_now} is served now; approve it with --retest (a confirm \
         test against v{served_now} at the next LORD++ alpha, served only if it passes) or with --force --reason \
         ... (served untested against v{served_now}, journaled as forced)"
    ))
}

/// Approves pending `request.version` on the journal the caller holds as
/// writer (after [`approve_refusal`] passed on it): the tested pair, the
/// served move and the hook. `who` names the operator in the default reason.
pub fn approve<L: EventLog>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
    request: &ApproveRequest,
    who: &str,
) -> Result<Approved, ApproveError> {
    approve_refusal(project, schema, &*log, request)?;
    let v = request.version;
    let reason = request.reason.clone().unwrap_or_else(|| format!("approved by {who}"));
    let (approval, retest_reason) = tested_pair(project, schema, log, request, reason)?;
    let retest = approval.retest.clone();
    let events = served::approve(project, schema, log, v, approval)?;
    let Some(Event::ServedChanged { from, hash, reason, .. }) = events.last().cloned() else {
        return Err(ApproveError::NotServed { verdict: None, message: "approve wrote no served change".into() });
    };
    let hook = hooks::on_served(project, log, from, v, &hash, Change::Approved);
    Ok(Approved { version: v, from, reason, retest, retest_reason, events, hook })
}

/// The approval of pending `v` as a tested pair: as it is when the served
/// version is the one `v` was tested against; else forced, or after a passed
/// retest (a failed one is journaled and nothing is served). With it, the
/// retest's verdict line when there was one.
fn tested_pair<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
    request: &ApproveRequest,
    reason: String,
) -> Result<(served::Approval, Option<String>), ApproveError> {
    let v = request.version;
    let store = Store::new(&*log);
    let tested = store.live_pending()?.get(&v).copied();
    let served_now = store.served()?.map_or(0, |s| s.version);
    let mut approval = served::Approval { reason, ..Default::default() };
    if tested == Some(served_now) {
        return Ok((approval, None));
    }
    if request.force {
        approval.forced_over = Some(served_now);
        return Ok((approval, None));
    }
    if !request.retest {
        return Err(stale_pair(v, tested, served_now));
    }
    let backend = emend_eval::open(project, schema)?;
    let mut evolution = Evolution { project, schema, backend: backend.as_ref(), log: &mut *log };
    let retested = evolution.retest(v)?;
    if !retested.passed {
        log.append(vec![retest_judged(&retested).to_new()])?;
        let (verdict, id) = (retested.record.reason.clone(), &retested.record.id);
        let message = format!("v{v} was not served: {verdict} (the test is journaled as {id})");
        return Err(ApproveError::NotServed { verdict: Some(verdict), message });
    }
    approval.retest = Some(retested.record.id.clone());
    approval.evidence = vec![retest_judged(&retested)];
    Ok((approval, Some(retested.record.reason.clone())))
}
