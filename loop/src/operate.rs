//! Operator workflows: the sequences behind `emend rollback`, `emend
//! restore-best` and `emend approve` ([`approve`]), as plain inputs and a
//! plain result. The binary parses the
//! arguments, opens the journal with the operator's takeover flags, prints
//! the [`Rollback`] and maps a [`RollbackError`] to its exit code.
//!
//! A rollback: find the target (an unknown version is refused), skip when
//! nothing would change, refuse a version [`served::check_servable`] refuses,
//! guard a hand-edited served file (refused unless `force`, which journals
//! the edit first), quarantine what a rollback moves away from, apply it
//! with [`served::apply_rollback`] (journal first, then the file) and run
//! the `on_served` hook.

use emend_core::artifact;
use emend_core::config::Project;
use emend_core::events::Event;
use emend_core::schema::StrategySchema;
use emend_core::served::{self, FileState, ServedError};
use emend_core::store::{Store, StoreError};
use emend_journal::EventLog;

use crate::hooks;

mod approve;
pub use approve::{ApproveError, ApproveRequest, Approved, approve, approve_refusal};

/// Where a rollback goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    Version(u64),
    /// The best-ever version, read under the writer lock.
    Best,
}

/// An operator's rollback or restore-best, as asked.
#[derive(Debug, Clone)]
pub struct RollbackRequest {
    pub destination: Destination,
    /// Quarantines the versions rolled back from and pins the target
    /// (`rollback`); otherwise a restore-best (`restore_best`).
    pub pin: bool,
    /// Replace a hand-edited served file, journaling its content first.
    pub force: bool,
    /// Why (kept in the rollback record).
    pub reason: String,
    /// A token budget for the project's next runs (`rollback --max-tokens`),
    /// journaled with the rollback as a `budget_set` event.
    pub max_tokens: Option<u64>,
}

impl RollbackRequest {
    /// The record's cause: `rollback` (pinned) or `restore_best`.
    pub fn cause(&self) -> &'static str {
        if self.pin { "rollback" } else { "restore_best" }
    }
}

/// What happened to a hand-edited served file before it was replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandEdit {
    /// Journaled as this new version.
    Journaled(u64),
    /// Its content is already a journaled version.
    Known,
    /// Not a valid strategy: kept byte for byte beside the journal (the message says where).
    Kept(String),
}

/// What a rollback did.
#[derive(Debug)]
pub enum Rollback {
    /// The target is served already, unpinned, its file intact: nothing recorded.
    Unchanged {
        target: u64,
    },
    RolledBack(Box<RolledBack>),
}

/// What a rollback or restore-best changed.
#[derive(Debug)]
pub struct RolledBack {
    /// The reason recorded (the request's, with a note when a hand edit was kept).
    pub reason: String,
    /// The journaled `served_changed` event.
    pub event: Event,
    pub edit: Option<HandEdit>,
    pub quarantined: Vec<u64>,
    /// Why the `on_served` hook failed, if it ran and failed.
    pub hook: Option<String>,
    pub target: u64,
    /// The target was served already: the record only pins or unpins it.
    pub already_served: bool,
    /// The journaled `budget_set` event, when the request set a budget.
    pub budget: Option<Event>,
}

/// Why a rollback was refused or could not go on.
#[derive(Debug)]
pub enum RollbackError {
    /// Refused as asked (exit 2): the message says why.
    BadInput(String),
    /// Could not go on (exit 1).
    Failed(String),
    Served(ServedError),
    Store(StoreError),
}

impl From<ServedError> for RollbackError {
    fn from(e: ServedError) -> Self {
        RollbackError::Served(e)
    }
}

impl From<StoreError> for RollbackError {
    fn from(e: StoreError) -> Self {
        RollbackError::Store(e)
    }
}

/// Runs an operator's rollback or restore-best on the journal the caller
/// holds as writer. `warn` hears, when it happens, that a hand-edited served
/// file was no valid strategy and was kept beside the journal (before the
/// hook runs, whose output goes to stderr too).
pub fn rollback<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
    request: &RollbackRequest,
    warn: &mut dyn FnMut(&str),
) -> Result<Rollback, RollbackError> {
    let (cause, pin) = (request.cause(), request.pin);
    let Checked { target, served, unchanged } = check_rollback(project, schema, &*log, request)?;
    if unchanged {
        return Ok(Rollback::Unchanged { target });
    }
    let edit = guard_hand_edit(project, schema, log, request.force)?;
    let mut reason = request.reason.clone();
    if let Some(HandEdit::Kept(msg)) = &edit {
        warn(msg);
        reason.push_str(" (the hand-edited served file was not a valid strategy; it was kept beside the journal)");
    }
    let quarantined = if pin { quarantine_rolled_back_from(log, served.version, target, &reason)? } else { vec![] };
    let event = served::apply_rollback(project, schema, log, target, cause, &reason, pin)?;
    let budget = match request.max_tokens {
        Some(max_tokens) => {
            let set = Event::BudgetSet {
                max_tokens,
                reason: reason.clone(),
                who: emend_core::events::who(),
                at: emend_core::events::now_rfc3339(),
            };
            log.append(vec![set.to_new()]).map_err(StoreError::from)?;
            Some(set)
        }
        None => None,
    };
    let change = if pin { hooks::Change::Rollback } else { hooks::Change::RestoreBest };
    let hook = match &event {
        Event::ServedChanged { from, to, hash, .. } if from != &Some(*to) => {
            hooks::on_served(project, log, *from, *to, hash, change)
        }
        _ => None,
    };
    let already_served = served.version == target;
    Ok(Rollback::RolledBack(Box::new(RolledBack {
        reason,
        event,
        edit,
        quarantined,
        hook,
        target,
        already_served,
        budget,
    })))
}

/// What [`check_rollback`] found: the target, the served version, and whether nothing would change.
#[derive(Debug, Clone, Copy)]
pub struct Checked {
    pub target: u64,
    pub served: Served,
    /// restore-best with the best already served, unpinned, and its file intact: nothing to record.
    pub unchanged: bool,
}

/// Every refusal of a rollback or restore-best, on any view of the journal (the
/// read view before `--preempt` asks a running evolve to stop, the writer's
/// after), before anything is written: an empty reason, an unknown target, a
/// target [`served::check_servable`] refuses, and a hand-edited or unreadable
/// served file without `force`.
pub fn check_rollback<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &L,
    request: &RollbackRequest,
) -> Result<Checked, RollbackError> {
    if request.reason.trim().is_empty() {
        return Err(RollbackError::BadInput("--reason is empty: the rollback record says why".into()));
    }
    let store = Store::new(log);
    let target = rollback_target(&store, request.destination)?;
    let served = store.served()?.ok_or_else(|| RollbackError::Failed("the journal has no served strategy".into()))?;
    let file_state = served::served_file_state(project, schema, log)?;
    let served_pointer = Served { version: served.version, pinned: served.pinned };
    if !request.pin && served.version == target && !served.pinned && file_state == FileState::Consistent {
        return Ok(Checked { target, served: served_pointer, unchanged: true });
    }
    // An operator serves by rollback only a version that may be served: never a
    // quarantined one, nor one that never passed serving (pending, superseded, rejected).
    if let Err(why) = served::check_servable(log, target)? {
        return Err(RollbackError::BadInput(why));
    }
    if !request.force
        && let Some(refusal) = hand_edit_refusal(project, &store, &file_state)?
    {
        return Err(refusal);
    }
    Ok(Checked { target, served: served_pointer, unchanged: false })
}

/// The served pointer as a rollback reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub version: u64,
    pub pinned: bool,
}

/// The version a rollback goes to; an unknown version is refused before anything is written.
fn rollback_target<L: EventLog + ?Sized>(store: &Store<'_, L>, destination: Destination) -> Result<u64, RollbackError> {
    let target = match destination {
        Destination::Version(v) => v,
        Destination::Best => store
            .best()?
            .map(|b| b.version)
            .ok_or_else(|| RollbackError::BadInput("no best-ever version yet (no round has run)".into()))?,
    };
    if store.version(target)?.is_none() {
        return Err(RollbackError::BadInput(format!(
            "no version v{target} in the journal (it has v1..v{}; see `emend log`)",
            store.max_version().unwrap_or(0)
        )));
    }
    Ok(target)
}

/// Why a hand-edited (or unreadable) served file is not replaced without `force`; `None` for any other state.
fn hand_edit_refusal<L: EventLog + ?Sized>(
    project: &Project,
    store: &Store<'_, L>,
    state: &FileState,
) -> Result<Option<RollbackError>, RollbackError> {
    let path = project.strategy_path();
    let serving = store.served()?.map_or("nothing".to_string(), |s| format!("v{} (hash {:.12})", s.version, s.hash));
    Ok(match state {
        FileState::HandEdited { file_hash } => Some(RollbackError::BadInput(format!(
            "{}: edited by hand since emend last wrote it (content hash {file_hash:.12}, but the journal serves \
             {serving}); refusing to replace it. See the edit with `emend diff served {}`; pass --force to journal \
             the edited content as a new version first, then replace it",
            path.display(),
            path.display()
        ))),
        FileState::Unreadable { reason, .. } => Some(RollbackError::BadInput(format!(
            "{}: cannot be read ({reason}), so emend cannot tell whether it was edited by hand; refusing to \
             replace it. Pass --force to replace it anyway",
            path.display()
        ))),
        _ => None,
    })
}

/// Guards a hand-edited (or unreadable) served file: refused unless `force`
/// ([`hand_edit_refusal`]); with `force`, journals the edited content first.
fn guard_hand_edit<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
    force: bool,
) -> Result<Option<HandEdit>, RollbackError> {
    let state = served::served_file_state(project, schema, &*log)?;
    if !force && let Some(refusal) = hand_edit_refusal(project, &Store::new(&*log), &state)? {
        return Err(refusal);
    }
    match state {
        FileState::HandEdited { .. } => {
            let valid = artifact::load_file(&project.strategy_path(), schema).is_ok();
            match served::journal_hand_edit(project, schema, log) {
                Ok(Some(v)) => Ok(Some(HandEdit::Journaled(v))),
                Ok(None) => Ok(Some(HandEdit::Known)),
                // An invalid strategy cannot become a version: journal_hand_edit kept its bytes.
                Err(e @ ServedError::InvalidHandEdit { .. }) if !valid => Ok(Some(HandEdit::Kept(chain(&e)))),
                Err(e) => Err(e.into()),
            }
        }
        _ => Ok(None),
    }
}

/// An error and its causes on one line, `a: b: c` (as anyhow's `{:#}` prints them).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Quarantines what a rollback from `served` to `target` rolls back from (journaled
/// before the move), so that neither auto-restore nor the best-ever pointer brings it back.
fn quarantine_rolled_back_from<L: EventLog + ?Sized>(
    log: &mut L,
    served: u64,
    target: u64,
    reason: &str,
) -> Result<Vec<u64>, RollbackError> {
    let history = served::served_history(&*log)?;
    let from = served::rolled_back_from(&history, served, target);
    let why = format!("rolled back to v{target}: {reason}");
    served::quarantine(log, &from, "rollback", &why)?;
    Ok(from)
}
