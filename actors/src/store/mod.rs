//! The store runtime: opens and recovers the on-disk store, starts its actors in dependency order
//! and offers the broker one handle, [`Store`], to append and to read.
//!
//! Threads: the CommitLog writer, the allocator, the flusher, the committer (write buffers in
//! ASYNC_FLUSH), the ConsumeQueue builder, the index builder, the reput dispatcher and the
//! schedule service each run on their own arbiter, so a blocking call (file creation, pwrite,
//! msync) in one never stalls another.
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
//! (`crate::store::ha`) when new bytes are readable, and SYNC_MASTER's `put*` wait for a slave's ack
//! (`slaveTimeout`). A slave's writer takes only its master's bytes (`append_replicated`): no
//! write rings or buffers, no file made ahead before the first transfer, no delayed delivery,
//! SYNC_FLUSH run as a 10 ms background flush.
//!
//! Start order ([`Store::open_with`]: `recover`, then `system`): load and recover ConsumeQueues →
//! recover the CommitLog (cut a torn tail), noting every record a ConsumeQueue lacks → cut
//! ConsumeQueue units beyond it → plan re-dispatch: from the ConsumeQueues' max physical offset,
//! lowered to the first record they lack and to the end of any queue shorter than the persisted
//! queue table says or with a hole (`queue_table`) → start builders and reput, wait until
//! dispatch has caught up (`catch_up`; after an abnormal stop, checkpointing the progress at each
//! CommitLog file boundary and at the end: `RecoveryProgress`) → seed the writer's queue-offset
//! table from ConsumeQueue max offsets → start the allocator, the flusher, the committer, the
//! writer, the schedule service and the cleaner.
//! Stop order is the reverse (`shutdown`): refuse appends, commit everything written (write
//! buffers), wait for dispatch, persist the builders, and end with a final flush of every file.
//!
//! Files: `params.rs` (the settings), `recover.rs` (files back to a consistent state, as a
//! plain `Recovered` value), `catch_up.rs` (dispatch catching up, progress checkpoints),
//! `system.rs` (actors started in order, the `Started` guard), `shutdown.rs` (the clean stop),
//! `parallel_io.rs` (the threads that overlap a batch of ConsumeQueue file syncs), [`messages`]
//! (every message of the store's actors and the data their replies carry, by the actor that
//! handles it — the store's protocol in one file; it uses no other module here; [`ha`] keeps its
//! own); one file per actor besides, which keeps its handlers and imports its messages.

pub mod allocator;
mod catch_up;
pub mod cleaner;
pub mod coalesce;
pub mod committer;
pub mod cq_builder;
pub mod flusher;
pub mod ha;
pub mod index_builder;
pub mod messages;
mod parallel_io;
mod params;
mod recover;
pub mod reput;
pub mod schedule;
mod shutdown;
pub mod state;
mod system;
pub mod writer;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::config::BrokerRole;
use actormq_core::format::record::NewMessage;
use actormq_core::offset::PhyOffset;
use actormq_core::store::commit_log::AppendOk;
use actormq_core::store::index_file::IndexReader;
use actormq_core::store::reader::StoreReader;
use actormq_core::store::schedule::{rewrite_for_delay, DelayOffsets};
use actormq_core::store::status::{PutError, PutStatus};
use actormq_core::store::transient_pool::TransientStorePool;

use crate::metered::ActorRef;
use committer::Committer;
use cq_builder::ConsumeQueueBuilder;
use index_builder::IndexBuilder;
use messages::{
    AppendBatch, AppendMessage, AppendProducerBatch, AppendReplicated, CleanNow, CleanReport,
    CommitNow, DeleteQueuesBelow, DeleteTopicQueues, GetDelayOffsets, GetWriterState, RemoveTopic,
    SetDelayOffsets, TriggerDeleteFiles,
};
use schedule::ScheduleDelivery;
use state::StoreState;
use system::FlushRef;

pub use params::StoreParams;
use writer::CommitLogWriter;

/// An append's status after its replication outcome: a replica status that is not PUT_OK
/// overrides the flush status, as RocketMQ merges them.
fn merged(status: PutStatus, replica: PutStatus) -> PutStatus {
    if replica == PutStatus::PutOk {
        status
    } else {
        replica
    }
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
    ha: Arc<crate::store::ha::HaState>,
    /// The "ha" thread (`HaMaster` runs there; the broker puts the HA connections or the
    /// slave there too). Stopped with the store's other threads at shutdown.
    ha_arbiter: actix::ArbiterHandle,
    /// The "dispatch" thread (reput and the ConsumeQueue and index builders; the broker puts
    /// the pull hold there, next to the arrivals it waits for).
    dispatch_arbiter: actix::ArbiterHandle,
    /// Taken (emptied) by `shutdown`. A mutex only so that `Store` is `Sync` (connection threads
    /// share it); it is touched once, at shutdown.
    arbiters: std::sync::Mutex<Vec<Arbiter>>,
    pub report: OpenReport,
}

impl Store {
    /// Opens (recovering if needed) the store under `params.root` and starts its actors.
    pub async fn open(params: StoreParams, clock: SharedClock) -> std::io::Result<Store> {
        Store::open_with(params, clock, None, PreviousRun::Clean).await
    }

    /// Like [`Store::open`], telling `on_arrival` which queues got new messages after each
    /// dispatched batch (the broker's long polling). `previous` says how the last run ended.
    ///
    /// Two steps: recover the files to a consistent state (`recover`), then start the actors
    /// over them in dependency order, waiting for dispatch to catch up (`system`).
    pub async fn open_with(
        params: StoreParams,
        clock: SharedClock,
        on_arrival: Option<cq_builder::ArrivalHook>,
        previous: impl Into<PreviousRun>,
    ) -> std::io::Result<Store> {
        let opened = std::time::Instant::now();
        let recovered = recover::recover(&params, previous.into())?;
        system::start(params, clock, on_arrival, recovered, opened).await
    }

    pub fn params(&self) -> &StoreParams {
        &self.params
    }
    /// One retention round now; an error when retention is off.
    pub async fn clean_now(&self) -> std::io::Result<CleanReport> {
        let c = self
            .cleaner
            .as_ref()
            .ok_or_else(|| std::io::Error::other("retention is off"))?;
        c.send(CleanNow).await.map_err(std::io::Error::other)?
    }
    /// mqadmin `deleteExpiredCommitLog`: the next 20 retention rounds delete expired files at
    /// any hour. False when retention is off.
    pub fn trigger_delete_files(&self) -> bool {
        let Some(c) = &self.cleaner else {
            return false;
        };
        c.notify(TriggerDeleteFiles);
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
            .send(DeleteQueuesBelow {
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

    /// The producer path: the delay rewrite, then the writer. The SEND-level topic rules
    /// (`validate::check_send_topic`) are the caller's, checked once where a request arrives (the
    /// broker's `send_refused`, before a topic is auto-created); the writer still refuses what the
    /// record format cannot hold.
    pub async fn put(&self, mut msg: NewMessage) -> Result<AppendOk, PutError> {
        rewrite_for_delay(&mut msg, self.params.delay_levels_ms.len());
        let waits = self.params.broker_role == BrokerRole::SyncMaster && writer::waits(&msg);
        let mut ok = writer::append(&self.writer, AppendMessage(msg))
            .await
            .map_err(unavailable)??;
        if waits {
            let replica = self.replicated(ok.end_offset().0).await;
            ok.status = merged(ok.status, replica);
        }
        Ok(ok)
    }

    /// SYNC_MASTER: whether a slave holds the bytes up to `end` (see
    /// [`crate::store::ha::HaState::wait_replicated`]); [`merged`] into the appends' status.
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
    pub fn ha(&self) -> &Arc<crate::store::ha::HaState> {
        &self.ha
    }

    /// Replication's thread, where the HA connections or the slave belong (see the field).
    pub fn ha_arbiter(&self) -> &actix::ArbiterHandle {
        &self.ha_arbiter
    }

    /// Dispatch's thread, where whatever reacts to each dispatched batch belongs (see the field).
    pub fn dispatch_arbiter(&self) -> &actix::ArbiterHandle {
        &self.dispatch_arbiter
    }

    /// A slave: writes CommitLog bytes its master sent at `start` (see
    /// [`AppendReplicated`]); the remark says why not.
    pub async fn append_replicated(
        &self,
        start: u64,
        data: bytes::Bytes,
    ) -> Result<actormq_core::store::commit_log::ReplicatedOk, String> {
        self.writer
            .send(AppendReplicated { start, data })
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

    /// Many independent producer messages in one writer mailbox message (`AppendBatch`),
    /// answered together: in SYNC_FLUSH after the flush if any waits, the flush's outcome going
    /// to those that wait (`wait_store_msg_ok`); in SYNC_MASTER after a slave's ack, likewise.
    /// A `WAIT=false` message is answered at once only in a batch of its own kind: the batching
    /// layer (`coalesce::send_chunks`, used by the broker's and the bench's batchers) splits a
    /// turn that way — the one place that does.
    pub async fn put_many(&self, msgs: Vec<NewMessage>) -> Vec<Result<AppendOk, PutError>> {
        let n = msgs.len();
        let wait_flags: Vec<bool> = if self.params.broker_role == BrokerRole::SyncMaster {
            msgs.iter().map(writer::waits).collect()
        } else {
            Vec::new()
        };
        let levels = self.params.delay_levels_ms.len();
        let msgs: Vec<NewMessage> = msgs
            .into_iter()
            .map(|mut m| {
                rewrite_for_delay(&mut m, levels);
                m
            })
            .collect();
        let mut out = match writer::append(&self.writer, AppendBatch(msgs)).await {
            Ok(r) => r,
            Err(e) => return (0..n).map(|_| Err(unavailable(e))).collect(),
        };
        // The writer answers every message; a short answer would be its bug, never a lost reply.
        out.resize_with(n, || {
            Err(PutError::new(PutStatus::UnknownError, "missing reply"))
        });
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
        let (mut ok, offsets) = writer::append(&self.writer, AppendProducerBatch(msgs))
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
            .send(RemoveTopic(topic.to_string()))
            .await
            .map_err(io)?;
        if !self.wait_dispatched(end, Duration::from_secs(10)).await {
            return Err(std::io::Error::other(format!(
                "dispatch did not reach {} within 10 s; topic {topic} not deleted from the store",
                end.0
            )));
        }
        self.cq_builder
            .send(DeleteTopicQueues {
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

    /// A slave: takes the master's delayed-delivery progress (see [`SetDelayOffsets`]).
    pub async fn set_delay_offsets(&self, offsets: DelayOffsets) -> std::io::Result<()> {
        self.schedule
            .send(SetDelayOffsets(offsets))
            .await
            .map_err(std::io::Error::other)?
    }
}

fn unavailable(e: MailboxError) -> PutError {
    PutError::new(
        PutStatus::ServiceNotAvailable,
        format!("the CommitLog writer is not running: {e}"),
    )
}
