//! Tests of `header.rs`: the traced client headers, V1/V2 SEND equivalence, error texts and
//! round trips of every header.

use super::*;
use crate::protocol::codec::{decode_frame, MAX_FRAME_BYTES};
use bytes::BytesMut;

/// Decodes a JSON header string (as the trace shows it) through the real frame codec.
fn command_from_json(code_header: &str) -> RemotingCommand {
    let header = code_header.as_bytes();
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&((4 + header.len()) as i32).to_be_bytes());
    buf.extend_from_slice(&(header.len() as u32).to_be_bytes());
    buf.extend_from_slice(header);
    decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().unwrap()
}

const TRACE_SEND_V1: &str = r#"{"code": 10, "language": "RUST", "version": 474, "opaque": 2, "flag": 0, "remark": null, "extFields": {"batch": "false", "bname": "broker-a", "bornTimestamp": "1796016336504", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "flag": "0", "producerGroup": "harness_pg_1", "properties": "TAGS\u0001BenchTag\u0002WAIT\u0001true\u0002UNIQ_KEY\u0001C00002021F2BAC4C820C968286780000\u0002", "queueId": "1", "reconsumeTimes": "0", "sysFlag": "0", "topic": "capT1", "unitMode": "false"}, "serializeTypeCurrentRPC": "JSON"}"#;

/// The same send as Java would write it with SEND_MESSAGE_V2, plus 5.x extras to ignore.
const SEND_V2: &str = r#"{"code":310,"flag":0,"language":"JAVA","opaque":7,"version":401,"serializeTypeCurrentRPC":"JSON","extFields":{"a":"harness_pg_1","b":"capT1","c":"TBW102","d":"4","e":"1","f":"0","g":"1796016336504","h":"0","i":"TAGS\u0001BenchTag\u0002WAIT\u0001true\u0002UNIQ_KEY\u0001C00002021F2BAC4C820C968286780000\u0002","j":"0","k":"false","m":"false","n":"broker-a","ns":"x","nsd":"false","oway":"false","lo":"false"}}"#;

const TRACE_PULL: &str = r#"{"code": 11, "language": "RUST", "version": 474, "opaque": 16, "flag": 0, "remark": null, "extFields": {"bname": "broker-a", "commitOffset": "-1", "consumerGroup": "capG1", "expressionType": "TAG", "maxMsgBytes": "262144", "maxMsgNums": "32", "queueId": "0", "queueOffset": "0", "subVersion": "1796016340600", "subscription": "", "suspendTimeoutMillis": "15000", "sysFlag": "2", "topic": "%RETRY%capG1"}, "serializeTypeCurrentRPC": "JSON"}"#;

fn expected_send() -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "harness_pg_1".into(),
        topic: "capT1".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 1,
        sys_flag: 0,
        born_timestamp: 1_796_016_336_504,
        flag: 0,
        properties:
            "TAGS\u{1}BenchTag\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}C00002021F2BAC4C820C968286780000\u{2}"
                .into(),
        reconsume_times: 0,
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    }
}

#[test]
fn send_v1_from_trace_and_v2_short_names_give_the_same_header() {
    let v1 = SendMessageRequestHeader::from_command(&command_from_json(TRACE_SEND_V1)).unwrap();
    let v2 = SendMessageRequestHeader::from_command(&command_from_json(SEND_V2)).unwrap();
    assert_eq!(v1, expected_send());
    assert_eq!(v2, expected_send());
}

#[test]
fn send_header_round_trips_in_both_spellings() {
    let mut h = expected_send();
    h.max_reconsume_times = Some(16);
    h.unit_mode = true;
    for names in [SendHeaderNames::V1, SendHeaderNames::V2] {
        let ext = h.to_ext_fields(names);
        assert_eq!(
            SendMessageRequestHeader::from_ext_fields(&ext, names).unwrap(),
            h
        );
    }
    let v2 = h.to_ext_fields(SendHeaderNames::V2);
    assert_eq!(v2.get("e"), Some("1"));
    assert_eq!(v2.get("l"), Some("16"));
    // Batches use the V2 names under code 320.
    let batch = RemotingCommand::new_request(request_code::SEND_BATCH_MESSAGE).with_ext_fields(v2);
    assert_eq!(SendMessageRequestHeader::from_command(&batch).unwrap(), h);
}

#[test]
fn v2_code_with_long_names_is_still_understood() {
    let mut cmd = command_from_json(TRACE_SEND_V1);
    cmd.code = request_code::SEND_MESSAGE_V2;
    assert_eq!(
        SendMessageRequestHeader::from_command(&cmd).unwrap(),
        expected_send()
    );
}

#[test]
fn send_header_optional_fields_default_when_absent() {
    let mut cmd = command_from_json(SEND_V2);
    for k in ["i", "j", "k", "m", "n"] {
        cmd.ext_fields.remove(k);
    }
    let h = SendMessageRequestHeader::from_command(&cmd).unwrap();
    assert_eq!(h.properties, "");
    assert_eq!((h.reconsume_times, h.unit_mode, h.batch), (0, false, false));
    assert_eq!(h.broker_name, None);
}

#[test]
fn send_header_errors_name_the_field_in_both_spellings() {
    let mut cmd = command_from_json(SEND_V2);
    cmd.ext_fields.insert("e", "abc");
    let err = SendMessageRequestHeader::from_command(&cmd).unwrap_err();
    assert_eq!(
        err.to_string(),
        "field e (queueId): expected a 32-bit integer, got \"abc\""
    );
    cmd.ext_fields.remove("a");
    cmd.ext_fields.insert("e", "1");
    assert_eq!(
        SendMessageRequestHeader::from_command(&cmd)
            .unwrap_err()
            .to_string(),
        "missing required field a (producerGroup)"
    );

    let mut v1 = command_from_json(TRACE_SEND_V1);
    v1.ext_fields.insert("queueId", "abc");
    assert_eq!(
        SendMessageRequestHeader::from_command(&v1)
            .unwrap_err()
            .to_string(),
        "field queueId: expected a 32-bit integer, got \"abc\""
    );
}

#[test]
fn numbers_and_bools_sent_unquoted_parse_like_strings() {
    let cmd = command_from_json(
        r#"{"code":11,"extFields":{"consumerGroup":"g","topic":"t","queueId":3,"queueOffset":42,
        "maxMsgNums":32,"sysFlag":7,"commitOffset":-1,"suspendTimeoutMillis":15000,
        "subVersion":0,"maxMsgBytes":null}}"#,
    );
    let h = PullMessageRequestHeader::from_command(&cmd).unwrap();
    assert_eq!((h.queue_id, h.queue_offset, h.commit_offset), (3, 42, -1));
    assert_eq!(h.max_msg_bytes, None);
    assert!(h.has_commit_offset() && h.has_suspend() && h.has_subscription());
    assert!(!h.has_class_filter() && !h.is_lite_pull());
}

#[test]
fn pull_header_from_trace() {
    let h = PullMessageRequestHeader::from_command(&command_from_json(TRACE_PULL)).unwrap();
    assert_eq!(h.consumer_group, "capG1");
    assert_eq!(h.topic, "%RETRY%capG1");
    assert_eq!((h.queue_id, h.queue_offset, h.max_msg_nums), (0, 0, 32));
    assert_eq!((h.sys_flag, h.commit_offset), (2, -1));
    assert_eq!(h.suspend_timeout_millis, 15_000);
    assert_eq!(h.subscription.as_deref(), Some(""));
    assert_eq!(h.sub_version, 1_796_016_340_600);
    assert_eq!(h.expression_type.as_deref(), Some("TAG"));
    assert_eq!(h.max_msg_bytes, Some(262_144));
    assert!(h.has_suspend() && !h.has_commit_offset());
    assert_eq!(
        PullMessageRequestHeader::from_ext_fields(&h.to_ext_fields()).unwrap(),
        h
    );
}

#[test]
fn pull_response_matches_trace_fields() {
    let h = PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 1,
        min_offset: 0,
        max_offset: 1,
        offset_delta: None,
        topic_sys_flag: Some(0),
        group_sys_flag: Some(0),
        forbidden_type: None,
    };
    let ext = h.to_ext_fields();
    let fields: Vec<_> = ext.iter().collect();
    assert_eq!(
        fields,
        vec![
            ("suggestWhichBrokerId", "0"),
            ("nextBeginOffset", "1"),
            ("minOffset", "0"),
            ("maxOffset", "1"),
            ("topicSysFlag", "0"),
            ("groupSysFlag", "0"),
        ]
    );
    assert_eq!(PullMessageResponseHeader::from_ext_fields(&ext).unwrap(), h);
}

#[test]
fn send_response_carries_region_and_trace_like_the_trace() {
    let mut h = SendMessageResponseHeader::new("7F00000100002A9F000000000000A244".into(), 1, 0);
    h.transaction_id = Some("C00002021F2BAC4C820C968286780000".into());
    let ext = h.to_ext_fields();
    assert_eq!(ext.get("MSG_REGION"), Some("DefaultRegion"));
    assert_eq!(ext.get("TRACE_ON"), Some("true"));
    assert_eq!(ext.get("msgId"), Some("7F00000100002A9F000000000000A244"));
    assert_eq!(ext.get("queueOffset"), Some("0"));
    assert_eq!(ext.get("batchUniqId"), None);
    assert_eq!(SendMessageResponseHeader::from_ext_fields(&ext).unwrap(), h);

    // A response without the region fields (an older broker) still reads, with defaults.
    let mut bare = ext.clone();
    bare.remove("MSG_REGION");
    bare.remove("TRACE_ON");
    assert_eq!(
        SendMessageResponseHeader::from_ext_fields(&bare).unwrap(),
        h
    );
}

#[test]
fn traced_consumer_headers_decode() {
    let q = QueryConsumerOffsetRequestHeader::from_command(&command_from_json(
        r#"{"code":14,"extFields":{"topic":"%RETRY%capG1","consumerGroup":"capG1","queueId":"0","bname":"broker-a"}}"#,
    ))
    .unwrap();
    assert_eq!(
        (q.topic.as_str(), q.queue_id, q.set_zero_if_not_found),
        ("%RETRY%capG1", 0, None)
    );

    let u = UnregisterClientRequestHeader::from_command(&command_from_json(
        r#"{"code": 35, "language": "RUST", "version": 474, "opaque": 7, "flag": 0, "remark": null, "extFields": {"clientID": "192.0.2.2@7979#1796016336499484534", "producerGroup": "harness_pg_1"}, "serializeTypeCurrentRPC": "JSON"}"#,
    ))
    .unwrap();
    assert_eq!(u.client_id, "192.0.2.2@7979#1796016336499484534");
    assert_eq!(u.producer_group.as_deref(), Some("harness_pg_1"));
    assert_eq!(u.consumer_group, None);

    let n = NotifyConsumerIdsChangedRequestHeader::from_command(&command_from_json(
        r#"{"code": 40, "language": "RUST", "version": 474, "opaque": 846, "flag": 2, "remark": null, "extFields": {"consumerGroup": "capG1"}, "serializeTypeCurrentRPC": "JSON"}"#,
    ))
    .unwrap();
    assert_eq!(n.consumer_group, "capG1");

    let g = GetConsumerListByGroupRequestHeader::from_command(&command_from_json(
        r#"{"code": 38, "language": "RUST", "version": 474, "opaque": 6, "flag": 0, "remark": null, "extFields": {"consumerGroup": "capG1"}, "serializeTypeCurrentRPC": "JSON"}"#,
    ))
    .unwrap();
    assert_eq!(g.consumer_group, "capG1");

    let r = GetRouteInfoRequestHeader::from_command(&command_from_json(
        r#"{"code": 105, "language": "RUST", "version": 474, "opaque": 0, "flag": 0, "remark": null, "extFields": {"topic": "capT1"}, "serializeTypeCurrentRPC": "JSON"}"#,
    ))
    .unwrap();
    assert_eq!(
        (r.topic.as_str(), r.accept_standard_json_only),
        ("capT1", None)
    );
}

#[test]
fn empty_optional_number_is_absent_but_empty_required_number_is_an_error() {
    let ext: ExtFields = [("topic", "t"), ("queueId", "1"), ("committed", "")]
        .into_iter()
        .collect();
    assert_eq!(
        GetMaxOffsetRequestHeader::from_ext_fields(&ext)
            .unwrap()
            .committed,
        None
    );
    let ext: ExtFields = [("topic", "t"), ("queueId", "")].into_iter().collect();
    assert!(GetMinOffsetRequestHeader::from_ext_fields(&ext).is_err());
}

#[test]
fn defaults_apply_only_when_absent() {
    let ext: ExtFields = [
        ("topic", "t"),
        ("defaultTopic", "TBW102"),
        ("readQueueNums", "8"),
        ("writeQueueNums", "8"),
        ("perm", "6"),
        ("topicFilterType", "SINGLE_TAG"),
    ]
    .into_iter()
    .collect();
    let h = CreateTopicRequestHeader::from_ext_fields(&ext).unwrap();
    assert!(!h.order);
    let mut with_order = ext.clone();
    with_order.insert("order", "true");
    assert!(
        CreateTopicRequestHeader::from_ext_fields(&with_order)
            .unwrap()
            .order
    );
    with_order.insert("order", "maybe");
    assert_eq!(
        CreateTopicRequestHeader::from_ext_fields(&with_order)
            .unwrap_err()
            .field(),
        "order"
    );
}

#[test]
fn query_message_reads_the_unique_key_flag() {
    let ext: ExtFields = [
        ("topic", "t"),
        ("key", "C00002021F2BAC4C820C968286780000"),
        ("maxNum", "32"),
        ("beginTimestamp", "0"),
        ("endTimestamp", "9223372036854775807"),
        (UNIQUE_KEY_QUERY, "true"),
    ]
    .into_iter()
    .collect();
    let h = QueryMessageRequestHeader::from_ext_fields(&ext).unwrap();
    assert!(h.unique_key_query);
    assert_eq!(h.end_timestamp, i64::MAX);
}

/// Every header type: a fully populated value survives to_ext_fields → from_ext_fields.
#[test]
fn every_header_round_trips() {
    fn rt<H: CommandHeader + PartialEq + std::fmt::Debug>(h: H) {
        let back = H::from_ext_fields(&h.to_ext_fields()).unwrap();
        assert_eq!(back, h);
        let cmd = RemotingCommand::new_request(0).with_ext_fields(h.to_ext_fields());
        assert_eq!(H::from_command(&cmd).unwrap(), h);
    }
    let s = |v: &str| v.to_owned();
    rt(QueryMessageRequestHeader {
        topic: s("t"),
        key: s("k"),
        max_num: 3,
        begin_timestamp: 1,
        end_timestamp: 2,
        unique_key_query: true,
    });
    rt(QueryMessageResponseHeader {
        index_last_update_timestamp: 5,
        index_last_update_phyoffset: 6,
    });
    rt(ViewMessageByIdRequestHeader { offset: 1 << 40 });
    rt(QueryConsumerOffsetRequestHeader {
        consumer_group: s("g"),
        topic: s("t"),
        queue_id: 2,
        set_zero_if_not_found: Some(false),
    });
    rt(QueryConsumerOffsetResponseHeader { offset: 9 });
    rt(UpdateConsumerOffsetRequestHeader {
        consumer_group: s("g"),
        topic: s("t"),
        queue_id: 2,
        commit_offset: 7,
    });
    rt(GetMaxOffsetRequestHeader {
        topic: s("t"),
        queue_id: 1,
        committed: Some(true),
    });
    rt(GetMaxOffsetResponseHeader { offset: 3 });
    rt(GetMinOffsetRequestHeader {
        topic: s("t"),
        queue_id: 1,
    });
    rt(GetMinOffsetResponseHeader { offset: 0 });
    rt(SearchOffsetRequestHeader {
        topic: s("t"),
        queue_id: 1,
        timestamp: 4,
        boundary_type: Some(s("LOWER")),
    });
    rt(SearchOffsetResponseHeader { offset: 8 });
    rt(GetEarliestMsgStoretimeRequestHeader {
        topic: s("t"),
        queue_id: 1,
    });
    rt(GetEarliestMsgStoretimeResponseHeader {
        timestamp: 1_700_000_000_000,
    });
    rt(UnregisterClientRequestHeader {
        client_id: s("c"),
        producer_group: None,
        consumer_group: Some(s("g")),
    });
    rt(GetConsumerListByGroupRequestHeader {
        consumer_group: s("g"),
    });
    rt(NotifyConsumerIdsChangedRequestHeader {
        consumer_group: s("g"),
    });
    rt(ConsumerSendMsgBackRequestHeader {
        offset: 99,
        group: s("g"),
        delay_level: 0,
        origin_msg_id: Some(s("id")),
        origin_topic: Some(s("t")),
        unit_mode: false,
        max_reconsume_times: Some(16),
    });
    rt(CreateTopicRequestHeader {
        topic: s("t"),
        default_topic: s("TBW102"),
        read_queue_nums: 8,
        write_queue_nums: 8,
        perm: 6,
        topic_filter_type: s("SINGLE_TAG"),
        topic_sys_flag: Some(0),
        order: true,
        attributes: None,
    });
    rt(GetRouteInfoRequestHeader {
        topic: s("t"),
        accept_standard_json_only: Some(true),
    });
    rt(RegisterBrokerRequestHeader {
        broker_name: s("broker-a"),
        broker_addr: s("10.0.0.1:10911"),
        cluster_name: s("DefaultCluster"),
        ha_server_addr: s("10.0.0.1:10912"),
        broker_id: 0,
        compressed: false,
        body_crc32: 12345,
        heartbeat_timeout_millis: None,
        enable_acting_master: Some(false),
    });
    rt(RegisterBrokerResponseHeader {
        ha_server_addr: Some(s("10.0.0.1:10912")),
        master_addr: None,
    });
    rt(UnregisterBrokerRequestHeader {
        broker_name: s("broker-a"),
        broker_addr: s("a:1"),
        cluster_name: s("c"),
        broker_id: 1,
    });
    rt(PullMessageRequestHeader {
        consumer_group: s("g"),
        topic: s("t"),
        queue_id: 1,
        queue_offset: 2,
        max_msg_nums: 32,
        sys_flag: 0x1F,
        commit_offset: 3,
        suspend_timeout_millis: 15_000,
        subscription: Some(s("a || b")),
        sub_version: 4,
        expression_type: Some(s("TAG")),
        max_msg_bytes: Some(1),
        request_source: Some(-1),
        proxy_froward_client_id: Some(s("p")),
    });
}
