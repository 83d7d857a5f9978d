//! Request and response codes of the remoting protocol, with names for logs.
//!
//! Owns: the numbers. Names are RocketMQ's (`RequestCode` / `ResponseCode` constants), so a log
//! line or a packet capture can be matched against Java's sources and tools.
//!
//! Invariant: each table below is the single place a code is defined; the `*_name` functions are
//! generated from the same table, so a code can never be defined without a name. The tests check
//! that no number appears twice in a table.

macro_rules! code_table {
    (
        $(#[$mod_meta:meta])*
        mod $module:ident;
        $(#[$fn_meta:meta])*
        fn $name_fn:ident;
        all $all:ident;
        { $( $(#[$meta:meta])* $code:ident = $value:expr, )* }
    ) => {
        $(#[$mod_meta])*
        pub mod $module {
            $( $(#[$meta])* pub const $code: i32 = $value; )*

            /// Every `(code, name)` of this table, in definition order.
            pub const $all: &[(i32, &str)] = &[ $( ($code, stringify!($code)), )* ];
        }

        $(#[$fn_meta])*
        pub fn $name_fn(code: i32) -> &'static str {
            $module::$all
                .iter()
                .find(|(c, _)| *c == code)
                .map_or("UNKNOWN", |(_, name)| name)
        }
    };
}

code_table! {
    /// Request codes (`RequestCode`). Broker and name-server requests, plus the broker → client
    /// requests (39, 40, 220, 221, 307, 309) ActorMQ may send.
    mod request_code;
    /// Name of a request code for logs, `"UNKNOWN"` if it is not in the table.
    fn request_code_name;
    all ALL;
    {
        SEND_MESSAGE = 10,
        PULL_MESSAGE = 11,
        QUERY_MESSAGE = 12,
        QUERY_BROKER_OFFSET = 13,
        QUERY_CONSUMER_OFFSET = 14,
        UPDATE_CONSUMER_OFFSET = 15,
        UPDATE_AND_CREATE_TOPIC = 17,
        GET_ALL_TOPIC_CONFIG = 21,
        UPDATE_BROKER_CONFIG = 25,
        GET_BROKER_CONFIG = 26,
        TRIGGER_DELETE_FILES = 27,
        GET_BROKER_RUNTIME_INFO = 28,
        SEARCH_OFFSET_BY_TIMESTAMP = 29,
        GET_MAX_OFFSET = 30,
        GET_MIN_OFFSET = 31,
        GET_EARLIEST_MSG_STORETIME = 32,
        VIEW_MESSAGE_BY_ID = 33,
        HEART_BEAT = 34,
        UNREGISTER_CLIENT = 35,
        CONSUMER_SEND_MSG_BACK = 36,
        END_TRANSACTION = 37,
        GET_CONSUMER_LIST_BY_GROUP = 38,
        /// Broker → producer, oneway.
        CHECK_TRANSACTION_STATE = 39,
        /// Broker → consumer, oneway.
        NOTIFY_CONSUMER_IDS_CHANGED = 40,
        LOCK_BATCH_MQ = 41,
        UNLOCK_BATCH_MQ = 42,
        GET_ALL_CONSUMER_OFFSET = 43,
        GET_ALL_DELAY_OFFSET = 45,
        CHECK_CLIENT_CONFIG = 46,
        GET_CLIENT_CONFIG = 47,
        UPDATE_AND_CREATE_ACL_CONFIG = 50,
        DELETE_ACL_CONFIG = 51,
        GET_BROKER_CLUSTER_ACL_INFO = 52,
        UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53,
        GET_BROKER_CLUSTER_ACL_CONFIG = 54,
        PUT_KV_CONFIG = 100,
        GET_KV_CONFIG = 101,
        DELETE_KV_CONFIG = 102,
        REGISTER_BROKER = 103,
        UNREGISTER_BROKER = 104,
        GET_ROUTEINFO_BY_TOPIC = 105,
        GET_BROKER_CLUSTER_INFO = 106,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
        GET_TOPIC_STATS_INFO = 202,
        GET_CONSUMER_CONNECTION_LIST = 203,
        GET_PRODUCER_CONNECTION_LIST = 204,
        WIPE_WRITE_PERM_OF_BROKER = 205,
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
        DELETE_SUBSCRIPTIONGROUP = 207,
        GET_CONSUME_STATS = 208,
        SUSPEND_CONSUMER = 209,
        RESUME_CONSUMER = 210,
        RESET_CONSUMER_OFFSET_IN_CONSUMER = 211,
        RESET_CONSUMER_OFFSET_IN_BROKER = 212,
        ADJUST_CONSUMER_THREAD_POOL = 213,
        WHO_CONSUME_THE_MESSAGE = 214,
        DELETE_TOPIC_IN_BROKER = 215,
        DELETE_TOPIC_IN_NAMESRV = 216,
        /// Sent by clients/brokers to the name server after a topic is auto-created.
        REGISTER_TOPIC_IN_NAMESRV = 217,
        GET_KVLIST_BY_NAMESPACE = 219,
        /// Broker → client.
        RESET_CONSUMER_CLIENT_OFFSET = 220,
        /// Broker → client.
        GET_CONSUMER_STATUS_FROM_CLIENT = 221,
        INVOKE_BROKER_TO_RESET_OFFSET = 222,
        INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223,
        GET_TOPICS_BY_CLUSTER = 224,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225,
        QUERY_TOPIC_CONSUME_BY_WHO = 300,
        REGISTER_FILTER_SERVER = 301,
        REGISTER_MESSAGE_FILTER_CLASS = 302,
        QUERY_CONSUME_TIME_SPAN = 303,
        GET_SYSTEM_TOPIC_LIST_FROM_NS = 304,
        GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305,
        CLEAN_EXPIRED_CONSUMEQUEUE = 306,
        /// Broker → client.
        GET_CONSUMER_RUNNING_INFO = 307,
        QUERY_CORRECTION_OFFSET = 308,
        /// Broker → client.
        CONSUME_MESSAGE_DIRECTLY = 309,
        /// Java's default send: V2 short header names `a`..`n`.
        SEND_MESSAGE_V2 = 310,
        GET_UNIT_TOPIC_LIST = 311,
        GET_HAS_UNIT_SUB_TOPIC_LIST = 312,
        GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313,
        CLONE_GROUP_OFFSET = 314,
        VIEW_BROKER_STATS_DATA = 315,
        CLEAN_UNUSED_TOPIC = 316,
        GET_BROKER_CONSUME_STATS = 317,
        UPDATE_NAMESRV_CONFIG = 318,
        GET_NAMESRV_CONFIG = 319,
        /// V2 header; body = batch encoding (`batch.rs`).
        SEND_BATCH_MESSAGE = 320,
        QUERY_CONSUME_QUEUE = 321,
        QUERY_DATA_VERSION = 322,
        RESUME_CHECK_HALF_MESSAGE = 323,
        /// Request-reply, V1 header.
        SEND_REPLY_MESSAGE = 324,
        /// Request-reply, V2 header.
        SEND_REPLY_MESSAGE_V2 = 325,
        PUSH_REPLY_MESSAGE_TO_CLIENT = 326,
        ADD_WRITE_PERM_OF_BROKER = 327,
        GET_ALL_PRODUCER_INFO = 328,
        DELETE_EXPIRED_COMMITLOG = 329,
        GET_TOPIC_CONFIG = 351,
        /// 5.x lite pull (sysFlag 0x10); same headers and semantics as PULL_MESSAGE.
        LITE_PULL_MESSAGE = 361,
        QUERY_ASSIGNMENT = 400,
        SET_MESSAGE_REQUEST_MODE = 401,
        /// 5.x pop consumption. Outside i16: cannot travel in a ROCKETMQ binary header.
        POP_MESSAGE = 200050,
        ACK_MESSAGE = 200051,
    }
}

code_table! {
    /// Response codes (`ResponseCode` and `RemotingSysResponseCode`).
    mod response_code;
    /// Name of a response code for logs, `"UNKNOWN"` if it is not in the table.
    fn response_code_name;
    all ALL;
    {
        SUCCESS = 0,
        SYSTEM_ERROR = 1,
        SYSTEM_BUSY = 2,
        REQUEST_CODE_NOT_SUPPORTED = 3,
        TRANSACTION_FAILED = 4,
        FLUSH_DISK_TIMEOUT = 10,
        SLAVE_NOT_AVAILABLE = 11,
        FLUSH_SLAVE_TIMEOUT = 12,
        MESSAGE_ILLEGAL = 13,
        SERVICE_NOT_AVAILABLE = 14,
        VERSION_NOT_SUPPORTED = 15,
        NO_PERMISSION = 16,
        TOPIC_NOT_EXIST = 17,
        TOPIC_EXIST_ALREADY = 18,
        PULL_NOT_FOUND = 19,
        PULL_RETRY_IMMEDIATELY = 20,
        PULL_OFFSET_MOVED = 21,
        QUERY_NOT_FOUND = 22,
        SUBSCRIPTION_PARSE_FAILED = 23,
        SUBSCRIPTION_NOT_EXIST = 24,
        SUBSCRIPTION_NOT_LATEST = 25,
        SUBSCRIPTION_GROUP_NOT_EXIST = 26,
        FILTER_DATA_NOT_EXIST = 27,
        FILTER_DATA_NOT_LATEST = 28,
        /// 5.x.
        INVALID_PARAMETER = 29,
        TRANSACTION_SHOULD_COMMIT = 200,
        TRANSACTION_SHOULD_ROLLBACK = 201,
        TRANSACTION_STATE_UNKNOW = 202,
        TRANSACTION_STATE_GROUP_WRONG = 203,
        NO_BUYER_ID = 204,
        NOT_IN_CURRENT_UNIT = 205,
        CONSUMER_NOT_ONLINE = 206,
        CONSUME_MSG_TIMEOUT = 207,
        NO_MESSAGE = 208,
        UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209,
        DELETE_ACL_CONFIG_FAILED = 210,
        UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211,
        /// 5.x.
        FLOW_CONTROL = 215,
        /// 5.x proxy.
        GO_AWAY = 1500,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn numbers_are_unique_per_table() {
        for table in [request_code::ALL, response_code::ALL] {
            let mut seen = HashSet::new();
            for (code, name) in table {
                assert!(seen.insert(*code), "{name} reuses {code}");
            }
        }
    }

    #[test]
    fn names_for_logs() {
        assert_eq!(
            request_code_name(request_code::SEND_MESSAGE_V2),
            "SEND_MESSAGE_V2"
        );
        assert_eq!(request_code_name(217), "REGISTER_TOPIC_IN_NAMESRV");
        assert_eq!(request_code_name(361), "LITE_PULL_MESSAGE");
        assert_eq!(request_code_name(-7), "UNKNOWN");
        assert_eq!(response_code_name(22), "QUERY_NOT_FOUND");
        assert_eq!(response_code_name(9999), "UNKNOWN");
    }

    #[test]
    fn spec_numbers() {
        use request_code::*;
        assert_eq!(
            [
                SEND_MESSAGE,
                PULL_MESSAGE,
                HEART_BEAT,
                SEND_BATCH_MESSAGE,
                SEND_REPLY_MESSAGE_V2
            ],
            [10, 11, 34, 320, 325]
        );
        assert_eq!(
            [
                REGISTER_BROKER,
                GET_BROKER_CLUSTER_INFO,
                QUERY_CONSUME_QUEUE
            ],
            [103, 106, 321]
        );
        assert_eq!(response_code::PULL_OFFSET_MOVED, 21);
        assert_eq!(response_code::GO_AWAY, 1500);
    }
}
