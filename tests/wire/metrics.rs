//! The broker's Prometheus endpoint, end to end: a [`TestBroker`] is driven through a raw
//! [`RemotingClient`] (SEND_MESSAGE, PULL_MESSAGE, UPDATE_CONSUMER_OFFSET) and `/metrics` is
//! scraped over plain HTTP before and after, then parsed as Prometheus text.
//!
//! Checked: the RocketMQ 5 counters moved by exactly what was sent and pulled (messages in and
//! out, body bytes in, the size histogram, RPC latency per request code, unknown codes in one
//! series, a long-polled pull marked as such), the consumer-lag gauge follows committed offsets
//! down to 0, the store and metadata gauges are present, every broker series carries the base
//! labels (`cluster`, `node_type="broker"`, `node_id`), and every running actor has its four
//! mailbox series; the process series (`process_cpu_seconds_total` and the other Prometheus
//! process-collector names, per-thread CPU) are there and CPU never goes down. The whole test
//! runs under [`TEST_LIMIT`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actormq::remoting::client::RemotingClient;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;

use crate::common::{
    commit_offset_request, metrics_page, now_millis, pull_request, records, send_request,
    with_broker,
};

/// Hard upper bound of the whole test, broker start and stop included.
const TEST_LIMIT: Duration = Duration::from_secs(120);
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound of every poll (messages pullable, a scrape showing what was committed).
const WAIT_LIMIT: Duration = Duration::from_secs(15);
const TOPIC: &str = "MetricsTopic";
const GROUP: &str = "metrics-group";
/// The producer group of every SEND ([`send_request`], from tests/common).
const PRODUCER: &str = "metrics-producer";
const QUEUES: i32 = 4;
const N: usize = 40;
const SIZE: usize = 1500;

/// Actors every broker runs (ASYNC_FLUSH, embedded name server, one client connection open).
const ACTORS: &[&str] = &[
    "commitlog_writer",
    "reput_dispatcher",
    "consume_queue_builder",
    "index_builder",
    "commitlog_flusher",
    "mapped_file_allocator",
    "metadata",
    "client_registry",
    "pull_hold",
    "connection",
    "route_registry",
    "namesrv_registrar",
    "schedule_delivery",
];

// ---------------------------------------------------------------------------------------------
// A tiny Prometheus text-format reader
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses `name{k="v",...} value` lines; comments and blank lines are skipped.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("sample line without a value: {line}"),
        };
        let mut labels = BTreeMap::new();
        let rest = if let Some(body) = rest.strip_prefix('{') {
            let mut chars = body.char_indices().peekable();
            let end;
            loop {
                // key
                let mut key = String::new();
                let mut closed = None;
                for (i, c) in chars.by_ref() {
                    match c {
                        '=' => break,
                        '}' => {
                            closed = Some(i);
                            break;
                        }
                        ',' => {}
                        c => key.push(c),
                    }
                }
                if let Some(i) = closed {
                    end = i;
                    break;
                }
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "in {line}");
                let mut val = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('n') => val.push('\n'),
                            Some(c) => val.push(c),
                            None => panic!("dangling escape in {line}"),
                        },
                        '"' => break,
                        c => val.push(c),
                    }
                }
                labels.insert(key.trim().to_string(), val);
            }
            &body[end + 1..]
        } else {
            rest
        };
        let value = rest.split_whitespace().next().unwrap_or_default();
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|e| panic!("bad value {v:?} in {line}: {e}")),
        };
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

struct Page {
    text: String,
    samples: Vec<Sample>,
}

impl Page {
    /// Samples named `name` whose labels include every `want` pair.
    fn find<'a>(
        &'a self,
        name: &'a str,
        want: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| {
            s.name == name
                && want
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
    }
    /// The one sample named `name` with these labels; 0 if there is none yet (a counter that has
    /// not been touched).
    fn value(&self, name: &str, want: &[(&str, &str)]) -> f64 {
        let found: Vec<_> = self.find(name, want).collect();
        assert!(
            found.len() <= 1,
            "{name} {want:?} matches {} series: {found:?}",
            found.len()
        );
        found.first().map_or(0.0, |s| s.value)
    }
    fn has(&self, name: &str, want: &[(&str, &str)]) -> bool {
        self.find(name, want).next().is_some()
    }
}

/// `GET /metrics` ([`metrics_page`]), checked to be Prometheus text, parsed.
async fn scrape(addr: &str) -> Page {
    let (head, body) = metrics_page(addr, RPC_TIMEOUT).await;
    assert!(head.starts_with("HTTP/1.1 200"), "scrape failed: {head}");
    let head_lc = head.to_ascii_lowercase();
    assert!(
        head_lc.contains("content-type: text/plain; version=0.0.4"),
        "not the Prometheus text format: {head}"
    );
    assert!(
        !head_lc.contains("transfer-encoding: chunked"),
        "unexpected chunked body: {head}"
    );
    Page {
        samples: parse_exposition(&body),
        text: body,
    }
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

async fn call(c: &RemotingClient, req: RemotingCommand) -> RemotingCommand {
    c.invoke(req, RPC_TIMEOUT).await.expect("broker answered")
}

/// Pulls one queue until `want` messages came back; returns (messages, next offset).
async fn pull_all(c: &RemotingClient, queue_id: i32, want: usize) -> (usize, i64) {
    let deadline = Instant::now() + WAIT_LIMIT;
    let (mut got, mut offset) = (0usize, 0i64);
    while got < want {
        assert!(
            Instant::now() < deadline,
            "queue {queue_id}: pulled {got} of {want} within {WAIT_LIMIT:?}"
        );
        let r = call(c, pull_request(GROUP, TOPIC, queue_id, offset)).await;
        if r.code == rc::SUCCESS {
            for rec in records(&r.body, true) {
                assert_eq!(rec.body.len(), SIZE);
                got += 1;
            }
            offset = r
                .ext("nextBeginOffset")
                .and_then(|o| o.parse().ok())
                .expect("pull response has nextBeginOffset");
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    (got, offset)
}

/// Scrapes until `cond` holds (bounded), returning that page.
async fn scrape_until(addr: &str, what: &str, cond: impl Fn(&Page) -> bool) -> Page {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let p = scrape(addr).await;
        if cond(&p) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within {WAIT_LIMIT:?}; last page:\n{}",
            p.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

async fn body(broker_addr: String, metrics_addr: String) {
    let before = scrape(&metrics_addr).await;
    let in_labels: &[(&str, &str)] = &[
        ("topic", TOPIC),
        ("message_type", "normal"),
        ("is_system", "false"),
    ];
    let out_labels: &[(&str, &str)] = &[
        ("topic", TOPIC),
        ("consumer_group", GROUP),
        ("is_retry", "false"),
        ("is_system", "false"),
    ];
    let send_rpc: &[(&str, &str)] = &[
        ("protocol_type", "remoting"),
        ("request_code", "send_message"),
        ("response_code", "success"),
        ("is_long_polling", "false"),
        ("result", "success"),
    ];

    let c = RemotingClient::connect(&broker_addr)
        .await
        .expect("connect to the broker");
    let mut per_queue = [0usize; QUEUES as usize];
    for i in 0..N {
        let q = (i % QUEUES as usize) as i32;
        let r = call(
            &c,
            send_request(PRODUCER, TOPIC, q, vec![b'a' + (i % 26) as u8; SIZE]),
        )
        .await;
        assert_eq!(r.code, rc::SUCCESS, "send {i}: {:?}", r.remark);
        per_queue[q as usize] += 1;
    }
    let mut next = [0i64; QUEUES as usize];
    let mut pulled = 0;
    for q in 0..QUEUES {
        let (got, off) = pull_all(&c, q, per_queue[q as usize]).await;
        pulled += got;
        next[q as usize] = off;
    }
    assert_eq!(pulled, N);

    let after = scrape(&metrics_addr).await;
    let delta = |name: &str, l: &[(&str, &str)]| after.value(name, l) - before.value(name, l);
    assert_eq!(delta("rocketmq_messages_in_total", in_labels), N as f64);
    assert_eq!(
        delta("rocketmq_throughput_in_total", in_labels),
        (N * SIZE) as f64
    );
    let size_labels = &in_labels[..2];
    assert_eq!(delta("rocketmq_message_size_count", size_labels), N as f64);
    assert_eq!(
        delta(
            "rocketmq_message_size_bucket",
            &[size_labels, &[("le", "4096")]].concat()
        ),
        N as f64,
        "{SIZE}-byte bodies fall in the 4 KiB bucket"
    );
    assert_eq!(
        delta(
            "rocketmq_message_size_bucket",
            &[size_labels, &[("le", "1024")]].concat()
        ),
        0.0
    );
    assert_eq!(delta("rocketmq_messages_out_total", out_labels), N as f64);
    assert!(
        delta("rocketmq_throughput_out_total", out_labels) >= (N * SIZE) as f64,
        "pulled bytes include every body"
    );
    assert_eq!(delta("rocketmq_rpc_latency_count", send_rpc), N as f64);
    assert!(after.has(
        "rocketmq_rpc_latency_bucket",
        &[("request_code", "pull_message"), ("le", "3000")]
    ));

    // Request codes no RocketMQ server defines share one series, whatever their number.
    for code in [9999, 4242] {
        let r = call(&c, RemotingCommand::new_request(code)).await;
        assert_eq!(r.code, rc::REQUEST_CODE_NOT_SUPPORTED);
    }
    // A pull parked by long polling is timed when it is resumed, as `is_long_polling="true"`.
    let parked = pull_request(GROUP, TOPIC, 0, next[0])
        .with_ext("sysFlag", "2") // FLAG_SUSPEND
        .with_ext("suspendTimeoutMillis", "300");
    let r = call(&c, parked).await;
    assert_eq!(r.code, rc::PULL_NOT_FOUND, "{:?}", r.remark);
    let page = scrape(&metrics_addr).await;
    let d = |name: &str, l: &[(&str, &str)]| page.value(name, l) - before.value(name, l);
    let unknown = [
        ("request_code", "unknown"),
        ("response_code", "request_code_not_supported"),
    ];
    assert_eq!(d("rocketmq_rpc_latency_count", &unknown), 2.0);
    let long_poll = [
        ("request_code", "pull_message"),
        ("response_code", "pull_not_found"),
        ("is_long_polling", "true"),
    ];
    assert_eq!(d("rocketmq_rpc_latency_count", &long_poll), 1.0);

    // Lag follows the committed offsets: everything unconsumed at offset 0, nothing at the end.
    for q in 0..QUEUES {
        let r = call(&c, commit_offset_request(GROUP, TOPIC, q, 0)).await;
        assert_eq!(r.code, rc::SUCCESS, "commit: {:?}", r.remark);
    }
    let lag = [("topic", TOPIC), ("consumer_group", GROUP)];
    let lag_of = |p: &Page| p.value("rocketmq_consumer_lag_messages", &lag);
    scrape_until(&metrics_addr, "lag N after committing 0", |p| {
        lag_of(p) == N as f64
    })
    .await;
    for q in 0..QUEUES {
        let r = call(&c, commit_offset_request(GROUP, TOPIC, q, next[q as usize])).await;
        assert_eq!(r.code, rc::SUCCESS, "commit: {:?}", r.remark);
    }
    let page = scrape_until(&metrics_addr, "lag 0 after committing all", |p| {
        p.has("rocketmq_consumer_lag_messages", &lag) && lag_of(p) == 0.0
    })
    .await;
    assert!(page.has(
        "rocketmq_consumer_lag_messages",
        &[
            ("topic", TOPIC),
            ("consumer_group", GROUP),
            ("is_retry", "false"),
            ("is_system", "false")
        ]
    ));

    // Scrape-time gauges.
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    for g in [
        "rocketmq_storage_size",
        "rocketmq_storage_flush_behind_bytes",
        "rocketmq_storage_dispatch_behind_bytes",
        "rocketmq_storage_message_reserve_time",
    ] {
        let v = page.value(g, &storage);
        assert!(page.has(g, &storage) && v >= 0.0, "{g} = {v}");
    }
    assert!(page.value("rocketmq_storage_size", &storage) > 0.0);
    assert!(
        page.value("rocketmq_topic_number", &[]) >= 2.0,
        "TBW102 and {TOPIC}"
    );
    assert!(page.value("rocketmq_consumer_group_number", &[]) >= 1.0);
    for p in ["send", "pull", "heartbeat", "consumer_manager", "admin"] {
        assert!(
            page.has("rocketmq_processor_watermark", &[("processor", p)]),
            "watermark of {p}"
        );
    }
    for g in [
        "rocketmq_producer_connections",
        "rocketmq_consumer_connections",
    ] {
        assert!(page.has(g, &[("protocol_type", "remoting")]), "{g}");
    }

    // Base labels on every broker series.
    for s in page
        .samples
        .iter()
        .filter(|s| s.name.starts_with("rocketmq_"))
    {
        for (k, v) in [
            ("cluster", "DefaultCluster"),
            ("node_type", "broker"),
            ("node_id", "broker-a"),
        ] {
            assert_eq!(
                s.labels.get(k).map(String::as_str),
                Some(v),
                "{} {:?} lacks {k}={v}",
                s.name,
                s.labels
            );
        }
    }

    // Every running actor has its four mailbox series, with no code of its own.
    for a in ACTORS {
        let l = [("actor", *a)];
        for series in [
            "actormq_actor_mailbox_depth",
            "actormq_actor_messages_total",
            "actormq_actor_mailbox_wait_seconds_count",
            "actormq_actor_handle_seconds_count",
        ] {
            assert!(page.has(series, &l), "{series}{{actor={a:?}}} missing");
        }
    }
    assert!(
        page.value(
            "actormq_actor_messages_total",
            &[("actor", "commitlog_writer")]
        ) >= N as f64
    );
    drop(c);
}

#[test]
fn metrics_endpoint_reports_traffic_lag_store_and_actors() {
    with_broker("metrics-test", TEST_LIMIT, &[], |broker| {
        assert!(
            !broker.metrics_addr.is_empty(),
            "the broker reports /metrics"
        );
        body(broker.broker_addr.clone(), broker.metrics_addr.clone())
    });
}

#[test]
fn the_exposition_reader_handles_escapes_and_bare_samples() {
    let s = parse_exposition(
        "# HELP x y\n# TYPE x gauge\nx 3\ny{a=\"q\\\"\\\\z\",b=\"\"} 1.5\nz_bucket{le=\"+Inf\"} +Inf\n",
    );
    assert_eq!(s.len(), 3);
    assert_eq!((s[0].name.as_str(), s[0].value), ("x", 3.0));
    assert_eq!(s[1].labels["a"], "q\"\\z");
    assert_eq!(s[1].labels["b"], "");
    assert_eq!(s[1].value, 1.5);
    assert_eq!(s[2].labels["le"], "+Inf");
    assert!(s[2].value.is_infinite());
}

/// SYNC_FLUSH: the group-commit counters account for every acknowledged send, in at least one
/// flush and at most one per send; in ASYNC_FLUSH (the other tests' brokers) they stay at 0.
#[test]
fn group_commit_counters_count_every_synchronous_send() {
    with_broker(
        "group-commit-metrics-test",
        TEST_LIMIT,
        &[("flushDiskType", "SYNC_FLUSH")],
        |broker| {
            let (b, m) = (broker.broker_addr.clone(), broker.metrics_addr.clone());
            async move {
                let c = RemotingClient::connect(&b).await.expect("connect");
                let before = scrape(&m).await;
                let count = |p: &Page, name: &str| p.value(name, &[]);
                assert_eq!(count(&before, "actormq_group_commit_messages_total"), 0.0);
                const SENDS: usize = 40;
                // Four at a time, so that some flushes can cover more than one.
                for round in 0..SENDS / 4 {
                    let replies = futures_util::future::join_all((0..4).map(|i| {
                        call(
                            &c,
                            send_request(PRODUCER, TOPIC, i, format!("s{round}.{i}").into_bytes()),
                        )
                    }))
                    .await;
                    for r in replies {
                        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
                    }
                }
                let page = scrape(&m).await;
                let (flushes, msgs) = (
                    count(&page, "actormq_group_commit_flushes_total"),
                    count(&page, "actormq_group_commit_messages_total"),
                );
                assert_eq!(msgs, SENDS as f64, "{}", page.text);
                assert!(
                    (1.0..=SENDS as f64).contains(&flushes),
                    "{flushes} flushes for {SENDS} sends"
                );
                // The flush histogram: every flush that wrote data, so at least one and at most
                // one per send (each holds a send's bytes no earlier flush wrote), with the
                // broker's labels, cumulative buckets ending in the count, and time spent.
                let me = [("node_id", "broker-a"), ("node_type", "broker")];
                let flush_count = page.value("actormq_commitlog_flush_seconds_count", &me);
                assert!(
                    (1.0..=SENDS as f64).contains(&flush_count),
                    "{flush_count} timed flushes for {SENDS} sends\n{}",
                    page.text
                );
                let mut buckets: Vec<(f64, f64)> = page
                    .find("actormq_commitlog_flush_seconds_bucket", &me)
                    .map(|s| (s.labels["le"].parse().expect("le is a number"), s.value))
                    .collect();
                buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                assert_eq!(buckets.len(), 31, "30 bounds and +Inf: {buckets:?}");
                assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
                assert_eq!(buckets.last().map(|b| b.1), Some(flush_count));
                assert!(page.value("actormq_commitlog_flush_seconds_sum", &me) > 0.0);
            }
        },
    );
}

/// The process series (Prometheus's process-collector names, read from `/proc`; the
/// `TestBroker` runs in this process): CPU seconds positive and never lower on a later scrape
/// (work done in between), the memory, start-time and fd gauges, and the per-thread CPU with the
/// store writer's full name (Linux keeps 15 bytes of it). Nothing timed.
#[test]
fn process_cpu_memory_and_thread_cpu_are_exported() {
    with_broker("process-metrics-test", TEST_LIMIT, &[], |broker| {
        let (b, m) = (broker.broker_addr.clone(), broker.metrics_addr.clone());
        async move {
            let c = RemotingClient::connect(&b).await.expect("connect");
            let first = scrape(&m).await;
            for i in 0..20 {
                let r = call(
                    &c,
                    send_request(PRODUCER, TOPIC, i % QUEUES, vec![b'p'; SIZE]),
                )
                .await;
                assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            }
            let second = scrape(&m).await;
            let cpu = |p: &Page| p.value("process_cpu_seconds_total", &[]);
            assert!(cpu(&first) > 0.0, "{}", first.text);
            assert!(cpu(&second) >= cpu(&first), "CPU seconds went down");
            assert!(second
                .text
                .contains("# TYPE process_cpu_seconds_total counter"));
            for gauge in [
                "process_resident_memory_bytes",
                "process_virtual_memory_bytes",
                "process_open_fds",
                "process_max_fds",
                "process_threads",
            ] {
                assert!(second.value(gauge, &[]) > 0.0, "{gauge}\n{}", second.text);
            }
            let start = second.value("process_start_time_seconds", &[]);
            let now = now_millis() as f64 / 1000.0;
            assert!(
                start > 1e9 && start <= now + 1.0,
                "start {start}, now {now}"
            );
            let writer = [("thread", "commitlog_writer")];
            assert!(
                second.has("actormq_thread_cpu_seconds_total", &writer),
                "{}",
                second.text
            );
            assert!(second
                .find("actormq_thread_cpu_seconds_total", &[])
                .all(|s| s.value >= 0.0 && !s.labels["thread"].is_empty()));
        }
    });
}

/// `remainTransientStoreBufferNumbs` of GET_BROKER_RUNTIME_INFO (as a `Map<String,String>` KVTable).
async fn remain_buffers(c: &RemotingClient) -> String {
    let r = call(c, RemotingCommand::new_request(rq::GET_BROKER_RUNTIME_INFO)).await;
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("KVTable JSON");
    v["table"]["remainTransientStoreBufferNumbs"]
        .as_str()
        .expect("remainTransientStoreBufferNumbs in the runtime info")
        .to_string()
}

/// With write buffers (`transientStorePoolEnable`, 3 buffers) the pool is visible where a
/// RocketMQ user looks — `remainTransientStoreBufferNumbs` in brokerStatus — and as ActorMQ's own
/// gauge: all 3 free before the first message, 2 once the first CommitLog file holds one.
#[test]
fn write_buffer_pool_is_reported_in_runtime_info_and_metrics() {
    let file_size = (8u64 << 20).to_string();
    let settings = [
        ("transientStorePoolEnable", "true"),
        ("transientStorePoolSize", "3"),
        // Small buffers (the default maxMessageSize of 4 MiB must fit a file).
        ("mappedFileSizeCommitLog", file_size.as_str()),
    ];
    with_broker("pool-metrics-test", TEST_LIMIT, &settings, |broker| {
        let (b, m) = (broker.broker_addr.clone(), broker.metrics_addr.clone());
        async move {
            let c = RemotingClient::connect(&b).await.expect("connect");
            let gauge = |p: &Page, state: &str| {
                p.value("actormq_transient_store_pool_buffers", &[("state", state)])
            };
            assert_eq!(remain_buffers(&c).await, "3");
            let page = scrape(&m).await;
            assert_eq!(gauge(&page, "available"), 3.0, "{}", page.text);
            assert_eq!(gauge(&page, "total"), 3.0);
            let r = call(&c, send_request(PRODUCER, TOPIC, 0, b"pooled".to_vec())).await;
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            assert_eq!(remain_buffers(&c).await, "2");
            let page = scrape(&m).await;
            assert_eq!(gauge(&page, "available"), 2.0, "{}", page.text);
            assert_eq!(gauge(&page, "total"), 3.0);
        }
    });
}
