//! The project: `emend.yaml` (what to evaluate, the gates' thresholds, the
//! loop's settings, model roles) and where its files live. Every command
//! finds the project from the current directory upwards, or `--project DIR`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::stats::{AlphaSchedule, BootstrapUnit};

pub const CONFIG_FILE: &str = "emend.yaml";
/// The JSON Schema of `emend.yaml` (schemas/emend.schema.json), for editors;
/// [`parse_config`] is authoritative.
pub const CONFIG_SCHEMA: &str = include_str!("../../schemas/emend.schema.json");
/// Where `emend init` writes [`CONFIG_SCHEMA`], relative to the project
/// directory; the first line of the emend.yaml it writes names it.
pub const CONFIG_SCHEMA_FILE: &str = "schema/emend.schema.json";
/// The journal and caches, inside the project directory.
pub const STATE_DIR: &str = ".emend";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessKind {
    Builtin,
    Command,
}

/// `harness.judge`: the harness's judge type.
pub use harness::strategy::JudgeKind;

/// An external harness: a command emend runs per task shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandHarness {
    /// argv; `{strategy}`, `{tasks}` and `{out}` are replaced by file paths.
    pub argv: Vec<String>,
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default = "default_command_timeout")]
    pub timeout_secs: f64,
    #[serde(default = "default_shards")]
    pub shards: usize,
    #[serde(default = "default_shards")]
    pub concurrency: usize,
}

fn default_command_timeout() -> f64 {
    600.0
}
fn default_shards() -> usize {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessConfig {
    #[serde(default = "default_kind")]
    pub kind: HarnessKind,
    /// `builtin` (the embedded synthetic dataset) or a LoCoMo-format JSON file.
    pub tasks: String,
    /// Only these conversations (sample ids) form the task set.
    #[serde(default)]
    pub conversations: Option<Vec<String>>,
    #[serde(default)]
    pub include_adversarial: bool,
    #[serde(default = "default_judge")]
    pub judge: JudgeKind,
    #[serde(default = "default_f1")]
    pub f1_threshold: f64,
    /// Locked context-token ceiling no strategy may exceed.
    #[serde(default = "default_ceiling")]
    pub budget_ceiling: u32,
    /// The strategy schema; the built-in one when absent.
    #[serde(default)]
    pub schema: Option<PathBuf>,
    /// Part of the harness hash: change it when the evaluated system changes.
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub command: Option<CommandHarness>,
    /// Where evaluation shards run: local processes, or tasks on a Ray cluster.
    #[serde(default)]
    pub executor: ExecutorChoice,
    /// The Ray cluster and its driver (`executor: ray`).
    #[serde(default)]
    pub ray: RayConfig,
    /// Size bound of the persistent stage cache (`.emend/cache/stages/`), MiB; 0 turns it off.
    #[serde(default = "default_stage_cache_mb")]
    pub stage_cache_mb: u64,
    /// Largest task set file read, in MB (default 64): a guard against a wrong path
    /// pointing at something huge.
    #[serde(default = "default_max_dataset_mb")]
    pub max_dataset_mb: u64,
    /// The seeded search/confirm split of the task set.
    #[serde(default)]
    pub split: SplitConfig,
    /// `endpoint` (ingest everything, ask every question once) or `replay`
    /// (longitudinal: a checkpoint every `replay.every_sessions` sessions).
    #[serde(default)]
    pub protocol: ProtocolChoice,
    #[serde(default)]
    pub replay: ReplayConfig,
    /// The all-MiniLM-L6-v2 model directory (`index.dense_kind: minilm`),
    /// relative to emend.yaml; the `EMEND_MINILM_DIR` variable wins over it.
    #[serde(default)]
    pub minilm_dir: Option<PathBuf>,
}

/// `harness.protocol`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolChoice {
    #[default]
    Endpoint,
    Replay,
}

/// `harness.replay`: the checkpoints of longitudinal replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// A checkpoint after every this many sessions (and after the last one).
    #[serde(default = "d_every_sessions")]
    pub every_sessions: u32,
}

fn d_every_sessions() -> u32 {
    1
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig { every_sessions: d_every_sessions() }
    }
}

fn default_max_dataset_mb() -> u64 {
    harness::dataset::DEFAULT_MAX_DATASET_BYTES / (1024 * 1024)
}

impl HarnessConfig {
    /// The evaluation protocol the harness runs.
    pub fn protocol(&self) -> harness::Protocol {
        match self.protocol {
            ProtocolChoice::Endpoint => harness::Protocol::Endpoint,
            ProtocolChoice::Replay => harness::Protocol::Replay { every_sessions: self.replay.every_sessions },
        }
    }

    /// [`HarnessConfig::max_dataset_mb`] in bytes.
    pub fn max_dataset_bytes(&self) -> u64 {
        self.max_dataset_mb.saturating_mul(1024 * 1024)
    }
}

fn default_stage_cache_mb() -> u64 {
    1024
}

/// Where evaluation shards run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorChoice {
    #[default]
    Local,
    Ray,
}

/// `harness.ray`: how emend reaches a Ray cluster (docs/external-harness.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RayConfig {
    /// The cluster (`ray://host:10001` or `host:6379`); null: the `RAY_ADDRESS` variable.
    #[serde(default)]
    pub address: Option<String>,
    /// The Python that runs the driver (`emend_ray`, installed from examples/ray).
    #[serde(default = "default_python")]
    pub python: String,
    /// The driver script; null: the installed module (`python -m emend_ray`).
    #[serde(default)]
    pub driver: Option<PathBuf>,
    /// The `emend` program on the workers, for the built-in pipeline; null: this executable's path.
    #[serde(default)]
    pub emend: Option<String>,
    /// The built-in pipeline's shards, how many run at once, and each one's
    /// timeout (a command harness uses `harness.command`'s).
    #[serde(default = "default_ray_shards")]
    pub shards: usize,
    #[serde(default = "default_ray_shards")]
    pub concurrency: usize,
    #[serde(default = "default_ray_timeout")]
    pub timeout_secs: f64,
}

impl Default for RayConfig {
    fn default() -> Self {
        RayConfig {
            address: None,
            python: default_python(),
            driver: None,
            emend: None,
            shards: default_ray_shards(),
            concurrency: default_ray_shards(),
            timeout_secs: default_ray_timeout(),
        }
    }
}

fn default_ray_shards() -> usize {
    2
}
fn default_ray_timeout() -> f64 {
    600.0
}

fn default_python() -> String {
    "python3".into()
}

fn default_kind() -> HarnessKind {
    HarnessKind::Builtin
}
fn default_judge() -> JudgeKind {
    JudgeKind::Evidence
}
fn default_f1() -> f64 {
    0.5
}
fn default_ceiling() -> u32 {
    2000
}

/// `harness.split`: which share of every (conversation, category) stratum
/// goes to the confirm part, which only the Stage-2 test reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitConfig {
    #[serde(default = "d_confirm_fraction")]
    pub confirm_fraction: f64,
    #[serde(default)]
    pub seed: u64,
}

fn d_confirm_fraction() -> f64 {
    0.5
}

impl Default for SplitConfig {
    fn default() -> Self {
        SplitConfig { confirm_fraction: d_confirm_fraction(), seed: 0 }
    }
}

/// `gates.cluster_check`: the CR2 check by conversation (Bell-McCaffrey degrees of freedom), recorded
/// in every confirm test's gate record; `require` makes it a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ClusterMode {
    #[default]
    Off,
    Require,
}

/// `off` or `require`; YAML 1.1 tools (PyYAML) write `off` back as `false`,
/// which is read as `off`.
impl<'de> Deserialize<'de> for ClusterMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(if off_or(d, "gates.cluster_check", "require")? { ClusterMode::Require } else { ClusterMode::Off })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Stage-1 probe: reject when accuracy falls more than this below the served strategy.
    #[serde(default = "d_delta1")]
    pub delta1: f64,
    /// The run's significance level for the full paired test.
    #[serde(default = "d_alpha")]
    pub alpha: f64,
    /// Loadable for old emend.yaml files; no longer used by the gate (LORD++ spends alpha).
    #[serde(default = "d_schedule")]
    pub alpha_schedule: AlphaSchedule,
    /// Largest accuracy drop tolerated in any category.
    #[serde(default = "d_epsilon")]
    pub epsilon_c: f64,
    /// Best-ever auto-restore: served more than this below the best-ever score.
    #[serde(default = "d_tau")]
    pub tau_rollback: f64,
    /// Whether a candidate's numbers must stay within one `x-max-delta` of
    /// the served strategy: `off` (the default: anywhere inside the legal
    /// ranges and invariants) or `schema` (the conservative mode).
    #[serde(default)]
    pub step_bound: StepBound,
    /// Largest relative growth of mean context tokens in one accepted step; null (the default) disables.
    #[serde(default = "d_cost")]
    pub cost_bound: Option<f64>,
    /// Largest relative growth of mean context tokens against v1; null disables.
    #[serde(default)]
    pub cost_bound_v1: Option<f64>,
    #[serde(default = "d_probe")]
    pub probe_size: usize,
    /// Candidates of a round that may reach the confirm test (the best probes),
    /// fixed before the probe runs; each is one LORD++ test.
    #[serde(default = "d_full_tests")]
    pub full_tests_per_round: usize,
    #[serde(default = "d_resamples")]
    pub bootstrap_resamples: usize,
    /// Loadable for old emend.yaml files; no longer used by the gate (the exact test is).
    #[serde(default = "d_unit")]
    pub bootstrap_unit: BootstrapUnit,
    #[serde(default)]
    pub cluster_check: ClusterMode,
    /// LORD++ initial wealth as a share of alpha (W0 = lord_w0 * alpha).
    #[serde(default = "d_w0")]
    pub lord_w0: f64,
    /// No longer used: nothing measured on the confirm part flows back into
    /// the search, so there is no Thresholdout budget to spend. Still loads
    /// from older emend.yaml files.
    #[serde(default = "d_holdout_budget")]
    pub holdout_budget: u32,
}

fn d_w0() -> f64 {
    0.5
}
fn d_holdout_budget() -> u32 {
    20
}

fn d_delta1() -> f64 {
    0.02
}
fn d_alpha() -> f64 {
    0.05
}
fn d_schedule() -> AlphaSchedule {
    AlphaSchedule::Basel
}
fn d_epsilon() -> f64 {
    0.02
}
fn d_tau() -> f64 {
    0.03
}
fn d_cost() -> Option<f64> {
    None
}

/// `gates.step_bound`: how far one candidate may move from the served strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepBound {
    /// Anywhere inside the schema's ranges and invariants: the global search.
    #[default]
    Off,
    /// Every number within its `x-max-delta` of the served value: the bounded
    /// steps of the conservative mode (with the step search proposer).
    Schema,
}

/// `off` or `schema`; YAML 1.1 tools (PyYAML) write `off` back as `false`,
/// which is read as `off`.
impl<'de> Deserialize<'de> for StepBound {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(if off_or(d, "gates.step_bound", "schema")? { StepBound::Schema } else { StepBound::Off })
    }
}

/// Reads `off` or `other`, true for `other`; YAML 1.1's `false` is `off`,
/// `true` and any other text are refused naming `field`.
fn off_or<'de, D: serde::Deserializer<'de>>(d: D, field: &str, other: &str) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bool(bool),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Bool(false) => Ok(false),
        Raw::Text(t) if t == "off" => Ok(false),
        Raw::Text(t) if t == other => Ok(true),
        Raw::Bool(true) => Err(serde::de::Error::custom(format!("{field}: expected off or {other}, got true"))),
        Raw::Text(t) => {
            Err(serde::de::Error::custom(format!("{field}: expected off or {other}, got {text:?}", text = t)))
        }
    }
}

/// `search:`, the global search proposer (`gates.step_bound: off`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Racing: a trial is dropped at a look once the one-sided exact test says,
    /// at this level, that it is worse than the incumbent on the questions so far.
    #[serde(default = "d_race_level")]
    pub race_level: f64,
    /// Questions of the race's first look (then doubling up to the whole search part).
    #[serde(default = "d_first_look")]
    pub first_look: usize,
    /// Pruning: a changed field goes back to its served value when that costs
    /// at most this many questions of the search part.
    #[serde(default = "d_prune_tolerance")]
    pub prune_tolerance: usize,
    /// Trials in a row without a new best after which a search proposes its best.
    #[serde(default = "d_stall")]
    pub stall: usize,
    /// Trials in a row none better than the served strategy after which the
    /// search has converged and the run stops (`stopped: converged`).
    #[serde(default = "d_converge")]
    pub converge: usize,
    /// Random trials before the sampler models the history.
    #[serde(default = "d_startup")]
    pub startup: usize,
    /// A joint (multivariate) TPE model of the fields instead of one per field.
    #[serde(default)]
    pub multivariate: bool,
    /// Before pruning, the consensus of this many best strategies (per field
    /// their median or commonest value) replaces the best one when it is not
    /// significantly worse on the search part; 0 turns it off.
    #[serde(default = "d_consensus")]
    pub consensus: usize,
}

fn d_consensus() -> usize {
    8
}

fn d_race_level() -> f64 {
    0.05
}
fn d_first_look() -> usize {
    24
}
fn d_prune_tolerance() -> usize {
    1
}
fn d_stall() -> usize {
    40
}
fn d_converge() -> usize {
    80
}
fn d_startup() -> usize {
    10
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            race_level: d_race_level(),
            first_look: d_first_look(),
            prune_tolerance: d_prune_tolerance(),
            stall: d_stall(),
            converge: d_converge(),
            startup: d_startup(),
            multivariate: false,
            consensus: d_consensus(),
        }
    }
}
fn d_probe() -> usize {
    100
}
fn d_full_tests() -> usize {
    1
}
fn d_resamples() -> usize {
    10_000
}
fn d_unit() -> BootstrapUnit {
    BootstrapUnit::Conversation
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            delta1: d_delta1(),
            alpha: d_alpha(),
            alpha_schedule: d_schedule(),
            epsilon_c: d_epsilon(),
            tau_rollback: d_tau(),
            step_bound: StepBound::Off,
            cost_bound: d_cost(),
            cost_bound_v1: None,
            probe_size: d_probe(),
            full_tests_per_round: d_full_tests(),
            bootstrap_resamples: d_resamples(),
            bootstrap_unit: d_unit(),
            cluster_check: ClusterMode::Off,
            lord_w0: d_w0(),
            holdout_budget: d_holdout_budget(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopConfig {
    #[serde(default = "d_rounds")]
    pub rounds: u32,
    #[serde(default = "d_candidates")]
    pub candidates: usize,
    #[serde(default)]
    pub seed: u64,
    #[serde(default = "d_ucb")]
    pub ucb_c: f64,
    /// The search proposer (many multi-field candidates screened by
    /// successive halving on the search part; endpoint protocol only). On by
    /// default; false: the rule evolver's one-field moves.
    #[serde(default = "d_search")]
    pub search: bool,
}

fn d_search() -> bool {
    true
}

fn d_rounds() -> u32 {
    20
}
fn d_candidates() -> usize {
    4
}
fn d_ucb() -> f64 {
    1.0
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig { rounds: d_rounds(), candidates: d_candidates(), seed: 0, ucb_c: d_ucb(), search: d_search() }
    }
}

/// The model roles emend knows. Each is configured separately, so the
/// component that proposes a change never judges it.
pub const ROLE_NAMES: [&str; 6] = ["extractor", "answerer", "judge", "critic", "evolver", "classifier"];

/// One model role: an OpenAI-compatible endpoint and model, and how emend
/// calls it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// The API base, e.g. `http://localhost:8000/v1` (requests go to `{base_url}/chat/completions`).
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub temperature: f64,
    /// Largest completion, in tokens.
    #[serde(default = "d_max_tokens")]
    pub max_tokens: u32,
    /// Requests of this role in flight at once.
    #[serde(default = "d_role_concurrency")]
    pub concurrency: usize,
    /// Seconds one request may take.
    #[serde(default = "d_role_timeout")]
    pub timeout_secs: f64,
    /// Retries of one call on 429, 5xx, timeouts and connection errors.
    #[serde(default = "d_role_retries")]
    pub retries: u32,
    /// First backoff in seconds; it doubles per retry (with jitter) unless the server sends Retry-After.
    #[serde(default = "d_role_backoff")]
    pub backoff_secs: f64,
    /// Seconds one call may take in all, retries and waits included.
    #[serde(default = "d_role_deadline")]
    pub deadline_secs: f64,
    /// On `roles.judge` only: allow the judge to share endpoint and model with
    /// the answerer or the evolver (normally a configuration error).
    #[serde(default)]
    pub allow_shared_with_judge: bool,
    /// Regular expressions whose matches in a reply are replaced by `[redacted]`
    /// before it is cached, journaled or logged (the key itself, `Authorization`
    /// and `api-key` values always are).
    #[serde(default)]
    pub redact: Vec<String>,
}

fn d_max_tokens() -> u32 {
    512
}
fn d_role_concurrency() -> usize {
    4
}
fn d_role_timeout() -> f64 {
    60.0
}
fn d_role_retries() -> u32 {
    4
}
fn d_role_backoff() -> f64 {
    0.5
}
fn d_role_deadline() -> f64 {
    300.0
}

impl RoleConfig {
    /// A role with every optional setting at its default.
    pub fn new(base_url: &str, model: &str) -> RoleConfig {
        RoleConfig {
            base_url: base_url.to_string(),
            model: model.to_string(),
            api_key_env: None,
            temperature: 0.0,
            max_tokens: d_max_tokens(),
            concurrency: d_role_concurrency(),
            timeout_secs: d_role_timeout(),
            retries: d_role_retries(),
            backoff_secs: d_role_backoff(),
            deadline_secs: d_role_deadline(),
            allow_shared_with_judge: false,
            redact: Vec::new(),
        }
    }

    /// The endpoint as compared for judge separation: no trailing slash, scheme and host lowercased.
    pub fn endpoint(&self) -> String {
        let trimmed = self.base_url.trim().trim_end_matches('/');
        match trimmed.split_once("://") {
            Some((scheme, rest)) => {
                let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
                let path = if path.is_empty() { String::new() } else { format!("/{path}") };
                format!("{}://{}{path}", scheme.to_ascii_lowercase(), host.to_ascii_lowercase())
            }
            None => trimmed.to_string(),
        }
    }
}

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
        if !(1..=256).contains(&r.concurrency) {
            return Err(format!("{}: must be between 1 and 256, got {}", field("concurrency"), r.concurrency));
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    pub harness: HarnessConfig,
    /// The served strategy file, relative to the project directory.
    #[serde(default = "d_strategy")]
    pub strategy: PathBuf,
    /// Copied to `strategy` when neither it nor a journal exists yet.
    #[serde(default)]
    pub initial_strategy: Option<PathBuf>,
    #[serde(default)]
    pub gates: GateConfig,
    #[serde(default, rename = "loop")]
    pub loop_: LoopConfig,
    #[serde(default)]
    pub search: SearchConfig,
    #[serde(default)]
    pub roles: BTreeMap<String, RoleConfig>,
    #[serde(default)]
    pub serve: ServeConfig,
    #[serde(default)]
    pub hooks: HooksConfig,
    #[serde(default)]
    pub journal: JournalConfig,
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

/// `journal:` in emend.yaml.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalConfig {
    /// A head printed by `emend journal head` earlier and kept elsewhere: writers refuse a
    /// journal whose chain no longer holds it, and `journal verify` checks it.
    #[serde(default)]
    pub expect_head: Option<String>,
}

/// Whether a candidate that passes every gate is served at once or waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Served at once (the unattended job).
    #[default]
    Auto,
    /// Journaled as a pending version; `emend approve vN` serves it.
    Manual,
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Auto => "auto",
            Approval::Manual => "manual",
        }
    }
}

/// `serve:` in emend.yaml.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    #[serde(default)]
    pub approval: Approval,
    /// At most this many live pending versions: a new one supersedes the
    /// oldest beyond it (none: only those tested against the same served
    /// version are superseded).
    #[serde(default)]
    pub max_pending: Option<u32>,
}

/// `hooks:` in emend.yaml: commands told of changes, run without a shell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// argv run after every change of the served version.
    #[serde(default)]
    pub on_served: Option<Vec<String>>,
    /// argv run after a version becomes pending (manual approval).
    #[serde(default)]
    pub on_pending: Option<Vec<String>>,
    /// How long a hook may run before it is killed (`30s`, `2m`).
    #[serde(default = "d_hook_timeout", with = "duration_text")]
    pub timeout: std::time::Duration,
}

fn d_hook_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig { on_served: None, on_pending: None, timeout: d_hook_timeout() }
    }
}

/// A positive duration written as text (`30s`, `2m`, `1h 30m`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d: jiff::SignedDuration =
        s.trim().parse().map_err(|e| format!("expected a duration such as 30s, 2m or 1h, got {s:?}: {e}"))?;
    std::time::Duration::try_from(d)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("expected a positive duration, got {s:?}"))
}

mod duration_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}s", d.as_secs_f64()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<std::time::Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

fn d_strategy() -> PathBuf {
    PathBuf::from("strategies/served.yaml")
}

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

/// Parses and range-checks `emend.yaml`.
pub fn parse_config(text: &str) -> Result<ProjectConfig, String> {
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!("file is larger than {MAX_CONFIG_BYTES} bytes; an emend.yaml is a few KB"));
    }
    // libyaml is quadratic on deep nesting: bound it before parsing.
    crate::artifact::check_yaml_bounds(text, crate::artifact::MAX_YAML_DEPTH)
        .map_err(|b| format!("line {} column {}: {}", b.line, b.column, b.message))?;
    let config: ProjectConfig = serde_yaml::from_str(text).map_err(|e| match e.location() {
        Some(l) => format!("line {} column {}: {e}", l.line(), l.column()),
        None => e.to_string(),
    })?;
    check_expect_head(&config.journal)?;
    let g = &config.gates;
    let frac = |name: &str, v: f64, lo: f64, hi: f64| -> Result<(), String> {
        if v.is_finite() && v >= lo && v <= hi {
            Ok(())
        } else {
            Err(format!("{name}: must be between {lo} and {hi}, got {v}"))
        }
    };
    frac("gates.delta1", g.delta1, 0.0, 1.0)?;
    frac("gates.alpha", g.alpha, 1e-12, 0.5)?;
    frac("gates.epsilon_c", g.epsilon_c, 0.0, 1.0)?;
    frac("gates.tau_rollback", g.tau_rollback, 0.0, 1.0)?;
    if let Some(c) = g.cost_bound {
        frac("gates.cost_bound", c, 0.0, 100.0)?;
    }
    if let Some(c) = g.cost_bound_v1 {
        frac("gates.cost_bound_v1", c, 0.0, 100.0)?;
    }
    if !(g.lord_w0 > 0.0 && g.lord_w0 <= 1.0) {
        return Err(format!("gates.lord_w0: must be in (0, 1] (a share of alpha), got {}", g.lord_w0));
    }
    let s = &config.search;
    frac("search.race_level", s.race_level, 1e-6, 0.5)?;
    if s.first_look == 0 || s.stall == 0 || s.converge < s.stall {
        return Err(format!(
            "search: first_look and stall must be at least 1 and converge at least stall, got {}, {}, {}",
            s.first_look, s.stall, s.converge
        ));
    }
    if g.full_tests_per_round == 0 || g.full_tests_per_round > 16 {
        return Err(format!("gates.full_tests_per_round: must be between 1 and 16, got {}", g.full_tests_per_round));
    }
    let f = config.harness.split.confirm_fraction;
    if !(f.is_finite() && f > 0.0 && f < 1.0) {
        return Err(format!("harness.split.confirm_fraction: must be strictly between 0 and 1, got {f}"));
    }
    if g.probe_size < 10 {
        return Err(format!("gates.probe_size: must be at least 10, got {}", g.probe_size));
    }
    if !(100..=1_000_000).contains(&g.bootstrap_resamples) {
        return Err(format!(
            "gates.bootstrap_resamples: must be between 100 and 1000000, got {}",
            g.bootstrap_resamples
        ));
    }
    check_candidates("loop.candidates", config.loop_.candidates)?;
    check_rounds("loop.rounds", config.loop_.rounds)?;
    check_inside("strategy", &config.strategy)?;
    frac("loop.ucb_c", config.loop_.ucb_c, 0.0, 100.0)?;
    frac("harness.f1_threshold", config.harness.f1_threshold, 0.0, 1.0)?;
    if config.harness.max_dataset_mb == 0 {
        return Err("harness.max_dataset_mb: must be at least 1".into());
    }
    if config.harness.replay.every_sessions == 0 {
        return Err("harness.replay.every_sessions: must be at least 1".into());
    }
    if config.harness.protocol == ProtocolChoice::Replay && config.harness.kind == HarnessKind::Command {
        return Err("harness.protocol: replay runs on the built-in harness only (harness.kind is command)".into());
    }
    if config.harness.protocol == ProtocolChoice::Replay && config.harness.executor == ExecutorChoice::Ray {
        return Err("harness.protocol: replay runs in process only (harness.executor is ray)".into());
    }
    if config.harness.kind == HarnessKind::Command && config.harness.command.is_none() {
        return Err("harness.command: required when harness.kind is command".into());
    }
    check_roles(&config.roles)?;
    for (name, argv) in [("hooks.on_served", &config.hooks.on_served), ("hooks.on_pending", &config.hooks.on_pending)] {
        if let Some(argv) = argv
            && argv.first().is_none_or(|p| p.trim().is_empty())
        {
            return Err(format!(
                "{name}: expected an argv list whose first item is the program, e.g. [\"./notify.sh\"]"
            ));
        }
    }
    if config.serve.max_pending == Some(0) {
        return Err("serve.max_pending: must be at least 1 (or null: no cap)".into());
    }
    if config.hooks.on_pending.is_some() && config.serve.approval == Approval::Auto {
        return Err(
            "hooks.on_pending: only runs with serve.approval: manual (no version is ever pending in auto)".into()
        );
    }
    if config.harness.judge == JudgeKind::Llm && !config.roles.contains_key("judge") {
        return Err("harness.judge: llm needs roles.judge (an OpenAI-compatible endpoint and model)".into());
    }
    Ok(config)
}

/// The comment above `roles:` in a generated `emend.yaml`.
const ROLES_DOC: &str = "
# Model roles, each an OpenAI-compatible endpoint and model. None are needed
# for the deterministic pipeline (the default). The roles:
#   extractor   facts with source turn ids from ingest windows (ingest.unit: fact)
#   answerer    answers from the assembled context via answer.prompt
#   judge       correctness of answers (harness.judge: llm); never the answerer or evolver
#   critic      labels each candidate after its probe (it may reject, never override a gate)
#   evolver     proposes prompt rewrites as a patch; every patch goes through the gates
#   classifier  splits Layer A's generation_error into full_coverage / source_only
# Each role takes these settings (defaults shown):
#   answerer:
#     base_url: http://localhost:8000/v1  # requests go to {base_url}/chat/completions
#     model: my-model
#     api_key_env: OPENAI_API_KEY   # the variable's name, never the key; omit for no key
#     temperature: 0
#     max_tokens: 512               # largest completion
#     concurrency: 4                # requests of this role in flight at once
#     timeout_secs: 60              # one request
#     retries: 4                    # on 429, 5xx, timeouts and connection errors
#     backoff_secs: 0.5             # first wait, doubled per retry with jitter (Retry-After wins)
#     deadline_secs: 300            # one call in all, retries and waits included
# and on the judge only:
#     allow_shared_with_judge: false  # true allows the answerer's or evolver's endpoint and model
# Replies are cached under .emend/cache/llm/, so re-evaluating makes no requests.
";

/// The `serve:` and `hooks:` sections of a generated `emend.yaml`.
const SERVE_DOC: &str = "
serve:
  # auto: a candidate that passes every gate is served at once. manual: it becomes a
  # pending version (journaled, not served) until `emend approve vN`; meanwhile the loop
  # keeps searching from the served version. A new pending version supersedes the older
  # ones tested against the same served version (listed by `emend pending --all`).
  approval: auto
  # At most this many live pending versions (the oldest beyond it is superseded); null: no cap.
  max_pending: null

hooks:
  # argv run (no shell) after every change of the served version, whatever caused it, with
  # EMEND_SERVED_VERSION, EMEND_PREVIOUS_VERSION, EMEND_SERVED_FILE, EMEND_SERVED_HASH,
  # EMEND_CHANGE (accepted, approved, rollback, restore-best, auto-restore), EMEND_PROJECT.
  # A failure is journaled and reported; the change itself stands. e.g. [\"./reload.sh\"]
  on_served: null
  # argv run after a version becomes pending (serve.approval: manual), with
  # EMEND_PENDING_VERSION, EMEND_PENDING_HASH, EMEND_PENDING_PARENT, EMEND_SERVED_VERSION,
  # EMEND_PENDING_SUPERSEDES (the versions it superseded, space-separated), EMEND_SERVED_FILE,
  # EMEND_CHANGE=pending, EMEND_PROJECT.
  on_pending: null
  # A hook still running after this is killed (and counts as failed).
  timeout: 30s
";

/// The commented `emend.yaml` that `emend init` writes, its first line the
/// modeline naming [`CONFIG_SCHEMA_FILE`].
pub fn render_config(
    tasks: &str,
    strategy: &Path,
    harness_command: Option<&[String]>,
    schema: Option<&Path>,
) -> String {
    let mut out = crate::artifact::schema_modeline(CONFIG_SCHEMA_FILE);
    out.push_str("# emend project configuration. Paths are relative to this file's directory.\n\n");
    render_harness(&mut out, tasks, harness_command, schema);
    out.push_str(&format!(
        "\n# The served strategy; emend rewrites it atomically on every accepted change.\nstrategy: {}\n",
        quote(&strategy.display().to_string())
    ));
    render_gates(&mut out, &GateConfig::default());
    render_loop(&mut out, &LoopConfig::default());
    render_search(&mut out, &SearchConfig::default());
    out.push_str(SERVE_DOC);
    out.push_str(ROLES_DOC);
    out.push_str("roles: {}\n");
    out
}

/// A YAML string: JSON's quoting is YAML's.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("string renders")
}

/// The `harness:` section; with `harness_command`, of `kind: command`.
fn render_harness(out: &mut String, tasks: &str, harness_command: Option<&[String]>, schema: Option<&Path>) {
    out.push_str("harness:\n");
    match harness_command {
        None => out.push_str(
            "  # builtin: emend's own memory QA pipeline; command: your system, run per task shard.\n  kind: builtin\n",
        ),
        Some(_) => out.push_str(
            "  # builtin: emend's own memory QA pipeline; command: your system, run per task shard.\n  kind: command\n",
        ),
    }
    out.push_str(&format!(
        "  # The locked task set: `builtin` (the embedded synthetic dataset) or a LoCoMo-format JSON file.\n  tasks: {}\n",
        quote(tasks)
    ));
    out.push_str("  # Only these conversations (sample ids) form the task set; null for all.\n  conversations: null\n");
    out.push_str("  # Keep LoCoMo category 5 (adversarial) questions.\n  include_adversarial: false\n");
    out.push_str("  # How answers are judged (locked): evidence (deterministic), f1 or llm.\n  judge: evidence\n");
    out.push_str(
        "  # endpoint: every question once, after whole conversations; replay: longitudinal, a checkpoint\n  \
         # after every replay.every_sessions sessions, each question asked from the checkpoint its evidence is in.\n  \
         protocol: endpoint\n",
    );
    out.push_str("  # Token F1 at or above which an answer counts as correct (judge f1).\n  f1_threshold: 0.5\n");
    out.push_str("  # Locked ceiling on context tokens (estimated as floor(1.33 x words)).\n  budget_ceiling: 2000\n");
    match schema {
        Some(s) => out.push_str(&format!(
            "  # The strategy schema of your system.\n  schema: {}\n",
            quote(&s.display().to_string())
        )),
        None => out.push_str("  # The strategy schema; null for emend's built-in one.\n  schema: null\n"),
    }
    out.push_str("  # Part of the harness hash: change it whenever the evaluated system changes.\n  version: null\n");
    out.push_str("  # Seeded split by (conversation, category): the search part feeds diagnosis, probes and\n  # proposals; only the Stage-2 confirm test reads the confirm part.\n  split:\n    confirm_fraction: 0.5\n    seed: 0\n");
    if let Some(argv) = harness_command {
        out.push_str("  command:\n");
        out.push_str("    # argv; {strategy}, {tasks} and {out} become file paths (strategy JSON, task shard JSON, outcomes JSONL).\n");
        out.push_str(&format!("    argv: [{}]\n", argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(", ")));
        out.push_str(
            "    # Working directory (null: this directory) and extra environment.\n    workdir: null\n    env: {}\n",
        );
        out.push_str("    # Seconds before a shard is killed and retried once.\n    timeout_secs: 600\n");
        out.push_str("    # Task shards, and how many run at once.\n    shards: 1\n    concurrency: 1\n");
    }
}

/// The `gates:` section at the defaults `g`.
fn render_gates(out: &mut String, g: &GateConfig) {
    out.push_str("\ngates:\n");
    out.push_str(&format!(
        "  # Stage-1 probe: reject when accuracy falls more than this below the served strategy.\n  delta1: {}\n",
        g.delta1
    ));
    out.push_str(&format!(
        "  # LORD++ level of the confirm tests (see README, Error control across a run).\n  alpha: {}\n",
        g.alpha
    ));
    out.push_str(&format!("  # LORD++ initial wealth as a share of alpha.\n  lord_w0: {}\n", g.lord_w0));
    out.push_str(&format!(
        "  # Largest accuracy drop tolerated in any category, per step and against the first version (v1).\n  epsilon_c: {}\n",
        g.epsilon_c
    ));
    out.push_str(&format!(
        "  # Best-ever auto-restore when served falls more than this below the best-ever score.\n  tau_rollback: {}\n",
        g.tau_rollback
    ));
    out.push_str(
        "  # off: a candidate may go anywhere inside the schema's ranges and invariants (the global\n  \
         # search); schema: every number stays within its x-max-delta (the conservative mode).\n  step_bound: off\n",
    );
    out.push_str(&format!(
        "  # Largest relative growth of mean context tokens in one accepted step (null: no bound).\n  cost_bound: {}\n",
        g.cost_bound.map_or("null".to_string(), |c| c.to_string())
    ));
    out.push_str(
        "  # Largest relative growth of mean context tokens against v1 (null: no bound).\n  cost_bound_v1: null\n",
    );
    out.push_str(&format!(
        "  # Questions in the seeded, category-stratified probe sample.\n  probe_size: {}\n",
        g.probe_size
    ));
    out.push_str(&format!(
        "  # Candidates per round that may reach the confirm test (the best probes), each one LORD++ test.\n  full_tests_per_round: {}\n",
        g.full_tests_per_round
    ));
    out.push_str(&format!(
        "  # Paired bootstrap resamples (the interval shown; the gate is the exact test).\n  bootstrap_resamples: {}\n",
        g.bootstrap_resamples
    ));
    out.push_str(
        "  # CR2 check by conversation (Bell-McCaffrey degrees of freedom), always recorded: off or require.\n  cluster_check: off\n",
    );
}

/// The `loop:` section at the defaults `l`.
fn render_loop(out: &mut String, l: &LoopConfig) {
    out.push_str("\nloop:\n");
    out.push_str(&format!("  # Rounds per `emend evolve` unless --rounds says otherwise.\n  rounds: {}\n", l.rounds));
    out.push_str(&format!("  # Candidates proposed per round.\n  candidates: {}\n", l.candidates));
    out.push_str("  # Seed of every random choice (probe samples, bootstrap).\n  seed: 0\n");
    out.push_str(&format!("  # UCB1 exploration constant c0.\n  ucb_c: {}\n", l.ucb_c));
    out.push_str(&format!(
        "  # The search proposer: the global search of `search:` below (or, with\n  \
         # gates.step_bound: schema, bounded steps); false: the rule evolver's one-field moves.\n  \
         search: {}\n",
        l.search
    ));
}

/// The `search:` section at the defaults `s`.
fn render_search(out: &mut String, s: &SearchConfig) {
    out.push_str("\nsearch:\n");
    out.push_str(
        "  # The global search (gates.step_bound: off): a TPE sampler over every evolvable field,\n  \
         # each trial raced question by question against the best so far on the search part.\n",
    );
    out.push_str(&format!(
        "  # Drop a trial once the one-sided exact test says it is worse at this level.\n  race_level: {}\n",
        s.race_level
    ));
    out.push_str(&format!("  # Questions of a race's first look (then doubling).\n  first_look: {}\n", s.first_look));
    out.push_str(&format!(
        "  # Pruning: revert a changed field when that costs at most this many search questions.\n  prune_tolerance: {}\n",
        s.prune_tolerance
    ));
    out.push_str(&format!(
        "  # Propose the best once this many trials in a row found nothing better.\n  stall: {}\n",
        s.stall
    ));
    out.push_str(&format!(
        "  # Converged (the run stops) after this many trials in a row none better than served.\n  converge: {}\n",
        s.converge
    ));
    out.push_str(&format!("  # Random trials before the sampler models the history.\n  startup: {}\n", s.startup));
    out.push_str(&format!(
        "  # One joint TPE model of all fields instead of one per field.\n  multivariate: {}\n",
        s.multivariate
    ));
    out.push_str(&format!(
        "  # Before pruning, try the consensus (per field median or commonest value) of this\n  \
         # many best strategies instead of the best one (0: off).\n  consensus: {}\n",
        s.consensus
    ));
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
    fn step_bound_reads_off_schema_and_yaml_1_1_false() {
        let base = "harness:\n  tasks: builtin\ngates:\n  step_bound: ";
        for (v, want) in [("off", StepBound::Off), ("false", StepBound::Off), ("schema", StepBound::Schema)] {
            assert_eq!(parse_config(&format!("{base}{v}\n")).unwrap().gates.step_bound, want, "{v}");
        }
        let e = parse_config(&format!("{base}bounded\n")).unwrap_err();
        assert!(e.contains("gates.step_bound: expected off or schema"), "{e}");
        assert_eq!(parse_config("harness:\n  tasks: builtin\n").unwrap().gates.step_bound, StepBound::Off);
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
        let bad = base.replace("seed: 0", "seed: 0\n  colour: red");
        assert!(parse_config(&bad).unwrap_err().contains("unknown field `colour`"));
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
        assert_eq!(r.concurrency, 8);
        assert_eq!(*r, RoleConfig { concurrency: 8, ..RoleConfig::new("http://127.0.0.1:9/v1", "m") });
        let err = with_roles("roles:\n  answerer: {base_url: 'http://h/v1', model: m, colour: red}\n").unwrap_err();
        assert!(err.contains("unknown field `colour`"), "{err}");
        let err = with_roles("roles:\n  oracle: {base_url: 'http://host/v1', model: m}\n").unwrap_err();
        assert!(err.contains("roles.oracle: unknown role"), "{err}");
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
}
