//! The name server over real TCP: brokers registering (through the `Registrar` actor or raw
//! REGISTER_BROKER requests), clients reading routes with GET_ROUTEINFO_BY_TOPIC, expiry,
//! unregistration and the error answers (as 4.9.4's `DefaultRequestProcessor` answers, and the
//! rocketmq-client-rust trace).
//!
//! Every test starts its own name server on 127.0.0.1 port 0 in its own actix system. Waits are
//! bounded polls ([`eventually`]); expiry runs with a 200 ms expiry and a 50 ms scan, so no test
//! sleeps for long.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actormq::broker::registrar::{
    BrokerIdentity, GetRegistrations, RegisterNow, Registrar, UnregisterAll,
};
use actormq::metered::start_on;
use actormq::namesrv::{start_namesrv, NamesrvHandle, NamesrvOptions};
use actormq::remoting::client::RemotingClient;
use actormq_core::format::record::body_crc;
use actormq_core::meta::{DataVersion, TopicConfig, TopicTable};
use actormq_core::protocol::body::{
    parse_java_json, ClusterInfo, RegisterBrokerBody, TopicList, TopicRouteData,
};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader};

use crate::common::{self, route_request};

const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound of every wait for something to happen.
const WAIT_LIMIT: Duration = Duration::from_secs(5);
const CLUSTER: &str = "DefaultCluster";

async fn namesrv_with(scan: Duration, expiry: Duration) -> NamesrvHandle {
    // Its `${user.home}`: a directory that is gone (these name servers never write a file; the
    // KV tests below give theirs a real one), so no test reads or writes $HOME/namesrv.
    let home = tempfile::tempdir().unwrap().path().to_path_buf();
    start_in(&home, scan, expiry).await
}

async fn start_in(home: &std::path::Path, scan: Duration, expiry: Duration) -> NamesrvHandle {
    common::start_namesrv_in(home, |o| {
        o.scan_interval = scan;
        o.expiry = expiry;
    })
    .await
}

/// RocketMQ's timings: nothing expires during a test.
async fn namesrv() -> NamesrvHandle {
    namesrv_with(Duration::from_secs(5), Duration::from_secs(120)).await
}

async fn connect(ns: &NamesrvHandle) -> RemotingClient {
    RemotingClient::connect(&ns.addr()).await.unwrap()
}

async fn call(c: &RemotingClient, cmd: RemotingCommand) -> RemotingCommand {
    c.invoke(cmd, RPC_TIMEOUT).await.unwrap()
}

/// Polls `check` until it holds; fails after [`WAIT_LIMIT`] ([`common::eventually`]).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    common::eventually(what, WAIT_LIMIT, || {
        let holds = check();
        async move {
            holds
                .await
                .then_some(())
                .ok_or_else(|| "not yet".to_string())
        }
    })
    .await
}

async fn route(c: &RemotingClient, topic: &str) -> RemotingCommand {
    call(c, route_request(topic)).await
}

fn topic_table(topics: &[(&str, u32, u32, u32)], counter: i64) -> TopicTable {
    let mut t = TopicTable {
        data_version: DataVersion {
            timestamp: 1_700_000_000_000,
            counter,
        },
        ..TopicTable::default()
    };
    for &(name, read, write, perm) in topics {
        t.topic_config_table
            .insert(name.to_owned(), TopicConfig::new(name, read, write, perm));
    }
    t
}

/// A REGISTER_BROKER request as a Java broker sends it, with a correct `bodyCrc32`.
fn register_request(
    name: &str,
    addr: &str,
    id: i64,
    topics: &[(&str, u32, u32, u32)],
    counter: i64,
) -> RemotingCommand {
    let table = topic_table(topics, counter);
    let body = serde_json::to_vec(&serde_json::json!({
        "topicConfigSerializeWrapper": {
            "topicConfigTable": table.topic_config_table,
            "dataVersion": table.data_version,
        },
        "filterServerList": [],
    }))
    .unwrap();
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: CLUSTER.into(),
        ha_server_addr: format!("{addr}-ha"),
        broker_id: id,
        compressed: false,
        body_crc32: body_crc(&body) as i32,
        ..Default::default()
    };
    RemotingCommand::new_request(103)
        .with_ext_fields(header.to_ext_fields())
        .with_body(body)
}

/// REGISTER_BROKER of broker-a (10.0.0.1:10911, master) with topic `T` (4/4 queues, perm RW).
fn register_a_with_t() -> RemotingCommand {
    register_request("broker-a", "10.0.0.1:10911", 0, &[("T", 4, 4, 6)], 1)
}

fn identity(name: &str, addr: &str, id: u64) -> BrokerIdentity {
    BrokerIdentity {
        cluster: CLUSTER.into(),
        broker_name: name.into(),
        broker_id: id,
        broker_addr: addr.into(),
        ha_server_addr: format!("{addr}-ha"),
    }
}

fn registrar(
    addrs: Vec<String>,
    id: BrokerIdentity,
    topics: Arc<Mutex<TopicTable>>,
    period: Duration,
) -> Registrar {
    Registrar::new(
        addrs,
        id,
        Arc::new(move || topics.lock().unwrap().clone()),
        period,
        Duration::from_secs(2),
    )
}

fn parse_route(resp: &RemotingCommand) -> TopicRouteData {
    assert_eq!(resp.code, 0, "remark: {:?}", resp.remark);
    // Bare integer keys (`"brokerAddrs":{0:…}`), as Java's name server writes them.
    parse_java_json(&resp.body).unwrap()
}

#[actix::test]
async fn registrar_registers_topics_and_clients_get_the_route() {
    let ns = namesrv().await;
    let topics = Arc::new(Mutex::new(topic_table(
        &[
            ("TopicA", 8, 8, 6),
            ("TBW102", 8, 8, 7),
            ("ReadOnly", 4, 2, 4),
        ],
        1,
    )));
    let reg = start_on(
        None,
        registrar(
            vec![ns.addr()],
            identity("broker-a", "127.0.0.1:10911", 0),
            topics.clone(),
            Duration::from_secs(30),
        ),
    );
    let c = connect(&ns).await;
    eventually("TopicA's route", || async {
        route(&c, "TopicA").await.code == 0
    })
    .await;

    // Byte for byte what Apache RocketMQ 4.9.4's name server writes for this route (fastjson:
    // fields sorted, nulls left out), plus 5.x's `enableActingMaster`, which
    // rocketmq-client-rust needs (see `BrokerData` in src/protocol/body.rs). Broker ids are
    // quoted for a request of version ≥ 401 (V4_9_4) or with acceptStandardJsonOnly=true, bare
    // for older clients — as DefaultRequestProcessor.getRouteInfoByTopic decides.
    let text = |ids: &str| {
        format!(
            r#"{{"brokerDatas":[{{"brokerAddrs":{{{ids}:"127.0.0.1:10911"}},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}}],"filterServerTable":{{}},"queueDatas":[{{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}}]}}"#
        )
    };
    let old_client = |version: i32| {
        let mut r = route_request("TopicA");
        r.version = version;
        r
    };
    for (req, ids) in [
        (route_request("TopicA"), r#""0""#),
        (old_client(400), "0"),
        (old_client(0), "0"),
        (
            old_client(0).with_ext("acceptStandardJsonOnly", "true"),
            r#""0""#,
        ),
    ] {
        let version = req.version;
        let resp = call(&c, req).await;
        assert_eq!(
            std::str::from_utf8(&resp.body).unwrap(),
            text(ids),
            "version {version}"
        );
    }

    let r = parse_route(&route(&c, "ReadOnly").await);
    assert_eq!(
        (
            r.queue_datas[0].read_queue_nums,
            r.queue_datas[0].write_queue_nums,
            r.queue_datas[0].perm
        ),
        (4, 2, 4)
    );
    assert_eq!(
        parse_route(&route(&c, "TBW102").await).queue_datas[0].perm,
        7
    );
    assert_eq!(
        r.broker_datas[0].broker_addrs,
        BTreeMap::from([(0, "127.0.0.1:10911".to_owned())])
    );

    // The handle's helper sees the same route.
    assert_eq!(ns.route("TopicA").await.unwrap().queue_datas.len(), 1);
    let status = reg.send(GetRegistrations).await.unwrap();
    assert_eq!(status.len(), 1);
    assert!(status[0].successes >= 1 && !status[0].failing);
}

#[actix::test]
async fn register_now_publishes_a_new_topic() {
    let ns = namesrv().await;
    let topics = Arc::new(Mutex::new(topic_table(&[("Old", 4, 4, 6)], 1)));
    let reg = start_on(
        None,
        registrar(
            vec![ns.addr()],
            identity("broker-a", "127.0.0.1:10911", 0),
            topics.clone(),
            // Far beyond the test: only RegisterNow can publish the new topic.
            Duration::from_secs(3600),
        ),
    );
    eventually("Old's route", || async { ns.route("Old").await.is_some() }).await;
    {
        let mut t = topics.lock().unwrap();
        t.topic_config_table
            .insert("New".into(), TopicConfig::new("New", 2, 2, 6));
        t.data_version.next(1_700_000_000_001);
    }
    reg.send(RegisterNow(None)).await.unwrap();
    eventually("New's route", || async { ns.route("New").await.is_some() }).await;
    assert_eq!(
        ns.route("New").await.unwrap().queue_datas[0].read_queue_nums,
        2
    );
    // With a waiter: answered only once the name server has the table as it was when asked, so
    // a route read right after sees the topic (what UPDATE_AND_CREATE_TOPIC waits for).
    for i in 0..20i64 {
        let name = format!("Waited{i}");
        {
            let mut t = topics.lock().unwrap();
            t.topic_config_table
                .insert(name.clone(), TopicConfig::new(&name, 1, 1, 6));
            t.data_version.next(1_700_000_000_002 + i);
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Back to back with a plain trigger, so the waiter often meets a registration in flight.
        reg.try_notify(RegisterNow(None));
        reg.send(RegisterNow(Some(tx))).await.unwrap();
        rx.await.expect("the registrar answers its waiter");
        assert!(
            ns.route(&name).await.is_some(),
            "{name} routed once answered"
        );
    }
}

#[actix::test]
async fn unknown_topic_is_topic_not_exist() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    let resp = route(&c, "NoSuchTopic").await;
    assert_eq!(resp.code, 17);
    // 4.9.4's remark, with `FAQUrl.suggestTodo(APPLY_TOPIC_URL)`: the Java client then shows it
    // as is instead of appending its own "For more information" line.
    assert_eq!(
        resp.remark.as_deref(),
        Some(
            "No topic route info in name server for the topic: NoSuchTopic\n\
             See http://rocketmq.apache.org/docs/faq/ for further details."
        )
    );
    assert!(resp.body.is_empty());
    assert!(resp.is_response());
}

#[actix::test]
async fn cluster_info_and_topic_list() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    for (name, addr, topic) in [
        ("broker-a", "10.0.0.1:10911", "T1"),
        ("broker-b", "10.0.0.2:10911", "T2"),
    ] {
        let resp = call(&c, register_request(name, addr, 0, &[(topic, 4, 4, 6)], 1)).await;
        assert_eq!(resp.code, 0, "{:?}", resp.remark);
    }

    let resp = call(&c, RemotingCommand::new_request(106)).await;
    assert_eq!(resp.code, 0);
    let info: ClusterInfo = parse_java_json(&resp.body).unwrap();
    assert_eq!(
        info.cluster_addr_table,
        BTreeMap::from([(
            CLUSTER.to_owned(),
            vec!["broker-a".to_owned(), "broker-b".to_owned()]
        )])
    );
    assert_eq!(
        info.broker_addr_table["broker-b"].broker_addrs,
        BTreeMap::from([(0, "10.0.0.2:10911".to_owned())])
    );
    assert_eq!(info.broker_addr_table["broker-a"].cluster, CLUSTER);
    let text = std::str::from_utf8(&resp.body).unwrap();
    assert!(
        text.contains(r#""brokerAddrs":{0:"10.0.0.1:10911"}"#),
        "{text}"
    );

    let resp = call(&c, RemotingCommand::new_request(206)).await;
    assert_eq!(resp.code, 0);
    let list: TopicList = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(list.topic_list, vec!["T1".to_owned(), "T2".to_owned()]);
    assert_eq!(
        std::str::from_utf8(&resp.body).unwrap(),
        r#"{"topicList":["T1","T2"]}"#
    );
}

#[actix::test]
async fn slave_registration_adds_its_address_but_not_queue_data() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    let master = call(
        &c,
        register_request("broker-a", "10.0.0.1:10911", 0, &[("T", 8, 8, 6)], 1),
    )
    .await;
    assert_eq!(master.code, 0);
    assert_eq!(master.ext("masterAddr"), None, "a master is told no master");

    // The slave's table differs (and has an extra topic): neither may reach the routes.
    let slave = call(
        &c,
        register_request(
            "broker-a",
            "10.0.0.2:10911",
            1,
            &[("T", 2, 2, 4), ("SlaveOnly", 1, 1, 6)],
            7,
        ),
    )
    .await;
    assert_eq!(slave.code, 0);
    assert_eq!(slave.ext("masterAddr"), Some("10.0.0.1:10911"));
    assert_eq!(slave.ext("haServerAddr"), Some("10.0.0.1:10911-ha"));

    let r = parse_route(&route(&c, "T").await);
    assert_eq!(
        r.broker_datas[0].broker_addrs,
        BTreeMap::from([
            (0, "10.0.0.1:10911".to_owned()),
            (1, "10.0.0.2:10911".to_owned())
        ])
    );
    assert_eq!(r.queue_datas.len(), 1);
    assert_eq!(
        (r.queue_datas[0].read_queue_nums, r.queue_datas[0].perm),
        (8, 6)
    );
    assert_eq!(route(&c, "SlaveOnly").await.code, 17);
}

#[actix::test]
async fn an_address_re_registered_under_another_id_moves() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    assert_eq!(
        call(
            &c,
            register_request("broker-a", "10.0.0.2:10911", 1, &[], 1)
        )
        .await
        .code,
        0
    );
    // The slave is promoted: same address, id 0.
    assert_eq!(
        call(
            &c,
            register_request("broker-a", "10.0.0.2:10911", 0, &[("T", 4, 4, 6)], 2)
        )
        .await
        .code,
        0
    );
    let r = parse_route(&route(&c, "T").await);
    assert_eq!(
        r.broker_datas[0].broker_addrs,
        BTreeMap::from([(0, "10.0.0.2:10911".to_owned())])
    );
}

#[actix::test]
async fn bad_body_crc32_and_compressed_bodies_are_refused() {
    let ns = namesrv().await;
    let c = connect(&ns).await;

    let mut bad = register_a_with_t();
    let crc: i32 = bad.ext("bodyCrc32").unwrap().parse().unwrap();
    bad.ext_fields.insert("bodyCrc32", (crc ^ 1).to_string());
    let resp = call(&c, bad).await;
    assert_eq!(resp.code, 1);
    assert!(
        resp.remark.as_deref().unwrap().contains("crc32"),
        "{:?}",
        resp.remark
    );
    assert_eq!(
        route(&c, "T").await.code,
        17,
        "a refused registration changes nothing"
    );

    let mut compressed = register_a_with_t();
    compressed.ext_fields.insert("compressed", "true");
    let resp = call(&c, compressed).await;
    assert_eq!(resp.code, 1);
    assert!(
        resp.remark.as_deref().unwrap().contains("compressed"),
        "{:?}",
        resp.remark
    );

    // bodyCrc32 = 0 means "unchecked", as in RocketMQ.
    let mut unchecked = register_a_with_t();
    unchecked.ext_fields.insert("bodyCrc32", "0");
    assert_eq!(call(&c, unchecked).await.code, 0);
    assert_eq!(route(&c, "T").await.code, 0);
}

#[actix::test]
async fn expiry_removes_a_broker_that_stops_registering() {
    // Expiry is 20 registration periods: broker-b survives a scheduling stall of most of a second
    // on a loaded machine (at 200 ms, one of 150 ms expired it).
    let expiry = Duration::from_secs(1);
    let ns = namesrv_with(Duration::from_millis(50), expiry).await;
    // broker-b keeps registering (every 50 ms) and must survive the scans.
    let _keeper = start_on(
        None,
        registrar(
            vec![ns.addr()],
            identity("broker-b", "10.0.0.9:10911", 0),
            Arc::new(Mutex::new(topic_table(&[("Kept", 4, 4, 6)], 1))),
            Duration::from_millis(50),
        ),
    );
    // The connection stays open: only expiry may remove broker-a.
    let c = connect(&ns).await;
    let registered_at = Instant::now();
    assert_eq!(
        call(
            &c,
            register_request("broker-a", "10.0.0.1:10911", 0, &[("Gone", 4, 4, 6)], 1)
        )
        .await
        .code,
        0
    );
    eventually("broker-a to expire", || async {
        route(&c, "Gone").await.code == 17
    })
    .await;
    assert!(
        registered_at.elapsed() >= expiry,
        "removed before its expiry"
    );

    // broker-b's first registration may not have arrived yet.
    eventually("broker-b's route", || async {
        ns.route("Kept").await.is_some()
    })
    .await;
    let info = ns.cluster_info().await.unwrap();
    assert!(!info.broker_addr_table.contains_key("broker-a"));
    assert_eq!(
        info.cluster_addr_table.get(CLUSTER),
        Some(&vec!["broker-b".to_owned()])
    );
    // Several more expiry periods: broker-b is still there.
    tokio::time::sleep(expiry * 2).await;
    assert!(ns.route("Kept").await.is_some());
}

#[actix::test]
async fn unregister_broker_removes_it() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    assert_eq!(call(&c, register_a_with_t()).await.code, 0);
    assert_eq!(route(&c, "T").await.code, 0);
    let header = UnregisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "10.0.0.1:10911".into(),
        cluster_name: CLUSTER.into(),
        broker_id: 0,
    };
    let resp = call(
        &c,
        RemotingCommand::new_request(104).with_ext_fields(header.to_ext_fields()),
    )
    .await;
    assert_eq!(resp.code, 0);
    assert_eq!(route(&c, "T").await.code, 17);
    let info = ns.cluster_info().await.unwrap();
    assert!(info.broker_addr_table.is_empty() && info.cluster_addr_table.is_empty());
}

#[actix::test]
async fn registrar_unregister_all_removes_the_broker() {
    let ns = namesrv().await;
    let reg = start_on(
        None,
        registrar(
            vec![ns.addr()],
            identity("broker-a", "127.0.0.1:10911", 0),
            Arc::new(Mutex::new(topic_table(&[("T", 4, 4, 6)], 1))),
            Duration::from_millis(20),
        ),
    );
    eventually("T's route", || async { ns.route("T").await.is_some() }).await;
    assert_eq!(reg.send(UnregisterAll).await.unwrap(), 1);
    assert!(ns.route("T").await.is_none());
    // Later ticks do not register it again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(ns.route("T").await.is_none());
}

#[actix::test]
async fn closing_the_registering_connection_drops_the_broker() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    assert_eq!(call(&c, register_a_with_t()).await.code, 0);
    assert!(ns.route("T").await.is_some());
    drop(c);
    eventually("broker-a to go with its connection", || async {
        ns.route("T").await.is_none()
    })
    .await;
}

#[actix::test]
async fn unknown_request_code_is_not_supported() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    let resp = call(&c, RemotingCommand::new_request(9999)).await;
    assert_eq!(resp.code, 3);
    assert_eq!(
        resp.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
    // A broker request sent to the name server by mistake gets the same answer.
    let resp = call(&c, RemotingCommand::new_request(10)).await;
    assert_eq!(resp.code, 3);
    assert!(resp.remark.unwrap().contains("10"));
}

#[actix::test]
async fn register_topic_in_namesrv_adds_the_topic() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    assert_eq!(
        call(
            &c,
            register_request("broker-a", "127.0.0.1:10911", 0, &[("TBW102", 8, 8, 7)], 1)
        )
        .await
        .code,
        0
    );
    // The 196-byte body of the trace: a TopicRouteData carrying the new topic's queue data.
    let body = r#"{"orderTopicConf":null,"queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],"brokerDatas":[],"filterServerTable":{},"topicQueueMappingInfo":null}"#;
    assert_eq!(body.len(), 196);
    let resp = call(
        &c,
        RemotingCommand::new_request(217)
            .with_ext("topic", "capT1")
            .with_body(body.as_bytes().to_vec()),
    )
    .await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let r = parse_route(&route(&c, "capT1").await);
    assert_eq!(
        (r.queue_datas[0].read_queue_nums, r.queue_datas[0].perm),
        (4, 6)
    );
    assert_eq!(
        r.broker_datas[0].broker_addrs,
        BTreeMap::from([(0, "127.0.0.1:10911".to_owned())])
    );

    // A broker's topic config wrapper (no broker name) is attributed to the master registered
    // through the same connection.
    let wrapper = serde_json::json!({
        "topicConfigTable": {"%RETRY%g": TopicConfig::new("%RETRY%g", 1, 1, 6)},
        "dataVersion": {"timestamp": 1, "counter": 2},
    });
    let resp = call(
        &c,
        RemotingCommand::new_request(217)
            .with_ext("topic", "%RETRY%g")
            .with_body(serde_json::to_vec(&wrapper).unwrap()),
    )
    .await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(
        parse_route(&route(&c, "%RETRY%g").await).queue_datas[0].broker_name,
        "broker-a"
    );

    // Queue data for a broker nobody registered is ignored (RocketMQ's rule).
    let stray = body.replace("broker-a", "broker-x");
    let resp = call(
        &c,
        RemotingCommand::new_request(217)
            .with_ext("topic", "stray")
            .with_body(stray.into_bytes()),
    )
    .await;
    assert_eq!(resp.code, 0);
    assert_eq!(route(&c, "stray").await.code, 17);
}

#[actix::test]
async fn a_name_server_that_is_down_does_not_block_the_others() {
    let ns = namesrv().await;
    // An address nothing listens on: bind, note the port, close.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let reg = start_on(
        None,
        registrar(
            vec![down.clone(), ns.addr()],
            identity("broker-a", "127.0.0.1:10911", 0),
            Arc::new(Mutex::new(topic_table(&[("T", 4, 4, 6)], 1))),
            Duration::from_millis(30),
        ),
    );
    eventually("T's route on the live name server", || async {
        ns.route("T").await.is_some()
    })
    .await;
    // The dead one keeps being retried every period.
    eventually("repeated failures against the dead name server", || async {
        let s = reg.send(GetRegistrations).await.unwrap();
        s[0].failures >= 2 && s[0].failing && s[1].successes >= 2 && !s[1].failing
    })
    .await;
    let s = reg.send(GetRegistrations).await.unwrap();
    assert_eq!(s[0].addr, down);
    assert!(s[0].last_error.is_some());
}

#[actix::test]
async fn a_java_broker_registration_body_is_accepted() {
    // Field order and spelling as fastjson writes them (sorted keys, 4.9.x fields only).
    let ns = namesrv().await;
    let c = connect(&ns).await;
    let body = br#"{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":5},"topicConfigTable":{"J":{"order":false,"perm":6,"readQueueNums":3,"topicFilterType":"SINGLE_TAG","topicName":"J","topicSysFlag":0,"writeQueueNums":3}}},"filterServerList":[]}"#;
    let _: RegisterBrokerBody = serde_json::from_slice(body).unwrap();
    let header = RegisterBrokerRequestHeader {
        broker_name: "broker-j".into(),
        broker_addr: "10.0.0.5:10911".into(),
        cluster_name: CLUSTER.into(),
        ha_server_addr: "10.0.0.5:10912".into(),
        broker_id: 0,
        compressed: false,
        body_crc32: body_crc(body) as i32,
        ..Default::default()
    };
    let resp = call(
        &c,
        RemotingCommand::new_request(103)
            .with_ext_fields(header.to_ext_fields())
            .with_body(body.to_vec()),
    )
    .await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(
        parse_route(&route(&c, "J").await).queue_datas[0].read_queue_nums,
        3
    );
}

/// `mqadmin wipeWritePerm` / `addWritePerm` (WIPE_WRITE_PERM_OF_BROKER 205,
/// ADD_WRITE_PERM_OF_BROKER 327): the write bit of every topic of a broker name goes from the
/// routes, so producers stop choosing it while consumers drain it, and comes back as read+write.
/// Another broker's topics keep theirs; a re-registration with the same dataVersion does not undo
/// it (as in RocketMQ).
#[actix::test]
async fn wipe_and_add_write_perm_of_a_broker_change_its_routes() {
    let ns = namesrv().await;
    let c = connect(&ns).await;
    let topics = [("T", 4, 4, 6), ("U", 2, 2, 6)];
    for (name, addr) in [
        ("broker-a", "10.0.0.1:10911"),
        ("broker-b", "10.0.0.2:10911"),
    ] {
        assert_eq!(
            call(&c, register_request(name, addr, 0, &topics, 1))
                .await
                .code,
            0
        );
    }
    let perms = |route: &TopicRouteData| -> Vec<(String, i32)> {
        let mut v: Vec<_> = route
            .queue_datas
            .iter()
            .map(|q| (q.broker_name.clone(), q.perm))
            .collect();
        v.sort();
        v
    };
    let wipe = RemotingCommand::new_request(205).with_ext("brokerName", "broker-a");
    let resp = call(&c, wipe).await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(resp.ext("wipeTopicCount"), Some("2"));
    for t in ["T", "U"] {
        let r = parse_route(&route(&c, t).await);
        assert_eq!(
            perms(&r),
            [("broker-a".to_string(), 4), ("broker-b".to_string(), 6)]
        );
    }
    // The broker's periodic registration, topic table unchanged, leaves the wipe in place.
    let again = register_request("broker-a", "10.0.0.1:10911", 0, &topics, 1);
    assert_eq!(call(&c, again).await.code, 0);
    let r = parse_route(&route(&c, "T").await);
    assert_eq!(perms(&r)[0], ("broker-a".to_string(), 4));
    let add = RemotingCommand::new_request(327).with_ext("brokerName", "broker-a");
    let resp = call(&c, add).await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(resp.ext("addTopicCount"), Some("2"));
    let r = parse_route(&route(&c, "T").await);
    assert_eq!(perms(&r)[0], ("broker-a".to_string(), 6));
    // Without a broker name: refused with a remark.
    let resp = call(&c, RemotingCommand::new_request(205)).await;
    assert_eq!(resp.code, 1);
    assert!(resp.remark.unwrap().contains("brokerName"));
}

fn kv_request(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
    fields
        .iter()
        .fold(RemotingCommand::new_request(code), |r, (k, v)| {
            r.with_ext(*k, *v)
        })
}

/// The KV config table over the wire as mqadmin's updateKvConfig / deleteKvConfig /
/// updateOrderConf use it, with 4.9.4's codes and remarks, and kvConfig.json in 4.9.4's layout.
#[actix::test]
async fn kv_config_put_get_delete_and_list() {
    let home = tempfile::tempdir().unwrap();
    let ns = start_in(
        home.path(),
        Duration::from_secs(5),
        Duration::from_secs(120),
    )
    .await;
    let c = connect(&ns).await;
    let put = kv_request(100, &[("namespace", "NS"), ("key", "K"), ("value", "V")]);
    let resp = call(&c, put).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (0, None));
    let file = home.path().join("namesrv").join("kvConfig.json");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"configTable":{"NS":{"K":"V"}}}"#
    );
    let resp = call(&c, kv_request(101, &[("namespace", "NS"), ("key", "K")])).await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(resp.ext("value"), Some("V"));
    let resp = call(&c, kv_request(219, &[("namespace", "NS")])).await;
    assert_eq!(resp.code, 0);
    assert_eq!(&resp.body[..], br#"{"table":{"K":"V"}}"#);

    let resp = call(&c, kv_request(102, &[("namespace", "NS"), ("key", "K")])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (0, None));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"configTable":{"NS":{}}}"#
    );
    let resp = call(&c, kv_request(101, &[("namespace", "NS"), ("key", "K")])).await;
    assert_eq!(resp.code, 22);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No config item, Namespace: NS Key: K")
    );
    // An emptied namespace still lists (empty); one never made is not found.
    let resp = call(&c, kv_request(219, &[("namespace", "NS")])).await;
    assert_eq!((resp.code, &resp.body[..]), (0, &br#"{"table":{}}"#[..]));
    let resp = call(&c, kv_request(219, &[("namespace", "Other")])).await;
    assert_eq!(resp.code, 22);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No config item, Namespace: Other")
    );
    // Missing header fields: SYSTEM_ERROR naming the field, nothing written.
    for (code, fields) in [
        (100, &[("namespace", "NS"), ("key", "K")][..]),
        (100, &[("key", "K"), ("value", "V")][..]),
        (101, &[("namespace", "NS")][..]),
        (102, &[][..]),
        (219, &[][..]),
    ] {
        let resp = call(&c, kv_request(code, fields)).await;
        assert_eq!(resp.code, 1, "{code} {fields:?}");
        assert!(resp.remark.is_some(), "{code} {fields:?}");
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"configTable":{"NS":{}}}"#
    );
}

/// A restarted name server has its KV table back; with `orderMessageEnable` (here from a `-c`
/// file, which becomes `configStorePath`) routes carry ORDER_TOPIC_CONFIG's value, and
/// REGISTER_BROKER answers with that namespace's table, as 4.9.4 does.
#[actix::test]
async fn kv_table_survives_a_restart_and_orders_routes() {
    let home = tempfile::tempdir().unwrap();
    let ns = start_in(
        home.path(),
        Duration::from_secs(5),
        Duration::from_secs(120),
    )
    .await;
    let c = connect(&ns).await;
    let put = kv_request(
        100,
        &[
            ("namespace", "ORDER_TOPIC_CONFIG"),
            ("key", "T"),
            ("value", "broker-a:4"),
        ],
    );
    assert_eq!(call(&c, put).await.code, 0);
    ns.stop_accepting();
    drop(c);

    let conf = home.path().join("namesrv.conf");
    std::fs::write(&conf, "orderMessageEnable=true\nlistenPort=1\n").unwrap();
    let ns = common::start_namesrv_in(home.path(), |o| o.config_file = Some(conf.clone())).await;
    let c = connect(&ns).await;
    let resp = call(&c, register_a_with_t()).await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(&resp.body[..], br#"{"table":{"T":"broker-a:4"}}"#);
    let r = route(&c, "T").await;
    assert_eq!(r.code, 0);
    assert_eq!(
        parse_route(&r).order_topic_conf.as_deref(),
        Some("broker-a:4")
    );

    let resp = call(&c, RemotingCommand::new_request(319)).await;
    let text = String::from_utf8(resp.body.to_vec()).unwrap();
    assert!(
        text.contains(&format!("configStorePath={}\n", conf.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("listenPort={}\n", ns.local_addr.port())),
        "{text}"
    );
    // Turned off at run time, routes stop carrying it at once; the update is written back to
    // the -c file, as RocketMQ's Configuration.persist does.
    let off = RemotingCommand::new_request(318).with_body(b"orderMessageEnable=false".to_vec());
    assert_eq!(call(&c, off).await.code, 0);
    assert_eq!(parse_route(&route(&c, "T").await).order_topic_conf, None);
    let written = std::fs::read_to_string(&conf).unwrap();
    assert!(written.contains("orderMessageEnable=false\n"), "{written}");
}

/// A damaged kvConfig.json with no backup refuses the start with an error naming the file.
#[actix::test]
async fn a_damaged_kv_file_refuses_the_start() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("namesrv").join("kvConfig.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "{\"configTable\":").unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let opts = NamesrvOptions {
        home: Some(home.path().to_path_buf()),
        ..NamesrvOptions::default()
    };
    let err = start_namesrv(listener, opts).await.err().expect("refused");
    assert!(format!("{err:#}").contains("kvConfig.json"), "{err:#}");
}
