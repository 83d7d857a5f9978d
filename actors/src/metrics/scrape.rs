//! Gauges and counters computed at scrape time, and the whole `/metrics` page
//! ([`ScrapeSources::render`]).
//!
//! In: a scrape (from [`super::server`]). Out: the page, built from the lock-free views the store
//! shares (positions, flush and group-commit counters, the write-buffer pool, replication), the
//! mailbox probes of [`crate::metered`], and what the broker answers through [`BrokerSource`]
//! (topic and group counts, committed offsets, connections). The broker implements
//! [`BrokerSource`] (in `broker/metrics_source.rs`), so this module names no broker type: the
//! broker depends on metrics, never the other way.
//!
//! *Invariants:* every scrape builds its gauges into a fresh registry, so a topic or group that
//! went away leaves no stale series and concurrent scrapes cannot see each other's half-built
//! state; an answer later than [`ACTOR_ASK_TIMEOUT`] leaves its series out of the page (logged),
//! it never hangs the scraper.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actormq_core::meta::{ConsumerOffsets, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use actormq_core::offset::PhyOffset;
use actormq_core::store::reader::StoreReader;
use futures_util::future::LocalBoxFuture;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntGaugeVec, Opts, Registry};

use super::process::process_families;
use super::{bool_label, is_system_group, is_system_topic, BrokerMetrics};
use crate::metered;
use crate::store::state::StoreState;

/// How long a scrape waits for an actor's answer (offsets, connections) before leaving those
/// series out of this page rather than hanging the scraper.
pub const ACTOR_ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// `rocketmq_processor_watermark{processor}`: RocketMQ's request-queue names, each mapped to
/// the actor whose mailbox plays that queue's role here. RocketMQ processors with no queue of
/// their own here (query_message is answered lock-free from the index; no transactions, no pop
/// `ack`, no `reply`) have no series.
pub const WATERMARKS: &[(&str, &str)] = &[
    ("send", "commitlog_writer"),
    ("pull", "pull_hold"),
    ("lite_pull", "pull_hold"),
    ("heartbeat", "client_registry"),
    ("client_manager", "client_registry"),
    ("consumer_manager", "metadata"),
    ("admin", "metadata"),
];

/// Clients registered by heartbeat, as the scrape counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Connections {
    pub producers: usize,
    pub consumers: usize,
}

/// What a scrape asks of the broker. The broker implements it from its actors (the metadata
/// actor, the client registry and their lock-free views); the futures answer `None` when the
/// owning actor is gone, and a scrape waits for them at most [`ACTOR_ASK_TIMEOUT`].
pub trait BrokerSource: Send + Sync {
    /// Topics configured (`rocketmq_topic_number`), read lock-free.
    fn topic_count(&self) -> usize;
    /// Subscription groups configured (`rocketmq_consumer_group_number`), read lock-free.
    fn group_count(&self) -> usize;
    /// Committed consumer offsets (`rocketmq_consumer_lag_messages`).
    fn offsets(&self) -> LocalBoxFuture<'static, Option<ConsumerOffsets>>;
    /// Connected producers and consumers (`rocketmq_*_connections`).
    fn connections(&self) -> LocalBoxFuture<'static, Option<Connections>>;
}

/// What a scrape reads. `Send`: the HTTP worker runs on its own thread.
#[derive(Clone)]
pub struct ScrapeSources {
    pub metrics: Arc<BrokerMetrics>,
    pub reader: StoreReader,
    pub state: Arc<StoreState>,
    pub store_root: PathBuf,
    /// Topic and group counts, committed offsets and connections, from the broker.
    pub broker: Arc<dyn BrokerSource>,
    /// The write-buffer pool, when `transientStorePoolEnable` is effective.
    pub pool: Option<Arc<actormq_core::store::transient_pool::TransientStorePool>>,
    /// A master's replication state (none on a slave).
    pub ha: Option<Arc<crate::store::ha::HaState>>,
}

/// Bytes used on the file system holding `path` (total − free, as Java's
/// `File.getTotalSpace() - getFreeSpace()` that RocketMQ reports).
fn used_bytes(path: &std::path::Path) -> std::io::Result<u64> {
    let (total, free) = crate::fsutil::space(path)?;
    Ok(total.saturating_sub(free))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `families` with `labels` added to every metric: for a collector the store owns, which does
/// not know the broker's identity (the store state's flush histogram).
fn with_labels(
    mut families: Vec<MetricFamily>,
    labels: &HashMap<String, String>,
) -> Vec<MetricFamily> {
    let mut sorted: Vec<_> = labels.iter().collect();
    sorted.sort();
    for f in &mut families {
        for m in f.mut_metric() {
            let mut pairs = m.take_label();
            for (name, value) in &sorted {
                let mut p = prometheus::proto::LabelPair::default();
                p.set_name(name.to_string());
                p.set_value(value.to_string());
                pairs.push(p);
            }
            m.set_label(pairs);
        }
    }
    families
}

/// Gauges of one scrape, in a registry of their own.
struct ScrapeGauges {
    registry: Registry,
    base: HashMap<String, String>,
}

impl ScrapeGauges {
    fn vec(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        let g = IntGaugeVec::new(
            Opts::new(name, help).const_labels(self.base.clone()),
            labels,
        )
        .expect("valid metric");
        self.registry
            .register(Box::new(g.clone()))
            .expect("metric registered once per scrape");
        g
    }
    fn set(&self, name: &str, help: &str, value: i64) {
        self.vec(name, help, &[])
            .with_label_values(&[] as &[&str])
            .set(value);
    }

    /// A counter read from a source that only grows (a fresh registry per scrape, so the
    /// counter is set to the source's total).
    fn counter(&self, name: &str, help: &str, total: u64) {
        let c = IntCounter::with_opts(Opts::new(name, help).const_labels(self.base.clone()))
            .expect("valid metric");
        c.inc_by(total);
        self.registry
            .register(Box::new(c))
            .expect("metric registered once per scrape");
    }
}

/// `rocketmq_processor_watermark`: the mailbox depth of the actor serving each kind of request.
fn watermarks(g: &ScrapeGauges) {
    let watermark = g.vec(
        "rocketmq_processor_watermark",
        "Requests waiting in the mailbox of the actor that serves this kind of request",
        &["processor"],
    );
    let probes = metered::snapshot();
    for (processor, actor) in WATERMARKS {
        if let Some(p) = probes.iter().find(|p| p.name == *actor) {
            watermark.with_label_values(&[*processor]).set(p.depth);
        }
    }
}

/// `rocketmq_producer_connections` and `rocketmq_consumer_connections`.
fn connections(g: &ScrapeGauges, c: Connections) {
    let Connections {
        producers,
        consumers,
    } = c;
    for (name, help, n) in [
        (
            "rocketmq_producer_connections",
            "Producer clients registered by heartbeat, per group",
            producers,
        ),
        (
            "rocketmq_consumer_connections",
            "Consumer clients registered by heartbeat, per group",
            consumers,
        ),
    ] {
        g.vec(name, help, &["protocol_type"])
            .with_label_values(&["remoting"])
            .set(n as i64);
    }
}

impl ScrapeSources {
    /// The whole `/metrics` page.
    pub async fn render(&self) -> String {
        let mut families = metered::registry().gather();
        families.extend(self.metrics.gather());
        families.extend(with_labels(
            self.state.flush_time.histogram().collect(),
            &self.metrics.labels.const_labels(),
        ));
        families.extend(self.scrape_gauges().await);
        families.extend(process_families());
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }

    /// The gauges and counters read at scrape time, into a fresh registry.
    async fn scrape_gauges(&self) -> Vec<MetricFamily> {
        let g = ScrapeGauges {
            registry: Registry::new(),
            base: self.metrics.labels.const_labels(),
        };
        watermarks(&g);
        self.storage(&g);
        self.group_commit(&g);
        self.ha_gauges(&g);
        self.pool_gauges(&g);
        self.meta_counts(&g);
        self.asked(&g).await;
        g.registry.gather()
    }

    /// `rocketmq_storage_*`: disk use, flush and dispatch backlog, age of the oldest message.
    fn storage(&self, g: &ScrapeGauges) {
        let storage = &["storage_type", "storage_medium"];
        let local = ["local", "disk"];
        match used_bytes(&self.store_root) {
            Ok(used) => g
                .vec(
                    "rocketmq_storage_size",
                    "Bytes used on the file system of the store, bytes",
                    storage,
                )
                .with_label_values(&local)
                .set(used as i64),
            Err(e) => {
                tracing::debug!(path = %self.store_root.display(), error = %e, "statvfs failed")
            }
        }
        let max = self.reader.commit_log().max_offset();
        let flushed = self.state.flushed();
        let dispatched = self
            .state
            .dispatched
            .load(std::sync::atomic::Ordering::Acquire);
        g.vec(
            "rocketmq_storage_flush_behind_bytes",
            "CommitLog bytes written but not yet flushed to disk",
            storage,
        )
        .with_label_values(&local)
        .set(max.saturating_sub(flushed) as i64);
        g.vec(
            "rocketmq_storage_dispatch_behind_bytes",
            "CommitLog bytes not yet dispatched to ConsumeQueues and the index",
            storage,
        )
        .with_label_values(&local)
        .set(max.saturating_sub(dispatched) as i64);
        let first = PhyOffset(self.reader.commit_log().min_offset());
        if let Some(ts) = self.reader.store_time_at(first).filter(|t| *t > 0) {
            g.vec(
                "rocketmq_storage_message_reserve_time",
                "Age of the oldest stored message, milliseconds",
                storage,
            )
            .with_label_values(&local)
            .set((now_ms() - ts).max(0));
        }
    }

    /// SYNC_FLUSH group commit (0 in ASYNC_FLUSH): flushes/s and the mean batch (messages per
    /// flush) are the ratio of their rates.
    fn group_commit(&self, g: &ScrapeGauges) {
        g.counter(
            "actormq_group_commit_flushes_total",
            "SYNC_FLUSH group commits (fdatasync) that answered waiting sends",
            self.state
                .group_flushes
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        g.counter(
            "actormq_group_commit_messages_total",
            "Messages whose SYNC_FLUSH wait a group commit answered",
            self.state
                .group_messages
                .load(std::sync::atomic::Ordering::Relaxed),
        );
    }

    /// A master's slaves and how far behind the slowest acknowledgement is.
    fn ha_gauges(&self, g: &ScrapeGauges) {
        let Some(ha) = &self.ha else {
            return;
        };
        let slaves = ha.connections();
        g.set(
            "actormq_ha_slaves",
            "Slaves replicating from this master (connected to haListenPort)",
            slaves as i64,
        );
        if slaves > 0 {
            g.set(
                "actormq_ha_slave_behind_bytes",
                "CommitLog bytes no slave has acknowledged yet (SYNC_MASTER sends wait for \
                 them; at haSlaveFallbehindMax they are answered SLAVE_NOT_AVAILABLE)",
                self.reader
                    .commit_log()
                    .max_offset()
                    .saturating_sub(ha.acked()) as i64,
            );
        }
    }

    /// The TransientStorePool's free and total write buffers, when it is enabled.
    fn pool_gauges(&self, g: &ScrapeGauges) {
        let Some(pool) = &self.pool else {
            return;
        };
        let buffers = g.vec(
            "actormq_transient_store_pool_buffers",
            "Write buffers of the TransientStorePool (transientStorePoolEnable): free ones \
             (remainTransientStoreBufferNumbs) and all; under 40 % free the committer is behind",
            &["state"],
        );
        buffers
            .with_label_values(&["available"])
            .set(pool.available() as i64);
        buffers
            .with_label_values(&["total"])
            .set(pool.capacity() as i64);
    }

    /// Topics and subscription groups configured.
    fn meta_counts(&self, g: &ScrapeGauges) {
        g.set(
            "rocketmq_topic_number",
            "Topics configured on this broker",
            self.broker.topic_count() as i64,
        );
        g.set(
            "rocketmq_consumer_group_number",
            "Subscription groups configured on this broker",
            self.broker.group_count() as i64,
        );
    }

    /// What the broker's metadata actor (committed offsets: the lag) and client registry
    /// (connections) answer within [`ACTOR_ASK_TIMEOUT`]; a late answer leaves its metrics out.
    async fn asked(&self, g: &ScrapeGauges) {
        let (offsets, conns) = futures_util::join!(
            tokio::time::timeout(ACTOR_ASK_TIMEOUT, self.broker.offsets()),
            tokio::time::timeout(ACTOR_ASK_TIMEOUT, self.broker.connections()),
        );
        match offsets {
            Ok(Some(offsets)) => self.lag(g, &offsets),
            _ => tracing::warn!("metrics: no committed offsets from the metadata actor in time"),
        }
        match conns {
            Ok(Some(c)) => connections(g, c),
            _ => tracing::warn!("metrics: no connection list from the client registry in time"),
        }
    }

    /// `rocketmq_consumer_lag_messages`: for every (topic, group) with committed offsets, the sum
    /// over the topic's queues of (ConsumeQueue max − committed offset); a queue the group never
    /// committed counts from its min offset (everything still stored is unconsumed).
    fn lag(&self, g: &ScrapeGauges, offsets: &ConsumerOffsets) {
        let lag = g.vec(
            "rocketmq_consumer_lag_messages",
            "Messages stored and not yet consumed (committed) by the group",
            &["topic", "consumer_group", "is_retry", "is_system"],
        );
        let system = self.metrics.labels.system_topics();
        for (key, queues) in &offsets.offset_table {
            let Some((topic, group)) = key.split_once('@') else {
                continue;
            };
            if topic.starts_with(DLQ_GROUP_TOPIC_PREFIX) {
                continue;
            }
            let mut total: i64 = 0;
            for q in self.reader.consume_queues().queues_of(topic) {
                let max = q.max_offset().0 as i64;
                let from = queues
                    .get(&q.queue_id)
                    .copied()
                    .unwrap_or(q.min_offset().0 as i64);
                total += (max - from.max(0)).max(0);
            }
            let retry = bool_label(topic.starts_with(RETRY_GROUP_TOPIC_PREFIX));
            let sys = bool_label(is_system_topic(topic, &system) || is_system_group(group));
            lag.with_label_values(&[topic, group, retry, sys])
                .set(total);
        }
    }
}
