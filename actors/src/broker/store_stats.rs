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
//! Values are printed as Java's `Double.toString` prints them ([`java_double`]): mqadmin and
//! the Dashboard parse them, and `brokerStatus` shows them as they are.

use std::collections::BTreeMap;
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

impl SecondRing {
    fn add(&self, sec: u64, n: u64) {
        let tag = sec & TAG_MASK;
        let slot = &self.0[(sec % SECONDS as u64) as usize];
        let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            let count = if v >> COUNT_BITS == tag {
                v & COUNT_MASK
            } else {
                0
            };
            Some(tag << COUNT_BITS | count.saturating_add(n).min(COUNT_MASK))
        });
    }

    fn count(&self, sec: u64) -> u64 {
        let v = self.0[(sec % SECONDS as u64) as usize].load(Ordering::Relaxed);
        if v >> COUNT_BITS == sec & TAG_MASK {
            v & COUNT_MASK
        } else {
            0
        }
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
        self.fill_at(Instant::now(), t);
    }

    pub fn fill_at(&self, now: Instant, t: &mut BTreeMap<String, String>) {
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
        let times = self.put_times.load(Ordering::Relaxed).max(1);
        let size = self.put_size.load(Ordering::Relaxed);
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
        // RocketMQ 4.9.4 never sets it (StoreStatsService.setDispatchMaxBuffer has no caller).
        put("dispatchMaxBuffer", "0".to_string());
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
        s.fill_at(at, &mut t);
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
