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
//! Invariant: reading never panics; a body that is not one of these is an error naming what
//! was wrong. Property values that are not strings (a client may put numbers or booleans in
//! its `Properties`) read as their JSON text.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::admin::{mq_keys, parse_java_keyed_json};
use super::body::{MessageQueue, SubscriptionData};

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
}
