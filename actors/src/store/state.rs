//! Positions and health flags of a running store, shared between its actors as atomics (the
//! published watermarks of ARCHITECTURE.md, "Shared state between actors"). Each field has exactly
//! one writer, named below; everyone else reads.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use arc_swap::ArcSwapOption;

#[derive(Default)]
pub struct StoreState {
    /// Flusher / GroupCommitter: CommitLog bytes known to be on disk.
    pub flushed: AtomicU64,
    /// Committer (ASYNC_FLUSH) or GroupCommitter (SYNC_FLUSH), with write buffers only: CommitLog
    /// bytes copied from the buffers into the files (the readers' limit).
    pub committed: AtomicU64,
    /// The same owner: store time of the newest record known to be committed (what the flusher
    /// may write to the checkpoint as flushed once it has flushed that far).
    pub committed_ts: AtomicI64,
    /// ReputDispatcher: CommitLog bytes dispatched to ConsumeQueues and the index.
    pub dispatched: AtomicU64,
    /// CommitLogWriter: store time of the newest appended record.
    pub last_store_ts: AtomicI64,
    /// ConsumeQueueBuilder: store time of the newest unit known flushed, with every unit before
    /// it (checkpoint "logics").
    pub logics_ts: AtomicI64,
    /// ConsumeQueueBuilder: the CommitLog offset below which every record's ConsumeQueue unit is
    /// known flushed, raised with `logics_ts` and, like it, frozen by a ConsumeQueue data error.
    /// Retention deletes no CommitLog file past it when the flush it asks for fails.
    pub cq_durable: AtomicU64,
    /// IndexBuilder: end time of the newest fully flushed index file (checkpoint "index").
    pub index_ts: AtomicI64,
    /// Set (with the reason) when a flush failed: the store refuses writes until restarted,
    /// because what it acknowledged may not be on disk (apache/rocketmq#3129).
    pub read_only: ArcSwapOption<String>,
    /// Set (with the reason) while the disk is over `diskSpaceWarningLevelRatio`; cleared when
    /// space returns.
    pub disk_full: ArcSwapOption<String>,
    /// ReputDispatcher: set (with the reason) while dispatch to the ConsumeQueues or the index
    /// fails, cleared by the first batch that goes through. Writes are refused meanwhile, as
    /// RocketMQ refuses them after a ConsumeQueue write error: an acknowledged message that no
    /// consumer can see (a ConsumeQueue file that cannot be made on a full disk) must not pile up
    /// behind it unannounced.
    pub dispatch_failing: ArcSwapOption<String>,
    /// Set by `Store::shutdown` before it flushes: appends after this point are refused, so the
    /// final flush and dispatch cover everything that was acknowledged.
    pub stopping: ArcSwapOption<String>,
    /// GroupCommitter: flushes that answered waiters, and how many waiting messages were answered
    /// as flushed (the mean group-commit batch is their ratio; a batch of SENDs is one waiter, many
    /// messages) — also those a timed flush had covered before their wait arrived (that flush
    /// counted once). Counted before the answers go out.
    pub group_flushes: AtomicU64,
    pub group_messages: AtomicU64,
    /// ScheduleDelivery: delayed messages delivered to their real topics, and their CommitLog
    /// bytes (the broker's runtime totals count every CommitLog put, as 4.9.4's do).
    pub delivered_msgs: AtomicU64,
    pub delivered_bytes: AtomicU64,
    /// Flusher / GroupCommitter: how long each CommitLog flush that wrote something took.
    pub flush_time: FlushTimes,
}

/// Durations of CommitLog flushes that wrote data (`fdatasync`, or `msync` of a mapping; not the
/// write buffers' commit before it), as the Prometheus histogram
/// `actormq_commitlog_flush_seconds` — the disk's side of a SYNC_FLUSH send's latency, as etcd's
/// `etcd_disk_wal_fsync_duration_seconds` is of a write's. Its sum over a window, divided by the
/// window, is the share of the time the flushing actor waited in `fdatasync`/`msync`: near 1
/// the flushes are the limit; well below it, with sends waiting, the time between flushes is.
/// It is not all the disk's work: the allocator's zeroing ahead (SYNC_FLUSH, small groups) and
/// ASYNC_FLUSH's write-behind (`sync_file_range`) write outside it. Observing is two atomic
/// adds, once per flush, by the one actor that flushes.
pub struct FlushTimes(prometheus::Histogram);

/// 50 µs to ~1.2 s, a factor of √2 apart: a quantile interpolated inside its bucket is within
/// +41 % / −29 % of the true one (below 50 µs it means nothing: the first bucket starts at 0).
fn flush_buckets() -> Vec<f64> {
    (0..30)
        .map(|i| 50e-6 * std::f64::consts::SQRT_2.powi(i))
        .collect()
}

impl Default for FlushTimes {
    fn default() -> Self {
        let opts = prometheus::HistogramOpts::new(
            "actormq_commitlog_flush_seconds",
            "Time of one CommitLog flush that wrote data (fdatasync or msync), seconds",
        )
        .buckets(flush_buckets());
        FlushTimes(prometheus::Histogram::with_opts(opts).expect("valid histogram"))
    }
}

impl FlushTimes {
    pub fn observe(&self, d: std::time::Duration) {
        self.0.observe(d.as_secs_f64());
    }
    /// The histogram, for `/metrics` and the benchmark.
    pub fn histogram(&self) -> &prometheus::Histogram {
        &self.0
    }
}

impl StoreState {
    pub fn flushed(&self) -> u64 {
        self.flushed.load(Ordering::Acquire)
    }
    /// Why writes are refused now, if they are.
    pub fn refusal(&self) -> Option<String> {
        if let Some(r) = self.stopping.load_full() {
            return Some(r.to_string());
        }
        if let Some(r) = self.read_only.load_full() {
            return Some(format!("the store is read-only: {r}"));
        }
        if let Some(r) = self.disk_full.load_full() {
            return Some(r.to_string());
        }
        self.dispatch_failing.load_full().map(|r| {
            format!("dispatch to the ConsumeQueues and the index is failing, so writes are refused until a dispatch batch goes through again: {r}")
        })
    }
    pub fn set_read_only(&self, reason: String) {
        if self.read_only.load().is_none() {
            tracing::error!(%reason, "store turned read-only");
        }
        self.read_only.store(Some(std::sync::Arc::new(reason)));
    }
}
