//! The default value of every optional `emend.yaml` setting, as the
//! functions serde's `default = "..."` attributes name. `emend init` writes
//! these values (through the types' `Default`s).

use std::path::PathBuf;

use super::JudgeKind;

pub(super) fn default_command_timeout() -> f64 {
    600.0
}
pub(super) fn default_shards() -> usize {
    1
}
pub(super) fn d_every_sessions() -> u32 {
    1
}
pub(super) fn default_max_dataset_mb() -> u64 {
    emend_harness::dataset::DEFAULT_MAX_DATASET_BYTES / (1024 * 1024)
}
pub(super) fn default_stage_cache_mb() -> u64 {
    1024
}
pub(super) fn default_ray_shards() -> usize {
    2
}
pub(super) fn default_ray_timeout() -> f64 {
    600.0
}
pub(super) fn default_python() -> String {
    "python3".into()
}
pub(super) fn default_judge() -> JudgeKind {
    JudgeKind::Evidence
}
pub(super) fn default_f1() -> f64 {
    0.5
}
pub(super) fn default_ceiling() -> u32 {
    2000
}
pub(super) fn d_confirm_fraction() -> f64 {
    emend_stats::DEFAULT_CONFIRM_FRACTION
}
pub(super) fn d_lord_initial_wealth() -> f64 {
    0.5
}
pub(super) fn d_probe_drop_max() -> f64 {
    0.02
}
pub(super) fn d_alpha() -> f64 {
    0.05
}
pub(super) fn d_category_drop_max() -> f64 {
    0.02
}
pub(super) fn d_restore_below_best() -> f64 {
    0.03
}
pub(super) fn d_cost() -> Option<f64> {
    None
}
pub(super) fn d_consensus() -> usize {
    8
}
pub(super) fn d_race_level() -> f64 {
    0.05
}
pub(super) fn d_first_look() -> usize {
    24
}
pub(super) fn d_prune_tolerance() -> usize {
    1
}
pub(super) fn d_stall() -> usize {
    40
}
pub(super) fn d_converge() -> usize {
    80
}
pub(super) fn d_startup() -> usize {
    10
}
pub(super) fn d_probe() -> usize {
    100
}
pub(super) fn d_full_tests() -> usize {
    1
}
pub(super) fn d_resamples() -> usize {
    10_000
}
pub(super) fn d_rounds() -> u32 {
    20
}
pub(super) fn d_candidates() -> usize {
    4
}
pub(super) fn d_exploration() -> f64 {
    1.0
}
pub(super) fn d_max_tokens() -> u32 {
    512
}
pub(super) fn d_role_concurrency() -> usize {
    4
}
pub(super) fn d_role_timeout() -> f64 {
    60.0
}
pub(super) fn d_role_retries() -> u32 {
    4
}
pub(super) fn d_role_backoff() -> f64 {
    0.5
}
pub(super) fn d_role_deadline() -> f64 {
    300.0
}
pub(super) fn d_hook_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}
pub(super) fn d_strategy() -> PathBuf {
    PathBuf::from("strategies/served.yaml")
}

pub(super) fn d_min_saving() -> f64 {
    0.2
}
