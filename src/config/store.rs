//! [`StoreConfig`]: RocketMQ's `MessageStoreConfig` keys that ActorMQ uses, with RocketMQ's
//! defaults (`MessageStoreConfig.java`, 4.9.x; 5.x-only keys marked), the file-size limits,
//! and the paths derived from `storePathRootDir`.
//!
//! Owns no state beyond the values (and a memo of the parsed `messageDelayLevel`). Invariants:
//! every field's serde name is RocketMQ's exact key; Rust names put the unit last
//! (`sync_flush_timeout_ms`); checks live in `validate.rs`, not here.

use std::borrow::Cow;
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::delay::{parse_delay_levels, DelayLevelError, DEFAULT_MESSAGE_DELAY_LEVEL};
use super::values::{de_opt_path, de_opt_string, BrokerRole, FlushDiskType};

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
    /// Entries that are not hours are skipped
    /// ([`Config::validate`](super::Config::validate) rejects them).
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

pub(super) fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}
