//! Helpers shared by the end-to-end test targets: a bounded test runner, brokers on temp dirs
//! and ephemeral ports, and the real client (`rocketmq-client-rust` 1.0.0) set up the way every
//! test needs it. Each target uses a subset, hence the `dead_code` allowance.
#![allow(dead_code, unused_imports)]

use actormq::broker::testing::TestBroker;
use actormq_core::protocol::body::HeartbeatData;
use rocketmq_client_rust::{
    ClientConfig, ClientError, ClientResult, ClientRuntime, ClientRuntimeConfig,
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, DefaultLitePullConsumer, DefaultLitePullConsumerBuilder,
    DefaultMQProducer, DefaultMQPushConsumer, DefaultMQPushConsumerBuilder, MQBrokerException,
    MQClientException, MQPushConsumer, SendStatus, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Hard upper bound of every test, broker start and stop included: a guard against a hang, not a
/// timing. Generous, because one test may spawn the debug binary dozens of times and wait on
/// consumers on a loaded 2-core machine (60 s was within reach of the admin test's own waits).
pub const TEST_LIMIT: Duration = Duration::from_secs(180);
/// Per-request timeout handed to the client.
pub const SEND_TIMEOUT_MS: u64 = 5_000;

/// Runs one test body on its own thread and its own multi-thread Tokio runtime, and fails the
/// test if it has not finished within [`TEST_LIMIT`]. Blocking calls (broker start/stop) are
/// covered too, since the caller only waits on a channel.
pub fn run_bounded<F, Fut>(name: &'static str, body: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("test tokio runtime");
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(body())));
            let _ = tx.send(outcome);
            rt.shutdown_timeout(Duration::from_secs(5));
        })
        .expect("spawn test thread");
    match rx.recv_timeout(TEST_LIMIT) {
        Ok(Ok(())) => {
            let _ = worker.join();
        }
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: did not finish within {TEST_LIMIT:?} (client or broker hung)")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("{name}: test thread died without reporting")
        }
    }
}

/// A fresh broker (with its embedded name server) on a fresh temp dir.
pub fn broker(overrides: &[(&str, &str)]) -> (tempfile::TempDir, TestBroker) {
    let dir = tempfile::tempdir().expect("temp dir");
    let b = start_broker(dir.path(), overrides);
    (dir, b)
}

pub fn start_broker(root: &Path, overrides: &[(&str, &str)]) -> TestBroker {
    tokio::task::block_in_place(|| TestBroker::start(root, overrides))
        .unwrap_or_else(|e| panic!("TestBroker::start({}) failed: {e:#}", root.display()))
}

pub fn stop_broker(b: TestBroker) {
    tokio::task::block_in_place(|| b.stop());
}

/// One process-wide runtime owner for the client's background work (never dropped, so it is
/// never dropped inside an async context).
pub static CLIENT_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
    RuntimeOwner::plan(RuntimeConfig {
        thread_name: "actormq-client-test".to_string(),
        ..Default::default()
    })
    .expect("client runtime configuration is valid")
    .build()
    .expect("client runtime owner starts")
});

/// A client runtime of its own for each test (its own client-instance pool).
pub fn client_runtime(scope: &'static str) -> Arc<ClientRuntime> {
    ClientRuntime::try_new(
        CLIENT_OWNER.root_context().component(scope),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
    )
    .expect("client runtime")
}

/// Client configuration pointing at the test name server; route polling at the client's minimum
/// (10 s) and offset persistence every second, so tests do not wait on the 30 s / 5 s defaults.
pub fn client_config(namesrv: &str) -> ClientConfig {
    ClientConfig::builder()
        .namesrv_addr(namesrv)
        .poll_name_server_interval(10_000)
        .persist_consumer_offset_interval(1_000)
        .build()
        .expect("client config")
}

pub static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A topic/group name unique in this process and run.
pub fn unique(prefix: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("{prefix}_{millis}_{}", SEQ.fetch_add(1, Ordering::Relaxed))
}

pub async fn producer(rt: &Arc<ClientRuntime>, namesrv: &str) -> DefaultMQProducer {
    let mut p = DefaultMQProducer::builder(rt.clone())
        .client_config(client_config(namesrv))
        .producer_group(unique("pg"))
        .send_msg_timeout(SEND_TIMEOUT_MS as u32)
        .build();
    p.start().await.expect("producer start");
    p
}

pub fn push_builder(
    rt: &Arc<ClientRuntime>,
    namesrv: &str,
    group: &str,
) -> DefaultMQPushConsumerBuilder {
    DefaultMQPushConsumer::builder(rt.clone())
        .client_config(client_config(namesrv))
        .consumer_group(group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(4)
        .consume_message_batch_max_size(1)
        .pull_batch_size(32)
}

/// A lite-pull consumer builder starting new groups at offset 0, with short broker-side long
/// polls (2 s) so polling loops and shutdown stay well inside the test limit.
pub fn lite_pull_builder(rt: &Arc<ClientRuntime>) -> DefaultLitePullConsumerBuilder {
    DefaultLitePullConsumer::builder(rt.clone())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .broker_suspend_max_time_millis(2_000)
        .consumer_timeout_millis_when_suspend(5_000)
        .poll_timeout_millis(1_000)
}

/// Awaits a client shutdown for at most 10 s (a slow client shutdown is reported, not fatal:
/// the broker is stopped next either way).
pub async fn quietly(what: &str, f: impl Future) {
    if tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .is_err()
    {
        eprintln!("warning: {what} took more than 10 s; continuing");
    }
}

pub fn msg(topic: &str, tags: &str, body: &str) -> Message {
    Message::builder()
        .topic(topic)
        .tags(tags)
        .body_slice(body.as_bytes())
        .build_unchecked()
}

/// Polls `cond` every 50 ms for at most `limit`; true when it held.
pub async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the name server returns a route for `topic` (the broker registers auto-created
/// topics), so a consumer started next finds its queues without waiting for a route poll.
pub async fn wait_route(p: &mut DefaultMQProducer, topic: &str) -> Vec<MessageQueue> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match p.fetch_publish_message_queues(topic).await {
            Ok(q) if !q.is_empty() => return q,
            other => {
                if Instant::now() >= deadline {
                    panic!(
                        "no route for topic {topic} from the name server: {}",
                        outcome(&other)
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a listener saw of one delivered message.
#[derive(Clone, Debug)]
pub struct Got {
    pub topic: String,
    pub body: String,
    pub tags: Option<String>,
    pub keys: Option<Vec<String>>,
    pub props: HashMap<String, String>,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub reconsume_times: i32,
    pub at: Instant,
}

pub fn got(m: &MessageExt) -> Got {
    let inner = m.message_inner();
    Got {
        topic: m.topic().to_string(),
        body: String::from_utf8_lossy(m.body().as_deref().unwrap_or_default()).into_owned(),
        tags: inner.tags().map(str::to_string),
        keys: inner.keys(),
        props: m
            .properties()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        queue_id: m.queue_id(),
        queue_offset: m.queue_offset(),
        reconsume_times: m.reconsume_times(),
        at: Instant::now(),
    }
}

pub type Sink = Arc<Mutex<Vec<Got>>>;

pub fn sink() -> Sink {
    Arc::new(Mutex::new(Vec::new()))
}

pub fn seen(s: &Sink) -> Vec<Got> {
    s.lock().unwrap().clone()
}

/// A concurrently listener that records every message and acknowledges it.
pub fn collecting(
    s: Sink,
) -> impl Fn(&[&MessageExt], &ConsumeConcurrentlyContext) -> ClientResult<ConsumeConcurrentlyStatus>
       + Send
       + Sync
       + 'static {
    move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
        s.lock().unwrap().extend(msgs.iter().map(|m| got(m)));
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

/// Starts a push consumer on `topic` with `expr`, recording into `s`.
pub async fn start_collecting_consumer(
    rt: &Arc<ClientRuntime>,
    namesrv: &str,
    group: &str,
    topic: &str,
    expr: &str,
    s: Sink,
) -> DefaultMQPushConsumer {
    let mut c = push_builder(rt, namesrv, group).build();
    c.subscribe(topic, expr).await.expect("subscribe");
    c.register_message_listener_concurrently(collecting(s));
    c.start().await.expect("push consumer start");
    c
}

/// Incompressible bytes (xorshift64*), so client-side compression cannot shrink them.
pub fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The broker response code carried by a client error, if it came from the broker.
pub fn broker_code(e: &ClientError) -> Option<i32> {
    e.broker_response_code()
        .or_else(|| MQBrokerException::from_client_error(e).map(|b| b.response_code()))
}

/// A client error with what its (redacted) Display hides: the broker code and the typed
/// client/broker exception text, when present.
pub fn describe(e: &ClientError) -> String {
    let mut out = format!("{e}");
    if let Some(code) = broker_code(e) {
        out.push_str(&format!(" [broker code {code}]"));
    }
    if let Some(b) = MQBrokerException::from_client_error(e) {
        out.push_str(&format!(" [{b}]"));
    }
    if let Some(c) = e.source_ref::<MQClientException>() {
        out.push_str(&format!(" [{c}]"));
    }
    out
}

/// A client result for a failure message.
pub fn outcome<T: std::fmt::Debug>(r: &ClientResult<T>) -> String {
    match r {
        Ok(v) => format!("Ok({v:?})"),
        Err(e) => format!("Err({})", describe(e)),
    }
}

pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// How long a [`FakeClient`] waits for a frame: a guard against a hang, not a timing.
pub const FAKE_CLIENT_LIMIT: Duration = Duration::from_secs(30);

/// A raw client connection: sends requests and reads frames itself, so it sees (and answers)
/// the requests the broker sends it.
pub struct FakeClient {
    pub stream: tokio::net::TcpStream,
    buf: bytes::BytesMut,
    next_opaque: i32,
    /// Broker-initiated requests read while waiting for something else.
    queued: Vec<actormq_core::protocol::command::RemotingCommand>,
}

impl FakeClient {
    pub async fn connect(addr: &str) -> FakeClient {
        FakeClient {
            stream: tokio::net::TcpStream::connect(addr)
                .await
                .expect("connect to the broker"),
            buf: bytes::BytesMut::new(),
            next_opaque: 1000,
            queued: Vec::new(),
        }
    }

    pub async fn write(&mut self, cmd: &actormq_core::protocol::command::RemotingCommand) {
        let mut out = bytes::BytesMut::new();
        actormq_core::protocol::codec::encode_frame(cmd, &mut out);
        self.stream.write_all(&out).await.expect("write a frame");
    }

    pub async fn read(&mut self) -> actormq_core::protocol::command::RemotingCommand {
        loop {
            if let Some(cmd) = actormq_core::protocol::codec::decode_frame(
                &mut self.buf,
                actormq_core::protocol::codec::MAX_FRAME_BYTES,
            )
            .expect("a valid frame")
            {
                return cmd;
            }
            let n = tokio::time::timeout(FAKE_CLIENT_LIMIT, self.stream.read_buf(&mut self.buf))
                .await
                .expect("a frame within the limit")
                .expect("read");
            assert!(n > 0, "the broker closed the connection");
        }
    }

    /// Sends a request and returns its response (queueing broker requests read meanwhile).
    pub async fn request(
        &mut self,
        cmd: actormq_core::protocol::command::RemotingCommand,
    ) -> actormq_core::protocol::command::RemotingCommand {
        self.next_opaque += 1;
        let opaque = self.next_opaque;
        self.write(&cmd.with_opaque(opaque)).await;
        loop {
            let got = self.read().await;
            if got.is_response() && got.opaque == opaque {
                return got;
            }
            if !got.is_response() {
                self.queued.push(got);
            }
        }
    }

    /// The next request from the broker with `code` (others, e.g. NOTIFY_CONSUMER_IDS_CHANGED,
    /// are skipped).
    pub async fn next_request(
        &mut self,
        code: i32,
    ) -> actormq_core::protocol::command::RemotingCommand {
        if let Some(i) = self.queued.iter().position(|c| c.code == code) {
            return self.queued.remove(i);
        }
        loop {
            let got = self.read().await;
            if !got.is_response() && got.code == code {
                return got;
            }
        }
    }

    pub async fn heartbeat(&mut self, data: &HeartbeatData) {
        let body = serde_json::to_vec(data).unwrap();
        let resp = self
            .request(
                actormq_core::protocol::command::RemotingCommand::new_request(
                    actormq_core::protocol::codes::request_code::HEART_BEAT,
                )
                .with_body(body),
            )
            .await;
        assert_eq!(
            resp.code,
            actormq_core::protocol::codes::response_code::SUCCESS,
            "heartbeat: {:?}",
            resp.remark
        );
    }
}

/// UPDATE_AND_CREATE_TOPIC for `topic` with `queues` read and write queues, perm RW, as
/// mqadmin's updateTopic sends it.
pub fn create_topic(topic: &str, queues: u32) -> actormq_core::protocol::command::RemotingCommand {
    actormq_core::protocol::command::RemotingCommand::new_request(
        actormq_core::protocol::codes::request_code::UPDATE_AND_CREATE_TOPIC,
    )
    .with_ext("topic", topic)
    .with_ext("defaultTopic", "TBW102")
    .with_ext("readQueueNums", queues.to_string())
    .with_ext("writeQueueNums", queues.to_string())
    .with_ext("perm", "6")
    .with_ext("topicFilterType", "SINGLE_TAG")
}

/// SEND_MESSAGE (10) with the long (V1) header names of Java's `SendMessageRequestHeader`, as
/// a producer sends it: from producer group `group`, to `topic` queue `queue_id`, the topic
/// created on first send from TBW102 with 4 queues, no properties. A test changes a field with
/// `.with_ext(key, value)`, which replaces it in place (the frame's field order stays).
pub fn send_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    body: impl Into<Vec<u8>>,
) -> actormq_core::protocol::command::RemotingCommand {
    actormq_core::protocol::command::RemotingCommand::new_request(
        actormq_core::protocol::codes::request_code::SEND_MESSAGE,
    )
    .with_ext("producerGroup", group)
    .with_ext("topic", topic)
    .with_ext("defaultTopic", "TBW102")
    .with_ext("defaultTopicQueueNums", "4")
    .with_ext("queueId", queue_id.to_string())
    .with_ext("sysFlag", "0")
    .with_ext("bornTimestamp", now_millis().to_string())
    .with_ext("flag", "0")
    .with_ext("properties", "")
    .with_body(body.into())
}

/// PULL_MESSAGE (11) of up to 32 messages of `topic` queue `queue_id` from `offset` for consumer
/// group `group`, without the commit or suspend flags: nothing is committed, nothing parks.
pub fn pull_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> actormq_core::protocol::command::RemotingCommand {
    actormq_core::protocol::command::RemotingCommand::new_request(
        actormq_core::protocol::codes::request_code::PULL_MESSAGE,
    )
    .with_ext("consumerGroup", group)
    .with_ext("topic", topic)
    .with_ext("queueId", queue_id.to_string())
    .with_ext("queueOffset", offset.to_string())
    .with_ext("maxMsgNums", "32")
    .with_ext("sysFlag", "0")
    .with_ext("commitOffset", "0")
    .with_ext("suspendTimeoutMillis", "0")
    .with_ext("subVersion", "0")
}

/// GET_MAX_OFFSET (30) of `topic` queue `queue_id`; `None` unless answered SUCCESS with an
/// offset.
pub async fn max_offset_of(
    client: &actormq::remoting::client::RemotingClient,
    topic: &str,
    queue_id: i32,
) -> Option<i64> {
    let req = actormq_core::protocol::command::RemotingCommand::new_request(
        actormq_core::protocol::codes::request_code::GET_MAX_OFFSET,
    )
    .with_ext("topic", topic)
    .with_ext("queueId", queue_id.to_string());
    let r = client
        .invoke(req, Duration::from_secs(5))
        .await
        .expect("GET_MAX_OFFSET answered");
    (r.code == actormq_core::protocol::codes::response_code::SUCCESS)
        .then(|| r.ext("offset").and_then(|o| o.parse().ok()))
        .flatten()
}

/// Waits, polling every 50 ms for at most `limit`, until the slave at `slave` has every queue of
/// `topic` in `0..queues` up to the max offset the master at `master` has (both read each time:
/// both dispatch on their own); fails naming the first queue that did not catch up.
pub async fn wait_caught_up(master: &str, slave: &str, topic: &str, queues: i32, limit: Duration) {
    use actormq::remoting::client::RemotingClient;
    let deadline = Instant::now() + limit;
    let m = RemotingClient::connect(master)
        .await
        .expect("connect to the master");
    let s = RemotingClient::connect(slave)
        .await
        .expect("connect to the slave");
    for q in 0..queues {
        loop {
            let want = max_offset_of(&m, topic, q).await;
            let got = max_offset_of(&s, topic, q).await;
            if want.is_some() && got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{topic} queue {q}: slave max offset {got:?}, master {want:?} after {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
