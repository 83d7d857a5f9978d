//! Typed request/response headers: the `extFields` of each command ActorMQ serves or sends.
//!
//! Owns: the mapping between Java's header classes (field names exactly as Java spells them in
//! Apache's `common/src/main/java/org/apache/rocketmq/common/protocol/header/`) and Rust structs,
//! in both directions (`from_command` / `to_ext_fields`), so request handlers never touch raw
//! strings and the broker's own requests (to the name server, to clients) use the same definitions.
//!
//! Invariants:
//! * A field is required exactly when its type is not an `Option` and it has no default; a
//!   missing required field or an unparsable value is a [`HeaderError`] naming the wire field.
//! * Unknown fields are ignored: 5.x clients add `bname`, `ns`, `nsd`, `oway`, `lo`, … to every
//!   header, and new versions keep adding more.
//! * An empty string in an *optional* numeric/boolean field reads as absent (clients that
//!   serialise "unset" as `""`); in a required one it is an error, as in Java.
//! * `to_ext_fields` then `from_ext_fields` gives back the same struct.

use super::codes::request_code;
use super::command::{parse_bool, parse_i32, parse_i64, ExtFields, HeaderError, RemotingCommand};

/// A header that can be read from and written to `extFields`.
pub trait CommandHeader: Sized {
    fn from_ext_fields(ext: &ExtFields) -> Result<Self, HeaderError>;
    fn to_ext_fields(&self) -> ExtFields;
    fn from_command(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        Self::from_ext_fields(&cmd.ext_fields)
    }
}

/// How one field type reads from and writes to its wire text.
trait Field: Sized {
    fn parse(name: &str, raw: &str) -> Result<Self, HeaderError>;
    /// Value when the field is absent; `None` means the field is required.
    fn absent() -> Option<Self>;
    /// Writes the wire text under `name`; `None` values leave the field out.
    fn render(&self, name: &str, ext: &mut ExtFields);
}

/// A scalar's wire text, written straight into the header buffer: integers by `itoa`, not the
/// `fmt` machinery (every SEND reply renders two of them).
trait WireText {
    fn write_wire(&self, out: &mut String);
}
impl WireText for String {
    fn write_wire(&self, out: &mut String) {
        out.push_str(self);
    }
}
impl WireText for bool {
    fn write_wire(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}
macro_rules! int_wire_text {
    ($($ty:ty),*) => {$(
        impl WireText for $ty {
            fn write_wire(&self, out: &mut String) {
                out.push_str(itoa::Buffer::new().format(*self));
            }
        }
    )*};
}
int_wire_text!(i32, i64);

macro_rules! scalar_fields {
    ($($ty:ty => $parse:expr, empty_is_absent: $empty_absent:expr;)*) => {$(
        impl Field for $ty {
            fn parse(name: &str, raw: &str) -> Result<Self, HeaderError> {
                $parse(name, raw)
            }
            fn absent() -> Option<Self> {
                None
            }
            fn render(&self, name: &str, ext: &mut ExtFields) {
                ext.insert_with(name, |t| self.write_wire(t));
            }
        }
        impl Field for Option<$ty> {
            fn parse(name: &str, raw: &str) -> Result<Self, HeaderError> {
                if $empty_absent && raw.trim().is_empty() {
                    Ok(None)
                } else {
                    $parse(name, raw).map(Some)
                }
            }
            fn absent() -> Option<Self> {
                Some(None)
            }
            fn render(&self, name: &str, ext: &mut ExtFields) {
                if let Some(v) = self {
                    ext.insert_with(name, |t| v.write_wire(t));
                }
            }
        }
    )*};
}

fn parse_string(_name: &str, raw: &str) -> Result<String, HeaderError> {
    Ok(raw.to_owned())
}

scalar_fields! {
    String => parse_string, empty_is_absent: false;
    i32 => parse_i32, empty_is_absent: true;
    i64 => parse_i64, empty_is_absent: true;
    bool => parse_bool, empty_is_absent: true;
}

fn read<T: Field>(ext: &ExtFields, name: &str, default: Option<T>) -> Result<T, HeaderError> {
    match ext.get(name) {
        Some(raw) => T::parse(name, raw),
        None => default
            .or_else(T::absent)
            .ok_or_else(|| HeaderError::missing(name)),
    }
}

fn write<T: Field>(ext: &mut ExtFields, name: &str, value: &T) {
    value.render(name, ext);
}

/// Declares a header struct whose fields map 1:1 to wire names:
/// `rust_name: Type => "wireName" [= default],`.
macro_rules! header {
    (@default) => { None };
    (@default $d:expr) => { Some($d) };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $wire:literal $(= $default:expr)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            pub fn from_command(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
                Self::from_ext_fields(&cmd.ext_fields)
            }

            pub fn from_ext_fields(ext: &ExtFields) -> Result<Self, HeaderError> {
                Ok(Self {
                    $( $field: read::<$ty>(ext, $wire, header!(@default $($default)?))?, )*
                })
            }

            pub fn to_ext_fields(&self) -> ExtFields {
                let mut ext = ExtFields::with_capacity_and_text(8, 128);
                $( write(&mut ext, $wire, &self.$field); )*
                ext
            }
        }

        impl CommandHeader for $name {
            fn from_ext_fields(ext: &ExtFields) -> Result<Self, HeaderError> {
                $name::from_ext_fields(ext)
            }
            fn to_ext_fields(&self) -> ExtFields {
                $name::to_ext_fields(self)
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// SEND (codes 10, 310, 320, 324, 325)

/// Which field names a SEND header uses on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendHeaderNames {
    /// Java field names (`producerGroup`, …): SEND_MESSAGE (10), SEND_REPLY_MESSAGE (324).
    V1,
    /// One-letter names `a`..`n`: SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320),
    /// SEND_REPLY_MESSAGE_V2 (325). Java's default, to shrink every send.
    V2,
}

/// `(V1 name, V2 name)` of each SEND header field, in V2 letter order.
const SEND_NAMES: [(&str, &str); 14] = [
    ("producerGroup", "a"),
    ("topic", "b"),
    ("defaultTopic", "c"),
    ("defaultTopicQueueNums", "d"),
    ("queueId", "e"),
    ("sysFlag", "f"),
    ("bornTimestamp", "g"),
    ("flag", "h"),
    ("properties", "i"),
    ("reconsumeTimes", "j"),
    ("unitMode", "k"),
    ("maxReconsumeTimes", "l"),
    ("batch", "m"),
    ("bname", "n"),
];

/// `SendMessageRequestHeader` (V1) / `SendMessageRequestHeaderV2`: one struct for both spellings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendMessageRequestHeader {
    pub producer_group: String,
    pub topic: String,
    /// Template topic for auto-creation (`TBW102`).
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    /// Properties string (`MessageDecoder.messageProperties2String`); absent ⇒ empty.
    pub properties: String,
    /// Absent ⇒ 0.
    pub reconsume_times: i32,
    /// Absent ⇒ false.
    pub unit_mode: bool,
    /// Absent ⇒ the subscription group's setting applies.
    pub max_reconsume_times: Option<i32>,
    /// Absent ⇒ false.
    pub batch: bool,
    /// Target broker name (4.9.x+/5.x clients); informational.
    pub broker_name: Option<String>,
}

impl SendMessageRequestHeader {
    /// Reads a SEND header, choosing the spelling by request code: V2 codes (310, 320, 325) use
    /// the short names — unless the short `b` is absent and the long `topic` present, which a
    /// client that sends V1 names under a V2 code would produce.
    pub fn from_command(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        SendHeaderRef::from_command(cmd).map(|h| h.to_owned())
    }

    /// The spelling of `cmd`'s SEND header (see [`from_command`](Self::from_command)).
    pub fn names_of(cmd: &RemotingCommand) -> SendHeaderNames {
        let v2_code = matches!(
            cmd.code,
            request_code::SEND_MESSAGE_V2
                | request_code::SEND_BATCH_MESSAGE
                | request_code::SEND_REPLY_MESSAGE_V2
        );
        let ext = &cmd.ext_fields;
        if v2_code && (ext.contains_key("b") || !ext.contains_key("topic")) {
            SendHeaderNames::V2
        } else {
            SendHeaderNames::V1
        }
    }

    pub fn from_ext_fields(ext: &ExtFields, names: SendHeaderNames) -> Result<Self, HeaderError> {
        SendHeaderRef::from_ext_fields(ext, names).map(|h| h.to_owned())
    }

    /// Writes the header in the chosen spelling (all fields, as Java clients do).
    pub fn to_ext_fields(&self, names: SendHeaderNames) -> ExtFields {
        let values: [Option<String>; 14] = [
            Some(self.producer_group.clone()),
            Some(self.topic.clone()),
            Some(self.default_topic.clone()),
            Some(self.default_topic_queue_nums.to_string()),
            Some(self.queue_id.to_string()),
            Some(self.sys_flag.to_string()),
            Some(self.born_timestamp.to_string()),
            Some(self.flag.to_string()),
            Some(self.properties.clone()),
            Some(self.reconsume_times.to_string()),
            Some(self.unit_mode.to_string()),
            self.max_reconsume_times.map(|v| v.to_string()),
            Some(self.batch.to_string()),
            self.broker_name.clone(),
        ];
        let mut ext = ExtFields::with_capacity(values.len());
        for ((long, short), value) in SEND_NAMES.iter().zip(values) {
            if let Some(value) = value {
                ext.insert(
                    if names == SendHeaderNames::V1 {
                        *long
                    } else {
                        *short
                    },
                    value,
                );
            }
        }
        ext
    }
}

/// A SEND header read in place: its text fields borrow the command's `extFields`, so the
/// request path copies only what outlives the request (the topic and the properties it stores).
/// Same rules and errors as [`SendMessageRequestHeader`], which is built from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendHeaderRef<'a> {
    pub producer_group: &'a str,
    pub topic: &'a str,
    pub default_topic: &'a str,
    pub default_topic_queue_nums: i32,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    pub properties: &'a str,
    pub reconsume_times: i32,
    pub unit_mode: bool,
    pub max_reconsume_times: Option<i32>,
    pub batch: bool,
    pub broker_name: Option<&'a str>,
}

impl<'a> SendHeaderRef<'a> {
    /// As [`SendMessageRequestHeader::from_command`].
    pub fn from_command(cmd: &'a RemotingCommand) -> Result<Self, HeaderError> {
        Self::from_ext_fields(&cmd.ext_fields, SendMessageRequestHeader::names_of(cmd))
    }

    /// One pass over the fields (not one lookup per field): a SEND carries 14 of them and this
    /// runs for every message.
    pub fn from_ext_fields(
        ext: &'a ExtFields,
        names: SendHeaderNames,
    ) -> Result<Self, HeaderError> {
        let mut raw: [Option<&'a str>; 14] = [None; 14];
        for (k, v) in ext.iter() {
            let i = match names {
                SendHeaderNames::V2 => match k.as_bytes() {
                    [c @ b'a'..=b'n'] => usize::from(c - b'a'),
                    _ => continue,
                },
                SendHeaderNames::V1 => match SEND_NAMES.iter().position(|(long, _)| *long == k) {
                    Some(i) => i,
                    None => continue,
                },
            };
            if let Some(slot) = raw.get_mut(i) {
                *slot = Some(v);
            }
        }
        let label = |i: usize| {
            let (long, short) = SEND_NAMES.get(i).copied().unwrap_or(("?", "?"));
            match names {
                SendHeaderNames::V1 => long.to_owned(),
                SendHeaderNames::V2 => format!("{short} ({long})"),
            }
        };
        let name = |i: usize| {
            let (long, short) = SEND_NAMES.get(i).copied().unwrap_or(("?", "?"));
            match names {
                SendHeaderNames::V1 => long,
                SendHeaderNames::V2 => short,
            }
        };
        // The wire text of field `i`, parsed by `T`'s rules (absent ⇒ `T::absent()`).
        let get = |i: usize| raw.get(i).copied().flatten();
        fn field<T: Field>(
            raw: Option<&str>,
            name: &str,
            label: impl Fn() -> String,
        ) -> Result<T, HeaderError> {
            match raw {
                Some(v) => T::parse(name, v),
                None => T::absent().ok_or_else(|| HeaderError::missing(name)),
            }
            .map_err(|e| e.with_field(label()))
        }
        let text = |i: usize| get(i).ok_or_else(|| HeaderError::missing(&label(i)));
        Ok(SendHeaderRef {
            producer_group: text(0)?,
            topic: text(1)?,
            default_topic: text(2)?,
            default_topic_queue_nums: field(get(3), name(3), || label(3))?,
            queue_id: field(get(4), name(4), || label(4))?,
            sys_flag: field(get(5), name(5), || label(5))?,
            born_timestamp: field(get(6), name(6), || label(6))?,
            flag: field(get(7), name(7), || label(7))?,
            properties: get(8).unwrap_or(""),
            reconsume_times: field::<Option<i32>>(get(9), name(9), || label(9))?.unwrap_or(0),
            unit_mode: field::<Option<bool>>(get(10), name(10), || label(10))?.unwrap_or(false),
            max_reconsume_times: field(get(11), name(11), || label(11))?,
            batch: field::<Option<bool>>(get(12), name(12), || label(12))?.unwrap_or(false),
            broker_name: get(13),
        })
    }

    pub fn to_owned(&self) -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: self.producer_group.to_owned(),
            topic: self.topic.to_owned(),
            default_topic: self.default_topic.to_owned(),
            default_topic_queue_nums: self.default_topic_queue_nums,
            queue_id: self.queue_id,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            flag: self.flag,
            properties: self.properties.to_owned(),
            reconsume_times: self.reconsume_times,
            unit_mode: self.unit_mode,
            max_reconsume_times: self.max_reconsume_times,
            batch: self.batch,
            broker_name: self.broker_name.map(str::to_owned),
        }
    }
}

header! {
    /// SEND response. `msgId` is the offset message id (`MessageDecoder.createMessageId`;
    /// comma-joined for batches);
    /// `MSG_REGION` and `TRACE_ON` travel here too and clients copy them onto the message.
    pub struct SendMessageResponseHeader {
        msg_id: String => "msgId",
        queue_id: i32 => "queueId",
        /// First logical offset written.
        queue_offset: i64 => "queueOffset",
        transaction_id: Option<String> => "transactionId",
        /// 5.x.
        batch_uniq_id: Option<String> => "batchUniqId",
        msg_region: String => "MSG_REGION" = "DefaultRegion".to_owned(),
        trace_on: bool => "TRACE_ON" = true,
    }
}

impl SendMessageResponseHeader {
    /// A response with RocketMQ's defaults for region (`DefaultRegion`) and tracing (on).
    pub fn new(msg_id: String, queue_id: i32, queue_offset: i64) -> Self {
        SendMessageResponseHeader {
            msg_id,
            queue_id,
            queue_offset,
            transaction_id: None,
            batch_uniq_id: None,
            msg_region: "DefaultRegion".to_owned(),
            trace_on: true,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// PULL (codes 11, 361)

/// Pull request `sysFlag` bits (`PullSysFlag`).
pub mod pull_sys_flag {
    /// The request carries `commitOffset` to store for the group.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may hold (long-poll) the request when nothing is there.
    pub const SUSPEND: i32 = 0x2;
    /// The request carries its own `subscription` expression.
    pub const SUBSCRIPTION: i32 = 0x4;
    pub const CLASS_FILTER: i32 = 0x8;
    /// Sent by lite-pull consumers (5.x sends LITE_PULL_MESSAGE then).
    pub const LITE_PULL: i32 = 0x10;
}

header! {
    /// `PullMessageRequestHeader`, for PULL_MESSAGE and LITE_PULL_MESSAGE.
    pub struct PullMessageRequestHeader {
        consumer_group: String => "consumerGroup",
        topic: String => "topic",
        queue_id: i32 => "queueId",
        queue_offset: i64 => "queueOffset",
        max_msg_nums: i32 => "maxMsgNums",
        sys_flag: i32 => "sysFlag",
        commit_offset: i64 => "commitOffset",
        /// How long the broker may hold the request (client's `brokerSuspendMaxTimeMillis`).
        suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        subscription: Option<String> => "subscription",
        sub_version: i64 => "subVersion",
        /// `TAG` or `SQL92`; absent ⇒ TAG.
        expression_type: Option<String> => "expressionType",
        /// 5.x.
        max_msg_bytes: Option<i32> => "maxMsgBytes",
        /// 5.x.
        request_source: Option<i32> => "requestSource",
        /// 5.x, misspelt as in Java.
        proxy_froward_client_id: Option<String> => "proxyFrowardClientId",
    }
}

impl PullMessageRequestHeader {
    pub fn has_commit_offset(&self) -> bool {
        self.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0
    }
    pub fn has_suspend(&self) -> bool {
        self.sys_flag & pull_sys_flag::SUSPEND != 0
    }
    pub fn has_subscription(&self) -> bool {
        self.sys_flag & pull_sys_flag::SUBSCRIPTION != 0
    }
    pub fn has_class_filter(&self) -> bool {
        self.sys_flag & pull_sys_flag::CLASS_FILTER != 0
    }
    pub fn is_lite_pull(&self) -> bool {
        self.sys_flag & pull_sys_flag::LITE_PULL != 0
    }
}

header! {
    /// Pull response; remark carries the GetMessageStatus name.
    pub struct PullMessageResponseHeader {
        /// 0 = master.
        suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        next_begin_offset: i64 => "nextBeginOffset",
        min_offset: i64 => "minOffset",
        max_offset: i64 => "maxOffset",
        offset_delta: Option<i64> => "offsetDelta",
        topic_sys_flag: Option<i32> => "topicSysFlag",
        group_sys_flag: Option<i32> => "groupSysFlag",
        forbidden_type: Option<i32> => "forbiddenType",
    }
}

// ---------------------------------------------------------------------------------------------
// Query / view

/// Ext field a client adds to QUERY_MESSAGE when the key is a message's UNIQ_KEY.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

header! {
    /// QUERY_MESSAGE (12): index lookup by key and store-time range.
    pub struct QueryMessageRequestHeader {
        topic: String => "topic",
        key: String => "key",
        max_num: i32 => "maxNum",
        begin_timestamp: i64 => "beginTimestamp",
        end_timestamp: i64 => "endTimestamp",
        /// `_UNIQUE_KEY_QUERY`: the key is a UNIQ_KEY (the broker may stop at the first hit).
        unique_key_query: bool => "_UNIQUE_KEY_QUERY" = false,
    }
}

header! {
    pub struct QueryMessageResponseHeader {
        index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

header! {
    /// VIEW_MESSAGE_BY_ID (33): `offset` is the physical CommitLog offset from the msgId.
    pub struct ViewMessageByIdRequestHeader {
        offset: i64 => "offset",
    }
}

// ---------------------------------------------------------------------------------------------
// Offsets

header! {
    /// QUERY_CONSUMER_OFFSET (14).
    pub struct QueryConsumerOffsetRequestHeader {
        consumer_group: String => "consumerGroup",
        topic: String => "topic",
        queue_id: i32 => "queueId",
        /// 5.x.
        set_zero_if_not_found: Option<bool> => "setZeroIfNotFound",
    }
}

header! {
    pub struct QueryConsumerOffsetResponseHeader {
        offset: i64 => "offset",
    }
}

header! {
    /// UPDATE_CONSUMER_OFFSET (15), usually oneway.
    pub struct UpdateConsumerOffsetRequestHeader {
        consumer_group: String => "consumerGroup",
        topic: String => "topic",
        queue_id: i32 => "queueId",
        commit_offset: i64 => "commitOffset",
    }
}

header! {
    /// GET_MAX_OFFSET (30).
    pub struct GetMaxOffsetRequestHeader {
        topic: String => "topic",
        queue_id: i32 => "queueId",
        /// 5.x.
        committed: Option<bool> => "committed",
    }
}

header! {
    /// The max offset is the ConsumeQueue's next offset.
    pub struct GetMaxOffsetResponseHeader {
        offset: i64 => "offset",
    }
}

header! {
    /// GET_MIN_OFFSET (31).
    pub struct GetMinOffsetRequestHeader {
        topic: String => "topic",
        queue_id: i32 => "queueId",
    }
}

header! {
    pub struct GetMinOffsetResponseHeader {
        offset: i64 => "offset",
    }
}

header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29).
    pub struct SearchOffsetRequestHeader {
        topic: String => "topic",
        queue_id: i32 => "queueId",
        timestamp: i64 => "timestamp",
        /// 5.x: `LOWER` / `UPPER`.
        boundary_type: Option<String> => "boundaryType",
    }
}

header! {
    pub struct SearchOffsetResponseHeader {
        offset: i64 => "offset",
    }
}

header! {
    /// GET_EARLIEST_MSG_STORETIME (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        topic: String => "topic",
        queue_id: i32 => "queueId",
    }
}

header! {
    pub struct GetEarliestMsgStoretimeResponseHeader {
        timestamp: i64 => "timestamp",
    }
}

// ---------------------------------------------------------------------------------------------
// Clients and consumers

header! {
    /// UNREGISTER_CLIENT (35).
    pub struct UnregisterClientRequestHeader {
        client_id: String => "clientID",
        producer_group: Option<String> => "producerGroup",
        consumer_group: Option<String> => "consumerGroup",
    }
}

header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38); response body is `ConsumerListBody`.
    pub struct GetConsumerListByGroupRequestHeader {
        consumer_group: String => "consumerGroup",
    }
}

header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker → consumer, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        consumer_group: String => "consumerGroup",
    }
}

header! {
    /// CONSUMER_SEND_MSG_BACK (36): put a message back for retry (or into the DLQ).
    pub struct ConsumerSendMsgBackRequestHeader {
        /// Physical CommitLog offset of the message.
        offset: i64 => "offset",
        group: String => "group",
        delay_level: i32 => "delayLevel",
        origin_msg_id: Option<String> => "originMsgId",
        origin_topic: Option<String> => "originTopic",
        unit_mode: bool => "unitMode" = false,
        max_reconsume_times: Option<i32> => "maxReconsumeTimes",
    }
}

// ---------------------------------------------------------------------------------------------
// Topics and routes

header! {
    /// UPDATE_AND_CREATE_TOPIC (17).
    pub struct CreateTopicRequestHeader {
        topic: String => "topic",
        default_topic: String => "defaultTopic",
        read_queue_nums: i32 => "readQueueNums",
        write_queue_nums: i32 => "writeQueueNums",
        perm: i32 => "perm",
        /// `SINGLE_TAG` / `MULTI_TAG`.
        topic_filter_type: String => "topicFilterType",
        topic_sys_flag: Option<i32> => "topicSysFlag",
        order: bool => "order" = false,
        /// 5.x topic attributes (`+key=value` list).
        attributes: Option<String> => "attributes",
    }
}

header! {
    /// GET_ROUTEINFO_BY_TOPIC (105).
    pub struct GetRouteInfoRequestHeader {
        topic: String => "topic",
        accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
    }
}

// ---------------------------------------------------------------------------------------------
// Name server registration (Apache's `header/namesrv/`)

header! {
    /// REGISTER_BROKER (103), broker → name server; body `RegisterBrokerBody`.
    pub struct RegisterBrokerRequestHeader {
        broker_name: String => "brokerName",
        /// `brokerIP1:listenPort`.
        broker_addr: String => "brokerAddr",
        cluster_name: String => "clusterName",
        /// `brokerIP2:haListenPort`.
        ha_server_addr: String => "haServerAddr",
        /// 0 = master.
        broker_id: i64 => "brokerId",
        /// Body is the Deflater form.
        compressed: bool => "compressed" = false,
        /// CRC32 of the body masked with 0x7FFFFFFF; 0 = unchecked.
        body_crc32: i32 => "bodyCrc32" = 0,
        /// 5.x.
        heartbeat_timeout_millis: Option<i64> => "heartbeatTimeoutMillis",
        /// 5.x.
        enable_acting_master: Option<bool> => "enableActingMaster",
    }
}

header! {
    /// For a slave: the live master's HA address and address.
    pub struct RegisterBrokerResponseHeader {
        ha_server_addr: Option<String> => "haServerAddr",
        master_addr: Option<String> => "masterAddr",
    }
}

header! {
    /// UNREGISTER_BROKER (104).
    pub struct UnregisterBrokerRequestHeader {
        broker_name: String => "brokerName",
        broker_addr: String => "brokerAddr",
        cluster_name: String => "clusterName",
        broker_id: i64 => "brokerId",
    }
}

header! {
    /// QUERY_DATA_VERSION (322), broker → name server; body the broker's `DataVersion`. Every
    /// field is required, as 4.9.4's `@CFNotNull`s.
    pub struct QueryDataVersionRequestHeader {
        broker_name: String => "brokerName",
        broker_addr: String => "brokerAddr",
        cluster_name: String => "clusterName",
        broker_id: i64 => "brokerId",
    }
}

header! {
    /// QUERY_DATA_VERSION's answer: whether the broker's `DataVersion` differs from the one the
    /// name server holds (or it holds none).
    pub struct QueryDataVersionResponseHeader {
        changed: bool => "changed",
    }
}

header! {
    /// GET_TOPICS_BY_CLUSTER (224).
    pub struct GetTopicsByClusterRequestHeader {
        cluster: String => "cluster",
    }
}

// ---------------------------------------------------------------------------------------------
// Admin (mqadmin, Dashboard, `actormq admin`)

header! {
    /// GET_CONSUME_STATS (208): one group's offsets on this broker; no topic = every topic the
    /// group has offsets for.
    pub struct GetConsumeStatsRequestHeader {
        consumer_group: String => "consumerGroup",
        topic: Option<String> => "topic",
    }
}

header! {
    /// GET_BROKER_CONSUME_STATS (317): every subscription group's offsets on this broker;
    /// `isOrder` keeps only ordered topics.
    pub struct GetConsumeStatsInBrokerHeader {
        is_order: bool => "isOrder" = false,
    }
}

header! {
    /// VIEW_BROKER_STATS_DATA (315): one stats item (`TOPIC_PUT_NUMS` of a topic,
    /// `GROUP_GET_NUMS` of `topic@group`, `BROKER_PUT_NUMS`/`BROKER_GET_NUMS` of the cluster).
    pub struct ViewBrokerStatsDataRequestHeader {
        stats_name: String => "statsName",
        stats_key: String => "statsKey",
    }
}

header! {
    /// QUERY_TOPIC_CONSUME_BY_WHO (300): the groups that consume a topic here.
    pub struct QueryTopicConsumeByWhoRequestHeader {
        topic: String => "topic",
    }
}

header! {
    /// GET_PRODUCER_CONNECTION_LIST (204).
    pub struct GetProducerConnectionListRequestHeader {
        producer_group: String => "producerGroup",
    }
}

header! {
    /// GET_CONSUMER_CONNECTION_LIST (203).
    pub struct GetConsumerConnectionListRequestHeader {
        consumer_group: String => "consumerGroup",
    }
}

header! {
    /// GET_TOPIC_STATS_INFO (202).
    pub struct GetTopicStatsInfoRequestHeader {
        topic: String => "topic",
    }
}

header! {
    /// DELETE_TOPIC_IN_BROKER (215).
    pub struct DeleteTopicRequestHeader {
        topic: String => "topic",
    }
}

header! {
    /// DELETE_TOPIC_IN_NAMESRV (216): without a cluster, from every broker.
    pub struct DeleteTopicFromNamesrvRequestHeader {
        topic: String => "topic",
        cluster_name: Option<String> => "clusterName",
    }
}

header! {
    /// GET_BROKER_CONFIG (26) response: the configuration's data version as JSON.
    pub struct GetBrokerConfigResponseHeader {
        version: String => "version",
    }
}

header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222), and RESET_CONSUMER_CLIENT_OFFSET (220) to clients.
    pub struct ResetOffsetRequestHeader {
        topic: String => "topic",
        group: String => "group",
        /// -1 = every queue.
        queue_id: i32 => "queueId" = -1,
        /// An explicit offset (with a queue id) instead of a timestamp.
        offset: Option<i64> => "offset",
        /// Store time to rewind or skip to; -1 = the end of each queue.
        timestamp: i64 => "timestamp",
        /// Move even forwards past the committed offset.
        is_force: bool => "isForce" = false,
    }
}

header! {
    /// DELETE_SUBSCRIPTIONGROUP (207); `removeOffset` also drops the group's committed offsets.
    pub struct DeleteSubscriptionGroupRequestHeader {
        group_name: String => "groupName",
        remove_offset: bool => "removeOffset" = false,
    }
}

header! {
    /// QUERY_CONSUME_QUEUE (321): `count` units of one ConsumeQueue from unit `index`. Java's
    /// fields are primitives without `@CFNotNull`: a missing number reads as 0.
    pub struct QueryConsumeQueueRequestHeader {
        topic: String => "topic",
        queue_id: i32 => "queueId" = 0,
        index: i64 => "index" = 0,
        count: i32 => "count" = 0,
        consumer_group: Option<String> => "consumerGroup",
    }
}

header! {
    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, from mqadmin `getConsumerStatus`) and
    /// GET_CONSUMER_STATUS_FROM_CLIENT (221, the broker asking each consumer): Java's
    /// `GetConsumerStatusRequestHeader`. `clientAddr` holds a client id (mqadmin's `-i`); the
    /// broker leaves it out of 221.
    pub struct GetConsumerStatusRequestHeader {
        topic: String => "topic",
        group: String => "group",
        client_addr: Option<String> => "clientAddr",
    }
}

header! {
    /// GET_CONSUMER_RUNNING_INFO (307): from an admin tool to the broker, and forwarded as is to
    /// the consumer's connection.
    pub struct GetConsumerRunningInfoRequestHeader {
        consumer_group: String => "consumerGroup",
        client_id: String => "clientId",
        jstack_enable: bool => "jstackEnable" = false,
    }
}

header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply message the broker hands to the requester's
    /// connection (Java's `ReplyMessageRequestHeader`); the body is the message body.
    pub struct ReplyMessageRequestHeader {
        producer_group: String => "producerGroup",
        topic: String => "topic",
        default_topic: String => "defaultTopic",
        default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        queue_id: i32 => "queueId",
        sys_flag: i32 => "sysFlag",
        born_timestamp: i64 => "bornTimestamp",
        flag: i32 => "flag",
        properties: Option<String> => "properties",
        reconsume_times: Option<i32> => "reconsumeTimes",
        unit_mode: bool => "unitMode" = false,
        born_host: String => "bornHost",
        store_host: String => "storeHost",
        store_timestamp: i64 => "storeTimestamp",
    }
}

#[cfg(test)]
#[path = "header_tests.rs"]
mod tests;
