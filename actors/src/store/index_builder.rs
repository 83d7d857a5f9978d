//! `IndexBuilder` — owns the IndexFiles (RocketMQ's IndexService on the dispatch path).
//!
//! In: [`Dispatch`] `{from, to}`: walks those records through the CommitLog view and indexes
//! `topic#KEY` for each key and `topic#UNIQ_KEY`; a periodic flush tick. Out: the reply; readers
//! see new entries through the shared `IndexReader`.
//!
//! Invariant: ROLLBACK records are not indexed; replays are deduplicated by the index store.

use std::time::Duration;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::format::record::sys_flag;
use actormq_core::store::commit_log::walk;
use actormq_core::store::index_file::IndexStore;
use actormq_core::store::mapped_file_queue::FileQueueView;

use super::reput::Dispatch;
use crate::metered::{Metered, Serve, Service};

pub struct FlushIndex;
impl Message for FlushIndex {
    type Result = std::io::Result<()>;
}

pub struct IndexBuilder {
    index: IndexStore,
    commit_log: FileQueueView,
    clock: SharedClock,
    flush_interval: Duration,
}

impl IndexBuilder {
    pub fn new(
        index: IndexStore,
        commit_log: FileQueueView,
        clock: SharedClock,
        flush_interval: Duration,
    ) -> Self {
        IndexBuilder {
            index,
            commit_log,
            clock,
            flush_interval,
        }
    }
}

impl Service for IndexBuilder {
    const NAME: &'static str = "index_builder";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(self.flush_interval, |act, _| {
            if let Err(e) = act.inner.index.flush() {
                tracing::error!(error = %e, "IndexFile flush failed");
            }
        });
    }

    fn stopped(&mut self, _: &mut Context<Metered<Self>>) {
        if let Err(e) = self.index.flush() {
            tracing::error!(error = %e, "IndexFile flush at stop failed");
        }
    }
}

impl Serve<Dispatch> for IndexBuilder {
    type Reply = Result<(), String>;
    fn serve(&mut self, d: Dispatch, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let now = self.clock.now_ms();
        let index = &mut self.index;
        let mut err = None;
        walk(&self.commit_log, d.from, d.to, |phy, r| {
            if r.sys_flag & sys_flag::TRANSACTION_TYPE_MASK == sys_flag::TRANSACTION_ROLLBACK_TYPE {
                return true;
            }
            let mut keys = r.keys().peekable();
            let uniq = r.uniq_key();
            if keys.peek().is_none() && uniq.is_none() {
                return true;
            }
            match index.put(r.topic, keys, uniq, phy as i64, r.store_timestamp, now) {
                Ok(()) => true,
                Err(e) => {
                    err = Some(e.to_string());
                    false
                }
            }
        })
        .map_err(|e| e.to_string())?;
        err.map_or(Ok(()), Err)
    }
}

impl Serve<FlushIndex> for IndexBuilder {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, _: FlushIndex, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.index.flush()
    }
}
