//! The name server's QUERY_DATA_VERSION (322), GET_TOPICS_BY_CLUSTER (224),
//! GET_SYSTEM_TOPIC_LIST_FROM_NS (304), GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST
//! (312) and GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313) over real TCP, against Apache RocketMQ
//! 4.9.4's answers.
//!
//! The golden answers were taken once from Apache's name server (the reference's
//! `NamesrvStartup`): the ignored test [`print_reference_answers`] sends the same fixture to the
//! name server at `ACTORMQ_REFERENCE_NAMESRV` and prints what it got. The fixture's names are
//! chosen so that Java's `HashSet` order (by hash bucket) is the sorted order ActorMQ writes.
//!
//! Each test has its own in-process broker (with its embedded name server) or bare name server on
//! 127.0.0.1 port 0, a raw [`FakeClient`] connection that stays open (a name server drops a
//! broker whose registering connection closes), and no sleeps.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::{
    broker, consumer_heartbeat, run_bounded, start_namesrv_in, stop_broker, FakeClient,
};
use actormq_core::format::record::body_crc;
use actormq_core::protocol::body::{parse_java_json, DataVersion, TopicList};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{QueryDataVersionRequestHeader, RegisterBrokerRequestHeader};
use serde_json::json;

/// The fixture's DataVersion timestamp (any fixed value).
const TIMESTAMP: i64 = 1_700_000_000_000;

/// (broker name, address, cluster, topics with their `topicSysFlag`, DataVersion counter).
type Fixture = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, i32)],
    i64,
);

/// Two brokers in two clusters; topicA..topicD carry the four combinations of the unit (1) and
/// unit-sub (2) flags.
const FIXTURE: [Fixture; 2] = [
    (
        "broker-a",
        "127.0.0.1:10911",
        "ClusterA",
        &[("topicA", 0), ("topicB", 1), ("topicC", 2), ("topicD", 3)],
        3,
    ),
    (
        "broker-l",
        "127.0.0.1:10921",
        "ClusterB",
        &[("topicG", 0)],
        7,
    ),
];

/// A REGISTER_BROKER request as a 4.9.4 master sends it (uncompressed, with its body CRC).
fn register_request(f: &Fixture) -> RemotingCommand {
    let (name, addr, cluster, topics, counter) = *f;
    let table: serde_json::Map<String, serde_json::Value> = topics
        .iter()
        .map(|(t, flag)| {
            let config = json!({"order": false, "perm": 6, "readQueueNums": 4,
                "topicFilterType": "SINGLE_TAG", "topicName": t, "topicSysFlag": flag,
                "writeQueueNums": 4});
            ((*t).to_string(), config)
        })
        .collect();
    let body = serde_json::to_vec(&json!({
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": counter, "timestamp": TIMESTAMP},
            "topicConfigTable": table,
        },
    }))
    .unwrap();
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: cluster.into(),
        ha_server_addr: "127.0.0.1:10912".into(),
        broker_id: 0,
        compressed: false,
        body_crc32: body_crc(&body) as i32,
        ..Default::default()
    };
    RemotingCommand::new_request(rq::REGISTER_BROKER)
        .with_ext_fields(header.to_ext_fields())
        .with_body(body)
}

async fn register_fixture(c: &mut FakeClient) {
    for f in &FIXTURE {
        let resp = c.request(register_request(f)).await;
        assert_eq!(
            resp.code,
            rc::SUCCESS,
            "REGISTER_BROKER {}: {:?}",
            f.0,
            resp.remark
        );
    }
}

fn query_data_version(addr: &str, body: &[u8]) -> RemotingCommand {
    let header = QueryDataVersionRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: addr.into(),
        cluster_name: "ClusterA".into(),
        broker_id: 0,
    };
    RemotingCommand::new_request(rq::QUERY_DATA_VERSION)
        .with_ext_fields(header.to_ext_fields())
        .with_body(body.to_vec())
}

fn version_body(counter: i64) -> Vec<u8> {
    format!(r#"{{"counter":{counter},"timestamp":{TIMESTAMP}}}"#).into_bytes()
}

/// The golden requests, by label.
fn golden_requests() -> Vec<(&'static str, RemotingCommand)> {
    let list = RemotingCommand::new_request;
    vec![
        (
            "224 ClusterA",
            list(rq::GET_TOPICS_BY_CLUSTER).with_ext("cluster", "ClusterA"),
        ),
        (
            "224 ClusterB",
            list(rq::GET_TOPICS_BY_CLUSTER).with_ext("cluster", "ClusterB"),
        ),
        (
            "224 unknown",
            list(rq::GET_TOPICS_BY_CLUSTER).with_ext("cluster", "NoSuchCluster"),
        ),
        ("304", list(rq::GET_SYSTEM_TOPIC_LIST_FROM_NS)),
        ("311", list(rq::GET_UNIT_TOPIC_LIST)),
        ("312", list(rq::GET_HAS_UNIT_SUB_TOPIC_LIST)),
        ("313", list(rq::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)),
        (
            "322 same",
            query_data_version("127.0.0.1:10911", &version_body(3)),
        ),
        (
            "322 newer",
            query_data_version("127.0.0.1:10911", &version_body(4)),
        ),
        (
            "322 unknown",
            query_data_version("127.0.0.1:1", &version_body(3)),
        ),
        ("322 null", query_data_version("127.0.0.1:10921", b"null")),
        // Without any extFields 4.9.4 checks no header field: a null cluster, a null address.
        ("224 no extFields", list(rq::GET_TOPICS_BY_CLUSTER)),
        (
            "322 no extFields",
            list(rq::QUERY_DATA_VERSION).with_body(version_body(3)),
        ),
    ]
}

/// A response as compared: code, extFields (sorted), body text.
fn answer(resp: &RemotingCommand) -> String {
    let ext: BTreeMap<&str, &str> = resp.ext_fields.iter().collect();
    format!(
        "{} {:?} {}",
        resp.code,
        ext,
        String::from_utf8_lossy(&resp.body)
    )
}

/// What Apache RocketMQ 4.9.4's name server answered to [`golden_requests`] after
/// [`register_fixture`] (taken with [`print_reference_answers`]).
const GOLDEN: [(&str, &str); 13] = [
    (
        "224 ClusterA",
        r#"0 {} {"topicList":["topicA","topicB","topicC","topicD"]}"#,
    ),
    ("224 ClusterB", r#"0 {} {"topicList":["topicG"]}"#),
    ("224 unknown", r#"0 {} {"topicList":[]}"#),
    (
        "304",
        r#"0 {} {"brokerAddr":"127.0.0.1:10921","topicList":["ClusterA","ClusterB","broker-a","broker-l"]}"#,
    ),
    ("311", r#"0 {} {"topicList":["topicB","topicD"]}"#),
    ("312", r#"0 {} {"topicList":["topicC","topicD"]}"#),
    ("313", r#"0 {} {"topicList":["topicC"]}"#),
    (
        "322 same",
        r#"0 {"changed": "false"} {"counter":3,"timestamp":1700000000000}"#,
    ),
    (
        "322 newer",
        r#"0 {"changed": "true"} {"counter":3,"timestamp":1700000000000}"#,
    ),
    ("322 unknown", r#"0 {"changed": "true"} "#),
    (
        "322 null",
        r#"0 {"changed": "true"} {"counter":7,"timestamp":1700000000000}"#,
    ),
    ("224 no extFields", r#"0 {} {"topicList":[]}"#),
    ("322 no extFields", r#"0 {"changed": "true"} "#),
];

/// Fails the test if `f` has not finished within [`crate::common::TEST_LIMIT`] (a guard against a
/// hang).
async fn bounded(f: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(crate::common::TEST_LIMIT, f)
        .await
        .expect("the test finished within its limit");
}

#[actix::test]
async fn topic_lists_and_data_version_answer_as_apache_4_9_4() {
    bounded(async {
        let home = tempfile::tempdir().unwrap();
        let ns = start_namesrv_in(home.path(), |_| {}).await;
        let mut c = FakeClient::connect(&ns.addr()).await;
        register_fixture(&mut c).await;
        for ((label, req), (golden_label, golden)) in golden_requests().into_iter().zip(GOLDEN) {
            assert_eq!(label, golden_label);
            let resp = c.request(req).await;
            assert_eq!(answer(&resp), golden, "{label}");
        }
    })
    .await;
}

/// An unchanged QUERY_DATA_VERSION is a heartbeat: the broker outlives its expiry while it
/// keeps asking, and is dropped once it stops (4.9.4 refreshes `lastUpdateTimestamp` the same
/// way; only the unchanged answer refreshes it).
#[actix::test]
async fn an_unchanged_data_version_query_keeps_the_broker_alive() {
    bounded(async {
        let home = tempfile::tempdir().unwrap();
        let expiry = Duration::from_millis(1_000);
        let ns = start_namesrv_in(home.path(), |o| {
            o.scan_interval = Duration::from_millis(50);
            o.expiry = expiry;
        })
        .await;
        let mut c = FakeClient::connect(&ns.addr()).await;
        register_fixture(&mut c).await;
        // broker-l never asks: it expires. Bounded: expiry, a scan, and a generous margin.
        let start = Instant::now();
        while ns.route("topicG").await.is_some() {
            assert!(start.elapsed() < expiry * 20, "broker-l never expired");
            let resp = c
                .request(query_data_version("127.0.0.1:10911", &version_body(3)))
                .await;
            assert_eq!(resp.ext_fields.get("changed"), Some("false"));
            tokio::time::sleep(expiry / 10).await;
        }
        // broker-a kept asking "unchanged" all along, each answer a heartbeat: still routed.
        assert!(start.elapsed() > expiry);
        assert!(ns.route("topicA").await.is_some());
    })
    .await;
}

/// Requests 4.9.4 refuses with SYSTEM_ERROR, each with a word its remark must hold.
fn bad_requests() -> Vec<(RemotingCommand, &'static str)> {
    vec![
        (
            RemotingCommand::new_request(rq::GET_TOPICS_BY_CLUSTER).with_ext("topic", "x"),
            "cluster",
        ),
        (
            RemotingCommand::new_request(rq::QUERY_DATA_VERSION)
                .with_ext("brokerAddr", "127.0.0.1:10911")
                .with_body(version_body(1)),
            "brokerName",
        ),
        (query_data_version("127.0.0.1:10911", b""), "DataVersion"),
        (
            query_data_version("127.0.0.1:10911", b"{\"counter\":"),
            "DataVersion",
        ),
        (
            query_data_version("127.0.0.1:10911", b"[1,2]"),
            "DataVersion",
        ),
    ]
}

#[actix::test]
async fn bad_requests_get_system_error_with_a_remark() {
    bounded(async {
        let home = tempfile::tempdir().unwrap();
        let ns = start_namesrv_in(home.path(), |_| {}).await;
        let mut c = FakeClient::connect(&ns.addr()).await;
        let cases = bad_requests();
        for (i, (req, names)) in cases.into_iter().enumerate() {
            let code = (i, req.code);
            let resp = c.request(req).await;
            assert_eq!(resp.code, rc::SYSTEM_ERROR, "{code:?}: {:?}", resp.remark);
            let remark = resp.remark.unwrap_or_default();
            assert!(remark.contains(names), "{code:?}: {remark}");
        }
        // The connection is still served.
        let resp = c
            .request(RemotingCommand::new_request(rq::GET_UNIT_TOPIC_LIST))
            .await;
        assert_eq!(answer(&resp), r#"0 {} {"topicList":[]}"#);
    })
    .await;
}

/// A real broker's own registration, seen through the new codes on its embedded name server.
#[test]
fn a_running_broker_is_listed_by_cluster_and_system_list() {
    run_bounded("a_running_broker_is_listed", || async {
        let (_dir, b) = broker(&[]);
        let mut c = FakeClient::connect(&b.namesrv_addr).await;
        // The broker registers in the background: wait (bounded) until it has.
        let start = Instant::now();
        let system_list = || RemotingCommand::new_request(rq::GET_SYSTEM_TOPIC_LIST_FROM_NS);
        while c.request(system_list()).await.body.len() <= r#"{"topicList":[]}"#.len() {
            assert!(
                start.elapsed() < crate::common::TEST_LIMIT / 2,
                "the broker never registered"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let cluster_list = |cluster: &str| {
            RemotingCommand::new_request(rq::GET_TOPICS_BY_CLUSTER).with_ext("cluster", cluster)
        };
        let resp = c.request(cluster_list("DefaultCluster")).await;
        let list: TopicList = parse_java_json(&resp.body).unwrap();
        assert!(list.topic_list.iter().any(|t| t == "TBW102"), "{list:?}");

        let resp = c.request(system_list()).await;
        let list: TopicList = parse_java_json(&resp.body).unwrap();
        assert_eq!(list.broker_addr.as_deref(), Some(b.broker_addr.as_str()));
        assert!(
            list.topic_list.iter().any(|t| t == "DefaultCluster"),
            "{list:?}"
        );

        // The broker's registered DataVersion comes back; asking with it is "unchanged".
        let resp = c.request(query_data_version(&b.broker_addr, b"null")).await;
        assert_eq!(resp.ext_fields.get("changed"), Some("true"));
        let held: DataVersion = parse_java_json(&resp.body).unwrap();
        let again = serde_json::to_vec(&held).unwrap();
        let resp = c.request(query_data_version(&b.broker_addr, &again)).await;
        assert_eq!(resp.ext_fields.get("changed"), Some("false"));
        drop(c);
        stop_broker(b);
    });
}

/// Prints Apache's answers to the golden requests: start the reference name server, then
/// `ACTORMQ_REFERENCE_NAMESRV=127.0.0.1:<port> cargo test --test namesrv_codes -- --ignored
/// --nocapture`.
#[test]
#[ignore = "a tool, not a test: needs an Apache name server at ACTORMQ_REFERENCE_NAMESRV"]
fn print_reference_answers() {
    run_bounded("print_reference_answers", || async {
        let addr = std::env::var("ACTORMQ_REFERENCE_NAMESRV")
            .expect("ACTORMQ_REFERENCE_NAMESRV=host:port of an Apache name server");
        let mut c = FakeClient::connect(&addr).await;
        register_fixture(&mut c).await;
        for (label, req) in golden_requests() {
            let resp = c.request(req).await;
            println!("{label}\t{}\t{:?}", answer(&resp), resp.remark);
        }
        for (req, _) in bad_requests() {
            let resp = c.request(req).await;
            println!("bad\t{}\t{:?}", answer(&resp), resp.remark);
        }
    });
}

/// `actormq admin consumerStatus -g -i` reads the consumer's own report through the broker
/// (GET_CONSUMER_RUNNING_INFO forwarded to the client) and prints Java's `formatString`.
#[test]
fn admin_consumer_status_prints_the_consumer_s_report() {
    run_bounded("admin_consumer_status", || async {
        use actormq::tools::admin::client::AdminClient;
        use actormq::tools::admin::status::consumer_status;
        let (_dir, b) = broker(&[]);
        let mut consumer = FakeClient::connect(&b.broker_addr).await;
        consumer
            .heartbeat(&consumer_heartbeat("fake@1", "StatusG", "StatusTopic"))
            .await;
        let admin = AdminClient::new(&b.namesrv_addr, Duration::from_secs(5));
        // The group's %RETRY% topic reaches the name server in the background.
        let start = Instant::now();
        while admin.route("%RETRY%StatusG").await.is_err() {
            assert!(
                start.elapsed() < crate::common::TEST_LIMIT / 2,
                "no %RETRY% route"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let body = br#"{"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"StatusTopic"}:{"commitOffset":5}},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{"StatusTopic":{"pullTPS":1.5}},"subscriptionSet":[{"subString":"*","topic":"StatusTopic"}]}"#;
        let asking = consumer_status(
            &admin,
            "StatusG",
            Some("fake@1"),
            Some(&b.broker_addr),
            false,
            true,
        );
        let answering = async {
            let fwd = consumer.next_request(rq::GET_CONSUMER_RUNNING_INFO).await;
            let answer = RemotingCommand::response_to(&fwd, rc::SUCCESS, None);
            consumer.write(&answer.with_body(&body[..])).await;
        };
        let (out, ()) = tokio::join!(asking, answering);
        let out = out.expect("consumerStatus");
        let report = out["report"].as_str().unwrap();
        let offsets = format!(
            "#Consumer Offset#\n{:<64}  {:<32}  {:<4}  {:<20}\n{:<32}  {:<32}  {:<4}  {:<20}\n",
            "#Topic", "#Broker Name", "#QID", "#Consumer Offset", "StatusTopic", "broker-a", 0, 5
        );
        assert!(report.contains(&offsets), "{report}");
        assert!(report.contains("001 Topic: StatusTopic"), "{report}");
        assert!(
            report.contains(&format!("{:<32}  {:>14.2}", "StatusTopic", 0.0)),
            "{report}"
        );
        stop_broker(b);
    });
}
