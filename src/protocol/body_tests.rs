//! Tests of `body.rs`: the traced bodies, tolerance of other clients' JSON, fastjson's reading
//! leniencies, and output byte-equal to Apache RocketMQ 4.9.4's.

use super::*;

const TRACE_PRODUCER_HEARTBEAT: &str = r#"{"clientID":"192.0.2.2@7979#1796016336499484534","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"harness_pg_1"}],"consumerDataSet":[],"heartbeatFingerprint":0,"withoutSub":false}"#;

const TRACE_CONSUMER_HEARTBEAT: &str = r#"{"clientID":"192.0.2.2@7999#1796016339589619484","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"consumerDataSet":[{"groupName":"capG1","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"capT1","subString":"*","tagsSet":[],"codeSet":[],"subVersion":0,"expressionType":"TAG"},{"classFilterMode":false,"topic":"%RETRY%capG1","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1796016340600,"expressionType":"TAG"}],"unitMode":false}],"heartbeatFingerprint":0,"withoutSub":false}"#;

/// A 5.x broker's route (explicit `null`s, quoted keys, declaration order): still readable.
const TRACE_ROUTE: &str = r#"{"orderTopicConf":null,"queueDatas":[{"brokerName":"broker-a","readQueueNums":8,"writeQueueNums":8,"perm":7,"topicSysFlag":0}],"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"},"zoneName":null,"enableActingMaster":false}],"filterServerTable":{},"topicQueueMappingInfo":null}"#;

// Golden strings printed by Apache RocketMQ 4.9.4's own classes (`RemotingSerializable.toJson`
// of org.apache.rocketmq.common.protocol.route.TopicRouteData, …body.ClusterInfo,
// …body.TopicList, …body.KVTable, …body.LockBatchResponseBody,
// …header.GetConsumerListByGroupResponseBody, …body.RegisterBrokerBody and
// …heartbeat.HeartbeatData), built with the values the tests below build.

/// TopicRouteData: 8/8 queues perm 6 on broker-a, brokers 0 and 1, empty filterServerTable.
const JAVA_ROUTE: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
/// TopicRouteData with orderTopicConf and a filter server.
const JAVA_ROUTE_ORDER_FILTER: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{"127.0.0.1:10911":["127.0.0.1:30000"]},"orderTopicConf":"broker-a:8","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
/// ClusterInfo: DefaultCluster → broker-a with the brokers above.
const JAVA_CLUSTER: &str = r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#;
const JAVA_TOPIC_LIST: &str = r#"{"topicList":["a","b"]}"#;
const JAVA_TOPIC_LIST_ADDR: &str = r#"{"brokerAddr":"127.0.0.1:10911","topicList":["a","b"]}"#;
const JAVA_KV: &str = r#"{"table":{"k":"v"}}"#;
const JAVA_KV_EMPTY: &str = r#"{"table":{}}"#;
const JAVA_LOCK_RESPONSE: &str =
    r#"{"lockOKMQSet":[{"brokerName":"broker-a","queueId":3,"topic":"t"}]}"#;
const JAVA_CONSUMER_LIST: &str = r#"{"consumerIdList":["192.0.2.2@7999#1796016339589619484"]}"#;
const JAVA_REGISTER_BODY: &str = r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"capT1":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"capT1","topicSysFlag":0,"writeQueueNums":4}}}}"#;
/// A Java 4.9.4 client's consumer heartbeat (enums by name, fields sorted).
const JAVA_HEARTBEAT: &str = r#"{"clientID":"192.0.2.2@7999#1796016339589619484","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"capG1","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919,2598921],"expressionType":"TAG","subString":"TagA || TagC","subVersion":1796016340600,"tagsSet":["TagA","TagC"],"topic":"capT1"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;

/// Apache's C++ client (librocketmq) heartbeat from issue #32: enums as ordinals, subVersion as
/// a string. Java 4.9.4 reads it as CONSUME_PASSIVELY / CLUSTERING / CONSUME_FROM_LAST_OFFSET,
/// subVersion 1796622676484.
const CPP_HEARTBEAT: &str = r#"{"clientID":"127.0.0.1@12345#2058936152#1796622676484","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"g","messageModel":1,"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[0,0],"expressionType":"TAG","subString":"TagA || TagC","subVersion":"1796622676484","tagsSet":["TagA","TagC"],"topic":"T"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;

/// What we write where Java writes `golden`: the same text, plus 5.x's `enableActingMaster`
/// after each BrokerData's `cluster` (see `BrokerData` for why).
fn with_acting_master(golden: &str) -> String {
    golden.replace(
        r#""cluster":"DefaultCluster""#,
        r#""cluster":"DefaultCluster","enableActingMaster":false"#,
    )
}

fn json(v: &impl Serialize) -> String {
    String::from_utf8(to_json_bytes(v).unwrap().to_vec()).unwrap()
}

fn broker_a() -> BrokerData {
    BrokerData {
        broker_addrs: BTreeMap::from([
            (MASTER_ID, "127.0.0.1:10911".to_owned()),
            (1, "127.0.0.1:10921".to_owned()),
        ]),
        broker_name: "broker-a".into(),
        cluster: "DefaultCluster".into(),
        enable_acting_master: false,
        zone_name: None,
    }
}

fn route_8x8() -> TopicRouteData {
    TopicRouteData {
        broker_datas: vec![broker_a()],
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            perm: perm::READ | perm::WRITE,
            read_queue_nums: 8,
            topic_sys_flag: 0,
            write_queue_nums: 8,
        }],
        ..TopicRouteData::default()
    }
}

#[test]
fn route_and_cluster_bodies_are_byte_equal_to_java() {
    let route = route_8x8();
    assert_eq!(json(&route), with_acting_master(JAVA_ROUTE));
    let mut with_order = route.clone();
    with_order.order_topic_conf = Some("broker-a:8".into());
    with_order.filter_server_table =
        BTreeMap::from([("127.0.0.1:10911".into(), vec!["127.0.0.1:30000".into()])]);
    assert_eq!(
        json(&with_order),
        with_acting_master(JAVA_ROUTE_ORDER_FILTER)
    );

    // What 4.9.4's name server writes for a request of version ≥ 401 (`encode(BrowserCompatible,
    // QuoteFieldNames, SkipTransientField, MapSortField)` of the same TopicRouteData).
    const JAVA_ROUTE_STANDARD: &str = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
    let standard = to_standard_json_bytes(&route).unwrap();
    assert_eq!(
        std::str::from_utf8(&standard).unwrap(),
        with_acting_master(JAVA_ROUTE_STANDARD)
    );
    assert_eq!(
        serde_json::from_slice::<TopicRouteData>(&standard).unwrap(),
        route
    );

    let info = ClusterInfo {
        broker_addr_table: BTreeMap::from([("broker-a".into(), broker_a())]),
        cluster_addr_table: BTreeMap::from([("DefaultCluster".into(), vec!["broker-a".into()])]),
    };
    assert_eq!(json(&info), with_acting_master(JAVA_CLUSTER));

    // Java's own text, and ours, read back to the same values.
    for (text, value) in [(JAVA_ROUTE, &route), (JAVA_ROUTE_ORDER_FILTER, &with_order)] {
        assert_eq!(
            &parse_java_json::<TopicRouteData>(text.as_bytes()).unwrap(),
            value
        );
        assert_eq!(
            &parse_java_json::<TopicRouteData>(json(value).as_bytes()).unwrap(),
            value
        );
    }
    assert_eq!(
        parse_java_json::<ClusterInfo>(JAVA_CLUSTER.as_bytes()).unwrap(),
        info
    );
    assert_eq!(
        parse_java_json::<ClusterInfo>(json(&info).as_bytes()).unwrap(),
        info
    );
}

#[test]
fn list_kv_lock_and_register_bodies_are_byte_equal_to_java() {
    let mut list = TopicList {
        broker_addr: None,
        topic_list: vec!["a".into(), "b".into()],
    };
    assert_eq!(json(&list), JAVA_TOPIC_LIST);
    list.broker_addr = Some("127.0.0.1:10911".into());
    assert_eq!(json(&list), JAVA_TOPIC_LIST_ADDR);

    let mut kv = KvTable::default();
    assert_eq!(json(&kv), JAVA_KV_EMPTY);
    kv.table.insert("k".into(), "v".into());
    assert_eq!(json(&kv), JAVA_KV);

    let lock = LockBatchResponseBody {
        lock_ok_mq_set: vec![MessageQueue {
            broker_name: "broker-a".into(),
            queue_id: 3,
            topic: "t".into(),
        }],
    };
    assert_eq!(json(&lock), JAVA_LOCK_RESPONSE);
    let consumers = ConsumerListBody {
        consumer_id_list: vec!["192.0.2.2@7999#1796016339589619484".into()],
    };
    assert_eq!(json(&consumers), JAVA_CONSUMER_LIST);

    let register = RegisterBrokerBody {
        filter_server_list: Vec::new(),
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: 3,
                state_version: None,
                timestamp: 1_700_000_000_000,
            },
            topic_config_table: BTreeMap::from([(
                "capT1".into(),
                TopicConfig {
                    topic_name: "capT1".into(),
                    read_queue_nums: 4,
                    write_queue_nums: 4,
                    ..TopicConfig::default()
                },
            )]),
        },
    };
    assert_eq!(json(&register), JAVA_REGISTER_BODY);
    let back: RegisterBrokerBody = parse_java_json(JAVA_REGISTER_BODY.as_bytes()).unwrap();
    assert_eq!(back, register);
}

#[test]
fn java_and_cpp_heartbeats_read_as_java_reads_them() {
    let java: HeartbeatData = parse_java_json(JAVA_HEARTBEAT.as_bytes()).unwrap();
    // Written back, it is the Java client's own text.
    assert_eq!(json(&java), JAVA_HEARTBEAT);
    let sub = &java.consumer_data_set[0].subscription_data_set[0];
    assert_eq!(sub.code_set, [2_598_919, 2_598_921]);

    let cpp: HeartbeatData = parse_java_json(CPP_HEARTBEAT.as_bytes()).unwrap();
    assert_eq!(cpp.client_id, "127.0.0.1@12345#2058936152#1796622676484");
    assert_eq!(cpp.producer_data_set[0].group_name, "CLIENT_INNER_PRODUCER");
    let g = &cpp.consumer_data_set[0];
    assert_eq!(
        (g.consume_type, g.message_model, g.consume_from_where),
        (
            ConsumeType::ConsumePassively,
            MessageModel::Clustering,
            ConsumeFromWhere::ConsumeFromLastOffset
        )
    );
    let s = &g.subscription_data_set[0];
    assert_eq!(s.sub_version, 1_796_622_676_484);
    assert_eq!(s.tags_set, ["TagA", "TagC"]);
    assert_eq!(
        (s.topic.as_str(), s.sub_string.as_str()),
        ("T", "TagA || TagC")
    );
    assert_eq!(s.code_set, [0, 0]);
}

/// Parses one ConsumerData field set; `Err` when fastjson (and so we) refuse it.
fn consumer(fields: &str) -> Result<ConsumerData, serde_json::Error> {
    parse_java_json(format!("{{{fields}}}").as_bytes())
}

#[test]
fn enums_read_by_ordinal_in_java_declaration_order_or_by_name() {
    use ConsumeFromWhere as W;
    // What 4.9.4 printed for `"consumeFromWhere":N`, N = 0..=5 (deprecated members included).
    let by_ordinal = [
        W::ConsumeFromLastOffset,
        W::ConsumeFromLastOffsetAndFromMinWhenBootFirst,
        W::ConsumeFromMinOffset,
        W::ConsumeFromMaxOffset,
        W::ConsumeFromFirstOffset,
        W::ConsumeFromTimestamp,
    ];
    for (n, want) in by_ordinal.into_iter().enumerate() {
        let c = consumer(&format!(r#""consumeFromWhere":{n}"#)).unwrap();
        assert_eq!(c.consume_from_where, want, "ordinal {n}");
        assert_eq!(W::JAVA[n].0, want);
        let by_name = consumer(&format!(r#""consumeFromWhere":"{}""#, want.java_name())).unwrap();
        assert_eq!(by_name.consume_from_where, want);
    }
    let c = consumer(r#""consumeType":0,"messageModel":0"#).unwrap();
    assert_eq!(
        (c.consume_type, c.message_model),
        (ConsumeType::ConsumeActively, MessageModel::Broadcasting)
    );
    // Names in any case (fastjson matches the lower-cased name too).
    let c = consumer(r#""consumeType":"Consume_Actively","messageModel":"broadcasting""#).unwrap();
    assert_eq!(
        (c.consume_type, c.message_model),
        (ConsumeType::ConsumeActively, MessageModel::Broadcasting)
    );
    // fastjson: `""`, `null` ⇒ null (our default); an unknown name ⇒ null, an ordinal string
    // ("1") is a name, not an ordinal; out-of-range ordinals, floats and booleans are errors.
    // We read every unknown as `Unknown` rather than failing the heartbeat.
    let c = consumer(r#""consumeType":"","messageModel":null"#).unwrap();
    assert_eq!(
        (c.consume_type, c.message_model),
        (ConsumeType::ConsumePassively, MessageModel::Clustering)
    );
    for odd in [r#""1""#, r#""BOGUS""#, "6", "-1", "1.0", "true"] {
        let c = consumer(&format!(r#""consumeFromWhere":{odd},"consumeType":{odd}"#)).unwrap();
        assert_eq!(c.consume_from_where, W::Unknown, "{odd}");
        assert_eq!(c.consume_type, ConsumeType::Unknown, "{odd}");
    }
    // Written by name, as Java writes enums.
    assert_eq!(json(&TopicFilterType::MultiTag), r#""MULTI_TAG""#);
}

#[test]
fn scalars_convert_as_fastjson_converts_them() {
    // Each case: the JSON value of `unitMode`, and what 4.9.4 read (None = it threw).
    let bools: &[(&str, Option<bool>)] = &[
        (r#""true""#, Some(true)),
        (r#""TRUE""#, Some(true)),
        (r#""False""#, Some(false)),
        ("1", Some(true)),
        ("2", Some(false)),
        ("0", Some(false)),
        ("-1", Some(false)),
        ("1.0", Some(true)),
        (r#""1""#, Some(true)),
        (r#""0""#, Some(false)),
        (r#""Y""#, Some(true)),
        (r#""y""#, Some(true)),
        (r#""T""#, Some(true)),
        (r#""N""#, Some(false)),
        (r#""F""#, Some(false)),
        (r#""""#, Some(false)),
        ("null", Some(false)),
        (r#""yes""#, None),
        (r#""2""#, None),
        (r#"" true""#, None),
        ("[]", None),
    ];
    for (v, want) in bools {
        let got = consumer(&format!(r#""unitMode":{v}"#))
            .ok()
            .map(|c| c.unit_mode);
        assert_eq!(got, *want, "unitMode {v}");
    }

    // `readQueueNums` of a TopicConfig (default 16), as 4.9.4 read it.
    let ints: &[(&str, Option<i32>)] = &[
        (r#""8""#, Some(8)),
        (r#""-3""#, Some(-3)),
        (r#""+5""#, Some(5)),
        ("8.7", Some(8)),
        ("1e2", Some(100)),
        ("-0", Some(0)),
        ("true", Some(1)),
        (r#""""#, Some(16)),
        ("null", Some(16)),
        (r#""null""#, Some(16)),
        (r#""8.7""#, None),
        (r#"" 8""#, None),
        (r#""0x10""#, None),
        (r#""1e2""#, None),
        ("4294967297", None),
        (r#""4294967297""#, None),
        ("[]", None),
    ];
    for (v, want) in ints {
        let got = parse_java_json::<TopicConfig>(format!(r#"{{"readQueueNums":{v}}}"#).as_bytes())
            .ok()
            .map(|t| t.read_queue_nums);
        assert_eq!(got, *want, "readQueueNums {v}");
    }

    // Strings from any scalar; longs from strings; sets of numbers and strings mixed.
    let c = consumer(r#""groupName":123"#).unwrap();
    assert_eq!(c.group_name, "123");
    assert_eq!(consumer(r#""groupName":true"#).unwrap().group_name, "true");
    assert_eq!(consumer(r#""groupName":-1.5"#).unwrap().group_name, "-1.5");
    let s: SubscriptionData = parse_java_json(
        br#"{"subVersion":"42","codeSet":["97",98,null,1.5],"tagsSet":[1,"b",true,null],"classFilterMode":"true","expressionType":null}"#,
    )
    .unwrap();
    assert_eq!(s.sub_version, 42);
    assert_eq!(s.code_set, [97, 98, 1]);
    assert_eq!(s.tags_set, ["1", "b", "true"]);
    assert!(s.class_filter_mode);
    assert_eq!(s.expression_type, "TAG");
    for refused in [r#""42.9""#, r#""abc""#, r#""1e3""#, "9223372036854775808"] {
        let r = parse_java_json::<SubscriptionData>(
            format!(r#"{{"subVersion":{refused}}}"#).as_bytes(),
        );
        assert!(r.is_err(), "subVersion {refused}");
    }

    // LOCK_BATCH_MQ with a numeric clientId and a string queueId, as 4.9.4 reads it.
    let req: LockBatchRequestBody = parse_java_json(
        br#"{"consumerGroup":"g","clientId":1,"mqSet":[{"topic":"t","brokerName":"broker-a","queueId":"3"}],"onlyThisBroker":"true"}"#,
    )
    .unwrap();
    assert_eq!((req.client_id.as_str(), req.mq_set[0].queue_id), ("1", 3));
    assert!(req.only_this_broker);

    // REGISTER_BROKER with numbers as strings and an ordinal topicFilterType.
    let t: TopicConfig = parse_java_json(
        br#"{"topicName":"x","readQueueNums":"8","writeQueueNums":8,"perm":"6","topicFilterType":1,"order":"true","topicSysFlag":null}"#,
    )
    .unwrap();
    assert_eq!(
        (
            t.read_queue_nums,
            t.write_queue_nums,
            t.perm,
            t.topic_sys_flag
        ),
        (8, 8, 6, 0)
    );
    assert_eq!(t.topic_filter_type, TopicFilterType::MultiTag);
    assert!(t.order);
    let d: DataVersion =
        parse_java_json(br#"{"timestamp":"1700000000000","counter":"3"}"#).unwrap();
    assert_eq!((d.timestamp, d.counter), (1_700_000_000_000, 3));
}

#[test]
fn integer_keys_are_written_bare_and_read_quoted_or_bare() {
    let m = BTreeMap::from([(-1i64, "a"), (0, "b"), (10, "c")]);
    assert_eq!(json(&m), r#"{-1:"a",0:"b",10:"c"}"#);
    // String keys stay quoted, escapes included; an empty key is `""`.
    let s = BTreeMap::from([("", 1), ("0", 2), ("q\"", 3)]);
    assert_eq!(json(&s), r#"{"":1,"0":2,"q\"":3}"#);
    // Nested: integer keys inside string-keyed maps, and values that are numbers.
    let nested = BTreeMap::from([("x", BTreeMap::from([(7u32, 8u32)]))]);
    assert_eq!(json(&nested), r#"{"x":{7:8}}"#);
    let back: BTreeMap<String, BTreeMap<u32, u32>> =
        parse_java_json(json(&nested).as_bytes()).unwrap();
    assert_eq!(back["x"][&7], 8);
    let mixed: TopicRouteData = parse_java_json(
        br#"{"brokerDatas":[{"brokerAddrs":{0:"a:1","1":"b:1", 2 : "c:1"},"brokerName":"x","cluster":"c"}]}"#,
    )
    .unwrap();
    assert_eq!(mixed.broker_datas[0].broker_addrs.len(), 3);
}

#[test]
fn traced_heartbeats_parse() {
    let p: HeartbeatData = parse_java_json(TRACE_PRODUCER_HEARTBEAT.as_bytes()).unwrap();
    assert_eq!(p.client_id, "192.0.2.2@7979#1796016336499484534");
    let groups: Vec<_> = p
        .producer_data_set
        .iter()
        .map(|g| g.group_name.as_str())
        .collect();
    assert_eq!(groups, ["CLIENT_INNER_PRODUCER", "harness_pg_1"]);
    assert!(p.consumer_data_set.is_empty());
    assert_eq!(
        (p.heartbeat_fingerprint, p.without_sub),
        (Some(0), Some(false))
    );

    let c: HeartbeatData = parse_java_json(TRACE_CONSUMER_HEARTBEAT.as_bytes()).unwrap();
    let group = &c.consumer_data_set[0];
    assert_eq!(group.group_name, "capG1");
    assert_eq!(group.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(group.message_model, MessageModel::Clustering);
    assert_eq!(
        group.consume_from_where,
        ConsumeFromWhere::ConsumeFromFirstOffset
    );
    assert_eq!(group.subscription_data_set.len(), 2);
    let retry = &group.subscription_data_set[1];
    assert_eq!(retry.topic, "%RETRY%capG1");
    assert_eq!(retry.sub_string, "*");
    assert_eq!(retry.sub_version, 1_796_016_340_600);
    assert_eq!(retry.expression_type, "TAG");

    // What we write parses back to the same value.
    let again: HeartbeatData = parse_java_json(&to_json_bytes(&c).unwrap()).unwrap();
    assert_eq!(again, c);
}

#[test]
fn heartbeat_tolerates_nulls_missing_fields_unknown_enums_and_extra_fields() {
    let go_style = r#"{"clientID":"c","producerDataSet":null,"consumerDataSet":[{"groupName":"g",
        "consumeType":"CONSUME_SOMEHOW","messageModel":null,"subscriptionDataSet":[{"topic":"t",
        "subString":"a || b","tagsSet":null,"codeSet":[97,98],"expressionType":null,"newField":{"x":1}}],
        "unitMode":null}],"futureField":[1,2,3]}"#;
    let h: HeartbeatData = parse_java_json(go_style.as_bytes()).unwrap();
    assert!(h.producer_data_set.is_empty());
    let g = &h.consumer_data_set[0];
    assert_eq!(g.consume_type, ConsumeType::Unknown);
    assert_eq!(g.message_model, MessageModel::Clustering);
    assert_eq!(
        g.consume_from_where,
        ConsumeFromWhere::ConsumeFromLastOffset
    );
    let s = &g.subscription_data_set[0];
    assert!(s.tags_set.is_empty());
    assert_eq!(s.code_set, [97, 98]);
    assert_eq!(s.expression_type, "TAG");

    let empty: HeartbeatData = parse_java_json(b"{}").unwrap();
    assert_eq!(empty, HeartbeatData::default());
}

#[test]
fn a_5x_route_with_nulls_and_quoted_keys_still_reads() {
    let route: TopicRouteData = parse_java_json(TRACE_ROUTE.as_bytes()).unwrap();
    assert_eq!(route.order_topic_conf, None);
    assert_eq!(route.queue_datas[0].perm, 7);
    assert_eq!(
        route.broker_datas[0].broker_addrs[&MASTER_ID],
        "127.0.0.1:10911"
    );
    // Written back in 4.9.4's form: sorted, no nulls, bare keys.
    assert_eq!(
        json(&route),
        r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":7,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#
    );
}

#[test]
fn java_route_with_unquoted_broker_ids_parses() {
    // fastjson for old clients: integer keys unquoted, fields sorted, no nulls.
    let java = br#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911", 1 : "10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
    assert!(serde_json::from_slice::<TopicRouteData>(java).is_err());
    let route: TopicRouteData = parse_java_json(java).unwrap();
    let addrs = &route.broker_datas[0].broker_addrs;
    assert_eq!(addrs.get(&0).map(String::as_str), Some("10.0.0.1:10911"));
    assert_eq!(addrs.get(&1).map(String::as_str), Some("10.0.0.2:10911"));
    assert_eq!(route.queue_datas[0].perm, 6);
}

#[test]
fn quoting_leaves_strings_and_arrays_alone() {
    assert_eq!(
        quote_integer_keys(br#"{0:"a",-1:"b"}"#).unwrap(),
        br#"{"0":"a","-1":"b"}"#
    );
    // `{0:` inside a string, numbers in arrays, escaped quotes: nothing to do.
    assert_eq!(quote_integer_keys(br#"{"k":"{0:\"x\", 1:"}"#), None);
    assert_eq!(quote_integer_keys(br#"{"k":[1,2, 3]}"#), None);
    assert_eq!(quote_integer_keys(b"{\"a\\\\\":1}"), None);
    // Nested maps with integer keys at several levels.
    let v: BTreeMap<String, BTreeMap<i64, i64>> =
        parse_java_json(br#"{"t":{0:10, 1:11}, "u":{ 2 :12}}"#).unwrap();
    assert_eq!(v["u"][&2], 12);
    // Invalid JSON stays an error.
    assert!(parse_java_json::<TopicRouteData>(b"{0:").is_err());
    assert!(parse_java_json::<TopicRouteData>(b"").is_err());
}

#[test]
fn consumer_list_and_lock_bodies_use_java_names() {
    let list = ConsumerListBody {
        consumer_id_list: vec!["192.0.2.2@7999#1796016339589619484".into()],
    };
    assert_eq!(json(&list), JAVA_CONSUMER_LIST);

    let req: LockBatchRequestBody = parse_java_json(
        br#"{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t","brokerName":"broker-a","queueId":3}]}"#,
    )
    .unwrap();
    assert_eq!(req.mq_set[0].queue_id, 3);
    assert!(!req.only_this_broker);
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: req.mq_set.clone(),
    };
    assert_eq!(json(&resp), JAVA_LOCK_RESPONSE);
    let unlock: UnlockBatchRequestBody = parse_java_json(
        br#"{"consumerGroup":"g","clientId":"c","onlyThisBroker":true,"mqSet":[]}"#,
    )
    .unwrap();
    assert!(unlock.only_this_broker);
}

#[test]
fn register_broker_body_matches_spec_shape() {
    let spec = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"capT1":{"topicName":"capT1","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}},"dataVersion":{"timestamp":1700000000000,"counter":3}},"filterServerList":[]}"#;
    let body: RegisterBrokerBody = parse_java_json(spec).unwrap();
    let wrapper = &body.topic_config_serialize_wrapper;
    let t = &wrapper.topic_config_table["capT1"];
    assert_eq!((t.read_queue_nums, t.perm), (4, 6));
    assert_eq!(t.topic_filter_type, TopicFilterType::SingleTag);
    assert_eq!(wrapper.data_version.counter, 3);
    // Written back in fastjson's order (the same text as JAVA_REGISTER_BODY's topic).
    assert!(json(&body).starts_with(r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"capT1":{"order":false,"perm":6,"#));

    // Missing numbers take RocketMQ's new-topic defaults.
    let t: TopicConfig = parse_java_json(br#"{"topicName":"x"}"#).unwrap();
    assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (16, 16, 6));
}

#[test]
fn cluster_info_and_topic_list() {
    let java = br#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"c1"}},"clusterAddrTable":{"c1":["broker-a"]}}"#;
    let info: ClusterInfo = parse_java_json(java).unwrap();
    assert_eq!(
        info.broker_addr_table["broker-a"].broker_addrs[&0],
        "10.0.0.1:10911"
    );
    assert_eq!(info.cluster_addr_table["c1"], ["broker-a"]);

    let list = TopicList {
        topic_list: vec!["a".into(), "b".into()],
        broker_addr: None,
    };
    assert_eq!(json(&list), JAVA_TOPIC_LIST);
    let kv: KvTable = parse_java_json(br#"{"table":{"k":"v"}}"#).unwrap();
    assert_eq!(kv.table["k"], "v");
}

#[test]
fn offset_moved_event_is_written_as_fastjson_writes_it() {
    // The text OffsetMovedEvent.encode() gives (fastjson 1.2.69: fields alphabetical).
    let e = OffsetMovedEvent {
        consumer_group: "G".into(),
        message_queue: MessageQueue {
            topic: "T".into(),
            broker_name: "broker-a".into(),
            queue_id: 1,
        },
        offset_new: 3,
        offset_request: 100,
    };
    assert_eq!(
        String::from_utf8(fastjson::to_vec(&e).unwrap()).unwrap(),
        r#"{"consumerGroup":"G","messageQueue":{"brokerName":"broker-a","queueId":1,"topic":"T"},"offsetNew":3,"offsetRequest":100}"#
    );
}
