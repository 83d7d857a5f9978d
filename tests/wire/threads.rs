//! End-to-end tests of connections served on several threads (`serverSelectorThreads`, issue #4):
//! many clients at once each get correct answers, and a long-poll pull parked from one
//! connection thread is woken by a send that arrives on another.
//!
//! Each test starts its own `TestBroker` (127.0.0.1, ephemeral ports, temp dir) and bounds every
//! wait, so a hang fails the test instead of the suite.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actormq::broker::testing::TestBroker;
use actormq::remoting::client::RemotingClient;
use actormq_core::protocol::codes::{request_code, response_code};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{
    pull_sys_flag, PullMessageRequestHeader, SendHeaderNames, SendMessageRequestHeader,
};

use crate::common::{broker, records, stop_broker};

const WAIT: Duration = Duration::from_secs(20);

/// A broker serving connections on `threads` threads ([`broker`]).
fn start(threads: &str) -> (tempfile::TempDir, TestBroker) {
    broker(&[("serverSelectorThreads", threads)])
}

fn send(topic: &str, queue_id: i32, body: &str) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        properties: "WAIT\u{1}true\u{2}".into(),
        ..Default::default()
    };
    RemotingCommand::new_request(request_code::SEND_MESSAGE_V2)
        .with_ext_fields(h.to_ext_fields(SendHeaderNames::V2))
        .with_body(body.as_bytes().to_vec())
}

fn pull(topic: &str, queue_id: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: if suspend_ms > 0 {
            pull_sys_flag::SUBSCRIPTION | pull_sys_flag::SUSPEND
        } else {
            pull_sys_flag::SUBSCRIPTION
        },
        suspend_timeout_millis: suspend_ms,
        subscription: Some("*".into()),
        expression_type: Some("TAG".into()),
        ..Default::default()
    };
    RemotingCommand::new_request(request_code::PULL_MESSAGE).with_ext_fields(h.to_ext_fields())
}

/// The bodies of a pull answer's records ([`records`]).
fn bodies(pull_body: &[u8]) -> Vec<String> {
    records(pull_body, false)
        .iter()
        .map(|r| String::from_utf8_lossy(r.body).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_at_once_each_get_their_own_correct_answers() {
    let (_dir, broker) = start("4");
    let addr = broker.broker_addr.clone();
    // The topic exists before the race, so every send below is a plain append.
    let first = RemotingClient::connect(&addr).await.unwrap();
    let r = first.invoke(send("Many", 0, "seed"), WAIT).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    const CLIENTS: usize = 12;
    const EACH: usize = 60;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let client = RemotingClient::connect(&addr).await.unwrap();
            // Every request in flight at once; replies come back matched by opaque.
            let sends = (0..EACH).map(|i| {
                let q = ((c + i) % 4) as i32;
                let body = format!("c{c}-m{i}");
                let client = client.clone();
                async move {
                    let r = client.invoke(send("Many", q, &body), WAIT).await.unwrap();
                    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
                    let queue: i32 = r.ext("queueId").unwrap().parse().unwrap();
                    let offset: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
                    assert_eq!(queue, q, "the reply belongs to another request");
                    (queue, offset, body)
                }
            });
            futures_util::future::join_all(sends).await
        }));
    }
    let mut by_queue: BTreeMap<i32, BTreeMap<i64, String>> = BTreeMap::new();
    for t in tasks {
        for (q, off, body) in t.await.unwrap() {
            let dup = by_queue.entry(q).or_default().insert(off, body);
            assert!(dup.is_none(), "queue {q} offset {off} given twice");
        }
    }
    // Offsets per queue are contiguous, and each names the message that was sent with it.
    let reader = RemotingClient::connect(&addr).await.unwrap();
    let mut total = 0;
    for (q, offsets) in &by_queue {
        let start = if *q == 0 { 1 } else { 0 };
        let want: Vec<i64> = (start..start + offsets.len() as i64).collect();
        assert_eq!(
            offsets.keys().copied().collect::<Vec<_>>(),
            want,
            "queue {q}"
        );
        let mut next = start;
        while next < start + offsets.len() as i64 {
            // Dispatch is asynchronous: an acknowledged message may not be in its ConsumeQueue
            // yet, so the pull is a long poll (held until it is, as a client's would be).
            let r = reader
                .invoke(pull("Many", *q, next, 10_000), WAIT)
                .await
                .unwrap();
            assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
            for body in bodies(&r.body) {
                assert_eq!(offsets[&next], body, "queue {q} offset {next}");
                next += 1;
                total += 1;
            }
        }
    }
    assert_eq!(total, CLIENTS * EACH);
    stop_broker(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_parked_on_one_thread_wakes_on_a_send_from_another() {
    let (_dir, broker) = start("2");
    let addr = broker.broker_addr.clone();
    // Two connections in a row land on the two threads (round-robin).
    let consumer = RemotingClient::connect(&addr).await.unwrap();
    let producer = RemotingClient::connect(&addr).await.unwrap();
    let r = producer.invoke(send("Poll", 0, "one"), WAIT).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    // Dispatch is asynchronous: wait until the first message can be pulled, so the long poll
    // below starts exactly at the end of the queue (not beyond it, which is answered at once).
    let ready_by = Instant::now() + WAIT;
    while consumer
        .invoke(pull("Poll", 0, 0, 0), WAIT)
        .await
        .unwrap()
        .code
        != response_code::SUCCESS
    {
        assert!(
            Instant::now() < ready_by,
            "the first message was never dispatched"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let started = Instant::now();
    let parked = {
        let consumer = consumer.clone();
        tokio::spawn(async move { consumer.invoke(pull("Poll", 0, 1, 15_000), WAIT).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !parked.is_finished(),
        "nothing new yet: the pull must be parked"
    );
    let r = producer.invoke(send("Poll", 0, "two"), WAIT).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let woken = parked.await.unwrap().unwrap();
    assert_eq!(woken.code, response_code::SUCCESS, "{:?}", woken.remark);
    assert_eq!(bodies(&woken.body), vec!["two".to_string()]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woken by the send, not by the 15 s deadline ({:?})",
        started.elapsed()
    );
    stop_broker(broker);
}
