//! The mqadmin 4.9.4 commands `actormq admin` gained for #32: group and topic upkeep
//! (`deleteSubGroup`, `updateTopicPerm`, `topicClusterList`, `cleanExpiredCQ`,
//! `cleanUnusedTopic`), ConsumeQueue inspection (`queryCq`) and name-server administration
//! (`getNamesrvConfig`, `updateNamesrvConfig`, `wipeWritePerm`, `addWritePerm`,
//! `updateKvConfig`, `deleteKvConfig`).
//!
//! Each function sends what mqadmin sends (the request codes are in each one's docs) and prints
//! mqadmin's lines; every one returns the JSON that `--json` prints.
//!
//! Name-server commands go to every address of `-n` in turn, as mqadmin's do: `wipeWritePerm`
//! and `addWritePerm` print a `Failed` line for a refusing one and go on (the command then exits
//! non-zero); the others stop at the first refusal.

use actormq_core::protocol::admin::QueryConsumeQueueResponseBody;
use actormq_core::protocol::codes::request_code as rq;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use clap::Args;
use serde_json::{json, Value};

use super::client::{AdminClient, AdminError, Result};
use super::group::consume_stats;
use super::topic::delete_topic;
use super::{json_mode, perm_str, targets, Outcome, Target};

fn quiet() -> bool {
    json_mode()
}

/// `key=value` lines of a Java properties text (comments and blank lines skipped).
pub fn properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// `deleteSubGroup` (207 on each broker; with -c also the group's %RETRY% and %DLQ% topics
/// from the cluster and the name server, 215 and 216, as mqadmin).
pub async fn delete_sub_group(
    admin: &AdminClient,
    group: &str,
    target: &Target,
    remove_offset: bool,
) -> anyhow::Result<Value> {
    let addrs = targets(admin, target).await?;
    let cmd = RemotingCommand::new_request(rq::DELETE_SUBSCRIPTIONGROUP).with_ext_fields(
        DeleteSubscriptionGroupRequestHeader {
            group_name: group.to_string(),
            remove_offset,
        }
        .to_ext_fields(),
    );
    for addr in &addrs {
        admin.call(addr, cmd.clone()).await?;
        if !quiet() {
            match (&target.broker, &target.cluster) {
                (None, Some(c)) => println!(
                    "delete subscription group [{group}] from broker [{addr}] in cluster [{c}] success."
                ),
                _ => println!("delete subscription group [{group}] from broker [{addr}] success."),
            }
        }
    }
    let mut topics = Vec::new();
    if let (None, Some(cluster)) = (&target.broker, &target.cluster) {
        for topic in [format!("%RETRY%{group}"), format!("%DLQ%{group}")] {
            // mqadmin prints a failure here and carries on.
            match delete_topic(admin, &addrs, cluster, &topic).await {
                Ok(()) => {
                    if !quiet() {
                        println!("delete topic [{topic}] from cluster [{cluster}] success.");
                        println!("delete topic [{topic}] from NameServer success.");
                    }
                    topics.push(topic);
                }
                Err(e) => eprintln!("{e}"),
            }
        }
    }
    Ok(
        json!({"group": group, "removeOffset": remove_offset, "brokers": addrs, "deletedTopics": topics}),
    )
}

/// `updateTopicPerm` (105, then 17 with the route's queue numbers and the new perm; with -b
/// nothing is sent when the broker's perm already equals it).
pub async fn update_topic_perm(
    admin: &AdminClient,
    topic: &str,
    perm: i32,
    target: &Target,
) -> anyhow::Result<Value> {
    let route = admin.route(topic).await?;
    let Some(first) = route.queue_datas.first() else {
        anyhow::bail!("topic {topic} has no queues in its route");
    };
    let h = CreateTopicRequestHeader {
        topic: topic.to_string(),
        default_topic: "TBW102".into(),
        read_queue_nums: first.read_queue_nums,
        write_queue_nums: first.write_queue_nums,
        perm,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(first.topic_sys_flag),
        order: false,
        attributes: None,
    };
    let config = format!(
        "TopicConfig [topicName={topic}, readQueueNums={}, writeQueueNums={}, perm={}, topicFilterType=SINGLE_TAG, topicSysFlag={}, order=false]",
        first.read_queue_nums,
        first.write_queue_nums,
        perm_str(perm),
        first.topic_sys_flag
    );
    let cmd = RemotingCommand::new_request(rq::UPDATE_AND_CREATE_TOPIC)
        .with_ext_fields(h.to_ext_fields());
    let mut done = Vec::new();
    if let Some(addr) = &target.broker {
        let name = route
            .broker_datas
            .iter()
            .find(|b| b.broker_addrs.get(&0) == Some(addr))
            .map(|b| b.broker_name.clone());
        let Some(name) = name else {
            anyhow::bail!("updateTopicPerm error broker not exit or broker is not master!.");
        };
        let old = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == name)
            .map_or(0, |q| q.perm);
        if old == perm {
            if !quiet() {
                println!("new perm equals to the old one!");
            }
            return Ok(json!({"topic": topic, "perm": perm, "oldPerm": old, "brokers": done}));
        }
        admin.call(addr, cmd).await?;
        if !quiet() {
            println!("update topic perm from {old} to {perm} in {addr} success.");
            println!("{config}.");
        }
        done.push(json!({"broker": addr, "oldPerm": old}));
    } else {
        for addr in targets(admin, target).await? {
            admin.call(&addr, cmd.clone()).await?;
            if !quiet() {
                println!(
                    "update topic perm from {} to {perm} in {addr} success.",
                    first.perm
                );
            }
            done.push(json!({"broker": addr, "oldPerm": first.perm}));
        }
    }
    Ok(json!({"topic": topic, "perm": perm, "brokers": done}))
}

/// `topicClusterList` (106 and 105): the clusters holding the first broker of the topic's route.
pub async fn topic_cluster_list(admin: &AdminClient, topic: &str) -> anyhow::Result<Value> {
    let info = admin.cluster_info().await?;
    let route = admin.route(topic).await?;
    let Some(first) = route.broker_datas.first() else {
        anyhow::bail!("topic {topic} has no brokers in its route");
    };
    let clusters: Vec<&String> = info
        .cluster_addr_table
        .iter()
        .filter(|(_, names)| names.contains(&first.broker_name))
        .map(|(c, _)| c)
        .collect();
    if !quiet() {
        for c in &clusters {
            println!("{c}");
        }
    }
    Ok(json!(clusters))
}

/// `getNamesrvConfig` (319 to each name server of -n).
pub async fn get_namesrv_config(admin: &AdminClient) -> anyhow::Result<Value> {
    let mut all = serde_json::Map::new();
    for ns in admin.namesrv_addrs() {
        let resp = admin
            .call(ns, RemotingCommand::new_request(rq::GET_NAMESRV_CONFIG))
            .await?;
        let kv = properties(&String::from_utf8_lossy(&resp.body));
        if !quiet() {
            println!("============{ns}============");
            for (k, v) in &kv {
                println!("{k:<50}=  {v}");
            }
        }
        all.insert(
            ns.clone(),
            Value::Object(kv.into_iter().map(|(k, v)| (k, Value::String(v))).collect()),
        );
    }
    Ok(Value::Object(all))
}

/// `updateNamesrvConfig` (318 with a `key=value` properties body, to each name server of -n).
pub async fn update_namesrv_config(
    admin: &AdminClient,
    key: &str,
    value: &str,
) -> anyhow::Result<Value> {
    let cmd = RemotingCommand::new_request(rq::UPDATE_NAMESRV_CONFIG)
        .with_body(format!("{key}={value}\n").into_bytes());
    for ns in admin.namesrv_addrs() {
        admin.call(ns, cmd.clone()).await?;
    }
    let list = admin.namesrv_addrs().join(", ");
    if !quiet() {
        println!("update name server config success![{list}]");
        println!("{key} : {value}");
    }
    Ok(json!({"key": key, "value": value, "namesrv": admin.namesrv_addrs()}))
}

/// `wipeWritePerm` (205) and `addWritePerm` (327) of a broker name, on each name server of -n;
/// the count of topics changed, from the response header.
pub async fn write_perm(admin: &AdminClient, broker: &str, add: bool) -> anyhow::Result<Value> {
    let (code, field, verb) = if add {
        (rq::ADD_WRITE_PERM_OF_BROKER, "addTopicCount", "add")
    } else {
        (rq::WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount", "wipe")
    };
    let cmd = RemotingCommand::new_request(code).with_ext("brokerName", broker);
    let mut out = serde_json::Map::new();
    let mut failed = 0;
    for ns in admin.namesrv_addrs() {
        match admin.call(ns, cmd.clone()).await {
            Ok(resp) => {
                let n: i64 = resp.ext(field).and_then(|v| v.parse().ok()).unwrap_or(0);
                if !quiet() {
                    println!("{verb} write perm of broker[{broker}] in name server[{ns}] OK, {n}");
                }
                out.insert(ns.clone(), json!(n));
            }
            Err(e) => {
                failed += 1;
                if !quiet() {
                    println!("{verb} write perm of broker[{broker}] in name server[{ns}] Failed");
                }
                eprintln!("{e}");
                out.insert(ns.clone(), json!({"error": e.to_string()}));
            }
        }
    }
    if failed > 0 {
        if quiet() {
            println!("{}", serde_json::to_string_pretty(&Value::Object(out))?);
        }
        anyhow::bail!("{verb} write perm of broker[{broker}] failed on {failed} name server(s)");
    }
    Ok(Value::Object(out))
}

/// `updateKvConfig` (100) and `deleteKvConfig` (102), to each name server of -n.
pub async fn kv_config(
    admin: &AdminClient,
    namespace: &str,
    key: &str,
    value: Option<&str>,
) -> anyhow::Result<Value> {
    let cmd = match value {
        Some(v) => RemotingCommand::new_request(rq::PUT_KV_CONFIG)
            .with_ext("namespace", namespace)
            .with_ext("key", key)
            .with_ext("value", v),
        None => RemotingCommand::new_request(rq::DELETE_KV_CONFIG)
            .with_ext("namespace", namespace)
            .with_ext("key", key),
    };
    for ns in admin.namesrv_addrs() {
        admin.call(ns, cmd.clone()).await?;
    }
    if !quiet() {
        match value {
            Some(_) => println!("create or update kv config to namespace success."),
            None => println!("delete kv config from namespace success."),
        }
    }
    Ok(
        json!({"namespace": namespace, "key": key, "value": value, "namesrv": admin.namesrv_addrs()}),
    )
}

/// Where `cleanExpiredCQ` / `cleanUnusedTopic` go: `-b`, else every broker (masters and
/// slaves) of `-c`, else of every cluster — mqadmin's rule.
pub async fn every_broker(
    admin: &AdminClient,
    broker: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<String>> {
    if let Some(b) = broker {
        return Ok(vec![b.to_string()]);
    }
    let info = admin.cluster_info().await?;
    let mut out = Vec::new();
    for (c, names) in &info.cluster_addr_table {
        if cluster.is_some_and(|x| x != c) {
            continue;
        }
        for n in names {
            if let Some(bd) = info.broker_addr_table.get(n) {
                out.extend(bd.broker_addrs.values().cloned());
            }
        }
    }
    if let Some(c) = cluster.filter(|c| !info.cluster_addr_table.contains_key(*c)) {
        return Err(AdminError::Other(format!(
            "cluster {c} is not known to the name server"
        )));
    }
    Ok(out)
}

/// `cleanExpiredCQ` (306) and `cleanUnusedTopic` (316) on each broker; mqadmin prints
/// `success` (no newline) when the last one answered SUCCESS.
pub async fn clean(
    admin: &AdminClient,
    code: i32,
    broker: Option<&str>,
    cluster: Option<&str>,
) -> anyhow::Result<Value> {
    let addrs = every_broker(admin, broker, cluster).await?;
    for addr in &addrs {
        admin.call(addr, RemotingCommand::new_request(code)).await?;
    }
    if !quiet() {
        print!("{}", if addrs.is_empty() { "false" } else { "success" });
    }
    Ok(json!({"success": !addrs.is_empty(), "brokers": addrs}))
}

/// `queryCq` (321; without -b to the master of the route's first broker, as mqadmin).
#[allow(clippy::too_many_arguments)]
pub async fn query_cq(
    admin: &AdminClient,
    topic: &str,
    queue: i32,
    index: i64,
    count: i32,
    broker: Option<&str>,
    group: Option<&str>,
) -> anyhow::Result<Value> {
    let addr = match broker.filter(|b| !b.is_empty()) {
        Some(b) => b.to_string(),
        None => {
            let route = admin.route(topic).await?;
            route
                .broker_datas
                .first()
                .and_then(|b| b.broker_addrs.get(&0).cloned())
                .ok_or_else(|| anyhow::anyhow!("No topic route data!"))?
        }
    };
    let cmd = RemotingCommand::new_request(rq::QUERY_CONSUME_QUEUE).with_ext_fields(
        QueryConsumeQueueRequestHeader {
            topic: topic.to_string(),
            queue_id: queue,
            index,
            count,
            consumer_group: group.map(str::to_string),
        }
        .to_ext_fields(),
    );
    let resp = admin.call(&addr, cmd).await?;
    let body: QueryConsumeQueueResponseBody =
        AdminClient::body(&resp, &addr, "QUERY_CONSUME_QUEUE")?;
    if !quiet() {
        let sep = "======================================";
        if let Some(s) = &body.subscription_data {
            println!("Subscription data: \n{}", serde_json::to_string_pretty(s)?);
            println!("{sep}");
        }
        if let Some(f) = &body.filter_data {
            println!("Filter data: \n{f}");
            println!("{sep}");
        }
        println!(
            "Queue data: \nmax: {}, min: {}",
            body.max_queue_index, body.min_queue_index
        );
        println!("{sep}");
        let null = |s: &Option<String>| s.clone().unwrap_or_else(|| "null".into());
        for (i, d) in body.queue_data.iter().flatten().enumerate() {
            println!("idx: {}", index + i as i64);
            println!(
                "ConsumeQueueData{{physicOffset={}, physicSize={}, tagsCode={}, extendDataJson='{}', bitMap='{}', eval={}, msg='{}'}}",
                d.physic_offset,
                d.physic_size,
                d.tags_code,
                null(&d.extend_data_json),
                null(&d.bit_map),
                d.eval,
                null(&d.msg)
            );
            println!("{sep}");
        }
    }
    let mut v = serde_json::to_value(&body)?;
    v["broker"] = json!(addr);
    v["index"] = json!(index);
    Ok(v)
}

/// `cloneGroupOffset` (208 for the source group on the brokers of its %RETRY% topic, 105 for
/// the topic, then 15 for each queue with a committed offset), as mqadmin: every queue of the
/// source group's consume stats is copied to the destination group. `-o` is accepted and, as in
/// mqadmin 4.9.4, changes nothing.
pub async fn clone_group_offset(
    admin: &AdminClient,
    src: &str,
    dest: &str,
    topic: &str,
) -> anyhow::Result<Value> {
    let stats = consume_stats(admin, src, None).await?;
    if stats.offset_table.is_empty() {
        anyhow::bail!("CODE: 206 (CONSUMER_NOT_ONLINE) Not found the consumer group consume stats, because return offset table is empty, maybe the consumer not consume any message");
    }
    let mut cloned = Vec::new();
    {
        let route = admin.route(topic).await?;
        for (mq, w) in &stats.offset_table {
            let Some(addr) = route
                .broker_datas
                .iter()
                .find(|b| b.broker_name == mq.broker_name)
                .and_then(|b| {
                    b.broker_addrs
                        .get(&0)
                        .or_else(|| b.broker_addrs.values().next())
                })
            else {
                continue;
            };
            if w.consumer_offset < 0 {
                continue;
            }
            let cmd = RemotingCommand::new_request(rq::UPDATE_CONSUMER_OFFSET).with_ext_fields(
                UpdateConsumerOffsetRequestHeader {
                    consumer_group: dest.to_string(),
                    topic: mq.topic.clone(),
                    queue_id: mq.queue_id,
                    commit_offset: w.consumer_offset,
                }
                .to_ext_fields(),
            );
            admin.call(addr, cmd).await?;
            cloned.push(json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": w.consumer_offset}));
        }
    }
    if !quiet() {
        println!("clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]");
    }
    Ok(json!({"srcGroup": src, "destGroup": dest, "topic": topic, "offsets": cloned}))
}

// The commands' options, each with the `run` that hands them to the function above.

// `deleteSubGroup`.
#[derive(Args, Debug, Clone)]
pub struct DeleteSubGroup {
    #[arg(short = 'g', long = "groupName")]
    group: String,
    #[command(flatten)]
    target: Target,
    /// Also delete the group's consumer offsets.
    #[arg(short = 'r', long = "removeOffset", action = clap::ArgAction::Set, default_value_t = false)]
    remove_offset: bool,
}

impl DeleteSubGroup {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        let v = delete_sub_group(admin, &self.group, &self.target, self.remove_offset).await?;
        Ok(Some(v))
    }
}

// `updateTopicPerm`.
#[derive(Args, Debug, Clone)]
pub struct UpdateTopicPerm {
    #[arg(short = 't', long)]
    topic: String,
    /// 2 = write, 4 = read, 6 = read and write.
    #[arg(short = 'p', long)]
    perm: i32,
    #[command(flatten)]
    target: Target,
}

impl UpdateTopicPerm {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        Ok(Some(
            update_topic_perm(admin, &self.topic, self.perm, &self.target).await?,
        ))
    }
}

// `topicClusterList`.
#[derive(Args, Debug, Clone)]
pub struct TopicClusterList {
    #[arg(short = 't', long)]
    topic: String,
}

impl TopicClusterList {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        Ok(Some(topic_cluster_list(admin, &self.topic).await?))
    }
}

// `updateNamesrvConfig`.
#[derive(Args, Debug, Clone)]
pub struct UpdateNamesrvConfig {
    #[arg(short = 'k', long)]
    key: String,
    #[arg(short = 'v', long)]
    value: String,
}

impl UpdateNamesrvConfig {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        Ok(Some(
            update_namesrv_config(admin, &self.key, &self.value).await?,
        ))
    }
}

// `queryCq`.
#[derive(Args, Debug, Clone)]
pub struct QueryCq {
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'q', long = "queue")]
    queue: i32,
    /// First queue index.
    #[arg(short = 'i', long)]
    index: i64,
    #[arg(short = 'c', long, default_value_t = 10)]
    count: i32,
    /// Broker address (default: the master of the route's first broker).
    #[arg(short = 'b', long)]
    broker: Option<String>,
    /// Consumer group (its subscription and filter are shown).
    #[arg(short = 'g', long = "consumer")]
    group: Option<String>,
}

impl QueryCq {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        let (broker, group) = (self.broker.as_deref(), self.group.as_deref());
        let v = query_cq(
            admin,
            &self.topic,
            self.queue,
            self.index,
            self.count,
            broker,
            group,
        );
        Ok(Some(v.await?))
    }
}

/// `cleanExpiredCQ`'s request.
pub const CLEAN_EXPIRED_CQ: i32 = rq::CLEAN_EXPIRED_CONSUMEQUEUE;
/// `cleanUnusedTopic`'s request.
pub const CLEAN_UNUSED_TOPIC: i32 = rq::CLEAN_UNUSED_TOPIC;

// `cleanExpiredCQ` and `cleanUnusedTopic`.
#[derive(Args, Debug, Clone)]
pub struct Clean {
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

impl Clean {
    /// Sends `code` ([`CLEAN_EXPIRED_CQ`] or [`CLEAN_UNUSED_TOPIC`]) to each broker.
    pub async fn run(self, admin: &AdminClient, code: i32) -> Outcome {
        let (broker, cluster) = (self.broker.as_deref(), self.cluster.as_deref());
        Ok(Some(clean(admin, code, broker, cluster).await?))
    }
}

// `wipeWritePerm` and `addWritePerm`.
#[derive(Args, Debug, Clone)]
pub struct WritePerm {
    #[arg(short = 'b', long = "brokerName")]
    broker: String,
}

impl WritePerm {
    /// Gives write permission back when `add`, else takes it.
    pub async fn run(self, admin: &AdminClient, add: bool) -> Outcome {
        Ok(Some(write_perm(admin, &self.broker, add).await?))
    }
}

// `updateKvConfig`.
#[derive(Args, Debug, Clone)]
pub struct UpdateKvConfig {
    #[arg(short = 's', long)]
    namespace: String,
    #[arg(short = 'k', long)]
    key: String,
    #[arg(short = 'v', long)]
    value: String,
}

impl UpdateKvConfig {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        let (namespace, key) = (&self.namespace, &self.key);
        Ok(Some(
            kv_config(admin, namespace, key, Some(&self.value)).await?,
        ))
    }
}

// `deleteKvConfig`.
#[derive(Args, Debug, Clone)]
pub struct DeleteKvConfig {
    #[arg(short = 's', long)]
    namespace: String,
    #[arg(short = 'k', long)]
    key: String,
}

impl DeleteKvConfig {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        Ok(Some(
            kv_config(admin, &self.namespace, &self.key, None).await?,
        ))
    }
}

// `cloneGroupOffset`.
#[derive(Args, Debug, Clone)]
pub struct CloneGroupOffset {
    #[arg(short = 's', long = "srcGroup")]
    src: String,
    #[arg(short = 'd', long = "destGroup")]
    dest: String,
    #[arg(short = 't', long)]
    topic: String,
    /// Accepted as mqadmin 4.9.4 accepts it; it changes nothing there either.
    #[arg(short = 'o', long)]
    offline: Option<String>,
}

impl CloneGroupOffset {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        Ok(Some(
            clone_group_offset(admin, &self.src, &self.dest, &self.topic).await?,
        ))
    }
}
