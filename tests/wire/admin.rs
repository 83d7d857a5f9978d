//! `actormq admin` end to end: the real binary, run as a child process, against a broker with its
//! embedded name server on 127.0.0.1 ephemeral ports, while a real client (`rocketmq-client-rust`
//! 1.0.0) produces and consumes. Every command named by the issue is driven and its output
//! checked — tables for people, `--json` for the figures.
//!
//! Each child gets a hard time limit and is killed (by its handle) if it overruns.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::real_client::*;
use actormq::remoting::client::RemotingClient;
use actormq_core::protocol::body::parse_java_json;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use rocketmq_client_rust::{
    ClientResult, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MQPushConsumer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use serde_json::Value;

/// What one `actormq admin` run printed.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `actormq admin -n <ns> <args…>` with a 30 s limit.
async fn admin(ns: &str, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_actormq"));
    cmd.arg("admin")
        .arg("-n")
        .arg(ns)
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("actormq admin {args:?} did not finish within 30 s"))
        .expect("run actormq admin");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a command that must succeed; returns its stdout.
async fn ok(ns: &str, args: &[&str]) -> String {
    let r = admin(ns, args).await;
    assert!(
        r.ok,
        "actormq admin {args:?} failed:\nstdout: {}\nstderr: {}",
        r.stdout, r.stderr
    );
    r.stdout
}

/// Runs a `--json` command that must succeed; returns the document.
/// The runtime keys of a RocketMQ 4.9.4 broker (`mqadmin brokerStatus` against one, fresh),
/// but `commitLogDiskRatio_<path>` and `scheduleMessageOffset_<level>`, which name its paths and
/// delay levels, and `remainHowManyDataToCommit`, sent only with transientStorePoolEnable.
const RUNTIME_KEYS_494: &[&str] = &[
    "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity",
    "bootTimestamp",
    "brokerVersion",
    "brokerVersionDesc",
    "commitLogDirCapacity",
    "commitLogDiskRatio",
    "commitLogMaxOffset",
    "commitLogMinOffset",
    "consumeQueueDiskRatio",
    "dispatchBehindBytes",
    "dispatchMaxBuffer",
    "earliestMessageTimeStamp",
    "getFoundTps",
    "getMessageEntireTimeMax",
    "getMissTps",
    "getTotalTps",
    "getTransferedTps",
    "msgGetTotalTodayMorning",
    "msgGetTotalTodayNow",
    "msgGetTotalYesterdayMorning",
    "msgPutTotalTodayMorning",
    "msgPutTotalTodayNow",
    "msgPutTotalYesterdayMorning",
    "pageCacheLockTimeMills",
    "pullThreadPoolQueueCapacity",
    "pullThreadPoolQueueHeadWaitTimeMills",
    "pullThreadPoolQueueSize",
    "putLatency99",
    "putLatency999",
    "putMessageAverageSize",
    "putMessageDistributeTime",
    "putMessageEntireTimeMax",
    "putMessageFailedTimes",
    "putMessageSizeTotal",
    "putMessageTimesTotal",
    "putTps",
    "queryThreadPoolQueueCapacity",
    "queryThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueSize",
    "remainHowManyDataToFlush",
    "remainTransientStoreBufferNumbs",
    "runtime",
    "sendThreadPoolQueueCapacity",
    "sendThreadPoolQueueHeadWaitTimeMills",
    "sendThreadPoolQueueSize",
    "startAcceptSendRequestTimeStamp",
];

async fn json(ns: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ok(ns, &all).await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{out}"))
}

fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("not a number: {s}")),
        Value::Number(n) => n.as_i64().expect("integer"),
        other => panic!("not a number: {other}"),
    }
}

/// Σ of a column over a `--json` table.
fn column_sum(rows: &Value, column: &str) -> i64 {
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| int(&r[column]))
        .sum()
}

const N: usize = 20;

#[test]
fn every_admin_command_against_a_running_broker() {
    run_bounded("admin", || async {
        let (_dir, b) = broker(&[]);
        let ns = b.namesrv_addr.clone();
        let addr = b.broker_addr.clone();
        let topic = unique("AdminT");
        let group = unique("AdminG");

        // clusterList: the broker, its address and version, in the table (once its first
        // registration, sent right after start, has reached the name server).
        let deadline = Instant::now() + Duration::from_secs(20);
        let (out, row) = loop {
            let out = ok(&ns, &["clusterList"]).await;
            if let Some(row) = out.lines().find(|l| l.contains(&addr)) {
                let row = row.to_string();
                break (out, row);
            }
            assert!(
                Instant::now() < deadline,
                "clusterList lacks {addr}:\n{out}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(row.starts_with("DefaultCluster"), "{row}");
        assert!(row.contains("broker-a") && row.contains("ActorMQ"), "{row}");
        assert!(out.starts_with("#Cluster Name"), "{out}");

        // updateTopic, topicList, topicRoute.
        let out = ok(
            &ns,
            &[
                "updateTopic",
                "-t",
                &topic,
                "-b",
                &addr,
                "-r",
                "4",
                "-w",
                "4",
            ],
        )
        .await;
        assert!(
            out.contains(&format!("create topic to {addr} success.")),
            "{out}"
        );
        // The broker re-registers with the name server right after a topic change.
        let listed = poll(
            100,
            Duration::from_millis(100),
            || async { ok(&ns, &["topicList"]).await },
            |out| out.lines().any(|l| l == topic),
        )
        .await;
        assert!(
            listed.lines().any(|l| l == topic),
            "topicList never listed {topic}"
        );
        let route = json(&ns, &["topicRoute", "-t", &topic]).await;
        assert_eq!(route["queueDatas"][0]["readQueueNums"], 4, "{route}");
        assert_eq!(route["queueDatas"][0]["perm"], 6, "{route}");

        // Produce N keyed messages with the real client.
        let rt = client_runtime("admin");
        let mut p = producer(&rt, &ns).await;
        let mut sent = Vec::new();
        for i in 0..N {
            let m = Message::builder()
                .topic(topic.as_str())
                .tags("A")
                .keys(vec![format!("key-{i}")])
                .body_slice(format!("body-{i}").as_bytes())
                .build_unchecked();
            let r = p
                .send_with_timeout(m, 5_000)
                .await
                .unwrap_or_else(|e| panic!("send {i}: {}", describe(&e)))
                .expect("send result");
            sent.push(r);
        }

        // topicStatus: max offsets add up to N once dispatch (asynchronous, as in RocketMQ) has
        // caught up — the first dispatch of a fresh store also creates its first index file.
        let deadline = Instant::now() + Duration::from_secs(20);
        let stats = loop {
            let s = json(&ns, &["topicStatus", "-t", &topic]).await;
            if column_sum(&s, "Max Offset") == N as i64 {
                break s;
            }
            assert!(Instant::now() < deadline, "dispatch never reached {N}: {s}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(stats.as_array().unwrap().len(), 4);

        // brokerStatus: the put counter moved by N.
        let status = json(&ns, &["brokerStatus", "-b", &addr]).await;
        assert!(
            int(&status[&addr]["msgPutTotalTodayNow"]) >= N as i64,
            "{status}"
        );
        assert!(status[&addr]["putTps"].as_str().unwrap().split(' ').count() == 3);
        // Every key RocketMQ 4.9.4 sends (AdminBrokerProcessor.prepareRuntimeInfo with the
        // store's getRuntimeInfo): mqadmin 4.9.4 `clusterList` failed on the missing
        // `getTransferedTps`, and `brokerStatus` printed fewer lines than against Java.
        for key in RUNTIME_KEYS_494 {
            assert!(status[&addr][key].is_string(), "{key} missing: {status}");
        }
        let dirs = status[&addr].as_object().unwrap();
        assert!(
            dirs.keys().any(|k| k.starts_with("commitLogDiskRatio_/")),
            "{status}"
        );
        assert!(
            int(&status[&addr]["putMessageTimesTotal"]) >= N as i64,
            "{status}"
        );
        assert!(
            status[&addr]["consumeQueueDiskRatio"].is_string(),
            "{status}"
        );

        // deleteExpiredCommitLog: accepted (retention then runs its next rounds at any hour;
        // nothing here is 72 hours old, so nothing goes).
        let out = ok(&ns, &["deleteExpiredCommitLog", "-b", &addr]).await;
        assert_eq!(
            out.trim(),
            format!("delete expired files on {addr} success.")
        );

        // queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset.
        let first = &sent[3];
        let offset_id = first.offset_msg_id.clone().expect("offset msgId");
        let out = ok(&ns, &["queryMsgById", "-i", &offset_id]).await;
        assert!(out.contains("body-3") && out.contains(&topic), "{out}");
        assert!(out.contains("Keys:                [key-3]"), "{out}");
        let rows = json(&ns, &["queryMsgByKey", "-t", &topic, "-k", "key-7"]).await;
        assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
        assert_eq!(rows[0]["Message ID"], offset_msg_id(&sent[7]), "{rows}");
        let uniq = sent[5].msg_id.as_ref().expect("msg id").to_string();
        let found = json(&ns, &["queryMsgByUniqueKey", "-t", &topic, "-i", &uniq]).await;
        assert_eq!(found[0]["body"], "body-5", "{found}");
        let mq = sent[9].message_queue.as_ref().expect("queue");
        let qid = mq.queue_id().to_string();
        let qoff = sent[9].queue_offset.to_string();
        let one = json(
            &ns,
            &[
                "queryMsgByOffset",
                "-t",
                &topic,
                "-b",
                "broker-a",
                "-i",
                &qid,
                "-o",
                &qoff,
            ],
        )
        .await;
        assert_eq!(one["body"], "body-9", "{one}");

        // printMsg: every message once.
        let all = json(&ns, &["printMsg", "-t", &topic]).await;
        let mut bodies: Vec<String> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["body"].as_str().unwrap().to_string())
            .collect();
        bodies.sort();
        let mut want: Vec<String> = (0..N).map(|i| format!("body-{i}")).collect();
        want.sort();
        assert_eq!(bodies, want);

        // updateSubGroup, then a consumer of that group reads everything.
        let out = ok(
            &ns,
            &["updateSubGroup", "-g", &group, "-b", &addr, "-r", "3"],
        )
        .await;
        assert!(out.contains("create subscription group to"), "{out}");
        let got = sink();
        let mut c = push_builder(&rt, &ns, &group).build();
        c.subscribe(&topic, "*").await.expect("subscribe");
        let s2 = got.clone();
        c.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| -> ClientResult<_> {
                s2.lock().unwrap().extend(msgs.iter().map(|m| got_of(m)));
                Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
            },
        );
        c.start().await.expect("consumer start");
        assert!(
            wait_until(Duration::from_secs(30), || seen(&got).len() >= N).await,
            "consumer got {} of {N}",
            seen(&got).len()
        );

        // consumerProgress -g: lag reaches 0 once the offsets are committed (every 1 s).
        let deadline = Instant::now() + Duration::from_secs(20);
        let progress = loop {
            let p = json(&ns, &["consumerProgress", "-g", &group]).await;
            if p["diffTotal"] == 0 && column_sum(&p["queues"], "Broker Offset") == N as i64 {
                break p;
            }
            assert!(Instant::now() < deadline, "lag never reached 0: {p}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        assert_eq!(column_sum(&progress["queues"], "Consumer Offset"), N as i64);
        let table = ok(&ns, &["consumerProgress", "-g", &group]).await;
        assert!(table.contains("Consume Diff Total: 0"), "{table}");
        assert!(table.starts_with("#Topic"), "{table}");

        // consumerProgress without -g: the group, online, with its lag.
        let groups = json(&ns, &["consumerProgress"]).await;
        let g = groups
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["Group"] == group.as_str())
            .unwrap_or_else(|| panic!("{group} missing: {groups}"));
        assert_eq!(g["Count"], "1", "{g}");
        assert_eq!(g["Diff Total"], "0", "{g}");
        assert_eq!(g["Model"], "Clustering", "{g}");

        // consumerConnection: the client, its language, the subscription.
        let conn = json(&ns, &["consumerConnection", "-g", &group]).await;
        assert_eq!(conn["connectionSet"].as_array().unwrap().len(), 1, "{conn}");
        assert_eq!(conn["connectionSet"][0]["language"], "RUST", "{conn}");
        assert_eq!(
            conn["subscriptionTable"][&topic]["subString"], "*",
            "{conn}"
        );
        let out = ok(&ns, &["consumerConnection", "-g", &group]).await;
        assert!(out.contains("Below is subscription:"), "{out}");

        // producerConnection: the producer, online; an unknown group is RocketMQ's error.
        let pg = p.producer_group().to_string();
        let conn = json(&ns, &["producerConnection", "-g", &pg, "-t", &topic]).await;
        assert_eq!(conn["connectionSet"].as_array().unwrap().len(), 1, "{conn}");
        assert_eq!(conn["connectionSet"][0]["language"], "RUST", "{conn}");
        let none = admin(&ns, &["producerConnection", "-g", "NoSuchPG", "-t", &topic]).await;
        assert!(!none.ok, "{}", none.stdout);
        assert!(
            none.stderr
                .contains("the producer group[NoSuchPG] not exist"),
            "{}",
            none.stderr
        );

        // topicList -c: the topic, its cluster and the group consuming it.
        let rows = json(&ns, &["topicList", "-c"]).await;
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["Topic"] == topic.as_str())
            .unwrap_or_else(|| panic!("{topic} missing: {rows}"));
        assert_eq!(row["Consumer Group"], group.as_str(), "{rows}");
        assert_eq!(row["Cluster Name"], "DefaultCluster", "{rows}");

        // brokerConsumeStats: every queue of each group with offsets. The consumer's group has
        // no lag; a second group, given an offset of 1 on queue 0 only, lags by N - 1.
        let idle = unique("AdminIdle");
        ok(&ns, &["updateSubGroup", "-g", &idle, "-b", &addr]).await;
        commit_offset(&addr, &idle, &topic, 0, 1).await;
        let raw = RemotingClient::connect(&addr).await.expect("connect");
        let stats = json(&ns, &["brokerConsumeStats", "-b", &addr]).await;
        assert_eq!(stats["diffTotal"], N as i64 - 1, "{stats}");
        let rows = |g: &str| -> Value {
            let all = stats["queues"].as_array().unwrap();
            Value::Array(all.iter().filter(|q| q["Group"] == g).cloned().collect())
        };
        // Listed as mqadmin lists them: the queues a group has consumed from (a last time).
        assert_eq!(rows(&group).as_array().unwrap().len(), 4, "{stats}");
        assert_eq!(rows(&idle).as_array().unwrap().len(), 1, "{stats}");
        assert_eq!(column_sum(&rows(&group), "Diff"), 0, "{stats}");
        assert_eq!(column_sum(&rows(&idle), "Consumer Offset"), 1, "{stats}");
        // -l: only queues lagging at least that much, all of them the idle group's.
        let lagging = json(&ns, &["brokerConsumeStats", "-b", &addr, "-l", "1"]).await;
        let lagging = lagging["queues"].as_array().unwrap();
        assert!(
            !lagging.is_empty() && lagging.iter().all(|q| q["Group"] == idle.as_str()),
            "{lagging:?}"
        );

        // statsAll -t: the topic's N puts of the last 24 hours, and per consuming group its
        // gets (at least N: the consumer read everything) and lag.
        let rows = json(&ns, &["statsAll", "-t", &topic]).await;
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["Consumer Group"] == group.as_str())
            .unwrap_or_else(|| panic!("{group} missing: {rows}"));
        assert_eq!(int(&row["InMsg24Hour"]), N as i64, "{rows}");
        assert!(int(&row["OutMsg24Hour"]) >= N as i64, "{rows}");
        assert_eq!(int(&row["Accumulation"]), 0, "{rows}");
        assert!(
            row["InTPS"].as_str().unwrap().parse::<f64>().is_ok(),
            "{rows}"
        );
        assert!(
            rows.as_array()
                .unwrap()
                .iter()
                .any(|r| r["Consumer Group"] == idle.as_str()),
            "{rows}"
        );
        // The item itself, and RocketMQ's answer for one that does not exist.
        let stats = |name: &str, key: &str| {
            RemotingCommand::new_request(rq::VIEW_BROKER_STATS_DATA)
                .with_ext("statsName", name)
                .with_ext("statsKey", key)
        };
        let r = raw
            .invoke(stats("TOPIC_PUT_NUMS", &topic), Duration::from_secs(5))
            .await
            .expect("VIEW_BROKER_STATS_DATA answered");
        assert_eq!(r.code, rc::SUCCESS);
        let v: Value = serde_json::from_slice(&r.body).expect("stats JSON");
        assert_eq!(v["statsDay"]["sum"], N as i64, "{v}");
        assert_eq!(v["statsHour"]["sum"], N as i64, "{v}");
        let day_sum = |name: &'static str, key: String| {
            let raw = &raw;
            async move {
                let r = raw
                    .invoke(stats(name, &key), Duration::from_secs(5))
                    .await
                    .expect("VIEW_BROKER_STATS_DATA answered");
                assert_eq!(r.code, rc::SUCCESS, "{name} {key}: {:?}", r.remark);
                let v: Value = serde_json::from_slice(&r.body).expect("stats JSON");
                int(&v["statsDay"]["sum"])
            }
        };
        let gets = day_sum("GROUP_GET_NUMS", format!("{topic}@{group}")).await;
        assert!(gets >= N as i64, "{gets}");
        let puts = day_sum("BROKER_PUT_NUMS", "DefaultCluster".into()).await;
        assert!(puts >= N as i64, "{puts}");
        let r = raw
            .invoke(
                stats("GROUP_GET_NUMS", "no-at-sign"),
                Duration::from_secs(5),
            )
            .await
            .expect("VIEW_BROKER_STATS_DATA answered");
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        let r = raw
            .invoke(
                stats("TOPIC_PUT_NUMS", "NoSuchTopic"),
                Duration::from_secs(5),
            )
            .await
            .expect("VIEW_BROKER_STATS_DATA answered");
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist")
        );

        // What a slave copies: the consumer offsets and the delay progress, as their files.
        let r = raw
            .invoke(
                RemotingCommand::new_request(rq::GET_ALL_CONSUMER_OFFSET),
                Duration::from_secs(5),
            )
            .await
            .expect("GET_ALL_CONSUMER_OFFSET answered");
        assert_eq!(r.code, rc::SUCCESS);
        let v: Value = parse_java_json(&r.body).expect("offsets JSON");
        let table = &v["offsetTable"][format!("{topic}@{group}")];
        let committed: i64 = table
            .as_object()
            .unwrap_or_else(|| panic!("{v}"))
            .values()
            .map(|o| o.as_i64().unwrap())
            .sum();
        assert_eq!(committed, N as i64, "{v}");
        let r = raw
            .invoke(
                RemotingCommand::new_request(rq::GET_ALL_DELAY_OFFSET),
                Duration::from_secs(5),
            )
            .await
            .expect("GET_ALL_DELAY_OFFSET answered");
        assert_eq!(r.code, rc::SUCCESS);
        let v: Value = parse_java_json(&r.body).expect("delay offsets JSON");
        assert!(v["offsetTable"].is_object(), "{v}");

        // resetOffsetByTime to the beginning: stored offsets go to 0 and the online consumer is
        // told, so it receives every message again.
        let before = seen(&got).len();
        let reset = json(
            &ns,
            &["resetOffsetByTime", "-g", &group, "-t", &topic, "-s", "0"],
        )
        .await;
        assert_eq!(reset.as_array().unwrap().len(), 4, "{reset}");
        assert_eq!(column_sum(&reset, "offset"), 0, "{reset}");
        assert!(
            wait_until(Duration::from_secs(30), || seen(&got).len() >= before + N).await,
            "after the reset the consumer got {} more, want {N}",
            seen(&got).len() - before
        );
        quietly("consumer shutdown", c.shutdown()).await;
        quietly("producer shutdown", p.shutdown()).await;

        // getBrokerConfig / updateBrokerConfig: a live key changes at once and is kept in the
        // runtime file; an invalid value is refused naming key, value and rule.
        let cfg = json(&ns, &["getBrokerConfig", "-b", &addr]).await;
        assert_eq!(cfg[&addr]["brokerName"], "broker-a", "{cfg}");
        let out = ok(
            &ns,
            &[
                "updateBrokerConfig",
                "-b",
                &addr,
                "-k",
                "waitTimeMillsInSendQueue",
                "-v",
                "321",
            ],
        )
        .await;
        assert!(out.contains("update broker config success"), "{out}");
        let cfg = json(&ns, &["getBrokerConfig", "-b", &addr]).await;
        assert_eq!(cfg[&addr]["waitTimeMillsInSendQueue"], "321", "{cfg}");
        let kept = std::fs::read_to_string(b.store_root.join("config/broker.runtime.properties"))
            .expect("runtime config file");
        assert!(kept.contains("waitTimeMillsInSendQueue=321"), "{kept}");
        let bad = admin(
            &ns,
            &[
                "updateBrokerConfig",
                "-b",
                &addr,
                "-k",
                "waitTimeMillsInSendQueue",
                "-v",
                "soon",
            ],
        )
        .await;
        assert!(!bad.ok, "an invalid value was accepted: {}", bad.stdout);
        assert!(
            bad.stderr.contains("INVALID_PARAMETER")
                && bad.stderr.contains("waitTimeMillsInSendQueue")
                && bad.stderr.contains("soon"),
            "{}",
            bad.stderr
        );
        let typo = admin(
            &ns,
            &[
                "updateBrokerConfig",
                "-b",
                &addr,
                "-k",
                "waitTimeMilsInSendQueue",
                "-v",
                "5",
            ],
        )
        .await;
        assert!(
            !typo.ok && typo.stderr.contains("waitTimeMilsInSendQueue"),
            "an unknown key was accepted: {} {}",
            typo.stdout,
            typo.stderr
        );
        let cfg = json(&ns, &["getBrokerConfig", "-b", &addr]).await;
        assert_eq!(cfg[&addr]["waitTimeMillsInSendQueue"], "321", "{cfg}");

        // deleteTopic: gone from the broker and the name server.
        let out = ok(&ns, &["deleteTopic", "-t", &topic, "-c", "DefaultCluster"]).await;
        assert!(out.contains("success"), "{out}");
        let list = ok(&ns, &["topicList"]).await;
        assert!(!list.lines().any(|l| l == topic), "{list}");
        let gone = admin(&ns, &["topicStatus", "-t", &topic]).await;
        assert!(
            !gone.ok && gone.stderr.contains("TOPIC_NOT_EXIST"),
            "{}",
            gone.stderr
        );
        assert!(
            !b.store_root.join("consumequeue").join(&topic).exists(),
            "the topic's ConsumeQueue directory is still there"
        );

        stop_broker(b);
    });
}

fn offset_msg_id(r: &rocketmq_model::result::SendResult) -> String {
    r.offset_msg_id.clone().expect("offset msgId")
}

fn got_of(m: &MessageExt) -> Got {
    got(m)
}

/// UPDATE_CONSUMER_OFFSET (15) straight to the broker.
async fn commit_offset(addr: &str, group: &str, topic: &str, queue: i32, offset: i64) {
    let raw = RemotingClient::connect(addr).await.expect("connect");
    let r = raw
        .invoke(
            commit_offset_request(group, topic, queue, offset),
            Duration::from_secs(5),
        )
        .await
        .expect("UPDATE_CONSUMER_OFFSET answered");
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
}

/// The commands #32 added, each as mqadmin 4.9.4 prints it (compared by hand against the real
/// mqadmin on the same broker).
#[test]
fn maintenance_and_name_server_commands() {
    run_bounded("admin-ops", || async {
        let (_dir, b) = broker(&[]);
        let ns = b.namesrv_addr.clone();
        let addr = b.broker_addr.clone();
        let topic = unique("OpsT");
        let src = unique("OpsG");
        let dest = unique("OpsD");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ok(&ns, &["clusterList"]).await.contains(&addr) {
            assert!(Instant::now() < deadline, "the broker never registered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ok(
            &ns,
            &[
                "updateTopic",
                "-t",
                &topic,
                "-b",
                &addr,
                "-r",
                "2",
                "-w",
                "2",
            ],
        )
        .await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !admin(&ns, &["topicRoute", "-t", &topic]).await.ok {
            assert!(Instant::now() < deadline, "{topic} never routed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // topicClusterList.
        assert_eq!(
            ok(&ns, &["topicClusterList", "-t", &topic]).await,
            "DefaultCluster\n"
        );

        // updateTopicPerm: from 6 to 4 on the broker, the route follows; the same perm again
        // sends nothing; -c sets it on every master.
        let out = ok(
            &ns,
            &["updateTopicPerm", "-t", &topic, "-p", "4", "-b", &addr],
        )
        .await;
        assert_eq!(
            out,
            format!("update topic perm from 6 to 4 in {addr} success.\nTopicConfig [topicName={topic}, readQueueNums=2, writeQueueNums=2, perm=R--, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false].\n")
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while json(&ns, &["topicRoute", "-t", &topic]).await["queueDatas"][0]["perm"] != 4 {
            assert!(Instant::now() < deadline, "the route never showed perm 4");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let out = ok(
            &ns,
            &["updateTopicPerm", "-t", &topic, "-p", "4", "-b", &addr],
        )
        .await;
        assert_eq!(out, "new perm equals to the old one!\n");
        let out = ok(
            &ns,
            &[
                "updateTopicPerm",
                "-t",
                &topic,
                "-p",
                "6",
                "-c",
                "DefaultCluster",
            ],
        )
        .await;
        assert_eq!(
            out,
            format!("update topic perm from 4 to 6 in {addr} success.\n")
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while json(&ns, &["topicRoute", "-t", &topic]).await["queueDatas"][0]["perm"] != 6 {
            assert!(Instant::now() < deadline, "the route never showed perm 6");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // wipeWritePerm / addWritePerm: the name server's count of the broker's topics.
        let out = ok(&ns, &["wipeWritePerm", "-b", "broker-a"]).await;
        assert!(
            out.starts_with(&format!(
                "wipe write perm of broker[broker-a] in name server[{ns}] OK, "
            )),
            "{out}"
        );
        let wiped = json(&ns, &["addWritePerm", "-b", "broker-a"]).await;
        assert!(int(&wiped[&ns]) >= 1, "{wiped}");
        assert_eq!(
            json(&ns, &["topicRoute", "-t", &topic]).await["queueDatas"][0]["perm"],
            6
        );

        // Three messages, two in queue 0.
        let rt = client_runtime("admin-ops");
        let mut p = producer(&rt, &ns).await;
        let mqs = wait_route(&mut p, &topic).await;
        let q0 = mqs
            .iter()
            .find(|q| q.queue_id() == 0)
            .expect("queue 0")
            .clone();
        for i in 0..2 {
            p.send_to_queue(msg(&topic, "A", &format!("q0-{i}")), q0.clone())
                .await
                .unwrap_or_else(|e| panic!("send {i}: {}", describe(&e)));
        }
        let q1 = mqs
            .iter()
            .find(|q| q.queue_id() == 1)
            .expect("queue 1")
            .clone();
        p.send_to_queue(msg(&topic, "A", "q1"), q1)
            .await
            .unwrap_or_else(|e| panic!("send: {}", describe(&e)));
        quietly("producer shutdown", p.shutdown()).await;

        // queryCq: queue 0's two units, mqadmin's layout.
        let deadline = Instant::now() + Duration::from_secs(20);
        let cq = loop {
            let cq = json(&ns, &["queryCq", "-t", &topic, "-q", "0", "-i", "0"]).await;
            if cq["maxQueueIndex"] == 2 {
                break cq;
            }
            assert!(Instant::now() < deadline, "dispatch never reached 2: {cq}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(cq["queueData"].as_array().unwrap().len(), 2, "{cq}");
        assert_eq!(cq["broker"], addr.as_str());
        let out = ok(
            &ns,
            &[
                "queryCq", "-t", &topic, "-q", "0", "-i", "1", "-c", "1", "-b", &addr,
            ],
        )
        .await;
        assert!(out.starts_with("Queue data: \nmax: 2, min: 0\n======================================\nidx: 1\nConsumeQueueData{physicOffset="), "{out}");
        assert!(
            out.contains("extendDataJson='null', bitMap='null', eval=false, msg='null'}"),
            "{out}"
        );

        // cloneGroupOffset: the source group's committed offsets, queue by queue.
        ok(&ns, &["updateSubGroup", "-g", &src, "-b", &addr]).await;
        let retry = format!("%RETRY%{src}");
        ok(
            &ns,
            &[
                "updateTopic",
                "-t",
                &retry,
                "-b",
                &addr,
                "-r",
                "1",
                "-w",
                "1",
            ],
        )
        .await;
        let dretry = format!("%RETRY%{dest}");
        ok(
            &ns,
            &[
                "updateTopic",
                "-t",
                &dretry,
                "-b",
                &addr,
                "-r",
                "1",
                "-w",
                "1",
            ],
        )
        .await;
        commit_offset(&addr, &src, &topic, 0, 1).await;
        commit_offset(&addr, &src, &topic, 1, 0).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !admin(&ns, &["topicRoute", "-t", &dretry]).await.ok {
            assert!(Instant::now() < deadline, "{dretry} never routed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let out = ok(
            &ns,
            &["cloneGroupOffset", "-s", &src, "-d", &dest, "-t", &topic],
        )
        .await;
        assert_eq!(
            out,
            format!(
                "clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]\n"
            )
        );
        let progress = json(&ns, &["consumerProgress", "-g", &dest]).await;
        assert_eq!(
            column_sum(&progress["queues"], "Consumer Offset"),
            1,
            "{progress}"
        );
        let none = admin(
            &ns,
            &[
                "cloneGroupOffset",
                "-s",
                "NoSuchG",
                "-d",
                &src,
                "-t",
                &topic,
            ],
        )
        .await;
        assert!(
            !none.ok && none.stderr.contains("TOPIC_NOT_EXIST"),
            "{}",
            none.stderr
        );

        // skipAccumulatedMessage: nobody online (206), so mqadmin's old method moves every
        // queue to its max offset and prints the rollback table.
        let out = ok(&ns, &["skipAccumulatedMessage", "-g", &dest, "-t", &topic]).await;
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("#brokerName  #queueId  #brokerOffset  #consumerOffset  #timestampOffset  #rollbackOffset"), "{out}");
        let cols: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(cols, ["broker-a", "0", "2", "1", "2", "2"], "{out}");
        let progress = json(&ns, &["consumerProgress", "-g", &dest]).await;
        assert_eq!(progress["diffTotal"], 0, "{progress}");

        // deleteSubGroup: -b prints the broker; -c also drops the %RETRY% and %DLQ% topics.
        let out = ok(&ns, &["deleteSubGroup", "-g", &src, "-b", &addr]).await;
        assert_eq!(
            out,
            format!("delete subscription group [{src}] from broker [{addr}] success.\n")
        );
        let out = ok(
            &ns,
            &[
                "deleteSubGroup",
                "-g",
                &dest,
                "-c",
                "DefaultCluster",
                "-r",
                "true",
            ],
        )
        .await;
        assert!(
            out.starts_with(&format!("delete subscription group [{dest}] from broker [{addr}] in cluster [DefaultCluster] success.\ndelete topic [{dretry}] from cluster [DefaultCluster] success.\n")),
            "{out}"
        );
        assert!(!ok(&ns, &["topicList"]).await.lines().any(|l| l == dretry));

        // cleanExpiredCQ / cleanUnusedTopic: mqadmin's bare `success`.
        assert_eq!(ok(&ns, &["cleanExpiredCQ", "-b", &addr]).await, "success");
        assert_eq!(ok(&ns, &["cleanExpiredCQ"]).await, "success");
        assert_eq!(
            ok(&ns, &["cleanUnusedTopic", "-c", "DefaultCluster"]).await,
            "success"
        );

        // getNamesrvConfig / updateNamesrvConfig.
        let cfg = json(&ns, &["getNamesrvConfig"]).await;
        assert_eq!(cfg[&ns]["orderMessageEnable"], "false", "{cfg}");
        let out = ok(&ns, &["getNamesrvConfig"]).await;
        assert!(
            out.starts_with(&format!("============{ns}============\n")),
            "{out}"
        );
        assert!(
            out.contains(&format!("{:<50}=  false\n", "orderMessageEnable")),
            "{out}"
        );
        let out = ok(
            &ns,
            &[
                "updateNamesrvConfig",
                "-k",
                "orderMessageEnable",
                "-v",
                "true",
            ],
        )
        .await;
        assert_eq!(
            out,
            format!("update name server config success![{ns}]\norderMessageEnable : true\n")
        );
        let cfg = json(&ns, &["getNamesrvConfig"]).await;
        assert_eq!(cfg[&ns]["orderMessageEnable"], "true", "{cfg}");

        // updateKvConfig / deleteKvConfig, seen through GET_KV_CONFIG (101).
        let ns_ns = unique("OpsNs");
        let out = ok(
            &ns,
            &["updateKvConfig", "-s", &ns_ns, "-k", "k1", "-v", "v1"],
        )
        .await;
        assert_eq!(out, "create or update kv config to namespace success.\n");
        let raw = RemotingClient::connect(&ns).await.expect("connect");
        let get = RemotingCommand::new_request(rq::GET_KV_CONFIG)
            .with_ext("namespace", &ns_ns)
            .with_ext("key", "k1");
        let r = raw
            .invoke(get.clone(), Duration::from_secs(5))
            .await
            .expect("answered");
        assert_eq!(r.ext("value"), Some("v1"), "{:?}", r.remark);
        let out = ok(&ns, &["deleteKvConfig", "-s", &ns_ns, "-k", "k1"]).await;
        assert_eq!(out, "delete kv config from namespace success.\n");
        let r = raw
            .invoke(get, Duration::from_secs(5))
            .await
            .expect("answered");
        assert_ne!(r.code, rc::SUCCESS, "k1 is still there");

        stop_broker(b);
    });
}
