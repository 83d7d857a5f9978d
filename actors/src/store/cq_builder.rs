//! `ConsumeQueueBuilder` — owns every ConsumeQueue file (RocketMQ's ConsumeQueue dispatch and
//! FlushConsumeQueueService).
//!
//! In: [`Dispatch`] `{from, to}` from the reput dispatcher: it walks those records itself through
//! the CommitLog view (no per-record allocation crosses the mailbox) and appends a 20-byte unit for
//! every non-transactional or committed record; a periodic flush tick; [`DeleteTopicQueues`] (a
//! deleted topic); `DeleteQueuesBelow` (retention, from the `StoreCleaner`: files whose units
//! all point below the CommitLog's first byte go, and the min offsets move — with
//! `deleteConsumeQueueFilesInterval` one queue that deleted per message, the cleaner pausing in
//! between, so dispatch goes on meanwhile); [`FlushConsumeQueues`] (clean stop, and recovery's progress checkpoints: it
//! replies with the store time of the newest unit the flush made durable). Out: the reply (done
//! or an error), and the units become visible to readers through the ConsumeQueue table.
//!
//! After each flush that moved a queue's on-disk end, and before a deleted topic's directory goes,
//! it rewrites the persisted queue table (`config/consumeQueueMaxOffsets.json`, see
//! `actormq_core::store::queue_table`) atomically, so that the next start can tell a queue that
//! lost ConsumeQueue files from one that is complete.
//!
//! The checkpoint's "logics" time (`StoreState::logics_ts`, written by the CommitLog flusher) is
//! published only after a flush that left every unit dispatched before it on disk: a flush with
//! `flushConsumeQueueLeastPages` that reached every queue's end, a thorough one (least pages 0,
//! every `flushConsumeQueueThoroughInterval`), or a [`FlushConsumeQueues`]; never after a flush
//! error. RocketMQ's rule too (it checkpoints the time read before a thorough flush). Published at
//! dispatch, as this builder did before, a power loss could take a quiet queue's last part-filled
//! page — the least-pages rule leaves it to write-back — while the checkpoint sent recovery's
//! start past its records, and their units were never rebuilt.
//!
//! New ConsumeQueue files cost two `fsync`s each (inode, then directory: `mapped_file`), so a
//! new topic's first messages over 1,000 queues held dispatch for 0.9–1.3 s on a journaled ext4
//! here, one file after another. A batch whose unit finds its file missing therefore stops there,
//! plans the files the rest of the batch needs, makes them on up to 8 threads at once
//! (`ConsumeQueueStore::prepare_files`; concurrent `fsync`s share journal commits: 0.24 s for the
//! same 1,000) and resumes.
//!
//! Invariants: units are appended in CommitLog order; replays of already indexed records are
//! ignored by the ConsumeQueue's own dedup rules; a deleted topic's records (below its tombstone
//! in the table) are never dispatched again; the persisted table never names more units than
//! were flushed (except that, until recovery's re-dispatch is done, each queue is held at least
//! at the table the start loaded, so a start killed mid-rebuild still sees the queue short), nor
//! a queue whose directory has been removed.

use std::time::Duration;

use actix::prelude::*;
use actormq_core::format::cq_unit::{CqUnit, CQ_UNIT_SIZE};
use actormq_core::format::record::sys_flag;
use actormq_core::offset::{PhyOffset, QueueOffset};
use actormq_core::store::commit_log::walk;
use actormq_core::store::consume_queue::{ConsumeQueueStore, RetentionPass};
use actormq_core::store::mapped_file_queue::FileQueueView;
use actormq_core::store::queue_table::QueueMaxTable;
use actormq_core::store::schedule::cq_tags_code;

use super::messages::{
    Arrival, DeleteQueuesBelow, DeleteTopicQueues, Dispatch, FlushConsumeQueues, QueuesDeleted,
    RecoveryDone,
};
use crate::metered::{Metered, Serve, Service};

pub struct ConsumeQueueBuilder {
    cqs: ConsumeQueueStore,
    commit_log: FileQueueView,
    delay_levels_ms: Vec<u64>,
    flush_interval: Duration,
    flush_least_pages: u64,
    /// `flushConsumeQueueThoroughInterval`: a timed flush after this long flushes every page.
    thorough_interval: Duration,
    last_thorough: std::time::Instant,
    on_arrival: Option<ArrivalHook>,
    state: Option<std::sync::Arc<super::state::StoreState>>,
    /// Where the persisted queue table lives (`None`: not kept, e.g. in unit tests of dispatch).
    table_path: Option<std::path::PathBuf>,
    /// What the table file holds now, so an unchanged table is not rewritten.
    written: QueueMaxTable,
    /// Store time of the newest unit dispatched (units go in CommitLog order).
    dispatched_ts: i64,
    /// The CommitLog end of the last batch dispatched whole: every record below it has its unit.
    dispatched_to: u64,
    /// While recovery rebuilds queues: the persisted table it started from. A table written
    /// meanwhile keeps each queue at least there, so a start killed mid-rebuild still sees which
    /// queues are short. Lifted by [`RecoveryDone`].
    floor: Option<QueueMaxTable>,
    /// The first ConsumeQueue data flush error, reported by every later [`FlushConsumeQueues`].
    data_error: Option<String>,
    /// The retention pass under way (`DeleteQueuesBelow` in steps).
    retention: Option<RetentionPass>,
}

/// Told, after each dispatched batch, which queues got new messages and their new max offsets
/// (the broker wakes parked long-poll pulls with it).
pub type ArrivalHook = std::sync::Arc<dyn Fn(Vec<Arrival>) + Send + Sync>;

impl ConsumeQueueBuilder {
    /// Publishes the store time of the newest unit known flushed (the checkpoint's "logics").
    pub fn with_state(mut self, state: std::sync::Arc<super::state::StoreState>) -> Self {
        self.state = Some(state);
        self
    }

    /// Keeps the persisted queue table at `path`; `written` is what the file holds now.
    pub fn with_queue_table(mut self, path: std::path::PathBuf, written: QueueMaxTable) -> Self {
        self.table_path = Some(path);
        self.written = written;
        self
    }

    /// `flushConsumeQueueThoroughInterval` (default 60 s, as RocketMQ).
    pub fn with_thorough_interval(mut self, every: Duration) -> Self {
        self.thorough_interval = every;
        self
    }

    /// Flushes every ConsumeQueue, then records what is on disk in the queue table if that
    /// changed. The table is written only after the flush it describes, so it stays a lower
    /// bound of the files' content even across a power loss. If the flush left every dispatched
    /// unit on disk, the checkpoint may count them: their newest store time is published.
    fn flush(&mut self, least_pages: u64) -> std::io::Result<()> {
        let covered = (self.dispatched_ts, self.dispatched_to);
        if self.flush_with(least_pages, false)? {
            self.publish_logics(covered);
        }
        Ok(())
    }

    /// The timer's flush: with `flushConsumeQueueLeastPages`, or of every page once
    /// `flushConsumeQueueThoroughInterval` has passed since the last such.
    fn timed_flush(&mut self) -> std::io::Result<()> {
        let thorough = self.last_thorough.elapsed() >= self.thorough_interval;
        let least_pages = if thorough { 0 } else { self.flush_least_pages };
        self.flush(least_pages)?;
        if thorough {
            self.last_thorough = std::time::Instant::now();
        }
        Ok(())
    }

    /// Makes `ts` (the store time of units now on disk) the checkpoint's logics time, and `to`
    /// (the CommitLog offset every unit on disk comes from) `StoreState::cq_durable` — unless a
    /// flush failed earlier: Linux reports a write-back error once, so a later flush "succeeds"
    /// over pages that never reached the disk. The time is a plain store, not a maximum: after
    /// the clock steps back, a maximum would keep a future time the later units never reach.
    fn publish_logics(&self, (ts, to): (i64, u64)) {
        let Some(st) = self.state.as_ref().filter(|_| self.data_error.is_none()) else {
            return;
        };
        if ts > 0 {
            st.logics_ts.store(ts, std::sync::atomic::Ordering::Release);
        }
        st.cq_durable
            .fetch_max(to, std::sync::atomic::Ordering::AcqRel);
    }

    /// [`Self::flush`], with every file also `fdatasync`ed first when `sync_all`. A data error
    /// is returned and remembered: Linux reports a write-back error once, so whoever asks next
    /// ([`FlushConsumeQueues`]) must hear it too, even if the timer's flush met it first. A failed
    /// table write is only logged: the table on disk is older, still a lower bound. Returns
    /// whether every queue is on disk to its end now.
    fn flush_with(&mut self, least_pages: u64, sync_all: bool) -> std::io::Result<bool> {
        // A write-back error, for the test that retention goes on after one.
        let injected = (|| {
            fail::fail_point!("consume-queue-flush", |_| Some(std::io::Error::other(
                "injected ConsumeQueue write-back error"
            )));
            None
        })();
        let flushed = match injected {
            Some(e) => Err(e),
            None => self.cqs.flush(least_pages),
        };
        let data = flushed.and_then(|t| {
            if sync_all {
                self.cqs.sync_all()?;
            }
            Ok(t)
        });
        let complete = data.as_ref().is_ok_and(|t| {
            self.cqs
                .queues()
                .all(|q| t.get(&q.view().topic, q.view().queue_id) >= Some(q.view().max_offset().0))
        });
        let mut on_disk = match data {
            Ok(t) => t.with_tombstones_of(&self.written),
            Err(e) => {
                self.data_error.get_or_insert_with(|| e.to_string());
                return Err(e);
            }
        };
        if let Some(floor) = &self.floor {
            on_disk = on_disk.raised_to(floor);
        }
        if let Err(e) = self.write_table(on_disk) {
            tracing::error!(error = %e, "writing the ConsumeQueue table failed; the older one stays");
        }
        Ok(complete)
    }

    /// Holds the persisted table at least at `floor` until [`RecoveryDone`] (queues being
    /// rebuilt).
    pub fn with_table_floor(mut self, floor: QueueMaxTable) -> Self {
        self.floor = Some(floor);
        self
    }

    /// Makes `table` the current one: written to the file (if kept and changed), and its
    /// tombstones in force for dispatch.
    fn write_table(&mut self, table: QueueMaxTable) -> std::io::Result<()> {
        if table == self.written {
            return Ok(());
        }
        if let Some(path) = &self.table_path {
            crate::fsutil::write_atomically(path, &table.encode())?;
        }
        self.written = table;
        Ok(())
    }

    pub fn with_arrival_hook(mut self, hook: Option<ArrivalHook>) -> Self {
        self.on_arrival = hook;
        self
    }

    pub fn new(
        cqs: ConsumeQueueStore,
        commit_log: FileQueueView,
        delay_levels_ms: Vec<u64>,
        flush_interval: Duration,
        flush_least_pages: u64,
    ) -> Self {
        ConsumeQueueBuilder {
            cqs,
            commit_log,
            delay_levels_ms,
            flush_interval,
            flush_least_pages,
            thorough_interval: Duration::from_secs(60),
            last_thorough: std::time::Instant::now(),
            on_arrival: None,
            state: None,
            table_path: None,
            written: QueueMaxTable::default(),
            dispatched_ts: 0,
            dispatched_to: 0,
            floor: None,
            data_error: None,
            retention: None,
        }
    }
}

impl Service for ConsumeQueueBuilder {
    const NAME: &'static str = "consume_queue_builder";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(self.flush_interval, |act, _| {
            if let Err(e) = act.inner.timed_flush() {
                tracing::error!(error = %e, "ConsumeQueue flush failed");
            }
        });
    }

    fn stopped(&mut self, _: &mut Context<Metered<Self>>) {
        if let Err(e) = self.flush(0) {
            tracing::error!(error = %e, "ConsumeQueue flush at stop failed");
        }
    }
}

impl Serve<Dispatch> for ConsumeQueueBuilder {
    type Reply = Result<(), String>;
    fn serve(&mut self, d: Dispatch, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let mut err = None;
        let cqs = &mut self.cqs;
        let table = &self.written;
        let levels = &self.delay_levels_ms;
        let track = self.on_arrival.is_some();
        let mut last_ts = 0i64;
        let mut touched: std::collections::HashMap<String, Vec<i32>> =
            std::collections::HashMap::new();
        // A unit whose file is not made yet stops the walk; the files the rest of the batch
        // needs are then made together (see `prepare_files`) and the walk resumes there, that
        // first unit allowed to make its file itself, so every pass moves on.
        let mut from = d.from;
        let mut resumed_at = None;
        loop {
            let mut missing_at = None;
            walk(&self.commit_log, from, d.to, |phy, r| {
                let Some(unit) = unit_of(phy, r, table, levels) else {
                    return true;
                };
                last_ts = r.store_timestamp;
                let (topic, queue, offset) =
                    (r.topic, r.queue_id, QueueOffset(r.queue_offset as u64));
                let put = if resumed_at == Some(phy) {
                    cqs.put(topic, queue, offset, unit).map(|()| true)
                } else {
                    cqs.put_if_file_ready(topic, queue, offset, unit)
                };
                match put {
                    Ok(true) => {
                        if track {
                            match touched.get_mut(topic) {
                                Some(q) if q.contains(&queue) => {}
                                Some(q) => q.push(queue),
                                None => {
                                    touched.insert(topic.to_string(), vec![queue]);
                                }
                            }
                        }
                        true
                    }
                    Ok(false) => {
                        missing_at = Some(phy);
                        false
                    }
                    Err(e) => {
                        err = Some(format!("ConsumeQueue {topic}/{queue}: {e}"));
                        false
                    }
                }
            })
            .map_err(|e| e.to_string())?;
            let Some(at) = missing_at else { break };
            // Planning only reads ahead: a record it cannot read, or a queue it cannot open, ends
            // the plan, and the put walk meets and reports it where it did before.
            let _ = walk(&self.commit_log, PhyOffset(at), d.to, |phy, r| {
                let Some(unit) = unit_of(phy, r, table, levels) else {
                    return true;
                };
                let offset = QueueOffset(r.queue_offset as u64);
                cqs.plan_file(r.topic, r.queue_id, offset, &unit).is_ok()
            });
            let made = cqs.prepare_files();
            tracing::debug!(
                made,
                at,
                "ConsumeQueue files made ahead of a dispatched batch"
            );
            from = PhyOffset(at);
            resumed_at = Some(at);
        }
        if last_ts > 0 {
            // Published as the checkpoint's logics time only once flushed (see the module docs).
            self.dispatched_ts = last_ts;
        }
        if err.is_none() {
            self.dispatched_to = self.dispatched_to.max(d.to.0);
        }
        if let (Some(hook), false) = (&self.on_arrival, touched.is_empty()) {
            let table = self.cqs.table();
            let arrivals = touched
                .into_iter()
                .flat_map(|(topic, qids)| {
                    let table = &table;
                    qids.into_iter().map(move |q| Arrival {
                        max_offset: table.get(&topic, q).map(|v| v.max_offset().0).unwrap_or(0),
                        topic: topic.clone(),
                        queue_id: q,
                    })
                })
                .collect();
            hook(arrivals);
        }
        err.map_or(Ok(()), Err)
    }
}

/// The ConsumeQueue unit of record `r` at `phy`, if it gets one: not for a prepared or rolled
/// back transactional message, nor for a deleted topic's old record (a re-dispatch after a
/// restart: it stays gone).
/// The largest queue offset whose unit's byte position (`offset * 20`) is a Java long.
const MAX_QUEUE_OFFSET: i64 = i64::MAX / CQ_UNIT_SIZE as i64;

fn unit_of(
    phy: u64,
    r: &actormq_core::format::record::RecordView<'_>,
    table: &QueueMaxTable,
    levels: &[u64],
) -> Option<CqUnit> {
    let t = r.sys_flag & sys_flag::TRANSACTION_TYPE_MASK;
    if t != sys_flag::TRANSACTION_NOT_TYPE && t != sys_flag::TRANSACTION_COMMIT_TYPE {
        return None;
    }
    if table.is_dead(r.topic, phy) {
        return None;
    }
    // QUEUEOFFSET lies outside the body CRC: damaged on disk to a negative value, or to one whose
    // unit position overflows, it names no queue position at all. Such a record is not
    // dispatched (a damaged record is never served), and the log says which one.
    if !(0..=MAX_QUEUE_OFFSET).contains(&r.queue_offset) {
        tracing::error!(
            phy_offset = phy,
            topic = r.topic,
            queue = r.queue_id,
            queue_offset = r.queue_offset,
            "CommitLog record with an impossible QUEUEOFFSET (damaged?) not dispatched"
        );
        return None;
    }
    Some(CqUnit {
        phy_offset: phy as i64,
        size: r.total_size as i32,
        tags_code: cq_tags_code(r, levels),
    })
}

impl Serve<DeleteTopicQueues> for ConsumeQueueBuilder {
    type Reply = std::io::Result<usize>;
    fn serve(&mut self, m: DeleteTopicQueues, _: &mut Context<Metered<Self>>) -> Self::Reply {
        // The entries go (and the tombstone comes) first: a crash between the two steps must not
        // leave a table naming queues whose directory is gone, which the next start would
        // rebuild (resurrect).
        let mut table = self.written.clone();
        table.delete_topic(&m.topic, m.before.0);
        self.write_table(table)?;
        self.cqs.delete_topic(&m.topic)
    }
}

impl Serve<DeleteQueuesBelow> for ConsumeQueueBuilder {
    type Reply = std::io::Result<QueuesDeleted>;
    fn serve(&mut self, m: DeleteQueuesBelow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        // Only the front of each queue goes; the persisted table holds the queues' ends, which
        // do not move. A pass for another (higher) min replaces one left unfinished: it covers
        // every queue again.
        let mut pass = match self.retention.take() {
            Some(p) if p.min_phy() == m.min_phy => p,
            _ => self.cqs.retention_pass(m.min_phy),
        };
        let files = self.cqs.delete_below_step(&mut pass, m.stepwise);
        if !pass.is_done() {
            self.retention = Some(pass);
            return Ok(QueuesDeleted { files, done: false });
        }
        pass.finish()?;
        Ok(QueuesDeleted { files, done: true })
    }
}

impl Serve<FlushConsumeQueues> for ConsumeQueueBuilder {
    type Reply = std::io::Result<i64>;
    fn serve(&mut self, m: FlushConsumeQueues, _: &mut Context<Metered<Self>>) -> Self::Reply {
        // Every unit dispatched so far is in the mappings: the flush covers all of them.
        let covered = (self.dispatched_ts, self.dispatched_to);
        self.flush_with(0, m.sync_all)?;
        self.publish_logics(covered);
        if let Some(e) = &self.data_error {
            return Err(std::io::Error::other(format!(
                "an earlier ConsumeQueue flush failed: {e}"
            )));
        }
        Ok(covered.0)
    }
}

impl Serve<RecoveryDone> for ConsumeQueueBuilder {
    type Reply = ();
    fn serve(&mut self, _: RecoveryDone, _: &mut Context<Metered<Self>>) {
        self.floor = None;
        let repaired = self.cqs.set_repairing(false);
        if repaired > 0 {
            tracing::warn!(
                repaired,
                "ConsumeQueue units that differed from their CommitLog records were written \
                 again: torn by the abnormal stop, or, on the schedule topic, made under other \
                 delay levels (messageDelayLevel)"
            );
        }
        // The table names what is on disk again now, not at the next tick: a start killed in
        // between would rebuild queues that are not short.
        if let Err(e) = self.flush(0) {
            tracing::error!(error = %e, "ConsumeQueue flush after recovery failed");
        }
    }
}
