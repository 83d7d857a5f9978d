//! Broker metadata kept under `${storePathRootDir}/config/`, in RocketMQ's JSON shapes so a
//! RocketMQ broker (and its tools) can read what ActorMQ wrote and the other way round:
//!
//! * `topics.json` — `{"dataVersion":{..},"topicConfigTable":{"<topic>":{TopicConfig}}}`
//! * `subscriptionGroup.json` — `{"dataVersion":{..},"subscriptionGroupTable":{"<group>":{..}}}`
//! * `consumerOffset.json` — `{"offsetTable":{"<topic>@<group>":{"<queueId>":<offset>}}}`
//!
//! Pure data and (de)serialisation; the `Metadata` actor owns the files. Java writes integer map
//! keys unquoted (`{0:12}`); we write standard JSON and read both.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const PERM_PRIORITY: u32 = 8;
pub const PERM_READ: u32 = 4;
pub const PERM_WRITE: u32 = 2;
pub const PERM_INHERIT: u32 = 1;

/// The topic producers auto-create from when `autoCreateTopicEnable` is on.
pub const AUTO_CREATE_TOPIC: &str = "TBW102";
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";

pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    #[serde(default)]
    pub timestamp: i64,
    #[serde(default)]
    pub counter: i64,
}

impl DataVersion {
    pub fn next(&mut self, now_ms: i64) {
        self.timestamp = now_ms;
        self.counter += 1;
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    pub topic_name: String,
    pub read_queue_nums: u32,
    pub write_queue_nums: u32,
    pub perm: u32,
    pub topic_filter_type: String,
    pub topic_sys_flag: u32,
    pub order: bool,
    /// RocketMQ 5.x topic attributes (`message.type`, `queue.type`, …): kept as read, so a
    /// topics.json written by RocketMQ 5 loses nothing when ActorMQ rewrites it, and passed on to
    /// the name server.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

impl Default for TopicConfig {
    /// RocketMQ's defaults for a new topic: 16/16 queues, read+write, single tag.
    fn default() -> Self {
        TopicConfig {
            topic_name: String::new(),
            read_queue_nums: 16,
            write_queue_nums: 16,
            perm: PERM_READ | PERM_WRITE,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: 0,
            order: false,
            attributes: BTreeMap::new(),
        }
    }
}

impl TopicConfig {
    pub fn new(name: &str, read: u32, write: u32, perm: u32) -> TopicConfig {
        TopicConfig {
            topic_name: name.into(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            ..Default::default()
        }
    }
    pub fn readable(&self) -> bool {
        self.perm & PERM_READ != 0
    }
    pub fn writable(&self) -> bool {
        self.perm & PERM_WRITE != 0
    }
    pub fn inheritable(&self) -> bool {
        self.perm & PERM_INHERIT != 0
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicTable {
    pub data_version: DataVersion,
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupConfig {
    pub group_name: String,
    pub consume_enable: bool,
    pub consume_from_min_enable: bool,
    pub consume_broadcast_enable: bool,
    pub retry_queue_nums: u32,
    pub retry_max_times: i32,
    pub broker_id: u64,
    pub which_broker_when_consume_slowly: u64,
    pub notify_consumer_ids_changed_enable: bool,
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        SubscriptionGroupConfig {
            group_name: String::new(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupTable {
    pub data_version: DataVersion,
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

/// `consumerOffset.json`: `"topic@group"` → queue id → next offset to consume.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerOffsets {
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl ConsumerOffsets {
    pub fn key(topic: &str, group: &str) -> String {
        format!("{topic}@{group}")
    }
    pub fn get(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        self.offset_table
            .get(&Self::key(topic, group))?
            .get(&queue_id)
            .copied()
    }
    pub fn set(&mut self, topic: &str, group: &str, queue_id: i32, offset: i64) {
        self.offset_table
            .entry(Self::key(topic, group))
            .or_default()
            .insert(queue_id, offset);
    }
}

/// Parses JSON that Java's fastjson may have written with unquoted integer map keys.
pub fn from_java_json<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    serde_json::from_str(&quote_integer_keys(text)).map_err(|e| e.to_string())
}

/// Pretty JSON, as RocketMQ writes its config files (humans read them).
pub fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into())
}

/// Turns `{1:5,` into `{"1":5,` outside of strings (Java's fastjson map-key style). Splits
/// happen only at ASCII positions, so multi-byte UTF-8 text is copied intact.
pub fn quote_integer_keys(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 16);
    let mut copied = 0; // bytes of `s` already in `out`
    let (mut in_str, mut escaped) = (false, false);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
        } else if c == b'{' || c == b',' {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let start = j;
            if j < b.len() && b[j] == b'-' {
                j += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let mut k = j;
            while k < b.len() && b[k].is_ascii_whitespace() {
                k += 1;
            }
            if j > start && k < b.len() && b[k] == b':' {
                out.push_str(&s[copied..start]);
                out.push('"');
                out.push_str(&s[start..j]);
                out.push('"');
                copied = j;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&s[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_offsets_read_java_unquoted_keys_and_round_trip() {
        let java = r#"{"offsetTable":{"TopicTest@g1":{0:12,1:15},"%RETRY%g1@g1":{0:0}}}"#;
        let o: ConsumerOffsets = from_java_json(java).unwrap();
        assert_eq!(o.get("TopicTest", "g1", 1), Some(15));
        assert_eq!(o.get("%RETRY%g1", "g1", 0), Some(0));
        let back: ConsumerOffsets = from_java_json(&to_json(&o)).unwrap();
        assert_eq!(back, o);
    }

    #[test]
    fn topics_json_has_rocketmq_field_names() {
        let mut t = TopicTable::default();
        t.topic_config_table
            .insert("T".into(), TopicConfig::new("T", 4, 4, 6));
        let j = to_json(&t);
        for f in [
            "dataVersion",
            "topicConfigTable",
            "topicName",
            "readQueueNums",
            "writeQueueNums",
            "perm",
            "topicFilterType",
            "topicSysFlag",
            "order",
        ] {
            assert!(j.contains(&format!("\"{f}\"")), "{f} in {j}");
        }
        let java = r#"{"dataVersion":{"counter":3,"timestamp":1},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4,"attributes":{}}}}"#;
        let t2: TopicTable = from_java_json(java).unwrap();
        assert_eq!(t2.topic_config_table["T"], TopicConfig::new("T", 4, 4, 6));
    }

    #[test]
    fn rocketmq_5_topic_attributes_survive_a_rewrite_of_topics_json() {
        let java = r#"{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"F":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"F","topicSysFlag":0,"writeQueueNums":8,"attributes":{"message.type":"FIFO","queue.type":"BatchCQ"}}}}"#;
        let t: TopicTable = from_java_json(java).unwrap();
        let attrs = &t.topic_config_table["F"].attributes;
        assert_eq!(attrs.get("message.type").map(String::as_str), Some("FIFO"));
        let back: TopicTable = from_java_json(&to_json(&t)).unwrap();
        assert_eq!(back, t, "written back with the attributes");
        assert!(
            !to_json(&TopicConfig::new("T", 4, 4, 6)).contains("attributes"),
            "no attributes, no field"
        );
    }

    #[test]
    fn quoting_leaves_strings_and_quoted_keys_alone() {
        assert_eq!(
            quote_integer_keys(r#"{"a":{1:2, -3 :4},"s":"{5:6}"}"#),
            r#"{"a":{"1":2, "-3" :4},"s":"{5:6}"}"#
        );
        assert_eq!(quote_integer_keys("{}"), "{}");
        assert_eq!(quote_integer_keys(r#"{"é":{7:1}}"#), r#"{"é":{"7":1}}"#);
    }
}
