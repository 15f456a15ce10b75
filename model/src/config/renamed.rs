//! Keys renamed from the papers' symbols to plain names. For one release the
//! old spelling still loads (serde aliases on the types, and a warning from
//! the loader); a file that sets both spellings is refused.

/// `(section, old key, new key)` of every renamed key.
pub const RENAMED_KEYS: [(&str, &str, &str); 5] = [
    ("gates", "delta1", "probe_drop_max"),
    ("gates", "epsilon_c", "category_drop_max"),
    ("gates", "tau_rollback", "restore_below_best"),
    ("gates", "lord_w0", "lord_initial_wealth"),
    ("loop", "ucb_c", "exploration"),
];

/// An old key a configuration still uses, both as dotted paths
/// (`gates.delta1`, `gates.probe_drop_max`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    pub old: String,
    pub new: String,
}

impl Renamed {
    /// The one-line deprecation warning for `file`.
    pub fn warning(&self, file: &std::path::Path) -> String {
        format!(
            "{}: {} is deprecated, renamed {}; the old key still loads in this release",
            file.display(),
            self.old,
            self.new
        )
    }
}

/// The old keys `text` uses; an error when a section sets a key under both
/// its names. Text that is not a YAML mapping yields none: the typed parse
/// reports what is wrong with it.
pub fn renamed_keys(text: &str) -> Result<Vec<Renamed>, String> {
    let Ok(serde_yaml::Value::Mapping(doc)) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for (section, old, new) in RENAMED_KEYS {
        let Some(serde_yaml::Value::Mapping(m)) = doc.get(section) else { continue };
        if !m.contains_key(old) {
            continue;
        }
        if m.contains_key(new) {
            return Err(format!(
                "{section}.{old} and {section}.{new} are both set ({old} is the old name of {new}); keep {section}.{new} only"
            ));
        }
        found.push(Renamed { old: format!("{section}.{old}"), new: format!("{section}.{new}") });
    }
    Ok(found)
}
