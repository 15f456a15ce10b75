//! The journal's LOCK file: one process at a time, and it says who.
//!
//! The lock is an OS file lock (`File::try_lock`), so the kernel releases it when the
//! holder dies. The file's content, JSON `{pid, host, started_at, mode}`, only names the
//! holder for error messages. A clean close empties the content; content that names a
//! holder while nobody holds the lock was left by a process that died: it is taken over,
//! with a warning naming the dead holder.
//!
//! Read commands do not take this lock: they read the published view (see the view module).
//! Opening the sled store itself as a reader ([`crate::open_reader`], used to verify an idle
//! journal) takes the same exclusive lock, since sled allows one open handle per database;
//! a writer then waits for that reader for a while rather than failing.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::error::ErrorKind;
use crate::holder::hostname;
#[cfg(test)]
use crate::holder::rfc3339_utc;
pub use crate::holder::{LockHolder, OpenMode};

/// Name of the lock file inside the journal directory.
pub const LOCK_FILE: &str = "LOCK";

/// A held journal lock. Dropping it empties the LOCK file, then the OS lock goes with the
/// file handle.
#[derive(Debug)]
pub(crate) struct JournalLock {
    file: File,
}

/// The result of taking the lock.
pub(crate) struct Acquired {
    pub lock: JournalLock,
    /// The holder named by a stale LOCK file that was taken over.
    pub took_over: Option<LockHolder>,
}

impl JournalLock {
    /// Take the lock on `dir/LOCK` or report who holds it.
    pub(crate) fn acquire(dir: &Path, mode: OpenMode) -> Result<Acquired, ErrorKind> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| ErrorKind::io(format!("opening lock file {}", path.display()), e))?;
        take_lock(&mut file, &path, mode)?;

        let old =
            read_content(&mut file).map_err(|e| ErrorKind::io(format!("reading lock file {}", path.display()), e))?;
        let took_over = if old.trim().is_empty() {
            None
        } else {
            match serde_json::from_str::<LockHolder>(&old) {
                Ok(stale) => {
                    tracing::warn!(
                        lock_file = %path.display(),
                        pid = stale.pid,
                        host = %stale.host,
                        started_at = %stale.started_at,
                        "taking over a stale journal lock: its holder, {} pid {} on host {} (since {}), {}",
                        stale.mode.as_str(),
                        stale.pid,
                        stale.host,
                        stale.started_at,
                        describe_stale(&stale),
                    );
                    Some(stale)
                }
                Err(_) => {
                    tracing::warn!(
                        lock_file = %path.display(),
                        "taking over a journal lock nobody holds: its content ({} bytes, starting {:?}) is not a \
                         holder record emend can read, so it is treated as stale and overwritten",
                        old.len(),
                        old.chars().take(40).collect::<String>(),
                    );
                    None
                }
            }
        };

        let me = LockHolder::this_process(mode, SystemTime::now());
        write_content(&mut file, &me).map_err(|e| ErrorKind::io(format!("writing lock file {}", path.display()), e))?;
        Ok(Acquired { lock: JournalLock { file }, took_over })
    }
}

impl Drop for JournalLock {
    fn drop(&mut self) {
        // An empty LOCK file means "closed cleanly"; failing to empty it only makes the next
        // opener log a needless takeover warning.
        let _ = self.file.set_len(0);
    }
}

/// The LOCK file's content as text; bytes that are not UTF-8 are replaced, never an error
/// (a LOCK file damaged by hand must not lock everybody out).
fn read_content(file: &mut File) -> std::io::Result<String> {
    file.seek(SeekFrom::Start(0))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// What became of the holder named by a LOCK file whose OS lock nobody holds any more.
fn describe_stale(stale: &LockHolder) -> String {
    if stale.host != hostname() {
        return format!(
            "no longer holds it (host {} is not this one, so whether it still runs is unknown)",
            stale.host
        );
    }
    if Path::new(&format!("/proc/{}", stale.pid)).exists() {
        if stale.pid == std::process::id() {
            "is this process, which released it without clearing it".to_owned()
        } else {
            format!("released it without clearing it (pid {} is still running, or the pid was reused)", stale.pid)
        }
    } else {
        format!("died without releasing it (pid {} is no longer running)", stale.pid)
    }
}

fn write_content(file: &mut File, holder: &LockHolder) -> std::io::Result<()> {
    let text = serde_json::to_string(holder).map_err(std::io::Error::other)?;
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.sync_data()
}

/// Take the OS lock, or name who holds it.
///
/// A lock that is held while the LOCK file names nobody is either being taken right now (the
/// holder writes its name just after) or was just released by a holder whose file handle
/// lives on for a moment in a child process between fork and exec. Both pass quickly, so
/// keep trying for a short while before reporting an unnamed holder.
///
/// A writer also waits (up to [`READER_PATIENCE`]) for a reader that holds the lock: readers
/// that take it (`verify` of the store itself) hold it briefly, and only a second writer
/// should make a writer fail.
fn take_lock(file: &mut File, path: &Path, mode: OpenMode) -> Result<(), ErrorKind> {
    let start = Instant::now();
    // The unnamed holder's patience runs from when the file was first seen
    // naming nobody: a reader this writer waited for empties the file just
    // before it lets go, and by then `start` may be long past.
    let mut unnamed_since: Option<Instant> = None;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {
                let holder = read_content(file).ok().and_then(|t| serde_json::from_str::<LockHolder>(&t).ok());
                let (since, patience) = match &holder {
                    None => (*unnamed_since.get_or_insert_with(Instant::now), UNNAMED_HOLDER_PATIENCE),
                    Some(h) if h.mode == OpenMode::Reader && mode == OpenMode::Writer => {
                        unnamed_since = None;
                        (start, READER_PATIENCE)
                    }
                    Some(_) => (start, Duration::ZERO),
                };
                if since.elapsed() >= patience {
                    return Err(ErrorKind::locked_by(holder.as_ref(), path.to_path_buf()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::Error(e)) => {
                return Err(ErrorKind::io(format!("locking {}", path.display()), e));
            }
        }
    }
}

/// How long a lock held by nobody we can name may take to be released (see [`take_lock`]).
pub(crate) const UNNAMED_HOLDER_PATIENCE: Duration = Duration::from_millis(300);

/// How long a writer waits for a reader that holds the lock.
pub(crate) const READER_PATIENCE: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> String {
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(951_868_799), "2000-02-29T23:59:59Z");
        assert_eq!(at(951_868_800), "2000-03-01T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(at(1_709_164_799), "2024-02-28T23:59:59Z");
        assert_eq!(at(1_709_251_199), "2024-02-29T23:59:59Z");
        // Whole seconds: a fraction is dropped, never rounded up.
        assert_eq!(rfc3339_utc(UNIX_EPOCH + Duration::from_millis(1_700_000_000_999)), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339_utc(UNIX_EPOCH - Duration::from_secs(5)), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn lock_content_round_trips_and_defaults_to_writer() {
        let h = LockHolder::this_process(OpenMode::Reader, UNIX_EPOCH);
        let back: LockHolder = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
        let old: LockHolder =
            serde_json::from_str(r#"{"pid":7,"host":"h","started_at":"1970-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(old.mode, OpenMode::Writer);
    }
}
