//! `Committer` — moves CommitLog bytes from the write buffers of the TransientStorePool into the
//! files (RocketMQ's CommitRealTimeService), in ASYNC_FLUSH with `transientStorePoolEnable`. In
//! SYNC_FLUSH the `GroupCommitter` commits itself, right before each fdatasync (see
//! [`commit_all`]), so exactly one actor moves the committed position in either mode.
//!
//! In: [`CommitWake`] (coalesced, from the writer after appends and while it waits for a
//! buffer), a tick every `commitIntervalCommitLog`, [`CommitNow`] (tests), [`FinalCommit`] (clean
//! stop: up to [`FINAL_COMMIT_ATTEMPTS`] passes until everything written is committed, as
//! RocketMQ's CommitRealTimeService retries `commit(0)` at shutdown). Each run commits
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

use super::messages::{CommitNow, CommitWake, FinalCommit};
use super::state::StoreState;
use crate::metered::{Metered, Serve, Service};
use crate::wake::Waker;

/// Commit passes a clean stop makes before giving up (RocketMQ's `RETRY_TIMES_OVER`).
pub const FINAL_COMMIT_ATTEMPTS: u32 = 10;
/// Pause between two passes of the final commit, so a passing condition (an interrupted or
/// briefly failing device) can clear; at most `9 × 10 ms` in all.
const FINAL_COMMIT_BACKOFF: Duration = Duration::from_millis(10);

/// Runs `pass` until it commits up to `target`, at most `attempts` times, sleeping `backoff`
/// between passes. Returns the committed offset, or (after the last attempt) the last error —
/// or an error saying how far the passes got if none failed but none reached `target`.
pub fn commit_with_retries(
    attempts: u32,
    backoff: Duration,
    target: u64,
    mut pass: impl FnMut() -> std::io::Result<u64>,
) -> std::io::Result<u64> {
    let mut last = Err(std::io::Error::other("no commit attempt was made"));
    for attempt in 1..=attempts.max(1) {
        if attempt > 1 {
            std::thread::sleep(backoff);
        }
        last = match pass() {
            Ok(c) if c >= target => {
                if attempt > 1 {
                    tracing::info!(attempt, committed = c, "final commit succeeded on a retry");
                }
                return Ok(c);
            }
            Ok(c) => Err(std::io::Error::other(format!(
                "committed up to {c} of {target} written bytes"
            ))),
            Err(e) => Err(e),
        };
        if let Err(e) = &last {
            tracing::warn!(attempt, attempts, error = %e, "final commit attempt failed");
        }
    }
    last.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("the final commit failed after {attempts} attempts: {e}"),
        )
    })
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
        crate::wake::clear(&self.woken);
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

impl Serve<FinalCommit> for Committer {
    type Reply = std::io::Result<u64>;
    fn serve(&mut self, _: FinalCommit, _: &mut Context<Metered<Self>>) -> Self::Reply {
        // Tried even on a read-only store: the bytes still in the write buffers are acknowledged
        // messages that exist nowhere else, and the stop is their last chance to reach the file.
        // A failed pass moves nothing (see `commit_all`), so retrying is always safe.
        let target = self.view.max_wrote_offset();
        let r = commit_with_retries(FINAL_COMMIT_ATTEMPTS, FINAL_COMMIT_BACKOFF, target, || {
            self.run(0)
        });
        if let Err(e) = &r {
            let committed = self.state.committed.load(Ordering::Acquire);
            tracing::error!(
                error = %e,
                committed,
                wrote = target,
                lost_bytes = target.saturating_sub(committed),
                "write buffers not committed at stop: these messages are lost"
            );
        }
        r
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
    fn the_final_commit_retries_a_failed_pass_and_stops_at_the_first_success() {
        let mut calls = 0;
        let r = commit_with_retries(10, Duration::ZERO, 300, || {
            calls += 1;
            match calls {
                1 => Err(std::io::Error::other("EIO")),
                2 => Ok(100),
                _ => Ok(300),
            }
        });
        assert_eq!(r.unwrap(), 300);
        assert_eq!(calls, 3, "a failed pass and a short pass are both retried");
    }

    #[test]
    fn the_final_commit_gives_up_after_its_attempts_with_the_last_error() {
        let mut calls = 0;
        let e = commit_with_retries(FINAL_COMMIT_ATTEMPTS, Duration::ZERO, 300, || {
            calls += 1;
            Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!("pass {calls}"),
            ))
        })
        .unwrap_err();
        assert_eq!(calls, FINAL_COMMIT_ATTEMPTS);
        assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
        let text = e.to_string();
        assert!(
            text.contains("after 10 attempts") && text.contains("pass 10"),
            "{text}"
        );
    }

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
