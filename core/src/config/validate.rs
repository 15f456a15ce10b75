//! Range and consistency checks of a parsed `emend.yaml`, each problem
//! naming its key: every section's settings, the model roles (and that the
//! judge is neither the answerer nor the evolver), and the bounds `--rounds`
//! and `--candidates` share with `loop:`.

use std::collections::BTreeMap;
use std::path::Path;

use super::types::*;

/// Checks every role's settings and that the judge is neither the answerer
/// nor the evolver.
pub fn check_roles(roles: &BTreeMap<String, RoleConfig>) -> Result<(), String> {
    for (name, r) in roles {
        if !ROLE_NAMES.contains(&name.as_str()) {
            return Err(format!("roles.{name}: unknown role (expected one of {})", ROLE_NAMES.join(", ")));
        }
        let field = |f: &str| format!("roles.{name}.{f}");
        let url = r.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
            return Err(format!("{}: expected an http:// or https:// URL", field("base_url")));
        }
        if r.model.trim().is_empty() {
            return Err(format!("{}: must not be empty", field("model")));
        }
        if let Some(var) = &r.api_key_env {
            let valid = !var.is_empty()
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            // Never echo the value: a key pasted here by mistake must not reach a log.
            if !valid {
                return Err(format!(
                    "{}: must be the name of an environment variable (letters, digits, underscores), not the key itself",
                    field("api_key_env")
                ));
            }
        }
        if !(r.temperature.is_finite() && (0.0..=2.0).contains(&r.temperature)) {
            return Err(format!("{}: must be between 0 and 2, got {}", field("temperature"), r.temperature));
        }
        if r.max_tokens == 0 {
            return Err(format!("{}: must be at least 1", field("max_tokens")));
        }
        if let Some(c) = r.concurrency {
            if ONE_AT_A_TIME.contains(&name.as_str()) {
                let many: Vec<&str> = ROLE_NAMES.into_iter().filter(|r| !ONE_AT_A_TIME.contains(r)).collect();
                return Err(format!(
                    "{}: emend asks the {name} one call at a time, so this bound never binds; delete it \
                     (it bounds the roles asked many at once: {})",
                    field("concurrency"),
                    many.join(", ")
                ));
            }
            if !(1..=256).contains(&c) {
                return Err(format!("{}: must be between 1 and 256, got {c}", field("concurrency")));
            }
        }
        if !(r.timeout_secs.is_finite() && r.timeout_secs > 0.0) {
            return Err(format!("{}: must be a positive number of seconds", field("timeout_secs")));
        }
        if r.retries > 20 {
            return Err(format!("{}: must be at most 20, got {}", field("retries"), r.retries));
        }
        if !(r.backoff_secs.is_finite() && (0.0..=60.0).contains(&r.backoff_secs)) {
            return Err(format!("{}: must be between 0 and 60 seconds", field("backoff_secs")));
        }
        if !(r.deadline_secs.is_finite() && r.deadline_secs >= r.timeout_secs) {
            return Err(format!(
                "{}: must be at least timeout_secs ({}), got {}",
                field("deadline_secs"),
                r.timeout_secs,
                r.deadline_secs
            ));
        }
        for (i, pattern) in r.redact.iter().enumerate() {
            if pattern.is_empty() {
                return Err(format!("{}[{i}]: must not be empty", field("redact")));
            }
            if let Err(e) = regex::Regex::new(pattern) {
                let first = e.to_string().lines().last().unwrap_or("").trim().to_string();
                return Err(format!("{}[{i}]: not a regular expression ({first})", field("redact")));
            }
        }
        if r.allow_shared_with_judge && name != "judge" {
            return Err(format!("{}: only meaningful on roles.judge", field("allow_shared_with_judge")));
        }
    }
    if let Some(judge) = roles.get("judge")
        && !judge.allow_shared_with_judge
    {
        for other in ["answerer", "evolver"] {
            if let Some(o) = roles.get(other)
                && o.endpoint() == judge.endpoint()
                && o.model.trim() == judge.model.trim()
            {
                return Err(format!(
                    "roles.judge: same endpoint and model as roles.{other} ({} {}); the component that \
                     answers or proposes must never judge. Configure another judge model, or set \
                     roles.judge.allow_shared_with_judge: true to accept the risk",
                    judge.endpoint(),
                    judge.model.trim()
                ));
            }
        }
    }
    Ok(())
}

/// Largest `emend.yaml` accepted (the generated one is about 4 KB).
pub const MAX_CONFIG_BYTES: u64 = 256 * 1024;

/// Largest `loop.candidates` and `--candidates`.
pub const MAX_CANDIDATES: usize = 64;

/// Largest `loop.rounds` and `--rounds`.
pub const MAX_ROUNDS: u32 = 100_000;

/// `--candidates` / `loop.candidates` within 1..=MAX_CANDIDATES.
pub fn check_candidates(name: &str, n: usize) -> Result<(), String> {
    if n == 0 || n > MAX_CANDIDATES {
        return Err(format!("{name}: must be between 1 and {MAX_CANDIDATES}, got {n}"));
    }
    Ok(())
}

/// `--rounds` / `loop.rounds` within 1..=MAX_ROUNDS.
pub fn check_rounds(name: &str, n: u32) -> Result<(), String> {
    if n == 0 || n > MAX_ROUNDS {
        return Err(format!("{name}: must be between 1 and {MAX_ROUNDS}, got {n}"));
    }
    Ok(())
}

/// A path emend writes to, from the configuration: relative, and inside the project.
fn check_inside(name: &str, p: &Path) -> Result<(), String> {
    use std::path::Component;
    let outside = p.components().any(|c| matches!(c, Component::ParentDir | Component::RootDir | Component::Prefix(_)));
    if outside || p.as_os_str().is_empty() {
        return Err(format!(
            "{name}: {} must be a relative path inside the project directory (emend writes to it)",
            p.display()
        ));
    }
    Ok(())
}

/// `v` within `lo..=hi`, or an error naming `name`.
fn frac(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(format!("{name}: must be between {lo} and {hi}, got {v}"))
    }
}

/// `journal.expect_head` is a hash as `emend journal head` prints it.
fn check_expect_head(journal: &JournalConfig) -> Result<(), String> {
    match &journal.expect_head {
        Some(got) if !(got.len() == 64 && got.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))) => {
            Err(format!(
                "journal.expect_head: expected 64 lowercase hex digits (a hash `emend journal head` printed), got {got:?}"
            ))
        }
        _ => Ok(()),
    }
}

/// The problems of a parsed configuration, section by section: every one,
/// not only the first, each naming its key first (`gates.alpha: ...`).
pub(super) fn problems(config: &ProjectConfig) -> Vec<String> {
    let mut out = Problems::default();
    out.check(check_expect_head(&config.journal));
    check_gates(&config.gates, &mut out);
    check_search(&config.search, config.harness.protocol, &mut out);
    out.check(check_candidates("loop.candidates", config.loop_.candidates));
    out.check(check_rounds("loop.rounds", config.loop_.rounds));
    out.check(check_inside("strategy", &config.strategy));
    out.check(frac("loop.exploration", config.loop_.exploration, 0.0, 100.0));
    check_harness(&config.harness, &mut out);
    // Each role on its own first (every role's problem), then the roles together.
    let mut roles_ok = true;
    for (name, role) in &config.roles {
        if let Err(e) = check_roles(&BTreeMap::from([(name.clone(), role.clone())])) {
            roles_ok = false;
            out.push(e);
        }
    }
    if roles_ok {
        out.check(check_roles(&config.roles));
    }
    check_serving(config, &mut out);
    check_cost(config, &mut out);
    if config.harness.judge == JudgeKind::Llm && !config.roles.contains_key("judge") {
        out.push("harness.judge: llm needs roles.judge (an OpenAI-compatible endpoint and model)");
    }
    out.0
}

/// The problems found so far.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn push(&mut self, message: impl Into<String>) {
        self.0.push(message.into());
    }

    fn check(&mut self, result: Result<(), String>) {
        if let Err(e) = result {
            self.0.push(e);
        }
    }
}

/// `gates:`.
fn check_gates(g: &GateConfig, out: &mut Problems) {
    out.check(frac("gates.probe_drop_max", g.probe_drop_max, 0.0, 1.0));
    out.check(frac("gates.alpha", g.alpha, 1e-12, 0.5));
    out.check(frac("gates.category_drop_max", g.category_drop_max, 0.0, 1.0));
    out.check(frac("gates.restore_below_best", g.restore_below_best, 0.0, 1.0));
    if let Some(c) = g.cost_bound {
        out.check(frac("gates.cost_bound", c, 0.0, 100.0));
    }
    if let Some(c) = g.cost_bound_v1 {
        out.check(frac("gates.cost_bound_v1", c, 0.0, 100.0));
    }
    if !(g.lord_initial_wealth > 0.0 && g.lord_initial_wealth <= 1.0) {
        out.push(format!(
            "gates.lord_initial_wealth: must be in (0, 1] (a share of alpha), got {}",
            g.lord_initial_wealth
        ));
    }
    if g.full_tests_per_round == 0 || g.full_tests_per_round > 16 {
        out.push(format!("gates.full_tests_per_round: must be between 1 and 16, got {}", g.full_tests_per_round));
    }
    if g.probe_size < 10 {
        out.push(format!("gates.probe_size: must be at least 10, got {}", g.probe_size));
    }
    if !(100..=1_000_000).contains(&g.bootstrap_resamples) {
        out.push(format!("gates.bootstrap_resamples: must be between 100 and 1000000, got {}", g.bootstrap_resamples));
    }
}

/// `cost:`: a price in range; a price
/// needs context tokens, which longitudinal replay's probes do not pair.
fn check_cost(config: &ProjectConfig, out: &mut Problems) {
    let c = &config.cost;
    if let Some(p) = c.per_1k_tokens {
        out.check(frac("cost.per_1k_tokens", p, 0.0, 100.0));
    }
    if let Some(m) = c.noninferiority_margin
        && !(m.is_finite() && m > 0.0 && m <= 0.5)
    {
        out.push(format!("cost.noninferiority_margin: must be in (0, 0.5] (a fraction of accuracy), got {m}"));
    }
    if !(c.min_saving.is_finite() && c.min_saving > 0.0 && c.min_saving < 1.0) {
        out.push(format!("cost.min_saving: must be strictly between 0 and 1, got {}", c.min_saving));
    }
    let priced = c.price_per_token().is_some() || c.noninferiority_margin.is_some();
    if priced && config.harness.protocol == ProtocolChoice::Replay {
        out.push("cost: a price or a cheaper step needs the endpoint protocol (harness.protocol is replay)");
    }
}

/// `search:`.
fn check_search(s: &SearchConfig, protocol: ProtocolChoice, out: &mut Problems) {
    if let Some(m @ (SearchMethod::Jump | SearchMethod::Steps)) = s.method
        && protocol == ProtocolChoice::Replay
    {
        out.push(format!(
            "search.method: {} needs harness.protocol: endpoint; replay runs `rules` (write it, or delete the key)",
            m.as_str()
        ));
    }
    out.check(frac("search.race_level", s.race_level, 1e-6, 0.5));
    if s.first_look == 0 || s.stall == 0 || s.converge < s.stall {
        out.push(format!(
            "search: first_look and stall must be at least 1 and converge at least stall, got {}, {}, {}",
            s.first_look, s.stall, s.converge
        ));
    }
}

/// `harness:`.
fn check_harness(h: &HarnessConfig, out: &mut Problems) {
    let f = h.split.confirm_fraction;
    if !(f.is_finite() && f > 0.0 && f < 1.0) {
        out.push(format!("harness.split.confirm_fraction: must be strictly between 0 and 1, got {f}"));
    }
    out.check(frac("harness.f1_threshold", h.f1_threshold, 0.0, 1.0));
    if h.max_dataset_mb == 0 {
        out.push("harness.max_dataset_mb: must be at least 1");
    }
    if h.replay.every_sessions == 0 {
        out.push("harness.replay.every_sessions: must be at least 1");
    }
    if h.protocol == ProtocolChoice::Replay && h.kind == HarnessKind::Command {
        out.push("harness.protocol: replay runs on the built-in harness only (harness.kind is command)");
    }
    if h.protocol == ProtocolChoice::Replay && h.executor == ExecutorChoice::Ray {
        out.push("harness.protocol: replay runs in process only (harness.executor is ray)");
    }
    if h.kind == HarnessKind::Command && h.command.is_none() {
        out.push("harness.command: required when harness.kind is command");
    }
}

/// `hooks:` and `serve:`.
fn check_serving(config: &ProjectConfig, out: &mut Problems) {
    for (name, argv) in [("hooks.on_served", &config.hooks.on_served), ("hooks.on_pending", &config.hooks.on_pending)] {
        if let Some(argv) = argv
            && argv.first().is_none_or(|p| p.trim().is_empty())
        {
            out.push(format!("{name}: expected an argv list whose first item is the program, e.g. [\"./notify.sh\"]"));
        }
    }
    if config.serve.max_pending == Some(0) {
        out.push("serve.max_pending: must be at least 1 (or null: no cap)");
    }
    if config.hooks.on_pending.is_some() && config.serve.approval == Approval::Auto {
        out.push("hooks.on_pending: only runs with serve.approval: manual (no version is ever pending in auto)");
    }
}
