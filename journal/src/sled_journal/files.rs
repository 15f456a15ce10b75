//! Files around the store: sled's own lock and leftovers, free space.

use std::path::Path;

use sled::Db;

use super::{SLED_DIR, SledJournal};
use crate::error::{ErrorKind, Result};
use crate::view;

/// Remove files an interrupted sled snapshot left behind (`snap.*.generating`): sled writes
/// a snapshot under that name and renames it when complete, and a leftover (a full disk)
/// can make the next open fail. The caller holds the journal's lock.
pub(super) fn remove_snapshot_leftovers(db_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(db_dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::warn!(file = %entry.path().display(), "removed the leftover of an interrupted sled snapshot")
                }
                Err(e) => {
                    tracing::warn!(file = %entry.path().display(), "could not remove the leftover of an interrupted sled snapshot: {e}")
                }
            }
        }
    }
}

/// Bytes available to this user on the file system holding `path`.
fn available_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: `c` is a valid NUL-terminated path and `stat` a properly sized out-parameter.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut stat) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

/// Open the sled database. sled's own file lock can be held for a moment after its last
/// holder closed it (see `lock::take_lock`): retry briefly on that error only.
pub(super) fn open_db(db_dir: &Path) -> sled::Result<Db> {
    let deadline = std::time::Instant::now() + crate::lock::UNNAMED_HOLDER_PATIENCE;
    loop {
        let opened = sled::Config::new()
            .path(db_dir)
            // We flush after every batch; a background flusher would add nothing.
            .flush_every_ms(None)
            .open();
        match opened {
            Err(e) if is_sled_lock_error(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn is_sled_lock_error(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io) if io.to_string().contains("could not acquire lock"))
}

/// sled reports its own file lock as an I/O error. We hold the LOCK file by now, so the
/// database is held by something that does not take it (another tool opening sled directly).
pub(super) fn open_error(e: sled::Error, dir: &Path) -> ErrorKind {
    if is_sled_lock_error(&e) {
        return ErrorKind::locked_by(None, dir.join(SLED_DIR));
    }
    if !matches!(e, sled::Error::Corruption { .. }) {
        return ErrorKind::Storage(e);
    }
    // Raw storage damage: sled knows no sequence numbers, the read view does.
    let known = std::fs::read(dir.join(view::VIEW_FILE))
        .ok()
        .and_then(|bytes| view::frames(&bytes).ok().and_then(|f| view::last_record(&f).ok().flatten()).map(|r| r.seq));
    let nearest = match known {
        Some(seq) => {
            format!("the read view holds events up to seq {seq}, so the damage is at or after seq {}", seq + 1)
        }
        None => "no read view names the events it held".to_owned(),
    };
    ErrorKind::corrupt(format!(
        "the store cannot be opened ({e}); {nearest}; nothing was written: run `emend journal verify`"
    ))
}

impl SledJournal {
    /// Refuse to write a batch when the file system has less than this many bytes free
    /// (default [`DEFAULT_MIN_FREE_BYTES`]; 0 turns the check off).
    pub fn set_min_free_bytes(&mut self, bytes: u64) {
        self.min_free = bytes;
    }

    pub(super) fn check_free_space(&self) -> Result<()> {
        if self.min_free == 0 {
            return Ok(());
        }
        let needed = self.min_free;
        let available = available_bytes(&self.dir)
            .map_err(|e| self.err(None, ErrorKind::io(format!("checking free space of {}", self.dir.display()), e)))?;
        if available < needed {
            return Err(self.err(None, ErrorKind::DiskFull { path: self.dir.clone(), available, needed }));
        }
        Ok(())
    }
}
