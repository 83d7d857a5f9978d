//! `actormq bench produce` / `actormq bench consume`: load generators that speak RocketMQ's
//! remoting protocol over TCP, so they can be pointed at ActorMQ or at any RocketMQ-compatible
//! broker (issue #4).
//!
//! Both start from a name server, as real clients do: GET_ROUTEINFO_BY_TOPIC (105) for the topic
//! — the producer falls back to the route of `TBW102` when the topic does not exist yet, so the
//! broker auto-creates it on the first send — and the master (brokerId 0) of the first broker in
//! `brokerDatas`.
//!
//! * Produce: `C` TCP connections, each a writer task and a reader task. The writer keeps up to
//!   `window` requests in flight (a semaphore; `sync` = window 1; `oneway` = no window, no
//!   replies, except for one final two-way request that tells when the broker has handled all of
//!   them), writes requests back to back and flushes only when the window is full, the `--rate`
//!   pacer (tokio's 1 ms timer) makes it wait, or the run ends. The reader matches replies to requests by `opaque`, records
//!   the request latency (HdrHistogram, from the moment the request was queued for the socket)
//!   and counts errors per response code with the first remark. Messages look like a Java
//!   client's: SEND_MESSAGE_V2 (310, short header names; `--v1` for SEND_MESSAGE 10) or
//!   SEND_BATCH_MESSAGE (320, body as `protocol/batch.rs`) with properties `TAGS`, `UNIQ_KEY` (32
//!   upper-hex digits) and `WAIT=true`.
//! * Consume: every read queue of the topic's master is pulled with PULL_MESSAGE (11) without
//!   suspension, one pull in flight per queue, queues spread over `C` connections, from offset 0
//!   (or the queue's max offset with `--from-end`), until `--count` messages, `--duration`, or no
//!   new message anywhere for `--idle` seconds. Every record of every pull body is validated with
//!   `record::check` (`--check-crc` also verifies body CRCs).
//!
//! A progress line is printed every second (unless `quiet`), then the totals: msgs/s, latency,
//! this process's CPU per message and the broker's ([`crate::tools::bench_cpu`]: `--broker-pid`,
//! `--broker-metrics`, else the broker's own `/metrics` found through its configuration).
//! The library entry points ([`run_produce`], [`run_consume`]) run on any multi-thread tokio
//! runtime; the binary gives them one with the default number of workers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actormq_core::format::properties::{self, keys};
use actormq_core::format::record::{check, Check};
use actormq_core::meta::AUTO_CREATE_TOPIC;
use actormq_core::protocol::batch::encode_batch_item;
use actormq_core::protocol::body::{parse_java_json, TopicRouteData, MASTER_ID};
use actormq_core::protocol::codes::{request_code, response_code, response_code_name};
use actormq_core::protocol::command::{ExtFields, RemotingCommand, SerializeType};
use actormq_core::protocol::header::{
    pull_sys_flag, GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader,
    GetRouteInfoRequestHeader, PullMessageRequestHeader, PullMessageResponseHeader,
    SendHeaderNames, SendMessageRequestHeader,
};
use anyhow::{bail, Context as _};
use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::remoting::client::RemotingClient;
use crate::remoting::RemotingCodec;
use crate::tools::bench_cpu::{BrokerCpuArgs, BrokerMeter, BrokerUsage};

/// Timeout of the name-server and admin requests (route, max offset).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Java's `defaultTopicQueueNums`: queues a producer asks for when the topic is auto-created.
const JAVA_DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;
/// The writer flushes its buffer once this many bytes are queued, even with window left.
const WRITE_BUFFER_FLUSH: usize = 64 * 1024;
/// Upper bound of the latency histograms (µs): one minute.
const HIST_MAX_US: u64 = 60_000_000;
/// How long the consumer waits before pulling a queue again after PULL_NOT_FOUND.
const EMPTY_QUEUE_BACKOFF: Duration = Duration::from_millis(5);

fn new_hist() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, HIST_MAX_US, 3).expect("static bounds are valid")
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, HIST_MAX_US)
}

/// CPU time (user + system) this process has used so far.
pub(crate) fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time each named thread of this process has used so far, summed by thread name (Linux:
/// `/proc/self/task/*/schedstat`, nanosecond run time; empty where that is not readable).
pub(crate) fn thread_cpu() -> Vec<(String, Duration)> {
    let mut by_name: Vec<(String, Duration)> = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("schedstat")),
        ) else {
            continue;
        };
        let ns = stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let name = comm.trim().to_string();
        match by_name.iter_mut().find(|(n, _)| *n == name) {
            Some((_, d)) => *d += Duration::from_nanos(ns),
            None => by_name.push((name, Duration::from_nanos(ns))),
        }
    }
    by_name
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

// ---------------------------------------------------------------------------------------------
// Arguments

/// How the producer waits for replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SendMode {
    /// One request in flight per connection (window 1).
    Sync,
    /// Up to `--window` requests in flight per connection.
    Async,
    /// Oneway requests (flag bit 1): the broker sends nothing back; no latency, no error counts.
    Oneway,
}

/// How request headers are encoded on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HeaderEncoding {
    /// JSON (serialize type 0): what Java clients send by default.
    Json,
    /// RocketMQ's binary header (serialize type 1).
    Rocketmq,
}

impl HeaderEncoding {
    fn serialize_type(self) -> SerializeType {
        match self {
            HeaderEncoding::Json => SerializeType::Json,
            HeaderEncoding::Rocketmq => SerializeType::RocketMq,
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct ProduceArgs {
    /// Name-server address(es), `host:port;host:port` (tried in order).
    #[arg(
        short = 'n',
        long,
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876"
    )]
    pub namesrv: String,
    /// Topic to send to (auto-created from TBW102's route if the name server has none).
    #[arg(long, default_value = "BenchTopic")]
    pub topic: String,
    /// Body size of each message, bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// TCP connections to the broker.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Requests in flight per connection (async mode).
    #[arg(long, default_value_t = 256)]
    pub window: usize,
    /// Messages per request; > 1 sends SEND_BATCH_MESSAGE (320).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// sync (window 1), async (window `--window`) or oneway.
    #[arg(long, value_enum, default_value_t = SendMode::Async)]
    pub mode: SendMode,
    /// Run for this many seconds (default 10 when neither this nor `--count` is given).
    #[arg(long, conflicts_with = "count")]
    pub duration: Option<f64>,
    /// Send this many messages in all, then stop.
    #[arg(long)]
    pub count: Option<u64>,
    /// Spread queueId over 0..N (default: the topic's write queues from the route; 4 for a topic
    /// about to be auto-created, as Java's defaultTopicQueueNums).
    #[arg(long)]
    pub queues: Option<i32>,
    /// Limit the send rate to this many messages per second in all (paced per connection).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Send SEND_MESSAGE (10) with long header names instead of SEND_MESSAGE_V2 (310).
    #[arg(long)]
    pub v1: bool,
    /// Request header encoding.
    #[arg(long, value_enum, default_value_t = HeaderEncoding::Json)]
    pub header: HeaderEncoding,
    /// Producer group written in the send header.
    #[arg(long, default_value = "bench_producer")]
    pub group: String,
    /// TAGS property of every message.
    #[arg(long, default_value = "BenchTag")]
    pub tag: String,
    /// Seconds a request may wait for its reply before the connection is declared stalled.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// No per-second progress lines.
    #[arg(long)]
    pub quiet: bool,
    /// Client threads. One spends ~2.1 µs of CPU per 1 KiB message on the 2-core machine of the
    /// README's figures (a core to itself would drive ~450,000 msgs/s) and, on a machine the
    /// broker shares, leaves it the rest: two cost ~10 % more CPU per message in wake-ups between
    /// threads. Raise it for a remote broker on a larger machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    #[command(flatten)]
    pub broker_cpu: BrokerCpuArgs,
}

#[derive(Clone, Debug, clap::Args)]
pub struct ConsumeArgs {
    /// Name-server address(es), `host:port;host:port` (tried in order).
    #[arg(
        short = 'n',
        long,
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876"
    )]
    pub namesrv: String,
    /// Topic to read.
    #[arg(long, default_value = "BenchTopic")]
    pub topic: String,
    /// Consumer group written in the pull header.
    #[arg(long, default_value = "bench_consumer")]
    pub group: String,
    /// TCP connections to the broker (queues are spread over them).
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// maxMsgNums of each pull.
    #[arg(long, default_value_t = 32)]
    pub batch_size: i32,
    /// Stop once this many messages have arrived (pulls already in flight still count, so up to
    /// one batch per queue more may be read).
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Start at each queue's max offset instead of 0.
    #[arg(long)]
    pub from_end: bool,
    /// Stop when no queue has had a new message for this many seconds.
    #[arg(long, default_value_t = 2.0)]
    pub idle: f64,
    /// Verify each message's body CRC too.
    #[arg(long)]
    pub check_crc: bool,
    /// Seconds a pull may wait for its reply.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// No per-second progress lines.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub broker_cpu: BrokerCpuArgs,
}

/// Parses the defaults of a clap `Args` struct (plus `args`), for library users and tests.
fn parse_args<A: clap::Args + clap::FromArgMatches>(args: &[&str]) -> Result<A, clap::Error> {
    let cmd = A::augment_args(clap::Command::new("bench").no_binary_name(true));
    let m = cmd.try_get_matches_from(args)?;
    A::from_arg_matches(&m)
}

impl ProduceArgs {
    /// The options as the command line `args` (without the subcommand) would give them.
    pub fn parse(args: &[&str]) -> Result<ProduceArgs, clap::Error> {
        parse_args(args)
    }
}

impl ConsumeArgs {
    /// The options as the command line `args` (without the subcommand) would give them.
    pub fn parse(args: &[&str]) -> Result<ConsumeArgs, clap::Error> {
        parse_args(args)
    }
}

// ---------------------------------------------------------------------------------------------
// Errors and reports

/// Where a failed request's error came from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorSource {
    /// The broker answered with this response code.
    Broker(i32),
    /// No reply within `--timeout`.
    Timeout,
    /// The connection failed or closed with the request in flight.
    Connection,
    /// A pulled body did not decode as CommitLog records.
    Corrupt,
}

impl std::fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorSource::Broker(c) => write!(f, "code {c} {}", response_code_name(*c)),
            ErrorSource::Timeout => f.write_str("client TIMEOUT"),
            ErrorSource::Connection => f.write_str("client CONNECTION"),
            ErrorSource::Corrupt => f.write_str("client CORRUPT_BODY"),
        }
    }
}

/// Failed requests of one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorCount {
    pub source: ErrorSource,
    pub requests: u64,
    /// Messages in those requests (produce; equals `requests` for pulls).
    pub messages: u64,
    /// The first remark (or client-side description) seen.
    pub first_remark: String,
}

#[derive(Default)]
struct Errors(BTreeMap<ErrorSource, ErrorCount>);

impl Errors {
    fn add(&mut self, source: ErrorSource, requests: u64, messages: u64, remark: &str) {
        let e = self.0.entry(source.clone()).or_insert_with(|| ErrorCount {
            source,
            requests: 0,
            messages: 0,
            first_remark: remark.to_string(),
        });
        e.requests += requests;
        e.messages += messages;
    }
    fn merge(&mut self, other: Errors) {
        for (_, e) in other.0 {
            self.add(e.source, e.requests, e.messages, &e.first_remark);
        }
    }
    fn into_vec(self) -> Vec<ErrorCount> {
        self.0.into_values().collect()
    }
}

/// Latency percentiles, µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub samples: u64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Option<Latency> {
        (!h.is_empty()).then(|| Latency {
            p50_us: h.value_at_quantile(0.50),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            samples: h.len(),
        })
    }
}

/// Where the bench sent its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub broker_name: String,
    /// `host:port` of the master.
    pub broker_addr: String,
    /// Queues used (write queues for produce, read queues for consume).
    pub queues: i32,
    /// The topic had no route; TBW102's was used (the broker auto-creates the topic).
    pub via_default_topic: bool,
}

#[derive(Clone, Debug)]
pub struct ProduceReport {
    pub target: Target,
    /// Messages written to the sockets.
    pub sent: u64,
    /// Messages the broker answered SUCCESS for (oneway: equals `sent`).
    pub acked: u64,
    /// From the first request to the last reply (oneway: to the last write).
    pub elapsed: Duration,
    pub msgs_per_s: f64,
    /// Body bytes acknowledged per second, 10^6 bytes.
    pub mb_per_s: f64,
    /// Per request (a batch is one request); `None` in oneway mode.
    pub latency: Option<Latency>,
    pub errors: Vec<ErrorCount>,
    /// CPU time this process used during the run (the load generator's own cost, so a reader can
    /// tell whether the client was the bottleneck; includes the broker when run in-process).
    pub process_cpu: Duration,
    /// The broker's CPU from the first request to the last reply, over the messages acked.
    pub broker_cpu: BrokerUsage,
}

impl ProduceReport {
    /// Failed requests, all kinds.
    pub fn failed_requests(&self) -> u64 {
        self.errors.iter().map(|e| e.requests).sum()
    }
}

#[derive(Clone, Debug)]
pub struct ConsumeReport {
    pub target: Target,
    pub messages: u64,
    /// Message body bytes.
    pub body_bytes: u64,
    /// Whole CommitLog records, as they travelled.
    pub record_bytes: u64,
    /// From the first pull to the last message received.
    pub elapsed: Duration,
    pub msgs_per_s: f64,
    /// Body bytes per second, 10^6 bytes.
    pub mb_per_s: f64,
    pub pulls: u64,
    /// Pulls that found nothing (PULL_NOT_FOUND).
    pub empty_pulls: u64,
    /// Per pull request.
    pub latency: Option<Latency>,
    pub errors: Vec<ErrorCount>,
    /// CPU time this process used during the run (see [`ProduceReport::process_cpu`]).
    pub process_cpu: Duration,
    /// The broker's CPU over the whole run (the final `--idle` wait's empty pulls included),
    /// over the messages received.
    pub broker_cpu: BrokerUsage,
}

impl ConsumeReport {
    pub fn failed_requests(&self) -> u64 {
        self.errors.iter().map(|e| e.requests).sum()
    }
}

// ---------------------------------------------------------------------------------------------
// Routes

async fn admin_call(addr: &str, cmd: RemotingCommand) -> anyhow::Result<RemotingCommand> {
    let c = RemotingClient::connect(addr).await?;
    Ok(c.invoke(cmd, ADMIN_TIMEOUT).await?)
}

/// GET_ROUTEINFO_BY_TOPIC from the first name server that answers: `Ok(None)` if it says
/// TOPIC_NOT_EXIST.
pub async fn fetch_route(namesrv: &str, topic: &str) -> anyhow::Result<Option<TopicRouteData>> {
    let mut last_err = None;
    for addr in namesrv.split(';').map(str::trim).filter(|a| !a.is_empty()) {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_string(),
            accept_standard_json_only: None,
        };
        let req = RemotingCommand::new_request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_ext_fields(header.to_ext_fields());
        match admin_call(addr, req).await {
            Ok(resp) if resp.code == response_code::SUCCESS => {
                let route: TopicRouteData = parse_java_json(&resp.body)
                    .with_context(|| format!("route of {topic} from {addr}: bad body"))?;
                return Ok(Some(route));
            }
            Ok(resp) if resp.code == response_code::TOPIC_NOT_EXIST => return Ok(None),
            Ok(resp) => {
                last_err = Some(anyhow::anyhow!(
                    "name server {addr} answered {} ({}) for the route of {topic}: {}",
                    resp.code,
                    response_code_name(resp.code),
                    resp.remark.unwrap_or_default()
                ))
            }
            Err(e) => last_err = Some(e.context(format!("name server {addr}"))),
        }
    }
    Err(last_err.unwrap_or_else(|| anyhow::anyhow!("no name-server address given")))
}

/// The first broker of `route` with a master, and its (write or read) queue count.
fn master_of(route: &TopicRouteData, write: bool) -> Option<(String, String, i32)> {
    route.broker_datas.iter().find_map(|b| {
        let addr = b.broker_addrs.get(&MASTER_ID)?;
        let q = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == b.broker_name)?;
        let n = if write {
            q.write_queue_nums
        } else {
            q.read_queue_nums
        };
        Some((b.broker_name.clone(), addr.clone(), n))
    })
}

/// Where a producer sends `topic`: its route's master, else (topic not yet created) TBW102's,
/// with Java's `min(defaultTopicQueueNums, TBW102 queues)` queues.
pub async fn produce_target(namesrv: &str, topic: &str) -> anyhow::Result<Target> {
    if let Some(route) = fetch_route(namesrv, topic).await? {
        let (broker_name, broker_addr, queues) = master_of(&route, true)
            .with_context(|| format!("the route of {topic} has no master broker"))?;
        return Ok(Target {
            broker_name,
            broker_addr,
            queues,
            via_default_topic: false,
        });
    }
    let route = fetch_route(namesrv, AUTO_CREATE_TOPIC)
        .await?
        .with_context(|| {
            format!(
                "no route for {topic} nor for {AUTO_CREATE_TOPIC} (is autoCreateTopicEnable off?)"
            )
        })?;
    let (broker_name, broker_addr, queues) = master_of(&route, true)
        .with_context(|| format!("the route of {AUTO_CREATE_TOPIC} has no master broker"))?;
    Ok(Target {
        broker_name,
        broker_addr,
        queues: queues.min(JAVA_DEFAULT_TOPIC_QUEUE_NUMS),
        via_default_topic: true,
    })
}

/// Where a consumer reads `topic`. A topic created a moment ago may take a moment to reach the
/// name server (the broker registers it right after creating it), so a missing route is retried
/// for up to 3 s.
pub async fn consume_target(namesrv: &str, topic: &str) -> anyhow::Result<Target> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        if let Some(route) = fetch_route(namesrv, topic).await? {
            let (broker_name, broker_addr, queues) = master_of(&route, false)
                .with_context(|| format!("the route of {topic} has no master broker"))?;
            return Ok(Target {
                broker_name,
                broker_addr,
                queues,
                via_default_topic: false,
            });
        }
        if Instant::now() >= deadline {
            bail!("the name server has no route for topic {topic}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Progress

#[derive(Default)]
struct Counters {
    /// Messages handed to the sockets.
    sent: AtomicU64,
    /// Messages acknowledged (produce) or received (consume).
    done: AtomicU64,
    /// Body bytes acknowledged / received.
    bytes: AtomicU64,
    /// Requests in flight.
    inflight: AtomicU64,
    /// Failed requests.
    errors: AtomicU64,
}

/// Prints one line per second until `stop` is set.
fn spawn_progress(
    what: &'static str,
    c: Arc<Counters>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut tick =
            tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
        let (mut last_done, mut last_bytes, mut last_at) = (0u64, 0u64, start);
        loop {
            tick.tick().await;
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let now = tokio::time::Instant::now();
            let secs = (now - last_at).as_secs_f64().max(1e-9);
            let done = c.done.load(Ordering::Relaxed);
            let bytes = c.bytes.load(Ordering::Relaxed);
            println!(
                "[{:>4.0}s] {what} {:>10.0} msgs/s {:>8.1} MB/s   in-flight {:>6}   errors {}",
                (now - start).as_secs_f64(),
                (done - last_done) as f64 / secs,
                (bytes - last_bytes) as f64 / secs / 1e6,
                c.inflight.load(Ordering::Relaxed),
                c.errors.load(Ordering::Relaxed),
            );
            (last_done, last_bytes, last_at) = (done, bytes, now);
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Produce

/// Builds one connection's requests: what a Java producer would send.
struct RequestFactory {
    tag: String,
    body: Bytes,
    code: i32,
    serialize_type: SerializeType,
    queues: i32,
    batch: bool,
    /// The SEND header with every field that never changes; `queueId`, `bornTimestamp` and
    /// `properties` are replaced per request (in place, so the field order stays Java's).
    template: ExtFields,
    /// Wire names of those three fields in the chosen spelling.
    varying: [&'static str; 3],
    /// UNIQ_KEY = prefix (20 hex digits) + 12 hex digits of `uniq_base + seq`.
    uniq_prefix: String,
    uniq_base: u64,
    seq: u64,
    next_queue: i32,
}

/// What stays the same for every request of a run.
struct FactorySpec<'a> {
    topic: &'a str,
    group: &'a str,
    broker_name: &'a str,
    tag: &'a str,
    body: Bytes,
    code: i32,
    names: SendHeaderNames,
    serialize_type: SerializeType,
    queues: i32,
    batch: bool,
    uniq_prefix: &'a str,
}

impl RequestFactory {
    fn new(spec: &FactorySpec<'_>, connection: usize) -> RequestFactory {
        let header = SendMessageRequestHeader {
            producer_group: spec.group.to_string(),
            topic: spec.topic.to_string(),
            default_topic: AUTO_CREATE_TOPIC.to_string(),
            default_topic_queue_nums: spec.queues,
            queue_id: 0,
            sys_flag: 0,
            born_timestamp: 0,
            flag: 0,
            properties: String::new(),
            reconsume_times: 0,
            unit_mode: false,
            max_reconsume_times: None,
            batch: spec.batch,
            broker_name: Some(spec.broker_name.to_string()),
        };
        RequestFactory {
            tag: spec.tag.to_string(),
            body: spec.body.clone(),
            code: spec.code,
            serialize_type: spec.serialize_type,
            queues: spec.queues,
            batch: spec.batch,
            template: header.to_ext_fields(spec.names),
            varying: match spec.names {
                SendHeaderNames::V1 => ["queueId", "bornTimestamp", "properties"],
                SendHeaderNames::V2 => ["e", "g", "i"],
            },
            uniq_prefix: spec.uniq_prefix.to_string(),
            uniq_base: (connection as u64) << 40,
            seq: 0,
            next_queue: (connection as i32) % spec.queues.max(1),
        }
    }

    /// Appends the next message's properties (TAGS, a fresh UNIQ_KEY, WAIT) to `p`, written in
    /// place: the load generator's own cost per message is CPU the broker under test does not
    /// get on a shared machine.
    fn push_message_properties(&mut self, p: &mut String) {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let id = (self.uniq_base + self.seq) & 0xFFFF_FFFF_FFFF;
        self.seq += 1;
        let mut hex = [0u8; 12];
        for (i, h) in hex.iter_mut().enumerate() {
            *h = HEX[((id >> (44 - 4 * i)) & 0xF) as usize];
        }
        properties::push_entry(p, keys::TAGS, &self.tag);
        p.push_str(keys::UNIQ_KEY);
        p.push(properties::NAME_VALUE_SEPARATOR);
        p.push_str(&self.uniq_prefix);
        p.push_str(std::str::from_utf8(&hex).unwrap_or_default());
        p.push(properties::PROPERTY_SEPARATOR);
        properties::push_entry(p, keys::WAIT, "true");
    }

    /// The next request, carrying `n` messages.
    fn next(&mut self, n: usize, oneway: bool) -> RemotingCommand {
        let queue_id = self.next_queue;
        self.next_queue = (self.next_queue + 1) % self.queues.max(1);
        let (props, body) = if self.batch {
            let mut out = BytesMut::with_capacity(n * (self.body.len() + 100));
            let mut p = String::with_capacity(64 + self.tag.len() + self.uniq_prefix.len());
            for _ in 0..n {
                p.clear();
                self.push_message_properties(&mut p);
                encode_batch_item(0, &self.body, &p, &mut out);
            }
            // Batch-level properties, as Java's MessageBatch carries them.
            let mut p = String::new();
            properties::push_entry(&mut p, keys::WAIT, "true");
            (Some(p), out.freeze())
        } else {
            (None, self.body.clone())
        };
        let mut ext = self.template.clone();
        let [queue_key, born_key, props_key] = self.varying;
        ext.insert_with(queue_key, |t| {
            t.push_str(itoa::Buffer::new().format(queue_id))
        });
        ext.insert_with(born_key, |t| {
            t.push_str(itoa::Buffer::new().format(now_millis()))
        });
        match props {
            Some(p) => ext.insert(props_key, p),
            None => ext.insert_with(props_key, |t| self.push_message_properties(t)),
        }
        let mut cmd = RemotingCommand::new_request(self.code)
            .with_ext_fields(ext)
            .with_body(body)
            .with_serialize_type(self.serialize_type);
        if oneway {
            cmd = cmd.with_oneway();
        }
        cmd
    }
}

/// What one connection is to send.
#[derive(Clone, Copy)]
struct Plan {
    /// Messages, or unlimited until `deadline`.
    count: Option<u64>,
    deadline: Option<Instant>,
    /// Messages per second for this connection.
    rate: Option<f64>,
    batch: usize,
}

/// Requests in flight on one connection: opaque → (queued at, messages).
type InFlight = Arc<Mutex<HashMap<i32, (Instant, u32)>>>;

struct ConnOutcome {
    hist: Histogram<u64>,
    errors: Errors,
    acked: u64,
    sent: u64,
    last_reply: Option<Instant>,
}

/// What a writer leaves behind: the write half stays open until the replies are in (dropping it
/// would half-close the connection, and a broker may close on that before replying).
struct WriterEnd {
    w: FramedWrite<OwnedWriteHalf, RemotingCodec>,
    /// Messages written.
    sent: u64,
    /// When the last request was flushed.
    at: Instant,
    /// Oneway mode: opaque and message count of the final, two-way request.
    fence: Option<(i32, u32)>,
}

async fn produce_writer(
    mut w: FramedWrite<OwnedWriteHalf, RemotingCodec>,
    mut factory: RequestFactory,
    plan: Plan,
    window: Option<Arc<Semaphore>>,
    inflight: InFlight,
    counters: Arc<Counters>,
    started: Instant,
) -> std::io::Result<WriterEnd> {
    let io = std::io::Error::other;
    let oneway = window.is_none();
    let body_len = factory.body.len() as u64;
    let mut sent = 0u64;
    let mut opaque: i32 = 1;
    let mut fence = None;
    loop {
        let remaining = plan.count.map_or(u64::MAX, |c| c.saturating_sub(sent));
        let timed_out = plan.deadline.is_some_and(|d| Instant::now() >= d);
        if remaining == 0 || (timed_out && !(oneway && fence.is_none())) {
            break;
        }
        if let Some(rate) = plan.rate {
            let due = started + Duration::from_secs_f64(sent as f64 / rate);
            if due > Instant::now() {
                w.flush().await.map_err(io)?;
                tokio::time::sleep_until(due.into()).await;
            }
        }
        if let Some(sem) = &window {
            let permit = match sem.try_acquire() {
                Ok(p) => p,
                Err(_) => {
                    // Window full: put what is buffered on the wire, then wait for a reply.
                    w.flush().await.map_err(io)?;
                    match sem.acquire().await {
                        Ok(p) => p,
                        Err(_) => break, // the reader gave up on this connection
                    }
                }
            };
            permit.forget();
        }
        let n = plan
            .batch
            .min(remaining.min(usize::MAX as u64) as usize)
            .max(1);
        // Oneway mode ends with one two-way request: the broker handles a connection's requests
        // in order, so its reply means every oneway message before it was handled too.
        let last = oneway && (timed_out || remaining <= n as u64);
        let mut cmd = factory.next(n, oneway && !last);
        cmd.opaque = opaque;
        opaque = opaque.wrapping_add(1);
        if last {
            fence = Some((cmd.opaque, n as u32));
        }
        if !oneway {
            inflight
                .lock()
                .expect("in-flight map")
                .insert(cmd.opaque, (Instant::now(), n as u32));
            counters.inflight.fetch_add(1, Ordering::Relaxed);
        }
        w.feed(cmd).await.map_err(io)?;
        sent += n as u64;
        counters.sent.fetch_add(n as u64, Ordering::Relaxed);
        if oneway {
            // Written is as good as it gets.
            counters.done.fetch_add(n as u64, Ordering::Relaxed);
            counters
                .bytes
                .fetch_add(n as u64 * body_len, Ordering::Relaxed);
        }
        if last {
            break;
        }
    }
    w.flush().await.map_err(io)?;
    Ok(WriterEnd {
        w,
        sent,
        at: Instant::now(),
        fence,
    })
}

#[allow(clippy::too_many_arguments)]
async fn produce_reader(
    mut r: FramedRead<OwnedReadHalf, RemotingCodec>,
    window: Arc<Semaphore>,
    inflight: InFlight,
    writer_done: Arc<AtomicBool>,
    counters: Arc<Counters>,
    body_size: usize,
    timeout: Duration,
) -> ConnOutcome {
    let mut out = ConnOutcome {
        hist: new_hist(),
        errors: Errors::default(),
        acked: 0,
        sent: 0,
        last_reply: None,
    };
    let fail_all = |out: &mut ConnOutcome, source: ErrorSource, why: &str| {
        let mut map = inflight.lock().expect("in-flight map");
        let n = map.len() as u64;
        let msgs: u64 = map.values().map(|(_, m)| u64::from(*m)).sum();
        map.clear();
        if n > 0 {
            out.errors.add(source, n, msgs, why);
            counters.errors.fetch_add(n, Ordering::Relaxed);
            counters.inflight.fetch_sub(n, Ordering::Relaxed);
        }
    };
    loop {
        match tokio::time::timeout(Duration::from_millis(100), r.next()).await {
            Ok(Some(Ok(resp))) => {
                if !resp.is_response() {
                    continue;
                }
                let Some((at, n)) = inflight.lock().expect("in-flight map").remove(&resp.opaque)
                else {
                    continue;
                };
                let now = Instant::now();
                let _ = out.hist.record(micros(now - at));
                out.last_reply = Some(now);
                counters.inflight.fetch_sub(1, Ordering::Relaxed);
                if resp.code == response_code::SUCCESS {
                    out.acked += u64::from(n);
                    counters.done.fetch_add(u64::from(n), Ordering::Relaxed);
                    counters
                        .bytes
                        .fetch_add(u64::from(n) * body_size as u64, Ordering::Relaxed);
                } else {
                    out.errors.add(
                        ErrorSource::Broker(resp.code),
                        1,
                        u64::from(n),
                        resp.remark.as_deref().unwrap_or(""),
                    );
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                }
                window.add_permits(1);
            }
            Ok(Some(Err(e))) => {
                fail_all(&mut out, ErrorSource::Connection, &e.to_string());
                break;
            }
            Ok(None) => {
                fail_all(
                    &mut out,
                    ErrorSource::Connection,
                    "the broker closed the connection",
                );
                break;
            }
            Err(_) => {
                let oldest = inflight
                    .lock()
                    .expect("in-flight map")
                    .values()
                    .map(|(at, _)| *at)
                    .min();
                if oldest.is_some_and(|at| at.elapsed() > timeout) {
                    fail_all(
                        &mut out,
                        ErrorSource::Timeout,
                        &format!("no reply within {timeout:?}"),
                    );
                    break;
                }
            }
        }
        if writer_done.load(Ordering::Acquire) && inflight.lock().expect("in-flight map").is_empty()
        {
            break;
        }
    }
    // Stops a writer still waiting for window (stall or connection failure).
    window.close();
    out
}

/// One producer connection: connect, run writer and reader to the end.
async fn produce_connection(
    target: String,
    factory: RequestFactory,
    plan: Plan,
    window: Option<usize>,
    counters: Arc<Counters>,
    timeout: Duration,
    started: Instant,
) -> anyhow::Result<ConnOutcome> {
    let stream = TcpStream::connect(&target)
        .await
        .with_context(|| format!("cannot connect to broker {target}"))?;
    stream.set_nodelay(true)?;
    let (rd, wr) = stream.into_split();
    let mut w = FramedWrite::new(wr, RemotingCodec);
    w.set_backpressure_boundary(WRITE_BUFFER_FLUSH);
    let r = FramedRead::with_capacity(rd, RemotingCodec, 64 * 1024);
    let body_size = factory.body.len();
    let inflight: InFlight = Arc::default();
    let sem = window.map(|n| Arc::new(Semaphore::new(n.max(1))));
    let writer_done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (sem, inflight, counters, done) = (
            sem.clone(),
            inflight.clone(),
            counters.clone(),
            writer_done.clone(),
        );
        tokio::spawn(async move {
            let end = produce_writer(w, factory, plan, sem, inflight, counters, started).await;
            done.store(true, Ordering::Release);
            end
        })
    };
    let Some(sem) = sem else {
        return oneway_outcome(writer, r, &counters, timeout).await;
    };
    let reader = tokio::spawn(produce_reader(
        r,
        sem,
        inflight.clone(),
        writer_done.clone(),
        counters.clone(),
        body_size,
        timeout,
    ));
    let mut out = reader.await?;
    if !writer_done.load(Ordering::Acquire) {
        // The reader gave up (timeout or connection failure) while the writer still had work.
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !writer.is_finished() {
            writer.abort();
        }
    }
    match writer.await {
        Ok(Ok(end)) => out.sent = end.sent,
        Ok(Err(e)) => out
            .errors
            .add(ErrorSource::Connection, 0, 0, &format!("write failed: {e}")),
        Err(_) => out.sent = counters.sent.load(Ordering::Relaxed),
    }
    Ok(out)
}

/// A oneway connection's outcome: everything written counts as acknowledged, unless the final
/// (fence) request — the only one with a reply — fails.
async fn oneway_outcome(
    writer: tokio::task::JoinHandle<std::io::Result<WriterEnd>>,
    mut r: FramedRead<OwnedReadHalf, RemotingCodec>,
    counters: &Counters,
    timeout: Duration,
) -> anyhow::Result<ConnOutcome> {
    let end = writer.await??;
    let mut out = ConnOutcome {
        hist: new_hist(),
        errors: Errors::default(),
        acked: end.sent,
        sent: end.sent,
        last_reply: Some(end.at),
    };
    if let Some((fence, n)) = end.fence {
        if let Some((source, why)) = fence_failure(&mut r, fence, timeout).await {
            out.errors.add(source, 1, u64::from(n), &why);
            out.acked -= u64::from(n);
            counters.errors.fetch_add(1, Ordering::Relaxed);
        }
        out.last_reply = Some(Instant::now());
    }
    drop(end.w);
    Ok(out)
}

/// Waits for the reply to the fence request (opaque `fence`); why it failed, or `None` on
/// SUCCESS.
async fn fence_failure(
    r: &mut FramedRead<OwnedReadHalf, RemotingCodec>,
    fence: i32,
    timeout: Duration,
) -> Option<(ErrorSource, String)> {
    let reply = tokio::time::timeout(timeout, async {
        while let Some(frame) = r.next().await {
            match frame {
                Ok(resp) if resp.is_response() && resp.opaque == fence => {
                    return Ok(resp);
                }
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("the broker closed the connection".to_string())
    })
    .await;
    match reply {
        Ok(Ok(resp)) if resp.code == response_code::SUCCESS => None,
        Ok(Ok(resp)) => Some((
            ErrorSource::Broker(resp.code),
            resp.remark.unwrap_or_default(),
        )),
        Ok(Err(why)) => Some((ErrorSource::Connection, why)),
        Err(_) => Some((
            ErrorSource::Timeout,
            format!("no reply to the final request within {timeout:?}"),
        )),
    }
}

/// Runs `actormq bench produce`.
pub async fn run_produce(args: &ProduceArgs) -> anyhow::Result<ProduceReport> {
    check_produce_args(args)?;
    let target = produce_queues(args).await?;
    let uniq_prefix = uniq_prefix();
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let broker_meter = BrokerMeter::start(
        args.broker_cpu.broker_metrics.as_deref(),
        args.broker_cpu.broker_pid,
        &target.broker_addr,
    )
    .await?;
    let progress = (!args.quiet).then(|| spawn_progress("acked", counters.clone(), stop.clone()));
    let cpu_before = process_cpu();
    let spec = factory_spec(args, &target, &uniq_prefix);
    let started = Instant::now();
    let tasks = spawn_connections(args, &target, &spec, &counters, started);
    let all = gather_connections(tasks, started).await?;
    let broker_cpu = broker_meter.finish(all.acked).await;
    stop.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        p.abort();
    }
    if let Some(e) = all.first_err {
        return Err(e);
    }
    let elapsed = (all.last - started).max(Duration::from_micros(1));
    let secs = elapsed.as_secs_f64();
    Ok(ProduceReport {
        target,
        sent: all.sent,
        acked: all.acked,
        elapsed,
        msgs_per_s: all.acked as f64 / secs,
        mb_per_s: all.acked as f64 * args.size as f64 / secs / 1e6,
        latency: Latency::of(&all.hist),
        errors: all.errors.into_vec(),
        process_cpu: process_cpu().saturating_sub(cpu_before),
        broker_cpu,
    })
}

/// The options `bench produce` refuses before connecting anywhere.
fn check_produce_args(args: &ProduceArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.connections > 0, "--connections must be at least 1");
    anyhow::ensure!(args.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(
        !(args.v1 && args.batch > 1),
        "--v1 applies to single sends; batches always use SEND_BATCH_MESSAGE (320) with V2 names"
    );
    if let Some(rate) = args.rate {
        anyhow::ensure!(rate > 0.0, "--rate must be positive");
    }
    Ok(())
}

/// The topic's broker from its route, with `--queues` instead of the route's when given.
async fn produce_queues(args: &ProduceArgs) -> anyhow::Result<Target> {
    let mut target = produce_target(&args.namesrv, &args.topic).await?;
    if let Some(q) = args.queues {
        anyhow::ensure!(q > 0, "--queues must be at least 1");
        target.queues = q;
    }
    anyhow::ensure!(
        target.queues > 0,
        "the route of {} has no write queue",
        args.topic
    );
    Ok(target)
}

/// This run's UNIQ_KEY prefix: Java's starts with the client IP, pid and a per-process random
/// number.
fn uniq_prefix() -> String {
    let started_nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "7F000001{:04X}{:08X}",
        std::process::id() & 0xFFFF,
        started_nanos
    )
}

/// What every request of the run shares: a batch is SEND_BATCH_MESSAGE (320) with V2 header
/// names, a single send SEND_MESSAGE_V2 (310), or with `--v1` SEND_MESSAGE (10).
fn factory_spec<'a>(
    args: &'a ProduceArgs,
    target: &'a Target,
    uniq_prefix: &'a str,
) -> FactorySpec<'a> {
    let (code, names) = match (args.batch > 1, args.v1) {
        (true, _) => (request_code::SEND_BATCH_MESSAGE, SendHeaderNames::V2),
        (false, true) => (request_code::SEND_MESSAGE, SendHeaderNames::V1),
        (false, false) => (request_code::SEND_MESSAGE_V2, SendHeaderNames::V2),
    };
    FactorySpec {
        topic: &args.topic,
        group: &args.group,
        broker_name: &target.broker_name,
        tag: &args.tag,
        body: Bytes::from(vec![b'x'; args.size]),
        code,
        names,
        serialize_type: args.header.serialize_type(),
        queues: target.queues,
        batch: args.batch > 1,
        uniq_prefix,
    }
}

/// Starts the `--connections` producer connections, each with its share of `--count` and
/// `--rate`, all until the same `--duration` deadline.
fn spawn_connections(
    args: &ProduceArgs,
    target: &Target,
    spec: &FactorySpec<'_>,
    counters: &Arc<Counters>,
    started: Instant,
) -> Vec<tokio::task::JoinHandle<anyhow::Result<ConnOutcome>>> {
    let window = match args.mode {
        SendMode::Sync => Some(1),
        SendMode::Async => Some(args.window.max(1)),
        SendMode::Oneway => None,
    };
    let duration = match (args.count, args.duration) {
        (Some(_), _) => None,
        (None, Some(d)) => Some(Duration::from_secs_f64(d.max(0.0))),
        (None, None) => Some(Duration::from_secs(10)),
    };
    let deadline = duration.map(|d| started + d);
    let conns = args.connections;
    (0..conns)
        .map(|i| {
            let count = args
                .count
                .map(|c| c / conns as u64 + u64::from((i as u64) < c % conns as u64));
            let plan = Plan {
                count,
                deadline,
                rate: args.rate.map(|r| r / conns as f64),
                batch: args.batch,
            };
            tokio::spawn(produce_connection(
                target.broker_addr.clone(),
                RequestFactory::new(spec, i),
                plan,
                window,
                counters.clone(),
                Duration::from_secs_f64(args.timeout.max(0.001)),
                started,
            ))
        })
        .collect()
}

/// The connections' outcomes summed; the first connection that failed outright, if any.
struct Gathered {
    hist: Histogram<u64>,
    errors: Errors,
    sent: u64,
    acked: u64,
    /// The last reply of any connection (`started` when none came).
    last: Instant,
    first_err: Option<anyhow::Error>,
}

/// Waits for every connection and sums what they report.
async fn gather_connections(
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<ConnOutcome>>>,
    started: Instant,
) -> anyhow::Result<Gathered> {
    let mut all = Gathered {
        hist: new_hist(),
        errors: Errors::default(),
        sent: 0,
        acked: 0,
        last: started,
        first_err: None,
    };
    for t in tasks {
        match t.await? {
            Ok(o) => {
                all.hist.add(&o.hist)?;
                all.errors.merge(o.errors);
                all.sent += o.sent;
                all.acked += o.acked;
                if let Some(at) = o.last_reply {
                    all.last = all.last.max(at);
                }
            }
            Err(e) => all.first_err = all.first_err.or(Some(e)),
        }
    }
    Ok(all)
}

/// `CPU 0.42 s (2.1 us/msg)`.
fn cpu_line(cpu: Duration, msgs: u64) -> String {
    format!(
        "client CPU {:.2} s ({:.2} us/msg, user + system, all threads)",
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / msgs.max(1) as f64
    )
}

fn print_errors(errors: &[ErrorCount]) {
    if errors.is_empty() {
        println!("errors : none");
        return;
    }
    println!("errors :");
    for e in errors {
        println!(
            "  {:<32} {:>9} requests {:>10} messages   first: {}",
            e.source.to_string(),
            e.requests,
            e.messages,
            if e.first_remark.is_empty() {
                "(no remark)"
            } else {
                &e.first_remark
            }
        );
    }
}

pub fn print_produce_report(args: &ProduceArgs, r: &ProduceReport) {
    let window = match args.mode {
        SendMode::Sync => 1,
        SendMode::Async => args.window,
        SendMode::Oneway => 0,
    };
    println!(
        "bench produce: topic={} broker={} ({}) queues={}{} size={} connections={} mode={:?} window={} batch={} header={:?}{}{}",
        args.topic,
        r.target.broker_name,
        r.target.broker_addr,
        r.target.queues,
        if r.target.via_default_topic { " (auto-created from TBW102)" } else { "" },
        args.size,
        args.connections,
        args.mode,
        window,
        args.batch,
        args.header,
        if args.v1 { " v1" } else { "" },
        args.rate.map_or(String::new(), |r| format!(" rate={r:.0}/s")),
    );
    println!(
        "sent   : {:>12} msgs   acked {:>12} msgs in {:.2} s",
        r.sent,
        r.acked,
        r.elapsed.as_secs_f64()
    );
    println!(
        "rate   : {:>12.0} msgs/s {:>9.1} MB/s",
        r.msgs_per_s, r.mb_per_s
    );
    match &r.latency {
        Some(l) => println!(
            "latency: p50 {} us  p99 {} us  p999 {} us  max {} us  ({} requests)",
            l.p50_us, l.p99_us, l.p999_us, l.max_us, l.samples
        ),
        None => println!("latency: n/a (oneway)"),
    }
    println!("cpu    : {}", cpu_line(r.process_cpu, r.sent));
    for l in crate::tools::bench_cpu::report_lines(&r.broker_cpu) {
        println!("{l}");
    }
    print_errors(&r.errors);
}

// ---------------------------------------------------------------------------------------------
// Consume

struct QueueOutcome {
    hist: Histogram<u64>,
    errors: Errors,
    messages: u64,
    body_bytes: u64,
    record_bytes: u64,
    pulls: u64,
    empty_pulls: u64,
}

struct ConsumeShared {
    counters: Arc<Counters>,
    /// Nanoseconds since `started` of the last message received anywhere.
    last_new_ns: AtomicU64,
    /// Set once `--count` is reached, `--duration` passed or the idle limit hit.
    stop: AtomicBool,
    started: Instant,
}

impl ConsumeShared {
    fn mark_new(&self) {
        let ns = self.started.elapsed().as_nanos() as u64;
        self.last_new_ns.fetch_max(ns, Ordering::Relaxed);
    }
    fn idle_for(&self) -> Duration {
        self.started.elapsed().saturating_sub(Duration::from_nanos(
            self.last_new_ns.load(Ordering::Relaxed),
        ))
    }

    /// `--duration` has passed, `--count` messages arrived, or none for `--idle`.
    fn run_is_over(&self, args: &ConsumeArgs) -> bool {
        let deadline = args
            .duration
            .map(|d| self.started + Duration::from_secs_f64(d.max(0.0)));
        let idle = Duration::from_secs_f64(args.idle.max(0.0));
        deadline.is_some_and(|d| Instant::now() >= d)
            || args
                .count
                .is_some_and(|n| self.counters.done.load(Ordering::Relaxed) >= n)
            || self.idle_for() >= idle
    }
}

/// Counts (and validates) the records of one pull body.
fn decode_body(body: &[u8], check_crc: bool) -> Result<(u64, u64), String> {
    let (mut msgs, mut body_bytes, mut pos) = (0u64, 0u64, 0usize);
    while pos < body.len() {
        match check(&body[pos..], check_crc) {
            Ok(Check::Record(v)) => {
                msgs += 1;
                body_bytes += v.body.len() as u64;
                pos += v.total_size as usize;
            }
            Ok(Check::Blank { .. }) => return Err(format!("BLANK record at byte {pos}")),
            Err(e) => return Err(format!("at byte {pos}: {e}")),
        }
    }
    Ok((msgs, body_bytes))
}

async fn max_offset(client: &RemotingClient, topic: &str, queue_id: i32) -> anyhow::Result<i64> {
    let h = GetMaxOffsetRequestHeader {
        topic: topic.to_string(),
        queue_id,
        committed: None,
    };
    let req = RemotingCommand::new_request(request_code::GET_MAX_OFFSET)
        .with_ext_fields(h.to_ext_fields());
    let resp = client.invoke(req, ADMIN_TIMEOUT).await?;
    anyhow::ensure!(
        resp.code == response_code::SUCCESS,
        "GET_MAX_OFFSET {topic}:{queue_id} answered {} ({}): {}",
        resp.code,
        response_code_name(resp.code),
        resp.remark.unwrap_or_default()
    );
    Ok(GetMaxOffsetResponseHeader::from_command(&resp)?.offset)
}

/// One queue's puller: pulls from `offset` on until the run stops (see
/// [`ConsumeShared::run_is_over`]) or the connection fails.
async fn pull_queue(
    client: RemotingClient,
    args: Arc<ConsumeArgs>,
    queue_id: i32,
    mut offset: i64,
    shared: Arc<ConsumeShared>,
) -> QueueOutcome {
    let mut out = QueueOutcome::new();
    let timeout = Duration::from_secs_f64(args.timeout.max(0.001));
    let c = &shared.counters;
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        if shared.run_is_over(&args) {
            shared.stop.store(true, Ordering::Relaxed);
            break;
        }
        let req = pull_request(&args, queue_id, offset);
        let t0 = Instant::now();
        c.inflight.fetch_add(1, Ordering::Relaxed);
        let resp = client.invoke(req, timeout).await;
        c.inflight.fetch_sub(1, Ordering::Relaxed);
        out.pulls += 1;
        let resp = match resp {
            Ok(r) => r,
            Err(e) if out.failed(&e, c) => break,
            Err(_) => continue,
        };
        let _ = out.hist.record(micros(t0.elapsed()));
        match out.took(&resp, &mut offset, &shared, args.check_crc) {
            AfterPull::Pull => {}
            AfterPull::Wait(d) => tokio::time::sleep(d).await,
            AfterPull::Stop => break,
        }
    }
    out
}

/// PULL_MESSAGE of up to `--batch-size` messages of `queue_id` from `offset`, every tag, no
/// suspension: the broker answers at once, found or not.
fn pull_request(args: &ConsumeArgs, queue_id: i32, offset: i64) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: args.group.clone(),
        topic: args.topic.clone(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: args.batch_size.max(1),
        // No suspension: the broker answers at once, found or not.
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_string()),
        sub_version: 0,
        expression_type: Some("TAG".to_string()),
        ..Default::default()
    };
    RemotingCommand::new_request(request_code::PULL_MESSAGE).with_ext_fields(h.to_ext_fields())
}

/// What a queue's puller does after a reply.
enum AfterPull {
    Pull,
    Wait(Duration),
    Stop,
}

impl QueueOutcome {
    fn new() -> Self {
        QueueOutcome {
            hist: new_hist(),
            errors: Errors::default(),
            messages: 0,
            body_bytes: 0,
            record_bytes: 0,
            pulls: 0,
            empty_pulls: 0,
        }
    }

    /// Counts a pull that got no reply; true when the connection failed (the puller stops),
    /// false for a timeout (it pulls again).
    fn failed(&mut self, e: &crate::remoting::client::ClientError, c: &Counters) -> bool {
        let source = match e {
            crate::remoting::client::ClientError::Timeout { .. } => ErrorSource::Timeout,
            _ => ErrorSource::Connection,
        };
        let fatal = source == ErrorSource::Connection;
        self.errors.add(source, 1, 1, &e.to_string());
        c.errors.fetch_add(1, Ordering::Relaxed);
        fatal
    }

    /// Counts a pull's reply and moves `offset` to the broker's next one.
    fn took(
        &mut self,
        resp: &RemotingCommand,
        offset: &mut i64,
        shared: &ConsumeShared,
        check_crc: bool,
    ) -> AfterPull {
        let c = &shared.counters;
        let next = PullMessageResponseHeader::from_command(resp)
            .ok()
            .map(|h| h.next_begin_offset);
        match resp.code {
            response_code::SUCCESS => {
                self.found(resp, shared, check_crc);
                match next {
                    Some(n) => *offset = n,
                    None => {
                        self.errors.add(
                            ErrorSource::Broker(resp.code),
                            1,
                            1,
                            "SUCCESS without nextBeginOffset",
                        );
                        return AfterPull::Stop;
                    }
                }
                AfterPull::Pull
            }
            response_code::PULL_NOT_FOUND => {
                self.empty_pulls += 1;
                if let Some(n) = next {
                    *offset = n;
                }
                AfterPull::Wait(EMPTY_QUEUE_BACKOFF)
            }
            response_code::PULL_RETRY_IMMEDIATELY | response_code::PULL_OFFSET_MOVED => {
                if let Some(n) = next {
                    *offset = n;
                }
                AfterPull::Pull
            }
            code => {
                self.errors.add(
                    ErrorSource::Broker(code),
                    1,
                    1,
                    resp.remark.as_deref().unwrap_or(""),
                );
                c.errors.fetch_add(1, Ordering::Relaxed);
                AfterPull::Wait(Duration::from_millis(100))
            }
        }
    }

    /// Counts the messages of a FOUND reply (a body that does not decode is an error).
    fn found(&mut self, resp: &RemotingCommand, shared: &ConsumeShared, check_crc: bool) {
        let c = &shared.counters;
        match decode_body(&resp.body, check_crc) {
            Ok((msgs, bytes)) => {
                self.messages += msgs;
                self.body_bytes += bytes;
                self.record_bytes += resp.body.len() as u64;
                c.done.fetch_add(msgs, Ordering::Relaxed);
                c.bytes.fetch_add(bytes, Ordering::Relaxed);
                if msgs > 0 {
                    shared.mark_new();
                }
            }
            Err(why) => {
                self.errors.add(ErrorSource::Corrupt, 1, 1, &why);
                c.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Runs `actormq bench consume`.
pub async fn run_consume(args: &ConsumeArgs) -> anyhow::Result<ConsumeReport> {
    anyhow::ensure!(args.connections > 0, "--connections must be at least 1");
    let target = consume_target(&args.namesrv, &args.topic).await?;
    anyhow::ensure!(
        target.queues > 0,
        "the route of {} has no read queue",
        args.topic
    );
    let mut clients = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        clients.push(RemotingClient::connect(&target.broker_addr).await?);
    }
    let mut offsets = Vec::with_capacity(target.queues as usize);
    for q in 0..target.queues {
        offsets.push(if args.from_end {
            max_offset(&clients[q as usize % clients.len()], &args.topic, q).await?
        } else {
            0
        });
    }
    let shared = Arc::new(ConsumeShared {
        counters: Arc::default(),
        last_new_ns: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        started: Instant::now(),
    });
    let stop_progress = Arc::new(AtomicBool::new(false));
    let broker_meter = BrokerMeter::start(
        args.broker_cpu.broker_metrics.as_deref(),
        args.broker_cpu.broker_pid,
        &target.broker_addr,
    )
    .await?;
    let progress = (!args.quiet)
        .then(|| spawn_progress("pulled", shared.counters.clone(), stop_progress.clone()));
    let cpu_before = process_cpu();
    let args_arc = Arc::new(args.clone());
    let tasks: Vec<_> = offsets
        .iter()
        .enumerate()
        .map(|(q, &off)| {
            tokio::spawn(pull_queue(
                clients[q % clients.len()].clone(),
                args_arc.clone(),
                q as i32,
                off,
                shared.clone(),
            ))
        })
        .collect();
    let mut hist = new_hist();
    let mut errors = Errors::default();
    let (mut messages, mut body_bytes, mut record_bytes, mut pulls, mut empty_pulls) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for t in tasks {
        let o = t.await?;
        hist.add(&o.hist)?;
        errors.merge(o.errors);
        messages += o.messages;
        body_bytes += o.body_bytes;
        record_bytes += o.record_bytes;
        pulls += o.pulls;
        empty_pulls += o.empty_pulls;
    }
    let broker_cpu = broker_meter.finish(messages).await;
    stop_progress.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        p.abort();
    }
    let elapsed = Duration::from_nanos(shared.last_new_ns.load(Ordering::Relaxed))
        .max(Duration::from_micros(1));
    let secs = elapsed.as_secs_f64();
    Ok(ConsumeReport {
        target,
        messages,
        body_bytes,
        record_bytes,
        elapsed,
        msgs_per_s: messages as f64 / secs,
        mb_per_s: body_bytes as f64 / secs / 1e6,
        pulls,
        empty_pulls,
        latency: Latency::of(&hist),
        errors: errors.into_vec(),
        process_cpu: process_cpu().saturating_sub(cpu_before),
        broker_cpu,
    })
}

pub fn print_consume_report(args: &ConsumeArgs, r: &ConsumeReport) {
    println!(
        "bench consume: topic={} group={} broker={} ({}) queues={} connections={} batch-size={} from={}",
        args.topic,
        args.group,
        r.target.broker_name,
        r.target.broker_addr,
        r.target.queues,
        args.connections,
        args.batch_size,
        if args.from_end { "end" } else { "0" },
    );
    println!(
        "read   : {:>12} msgs in {:.2} s ({} pulls, {} empty; {} record bytes)",
        r.messages,
        r.elapsed.as_secs_f64(),
        r.pulls,
        r.empty_pulls,
        r.record_bytes
    );
    println!(
        "rate   : {:>12.0} msgs/s {:>9.1} MB/s",
        r.msgs_per_s, r.mb_per_s
    );
    match &r.latency {
        Some(l) => println!(
            "pull latency: p50 {} us  p99 {} us  max {} us",
            l.p50_us, l.p99_us, l.max_us
        ),
        None => println!("pull latency: n/a (no pull answered)"),
    }
    println!("cpu    : {}", cpu_line(r.process_cpu, r.messages));
    for l in crate::tools::bench_cpu::report_lines(&r.broker_cpu) {
        println!("{l}");
    }
    print_errors(&r.errors);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_carries_the_tag_a_fresh_uniq_key_and_wait() {
        let spec = FactorySpec {
            topic: "T",
            group: "G",
            broker_name: "b",
            tag: "BenchTag",
            body: Bytes::from_static(b"body"),
            code: actormq_core::protocol::codes::request_code::SEND_MESSAGE_V2,
            names: SendHeaderNames::V2,
            serialize_type: SerializeType::Json,
            queues: 4,
            batch: false,
            uniq_prefix: "7F000001",
        };
        let mut f = RequestFactory::new(&spec, 3);
        f.seq = 0xABC;
        for n in 0..2u64 {
            let cmd = f.next(1, false);
            let h = SendMessageRequestHeader::from_command(&cmd).unwrap();
            let want = format!(
                "7F000001{:012X}",
                ((3u64 << 40) + 0xABC + n) & 0xFFFF_FFFF_FFFF
            );
            assert_eq!(
                properties::find(&h.properties, keys::UNIQ_KEY),
                Some(want.as_str())
            );
            assert_eq!(
                properties::find(&h.properties, keys::TAGS),
                Some("BenchTag")
            );
            assert_eq!(properties::find(&h.properties, keys::WAIT), Some("true"));
            assert_eq!(h.queue_id, (3 + n as i32) % 4);
            assert!(h.born_timestamp > 0);
            assert_eq!(&cmd.body[..], b"body");
        }
    }
}
