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
    RemotingCommand::new_request(rq::SEND_MESSAGE)
        .with_ext("producerGroup", "ha-producer")
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("defaultTopicQueueNums", "4")
        .with_ext("queueId", "0")
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
            let deadline = Instant::now() + Duration::from_secs(20);
            for mq in &queues {
                let q = mq.queue_id();
                let want = max_offset(&master.broker_addr, &topic, q).await;
                loop {
                    let got = max_offset(&slave.broker_addr, &topic, q).await;
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
