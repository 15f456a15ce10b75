//! The reply cache: one JSON line per successful call in
//! `.emend/cache/llm/replies.jsonl`, keyed by the SHA-256 of (role,
//! endpoint, model, the settings that change a reply, the request's
//! messages). Loaded whole when the roles are set up; appended to as replies
//! arrive. Only replies that parsed are stored, so a cached reply is always
//! usable. A torn last line (a crash mid-write) is skipped on load.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
}

impl ReplyCache {
    /// Opens (creating) the cache in `dir`; None keeps replies in memory.
    pub fn open(dir: Option<&Path>) -> Result<ReplyCache, String> {
        let mut replies = HashMap::new();
        let Some(dir) = dir else {
            return Ok(ReplyCache { path: None, replies: Mutex::new(replies), file: Mutex::new(None) });
        };
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(CACHE_FILE);
        if let Ok(f) = File::open(&path) {
            for line in BufReader::new(f).lines() {
                let Ok(line) = line else { break };
                if let Ok(l) = serde_json::from_str::<Line>(&line) {
                    replies.insert(l.key, l.text);
                }
            }
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
        Ok(ReplyCache { path: Some(path), replies: Mutex::new(replies), file: Mutex::new(Some(file)) })
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
}
