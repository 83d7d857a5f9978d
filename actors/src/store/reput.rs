//! `ReputDispatcher` — owns the dispatch position: it follows the CommitLog's published bytes and
//! hands them, in batches of whole records, to the ConsumeQueue and Index builders (RocketMQ's
//! ReputMessageService).
//!
//! In: [`Wake`] (coalesced; from the writer in ASYNC_FLUSH, from the committer with write
//! buffers, from the group committer after each flush in SYNC_FLUSH), a periodic tick as a safety
//! net.
//!
//! Rounds are paced: a wake less than [`ROUND_GAP`] after the last round began waits for the
//! rest of the gap, leaving the wake flag set so the writer sends no more wakes meanwhile. A wake
//! after a quiet spell dispatches at once, and a round that left a backlog (a batch cap reached)
//! is followed at once by the next. Under load that is at most one round per millisecond, each
//! with many records, as RocketMQ's ReputMessageService (store/.../DefaultMessageStore.java:
//! `Thread.sleep(1)` between its rounds) — before, sync ×8 ran 0.15–0.22 rounds per SEND at
//! ≈ 68 µs of CPU each, 15 of its 40 µs per message.
//! Out: [`Dispatch`] `{from, to}` to both builders, awaited together before the next batch, so a
//! slow builder slows dispatch instead of growing a queue.
//!
//! A failed batch (a ConsumeQueue file that cannot be made on a full disk, an unreadable record)
//! is retried from the same position, after a pause that doubles from 5 ms to 1 s; the first
//! failure is logged at ERROR, the same one again at most every 10 s with a count, and the end of
//! a failing stretch at INFO. Before, every 5 ms tick retried and logged (seen: an ERROR line
//! every 12 ms while a disk was full). While batches fail, `StoreState::dispatch_failing` holds
//! the reason and the writer refuses appends with it (SERVICE_NOT_AVAILABLE), so producers learn
//! why their messages would not reach consumers; the first batch that goes through clears it.
//!
//! Invariants: the dispatch position only moves forward, on record boundaries, and never past the
//! visibility limit (the published write position; in SYNC_FLUSH the flushed position); a whole
//! record below that limit is always dispatched, however long (one longer than a batch goes alone).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::offset::PhyOffset;
use actormq_core::store::commit_log::scan_boundaries;
use actormq_core::store::mapped_file_queue::FileQueueView;

use super::cq_builder::ConsumeQueueBuilder;
use super::index_builder::IndexBuilder;
use super::messages::{Dispatch, Wake};
use super::state::StoreState;
use crate::metered::{ActorRef, Metered, Serve, Service};

/// Largest range of several records handed to the builders in one message. A single record
/// longer than this goes alone (its range never spans two CommitLog files).
pub(crate) const MAX_BATCH_BYTES: u64 = 4 << 20;
/// Largest number of records handed to the builders in one message.
const MAX_BATCH_RECORDS: usize = 8192;
/// Shortest time from the start of one round to the start of the next, unless a backlog is
/// waiting (module docs).
pub(crate) const ROUND_GAP: Duration = Duration::from_millis(1);

pub struct ReputDispatcher {
    view: FileQueueView,
    /// `dispatched` (ours to move) and `flushed` (the limit in SYNC_FLUSH).
    state: Arc<StoreState>,
    /// SYNC_FLUSH: dispatch only flushed bytes, so no consumer sees what a crash can take back
    /// (apache/rocketmq#8239).
    limit_to_flushed: bool,
    woken: Arc<AtomicBool>,
    cq: ActorRef<ConsumeQueueBuilder>,
    index: Option<ActorRef<IndexBuilder>>,
    busy: bool,
    /// When the last round began, for pacing.
    last_round: Option<Instant>,
    /// A paced pump is scheduled (the wake flag stays set until it runs).
    paced: bool,
    /// Set while batches fail: when to try again and what to say.
    failing: Option<Failing>,
}

/// A stretch of failed batches (see the module docs).
struct Failing {
    since: Instant,
    failures: u64,
    retry_at: Instant,
    logged_at: Instant,
    logged_failures: u64,
}

impl Failing {
    fn new(now: Instant) -> Failing {
        Failing {
            since: now,
            failures: 0,
            retry_at: now,
            logged_at: now,
            logged_failures: 0,
        }
    }

    /// One more failure at `now`: sets the next try; whether to log this one.
    fn fail(&mut self, now: Instant) -> bool {
        self.failures += 1;
        let pause = RETRY_FIRST
            .saturating_mul(1 << (self.failures - 1).min(16))
            .min(RETRY_MAX);
        self.retry_at = now + pause;
        let log = self.failures == 1 || now.duration_since(self.logged_at) >= LOG_EVERY;
        if log {
            self.logged_at = now;
            self.logged_failures = self.failures;
        }
        log
    }
}

/// Pause after the first failure, doubled per failure up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(5);
const RETRY_MAX: Duration = Duration::from_secs(1);
/// The same failure is logged again at most this often.
const LOG_EVERY: Duration = Duration::from_secs(10);

impl ReputDispatcher {
    pub fn new(
        view: FileQueueView,
        state: Arc<StoreState>,
        limit_to_flushed: bool,
        woken: Arc<AtomicBool>,
        cq: ActorRef<ConsumeQueueBuilder>,
        index: Option<ActorRef<IndexBuilder>>,
    ) -> Self {
        ReputDispatcher {
            view,
            state,
            limit_to_flushed,
            woken,
            cq,
            index,
            busy: false,
            last_round: None,
            paced: false,
            failing: None,
        }
    }

    /// Counts a failed batch, logs it (throttled) and sets when to retry.
    fn failed(&mut self, why: &str, from: u64) {
        let now = Instant::now();
        self.state.dispatch_failing.store(Some(Arc::new(format!(
            "{why} (at CommitLog offset {from})"
        ))));
        let f = self.failing.get_or_insert_with(|| Failing::new(now));
        if f.fail(now) {
            tracing::error!(error = %why, from, failures = f.failures, failing_for_ms = now.duration_since(f.since).as_millis() as u64, "dispatch failed; will retry");
        }
    }

    /// A batch went through: ends a failing stretch.
    fn succeeded(&mut self) {
        if let Some(f) = self.failing.take() {
            self.state.dispatch_failing.store(None);
            tracing::info!(
                failures = f.failures,
                unlogged = f.failures - f.logged_failures,
                after_ms = f.since.elapsed().as_millis() as u64,
                "dispatch resumed"
            );
        }
    }

    fn pump(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.busy
            || self
                .failing
                .as_ref()
                .is_some_and(|f| Instant::now() < f.retry_at)
        {
            return;
        }
        let mut from = PhyOffset(self.state.dispatched.load(Ordering::Acquire));
        let min = self.view.min_offset();
        if from.0 < min {
            // Nothing before the first file exists: a slave that started empty begins at its
            // master's last file (RocketMQ's reput moves up to the CommitLog's min offset too).
            tracing::info!(
                from = from.0,
                first_file = min,
                "dispatch starts at the first CommitLog file"
            );
            self.state.dispatched.store(min, Ordering::Release);
            from = PhyOffset(min);
        }
        let mut visible = self.view.max_offset();
        if self.limit_to_flushed {
            visible = visible.min(self.state.flushed());
        }
        if visible <= from.0 {
            return;
        }
        let cap = PhyOffset(visible.min(from.0 + MAX_BATCH_BYTES));
        let scanned = match scan_boundaries(&self.view, from, cap, MAX_BATCH_RECORDS) {
            // A record longer than the cap (a body near `maxMessageSize`, whose default is the
            // cap itself) would never fit a range: it goes alone, up to what is visible.
            Ok((_, 0)) if cap.0 < visible => {
                scan_boundaries(&self.view, from, PhyOffset(visible), 1)
            }
            other => other,
        };
        let end = match scanned {
            Ok((end, _)) => end,
            Err(e) => {
                // Never skip silently: dispatch stops here and says where and why.
                self.failed(&format!("unreadable CommitLog record: {e}"), from.0);
                return;
            }
        };
        if end <= from {
            return;
        }
        // Whether records beyond this batch were already visible: then the next round follows
        // at once, unpaced.
        let backlog = end.0 < visible;
        self.last_round = Some(Instant::now());
        self.busy = true;
        let d = Dispatch { from, to: end };
        let cq = self.cq.clone();
        let index = self.index.clone();
        let fut = async move {
            let idx = async {
                match index {
                    Some(i) => i.send(d).await.map_err(|e| e.to_string()).and_then(|r| r),
                    None => Ok(()),
                }
            };
            let cqf = async { cq.send(d).await.map_err(|e| e.to_string()).and_then(|r| r) };
            let (a, b) = tokio::join!(cqf, idx);
            a.and(b)
        };
        ctx.wait(
            actix::fut::wrap_future::<_, Metered<Self>>(fut).map(move |res, act, ctx| {
                let act = &mut act.inner;
                act.busy = false;
                match res {
                    Ok(()) => {
                        act.state.dispatched.store(end.0, Ordering::Release);
                        act.succeeded();
                        if backlog {
                            act.pump(ctx);
                        }
                    }
                    Err(e) => act.failed(&e, d.from.0),
                }
            }),
        );
    }
}

impl Service for ReputDispatcher {
    const NAME: &'static str = "reput_dispatcher";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        // Safety net for a lost wake-up; appends normally wake us immediately.
        ctx.run_interval(Duration::from_millis(5), |act, ctx| act.inner.pump(ctx));
        self.pump(ctx);
    }
}

impl Serve<Wake> for ReputDispatcher {
    type Reply = ();
    fn serve(&mut self, _: Wake, ctx: &mut Context<Metered<Self>>) {
        if self.paced {
            return;
        }
        let now = Instant::now();
        match self.last_round.map(|t| t + ROUND_GAP) {
            Some(next) if next > now => {
                self.paced = true;
                ctx.run_later(next - now, |act, ctx| {
                    let act = &mut act.inner;
                    act.paced = false;
                    crate::wake::clear(&act.woken);
                    act.pump(ctx);
                });
            }
            _ => {
                crate::wake::clear(&self.woken);
                self.pump(ctx);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that stays full: retries back off from 5 ms to 1 s, and the ERROR comes once, then
    /// at most every 10 s (before: a retry and a line every 5 ms tick).
    #[test]
    fn a_failing_dispatch_backs_off_and_logs_at_most_every_ten_seconds() {
        let t0 = Instant::now();
        let mut f = Failing::new(t0);
        let mut now = t0;
        let (mut logged, mut pauses) = (0, Vec::new());
        // 60 s of retries, each at the moment it is allowed.
        while now < t0 + Duration::from_secs(60) {
            logged += f.fail(now) as u32;
            pauses.push(f.retry_at - now);
            now = f.retry_at;
        }
        assert_eq!(pauses[..4], [5, 10, 20, 40].map(Duration::from_millis));
        assert!(pauses.iter().all(|p| *p <= RETRY_MAX));
        assert!(pauses.len() < 70, "{} retries in 60 s", pauses.len());
        assert_eq!(logged, 6, "the first, then one per 10 s");
        assert!(f.failures > f.logged_failures);
    }
}
