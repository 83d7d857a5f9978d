//! `actormq admin`: mqadmin's everyday commands, spoken over the remoting protocol to a name
//! server and brokers (ActorMQ's or any RocketMQ-compatible ones).
//!
//! Command names and options follow mqadmin (`clusterList`, `topicStatus -t`, `consumerProgress
//! -g`, `updateBrokerConfig -b -k -v`, …; ECOSYSTEM.md A.1). People get aligned tables with
//! mqadmin's `#Column` headers; `--json` prints one JSON document for scripts. A refused request
//! prints the address, request, response code and remark, and the command exits non-zero.
//!
//! Parts: [`client`] (the wire calls, one connection per address), [`show`] (tables, JSON,
//! message details), [`ops`] and [`status`] (groups of mqadmin commands), [`send`]
//! (`sendMsgStatus`, `checkMsgSendRT`: a small producer). This module maps each command to its requests (the codes are in each
//! command's docs).

pub mod client;
pub mod ops;
pub mod send;
pub mod show;
pub mod status;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actormq_core::format::msg_id::decode_offset_msg_id;
use actormq_core::format::record::{self, Check, RecordView};
use actormq_core::meta::SubscriptionGroupConfig;
use actormq_core::protocol::admin::{
    BrokerStatsData, ConsumeStats, ConsumeStatsList, ConsumerConnection, GroupList,
    ProducerConnection, ResetOffsetBody, TopicStatsTable,
};
use actormq_core::protocol::body::TopicList;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use client::{AdminClient, AdminError, Result};
use show::{message_detail, parse_time, print_kv, print_table, time_str, Table};

/// Options every admin command takes.
#[derive(Args, Debug, Clone)]
pub struct AdminArgs {
    /// Name server address(es), `host:port;host:port`.
    #[arg(
        short = 'n',
        long = "namesrvAddr",
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876",
        global = true
    )]
    pub namesrv: String,
    /// Print one JSON document instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Per-request timeout in milliseconds.
    #[arg(long, default_value_t = 5000, global = true)]
    pub timeout_ms: u64,
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// Where a command goes: one broker (`-b addr`) or every master of a cluster (`-c name`).
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Broker address `host:port`.
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
    /// Cluster name (every master in it).
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

#[derive(Subcommand, Debug, Clone)]
#[command(rename_all = "camelCase")]
pub enum AdminCommand {
    /// Clusters and brokers with version, TPS, page-cache wait, message age and disk use
    /// (106, then 28 on each broker).
    ClusterList {
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
    },
    /// Every topic the name server knows (206); with -c also each one's cluster and the groups
    /// that consume it (106, 105, then 300 on a broker of the topic).
    TopicList {
        #[arg(short = 'c', long = "clusterModel")]
        cluster_model: bool,
    },
    /// A topic's route: brokers, queues, permissions (105).
    TopicRoute {
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Min/max offset and last write of each queue of a topic (105, then 202 per broker).
    TopicStatus {
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Create or update a topic (17; 106 for -c).
    UpdateTopic {
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
    },
    /// Delete a topic from every master of a cluster and from the name servers (215, 216).
    DeleteTopic {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'c', long = "clusterName")]
        cluster: String,
    },
    /// A broker's runtime key/values (28).
    BrokerStatus {
        #[command(flatten)]
        target: Target,
    },
    /// Delete expired CommitLog files now: the next 20 retention rounds act at any hour (27).
    DeleteExpiredCommitLog {
        #[command(flatten)]
        target: Target,
    },
    /// Create or update a consumer group (200).
    UpdateSubGroup {
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
    },
    /// Consumer lag: per queue with -g, per group without (208, 203).
    ConsumerProgress {
        #[arg(short = 'g', long = "groupName")]
        group: Option<String>,
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
    /// A group's online consumers and subscriptions (203).
    ConsumerConnection {
        #[arg(short = 'g', long = "consumerGroup")]
        group: String,
    },
    /// A producer group's online producers, asked of a broker of the topic (105, 204).
    ProducerConnection {
        #[arg(short = 'g', long = "producerGroup")]
        group: String,
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Per topic and consuming group: lag, in/out TPS over the last minute and messages in
    /// the last 24 hours (206, 105, 315, 300, 208). With -a only topics that moved.
    StatsAll {
        #[arg(short = 'a', long = "activeTopic")]
        active: bool,
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
    /// Lag of every group on one broker: queues with a diff of at least -l, and the total (317).
    BrokerConsumeStats {
        #[arg(short = 'b', long = "brokerAddr")]
        broker: String,
        /// Only ordered topics.
        #[arg(short = 'o', long = "order", action = clap::ArgAction::Set, default_value_t = false)]
        order: bool,
        /// Lowest diff of a queue to list.
        #[arg(short = 'l', long = "level", default_value_t = 0)]
        level: i64,
    },
    /// A message by its offset msgId (33).
    QueryMsgById {
        #[arg(short = 'i', long = "msgId")]
        msg_id: String,
        /// Do not print the body.
        #[arg(long)]
        no_body: bool,
    },
    /// Messages by key from the index (12).
    QueryMsgByKey {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'k', long = "msgKey")]
        key: String,
        #[arg(short = 'b', long = "beginTimestamp")]
        begin: Option<String>,
        #[arg(short = 'e', long = "endTimestamp")]
        end: Option<String>,
        #[arg(short = 'c', long = "maxNum", default_value_t = 64)]
        max: i32,
    },
    /// A message by the client's msgId (UNIQ_KEY) (12 with the unique-key flag).
    QueryMsgByUniqueKey {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'i', long = "msgId")]
        msg_id: String,
    },
    /// One message by queue offset (11).
    QueryMsgByOffset {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'b', long = "brokerName")]
        broker: String,
        #[arg(short = 'i', long = "queueId")]
        queue: i32,
        #[arg(short = 'o', long)]
        offset: i64,
    },
    /// Every message of a topic, optionally within store times (31, 30, 29, 11).
    PrintMsg {
        #[arg(short = 't', long)]
        topic: String,
        /// Tag expression (`*`, `TagA || TagB`).
        #[arg(short = 's', long = "subExpression", default_value = "*")]
        sub: String,
        #[arg(short = 'b', long = "beginTimestamp")]
        begin: Option<String>,
        #[arg(short = 'e', long = "endTimestamp")]
        end: Option<String>,
        #[arg(short = 'd', long = "printBody", action = clap::ArgAction::Set, default_value_t = true)]
        print_body: bool,
        /// Stop after this many messages.
        #[arg(long, default_value_t = 10_000)]
        limit: usize,
    },
    /// Move a group's offsets on a topic to a store time (222).
    ResetOffsetByTime {
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
    },
    /// A broker's configuration (26).
    GetBrokerConfig {
        #[command(flatten)]
        target: Target,
    },
    /// Change a broker setting at runtime (25).
    UpdateBrokerConfig {
        #[command(flatten)]
        target: Target,
        #[arg(short = 'k', long)]
        key: String,
        #[arg(short = 'v', long)]
        value: String,
    },
    /// Delete a consumer group from brokers (207); with -c also its %RETRY% and %DLQ% topics.
    DeleteSubGroup {
        #[arg(short = 'g', long = "groupName")]
        group: String,
        #[command(flatten)]
        target: Target,
        /// Also delete the group's consumer offsets.
        #[arg(short = 'r', long = "removeOffset", action = clap::ArgAction::Set, default_value_t = false)]
        remove_offset: bool,
    },
    /// Change a topic's permission, keeping its queue numbers (105, 17).
    UpdateTopicPerm {
        #[arg(short = 't', long)]
        topic: String,
        /// 2 = write, 4 = read, 6 = read and write.
        #[arg(short = 'p', long)]
        perm: i32,
        #[command(flatten)]
        target: Target,
    },
    /// The clusters that hold a topic (106, 105).
    TopicClusterList {
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Each name server's configuration (319).
    GetNamesrvConfig,
    /// Change a name-server setting on each name server (318).
    UpdateNamesrvConfig {
        #[arg(short = 'k', long)]
        key: String,
        #[arg(short = 'v', long)]
        value: String,
    },
    /// ConsumeQueue units of one queue from an index (321).
    QueryCq {
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
    },
    /// Delete ConsumeQueues of topics a broker no longer has and expired units (306); without
    /// -b or -c on every broker of every cluster.
    #[command(name = "cleanExpiredCQ")]
    CleanExpiredCq {
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "cluster")]
        cluster: Option<String>,
    },
    /// Delete the ConsumeQueues of topics a broker no longer has (316); without -b or -c on
    /// every broker of every cluster.
    CleanUnusedTopic {
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "cluster")]
        cluster: Option<String>,
    },
    /// Take write permission from a broker's topics on each name server (205).
    WipeWritePerm {
        #[arg(short = 'b', long = "brokerName")]
        broker: String,
    },
    /// Give write permission back to a broker's topics on each name server (327).
    AddWritePerm {
        #[arg(short = 'b', long = "brokerName")]
        broker: String,
    },
    /// Create or update a name-server KV config on each name server (100).
    UpdateKvConfig {
        #[arg(short = 's', long)]
        namespace: String,
        #[arg(short = 'k', long)]
        key: String,
        #[arg(short = 'v', long)]
        value: String,
    },
    /// Move a group's offsets on a topic to the end of each queue (222 with timestamp -1).
    SkipAccumulatedMessage {
        #[arg(short = 'g', long)]
        group: String,
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'f', long, action = clap::ArgAction::Set, default_value_t = true)]
        force: bool,
    },
    /// Copy a group's committed offsets to another group (208, 105, 15 per queue).
    CloneGroupOffset {
        #[arg(short = 's', long = "srcGroup")]
        src: String,
        #[arg(short = 'd', long = "destGroup")]
        dest: String,
        #[arg(short = 't', long)]
        topic: String,
        /// Accepted as mqadmin 4.9.4 accepts it; it changes nothing there either.
        #[arg(short = 'o', long)]
        offline: Option<String>,
    },
    /// A consumer's own report, relayed by a broker (203, then 307 per client); without -i
    /// each client's report goes to `<now>/<clientId>`.
    ConsumerStatus {
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
    },
    /// Each client's offsets of a topic, collected by the topic's first broker (223).
    GetConsumerStatus {
        #[arg(short = 'g', long = "group")]
        group: String,
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'i', long = "originClientId", default_value = "")]
        origin_client_id: String,
    },
    /// Send messages to a broker's own topic and print each SendResult (105, then 310).
    SendMsgStatus {
        #[arg(short = 'b', long = "brokerName")]
        broker_name: String,
        #[arg(short = 's', long = "messageSize", default_value_t = 128)]
        size: i32,
        #[arg(short = 'c', long = "count", default_value_t = 50)]
        count: i32,
    },
    /// Time sends to each queue of a topic in turn (105, then 310 per message).
    #[command(name = "checkMsgSendRT")]
    CheckMsgSendRt {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'a', long, default_value_t = 100)]
        amount: i64,
        #[arg(short = 's', long, default_value_t = 128)]
        size: i64,
    },
    /// Delete a name-server KV config on each name server (102).
    DeleteKvConfig {
        #[arg(short = 's', long)]
        namespace: String,
        #[arg(short = 'k', long)]
        key: String,
    },
}

/// Runs one admin command; the error is what the user sees.
pub async fn run(args: AdminArgs) -> anyhow::Result<()> {
    let admin = AdminClient::new(&args.namesrv, Duration::from_millis(args.timeout_ms));
    let json = args.json;
    JSON.store(json, Ordering::Relaxed);
    let out = match args.command {
        AdminCommand::ClusterList { cluster } => cluster_list(&admin, cluster.as_deref()).await?,
        AdminCommand::TopicList { cluster_model } => {
            let topics = topic_list(&admin, !cluster_model).await?;
            if cluster_model {
                topic_consumers(&admin, &topics, json).await?
            } else {
                Some(json!(topics))
            }
        }
        AdminCommand::TopicRoute { topic } => {
            let r = admin.route(&topic).await?;
            let v = serde_json::to_value(&r)?;
            if !json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            Some(v)
        }
        AdminCommand::TopicStatus { topic } => topic_status(&admin, &topic).await?,
        AdminCommand::UpdateTopic {
            topic,
            target,
            read_queues,
            write_queues,
            perm,
            order,
        } => {
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
            let done = to_each(&admin, &target, cmd, "create topic to").await?;
            if !json {
                println!("TopicConfig [topicName={topic}, readQueueNums={read_queues}, writeQueueNums={write_queues}, perm={}, order={order}]", perm_str(perm));
            }
            Some(
                json!({"topic": topic, "brokers": done, "readQueueNums": read_queues, "writeQueueNums": write_queues, "perm": perm, "order": order}),
            )
        }
        AdminCommand::DeleteTopic { topic, cluster } => {
            let masters = admin.cluster_masters(&cluster).await?;
            for (_, addr) in &masters {
                let cmd = RemotingCommand::new_request(rq::DELETE_TOPIC_IN_BROKER).with_ext_fields(
                    DeleteTopicRequestHeader {
                        topic: topic.clone(),
                    }
                    .to_ext_fields(),
                );
                admin.call(addr, cmd).await?;
            }
            let cmd = RemotingCommand::new_request(rq::DELETE_TOPIC_IN_NAMESRV).with_ext_fields(
                DeleteTopicFromNamesrvRequestHeader {
                    topic: topic.clone(),
                    cluster_name: Some(cluster.clone()),
                }
                .to_ext_fields(),
            );
            admin.call_namesrv(cmd).await?;
            if !json {
                println!("delete topic [{topic}] from cluster [{cluster}] success.");
                println!("delete topic [{topic}] from NameServer success.");
            }
            Some(
                json!({"topic": topic, "cluster": cluster, "brokers": masters.iter().map(|m| &m.1).collect::<Vec<_>>()}),
            )
        }
        AdminCommand::BrokerStatus { target } => {
            let mut all = serde_json::Map::new();
            let addrs = targets(&admin, &target).await?;
            for addr in &addrs {
                let kv: Vec<(String, String)> =
                    admin.runtime_info(addr).await?.into_iter().collect();
                let title = (addrs.len() > 1).then(|| format!("============{addr}============"));
                all.insert(addr.clone(), print_kv(title.as_deref(), &kv, json));
            }
            Some(Value::Object(all))
        }
        AdminCommand::DeleteExpiredCommitLog { target } => {
            let cmd = RemotingCommand::new_request(rq::DELETE_EXPIRED_COMMITLOG);
            let done = to_each(&admin, &target, cmd, "delete expired files on").await?;
            Some(json!({ "brokers": done }))
        }
        AdminCommand::UpdateSubGroup {
            group,
            target,
            consume_enable,
            consume_from_min,
            broadcast,
            retry_queues,
            retry_max_times,
            broker_id,
            slow_broker,
        } => {
            let g = SubscriptionGroupConfig {
                group_name: group.clone(),
                consume_enable,
                consume_from_min_enable: consume_from_min,
                consume_broadcast_enable: broadcast,
                retry_queue_nums: retry_queues,
                retry_max_times,
                broker_id,
                which_broker_when_consume_slowly: slow_broker,
                notify_consumer_ids_changed_enable: true,
            };
            let body = serde_json::to_vec(&g)?;
            let cmd = RemotingCommand::new_request(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
                .with_body(body);
            let done = to_each(&admin, &target, cmd, "create subscription group to").await?;
            if !json {
                println!("{}", serde_json::to_string(&g)?);
            }
            Some(json!({"group": g, "brokers": done}))
        }
        AdminCommand::ConsumerProgress { group, topic } => match group {
            Some(g) => consumer_progress(&admin, &g, topic.as_deref(), json).await?,
            None => group_summary(&admin, json).await?,
        },
        AdminCommand::ConsumerConnection { group } => {
            consumer_connection(&admin, &group, json).await?
        }
        AdminCommand::ProducerConnection { group, topic } => {
            producer_connection(&admin, &group, &topic, json).await?
        }
        AdminCommand::StatsAll { active, topic } => {
            let topics = match topic {
                Some(t) => vec![t],
                None => topic_list(&admin, false).await?,
            };
            stats_all(&admin, &topics, active, json).await?
        }
        AdminCommand::BrokerConsumeStats {
            broker,
            order,
            level,
        } => broker_consume_stats(&admin, &broker, order, level, json).await?,
        AdminCommand::QueryMsgById { msg_id, no_body } => {
            let (host, phy) = decode_offset_msg_id(&msg_id)
                .map_err(|e| anyhow::anyhow!("msgId {msg_id}: {e}"))?;
            let addr = host.to_string();
            let cmd = RemotingCommand::new_request(rq::VIEW_MESSAGE_BY_ID)
                .with_ext_fields(ViewMessageByIdRequestHeader { offset: phy }.to_ext_fields());
            let resp = admin.call(&addr, cmd).await?;
            let msgs = records(&resp.body)?;
            let Some(r) = msgs.first() else {
                anyhow::bail!("{addr}: no message at commit log offset {phy}");
            };
            let (text, v) = message_detail(r, !no_body);
            if !json {
                print!("{text}");
            }
            Some(v)
        }
        AdminCommand::QueryMsgByKey {
            topic,
            key,
            begin,
            end,
            max,
        } => {
            let begin = begin
                .as_deref()
                .map(parse_time)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let end = end
                .as_deref()
                .map(parse_time)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let mut t = Table::new(&["Message ID", "QID", "Offset"]);
            for (_, addr) in admin.topic_masters(&topic).await? {
                let body = query(&admin, &addr, &topic, &key, max, begin, end, false).await?;
                // As mqadmin: an index hit is a hash match; only messages of the topic whose
                // KEYS hold the key are shown.
                for r in records(&body)?
                    .into_iter()
                    .filter(|r| r.topic == topic && r.keys().any(|k| k == key))
                {
                    t.push(vec![
                        r.offset_msg_id(),
                        r.queue_id.to_string(),
                        r.queue_offset.to_string(),
                    ]);
                }
            }
            if !json {
                print_table(&t, false);
            }
            Some(t.to_json())
        }
        AdminCommand::QueryMsgByUniqueKey { topic, msg_id } => {
            let mut found = Vec::new();
            for (_, addr) in admin.topic_masters(&topic).await? {
                let body = query(&admin, &addr, &topic, &msg_id, 32, None, None, true).await?;
                for r in records(&body)? {
                    if r.uniq_key() == Some(msg_id.as_str()) {
                        let (text, v) = message_detail(&r, true);
                        if !json {
                            print!("{text}");
                        }
                        found.push(v);
                    }
                }
            }
            if found.is_empty() {
                anyhow::bail!("no message with unique key {msg_id} in topic {topic}");
            }
            Some(Value::Array(found))
        }
        AdminCommand::QueryMsgByOffset {
            topic,
            broker,
            queue,
            offset,
        } => {
            let addr = admin.broker_addr(&broker).await?;
            let body = pull(&admin, &addr, &topic, queue, offset, 1, "*").await?;
            let msgs = match body {
                Some(b) => b,
                None => anyhow::bail!("{addr}: no message at {topic}/{queue} offset {offset}"),
            };
            let recs = records(&msgs)?;
            let Some(r) = recs.first() else {
                anyhow::bail!("{addr}: no message at {topic}/{queue} offset {offset}");
            };
            let (text, v) = message_detail(r, true);
            if !json {
                print!("{text}");
            }
            Some(v)
        }
        AdminCommand::PrintMsg {
            topic,
            sub,
            begin,
            end,
            print_body,
            limit,
        } => print_msg(&admin, &topic, &sub, begin, end, print_body, limit, json).await?,
        AdminCommand::ResetOffsetByTime {
            group,
            topic,
            timestamp,
            force,
        } => {
            let ts = parse_time(&timestamp).map_err(anyhow::Error::msg)?;
            let t = reset_or_rollback(&admin, &group, &topic, ts, force).await?;
            if !json {
                println!("rollback consumer offset by specified group[{group}], topic[{topic}], force[{force}], timestamp(string)[{timestamp}], timestamp(long)[{ts}]");
                print_table(&t, false);
            }
            Some(t.to_json())
        }
        AdminCommand::GetBrokerConfig { target } => {
            let mut all = serde_json::Map::new();
            for addr in targets(&admin, &target).await? {
                let resp = admin
                    .call(&addr, RemotingCommand::new_request(rq::GET_BROKER_CONFIG))
                    .await?;
                let text = String::from_utf8_lossy(&resp.body).into_owned();
                let kv: Vec<(String, String)> = text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
                    .filter_map(|l| l.split_once('='))
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .collect();
                let title = format!("============{addr}============");
                all.insert(addr.clone(), print_kv(Some(&title), &kv, json));
            }
            Some(Value::Object(all))
        }
        AdminCommand::UpdateBrokerConfig { target, key, value } => {
            let mut done = Vec::new();
            for addr in targets(&admin, &target).await? {
                let cmd = RemotingCommand::new_request(rq::UPDATE_BROKER_CONFIG)
                    .with_body(format!("{key}={value}\n").into_bytes());
                let resp = admin.call(&addr, cmd).await?;
                let note = resp.remark.unwrap_or_default();
                if !json {
                    println!("update broker config success, {addr}");
                    if !note.is_empty() {
                        println!("  {note}");
                    }
                }
                done.push(json!({"broker": addr, "note": note}));
            }
            Some(json!({"key": key, "value": value, "brokers": done}))
        }
        AdminCommand::DeleteSubGroup {
            group,
            target,
            remove_offset,
        } => Some(ops::delete_sub_group(&admin, &group, &target, remove_offset).await?),
        AdminCommand::UpdateTopicPerm {
            topic,
            perm,
            target,
        } => Some(ops::update_topic_perm(&admin, &topic, perm, &target).await?),
        AdminCommand::TopicClusterList { topic } => {
            Some(ops::topic_cluster_list(&admin, &topic).await?)
        }
        AdminCommand::GetNamesrvConfig => Some(ops::get_namesrv_config(&admin).await?),
        AdminCommand::UpdateNamesrvConfig { key, value } => {
            Some(ops::update_namesrv_config(&admin, &key, &value).await?)
        }
        AdminCommand::QueryCq {
            topic,
            queue,
            index,
            count,
            broker,
            group,
        } => Some(
            ops::query_cq(
                &admin,
                &topic,
                queue,
                index,
                count,
                broker.as_deref(),
                group.as_deref(),
            )
            .await?,
        ),
        AdminCommand::CleanExpiredCq { broker, cluster } => Some(
            ops::clean(
                &admin,
                rq::CLEAN_EXPIRED_CONSUMEQUEUE,
                broker.as_deref(),
                cluster.as_deref(),
            )
            .await?,
        ),
        AdminCommand::CleanUnusedTopic { broker, cluster } => Some(
            ops::clean(
                &admin,
                rq::CLEAN_UNUSED_TOPIC,
                broker.as_deref(),
                cluster.as_deref(),
            )
            .await?,
        ),
        AdminCommand::WipeWritePerm { broker } => {
            Some(ops::write_perm(&admin, &broker, false).await?)
        }
        AdminCommand::AddWritePerm { broker } => {
            Some(ops::write_perm(&admin, &broker, true).await?)
        }
        AdminCommand::UpdateKvConfig {
            namespace,
            key,
            value,
        } => Some(ops::kv_config(&admin, &namespace, &key, Some(&value)).await?),
        AdminCommand::SkipAccumulatedMessage {
            group,
            topic,
            force,
        } => {
            let t = reset_or_rollback(&admin, &group, &topic, -1, force).await?;
            if !json {
                print_table(&t, false);
            }
            Some(t.to_json())
        }
        AdminCommand::CloneGroupOffset {
            src, dest, topic, ..
        } => Some(ops::clone_group_offset(&admin, &src, &dest, &topic).await?),
        AdminCommand::ConsumerStatus {
            group,
            client_id,
            broker,
            jstack,
        } => Some(
            status::consumer_status(
                &admin,
                &group,
                client_id.as_deref(),
                broker.as_deref(),
                jstack,
                json,
            )
            .await?,
        ),
        AdminCommand::GetConsumerStatus {
            group,
            topic,
            origin_client_id,
        } => Some(
            status::get_consumer_status(&admin, &group, &topic, &origin_client_id, json).await?,
        ),
        AdminCommand::SendMsgStatus {
            broker_name,
            size,
            count,
        } => Some(send::send_msg_status(&admin, &broker_name, size, count, json).await?),
        AdminCommand::CheckMsgSendRt {
            topic,
            amount,
            size,
        } => Some(send::check_msg_send_rt(&admin, &topic, amount, size, json).await?),
        AdminCommand::DeleteKvConfig { namespace, key } => {
            Some(ops::kv_config(&admin, &namespace, &key, None).await?)
        }
    };
    if json {
        if let Some(v) = out {
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(())
}

/// [`reset_offset`], or when no consumer of the group is online (206) mqadmin's old method,
/// [`ops::reset_offset_old`], with its rollback table.
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
            ops::reset_offset_old(admin, group, topic, ts, force).await
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

fn perm_str(perm: i32) -> String {
    let mut s = String::new();
    s.push(if perm & 4 != 0 { 'R' } else { '-' });
    s.push(if perm & 2 != 0 { 'W' } else { '-' });
    s.push(if perm & 1 != 0 { 'X' } else { '-' });
    s
}

/// `-b` wins over `-c` (mqadmin's rule); one of them is required.
async fn targets(admin: &AdminClient, t: &Target) -> Result<Vec<String>> {
    if let Some(b) = &t.broker {
        return Ok(vec![b.clone()]);
    }
    if let Some(c) = &t.cluster {
        return Ok(admin
            .cluster_masters(c)
            .await?
            .into_iter()
            .map(|(_, a)| a)
            .collect());
    }
    Err(AdminError::Other(
        "say where: -b <broker address> or -c <cluster name>".into(),
    ))
}

/// Sends `cmd` to every target broker, printing `<what> <addr> success.` for each (mqadmin's
/// lines); the addresses that accepted it. Stops at the first refusal.
async fn to_each(
    admin: &AdminClient,
    target: &Target,
    cmd: RemotingCommand,
    what: &str,
) -> Result<Vec<String>> {
    let mut done = Vec::new();
    for addr in targets(admin, target).await? {
        admin.call(&addr, cmd.clone()).await?;
        if !JSON.load(Ordering::Relaxed) {
            println!("{what} {addr} success.");
        }
        done.push(addr);
    }
    Ok(done)
}

/// Every record in a response body (QUERY_MESSAGE, PULL_MESSAGE, VIEW_MESSAGE_BY_ID).
fn records(body: &[u8]) -> anyhow::Result<Vec<RecordView<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        match record::check(&body[at..], false) {
            Ok(Check::Record(r)) => {
                at += r.total_size as usize;
                out.push(r);
            }
            Ok(_) => break,
            Err(e) => anyhow::bail!("cannot decode a message at byte {at} of the response: {e}"),
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn query(
    admin: &AdminClient,
    addr: &str,
    topic: &str,
    key: &str,
    max: i32,
    begin: Option<i64>,
    end: Option<i64>,
    unique: bool,
) -> Result<bytes::Bytes> {
    let h = QueryMessageRequestHeader {
        topic: topic.into(),
        key: key.into(),
        max_num: max,
        begin_timestamp: begin.unwrap_or(0),
        end_timestamp: end.unwrap_or(i64::MAX),
        unique_key_query: unique,
    };
    let cmd = RemotingCommand::new_request(rq::QUERY_MESSAGE).with_ext_fields(h.to_ext_fields());
    match admin.call(addr, cmd).await {
        Ok(r) => Ok(r.body),
        Err(e) if e.code() == Some(rc::QUERY_NOT_FOUND) => Ok(bytes::Bytes::new()),
        Err(e) => Err(e),
    }
}

/// One pull without committing or suspending; `None` when the queue has nothing there.
async fn pull(
    admin: &AdminClient,
    addr: &str,
    topic: &str,
    queue: i32,
    offset: i64,
    max: i32,
    sub: &str,
) -> Result<Option<bytes::Bytes>> {
    let h = PullMessageRequestHeader {
        consumer_group: "TOOLS_CONSUMER".into(),
        topic: topic.into(),
        queue_id: queue,
        queue_offset: offset,
        max_msg_nums: max,
        sys_flag: 0,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some(sub.into()),
        sub_version: 0,
        ..Default::default()
    };
    let cmd = RemotingCommand::new_request(rq::PULL_MESSAGE).with_ext_fields(h.to_ext_fields());
    let resp = admin.call_raw(addr, cmd).await?;
    match resp.code {
        rc::SUCCESS => Ok(Some(resp.body)),
        rc::PULL_NOT_FOUND | rc::PULL_OFFSET_MOVED | rc::PULL_RETRY_IMMEDIATELY => Ok(None),
        code => Err(AdminError::Refused {
            addr: addr.into(),
            request: "PULL_MESSAGE",
            code,
            name: actormq_core::protocol::codes::response_code_name(code),
            remark: resp.remark.unwrap_or_default(),
        }),
    }
}

/// A queue offset for a time bound: the first message stored at or after `at`
/// (SEARCH_OFFSET_BY_TIMESTAMP), or without a bound the queue's min or max (`otherwise`:
/// GET_MIN_OFFSET / GET_MAX_OFFSET).
async fn bound(
    admin: &AdminClient,
    addr: &str,
    topic: &str,
    queue: i32,
    at: Option<i64>,
    otherwise: i32,
) -> Result<i64> {
    let code = if at.is_some() {
        rq::SEARCH_OFFSET_BY_TIMESTAMP
    } else {
        otherwise
    };
    let mut cmd = RemotingCommand::new_request(code)
        .with_ext("topic", topic)
        .with_ext("queueId", queue.to_string());
    if let Some(ts) = at {
        cmd = cmd.with_ext("timestamp", ts.to_string());
    }
    let resp = admin.call(addr, cmd).await?;
    resp.ext("offset")
        .and_then(|o| o.parse().ok())
        .ok_or_else(|| AdminError::Other(format!("{addr}: no offset in the reply")))
}

async fn cluster_list(admin: &AdminClient, only: Option<&str>) -> anyhow::Result<Option<Value>> {
    let info = admin.cluster_info().await?;
    let mut t = Table::new(&[
        "Cluster Name",
        "Broker Name",
        "BID",
        "Addr",
        "Version",
        "InTPS(LOAD)",
        "OutTPS(LOAD)",
        "PCWait(ms)",
        "Hour",
        "SPACE",
    ]);
    let now = chrono::Utc::now().timestamp_millis();
    for (cluster, names) in &info.cluster_addr_table {
        if only.is_some_and(|c| c != cluster) {
            continue;
        }
        for name in names {
            let Some(bd) = info.broker_addr_table.get(name) else {
                continue;
            };
            for (id, addr) in &bd.broker_addrs {
                let kv = admin.runtime_info(addr).await.unwrap_or_default();
                let get = |k: &str| kv.get(k).cloned().unwrap_or_default();
                let first = |k: &str| {
                    get(k)
                        .split_whitespace()
                        .next()
                        .and_then(|v| v.parse::<f64>().ok())
                        .unwrap_or(0.0)
                };
                let earliest: i64 = get("earliestMessageTimeStamp").parse().unwrap_or(0);
                let hours = if earliest > 0 {
                    format!("{:.2}", (now - earliest) as f64 / 3_600_000.0)
                } else {
                    "0.00".into()
                };
                t.push(vec![
                    cluster.clone(),
                    name.clone(),
                    id.to_string(),
                    addr.clone(),
                    if kv.is_empty() {
                        "(unreachable)".into()
                    } else {
                        get("brokerVersionDesc")
                    },
                    format!("{:.2}", first("putTps")),
                    // 4.x brokers send `getTransferedTps`, 5.x ones `getTransferredTps`.
                    format!(
                        "{:.2}",
                        if kv.contains_key("getTransferedTps") {
                            first("getTransferedTps")
                        } else {
                            first("getTransferredTps")
                        }
                    ),
                    get("pageCacheLockTimeMills"),
                    hours,
                    get("commitLogDiskRatio"),
                ]);
            }
        }
    }
    print_or_return(t)
}

fn print_or_return(t: Table) -> anyhow::Result<Option<Value>> {
    if !JSON.load(Ordering::Relaxed) {
        print!("{}", t.render());
    }
    Ok(Some(t.to_json()))
}

/// `--json` of the running command (read by the table printers).
static JSON: AtomicBool = AtomicBool::new(false);

/// Every topic the name server knows, sorted; printed one a line when `print` (and not --json).
async fn topic_list(admin: &AdminClient, print: bool) -> anyhow::Result<Vec<String>> {
    let resp = admin
        .call_namesrv(RemotingCommand::new_request(
            rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        ))
        .await?;
    let list: TopicList = AdminClient::body(&resp, "name server", "GET_ALL_TOPIC_LIST")?;
    let mut topics = list.topic_list;
    topics.sort();
    if print && !JSON.load(Ordering::Relaxed) {
        for t in &topics {
            println!("{t}");
        }
    }
    Ok(topics)
}

/// `topicList -c`: each topic's cluster and the groups consuming it, a row per group (one with
/// no group when none does), as mqadmin prints it. Retry and DLQ topics are left out, as there.
async fn topic_consumers(
    admin: &AdminClient,
    topics: &[String],
    json: bool,
) -> anyhow::Result<Option<Value>> {
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
        if topic.starts_with(actormq_core::meta::RETRY_GROUP_TOPIC_PREFIX)
            || topic.starts_with(actormq_core::meta::DLQ_GROUP_TOPIC_PREFIX)
        {
            continue;
        }
        let groups = async {
            let masters = admin.topic_masters(topic).await?;
            match masters.first() {
                Some((name, addr)) => {
                    Ok(Some((name.clone(), consumed_by(admin, addr, topic).await?)))
                }
                None => Ok::<_, AdminError>(None),
            }
        };
        // As mqadmin: one topic that cannot be read (deleted meanwhile, a broker down) is
        // reported and skipped, not the end of the listing.
        let (name, groups) = match groups.await {
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

/// `statsAll`: a row per topic and consuming group (one with `NO_CONSUMER` when none), summed
/// over the topic's masters. Retry and DLQ topics are left out, as in mqadmin.
async fn stats_all(
    admin: &AdminClient,
    topics: &[String],
    active: bool,
    json: bool,
) -> anyhow::Result<Option<Value>> {
    let mut t = Table::new(&[
        "Topic",
        "Consumer Group",
        "Accumulation",
        "InTPS",
        "OutTPS",
        "InMsg24Hour",
        "OutMsg24Hour",
    ]);
    for topic in topics {
        if topic.starts_with(actormq_core::meta::RETRY_GROUP_TOPIC_PREFIX)
            || topic.starts_with(actormq_core::meta::DLQ_GROUP_TOPIC_PREFIX)
        {
            continue;
        }
        // As mqadmin: a topic that cannot be read is reported and skipped.
        match topic_stats_rows(admin, topic, active).await {
            Ok(rows) => rows.into_iter().for_each(|r| t.push(r)),
            Err(e) => eprintln!("{topic}: {e}; skipped"),
        }
    }
    if !json {
        print!("{}", t.render());
    }
    Ok(Some(t.to_json()))
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

/// `producerConnection`: asked of the first master of the topic, as mqadmin does.
async fn producer_connection(
    admin: &AdminClient,
    group: &str,
    topic: &str,
    json: bool,
) -> anyhow::Result<Option<Value>> {
    let masters = admin.topic_masters(topic).await?;
    let Some((_, addr)) = masters.first() else {
        anyhow::bail!("topic {topic} has no broker");
    };
    let cmd = RemotingCommand::new_request(rq::GET_PRODUCER_CONNECTION_LIST).with_ext_fields(
        GetProducerConnectionListRequestHeader {
            producer_group: group.into(),
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

/// `brokerConsumeStats`: every queue of every group on one broker whose diff is at least
/// `level`, and the broker's total diff.
async fn broker_consume_stats(
    admin: &AdminClient,
    addr: &str,
    order: bool,
    level: i64,
    json: bool,
) -> anyhow::Result<Option<Value>> {
    let cmd = RemotingCommand::new_request(rq::GET_BROKER_CONSUME_STATS)
        .with_ext_fields(GetConsumeStatsInBrokerHeader { is_order: order }.to_ext_fields());
    let resp = admin.call(addr, cmd).await?;
    let list = ConsumeStatsList::parse(&resp.body).map_err(|why| AdminError::Body {
        addr: addr.to_string(),
        request: "GET_BROKER_CONSUME_STATS",
        why,
    })?;
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

async fn topic_status(admin: &AdminClient, topic: &str) -> anyhow::Result<Option<Value>> {
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

/// The brokers a group lives on: those serving its retry topic (mqadmin's way).
async fn group_brokers(admin: &AdminClient, group: &str) -> Result<Vec<(String, String)>> {
    admin
        .topic_masters(&actormq_core::meta::retry_topic(group))
        .await
}

async fn consume_stats(
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

async fn consumer_progress(
    admin: &AdminClient,
    group: &str,
    topic: Option<&str>,
    json: bool,
) -> anyhow::Result<Option<Value>> {
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

async fn connection_of(admin: &AdminClient, group: &str) -> Result<Option<ConsumerConnection>> {
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

async fn group_summary(admin: &AdminClient, json: bool) -> anyhow::Result<Option<Value>> {
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
        t.push(vec![
            g,
            count,
            version,
            kind,
            model,
            format!("{:.2}", stats.consume_tps),
            stats.total_diff().to_string(),
        ]);
    }
    if !json {
        print!("{}", t.render());
    }
    Ok(Some(t.to_json()))
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

async fn consumer_connection(
    admin: &AdminClient,
    group: &str,
    json: bool,
) -> anyhow::Result<Option<Value>> {
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

#[allow(clippy::too_many_arguments)]
async fn print_msg(
    admin: &AdminClient,
    topic: &str,
    sub: &str,
    begin: Option<String>,
    end: Option<String>,
    print_body: bool,
    limit: usize,
    json: bool,
) -> anyhow::Result<Option<Value>> {
    let begin = begin
        .as_deref()
        .map(parse_time)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let end = end
        .as_deref()
        .map(parse_time)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let route = admin.route(topic).await?;
    let mut out = Vec::new();
    'brokers: for qd in &route.queue_datas {
        let Some(addr) = route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == qd.broker_name)
            .and_then(|b| b.broker_addrs.get(&0))
        else {
            continue;
        };
        for q in 0..qd.read_queue_nums {
            let from = bound(admin, addr, topic, q, begin, rq::GET_MIN_OFFSET).await?;
            let to = bound(admin, addr, topic, q, end, rq::GET_MAX_OFFSET).await?;
            let mut at = from;
            while at < to {
                let Some(body) = pull(admin, addr, topic, q, at, 32, sub).await? else {
                    break;
                };
                let recs = records(&body)?;
                if recs.is_empty() {
                    break;
                }
                for r in &recs {
                    at = r.queue_offset + 1;
                    if r.queue_offset >= to {
                        break;
                    }
                    if end.is_some_and(|e| r.store_timestamp > e) {
                        continue;
                    }
                    let (text, v) = message_detail(r, print_body);
                    if !json {
                        println!("{text}");
                    }
                    out.push(v);
                    if out.len() >= limit {
                        break 'brokers;
                    }
                }
            }
        }
    }
    if !json {
        println!("{} messages", out.len());
    }
    Ok(Some(Value::Array(out)))
}
