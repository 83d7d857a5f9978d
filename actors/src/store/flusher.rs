//! CommitLog durability: `Flusher` (ASYNC_FLUSH, RocketMQ's FlushRealTimeService) and
//! `GroupCommitter` (SYNC_FLUSH, GroupCommitService), plus the `checkpoint` file they own.
//!
//! * `Flusher` — every `flushIntervalCommitLog` it flushes when at least
//!   `flushCommitLogLeastPages` pages are dirty, and everything every
//!   `flushCommitLogThoroughInterval`. With `flushCommitLogTimed=false` a [`FlushWake`]
//!   (coalesced; from the writer after appends, or from the `Committer` after a commit when write
//!   buffers are on) runs the same step at once; with `true` (the default) wakes are ignored, as
//!   RocketMQ's timed flusher sleeps through them. Between flushes, every 10 ms, it starts
//!   write-back of each 4 MiB committed since (`Flusher::write_behind`), so the flush finds the
//!   pages on their way to disk rather than writing them all back in one burst.
//! * `GroupCommitter` — in: [`FlushWaits`] from the writer, once per burst of its mailbox: a
//!   [`FlushUpTo`] `{end, msgs, reply}` for each append message of the burst with messages that
//!   wait (`wait_store_msg_ok`: the producer's `WAIT` absent or true; `msgs` of them: one for
//!   `AppendMessage`, more for an `AppendBatch` of the broker's SENDs or a producer batch), sent
//!   once the burst's bytes are committed (write rings; with write buffers the group committer
//!   commits them itself before its flush). One flush covers every request pending
//!   when it starts; requests that arrive during a flush are covered by the next: the flush runs
//!   on a [`RunGroupCommit`] the group committer sends itself, queued behind the requests already
//!   in its mailbox (a 0 ms timer would wait for tokio's next 1 ms tick). Out: each waiter's
//!   [`FlushUpTo::reply`] answered on this thread, straight to the producer ([`FlushOutcome`]; the
//!   producer's own timer gives FLUSH_DISK_TIMEOUT if `syncFlushTimeout` passes first), and a `Wake`
//!   to the reput dispatcher (in SYNC_FLUSH it may only dispatch flushed bytes), and with write
//!   rings a `ZeroStep` to the allocator (zero the next CommitLog file a step further now that
//!   the disk is between flushes; see `allocator`). With write buffers it first commits
//!   everything written (`pwrite`), then fdatasyncs — it is the committer in SYNC_FLUSH.
//!
//! Only committed bytes are flushed: with write buffers a file is flushed with `fdatasync` up to
//! its committed position (see `MappedFile::flush`).
//!
//! Both are the only movers of the flushed position. A failed flush never moves it: waiters get
//! the error and the store turns read-only with the reason (apache/rocketmq#3129). Nor does any
//! later one: the first flush failure is kept and no flush is tried again (a second `fdatasync`
//! would report success over pages the first lost), so the clean stop fails too and leaves the
//! abort file. The checkpoint's physic timestamp is the store time captured *before* a flush that
//! reached the whole log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::store::checkpoint::Checkpoint;
use actormq_core::store::mapped_file_queue::FileQueueView;

use super::allocator::MappedFileAllocator;
use super::committer::commit_all;
use super::messages::{
    FlushNow, FlushOutcome, FlushUpTo, FlushWaits, FlushWake, RunGroupCommit, Wake, ZeroStep,
};
use super::reput::ReputDispatcher;
use super::state::StoreState;
use crate::metered::{ActorRef, Metered, Serve, Service};

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
    /// The first failed flush, kept for good (fsyncgate): Linux reports a write-back error
    /// once, and the next `fdatasync` of the file returns 0 while the pages that failed may be
    /// gone. So no flush is tried again: the flushed position and the checkpoint's physic time
    /// stay where the last good flush left them, every later flush — the clean stop's too —
    /// returns this error, and the stop leaves the abort file for an abnormal recovery. (A failed
    /// *commit* is not kept here: its bytes are still in the write buffer, and retrying is safe.)
    failed: Option<(std::io::ErrorKind, String)>,
    /// Woken after each commit this core makes (`CommitMode::CommitFirst`): the master's HA
    /// connections, which send committed bytes.
    after_commit: Option<crate::wake::Waker>,
}

/// Disk-space guard (RocketMQ's `diskSpaceWarningLevelRatio`): over `warning_pct` used, the store
/// refuses writes with a remark naming the path, the usage and the limit; at or below `clear_pct`
/// it accepts them again, without a restart. Like RocketMQ it watches two disks: the CommitLog's
/// (`storePathCommitLog`) and the ConsumeQueues' (`storePathRootDir/consumequeue`; the index
/// lives beside it, in `storePathRootDir/index`). They are often one file system; when `storePathCommitLog` puts the CommitLog
/// on another, a full root disk would otherwise let appends go on that no ConsumeQueue can take.
pub struct DiskWatch {
    /// (what lives there, path), the CommitLog first.
    pub disks: Vec<(&'static str, std::path::PathBuf)>,
    pub warning_pct: u32,
    pub clear_pct: u32,
    /// How usage is measured: [`DiskWatch::used_pct`]; a test puts in its own.
    measure: fn(&std::path::Path) -> std::io::Result<f64>,
    last: Option<Instant>,
}

impl DiskWatch {
    /// Watches the CommitLog's disk at `commit_log` and the ConsumeQueues' at `consume_queue`.
    pub fn new(
        commit_log: std::path::PathBuf,
        consume_queue: std::path::PathBuf,
        warning_pct: u32,
        clear_pct: u32,
    ) -> Self {
        DiskWatch {
            disks: Self::store_disks(commit_log, consume_queue),
            warning_pct,
            clear_pct,
            measure: Self::used_pct,
            last: None,
        }
    }

    /// The store's two disks as (what lives there, path), the CommitLog's first: what this
    /// guard and retention (`StoreCleaner`) measure.
    pub fn store_disks(
        commit_log: std::path::PathBuf,
        consume_queue: std::path::PathBuf,
    ) -> Vec<(&'static str, std::path::PathBuf)> {
        vec![("CommitLog", commit_log), ("ConsumeQueue", consume_queue)]
    }

    /// Used percentage of the file system holding `path` (as `df` computes it). A path not made
    /// yet (the ConsumeQueue directory of a store without a message) is measured at its nearest
    /// existing ancestor: the same file system it will be made on.
    pub fn used_pct(path: &std::path::Path) -> std::io::Result<f64> {
        use std::os::unix::ffi::OsStrExt;
        let path = path
            .ancestors()
            .find(|p| p.exists())
            .unwrap_or(std::path::Path::new("/"));
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
        // The first disk over the limit; else, while refusing, the first disk still over the
        // clear level (it holds the refusal, and the remark names it with its usage now); else
        // every disk is at or below the clear level. A disk that cannot be measured keeps the
        // state as it is.
        let mut over = None;
        let mut holding = None;
        let mut unmeasured = false;
        for (what, path) in &self.disks {
            match (self.measure)(path) {
                Ok(pct) if pct > self.warning_pct as f64 => {
                    over.get_or_insert((*what, path, pct));
                }
                Ok(pct) if pct > self.clear_pct as f64 => {
                    holding.get_or_insert((*what, path, pct));
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot measure disk usage");
                    unmeasured = true;
                }
            }
        }
        let full = state.disk_full.load().is_some();
        if let Some((what, path, pct)) = over {
            let reason = format!(
                "disk full: {} ({what} files) is {pct:.1}% used, over diskSpaceWarningLevelRatio {}%; writes resume at or below {}%",
                path.display(),
                self.warning_pct,
                self.clear_pct
            );
            if !full {
                tracing::error!(%reason, "refusing writes");
            }
            state.disk_full.store(Some(Arc::new(reason)));
        } else if full && !unmeasured {
            match holding {
                Some((what, path, pct)) => state.disk_full.store(Some(Arc::new(format!(
                    "disk full: {} ({what} files) is {pct:.1}% used, back under diskSpaceWarningLevelRatio {}% but writes resume only at or below {}%",
                    path.display(),
                    self.warning_pct,
                    self.clear_pct
                )))),
                None => {
                    tracing::info!(disks = ?self.disks, clear_pct = self.clear_pct, "disk space available again on every store disk; accepting writes");
                    state.disk_full.store(None);
                }
            }
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
            failed: None,
            after_commit: None,
        }
    }

    /// Wakes `w` after each commit (see the field).
    pub fn waking_after_commit(mut self, w: crate::wake::Waker) -> Self {
        self.after_commit = Some(w);
        self
    }

    pub fn with_commit_mode(mut self, commit: CommitMode) -> Self {
        self.commit = commit;
        self
    }

    /// Periodic housekeeping of both flushing actors.
    fn tick(&mut self) {
        self.disk.check(&self.state);
    }

    /// Flushes the files holding unflushed bytes; returns the new flushed offset. After a failed
    /// flush, only that failure (see `failed`).
    fn flush(&mut self, least_pages: u64) -> std::io::Result<u64> {
        if let Some((kind, reason)) = &self.failed {
            return Err(std::io::Error::new(*kind, reason.clone()));
        }
        // The store time of a record known to be below what this flush covers, captured first.
        let ts = match self.commit {
            CommitMode::ByCommitter => self.state.committed_ts.load(Ordering::Acquire),
            _ => self.state.last_store_ts.load(Ordering::Acquire),
        };
        if self.commit == CommitMode::CommitFirst {
            // A failed commit has turned the store read-only (as a failed flush does).
            commit_all(&self.view, &self.state, 0)?;
            if let Some(w) = &self.after_commit {
                w.wake();
            }
        }
        let target = self.view.max_offset();
        let mut upto = self.view.min_offset();
        let from = self.state.flushed();
        let started = Instant::now();
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
                    self.failed = Some((e.kind(), reason.clone()));
                    return Err(std::io::Error::new(e.kind(), reason));
                }
            };
            upto = f.file_from_offset() + pos;
            if pos < f.file_size() {
                break;
            }
        }
        if upto > from {
            self.state.flush_time.observe(started.elapsed());
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
    /// Where the next write-behind starts (global offset; see [`Flusher::write_behind`]).
    behind: u64,
    /// A write-behind failed: logged once, then left to the flush, which reports the cause.
    behind_failed: bool,
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
            behind: 0,
            behind_failed: false,
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

    /// Starts write-back of what was committed since the last call, once at least
    /// [`WRITE_BEHIND_BYTES`] are pending (`MappedFile::write_behind`), so that the timed flush
    /// finds the pages on their way to disk instead of writing them all back in one burst.
    fn write_behind(&mut self) {
        if self.behind_failed || self.core.state.read_only.load().is_some() {
            return;
        }
        let mut from = self.behind.max(self.core.state.flushed());
        for f in self.core.view.files().iter() {
            let (start, end) = (f.file_from_offset(), f.file_from_offset() + f.file_size());
            if end <= from {
                continue;
            }
            match f.write_behind(from.saturating_sub(start), WRITE_BEHIND_BYTES) {
                Ok(pos) => {
                    self.behind = start + pos;
                    if pos < f.file_size() {
                        break;
                    }
                    from = end;
                }
                Err(e) => {
                    // Nothing is lost: the flush writes the same pages and reports any error.
                    tracing::warn!(file = %f.path().display(), error = %e, "early write-back failed; leaving it to the flush");
                    self.behind_failed = true;
                    break;
                }
            }
        }
    }
}

/// How often the async flusher starts write-back of newly committed bytes, and how many must be
/// pending: at 120 k msgs/s of 1 KiB (~140 MB/s), one call of ~4 MiB every third tick; an idle
/// store costs a load of two positions per tick.
const WRITE_BEHIND_TICK: Duration = Duration::from_millis(10);
const WRITE_BEHIND_BYTES: u64 = 4 << 20;

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
        ctx.run_interval(WRITE_BEHIND_TICK, |act, _| act.inner.write_behind());
    }
}

impl Serve<FlushWake> for Flusher {
    type Reply = ();
    fn serve(&mut self, _: FlushWake, _: &mut Context<Metered<Self>>) {
        crate::wake::clear(&self.woken);
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

/// The appends waiting for a flush, in arrival order.
#[derive(Default)]
struct Waiters {
    list: Vec<FlushUpTo>,
    /// The other half of `answer`'s double buffer, kept for its capacity.
    spare: Vec<FlushUpTo>,
}

impl Waiters {
    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn push(&mut self, w: FlushUpTo) {
        self.list.push(w);
    }

    /// Answers (in order) every waiter `due` picks with `outcome`, keeps the others in order;
    /// returns how many messages the due ones covered. One pass, no allocation once warm.
    fn answer(&mut self, due: impl Fn(&FlushUpTo) -> bool, outcome: FlushOutcome) -> u64 {
        let mut n = 0;
        let mut keep = std::mem::take(&mut self.spare);
        for w in self.list.drain(..) {
            if due(&w) {
                // Nobody waiting (the producer's deadline passed, or it left) is fine: the flush
                // still covered it.
                let _ = w.reply.send(outcome.clone());
                n += u64::from(w.msgs);
            } else {
                keep.push(w);
            }
        }
        self.spare = std::mem::replace(&mut self.list, keep);
        n
    }

    /// Answers every waiter whose end is at or below `flushed`, after telling `count` how many
    /// messages that is: a producer that reads the counters once answered finds itself in them.
    fn flushed(&mut self, flushed: u64, count: impl FnOnce(u64)) {
        let due = |w: &FlushUpTo| w.end <= flushed;
        count(
            self.list
                .iter()
                .filter(|w| due(w))
                .map(|w| u64::from(w.msgs))
                .sum(),
        );
        self.answer(due, FlushOutcome::Flushed);
    }

    /// The flush failed: every waiter gets the reason.
    fn fail(&mut self, why: &str) {
        self.answer(|_| true, FlushOutcome::Failed(why.to_owned()));
    }
}

pub struct GroupCommitter {
    core: FlushCore,
    waiters: Waiters,
    scheduled: bool,
    reput: Option<ActorRef<ReputDispatcher>>,
    /// Our own address, for [`RunGroupCommit`].
    me: Option<ActorRef<GroupCommitter>>,
    /// Told after each group commit, to zero-write the next CommitLog file a step further while
    /// the disk is between flushes (see `allocator`).
    zeroer: Option<ActorRef<MappedFileAllocator>>,
    /// A timed flush moved the flushed position and no wait it covered has been counted yet:
    /// the first wait that arrives already covered counts it as a group flush, so that messages
    /// per group flush stays the mean batch.
    timed_flush_uncounted: bool,
}

/// Flushes of up to this many bytes are followed by a [`ZeroStep`]. Zeroing ahead saves each
/// flush a fixed extent-conversion write (~100 µs here: a 16 KiB write + `fdatasync` 167–220 →
/// 100–131 µs, 128 KiB 249–271 → 150–171 µs), which is most of a small group's latency, but the
/// zeros cost as much disk time as the data and a direct write (CPU) per step: with the largest
/// groups the two cores and the disk's bandwidth are the limit (256 producers gained nothing from
/// it, and lost a fifth of their throughput when each file was zeroed whole). 80 KiB is 64
/// appends of 1 KiB bodies (1,190-byte records), the group size the rule was measured at (the
/// 64-producer row's mean flush went from 229–282 µs to 183–228 µs). Bytes, not waiters: one
/// waiter can be a whole batch of the broker's SENDs.
pub const ZERO_AFTER_FLUSHES_UP_TO: u64 = 80 << 10;

impl GroupCommitter {
    pub fn new(core: FlushCore, reput: Option<ActorRef<ReputDispatcher>>) -> Self {
        GroupCommitter {
            core,
            waiters: Waiters::default(),
            scheduled: false,
            reput,
            me: None,
            zeroer: None,
            timed_flush_uncounted: false,
        }
    }

    /// Sends a [`ZeroStep`] to `allocator` after each group commit.
    pub fn zeroing_ahead(mut self, allocator: ActorRef<MappedFileAllocator>) -> Self {
        self.zeroer = Some(allocator);
        self
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
        let before = self.core.state.flushed();
        // A stalled disk, for the test that FLUSH_DISK_TIMEOUT still comes in time.
        fail::fail_point!("group-commit-flush");
        match self.core.flush(0) {
            Ok(flushed) => {
                self.timed_flush_uncounted = false;
                let st = &self.core.state;
                self.waiters.flushed(flushed, |done| {
                    st.group_flushes.fetch_add(1, Ordering::Relaxed);
                    st.group_messages.fetch_add(done, Ordering::Relaxed);
                });
                let bytes = flushed.saturating_sub(before);
                if let Some(z) = self
                    .zeroer
                    .as_ref()
                    .filter(|_| bytes <= ZERO_AFTER_FLUSHES_UP_TO)
                {
                    // A full mailbox drops the step: the allocator is behind anyway.
                    z.try_notify(ZeroStep(bytes));
                }
                if let Some(r) = &self.reput {
                    r.try_notify(Wake);
                }
                self.core.maybe_checkpoint(false);
                if !self.waiters.is_empty() {
                    // An end in a file that did not exist yet at this flush: flush again.
                    self.schedule(ctx);
                }
            }
            Err(e) => self.waiters.fail(&format!("the flush failed: {e}")),
        }
    }
}

impl Service for GroupCommitter {
    const NAME: &'static str = "group_committer";
    const MAILBOX: usize = 16_384;

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        self.me = Some(ActorRef::of(ctx));
        // Messages that do not wait (WAIT=false) are flushed within 10 ms too (RocketMQ flushes
        // on every 10 ms wake-up of GroupCommitService).
        ctx.run_interval(Duration::from_millis(10), |act, _| {
            let me = &mut act.inner;
            me.core.tick();
            // Written, not just readable: with write buffers the commit happens in this flush.
            if me.core.state.read_only.load().is_none()
                && me.core.state.flushed() < me.core.view.max_wrote_offset()
            {
                let before = me.core.state.flushed();
                if me.core.flush(0).is_ok_and(|f| f > before) {
                    me.timed_flush_uncounted = true;
                }
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

impl Serve<FlushWaits> for GroupCommitter {
    type Reply = ();
    fn serve(&mut self, m: FlushWaits, ctx: &mut Context<Metered<Self>>) {
        let flushed = self.core.state.flushed();
        let read_only = self.core.state.read_only.load_full();
        for w in m.0 {
            if flushed >= w.end {
                // A timed flush covered it before its wait arrived: answered, and counted (that
                // flush too, once).
                let st = &self.core.state;
                if std::mem::take(&mut self.timed_flush_uncounted) {
                    st.group_flushes.fetch_add(1, Ordering::Relaxed);
                }
                st.group_messages
                    .fetch_add(u64::from(w.msgs), Ordering::Relaxed);
                let _ = w.reply.send(FlushOutcome::Flushed);
            } else if let Some(r) = &read_only {
                // The reason names what failed (a flush or a commit).
                let _ = w.reply.send(FlushOutcome::Failed(r.to_string()));
            } else {
                self.waiters.push(w);
            }
        }
        if !self.waiters.is_empty() {
            self.schedule(ctx);
        }
    }
}

impl Serve<FlushNow> for GroupCommitter {
    type Reply = std::io::Result<u64>;
    fn serve(&mut self, _: FlushNow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.core.flush_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Usage the disk-watch test sets for a path ending in `consumequeue` (10 % for any other).
    /// One test uses it.
    static CQ_PCT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(95);
    fn fake_usage(p: &std::path::Path) -> std::io::Result<f64> {
        Ok(if p.ends_with("consumequeue") {
            CQ_PCT.load(Ordering::Relaxed) as f64
        } else {
            10.0
        })
    }

    /// A full ConsumeQueue disk refuses writes even when the CommitLog's disk has room (the two
    /// apart via `storePathCommitLog`), naming that disk; between the clear and warning levels it
    /// still refuses, with its usage now; at or below the clear level writes are accepted again.
    #[test]
    fn a_full_consume_queue_disk_refuses_writes_and_names_it() {
        let mut w = DiskWatch::new("/cl/commitlog".into(), "/root/consumequeue".into(), 90, 85);
        w.measure = fake_usage;
        let state = StoreState::default();
        let mut check = |pct: u64| {
            CQ_PCT.store(pct, Ordering::Relaxed);
            w.last = None;
            w.check(&state);
            state.refusal()
        };
        let why = check(95).expect("writes are refused");
        assert!(
            why.contains("/root/consumequeue (ConsumeQueue files) is 95.0% used")
                && why.contains("diskSpaceWarningLevelRatio 90%"),
            "{why}"
        );
        let why = check(87).expect("still refused between the levels");
        assert!(
            why.contains("/root/consumequeue (ConsumeQueue files) is 87.0% used")
                && why.contains("resume only at or below 85%"),
            "{why}"
        );
        assert_eq!(check(85), None);
        assert_eq!(
            check(87),
            None,
            "under the warning level a clear store stays clear"
        );
    }

    /// An unmade directory is measured at its nearest existing ancestor.
    #[test]
    fn usage_of_a_directory_not_made_yet_is_its_parents() {
        let dir = tempfile::tempdir().unwrap();
        let here = DiskWatch::used_pct(dir.path()).unwrap();
        let below = DiskWatch::used_pct(&dir.path().join("consumequeue/not/yet")).unwrap();
        assert!((here - below).abs() < 1.0, "{here} vs {below}");
    }

    #[test]
    fn waiters_are_answered_once_by_the_flush_that_covers_them_or_by_a_failure() {
        let mut w = Waiters::default();
        let mut rxs: Vec<_> = [100u64, 200, 300, 400]
            .into_iter()
            .map(|end| {
                let (reply, rx) = tokio::sync::oneshot::channel();
                // A wait can answer many messages (an `AppendBatch`): 100 → 1, 200 → 2, ...
                w.push(FlushUpTo {
                    end,
                    msgs: (end / 100) as u32,
                    reply,
                });
                (end, rx)
            })
            .collect();
        let mut counted = 0;
        w.flushed(250, |n| counted = n);
        assert_eq!(
            counted, 3,
            "ends 100 and 200 are on disk: their 1 + 2 messages"
        );
        // The producer of 300 stopped waiting (its deadline passed): the flush still covers it.
        drop(rxs.remove(2));
        w.flushed(300, |n| counted = n);
        assert_eq!(counted, 3, "300 is covered and leaves the list");
        w.fail("flushing 000… failed: EIO");
        assert!(w.is_empty());
        let got: Vec<_> = rxs
            .into_iter()
            .map(|(end, mut rx)| (end, rx.try_recv().unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![
                (100, FlushOutcome::Flushed),
                (200, FlushOutcome::Flushed),
                (
                    400,
                    FlushOutcome::Failed("flushing 000… failed: EIO".into())
                ),
            ],
            "each waiter answered exactly once, with what happened to it first"
        );
    }
}
