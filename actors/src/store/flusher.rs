//! `Flusher` — ASYNC_FLUSH of the CommitLog (RocketMQ's FlushRealTimeService): every
//! `flushIntervalCommitLog` it flushes when at least `flushCommitLogLeastPages` pages are dirty,
//! and everything every `flushCommitLogThoroughInterval`.
//!
//! In: ticks, [`FlushNow`]. Out: the flushed position, published through an atomic that the
//! checkpoint, metrics and (in SYNC_FLUSH) the reput limit read. It is the only actor that moves
//! the CommitLog's flushed position. A failed flush leaves the position where it was and is logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::store::mapped_file_queue::FileQueueView;

use crate::metered::{Metered, Serve, Service};

pub struct FlushNow;
impl Message for FlushNow {
    type Result = std::io::Result<u64>;
}

pub struct Flusher {
    view: FileQueueView,
    flushed: Arc<AtomicU64>,
    interval: Duration,
    least_pages: u64,
    thorough: Duration,
    last_thorough: Instant,
}

impl Flusher {
    pub fn new(
        view: FileQueueView,
        flushed: Arc<AtomicU64>,
        interval: Duration,
        least_pages: u64,
        thorough: Duration,
    ) -> Self {
        Flusher {
            view,
            flushed,
            interval,
            least_pages,
            thorough,
            last_thorough: Instant::now(),
        }
    }

    fn flush(&mut self, least_pages: u64) -> std::io::Result<u64> {
        let mut upto = self.view.min_offset();
        for f in self.view.files().iter() {
            let pos = f.flush(least_pages)?;
            upto = f.file_from_offset() + pos;
            if pos < f.file_size() {
                break;
            }
        }
        self.flushed.fetch_max(upto, Ordering::AcqRel);
        Ok(upto)
    }
}

impl Service for Flusher {
    const NAME: &'static str = "commitlog_flusher";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(self.interval, |act, _| {
            let me = &mut act.inner;
            let least = if me.last_thorough.elapsed() >= me.thorough {
                me.last_thorough = Instant::now();
                0
            } else {
                me.least_pages
            };
            if let Err(e) = me.flush(least) {
                tracing::error!(error = %e, "CommitLog flush failed; the flushed position stays");
            }
        });
    }

    fn stopped(&mut self, _: &mut Context<Metered<Self>>) {
        if let Err(e) = self.flush(0) {
            tracing::error!(error = %e, "CommitLog flush at stop failed");
        }
    }
}

impl Serve<FlushNow> for Flusher {
    type Reply = std::io::Result<u64>;
    fn serve(&mut self, _: FlushNow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.flush(0)
    }
}
