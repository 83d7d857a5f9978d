//! `StoreCleaner` — retention: deletes expired CommitLog files, then the ConsumeQueue and index
//! files that only point into them (`DefaultMessageStore.CleanCommitLogService` and
//! `CleanConsumeQueueService` in 4.9.4's `store/.../DefaultMessageStore.java`).
//!
//! In: a tick every `cleanResourceInterval` (the first after 60 s as RocketMQ, or six intervals
//! if that is sooner); [`CleanNow`]
//! (one round at once, for tests and benches); [`TriggerDeleteFiles`] (mqadmin's
//! `deleteExpiredCommitLog`, request code 329: the next 20 rounds act as if it were time to
//! delete); [`StopCleaning`] (a clean stop: no new round, and the reply waits for the one under
//! way). Out: [`DeleteQueuesBelow`] to the ConsumeQueue builder and [`DeleteBelow`] to the index
//! builder, which own those files; a [`CleanReport`] to `CleanNow`.
//!
//! A round deletes when it is time (the local hour is in `deleteWhen`), when a store disk (the
//! CommitLog's or the ConsumeQueues') is over `diskMaxUsedSpaceRatio` (or over either level
//! below, if lower), or when triggered. It walks the CommitLog files oldest first, never the last,
//! and deletes those older than `fileReservedTime` (by modification time) — or any, when a disk is
//! over `diskSpaceCleanForciblyRatio` or `diskSpaceWarningLevelRatio` (where writes are refused)
//! and `cleanFileForciblyEnable` is on — stopping at the first it keeps, at most
//! `deleteFileBatchMax` a round, `deleteCommitLogFilesInterval` apart. Then the ConsumeQueues,
//! a queue at a time with `deleteConsumeQueueFilesInterval` after each that deleted files (the
//! builder dispatches in between), and the index.
//!
//! Invariants: the CommitLog's last file is never deleted, nor a file holding a byte not yet
//! flushed or dispatched (RocketMQ does not check this; a reader of the ConsumeQueue must never
//! meet a unit whose message was deleted before the unit was even written). The ConsumeQueues are
//! flushed before a CommitLog file goes, so no unit of its records exists only in memory (after a
//! power loss it could not be rebuilt, and its queue offset would be handed out again). Files leave the
//! readers' lists before they leave the disk, and a reader holding one keeps its mapping. The
//! CommitLog's file list has one owner, the `CommitLogWriter`: this actor reads it through a view
//! to plan, and asks the writer to delete ([`DeleteFiles`]), one file at a time, as it asks the
//! ConsumeQueue and index builders. The ConsumeQueues' min offsets only move forward.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::config::StoreConfig;
use actormq_core::store::mapped_file::MappedFile;
use actormq_core::store::mapped_file_queue::FileQueueView;

use super::cq_builder::ConsumeQueueBuilder;
use super::flusher::DiskWatch;
use super::index_builder::IndexBuilder;
use super::messages::{
    CleanNow, DeleteBelow, DeleteFiles, DeleteQueuesBelow, FlushConsumeQueues, StopCleaning,
    TriggerDeleteFiles,
};
use super::state::StoreState;
use super::writer::CommitLogWriter;
use crate::metered::{ActorRef, Metered, Serve, Service};

// Also at its old path: the integration tests (`tests/store.rs`) name it here.
pub use super::messages::CleanReport;

/// Retention settings (broker.conf names in the field docs).
#[derive(Clone, Debug)]
pub struct RetentionParams {
    /// `cleanResourceInterval`.
    pub interval: Duration,
    /// Delay of the first round after start (RocketMQ: 60 s).
    pub first_delay: Duration,
    /// `fileReservedTime` (hours in broker.conf).
    pub reserved: Duration,
    /// `deleteWhen`: local hours of the day at which expired files are deleted.
    pub delete_when: Vec<u8>,
    /// `diskMaxUsedSpaceRatio`: over it, expired files are deleted at any hour.
    pub disk_max_used_pct: u32,
    /// `diskSpaceCleanForciblyRatio`: over it (with `cleanFileForciblyEnable`), files are
    /// deleted whether expired or not.
    pub clean_forcibly_pct: u32,
    /// `diskSpaceWarningLevelRatio`: writes are refused over it, so it forces cleaning too.
    pub warning_pct: u32,
    pub clean_forcibly_enable: bool,
    /// `deleteFileBatchMax`: CommitLog files per round.
    pub batch_max: usize,
    /// `deleteCommitLogFilesInterval`: pause between two CommitLog deletions.
    pub delete_pause: Duration,
    /// `deleteConsumeQueueFilesInterval`: pause after each ConsumeQueue that deleted files.
    pub cq_delete_pause: Duration,
}

impl RetentionParams {
    pub fn from_config(c: &StoreConfig) -> RetentionParams {
        RetentionParams {
            interval: Duration::from_millis(c.clean_resource_interval_ms.max(100)),
            // RocketMQ: 60 s. Six intervals is the same with the default interval, and lets a
            // test with a short interval see a round soon.
            first_delay: (Duration::from_millis(c.clean_resource_interval_ms.max(100)) * 6)
                .min(Duration::from_secs(60)),
            reserved: Duration::from_secs(u64::from(c.file_reserved_time_hours) * 3600),
            delete_when: c.delete_when_hours(),
            disk_max_used_pct: c.disk_max_used_space_ratio.clamp(10, 95),
            clean_forcibly_pct: c.disk_space_clean_forcibly_ratio,
            warning_pct: c.disk_space_warning_level_ratio,
            clean_forcibly_enable: c.clean_file_forcibly_enable,
            batch_max: c.delete_file_batch_max.max(1) as usize,
            delete_pause: Duration::from_millis(c.delete_commit_log_files_interval_ms),
            cq_delete_pause: Duration::from_millis(c.delete_consume_queue_files_interval_ms),
        }
    }

    /// Every file counts as expired, at any hour, and nothing pauses: for tests.
    pub fn immediate() -> RetentionParams {
        RetentionParams {
            interval: Duration::from_secs(3600),
            first_delay: Duration::from_secs(3600),
            reserved: Duration::ZERO,
            delete_when: (0..24).collect(),
            disk_max_used_pct: 95,
            clean_forcibly_pct: 100,
            warning_pct: 100,
            clean_forcibly_enable: false,
            batch_max: 10,
            delete_pause: Duration::ZERO,
            cq_delete_pause: Duration::ZERO,
        }
    }
}

pub struct StoreCleaner {
    params: RetentionParams,
    /// The CommitLog's files, read to plan a round.
    commit_log: FileQueueView,
    /// The owner of that list, which deletes.
    writer: ActorRef<CommitLogWriter>,
    /// (what, path) of the two watched disks ([`DiskWatch::store_disks`]).
    disks: Vec<(&'static str, PathBuf)>,
    state: Arc<StoreState>,
    clock: SharedClock,
    cq_builder: ActorRef<ConsumeQueueBuilder>,
    index_builder: Option<ActorRef<IndexBuilder>>,
    /// Rounds left that act as triggered ([`TriggerDeleteFiles`]).
    manual: u32,
    /// The CommitLog min offset the ConsumeQueues and index were last cleaned to.
    cleaned_to: Option<u64>,
    /// Rounds in flight (a tick's, and any `CleanNow`'s); a tick skips while one is.
    rounds: usize,
    /// Set by [`StopCleaning`]: no round starts, and the rounds in flight stop at their next
    /// step (between two file deletions, or two ConsumeQueue steps; a pause is cut short).
    stopped: tokio::sync::watch::Sender<bool>,
    /// `StopCleaning` replies waiting for the rounds in flight.
    stop_waiters: Vec<tokio::sync::oneshot::Sender<()>>,
}

/// Why a round deletes, if it does: the first of time, disk or trigger.
#[derive(Debug, PartialEq, Eq)]
enum Trigger {
    Time,
    Disk,
    Manual,
}

/// Whether a round deletes, given the local hour, the highest usage of the disks that could be
/// measured (`None`: none could), whether one could not, and the manual rounds left (one is used
/// up per round while any are left, as RocketMQ's `manualDeleteFileSeveralTimes`); and whether
/// it deletes unexpired files too.
/// As RocketMQ 5's `isSpaceToDelete`: over `diskMaxUsedSpaceRatio` expired files go; over
/// `diskSpaceCleanForciblyRatio` or `diskSpaceWarningLevelRatio` (where writes are refused)
/// any file goes, with `cleanFileForciblyEnable`. An unmeasurable disk deletes expired files;
/// the others still force cleaning on their own (RocketMQ checks each disk apart).
fn decide(
    p: &RetentionParams,
    hour: Option<u8>,
    usage: Option<f64>,
    unmeasured: bool,
    manual: &mut u32,
) -> Option<(Trigger, bool)> {
    let manual_round = *manual > 0;
    *manual = manual.saturating_sub(1);
    let force_at = p.clean_forcibly_pct.min(p.warning_pct) as f64;
    let at_once = p.clean_forcibly_enable && usage.is_some_and(|u| u > force_at);
    let trigger = if hour.is_some_and(|h| p.delete_when.contains(&h)) {
        Trigger::Time
    } else if unmeasured || usage.is_none_or(|u| u > (p.disk_max_used_pct as f64).min(force_at)) {
        Trigger::Disk
    } else if manual_round {
        Trigger::Manual
    } else {
        return None;
    };
    Some((trigger, at_once))
}

impl StoreCleaner {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        params: RetentionParams,
        commit_log: FileQueueView,
        writer: ActorRef<CommitLogWriter>,
        commit_log_dir: PathBuf,
        consume_queue_dir: PathBuf,
        state: Arc<StoreState>,
        clock: SharedClock,
        cq_builder: ActorRef<ConsumeQueueBuilder>,
        index_builder: Option<ActorRef<IndexBuilder>>,
    ) -> Self {
        StoreCleaner {
            params,
            commit_log,
            writer,
            disks: DiskWatch::store_disks(commit_log_dir, consume_queue_dir),
            state,
            clock,
            cq_builder,
            index_builder,
            manual: 0,
            cleaned_to: None,
            rounds: 0,
            stopped: tokio::sync::watch::Sender::new(false),
            stop_waiters: Vec::new(),
        }
    }

    /// The highest usage of the watched disks that could be measured (`None`: none could), and
    /// whether one could not (RocketMQ's -1: it cleans expired files, never unexpired ones, on
    /// that disk's account).
    fn usage(&self) -> (Option<f64>, bool) {
        let (mut max, mut unmeasured) = (None::<f64>, false);
        for (what, p) in &self.disks {
            match DiskWatch::used_pct(p) {
                Ok(pct) => max = Some(max.map_or(pct, |m| m.max(pct))),
                Err(e) => {
                    tracing::warn!(disk = what, path = %p.display(), error = %e, "cannot measure disk usage; deleting expired files");
                    unmeasured = true;
                }
            }
        }
        (max, unmeasured)
    }

    fn trigger(&mut self, (usage, unmeasured): (Option<f64>, bool)) -> Option<(Trigger, bool)> {
        let hour = {
            use chrono::{TimeZone, Timelike};
            chrono::Local
                .timestamp_millis_opt(self.clock.now_ms())
                .single()
                .map(|t| t.hour() as u8)
        };
        decide(&self.params, hour, usage, unmeasured, &mut self.manual)
    }

    /// The CommitLog files a round deletes now, oldest first.
    fn plan(&mut self) -> Vec<Arc<MappedFile>> {
        let usage = self.usage();
        let Some((why, at_once)) = self.trigger(usage) else {
            return Vec::new();
        };
        // Never past what is flushed and dispatched: those bytes may still be needed by recovery
        // or be missing from the ConsumeQueues.
        let safe_end = self.state.flushed().min(
            self.state
                .dispatched
                .load(std::sync::atomic::Ordering::Acquire),
        );
        // The wall clock, not the injected one: it is compared with the files' modification
        // times, which the file system stamps from the wall clock (RocketMQ compares
        // `lastModified` with `System.currentTimeMillis()` alike).
        let now = SystemTime::now();
        let files = self.commit_log.files();
        let mut doomed = Vec::new();
        for f in files[..files.len().saturating_sub(1)]
            .iter()
            .take(self.params.batch_max)
        {
            if f.file_from_offset() + f.file_size() > safe_end {
                break;
            }
            let expired = match std::fs::metadata(f.path()).and_then(|m| m.modified()) {
                Ok(t) => t + self.params.reserved <= now,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(_) => false, // unreadable: not known to be old
            };
            if !expired && !at_once {
                break;
            }
            tracing::info!(file = %f.path().display(), trigger = ?why, expired, usage_pct = ?usage.0, "deleting CommitLog file");
            doomed.push(f.clone());
        }
        if doomed.is_empty() && why == Trigger::Disk {
            // RocketMQ warns alike ("disk space will be full soon, but delete file failed").
            tracing::warn!(
                usage_pct = ?usage.0,
                at_once,
                files = files.len(),
                "the disk is over its limit, but no CommitLog file can be deleted yet (the \
                 oldest is not expired, or not yet flushed and dispatched, or it is the last)"
            );
        }
        doomed
    }

    /// One round: the CommitLog files due (after a ConsumeQueue flush, so that no unit of a
    /// record about to go exists only in memory: after a power loss it could be rebuilt from
    /// nowhere, and its queue offset would be handed out again), then — when the CommitLog's first
    /// byte moved — the ConsumeQueues and index by their owners. If that flush fails (a
    /// ConsumeQueue write-back error is reported by every later flush), only the files whose
    /// units an earlier flush put on disk go (`StoreState::cq_durable`): retention goes on
    /// freeing space, as RocketMQ's does, without deleting a record whose unit may be lost.
    fn round(&mut self) -> impl std::future::Future<Output = std::io::Result<CleanReport>> {
        let mut doomed = self.plan();
        let state = self.state.clone();
        let files = self.commit_log.clone();
        let writer = self.writer.clone();
        let (pause, cq_pause) = (self.params.delete_pause, self.params.cq_delete_pause);
        let cleaned_to = self.cleaned_to;
        let (cq, idx) = (self.cq_builder.clone(), self.index_builder.clone());
        let stop = self.stopped.subscribe();
        self.rounds += 1;
        async move {
            let stopping = || *stop.borrow();
            // A pause between two steps that ends early if the store stops.
            let pause_unless_stopped = |d: Duration| {
                let mut stop = stop.clone();
                async move {
                    tokio::select! {
                        _ = actix_rt::time::sleep(d) => {}
                        _ = stop.wait_for(|s| *s) => {}
                    }
                }
            };
            let mut report = CleanReport::default();
            if !doomed.is_empty() {
                let flushed = cq
                    .send(FlushConsumeQueues { sync_all: false })
                    .await
                    .map_err(std::io::Error::other)?;
                if let Err(e) = flushed {
                    let durable = state.cq_durable.load(std::sync::atomic::Ordering::Acquire);
                    let due = doomed.len();
                    doomed.retain(|f| f.file_from_offset() + f.file_size() <= durable);
                    tracing::warn!(
                        error = %e,
                        durable,
                        deleting = doomed.len(),
                        due,
                        "ConsumeQueue flush failed: deleting only the CommitLog files whose \
                         units an earlier flush put on disk"
                    );
                }
            }
            for (i, f) in doomed.iter().enumerate() {
                if i > 0 && !pause.is_zero() {
                    pause_unless_stopped(pause).await;
                }
                if stopping() {
                    break;
                }
                report.commit_log_files += writer
                    .send(DeleteFiles(vec![f.clone()]))
                    .await
                    .map_err(std::io::Error::other)??;
            }
            let min = files.files().first().map_or(0, |f| f.file_from_offset());
            report.min_offset = min;
            if cleaned_to != Some(min) {
                let stepwise = !cq_pause.is_zero();
                loop {
                    let step = cq
                        .send(DeleteQueuesBelow {
                            min_phy: min,
                            stepwise,
                        })
                        .await
                        .map_err(std::io::Error::other)??;
                    report.consume_queue_files += step.files;
                    if step.done {
                        break;
                    }
                    pause_unless_stopped(cq_pause).await;
                    if stopping() {
                        break;
                    }
                }
                // A pass left unfinished by a stop is finished by the next start's
                // `correct_min_offsets` (its files go in the next round after it).
                if let Some(idx) = idx.filter(|_| !stopping()) {
                    report.index_files = idx
                        .send(DeleteBelow { min_phy: min })
                        .await
                        .map_err(std::io::Error::other)??;
                }
            }
            Ok(report)
        }
    }

    fn finish(&mut self, r: &std::io::Result<CleanReport>) {
        self.rounds -= 1;
        if self.rounds == 0 {
            for w in self.stop_waiters.drain(..) {
                let _ = w.send(());
            }
        }
        match r {
            Ok(r) => {
                // A round cut short by a stop may not have reached every queue.
                if !*self.stopped.borrow() {
                    self.cleaned_to = Some(r.min_offset);
                }
                if r.commit_log_files + r.consume_queue_files + r.index_files > 0 {
                    tracing::info!(
                        commit_log_files = r.commit_log_files,
                        consume_queue_files = r.consume_queue_files,
                        index_files = r.index_files,
                        min_offset = r.min_offset,
                        "retention round deleted files"
                    );
                }
            }
            Err(e) => tracing::error!(error = %e, "retention round failed; retried next round"),
        }
    }

    fn tick(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.rounds > 0 || *self.stopped.borrow() {
            return;
        }
        let fut = self.round();
        ctx.spawn(
            actix::fut::wrap_future::<_, Metered<Self>>(fut).map(|r, act, _| act.inner.finish(&r)),
        );
    }
}

impl Service for StoreCleaner {
    const NAME: &'static str = "store_cleaner";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        let every = self.params.interval;
        ctx.run_later(self.params.first_delay, move |act, ctx| {
            act.inner.tick(ctx);
            ctx.run_interval(every, |act, ctx| act.inner.tick(ctx));
        });
    }
}

impl Serve<CleanNow> for StoreCleaner {
    type Reply = ResponseActFuture<Metered<Self>, std::io::Result<CleanReport>>;
    fn serve(&mut self, _: CleanNow, _: &mut Context<Metered<Self>>) -> Self::Reply {
        if *self.stopped.borrow() {
            return Box::pin(actix::fut::ready(Err(std::io::Error::other(
                "the store is stopping: no retention round starts",
            ))));
        }
        let fut = self.round();
        Box::pin(
            actix::fut::wrap_future::<_, Metered<Self>>(fut).map(|r, act, _| {
                act.inner.finish(&r);
                r
            }),
        )
    }
}

impl Serve<StopCleaning> for StoreCleaner {
    type Reply = ResponseFuture<()>;
    fn serve(&mut self, _: StopCleaning, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.stopped.send_replace(true);
        if self.rounds == 0 {
            return Box::pin(async {});
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.stop_waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Serve<TriggerDeleteFiles> for StoreCleaner {
    type Reply = ();
    fn serve(&mut self, _: TriggerDeleteFiles, _: &mut Context<Metered<Self>>) {
        tracing::info!(
            "expired files will be deleted in the next 20 retention rounds (manual trigger)"
        );
        self.manual = 20;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three triggers, in RocketMQ's order: the hour, the disk, then the manual trigger,
    /// which lasts 20 rounds.
    #[test]
    fn a_round_deletes_at_the_hour_over_the_disk_limits_or_when_triggered() {
        let mut p = RetentionParams::immediate();
        p.delete_when = vec![4];
        p.disk_max_used_pct = 75;
        p.clean_forcibly_pct = 85;
        p.warning_pct = 90;
        p.clean_forcibly_enable = true;
        let mut manual = 0;
        let d = |hour, usage, manual: &mut u32| decide(&p, Some(hour), usage, false, manual);
        assert_eq!(d(3, Some(70.0), &mut manual), None);
        assert_eq!(d(4, Some(70.0), &mut manual), Some((Trigger::Time, false)));
        assert_eq!(d(3, Some(75.5), &mut manual), Some((Trigger::Disk, false)));
        assert_eq!(d(3, Some(86.0), &mut manual), Some((Trigger::Disk, true)));
        assert_eq!(d(4, Some(86.0), &mut manual), Some((Trigger::Time, true)));
        // An unmeasurable disk deletes expired files only...
        assert_eq!(d(3, None, &mut manual), Some((Trigger::Disk, false)));
        let two = |usage| decide(&p, Some(3), usage, true, &mut 0);
        assert_eq!(two(None), Some((Trigger::Disk, false)));
        assert_eq!(two(Some(10.0)), Some((Trigger::Disk, false)));
        // ...and takes nothing from the one that could be measured and is full.
        assert_eq!(two(Some(95.0)), Some((Trigger::Disk, true)));
        manual = 20;
        for _ in 0..20 {
            assert_eq!(
                d(3, Some(70.0), &mut manual),
                Some((Trigger::Manual, false))
            );
        }
        assert_eq!(d(3, Some(70.0), &mut manual), None, "20 rounds");
        // Used up by any round while left.
        manual = 1;
        assert_eq!(d(4, Some(70.0), &mut manual), Some((Trigger::Time, false)));
        assert_eq!(manual, 0);
    }

    /// Writes refused over the warning level force cleaning even when the other levels are set
    /// higher: otherwise a store between them would stay refused for good.
    #[test]
    fn the_write_limit_forces_cleaning_below_the_other_levels() {
        let mut p = RetentionParams::immediate();
        p.delete_when = vec![];
        p.disk_max_used_pct = 75;
        p.clean_forcibly_pct = 85;
        p.warning_pct = 60;
        p.clean_forcibly_enable = true;
        assert_eq!(
            decide(&p, Some(3), Some(61.0), false, &mut 0),
            Some((Trigger::Disk, true))
        );
        p.clean_forcibly_enable = false;
        assert_eq!(
            decide(&p, Some(3), Some(61.0), false, &mut 0),
            Some((Trigger::Disk, false))
        );
    }
}
