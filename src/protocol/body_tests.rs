//! Tests of `body.rs`: the traced bodies, tolerance of other clients' JSON, exact route output
//! and fastjson's unquoted keys.

use super::*;

const TRACE_PRODUCER_HEARTBEAT: &str = r#"{"clientID":"192.0.2.2@7979#1796016336499484534","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"harness_pg_1"}],"consumerDataSet":[],"heartbeatFingerprint":0,"withoutSub":false}"#;

const TRACE_CONSUMER_HEARTBEAT: &str = r#"{"clientID":"192.0.2.2@7999#1796016339589619484","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"consumerDataSet":[{"groupName":"capG1","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"capT1","subString":"*","tagsSet":[],"codeSet":[],"subVersion":0,"expressionType":"TAG"},{"classFilterMode":false,"topic":"%RETRY%capG1","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1796016340600,"expressionType":"TAG"}],"unitMode":false}],"heartbeatFingerprint":0,"withoutSub":false}"#;

const TRACE_ROUTE: &str = r#"{"orderTopicConf":null,"queueDatas":[{"brokerName":"broker-a","readQueueNums":8,"writeQueueNums":8,"perm":7,"topicSysFlag":0}],"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"},"zoneName":null,"enableActingMaster":false}],"filterServerTable":{},"topicQueueMappingInfo":null}"#;

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
fn topic_route_data_serialises_like_the_trace() {
    let route = TopicRouteData {
        order_topic_conf: None,
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: perm::READ | perm::WRITE | perm::INHERIT,
            topic_sys_flag: 0,
        }],
        broker_datas: vec![BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_addrs: BTreeMap::from([(MASTER_ID, "127.0.0.1:10911".to_owned())]),
            zone_name: None,
            enable_acting_master: false,
        }],
        filter_server_table: BTreeMap::new(),
        topic_queue_mapping_info: None,
    };
    let json = to_json_bytes(&route).unwrap();
    assert_eq!(std::str::from_utf8(&json).unwrap(), TRACE_ROUTE);
    let back: TopicRouteData = parse_java_json(&json).unwrap();
    assert_eq!(back, route);
    let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(
        value["brokerDatas"][0]["brokerAddrs"]["0"],
        "127.0.0.1:10911"
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
    assert_eq!(
        &to_json_bytes(&list).unwrap()[..],
        br#"{"consumerIdList":["192.0.2.2@7999#1796016339589619484"]}"#
    );

    let req: LockBatchRequestBody = parse_java_json(
        br#"{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t","brokerName":"broker-a","queueId":3}]}"#,
    )
    .unwrap();
    assert_eq!(req.mq_set[0].queue_id, 3);
    assert!(!req.only_this_broker);
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: req.mq_set.clone(),
    };
    assert_eq!(
        &to_json_bytes(&resp).unwrap()[..],
        br#"{"lockOKMQSet":[{"topic":"t","brokerName":"broker-a","queueId":3}]}"#
    );
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
    assert_eq!(&to_json_bytes(&body).unwrap()[..], &spec[..]);

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
    assert_eq!(
        &to_json_bytes(&list).unwrap()[..],
        br#"{"topicList":["a","b"]}"#
    );
    let kv: KvTable = parse_java_json(br#"{"table":{"k":"v"}}"#).unwrap();
    assert_eq!(kv.table["k"], "v");
}
