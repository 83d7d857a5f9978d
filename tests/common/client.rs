//! The real client (`rocketmq-client-rust` 1.0.0) set up the way every test needs it: one
//! process-wide runtime owner, a client runtime per test, a name-server config with short
//! polling, producers and consumers starting new groups at offset 0, what a listener saw
//! ([`Got`], [`Sink`]), and error descriptions that show what the client's Display hides.
//! Included by `tests/wire/main.rs` as `real_client`, beside `common` (see tests/common/mod.rs).

use rocketmq_client_rust::{
    ClientConfig, ClientError, ClientResult, ClientRuntime, ClientRuntimeConfig,
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultLitePullConsumer,
    DefaultLitePullConsumerBuilder, DefaultMQProducer, DefaultMQPushConsumer,
    DefaultMQPushConsumerBuilder, MQBrokerException, MQClientException, MQPushConsumer,
    TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::common::unique;

/// Per-request timeout handed to the client.
pub const SEND_TIMEOUT_MS: u64 = 5_000;

/// One process-wide runtime owner for the client's background work (never dropped, so it is
/// never dropped inside an async context).
pub fn client_owner() -> &'static RuntimeOwner {
    static OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
        RuntimeOwner::plan(RuntimeConfig {
            thread_name: "actormq-client-test".to_string(),
            ..Default::default()
        })
        .expect("client runtime configuration is valid")
        .build()
        .expect("client runtime owner starts")
    });
    &OWNER
}

/// A client runtime of its own for each test (its own client-instance pool).
pub fn client_runtime(scope: &'static str) -> Arc<ClientRuntime> {
    ClientRuntime::try_new(
        client_owner().root_context().component(scope),
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
