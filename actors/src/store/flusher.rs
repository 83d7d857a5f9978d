//! CommitLog durability: `Flusher` (ASYNC_FLUSH, RocketMQ's FlushRealTimeService) and
//! `GroupCommitter` (SYNC_FLUSH, GroupCommitService), plus the `checkpoint` file they own.
//!
//! * `Flusher` — every `flushIntervalCommitLog` it flushes when at least
//!   `flushCommitLogLeastPages` pages are dirty, and everything every
//!   `flushCommitLogThoroughInterval`. With `flushCommitLogTimed=false` a [`FlushWake`]
//!   (coalesced; from the writer after appends, or from the `Committer` after a commit when write
//!   buffers are on) runs the same step at once; with `true` (the default) wakes are ignored, as
//!   RocketMQ's timed flusher sleeps through them.
//! * `GroupCommitter` — in: [`FlushUpTo`] `{end}` from the writer for each append that waits
//!   (`WAIT` absent or true). One flush covers every request pending when it starts; requests that
//!   arrive during a flush are covered by the next: the flush runs on a [`RunGroupCommit`] the
//!   group committer sends itself, queued behind the requests already in its mailbox (a 0 ms
//!   timer would wait for tokio's next 1 ms tick). Out: the replies, and a `Wake` to the reput
//!   dispatcher (in SYNC_FLUSH it may only dispatch flushed bytes). With write buffers it first
//!   commits everything written (`pwrite`), then fdatasyncs — it is the committer in SYNC_FLUSH.
//!
//! Only committed bytes are flushed: with write buffers a file is flushed with `fdatasync` up to
//! its committed position (see `MappedFile::flush`).
//!
//! Both are the only movers of the flushed position. A failed flush never moves it: waiters get
//! the error and the store turns read-only with the reason (apache/rocketmq#3129). The checkpoint's
//! physic timestamp is the store time captured *before* a flush that reached the whole log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::store::checkpoint::Checkpoint;
use actormq_core::store::mapped_file_queue::FileQueueView;
use tokio::sync::oneshot;

use super::committer::commit_all;
use super::reput::{ReputDispatcher, Wake};
use super::state::StoreState;
use crate::metered::{ActorRef, Metered, Serve, Service};

/// Flush everything now (clean stop); replies with the flushed offset.
pub struct FlushNow;
impl Message for FlushNow {
    type Result = std::io::Result<u64>;
}

/// Run the async flusher's step now (`flushCommitLogTimed=false`; coalesced, see `Waker`).
pub struct FlushWake;
impl Message for FlushWake {
    type Result = ();
}

/// Who commits write-buffer bytes relative to a flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// No write buffers: written bytes are in the page cache already.
    Unbuffered,
    /// SYNC_FLUSH with write buffers: every flush commits everything written first.
    CommitFirst,
    /// ASYNC_FLUSH with write buffers: the `Committer` commits; a flush covers what it committed.
    ByCommitter,
}

/// What both flushing actors share: the files, the positions, the checkpoint.
pub struct FlushCore {
    view: FileQueueView,
    state: Arc<StoreState>,
    checkpoint: Checkpoint,
    last_checkpoint: Instant,
    disk: DiskWatch,
    commit: CommitMode,
}

/// Disk-space guard (RocketMQ's `diskSpaceWarningLevelRatio`): over `warning_pct` used, the store
/// refuses writes with a remark naming the path, the usage and the limit; at or below `clear_pct`
/// it accepts them again, without a restart.
pub struct DiskWatch {
    pub path: std::path::PathBuf,
    pub warning_pct: u32,
    pub clear_pct: u32,
    last: Option<Instant>,
}

impl DiskWatch {
    pub fn new(path: std::path::PathBuf, warning_pct: u32, clear_pct: u32) -> Self {
        DiskWatch {
            path,
            warning_pct,
            clear_pct,
            last: None,
        }
    }

    /// Used percentage of the file system holding `path` (as `df` computes it).
    pub fn used_pct(path: &std::path::Path) -> std::io::Result<f64> {
        use std::os::unix::ffi::OsStrExt;
        let c =
            std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid NUL-terminated path and an out-pointer to a zeroed struct.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let total = st.f_blocks as f64;
        let avail = st.f_bavail as f64;
        let used = total - st.f_bfree as f64;
        if used + avail <= 0.0 {
            return Ok(0.0);
        }
        Ok(100.0 * used / (used + avail))
    }

    fn check(&mut self, state: &StoreState) {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(500))
        {
            return;
        }
        self.last = Some(Instant::now());
        let pct = match Self::used_pct(&self.path) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot measure disk usage");
                return;
            }
        };
        let full = state.disk_full.load().is_some();
        if pct > self.warning_pct as f64 {
            let reason = format!(
                "disk full: {} is {pct:.1}% used, over diskSpaceWarningLevelRatio {}%; writes resume at or below {}%",
                self.path.display(),
                self.warning_pct,
                self.clear_pct
            );
            if !full {
                tracing::error!(%reason, "refusing writes");
            }
            state.disk_full.store(Some(Arc::new(reason)));
        } else if full && pct <= self.clear_pct as f64 {
            tracing::info!(path = %self.path.display(), used_pct = pct, "disk space available again; accepting writes");
            state.disk_full.store(None);
        }
    }
}

impl FlushCore {
    pub fn new(
        view: FileQueueView,
        state: Arc<StoreState>,
        checkpoint: Checkpoint,
        disk: DiskWatch,
    ) -> Self {
        FlushCore {
            view,
            state,
            checkpoint,
            last_checkpoint: Instant::now(),
            disk,
            commit: CommitMode::Unbuffered,
        }
    }

    pub fn with_commit_mode(mut self, commit: CommitMode) -> Self {
        self.commit = commit;
        self
    }

    /// Periodic housekeeping of both flushing actors.
    fn tick(&mut self) {
        self.disk.check(&self.state);
    }

    /// Flushes the files holding unflushed bytes; returns the new flushed offset.
    fn flush(&mut self, least_pages: u64) -> std::io::Result<u64> {
        // The store time of a record known to be below what this flush covers, captured first.
        let ts = match self.commit {
            CommitMode::ByCommitter => self.state.committed_ts.load(Ordering::Acquire),
            _ => self.state.last_store_ts.load(Ordering::Acquire),
        };
        if self.commit == CommitMode::CommitFirst {
            // A failed commit has turned the store read-only (as a failed flush does).
            commit_all(&self.view, &self.state, 0)?;
        }
        let target = self.view.max_offset();
        let mut upto = self.view.min_offset();
        let from = self.state.flushed();
        for f in self.view.files().iter() {
            if f.file_from_offset() + f.file_size() <= from {
                upto = f.file_from_offset() + f.file_size();
                continue;
            }
            let pos = match f.flush(least_pages) {
                Ok(p) => p,
                Err(e) => {
                    let reason = format!("flushing {} failed: {e}", f.path().display());
                    self.state.set_read_only(reason.clone());
                    return Err(std::io::Error::new(e.kind(), reason));
                }
            };
            upto = f.file_from_offset() + pos;
            if pos < f.file_size() {
                break;
            }
        }
        self.state
            .flushed
            .fetch_max(upto, std::sync::atomic::Ordering::AcqRel);
        if upto >= target && ts > 0 {
            self.checkpoint.set_physic_msg_timestamp(ts);
        }
        Ok(upto)
    }

    /// Writes the checkpoint if a second has passed (or `force`).
    fn maybe_checkpoint(&mut self, force: bool) {
        if !force && self.last_checkpoint.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_checkpoint = Instant::now();
        let s = &self.state;
        let logics = s.logics_ts.load(std::sync::atomic::Ordering::Acquire);
        if logics > 0 {
            self.checkpoint.set_logics_msg_timestamp(logics);
        }
        let index = s.index_ts.load(std::sync::atomic::Ordering::Acquire);
        if index > 0 {
            self.checkpoint.set_index_msg_timestamp(index);
        }
        if let Err(e) = self.checkpoint.flush() {
            tracing::error!(error = %e, "writing the checkpoint failed");
        }
    }

    fn flush_now(&mut self) -> std::io::Result<u64> {
        let r = self.flush(0);
        self.maybe_checkpoint(true);
        r
    }
}

pub struct Flusher {
    core: FlushCore,
    interval: Duration,
    least_pages: u64,
    thorough: Duration,
    last_thorough: Instant,
    /// `flushCommitLogTimed`: true ⇒ only the interval runs a flush; wakes are ignored.
    timed: bool,
    /// Cleared when a `FlushWake` is handled (the sender's side of the coalescing).
    woken: Arc<AtomicBool>,
}

impl Flusher {
    pub fn new(core: FlushCore, interval: Duration, least_pages: u64, thorough: Duration) -> Self {
        Flusher {
            core,
            interval,
            least_pages,
            thorough,
            last_thorough: Instant::now(),
            timed: true,
            woken: Arc::new(AtomicBool::new(false)),
        }
    }

    /// `flushCommitLogTimed=false`: wakes (sharing `woken` with the sender) flush at once.
    pub fn woken_by_appends(mut self, woken: Arc<AtomicBool>) -> Self {
        self.timed = false;
        self.woken = woken;
        self
    }

    /// RocketMQ's FlushRealTimeService loop body.
    fn step(&mut self) {
        let least = if self.last_thorough.elapsed() >= self.thorough {
            self.last_thorough = Instant::now();
            0
        } else {
            self.least_pages
        };
        if self.core.state.read_only.load().is_some() {
            return;
        }
        if self.core.flush(least).is_ok() {
            self.core.maybe_checkpoint(false);
        }
    }
}

/// Nice steps the async flusher's thread runs below the broker's. Its `fdatasync` spends ~10 ms
/// of CPU per 500 ms flush at 120 k msgs/s (page walking and block allocation of the write-back),
/// in one burst: on two cores that burst queued the connection threads and the writer behind it
/// (client p99 4–7 ms at half the peak; 1.8 ms with no flush during the run). Below them it runs
/// in the gaps. ASYNC_FLUSH promises nothing about when a flush happens, and the kernel's own
/// write-back bounds the dirty data either way; the SYNC_FLUSH group committer, which replies
/// to producers, keeps its priority.
const FLUSHER_NICE: i32 = 10;

impl Service for Flusher {
    const NAME: &'static str = "commitlog_flusher";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        if let Err(e) = crate::fsutil::lower_this_thread_priority(FLUSHER_NICE) {
            tracing::warn!(error = %e, "could not lower the CommitLog flusher's priority");
        }
        ctx.run_interval(self.interval, |act, _| {
            act.inner.core.tick();
            act.inner.step();
        });
    }
}

impl Serve<FlushWake> for Flusher {
    type Reply = ();
    fn serve(&mut self, _: FlushWake, _: &mut Context<Metered<Self>>) {
        self.woken.store(false, Ordering::Release);
        if !self.timed {
            self.step();
        }
    }
}

impl Serve<FlushNow> for Flusher {
    type Reply = std::io::Result<u64>;
    fn serve(&mut self, _: FlushNow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.core.flush_now()
    }
}

/// Reply when everything up to `end` is on disk (or an error saying why it is not).
pub struct FlushUpTo(pub u64);
impl Message for FlushUpTo {
    type Result = Result<(), String>;
}

pub struct GroupCommitter {
    core: FlushCore,
    waiters: Vec<(u64, oneshot::Sender<Result<(), String>>)>,
    scheduled: bool,
    reput: Option<ActorRef<ReputDispatcher>>,
    /// Our own address, for [`RunGroupCommit`].
    me: Option<ActorRef<GroupCommitter>>,
}

/// Runs the pending group commit; the group committer sends it to itself.
pub struct RunGroupCommit;
impl Message for RunGroupCommit {
    type Result = ();
}

impl GroupCommitter {
    pub fn new(core: FlushCore, reput: Option<ActorRef<ReputDispatcher>>) -> Self {
        GroupCommitter {
            core,
            waiters: Vec::new(),
            scheduled: false,
            reput,
            me: None,
        }
    }

    fn schedule(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.scheduled {
            return;
        }
        self.scheduled = true;
        // Queued behind every request already in the mailbox, so they all join this flush. Not
        // `run_later(0)`: a tokio timer fires on its next 1 ms tick, which added about a
        // millisecond to every SYNC_FLUSH reply (~10 times a write+fdatasync on an idle disk).
        let sent = self
            .me
            .as_ref()
            .is_some_and(|me| me.try_notify(RunGroupCommit));
        if !sent {
            // Mailbox full (a large group is waiting anyway) or not started: the timer then.
            ctx.run_later(Duration::ZERO, |act, ctx| act.inner.commit(ctx));
        }
    }

    fn commit(&mut self, ctx: &mut Context<Metered<Self>>) {
        self.scheduled = false;
        if self.waiters.is_empty() {
            return;
        }
        match self.core.flush(0) {
            Ok(flushed) => {
                let (done, pending): (Vec<_>, Vec<_>) =
                    self.waiters.drain(..).partition(|(end, _)| *end <= flushed);
                let st = &self.core.state;
                st.group_flushes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                st.group_waiters
                    .fetch_add(done.len() as u64, std::sync::atomic::Ordering::Relaxed);
                for (_, tx) in done {
                    let _ = tx.send(Ok(()));
                }
                self.waiters = pending;
                if let Some(r) = &self.reput {
                    r.try_notify(Wake);
                }
                self.core.maybe_checkpoint(false);
                if !self.waiters.is_empty() {
                    // An end in a file that did not exist yet at this flush: flush again.
                    self.schedule(ctx);
                }
            }
            Err(e) => {
                let why = e.to_string();
                for (_, tx) in self.waiters.drain(..) {
                    let _ = tx.send(Err(why.clone()));
                }
            }
        }
    }
}

impl Service for GroupCommitter {
    const NAME: &'static str = "group_committer";
    const MAILBOX: usize = 16_384;

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        self.me = Some(ActorRef::of(ctx));
        // Messages stored with WAIT=false are flushed within 10 ms too (RocketMQ flushes on every
        // 10 ms wake-up of GroupCommitService).
        ctx.run_interval(Duration::from_millis(10), |act, _| {
            let me = &mut act.inner;
            me.core.tick();
            // Written, not just readable: with write buffers the commit happens in this flush.
            if me.core.state.read_only.load().is_none()
                && me.core.state.flushed() < me.core.view.max_wrote_offset()
            {
                let _ = me.core.flush(0);
                if let Some(r) = &me.reput {
                    r.try_notify(Wake);
                }
                me.core.maybe_checkpoint(false);
            }
        });
    }
}

impl Serve<RunGroupCommit> for GroupCommitter {
    type Reply = ();
    fn serve(&mut self, _: RunGroupCommit, ctx: &mut Context<Metered<Self>>) {
        self.commit(ctx);
    }
}

impl Serve<FlushUpTo> for GroupCommitter {
    type Reply = actix::ResponseFuture<Result<(), String>>;
    fn serve(&mut self, m: FlushUpTo, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if self.core.state.flushed() >= m.0 {
            return Box::pin(async { Ok(()) });
        }
        if let Some(r) = self.core.state.read_only.load_full() {
            let why = r.to_string();
            return Box::pin(async move { Err(why) });
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push((m.0, tx));
        self.schedule(ctx);
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err("the group committer stopped".into()))
        })
    }
}

impl Serve<FlushNow> for GroupCommitter {
    type Reply = std::io::Result<u64>;
    fn serve(&mut self, _: FlushNow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.core.flush_now()
    }
}
