//! mqadmin's topic commands: `topicList` (206; with -c 106, 105, then 300), `topicRoute` (105),
//! `topicStatus` (105, then 202 per broker), `updateTopic` (17), `deleteTopic` (215, 216) and
//! `statsAll` (206, 105, 315, 300, 208).
//!
//! Each command is its clap options and a `run` that prints mqadmin's lines (or nothing with
//! `--json`) and returns the JSON document.

use actormq_core::protocol::admin::{BrokerStatsData, GroupList, TopicStatsTable};
use actormq_core::protocol::body::TopicList as TopicListBody;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use clap::Args;
use serde_json::json;

use super::client::{AdminClient, Result};
use super::group::consume_stats;
use super::show::{time_str, Table};
use super::{json_mode, perm_str, print_or_return, to_each, Outcome, Target};

// `topicList`.
#[derive(Args, Debug, Clone)]
pub struct TopicList {
    #[arg(short = 'c', long = "clusterModel")]
    cluster_model: bool,
}

impl TopicList {
    /// One topic a line, or with -c the cluster and consuming groups of each.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let topics = topic_list(admin, !self.cluster_model).await?;
        if self.cluster_model {
            topic_consumers(admin, &topics, json).await
        } else {
            Ok(Some(json!(topics)))
        }
    }
}

/// Every topic the name server knows, sorted; printed one a line when `print` (and not --json).
pub(super) async fn topic_list(admin: &AdminClient, print: bool) -> anyhow::Result<Vec<String>> {
    let resp = admin
        .call_namesrv(RemotingCommand::new_request(
            rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        ))
        .await?;
    let list: TopicListBody = AdminClient::body(&resp, "name server", "GET_ALL_TOPIC_LIST")?;
    let mut topics = list.topic_list;
    topics.sort();
    if print && !json_mode() {
        for t in &topics {
            println!("{t}");
        }
    }
    Ok(topics)
}

/// Retry and DLQ topics, which mqadmin's listings leave out.
fn is_group_topic(topic: &str) -> bool {
    topic.starts_with(actormq_core::meta::RETRY_GROUP_TOPIC_PREFIX)
        || topic.starts_with(actormq_core::meta::DLQ_GROUP_TOPIC_PREFIX)
}

/// `topicList -c`: each topic's cluster and the groups consuming it, a row per group (one with
/// no group when none does), as mqadmin prints it. Retry and DLQ topics are left out, as there.
async fn topic_consumers(admin: &AdminClient, topics: &[String], json: bool) -> Outcome {
    let clusters = admin.cluster_info().await?;
    let cluster_of = |broker: &str| {
        clusters
            .cluster_addr_table
            .iter()
            .find(|(_, names)| names.iter().any(|n| n == broker))
            .map_or_else(String::new, |(c, _)| c.clone())
    };
    let mut t = Table::new(&["Cluster Name", "Topic", "Consumer Group"]);
    for topic in topics {
        if is_group_topic(topic) {
            continue;
        }
        // As mqadmin: one topic that cannot be read (deleted meanwhile, a broker down) is
        // reported and skipped, not the end of the listing.
        let (name, groups) = match first_broker_groups(admin, topic).await {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("{topic}: {e}; skipped");
                continue;
            }
        };
        let cluster = cluster_of(&name);
        if groups.group_list.is_empty() {
            t.push(vec![cluster.clone(), topic.clone(), String::new()]);
        }
        for g in groups.group_list {
            t.push(vec![cluster.clone(), topic.clone(), g]);
        }
    }
    if !json {
        print!("{}", t.render());
    }
    Ok(Some(t.to_json()))
}

/// The first master of `topic` (its broker name) and the groups consuming the topic there;
/// `None` when the topic has no master.
async fn first_broker_groups(
    admin: &AdminClient,
    topic: &str,
) -> Result<Option<(String, GroupList)>> {
    let masters = admin.topic_masters(topic).await?;
    match masters.first() {
        Some((name, addr)) => Ok(Some((name.clone(), consumed_by(admin, addr, topic).await?))),
        None => Ok(None),
    }
}

/// QUERY_TOPIC_CONSUME_BY_WHO of `topic` on the broker at `addr`.
async fn consumed_by(admin: &AdminClient, addr: &str, topic: &str) -> Result<GroupList> {
    let cmd = RemotingCommand::new_request(rq::QUERY_TOPIC_CONSUME_BY_WHO).with_ext_fields(
        QueryTopicConsumeByWhoRequestHeader {
            topic: topic.to_string(),
        }
        .to_ext_fields(),
    );
    let resp = admin.call(addr, cmd).await?;
    AdminClient::body(&resp, addr, "QUERY_TOPIC_CONSUME_BY_WHO")
}

// `topicRoute`.
#[derive(Args, Debug, Clone)]
pub struct TopicRoute {
    #[arg(short = 't', long)]
    topic: String,
}

impl TopicRoute {
    /// The route as pretty JSON, the same with or without `--json`.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let r = admin.route(&self.topic).await?;
        let v = serde_json::to_value(&r)?;
        if !json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Ok(Some(v))
    }
}

// `topicStatus`.
#[derive(Args, Debug, Clone)]
pub struct TopicStatus {
    #[arg(short = 't', long)]
    topic: String,
}

impl TopicStatus {
    /// A row per queue of each master of the topic.
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        let topic = &self.topic;
        let mut t = Table::new(&[
            "Broker Name",
            "QID",
            "Min Offset",
            "Max Offset",
            "Last Updated",
        ]);
        for (name, addr) in admin.topic_masters(topic).await? {
            let cmd = RemotingCommand::new_request(rq::GET_TOPIC_STATS_INFO).with_ext_fields(
                GetTopicStatsInfoRequestHeader {
                    topic: topic.into(),
                }
                .to_ext_fields(),
            );
            let resp = admin.call(&addr, cmd).await?;
            let mut stats = TopicStatsTable::parse(&resp.body).map_err(anyhow::Error::msg)?;
            stats.offset_table.sort_by(|a, b| a.0.cmp(&b.0));
            for (mq, o) in stats.offset_table {
                t.push(vec![
                    name.clone(),
                    mq.queue_id.to_string(),
                    o.min_offset.to_string(),
                    o.max_offset.to_string(),
                    time_str(o.last_update_timestamp),
                ]);
            }
        }
        print_or_return(t)
    }
}

// `updateTopic`.
#[derive(Args, Debug, Clone)]
pub struct UpdateTopic {
    #[arg(short = 't', long)]
    topic: String,
    #[command(flatten)]
    target: Target,
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    read_queues: i32,
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    write_queues: i32,
    /// 2 = write, 4 = read, 6 = read and write.
    #[arg(short = 'p', long, default_value_t = 6)]
    perm: i32,
    #[arg(short = 'o', long, default_value_t = false, action = clap::ArgAction::Set)]
    order: bool,
}

impl UpdateTopic {
    /// UPDATE_AND_CREATE_TOPIC to each target broker, then mqadmin's `TopicConfig [...]` line.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let Self {
            topic,
            target,
            read_queues,
            write_queues,
            perm,
            order,
        } = self;
        let h = CreateTopicRequestHeader {
            topic: topic.clone(),
            default_topic: "TBW102".into(),
            read_queue_nums: read_queues,
            write_queue_nums: write_queues,
            perm,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: Some(0),
            order,
            attributes: None,
        };
        let cmd = RemotingCommand::new_request(rq::UPDATE_AND_CREATE_TOPIC)
            .with_ext_fields(h.to_ext_fields());
        let done = to_each(admin, &target, cmd, "create topic to").await?;
        if !json {
            println!("TopicConfig [topicName={topic}, readQueueNums={read_queues}, writeQueueNums={write_queues}, perm={}, order={order}]", perm_str(perm));
        }
        Ok(Some(
            json!({"topic": topic, "brokers": done, "readQueueNums": read_queues, "writeQueueNums": write_queues, "perm": perm, "order": order}),
        ))
    }
}

// `deleteTopic`.
#[derive(Args, Debug, Clone)]
pub struct DeleteTopic {
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
}

impl DeleteTopic {
    /// From every master of the cluster, then from the name servers.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let (topic, cluster) = (&self.topic, &self.cluster);
        let masters = admin.cluster_masters(cluster).await?;
        let addrs: Vec<String> = masters.into_iter().map(|m| m.1).collect();
        delete_topic(admin, &addrs, cluster, topic).await?;
        if !json {
            println!("delete topic [{topic}] from cluster [{cluster}] success.");
            println!("delete topic [{topic}] from NameServer success.");
        }
        Ok(Some(
            json!({"topic": topic, "cluster": cluster, "brokers": addrs}),
        ))
    }
}

/// DELETE_TOPIC_IN_BROKER (215) on each of `addrs`, then DELETE_TOPIC_IN_NAMESRV (216) for
/// `cluster`; stops at the first refusal.
pub(super) async fn delete_topic(
    admin: &AdminClient,
    addrs: &[String],
    cluster: &str,
    topic: &str,
) -> Result<()> {
    for addr in addrs {
        let cmd = RemotingCommand::new_request(rq::DELETE_TOPIC_IN_BROKER).with_ext_fields(
            DeleteTopicRequestHeader {
                topic: topic.to_string(),
            }
            .to_ext_fields(),
        );
        admin.call(addr, cmd).await?;
    }
    let cmd = RemotingCommand::new_request(rq::DELETE_TOPIC_IN_NAMESRV).with_ext_fields(
        DeleteTopicFromNamesrvRequestHeader {
            topic: topic.to_string(),
            cluster_name: Some(cluster.to_string()),
        }
        .to_ext_fields(),
    );
    admin.call_namesrv(cmd).await?;
    Ok(())
}

// `statsAll`.
#[derive(Args, Debug, Clone)]
pub struct StatsAll {
    #[arg(short = 'a', long = "activeTopic")]
    active: bool,
    #[arg(short = 't', long)]
    topic: Option<String>,
}

impl StatsAll {
    /// A row per topic and consuming group (one with `NO_CONSUMER` when none), summed over the
    /// topic's masters. Retry and DLQ topics are left out, as in mqadmin.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let topics = match self.topic {
            Some(t) => vec![t],
            None => topic_list(admin, false).await?,
        };
        let mut t = Table::new(&[
            "Topic",
            "Consumer Group",
            "Accumulation",
            "InTPS",
            "OutTPS",
            "InMsg24Hour",
            "OutMsg24Hour",
        ]);
        for topic in &topics {
            if is_group_topic(topic) {
                continue;
            }
            // As mqadmin: a topic that cannot be read is reported and skipped.
            match topic_stats_rows(admin, topic, self.active).await {
                Ok(rows) => rows.into_iter().for_each(|r| t.push(r)),
                Err(e) => eprintln!("{topic}: {e}; skipped"),
            }
        }
        if !json {
            print!("{}", t.render());
        }
        Ok(Some(t.to_json()))
    }
}

/// One VIEW_BROKER_STATS_DATA item: (TPS over the last minute, messages over the last 24 hours
/// — the day's sum, or the hour's or minute's when the longer one is empty, mqadmin's
/// `compute24HourSum`). An item that does not exist yet counts as nothing, as in mqadmin.
async fn stats_item(admin: &AdminClient, addr: &str, name: &str, key: &str) -> Result<(f64, i64)> {
    let cmd = RemotingCommand::new_request(rq::VIEW_BROKER_STATS_DATA).with_ext_fields(
        ViewBrokerStatsDataRequestHeader {
            stats_name: name.into(),
            stats_key: key.into(),
        }
        .to_ext_fields(),
    );
    let resp = match admin.call(addr, cmd).await {
        Ok(r) => r,
        Err(e) if e.code() == Some(rc::SYSTEM_ERROR) => return Ok((0.0, 0)),
        Err(e) => return Err(e),
    };
    let d: BrokerStatsData = AdminClient::body(&resp, addr, "VIEW_BROKER_STATS_DATA")?;
    let day = [d.stats_day.sum, d.stats_hour.sum, d.stats_minute.sum]
        .into_iter()
        .find(|s| *s != 0)
        .unwrap_or(0);
    Ok((d.stats_minute.tps, day))
}

/// `statsAll`'s rows of one topic.
async fn topic_stats_rows(
    admin: &AdminClient,
    topic: &str,
    active: bool,
) -> Result<Vec<Vec<String>>> {
    let masters = admin.topic_masters(topic).await?;
    let (mut in_tps, mut in_day) = (0.0, 0);
    let mut groups = std::collections::BTreeSet::new();
    for (_, addr) in &masters {
        let (tps, day) = stats_item(admin, addr, "TOPIC_PUT_NUMS", topic).await?;
        in_tps += tps;
        in_day += day;
        groups.extend(consumed_by(admin, addr, topic).await?.group_list);
    }
    let mut rows = Vec::new();
    if groups.is_empty() {
        if !active || in_day > 0 {
            rows.push(vec![
                topic.to_string(),
                String::new(),
                "0".into(),
                format!("{in_tps:.2}"),
                "0.00".into(),
                in_day.to_string(),
                "NO_CONSUMER".into(),
            ]);
        }
        return Ok(rows);
    }
    for group in groups {
        let (mut out_tps, mut out_day) = (0.0, 0);
        for (_, addr) in &masters {
            let key = format!("{topic}@{group}");
            let (tps, day) = stats_item(admin, addr, "GROUP_GET_NUMS", &key).await?;
            out_tps += tps;
            out_day += day;
        }
        // As mqadmin: a group whose stats cannot be read (no retry topic yet) shows 0.
        let lag = consume_stats(admin, &group, Some(topic))
            .await
            .map_or(0, |s| s.total_diff().max(0));
        if !active || in_day > 0 || out_day > 0 {
            rows.push(vec![
                topic.to_string(),
                group,
                lag.to_string(),
                format!("{in_tps:.2}"),
                format!("{out_tps:.2}"),
                in_day.to_string(),
                out_day.to_string(),
            ]);
        }
    }
    Ok(rows)
}
