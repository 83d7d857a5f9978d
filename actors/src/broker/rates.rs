//! The TPS windows ([`Rates`]) and put latencies ([`PutLatency`]) behind `putLatency99`,
//! `putLatency999`, `putMessageEntireTimeMax` (GET_BROKER_RUNTIME_INFO), `topicPutTps`
//! (GET_TOPIC_STATS_INFO), `consumeTps` (GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS) and the
//! counts of VIEW_BROKER_STATS_DATA.
//!
//! Owned per connection thread, without a lock: the thread's processor records into its
//! [`ThreadRates`] (an `Rc<RefCell<RateSet>>` only that thread touches). A reader — an admin
//! request, on whichever connection thread it arrived — asks every thread for its part through
//! [`SharedRates`]: a closure sent to each thread's mailbox (an unbounded channel read by a task
//! on that thread, started by [`SharedRates::for_thread`]), run there against the thread's
//! [`RateSet`], its answer sent back on a oneshot and merged in registration order (so float sums
//! are added in the same order every time).
//!
//! Messages in: [`Ask`] closures on each thread's channel. Out: their answers, by oneshot.
//! Invariants: a `RateSet` is only ever borrowed on its own thread, and never across an await;
//! a thread that has stopped (its channel closed) is left out of the merge, as it has nothing
//! left to report.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq_core::protocol::admin::{BrokerStatsData, BrokerStatsItem};
use arc_swap::ArcSwap;
use tokio::sync::{mpsc, oneshot};

/// Ten-second slots, an hour of them is more than `putTps`'s 10-minute figure needs.
const SLOT: Duration = Duration::from_secs(10);
const SLOTS: usize = 60;

/// `N` slots of `len` each, counting (messages, calls) in `C` (`u32` for the 10-second slots,
/// which keeps the per-key cost near 1 KiB per connection thread); the slot being filled is
/// `cur`.
struct Ring<const N: usize, C = u64> {
    slots: [(C, C); N],
    cur: usize,
    cur_start: Instant,
    len: Duration,
}

impl<const N: usize, C> Ring<N, C>
where
    C: Copy + Default + Into<u64> + TryFrom<u64>,
{
    fn new(now: Instant, len: Duration) -> Self {
        Ring {
            slots: [(C::default(), C::default()); N],
            cur: 0,
            cur_start: now,
            len,
        }
    }

    fn roll(&mut self, now: Instant) {
        let mut steps = 0;
        while now.duration_since(self.cur_start) >= self.len && steps <= N {
            self.cur = (self.cur + 1) % N;
            self.slots[self.cur] = (C::default(), C::default());
            self.cur_start += self.len;
            steps += 1;
        }
        if steps > N {
            // Idle for longer than the ring: start afresh.
            self.cur_start = now;
        }
    }

    fn add(&mut self, n: u64, now: Instant) {
        self.roll(now);
        // Saturating: a u32 slot of 10 s holds 429 M messages a second on one thread.
        let sat = |c: C, n: u64| C::try_from(c.into().saturating_add(n)).unwrap_or(c);
        let (v, t) = self.slots[self.cur];
        self.slots[self.cur] = (sat(v, n), sat(t, 1));
    }

    /// (messages, calls) of the last `k` slots, the one being filled included when `current`.
    fn sum(&mut self, k: usize, current: bool, now: Instant) -> (u64, u64) {
        self.roll(now);
        let skip = usize::from(!current);
        let k = k.clamp(1, N - skip);
        (skip..skip + k)
            .map(|i| self.slots[(self.cur + N - i) % N])
            .fold((0, 0), |a, s| (a.0 + s.0.into(), a.1 + s.1.into()))
    }
}

/// Message counts of one key: in 10-second slots for TPS over the last 10 s, 1 min and 10 min,
/// as RocketMQ's `putTps` (`"10s 1min 10min"`), and in 10-minute and hour slots for the hour and
/// day figures of VIEW_BROKER_STATS_DATA (`statsAll`'s 24-hour counts; RocketMQ samples at the
/// same steps).
struct Rate {
    ten_s: Ring<SLOTS, u32>,
    ten_min: Ring<7>,
    hours: Ring<25>,
}

/// (messages, calls) over the last minute, hour and day of one key (RocketMQ's `StatsSnapshot`
/// sums). The minute is the last six completed 10-second slots; the hour and the day are the
/// slot being filled and the completed ones before it that span the window (60–70 minutes, 24–25
/// hours), so a message is never left out before it is an hour or a day old.
pub type StatsSums = [(u64, u64); 3];

impl Rate {
    fn new(now: Instant) -> Rate {
        Rate {
            ten_s: Ring::new(now, SLOT),
            ten_min: Ring::new(now, Duration::from_secs(600)),
            hours: Ring::new(now, Duration::from_secs(3600)),
        }
    }

    fn add(&mut self, n: u64, now: Instant) {
        self.ten_s.add(n, now);
        self.ten_min.add(n, now);
        self.hours.add(n, now);
    }

    /// Messages per second over the last `n` completed 10-second slots.
    fn tps(&mut self, n: usize, now: Instant) -> f64 {
        let n = n.clamp(1, SLOTS - 1);
        self.ten_s.sum(n, false, now).0 as f64 / (n as f64 * SLOT.as_secs_f64())
    }

    fn sums(&mut self, now: Instant) -> StatsSums {
        [
            self.ten_s.sum(6, false, now),
            self.ten_min.sum(7, true, now),
            self.hours.sum(25, true, now),
        ]
    }
}

fn add_sums(a: &mut StatsSums, b: StatsSums) {
    for (x, y) in a.iter_mut().zip(b) {
        x.0 += y.0;
        x.1 += y.1;
    }
}

/// Per-key [`Rate`]s of one connection thread, keyed by (a, b): (topic, "") for puts, (group,
/// topic) for gets.
#[derive(Default)]
pub struct Rates {
    map: HashMap<String, HashMap<String, Rate>>,
}

impl Rates {
    pub fn add(&mut self, a: &str, b: &str, n: u64) {
        let now = Instant::now();
        // Looked up before an insert: the keys are allocated only the first time.
        if !self.map.contains_key(a) {
            self.map.insert(a.to_owned(), HashMap::new());
        }
        let inner = self.map.get_mut(a).expect("inserted above");
        if !inner.contains_key(b) {
            inner.insert(b.to_owned(), Rate::new(now));
        }
        inner.get_mut(b).expect("inserted above").add(n, now);
    }

    /// [`StatsSums`] of (a, b), `b = None` summing every b under a, `a = None` every key; `None`
    /// when no such key was ever counted (RocketMQ: "the stats not exist").
    pub fn sums(&mut self, a: Option<&str>, b: Option<&str>) -> Option<StatsSums> {
        let now = Instant::now();
        let mut out = None;
        let mut add = |r: &mut Rate| add_sums(out.get_or_insert([(0, 0); 3]), r.sums(now));
        // One key is looked up, not searched for: the Dashboard asks per topic every minute.
        let inners: Vec<&mut HashMap<String, Rate>> = match a {
            Some(a) => self.map.get_mut(a).into_iter().collect(),
            None => self.map.values_mut().collect(),
        };
        for inner in inners {
            match b {
                Some(b) => inner.get_mut(b).into_iter().for_each(&mut add),
                None => inner.values_mut().for_each(&mut add),
            }
        }
        out
    }

    /// TPS of (a, b) over the last `slots` × 10 s; `b = None` sums every b under a.
    pub fn tps(&mut self, a: &str, b: Option<&str>, slots: usize) -> f64 {
        let now = Instant::now();
        let Some(inner) = self.map.get_mut(a) else {
            return 0.0;
        };
        match b {
            Some(b) => inner.get_mut(b).map_or(0.0, |r| r.tps(slots, now)),
            // `+ 0.0`: an empty f64 sum is -0.0, which would print as "-0.00".
            None => inner.values_mut().map(|r| r.tps(slots, now)).sum::<f64>() + 0.0,
        }
    }
}

/// Microseconds up to an hour.
const LATENCY_MAX_US: u64 = 3_600_000_000;

fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    // 2 significant digits: ~10 KiB, constant-time record.
    hdrhistogram::Histogram::new_with_bounds(1, LATENCY_MAX_US, 2).expect("valid bounds")
}

/// Time from a SEND's arrival to its reply (stored, and flushed in SYNC_FLUSH), for the runtime
/// keys `putLatency99`, `putLatency999` and `putMessageEntireTimeMax` (`putMessageDistributeTime`,
/// the last minute's, is [`super::store_stats::StoreStats`]').
pub struct PutLatency(hdrhistogram::Histogram<u64>);

impl Default for PutLatency {
    fn default() -> Self {
        PutLatency(latency_histogram())
    }
}

impl PutLatency {
    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).max(1);
        let _ = self.0.record(us.min(LATENCY_MAX_US));
    }

    /// The runtime keys, in RocketMQ's units (milliseconds).
    pub fn fill(&self, t: &mut BTreeMap<String, String>) {
        fill_latency(&self.0, t);
    }
}

fn fill_latency(h: &hdrhistogram::Histogram<u64>, t: &mut BTreeMap<String, String>) {
    let ms = |us: u64| us as f64 / 1000.0;
    t.insert(
        "putLatency99".into(),
        format!("{:.2}", ms(h.value_at_quantile(0.99))),
    );
    t.insert(
        "putLatency999".into(),
        format!("{:.2}", ms(h.value_at_quantile(0.999))),
    );
    t.insert(
        "putMessageEntireTimeMax".into(),
        (h.max() / 1000).to_string(),
    );
}

/// Put and get TPS windows of one connection thread, and its put latencies.
#[derive(Default)]
pub struct RateSet {
    /// (topic, "").
    pub put: Rates,
    /// (group, topic).
    pub get: Rates,
    pub put_latency: PutLatency,
}

/// A connection thread's own [`RateSet`], recorded into by its processor (never sent to another
/// thread: `Rc`).
#[derive(Clone, Default)]
pub struct ThreadRates(Rc<RefCell<RateSet>>);

impl ThreadRates {
    /// `n` messages stored to `topic`.
    pub fn put(&self, topic: &str, n: u64) {
        self.0.borrow_mut().put.add(topic, "", n);
    }

    /// `n` messages of `topic` read by `group`.
    pub fn get(&self, group: &str, topic: &str, n: u64) {
        self.0.borrow_mut().get.add(group, topic, n);
    }

    /// One SEND's time from arrival to reply.
    pub fn put_latency(&self, d: Duration) {
        self.0.borrow_mut().put_latency.record(d);
    }

    /// Several SENDs' (a batch's), under one borrow.
    pub fn put_latencies(&self, ds: impl Iterator<Item = Duration>) {
        let mut set = self.0.borrow_mut();
        for d in ds {
            set.put_latency.record(d);
        }
    }
}

/// A read of one thread's [`RateSet`], run on that thread.
pub type Ask = Box<dyn FnOnce(&mut RateSet) + Send>;

/// Which [`StatsSums`] of a thread's set a VIEW_BROKER_STATS_DATA item reads.
type PickSums = Box<dyn Fn(&mut RateSet) -> Option<StatsSums> + Send + Sync>;

/// Every connection thread's mailbox for [`Ask`]s, for the figures that report the broker as a
/// whole. Registration swaps in a longer list (once per thread, at its start); reads load it.
#[derive(Default)]
pub struct SharedRates {
    threads: ArcSwap<Vec<mpsc::UnboundedSender<Ask>>>,
}

impl SharedRates {
    /// A new thread's own set, registered for the totals. Called on that thread, within its
    /// runtime: the task that answers [`Ask`]s about the set is started there.
    pub fn for_thread(&self) -> ThreadRates {
        let set = ThreadRates::default();
        let (tx, mut rx) = mpsc::unbounded_channel::<Ask>();
        let mine = set.0.clone();
        actix_rt::spawn(async move {
            while let Some(ask) = rx.recv().await {
                ask(&mut mine.borrow_mut());
            }
        });
        self.threads.rcu(|v| {
            let mut v = Vec::clone(v);
            v.push(tx.clone());
            v
        });
        set
    }

    /// `f` run on every thread against its set; the answers in registration order.
    async fn each<T: Send + 'static>(
        &self,
        f: impl Fn(&mut RateSet) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let f = Arc::new(f);
        let asked: Vec<oneshot::Receiver<T>> = self
            .threads
            .load()
            .iter()
            .filter_map(|tx| {
                let (answer, rx) = oneshot::channel();
                let f = f.clone();
                let ask: Ask = Box::new(move |set| {
                    let _ = answer.send(f(set));
                });
                tx.send(ask).ok().map(|()| rx)
            })
            .collect();
        let mut out = Vec::with_capacity(asked.len());
        for rx in asked {
            if let Ok(v) = rx.await {
                out.push(v);
            }
        }
        out
    }

    /// Put TPS of a topic over the last 10 s.
    pub async fn topic_put_tps(&self, topic: &str) -> f64 {
        let topic = topic.to_owned();
        let each = self.each(move |r| r.put.tps(&topic, None, 1)).await;
        each.iter().sum::<f64>() + 0.0
    }

    /// VIEW_BROKER_STATS_DATA: the stats item `name` of `key`, over every thread; `None` when it
    /// does not exist (an unknown name, or nothing counted for the key yet). `cluster` is the
    /// key of the broker-wide items, as in RocketMQ.
    pub async fn stats(&self, name: &str, key: &str, cluster: &str) -> Option<BrokerStatsData> {
        let pick: PickSums = match name {
            "TOPIC_PUT_NUMS" => {
                let key = key.to_owned();
                Box::new(move |r| r.put.sums(Some(&key), None))
            }
            "GROUP_GET_NUMS" => {
                let (topic, group) = key.split_once('@')?;
                let (topic, group) = (topic.to_owned(), group.to_owned());
                Box::new(move |r| r.get.sums(Some(&group), Some(&topic)))
            }
            "BROKER_PUT_NUMS" if key == cluster => Box::new(|r| r.put.sums(None, None)),
            "BROKER_GET_NUMS" if key == cluster => Box::new(|r| r.get.sums(None, None)),
            _ => return None,
        };
        let s = self
            .each(pick)
            .await
            .into_iter()
            .flatten()
            .reduce(|mut a, b| {
                add_sums(&mut a, b);
                a
            })?;
        Some(BrokerStatsData {
            stats_minute: BrokerStatsItem::of(s[0].0, s[0].1, 60.0),
            stats_hour: BrokerStatsItem::of(s[1].0, s[1].1, 3_600.0),
            stats_day: BrokerStatsItem::of(s[2].0, s[2].1, 86_400.0),
        })
    }

    /// Get TPS of each (group, topic) over the last minute (RocketMQ's `tpsGroupGetNums`, the
    /// `consumeTps` of GET_CONSUME_STATS and GET_BROKER_CONSUME_STATS), in the order asked.
    pub async fn group_get_tps(&self, keys: Vec<(String, String)>) -> Vec<f64> {
        let n = keys.len();
        let each = self
            .each(move |r| {
                keys.iter()
                    .map(|(group, topic)| r.get.tps(group, Some(topic), 6))
                    .collect::<Vec<f64>>()
            })
            .await;
        (0..n)
            .map(|i| each.iter().filter_map(|t| t.get(i)).sum::<f64>() + 0.0)
            .collect()
    }

    /// `putLatency99`, … over every thread's SENDs.
    pub async fn fill_put_latency(&self, t: &mut BTreeMap<String, String>) {
        let mut all = latency_histogram();
        for h in self.each(|r| r.put_latency.0.clone()).await {
            let _ = all.add(&h);
        }
        fill_latency(&all, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_count_in_ten_second_slots() {
        let t0 = Instant::now();
        let mut r = Rate::new(t0);
        r.add(100, t0);
        // Still in the first slot: nothing completed yet.
        assert_eq!(r.tps(1, t0 + Duration::from_secs(5)), 0.0);
        assert_eq!(r.tps(1, t0 + Duration::from_secs(10)), 10.0);
        assert_eq!(r.tps(6, t0 + Duration::from_secs(10)), 100.0 / 60.0);
        // After more than the ring, everything has aged out.
        assert_eq!(r.tps(59, t0 + Duration::from_secs(3600)), 0.0);
    }

    /// The minute of VIEW_BROKER_STATS_DATA counts the last six completed 10-second slots; the
    /// hour and day count every minute and hour slot in reach, the current one included.
    #[test]
    fn stats_sums_cover_the_last_minute_hour_and_day() {
        let t0 = Instant::now();
        let mut r = Rate::new(t0);
        r.add(100, t0);
        r.add(20, t0 + Duration::from_secs(15));
        r.add(50, t0 + Duration::from_secs(70));
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(r.sums(at(75)), [(20, 1), (170, 3), (170, 3)]);
        // Two hours on: only the day still holds them.
        assert_eq!(r.sums(at(7_300)), [(0, 0), (0, 0), (170, 3)]);
        // A day and more on: nothing.
        assert_eq!(r.sums(at(90_000)), [(0, 0); 3]);
        let item = BrokerStatsItem::of(170, 3, 3_600.0);
        assert_eq!((item.sum, item.avgpt), (170, 170.0 / 3.0));
    }

    #[test]
    fn put_latency_fills_rocketmq_keys() {
        let mut p = PutLatency::default();
        for ms in [1u64, 2, 3, 20, 700] {
            p.record(Duration::from_millis(ms));
        }
        let mut t = BTreeMap::new();
        p.fill(&mut t);
        assert_eq!(t["putMessageEntireTimeMax"], "700");
    }

    /// Two threads' sets (here two sets on one thread, each with its answering task) merge:
    /// counts add up, latencies join one distribution, and an unknown key is "not exist".
    #[actix::test]
    async fn every_threads_part_is_merged_when_read() {
        let shared = SharedRates::default();
        let (a, b) = (shared.for_thread(), shared.for_thread());
        a.put("T", 3);
        b.put("T", 4);
        a.get("G", "T", 5);
        a.put_latency(Duration::from_millis(2));
        b.put_latencies([Duration::from_millis(700)].into_iter());
        let day = |d: &BrokerStatsData| d.stats_day.sum;
        let put = shared.stats("TOPIC_PUT_NUMS", "T", "c").await.unwrap();
        assert_eq!(day(&put), 7);
        let all = shared.stats("BROKER_PUT_NUMS", "c", "c").await.unwrap();
        assert_eq!(day(&all), 7);
        let got = shared.stats("GROUP_GET_NUMS", "T@G", "c").await.unwrap();
        assert_eq!(day(&got), 5);
        assert!(shared.stats("TOPIC_PUT_NUMS", "other", "c").await.is_none());
        assert!(shared
            .stats("BROKER_PUT_NUMS", "not-the-cluster", "c")
            .await
            .is_none());
        // Nothing completed a 10-second slot yet: 0, never -0.
        assert_eq!(shared.topic_put_tps("T").await.to_bits(), 0f64.to_bits());
        let tps = shared
            .group_get_tps(vec![("G".into(), "T".into()), ("H".into(), "T".into())])
            .await;
        assert_eq!(tps.len(), 2);
        let mut t = BTreeMap::new();
        shared.fill_put_latency(&mut t).await;
        assert_eq!(t["putMessageEntireTimeMax"], "700");
    }
}
