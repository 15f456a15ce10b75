//! The JSON Schema of emend.yaml (schemas/emend.schema.json, `emend_core::config::CONFIG_SCHEMA`):
//! a bad file is refused naming the key, the schema and the parser agree on the
//! ranges, and the schema's keys at every level are exactly the keys the parser
//! accepts (read from the parser's own errors, so a field added to a config
//! struct fails here until the schema has it). The files `emend init` writes and
//! the project ships, and the CLI's refusal of a retired key: the emend crate's
//! cli tests, config_schema.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use emend_core::config::{CONFIG_SCHEMA, parse_config, parse_config_typed, render_config};
use serde_json::{Value, json};

fn schema() -> Value {
    serde_json::from_str(CONFIG_SCHEMA).expect("the schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012).build(&schema()).expect("a valid JSON Schema")
}

/// emend.yaml as an editor's YAML language server checks it: the YAML document as JSON.
fn as_json(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("{e}: {yaml}"))
}

/// The schema's errors for a YAML text: (instance path, message).
fn schema_errors(v: &jsonschema::Validator, yaml: &str) -> Vec<(String, String)> {
    v.iter_errors(&as_json(yaml)).map(|e| (e.instance_path().as_str().to_string(), e.to_string())).collect()
}

/// The emend.yaml that `emend init DIR --tasks builtin` writes.
fn init_config() -> String {
    render_config("builtin", Path::new("strategies/served.yaml"), None, None)
}

#[test]
fn a_bad_file_is_refused_naming_the_key() {
    let v = validator();
    let base = init_config();
    let edit = |from: &str, to: &str| {
        assert!(base.contains(from), "{from}");
        base.replacen(from, to, 1)
    };
    // (edited file, instance path of the schema's error, what its message names, what the parser says)
    let cases = [
        // An unknown key under gates.
        (
            edit("  cluster_check: off\n", "  cluster_check: off\n  colour: red\n"),
            "/gates",
            "'colour'",
            "gates: unknown field `colour`",
        ),
        // A misspelled top-level key.
        (edit("\nloop:\n", "\nloops:\n"), "", "'loops'", "unknown field `loops`"),
        // A string where a number goes.
        (edit("  alpha: 0.05\n", "  alpha: high\n"), "/gates/alpha", "\"high\"", "gates.alpha: invalid type: string"),
        // An unknown role.
        (
            edit("roles: {}\n", "roles:\n  oracle: {base_url: 'http://localhost:8000/v1', model: m}\n"),
            "/roles",
            "'oracle'",
            "roles.oracle: unknown role",
        ),
    ];
    for (text, path, named, says) in cases {
        let parser = parse_config_typed(&text).expect_err("the parser refuses it too");
        assert!(parser.contains(says), "{parser}");
        let errors = schema_errors(&v, &text);
        assert!(
            errors.iter().any(|(p, m)| p == path && m.contains(named)),
            "expected an error at {path:?} naming {named}: {errors:?}"
        );
    }
}

/// (the settings appended to a minimal emend.yaml, whether emend accepts them)
const CASES: &[(&str, bool)] = &[
    ("", true),
    ("gates:\n", true),
    (
        "gates: {alpha: 0.5, probe_drop_max: 1, category_drop_max: 0, restore_below_best: 1, lord_initial_wealth: 1}\n",
        true,
    ),
    // The keys' old names still load (with a warning); both names of one key are refused.
    (
        "gates: {alpha: 0.5, probe_drop_max: 1, category_drop_max: 0, restore_below_best: 1, lord_initial_wealth: 1}\n",
        true,
    ),
    ("gates: {epsilon_c: 0}\n", false),
    ("gates: {tau_rollback: 1}\n", false),
    ("gates: {delta1: 0.1, probe_drop_max: 0.1}\n", false),
    ("gates: {epsilon_c: 0.1, category_drop_max: 0.1}\n", false),
    ("gates: {tau_rollback: 0.1, restore_below_best: 0.1}\n", false),
    ("gates: {lord_w0: 0.1, lord_initial_wealth: 0.1}\n", false),
    ("gates: {delta1: 1.5}\n", false),
    ("gates: {lord_w0: 0}\n", false),
    ("gates: {alpha: 1.0e-12}\n", true),
    ("gates: {alpha: 0.6}\n", false),
    ("gates: {alpha: 0}\n", false),
    ("gates: {probe_drop_max: 1.5}\n", false),
    ("gates: {category_drop_max: -0.1}\n", false),
    ("gates: {restore_below_best: 2}\n", false),
    ("gates: {lord_initial_wealth: 0}\n", false),
    ("gates: {lord_initial_wealth: 1.5}\n", false),
    ("gates: {cost_bound: 100, cost_bound_v1: 0}\n", true),
    ("gates: {cost_bound: null, cost_bound_v1: null}\n", true),
    ("gates: {cost_bound: -1}\n", false),
    ("gates: {cost_bound_v1: 101}\n", false),
    ("gates: {probe_size: 10, full_tests_per_round: 16, bootstrap_resamples: 100}\n", true),
    ("gates: {probe_size: 9}\n", false),
    ("gates: {full_tests_per_round: 0}\n", false),
    ("gates: {full_tests_per_round: 17}\n", false),
    ("gates: {bootstrap_resamples: 99}\n", false),
    ("gates: {bootstrap_resamples: 1000001}\n", false),
    ("gates: {cluster_check: require}\n", true),
    ("gates: {cluster_check: false}\n", true),
    ("search: {method: steps}\n", true),
    ("search: {method: rules}\n", true),
    ("search: {method: null}\n", true),
    ("search: {method: bounded}\n", false),
    ("gates: {step_bound: schema}\n", false),
    ("loop: {search: false}\n", false),
    ("gates: {cluster_check: maybe}\n", false),
    ("gates: {alpha_schedule: basel}\n", false),
    ("gates: {bootstrap_unit: conversation}\n", false),
    ("gates: {holdout_budget: 20}\n", false),
    ("gates: {delta1: 0.02}\n", false),
    ("loop: {rounds: 100000, candidates: 64, seed: 7, exploration: 100}\n", true),
    ("loop: {ucb_c: 1}\n", false),
    ("loop: {rounds: 0}\n", false),
    ("loop: {rounds: 100001}\n", false),
    ("loop: {candidates: 0}\n", false),
    ("loop: {candidates: 65}\n", false),
    ("loop: {exploration: 101}\n", false),
    ("loop: {seed: -1}\n", false),
    ("loop: {search: yes}\n", false),
    (
        "search: {race_level: 0.5, first_look: 1, stall: 1, converge: 1, prune_tolerance: 0, startup: 0, consensus: 0}\n",
        true,
    ),
    ("search: {race_level: 0.6}\n", false),
    ("search: {race_level: 0}\n", false),
    ("search: {first_look: 0}\n", false),
    ("search: {stall: 0}\n", false),
    ("search: {multivariate: true}\n", true),
    ("serve: {approval: manual}\n", true),
    ("serve: {approval: later}\n", false),
    ("serve: {approval: manual, max_pending: 3}\n", true),
    ("serve: {approval: manual, max_pending: 0}\n", false),
    ("serve: {approval: manual, max_pending: null}\n", true),
    ("serve: {approval: manual}\nhooks: {on_pending: [./notify.sh], on_served: [./reload.sh, --now]}\n", true),
    ("hooks: {on_pending: [./notify.sh]}\n", false),
    ("hooks: {on_served: []}\n", false),
    ("hooks: {on_served: [' ']}\n", false),
    ("hooks: {on_served: null, timeout: 1h 30m}\n", true),
    ("hooks: {timeout: 0.5s}\n", true),
    ("hooks: {timeout: 0s}\n", false),
    ("hooks: {timeout: -5s}\n", false),
    ("strategy: strategies/mine.yaml\n", true),
    ("strategy: /etc/served.yaml\n", false),
    ("strategy: ../served.yaml\n", false),
    ("strategy: a/../../served.yaml\n", false),
    ("strategy: ''\n", false),
    ("initial_strategy: strategies/default.yaml\n", true),
    ("roles: {}\n", true),
    ("roles:\n", true),
    (
        "roles:\n  judge: {base_url: ' http://a/b ', model: m, api_key_env: OPENAI_API_KEY, temperature: 2, max_tokens: 1, concurrency: 256, timeout_secs: 0.5, retries: 20, backoff_secs: 60, deadline_secs: 0.5}\n",
        true,
    ),
    ("roles:\n  judge: {base_url: 'https://a/', model: m}\n", true),
    ("roles:\n  judge: {base_url: 'http://a/', model: m}\n", false),
    ("roles:\n  judge: {base_url: 'ftp://host/v1', model: m}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: ' '}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1'}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, api_key_env: sk-live-123}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, api_key_env: 1KEY}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, temperature: 2.5}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, max_tokens: 0}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, concurrency: 0}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, concurrency: 257}\n", false),
    ("roles:\n  classifier: {base_url: 'http://host/v1', model: m, concurrency: 8}\n", true),
    ("roles:\n  critic: {base_url: 'http://host/v1', model: m, concurrency: 4}\n", false),
    ("roles:\n  evolver: {base_url: 'http://host/v1', model: m, concurrency: 1}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, timeout_secs: 0}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, retries: 21}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, backoff_secs: 61}\n", false),
    ("roles:\n  judge: {base_url: 'http://host/v1', model: m, allow_shared_with_judge: true}\n", true),
    ("roles:\n  answerer: {base_url: 'http://host/v1', model: m, allow_shared_with_judge: false}\n", true),
    ("roles:\n  answerer: {base_url: 'http://host/v1', model: m, allow_shared_with_judge: true}\n", false),
    ("roles:\n  answerer: {base_url: 'http://host/v1', model: m, redact: ['sk-[A-Za-z0-9]+']}\n", true),
    ("roles:\n  answerer: {base_url: 'http://host/v1', model: m, redact: ['']}\n", false),
    ("roles:\n  answerer: {base_url: 'http://host/v1', model: m, redact: 'sk-'}\n", false),
];

/// Settings under `harness:` (after `tasks: builtin`), and whether emend accepts them.
const HARNESS_CASES: &[(&str, bool)] = &[
    ("  kind: builtin\n  judge: f1\n  f1_threshold: 1\n  include_adversarial: true\n", true),
    ("  judge: F1\n", false),
    ("  kind: docker\n", false),
    ("  f1_threshold: 1.1\n", false),
    ("  budget_ceiling: -1\n", false),
    ("  conversations: [conv-26, conv-30]\n  schema: s.json\n  version: '3'\n  minilm_dir: m\n", true),
    ("  kind: command\n", false),
    ("  kind: command\n  command: null\n", false),
    (
        "  kind: command\n  command: {argv: [python3, a.py], workdir: w, env: {A: b}, timeout_secs: 5, shards: 2, concurrency: 2}\n",
        true,
    ),
    ("  kind: command\n  command: {workdir: w}\n", false),
    (
        "  executor: ray\n  ray: {address: 'ray://h:10001', python: python3, driver: d.py, emend: emend, shards: 3, concurrency: 1, timeout_secs: 60}\n",
        true,
    ),
    ("  executor: cluster\n", false),
    ("  max_dataset_mb: 1\n  stage_cache_mb: 0\n", true),
    ("  max_dataset_mb: 0\n", false),
    ("  split: {confirm_fraction: 0.99, seed: 3}\n", true),
    ("  split: {confirm_fraction: 1}\n", false),
    ("  split: {confirm_fraction: 0}\n", false),
    ("  protocol: replay\n  replay: {every_sessions: 2}\n", true),
    ("  protocol: replay\n  replay: {every_sessions: 0}\n", false),
    ("  protocol: replay\n  kind: command\n  command: {argv: [a]}\n", false),
    ("  protocol: replay\n  executor: ray\n", false),
    ("  protocol: longitudinal\n", false),
    ("  judge: llm\n", false),
];

#[test]
fn the_schema_and_the_parser_agree_on_what_loads() {
    let v = validator();
    let mut texts: Vec<(String, bool)> =
        CASES.iter().map(|(s, ok)| (format!("harness:\n  tasks: builtin\n{s}"), *ok)).collect();
    texts.extend(HARNESS_CASES.iter().map(|(s, ok)| (format!("harness:\n  tasks: builtin\n{s}"), *ok)));
    texts.push((
        "harness:\n  tasks: builtin\n  judge: llm\nroles:\n  judge: {base_url: 'http://host/v1', model: j}\n".into(),
        true,
    ));
    for (text, ok) in texts {
        let parsed = parse_config_typed(&text);
        assert_eq!(parsed.is_ok(), ok, "the parser on:\n{text}\n{parsed:?}");
        let checked = parse_config(&text);
        assert_eq!(checked.is_ok(), ok, "the full check (schema, then parser) on:\n{text}\n{checked:?}");
        let errors = schema_errors(&v, &text);
        assert_eq!(errors.is_empty(), ok, "the schema on:\n{text}\n{errors:?}");
    }
}

// ---- drift: the schema's keys are the parser's ----------------------------------------

const UNKNOWN: &str = "zz_unknown_key";

/// A configuration with every section and every role present (each role its own
/// model, so the judge is neither the answerer nor the evolver).
fn full() -> Value {
    let roles: serde_json::Map<String, Value> = emend_core::config::ROLE_NAMES
        .iter()
        .map(|r| (r.to_string(), json!({"base_url": "http://localhost:8000/v1", "model": r})))
        .collect();
    json!({
        "harness": {"tasks": "builtin", "command": {"argv": ["x"]}, "ray": {}, "split": {}, "replay": {}},
        "gates": {}, "loop": {}, "search": {}, "serve": {}, "hooks": {}, "cost": {},
        "roles": roles,
    })
}

/// `full()` with `value` at `path` (objects created on the way).
fn with_at(path: &[String], value: Value) -> Value {
    let mut doc = full();
    let mut node = &mut doc;
    for key in path {
        node = node.as_object_mut().unwrap().entry(key.clone()).or_insert_with(|| json!({}));
        if !node.is_object() {
            *node = json!({});
        }
    }
    *node = value;
    doc
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |node, key| node.get(key))
}

/// The parser's answer for a document (JSON is YAML).
fn parse(doc: &Value) -> Result<emend_core::config::ProjectConfig, String> {
    parse_config_typed(&serde_json::to_string(doc).unwrap())
}

/// The keys the parser accepts in the object at `path`: serde's "unknown field
/// `zz_unknown_key`, expected one of `a`, `b`" (or "expected `a` or `b`", "expected `a`")
/// for an extra key there. None when nothing there refuses an unknown key that way.
fn accepted_keys(path: &[String]) -> Option<BTreeSet<String>> {
    let mut object = match get(&full(), path) {
        Some(Value::Object(o)) => o.clone(),
        _ => serde_json::Map::new(),
    };
    object.insert(UNKNOWN.into(), json!(1));
    let object = Value::Object(object);
    let err = parse(&with_at(path, object)).err()?;
    let unknown = format!("unknown field `{UNKNOWN}`, expected ");
    let (before, after) = err.split_once(&unknown)?;
    // serde_yaml names the struct's path; at the root, nothing but the location.
    let named = if path.is_empty() {
        before.starts_with("line ") && before.matches(": ").count() == 1
    } else {
        before.ends_with(&format!(": {}: ", path.join(".")))
    };
    if !named {
        return None;
    }
    let list = after.split(" at line ").next().unwrap();
    Some(list.split('`').skip(1).step_by(2).map(str::to_string).collect())
}

/// The role names the parser accepts under `roles:`, from its "unknown role" error.
fn accepted_roles() -> BTreeSet<String> {
    let role = json!({"base_url": "http://localhost:8000/v1", "model": "m"});
    let err = parse(&with_at(&["roles".into(), UNKNOWN.into()], role)).unwrap_err();
    let list = err
        .split_once(&format!("roles.{UNKNOWN}: unknown role (expected one of "))
        .unwrap_or_else(|| panic!("{err}"))
        .1
        .trim_end_matches(')');
    list.split(", ").map(str::to_string).collect()
}

/// A schema node with its local `$ref` merged in (the node's own keywords win).
fn resolved(root: &Value, node: &Value) -> serde_json::Map<String, Value> {
    let mut out = match node.get("$ref").and_then(Value::as_str) {
        Some(r) => resolved(root, root.pointer(r.strip_prefix('#').unwrap()).unwrap_or_else(|| panic!("{r}"))),
        None => serde_json::Map::new(),
    };
    for (k, v) in node.as_object().unwrap() {
        match (k.as_str(), out.get_mut(k)) {
            // Properties declared beside a $ref add to (or narrow) the target's.
            ("properties", Some(Value::Object(props))) => {
                for (name, extra) in v.as_object().unwrap() {
                    match props.get_mut(name) {
                        Some(Value::Object(p)) => p.extend(extra.as_object().unwrap().clone()),
                        _ => {
                            props.insert(name.clone(), extra.clone());
                        }
                    }
                }
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out.remove("$ref");
    out
}

/// Every object level of the schema with `properties` (instance path -> node), not
/// looking into if/then (conditions, not declarations).
fn schema_levels(root: &Value) -> BTreeMap<Vec<String>, serde_json::Map<String, Value>> {
    fn walk(
        root: &Value,
        node: &Value,
        path: Vec<String>,
        out: &mut BTreeMap<Vec<String>, serde_json::Map<String, Value>>,
    ) {
        let node = resolved(root, node);
        let Some(props) = node.get("properties").and_then(Value::as_object) else { return };
        for (key, child) in props {
            let mut p = path.clone();
            p.push(key.clone());
            walk(root, child, p, out);
        }
        out.insert(path, node);
    }
    let mut out = BTreeMap::new();
    walk(root, root, Vec::new(), &mut out);
    out
}

fn keys(node: &serde_json::Map<String, Value>) -> BTreeSet<String> {
    node["properties"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn the_schema_declares_exactly_the_keys_the_parser_accepts_at_every_level() {
    let root = schema();
    let levels = schema_levels(&root);
    // The parser's object levels: from the root, every key whose value refuses an
    // unknown key is a struct of its own; `roles` is a map keyed by role name.
    let mut parser: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let roles = accepted_roles();
    todo.extend(roles.iter().map(|r| vec!["roles".to_string(), r.clone()]));
    while let Some(path) = todo.pop() {
        let accepted = accepted_keys(&path).unwrap_or_else(|| panic!("{path:?}: no unknown-field error"));
        for key in &accepted {
            let mut child = path.clone();
            child.push(key.clone());
            if accepted_keys(&child).is_some() {
                todo.push(child);
            }
        }
        parser.insert(path, accepted);
    }
    // Every struct the parser has: there, the schema has the same keys and refuses others.
    for (path, accepted) in &parser {
        let node = levels.get(path).unwrap_or_else(|| panic!("the schema has no object at {path:?}"));
        assert_eq!(&keys(node), accepted, "keys at {path:?}");
        assert_eq!(node.get("additionalProperties"), Some(&json!(false)), "{path:?}");
    }
    // `roles`: the six role names and nothing else.
    let node = &levels[&vec!["roles".to_string()]];
    assert_eq!(keys(node), roles);
    assert_eq!(roles.len(), 6, "{roles:?}");
    assert_eq!(node.get("additionalProperties"), Some(&json!(false)));
    // And the schema has no object level the parser lacks.
    let mut expected: BTreeSet<Vec<String>> = parser.keys().cloned().collect();
    expected.insert(vec!["roles".into()]);
    assert_eq!(levels.keys().cloned().collect::<BTreeSet<_>>(), expected);
    // Which is every struct of the configuration.
    let dotted: BTreeSet<String> = parser.keys().map(|p| p.join(".")).collect();
    let mut structs: BTreeSet<String> = [
        "",
        "harness",
        "harness.command",
        "harness.ray",
        "harness.split",
        "harness.replay",
        "gates",
        "loop",
        "search",
        "serve",
        "hooks",
        "journal",
        "cost",
    ]
    .map(String::from)
    .into();
    structs.extend(emend_core::config::ROLE_NAMES.map(|r| format!("roles.{r}")));
    assert_eq!(dotted, structs);
}

/// Numbers compare by value (`1` and `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[test]
fn every_default_in_the_schema_is_the_parsers() {
    let minimal = serde_json::to_value(parse_config("harness:\n  tasks: builtin\n").unwrap()).unwrap();
    let full = serde_json::to_value(parse(&full()).unwrap()).unwrap();
    for (path, node) in schema_levels(&schema()) {
        // A level absent from the minimal configuration (harness.command, roles.*) has
        // its defaults in the full one.
        let loaded = match get(&minimal, &path) {
            Some(v @ Value::Object(_)) => v,
            _ => get(&full, &path).unwrap_or_else(|| panic!("{path:?}")),
        };
        let required: BTreeSet<&str> =
            node.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        for (key, prop) in node["properties"].as_object().unwrap() {
            let prop = resolved(&schema(), prop);
            assert!(prop.get("deprecated").is_none(), "{path:?}.{key}: a retired key is refused, not declared");
            match prop.get("default") {
                Some(d) => {
                    assert!(same(d, &loaded[key]), "{path:?}.{key}: schema {d}, parser {}", loaded[key])
                }
                // A section's defaults are its keys'.
                None => assert!(
                    required.contains(key.as_str()) || prop.contains_key("properties"),
                    "{path:?}.{key}: an optional key without a default"
                ),
            }
        }
    }
}

// ---- retired keys ---------------------------------------------------------------------

#[test]
fn emend_init_writes_no_retired_key() {
    let text = init_config();
    for (section, key, _) in emend_core::config::RETIRED_KEYS {
        assert!(!text.contains(&format!("\n  {key}: ")), "{section}.{key} written:\n{text}");
    }
}
