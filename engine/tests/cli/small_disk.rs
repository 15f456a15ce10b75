//! A project on a small file system: the caches leave the journal its free
//! space, a cache that filled the disk does not stop `evolve`, the journal's
//! refusal names `emend cache clear`, and after the disk is freed the next run
//! needs no manual step. Runs on a 40 MB tmpfs when this process may mount
//! one (root); otherwise it says so and passes (the simulated small disks of
//! emend_harness::cache and emend_eval::llm::cache always run).

use std::path::Path;
use std::process::Command;

use crate::support;
use support::emend;

fn free_bytes(path: &Path) -> u64 {
    use emend_harness::space::FreeSpace;
    emend_harness::space::Statvfs.available(path).unwrap()
}

/// A 40 MB tmpfs at `dir`, unmounted on drop; None when mounting is not allowed here.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=40m", "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Writes files of 1 MB into `dir` until the file system has at most `leave` bytes free.
fn fill(dir: &Path, leave: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mb = vec![7u8; 1 << 20];
    let mut i = 0;
    while free_bytes(dir) > leave + (1 << 20) {
        std::fs::write(dir.join(format!("fill-{i}.bin")), &mb).unwrap();
        i += 1;
    }
}

/// One short evolve run: at most `evals` full-evaluation equivalents.
fn evolve(dir: &Path, evals: &str) -> (i32, String, String) {
    emend(dir, &["evolve", "--rounds", "1", "--max-evals", evals, "--quiet"])
}

/// Events in the journal.
fn events(dir: &Path) -> usize {
    let (code, out, err) = emend(dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    out.lines().count()
}

#[test]
fn a_full_disk_never_locks_the_project() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(&tmp.path().join("small")) else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let dir = fs.0.join("p");
    let (code, out, err) = emend(&fs.0, &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");

    // Something else fills the disk: the journal refuses, and the message names the way out.
    fill(&fs.0.join("other"), 4 << 20);
    let (code, _, err) = evolve(&dir, "1");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("emend cache clear"), "{err}");
    assert_eq!(events(&dir), 2, "nothing was journaled");

    // The disk is freed: the next run needs no manual step.
    std::fs::remove_dir_all(fs.0.join("other")).unwrap();
    let (code, _, err) = evolve(&dir, "1");
    assert_eq!(code, 0, "{err}");
    assert_eq!(events(&dir), 3, "the served evaluation was journaled");

    // The stage cache fills the disk (entries a harness wrote earlier)...
    let stale = dir.join(".emend/cache/stages/harness-0000000000000000");
    fill(&stale, 4 << 20);
    assert!(free_bytes(&dir) < emend_journal::DEFAULT_MIN_FREE_BYTES);
    // ...and evolve still runs and journals its round: the cache gives the space
    // back first, and the entries it writes leave the journal its reserve and margin.
    let (code, _, err) = evolve(&dir, "3");
    assert_eq!(code, 0, "{err}");
    assert!(events(&dir) > 3);
    let free = free_bytes(&dir);
    assert!(free >= emend_core::setup::CACHE_FLOOR_BYTES - (1 << 20), "{free} bytes free");
    let (code, out, err) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn cache_clear_empties_every_cache_and_says_what_it_freed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (code, out, err) = emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");
    let cache = dir.join(".emend/cache");
    std::fs::create_dir_all(cache.join("stages/harness-1")).unwrap();
    std::fs::create_dir_all(cache.join("llm")).unwrap();
    std::fs::write(cache.join("stages/harness-1/index-00.bin"), vec![0u8; 1500]).unwrap();
    std::fs::write(cache.join("llm/replies.jsonl"), vec![b'x'; 500]).unwrap();
    let (code, out, err) = emend(&dir, &["cache", "clear"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("removed 2 cache files (0.0 MB) under "), "{out}");
    assert!(!cache.exists() && dir.join(".emend/journal").exists());
    let (code, out, _) = emend(&dir, &["cache", "clear", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["files"].as_u64(), v["bytes"].as_u64()), (Some(0), Some(0)), "{v}");
}
