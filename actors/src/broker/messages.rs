//! Every message of the broker's actors, in one place: the broker's protocol, grouped by the
//! actor that handles it, each with who sends it and what its reply means. The actors' files
//! (`clients.rs`, `metadata.rs`, `pull_hold.rs`, `registrar.rs`) keep the handlers.
//!
//! To [`super::clients::ClientRegistry`]: from the connection threads' handlers —
//! [`Heartbeat`], [`UnregisterClient`], [`GetConsumerList`], [`LockBatch`], [`UnlockBatch`]
//! (`consumer.rs`), [`GetGroupConnection`], [`GetProducerConnection`], [`GetAllProducers`],
//! [`ConsumerVersions`], [`PushToGroup`] (`admin.rs`), [`FindConsumer`], [`GroupConsumers`]
//! (`client_call.rs`), [`FindClient`] (`reply.rs`), [`ConnectionClosed`] (`processor.rs`) — and
//! [`GetConnections`] (`/metrics`, `metrics_source.rs`).
//! To [`super::metadata::Metadata`]: from the handlers — [`EnsureTopic`], [`EnsureGroup`]
//! (`send.rs`, `pull.rs`, `consumer.rs`, `admin.rs`), [`CommitOffset`] (`pull.rs`,
//! `consumer.rs`, `admin.rs`), [`QueryOffset`] (`consumer.rs`), [`CreateTopic`],
//! [`DeleteTopic`], [`UpdateGroup`], [`GroupsOfTopic`], [`TouchTopics`], [`GetOffsets`]
//! (`admin.rs`; `GetOffsets` also `/metrics`), [`DeleteGroup`] (`admin_store.rs`); from a slave's
//! [`super::slave_sync`]: [`FromMaster`]; from the stop (`wiring.rs`): [`PersistAll`].
//! To [`super::pull_hold::PullHold`]: [`SuspendPull`] (`pull.rs`), [`MessagesArrived`] (the
//! store's ConsumeQueue builder, through the arrival hook `wiring.rs` installs).
//! To [`super::registrar::Registrar`]: [`RegisterNow`] (the start, and `Metadata`'s topic hook
//! set in `wiring.rs`), [`UnregisterAll`] (the stop), [`GetRegistrations`] (status).
//!
//! The data the replies carry ([`ClientInfo`], [`ClientChannel`], [`NamesrvStatus`]) is here
//! too, so that this file uses no other broker module and every actor file only imports it.

use std::collections::BTreeMap;
use std::time::Instant;

use actix::prelude::*;
use actormq_core::meta::{
    ConsumerOffsets, GroupTable, SubscriptionGroupConfig, TopicConfig, TopicTable,
};
use actormq_core::protocol::admin::{ConsumerConnection, ProducerConnection, ProducerInfo};
use actormq_core::protocol::body::{HeartbeatData, MessageQueue};
use actormq_core::protocol::command::RemotingCommand;

use crate::metered::ActorRef;
use crate::remoting::server::Connection;
use crate::store::messages::Arrival;

// ---------------------------------------------------------------------------------------------
// To ClientRegistry (clients.rs)

/// HEART_BEAT (RocketMQ's `ClientManageProcessor.heartBeat`), from `consumer.rs` after the
/// groups and retry topics it names exist: registers the client's producers and consumers on
/// this connection and takes newer subscriptions. Reply: whether any consumer group's
/// subscriptions changed (the response's `IS_SUB_CHANGE`).
pub struct Heartbeat {
    pub data: HeartbeatData,
    pub conn_id: u64,
    pub conn: ActorRef<Connection>,
    pub addr: String,
    /// `LanguageCode` name and `MQVersion` ordinal of the request (admin listings).
    pub language: &'static str,
    pub version: i32,
}
impl Message for Heartbeat {
    type Result = bool;
}

/// UNREGISTER_CLIENT, from `consumer.rs`: the client leaves the producer and consumer groups the
/// header names (the consumer group's other clients are told when it was a member).
pub struct UnregisterClient {
    pub client_id: String,
    pub producer_group: Option<String>,
    pub consumer_group: Option<String>,
}
impl Message for UnregisterClient {
    type Result = ();
}

/// The connection with this id closed (`processor.rs`): every client registered through it
/// leaves its groups.
pub struct ConnectionClosed(pub u64);
impl Message for ConnectionClosed {
    type Result = ();
}

/// GET_CONSUMER_LIST_BY_GROUP, from `consumer.rs`. Reply: the group's online client ids,
/// sorted (empty: none online).
pub struct GetConsumerList(pub String);
impl Message for GetConsumerList {
    type Result = Vec<String>;
}

/// LOCK_BATCH_MQ (RocketMQ's `RebalanceLockManager.tryLockBatch`), from `consumer.rs`: locks for
/// `client_id` each queue of `mqs` that is free, its own, or whose lock expired. Reply: the
/// queues the client holds now.
pub struct LockBatch {
    pub group: String,
    pub client_id: String,
    pub mqs: Vec<MessageQueue>,
}
impl Message for LockBatch {
    type Result = Vec<MessageQueue>;
}

/// UNLOCK_BATCH_MQ (RocketMQ's `RebalanceLockManager.unlockBatch`), from `consumer.rs`: releases
/// the queues of `mqs` that `client_id` holds; others' locks stay.
pub struct UnlockBatch {
    pub group: String,
    pub client_id: String,
    pub mqs: Vec<MessageQueue>,
}
impl Message for UnlockBatch {
    type Result = ();
}

/// A registered client, for admin tools and metrics.
#[derive(Clone, Debug)]
pub struct ClientInfo {
    pub client_id: String,
    pub group: String,
    pub addr: String,
    pub is_consumer: bool,
}

/// Every registered client (`/metrics`' connection gauges, `metrics_source.rs`).
pub struct GetConnections;
impl Message for GetConnections {
    type Result = Vec<ClientInfo>;
}

/// A consumer group's online clients and subscriptions (GET_CONSUMER_CONNECTION_LIST and
/// GET_CONSUME_STATS, `admin.rs`); `None` when no client of the group is connected.
pub struct GetGroupConnection(pub String);
impl Message for GetGroupConnection {
    type Result = Option<ConsumerConnection>;
}

/// A producer group's online clients (GET_PRODUCER_CONNECTION_LIST, `admin.rs`); `None` when no
/// client of the group is connected.
pub struct GetProducerConnection(pub String);
impl Message for GetProducerConnection {
    type Result = Option<ProducerConnection>;
}

/// Every producer connection by group (GET_ALL_PRODUCER_INFO, `admin.rs`; RocketMQ 4.9.4's
/// broker/.../client/ProducerManager.getProducerTable), groups of the client's own inner
/// producer (CLIENT_INNER_PRODUCER) included, as there. `now_ms` is the wall clock the caller
/// reads; a channel's last heartbeat is kept as an `Instant` and reported as epoch ms.
pub struct GetAllProducers {
    pub now_ms: i64,
}
impl Message for GetAllProducers {
    type Result = BTreeMap<String, Vec<ProducerInfo>>;
}

/// Push a oneway command to every online client of a consumer group (RESET_CONSUMER_CLIENT_OFFSET,
/// from `admin.rs`'s offset reset); replies with how many clients it was handed to. A full
/// connection mailbox drops it for that client, which then keeps its own offsets — the stored
/// offsets were already moved.
pub struct PushToGroup {
    pub group: String,
    pub cmd: RemotingCommand,
}
impl Message for PushToGroup {
    type Result = usize;
}

/// The `MQVersion` ordinals of a group's online consumers (empty: none online), which
/// INVOKE_BROKER_TO_RESET_OFFSET checks before it changes anything (Broker2Client.resetOffset;
/// `admin.rs`).
pub struct ConsumerVersions {
    pub group: String,
}
impl Message for ConsumerVersions {
    type Result = Vec<i32>;
}

/// A client's connection, the `MQVersion` ordinal of its heartbeat and its address.
pub struct ClientChannel {
    pub conn: ActorRef<Connection>,
    pub version: i32,
    pub addr: String,
}

/// The connection of one consumer of a group (RocketMQ's `ConsumerManager.findChannel`), for a
/// request the broker forwards to it (GET_CONSUMER_RUNNING_INFO, `client_call.rs`); `None` when
/// that client is not online in that group.
pub struct FindConsumer {
    pub group: String,
    pub client_id: String,
}
impl Message for FindConsumer {
    type Result = Option<ClientChannel>;
}

/// Every online consumer of a group with its connection (RocketMQ's
/// `ConsumerGroupInfo.getChannelInfoTable`), by client id; empty when none is online. For
/// requests the broker sends to each of them (GET_CONSUMER_STATUS_FROM_CLIENT, `client_call.rs`).
pub struct GroupConsumers(pub String);
impl Message for GroupConsumers {
    type Result = Vec<(String, ClientChannel)>;
}

/// The connection a client id last sent a producer heartbeat through (RocketMQ's
/// `ProducerManager.findChannel`, keyed by client id across groups): where `reply.rs` pushes a
/// reply message for a requester (its `REPLY_TO_CLIENT` property). `None` when no producer of
/// that client is online.
pub struct FindClient(pub String);
impl Message for FindClient {
    type Result = Option<ClientChannel>;
}

// ---------------------------------------------------------------------------------------------
// To Metadata (metadata.rs)

/// Returns the topic, creating it with `queues` queues and `perm` if it does not exist (retry
/// and DLQ topics, auto-created topics; from `send.rs`, `consumer.rs`, `admin.rs`). `Err`: the
/// new table could not be written.
pub struct EnsureTopic {
    pub topic: String,
    pub queues: u32,
    pub perm: u32,
}
impl Message for EnsureTopic {
    type Result = std::io::Result<TopicConfig>;
}

/// Creates or updates a topic (UPDATE_AND_CREATE_TOPIC, `admin.rs`). Answered once the name
/// servers have the new table, as RocketMQ's AdminBrokerProcessor answers after
/// `registerIncrementBrokerData`: a client routing right after `mqadmin updateTopic` finds it.
pub struct CreateTopic(pub TopicConfig);
impl Message for CreateTopic {
    type Result = std::io::Result<()>;
}

/// DELETE_TOPIC_IN_BROKER (`admin.rs`): the topic's config and every `topic@group` offset go.
/// Reply: whether the topic existed (`Err`: `topics.json` could not be written).
pub struct DeleteTopic(pub String);
impl Message for DeleteTopic {
    type Result = std::io::Result<bool>;
}

/// Returns the group, auto-creating it when `autoCreateSubscriptionGroup` is on (from `pull.rs`,
/// `send.rs`, `consumer.rs`). `Ok(None)`: no such group and none created.
pub struct EnsureGroup(pub String);
impl Message for EnsureGroup {
    type Result = std::io::Result<Option<SubscriptionGroupConfig>>;
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (`admin.rs`): the group's config, replaced whole.
/// `Err`: `subscriptionGroup.json` could not be written.
pub struct UpdateGroup(pub SubscriptionGroupConfig);
impl Message for UpdateGroup {
    type Result = std::io::Result<()>;
}

/// DELETE_SUBSCRIPTIONGROUP (207, `admin_store.rs`): the group's config goes (its file is written
/// when it existed, as RocketMQ's `deleteSubscriptionGroupConfig`), and with `remove_offset`
/// every `topic@group` offset of exactly this group (RocketMQ's
/// `ConsumerOffsetManager.removeOffset`; persisted with the next offset flush). Replies whether
/// the config existed.
pub struct DeleteGroup {
    pub group: String,
    pub remove_offset: bool,
}
impl Message for DeleteGroup {
    type Result = std::io::Result<bool>;
}

/// A slave: the master's tables (RocketMQ's `SlaveSynchronize`; from `slave_sync.rs`). Topics
/// and groups are replaced whole, with the master's data version, when that version differs from
/// ours; offsets are merged in (the master's entry wins for each `topic@group`), as RocketMQ's
/// `putAll`.
pub enum FromMaster {
    Topics(TopicTable),
    Groups(GroupTable),
    Offsets(ConsumerOffsets),
}
impl Message for FromMaster {
    /// Whether anything changed.
    type Result = std::io::Result<bool>;
}

/// A consumer's offset for a queue (UPDATE_CONSUMER_OFFSET from `consumer.rs`, the offset a PULL
/// carries from `pull.rs`, an offset reset from `admin.rs`); written to `consumerOffset.json`
/// at the next flush.
pub struct CommitOffset {
    pub group: String,
    pub topic: String,
    pub queue_id: i32,
    pub offset: i64,
}
impl Message for CommitOffset {
    type Result = ();
}

/// QUERY_CONSUMER_OFFSET (`consumer.rs`). Reply: the committed offset, `None` when there is none.
pub struct QueryOffset {
    pub group: String,
    pub topic: String,
    pub queue_id: i32,
}
impl Message for QueryOffset {
    type Result = Option<i64>;
}

/// Every committed offset (admin tools in `admin.rs`, lag metrics in `metrics_source.rs`).
pub struct GetOffsets;
impl Message for GetOffsets {
    type Result = ConsumerOffsets;
}

/// The groups with a committed offset on a topic (QUERY_TOPIC_CONSUME_BY_WHO, `admin.rs`): their
/// names only, not a copy of the table.
pub struct GroupsOfTopic(pub String);
impl Message for GroupsOfTopic {
    type Result = Vec<String>;
}

/// Writes every table now (the clean stop, `wiring.rs`).
pub struct PersistAll;
impl Message for PersistAll {
    type Result = std::io::Result<()>;
}

/// The topic table's dataVersion moves on (persisted, and the registrar told), with no topic
/// changed: for a change in how the table is registered (`brokerPermission`, `admin.rs`), which
/// the name servers take only with a new version.
pub struct TouchTopics;
impl Message for TouchTopics {
    type Result = std::io::Result<()>;
}

// ---------------------------------------------------------------------------------------------
// To PullHold (pull_hold.rs)

/// A PULL that found nothing (`pull.rs`), parked until its queue's max offset passes `offset`
/// or `deadline`; then `conn` gets the request back as a `Resume` and runs it again.
pub struct SuspendPull {
    pub topic: String,
    pub queue_id: i32,
    /// Resumed once the queue's max offset passes this (see `pull_hold::hold`).
    pub offset: u64,
    pub deadline: Instant,
    pub request: RemotingCommand,
    pub conn: ActorRef<Connection>,
}
impl Message for SuspendPull {
    type Result = ();
}

/// New messages in these queues (the ConsumeQueue builder's arrival hook, after each dispatched
/// batch; sent with `try_notify`, a dropped one is covered by PullHold's own scan).
pub struct MessagesArrived(pub Vec<Arrival>);
impl Message for MessagesArrived {
    type Result = ();
}

// ---------------------------------------------------------------------------------------------
// To Registrar (registrar.rs)

/// Register with every name server now (the start, or a topic was created or changed). The
/// topic table's dataVersion must have moved, or name servers keep the queue data they have.
/// The sender, if any, is answered once every name server has answered a registration started
/// after this message (or failed it); dropping it unanswered means the registrar is gone.
#[derive(Default)]
pub struct RegisterNow(pub Option<tokio::sync::oneshot::Sender<()>>);
impl Message for RegisterNow {
    type Result = ();
}

/// Unregister from every name server (clean stop) and stop registering. Replies with how many
/// name servers acknowledged.
pub struct UnregisterAll;
impl Message for UnregisterAll {
    type Result = usize;
}

/// The registration status of each name server, in configuration order.
pub struct GetRegistrations;
impl Message for GetRegistrations {
    type Result = Vec<NamesrvStatus>;
}

/// How registering with one name server is going.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamesrvStatus {
    pub addr: String,
    /// Registrations the name server answered SUCCESS to.
    pub successes: u64,
    pub failures: u64,
    /// The last attempt failed.
    pub failing: bool,
    pub last_error: Option<String>,
    pub last_success: Option<Instant>,
    /// For a slave: the master's address and HA address, as the name server last said.
    pub master_addr: Option<String>,
    pub master_ha_server_addr: Option<String>,
}
