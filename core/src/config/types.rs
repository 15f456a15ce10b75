//! The serde types of `emend.yaml`, one per section (`harness`, `gates`,
//! `loop`, `search`, `roles`, `serve`, `hooks`), and their `Default`s. The
//! default values themselves live in [`super::defaults`]; range checks in
//! [`super::validate`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::defaults::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessKind {
    Builtin,
    Command,
}

/// `harness.kind` when the file does not say: the built-in harness.
fn default_kind() -> HarnessKind {
    HarnessKind::Builtin
}

/// `harness.judge`: the harness's judge type.
pub use emend_harness::strategy::JudgeKind;

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

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig { every_sessions: d_every_sessions() }
    }
}

impl HarnessConfig {
    /// The evaluation protocol the harness runs.
    pub fn protocol(&self) -> emend_harness::Protocol {
        match self.protocol {
            ProtocolChoice::Endpoint => emend_harness::Protocol::Endpoint,
            ProtocolChoice::Replay => emend_harness::Protocol::Replay { every_sessions: self.replay.every_sessions },
        }
    }

    /// [`HarnessConfig::max_dataset_mb`] in bytes.
    pub fn max_dataset_bytes(&self) -> u64 {
        self.max_dataset_mb.saturating_mul(1024 * 1024)
    }
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

/// `harness.split`: the unit the split assigns (a question or a whole
/// conversation), the share of units in the confirm part (which only the
/// confirm test reads) and the seed of the hash that assigns them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitConfig {
    #[serde(default)]
    pub unit: SplitUnitChoice,
    #[serde(default = "d_confirm_fraction")]
    pub confirm_fraction: f64,
    #[serde(default)]
    pub seed: u64,
}

impl Default for SplitConfig {
    fn default() -> Self {
        SplitConfig { unit: SplitUnitChoice::Auto, confirm_fraction: d_confirm_fraction(), seed: 0 }
    }
}

/// `harness.split.unit`: `auto` (by conversation when that puts at least
/// [`emend_stats::MIN_CONFIRM_CONVERSATIONS`] conversations in the confirm
/// part, by question otherwise), `question` or `conversation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitUnitChoice {
    #[default]
    Auto,
    Question,
    Conversation,
}

impl SplitUnitChoice {
    /// The unit for the task set `tasks` under `split`.
    pub fn resolve(self, tasks: &[emend_stats::TaskKey], split: &SplitConfig) -> emend_stats::SplitUnit {
        use emend_stats::SplitUnit;
        match self {
            SplitUnitChoice::Question => SplitUnit::Question,
            SplitUnitChoice::Conversation => SplitUnit::Conversation,
            SplitUnitChoice::Auto => emend_stats::auto_unit(tasks, split.confirm_fraction, split.seed),
        }
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
    /// Screening probe: reject when accuracy falls more than this below the
    /// served strategy (the papers' delta_1), times the share of the round's failures the candidate's fields
    /// target (the critic's actionability; 0 for a risky candidate).
    #[serde(default = "d_probe_drop_max")]
    pub probe_drop_max: f64,
    /// The run's significance level for the full paired test.
    #[serde(default = "d_alpha")]
    pub alpha: f64,
    /// Largest accuracy drop tolerated in any category (the papers' epsilon_c).
    #[serde(default = "d_category_drop_max")]
    pub category_drop_max: f64,
    /// Best-ever auto-restore: served more than this below the best-ever score
    /// (the papers' tau).
    #[serde(default = "d_restore_below_best")]
    pub restore_below_best: f64,
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
    #[serde(default)]
    pub cluster_check: ClusterMode,
    /// LORD++ initial wealth as a share of alpha (the papers' W0 =
    /// lord_initial_wealth * alpha).
    #[serde(default = "d_lord_initial_wealth")]
    pub lord_initial_wealth: f64,
}

/// `search.method`: which proposer makes a round's candidates. The one
/// switch between them; each case names what it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMethod {
    /// The global search (`JumpProposer`): a sampler over every evolvable
    /// field, anywhere inside the schema's ranges and invariants, raced on the
    /// search part and pruned to the fields that matter. The default under
    /// `harness.protocol: endpoint`.
    Jump,
    /// The conservative mode (`StepProposer`): candidates within one
    /// `x-max-delta` of the served strategy, screened by successive halving,
    /// and a gate that refuses any number moved further. Endpoint protocol only.
    Steps,
    /// The rule evolver's one-field moves from the planner's directions, no
    /// search. The only method (and the default) under `harness.protocol: replay`.
    Rules,
}

impl SearchMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMethod::Jump => "jump",
            SearchMethod::Steps => "steps",
            SearchMethod::Rules => "rules",
        }
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

/// `search:`: which proposer runs (`method`), and the global search's
/// settings (`method: jump`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Which proposer runs; unset: `jump` under the endpoint protocol, `rules`
    /// under replay ([`ProjectConfig::search_method`]).
    #[serde(default)]
    pub method: Option<SearchMethod>,
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
    /// What the sampler learns from a trial raced out before the whole search part.
    #[serde(default)]
    pub raced_out: RacedOut,
    /// The model the search draws its trials from.
    #[serde(default)]
    pub sampler: Sampler,
}

/// `search.sampler`: the model the global search draws trials from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampler {
    /// A tree-structured Parzen estimator, as Optuna's TPESampler.
    #[default]
    Tpe,
    /// A random forest with expected improvement, as SMAC3's facade.
    Forest,
}

impl Sampler {
    pub fn as_str(self) -> &'static str {
        match self {
            Sampler::Tpe => "tpe",
            Sampler::Forest => "forest",
        }
    }
}

/// `search.raced_out`: what the sampler learns from a trial a race stopped
/// after k of the search part's n questions. Every rule keeps what was
/// measured (its answers on those k questions) and none reads as a score
/// on all n.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RacedOut {
    /// As Optuna's TPE ranks a pruned trial: below every complete trial,
    /// then by how many questions it got through, then by its accuracy on them.
    #[default]
    Rank,
    /// The incumbent's score plus the paired difference per question on the
    /// k questions: an estimate on the scale of complete scores.
    Deficit,
    /// The same difference shrunk toward a tie by a prior of `first_look`
    /// questions on which it ties the incumbent: `(hits - incumbent hits) / (k + first_look)`.
    Shrunk,
}

impl RacedOut {
    pub fn as_str(self) -> &'static str {
        match self {
            RacedOut::Rank => "rank",
            RacedOut::Deficit => "deficit",
            RacedOut::Shrunk => "shrunk",
        }
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            method: None,
            race_level: d_race_level(),
            first_look: d_first_look(),
            prune_tolerance: d_prune_tolerance(),
            stall: d_stall(),
            converge: d_converge(),
            startup: d_startup(),
            multivariate: false,
            consensus: d_consensus(),
            raced_out: RacedOut::default(),
            sampler: Sampler::default(),
        }
    }
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            probe_drop_max: d_probe_drop_max(),
            alpha: d_alpha(),
            category_drop_max: d_category_drop_max(),
            restore_below_best: d_restore_below_best(),
            cost_bound: d_cost(),
            cost_bound_v1: None,
            probe_size: d_probe(),
            full_tests_per_round: d_full_tests(),
            bootstrap_resamples: d_resamples(),
            cluster_check: ClusterMode::Off,
            lord_initial_wealth: d_lord_initial_wealth(),
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
    /// How strongly the planner favours the hypotheses it has tried least
    /// (the UCB1 exploration constant, the papers' c0).
    #[serde(default = "d_exploration")]
    pub exploration: f64,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig { rounds: d_rounds(), candidates: d_candidates(), seed: 0, exploration: d_exploration() }
    }
}

/// The model roles emend knows. Each is configured separately, so the
/// component that proposes a change never judges it.
pub const ROLE_NAMES: [&str; 6] = ["extractor", "answerer", "judge", "critic", "evolver", "classifier"];

/// The roles emend asks one call at a time (a round's critic reviews and
/// evolver rewrites run in turn), where `concurrency` is refused.
pub const ONE_AT_A_TIME: [&str; 2] = ["critic", "evolver"];

/// A role's `concurrency` as the bound it sets: the default when unset.
fn in_flight<S: serde::Serializer>(c: &Option<usize>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(c.unwrap_or_else(d_role_concurrency) as u64)
}

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
    /// Requests of this role in flight at once ([`RoleConfig::in_flight`]:
    /// 4 when unset). Refused on the critic and the evolver, which emend
    /// asks one call at a time: there the bound could never bind.
    #[serde(default, serialize_with = "in_flight")]
    pub concurrency: Option<usize>,
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

impl RoleConfig {
    /// A role with every optional setting at its default.
    pub fn new(base_url: &str, model: &str) -> RoleConfig {
        RoleConfig {
            base_url: base_url.to_string(),
            model: model.to_string(),
            api_key_env: None,
            temperature: 0.0,
            max_tokens: d_max_tokens(),
            concurrency: None,
            timeout_secs: d_role_timeout(),
            retries: d_role_retries(),
            backoff_secs: d_role_backoff(),
            deadline_secs: d_role_deadline(),
            allow_shared_with_judge: false,
            redact: Vec::new(),
        }
    }

    /// The bound on this role's requests in flight: `concurrency`, or its default.
    pub fn in_flight(&self) -> usize {
        self.concurrency.unwrap_or_else(d_role_concurrency)
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
    #[serde(default)]
    pub cost: CostConfig,
}

impl ProjectConfig {
    /// The proposer that runs: `search.method`, or when it is unset `jump`
    /// under the endpoint protocol and `rules` under replay (the only method
    /// replay runs; validation refuses another one set there).
    pub fn search_method(&self) -> SearchMethod {
        match (self.search.method, self.harness.protocol) {
            (Some(m), _) => m,
            (None, ProtocolChoice::Endpoint) => SearchMethod::Jump,
            (None, ProtocolChoice::Replay) => SearchMethod::Rules,
        }
    }
}

/// `cost:` in emend.yaml: what the operator will pay for accuracy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostConfig {
    /// A hard budget: no strategy whose mean context tokens a question exceed
    /// it is proposed (the search does not take it as its incumbent) or
    /// accepted (the confirm test's `cost_max_tokens` rule); null: none.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// The price of context: accuracy points the operator gives up per 1,000
    /// mean context tokens a question. A question's utility is
    /// `correct - per_1k_tokens / 100 * tokens / 1000`; null: no price.
    #[serde(default)]
    pub per_1k_tokens: Option<f64>,
    /// The `cheaper` step's margin (accuracy, a fraction): a cheaper strategy
    /// is accepted when the confirm test shows it is not worse than the
    /// served one by this much (docs/noninferiority.md gives the power of
    /// each margin). null: no cheaper step.
    #[serde(default)]
    pub noninferiority_margin: Option<f64>,
    /// The smallest relative saving of mean context tokens a `cheaper` step
    /// must show on the confirm part (0.2: at least 20% fewer).
    #[serde(default = "d_min_saving")]
    pub min_saving: f64,
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig { max_tokens: None, per_1k_tokens: None, noninferiority_margin: None, min_saving: d_min_saving() }
    }
}

impl CostConfig {
    /// The price per context token in accuracy units (a fraction a token):
    /// with it the objective is utility; None (no price) when it is accuracy.
    pub fn price_per_token(&self) -> Option<f64> {
        self.per_1k_tokens.map(|p| p / 100.0 / 1000.0)
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
