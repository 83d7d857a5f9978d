//! `BrokerProcessor` — what the broker answers on its remoting port (RocketMQ's
//! SendMessageProcessor, PullMessageProcessor, QueryMessageProcessor, ClientManageProcessor,
//! ConsumerManageProcessor and the parts of AdminBrokerProcessor clients use).
//!
//! One `BrokerProcessor` per connection thread, built by [`BrokerProcessorFactory`]: what every
//! thread shares (store, actor refs, views, settings, [`Stats`]) is `Send + Sync` and cloned
//! into each thread's [`BrokerCore`]; the [`SendBatcher`] and the metric caches are per thread.
//! Called by each connection actor with one request at a time; answers directly from lock-free
//! views (store reader, metadata and subscription snapshots) where it can, and otherwise returns a
//! future that talks to the owning actor (CommitLog writer, Metadata, ClientRegistry, PullHold).
//! Every refusal carries a remark that says what was wrong and which limit applies.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq_core::format::java_order::{java_order, Op};
use actormq_core::format::msg_id::offset_msg_id;
use actormq_core::format::properties::{self, keys};
use actormq_core::format::record::{self, body_crc, sys_flag, Check, NewMessage};
use actormq_core::meta::{self, TopicConfig, PERM_READ, PERM_WRITE};
use actormq_core::offset::{PhyOffset, QueueOffset};
use actormq_core::protocol::batch::decode_batch;
use actormq_core::protocol::body::{
    parse_java_json, to_json_bytes, ConsumerListBody, HeartbeatData, KvTable, LockBatchRequestBody,
    LockBatchResponseBody, MessageQueue, OffsetMovedEvent, UnlockBatchRequestBody,
};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::faq;
use actormq_core::protocol::header::*;
use actormq_core::store::commit_log::AppendOk;
use actormq_core::store::reader::{GetLimits, GetStatus, StoreReader, TagFilter};
use actormq_core::store::status::{PutError, PutStatus};
use actormq_core::store::validate::{check_send_topic, check_topic_name};
use arc_swap::ArcSwap;
use bytes::{BufMut, BytesMut};

use super::clients::{self, ClientRegistry, SubscriptionView};
use super::metadata::{self, MetaView, Metadata};
use super::pull_hold::{hold, PullHold, SuspendPull, LONG_POLLING_RECHECK};
use crate::metered::ActorRef;
use crate::remoting::server::{ConnInfo, Handled, Processor, ProcessorFactory, Replied};
use crate::store::coalesce::{end_of_turn, send_chunks, TurnBatch};
use crate::store::Store;

/// Broker settings the request handling needs (from `BrokerConfig`/`StoreConfig`).
#[derive(Clone, Debug)]
pub struct ProcessorSettings {
    pub cluster: String,
    pub broker_name: String,
    pub auto_create_topic: bool,
    pub long_polling: bool,
    pub short_polling: Duration,
    pub wait_time_in_send_queue: Duration,
    /// `osPageCacheBusyTimeOutMills`: a writer busy with one request longer than this refuses
    /// sends (SYSTEM_BUSY) until it is done.
    pub os_page_cache_busy: Duration,
    /// `brokerPermission` (PermName bits): without WRITE sends are refused, without READ pulls;
    /// the registrations carry it as every topic's perm (see `broker::with_broker_permission`).
    pub broker_perm: u32,
    pub fast_failure: bool,
    pub reject_transaction: bool,
    pub max_transfer_count: usize,
    pub max_transfer_bytes: usize,
    pub max_transfer_count_on_disk: usize,
    pub max_transfer_bytes_on_disk: usize,
    /// `accessMessageInMemoryMaxRatio` % of physical memory: how far behind the CommitLog's end
    /// a record still counts as in the page cache.
    pub hot_bytes: u64,
    /// `slaveReadEnable`: PULL answers name the broker to read from next (a slave for a consumer
    /// far behind); without it they always name the master.
    pub slave_read_enable: bool,
    /// `offsetCheckInSlave`: whether a slave corrects a consumer's offset, as a master does.
    pub offset_check_in_slave: bool,
    pub max_msgs_num_batch: usize,
    pub default_query_max_num: usize,
    pub version_desc: String,
}

impl ProcessorSettings {
    /// The request-path settings of a configuration (also rebuilt by `updateBrokerConfig`).
    pub fn from_config(cfg: &actormq_core::config::Config) -> ProcessorSettings {
        let (b, sc) = (&cfg.broker, &cfg.store);
        ProcessorSettings {
            cluster: b.broker_cluster_name.clone(),
            broker_name: b.broker_name.clone(),
            auto_create_topic: b.auto_create_topic_enable,
            long_polling: b.long_polling_enable,
            short_polling: Duration::from_millis(b.short_polling_time_ms),
            wait_time_in_send_queue: Duration::from_millis(b.wait_time_ms_in_send_queue),
            os_page_cache_busy: Duration::from_millis(sc.os_page_cache_busy_timeout_ms),
            broker_perm: b.broker_permission,
            fast_failure: b.broker_fast_failure_enable,
            reject_transaction: b.reject_transaction_message,
            max_transfer_count: sc.max_transfer_count_on_message_in_memory as usize,
            max_transfer_bytes: sc.max_transfer_bytes_on_message_in_memory as usize,
            max_transfer_count_on_disk: sc.max_transfer_count_on_message_in_disk as usize,
            max_transfer_bytes_on_disk: sc.max_transfer_bytes_on_message_in_disk as usize,
            hot_bytes: physical_memory().map_or(u64::MAX, |m| {
                m / 100 * u64::from(sc.access_message_in_memory_max_ratio)
            }),
            slave_read_enable: b.slave_read_enable,
            offset_check_in_slave: sc.offset_check_in_slave,
            max_msgs_num_batch: sc.max_msgs_num_batch as usize,
            default_query_max_num: sc.default_query_max_num as usize,
            version_desc: format!("ActorMQ {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// The memory this broker may use, in bytes (RocketMQ's `TOTAL_PHYSICAL_MEMORY_SIZE`): the
/// machine's, or the container's limit where that is lower (a JVM with container support reads
/// the same), `None` where the kernel says neither: then every record counts as in memory, as on
/// a store smaller than its share.
fn physical_memory() -> Option<u64> {
    // SAFETY: sysinfo only writes the zeroed struct it is given.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    let machine = (unsafe { libc::sysinfo(&mut info) } == 0)
        .then(|| (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1))));
    // cgroup v2, else v1, as a container sees its own hierarchy; "max" or an absurd v1 value
    // means no limit.
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok());
    match (machine, limit) {
        (Some(m), Some(l)) => Some(m.min(l)),
        (m, l) => m.or(l),
    }
}

/// Coalesces the SENDs that arrive in one turn of a connection thread into one `AppendBatch`
/// writer message: one mailbox hop and one thread wake-up for many messages instead of one each
/// (a [`TurnBatch`]). A SEND waits at most one scheduler turn for company. The batch's accounting
/// (counters, TPS, put latency, `/metrics`) is done here once per run of one topic, not once per
/// message.
#[derive(Default)]
pub struct SendBatcher(TurnBatch<PendingSend>);

type PutReply = tokio::sync::oneshot::Receiver<Result<AppendOk, PutError>>;

struct PendingSend {
    msg: NewMessage,
    kind: crate::metrics::MessageType,
    arrived: Instant,
    tx: tokio::sync::oneshot::Sender<Result<AppendOk, PutError>>,
}

impl SendBatcher {
    /// Queues `msg` for this turn's batch; its result arrives on the returned receiver (closed
    /// without a value only if the broker stops first).
    fn enqueue(
        core: &Rc<BrokerCore>,
        msg: NewMessage,
        kind: crate::metrics::MessageType,
        arrived: Instant,
    ) -> PutReply {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let first = core.batcher.0.push(PendingSend {
            msg,
            kind,
            arrived,
            tx,
        });
        if first {
            let core = core.clone();
            actix_rt::spawn(async move {
                // One turn of the thread: SENDs decoded from other sockets in this turn join in.
                end_of_turn().await;
                // Only SYNC_FLUSH and SYNC_MASTER answer later (after a flush, a slave's ack):
                // otherwise nothing is split.
                let sync = core.store.params().answers_later();
                let waits = |p: &PendingSend| !sync || crate::store::writer::waits(&p.msg);
                send_chunks(core.batcher.0.take(), waits, |chunk| core.put_batch(chunk)).await;
            });
        }
        rx
    }
}

impl BrokerCore {
    /// Stores one batch of single-message SENDs, accounts for what was stored and answers each.
    async fn put_batch(&self, batch: Vec<PendingSend>) {
        let mut msgs = Vec::with_capacity(batch.len());
        let mut rest = Vec::with_capacity(batch.len());
        for p in batch {
            rest.push((p.kind, p.arrived, p.msg.body.len() as u64, p.tx));
            msgs.push(p.msg);
        }
        // Runs of one topic and kind, for accounting once per run: (topic, first index).
        let mut runs: Vec<(String, usize)> = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            let same = i > 0
                && runs.last().is_some_and(|(t, _)| *t == m.topic)
                && rest.get(i - 1).map(|r| r.0) == rest.get(i).map(|r| r.0);
            if !same {
                runs.push((m.topic.clone(), i));
            }
        }
        let results = self.store.put_many(msgs).await;
        let now = Instant::now();
        let (mut stored, mut wrote, mut failed) = (0, 0, 0);
        for r in &results {
            match r {
                Ok(ok) => {
                    stored += u64::from(ok.msg_num);
                    wrote += ok.wrote_bytes;
                }
                Err(_) => failed += 1,
            }
        }
        self.stats.store.record_put(stored, wrote);
        self.stats.store.record_put_failed(failed);
        let mut sizes = Vec::new();
        for (r, (topic, start)) in runs.iter().enumerate() {
            let end = runs.get(r + 1).map_or(results.len(), |n| n.1);
            sizes.clear();
            let items = results.get(*start..end).unwrap_or_default();
            let meta = rest.get(*start..end).unwrap_or_default();
            for (res, m) in items.iter().zip(meta) {
                if res.is_ok() {
                    sizes.push(m.2);
                }
            }
            let Some(kind) = meta.first().map(|m| m.0) else {
                continue;
            };
            if sizes.is_empty() {
                continue;
            }
            let (n, bytes) = (sizes.len() as u64, sizes.iter().sum::<u64>());
            Stats::add(&self.stats.put_msgs, n);
            Stats::add(&self.stats.put_bytes, bytes);
            self.rates.put.add(topic, "", n);
            self.metrics.messages_in_sizes(topic, kind, &sizes);
        }
        self.rates.put_latency.record_each(
            results
                .iter()
                .zip(&rest)
                .filter(|(res, _)| res.is_ok())
                .map(|(_, m)| now.saturating_duration_since(m.1)),
        );
        for (res, m) in results.iter().zip(&rest) {
            if res.is_ok() {
                self.stats
                    .store
                    .record_put_time_at(now, now.saturating_duration_since(m.1));
            }
        }
        for (res, m) in results.into_iter().zip(rest) {
            let _ = m.3.send(res);
        }
    }
}

/// The request path's state on one connection thread.
pub struct BrokerCore {
    /// This thread's batcher: SENDs of one turn of this thread become one `AppendBatch`.
    pub batcher: Rc<SendBatcher>,
    pub store: Arc<Store>,
    pub reader: StoreReader,
    pub meta: ActorRef<Metadata>,
    pub meta_view: MetaView,
    pub clients: ActorRef<ClientRegistry>,
    pub subs: SubscriptionView,
    pub pull_hold: ActorRef<PullHold>,
    /// Swapped as a whole by `updateBrokerConfig` ([`super::admin::LiveConfig`]).
    pub settings: Arc<ArcSwap<ProcessorSettings>>,
    pub live: Arc<super::admin::LiveConfig>,
    /// This thread's put/get TPS windows and put latencies (recorded without contention)…
    pub rates: Arc<super::admin::RateSet>,
    /// …and every thread's, summed when a runtime key or admin body reports them.
    pub all_rates: Arc<super::admin::SharedRates>,
    /// `brokerIP1:listenPort`: written into every record and msgId.
    pub store_host: SocketAddr,
    pub boot_ms: i64,
    /// Shared by every connection thread.
    pub stats: Arc<Stats>,
    /// `/metrics` counters of the request path (messages and bytes in and out, RPC latency),
    /// through this thread's cache of labelled children.
    pub metrics: Rc<crate::metrics::RequestMeters>,
}

/// What every connection thread's [`BrokerCore`] is built from (`Send + Sync`).
pub struct BrokerProcessorFactory {
    pub store: Arc<Store>,
    pub reader: StoreReader,
    pub meta: ActorRef<Metadata>,
    pub meta_view: MetaView,
    pub clients: ActorRef<ClientRegistry>,
    pub subs: SubscriptionView,
    pub pull_hold: ActorRef<PullHold>,
    pub settings: Arc<ArcSwap<ProcessorSettings>>,
    pub live: Arc<super::admin::LiveConfig>,
    pub rates: Arc<super::admin::SharedRates>,
    pub store_host: SocketAddr,
    pub boot_ms: i64,
    pub stats: Arc<Stats>,
    pub metrics: Arc<crate::metrics::BrokerMetrics>,
}

impl ProcessorFactory for BrokerProcessorFactory {
    fn build(&self) -> Rc<dyn Processor> {
        Rc::new(BrokerProcessor(Rc::new(BrokerCore {
            batcher: Default::default(),
            store: self.store.clone(),
            reader: self.reader.clone(),
            meta: self.meta.clone(),
            meta_view: self.meta_view.clone(),
            clients: self.clients.clone(),
            subs: self.subs.clone(),
            pull_hold: self.pull_hold.clone(),
            settings: self.settings.clone(),
            live: self.live.clone(),
            rates: self.rates.for_thread(),
            all_rates: self.rates.clone(),
            store_host: self.store_host,
            boot_ms: self.boot_ms,
            stats: self.stats.clone(),
            metrics: crate::metrics::RequestMeters::new(self.metrics.clone()),
        })))
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

#[derive(Default)]
pub struct Stats {
    pub put_msgs: Counter,
    pub put_bytes: Counter,
    pub got_msgs: Counter,
    pub got_bytes: Counter,
    /// RocketMQ's StoreStatsService figures (GET_BROKER_RUNTIME_INFO).
    pub store: super::store_stats::StoreStats,
    seq: AtomicU64,
}

impl Stats {
    fn add(c: &Counter, n: u64) {
        c.0.fetch_add(n, Ordering::Relaxed);
    }
    /// A cheap pseudo-random number (queue choice when a client asks for queue -1): a Weyl
    /// sequence through a 64-bit mix, so concurrent threads need only one atomic add.
    fn next(&self) -> u64 {
        let mut z = self
            .seq
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) >> 1
    }
}

#[derive(Clone)]
pub struct BrokerProcessor(pub Rc<BrokerCore>);

pub(super) fn reply(
    req: &RemotingCommand,
    code: i32,
    remark: impl Into<String>,
) -> RemotingCommand {
    let remark = remark.into();
    RemotingCommand::response_to(
        req,
        code,
        if remark.is_empty() {
            None
        } else {
            Some(remark)
        },
    )
}

pub(super) fn ok(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(req, rc::SUCCESS, None)
}

pub(super) fn later(f: impl std::future::Future<Output = RemotingCommand> + 'static) -> Handled {
    Handled::Later(Box::pin(async move { Some(f.await) }))
}

/// Decodes a typed header or returns SYSTEM_ERROR naming the field (used by `admin` too).
macro_rules! header_or_reply {
    ($ty:ty, $req:expr) => {
        match <$ty>::from_command(&$req) {
            Ok(h) => h,
            Err(e) => {
                return Handled::Reply(reply(
                    &$req,
                    rc::SYSTEM_ERROR,
                    format!("invalid request header: {e}"),
                ))
            }
        }
    };
}
pub(super) use header_or_reply;

fn put_error_reply(req: &RemotingCommand, e: &PutError) -> RemotingCommand {
    reply(req, e.status.response_code(), e.remark.clone())
}

fn status_name(s: GetStatus) -> &'static str {
    match s {
        GetStatus::Found => "FOUND",
        GetStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
        GetStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
        GetStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
        GetStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
        GetStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
        GetStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
        GetStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
        GetStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
    }
}

impl Processor for BrokerProcessor {
    fn process(&self, req: RemotingCommand, conn: &ConnInfo, resumed: bool) -> Handled {
        self.dispatch(req, conn, resumed)
    }

    fn replied(&self, request: &Replied, resp: &RemotingCommand) {
        let m = &self.0.metrics;
        m.rpc(
            request.code,
            resp.code,
            request.resumed,
            request.oneway,
            request.started,
        );
        m.note_refusal(request.code, resp);
    }

    fn connection_closed(&self, conn: &ConnInfo) {
        let clients = self.0.clients.clone();
        let id = conn.id;
        actix_rt::spawn(async move {
            let _ = clients.send(clients::ConnectionClosed(id)).await;
        });
    }
}

impl BrokerProcessor {
    fn dispatch(&self, req: RemotingCommand, conn: &ConnInfo, resumed: bool) -> Handled {
        let core = &self.0;
        match req.code {
            rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => {
                core.clone().send(req, conn)
            }
            rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE => core.clone().pull(req, conn, resumed),
            rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2 => {
                core.clone().send_reply(req, conn)
            }
            rq::QUERY_MESSAGE => core.query_message(req),
            rq::VIEW_MESSAGE_BY_ID => core.view_message(req),
            rq::HEART_BEAT => core.clone().heartbeat(req, conn),
            rq::UNREGISTER_CLIENT => core.unregister_client(req),
            rq::GET_CONSUMER_LIST_BY_GROUP => core.consumer_list(req),
            rq::QUERY_CONSUMER_OFFSET => core.query_consumer_offset(req),
            rq::UPDATE_CONSUMER_OFFSET => core.update_consumer_offset(req),
            rq::GET_MAX_OFFSET => core.offset_query(req, |r, t, q| r.max_offset(t, q).0 as i64),
            rq::GET_MIN_OFFSET => core.offset_query(req, |r, t, q| r.min_offset(t, q).0 as i64),
            rq::SEARCH_OFFSET_BY_TIMESTAMP => core.search_offset(req),
            rq::GET_EARLIEST_MSG_STORETIME => core.earliest_store_time(req),
            rq::CONSUMER_SEND_MSG_BACK => core.clone().send_back(req),
            rq::LOCK_BATCH_MQ => core.lock_batch(req),
            rq::UNLOCK_BATCH_MQ => core.unlock_batch(req),
            rq::UPDATE_AND_CREATE_TOPIC => core.create_topic(req),
            rq::GET_BROKER_RUNTIME_INFO => core.runtime_info(req),
            // The tables as the config files hold them (TopicConfigSerializeWrapper,
            // SubscriptionGroupWrapper): what a slave and `mqadmin` read.
            rq::GET_ALL_TOPIC_CONFIG => Handled::Reply(
                ok(&req).with_body(meta::to_json(&*core.meta_view.topics()).into_bytes()),
            ),
            rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => Handled::Reply(
                ok(&req).with_body(meta::to_json(&*core.meta_view.groups()).into_bytes()),
            ),
            c if super::admin::ADMIN_CODES.contains(&c) => core.admin(req, &conn.peer.to_string()),
            code => Handled::Reply(reply(
                &req,
                rc::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            )),
        }
    }
}

/// `updateSubGroup -s false` (consumeEnable) stops a group's consumption, as in RocketMQ.
fn consumption_off(req: &RemotingCommand, group: &str) -> RemotingCommand {
    reply(
        req,
        rc::NO_PERMISSION,
        format!("subscription group no permission, {group}"),
    )
}

/// The most record bytes a QUERY_MESSAGE answer carries: Java's and Go's remoting decoders refuse
/// a frame over 16 MiB and close the connection, so a larger answer would fail the query whole.
const MAX_QUERY_ANSWER_BYTES: usize = 15 << 20;

impl BrokerCore {
    // ------------------------------------------------------------------------------------ SEND

    /// Finds the topic for a send, creating it the way RocketMQ does: retry topics always,
    /// others from the client's default topic (`TBW102`) when `autoCreateTopicEnable` is on.
    async fn topic_for_send(
        &self,
        topic: &str,
        default_topic: &str,
        default_queues: i32,
    ) -> Result<TopicConfig, (i32, String)> {
        if let Some(t) = self.meta_view.topic(topic) {
            return Ok(t);
        }
        let io = |e: std::io::Error| {
            (
                rc::SYSTEM_ERROR,
                format!("cannot create topic {topic}: {e}"),
            )
        };
        if topic.starts_with(meta::RETRY_GROUP_TOPIC_PREFIX)
            || topic.starts_with(meta::DLQ_GROUP_TOPIC_PREFIX)
        {
            let m = metadata::EnsureTopic {
                topic: topic.to_string(),
                queues: 1,
                perm: PERM_READ | PERM_WRITE,
            };
            return self
                .meta
                .send(m)
                .await
                .map_err(|e| (rc::SYSTEM_ERROR, e.to_string()))?
                .map_err(io);
        }
        let default = self
            .meta_view
            .topic(default_topic)
            .filter(|d| self.settings.load().auto_create_topic && d.inheritable());
        let Some(default) = default else {
            return Err((
                rc::TOPIC_NOT_EXIST,
                format!(
                    "topic[{topic}] not exist, apply first please!{}",
                    faq::suggest_todo(faq::APPLY_TOPIC_URL)
                ),
            ));
        };
        let queues = (default_queues.max(1) as u32).min(default.write_queue_nums.max(1));
        let m = metadata::EnsureTopic {
            topic: topic.to_string(),
            queues,
            perm: PERM_READ | PERM_WRITE,
        };
        self.meta
            .send(m)
            .await
            .map_err(|e| (rc::SYSTEM_ERROR, e.to_string()))?
            .map_err(io)
    }

    /// `[TIMEOUT_CLEAN_QUEUE]` flow control: refuse while the writer's head-of-line wait is over
    /// `waitTimeMillsInSendQueue`, instead of queueing without bound.
    fn writer_busy(&self) -> Option<String> {
        if !self.settings.load().fast_failure {
            return None;
        }
        let probe = self.store.writer().probe();
        let depth = probe.depth.get();
        // A writer stuck in one append (a slow file creation, a wait for a write buffer) takes no
        // message, so the last wait below stays that of the message before: RocketMQ's
        // isOSPageCacheBusy, the time the append under way has held the CommitLog.
        let settings = self.settings.load();
        if let Some(busy) = probe
            .busy_for()
            .filter(|b| *b > settings.os_page_cache_busy)
        {
            return Some(format!(
                "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, the CommitLog \
                 writer has been busy with one request for {}ms (osPageCacheBusyTimeOutMills: \
                 {}ms), size of queue: {depth}",
                busy.as_millis(),
                settings.os_page_cache_busy.as_millis()
            ));
        }
        let wait_us = probe.last_wait_us.load(Ordering::Relaxed);
        let limit = settings.wait_time_in_send_queue;
        (depth > 0 && Duration::from_micros(wait_us) > limit).then(|| {
            format!(
                "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {}ms, size of queue: {depth}, waitTimeMillsInSendQueue: {}ms",
                wait_us / 1000,
                limit.as_millis()
            )
        })
    }

    pub(super) fn send(self: Rc<Self>, req: RemotingCommand, conn: &ConnInfo) -> Handled {
        let arrived = Instant::now();
        let h = match SendHeaderRef::from_command(&req) {
            Ok(h) => h,
            Err(e) => {
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("invalid request header: {e}"),
                ))
            }
        };
        let perm = self.settings.load().broker_perm;
        if perm & meta::PERM_WRITE == 0 {
            return Handled::Reply(reply(
                &req,
                rc::NO_PERMISSION,
                format!(
                    "the broker[{}] sending message is forbidden (brokerPermission {perm})",
                    self.store_host
                ),
            ));
        }
        if let Some(remark) = self.writer_busy() {
            return Handled::Reply(reply(&req, rc::SYSTEM_BUSY, remark));
        }
        if let Err(e) = check_send_topic(h.topic) {
            return Handled::Reply(put_error_reply(&req, &e));
        }
        let props = SendProps::scan(h.properties);
        if props.transaction {
            let why = if self.settings.load().reject_transaction {
                "the broker rejects transactional messages (rejectTransactionMessage=true)"
            } else {
                "transactional (half) messages are not supported by this broker yet"
            };
            return Handled::Reply(reply(&req, rc::NO_PERMISSION, why));
        }
        let born_host = conn.peer;
        if h.topic.starts_with(meta::RETRY_GROUP_TOPIC_PREFIX) {
            // A consumer's own retry send (the fallback when CONSUMER_SEND_MSG_BACK fails).
            if is_batch(&req, h.batch) {
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("batch request does not support retry group {}", h.topic),
                ));
            }
            return later(self.send_retry(req, born_host, arrived));
        }
        if let Some(topic) = self.meta_view.with_topic(h.topic, SendTopic::of) {
            return self.send_to(&req, &h, &props, topic, born_host, arrived);
        }
        // A topic to create first (auto-creation, retry topics): off the hot path.
        let (topic, default_topic, default_queues) = (
            h.topic.to_owned(),
            h.default_topic.to_owned(),
            h.default_topic_queue_nums,
        );
        later(async move {
            let created = self
                .topic_for_send(&topic, &default_topic, default_queues)
                .await;
            let topic = match created {
                Ok(t) => SendTopic::of(&t),
                Err((code, remark)) => return reply(&req, code, remark),
            };
            let handled = match SendHeaderRef::from_command(&req) {
                Ok(h) => {
                    let props = SendProps::scan(h.properties);
                    self.send_to(&req, &h, &props, topic, born_host, arrived)
                }
                Err(e) => Handled::Reply(reply(&req, rc::SYSTEM_ERROR, e.to_string())),
            };
            match handled {
                Handled::Reply(r) => r,
                Handled::Later(f) => f
                    .await
                    .unwrap_or_else(|| reply(&req, rc::SYSTEM_ERROR, "the send produced no reply")),
                Handled::NoReply => reply(&req, rc::SYSTEM_ERROR, "the send produced no reply"),
            }
        })
    }

    /// A SEND to `%RETRY%<group>` (RocketMQ's `handleRetryTopic`): the group must exist (or be
    /// created, with `autoCreateSubscriptionGroup`), and once the message's reconsume count has
    /// reached the request's `maxReconsumeTimes` (the group's `retryMaxTimes` without it) it goes
    /// to `%DLQ%<group>`, queue 0, without its DELAY. Otherwise a retry the consumer sends itself
    /// would be retried for ever, and never reach the dead-letter queue.
    async fn send_retry(
        self: Rc<Self>,
        req: RemotingCommand,
        born_host: SocketAddr,
        arrived: Instant,
    ) -> RemotingCommand {
        let h = match SendHeaderRef::from_command(&req) {
            Ok(h) => h,
            Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
        };
        let group_name = &h.topic[meta::RETRY_GROUP_TOPIC_PREFIX.len()..];
        let group = match self
            .meta
            .send(metadata::EnsureGroup(group_name.to_string()))
            .await
        {
            Ok(Ok(Some(g))) => g,
            _ => {
                return reply(
                    &req,
                    rc::SUBSCRIPTION_GROUP_NOT_EXIST,
                    format!(
                        "subscription group not exist, {group_name} {}",
                        faq::suggest_todo(faq::SUBSCRIPTION_GROUP_NOT_EXIST)
                    ),
                )
            }
        };
        let max_times = h.max_reconsume_times.unwrap_or(group.retry_max_times);
        let dlq = (h.reconsume_times >= max_times).then(|| {
            (
                meta::dlq_topic(group_name),
                properties::remove(h.properties, keys::DELAY),
            )
        });
        let mut h = h;
        if let Some((topic, props)) = &dlq {
            h.topic = topic;
            h.queue_id = 0;
            h.properties = props;
        }
        let topic = match self
            .topic_for_send(h.topic, h.default_topic, h.default_topic_queue_nums)
            .await
        {
            Ok(t) => SendTopic::of(&t),
            Err((code, remark)) => return reply(&req, code, remark),
        };
        let props = SendProps::scan(h.properties);
        match self.send_to(&req, &h, &props, topic, born_host, arrived) {
            Handled::Reply(r) => r,
            Handled::Later(f) => f
                .await
                .unwrap_or_else(|| reply(&req, rc::SYSTEM_ERROR, "the send produced no reply")),
            Handled::NoReply => reply(&req, rc::SYSTEM_ERROR, "the send produced no reply"),
        }
    }

    /// A SEND to an existing topic: checks the topic and queue, builds the message(s) and hands
    /// them to the writer. The returned future holds only what the reply needs.
    fn send_to(
        self: &Rc<Self>,
        req: &RemotingCommand,
        h: &SendHeaderRef<'_>,
        props: &SendProps<'_>,
        topic: SendTopic,
        born_host: SocketAddr,
        arrived: Instant,
    ) -> Handled {
        if !topic.writable {
            return Handled::Reply(reply(
                req,
                rc::NO_PERMISSION,
                format!(
                    "the topic[{}] sending is forbidden (perm {})",
                    h.topic, topic.perm
                ),
            ));
        }
        let queues = topic.write_queue_nums.max(topic.read_queue_nums) as i32;
        let queue_id = if h.queue_id < 0 {
            (self.stats.next() % topic.write_queue_nums.max(1) as u64) as i32
        } else {
            h.queue_id
        };
        if queue_id >= queues {
            return Handled::Reply(reply(
                req,
                rc::SYSTEM_ERROR,
                format!("queueId[{queue_id}] is illegal, topic:[{}] topicConfig.writeQueueNums:[{}] consumer:[{born_host}]", h.topic, topic.write_queue_nums),
            ));
        }
        let cluster = &self.settings.load().cluster;
        let batch = is_batch(req, h.batch);
        let mut sys = h.sys_flag;
        if topic.multi_tag {
            sys |= sys_flag::MULTI_TAGS_FLAG;
        }
        let make = |body: bytes::Bytes, flag: i32, stored: String| NewMessage {
            topic: h.topic.to_owned(),
            queue_id,
            flag,
            sys_flag: sys,
            born_timestamp: h.born_timestamp,
            born_host,
            store_host: self.store_host,
            reconsume_times: h.reconsume_times,
            prepared_tx_offset: 0,
            body_crc: body_crc(&body),
            body,
            properties: stored,
            // The header's WAIT: a batch's own (4.9.4 reads the MessageExtBatch's properties), a
            // single message's whether or not it is stored.
            wait_store_msg_ok: props.wait_store_msg_ok,
        };
        let to = ReplyTo::of(req);
        if batch {
            let items = match decode_batch(&req.body) {
                Ok(items) if !items.is_empty() => items,
                Ok(_) => {
                    return Handled::Reply(reply(req, rc::MESSAGE_ILLEGAL, "the batch is empty"))
                }
                Err(e) => {
                    return Handled::Reply(reply(
                        req,
                        rc::MESSAGE_ILLEGAL,
                        format!("malformed batch body: {e}"),
                    ))
                }
            };
            // Each element keeps its own properties and gets the batch's after them, duplicates
            // included (a reader's last duplicate wins), as 4.9.4's MessageExtBatchEncoder
            // writes them: so stored sizes are Java's. The batch's keep `WAIT` and get
            // `CLUSTER` set, in Java's HashMap order (SendMessageProcessor.sendBatchMessage).
            let batch_props = java_order(h.properties, &[Op::Put(keys::CLUSTER, cluster)]);
            let msgs: Vec<NewMessage> = items
                .into_iter()
                .map(|it| {
                    let p = with_properties(&it.properties, &batch_props);
                    make(it.body, it.flag, p)
                })
                .collect();
            let (core, topic) = (self.clone(), h.topic.to_owned());
            let kind = props.kind;
            return later(async move {
                let n = msgs.len() as u64;
                let bytes: u64 = msgs.iter().map(|m| m.body.len() as u64).sum();
                let put = core.store.put_producer_batch(msgs).await;
                match &put {
                    Ok((ok, _)) => core.stats.store.record_put(n, ok.wrote_bytes),
                    Err(_) => core.stats.store.record_put_failed(n),
                }
                match put {
                    Ok((ok, offsets)) => {
                        Stats::add(&core.stats.put_msgs, n);
                        core.rates.put.add(&topic, "", n);
                        core.rates.put_latency.record(arrived.elapsed());
                        core.stats.store.record_put_time(arrived.elapsed());
                        Stats::add(&core.stats.put_bytes, bytes);
                        core.metrics.messages_in(&topic, kind, n, bytes);
                        let ids: Vec<String> = offsets
                            .iter()
                            .map(|o| offset_msg_id(core.store_host, o.0 as i64))
                            .collect();
                        let hdr = SendMessageResponseHeader::new(
                            ids.join(","),
                            queue_id,
                            ok.queue_offset.0 as i64,
                        );
                        to.response(ok.status.response_code(), None)
                            .with_ext_fields(hdr.to_ext_fields())
                    }
                    Err(e) => to.response(e.status.response_code(), Some(e.remark)),
                }
            });
        }
        let uniq = props.uniq.map(str::to_owned);
        // A reply keeps the requester's properties exactly as sent, WAIT included and no
        // CLUSTER added (4.9.4 ReplyMessageProcessor sets the header's string as it is).
        let stored = if matches!(req.code, rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2) {
            h.properties.to_owned()
        } else {
            props.stored(h.properties, cluster)
        };
        let msg = make(req.body.clone(), h.flag, stored);
        let rx = SendBatcher::enqueue(self, msg, props.kind, arrived);
        let store_host = self.store_host;
        later(async move {
            match rx.await {
                Ok(Ok(ok)) => to
                    .response(ok.status.response_code(), None)
                    .with_ext_fields(send_ok_fields(
                        store_host,
                        ok.phy_offset.0 as i64,
                        queue_id,
                        ok.queue_offset.0 as i64,
                        uniq.as_deref(),
                    )),
                Ok(Err(e)) => to.response(e.status.response_code(), Some(e.remark)),
                Err(_) => to.response(
                    PutStatus::ServiceNotAvailable.response_code(),
                    Some("the broker is shutting down".into()),
                ),
            }
        })
    }

    // ------------------------------------------------------------------------------------ PULL

    fn pull(self: Rc<Self>, req: RemotingCommand, conn: &ConnInfo, resumed: bool) -> Handled {
        let h = header_or_reply!(PullMessageRequestHeader, req);
        let consume_enable = self
            .meta_view
            .with_group(&h.consumer_group, |g| g.consume_enable);
        if consume_enable == Some(false) {
            return Handled::Reply(consumption_off(&req, &h.consumer_group));
        }
        if consume_enable.is_none() {
            // First pull of an unknown group: create it (autoCreateSubscriptionGroup), then pull.
            let conn = conn.clone();
            return Handled::Later(Box::pin(async move {
                match self
                    .meta
                    .send(metadata::EnsureGroup(h.consumer_group.clone()))
                    .await
                {
                    Ok(Ok(Some(g))) if !g.consume_enable => {
                        return Some(consumption_off(&req, &h.consumer_group))
                    }
                    Ok(Ok(Some(_))) => {}
                    _ => {
                        return Some(reply(
                            &req,
                            rc::SUBSCRIPTION_GROUP_NOT_EXIST,
                            format!(
                                "subscription group [{}] does not exist, {}",
                                h.consumer_group,
                                faq::suggest_todo(faq::SUBSCRIPTION_GROUP_NOT_EXIST)
                            ),
                        ))
                    }
                }
                match self.pull_now(req, h, &conn, resumed) {
                    Handled::Reply(r) => Some(r),
                    Handled::Later(f) => f.await,
                    Handled::NoReply => None,
                }
            }));
        }
        self.pull_now(req, h, conn, resumed)
    }

    fn pull_now(
        &self,
        req: RemotingCommand,
        h: PullMessageRequestHeader,
        conn: &ConnInfo,
        resumed: bool,
    ) -> Handled {
        let perm = self.settings.load().broker_perm;
        if perm & meta::PERM_READ == 0 {
            return Handled::Reply(reply(
                &req,
                rc::NO_PERMISSION,
                format!(
                    "the broker[{}] pulling message is forbidden (brokerPermission {perm})",
                    self.store_host
                ),
            ));
        }
        let Some(topic) = self.meta_view.topic(&h.topic) else {
            return Handled::Reply(reply(
                &req,
                rc::TOPIC_NOT_EXIST,
                format!(
                    "topic[{}] not exist, apply first please! {}",
                    h.topic,
                    faq::suggest_todo(faq::APPLY_TOPIC_URL)
                ),
            ));
        };
        if !topic.readable() {
            return Handled::Reply(reply(
                &req,
                rc::NO_PERMISSION,
                format!("the topic[{}] pulling is forbidden", h.topic),
            ));
        }
        if h.queue_id < 0 || h.queue_id as u32 >= topic.read_queue_nums {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!("queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]", h.queue_id, h.topic, topic.read_queue_nums, conn.peer),
            ));
        }
        // Only tag expressions are filtered here (enablePropertyFilter is not supported): a
        // SQL92 expression read as a tag would match nothing, and every message of the queue
        // would be skipped past as filtered. RocketMQ answers the same refusal.
        let stored = (!h.has_subscription())
            .then(|| self.subs.get(&h.consumer_group, &h.topic))
            .flatten();
        let expression_type = match &stored {
            Some(s) => Some(s.expression_type.as_str()),
            None => h.expression_type.as_deref(),
        };
        if let Some(t) = expression_type.filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("TAG"))
        {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!("The broker does not support consumer to filter message by {t}"),
            ));
        }
        let filter = if h.has_subscription() {
            TagFilter::from_expression(h.subscription.as_deref().unwrap_or("*"))
        } else {
            // The hashes are computed here from the tag strings, not taken from the client's
            // `codeSet`: some clients (rocketmq-client-rust 1.0.0) send hashes that are not Java's
            // String.hashCode, which the ConsumeQueue stores, and every message would be filtered.
            match &stored {
                Some(s) if s.sub_string.trim() == "*" || s.sub_string.trim().is_empty() => {
                    TagFilter::all()
                }
                Some(s) if !s.tags_set.is_empty() => {
                    TagFilter::from_expression(&s.tags_set.join("||"))
                }
                Some(s) => TagFilter::from_expression(&s.sub_string),
                None => TagFilter::all(),
            }
        };
        // Not on a slave (RocketMQ's rule): its offsets are its master's, copied every 10 s.
        if h.has_commit_offset()
            && !resumed
            && h.commit_offset >= 0
            && !self.store.params().broker_role.is_slave()
        {
            let m = metadata::CommitOffset {
                group: h.consumer_group.clone(),
                topic: h.topic.clone(),
                queue_id: h.queue_id,
                offset: h.commit_offset,
            };
            let meta = self.meta.clone();
            actix_rt::spawn(async move {
                let _ = meta.send(m).await;
            });
        }
        let settings = self.settings.load();
        // The request's caps with the store's, separately for records in memory and on disk
        // (RocketMQ's isTheBatchFull: the on-disk values alone apply on disk, whichever is
        // larger).
        let (want_msgs, want_bytes) = (
            h.max_msg_nums.max(1) as usize,
            h.max_msg_bytes.map_or(usize::MAX, |b| b.max(1) as usize),
        );
        let limits = GetLimits {
            max_msgs: want_msgs.min(settings.max_transfer_count.max(1)),
            max_bytes: want_bytes.min(settings.max_transfer_bytes),
            max_msgs_on_disk: want_msgs.min(settings.max_transfer_count_on_disk.max(1)),
            max_bytes_on_disk: want_bytes.min(settings.max_transfer_bytes_on_disk),
            hot_bytes: settings.hot_bytes,
        };
        let offset = h.queue_offset.max(0) as u64;
        let read_at = Instant::now();
        let mut r =
            self.reader
                .get_messages(&h.topic, h.queue_id, QueueOffset(offset), limits, &filter);
        if h.queue_offset < 0 && r.max_offset.0 > 0 {
            // Below every offset, as RocketMQ's getMessage sees a negative one: OFFSET_TOO_SMALL,
            // to be corrected to the queue's min (not served from 0 as if asked for it).
            r.status = GetStatus::OffsetTooSmall;
            r.next_begin_offset = r.min_offset;
            r.messages.clear();
            r.queue_offsets.clear();
            r.total_bytes = 0;
        }
        // Every read counts, a held pull's re-checks too (each is a getMessage in RocketMQ).
        self.stats.store.record_get(
            r.status == GetStatus::Found,
            r.messages.len() as u64,
            read_at.elapsed(),
        );
        let slave = self.store.params().broker_role.is_slave();
        // RocketMQ's `nextOffsetCorrection`: a slave may be behind its master, so unless
        // `offsetCheckInSlave` it never moves a consumer's offset; the consumer keeps it and goes
        // back to the master.
        let corrects = !slave || settings.offset_check_in_slave;
        if !corrects
            && !matches!(
                r.status,
                GetStatus::Found | GetStatus::NoMatchedMessage | GetStatus::MessageWasRemoving
            )
        {
            r.next_begin_offset = QueueOffset(offset);
        }
        let (home, slowly) = self
            .meta_view
            .with_group(&h.consumer_group, |g| {
                (
                    g.broker_id as i64,
                    g.which_broker_when_consume_slowly as i64,
                )
            })
            .unwrap_or((0, 1));
        // PullMessageProcessor: with `slaveReadEnable` the answer names the group's
        // `whichBrokerWhenConsumeSlowly` to a consumer reading far behind, else the group's home
        // broker; without it, always the master.
        let mut suggest = match (settings.slave_read_enable, r.suggest_pulling_from_slave) {
            (false, _) => 0,
            (true, true) => slowly,
            (true, false) => home,
        };
        let code = match r.status {
            GetStatus::Found => rc::SUCCESS,
            GetStatus::NoMatchedLogicQueue | GetStatus::NoMessageInQueue => {
                if h.queue_offset != 0 {
                    rc::PULL_OFFSET_MOVED
                } else {
                    rc::PULL_NOT_FOUND
                }
            }
            GetStatus::OffsetOverflowOne | GetStatus::OffsetFoundNull => rc::PULL_NOT_FOUND,
            GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly => rc::PULL_OFFSET_MOVED,
            GetStatus::NoMatchedMessage | GetStatus::MessageWasRemoving => {
                rc::PULL_RETRY_IMMEDIATELY
            }
        };
        // A slave that does not correct offsets says "try again" (at the group's home broker)
        // where a master would say the offset moved.
        let code = if code == rc::PULL_OFFSET_MOVED && !corrects {
            suggest = home;
            rc::PULL_RETRY_IMMEDIATELY
        } else {
            code
        };
        if code == rc::PULL_OFFSET_MOVED && !slave {
            self.offset_moved_event(&h, r.next_begin_offset.0 as i64);
        }
        if code == rc::PULL_NOT_FOUND && h.has_suspend() && !resumed {
            let (wait, recheck) = if settings.long_polling {
                (
                    Duration::from_millis(h.suspend_timeout_millis.clamp(0, 30_000) as u64),
                    LONG_POLLING_RECHECK,
                )
            } else {
                (settings.short_polling, settings.short_polling)
            };
            let (wake_above, wait) = hold(offset, r.max_offset.0, wait, recheck);
            let m = SuspendPull {
                topic: h.topic.clone(),
                queue_id: h.queue_id,
                offset: wake_above,
                deadline: Instant::now() + wait,
                request: req,
                conn: conn.conn.clone(),
            };
            let hold = self.pull_hold.clone();
            actix_rt::spawn(async move {
                let _ = hold.send(m).await;
            });
            return Handled::NoReply;
        }
        let hdr = PullMessageResponseHeader {
            suggest_which_broker_id: suggest,
            next_begin_offset: r.next_begin_offset.0 as i64,
            min_offset: r.min_offset.0 as i64,
            max_offset: r.max_offset.0 as i64,
            ..Default::default()
        };
        let mut resp =
            reply(&req, code, status_name(r.status)).with_ext_fields(hdr.to_ext_fields());
        if code == rc::SUCCESS {
            let mut body = BytesMut::with_capacity(r.total_bytes);
            for m in &r.messages {
                body.put_slice(m.as_bytes());
            }
            Stats::add(&self.stats.got_msgs, r.messages.len() as u64);
            self.rates
                .get
                .add(&h.consumer_group, &h.topic, r.messages.len() as u64);
            Stats::add(&self.stats.got_bytes, r.total_bytes as u64);
            let (n, bytes) = (r.messages.len() as u64, r.total_bytes as u64);
            self.metrics
                .messages_out(&h.topic, &h.consumer_group, n, bytes);
            resp = resp.with_body(body.freeze());
        }
        Handled::Reply(resp)
    }

    /// 4.9.4's PullMessageProcessor.generateOffsetMovedEvent: on every PULL_OFFSET_MOVED a master
    /// answers, an OffsetMovedEvent message goes to queue 0 of `OFFSET_MOVED_EVENT` — body the
    /// event's fastjson text, TAGS and KEYS the group, DELAY=0, flag and sysFlag 0, born and
    /// store host this broker. It takes CommitLog space as in Java, so later offsets match. (A
    /// slave with `offsetCheckInSlave` would try too, but its store refuses puts.) Written in the
    /// background: the pull's answer does not wait for it, and a failure is only logged.
    fn offset_moved_event(&self, h: &PullMessageRequestHeader, offset_new: i64) {
        let group = &h.consumer_group;
        let event = OffsetMovedEvent {
            consumer_group: group.clone(),
            message_queue: MessageQueue {
                topic: h.topic.clone(),
                broker_name: self.settings.load().broker_name.clone(),
                queue_id: h.queue_id,
            },
            offset_new,
            offset_request: h.queue_offset,
        };
        let Ok(body) = actormq_core::protocol::fastjson::to_vec(&event) else {
            return;
        };
        let body = bytes::Bytes::from(body);
        // Java's HashMap order for these three keys (bucket 7, 13, 14); sizes do not depend on it.
        let properties = properties::encode(&[
            (keys::KEYS, group.as_str()),
            (keys::DELAY, "0"),
            (keys::TAGS, group.as_str()),
        ]);
        let msg = NewMessage {
            topic: "OFFSET_MOVED_EVENT".to_string(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            born_host: self.store_host,
            store_host: self.store_host,
            reconsume_times: 0,
            prepared_tx_offset: 0,
            body_crc: body_crc(&body),
            body,
            properties,
            wait_store_msg_ok: true, // no WAIT in Java's map
        };
        // Straight to the writer: `Store::put` refuses system topics, as a SEND must.
        let (writer, stats) = (self.store.writer().clone(), self.stats.clone());
        actix_rt::spawn(async move {
            match crate::store::writer::append(&writer, crate::store::writer::AppendMessage(msg))
                .await
            {
                Ok(Ok(a)) => stats.store.record_put(1, a.wrote_bytes),
                Ok(Err(e)) => {
                    stats.store.record_put_failed(1);
                    tracing::warn!(status = ?e.status, remark = %e.remark, "OffsetMovedEvent not stored");
                }
                Err(e) => tracing::warn!(error = %e, "OffsetMovedEvent not stored"),
            }
        });
    }

    // ------------------------------------------------------------------------- query and view

    fn query_message(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(QueryMessageRequestHeader, req);
        let Some(index) = self.store.index() else {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                "the message index is disabled (messageIndexEnable=false)",
            ));
        };
        let settings = self.settings.load();
        let max = if h.unique_key_query {
            settings.default_query_max_num
        } else {
            h.max_num.max(1) as usize
        }
        .min(settings.max_msgs_num_batch);
        let q = index.query(&h.topic, &h.key, max, h.begin_timestamp, h.end_timestamp);
        let hdr = QueryMessageResponseHeader {
            index_last_update_timestamp: q.last_update_timestamp,
            index_last_update_phyoffset: q.last_update_phy_offset,
        };
        let mut body = BytesMut::new();
        for phy in q.phy_offsets {
            let Some(rec) = self.reader.record_at(PhyOffset(phy as u64)) else {
                continue;
            };
            // Index keys are hashes of `topic#key`, and Java's String.hashCode collides easily
            // ("Aa" and "BB"): a record of another topic is not this query's answer.
            let same_topic = matches!(
                record::check(rec.as_bytes(), false),
                Ok(Check::Record(r)) if r.topic == h.topic
            );
            if !same_topic {
                continue;
            }
            // Clients refuse frames over 16 MiB: the answer stops before that, with what it has.
            if !body.is_empty() && body.len() + rec.as_bytes().len() > MAX_QUERY_ANSWER_BYTES {
                break;
            }
            body.put_slice(rec.as_bytes());
        }
        if body.is_empty() {
            return Handled::Reply(
                reply(
                    &req,
                    rc::QUERY_NOT_FOUND,
                    "can not find message, maybe time range not correct",
                )
                .with_ext_fields(hdr.to_ext_fields()),
            );
        }
        Handled::Reply(
            ok(&req)
                .with_ext_fields(hdr.to_ext_fields())
                .with_body(body.freeze()),
        )
    }

    fn view_message(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(ViewMessageByIdRequestHeader, req);
        let found = u64::try_from(h.offset)
            .ok()
            .and_then(|o| self.reader.record_at(PhyOffset(o)));
        match found {
            Some(rec) => {
                Handled::Reply(ok(&req).with_body(bytes::Bytes::copy_from_slice(rec.as_bytes())))
            }
            None => Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!("can not find message by the offset, {}", h.offset),
            )),
        }
    }

    // -------------------------------------------------------------------- clients and offsets

    fn heartbeat(self: Rc<Self>, req: RemotingCommand, conn: &ConnInfo) -> Handled {
        let data: HeartbeatData = match parse_java_json(&req.body) {
            Ok(d) => d,
            Err(e) => {
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("invalid heartbeat body: {e}"),
                ))
            }
        };
        let conn = conn.clone();
        later(async move {
            for c in &data.consumer_data_set {
                let group = match self
                    .meta
                    .send(metadata::EnsureGroup(c.group_name.clone()))
                    .await
                {
                    Ok(Ok(Some(g))) => g,
                    _ => continue,
                };
                let retry = meta::retry_topic(&c.group_name);
                let m = metadata::EnsureTopic {
                    topic: retry,
                    queues: group.retry_queue_nums.max(1),
                    perm: PERM_READ | PERM_WRITE,
                };
                let _ = self.meta.send(m).await;
            }
            let hb = clients::Heartbeat {
                data,
                conn_id: conn.id,
                conn: conn.conn.clone(),
                addr: conn.peer.to_string(),
                language: req.language.name(),
                version: req.version,
            };
            let changed = self.clients.send(hb).await.unwrap_or(false);
            ok(&req).with_ext("IS_SUB_CHANGE", changed.to_string())
        })
    }

    fn unregister_client(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(UnregisterClientRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            let m = clients::UnregisterClient {
                client_id: h.client_id,
                producer_group: h.producer_group,
                consumer_group: h.consumer_group,
            };
            let _ = clients.send(m).await;
            ok(&req)
        })
    }

    fn consumer_list(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumerListByGroupRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            let ids = clients
                .send(clients::GetConsumerList(h.consumer_group.clone()))
                .await
                .unwrap_or_default();
            if ids.is_empty() {
                return reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("no consumer for this group, {}", h.consumer_group),
                );
            }
            match to_json_bytes(&ConsumerListBody {
                consumer_id_list: ids,
            }) {
                Ok(b) => ok(&req).with_body(b),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    fn query_consumer_offset(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(QueryConsumerOffsetRequestHeader, req);
        let meta = self.meta.clone();
        let reader = self.reader.clone();
        let hot_bytes = self.settings.load().hot_bytes;
        later(async move {
            let m = metadata::QueryOffset {
                group: h.consumer_group.clone(),
                topic: h.topic.clone(),
                queue_id: h.queue_id,
            };
            // A negative offset stored by an older build counts as none, as in RocketMQ.
            match meta.send(m).await.ok().flatten().filter(|&o| o >= 0) {
                Some(off) => ok(&req).with_ext_fields(
                    QueryConsumerOffsetResponseHeader { offset: off }.to_ext_fields(),
                ),
                None => {
                    // RocketMQ 4.9.4 (ConsumerManageProcessor.queryConsumerOffset): 0 when the
                    // queue's min offset is ≤ 0 (-1 for a queue that does not exist) and offset 0
                    // is not "in disk" (DefaultMessageStore.checkInDiskByConsumeOffset: false
                    // without the queue or without a unit at 0, else whether the CommitLog's end
                    // is more than accessMessageInMemoryMaxRatio of memory past its record): a
                    // new group reads a young queue from its start, an empty or unknown one from
                    // 0. Otherwise the client decides (consumeFromWhere): a new group reading
                    // from the last offset must not be sent back over a long, cold history.
                    // setZeroIfNotFound=false (RocketMQ 5) always leaves it to the client.
                    let q = reader.queue(&h.topic, h.queue_id);
                    let min = q.as_ref().map_or(-1, |q| q.min_offset().0 as i64);
                    let in_disk = q
                        .filter(|q| q.min_offset().0 == 0)
                        .and_then(|q| q.unit(QueueOffset(0)))
                        .is_some_and(|u| {
                            let end = reader.commit_log().max_offset() as i64;
                            end.saturating_sub(u.phy_offset) > hot_bytes.min(i64::MAX as u64) as i64
                        });
                    if h.set_zero_if_not_found != Some(false) && min <= 0 && !in_disk {
                        ok(&req).with_ext_fields(
                            QueryConsumerOffsetResponseHeader { offset: 0 }.to_ext_fields(),
                        )
                    } else {
                        reply(
                            &req,
                            rc::QUERY_NOT_FOUND,
                            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                        )
                    }
                }
            }
        })
    }

    fn update_consumer_offset(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(UpdateConsumerOffsetRequestHeader, req);
        if h.commit_offset < 0 {
            // Stored, it would be answered to QUERY_CONSUMER_OFFSET, and a client that gets a
            // negative offset cannot start the queue. The pull-commit path drops them alike.
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!("commitOffset {} is negative", h.commit_offset),
            ));
        }
        let meta = self.meta.clone();
        later(async move {
            let m = metadata::CommitOffset {
                group: h.consumer_group,
                topic: h.topic,
                queue_id: h.queue_id,
                offset: h.commit_offset,
            };
            let _ = meta.send(m).await;
            ok(&req)
        })
    }

    fn offset_query(
        &self,
        req: RemotingCommand,
        f: impl Fn(&StoreReader, &str, i32) -> i64,
    ) -> Handled {
        let h = header_or_reply!(GetMinOffsetRequestHeader, req);
        let off = f(&self.reader, &h.topic, h.queue_id);
        Handled::Reply(ok(&req).with_ext("offset", off.to_string()))
    }

    fn search_offset(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(SearchOffsetRequestHeader, req);
        let off = self
            .reader
            .offset_by_time(&h.topic, h.queue_id, h.timestamp);
        Handled::Reply(
            ok(&req).with_ext_fields(
                SearchOffsetResponseHeader {
                    offset: off.0 as i64,
                }
                .to_ext_fields(),
            ),
        )
    }

    fn earliest_store_time(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetEarliestMsgStoretimeRequestHeader, req);
        let ts = self
            .reader
            .earliest_store_time(&h.topic, h.queue_id)
            .unwrap_or(-1);
        Handled::Reply(ok(&req).with_ext_fields(
            GetEarliestMsgStoretimeResponseHeader { timestamp: ts }.to_ext_fields(),
        ))
    }

    /// CONSUMER_SEND_MSG_BACK (spec §11.9): retry through `%RETRY%<group>` with the delay of
    /// the reconsume count, or `%DLQ%<group>` once the retries are used up.
    fn send_back(self: Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(ConsumerSendMsgBackRequestHeader, req);
        later(async move {
            let group = match self.meta.send(metadata::EnsureGroup(h.group.clone())).await {
                Ok(Ok(Some(g))) => g,
                _ => {
                    return reply(
                        &req,
                        rc::SUBSCRIPTION_GROUP_NOT_EXIST,
                        format!(
                            "subscription group not exist, {} {}",
                            h.group,
                            faq::suggest_todo(faq::SUBSCRIPTION_GROUP_NOT_EXIST)
                        ),
                    )
                }
            };
            if group.retry_queue_nums == 0 {
                return ok(&req);
            }
            let Some(slice) = self.reader.record_at(PhyOffset(h.offset.max(0) as u64)) else {
                return reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("look message by offset failed, {}", h.offset),
                );
            };
            let Ok(Check::Record(orig)) = record::check(slice.as_bytes(), false) else {
                return reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("the message at offset {} cannot be decoded", h.offset),
                );
            };
            let max_times = h.max_reconsume_times.unwrap_or(group.retry_max_times);
            let to_dlq = orig.reconsume_times >= max_times || h.delay_level < 0;
            let (topic, queues, delay) = if to_dlq {
                (meta::dlq_topic(&h.group), 1, 0)
            } else {
                let d = if h.delay_level == 0 {
                    3 + orig.reconsume_times
                } else {
                    h.delay_level
                };
                (
                    meta::retry_topic(&h.group),
                    group.retry_queue_nums.max(1),
                    d,
                )
            };
            let ensure = metadata::EnsureTopic {
                topic: topic.clone(),
                queues,
                perm: PERM_READ | PERM_WRITE,
            };
            if let Err(e) = self
                .meta
                .send(ensure)
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()))
            {
                return reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("cannot create {topic}: {e}"),
                );
            }
            // 4.9.4's SendMessageProcessor.asyncConsumerSendMsgBack: RETRY_TOPIC kept or set to
            // the original topic, WAIT=false, DELAY set to the level (0 for the DLQ: written,
            // not removed), ORIGIN_MESSAGE_ID kept or set to the stored message's own (offset)
            // msgId — never the header's `originMsgId`, which 4.9.4 ignores (a client sends its
            // UNIQ_KEY there, 56 hex digits from an IPv6 host, so the stored size would differ).
            // Java's map drops an empty value, so an empty entry counts as absent. Put in
            // Java's order (ORIGIN_MESSAGE_ID last), written in its HashMap order.
            let absent = |k: &str| properties::find(&orig.properties, k).is_none_or(str::is_empty);
            let (origin, delay) = (orig.offset_msg_id(), delay.to_string());
            let mut ops = [Op::Remove(""); 4];
            let mut n = 0;
            for (add, op) in [
                (
                    absent(keys::RETRY_TOPIC),
                    Op::Put(keys::RETRY_TOPIC, orig.topic),
                ),
                (true, Op::Put(keys::WAIT, "false")),
                (true, Op::Put(keys::DELAY, &delay)),
                (
                    absent(keys::ORIGIN_MESSAGE_ID),
                    Op::Put(keys::ORIGIN_MESSAGE_ID, &origin),
                ),
            ] {
                if add {
                    ops[n] = op;
                    n += 1;
                }
            }
            let props = java_order(&orig.properties, &ops[..n]);
            let body = bytes::Bytes::copy_from_slice(orig.body);
            let msg = NewMessage {
                topic: topic.clone(),
                queue_id: (self.stats.next() % queues as u64) as i32,
                flag: orig.flag,
                sys_flag: orig.sys_flag,
                born_timestamp: orig.born_timestamp,
                born_host: orig.born_host,
                // The original's, as 4.9.4 copies it (msgExt.getStoreHost()).
                store_host: orig.store_host,
                reconsume_times: orig.reconsume_times + 1,
                prepared_tx_offset: 0,
                body_crc: body_crc(&body),
                body,
                properties: props,
                // Stored with WAIT=false (above), as RocketMQ does: no flush or slave to wait for.
                wait_store_msg_ok: false,
            };
            match self.store.put(msg).await {
                Ok(a) => {
                    self.stats.store.record_put(1, a.wrote_bytes);
                    ok(&req)
                }
                Err(e) => {
                    self.stats.store.record_put_failed(1);
                    reply(
                        &req,
                        rc::SYSTEM_ERROR,
                        format!("{:?}: {}", e.status, e.remark),
                    )
                }
            }
        })
    }

    fn lock_batch(&self, req: RemotingCommand) -> Handled {
        let body: LockBatchRequestBody = match parse_java_json(&req.body) {
            Ok(b) => b,
            Err(e) => {
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("invalid lock body: {e}"),
                ))
            }
        };
        let clients = self.clients.clone();
        later(async move {
            let m = clients::LockBatch {
                group: body.consumer_group,
                client_id: body.client_id,
                mqs: body.mq_set,
            };
            let locked = clients.send(m).await.unwrap_or_default();
            match to_json_bytes(&LockBatchResponseBody {
                lock_ok_mq_set: locked,
            }) {
                Ok(b) => ok(&req).with_body(b),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    fn unlock_batch(&self, req: RemotingCommand) -> Handled {
        let body: UnlockBatchRequestBody = match parse_java_json(&req.body) {
            Ok(b) => b,
            Err(e) => {
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("invalid unlock body: {e}"),
                ))
            }
        };
        let clients = self.clients.clone();
        later(async move {
            let m = clients::UnlockBatch {
                group: body.consumer_group,
                client_id: body.client_id,
                mqs: body.mq_set,
            };
            let _ = clients.send(m).await;
            ok(&req)
        })
    }

    fn create_topic(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(CreateTopicRequestHeader, req);
        if let Err(e) = check_topic_name(&h.topic) {
            return Handled::Reply(reply(&req, rc::INVALID_PARAMETER, e.remark));
        }
        if h.read_queue_nums <= 0
            || h.write_queue_nums <= 0
            || h.read_queue_nums > 1024
            || h.write_queue_nums > 1024
        {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                "readQueueNums and writeQueueNums must be within 1..=1024",
            ));
        }
        let t = TopicConfig {
            topic_name: h.topic.clone(),
            read_queue_nums: h.read_queue_nums as u32,
            write_queue_nums: h.write_queue_nums as u32,
            perm: h.perm.clamp(0, 15) as u32,
            topic_filter_type: if h.topic_filter_type.is_empty() {
                "SINGLE_TAG".into()
            } else {
                h.topic_filter_type.clone()
            },
            topic_sys_flag: h.topic_sys_flag.unwrap_or(0).max(0) as u32,
            order: h.order,
            // An update keeps the topic's attributes (`metadata::CreateTopic`).
            attributes: Default::default(),
        };
        let meta = self.meta.clone();
        later(async move {
            match meta.send(metadata::CreateTopic(t)).await {
                Ok(Ok(())) => ok(&req),
                Ok(Err(e)) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("cannot write topics.json: {e}"),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// GET_BROKER_RUNTIME_INFO: the key set RocketMQ 4.9.4 sends (AdminBrokerProcessor's
    /// `prepareRuntimeInfo` over DefaultMessageStore's and StoreStatsService's `getRuntimeInfo`),
    /// which mqadmin `brokerStatus`/`clusterList` and the Dashboard read, plus 5.x's
    /// `getTransferredTps` (see `store_stats`). The thread-pool-queue keys come from actor
    /// mailboxes; the delayed-delivery progress (`scheduleMessageOffset_<level>`) from the
    /// schedule actor.
    fn runtime_info(&self, req: RemotingCommand) -> Handled {
        let t = self.runtime_table();
        let (store, reader) = (self.store.clone(), self.reader.clone());
        later(async move {
            let mut t = t;
            // "<delivered up to>,<queue max>" per level in RocketMQ's progress table
            // (ScheduleMessageService.buildRunningStats), which holds a level once a message was
            // delayed at it: here, a level with progress or with a schedule queue.
            if let Some(d) = store.delay_offsets().await {
                use actormq_core::store::schedule::SCHEDULE_TOPIC;
                for (level, off) in &d.0 {
                    let queue = (*level as i32).saturating_sub(1);
                    if *off == 0 && reader.queue(SCHEDULE_TOPIC, queue).is_none() {
                        continue;
                    }
                    let max = reader.max_offset(SCHEDULE_TOPIC, queue).0;
                    t.insert(
                        format!("scheduleMessageOffset_{level}"),
                        format!("{off},{max}"),
                    );
                }
            }
            let body = to_json_bytes(&KvTable { table: t }).unwrap_or_default();
            ok(&req).with_body(body)
        })
    }

    fn runtime_table(&self) -> std::collections::BTreeMap<String, String> {
        use super::store_stats::{human_bytes, java_disk_ratio, java_double};
        let mut t = std::collections::BTreeMap::new();
        let mut put = |k: &str, v: String| {
            t.insert(k.to_string(), v);
        };
        let writer = self.store.writer().probe();
        put(
            "brokerVersionDesc",
            self.settings.load().version_desc.clone(),
        );
        put("brokerVersion", "401".to_string());
        put("bootTimestamp", self.boot_ms.to_string());
        put("msgPutTotalTodayNow", self.stats.put_msgs.get().to_string());
        put("msgGetTotalTodayNow", self.stats.got_msgs.get().to_string());
        put("msgPutTotalYesterdayMorning", "0".to_string());
        put("msgGetTotalYesterdayMorning", "0".to_string());
        put("msgPutTotalTodayMorning", "0".to_string());
        put("msgGetTotalTodayMorning", "0".to_string());
        let max = self.store.max_offset().0;
        put("commitLogMaxOffset", max.to_string());
        // RocketMQ's CommitLog.getMinOffset: -1 while there is no CommitLog file.
        let log = self.reader.commit_log();
        let has_file = !log.files().is_empty();
        put(
            "commitLogMinOffset",
            if has_file {
                log.min_offset().to_string()
            } else {
                "-1".to_string()
            },
        );
        put(
            "dispatchBehindBytes",
            max.saturating_sub(self.store.dispatched_offset().0)
                .to_string(),
        );
        put(
            "remainHowManyDataToFlush",
            human_bytes(max.saturating_sub(self.store.flushed_offset().0)),
        );
        put("pageCacheLockTimeMills", "0".to_string());
        // RocketMQ reports Integer.MAX_VALUE when the pool is off, and the bytes written but not
        // committed only when it is on.
        let pool = self.store.write_buffer_pool();
        put(
            "remainTransientStoreBufferNumbs",
            pool.map_or(i32::MAX as usize, |p| p.available())
                .to_string(),
        );
        if pool.is_some() {
            let committed = log.max_offset();
            let wrote = log.max_wrote_offset();
            put(
                "remainHowManyDataToCommit",
                human_bytes(wrote.saturating_sub(committed)),
            );
        }
        let state = self.store.state();
        self.stats.store.fill_with_deliveries(
            state.delivered_msgs.load(Ordering::Relaxed),
            state.delivered_bytes.load(Ordering::Relaxed),
            &mut t,
        );
        self.all_rates.fill_put_latency(&mut t);
        let mut put = |k: &str, v: String| {
            t.insert(k.to_string(), v);
        };
        // DefaultMessageStore.getEarliestMessageTime: the store time of the first record, read
        // as a block of 2 × maxMessageSize bytes from the first file, so -1 while that file holds
        // fewer bytes past it (and with no message stored) — what 4.9.4 reports, and mqadmin
        // `clusterList`'s #Hour is computed from.
        let block = 2 * u64::from(self.live.config().store.max_message_size);
        let earliest = log
            .files()
            .first()
            .filter(|f| f.readable_position() >= block)
            .and_then(|_| self.reader.store_time_at(PhyOffset(log.min_offset())));
        put(
            "earliestMessageTimeStamp",
            earliest.unwrap_or(-1).to_string(),
        );
        put("startAcceptSendRequestTimeStamp", "0".to_string());
        let config = self.live.config();
        // Each CommitLog path's ratio (RocketMQ's `commitLogDiskRatio_<path>`, -1 for a path
        // that does not exist) and the least of them; the paths as configured.
        let cl_dir = config.store.commitlog_dir();
        let ratio = |p: &std::path::Path| {
            if !p.exists() {
                return -1.0;
            }
            crate::fsutil::space_usable(p).map_or(-1.0, |(t, f, a)| java_disk_ratio(t, f, a))
        };
        let cl_ratio = ratio(&cl_dir);
        put(
            &format!("commitLogDiskRatio_{}", cl_dir.display()),
            java_double(cl_ratio),
        );
        put("commitLogDiskRatio", java_double(cl_ratio));
        // The ConsumeQueues' disk (with `storePathCommitLog` elsewhere, another file system). A
        // directory not made yet (no message stored) is measured where it will be made.
        let cq_dir = config.store.consumequeue_dir();
        let cq_at = cq_dir.ancestors().find(|p| p.exists()).unwrap_or(&cq_dir);
        put("consumeQueueDiskRatio", java_double(ratio(cq_at)));
        // RocketMQ measures the root directory: total and usable (non-root) space.
        let root = &config.store.store_path_root_dir;
        if let Ok((total, _, usable)) = crate::fsutil::space_usable(root) {
            put(
                "commitLogDirCapacity",
                format!(
                    "Total : {}, Free : {}.",
                    human_bytes(total),
                    human_bytes(usable)
                ),
            );
        }
        put("sendThreadPoolQueueSize", writer.depth.get().to_string());
        put("sendThreadPoolQueueCapacity", "4096".to_string());
        put(
            "sendThreadPoolQueueHeadWaitTimeMills",
            (writer.last_wait_us.load(Ordering::Relaxed) / 1000).to_string(),
        );
        let pulls = self.pull_hold.probe();
        put("pullThreadPoolQueueSize", pulls.depth.get().to_string());
        put("pullThreadPoolQueueCapacity", "1024".to_string());
        put(
            "pullThreadPoolQueueHeadWaitTimeMills",
            (pulls.last_wait_us.load(Ordering::Relaxed) / 1000).to_string(),
        );
        // No such queues here: queries (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, …) are answered on the
        // connection thread that reads them, and there is no end-transaction pool. Nothing waits,
        // and nothing is bounded (Integer.MAX_VALUE, an unbounded Java queue's capacity).
        put("queryThreadPoolQueueSize", "0".to_string());
        put("queryThreadPoolQueueCapacity", i32::MAX.to_string());
        put("queryThreadPoolQueueHeadWaitTimeMills", "0".to_string());
        put("EndTransactionQueueSize", "0".to_string());
        put(
            "EndTransactionThreadPoolQueueCapacity",
            i32::MAX.to_string(),
        );
        t
    }
}

/// What the SEND path reads of a topic's config.
#[derive(Clone, Copy)]
struct SendTopic {
    writable: bool,
    perm: u32,
    read_queue_nums: u32,
    write_queue_nums: u32,
    multi_tag: bool,
}

impl SendTopic {
    fn of(t: &TopicConfig) -> SendTopic {
        SendTopic {
            writable: t.writable(),
            perm: t.perm,
            read_queue_nums: t.read_queue_nums,
            write_queue_nums: t.write_queue_nums,
            multi_tag: t.topic_filter_type == "MULTI_TAG",
        }
    }
}

/// What the SEND path needs from a message's properties, found in one pass with the parser's
/// rules (last duplicate wins).
struct SendProps<'a> {
    transaction: bool,
    /// `WAIT`'s value, if there (it is not stored, unless the message is delayed).
    wait: Option<&'a str>,
    /// Java's `isWaitStoreMsgOK`: `WAIT` absent or "true" in any case (`Boolean.parseBoolean`;
    /// "FALSE" or "no" do not wait). Carried beside the stored bytes as
    /// [`NewMessage::wait_store_msg_ok`], since `WAIT` is not stored.
    wait_store_msg_ok: bool,
    /// `DELAY` holds a level above 0: the message goes to SCHEDULE_TOPIC_XXXX first.
    delayed: bool,
    uniq: Option<&'a str>,
    kind: crate::metrics::MessageType,
}

impl<'a> SendProps<'a> {
    fn scan(props: &'a str) -> SendProps<'a> {
        let (mut wait, mut delayed, mut uniq) = (None, false, None);
        let mut kind = crate::metrics::TypeScan::default();
        for (k, v) in properties::entries(props) {
            match k {
                keys::CLUSTER => {} // the broker puts its own
                keys::WAIT => wait = Some(v),
                keys::DELAY => {
                    delayed = v.parse::<i32>().is_ok_and(|level| level > 0);
                    kind.see(k, v)
                }
                keys::UNIQ_KEY => uniq = Some(v),
                _ => kind.see(k, v),
            }
        }
        SendProps {
            transaction: kind.transaction(),
            wait,
            wait_store_msg_ok: wait.is_none_or(|v| v.eq_ignore_ascii_case("true")),
            delayed,
            uniq,
            kind: kind.kind(),
        }
    }

    /// The properties a single message is stored with, as 4.9.4's SendMessageProcessor stores
    /// them: `CLUSTER` put (Java's putProperty replaces a client's own in its place), `WAIT`
    /// removed whatever its value ("to save 9 bytes"), in Java's HashMap order ([`java_order`]).
    /// A delayed message keeps `WAIT`, put back after `CLUSTER`: CommitLog re-encodes the map,
    /// where the processor had put it back, when it moves it to SCHEDULE_TOPIC_XXXX. Whether the
    /// append waits travels as [`SendProps::wait_store_msg_ok`], not in these bytes. One
    /// allocation.
    fn stored(&self, props: &str, cluster: &str) -> String {
        let put = Op::Put(keys::CLUSTER, cluster);
        match self.wait {
            Some(w) if self.delayed => java_order(
                props,
                &[put, Op::Remove(keys::WAIT), Op::Put(keys::WAIT, w)],
            ),
            Some(_) => java_order(props, &[put, Op::Remove(keys::WAIT)]),
            None => java_order(props, &[put]),
        }
    }
}

/// Whether a SEND's body is a batch. Apache RocketMQ 4.9.4 decides by the request code alone
/// (SendMessageProcessor.asyncProcessRequest), so a 4.x client's SEND_MESSAGE(_V2) with
/// `batch=true` — Apache's C++ client sends its batches so — is stored as one message whose body
/// is the encoded batch. 5.x brokers go by the header's `batch` flag; a client announcing 5.0 or
/// later in the command's `version` gets that.
fn is_batch(req: &RemotingCommand, header_batch: bool) -> bool {
    req.code == rq::SEND_BATCH_MESSAGE || (header_batch && req.version >= V5_0_0)
}

/// `MQVersion.Version.V5_0_0.ordinal()` (common/.../MQVersion.java).
const V5_0_0: i32 = 413;

/// `first` followed by `rest`, with a separator between them if `first` lacks its trailing one
/// (4.9.4 CommitLog.MessageExtBatchEncoder: `needAppendLastPropertySeparator`).
fn with_properties(first: &str, rest: &str) -> String {
    let mut out = String::with_capacity(first.len() + rest.len() + 1);
    out.push_str(first);
    if !first.is_empty() && !rest.is_empty() && !first.ends_with(properties::PROPERTY_SEPARATOR) {
        out.push(properties::PROPERTY_SEPARATOR);
    }
    out.push_str(rest);
    out
}

/// What a reply needs of its request, so a pending SEND does not hold the request.
struct ReplyTo {
    opaque: i32,
    serialize_type: actormq_core::protocol::command::SerializeType,
}

impl ReplyTo {
    fn of(req: &RemotingCommand) -> ReplyTo {
        ReplyTo {
            opaque: req.opaque,
            serialize_type: req.serialize_type,
        }
    }

    fn response(&self, code: i32, remark: Option<String>) -> RemotingCommand {
        let mut r = RemotingCommand::new_request(code);
        r.flag = actormq_core::protocol::command::RESPONSE_FLAG;
        r.opaque = self.opaque;
        r.serialize_type = self.serialize_type;
        r.remark = remark.filter(|s| !s.is_empty());
        r
    }
}

/// A stored SEND's reply header (`SendMessageResponseHeader`, fields in its order) written in
/// one buffer, without the intermediate strings of the typed header. Filled for SUCCESS and for
/// FLUSH_DISK_TIMEOUT alike, as RocketMQ does for its "sendOK" codes.
fn send_ok_fields(
    store_host: SocketAddr,
    phy_offset: i64,
    queue_id: i32,
    queue_offset: i64,
    transaction_id: Option<&str>,
) -> actormq_core::protocol::command::ExtFields {
    let text = 96 + transaction_id.map_or(0, str::len);
    let mut ext = actormq_core::protocol::command::ExtFields::with_capacity_and_text(6, text);
    ext.push_wire_with("msgId", |t| {
        let _ = actormq_core::format::msg_id::write_offset_msg_id(t, store_host, phy_offset);
    });
    ext.push_wire_with("queueId", |t| {
        t.push_str(itoa::Buffer::new().format(queue_id))
    });
    ext.push_wire_with("queueOffset", |t| {
        t.push_str(itoa::Buffer::new().format(queue_offset))
    });
    if let Some(id) = transaction_id {
        ext.push_wire_with("transactionId", |t| t.push_str(id));
    }
    ext.push_wire_with("MSG_REGION", |t| t.push_str("DefaultRegion"));
    ext.push_wire_with("TRACE_ON", |t| t.push_str("true"));
    ext.finish_wire();
    ext
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MessageType;

    fn props(entries: &[(&str, &str)]) -> String {
        properties::encode(entries)
    }

    #[test]
    fn a_single_message_is_stored_without_wait_and_with_the_brokers_cluster() {
        // What the Java client sends, and what 4.9.4 stores, in its HashMap order (each
        // expected string printed by a JVM): no WAIT, CLUSTER set.
        let sent = props(&[("WAIT", "true"), ("TAGS", "A"), ("UNIQ_KEY", "U1")]);
        let stored = SendProps::scan(&sent).stored(&sent, "DefaultCluster");
        assert_eq!(
            stored,
            props(&[
                ("UNIQ_KEY", "U1"),
                ("CLUSTER", "DefaultCluster"),
                ("TAGS", "A")
            ])
        );
        // A client's own CLUSTER is replaced, as Java's putProperty replaces it.
        let sent = props(&[("CLUSTER", "theirs"), ("TAGS", "A")]);
        let stored = SendProps::scan(&sent).stored(&sent, "ours");
        assert_eq!(stored, props(&[("CLUSTER", "ours"), ("TAGS", "A")]));
        let sent = props(&[("TAGS", "A")]);
        assert_eq!(
            SendProps::scan(&sent).stored(&sent, "c"),
            props(&[("CLUSTER", "c"), ("TAGS", "A")])
        );
    }

    /// 4.9.4 removes `WAIT` whatever its value, and its message in memory keeps it for
    /// `isWaitStoreMsgOK`: a `WAIT=false` send is stored without it and still does not wait for
    /// a SYNC_FLUSH flush or a SYNC_MASTER slave; any other value than "true" (any case) is false.
    #[test]
    fn a_wait_false_send_is_stored_without_wait_and_does_not_wait() {
        let message = |sent: &str| {
            let scan = SendProps::scan(sent);
            let mut m = NewMessage::new(
                "T",
                0,
                bytes::Bytes::new(),
                scan.stored(sent, "c"),
                0,
                "127.0.0.1:1".parse().unwrap(),
                "127.0.0.1:2".parse().unwrap(),
            );
            m.wait_store_msg_ok = scan.wait_store_msg_ok;
            m
        };
        // Java's stored string for {WAIT=false, TAGS=A} with CLUSTER=c put and WAIT removed.
        let m = message(&props(&[("WAIT", "false"), ("TAGS", "A")]));
        assert_eq!(m.properties, props(&[("CLUSTER", "c"), ("TAGS", "A")]));
        assert!(!crate::store::writer::waits(&m));
        let m = message(&props(&[("WAIT", "FALSE"), ("TAGS", "A")]));
        assert!(!crate::store::writer::waits(&m));
        assert_eq!(properties::find(&m.properties, keys::WAIT), None);
        let m = message(&props(&[("WAIT", "no")]));
        assert!(!crate::store::writer::waits(&m));
        // Absent or "true" in any case waits; either way nothing of it is stored.
        for sent in [
            props(&[("TAGS", "A")]),
            props(&[("WAIT", "True"), ("TAGS", "A")]),
        ] {
            let m = message(&sent);
            assert!(crate::store::writer::waits(&m), "{sent:?}");
            assert_eq!(m.properties, props(&[("CLUSTER", "c"), ("TAGS", "A")]));
        }
        // A delayed WAIT=false keeps its entry in the stored bytes (as 4.9.4's re-encoded map
        // does) and still does not wait.
        let m = message(&props(&[("WAIT", "false"), ("DELAY", "3")]));
        assert_eq!(
            m.properties,
            props(&[("CLUSTER", "c"), ("DELAY", "3"), ("WAIT", "false")])
        );
        assert!(!crate::store::writer::waits(&m));
    }

    #[test]
    fn a_delayed_message_keeps_wait_as_4_9_4_stores_it() {
        let sent = props(&[("WAIT", "true"), ("DELAY", "3")]);
        let stored = SendProps::scan(&sent).stored(&sent, "c");
        assert_eq!(
            stored,
            props(&[("CLUSTER", "c"), ("DELAY", "3"), ("WAIT", "true")])
        );
        // Level 0 is no delay: WAIT goes.
        let sent = props(&[("WAIT", "true"), ("DELAY", "0")]);
        let stored = SendProps::scan(&sent).stored(&sent, "c");
        assert_eq!(stored, props(&[("CLUSTER", "c"), ("DELAY", "0")]));
    }

    #[test]
    fn batch_elements_get_the_batch_properties_appended_duplicates_included() {
        // Both as Java's clients and broker write them: no separator after the last entry.
        let batch = props(&[("WAIT", "true"), ("CLUSTER", "c")]);
        let element = props(&[("WAIT", "true"), ("TAGS", "C")]);
        assert_eq!(
            with_properties(&element, &batch),
            format!("{element}\u{2}{batch}")
        );
        // An element that ends in a separator gets no second one.
        assert_eq!(
            with_properties("TAGS\u{1}C\u{2}", &batch),
            format!("TAGS\u{1}C\u{2}{batch}")
        );
        assert_eq!(with_properties("", &batch), batch);
    }

    #[test]
    fn a_batch_is_told_by_its_request_code_unless_a_5_x_client_flags_it() {
        let mut req = RemotingCommand::new_request(rq::SEND_MESSAGE_V2);
        req.version = 401; // V4_9_4: Apache's C++ client and 4.x clients
        assert!(!is_batch(&req, true));
        req.version = V5_0_0;
        assert!(is_batch(&req, true));
        assert!(!is_batch(&req, false));
        req.code = rq::SEND_BATCH_MESSAGE;
        req.version = 401;
        assert!(is_batch(&req, false));
    }

    #[test]
    fn pull_batches_are_judged_against_the_machines_memory_or_its_containers_limit() {
        let m = physical_memory().expect("Linux says how much memory there is");
        // SAFETY: sysinfo only writes the zeroed struct it is given.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::sysinfo(&mut info) }, 0);
        let machine = info.totalram as u64 * u64::from(info.mem_unit.max(1));
        assert!(m <= machine, "{m} > the machine's {machine}");
        assert!(m >= 64 << 20, "{m} bytes: a unit was lost");
    }

    #[test]
    fn the_send_reply_header_is_the_typed_headers_bytes() {
        let host: SocketAddr = "10.1.2.3:10911".parse().unwrap();
        for tx in [None, Some("7F0000010001B4AAC26B1C7A1E0A0000")] {
            let mut typed = SendMessageResponseHeader::new(offset_msg_id(host, 123_456), 3, 42);
            typed.transaction_id = tx.map(str::to_owned);
            let fast = send_ok_fields(host, 123_456, 3, 42, tx);
            let want: Vec<_> = typed
                .to_ext_fields()
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let got: Vec<_> = fast
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn one_pass_over_the_properties_reads_what_the_lookups_read() {
        let p = |entries: &[(&str, &str)]| properties::encode(entries);
        let cases = [
            String::new(),
            p(&[("UNIQ_KEY", "AB"), ("TAGS", "t")]),
            p(&[("TRAN_MSG", "true"), ("UNIQ_KEY", "A"), ("UNIQ_KEY", "B")]),
            p(&[("TRAN_MSG", "true"), ("TRAN_MSG", "false")]),
            p(&[("TRAN_MSG", "TRUE")]),
            p(&[("CLUSTER", "c1"), ("__SHARDINGKEY", "k")]),
            p(&[("DELAY", "3")]),
            p(&[("__STARTDELIVERTIME", "1700000000000")]),
            // A segment the parser drops (empty value) and no trailing separator.
            "UNIQ_KEY\u{1}\u{2}TAGS\u{1}x".to_string(),
        ];
        for props in &cases {
            let s = SendProps::scan(props);
            assert_eq!(s.uniq, properties::find(props, keys::UNIQ_KEY), "{props:?}");
            assert_eq!(
                s.transaction,
                properties::find(props, keys::TRAN_MSG)
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                "{props:?}"
            );
            assert_eq!(s.kind, crate::metrics::message_type(props), "{props:?}");
            assert_eq!(s.transaction, s.kind == MessageType::Transaction);
        }
    }
}
