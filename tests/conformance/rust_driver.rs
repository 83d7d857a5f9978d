//! The Rust-client driver: serves the `rust` steps with `rocketmq-client-rust` 1.0.0 (the crate a
//! Rust user of RocketMQ gets from crates.io), in this process, against one broker. It owns its
//! own Tokio runtime (for the steps) and its own client `RuntimeOwner` and `ClientRuntime` (for
//! the client's background work); both are shut down when the driver drops.
//!
//! Verbs and output lines follow `JavaDriver.java` wherever the concept is the same:
//! * `send topic= n= tags=A,B keys=k body=x size= delay= prop=K:V group= mode=sync|async|oneway|
//!   batch|plain queue=`: message `i` goes to writable queue `i % n` (queues sorted by broker
//!   name, then id; `queue=` fixes one), printed as `send <i> <STATUS> queue= queueOffset= msgId=
//!   offsetMsgId= regionId= traceOn=` (the 1.0 `SendResult` has every field Java's `printSend`
//!   prints; it has no `toString` of its own, so the line is composed the same way).
//! * `pull topic= group= expr= queue= offset= max=`: the Classic Pull facade
//!   (`DefaultMQPullConsumer`, deprecated in 1.0 but the only pull-by-offset call), printed as
//!   `pull queue=<q> <STATUS> next= min= max=` and `msg ...` lines in Java's `describe` order.
//! * `push topic= group= expr= n= timeout=`: a concurrently push consumer from the first offset.
//! * `litepull topic= group= expr= n= timeout=`: a subscribing lite pull consumer.
//! * `querykey topic= key=`: the producer's `query_message`.
//! * `admin-route topic=` and `admin-cluster`: `DefaultMQAdminExt`'s topic route and cluster
//!   table, printed sorted.
//!
//! What the Rust client cannot show, and so is not printed: a `MessageExt` has no separate
//! "keys" or "tags" accessors with Java's null semantics, so both are read from the `KEYS` /
//! `TAGS` properties (`null` when absent, as Java prints); the concurrently listener gets a shared
//! `&ConsumeConcurrentlyContext`, so a failing consumption cannot pick its retry delay level (no
//! `fail=`/`retryLevel=` keys here); there is no way to read a push consumer's in-memory offsets
//! (Java's `drained` wait), so `push` does not wait for them before shutting down; a failing step
//! is printed as `error ClientError: <code>: <public message>` plus the broker's response code
//! when the error carries one (the client's `Display` redacts the broker's remark).
//!
//! Against Apache RocketMQ 4.9.4 itself this client cannot work at all: its `BrokerData` requires
//! 5.x's `enableActingMaster`, which a 4.9.4 name server does not write, so every route and
//! cluster-table decode fails (`core.serialization.failed`; a pull then finds "No route data").
//! That is the finding the `rust` column records, not a driver fault; ActorMQ writes the field.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ClientConfig, ClientError, ClientOptions, ClientResult, ClientRuntime, ClientRuntimeConfig,
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultLitePullConsumer,
    DefaultMQAdminExt, DefaultMQProducer, DefaultMQPushConsumer, MQAdminReadExt, MQBrokerException,
    MQClientException, MQPushConsumer, SendResult, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

use super::brokers::Endpoints;

/// Longest one step may take; below the line drivers' limit so a hang is reported as a step's
/// error line and the run goes on.
const STEP_LIMIT: Duration = Duration::from_secs(110);
/// Per-request timeout handed to the client (Java's driver uses 10 s too).
const SEND_TIMEOUT_MS: u64 = 10_000;
/// Longest a client shutdown may take before the driver goes on without it.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(10);

type Args = BTreeMap<String, String>;

pub struct RustDriver {
    namesrv: String,
    /// Runs the steps; dropped (after the clients) in `Drop`.
    rt: Option<tokio::runtime::Runtime>,
    client: Option<Arc<ClientRuntime>>,
    owner: Option<RuntimeOwner>,
    producers: BTreeMap<String, DefaultMQProducer>,
    admin: Option<DefaultMQAdminExt>,
    /// Client instance names count up, so client ids are the same in every run.
    instances: usize,
}

impl RustDriver {
    pub fn start(ends: &Endpoints) -> RustDriver {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rust-driver")
            .enable_all()
            .build()
            .expect("the Rust driver's tokio runtime");
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: "rust-driver-client".to_string(),
            ..Default::default()
        })
        .expect("client runtime configuration is valid")
        .build()
        .expect("client runtime owner starts");
        let client = ClientRuntime::try_new(
            owner.root_context().component("conformance"),
            ClientRuntimeConfig::default(),
            TelemetryHandle::noop(),
        )
        .expect("client runtime");
        RustDriver {
            namesrv: ends.namesrv.clone(),
            rt: Some(rt),
            client: Some(client),
            owner: Some(owner),
            producers: BTreeMap::new(),
            admin: None,
            instances: 0,
        }
    }

    /// Runs one step line (`<verb> key=value ...`); returns the observed lines.
    pub fn step(&mut self, line: &str) -> String {
        let mut words = line.split_whitespace();
        let verb = words.next().unwrap_or_default().to_string();
        let args: Args = words
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.replace("%20", " ")))
            .collect();
        let rt = self.rt.take().expect("the driver's runtime");
        let outcome =
            rt.block_on(async { tokio::time::timeout(STEP_LIMIT, self.run(&verb, &args)).await });
        self.rt = Some(rt);
        match outcome {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => format!("error ClientError: {}\n", first_line(&describe(&e))),
            Err(_) => format!("error Timeout: `{line}` did not finish within {STEP_LIMIT:?}\n"),
        }
    }

    async fn run(&mut self, verb: &str, a: &Args) -> ClientResult<String> {
        match verb {
            "send" => self.send(a).await,
            "pull" => self.pull(a).await,
            "push" => self.push(a).await,
            "litepull" => self.lite_pull(a).await,
            "querykey" => self.query_key(a).await,
            "admin-route" => self.admin_route(a).await,
            "admin-cluster" => self.admin_cluster().await,
            other => Ok(format!("unknown step {other}\n")),
        }
    }

    fn client(&self) -> Arc<ClientRuntime> {
        self.client.clone().expect("the client runtime")
    }

    fn config(&mut self, instance: &str) -> ClientResult<ClientConfig> {
        ClientConfig::builder()
            .namesrv_addr(self.namesrv.as_str())
            .instance_name(instance)
            .poll_name_server_interval(10_000)
            .persist_consumer_offset_interval(1_000)
            .build()
    }

    fn next_instance(&mut self, kind: &str) -> String {
        self.instances += 1;
        format!("rust-{kind}-{}", self.instances)
    }

    async fn producer(&mut self, group: &str) -> ClientResult<&mut DefaultMQProducer> {
        if !self.producers.contains_key(group) {
            let config = self.config(&format!("rust-{group}"))?;
            let mut p = DefaultMQProducer::builder(self.client())
                .client_config(config)
                .producer_group(group)
                .send_msg_timeout(SEND_TIMEOUT_MS as u32)
                .retry_times_when_send_failed(0)
                .retry_times_when_send_async_failed(0)
                .build();
            p.start().await?;
            self.producers.insert(group.to_string(), p);
        }
        Ok(self.producers.get_mut(group).expect("just inserted"))
    }

    async fn send(&mut self, a: &Args) -> ClientResult<String> {
        let group = a
            .get("group")
            .map_or("ConfProducer", String::as_str)
            .to_string();
        let mode = a.get("mode").map_or("sync", String::as_str).to_string();
        let n: usize = num(a, "n", 1);
        let topic = a.get("topic").cloned().unwrap_or_default();
        let p = self.producer(&group).await?;
        let mut out = String::new();
        if mode == "plain" {
            // The producer's own queue choice: status only.
            for i in 0..n {
                let r = p.send_with_timeout(message(a, i), SEND_TIMEOUT_MS).await?;
                let status = r.map_or("NONE".to_string(), |r| status(&r));
                out.push_str(&format!("send {i} {status}\n"));
            }
            return Ok(out);
        }
        let mut mqs = p.fetch_publish_message_queues(&topic).await?;
        mqs.sort_by(|x, y| {
            (x.broker_name().as_str(), x.queue_id()).cmp(&(y.broker_name().as_str(), y.queue_id()))
        });
        if mqs.is_empty() {
            return Ok("send no writable queue\n".to_string());
        }
        let before = visible(p, &mqs).await;
        let fixed: Option<usize> = a.get("queue").and_then(|q| q.parse().ok());
        let queue_for = |i: usize| mqs[fixed.unwrap_or(i) % mqs.len()].clone();
        match mode.as_str() {
            "batch" => {
                let batch: Vec<Message> = (0..n).map(|i| message(a, i)).collect();
                let r = p
                    .send_batch_to_queue_with_timeout(batch, queue_for(0), SEND_TIMEOUT_MS)
                    .await?;
                out.push_str(&send_line(0, &r));
            }
            "async" => {
                type Slot = Option<Result<SendResult, String>>;
                let results: Arc<Mutex<Vec<Slot>>> = Arc::new(Mutex::new(vec![None; n]));
                let done = |upto: usize| {
                    let r = results.lock().unwrap();
                    r[..upto].iter().all(Option::is_some)
                };
                for i in 0..n {
                    let slot = results.clone();
                    p.send_to_queue_with_callback_timeout(
                        message(a, i),
                        queue_for(i),
                        move |r: Option<&SendResult>, e: Option<&ClientError>| {
                            slot.lock().unwrap()[i] = Some(match (r, e) {
                                (Some(r), None) => Ok(r.clone()),
                                (_, Some(e)) => Err(describe(e)),
                                (None, None) => Err("no result and no error".to_string()),
                            });
                        },
                        SEND_TIMEOUT_MS,
                    )
                    .await?;
                    // One at a time per queue so queue offsets are deterministic.
                    if (i + 1) % mqs.len() == 0 {
                        wait_until(Duration::from_secs(20), || done(i + 1)).await;
                    }
                }
                wait_until(Duration::from_secs(20), || done(n)).await;
                for (i, r) in results.lock().unwrap().iter().enumerate() {
                    match r {
                        Some(Ok(r)) => out.push_str(&send_line(i, r)),
                        Some(Err(e)) => {
                            out.push_str(&format!("send {i} error {}\n", first_line(e)))
                        }
                        None => out.push_str(&format!("send {i} error no callback within 20s\n")),
                    }
                }
            }
            "oneway" => {
                for i in 0..n {
                    p.send_oneway_to_queue(message(a, i), queue_for(i)).await?;
                    out.push_str(&format!("send {i} oneway\n"));
                }
            }
            _ => {
                for i in 0..n {
                    let r = p
                        .send_to_queue_with_timeout(message(a, i), queue_for(i), SEND_TIMEOUT_MS)
                        .await?;
                    match r {
                        Some(r) => out.push_str(&send_line(i, &r)),
                        None => out.push_str(&format!("send {i} no result\n")),
                    }
                }
            }
        }
        // As the Java driver: the step ends once consumers can see the messages (both brokers
        // dispatch to their ConsumeQueues after answering). Delayed ones are not in their topic.
        if !a.contains_key("delay") {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while visible(p, &mqs).await < before + n as i64
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(out)
    }

    #[allow(deprecated)]
    async fn pull(&mut self, a: &Args) -> ClientResult<String> {
        let group = a.get("group").map_or("ConfPull", String::as_str);
        let instance = self.next_instance("pull");
        let config = self.config(&instance)?;
        let c = rocketmq_client_rust::DefaultMQPullConsumer::builder(self.client())
            .consumer_group(group)
            .client_options(ClientOptions::legacy(config))
            .build()?;
        c.start().await?;
        let result = async {
            let topic = a.get("topic").cloned().unwrap_or_default();
            let mut mqs = c.fetch_subscribe_message_queues(&topic).await?;
            mqs.sort_by_key(MessageQueue::queue_id);
            let only: Option<i32> = a.get("queue").and_then(|q| q.parse().ok());
            let expr = a.get("expr").map_or("*", String::as_str);
            let offset: i64 = num(a, "offset", 0);
            let max: i32 = num(a, "max", 32);
            let mut out = String::new();
            for mq in mqs {
                if only.is_some_and(|q| q != mq.queue_id()) {
                    continue;
                }
                let r = c.pull(&mq, expr, offset, max).await?;
                out.push_str(&format!(
                    "pull queue={} {} next={} min={} max={}\n",
                    mq.queue_id(),
                    r.pull_status(),
                    r.next_begin_offset(),
                    r.min_offset(),
                    r.max_offset()
                ));
                if let Some(msgs) = r.msg_found_list() {
                    out.push_str(&sorted(msgs.iter()));
                }
            }
            Ok(out)
        }
        .await;
        quietly(c.shutdown()).await;
        result
    }

    async fn push(&mut self, a: &Args) -> ClientResult<String> {
        let n: usize = num(a, "n", 1);
        let timeout = Duration::from_millis(num(a, "timeout", 30_000));
        let instance = self.next_instance("push");
        let config = self.config(&instance)?;
        let mut c = DefaultMQPushConsumer::builder(self.client())
            .client_config(config)
            .consumer_group(a.get("group").map_or("ConfPush", String::as_str))
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_thread_min(1)
            .consume_thread_max(4)
            .pull_batch_size(32)
            .build();
        let got: Arc<Mutex<Vec<MessageExt>>> = Arc::default();
        c.subscribe(
            a.get("topic").map_or("", String::as_str),
            a.get("expr").map_or("*", String::as_str),
        )
        .await?;
        let sink = got.clone();
        c.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                sink.lock()
                    .unwrap()
                    .extend(msgs.iter().map(|m| (*m).clone()));
                Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
            },
        );
        if let Err(e) = c.start().await {
            quietly(c.shutdown()).await;
            return Err(e);
        }
        let all = wait_until(timeout, || got.lock().unwrap().len() >= n).await;
        quietly(c.shutdown()).await;
        let got = got.lock().unwrap().clone();
        Ok(format!(
            "push received={} all={all}\n{}",
            got.len(),
            sorted(got.iter())
        ))
    }

    async fn lite_pull(&mut self, a: &Args) -> ClientResult<String> {
        let n: usize = num(a, "n", 1);
        let timeout = Duration::from_millis(num(a, "timeout", 30_000));
        let instance = self.next_instance("lite");
        let config = self.config(&instance)?;
        let c = DefaultLitePullConsumer::builder(self.client())
            .client_options(ClientOptions::legacy(config))
            .consumer_group(a.get("group").map_or("ConfLite", String::as_str))
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .broker_suspend_max_time_millis(2_000)
            .consumer_timeout_millis_when_suspend(5_000)
            .poll_timeout_millis(1_000)
            .build()?;
        c.subscribe_with_expression(
            a.get("topic").map_or("", String::as_str),
            a.get("expr").map_or("*", String::as_str),
        )
        .await?;
        c.start().await?;
        let mut got = Vec::new();
        let deadline = Instant::now() + timeout;
        while got.len() < n && Instant::now() < deadline {
            got.extend(c.poll_with_timeout(1_000).await);
        }
        let committed = c.commit_all().await;
        quietly(c.shutdown()).await;
        committed?;
        Ok(format!(
            "litepull received={}\n{}",
            got.len(),
            sorted(got.iter())
        ))
    }

    async fn query_key(&mut self, a: &Args) -> ClientResult<String> {
        let p = self.producer("ConfProducer").await?;
        let r = p
            .query_message(
                a.get("topic").map_or("", String::as_str),
                a.get("key").map_or("", String::as_str),
                32,
                0,
                i64::MAX as u64,
            )
            .await?;
        Ok(format!(
            "query found={}\n{}",
            r.message_list().len(),
            sorted(r.message_list().iter())
        ))
    }

    async fn admin(&mut self) -> ClientResult<&DefaultMQAdminExt> {
        if self.admin.is_none() {
            let mut admin = DefaultMQAdminExt::new(self.client());
            admin.set_namesrv_addr(self.namesrv.as_str());
            admin
                .client_config_mut()
                .set_instance_name("rust-admin".into());
            MQAdminReadExt::start(&mut admin).await?;
            self.admin = Some(admin);
        }
        Ok(self.admin.as_ref().expect("just started"))
    }

    async fn admin_route(&mut self, a: &Args) -> ClientResult<String> {
        let topic = a.get("topic").cloned().unwrap_or_default();
        let admin = self.admin().await?;
        let Some(route) = admin
            .examine_topic_route_info(topic.as_str().into())
            .await?
        else {
            return Ok("route none\n".to_string());
        };
        let mut out = format!(
            "route orderTopicConf={}\n",
            route.order_topic_conf.as_deref().unwrap_or("null")
        );
        let mut queues: Vec<String> = route
            .queue_datas
            .iter()
            .map(|q| {
                format!(
                    "queue broker={} read={} write={} perm={} sysFlag={}\n",
                    q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag
                )
            })
            .collect();
        queues.sort();
        let mut brokers: Vec<String> = route
            .broker_datas
            .iter()
            .map(|b| {
                let addrs: BTreeMap<u64, String> = b
                    .broker_addrs()
                    .iter()
                    .map(|(id, addr)| (*id, addr.to_string()))
                    .collect();
                format!(
                    "broker cluster={} name={} addrs={}\n",
                    b.cluster(),
                    b.broker_name(),
                    java_map(&addrs)
                )
            })
            .collect();
        brokers.sort();
        out.extend(queues);
        out.extend(brokers);
        Ok(out)
    }

    async fn admin_cluster(&mut self) -> ClientResult<String> {
        let admin = self.admin().await?;
        let info = admin.examine_broker_cluster_info().await?;
        let mut out = String::new();
        let clusters: BTreeMap<String, Vec<String>> = info
            .cluster_addr_table
            .iter()
            .flatten()
            .map(|(c, names)| {
                let mut names: Vec<String> = names.iter().map(ToString::to_string).collect();
                names.sort();
                (c.to_string(), names)
            })
            .collect();
        for (c, names) in clusters {
            out.push_str(&format!("cluster {c} brokers=[{}]\n", names.join(", ")));
        }
        let brokers: BTreeMap<String, String> = info
            .broker_addr_table
            .iter()
            .flatten()
            .map(|(name, b)| {
                let addrs: BTreeMap<u64, String> = b
                    .broker_addrs()
                    .iter()
                    .map(|(id, addr)| (*id, addr.to_string()))
                    .collect();
                (
                    name.to_string(),
                    format!("cluster={} addrs={}", b.cluster(), java_map(&addrs)),
                )
            })
            .collect();
        for (name, b) in brokers {
            out.push_str(&format!("broker {name} {b}\n"));
        }
        Ok(out)
    }
}

impl Drop for RustDriver {
    fn drop(&mut self) {
        let producers = std::mem::take(&mut self.producers);
        let admin = self.admin.take();
        let client = self.client.take();
        if let Some(rt) = self.rt.take() {
            rt.block_on(async move {
                for (_, mut p) in producers {
                    quietly(async move { p.shutdown().await }).await;
                }
                if let Some(mut admin) = admin {
                    quietly(async move { MQAdminReadExt::shutdown(&mut admin).await }).await;
                }
                if let Some(client) = client {
                    quietly(client.shutdown()).await;
                }
            });
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        // The client's own runtime last, outside any async context.
        drop(self.owner.take());
    }
}

/// The sum of the queues' max offsets: how many messages consumers can see (an error counts 0).
async fn visible(p: &mut DefaultMQProducer, mqs: &[MessageQueue]) -> i64 {
    let mut sum = 0;
    for mq in mqs {
        sum += p.max_offset(mq).await.unwrap_or(0);
    }
    sum
}

fn num<T: std::str::FromStr>(a: &Args, key: &str, default: T) -> T {
    a.get(key).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Java driver's `body`: `<body>-<i>`, padded with a..z up to `size`.
fn body(a: &Args, i: usize) -> String {
    let size: usize = num(a, "size", 0);
    let mut b = format!("{}-{i}", a.get("body").map_or("m", String::as_str));
    while b.len() < size {
        b.push((b'a' + (b.len() % 26) as u8) as char);
    }
    b
}

/// Java driver's `message`: tag `i % tags`, key `<keys><i>`, delay level, one user property.
fn message(a: &Args, i: usize) -> Message {
    let mut m = Message::builder()
        .topic(a.get("topic").map_or("", String::as_str))
        .body_slice(body(a, i).as_bytes());
    let tags: Vec<&str> = a
        .get("tags")
        .map_or("", String::as_str)
        .split(',')
        .collect();
    if !tags[0].is_empty() {
        m = m.tags(tags[i % tags.len()]);
    }
    if let Some(k) = a.get("keys") {
        m = m.key(format!("{k}{i}"));
    }
    if let Some(d) = a.get("delay").and_then(|d| d.parse().ok()) {
        m = m.delay_level(d);
    }
    if let Some((k, v)) = a.get("prop").and_then(|p| p.split_once(':')) {
        m = match m.raw_property(k, v) {
            Ok(m) => m,
            Err(e) => panic!("prop={k}:{v} refused by the client's builder: {e}"),
        };
    }
    m.build_unchecked()
}

fn status(r: &SendResult) -> String {
    // SendStatus serializes as Java's enum name (SEND_OK, ...).
    serde_json::to_value(r.send_status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{:?}", r.send_status))
}

/// Java driver's `printSend`, field for field.
fn send_line(i: usize, r: &SendResult) -> String {
    format!(
        "send {i} {} queue={} queueOffset={} msgId={} offsetMsgId={} regionId={} traceOn={}\n",
        status(r),
        r.message_queue
            .as_ref()
            .map_or("null".to_string(), |q| q.queue_id().to_string()),
        r.queue_offset,
        r.msg_id.as_deref().unwrap_or("null"),
        r.offset_msg_id.as_deref().unwrap_or("null"),
        r.region_id.as_deref().unwrap_or("null"),
        r.trace_on
    )
}

/// Java's `Map.toString` of a sorted map: `{K=V, K2=V2}`.
fn java_map<K: std::fmt::Display, V: std::fmt::Display>(m: &BTreeMap<K, V>) -> String {
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// Java driver's `describe`, in its field order.
fn describe_msg(m: &MessageExt) -> String {
    let props: BTreeMap<String, String> = m
        .properties()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let prop = |k: &str| props.get(k).map_or("null", String::as_str).to_string();
    format!(
        "msg topic={} queue={} queueOffset={} tags={} keys={} flag={} sysFlag={} reconsume={} \
         bodyCRC={} storeSize={} body={} props={}",
        m.topic(),
        m.queue_id(),
        m.queue_offset(),
        prop("TAGS"),
        prop("KEYS"),
        m.flag(),
        m.sys_flag(),
        m.reconsume_times(),
        m.body_crc(),
        m.store_size(),
        String::from_utf8_lossy(m.body().as_deref().unwrap_or_default()),
        java_map(&props)
    )
}

/// Messages sorted by (topic, queue, queue offset), one `msg` line each.
fn sorted<'a>(msgs: impl Iterator<Item = &'a MessageExt>) -> String {
    let mut v: Vec<&MessageExt> = msgs.collect();
    v.sort_by(|x, y| {
        (x.topic().as_str(), x.queue_id(), x.queue_offset()).cmp(&(
            y.topic().as_str(),
            y.queue_id(),
            y.queue_offset(),
        ))
    });
    v.iter().map(|m| describe_msg(m) + "\n").collect()
}

/// A client error with what its (redacted) `Display` hides: the broker's response code and the
/// typed broker/client exception text, when present.
fn describe(e: &ClientError) -> String {
    let mut out = format!("{e}");
    let code = e
        .broker_response_code()
        .or_else(|| MQBrokerException::from_client_error(e).map(|b| b.response_code()));
    if let Some(code) = code {
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

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// Polls `cond` every 20 ms for at most `limit`; true when it held.
async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Awaits a client shutdown for at most [`SHUTDOWN_LIMIT`]; a slow one is logged, not fatal.
async fn quietly<F: Future>(f: F) {
    if tokio::time::timeout(SHUTDOWN_LIMIT, f).await.is_err() {
        eprintln!("rust driver: a client shutdown took more than {SHUTDOWN_LIMIT:?}");
    }
}
