//! mqadmin's group commands: `updateSubGroup` (200), `consumerProgress` (208, 203),
//! `consumerConnection` (203), `producerConnection` (105, 204), `brokerConsumeStats` (317),
//! `resetOffsetByTime` and `skipAccumulatedMessage` (222, or mqadmin's old method when no
//! consumer is online).
//!
//! A group lives on the brokers that serve its retry topic ([`group_brokers`], mqadmin's way).
//! Each command is its clap options and a `run` that prints mqadmin's lines (or nothing with
//! `--json`) and returns the JSON document.

use actormq_core::meta::SubscriptionGroupConfig;
use actormq_core::protocol::admin::{
    ConsumeStats, ConsumeStatsList, ConsumerConnection, ProducerConnection, ResetOffsetBody,
};
use actormq_core::protocol::body::TopicList;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use clap::Args;
use serde_json::json;

use super::client::{AdminClient, AdminError, Result};
use super::message::bound;
use super::show::{parse_time, print_table, time_str, Table};
use super::{to_each, Outcome, Target};

// `updateSubGroup`.
#[derive(Args, Debug, Clone)]
pub struct UpdateSubGroup {
    #[arg(short = 'g', long = "groupName")]
    group: String,
    #[command(flatten)]
    target: Target,
    #[arg(short = 's', long = "consumeEnable", action = clap::ArgAction::Set, default_value_t = true)]
    consume_enable: bool,
    #[arg(short = 'm', long = "consumeFromMinEnable", action = clap::ArgAction::Set, default_value_t = true)]
    consume_from_min: bool,
    #[arg(short = 'd', long = "consumeBroadcastEnable", action = clap::ArgAction::Set, default_value_t = true)]
    broadcast: bool,
    #[arg(short = 'q', long = "retryQueueNums", default_value_t = 1)]
    retry_queues: u32,
    #[arg(short = 'r', long = "retryMaxTimes", default_value_t = 16)]
    retry_max_times: i32,
    #[arg(short = 'i', long = "brokerId", default_value_t = 0)]
    broker_id: u64,
    #[arg(
        short = 'w',
        long = "whichBrokerWhenConsumeSlowly",
        default_value_t = 1
    )]
    slow_broker: u64,
}

impl UpdateSubGroup {
    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP to each target broker, then the group's config as
    /// JSON (mqadmin prints its `toString`).
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let g = SubscriptionGroupConfig {
            group_name: self.group.clone(),
            consume_enable: self.consume_enable,
            consume_from_min_enable: self.consume_from_min,
            consume_broadcast_enable: self.broadcast,
            retry_queue_nums: self.retry_queues,
            retry_max_times: self.retry_max_times,
            broker_id: self.broker_id,
            which_broker_when_consume_slowly: self.slow_broker,
            notify_consumer_ids_changed_enable: true,
        };
        let body = serde_json::to_vec(&g)?;
        let cmd =
            RemotingCommand::new_request(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(body);
        let done = to_each(admin, &self.target, cmd, "create subscription group to").await?;
        if !json {
            println!("{}", serde_json::to_string(&g)?);
        }
        Ok(Some(json!({"group": g, "brokers": done})))
    }
}

// `consumerProgress`.
#[derive(Args, Debug, Clone)]
pub struct ConsumerProgress {
    #[arg(short = 'g', long = "groupName")]
    group: Option<String>,
    #[arg(short = 't', long)]
    topic: Option<String>,
}

impl ConsumerProgress {
    /// Per queue of `-g`'s group, or a line per group without it.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        match self.group {
            Some(g) => consumer_progress(admin, &g, self.topic.as_deref(), json).await,
            None => group_summary(admin, json).await,
        }
    }
}

/// The brokers a group lives on: those serving its retry topic (mqadmin's way).
pub(super) async fn group_brokers(
    admin: &AdminClient,
    group: &str,
) -> Result<Vec<(String, String)>> {
    admin
        .topic_masters(&actormq_core::meta::retry_topic(group))
        .await
}

/// GET_CONSUME_STATS of `group` (on `topic`, or all of its topics) from each of its brokers,
/// merged and sorted by queue.
pub(super) async fn consume_stats(
    admin: &AdminClient,
    group: &str,
    topic: Option<&str>,
) -> Result<ConsumeStats> {
    let mut all = ConsumeStats::default();
    for (_, addr) in group_brokers(admin, group).await? {
        let cmd = RemotingCommand::new_request(rq::GET_CONSUME_STATS).with_ext_fields(
            GetConsumeStatsRequestHeader {
                consumer_group: group.into(),
                topic: topic.map(str::to_string),
            }
            .to_ext_fields(),
        );
        let resp = admin.call(&addr, cmd).await?;
        let s = ConsumeStats::parse(&resp.body).map_err(|why| AdminError::Body {
            addr: addr.clone(),
            request: "GET_CONSUME_STATS",
            why,
        })?;
        all.consume_tps += s.consume_tps;
        all.offset_table.extend(s.offset_table);
    }
    all.offset_table.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(all)
}

/// `consumerProgress -g`: a row per queue, then the group's TPS and total diff.
async fn consumer_progress(
    admin: &AdminClient,
    group: &str,
    topic: Option<&str>,
    json: bool,
) -> Outcome {
    let stats = consume_stats(admin, group, topic).await?;
    let mut t = Table::new(&[
        "Topic",
        "Broker Name",
        "QID",
        "Broker Offset",
        "Consumer Offset",
        "Diff",
        "LastTime",
    ]);
    for (mq, o) in &stats.offset_table {
        t.push(vec![
            mq.topic.clone(),
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            o.broker_offset.to_string(),
            o.consumer_offset.to_string(),
            (o.broker_offset - o.consumer_offset).to_string(),
            time_str(o.last_timestamp),
        ]);
    }
    if json {
        return Ok(Some(json!({
            "group": group,
            "consumeTps": stats.consume_tps,
            "diffTotal": stats.total_diff(),
            "queues": t.to_json(),
        })));
    }
    print!("{}", t.render());
    println!();
    println!("Consume TPS: {:.2}", stats.consume_tps);
    println!("Consume Diff Total: {}", stats.total_diff());
    Ok(None)
}

/// The group's connections from the first of its brokers that has it online; `None` when
/// none has.
pub(super) async fn connection_of(
    admin: &AdminClient,
    group: &str,
) -> Result<Option<ConsumerConnection>> {
    for (_, addr) in group_brokers(admin, group).await? {
        let cmd = RemotingCommand::new_request(rq::GET_CONSUMER_CONNECTION_LIST).with_ext_fields(
            GetConsumerConnectionListRequestHeader {
                consumer_group: group.into(),
            }
            .to_ext_fields(),
        );
        match admin.call(&addr, cmd).await {
            Ok(resp) => {
                return AdminClient::body(&resp, &addr, "GET_CONSUMER_CONNECTION_LIST").map(Some)
            }
            Err(e) if e.code() == Some(rc::CONSUMER_NOT_ONLINE) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// `consumerProgress` without -g: a row per group (every `%RETRY%` topic names one).
async fn group_summary(admin: &AdminClient, json: bool) -> Outcome {
    let resp = admin
        .call_namesrv(RemotingCommand::new_request(
            rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        ))
        .await?;
    let list: TopicList = AdminClient::body(&resp, "name server", "GET_ALL_TOPIC_LIST")?;
    let mut groups: Vec<String> = list
        .topic_list
        .iter()
        .filter_map(|t| t.strip_prefix("%RETRY%"))
        .map(str::to_string)
        .collect();
    groups.sort();
    let mut t = Table::new(&[
        "Group",
        "Count",
        "Version",
        "Type",
        "Model",
        "TPS",
        "Diff Total",
    ]);
    for g in groups {
        t.push(group_row(admin, g).await?);
    }
    if !json {
        print!("{}", t.render());
    }
    Ok(Some(t.to_json()))
}

/// One row of [`group_summary`]: the group's clients (or OFFLINE), TPS and total diff.
async fn group_row(admin: &AdminClient, g: String) -> Result<Vec<String>> {
    let conn = connection_of(admin, &g).await?;
    let stats = consume_stats(admin, &g, None).await?;
    let (count, version, kind, model) = match &conn {
        Some(c) => (
            c.connection_set.len().to_string(),
            c.connection_set
                .iter()
                .map(|x| x.version)
                .min()
                .map_or(String::new(), |v| v.to_string()),
            format!("{:?}", c.consume_type),
            format!("{:?}", c.message_model),
        ),
        None => ("0".into(), "OFFLINE".into(), String::new(), String::new()),
    };
    Ok(vec![
        g,
        count,
        version,
        kind,
        model,
        format!("{:.2}", stats.consume_tps),
        stats.total_diff().to_string(),
    ])
}

/// mqadmin's table of a group's connections.
fn connection_table(set: &[actormq_core::protocol::admin::Connection]) -> Table {
    let mut t = Table::new(&["", "ClientId", "ClientAddr", "Language", "Version"]);
    for (i, x) in set.iter().enumerate() {
        t.push(vec![
            (i + 1).to_string(),
            x.client_id.clone(),
            x.client_addr.clone(),
            x.language.clone(),
            x.version.to_string(),
        ]);
    }
    t
}

// `consumerConnection`.
#[derive(Args, Debug, Clone)]
pub struct ConsumerConnectionArgs {
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
}

impl ConsumerConnectionArgs {
    /// The group's clients, its subscriptions and how it consumes; an offline group is an
    /// error.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let group = &self.group;
        let Some(c) = connection_of(admin, group).await? else {
            anyhow::bail!("the consumer group[{group}] not online");
        };
        if json {
            return Ok(Some(serde_json::to_value(&c)?));
        }
        print!("{}", connection_table(&c.connection_set).render());
        println!();
        println!("Below is subscription:");
        let mut s = Table::new(&["", "Topic", "SubExpression"]);
        for (i, (topic, sd)) in c.subscription_table.iter().enumerate() {
            s.push(vec![
                (i + 1).to_string(),
                topic.clone(),
                sd.sub_string.clone(),
            ]);
        }
        print!("{}", s.render());
        println!();
        println!("ConsumeType: {:?}", c.consume_type);
        println!("MessageModel: {:?}", c.message_model);
        println!("ConsumeFromWhere: {:?}", c.consume_from_where);
        Ok(None)
    }
}

// `producerConnection`.
#[derive(Args, Debug, Clone)]
pub struct ProducerConnectionArgs {
    #[arg(short = 'g', long = "producerGroup")]
    group: String,
    #[arg(short = 't', long)]
    topic: String,
}

impl ProducerConnectionArgs {
    /// Asked of the first master of the topic, as mqadmin does.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let topic = &self.topic;
        let masters = admin.topic_masters(topic).await?;
        let Some((_, addr)) = masters.first() else {
            anyhow::bail!("topic {topic} has no broker");
        };
        let cmd = RemotingCommand::new_request(rq::GET_PRODUCER_CONNECTION_LIST).with_ext_fields(
            GetProducerConnectionListRequestHeader {
                producer_group: self.group.clone(),
            }
            .to_ext_fields(),
        );
        let resp = admin.call(addr, cmd).await?;
        let p: ProducerConnection = AdminClient::body(&resp, addr, "GET_PRODUCER_CONNECTION_LIST")?;
        if json {
            return Ok(Some(serde_json::to_value(&p)?));
        }
        print!("{}", connection_table(&p.connection_set).render());
        Ok(None)
    }
}

// `brokerConsumeStats`.
#[derive(Args, Debug, Clone)]
pub struct BrokerConsumeStats {
    #[arg(short = 'b', long = "brokerAddr")]
    broker: String,
    /// Only ordered topics.
    #[arg(short = 'o', long = "order", action = clap::ArgAction::Set, default_value_t = false)]
    order: bool,
    /// Lowest diff of a queue to list.
    #[arg(short = 'l', long = "level", default_value_t = 0)]
    level: i64,
}

impl BrokerConsumeStats {
    /// Every queue of every group on one broker whose diff is at least `level`, and the
    /// broker's total diff.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let addr = &self.broker;
        let cmd = RemotingCommand::new_request(rq::GET_BROKER_CONSUME_STATS).with_ext_fields(
            GetConsumeStatsInBrokerHeader {
                is_order: self.order,
            }
            .to_ext_fields(),
        );
        let resp = admin.call(addr, cmd).await?;
        let list = ConsumeStatsList::parse(&resp.body).map_err(|why| AdminError::Body {
            addr: addr.to_string(),
            request: "GET_BROKER_CONSUME_STATS",
            why,
        })?;
        let t = lag_table(&list, self.level);
        if json {
            return Ok(Some(json!({
                "brokerAddr": list.broker_addr,
                "diffTotal": list.total_diff,
                "queues": t.to_json(),
            })));
        }
        print!("{}", t.render());
        println!();
        println!("Diff Total: {}", list.total_diff);
        Ok(None)
    }
}

/// `brokerConsumeStats`'s rows: the queues a group has consumed from (a last time) whose diff
/// is at least `level`.
fn lag_table(list: &ConsumeStatsList, level: i64) -> Table {
    let mut t = Table::new(&[
        "Topic",
        "Group",
        "Broker Name",
        "QID",
        "Broker Offset",
        "Consumer Offset",
        "Diff",
        "LastTime",
    ]);
    for (group, stats) in &list.consume_stats_list {
        for s in stats {
            for (mq, o) in &s.offset_table {
                let diff = o.broker_offset - o.consumer_offset;
                // mqadmin lists only queues the group has consumed from (a last time).
                if diff < level || o.last_timestamp <= 0 {
                    continue;
                }
                t.push(vec![
                    mq.topic.clone(),
                    group.clone(),
                    mq.broker_name.clone(),
                    mq.queue_id.to_string(),
                    o.broker_offset.to_string(),
                    o.consumer_offset.to_string(),
                    diff.to_string(),
                    time_str(o.last_timestamp),
                ]);
            }
        }
    }
    t
}

// `resetOffsetByTime`.
#[derive(Args, Debug, Clone)]
pub struct ResetOffsetByTime {
    #[arg(short = 'g', long)]
    group: String,
    #[arg(short = 't', long)]
    topic: String,
    /// `now`, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS.
    #[arg(short = 's', long)]
    timestamp: String,
    /// Also move forwards past the committed offset.
    #[arg(short = 'f', long, action = clap::ArgAction::Set, default_value_t = true)]
    force: bool,
}

impl ResetOffsetByTime {
    /// mqadmin's `rollback consumer offset …` line, then the new offsets.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let Self {
            group,
            topic,
            timestamp,
            force,
        } = self;
        let ts = parse_time(&timestamp).map_err(anyhow::Error::msg)?;
        let t = reset_or_rollback(admin, &group, &topic, ts, force).await?;
        if !json {
            println!("rollback consumer offset by specified group[{group}], topic[{topic}], force[{force}], timestamp(string)[{timestamp}], timestamp(long)[{ts}]");
            print_table(&t, false);
        }
        Ok(Some(t.to_json()))
    }
}

// `skipAccumulatedMessage`.
#[derive(Args, Debug, Clone)]
pub struct SkipAccumulatedMessage {
    #[arg(short = 'g', long)]
    group: String,
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'f', long, action = clap::ArgAction::Set, default_value_t = true)]
    force: bool,
}

impl SkipAccumulatedMessage {
    /// A reset to timestamp -1: each queue's max offset.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let t = reset_or_rollback(admin, &self.group, &self.topic, -1, self.force).await?;
        if !json {
            print_table(&t, false);
        }
        Ok(Some(t.to_json()))
    }
}

/// [`reset_offset`], or when no consumer of the group is online (206) mqadmin's old method,
/// [`reset_offset_old`], with its rollback table.
async fn reset_or_rollback(
    admin: &AdminClient,
    group: &str,
    topic: &str,
    ts: i64,
    force: bool,
) -> anyhow::Result<Table> {
    match reset_offset(admin, group, topic, ts, force).await {
        Err(e)
            if e.downcast_ref::<AdminError>().and_then(AdminError::code)
                == Some(rc::CONSUMER_NOT_ONLINE) =>
        {
            reset_offset_old(admin, group, topic, ts, force).await
        }
        other => other,
    }
}

/// INVOKE_BROKER_TO_RESET_OFFSET (222) on every master of the topic: the group's new offsets
/// (`resetOffsetByTime`, and `skipAccumulatedMessage` with timestamp -1: the max offsets).
async fn reset_offset(
    admin: &AdminClient,
    group: &str,
    topic: &str,
    ts: i64,
    force: bool,
) -> anyhow::Result<Table> {
    let mut t = Table::new(&["brokerName", "queueId", "offset"]);
    for (_, addr) in admin.topic_masters(topic).await? {
        let h = ResetOffsetRequestHeader {
            topic: topic.to_string(),
            group: group.to_string(),
            queue_id: -1,
            offset: None,
            timestamp: ts,
            is_force: force,
        };
        let cmd = RemotingCommand::new_request(rq::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext_fields(h.to_ext_fields());
        let resp = admin.call(&addr, cmd).await?;
        let body = ResetOffsetBody::parse(&resp.body).map_err(anyhow::Error::msg)?;
        let mut rows = body.offset_table;
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        for (mq, off) in rows {
            t.push(vec![
                mq.broker_name,
                mq.queue_id.to_string(),
                off.to_string(),
            ]);
        }
    }
    Ok(t)
}

/// mqadmin's `resetOffsetByTimestampOld`, its fallback when the broker answers
/// CONSUMER_NOT_ONLINE (206) to 222: on each broker of the topic, the group's queues of the
/// topic (208; without any, the topic's queues from 202 with min offset as consumer offset) move
/// to the max offset (`ts` -1, 30) or the offset of `ts` (29) by 15 — only backwards unless
/// `force`. The rollback table mqadmin prints.
pub async fn reset_offset_old(
    admin: &AdminClient,
    group: &str,
    topic: &str,
    ts: i64,
    force: bool,
) -> anyhow::Result<Table> {
    use actormq_core::protocol::admin::{ConsumeStats, TopicStatsTable};
    let route = admin.route(topic).await?;
    let read_queues = route.queue_datas.last().map_or(0, |q| q.read_queue_nums);
    let mut t = Table::new(&[
        "brokerName",
        "queueId",
        "brokerOffset",
        "consumerOffset",
        "timestampOffset",
        "rollbackOffset",
    ]);
    for bd in &route.broker_datas {
        let Some(addr) = bd
            .broker_addrs
            .get(&0)
            .or_else(|| bd.broker_addrs.values().next())
        else {
            continue;
        };
        let cmd = RemotingCommand::new_request(rq::GET_CONSUME_STATS).with_ext_fields(
            GetConsumeStatsRequestHeader {
                consumer_group: group.to_string(),
                topic: None,
            }
            .to_ext_fields(),
        );
        let resp = admin.call(addr, cmd).await?;
        let stats = ConsumeStats::parse(&resp.body).map_err(anyhow::Error::msg)?;
        let mut queues: Vec<(i32, i64, i64)> = stats
            .offset_table
            .iter()
            .filter(|(mq, _)| mq.topic == topic)
            .map(|(mq, w)| (mq.queue_id, w.broker_offset, w.consumer_offset))
            .collect();
        if queues.is_empty() {
            let cmd = RemotingCommand::new_request(rq::GET_TOPIC_STATS_INFO).with_ext_fields(
                GetTopicStatsInfoRequestHeader {
                    topic: topic.to_string(),
                }
                .to_ext_fields(),
            );
            let resp = admin.call(addr, cmd).await?;
            let st = TopicStatsTable::parse(&resp.body).map_err(anyhow::Error::msg)?;
            for q in 0..read_queues {
                let o = st
                    .offset_table
                    .iter()
                    .find(|(mq, _)| mq.queue_id == q && mq.broker_name == bd.broker_name)
                    .map(|(_, o)| *o)
                    .unwrap_or_default();
                queues.push((q, o.max_offset, o.min_offset));
            }
        }
        queues.sort();
        for (q, broker_offset, consumer_offset) in queues {
            let at = (ts != -1).then_some(ts);
            let reset = bound(admin, addr, topic, q, at, rq::GET_MAX_OFFSET).await?;
            let mut rollback = consumer_offset;
            if force || reset <= consumer_offset {
                rollback = reset;
                let cmd = RemotingCommand::new_request(rq::UPDATE_CONSUMER_OFFSET).with_ext_fields(
                    UpdateConsumerOffsetRequestHeader {
                        consumer_group: group.to_string(),
                        topic: topic.to_string(),
                        queue_id: q,
                        commit_offset: reset,
                    }
                    .to_ext_fields(),
                );
                admin.call(addr, cmd).await?;
            }
            t.push(vec![
                bd.broker_name.clone(),
                q.to_string(),
                broker_offset.to_string(),
                consumer_offset.to_string(),
                reset.to_string(),
                rollback.to_string(),
            ]);
        }
    }
    Ok(t)
}
