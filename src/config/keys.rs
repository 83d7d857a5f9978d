//! The key tables: every key ActorMQ understands (derived from the serde names of
//! [`StoreConfig`] and [`BrokerConfig`], so it cannot drift from them), the 5.x aliases, the
//! RocketMQ keys ActorMQ ignores, the [`IMPORTANT_KEYS`] of `-m`, and the flat `key=value`
//! views built on them: [`Config::to_properties`] (what updateBrokerConfig starts from) and
//! [`print_config_items`] (`-p` / `-m`, and GET_BROKER_CONFIG's body; see
//! `actors/src/broker/admin.rs`).
//!
//! Owns one lazily built, immutable registry. Invariants: every key belongs to exactly one of
//! the two structs (one flat namespace, like `broker.conf`); key matching is exact, as RocketMQ's
//! reflection-based loader; "did you mean" hints ignore case and `_`/`-`/`.`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::{properties, BrokerConfig, Config, StoreConfig};

/// The keys `-m` (`printImportantConfig`) prints: those RocketMQ marks `@ImportantField` that
/// ActorMQ has, plus the identity, port and file-size keys operators check first.
pub const IMPORTANT_KEYS: &[&str] = &[
    // BrokerConfig / NettyServerConfig
    "namesrvAddr",
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "brokerIP1",
    "brokerIP2",
    "listenPort",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "rejectTransactionMessage",
    // MessageStoreConfig
    "brokerRole",
    "flushDiskType",
    "storePathRootDir",
    "storePathCommitLog",
    "mappedFileSizeCommitLog",
    "maxMessageSize",
    "deleteWhen",
    "fileReservedTime",
    "deleteFileBatchMax",
    "cleanFileForciblyEnable",
    "flushIntervalCommitLog",
    "commitIntervalCommitLog",
    "flushCommitLogTimed",
    "transientStorePoolEnable",
    "haListenPort",
    "haMasterAddress",
    "messageIndexEnable",
    "messageIndexSafe",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInDisk",
    "maxTransferCountOnMessageInDisk",
    "accessMessageInMemoryMaxRatio",
];

/// 5.x spellings accepted for our keys: (alias, canonical key).
const ALIASES: &[(&str, &str)] = &[("haMaxGapNotInSync", "haSlaveFallbehindMax")];

/// RocketMQ keys that have no effect in ActorMQ (thread pools and locks replaced by actors,
/// features not implemented). Reported in [`Loaded::unsupported`](super::Loaded::unsupported), not as unknown.
pub const ROCKETMQ_ONLY_KEYS: &[&str] = &[
    "aclEnable",
    "adminBrokerThreadPoolNums",
    "bitMapLengthConsumeQueueExt",
    "clientManageThreadPoolNums",
    "consumerManageThreadPoolNums",
    "duplicationEnable",
    "enableConsumeQueueExt",
    "enableDLegerCommitLog",
    "enablePropertyFilter",
    "enableScheduleAsyncDeliver",
    "endTransactionThreadPoolNums",
    "heartbeatThreadPoolNums",
    "inSyncReplicas",
    "mappedFileSizeConsumeQueueExt",
    "maxRecoveryCommitlogFiles",
    "metricsExporterType",
    "minInSyncReplicas",
    "pullMessageThreadPoolNums",
    "pullThreadPoolQueueCapacity",
    "putMessageTimeout",
    "queryMessageThreadPoolNums",
    "rocketmqHome",
    "sendMessageThreadPoolNums",
    "sendThreadPoolQueueCapacity",
    "serverCallbackExecutorThreads",
    "serverPooledByteBufAllocatorEnable",
    "serverSocketRcvBufSize",
    "serverSocketSndBufSize",
    "serverWorkerThreads",
    "timerWheelEnable",
    "totalReplicas",
    "traceTopicEnable",
    "transferMsgByHeap",
    "useEpollNativeSelector",
    "useReentrantLockWhenPutMessage",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    UInt,
    Str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Store,
    Broker,
}

pub(super) struct Registry {
    /// Canonical key → (owning struct, value kind). Derived from the serde names, so it cannot
    /// drift from the structs.
    pub(super) keys: BTreeMap<String, (Part, Kind)>,
    /// Lower-cased key without `_`/`-`/`.` → spelling (our keys, aliases, RocketMQ-only keys).
    pub(super) squashed: BTreeMap<String, String>,
}

pub(super) enum Resolved {
    /// One of our keys (aliases already mapped to the canonical key).
    Known(&'static str),
    RocketMqOnly,
    Unknown,
}

pub(super) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut keys = BTreeMap::new();
        // A fixed root path so serialization cannot fail on a non-UTF-8 $HOME.
        let store = StoreConfig {
            store_path_root_dir: PathBuf::from("/"),
            ..StoreConfig::default()
        };
        for (part, value) in [
            (Part::Store, serde_json::to_value(&store)),
            (Part::Broker, serde_json::to_value(BrokerConfig::default())),
        ] {
            let Ok(serde_json::Value::Object(map)) = value else {
                unreachable!("config structs serialize to JSON objects")
            };
            for (key, v) in map {
                let kind = match v {
                    serde_json::Value::Bool(_) => Kind::Bool,
                    serde_json::Value::Number(_) => Kind::UInt,
                    _ => Kind::Str,
                };
                keys.insert(key, (part, kind));
            }
        }
        let mut squashed = BTreeMap::new();
        let spellings = keys
            .keys()
            .map(String::as_str)
            .chain(ALIASES.iter().map(|(alias, _)| *alias))
            .chain(ROCKETMQ_ONLY_KEYS.iter().copied());
        for k in spellings {
            squashed.insert(squash(k), k.to_owned());
        }
        Registry { keys, squashed }
    })
}

impl Registry {
    pub(super) fn resolve(&'static self, key: &str) -> Resolved {
        if let Some((canonical, _)) = self.keys.get_key_value(key) {
            return Resolved::Known(canonical.as_str());
        }
        if let Some((_, canonical)) = ALIASES.iter().find(|(alias, _)| *alias == key) {
            return Resolved::Known(canonical);
        }
        if ROCKETMQ_ONLY_KEYS.contains(&key) {
            return Resolved::RocketMqOnly;
        }
        Resolved::Unknown
    }

    pub(super) fn kind(&self, key: &str) -> (Part, Kind) {
        self.keys
            .get(key)
            .copied()
            .unwrap_or((Part::Broker, Kind::Str))
    }

    /// A hint for a key we do not know: same letters in another case, or a close spelling.
    pub(super) fn suggest(&self, key: &str) -> Option<String> {
        if let Some(k) = self.squashed.get(&squash(key)) {
            return Some(k.clone());
        }
        let lower = key.to_ascii_lowercase();
        self.keys
            .keys()
            .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), k))
            .filter(|(d, _)| *d <= 2)
            .min_by_key(|(d, _)| *d)
            .map(|(_, k)| k.clone())
    }
}

pub(super) fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.'))
        .flat_map(char::to_lowercase)
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Every key ActorMQ understands, in RocketMQ spelling (sorted).
pub fn known_keys() -> impl Iterator<Item = &'static str> {
    registry().keys.keys().map(String::as_str)
}

/// The keys among `keys` that are not configuration keys at all: neither ours, nor a 5.x alias,
/// nor a RocketMQ key ActorMQ ignores ([`ROCKETMQ_ONLY_KEYS`]). Exact (case-sensitive) match,
/// as RocketMQ's reflection-based loader.
pub fn unknown_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let reg = registry();
    keys.into_iter()
        .filter(|k| matches!(reg.resolve(k), Resolved::Unknown))
        .map(str::to_owned)
        .collect()
}

impl Config {
    /// Every setting as `key → value` text in RocketMQ spelling (for `-p`/`printConfigItem`, startup logs,
    /// and updateBrokerConfig's merge). Unset optional values are empty strings.
    pub fn to_properties(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for part in [
            serde_json::to_value(&self.store),
            serde_json::to_value(&self.broker),
        ] {
            if let Ok(serde_json::Value::Object(map)) = part {
                for (k, v) in map {
                    let text = match v {
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    out.insert(k, text);
                }
            }
        }
        out
    }
}

/// RocketMQ's `-p` (`printConfigItem`, `important_only = false`: every key) and `-m`
/// (`printImportantConfig`, `important_only = true`: the [`IMPORTANT_KEYS`]) output: one
/// `key=value` line per setting, grouped under a `# BrokerConfig` and a `# MessageStoreConfig`
/// comment, keys sorted within a group. Unset optional values print as `key=`. The text is a
/// valid `.properties` file (values escaped) that loads back to the same settings.
pub fn print_config_items(cfg: &Config, important_only: bool) -> String {
    use std::fmt::Write as _;
    let props = cfg.to_properties();
    let reg = registry();
    let mut out = String::new();
    for (part, title) in [
        (Part::Broker, "BrokerConfig"),
        (Part::Store, "MessageStoreConfig"),
    ] {
        let items: Vec<_> = props
            .iter()
            .filter(|(k, _)| reg.kind(k).0 == part)
            .filter(|(k, _)| !important_only || IMPORTANT_KEYS.contains(&k.as_str()))
            .collect();
        if items.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "# {title}");
        for (k, v) in items {
            let _ = writeln!(
                out,
                "{}={}",
                properties::escape_key(k),
                properties::escape_value(v)
            );
        }
    }
    out
}
