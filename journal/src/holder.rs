//! Who holds a journal: the content of its LOCK file (pid, host, start time,
//! mode), which names the holder in messages. The lock itself is `lock.rs`.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How a journal was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenMode {
    #[default]
    Writer,
    Reader,
}

impl OpenMode {
    pub fn as_str(self) -> &'static str {
        match self {
            OpenMode::Writer => "writer",
            OpenMode::Reader => "reader",
        }
    }
}

/// Who holds (or held) a journal, as recorded in its LOCK file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    pub pid: u32,
    pub host: String,
    /// RFC 3339 UTC, seconds precision.
    pub started_at: String,
    /// Absent in a LOCK file written without it: taken as a writer.
    #[serde(default)]
    pub mode: OpenMode,
}

impl LockHolder {
    /// This process, opening the journal now in `mode`.
    pub(crate) fn this_process(mode: OpenMode, now: SystemTime) -> Self {
        LockHolder { pid: std::process::id(), host: hostname(), started_at: rfc3339_utc(now), mode }
    }
}

/// The host name from /proc, or `unknown`.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `YYYY-MM-DDTHH:MM:SSZ` for `t`, whole seconds (times before 1970 print as the epoch).
pub(crate) fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    // Past jiff's range (year 9999) is not a clock this lock will ever read; clamp to it.
    let secs = i64::try_from(secs).unwrap_or(i64::MAX).min(jiff::Timestamp::MAX.as_second());
    jiff::Timestamp::from_second(secs).expect("clamped to jiff's range").to_string()
}
