//! `MappedFileAllocator` — creates, fully allocates and (optionally) pre-faults the next CommitLog
//! files on its own thread, before the writer needs them (RocketMQ's AllocateMappedFileService).
//!
//! In: [`AllocateNext`] `{from}`, [`Take`] (the writer's roll, see below), [`ZeroStep`] (the
//! group committer), [`ZeroWrite`] (from itself). Out: the `AllocateNext` reply carries the file
//! (empty on failure) as soon as it is created and fully allocated (`fallocate`, milliseconds),
//! unless it is being zeroed; the `Take` answer carries it then. Warming (`warmMapedFileEnable`)
//! happens *after* the reply, in 16 MiB steps scheduled on this actor's own thread, front to back:
//! the writer never waits for a warm-up, pages already warmed cost it nothing, and a page it reaches
//! first it faults in itself. `MADV_POPULATE_WRITE` never changes content, so warming may overlap
//! the writer's appends on the same file.
//!
//! With write buffers (`transientStorePoolEnable`) the writer never touches a file's mapping, so
//! warming pre-faults the pool's buffers instead, once, in the same steps (see
//! `TransientStorePool::prefault`): after that no buffer page faults on the writer's thread.
//!
//! SYNC_FLUSH with write rings (the default write path): files are zero-written with direct I/O,
//! so a group commit's `fdatasync` writes data only and never converts unwritten extents — which
//! on ext4 doubled its time for small groups (see `mapped_file`). Zeroing costs as much disk time
//! as the data, so it is done where it pays and where it is cheap: a new file is not handed over
//! in the [`AllocateNext`] reply but kept here, as a [`ZeroAhead`] (the file's only handle), and
//! zeroed *ahead* — twice the bytes each small group commit flushed, from [`GROUP_STEP`] to
//! [`MAX_GROUP_STEP`] (the group committer sends a [`ZeroStep`] as its `fdatasync` ends, when
//! the disk is between flushes, for flushes of at most `flusher::ZERO_AFTER_FLUSHES_UP_TO`
//! bytes), and [`IDLE_STEP`] per 10 ms tick when no group commit came. So many small groups —
//! where the saving is largest — zero the next file whole ahead, while large groups (conversion
//! cost spread over many messages, the cores the limit) leave it as it is. The thread's I/O is in
//! the idle class besides. The first file of a fresh store is zeroed by the idle ticks until the
//! first append takes it.
//!
//! The writer takes the file with [`Take`] when it rolls into it (through [`take_prepared`], its
//! `CommitLog`'s hook, blocking its own thread for the answer). Each zeroing write (at most
//! `ZeroAhead::WRITE`, 64 KiB) is one turn of this actor ([`ZeroWrite`], sent to itself after the
//! last), so a `Take` waits for the write in flight at most, and its answer proves that no
//! zeroing write is in flight and none will follow: the file leaves with the answer. A `Take` for
//! a file this actor does not hold answers `None` — the writer then creates the file itself — and
//! from then on this actor makes no file at or below that offset, so the writer's own creation
//! never meets a zeroing write either. One round trip per file roll (1 GiB by default).
//!
//! The writer asks for file `N+1` as soon as it starts writing file `N`, so one file is always
//! ready ahead. Creation goes through a temporary name and a `link`, so without zeroing (files
//! handed over in the reply, no `Take`) the writer's own fallback creation races this actor's
//! safely.
//!
//! Invariants: a file being zeroed has no handle outside this actor; no file at or below the
//! highest offset taken is made here; this actor never waits for the writer (the writer blocks
//! on it at a roll).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::store::commit_log::TakePrepared;
use actormq_core::store::mapped_file::{MappedFile, Prepared, Warm, ZeroAhead, OS_PAGE_SIZE};
use actormq_core::store::transient_pool::TransientStorePool;

use super::messages::{AllocateNext, Take, ZeroStep, ZeroWrite};
use crate::metered::{ActorRef, Metered, Reply, Serve, Service};

/// Bytes pre-faulted per step; small enough to keep the mailbox responsive (~5 ms).
const WARM_STEP: u64 = 16 << 20;

/// Zero-written at least after each group commit (~20 µs of disk time here).
pub const GROUP_STEP: u64 = 16 << 10;
/// Zero-written at most after one group commit (16 direct writes), whatever the step asks, and
/// the most zeroing owed at any time: the allocator's thread, and the disk, must never be busy
/// with zeros for long. (Steps come only after flushes of at most
/// `flusher::ZERO_AFTER_FLUSHES_UP_TO` bytes, so today they ask for less; the cap keeps that
/// promise if the rule changes.)
pub const MAX_GROUP_STEP: u64 = 1 << 20;
/// Zero-written per 10 ms tick without group commits (25 MiB/s while the disk is idle).
pub const IDLE_STEP: u64 = 256 << 10;

/// A file being zeroed ahead and whether there is more of it to zero.
struct Held {
    ahead: ZeroAhead,
    more: bool,
}

impl Held {
    fn offset(&self) -> u64 {
        self.ahead.file().file_from_offset()
    }
}

pub struct MappedFileAllocator {
    dir: PathBuf,
    file_size: u64,
    warm: Warm,
    /// Zero new files ahead of the writer (see the module docs).
    zeroed: bool,
    /// The file being zeroed ahead of the writer; no one else holds it.
    held: Option<Held>,
    /// Bytes of zeroing owed (steps asked for and not yet written), at most [`MAX_GROUP_STEP`].
    owed: u64,
    /// A [`ZeroWrite`] is in the mailbox.
    write_sent: bool,
    /// A group commit ended since the last tick.
    stepped: bool,
    /// The highest offset the writer has taken (see the module docs).
    taken: Option<u64>,
    ready: Vec<Arc<MappedFile>>,
    /// Files still being warmed, with the next position to warm.
    warming: VecDeque<(Arc<MappedFile>, u64)>,
    /// Write buffers still to pre-fault: the pool, the buffer and the next position.
    pool_warming: Option<(Arc<TransientStorePool>, usize, usize)>,
    warm_scheduled: bool,
    /// Our own address, for [`ZeroWrite`].
    me: Option<ActorRef<MappedFileAllocator>>,
}

impl MappedFileAllocator {
    pub fn new(dir: PathBuf, file_size: u64, warm: Warm) -> Self {
        MappedFileAllocator {
            dir,
            file_size,
            warm,
            zeroed: false,
            held: None,
            owed: 0,
            write_sent: false,
            stepped: false,
            taken: None,
            ready: Vec::new(),
            warming: VecDeque::new(),
            pool_warming: None,
            warm_scheduled: false,
            me: None,
        }
    }

    /// Zeroes new files ahead of the writer (SYNC_FLUSH with write rings; see the module docs).
    pub fn zeroed(mut self, zeroed: bool) -> Self {
        self.zeroed = zeroed;
        self
    }

    /// Pre-faults every buffer of `pool` in steps once started (`warmMapedFileEnable` with write
    /// buffers; the files' mappings are then not warmed: pass `Warm::No`).
    pub fn warming_pool(mut self, pool: Arc<TransientStorePool>) -> Self {
        self.pool_warming = Some((pool, 0, 0));
        self
    }

    /// Owes `len` more bytes of zeroing (in whole pages, at most [`MAX_GROUP_STEP`] in all) and
    /// makes sure a write is coming.
    fn owe(&mut self, len: u64) {
        self.owed = (self.owed + len.next_multiple_of(OS_PAGE_SIZE)).min(MAX_GROUP_STEP);
        self.send_write();
    }

    /// Sends the next [`ZeroWrite`] to ourselves, unless one is queued, nothing is owed or there
    /// is nothing to zero. Behind whatever is in the mailbox — a `Take` among it.
    fn send_write(&mut self) {
        if self.write_sent || self.owed == 0 || !self.held.as_ref().is_some_and(|h| h.more) {
            return;
        }
        // A full mailbox drops it: the next step or tick sends it again.
        self.write_sent = self.me.as_ref().is_some_and(|me| me.try_notify(ZeroWrite));
    }

    /// One zeroing write of the file held (at most `ZeroAhead::WRITE`), then the next is sent.
    fn zero_write(&mut self) {
        let Some(h) = &mut self.held else { return };
        let n = self.owed.min(ZeroAhead::WRITE);
        match h.ahead.step(n) {
            Ok(more) => h.more = more,
            Err(e) => {
                // Only a speed-up is lost: the writer writes the rest as it is.
                tracing::warn!(file = %h.ahead.file().path().display(), error = %e, "zeroing a CommitLog file ahead failed; its flushes convert extents");
                h.more = false;
            }
        }
        self.owed -= n;
        if !h.more {
            tracing::debug!(file = %h.ahead.file().path().display(), zeroed = h.ahead.file().zeroed_upto(), "zeroing ahead ended");
            self.owed = 0;
        }
        self.send_write();
    }

    fn schedule_warm(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.warm_scheduled || (self.warming.is_empty() && self.pool_warming.is_none()) {
            return;
        }
        self.warm_scheduled = true;
        ctx.run_later(Duration::ZERO, |act, ctx| {
            let me = &mut act.inner;
            me.warm_scheduled = false;
            if let Some((file, pos)) = me.warming.front_mut() {
                // Skip what the writer has already written: those pages are in.
                let start = (*pos).max(file.wrote_position() - file.wrote_position() % 4096);
                file.prefault(start, WARM_STEP);
                *pos = start + WARM_STEP;
                if *pos >= file.file_size() {
                    me.warming.pop_front();
                }
            } else if let Some((pool, idx, pos)) = &mut me.pool_warming {
                let step = WARM_STEP as usize;
                if !pool.prefault(*idx, *pos, step) {
                    tracing::info!("the kernel cannot pre-fault write buffers (MADV_POPULATE_WRITE); the writer faults them in on first use");
                    me.pool_warming = None;
                } else {
                    *pos += step;
                    if *pos >= pool.buffer_size() {
                        *idx += 1;
                        *pos = 0;
                    }
                    if *idx >= pool.capacity() {
                        me.pool_warming = None;
                    }
                }
            }
            me.schedule_warm(ctx);
        });
    }
}

impl Service for MappedFileAllocator {
    const NAME: &'static str = "mapped_file_allocator";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        self.me = Some(ActorRef::of(ctx));
        if self.zeroed {
            if let Err(e) = crate::fsutil::idle_io_priority_for_this_thread() {
                tracing::debug!(error = %e, "cannot lower the allocator's I/O priority");
            }
            ctx.run_interval(Duration::from_millis(10), |act, _| {
                let me = &mut act.inner;
                if !std::mem::take(&mut me.stepped) {
                    me.owe(IDLE_STEP);
                }
            });
        }
        self.schedule_warm(ctx);
    }
}

impl Serve<AllocateNext> for MappedFileAllocator {
    type Reply = Reply<AllocateNext>;
    fn serve(&mut self, m: AllocateNext, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if self.taken.is_some_and(|t| m.from <= t) {
            // The writer has this file already: it took it or made it itself.
            return MessageResult(Vec::new());
        }
        self.ready.retain(|f| f.file_from_offset() >= m.from);
        if let Some(f) = self.ready.iter().find(|f| f.file_from_offset() == m.from) {
            return MessageResult(vec![f.clone()]);
        }
        if self.held.as_ref().is_some_and(|h| h.offset() == m.from) {
            // Being zeroed: the writer takes it at its roll.
            return MessageResult(Vec::new());
        }
        let started = std::time::Instant::now();
        let created = if self.zeroed {
            ZeroAhead::create(&self.dir, m.from, self.file_size)
        } else {
            MappedFile::create(&self.dir, m.from, self.file_size, Warm::No)
                .map(|f| Prepared::Plain(f, None))
        };
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let f = match created {
            Ok(Prepared::Zeroing(ahead)) => {
                tracing::debug!(file = %ahead.file().path().display(), elapsed_ms, "prepared CommitLog file, zeroing it ahead");
                // At most one file ahead of the writer: an older one left here (the writer went
                // past it without taking it) is dropped, its zeroing over.
                self.held = Some(Held { ahead, more: true });
                self.send_write();
                return MessageResult(Vec::new());
            }
            Ok(Prepared::Plain(f, failed)) => {
                if let Some(e) = failed.filter(|_| self.zeroed) {
                    tracing::warn!(file = %f.path().display(), error = %e, "cannot zero a CommitLog file ahead; its flushes convert extents");
                }
                tracing::debug!(file = %f.path().display(), elapsed_ms, "prepared CommitLog file");
                Arc::new(f)
            }
            Err(e) => {
                // The writer creates the file itself when it needs it, and answers
                // CREATE_MAPEDFILE_FAILED if that fails too.
                tracing::warn!(dir = %self.dir.display(), from = m.from, error = %e, "cannot prepare CommitLog file");
                return MessageResult(Vec::new());
            }
        };
        self.ready.push(f.clone());
        if self.warm == Warm::Populate {
            self.warming.push_back((f.clone(), 0));
            self.schedule_warm(ctx);
        }
        MessageResult(vec![f])
    }
}

impl Serve<Take> for MappedFileAllocator {
    type Reply = ();
    fn serve(&mut self, m: Take, _: &mut Context<Metered<Self>>) {
        self.taken = Some(self.taken.map_or(m.from, |t| t.max(m.from)));
        let file = if self.held.as_ref().is_some_and(|h| h.offset() == m.from) {
            // The direct-I/O handle closes here; no zeroing write is in flight (this actor
            // runs one message at a time) and none will follow (the file leaves with the answer).
            self.held.take().map(|h| Arc::new(h.ahead.into_file()))
        } else {
            let at = self
                .ready
                .iter()
                .position(|f| f.file_from_offset() == m.from);
            at.map(|i| self.ready.remove(i))
        };
        if self.held.as_ref().is_some_and(|h| h.offset() < m.from) {
            // The writer went past it: it made that file itself or never needed it.
            self.held = None;
        }
        if self.held.is_none() {
            self.owed = 0;
        }
        // The writer is gone if it does not listen: the file goes with this message.
        let _ = m.reply.send(file);
    }
}

impl Serve<ZeroWrite> for MappedFileAllocator {
    type Reply = ();
    fn serve(&mut self, _: ZeroWrite, _: &mut Context<Metered<Self>>) {
        self.write_sent = false;
        self.zero_write();
    }
}

impl Serve<ZeroStep> for MappedFileAllocator {
    type Reply = ();
    fn serve(&mut self, m: ZeroStep, _: &mut Context<Metered<Self>>) {
        self.stepped = true;
        self.owe(m.0.saturating_mul(2).clamp(GROUP_STEP, MAX_GROUP_STEP));
    }
}

/// The writer's side of [`Take`], for `CommitLog::taking_prepared`: at a roll into a file no
/// [`AllocateNext`] reply brought, asks `allocator` for it and blocks the writer's thread until
/// the answer — after at most the zeroing write in flight. If the allocator is gone, its mailbox
/// (dropped on its own thread, after its last handler) drops the question and the answer is
/// `None` at once: no zeroing write can be in flight then either. The allocator must run on
/// another thread than the writer, and never waits for it.
pub fn take_prepared(allocator: ActorRef<MappedFileAllocator>) -> TakePrepared {
    Box::new(move |from| {
        let asked = std::time::Instant::now();
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        // Past the mailbox bound: the question must not be lost while the allocator may be
        // writing the file, and the writer asks once per file.
        allocator.notify(Take { from, reply });
        let file = answer.recv().ok().flatten();
        // What a roll costs the writer's thread (the answer's wait), once per file.
        tracing::debug!(
            from,
            taken = file.is_some(),
            zeroed = file.as_ref().map_or(0, |f| f.zeroed_upto()),
            waited_us = asked.elapsed().as_micros() as u64,
            "CommitLog roll: asked the allocator for the file"
        );
        file
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metered::start_on;
    use std::sync::mpsc::{channel, sync_channel};

    const SIZE: u64 = 4 << 20;

    /// A zeroing allocator on an arbiter of its own, as the store starts it.
    fn zeroing(dir: &std::path::Path) -> (Arbiter, ActorRef<MappedFileAllocator>) {
        let arbiter = Arbiter::new();
        let alloc = MappedFileAllocator::new(dir.to_path_buf(), SIZE, Warm::No).zeroed(true);
        let alloc = start_on(Some(&arbiter.handle()), alloc);
        (arbiter, alloc)
    }

    /// Holds the allocator's thread until the returned sender is used or dropped, so that the
    /// messages sent meanwhile are all in its mailbox, in order, when it runs again.
    fn park(arbiter: &Arbiter) -> std::sync::mpsc::Sender<()> {
        let (parked, is_parked) = channel();
        let (release, released) = channel::<()>();
        arbiter.spawn_fn(move || {
            parked.send(()).unwrap();
            let _ = released.recv();
        });
        is_parked.recv().unwrap();
        release
    }

    /// The writer's bytes at the front of `f`, flushed.
    fn write_front(f: &MappedFile, bytes: &[u8]) {
        // SAFETY: the test is the file's only writer, at its write position (0).
        unsafe { f.write_slice(0, bytes.len()).copy_from_slice(bytes) };
        f.publish_wrote(bytes.len() as u64);
        f.flush(0).unwrap();
    }

    /// Steps and idle ticks go on for 50 ms: time for any zeroing write to land.
    async fn zeroing_chances(alloc: &ActorRef<MappedFileAllocator>) {
        for _ in 0..5 {
            alloc.send(ZeroStep(MAX_GROUP_STEP)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn front_intact(path: &std::path::Path, bytes: &[u8]) -> bool {
        std::fs::read(path).unwrap()[..bytes.len()] == *bytes
    }

    #[actix::test]
    async fn a_take_comes_before_the_steps_owed_and_nothing_zeroes_the_file_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (arbiter, alloc) = zeroing(dir.path());
        // The file is made, a whole step is owed and the writer's take is queued behind both,
        // all before the allocator runs again: the take is answered before the step's writes
        // (each a turn of the mailbox, sent after the one before).
        let release = park(&arbiter);
        let made = alloc.send(AllocateNext { from: 0 });
        assert!(alloc.try_notify(ZeroStep(MAX_GROUP_STEP)));
        let (reply, answer) = sync_channel(1);
        alloc.notify(Take { from: 0, reply });
        drop(release);
        let f = answer.recv().unwrap().expect("the file made");
        if !made.await.unwrap().is_empty() {
            eprintln!("no direct I/O on this file system: files are handed over, never zeroed");
            return;
        }
        assert_eq!(f.file_from_offset(), 0);
        assert_eq!(f.zeroed_upto(), 0, "no write of the step came first");

        let data = vec![0xA5u8; 3 << 16];
        write_front(&f, &data);
        zeroing_chances(&alloc).await;
        assert!(
            front_intact(f.path(), &data),
            "no zero landed after the take"
        );
        assert!(
            alloc
                .send(AllocateNext { from: 0 })
                .await
                .unwrap()
                .is_empty(),
            "taken: not made again"
        );

        // The next file: zeroed by steps until taken through the writer's hook.
        assert!(alloc
            .send(AllocateNext { from: SIZE })
            .await
            .unwrap()
            .is_empty());
        zeroing_chances(&alloc).await;
        let mut take = take_prepared(alloc.clone());
        let g = take(SIZE).expect("the next file");
        assert!(g.zeroed_upto() > 0, "steps zeroed it ahead");
        assert_eq!(g.zeroed_upto() % ZeroAhead::WRITE, 0);
        write_front(&g, &data);
        zeroing_chances(&alloc).await;
        assert!(front_intact(g.path(), &data));
        assert!(front_intact(f.path(), &data));
        assert!(take(2 * SIZE).is_none(), "nothing held at 2 × SIZE");
    }

    #[actix::test]
    async fn a_file_the_allocator_does_not_hold_is_left_to_the_writer_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let (_arbiter, alloc) = zeroing(dir.path());
        let mut take = take_prepared(alloc.clone());
        // The writer rolled before its AllocateNext was sent (a batch through several files).
        assert!(take(0).is_none());
        let f = MappedFile::create(dir.path(), 0, SIZE, Warm::No).unwrap();
        let data = vec![0x5Au8; 3 << 16];
        write_front(&f, &data);
        assert!(
            alloc
                .send(AllocateNext { from: 0 })
                .await
                .unwrap()
                .is_empty(),
            "the late request makes nothing"
        );
        zeroing_chances(&alloc).await;
        assert!(
            front_intact(f.path(), &data),
            "nothing zeroes the writer's file"
        );
    }

    #[actix::test]
    async fn a_take_after_the_allocator_stopped_is_answered_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (arbiter, alloc) = zeroing(dir.path());
        let _ = alloc.send(AllocateNext { from: 0 }).await.unwrap();
        arbiter.stop();
        arbiter.join().unwrap();
        let mut take = take_prepared(alloc);
        assert!(
            take(0).is_none(),
            "the writer creates the file; no zeroing write can come"
        );
    }
}
