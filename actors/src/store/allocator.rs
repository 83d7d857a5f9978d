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
//! SYNC_FLUSH with write rings (the default write path): files are created zero-written
//! ([`MappedFile::create_zeroed`], direct I/O, about a second per GiB of disk time on this thread),
//! so a group commit's `fdatasync` writes data only and never converts unwritten extents — which
//! on ext4 doubled its time. The reply then comes once the zeros are on disk; the writer's own
//! fallback creation (a file not ready at the roll) only allocates.
//!
//! The writer asks for file `N+1` as soon as it starts writing file `N`, so one file is always
//! ready ahead. Creation goes through a temporary name and a `link`, so the writer's own fallback
//! creation can race it safely.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::store::mapped_file::{MappedFile, Warm};
use actormq_core::store::transient_pool::TransientStorePool;

use crate::metered::{Metered, Reply, Serve, Service};

/// Bytes pre-faulted per step; small enough to keep the mailbox responsive (~5 ms).
const WARM_STEP: u64 = 16 << 20;

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
    /// Zero-write new files (see the module docs).
    zeroed: bool,
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
            ready: Vec::new(),
            warming: VecDeque::new(),
            pool_warming: None,
            warm_scheduled: false,
        }
    }

    /// Creates zero-written files (SYNC_FLUSH with write rings; see the module docs).
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
            MappedFile::create_zeroed(&self.dir, m.from, self.file_size)
        } else {
            MappedFile::create(&self.dir, m.from, self.file_size, Warm::No)
        };
        match created {
            Ok(f) => {
                tracing::debug!(file = %f.path().display(), zeroed = f.is_zeroed(), elapsed_ms = started.elapsed().as_millis() as u64, "prepared CommitLog file");
                let f = Arc::new(f);
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
