//! What a consumer reports about itself, as its Java client writes it: [`ConsumerRunningInfo`]
//! (the body of a client's answer to GET_CONSUMER_RUNNING_INFO 307, which the broker relays to
//! mqadmin `consumerStatus`) and [`GetConsumerStatusBody`] (INVOKE_BROKER_TO_GET_CONSUMER_STATUS
//! 223, mqadmin `getConsumerStatus`).
//!
//! Both carry maps keyed by a `MessageQueue` object, which fastjson writes unquoted
//! (`{{"brokerName":"b","queueId":0,"topic":"T"}:…}`); they are read with
//! [`super::admin::parse_java_keyed_json`] and become `(MessageQueue, value)` lists in queue
//! order (Java's `TreeMap<MessageQueue, …>` order: topic, broker name, queue id).
//!
//! The broker's own answer to 223 is written by [`consumer_status_json`], as 4.9.4's
//! `Broker2Client.getConsumeStatus` writes it: each client's offsets as the client reported
//! them ([`client_offsets`], read in the client's order), both maps in Java's `HashMap`
//! iteration order ([`java_hashmap_order`]).
//!
//! Invariant: reading never panics; a body that is not one of these is an error naming what
//! was wrong. Property values that are not strings (a client may put numbers or booleans in
//! its `Properties`) read as their JSON text.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::admin::{json_str, mq_keys, parse_java_keyed_json, push_mq_map};
use super::body::{MessageQueue, SubscriptionData};
use crate::format::java::java_string_hash;

/// `ProcessQueueInfo`: a push consumer's view of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProcessQueueInfo {
    pub commit_offset: i64,
    pub cached_msg_min_offset: i64,
    pub cached_msg_max_offset: i64,
    pub cached_msg_count: i32,
    #[serde(rename = "cachedMsgSizeInMiB")]
    pub cached_msg_size_in_mib: i32,
    pub transaction_msg_min_offset: i64,
    pub transaction_msg_max_offset: i64,
    pub transaction_msg_count: i32,
    pub locked: bool,
    pub try_unlock_times: i64,
    pub last_lock_timestamp: i64,
    /// Java's spelling.
    pub droped: bool,
    pub last_pull_timestamp: i64,
    pub last_consume_timestamp: i64,
}

/// `ConsumeStatus`: a consumer's rates for one topic.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStatus {
    #[serde(rename = "pullRT")]
    pub pull_rt: f64,
    #[serde(rename = "pullTPS")]
    pub pull_tps: f64,
    #[serde(rename = "consumeRT")]
    pub consume_rt: f64,
    #[serde(rename = "consumeOKTPS")]
    pub consume_ok_tps: f64,
    #[serde(rename = "consumeFailedTPS")]
    pub consume_failed_tps: f64,
    pub consume_failed_msgs: i64,
}

/// `ConsumerRunningInfo`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerRunningInfo {
    /// The client's `Properties` (PROP_CONSUME_TYPE, PROP_CONSUMEORDERLY, …), sorted by key.
    pub properties: BTreeMap<String, String>,
    pub subscription_set: Vec<SubscriptionData>,
    pub mq_table: Vec<(MessageQueue, ProcessQueueInfo)>,
    /// topic → rates.
    pub status_table: BTreeMap<String, ConsumeStatus>,
    pub jstack: Option<String>,
}

impl ConsumerRunningInfo {
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Raw {
            properties: BTreeMap<String, serde_json::Value>,
            subscription_set: Vec<SubscriptionData>,
            mq_table: BTreeMap<String, ProcessQueueInfo>,
            status_table: BTreeMap<String, ConsumeStatus>,
            jstack: Option<String>,
        }
        let raw: Raw = parse_java_keyed_json(bytes)?;
        let text = |v: serde_json::Value| match v {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        let mut mq_table = mq_keys(raw.mq_table)?;
        mq_table.sort_by(|a, b| a.0.cmp(&b.0));
        let mut subscription_set = raw.subscription_set;
        // Java's TreeSet<SubscriptionData> orders by topic, then expression.
        subscription_set.sort_by(|a, b| (&a.topic, &a.sub_string).cmp(&(&b.topic, &b.sub_string)));
        Ok(ConsumerRunningInfo {
            properties: raw
                .properties
                .into_iter()
                .map(|(k, v)| (k, text(v)))
                .collect(),
            subscription_set,
            mq_table,
            status_table: raw.status_table,
            jstack: raw.jstack,
        })
    }

    /// A property's value, if the client set it.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }
}

/// `GetConsumerStatusBody`: each client's offsets (clientId → queue → offset).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GetConsumerStatusBody {
    pub message_queue_table: Vec<(MessageQueue, i64)>,
    pub consumer_table: BTreeMap<String, Vec<(MessageQueue, i64)>>,
}

impl GetConsumerStatusBody {
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Raw {
            message_queue_table: BTreeMap<String, i64>,
            consumer_table: BTreeMap<String, BTreeMap<String, i64>>,
        }
        let raw: Raw = parse_java_keyed_json(bytes)?;
        let sorted = |t: BTreeMap<String, i64>| -> Result<Vec<(MessageQueue, i64)>, String> {
            let mut v = mq_keys(t)?;
            v.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(v)
        };
        let consumer_table = raw
            .consumer_table
            .into_iter()
            .map(|(id, t)| sorted(t).map(|t| (id, t)))
            .collect::<Result<_, _>>()?;
        Ok(GetConsumerStatusBody {
            message_queue_table: sorted(raw.message_queue_table)?,
            consumer_table,
        })
    }
}

/// The offsets a consumer answers GET_CONSUMER_STATUS_FROM_CLIENT (221) with: its body's
/// `messageQueueTable` (`GetConsumerStatusBody`), in the order the client wrote them. `None`
/// when the table is absent or `null` (fastjson then leaves the client out of the broker's
/// answer); an error when the body is not such a body.
pub fn client_offsets(bytes: &[u8]) -> Result<Option<Vec<(MessageQueue, i64)>>, String> {
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    struct Raw {
        message_queue_table: Option<InOrder<i64>>,
    }
    let raw: Raw = parse_java_keyed_json(bytes)?;
    raw.message_queue_table.map(|t| mq_keys(t.0)).transpose()
}

/// INVOKE_BROKER_TO_GET_CONSUMER_STATUS's answer body: `{"consumerTable":{…},
/// "messageQueueTable":{}}`, each client's table under its id, clients and queues in Java's
/// `HashMap` order for the order they are given in.
pub fn consumer_status_json(clients: Vec<(String, Vec<(MessageQueue, i64)>)>) -> String {
    let clients = java_hashmap_order(clients, |(id, _)| java_string_hash(id));
    let mut s = String::from("{\"consumerTable\":{");
    for (i, (id, table)) in clients.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&json_str(&id));
        s.push(':');
        push_mq_map(&mut s, &java_hashmap_order(table, |(mq, _)| mq_hash(mq)));
    }
    s.push_str("},\"messageQueueTable\":{}}");
    s
}

/// `MessageQueue.hashCode()` (4.9.4): `31`-folded broker name, queue id, topic.
pub fn mq_hash(mq: &MessageQueue) -> i32 {
    let r = 31i32.wrapping_add(java_string_hash(&mq.broker_name));
    let r = r.wrapping_mul(31).wrapping_add(mq.queue_id);
    r.wrapping_mul(31).wrapping_add(java_string_hash(&mq.topic))
}

/// The order a Java `HashMap` iterates `items` in, had they been `put` one by one in this
/// order into a new map: by bucket (the key's spread hash, `h ^ h >>> 16`, masked by the table
/// size, which starts at 16 and doubles past 3/4 full), then insertion order within a bucket.
/// Not modelled: Java doubles a table under 64 buckets when a ninth key joins one bucket
/// ([`crate::format::java_order`] models that for properties).
pub fn java_hashmap_order<T>(items: Vec<T>, hash: impl Fn(&T) -> i32) -> Vec<T> {
    let mut cap = 16usize;
    while items.len() * 4 > cap * 3 {
        cap *= 2;
    }
    let mut keyed: Vec<(usize, T)> = items
        .into_iter()
        .map(|t| {
            let h = hash(&t) as u32;
            (((h ^ (h >> 16)) as usize) & (cap - 1), t)
        })
        .collect();
    keyed.sort_by_key(|(bucket, _)| *bucket);
    keyed.into_iter().map(|(_, t)| t).collect()
}

/// A JSON object read as its entries in text order (serde_json's maps sort their keys).
struct InOrder<V>(Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for InOrder<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = InOrder<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(e) = m.next_entry()? {
                    entries.push(e);
                }
                Ok(InOrder(entries))
            }
        }
        d.deserialize_map(Entries(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_java_client_running_info_with_object_keys() {
        let body = br#"{"jstack":null,"mqTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"cachedMsgCount":2,"commitOffset":7,"droped":false,"locked":true},{"brokerName":"b","queueId":0,"topic":"T"}:{"commitOffset":5}},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMER_START_TIMESTAMP":1700000000000},"statusTable":{"T":{"consumeFailedMsgs":0,"consumeOKTPS":1.5,"consumeRT":0.0,"pullRT":2.0,"pullTPS":3.0}},"subscriptionSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}]}"#;
        let info = ConsumerRunningInfo::parse(body).unwrap();
        assert_eq!(info.mq_table[0].0.queue_id, 0);
        assert_eq!(info.mq_table[1].1.commit_offset, 7);
        assert!(info.mq_table[1].1.locked);
        assert_eq!(
            info.property("PROP_CONSUMER_START_TIMESTAMP"),
            Some("1700000000000")
        );
        assert_eq!(info.status_table["T"].consume_ok_tps, 1.5);
        assert_eq!(info.subscription_set[0].sub_string, "*");
        assert!(info.jstack.is_none());
    }

    #[test]
    fn reads_a_consumer_status_body_and_refuses_garbage() {
        let body = br#"{"consumerTable":{"c1":{{"brokerName":"b","queueId":0,"topic":"T"}:3}},"messageQueueTable":{}}"#;
        let s = GetConsumerStatusBody::parse(body).unwrap();
        assert_eq!(s.consumer_table["c1"][0].1, 3);
        assert!(GetConsumerStatusBody::parse(b"[").is_err());
        assert!(ConsumerRunningInfo::parse(br#"{"mqTable":{"x":{}}}"#).is_err());
    }

    fn q(broker: &str, queue_id: i32) -> MessageQueue {
        MessageQueue {
            topic: "T1".into(),
            broker_name: broker.into(),
            queue_id,
        }
    }

    /// Golden: what Apache 4.9.4's broker answered 223 with, two clients having answered 221
    /// (client A with the five queues in this order).
    #[test]
    fn writes_the_merged_table_in_java_hashmap_order() {
        let a = br#"{"consumerTable":{},"messageQueueTable":{{"brokerName":"broker-a","queueId":3,"topic":"T1"}:30,{"brokerName":"broker-a","queueId":0,"topic":"T1"}:0,{"brokerName":"broker-a","queueId":1,"topic":"T1"}:10,{"brokerName":"broker-b","queueId":2,"topic":"T1"}:20,{"brokerName":"broker-a","queueId":2,"topic":"T1"}:-1}}"#;
        let a = client_offsets(a).unwrap().unwrap();
        assert_eq!(a[0], (q("broker-a", 3), 30));
        let clients = vec![
            ("10.0.0.1@A".to_string(), a),
            ("10.0.0.2@B".to_string(), vec![(q("broker-a", 7), 70)]),
        ];
        assert_eq!(
            consumer_status_json(clients),
            r#"{"consumerTable":{"10.0.0.2@B":{{"brokerName":"broker-a","queueId":7,"topic":"T1"}:70},"10.0.0.1@A":{{"brokerName":"broker-a","queueId":1,"topic":"T1"}:10,{"brokerName":"broker-b","queueId":2,"topic":"T1"}:20,{"brokerName":"broker-a","queueId":0,"topic":"T1"}:0,{"brokerName":"broker-a","queueId":3,"topic":"T1"}:30,{"brokerName":"broker-a","queueId":2,"topic":"T1"}:-1}},"messageQueueTable":{}}"#
        );
        assert_eq!(
            consumer_status_json(vec![("10.0.0.6@F".into(), vec![])]),
            r#"{"consumerTable":{"10.0.0.6@F":{}},"messageQueueTable":{}}"#
        );
    }

    #[test]
    fn client_offsets_refuse_garbage_and_read_null_as_absent() {
        assert!(client_offsets(b"not json").is_err());
        assert!(client_offsets(br#"{"messageQueueTable":{"x":1}}"#).is_err());
        assert_eq!(client_offsets(br#"{"messageQueueTable":null}"#), Ok(None));
        assert_eq!(client_offsets(br#"{}"#), Ok(None));
        assert_eq!(
            client_offsets(br#"{"messageQueueTable":{}}"#),
            Ok(Some(vec![]))
        );
    }

    #[test]
    fn hashmap_order_grows_the_table_as_java_does() {
        // 13 keys hashing 0..13 and 16..29: a 32-bucket table keeps them apart in hash order.
        let keys: Vec<i32> = (0..13)
            .map(|i| if i % 2 == 0 { i } else { 16 + i })
            .collect();
        let order = java_hashmap_order(keys.clone(), |k| *k);
        let mut sorted = keys;
        sorted.sort();
        assert_eq!(order, sorted);
        // 12 keys fit 16 buckets: 16 + i shares bucket i, after it in insertion order.
        assert_eq!(java_hashmap_order(vec![17, 1, 0], |k| *k), vec![0, 17, 1]);
    }
}
