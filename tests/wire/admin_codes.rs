//! The request codes RocketMQ 4.9.4 answers that ActorMQ used to refuse (issue #32), end to end
//! over the real wire against a broker with its embedded name server on ephemeral ports:
//! GET/UPDATE_NAMESRV_CONFIG (319/318), DELETE_SUBSCRIPTIONGROUP (207), QUERY_CONSUME_QUEUE
//! (321), DELETE_EXPIRED_COMMITLOG (329; 27 refused as 4.9.4 does), CLEAN_EXPIRED_CONSUMEQUEUE
//! (306), CLEAN_UNUSED_TOPIC (316), GET_CONSUMER_RUNNING_INFO (307, forwarded to a consumer
//! connection) and SEND_REPLY_MESSAGE_V2 (325, pushed to the requester as 326); and those
//! mqadmin's `producer` and `export*` commands need: GET_ALL_PRODUCER_INFO (328),
//! GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) and the GET_BROKER_CONFIG keys `exportConfigs` reads;
//! INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, each consumer asked 221) with golden answers
//! taken from Apache 4.9.4's broker for the same clients and answers; and mqadmin's
//! `sendMsgStatus` and `checkMsgSendRT`, run in process.
//!
//! The consumer and the requester are [`FakeClient`]s written here: a raw remoting connection
//! that sends a heartbeat and then answers (or not) the requests the broker sends it. Nothing
//! waits on a clock: each step waits for the frame it needs (a generous limit only guards
//! against a hang).

use std::time::Duration;

use crate::common::*;
use actormq::remoting::client::RemotingClient;
use actormq_core::format::properties;
use actormq_core::protocol::body::{HeartbeatData, ProducerData};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{SendHeaderNames, SendMessageRequestHeader};
use serde_json::Value;

/// Guard against a hang, not a timing.
const LIMIT: Duration = Duration::from_secs(30);

async fn invoke(c: &RemotingClient, cmd: RemotingCommand) -> RemotingCommand {
    c.invoke(cmd, LIMIT).await.expect("a response")
}

fn send_header(topic: &str, queue_id: i32, properties: &str) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        born_timestamp: 1,
        properties: properties.into(),
        ..Default::default()
    }
}

fn body_json(r: &RemotingCommand) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| {
        panic!(
            "body is not JSON ({e}): {}",
            String::from_utf8_lossy(&r.body)
        )
    })
}

#[test]
fn namesrv_config_is_listed_and_updated() {
    run_bounded("namesrv_config_is_listed_and_updated", || async {
        let (_dir, b) = broker(&[]);
        let ns = RemotingClient::connect(&b.namesrv_addr).await.unwrap();
        let port = b.namesrv_addr.rsplit(':').next().unwrap().to_string();

        let r = invoke(&ns, RemotingCommand::new_request(rq::GET_NAMESRV_CONFIG)).await;
        assert_eq!(r.code, rc::SUCCESS);
        let text = String::from_utf8(r.body.to_vec()).unwrap();
        assert!(text.contains(&format!("listenPort={port}\n")), "{text}");
        assert!(text.contains("orderMessageEnable=false\n"), "{text}");

        // As RocketMQ: known keys change, unknown keys are ignored, the answer is SUCCESS.
        let update = RemotingCommand::new_request(rq::UPDATE_NAMESRV_CONFIG)
            .with_body(&b"orderMessageEnable=true\nnoSuchKey=1\n"[..]);
        let r = invoke(&ns, update).await;
        assert_eq!((r.code, r.remark.as_deref()), (rc::SUCCESS, None));
        let r = invoke(&ns, RemotingCommand::new_request(rq::GET_NAMESRV_CONFIG)).await;
        let text = String::from_utf8(r.body.to_vec()).unwrap();
        assert!(text.contains("orderMessageEnable=true\n"), "{text}");
        assert!(!text.contains("noSuchKey"), "{text}");
        stop_broker(b);
    });
}

#[test]
fn store_admin_codes_answer_as_rocketmq() {
    run_bounded("store_admin_codes_answer_as_rocketmq", || async {
        let (_dir, b) = broker(&[]);
        let c = RemotingClient::connect(&b.broker_addr).await.unwrap();
        let topic = "CodesTopic";
        let create = create_topic(topic, 2);
        assert_eq!(invoke(&c, create).await.code, rc::SUCCESS);
        // Answered only once the name server has the topic (as 4.9.4's updateAndCreateTopic
        // after registerIncrementBrokerData): a route asked for right away finds it.
        let ns = RemotingClient::connect(&b.namesrv_addr).await.unwrap();
        assert_eq!(
            invoke(&ns, route_request(topic)).await.code,
            rc::SUCCESS,
            "route right after create"
        );
        let mut sizes = Vec::new();
        for i in 0..3 {
            let send = RemotingCommand::new_request(rq::SEND_MESSAGE)
                .with_ext_fields(send_header(topic, 0, "").to_ext_fields(SendHeaderNames::V1))
                .with_body(format!("hello{i}").into_bytes());
            let r = invoke(&c, send).await;
            assert_eq!(r.code, rc::SUCCESS, "send: {:?}", r.remark);
            sizes.push(r.ext("queueOffset").unwrap().to_string());
        }
        assert_eq!(sizes, ["0", "1", "2"]);

        // QUERY_CONSUME_QUEUE: the range and the units asked for.
        let q = |index: i64, count: i32| {
            RemotingCommand::new_request(rq::QUERY_CONSUME_QUEUE)
                .with_ext("topic", topic)
                .with_ext("queueId", "0")
                .with_ext("index", index.to_string())
                .with_ext("count", count.to_string())
        };
        // Sends are answered once stored; the ConsumeQueue follows (dispatch): wait for it.
        let mut r = invoke(&c, q(0, 10)).await;
        let deadline = tokio::time::Instant::now() + LIMIT;
        // Until the first unit is readable the answer has no body ("Index 0 ... is not exist!").
        while serde_json::from_slice::<Value>(&r.body).map_or(true, |v| v["maxQueueIndex"] != 3) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "not dispatched: {r:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
            r = invoke(&c, q(0, 10)).await;
        }
        assert_eq!(r.code, rc::SUCCESS);
        assert_eq!(r.remark.as_deref(), Some("not set any response code"));
        let body = body_json(&r);
        assert_eq!(body["maxQueueIndex"], 3);
        assert_eq!(body["minQueueIndex"], 0);
        let units = body["queueData"].as_array().unwrap();
        assert_eq!(units.len(), 3);
        assert_eq!(units[0]["physicOffset"], 0);
        let size = units[0]["physicSize"].as_i64().unwrap();
        assert_eq!(units[1]["physicOffset"].as_i64().unwrap(), size);
        assert_eq!(units[0]["eval"], false);
        assert!(units[0].get("msg").is_none(), "nulls are left out: {body}");
        assert!(body.get("subscriptionData").is_none());
        // Fields in fastjson's order.
        let text = String::from_utf8(r.body.to_vec()).unwrap();
        assert!(
            text.starts_with(r#"{"maxQueueIndex":3,"minQueueIndex":0,"queueData":[{"eval":false,"physicOffset":0,"physicSize":"#),
            "{text}"
        );
        let r = invoke(&c, q(1, 1).with_ext("consumerGroup", "NoOne")).await;
        let body = body_json(&r);
        assert_eq!(body["queueData"].as_array().unwrap().len(), 1);
        assert_eq!(body["filterData"], "NoOne@CodesTopic is not online!");
        let r = invoke(&c, q(99, 1)).await;
        assert_eq!(r.code, rc::SUCCESS);
        assert_eq!(
            r.remark.as_deref(),
            Some("Index 99 of 0@CodesTopic is not exist!")
        );
        assert!(r.body.is_empty());
        let r = invoke(
            &c,
            RemotingCommand::new_request(rq::QUERY_CONSUME_QUEUE)
                .with_ext("topic", "NoSuchTopic")
                .with_ext("queueId", "0")
                .with_ext("index", "0")
                .with_ext("count", "1"),
        )
        .await;
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(r.remark.as_deref(), Some("0@NoSuchTopic is not exist!"));

        // DELETE_SUBSCRIPTIONGROUP with removeOffset: the group and its offsets go.
        let group = "CodesGroup";
        let cfg = format!(
            r#"{{"groupName":"{group}","consumeEnable":true,"retryQueueNums":1,"retryMaxTimes":16}}"#
        );
        let r = invoke(
            &c,
            RemotingCommand::new_request(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
                .with_body(cfg.into_bytes()),
        )
        .await;
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let commit = commit_offset_request(group, topic, 0, 2);
        assert_eq!(invoke(&c, commit).await.code, rc::SUCCESS);
        let query_offset = || query_offset_request(group, topic, 0);
        let r = invoke(&c, query_offset()).await;
        assert_eq!((r.code, r.ext("offset")), (rc::SUCCESS, Some("2")));
        let r = invoke(
            &c,
            RemotingCommand::new_request(rq::DELETE_SUBSCRIPTIONGROUP)
                .with_ext("groupName", group)
                .with_ext("removeOffset", "true"),
        )
        .await;
        assert_eq!((r.code, r.remark.as_deref()), (rc::SUCCESS, None));
        let groups = invoke(
            &c,
            RemotingCommand::new_request(rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
        )
        .await;
        assert!(
            !String::from_utf8_lossy(&groups.body).contains(group),
            "the group is still listed"
        );
        let r = invoke(&c, query_offset()).await;
        assert_ne!(r.ext("offset"), Some("2"), "the offset survived: {r:?}");
        // Deleting a group that does not exist is SUCCESS too; a missing name is an error.
        let r = invoke(
            &c,
            RemotingCommand::new_request(rq::DELETE_SUBSCRIPTIONGROUP)
                .with_ext("groupName", "NoSuchGroup"),
        )
        .await;
        assert_eq!(r.code, rc::SUCCESS);
        let r = invoke(
            &c,
            RemotingCommand::new_request(rq::DELETE_SUBSCRIPTIONGROUP),
        )
        .await;
        assert_eq!(r.code, rc::SYSTEM_ERROR);

        // 329 is mqadmin deleteExpiredCommitLog; 4.9.4 refuses 27.
        let r = invoke(
            &c,
            RemotingCommand::new_request(rq::DELETE_EXPIRED_COMMITLOG),
        )
        .await;
        assert_eq!((r.code, r.remark.as_deref()), (rc::SUCCESS, None));
        let r = invoke(&c, RemotingCommand::new_request(rq::TRIGGER_DELETE_FILES)).await;
        assert_eq!(r.code, rc::REQUEST_CODE_NOT_SUPPORTED);
        assert_eq!(r.remark.as_deref(), Some(" request type 27 not supported"));

        // Nothing is expired or unused here: both succeed and the topic's queue stays whole.
        for code in [rq::CLEAN_EXPIRED_CONSUMEQUEUE, rq::CLEAN_UNUSED_TOPIC] {
            let r = invoke(&c, RemotingCommand::new_request(code)).await;
            assert_eq!(
                (r.code, r.remark.as_deref()),
                (rc::SUCCESS, None),
                "code {code}"
            );
        }
        let body = body_json(&invoke(&c, q(0, 10)).await);
        assert_eq!(body["queueData"].as_array().unwrap().len(), 3);
        stop_broker(b);
    });
}

#[test]
fn consumer_running_info_is_forwarded_to_the_consumer() {
    run_bounded(
        "consumer_running_info_is_forwarded_to_the_consumer",
        || async {
            let (_dir, b) = broker(&[]);
            let admin = RemotingClient::connect(&b.broker_addr).await.unwrap();
            let running_info = |client: &str| {
                RemotingCommand::new_request(rq::GET_CONSUMER_RUNNING_INFO)
                    .with_ext("consumerGroup", "RunG")
                    .with_ext("clientId", client)
                    .with_ext("jstackEnable", "false")
            };
            let r = invoke(&admin, running_info("fake@1")).await;
            assert_eq!(r.code, rc::SYSTEM_ERROR);
            assert_eq!(
                r.remark.as_deref(),
                Some("The Consumer <RunG> <fake@1> not online")
            );

            let mut consumer = FakeClient::connect(&b.broker_addr).await;
            consumer
                .heartbeat(&consumer_heartbeat("fake@1", "RunG", "RunTopic"))
                .await;
            // The admin's request goes out; the consumer answers it with its own body.
            let pending = tokio::spawn({
                let admin = RemotingClient::connect(&b.broker_addr).await.unwrap();
                let cmd = running_info("fake@1");
                async move { admin.invoke(cmd, LIMIT).await }
            });
            let fwd = consumer.next_request(rq::GET_CONSUMER_RUNNING_INFO).await;
            assert_eq!(fwd.ext("consumerGroup"), Some("RunG"));
            assert_eq!(fwd.ext("clientId"), Some("fake@1"));
            assert_eq!(fwd.ext("jstackEnable"), Some("false"));
            let answer = RemotingCommand::response_to(&fwd, rc::SUCCESS, None)
                .with_body(&br#"{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}"#[..]);
            consumer.write(&answer).await;
            let r = pending.await.unwrap().expect("the admin's response");
            assert_eq!(r.code, rc::SUCCESS);
            assert_eq!(
                body_json(&r)["properties"]["PROP_CONSUME_TYPE"],
                "CONSUME_PASSIVELY"
            );

            // A consumer that goes away before answering: the admin is told, not left waiting.
            let pending = tokio::spawn({
                let admin = RemotingClient::connect(&b.broker_addr).await.unwrap();
                let cmd = running_info("fake@1");
                async move { admin.invoke(cmd, LIMIT).await }
            });
            let _ = consumer.next_request(rq::GET_CONSUMER_RUNNING_INFO).await;
            drop(consumer);
            let r = pending.await.unwrap().expect("the admin's response");
            assert_eq!(r.code, rc::SYSTEM_ERROR, "{r:?}");
            let remark = r.remark.unwrap_or_default();
            assert!(
                remark.starts_with("invoke consumer <RunG> <fake@1> Exception")
                    || remark == "The Consumer <RunG> <fake@1> not online",
                "{remark}"
            );
            stop_broker(b);
        },
    );
}

#[test]
fn reply_message_is_pushed_to_the_requester_and_stored() {
    run_bounded(
        "reply_message_is_pushed_to_the_requester_and_stored",
        || async {
            let (_dir, b) = broker(&[]);
            let mut requester = FakeClient::connect(&b.broker_addr).await;
            requester
                .heartbeat(&HeartbeatData {
                    client_id: "requester@1".into(),
                    producer_data_set: vec![ProducerData {
                        group_name: "RequestG".into(),
                    }],
                    ..Default::default()
                })
                .await;
            let replier = RemotingClient::connect(&b.broker_addr).await.unwrap();
            let topic = "DefaultCluster_REPLY_TOPIC";
            let props = "CORRELATION_ID\u{1}c-1\u{2}REPLY_TO_CLIENT\u{1}requester@1\u{2}";
            let reply_cmd = |props: &str| {
                RemotingCommand::new_request(rq::SEND_REPLY_MESSAGE_V2)
                    .with_ext_fields(
                        send_header(topic, 0, props).to_ext_fields(SendHeaderNames::V2),
                    )
                    .with_body(&b"the answer"[..])
            };
            let pending = tokio::spawn({
                let cmd = reply_cmd(props);
                async move { replier.invoke(cmd, LIMIT).await }
            });
            let push = requester
                .next_request(rq::PUSH_REPLY_MESSAGE_TO_CLIENT)
                .await;
            assert_eq!(&push.body[..], b"the answer");
            assert_eq!(push.ext("topic"), Some(topic));
            assert_eq!(push.ext("producerGroup"), Some("PG"));
            assert_eq!(push.ext("queueId"), Some("0"));
            let pushed_props = push.ext("properties").unwrap();
            // Written as 4.9.4's messageProperties2String writes the map (HashMap order, no
            // separator after the last entry), so read as a map.
            assert_eq!(
                properties::find(pushed_props, "CORRELATION_ID"),
                Some("c-1"),
                "{pushed_props:?}"
            );
            assert!(
                pushed_props.contains("PUSH_REPLY_TIME\u{1}"),
                "{pushed_props:?}"
            );
            assert!(push.ext("bornHost").unwrap().starts_with("127.0.0.1:"));
            assert_eq!(push.ext("storeHost"), Some(b.broker_addr.as_str()));
            requester
                .write(&RemotingCommand::response_to(&push, rc::SUCCESS, None))
                .await;
            let r = pending.await.unwrap().expect("the replier's response");
            assert_eq!((r.code, r.remark.as_deref()), (rc::SUCCESS, None));
            assert_eq!(
                r.ext("queueOffset"),
                Some("0"),
                "stored as the topic's first: {r:?}"
            );
            assert_ne!(r.ext("msgId"), Some("0"), "a stored reply has its msgId");

            // No requester online under that id: RocketMQ's remark; the reply is still stored.
            let replier = RemotingClient::connect(&b.broker_addr).await.unwrap();
            let r = invoke(
                &replier,
                reply_cmd("CORRELATION_ID\u{1}c-2\u{2}REPLY_TO_CLIENT\u{1}nobody@9\u{2}"),
            )
            .await;
            assert_eq!(r.code, rc::SYSTEM_ERROR);
            assert_eq!(
                r.remark.as_deref(),
                Some("push reply message fail, channel of <nobody@9> not found.")
            );
            assert_eq!(r.ext("queueOffset"), Some("1"));
            let r = invoke(&replier, reply_cmd("CORRELATION_ID\u{1}c-3\u{2}")).await;
            assert_eq!(
                (r.code, r.remark.as_deref()),
                (
                    rc::SYSTEM_ERROR,
                    Some("reply message properties[REPLY_TO_CLIENT] is null")
                )
            );
            stop_broker(b);
        },
    );
}

/// `mqadmin producer -b`, `exportMetadata`/`exportMetrics` and `exportConfigs` (4.9.4): every
/// producer connection by group (GET_ALL_PRODUCER_INFO 328, the client's inner producer group
/// too), the broker's system topic set (GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305), and every key
/// ExportConfigsCommand.needBrokerProprties copies from GET_BROKER_CONFIG.
#[test]
fn producer_table_system_topics_and_export_config_keys() {
    run_bounded(
        "producer_table_system_topics_and_export_config_keys",
        || async {
            let (_dir, b) = broker(&[]);
            let c = RemotingClient::connect(&b.broker_addr).await.unwrap();

            // No producer online: SUCCESS with an empty table, as 4.9.4.
            let r = invoke(&c, RemotingCommand::new_request(rq::GET_ALL_PRODUCER_INFO)).await;
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            assert_eq!(body_json(&r)["data"], serde_json::json!({}));

            let mut p = FakeClient::connect(&b.broker_addr).await;
            p.heartbeat(&HeartbeatData {
                client_id: "producer@1".into(),
                producer_data_set: vec![
                    ProducerData {
                        group_name: "PG".into(),
                    },
                    ProducerData {
                        group_name: "CLIENT_INNER_PRODUCER".into(),
                    },
                ],
                ..Default::default()
            })
            .await;
            let local = p.stream.local_addr().unwrap().to_string();
            let r = invoke(&c, RemotingCommand::new_request(rq::GET_ALL_PRODUCER_INFO)).await;
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            let data = &body_json(&r)["data"];
            for group in ["PG", "CLIENT_INNER_PRODUCER"] {
                let list = data[group]
                    .as_array()
                    .unwrap_or_else(|| panic!("{group}: {data}"));
                assert_eq!(list.len(), 1, "{data}");
                let info = &list[0];
                assert_eq!(info["clientId"], "producer@1");
                assert_eq!(
                    info["remoteIP"],
                    format!("/{local}"),
                    "Netty's address form"
                );
                assert!(info["language"].as_str().is_some_and(|l| !l.is_empty()));
                assert!(info["version"].is_i64(), "{info}");
                assert!(info["lastUpdateTimestamp"].as_i64().unwrap() > 1_600_000_000_000);
            }

            let r = invoke(
                &c,
                RemotingCommand::new_request(rq::GET_SYSTEM_TOPIC_LIST_FROM_BROKER),
            )
            .await;
            assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
            let topics: Vec<String> =
                serde_json::from_value(body_json(&r)["topicList"].clone()).unwrap();
            for t in [
                "TBW102",
                "SCHEDULE_TOPIC_XXXX",
                "RMQ_SYS_TRANS_HALF_TOPIC",
                "OFFSET_MOVED_EVENT",
                "SELF_TEST_TOPIC",
                "DefaultCluster",
                "DefaultCluster_REPLY_TOPIC",
            ] {
                assert!(topics.iter().any(|x| x == t), "{t} missing: {topics:?}");
            }

            let r = invoke(&c, RemotingCommand::new_request(rq::GET_BROKER_CONFIG)).await;
            assert_eq!(r.code, rc::SUCCESS);
            let text = String::from_utf8(r.body.to_vec()).unwrap();
            let keys: Vec<&str> = text
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k))
                .collect();
            for k in [
                "brokerClusterName",
                "brokerId",
                "brokerName",
                "brokerRole",
                "fileReservedTime",
                "filterServerNums",
                "flushDiskType",
                "maxMessageSize",
                "messageDelayLevel",
                "msgTraceTopicName",
                "slaveReadEnable",
                "traceOn",
                "traceTopicEnable",
                "useTLS",
                "autoCreateTopicEnable",
                "autoCreateSubscriptionGroup",
            ] {
                assert_eq!(keys.iter().filter(|x| **x == k).count(), 1, "{k}: {text}");
            }
            stop_broker(b);
        },
    );
}

/// One 221 a fake consumer got: its client id, the request's extFields (sorted), body size.
type Asked = (String, Vec<(String, String)>, usize);

/// A consumer that answers every GET_CONSUMER_STATUS_FROM_CLIENT (221) with `code` and `body`
/// (`None`: no body; `code` < 0: never answers), reporting each 221's extFields and body size.
async fn status_answerer(
    broker: &str,
    id: &str,
    group: &str,
    version: i32,
    answer: (i32, Option<&'static str>),
    seen: tokio::sync::mpsc::UnboundedSender<Asked>,
) -> tokio::task::JoinHandle<()> {
    let mut c = FakeClient::connect(broker).await;
    let hb = serde_json::to_vec(&consumer_heartbeat(id, group, "T1")).unwrap();
    let mut cmd = RemotingCommand::new_request(rq::HEART_BEAT).with_body(hb);
    cmd.version = version;
    assert_eq!(c.request(cmd).await.code, rc::SUCCESS);
    let id = id.to_string();
    tokio::spawn(async move {
        loop {
            let ask = c.next_request(rq::GET_CONSUMER_STATUS_FROM_CLIENT).await;
            let mut ext: Vec<(String, String)> = ask
                .ext_fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            ext.sort();
            let _ = seen.send((id.clone(), ext, ask.body.len()));
            if answer.0 < 0 {
                continue;
            }
            let mut r = RemotingCommand::response_to(&ask, answer.0, None);
            if let Some(body) = answer.1 {
                r = r.with_body(body.as_bytes().to_vec());
            }
            c.write(&r).await;
        }
    })
}

/// Golden bodies and remarks: Apache 4.9.4's broker asked 223 with the same clients, ids and
/// answers (a Java program with NettyRemotingClients acting as the consumers).
const BODY_A: &str = r#"{"consumerTable":{},"messageQueueTable":{{"brokerName":"broker-a","queueId":3,"topic":"T1"}:30,{"brokerName":"broker-a","queueId":0,"topic":"T1"}:0,{"brokerName":"broker-a","queueId":1,"topic":"T1"}:10,{"brokerName":"broker-b","queueId":2,"topic":"T1"}:20,{"brokerName":"broker-a","queueId":2,"topic":"T1"}:-1}}"#;
const BODY_B: &str =
    r#"{"messageQueueTable":{{"brokerName":"broker-a","queueId":7,"topic":"T1"}:70}}"#;
const JAVA_G1_ALL: &str = r#"{"consumerTable":{"10.0.0.2@B":{{"brokerName":"broker-a","queueId":7,"topic":"T1"}:70},"10.0.0.1@A":{{"brokerName":"broker-a","queueId":1,"topic":"T1"}:10,{"brokerName":"broker-b","queueId":2,"topic":"T1"}:20,{"brokerName":"broker-a","queueId":0,"topic":"T1"}:0,{"brokerName":"broker-a","queueId":3,"topic":"T1"}:30,{"brokerName":"broker-a","queueId":2,"topic":"T1"}:-1}},"messageQueueTable":{}}"#;
const JAVA_G1_B: &str = r#"{"consumerTable":{"10.0.0.2@B":{{"brokerName":"broker-a","queueId":7,"topic":"T1"}:70}},"messageQueueTable":{}}"#;
const JAVA_EMPTY: &str = r#"{"consumerTable":{},"messageQueueTable":{}}"#;

fn status_request(group: &str, origin: Option<&str>) -> RemotingCommand {
    let cmd = RemotingCommand::new_request(rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS)
        .with_ext("topic", "T1")
        .with_ext("group", group);
    match origin {
        Some(o) => cmd.with_ext("clientAddr", o),
        None => cmd,
    }
}

/// SUCCESS as 4.9.4 answers it: Java's default remark kept, no extFields, the merged body.
fn assert_status(r: &RemotingCommand, body: &str) {
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.remark.as_deref(), Some("not set any response code"));
    assert!(r.ext_fields.is_empty(), "{:?}", r.ext_fields);
    assert_eq!(String::from_utf8_lossy(&r.body), body);
}

#[test]
fn consumer_status_asks_each_consumer_and_merges_as_java() {
    run_bounded("consumer_status_asks_each_consumer", || async {
        let (_dir, b) = broker(&[]);
        let admin = RemotingClient::connect(&b.broker_addr).await.unwrap();
        let r = invoke(&admin, status_request("G0", None)).await;
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("No Any Consumer online in the consumer group: [G0]")
        );
        let r = invoke(
            &admin,
            RemotingCommand::new_request(rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS),
        )
        .await;
        assert_eq!(
            r.code,
            rc::SYSTEM_ERROR,
            "a request without a header: {r:?}"
        );

        let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let v = 401;
        let mut tasks = vec![
            status_answerer(
                &b.broker_addr,
                "10.0.0.1@A",
                "G1",
                v,
                (0, Some(BODY_A)),
                tx.clone(),
            )
            .await,
            status_answerer(
                &b.broker_addr,
                "10.0.0.2@B",
                "G1",
                v,
                (0, Some(BODY_B)),
                tx.clone(),
            )
            .await,
            status_answerer(&b.broker_addr, "10.0.0.3@C", "G1", v, (0, None), tx.clone()).await,
            status_answerer(
                &b.broker_addr,
                "10.0.0.4@D",
                "G1",
                v,
                (1, Some(BODY_B)),
                tx.clone(),
            )
            .await,
        ];
        assert_status(
            &invoke(&admin, status_request("G1", None)).await,
            JAVA_G1_ALL,
        );
        let mut asked = Vec::new();
        for _ in 0..4 {
            let (id, ext, body) = seen.recv().await.unwrap();
            // What 4.9.4 sends each consumer: topic and group only, no body.
            assert_eq!(
                ext,
                vec![("group".into(), "G1".into()), ("topic".into(), "T1".into())]
            );
            assert_eq!(body, 0);
            asked.push(id);
        }
        asked.sort();
        assert_eq!(
            asked,
            ["10.0.0.1@A", "10.0.0.2@B", "10.0.0.3@C", "10.0.0.4@D"]
        );
        assert_status(
            &invoke(&admin, status_request("G1", Some(""))).await,
            JAVA_G1_ALL,
        );
        for _ in 0..4 {
            seen.recv().await.unwrap();
        }
        assert_status(
            &invoke(&admin, status_request("G1", Some("10.0.0.2@B"))).await,
            JAVA_G1_B,
        );
        assert_eq!(seen.recv().await.unwrap().0, "10.0.0.2@B");
        assert_status(
            &invoke(&admin, status_request("G1", Some("nobody"))).await,
            JAVA_EMPTY,
        );

        // A client older than V3_0_7_SNAPSHOT: Java's refusal, nobody asked.
        tasks.push(
            status_answerer(
                &b.broker_addr,
                "10.0.0.5@E",
                "G2",
                20,
                (0, Some(BODY_B)),
                tx.clone(),
            )
            .await,
        );
        let r = invoke(&admin, status_request("G2", None)).await;
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("the client does not support this feature. version=V3_0_3_SNAPSHOT")
        );
        // An empty table is kept; an unreadable body and a silent client (5 s) are left out.
        let empty = r#"{"messageQueueTable":{}}"#;
        tasks.push(
            status_answerer(
                &b.broker_addr,
                "10.0.0.6@F",
                "G3",
                v,
                (0, Some(empty)),
                tx.clone(),
            )
            .await,
        );
        let r = invoke(&admin, status_request("G3", None)).await;
        assert_status(
            &r,
            r#"{"consumerTable":{"10.0.0.6@F":{}},"messageQueueTable":{}}"#,
        );
        tasks.push(
            status_answerer(
                &b.broker_addr,
                "10.0.0.7@G",
                "G4",
                v,
                (0, Some("not json")),
                tx.clone(),
            )
            .await,
        );
        assert_status(
            &invoke(&admin, status_request("G4", None)).await,
            JAVA_EMPTY,
        );
        tasks.push(status_answerer(&b.broker_addr, "10.0.0.8@H", "G5", v, (-1, None), tx).await);
        let started = std::time::Instant::now();
        assert_status(
            &invoke(&admin, status_request("G5", None)).await,
            JAVA_EMPTY,
        );
        assert!(started.elapsed() >= Duration::from_millis(4_900));
        tasks.iter().for_each(|t| t.abort());
        stop_broker(b);
    });
}

/// mqadmin's `sendMsgStatus` and `checkMsgSendRT`, in process: lines shaped as Apache
/// mqadmin 4.9.4 printed them against its own broker (golden shapes below), the reported
/// `msgId` being the stored message's UNIQ_KEY.
#[test]
fn send_msg_status_and_check_msg_send_rt_print_java_s_lines() {
    run_bounded("send_msg_status_and_check_msg_send_rt", || async {
        use actormq::tools::admin::client::AdminClient;
        use actormq::tools::admin::send::{check_msg_send_rt, send_msg_status};
        let (_dir, b) = broker(&[]);
        let admin = AdminClient::new(&b.namesrv_addr, Duration::from_secs(5));
        let start = std::time::Instant::now();
        while admin.route("broker-a").await.is_err() || admin.route("TBW102").await.is_err() {
            assert!(start.elapsed() < LIMIT, "no route for broker-a / TBW102");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Apache: `rt=15ms, SendResult=SendResult [sendStatus=SEND_OK,
        // msgId=FD00000000000000000000000000000261EF5FFD2B2721457C910001,
        // offsetMsgId=7F000001000051AF00000000000000D1, messageQueue=MessageQueue
        // [topic=broker-a, brokerName=broker-a, queueId=0], queueOffset=1]`, then 2 and 3.
        let line = regex::Regex::new(
            r"^rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=([0-9A-F]{32}|[0-9A-F]{56}), offsetMsgId=([0-9A-F]{32}), messageQueue=MessageQueue \[topic=broker-a, brokerName=broker-a, queueId=0\], queueOffset=(\d+)\]$",
        )
        .unwrap();
        let out = send_msg_status(&admin, "broker-a", 128, 3, true)
            .await
            .unwrap();
        let lines: Vec<&str> = out["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        let client = RemotingClient::connect(&b.broker_addr).await.unwrap();
        for (i, l) in lines.iter().enumerate() {
            let c = line
                .captures(l)
                .unwrap_or_else(|| panic!("not Java's shape: {l}"));
            assert_eq!(c[3].parse::<usize>().unwrap(), i + 1, "{l}");
            let (_, offset) = actormq_core::format::msg_id::decode_offset_msg_id(&c[2]).unwrap();
            let view = RemotingCommand::new_request(rq::VIEW_MESSAGE_BY_ID)
                .with_ext("offset", offset.to_string());
            let stored = invoke(&client, view).await;
            assert_eq!(stored.code, rc::SUCCESS, "{:?}", stored.remark);
            let has = |s: &[u8]| stored.body.windows(s.len()).any(|w| w == s);
            assert!(has(format!("UNIQ_KEY\u{1}{}", &c[1]).as_bytes()), "{l}");
            assert!(has(&"hello jodie".repeat(12).into_bytes()), "{l}");
        }

        // Apache, a topic it did not have (TBW102's route, 4 queues):
        let out = check_msg_send_rt(&admin, "RtTopic", 5, 16, true)
            .await
            .unwrap();
        let lines: Vec<&str> = out["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert_eq!(lines.len(), 7, "{lines:?}");
        assert_eq!(
            lines[0],
            "#Broker Name                      #QID  #Send Result            #RT"
        );
        for (i, l) in lines[1..6].iter().enumerate() {
            let row = format!(
                "broker-a                          {:<4}  true                    ",
                i % 4
            );
            assert!(
                l.starts_with(&row) && l[row.len()..].parse::<u64>().is_ok(),
                "{l}"
            );
        }
        assert!(
            regex::Regex::new(r"^Avg RT: \d+\.\d\d$")
                .unwrap()
                .is_match(lines[6]),
            "{}",
            lines[6]
        );
        let one = check_msg_send_rt(&admin, "RtTopic", 1, 16, true)
            .await
            .unwrap();
        assert_eq!(one["lines"][2], "Avg RT: NaN");
        stop_broker(b);
    });
}

/// A consumer's shutdown commits its offsets oneway and closes at once (4.9.4's
/// RemoteBrokerOffsetStore.persistAll, then unregister and close): what the broker read before
/// the close is carried out, as RocketMQ's processors finish what they took from a channel.
#[test]
fn a_oneway_commit_read_before_the_peer_closed_is_kept() {
    run_bounded(
        "a_oneway_commit_read_before_the_peer_closed_is_kept",
        || async {
            let (_dir, b) = broker(&[]);
            let topic = "OnewayCommitTopic";
            let c = RemotingClient::connect(&b.broker_addr).await.unwrap();
            let create = create_topic(topic, 8);
            assert_eq!(invoke(&c, create).await.code, rc::SUCCESS);
            let commit = |group: &str, queue: i32| {
                commit_offset_request(group, topic, queue, 7).with_oneway()
            };
            // Twenty consumers, each writing eight oneway commits and closing in the same breath.
            for g in 0..20 {
                let mut raw = FakeClient::connect(&b.broker_addr).await;
                for q in 0..8 {
                    raw.write(&commit(&format!("OnewayGroup{g}"), q)).await;
                }
                drop(raw);
            }
            for g in 0..20 {
                for q in 0..8 {
                    let query = || query_offset_request(&format!("OnewayGroup{g}"), topic, q);
                    // Carried out after the close, so asked until it is there (bounded).
                    let r = poll(
                        1000,
                        Duration::from_millis(10),
                        || invoke(&c, query()),
                        |r| r.code == rc::SUCCESS && r.ext("offset") == Some("7"),
                    )
                    .await;
                    assert_eq!(r.ext("offset"), Some("7"), "group {g} queue {q}");
                }
            }
        },
    );
}

/// Without access control (ActorMQ has none yet, issue #37) the ACL administration codes get
/// 4.9.4's failure codes with `aclEnable=false` (209, 210, 211; SYSTEM_ERROR for the reads,
/// which 4.9.4 leaves unanswered) and a remark saying why, never "not supported".
#[test]
fn acl_codes_answer_that_access_control_is_off() {
    run_bounded("acl_codes_answer_that_access_control_is_off", || async {
        let (_dir, b) = broker(&[]);
        let c = RemotingClient::connect(&b.broker_addr).await.unwrap();
        for (code, want) in [
            (
                rq::UPDATE_AND_CREATE_ACL_CONFIG,
                rc::UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            ),
            (rq::DELETE_ACL_CONFIG, rc::DELETE_ACL_CONFIG_FAILED),
            (rq::GET_BROKER_CLUSTER_ACL_INFO, rc::SYSTEM_ERROR),
            (
                rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                rc::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            ),
            (rq::GET_BROKER_CLUSTER_ACL_CONFIG, rc::SYSTEM_ERROR),
        ] {
            let r = invoke(
                &c,
                RemotingCommand::new_request(code).with_ext("accessKey", "k"),
            )
            .await;
            assert_eq!(r.code, want, "code {code}");
            assert_eq!(
                r.remark.as_deref(),
                Some("access control is not enabled on this broker (aclEnable=false)")
            );
        }
    });
}
