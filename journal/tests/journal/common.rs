//! A small projector and helpers shared by the journal tests.

use std::collections::BTreeMap;

use emend_journal::{EventLog, EventRecord, NewEvent, ProjectError, ProjectionState, Projector};
use serde_json::{Value, json};

/// Counters per key (`counts`) and a last-value map (`last`).
///
/// Event kinds: `inc {key, by}` adds to `counts[key]` and records `{by, seq}` in `last[key]`;
/// `set {key, value}` sets `last[key]`; `del {key}` removes the key from both trees;
/// `copy {from, to}` copies `last[from]` to `last[to]` (null if absent); `fail` makes the
/// projector fail; `stray` writes to an undeclared tree. Other kinds project nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally;

pub const TREES: [&str; 2] = ["counts", "last"];

fn field<'a>(event: &'a EventRecord, name: &str) -> Result<&'a Value, ProjectError> {
    event.payload.get(name).ok_or_else(|| format!("event {} ({}) has no `{name}`", event.seq, event.kind).into())
}

fn key(event: &EventRecord, name: &str) -> Result<String, ProjectError> {
    field(event, name)?
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("event {}: `{name}` is not a string", event.seq).into())
}

impl Projector for Tally {
    fn trees(&self) -> Vec<String> {
        TREES.iter().map(|t| t.to_string()).collect()
    }

    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
        match event.kind.as_str() {
            "inc" => {
                let k = key(event, "key")?;
                let by = field(event, "by")?.as_i64().ok_or("`by` is not an integer")?;
                let now = state.get("counts", &k).and_then(|v| v.as_i64()).unwrap_or(0);
                state.put("counts", &k, json!(now + by));
                state.put("last", &k, json!({"by": by, "seq": event.seq}));
            }
            "set" => {
                let k = key(event, "key")?;
                state.put("last", &k, field(event, "value")?.clone());
            }
            "del" => {
                let k = key(event, "key")?;
                state.remove("counts", &k);
                state.remove("last", &k);
            }
            "copy" => {
                let from = key(event, "from")?;
                let to = key(event, "to")?;
                let value = state.get("last", &from).unwrap_or(Value::Null);
                state.put("last", &to, value);
            }
            "fail" => return Err("asked to fail".into()),
            "stray" => state.put("nowhere", "k", json!(1)),
            _ => {}
        }
        Ok(())
    }
}

pub fn inc(key: &str, by: i64) -> NewEvent {
    NewEvent::new("inc", json!({"key": key, "by": by}))
}

pub fn set(key: &str, value: Value) -> NewEvent {
    NewEvent::new("set", json!({"key": key, "value": value}))
}

pub fn del(key: &str) -> NewEvent {
    NewEvent::new("del", json!({"key": key}))
}

pub fn copy(from: &str, to: &str) -> NewEvent {
    NewEvent::new("copy", json!({"from": from, "to": to}))
}

/// Every projection entry, tree by tree.
pub type Snapshot = BTreeMap<String, Vec<(String, Value)>>;

pub fn snapshot(log: &dyn EventLog) -> Snapshot {
    TREES.iter().map(|t| (t.to_string(), log.scan(t, "").expect("scan"))).collect()
}

/// A command re-running this test binary for exactly one child-side test, `name` (its full
/// path, e.g. `locks::child_holds_the_lock`), with output uncaptured. Child-side tests are
/// `#[ignore]`d, so a normal run never counts them, and fail when run without the
/// environment variable their parent sets.
pub fn child_test(name: &str) -> std::process::Command {
    let exe = std::env::current_exe().expect("current test binary");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([name, "--ignored", "--exact", "--nocapture", "--test-threads=1", "--quiet"]);
    cmd
}
