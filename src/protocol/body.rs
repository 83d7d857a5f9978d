//! JSON bodies of remoting commands, with RocketMQ's field names (Java's camelCase, including
//! its irregular spellings: `clientID`, `lockOKMQSet`).
//!
//! Owns: the serde types for HEART_BEAT, GET_CONSUMER_LIST_BY_GROUP, LOCK/UNLOCK_BATCH_MQ,
//! GET_ROUTEINFO_BY_TOPIC (TopicRouteData), REGISTER_BROKER, GET_BROKER_CLUSTER_INFO and topic
//! lists, plus [`parse_java_json`] for JSON written by Java's fastjson.
//!
//! Invariants:
//! * Reading is tolerant: every field has a default, so a missing field, an explicit `null`
//!   (Go clients write `null` for empty slices) or an unknown extra field never fails a parse.
//!   An enum value we do not know reads as `Unknown` instead of failing the whole heartbeat.
//! * Writing is exact: fields come out in the order and with the `null`s the traced broker uses
//!   (see `topic_route_data_serialises_like_the_trace`), and map keys are always quoted
//!   (standard JSON, which every client accepts).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

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

/// Serialises a body as standard JSON.
pub fn to_json_bytes<T: Serialize>(value: &T) -> Result<bytes::Bytes, serde_json::Error> {
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

/// `ConsumeType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeType {
    /// Pull consumer.
    ConsumeActively,
    /// Push consumer.
    #[default]
    ConsumePassively,
    /// 5.x pop consumer.
    ConsumePop,
    #[serde(other)]
    Unknown,
}

/// `MessageModel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MessageModel {
    Broadcasting,
    #[default]
    Clustering,
    #[serde(other)]
    Unknown,
}

/// `ConsumeFromWhere` (client-side policy; the broker only records it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeFromWhere {
    #[default]
    ConsumeFromLastOffset,
    ConsumeFromLastOffsetAndFromMinWhenBootFirst,
    ConsumeFromMinOffset,
    ConsumeFromMaxOffset,
    ConsumeFromFirstOffset,
    ConsumeFromTimestamp,
    #[serde(other)]
    Unknown,
}

/// `HeartbeatData`: who the client is and which groups/subscriptions it has.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    #[serde(rename = "clientID", deserialize_with = "null_as_default")]
    pub client_id: String,
    #[serde(deserialize_with = "null_as_default")]
    pub producer_data_set: Vec<ProducerData>,
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x heartbeat v2: fingerprint of the subscription set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_fingerprint: Option<i64>,
    /// 5.x heartbeat v2: subscriptions omitted because the fingerprint is unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub without_sub: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    #[serde(deserialize_with = "null_as_default")]
    pub group_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    #[serde(deserialize_with = "null_as_default")]
    pub group_name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub consume_type: ConsumeType,
    #[serde(deserialize_with = "null_as_default")]
    pub message_model: MessageModel,
    #[serde(deserialize_with = "null_as_default")]
    pub consume_from_where: ConsumeFromWhere,
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(deserialize_with = "null_as_default")]
    pub unit_mode: bool,
}

fn tag_expression() -> String {
    "TAG".to_owned()
}

/// `SubscriptionData`: one topic subscription of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    #[serde(deserialize_with = "null_as_default")]
    pub class_filter_mode: bool,
    #[serde(deserialize_with = "null_as_default")]
    pub topic: String,
    /// The expression: `*`, `TagA || TagB`, or SQL92.
    #[serde(deserialize_with = "null_as_default")]
    pub sub_string: String,
    /// Tags (the expression split on `||`); clients filter pulled messages by these strings.
    #[serde(deserialize_with = "null_as_default")]
    pub tags_set: Vec<String>,
    /// Java hash codes of `tags_set`; the broker filters ConsumeQueue units by these.
    #[serde(deserialize_with = "null_as_default")]
    pub code_set: Vec<i32>,
    #[serde(deserialize_with = "null_as_default")]
    pub sub_version: i64,
    /// `TAG` or `SQL92`; absent or null ⇒ `TAG`.
    #[serde(deserialize_with = "null_as_tag")]
    pub expression_type: String,
}

fn null_as_tag<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(tag_expression))
}

impl Default for SubscriptionData {
    fn default() -> Self {
        SubscriptionData {
            class_filter_mode: false,
            topic: String::new(),
            sub_string: String::new(),
            tags_set: Vec::new(),
            code_set: Vec::new(),
            sub_version: 0,
            expression_type: tag_expression(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Consumers and queue locks (38, 41, 42)

/// GET_CONSUMER_LIST_BY_GROUP response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerListBody {
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_id_list: Vec<String>,
}

/// `MessageQueue`: one queue of one topic on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueue {
    #[serde(deserialize_with = "null_as_default")]
    pub topic: String,
    #[serde(deserialize_with = "null_as_default")]
    pub broker_name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub queue_id: i32,
}

/// LOCK_BATCH_MQ request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub client_id: String,
    /// 4.9.x+: do not forward the lock to other brokers.
    #[serde(deserialize_with = "null_as_default")]
    pub only_this_broker: bool,
    #[serde(deserialize_with = "null_as_default")]
    pub mq_set: Vec<MessageQueue>,
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
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub client_id: String,
    #[serde(deserialize_with = "null_as_default")]
    pub only_this_broker: bool,
    #[serde(deserialize_with = "null_as_default")]
    pub mq_set: Vec<MessageQueue>,
}

// ---------------------------------------------------------------------------------------------
// Routes (105, 106) — spec §11.11

/// Topic permission bits (`PermName`).
pub mod perm {
    pub const PRIORITY: i32 = 8;
    pub const READ: i32 = 4;
    pub const WRITE: i32 = 2;
    pub const INHERIT: i32 = 1;
}

/// Broker id of a master in `brokerAddrs`; producers only send to it.
pub const MASTER_ID: i64 = 0;

/// GET_ROUTEINFO_BY_TOPIC response body. Field order and explicit `null`s as the traced broker
/// writes them (and the traced client accepted).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    pub order_topic_conf: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub queue_datas: Vec<QueueData>,
    #[serde(deserialize_with = "null_as_default")]
    pub broker_datas: Vec<BrokerData>,
    #[serde(deserialize_with = "null_as_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// 5.x static topics; kept opaque.
    pub topic_queue_mapping_info: Option<serde_json::Value>,
}

/// Queues of a topic on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    #[serde(deserialize_with = "null_as_default")]
    pub broker_name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub read_queue_nums: i32,
    #[serde(deserialize_with = "null_as_default")]
    pub write_queue_nums: i32,
    /// [`perm`] bits.
    #[serde(deserialize_with = "null_as_default")]
    pub perm: i32,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_sys_flag: i32,
}

/// One broker group (master and slaves sharing a broker name).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    #[serde(deserialize_with = "null_as_default")]
    pub cluster: String,
    #[serde(deserialize_with = "null_as_default")]
    pub broker_name: String,
    /// broker id → `ip:port`; [`MASTER_ID`] is the master. Serialised with quoted keys.
    #[serde(deserialize_with = "null_as_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    pub zone_name: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub enable_acting_master: bool,
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
    #[serde(deserialize_with = "null_as_default")]
    pub topic_list: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// REGISTER_BROKER (103) — spec §12

/// REGISTER_BROKER request body (uncompressed form).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    #[serde(deserialize_with = "null_as_default")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
    #[serde(deserialize_with = "null_as_default")]
    pub filter_server_list: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    /// topic name → config.
    #[serde(deserialize_with = "null_as_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    #[serde(deserialize_with = "null_as_default")]
    pub data_version: DataVersion,
}

/// `DataVersion`: the name server re-reads a broker's topics only when this changes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    #[serde(deserialize_with = "null_as_default")]
    pub timestamp: i64,
    #[serde(deserialize_with = "null_as_default")]
    pub counter: i64,
    /// 5.x.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_version: Option<i64>,
}

/// `TopicFilterType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TopicFilterType {
    #[default]
    SingleTag,
    MultiTag,
    #[serde(other)]
    Unknown,
}

/// `TopicConfig`. Defaults are RocketMQ's for a new topic: 16/16 queues, perm RW (6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    #[serde(deserialize_with = "null_as_default")]
    pub topic_name: String,
    /// Absent ⇒ 16; `null` ⇒ 0 (as every other `null` number here).
    #[serde(deserialize_with = "null_as_default")]
    pub read_queue_nums: i32,
    #[serde(deserialize_with = "null_as_default")]
    pub write_queue_nums: i32,
    #[serde(deserialize_with = "null_as_default")]
    pub perm: i32,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_filter_type: TopicFilterType,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_sys_flag: i32,
    #[serde(deserialize_with = "null_as_default")]
    pub order: bool,
    /// 5.x topic attributes.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub attributes: BTreeMap<String, String>,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            topic_name: String::new(),
            read_queue_nums: 16,
            write_queue_nums: 16,
            perm: perm::READ | perm::WRITE,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_sys_flag: 0,
            order: false,
            attributes: BTreeMap::new(),
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
