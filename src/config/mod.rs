//! Typed broker configuration with Apache RocketMQ's key names and defaults.
//!
//! What this module owns:
//!
//! * [`StoreConfig`] (RocketMQ `MessageStoreConfig`) and [`BrokerConfig`] (RocketMQ
//!   `BrokerConfig` + `NettyServerConfig` keys), whose serde names are RocketMQ's exact camelCase
//!   keys (`storePathRootDir`, `brokerIP1`, `checkCRCOnRecover`, `warmMapedFileEnable`, …) and
//!   whose `Default`s are RocketMQ's defaults (ROCKETMQ_FACTS §13). Rust field names put the unit
//!   last (`sync_flush_timeout_ms`); the serde name stays RocketMQ's.
//! * Layered loading ([`load`], [`load_with_overrides`], [`load_layers`]) through the `config`
//!   crate, in RocketMQ's order (ECOSYSTEM A.2): built-in defaults → `NAMESRV_ADDR` → the file
//!   (`-c`) → `ACTORMQ_<KEY>` environment variables → command line (`-n`, `key=value`). So `-n`
//!   beats the file's `namesrvAddr`, which beats `NAMESRV_ADDR`.
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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use ::config::{FileFormat, Format, Source, Value, ValueKind};
use serde::{Deserialize, Deserializer, Serialize};

pub mod properties;

/// RocketMQ's default `messageDelayLevel`: 18 levels, level = 1-based position.
pub const DEFAULT_MESSAGE_DELAY_LEVEL: &str =
    "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Size of one ConsumeQueue unit; `mappedFileSizeConsumeQueue` is a multiple of it.
pub const CQ_UNIT_SIZE: u64 = 20;

/// CommitLog files are mapped in pages; their size is a multiple of this.
pub const COMMIT_LOG_SIZE_GRANULE: u64 = 4096;

/// Largest CommitLog file: RocketMQ sizes are Java `int`s (the END_OF_FILE blank stores the
/// remaining length as an i32), rounded down to [`COMMIT_LOG_SIZE_GRANULE`].
pub const MAX_COMMIT_LOG_FILE_SIZE: u64 =
    (i32::MAX as u64) / COMMIT_LOG_SIZE_GRANULE * COMMIT_LOG_SIZE_GRANULE;

/// Largest ConsumeQueue file: a Java `int`, rounded down to [`CQ_UNIT_SIZE`].
pub const MAX_CONSUME_QUEUE_FILE_SIZE: u64 = (i32::MAX as u64) / CQ_UNIT_SIZE * CQ_UNIT_SIZE;

/// Origin reported for keys no layer set.
pub const DEFAULT_ORIGIN: &str = "built-in default";

/// Origin reported by [`Config::validate`] (values built in code, no provenance).
pub const IN_MEMORY_ORIGIN: &str = "in-memory configuration";

/// Prefix of environment overrides: `ACTORMQ_<KEY>`, key matched case-insensitively.
pub const ENV_PREFIX: &str = "ACTORMQ_";

/// RocketMQ's environment variable for the name server list (lower precedence than the file).
pub const NAMESRV_ADDR_ENV: &str = "NAMESRV_ADDR";

/// Origin of command-line overrides (`-n`, `key=value`).
pub const CLI_ORIGIN: &str = "command line";

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

// ---------------------------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------------------------

macro_rules! rocketmq_enum {
    ($(#[$meta:meta])* $name:ident, $expected:literal, { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// RocketMQ's spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text,)+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// Parses RocketMQ's spelling; surrounding whitespace and letter case are ignored.
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let s = s.trim();
                $(if s.eq_ignore_ascii_case($text) { return Ok(Self::$variant); })+
                Err($expected.to_owned())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

rocketmq_enum!(
    /// `flushDiskType`: when a put is acknowledged relative to the CommitLog flush.
    FlushDiskType, "expected ASYNC_FLUSH or SYNC_FLUSH", {
        /// Acknowledge after the append; a flush thread writes back every `flushIntervalCommitLog`.
        /// The default.
        #[default]
        AsyncFlush => "ASYNC_FLUSH",
        /// Acknowledge after the data is flushed (group commit), or `syncFlushTimeout` elapses.
        SyncFlush => "SYNC_FLUSH",
    }
);

rocketmq_enum!(
    /// `brokerRole`: replication role of this broker.
    BrokerRole, "expected ASYNC_MASTER, SYNC_MASTER or SLAVE", {
        /// Master; acknowledges before the slave has the data. The default.
        #[default]
        AsyncMaster => "ASYNC_MASTER",
        /// Master; acknowledges after a slave has the data.
        SyncMaster => "SYNC_MASTER",
        /// Replicates from `haMasterAddress` (or the address the name server reports).
        Slave => "SLAVE",
    }
);

impl BrokerRole {
    pub const fn is_slave(self) -> bool {
        matches!(self, BrokerRole::Slave)
    }
    pub const fn is_master(self) -> bool {
        !self.is_slave()
    }
}

// ---------------------------------------------------------------------------------------------
// StoreConfig
// ---------------------------------------------------------------------------------------------

/// RocketMQ `MessageStoreConfig` keys ActorMQ uses. Defaults are RocketMQ's (4.9.x; 5.x-only keys
/// marked). Construct with `StoreConfig { field: x, ..Default::default() }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StoreConfig {
    /// `storePathRootDir`, default `$HOME/store` (RocketMQ `${user.home}/store`).
    pub store_path_root_dir: PathBuf,
    /// `storePathCommitLog`; `None` = `${storePathRootDir}/commitlog`. See [`Self::commitlog_dir`].
    #[serde(deserialize_with = "de_opt_path")]
    pub store_path_commit_log: Option<PathBuf>,
    /// `mappedFileSizeCommitLog`, bytes, default 1 GiB.
    pub mapped_file_size_commit_log: u64,
    /// `mappedFileSizeConsumeQueue`, bytes, default 6 000 000 (300 000 units); the loader rounds
    /// it up to a multiple of 20.
    pub mapped_file_size_consume_queue: u64,
    /// `flushDiskType`, default ASYNC_FLUSH.
    pub flush_disk_type: FlushDiskType,
    /// `brokerRole`, default ASYNC_MASTER.
    pub broker_role: BrokerRole,
    /// `maxMessageSize`, bytes of body, default 4 MiB.
    pub max_message_size: u32,
    /// `flushIntervalCommitLog`, default 500 ms.
    #[serde(rename = "flushIntervalCommitLog")]
    pub flush_interval_commit_log_ms: u64,
    /// `commitIntervalCommitLog` (TransientStorePool only), default 200 ms.
    #[serde(rename = "commitIntervalCommitLog")]
    pub commit_interval_commit_log_ms: u64,
    /// `flushCommitLogLeastPages`, default 4 (4 KiB pages; 0 = flush whatever is dirty).
    pub flush_commit_log_least_pages: u32,
    /// `commitCommitLogLeastPages`, default 4.
    pub commit_commit_log_least_pages: u32,
    /// `flushCommitLogThoroughInterval`, default 10 000 ms.
    #[serde(rename = "flushCommitLogThoroughInterval")]
    pub flush_commit_log_thorough_interval_ms: u64,
    /// `commitCommitLogThoroughInterval`, default 200 ms.
    #[serde(rename = "commitCommitLogThoroughInterval")]
    pub commit_commit_log_thorough_interval_ms: u64,
    /// `flushCommitLogTimed`, default true: the async flusher sleeps its interval (puts do not
    /// wake it).
    pub flush_commit_log_timed: bool,
    /// `flushIntervalConsumeQueue`, default 1000 ms.
    #[serde(rename = "flushIntervalConsumeQueue")]
    pub flush_interval_consume_queue_ms: u64,
    /// `flushConsumeQueueLeastPages`, default 2.
    pub flush_consume_queue_least_pages: u32,
    /// `flushConsumeQueueThoroughInterval`, default 60 000 ms.
    #[serde(rename = "flushConsumeQueueThoroughInterval")]
    pub flush_consume_queue_thorough_interval_ms: u64,
    /// `syncFlushTimeout`, default 5000 ms (the SYNC_FLUSH wait).
    #[serde(rename = "syncFlushTimeout")]
    pub sync_flush_timeout_ms: u64,
    /// `checkCRCOnRecover`, default true.
    #[serde(rename = "checkCRCOnRecover")]
    pub check_crc_on_recover: bool,
    /// `transientStorePoolEnable`, default false. Effective on a master with either flush type
    /// (RocketMQ 5.x): see [`Self::transient_store_pool_effective`].
    pub transient_store_pool_enable: bool,
    /// `transientStorePoolSize`, buffers of `mappedFileSizeCommitLog` bytes, default 5.
    pub transient_store_pool_size: u32,
    /// `fastFailIfNoBufferInStorePool`, default false.
    pub fast_fail_if_no_buffer_in_store_pool: bool,
    /// `warmMapedFileEnable` (sic), default false.
    #[serde(rename = "warmMapedFileEnable")]
    pub warm_mapped_file_enable: bool,
    /// `flushLeastPagesWhenWarmMapedFile` (sic), pages, default 4096.
    #[serde(rename = "flushLeastPagesWhenWarmMapedFile")]
    pub flush_least_pages_when_warm_mapped_file: u32,
    /// `osPageCacheBusyTimeOutMills`, default 1000 ms.
    #[serde(rename = "osPageCacheBusyTimeOutMills")]
    pub os_page_cache_busy_timeout_ms: u64,
    /// `fileReservedTime`, hours, default 72.
    #[serde(rename = "fileReservedTime")]
    pub file_reserved_time_hours: u32,
    /// `deleteWhen`, `;`-separated hours of day, default "04". See [`Self::delete_when_hours`].
    pub delete_when: String,
    /// `diskMaxUsedSpaceRatio`, percent, default 75.
    pub disk_max_used_space_ratio: u32,
    /// `diskSpaceWarningLevelRatio`, percent, default 90 (writes are refused above it).
    pub disk_space_warning_level_ratio: u32,
    /// `diskSpaceCleanForciblyRatio`, percent, default 85.
    pub disk_space_clean_forcibly_ratio: u32,
    /// `cleanResourceInterval`, default 10 000 ms.
    #[serde(rename = "cleanResourceInterval")]
    pub clean_resource_interval_ms: u64,
    /// `deleteCommitLogFilesInterval`, pause between two deletions, default 100 ms.
    #[serde(rename = "deleteCommitLogFilesInterval")]
    pub delete_commit_log_files_interval_ms: u64,
    /// `deleteConsumeQueueFilesInterval`, default 100 ms.
    #[serde(rename = "deleteConsumeQueueFilesInterval")]
    pub delete_consume_queue_files_interval_ms: u64,
    /// `destroyMapedFileIntervalForcibly` (sic), default 120 000 ms.
    #[serde(rename = "destroyMapedFileIntervalForcibly")]
    pub destroy_mapped_file_interval_forcibly_ms: u64,
    /// `redeleteHangedFileInterval`, default 120 000 ms.
    #[serde(rename = "redeleteHangedFileInterval")]
    pub redelete_hanged_file_interval_ms: u64,
    /// `cleanFileForciblyEnable`, default true.
    pub clean_file_forcibly_enable: bool,
    /// `deleteFileBatchMax` (5.x), files per cleanup round, default 10.
    pub delete_file_batch_max: u32,
    /// `messageIndexEnable`, default true.
    pub message_index_enable: bool,
    /// `messageIndexSafe`, default false.
    pub message_index_safe: bool,
    /// `maxHashSlotNum`, default 5 000 000.
    pub max_hash_slot_num: u32,
    /// `maxIndexNum`, default 20 000 000.
    pub max_index_num: u32,
    /// `maxMsgsNumBatch`, default 64.
    pub max_msgs_num_batch: u32,
    /// `defaultQueryMaxNum`, default 32.
    pub default_query_max_num: u32,
    /// `maxTransferBytesOnMessageInMemory`, default 262 144.
    pub max_transfer_bytes_on_message_in_memory: u64,
    /// `maxTransferCountOnMessageInMemory`, default 32.
    pub max_transfer_count_on_message_in_memory: u32,
    /// `maxTransferBytesOnMessageInDisk`, default 65 536.
    pub max_transfer_bytes_on_message_in_disk: u64,
    /// `maxTransferCountOnMessageInDisk`, default 8.
    pub max_transfer_count_on_message_in_disk: u32,
    /// `accessMessageInMemoryMaxRatio`, percent of physical RAM, default 40.
    pub access_message_in_memory_max_ratio: u32,
    /// `haListenPort`, default 10912; the loader derives `listenPort + 1` when unset.
    pub ha_listen_port: u16,
    /// `haSendHeartbeatInterval`, default 5000 ms.
    #[serde(rename = "haSendHeartbeatInterval")]
    pub ha_send_heartbeat_interval_ms: u64,
    /// `haHousekeepingInterval`, default 20 000 ms.
    #[serde(rename = "haHousekeepingInterval")]
    pub ha_housekeeping_interval_ms: u64,
    /// `haTransferBatchSize`, bytes, default 32 768.
    pub ha_transfer_batch_size: u32,
    /// `slaveTimeout`, default 3000 ms: the SYNC_MASTER wait for a slave's ack.
    #[serde(rename = "slaveTimeout")]
    pub slave_timeout_ms: u64,
    /// `haSlaveFallbehindMax` (5.x alias `haMaxGapNotInSync`), bytes, default 256 MiB.
    pub ha_slave_fallbehind_max: u64,
    /// `haMasterAddress`, `host:port`, default unset.
    #[serde(deserialize_with = "de_opt_string")]
    pub ha_master_address: Option<String>,
    /// `messageDelayLevel`. Parsed form: [`Self::delay_levels_ms`].
    pub message_delay_level: String,
    /// `flushDelayOffsetInterval`, default 10 000 ms.
    #[serde(rename = "flushDelayOffsetInterval")]
    pub flush_delay_offset_interval_ms: u64,
    /// `maxTopicLength` (5.x), default 127.
    pub max_topic_length: u32,
    /// `autoMessageVersionOnTopicLen` (5.x), default true.
    pub auto_message_version_on_topic_len: bool,
    /// `enabledAppendPropCRC` (5.x), default false.
    #[serde(rename = "enabledAppendPropCRC")]
    pub enabled_append_prop_crc: bool,
    /// `offsetCheckInSlave`, default false.
    pub offset_check_in_slave: bool,
    /// Memo of the parsed `messageDelayLevel`, keyed by the string it was parsed from (so a
    /// later edit of the field is never served stale). Not a setting; compares equal always.
    #[doc(hidden)]
    #[serde(skip)]
    pub delay_levels_cache: DelayLevelCache,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            store_path_root_dir: home_dir().join("store"),
            store_path_commit_log: None,
            mapped_file_size_commit_log: 1024 * 1024 * 1024,
            mapped_file_size_consume_queue: 300_000 * CQ_UNIT_SIZE,
            flush_disk_type: FlushDiskType::AsyncFlush,
            broker_role: BrokerRole::AsyncMaster,
            max_message_size: 4 * 1024 * 1024,
            flush_interval_commit_log_ms: 500,
            commit_interval_commit_log_ms: 200,
            flush_commit_log_least_pages: 4,
            commit_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval_ms: 10_000,
            commit_commit_log_thorough_interval_ms: 200,
            flush_commit_log_timed: true,
            flush_interval_consume_queue_ms: 1000,
            flush_consume_queue_least_pages: 2,
            flush_consume_queue_thorough_interval_ms: 60_000,
            sync_flush_timeout_ms: 5000,
            check_crc_on_recover: true,
            transient_store_pool_enable: false,
            transient_store_pool_size: 5,
            fast_fail_if_no_buffer_in_store_pool: false,
            warm_mapped_file_enable: false,
            flush_least_pages_when_warm_mapped_file: 4096,
            os_page_cache_busy_timeout_ms: 1000,
            file_reserved_time_hours: 72,
            delete_when: "04".to_owned(),
            disk_max_used_space_ratio: 75,
            disk_space_warning_level_ratio: 90,
            disk_space_clean_forcibly_ratio: 85,
            clean_resource_interval_ms: 10_000,
            delete_commit_log_files_interval_ms: 100,
            delete_consume_queue_files_interval_ms: 100,
            destroy_mapped_file_interval_forcibly_ms: 120_000,
            redelete_hanged_file_interval_ms: 120_000,
            clean_file_forcibly_enable: true,
            delete_file_batch_max: 10,
            message_index_enable: true,
            message_index_safe: false,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            max_msgs_num_batch: 64,
            default_query_max_num: 32,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            max_transfer_count_on_message_in_disk: 8,
            access_message_in_memory_max_ratio: 40,
            ha_listen_port: 10912,
            ha_send_heartbeat_interval_ms: 5000,
            ha_housekeeping_interval_ms: 20_000,
            ha_transfer_batch_size: 32 * 1024,
            slave_timeout_ms: 3000,
            ha_slave_fallbehind_max: 256 * 1024 * 1024,
            ha_master_address: None,
            message_delay_level: DEFAULT_MESSAGE_DELAY_LEVEL.to_owned(),
            flush_delay_offset_interval_ms: 10_000,
            max_topic_length: 127,
            auto_message_version_on_topic_len: true,
            enabled_append_prop_crc: false,
            offset_check_in_slave: false,
            delay_levels_cache: DelayLevelCache::default(),
        }
    }
}

impl StoreConfig {
    /// CommitLog directory: `storePathCommitLog`, or `${storePathRootDir}/commitlog`.
    pub fn commitlog_dir(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("commitlog"))
    }
    /// `${storePathRootDir}/consumequeue` (then `<topic>/<queueId>/`).
    pub fn consumequeue_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue")
    }
    /// `${storePathRootDir}/index`.
    pub fn index_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("index")
    }
    /// `${storePathRootDir}/config` (topics.json, consumerOffset.json, delayOffset.json, …).
    pub fn config_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("config")
    }
    /// `${storePathRootDir}/checkpoint`.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.store_path_root_dir.join("checkpoint")
    }
    /// `${storePathRootDir}/abort` (present while running; absent after a clean shutdown).
    pub fn abort_path(&self) -> PathBuf {
        self.store_path_root_dir.join("abort")
    }
    /// `${storePathRootDir}/lock` (held with flock so two brokers never share a store).
    pub fn lock_path(&self) -> PathBuf {
        self.store_path_root_dir.join("lock")
    }

    /// The parsed `messageDelayLevel` in milliseconds, level `n` at index `n - 1`. Parsed once
    /// and memoized; if the field was changed since, it is re-parsed (never stale).
    pub fn delay_levels_ms(&self) -> Result<Cow<'_, [u64]>, DelayLevelError> {
        if let Some((source, levels)) = self.delay_levels_cache.0.get() {
            if *source == self.message_delay_level {
                return Ok(Cow::Borrowed(levels));
            }
            return parse_delay_levels(&self.message_delay_level).map(Cow::Owned);
        }
        let levels = parse_delay_levels(&self.message_delay_level)?;
        let (source, cached) = self
            .delay_levels_cache
            .0
            .get_or_init(|| (self.message_delay_level.clone(), levels.clone()));
        if *source == self.message_delay_level {
            Ok(Cow::Borrowed(cached))
        } else {
            Ok(Cow::Owned(levels))
        }
    }

    /// Number of delay levels (RocketMQ `maxDelayLevel`); 0 if `messageDelayLevel` is invalid.
    pub fn max_delay_level(&self) -> usize {
        self.delay_levels_ms().map(|l| l.len()).unwrap_or(0)
    }

    /// Hours of day (0..=23) at which expired files are deleted (`deleteWhen`, `;`-separated).
    /// Entries that are not hours are skipped ([`Config::validate`] rejects them).
    pub fn delete_when_hours(&self) -> Vec<u8> {
        self.delete_when
            .split(';')
            .filter_map(|h| h.trim().parse::<u8>().ok())
            .filter(|h| *h < 24)
            .collect()
    }

    /// Whether the TransientStorePool is really used. RocketMQ 4.9 uses it only with ASYNC_FLUSH
    /// on a master; RocketMQ 5.x with any flush type on a non-slave, and so do we: on a slave the
    /// CommitLog is written by replication, not by producers. With SYNC_FLUSH the group committer
    /// commits the buffers right before each fdatasync and still answers a request only once it
    /// is flushed — the buffer is what makes that fdatasync cheap (`pwrite` + `fdatasync` instead
    /// of `msync` of a dirtied mapping).
    pub fn transient_store_pool_effective(&self) -> bool {
        self.transient_store_pool_enable && self.broker_role.is_master()
    }

    /// Bytes of one IndexFile: 40-byte header + 4 per hash slot + 20 per index entry.
    pub fn index_file_size(&self) -> u64 {
        40 + 4 * u64::from(self.max_hash_slot_num) + 20 * u64::from(self.max_index_num)
    }
}

/// Memo behind [`StoreConfig::delay_levels_ms`]; a cache, not a setting: clones carry it, and it
/// never affects equality.
#[derive(Default, Clone)]
pub struct DelayLevelCache(OnceLock<(String, Vec<u64>)>);

impl PartialEq for DelayLevelCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for DelayLevelCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DelayLevelCache")
    }
}

// ---------------------------------------------------------------------------------------------
// BrokerConfig
// ---------------------------------------------------------------------------------------------

/// RocketMQ `BrokerConfig` (and `NettyServerConfig`) keys ActorMQ uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerConfig {
    /// `listenPort`, default 10911 (as `BrokerStartup` sets it). 0 = ephemeral.
    pub listen_port: u16,
    /// `namesrvAddr`, `;`-separated `host:port` list; unset = standalone. See
    /// [`Self::namesrv_addrs`].
    #[serde(deserialize_with = "de_opt_string")]
    pub namesrv_addr: Option<String>,
    /// `brokerName`, default the local host name ("broker-a" if it cannot be read).
    pub broker_name: String,
    /// `brokerClusterName`, default "DefaultCluster".
    pub broker_cluster_name: String,
    /// `brokerId`: 0 = master, > 0 = slave.
    pub broker_id: u64,
    /// `brokerIP1`: address clients and message ids use; unset = a local address picked at startup.
    #[serde(rename = "brokerIP1", deserialize_with = "de_opt_string")]
    pub broker_ip1: Option<String>,
    /// `brokerIP2`: HA address a slave connects to; unset = same as brokerIP1.
    #[serde(rename = "brokerIP2", deserialize_with = "de_opt_string")]
    pub broker_ip2: Option<String>,
    /// `brokerPermission`, PermName bits (READ 4, WRITE 2, INHERIT 1), default 6.
    pub broker_permission: u32,
    /// `defaultTopicQueueNums`, queues of auto-created topics (TBW102), default 8.
    pub default_topic_queue_nums: u32,
    /// `autoCreateTopicEnable`, default true.
    pub auto_create_topic_enable: bool,
    /// `autoCreateSubscriptionGroup`, default true.
    pub auto_create_subscription_group: bool,
    /// `clusterTopicEnable`, default true (a topic named after the cluster).
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable`, default true (a topic named after the broker).
    pub broker_topic_enable: bool,
    /// `longPollingEnable`, default true.
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills`, default 1000 ms.
    #[serde(rename = "shortPollingTimeMills")]
    pub short_polling_time_ms: u64,
    /// `registerNameServerPeriod`, default 30 000 ms.
    #[serde(rename = "registerNameServerPeriod")]
    pub register_name_server_period_ms: u64,
    /// `registerBrokerTimeoutMills`, default 6000 ms.
    #[serde(rename = "registerBrokerTimeoutMills")]
    pub register_broker_timeout_ms: u64,
    /// `forceRegister`, default true.
    pub force_register: bool,
    /// `compressedRegister`, default false.
    pub compressed_register: bool,
    /// `flushConsumerOffsetInterval`, default 5000 ms.
    #[serde(rename = "flushConsumerOffsetInterval")]
    pub flush_consumer_offset_interval_ms: u64,
    /// `slaveReadEnable`, default false.
    pub slave_read_enable: bool,
    /// `rejectTransactionMessage`, default false.
    pub reject_transaction_message: bool,
    /// `transactionTimeOut`, default 6000 ms.
    #[serde(rename = "transactionTimeOut")]
    pub transaction_timeout_ms: u64,
    /// `transactionCheckMax`, default 15.
    pub transaction_check_max: u32,
    /// `transactionCheckInterval`, default 60 000 ms.
    #[serde(rename = "transactionCheckInterval")]
    pub transaction_check_interval_ms: u64,
    /// `brokerFastFailureEnable`, default true.
    pub broker_fast_failure_enable: bool,
    /// `waitTimeMillsInSendQueue`, default 200 ms.
    #[serde(rename = "waitTimeMillsInSendQueue")]
    pub wait_time_ms_in_send_queue: u64,
    /// `serverChannelMaxIdleTimeSeconds`, default 120 s.
    #[serde(rename = "serverChannelMaxIdleTimeSeconds")]
    pub server_channel_max_idle_time_secs: u64,
    /// `metricsPromExporterPort` (5.x), default 5557. 0 = ephemeral.
    pub metrics_prom_exporter_port: u16,
    /// `serverSelectorThreads`: threads that serve client connections (read, decode, handle,
    /// write); each connection stays on one. RocketMQ's default is 3 selector threads feeding
    /// separate worker pools; here the same threads do both, so the default, 0, means one per
    /// core.
    pub server_selector_threads: u32,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen_port: 10911,
            namesrv_addr: None,
            broker_name: local_host_name(),
            broker_cluster_name: "DefaultCluster".to_owned(),
            broker_id: 0,
            broker_ip1: None,
            broker_ip2: None,
            broker_permission: 6,
            default_topic_queue_nums: 8,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            cluster_topic_enable: true,
            broker_topic_enable: true,
            long_polling_enable: true,
            short_polling_time_ms: 1000,
            register_name_server_period_ms: 30_000,
            register_broker_timeout_ms: 6000,
            force_register: true,
            compressed_register: false,
            flush_consumer_offset_interval_ms: 5000,
            slave_read_enable: false,
            reject_transaction_message: false,
            transaction_timeout_ms: 6000,
            transaction_check_max: 15,
            transaction_check_interval_ms: 60_000,
            broker_fast_failure_enable: true,
            wait_time_ms_in_send_queue: 200,
            server_channel_max_idle_time_secs: 120,
            metrics_prom_exporter_port: 5557,
            server_selector_threads: 0,
        }
    }
}

impl BrokerConfig {
    /// The name server addresses of `namesrvAddr` (`;`-separated, blanks dropped).
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv_addr
            .as_deref()
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// The local host name: `gethostname(2)`, else `/etc/hostname`, else "broker-a". Read once.
pub fn local_host_name() -> String {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        sys_hostname()
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|s| s.trim().to_owned())
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "broker-a".to_owned())
    })
    .clone()
}

fn sys_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes; gethostname writes at most that
    // many and we only read up to the first NUL (or the whole buffer if truncated).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..len]).trim().to_owned();
    (!name.is_empty()).then_some(name)
}

fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Empty or blank strings mean "unset" (e.g. `NAMESRV_ADDR=`).
fn de_opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.trim().is_empty()))
}

fn de_opt_path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    Ok(de_opt_string(d)?.map(PathBuf::from))
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

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

    /// Checks every rule; all violations are reported at once. Origins are reported as
    /// [`IN_MEMORY_ORIGIN`]; [`Loaded::validate`] names the real sources.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(&|_| IN_MEMORY_ORIGIN.to_owned())
    }

    /// [`Self::validate`] with `origin_of(key)` naming where each key's value came from.
    pub fn validate_with(&self, origin_of: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        let mut c = Checker {
            origin_of,
            out: Vec::new(),
        };
        let s = &self.store;
        let b = &self.broker;

        // Store layout.
        if s.store_path_root_dir.as_os_str().is_empty() {
            c.fail("storePathRootDir", q(""), "expected a directory path");
        }
        if s.mapped_file_size_commit_log % COMMIT_LOG_SIZE_GRANULE != 0
            || !(COMMIT_LOG_SIZE_GRANULE..=MAX_COMMIT_LOG_FILE_SIZE)
                .contains(&s.mapped_file_size_commit_log)
        {
            c.fail(
                "mappedFileSizeCommitLog",
                s.mapped_file_size_commit_log,
                format!("expected a multiple of 4096 in 4096..={MAX_COMMIT_LOG_FILE_SIZE} (bytes)"),
            );
        }
        if s.mapped_file_size_consume_queue % CQ_UNIT_SIZE != 0
            || !(CQ_UNIT_SIZE..=MAX_CONSUME_QUEUE_FILE_SIZE)
                .contains(&s.mapped_file_size_consume_queue)
        {
            c.fail(
                "mappedFileSizeConsumeQueue",
                s.mapped_file_size_consume_queue,
                format!(
                    "expected a multiple of 20 (the ConsumeQueue unit) in 20..={MAX_CONSUME_QUEUE_FILE_SIZE} \
                     (bytes; the loader rounds up, see Config::normalize)"
                ),
            );
        }
        if s.max_message_size == 0 || u64::from(s.max_message_size) > s.mapped_file_size_commit_log
        {
            c.fail(
                "maxMessageSize",
                s.max_message_size,
                format!(
                    "expected 1..=mappedFileSizeCommitLog ({}) bytes",
                    s.mapped_file_size_commit_log
                ),
            );
        }

        // Periods and timeouts must be positive.
        for (key, v) in [
            ("flushIntervalCommitLog", s.flush_interval_commit_log_ms),
            ("commitIntervalCommitLog", s.commit_interval_commit_log_ms),
            (
                "flushCommitLogThoroughInterval",
                s.flush_commit_log_thorough_interval_ms,
            ),
            (
                "commitCommitLogThoroughInterval",
                s.commit_commit_log_thorough_interval_ms,
            ),
            (
                "flushIntervalConsumeQueue",
                s.flush_interval_consume_queue_ms,
            ),
            (
                "flushConsumeQueueThoroughInterval",
                s.flush_consume_queue_thorough_interval_ms,
            ),
            ("syncFlushTimeout", s.sync_flush_timeout_ms),
            ("slaveTimeout", s.slave_timeout_ms),
            (
                "osPageCacheBusyTimeOutMills",
                s.os_page_cache_busy_timeout_ms,
            ),
            ("cleanResourceInterval", s.clean_resource_interval_ms),
            ("haSendHeartbeatInterval", s.ha_send_heartbeat_interval_ms),
            ("haHousekeepingInterval", s.ha_housekeeping_interval_ms),
            ("flushDelayOffsetInterval", s.flush_delay_offset_interval_ms),
            ("shortPollingTimeMills", b.short_polling_time_ms),
            ("registerNameServerPeriod", b.register_name_server_period_ms),
            ("registerBrokerTimeoutMills", b.register_broker_timeout_ms),
            (
                "flushConsumerOffsetInterval",
                b.flush_consumer_offset_interval_ms,
            ),
            ("transactionTimeOut", b.transaction_timeout_ms),
            ("transactionCheckInterval", b.transaction_check_interval_ms),
            ("waitTimeMillsInSendQueue", b.wait_time_ms_in_send_queue),
        ] {
            c.positive(key, v, "ms");
        }
        c.positive(
            "serverChannelMaxIdleTimeSeconds",
            b.server_channel_max_idle_time_secs,
            "s",
        );

        // Counts and sizes that must be at least 1.
        for (key, v) in [
            (
                "transientStorePoolSize",
                u64::from(s.transient_store_pool_size),
            ),
            (
                "flushLeastPagesWhenWarmMapedFile",
                u64::from(s.flush_least_pages_when_warm_mapped_file),
            ),
            ("deleteFileBatchMax", u64::from(s.delete_file_batch_max)),
            ("maxMsgsNumBatch", u64::from(s.max_msgs_num_batch)),
            ("defaultQueryMaxNum", u64::from(s.default_query_max_num)),
            (
                "maxTransferBytesOnMessageInMemory",
                s.max_transfer_bytes_on_message_in_memory,
            ),
            (
                "maxTransferCountOnMessageInMemory",
                u64::from(s.max_transfer_count_on_message_in_memory),
            ),
            (
                "maxTransferBytesOnMessageInDisk",
                s.max_transfer_bytes_on_message_in_disk,
            ),
            (
                "maxTransferCountOnMessageInDisk",
                u64::from(s.max_transfer_count_on_message_in_disk),
            ),
            ("haTransferBatchSize", u64::from(s.ha_transfer_batch_size)),
            (
                "defaultTopicQueueNums",
                u64::from(b.default_topic_queue_nums),
            ),
            ("transactionCheckMax", u64::from(b.transaction_check_max)),
        ] {
            c.positive(key, v, "");
        }

        // Cleanup.
        if s.delete_when
            .split(';')
            .any(|h| !matches!(h.trim().parse::<u8>(), Ok(0..=23)))
        {
            c.fail(
                "deleteWhen",
                q(&s.delete_when),
                "expected hours of day 0..=23 separated by ';', e.g. \"04\" or \"04;16\"",
            );
        }
        c.range(
            "diskMaxUsedSpaceRatio",
            u64::from(s.disk_max_used_space_ratio),
            10,
            95,
            " (percent)",
        );
        c.range(
            "diskSpaceWarningLevelRatio",
            u64::from(s.disk_space_warning_level_ratio),
            0,
            100,
            " (percent)",
        );
        c.range(
            "diskSpaceCleanForciblyRatio",
            u64::from(s.disk_space_clean_forcibly_ratio),
            0,
            100,
            " (percent)",
        );
        c.range(
            "accessMessageInMemoryMaxRatio",
            u64::from(s.access_message_in_memory_max_ratio),
            0,
            100,
            " (percent)",
        );

        // Index (IndexStore needs entry 0 unused, so at least 2 entries; Java sizes are ints).
        c.range(
            "maxHashSlotNum",
            u64::from(s.max_hash_slot_num),
            1,
            i32::MAX as u64,
            "",
        );
        c.range(
            "maxIndexNum",
            u64::from(s.max_index_num),
            2,
            i32::MAX as u64,
            " (entry 0 is unused)",
        );
        if s.index_file_size() > i32::MAX as u64 {
            c.fail(
                "maxIndexNum",
                s.max_index_num,
                format!(
                    "index file size 40 + 4 × maxHashSlotNum ({}) + 20 × maxIndexNum = {} bytes exceeds 2147483647",
                    s.max_hash_slot_num,
                    s.index_file_size()
                ),
            );
        }

        // Delay levels, topics.
        if let Err(e) = parse_delay_levels(&s.message_delay_level) {
            c.fail(
                "messageDelayLevel",
                q(&s.message_delay_level),
                e.to_string(),
            );
        }
        c.range(
            "maxTopicLength",
            u64::from(s.max_topic_length),
            1,
            i16::MAX as u64,
            " (characters)",
        );

        // Identity and roles.
        if b.broker_name.trim().is_empty() {
            c.fail("brokerName", q(&b.broker_name), "expected a non-empty name");
        }
        if b.broker_cluster_name.trim().is_empty() {
            c.fail(
                "brokerClusterName",
                q(&b.broker_cluster_name),
                "expected a non-empty name",
            );
        }
        if s.broker_role.is_slave() && b.broker_id == 0 {
            c.fail(
                "brokerId",
                b.broker_id,
                "expected > 0 when brokerRole = SLAVE (0 is the master's id)",
            );
        }
        if s.broker_role.is_master() && b.broker_id != 0 {
            c.fail(
                "brokerId",
                b.broker_id,
                format!(
                    "expected 0 when brokerRole = {} (slaves use ids > 0)",
                    s.broker_role
                ),
            );
        }
        c.range(
            "brokerPermission",
            u64::from(b.broker_permission),
            0,
            7,
            " (PermName bits READ=4, WRITE=2, INHERIT=1)",
        );

        // Addresses.
        if let Some(addr) = &b.namesrv_addr {
            if let Some(bad) = addr
                .split(';')
                .map(str::trim)
                .find(|a| !a.is_empty() && !is_host_port(a))
            {
                c.fail(
                    "namesrvAddr",
                    q(addr),
                    format!("expected host:port entries separated by ';', e.g. \"127.0.0.1:9876;192.168.0.1:9876\" (bad entry {bad:?})"),
                );
            }
        }
        if let Some(addr) = &s.ha_master_address {
            if !is_host_port(addr.trim()) {
                c.fail(
                    "haMasterAddress",
                    q(addr),
                    "expected host:port, e.g. \"192.168.0.1:10912\"",
                );
            }
        }
        if let Some(ip) = &b.broker_ip1 {
            if ip.trim().parse::<IpAddr>().is_err() {
                c.fail(
                    "brokerIP1",
                    q(ip),
                    "expected an IPv4 or IPv6 address (it is encoded into message ids)",
                );
            }
        }

        // Ports: 0 is "ephemeral"; two fixed ports must differ.
        let ports = [
            ("listenPort", b.listen_port),
            ("haListenPort", s.ha_listen_port),
            ("metricsPromExporterPort", b.metrics_prom_exporter_port),
        ];
        for (i, (key, port)) in ports.iter().enumerate() {
            if let Some((other, _)) = ports[..i].iter().find(|(_, p)| *p == *port && *port != 0) {
                c.fail(key, port, format!("port already used by {other}"));
            }
        }

        if c.out.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(c.out))
        }
    }

    /// Every setting as `key → value` text in RocketMQ spelling (for `-p`/`printConfigItem` and
    /// startup logs). Unset optional values are empty strings.
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

fn is_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.trim().is_empty() && port.parse::<u16>().is_ok(),
        None => false,
    }
}

/// Renders a string value the way errors show it.
fn q(s: &str) -> String {
    format!("{s:?}")
}

struct Checker<'a> {
    origin_of: &'a dyn Fn(&str) -> String,
    out: Vec<Violation>,
}

impl Checker<'_> {
    fn fail(&mut self, key: &str, value: impl fmt::Display, rule: impl Into<String>) {
        self.out.push(Violation {
            origin: (self.origin_of)(key),
            key: key.to_owned(),
            value: value.to_string(),
            rule: rule.into(),
        });
    }
    fn positive(&mut self, key: &str, v: u64, unit: &str) {
        if v == 0 {
            let rule = if unit.is_empty() {
                "expected > 0".to_owned()
            } else {
                format!("expected > 0 ({unit})")
            };
            self.fail(key, v, rule);
        }
    }
    fn range(&mut self, key: &str, v: u64, lo: u64, hi: u64, note: &str) {
        if !(lo..=hi).contains(&v) {
            self.fail(key, v, format!("expected {lo}..={hi}{note}"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// One bad value: `{origin}: {key} = {value}: {rule}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// File path, `environment variable ACTORMQ_X`, [`DEFAULT_ORIGIN`], …
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

/// Why a `messageDelayLevel` string is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelayLevelError {
    #[error("expected at least one level, e.g. \"1s 5s 10s 30s 1m\"")]
    Empty,
    #[error("level {level} {token:?}: expected a whole number followed by one unit of s, m, h, d (e.g. \"30s\", \"2h\")")]
    Malformed { level: usize, token: String },
    #[error("level {level} {token:?}: delay too large")]
    Overflow { level: usize, token: String },
}

// ---------------------------------------------------------------------------------------------
// messageDelayLevel
// ---------------------------------------------------------------------------------------------

/// Parses a RocketMQ `messageDelayLevel` string ("1s 5s 10s … 2h") into milliseconds per level
/// (level `n` at index `n - 1`). Levels are separated by whitespace; each is a whole number and
/// one unit `s`, `m`, `h` or `d` (lower case, as RocketMQ's table). Results fit an `i64`, so
/// `store time + delay` cannot overflow a Java timestamp type.
pub fn parse_delay_levels(s: &str) -> Result<Vec<u64>, DelayLevelError> {
    let mut out = Vec::new();
    for (i, token) in s.split_ascii_whitespace().enumerate() {
        let level = i + 1;
        let malformed = || DelayLevelError::Malformed {
            level,
            token: token.to_owned(),
        };
        let overflow = || DelayLevelError::Overflow {
            level,
            token: token.to_owned(),
        };
        let (unit_at, unit) = token.char_indices().last().ok_or_else(malformed)?;
        let unit_ms: u64 = match unit {
            's' => 1000,
            'm' => 60 * 1000,
            'h' => 60 * 60 * 1000,
            'd' => 24 * 60 * 60 * 1000,
            _ => return Err(malformed()),
        };
        let number = &token[..unit_at];
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed());
        }
        let n: u64 = number.parse().map_err(|_| overflow())?;
        let ms = n
            .checked_mul(unit_ms)
            .filter(|ms| *ms <= i64::MAX as u64)
            .ok_or_else(overflow)?;
        out.push(ms);
    }
    if out.is_empty() {
        return Err(DelayLevelError::Empty);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Key registry
// ---------------------------------------------------------------------------------------------

/// 5.x spellings accepted for our keys: (alias, canonical key).
const ALIASES: &[(&str, &str)] = &[("haMaxGapNotInSync", "haSlaveFallbehindMax")];

/// RocketMQ keys that have no effect in ActorMQ (thread pools and locks replaced by actors,
/// features not implemented). Reported in [`Loaded::unsupported`], not as unknown.
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
enum Kind {
    Bool,
    UInt,
    Str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Store,
    Broker,
}

struct Registry {
    /// Canonical key → (owning struct, value kind). Derived from the serde names, so it cannot
    /// drift from the structs.
    keys: BTreeMap<String, (Part, Kind)>,
    /// Lower-cased key without `_`/`-`/`.` → spelling (our keys, aliases, RocketMQ-only keys).
    squashed: BTreeMap<String, String>,
}

enum Resolved {
    /// One of our keys (aliases already mapped to the canonical key).
    Known(&'static str),
    RocketMqOnly,
    Unknown,
}

fn registry() -> &'static Registry {
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
    fn resolve(&'static self, key: &str) -> Resolved {
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

    fn kind(&self, key: &str) -> (Part, Kind) {
        self.keys
            .get(key)
            .copied()
            .unwrap_or((Part::Broker, Kind::Str))
    }

    /// A hint for a key we do not know: same letters in another case, or a close spelling.
    fn suggest(&self, key: &str) -> Option<String> {
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

fn squash(s: &str) -> String {
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

// ---------------------------------------------------------------------------------------------
// Layers and loading
// ---------------------------------------------------------------------------------------------

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
    /// in quotes there); passed on in [`Loaded::notes`].
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

    /// `NAMESRV_ADDR`, RocketMQ's fallback for `namesrvAddr`. [`load`] puts this layer *below* the
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

/// A loaded, normalized and validated configuration plus its provenance.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// Key → origin of the value in effect, for keys some layer set (or that were derived).
    pub origins: BTreeMap<String, String>,
    /// Keys that are not configuration keys (typos, tables, foreign `ACTORMQ_*` variables).
    pub unknown: Vec<UnknownKey>,
    /// RocketMQ keys ActorMQ has no use for ([`ROCKETMQ_ONLY_KEYS`]).
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
/// (`-n` as `("namesrvAddr", addr)`, then `key=value` overrides, see [`parse_override`]).
///
/// This is RocketMQ's namesrvAddr precedence (ECOSYSTEM A.2): `-n` beats the file's
/// `namesrvAddr`, which beats `NAMESRV_ADDR`. `env` is passed in (use [`process_env`] in the
/// broker) so tests never touch the process environment.
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

/// The process environment as UTF-8 pairs (non-UTF-8 entries skipped), for [`load`].
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// Merges `layers` (later wins) over the built-in defaults, through the `config` crate.
///
/// Every value of every layer is type-checked, not only the one in effect: a bad value in a
/// file is an error even if the environment overrides it. Then the config is normalized
/// ([`Config::normalize`], `haListenPort = listenPort + 1` when no layer set it) and validated.
/// All violations are returned together.
pub fn load_layers(layers: Vec<Layer>) -> Result<Loaded, ConfigError> {
    let reg = registry();
    let mut violations = Vec::new();
    let mut unknown = Vec::new();
    let mut unsupported = Vec::new();
    let mut notes = Vec::new();
    let mut origins = BTreeMap::new();
    let mut builder = ::config::Config::builder();

    for layer in layers {
        notes.extend(layer.notes);
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
                            origins.insert(canonical.to_owned(), origin);
                            checked.insert(canonical.to_owned(), v);
                        }
                        Err(v) => violations.push(v),
                    }
                }
                Resolved::RocketMqOnly => unsupported.push(UnknownKey {
                    origin,
                    key,
                    hint: "RocketMQ setting that ActorMQ does not use (ignored)".to_owned(),
                }),
                Resolved::Unknown => {
                    let hint = match (&value.kind, reg.suggest(&key)) {
                        (ValueKind::Table(_), _) => {
                            "unknown key (ignored): tables are not supported, settings are one flat list like broker.conf"
                                .to_owned()
                        }
                        (_, Some(s)) => format!("unknown key (ignored); did you mean {s}?"),
                        (_, None) => "unknown key (ignored)".to_owned(),
                    };
                    unknown.push(UnknownKey { origin, key, hint });
                }
            }
        }
        builder = builder.add_source(CheckedLayer(checked));
    }
    if !violations.is_empty() {
        return Err(ConfigError::Invalid(violations));
    }

    let internal = |e: ::config::ConfigError| ConfigError::Source {
        origin: "configuration".to_owned(),
        message: e.to_string(),
    };
    let merged = builder.build().map_err(internal)?;
    let store: StoreConfig = merged.clone().try_deserialize().map_err(internal)?;
    let broker: BrokerConfig = merged.try_deserialize().map_err(internal)?;
    let mut config = Config { store, broker };
    config.normalize();
    if !origins.contains_key("haListenPort") {
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
                rule:
                    "expected ≤ 65534 when haListenPort is not set (it defaults to listenPort + 1)"
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
    }

    let loaded = Loaded {
        config,
        origins,
        unknown,
        unsupported,
        notes,
    };
    loaded.validate()?;
    Ok(loaded)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn toml(text: &str) -> Result<Loaded, ConfigError> {
        load_layers(vec![Layer::from_toml_str("config/broker.toml", text)?])
    }

    fn only_violation(err: ConfigError) -> Violation {
        let v = err.violations();
        assert_eq!(v.len(), 1, "expected one violation, got: {err}");
        v[0].clone()
    }

    fn doc_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/broker.toml")
    }

    /// `(key, line)` for every `#key = value` line of config/broker.toml.
    fn doc_key_lines() -> Vec<(String, String)> {
        let text = std::fs::read_to_string(doc_path()).expect("config/broker.toml");
        text.lines()
            .filter_map(|line| {
                let rest = line.strip_prefix('#')?;
                if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
                    return None;
                }
                let (key, value) = rest.split_once('=')?;
                let key = key.trim();
                key.chars()
                    .all(|c| c.is_ascii_alphanumeric())
                    .then(|| (key.to_owned(), format!("{key} ={value}")))
            })
            .collect()
    }

    #[test]
    fn defaults_match_rocketmq() {
        let c = Config::default();
        let s = &c.store;
        assert_eq!(s.store_path_root_dir, home_dir().join("store"));
        assert_eq!(s.store_path_commit_log, None);
        assert_eq!(s.mapped_file_size_commit_log, 1_073_741_824);
        assert_eq!(s.mapped_file_size_consume_queue, 6_000_000);
        assert_eq!(s.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(s.broker_role, BrokerRole::AsyncMaster);
        assert_eq!(s.max_message_size, 4_194_304);
        assert_eq!(
            (
                s.flush_interval_commit_log_ms,
                s.commit_interval_commit_log_ms
            ),
            (500, 200)
        );
        assert_eq!(
            (
                s.flush_commit_log_least_pages,
                s.commit_commit_log_least_pages
            ),
            (4, 4)
        );
        assert_eq!(
            (
                s.flush_commit_log_thorough_interval_ms,
                s.commit_commit_log_thorough_interval_ms
            ),
            (10_000, 200)
        );
        assert!(s.flush_commit_log_timed);
        assert_eq!(
            (
                s.flush_interval_consume_queue_ms,
                s.flush_consume_queue_least_pages,
                s.flush_consume_queue_thorough_interval_ms
            ),
            (1000, 2, 60_000)
        );
        assert_eq!(s.sync_flush_timeout_ms, 5000);
        assert!(s.check_crc_on_recover);
        assert_eq!(
            (
                s.transient_store_pool_enable,
                s.transient_store_pool_size,
                s.fast_fail_if_no_buffer_in_store_pool
            ),
            (false, 5, false)
        );
        assert_eq!(
            (
                s.warm_mapped_file_enable,
                s.flush_least_pages_when_warm_mapped_file
            ),
            (false, 4096)
        );
        assert_eq!(s.os_page_cache_busy_timeout_ms, 1000);
        assert_eq!(s.file_reserved_time_hours, 72);
        assert_eq!(s.delete_when, "04");
        assert_eq!(s.delete_when_hours(), vec![4]);
        assert_eq!(s.disk_max_used_space_ratio, 75);
        assert_eq!(
            (
                s.disk_space_warning_level_ratio,
                s.disk_space_clean_forcibly_ratio
            ),
            (90, 85)
        );
        assert_eq!(s.clean_resource_interval_ms, 10_000);
        assert_eq!(
            (
                s.delete_commit_log_files_interval_ms,
                s.delete_consume_queue_files_interval_ms
            ),
            (100, 100)
        );
        assert_eq!(
            (
                s.destroy_mapped_file_interval_forcibly_ms,
                s.redelete_hanged_file_interval_ms
            ),
            (120_000, 120_000)
        );
        assert!(s.clean_file_forcibly_enable);
        assert_eq!(s.delete_file_batch_max, 10);
        assert_eq!(
            (s.message_index_enable, s.message_index_safe),
            (true, false)
        );
        assert_eq!(
            (s.max_hash_slot_num, s.max_index_num),
            (5_000_000, 20_000_000)
        );
        assert_eq!((s.max_msgs_num_batch, s.default_query_max_num), (64, 32));
        assert_eq!(
            (
                s.max_transfer_bytes_on_message_in_memory,
                s.max_transfer_count_on_message_in_memory
            ),
            (262_144, 32)
        );
        assert_eq!(
            (
                s.max_transfer_bytes_on_message_in_disk,
                s.max_transfer_count_on_message_in_disk
            ),
            (65_536, 8)
        );
        assert_eq!(s.access_message_in_memory_max_ratio, 40);
        assert_eq!(s.ha_listen_port, 10912);
        assert_eq!(
            (
                s.ha_send_heartbeat_interval_ms,
                s.ha_housekeeping_interval_ms
            ),
            (5000, 20_000)
        );
        assert_eq!(s.ha_transfer_batch_size, 32_768);
        assert_eq!(s.ha_slave_fallbehind_max, 268_435_456);
        assert_eq!(s.slave_timeout_ms, 3000);
        assert_eq!(s.ha_master_address, None);
        assert_eq!(
            s.message_delay_level,
            "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
        );
        assert_eq!(s.flush_delay_offset_interval_ms, 10_000);
        assert_eq!(
            (
                s.max_topic_length,
                s.auto_message_version_on_topic_len,
                s.enabled_append_prop_crc
            ),
            (127, true, false)
        );
        assert!(!s.offset_check_in_slave);

        let b = &c.broker;
        assert_eq!(b.listen_port, 10911);
        assert_eq!(b.namesrv_addr, None);
        assert_eq!(b.broker_name, local_host_name());
        assert!(!b.broker_name.is_empty());
        assert_eq!(b.broker_cluster_name, "DefaultCluster");
        assert_eq!(b.broker_id, 0);
        assert_eq!(
            (b.broker_ip1.as_deref(), b.broker_ip2.as_deref()),
            (None, None)
        );
        assert_eq!(b.broker_permission, 6);
        assert_eq!(b.default_topic_queue_nums, 8);
        assert!(b.auto_create_topic_enable && b.auto_create_subscription_group);
        assert!(b.cluster_topic_enable && b.broker_topic_enable);
        assert_eq!(
            (b.long_polling_enable, b.short_polling_time_ms),
            (true, 1000)
        );
        assert_eq!(
            (
                b.register_name_server_period_ms,
                b.register_broker_timeout_ms
            ),
            (30_000, 6000)
        );
        assert_eq!((b.force_register, b.compressed_register), (true, false));
        assert_eq!(b.flush_consumer_offset_interval_ms, 5000);
        assert!(!b.slave_read_enable && !b.reject_transaction_message);
        assert_eq!(
            (
                b.transaction_timeout_ms,
                b.transaction_check_max,
                b.transaction_check_interval_ms
            ),
            (6000, 15, 60_000)
        );
        assert_eq!(
            (b.broker_fast_failure_enable, b.wait_time_ms_in_send_queue),
            (true, 200)
        );
        assert_eq!(b.server_channel_max_idle_time_secs, 120);
        assert_eq!(b.metrics_prom_exporter_port, 5557);

        c.validate().expect("defaults are valid");
    }

    #[test]
    fn empty_load_equals_defaults() {
        let loaded = load(None, &[]).unwrap();
        assert_eq!(loaded.config, Config::default());
        assert!(loaded.origins.is_empty());
        assert_eq!(loaded.origin_of("flushDiskType"), DEFAULT_ORIGIN);
        assert!(loaded.warnings().is_empty());
    }

    #[test]
    fn key_names_are_rocketmq_spellings() {
        let expected = [
            // MessageStoreConfig
            "storePathRootDir",
            "storePathCommitLog",
            "mappedFileSizeCommitLog",
            "mappedFileSizeConsumeQueue",
            "flushDiskType",
            "brokerRole",
            "maxMessageSize",
            "flushIntervalCommitLog",
            "commitIntervalCommitLog",
            "flushCommitLogLeastPages",
            "commitCommitLogLeastPages",
            "flushCommitLogThoroughInterval",
            "commitCommitLogThoroughInterval",
            "flushCommitLogTimed",
            "flushIntervalConsumeQueue",
            "flushConsumeQueueLeastPages",
            "flushConsumeQueueThoroughInterval",
            "syncFlushTimeout",
            "checkCRCOnRecover",
            "transientStorePoolEnable",
            "transientStorePoolSize",
            "fastFailIfNoBufferInStorePool",
            "warmMapedFileEnable",
            "flushLeastPagesWhenWarmMapedFile",
            "osPageCacheBusyTimeOutMills",
            "fileReservedTime",
            "deleteWhen",
            "diskMaxUsedSpaceRatio",
            "diskSpaceWarningLevelRatio",
            "diskSpaceCleanForciblyRatio",
            "cleanResourceInterval",
            "deleteCommitLogFilesInterval",
            "deleteConsumeQueueFilesInterval",
            "destroyMapedFileIntervalForcibly",
            "redeleteHangedFileInterval",
            "cleanFileForciblyEnable",
            "deleteFileBatchMax",
            "messageIndexEnable",
            "messageIndexSafe",
            "maxHashSlotNum",
            "maxIndexNum",
            "maxMsgsNumBatch",
            "defaultQueryMaxNum",
            "maxTransferBytesOnMessageInMemory",
            "maxTransferCountOnMessageInMemory",
            "maxTransferBytesOnMessageInDisk",
            "maxTransferCountOnMessageInDisk",
            "accessMessageInMemoryMaxRatio",
            "haListenPort",
            "haSendHeartbeatInterval",
            "haHousekeepingInterval",
            "haTransferBatchSize",
            "haSlaveFallbehindMax",
            "slaveTimeout",
            "haMasterAddress",
            "messageDelayLevel",
            "flushDelayOffsetInterval",
            "maxTopicLength",
            "autoMessageVersionOnTopicLen",
            "enabledAppendPropCRC",
            "offsetCheckInSlave",
            // BrokerConfig / NettyServerConfig
            "listenPort",
            "namesrvAddr",
            "brokerName",
            "brokerClusterName",
            "brokerId",
            "brokerIP1",
            "brokerIP2",
            "brokerPermission",
            "defaultTopicQueueNums",
            "autoCreateTopicEnable",
            "autoCreateSubscriptionGroup",
            "clusterTopicEnable",
            "brokerTopicEnable",
            "longPollingEnable",
            "shortPollingTimeMills",
            "registerNameServerPeriod",
            "registerBrokerTimeoutMills",
            "forceRegister",
            "compressedRegister",
            "flushConsumerOffsetInterval",
            "slaveReadEnable",
            "rejectTransactionMessage",
            "transactionTimeOut",
            "transactionCheckMax",
            "transactionCheckInterval",
            "brokerFastFailureEnable",
            "waitTimeMillsInSendQueue",
            "serverChannelMaxIdleTimeSeconds",
            "metricsPromExporterPort",
            "serverSelectorThreads",
        ];
        let expected: BTreeSet<&str> = expected.into_iter().collect();
        let actual: BTreeSet<&str> = known_keys().collect();
        assert_eq!(actual, expected);
        // Case/underscore-insensitive matching (environment) must be unambiguous, and no key
        // may be both ours and "RocketMQ only".
        let squashed: BTreeSet<String> = actual.iter().map(|k| squash(k)).collect();
        assert_eq!(squashed.len(), actual.len());
        for k in ROCKETMQ_ONLY_KEYS {
            assert!(
                !actual.contains(k),
                "{k} is both a known key and RocketMQ-only"
            );
        }
    }

    #[test]
    fn broker_toml_documents_every_key_once() {
        let lines = doc_key_lines();
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for (key, _) in &lines {
            *count.entry(key.as_str()).or_default() += 1;
        }
        for key in known_keys() {
            assert_eq!(
                count.get(key),
                Some(&1),
                "config/broker.toml must document `{key}` exactly once"
            );
        }
        let stray: Vec<_> = count
            .keys()
            .filter(|k| !known_keys().any(|known| known == **k))
            .collect();
        assert!(
            stray.is_empty(),
            "config/broker.toml documents keys that do not exist: {stray:?}"
        );
    }

    #[test]
    fn broker_toml_loads_to_defaults() {
        let loaded = load(Some(&doc_path()), &[]).unwrap();
        assert_eq!(loaded.config, Config::default());
        assert!(loaded.warnings().is_empty());
    }

    #[test]
    fn broker_toml_documented_defaults_are_the_defaults() {
        // Uncomment every documented line and load it: the values must be the defaults, except
        // on lines marked `# example`, which must still be valid.
        let lines = doc_key_lines();
        let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
        let loaded = load_layers(vec![
            Layer::from_toml_str("uncommented broker.toml", &text).unwrap()
        ])
        .unwrap_or_else(|e| panic!("documented values must be valid: {e}"));
        assert!(loaded.warnings().is_empty());
        let got = loaded.config.to_properties();
        let want = Config::default().to_properties();
        for (key, line) in &lines {
            if line.contains("# example") {
                continue;
            }
            assert_eq!(
                got[key], want[key],
                "config/broker.toml documents a wrong default for `{key}`"
            );
        }
    }

    #[test]
    fn derived_paths() {
        let mut s = StoreConfig {
            store_path_root_dir: PathBuf::from("/data/store"),
            ..Default::default()
        };
        assert_eq!(s.commitlog_dir(), Path::new("/data/store/commitlog"));
        assert_eq!(s.consumequeue_dir(), Path::new("/data/store/consumequeue"));
        assert_eq!(s.index_dir(), Path::new("/data/store/index"));
        assert_eq!(s.config_dir(), Path::new("/data/store/config"));
        assert_eq!(s.checkpoint_path(), Path::new("/data/store/checkpoint"));
        assert_eq!(s.abort_path(), Path::new("/data/store/abort"));
        assert_eq!(s.lock_path(), Path::new("/data/store/lock"));
        s.store_path_commit_log = Some(PathBuf::from("/fast/cl"));
        assert_eq!(s.commitlog_dir(), Path::new("/fast/cl"));
    }

    #[test]
    fn toml_overrides_defaults() {
        let loaded = toml(
            r#"
            storePathRootDir = "/tmp/amq"
            mappedFileSizeCommitLog = 8192
            flushDiskType = "SYNC_FLUSH"
            brokerRole = "SLAVE"
            brokerId = 2
            brokerIP1 = "10.1.2.3"
            maxMessageSize = 4096
            checkCRCOnRecover = false
            deleteWhen = "04;16"
            namesrvAddr = "a:9876;b:9876"
            haMaxGapNotInSync = 1024
            "#,
        )
        .unwrap();
        let c = &loaded.config;
        assert_eq!(c.store.store_path_root_dir, Path::new("/tmp/amq"));
        assert_eq!(c.store.commitlog_dir(), Path::new("/tmp/amq/commitlog"));
        assert_eq!(c.store.mapped_file_size_commit_log, 8192);
        assert_eq!(c.store.flush_disk_type, FlushDiskType::SyncFlush);
        assert_eq!(c.store.broker_role, BrokerRole::Slave);
        assert_eq!(c.broker.broker_id, 2);
        assert_eq!(c.broker.broker_ip1.as_deref(), Some("10.1.2.3"));
        assert!(!c.store.check_crc_on_recover);
        assert_eq!(c.store.delete_when_hours(), vec![4, 16]);
        assert_eq!(c.broker.namesrv_addrs(), vec!["a:9876", "b:9876"]);
        assert_eq!(c.store.ha_slave_fallbehind_max, 1024, "5.x alias");
        assert_eq!(loaded.origin_of("flushDiskType"), "config/broker.toml");
        assert_eq!(loaded.origin_of("listenPort"), DEFAULT_ORIGIN);
        // Untouched keys keep their defaults.
        assert_eq!(c.broker.listen_port, 10911);
        assert_eq!(c.store.ha_listen_port, 10912);
    }

    #[test]
    fn env_overrides_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.toml");
        std::fs::write(
            &path,
            "flushDiskType = \"ASYNC_FLUSH\"\nmaxMessageSize = 1000\nlistenPort = 20911\n",
        )
        .unwrap();
        let e = env(&[
            ("ACTORMQ_FLUSHDISKTYPE", "SYNC_FLUSH"),
            ("ACTORMQ_maxMessageSize", " 2048 "),
            ("ACTORMQ_MESSAGE_INDEX_ENABLE", "FALSE"),
            ("ACTORMQ_brokerIP1", "::1"),
            ("PATH", "/usr/bin"),
        ]);
        let loaded = load(Some(&path), &e).unwrap();
        let c = &loaded.config;
        assert_eq!(c.store.flush_disk_type, FlushDiskType::SyncFlush);
        assert_eq!(
            c.store.max_message_size, 2048,
            "strings from the environment convert to numbers"
        );
        assert!(!c.store.message_index_enable, "and to booleans");
        assert_eq!(c.broker.broker_ip1.as_deref(), Some("::1"));
        assert_eq!(
            c.broker.listen_port, 20911,
            "the file still applies where env is silent"
        );
        assert_eq!(
            c.store.ha_listen_port, 20912,
            "haListenPort follows listenPort when unset"
        );
        assert_eq!(
            loaded.origin_of("flushDiskType"),
            "environment variable ACTORMQ_FLUSHDISKTYPE"
        );
        assert_eq!(loaded.origin_of("listenPort"), path.display().to_string());
        assert_eq!(
            loaded.origin_of("haListenPort"),
            "derived from listenPort (listenPort + 1)"
        );
        assert!(loaded.warnings().is_empty(), "{:?}", loaded.warnings());
    }

    #[test]
    fn explicit_ha_listen_port_wins() {
        let c = toml("listenPort = 20911\nhaListenPort = 30000")
            .unwrap()
            .config;
        assert_eq!(
            (c.broker.listen_port, c.store.ha_listen_port),
            (20911, 30000)
        );
        let c = toml("listenPort = 0").unwrap().config;
        assert_eq!(
            (c.broker.listen_port, c.store.ha_listen_port),
            (0, 0),
            "0 = ephemeral for both"
        );
        let v = only_violation(toml("listenPort = 65535").unwrap_err());
        assert_eq!(v.key, "listenPort");
        let v = only_violation(toml("listenPort = 7000\nhaListenPort = 7000").unwrap_err());
        assert_eq!(
            v.to_string(),
            "config/broker.toml: haListenPort = 7000: port already used by listenPort"
        );
    }

    #[test]
    fn namesrv_addr_env_alias() {
        let dir = tempfile::tempdir().unwrap();
        let with = dir.path().join("with.toml");
        let without = dir.path().join("without.toml");
        std::fs::write(&with, "namesrvAddr = \"file:9876\"").unwrap();
        std::fs::write(&without, "brokerClusterName = \"C1\"").unwrap();

        let alias = env(&[("NAMESRV_ADDR", "env:9876")]);
        let loaded = load(Some(&without), &alias).unwrap();
        assert_eq!(
            loaded.config.broker.namesrv_addr.as_deref(),
            Some("env:9876")
        );
        assert_eq!(
            loaded.origin_of("namesrvAddr"),
            "environment variable NAMESRV_ADDR"
        );

        // As in RocketMQ, the file beats NAMESRV_ADDR...
        let loaded = load(Some(&with), &alias).unwrap();
        assert_eq!(
            loaded.config.broker.namesrv_addr.as_deref(),
            Some("file:9876")
        );

        // ...and ACTORMQ_NAMESRVADDR beats both.
        let both = env(&[
            ("NAMESRV_ADDR", "env:9876"),
            ("ACTORMQ_NAMESRVADDR", "override:9876"),
        ]);
        let loaded = load(Some(&with), &both).unwrap();
        assert_eq!(
            loaded.config.broker.namesrv_addr.as_deref(),
            Some("override:9876")
        );

        // Empty means unset.
        let loaded = load(None, &env(&[("NAMESRV_ADDR", "")])).unwrap();
        assert_eq!(loaded.config.broker.namesrv_addr, None);

        let v = only_violation(load(None, &env(&[("NAMESRV_ADDR", "localhost")])).unwrap_err());
        assert_eq!(v.origin, "environment variable NAMESRV_ADDR");
        assert_eq!(v.key, "namesrvAddr");
    }

    #[test]
    fn error_wrong_type_names_origin_key_value_rule() {
        let err = toml("maxMessageSize = \"big\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: maxMessageSize = \"big\": expected an integer"
        );

        let err = load(None, &env(&[("ACTORMQ_MAXMESSAGESIZE", "4MB")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable ACTORMQ_MAXMESSAGESIZE: maxMessageSize = \"4MB\": expected an integer"
        );

        let err = load(None, &env(&[("ACTORMQ_checkCRCOnRecover", "maybe")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable ACTORMQ_checkCRCOnRecover: checkCRCOnRecover = \"maybe\": expected true or false"
        );

        let err = toml("maxMessageSize = 4.5").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: maxMessageSize = 4.5: expected an integer"
        );

        let err = toml("brokerName = [\"a\"]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: brokerName = [\"a\"]: expected a string"
        );
    }

    #[test]
    fn error_out_of_range() {
        let err = toml("diskMaxUsedSpaceRatio = 99").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: diskMaxUsedSpaceRatio = 99: expected 10..=95 (percent)"
        );

        let err = toml("listenPort = 70000").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: listenPort = 70000: expected an integer in 0..=65535"
        );

        let err = toml("fileReservedTime = -1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: fileReservedTime = -1: expected a non-negative integer"
        );

        let v = only_violation(
            toml("mappedFileSizeCommitLog = 5000\nmaxMessageSize = 1000").unwrap_err(),
        );
        assert_eq!(
            (v.key.as_str(), v.value.as_str()),
            ("mappedFileSizeCommitLog", "5000")
        );
        assert!(v.rule.starts_with("expected a multiple of 4096"), "{v}");

        let v = only_violation(
            toml("maxMessageSize = 8193\nmappedFileSizeCommitLog = 8192").unwrap_err(),
        );
        assert_eq!(v.to_string(), "config/broker.toml: maxMessageSize = 8193: expected 1..=mappedFileSizeCommitLog (8192) bytes");

        // Cross-key rules name the other key: here the default maxMessageSize no longer fits.
        let v = only_violation(toml("mappedFileSizeCommitLog = 8192").unwrap_err());
        assert_eq!(v.to_string(), "built-in default: maxMessageSize = 4194304: expected 1..=mappedFileSizeCommitLog (8192) bytes");

        let v = only_violation(toml("flushIntervalCommitLog = 0").unwrap_err());
        assert_eq!(
            v.to_string(),
            "config/broker.toml: flushIntervalCommitLog = 0: expected > 0 (ms)"
        );

        let v = only_violation(toml("deleteWhen = \"4;25\"").unwrap_err());
        assert_eq!(v.key, "deleteWhen");

        let v = only_violation(toml("maxHashSlotNum = 0").unwrap_err());
        assert_eq!(v.key, "maxHashSlotNum");
        let v = only_violation(toml("maxIndexNum = 2000000000").unwrap_err());
        assert!(v.rule.contains("index file size"), "{v}");

        let v = only_violation(toml("brokerIP1 = \"my-host\"").unwrap_err());
        assert_eq!(v.key, "brokerIP1");
    }

    #[test]
    fn error_bad_enum() {
        let err = toml("flushDiskType = \"SOMETIMES\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: flushDiskType = \"SOMETIMES\": expected ASYNC_FLUSH or SYNC_FLUSH"
        );
        let err = load(None, &env(&[("ACTORMQ_BROKER_ROLE", "LEADER")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable ACTORMQ_BROKER_ROLE: brokerRole = \"LEADER\": expected ASYNC_MASTER, SYNC_MASTER or SLAVE"
        );
        // RocketMQ's spelling in any case is accepted.
        assert_eq!(
            toml("flushDiskType = \"sync_flush\"")
                .unwrap()
                .config
                .store
                .flush_disk_type,
            FlushDiskType::SyncFlush
        );
    }

    #[test]
    fn error_bad_delay_levels() {
        let err = toml("messageDelayLevel = \"1s 5x 10s\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: messageDelayLevel = \"1s 5x 10s\": level 2 \"5x\": expected a whole number \
             followed by one unit of s, m, h, d (e.g. \"30s\", \"2h\")"
        );
        let v = only_violation(toml("messageDelayLevel = \"  \"").unwrap_err());
        assert_eq!(
            v.rule,
            "expected at least one level, e.g. \"1s 5s 10s 30s 1m\""
        );
    }

    #[test]
    fn broker_id_must_match_role() {
        let err = toml("brokerRole = \"SLAVE\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "built-in default: brokerId = 0: expected > 0 when brokerRole = SLAVE (0 is the master's id)"
        );
        let err = toml("brokerId = 1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config/broker.toml: brokerId = 1: expected 0 when brokerRole = ASYNC_MASTER (slaves use ids > 0)"
        );
        toml("brokerRole = \"SYNC_MASTER\"\nbrokerId = 0").unwrap();
    }

    #[test]
    fn all_violations_are_reported_together() {
        let err = load_layers(vec![
            Layer::from_toml_str("a.toml", "maxMessageSize = \"x\"\nflushDiskType = \"NO\"")
                .unwrap(),
            Layer::from_strings("command line", [("listenPort", "abc")]),
        ])
        .unwrap_err();
        let keys: Vec<_> = err
            .violations()
            .iter()
            .map(|v| (v.origin.as_str(), v.key.as_str()))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("a.toml", "flushDiskType"),
                ("a.toml", "maxMessageSize"),
                ("command line", "listenPort")
            ]
        );
        assert_eq!(err.to_string().lines().count(), 3);

        // A bad value is an error even when a later layer overrides it.
        let err = load_layers(vec![
            Layer::from_toml_str("a.toml", "maxMessageSize = \"x\"").unwrap(),
            Layer::from_strings("command line", [("maxMessageSize", "100")]),
        ])
        .unwrap_err();
        assert_eq!(only_violation(err).origin, "a.toml");

        // Validation errors are collected too.
        let err = toml("diskMaxUsedSpaceRatio = 5\ntransactionCheckMax = 0").unwrap_err();
        assert_eq!(err.violations().len(), 2);
    }

    #[test]
    fn unknown_keys_are_reported_with_origin() {
        let loaded = load_layers(vec![
            Layer::from_toml_str(
                "config/broker.toml",
                "flushDiskTyp = \"SYNC_FLUSH\"\nbrokerip1 = \"1.2.3.4\"\nsendMessageThreadPoolNums = 16\n[store]\nx = 1\n",
            )
            .unwrap(),
            Layer::from_env(&env(&[("ACTORMQ_NO_SUCH_THING", "1"), ("ACTORMQ_useReentrantLockWhenPutMessage", "true")])),
        ])
        .unwrap();
        assert_eq!(
            loaded.unknown_keys(),
            vec![
                "config/broker.toml: brokerip1",
                "config/broker.toml: flushDiskTyp",
                "config/broker.toml: store",
                "environment variable ACTORMQ_NO_SUCH_THING: NO_SUCH_THING",
            ]
        );
        let w = loaded.warnings();
        assert!(w.contains(&"config/broker.toml: flushDiskTyp: unknown key (ignored); did you mean flushDiskType?".to_owned()), "{w:?}");
        assert!(
            w.contains(
                &"config/broker.toml: brokerip1: unknown key (ignored); did you mean brokerIP1?"
                    .to_owned()
            ),
            "{w:?}"
        );
        assert!(
            w.iter().any(|l| l.starts_with(
                "config/broker.toml: store: unknown key (ignored): tables are not supported"
            )),
            "{w:?}"
        );
        let unsupported: Vec<_> = loaded
            .unsupported
            .iter()
            .map(|u| (u.origin.as_str(), u.key.as_str()))
            .collect();
        assert_eq!(
            unsupported,
            vec![
                ("config/broker.toml", "sendMessageThreadPoolNums"),
                (
                    "environment variable ACTORMQ_useReentrantLockWhenPutMessage",
                    "useReentrantLockWhenPutMessage"
                ),
            ]
        );
        // Unknown keys do not change anything.
        assert_eq!(loaded.config, Config::default());

        assert_eq!(
            unknown_keys([
                "flushDiskType",
                "flushDiskTyp",
                "haMaxGapNotInSync",
                "transferMsgByHeap",
                "x"
            ]),
            vec!["flushDiskTyp", "x"]
        );
    }

    #[test]
    fn source_errors_name_the_file() {
        let err = load(Some(Path::new("/nonexistent/broker.toml")), &[]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/nonexistent/broker.toml: cannot read: "),
            "{err}"
        );
        let err = toml("flushDiskType = ").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Source { origin, .. } if origin == "config/broker.toml"),
            "{err}"
        );
    }

    #[test]
    fn strings_layer_like_properties_or_cli() {
        let loaded = load_layers(vec![
            Layer::from_strings(
                "conf/broker.conf",
                [("brokerClusterName", "C"), ("fileReservedTime", "48")],
            ),
            Layer::from_strings("command line", [("fileReservedTime", "24")]),
        ])
        .unwrap();
        assert_eq!(loaded.config.broker.broker_cluster_name, "C");
        assert_eq!(loaded.config.store.file_reserved_time_hours, 24);
        assert_eq!(loaded.origin_of("fileReservedTime"), "command line");
        assert_eq!(loaded.origin_of("brokerClusterName"), "conf/broker.conf");
    }

    #[test]
    fn delay_levels_default() {
        let s = StoreConfig::default();
        let levels = s.delay_levels_ms().unwrap();
        assert_eq!(
            &*levels,
            &[
                1000, 5000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
                420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
            ]
        );
        assert_eq!(s.max_delay_level(), 18);
        assert!(
            matches!(s.delay_levels_ms().unwrap(), Cow::Borrowed(_)),
            "second call is served from the cache"
        );
    }

    #[test]
    fn delay_level_cache_is_never_stale() {
        let mut s = StoreConfig::default();
        assert_eq!(s.max_delay_level(), 18);
        s.message_delay_level = "1d 2h".to_owned();
        assert_eq!(&*s.delay_levels_ms().unwrap(), &[86_400_000, 7_200_000]);
        let clone = s.clone();
        assert_eq!(&*clone.delay_levels_ms().unwrap(), &[86_400_000, 7_200_000]);
        assert_eq!(
            s,
            StoreConfig {
                message_delay_level: "1d 2h".to_owned(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn parse_delay_levels_rules() {
        assert_eq!(
            parse_delay_levels("1s  2m\t3h 4d 0s").unwrap(),
            vec![1000, 120_000, 10_800_000, 345_600_000, 0]
        );
        for bad in [
            "", "   ", "5", "s", "-1s", "+1s", "1.5s", "1S", "1sec", "1µ", "1s 2w",
        ] {
            assert!(parse_delay_levels(bad).is_err(), "{bad:?} must be rejected");
        }
        assert_eq!(
            parse_delay_levels("1s 99999999999999999999s"),
            Err(DelayLevelError::Overflow {
                level: 2,
                token: "99999999999999999999s".to_owned()
            })
        );
        assert!(matches!(
            parse_delay_levels("999999999999999d"),
            Err(DelayLevelError::Overflow { .. })
        ));
    }

    #[test]
    fn consume_queue_file_size_rounds_up() {
        let c = toml("mappedFileSizeConsumeQueue = 1000001").unwrap().config;
        assert_eq!(c.store.mapped_file_size_consume_queue, 1_000_020);
        let c = toml("mappedFileSizeConsumeQueue = 1").unwrap().config;
        assert_eq!(c.store.mapped_file_size_consume_queue, 20);
        let c = toml("mappedFileSizeConsumeQueue = 6000000").unwrap().config;
        assert_eq!(c.store.mapped_file_size_consume_queue, 6_000_000);
        let v = only_violation(toml("mappedFileSizeConsumeQueue = 0").unwrap_err());
        assert_eq!(v.key, "mappedFileSizeConsumeQueue");

        // Built in code: validate() refuses, normalize() fixes.
        let mut c = Config::default();
        c.store.mapped_file_size_consume_queue = 30;
        let v = only_violation(c.validate().unwrap_err());
        assert_eq!(v.origin, IN_MEMORY_ORIGIN);
        c.normalize();
        assert_eq!(c.store.mapped_file_size_consume_queue, 40);
        c.validate().unwrap();
    }

    #[test]
    fn small_files_for_tests_are_allowed() {
        let c = toml("mappedFileSizeCommitLog = 4096\nmaxMessageSize = 1024\nmappedFileSizeConsumeQueue = 200\nlistenPort = 0\nmetricsPromExporterPort = 0")
            .unwrap()
            .config;
        assert_eq!(c.store.mapped_file_size_commit_log, 4096);
        assert_eq!(c.store.ha_listen_port, 0);
    }

    #[test]
    fn transient_store_pool_on_masters_with_either_flush_type_as_rocketmq_5() {
        let mut s = StoreConfig {
            transient_store_pool_enable: true,
            ..Default::default()
        };
        assert!(s.transient_store_pool_effective());
        s.flush_disk_type = FlushDiskType::SyncFlush;
        assert!(s.transient_store_pool_effective());
        s.broker_role = BrokerRole::SyncMaster;
        assert!(s.transient_store_pool_effective());
        s.broker_role = BrokerRole::Slave;
        assert!(!s.transient_store_pool_effective());
        s.broker_role = BrokerRole::AsyncMaster;
        s.transient_store_pool_enable = false;
        assert!(!s.transient_store_pool_effective());
    }

    #[test]
    fn to_properties_uses_rocketmq_names() {
        let p = Config::default().to_properties();
        assert_eq!(p["flushDiskType"], "ASYNC_FLUSH");
        assert_eq!(p["syncFlushTimeout"], "5000");
        assert_eq!(p["checkCRCOnRecover"], "true");
        assert_eq!(p["namesrvAddr"], "");
        assert_eq!(p.len(), known_keys().count());
    }

    // ---- Java properties files (broker.conf), CLI overrides, -p / -m ----------------------

    fn manifest_path(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
    }

    fn cli(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        env(pairs)
    }

    /// Writes `text` to `<tempdir>/<name>`; returns the dir guard and the path.
    fn temp_file(name: &str, text: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn sample_broker_conf_loads_what_it_states() {
        let path = manifest_path("config/broker.conf");
        let text = std::fs::read_to_string(&path).unwrap();
        // The sample keeps exercising the syntax it documents.
        assert!(text.lines().any(|l| l.starts_with('!')), "a ! comment");
        assert!(
            text.lines().any(|l| l.starts_with("listenPort:")),
            "a : separator"
        );
        assert!(text.contains("broker\\u002Da"), "a \\u escape");
        assert!(text.lines().any(|l| l.ends_with(" \\")), "a continuation");

        let loaded = load(Some(&path), &[]).unwrap();
        let c = &loaded.config;
        assert_eq!(c.broker.broker_cluster_name, "DefaultCluster");
        assert_eq!(c.broker.broker_name, "broker-a");
        assert_eq!(c.broker.broker_id, 0);
        assert_eq!(c.broker.listen_port, 10911);
        assert_eq!(c.store.ha_listen_port, 10912);
        assert_eq!(c.store.broker_role, BrokerRole::AsyncMaster);
        assert_eq!(c.store.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(c.store.delete_when, "04");
        assert_eq!(c.store.file_reserved_time_hours, 48);
        assert!(c.broker.auto_create_topic_enable && c.broker.auto_create_subscription_group);
        assert_eq!(c.store.message_delay_level, DEFAULT_MESSAGE_DELAY_LEVEL);
        assert_eq!(c.broker.namesrv_addr, None, "commented out");

        let origin = path.display().to_string();
        let set = [
            "brokerClusterName",
            "brokerName",
            "brokerId",
            "listenPort",
            "brokerRole",
            "flushDiskType",
            "deleteWhen",
            "fileReservedTime",
            "autoCreateTopicEnable",
            "autoCreateSubscriptionGroup",
            "messageDelayLevel",
        ];
        for key in set {
            assert_eq!(loaded.origin_of(key), origin, "{key}");
        }
        // Nothing else changed.
        let (got, want) = (c.to_properties(), Config::default().to_properties());
        for key in known_keys() {
            if !set.contains(&key) && key != "haListenPort" {
                assert_eq!(got[key], want[key], "{key} must keep its default");
            }
        }

        assert_eq!(
            loaded.unknown_keys(),
            vec![format!("{origin}: exampleUnknownKey")]
        );
        assert_eq!(
            loaded.warnings(),
            vec![format!(
                "{origin}: exampleUnknownKey: unknown key (ignored)"
            )]
        );
    }

    #[test]
    fn conf_unknown_keys_warn_with_file_and_hint() {
        let (_dir, path) = temp_file(
            "broker.conf",
            b"flushDiskTyp=SYNC_FLUSH\nbrokerip1=1.2.3.4\nsendMessageThreadPoolNums=16\n",
        );
        let loaded = load(Some(&path), &[]).unwrap();
        let origin = path.display().to_string();
        assert_eq!(
            loaded.warnings(),
            vec![
                format!("{origin}: brokerip1: unknown key (ignored); did you mean brokerIP1?"),
                format!(
                    "{origin}: flushDiskTyp: unknown key (ignored); did you mean flushDiskType?"
                ),
                format!(
                    "{origin}: sendMessageThreadPoolNums: RocketMQ setting that ActorMQ does not use (ignored)"
                ),
            ]
        );
        assert_eq!(loaded.config, Config::default());
    }

    #[test]
    fn conf_layers_env_over_file_cli_over_both() {
        let (_dir, path) = temp_file(
            "broker.conf",
            b"namesrvAddr = file:9876\nfileReservedTime = 48\nflushDiskType = ASYNC_FLUSH\n\
              listenPort = 20911\nbrokerClusterName = FromFile\n",
        );
        let origin = path.display().to_string();
        let e = env(&[
            ("NAMESRV_ADDR", "env:9876"),
            ("ACTORMQ_FLUSHDISKTYPE", "SYNC_FLUSH"),
            ("ACTORMQ_fileReservedTime", "24"),
        ]);

        // Environment over file; the file's namesrvAddr over NAMESRV_ADDR.
        let loaded = load(Some(&path), &e).unwrap();
        let c = &loaded.config;
        assert_eq!(c.broker.namesrv_addr.as_deref(), Some("file:9876"));
        assert_eq!(loaded.origin_of("namesrvAddr"), origin);
        assert_eq!(c.store.flush_disk_type, FlushDiskType::SyncFlush);
        assert_eq!(c.store.file_reserved_time_hours, 24);
        assert_eq!(
            loaded.origin_of("fileReservedTime"),
            "environment variable ACTORMQ_fileReservedTime"
        );
        assert_eq!(c.broker.listen_port, 20911);
        assert_eq!(c.store.ha_listen_port, 20912);

        // Command line (-n and key=value) over environment and file.
        let overrides = cli(&[
            ("namesrvAddr", "cli:9876"),
            ("fileReservedTime", "12"),
            ("brokerClusterName", " FromCli "),
        ]);
        let loaded = load_with_overrides(Some(&path), &e, &overrides).unwrap();
        let c = &loaded.config;
        assert_eq!(c.broker.namesrv_addr.as_deref(), Some("cli:9876"));
        assert_eq!(c.store.file_reserved_time_hours, 12);
        assert_eq!(c.broker.broker_cluster_name, "FromCli");
        for key in ["namesrvAddr", "fileReservedTime", "brokerClusterName"] {
            assert_eq!(loaded.origin_of(key), CLI_ORIGIN, "{key}");
        }
        assert_eq!(
            c.store.flush_disk_type,
            FlushDiskType::SyncFlush,
            "env still applies"
        );
        assert_eq!(c.broker.listen_port, 20911, "file still applies");

        // Without a file: -n over NAMESRV_ADDR; ACTORMQ_NAMESRVADDR between them.
        let ns = env(&[("NAMESRV_ADDR", "env:9876")]);
        let n = cli(&[("namesrvAddr", "cli:9876")]);
        let got = |env: &[(String, String)], cli: &[(String, String)]| {
            load_with_overrides(None, env, cli)
                .unwrap()
                .config
                .broker
                .namesrv_addr
        };
        assert_eq!(got(&ns, &[]).as_deref(), Some("env:9876"));
        assert_eq!(got(&ns, &n).as_deref(), Some("cli:9876"));
        let both = env(&[
            ("NAMESRV_ADDR", "env:9876"),
            ("ACTORMQ_NAMESRVADDR", "actormq:9876"),
        ]);
        assert_eq!(got(&both, &[]).as_deref(), Some("actormq:9876"));
        assert_eq!(got(&both, &n).as_deref(), Some("cli:9876"));

        // A later pair for the same key wins.
        let c = load_with_overrides(
            None,
            &[],
            &cli(&[("listenPort", "1000"), ("listenPort", "2000")]),
        )
        .unwrap()
        .config;
        assert_eq!(c.broker.listen_port, 2000);
    }

    #[test]
    fn cli_overrides_are_checked_like_files() {
        let err = load_with_overrides(None, &[], &cli(&[("listenPort", "abc")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "command line: listenPort = \"abc\": expected an integer"
        );
        let loaded = load_with_overrides(None, &[], &cli(&[("listenport", "1")])).unwrap();
        assert_eq!(
            loaded.warnings(),
            vec!["command line: listenport: unknown key (ignored); did you mean listenPort?"]
        );

        assert_eq!(
            parse_override("flushDiskType=SYNC_FLUSH").unwrap(),
            ("flushDiskType".to_owned(), "SYNC_FLUSH".to_owned())
        );
        assert_eq!(
            parse_override(" namesrvAddr = a:1;b:2=x ").unwrap(),
            ("namesrvAddr".to_owned(), "a:1;b:2=x".to_owned())
        );
        assert_eq!(
            parse_override("brokerIP1=").unwrap(),
            ("brokerIP1".to_owned(), String::new())
        );
        for bad in ["flushDiskType", "=SYNC_FLUSH", " = x", ""] {
            let err = parse_override(bad).unwrap_err();
            assert!(
                err.to_string().starts_with("command line: ")
                    && err
                        .to_string()
                        .ends_with(": expected key=value, e.g. flushDiskType=SYNC_FLUSH"),
                "{err}"
            );
        }
    }

    #[test]
    fn master_slave_examples_load_and_validate() {
        let master_conf = manifest_path("config/2m-2s-async/broker-a.conf");
        let slave_conf = manifest_path("config/2m-2s-async/broker-a-s.conf");
        let master = load(Some(&master_conf), &[]).unwrap();
        let slave = load(Some(&slave_conf), &[]).unwrap();
        for (loaded, id, role) in [
            (&master, 0, BrokerRole::AsyncMaster),
            (&slave, 1, BrokerRole::Slave),
        ] {
            let c = &loaded.config;
            assert!(loaded.warnings().is_empty(), "{:?}", loaded.warnings());
            assert_eq!(c.broker.broker_cluster_name, "DefaultCluster");
            assert_eq!(c.broker.broker_name, "broker-a");
            assert_eq!(c.broker.broker_id, id);
            assert_eq!(c.store.broker_role, role);
            assert_eq!(c.store.flush_disk_type, FlushDiskType::AsyncFlush);
            assert_eq!(c.store.delete_when, "04");
            assert_eq!(c.store.file_reserved_time_hours, 48);
            c.validate().unwrap();
        }
        assert!(slave.config.broker.broker_id > 0);
        assert!(slave.config.store.broker_role.is_slave());
        assert_eq!(
            slave.origin_of("brokerRole"),
            slave_conf.display().to_string()
        );

        // The TOML files say the same.
        let master_toml = load(Some(&manifest_path("config/master.toml")), &[]).unwrap();
        let slave_toml = load(Some(&manifest_path("config/slave.toml")), &[]).unwrap();
        assert_eq!(master_toml.config, master.config);
        assert_eq!(slave_toml.config, slave.config);
        assert!(master_toml.warnings().is_empty() && slave_toml.warnings().is_empty());
        assert_eq!(
            master_toml.origins.keys().collect::<Vec<_>>(),
            master.origins.keys().collect::<Vec<_>>()
        );

        // Uncommenting the one-host lines keeps both valid and their ports apart.
        let uncomment = |p: &Path| -> String {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| {
                    l.strip_prefix('#')
                        .filter(|r| r.starts_with(|c: char| c.is_ascii_lowercase()))
                        .unwrap_or(l)
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let m = load_layers(vec![Layer::from_properties_str(
            "m",
            &uncomment(&master_conf),
        )
        .unwrap()])
        .unwrap();
        let s = load_layers(vec![Layer::from_properties_str(
            "s",
            &uncomment(&slave_conf),
        )
        .unwrap()])
        .unwrap();
        assert!(m.warnings().is_empty() && s.warnings().is_empty());
        assert_ne!(
            m.config.store.store_path_root_dir,
            s.config.store.store_path_root_dir
        );
        let m_ports = [m.config.broker.listen_port, m.config.store.ha_listen_port];
        let s_ports = [s.config.broker.listen_port, s.config.store.ha_listen_port];
        assert!(m_ports.iter().all(|p| !s_ports.contains(p)));
        assert_eq!(
            s.config.store.ha_master_address.as_deref(),
            Some(format!("127.0.0.1:{}", m.config.store.ha_listen_port).as_str())
        );
    }

    #[test]
    fn invalid_conf_values_name_file_key_value_rule() {
        let cases: &[(&str, &str)] = &[
            ("listenPort=abc", "listenPort = \"abc\": expected an integer"),
            ("listenPort=", "listenPort = \"\": expected an integer"),
            (
                "listenPort=70000",
                "listenPort = \"70000\": expected an integer in 0..=65535",
            ),
            (
                "fileReservedTime=-1",
                "fileReservedTime = \"-1\": expected a non-negative integer",
            ),
            (
                "maxMessageSize : 4MB",
                "maxMessageSize = \"4MB\": expected an integer",
            ),
            (
                "checkCRCOnRecover yes",
                "checkCRCOnRecover = \"yes\": expected true or false",
            ),
            (
                "flushDiskType=SOMETIMES",
                "flushDiskType = \"SOMETIMES\": expected ASYNC_FLUSH or SYNC_FLUSH",
            ),
            (
                "brokerRole=LEADER",
                "brokerRole = \"LEADER\": expected ASYNC_MASTER, SYNC_MASTER or SLAVE",
            ),
            (
                "flushDiskType=\"SYNC_FLUSH\"",
                "flushDiskType = \"\\\"SYNC_FLUSH\\\"\": expected ASYNC_FLUSH or SYNC_FLUSH",
            ),
            (
                "diskMaxUsedSpaceRatio=99",
                "diskMaxUsedSpaceRatio = 99: expected 10..=95 (percent)",
            ),
            (
                "flushIntervalCommitLog=0",
                "flushIntervalCommitLog = 0: expected > 0 (ms)",
            ),
            (
                "transactionCheckMax=0",
                "transactionCheckMax = 0: expected > 0",
            ),
            (
                "mappedFileSizeCommitLog=5000\nmaxMessageSize=1000",
                "mappedFileSizeCommitLog = 5000: expected a multiple of 4096 in 4096..=2147479552 (bytes)",
            ),
            (
                "deleteWhen=04;25",
                "deleteWhen = \"04;25\": expected hours of day 0..=23 separated by ';', e.g. \"04\" or \"04;16\"",
            ),
            (
                "messageDelayLevel=1s \\\n 5x",
                "messageDelayLevel = \"1s 5x\": level 2 \"5x\": expected a whole number followed by one \
                 unit of s, m, h, d (e.g. \"30s\", \"2h\")",
            ),
            (
                "brokerName=",
                "brokerName = \"\": expected a non-empty name",
            ),
            (
                "brokerId=1",
                "brokerId = 1: expected 0 when brokerRole = ASYNC_MASTER (slaves use ids > 0)",
            ),
            (
                "brokerRole=SLAVE\nbrokerId=0",
                "brokerId = 0: expected > 0 when brokerRole = SLAVE (0 is the master's id)",
            ),
            (
                "brokerIP1=my-host",
                "brokerIP1 = \"my-host\": expected an IPv4 or IPv6 address (it is encoded into message ids)",
            ),
            (
                "namesrvAddr=localhost",
                "namesrvAddr = \"localhost\": expected host:port entries separated by ';', e.g. \
                 \"127.0.0.1:9876;192.168.0.1:9876\" (bad entry \"localhost\")",
            ),
            (
                "brokerRole=SLAVE\nbrokerId=1\nhaMasterAddress=master",
                "haMasterAddress = \"master\": expected host:port, e.g. \"192.168.0.1:10912\"",
            ),
            (
                "haListenPort=10911",
                "haListenPort = 10911: port already used by listenPort",
            ),
            (
                "brokerPermission=8",
                "brokerPermission = 8: expected 0..=7 (PermName bits READ=4, WRITE=2, INHERIT=1)",
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        let origin = path.display().to_string();
        for (text, want) in cases {
            std::fs::write(&path, format!("# bad value below\n{text}\n")).unwrap();
            let err = load(Some(&path), &[]).unwrap_err();
            assert_eq!(err.to_string(), format!("{origin}: {want}"), "for {text:?}");
            let v = only_violation(err);
            assert_eq!(v.origin, origin);
        }

        // Every bad value is reported, one line each, even when the environment overrides it.
        std::fs::write(&path, "listenPort=x\nflushDiskType=NO\nbrokerIP1=h\n").unwrap();
        let err = load(Some(&path), &env(&[("ACTORMQ_LISTENPORT", "1")])).unwrap_err();
        assert_eq!(err.violations().len(), 2, "{err}");
        let err = load(Some(&path), &[]).unwrap_err();
        assert_eq!(err.to_string().lines().count(), 2, "{err}");
        std::fs::write(&path, "flushDiskType=ASYNC_FLUSH\nbrokerIP1=h\n").unwrap();
        let v = only_violation(load(Some(&path), &[]).unwrap_err());
        assert_eq!(
            (v.origin.as_str(), v.key.as_str()),
            (origin.as_str(), "brokerIP1")
        );
    }

    #[test]
    fn conf_syntax_errors_name_file_and_line() {
        let (_dir, path) = temp_file(
            "broker.conf",
            b"# comment\nbrokerName = a\nbrokerClusterName = \\\n   C\\u00G1\n",
        );
        let err = load(Some(&path), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}:4: malformed \\uXXXX escape \"\\u00G1\": expected \\u followed by four hex digits",
                path.display()
            )
        );
        assert!(matches!(err, ConfigError::Source { .. }));

        let err = load(Some(Path::new("/nonexistent/broker.conf")), &[]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/nonexistent/broker.conf: cannot read: "),
            "{err}"
        );
    }

    #[test]
    fn conf_duplicates_quotes_and_blanks() {
        let (_dir, path) = temp_file(
            "broker.conf",
            b"brokerName=a\nbrokerName=b\t \nbrokerClusterName=\"C\"\n  listenPort   20911   \n",
        );
        let origin = path.display().to_string();
        let loaded = load(Some(&path), &[]).unwrap();
        let c = &loaded.config;
        assert_eq!(c.broker.broker_name, "b", "the last one wins, trimmed");
        assert_eq!(
            c.broker.broker_cluster_name, "\"C\"",
            "quotes are data, as in Java"
        );
        assert_eq!(c.broker.listen_port, 20911);
        assert_eq!(
            loaded.warnings(),
            vec![
                format!(
                    "{origin}: brokerName: set on line 1 and again on line 2; the last one wins (as in RocketMQ)"
                ),
                format!(
                    "{origin}: brokerClusterName: value \"C\" on line 3 is in quotes; in a .properties \
                     file the quotes are part of the value (write brokerClusterName=C)"
                ),
            ]
        );
    }

    #[test]
    fn conf_in_latin1_reads_as_java_does() {
        let (_dir, path) = temp_file("broker.properties", b"brokerName=caf\xe9\n");
        let c = load(Some(&path), &[]).unwrap().config;
        assert_eq!(c.broker.broker_name, "caf\u{e9}");
        let (_dir, path) = temp_file("broker.conf", "\u{feff}brokerName=café\n".as_bytes());
        let loaded = load(Some(&path), &[]).unwrap();
        assert_eq!(loaded.config.broker.broker_name, "café");
        assert!(loaded.warnings().is_empty());
    }

    #[test]
    fn file_format_by_extension_then_content() {
        use ConfigFileFormat::*;
        for (name, want) in [
            ("broker.conf", Some(Properties)),
            ("BROKER.CONF", Some(Properties)),
            ("a/b.properties", Some(Properties)),
            ("broker.toml", Some(Toml)),
            ("broker.Toml", Some(Toml)),
            ("broker", None),
            ("broker.cfg", None),
        ] {
            assert_eq!(
                ConfigFileFormat::from_extension(Path::new(name)),
                want,
                "{name}"
            );
        }
        let other = Path::new("broker.cfg");
        assert_eq!(
            ConfigFileFormat::detect(Path::new("x.conf"), "a = \"b\""),
            Properties
        );
        assert_eq!(ConfigFileFormat::detect(Path::new("x.toml"), "a = b"), Toml);
        for (text, want) in [
            ("brokerName = broker-a\nlistenPort = 10911", Properties),
            ("brokerName: a", Properties),
            ("! comment\nlistenPort = 1", Properties),
            ("brokerName = \"broker-a\"\nlistenPort = 10911", Toml),
            ("listenPort = 10911\nautoCreateTopicEnable = true", Toml),
            ("[store]\nx = 1", Toml),
            ("brokerName = \"unterminated", Toml),
            ("", Toml),
        ] {
            assert_eq!(ConfigFileFormat::detect(other, text), want, "{text:?}");
        }

        // A file without a known extension loads in the detected format.
        let (_d1, props) = temp_file(
            "broker.cfg",
            b"brokerName = from-props\nlistenPort : 1234\n",
        );
        let (_d2, toml) = temp_file("broker", b"brokerName = \"from-toml\"\nlistenPort = 1234\n");
        let a = load(Some(&props), &[]).unwrap().config;
        let b = load(Some(&toml), &[]).unwrap().config;
        assert_eq!(
            (a.broker.broker_name.as_str(), a.broker.listen_port),
            ("from-props", 1234)
        );
        assert_eq!(
            (b.broker.broker_name.as_str(), b.broker.listen_port),
            ("from-toml", 1234)
        );
        // TOML syntax errors stay TOML errors.
        let (_d3, bad) = temp_file("broker", b"brokerName = \"x\nlistenPort = 1\n");
        assert!(matches!(
            load(Some(&bad), &[]),
            Err(ConfigError::Source { .. })
        ));
    }

    #[test]
    fn print_config_items_all_keys_and_reloads() {
        let loaded = load_with_overrides(
            Some(&manifest_path("config/broker.conf")),
            &[],
            &cli(&[
                ("namesrvAddr", "127.0.0.1:9876;10.0.0.1:9876"),
                ("storePathRootDir", "/data/my store"),
                ("brokerIP1", "10.0.0.5"),
            ]),
        )
        .unwrap();
        let cfg = &loaded.config;
        let out = print_config_items(cfg, false);

        let keys_in = |text: &str| -> Vec<String> {
            properties::parse(text)
                .unwrap()
                .into_iter()
                .map(|e| e.key)
                .collect()
        };
        let mut printed = keys_in(&out);
        let broker_first = printed.clone();
        printed.sort();
        let all: Vec<String> = known_keys().map(str::to_owned).collect();
        assert_eq!(printed, all, "-p prints every key exactly once");
        assert!(out.starts_with("# BrokerConfig\n"), "{out}");
        assert!(out.contains("\n\n# MessageStoreConfig\n"), "{out}");
        // Grouped, then sorted within each group.
        let split = broker_first
            .iter()
            .position(|k| registry().kind(k).0 == Part::Store)
            .unwrap();
        let (broker, store) = broker_first.split_at(split);
        assert!(broker.iter().all(|k| registry().kind(k).0 == Part::Broker));
        assert!(store.iter().all(|k| registry().kind(k).0 == Part::Store));
        assert!(broker.is_sorted() && store.is_sorted());

        for line in [
            "brokerName=broker-a",
            "namesrvAddr=127.0.0.1:9876;10.0.0.1:9876",
            "storePathRootDir=/data/my store",
            "fileReservedTime=48",
            "flushDiskType=ASYNC_FLUSH",
            "storePathCommitLog=",
            "messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        ] {
            assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
        }

        // The output is a broker.conf that loads back to the same settings.
        let again =
            load_layers(vec![Layer::from_properties_str("printed", &out).unwrap()]).unwrap();
        assert_eq!(&again.config, cfg);
        assert!(again.warnings().is_empty(), "{:?}", again.warnings());

        // -m: the important keys only.
        let important = print_config_items(cfg, true);
        let mut got = keys_in(&important);
        got.sort();
        let mut want: Vec<String> = IMPORTANT_KEYS.iter().map(|k| (*k).to_owned()).collect();
        want.sort();
        assert_eq!(got, want);
        for key in [
            "namesrvAddr",
            "brokerClusterName",
            "brokerName",
            "brokerId",
            "brokerRole",
            "flushDiskType",
            "listenPort",
            "storePathRootDir",
            "storePathCommitLog",
            "mappedFileSizeCommitLog",
            "deleteWhen",
            "fileReservedTime",
            "brokerIP1",
            "autoCreateTopicEnable",
        ] {
            assert!(got.iter().any(|k| k == key), "-m must print {key}");
        }
        for key in [
            "maxHashSlotNum",
            "haHousekeepingInterval",
            "compressedRegister",
        ] {
            assert!(!got.iter().any(|k| k == key), "-m must not print {key}");
        }
        assert!(important
            .lines()
            .all(|l| l.starts_with('#') || l.is_empty() || out.lines().any(|full| full == l)));
        assert!(important.len() < out.len());
    }

    #[test]
    fn important_keys_are_known_and_unique() {
        let set: BTreeSet<&str> = IMPORTANT_KEYS.iter().copied().collect();
        assert_eq!(set.len(), IMPORTANT_KEYS.len());
        for key in IMPORTANT_KEYS {
            assert!(known_keys().any(|k| k == *key), "{key} is not a key");
        }
    }

    #[test]
    fn printed_values_are_escaped() {
        let mut cfg = Config::default();
        cfg.broker.broker_name = " lead\\tab\tcafé\n".to_owned();
        let out = print_config_items(&cfg, true);
        assert!(out.is_ascii());
        assert!(
            out.contains("brokerName=\\ lead\\\\tab\\tcaf\\u00E9\\n\n"),
            "{out}"
        );
        let parsed = properties::parse(&out).unwrap();
        let name = parsed.iter().find(|e| e.key == "brokerName").unwrap();
        assert_eq!(name.value, cfg.broker.broker_name);
    }

    proptest! {
        #[test]
        fn delay_levels_roundtrip(levels in proptest::collection::vec((0u64..1_000_000, 0usize..4), 1..40)) {
            const UNITS: [(char, u64); 4] = [('s', 1000), ('m', 60_000), ('h', 3_600_000), ('d', 86_400_000)];
            let text = levels.iter().map(|(n, u)| format!("{n}{}", UNITS[*u].0)).collect::<Vec<_>>().join(" ");
            let want: Vec<u64> = levels.iter().map(|(n, u)| n * UNITS[*u].1).collect();
            prop_assert_eq!(parse_delay_levels(&text).unwrap(), want);
        }

        #[test]
        fn env_values_convert_like_file_values(n in 1u32..=4096) {
            let from_env = load(None, &env(&[("ACTORMQ_MAXMESSAGESIZE", &n.to_string())])).unwrap();
            let from_file = toml(&format!("maxMessageSize = {n}")).unwrap();
            prop_assert_eq!(from_env.config, from_file.config);
        }
    }
}
