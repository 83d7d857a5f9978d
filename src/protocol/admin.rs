//! Admin bodies: what mqadmin, the Dashboard and `actormq admin` exchange with a broker for
//! consume progress, topic status, consumer connections and offset resets.
//!
//! Owns: [`ConsumeStats`] (GET_CONSUME_STATS 208), [`TopicStatsTable`] (GET_TOPIC_STATS_INFO
//! 202), [`ConsumerConnection`] (GET_CONSUMER_CONNECTION_LIST 203), [`ResetOffsetBody`]
//! (INVOKE_BROKER_TO_RESET_OFFSET 222 and RESET_CONSUMER_CLIENT_OFFSET 220),
//! [`ProducerConnection`] (GET_PRODUCER_CONNECTION_LIST 204), [`ProducerTableInfo`]
//! (GET_ALL_PRODUCER_INFO 328), [`BrokerStatsData`]
//! (VIEW_BROKER_STATS_DATA 315), [`GroupList`]
//! (QUERY_TOPIC_CONSUME_BY_WHO 300), [`ConsumeStatsList`] (GET_BROKER_CONSUME_STATS 317),
//! [`QueryConsumeQueueResponseBody`] (QUERY_CONSUME_QUEUE 321), and
//! [`parse_java_keyed_json`], which reads Java's maps keyed by objects.
//!
//! Java (fastjson) writes a `Map<MessageQueue, V>` with the *object* as the key:
//! `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3,…}}}` — not
//! JSON, but what every RocketMQ tool sends and expects (rocketmq-client-rust reads it too).
//!
//! Invariants:
//! * Encoding is byte-for-byte fastjson's: fields in alphabetical order, object keys as above,
//!   doubles with a fraction (`0.0`). Golden strings in the tests pin it.
//! * Decoding accepts that form, standard JSON with the key as a quoted JSON string, and unquoted
//!   integer keys; a key that is not a MessageQueue is an error naming the key.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::body::{ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue, SubscriptionData};

/// `OffsetWrapper`: one queue's offsets as a consumer group sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetWrapper {
    /// Next queue offset the broker would assign (max offset).
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
    /// Store time of the last consumed message (0 = none).
    pub last_timestamp: i64,
    /// How far the group has pulled (≥ consumer offset).
    pub pull_offset: i64,
}

/// GET_CONSUME_STATS (208) response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumeStats {
    pub consume_tps: f64,
    pub offset_table: Vec<(MessageQueue, OffsetWrapper)>,
}

impl ConsumeStats {
    /// Σ (brokerOffset − consumerOffset): mqadmin's "Diff Total".
    pub fn total_diff(&self) -> i64 {
        self.offset_table
            .iter()
            .map(|(_, o)| o.broker_offset - o.consumer_offset)
            .sum()
    }

    pub fn to_java_json(&self) -> String {
        let mut s = String::from("{\"consumeTps\":");
        push_double(&mut s, self.consume_tps);
        s.push_str(",\"offsetTable\":");
        push_mq_map(&mut s, &self.offset_table);
        s.push('}');
        s
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Raw {
            consume_tps: f64,
            offset_table: BTreeMap<String, OffsetWrapper>,
        }
        let raw: Raw = parse_java_keyed_json(bytes)?;
        Ok(ConsumeStats {
            consume_tps: raw.consume_tps,
            offset_table: mq_keys(raw.offset_table)?,
        })
    }
}

/// `TopicOffset`: one queue's range and last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicOffset {
    /// Store time of the last message (0 = empty queue).
    pub last_update_timestamp: i64,
    pub max_offset: i64,
    pub min_offset: i64,
}

/// GET_TOPIC_STATS_INFO (202) response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicStatsTable {
    pub offset_table: Vec<(MessageQueue, TopicOffset)>,
    pub topic_put_tps: f64,
}

impl TopicStatsTable {
    pub fn to_java_json(&self) -> String {
        let mut s = String::from("{\"offsetTable\":");
        push_mq_map(&mut s, &self.offset_table);
        s.push_str(",\"topicPutTps\":");
        push_double(&mut s, self.topic_put_tps);
        s.push('}');
        s
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Raw {
            offset_table: BTreeMap<String, TopicOffset>,
            topic_put_tps: f64,
        }
        let raw: Raw = parse_java_keyed_json(bytes)?;
        Ok(TopicStatsTable {
            offset_table: mq_keys(raw.offset_table)?,
            topic_put_tps: raw.topic_put_tps,
        })
    }
}

/// `ResetOffsetBody`: the offsets a reset moved each queue to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResetOffsetBody {
    pub offset_table: Vec<(MessageQueue, i64)>,
}

impl ResetOffsetBody {
    pub fn to_java_json(&self) -> String {
        let mut s = String::from("{\"offsetTable\":");
        push_mq_map(&mut s, &self.offset_table);
        s.push('}');
        s
    }

    /// 4.9.4's `ResetOffsetBodyForC`, the RESET_CONSUMER_CLIENT_OFFSET body Broker2Client sends
    /// when the reset was asked in the C++ client's language: the table as a list of
    /// `MessageQueueForC` (fields alphabetical, as fastjson writes them).
    pub fn to_java_json_for_c(&self) -> String {
        let mut s = String::from("{\"offsetTable\":[");
        for (i, (mq, off)) in self.offset_table.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"brokerName\":{},\"offset\":{off},\"queueId\":{},\"topic\":{}}}",
                json_str(&mq.broker_name),
                mq.queue_id,
                json_str(&mq.topic)
            );
        }
        s.push_str("]}");
        s
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Raw {
            offset_table: BTreeMap<String, i64>,
        }
        let raw: Raw = parse_java_keyed_json(bytes)?;
        Ok(ResetOffsetBody {
            offset_table: mq_keys(raw.offset_table)?,
        })
    }
}

/// `Connection`: one online client of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Connection {
    pub client_addr: String,
    pub client_id: String,
    /// `LanguageCode` name (`JAVA`, `RUST`, …).
    pub language: String,
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST (203) response: a group's online clients and subscriptions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerConnection {
    pub connection_set: Vec<Connection>,
    pub consume_from_where: ConsumeFromWhere,
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    /// topic → subscription.
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

/// One window of a stats item: messages counted, per second, and per call (`avgpt`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsItem {
    pub avgpt: f64,
    pub sum: i64,
    pub tps: f64,
}

impl BrokerStatsItem {
    /// From `sum` messages in `calls` calls over `seconds`.
    pub fn of(sum: u64, calls: u64, seconds: f64) -> Self {
        BrokerStatsItem {
            avgpt: if calls > 0 {
                sum as f64 / calls as f64
            } else {
                0.0
            },
            sum: sum as i64,
            tps: sum as f64 / seconds,
        }
    }
}

/// VIEW_BROKER_STATS_DATA (315) response: an item over the last day, hour and minute. (A rate
/// under 0.001 prints as a plain decimal, where Java writes `3.4E-5`; JSON readers take both.)
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsData {
    pub stats_day: BrokerStatsItem,
    pub stats_hour: BrokerStatsItem,
    pub stats_minute: BrokerStatsItem,
}

/// GET_PRODUCER_CONNECTION_LIST (204) response: a producer group's online clients.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    pub connection_set: Vec<Connection>,
}

/// One producer connection in a [`ProducerTableInfo`]. The key is `remoteIP` (not camelCase
/// `remoteIp`), as RocketMQ 4.9.4's common/.../protocol/body/ProducerInfo.java names it; fields
/// in fastjson's alphabetical order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerInfo {
    pub client_id: String,
    /// `LanguageCode` name (`JAVA`, `RUST`, …).
    pub language: String,
    /// Epoch milliseconds of the client's last heartbeat.
    pub last_update_timestamp: i64,
    /// The connection's address as Netty's `SocketAddress.toString()` prints it: `/ip:port`.
    #[serde(rename = "remoteIP")]
    pub remote_ip: String,
    pub version: i32,
}

/// GET_ALL_PRODUCER_INFO (328) response: producer group → its online connections.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerTableInfo {
    pub data: BTreeMap<String, Vec<ProducerInfo>>,
}

/// QUERY_TOPIC_CONSUME_BY_WHO (300) response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupList {
    pub group_list: BTreeSet<String>,
}

/// GET_BROKER_CONSUME_STATS (317) response: per subscription group (one single-key map each, as
/// RocketMQ's `List<Map<group, List<ConsumeStats>>>`), the stats of each topic it has offsets
/// for, and Σ of their diffs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumeStatsList {
    pub broker_addr: String,
    pub consume_stats_list: Vec<(String, Vec<ConsumeStats>)>,
    pub total_diff: i64,
    pub total_inflight_diff: i64,
}

impl ConsumeStatsList {
    pub fn to_java_json(&self) -> String {
        let mut s = String::from("{\"brokerAddr\":");
        s.push_str(&json_str(&self.broker_addr));
        s.push_str(",\"consumeStatsList\":[");
        for (i, (group, stats)) in self.consume_stats_list.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push('{');
            s.push_str(&json_str(group));
            s.push_str(":[");
            for (j, st) in stats.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                s.push_str(&st.to_java_json());
            }
            s.push_str("]}");
        }
        let _ = write!(
            s,
            "],\"totalDiff\":{},\"totalInflightDiff\":{}}}",
            self.total_diff, self.total_inflight_diff
        );
        s
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct RawStats {
            consume_tps: f64,
            offset_table: BTreeMap<String, OffsetWrapper>,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Raw {
            broker_addr: String,
            consume_stats_list: Vec<BTreeMap<String, Vec<RawStats>>>,
            total_diff: i64,
            total_inflight_diff: i64,
        }
        let raw: Raw = parse_java_keyed_json(bytes)?;
        let mut list = Vec::new();
        for map in raw.consume_stats_list {
            for (group, stats) in map {
                let stats = stats
                    .into_iter()
                    .map(|r| {
                        Ok(ConsumeStats {
                            consume_tps: r.consume_tps,
                            offset_table: mq_keys(r.offset_table)?,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                list.push((group, stats));
            }
        }
        Ok(ConsumeStatsList {
            broker_addr: raw.broker_addr,
            consume_stats_list: list,
            total_diff: raw.total_diff,
            total_inflight_diff: raw.total_inflight_diff,
        })
    }
}

/// fastjson's double: always with a fraction (`0.0`, `12.5`).
fn push_double(s: &mut String, v: f64) {
    if v.is_finite() {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            let _ = write!(s, "{v:.1}");
        } else {
            let _ = write!(s, "{v}");
        }
    } else {
        s.push_str("0.0");
    }
}

/// `{{"brokerName":…,"queueId":…,"topic":…}:value,…}` — fastjson's Map<MessageQueue, V>.
pub(super) fn push_mq_map<V: Serialize>(s: &mut String, table: &[(MessageQueue, V)]) {
    s.push('{');
    for (i, (mq, v)) in table.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{{\"brokerName\":{},\"queueId\":{},\"topic\":{}}}:",
            json_str(&mq.broker_name),
            mq.queue_id,
            json_str(&mq.topic)
        );
        s.push_str(&serde_json::to_string(v).unwrap_or_else(|_| "null".into()));
    }
    s.push('}');
}

pub(super) fn json_str(v: &str) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into())
}

pub(super) fn mq_keys<V>(
    table: impl IntoIterator<Item = (String, V)>,
) -> Result<Vec<(MessageQueue, V)>, String> {
    table
        .into_iter()
        .map(|(k, v)| {
            serde_json::from_str::<MessageQueue>(&k)
                .map(|mq| (mq, v))
                .map_err(|e| format!("map key {k:?} is not a MessageQueue: {e}"))
        })
        .collect()
}

/// Parses JSON that may use Java's non-string map keys: objects (`{{…}:v}`) and integers
/// (`{1:v}`). Each such key becomes a JSON string holding the key's text, so a
/// `BTreeMap<String, V>` field reads it; standard JSON passes through unchanged.
pub fn parse_java_keyed_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("body is not UTF-8: {e}"))?;
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(first) => {
            let fixed = quote_non_string_keys(text);
            if fixed == text {
                return Err(first.to_string());
            }
            serde_json::from_str(&fixed).map_err(|e| e.to_string())
        }
    }
}

/// Rewrites every object key that is not a string (an object, array or number, as Java writes
/// them) into a JSON string of its text. Tracks containers on a stack so an object *value* in an
/// array or after a `:` is left alone.
pub fn quote_non_string_keys(s: &str) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Ctx {
        /// Inside an object, the next token is a key.
        Key,
        /// Inside an object, after the key (up to the next `,`).
        Value,
        Array,
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 32);
    let mut stack: Vec<Ctx> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if stack.last() == Some(&Ctx::Key) && !c.is_ascii_whitespace() && c != b'"' && c != b'}' {
            // A non-string key: copy its balanced text as a JSON string.
            let end = key_end(b, i);
            let key = s[i..end].trim_end();
            out.push_str(&json_str(key));
            *stack.last_mut().unwrap() = Ctx::Value;
            i = end;
            continue;
        }
        match c {
            b'"' => {
                let end = string_end(b, i);
                out.push_str(&s[i..end]);
                if stack.last() == Some(&Ctx::Key) {
                    *stack.last_mut().unwrap() = Ctx::Value;
                }
                i = end;
                continue;
            }
            b'{' => stack.push(Ctx::Key),
            b'[' => stack.push(Ctx::Array),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(top) = stack.last_mut() {
                    if *top == Ctx::Value {
                        *top = Ctx::Key;
                    }
                }
            }
            _ => {}
        }
        // Copy one UTF-8 character.
        let len = utf8_len(c);
        out.push_str(&s[i..(i + len).min(s.len())]);
        i += len;
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

/// Index just past the string literal starting at `start` (a `"`).
fn string_end(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// Index of the `:` that ends a non-string key starting at `start` (nesting and strings skipped).
fn key_end(b: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = string_end(b, i);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// `ConsumeQueueData`: one ConsumeQueue unit as QUERY_CONSUME_QUEUE (321) shows it. Fields in
/// fastjson's (alphabetical) order; `None` fields are left out as fastjson leaves out nulls.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeQueueData {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bit_map: Option<String>,
    pub eval: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend_data_json: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    pub physic_offset: i64,
    pub physic_size: i32,
    pub tags_code: i64,
}

/// QUERY_CONSUME_QUEUE (321) response (`QueryConsumeQueueResponseBody`): the queue's range, the
/// units asked for and, when a group was named, its subscription and filter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryConsumeQueueResponseBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_data: Option<String>,
    pub max_queue_index: i64,
    pub min_queue_index: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_data: Option<Vec<ConsumeQueueData>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data: Option<SubscriptionData>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key is `remoteIP`, fields in fastjson's order, as 4.9.4's ProducerInfo.java writes.
    #[test]
    fn producer_table_info_encodes_as_java() {
        let mut t = ProducerTableInfo::default();
        t.data.insert(
            "PG".into(),
            vec![ProducerInfo {
                client_id: "10.0.0.1@1".into(),
                language: "JAVA".into(),
                last_update_timestamp: 1700000000000,
                remote_ip: "/10.0.0.1:50000".into(),
                version: 401,
            }],
        );
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"data":{"PG":[{"clientId":"10.0.0.1@1","language":"JAVA","lastUpdateTimestamp":1700000000000,"remoteIP":"/10.0.0.1:50000","version":401}]}}"#
        );
    }

    fn mq(topic: &str, q: i32) -> MessageQueue {
        MessageQueue {
            topic: topic.into(),
            broker_name: "broker-a".into(),
            queue_id: q,
        }
    }

    #[test]
    fn broker_consume_stats_group_list_and_producer_connection_encode_like_fastjson() {
        let list = ConsumeStatsList {
            broker_addr: "127.0.0.1:10911".into(),
            consume_stats_list: vec![(
                "G".into(),
                vec![ConsumeStats {
                    consume_tps: 1.5,
                    offset_table: vec![(
                        mq("T", 1),
                        OffsetWrapper {
                            broker_offset: 4,
                            consumer_offset: 1,
                            last_timestamp: 0,
                            pull_offset: 1,
                        },
                    )],
                }],
            )],
            total_diff: 3,
            total_inflight_diff: 0,
        };
        let j = list.to_java_json();
        assert_eq!(
            j,
            r#"{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"G":[{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":4,"consumerOffset":1,"lastTimestamp":0,"pullOffset":1}}}]}],"totalDiff":3,"totalInflightDiff":0}"#
        );
        assert_eq!(ConsumeStatsList::parse(j.as_bytes()).unwrap(), list);
        let data = BrokerStatsData {
            stats_day: BrokerStatsItem::of(8_640, 3, 86_400.0),
            stats_hour: BrokerStatsItem::of(0, 0, 3_600.0),
            stats_minute: BrokerStatsItem::of(120, 60, 60.0),
        };
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            r#"{"statsDay":{"avgpt":2880.0,"sum":8640,"tps":0.1},"statsHour":{"avgpt":0.0,"sum":0,"tps":0.0},"statsMinute":{"avgpt":2.0,"sum":120,"tps":2.0}}"#
        );
        let groups = GroupList {
            group_list: ["b".to_string(), "a".to_string()].into(),
        };
        assert_eq!(
            serde_json::to_string(&groups).unwrap(),
            r#"{"groupList":["a","b"]}"#
        );
        let p = ProducerConnection {
            connection_set: vec![Connection {
                client_addr: "127.0.0.1:5000".into(),
                client_id: "c1".into(),
                language: "JAVA".into(),
                version: 401,
            }],
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"connectionSet":[{"clientAddr":"127.0.0.1:5000","clientId":"c1","language":"JAVA","version":401}]}"#
        );
    }

    #[test]
    fn consume_stats_encode_like_fastjson() {
        let cs = ConsumeStats {
            consume_tps: 0.0,
            offset_table: vec![(
                mq("T", 0),
                OffsetWrapper {
                    broker_offset: 10,
                    consumer_offset: 7,
                    last_timestamp: 1700000000000,
                    pull_offset: 8,
                },
            )],
        };
        let j = cs.to_java_json();
        assert_eq!(
            j,
            r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000,"pullOffset":8}}}"#
        );
        let back = ConsumeStats::parse(j.as_bytes()).unwrap();
        assert_eq!(back, cs);
        assert_eq!(back.total_diff(), 3);
    }

    #[test]
    fn topic_stats_and_reset_bodies_round_trip() {
        let t = TopicStatsTable {
            offset_table: vec![
                (mq("T", 0), TopicOffset::default()),
                (
                    mq("T", 1),
                    TopicOffset {
                        last_update_timestamp: 5,
                        max_offset: 9,
                        min_offset: 2,
                    },
                ),
            ],
            topic_put_tps: 12.5,
        };
        let j = t.to_java_json();
        assert!(j.ends_with(r#""topicPutTps":12.5}"#), "{j}");
        assert_eq!(TopicStatsTable::parse(j.as_bytes()).unwrap(), t);
        let r = ResetOffsetBody {
            offset_table: vec![(mq("T", 3), 42)],
        };
        let j = r.to_java_json();
        assert_eq!(
            j,
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"T"}:42}}"#
        );
        assert_eq!(ResetOffsetBody::parse(j.as_bytes()).unwrap(), r);
        assert_eq!(
            r.to_java_json_for_c(),
            r#"{"offsetTable":[{"brokerName":"broker-a","offset":42,"queueId":3,"topic":"T"}]}"#
        );
    }

    #[test]
    fn java_keys_of_every_kind_are_read() {
        // Field order and spacing as a Java broker might send them; a key with `:` and `}` in a
        // string; integer keys; an array of objects (values, not keys) left alone.
        let java = r#"{ "offsetTable" : { {"topic":"a:}b","brokerName":"x","queueId":1} : 5 },
            "n":{1:2,-3:4}, "arr":[{"k":1},{"k":2}], "é":"{9:9}"}"#;
        let fixed = quote_non_string_keys(java);
        let v: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(v["n"]["1"], 2);
        assert_eq!(v["n"]["-3"], 4);
        assert_eq!(v["arr"][1]["k"], 2);
        assert_eq!(v["é"], "{9:9}");
        let r = ResetOffsetBody::parse(java.as_bytes()).unwrap();
        assert_eq!(
            r.offset_table,
            vec![(
                MessageQueue {
                    topic: "a:}b".into(),
                    broker_name: "x".into(),
                    queue_id: 1
                },
                5
            )]
        );
    }

    #[test]
    fn a_key_that_is_not_a_queue_is_named_in_the_error() {
        let e = ResetOffsetBody::parse(br#"{"offsetTable":{"oops":1}}"#).unwrap_err();
        assert!(e.contains("oops"), "{e}");
        assert!(ConsumeStats::parse(b"{not json").is_err());
    }

    #[test]
    fn consumer_connection_has_java_field_names() {
        let c = ConsumerConnection {
            connection_set: vec![Connection {
                client_addr: "127.0.0.1:5000".into(),
                client_id: "c1".into(),
                language: "RUST".into(),
                version: 401,
            }],
            ..Default::default()
        };
        let j = serde_json::to_string(&c).unwrap();
        for f in [
            "connectionSet",
            "clientAddr",
            "clientId",
            "consumeFromWhere",
            "consumeType",
            "messageModel",
            "subscriptionTable",
        ] {
            assert!(j.contains(f), "{f} in {j}");
        }
        let back: ConsumerConnection = serde_json::from_str(&j).unwrap();
        assert_eq!(back, c);
    }
}
