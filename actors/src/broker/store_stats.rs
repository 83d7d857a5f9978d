//! `StoreStats` — the broker-wide figures of RocketMQ 4.9.4's StoreStatsService
//! (store/src/main/java/org/apache/rocketmq/store/StoreStatsService.java) that
//! GET_BROKER_RUNTIME_INFO reports: `putTps`, `getFoundTps`, `getMissTps`, `getTotalTps`,
//! `getTransferedTps`, `runtime`, `putMessageTimesTotal`, `putMessageSizeTotal`,
//! `putMessageFailedTimes`, `putMessageAverageSize`, `getMessageEntireTimeMax`,
//! `dispatchMaxBuffer`.
//!
//! RocketMQ samples its cumulative counters once a second and keeps 601 samples; a TPS over `n`
//! seconds is the difference between the newest sample and the one `n` before it, and is left
//! blank (`""`) until that many samples exist. Here each counter is counted per second in a
//! lock-free ring of 601 one-second slots, and a TPS over `n` seconds is the sum of the `n`
//! seconds completed before now, divided by `n`: the same figure (a burst shows within a second
//! of its end, as RocketMQ's), without a sampling thread. Shared by every connection thread
//! (atomics only; recording is one `fetch_update` per counter and SEND batch or PULL).
//!
//! [`Stats`] holds them with the request path's plain counters (messages and bytes put and got),
//! one `Arc` for every connection thread; its only writers are the request handlers, its readers
//! GET_BROKER_RUNTIME_INFO and `/metrics`. No messages in or out.
//!
//! Values are printed as Java's `Double.toString` prints them ([`java_double`]): mqadmin and
//! the Dashboard parse them, and `brokerStatus` shows them as they are.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One-second slots kept: RocketMQ's MAX_RECORDS_OF_SAMPLING + 1 (enough for the 10-minute TPS).
const SECONDS: usize = 601;
/// A slot packs the second it counts (low 24 bits of the second number) above its count.
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const TAG_MASK: u64 = (1 << 24) - 1;

/// Counts of the last [`SECONDS`] seconds. The first add of a new second replaces the slot's
/// stale count in the same atomic update, so no add is lost at a second's boundary. A stale slot
/// could only be taken for a current one 601 × 2²⁴ seconds (over 300 years) later.
struct SecondRing([AtomicU64; SECONDS]);

impl Default for SecondRing {
    fn default() -> Self {
        SecondRing(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Adds `n` to the count `slot` holds for period `period`, replacing a stale period's count.
fn tagged_add(slot: &AtomicU64, period: u64, n: u64) {
    let tag = period & TAG_MASK;
    let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        let count = if v >> COUNT_BITS == tag {
            v & COUNT_MASK
        } else {
            0
        };
        Some(tag << COUNT_BITS | count.saturating_add(n).min(COUNT_MASK))
    });
}

/// The count `slot` holds for period `period` (0 if it holds another period's).
fn tagged_count(slot: &AtomicU64, period: u64) -> u64 {
    let v = slot.load(Ordering::Relaxed);
    if v >> COUNT_BITS == period & TAG_MASK {
        v & COUNT_MASK
    } else {
        0
    }
}

impl SecondRing {
    fn add(&self, sec: u64, n: u64) {
        tagged_add(&self.0[(sec % SECONDS as u64) as usize], sec, n);
    }

    fn count(&self, sec: u64) -> u64 {
        tagged_count(&self.0[(sec % SECONDS as u64) as usize], sec)
    }

    /// Per second over the `window` seconds completed before second `now`; `None` while the
    /// broker has not run for `window + 1` seconds (RocketMQ has fewer than `window + 1` samples
    /// then, and prints nothing).
    fn tps(&self, now: u64, window: u64) -> Option<f64> {
        if now < window + 1 {
            return None;
        }
        let sum: u64 = (now - window..now).map(|s| self.count(s)).sum();
        Some(sum as f64 / window as f64)
    }
}

/// 4.9.4's `PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`, the buckets of `putMessageDistributeTime`; a put
/// of `ms` milliseconds falls in the first bucket whose bound it is below (`<= 0` for the first).
const DISTRIBUTE_BUCKETS: [(u64, &str); 13] = [
    (1, "[<=0ms]"),
    (10, "[0~10ms]"),
    (50, "[10~50ms]"),
    (100, "[50~100ms]"),
    (200, "[100~200ms]"),
    (500, "[200~500ms]"),
    (1000, "[500ms~1s]"),
    (2000, "[1~2s]"),
    (3000, "[2~3s]"),
    (4000, "[3~4s]"),
    (5000, "[4~5s]"),
    (10000, "[5~10s]"),
    (u64::MAX, "[10s~]"),
];

/// Put times by bucket for the current and the previous minute since boot (tagged by the
/// minute, as [`SecondRing`]'s slots by the second). 4.9.4's StoreStatsService reports the last
/// completed minute's buckets (`lastPutMessageDistributeTime`, swapped once a minute by
/// `printTps`), and `null` before the first minute ends.
struct MinuteBuckets([[AtomicU64; 13]; 2]);

impl Default for MinuteBuckets {
    fn default() -> Self {
        MinuteBuckets(std::array::from_fn(|_| {
            std::array::from_fn(|_| AtomicU64::new(0))
        }))
    }
}

/// The [`DISTRIBUTE_BUCKETS`] index of a put of `ms` milliseconds.
fn bucket_of(ms: u64) -> usize {
    DISTRIBUTE_BUCKETS
        .iter()
        .position(|(bound, _)| ms < *bound)
        .unwrap_or(DISTRIBUTE_BUCKETS.len() - 1)
}

impl MinuteBuckets {
    fn add(&self, minute: u64, ms: u64) {
        tagged_add(&self.0[(minute % 2) as usize][bucket_of(ms)], minute, 1);
    }

    /// `counts[b]` more puts in bucket `b`, skipping the empty ones.
    fn add_counts(&self, minute: u64, counts: &[u64; DISTRIBUTE_BUCKETS.len()]) {
        for (slot, &n) in self.0[(minute % 2) as usize].iter().zip(counts) {
            if n > 0 {
                tagged_add(slot, minute, n);
            }
        }
    }

    /// The runtime value at `minute`: the previous minute's buckets, `"null"` in the first.
    fn report(&self, minute: u64) -> String {
        let Some(last) = minute.checked_sub(1) else {
            return "null".into();
        };
        let mut s = String::with_capacity(200);
        for (slot, (_, name)) in self.0[(last % 2) as usize].iter().zip(DISTRIBUTE_BUCKETS) {
            let _ = write!(s, "{name}:{} ", tagged_count(slot, last));
        }
        s
    }
}

/// See the module docs.
pub struct StoreStats {
    boot: Instant,
    boot_ms: i64,
    puts: SecondRing,
    found: SecondRing,
    miss: SecondRing,
    transferred: SecondRing,
    put_times: AtomicU64,
    put_size: AtomicU64,
    put_failed: AtomicU64,
    get_max_ms: AtomicU64,
    put_times_by_minute: MinuteBuckets,
}

impl Default for StoreStats {
    fn default() -> Self {
        let boot_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        StoreStats::new(Instant::now(), boot_ms)
    }
}

/// RocketMQ's 10 s, 1 min and 10 min windows.
const WINDOWS: [u64; 3] = [10, 60, 600];

impl StoreStats {
    pub fn new(boot: Instant, boot_ms: i64) -> StoreStats {
        StoreStats {
            boot,
            boot_ms,
            puts: SecondRing::default(),
            found: SecondRing::default(),
            miss: SecondRing::default(),
            transferred: SecondRing::default(),
            put_times: AtomicU64::new(0),
            put_size: AtomicU64::new(0),
            put_failed: AtomicU64::new(0),
            get_max_ms: AtomicU64::new(0),
            put_times_by_minute: MinuteBuckets::default(),
        }
    }

    /// When the store started (the runtime key `bootTimestamp`), in ms since the epoch.
    pub fn boot_ms(&self) -> i64 {
        self.boot_ms
    }

    fn sec(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.boot).as_secs()
    }

    /// `msgs` messages stored in CommitLog records of `bytes` bytes in all.
    pub fn record_put(&self, msgs: u64, bytes: u64) {
        self.record_put_at(Instant::now(), msgs, bytes);
    }

    pub fn record_put_at(&self, now: Instant, msgs: u64, bytes: u64) {
        if msgs == 0 {
            return;
        }
        self.puts.add(self.sec(now), msgs);
        self.put_times.fetch_add(msgs, Ordering::Relaxed);
        self.put_size.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Puts stored elsewhere and counted here only in the totals (`putMessageTimesTotal`,
    /// `putMessageSizeTotal`): the delayed deliveries, which 4.9.4 counts as every CommitLog put.
    pub fn fill_with_deliveries(&self, msgs: u64, bytes: u64, t: &mut BTreeMap<String, String>) {
        self.fill_at(Instant::now(), (msgs, bytes), t);
    }

    /// How long one put took (a SEND's time to its answer), for `putMessageDistributeTime`.
    pub fn record_put_time(&self, took: Duration) {
        self.record_put_time_at(Instant::now(), took);
    }

    pub fn record_put_time_at(&self, now: Instant, took: Duration) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.put_times_by_minute.add(self.sec(now) / 60, ms);
    }

    /// Several puts that ended at `now` (a batch's), counted per bucket: one atomic add per
    /// bucket they fall in, not one per put.
    pub fn record_put_times_at(&self, now: Instant, took: impl Iterator<Item = Duration>) {
        let mut counts = [0u64; DISTRIBUTE_BUCKETS.len()];
        for d in took {
            let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
            if let Some(c) = counts.get_mut(bucket_of(ms)) {
                *c += 1;
            }
        }
        self.put_times_by_minute
            .add_counts(self.sec(now) / 60, &counts);
    }

    /// `n` messages the store refused.
    pub fn record_put_failed(&self, n: u64) {
        self.put_failed.fetch_add(n, Ordering::Relaxed);
    }

    /// One read of a queue (a PULL): `found` as RocketMQ's GetMessageStatus.FOUND, carrying
    /// `msgs` messages, having taken `took`.
    pub fn record_get(&self, found: bool, msgs: u64, took: Duration) {
        self.record_get_at(Instant::now(), found, msgs, took);
    }

    pub fn record_get_at(&self, now: Instant, found: bool, msgs: u64, took: Duration) {
        let sec = self.sec(now);
        if found {
            self.found.add(sec, 1);
            self.transferred.add(sec, msgs);
        } else {
            self.miss.add(sec, 1);
        }
        self.get_max_ms
            .fetch_max(took.as_millis() as u64, Ordering::Relaxed);
    }

    /// Put TPS over the last 10 s, as a number (ActorMQ's own tools).
    pub fn put_tps_10s(&self) -> f64 {
        self.puts.tps(self.sec(Instant::now()), 10).unwrap_or(0.0)
    }

    /// Adds the runtime keys this module owns to `t`.
    pub fn fill(&self, t: &mut BTreeMap<String, String>) {
        self.fill_at(Instant::now(), (0, 0), t);
    }

    /// `delivered`: (messages, bytes) stored besides those recorded here (see
    /// [`Self::fill_with_deliveries`]).
    pub fn fill_at(&self, now: Instant, delivered: (u64, u64), t: &mut BTreeMap<String, String>) {
        let sec = self.sec(now);
        let three = |r: &SecondRing| {
            WINDOWS
                .map(|w| r.tps(sec, w).map(java_double).unwrap_or_default())
                .join(" ")
        };
        let mut put = |k: &str, v: String| {
            t.insert(k.to_string(), v);
        };
        put("putTps", three(&self.puts));
        put("getFoundTps", three(&self.found));
        put("getMissTps", three(&self.miss));
        let transferred = three(&self.transferred);
        // 5.x renamed the key (its mqadmin `clusterList` and Dashboard read only
        // `getTransferredTps`); 4.x tools read `getTransferedTps`. Both, so either works.
        put("getTransferredTps", transferred.clone());
        put("getTransferedTps", transferred);
        // RocketMQ adds found and miss with 0 for a window it has no samples for yet.
        put(
            "getTotalTps",
            WINDOWS
                .map(|w| {
                    let f = self.found.tps(sec, w).unwrap_or(0.0);
                    java_double(f + self.miss.tps(sec, w).unwrap_or(0.0))
                })
                .join(" "),
        );
        let up = now.saturating_duration_since(self.boot).as_secs();
        put(
            "runtime",
            format!(
                "[ {} days, {} hours, {} minutes, {} seconds ]",
                up / 86_400,
                up % 86_400 / 3_600,
                up % 3_600 / 60,
                up % 60
            ),
        );
        // RocketMQ reports 1 while nothing was stored (it is the average's divisor there too).
        let times = (self.put_times.load(Ordering::Relaxed) + delivered.0).max(1);
        let size = self.put_size.load(Ordering::Relaxed) + delivered.1;
        put("putMessageTimesTotal", times.to_string());
        put("putMessageSizeTotal", size.to_string());
        put(
            "putMessageFailedTimes",
            self.put_failed.load(Ordering::Relaxed).to_string(),
        );
        put(
            "putMessageAverageSize",
            java_double(size as f64 / times as f64),
        );
        put(
            "getMessageEntireTimeMax",
            self.get_max_ms.load(Ordering::Relaxed).to_string(),
        );
        put(
            "putMessageDistributeTime",
            self.put_times_by_minute.report(sec / 60),
        );
        // RocketMQ 4.9.4 never sets it (StoreStatsService.setDispatchMaxBuffer has no caller).
        put("dispatchMaxBuffer", "0".to_string());
    }
}

/// A counter shared by the connection threads (relaxed: it is only reported).
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The request path's counters, shared by every connection thread: messages and bytes put and
/// got (the runtime keys `msgPutTotalTodayNow`, `msgGetTotalTodayNow`), RocketMQ's
/// StoreStatsService figures, and the seed of the queue choice for SENDs to queue -1.
#[derive(Default)]
pub struct Stats {
    pub put_msgs: Counter,
    pub put_bytes: Counter,
    pub got_msgs: Counter,
    pub got_bytes: Counter,
    /// RocketMQ's StoreStatsService figures (GET_BROKER_RUNTIME_INFO).
    pub store: StoreStats,
    seq: AtomicU64,
}

impl Stats {
    pub fn add(c: &Counter, n: u64) {
        c.0.fetch_add(n, Ordering::Relaxed);
    }
    /// A cheap pseudo-random number (queue choice when a client asks for queue -1): a Weyl
    /// sequence through a 64-bit mix, so concurrent threads need only one atomic add.
    pub fn next(&self) -> u64 {
        let mut z = self
            .seq
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) >> 1
    }
}

/// `x` as Java's `Double.toString` prints it: the shortest digits that read back as `x`, with at
/// least one digit after the point (`0.0`, `12.5`), and in computerized scientific notation
/// (`1.0E7`, `5.0E-4`) below 10⁻³ and from 10⁷ on.
pub fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = x.abs();
    if a != 0.0 && !(1e-3..1e7).contains(&a) {
        let s = format!("{x:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mant = if mant.contains('.') {
            mant.to_string()
        } else {
            format!("{mant}.0")
        };
        return format!("{mant}E{exp}");
    }
    let s = format!("{x}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

/// RocketMQ's `MixAll.humanReadableByteCount(bytes, false)`: `"512 B"`, `"1.5 KiB"`, `"77.4 GiB"`.
pub fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / 1024f64.ln()) as i32;
    let pre = ['K', 'M', 'G', 'T', 'P', 'E'][(exp - 1).clamp(0, 5) as usize];
    format!("{:.1} {pre}iB", bytes as f64 / 1024f64.powi(exp))
}

/// RocketMQ's `UtilAll.getDiskPartitionSpaceUsedPercent`: used ÷ (used + available to
/// non-root), rounded up to the hundredth; `total`, `free` (root's) and `avail` in bytes.
pub fn java_disk_ratio(total: u64, free: u64, avail: u64) -> f64 {
    if total == 0 {
        return -1.0;
    }
    let used = total.saturating_sub(free) as u128;
    let entire = used + avail as u128;
    if entire == 0 {
        return 0.0;
    }
    let up = u128::from(used * 100 % entire != 0);
    (used * 100 / entire + up) as f64 / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &StoreStats, at: Instant) -> BTreeMap<String, String> {
        let mut t = BTreeMap::new();
        s.fill_at(at, (0, 0), &mut t);
        t
    }

    /// A burst shows in `putTps`' 10 s figure as soon as its second has ended (the 10 s slots
    /// this replaces showed 0.00 until the slot ended, up to 10 s later); windows the broker has
    /// not run for yet are blank, as RocketMQ prints them.
    #[test]
    fn a_burst_shows_within_a_second_and_young_windows_are_blank() {
        let t0 = Instant::now();
        let s = StoreStats::new(t0, 0);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        s.record_put_at(at(20_100), 100_000, 100_000 * 200);
        assert_eq!(table(&s, at(20_900))["putTps"], "0.0  ");
        let t = table(&s, at(21_000));
        assert_eq!(t["putTps"], "10000.0  ");
        assert_eq!(t["putMessageTimesTotal"], "100000");
        assert_eq!(t["putMessageAverageSize"], "200.0");
        let t = table(&s, at(61_000));
        assert_eq!(t["putTps"], "0.0 1666.6666666666667 ");
        let t = table(&s, at(601_000));
        assert_eq!(t["putTps"], "0.0 0.0 166.66666666666666");
        // Past the ring's reach the burst is gone.
        assert_eq!(table(&s, at(700_000))["putTps"], "0.0 0.0 0.0");
        // Nothing stored yet: RocketMQ's divisor shows.
        let fresh = StoreStats::new(t0, 0);
        let t = table(&fresh, t0);
        assert_eq!(t["putTps"], "  ");
        assert_eq!(t["getTotalTps"], "0.0 0.0 0.0");
        assert_eq!(t["putMessageTimesTotal"], "1");
        assert_eq!(t["putMessageAverageSize"], "0.0");
        assert_eq!(t["runtime"], "[ 0 days, 0 hours, 0 minutes, 0 seconds ]");
    }

    /// A batch's put times land in the buckets one put at a time would.
    #[test]
    fn a_batch_of_put_times_counts_as_each_put() {
        let t0 = Instant::now();
        let (one, many) = (StoreStats::new(t0, 0), StoreStats::new(t0, 0));
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let took: Vec<_> = [0u64, 0, 3, 9, 10, 49, 700, 12_000, u64::MAX / 2_000_000]
            .iter()
            .map(|&ms| Duration::from_micros(ms * 1000 + 999))
            .collect();
        for d in &took {
            one.record_put_time_at(at(5_000), *d);
        }
        many.record_put_times_at(at(5_000), took.iter().copied());
        many.record_put_times_at(at(5_000), std::iter::empty());
        let key = "putMessageDistributeTime";
        assert_eq!(table(&one, at(61_000))[key], table(&many, at(61_000))[key]);
        assert!(table(&many, at(61_000))[key].starts_with("[<=0ms]:2 [0~10ms]:2 "));
    }

    /// 4.9.4's `putMessageDistributeTime` is `null` until the first minute ends, then the last
    /// completed minute's buckets alone (StoreStatsService.printTps swaps them each minute);
    /// delayed deliveries count in the put totals.
    #[test]
    fn put_times_show_the_last_minute_and_deliveries_count_as_puts() {
        let t0 = Instant::now();
        let s = StoreStats::new(t0, 0);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for ms in [0u64, 1, 9, 10, 700, 12_000] {
            s.record_put_time_at(at(5_000), Duration::from_micros(ms * 1000 + 999));
        }
        assert_eq!(table(&s, at(59_999))["putMessageDistributeTime"], "null");
        s.record_put_time_at(at(61_000), Duration::from_millis(3));
        let t = table(&s, at(61_000));
        assert_eq!(
            t["putMessageDistributeTime"],
            "[<=0ms]:1 [0~10ms]:2 [10~50ms]:1 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 \
             [500ms~1s]:1 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 "
        );
        // Not cumulative: the next minute shows only its own put.
        assert!(table(&s, at(120_000))["putMessageDistributeTime"]
            .starts_with("[<=0ms]:0 [0~10ms]:1 [10~50ms]:0 "));
        assert!(
            table(&s, at(180_000))["putMessageDistributeTime"].starts_with("[<=0ms]:0 [0~10ms]:0 ")
        );
        s.record_put_at(at(1_000), 2, 400);
        let mut t = BTreeMap::new();
        s.fill_at(at(2_000), (3, 600), &mut t);
        assert_eq!(t["putMessageTimesTotal"], "5");
        assert_eq!(t["putMessageSizeTotal"], "1000");
    }

    #[test]
    fn gets_count_found_miss_and_transferred_messages() {
        let t0 = Instant::now();
        let s = StoreStats::new(t0, 0);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for _ in 0..3 {
            s.record_get_at(at(15_000), true, 32, Duration::from_millis(2));
        }
        s.record_get_at(at(15_500), false, 0, Duration::from_millis(7));
        let t = table(&s, at(16_000));
        assert_eq!(t["getFoundTps"], "0.3  ");
        assert_eq!(t["getMissTps"], "0.1  ");
        assert_eq!(t["getTotalTps"], "0.4 0.0 0.0");
        assert_eq!(t["getTransferedTps"], "9.6  ");
        assert_eq!(t["getTransferredTps"], t["getTransferedTps"]);
        assert_eq!(t["getMessageEntireTimeMax"], "7");
        assert_eq!(
            table(&s, at(3_723_000))["runtime"],
            "[ 0 days, 1 hours, 2 minutes, 3 seconds ]"
        );
    }

    #[test]
    fn numbers_print_as_java_prints_them() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(12.5), "12.5");
        assert_eq!(java_double(100000.0), "100000.0");
        assert_eq!(java_double(0.03333333333333333), "0.03333333333333333");
        assert_eq!(java_double(1.0e7), "1.0E7");
        assert_eq!(java_double(0.0005), "5.0E-4");
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(252 << 30), "252.0 GiB");
        assert_eq!(java_disk_ratio(100, 85, 80), 0.16);
        assert_eq!(java_disk_ratio(100, 50, 50), 0.5);
    }
}
