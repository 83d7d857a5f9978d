//! `Committer` — moves CommitLog bytes from the write buffers of the TransientStorePool into the
//! files (RocketMQ's CommitRealTimeService), in ASYNC_FLUSH with `transientStorePoolEnable`. In
//! SYNC_FLUSH the `GroupCommitter` commits itself, right before each fdatasync (see
//! [`commit_all`]), so exactly one actor moves the committed position in either mode.
//!
//! In: [`CommitWake`] (coalesced, from the writer after appends and while it waits for a
//! buffer), a tick every `commitIntervalCommitLog`, [`CommitNow`] (clean stop). Each run commits
//! with `commitCommitLogLeastPages` pages, or with 0 once `commitCommitLogThoroughInterval` has
//! passed since the last thorough commit. Out: when bytes moved, a wake to the reput dispatcher
//! (committed bytes are what readers and dispatch may see) and to the flusher (which flushes only
//! committed bytes; a timed flusher ignores it).
//!
//! Owns: the committed position (`StoreState::committed`) and the store time of the newest
//! committed record (`StoreState::committed_ts`, which the flusher writes to the checkpoint). A
//! full, fully committed file gives its buffer back to the pool here. Runs on its own thread:
//! `pwrite` blocks.
//!
//! Invariants: committed only moves forward and never past what the writer published; a commit
//! error never moves it — the store turns read-only with the reason (as for a flush error) and
//! the bytes stay in the buffer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::store::mapped_file_queue::FileQueueView;

use super::state::StoreState;
use super::wake::Waker;
use crate::metered::{Metered, Serve, Service};

/// Commit now (coalesced wake-up; see [`Waker`]).
pub struct CommitWake;
impl Message for CommitWake {
    type Result = ();
}

/// Commit everything written (clean stop); replies with the committed offset.
pub struct CommitNow;
impl Message for CommitNow {
    type Result = std::io::Result<u64>;
}

/// One commit pass over the files from the committed position on; publishes the new committed
/// position (and the store time captured *before* the pass when it reached everything written).
/// A failure turns the store read-only. Returns the committed offset.
pub fn commit_all(
    view: &FileQueueView,
    state: &StoreState,
    least_pages: u64,
) -> std::io::Result<u64> {
    // Loaded before the pass: every record stored at or before `ts` is below `wrote`.
    let ts = state.last_store_ts.load(Ordering::Acquire);
    let wrote = view.max_wrote_offset();
    let from = state.committed.load(Ordering::Acquire);
    match view.commit(from, least_pages) {
        Ok(c) => {
            state.committed.fetch_max(c, Ordering::AcqRel);
            if c >= wrote && ts > 0 {
                state.committed_ts.fetch_max(ts, Ordering::AcqRel);
            }
            Ok(c)
        }
        Err(e) => {
            let reason = format!("committing CommitLog bytes from offset {from} failed: {e}");
            state.set_read_only(reason.clone());
            Err(std::io::Error::new(e.kind(), reason))
        }
    }
}

pub struct Committer {
    view: FileQueueView,
    state: Arc<StoreState>,
    interval: Duration,
    least_pages: u64,
    thorough: Duration,
    last_thorough: Instant,
    /// Cleared when a `CommitWake` is handled (the writer's side of the coalescing).
    woken: Arc<AtomicBool>,
    /// Told after bytes moved.
    after_commit: Vec<Waker>,
}

impl Committer {
    pub fn new(
        view: FileQueueView,
        state: Arc<StoreState>,
        interval: Duration,
        least_pages: u64,
        thorough: Duration,
        woken: Arc<AtomicBool>,
        after_commit: Vec<Waker>,
    ) -> Self {
        Committer {
            view,
            state,
            interval,
            least_pages,
            thorough,
            last_thorough: Instant::now(),
            woken,
            after_commit,
        }
    }

    fn run(&mut self, least_pages: u64) -> std::io::Result<u64> {
        let before = self.state.committed.load(Ordering::Acquire);
        let c = commit_all(&self.view, &self.state, least_pages)?;
        if c > before {
            for w in &self.after_commit {
                w.wake();
            }
        }
        Ok(c)
    }

    /// A tick or a wake: RocketMQ's loop body (least pages, or 0 after the thorough interval).
    fn step(&mut self) {
        if self.state.read_only.load().is_some() {
            // A failed commit or flush: nothing moves until a restart (see `StoreState`).
            return;
        }
        let least = if self.last_thorough.elapsed() >= self.thorough {
            self.last_thorough = Instant::now();
            0
        } else {
            self.least_pages
        };
        // The error is already recorded (read-only, logged) by `commit_all`.
        let _ = self.run(least);
    }
}

impl Service for Committer {
    const NAME: &'static str = "commitlog_committer";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(self.interval, |act, _| act.inner.step());
    }
}

impl Serve<CommitWake> for Committer {
    type Reply = ();
    fn serve(&mut self, _: CommitWake, _: &mut Context<Metered<Self>>) {
        self.woken.store(false, Ordering::Release);
        self.step();
    }
}

impl Serve<CommitNow> for Committer {
    type Reply = std::io::Result<u64>;
    fn serve(&mut self, _: CommitNow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(r) = self.state.read_only.load_full() {
            return Err(std::io::Error::other(format!(
                "the store is read-only: {r}"
            )));
        }
        self.run(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actormq_core::store::mapped_file::Warm;
    use actormq_core::store::mapped_file_queue::MappedFileQueue;
    use actormq_core::store::transient_pool::TransientStorePool;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_commit_error_turns_the_store_read_only_and_moves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096).unwrap();
        let pool = TransientStorePool::new(1, 4096).unwrap();
        let f = q.create_and_push(0, Warm::No).unwrap();
        f.attach_write_buffer(pool.borrow().unwrap()).unwrap();
        // SAFETY: the test is the file's only writer, appending at its write position.
        unsafe { f.write_slice(0, 3).copy_from_slice(b"xyz") };
        f.publish_wrote(3);
        let state = StoreState::default();
        state.last_store_ts.store(42, Ordering::Release);
        // A read-only descriptor in place of the file's: the pwrite fails (EBADF).
        let ro = std::fs::File::open(f.path()).unwrap();
        assert!(unsafe { libc::dup2(ro.as_raw_fd(), f.as_raw_fd()) } >= 0);

        let e = commit_all(&q.view(), &state, 0).unwrap_err();
        assert!(e.to_string().contains("committing CommitLog bytes"), "{e}");
        let why = state.refusal().expect("writes are refused");
        assert!(
            why.contains("read-only") && why.contains("committing"),
            "{why}"
        );
        assert_eq!(
            state.committed.load(Ordering::Acquire),
            0,
            "committed did not move"
        );
        assert_eq!(state.committed_ts.load(Ordering::Acquire), 0);
        assert_eq!(q.view().max_offset(), 0, "nothing became readable");
    }
}
