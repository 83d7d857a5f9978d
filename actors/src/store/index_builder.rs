//! `IndexBuilder` — owns the IndexFiles (RocketMQ's IndexService on the dispatch path).
//!
//! In: [`Dispatch`] `{from, to}`: walks those records through the CommitLog view and indexes
//! `topic#KEY` for each key and `topic#UNIQ_KEY`; [`FlushIndex`]; `DeleteBelow` (retention: files
//! whose entries all point below the CommitLog's first byte go, never the newest). Out: the reply; readers see new
//! entries through the shared `IndexReader`.
//!
//! Like RocketMQ, an index file is flushed when it is full (and at a clean stop), not on a timer:
//! the slot table takes random writes, and every msync would write-protect those pages and make
//! the next put fault again. After a crash that may have taken the machine down, recovery rebuilds
//! index entries newer than the checkpoint from the CommitLog; after a process death on the same
//! boot it keeps the files and adds what they lack.
//!
//! Invariant: the index time it publishes for the checkpoint is the end of the newest *full*
//! flushed file (RocketMQ's `IndexService.flush`), never of the file still being filled.
//!
//! Invariant: ROLLBACK records are not indexed; replays are deduplicated by the index store.

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::format::record::sys_flag;
use actormq_core::store::commit_log::walk;
use actormq_core::store::index_file::IndexStore;
use actormq_core::store::mapped_file_queue::FileQueueView;

use super::messages::{DeleteBelow, Dispatch, FlushIndex};
use crate::metered::{Metered, Serve, Service};

pub struct IndexBuilder {
    index: IndexStore,
    commit_log: FileQueueView,
    clock: SharedClock,
    /// Index files seen so far: a new one means the previous is full and gets flushed.
    files_seen: usize,
    state: Option<std::sync::Arc<super::state::StoreState>>,
}

impl IndexBuilder {
    pub fn new(index: IndexStore, commit_log: FileQueueView, clock: SharedClock) -> Self {
        IndexBuilder {
            index,
            commit_log,
            clock,
            files_seen: 0,
            state: None,
        }
    }

    /// Publishes the end time of the newest fully flushed index file (the checkpoint's "index").
    pub fn with_state(mut self, state: std::sync::Arc<super::state::StoreState>) -> Self {
        self.state = Some(state);
        self
    }

    fn publish_flushed(&self, ts: Option<i64>) {
        if let (Some(st), Some(ts)) = (&self.state, ts) {
            st.index_ts.store(ts, std::sync::atomic::Ordering::Release);
        }
    }
}

impl Service for IndexBuilder {
    const NAME: &'static str = "index_builder";

    fn started(&mut self, _: &mut Context<Metered<Self>>) {
        self.files_seen = self.index.files().len();
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
        if self.index.files().len() > self.files_seen {
            self.files_seen = self.index.files().len();
            match self.index.flush() {
                Ok(()) => self.publish_flushed(self.index.full_files_end_timestamp()),
                Err(e) => tracing::error!(error = %e, "flushing the full IndexFile failed"),
            }
        }
        err.map_or(Ok(()), Err)
    }
}

impl Serve<DeleteBelow> for IndexBuilder {
    type Reply = std::io::Result<usize>;
    fn serve(&mut self, m: DeleteBelow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let n = self
            .index
            .delete_files_below(i64::try_from(m.min_phy).unwrap_or(i64::MAX));
        // Only full files go (never the newest): the roll count stays right.
        self.files_seen = self.files_seen.saturating_sub(n);
        Ok(n)
    }
}

impl Serve<FlushIndex> for IndexBuilder {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, _: FlushIndex, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.index.flush()?;
        // Full files only, even here: the file still being filled gets more entries after the
        // next start, and a crash then deletes it (its end is newer than the checkpoint); with
        // messageIndexSafe, recovery must then start no later than where that file began.
        self.publish_flushed(self.index.full_files_end_timestamp());
        Ok(())
    }
}
