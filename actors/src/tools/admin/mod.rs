//! `actormq admin`: mqadmin's everyday commands, spoken over the remoting protocol to a name
//! server and brokers (ActorMQ's or any RocketMQ-compatible ones).
//!
//! Command names and options follow mqadmin 4.9.4 (`clusterList`, `topicStatus -t`,
//! `consumerProgress -g`, `updateBrokerConfig -b -k -v`, …). People get aligned tables with
//! mqadmin's `#Column` headers; `--json` prints one JSON document for scripts. A refused request
//! prints the address, request, response code and remark, and the command exits non-zero.
//!
//! This module holds the parser ([`AdminArgs`], [`AdminCommand`]) and [`run`], which hands each
//! command to its function. Each command's options and function live in the file of its family
//! (the request codes are in each command's docs):
//!
//! * [`cluster`] — clusters and brokers: `clusterList`, `brokerStatus`, broker configuration,
//!   `deleteExpiredCommitLog`.
//! * [`topic`] — `topicList`, `topicRoute`, `topicStatus`, `updateTopic`, `deleteTopic`,
//!   `statsAll`.
//! * [`group`] — consumer and producer groups: `updateSubGroup`, `consumerProgress`,
//!   connections, `brokerConsumeStats`, offset resets.
//! * [`message`] — `queryMsgById|ByKey|ByUniqueKey|ByOffset`, `printMsg`.
//! * [`ops`] — group and topic upkeep, ConsumeQueue inspection, name-server administration;
//!   [`status`] — consumer status; [`send`] — `sendMsgStatus`, `checkMsgSendRT` (a small
//!   producer).
//! * [`client`] — the wire calls, one connection per address; [`show`] — tables, JSON,
//!   message details.

pub mod client;
pub mod cluster;
pub mod group;
pub mod message;
pub mod ops;
pub mod send;
pub mod show;
pub mod status;
pub mod topic;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actormq_core::protocol::command::RemotingCommand;
use clap::{Args, Subcommand};
use serde_json::Value;

use client::{AdminClient, AdminError, Result};
use show::Table;

/// What a command returns: the JSON document `--json` prints (`None`: nothing to print).
pub type Outcome = anyhow::Result<Option<Value>>;

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

/// mqadmin's commands; each variant's doc is its `--help` line, its options are in its family's
/// file.
#[derive(Subcommand, Debug, Clone)]
#[command(rename_all = "camelCase")]
pub enum AdminCommand {
    /// Clusters and brokers with version, TPS, page-cache wait, message age and disk use
    /// (106, then 28 on each broker).
    ClusterList(cluster::ClusterList),
    /// Every topic the name server knows (206); with -c also each one's cluster and the groups
    /// that consume it (106, 105, then 300 on a broker of the topic).
    TopicList(topic::TopicList),
    /// A topic's route: brokers, queues, permissions (105).
    TopicRoute(topic::TopicRoute),
    /// Min/max offset and last write of each queue of a topic (105, then 202 per broker).
    TopicStatus(topic::TopicStatus),
    /// Create or update a topic (17; 106 for -c).
    UpdateTopic(topic::UpdateTopic),
    /// Delete a topic from every master of a cluster and from the name servers (215, 216).
    DeleteTopic(topic::DeleteTopic),
    /// A broker's runtime key/values (28).
    BrokerStatus(cluster::BrokerStatus),
    /// Delete expired CommitLog files now: the next 20 retention rounds act at any hour (27).
    DeleteExpiredCommitLog(cluster::DeleteExpiredCommitLog),
    /// Create or update a consumer group (200).
    UpdateSubGroup(group::UpdateSubGroup),
    /// Consumer lag: per queue with -g, per group without (208, 203).
    ConsumerProgress(group::ConsumerProgress),
    /// A group's online consumers and subscriptions (203).
    ConsumerConnection(group::ConsumerConnectionArgs),
    /// A producer group's online producers, asked of a broker of the topic (105, 204).
    ProducerConnection(group::ProducerConnectionArgs),
    /// Per topic and consuming group: lag, in/out TPS over the last minute and messages in
    /// the last 24 hours (206, 105, 315, 300, 208). With -a only topics that moved.
    StatsAll(topic::StatsAll),
    /// Lag of every group on one broker: queues with a diff of at least -l, and the total (317).
    BrokerConsumeStats(group::BrokerConsumeStats),
    /// A message by its offset msgId (33).
    QueryMsgById(message::QueryMsgById),
    /// Messages by key from the index (12).
    QueryMsgByKey(message::QueryMsgByKey),
    /// A message by the client's msgId (UNIQ_KEY) (12 with the unique-key flag).
    QueryMsgByUniqueKey(message::QueryMsgByUniqueKey),
    /// One message by queue offset (11).
    QueryMsgByOffset(message::QueryMsgByOffset),
    /// Every message of a topic, optionally within store times (31, 30, 29, 11).
    PrintMsg(message::PrintMsg),
    /// Move a group's offsets on a topic to a store time (222).
    ResetOffsetByTime(group::ResetOffsetByTime),
    /// A broker's configuration (26).
    GetBrokerConfig(cluster::GetBrokerConfig),
    /// Change a broker setting at runtime (25).
    UpdateBrokerConfig(cluster::UpdateBrokerConfig),
    /// Delete a consumer group from brokers (207); with -c also its %RETRY% and %DLQ% topics.
    DeleteSubGroup(ops::DeleteSubGroup),
    /// Change a topic's permission, keeping its queue numbers (105, 17).
    UpdateTopicPerm(ops::UpdateTopicPerm),
    /// The clusters that hold a topic (106, 105).
    TopicClusterList(ops::TopicClusterList),
    /// Each name server's configuration (319).
    GetNamesrvConfig,
    /// Change a name-server setting on each name server (318).
    UpdateNamesrvConfig(ops::UpdateNamesrvConfig),
    /// ConsumeQueue units of one queue from an index (321).
    QueryCq(ops::QueryCq),
    /// Delete ConsumeQueues of topics a broker no longer has and expired units (306); without
    /// -b or -c on every broker of every cluster.
    #[command(name = "cleanExpiredCQ")]
    CleanExpiredCq(ops::Clean),
    /// Delete the ConsumeQueues of topics a broker no longer has (316); without -b or -c on
    /// every broker of every cluster.
    CleanUnusedTopic(ops::Clean),
    /// Take write permission from a broker's topics on each name server (205).
    WipeWritePerm(ops::WritePerm),
    /// Give write permission back to a broker's topics on each name server (327).
    AddWritePerm(ops::WritePerm),
    /// Create or update a name-server KV config on each name server (100).
    UpdateKvConfig(ops::UpdateKvConfig),
    /// Move a group's offsets on a topic to the end of each queue (222 with timestamp -1).
    SkipAccumulatedMessage(group::SkipAccumulatedMessage),
    /// Copy a group's committed offsets to another group (208, 105, 15 per queue).
    CloneGroupOffset(ops::CloneGroupOffset),
    /// A consumer's own report, relayed by a broker (203, then 307 per client); without -i
    /// each client's report goes to `<now>/<clientId>`.
    ConsumerStatus(status::ConsumerStatus),
    /// Each client's offsets of a topic, collected by the topic's first broker (223).
    GetConsumerStatus(status::GetConsumerStatus),
    /// Send messages to a broker's own topic and print each SendResult (105, then 310).
    SendMsgStatus(send::SendMsgStatus),
    /// Time sends to each queue of a topic in turn (105, then 310 per message).
    #[command(name = "checkMsgSendRT")]
    CheckMsgSendRt(send::CheckMsgSendRt),
    /// Delete a name-server KV config on each name server (102).
    DeleteKvConfig(ops::DeleteKvConfig),
}

/// Runs one admin command; the error is what the user sees.
pub async fn run(args: AdminArgs) -> anyhow::Result<()> {
    let admin = AdminClient::new(&args.namesrv, Duration::from_millis(args.timeout_ms));
    JSON.store(args.json, Ordering::Relaxed);
    let out = args.command.run(&admin, args.json).await?;
    if args.json {
        if let Some(v) = out {
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(())
}

impl AdminCommand {
    /// Hands the command to its function: it prints its lines (tables unless `json`) and
    /// returns its JSON document.
    async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        use AdminCommand as C;
        match self {
            C::ClusterList(c) => c.run(admin).await,
            C::TopicList(c) => c.run(admin, json).await,
            C::TopicRoute(c) => c.run(admin, json).await,
            C::TopicStatus(c) => c.run(admin).await,
            C::UpdateTopic(c) => c.run(admin, json).await,
            C::DeleteTopic(c) => c.run(admin, json).await,
            C::BrokerStatus(c) => c.run(admin, json).await,
            C::DeleteExpiredCommitLog(c) => c.run(admin).await,
            C::UpdateSubGroup(c) => c.run(admin, json).await,
            C::ConsumerProgress(c) => c.run(admin, json).await,
            C::ConsumerConnection(c) => c.run(admin, json).await,
            C::ProducerConnection(c) => c.run(admin, json).await,
            C::StatsAll(c) => c.run(admin, json).await,
            C::BrokerConsumeStats(c) => c.run(admin, json).await,
            C::QueryMsgById(c) => c.run(admin, json).await,
            C::QueryMsgByKey(c) => c.run(admin, json).await,
            C::QueryMsgByUniqueKey(c) => c.run(admin, json).await,
            C::QueryMsgByOffset(c) => c.run(admin, json).await,
            C::PrintMsg(c) => c.run(admin, json).await,
            C::ResetOffsetByTime(c) => c.run(admin, json).await,
            C::GetBrokerConfig(c) => c.run(admin, json).await,
            C::UpdateBrokerConfig(c) => c.run(admin, json).await,
            C::DeleteSubGroup(c) => c.run(admin).await,
            C::UpdateTopicPerm(c) => c.run(admin).await,
            C::TopicClusterList(c) => c.run(admin).await,
            C::GetNamesrvConfig => Ok(Some(ops::get_namesrv_config(admin).await?)),
            C::UpdateNamesrvConfig(c) => c.run(admin).await,
            C::QueryCq(c) => c.run(admin).await,
            C::CleanExpiredCq(c) => c.run(admin, ops::CLEAN_EXPIRED_CQ).await,
            C::CleanUnusedTopic(c) => c.run(admin, ops::CLEAN_UNUSED_TOPIC).await,
            C::WipeWritePerm(c) => c.run(admin, false).await,
            C::AddWritePerm(c) => c.run(admin, true).await,
            C::UpdateKvConfig(c) => c.run(admin).await,
            C::SkipAccumulatedMessage(c) => c.run(admin, json).await,
            C::CloneGroupOffset(c) => c.run(admin).await,
            C::ConsumerStatus(c) => c.run(admin, json).await,
            C::GetConsumerStatus(c) => c.run(admin, json).await,
            C::SendMsgStatus(c) => c.run(admin, json).await,
            C::CheckMsgSendRt(c) => c.run(admin, json).await,
            C::DeleteKvConfig(c) => c.run(admin).await,
        }
    }
}

/// `--json` of the running command (read by the table printers).
static JSON: AtomicBool = AtomicBool::new(false);

/// Whether the running command prints JSON (tables and lines are then left out).
fn json_mode() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// A permission as mqadmin prints it: `RW-` for 6.
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
        if !json_mode() {
            println!("{what} {addr} success.");
        }
        done.push(addr);
    }
    Ok(done)
}

/// Prints the table unless `--json`; its JSON either way.
fn print_or_return(t: Table) -> Outcome {
    if !json_mode() {
        print!("{}", t.render());
    }
    Ok(Some(t.to_json()))
}
