//! Recovery: brings the files under the store root back to a consistent state before any actor
//! runs, and says where dispatch must start again.
//!
//! Owns nothing after it returns: [`recover`] hands the store's files, as a plain [`Recovered`]
//! value, to `system` (which starts the actors over them). No messages; it runs on the opening
//! task, single-threaded, and every step's error is the open's error.
//!
//! Order (each step a function below): open the ConsumeQueues, the CommitLog files and the
//! checkpoint → pick the abnormal recovery start file → recover the ConsumeQueues, cutting
//! queues at gaps (recorded in the queue table first) → scan the CommitLog (cut a torn tail),
//! noting every record a ConsumeQueue lacks → trim the ConsumeQueues to it and plan re-dispatch
//! → open the index, keep or drop it after an abnormal stop, cut what names records past the
//! end → the lowest offset re-dispatch starts from.
//!
//! Invariants: no unit or index entry names a record past the recovered CommitLog end once this
//! returns; anything removed (queue files cut at a gap, index files) is first recorded durably
//! (queue table, checkpoint, rebuild marker) so that a start killed in between redoes it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use actormq_core::offset::PhyOffset;
use actormq_core::store::checkpoint::{Checkpoint, CheckpointError, CHECKPOINT_FILE_SIZE};
use actormq_core::store::commit_log::{CommitLog, CommitLogConfig, RecoveryReport};
use actormq_core::store::consume_queue::ConsumeQueueStore;
use actormq_core::store::index_file::IndexStore;
use actormq_core::store::mapped_file::Warm;
use actormq_core::store::mapped_file_queue::MappedFileQueue;
use actormq_core::store::queue_table::{self, QueueMaxTable, Rebuild, RedispatchScan};
use actormq_core::store::recovery::{
    abnormal_recovery_min_timestamp, abnormal_recovery_start_file,
};

use super::parallel_io::Threaded;
use super::{reput, PreviousRun, StoreParams};

/// The store's files after recovery, ready for their actors, and what recovery found.
pub(super) struct Recovered {
    pub log: CommitLog,
    pub cqs: ConsumeQueueStore,
    /// `None` without `messageIndexEnable`.
    pub index: Option<IndexStore>,
    pub checkpoint: Checkpoint,
    pub found: Findings,
}

/// What recovery found and decided: plain values the later steps read.
pub(super) struct Findings {
    pub previous: PreviousRun,
    /// The checkpoint had the wrong size and was replaced by a zeroed one ([`open_checkpoint`]).
    pub checkpoint_replaced: bool,
    /// Abnormal recovery's start file (an index into the CommitLog files).
    pub start_file: Option<usize>,
    /// The persisted queue table (`queue_table`), raised over queues cut at a gap.
    pub table_path: PathBuf,
    pub persisted: QueueMaxTable,
    /// Queues that lost units and are rebuilt by re-dispatch.
    pub rebuilds: Vec<Rebuild>,
    pub scan: RecoveryReport,
    /// Store time of the last recovered record (0 if none was scanned).
    pub scan_last_ts: i64,
    pub scan_ms: u64,
    /// Where an index rebuild starts (index files were cut or damaged); its marker is removed
    /// once dispatch has caught up and the index is flushed.
    pub index_cut_from: Option<u64>,
    /// Where dispatch starts again.
    pub reput_from: u64,
}

impl Findings {
    pub fn abnormal(&self) -> bool {
        self.previous != PreviousRun::Clean
    }
    /// The recovered CommitLog end.
    pub fn end(&self) -> u64 {
        self.scan.end.0
    }
}

/// Recovers the store under `params.root` (see the module docs for the order).
pub(super) fn recover(params: &StoreParams, previous: PreviousRun) -> std::io::Result<Recovered> {
    let abnormal = previous != PreviousRun::Clean;
    std::fs::create_dir_all(&params.root)?;
    let mut cqs = ConsumeQueueStore::load(&params.root.join("consumequeue"), params.cq_file_size)?;
    // Its batches of file creations and syncs overlap on threads (`parallel_io`), here and on
    // the ConsumeQueue builder's thread later.
    cqs.set_parallel_io(std::sync::Arc::new(Threaded));
    let files = MappedFileQueue::load(&params.commit_log_dir, params.commit_log_file_size)?;
    let (mut checkpoint, checkpoint_replaced) = open_checkpoint(&params.root.join("checkpoint"))?;
    let mut log = CommitLog::new(commit_log_config(params), files);
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
    let table_path = params.root.join("config").join(queue_table::FILE_NAME);
    let persisted = cut_queues_at_gaps(&mut cqs, &table_path)?;
    let Scanned {
        report: scan,
        last_ts: scan_last_ts,
        ms: scan_ms,
        scan: redispatch,
    } = scan_commit_log(params, previous, &mut log, &cqs, &persisted, start_file)?;
    let end = scan.end.0;
    // Units pointing beyond the recovered end refer to data that no longer exists.
    cqs.truncate_to_phy(end)?;
    let min_cl = log.view().min_offset();
    // Retention may have deleted CommitLog files after the last ConsumeQueue cleanup (or
    // the broker stopped in between): units pointing below the CommitLog's first byte are
    // not offered to consumers (RocketMQ's `correctMinOffset`).
    cqs.correct_min_offsets(min_cl);
    let plan = redispatch.plan(&cqs, min_cl);
    for r in &plan.rebuilds {
        tracing::warn!(
            topic = %r.topic,
            queue = r.queue_id,
            damage = ?r.damage,
            from = r.from,
            "ConsumeQueue lost units; rebuilding it from the CommitLog"
        );
    }
    let mut index = open_index(params)?;
    let index_lag_from = match (abnormal, index.as_mut()) {
        (true, Some(idx)) => {
            keep_or_drop_index(params, previous, idx, &log, &cqs, end, &checkpoint)
        }
        _ => None,
    };
    let index_cut_from = match index.as_mut() {
        Some(idx) => cut_index_past_end(params, idx, &log, end, &mut checkpoint)?,
        None => None,
    };
    let reput_from = redispatch_from(
        [plan.from, start_offset, index_lag_from, index_cut_from],
        cqs.max_physic_offset(),
        min_cl,
        end,
        abnormal,
    );
    Ok(Recovered {
        log,
        cqs,
        index,
        checkpoint,
        found: Findings {
            previous,
            checkpoint_replaced,
            start_file,
            table_path,
            persisted,
            rebuilds: plan.rebuilds,
            scan,
            scan_last_ts,
            scan_ms,
            index_cut_from,
            reput_from,
        },
    })
}

fn commit_log_config(params: &StoreParams) -> CommitLogConfig {
    CommitLogConfig {
        file_size: params.commit_log_file_size,
        max_message_size: params.max_message_size,
        // The writer's own fallback creation never warms: that would stall appends for the
        // whole warm-up. Warming is the allocator's job.
        warm: Warm::No,
    }
}

/// Opens the checkpoint; one of the wrong size (RocketMQ maps a page and tolerates any size; a
/// foreign tool or a damaged file system leaves others) is moved to `checkpoint.corrupt` and
/// replaced by a zeroed one, with an ERROR — as if there had been none. A clean previous stop
/// then recovers normally (the checkpoint is not read; `catch_up::finish_recovery` seeds it with
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

/// Loads the persisted queue table and removes the files of queues cut at a gap at load.
///
/// Where dispatch must start again: the first record a ConsumeQueue lacks (a crash before
/// dispatch), and the end of any queue that lost units whose records lie before the scan
/// (a lost ConsumeQueue file or directory), found against the persisted queue table
/// without reading the rest of the CommitLog (see `queue_table`).
fn cut_queues_at_gaps(
    cqs: &mut ConsumeQueueStore,
    table_path: &Path,
) -> std::io::Result<QueueMaxTable> {
    let mut persisted = QueueMaxTable::load(table_path).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "queue table unreadable; lost ConsumeQueue files that lie \
            before the recovery scan are not detected at this start");
        QueueMaxTable::default()
    });
    // Queues cut at a gap at load: the table claims at least the units their later files
    // show, so they are found short and rebuilt (RocketMQ's store, or one whose table is
    // gone, included). Durable before those files go, so a start that dies in between
    // claims the same again; only then are the files deleted.
    let cuts = cqs.take_cuts();
    if cuts.is_empty() {
        return Ok(persisted);
    }
    let mut floor = QueueMaxTable::default();
    for c in &cuts {
        // A deleted topic's leftover (a crash during its deletion) is not brought back.
        if !c.last_phy.is_some_and(|p| persisted.is_dead(&c.topic, p)) {
            floor.insert(&c.topic, c.queue_id, c.floor);
        }
    }
    persisted = persisted.raised_to(&floor);
    crate::fsutil::write_atomically(table_path, &persisted.encode()).map_err(|e| {
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
    Ok(persisted)
}

/// What the CommitLog scan found.
struct Scanned<'a> {
    report: RecoveryReport,
    last_ts: i64,
    ms: u64,
    /// Every record a ConsumeQueue lacks, noted as the scan went (planned once they are trimmed).
    scan: RedispatchScan<'a>,
}

/// Recovers the CommitLog from `start_file` (normal recovery: the third-last file), cutting a
/// corrupt or torn tail, and notes every record a ConsumeQueue lacks.
fn scan_commit_log<'a>(
    params: &StoreParams,
    previous: PreviousRun,
    log: &mut CommitLog,
    cqs: &ConsumeQueueStore,
    persisted: &'a QueueMaxTable,
    start_file: Option<usize>,
) -> std::io::Result<Scanned<'a>> {
    let mut scan = RedispatchScan::new(cqs, persisted);
    let scan_started = Instant::now();
    let mut last_ts = 0i64;
    // A machine crash may lose any page; a process death may leave the last commit's
    // `pwrite` short at a page boundary (SIGKILL stops a buffered write between pages).
    log.expect_torn_pages(previous != PreviousRun::Clean);
    let report = log.recover(params.check_crc_on_recover, start_file, |phy, r| {
        last_ts = r.store_timestamp;
        scan.observe(phy, r)
    })?;
    let ms = scan_started.elapsed().as_millis() as u64;
    if let Some(reason) = &report.truncated_reason {
        tracing::warn!(end = report.end.0, %reason, "CommitLog recovery cut a corrupt tail");
    }
    Ok(Scanned {
        report,
        last_ts,
        ms,
        scan,
    })
}

fn open_index(params: &StoreParams) -> std::io::Result<Option<IndexStore>> {
    if !params.message_index_enable {
        return Ok(None);
    }
    IndexStore::open(
        &params.root.join("index"),
        params.max_hash_slot_num,
        params.max_index_num,
    )
    .map(Some)
    .map_err(|e| std::io::Error::other(e.to_string()))
}

/// After an abnormal stop: keeps the index files the dead process left (returning where
/// re-dispatch must start to cover the range the index may lag behind the ConsumeQueues), or
/// removes those newer than the checkpoint.
fn keep_or_drop_index(
    params: &StoreParams,
    previous: PreviousRun,
    idx: &mut IndexStore,
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
    end: u64,
    checkpoint: &Checkpoint,
) -> Option<u64> {
    // After a process death on this boot the index files are in the page cache as the
    // process left them: each entry counted by the header before a slot points to it
    // (`IndexFile::put_key`), so a kill mid-put loses no chain. If they end before the
    // recovered CommitLog end (nothing indexed was cut), they are kept and re-dispatch
    // adds what they lack. Otherwise the machine may have gone down, and files newer than
    // the checkpoint may be torn (RocketMQ): removed, and rebuilt from where re-dispatch
    // starts.
    let whole = previous == PreviousRun::ProcessDied
        && u64::try_from(idx.last_end_phy_offset()).is_ok_and(|e| e < end)
        && idx.tail_matches(&log.view(), end);
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
        tracing::info!(
            files = idx.files().len(),
            "the previous broker process died on this boot: index files kept"
        );
        return Some(lagged - lagged % params.commit_log_file_size);
    }
    let removed = idx.destroy_newer_than(checkpoint.index_msg_timestamp());
    if removed > 0 {
        tracing::info!(
            removed,
            "index files newer than the checkpoint removed; they are rebuilt by dispatch"
        );
    }
    None
}

/// Removes index files that name records past the recovered end, or are damaged, and begins
/// their rebuild; returns where re-dispatch rebuilds them from.
///
/// Whatever the previous run was, index files must not name a record the recovered
/// CommitLog no longer has: after a machine crash (the index checkpointed ahead of the
/// CommitLog's flush) or a cut on normal recovery, a kept file ending past the end would
/// name other messages' offsets, and its end — the index's replay bound — would make it
/// skip every record written over the cut. They go, and re-dispatch rebuilds from the
/// first record they held.
///
/// A damaged index file (size or header) is handled alike: it and the files after it were
/// left out at open and go now, and re-dispatch indexes again from the start of the
/// CommitLog file holding the last record the kept files name (a record boundary at or
/// below it, past everything they hold) — or from where an interrupted rebuild began,
/// if its marker is still there. The marker, written before any file goes and removed
/// once dispatch has caught up and the index is flushed, makes the next start redo an
/// interrupted rebuild even after a clean stop, which reads no checkpoint.
fn cut_index_past_end(
    params: &StoreParams,
    idx: &mut IndexStore,
    log: &CommitLog,
    end: u64,
    checkpoint: &mut Checkpoint,
) -> std::io::Result<Option<u64>> {
    let end_i = i64::try_from(end).unwrap_or(i64::MAX);
    let Some((begin, kept_end_ts)) = index_cut(params, idx, end_i) else {
        return Ok(None);
    };
    let first = log
        .files()
        .files()
        .first()
        .map_or(0, |f| f.file_from_offset());
    let from = u64::try_from(begin).unwrap_or(0).max(first);
    lower_checkpoint_for_rebuild(log, from, end, kept_end_ts, checkpoint)?;
    idx.begin_rebuild(i64::try_from(from).unwrap_or(i64::MAX), end_i)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // Tests stop a start here, as a kill during the rebuild would.
    fail::fail_point!("recovery-index-cut", |_| Err(std::io::Error::other(
        "recovery: stopped after removing index files: injected by a fail point"
    )));
    tracing::warn!(
        end,
        from,
        "index files named records past the recovered CommitLog end or were damaged: \
         removed, and rebuilt by re-dispatch"
    );
    Ok(Some(from))
}

/// Where the index must be cut (a physical offset to rebuild from) and the end time of the
/// files kept, if it names records past `end` or a file was damaged.
fn index_cut(params: &StoreParams, idx: &IndexStore, end: i64) -> Option<(i64, i64)> {
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
    match (idx.past(end), damaged) {
        (Some((b1, t1)), Some((b2, t2))) => Some((b1.min(b2), t1.min(t2))),
        (past, damaged) => past.or(damaged),
    }
}

/// Durable before the index files go: the checkpoint must send any later abnormal start
/// (a kill or a power loss during the rebuild) back to `from`, and not vouch for
/// index files that are gone. Recovery progress raises both again as re-dispatch
/// passes file boundaries (both builders done up to there). A record unreadable
/// at `from` leaves 0: the next abnormal start scans from the first file.
fn lower_checkpoint_for_rebuild(
    log: &CommitLog,
    from: u64,
    end: u64,
    kept_end_ts: i64,
    checkpoint: &mut Checkpoint,
) -> std::io::Result<()> {
    let mut ts_at_from = 0;
    let _ = actormq_core::store::commit_log::walk(
        &log.view(),
        PhyOffset(from),
        PhyOffset(end),
        |_, r| {
            ts_at_from = r.store_timestamp;
            false
        },
    );
    if from < end {
        // (From the end itself there is nothing to go back for.)
        checkpoint.set_physic_msg_timestamp(checkpoint.physic_msg_timestamp().min(ts_at_from));
    }
    checkpoint.set_index_msg_timestamp(checkpoint.index_msg_timestamp().min(kept_end_ts));
    checkpoint.flush().map_err(|e| {
        std::io::Error::other(format!(
            "cannot lower the checkpoint before rebuilding the index: {e}"
        ))
    })
}

/// The lowest of the ConsumeQueues' max physical offset and every other start `starts` asks
/// for, kept within the CommitLog (`min_cl..=end`).
fn redispatch_from(
    starts: [Option<u64>; 4],
    cq_max_phy: u64,
    min_cl: u64,
    end: u64,
    abnormal: bool,
) -> u64 {
    let from = starts.into_iter().flatten().fold(cq_max_phy, u64::min);
    let from = from.max(min_cl).min(end);
    if from < end {
        tracing::info!(
            from,
            to = end,
            abnormal,
            "dispatching CommitLog records the ConsumeQueues and index lack"
        );
    }
    from
}
