//! The project: `emend.yaml` (what to evaluate, the gates' thresholds, the
//! loop's settings, model roles) and where its files live. Every command
//! finds the project from the current directory upwards, or `--project DIR`.
//!
//! This file owns loading (reading, parsing, the project on disk); its
//! children own the rest: the serde types ([`types`]), their default values
//! ([`defaults`]), range and consistency checks ([`validate`]), the keys
//! renamed from the papers' symbols ([`renamed`]) and the commented
//! `emend.yaml` that `emend init` writes ([`template`]).

use std::fmt;
use std::path::{Path, PathBuf};

mod check;
mod defaults;
mod retired;
mod template;
mod types;
mod validate;

pub use check::{Checked, ConfigProblem, check_config, locate, suggest};
pub use retired::{RETIRED_KEYS, retired};
pub use template::render_config;
pub use types::*;
pub use validate::{MAX_CANDIDATES, MAX_CONFIG_BYTES, MAX_ROUNDS, check_candidates, check_roles, check_rounds};

pub const CONFIG_FILE: &str = "emend.yaml";
/// The JSON Schema of `emend.yaml` (schemas/emend.schema.json), for editors;
/// [`parse_config`] is authoritative.
pub const CONFIG_SCHEMA: &str = include_str!("../../schemas/emend.schema.json");
/// Where `emend init` writes [`CONFIG_SCHEMA`], relative to the project
/// directory; the first line of the emend.yaml it writes names it.
pub const CONFIG_SCHEMA_FILE: &str = "schema/emend.schema.json";
/// The journal and caches, inside the project directory.
pub const STATE_DIR: &str = ".emend";

/// Why a project could not be opened.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}

/// A project on disk.
#[derive(Debug, Clone)]
pub struct Project {
    pub dir: PathBuf,
    pub config: ProjectConfig,
}

impl Project {
    /// Finds `emend.yaml` in `start` or its ancestors.
    pub fn discover(start: &Path) -> Result<Project, ConfigError> {
        let mut dir = Some(start);
        while let Some(d) = dir {
            if d.join(CONFIG_FILE).is_file() {
                return Project::open(d);
            }
            dir = d.parent();
        }
        Err(ConfigError {
            file: start.join(CONFIG_FILE),
            message: "no emend.yaml here or in any parent directory (run `emend init`, or pass --project DIR)".into(),
        })
    }

    pub fn open(dir: &Path) -> Result<Project, ConfigError> {
        let file = dir.join(CONFIG_FILE);
        let text = read_config(&file).map_err(|message| ConfigError { file: file.clone(), message })?;
        let config = parse_config(&text).map_err(|message| ConfigError { file: file.clone(), message })?;
        Ok(Project { dir: dir.to_path_buf(), config })
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }

    pub fn strategy_path(&self) -> PathBuf {
        self.dir.join(&self.config.strategy)
    }

    pub fn journal_dir(&self) -> PathBuf {
        self.dir.join(STATE_DIR).join("journal")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.dir.join(STATE_DIR).join("cache")
    }

    /// A path from the configuration, resolved against the project directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() { p.to_path_buf() } else { self.dir.join(p) }
    }
}

/// Reads `emend.yaml`, refusing a file over [`MAX_CONFIG_BYTES`] before reading it whole.
fn read_config(file: &Path) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(file).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!("file is larger than {MAX_CONFIG_BYTES} bytes; an emend.yaml is a few KB"));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()))
}

/// Parses and range-checks `emend.yaml`: the error is the first problem
/// [`check_config`] finds, counting the rest.
pub fn parse_config(text: &str) -> Result<ProjectConfig, String> {
    check_config(text).into_result()
}

/// The typed parser alone (serde and the range checks, first problem only,
/// without the configuration schema's pass): what the schema's agreement
/// tests compare the schema with. Commands read a configuration through
/// [`parse_config`].
pub fn parse_config_typed(text: &str) -> Result<ProjectConfig, String> {
    let config: ProjectConfig = serde_yaml::from_str(text).map_err(|e| match e.location() {
        Some(l) => format!("line {} column {}: {e}", l.line(), l.column()),
        None => e.to_string(),
    })?;
    match validate::problems(&config).into_iter().next() {
        Some(first) => Err(first),
        None => Ok(config),
    }
}

/// The leaf keys of [`CONFIG_SCHEMA`] as dotted paths, in the schema's
/// order (`$ref`s followed); a map of objects is one `*` segment
/// (`harness.command.env.*`). What the tests that hold every key to account
/// (core/tests/config_keys.rs, the CLI's config_behaviour) enumerate.
pub fn leaf_keys() -> Vec<String> {
    use serde_json::Value;
    fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
        match node.get("$ref").and_then(Value::as_str) {
            Some(r) => resolve(root, root.pointer(r.trim_start_matches('#')).expect("the $ref resolves")),
            None => node,
        }
    }
    fn walk(root: &Value, node: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
        let node = resolve(root, node);
        if let Some(props) = node.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                path.push(k.clone());
                walk(root, v, path, out);
                path.pop();
            }
        } else if let Some(inner) = node.get("additionalProperties").filter(|a| a.is_object()) {
            path.push("*".into());
            walk(root, inner, path, out);
            path.pop();
        } else {
            out.push(path.join("."));
        }
    }
    let schema: Value = serde_json::from_str(CONFIG_SCHEMA).expect("the configuration schema is JSON");
    let mut out = Vec::new();
    walk(&schema, &schema, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_config_parses_to_the_defaults() {
        let text = render_config("builtin", Path::new("strategies/served.yaml"), None, None);
        let c = parse_config(&text).unwrap();
        assert_eq!(c.gates, GateConfig::default());
        assert_eq!(c.loop_, LoopConfig::default());
        assert_eq!(c.search, SearchConfig::default());
        assert_eq!(c.harness.tasks, "builtin");
        let cmd = vec!["python3".to_string(), "adapter.py".to_string()];
        let text = render_config("t.json", Path::new("s.json"), Some(&cmd), Some(Path::new("schema.json")));
        let c = parse_config(&text).unwrap();
        assert_eq!(c.harness.kind, HarnessKind::Command);
        assert_eq!(c.harness.command.unwrap().argv, cmd);
    }

    #[test]
    fn a_command_harness_gets_no_settings_of_the_builtin_pipeline() {
        let cmd = vec!["python3".to_string(), "adapter.py".to_string()];
        let text = render_config("t.json", Path::new("s.json"), Some(&cmd), Some(Path::new("schema.json")));
        for key in ["judge:", "f1_threshold:", "budget_ceiling:"] {
            assert!(!text.lines().any(|l| l.trim_start().starts_with(key)), "{key} in\n{text}");
        }
        // The parser fills them with its defaults, which the command never reads.
        assert_eq!(parse_config(&text).unwrap().harness.budget_ceiling, defaults::default_ceiling());
        let builtin = render_config("builtin", Path::new("s.json"), None, None);
        for key in ["  judge: evidence", "  f1_threshold: 0.5", "  budget_ceiling: 2000"] {
            assert!(builtin.lines().any(|l| l == key), "{key} missing from\n{builtin}");
        }
    }

    #[test]
    fn search_method_is_one_setting_with_a_default_per_protocol() {
        let method =
            |yaml: &str| parse_config(&format!("harness:\n  tasks: builtin\n{yaml}")).map(|c| c.search_method());
        assert_eq!(method(""), Ok(SearchMethod::Jump));
        assert_eq!(method("  protocol: replay\n"), Ok(SearchMethod::Rules));
        for (v, want) in [("jump", SearchMethod::Jump), ("steps", SearchMethod::Steps), ("rules", SearchMethod::Rules)]
        {
            assert_eq!(method(&format!("search:\n  method: {v}\n")), Ok(want), "{v}");
        }
        assert_eq!(method("  protocol: replay\nsearch:\n  method: rules\n"), Ok(SearchMethod::Rules));
        let e = method("  protocol: replay\nsearch:\n  method: steps\n").unwrap_err();
        assert!(e.contains("search.method: steps needs harness.protocol: endpoint"), "{e}");
        let e = method("search:\n  method: bounded\n").unwrap_err();
        assert!(
            e.contains("search.method: must be one of \"jump\", \"steps\", \"rules\", null, got \"bounded\""),
            "{e}"
        );
        // The two keys it replaced are refused, saying what to write.
        let e = method("gates:\n  step_bound: schema\n").unwrap_err();
        assert!(e.contains("gates.step_bound: `step_bound` is replaced by `search.method`"), "{e}");
        let e = method("loop:\n  search: false\n").unwrap_err();
        assert!(e.contains("loop.search: `search` is replaced by `search.method`"), "{e}");
    }

    #[test]
    fn cluster_check_reads_off_require_and_yaml_1_1_false() {
        let base = "harness:\n  tasks: builtin\ngates:\n  cluster_check: ";
        for (v, want) in [("off", ClusterMode::Off), ("false", ClusterMode::Off), ("require", ClusterMode::Require)] {
            assert_eq!(parse_config(&format!("{base}{v}\n")).unwrap().gates.cluster_check, want, "{v}");
        }
        assert!(parse_config(&format!("{base}maybe\n")).unwrap_err().contains("cluster_check"));
        let err = parse_config("harness:\n  tasks: builtin\n  split:\n    confirm_fraction: 1.0\n").unwrap_err();
        assert!(err.contains("harness.split.confirm_fraction"), "{err}");
    }

    #[test]
    fn bad_settings_name_the_field() {
        let base = render_config("builtin", Path::new("s.yaml"), None, None);
        let bad = base.replace("alpha: 0.05", "alpha: 2");
        assert!(parse_config(&bad).unwrap_err().contains("gates.alpha: must be between"));
        let bad = base.replace("candidates: 4", "candidates: lots");
        let err = parse_config(&bad).unwrap_err();
        assert!(err.contains("line") && err.contains("loop.candidates"), "{err}");
        let bad = base.replace("candidates: 4", "candidates: 4\n  colour: red");
        let err = parse_config(&bad).unwrap_err();
        assert!(err.contains("loop.colour: unknown key `colour` (expected one of"), "{err}");
    }

    fn with_roles(roles: &str) -> Result<ProjectConfig, String> {
        let base = render_config("builtin", Path::new("s.yaml"), None, None);
        parse_config(&base.replace("roles: {}\n", roles))
    }

    #[test]
    fn roles_take_typed_settings_with_defaults() {
        let c =
            with_roles("roles:\n  answerer: {base_url: 'http://127.0.0.1:9/v1', model: m, concurrency: 8}\n").unwrap();
        let r = &c.roles["answerer"];
        assert_eq!(r.concurrency, Some(8));
        assert_eq!(*r, RoleConfig { concurrency: Some(8), ..RoleConfig::new("http://127.0.0.1:9/v1", "m") });
        let err = with_roles("roles:\n  answerer: {base_url: 'http://h/v1', model: m, colour: red}\n").unwrap_err();
        assert!(err.contains("roles.answerer.colour: unknown key `colour`"), "{err}");
        let err = with_roles("roles:\n  oracle: {base_url: 'http://host/v1', model: m}\n").unwrap_err();
        assert!(err.contains("roles.oracle: unknown key `oracle` (expected one of extractor,"), "{err}");
        let err =
            with_roles("roles:\n  critic: {base_url: 'http://host/v1', model: m, timeout_secs: 0}\n").unwrap_err();
        assert!(err.contains("roles.critic.timeout_secs"), "{err}");
    }

    #[test]
    fn a_key_pasted_into_api_key_env_is_refused_without_echoing_it() {
        let err = with_roles("roles:\n  critic: {base_url: 'http://host/v1', model: m, api_key_env: sk-live-123}\n")
            .unwrap_err();
        assert!(err.contains("roles.critic.api_key_env: must be the name of an environment variable"), "{err}");
        assert!(!err.contains("sk-live-123"), "{err}");
    }

    #[test]
    fn the_judge_must_not_be_the_answerer_or_the_evolver() {
        let same = "roles:\n  answerer: {base_url: 'http://Host:8000/v1/', model: m}\n  judge: {base_url: 'http://host:8000/v1', model: m}\n";
        let err = with_roles(same).unwrap_err();
        assert!(err.contains("roles.judge: same endpoint and model as roles.answerer"), "{err}");
        let evolver = "roles:\n  evolver: {base_url: 'http://host/v1', model: m}\n  judge: {base_url: 'http://host/v1', model: m}\n";
        assert!(with_roles(evolver).unwrap_err().contains("roles.evolver"));
        let other_model = same.replace(
            "judge: {base_url: 'http://host:8000/v1', model: m}",
            "judge: {base_url: 'http://host:8000/v1', model: j}",
        );
        assert!(with_roles(&other_model).is_ok());
        let overridden = same.replace(
            "judge: {base_url: 'http://host:8000/v1', model: m}",
            "judge: {base_url: 'http://host:8000/v1', model: m, allow_shared_with_judge: true}",
        );
        assert!(with_roles(&overridden).is_ok());
        let misplaced = "roles:\n  answerer: {base_url: 'http://host/v1', model: m, allow_shared_with_judge: true}\n";
        assert!(with_roles(misplaced).unwrap_err().contains("only meaningful on roles.judge"));
        let no_judge =
            render_config("builtin", Path::new("s.yaml"), None, None).replace("judge: evidence", "judge: llm");
        assert!(parse_config(&no_judge).unwrap_err().contains("harness.judge: llm needs roles.judge"));
    }

    #[test]
    fn a_retired_key_is_refused_at_its_line_with_what_to_write() {
        let base = "harness:\n  tasks: builtin\ngates:\n";
        let err = parse_config(&format!("{base}  delta1: 0.1\n")).unwrap_err();
        assert_eq!(err, "line 4 column 3: gates.delta1: `delta1` is renamed: write `probe_drop_max`");
        let err = parse_config("harness:\n  tasks: builtin\nloop:\n  ucb_c: 2.5\n").unwrap_err();
        assert!(err.ends_with("loop.ucb_c: `ucb_c` is renamed: write `exploration`"), "{err}");
        let err = parse_config(&format!("{base}  holdout_budget: 20\n")).unwrap_err();
        assert!(err.contains("gates.holdout_budget: `holdout_budget` is no longer read: "), "{err}");
        assert!(err.ends_with("; delete it"), "{err}");
        // Every retired key is refused, each with its own reason, and the rest still counted.
        let all: String =
            RETIRED_KEYS.iter().filter(|(s, _, _)| *s == "gates").map(|(_, k, _)| format!("  {k}: 1\n")).collect();
        let err = parse_config(&format!("{base}{all}")).unwrap_err();
        assert!(err.contains("(and 7 more problems"), "{err}");
        assert_eq!(retired("gates", "probe_drop_max"), None);
        // The new names load.
        assert_eq!(parse_config(&format!("{base}  probe_drop_max: 0.1\n")).unwrap().gates.probe_drop_max, 0.1);
        // A file that is not YAML is left to the typed parse, which names the line.
        assert!(parse_config("harness: [\n").unwrap_err().starts_with("line "));
    }
}
