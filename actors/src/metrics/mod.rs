//! The broker's Prometheus endpoint: `GET /metrics` on `metricsPromExporterPort`, in the
//! Prometheus text format, with RocketMQ 5's metric names and labels (as its
//! `org.apache.rocketmq.broker.metrics.BrokerMetricsConstant` spells them) so existing Grafana
//! boards and alerts work unchanged.
//!
//! Four sources are rendered into one page:
//!
//! * the actor mailbox series of [`crate::metered::registry`] (`actormq_actor_*{actor}`), which
//!   every running actor has with no code here;
//! * counters and histograms updated on the request path ([`BrokerMetrics`], through the
//!   per-connection-thread [`RequestMeters`]): `rocketmq_messages_in_total`,
//!   `rocketmq_messages_out_total`, `rocketmq_throughput_in_total`,
//!   `rocketmq_throughput_out_total`, `rocketmq_message_size`, `rocketmq_rpc_latency`;
//! * gauges computed at scrape time ([`ScrapeSources`]) from the lock-free views (store positions,
//!   mailbox probes, topic and group counts) and by asking the broker's actors through
//!   [`BrokerSource`], which the broker implements (committed offsets, connections):
//!   `rocketmq_processor_watermark`,
//!   `rocketmq_storage_*`, `rocketmq_consumer_lag_messages`, `rocketmq_*_connections`,
//!   `rocketmq_topic_number`, `rocketmq_consumer_group_number`; ActorMQ's own
//!   `actormq_group_commit_flushes_total` and `actormq_group_commit_messages_total` (SYNC_FLUSH:
//!   the ratio of their rates is the mean group-commit batch); with write buffers
//!   (`transientStorePoolEnable`, which RocketMQ 5 has no metric for) ActorMQ's own
//!   `actormq_transient_store_pool_buffers{state="available"|"total"}` — `available` is the
//!   `remainTransientStoreBufferNumbs` of GET_BROKER_RUNTIME_INFO, and under 40 % of `total` is
//!   when the store logs RocketMQ's "TransientStorePool only remain N sheets" warning; on a
//!   master, `actormq_ha_slaves` and `actormq_ha_slave_behind_bytes` (replication);
//! * the store's histogram `actormq_commitlog_flush_seconds` (every CommitLog flush that wrote
//!   data, SYNC_FLUSH or ASYNC_FLUSH: the disk's side of a send's latency), kept by the store in
//!   its shared state and given the broker's labels here;
//! * the process, read from `/proc` at scrape time ([`proc_stat`], [`process`]): the Prometheus
//!   process-collector series `process_cpu_seconds_total` (utime + stime, fractional seconds at
//!   clock-tick resolution), `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
//!   `process_start_time_seconds`, `process_open_fds`, `process_max_fds`, `process_threads`, and
//!   ActorMQ's `actormq_thread_cpu_seconds_total{thread}`: the CPU of the live threads summed by
//!   thread name (the names `metered::name_thread` gives: one per store actor, `connections`,
//!   `ha`; a 15-byte truncated name is given back its actor's full name), so a CPU-per-message
//!   figure can be split by role. The prometheus crate's own `process` feature is not used: its
//!   `process_cpu_seconds_total` is an integer counter that truncates to whole seconds, too
//!   coarse for CPU per message over a run of seconds, and it would add the `procfs` crate.
//!
//! Every broker metric carries RocketMQ's base labels `cluster`, `node_type="broker"` and
//! `node_id=<brokerName>` (as constant labels: no cost per observation). The actor, process and
//! thread series are process-wide and carry no broker labels (as Prometheus's process collector).
//!
//! Hot path: a counter update is a hash lookup by `&str` in a cache owned by the connection
//! thread plus a few atomic adds; labelled children are created (and allocate) only the first
//! time a topic, a (topic, group) pair or a (request, response) code pair is seen.
//!
//! Scrape-time gauges are built into a fresh registry per scrape, so a topic or group that went
//! away leaves no stale series and concurrent scrapes cannot see each other's half-built state.
//!
//! The files: this one records on the request path ([`BrokerMetrics`], [`RequestMeters`],
//! [`MessageType`]); [`scrape`] builds the page ([`ScrapeSources`], [`BrokerSource`]);
//! [`process`] and [`proc_stat`] read `/proc`; [`server`] serves it ([`MetricsServer`]). The
//! direction is broker → metrics: the broker records here and hands the scrape what to read;
//! nothing here names a broker type.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq_core::format::properties::keys;
use actormq_core::meta::RETRY_GROUP_TOPIC_PREFIX;
use actormq_core::protocol::codes::{request_code_name, response_code_name};
use actormq_core::protocol::command::RemotingCommand;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry,
};

pub mod proc_stat;
pub mod process;
pub mod scrape;
pub mod server;

pub use process::process_families;
pub use scrape::{BrokerSource, Connections, ScrapeSources, ACTOR_ASK_TIMEOUT, WATERMARKS};
pub use server::MetricsServer;

/// `rocketmq_message_size` buckets: 1 KiB, 4 KiB, 512 KiB, 1 MiB, 2 MiB, 4 MiB (RocketMQ 5).
const SIZE_BUCKETS: [f64; 6] = [
    1024.0,
    4096.0,
    512.0 * 1024.0,
    1024.0 * 1024.0,
    2.0 * 1024.0 * 1024.0,
    4.0 * 1024.0 * 1024.0,
];
/// `rocketmq_rpc_latency` buckets in milliseconds (RocketMQ 5).
const RPC_MS_BUCKETS: [f64; 7] = [1.0, 3.0, 5.0, 10.0, 100.0, 1000.0, 3000.0];

/// RocketMQ's `TopicMessageType`, as its metrics spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageType {
    Normal = 0,
    Fifo = 1,
    Delay = 2,
    Transaction = 3,
}

impl MessageType {
    pub fn label(self) -> &'static str {
        match self {
            MessageType::Normal => "normal",
            MessageType::Fifo => "fifo",
            MessageType::Delay => "delay",
            MessageType::Transaction => "transaction",
        }
    }
}

/// The message type of a send, from its properties, in RocketMQ 5's order
/// (`BrokerMetricsManager.getMessageType`): prepared transaction, then sharding key (FIFO), then
/// any delay or timer property. One pass over the properties, no allocation.
pub fn message_type(props: &str) -> MessageType {
    let mut t = TypeScan::default();
    // The parser's entries, so a duplicate key reads as Java's map would (the last one wins).
    for (k, v) in actormq_core::format::properties::entries(props) {
        t.see(k, v);
    }
    t.kind()
}

/// What decides a message's type, gathered one property entry at a time (for callers that read
/// other properties in the same pass).
#[derive(Default)]
pub struct TypeScan {
    transaction: bool,
    fifo: bool,
    delay: bool,
}

impl TypeScan {
    pub fn see(&mut self, key: &str, value: &str) {
        match key {
            // Java's `Boolean.parseBoolean`: any case.
            keys::TRAN_MSG => self.transaction = value.eq_ignore_ascii_case("true"),
            keys::SHARDING_KEY => self.fifo = true,
            keys::DELAY
            | keys::START_DELIVER_TIME
            | keys::TIMER_DELIVER_MS
            | keys::TIMER_DELAY_SEC
            | keys::TIMER_DELAY_MS => self.delay = true,
            _ => {}
        }
    }

    /// A prepared transactional (half) message.
    pub fn transaction(&self) -> bool {
        self.transaction
    }

    pub fn kind(&self) -> MessageType {
        if self.transaction {
            MessageType::Transaction
        } else if self.fifo {
            MessageType::Fifo
        } else if self.delay {
            MessageType::Delay
        } else {
            MessageType::Normal
        }
    }
}

/// RocketMQ's `TopicValidator.isSystemTopic`, plus the topics a broker adds to that set at start
/// (its cluster name, its broker name and the cluster's reply topic).
fn is_system_topic(topic: &str, extra: &[String]) -> bool {
    actormq_core::store::validate::SYSTEM_TOPICS.contains(&topic)
        // 5.x timer messages' schedule topic.
        || topic == "SCHEDULE_TOPIC_XXXX_V2"
        || topic.starts_with("rmq_sys_") || extra.iter().any(|t| t == topic)
}

/// RocketMQ's `MixAll.isSysConsumerGroup`.
fn is_system_group(group: &str) -> bool {
    group.starts_with("CID_RMQ_SYS_")
}

fn bool_label(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

/// The broker's identity in its metrics.
#[derive(Clone, Debug)]
pub struct BrokerLabels {
    pub cluster: String,
    pub broker_name: String,
}

impl BrokerLabels {
    fn const_labels(&self) -> HashMap<String, String> {
        HashMap::from([
            ("cluster".to_string(), self.cluster.clone()),
            ("node_type".to_string(), "broker".to_string()),
            ("node_id".to_string(), self.broker_name.clone()),
        ])
    }
    /// Topics this broker treats as system topics besides RocketMQ's fixed set.
    fn system_topics(&self) -> Vec<String> {
        vec![
            self.cluster.clone(),
            self.broker_name.clone(),
            format!("{}_REPLY_TOPIC", self.cluster),
        ]
    }
}

/// Counters and histograms updated on the request path. `Send + Sync`: the scrape handler
/// (another thread) gathers them.
pub struct BrokerMetrics {
    labels: BrokerLabels,
    registry: Registry,
    messages_in: IntCounterVec,
    throughput_in: IntCounterVec,
    message_size: HistogramVec,
    messages_out: IntCounterVec,
    throughput_out: IntCounterVec,
    rpc_latency: HistogramVec,
}

impl BrokerMetrics {
    pub fn new(labels: BrokerLabels) -> Arc<BrokerMetrics> {
        let base = labels.const_labels();
        let opts = |name: &str, help: &str| Opts::new(name, help).const_labels(base.clone());
        let in_labels = &["topic", "message_type", "is_system"];
        let out_labels = &["topic", "consumer_group", "is_retry", "is_system"];
        let counter = |name: &str, help: &str, l: &[&str]| {
            IntCounterVec::new(opts(name, help), l).expect("valid metric")
        };
        let m = BrokerMetrics {
            messages_in: counter(
                "rocketmq_messages_in_total",
                "Messages stored by producer sends",
                in_labels,
            ),
            throughput_in: counter(
                "rocketmq_throughput_in_total",
                "Message body bytes stored by producer sends",
                in_labels,
            ),
            message_size: HistogramVec::new(
                HistogramOpts::new("rocketmq_message_size", "Body size of sent messages, bytes")
                    .const_labels(base.clone())
                    .buckets(SIZE_BUCKETS.to_vec()),
                &["topic", "message_type"],
            )
            .expect("valid metric"),
            messages_out: counter(
                "rocketmq_messages_out_total",
                "Messages delivered to consumers by pulls",
                out_labels,
            ),
            throughput_out: counter(
                "rocketmq_throughput_out_total",
                "Bytes of stored messages delivered to consumers by pulls",
                out_labels,
            ),
            rpc_latency: HistogramVec::new(
                HistogramOpts::new(
                    "rocketmq_rpc_latency",
                    "Time from handing a request to the processor to its response, milliseconds",
                )
                .const_labels(base.clone())
                .buckets(RPC_MS_BUCKETS.to_vec()),
                &[
                    "protocol_type",
                    "request_code",
                    "response_code",
                    "is_long_polling",
                    "result",
                ],
            )
            .expect("valid metric"),
            registry: Registry::new(),
            labels,
        };
        for c in [
            Box::new(m.messages_in.clone()) as Box<dyn Collector>,
            Box::new(m.throughput_in.clone()),
            Box::new(m.message_size.clone()),
            Box::new(m.messages_out.clone()),
            Box::new(m.throughput_out.clone()),
            Box::new(m.rpc_latency.clone()),
        ] {
            m.registry.register(c).expect("metric registered once");
        }
        Arc::new(m)
    }

    pub fn labels(&self) -> &BrokerLabels {
        &self.labels
    }

    pub fn gather(&self) -> Vec<MetricFamily> {
        self.registry.gather()
    }
}

struct InChildren {
    messages: IntCounter,
    bytes: IntCounter,
    size: Histogram,
}

struct OutChildren {
    messages: IntCounter,
    bytes: IntCounter,
}

/// Consumer group → its outbound children, for one topic.
type GroupsOut = HashMap<Box<str>, OutChildren>;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct RpcKey {
    request: i32,
    response: i32,
    long_polling: bool,
    oneway: bool,
}

/// The request path's handle on [`BrokerMetrics`]: caches of labelled children, owned by the
/// broker's connection thread (`Rc`, no locks).
pub struct RequestMeters {
    metrics: Arc<BrokerMetrics>,
    system_topics: Vec<String>,
    inbound: RefCell<HashMap<Box<str>, [Option<InChildren>; 4]>>,
    outbound: RefCell<HashMap<Box<str>, GroupsOut>>,
    rpc: RefCell<HashMap<RpcKey, Histogram>>,
    /// Rate limit of the "request refused" log: (request, response) → (last logged, suppressed).
    refusals: RefCell<HashMap<(i32, i32), (Instant, u64)>>,
}

/// At most one "request refused" line per (request code, response code) in this window.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// Response codes that are normal flow, not refusals (nothing new to pull, nothing found, an
/// admin asking about a group that is offline).
fn is_refusal(code: i32) -> bool {
    use actormq_core::protocol::codes::response_code as rc;
    !matches!(
        code,
        rc::SUCCESS
            | rc::PULL_NOT_FOUND
            | rc::PULL_RETRY_IMMEDIATELY
            | rc::PULL_OFFSET_MOVED
            | rc::QUERY_NOT_FOUND
            | rc::CONSUMER_NOT_ONLINE
    )
}

impl RequestMeters {
    pub fn new(metrics: Arc<BrokerMetrics>) -> Rc<RequestMeters> {
        Rc::new(RequestMeters {
            system_topics: metrics.labels.system_topics(),
            metrics,
            inbound: RefCell::default(),
            outbound: RefCell::default(),
            rpc: RefCell::default(),
            refusals: RefCell::default(),
        })
    }

    /// Logs a refused request (WARN), at most once per [`REFUSAL_LOG_EVERY`] per (request,
    /// response) pair, saying how many more were refused the same way in between.
    pub fn note_refusal(&self, request: i32, resp: &RemotingCommand) {
        if !is_refusal(resp.code) {
            return;
        }
        let now = Instant::now();
        let mut map = self.refusals.borrow_mut();
        let entry = map
            .entry((request, resp.code))
            .or_insert((now - REFUSAL_LOG_EVERY, 0));
        if now.duration_since(entry.0) < REFUSAL_LOG_EVERY {
            entry.1 += 1;
            return;
        }
        let suppressed = std::mem::take(&mut entry.1);
        entry.0 = now;
        tracing::warn!(
            request = request_code_name(request),
            response = response_code_name(resp.code),
            code = resp.code,
            remark = resp.remark.as_deref().unwrap_or(""),
            similar_since_last_line = suppressed,
            "request refused"
        );
    }

    /// `n` messages of `bytes` body bytes in all were stored for `topic`. The size histogram
    /// gets one observation per message (a batch's messages each count as its mean size).
    pub fn messages_in(&self, topic: &str, kind: MessageType, n: u64, bytes: u64) {
        if n == 0 {
            return;
        }
        let mean = (bytes / n) as f64;
        self.with_inbound(topic, kind, |c| {
            c.messages.inc_by(n);
            c.bytes.inc_by(bytes);
            for _ in 0..n {
                c.size.observe(mean);
            }
        });
    }

    /// `n` messages of `bytes` body bytes in all, of these body `sizes`, were stored for
    /// `topic`: one observation each (the caller has the sums, so the sizes are not collected).
    pub fn messages_in_sizes(
        &self,
        topic: &str,
        kind: MessageType,
        n: u64,
        bytes: u64,
        sizes: impl Iterator<Item = u64>,
    ) {
        if n == 0 {
            return;
        }
        self.with_inbound(topic, kind, |c| {
            c.messages.inc_by(n);
            c.bytes.inc_by(bytes);
            for s in sizes {
                c.size.observe(s as f64);
            }
        });
    }

    fn with_inbound(&self, topic: &str, kind: MessageType, f: impl FnOnce(&InChildren)) {
        let mut cache = self.inbound.borrow_mut();
        if !cache.contains_key(topic) {
            cache.insert(topic.into(), Default::default());
        }
        let slot = &mut cache.get_mut(topic).expect("inserted above")[kind as usize];
        let c = slot.get_or_insert_with(|| {
            let sys = bool_label(is_system_topic(topic, &self.system_topics));
            let m = &self.metrics;
            InChildren {
                messages: m.messages_in.with_label_values(&[topic, kind.label(), sys]),
                bytes: m
                    .throughput_in
                    .with_label_values(&[topic, kind.label(), sys]),
                size: m.message_size.with_label_values(&[topic, kind.label()]),
            }
        });
        f(c);
    }

    /// `n` stored messages (`bytes` bytes as transferred) were delivered to `group` by a pull.
    pub fn messages_out(&self, topic: &str, group: &str, n: u64, bytes: u64) {
        if n == 0 {
            return;
        }
        let mut cache = self.outbound.borrow_mut();
        if !cache.contains_key(topic) {
            cache.insert(topic.into(), HashMap::new());
        }
        let groups = cache.get_mut(topic).expect("inserted above");
        if !groups.contains_key(group) {
            let retry = bool_label(topic.starts_with(RETRY_GROUP_TOPIC_PREFIX));
            let sys =
                bool_label(is_system_topic(topic, &self.system_topics) || is_system_group(group));
            let l = [topic, group, retry, sys];
            let c = OutChildren {
                messages: self.metrics.messages_out.with_label_values(&l),
                bytes: self.metrics.throughput_out.with_label_values(&l),
            };
            groups.insert(group.into(), c);
        }
        let c = groups.get(group).expect("inserted above");
        c.messages.inc_by(n);
        c.bytes.inc_by(bytes);
    }

    /// One request answered: latency since `started`, in milliseconds.
    ///
    /// Codes are labelled as RocketMQ's `RemotingHelper` does (the constant's name in lower case,
    /// else the number), except that request codes no RocketMQ server defines share one
    /// `request_code="unknown"` series: a peer sending random codes must not grow the page (or
    /// this cache) without bound. Response codes come from this broker, so they are bounded.
    pub fn rpc(
        &self,
        request: i32,
        response: i32,
        long_polling: bool,
        oneway: bool,
        started: Instant,
    ) {
        // A later reply is timed to the start of the handling that writes it (a clock read
        // already taken); one answered within its request's own handling reads the clock.
        let end = crate::metered::handling_since();
        let end = if end > started { end } else { Instant::now() };
        let ms = end.saturating_duration_since(started).as_secs_f64() * 1000.0;
        let key = RpcKey {
            request,
            response,
            long_polling,
            oneway,
        };
        if let Some(h) = self.rpc.borrow().get(&key) {
            h.observe(ms);
            return;
        }
        let req_name = request_code_name(request);
        let known = req_name != "UNKNOWN";
        let req = if known {
            req_name.to_ascii_lowercase()
        } else {
            "unknown".to_string()
        };
        let resp = match response_code_name(response) {
            "UNKNOWN" => response.to_string(),
            name => name.to_ascii_lowercase(),
        };
        let result = if oneway { "oneway" } else { "success" };
        let h = self.metrics.rpc_latency.with_label_values(&[
            "remoting",
            &req,
            &resp,
            bool_label(long_polling),
            result,
        ]);
        h.observe(ms);
        if known {
            self.rpc.borrow_mut().insert(key, h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_types_follow_rocketmq_precedence() {
        let p = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| format!("{k}\u{1}{v}"))
                .collect::<Vec<_>>()
                .join("\u{2}")
        };
        assert_eq!(message_type(""), MessageType::Normal);
        assert_eq!(message_type(&p(&[("TAGS", "a")])), MessageType::Normal);
        assert_eq!(message_type(&p(&[("DELAY", "3")])), MessageType::Delay);
        assert_eq!(
            message_type(&p(&[("DELAY", "3"), ("__SHARDINGKEY", "k")])),
            MessageType::Fifo
        );
        assert_eq!(
            message_type(&p(&[("__SHARDINGKEY", "k"), ("TRAN_MSG", "true")])),
            MessageType::Transaction
        );
        assert_eq!(
            message_type(&p(&[("TRAN_MSG", "false")])),
            MessageType::Normal
        );
    }

    #[test]
    fn request_path_counters_carry_base_labels_and_rocketmq_code_names() {
        let m = BrokerMetrics::new(BrokerLabels {
            cluster: "C".into(),
            broker_name: "b".into(),
        });
        let r = RequestMeters::new(m.clone());
        r.messages_in("T", MessageType::Normal, 2, 2048);
        r.messages_in("T", MessageType::Normal, 1, 10);
        r.messages_in("TBW102", MessageType::Delay, 1, 10);
        r.messages_out("%RETRY%g", "g", 3, 300);
        r.rpc(10, 0, false, false, Instant::now());
        r.rpc(9999, 0, true, true, Instant::now());
        r.rpc(4242, 0, true, true, Instant::now());
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&m.gather())
            .unwrap();
        for want in [
            r#"rocketmq_messages_in_total{cluster="C",is_system="false",message_type="normal",node_id="b",node_type="broker",topic="T"} 3"#,
            r#"rocketmq_throughput_in_total{cluster="C",is_system="false",message_type="normal",node_id="b",node_type="broker",topic="T"} 2058"#,
            r#"rocketmq_messages_in_total{cluster="C",is_system="true",message_type="delay",node_id="b",node_type="broker",topic="TBW102"} 1"#,
            r#"rocketmq_message_size_bucket{cluster="C",message_type="normal",node_id="b",node_type="broker",topic="T",le="1024"} 3"#,
            r#"rocketmq_messages_out_total{cluster="C",consumer_group="g",is_retry="true",is_system="false",node_id="b",node_type="broker",topic="%RETRY%g"} 3"#,
            r#"request_code="send_message",response_code="success",result="success"} 1"#,
            r#"request_code="unknown",response_code="success",result="oneway"} 2"#,
        ] {
            assert!(
                text.lines().any(|l| l.contains(want)),
                "missing {want} in\n{text}"
            );
        }
    }
}
