//! The sources of settings, each a [`Layer`] (a flat `key → value` table with origins): a
//! configuration file ([`Layer::from_file`]: Java `.properties` as RocketMQ's `broker.conf`, or
//! TOML, see [`ConfigFileFormat::detect`]), `NAMESRV_ADDR`, `ACTORMQ_*` variables and the
//! command line ([`parse_override`]). `load.rs` stacks and merges them.
//!
//! Owns no state. Invariants: every value carries the origin messages name (file path,
//! `environment variable NAME`, [`CLI_ORIGIN`]); keys are kept as written (only
//! `ACTORMQ_<KEY>` names are matched to RocketMQ spellings), so unknown keys reach the loader
//! and are reported; a source that cannot be read or parsed is a [`ConfigError::Source`]
//! naming it (and the line, for `.properties` syntax errors).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use ::config::{FileFormat, Format, Value, ValueKind};

use super::keys::{registry, squash};
use super::{properties, ConfigError};

/// Prefix of environment overrides: `ACTORMQ_<KEY>`, key matched case-insensitively.
pub const ENV_PREFIX: &str = "ACTORMQ_";

/// RocketMQ's environment variable for the name server list (lower precedence than the file).
pub const NAMESRV_ADDR_ENV: &str = "NAMESRV_ADDR";

/// Origin of command-line overrides (`-n`, `key=value`).
pub const CLI_ORIGIN: &str = "command line";

/// One source of settings: a flat `key → value` table. Later layers override earlier ones.
///
/// Each [`Value`] carries its own origin (`Value::origin()`), used in messages; values without
/// one are attributed to the layer's `origin`. Keys are matched exactly against RocketMQ's names
/// ([`Layer::from_env`] resolves environment names to them first). Sources: [`Layer::from_file`]
/// (`.conf`/`.properties` or `.toml`), [`Layer::from_env`], [`Layer::from_namesrv_addr_env`],
/// [`Layer::from_cli`], [`Layer::from_strings`].
#[derive(Debug, Clone, Default)]
pub struct Layer {
    /// File path, "environment", "command line", …
    pub origin: String,
    pub values: BTreeMap<String, Value>,
    /// Warnings found while reading the source (a key set twice in a `.properties` file, a value
    /// in quotes there); passed on in [`Loaded::notes`](super::Loaded::notes).
    pub notes: Vec<UnknownKey>,
}

impl Layer {
    pub fn new(origin: impl Into<String>) -> Self {
        Layer {
            origin: origin.into(),
            values: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    /// Sets `key` with this layer's origin.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<ValueKind>) -> &mut Self {
        self.values
            .insert(key.into(), Value::new(Some(&self.origin), value.into()));
        self
    }

    /// A layer of string values (Java `.properties`, CLI `key=value`); strings convert to numbers
    /// and booleans where the key needs it.
    pub fn from_strings<K, V>(
        origin: impl Into<String>,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        let mut layer = Layer::new(origin);
        for (k, v) in pairs {
            layer.set(k, v.into());
        }
        layer
    }

    /// Parses TOML text; `origin` names it in messages (normally the file path).
    pub fn from_toml_str(origin: impl Into<String>, text: &str) -> Result<Self, ConfigError> {
        let origin = origin.into();
        let table =
            FileFormat::Toml
                .parse(Some(&origin), text)
                .map_err(|e| ConfigError::Source {
                    origin: origin.clone(),
                    message: e.to_string().trim_end().to_owned(),
                })?;
        Ok(Layer {
            values: table.into_iter().collect(),
            origin,
            notes: Vec::new(),
        })
    }

    /// Reads and parses a TOML file; the path as given is the origin.
    pub fn from_toml_file(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Source {
            origin: origin.clone(),
            message: format!("cannot read: {e}"),
        })?;
        Self::from_toml_str(origin, text.strip_prefix('\u{feff}').unwrap_or(&text))
    }

    /// Parses Java `.properties` text (RocketMQ `broker.conf`, see [`properties`]); `origin`
    /// names it in messages (normally the file path). Values are strings, converted to numbers and
    /// booleans where the key needs it; surrounding whitespace is trimmed (Java keeps trailing
    /// blanks, a classic broker.conf pitfall). Syntax errors name `origin:line`. The last of
    /// duplicate keys wins, as in Java, with a warning in [`Layer::notes`].
    pub fn from_properties_str(origin: impl Into<String>, text: &str) -> Result<Self, ConfigError> {
        let origin = origin.into();
        let entries = properties::parse(text).map_err(|e| ConfigError::Source {
            origin: format!("{origin}:{}", e.line),
            message: e.message,
        })?;
        let mut layer = Layer::new(origin);
        let mut first_line: BTreeMap<String, usize> = BTreeMap::new();
        for entry in entries {
            let value = entry.value.trim();
            if let Some(prev) = first_line.insert(entry.key.clone(), entry.line) {
                layer.notes.push(UnknownKey {
                    origin: layer.origin.clone(),
                    key: entry.key.clone(),
                    hint: format!(
                        "set on line {prev} and again on line {}; the last one wins (as in RocketMQ)",
                        entry.line
                    ),
                });
            }
            let quoted = value.len() >= 2
                && ((value.starts_with('"') && value.ends_with('"'))
                    || (value.starts_with('\'') && value.ends_with('\'')));
            if quoted {
                layer.notes.push(UnknownKey {
                    origin: layer.origin.clone(),
                    key: entry.key.clone(),
                    hint: format!(
                        "value {value} on line {} is in quotes; in a .properties file the quotes are \
                         part of the value (write {}={})",
                        entry.line,
                        entry.key,
                        &value[1..value.len() - 1]
                    ),
                });
            }
            layer.set(entry.key, value);
        }
        Ok(layer)
    }

    /// Reads and parses a Java `.properties` file (UTF-8, else ISO-8859-1 as Java reads it); the
    /// path as given is the origin.
    pub fn from_properties_file(path: &Path) -> Result<Self, ConfigError> {
        let bytes = read_file(path)?;
        Self::from_properties_str(path.display().to_string(), &properties::decode(&bytes))
    }

    /// Reads a configuration file in the format [`ConfigFileFormat::detect`] picks (`.conf` and
    /// `.properties`: Java properties; `.toml`: TOML; otherwise by content). The path as given is
    /// the origin of its values.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let bytes = read_file(path)?;
        let origin = path.display().to_string();
        let text = properties::decode(&bytes);
        match ConfigFileFormat::detect(path, &text) {
            ConfigFileFormat::Properties => Self::from_properties_str(origin, &text),
            ConfigFileFormat::Toml => {
                let text = std::str::from_utf8(&bytes).map_err(|e| ConfigError::Source {
                    origin: origin.clone(),
                    message: format!("a TOML file must be UTF-8 text: {e}"),
                })?;
                Self::from_toml_str(origin, text.strip_prefix('\u{feff}').unwrap_or(text))
            }
        }
    }

    /// Command-line overrides: `-n` as `("namesrvAddr", addr)` and `key=value` arguments (see
    /// [`parse_override`]), in command-line order (a later pair for the same key wins). Keys are
    /// RocketMQ's exact names; values are trimmed. Origin: [`CLI_ORIGIN`].
    pub fn from_cli(pairs: &[(String, String)]) -> Self {
        Layer::from_strings(
            CLI_ORIGIN,
            pairs
                .iter()
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())),
        )
    }

    /// `ACTORMQ_<KEY>` variables. `<KEY>` matches a RocketMQ key ignoring case and `_`, so
    /// `ACTORMQ_FLUSHDISKTYPE`, `ACTORMQ_flushDiskType` and `ACTORMQ_FLUSH_DISK_TYPE` all set
    /// `flushDiskType`. Values are trimmed; each value's origin is `environment variable <NAME>`.
    /// Unmatched names stay in the layer (under `<KEY>`) so they are reported as unknown.
    /// If two variables name the same key, the later one in `env` wins.
    pub fn from_env(env: &[(String, String)]) -> Self {
        let reg = registry();
        let mut layer = Layer::new("environment");
        for (name, value) in env {
            let Some(suffix) = name
                .get(..ENV_PREFIX.len())
                .filter(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
                .map(|_| &name[ENV_PREFIX.len()..])
            else {
                continue;
            };
            if suffix.is_empty() {
                continue;
            }
            let key = reg
                .squashed
                .get(&squash(suffix))
                .cloned()
                .unwrap_or_else(|| suffix.to_owned());
            let origin = format!("environment variable {name}");
            layer
                .values
                .insert(key, Value::new(Some(&origin), value.trim()));
        }
        layer
    }

    /// `NAMESRV_ADDR`, RocketMQ's fallback for `namesrvAddr`. [`load`](super::load) puts this layer *below* the
    /// file, as RocketMQ does (file `namesrvAddr` wins); `ACTORMQ_NAMESRVADDR` is above it.
    pub fn from_namesrv_addr_env(env: &[(String, String)]) -> Self {
        let mut layer = Layer::new(format!("environment variable {NAMESRV_ADDR_ENV}"));
        if let Some((_, v)) = env
            .iter()
            .rev()
            .find(|(k, v)| k == NAMESRV_ADDR_ENV && !v.trim().is_empty())
        {
            layer.set("namesrvAddr", v.trim());
        }
        layer
    }
}

/// A key that was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// Where it was written.
    pub origin: String,
    /// As written.
    pub key: String,
    /// Why it is ignored / what was probably meant.
    pub hint: String,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.origin, self.key, self.hint)
    }
}

/// Parses one command-line `key=value` override (split at the first `=`; key and value
/// trimmed). The key must be non-empty; the value may be empty (= unset for optional keys).
pub fn parse_override(arg: &str) -> Result<(String, String), ConfigError> {
    match arg.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(ConfigError::Source {
            origin: CLI_ORIGIN.to_owned(),
            message: format!("{arg:?}: expected key=value, e.g. flushDiskType=SYNC_FLUSH"),
        }),
    }
}

/// The format of a configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFileFormat {
    /// Java `.properties`, RocketMQ's `broker.conf`.
    Properties,
    /// TOML, flat (no tables), e.g. `config/broker.toml`.
    Toml,
}

impl ConfigFileFormat {
    /// By extension, ignoring case: `.conf`/`.properties` → properties, `.toml` → TOML.
    pub fn from_extension(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "conf" | "properties" => Some(Self::Properties),
            "toml" => Some(Self::Toml),
            _ => None,
        }
    }

    /// By extension, else by content: TOML if `text` parses as TOML (a properties file whose
    /// values are all numbers and booleans means the same in both) or looks like TOML (a
    /// `[table]` line, a quoted/array/inline-table value), else properties.
    pub fn detect(path: &Path, text: &str) -> Self {
        if let Some(format) = Self::from_extension(path) {
            return format;
        }
        if FileFormat::Toml.parse(None, text).is_ok() {
            return Self::Toml;
        }
        let looks_like_toml = text.lines().map(str::trim_start).any(|line| {
            if line.starts_with('[') {
                return true;
            }
            if line.starts_with(['#', '!']) {
                return false;
            }
            line.split_once('=')
                .is_some_and(|(_, v)| v.trim_start().starts_with(['"', '\'', '[', '{']))
        });
        if looks_like_toml {
            Self::Toml
        } else {
            Self::Properties
        }
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError::Source {
        origin: path.display().to_string(),
        message: format!("cannot read: {e}"),
    })
}

/// The process environment as UTF-8 pairs (non-UTF-8 entries skipped), for [`load`](super::load).
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
