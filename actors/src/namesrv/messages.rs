//! Every message of the name server, in one place: what [`super::NamesrvProcessor`] (the
//! remoting side, one per connection thread) asks [`super::RouteRegistry`] (the one actor, which
//! owns the tables), each with the request it serves and what its reply means. The registry's
//! handlers are in `mod.rs` (routes, KV, configuration) and `queries.rs` (322, 224, 304,
//! 311–313).
//!
//! Brokers: [`RegisterBroker`], [`UnregisterBroker`], [`RegisterTopic`], [`QueryDataVersion`],
//! and [`ConnectionClosed`] (the processor, when a connection ends). Clients and admin tools:
//! [`GetRoute`], [`GetClusterInfo`] (also [`super::NamesrvHandle`]'s `route` and
//! `cluster_info`), [`GetAllTopics`], [`GetTopicList`], [`DeleteTopic`], [`SetWritePerm`],
//! [`PutKvConfig`], [`GetKvConfig`], [`DeleteKvConfig`], [`GetKvList`],
//! [`NamesrvConfigRequest`].
//!
//! The processor decodes and checks each request on the connection's thread, so a message
//! carries parsed values and the registry's handlers are table updates. The data the messages
//! carry and answer ([`RegisterBrokerResult`], [`DataVersionAnswer`], [`TopicListQuery`]) is here
//! too, so that this file uses no other name-server module.

use std::collections::BTreeMap;

use actix::prelude::*;
use actormq_core::protocol::body::{
    ClusterInfo, DataVersion, QueueData, RegisterBrokerBody, TopicList, TopicRouteData,
};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader};

// ---------------------------------------------------------------------------------------------
// From brokers

/// A broker's REGISTER_BROKER (103), decoded and checked (CRC, compression) by the processor.
/// Reply: what the broker is told back ([`RegisterBrokerResult`]).
pub struct RegisterBroker {
    pub header: RegisterBrokerRequestHeader,
    pub body: RegisterBrokerBody,
    /// The connection it came through, so closing that connection can drop the broker.
    pub conn_id: Option<u64>,
}

/// What a registering broker learns: for a slave, its live master's HA address and address;
/// for every broker, the KV table's ORDER_TOPIC_CONFIG namespace (`None` if never made), which
/// 4.9.4 sends as the REGISTER_BROKER response body (`DefaultRequestProcessor.registerBroker*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterBrokerResult {
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
    pub order_topic_config: Option<BTreeMap<String, String>>,
}

impl Message for RegisterBroker {
    type Result = RegisterBrokerResult;
}

/// UNREGISTER_BROKER (104: a broker shutting down cleanly): its address leaves the tables.
pub struct UnregisterBroker(pub UnregisterBrokerRequestHeader);
impl Message for UnregisterBroker {
    type Result = ();
}

/// REGISTER_TOPIC_IN_NAMESRV (217): queue data for one topic, sent after a broker auto-creates
/// it.
pub struct RegisterTopic {
    pub topic: String,
    /// An empty `broker_name` means "the master(s) registered through `conn_id`" (bodies that
    /// carry a topic config rather than queue data do not name their broker).
    pub queue_datas: Vec<QueueData>,
    pub conn_id: Option<u64>,
}
impl Message for RegisterTopic {
    type Result = ();
}

/// QUERY_DATA_VERSION (322): does `data_version` (`None`: the body was JSON `null`) differ from
/// what `broker_addr` last registered? Reply: [`DataVersionAnswer`]; an unchanged answer counts
/// as a heartbeat.
pub struct QueryDataVersion {
    /// `None`: a request without extFields, which 4.9.4 reads as a null address (unknown).
    pub broker_addr: Option<String>,
    pub data_version: Option<DataVersion>,
}

/// The answer: `changed`, and the version the name server holds for the address, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataVersionAnswer {
    pub changed: bool,
    pub current: Option<DataVersion>,
}

impl Message for QueryDataVersion {
    type Result = DataVersionAnswer;
}

/// A remoting connection closed (sent by the processor, best effort: a full mailbox leaves it to
/// the expiry scan): brokers that registered through it are gone.
pub struct ConnectionClosed(pub u64);
impl Message for ConnectionClosed {
    type Result = ();
}

// ---------------------------------------------------------------------------------------------
// From clients and admin tools

/// GET_ROUTEINFO_BY_TOPIC (105): the route of a topic, `None` when no live broker serves it
/// (TOPIC_NOT_EXIST). With `orderMessageEnable` on, it carries the topic's `orderTopicConf` from
/// the KV table.
pub struct GetRoute(pub String);
impl Message for GetRoute {
    type Result = Option<TopicRouteData>;
}

/// GET_BROKER_CLUSTER_INFO (106): every broker name's addresses and every cluster's broker names.
pub struct GetClusterInfo;
impl Message for GetClusterInfo {
    type Result = ClusterInfo;
}

/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every topic with queue data, sorted.
pub struct GetAllTopics;
impl Message for GetAllTopics {
    type Result = Vec<String>;
}

/// Which topic list GET_TOPICS_BY_CLUSTER and 304/311/312/313 ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicListQuery {
    /// `None`: a request without extFields, which 4.9.4 reads as a null cluster.
    ByCluster(Option<String>),
    System,
    Unit,
    HasUnitSub,
    HasUnitSubUnUnit,
}

/// One of the topic lists of [`TopicListQuery`] (224, 304, 311, 312, 313; see `queries.rs`).
pub struct GetTopicList(pub TopicListQuery);
impl Message for GetTopicList {
    type Result = TopicList;
}

/// DELETE_TOPIC_IN_NAMESRV (216): drop a topic's queue data, of one cluster's brokers or of all.
/// Replies with how many brokers' entries went.
pub struct DeleteTopic {
    pub topic: String,
    pub cluster: Option<String>,
}
impl Message for DeleteTopic {
    type Result = usize;
}

/// WIPE_WRITE_PERM_OF_BROKER (`write: false`) and ADD_WRITE_PERM_OF_BROKER (`write: true`), as
/// `mqadmin wipeWritePerm` / `addWritePerm` send them: the write bit of every topic's queue data
/// of a broker name goes (producers stop choosing it, consumers drain it) or comes back as
/// read+write. Kept until the broker's topic table changes (its next dataVersion), as in
/// RocketMQ. Replies with how many topics were changed.
pub struct SetWritePerm {
    pub broker_name: String,
    pub write: bool,
}
impl Message for SetWritePerm {
    type Result = usize;
}

/// PUT_KV_CONFIG: set a key (the table is then written to `kvConfigPath`). `Err` is a remark: the
/// value is set in memory but the file could not be written.
pub struct PutKvConfig {
    pub namespace: String,
    pub key: String,
    pub value: String,
}
impl Message for PutKvConfig {
    type Result = Result<(), String>;
}

/// GET_KV_CONFIG: a key's value, `None` if the namespace or key does not exist.
pub struct GetKvConfig {
    pub namespace: String,
    pub key: String,
}
impl Message for GetKvConfig {
    type Result = Option<String>;
}

/// DELETE_KV_CONFIG: remove a key (the table is then written when something went). `Err` as
/// for [`PutKvConfig`].
pub struct DeleteKvConfig {
    pub namespace: String,
    pub key: String,
}
impl Message for DeleteKvConfig {
    type Result = Result<(), String>;
}

/// GET_KVLIST_BY_NAMESPACE: every key of a namespace, `None` if it was never made.
pub struct GetKvList(pub String);
impl Message for GetKvList {
    type Result = Option<BTreeMap<String, String>>;
}

/// GET_NAMESRV_CONFIG (`update: false`) or UPDATE_NAMESRV_CONFIG (`update: true`), answered
/// by the registry's `NamesrvConfig` (`config.rs`); `peer` is who asked, for the log. Reply: the
/// whole response.
pub struct NamesrvConfigRequest {
    pub req: RemotingCommand,
    pub peer: String,
    pub update: bool,
}
impl Message for NamesrvConfigRequest {
    type Result = RemotingCommand;
}
