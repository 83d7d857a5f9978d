//! What Apache RocketMQ 4.9.4 stores and answers where ActorMQ used to differ (the differential
//! conformance suite, tests/conformance/, found these), end to end over the wire against a
//! broker with its embedded name server on ephemeral ports:
//!
//! * INVOKE_BROKER_TO_RESET_OFFSET (222) as Broker2Client.resetOffset answers it: no topic or no
//!   offset → SYSTEM_ERROR, no consumer online → CONSUMER_NOT_ONLINE and nothing moved, a
//!   consumer too old → SYSTEM_ERROR, else the table pushed and answered;
//! * the OffsetMovedEvent message PullMessageProcessor writes on PULL_OFFSET_MOVED;
//! * the record CONSUMER_SEND_MSG_BACK stores in %DLQ% and, through the schedule topic, in
//!   %RETRY%: Java's properties, hence Java's stored size;
//! * a SEND stored without its `WAIT` whatever the value (SYNC_FLUSH), a delayed one delivered
//!   with it.
//!
//! A [`FakeClient`] is a raw connection that also reads the requests the broker sends it.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use actormq_core::format::msg_id::offset_msg_id;
use actormq_core::format::properties;
use actormq_core::format::record::{self, Check};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use common::*;

/// A consumer heartbeat for `group`, announcing `MQVersion` ordinal `version`.
async fn heartbeat(c: &mut FakeClient, client_id: &str, group: &str, topic: &str, version: i32) {
    let data = consumer_heartbeat(client_id, group, topic);
    let mut cmd =
        RemotingCommand::new_request(rq::HEART_BEAT).with_body(serde_json::to_vec(&data).unwrap());
    cmd.version = version;
    let r = c.request(cmd).await;
    assert_eq!(r.code, rc::SUCCESS, "heartbeat: {:?}", r.remark);
}

fn reset(topic: &str, group: &str, timestamp: i64) -> RemotingCommand {
    RemotingCommand::new_request(rq::INVOKE_BROKER_TO_RESET_OFFSET)
        .with_ext("topic", topic)
        .with_ext("group", group)
        .with_ext("timestamp", timestamp.to_string())
        .with_ext("isForce", "false")
}

/// Waits (bounded) until consumers can see `n` messages in `topic` queue 0: a SEND is answered
/// before its ConsumeQueue unit is written, and a pull or reset reads the queue.
async fn dispatched(c: &mut FakeClient, topic: &str, n: i64) {
    for _ in 0..1000 {
        let r = c.request(max_offset_request(topic, 0)).await;
        if r.ext("offset").and_then(|o| o.parse::<i64>().ok()) >= Some(n) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{topic} queue 0 never showed {n} messages");
}

/// The one record a pull of `topic` queue 0 from `offset` returns, waiting until there is one.
#[derive(Debug)]
struct Stored {
    topic: String,
    size: usize,
    props: BTreeMap<String, String>,
    props_raw: String,
    body: Vec<u8>,
    store_host: std::net::SocketAddr,
    born_host: std::net::SocketAddr,
}

async fn pull_one(c: &mut FakeClient, topic: &str, offset: i64) -> Stored {
    for _ in 0..200 {
        let r = c
            .request(pull_request("ParityReader", topic, 0, offset))
            .await;
        if r.code == rc::SUCCESS {
            let Ok(Check::Record(v)) = record::check(&r.body, true) else {
                panic!("a record in the pull body of {topic}");
            };
            return Stored {
                topic: v.topic.to_string(),
                size: v.total_size as usize,
                props: properties::parse(&v.properties).into_iter().collect(),
                props_raw: v.properties.to_string(),
                body: v.body.to_vec(),
                store_host: v.store_host,
                born_host: v.born_host,
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing to pull from {topic} at {offset}");
}

/// 4.9.4's CommitLog.calMsgLength for IPv4 hosts: the stored size of a record.
fn java_size(body: usize, topic: &str, props_len: usize) -> usize {
    91 + body + topic.len() + props_len
}

/// `map` as messageProperties2String writes it: one separator between entries, none after.
fn java_props_len(map: &BTreeMap<String, String>) -> usize {
    map.iter()
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum::<usize>()
        - 1
}

#[test]
fn reset_offset_answers_as_broker2client_does() {
    run_bounded("reset_offset_as_4_9_4", || async {
        let (_dir, b) = broker(&[]);
        let mut c = FakeClient::connect(&b.broker_addr).await;
        let topic = unique("TReset");
        let r = c.request(create_topic(&topic, 1)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        for i in 0..3 {
            let r = c.request(send_one_queue(&topic, "", format!("m{i}"))).await;
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        }
        dispatched(&mut c, &topic, 3).await;
        // A group known only by its offsets (as cloneGroupOffset leaves one).
        let group = unique("GReset");
        let r = c.request(commit_offset_request(&group, &topic, 0, 3)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);

        let r = c.request(reset("NoSuchTopic", &group, 0)).await;
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("[reset-offset] reset offset failed, no topic in this broker. topic=NoSuchTopic")
        );
        let r = c.request(reset(&topic, "NoOffsets", 0)).await;
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("THe consumer group <NoOffsets> not exist")
        );
        // Nobody online: CONSUMER_NOT_ONLINE (mqadmin then resets by its old method) and the
        // stored offset stays.
        let r = c.request(reset(&topic, &group, 0)).await;
        assert_eq!(r.code, rc::CONSUMER_NOT_ONLINE, "{:?}", r.remark);
        assert_eq!(
            r.remark,
            Some(format!(
                "Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: 0"
            ))
        );
        let r = c.request(query_offset_request(&group, &topic, 0)).await;
        assert_eq!(r.ext("offset"), Some("3"));

        // A consumer older than V3_0_7_SNAPSHOT cannot take the push.
        let mut old = FakeClient::connect(&b.broker_addr).await;
        heartbeat(&mut old, "old@1", &group, &topic, 5).await;
        let r = c.request(reset(&topic, &group, 0)).await;
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("the client does not support this feature. version=V3_0_0_BETA4")
        );
        drop(old);
        let r = c
            .request(
                RemotingCommand::new_request(rq::UNREGISTER_CLIENT)
                    .with_ext("clientID", "old@1")
                    .with_ext("consumerGroup", &group),
            )
            .await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);

        // Online: the table is pushed and answered.
        let mut consumer = FakeClient::connect(&b.broker_addr).await;
        heartbeat(&mut consumer, "new@1", &group, &topic, 401).await;
        let r = c.request(reset(&topic, &group, 0)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let table = String::from_utf8_lossy(&r.body).into_owned();
        assert!(
            table.contains(&format!("\"queueId\":0,\"topic\":\"{topic}\"}}:0")),
            "{table}"
        );
        let push = consumer
            .next_request(rq::RESET_CONSUMER_CLIENT_OFFSET)
            .await;
        assert_eq!(push.ext("group"), Some(group.as_str()));
        assert_eq!(push.ext("timestamp"), Some("0"));
        assert_eq!(String::from_utf8_lossy(&push.body), table);
        stop_broker(b);
    });
}

#[test]
fn a_pull_past_the_end_stores_an_offset_moved_event() {
    run_bounded("offset_moved_event", || async {
        let (_dir, b) = broker(&[]);
        let mut c = FakeClient::connect(&b.broker_addr).await;
        let topic = unique("TMoved");
        let r = c.request(create_topic(&topic, 1)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let r = c.request(send_one_queue(&topic, "", "only")).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        dispatched(&mut c, &topic, 1).await;
        let r = c.request(pull_request("GMoved", &topic, 0, 7)).await;
        assert_eq!(r.code, rc::PULL_OFFSET_MOVED, "{:?}", r.remark);
        let event = pull_one(&mut c, "OFFSET_MOVED_EVENT", 0).await;
        let body = String::from_utf8(event.body.clone()).unwrap();
        assert_eq!(
            body,
            format!(
                r#"{{"consumerGroup":"GMoved","messageQueue":{{"brokerName":"broker-a","queueId":0,"topic":"{topic}"}},"offsetNew":1,"offsetRequest":7}}"#
            )
        );
        let want: BTreeMap<String, String> =
            [("DELAY", "0"), ("KEYS", "GMoved"), ("TAGS", "GMoved")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(event.props, want);
        assert_eq!(event.born_host, event.store_host);
        assert_eq!(
            event.size,
            java_size(body.len(), "OFFSET_MOVED_EVENT", java_props_len(&want))
        );
        stop_broker(b);
    });
}

#[test]
fn send_back_stores_java_s_properties_in_dlq_and_retry() {
    run_bounded("send_back_as_4_9_4", || async {
        let (_dir, b) = broker(&[]);
        let mut c = FakeClient::connect(&b.broker_addr).await;
        let topic = unique("TBack");
        let r = c.request(create_topic(&topic, 1)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        // A UNIQ_KEY as a 4.9.4 client on an IPv6 host makes it: 56 hex digits.
        let uniq = "A".repeat(56);
        let props = format!("KEYS\u{1}k1\u{2}UNIQ_KEY\u{1}{uniq}\u{2}WAIT\u{1}true\u{2}TAGS\u{1}T");
        let mut offsets = Vec::new();
        for body in ["dead", "retry"] {
            let r = c.request(send_one_queue(&topic, &props, body)).await;
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            let id = r.ext("msgId").expect("msgId").to_string();
            let (_, phy) = actormq_core::format::msg_id::decode_offset_msg_id(&id).unwrap();
            offsets.push((phy, id));
        }
        let back = |offset: i64, group: &str, level: i32| {
            RemotingCommand::new_request(rq::CONSUMER_SEND_MSG_BACK)
                .with_ext("offset", offset.to_string())
                .with_ext("group", group)
                .with_ext("delayLevel", level.to_string())
                .with_ext("originMsgId", uniq.clone())
                .with_ext("originTopic", topic.clone())
                .with_ext("unitMode", "false")
                .with_ext("maxReconsumeTimes", "16")
        };
        let base = |origin: &str| -> BTreeMap<String, String> {
            [
                ("KEYS", "k1"),
                ("UNIQ_KEY", uniq.as_str()),
                ("TAGS", "T"),
                ("CLUSTER", "DefaultCluster"),
                ("RETRY_TOPIC", topic.as_str()),
                ("WAIT", "false"),
                ("ORIGIN_MESSAGE_ID", origin),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };

        // Level -1: straight to %DLQ%, with DELAY=0 and the stored message's own msgId as its
        // origin (the header's originMsgId is not used).
        let r = c.request(back(offsets[0].0, "GDead", -1)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let dlq = pull_one(&mut c, "%DLQ%GDead", 0).await;
        let mut want = base(&offsets[0].1);
        want.insert("DELAY".into(), "0".into());
        assert_eq!(dlq.props, want, "{:?}", dlq.props_raw);
        assert_eq!(dlq.size, java_size(4, "%DLQ%GDead", java_props_len(&want)));
        assert_eq!(
            offset_msg_id(dlq.store_host, offsets[0].0),
            offsets[0].1,
            "the original's store host"
        );

        // Level 1: through the schedule topic to %RETRY%, with DELAY, REAL_TOPIC and REAL_QID.
        let r = c.request(back(offsets[1].0, "GRetry", 1)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let retry = pull_one(&mut c, "%RETRY%GRetry", 0).await;
        let mut want = base(&offsets[1].1);
        want.insert("DELAY".into(), "1".into());
        want.insert("REAL_TOPIC".into(), "%RETRY%GRetry".into());
        want.insert("REAL_QID".into(), "0".into());
        assert_eq!(retry.topic, "%RETRY%GRetry");
        assert_eq!(retry.props, want, "{:?}", retry.props_raw);
        assert_eq!(
            retry.size,
            java_size(5, "%RETRY%GRetry", java_props_len(&want))
        );
        stop_broker(b);
    });
}

#[test]
fn a_send_is_stored_without_wait_whatever_its_value_unless_delayed() {
    run_bounded("send_without_wait_as_4_9_4", || async {
        // SYNC_FLUSH, where WAIT=false decides how the send is answered: the decision travels
        // beside the stored bytes, so 4.9.4's bytes are stored.
        let (_dir, b) = broker(&[("flushDiskType", "SYNC_FLUSH")]);
        let mut c = FakeClient::connect(&b.broker_addr).await;
        let topic = unique("TWait");
        let r = c.request(create_topic(&topic, 1)).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let map = |entries: &[(&str, &str)]| -> BTreeMap<String, String> {
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        for (i, wait) in ["false", "TRUE"].into_iter().enumerate() {
            let props = format!("WAIT\u{1}{wait}\u{2}TAGS\u{1}T");
            let r = c.request(send_one_queue(&topic, &props, "body")).await;
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            let got = pull_one(&mut c, &topic, i as i64).await;
            let want = map(&[("TAGS", "T"), ("CLUSTER", "DefaultCluster")]);
            assert_eq!(got.props, want, "WAIT={wait}: {:?}", got.props_raw);
            assert_eq!(got.size, java_size(4, &topic, java_props_len(&want)));
        }
        // Delayed: CommitLog re-encodes the map the processor put WAIT back into, and the
        // delivery writes the stored string.
        let props = "WAIT\u{1}false\u{2}DELAY\u{1}1\u{2}TAGS\u{1}D";
        let r = c.request(send_one_queue(&topic, props, "late")).await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let got = pull_one(&mut c, &topic, 2).await;
        let want = map(&[
            ("TAGS", "D"),
            ("CLUSTER", "DefaultCluster"),
            ("WAIT", "false"),
            ("DELAY", "1"),
            ("REAL_TOPIC", &topic),
            ("REAL_QID", "0"),
        ]);
        assert_eq!(got.props, want, "{:?}", got.props_raw);
        assert_eq!(got.size, java_size(4, &topic, java_props_len(&want)));
        stop_broker(b);
    });
}
