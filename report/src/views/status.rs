//! `emend status`: what is served and why, the served file's state, the
//! last round, what the next confirm test can see, and what the model roles
//! cost.

use super::*;

/// What the next confirm test can see, replayed from the journal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfirmView {
    /// Questions in the confirm part (None before the first round split it).
    pub questions: Option<u64>,
    pub tests: u64,
    pub next_alpha: f64,
    pub lord_wealth: f64,
    /// What the search learns from the confirm part, what that guarantees,
    /// and what counts as fresh data.
    pub reuse: String,
    pub discordance_rate: Option<f64>,
    /// The gain the next confirm test sees with 80% power.
    pub mde_80: Option<f64>,
    /// What that test counts (`questions`, or `probes` under longitudinal
    /// replay) and how many.
    pub mde_unit: &'static str,
    pub mde_n: Option<u64>,
    /// The split's design (`question split at 0.4, seed 0`), once a round drew it.
    pub split: Option<String>,
    /// Which population a confirm test's guarantee covers under that split.
    pub guarantee: Option<String>,
    /// The first round of the current LORD++ sequence (a new split starts one).
    pub lord_from_round: Option<u64>,
}

/// Model usage of the last round and of all rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlmView {
    pub last_round: Option<Value>,
    pub total: emend_core::usage::Usage,
}

/// `emend status`: the pointers, the served file, the rounds and what the
/// next confirm test can see.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusView {
    pub confirm: ConfirmView,
    pub served_version: u64,
    pub served_hash: String,
    /// The served version's measured whole-set accuracy (`served_figures.whole`).
    pub served_accuracy: Option<f64>,
    pub served_figures: Option<Figures>,
    /// The served version's mean context tokens, beside its parent's and v1's.
    pub served_cost: Option<VersionCost>,
    pub served_pinned: bool,
    /// Who or what pinned the served version, and why (empty when not pinned).
    pub served_cause: String,
    pub served_reason: String,
    /// The served file's state (`consistent`, `missing (evolve rewrites it)`, ...).
    pub served_file: String,
    pub served_path: String,
    pub best_version: Option<u64>,
    pub best_hash: Option<String>,
    /// The best-ever version's measured whole-set accuracy (`best_figures.whole`).
    pub best_accuracy: Option<f64>,
    pub best_figures: Option<Figures>,
    pub best_cost: Option<VersionCost>,
    /// The token budget the next run keeps: the smaller of `cost.max_tokens`
    /// and the operator's journaled one (`budget`).
    pub max_tokens: Option<u32>,
    /// The journaled budget (`rollback --max-tokens`): max_tokens, reason, who, at, seq.
    pub budget: Option<Value>,
    pub rounds: usize,
    /// The last round's record as journaled.
    pub last_round: Option<Value>,
    /// Rejections by stage over all rounds.
    pub rejected_by: BTreeMap<String, u64>,
    pub escalations: Vec<Value>,
    /// `serve.approval`: `auto` or `manual`.
    pub approval: String,
    pub pending_versions: Vec<u64>,
    pub quarantined: Vec<Value>,
    pub reviews: Vec<Value>,
    pub last_hook_failure: Option<Value>,
    /// The last run's interruption, until a round finishes after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Value>,
    pub llm: LlmView,
}

/// Whether status can be built: the journal serves something.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the journal has no served strategy")]
    NothingServed,
}

impl StatusError {
    pub fn exit_class(&self) -> emend_journal::ErrorClass {
        match self {
            StatusError::Store(e) => e.exit_class(),
            StatusError::NothingServed => emend_journal::ErrorClass::Failed,
        }
    }
}

impl StatusView {
    /// The status of `project` with its served file in state `file`.
    pub fn build<L: EventLog + ?Sized>(
        project: &Project,
        log: &L,
        file: &FileState,
    ) -> std::result::Result<StatusView, StatusError> {
        let store = Store::new(log);
        let served = store.served()?.ok_or(StatusError::NothingServed)?;
        let best = store.best()?;
        let rounds = store.rounds()?;
        let split = last_split(log)?;
        let served_figures = recorded_figures(log, &served.hash, best.as_ref(), split.as_ref())?;
        let best_figures = match &best {
            Some(b) => recorded_figures(log, &b.hash, Some(b), split.as_ref())?,
            None => None,
        };
        let last = rounds.last().cloned();
        let mut rejected_by = BTreeMap::<String, u64>::new();
        for r in &rounds {
            for (k, v) in r["rejected_by"].as_object().into_iter().flatten() {
                *rejected_by.entry(k.clone()).or_default() += v.as_u64().unwrap_or(0);
            }
        }
        let confirm_size = rounds.iter().rev().find_map(|r| r["split"]["confirm"].as_u64());
        let lord_from = split.as_ref().and_then(|s| s.lord_from_round).unwrap_or(0);
        let confirm = confirm_view(project, &store.candidates()?, confirm_size, lord_from, split.as_ref());
        let quarantined = store.quarantined()?;
        let reviews = store.reviews()?;
        let pending_versions: Vec<u64> =
            reviews.iter().filter(|(_, r)| r["status"] == "pending").map(|(v, _)| *v).collect();
        Ok(StatusView {
            approval: project.config.serve.approval.as_str().to_string(),
            pending_versions,
            quarantined: quarantined.into_values().collect(),
            reviews: reviews.into_values().collect(),
            last_hook_failure: store.last_hook_failure()?,
            interrupted: store.interrupted()?,
            confirm,
            served_version: served.version,
            served_accuracy: served_figures.as_ref().map(|f| f.whole.accuracy),
            served_figures,
            served_cost: store.version_cost(served.version)?,
            served_pinned: served.pinned,
            served_cause: if served.pinned { served.cause } else { String::new() },
            served_reason: if served.pinned { served.reason } else { String::new() },
            served_hash: served.hash,
            served_file: file_state(file),
            served_path: project.strategy_path().display().to_string(),
            best_version: best.as_ref().map(|b| b.version),
            best_hash: best.as_ref().map(|b| b.hash.clone()),
            best_accuracy: best_figures.as_ref().map(|f| f.whole.accuracy),
            best_figures,
            best_cost: match &best {
                Some(b) => store.version_cost(b.version)?,
                None => None,
            },
            max_tokens: store.max_tokens(project.config.cost.max_tokens)?,
            budget: store.budget()?,
            rounds: rounds.len(),
            llm: LlmView {
                last_round: last
                    .as_ref()
                    .map(|r| r.get("llm").cloned().unwrap_or_else(|| Value::Object(Default::default()))),
                total: model_usage(&rounds),
            },
            last_round: last,
            rejected_by,
            escalations: store.escalations()?,
        })
    }
}

fn file_state(file: &FileState) -> String {
    match file {
        FileState::Consistent => "consistent".to_string(),
        FileState::Missing => "missing (evolve rewrites it)".to_string(),
        FileState::Stale { holds } => format!("holds v{holds} (evolve rewrites it)"),
        FileState::HandEdited { file_hash } => format!("edited by hand (hash {file_hash:.12})"),
        FileState::Unreadable { reason, .. } => format!("unreadable: {reason}"),
    }
}

fn confirm_view(
    project: &Project,
    candidates: &[CandidateRecord],
    questions: Option<u64>,
    lord_from: u64,
    split: Option<&emend_core::events::SplitRecord>,
) -> ConfirmView {
    let cfg = &project.config;
    let state = ConfirmState::replay_from(&cfg.gates, candidates, lord_from);
    let (unit, mde_n) = state.test_units(questions);
    let reuse = format!(
        "only each confirm test's verdict reaches the search, so under the global null the chance of any false \
         accept stays within W0 = {:.3} however many tests read this part; a new harness.split.seed reuses the \
         same questions and is not fresh data: fresh data is questions no search has read (add them to the dataset)",
        state.lord.config.w0
    );
    ConfirmView {
        questions,
        tests: state.lord.tests,
        next_alpha: state.lord.next_alpha(),
        lord_wealth: state.lord.wealth(),
        reuse,
        discordance_rate: state.discordance(),
        mde_80: mde_n.and_then(|n| state.next_mde(n)),
        mde_unit: unit.plural(),
        mde_n,
        split: split.map(emend_core::events::SplitRecord::describe_design),
        guarantee: split.map(emend_core::events::SplitRecord::population),
        lord_from_round: split.and_then(|s| s.lord_from_round),
    }
}

/// Model usage per role summed over the journal's rounds.
fn model_usage(rounds: &[Value]) -> emend_core::usage::Usage {
    let mut total = emend_core::usage::Usage::new();
    for r in rounds {
        let Some(Ok(usage)) = r.get("llm").map(|v| serde_json::from_value::<emend_core::usage::Usage>(v.clone()))
        else {
            continue;
        };
        for (role, u) in usage {
            total.entry(role).or_default().add(&u);
        }
    }
    total
}
