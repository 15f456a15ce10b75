//! The persistent stage cache: ingest and index outputs on disk, so that a
//! second process (`emend eval`, the next `emend evolve`) skips the stages
//! whose inputs did not change; parsed task sets
//! ([`crate::dataset::load_path_cached`]) are kept the same way.
//!
//! One file per entry, named by the stage and the SHA-256 key of its inputs
//! (the same key as the in-memory cache), in a directory per harness hash: a
//! changed harness (version, settings, plugged-in models) never reads what
//! another one wrote. Entries are written to a temporary file and renamed
//! into place, so a reader sees a whole entry or none, and readers take no
//! lock. The directory is bounded in bytes: after an evaluation that wrote
//! entries, the least recently used ones (by modification time, refreshed on
//! every read) go until the total fits, whichever harness wrote them.
//!
//! Entries are a small binary format ([`Enc`]/[`Dec`]) with a magic, a format
//! version and the key; floats are stored by their bits, so a decoded stage
//! output is the one that was stored, bit for bit. An entry that does not
//! decode (another format version, a damaged file) is a miss: it is deleted
//! and the stage runs.
//!
//! With a [`Floor`] ([`DiskCache::with_floor`]) the cache also leaves free
//! space on its file system for the journal: on opening and before every
//! write it evicts least recently used entries while the file system is
//! below the floor, and a write that would still cross it is skipped (logged
//! once, naming `emend cache clear`), never failed.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use crate::space::{Floor, short_message};

const MAGIC: &[u8; 4] = b"EMSC";
/// Bump when an encoding below changes.
const FORMAT: u32 = 2;

/// A bounded on-disk map from (stage, key) to bytes.
#[derive(Debug)]
pub struct DiskCache {
    root: PathBuf,
    dir: PathBuf,
    capacity: u64,
    written: AtomicU64,
    floor: Floor,
    /// Whether the cache already said that free space stopped a write.
    warned: AtomicBool,
}

impl DiskCache {
    /// The cache under `root` for the harness `harness_hash`, at most
    /// `capacity` bytes in all (every harness's entries together).
    pub fn open(root: &Path, harness_hash: &str, capacity: u64) -> io::Result<DiskCache> {
        let short = &harness_hash[..harness_hash.len().min(16)];
        DiskCache::open_named(root, &format!("harness-{short}"), capacity)
    }

    /// The cache in the directory `name` under `root`, sharing the byte bound
    /// (and the eviction) with every other directory there: the MiniLM
    /// embeddings live beside the stage outputs, in `minilm-<model hash>`,
    /// whatever the harness.
    pub fn open_named(root: &Path, name: &str, capacity: u64) -> io::Result<DiskCache> {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir)?;
        Ok(DiskCache {
            root: root.to_path_buf(),
            dir,
            capacity,
            written: AtomicU64::new(0),
            floor: Floor::none(),
            warned: AtomicBool::new(false),
        })
    }

    /// Leaves at least the floor's bytes free on the cache's file system: evicts
    /// now if it is already below (a disk that filled while emend was not running),
    /// and before every write.
    pub fn with_floor(mut self, floor: Floor) -> DiskCache {
        self.floor = floor;
        self.relieve(0);
        self
    }

    /// Evicts least recently used entries (of every directory under the root)
    /// until a write of `len` bytes leaves the floor free; false when even an
    /// empty cache would not.
    fn relieve(&self, len: u64) -> bool {
        if self.floor.shortfall(&self.dir, len) == 0 {
            return true;
        }
        let mut entries = self.entries();
        entries.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.cmp(&b.2)));
        let mut freed = 0u64;
        for (_, size, path) in entries {
            if std::fs::remove_file(&path).is_ok() {
                freed += size;
            }
            if self.floor.shortfall(&self.dir, len) == 0 {
                tracing::info!("{}: evicted {freed} bytes of the stage cache to keep free space", self.dir.display());
                return true;
            }
        }
        false
    }

    /// Every entry under the root: (modified, bytes, path).
    fn entries(&self) -> Vec<(SystemTime, u64, PathBuf)> {
        let mut entries = Vec::new();
        let Ok(dirs) = std::fs::read_dir(&self.root) else { return entries };
        for d in dirs.flatten() {
            let Ok(files) = std::fs::read_dir(d.path()) else { continue };
            for f in files.flatten() {
                let Ok(meta) = f.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                entries.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), f.path()));
            }
        }
        entries
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, stage: &str, key: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{stage}-{}.bin", hex::encode(key)))
    }

    /// The payload stored for (stage, key), refreshing its recency.
    pub fn get(&self, stage: &str, key: &[u8; 32]) -> Option<Vec<u8>> {
        let path = self.path(stage, key);
        // One open for the read and the recency stamp (a read-only handle may set the time).
        let mut file = std::fs::File::open(&path).ok()?;
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut file, &mut bytes).ok()?;
        match unframe(&bytes, key) {
            Some(payload) => {
                let _ = file.set_modified(SystemTime::now());
                Some(payload.to_vec())
            }
            None => {
                tracing::warn!("{}: not a stage cache entry of this version; removed", path.display());
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores a payload (atomically: a temporary file renamed into place).
    /// Failing to store only costs a later recomputation, so errors are logged.
    pub fn put(&self, stage: &str, key: &[u8; 32], payload: &[u8]) {
        let path = self.path(stage, key);
        let framed = frame(key, payload);
        if !self.relieve(framed.len() as u64) {
            if !self.warned.swap(true, Ordering::Relaxed) {
                let free = self.floor.available(&self.dir);
                tracing::warn!("{}", short_message("stage cache", &self.root, &self.floor, free));
            }
            return;
        }
        let result = (|| {
            let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
            io::Write::write_all(&mut tmp, &framed)?;
            tmp.persist(&path).map_err(|e| e.error)?;
            Ok::<_, io::Error>(())
        })();
        match result {
            Ok(()) => {
                self.written.fetch_add(framed.len() as u64, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!("{}: cannot store a stage cache entry: {e}", path.display()),
        }
    }

    /// Evicts least recently used entries until the cache fits its capacity;
    /// does nothing when nothing was written since the last sweep.
    pub fn sweep(&self) {
        if self.written.swap(0, Ordering::Relaxed) == 0 {
            return;
        }
        let mut entries = self.entries();
        for path in plan_eviction(&mut entries, self.capacity) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The entries to delete, least recently used first, so that the rest fit in
/// `capacity` bytes (ties by path, so the plan is deterministic).
fn plan_eviction(entries: &mut [(SystemTime, u64, PathBuf)], capacity: u64) -> Vec<PathBuf> {
    let mut total: u64 = entries.iter().map(|e| e.1).sum();
    entries.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.cmp(&b.2)));
    let mut out = Vec::new();
    for (_, len, path) in entries.iter() {
        if total <= capacity {
            break;
        }
        total -= len;
        out.push(path.clone());
    }
    out
}

fn frame(key: &[u8; 32], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 48);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn unframe<'a>(bytes: &'a [u8], key: &[u8; 32]) -> Option<&'a [u8]> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (format, rest) = rest.split_at_checked(4)?;
    let (k, rest) = rest.split_at_checked(32)?;
    let (len, payload) = rest.split_at_checked(8)?;
    let ok =
        format == FORMAT.to_le_bytes() && k == key && u64::from_le_bytes(len.try_into().ok()?) == payload.len() as u64;
    ok.then_some(payload)
}

/// A little-endian binary writer for stage outputs.
#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn u32(&mut self, x: u32) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    pub fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    pub fn f64(&mut self, x: f64) {
        self.u64(x.to_bits());
    }
    pub fn opt_f64(&mut self, x: Option<f64>) {
        match x {
            Some(v) => {
                self.0.push(1);
                self.f64(v);
            }
            None => self.0.push(0),
        }
    }
    pub fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.0.push(1);
                self.str(s);
            }
            None => self.0.push(0),
        }
    }
    pub fn strs(&mut self, xs: &[String]) {
        self.u64(xs.len() as u64);
        for x in xs {
            self.str(x);
        }
    }
    pub fn u32s(&mut self, xs: &[u32]) {
        self.u64(xs.len() as u64);
        for &x in xs {
            self.u32(x);
        }
    }
    pub fn f32s(&mut self, xs: &[f32]) {
        self.u64(xs.len() as u64);
        for &x in xs {
            self.u32(x.to_bits());
        }
    }
    pub fn f64s(&mut self, xs: &[f64]) {
        self.u64(xs.len() as u64);
        for &x in xs {
            self.f64(x);
        }
    }
    pub fn pairs(&mut self, xs: &[(u32, u32)]) {
        self.u64(xs.len() as u64);
        for &(a, b) in xs {
            self.u32(a);
            self.u32(b);
        }
    }
}

/// The reader matching [`Enc`]; every read fails cleanly on short input.
pub struct Dec<'a>(pub &'a [u8]);

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = self.0.split_at_checked(n)?;
        self.0 = b;
        Some(a)
    }
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn f64(&mut self) -> Option<f64> {
        Some(f64::from_bits(self.u64()?))
    }
    pub fn opt_f64(&mut self) -> Option<Option<f64>> {
        match self.take(1)?[0] {
            0 => Some(None),
            1 => Some(Some(self.f64()?)),
            _ => None,
        }
    }
    /// A length that the remaining input can hold `unit` bytes of each.
    fn len(&mut self, unit: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(unit)? <= self.0.len()).then_some(n)
    }
    pub fn str(&mut self) -> Option<String> {
        let n = self.len(1)?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    pub fn opt_str(&mut self) -> Option<Option<String>> {
        match self.take(1)?[0] {
            0 => Some(None),
            1 => Some(Some(self.str()?)),
            _ => None,
        }
    }
    /// A count of items that take at least `unit` bytes each (so a damaged
    /// count cannot make a caller reserve more than the input could hold).
    pub fn count(&mut self, unit: usize) -> Option<usize> {
        self.len(unit)
    }
    pub fn strs(&mut self) -> Option<Vec<String>> {
        let n = self.len(8)?;
        (0..n).map(|_| self.str()).collect()
    }
    pub fn u32s(&mut self) -> Option<Vec<u32>> {
        let n = self.len(4)?;
        let b = self.take(n * 4)?;
        Some(b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
    }
    pub fn f32s(&mut self) -> Option<Vec<f32>> {
        let n = self.len(4)?;
        let b = self.take(n * 4)?;
        Some(b.chunks_exact(4).map(|c| f32::from_bits(u32::from_le_bytes(c.try_into().expect("4 bytes")))).collect())
    }
    pub fn f64s(&mut self) -> Option<Vec<f64>> {
        let n = self.len(8)?;
        let b = self.take(n * 8)?;
        Some(b.chunks_exact(8).map(|c| f64::from_bits(u64::from_le_bytes(c.try_into().expect("8 bytes")))).collect())
    }
    pub fn pairs(&mut self) -> Option<Vec<(u32, u32)>> {
        let n = self.len(8)?;
        let b = self.take(n * 8)?;
        Some(
            b.chunks_exact(8)
                .map(|c| {
                    (
                        u32::from_le_bytes(c[..4].try_into().expect("4 bytes")),
                        u32::from_le_bytes(c[4..].try_into().expect("4 bytes")),
                    )
                })
                .collect(),
        )
    }
    pub fn done(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn entries_round_trip_and_survive_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let c = DiskCache::open(tmp.path(), "abc", 1 << 20).unwrap();
        assert_eq!(c.get("ingest", &[1; 32]), None);
        c.put("ingest", &[1; 32], b"hello");
        assert_eq!(c.get("ingest", &[1; 32]).as_deref(), Some(&b"hello"[..]));
        assert_eq!(c.get("index", &[1; 32]), None, "stages do not share entries");
        let again = DiskCache::open(tmp.path(), "abc", 1 << 20).unwrap();
        assert_eq!(again.get("ingest", &[1; 32]).as_deref(), Some(&b"hello"[..]));
        let other = DiskCache::open(tmp.path(), "def", 1 << 20).unwrap();
        assert_eq!(other.get("ingest", &[1; 32]), None, "another harness hash reads nothing");
    }

    #[test]
    fn a_damaged_or_foreign_entry_is_a_miss_and_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let c = DiskCache::open(tmp.path(), "abc", 1 << 20).unwrap();
        c.put("ingest", &[2; 32], b"payload");
        let path = c.path("ingest", &[2; 32]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.pop();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(c.get("ingest", &[2; 32]), None);
        assert!(!path.exists());
        // An entry under the wrong key (a renamed file) is not served.
        c.put("ingest", &[3; 32], b"x");
        std::fs::rename(c.path("ingest", &[3; 32]), c.path("ingest", &[4; 32])).unwrap();
        assert_eq!(c.get("ingest", &[4; 32]), None);
    }

    #[test]
    fn concurrent_writers_and_readers_see_whole_entries_only() {
        let tmp = tempfile::tempdir().unwrap();
        let c = DiskCache::open(tmp.path(), "abc", 1 << 30).unwrap();
        // Every writer stores a payload that says its own length: [b; 1000 * b].
        std::thread::scope(|scope| {
            for w in 1..=4u8 {
                let c = &c;
                scope.spawn(move || {
                    for i in 0..100u32 {
                        let b = 1 + (w as u32 * 7 + i) as u8 % 9;
                        c.put("index", &[9; 32], &vec![b; 1000 * b as usize]);
                        if let Some(p) = c.get("index", &[9; 32]) {
                            assert!(!p.is_empty() && p.len() == 1000 * p[0] as usize, "a torn entry");
                            assert!(p.iter().all(|&x| x == p[0]), "a torn entry");
                        }
                    }
                });
            }
        });
        // Only the entry itself is left: no temporary files.
        assert_eq!(std::fs::read_dir(c.dir()).unwrap().count(), 1);
    }

    #[test]
    fn eviction_removes_the_least_recently_used_until_it_fits() {
        let t = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let mut e =
            vec![(t(3), 10, PathBuf::from("c")), (t(1), 10, PathBuf::from("a")), (t(2), 10, PathBuf::from("b"))];
        assert_eq!(plan_eviction(&mut e, 30), Vec::<PathBuf>::new());
        assert_eq!(plan_eviction(&mut e, 25), vec![PathBuf::from("a")]);
        assert_eq!(plan_eviction(&mut e, 10), vec![PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(plan_eviction(&mut e, 0).len(), 3);
    }

    #[test]
    fn sweep_keeps_the_recently_read_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let c = DiskCache::open(tmp.path(), "abc", 2 * (48 + 100)).unwrap();
        let old = SystemTime::now() - Duration::from_secs(100);
        for k in 0..3u8 {
            c.put("index", &[k; 32], &[k; 100]);
            std::fs::File::open(c.path("index", &[k; 32])).unwrap().set_modified(old).unwrap();
        }
        // Reading entry 0 makes it the most recent; entry 1 is now the oldest.
        std::fs::File::open(c.path("index", &[1; 32])).unwrap().set_modified(old - Duration::from_secs(10)).unwrap();
        assert!(c.get("index", &[0; 32]).is_some());
        c.sweep();
        assert!(c.path("index", &[0; 32]).exists());
        assert!(!c.path("index", &[1; 32]).exists());
        assert!(c.path("index", &[2; 32]).exists());
    }

    #[test]
    fn the_codec_round_trips_exactly_and_rejects_short_input() {
        let mut e = Enc::default();
        e.u32(7);
        e.f64(-0.1);
        e.opt_f64(None);
        e.opt_f64(Some(f64::MIN_POSITIVE));
        e.str("héllo");
        e.u32s(&[1, 2]);
        e.f32s(&[0.5, -1e-30]);
        e.f64s(&[1.0 / 3.0]);
        e.pairs(&[(1, 9)]);
        let mut d = Dec(&e.0);
        assert_eq!(d.u32(), Some(7));
        assert_eq!(d.f64().map(f64::to_bits), Some((-0.1f64).to_bits()));
        assert_eq!(d.opt_f64(), Some(None));
        assert_eq!(d.opt_f64(), Some(Some(f64::MIN_POSITIVE)));
        assert_eq!(d.str().as_deref(), Some("héllo"));
        assert_eq!(d.u32s(), Some(vec![1, 2]));
        assert_eq!(d.f32s(), Some(vec![0.5, -1e-30]));
        assert_eq!(d.f64s(), Some(vec![1.0 / 3.0]));
        assert_eq!(d.pairs(), Some(vec![(1, 9)]));
        assert!(d.done());
        let mut huge = Enc::default();
        huge.u64(u64::MAX);
        assert_eq!(Dec(&huge.0).u32s(), None);
        assert_eq!(Dec(&e.0[..3]).u32(), None);
    }

    #[test]
    fn a_cache_on_a_small_disk_leaves_the_floor_free_and_skips_what_would_cross_it() {
        use crate::space::SimulatedDisk;
        use std::sync::Arc;
        let tmp = tempfile::tempdir().unwrap();
        // A 40 kB disk; the cache keeps 16 kB free; its own bound (1 MB) would never stop it.
        let disk = Arc::new(SimulatedDisk::new(tmp.path(), 40_000));
        let floor = Floor::with_source(16_000, disk.clone());
        let c = DiskCache::open(tmp.path(), "abc", 1 << 20).unwrap().with_floor(floor.clone());
        for k in 0..100u8 {
            c.put("index", &[k; 32], &[k; 1000]);
            assert!(disk.size - disk.used() >= 16_000, "entry {k}: {} bytes used", disk.used());
        }
        // The newest entries are kept, the oldest went.
        assert!(c.get("index", &[99; 32]).is_some());
        assert!(c.get("index", &[0; 32]).is_none());
        let kept = std::fs::read_dir(c.dir()).unwrap().count();
        assert!((20..=24).contains(&kept), "{kept} entries kept");
        // Something else fills the disk: reopening evicts down to the floor...
        disk.other.store(20_000, Ordering::Relaxed);
        let c = DiskCache::open(tmp.path(), "abc", 1 << 20).unwrap().with_floor(floor.clone());
        assert!(disk.size - disk.used() >= 16_000);
        // ...and when even an empty cache leaves too little, a write is skipped, not failed.
        disk.other.store(30_000, Ordering::Relaxed);
        c.put("index", &[1; 32], &[1; 1000]);
        assert_eq!(std::fs::read_dir(c.dir()).unwrap().count(), 0);
        assert!(c.get("index", &[1; 32]).is_none());
        // The disk is freed: the next write is stored, with no manual step.
        disk.other.store(0, Ordering::Relaxed);
        c.put("index", &[1; 32], &[1; 1000]);
        assert!(c.get("index", &[1; 32]).is_some());
    }
}
