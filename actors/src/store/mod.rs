//! The store runtime: opens and recovers the on-disk store, starts its actors in dependency order
//! and offers the broker one handle, [`Store`], to append and to read.
//!
//! Threads: the CommitLog writer, the allocator, the flusher, the committer (write buffers in
//! ASYNC_FLUSH), the ConsumeQueue builder, the index builder, the reput dispatcher and the
//! schedule service each run on their own arbiter, so a blocking call (file creation, pwrite,
//! msync) in one never stalls another (DESIGN §5).
//!
//! Write buffers (`transientStorePoolEnable`, effective on a non-slave with either flush type, as
//! in RocketMQ 5): the writer appends into pool buffers; in ASYNC_FLUSH the `Committer` copies them
//! into the files and wakes reput and the flusher; in SYNC_FLUSH the `GroupCommitter` commits
//! right before each fdatasync. Readers, dispatch and pulls see committed bytes only.
//!
//! Without write buffers (the default) the writer appends into write rings (a ring pool of the
//! `TransientStorePool`, a few MiB of memory behind each file-sized buffer) and commits them with
//! `pwrite` itself after every batch (in SYNC_FLUSH, for appends that wait for the flush, once
//! per burst of its mailbox), before it acknowledges or wakes anyone: readers see the
//! bytes as soon as with a write through the mapping, but the mapping is never written, so a
//! flush never stalls the process with write-protect faults and TLB shootdowns.
//!
//! Roles (`brokerRole`): a master's writer, committer or group committer wakes the HA connections
//! (`crate::ha`) when new bytes are readable, and SYNC_MASTER's `put*` wait for a slave's ack
//! (`slaveTimeout`). A slave's writer takes only its master's bytes (`append_replicated`): no
//! write rings or buffers, no file made ahead before the first transfer, no delayed delivery,
//! SYNC_FLUSH run as a 10 ms background flush.
//!
//! Start order: load and recover ConsumeQueues → recover the CommitLog (cut a torn tail), noting
//! every record a ConsumeQueue lacks → cut ConsumeQueue units beyond it → plan re-dispatch: from
//! the ConsumeQueues' max physical offset, lowered to the first record they lack and to the end of
//! any queue shorter than the persisted queue table says or with a hole (`queue_table`) → start
//! builders and reput, wait until dispatch has caught up (after an abnormal stop, checkpointing
//! the progress at each CommitLog file boundary and at the end: `RecoveryProgress`) → seed the
//! writer's queue-offset table from ConsumeQueue max offsets → start the flusher, the committer,
//! the writer and schedule service.
//! Stop order is the reverse: refuse appends, commit everything written (write buffers), wait for
//! dispatch, persist the builders, and end with a final flush of every file.

pub mod allocator;
pub mod cleaner;
pub mod coalesce;
pub mod committer;
pub mod cq_builder;
pub mod flusher;
pub mod index_builder;
pub mod reput;
pub mod schedule;
pub mod wake;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::config::{BrokerRole, StoreConfig};
use actormq_core::format::record::NewMessage;
use actormq_core::offset::PhyOffset;
use actormq_core::store::commit_log::{AppendOk, CommitLog, CommitLogConfig, WriteBuffers};
use actormq_core::store::consume_queue::ConsumeQueueStore;
use actormq_core::store::index_file::{IndexReader, IndexStore};
use actormq_core::store::mapped_file::{MappedFile, Warm};
use actormq_core::store::mapped_file_queue::MappedFileQueue;
use actormq_core::store::queue_table::{self, QueueMaxTable, RedispatchScan};
use actormq_core::store::reader::StoreReader;
use actormq_core::store::schedule::{rewrite_for_delay, DelayOffsets};
use actormq_core::store::status::{PutError, PutStatus};
use actormq_core::store::transient_pool::TransientStorePool;
use actormq_core::store::validate::check_send_topic;

use crate::metered::{start_on, start_with, ActorRef};
use actormq_core::store::checkpoint::{Checkpoint, CheckpointError, CHECKPOINT_FILE_SIZE};
use actormq_core::store::recovery::{
    abnormal_recovery_min_timestamp, abnormal_recovery_start_file,
};
use allocator::MappedFileAllocator;
use committer::{CommitNow, CommitWake, Committer, FinalCommit};
use cq_builder::{ConsumeQueueBuilder, FlushConsumeQueues};
use flusher::{CommitMode, FlushCore, FlushNow, FlushWake, Flusher, GroupCommitter};
use index_builder::{FlushIndex, IndexBuilder};
use reput::{ReputDispatcher, Wake};
use schedule::{GetDelayOffsets, PersistDelayOffsets, ScheduleDelivery};
use state::StoreState;
use wake::Waker;
use writer::{AppendBatch, AppendMessage, AppendProducerBatch, CommitLogWriter, GetWriterState};

/// Write rings when `transientStorePoolEnable` is off: one for the file being written, one for
/// the next (taken at the roll, before the old one is committed and given back), one spare.
const WRITE_RINGS: usize = 3;

/// Memory behind each write ring: 16 MiB, or room for two of the largest records when
/// `maxMessageSize` is raised (a record must never reach past the ring from the committed
/// position, and the writer commits at most once per record to ensure it).
fn write_ring_bytes(max_message_size: usize) -> usize {
    let largest = max_message_size + actormq_core::store::commit_log::RECORD_HEADROOM;
    (16 << 20).max(2 * largest)
}

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
    /// ([`Store::append_replicated`]): producers are refused, there are no write rings or
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

/// An append's status after its replication outcome: a replica status that is not PUT_OK
/// overrides the flush status, as RocketMQ merges them.
fn merged(status: PutStatus, replica: PutStatus) -> PutStatus {
    if replica == PutStatus::PutOk {
        status
    } else {
        replica
    }
}

/// A slave configured for SYNC_FLUSH flushes this often (RocketMQ's GroupCommitService flushes
/// every 10 ms when no producer waits, and none does on a slave).
const SLAVE_SYNC_FLUSH_INTERVAL: Duration = Duration::from_millis(10);

/// Longest time a roll waits for a write buffer to come back (without
/// `fastFailIfNoBufferInStorePool`) before writing that file through its mapping. The committer
/// frees a buffer as soon as the file holding it is fully committed, normally within one commit.
const POOL_WAIT: Duration = Duration::from_secs(3);

/// The actor that owns the flushed position: `Flusher` (ASYNC_FLUSH) or `GroupCommitter`
/// (SYNC_FLUSH).
enum FlushRef {
    Async(ActorRef<Flusher>),
    Sync(ActorRef<GroupCommitter>),
}

/// What opening the store found and did.
#[derive(Clone, Debug, Default)]
pub struct OpenReport {
    /// The abort file was there: the previous run did not stop cleanly.
    pub abnormal: bool,
    pub commit_log_end: u64,
    /// The CommitLog offset the scan started at (a file's first byte).
    pub scan_from: u64,
    pub files_scanned: u64,
    pub records_scanned: u64,
    /// CommitLog bytes handed to dispatch again (ConsumeQueue and index rebuilt from them).
    pub redispatch_bytes: u64,
    pub truncated_reason: Option<String>,
    pub consume_queues: usize,
    /// The whole open, and two of its phases: the CommitLog scan (CRC check and tail cut), and
    /// waiting for dispatch to catch up with the recovered end (after an abnormal stop this
    /// includes the progress checkpoints, the first of which syncs every recovered CommitLog and
    /// ConsumeQueue file).
    pub recovery_ms: u64,
    pub scan_ms: u64,
    pub dispatch_ms: u64,
}

/// How the store's previous run ended, as the `abort` file tells (`store_lock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreviousRun {
    /// No abort file: a clean stop; normal recovery.
    Clean,
    /// An abort file written on this kernel boot: the broker process died while the machine kept
    /// running, so every byte it wrote is in the page cache. Abnormal recovery, keeping the
    /// index files (RocketMQ would drop those newer than the checkpoint and lose the keys they
    /// held before the recovery start).
    ProcessDied,
    /// An abort file from another boot, or one that does not say: the machine may have gone
    /// down, and unsynced bytes may be lost or torn anywhere. RocketMQ's abnormal recovery.
    Crashed,
}

impl From<bool> for PreviousRun {
    /// `true`: the abort file was there, nothing known about the boot (`Crashed`).
    fn from(abnormal: bool) -> Self {
        if abnormal {
            PreviousRun::Crashed
        } else {
            PreviousRun::Clean
        }
    }
}

/// Recovery's progress checkpoints (ECOSYSTEM T6, apache/rocketmq#9587). While dispatch catches up
/// after an abnormal stop, the checkpoint is written each time dispatch passes a CommitLog file
/// boundary and once it reaches the recovered end — after the recovered CommitLog files are
/// `fdatasync`ed (once) and every ConsumeQueue is flushed — so that "physic" and "logics" only ever
/// name durable data. A start killed after one then picks its start file from there instead of
/// rescanning and re-dispatching everything the killed start already did. The index time is raised
/// only to what the index builder published: the end of full index files it flushed.
struct RecoveryProgress {
    /// The recovered files from the scan's start file on: what the first checkpoint syncs.
    files: Vec<Arc<MappedFile>>,
    /// Every CommitLog file, to report where the next abnormal start would begin.
    all_files: Vec<Arc<MappedFile>>,
    /// The next dispatch position to checkpoint at: a file boundary, or `end`; `u64::MAX` once
    /// the end was checkpointed.
    next: u64,
    end: u64,
    file_size: u64,
    /// Store time of the last recovered record: once synced, the CommitLog is durable up to it.
    physic_ts: i64,
    index_safe: bool,
    synced: bool,
}

/// The first CommitLog file boundary after `from`, or `end` if that comes first.
fn next_boundary(from: u64, file_size: u64, end: u64) -> u64 {
    ((from / file_size + 1) * file_size).min(end)
}

impl RecoveryProgress {
    /// The position to checkpoint now, if dispatch has reached one; each boundary once, in order,
    /// however far one dispatched batch went.
    fn due(&mut self, dispatched: u64) -> Option<u64> {
        if self.next == u64::MAX || dispatched < self.next {
            return None;
        }
        let at = self.next;
        self.next = if at >= self.end {
            u64::MAX
        } else {
            next_boundary(at, self.file_size, self.end)
        };
        Some(at)
    }

    /// An error syncing the CommitLog or flushing the ConsumeQueues is the open's error: Linux
    /// reports a write-back error once, so the store must not go on believing that data durable.
    /// A failed write of the checkpoint file itself only costs the progress; it is logged.
    async fn checkpoint(
        &mut self,
        at: u64,
        checkpoint: &mut Checkpoint,
        cq_builder: &ActorRef<ConsumeQueueBuilder>,
        state: &StoreState,
    ) -> std::io::Result<()> {
        let first = !self.synced;
        fail::fail_point!("recovery-progress-sync", |_| Err(std::io::Error::other(
            "recovery: syncing CommitLog files failed: injected by a fail point"
        )));
        if first {
            let files = self.files.clone();
            tokio::task::spawn_blocking(move || {
                files.iter().try_for_each(|f| {
                    f.sync_data().map_err(|e| {
                        std::io::Error::new(
                            e.kind(),
                            format!(
                                "recovery: syncing CommitLog file {} failed: {e}",
                                f.path().display()
                            ),
                        )
                    })
                })
            })
            .await
            .map_err(std::io::Error::other)??;
            self.synced = true;
        }
        // The first time, every ConsumeQueue file is synced too: units the crashed process left in
        // the page cache are skipped as duplicates by re-dispatch, yet count as dispatched.
        let logics = cq_builder
            .send(FlushConsumeQueues { sync_all: first })
            .await
            .map_err(std::io::Error::other)?
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("recovery: flushing the ConsumeQueues failed: {e}"),
                )
            })?;
        let before = checkpoint.data();
        checkpoint.set_physic_msg_timestamp(before.physic_msg_timestamp.max(self.physic_ts));
        checkpoint.set_logics_msg_timestamp(before.logics_msg_timestamp.max(logics));
        // Full index files flushed meanwhile (the index builder publishes only those).
        let index = state.index_ts.load(Ordering::Acquire);
        checkpoint.set_index_msg_timestamp(before.index_msg_timestamp.max(index));
        if let Err(e) = checkpoint.flush() {
            tracing::error!(error = %e, "recovery progress checkpoint not written; a start \
                interrupted from here on starts where this one did");
            return Ok(());
        }
        let min_ts = abnormal_recovery_min_timestamp(&checkpoint.data(), self.index_safe);
        let next_start_file = abnormal_recovery_start_file(&self.all_files, min_ts);
        tracing::info!(
            dispatched = at,
            end = self.end,
            physic_ts = checkpoint.physic_msg_timestamp(),
            logics_ts = checkpoint.logics_msg_timestamp(),
            next_start_file,
            "recovery progress checkpointed"
        );
        Ok(())
    }
}

/// The broker's handle on a running store.
pub struct Store {
    params: StoreParams,
    writer: ActorRef<CommitLogWriter>,
    flusher: FlushRef,
    /// ASYNC_FLUSH with write buffers.
    committer: Option<ActorRef<Committer>>,
    pool: Option<Arc<TransientStorePool>>,
    cq_builder: ActorRef<ConsumeQueueBuilder>,
    index_builder: Option<ActorRef<IndexBuilder>>,
    schedule: ActorRef<ScheduleDelivery>,
    /// Retention; `None` when `StoreParams::retention` is.
    cleaner: Option<ActorRef<cleaner::StoreCleaner>>,
    reader: StoreReader,
    index: Option<IndexReader>,
    state: Arc<StoreState>,
    /// Replication: what the master's slaves acknowledged (SYNC_MASTER waits on it) and the
    /// wake for its HA connections.
    ha: Arc<crate::ha::HaState>,
    /// Taken (emptied) by `shutdown`. A mutex only so that `Store` is `Sync` (connection threads
    /// share it); it is touched once, at shutdown.
    arbiters: std::sync::Mutex<Vec<Arbiter>>,
    pub report: OpenReport,
}

fn arbiter() -> Arbiter {
    Arbiter::new()
}

/// The arbiters [`Store::open_with`] has started so far. If the open fails part-way they are
/// stopped, so no actor of a store that never opened goes on writing its files (an in-process
/// retry would otherwise run a second set of writers over them). On success the `Store` takes
/// them.
struct Started(Vec<Arbiter>);

impl Started {
    fn push(&mut self, a: Arbiter) {
        self.0.push(a);
    }
    fn into_inner(mut self) -> Vec<Arbiter> {
        std::mem::take(&mut self.0)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        for a in &self.0 {
            a.stop();
        }
    }
}

/// Opens the checkpoint; one of the wrong size (RocketMQ maps a page and tolerates any size; a
/// foreign tool or a damaged file system leaves others) is moved to `checkpoint.corrupt` and
/// replaced by a zeroed one, with an ERROR — as if there had been none. A clean previous stop
/// then recovers normally (the checkpoint is not read; `Store::open_with` then seeds it with
/// what that stop had flushed), an unclean one from the first CommitLog file (its zero times),
/// with the index rebuilt; the abort file is already there, so a start killed during that
/// rebuild redoes it. Returns whether it was replaced.
fn open_checkpoint(path: &Path) -> std::io::Result<(Checkpoint, bool)> {
    match Checkpoint::open(path) {
        Ok(c) => Ok((c, false)),
        Err(CheckpointError::WrongSize { len, .. }) => {
            let aside = crate::fsutil::corrupt_path(path);
            std::fs::rename(path, &aside).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "{}: {len} bytes, not {CHECKPOINT_FILE_SIZE}; it cannot be moved to {}: \
                         {e}",
                        path.display(),
                        aside.display()
                    ),
                )
            })?;
            tracing::error!(
                file = %path.display(),
                len,
                moved_to = %aside.display(),
                "checkpoint is not {CHECKPOINT_FILE_SIZE} bytes; it says nothing reliable about \
                 what was flushed: replaced by an empty one (after a crash, recovery starts at \
                 the first CommitLog file and rebuilds the index)"
            );
            Ok((Checkpoint::open(path).map_err(std::io::Error::other)?, true))
        }
        Err(e) => Err(std::io::Error::other(e)),
    }
}

impl Store {
    /// Opens (recovering if needed) the store under `params.root` and starts its actors.
    pub async fn open(params: StoreParams, clock: SharedClock) -> std::io::Result<Store> {
        Store::open_with(params, clock, None, PreviousRun::Clean).await
    }

    /// Like [`Store::open`], telling `on_arrival` which queues got new messages after each
    /// dispatched batch (the broker's long polling).
    pub async fn open_with(
        params: StoreParams,
        clock: SharedClock,
        on_arrival: Option<cq_builder::ArrivalHook>,
        previous: impl Into<PreviousRun>,
    ) -> std::io::Result<Store> {
        let previous = previous.into();
        let abnormal = previous != PreviousRun::Clean;
        let started = std::time::Instant::now();
        std::fs::create_dir_all(&params.root)?;
        let mut cqs =
            ConsumeQueueStore::load(&params.root.join("consumequeue"), params.cq_file_size)?;
        let files = MappedFileQueue::load(&params.commit_log_dir, params.commit_log_file_size)?;
        let buffered = params.transient_store_pool_size > 0;
        // Without write buffers the writer appends into write rings and commits them itself
        // (see `WRITE_RINGS`); only if rings cannot be had does it write through the mappings.
        // A slave writes through its mappings: a record split across two transfers has its first
        // part written but not yet readable, which a ring or buffer could not commit.
        let rings = if buffered || params.broker_role.is_slave() {
            None
        } else {
            match TransientStorePool::new_rings(
                WRITE_RINGS,
                params.commit_log_file_size as usize,
                write_ring_bytes(params.max_message_size),
            ) {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::warn!(error = %e, "no CommitLog write rings; writing through the file mappings");
                    None
                }
            }
        };
        // With write buffers or rings the writer never touches a new file's mapping (commits
        // write it with pwrite): pre-faulting it would only dirty pages for the first fdatasync
        // to write back.
        let warm = if params.warm_mapped_files && !buffered && rings.is_none() {
            Warm::Populate
        } else {
            Warm::No
        };
        let cl_cfg = CommitLogConfig {
            file_size: params.commit_log_file_size,
            max_message_size: params.max_message_size,
            // The writer's own fallback creation never warms: that would stall appends for the
            // whole warm-up. Warming is the allocator's job.
            warm: Warm::No,
        };
        let state = Arc::new(StoreState::default());
        let (mut checkpoint, checkpoint_replaced) =
            open_checkpoint(&params.root.join("checkpoint"))?;
        let mut log = CommitLog::new(cl_cfg, files);
        // Normal recovery starts at the third-last file; abnormal recovery (the abort file was
        // left behind) at the newest file whose first record is older than what the checkpoint
        // says was flushed and dispatched, and dispatches everything from there again.
        let start_file = abnormal.then(|| {
            let min_ts = abnormal_recovery_min_timestamp(&checkpoint.data(), params.index_safe());
            abnormal_recovery_start_file(&log.files().files(), min_ts)
        });
        let start_offset =
            start_file.and_then(|i| log.files().files().get(i).map(|f| f.file_from_offset()));
        // After a crash, units of records from the recovery start on may be lost in any file of a
        // queue, not only in the last three RocketMQ scans (`ConsumeQueue::recover_with`).
        cqs.recover_with(start_offset)?;
        // Where dispatch must start again: the first record a ConsumeQueue lacks (a crash before
        // dispatch), and the end of any queue that lost units whose records lie before the scan
        // (a lost ConsumeQueue file or directory), found against the persisted queue table
        // without reading the rest of the CommitLog (see `queue_table`).
        let table_path = params.root.join("config").join(queue_table::FILE_NAME);
        let mut persisted = QueueMaxTable::load(&table_path).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "queue table unreadable; lost ConsumeQueue files that lie \
                before the recovery scan are not detected at this start");
            QueueMaxTable::default()
        });
        // Queues cut at a gap at load: the table claims at least the units their later files
        // show, so they are found short and rebuilt (RocketMQ's store, or one whose table is
        // gone, included). Durable before those files go, so a start that dies in between
        // claims the same again; only then are the files deleted.
        let cuts = cqs.take_cuts();
        if !cuts.is_empty() {
            let mut floor = QueueMaxTable::default();
            for c in &cuts {
                // A deleted topic's leftover (a crash during its deletion) is not brought back.
                if !c.last_phy.is_some_and(|p| persisted.is_dead(&c.topic, p)) {
                    floor.insert(&c.topic, c.queue_id, c.floor);
                }
            }
            persisted = persisted.raised_to(&floor);
            crate::fsutil::write_atomically(&table_path, &persisted.encode()).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "{}: recording the ConsumeQueues cut at a gap failed: {e}",
                        table_path.display()
                    ),
                )
            })?;
            for c in cuts {
                c.remove_files()?;
            }
        }
        let mut scan = RedispatchScan::new(&cqs, &persisted);
        let scan_started = std::time::Instant::now();
        let mut scan_last_ts = 0i64;
        // A machine crash may lose any page; a process death may leave the last commit's
        // `pwrite` short at a page boundary (SIGKILL stops a buffered write between pages).
        log.expect_torn_pages(previous != PreviousRun::Clean);
        let rec = log.recover(params.check_crc_on_recover, start_file, |phy, r| {
            scan_last_ts = r.store_timestamp;
            scan.observe(phy, r)
        })?;
        let scan_ms = scan_started.elapsed().as_millis() as u64;
        if let Some(reason) = &rec.truncated_reason {
            tracing::warn!(end = rec.end.0, %reason, "CommitLog recovery cut a corrupt tail");
        }
        // Units pointing beyond the recovered end refer to data that no longer exists.
        cqs.truncate_to_phy(rec.end.0)?;
        let min_cl = log.view().min_offset();
        // Retention may have deleted CommitLog files after the last ConsumeQueue cleanup (or
        // the broker stopped in between): units pointing below the CommitLog's first byte are
        // not offered to consumers (RocketMQ's `correctMinOffset`).
        cqs.correct_min_offsets(min_cl);
        let plan = scan.plan(&cqs, min_cl);
        for r in &plan.rebuilds {
            tracing::warn!(
                topic = %r.topic,
                queue = r.queue_id,
                damage = ?r.damage,
                from = r.from,
                "ConsumeQueue lost units; rebuilding it from the CommitLog"
            );
        }
        let mut index_lag_from = None;
        let index_store = if params.message_index_enable {
            Some(
                IndexStore::open(
                    &params.root.join("index"),
                    params.max_hash_slot_num,
                    params.max_index_num,
                )
                .map_err(|e| std::io::Error::other(e.to_string()))?,
            )
        } else {
            None
        };
        let mut index_store = index_store;
        if let (true, Some(idx)) = (abnormal, index_store.as_mut()) {
            // After a process death on this boot the index files are in the page cache as the
            // process left them: each entry counted by the header before a slot points to it
            // (`IndexFile::put_key`), so a kill mid-put loses no chain. If they end before the
            // recovered CommitLog end (nothing indexed was cut), they are kept and re-dispatch
            // adds what they lack. Otherwise the machine may have gone down, and files newer than
            // the checkpoint may be torn (RocketMQ): removed, and rebuilt from where re-dispatch
            // starts.
            let whole = previous == PreviousRun::ProcessDied
                && u64::try_from(idx.last_end_phy_offset()).is_ok_and(|e| e < rec.end.0)
                && idx.tail_matches(&log.view(), rec.end.0);
            if previous == PreviousRun::ProcessDied && !whole {
                tracing::warn!(
                    "index files do not match the recovered CommitLog (a record they name was cut, \
                     or they are not the dead process's own): handled as after a machine crash"
                );
            }
            if whole {
                // The dead process may not have flushed them (a full file is flushed after its
                // roll): the next index flush syncs them before any index time names them.
                idx.mark_all_unflushed();
                // Dispatch hands each range to both builders and waits for both: the index lags
                // the ConsumeQueues by one range at most. Re-dispatch covers that range (from its
                // file's start, a record boundary) whatever the checkpoint says. (A range longer
                // than `MAX_BATCH_BYTES` is one record, inside one file: the file of `lagged`.)
                let cq_end = cqs.max_physic_offset();
                let lagged = cq_end.saturating_sub(reput::MAX_BATCH_BYTES);
                index_lag_from = Some(lagged - lagged % params.commit_log_file_size);
                tracing::info!(
                    files = idx.files().len(),
                    "the previous broker process died on this boot: index files kept"
                );
            } else {
                let removed = idx.destroy_newer_than(checkpoint.index_msg_timestamp());
                if removed > 0 {
                    tracing::info!(
                        removed,
                        "index files newer than the checkpoint removed; they are rebuilt by \
                         dispatch"
                    );
                }
            }
        }
        // Whatever the previous run was, index files must not name a record the recovered
        // CommitLog no longer has: after a machine crash (the index checkpointed ahead of the
        // CommitLog's flush) or a cut on normal recovery, a kept file ending past the end would
        // name other messages' offsets, and its end — the index's replay bound — would make it
        // skip every record written over the cut. They go, and re-dispatch rebuilds from the
        // first record they held.
        //
        // A damaged index file (size or header) is handled alike: it and the files after it were
        // left out at open and go now, and re-dispatch indexes again from the start of the
        // CommitLog file holding the last record the kept files name (a record boundary at or
        // below it, past everything they hold) — or from where an interrupted rebuild began,
        // if its marker is still there. The marker, written before any file goes and removed
        // once dispatch has caught up and the index is flushed, makes the next start redo an
        // interrupted rebuild even after a clean stop, which reads no checkpoint.
        let mut index_cut_from = None;
        if let Some(idx) = index_store.as_mut() {
            let end = i64::try_from(rec.end.0).unwrap_or(i64::MAX);
            let damaged = idx.damage().map(|d| {
                tracing::error!(
                    reason = %d.reason,
                    delete = ?d.delete,
                    corrupt = ?d.corrupt,
                    "index files left out (a damaged file and the files after it, or what an \
                     unfinished rebuild names): they are removed, a damaged one kept in \
                     index.corrupt/, and the index rebuilt from the CommitLog"
                );
                let kept = u64::try_from(idx.last_end_phy_offset()).unwrap_or(0);
                let from = i64::try_from(kept - kept % params.commit_log_file_size).unwrap_or(0);
                let from = d.resume_from.map_or(from, |r| r.min(from));
                (from, idx.last_end_timestamp())
            });
            let cut = match (idx.past(end), damaged) {
                (Some((b1, t1)), Some((b2, t2))) => Some((b1.min(b2), t1.min(t2))),
                (past, damaged) => past.or(damaged),
            };
            if let Some((begin, kept_end_ts)) = cut {
                let first = log
                    .files()
                    .files()
                    .first()
                    .map_or(0, |f| f.file_from_offset());
                let from = u64::try_from(begin).unwrap_or(0).max(first);
                // Durable before the files go: the checkpoint must send any later abnormal start
                // (a kill or a power loss during the rebuild) back to `from`, and not vouch for
                // index files that are gone. Recovery progress raises both again as re-dispatch
                // passes file boundaries (both builders done up to there). A record unreadable
                // at `from` leaves 0: the next abnormal start scans from the first file.
                let mut ts_at_from = 0;
                let _ = actormq_core::store::commit_log::walk(
                    &log.view(),
                    PhyOffset(from),
                    rec.end,
                    |_, r| {
                        ts_at_from = r.store_timestamp;
                        false
                    },
                );
                if from < rec.end.0 {
                    // (From the end itself there is nothing to go back for.)
                    checkpoint.set_physic_msg_timestamp(
                        checkpoint.physic_msg_timestamp().min(ts_at_from),
                    );
                }
                checkpoint
                    .set_index_msg_timestamp(checkpoint.index_msg_timestamp().min(kept_end_ts));
                checkpoint.flush().map_err(|e| {
                    std::io::Error::other(format!(
                        "cannot lower the checkpoint before rebuilding the index: {e}"
                    ))
                })?;
                idx.begin_rebuild(i64::try_from(from).unwrap_or(i64::MAX), end)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                // Tests stop a start here, as a kill during the rebuild would.
                fail::fail_point!("recovery-index-cut", |_| Err(std::io::Error::other(
                    "recovery: stopped after removing index files: injected by a fail point"
                )));
                tracing::warn!(
                    end = rec.end.0,
                    from,
                    "index files named records past the recovered CommitLog end or were damaged: \
                     removed, and rebuilt by re-dispatch"
                );
                index_cut_from = Some(from);
            }
        }
        let mut reput_from = cqs.max_physic_offset();
        for o in [plan.from, start_offset, index_lag_from, index_cut_from]
            .into_iter()
            .flatten()
        {
            reput_from = reput_from.min(o);
        }
        let reput_from = reput_from.max(min_cl).min(rec.end.0);
        if reput_from < rec.end.0 {
            tracing::info!(
                from = reput_from,
                to = rec.end.0,
                abnormal,
                "dispatching CommitLog records the ConsumeQueues and index lack"
            );
        }
        state.dispatched.store(reput_from, Ordering::Release);
        state.flushed.store(rec.end.0, Ordering::Release);
        state.committed.store(rec.end.0, Ordering::Release);
        let consume_queues = cqs.max_offsets().len();
        let index_reader = index_store.as_ref().map(|i| i.reader());
        // The newest full index file's end time, of the files kept (full files are flushed when
        // they fill and at a clean stop): what a checkpoint replaced after a clean stop gets.
        let full_index_end = index_store
            .as_ref()
            .and_then(|i| i.full_files_end_timestamp());
        let view = log.view();
        let reader = StoreReader::new(view.clone(), cqs.table());

        // After an abnormal stop, re-dispatch checks every unit it finds already written against
        // its record and writes it again if it differs. The recovery scan keeps units that
        // *look* valid, but unsynced pages can come back torn at sector granularity (a power
        // loss) and a unit can be half-copied (a process killed in the middle of the copy):
        // offset and size whole, tagsCode — or, on the schedule topic, the delivery time —
        // wrong. Skipped as a replay (RocketMQ skips it), it would stay wrong for good. Ended by
        // `RecoveryDone`; no reader exists until then.
        cqs.set_repairing(abnormal);
        let mut arbiters = Started(Vec::new());
        let cq_arb = arbiter();
        let cq_builder = start_on(
            Some(&cq_arb.handle()),
            ConsumeQueueBuilder::new(
                cqs,
                view.clone(),
                params.delay_levels_ms.clone(),
                params.cq_flush_interval,
                params.cq_flush_least_pages,
            )
            .with_arrival_hook(on_arrival)
            .with_state(state.clone())
            .with_thorough_interval(params.cq_flush_thorough_interval)
            .with_queue_table(table_path, persisted.clone())
            // Until re-dispatch is done, a table written must not forget that a queue being
            // rebuilt is short (a start killed mid-rebuild would not rebuild it again).
            .with_table_floor(persisted.clone()),
        );
        arbiters.push(cq_arb);
        let index_builder = match index_store {
            Some(idx) => {
                let a = arbiter();
                let r = start_on(
                    Some(&a.handle()),
                    IndexBuilder::new(idx, view.clone(), clock.clone()).with_state(state.clone()),
                );
                arbiters.push(a);
                Some(r)
            }
            None => None,
        };
        let index_builder_ref = index_builder.clone();
        let woken = Arc::new(AtomicBool::new(false));
        let reput_arb = arbiter();
        let reput = start_on(
            Some(&reput_arb.handle()),
            ReputDispatcher::new(
                view.clone(),
                state.clone(),
                params.sync_flush,
                woken.clone(),
                cq_builder.clone(),
                index_builder.clone(),
            ),
        );
        arbiters.push(reput_arb);
        // Dispatch catches up with the recovered CommitLog before anyone can append or read. After
        // an abnormal stop, every CommitLog file boundary dispatch passes, and its end, is
        // checkpointed: a start killed during this wait resumes from there (ECOSYSTEM T6).
        let dispatch_started = std::time::Instant::now();
        let mut progress = (abnormal && reput_from < rec.end.0).then(|| {
            let files = log.files().files();
            RecoveryProgress {
                files: files[start_file.unwrap_or(0).min(files.len())..].to_vec(),
                all_files: files.to_vec(),
                next: next_boundary(reput_from, params.commit_log_file_size, rec.end.0),
                end: rec.end.0,
                file_size: params.commit_log_file_size,
                physic_ts: scan_last_ts,
                index_safe: params.index_safe(),
                synced: false,
            }
        });
        let mut waited = 0u32;
        loop {
            let dispatched = state.dispatched.load(Ordering::Acquire);
            if let Some(p) = progress.as_mut() {
                if let Some(at) = p.due(dispatched) {
                    p.checkpoint(at, &mut checkpoint, &cq_builder, &state)
                        .await?;
                    fail::fail_point!("recovery-progress-checkpoint");
                    continue;
                }
            }
            if dispatched >= rec.end.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            waited += 1;
            if waited % 10_000 == 0 {
                let dispatched = state.dispatched.load(Ordering::Acquire);
                // A dispatch that keeps failing (a full ConsumeQueue disk, an unreadable record)
                // holds the start here, as RocketMQ's does: the line says why.
                match state.dispatch_failing.load_full() {
                    Some(why) => tracing::warn!(
                        dispatched,
                        end = rec.end.0,
                        "waiting for dispatch to catch up; it is failing: {why}"
                    ),
                    None => tracing::info!(
                        dispatched,
                        end = rec.end.0,
                        "waiting for dispatch to catch up"
                    ),
                }
            }
        }
        if let (Some(_), Some(ib)) = (index_cut_from, &index_builder_ref) {
            // Every record is indexed again (the index builder acknowledged each range); once
            // that is on disk the marker can go (a power loss before then redoes the rebuild).
            ib.send(FlushIndex)
                .await
                .map_err(std::io::Error::other)?
                .map_err(|e| {
                    std::io::Error::new(e.kind(), format!("flushing the rebuilt index: {e}"))
                })?;
            actormq_core::store::index_file::finish_rebuild(&params.root.join("index"))?;
        }
        let dispatch_ms = dispatch_started.elapsed().as_millis() as u64;
        cq_builder
            .send(cq_builder::RecoveryDone)
            .await
            .map_err(std::io::Error::other)?;
        // A checkpoint replaced after a clean stop would stay at zero until traffic and index
        // rolls raise it, and a crash meanwhile would recover from the first file and drop every
        // index file. The clean stop had flushed everything the normal recovery scan saw, and
        // the full index files: seeded with those, as that stop's own checkpoint would have been.
        if checkpoint_replaced && !abnormal && scan_last_ts > 0 {
            checkpoint.set_physic_msg_timestamp(scan_last_ts);
            checkpoint.set_logics_msg_timestamp(scan_last_ts);
            checkpoint.set_index_msg_timestamp(full_index_end.unwrap_or(0));
            checkpoint.flush().map_err(|e| {
                std::io::Error::other(format!("writing the replaced checkpoint: {e}"))
            })?;
        }

        // A rebuilt queue still short of its table entry lost records from the CommitLog too
        // (a power loss under ASYNC_FLUSH, retention): nothing more can be brought back.
        for r in &plan.rebuilds {
            let now = reader
                .consume_queues()
                .get(&r.topic, r.queue_id)
                .map_or(0, |q| q.max_offset().0);
            if let Some(table) = persisted.get(&r.topic, r.queue_id).filter(|t| now < *t) {
                tracing::error!(
                    topic = %r.topic,
                    queue = r.queue_id,
                    rebuilt_to = now,
                    table,
                    "ConsumeQueue rebuilt short: the CommitLog no longer holds its last records"
                );
            }
        }
        // The writer's queue offsets continue where the ConsumeQueues (now complete) end.
        for topic in reader.consume_queues().topics() {
            for q in reader.consume_queues().queues_of(&topic) {
                log.set_queue_offset(&topic, q.queue_id, q.max_offset());
            }
        }

        let pool = if buffered {
            let pool = TransientStorePool::new(
                params.transient_store_pool_size,
                params.commit_log_file_size as usize,
            )?;
            tracing::info!(
                buffers = params.transient_store_pool_size,
                buffer_bytes = params.commit_log_file_size,
                sync_flush = params.sync_flush,
                "write buffers on (transientStorePoolEnable): appends are committed with pwrite"
            );
            Some(pool)
        } else {
            None
        };
        let alloc_arb = arbiter();
        // SYNC_FLUSH answers each send after an fdatasync: zero-written files make that a data-only
        // write. Only with rings, whose commits pad new pages (see `mapped_file`); a write
        // through a mapping or an unpadded commit would read each zero-written page first.
        let zero_files = params.sync_flush && rings.is_some();
        let mut alloc = MappedFileAllocator::new(
            params.commit_log_dir.clone(),
            params.commit_log_file_size,
            warm,
        )
        .zeroed(zero_files);
        if let (Some(pool), true) = (&pool, params.warm_mapped_files) {
            // What the writer touches with write buffers is the buffers, not the mappings.
            alloc = alloc.warming_pool(pool.clone());
        }
        let allocator = start_on(Some(&alloc_arb.handle()), alloc);
        arbiters.push(alloc_arb);
        // Not on a slave: its first file is wherever its master's stream starts (the master's
        // last file), which is not known before it connects.
        if log.files().is_empty() && params.broker_role.is_master() {
            // A fresh store: have the first file ready (allocated and warmed) before the first
            // append, instead of the writer creating it while producers wait.
            if let Ok(files) = allocator.send(allocator::AllocateNext { from: 0 }).await {
                for f in files {
                    if warm == Warm::Populate {
                        // Like RocketMQ's warm allocation: the broker is ready once its first file
                        // is; later files are warmed a whole file ahead of the writer.
                        let f = f.clone();
                        tokio::task::spawn_blocking(move || f.prefault(0, f.file_size()))
                            .await
                            .ok();
                    }
                    log.offer_prepared(f);
                }
            }
        }
        let disk = flusher::DiskWatch::new(
            params.commit_log_dir.clone(),
            params.root.join("consumequeue"),
            params.disk_warning_pct,
            params.disk_clear_pct,
        );
        let commit_mode = match (buffered, params.sync_flush) {
            (false, _) => CommitMode::Unbuffered,
            (true, true) => CommitMode::CommitFirst,
            (true, false) => CommitMode::ByCommitter,
        };
        let ha = crate::ha::HaState::new();
        let mut flush_core = FlushCore::new(view.clone(), state.clone(), checkpoint, disk)
            .with_commit_mode(commit_mode);
        if commit_mode == CommitMode::CommitFirst && params.broker_role.is_master() {
            // The group committer commits right before each flush: new bytes for the slaves.
            flush_core = flush_core.waking_after_commit(ha.data_waker());
        }
        let flush_woken = Arc::new(AtomicBool::new(false));
        let flush_arb = arbiter();
        let (flusher, sync) = if params.sync_flush {
            let mut gc = GroupCommitter::new(flush_core, Some(reput.clone()));
            if zero_files {
                gc = gc.zeroing_ahead(allocator.clone());
            }
            let gc = start_on(Some(&flush_arb.handle()), gc);
            (
                FlushRef::Sync(gc.clone()),
                Some((gc, params.sync_flush_timeout)),
            )
        } else {
            let mut f = Flusher::new(
                flush_core,
                params.flush_interval,
                params.flush_least_pages,
                params.flush_thorough_interval,
            );
            if !params.flush_timed {
                f = f.woken_by_appends(flush_woken.clone());
            }
            (
                FlushRef::Async(start_on(Some(&flush_arb.handle()), f)),
                None,
            )
        };
        arbiters.push(flush_arb);
        // Coalesced wakes (see `Waker`); each flag is shared by the target and its senders.
        let reput_waker = || Waker::new(reput.clone(), woken.clone(), || Wake);
        let flush_waker = match (&flusher, params.flush_timed) {
            (FlushRef::Async(f), false) => Some(Waker::new(f.clone(), flush_woken, || FlushWake)),
            _ => None,
        };
        let mut after_append = Vec::new();
        let mut committer = None;
        if let Some(pool) = &pool {
            let mut on_wait: Option<Box<dyn Fn() + Send>> = None;
            if commit_mode == CommitMode::ByCommitter {
                let commit_woken = Arc::new(AtomicBool::new(false));
                let after_commit: Vec<Waker> = std::iter::once(reput_waker())
                    .chain(flush_waker)
                    .chain(std::iter::once(ha.data_waker()))
                    .collect();
                let arb = arbiter();
                let c = start_on(
                    Some(&arb.handle()),
                    Committer::new(
                        view.clone(),
                        state.clone(),
                        params.commit_interval,
                        params.commit_least_pages,
                        params.commit_thorough_interval,
                        commit_woken.clone(),
                        after_commit,
                    ),
                );
                arbiters.push(arb);
                // Appended bytes become readable only when committed: the writer wakes the
                // committer, which wakes reput and the flusher.
                after_append.push(Waker::new(c.clone(), commit_woken.clone(), || CommitWake));
                let w = Waker::new(c.clone(), commit_woken, || CommitWake);
                on_wait = Some(Box::new(move || w.wake()));
                committer = Some(c);
            }
            // SYNC_FLUSH: the group committer commits on every flush (10 ms at the latest) and
            // wakes reput after it; dispatch may only reach flushed bytes, so a wake from the
            // writer would find nothing new.
            log = log.with_write_buffers(WriteBuffers {
                pool: pool.clone(),
                fast_fail: params.fast_fail_no_buffer,
                wait: POOL_WAIT,
                on_wait,
            });
        } else {
            if let Some(rings) = &rings {
                log = log.with_write_buffers(WriteBuffers {
                    pool: rings.clone(),
                    fast_fail: false,
                    // No committer to wait for: without a free ring (only when one batch rolls
                    // through several files) that file is written through its mapping.
                    wait: Duration::ZERO,
                    on_wait: None,
                });
            }
            if !params.sync_flush {
                after_append.push(reput_waker());
            }
            after_append.extend(flush_waker);
            // New bytes for the slaves (with write rings, woken after the inline commit).
            if params.broker_role.is_master() {
                after_append.push(ha.data_waker());
            }
        }
        let commit_inline = rings.is_some();
        let cl_retention = log.files().retention();
        let writer_arb = arbiter();
        let writer = start_on(
            Some(&writer_arb.handle()),
            CommitLogWriter::new(
                log,
                clock.clone(),
                Some(allocator),
                after_append,
                state.clone(),
                sync,
            )
            .committing_inline(commit_inline)
            .as_slave(params.broker_role.is_slave()),
        );
        arbiters.push(writer_arb);
        let sched_arb = arbiter();
        let sched = ScheduleDelivery::new(
            reader.clone(),
            writer.clone(),
            clock.clone(),
            state.clone(),
            &params,
        )?;
        let schedule = start_with(&sched_arb.handle(), move |_| sched);
        arbiters.push(sched_arb);
        let cleaner = match &params.retention {
            Some(r) => {
                let arb = arbiter();
                let c = start_on(
                    Some(&arb.handle()),
                    cleaner::StoreCleaner::new(
                        r.clone(),
                        cl_retention,
                        params.commit_log_dir.clone(),
                        params.root.join("consumequeue"),
                        state.clone(),
                        clock.clone(),
                        cq_builder.clone(),
                        index_builder_ref.clone(),
                    ),
                );
                arbiters.push(arb);
                Some(c)
            }
            None => None,
        };

        let report = OpenReport {
            abnormal,
            commit_log_end: rec.end.0,
            scan_from: rec.scan_from,
            files_scanned: rec.files_scanned,
            records_scanned: rec.records,
            redispatch_bytes: rec.end.0 - reput_from,
            truncated_reason: rec.truncated_reason,
            consume_queues,
            recovery_ms: started.elapsed().as_millis() as u64,
            scan_ms,
            dispatch_ms,
        };
        Ok(Store {
            params,
            writer,
            flusher,
            committer,
            pool,
            cq_builder,
            index_builder: index_builder_ref,
            schedule,
            cleaner,
            reader,
            index: index_reader,
            state,
            ha,
            arbiters: std::sync::Mutex::new(arbiters.into_inner()),
            report,
        })
    }

    pub fn params(&self) -> &StoreParams {
        &self.params
    }
    /// One retention round now; an error when retention is off.
    pub async fn clean_now(&self) -> std::io::Result<cleaner::CleanReport> {
        let c = self
            .cleaner
            .as_ref()
            .ok_or_else(|| std::io::Error::other("retention is off"))?;
        c.send(cleaner::CleanNow)
            .await
            .map_err(std::io::Error::other)?
    }
    /// mqadmin `deleteExpiredCommitLog`: the next 20 retention rounds delete expired files at
    /// any hour. False when retention is off.
    pub fn trigger_delete_files(&self) -> bool {
        let Some(c) = &self.cleaner else {
            return false;
        };
        c.notify(cleaner::TriggerDeleteFiles);
        true
    }
    /// mqadmin `cleanExpiredCQ` (CLEAN_EXPIRED_CONSUMEQUEUE): one full ConsumeQueue retention
    /// pass now, against the CommitLog's first byte — every queue's files whose units all point
    /// below it go and its min offset moves up. Unlike RocketMQ's `cleanExpiredConsumerQueue`, a
    /// queue's last file and its offsets stay: a queue never restarts at offset 0 under its
    /// consumers. Returns how many files went. Works with retention off too.
    pub async fn clean_expired_consume_queues(&self) -> std::io::Result<usize> {
        let min_phy = self.reader.commit_log().min_offset();
        let done = self
            .cq_builder
            .send(cleaner::DeleteQueuesBelow {
                min_phy,
                stepwise: false,
            })
            .await
            .map_err(std::io::Error::other)??;
        Ok(done.files)
    }
    pub fn reader(&self) -> &StoreReader {
        &self.reader
    }
    pub fn index(&self) -> Option<&IndexReader> {
        self.index.as_ref()
    }
    pub fn writer(&self) -> &ActorRef<CommitLogWriter> {
        &self.writer
    }
    /// How far the ConsumeQueues and index have caught up with the CommitLog.
    pub fn dispatched_offset(&self) -> PhyOffset {
        PhyOffset(self.state.dispatched.load(Ordering::Acquire))
    }
    pub fn flushed_offset(&self) -> PhyOffset {
        PhyOffset(self.state.flushed())
    }
    /// Positions and health flags (read-only, disk full) of the running store.
    pub fn state(&self) -> &Arc<StoreState> {
        &self.state
    }
    /// One past the last readable CommitLog byte (committed, with write buffers).
    pub fn max_offset(&self) -> PhyOffset {
        PhyOffset(self.reader.commit_log().max_offset())
    }
    /// One past the last written CommitLog byte (including bytes still in a write buffer).
    pub fn max_wrote_offset(&self) -> PhyOffset {
        PhyOffset(self.reader.commit_log().max_wrote_offset())
    }
    /// The TransientStorePool, when write buffers are on.
    pub fn write_buffer_pool(&self) -> Option<&Arc<TransientStorePool>> {
        self.pool.as_ref()
    }
    /// ASYNC_FLUSH with write buffers: commit everything written now (tests, clean stop).
    pub async fn commit_now(&self) -> std::io::Result<u64> {
        match &self.committer {
            Some(c) => c.send(CommitNow).await.map_err(std::io::Error::other)?,
            None => Ok(self.max_wrote_offset().0),
        }
    }

    /// The producer path: SEND-level topic checks, the delay rewrite, then the writer.
    pub async fn put(&self, mut msg: NewMessage) -> Result<AppendOk, PutError> {
        check_send_topic(&msg.topic)?;
        rewrite_for_delay(&mut msg, self.params.delay_levels_ms.len());
        let waits = self.params.broker_role == BrokerRole::SyncMaster && writer::waits(&msg);
        let mut ok = self
            .writer
            .send(AppendMessage(msg))
            .await
            .map_err(unavailable)??;
        if waits {
            let replica = self.replicated(ok.end_offset().0).await;
            ok.status = merged(ok.status, replica);
        }
        Ok(ok)
    }

    /// SYNC_MASTER: whether a slave holds the bytes up to `end` (see
    /// [`crate::ha::HaState::wait_replicated`]); [`merged`] into the appends' status.
    async fn replicated(&self, end: u64) -> PutStatus {
        self.ha
            .wait_replicated(
                end,
                self.params.slave_timeout,
                self.params.ha_slave_fallbehind_max,
            )
            .await
    }

    /// Replication state (what the slaves acknowledged), for the HA service and metrics.
    pub fn ha(&self) -> &Arc<crate::ha::HaState> {
        &self.ha
    }

    /// A slave: writes CommitLog bytes its master sent at `start` (see
    /// [`writer::AppendReplicated`]); the remark says why not.
    pub async fn append_replicated(
        &self,
        start: u64,
        data: bytes::Bytes,
    ) -> Result<actormq_core::store::commit_log::ReplicatedOk, String> {
        self.writer
            .send(writer::AppendReplicated { start, data })
            .await
            .map_err(|e| format!("the CommitLog writer is gone: {e}"))?
            .map_err(|e| e.remark)
    }

    /// A slave: where its CommitLog ends (the offset it reports to its master).
    pub async fn replica_end(&self) -> Result<u64, String> {
        self.writer
            .send(GetWriterState)
            .await
            .map(|s| s.max_offset.0)
            .map_err(|e| format!("the CommitLog writer is gone: {e}"))
    }

    /// Many independent producer messages in one writer mailbox message — two in SYNC_FLUSH when
    /// some do not wait (`wait_store_msg_ok` false) and others do: the writer answers an
    /// `AppendBatch` as a whole, so a message that does not wait must not share one with a
    /// message whose flush it would then wait for, and whose outcome (FLUSH_DISK_TIMEOUT, a
    /// failed flush) it would be given. Both are handed over before either is awaited, those that
    /// do not wait first; this returns once both are answered (the broker's and the bench's
    /// batchers split a turn that way already, so that a `WAIT=false` reply is not held back by
    /// the flush).
    pub async fn put_many(&self, msgs: Vec<NewMessage>) -> Vec<Result<AppendOk, PutError>> {
        let n = msgs.len();
        let wait_flags: Vec<bool> = if self.params.broker_role == BrokerRole::SyncMaster {
            msgs.iter().map(writer::waits).collect()
        } else {
            Vec::new()
        };
        let mut early: Vec<Option<PutError>> = Vec::with_capacity(n);
        let mut pass = Vec::with_capacity(n);
        for mut m in msgs {
            match check_send_topic(&m.topic) {
                Ok(()) => {
                    rewrite_for_delay(&mut m, self.params.delay_levels_ms.len());
                    early.push(None);
                    pass.push(m);
                }
                Err(e) => early.push(Some(e)),
            }
        }
        // Only SYNC_FLUSH waits; a mix is rare (the batchers split their turns already).
        let mixed = self.params.sync_flush && {
            let waiting = pass.iter().filter(|m| writer::waits(m)).count();
            waiting > 0 && waiting < pass.len()
        };
        let mut results = if mixed {
            let count = pass.len();
            let (now, later): (Vec<_>, Vec<_>) = pass
                .into_iter()
                .enumerate()
                .partition(|(_, m)| !writer::waits(m));
            let (now_at, now): (Vec<usize>, Vec<NewMessage>) = now.into_iter().unzip();
            let (later_at, later): (Vec<usize>, Vec<NewMessage>) = later.into_iter().unzip();
            let (a, b) = tokio::join!(
                self.writer.send(AppendBatch(now)),
                self.writer.send(AppendBatch(later))
            );
            let mut slots: Vec<Option<Result<AppendOk, PutError>>> =
                (0..count).map(|_| None).collect();
            for (at, answer) in [(now_at, a), (later_at, b)] {
                match answer {
                    Ok(r) => at.into_iter().zip(r).for_each(|(i, r)| slots[i] = Some(r)),
                    Err(e) => at
                        .into_iter()
                        .for_each(|i| slots[i] = Some(Err(unavailable(e)))),
                }
            }
            let missing = || Err(PutError::new(PutStatus::UnknownError, "missing reply"));
            slots
                .into_iter()
                .map(|s| s.unwrap_or_else(missing))
                .collect::<Vec<_>>()
                .into_iter()
        } else {
            match self.writer.send(AppendBatch(pass)).await {
                Ok(r) => r.into_iter(),
                Err(e) => return (0..n).map(|_| Err(unavailable(e))).collect(),
            }
        };
        let mut out: Vec<Result<AppendOk, PutError>> = early
            .into_iter()
            .map(|e| match e {
                Some(err) => Err(err),
                None => results.next().unwrap_or_else(|| {
                    Err(PutError::new(PutStatus::UnknownError, "missing reply"))
                }),
            })
            .collect();
        if self.params.broker_role == BrokerRole::SyncMaster {
            // One wait for the batch: the slave acks in offset order, so the furthest end
            // decides. Only appends that wait (`wait_store_msg_ok`) take its outcome.
            let waiting: Vec<usize> = (0..out.len())
                .filter(|&i| wait_flags[i] && out[i].is_ok())
                .collect();
            let end = waiting
                .iter()
                .filter_map(|&i| out[i].as_ref().ok())
                .map(|o| o.end_offset().0)
                .max();
            if let Some(end) = end {
                let replica = self.replicated(end).await;
                for i in waiting {
                    if let Ok(ok) = &mut out[i] {
                        ok.status = merged(ok.status, replica);
                    }
                }
            }
        }
        out
    }

    /// A producer batch (SEND_BATCH_MESSAGE): one topic and queue; delay is not allowed.
    pub async fn put_producer_batch(
        &self,
        msgs: Vec<NewMessage>,
    ) -> Result<(AppendOk, Vec<PhyOffset>), PutError> {
        if let Some(m) = msgs.first() {
            check_send_topic(&m.topic)?;
        }
        if msgs
            .iter()
            .any(|m| actormq_core::store::schedule::delay_level(&m.properties).is_some())
        {
            return Err(PutError::new(
                PutStatus::MessageIllegal,
                "a batch cannot carry delayed messages",
            ));
        }
        let waits = self.params.broker_role == BrokerRole::SyncMaster
            && msgs.first().is_some_and(writer::waits);
        let (mut ok, offsets) = self
            .writer
            .send(AppendProducerBatch(msgs))
            .await
            .map_err(unavailable)??;
        if waits {
            let replica = self.replicated(ok.end_offset().0).await;
            ok.status = merged(ok.status, replica);
        }
        Ok((ok, offsets))
    }

    /// Deletes a topic's ConsumeQueues (DELETE_TOPIC_IN_BROKER; its CommitLog records stay until
    /// retention removes them, as in RocketMQ). The writer forgets the topic's queue offsets
    /// first, dispatch catches up to that point, then the queues go — so a unit of the old
    /// topic never lands in a queue of the new one — leaving a tombstone at that point in the
    /// queue table, so no later re-dispatch (a restart) brings the old records back. Returns how
    /// many queues were dropped.
    pub async fn delete_topic(&self, topic: &str) -> std::io::Result<usize> {
        let io = |e: MailboxError| std::io::Error::other(e);
        let end = self
            .writer
            .send(writer::RemoveTopic(topic.to_string()))
            .await
            .map_err(io)?;
        if !self.wait_dispatched(end, Duration::from_secs(10)).await {
            return Err(std::io::Error::other(format!(
                "dispatch did not reach {} within 10 s; topic {topic} not deleted from the store",
                end.0
            )));
        }
        self.cq_builder
            .send(cq_builder::DeleteTopicQueues {
                topic: topic.to_string(),
                before: end,
            })
            .await
            .map_err(io)?
    }

    /// Waits (bounded by `timeout`) until dispatch has reached `offset`; false on timeout.
    pub async fn wait_dispatched(&self, offset: PhyOffset, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.dispatched_offset() < offset {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        true
    }

    pub async fn delay_offsets(&self) -> Option<DelayOffsets> {
        self.schedule.send(GetDelayOffsets).await.ok()
    }

    /// A slave: takes the master's delayed-delivery progress (see [`schedule::SetDelayOffsets`]).
    pub async fn set_delay_offsets(&self, offsets: DelayOffsets) -> std::io::Result<()> {
        self.schedule
            .send(schedule::SetDelayOffsets(offsets))
            .await
            .map_err(std::io::Error::other)?
    }

    /// Clean stop: refuse appends, commit the write buffers (retried), wait for dispatch to catch
    /// up, persist the builders, flush everything, stop every actor. A final commit that still
    /// failed is returned as the error after all of that.
    pub async fn shutdown(&self) -> std::io::Result<()> {
        // Refuse new appends first; the writer's mailbox is FIFO, so once it answers a state
        // query every append it accepted is in the CommitLog, and `end` covers all of them.
        self.state.stopping.store(Some(Arc::new(
            "the broker is shutting down; send to another broker".to_string(),
        )));
        // No retention round from here on, and the one under way (if any) ends first: the
        // final flushes and the checkpoint then see a file list nothing is changing.
        if let Some(c) = &self.cleaner {
            let _ = c.send(cleaner::StopCleaning).await;
        }
        let end = match self.writer.send(writer::GetWriterState).await {
            Ok(s) => s.max_offset,
            Err(_) => self.max_offset(),
        };
        // Write buffers: everything written must reach the files before dispatch can see it and
        // before the final flush (RocketMQ's commit(0) at shutdown, retried). If it still fails,
        // the rest of the stop goes on — whatever was committed is dispatched, persisted and
        // flushed — and the failure is the shutdown's error, so the abort file stays and the next
        // start recovers abnormally.
        let mut commit_failed = None;
        if let Some(c) = &self.committer {
            match c.send(FinalCommit).await.map_err(std::io::Error::other) {
                Ok(Ok(committed)) => tracing::info!(committed, "write buffers committed"),
                Ok(Err(e)) | Err(e) => commit_failed = Some(e),
            }
        }
        // Dispatch can only reach committed (readable) bytes: after a successful final commit, or
        // with write rings (committed after every append, and every held burst committed by the
        // `GetWriterState` above), that is everything written; after a
        // failed commit it is less, and waiting for the rest would only run out the bound.
        let mut end = end.min(self.max_offset());
        if self.params.sync_flush && self.state.read_only.load().is_some() {
            // SYNC_FLUSH dispatches flushed bytes only, and after a failed flush the flushed
            // position never moves again.
            end = end.min(self.flushed_offset());
        }
        if !self.wait_dispatched(end, Duration::from_secs(30)).await {
            tracing::warn!(
                dispatched = self.dispatched_offset().0,
                end = end.0,
                "dispatch did not catch up before stop"
            );
        }
        // Actors on a stopped arbiter are dropped without `stopped`, so every owner is asked to
        // make its state durable explicitly, before the threads go.
        // A failure here is the stop's error too, but does not end it: the CommitLog flush, the
        // delay progress and the threads' stop still follow (the checkpoint's logics and index
        // times only move with flushes that succeeded).
        let io = std::io::Error::other;
        let mut builders_failed = self
            .cq_builder
            .send(FlushConsumeQueues { sync_all: false })
            .await
            .map_err(io)
            .and_then(|r| r)
            .err();
        if let Some(i) = &self.index_builder {
            if let Err(e) = i.send(FlushIndex).await.map_err(io).and_then(|r| r) {
                builders_failed.get_or_insert(e);
            }
        }
        if let Some(e) = &builders_failed {
            tracing::error!(error = %e, "flushing the ConsumeQueues or the index at stop failed");
        }
        // Last: the CommitLog flush writes the checkpoint with what the builders published. A
        // failure (a flush that failed earlier is reported here too) is the stop's error, after
        // the threads are gone.
        let flushed = match &self.flusher {
            FlushRef::Async(f) => f.send(FlushNow).await.map_err(io),
            FlushRef::Sync(g) => g.send(FlushNow).await.map_err(io),
        }
        .and_then(|r| r);
        match &flushed {
            Ok(flushed) => tracing::info!(flushed, "store flushed"),
            Err(e) => tracing::error!(error = %e, "the final CommitLog flush failed"),
        }
        // After the final flush: the delay progress persisted counts only flushed deliveries
        // (`schedule`), so now it can count all of them, and a clean restart repeats none.
        let persisted = self
            .schedule
            .send(PersistDelayOffsets)
            .await
            .map_err(io)
            .and_then(|r| r);
        if let Err(e) = &persisted {
            tracing::error!(error = %e, "cannot persist delayOffset.json at stop");
        }
        let arbiters =
            std::mem::take(&mut *self.arbiters.lock().unwrap_or_else(|e| e.into_inner()));
        for a in &arbiters {
            a.stop();
        }
        tokio::task::spawn_blocking(move || {
            for a in arbiters {
                let _ = a.join();
            }
        })
        .await
        .map_err(std::io::Error::other)?;
        flushed?;
        persisted?;
        if let Some(e) = builders_failed {
            return Err(e);
        }
        commit_failed.map_or(Ok(()), Err)
    }
}

fn unavailable(e: MailboxError) -> PutError {
    PutError::new(
        PutStatus::ServiceNotAvailable,
        format!("the CommitLog writer is not running: {e}"),
    )
}
pub mod state;

#[cfg(test)]
mod progress_tests {
    use super::*;

    fn progress(from: u64, end: u64, file_size: u64) -> RecoveryProgress {
        RecoveryProgress {
            files: Vec::new(),
            all_files: Vec::new(),
            next: next_boundary(from, file_size, end),
            end,
            file_size,
            physic_ts: 0,
            index_safe: false,
            synced: false,
        }
    }

    /// Every boundary after the start and the end, once each and in order, however far a single
    /// dispatched batch jumps.
    #[test]
    fn progress_is_checkpointed_at_each_boundary_and_at_the_end() {
        let mut p = progress(150, 1_000, 100);
        assert_eq!(p.due(199), None);
        assert_eq!(p.due(200), Some(200));
        assert_eq!(p.due(200), None);
        // One batch went from 200 to the end: the boundaries it passed come one call at a time.
        let mut seen = Vec::new();
        while let Some(at) = p.due(1_000) {
            seen.push(at);
        }
        assert_eq!(seen, [300, 400, 500, 600, 700, 800, 900, 1_000]);
        assert_eq!(p.due(u64::MAX - 1), None, "nothing after the end");

        // An end on a boundary is checkpointed once; a start on a boundary is not progress.
        let mut p = progress(200, 400, 100);
        let seen: Vec<u64> = std::iter::from_fn(|| p.due(400)).collect();
        assert_eq!(seen, [300, 400]);
        let mut p = progress(0, 50, 100);
        assert_eq!(p.due(49), None);
        assert_eq!(p.due(50), Some(50));
        assert_eq!(p.due(50), None);
    }
}
