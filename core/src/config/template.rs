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
#     concurrency: 4                # requests in flight at once (not on critic, evolver:
#                                   # emend asks them one call at a time)
#     timeout_secs: 60              # one request
#     retries: 4                    # on 429, 5xx, timeouts and connection errors
#     backoff_secs: 0.5             # first wait, doubled per retry with jitter (Retry-After wins)
#     deadline_secs: 300            # one call in all, retries and waits included
# and on the judge only:
#     allow_shared_with_judge: false  # true allows the answerer's or evolver's endpoint and model
# Replies are cached under .emend/cache/llm/, so re-evaluating makes no requests.
";

/// The `serve:`, `cost:` and `hooks:` sections of a generated `emend.yaml`.
const SERVE_DOC: &str = "
serve:
  # auto: a candidate that passes every gate is served at once. manual: it becomes a
  # pending version (journaled, not served) until `emend approve vN`; meanwhile every run
  # stops at once (`stopped: pending`, no search) until it is approved or rejected or the
  # served version changes. A new pending version supersedes the older ones tested
  # against the same served version (listed by `emend pending --all`).
  approval: auto
  # At most this many live pending versions (the oldest beyond it is superseded); null: no cap.
  max_pending: null

cost:
  # A hard budget of mean context tokens a question: the search proposes no strategy
  # above it and the confirm test accepts none (rule cost_max_tokens). null: none.
  max_tokens: null
  # Accuracy points given up per 1,000 mean context tokens a question, e.g. 2.0: the
  # search maximises and the confirm test tests utility, accuracy less this price of
  # context (docs/price.md). null: no price; accuracy alone.
  per_1k_tokens: null
  # The cheaper step: when a strategy scored by the search reads at least min_saving
  # fewer tokens and is about as accurate, it is proposed and accepted when a
  # non-inferiority test shows it is not worse by this margin (a fraction; 0.05 is
  # 5 points: docs/noninferiority.md gives the power of each). null: no cheaper step.
  noninferiority_margin: null
  min_saving: 0.2

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

/// One key of a generated `emend.yaml` at `indent`, each line of `doc` a
/// comment above it.
fn key(out: &mut String, indent: &str, doc: &str, name: &str, value: impl std::fmt::Display) {
    comment(out, indent, doc);
    out.push_str(&format!("{indent}{name}: {value}\n"));
}

/// Each line of `doc` as a comment at `indent`.
fn comment(out: &mut String, indent: &str, doc: &str) {
    for line in doc.lines() {
        out.push_str(&format!("{indent}# {line}\n"));
    }
}

/// The `harness:` section; with `harness_command`, of `kind: command`.
fn render_harness(out: &mut String, tasks: &str, harness_command: Option<&[String]>, schema: Option<&Path>) {
    let k = |out: &mut String, doc: &str, name: &str, value: &dyn std::fmt::Display| key(out, "  ", doc, name, value);
    out.push_str("harness:\n");
    let kind = if harness_command.is_some() { "command" } else { "builtin" };
    k(out, "builtin: emend's own memory QA pipeline; command: your system, run per task shard.", "kind", &kind);
    let doc = "The locked task set: `builtin` (the embedded synthetic dataset) or a LoCoMo-format JSON file.";
    k(out, doc, "tasks", &quote(tasks));
    k(out, "Only these conversations (sample ids) form the task set; null for all.", "conversations", &"null");
    k(out, "Keep LoCoMo category 5 (adversarial) questions.", "include_adversarial", &false);
    // The judge, its F1 threshold and the token ceiling are the built-in pipeline's; a
    // command judges its own answers and keeps its own budget.
    let builtin = harness_command.is_none();
    if builtin {
        k(
            out,
            "How answers are judged (locked): evidence (deterministic), temporal (evidence, no superseded answer), f1 or llm.",
            "judge",
            &"evidence",
        );
    }
    let doc = "endpoint: every question once, after whole conversations; replay: longitudinal, a checkpoint\n\
               after every replay.every_sessions sessions, each question asked from the checkpoint its evidence is in.";
    k(out, doc, "protocol", &"endpoint");
    if builtin {
        k(out, "Token F1 at or above which an answer counts as correct (judge f1).", "f1_threshold", &0.5);
        k(out, "Locked ceiling on context tokens (estimated as floor(1.33 x words)).", "budget_ceiling", &2000);
    }
    match schema {
        Some(s) => k(out, "The strategy schema of your system.", "schema", &quote(&s.display().to_string())),
        None => k(out, "The strategy schema; null for emend's built-in one.", "schema", &"null"),
    }
    k(out, "Part of the harness hash: change it whenever the evaluated system changes.", "version", &"null");
    let doc = "Seeded split: the search part feeds diagnosis, probes and proposals; only the confirm\n\
               test reads the confirm part. unit: question (the guarantee covers new questions about\n\
               these conversations), conversation (new conversations), or auto (conversation when\n\
               that puts at least 7 conversations in the confirm part).";
    comment(out, "  ", doc);
    out.push_str(&format!(
        "  split:\n    unit: auto\n    confirm_fraction: {}\n    seed: 0\n",
        emend_stats::DEFAULT_CONFIRM_FRACTION
    ));
    if let Some(argv) = harness_command {
        let k =
            |out: &mut String, doc: &str, name: &str, value: &dyn std::fmt::Display| key(out, "    ", doc, name, value);
        out.push_str("  command:\n");
        let argv = format!("[{}]", argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(", "));
        let doc =
            "argv; {strategy}, {tasks} and {out} become file paths (strategy JSON, task shard JSON, outcomes JSONL).";
        k(out, doc, "argv", &argv);
        k(out, "Working directory (null: this directory) and extra environment.", "workdir", &"null");
        out.push_str("    env: {}\n");
        k(out, "Seconds before a shard is killed and retried once.", "timeout_secs", &600);
        k(out, "Task shards, and how many run at once.", "shards", &1);
        out.push_str("    concurrency: 1\n");
    }
}

/// The `gates:` section at the defaults `g`.
fn render_gates(out: &mut String, g: &GateConfig) {
    let k = |out: &mut String, doc: &str, name: &str, value: &dyn std::fmt::Display| key(out, "  ", doc, name, value);
    out.push_str("\ngates:\n");
    let doc = "Screening probe: reject when accuracy falls more than this below the served strategy, times the share of the round's failures the change targets.";
    k(out, doc, "probe_drop_max", &g.probe_drop_max);
    k(out, "LORD++ level of the confirm tests (docs/statistics.md, Error control across a run).", "alpha", &g.alpha);
    k(out, "LORD++ initial wealth as a share of alpha.", "lord_initial_wealth", &g.lord_initial_wealth);
    let doc = "Largest accuracy drop tolerated in any category, per step and against the first version (v1).";
    k(out, doc, "category_drop_max", &g.category_drop_max);
    let doc = "Best-ever auto-restore when served falls more than this below the best-ever score.";
    k(out, doc, "restore_below_best", &g.restore_below_best);
    let cost = g.cost_bound.map_or("null".to_string(), |c| c.to_string());
    let doc = "Largest relative growth of mean context tokens in one accepted step (null: no bound).";
    k(out, doc, "cost_bound", &cost);
    k(out, "Largest relative growth of mean context tokens against v1 (null: no bound).", "cost_bound_v1", &"null");
    k(out, "Questions in the seeded, category-stratified probe sample.", "probe_size", &g.probe_size);
    let doc = "Candidates per round that may reach the confirm test (the best probes), each one LORD++ test.";
    k(out, doc, "full_tests_per_round", &g.full_tests_per_round);
    let doc = "Paired bootstrap resamples (the interval shown; the gate is the exact test).";
    k(out, doc, "bootstrap_resamples", &g.bootstrap_resamples);
    let doc = "CR2 check by conversation (Bell-McCaffrey degrees of freedom), always recorded: off or require.";
    k(out, doc, "cluster_check", &"off");
}

/// The `loop:` section at the defaults `l`.
fn render_loop(out: &mut String, l: &LoopConfig) {
    let k = |out: &mut String, doc: &str, name: &str, value: &dyn std::fmt::Display| key(out, "  ", doc, name, value);
    out.push_str("\nloop:\n");
    k(out, "Rounds per `emend evolve` unless --rounds says otherwise.", "rounds", &l.rounds);
    k(
        out,
        "Candidates screened per round under search.method steps or rules (jump proposes one: the search's best).",
        "candidates",
        &l.candidates,
    );
    k(out, "Seed of every random choice (probe samples, bootstrap).", "seed", &0);
    let doc = "How strongly the planner favours the hypotheses it has tried least\n\
               (the UCB1 exploration constant c0).";
    k(out, doc, "exploration", &l.exploration);
}

/// The `search:` section at the defaults `s`.
fn render_search(out: &mut String, s: &SearchConfig) {
    let k = |out: &mut String, doc: &str, name: &str, value: &dyn std::fmt::Display| key(out, "  ", doc, name, value);
    out.push_str("\nsearch:\n");
    let doc = "Which proposer makes the candidates. jump: the global search below, a sampler over\n\
               every evolvable field, each trial raced question by question against the best so\n\
               far on the search part. steps: the conservative mode, every number within its\n\
               x-max-delta of the served value. rules: the rule evolver's one-field moves (the\n\
               only method under harness.protocol: replay). null: jump, or rules under replay.";
    k(out, doc, "method", &"null");
    let doc = "Drop a trial once the one-sided exact test says it is worse at this level.";
    k(out, doc, "race_level", &s.race_level);
    k(out, "Questions of a race's first look (then doubling).", "first_look", &s.first_look);
    let doc = "Pruning: revert a changed field when that costs at most this many search questions.";
    k(out, doc, "prune_tolerance", &s.prune_tolerance);
    k(out, "Propose the best once this many trials in a row found nothing better.", "stall", &s.stall);
    let doc = "Converged (the run stops) after this many trials in a row none better than served.";
    k(out, doc, "converge", &s.converge);
    k(out, "Random trials before the sampler models the history.", "startup", &s.startup);
    k(out, "One joint TPE model of all fields instead of one per field.", "multivariate", &s.multivariate);
    let doc = "Before pruning, try the consensus (per field median or commonest value) of this\n\
               many best strategies instead of the best one (0: off).";
    k(out, doc, "consensus", &s.consensus);
    let doc = "What the sampler learns from a trial raced out early: rank (below every complete\n\
               trial, as Optuna ranks pruned ones), deficit or shrunk (an estimated score).";
    k(out, doc, "raced_out", &s.raced_out.as_str());
    let doc = "The model trials are drawn from: tpe (as Optuna's TPESampler) or forest (a random\n\
               forest with expected improvement, as SMAC3's facade).";
    k(out, doc, "sampler", &s.sampler.as_str());
}
