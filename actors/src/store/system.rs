//! The store's actor system: starts the actors over the recovered files in dependency order and
//! hands the running set to [`Store`].
//!
//! Order ([`start`]): the ConsumeQueue builder, the index builder and reput → wait until dispatch
//! has caught up with the recovered CommitLog (`catch_up`) → the allocator (a fresh store's first
//! file made ready) → the flusher or group committer → the committer (write buffers in
//! ASYNC_FLUSH) → the CommitLog writer → the schedule service → the cleaner. Each actor runs on
//! an arbiter (thread) of its own, so a blocking call in one never stalls another — except the
//! dispatch chain (reput and the two builders it awaits), which shares the "dispatch" thread; each
//! is started only once those it sends to are running.
//!
//! Invariant: an open that fails part-way stops every arbiter it started ([`Started`]), so no
//! actor of a store that never opened goes on writing its files.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::store::checkpoint::Checkpoint;
use actormq_core::store::commit_log::{CommitLog, WriteBuffers};
use actormq_core::store::consume_queue::ConsumeQueueStore;
use actormq_core::store::index_file::IndexStore;
use actormq_core::store::mapped_file::Warm;
use actormq_core::store::mapped_file_queue::FileQueueView;
use actormq_core::store::reader::StoreReader;
use actormq_core::store::transient_pool::TransientStorePool;

use super::allocator::{self, MappedFileAllocator};
use super::catch_up::{catch_up, finish_recovery};
use super::cleaner::StoreCleaner;
use super::committer::Committer;
use super::cq_builder::{ArrivalHook, ConsumeQueueBuilder};
use super::flusher::{self, CommitMode, FlushCore, Flusher, GroupCommitter};
use super::index_builder::IndexBuilder;
use super::messages::{AllocateNext, CommitWake, FlushWake, Wake};
use super::recover::{Findings, Recovered};
use super::reput::ReputDispatcher;
use super::schedule::ScheduleDelivery;
use super::state::StoreState;
use super::writer::CommitLogWriter;
use super::{OpenReport, Store, StoreParams};
use crate::metered::{start_beside, start_on, start_with, ActorRef, Service};
use crate::store::ha::HaState;
use crate::wake::Waker;

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

/// Longest time a roll waits for a write buffer to come back (without
/// `fastFailIfNoBufferInStorePool`) before writing that file through its mapping. The committer
/// frees a buffer as soon as the file holding it is fully committed, normally within one commit.
const POOL_WAIT: Duration = Duration::from_secs(3);

/// The actor that owns the flushed position: `Flusher` (ASYNC_FLUSH) or `GroupCommitter`
/// (SYNC_FLUSH).
pub(super) enum FlushRef {
    Async(ActorRef<Flusher>),
    Sync(ActorRef<GroupCommitter>),
}

/// The arbiters [`start`] has started so far. If the open fails part-way they are stopped, so
/// no actor of a store that never opened goes on writing its files (an in-process retry would
/// otherwise run a second set of writers over them). On success the `Store` takes them.
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

/// Starts the store's actors over the recovered files, in dependency order (module docs), and
/// returns the running store. `opened` is when the open began (for [`OpenReport`]).
pub(super) async fn start(
    params: StoreParams,
    clock: SharedClock,
    on_arrival: Option<ArrivalHook>,
    recovered: Recovered,
    opened: Instant,
) -> std::io::Result<Store> {
    let Recovered {
        mut log,
        cqs,
        index,
        mut checkpoint,
        found,
    } = recovered;
    let state = Arc::new(StoreState::default());
    state.dispatched.store(found.reput_from, Ordering::Release);
    state.flushed.store(found.end(), Ordering::Release);
    state.committed.store(found.end(), Ordering::Release);
    let consume_queues = cqs.max_offsets().len();
    let index_reader = index.as_ref().map(|i| i.reader());
    // The newest full index file's end time, of the files kept (full files are flushed when
    // they fill and at a clean stop): what a checkpoint replaced after a clean stop gets.
    let full_index_end = index.as_ref().and_then(|i| i.full_files_end_timestamp());
    let view = log.view();
    let reader = StoreReader::new(view.clone(), cqs.table());
    let mut sys = Spawner {
        params: &params,
        clock: &clock,
        state: &state,
        view,
        started: Started(Vec::new()),
    };
    let dispatch = sys.start_dispatch(cqs, index, &found, on_arrival);
    let dispatch_ms = catch_up(
        &params,
        &found,
        &log,
        &mut checkpoint,
        &state,
        &dispatch.cq_builder,
        dispatch.index_builder.as_ref(),
    )
    .await?;
    finish_recovery(
        &found,
        &mut log,
        &mut checkpoint,
        full_index_end,
        &dispatch.cq_builder,
        &reader,
    )
    .await?;
    // Replication's thread: `HaMaster` here, the HA connections or the slave beside it (the
    // broker spawns them on `Store::ha_arbiter`), so acks and wakes stay on one thread.
    let ha_arbiter = Arbiter::new();
    crate::metered::name_thread(&ha_arbiter.handle(), "ha");
    let ha = HaState::new_on(Some(&ha_arbiter.handle()));
    let ha_handle = ha_arbiter.handle();
    sys.started.push(ha_arbiter);
    let appending = sys.start_appending(log, checkpoint, &dispatch, &ha).await?;
    let schedule = sys.start_schedule(&reader, &appending.writer)?;
    let cleaner = sys.start_cleaner(appending.cl_files, &appending.writer, &dispatch);
    let arbiters = sys.started.into_inner();
    let report = open_report(&found, consume_queues, opened, dispatch_ms);
    Ok(Store {
        params,
        writer: appending.writer,
        flusher: appending.flusher,
        committer: appending.committer,
        pool: appending.pool,
        cq_builder: dispatch.cq_builder,
        index_builder: dispatch.index_builder,
        schedule,
        cleaner,
        reader,
        index: index_reader,
        state,
        ha,
        ha_arbiter: ha_handle,
        dispatch_arbiter: dispatch.arbiter,
        arbiters: std::sync::Mutex::new(arbiters),
        report,
    })
}

fn open_report(
    found: &Findings,
    consume_queues: usize,
    opened: Instant,
    dispatch_ms: u64,
) -> OpenReport {
    OpenReport {
        abnormal: found.abnormal(),
        commit_log_end: found.end(),
        scan_from: found.scan.scan_from,
        files_scanned: found.scan.files_scanned,
        records_scanned: found.scan.records,
        redispatch_bytes: found.end() - found.reput_from,
        truncated_reason: found.scan.truncated_reason.clone(),
        consume_queues,
        recovery_ms: opened.elapsed().as_millis() as u64,
        scan_ms: found.scan_ms,
        dispatch_ms,
    }
}

/// The dispatching side: builders and the reput dispatcher that feeds them.
struct Dispatch {
    /// The "dispatch" thread the three share (module docs).
    arbiter: ArbiterHandle,
    cq_builder: ActorRef<ConsumeQueueBuilder>,
    index_builder: Option<ActorRef<IndexBuilder>>,
    reput: ActorRef<ReputDispatcher>,
    /// Reput's coalesced-wake flag (see `Waker`), shared by it and its wakers.
    reput_woken: Arc<AtomicBool>,
}

impl Dispatch {
    fn reput_waker(&self) -> Waker {
        Waker::new(self.reput.clone(), self.reput_woken.clone(), || Wake)
    }
}

/// The appending side: the writer, the actors that commit and flush its bytes, and the write
/// buffers.
struct Appending {
    writer: ActorRef<CommitLogWriter>,
    flusher: FlushRef,
    /// ASYNC_FLUSH with write buffers.
    committer: Option<ActorRef<Committer>>,
    pool: Option<Arc<TransientStorePool>>,
    /// The CommitLog's files (the writer owns the list), for the cleaner to plan with.
    cl_files: FileQueueView,
}

/// The flushing actor, what the writer needs of it, and the wake for the async flusher.
struct Flushing {
    flusher: FlushRef,
    /// SYNC_FLUSH: the group committer the writer hands appends that wait, and the wait's bound.
    sync: Option<(ActorRef<GroupCommitter>, Duration)>,
    /// ASYNC_FLUSH without `flushCommitLogTimed`: appends (or commits) wake the flusher.
    waker: Option<Waker>,
}

/// Starts actors, each on an arbiter of its own, recording the arbiters in [`Started`].
struct Spawner<'a> {
    params: &'a StoreParams,
    clock: &'a SharedClock,
    state: &'a Arc<StoreState>,
    view: FileQueueView,
    started: Started,
}

impl Spawner<'_> {
    fn spawn<S: Service + Send>(&mut self, service: S) -> ActorRef<S> {
        let arbiter = Arbiter::new();
        let actor = start_on(Some(&arbiter.handle()), service);
        self.started.push(arbiter);
        actor
    }

    /// The ConsumeQueue builder, the index builder and reput, dispatching from
    /// `found.reput_from`.
    fn start_dispatch(
        &mut self,
        mut cqs: ConsumeQueueStore,
        index: Option<IndexStore>,
        found: &Findings,
        on_arrival: Option<ArrivalHook>,
    ) -> Dispatch {
        let p = self.params;
        // After an abnormal stop, re-dispatch checks every unit it finds already written against
        // its record and writes it again if it differs. The recovery scan keeps units that
        // *look* valid, but unsynced pages can come back torn at sector granularity (a power
        // loss) and a unit can be half-copied (a process killed in the middle of the copy):
        // offset and size whole, tagsCode — or, on the schedule topic, the delivery time —
        // wrong. Skipped as a replay (RocketMQ skips it), it would stay wrong for good. Ended by
        // `RecoveryDone`; no reader exists until then.
        cqs.set_repairing(found.abnormal());
        let cq_builder = ConsumeQueueBuilder::new(
            cqs,
            self.view.clone(),
            p.delay_levels_ms.clone(),
            p.cq_flush_interval,
            p.cq_flush_least_pages,
        )
        .with_arrival_hook(on_arrival)
        .with_state(self.state.clone())
        .with_thorough_interval(p.cq_flush_thorough_interval)
        .with_queue_table(found.table_path.clone(), found.persisted.clone())
        // Until re-dispatch is done, a table written must not forget that a queue being
        // rebuilt is short (a start killed mid-rebuild would not rebuild it again).
        .with_table_floor(found.persisted.clone());
        // One thread for the whole chain: reput's batch reaches both builders, and their answers
        // reach reput, without a cross-thread wake (each one an eventfd write and a context
        // switch: 3.7 per round when each had a thread of its own). The builders' work is
        // awaited by reput either way, so their running in parallel saved little.
        let arbiter = Arbiter::new();
        let handle = arbiter.handle();
        crate::metered::name_thread(&handle, "dispatch");
        self.started.push(arbiter);
        let cq_builder = start_beside(&handle, cq_builder);
        let index_builder = match index {
            Some(idx) => {
                let b = IndexBuilder::new(idx, self.view.clone(), self.clock.clone())
                    .with_state(self.state.clone());
                Some(start_beside(&handle, b))
            }
            None => None,
        };
        let reput_woken = Arc::new(AtomicBool::new(false));
        let reput = start_beside(
            &handle,
            ReputDispatcher::new(
                self.view.clone(),
                self.state.clone(),
                p.sync_flush,
                reput_woken.clone(),
                cq_builder.clone(),
                index_builder.clone(),
            ),
        );
        Dispatch {
            arbiter: handle,
            cq_builder,
            index_builder,
            reput,
            reput_woken,
        }
    }

    /// The allocator, the flusher (or group committer), the committer and the writer, with the
    /// write rings or buffers they share.
    async fn start_appending(
        &mut self,
        mut log: CommitLog,
        checkpoint: Checkpoint,
        dispatch: &Dispatch,
        ha: &Arc<HaState>,
    ) -> std::io::Result<Appending> {
        let p = self.params;
        let rings = write_rings(p);
        let pool = write_buffer_pool(p)?;
        // With write buffers or rings the writer never touches a new file's mapping (commits
        // write it with pwrite): pre-faulting it would only dirty pages for the first fdatasync
        // to write back.
        let warm = if p.warm_mapped_files && pool.is_none() && rings.is_none() {
            Warm::Populate
        } else {
            Warm::No
        };
        // SYNC_FLUSH answers each send after an fdatasync: zero-written files make that a data-only
        // write. Only with rings, whose commits pad new pages (see `mapped_file`); a write
        // through a mapping or an unpadded commit would read each zero-written page first.
        let zero_files = p.sync_flush && rings.is_some();
        let allocator = self.start_allocator(pool.as_ref(), warm, zero_files);
        prepare_first_file(p, &allocator, &mut log, warm).await;
        if zero_files {
            // The allocator keeps a file while it zeroes it: the writer takes it at the roll.
            log = log.taking_prepared(allocator::take_prepared(allocator.clone()));
        }
        let commit_mode = match (pool.is_some(), p.sync_flush) {
            (false, _) => CommitMode::Unbuffered,
            (true, true) => CommitMode::CommitFirst,
            (true, false) => CommitMode::ByCommitter,
        };
        let flushing = self.start_flusher(
            checkpoint,
            commit_mode,
            zero_files,
            &allocator,
            dispatch,
            ha,
        );
        let (log, after_append, committer) = match &pool {
            Some(pool) => {
                self.use_write_buffers(log, pool, commit_mode, flushing.waker, dispatch, ha)
            }
            None => {
                let (log, after_append) =
                    use_write_rings(p, log, rings.as_ref(), flushing.waker, dispatch, ha);
                (log, after_append, None)
            }
        };
        let cl_files = log.view();
        let writer = self.spawn(
            CommitLogWriter::new(
                log,
                self.clock.clone(),
                Some(allocator),
                after_append,
                self.state.clone(),
                flushing.sync,
            )
            .committing_inline(rings.is_some())
            .as_slave(p.broker_role.is_slave()),
        );
        Ok(Appending {
            writer,
            flusher: flushing.flusher,
            committer,
            pool,
            cl_files,
        })
    }

    fn start_allocator(
        &mut self,
        pool: Option<&Arc<TransientStorePool>>,
        warm: Warm,
        zero_files: bool,
    ) -> ActorRef<MappedFileAllocator> {
        let p = self.params;
        let mut alloc =
            MappedFileAllocator::new(p.commit_log_dir.clone(), p.commit_log_file_size, warm)
                .zeroed(zero_files);
        if let (Some(pool), true) = (pool, p.warm_mapped_files) {
            // What the writer touches with write buffers is the buffers, not the mappings.
            alloc = alloc.warming_pool(pool.clone());
        }
        self.spawn(alloc)
    }

    /// The group committer (SYNC_FLUSH) or the async flusher, owning the checkpoint.
    fn start_flusher(
        &mut self,
        checkpoint: Checkpoint,
        commit_mode: CommitMode,
        zero_files: bool,
        allocator: &ActorRef<MappedFileAllocator>,
        dispatch: &Dispatch,
        ha: &Arc<HaState>,
    ) -> Flushing {
        let p = self.params;
        let disk = flusher::DiskWatch::new(
            p.commit_log_dir.clone(),
            p.root.join("consumequeue"),
            p.disk_warning_pct,
            p.disk_clear_pct,
        );
        let mut flush_core =
            FlushCore::new(self.view.clone(), self.state.clone(), checkpoint, disk)
                .with_commit_mode(commit_mode);
        if commit_mode == CommitMode::CommitFirst && p.broker_role.is_master() {
            // The group committer commits right before each flush: new bytes for the slaves.
            flush_core = flush_core.waking_after_commit(ha.data_waker());
        }
        if p.sync_flush {
            let mut gc = GroupCommitter::new(flush_core, Some(dispatch.reput.clone()));
            if zero_files {
                gc = gc.zeroing_ahead(allocator.clone());
            }
            let gc = self.spawn(gc);
            return Flushing {
                flusher: FlushRef::Sync(gc.clone()),
                sync: Some((gc, p.sync_flush_timeout)),
                waker: None,
            };
        }
        let flush_woken = Arc::new(AtomicBool::new(false));
        let mut f = Flusher::new(
            flush_core,
            p.flush_interval,
            p.flush_least_pages,
            p.flush_thorough_interval,
        );
        if !p.flush_timed {
            f = f.woken_by_appends(flush_woken.clone());
        }
        let f = self.spawn(f);
        // Coalesced wakes (see `Waker`); each flag is shared by the target and its senders.
        let waker = (!p.flush_timed).then(|| Waker::new(f.clone(), flush_woken, || FlushWake));
        Flushing {
            flusher: FlushRef::Async(f),
            sync: None,
            waker,
        }
    }

    /// Write buffers (`transientStorePoolEnable`): the writer appends into `pool`; in
    /// ASYNC_FLUSH a committer copies them into the files. Returns the CommitLog with its
    /// buffers, what the writer wakes after an append, and the committer.
    fn use_write_buffers(
        &mut self,
        log: CommitLog,
        pool: &Arc<TransientStorePool>,
        commit_mode: CommitMode,
        flush_waker: Option<Waker>,
        dispatch: &Dispatch,
        ha: &Arc<HaState>,
    ) -> (CommitLog, Vec<Waker>, Option<ActorRef<Committer>>) {
        let mut after_append = Vec::new();
        let mut on_wait: Option<Box<dyn Fn() + Send>> = None;
        let mut committer = None;
        if commit_mode == CommitMode::ByCommitter {
            let commit_woken = Arc::new(AtomicBool::new(false));
            let after_commit: Vec<Waker> = std::iter::once(dispatch.reput_waker())
                .chain(flush_waker)
                .chain(std::iter::once(ha.data_waker()))
                .collect();
            let p = self.params;
            let c = self.spawn(Committer::new(
                self.view.clone(),
                self.state.clone(),
                p.commit_interval,
                p.commit_least_pages,
                p.commit_thorough_interval,
                commit_woken.clone(),
                after_commit,
            ));
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
        let log = log.with_write_buffers(WriteBuffers {
            pool: pool.clone(),
            fast_fail: self.params.fast_fail_no_buffer,
            wait: POOL_WAIT,
            on_wait,
        });
        (log, after_append, committer)
    }

    fn start_schedule(
        &mut self,
        reader: &StoreReader,
        writer: &ActorRef<CommitLogWriter>,
    ) -> std::io::Result<ActorRef<ScheduleDelivery>> {
        let sched = ScheduleDelivery::new(
            reader.clone(),
            writer.clone(),
            self.clock.clone(),
            self.state.clone(),
            self.params,
        )?;
        let arbiter = Arbiter::new();
        let schedule = start_with(&arbiter.handle(), move |_| sched);
        self.started.push(arbiter);
        Ok(schedule)
    }

    /// Retention; `None` when `StoreParams::retention` is.
    fn start_cleaner(
        &mut self,
        cl_files: FileQueueView,
        writer: &ActorRef<CommitLogWriter>,
        dispatch: &Dispatch,
    ) -> Option<ActorRef<StoreCleaner>> {
        let p = self.params;
        let retention = p.retention.clone()?;
        Some(self.spawn(StoreCleaner::new(
            retention,
            cl_files,
            writer.clone(),
            p.commit_log_dir.clone(),
            p.root.join("consumequeue"),
            self.state.clone(),
            self.clock.clone(),
            dispatch.cq_builder.clone(),
            dispatch.index_builder.clone(),
        )))
    }
}

/// Without write buffers the writer appends into write rings and commits them itself
/// (see `WRITE_RINGS`); only if rings cannot be had does it write through the mappings.
/// A slave writes through its mappings: a record split across two transfers has its first
/// part written but not yet readable, which a ring or buffer could not commit.
fn write_rings(params: &StoreParams) -> Option<Arc<TransientStorePool>> {
    if params.transient_store_pool_size > 0 || params.broker_role.is_slave() {
        return None;
    }
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
}

/// The TransientStorePool's write buffers, when `transientStorePoolEnable` is effective.
fn write_buffer_pool(params: &StoreParams) -> std::io::Result<Option<Arc<TransientStorePool>>> {
    if params.transient_store_pool_size == 0 {
        return Ok(None);
    }
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
    Ok(Some(pool))
}

/// Without write buffers: the writer commits its rings itself (if it has them) and wakes reput,
/// the flusher and the HA connections after each append. Returns the CommitLog with its rings
/// and those wakes.
fn use_write_rings(
    params: &StoreParams,
    mut log: CommitLog,
    rings: Option<&Arc<TransientStorePool>>,
    flush_waker: Option<Waker>,
    dispatch: &Dispatch,
    ha: &Arc<HaState>,
) -> (CommitLog, Vec<Waker>) {
    if let Some(rings) = rings {
        log = log.with_write_buffers(WriteBuffers {
            pool: rings.clone(),
            fast_fail: false,
            // No committer to wait for: without a free ring (only when one batch rolls
            // through several files) that file is written through its mapping.
            wait: Duration::ZERO,
            on_wait: None,
        });
    }
    let mut after_append = Vec::new();
    if !params.sync_flush {
        after_append.push(dispatch.reput_waker());
    }
    after_append.extend(flush_waker);
    // New bytes for the slaves (with write rings, woken after the inline commit).
    if params.broker_role.is_master() {
        after_append.push(ha.data_waker());
    }
    (log, after_append)
}

/// A fresh store: have the first file ready (allocated and warmed) before the first
/// append, instead of the writer creating it while producers wait. Not on a slave: its first
/// file is wherever its master's stream starts (the master's last file), which is not known
/// before it connects.
async fn prepare_first_file(
    params: &StoreParams,
    allocator: &ActorRef<MappedFileAllocator>,
    log: &mut CommitLog,
    warm: Warm,
) {
    if !log.files().is_empty() || !params.broker_role.is_master() {
        return;
    }
    let Ok(files) = allocator.send(AllocateNext { from: 0 }).await else {
        return;
    };
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
