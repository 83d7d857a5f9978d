//! `MappedFileAllocator` — creates, fully allocates and (optionally) pre-faults the next CommitLog
//! files on its own thread, before the writer needs them (RocketMQ's AllocateMappedFileService).
//!
//! In: [`AllocateNext`] `{from}`. Out: the reply carries the file (empty on failure) as soon as it
//! is created and fully allocated (`fallocate`, milliseconds). Warming (`warmMapedFileEnable`)
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
//! as the data, so it is done where it pays and where it is cheap: a new file is handed over
//! allocated only and zeroed *ahead* ([`ZeroAhead`]) until the writer claims it — twice the
//! bytes each small group commit flushed, from [`GROUP_STEP`] to [`MAX_GROUP_STEP`], one 64 KiB
//! write at a time, so the writer's claim waits for one write at most (the group committer sends a
//! [`ZeroStep`] as its `fdatasync` ends, when the disk is between flushes, for flushes of at most
//! `flusher::ZERO_AFTER_FLUSHES_UP_TO` bytes), and [`IDLE_STEP`] per 10 ms tick when no group
//! commit came. So many small groups — where the saving is largest — zero the next file whole
//! ahead, while large groups (conversion cost spread over many messages, the cores the limit)
//! leave it as it is. The thread's I/O is in the idle class besides. The first file of a fresh
//! store is zeroed by the idle ticks until the first append claims it.
//!
//! The writer asks for file `N+1` as soon as it starts writing file `N`, so one file is always
//! ready ahead. Creation goes through a temporary name and a `link`, so the writer's own fallback
//! creation can race it safely.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::store::mapped_file::{MappedFile, Warm, ZeroAhead};
use actormq_core::store::transient_pool::TransientStorePool;

use crate::metered::{Metered, Reply, Serve, Service};

/// Bytes pre-faulted per step; small enough to keep the mailbox responsive (~5 ms).
const WARM_STEP: u64 = 16 << 20;

/// Zero-written at least after each group commit (~20 µs of disk time here).
pub const GROUP_STEP: u64 = 16 << 10;
/// Zero-written at most after one group commit (16 direct writes), whatever the step asks: the
/// allocator's thread, and the disk, must never be busy with zeros for long. (Steps come only
/// after flushes of at most `flusher::ZERO_AFTER_FLUSHES_UP_TO` bytes, so today they ask for
/// less; the cap keeps that promise if the rule changes.)
pub const MAX_GROUP_STEP: u64 = 1 << 20;
/// Zero-written per 10 ms tick without group commits (25 MiB/s while the disk is idle).
pub const IDLE_STEP: u64 = 256 << 10;

pub struct AllocateNext {
    pub from: u64,
}
impl Message for AllocateNext {
    type Result = Vec<Arc<MappedFile>>;
}

pub struct MappedFileAllocator {
    dir: PathBuf,
    file_size: u64,
    warm: Warm,
    /// Zero new files ahead of the writer (see the module docs).
    zeroed: bool,
    /// The file being zeroed ahead of the writer.
    zero_ahead: Option<ZeroAhead>,
    /// A group commit ended since the last tick.
    stepped: bool,
    ready: Vec<Arc<MappedFile>>,
    /// Files still being warmed, with the next position to warm.
    warming: VecDeque<(Arc<MappedFile>, u64)>,
    /// Write buffers still to pre-fault: the pool, the buffer and the next position.
    pool_warming: Option<(Arc<TransientStorePool>, usize, usize)>,
    warm_scheduled: bool,
}

impl MappedFileAllocator {
    pub fn new(dir: PathBuf, file_size: u64, warm: Warm) -> Self {
        MappedFileAllocator {
            dir,
            file_size,
            warm,
            zeroed: false,
            zero_ahead: None,
            stepped: false,
            ready: Vec::new(),
            warming: VecDeque::new(),
            pool_warming: None,
            warm_scheduled: false,
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

    /// Zero-writes up to `len` more bytes of the file ahead; drops it once done or claimed.
    fn zero_step(&mut self, len: u64) {
        let Some(z) = &self.zero_ahead else { return };
        match z.step(len) {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(file = %z.file().path().display(), zeroed = z.file().zeroed_upto(), "zeroing ahead ended");
                self.zero_ahead = None;
            }
            Err(e) => {
                // Only a speed-up is lost: the writer writes the rest as it is.
                tracing::warn!(file = %z.file().path().display(), error = %e, "zeroing a CommitLog file ahead failed; its flushes convert extents");
                self.zero_ahead = None;
            }
        }
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
        if self.zeroed {
            if let Err(e) = crate::fsutil::idle_io_priority_for_this_thread() {
                tracing::debug!(error = %e, "cannot lower the allocator's I/O priority");
            }
            ctx.run_interval(Duration::from_millis(10), |act, _| {
                let me = &mut act.inner;
                if !std::mem::take(&mut me.stepped) {
                    me.zero_step(IDLE_STEP);
                }
            });
        }
        self.schedule_warm(ctx);
    }
}

impl Serve<AllocateNext> for MappedFileAllocator {
    type Reply = Reply<AllocateNext>;
    fn serve(&mut self, m: AllocateNext, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        self.ready.retain(|f| f.file_from_offset() >= m.from);
        if let Some(f) = self.ready.iter().find(|f| f.file_from_offset() == m.from) {
            return MessageResult(vec![f.clone()]);
        }
        let started = std::time::Instant::now();
        let created = if self.zeroed {
            MappedFile::create_for_zeroing(&self.dir, m.from, self.file_size)
        } else {
            MappedFile::create(&self.dir, m.from, self.file_size, Warm::No)
        };
        match created {
            Ok(f) => {
                tracing::debug!(file = %f.path().display(), zeroed = f.zeroed_upto(), elapsed_ms = started.elapsed().as_millis() as u64, "prepared CommitLog file");
                let f = Arc::new(f);
                if self.zeroed {
                    match ZeroAhead::open(f.clone()) {
                        Ok(z) => self.zero_ahead = z,
                        Err(e) => {
                            tracing::warn!(file = %f.path().display(), error = %e, "cannot zero a CommitLog file ahead; its flushes convert extents")
                        }
                    }
                }
                self.ready.push(f.clone());
                if self.warm == Warm::Populate {
                    self.warming.push_back((f.clone(), 0));
                    self.schedule_warm(ctx);
                }
                MessageResult(vec![f])
            }
            Err(e) => {
                // The writer creates the file itself when it needs it, and answers
                // CREATE_MAPEDFILE_FAILED if that fails too.
                tracing::warn!(dir = %self.dir.display(), from = m.from, error = %e, "cannot prepare CommitLog file");
                MessageResult(Vec::new())
            }
        }
    }
}

/// A group commit's `fdatasync` ended, having flushed this many bytes: zero twice as many ahead
/// (at least [`GROUP_STEP`], at most [`MAX_GROUP_STEP`]), so zeroing outpaces the writer and the
/// next file is whole before it is claimed.
pub struct ZeroStep(pub u64);
impl Message for ZeroStep {
    type Result = ();
}

impl Serve<ZeroStep> for MappedFileAllocator {
    type Reply = ();
    fn serve(&mut self, m: ZeroStep, _: &mut Context<Metered<Self>>) {
        self.stepped = true;
        self.zero_step(m.0.saturating_mul(2).clamp(GROUP_STEP, MAX_GROUP_STEP));
    }
}
