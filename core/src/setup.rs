//! What an evaluation is set up from: the task set (built in or a
//! LoCoMo-format file), the project's caches and the floor of free space they
//! keep, the MiniLM model, and why any of it could not be set up. The
//! backends and the model roles build on it.

use std::path::Path;
use std::sync::Arc;

use crate::config::Project;

/// Why a backend or the model roles could not be set up from the project's
/// configuration: what was wrong (naming the field), and the error beneath
/// it when there is one. Bad input (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SetupError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl SetupError {
    pub fn new(message: impl Into<String>) -> SetupError {
        SetupError { message: message.into(), source: None }
    }

    /// `message` says what could not be done; `source` says why.
    pub fn caused(message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> SetupError {
        SetupError { message: message.into(), source: Some(Box::new(source)) }
    }

    pub fn exit_class(&self) -> emend_journal::ErrorClass {
        emend_journal::ErrorClass::BadInput
    }
}

/// Free bytes the caches leave on their file system: the journal's reserve
/// ([`emend_journal::DEFAULT_MIN_FREE_BYTES`], below which it refuses to write) plus
/// [`CACHE_MARGIN_BYTES`] for the journal's own growth, so a cache never locks
/// the project. The one figure every cache (stage, dataset, embedding, model
/// reply) uses.
pub const CACHE_FLOOR_BYTES: u64 = emend_journal::DEFAULT_MIN_FREE_BYTES + CACHE_MARGIN_BYTES;
/// What the caches leave free above the journal's reserve.
pub const CACHE_MARGIN_BYTES: u64 = 8 * 1024 * 1024;

/// The floor every project cache keeps ([`CACHE_FLOOR_BYTES`], by `statvfs`).
pub fn cache_floor() -> emend_harness::space::Floor {
    emend_harness::space::Floor::statvfs(CACHE_FLOOR_BYTES)
}

/// Adds the project's persistent stage cache (`.emend/cache/stages/`, at most
/// `harness.stage_cache_mb`; none when that is 0). Call after plugging in models.
pub fn with_stage_cache(
    evaluator: emend_harness::Evaluator,
    project: &Project,
) -> Result<emend_harness::Evaluator, SetupError> {
    let mb = project.config.harness.stage_cache_mb;
    if mb == 0 {
        return Ok(evaluator);
    }
    let root = project.cache_dir().join("stages");
    evaluator
        .with_disk_cache_floor(&root, mb.saturating_mul(1024 * 1024), cache_floor())
        .map_err(|e| SetupError::new(format!("{}: cannot create the stage cache: {e}", root.display())))
}

/// The project's cache of parsed task sets (`.emend/cache/stages/datasets/`,
/// under the same `harness.stage_cache_mb` bound as the stage cache; none
/// when that is 0): see [`emend_harness::dataset::load_path_cached`].
pub fn dataset_cache(project: &Project) -> Result<Option<emend_harness::cache::DiskCache>, SetupError> {
    let mb = project.config.harness.stage_cache_mb;
    if mb == 0 {
        return Ok(None);
    }
    let root = project.cache_dir().join("stages");
    emend_harness::cache::DiskCache::open_named(&root, "datasets", mb.saturating_mul(1024 * 1024))
        .map(|c| Some(c.with_floor(cache_floor())))
        .map_err(|e| SetupError::new(format!("{}: cannot create the dataset cache: {e}", root.display())))
}

/// Plugs in the MiniLM embedder when a model directory is given:
/// `EMEND_MINILM_DIR` (it wins), else the project's `harness.minilm_dir`
/// (relative to emend.yaml). Inside a project its embeddings are kept in the
/// stage cache's directory (`.emend/cache/stages/minilm-<model hash>/`,
/// under the same size bound); outside one they are not kept. A directory
/// that is given but missing or malformed is bad input, naming the setting
/// and the file. Call after [`with_stage_cache`] or before: they are independent.
pub fn with_minilm(
    evaluator: emend_harness::Evaluator,
    project: Option<&Project>,
) -> Result<emend_harness::Evaluator, SetupError> {
    let configured = project.and_then(|p| p.config.harness.minilm_dir.as_ref().map(|d| p.dir.join(d)));
    let Some((dir, setting)) = emend_harness::minilm::locate(configured) else { return Ok(evaluator) };
    let mut model =
        emend_harness::minilm::MiniLm::load(&dir).map_err(|e| SetupError::new(format!("{setting}: {e}")))?;
    if let Some(p) = project.filter(|p| p.config.harness.stage_cache_mb > 0) {
        let root = p.cache_dir().join("stages");
        let name = format!("minilm-{}", &model.hash()[..16]);
        let cache = emend_harness::cache::DiskCache::open_named(
            &root,
            &name,
            p.config.harness.stage_cache_mb.saturating_mul(1024 * 1024),
        )
        .map_err(|e| SetupError::new(format!("{}: cannot create the embedding cache: {e}", root.display())))?;
        model = model.with_cache(cache.with_floor(cache_floor()));
    }
    Ok(evaluator.with_minilm(Arc::new(model)))
}

/// `builtin` or a LoCoMo-format file (relative paths against `base`).
pub fn load_tasks(tasks: &str, base: &Path) -> Result<emend_harness::Dataset, SetupError> {
    load_tasks_limited(tasks, base, emend_harness::dataset::DEFAULT_MAX_DATASET_BYTES)
}

/// [`load_tasks`] with the size limit of `harness.max_dataset_mb`.
pub fn load_tasks_limited(tasks: &str, base: &Path, limit: u64) -> Result<emend_harness::Dataset, SetupError> {
    if tasks == "builtin" {
        return Ok(emend_harness::Dataset::builtin());
    }
    let path = base.join(tasks);
    emend_harness::dataset::load_path_limited(&path, limit).map_err(|e| SetupError::new(format!("harness.tasks: {e}")))
}
