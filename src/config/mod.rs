//! Typed broker configuration with Apache RocketMQ's key names and defaults.
//!
//! What this module owns:
//!
//! * [`StoreConfig`] (RocketMQ `MessageStoreConfig`) and [`BrokerConfig`] (RocketMQ
//!   `BrokerConfig` + `NettyServerConfig` keys), whose serde names are RocketMQ's exact camelCase
//!   keys (`storePathRootDir`, `brokerIP1`, `checkCRCOnRecover`, `warmMapedFileEnable`, …) and
//!   whose `Default`s are RocketMQ's defaults (`MessageStoreConfig.java`, `BrokerConfig.java`). Rust field names put the unit
//!   last (`sync_flush_timeout_ms`); the serde name stays RocketMQ's.
//! * Layered loading ([`load`], [`load_with_overrides`], [`load_with_runtime`], [`load_layers`])
//!   through the `config` crate, in RocketMQ's order (`BrokerStartup.java`): built-in defaults →
//!   `NAMESRV_ADDR` → the file (`-c`) → the keys updateBrokerConfig changed at runtime →
//!   `ACTORMQ_<KEY>` environment variables → command line (`-n`, `key=value`). So `-n` beats
//!   the file's `namesrvAddr`, which beats `NAMESRV_ADDR`.
//! * Two file formats, one key space: a Java `.properties` file (`broker.conf`, parsed by
//!   [`properties`]; what RocketMQ's `-c` takes) or TOML (`broker.toml`); see
//!   [`ConfigFileFormat::detect`].
//! * `-p` / `-m` output ([`print_config_items`]): every key, or the [`IMPORTANT_KEYS`].
//! * Validation ([`Config::validate`]) and error messages that always name the origin (file path
//!   or environment variable), the key, the offending value and the rule, e.g.
//!   `config/broker.toml: flushDiskType = "SOMETIMES": expected ASYNC_FLUSH or SYNC_FLUSH`.
//! * `messageDelayLevel` parsing ([`parse_delay_levels`]).
//!
//! Invariants:
//!
//! * **One flat namespace.** Like `broker.conf`, which RocketMQ applies to every config object,
//!   a file is a single flat table: every key belongs to exactly one of [`StoreConfig`] /
//!   [`BrokerConfig`], and the same merged table is deserialized into both (two passes, not
//!   `serde(flatten)`, which would lose the string → number conversion environment values need).
//! * **Nothing is silently dropped.** Keys that are not ours are returned in
//!   [`Loaded::unknown`] (with a "did you mean" hint) and RocketMQ keys that ActorMQ has no use
//!   for in [`Loaded::unsupported`]; the caller logs them ([`Loaded::log_warnings`]). RocketMQ
//!   itself ignores unknown keys silently.
//! * **A [`Loaded`] config is valid**: [`load_layers`] type-checks every value of every layer
//!   (not only the winning one), normalizes, then validates, and reports all problems at once.
//! * **Normalization** (done by the loader, as RocketMQ does in its getters/startup):
//!   `mappedFileSizeConsumeQueue` is rounded *up* to a multiple of 20 bytes (the ConsumeQueue
//!   unit); `haListenPort`, when no layer sets it, is `listenPort + 1` (0 stays 0).
//! * Port 0 is accepted for every port and means "ephemeral" (tests bind to a free port).
//! * Deliberate differences from RocketMQ, all stricter: a master must have `brokerId = 0`
//!   (RocketMQ silently forces it); out-of-range values are errors (RocketMQ clamps
//!   `diskMaxUsedSpaceRatio` to 10..=95, and accepts garbage it later trips over); `brokerIP1`
//!   must be an IP address (it is encoded into message ids). `storePathCommitLog` follows 5.x:
//!   unset means `${storePathRootDir}/commitlog` (4.9 fixed it to `~/store/commitlog`).
//!
//! Files, one concern each:
//!
//! * `store.rs`, `broker.rs`: the two typed structs, their defaults and derived paths;
//!   `values.rs`: the RocketMQ enums and serde helpers they share; `delay.rs`:
//!   `messageDelayLevel`.
//! * `keys.rs`: the key tables (every key, aliases, RocketMQ-only keys, important keys) and the
//!   flat `key=value` views (`to_properties`, `-p`/`-m`, GET_BROKER_CONFIG's body).
//! * `layers.rs`: the sources (file, environment, command line); `load.rs`: their order, the
//!   type checks, the merge and normalization; `validate.rs`: the rules, one function per group;
//!   `error.rs`: [`ConfigError`] and [`Violation`]; `properties.rs`: the Java `.properties`
//!   syntax; `tests/`: the unit tests, one file per concern.

mod broker;
mod delay;
mod error;
mod keys;
mod layers;
mod load;
pub mod properties;
mod store;
mod validate;
mod values;

#[cfg(test)]
mod tests;

pub use broker::{local_host_name, BrokerConfig};
pub use delay::{parse_delay_levels, DelayLevelError, DEFAULT_MESSAGE_DELAY_LEVEL};
pub use error::{ConfigError, Violation};
pub use keys::{known_keys, print_config_items, unknown_keys, IMPORTANT_KEYS, ROCKETMQ_ONLY_KEYS};
pub use layers::{
    parse_override, process_env, ConfigFileFormat, Layer, UnknownKey, CLI_ORIGIN, ENV_PREFIX,
    NAMESRV_ADDR_ENV,
};
pub use load::{load, load_layers, load_with_overrides, load_with_runtime, Loaded, DEFAULT_ORIGIN};
pub use store::{
    DelayLevelCache, StoreConfig, COMMIT_LOG_SIZE_GRANULE, CQ_UNIT_SIZE, MAX_COMMIT_LOG_FILE_SIZE,
    MAX_CONSUME_QUEUE_FILE_SIZE,
};
pub use validate::IN_MEMORY_ORIGIN;
pub use values::{BrokerRole, FlushDiskType};

use serde::Serialize;

/// The whole configuration. In files it is one flat namespace (like `broker.conf`); every key
/// belongs to exactly one of the two parts. Not `Deserialize` on purpose: load it with [`load`] /
/// [`load_layers`], which convert, normalize, validate and keep provenance. Serializes flat.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Config {
    #[serde(flatten)]
    pub store: StoreConfig,
    #[serde(flatten)]
    pub broker: BrokerConfig,
}

impl Config {
    /// Applies RocketMQ's silent adjustments: rounds `mappedFileSizeConsumeQueue` up to a
    /// multiple of 20 bytes (RocketMQ's getter does `ceil(size / 20) * 20`). Idempotent.
    pub fn normalize(&mut self) {
        let size = self.store.mapped_file_size_consume_queue;
        if let Some(rounded) = size.div_ceil(CQ_UNIT_SIZE).checked_mul(CQ_UNIT_SIZE) {
            self.store.mapped_file_size_consume_queue = rounded;
        }
    }
}
