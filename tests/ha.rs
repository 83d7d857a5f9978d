//! Master/slave replication end to end: a SYNC_MASTER and a SLAVE broker on 127.0.0.1, the slave
//! finding its master through the master's name server, a real client producing.
//!
//! What it pins: SYNC_MASTER answers SLAVE_NOT_AVAILABLE (11) while no slave is connected and
//! SEND_OK once one is; every SEND_OK message is on the slave (its CommitLog is a byte-identical
//! prefix of the master's, and its ConsumeQueue counts the same messages); the slave refuses
//! producers with SERVICE_NOT_AVAILABLE (14); a slave that goes away turns SEND_OK back into
//! SLAVE_NOT_AVAILABLE.

mod common;

use std::time::{Duration, Instant};

use actormq::remoting::client::RemotingClient;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use common::*;
use rocketmq_client_rust::SendStatus;

fn send_request(topic: &str, body: &str) -> RemotingCommand {
    send_to_queue(topic, 0, body)
}

fn send_to_queue(topic: &str, queue_id: i32, body: &str) -> RemotingCommand {
    RemotingCommand::new_request(rq::SEND_MESSAGE)
        .with_ext("producerGroup", "ha-producer")
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("defaultTopicQueueNums", "4")
        .with_ext("queueId", queue_id.to_string())
        .with_ext("sysFlag", "0")
        .with_ext("bornTimestamp", now_millis().to_string())
        .with_ext("flag", "0")
        .with_ext("properties", "")
        .with_body(body.as_bytes().to_vec())
}

/// Sends raw SEND_MESSAGEs to `addr` every 100 ms (at most 30 s) until one is answered `code`;
/// returns the last answer's code and remark.
async fn send_until(addr: &str, topic: &str, code: i32) -> (i32, String) {
    let client = RemotingClient::connect(addr).await.expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = client
            .invoke(send_request(topic, "probe"), Duration::from_secs(10))
            .await
            .expect("answered");
        let got = (r.code, r.remark.clone().unwrap_or_default());
        if r.code == code || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of `GET /metrics` (HTTP/1.1, `Connection: close`).
async fn metrics_text(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .expect("answered in time")
        .expect("read");
    String::from_utf8_lossy(&raw).into_owned()
}

/// QUERY_CONSUMER_OFFSET of `group` for queue 0 of `topic`.
async fn query_offset(client: &RemotingClient, group: &str, topic: &str) -> RemotingCommand {
    client
        .invoke(
            RemotingCommand::new_request(rq::QUERY_CONSUMER_OFFSET)
                .with_ext("consumerGroup", group)
                .with_ext("topic", topic)
                .with_ext("queueId", "0"),
            Duration::from_secs(5),
        )
        .await
        .expect("answered")
}

async fn max_offset(addr: &str, topic: &str, queue_id: i32) -> Option<i64> {
    let client = RemotingClient::connect(addr).await.expect("connect");
    let r = client
        .invoke(
            RemotingCommand::new_request(rq::GET_MAX_OFFSET)
                .with_ext("topic", topic)
                .with_ext("queueId", queue_id.to_string()),
            Duration::from_secs(5),
        )
        .await
        .expect("answered");
    (r.code == rc::SUCCESS)
        .then(|| r.ext("offset").and_then(|o| o.parse().ok()))
        .flatten()
}

#[test]
fn a_slave_holds_every_message_a_sync_master_acknowledged() {
    run_bounded(
        "a_slave_holds_every_message_a_sync_master_acknowledged",
        || async {
            let (mdir, master) = broker(&[("brokerRole", "SYNC_MASTER")]);
            let topic = unique("THa");

            // No slave yet: stored, but not SEND_OK.
            let (code, remark) =
                send_until(&master.broker_addr, &topic, rc::SLAVE_NOT_AVAILABLE).await;
            assert_eq!(code, rc::SLAVE_NOT_AVAILABLE, "without a slave: {remark}");

            let sdir = tempfile::tempdir().expect("temp dir");
            let slave = start_broker(
                sdir.path(),
                &[
                    ("brokerRole", "SLAVE"),
                    ("brokerId", "1"),
                    ("namesrvAddr", &master.namesrv_addr),
                ],
            );
            // The slave learns the master's HA address from the name server and connects.
            let (code, remark) = send_until(&master.broker_addr, &topic, rc::SUCCESS).await;
            assert_eq!(code, rc::SUCCESS, "with a slave: {remark}");

            let rt = client_runtime("ha");
            let mut p = producer(&rt, &master.namesrv_addr).await;
            let queues = wait_route(&mut p, &topic).await;
            assert_eq!(queues.len(), 4, "the four queues wait_caught_up compares");
            for i in 0..100 {
                let r = p
                    .send_with_timeout(msg(&topic, "H", &format!("ha-{i}")), SEND_TIMEOUT_MS)
                    .await
                    .unwrap_or_else(|e| panic!("send {i} failed: {}", describe(&e)))
                    .expect("a sync send returns a SendResult");
                assert_eq!(r.send_status, SendStatus::SendOk, "send {i}: {r:?}");
            }
            quietly("producer shutdown", p.shutdown()).await;
            quietly("rt shutdown", rt.shutdown()).await;

            // The slave refuses producers.
            let client = RemotingClient::connect(&slave.broker_addr)
                .await
                .expect("connect");
            let r = client
                .invoke(
                    send_request(&topic, "to the slave"),
                    Duration::from_secs(10),
                )
                .await
                .expect("answered");
            assert_eq!(r.code, rc::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
            assert!(
                r.remark.as_deref().unwrap_or("").contains("slave"),
                "{:?}",
                r.remark
            );

            // The slave's ConsumeQueues hold what the master's do (dispatched from the
            // replicated CommitLog).
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic).await;

            // The slave copies the master's tables: the topic, and a group's committed offset.
            let group = unique("GHa");
            let master_client = RemotingClient::connect(&master.broker_addr)
                .await
                .expect("connect");
            let r = master_client
                .invoke(
                    RemotingCommand::new_request(rq::UPDATE_CONSUMER_OFFSET)
                        .with_ext("consumerGroup", group.as_str())
                        .with_ext("topic", topic.as_str())
                        .with_ext("queueId", "0")
                        .with_ext("commitOffset", "7"),
                    Duration::from_secs(5),
                )
                .await
                .expect("answered");
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            // RocketMQ's period is 10 s (the first round 3 s after the start): two rounds at most.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let topics = client
                    .invoke(
                        RemotingCommand::new_request(rq::GET_ALL_TOPIC_CONFIG),
                        Duration::from_secs(5),
                    )
                    .await
                    .expect("answered");
                let offset = query_offset(&client, &group, &topic).await;
                let has_topic = String::from_utf8_lossy(&topics.body).contains(&topic);
                let at = (offset.code == rc::SUCCESS)
                    .then(|| offset.ext("offset").map(str::to_string))
                    .flatten();
                if has_topic && at.as_deref() == Some("7") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the slave has the topic: {has_topic}; its offset for the group: {at:?} \
                     ({:?})",
                    offset.remark
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }

            // A PULL that carries a commit offset does not move the slave's copy (RocketMQ's
            // rule: a slave's offsets are its master's).
            let r = client
                .invoke(
                    RemotingCommand::new_request(rq::PULL_MESSAGE)
                        .with_ext("consumerGroup", group.as_str())
                        .with_ext("topic", topic.as_str())
                        .with_ext("queueId", "0")
                        .with_ext("queueOffset", "0")
                        .with_ext("maxMsgNums", "1")
                        .with_ext("sysFlag", "1")
                        .with_ext("commitOffset", "3")
                        .with_ext("suspendTimeoutMillis", "0")
                        .with_ext("subVersion", "0"),
                    Duration::from_secs(5),
                )
                .await
                .expect("answered");
            assert_eq!(r.code, rc::SUCCESS, "pull from the slave: {:?}", r.remark);
            tokio::time::sleep(Duration::from_millis(300)).await;
            let offset = query_offset(&client, &group, &topic).await;
            assert_eq!(offset.ext("offset"), Some("7"), "{:?}", offset.remark);

            // The master's /metrics counts its slave.
            let page = metrics_text(&master.metrics_addr).await;
            assert!(
                page.lines()
                    .any(|l| l.starts_with("actormq_ha_slaves{") && l.ends_with(" 1")),
                "no actormq_ha_slaves 1 in:\n{page}"
            );

            // Without its slave the master says so again.
            stop_broker(slave);
            let (code, remark) =
                send_until(&master.broker_addr, &topic, rc::SLAVE_NOT_AVAILABLE).await;
            assert_eq!(code, rc::SLAVE_NOT_AVAILABLE, "slave gone: {remark}");
            stop_broker(master);

            // Byte for byte: the slave's CommitLog is a prefix of the master's.
            let name = format!("commitlog/{:020}", 0);
            let m = std::fs::read(mdir.path().join(&name)).expect("master CommitLog");
            let s = std::fs::read(sdir.path().join(&name)).expect("slave CommitLog");
            let end = s.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            assert!(end > 100 * 100, "the slave holds {end} bytes");
            assert!(
                m[..end] == s[..end],
                "the slave's bytes differ from the master's"
            );
        },
    );
}

/// 1 MiB CommitLog files, so a few MB of messages roll through several.
const SMALL: [(&str, &str); 2] = [
    ("mappedFileSizeCommitLog", "1048576"),
    ("maxMessageSize", "65536"),
];

/// [`SMALL`] as the slave of the master the name server at `namesrv` knows.
fn slave_of(namesrv: &str) -> [(&str, &str); 5] {
    [
        SMALL[0],
        SMALL[1],
        ("brokerRole", "SLAVE"),
        ("brokerId", "1"),
        ("namesrvAddr", namesrv),
    ]
}

/// Sends `n` messages of `len` bytes to `topic`, spread over queues 0..4, each answered SUCCESS.
async fn produce(addr: &str, topic: &str, n: usize, len: usize, tag: &str) {
    let client = RemotingClient::connect(addr).await.expect("connect");
    let body = "x".repeat(len);
    for i in 0..n {
        let r = client
            .invoke(
                send_to_queue(topic, (i % 4) as i32, &format!("{tag}-{i}-{body}")),
                Duration::from_secs(10),
            )
            .await
            .expect("answered");
        assert_eq!(r.code, rc::SUCCESS, "send {tag}-{i}: {:?}", r.remark);
    }
}

/// Waits (at most 30 s) until the slave's four queues of `topic` end where the master's do.
async fn wait_caught_up(master: &str, slave: &str, topic: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for q in 0..4 {
        loop {
            // Both dispatch on their own: read both each time.
            let want = max_offset(master, topic, q).await;
            let got = max_offset(slave, topic, q).await;
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "queue {q}: slave max offset {got:?}, master {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Every CommitLog file the slave has equals the master's file of the same name, byte for byte
/// up to the slave's last non-zero byte; returns the slave's file names.
fn assert_slave_files_match(mdir: &std::path::Path, sdir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sdir.join("commitlog"))
        .expect("slave commitlog dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in &names {
        let m = std::fs::read(mdir.join("commitlog").join(name)).expect("master file");
        let s = std::fs::read(sdir.join("commitlog").join(name)).expect("slave file");
        let end = s.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        assert!(m[..end] == s[..end], "{name}: the slave's bytes differ");
    }
    names
}

/// An empty slave starts at the master's last CommitLog file, follows the master across file
/// ends, and after a clean restart resumes where it stopped.
#[test]
fn a_slave_starts_at_the_masters_last_file_and_resumes_after_a_restart() {
    run_bounded(
        "a_slave_starts_at_the_masters_last_file_and_resumes_after_a_restart",
        || async {
            let (mdir, master) = broker(&SMALL);
            let topic = unique("THaFiles");
            // 1.2 MiB: the master is in its second file when the slave first connects.
            produce(&master.broker_addr, &topic, 300, 4000, "before").await;

            let sdir = tempfile::tempdir().expect("temp dir");
            let slave_cfg = slave_of(&master.namesrv_addr);
            let slave = start_broker(sdir.path(), &slave_cfg);
            produce(&master.broker_addr, &topic, 300, 4000, "during").await;
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic).await;
            stop_broker(slave);

            produce(&master.broker_addr, &topic, 100, 4000, "while-away").await;
            let slave = start_broker(sdir.path(), &slave_cfg);
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic).await;
            stop_broker(slave);
            stop_broker(master);

            let names = assert_slave_files_match(mdir.path(), sdir.path());
            let masters = std::fs::read_dir(mdir.path().join("commitlog"))
                .expect("master commitlog dir")
                .count();
            assert!(
                masters >= 3 && names.len() >= 2,
                "the master has {masters} files, the slave {names:?}"
            );
            assert_ne!(
                names[0],
                format!("{:020}", 0),
                "an empty slave starts at the master's last file, not at 0"
            );
        },
    );
}

/// The newest CommitLog file of the store at `root` holding any byte (the allocator makes the
/// next one ahead, empty).
fn newest_file_with_data(root: &std::path::Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(root.join("commitlog"))
        .expect("commitlog dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .rev()
        .find(|n| {
            std::fs::read(root.join("commitlog").join(n))
                .expect("read file")
                .iter()
                .any(|&b| b != 0)
        })
        .expect("a file with data")
}

/// A store that once ran as a master (and holds nothing) becomes the slave of a master three
/// files in: it starts at the master's newest file, and a restart keeps what it replicated —
/// no empty file of its master days is left below it to be refused as a gap, or recovered
/// from and the data cut.
#[test]
fn a_former_master_becomes_a_slave_and_keeps_its_data_across_restarts() {
    run_bounded(
        "a_former_master_becomes_a_slave_and_keeps_its_data_across_restarts",
        || async {
            let sdir = tempfile::tempdir().expect("temp dir");
            stop_broker(start_broker(sdir.path(), &SMALL));

            let (mdir, master) = broker(&SMALL);
            let topic = unique("THaFormer");
            // About 3.5 MB: the master is in its fourth file.
            produce(&master.broker_addr, &topic, 850, 4000, "before").await;
            let first = newest_file_with_data(mdir.path());
            assert_eq!(
                first,
                format!("{:020}", 3 << 20),
                "the master's newest file"
            );

            let slave_cfg = slave_of(&master.namesrv_addr);
            let slave = start_broker(sdir.path(), &slave_cfg);
            produce(&master.broker_addr, &topic, 20, 4000, "during").await;
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic).await;
            stop_broker(slave);
            for round in 0..2 {
                let slave = start_broker(sdir.path(), &slave_cfg);
                produce(
                    &master.broker_addr,
                    &topic,
                    20,
                    4000,
                    &format!("after-{round}"),
                )
                .await;
                wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic).await;
                stop_broker(slave);
                let names = assert_slave_files_match(mdir.path(), sdir.path());
                assert_eq!(
                    names.first(),
                    Some(&first),
                    "restart {round}: the slave's files {names:?} start at the master's newest \
                     file when it first connected"
                );
            }
            stop_broker(master);
        },
    );
}
