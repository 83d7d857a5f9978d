//! `MappedFileAllocator` — creates, fully allocates and (optionally) pre-faults the next CommitLog
//! files on its own thread, before the writer needs them (RocketMQ's AllocateMappedFileService).
//!
//! In: [`AllocateNext`] `{from}`. Out: the reply carries the prepared file (empty on failure).
//! The writer asks for file `N+1` as soon as it starts writing file `N`, so one file is always
//! ready ahead. Creation goes through a temporary name and a `link`, so the writer's own fallback
//! creation can race it safely.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use actormq_core::store::mapped_file::{MappedFile, Warm};

use crate::metered::{Metered, Reply, Serve, Service};

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
}

impl MappedFileAllocator {
    pub fn new(dir: PathBuf, file_size: u64, warm: Warm) -> Self {
        MappedFileAllocator {
            dir,
            file_size,
            warm,
            ready: Vec::new(),
        }
    }
}

impl Service for MappedFileAllocator {
    const NAME: &'static str = "mapped_file_allocator";
}

impl Serve<AllocateNext> for MappedFileAllocator {
    type Reply = Reply<AllocateNext>;
    fn serve(&mut self, m: AllocateNext, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.ready.retain(|f| f.file_from_offset() >= m.from);
        if let Some(f) = self.ready.iter().find(|f| f.file_from_offset() == m.from) {
            return MessageResult(vec![f.clone()]);
        }
        let started = std::time::Instant::now();
        match MappedFile::create(&self.dir, m.from, self.file_size, self.warm) {
            Ok(f) => {
                tracing::debug!(file = %f.path().display(), elapsed_ms = started.elapsed().as_millis() as u64, "prepared CommitLog file");
                let f = Arc::new(f);
                self.ready.push(f.clone());
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
