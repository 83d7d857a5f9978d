//! `actormq bench store`: an in-process benchmark of the store through its actors (no network).
//!
//! C concurrent producers append N messages of S bytes (B messages per append) into a temporary
//! store with async flush; the run then waits for dispatch and reads every message back through
//! the ConsumeQueues. It prints msgs/s, MB/s, append latency p50/p99/p999 and, measured in the same
//! run, the bare rate of copying S bytes into a warm mapping — the ceiling no store can beat; and
//! the CPU per message (this process is the store: utime + stime of all its threads, producers
//! included, from the first append until everything is dispatched; the read-back separately) and
//! the resident set before the store opens and before it shuts down.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq_core::clock::SystemClock;
use actormq_core::format::properties::keys;
use actormq_core::format::record::{body_crc, NewMessage};
use actormq_core::offset::QueueOffset;
use actormq_core::store::mapped_file::{MappedFile, Warm};
use actormq_core::store::reader::{GetLimits, GetStatus, TagFilter};
use bytes::Bytes;
use hdrhistogram::Histogram;

use crate::store::coalesce::PutCoalescer;
use crate::store::{Store, StoreParams};

#[derive(Clone, Debug, clap::Args)]
pub struct StoreBenchArgs {
    /// Message body size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Total messages to append.
    #[arg(long, default_value_t = 2_000_000)]
    pub messages: u64,
    /// Concurrent producers.
    #[arg(long, default_value_t = 64)]
    pub producers: usize,
    /// Messages per append (one writer mailbox message).
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Queues of the benchmark topic.
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// CommitLog file size (mappedFileSizeCommitLog).
    #[arg(long, default_value_t = 1 << 30)]
    pub file_size: u64,
    /// Pre-fault new CommitLog files (warmMapedFileEnable).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub warm: bool,
    /// Store directory (a temporary directory, removed afterwards, when omitted).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// `async` (ASYNC_FLUSH, the throughput run) or `sync` (SYNC_FLUSH: one run per concurrency of
    /// `--concurrency`, each for `--seconds`, against a bare write+fdatasync loop on the same disk).
    #[arg(long, default_value = "async")]
    pub flush: String,
    /// SYNC_FLUSH runs: concurrent producers of each run.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    pub concurrency: Vec<usize>,
    /// SYNC_FLUSH runs: seconds per run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// SYNC_FLUSH runs: the producers first write until the store is in its second CommitLog
    /// file (at most `--seconds` x 10), and only then is a run measured — the steady state of a
    /// running broker, whose files after the first are prepared (zeroed ahead) while the one
    /// before fills. `false` measures from the first append of a fresh store.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub sync_warmup: bool,
    /// SYNC_FLUSH runs: how many times to measure the whole table, each round with its own bare
    /// baselines. With more than one, a summary follows: per concurrency the median of each
    /// figure over the rounds and the range of `p99 / bare p99` — on a shared disk one round's
    /// p99 says little (the same build varied ±30 % between rounds here).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// SYNC_FLUSH runs: the producers' appends of one turn of their thread go to the writer as one
    /// batch (`PutCoalescer`), as the broker's SENDs of one connection-thread turn do; `false`
    /// sends each as its own writer message (`Store::put`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub coalesce: bool,
    /// Write buffers (`transientStorePoolEnable=true`): appends go to pool buffers and reach the
    /// files by `pwrite` (committer in async, group committer in sync); flushes use fdatasync.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub transient_store_pool: bool,
    /// Buffers in the pool (`transientStorePoolSize`).
    #[arg(long, default_value_t = 5)]
    pub transient_store_pool_size: usize,
    /// After the async run: stop, drop the checkpoint (as if the crash came before the first one)
    /// and time abnormal recovery of everything written.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub recovery: bool,
}

/// Figures of one run.
#[derive(Clone, Debug)]
pub struct StoreBenchReport {
    pub append_msgs_per_s: f64,
    pub append_mb_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub read_msgs_per_s: f64,
    pub memcpy_msgs_per_s: f64,
    pub read_back: u64,
    /// The SYNC_FLUSH table, when `--flush sync`.
    pub sync_table: Option<String>,
    /// Abnormal recovery of the whole CommitLog.
    pub recovery: Option<RecoveryTiming>,
    /// CPU of this process per message appended (until dispatched) and per message read back,
    /// microseconds (0 in SYNC_FLUSH runs: their table has it per row).
    pub append_cpu_us: f64,
    pub read_cpu_us: f64,
    /// Resident set before the store opened and before it shut down, bytes.
    pub rss_start: Option<u64>,
    pub rss_end: Option<u64>,
}

/// This process's resident set now, bytes (`None` where `/proc` cannot tell).
fn rss_now() -> Option<u64> {
    crate::metrics::proc_stat::read_stat(&crate::metrics::proc_stat::proc_dir(None).join("stat"))
        .ok()
        .map(|s| s.rss_bytes())
}

/// The ceiling: copy `size`-byte buffers into a warm mapping, `n` times.
fn memcpy_ceiling(dir: &std::path::Path, size: usize, n: u64) -> std::io::Result<f64> {
    let map_len: u64 = 256 << 20;
    let f = MappedFile::create(dir, 0, map_len, Warm::Populate)?;
    let src = vec![0x5Au8; size];
    let start = Instant::now();
    let mut pos = 0u64;
    for _ in 0..n {
        if pos + size as u64 > map_len {
            pos = 0;
            f.publish_wrote(0);
        }
        // SAFETY: single owner of this scratch file; pos is at/after the published position.
        unsafe { f.write_slice(pos, size).copy_from_slice(&src) };
        pos += size as u64;
        f.publish_wrote(pos);
    }
    let secs = start.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(dir.join("00000000000000000000"))?;
    Ok(n as f64 / secs)
}

fn message(topic: &str, queue_id: i32, body: &Bytes, seq: u64, host: SocketAddr) -> NewMessage {
    // What a producer connection hands the writer: CRC computed off the writer, UNIQ_KEY and TAGS
    // as every RocketMQ client sends them.
    let properties = format!(
        "{}\u{1}BenchTag\u{2}{}\u{1}{:032X}\u{2}{}\u{1}true\u{2}",
        keys::TAGS,
        keys::UNIQ_KEY,
        seq,
        keys::WAIT
    );
    NewMessage {
        topic: topic.to_string(),
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 0,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_tx_offset: 0,
        body: body.clone(),
        body_crc: body_crc(body),
        properties,
        wait_store_msg_ok: true,
    }
}

pub async fn run_store_bench(args: &StoreBenchArgs) -> anyhow::Result<StoreBenchReport> {
    if args.flush == "sync" {
        return run_sync_flush_bench(args).await;
    }
    anyhow::ensure!(
        args.flush == "async",
        "--flush must be async or sync, not {:?}",
        args.flush
    );
    let tmp;
    let root = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let ceiling = memcpy_ceiling(&root, args.size, args.messages.min(2_000_000))?;

    let rss_start = rss_now();
    let mut params = rocketmq_defaults(&root);
    params.commit_log_file_size = args.file_size;
    params.warm_mapped_files = args.warm;
    params.transient_store_pool_size = pool_size(args);
    let store = Rc::new(Store::open(params, Arc::new(SystemClock)).await?);

    let total = args.messages / args.producers as u64 * args.producers as u64;
    let cpu0 = crate::tools::bench_wire::process_cpu();
    let started = Instant::now();
    let hist = append_all(&store, args).await?;
    let append_secs = started.elapsed().as_secs_f64();

    // Read everything back through the ConsumeQueues.
    // With write buffers, what was appended is readable once committed: commit it all first.
    store.commit_now().await?;
    let end = store.max_offset();
    anyhow::ensure!(
        store.wait_dispatched(end, Duration::from_secs(600)).await,
        "dispatch did not catch up"
    );
    let cpu1 = crate::tools::bench_wire::process_cpu();
    let read_started = Instant::now();
    let read = read_all(&store, args.queues.max(1));
    let read_secs = read_started.elapsed().as_secs_f64();
    let cpu2 = crate::tools::bench_wire::process_cpu();
    anyhow::ensure!(read == total, "read back {read} of {total} messages");

    let mut report = StoreBenchReport {
        append_msgs_per_s: total as f64 / append_secs,
        append_mb_per_s: total as f64 * args.size as f64 / append_secs / 1e6,
        p50_us: hist.value_at_quantile(0.50) as f64,
        p99_us: hist.value_at_quantile(0.99) as f64,
        p999_us: hist.value_at_quantile(0.999) as f64,
        read_msgs_per_s: read as f64 / read_secs,
        memcpy_msgs_per_s: ceiling,
        read_back: read,
        sync_table: None,
        recovery: None,
        append_cpu_us: (cpu1 - cpu0).as_secs_f64() * 1e6 / total.max(1) as f64,
        read_cpu_us: (cpu2 - cpu1).as_secs_f64() * 1e6 / read.max(1) as f64,
        rss_start,
        rss_end: rss_now(),
    };
    let params = store.params().clone();
    store.shutdown().await?;
    drop(store);
    if args.recovery {
        report.recovery = Some(time_abnormal_recovery(params).await?);
    }
    Ok(report)
}

/// `--producers` concurrent producers append `--messages` (rounded down to a multiple of the
/// producers) in batches of `--batch`; the append latencies of them all. Any failed append fails
/// the run.
async fn append_all(store: &Rc<Store>, args: &StoreBenchArgs) -> anyhow::Result<Histogram<u64>> {
    let body = Bytes::from(vec![0x42u8; args.size]);
    let host: SocketAddr = "127.0.0.1:10911".parse()?;
    let per = args.messages / args.producers as u64;
    let mut tasks = Vec::new();
    for p in 0..args.producers {
        let load = AppendLoad {
            first_seq: p as u64 * per,
            count: per,
            batch: args.batch.max(1),
            queues: args.queues.max(1),
            body: body.clone(),
            host,
        };
        tasks.push(actix_rt::spawn(append_producer(store.clone(), load)));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut errors = 0;
    for t in tasks {
        let (h, e) = t.await?;
        hist.add(h)?;
        errors += e;
    }
    anyhow::ensure!(errors == 0, "{errors} appends failed");
    Ok(hist)
}

/// One producer's share of `bench store`: messages `first_seq..first_seq + count`, round-robin
/// over the queues.
struct AppendLoad {
    first_seq: u64,
    count: u64,
    batch: usize,
    queues: i32,
    body: Bytes,
    host: SocketAddr,
}

/// Appends `load` (one `put` per message when the batch is 1, else `put_many`); the latency of
/// each append and the number of failed messages.
async fn append_producer(store: Rc<Store>, load: AppendLoad) -> (Histogram<u64>, u64) {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("static bounds");
    let mut sent = 0u64;
    let mut errors = 0u64;
    while sent < load.count {
        let n = load.batch.min((load.count - sent) as usize);
        let msgs: Vec<_> = (0..n)
            .map(|i| {
                let seq = load.first_seq + sent + i as u64;
                let queue = (seq % load.queues as u64) as i32;
                message("BenchTopic", queue, &load.body, seq, load.host)
            })
            .collect();
        let t = Instant::now();
        let results = if n == 1 {
            vec![
                store
                    .put(msgs.into_iter().next().expect("one message"))
                    .await,
            ]
        } else {
            store.put_many(msgs).await
        };
        let _ = hist.record(t.elapsed().as_micros().max(1) as u64);
        errors += results.iter().filter(|r| r.is_err()).count() as u64;
        sent += n as u64;
    }
    (hist, errors)
}

/// Reads every message of queues `0..queues` of the bench topic back through the ConsumeQueues;
/// how many.
fn read_all(store: &Store, queues: i32) -> u64 {
    let reader = store.reader().clone();
    let filter = TagFilter::all();
    let mut read = 0u64;
    let mut bytes = 0usize;
    for q in 0..queues {
        let mut off = QueueOffset(0);
        loop {
            let r = reader.get_messages("BenchTopic", q, off, GetLimits::default(), &filter);
            if r.status != GetStatus::Found {
                break;
            }
            read += r.messages.len() as u64;
            bytes += r.messages.iter().map(|m| m.as_bytes().len()).sum::<usize>();
            off = r.next_begin_offset;
        }
    }
    std::hint::black_box(bytes);
    read
}

/// Abnormal recovery of everything in the store: an abort file and a zeroed checkpoint (a crash
/// before the first checkpoint) make recovery CRC-check every record of every file and
/// re-dispatch it.
async fn time_abnormal_recovery(params: StoreParams) -> anyhow::Result<RecoveryTiming> {
    std::fs::write(params.root.join("checkpoint"), vec![0u8; 4096])?;
    let started = Instant::now();
    let store = Store::open_with(params, Arc::new(SystemClock), None, true).await?;
    let r = RecoveryTiming {
        ms: started.elapsed().as_millis() as u64,
        bytes: store.report.commit_log_end,
        records: store.report.records_scanned,
        scan_ms: store.report.scan_ms,
        dispatch_ms: store.report.dispatch_ms,
    };
    store.shutdown().await?;
    Ok(r)
}

/// What `--recovery` measured: the whole open and its two long phases.
#[derive(Debug, Clone, Copy)]
pub struct RecoveryTiming {
    pub bytes: u64,
    pub records: u64,
    pub ms: u64,
    /// The CommitLog scan (CRC check of every record).
    pub scan_ms: u64,
    /// Dispatch catching up (ConsumeQueues and index rebuilt).
    pub dispatch_ms: u64,
}

/// CommitLog file size cap of the SYNC_FLUSH runs: small enough that the warm-up (one file) takes
/// seconds even at one producer.
const SYNC_FILE_CAP: u64 = 64 << 20;

/// RocketMQ's defaults for everything the benchmarks do not vary (ConsumeQueue and IndexFile
/// sizes and flush pacing, the async flush intervals), rooted at `root`.
fn rocketmq_defaults(root: &std::path::Path) -> StoreParams {
    let mut params = StoreParams::for_tests(root);
    params.cq_file_size = 300_000 * 20;
    params.max_message_size = 4 << 20;
    params.flush_interval = Duration::from_millis(500);
    params.flush_thorough_interval = Duration::from_secs(10);
    params.cq_flush_interval = Duration::from_millis(1000);
    params.cq_flush_least_pages = 2;
    params.cq_flush_thorough_interval = Duration::from_secs(60);
    params.flush_least_pages = 4;
    params.max_hash_slot_num = 5_000_000;
    params.max_index_num = 20_000_000;
    params
}

fn pool_size(args: &StoreBenchArgs) -> usize {
    if args.transient_store_pool {
        args.transient_store_pool_size.max(1)
    } else {
        0
    }
}

/// p50/p99 (µs) of `n` appends of `size` bytes, each followed by fdatasync, in `dir`.
fn bare_fdatasync(dir: &std::path::Path, size: usize, n: usize) -> anyhow::Result<(f64, f64)> {
    use std::io::Write;
    let path = dir.join("fdatasync-baseline");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)?;
    let buf = vec![0x5Au8; size];
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for _ in 0..n {
        let t = Instant::now();
        f.write_all(&buf)?;
        f.sync_data()?;
        hist.record(t.elapsed().as_micros().max(1) as u64)?;
    }
    drop(f);
    std::fs::remove_file(&path)?;
    Ok((
        hist.value_at_quantile(0.5) as f64,
        hist.value_at_quantile(0.99) as f64,
    ))
}

/// SYNC_FLUSH: for each concurrency, producers append one message at a time for `--seconds`,
/// every reply waiting for its fdatasync; reports msgs/s, latency, the mean group-commit batch
/// and flushes/s, next to two bare write+fdatasync loops on the same disk: one of single
/// messages, and (per row) one whose writes are that row's mean group-commit batch in bytes.
async fn run_sync_flush_bench(args: &StoreBenchArgs) -> anyhow::Result<StoreBenchReport> {
    let tmp;
    let root = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let rounds = args.rounds.max(1);
    let mut table = String::new();
    let mut rows = Vec::new();
    for round in 1..=rounds {
        if rounds > 1 {
            table.push_str(&format!("round {round} of {rounds}\n"));
        }
        let (t, r) = sync_flush_round(args, &root).await?;
        table.push_str(&t);
        rows.extend(r);
    }
    if rounds > 1 {
        table.push_str(&sync_summary(&args.concurrency, &rows));
    }
    Ok(StoreBenchReport {
        append_msgs_per_s: 0.0,
        append_mb_per_s: 0.0,
        p50_us: 0.0,
        p99_us: 0.0,
        p999_us: 0.0,
        read_msgs_per_s: 0.0,
        memcpy_msgs_per_s: 0.0,
        read_back: 0,
        sync_table: Some(table),
        recovery: None,
        append_cpu_us: 0.0,
        read_cpu_us: 0.0,
        rss_start: None,
        rss_end: None,
    })
}

/// One row of one round of the SYNC_FLUSH bench, for the summary over rounds.
#[derive(Clone, Copy, Debug)]
struct SyncRow {
    producers: usize,
    rate: f64,
    p50: f64,
    p99: f64,
    bare_p99: f64,
    /// The store's own CommitLog flushes in the row (from `actormq_commitlog_flush_seconds`):
    /// p99 in µs, and the share of the row's time spent flushing.
    flush_p99: f64,
    flush_busy: f64,
    /// p99 in µs of the bare loop writing this row's mean group-commit batch per `fdatasync`:
    /// the disk's own time for one round's bytes, with no broker around it.
    batch_p99: f64,
}

/// A read of the store's flush histogram (`StoreState::flush_time`), to difference two reads:
/// what one row's flushes took.
#[derive(Clone, Debug, PartialEq)]
struct FlushSnap {
    /// (upper bound in seconds, cumulative count), ascending; the implicit +Inf bucket is `count`.
    buckets: Vec<(f64, u64)>,
    count: u64,
    sum: f64,
}

impl FlushSnap {
    fn of(h: &prometheus::Histogram) -> Self {
        use prometheus::core::Metric as _;
        let m = h.metric();
        let h = m.get_histogram();
        FlushSnap {
            buckets: h
                .get_bucket()
                .iter()
                .map(|b| (b.upper_bound(), b.cumulative_count()))
                .collect(),
            count: h.get_sample_count(),
            sum: h.get_sample_sum(),
        }
    }

    /// The flushes between `before` and this read.
    fn since(&self, before: &FlushSnap) -> FlushSnap {
        FlushSnap {
            buckets: self
                .buckets
                .iter()
                .zip(&before.buckets)
                .map(|(a, b)| (a.0, a.1 - b.1))
                .collect(),
            count: self.count - before.count,
            sum: self.sum - before.sum,
        }
    }

    /// The `q` quantile in seconds, interpolated linearly inside its bucket (the buckets are a
    /// factor √2 apart, so within +41 % / -29 %); past the last bound, that bound. 0 without flushes.
    fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = q * self.count as f64;
        let (mut lower, mut below) = (0.0, 0u64);
        for &(upper, cumulative) in &self.buckets {
            if cumulative as f64 >= rank && cumulative > below {
                let within = (rank - below as f64) / (cumulative - below) as f64;
                return lower + within.clamp(0.0, 1.0) * (upper - lower);
            }
            (lower, below) = (upper, cumulative);
        }
        lower
    }

    /// One line for a row of `secs`: the flushes' count, p50/p99, the share of the time the flusher
    /// spent flushing, and the mean time between one flush's end and the next one's start —
    /// together the two sides of a lock-step round (the disk, and everything else).
    fn describe(&self, secs: f64) -> String {
        let between = if self.count > 0 {
            (secs - self.sum).max(0.0) / self.count as f64 * 1e6
        } else {
            0.0
        };
        format!(
            "           flushes (actormq_commitlog_flush_seconds, +41/-29 %): {} ({:.0}/s), p50 {:.0} us \
             p99 {:.0} us, flushing {:.0} % of the time, {between:.0} us between flushes (mean)\n",
            self.count,
            self.count as f64 / secs.max(1e-9),
            self.quantile(0.5) * 1e6,
            self.quantile(0.99) * 1e6,
            100.0 * self.sum / secs.max(1e-9),
        )
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A round counts as quiet when its bare 1-message p99 is at most this many times the lowest of
/// all rounds: on a shared disk a neighbour's burst can make one `fdatasync` take milliseconds,
/// and a ratio over such a baseline means nothing (it once read 0.22).
const QUIET_BARE: f64 = 1.5;

/// Per concurrency: medians over all rounds, then over the quiet rounds (see [`QUIET_BARE`]) the
/// p99 ratio (each round's p99 over its own bare p99): median, range, and in how many it was at
/// most 2 (#3's target). Last, the disk's floor under that target: the bare loop of the row's
/// batch (what one group commit must make durable) as a share of the bound, 2 × the round's bare
/// p99. With one message outstanding per producer a round cannot take less than that flush, so
/// where the share is 1 or more the target is out of reach on this disk whatever the broker does.
fn sync_summary(concurrency: &[usize], rows: &[SyncRow]) -> String {
    let lowest = rows.iter().map(|r| r.bare_p99).fold(f64::MAX, f64::min);
    let quiet = |r: &SyncRow| r.bare_p99 <= QUIET_BARE * lowest;
    let first = |r: &&SyncRow| Some(&r.producers) == concurrency.first();
    let (all, calm) = (
        rows.iter().filter(first).count(),
        rows.iter().filter(first).filter(|r| quiet(r)).count(),
    );
    let mut out = format!(
        "summary over {all} rounds: medians of all rounds; the ratio (a round's p99 / that \
         round's bare 1-message p99) over the {calm} quiet ones (bare p99 <= {QUIET_BARE} x the \
         lowest, {lowest:.0} us)\n"
    );
    out.push_str("producers   msgs/s   p50 us   p99 us  p99 / bare p99 (median, min-max)  quiet rounds with ratio <= 2  flush p99 us  flushing %  bare(batch) p99 / (2 x bare p99) (median, min-max)  quiet rounds the disk alone is over\n");
    for &c in concurrency {
        let of: Vec<SyncRow> = rows.iter().filter(|r| r.producers == c).copied().collect();
        let ratios: Vec<f64> = of
            .iter()
            .filter(|r| quiet(r))
            .map(|r| r.p99 / r.bare_p99.max(1.0))
            .collect();
        let floors: Vec<f64> = of
            .iter()
            .filter(|r| quiet(r))
            .map(|r| r.batch_p99 / (2.0 * r.bare_p99.max(1.0)))
            .collect();
        let range = |v: &[f64]| {
            v.iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)))
        };
        let (lo, hi) = range(&ratios);
        let (flo, fhi) = range(&floors);
        out.push_str(&format!(
            "{c:>9} {:>8.0} {:>8.0} {:>8.0} {:>14.2} ({lo:.2}-{hi:.2}) {:>29} {:>13.0} {:>11.0} \
             {:>36.2} ({flo:.2}-{fhi:.2}) {:>35}\n",
            median(of.iter().map(|r| r.rate).collect()),
            median(of.iter().map(|r| r.p50).collect()),
            median(of.iter().map(|r| r.p99).collect()),
            median(ratios.clone()),
            format!(
                "{} of {}",
                ratios.iter().filter(|&&x| x <= 2.0).count(),
                ratios.len()
            ),
            median(of.iter().map(|r| r.flush_p99).collect()),
            100.0 * median(of.iter().map(|r| r.flush_busy).collect()),
            median(floors.clone()),
            format!(
                "{} of {}",
                floors.iter().filter(|&&x| x >= 1.0).count(),
                floors.len()
            ),
        ));
    }
    out
}

/// One round: the bare baselines, then a row per concurrency.
async fn sync_flush_round(
    args: &StoreBenchArgs,
    root: &std::path::Path,
) -> anyhow::Result<(String, Vec<SyncRow>)> {
    let mut rows = Vec::new();
    // 2000 samples: the p99 of 500 was the 5th-worst write, and varied 160-520 µs between runs.
    let (bare_p50, bare_p99) = bare_fdatasync(root, args.size, 2000)?;
    let mut table = format!(
        "bare write+fdatasync of {} B on this disk: p50 {bare_p50:.0} us  p99 {bare_p99:.0} us\n",
        args.size
    );
    table.push_str(
        "second baseline, per row: a bare loop whose every write is that row's mean group-commit \
         batch in bytes, + fdatasync\n",
    );
    table.push_str("producers   msgs/s   p50 us   p99 us  flushes/s  mean batch  msgs/s / (flushes/s x batch)  p99 / bare p99   batch B  bare(batch) p50  bare(batch) p99  p99 / bare(batch) p99\n");
    let body = Bytes::from(vec![0x42u8; args.size]);
    let host: SocketAddr = "127.0.0.1:10911".parse()?;
    let mut details = String::from(
        "per row: CPU of this process (cores), and the store actors' mailbox metrics during the run \
         (messages, mean mailbox wait, mean handle time)\n",
    );
    for (run, &c) in args.concurrency.iter().enumerate() {
        let dir = root.join(format!("sync-{run}"));
        let m = sync_row(args, &dir, c, &body, host).await?;
        details.push_str(&m.details);
        let (batch_p50, batch_p99) = bare_fdatasync(root, m.batch_bytes, 1000)?;
        let row = SyncRow {
            producers: c,
            rate: m.rate(),
            p50: m.hist.value_at_quantile(0.5) as f64,
            p99: m.hist.value_at_quantile(0.99) as f64,
            bare_p99,
            flush_p99: m.flushed.quantile(0.99) * 1e6,
            flush_busy: m.flushed.sum / m.secs,
            batch_p99,
        };
        table.push_str(&m.line(&row, batch_p50));
        rows.push(row);
    }
    table.push_str(&details);
    Ok((table, rows))
}

/// What one SYNC_FLUSH row measured over its `--seconds`, before its bare loop of the batch.
struct SyncMeasure {
    producers: usize,
    total: u64,
    timeouts: u64,
    secs: f64,
    hist: Histogram<u64>,
    flushes: u64,
    messages: u64,
    /// What one group commit wrote on average: the honest baseline for its fdatasync is a bare
    /// write of that many bytes, not of one message.
    batch_bytes: usize,
    flushed: FlushSnap,
    /// The row's CPU, mailbox and flush figures (see [`actor_deltas`], [`thread_deltas`]).
    details: String,
}

impl SyncMeasure {
    fn rate(&self) -> f64 {
        self.total as f64 / self.secs
    }

    /// The row's line of the SYNC_FLUSH table.
    fn line(&self, row: &SyncRow, batch_p50: f64) -> String {
        let (c, rate, p99) = (self.producers, row.rate, row.p99);
        let fps = self.flushes as f64 / self.secs;
        let batch = self.messages as f64 / self.flushes.max(1) as f64;
        let (bare_p99, batch_p99, batch_bytes) = (row.bare_p99, row.batch_p99, self.batch_bytes);
        format!(
            "{c:>9} {rate:>8.0} {:>8} {p99:>8.0} {fps:>10.0} {batch:>11.1} {:>30.2} {:>15.2} \
             {batch_bytes:>9} {batch_p50:>16.0} {batch_p99:>16.0} {:>22.2}{}\n",
            self.hist.value_at_quantile(0.5),
            rate / (fps * batch).max(1e-9),
            p99 / bare_p99.max(1.0),
            p99 / batch_p99.max(1.0),
            if self.timeouts > 0 {
                format!("  ({} FLUSH_DISK_TIMEOUT)", self.timeouts)
            } else {
                String::new()
            }
        )
    }
}

/// The store's counters a SYNC_FLUSH row reads when its measured seconds start.
struct SyncSnap {
    flushes: u64,
    messages: u64,
    bytes: u64,
    flush: FlushSnap,
    actors: Vec<crate::metered::ProbeSnapshot>,
    cpu: Duration,
    threads: Vec<(String, Duration)>,
}

impl SyncSnap {
    fn take(store: &Store) -> SyncSnap {
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        SyncSnap {
            flushes: store.state().group_flushes.load(relaxed),
            messages: store.state().group_messages.load(relaxed),
            bytes: store.max_offset().0,
            flush: FlushSnap::of(store.state().flush_time.histogram()),
            actors: crate::metered::snapshot(),
            cpu: crate::tools::bench_wire::process_cpu(),
            threads: crate::tools::bench_wire::thread_cpu(),
        }
    }
}

/// The producers' shared clock: they record only while `measuring` and stop at `deadline`
/// (time since `epoch`), both set once the warm-up is over.
#[derive(Clone)]
struct SyncGate {
    epoch: Instant,
    measuring: Rc<std::cell::Cell<bool>>,
    deadline: Rc<std::cell::Cell<Duration>>,
}

/// One SYNC_FLUSH row: a fresh store in `dir`, `c` producers of one message at a time, the
/// warm-up, `--seconds` measured; the store is shut down and `dir` removed.
async fn sync_row(
    args: &StoreBenchArgs,
    dir: &std::path::Path,
    c: usize,
    body: &Bytes,
    host: SocketAddr,
) -> anyhow::Result<SyncMeasure> {
    let mut params = rocketmq_defaults(dir);
    params.commit_log_file_size = args.file_size.min(SYNC_FILE_CAP);
    params.sync_flush = true;
    params.warm_mapped_files = args.warm;
    params.transient_store_pool_size = pool_size(args);
    let file_size = params.commit_log_file_size;
    let store = Rc::new(Store::open(params, Arc::new(SystemClock)).await?);
    let gate = SyncGate {
        epoch: Instant::now(),
        measuring: Rc::new(std::cell::Cell::new(!args.sync_warmup)),
        deadline: Rc::new(std::cell::Cell::new(if args.sync_warmup {
            Duration::from_secs_f64(args.seconds * 11.0)
        } else {
            Duration::from_secs_f64(args.seconds)
        })),
    };
    let coalescer = args.coalesce.then(|| PutCoalescer::new(store.clone()));
    // One histogram for all producers (they share this thread): one per producer is ~140 KiB
    // each, and 256 of them made every record a cache miss — producer work that, in lock
    // step, adds to every message's latency.
    let shared_hist = Rc::new(std::cell::RefCell::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    let queues = args.queues.max(1) as u64;
    let tasks: Vec<_> = (0..c)
        .map(|p| {
            let put = SyncPut {
                store: store.clone(),
                coalescer: coalescer.clone(),
                body: body.clone(),
                host,
                queues,
            };
            actix_rt::spawn(sync_producer(p, put, gate.clone(), shared_hist.clone()))
        })
        .collect();
    if args.sync_warmup {
        // Until the writer is in the second file (or the warm-up's own bound).
        let bound = Duration::from_secs_f64(args.seconds * 10.0);
        while store.max_offset().0 <= file_size && gate.epoch.elapsed() < bound {
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let before = SyncSnap::take(&store);
    let started = Instant::now();
    gate.measuring.set(true);
    gate.deadline
        .set(gate.epoch.elapsed() + Duration::from_secs_f64(args.seconds));
    let (mut total, mut errors, mut timeouts) = (0, 0, 0);
    for t in tasks {
        let (n, e, to) = t.await?;
        total += n;
        errors += e;
        timeouts += to;
    }
    let secs = started.elapsed().as_secs_f64();
    let hist = shared_hist.borrow().clone();
    let (details, flushed) = sync_details(&store, &before, c, secs, total);
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    let flushes = store.state().group_flushes.load(relaxed) - before.flushes;
    let messages = store.state().group_messages.load(relaxed) - before.messages;
    anyhow::ensure!(errors == 0, "{errors} appends failed at {c} producers");
    let batch_bytes = ((store.max_offset().0 - before.bytes) / flushes.max(1)).max(1) as usize;
    store.shutdown().await?;
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
    Ok(SyncMeasure {
        producers: c,
        total,
        timeouts,
        secs,
        hist,
        flushes,
        messages,
        batch_bytes,
        flushed,
        details,
    })
}

/// A row's detail lines (CPU and mailboxes, flushes, threads) since `before`, and its flushes.
fn sync_details(
    store: &Store,
    before: &SyncSnap,
    c: usize,
    secs: f64,
    total: u64,
) -> (String, FlushSnap) {
    let flushed = FlushSnap::of(store.state().flush_time.histogram()).since(&before.flush);
    let cpu_secs = (crate::tools::bench_wire::process_cpu() - before.cpu).as_secs_f64();
    let mut details = actor_deltas(
        c,
        cpu_secs / secs,
        cpu_secs * 1e6 / total.max(1) as f64,
        &before.actors,
        &crate::metered::snapshot(),
    );
    details.push_str(&flushed.describe(secs));
    details.push_str(&thread_deltas(
        secs,
        &before.threads,
        &crate::tools::bench_wire::thread_cpu(),
    ));
    (details, flushed)
}

/// What a SYNC_FLUSH producer appends through: the coalescer when `--coalesce`, else the store.
struct SyncPut {
    store: Rc<Store>,
    coalescer: Option<Rc<PutCoalescer>>,
    body: Bytes,
    host: SocketAddr,
    queues: u64,
}

/// Producer `p` of a SYNC_FLUSH row: one message at a time until the gate's deadline, latencies
/// into `hist` while measuring; (messages, failed appends, FLUSH_DISK_TIMEOUTs) measured.
async fn sync_producer(
    p: usize,
    put: SyncPut,
    gate: SyncGate,
    hist: Rc<std::cell::RefCell<Histogram<u64>>>,
) -> (u64, u64, u64) {
    let (mut n, mut errors, mut timeouts) = (0u64, 0u64, 0u64);
    let mut seq = 0u64;
    while gate.epoch.elapsed() < gate.deadline.get() {
        let id = ((p as u64) << 32) | seq;
        seq += 1;
        let t = Instant::now();
        let m = message(
            "BenchSync",
            (id % put.queues) as i32,
            &put.body,
            id,
            put.host,
        );
        let result = match &put.coalescer {
            Some(c) => c.put(m).await,
            None => put.store.put(m).await,
        };
        if !gate.measuring.get() {
            continue;
        }
        match result {
            Ok(ok) if ok.status == actormq_core::store::status::PutStatus::PutOk => {}
            Ok(_) => timeouts += 1,
            Err(_) => errors += 1,
        }
        let _ = hist
            .borrow_mut()
            .record(t.elapsed().as_micros().max(1) as u64);
        n += 1;
    }
    (n, errors, timeouts)
}

/// One row's CPU by thread (cores, busiest first): which thread a lock-step round waits on.
fn thread_deltas(secs: f64, before: &[(String, Duration)], after: &[(String, Duration)]) -> String {
    let mut use_: Vec<(&str, f64)> = after
        .iter()
        .map(|(name, a)| {
            let b = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(Duration::ZERO, |(_, d)| *d);
            (
                name.as_str(),
                a.saturating_sub(b).as_secs_f64() / secs.max(1e-9),
            )
        })
        .filter(|(_, c)| *c >= 0.005)
        .collect();
    use_.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut line = String::from("           threads (cores):");
    for (name, c) in use_ {
        line.push_str(&format!(" {name} {c:.2}"));
    }
    line.push('\n');
    line
}

/// One row's line of actor figures: the process's CPU (cores, and µs per message appended), then
/// what changed between two snapshots of the mailbox metrics.
fn actor_deltas(
    producers: usize,
    cpu_cores: f64,
    cpu_us_per_msg: f64,
    before: &[crate::metered::ProbeSnapshot],
    after: &[crate::metered::ProbeSnapshot],
) -> String {
    let mut line = format!("{producers:>9}: cpu {cpu_cores:.2} ({cpu_us_per_msg:.1} µs/msg)");
    for a in after {
        let b = before.iter().find(|b| b.name == a.name);
        let n = a.messages - b.map_or(0, |b| b.messages);
        if n == 0 {
            continue;
        }
        let waits = a.wait_count - b.map_or(0, |b| b.wait_count);
        let wait = a.wait_sum_seconds - b.map_or(0.0, |b| b.wait_sum_seconds);
        let handle = a.handle_sum_seconds - b.map_or(0.0, |b| b.handle_sum_seconds);
        line.push_str(&format!(
            " | {} {n} wait {:.0} us handle {:.0} us",
            a.name,
            1e6 * wait / waits.max(1) as f64,
            1e6 * handle / n as f64
        ));
    }
    line.push('\n');
    line
}

pub fn print_store_report(args: &StoreBenchArgs, r: &StoreBenchReport) {
    if let Some(t) = &r.sync_table {
        println!(
            "bench store --flush sync: size={} queues={} seconds per run={} \
             transientStorePoolEnable={} file size={} measured {}",
            args.size,
            args.queues,
            args.seconds,
            args.transient_store_pool,
            args.file_size.min(SYNC_FILE_CAP),
            if args.sync_warmup {
                "once the store is in its second CommitLog file (--sync-warmup true)"
            } else {
                "from the first append of a fresh store (--sync-warmup false)"
            }
        );
        print!("{t}");
        return;
    }
    println!(
        "bench store: size={} messages={} producers={} batch={} queues={} transientStorePoolEnable={}",
        args.size, r.read_back, args.producers, args.batch, args.queues, args.transient_store_pool
    );
    println!(
        "append : {:>12.0} msgs/s {:>9.1} MB/s   latency per append p50 {:.0} us  p99 {:.0} us  p999 {:.0} us",
        r.append_msgs_per_s, r.append_mb_per_s, r.p50_us, r.p99_us, r.p999_us
    );
    println!(
        "read   : {:>12.0} msgs/s (ConsumeQueue + CommitLog, all {} messages)",
        r.read_msgs_per_s, r.read_back
    );
    println!(
        "cpu    : {:.2} µs/msg appended (until dispatched), {:.2} µs/msg read back (utime+stime \
         of this process: producers and store)",
        r.append_cpu_us, r.read_cpu_us
    );
    if let (Some(a), Some(b)) = (r.rss_start, r.rss_end) {
        println!(
            "rss    : {} before the store opened, {} before it shut down",
            crate::tools::bench_cpu::mb(a),
            crate::tools::bench_cpu::mb(b)
        );
    }
    println!("actors (mailbox metrics of this process):");
    for a in crate::metered::snapshot() {
        if a.messages == 0 {
            continue;
        }
        println!(
            "  {:<24} handled {:>9}  busy {:>7.3} s  mean wait {:>9.1} us  mean handle {:>8.1} us",
            a.name,
            a.messages,
            a.handle_sum_seconds,
            1e6 * a.wait_sum_seconds / a.wait_count.max(1) as f64,
            1e6 * a.handle_sum_seconds / a.messages as f64
        );
    }
    println!(
        "ceiling: {:>12.0} msgs/s bare memcpy of {} B into a warm mapping (append = {:.1}% of it)",
        r.memcpy_msgs_per_s,
        args.size,
        100.0 * r.append_msgs_per_s / r.memcpy_msgs_per_s
    );
    if let Some(t) = r.recovery {
        println!(
            "abnormal recovery (abort file, no checkpoint) of a {:.2} GiB CommitLog: {} records CRC-checked and re-dispatched in {} ms (scan {} ms, dispatch {} ms)",
            t.bytes as f64 / (1u64 << 30) as f64,
            t.records,
            t.ms,
            t.scan_ms,
            t.dispatch_ms
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: StoreBenchArgs,
    }

    /// The summary over rounds: medians of every figure, and the p99 ratio over quiet rounds only.
    #[test]
    fn the_summary_takes_medians_and_counts_rounds_within_the_target() {
        let row = |producers, rate, p99, bare_p99| SyncRow {
            producers,
            rate,
            p50: p99 / 2.0,
            p99,
            bare_p99,
            flush_p99: bare_p99 / 2.0,
            flush_busy: rate / 1000.0,
            // The disk's floor grows with the batch: 16 producers' bytes take the bare p99, 64
            // producers' bytes take 2.5 times it.
            batch_p99: bare_p99 * if producers == 16 { 1.0 } else { 2.5 },
        };
        // Round 3's baseline is disturbed (bare p99 400 > 1.5 x 200): it counts in the medians
        // of the figures, not in the ratios.
        let rows = [
            row(16, 100.0, 300.0, 200.0),
            row(64, 10.0, 900.0, 200.0),
            row(16, 300.0, 500.0, 250.0),
            row(64, 30.0, 300.0, 250.0),
            row(16, 200.0, 400.0, 400.0),
            row(64, 20.0, 390.0, 400.0),
        ];
        let out = sync_summary(&[16, 64], &rows);
        let lines: Vec<Vec<&str>> = out
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().collect())
            .collect();
        // 16: quiet ratios 1.5 and 2.0 -> median 1.75, both within 2.
        assert_eq!(lines[0][..5], ["16", "200", "200", "400", "1.75"], "{out}");
        assert_eq!(
            lines[0][5..11],
            ["(1.50-2.00)", "2", "of", "2", "125", "20"],
            "{out}"
        );
        // 16: the disk alone takes half the bound; 64: 1.25 times it, in both quiet rounds.
        assert_eq!(
            lines[0][11..],
            ["0.50", "(0.50-0.50)", "0", "of", "2"],
            "{out}"
        );
        assert_eq!(
            lines[1][11..],
            ["1.25", "(1.25-1.25)", "2", "of", "2"],
            "{out}"
        );
        // 64: quiet ratios 4.5 and 1.2 -> median 2.85, one within 2.
        assert_eq!(lines[1][..5], ["64", "20", "195", "390", "2.85"], "{out}");
        assert_eq!(
            lines[1][5..11],
            ["(1.20-4.50)", "1", "of", "2", "125", "2"],
            "{out}"
        );
        assert!(out.starts_with("summary over 3 rounds"), "{out}");
        assert!(out.contains("over the 2 quiet ones"), "{out}");
    }

    /// The SYNC_FLUSH bench warms up into the second CommitLog file, then measures a row per
    /// concurrency whose throughput identity holds (every acknowledged append was in a group).
    #[actix_rt::test]
    async fn the_sync_bench_measures_after_the_first_file_and_prints_a_row_per_concurrency() {
        let dir = tempfile::tempdir().unwrap();
        let cli = Cli::parse_from([
            "bench",
            "--flush",
            "sync",
            "--concurrency",
            "1,4",
            "--seconds",
            "0.3",
            "--rounds",
            "2",
            "--file-size",
            "262144",
            "--dir",
            dir.path().to_str().unwrap(),
        ]);
        let report = run_store_bench(&cli.args).await.unwrap();
        let table = report.sync_table.unwrap();
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|w| {
                w.len() >= 7 && w[0].parse::<usize>().is_ok() && w[1].parse::<f64>().is_ok()
            })
            .collect();
        // Two rounds of two rows each, then the summary's two rows (which say "k of n").
        let (summary, rounds): (Vec<_>, Vec<_>) = rows.into_iter().partition(|w| w.contains(&"of"));
        assert_eq!(rounds.len(), 4, "{table}");
        assert_eq!(summary.len(), 2, "{table}");
        assert!(table.contains("round 2 of 2"), "{table}");
        assert!(table.contains("summary over 2 rounds"), "{table}");
        for (row, c) in summary.iter().zip(["1", "4"]) {
            assert_eq!(row[0], c, "{table}");
            let median_rate: f64 = row[1].parse().unwrap();
            assert!(median_rate > 0.0, "{table}");
        }
        for (row, c) in rounds.iter().zip(["1", "4", "1", "4"]) {
            assert_eq!(row[0], c);
            let rate: f64 = row[1].parse().unwrap();
            assert!(rate > 0.0, "{table}");
            let identity: f64 = row[6].parse().unwrap();
            assert!(
                (0.8..=1.3).contains(&identity),
                "msgs/s vs flushes x batch: {table}"
            );
        }
        // Every row timed its flushes: as many as it made, each of them (it wrote data).
        let flush_lines: Vec<&str> = table
            .lines()
            .filter(|l| {
                l.trim_start()
                    .starts_with("flushes (actormq_commitlog_flush_seconds")
            })
            .collect();
        assert_eq!(flush_lines.len(), 4, "{table}");
        for (l, row) in flush_lines.iter().zip(&rounds) {
            let timed: u64 = l.split_whitespace().nth(4).unwrap().parse().unwrap();
            let per_s: f64 = row[4].parse().unwrap();
            assert!(timed > 0, "{table}");
            // The row's flushes/s is of group commits over the same 0.3 s; a tick's flush of a
            // group's straggler may add one or two.
            assert!(
                (timed as f64) >= 0.5 * per_s * 0.3,
                "{timed} timed flushes against {per_s}/s: {table}"
            );
        }
    }

    /// A quantile read from the flush histogram's buckets: interpolated inside the bucket that
    /// holds the rank, the last bound past the end, 0 without flushes; and a difference of two
    /// reads is the flushes between them.
    #[test]
    fn flush_quantiles_come_from_the_buckets_between_two_reads() {
        let h = crate::store::state::FlushTimes::default();
        let before = FlushSnap::of(h.histogram());
        assert_eq!(before.since(&before).quantile(0.99), 0.0);
        // 90 flushes of 60 µs (the 50–70.7 µs bucket) and 10 of 10 s (past the last bound).
        for _ in 0..90 {
            h.observe(Duration::from_micros(60));
        }
        for _ in 0..10 {
            h.observe(Duration::from_secs(10));
        }
        let d = FlushSnap::of(h.histogram()).since(&before);
        assert_eq!(d.count, 100);
        let p50 = d.quantile(0.5);
        // Rank 50 of the bucket's 90: 50 µs + 50/90 of its width.
        let expect = 50e-6 + 50.0 / 90.0 * (50e-6 * std::f64::consts::SQRT_2 - 50e-6);
        assert!((p50 - expect).abs() < 1e-9, "{p50} vs {expect}");
        let last = d.buckets.last().unwrap().0;
        assert_eq!(d.quantile(0.99), last, "past the last bound: that bound");
        assert!((d.sum - (90.0 * 60e-6 + 100.0)).abs() < 1e-6);
        let again = FlushSnap::of(h.histogram());
        assert_eq!(again.since(&FlushSnap::of(h.histogram())).count, 0);
        assert!(
            d.describe(2.0).contains("100 (50/s)"),
            "{}",
            d.describe(2.0)
        );
    }
}
