//! mqadmin 4.9.4's consumer-status commands: `consumerStatus` (a consumer's own report, relayed
//! by a broker: GET_CONSUMER_CONNECTION_LIST 203, then GET_CONSUMER_RUNNING_INFO 307 per
//! client) and `getConsumerStatus` (each client's offsets: INVOKE_BROKER_TO_GET_CONSUMER_STATUS
//! 223 to the first broker of the topic's route).
//!
//! Printed as mqadmin prints them (tools/…/command/consumer/ConsumerStatusSubCommand.java,
//! offset/GetConsumerStatusCommand.java, `ConsumerRunningInfo.formatString`); like mqadmin,
//! `consumerStatus` without `-i` writes each client's report to `<now>/<clientId>` and lists the
//! files. Two differences the data imposes: the consumer's properties are listed sorted (Java
//! prints its `Properties` hashtable order), and times in a queue's detail are local
//! `yyyyMMddHHmmssSSS` as Java's `UtilAll.timeMillisToHumanString`.

use std::fmt::Write as _;

use actormq_core::protocol::admin::ConsumerConnection;
use actormq_core::protocol::codes::request_code as rq;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::consumer_status::{
    ConsumerRunningInfo, GetConsumerStatusBody, ProcessQueueInfo,
};
use actormq_core::protocol::header::{
    GetConsumerConnectionListRequestHeader, GetConsumerRunningInfoRequestHeader,
};
use actormq_core::protocol::version::version_desc;
use clap::Args;
use serde_json::{json, Value};

use super::client::{AdminClient, AdminError};
use super::group::{connection_of, group_brokers};
use super::Outcome;

/// Java's `UtilAll.timeMillisToHumanString`: local `yyyyMMddHHmmssSSS`.
fn human_time(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t
            .with_timezone(&chrono::Local)
            .format("%Y%m%d%H%M%S%3f")
            .to_string(),
        None => ms.to_string(),
    }
}

/// `ProcessQueueInfo.toString`.
fn process_queue_text(p: &ProcessQueueInfo) -> String {
    format!(
        "ProcessQueueInfo [commitOffset={}, cachedMsgMinOffset={}, cachedMsgMaxOffset={}, \
         cachedMsgCount={}, cachedMsgSizeInMiB={}, transactionMsgMinOffset={}, \
         transactionMsgMaxOffset={}, transactionMsgCount={}, locked={}, tryUnlockTimes={}, \
         lastLockTimestamp={}, droped={}, lastPullTimestamp={}, lastConsumeTimestamp={}]",
        p.commit_offset,
        p.cached_msg_min_offset,
        p.cached_msg_max_offset,
        p.cached_msg_count,
        p.cached_msg_size_in_mib,
        p.transaction_msg_min_offset,
        p.transaction_msg_max_offset,
        p.transaction_msg_count,
        p.locked,
        p.try_unlock_times,
        human_time(p.last_lock_timestamp),
        p.droped,
        human_time(p.last_pull_timestamp),
        human_time(p.last_consume_timestamp)
    )
}

/// `ConsumerRunningInfo.formatString`.
pub fn format_running_info(info: &ConsumerRunningInfo) -> String {
    let mut s = String::from("#Consumer Properties#\n");
    for (k, v) in &info.properties {
        let _ = writeln!(s, "{k:<40}: {v}");
    }
    s.push_str("\n\n#Consumer Subscription#\n");
    for (i, sd) in info.subscription_set.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:03} Topic: {:<40} ClassFilter: {:<8} SubExpression: {}",
            i + 1,
            sd.topic,
            sd.class_filter_mode,
            sd.sub_string
        );
    }
    s.push_str("\n\n#Consumer Offset#\n");
    let _ = writeln!(
        s,
        "{:<64}  {:<32}  {:<4}  {:<20}",
        "#Topic", "#Broker Name", "#QID", "#Consumer Offset"
    );
    for (mq, pq) in &info.mq_table {
        let _ = writeln!(
            s,
            "{:<32}  {:<32}  {:<4}  {:<20}",
            mq.topic, mq.broker_name, mq.queue_id, pq.commit_offset
        );
    }
    s.push_str("\n\n#Consumer MQ Detail#\n");
    let _ = writeln!(
        s,
        "{:<64}  {:<32}  {:<4}  {:<20}",
        "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo"
    );
    for (mq, pq) in &info.mq_table {
        let _ = writeln!(
            s,
            "{:<64}  {:<32}  {:<4}  {}",
            mq.topic,
            mq.broker_name,
            mq.queue_id,
            process_queue_text(pq)
        );
    }
    push_rates(&mut s, info);
    if let Some(jstack) = &info.jstack {
        s.push_str("\n\n#Consumer jstack#\n");
        s.push_str(jstack);
    }
    s
}

fn push_rates(s: &mut String, info: &ConsumerRunningInfo) {
    s.push_str("\n\n#Consumer RT&TPS#\n");
    let _ = writeln!(
        s,
        "{:<64}  {:>14} {:>14} {:>14} {:>14} {:>18} {:>25}",
        "#Topic",
        "#Pull RT",
        "#Pull TPS",
        "#Consume RT",
        "#ConsumeOK TPS",
        "#ConsumeFailed TPS",
        "#ConsumeFailedMsgsInHour"
    );
    for (topic, c) in &info.status_table {
        let _ = writeln!(
            s,
            "{topic:<32}  {:>14.2} {:>14.2} {:>14.2} {:>14.2} {:>18.2} {:>25}",
            c.pull_rt,
            c.pull_tps,
            c.consume_rt,
            c.consume_ok_tps,
            c.consume_failed_tps,
            c.consume_failed_msgs
        );
    }
}

/// A push consumer (`PROP_CONSUME_TYPE` CONSUME_PASSIVELY)?
fn is_push(info: &ConsumerRunningInfo) -> bool {
    info.property("PROP_CONSUME_TYPE") == Some("CONSUME_PASSIVELY")
}

/// `ConsumerRunningInfo.analyzeSubscription`: push consumers started over 2 minutes ago must
/// all hold the same, non-empty subscription.
fn same_subscription(infos: &[(String, ConsumerRunningInfo)], now_ms: i64) -> bool {
    let Some((_, first)) = infos.first() else {
        return true;
    };
    let started = first
        .property("PROP_CONSUMER_START_TIMESTAMP")
        .and_then(|t| t.parse::<i64>().ok())
        .unwrap_or(now_ms);
    if !is_push(first) || now_ms - started <= 2 * 60 * 1000 {
        return true;
    }
    infos
        .iter()
        .all(|(_, i)| i.subscription_set == first.subscription_set)
        && !first.subscription_set.is_empty()
}

/// `ConsumerRunningInfo.analyzeProcessQueue`: a push consumer's queues that look stuck.
fn process_queue_warnings(client_id: &str, info: &ConsumerRunningInfo, now_ms: i64) -> String {
    let mut s = String::new();
    if !is_push(info) {
        return s;
    }
    let orderly = info
        .property("PROP_CONSUMEORDERLY")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    for (mq, pq) in &info.mq_table {
        let mq = format!(
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            mq.topic, mq.broker_name, mq.queue_id
        );
        if orderly && !pq.locked {
            let ms = now_ms - pq.last_lock_timestamp;
            let _ = writeln!(s, "{client_id} {mq} can't lock for a while, {ms}ms");
        } else if orderly && pq.droped && pq.try_unlock_times > 0 {
            let n = pq.try_unlock_times;
            let _ = writeln!(s, "{client_id} {mq} unlock {n} times, still failed");
        } else if !orderly {
            let diff = now_ms - pq.last_consume_timestamp;
            if diff > 60_000 && pq.cached_msg_count > 0 {
                let _ = writeln!(
                    s,
                    "{client_id} {mq} can't consume for a while, maybe blocked, {diff}ms"
                );
            }
        }
    }
    s
}

/// GET_CONSUMER_RUNNING_INFO (307) for one client, sent to the first broker of the group's
/// %RETRY% route, as mqadmin's `getConsumerRunningInfo`.
async fn running_info(
    admin: &AdminClient,
    group: &str,
    client_id: &str,
    jstack: bool,
) -> anyhow::Result<ConsumerRunningInfo> {
    let Some((_, addr)) = group_brokers(admin, group).await?.into_iter().next() else {
        anyhow::bail!("no broker serves the %RETRY% topic of group {group}");
    };
    let cmd = RemotingCommand::new_request(rq::GET_CONSUMER_RUNNING_INFO).with_ext_fields(
        GetConsumerRunningInfoRequestHeader {
            consumer_group: group.to_string(),
            client_id: client_id.to_string(),
            jstack_enable: jstack,
        }
        .to_ext_fields(),
    );
    let resp = admin.call(&addr, cmd).await?;
    ConsumerRunningInfo::parse(&resp.body).map_err(|why| {
        AdminError::Body {
            addr,
            request: "GET_CONSUMER_RUNNING_INFO",
            why,
        }
        .into()
    })
}

/// The group's connections, from `broker` (`-b`) or from a broker of its %RETRY% route.
async fn connections(
    admin: &AdminClient,
    group: &str,
    broker: Option<&str>,
) -> anyhow::Result<ConsumerConnection> {
    let found = match broker {
        Some(addr) => {
            let cmd = RemotingCommand::new_request(rq::GET_CONSUMER_CONNECTION_LIST)
                .with_ext_fields(
                    GetConsumerConnectionListRequestHeader {
                        consumer_group: group.into(),
                    }
                    .to_ext_fields(),
                );
            let resp = admin.call(addr, cmd).await?;
            Some(AdminClient::body(
                &resp,
                addr,
                "GET_CONSUMER_CONNECTION_LIST",
            )?)
        }
        None => connection_of(admin, group).await?,
    };
    found.ok_or_else(|| anyhow::anyhow!("the consumer group[{group}] not online"))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `consumerStatus -g [-i] [-b] [-s]`.
pub async fn consumer_status(
    admin: &AdminClient,
    group: &str,
    client_id: Option<&str>,
    broker: Option<&str>,
    jstack: bool,
    quiet: bool,
) -> anyhow::Result<Value> {
    let cc = connections(admin, group, broker).await?;
    if let Some(id) = client_id {
        let info = running_info(admin, group, id, jstack).await?;
        let text = format_running_info(&info);
        if !quiet {
            print!("{text}");
        }
        return Ok(json!({ "clientId": id, "report": text }));
    }
    let now = now_ms();
    if !quiet {
        println!(
            "{:<10} {:<40} {:<20} #ConsumerRunningInfoFile",
            "#Index", "#ClientId", "#Version"
        );
    }
    let mut infos: Vec<(String, ConsumerRunningInfo)> = Vec::new();
    let mut rows = Vec::new();
    for conn in &cc.connection_set {
        let info = match running_info(admin, group, &conn.client_id, jstack).await {
            Ok(info) => info,
            Err(e) => {
                eprintln!("{}: {e:#}", conn.client_id);
                continue;
            }
        };
        let path = format!("{now}/{}", conn.client_id);
        write_report(&path, &format_running_info(&info));
        let version = version_desc(conn.version);
        if !quiet {
            println!(
                "{:<10} {:<40} {:<20} {path}",
                infos.len() + 1,
                conn.client_id,
                version
            );
        }
        rows.push(json!({"clientId": conn.client_id, "version": version, "file": path}));
        infos.push((conn.client_id.clone(), info));
    }
    let analysis = analyze(&mut infos, now);
    if !quiet {
        print!("{analysis}");
    }
    Ok(json!({ "clients": rows, "analysis": analysis }))
}

/// What mqadmin prints after the table (clients in clientId order, as its TreeMap).
fn analyze(infos: &mut [(String, ConsumerRunningInfo)], now: i64) -> String {
    if infos.is_empty() {
        return String::new();
    }
    infos.sort_by(|a, b| a.0.cmp(&b.0));
    if !same_subscription(infos, now) {
        return "\n\nWARN: Different subscription in the same group of consumer!!!".into();
    }
    // 4.9.4's analyzeRebalance always says OK.
    let mut s =
        String::from("\n\nSame subscription in the same group of consumer\n\nRebalance OK\n");
    for (id, info) in infos.iter() {
        s.push_str(&process_queue_warnings(id, info, now));
    }
    s
}

/// mqadmin's `MixAll.string2FileNotSafe`: a failure is reported, not fatal.
fn write_report(path: &str, text: &str) {
    let p = std::path::Path::new(path);
    let written = p
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(p, text));
    if let Err(e) = written {
        eprintln!("cannot write {path}: {e}");
    }
}

/// `getConsumerStatus -g -t [-i]`: INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) to the first
/// broker of the topic's route.
pub async fn get_consumer_status(
    admin: &AdminClient,
    group: &str,
    topic: &str,
    origin_client_id: &str,
    quiet: bool,
) -> anyhow::Result<Value> {
    let route = admin.route(topic).await?;
    let addr = route
        .broker_datas
        .first()
        .and_then(|b| b.broker_addrs.values().next().cloned());
    let table = match addr {
        Some(addr) => {
            let cmd = RemotingCommand::new_request(rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS)
                .with_ext("topic", topic)
                .with_ext("group", group)
                .with_ext("clientAddr", origin_client_id);
            let resp = admin.call(&addr, cmd).await?;
            GetConsumerStatusBody::parse(&resp.body)
                .map_err(|why| AdminError::Body {
                    addr,
                    request: "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
                    why,
                })?
                .consumer_table
        }
        None => Default::default(),
    };
    if !quiet {
        println!("get consumer status from client. group={group}, topic={topic}, originClientId={origin_client_id}");
        println!(
            "{:<50}  {:<15}  {:<15}  {:<20}",
            "#clientId", "#brokerName", "#queueId", "#offset"
        );
        for (id, queues) in &table {
            for (mq, offset) in queues {
                println!(
                    "{id:<50}  {:<15}  {:<15}  {offset:<20}",
                    mq.broker_name, mq.queue_id
                );
            }
        }
    }
    let rows: Vec<Value> = table
        .iter()
        .flat_map(|(id, qs)| {
            qs.iter().map(move |(mq, o)| {
                json!({"clientId": id, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o})
            })
        })
        .collect();
    Ok(Value::Array(rows))
}

// `consumerStatus`.
#[derive(Args, Debug, Clone)]
pub struct ConsumerStatus {
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
    #[arg(short = 'i', long = "clientId")]
    client_id: Option<String>,
    /// Broker to ask for the group's connections.
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Ask the consumer for its thread dump.
    #[arg(short = 's', long = "jstack")]
    jstack: bool,
}

impl ConsumerStatus {
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let (client_id, broker) = (self.client_id.as_deref(), self.broker.as_deref());
        let v = consumer_status(admin, &self.group, client_id, broker, self.jstack, json);
        Ok(Some(v.await?))
    }
}

// `getConsumerStatus`.
#[derive(Args, Debug, Clone)]
pub struct GetConsumerStatus {
    #[arg(short = 'g', long = "group")]
    group: String,
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'i', long = "originClientId", default_value = "")]
    origin_client_id: String,
}

impl GetConsumerStatus {
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let origin = &self.origin_client_id;
        let v = get_consumer_status(admin, &self.group, &self.topic, origin, json);
        Ok(Some(v.await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_has_java_s_sections() {
        let body = br#"{"mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"commitOffset":5}},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{"T":{"pullTPS":1.0}},"subscriptionSet":[{"subString":"*","topic":"T"}]}"#;
        let info = ConsumerRunningInfo::parse(body).unwrap();
        let text = format_running_info(&info);
        assert!(text.starts_with("#Consumer Properties#\nPROP_CONSUME_TYPE"));
        assert!(text.contains("001 Topic: T"));
        assert!(text.contains(&format!("{:<32}  {:<32}  {:<4}  {:<20}\n", "T", "b", 0, 5)));
        assert!(text.contains("           1.00"));
    }
}
