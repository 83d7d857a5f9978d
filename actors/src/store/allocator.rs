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
//! The writer asks for file `N+1` as soon as it starts writing file `N`, so one file is always
//! ready ahead. Creation goes through a temporary name and a `link`, so the writer's own fallback
//! creation can race it safely.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::store::mapped_file::{MappedFile, Warm};

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
    ready: Vec<Arc<MappedFile>>,
    /// Files still being warmed, with the next position to warm.
    warming: VecDeque<(Arc<MappedFile>, u64)>,
    warm_scheduled: bool,
}

impl MappedFileAllocator {
    pub fn new(dir: PathBuf, file_size: u64, warm: Warm) -> Self {
        MappedFileAllocator {
            dir,
            file_size,
            warm,
            ready: Vec::new(),
            warming: VecDeque::new(),
            warm_scheduled: false,
        }
    }

    fn schedule_warm(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.warm_scheduled || self.warming.is_empty() {
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
            }
            me.schedule_warm(ctx);
        });
    }
}

impl Service for MappedFileAllocator {
    const NAME: &'static str = "mapped_file_allocator";
}

impl Serve<AllocateNext> for MappedFileAllocator {
    type Reply = Reply<AllocateNext>;
    fn serve(&mut self, m: AllocateNext, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        self.ready.retain(|f| f.file_from_offset() >= m.from);
        if let Some(f) = self.ready.iter().find(|f| f.file_from_offset() == m.from) {
            return MessageResult(vec![f.clone()]);
        }
        let started = std::time::Instant::now();
        match MappedFile::create(&self.dir, m.from, self.file_size, Warm::No) {
            Ok(f) => {
                tracing::debug!(file = %f.path().display(), elapsed_ms = started.elapsed().as_millis() as u64, "prepared CommitLog file");
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
