//! `CommitLogWriter` — the only writer of CommitLog files (RocketMQ's `CommitLog.putMessage` under
//! `putMessageLock`; here the mailbox serialises appends, so there is no lock).
//!
//! In: [`AppendMessage`] (one message), [`AppendBatch`] (many independent messages in one mailbox
//! message — the batched hop), [`AppendProducerBatch`] (a SEND_BATCH: one topic/queue, one unit),
//! [`GetWriterState`], [`RemoveTopic`] (a deleted topic), [`DeleteFiles`] (retention: the writer
//! owns the file list, so the cleaner asks it), [`EndOfBurst`] (from itself),
//! [`AppendReplicated`] (a slave: bytes its master sent, at their offsets). Out:
//! replies with the offsets assigned (in SYNC_FLUSH, for an append that waits, with the receiving
//! end of the channel its [`FlushUpTo`] carries to the group committer, which sends the flush's
//! outcome to the producer's task itself: [`Appended`], settled by [`append`] with the
//! producer's own `syncFlushTimeout` deadline; the waits of one mailbox burst travel together, once their bytes are
//! committed, as one [`FlushWaits`] — see [`Burst`]); `AllocateNext` to the allocator when it
//! rolls into a file, and — when the allocator zeroes files ahead (SYNC_FLUSH with write rings)
//! — a `Take` at the roll, whose answer the writer's thread waits for (`allocator::take_prepared`,
//! the `CommitLog`'s hook: at most one 64 KiB zeroing write, once per file); coalesced wakes after appending (see `Waker`): in ASYNC_FLUSH to the reput
//! dispatcher, or — with write buffers — to the `Committer` instead (appended bytes are not
//! readable until committed; the committer wakes reput), and to an untimed flusher
//! (`flushCommitLogTimed=false`). In SYNC_FLUSH none: dispatch may only reach flushed bytes, and
//! the group committer wakes reput after each flush.
//!
//! Invariants: a reply is sent only after the record's bytes are published (visible to readers),
//! and with write rings a wait reaches the group committer only after its bytes are committed; in
//! SYNC_FLUSH a message whose producer waits (`wait_store_msg_ok`: `WAIT` absent or true) is
//! answered only once it is flushed (or with FLUSH_DISK_TIMEOUT after `syncFlushTimeout`),
//! without holding up the appends behind it; a store that is read-only (a flush failed) or over
//! its disk-space limit refuses with SERVICE_NOT_AVAILABLE and the reason; so does a slave's
//! writer to every append but its master's bytes, and a master's writer to those.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::format::record::NewMessage;
use actormq_core::offset::PhyOffset;
use actormq_core::store::commit_log::{AppendOk, CommitLog};
use actormq_core::store::status::PutError;

use super::allocator::MappedFileAllocator;
use super::committer::commit_all;
use super::flusher::GroupCommitter;
use super::messages::{
    AllocateNext, AppendBatch, AppendMessage, AppendProducerBatch, AppendReplicated, Appended,
    DeleteFiles, EndOfBurst, FlushOutcome, FlushUpTo, FlushWaits, GetWriterState, RemoveTopic,
    WriterState,
};
use super::state::StoreState;
use crate::metered::{ActorRef, Metered, Reply, Serve, Service};
use crate::wake::Waker;
use actormq_core::store::status::PutStatus;

// The caller's side of the writer's reply (`Appended`, in `messages.rs` with the messages that
// carry it): settling it once the flush ended.
impl<T: Settle> Appended<T> {
    /// The reply once the flush ended: stored and flushed, FLUSH_DISK_TIMEOUT at the deadline, or
    /// the reason the flush failed. A group committer that stopped without answering (the store is
    /// shutting down) did not flush it: SERVICE_NOT_AVAILABLE, as for any failed flush.
    pub async fn settled(self) -> T {
        match self {
            Appended::Now(v) => v,
            Appended::AfterFlush {
                value,
                flushed,
                deadline,
                waits,
            } => {
                let outcome = match tokio::time::timeout_at(deadline, flushed).await {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(_)) => FlushOutcome::Failed(
                        "the CommitLog group committer stopped before this message was flushed"
                            .into(),
                    ),
                    Err(_) => FlushOutcome::TimedOut,
                };
                if waits.is_empty() {
                    value.settle(&outcome)
                } else {
                    value.settle_those(&outcome, &waits)
                }
            }
        }
    }
}

/// Appends through `writer` and settles the reply (see [`Appended`]).
pub async fn append<M, T>(writer: &ActorRef<CommitLogWriter>, m: M) -> Result<T, MailboxError>
where
    M: Message<Result = Appended<T>> + Send + 'static,
    M::Result: Send,
    T: Settle + Send + 'static,
    CommitLogWriter: Serve<M, Reply = Appended<T>>,
{
    Ok(writer.send(m).await?.settled().await)
}

/// What an append's reply becomes once its flush has ended.
pub trait Settle: Sized {
    fn settle(self, outcome: &FlushOutcome) -> Self;
    /// A batch: only the messages `waits` marks take the outcome (the others were stored and
    /// are not waiting for this flush: `WAIT=false`). One message either waits or not.
    fn settle_those(self, outcome: &FlushOutcome, _waits: &[bool]) -> Self {
        self.settle(outcome)
    }
}

impl Settle for Result<AppendOk, PutError> {
    fn settle(self, outcome: &FlushOutcome) -> Self {
        let mut ok = self?;
        match outcome {
            FlushOutcome::Flushed => {}
            FlushOutcome::TimedOut => ok.status = PutStatus::FlushDiskTimeout,
            FlushOutcome::Failed(remark) => {
                return Err(PutError::new(
                    PutStatus::ServiceNotAvailable,
                    remark.clone(),
                ))
            }
        }
        Ok(ok)
    }
}

impl Settle for Vec<Result<AppendOk, PutError>> {
    fn settle(self, outcome: &FlushOutcome) -> Self {
        self.into_iter().map(|r| r.settle(outcome)).collect()
    }
    fn settle_those(self, outcome: &FlushOutcome, waits: &[bool]) -> Self {
        self.into_iter()
            .zip(waits)
            .map(|(r, &w)| if w { r.settle(outcome) } else { r })
            .collect()
    }
}

impl Settle for Result<(AppendOk, Vec<PhyOffset>), PutError> {
    fn settle(self, outcome: &FlushOutcome) -> Self {
        let (ok, offsets) = self?;
        Ok((Ok(ok).settle(outcome)?, offsets))
    }
}

/// SYNC_FLUSH: the appends of the current burst of the writer's mailbox that wait. Their bytes
/// are committed (write rings) and their [`FlushUpTo`]s go to the group committer together, in
/// one [`FlushWaits`], when the burst ends: at an [`EndOfBurst`] the writer sends itself after the
/// burst's first waiting append, queued behind the appends already in the mailbox. A waiting
/// append's reply comes after the flush anyway, so holding it back until the burst is over costs
/// it only the handling of the rest of the burst (about a microsecond per append), and the burst
/// pays for one `pwrite` and one hop to the group committer instead of one per append (a `pwrite`
/// per 1 KiB append was half of the writer's CPU at 256 producers). With write buffers
/// (`transientStorePoolEnable`) the group committer commits right before its flush instead.
#[derive(Default)]
struct Burst {
    waits: Vec<FlushUpTo>,
    /// Store time of the newest append whose commit was held back; published (after the commit)
    /// when the burst ends.
    ts: i64,
    /// Appends whose commit was held back for the end of the burst.
    uncommitted: bool,
    /// An [`EndOfBurst`] is in the mailbox.
    scheduled: bool,
}

pub struct CommitLogWriter {
    log: CommitLog,
    clock: SharedClock,
    allocator: Option<ActorRef<MappedFileAllocator>>,
    /// Woken (coalesced: a burst of appends sends one wake each) after every append message, or
    /// for appends whose commit waits for the end of the burst, when it ends. None in SYNC_FLUSH.
    after_append: Vec<Waker>,
    state: Arc<StoreState>,
    /// SYNC_FLUSH: the group committer and `syncFlushTimeout`.
    sync: Option<(ActorRef<GroupCommitter>, std::time::Duration)>,
    /// Write rings (no `transientStorePoolEnable`): this writer commits after every append
    /// message — in SYNC_FLUSH, for appends that wait, once at the end of the burst — before
    /// anything is acknowledged or woken, or handed to the group committer.
    commit_inline: bool,
    /// SYNC_FLUSH: the waiting appends of this burst.
    burst: Burst,
    /// Our own address, for [`EndOfBurst`].
    me: Option<ActorRef<CommitLogWriter>>,
    /// `brokerRole = SLAVE`: only [`AppendReplicated`] writes.
    slave: bool,
}

/// The producer wants the reply after the flush (SYNC_FLUSH) and a slave's ack (SYNC_MASTER):
/// RocketMQ's `Message.isWaitStoreMsgOK`, carried beside the stored bytes (the SEND path sets it
/// from the producer's `WAIT`, which 4.9.4 does not store), never read from the properties.
pub(crate) fn waits(m: &NewMessage) -> bool {
    m.wait_store_msg_ok
}

impl CommitLogWriter {
    pub fn new(
        log: CommitLog,
        clock: SharedClock,
        allocator: Option<ActorRef<MappedFileAllocator>>,
        after_append: Vec<Waker>,
        state: Arc<StoreState>,
        sync: Option<(ActorRef<GroupCommitter>, std::time::Duration)>,
    ) -> Self {
        CommitLogWriter {
            log,
            clock,
            allocator,
            after_append,
            state,
            sync,
            commit_inline: false,
            burst: Burst::default(),
            me: None,
            slave: false,
        }
    }

    /// A slave's writer (see the field).
    pub fn as_slave(mut self, slave: bool) -> Self {
        self.slave = slave;
        self
    }

    /// Write rings: commit inline (see the field).
    pub fn committing_inline(mut self, on: bool) -> Self {
        self.commit_inline = on;
        self
    }

    /// Why a producer's append is refused, if it is.
    fn refused(&self) -> Option<PutError> {
        if self.slave {
            // RocketMQ's store refuses the same way ("message store is slave mode").
            return Some(PutError::new(
                PutStatus::ServiceNotAvailable,
                "this broker is a slave (brokerRole = SLAVE): it stores only what its master \
                 replicates; send to the master",
            ));
        }
        self.state
            .refusal()
            .map(|r| PutError::new(PutStatus::ServiceNotAvailable, r))
    }

    /// Whether an append's commit waits for the end of the burst: in SYNC_FLUSH, when its reply
    /// waits for the flush anyway, and when it did not roll into a new file (the old file's ring
    /// is then committed at once and can go back to the pool, as without bursts).
    fn holds_commit(&self, waits: bool, rolled_into: Option<u64>) -> bool {
        self.sync.is_some() && waits && rolled_into.is_none()
    }

    /// The reply to an append: `value` now, or — in SYNC_FLUSH, when it waits — once the group
    /// committer has flushed up to `end`, or FLUSH_DISK_TIMEOUT after `syncFlushTimeout` (see
    /// [`Appended`]). A waiting append joins the burst (see [`Burst`]); `msgs` is how many
    /// waiting messages the reply answers (0: none waits, the reply is sent now).
    fn reply_after_flush<T>(&mut self, value: T, end: u64, msgs: u32) -> Appended<T> {
        self.reply_after_flush_of(value, end, msgs, Vec::new())
    }

    /// As [`CommitLogWriter::reply_after_flush`], for a batch of which only `waits` wait.
    fn reply_after_flush_of<T>(
        &mut self,
        value: T,
        end: u64,
        msgs: u32,
        waits: Vec<bool>,
    ) -> Appended<T> {
        match self.sync.as_ref().map(|(_, timeout)| *timeout) {
            Some(timeout) if msgs > 0 => {
                let (reply, flushed) = tokio::sync::oneshot::channel();
                self.burst.waits.push(FlushUpTo { end, msgs, reply });
                self.schedule_end_of_burst();
                Appended::AfterFlush {
                    value,
                    flushed,
                    deadline: tokio::time::Instant::now() + timeout,
                    waits,
                }
            }
            _ => Appended::Now(value),
        }
    }

    fn schedule_end_of_burst(&mut self) {
        if self.burst.scheduled {
            return;
        }
        if self.me.as_ref().is_some_and(|me| me.try_notify(EndOfBurst)) {
            self.burst.scheduled = true;
        } else {
            // `try_send` refused (the mailbox over its bound with our sender parked, or not
            // started): end the burst now. An outcome that comes before the caller has the
            // reply waits in its channel.
            self.end_burst();
        }
    }

    /// Ends the burst: commits what it held back (write rings), publishes its store time, and
    /// hands its waits to the group committer — or, if the commit failed, answers them with the
    /// reason (the store has turned read-only; the bytes were never readable).
    fn end_burst(&mut self) {
        let mut failed = None;
        if std::mem::take(&mut self.burst.uncommitted) {
            if self.commit_inline {
                if let Err(e) = commit_all(&self.log.view(), &self.state, 0) {
                    failed = Some(e.to_string());
                }
            }
            if failed.is_none() {
                self.state
                    .last_store_ts
                    .fetch_max(self.burst.ts, Ordering::AcqRel);
                for w in &self.after_append {
                    w.wake();
                }
            }
        }
        // Waits join a burst only in SYNC_FLUSH, so `sync` is set whenever there are any.
        let (Some((gc, _)), false) = (&self.sync, self.burst.waits.is_empty()) else {
            return;
        };
        let waits = std::mem::take(&mut self.burst.waits);
        match failed {
            None => gc.notify(FlushWaits(waits)),
            Some(why) => {
                let mut told_stored = 0;
                for w in waits {
                    if w.reply.send(FlushOutcome::Failed(why.clone())).is_err() {
                        told_stored += 1;
                    }
                }
                if told_stored > 0 {
                    // The caller stopped waiting: its timer answered FLUSH_DISK_TIMEOUT ("stored,
                    // not yet flushed") while the burst was still being handled — only a writer
                    // stalled for `syncFlushTimeout` inside one burst gets there — or its
                    // connection closed. Those producers will not retry, so the loss must at
                    // least be on record.
                    tracing::error!(
                        appends = told_stored,
                        reason = %why,
                        "appends whose producers stopped waiting (answered FLUSH_DISK_TIMEOUT, \
                         or gone) were not stored: their commit failed"
                    );
                }
            }
        }
    }

    /// After an append message: commit (write rings), then publish the store time — in that
    /// order, so a flusher that reads the time finds the records it covers committed — then
    /// prepare the next file after a roll and wake the dispatch and flush actors. With `hold`
    /// (see [`CommitLogWriter::holds_commit`]) the commit, the time and the wakes wait for the
    /// end of the burst.
    ///
    /// `Err` when the inline commit failed: the records are in the ring but not in the file, so
    /// they must not be acknowledged (nor are they ever read: readers see committed bytes). The
    /// store has turned read-only with the reason, as after a failed flush.
    fn after_append(
        &mut self,
        now: i64,
        rolled_into: Option<u64>,
        hold: bool,
        ctx: &mut Context<Metered<Self>>,
    ) -> Result<(), PutError> {
        if hold {
            self.burst.ts = self.burst.ts.max(now);
            self.burst.uncommitted = true;
            return Ok(());
        }
        let committed = if self.commit_inline {
            commit_all(&self.log.view(), &self.state, 0)
                .map(|_| ())
                .map_err(|e| PutError::new(PutStatus::ServiceNotAvailable, e.to_string()))
        } else {
            Ok(())
        };
        if committed.is_ok() {
            // Never the time of a record that did not reach the file: a flush would write it to
            // the checkpoint as covered.
            self.state.last_store_ts.fetch_max(now, Ordering::AcqRel);
        }
        if let Some(from) = rolled_into {
            self.request_next(from + self.log.config().file_size, ctx);
        }
        // A wake lost to a full mailbox is picked up by the target's own tick.
        for w in &self.after_append {
            w.wake();
        }
        committed
    }

    /// Asks the allocator for the file at `from` (and it prepares the one after), without
    /// blocking appends while it works.
    fn request_next(&mut self, from: u64, ctx: &mut Context<Metered<Self>>) {
        let Some(alloc) = self.allocator.clone() else {
            return;
        };
        let fut = async move { alloc.send(AllocateNext { from }).await };
        ctx.spawn(
            actix::fut::wrap_future::<_, Metered<Self>>(fut).map(|res, act, _| {
                if let Ok(files) = res {
                    for f in files {
                        act.inner.log.offer_prepared(f);
                    }
                }
            }),
        );
    }
}

impl Service for CommitLogWriter {
    const NAME: &'static str = "commitlog_writer";
    const MAILBOX: usize = 4096;

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        self.me = Some(ActorRef::of(ctx));
        // Prepare the file after the current one before it is needed.
        let size = self.log.config().file_size;
        let max = self.log.max_offset().0;
        if self.slave && max == 0 {
            // A slave that holds nothing starts where its master's stream does: its first file
            // is made when the first transfer comes, and nothing is made ahead of that.
        } else if self.log.files().is_empty() {
            self.request_next(0, ctx);
        } else {
            self.request_next(max - max % size + size, ctx);
        }
    }
}

impl Serve<AppendMessage> for CommitLogWriter {
    type Reply = Appended<Result<AppendOk, PutError>>;
    fn serve(&mut self, msg: AppendMessage, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(e) = self.refused() {
            return Appended::Now(Err(e));
        }
        let now = self.clock.now_ms();
        let ok = match self.log.append(&msg.0, now) {
            Ok(ok) => ok,
            Err(e) => return Appended::Now(Err(e)),
        };
        let wants = waits(&msg.0);
        let hold = self.holds_commit(wants, ok.rolled_into);
        if let Err(e) = self.after_append(now, ok.rolled_into, hold, ctx) {
            return Appended::Now(Err(e));
        }
        let end = ok.end_offset().0;
        self.reply_after_flush(Ok(ok), end, u32::from(wants))
    }
}

impl Serve<AppendBatch> for CommitLogWriter {
    type Reply = Appended<Vec<Result<AppendOk, PutError>>>;
    fn serve(&mut self, msg: AppendBatch, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(e) = self.refused() {
            return Appended::Now(msg.0.iter().map(|_| Err(e.clone())).collect());
        }
        let now = self.clock.now_ms();
        let mut rolled = None;
        let (mut wait_end, mut waiting) = (0, 0u32);
        let out: Vec<_> = msg
            .0
            .iter()
            .map(|m| {
                let r = self.log.append(m, now);
                if let Ok(ok) = &r {
                    rolled = rolled.or(ok.rolled_into);
                    if waits(m) {
                        wait_end = wait_end.max(ok.end_offset().0);
                        waiting += 1;
                    }
                }
                r
            })
            .collect();
        let hold = self.holds_commit(wait_end > 0, rolled);
        let out = match self.after_append(now, rolled, hold, ctx) {
            Ok(()) => out,
            Err(e) => out.into_iter().map(|r| r.and(Err(e.clone()))).collect(),
        };
        // A mix of `WAIT=false` and waiting messages: the flush's outcome is the waiting ones'.
        let mixed = waiting > 0 && (waiting as usize) < msg.0.len();
        let waits = if mixed {
            msg.0.iter().map(waits).collect()
        } else {
            Vec::new()
        };
        self.reply_after_flush_of(out, wait_end, waiting, waits)
    }
}

impl Serve<AppendProducerBatch> for CommitLogWriter {
    type Reply = Appended<Result<(AppendOk, Vec<PhyOffset>), PutError>>;
    fn serve(&mut self, msg: AppendProducerBatch, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(e) = self.refused() {
            return Appended::Now(Err(e));
        }
        let now = self.clock.now_ms();
        let mut offsets = Vec::with_capacity(msg.0.len());
        let ok = match self.log.append_batch(&msg.0, now, &mut offsets) {
            Ok(ok) => ok,
            Err(e) => return Appended::Now(Err(e)),
        };
        let wants = msg.0.first().is_some_and(waits);
        let hold = self.holds_commit(wants, ok.rolled_into);
        if let Err(e) = self.after_append(now, ok.rolled_into, hold, ctx) {
            return Appended::Now(Err(e));
        }
        let end = ok.end_offset().0;
        let msgs = if wants { offsets.len() as u32 } else { 0 };
        self.reply_after_flush(Ok((ok, offsets)), end, msgs)
    }
}

impl Serve<EndOfBurst> for CommitLogWriter {
    type Reply = ();
    fn serve(&mut self, _: EndOfBurst, _: &mut Context<Metered<Self>>) {
        self.burst.scheduled = false;
        self.end_burst();
    }
}

impl Serve<GetWriterState> for CommitLogWriter {
    type Reply = Reply<GetWriterState>;
    fn serve(&mut self, _: GetWriterState, _: &mut Context<Metered<Self>>) -> Self::Reply {
        // Whoever asks (a clean stop) finds every append before it committed.
        self.end_burst();
        MessageResult(WriterState {
            max_offset: self.log.max_offset(),
        })
    }
}

impl Serve<AppendReplicated> for CommitLogWriter {
    type Reply = Reply<AppendReplicated>;
    fn serve(&mut self, m: AppendReplicated, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if !self.slave {
            return MessageResult(Err(PutError::new(
                PutStatus::ServiceNotAvailable,
                "this broker is a master: it takes no replicated CommitLog bytes",
            )));
        }
        if let Some(r) = self.state.refusal() {
            return MessageResult(Err(PutError::new(PutStatus::ServiceNotAvailable, r)));
        }
        let ok = match self.log.append_replicated(m.start, &m.data) {
            Ok(ok) => ok,
            Err(e) => return MessageResult(Err(e)),
        };
        if ok.records > 0 || ok.rolled_into.is_some() {
            // The records' own store time is what the checkpoint records on a slave.
            if let Err(e) = self.after_append(ok.last_store_timestamp, ok.rolled_into, false, ctx) {
                return MessageResult(Err(e));
            }
        }
        MessageResult(Ok(ok))
    }
}

impl Serve<DeleteFiles> for CommitLogWriter {
    type Reply = Reply<DeleteFiles>;
    fn serve(&mut self, m: DeleteFiles, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.log.files().delete_files(&m.0))
    }
}

impl Serve<RemoveTopic> for CommitLogWriter {
    type Reply = Reply<RemoveTopic>;
    fn serve(&mut self, m: RemoveTopic, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.log.remove_topic(&m.0);
        MessageResult(self.log.max_offset())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actormq_core::offset::QueueOffset;

    fn ok() -> AppendOk {
        AppendOk {
            phy_offset: PhyOffset(4096),
            wrote_bytes: 200,
            queue_offset: QueueOffset(7),
            msg_num: 1,
            store_timestamp: 1,
            rolled_into: None,
            status: PutStatus::PutOk,
        }
    }

    /// Whether an append waits is the message's `wait_store_msg_ok`, whatever its stored
    /// properties say: 4.9.4 stores a send without `WAIT`, and delivers a scheduled message with
    /// the producer's `WAIT` without waiting for it.
    #[test]
    fn the_wait_is_the_messages_flag_not_its_stored_properties() {
        let with = |props: &str, wait: bool| NewMessage {
            topic: "T".into(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_tx_offset: 0,
            body_crc: 0,
            body: bytes::Bytes::new(),
            properties: props.to_string(),
            wait_store_msg_ok: wait,
        };
        assert!(waits(&with("", true)));
        assert!(!waits(&with("", false)));
        assert!(!waits(&with("WAIT\u{1}true", false)));
        assert!(waits(&with("WAIT\u{1}false", true)));
    }

    /// The group committer may be stuck in `fdatasync` for good: the caller still gets
    /// FLUSH_DISK_TIMEOUT at the deadline; an outcome sent before the deadline wins, even one
    /// sent before the caller started waiting; a group committer gone without answering is a
    /// failed flush.
    #[tokio::test(start_paused = true)]
    async fn a_wait_settles_by_the_flush_or_by_its_own_deadline() {
        let at = |ms| tokio::time::Instant::now() + std::time::Duration::from_millis(ms);
        let pending = |deadline| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let reply: Appended<Result<AppendOk, PutError>> = Appended::AfterFlush {
                value: Ok(ok()),
                flushed: rx,
                deadline,
                waits: Vec::new(),
            };
            (tx, reply)
        };

        let (tx, stalled) = pending(at(5_000));
        let t0 = tokio::time::Instant::now();
        let late = stalled.settled().await.unwrap();
        assert_eq!(late.status, PutStatus::FlushDiskTimeout);
        assert_eq!(
            t0.elapsed(),
            std::time::Duration::from_secs(5),
            "at the deadline"
        );
        assert!(
            tx.send(FlushOutcome::Flushed).is_err(),
            "a flush after the deadline finds nobody waiting"
        );

        let (tx, early) = pending(at(5_000));
        tx.send(FlushOutcome::Flushed).unwrap();
        assert_eq!(early.settled().await.unwrap().status, PutStatus::PutOk);

        let (tx, gone) = pending(at(5_000));
        drop(tx);
        let e = gone.settled().await.unwrap_err();
        assert_eq!(e.status, PutStatus::ServiceNotAvailable);
        assert!(e.remark.contains("group committer stopped"), "{}", e.remark);

        let now: Appended<Result<AppendOk, PutError>> = Appended::Now(Ok(ok()));
        assert_eq!(now.settled().await.unwrap().status, PutStatus::PutOk);
    }

    #[test]
    fn a_settled_reply_says_how_the_flush_ended_and_keeps_what_was_stored() {
        let one: Result<AppendOk, PutError> = Ok(ok());
        assert_eq!(
            one.clone().settle(&FlushOutcome::Flushed).unwrap().status,
            PutStatus::PutOk
        );
        let late = one.clone().settle(&FlushOutcome::TimedOut).unwrap();
        assert_eq!(late.status, PutStatus::FlushDiskTimeout);
        assert_eq!(
            (late.phy_offset, late.queue_offset),
            (PhyOffset(4096), QueueOffset(7)),
            "stored all the same: the offsets stay"
        );
        let failed = one
            .settle(&FlushOutcome::Failed("flushing x failed: EIO".into()))
            .unwrap_err();
        assert_eq!(failed.status, PutStatus::ServiceNotAvailable);
        assert_eq!(
            failed.remark, "flushing x failed: EIO",
            "the remark says what failed"
        );

        let refused = PutError::new(PutStatus::MessageIllegal, "too big");
        let batch: Vec<Result<AppendOk, PutError>> = vec![Ok(ok()), Err(refused.clone())];
        let settled = batch.settle(&FlushOutcome::TimedOut);
        assert_eq!(
            settled[0].as_ref().unwrap().status,
            PutStatus::FlushDiskTimeout
        );
        assert_eq!(
            settled[1].as_ref().unwrap_err().remark,
            "too big",
            "an error stays itself"
        );

        // A batch of which only the first waits: the flush's outcome is the first's alone.
        let mixed: Vec<Result<AppendOk, PutError>> = vec![Ok(ok()), Ok(ok())];
        let settled = mixed.settle_those(&FlushOutcome::TimedOut, &[true, false]);
        assert_eq!(
            settled[0].as_ref().unwrap().status,
            PutStatus::FlushDiskTimeout
        );
        assert_eq!(
            settled[1].as_ref().unwrap().status,
            PutStatus::PutOk,
            "a WAIT=false message is not told about a flush it did not wait for"
        );

        let producer: Result<(AppendOk, Vec<PhyOffset>), PutError> =
            Ok((ok(), vec![PhyOffset(4096), PhyOffset(4196)]));
        let (late, offsets) = producer.settle(&FlushOutcome::TimedOut).unwrap();
        assert_eq!(late.status, PutStatus::FlushDiskTimeout);
        assert_eq!(offsets, vec![PhyOffset(4096), PhyOffset(4196)]);
    }
}
