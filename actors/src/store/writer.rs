//! `CommitLogWriter` — the only writer of CommitLog files (RocketMQ's `CommitLog.putMessage` under
//! `putMessageLock`; here the mailbox serialises appends, so there is no lock).
//!
//! In: [`AppendMessage`] (one message), [`AppendBatch`] (many independent messages in one mailbox
//! message — the batched hop), [`AppendProducerBatch`] (a SEND_BATCH: one topic/queue, one unit),
//! [`GetWriterState`], [`RemoveTopic`] (a deleted topic). Out: replies with the offsets assigned;
//! `AllocateNext` to the allocator when it rolls into a file; coalesced wakes after appending (see
//! `Waker`): to the reput dispatcher, or — with write buffers in ASYNC_FLUSH — to the `Committer`
//! instead (appended bytes are not readable until committed; the committer wakes reput), and to an
//! untimed flusher (`flushCommitLogTimed=false`).
//!
//! Invariants: a reply is sent only after the record's bytes are published (visible to readers);
//! in SYNC_FLUSH a message with `WAIT` absent or true is answered only once it is flushed (or with
//! FLUSH_DISK_TIMEOUT after `syncFlushTimeout`), without holding up the appends behind it; a store
//! that is read-only (a flush failed) or over its disk-space limit refuses with
//! SERVICE_NOT_AVAILABLE and the reason.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::format::record::NewMessage;
use actormq_core::offset::{PhyOffset, QueueOffset};
use actormq_core::store::commit_log::{AppendOk, CommitLog};
use actormq_core::store::mapped_file::MappedFile;
use actormq_core::store::status::PutError;

use super::allocator::{AllocateNext, MappedFileAllocator};
use super::committer::commit_all;
use super::flusher::{FlushUpTo, GroupCommitter};
use super::state::StoreState;
use super::wake::Waker;
use crate::metered::{ActorRef, MaybeLater, Metered, Reply, Serve, Service};
use actormq_core::format::properties::{self, keys};
use actormq_core::store::status::PutStatus;

pub struct AppendMessage(pub NewMessage);
impl Message for AppendMessage {
    type Result = Result<AppendOk, PutError>;
}

/// Many independent messages appended in order in one mailbox message.
pub struct AppendBatch(pub Vec<NewMessage>);
impl Message for AppendBatch {
    type Result = Vec<Result<AppendOk, PutError>>;
}

/// A producer's batch (SEND_BATCH_MESSAGE): one topic and queue, consecutive queue offsets, one
/// file. The reply carries each record's physical offset.
pub struct AppendProducerBatch(pub Vec<NewMessage>);
impl Message for AppendProducerBatch {
    type Result = Result<(AppendOk, Vec<PhyOffset>), PutError>;
}

/// A file the allocator prepared.
pub struct FileReady(pub Arc<MappedFile>);
impl Message for FileReady {
    type Result = ();
}

#[derive(Clone, Debug)]
pub struct WriterState {
    pub max_offset: PhyOffset,
}
pub struct GetWriterState;
impl Message for GetWriterState {
    type Result = WriterState;
}

/// Ask for the next queue offset the writer would assign.
pub struct GetQueueOffset(pub String, pub i32);
impl Message for GetQueueOffset {
    type Result = QueueOffset;
}

pub struct CommitLogWriter {
    log: CommitLog,
    clock: SharedClock,
    allocator: Option<ActorRef<MappedFileAllocator>>,
    /// Woken (coalesced: a burst of appends sends one wake each) after every append message.
    after_append: Vec<Waker>,
    state: Arc<StoreState>,
    /// SYNC_FLUSH: the group committer and `syncFlushTimeout`.
    sync: Option<(ActorRef<GroupCommitter>, std::time::Duration)>,
    /// Write rings (no `transientStorePoolEnable`): this writer commits after every append
    /// message, before anything is acknowledged or woken.
    commit_inline: bool,
}

/// `WAIT` absent or "true": the producer wants the reply after the flush (SYNC_FLUSH).
fn waits(m: &NewMessage) -> bool {
    properties::find(&m.properties, keys::WAIT) != Some("false")
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
        }
    }

    /// Write rings: commit inline (see the field).
    pub fn committing_inline(mut self, on: bool) -> Self {
        self.commit_inline = on;
        self
    }

    fn refused(&self) -> Option<PutError> {
        self.state
            .refusal()
            .map(|r| PutError::new(PutStatus::ServiceNotAvailable, r))
    }

    /// In SYNC_FLUSH, a future that resolves when `end` is flushed: `Ok(true)` flushed,
    /// `Ok(false)` timed out (FLUSH_DISK_TIMEOUT, the message is stored), `Err` the flush failed.
    fn flush_wait(
        &self,
        end: u64,
    ) -> Option<futures_util::future::LocalBoxFuture<'static, Result<bool, String>>> {
        let (gc, timeout) = self.sync.clone()?;
        Some(Box::pin(async move {
            match tokio::time::timeout(timeout, gc.send(FlushUpTo(end))).await {
                Ok(Ok(Ok(()))) => Ok(true),
                Ok(Ok(Err(e))) => Err(e),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Ok(false),
            }
        }))
    }

    /// After an append message: commit (write rings), then publish the store time — in that
    /// order, so a flusher that reads the time finds the records it covers committed — then
    /// prepare the next file after a roll and wake the dispatch and flush actors.
    ///
    /// `Err` when the inline commit failed: the records are in the ring but not in the file, so
    /// they must not be acknowledged (nor are they ever read: readers see committed bytes). The
    /// store has turned read-only with the reason, as after a failed flush.
    fn after_append(
        &mut self,
        now: i64,
        rolled_into: Option<u64>,
        ctx: &mut Context<Metered<Self>>,
    ) -> Result<(), PutError> {
        let committed = if self.commit_inline {
            commit_all(&self.log.view(), &self.state, 0)
                .map(|_| ())
                .map_err(|e| PutError::new(PutStatus::ServiceNotAvailable, e.to_string()))
        } else {
            Ok(())
        };
        self.state.last_store_ts.store(now, Ordering::Release);
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
        // Prepare the file after the current one before it is needed.
        let size = self.log.config().file_size;
        let max = self.log.max_offset().0;
        let next = if self.log.files().is_empty() {
            0
        } else {
            max - max % size + size
        };
        self.request_next(next, ctx);
    }
}

impl Serve<AppendMessage> for CommitLogWriter {
    type Reply = MaybeLater<Result<AppendOk, PutError>>;
    fn serve(&mut self, msg: AppendMessage, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(e) = self.refused() {
            return MaybeLater::Now(Err(e));
        }
        let now = self.clock.now_ms();
        let mut ok = match self.log.append(&msg.0, now) {
            Ok(ok) => ok,
            Err(e) => return MaybeLater::Now(Err(e)),
        };
        if let Err(e) = self.after_append(now, ok.rolled_into, ctx) {
            return MaybeLater::Now(Err(e));
        }
        match self.flush_wait(ok.end_offset().0).filter(|_| waits(&msg.0)) {
            None => MaybeLater::Now(Ok(ok)),
            Some(wait) => MaybeLater::Later(Box::pin(async move {
                match wait.await {
                    Ok(true) => Ok(ok),
                    Ok(false) => {
                        ok.status = PutStatus::FlushDiskTimeout;
                        Ok(ok)
                    }
                    Err(e) => Err(PutError::new(
                        PutStatus::ServiceNotAvailable,
                        format!("the flush failed: {e}"),
                    )),
                }
            })),
        }
    }
}

impl Serve<AppendBatch> for CommitLogWriter {
    type Reply = MaybeLater<Vec<Result<AppendOk, PutError>>>;
    fn serve(&mut self, msg: AppendBatch, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(e) = self.refused() {
            return MaybeLater::Now(msg.0.iter().map(|_| Err(e.clone())).collect());
        }
        let now = self.clock.now_ms();
        let mut rolled = None;
        let mut wait_end = 0;
        let out: Vec<_> = msg
            .0
            .iter()
            .map(|m| {
                let r = self.log.append(m, now);
                if let Ok(ok) = &r {
                    rolled = rolled.or(ok.rolled_into);
                    if waits(m) {
                        wait_end = wait_end.max(ok.end_offset().0);
                    }
                }
                r
            })
            .collect();
        let out = match self.after_append(now, rolled, ctx) {
            Ok(()) => out,
            Err(e) => out.into_iter().map(|r| r.and(Err(e.clone()))).collect(),
        };
        match self.flush_wait(wait_end).filter(|_| wait_end > 0) {
            None => MaybeLater::Now(out),
            Some(wait) => MaybeLater::Later(Box::pin(async move {
                let w = wait.await;
                out.into_iter()
                    .map(|r| match (r, &w) {
                        (Ok(ok), Ok(true)) => Ok(ok),
                        (Ok(mut ok), Ok(false)) => {
                            ok.status = PutStatus::FlushDiskTimeout;
                            Ok(ok)
                        }
                        (Ok(_), Err(e)) => Err(PutError::new(
                            PutStatus::ServiceNotAvailable,
                            format!("the flush failed: {e}"),
                        )),
                        (Err(e), _) => Err(e),
                    })
                    .collect()
            })),
        }
    }
}

impl Serve<AppendProducerBatch> for CommitLogWriter {
    type Reply = MaybeLater<Result<(AppendOk, Vec<PhyOffset>), PutError>>;
    fn serve(&mut self, msg: AppendProducerBatch, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(e) = self.refused() {
            return MaybeLater::Now(Err(e));
        }
        let now = self.clock.now_ms();
        let mut offsets = Vec::with_capacity(msg.0.len());
        let mut ok = match self.log.append_batch(&msg.0, now, &mut offsets) {
            Ok(ok) => ok,
            Err(e) => return MaybeLater::Now(Err(e)),
        };
        if let Err(e) = self.after_append(now, ok.rolled_into, ctx) {
            return MaybeLater::Now(Err(e));
        }
        let wants = msg.0.first().is_some_and(waits);
        match self.flush_wait(ok.end_offset().0).filter(|_| wants) {
            None => MaybeLater::Now(Ok((ok, offsets))),
            Some(wait) => MaybeLater::Later(Box::pin(async move {
                match wait.await {
                    Ok(true) => Ok((ok, offsets)),
                    Ok(false) => {
                        ok.status = PutStatus::FlushDiskTimeout;
                        Ok((ok, offsets))
                    }
                    Err(e) => Err(PutError::new(
                        PutStatus::ServiceNotAvailable,
                        format!("the flush failed: {e}"),
                    )),
                }
            })),
        }
    }
}

impl Serve<FileReady> for CommitLogWriter {
    type Reply = ();
    fn serve(&mut self, msg: FileReady, _: &mut Context<Metered<Self>>) {
        self.log.offer_prepared(msg.0);
    }
}

impl Serve<GetWriterState> for CommitLogWriter {
    type Reply = Reply<GetWriterState>;
    fn serve(&mut self, _: GetWriterState, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(WriterState {
            max_offset: self.log.max_offset(),
        })
    }
}

impl Serve<GetQueueOffset> for CommitLogWriter {
    type Reply = Reply<GetQueueOffset>;
    fn serve(&mut self, m: GetQueueOffset, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.log.queue_offset(&m.0, m.1))
    }
}

/// Forget a deleted topic's queue offsets; replies with the CommitLog end at that moment (every
/// record of the old topic lies before it).
pub struct RemoveTopic(pub String);
impl Message for RemoveTopic {
    type Result = PhyOffset;
}

impl Serve<RemoveTopic> for CommitLogWriter {
    type Reply = Reply<RemoveTopic>;
    fn serve(&mut self, m: RemoveTopic, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.log.remove_topic(&m.0);
        MessageResult(self.log.max_offset())
    }
}
