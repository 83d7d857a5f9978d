//! The store's settings in its own units: [`StoreParams`], built from `StoreConfig` (the
//! broker's) or for tests. Plain data; read by the open (`recover`, `system`) and by the actors
//! it starts. No messages.

use std::path::{Path, PathBuf};
use std::time::Duration;

use actormq_core::config::{BrokerRole, StoreConfig};

use super::cleaner;

/// A slave configured for SYNC_FLUSH flushes this often (RocketMQ's GroupCommitService flushes
/// every 10 ms when no producer waits, and none does on a slave).
const SLAVE_SYNC_FLUSH_INTERVAL: Duration = Duration::from_millis(10);

/// Everything the store runtime needs, in its own units (built from [`StoreConfig`]).
#[derive(Clone, Debug)]
pub struct StoreParams {
    pub root: PathBuf,
    pub commit_log_dir: PathBuf,
    pub commit_log_file_size: u64,
    pub cq_file_size: u64,
    pub max_message_size: usize,
    pub warm_mapped_files: bool,
    pub check_crc_on_recover: bool,
    pub flush_interval: Duration,
    pub flush_least_pages: u64,
    pub flush_thorough_interval: Duration,
    /// `flushCommitLogTimed`: false ⇒ appends (or commits) wake the async flusher.
    pub flush_timed: bool,
    /// Write buffers in the TransientStorePool; 0 = off (`transientStorePoolEnable` false, or
    /// not effective: a slave).
    pub transient_store_pool_size: usize,
    /// `commitIntervalCommitLog`, `commitCommitLogLeastPages`, `commitCommitLogThoroughInterval`.
    pub commit_interval: Duration,
    pub commit_least_pages: u64,
    pub commit_thorough_interval: Duration,
    /// `fastFailIfNoBufferInStorePool`: refuse a roll without a free buffer instead of waiting.
    pub fast_fail_no_buffer: bool,
    pub cq_flush_interval: Duration,
    pub cq_flush_least_pages: u64,
    /// `flushConsumeQueueThoroughInterval`: a ConsumeQueue flush of every page at least this often.
    pub cq_flush_thorough_interval: Duration,
    pub message_index_enable: bool,
    pub max_hash_slot_num: u32,
    pub max_index_num: u32,
    pub delay_levels_ms: Vec<u64>,
    pub schedule_tick: Duration,
    pub flush_delay_offset_interval: Duration,
    /// SYNC_FLUSH: acknowledge only flushed messages, dispatch only flushed bytes.
    pub sync_flush: bool,
    pub sync_flush_timeout: Duration,
    /// `messageIndexSafe`; it counts only with `messageIndexEnable` ([`StoreParams::index_safe`]).
    pub message_index_safe: bool,
    /// `diskSpaceWarningLevelRatio`: refuse writes above this used percentage...
    pub disk_warning_pct: u32,
    /// ...until usage is back at or below this one (`diskSpaceCleanForciblyRatio`).
    pub disk_clear_pct: u32,
    /// Retention (`fileReservedTime`, `deleteWhen`, ...); `None`: no file is ever deleted.
    pub retention: Option<cleaner::RetentionParams>,
    /// `brokerRole`. A slave's CommitLog takes bytes only from its master
    /// ([`super::Store::append_replicated`]): producers are refused, there are no write rings or
    /// buffers, and it flushes in the background — in SYNC_FLUSH every 10 ms, as RocketMQ's
    /// GroupCommitService does for a slave, which has no waiting producers.
    pub broker_role: BrokerRole,
    /// `slaveTimeout`: SYNC_MASTER's longest wait for a slave's ack (FLUSH_SLAVE_TIMEOUT).
    pub slave_timeout: Duration,
    /// `haSlaveFallbehindMax`: SYNC_MASTER answers SLAVE_NOT_AVAILABLE at once when the slave
    /// is at least this far behind.
    pub ha_slave_fallbehind_max: u64,
}

impl StoreParams {
    /// Whether abnormal recovery starts no later than the checkpoint's index time, as RocketMQ's
    /// `recoverAbnormally` does only when both `messageIndexEnable` and `messageIndexSafe` are
    /// on: without an index that time is never written (0 on a new store), and every abnormal
    /// start would scan and re-dispatch the whole CommitLog.
    pub fn index_safe(&self) -> bool {
        self.message_index_safe && self.message_index_enable
    }

    /// Whether a message that waits (`wait_store_msg_ok`) is answered later than one that does
    /// not: after the flush (SYNC_FLUSH) or a slave's ack (SYNC_MASTER). Batchers keep the two
    /// apart.
    pub fn answers_later(&self) -> bool {
        self.sync_flush || self.broker_role == BrokerRole::SyncMaster
    }

    pub fn from_config(c: &StoreConfig) -> Result<StoreParams, String> {
        let sync_flush = c.flush_disk_type == actormq_core::config::FlushDiskType::SyncFlush;
        let slave = c.broker_role.is_slave();
        Ok(StoreParams {
            root: c.store_path_root_dir.clone(),
            commit_log_dir: c.commitlog_dir(),
            commit_log_file_size: c.mapped_file_size_commit_log,
            cq_file_size: c.mapped_file_size_consume_queue,
            max_message_size: c.max_message_size as usize,
            warm_mapped_files: c.warm_mapped_file_enable,
            check_crc_on_recover: c.check_crc_on_recover,
            flush_interval: if slave && sync_flush {
                SLAVE_SYNC_FLUSH_INTERVAL
            } else {
                Duration::from_millis(c.flush_interval_commit_log_ms)
            },
            flush_least_pages: if slave && sync_flush {
                0
            } else {
                c.flush_commit_log_least_pages as u64
            },
            flush_thorough_interval: Duration::from_millis(c.flush_commit_log_thorough_interval_ms),
            flush_timed: c.flush_commit_log_timed,
            transient_store_pool_size: if c.transient_store_pool_effective() {
                c.transient_store_pool_size as usize
            } else {
                0
            },
            commit_interval: Duration::from_millis(c.commit_interval_commit_log_ms),
            commit_least_pages: c.commit_commit_log_least_pages as u64,
            commit_thorough_interval: Duration::from_millis(
                c.commit_commit_log_thorough_interval_ms,
            ),
            fast_fail_no_buffer: c.fast_fail_if_no_buffer_in_store_pool,
            cq_flush_interval: Duration::from_millis(c.flush_interval_consume_queue_ms),
            cq_flush_least_pages: c.flush_consume_queue_least_pages as u64,
            cq_flush_thorough_interval: Duration::from_millis(
                c.flush_consume_queue_thorough_interval_ms,
            ),
            message_index_enable: c.message_index_enable,
            max_hash_slot_num: c.max_hash_slot_num,
            max_index_num: c.max_index_num,
            delay_levels_ms: c.delay_levels_ms().map_err(|e| e.to_string())?.into_owned(),
            schedule_tick: Duration::from_millis(100),
            flush_delay_offset_interval: Duration::from_millis(c.flush_delay_offset_interval_ms),
            sync_flush: sync_flush && !slave,
            sync_flush_timeout: Duration::from_millis(c.sync_flush_timeout_ms),
            message_index_safe: c.message_index_safe,
            disk_warning_pct: c.disk_space_warning_level_ratio,
            disk_clear_pct: c
                .disk_space_clean_forcibly_ratio
                .min(c.disk_space_warning_level_ratio),
            retention: Some(cleaner::RetentionParams::from_config(c)),
            broker_role: c.broker_role,
            slave_timeout: Duration::from_millis(c.slave_timeout_ms),
            ha_slave_fallbehind_max: c.ha_slave_fallbehind_max,
        })
    }

    /// Small files and fast ticks for tests and benchmarks rooted at `root`.
    pub fn for_tests(root: &Path) -> StoreParams {
        StoreParams {
            root: root.to_path_buf(),
            commit_log_dir: root.join("commitlog"),
            commit_log_file_size: 1 << 20,
            cq_file_size: 30_000 * 20,
            max_message_size: 512 * 1024,
            warm_mapped_files: false,
            check_crc_on_recover: true,
            flush_interval: Duration::from_millis(50),
            flush_least_pages: 4,
            flush_thorough_interval: Duration::from_millis(1000),
            flush_timed: true,
            transient_store_pool_size: 0,
            commit_interval: Duration::from_millis(200),
            commit_least_pages: 4,
            commit_thorough_interval: Duration::from_millis(200),
            fast_fail_no_buffer: false,
            cq_flush_interval: Duration::from_millis(200),
            cq_flush_least_pages: 2,
            cq_flush_thorough_interval: Duration::from_secs(1),
            message_index_enable: true,
            max_hash_slot_num: 1024,
            max_index_num: 4096,
            delay_levels_ms: actormq_core::config::parse_delay_levels(
                "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
            )
            .expect("default delay levels parse"),
            schedule_tick: Duration::from_millis(20),
            flush_delay_offset_interval: Duration::from_millis(1000),
            sync_flush: false,
            sync_flush_timeout: Duration::from_secs(5),
            message_index_safe: false,
            // Off: a test must not fail because the machine's disk is nearly full.
            disk_warning_pct: 100,
            disk_clear_pct: 100,
            // Off: a test that wants retention sets it (and runs it with `Store::clean_now`).
            retention: None,
            broker_role: BrokerRole::AsyncMaster,
            slave_timeout: Duration::from_secs(3),
            ha_slave_fallbehind_max: 256 << 20,
        }
    }
}
