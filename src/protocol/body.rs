//! JSON bodies of remoting commands, with RocketMQ's field names (Java's camelCase, including
//! its irregular spellings: `clientID`, `lockOKMQSet`).
//!
//! Owns: the serde types for HEART_BEAT, GET_CONSUMER_LIST_BY_GROUP, LOCK/UNLOCK_BATCH_MQ,
//! GET_ROUTEINFO_BY_TOPIC (TopicRouteData), REGISTER_BROKER, GET_BROKER_CLUSTER_INFO and topic
//! lists, plus [`parse_java_json`] for JSON written by Java's fastjson and [`to_json_bytes`],
//! which writes it.
//!
//! Invariants:
//! * Reading is as tolerant as fastjson 1.2.69 (see `fastjson.rs`): enums by ordinal or name,
//!   numbers as strings, booleans as `"true"`/`1`, quoted or bare integer map keys; every field
//!   has a default, so a missing field, an explicit `null` (Go clients write `null` for empty
//!   slices) or an unknown extra field never fails a parse. An enum value we do not know reads as
//!   `Unknown` instead of failing the whole heartbeat.
//! * Writing is Apache RocketMQ 4.9.4's text (`RemotingSerializable.encode()`): fields declared
//!   in alphabetical order (fastjson sorts bean properties), `None` fields left out (fastjson
//!   drops nulls), integer map keys bare. Golden strings from Apache's own classes in
//!   `body_tests.rs` pin it. Two known differences: maps and sets come out sorted where Java's
//!   `HashMap`/`HashSet` iteration order is by hash bucket (equal for one entry, and for small
//!   broker ids), and BrokerData carries 5.x's `enableActingMaster` (see [`BrokerData`]).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::fastjson;
use super::fastjson::read as fj;

/// Deserializes `null` as the type's default, so `"tagsSet": null` reads as an empty set.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Parses a JSON body that may come from Java's fastjson, which writes integer map keys
/// unquoted (`{"brokerAddrs":{0:"10.0.0.1:10911"}}`, not valid JSON). Standard JSON is parsed
/// directly; only if that fails are unquoted integer keys quoted (outside string literals) and
/// the parse retried.
pub fn parse_java_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(first) => match quote_integer_keys(bytes) {
            Some(fixed) => serde_json::from_slice(&fixed),
            None => Err(first),
        },
    }
}

/// Serialises a body as fastjson does: compact, integer map keys bare (`{0:"…"}`), which
/// [`parse_java_json`] and every RocketMQ client read.
pub fn to_json_bytes<T: Serialize>(value: &T) -> Result<bytes::Bytes, serde_json::Error> {
    fastjson::to_vec(value).map(bytes::Bytes::from)
}

/// Serialises a body as standard JSON: [`to_json_bytes`]'s text with integer map keys quoted
/// (`{"0":"…"}`) — what a 4.9.4 name server answers GET_ROUTEINFO_BY_TOPIC with when the request
/// is version ≥ 401 (V4_9_4) or sets `acceptStandardJsonOnly` (fastjson's `BrowserCompatible`,
/// namesrv/…/processor/DefaultRequestProcessor.java, `getRouteInfoByTopic`).
pub fn to_standard_json_bytes<T: Serialize>(value: &T) -> Result<bytes::Bytes, serde_json::Error> {
    serde_json::to_vec(value).map(bytes::Bytes::from)
}

/// Quotes fastjson's unquoted integer map keys (the one implementation is
/// [`crate::meta::quote_integer_keys`]). Returns `None` when there was nothing to rewrite.
fn quote_integer_keys(src: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(src).ok()?;
    let fixed = crate::meta::quote_integer_keys(text);
    (fixed != text).then(|| fixed.into_bytes())
}

// ---------------------------------------------------------------------------------------------
// HEART_BEAT (34)

crate::java_enum! {
    /// `ConsumeType` (common/…/protocol/heartbeat/ConsumeType.java; `CONSUME_POP` is 5.x's third).
    pub enum ConsumeType {
        /// Pull consumer.
        ConsumeActively = "CONSUME_ACTIVELY",
        /// Push consumer.
        #[default]
        ConsumePassively = "CONSUME_PASSIVELY",
        /// 5.x pop consumer.
        ConsumePop = "CONSUME_POP",
    }
}

crate::java_enum! {
    /// `MessageModel` (common/…/protocol/heartbeat/MessageModel.java).
    pub enum MessageModel {
        Broadcasting = "BROADCASTING",
        #[default]
        Clustering = "CLUSTERING",
    }
}

crate::java_enum! {
    /// `ConsumeFromWhere` (client-side policy; the broker only records it). Declaration order of
    /// common/…/common/consumer/ConsumeFromWhere.java, deprecated members included: the C++
    /// client sends the ordinal.
    pub enum ConsumeFromWhere {
        #[default]
        ConsumeFromLastOffset = "CONSUME_FROM_LAST_OFFSET",
        ConsumeFromLastOffsetAndFromMinWhenBootFirst =
            "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        ConsumeFromMinOffset = "CONSUME_FROM_MIN_OFFSET",
        ConsumeFromMaxOffset = "CONSUME_FROM_MAX_OFFSET",
        ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        ConsumeFromTimestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

/// `HeartbeatData`: who the client is and which groups/subscriptions it has.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    #[serde(rename = "clientID", deserialize_with = "fj::string")]
    pub client_id: String,
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x heartbeat v2: fingerprint of the subscription set.
    #[serde(
        deserialize_with = "fj::opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub heartbeat_fingerprint: Option<i64>,
    #[serde(deserialize_with = "null_as_default")]
    pub producer_data_set: Vec<ProducerData>,
    /// 5.x heartbeat v2: subscriptions omitted because the fingerprint is unchanged.
    #[serde(
        deserialize_with = "fj::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub without_sub: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    #[serde(deserialize_with = "fj::string")]
    pub group_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    pub consume_from_where: ConsumeFromWhere,
    pub consume_type: ConsumeType,
    #[serde(deserialize_with = "fj::string")]
    pub group_name: String,
    pub message_model: MessageModel,
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(deserialize_with = "fj::bool")]
    pub unit_mode: bool,
}

fn tag_expression() -> String {
    "TAG".to_owned()
}

/// `SubscriptionData`: one topic subscription of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    #[serde(deserialize_with = "fj::bool")]
    pub class_filter_mode: bool,
    /// Java hash codes of `tags_set`; the broker filters ConsumeQueue units by these.
    #[serde(deserialize_with = "fj::i32s")]
    pub code_set: Vec<i32>,
    /// `TAG` or `SQL92`; absent, null or empty ⇒ `TAG`.
    #[serde(deserialize_with = "null_as_tag")]
    pub expression_type: String,
    /// The expression: `*`, `TagA || TagB`, or SQL92.
    #[serde(deserialize_with = "fj::string")]
    pub sub_string: String,
    #[serde(deserialize_with = "fj::i64")]
    pub sub_version: i64,
    /// Tags (the expression split on `||`); clients filter pulled messages by these strings.
    #[serde(deserialize_with = "fj::strings")]
    pub tags_set: Vec<String>,
    #[serde(deserialize_with = "fj::string")]
    pub topic: String,
}

fn null_as_tag<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(fj::opt_string(d)?
        .filter(|s| !s.is_empty())
        .unwrap_or_else(tag_expression))
}

impl Default for SubscriptionData {
    fn default() -> Self {
        SubscriptionData {
            class_filter_mode: false,
            code_set: Vec::new(),
            expression_type: tag_expression(),
            sub_string: String::new(),
            sub_version: 0,
            tags_set: Vec::new(),
            topic: String::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Consumers and queue locks (38, 41, 42)

/// GET_CONSUMER_LIST_BY_GROUP response (`GetConsumerListByGroupResponseBody`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerListBody {
    #[serde(deserialize_with = "fj::strings")]
    pub consumer_id_list: Vec<String>,
}

/// `OffsetMovedEvent` (common/src/main/java/org/apache/rocketmq/common/protocol/topic/
/// OffsetMovedEvent.java): the body of the message 4.9.4's PullMessageProcessor writes to
/// `OFFSET_MOVED_EVENT` when it answers PULL_OFFSET_MOVED. Fields in fastjson's order; write it
/// with [`fastjson::to_vec`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetMovedEvent {
    pub consumer_group: String,
    pub message_queue: MessageQueue,
    pub offset_new: i64,
    pub offset_request: i64,
}

/// `MessageQueue`: one queue of one topic on one broker. Fields in fastjson's (alphabetical)
/// order; ordered as Java's `compareTo` orders them: topic, broker name, queue id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueue {
    #[serde(deserialize_with = "fj::string")]
    pub broker_name: String,
    #[serde(deserialize_with = "fj::i32")]
    pub queue_id: i32,
    #[serde(deserialize_with = "fj::string")]
    pub topic: String,
}

impl Ord for MessageQueue {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.topic, &self.broker_name, self.queue_id).cmp(&(
            &other.topic,
            &other.broker_name,
            other.queue_id,
        ))
    }
}

impl PartialOrd for MessageQueue {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// LOCK_BATCH_MQ request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    #[serde(deserialize_with = "fj::string")]
    pub client_id: String,
    #[serde(deserialize_with = "fj::string")]
    pub consumer_group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub mq_set: Vec<MessageQueue>,
    /// 4.9.x+: do not forward the lock to other brokers.
    #[serde(deserialize_with = "fj::bool")]
    pub only_this_broker: bool,
}

/// LOCK_BATCH_MQ response: the queues now locked by the requesting client.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet", deserialize_with = "null_as_default")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

/// UNLOCK_BATCH_MQ request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UnlockBatchRequestBody {
    #[serde(deserialize_with = "fj::string")]
    pub client_id: String,
    #[serde(deserialize_with = "fj::string")]
    pub consumer_group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub mq_set: Vec<MessageQueue>,
    #[serde(deserialize_with = "fj::bool")]
    pub only_this_broker: bool,
}

// ---------------------------------------------------------------------------------------------
// Routes (105, 106) — Apache's `TopicRouteData`, `QueueData`, `BrokerData`

/// Topic permission bits (`PermName`).
pub mod perm {
    pub const PRIORITY: i32 = 8;
    pub const READ: i32 = 4;
    pub const WRITE: i32 = 2;
    pub const INHERIT: i32 = 1;
}

/// Broker id of a master in `brokerAddrs`; producers only send to it.
pub const MASTER_ID: i64 = 0;

/// GET_ROUTEINFO_BY_TOPIC response body: 4.9.4's `TopicRouteData`, fields alphabetical, `null`s
/// left out.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    #[serde(deserialize_with = "null_as_default")]
    pub broker_datas: Vec<BrokerData>,
    #[serde(deserialize_with = "null_as_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    #[serde(
        deserialize_with = "fj::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub order_topic_conf: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub queue_datas: Vec<QueueData>,
    /// 5.x static topics; kept opaque.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_info: Option<serde_json::Value>,
}

/// Queues of a topic on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    #[serde(deserialize_with = "fj::string")]
    pub broker_name: String,
    /// [`perm`] bits.
    #[serde(deserialize_with = "fj::i32")]
    pub perm: i32,
    #[serde(deserialize_with = "fj::i32")]
    pub read_queue_nums: i32,
    #[serde(deserialize_with = "fj::i32")]
    pub topic_sys_flag: i32,
    #[serde(deserialize_with = "fj::i32")]
    pub write_queue_nums: i32,
}

/// One broker group (master and slaves sharing a broker name).
///
/// `enableActingMaster` is 5.x's and a 4.9.4 name server does not write it; we write it anyway
/// (as a 5.x name server does, in the same alphabetical place) because rocketmq-client-rust 1.0
/// refuses a BrokerData without it (its `BrokerData` has no serde default), while 4.9.4's Java
/// and C++ clients ignore unknown fields.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// broker id → `ip:port`; [`MASTER_ID`] is the master. Written with bare keys, as fastjson.
    #[serde(deserialize_with = "null_as_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    #[serde(deserialize_with = "fj::string")]
    pub broker_name: String,
    #[serde(deserialize_with = "fj::string")]
    pub cluster: String,
    #[serde(deserialize_with = "fj::bool")]
    pub enable_acting_master: bool,
    #[serde(
        deserialize_with = "fj::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub zone_name: Option<String>,
}

/// GET_BROKER_CLUSTER_INFO response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterInfo {
    /// broker name → broker data.
    #[serde(deserialize_with = "null_as_default")]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// cluster name → broker names.
    #[serde(deserialize_with = "null_as_default")]
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

/// Topic lists (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER, …).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    #[serde(
        deserialize_with = "fj::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub broker_addr: Option<String>,
    #[serde(deserialize_with = "fj::strings")]
    pub topic_list: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// REGISTER_BROKER (103) — Apache's `RegisterBrokerBody`

/// REGISTER_BROKER request body (uncompressed form).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    #[serde(deserialize_with = "fj::strings")]
    pub filter_server_list: Vec<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    #[serde(deserialize_with = "null_as_default")]
    pub data_version: DataVersion,
    /// topic name → config.
    #[serde(deserialize_with = "null_as_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

/// `DataVersion`: the name server re-reads a broker's topics only when this changes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    #[serde(deserialize_with = "fj::i64")]
    pub counter: i64,
    /// 5.x.
    #[serde(
        deserialize_with = "fj::opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub state_version: Option<i64>,
    #[serde(deserialize_with = "fj::i64")]
    pub timestamp: i64,
}

crate::java_enum! {
    /// `TopicFilterType` (common/…/common/TopicFilterType.java).
    pub enum TopicFilterType {
        #[default]
        SingleTag = "SINGLE_TAG",
        MultiTag = "MULTI_TAG",
    }
}

/// `TopicConfig`. Defaults are RocketMQ's for a new topic: 16/16 queues, perm RW (6); a `null`
/// or `""` number keeps the default, as in Java.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// 5.x topic attributes.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub attributes: BTreeMap<String, String>,
    #[serde(deserialize_with = "fj::bool")]
    pub order: bool,
    #[serde(deserialize_with = "fj::i32_or::<6, _>")]
    pub perm: i32,
    #[serde(deserialize_with = "fj::i32_or::<16, _>")]
    pub read_queue_nums: i32,
    pub topic_filter_type: TopicFilterType,
    #[serde(deserialize_with = "fj::string")]
    pub topic_name: String,
    #[serde(deserialize_with = "fj::i32")]
    pub topic_sys_flag: i32,
    #[serde(deserialize_with = "fj::i32_or::<16, _>")]
    pub write_queue_nums: i32,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            attributes: BTreeMap::new(),
            order: false,
            perm: perm::READ | perm::WRITE,
            read_queue_nums: 16,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: 16,
        }
    }
}

/// `KVTable`: REGISTER_BROKER response body (ORDER_TOPIC_CONFIG namespace) and KV listings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    #[serde(deserialize_with = "null_as_default")]
    pub table: BTreeMap<String, String>,
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
