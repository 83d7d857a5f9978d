//! Master/slave replication end to end: a SYNC_MASTER and a SLAVE broker on 127.0.0.1, the slave
//! finding its master through the master's name server, a real client producing.
//!
//! What it pins: SYNC_MASTER answers SLAVE_NOT_AVAILABLE (11) while no slave is connected and
//! SEND_OK once one is; every SEND_OK message is on the slave (its CommitLog is a byte-identical
//! prefix of the master's, and its ConsumeQueue counts the same messages); the slave refuses
//! producers with SERVICE_NOT_AVAILABLE (14); a slave that goes away turns SEND_OK back into
//! SLAVE_NOT_AVAILABLE; PULL answers name the broker to read from next and a slave never moves a
//! consumer's offset; across seeded partitions of the replication link (a proxy in the test),
//! no SEND_OK is given for a byte the slave had not reported; a real client's consumer reads
//! everything from the slave while the master is down.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::real_client::*;
use actormq::remoting::client::RemotingClient;
use actormq_core::format::msg_id::decode_offset_msg_id;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::PullMessageRequestHeader;
use rocketmq_client_rust::SendStatus;

/// The producer group of every raw SEND ([`send_request`], from tests/common).
const PRODUCER: &str = "ha-producer";
/// How long a slave may take to catch up with its master ([`wait_caught_up`], tests/common).
const CATCH_UP: Duration = Duration::from_secs(30);

/// Sends raw SEND_MESSAGEs to `addr` every 100 ms (at most 30 s) until one is answered `code`;
/// returns the last answer's code and remark.
async fn send_until(addr: &str, topic: &str, code: i32) -> (i32, String) {
    let client = RemotingClient::connect(addr).await.expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = client
            .invoke(
                send_request(PRODUCER, topic, 0, "probe"),
                Duration::from_secs(10),
            )
            .await
            .expect("answered");
        let got = (r.code, r.remark.clone().unwrap_or_default());
        if r.code == code || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many messages (and stream items) the actor `name` handled, from a `/metrics` page.
fn handled(page: &str, name: &str) -> f64 {
    let label = format!("actor=\"{name}\"");
    page.lines()
        .filter(|l| l.starts_with("actormq_actor_messages_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The body of `GET /metrics` ([`metrics_page`]).
async fn metrics_text(addr: &str) -> String {
    metrics_page(addr, Duration::from_secs(10)).await.1
}

/// QUERY_CONSUMER_OFFSET of `group` for queue 0 of `topic`.
async fn query_offset(client: &RemotingClient, group: &str, topic: &str) -> RemotingCommand {
    client
        .invoke(
            query_offset_request(group, topic, 0),
            Duration::from_secs(5),
        )
        .await
        .expect("answered")
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
                    send_request(PRODUCER, &topic, 0, "to the slave"),
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
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;

            // The slave copies the master's tables: the topic, and a group's committed offset.
            let group = unique("GHa");
            let master_client = RemotingClient::connect(&master.broker_addr)
                .await
                .expect("connect");
            let r = master_client
                .invoke(
                    commit_offset_request(&group, &topic, 0, 7),
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
                    pull_request(&group, &topic, 0, 0)
                        .with_ext("maxMsgNums", "1")
                        .with_ext("sysFlag", "1")
                        .with_ext("commitOffset", "3"),
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
            // Replication runs as metered actors: the master's books and its slave's connection,
            // and the slave's side, each with its mailbox series.
            let slave_page = metrics_text(&slave.metrics_addr).await;
            for (page, actor) in [
                (&page, "ha_master"),
                (&page, "ha_connection"),
                (&slave_page, "ha_slave"),
            ] {
                assert!(
                    handled(page, actor) > 0.0,
                    "{actor} handled nothing:\n{page}"
                );
            }

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
                send_request(PRODUCER, topic, (i % 4) as i32, format!("{tag}-{i}-{body}")),
                Duration::from_secs(10),
            )
            .await
            .expect("answered");
        assert_eq!(r.code, rc::SUCCESS, "send {tag}-{i}: {:?}", r.remark);
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
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;
            stop_broker(slave);

            produce(&master.broker_addr, &topic, 100, 4000, "while-away").await;
            let slave = start_broker(sdir.path(), &slave_cfg);
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;
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
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;
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
                wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;
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

/// A PULL of `maxMsgNums` 32 from queue 0 of `topic` for group `PullGroup`, without a commit.
fn pull_from(topic: &str, offset: i64) -> RemotingCommand {
    RemotingCommand::new_request(rq::PULL_MESSAGE).with_ext_fields(
        PullMessageRequestHeader {
            consumer_group: "PullGroup".into(),
            topic: topic.into(),
            queue_offset: offset,
            max_msg_nums: 32,
            ..Default::default()
        }
        .to_ext_fields(),
    )
}

/// (code, nextBeginOffset, suggestWhichBrokerId) of a PULL answer.
async fn pull_answer(client: &RemotingClient, topic: &str, offset: i64) -> (i32, i64, i64) {
    let r = client
        .invoke(pull_from(topic, offset), Duration::from_secs(5))
        .await
        .expect("answered");
    let field = |k: &str| -> i64 {
        r.ext(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            panic!(
                "no {k} in code {} {:?} {:?}",
                r.code, r.remark, r.ext_fields
            )
        })
    };
    (
        r.code,
        field("nextBeginOffset"),
        field("suggestWhichBrokerId"),
    )
}

/// PullMessageProcessor's broker suggestion and a slave's offset rule, over the wire: with
/// `slaveReadEnable` a master sends a consumer reading "on disk" (here everything is, with
/// `accessMessageInMemoryMaxRatio` 0) to the group's slave, with the on-disk batch size; without
/// it every answer names the master; a slave serves reads but never moves a consumer's offset
/// (`offsetCheckInSlave` false): where a master answers PULL_OFFSET_MOVED, it answers
/// PULL_RETRY_IMMEDIATELY and leaves the offset as it was.
#[test]
fn pull_answers_name_the_broker_to_read_from_and_a_slave_moves_no_offset() {
    run_bounded(
        "pull_answers_name_the_broker_to_read_from_and_a_slave_moves_no_offset",
        || async {
            let (_mdir, master) = broker(&[
                SMALL[0],
                SMALL[1],
                ("brokerRole", "ASYNC_MASTER"),
                ("slaveReadEnable", "true"),
                ("accessMessageInMemoryMaxRatio", "0"),
            ]);
            let topic = unique("TSuggest");
            produce(&master.broker_addr, &topic, 80, 100, "s").await;
            let (_sdir, slave) = broker(&slave_of(&master.namesrv_addr));
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;
            let m = RemotingClient::connect(&master.broker_addr)
                .await
                .expect("connect");
            let s = RemotingClient::connect(&slave.broker_addr)
                .await
                .expect("connect");

            // Queue 0 holds 20 messages, all "on disk": eight come back, and the slave (the
            // group's whichBrokerWhenConsumeSlowly, 1) is named.
            assert_eq!(pull_answer(&m, &topic, 0).await, (rc::SUCCESS, 8, 1));
            // Offset 25 is past the end: the master moves the consumer to 20.
            // Nothing was read, so no hint: the group's home broker.
            assert_eq!(
                pull_answer(&m, &topic, 25).await,
                (rc::PULL_OFFSET_MOVED, 20, 0)
            );

            // The slave knows the topic once it has copied its master's tables (every 10 s, the
            // first after 3 s); it serves the read (slaveReadEnable false) and names the master.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let r = s
                    .invoke(pull_from(&topic, 0), Duration::from_secs(5))
                    .await
                    .expect("answered");
                if r.code != rc::TOPIC_NOT_EXIST {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the slave never learnt the topic"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            assert_eq!(pull_answer(&s, &topic, 0).await, (rc::SUCCESS, 20, 0));
            // It never moves the offset: retry, at the group's home broker (0), from 25.
            assert_eq!(
                pull_answer(&s, &topic, 25).await,
                (rc::PULL_RETRY_IMMEDIATELY, 25, 0)
            );

            // slaveReadEnable changes at once: every answer names the master again.
            let r = m
                .invoke(
                    RemotingCommand::new_request(rq::UPDATE_BROKER_CONFIG)
                        .with_body(b"slaveReadEnable=false\n".to_vec()),
                    Duration::from_secs(5),
                )
                .await
                .expect("answered");
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            assert_eq!(r.remark, None, "applied at once: {:?}", r.remark);
            assert_eq!(pull_answer(&m, &topic, 0).await, (rc::SUCCESS, 8, 0));
            stop_broker(slave);
            stop_broker(master);
        },
    );
}

/// A TCP proxy on the replication path (a network partition without network namespaces): the
/// slave dials it, it dials the master. While `blocked` it moves no byte either way, passes no
/// close and dials no master for a new slave connection, so TCP holds everything back much as a dropped
/// link would (the kernel still completes a slave's connect, which a real partition would not);
/// otherwise it forwards each chunk after a seeded 0–`jitter_ms` delay. `reported` is the largest offset report it has passed from the slave to the master,
/// raised before the report is written: the master cannot know more than it says.
struct HaProxy {
    addr: String,
    blocked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    reported: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

/// A small seeded generator (xorshift64*), so a failing schedule can be replayed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

async fn ha_proxy(master_ha: &str, seed: u64, jitter_ms: u64) -> HaProxy {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Returns once the link is up: while it is cut, nothing passes, not even a close.
    async fn open(blocked: &AtomicBool) {
        while blocked.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("proxy listens");
    let addr = listener.local_addr().expect("proxy address").to_string();
    let blocked = Arc::new(AtomicBool::new(false));
    let reported = Arc::new(AtomicU64::new(0));
    let (b, r, master) = (blocked.clone(), reported.clone(), master_ha.to_string());
    let task = tokio::spawn(async move {
        // Owned here: aborting the proxy's task drops the set, which aborts every pump.
        let mut pumps = tokio::task::JoinSet::new();
        let mut conn = 0u64;
        while let Ok((inbound, _)) = listener.accept().await {
            while pumps.try_join_next().is_some() {}
            // A slave dialling during a cut reaches no master until the link is back.
            open(&b).await;
            let Ok(outbound) = tokio::net::TcpStream::connect(&master).await else {
                continue;
            };
            conn += 1;
            let (mut si, mut so) = inbound.into_split();
            let (mut mi, mut mo) = outbound.into_split();
            let (b1, b2, rep) = (b.clone(), b.clone(), r.clone());
            let mut rng1 = Rng::new(seed ^ conn.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut rng2 = Rng::new(rng1.0.rotate_left(17));
            // Slave to master: 8-byte offset reports.
            pumps.spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut partial: Vec<u8> = Vec::new();
                loop {
                    let n = match si.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    open(&b1).await;
                    tokio::time::sleep(Duration::from_millis(rng1.below(jitter_ms + 1))).await;
                    partial.extend_from_slice(&buf[..n]);
                    let whole = partial.len() / 8 * 8;
                    for report in partial[..whole].chunks_exact(8) {
                        let at = u64::from_be_bytes(report.try_into().expect("8 bytes"));
                        rep.fetch_max(at, Ordering::SeqCst);
                    }
                    partial.drain(..whole);
                    if mo.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                // The close (dropping `mo`) passes only once the link is up.
                open(&b1).await;
            });
            // Master to slave: headers and CommitLog bytes.
            pumps.spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = match mi.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    open(&b2).await;
                    tokio::time::sleep(Duration::from_millis(rng2.below(jitter_ms + 1))).await;
                    if so.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                open(&b2).await;
            });
        }
    });
    HaProxy {
        addr,
        blocked,
        reported,
        task,
    }
}

/// A replication partition on loopback: SYNC_MASTER under load from four producers while a
/// proxy between it and its slave cuts replication for four seeded windows, every other one (2.5–3.5 s) longer
/// than `haHousekeepingInterval` (2 s here, so both ends drop the connection), the rest
/// 0.3–1.8 s, and delays every chunk by up to 30 ms. Pinned: no SEND_OK for a message the slave had not reported holding when the answer
/// came — every acknowledged record ends at or before the largest report the proxy had passed
/// (the check is exact, not timed); sends waiting through a long cut get FLUSH_SLAVE_TIMEOUT
/// (`slaveTimeout` 1 s here), sends while the slave is away SLAVE_NOT_AVAILABLE; after the last
/// heal the slave catches up, and its CommitLog is a
/// byte-identical prefix of the master's.
#[test]
fn a_sync_master_acknowledges_nothing_its_slave_has_not_reported_across_partitions() {
    run_bounded(
        "a_sync_master_acknowledges_nothing_its_slave_has_not_reported_across_partitions",
        || async {
            use std::sync::atomic::{AtomicBool, Ordering};
            use std::sync::Arc;
            let seed = std::env::var("ACTORMQ_TEST_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| now_millis() | 1);
            eprintln!("partition test seed {seed} (ACTORMQ_TEST_SEED={seed} replays it)");
            let mut rng = Rng::new(seed);
            let ha = [
                ("haHousekeepingInterval", "2000"),
                ("haSendHeartbeatInterval", "500"),
            ];
            let (mdir, master) = broker(&[
                SMALL[0],
                SMALL[1],
                ha[0],
                ha[1],
                ("brokerRole", "SYNC_MASTER"),
                // Shorter than every long cut: a send waiting through one is answered
                // FLUSH_SLAVE_TIMEOUT whatever the connection does.
                ("slaveTimeout", "1000"),
            ]);
            let proxy = ha_proxy(&master.ha_addr, rng.below(u64::MAX), 30).await;
            let sdir = tempfile::tempdir().expect("temp dir");
            let slave = start_broker(
                sdir.path(),
                &[
                    SMALL[0],
                    SMALL[1],
                    ha[0],
                    ha[1],
                    ("brokerRole", "SLAVE"),
                    ("brokerId", "1"),
                    ("haMasterAddress", &proxy.addr),
                ],
            );
            let topic = unique("TPart");
            let (code, remark) = send_until(&master.broker_addr, &topic, rc::SUCCESS).await;
            assert_eq!(code, rc::SUCCESS, "through the proxy: {remark}");

            // Four producers; each SEND_OK is kept with the proxy's report at its arrival.
            let stop = Arc::new(AtomicBool::new(false));
            let mut producers = Vec::new();
            for p in 0..4 {
                let (stop, addr, topic) = (stop.clone(), master.broker_addr.clone(), topic.clone());
                let (reported, blocked) = (proxy.reported.clone(), proxy.blocked.clone());
                producers.push(tokio::spawn(async move {
                    let client = RemotingClient::connect(&addr).await.expect("connect");
                    let (mut acked, mut codes) = (Vec::new(), std::collections::BTreeMap::new());
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let cut = blocked.load(Ordering::SeqCst);
                        let r = client
                            .invoke(
                                send_request(
                                    PRODUCER,
                                    &topic,
                                    p,
                                    format!("p{p}-{i}-{}", "y".repeat(200)),
                                ),
                                Duration::from_secs(10),
                            )
                            .await
                            .expect("answered");
                        i += 1;
                        if r.code == rc::SUCCESS {
                            let seen = reported.load(Ordering::SeqCst);
                            let id = r.ext("msgId").expect("msgId").to_string();
                            let (_, phy) = decode_offset_msg_id(&id).expect("an offset msgId");
                            acked.push((phy as u64, seen, cut));
                        } else {
                            *codes.entry(r.code).or_insert(0usize) += 1;
                            // SLAVE_NOT_AVAILABLE comes at once: do not spin on it.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                    (acked, codes)
                }));
            }
            let mut windows = Vec::new();
            for w in 0..4 {
                // Every other cut outlasts haHousekeepingInterval: both ends drop the
                // connection, and the slave's attempts during the cut fail the same way, so
                // after the heal it may take up to 5 s (its dial interval) to connect again:
                // the open window after a long cut is longer than that.
                let open = if w > 0 && w % 2 == 0 { 6000 } else { 1000 } + rng.below(1000);
                tokio::time::sleep(Duration::from_millis(open)).await;
                let cut = if w % 2 == 0 {
                    2500 + rng.below(1000)
                } else {
                    300 + rng.below(1500)
                };
                proxy.blocked.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(cut)).await;
                proxy.blocked.store(false, Ordering::SeqCst);
                windows.push((open, cut));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            stop.store(true, Ordering::Relaxed);
            let (mut acked, mut codes) = (Vec::new(), std::collections::BTreeMap::new());
            for p in producers {
                let (a, c) = p.await.expect("producer");
                acked.extend(a);
                for (k, v) in c {
                    *codes.entry(k).or_insert(0) += v;
                }
            }
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;
            stop_broker(slave);
            stop_broker(master);
            proxy.task.abort();

            // Each acknowledged record ends within what the slave had reported.
            let file = 1u64 << 20;
            let mut files = std::collections::HashMap::new();
            let mut in_cuts = 0;
            for (phy, seen, cut) in &acked {
                let bytes = files.entry(phy / file).or_insert_with(|| {
                    std::fs::read(
                        mdir.path()
                            .join(format!("commitlog/{:020}", phy / file * file)),
                    )
                    .expect("master CommitLog file")
                });
                let at = (phy % file) as usize;
                let size = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
                assert!(
                    phy + u64::from(size) <= *seen,
                    "seed {seed}: SEND_OK for the record at {phy} ({size} bytes) while the slave \
                     had reported {seen}"
                );
                in_cuts += usize::from(*cut);
            }
            eprintln!(
                "seed {seed}: windows (open ms, cut ms) {windows:?}; {} SEND_OK ({in_cuts} sent \
                 during a cut), other codes {codes:?}",
                acked.len()
            );
            assert!(
                acked.len() > 100,
                "the load ran: {} acknowledged",
                acked.len()
            );
            assert!(
                codes.keys().all(|c| [
                    rc::SLAVE_NOT_AVAILABLE,
                    rc::FLUSH_SLAVE_TIMEOUT,
                    rc::SYSTEM_BUSY
                ]
                .contains(c)),
                "only replication codes and flow control: {codes:?}"
            );
            assert!(
                codes.contains_key(&rc::FLUSH_SLAVE_TIMEOUT)
                    || codes.contains_key(&rc::SLAVE_NOT_AVAILABLE),
                "the cuts were felt: {codes:?}"
            );
            assert_slave_files_match(mdir.path(), sdir.path());
        },
    );
}

/// A real client's failover: the master stops and a push consumer of a new group, finding only
/// the slave in the route, reads every message from it. Both brokers use the slave's name
/// server (the slave starts first and learns its master from it, registering every second).
#[test]
fn a_consumer_reads_everything_from_the_slave_while_its_master_is_down() {
    run_bounded(
        "a_consumer_reads_everything_from_the_slave_while_its_master_is_down",
        || async {
            let sdir = tempfile::tempdir().expect("temp dir");
            let slave = start_broker(
                sdir.path(),
                &[
                    SMALL[0],
                    SMALL[1],
                    ("brokerRole", "SLAVE"),
                    ("brokerId", "1"),
                    ("registerNameServerPeriod", "1000"),
                ],
            );
            let namesrv = slave.namesrv_addr.clone();
            let (_mdir, master) = broker(&[
                SMALL[0],
                SMALL[1],
                ("brokerRole", "ASYNC_MASTER"),
                ("namesrvAddr", &namesrv),
            ]);
            let topic = unique("TFailover");
            // The first SEND creates the topic, which the master then registers.
            let (code, remark) = send_until(&master.broker_addr, &topic, rc::SUCCESS).await;
            assert_eq!(code, rc::SUCCESS, "{remark}");
            let mut sent = std::collections::BTreeSet::from(["probe".to_string()]);
            let rt = client_runtime("ha-failover");
            let mut p = producer(&rt, &namesrv).await;
            wait_route(&mut p, &topic).await;
            for i in 0..40 {
                let body = format!("failover-{i}");
                p.send_with_timeout(msg(&topic, "F", &body), SEND_TIMEOUT_MS)
                    .await
                    .unwrap_or_else(|e| panic!("send {i} failed: {}", describe(&e)));
                sent.insert(body);
            }
            quietly("producer shutdown", p.shutdown()).await;
            wait_caught_up(&master.broker_addr, &slave.broker_addr, &topic, 4, CATCH_UP).await;
            // The slave serves the topic once it has copied its master's tables.
            let s = RemotingClient::connect(&slave.broker_addr)
                .await
                .expect("connect");
            let deadline = Instant::now() + Duration::from_secs(30);
            while pull_answer_code(&s, &topic).await == rc::TOPIC_NOT_EXIST {
                assert!(
                    Instant::now() < deadline,
                    "the slave never learnt the topic"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            stop_broker(master);

            let got = sink();
            let mut c = start_collecting_consumer(
                &rt,
                &namesrv,
                &unique("cg_failover"),
                &topic,
                "*",
                got.clone(),
            )
            .await;
            let all = wait_until(Duration::from_secs(40), || seen(&got).len() >= sent.len()).await;
            let bodies: std::collections::BTreeSet<String> =
                seen(&got).into_iter().map(|g| g.body).collect();
            quietly("consumer shutdown", c.shutdown()).await;
            quietly("rt shutdown", rt.shutdown()).await;
            assert!(
                all && bodies == sent,
                "from the slave: {} of {} messages ({} distinct)",
                seen(&got).len(),
                sent.len(),
                bodies.len()
            );
            stop_broker(slave);
        },
    );
}

/// The code of a PULL of queue 0 of `topic` from offset 0.
async fn pull_answer_code(client: &RemotingClient, topic: &str) -> i32 {
    client
        .invoke(pull_from(topic, 0), Duration::from_secs(5))
        .await
        .expect("answered")
        .code
}
