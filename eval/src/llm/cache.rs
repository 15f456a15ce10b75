//! The reply cache: one JSON line per successful call in
//! `.emend/cache/llm/replies.jsonl`, keyed by the SHA-256 of (role,
//! endpoint, model, the settings that change a reply, the request's
//! messages). Loaded whole when the roles are set up; appended to as replies
//! arrive. Only replies that parsed are stored, so a cached reply is always
//! usable. A torn last line (a crash mid-write) is skipped on load.
//!
//! The cache leaves the journal its free space ([`emend_core::setup::CACHE_FLOOR_BYTES`]):
//! opened on a file system below that floor it drops its oldest lines, and a
//! reply whose line would cross the floor is kept in memory only (logged once,
//! naming `emend cache clear`).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use emend_harness::space::{Floor, short_message};
use serde::{Deserialize, Serialize};

pub const CACHE_FILE: &str = "replies.jsonl";

#[derive(Serialize, Deserialize)]
struct Line {
    key: String,
    role: String,
    text: String,
}

/// Replies by request key, shared by every role.
pub struct ReplyCache {
    path: Option<PathBuf>,
    replies: Mutex<HashMap<String, String>>,
    file: Mutex<Option<File>>,
    floor: Floor,
    warned: AtomicBool,
}

impl ReplyCache {
    /// Opens (creating) the cache in `dir`; None keeps replies in memory.
    pub fn open(dir: Option<&Path>) -> Result<ReplyCache, String> {
        ReplyCache::open_with_floor(dir, emend_core::setup::cache_floor())
    }

    /// [`ReplyCache::open`], leaving `floor` free on the cache's file system.
    pub fn open_with_floor(dir: Option<&Path>, floor: Floor) -> Result<ReplyCache, String> {
        let mut replies = HashMap::new();
        let warned = AtomicBool::new(false);
        let Some(dir) = dir else {
            return Ok(ReplyCache { path: None, replies: Mutex::new(replies), file: Mutex::new(None), floor, warned });
        };
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(CACHE_FILE);
        let mut lines = Vec::new();
        if let Ok(f) = File::open(&path) {
            for line in BufReader::new(f).lines() {
                let Ok(line) = line else { break };
                if let Ok(l) = serde_json::from_str::<Line>(&line) {
                    lines.push((l, line.len() as u64 + 1));
                }
            }
        }
        let short = floor.shortfall(dir, 0);
        if short > 0 && !lines.is_empty() {
            lines = evict_oldest(&path, lines, short)?;
        }
        for (l, _) in lines {
            replies.insert(l.key, l.text);
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: cannot open for appending: {e}", path.display()))?;
        // End a torn last line, so the next reply starts a line of its own.
        let torn = last_byte(&path).is_some_and(|c| c != b'\n');
        if torn {
            file.write_all(b"\n").map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(ReplyCache { path: Some(path), replies: Mutex::new(replies), file: Mutex::new(Some(file)), floor, warned })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn get(&self, key: &str) -> Option<String> {
        self.replies.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.replies.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores a reply (in memory, and on disk when the cache has a file).
    /// A failed write only costs a future request, so it is logged, not fatal.
    pub fn put(&self, key: &str, role: &str, text: &str) {
        self.replies.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), text.to_string());
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = file.as_mut() {
            let mut line = serde_json::to_string(&Line { key: key.into(), role: role.into(), text: text.into() })
                .expect("a cache line serializes");
            line.push('\n');
            let dir = self.path.as_deref().and_then(Path::parent).unwrap_or(Path::new("."));
            if self.floor.shortfall(dir, line.len() as u64) > 0 {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    let free = self.floor.available(dir);
                    tracing::warn!("{}", short_message("model reply cache", dir, &self.floor, free));
                }
                return;
            }
            // One write per line: appends from several processes do not interleave.
            if let Err(e) = f.write_all(line.as_bytes()) {
                tracing::warn!(
                    "{}: cannot write the model reply cache ({e}); continuing without it",
                    self.path.as_deref().map_or_else(String::new, |p| p.display().to_string())
                );
                *file = None;
            }
        }
    }
}

/// Rewrites the cache file without its oldest lines, freeing at least `short`
/// bytes (every line when the file is smaller); returns the lines kept.
fn evict_oldest(path: &Path, lines: Vec<(Line, u64)>, short: u64) -> Result<Vec<(Line, u64)>, String> {
    let total: u64 = lines.iter().map(|l| l.1).sum();
    let budget = total.saturating_sub(short);
    let mut kept = Vec::new();
    let mut size = 0u64;
    for l in lines.into_iter().rev() {
        if size + l.1 > budget {
            break;
        }
        size += l.1;
        kept.push(l);
    }
    kept.reverse();
    // Truncate first: the rewrite needs no room beyond what the kept lines held.
    let mut f = File::create(path).map_err(|e| format!("{}: cannot rewrite: {e}", path.display()))?;
    for (l, _) in &kept {
        let mut line = serde_json::to_string(l).expect("a cache line serializes");
        line.push('\n');
        f.write_all(line.as_bytes()).map_err(|e| format!("{}: cannot rewrite: {e}", path.display()))?;
    }
    tracing::info!("{}: dropped the oldest model replies to keep free space ({} kept)", path.display(), kept.len());
    Ok(kept)
}

fn last_byte(path: &Path) -> Option<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path).ok()?;
    f.seek(SeekFrom::End(-1)).ok()?;
    let mut b = [0u8; 1];
    f.read_exact(&mut b).ok()?;
    Some(b[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_survive_a_reopen_and_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let c = ReplyCache::open(Some(dir.path())).unwrap();
        c.put("k1", "judge", "{\"label\": \"CORRECT\"}");
        c.put("k2", "answerer", "Paris\nand more");
        drop(c);
        let mut f = OpenOptions::new().append(true).open(dir.path().join(CACHE_FILE)).unwrap();
        f.write_all(b"{\"key\": \"k3\", \"ro").unwrap();
        let c = ReplyCache::open(Some(dir.path())).unwrap();
        assert_eq!(c.len(), 2);
        c.put("k4", "judge", "y");
        assert_eq!(ReplyCache::open(Some(dir.path())).unwrap().get("k4").as_deref(), Some("y"));
        assert_eq!(c.get("k2").as_deref(), Some("Paris\nand more"));
        assert_eq!(c.get("k3"), None);
        let mem = ReplyCache::open(None).unwrap();
        mem.put("a", "judge", "x");
        assert_eq!(mem.get("a").as_deref(), Some("x"));
    }

    #[test]
    fn on_a_small_disk_the_oldest_replies_go_and_a_crossing_write_is_skipped() {
        use emend_harness::space::SimulatedDisk;
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let disk = Arc::new(SimulatedDisk::new(dir.path(), 10_000));
        let floor = Floor::with_source(4_000, disk.clone());
        let c = ReplyCache::open_with_floor(Some(dir.path()), floor.clone()).unwrap();
        for k in 0..100 {
            c.put(&format!("k{k}"), "judge", &"x".repeat(100));
            assert!(disk.size - disk.used() >= 4_000, "reply {k}: {} bytes used", disk.used());
        }
        // Every reply is still answered from memory in this process.
        assert_eq!(c.get("k99").as_deref(), Some(&*"x".repeat(100)));
        let stored = ReplyCache::open_with_floor(Some(dir.path()), floor.clone()).unwrap().len();
        assert!((40..=50).contains(&stored), "{stored} replies on disk");
        // The disk fills from elsewhere: reopening drops the oldest lines down to the floor.
        disk.other.store(3_000, std::sync::atomic::Ordering::Relaxed);
        let c = ReplyCache::open_with_floor(Some(dir.path()), floor.clone()).unwrap();
        assert!(disk.size - disk.used() >= 4_000, "{} bytes used", disk.used());
        assert!(c.len() < stored && c.get(&format!("k{}", stored - 1)).is_some(), "{} kept", c.len());
        assert!(c.get("k0").is_none());
        // Freed: writes are stored again.
        disk.other.store(0, std::sync::atomic::Ordering::Relaxed);
        let before = std::fs::metadata(dir.path().join(CACHE_FILE)).unwrap().len();
        c.put("new", "judge", "y");
        assert!(std::fs::metadata(dir.path().join(CACHE_FILE)).unwrap().len() > before);
    }
}
