//! Errors of loading and validating a configuration: [`ConfigError`] (a source that cannot be
//! read, or every bad value at once) and [`Violation`] (one bad value).
//!
//! Invariant: a violation always names the origin (file path, environment variable, command
//! line, …), the key as written, the value as written and the rule it breaks, rendered as
//! `{origin}: {key} = {value}: {rule}`.

use std::fmt;

/// One bad value: `{origin}: {key} = {value}: {rule}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// File path, `environment variable ACTORMQ_X`, [`DEFAULT_ORIGIN`](super::DEFAULT_ORIGIN), …
    pub origin: String,
    /// The key as written by the user (RocketMQ spelling for keys matched from the environment).
    pub key: String,
    /// The offending value as written (strings quoted).
    pub value: String,
    /// The rule it breaks, e.g. `expected ASYNC_FLUSH or SYNC_FLUSH`.
    pub rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} = {}: {}",
            self.origin, self.key, self.value, self.rule
        )
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source could not be read or parsed (missing file, TOML syntax error).
    #[error("{origin}: {message}")]
    Source { origin: String, message: String },
    /// Values with the wrong type, out of range or inconsistent; all of them, one per line.
    #[error("{}", join_violations(.0))]
    Invalid(Vec<Violation>),
}

impl ConfigError {
    /// The bad values (empty for [`ConfigError::Source`]).
    pub fn violations(&self) -> &[Violation] {
        match self {
            ConfigError::Invalid(v) => v,
            ConfigError::Source { .. } => &[],
        }
    }
}

fn join_violations(v: &[Violation]) -> String {
    v.iter()
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
