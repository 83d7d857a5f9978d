//! The admin request codes (RocketMQ's AdminBrokerProcessor parts that mqadmin, the Dashboard
//! and `actormq admin` use): GET_CONSUME_STATS (208), GET_TOPIC_STATS_INFO (202),
//! GET_CONSUMER_CONNECTION_LIST (203), DELETE_TOPIC_IN_BROKER (215),
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25),
//! INVOKE_BROKER_TO_RESET_OFFSET (222), DELETE_EXPIRED_COMMITLOG (329; not TRIGGER_DELETE_FILES 27,
//! which RocketMQ 4.9.4 refuses as unsupported), GET_PRODUCER_CONNECTION_LIST (204),
//! GET_ALL_PRODUCER_INFO (328), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305),
//! QUERY_TOPIC_CONSUME_BY_WHO (300), GET_BROKER_CONSUME_STATS (317), VIEW_BROKER_STATS_DATA (315),
//! and GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45) (the tables a slave copies);
//! it also routes the codes of [`super::admin_store`] and [`super::client_call`].
//!
//! Also owns the broker's *live* configuration ([`LiveConfig`]): the `Config` in effect, the
//! request-path settings derived from it, and the keys changed at runtime, which are written to
//! `<storePathRootDir>/config/broker.runtime.properties` so a restart keeps them (that file is a
//! configuration layer between the `-c` file and the environment). And the TPS windows
//! ([`Rates`]) and put latencies ([`PutLatency`]) behind `putTps`, `getTransferredTps`,
//! `topicPutTps`, `consumeTps` and `putLatency99`: each connection thread records into its own
//! [`RateSet`]; [`SharedRates`] sums them when they are reported.
//!
//! Invariants: an update is validated as a whole against the running configuration (same rules
//! and messages as at startup) before anything changes; a refused update changes nothing. A
//! reset moves the stored offsets before the online consumers are told, so a consumer that
//! misses the push still restarts from the new offsets.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actormq_core::config::{load_layers, print_config_items, Config, Layer};
use actormq_core::meta::{self, SubscriptionGroupConfig};
use actormq_core::offset::QueueOffset;
use actormq_core::protocol::admin::{
    BrokerStatsData, BrokerStatsItem, ConsumeStats, ConsumeStatsList, GroupList, OffsetWrapper,
    ProducerTableInfo, ResetOffsetBody, TopicOffset, TopicStatsTable,
};
use actormq_core::protocol::body::{parse_java_json, MessageQueue, TopicList};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use actormq_core::protocol::version::{version_desc, V3_0_7_SNAPSHOT};
use actormq_core::store::validate::FORBIDDEN_TOPICS;
use arc_swap::ArcSwap;

use super::clients;
use super::metadata;
use super::processor::{header_or_reply, later, ok, reply, BrokerCore, ProcessorSettings};
use crate::remoting::server::Handled;

/// Keys an `updateBrokerConfig` changes at once; every other key is stored and applies at the
/// next start (the reply's remark lists which).
pub const LIVE_KEYS: &[&str] = &[
    "autoCreateTopicEnable",
    "longPollingEnable",
    "shortPollingTimeMills",
    "waitTimeMillsInSendQueue",
    "brokerFastFailureEnable",
    "rejectTransactionMessage",
    "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInDisk",
    "maxTransferBytesOnMessageInDisk",
    "accessMessageInMemoryMaxRatio",
    "slaveReadEnable",
    "offsetCheckInSlave",
    "maxMsgsNumBatch",
    "defaultQueryMaxNum",
    "brokerPermission",
];

/// The request codes [`BrokerCore::admin`] answers.
pub const ADMIN_CODES: &[i32] = &[
    rq::GET_CONSUME_STATS,
    rq::GET_TOPIC_STATS_INFO,
    rq::GET_CONSUMER_CONNECTION_LIST,
    rq::DELETE_TOPIC_IN_BROKER,
    rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    rq::GET_BROKER_CONFIG,
    rq::UPDATE_BROKER_CONFIG,
    rq::INVOKE_BROKER_TO_RESET_OFFSET,
    rq::DELETE_EXPIRED_COMMITLOG,
    rq::GET_PRODUCER_CONNECTION_LIST,
    rq::GET_ALL_PRODUCER_INFO,
    rq::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    rq::QUERY_TOPIC_CONSUME_BY_WHO,
    rq::GET_BROKER_CONSUME_STATS,
    rq::GET_ALL_CONSUMER_OFFSET,
    rq::GET_ALL_DELAY_OFFSET,
    rq::VIEW_BROKER_STATS_DATA,
    // super::admin_store
    rq::DELETE_SUBSCRIPTIONGROUP,
    rq::CLEAN_EXPIRED_CONSUMEQUEUE,
    rq::CLEAN_UNUSED_TOPIC,
    rq::QUERY_CONSUME_QUEUE,
    // super::client_call
    rq::GET_CONSUMER_RUNNING_INFO,
    rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
    // ACL administration, refused: access control is not enabled (issue #37)
    rq::UPDATE_AND_CREATE_ACL_CONFIG,
    rq::DELETE_ACL_CONFIG,
    rq::GET_BROKER_CLUSTER_ACL_INFO,
    rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    rq::GET_BROKER_CLUSTER_ACL_CONFIG,
];

/// The answer to an ACL administration request on a broker without access control: the failure
/// code 4.9.4 answers with `aclEnable=false` (AdminBrokerProcessor: 209, 210, 211 for the
/// updates; SYSTEM_ERROR for the reads, which 4.9.4 leaves unanswered), with a remark that says
/// why instead of Java's NullPointerException text.
fn acl_disabled(req: &RemotingCommand) -> RemotingCommand {
    let code = match req.code {
        rq::UPDATE_AND_CREATE_ACL_CONFIG => rc::UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
        rq::DELETE_ACL_CONFIG => rc::DELETE_ACL_CONFIG_FAILED,
        rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => rc::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
        _ => rc::SYSTEM_ERROR,
    };
    reply(
        req,
        code,
        "access control is not enabled on this broker (aclEnable=false)",
    )
}

/// RocketMQ 4.9.4 configuration keys that ActorMQ has no setting for, with the value that
/// describes what ActorMQ does. GET_BROKER_CONFIG lists them because mqadmin's exportConfigs
/// (4.9.4 tools/.../command/export/ExportConfigsCommand.needBrokerProprties) copies each into a
/// `Properties`, which throws on a missing one.
pub const FIXED_CONFIG_ITEMS: &[(&str, &str)] = &[
    // No filter servers are started (4.9.4 BrokerConfig default 0).
    ("filterServerNums", "0"),
    // The name clients trace to by default; ActorMQ creates no trace topic itself.
    ("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC"),
    // Every send reply carries TRACE_ON=true (processor.rs, reply.rs).
    ("traceOn", "true"),
    // 4.9.4 would create the trace topic at start; ActorMQ never does.
    ("traceTopicEnable", "false"),
    // The broker's outgoing connections (name servers, master) are plain TCP.
    ("useTLS", "false"),
];

/// [`FIXED_CONFIG_ITEMS`] not already in `listed` (a `key=value` text), as `key=value` lines
/// under their own heading.
fn fixed_config_items(listed: &str) -> String {
    let present = |k: &str| {
        listed
            .lines()
            .any(|l| l.split_once('=').is_some_and(|(lk, _)| lk == k))
    };
    let mut out = String::new();
    for (k, v) in FIXED_CONFIG_ITEMS.iter().filter(|(k, _)| !present(k)) {
        if out.is_empty() {
            out.push_str("\n# Fixed in ActorMQ\n");
        }
        out.push_str(&format!("{k}={v}\n"));
    }
    out
}

/// RocketMQ 4.9.4's system topic set as a broker answers GET_SYSTEM_TOPIC_LIST_FROM_BROKER:
/// common/.../topic/TopicValidator's fixed set plus what broker/.../topic/TopicConfigManager adds
/// at start (the cluster name, the broker name and the cluster's reply topic). Sorted.
pub fn system_topic_list(cluster: &str, broker_name: &str) -> Vec<String> {
    let mut out: Vec<String> = actormq_core::store::validate::SYSTEM_TOPICS
        .iter()
        .map(|t| t.to_string())
        .collect();
    out.extend([
        cluster.to_string(),
        broker_name.to_string(),
        format!("{cluster}_REPLY_TOPIC"),
    ]);
    out.sort();
    out.dedup();
    out
}

/// The file that keeps runtime updates across restarts.
pub const RUNTIME_FILE: &str = "broker.runtime.properties";

/// The configuration in effect and what was changed at runtime.
pub struct LiveConfig {
    config: ArcSwap<Config>,
    settings: Arc<ArcSwap<ProcessorSettings>>,
    runtime_file: PathBuf,
    /// Serialises updates (admin path only) and holds the keys changed so far.
    updates: Mutex<Updates>,
}

struct Updates {
    keys: BTreeMap<String, String>,
    version: meta::DataVersion,
}

impl LiveConfig {
    pub fn new(config: Config, settings: Arc<ArcSwap<ProcessorSettings>>, now_ms: i64) -> Self {
        let runtime_file = config.store.config_dir().join(RUNTIME_FILE);
        // Keys an earlier run stored stay "changed at runtime" so the next update keeps them.
        let keys = std::fs::read(&runtime_file)
            .ok()
            .and_then(|b| {
                Layer::from_properties_str(
                    runtime_file.display().to_string(),
                    &String::from_utf8_lossy(&b),
                )
                .ok()
            })
            .map(|l| {
                l.values
                    .into_iter()
                    .map(|(k, v)| (k, v.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let mut version = meta::DataVersion::default();
        version.next(now_ms);
        LiveConfig {
            config: ArcSwap::from_pointee(config),
            settings,
            runtime_file,
            updates: Mutex::new(Updates { keys, version }),
        }
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Applies `key=value` lines (Java properties). Returns the keys that only apply at the
    /// next start, or the reason nothing was changed.
    pub fn update(&self, body: &str, origin: &str, now_ms: i64) -> Result<Vec<String>, String> {
        let layer = Layer::from_properties_str(origin, body).map_err(|e| e.to_string())?;
        if layer.values.is_empty() {
            return Err("no key=value lines in the request body".into());
        }
        let mut u = self.updates.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.config.load_full();
        let loaded = load_layers(vec![
            Layer::from_strings("running configuration", current.to_properties()),
            layer.clone(),
        ])
        .map_err(|e| e.to_string())?;
        // An update names keys on purpose: a typo or a RocketMQ-only key is an error here, not
        // a warning as in a file.
        if let Some(k) = loaded.unknown.first().or(loaded.unsupported.first()) {
            return Err(format!("{}: {}", k.key, k.hint));
        }
        let new_cfg = loaded.config;
        let new_props = new_cfg.to_properties();
        // Record the canonical spelling of each changed key with its new value.
        let mut restart = Vec::new();
        for key in layer.values.keys() {
            let canonical = new_props
                .keys()
                .find(|k| k.eq_ignore_ascii_case(key))
                .cloned()
                .unwrap_or_else(|| key.clone());
            if let Some(v) = new_props.get(&canonical) {
                u.keys.insert(canonical.clone(), v.clone());
            }
            if !LIVE_KEYS.contains(&canonical.as_str()) {
                restart.push(canonical);
            }
        }
        let text: String = u.keys.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        crate::fsutil::write_atomically(&self.runtime_file, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", self.runtime_file.display()))?;
        let mut settings = ProcessorSettings::from_config(&new_cfg);
        settings.version_desc = self.settings.load().version_desc.clone();
        self.settings.store(Arc::new(settings));
        self.config.store(Arc::new(new_cfg));
        u.version.next(now_ms);
        Ok(restart)
    }

    fn version_json(&self) -> String {
        let u = self.updates.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::to_string(&u.version).unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------------------------
// TPS windows

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

/// Per-key [`Rate`]s, keyed by (a, b): (topic, "") for puts, (group, topic) for gets. Each
/// connection thread records into its own (the mutex is uncontended on the request path; only an
/// admin read takes it from another thread).
#[derive(Default)]
pub struct Rates {
    map: Mutex<HashMap<String, HashMap<String, Rate>>>,
}

impl Rates {
    pub fn add(&self, a: &str, b: &str, n: u64) {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(a) {
            map.insert(a.to_owned(), HashMap::new());
        }
        let inner = map.get_mut(a).expect("inserted above");
        if !inner.contains_key(b) {
            inner.insert(b.to_owned(), Rate::new(now));
        }
        inner.get_mut(b).expect("inserted above").add(n, now);
    }

    /// [`StatsSums`] of (a, b), `b = None` summing every b under a, `a = None` every key; `None`
    /// when no such key was ever counted (RocketMQ: "the stats not exist").
    pub fn sums(&self, a: Option<&str>, b: Option<&str>) -> Option<StatsSums> {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = None;
        let mut add = |r: &mut Rate| add_sums(out.get_or_insert([(0, 0); 3]), r.sums(now));
        // One key is looked up, not searched for: the Dashboard asks per topic every minute.
        let inners: Vec<&mut HashMap<String, Rate>> = match a {
            Some(a) => map.get_mut(a).into_iter().collect(),
            None => map.values_mut().collect(),
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
    pub fn tps(&self, a: &str, b: Option<&str>, slots: usize) -> f64 {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let Some(inner) = map.get_mut(a) else {
            return 0.0;
        };
        match b {
            Some(b) => inner.get_mut(b).map_or(0.0, |r| r.tps(slots, now)),
            // `+ 0.0`: an empty f64 sum is -0.0, which would print as "-0.00".
            None => inner.values_mut().map(|r| r.tps(slots, now)).sum::<f64>() + 0.0,
        }
    }

    /// Sum over every key: the broker total.
    pub fn total_tps(&self, slots: usize) -> f64 {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values_mut()
            .flat_map(|m| m.values_mut())
            .map(|r| r.tps(slots, now))
            .sum::<f64>()
            + 0.0
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers

fn mq(topic: &str, broker: &str, queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.to_string(),
        broker_name: broker.to_string(),
        queue_id,
    }
}

impl BrokerCore {
    /// Answers one of [`ADMIN_CODES`].
    pub fn admin(self: &std::rc::Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        match req.code {
            rq::GET_CONSUME_STATS => self.clone().consume_stats(req),
            rq::GET_TOPIC_STATS_INFO => self.topic_stats(req),
            rq::GET_CONSUMER_CONNECTION_LIST => self.consumer_connection(req),
            rq::DELETE_TOPIC_IN_BROKER => self.clone().delete_topic(req, peer),
            rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => self.update_group(req),
            rq::GET_BROKER_CONFIG => self.get_config(req),
            rq::UPDATE_BROKER_CONFIG => self.update_config(req, peer),
            rq::INVOKE_BROKER_TO_RESET_OFFSET => self.clone().reset_offset(req, peer),
            rq::DELETE_EXPIRED_COMMITLOG => self.trigger_delete_files(req, peer),
            rq::DELETE_SUBSCRIPTIONGROUP => self.clone().delete_group(req, peer),
            rq::CLEAN_EXPIRED_CONSUMEQUEUE => self.clone().clean_expired_cq(req, peer),
            rq::CLEAN_UNUSED_TOPIC => self.clone().clean_unused_topics(req, peer),
            rq::QUERY_CONSUME_QUEUE => self.query_consume_queue(req),
            rq::GET_CONSUMER_RUNNING_INFO => self.clone().consumer_running_info(req),
            rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS => self.clone().consumer_status(req),
            rq::UPDATE_AND_CREATE_ACL_CONFIG
            | rq::DELETE_ACL_CONFIG
            | rq::GET_BROKER_CLUSTER_ACL_INFO
            | rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
            | rq::GET_BROKER_CLUSTER_ACL_CONFIG => Handled::Reply(acl_disabled(&req)),
            rq::GET_PRODUCER_CONNECTION_LIST => self.producer_connection(req),
            rq::GET_ALL_PRODUCER_INFO => self.all_producers(req),
            rq::GET_SYSTEM_TOPIC_LIST_FROM_BROKER => {
                let s = self.settings.load();
                let body = TopicList {
                    broker_addr: None,
                    topic_list: system_topic_list(&s.cluster, &s.broker_name),
                };
                Handled::Reply(match serde_json::to_vec(&body) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                })
            }
            rq::QUERY_TOPIC_CONSUME_BY_WHO => self.topic_consumed_by(req),
            rq::GET_BROKER_CONSUME_STATS => self.clone().broker_consume_stats(req),
            rq::VIEW_BROKER_STATS_DATA => {
                let h = header_or_reply!(ViewBrokerStatsDataRequestHeader, req);
                let cluster = self.settings.load().cluster.clone();
                Handled::Reply(
                    match self.all_rates.stats(&h.stats_name, &h.stats_key, &cluster) {
                        Some(d) => match serde_json::to_vec(&d) {
                            Ok(b) => ok(&req).with_body(b),
                            Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                        },
                        None => reply(
                            &req,
                            rc::SYSTEM_ERROR,
                            format!("The stats <{}> <{}> not exist", h.stats_name, h.stats_key),
                        ),
                    },
                )
            }
            // What a slave copies from its master (RocketMQ's SlaveSynchronize): the tables as
            // their config files hold them.
            rq::GET_ALL_CONSUMER_OFFSET => {
                let meta = self.meta.clone();
                later(async move {
                    match meta.send(metadata::GetOffsets).await {
                        Ok(o) => ok(&req).with_body(meta::to_json(&o).into_bytes()),
                        Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                    }
                })
            }
            rq::GET_ALL_DELAY_OFFSET => {
                let store = self.store.clone();
                later(async move {
                    match store.delay_offsets().await {
                        Some(d) => ok(&req).with_body(d.to_json().into_bytes()),
                        None => reply(&req, rc::SYSTEM_ERROR, "No delay offset in this broker"),
                    }
                })
            }
            code => Handled::Reply(reply(
                &req,
                rc::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            )),
        }
    }

    fn consume_stats(self: std::rc::Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumeStatsRequestHeader, req);
        later(async move {
            let offsets = match self.meta.send(metadata::GetOffsets).await {
                Ok(o) => o,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            let group = h.consumer_group.as_str();
            let mut topics: Vec<String> = match h.topic.as_deref().filter(|t| !t.is_empty()) {
                Some(t) => vec![t.to_string()],
                None => offsets
                    .offset_table
                    .keys()
                    .filter_map(|k| k.rsplit_once('@'))
                    .filter(|(_, g)| *g == group)
                    .map(|(t, _)| t.to_string())
                    .collect(),
            };
            // As in RocketMQ: a group with online subscriptions reports only those topics.
            let subscribed: Vec<String> = match self
                .clients
                .send(clients::GetGroupConnection(group.to_string()))
                .await
            {
                Ok(Some(c)) => c.subscription_table.into_keys().collect(),
                _ => Vec::new(),
            };
            if !subscribed.is_empty() {
                topics.retain(|t| subscribed.contains(t));
                if h.topic.is_none() {
                    for t in subscribed {
                        if !topics.contains(&t) {
                            topics.push(t);
                        }
                    }
                }
            }
            topics.sort();
            let broker = self.settings.load().broker_name.clone();
            let mut stats = ConsumeStats::default();
            for topic in &topics {
                let Some(tc) = self.meta_view.topic(topic) else {
                    continue;
                };
                for q in 0..tc.read_queue_nums as i32 {
                    let o = self.offset_wrapper(&offsets, group, topic, q);
                    stats.offset_table.push((mq(topic, &broker, q), o));
                }
                stats.consume_tps += self.all_rates.group_get_tps(group, topic);
            }
            ok(&req).with_body(stats.to_java_json().into_bytes())
        })
    }

    fn topic_stats(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetTopicStatsInfoRequestHeader, req);
        let Some(tc) = self.meta_view.topic(&h.topic) else {
            return Handled::Reply(reply(
                &req,
                rc::TOPIC_NOT_EXIST,
                format!("topic[{}] not exist", h.topic),
            ));
        };
        let broker = self.settings.load().broker_name.clone();
        let queues = tc.read_queue_nums.max(tc.write_queue_nums) as i32;
        let mut t = TopicStatsTable {
            topic_put_tps: self.all_rates.topic_put_tps(&h.topic),
            ..Default::default()
        };
        for q in 0..queues {
            let min = self.reader.min_offset(&h.topic, q).0 as i64;
            let max = self.reader.max_offset(&h.topic, q).0 as i64;
            let last = if max > 0 {
                self.reader
                    .store_time_at_queue_offset(&h.topic, q, QueueOffset(max as u64 - 1))
                    .unwrap_or(0)
            } else {
                0
            };
            t.offset_table.push((
                mq(&h.topic, &broker, q),
                TopicOffset {
                    last_update_timestamp: last,
                    max_offset: max,
                    min_offset: min,
                },
            ));
        }
        Handled::Reply(ok(&req).with_body(t.to_java_json().into_bytes()))
    }

    /// One queue of a group as GET_CONSUME_STATS reports it: the broker's and the group's
    /// offsets and the store time of the last message the group consumed.
    fn offset_wrapper(
        &self,
        offsets: &meta::ConsumerOffsets,
        group: &str,
        topic: &str,
        q: i32,
    ) -> OffsetWrapper {
        let broker_offset = self.reader.max_offset(topic, q).0 as i64;
        let consumer_offset = offsets.get(topic, group, q).unwrap_or(0).max(0);
        let last_timestamp = match consumer_offset {
            0 => 0,
            c => self
                .reader
                .store_time_at_queue_offset(topic, q, QueueOffset(c as u64 - 1))
                .unwrap_or(0),
        };
        OffsetWrapper {
            broker_offset,
            consumer_offset,
            last_timestamp,
            pull_offset: consumer_offset,
        }
    }

    fn producer_connection(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetProducerConnectionListRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            match clients
                .send(clients::GetProducerConnection(h.producer_group.clone()))
                .await
            {
                Ok(Some(p)) => match serde_json::to_vec(&p) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                },
                // RocketMQ's code and words for a group with no online producer.
                Ok(None) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("the producer group[{}] not exist", h.producer_group),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// Every producer connection by group (`mqadmin producer`), as 4.9.4's
    /// AdminBrokerProcessor.getAllProducerInfo: SUCCESS with an empty table when none is online.
    fn all_producers(&self, req: RemotingCommand) -> Handled {
        let clients = self.clients.clone();
        let now_ms = self.clock_ms();
        later(async move {
            match clients.send(clients::GetAllProducers { now_ms }).await {
                Ok(data) => match serde_json::to_vec(&ProducerTableInfo { data }) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                },
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// Groups with an online consumer subscribed to the topic, and groups with a stored offset
    /// for it (RocketMQ's answer: `topicList -c` lists them).
    fn topic_consumed_by(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(QueryTopicConsumeByWhoRequestHeader, req);
        let meta = self.meta.clone();
        let online = self.subs.groups_of_topic(&h.topic);
        later(async move {
            let stored = match meta.send(metadata::GroupsOfTopic(h.topic.clone())).await {
                Ok(g) => g,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            let mut groups = GroupList::default();
            groups.group_list.extend(online);
            groups.group_list.extend(stored);
            match serde_json::to_vec(&groups) {
                Ok(b) => ok(&req).with_body(b),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// Every subscription group's consume stats on this broker (`brokerConsumeStats`), as
    /// RocketMQ's `fetchAllConsumeStatsInBroker`: per group, each topic it has offsets for that
    /// still exists (with `isOrder`, only ordered ones; with online consumers, only topics they
    /// subscribe to), every write queue's broker and consumer offsets, and Σ of the diffs.
    fn broker_consume_stats(self: std::rc::Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumeStatsInBrokerHeader, req);
        later(async move {
            let offsets = match self.meta.send(metadata::GetOffsets).await {
                Ok(o) => o,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (t, g) in offsets
                .offset_table
                .keys()
                .filter_map(|k| k.rsplit_once('@'))
            {
                by_group.entry(g).or_default().push(t);
            }
            let broker = self.settings.load().broker_name.clone();
            let mut list = ConsumeStatsList {
                broker_addr: self.store_host.to_string(),
                ..Default::default()
            };
            for group in self.meta_view.groups().subscription_group_table.keys() {
                let mut per_topic = Vec::new();
                let topics = by_group.get(group.as_str()).cloned().unwrap_or_default();
                for topic in topics {
                    let Some(tc) = self.meta_view.topic(topic) else {
                        continue;
                    };
                    if h.is_order && !tc.order {
                        continue;
                    }
                    if self.subs.get(group, topic).is_none() && self.subs.has_group(group) {
                        continue;
                    }
                    let mut stats = ConsumeStats::default();
                    // RocketMQ counts write queues here (and read queues in GET_CONSUME_STATS).
                    for q in 0..tc.write_queue_nums as i32 {
                        let o = self.offset_wrapper(&offsets, group, topic, q);
                        stats.offset_table.push((mq(topic, &broker, q), o));
                    }
                    stats.consume_tps = self.all_rates.group_get_tps(group, topic);
                    list.total_diff += stats.total_diff();
                    per_topic.push(stats);
                }
                list.consume_stats_list.push((group.clone(), per_topic));
            }
            ok(&req).with_body(list.to_java_json().into_bytes())
        })
    }

    fn consumer_connection(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumerConnectionListRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            match clients
                .send(clients::GetGroupConnection(h.consumer_group.clone()))
                .await
            {
                Ok(Some(c)) if !c.connection_set.is_empty() => match serde_json::to_vec(&c) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                },
                Ok(_) => reply(
                    &req,
                    rc::CONSUMER_NOT_ONLINE,
                    format!("the consumer group[{}] not online", h.consumer_group),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    fn delete_topic(self: std::rc::Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        let h = header_or_reply!(DeleteTopicRequestHeader, req);
        let topic = h.topic.trim().to_string();
        if topic.is_empty() {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                "The specified topic is blank.",
            ));
        }
        if is_system_topic(&topic) {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                format!("The topic[{topic}] is conflict with system topic."),
            ));
        }
        tracing::info!(%topic, caller = %peer, "deleting topic");
        later(async move {
            let existed = match self.meta.send(metadata::DeleteTopic(topic.clone())).await {
                Ok(Ok(e)) => e,
                Ok(Err(e)) => {
                    return reply(
                        &req,
                        rc::SYSTEM_ERROR,
                        format!("cannot write topics.json: {e}"),
                    )
                }
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            match self.store.delete_topic(&topic).await {
                Ok(queues) => {
                    tracing::info!(%topic, existed, queues, "topic deleted");
                    ok(&req)
                }
                Err(e) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("topic {topic} removed from topics.json but its queues not: {e}"),
                ),
            }
        })
    }

    /// mqadmin `deleteExpiredCommitLog`: the next 20 retention rounds delete expired files
    /// whatever the hour and disk usage (RocketMQ's `executeDeleteFilesManually`).
    fn trigger_delete_files(&self, req: RemotingCommand, peer: &str) -> Handled {
        if self.store.trigger_delete_files() {
            tracing::info!(
                peer,
                "deleteExpiredCommitLog: expired files go in the next retention rounds"
            );
            Handled::Reply(ok(&req))
        } else {
            Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                "retention is not running in this broker",
            ))
        }
    }

    fn update_group(&self, req: RemotingCommand) -> Handled {
        let g: SubscriptionGroupConfig = match parse_java_json(&req.body) {
            Ok(g) => g,
            Err(e) => {
                return Handled::Reply(reply(
                    &req,
                    rc::INVALID_PARAMETER,
                    format!("invalid SubscriptionGroupConfig body: {e}"),
                ))
            }
        };
        if g.group_name.trim().is_empty() {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                "the group name (groupName) is blank",
            ));
        }
        if let Err(e) = actormq_core::store::validate::check_topic_name(&g.group_name) {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                format!("invalid group name: {}", e.remark.replace("topic", "group")),
            ));
        }
        if g.retry_queue_nums > 1024 {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                format!("retryQueueNums {} is over 1024", g.retry_queue_nums),
            ));
        }
        let meta = self.meta.clone();
        later(async move {
            let name = g.group_name.clone();
            let retry = meta::retry_topic(&name);
            let queues = g.retry_queue_nums.max(1);
            match meta.send(metadata::UpdateGroup(g)).await {
                Ok(Ok(())) => {
                    let m = metadata::EnsureTopic {
                        topic: retry,
                        queues,
                        perm: meta::PERM_READ | meta::PERM_WRITE,
                    };
                    let _ = meta.send(m).await;
                    ok(&req)
                }
                Ok(Err(e)) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("cannot write subscriptionGroup.json: {e}"),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    fn get_config(&self, req: RemotingCommand) -> Handled {
        let mut text = print_config_items(&self.live.config(), false);
        text.push_str(&fixed_config_items(&text));
        let hdr = GetBrokerConfigResponseHeader {
            version: self.live.version_json(),
        };
        Handled::Reply(
            ok(&req)
                .with_ext_fields(hdr.to_ext_fields())
                .with_body(text.into_bytes()),
        )
    }

    fn update_config(&self, req: RemotingCommand, peer: &str) -> Handled {
        let body = match std::str::from_utf8(&req.body) {
            Ok(b) => b.to_string(),
            Err(_) => {
                return Handled::Reply(reply(
                    &req,
                    rc::INVALID_PARAMETER,
                    "the body is not UTF-8 key=value lines",
                ))
            }
        };
        let origin = format!("updateBrokerConfig from {peer}");
        let (live, now, peer) = (self.live.clone(), self.clock_ms(), peer.to_string());
        let meta = self.meta.clone();
        later(async move {
            // Validation and the fsync of the runtime file run on the blocking pool, never on
            // the connection thread.
            let update = {
                let body = body.clone();
                tokio::task::spawn_blocking(move || live.update(&body, &origin, now)).await
            };
            match update {
                Ok(Ok(restart)) => {
                    tracing::info!(caller = %peer, update = %body.trim().replace('\n', ", "), "broker configuration updated");
                    let perm_changed = body.lines().any(|l| {
                        l.split(['=', ':'])
                            .next()
                            .is_some_and(|k| k.trim().eq_ignore_ascii_case("brokerPermission"))
                    });
                    if perm_changed {
                        // As RocketMQ: a new topic-table version, registered at once, so the
                        // name servers take the topics' new perms.
                        match meta.send(metadata::TouchTopics).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                tracing::error!(error = %e, "cannot write topics.json after a brokerPermission change")
                            }
                            Err(e) => {
                                tracing::error!(error = %e, "metadata unavailable after a brokerPermission change")
                            }
                        }
                    }
                    if restart.is_empty() {
                        ok(&req)
                    } else {
                        RemotingCommand::response_to(
                            &req,
                            rc::SUCCESS,
                            Some(format!(
                                "stored; takes effect at the next start: {}",
                                restart.join(", ")
                            )),
                        )
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(caller = %peer, error = %e, "broker configuration update refused");
                    reply(&req, rc::INVALID_PARAMETER, e)
                }
                Err(e) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("configuration update failed: {e}"),
                ),
            }
        })
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET, as 4.9.4's Broker2Client.resetOffset answers it: SYSTEM_ERROR
    /// for a topic this broker lacks or a group without an offset in one of the topic's write
    /// queues (existence is the offsets', not the subscription group's: a group made by
    /// cloneGroupOffset is reset too); per queue the offset at the timestamp (the queue's end for
    /// -1, 0 if negative), kept where the group already is unless that is forwards or `isForce`;
    /// CONSUMER_NOT_ONLINE (206) with no consumer of the group online, and then nothing changes
    /// (mqadmin falls back to its own UPDATE_CONSUMER_OFFSET reset); SYSTEM_ERROR if a consumer
    /// predates V3_0_7_SNAPSHOT. Otherwise RESET_CONSUMER_CLIENT_OFFSET goes one-way to every
    /// consumer (`ResetOffsetBodyForC` when the caller speaks CPP) and the answer carries the
    /// table. Unlike 4.9.4, which leaves the stored offsets to the consumers' next commit, the
    /// offsets are stored first (the module's invariant). A 5.x-style `queueId` with `offset`
    /// resets that one queue to that offset.
    fn reset_offset(self: std::rc::Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        let h = header_or_reply!(ResetOffsetRequestHeader, req);
        let Some(tc) = self.meta_view.topic(&h.topic) else {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!(
                    "[reset-offset] reset offset failed, no topic in this broker. topic={}",
                    h.topic
                ),
            ));
        };
        let queues: Vec<i32> = if h.queue_id >= 0 {
            vec![h.queue_id]
        } else {
            (0..tc.write_queue_nums as i32).collect()
        };
        let for_c = req.language == actormq_core::protocol::command::LanguageCode::Cpp;
        tracing::info!(topic = %h.topic, group = %h.group, timestamp = h.timestamp, force = h.is_force, caller = %peer, "resetting consumer offsets");
        later(async move {
            let offsets = match self.meta.send(metadata::GetOffsets).await {
                Ok(o) => o,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            let broker = self.settings.load().broker_name.clone();
            let mut body = ResetOffsetBody::default();
            for q in queues {
                let Some(current) = offsets.get(&h.topic, &h.group, q) else {
                    return reply(
                        &req,
                        rc::SYSTEM_ERROR,
                        format!("THe consumer group <{}> not exist", h.group),
                    );
                };
                let max = self.reader.max_offset(&h.topic, q).0 as i64;
                let target = match h.offset.filter(|o| *o >= 0 && h.queue_id >= 0) {
                    Some(o) => {
                        let min = self.reader.min_offset(&h.topic, q).0 as i64;
                        if o < min || o > max {
                            return reply(
                                &req,
                                rc::SYSTEM_ERROR,
                                format!(
                                    "Target offset {o} not in consume queue range [{min}-{max}]"
                                ),
                            );
                        }
                        o
                    }
                    None if h.timestamp == -1 => max,
                    None => self.reader.offset_by_time(&h.topic, q, h.timestamp).0 as i64,
                };
                // Never moves a group forwards past where it is, unless forced.
                let target = target.max(0);
                let offset = if h.is_force || target < current {
                    target
                } else {
                    current
                };
                body.offset_table.push((mq(&h.topic, &broker, q), offset));
            }
            let versions = self
                .clients
                .send(clients::ConsumerVersions {
                    group: h.group.clone(),
                })
                .await
                .unwrap_or_default();
            if versions.is_empty() {
                let e = format!(
                    "Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}",
                    h.group, h.topic, h.timestamp
                );
                tracing::warn!("{e}");
                return reply(&req, rc::CONSUMER_NOT_ONLINE, e);
            }
            if let Some(old) = versions.into_iter().find(|v| *v < V3_0_7_SNAPSHOT) {
                return reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!(
                        "the client does not support this feature. version={}",
                        version_desc(old)
                    ),
                );
            }
            for (mq, offset) in &body.offset_table {
                let m = metadata::CommitOffset {
                    group: h.group.clone(),
                    topic: h.topic.clone(),
                    queue_id: mq.queue_id,
                    offset: *offset,
                };
                if let Err(e) = self.meta.send(m).await {
                    return reply(&req, rc::SYSTEM_ERROR, e.to_string());
                }
            }
            let json = body.to_java_json();
            let push_body = if for_c {
                body.to_java_json_for_c()
            } else {
                json.clone()
            };
            let push = RemotingCommand::new_request(rq::RESET_CONSUMER_CLIENT_OFFSET)
                .with_ext_fields(
                    ResetOffsetRequestHeader {
                        offset: None,
                        queue_id: -1,
                        is_force: false,
                        ..h.clone()
                    }
                    .to_ext_fields(),
                )
                .with_body(push_body.into_bytes())
                .with_oneway();
            let told = self
                .clients
                .send(clients::PushToGroup {
                    group: h.group.clone(),
                    cmd: push,
                })
                .await
                .unwrap_or(0);
            tracing::info!(topic = %h.topic, group = %h.group, queues = body.offset_table.len(), consumers_told = told, "consumer offsets reset");
            ok(&req).with_body(json.into_bytes())
        })
    }

    fn clock_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// Topics the broker owns: never deleted by an admin.
fn is_system_topic(topic: &str) -> bool {
    FORBIDDEN_TOPICS.contains(&topic)
        || topic == meta::AUTO_CREATE_TOPIC
        || topic.starts_with("rmq_sys_")
        || topic.starts_with("RMQ_SYS_")
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

/// Time from a SEND's arrival to its reply (stored, and flushed in SYNC_FLUSH), for the runtime
/// keys `putLatency99`, `putLatency999` and `putMessageEntireTimeMax` (`putMessageDistributeTime`,
/// the last minute's, is [`super::store_stats::StoreStats`]').
pub struct PutLatency(Mutex<hdrhistogram::Histogram<u64>>);

impl Default for PutLatency {
    fn default() -> Self {
        // Microseconds up to an hour, 2 significant digits: ~10 KiB, constant-time record.
        PutLatency(Mutex::new(
            hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid bounds"),
        ))
    }
}

impl PutLatency {
    pub fn record(&self, d: Duration) {
        let us = (d.as_micros() as u64).max(1);
        let _ = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(us.min(3_600_000_000));
    }

    /// Records several latencies under one lock (a batch of SENDs).
    pub fn record_each(&self, ds: impl Iterator<Item = Duration>) {
        let mut h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for d in ds {
            let _ = h.record((d.as_micros() as u64).clamp(1, 3_600_000_000));
        }
    }

    fn add_to(&self, into: &mut hdrhistogram::Histogram<u64>) {
        let _ = into.add(&*self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The runtime keys, in RocketMQ's units (milliseconds).
    pub fn fill(&self, t: &mut BTreeMap<String, String>) {
        let h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        fill_latency(&h, t);
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

/// Every connection thread's [`RateSet`], for the figures that report the broker as a whole.
#[derive(Default)]
pub struct SharedRates {
    threads: Mutex<Vec<Arc<RateSet>>>,
}

impl SharedRates {
    /// A new thread's own set, registered for the totals.
    pub fn for_thread(&self) -> Arc<RateSet> {
        let r = Arc::new(RateSet::default());
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r.clone());
        r
    }

    fn each(&self) -> Vec<Arc<RateSet>> {
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Put TPS of a topic over the last 10 s.
    pub fn topic_put_tps(&self, topic: &str) -> f64 {
        self.each()
            .iter()
            .map(|r| r.put.tps(topic, None, 1))
            .sum::<f64>()
            + 0.0
    }

    /// VIEW_BROKER_STATS_DATA: the stats item `name` of `key`, over every thread; `None` when it
    /// does not exist (an unknown name, or nothing counted for the key yet). `cluster` is the
    /// key of the broker-wide items, as in RocketMQ.
    pub fn stats(&self, name: &str, key: &str, cluster: &str) -> Option<BrokerStatsData> {
        let each = self.each();
        let sums = |pick: &dyn Fn(&RateSet) -> Option<StatsSums>| {
            each.iter().filter_map(|r| pick(r)).reduce(|mut a, b| {
                add_sums(&mut a, b);
                a
            })
        };
        let s = match name {
            "TOPIC_PUT_NUMS" => sums(&|r| r.put.sums(Some(key), None)),
            "GROUP_GET_NUMS" => {
                let (topic, group) = key.split_once('@')?;
                sums(&|r| r.get.sums(Some(group), Some(topic)))
            }
            "BROKER_PUT_NUMS" if key == cluster => sums(&|r| r.put.sums(None, None)),
            "BROKER_GET_NUMS" if key == cluster => sums(&|r| r.get.sums(None, None)),
            _ => None,
        }?;
        Some(BrokerStatsData {
            stats_minute: BrokerStatsItem::of(s[0].0, s[0].1, 60.0),
            stats_hour: BrokerStatsItem::of(s[1].0, s[1].1, 3_600.0),
            stats_day: BrokerStatsItem::of(s[2].0, s[2].1, 86_400.0),
        })
    }

    /// Get TPS of (group, topic) over the last minute (RocketMQ's `tpsGroupGetNums`, the
    /// `consumeTps` of GET_CONSUME_STATS and GET_BROKER_CONSUME_STATS).
    pub fn group_get_tps(&self, group: &str, topic: &str) -> f64 {
        self.each()
            .iter()
            .map(|r| r.get.tps(group, Some(topic), 6))
            .sum::<f64>()
            + 0.0
    }

    /// RocketMQ's `"%.2f %.2f %.2f"` of the whole broker's 10 s, 1 min and 10 min TPS.
    pub fn java_tps_string(&self, gets: bool) -> String {
        let each = self.each();
        let total = |slots: usize| {
            each.iter()
                .map(|r| {
                    if gets {
                        r.get.total_tps(slots)
                    } else {
                        r.put.total_tps(slots)
                    }
                })
                .sum::<f64>()
                + 0.0
        };
        format!("{:.2} {:.2} {:.2}", total(1), total(6), total(59))
    }

    /// `putLatency99`, … over every thread's SENDs.
    pub fn fill_put_latency(&self, t: &mut BTreeMap<String, String>) {
        let mut all = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 2)
            .expect("valid bounds");
        for r in self.each() {
            r.put_latency.add_to(&mut all);
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
        let p = PutLatency::default();
        for ms in [1u64, 2, 3, 20, 700] {
            p.record(Duration::from_millis(ms));
        }
        let mut t = BTreeMap::new();
        p.fill(&mut t);
        assert_eq!(t["putMessageEntireTimeMax"], "700");
    }

    #[test]
    fn system_topics_are_protected() {
        assert!(is_system_topic("TBW102"));
        assert!(is_system_topic("SCHEDULE_TOPIC_XXXX"));
        assert!(!is_system_topic("orders"));
    }
}
