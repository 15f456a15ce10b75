//! Keys emend no longer reads. A setting that would load and change nothing
//! is refused, at its line, with the reason and what to write instead: the
//! five keys once named after the papers' symbols, three gate settings the
//! confirm test stopped using, the two keys `search.method` replaced, and
//! `cost.objective`, which only restated what the price says.

/// `(section, key, why it is refused)` of every retired key.
pub const RETIRED_KEYS: [(&str, &str, &str); 11] = [
    ("gates", "delta1", "renamed: write `probe_drop_max`"),
    ("gates", "epsilon_c", "renamed: write `category_drop_max`"),
    ("gates", "tau_rollback", "renamed: write `restore_below_best`"),
    ("gates", "lord_w0", "renamed: write `lord_initial_wealth`"),
    ("loop", "ucb_c", "renamed: write `exploration`"),
    (
        "gates",
        "alpha_schedule",
        "no longer read: LORD++ spends `gates.alpha` across the confirm tests (`gates.lord_initial_wealth`); delete it",
    ),
    (
        "gates",
        "bootstrap_unit",
        "no longer read: the confirm test is exact (by probe under replay) and the interval is paired by question; delete it",
    ),
    (
        "gates",
        "holdout_budget",
        "no longer read: nothing measured on the confirm part reaches the search, so there is no holdout budget to spend; delete it",
    ),
    (
        "gates",
        "step_bound",
        "replaced by `search.method`: `schema` is `method: steps`, `off` is the default `method: jump`; delete it",
    ),
    ("loop", "search", "replaced by `search.method`: `false` is `method: rules`, `true` is the default; delete it"),
    (
        "cost",
        "objective",
        "no longer read: the objective follows `cost.per_1k_tokens` (utility with a price, accuracy without one); delete it",
    ),
];

/// Why the key `key` of `section` is refused, when it is a retired one.
pub fn retired(section: &str, key: &str) -> Option<&'static str> {
    RETIRED_KEYS.iter().find(|(s, k, _)| *s == section && *k == key).map(|(_, _, why)| *why)
}
