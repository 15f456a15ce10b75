//! No setting that loads and does nothing: every key the schema of emend.yaml
//! declares is read by code outside the configuration module (its parser,
//! validation and template), and every retired key is refused at load.
//!
//! "Read" is a field access (`.alpha`, `.race_level`) in the source of the
//! crates that act on a configuration (model outside `config`, eval, loop,
//! report, the binary). It is a reading check: a key read and then ignored
//! would pass here; engine/tests/cli/config_behaviour.rs is the behavioural
//! one (a changed value changes some command's output). It fails when a key is added to the
//! schema and a config struct and nothing uses it, which is how the retired
//! `gates.holdout_budget` and `gates.alpha_schedule` came to load and do
//! nothing.

use std::path::{Path, PathBuf};

use emend_core::config::{RETIRED_KEYS, leaf_keys, parse_config};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The non-test source of the crates that act on a configuration, without
/// the configuration module itself.
fn acting_source() -> String {
    fn collect(dir: &Path, out: &mut String) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "config" {
                    collect(&path, out);
                }
            } else if name.ends_with(".rs") && !(name == "config.rs" && dir.ends_with("core/src")) {
                let text = std::fs::read_to_string(&path).unwrap();
                // Unit tests read keys too; only the code above them counts.
                out.push_str(text.split("#[cfg(test)]").next().unwrap());
            }
        }
    }
    let mut out = String::new();
    for krate in ["core/src", "eval/src", "loop/src", "report/src", "engine/src"] {
        collect(&workspace().join(krate), &mut out);
    }
    out
}

/// Whether `source` reads the field `field` (`.field` not followed by an
/// identifier character or a call).
fn reads(source: &str, field: &str) -> bool {
    let needle = format!(".{field}");
    source.match_indices(&needle).any(|(i, _)| {
        let rest = &source[i + needle.len()..];
        let next = rest.chars().next();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_') && !rest.trim_start().starts_with('(')
    })
}

/// Keys whose whole effect is at load: they lift a refusal of validation,
/// so validation is where they are read.
const LOAD_ONLY: [(&str, &str); 1] = [(
    "roles.*.allow_shared_with_judge",
    "lets the judge share the answerer's or evolver's endpoint and model, which validation refuses otherwise",
)];

/// Whether the dotted `key` matches `pattern` (`*` matches one segment).
fn matches(pattern: &str, key: &str) -> bool {
    let (p, k): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), key.split('.').collect());
    p.len() == k.len() && p.iter().zip(&k).all(|(p, k)| *p == "*" || p == k)
}

#[test]
fn every_key_of_the_schema_is_read_beyond_the_config_module() {
    let keys = leaf_keys();
    assert!(keys.len() > 50, "the walk found only {keys:?}");
    let source = acting_source();
    // `loop` is `loop_` in Rust; every other key is its field's name.
    let unread: Vec<&String> = keys
        .iter()
        .filter(|k| !LOAD_ONLY.iter().any(|(l, _)| matches(l, k)))
        .filter(|k| {
            let field = k.rsplit('.').next().unwrap();
            !reads(&source, if field == "loop" { "loop_" } else { field })
        })
        .collect();
    assert!(
        unread.is_empty(),
        "keys nothing reads outside the config module (make each do something, or refuse it in \
         core/src/config/retired.rs): {unread:?}"
    );
}

#[test]
fn a_load_only_key_is_a_key_validation_reads() {
    let keys = leaf_keys();
    let validation = std::fs::read_to_string(workspace().join("core/src/config/validate.rs")).unwrap();
    for (key, why) in LOAD_ONLY {
        assert!(keys.iter().any(|k| matches(key, k)), "{key} is not in the schema");
        let field = key.rsplit('.').next().unwrap();
        assert!(reads(&validation, field), "{key} ({why}) is not read by validation");
    }
}

#[test]
fn the_reading_check_can_fail() {
    let source = "let a = cfg.gates.alpha;\nlet b = self.seeded();\nlet c = x.race_levels;\n";
    assert!(reads(source, "alpha"));
    assert!(!reads(source, "seeded"), "a method call is not a read");
    assert!(!reads(source, "race_level"), "a longer field is not this one");
    assert!(!reads(source, "holdout_budget"));
}

#[test]
fn every_retired_key_is_refused_at_load() {
    for (section, key, why) in RETIRED_KEYS {
        let yaml = format!("harness:\n  tasks: builtin\n{section}:\n  {key}: 1\n");
        let err = parse_config(&yaml).expect_err(&format!("{section}.{key} loads"));
        assert!(err.contains(&format!("{section}.{key}")) && err.contains(why), "{section}.{key}: {err}");
    }
}
