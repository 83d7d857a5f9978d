//! Every violation names origin, key, value and rule: wrong types, ranges, enum spellings,
//! delay levels, role and id, all violations at once.

use super::*;

#[test]
fn error_wrong_type_names_origin_key_value_rule() {
    let err = toml("maxMessageSize = \"big\"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: maxMessageSize = \"big\": expected an integer"
    );

    let err = load(None, &env(&[("ACTORMQ_MAXMESSAGESIZE", "4MB")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable ACTORMQ_MAXMESSAGESIZE: maxMessageSize = \"4MB\": expected an integer"
    );

    let err = load(None, &env(&[("ACTORMQ_checkCRCOnRecover", "maybe")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable ACTORMQ_checkCRCOnRecover: checkCRCOnRecover = \"maybe\": expected true or false"
    );

    let err = toml("maxMessageSize = 4.5").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: maxMessageSize = 4.5: expected an integer"
    );

    let err = toml("brokerName = [\"a\"]").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: brokerName = [\"a\"]: expected a string"
    );
}

#[test]
fn error_out_of_range() {
    let err = toml("diskMaxUsedSpaceRatio = 99").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: diskMaxUsedSpaceRatio = 99: expected 10..=95 (percent)"
    );

    let err = toml("listenPort = 70000").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: listenPort = 70000: expected an integer in 0..=65535"
    );

    let err = toml("fileReservedTime = -1").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: fileReservedTime = -1: expected a non-negative integer"
    );

    let v =
        only_violation(toml("mappedFileSizeCommitLog = 5000\nmaxMessageSize = 1000").unwrap_err());
    assert_eq!(
        (v.key.as_str(), v.value.as_str()),
        ("mappedFileSizeCommitLog", "5000")
    );
    assert!(v.rule.starts_with("expected a multiple of 4096"), "{v}");

    let v =
        only_violation(toml("maxMessageSize = 8193\nmappedFileSizeCommitLog = 8192").unwrap_err());
    assert_eq!(v.to_string(), "config/broker.toml: maxMessageSize = 8193: expected 1..=mappedFileSizeCommitLog (8192) bytes");

    // Cross-key rules name the other key: here the default maxMessageSize no longer fits.
    let v = only_violation(toml("mappedFileSizeCommitLog = 8192").unwrap_err());
    assert_eq!(v.to_string(), "built-in default: maxMessageSize = 4194304: expected 1..=mappedFileSizeCommitLog (8192) bytes");

    let v = only_violation(toml("flushIntervalCommitLog = 0").unwrap_err());
    assert_eq!(
        v.to_string(),
        "config/broker.toml: flushIntervalCommitLog = 0: expected > 0 (ms)"
    );

    let v = only_violation(toml("deleteWhen = \"4;25\"").unwrap_err());
    assert_eq!(v.key, "deleteWhen");

    let v = only_violation(toml("maxHashSlotNum = 0").unwrap_err());
    assert_eq!(v.key, "maxHashSlotNum");
    let v = only_violation(toml("maxIndexNum = 2000000000").unwrap_err());
    assert!(v.rule.contains("index file size"), "{v}");

    let v = only_violation(toml("brokerIP1 = \"my-host\"").unwrap_err());
    assert_eq!(v.key, "brokerIP1");
}

#[test]
fn error_bad_enum() {
    let err = toml("flushDiskType = \"SOMETIMES\"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: flushDiskType = \"SOMETIMES\": expected ASYNC_FLUSH or SYNC_FLUSH"
    );
    let err = load(None, &env(&[("ACTORMQ_BROKER_ROLE", "LEADER")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable ACTORMQ_BROKER_ROLE: brokerRole = \"LEADER\": expected ASYNC_MASTER, SYNC_MASTER or SLAVE"
    );
    // RocketMQ's spelling in any case is accepted.
    assert_eq!(
        toml("flushDiskType = \"sync_flush\"")
            .unwrap()
            .config
            .store
            .flush_disk_type,
        FlushDiskType::SyncFlush
    );
}

#[test]
fn error_bad_delay_levels() {
    let err = toml("messageDelayLevel = \"1s 5x 10s\"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: messageDelayLevel = \"1s 5x 10s\": level 2 \"5x\": expected a whole number \
             followed by one unit of s, m, h, d (e.g. \"30s\", \"2h\")"
    );
    let v = only_violation(toml("messageDelayLevel = \"  \"").unwrap_err());
    assert_eq!(
        v.rule,
        "expected at least one level, e.g. \"1s 5s 10s 30s 1m\""
    );
}

#[test]
fn broker_id_must_match_role() {
    let err = toml("brokerRole = \"SLAVE\"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "built-in default: brokerId = 0: expected > 0 when brokerRole = SLAVE (0 is the master's id)"
    );
    let err = toml("brokerId = 1").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/broker.toml: brokerId = 1: expected 0 when brokerRole = ASYNC_MASTER (slaves use ids > 0)"
    );
    toml("brokerRole = \"SYNC_MASTER\"\nbrokerId = 0").unwrap();
}

#[test]
fn all_violations_are_reported_together() {
    let err = load_layers(vec![
        Layer::from_toml_str("a.toml", "maxMessageSize = \"x\"\nflushDiskType = \"NO\"").unwrap(),
        Layer::from_strings("command line", [("listenPort", "abc")]),
    ])
    .unwrap_err();
    let keys: Vec<_> = err
        .violations()
        .iter()
        .map(|v| (v.origin.as_str(), v.key.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("a.toml", "flushDiskType"),
            ("a.toml", "maxMessageSize"),
            ("command line", "listenPort")
        ]
    );
    assert_eq!(err.to_string().lines().count(), 3);

    // A bad value is an error even when a later layer overrides it.
    let err = load_layers(vec![
        Layer::from_toml_str("a.toml", "maxMessageSize = \"x\"").unwrap(),
        Layer::from_strings("command line", [("maxMessageSize", "100")]),
    ])
    .unwrap_err();
    assert_eq!(only_violation(err).origin, "a.toml");

    // Validation errors are collected too.
    let err = toml("diskMaxUsedSpaceRatio = 5\ntransactionCheckMax = 0").unwrap_err();
    assert_eq!(err.violations().len(), 2);
}
