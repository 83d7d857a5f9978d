//! `ReputDispatcher` — owns the dispatch position: it follows the CommitLog's published bytes and
//! hands them, in batches of whole records, to the ConsumeQueue and Index builders (RocketMQ's
//! ReputMessageService).
//!
//! In: [`Wake`] (coalesced; from the writer in ASYNC_FLUSH, from the committer with write
//! buffers, from the group committer after each flush in SYNC_FLUSH), a periodic tick as a safety
//! net, [`GetDispatched`].
//! Out: [`Dispatch`] `{from, to}` to both builders, awaited together before the next batch, so a
//! slow builder slows dispatch instead of growing a queue.
//!
//! Invariants: the dispatch position only moves forward, on record boundaries, and never past the
//! visibility limit (the published write position; in SYNC_FLUSH the flushed position).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::offset::PhyOffset;
use actormq_core::store::commit_log::scan_boundaries;
use actormq_core::store::mapped_file_queue::FileQueueView;

use super::cq_builder::ConsumeQueueBuilder;
use super::index_builder::IndexBuilder;
use super::state::StoreState;
use crate::metered::{ActorRef, Metered, Reply, Serve, Service};

/// Largest range handed to the builders in one message.
pub(crate) const MAX_BATCH_BYTES: u64 = 4 << 20;
/// Largest number of records handed to the builders in one message.
const MAX_BATCH_RECORDS: usize = 8192;

pub struct Wake;
impl Message for Wake {
    type Result = ();
}

/// A range of whole CommitLog records, `[from, to)`, ready to be indexed.
#[derive(Clone, Copy, Debug)]
pub struct Dispatch {
    pub from: PhyOffset,
    pub to: PhyOffset,
}
impl Message for Dispatch {
    type Result = Result<(), String>;
}

pub struct GetDispatched;
impl Message for GetDispatched {
    type Result = PhyOffset;
}

pub struct ReputDispatcher {
    view: FileQueueView,
    /// `dispatched` (ours to move) and `flushed` (the limit in SYNC_FLUSH).
    state: Arc<StoreState>,
    /// SYNC_FLUSH: dispatch only flushed bytes, so no consumer sees what a crash can take back
    /// (apache/rocketmq#8239).
    limit_to_flushed: bool,
    woken: Arc<AtomicBool>,
    cq: ActorRef<ConsumeQueueBuilder>,
    index: Option<ActorRef<IndexBuilder>>,
    busy: bool,
}

impl ReputDispatcher {
    pub fn new(
        view: FileQueueView,
        state: Arc<StoreState>,
        limit_to_flushed: bool,
        woken: Arc<AtomicBool>,
        cq: ActorRef<ConsumeQueueBuilder>,
        index: Option<ActorRef<IndexBuilder>>,
    ) -> Self {
        ReputDispatcher {
            view,
            state,
            limit_to_flushed,
            woken,
            cq,
            index,
            busy: false,
        }
    }

    fn pump(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.busy {
            return;
        }
        let from = PhyOffset(self.state.dispatched.load(Ordering::Acquire));
        let mut visible = self.view.max_offset();
        if self.limit_to_flushed {
            visible = visible.min(self.state.flushed());
        }
        if visible <= from.0 {
            return;
        }
        let cap = PhyOffset(visible.min(from.0 + MAX_BATCH_BYTES));
        let end = match scan_boundaries(&self.view, from, cap, MAX_BATCH_RECORDS) {
            Ok((end, _)) => end,
            Err(e) => {
                // Never skip silently: dispatch stops here and says where and why.
                tracing::error!(error = %e, "reput stopped at an unreadable CommitLog record");
                return;
            }
        };
        if end <= from {
            return;
        }
        self.busy = true;
        let d = Dispatch { from, to: end };
        let cq = self.cq.clone();
        let index = self.index.clone();
        let fut = async move {
            let idx = async {
                match index {
                    Some(i) => i.send(d).await.map_err(|e| e.to_string()).and_then(|r| r),
                    None => Ok(()),
                }
            };
            let cqf = async { cq.send(d).await.map_err(|e| e.to_string()).and_then(|r| r) };
            let (a, b) = tokio::join!(cqf, idx);
            a.and(b)
        };
        ctx.wait(actix::fut::wrap_future::<_, Metered<Self>>(fut).map(move |res, act, ctx| {
            let act = &mut act.inner;
            act.busy = false;
            match res {
                Ok(()) => {
                    act.state.dispatched.store(end.0, Ordering::Release);
                    act.pump(ctx);
                }
                Err(e) => tracing::error!(error = %e, from = d.from.0, to = d.to.0, "dispatch failed; will retry"),
            }
        }));
    }
}

impl Service for ReputDispatcher {
    const NAME: &'static str = "reput_dispatcher";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        // Safety net for a lost wake-up; appends normally wake us immediately.
        ctx.run_interval(Duration::from_millis(5), |act, ctx| act.inner.pump(ctx));
        self.pump(ctx);
    }
}

impl Serve<Wake> for ReputDispatcher {
    type Reply = ();
    fn serve(&mut self, _: Wake, ctx: &mut Context<Metered<Self>>) {
        self.woken.store(false, Ordering::Release);
        self.pump(ctx);
    }
}

impl Serve<GetDispatched> for ReputDispatcher {
    type Reply = Reply<GetDispatched>;
    fn serve(&mut self, _: GetDispatched, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(PhyOffset(self.state.dispatched.load(Ordering::Acquire)))
    }
}
