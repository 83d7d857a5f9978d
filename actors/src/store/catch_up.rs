//! Catching up after recovery: once the ConsumeQueue builder, the index builder and reput run
//! over the recovered files, the open waits here until dispatch has reached the recovered
//! CommitLog end, before anyone can append or read.
//!
//! Messages out: `FlushConsumeQueues` (progress checkpoints), `FlushIndex` (an index rebuild's
//! end) and `RecoveryDone` to the builders. It reads dispatch's progress from `StoreState`.
//!
//! Invariants: after an abnormal stop the checkpoint names only durable data — each progress
//! checkpoint is written after the recovered CommitLog files are synced (once) and the
//! ConsumeQueues flushed ([`RecoveryProgress`]); an index rebuild's marker goes only once the
//! rebuilt index is flushed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq_core::store::checkpoint::Checkpoint;
use actormq_core::store::commit_log::CommitLog;
use actormq_core::store::mapped_file::MappedFile;
use actormq_core::store::reader::StoreReader;
use actormq_core::store::recovery::{
    abnormal_recovery_min_timestamp, abnormal_recovery_start_file,
};

use super::cq_builder::ConsumeQueueBuilder;
use super::index_builder::IndexBuilder;
use super::messages::{FlushConsumeQueues, FlushIndex, RecoveryDone};
use super::recover::Findings;
use super::state::StoreState;
use super::StoreParams;
use crate::metered::ActorRef;

/// Recovery's progress checkpoints (apache/rocketmq#9587). While dispatch catches up
/// after an abnormal stop, the checkpoint is written each time dispatch passes a CommitLog file
/// boundary and once it reaches the recovered end — after the recovered CommitLog files are
/// `fdatasync`ed (once) and every ConsumeQueue is flushed — so that "physic" and "logics" only ever
/// name durable data. A start killed after one then picks its start file from there instead of
/// rescanning and re-dispatching everything the killed start already did. The index time is raised
/// only to what the index builder published: the end of full index files it flushed.
pub(super) struct RecoveryProgress {
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
    /// Progress checkpoints for a start that re-dispatches after an abnormal stop; `None` when
    /// the previous stop was clean or nothing is re-dispatched.
    fn for_start(
        params: &StoreParams,
        found: &Findings,
        log: &CommitLog,
    ) -> Option<RecoveryProgress> {
        let end = found.end();
        (found.abnormal() && found.reput_from < end).then(|| {
            let files = log.files().files();
            RecoveryProgress {
                files: files[found.start_file.unwrap_or(0).min(files.len())..].to_vec(),
                all_files: files.to_vec(),
                next: next_boundary(found.reput_from, params.commit_log_file_size, end),
                end,
                file_size: params.commit_log_file_size,
                physic_ts: found.scan_last_ts,
                index_safe: params.index_safe(),
                synced: false,
            }
        })
    }

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
            self.sync_files().await?;
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

    /// `fdatasync`s the recovered CommitLog files, naming the one that failed.
    async fn sync_files(&mut self) -> std::io::Result<()> {
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
        Ok(())
    }
}

/// Dispatch catches up with the recovered CommitLog before anyone can append or read. After
/// an abnormal stop, every CommitLog file boundary dispatch passes, and its end, is
/// checkpointed: a start killed during this wait resumes from there. An index rebuilt by this
/// re-dispatch is flushed and its marker removed. Returns how long it took, in ms.
pub(super) async fn catch_up(
    params: &StoreParams,
    found: &Findings,
    log: &CommitLog,
    checkpoint: &mut Checkpoint,
    state: &StoreState,
    cq_builder: &ActorRef<ConsumeQueueBuilder>,
    index_builder: Option<&ActorRef<IndexBuilder>>,
) -> std::io::Result<u64> {
    let dispatch_started = Instant::now();
    let progress = RecoveryProgress::for_start(params, found, log);
    wait_for_dispatch(found.end(), progress, checkpoint, cq_builder, state).await?;
    if let (Some(_), Some(ib)) = (found.index_cut_from, index_builder) {
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
    Ok(dispatch_started.elapsed().as_millis() as u64)
}

/// Waits until dispatch has reached `end`, writing the progress checkpoints as it passes them.
async fn wait_for_dispatch(
    end: u64,
    mut progress: Option<RecoveryProgress>,
    checkpoint: &mut Checkpoint,
    cq_builder: &ActorRef<ConsumeQueueBuilder>,
    state: &StoreState,
) -> std::io::Result<()> {
    let mut waited = 0u32;
    loop {
        let dispatched = state.dispatched.load(Ordering::Acquire);
        if let Some(p) = progress.as_mut() {
            if let Some(at) = p.due(dispatched) {
                p.checkpoint(at, checkpoint, cq_builder, state).await?;
                fail::fail_point!("recovery-progress-checkpoint");
                continue;
            }
        }
        if dispatched >= end {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        waited += 1;
        if waited % 10_000 == 0 {
            log_still_waiting(end, state);
        }
    }
}

/// A dispatch that keeps failing (a full ConsumeQueue disk, an unreadable record) holds the
/// start, as RocketMQ's does: the line says why.
fn log_still_waiting(end: u64, state: &StoreState) {
    let dispatched = state.dispatched.load(Ordering::Acquire);
    match state.dispatch_failing.load_full() {
        Some(why) => tracing::warn!(
            dispatched,
            end,
            "waiting for dispatch to catch up; it is failing: {why}"
        ),
        None => tracing::info!(dispatched, end, "waiting for dispatch to catch up"),
    }
}

/// After dispatch has caught up: ends the ConsumeQueue builder's repair mode, seeds a checkpoint
/// replaced after a clean stop, reports queues rebuilt short, and seeds the writer's queue
/// offsets from the (now complete) ConsumeQueues.
pub(super) async fn finish_recovery(
    found: &Findings,
    log: &mut CommitLog,
    checkpoint: &mut Checkpoint,
    full_index_end: Option<i64>,
    cq_builder: &ActorRef<ConsumeQueueBuilder>,
    reader: &StoreReader,
) -> std::io::Result<()> {
    cq_builder
        .send(RecoveryDone)
        .await
        .map_err(std::io::Error::other)?;
    // A checkpoint replaced after a clean stop would stay at zero until traffic and index
    // rolls raise it, and a crash meanwhile would recover from the first file and drop every
    // index file. The clean stop had flushed everything the normal recovery scan saw, and
    // the full index files: seeded with those, as that stop's own checkpoint would have been.
    if found.checkpoint_replaced && !found.abnormal() && found.scan_last_ts > 0 {
        checkpoint.set_physic_msg_timestamp(found.scan_last_ts);
        checkpoint.set_logics_msg_timestamp(found.scan_last_ts);
        checkpoint.set_index_msg_timestamp(full_index_end.unwrap_or(0));
        checkpoint
            .flush()
            .map_err(|e| std::io::Error::other(format!("writing the replaced checkpoint: {e}")))?;
    }
    report_short_rebuilds(found, reader);
    // The writer's queue offsets continue where the ConsumeQueues (now complete) end.
    for topic in reader.consume_queues().topics() {
        for q in reader.consume_queues().queues_of(&topic) {
            log.set_queue_offset(&topic, q.queue_id, q.max_offset());
        }
    }
    Ok(())
}

/// A rebuilt queue still short of its table entry lost records from the CommitLog too
/// (a power loss under ASYNC_FLUSH, retention): nothing more can be brought back.
fn report_short_rebuilds(found: &Findings, reader: &StoreReader) {
    for r in &found.rebuilds {
        let now = reader
            .consume_queues()
            .get(&r.topic, r.queue_id)
            .map_or(0, |q| q.max_offset().0);
        if let Some(table) = found
            .persisted
            .get(&r.topic, r.queue_id)
            .filter(|t| now < *t)
        {
            tracing::error!(
                topic = %r.topic,
                queue = r.queue_id,
                rebuilt_to = now,
                table,
                "ConsumeQueue rebuilt short: the CommitLog no longer holds its last records"
            );
        }
    }
}

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
