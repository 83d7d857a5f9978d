//! Every message of the store's actors, in one place: the store's protocol, grouped by the actor
//! that handles it, each with who sends it and what its reply means. The actors' files
//! (`writer.rs`, `allocator.rs`, `committer.rs`, `flusher.rs`, `reput.rs`, `cq_builder.rs`,
//! `index_builder.rs`, `cleaner.rs`, `schedule.rs`) keep the handlers; the HA actors' messages
//! are in `ha/messages.rs`.
//!
//! To [`super::writer::CommitLogWriter`]: [`AppendMessage`], [`AppendBatch`],
//! [`AppendProducerBatch`] (the [`super::Store`] append API; `AppendBatch` also from
//! [`super::schedule::ScheduleDelivery`]), [`AppendReplicated`] (a slave's `HaSlave`, through
//! `Store::append_replicated`), [`GetWriterState`] (`shutdown.rs`, `Store::replica_end`),
//! [`RemoveTopic`] (`Store::delete_topic`), [`DeleteFiles`] (the cleaner), [`EndOfBurst`] (itself).
//! To [`super::allocator::MappedFileAllocator`]: [`AllocateNext`] (the writer, and `system.rs`
//! for a fresh store's first file), [`Take`] (the writer's thread at a roll), [`ZeroStep`] (the
//! group committer), [`ZeroWrite`] (itself).
//! To [`super::committer::Committer`]: [`CommitWake`] (the writer's `Waker`), [`CommitNow`]
//! (`Store::commit_now`), [`FinalCommit`] (`shutdown.rs`).
//! To [`super::flusher::Flusher`] and [`super::flusher::GroupCommitter`]: [`FlushNow`]
//! (`shutdown.rs`); to the `Flusher`: [`FlushWake`] (the writer's or committer's `Waker`); to the
//! `GroupCommitter`: [`FlushWaits`] (the writer), [`RunGroupCommit`] (itself).
//! To [`super::reput::ReputDispatcher`]: [`Wake`] (the writer's, committer's or group
//! committer's `Waker`).
//! To [`super::cq_builder::ConsumeQueueBuilder`] and [`super::index_builder::IndexBuilder`]:
//! [`Dispatch`] (the reput dispatcher). To the `ConsumeQueueBuilder`: [`FlushConsumeQueues`]
//! (`shutdown.rs`, `catch_up.rs`, the cleaner), [`RecoveryDone`] (`catch_up.rs`),
//! [`DeleteTopicQueues`] (`Store::delete_topic`), [`DeleteQueuesBelow`] (the cleaner,
//! `Store::clean_expired_consume_queues`). To the `IndexBuilder`: [`FlushIndex`] (`shutdown.rs`,
//! `catch_up.rs`), [`DeleteBelow`] (the cleaner).
//! To [`super::cleaner::StoreCleaner`]: [`CleanNow`] (`Store::clean_now`), [`TriggerDeleteFiles`]
//! (`Store::trigger_delete_files`), [`StopCleaning`] (`shutdown.rs`).
//! To [`super::schedule::ScheduleDelivery`]: [`GetDelayOffsets`] (`Store::delay_offsets`),
//! [`SetDelayOffsets`] (`Store::set_delay_offsets`), [`PersistDelayOffsets`] (`shutdown.rs`).
//!
//! The data the replies carry ([`Appended`], [`WriterState`], [`FlushUpTo`], [`FlushOutcome`],
//! [`QueuesDeleted`], [`CleanReport`]) and what the ConsumeQueue builder tells the broker
//! ([`Arrival`]) are here too, so that this file uses no other store module and every actor file
//! only imports it. How an [`Appended`] reply is settled (`Appended::settled`, [`Settle`]) stays
//! with the writer.
//!
//! [`Settle`]: super::writer::Settle

use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use actix::prelude::*;
use actormq_core::format::record::NewMessage;
use actormq_core::offset::PhyOffset;
use actormq_core::store::commit_log::{AppendOk, ReplicatedOk};
use actormq_core::store::mapped_file::MappedFile;
use actormq_core::store::schedule::DelayOffsets;
use actormq_core::store::status::PutError;

// ---------------------------------------------------------------------------------------------
// To CommitLogWriter (writer.rs)

/// The writer's reply to an append: ready now, or — in SYNC_FLUSH, for an append that waits —
/// its value and the flush it waits for. The caller settles it ([`super::writer::append`]): the
/// group committer sends the flush's outcome straight to it on a channel of its own (the answer
/// does not come back through the writer's thread, and the writer keeps nothing per waiting
/// append), and the caller's own timer gives FLUSH_DISK_TIMEOUT if `syncFlushTimeout` passes
/// first — as RocketMQ's producer-side `flushOkFuture.get(syncFlushTimeout)` does. So a group
/// committer blocked in `fdatasync` on a stalled disk cannot hold an answer, and each side owns
/// what it answers: no state is shared between the two threads.
pub enum Appended<T> {
    Now(T),
    /// The append's [`FlushUpTo`] is in the writer's burst (`writer.rs`' `Burst`); `flushed`
    /// gets the flush's outcome, `deadline` is when FLUSH_DISK_TIMEOUT is due. `waits`: which
    /// of a batch's messages wait, when not all do (empty: all) — the outcome is theirs only.
    AfterFlush {
        value: T,
        flushed: tokio::sync::oneshot::Receiver<FlushOutcome>,
        deadline: tokio::time::Instant,
        waits: Vec<bool>,
    },
}

impl<A, M, T> actix::dev::MessageResponse<A, M> for Appended<T>
where
    A: Actor,
    M: Message<Result = Appended<T>>,
    T: Send + 'static,
{
    fn handle(self, _: &mut A::Context, tx: Option<actix::dev::OneshotSender<Self>>) {
        if let Some(tx) = tx {
            let _ = tx.send(self);
        }
    }
}

/// One producer message (`Store::put`: a SEND, a retry or DLQ message; the broker's `pull.rs`
/// for an OffsetMovedEvent, straight to the writer). Reply: its offsets, or why it was refused;
/// in SYNC_FLUSH, when it waits, settled once flushed (see [`Appended`]).
pub struct AppendMessage(pub NewMessage);
impl Message for AppendMessage {
    type Result = Appended<Result<AppendOk, PutError>>;
}

/// Many independent messages appended in order in one mailbox message (`Store::put_many`: a
/// connection thread's SENDs of one turn, `coalesce.rs`' batcher; the schedule service's due
/// deliveries). In SYNC_FLUSH its reply is sent once: after the flush if any of them waits;
/// that flush's outcome applies to those that wait. A `WAIT=false` message in a batch with
/// waiting ones is answered with them (the batching layer, `coalesce::send_chunks`, keeps them
/// apart so that it is answered at once). Reply: one result per message, in order.
pub struct AppendBatch(pub Vec<NewMessage>);
impl Message for AppendBatch {
    type Result = Appended<Vec<Result<AppendOk, PutError>>>;
}

/// A producer's batch (SEND_BATCH_MESSAGE, `Store::put_producer_batch`): one topic and queue,
/// consecutive queue offsets, one file. The reply carries each record's physical offset.
pub struct AppendProducerBatch(pub Vec<NewMessage>);
impl Message for AppendProducerBatch {
    type Result = Appended<Result<(AppendOk, Vec<PhyOffset>), PutError>>;
}

/// The writer's position, the reply to [`GetWriterState`].
#[derive(Clone, Debug)]
pub struct WriterState {
    pub max_offset: PhyOffset,
}

/// Where the CommitLog ends (`shutdown.rs`, once appends are refused; `Store::replica_end`, the
/// offset a slave reports to its master). The writer first ends its burst, so whoever asks finds
/// every append before it committed.
pub struct GetWriterState;
impl Message for GetWriterState {
    type Result = WriterState;
}

/// Ends the writer's burst (SYNC_FLUSH: commits what it held back and hands the burst's waits
/// to the group committer as one [`FlushWaits`]); the writer sends it to itself after the
/// burst's first waiting append, queued behind the appends already in its mailbox.
pub struct EndOfBurst;
impl Message for EndOfBurst {
    type Result = ();
}

/// A slave: CommitLog bytes its master sent (one HA transfer), to be written at `start`, the
/// same offset as on the master (from `HaSlave`, through `Store::append_replicated`). See
/// `CommitLog::append_replicated`. Reply: what was written, or why not (a master's writer
/// refuses them).
pub struct AppendReplicated {
    pub start: u64,
    pub data: bytes::Bytes,
}
impl Message for AppendReplicated {
    type Result = Result<ReplicatedOk, PutError>;
}

/// Retention, from the `StoreCleaner`: delete these CommitLog files (the oldest, front first;
/// never the last), from disk and then from the file list, which the writer owns. Replies with
/// how many went; stops at the first that cannot be unlinked (see
/// `FileQueueRetention::delete_files` in the core). Only the directory entry goes on the
/// writer's thread (an `unlink`, microseconds); the blocks are freed when the last mapping of
/// the file drops — the cleaner, which holds the files it sent, or a reader still holding one.
pub struct DeleteFiles(pub Vec<Arc<MappedFile>>);
impl Message for DeleteFiles {
    type Result = std::io::Result<usize>;
}

/// Forget a deleted topic's queue offsets (`Store::delete_topic`); replies with the CommitLog
/// end at that moment (every record of the old topic lies before it).
pub struct RemoveTopic(pub String);
impl Message for RemoveTopic {
    type Result = PhyOffset;
}

// ---------------------------------------------------------------------------------------------
// To MappedFileAllocator (allocator.rs)

/// Prepare the CommitLog file at `from` (the writer, as it starts writing the file before it;
/// `system.rs` for a fresh store's first file). Reply: the file, ready for the writer; empty
/// when it could not be made, when the writer has already taken or made it, or while it is
/// being zeroed (the writer takes it with [`Take`]).
pub struct AllocateNext {
    pub from: u64,
}
impl Message for AllocateNext {
    type Result = Vec<Arc<MappedFile>>;
}

/// The writer rolls into the file at `from` (sent by `allocator::take_prepared`, the
/// `CommitLog`'s hook, which blocks the writer's thread for the answer): `reply` gets the file,
/// if the allocator holds it, with its zeroing ended; `None` otherwise (the writer creates it).
pub struct Take {
    pub from: u64,
    pub reply: SyncSender<Option<Arc<MappedFile>>>,
}
impl Message for Take {
    type Result = ();
}

/// One zeroing write of the file held; the allocator sends it to itself (see `allocator.rs`).
pub struct ZeroWrite;
impl Message for ZeroWrite {
    type Result = ();
}

/// From the group committer: its `fdatasync` ended, having flushed this many bytes; zero twice
/// as many ahead (at least `allocator::GROUP_STEP`, at most `allocator::MAX_GROUP_STEP`), so
/// zeroing outpaces the writer and the next file is whole before it is taken.
pub struct ZeroStep(pub u64);
impl Message for ZeroStep {
    type Result = ();
}

// ---------------------------------------------------------------------------------------------
// To Committer (committer.rs)

/// Commit now (coalesced wake-up through `crate::wake::Waker`; from the writer after appends and
/// while it waits for a write buffer).
pub struct CommitWake;
impl Message for CommitWake {
    type Result = ();
}

/// Commit everything written (`Store::commit_now`: tests, benches); replies with the committed
/// offset.
pub struct CommitNow;
impl Message for CommitNow {
    type Result = std::io::Result<u64>;
}

/// Clean stop (`shutdown.rs`): commit everything written, retrying a failed or short pass;
/// replies with the committed offset, or the last error once every attempt failed.
pub struct FinalCommit;
impl Message for FinalCommit {
    type Result = std::io::Result<u64>;
}

// ---------------------------------------------------------------------------------------------
// To Flusher and GroupCommitter (flusher.rs)

/// Flush everything now (clean stop, `shutdown.rs`; either flusher); replies with the flushed
/// offset.
pub struct FlushNow;
impl Message for FlushNow {
    type Result = std::io::Result<u64>;
}

/// Run the async flusher's step now (`flushCommitLogTimed=false`; coalesced through the
/// writer's or the committer's `Waker`).
pub struct FlushWake;
impl Message for FlushWake {
    type Result = ();
}

/// How a SYNC_FLUSH wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlushOutcome {
    /// Everything up to the waiter's end is on disk.
    Flushed,
    /// `syncFlushTimeout` passed first: the message is stored but not known to be durable
    /// (FLUSH_DISK_TIMEOUT).
    TimedOut,
    /// The commit or the flush failed and the store has turned read-only; the remark for the
    /// producer (what failed and why).
    Failed(String),
}

/// Answer `reply` once everything below `end` is flushed. Not an actix response: a response
/// future per waiter would be polled at every wake of the group committer (hundreds of waiters ×
/// hundreds of wakes per flush at 256 producers), and its answer would travel back through the
/// writer's thread. The channel's other end is with the producer's task, which also keeps the
/// `syncFlushTimeout` deadline (see [`Appended`]): the group committer owns this end alone.
pub struct FlushUpTo {
    pub end: u64,
    /// Messages the reply answers: one for a single append, all the waiting ones of an
    /// `AppendBatch` (the broker's SENDs of one connection-thread turn) or a producer batch.
    pub msgs: u32,
    pub reply: tokio::sync::oneshot::Sender<FlushOutcome>,
}

/// The waiting appends of one burst of the writer's mailbox, sent by the writer (without a
/// response channel) once their bytes are committed (write rings; written, with write buffers);
/// the group committer answers each on its own thread, straight to the producer. One message
/// per burst, not per append: the hop costs the same for 1 or 300.
pub struct FlushWaits(pub Vec<FlushUpTo>);
impl Message for FlushWaits {
    type Result = ();
}

/// Runs the pending group commit; the group committer sends it to itself, queued behind the
/// waits already in its mailbox.
pub struct RunGroupCommit;
impl Message for RunGroupCommit {
    type Result = ();
}

// ---------------------------------------------------------------------------------------------
// To ReputDispatcher (reput.rs)

/// New CommitLog bytes may be visible: dispatch what there is (coalesced through the reput
/// dispatcher's `Waker`: from the writer in ASYNC_FLUSH, the committer with write buffers, the
/// group committer after each flush in SYNC_FLUSH).
pub struct Wake;
impl Message for Wake {
    type Result = ();
}

// ---------------------------------------------------------------------------------------------
// To ConsumeQueueBuilder (cq_builder.rs) and IndexBuilder (index_builder.rs)

/// A range of whole CommitLog records, `[from, to)`, ready to be indexed: the reput dispatcher
/// sends it to both builders and awaits both. Reply: done, or why not (the range is retried).
#[derive(Clone, Copy, Debug)]
pub struct Dispatch {
    pub from: PhyOffset,
    pub to: PhyOffset,
}
impl Message for Dispatch {
    type Result = Result<(), String>;
}

// ---------------------------------------------------------------------------------------------
// To ConsumeQueueBuilder (cq_builder.rs)

/// Flush every ConsumeQueue now (`shutdown.rs`; `catch_up.rs`' progress checkpoints; the
/// cleaner, before a CommitLog file goes); the reply is the store time of the newest unit on
/// disk after it (0 if the builder has dispatched nothing), what a checkpoint may call
/// "logics". With `sync_all`, every file is also `fdatasync`ed whatever its flushed position
/// says (recovery: units a crashed process left in the page cache are skipped as duplicates,
/// yet counted).
pub struct FlushConsumeQueues {
    pub sync_all: bool,
}
impl Message for FlushConsumeQueues {
    type Result = std::io::Result<i64>;
}

/// Recovery's re-dispatch is complete (`catch_up.rs`): the queue table may name what is on disk
/// again.
pub struct RecoveryDone;
impl Message for RecoveryDone {
    type Result = ();
}

/// Drop every ConsumeQueue of a deleted topic and its directory (`Store::delete_topic`);
/// replies with how many queues. `before` is the CommitLog end when the writer forgot the topic
/// ([`RemoveTopic`]): every record of the deleted topic lies below it, every record of a topic
/// created again under its name at or above it.
pub struct DeleteTopicQueues {
    pub topic: String,
    pub before: PhyOffset,
}
impl Message for DeleteTopicQueues {
    type Result = std::io::Result<usize>;
}

/// Delete the ConsumeQueue files whose units all point below `min_phy` (the CommitLog's first
/// byte), and move the queues' min offsets there (the cleaner's rounds;
/// `Store::clean_expired_consume_queues`, CLEAN_EXPIRED_CONSUMEQUEUE). `stepwise`
/// (`deleteConsumeQueueFilesInterval` > 0): stop after the first queue that deleted a file; the
/// next message with the same `min_phy` goes on from there.
pub struct DeleteQueuesBelow {
    pub min_phy: u64,
    pub stepwise: bool,
}
impl Message for DeleteQueuesBelow {
    type Result = std::io::Result<QueuesDeleted>;
}

/// What one [`DeleteQueuesBelow`] deleted, and whether every queue has been seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuesDeleted {
    pub files: usize,
    pub done: bool,
}

/// New messages in (topic, queue): the queue's max offset is now `max_offset`. Not a mailbox
/// message: the ConsumeQueue builder hands a batch's arrivals to its `cq_builder::ArrivalHook`,
/// which the broker's `wiring.rs` sets to wake parked long-poll pulls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub topic: String,
    pub queue_id: i32,
    pub max_offset: u64,
}

// ---------------------------------------------------------------------------------------------
// To IndexBuilder (index_builder.rs)

/// Flush the index files (`shutdown.rs`; `catch_up.rs` at the end of an index rebuild).
pub struct FlushIndex;
impl Message for FlushIndex {
    type Result = std::io::Result<()>;
}

/// Retention, from the cleaner: delete the index files whose entries all point below `min_phy`
/// (the CommitLog's first byte). Replies with how many files went.
pub struct DeleteBelow {
    pub min_phy: u64,
}
impl Message for DeleteBelow {
    type Result = std::io::Result<usize>;
}

// ---------------------------------------------------------------------------------------------
// To StoreCleaner (cleaner.rs)

/// One retention round now, whatever the interval (`Store::clean_now`: tests, benches); replies
/// with what it deleted.
pub struct CleanNow;
impl Message for CleanNow {
    type Result = std::io::Result<CleanReport>;
}

/// What one round deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanReport {
    pub commit_log_files: usize,
    pub consume_queue_files: usize,
    pub index_files: usize,
    /// The CommitLog's first byte after the round.
    pub min_offset: u64,
}

/// A clean stop (`shutdown.rs`): no round starts after this, the rounds under way stop at their
/// next step (at most one file deletion or ConsumeQueue step, plus a pause, away), and the reply
/// comes once they have, so the stop's final flushes see no file being deleted.
pub struct StopCleaning;
impl Message for StopCleaning {
    type Result = ();
}

/// mqadmin `deleteExpiredCommitLog` (DELETE_EXPIRED_COMMITLOG, `Store::trigger_delete_files`):
/// the next 20 rounds delete expired files whatever the hour and disk usage, as RocketMQ's
/// `executeDeleteFilesManually`.
pub struct TriggerDeleteFiles;
impl Message for TriggerDeleteFiles {
    type Result = ();
}

// ---------------------------------------------------------------------------------------------
// To ScheduleDelivery (schedule.rs)

/// The delivery progress per delay level (`Store::delay_offsets`: GET_ALL_DELAY_OFFSET, the
/// runtime info's schedule rows).
pub struct GetDelayOffsets;
impl Message for GetDelayOffsets {
    type Result = DelayOffsets;
}

/// Write `delayOffset.json` now (`shutdown.rs`), as much of the progress as is flushed (see
/// `schedule.rs`). Reply: whether it was written.
pub struct PersistDelayOffsets;
impl Message for PersistDelayOffsets {
    type Result = std::io::Result<()>;
}

/// A slave: the master's delivery progress (GET_ALL_DELAY_OFFSET, through
/// `Store::set_delay_offsets` from the broker's `slave_sync.rs`), kept and persisted as this
/// broker's own, so that a slave restarted as master delivers from there (RocketMQ's
/// `SlaveSynchronize.syncDelayOffset`). Levels this broker does not have are left out. Reply:
/// whether it was persisted.
pub struct SetDelayOffsets(pub DelayOffsets);
impl Message for SetDelayOffsets {
    type Result = std::io::Result<()>;
}
