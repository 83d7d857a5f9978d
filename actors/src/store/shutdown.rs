//! The store's clean stop ([`Store::shutdown`]), the start order in reverse: refuse appends,
//! commit everything written (write buffers), wait for dispatch, persist the builders, flush the
//! CommitLog (which writes the checkpoint), persist the delay progress, stop every arbiter.
//!
//! Messages out: `StopCleaning`, `GetWriterState`, `FinalCommit`, `FlushConsumeQueues`,
//! `FlushIndex`, `FlushNow`, `PersistDelayOffsets`.
//!
//! Invariant: a step that fails does not end the stop — every later step still runs and the
//! threads still go — but its error is the stop's error, so the abort file stays and the next
//! start recovers abnormally.

use std::sync::Arc;
use std::time::Duration;

use actormq_core::offset::PhyOffset;

use super::messages::{
    FinalCommit, FlushConsumeQueues, FlushIndex, FlushNow, GetWriterState, PersistDelayOffsets,
    StopCleaning,
};
use super::system::FlushRef;
use super::Store;

impl Store {
    /// Clean stop: refuse appends, commit the write buffers (retried), wait for dispatch to catch
    /// up, persist the builders, flush everything, stop every actor. A final commit that still
    /// failed is returned as the error after all of that.
    pub async fn shutdown(&self) -> std::io::Result<()> {
        let end = self.refuse_appends().await;
        let commit_failed = self.final_commit().await.err();
        self.wait_for_dispatch_at_stop(end).await;
        // Actors on a stopped arbiter are dropped without `stopped`, so every owner is asked to
        // make its state durable explicitly, before the threads go.
        let builders_failed = self.persist_builders().await.err();
        let flushed = self.final_flush().await;
        let persisted = self.persist_delay_offsets().await;
        self.stop_threads().await?;
        flushed?;
        persisted?;
        if let Some(e) = builders_failed {
            return Err(e);
        }
        commit_failed.map_or(Ok(()), Err)
    }

    /// Refuses new appends and stops retention; returns the end of everything the writer
    /// accepted.
    async fn refuse_appends(&self) -> PhyOffset {
        // Refuse new appends first; the writer's mailbox is FIFO, so once it answers a state
        // query every append it accepted is in the CommitLog, and `end` covers all of them.
        self.state.stopping.store(Some(Arc::new(
            "the broker is shutting down; send to another broker".to_string(),
        )));
        // No retention round from here on, and the one under way (if any) ends first: the
        // final flushes and the checkpoint then see a file list nothing is changing.
        if let Some(c) = &self.cleaner {
            let _ = c.send(StopCleaning).await;
        }
        match self.writer.send(GetWriterState).await {
            Ok(s) => s.max_offset,
            Err(_) => self.max_offset(),
        }
    }

    /// Write buffers: everything written must reach the files before dispatch can see it and
    /// before the final flush (RocketMQ's commit(0) at shutdown, retried). If it still fails,
    /// the rest of the stop goes on — whatever was committed is dispatched, persisted and
    /// flushed — and the failure is the shutdown's error, so the abort file stays and the next
    /// start recovers abnormally.
    async fn final_commit(&self) -> std::io::Result<()> {
        let Some(c) = &self.committer else {
            return Ok(());
        };
        let committed = c.send(FinalCommit).await.map_err(std::io::Error::other)??;
        tracing::info!(committed, "write buffers committed");
        Ok(())
    }

    /// Waits (at most 30 s) for dispatch to reach what can be dispatched of `end`.
    async fn wait_for_dispatch_at_stop(&self, end: PhyOffset) {
        // Dispatch can only reach committed (readable) bytes: after a successful final commit, or
        // with write rings (committed after every append, and every held burst committed by the
        // `GetWriterState` above), that is everything written; after a
        // failed commit it is less, and waiting for the rest would only run out the bound.
        let mut end = end.min(self.max_offset());
        if self.params.sync_flush && self.state.read_only.load().is_some() {
            // SYNC_FLUSH dispatches flushed bytes only, and after a failed flush the flushed
            // position never moves again.
            end = end.min(self.flushed_offset());
        }
        if !self.wait_dispatched(end, Duration::from_secs(30)).await {
            tracing::warn!(
                dispatched = self.dispatched_offset().0,
                end = end.0,
                "dispatch did not catch up before stop"
            );
        }
    }

    /// Flushes the ConsumeQueues and the index; the first failure is returned (both are tried).
    /// A failure here is the stop's error too, but does not end it: the CommitLog flush, the
    /// delay progress and the threads' stop still follow (the checkpoint's logics and index
    /// times only move with flushes that succeeded).
    async fn persist_builders(&self) -> std::io::Result<()> {
        let io = std::io::Error::other;
        let mut failed = self
            .cq_builder
            .send(FlushConsumeQueues { sync_all: false })
            .await
            .map_err(io)
            .and_then(|r| r)
            .err();
        if let Some(i) = &self.index_builder {
            if let Err(e) = i.send(FlushIndex).await.map_err(io).and_then(|r| r) {
                failed.get_or_insert(e);
            }
        }
        match failed {
            Some(e) => {
                tracing::error!(error = %e, "flushing the ConsumeQueues or the index at stop failed");
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Last: the CommitLog flush writes the checkpoint with what the builders published. A
    /// failure (a flush that failed earlier is reported here too) is the stop's error, after
    /// the threads are gone.
    async fn final_flush(&self) -> std::io::Result<()> {
        let io = std::io::Error::other;
        let flushed = match &self.flusher {
            FlushRef::Async(f) => f.send(FlushNow).await.map_err(io),
            FlushRef::Sync(g) => g.send(FlushNow).await.map_err(io),
        }
        .and_then(|r| r);
        match flushed {
            Ok(flushed) => {
                tracing::info!(flushed, "store flushed");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "the final CommitLog flush failed");
                Err(e)
            }
        }
    }

    /// After the final flush: the delay progress persisted counts only flushed deliveries
    /// (`schedule`), so now it can count all of them, and a clean restart repeats none.
    async fn persist_delay_offsets(&self) -> std::io::Result<()> {
        let persisted = self
            .schedule
            .send(PersistDelayOffsets)
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r);
        if let Err(e) = &persisted {
            tracing::error!(error = %e, "cannot persist delayOffset.json at stop");
        }
        persisted
    }

    /// Stops every arbiter and waits for their threads to end.
    async fn stop_threads(&self) -> std::io::Result<()> {
        let arbiters =
            std::mem::take(&mut *self.arbiters.lock().unwrap_or_else(|e| e.into_inner()));
        for a in &arbiters {
            a.stop();
        }
        tokio::task::spawn_blocking(move || {
            for a in arbiters {
                let _ = a.join();
            }
        })
        .await
        .map_err(std::io::Error::other)
    }
}
