//! The layers' order and provenance: TOML over defaults, environment over file, an explicit
//! `haListenPort`, `NAMESRV_ADDR`, unknown keys with their origin, source errors.

use super::*;

#[test]
fn toml_overrides_defaults() {
    let loaded = toml(
        r#"
            storePathRootDir = "/tmp/amq"
            mappedFileSizeCommitLog = 8192
            flushDiskType = "SYNC_FLUSH"
            brokerRole = "SLAVE"
            brokerId = 2
            brokerIP1 = "10.1.2.3"
            maxMessageSize = 4096
            checkCRCOnRecover = false
            deleteWhen = "04;16"
            namesrvAddr = "a:9876;b:9876"
            haMaxGapNotInSync = 1024
            "#,
    )
    .unwrap();
    let c = &loaded.config;
    assert_eq!(c.store.store_path_root_dir, Path::new("/tmp/amq"));
    assert_eq!(c.store.commitlog_dir(), Path::new("/tmp/amq/commitlog"));
    assert_eq!(c.store.mapped_file_size_commit_log, 8192);
    assert_eq!(c.store.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(c.store.broker_role, BrokerRole::Slave);
    assert_eq!(c.broker.broker_id, 2);
    assert_eq!(c.broker.broker_ip1.as_deref(), Some("10.1.2.3"));
    assert!(!c.store.check_crc_on_recover);
    assert_eq!(c.store.delete_when_hours(), vec![4, 16]);
    assert_eq!(c.broker.namesrv_addrs(), vec!["a:9876", "b:9876"]);
    assert_eq!(c.store.ha_slave_fallbehind_max, 1024, "5.x alias");
    assert_eq!(loaded.origin_of("flushDiskType"), "config/broker.toml");
    assert_eq!(loaded.origin_of("listenPort"), DEFAULT_ORIGIN);
    // Untouched keys keep their defaults.
    assert_eq!(c.broker.listen_port, 10911);
    assert_eq!(c.store.ha_listen_port, 10912);
}

#[test]
fn env_overrides_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.toml");
    std::fs::write(
        &path,
        "flushDiskType = \"ASYNC_FLUSH\"\nmaxMessageSize = 1000\nlistenPort = 20911\n",
    )
    .unwrap();
    let e = env(&[
        ("ACTORMQ_FLUSHDISKTYPE", "SYNC_FLUSH"),
        ("ACTORMQ_maxMessageSize", " 2048 "),
        ("ACTORMQ_MESSAGE_INDEX_ENABLE", "FALSE"),
        ("ACTORMQ_brokerIP1", "::1"),
        ("PATH", "/usr/bin"),
    ]);
    let loaded = load(Some(&path), &e).unwrap();
    let c = &loaded.config;
    assert_eq!(c.store.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(
        c.store.max_message_size, 2048,
        "strings from the environment convert to numbers"
    );
    assert!(!c.store.message_index_enable, "and to booleans");
    assert_eq!(c.broker.broker_ip1.as_deref(), Some("::1"));
    assert_eq!(
        c.broker.listen_port, 20911,
        "the file still applies where env is silent"
    );
    assert_eq!(
        c.store.ha_listen_port, 20912,
        "haListenPort follows listenPort when unset"
    );
    assert_eq!(
        loaded.origin_of("flushDiskType"),
        "environment variable ACTORMQ_FLUSHDISKTYPE"
    );
    assert_eq!(loaded.origin_of("listenPort"), path.display().to_string());
    assert_eq!(
        loaded.origin_of("haListenPort"),
        "derived from listenPort (listenPort + 1)"
    );
    assert!(loaded.warnings().is_empty(), "{:?}", loaded.warnings());
}

#[test]
fn explicit_ha_listen_port_wins() {
    let c = toml("listenPort = 20911\nhaListenPort = 30000")
        .unwrap()
        .config;
    assert_eq!(
        (c.broker.listen_port, c.store.ha_listen_port),
        (20911, 30000)
    );
    let c = toml("listenPort = 0").unwrap().config;
    assert_eq!(
        (c.broker.listen_port, c.store.ha_listen_port),
        (0, 0),
        "0 = ephemeral for both"
    );
    let v = only_violation(toml("listenPort = 65535").unwrap_err());
    assert_eq!(v.key, "listenPort");
    let v = only_violation(toml("listenPort = 7000\nhaListenPort = 7000").unwrap_err());
    assert_eq!(
        v.to_string(),
        "config/broker.toml: haListenPort = 7000: port already used by listenPort"
    );
}

#[test]
fn namesrv_addr_env_alias() {
    let dir = tempfile::tempdir().unwrap();
    let with = dir.path().join("with.toml");
    let without = dir.path().join("without.toml");
    std::fs::write(&with, "namesrvAddr = \"file:9876\"").unwrap();
    std::fs::write(&without, "brokerClusterName = \"C1\"").unwrap();

    let alias = env(&[("NAMESRV_ADDR", "env:9876")]);
    let loaded = load(Some(&without), &alias).unwrap();
    assert_eq!(
        loaded.config.broker.namesrv_addr.as_deref(),
        Some("env:9876")
    );
    assert_eq!(
        loaded.origin_of("namesrvAddr"),
        "environment variable NAMESRV_ADDR"
    );

    // As in RocketMQ, the file beats NAMESRV_ADDR...
    let loaded = load(Some(&with), &alias).unwrap();
    assert_eq!(
        loaded.config.broker.namesrv_addr.as_deref(),
        Some("file:9876")
    );

    // ...and ACTORMQ_NAMESRVADDR beats both.
    let both = env(&[
        ("NAMESRV_ADDR", "env:9876"),
        ("ACTORMQ_NAMESRVADDR", "override:9876"),
    ]);
    let loaded = load(Some(&with), &both).unwrap();
    assert_eq!(
        loaded.config.broker.namesrv_addr.as_deref(),
        Some("override:9876")
    );

    // Empty means unset.
    let loaded = load(None, &env(&[("NAMESRV_ADDR", "")])).unwrap();
    assert_eq!(loaded.config.broker.namesrv_addr, None);

    let v = only_violation(load(None, &env(&[("NAMESRV_ADDR", "localhost")])).unwrap_err());
    assert_eq!(v.origin, "environment variable NAMESRV_ADDR");
    assert_eq!(v.key, "namesrvAddr");
}

#[test]
fn unknown_keys_are_reported_with_origin() {
    let loaded = load_layers(vec![
        Layer::from_toml_str(
            "config/broker.toml",
            "flushDiskTyp = \"SYNC_FLUSH\"\nbrokerip1 = \"1.2.3.4\"\nsendMessageThreadPoolNums = 16\n[store]\nx = 1\n",
        )
        .unwrap(),
        Layer::from_env(&env(&[("ACTORMQ_NO_SUCH_THING", "1"), ("ACTORMQ_useReentrantLockWhenPutMessage", "true")])),
    ])
    .unwrap();
    assert_eq!(
        loaded.unknown_keys(),
        vec![
            "config/broker.toml: brokerip1",
            "config/broker.toml: flushDiskTyp",
            "config/broker.toml: store",
            "environment variable ACTORMQ_NO_SUCH_THING: NO_SUCH_THING",
        ]
    );
    let w = loaded.warnings();
    assert!(
        w.contains(
            &"config/broker.toml: flushDiskTyp: unknown key (ignored); did you mean flushDiskType?"
                .to_owned()
        ),
        "{w:?}"
    );
    assert!(
        w.contains(
            &"config/broker.toml: brokerip1: unknown key (ignored); did you mean brokerIP1?"
                .to_owned()
        ),
        "{w:?}"
    );
    assert!(
        w.iter().any(|l| l.starts_with(
            "config/broker.toml: store: unknown key (ignored): tables are not supported"
        )),
        "{w:?}"
    );
    let unsupported: Vec<_> = loaded
        .unsupported
        .iter()
        .map(|u| (u.origin.as_str(), u.key.as_str()))
        .collect();
    assert_eq!(
        unsupported,
        vec![
            ("config/broker.toml", "sendMessageThreadPoolNums"),
            (
                "environment variable ACTORMQ_useReentrantLockWhenPutMessage",
                "useReentrantLockWhenPutMessage"
            ),
        ]
    );
    // Unknown keys do not change anything.
    assert_eq!(loaded.config, Config::default());

    assert_eq!(
        unknown_keys([
            "flushDiskType",
            "flushDiskTyp",
            "haMaxGapNotInSync",
            "transferMsgByHeap",
            "x"
        ]),
        vec!["flushDiskTyp", "x"]
    );
}

#[test]
fn source_errors_name_the_file() {
    let err = load(Some(Path::new("/nonexistent/broker.toml")), &[]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/broker.toml: cannot read: "),
        "{err}"
    );
    let err = toml("flushDiskType = ").unwrap_err();
    assert!(
        matches!(&err, ConfigError::Source { origin, .. } if origin == "config/broker.toml"),
        "{err}"
    );
}

#[test]
fn strings_layer_like_properties_or_cli() {
    let loaded = load_layers(vec![
        Layer::from_strings(
            "conf/broker.conf",
            [("brokerClusterName", "C"), ("fileReservedTime", "48")],
        ),
        Layer::from_strings("command line", [("fileReservedTime", "24")]),
    ])
    .unwrap();
    assert_eq!(loaded.config.broker.broker_cluster_name, "C");
    assert_eq!(loaded.config.store.file_reserved_time_hours, 24);
    assert_eq!(loaded.origin_of("fileReservedTime"), "command line");
    assert_eq!(loaded.origin_of("brokerClusterName"), "conf/broker.conf");
}
