//! The served file and the journal's served pointer: writing the file from
//! the journal, telling a hand edit from a stale or missing file, the
//! journal's first version, and an operator's rollback (journal first, then
//! the file).

use std::path::{Path, PathBuf};

use emend_journal::EventLog;
use serde_json::Value;

use crate::artifact::{self, Artifact};
use crate::config::Project;
use crate::events::{Event, now_rfc3339, who};
use crate::schema::StrategySchema;
use crate::store::{Store, StoreError};

mod error;

pub use error::{Result, ServedError};

/// Header written above the served strategy.
pub fn served_header(version: u64, hash: &str) -> String {
    format!(
        "emend served strategy v{version} (content hash {hash}).\n\
         Written by emend from its journal. Do not edit by hand: use `emend rollback`,\n\
         `emend restore-best` or `emend evolve`; a hand edit is detected and refused."
    )
}

/// Loads a journaled document as an artifact.
pub fn artifact_of(schema: &StrategySchema, hash: &str, doc: Value) -> Result<Artifact> {
    artifact::from_value(&format!("journal strategy {:.12}", hash), doc, schema)
        .map_err(|source| ServedError::Journaled { hash: hash.to_string(), source })
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ServedError + '_ {
    move |source| ServedError::Io { path: path.to_path_buf(), source }
}

/// Writes the served file for `version`.
pub fn write_served(project: &Project, version: u64, parent: Option<u64>, hash: &str, doc: &Value) -> Result<()> {
    let path = project.strategy_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let schema = schema_reference(project, dir_of(&path));
    let text = artifact::render_strategy(doc, Some(version), parent, &served_header(version, hash), schema.as_deref());
    artifact::write_atomic(&path, text.as_bytes()).map_err(io(&path))
}

fn dir_of(file: &Path) -> &Path {
    file.parent().unwrap_or(Path::new("."))
}

/// The project's strategy schema as the modeline of a strategy file in `dir`
/// names it: `harness.schema` when set, else the copy `emend init` writes
/// ([`artifact::PROJECT_SCHEMA_FILE`]); `None` when that file does not exist
/// (a project made before init copied it), so no modeline points nowhere.
pub fn schema_reference(project: &Project, dir: &Path) -> Option<String> {
    let schema = match &project.config.harness.schema {
        Some(p) => project.resolve(p),
        None => project.dir.join(artifact::PROJECT_SCHEMA_FILE),
    };
    if !schema.is_file() {
        return None;
    }
    let dir = std::path::absolute(dir).ok()?;
    let schema = std::path::absolute(&schema).ok()?;
    Some(artifact::relative_path(&dir, &schema))
}

/// What the served file holds compared with the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum FileState {
    Consistent,
    Missing,
    /// It holds another journaled version (a crash between journal and file write leaves this).
    Stale {
        holds: u64,
    },
    HandEdited {
        file_hash: String,
    },
    /// It cannot be read, so whether it was edited is unknown.
    Unreadable {
        kind: std::io::ErrorKind,
        reason: String,
    },
}

pub fn served_file_state<L: EventLog + ?Sized>(
    project: &Project,
    _schema: &StrategySchema,
    log: &L,
) -> Result<FileState> {
    let store = Store::new(log);
    let Some(served) = store.served()? else { return Ok(FileState::Consistent) };
    let path = project.strategy_path();
    if !path.exists() {
        return Ok(FileState::Missing);
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return Ok(FileState::Unreadable { kind: e.kind(), reason: e.to_string() }),
    };
    let Ok(value) = artifact::parse_yaml(&text) else {
        return Ok(FileState::HandEdited { file_hash: artifact::sha256_hex(text.as_bytes()) });
    };
    let file_hash = artifact::content_hash(&value);
    if file_hash == served.hash {
        return Ok(FileState::Consistent);
    }
    if let Some(v) = store.versions()?.into_iter().find(|v| v.hash == file_hash) {
        return Ok(FileState::Stale { holds: v.version });
    }
    Ok(FileState::HandEdited { file_hash })
}

/// Makes the served file agree with the journal, or refuses a hand edit (and
/// a file it cannot read, which might be one).
pub fn reconcile_served_file<L: EventLog + ?Sized>(project: &Project, schema: &StrategySchema, log: &L) -> Result<()> {
    let store = Store::new(log);
    let Some(served) = store.served()? else { return Ok(()) };
    let file = project.strategy_path();
    match served_file_state(project, schema, log)? {
        FileState::Consistent => Ok(()),
        state @ (FileState::Missing | FileState::Stale { .. }) => {
            let what = match state {
                FileState::Stale { holds } => format!("holds v{holds}, not the served v{}", served.version),
                _ => "is missing".to_string(),
            };
            tracing::warn!("{}: {what}; rewriting it from the journal (v{})", file.display(), served.version);
            let info = store.version(served.version)?.ok_or_else(|| missing(served.version))?;
            let doc = store.document(&served.hash)?.ok_or_else(|| missing(served.version))?;
            write_served(project, served.version, info.parent, &served.hash, &doc)
        }
        FileState::HandEdited { file_hash } => Err(ServedError::HandEdited {
            file: file.display().to_string(),
            file_hash,
            version: served.version,
            served_hash: served.hash,
        }),
        FileState::Unreadable { kind, reason } => {
            Err(ServedError::Unreadable { file, version: served.version, source: std::io::Error::new(kind, reason) })
        }
    }
}

/// The error for a version whose document the journal does not have.
pub fn missing(version: u64) -> ServedError {
    ServedError::Store(StoreError::Corrupt(format!("version v{version} has no stored document")))
}

/// Creates the journal's first version from `artifact` when the journal is empty.
pub fn initialize<L: EventLog + ?Sized>(log: &mut L, artifact: &Artifact, note: &str) -> Result<bool> {
    if Store::new(log).served()?.is_some() {
        return Ok(false);
    }
    let doc = strip_metadata(&artifact.value);
    let events = [
        Event::StrategyVersioned {
            version: 1,
            parent: None,
            hash: artifact.hash.clone(),
            document: doc,
            origin: "init".into(),
            round: None,
            note: note.to_string(),
        },
        Event::ServedChanged {
            from: None,
            to: 1,
            hash: artifact.hash.clone(),
            cause: "init".into(),
            reason: note.to_string(),
            who: who(),
            pinned: false,
            best_version: None,
            best_accuracy: None,
            at: now_rfc3339(),
        },
    ];
    log.append(events.iter().map(Event::to_new).collect())?;
    Ok(true)
}

pub fn strip_metadata(v: &Value) -> Value {
    let mut doc = v.clone();
    if let Some(m) = doc.as_object_mut() {
        for k in artifact::METADATA_KEYS {
            m.remove(k);
        }
    }
    doc
}

/// Applies an operator's rollback (or restore-best) to `target`: journal
/// first, then the file. Returns the record written. A version
/// [`check_servable`] refuses is refused here too
/// ([`ServedError::NotServable`]), before anything is written.
pub fn apply_rollback<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
    target: u64,
    cause: &str,
    reason: &str,
    pin: bool,
) -> Result<Event> {
    if let Err(why) = check_servable(&*log, target)? {
        return Err(ServedError::NotServable { version: target, why });
    }
    let store = Store::new(&*log);
    let served = store.served()?.ok_or(ServedError::NothingServed)?;
    let info = store
        .version(target)?
        .ok_or_else(|| ServedError::UnknownVersion { version: target, max: store.max_version().unwrap_or(0) })?;
    let doc = store.document(&info.hash)?.ok_or_else(|| missing(target))?;
    let best = store.best()?;
    let event = Event::ServedChanged {
        from: Some(served.version),
        to: target,
        hash: info.hash.clone(),
        cause: cause.to_string(),
        reason: reason.to_string(),
        who: who(),
        pinned: pin,
        best_version: best.as_ref().map(|b| b.version),
        best_accuracy: best.as_ref().map(|b| b.accuracy),
        at: now_rfc3339(),
    };
    artifact_of(schema, &info.hash, doc.clone())?;
    log.append(vec![event.to_new()])?;
    write_served(project, target, info.parent, &info.hash, &doc)?;
    Ok(event)
}

/// Journals the hand-edited served file as a new version (so nothing is lost).
/// An edit that is no valid strategy is kept byte for byte beside the journal
/// and refused ([`ServedError::InvalidHandEdit`]).
pub fn journal_hand_edit<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
) -> Result<Option<u64>> {
    let path = project.strategy_path();
    let a = match artifact::load_file(&path, schema) {
        Ok(a) => a,
        Err(source) => {
            let text = std::fs::read(&path).map_err(io(&path))?;
            let kept: PathBuf = project
                .dir
                .join(crate::config::STATE_DIR)
                .join(format!("hand-edit-{}.yaml", artifact::sha256_hex(&text)));
            artifact::write_atomic(&kept, &text).map_err(io(&kept))?;
            return Err(ServedError::InvalidHandEdit { kept, source });
        }
    };
    let store = Store::new(&*log);
    if store.versions()?.iter().any(|v| v.hash == a.hash) {
        return Ok(None);
    }
    let served = store.served()?.ok_or(ServedError::NothingServed)?;
    let version = store.max_version()? + 1;
    let event = Event::StrategyVersioned {
        version,
        parent: Some(served.version),
        hash: a.hash.clone(),
        document: strip_metadata(&a.value),
        origin: "hand_edit".into(),
        round: None,
        note: format!("hand edit of {} found by {}, journaled before it was replaced", path.display(), who()),
    };
    log.append(vec![event.to_new()])?;
    Ok(Some(version))
}

/// The versions a rollback to `target` moves away from: the served one and
/// every version served since `target` was last served (all of them when it
/// never was), without `target` itself, in ascending order. `history` is the
/// served pointer's destinations in journal order.
pub fn rolled_back_from(history: &[u64], served: u64, target: u64) -> Vec<u64> {
    let since = history.iter().rposition(|&v| v == target).map_or(0, |i| i + 1);
    let mut out: std::collections::BTreeSet<u64> = history[since..].iter().copied().collect();
    if history.iter().all(|&v| v != target) {
        out.clear();
    }
    out.insert(served);
    out.remove(&target);
    out.into_iter().collect()
}

/// The served pointer's destinations in journal order (from the `served_changed` events).
pub fn served_history<L: EventLog + ?Sized>(log: &L) -> Result<Vec<u64>> {
    Ok(served_changes(log)?.into_iter().filter_map(|p| p.get("to").and_then(Value::as_u64)).collect())
}

/// The payloads of every `served_changed` event, in journal order, read page by page.
fn served_changes<L: EventLog + ?Sized>(log: &L) -> Result<Vec<Value>> {
    const PAGE: usize = 256;
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let page = log.read_range(from, PAGE)?;
        let Some(last) = page.last() else { break };
        from = last.seq + 1;
        out.extend(page.iter().filter(|r| r.kind == "served_changed").map(|r| r.payload.clone()));
        if page.len() < PAGE {
            break;
        }
    }
    Ok(out)
}

/// Why an operator's serving command is refused before anything is written:
/// an unknown or quarantined version, or one that never passed serving
/// (pending, superseded or rejected at review), which only `emend approve`
/// serves, under its tested-pair rules.
pub fn check_servable<L: EventLog + ?Sized>(log: &L, version: u64) -> Result<std::result::Result<(), String>> {
    let store = Store::new(log);
    if store.version(version)?.is_none() {
        return Ok(Err(format!(
            "no version v{version} in the journal (it has v1..v{}; see `emend log`)",
            store.max_version()?
        )));
    }
    if let Some(q) = store.quarantined()?.get(&version) {
        return Ok(Err(format!(
            "v{version} is quarantined ({}: {}); lift it first with `emend unquarantine v{version} --reason ...`",
            q["cause"].as_str().unwrap_or("?"),
            q["reason"].as_str().unwrap_or("")
        )));
    }
    if let Some(r) = store.reviews()?.get(&version) {
        match r["status"].as_str() {
            Some("pending") => {
                return Ok(Err(format!("v{version} is pending approval: serve it with `emend approve v{version}`")));
            }
            Some("rejected") => return Ok(Err(format!("v{version} was rejected at review; it is never served"))),
            Some("superseded") => {
                return Ok(Err(format!(
                    "v{version} was superseded while pending and never served; a version that never passed \
                     serving is served only by `emend approve`, and a superseded one is no longer a live option \
                     (see `emend pending --all`)"
                )));
            }
            _ => {}
        }
    }
    Ok(Ok(()))
}

/// What in the serving state would make the next writer fail or break the
/// serving rules, one sentence each (empty when nothing does); `journal
/// verify` fails on any. The served pointer must name a journaled version
/// with its document, a version that went through review must have been
/// approved to be served, and at least one version must be eligible for the
/// best-ever (every run names one).
pub fn serving_problems<L: EventLog + ?Sized>(log: &L) -> Result<Vec<String>> {
    let store = Store::new(log);
    let Some(served) = store.served()? else { return Ok(vec![]) };
    let mut out = Vec::new();
    let v = served.version;
    match store.version(v)? {
        None => out.push(format!("the served pointer names v{v}, which the journal does not hold")),
        Some(info) if store.document(&info.hash)?.is_none() => {
            out.push(format!("the served v{v} has no stored document"))
        }
        Some(_) => {}
    }
    if let Some(r) = store.reviews()?.get(&v)
        && let Some(status) = r["status"].as_str().filter(|s| *s != "approved")
    {
        out.push(format!(
            "the served v{v} is {status} at review: a version that never passed serving is served only by `emend approve`"
        ));
    }
    let ineligible = store.ineligible()?;
    if store.versions()?.iter().all(|i| ineligible.contains(&i.version)) {
        out.push(format!(
            "every version is quarantined or not approved, so no version can be the best-ever: the next run fails \
             (quarantined: {}); lift one with `emend unquarantine vN --reason ...`",
            store.quarantined()?.keys().map(|q| format!("v{q}")).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(out)
}

/// The fields a rollback froze, each with the version whose change froze it: for
/// every operator rollback from vF while vF stays quarantined, the evolvable
/// fields vF changed from its parent (the rolled-back version's own change).
/// A run searches with them locked at their served values
/// ([`StrategySchema::with_frozen`]), so it never proposes the rolled-back change
/// again; `emend unquarantine vF` lifts vF's quarantine and its freeze.
pub fn frozen_by_rollback<L: EventLog + ?Sized>(
    log: &L,
    schema: &StrategySchema,
) -> Result<std::collections::BTreeMap<String, u64>> {
    let store = Store::new(log);
    let quarantined = store.quarantined()?;
    let mut out = std::collections::BTreeMap::new();
    for from in rollbacks(log)? {
        if !quarantined.contains_key(&from) {
            continue;
        }
        let Some(info) = store.version(from)? else { continue };
        let Some(parent) = info.parent.map(|p| store.version(p)).transpose()?.flatten() else { continue };
        let (Some(undone), Some(kept)) = (store.document(&info.hash)?, store.document(&parent.hash)?) else {
            continue;
        };
        for f in schema.evolvable() {
            if crate::schema::get_path(&undone, &f.path) != crate::schema::get_path(&kept, &f.path) {
                out.entry(f.path.clone()).or_insert(from);
            }
        }
    }
    Ok(out)
}

/// The version every operator rollback moved away from, in journal order.
fn rollbacks<L: EventLog + ?Sized>(log: &L) -> Result<Vec<u64>> {
    Ok(served_changes(log)?
        .into_iter()
        .filter(|p| p.get("cause").and_then(Value::as_str) == Some("rollback"))
        .filter_map(|p| Some((p.get("from")?.as_u64()?, p.get("to")?.as_u64()?)))
        .filter(|(f, t)| f != t)
        .map(|(f, _)| f)
        .collect())
}

/// When the best-ever pointer names a version in `ineligible`, the event that
/// moves it to the best eligible version with a recorded evaluation under
/// the same harness and dataset (None when it need not move or nothing qualifies).
pub fn best_without<L: EventLog + ?Sized>(
    log: &L,
    ineligible: &std::collections::BTreeSet<u64>,
) -> Result<Option<Event>> {
    let store = Store::new(log);
    let Some(best) = store.best()? else { return Ok(None) };
    if !ineligible.contains(&best.version) {
        return Ok(None);
    }
    let mut found: Option<(u64, String, f64)> = None;
    for v in store.versions()?.into_iter().filter(|v| !ineligible.contains(&v.version)) {
        let Some(rec) = store.evaluation(&v.hash, &best.harness_hash, &best.dataset_hash)? else { continue };
        if found.as_ref().is_none_or(|f| rec.summary.accuracy > f.2) {
            found = Some((v.version, v.hash.clone(), rec.summary.accuracy));
        }
    }
    Ok(found.map(|(version, hash, accuracy)| Event::BestChanged {
        version,
        hash,
        accuracy,
        harness_hash: best.harness_hash.clone(),
        dataset_hash: best.dataset_hash.clone(),
    }))
}

/// Quarantines `versions` (journal only: the served file does not change).
/// The best-ever pointer moves off a quarantined version in the same batch.
pub fn quarantine<L: EventLog + ?Sized>(
    log: &mut L,
    versions: &[u64],
    cause: &str,
    reason: &str,
) -> Result<Vec<Event>> {
    let store = Store::new(&*log);
    let already = store.quarantined()?;
    let mut events: Vec<Event> = versions
        .iter()
        .filter(|v| !already.contains_key(v))
        .map(|&version| Event::Quarantined {
            version,
            cause: cause.to_string(),
            reason: reason.to_string(),
            who: who(),
            at: now_rfc3339(),
        })
        .collect();
    let mut ineligible = store.ineligible()?;
    ineligible.extend(versions.iter().copied());
    events.extend(best_without(&*log, &ineligible)?);
    if !events.is_empty() {
        log.append(events.iter().map(Event::to_new).collect())?;
    }
    Ok(events)
}

/// Lifts the quarantine of `version`; when its recorded score (under the
/// best-ever's harness and dataset) beats the best-ever, the pointer moves
/// back to it in the same batch.
pub fn unquarantine<L: EventLog + ?Sized>(log: &mut L, version: u64, reason: &str) -> Result<Vec<Event>> {
    let store = Store::new(&*log);
    let mut events = vec![Event::Unquarantined { version, reason: reason.to_string(), who: who(), at: now_rfc3339() }];
    // A pending or rejected version is not the best-ever, quarantined or not.
    let eligible = store.reviews()?.get(&version).is_none_or(|r| r["status"] == "approved");
    if let (Some(b), Some(info), true) = (store.best()?, store.version(version)?, eligible)
        && let Some(rec) = store.evaluation(&info.hash, &b.harness_hash, &b.dataset_hash)?
        && rec.summary.accuracy > b.accuracy
    {
        events.push(Event::BestChanged {
            version,
            hash: info.hash,
            accuracy: rec.summary.accuracy,
            harness_hash: b.harness_hash,
            dataset_hash: b.dataset_hash,
        });
    }
    log.append(events.iter().map(Event::to_new).collect())?;
    Ok(events)
}

/// How a pending version was approved, journaled with the approval.
#[derive(Debug, Clone, Default)]
pub struct Approval {
    pub reason: String,
    /// `--force`: the served version it replaces, which it was never tested against.
    pub forced_over: Option<u64>,
    /// `--retest`: the id of the passed confirm test against the served version.
    pub retest: Option<String>,
    /// Events journaled first, in the same batch (the retest's candidate record).
    pub evidence: Vec<Event>,
}

/// Serves the pending `version`: the review, the served move and (when it beats
/// the best-ever under the best's harness and dataset) the best-ever move in
/// one batch, then the served file. Returns the events written.
pub fn approve<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
    version: u64,
    approval: Approval,
) -> Result<Vec<Event>> {
    let Approval { reason, forced_over, retest, evidence } = approval;
    let reason = reason.as_str();
    let store = Store::new(&*log);
    let served = store.served()?.ok_or(ServedError::NothingServed)?;
    let info = store
        .version(version)?
        .ok_or_else(|| ServedError::UnknownVersion { version, max: store.max_version().unwrap_or(0) })?;
    let doc = store.document(&info.hash)?.ok_or_else(|| missing(version))?;
    artifact_of(schema, &info.hash, doc.clone())?;
    let (who, at) = (who(), now_rfc3339());
    let mut best = store.best()?;
    let mut events = evidence;
    events.push(Event::PendingReviewed {
        version,
        approved: true,
        reason: reason.to_string(),
        who: who.clone(),
        at: at.clone(),
        forced_over,
        retest,
    });
    if let Some(b) = &best
        && let Some(rec) = store.evaluation(&info.hash, &b.harness_hash, &b.dataset_hash)?
        && rec.summary.accuracy > b.accuracy
    {
        events.push(Event::BestChanged {
            version,
            hash: info.hash.clone(),
            accuracy: rec.summary.accuracy,
            harness_hash: b.harness_hash.clone(),
            dataset_hash: b.dataset_hash.clone(),
        });
        best =
            Some(crate::store::Best { version, hash: info.hash.clone(), accuracy: rec.summary.accuracy, ..b.clone() });
    }
    events.push(Event::ServedChanged {
        from: Some(served.version),
        to: version,
        hash: info.hash.clone(),
        cause: "approve".into(),
        reason: reason.to_string(),
        who,
        pinned: false,
        best_version: best.as_ref().map(|b| b.version),
        best_accuracy: best.as_ref().map(|b| b.accuracy),
        at,
    });
    log.append(events.iter().map(Event::to_new).collect())?;
    write_served(project, version, info.parent, &info.hash, &doc)?;
    Ok(events)
}

/// Closes the pending `version` without serving it.
pub fn reject<L: EventLog + ?Sized>(log: &mut L, version: u64, reason: &str) -> Result<Event> {
    let event = Event::PendingReviewed {
        version,
        approved: false,
        reason: reason.to_string(),
        who: who(),
        at: now_rfc3339(),
        forced_over: None,
        retest: None,
    };
    log.append(vec![event.to_new()])?;
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollback_moves_away_from_every_version_served_since_its_target() {
        // v1 v2 v3 v4 served in turn; back to v2: v3 and v4 (and the served v4).
        assert_eq!(rolled_back_from(&[1, 2, 3, 4], 4, 2), vec![3, 4]);
        // v2 served again later (a restore): only what came after that.
        assert_eq!(rolled_back_from(&[1, 2, 3, 2, 5], 5, 2), vec![5]);
        // A target never served (a hand edit): the served version only.
        assert_eq!(rolled_back_from(&[1, 2, 3], 3, 7), vec![3]);
        // Back to the served version itself: nothing.
        assert_eq!(rolled_back_from(&[1, 2], 2, 2), Vec::<u64>::new());
    }
}
