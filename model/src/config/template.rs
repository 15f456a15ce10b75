//! The commented `emend.yaml` that `emend init` writes: every section at
//! its defaults, each key with a line saying what it does. Only the current
//! key names are written (never a renamed key's old name).

use std::path::Path;

use super::CONFIG_SCHEMA_FILE;
use super::types::*;

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
    out.push_str("  # Seeded split by (conversation, category): the search part feeds diagnosis, probes and\n  # proposals; only the confirm test reads the confirm part.\n  split:\n    confirm_fraction: 0.5\n    seed: 0\n");
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
        "  # Screening probe: reject when accuracy falls more than this below the served strategy.\n  probe_drop_max: {}\n",
        g.probe_drop_max
    ));
    out.push_str(&format!(
        "  # LORD++ level of the confirm tests (see README, Error control across a run).\n  alpha: {}\n",
        g.alpha
    ));
    out.push_str(&format!(
        "  # LORD++ initial wealth as a share of alpha.\n  lord_initial_wealth: {}\n",
        g.lord_initial_wealth
    ));
    out.push_str(&format!(
        "  # Largest accuracy drop tolerated in any category, per step and against the first version (v1).\n  category_drop_max: {}\n",
        g.category_drop_max
    ));
    out.push_str(&format!(
        "  # Best-ever auto-restore when served falls more than this below the best-ever score.\n  restore_below_best: {}\n",
        g.restore_below_best
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
    out.push_str(&format!("  # How strongly the planner favours the hypotheses it has tried least\n  # (the UCB1 exploration constant c0).\n  exploration: {}\n", l.exploration));
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
