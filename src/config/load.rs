//! Loading: the layers in RocketMQ's order ([`load_with_runtime`]: built-in defaults →
//! `NAMESRV_ADDR` → the file → the runtime changes of updateBrokerConfig → `ACTORMQ_*` → the
//! command line), each key resolved and type-checked ([`load_layers`]), merged through the
//! `config` crate, normalized and validated into a [`Loaded`].
//!
//! Owns no state. Messages in: [`Layer`]s; out: a [`Loaded`] (config + the origin of every
//! value in effect + the keys not applied) or a [`ConfigError`] listing every problem at once.
//! Invariants: a [`Loaded`] config is valid; every value of every layer is type-checked, not
//! only the winning one; nothing is silently dropped (unknown and RocketMQ-only keys are
//! returned, with their origin).

use std::collections::BTreeMap;
use std::path::Path;

use ::config::{Source, Value, ValueKind};
use serde::Deserialize;

use super::keys::{registry, Kind, Part, Registry, Resolved};
use super::validate::q;
use super::{BrokerConfig, Config, ConfigError, Layer, StoreConfig, UnknownKey, Violation};

/// Origin reported for keys no layer set.
pub const DEFAULT_ORIGIN: &str = "built-in default";

/// A loaded, normalized and validated configuration plus its provenance.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// Key → origin of the value in effect, for keys some layer set (or that were derived).
    pub origins: BTreeMap<String, String>,
    /// Keys that are not configuration keys (typos, tables, foreign `ACTORMQ_*` variables).
    pub unknown: Vec<UnknownKey>,
    /// RocketMQ keys ActorMQ has no use for ([`ROCKETMQ_ONLY_KEYS`](super::ROCKETMQ_ONLY_KEYS)).
    pub unsupported: Vec<UnknownKey>,
    /// Other warnings from the sources ([`Layer::notes`]): a key set twice in one `.properties`
    /// file, a quoted value there.
    pub notes: Vec<UnknownKey>,
}

impl Loaded {
    /// Where `key`'s value came from: a file path, `environment variable …`, or
    /// [`DEFAULT_ORIGIN`].
    pub fn origin_of(&self, key: &str) -> &str {
        self.origins
            .get(key)
            .map(String::as_str)
            .unwrap_or(DEFAULT_ORIGIN)
    }

    /// `origin: key` for each unknown key.
    pub fn unknown_keys(&self) -> Vec<String> {
        self.unknown
            .iter()
            .map(|u| format!("{}: {}", u.origin, u.key))
            .collect()
    }

    /// One line per unknown or unsupported key and per note, naming file/variable and key.
    pub fn warnings(&self) -> Vec<String> {
        self.unknown
            .iter()
            .chain(&self.notes)
            .chain(&self.unsupported)
            .map(UnknownKey::to_string)
            .collect()
    }

    /// Logs [`Self::warnings`] at WARN.
    pub fn log_warnings(&self) {
        for w in self.warnings() {
            tracing::warn!(target: "actormq::config", "{w}");
        }
    }

    /// Re-validates `config` (e.g. after the caller changed it), naming origins.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.config.validate_with(&|k| self.origin_of(k).to_owned())
    }
}

/// [`load_with_overrides`] without command-line overrides.
pub fn load(file: Option<&Path>, env: &[(String, String)]) -> Result<Loaded, ConfigError> {
    load_with_overrides(file, env, &[])
}

/// Loads, lowest to highest precedence: built-in defaults → `NAMESRV_ADDR` from `env` → `file`
/// (`-c`; Java properties or TOML, see [`Layer::from_file`]) → `ACTORMQ_*` from `env` → `cli`
/// (`-n` as `("namesrvAddr", addr)`, then `key=value` overrides, see
/// [`parse_override`](super::parse_override)).
///
/// This is RocketMQ's namesrvAddr precedence (`BrokerStartup.java`, `BrokerConfig.java`): `-n`
/// beats the file's `namesrvAddr`, which beats `NAMESRV_ADDR`. `env` is passed in (use
/// [`process_env`](super::process_env) in the broker) so tests never touch the process
/// environment.
pub fn load_with_overrides(
    file: Option<&Path>,
    env: &[(String, String)],
    cli: &[(String, String)],
) -> Result<Loaded, ConfigError> {
    load_with_runtime(file, None, env, cli)
}

/// [`load_with_overrides`] plus, between the file and the environment, the keys an operator
/// changed at runtime (`updateBrokerConfig`), kept in a `.properties` file under the store.
pub fn load_with_runtime(
    file: Option<&Path>,
    runtime: Option<&Path>,
    env: &[(String, String)],
    cli: &[(String, String)],
) -> Result<Loaded, ConfigError> {
    let mut layers = vec![Layer::from_namesrv_addr_env(env)];
    if let Some(path) = file {
        layers.push(Layer::from_file(path)?);
    }
    if let Some(path) = runtime {
        layers.push(Layer::from_properties_file(path)?);
    }
    layers.push(Layer::from_env(env));
    layers.push(Layer::from_cli(cli));
    load_layers(layers)
}

/// Merges `layers` (later wins) over the built-in defaults, through the `config` crate.
///
/// Every value of every layer is type-checked, not only the one in effect: a bad value in a
/// file is an error even if the environment overrides it. Then the config is normalized
/// ([`Config::normalize`], `haListenPort = listenPort + 1` when no layer set it) and validated.
/// All violations are returned together.
pub fn load_layers(layers: Vec<Layer>) -> Result<Loaded, ConfigError> {
    let mut triage = Triage::default();
    let checked: Vec<CheckedLayer> = layers.into_iter().map(|l| triage.check_layer(l)).collect();
    if !triage.violations.is_empty() {
        return Err(ConfigError::Invalid(triage.violations));
    }
    let mut config = merge(checked)?;
    config.normalize();
    derive_ha_listen_port(&mut config, &mut triage.origins)?;
    let loaded = Loaded {
        config,
        origins: triage.origins,
        unknown: triage.unknown,
        unsupported: triage.unsupported,
        notes: triage.notes,
    };
    loaded.validate()?;
    Ok(loaded)
}

/// Where the keys of the layers went: applied (with the origin of the value in effect), a
/// violation, unknown, or a RocketMQ key ActorMQ does not use; plus the layers' notes.
#[derive(Default)]
struct Triage {
    origins: BTreeMap<String, String>,
    violations: Vec<Violation>,
    unknown: Vec<UnknownKey>,
    unsupported: Vec<UnknownKey>,
    notes: Vec<UnknownKey>,
}

impl Triage {
    /// Resolves and type-checks every key of `layer`; returns the values to merge.
    fn check_layer(&mut self, layer: Layer) -> CheckedLayer {
        let reg = registry();
        self.notes.extend(layer.notes);
        let mut checked = ::config::Map::new();
        for (key, value) in layer.values {
            let origin = value
                .origin()
                .map(str::to_owned)
                .unwrap_or_else(|| layer.origin.clone());
            match reg.resolve(&key) {
                Resolved::Known(canonical) => {
                    match check_value(reg, canonical, &key, value, &origin) {
                        Ok(v) => {
                            self.origins.insert(canonical.to_owned(), origin);
                            checked.insert(canonical.to_owned(), v);
                        }
                        Err(v) => self.violations.push(v),
                    }
                }
                Resolved::RocketMqOnly => self.unsupported.push(UnknownKey {
                    origin,
                    key,
                    hint: "RocketMQ setting that ActorMQ does not use (ignored)".to_owned(),
                }),
                Resolved::Unknown => {
                    let hint = unknown_hint(reg, &key, &value.kind);
                    self.unknown.push(UnknownKey { origin, key, hint });
                }
            }
        }
        CheckedLayer(checked)
    }
}

/// Why an unknown key is ignored, with a "did you mean" when a known key is close.
fn unknown_hint(reg: &Registry, key: &str, value: &ValueKind) -> String {
    match (value, reg.suggest(key)) {
        (ValueKind::Table(_), _) => {
            "unknown key (ignored): tables are not supported, settings are one flat list like broker.conf"
                .to_owned()
        }
        (_, Some(s)) => format!("unknown key (ignored); did you mean {s}?"),
        (_, None) => "unknown key (ignored)".to_owned(),
    }
}

/// Merges the checked layers (later wins) over the defaults and deserializes the one flat table
/// into both parts (two passes, see the module docs of `config`).
fn merge(layers: Vec<CheckedLayer>) -> Result<Config, ConfigError> {
    let internal = |e: ::config::ConfigError| ConfigError::Source {
        origin: "configuration".to_owned(),
        message: e.to_string(),
    };
    let builder = layers
        .into_iter()
        .fold(::config::Config::builder(), |b, layer| b.add_source(layer));
    let merged = builder.build().map_err(internal)?;
    let store: StoreConfig = merged.clone().try_deserialize().map_err(internal)?;
    let broker: BrokerConfig = merged.try_deserialize().map_err(internal)?;
    Ok(Config { store, broker })
}

/// `haListenPort = listenPort + 1` when no layer set it (0 stays 0); recorded as derived in
/// `origins` when `listenPort` was set.
fn derive_ha_listen_port(
    config: &mut Config,
    origins: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    if origins.contains_key("haListenPort") {
        return Ok(());
    }
    let listen = config.broker.listen_port;
    let Some(ha) = (if listen == 0 {
        Some(0)
    } else {
        listen.checked_add(1)
    }) else {
        return Err(ConfigError::Invalid(vec![Violation {
            origin: origins
                .get("listenPort")
                .cloned()
                .unwrap_or_else(|| DEFAULT_ORIGIN.to_owned()),
            key: "listenPort".to_owned(),
            value: listen.to_string(),
            rule: "expected ≤ 65534 when haListenPort is not set (it defaults to listenPort + 1)"
                .to_owned(),
        }]));
    };
    config.store.ha_listen_port = ha;
    if origins.contains_key("listenPort") {
        origins.insert(
            "haListenPort".to_owned(),
            "derived from listenPort (listenPort + 1)".to_owned(),
        );
    }
    Ok(())
}

/// A layer after key resolution and type conversion, as a `config` source.
#[derive(Debug, Clone)]
struct CheckedLayer(::config::Map<String, Value>);

impl Source for CheckedLayer {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }
    fn collect(&self) -> Result<::config::Map<String, Value>, ::config::ConfigError> {
        Ok(self.0.clone())
    }
}

/// Converts `value` to the key's kind (strings from the environment / properties become numbers
/// and booleans) and checks it deserializes (ranges of the Rust type, enum spellings).
fn check_value(
    reg: &Registry,
    canonical: &str,
    written: &str,
    value: Value,
    origin: &str,
) -> Result<Value, Violation> {
    let shown = render(&value.kind);
    let fail = |rule: String| Violation {
        origin: origin.to_owned(),
        key: written.to_owned(),
        value: shown.clone(),
        rule,
    };
    let (part, kind) = reg.kind(canonical);
    let converted = convert(kind, value.kind).map_err(|rule| fail(rule.to_owned()))?;
    let value = Value::new(Some(&origin.to_owned()), converted);

    let mut one = ::config::Map::new();
    one.insert(canonical.to_owned(), value.clone());
    let table = Value::new(None, ValueKind::Table(one));
    let result = match part {
        Part::Store => StoreConfig::deserialize(table).map(drop),
        Part::Broker => BrokerConfig::deserialize(table).map(drop),
    };
    result.map_err(|e| fail(describe(&e)))?;
    Ok(value)
}

fn convert(kind: Kind, v: ValueKind) -> Result<ValueKind, &'static str> {
    match (kind, v) {
        (Kind::Bool, ValueKind::Boolean(b)) => Ok(ValueKind::Boolean(b)),
        (Kind::Bool, ValueKind::String(s)) if s.trim().eq_ignore_ascii_case("true") => {
            Ok(ValueKind::Boolean(true))
        }
        (Kind::Bool, ValueKind::String(s)) if s.trim().eq_ignore_ascii_case("false") => {
            Ok(ValueKind::Boolean(false))
        }
        (Kind::Bool, _) => Err("expected true or false"),
        (
            Kind::UInt,
            v @ (ValueKind::I64(_) | ValueKind::U64(_) | ValueKind::I128(_) | ValueKind::U128(_)),
        ) => Ok(v),
        (Kind::UInt, ValueKind::String(s)) => {
            let t = s.trim();
            t.parse::<i64>()
                .map(ValueKind::I64)
                .or_else(|_| t.parse::<u64>().map(ValueKind::U64))
                .map_err(|_| "expected an integer")
        }
        (Kind::UInt, _) => Err("expected an integer"),
        (Kind::Str, ValueKind::String(s)) => Ok(ValueKind::String(s)),
        (
            Kind::Str,
            v @ (ValueKind::I64(_)
            | ValueKind::U64(_)
            | ValueKind::I128(_)
            | ValueKind::U128(_)
            | ValueKind::Boolean(_)
            | ValueKind::Float(_)),
        ) => Ok(ValueKind::String(v.to_string())),
        (Kind::Str, _) => Err("expected a string"),
    }
}

fn render(v: &ValueKind) -> String {
    match v {
        ValueKind::String(s) => q(s),
        ValueKind::Table(_) => "{…}".to_owned(),
        ValueKind::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(|v| render(&v.kind))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ValueKind::Nil => "nil".to_owned(),
        other => other.to_string(),
    }
}

/// The rule part of a `config` deserialization error.
fn describe(e: &::config::ConfigError) -> String {
    match e {
        ::config::ConfigError::Type { expected, .. } => match *expected {
            "an unsigned 8 bit integer" => "expected an integer in 0..=255".to_owned(),
            "an unsigned 16 bit integer" => "expected an integer in 0..=65535".to_owned(),
            "an unsigned 32 bit integer" => "expected an integer in 0..=4294967295".to_owned(),
            other if other.contains("unsigned") => "expected a non-negative integer".to_owned(),
            other => format!("expected {other}"),
        },
        ::config::ConfigError::At { error, .. } => describe(error),
        ::config::ConfigError::Message(m) => m.clone(),
        other => other.to_string(),
    }
}
