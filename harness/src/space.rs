//! Free space on a file system, and the floor a cache keeps above it.
//!
//! The caches (the stage cache here, the model reply cache in the engine) are
//! the only project files that grow without a person asking. They must never
//! leave the journal without room: the journal refuses to write below its
//! reserve, so a cache that filled the disk would lock the project. A cache
//! with a [`Floor`] evicts its own entries before free space falls below the
//! floor, and skips a write that would cross it.
//!
//! Free space comes from a [`FreeSpace`] source: [`Statvfs`] asks the file
//! system; a test plugs in a simulated small disk.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Where a cache learns how many bytes the file system holding a path has free.
pub trait FreeSpace: Send + Sync {
    fn available(&self, path: &Path) -> io::Result<u64>;
}

/// The file system's own figure: `statvfs(2)`, the bytes available to this user.
#[derive(Debug, Clone, Copy, Default)]
pub struct Statvfs;

impl FreeSpace for Statvfs {
    fn available(&self, path: &Path) -> io::Result<u64> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
        // SAFETY: `c` is a valid NUL-terminated path and `stat` a properly sized out-parameter.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut stat) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
    }
}

/// The free bytes a cache leaves on its file system, and where it reads free space.
#[derive(Clone)]
pub struct Floor {
    bytes: u64,
    source: Arc<dyn FreeSpace>,
}

impl fmt::Debug for Floor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Floor({} bytes)", self.bytes)
    }
}

impl Floor {
    /// No floor: the cache is bounded by its own capacity only.
    pub fn none() -> Floor {
        Floor { bytes: 0, source: Arc::new(Statvfs) }
    }

    /// Keep `bytes` free, as the file system reports it.
    pub fn statvfs(bytes: u64) -> Floor {
        Floor { bytes, source: Arc::new(Statvfs) }
    }

    /// Keep `bytes` free, as `source` reports it (a simulated disk in tests).
    pub fn with_source(bytes: u64, source: Arc<dyn FreeSpace>) -> Floor {
        Floor { bytes, source }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Free bytes at `path`; None when there is no floor or the file system cannot say
    /// (then the cache behaves as it would without a floor).
    pub fn available(&self, path: &Path) -> Option<u64> {
        if self.bytes == 0 {
            return None;
        }
        self.source.available(path).ok()
    }

    /// How many bytes short of the floor a write of `len` bytes at `path` would leave the disk
    /// (0: it fits).
    pub fn shortfall(&self, path: &Path, len: u64) -> u64 {
        match self.available(path) {
            Some(free) => self.bytes.saturating_add(len).saturating_sub(free),
            None => 0,
        }
    }
}

/// The sentence a cache logs when free space stops it from writing.
pub fn short_message(cache: &str, dir: &Path, floor: &Floor, free: Option<u64>) -> String {
    let free = free.map_or_else(|| "too few".to_string(), |b| format!("{:.1} MB", b as f64 / 1e6));
    format!(
        "the {cache} in {} stops writing: its file system has {free} free, and emend keeps {:.1} MB free \
         for the journal; entries are recomputed instead (`emend cache clear` empties every cache)",
        dir.display(),
        floor.bytes() as f64 / 1e6
    )
}

/// A simulated disk for tests: `size` bytes in all, of which the files under
/// `root` and `other` (bytes held by something else) are used.
#[derive(Debug)]
pub struct SimulatedDisk {
    pub root: std::path::PathBuf,
    pub size: u64,
    pub other: std::sync::atomic::AtomicU64,
}

impl SimulatedDisk {
    pub fn new(root: &Path, size: u64) -> SimulatedDisk {
        SimulatedDisk { root: root.to_path_buf(), size, other: std::sync::atomic::AtomicU64::new(0) }
    }

    /// Bytes in the files under the root.
    pub fn used(&self) -> u64 {
        fn walk(dir: &Path) -> u64 {
            let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        }
        walk(&self.root) + self.other.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl FreeSpace for SimulatedDisk {
    fn available(&self, _path: &Path) -> io::Result<u64> {
        Ok(self.size.saturating_sub(self.used()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statvfs_reports_some_space_and_the_floor_measures_the_shortfall() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(Statvfs.available(tmp.path()).unwrap() > 0);
        assert!(Statvfs.available(&tmp.path().join("missing")).is_err());
        let disk = Arc::new(SimulatedDisk::new(tmp.path(), 1000));
        std::fs::write(tmp.path().join("a"), [0u8; 300]).unwrap();
        let floor = Floor::with_source(500, disk.clone());
        assert_eq!(floor.available(tmp.path()), Some(700));
        assert_eq!(floor.shortfall(tmp.path(), 100), 0);
        assert_eq!(floor.shortfall(tmp.path(), 250), 50);
        assert_eq!(Floor::none().shortfall(tmp.path(), u64::MAX), 0);
        let m = short_message("stage cache", tmp.path(), &floor, Some(700));
        assert!(m.contains("stage cache") && m.contains("emend cache clear") && m.contains("0.0 MB free"), "{m}");
    }
}
