//! RocketMQ `broker.conf` files: the samples under `conf/`, unknown keys, layering with the
//! environment and the command line, errors naming file and line, duplicates, quotes, ISO-8859-1,
//! and format detection.

use super::*;

#[test]
fn sample_broker_conf_loads_what_it_states() {
    let path = manifest_path("config/broker.conf");
    let text = std::fs::read_to_string(&path).unwrap();
    // The sample keeps exercising the syntax it documents.
    assert!(text.lines().any(|l| l.starts_with('!')), "a ! comment");
    assert!(
        text.lines().any(|l| l.starts_with("listenPort:")),
        "a : separator"
    );
    assert!(text.contains("broker\\u002Da"), "a \\u escape");
    assert!(text.lines().any(|l| l.ends_with(" \\")), "a continuation");

    let loaded = load(Some(&path), &[]).unwrap();
    let c = &loaded.config;
    assert_eq!(c.broker.broker_cluster_name, "DefaultCluster");
    assert_eq!(c.broker.broker_name, "broker-a");
    assert_eq!(c.broker.broker_id, 0);
    assert_eq!(c.broker.listen_port, 10911);
    assert_eq!(c.store.ha_listen_port, 10912);
    assert_eq!(c.store.broker_role, BrokerRole::AsyncMaster);
    assert_eq!(c.store.flush_disk_type, FlushDiskType::AsyncFlush);
    assert_eq!(c.store.delete_when, "04");
    assert_eq!(c.store.file_reserved_time_hours, 48);
    assert!(c.broker.auto_create_topic_enable && c.broker.auto_create_subscription_group);
    assert_eq!(c.store.message_delay_level, DEFAULT_MESSAGE_DELAY_LEVEL);
    assert_eq!(c.broker.namesrv_addr, None, "commented out");

    let origin = path.display().to_string();
    let set = [
        "brokerClusterName",
        "brokerName",
        "brokerId",
        "listenPort",
        "brokerRole",
        "flushDiskType",
        "deleteWhen",
        "fileReservedTime",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "messageDelayLevel",
    ];
    for key in set {
        assert_eq!(loaded.origin_of(key), origin, "{key}");
    }
    // Nothing else changed.
    let (got, want) = (c.to_properties(), Config::default().to_properties());
    for key in known_keys() {
        if !set.contains(&key) && key != "haListenPort" {
            assert_eq!(got[key], want[key], "{key} must keep its default");
        }
    }

    assert_eq!(
        loaded.unknown_keys(),
        vec![format!("{origin}: exampleUnknownKey")]
    );
    assert_eq!(
        loaded.warnings(),
        vec![format!(
            "{origin}: exampleUnknownKey: unknown key (ignored)"
        )]
    );
}

#[test]
fn conf_unknown_keys_warn_with_file_and_hint() {
    let (_dir, path) = temp_file(
        "broker.conf",
        b"flushDiskTyp=SYNC_FLUSH\nbrokerip1=1.2.3.4\nsendMessageThreadPoolNums=16\n",
    );
    let loaded = load(Some(&path), &[]).unwrap();
    let origin = path.display().to_string();
    assert_eq!(
        loaded.warnings(),
        vec![
            format!("{origin}: brokerip1: unknown key (ignored); did you mean brokerIP1?"),
            format!(
                "{origin}: flushDiskTyp: unknown key (ignored); did you mean flushDiskType?"
            ),
            format!(
                "{origin}: sendMessageThreadPoolNums: RocketMQ setting that ActorMQ does not use (ignored)"
            ),
        ]
    );
    assert_eq!(loaded.config, Config::default());
}

#[test]
fn conf_layers_env_over_file_cli_over_both() {
    let (_dir, path) = temp_file(
        "broker.conf",
        b"namesrvAddr = file:9876\nfileReservedTime = 48\nflushDiskType = ASYNC_FLUSH\n\
              listenPort = 20911\nbrokerClusterName = FromFile\n",
    );
    let origin = path.display().to_string();
    let e = env(&[
        ("NAMESRV_ADDR", "env:9876"),
        ("ACTORMQ_FLUSHDISKTYPE", "SYNC_FLUSH"),
        ("ACTORMQ_fileReservedTime", "24"),
    ]);

    // Environment over file; the file's namesrvAddr over NAMESRV_ADDR.
    let loaded = load(Some(&path), &e).unwrap();
    let c = &loaded.config;
    assert_eq!(c.broker.namesrv_addr.as_deref(), Some("file:9876"));
    assert_eq!(loaded.origin_of("namesrvAddr"), origin);
    assert_eq!(c.store.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(c.store.file_reserved_time_hours, 24);
    assert_eq!(
        loaded.origin_of("fileReservedTime"),
        "environment variable ACTORMQ_fileReservedTime"
    );
    assert_eq!(c.broker.listen_port, 20911);
    assert_eq!(c.store.ha_listen_port, 20912);

    // Command line (-n and key=value) over environment and file.
    let overrides = cli(&[
        ("namesrvAddr", "cli:9876"),
        ("fileReservedTime", "12"),
        ("brokerClusterName", " FromCli "),
    ]);
    let loaded = load_with_overrides(Some(&path), &e, &overrides).unwrap();
    let c = &loaded.config;
    assert_eq!(c.broker.namesrv_addr.as_deref(), Some("cli:9876"));
    assert_eq!(c.store.file_reserved_time_hours, 12);
    assert_eq!(c.broker.broker_cluster_name, "FromCli");
    for key in ["namesrvAddr", "fileReservedTime", "brokerClusterName"] {
        assert_eq!(loaded.origin_of(key), CLI_ORIGIN, "{key}");
    }
    assert_eq!(
        c.store.flush_disk_type,
        FlushDiskType::SyncFlush,
        "env still applies"
    );
    assert_eq!(c.broker.listen_port, 20911, "file still applies");

    // Without a file: -n over NAMESRV_ADDR; ACTORMQ_NAMESRVADDR between them.
    let ns = env(&[("NAMESRV_ADDR", "env:9876")]);
    let n = cli(&[("namesrvAddr", "cli:9876")]);
    let got = |env: &[(String, String)], cli: &[(String, String)]| {
        load_with_overrides(None, env, cli)
            .unwrap()
            .config
            .broker
            .namesrv_addr
    };
    assert_eq!(got(&ns, &[]).as_deref(), Some("env:9876"));
    assert_eq!(got(&ns, &n).as_deref(), Some("cli:9876"));
    let both = env(&[
        ("NAMESRV_ADDR", "env:9876"),
        ("ACTORMQ_NAMESRVADDR", "actormq:9876"),
    ]);
    assert_eq!(got(&both, &[]).as_deref(), Some("actormq:9876"));
    assert_eq!(got(&both, &n).as_deref(), Some("cli:9876"));

    // A later pair for the same key wins.
    let c = load_with_overrides(
        None,
        &[],
        &cli(&[("listenPort", "1000"), ("listenPort", "2000")]),
    )
    .unwrap()
    .config;
    assert_eq!(c.broker.listen_port, 2000);
}

#[test]
fn cli_overrides_are_checked_like_files() {
    let err = load_with_overrides(None, &[], &cli(&[("listenPort", "abc")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "command line: listenPort = \"abc\": expected an integer"
    );
    let loaded = load_with_overrides(None, &[], &cli(&[("listenport", "1")])).unwrap();
    assert_eq!(
        loaded.warnings(),
        vec!["command line: listenport: unknown key (ignored); did you mean listenPort?"]
    );

    assert_eq!(
        parse_override("flushDiskType=SYNC_FLUSH").unwrap(),
        ("flushDiskType".to_owned(), "SYNC_FLUSH".to_owned())
    );
    assert_eq!(
        parse_override(" namesrvAddr = a:1;b:2=x ").unwrap(),
        ("namesrvAddr".to_owned(), "a:1;b:2=x".to_owned())
    );
    assert_eq!(
        parse_override("brokerIP1=").unwrap(),
        ("brokerIP1".to_owned(), String::new())
    );
    for bad in ["flushDiskType", "=SYNC_FLUSH", " = x", ""] {
        let err = parse_override(bad).unwrap_err();
        assert!(
            err.to_string().starts_with("command line: ")
                && err
                    .to_string()
                    .ends_with(": expected key=value, e.g. flushDiskType=SYNC_FLUSH"),
            "{err}"
        );
    }
}

#[test]
fn master_slave_examples_load_and_validate() {
    let master_conf = manifest_path("config/2m-2s-async/broker-a.conf");
    let slave_conf = manifest_path("config/2m-2s-async/broker-a-s.conf");
    let master = load(Some(&master_conf), &[]).unwrap();
    let slave = load(Some(&slave_conf), &[]).unwrap();
    for (loaded, id, role) in [
        (&master, 0, BrokerRole::AsyncMaster),
        (&slave, 1, BrokerRole::Slave),
    ] {
        let c = &loaded.config;
        assert!(loaded.warnings().is_empty(), "{:?}", loaded.warnings());
        assert_eq!(c.broker.broker_cluster_name, "DefaultCluster");
        assert_eq!(c.broker.broker_name, "broker-a");
        assert_eq!(c.broker.broker_id, id);
        assert_eq!(c.store.broker_role, role);
        assert_eq!(c.store.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(c.store.delete_when, "04");
        assert_eq!(c.store.file_reserved_time_hours, 48);
        c.validate().unwrap();
    }
    assert!(slave.config.broker.broker_id > 0);
    assert!(slave.config.store.broker_role.is_slave());
    assert_eq!(
        slave.origin_of("brokerRole"),
        slave_conf.display().to_string()
    );

    // The TOML files say the same.
    let master_toml = load(Some(&manifest_path("config/master.toml")), &[]).unwrap();
    let slave_toml = load(Some(&manifest_path("config/slave.toml")), &[]).unwrap();
    assert_eq!(master_toml.config, master.config);
    assert_eq!(slave_toml.config, slave.config);
    assert!(master_toml.warnings().is_empty() && slave_toml.warnings().is_empty());
    assert_eq!(
        master_toml.origins.keys().collect::<Vec<_>>(),
        master.origins.keys().collect::<Vec<_>>()
    );

    // Uncommenting the one-host lines keeps both valid and their ports apart.
    let uncomment = |p: &Path| -> String {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| {
                l.strip_prefix('#')
                    .filter(|r| r.starts_with(|c: char| c.is_ascii_lowercase()))
                    .unwrap_or(l)
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let m = load_layers(vec![Layer::from_properties_str(
        "m",
        &uncomment(&master_conf),
    )
    .unwrap()])
    .unwrap();
    let s = load_layers(vec![Layer::from_properties_str(
        "s",
        &uncomment(&slave_conf),
    )
    .unwrap()])
    .unwrap();
    assert!(m.warnings().is_empty() && s.warnings().is_empty());
    assert_ne!(
        m.config.store.store_path_root_dir,
        s.config.store.store_path_root_dir
    );
    let m_ports = [m.config.broker.listen_port, m.config.store.ha_listen_port];
    let s_ports = [s.config.broker.listen_port, s.config.store.ha_listen_port];
    assert!(m_ports.iter().all(|p| !s_ports.contains(p)));
    assert_eq!(
        s.config.store.ha_master_address.as_deref(),
        Some(format!("127.0.0.1:{}", m.config.store.ha_listen_port).as_str())
    );
}

#[test]
fn invalid_conf_values_name_file_key_value_rule() {
    let cases: &[(&str, &str)] = &[
        ("listenPort=abc", "listenPort = \"abc\": expected an integer"),
        ("listenPort=", "listenPort = \"\": expected an integer"),
        (
            "listenPort=70000",
            "listenPort = \"70000\": expected an integer in 0..=65535",
        ),
        (
            "fileReservedTime=-1",
            "fileReservedTime = \"-1\": expected a non-negative integer",
        ),
        (
            "maxMessageSize : 4MB",
            "maxMessageSize = \"4MB\": expected an integer",
        ),
        (
            "checkCRCOnRecover yes",
            "checkCRCOnRecover = \"yes\": expected true or false",
        ),
        (
            "flushDiskType=SOMETIMES",
            "flushDiskType = \"SOMETIMES\": expected ASYNC_FLUSH or SYNC_FLUSH",
        ),
        (
            "brokerRole=LEADER",
            "brokerRole = \"LEADER\": expected ASYNC_MASTER, SYNC_MASTER or SLAVE",
        ),
        (
            "flushDiskType=\"SYNC_FLUSH\"",
            "flushDiskType = \"\\\"SYNC_FLUSH\\\"\": expected ASYNC_FLUSH or SYNC_FLUSH",
        ),
        (
            "diskMaxUsedSpaceRatio=99",
            "diskMaxUsedSpaceRatio = 99: expected 10..=95 (percent)",
        ),
        (
            "flushIntervalCommitLog=0",
            "flushIntervalCommitLog = 0: expected > 0 (ms)",
        ),
        (
            "transactionCheckMax=0",
            "transactionCheckMax = 0: expected > 0",
        ),
        (
            "mappedFileSizeCommitLog=5000\nmaxMessageSize=1000",
            "mappedFileSizeCommitLog = 5000: expected a multiple of 4096 in 4096..=2147479552 (bytes)",
        ),
        (
            "deleteWhen=04;25",
            "deleteWhen = \"04;25\": expected hours of day 0..=23 separated by ';', e.g. \"04\" or \"04;16\"",
        ),
        (
            "messageDelayLevel=1s \\\n 5x",
            "messageDelayLevel = \"1s 5x\": level 2 \"5x\": expected a whole number followed by one \
                 unit of s, m, h, d (e.g. \"30s\", \"2h\")",
        ),
        (
            "brokerName=",
            "brokerName = \"\": expected a non-empty name",
        ),
        (
            "brokerId=1",
            "brokerId = 1: expected 0 when brokerRole = ASYNC_MASTER (slaves use ids > 0)",
        ),
        (
            "brokerRole=SLAVE\nbrokerId=0",
            "brokerId = 0: expected > 0 when brokerRole = SLAVE (0 is the master's id)",
        ),
        (
            "brokerIP1=my-host",
            "brokerIP1 = \"my-host\": expected an IPv4 or IPv6 address (it is encoded into message ids)",
        ),
        (
            "namesrvAddr=localhost",
            "namesrvAddr = \"localhost\": expected host:port entries separated by ';', e.g. \
                 \"127.0.0.1:9876;192.168.0.1:9876\" (bad entry \"localhost\")",
        ),
        (
            "brokerRole=SLAVE\nbrokerId=1\nhaMasterAddress=master",
            "haMasterAddress = \"master\": expected host:port, e.g. \"192.168.0.1:10912\"",
        ),
        (
            "haListenPort=10911",
            "haListenPort = 10911: port already used by listenPort",
        ),
        (
            "brokerPermission=8",
            "brokerPermission = 8: expected 0..=7 (PermName bits READ=4, WRITE=2, INHERIT=1)",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.conf");
    let origin = path.display().to_string();
    for (text, want) in cases {
        std::fs::write(&path, format!("# bad value below\n{text}\n")).unwrap();
        let err = load(Some(&path), &[]).unwrap_err();
        assert_eq!(err.to_string(), format!("{origin}: {want}"), "for {text:?}");
        let v = only_violation(err);
        assert_eq!(v.origin, origin);
    }

    // Every bad value is reported, one line each, even when the environment overrides it.
    std::fs::write(&path, "listenPort=x\nflushDiskType=NO\nbrokerIP1=h\n").unwrap();
    let err = load(Some(&path), &env(&[("ACTORMQ_LISTENPORT", "1")])).unwrap_err();
    assert_eq!(err.violations().len(), 2, "{err}");
    let err = load(Some(&path), &[]).unwrap_err();
    assert_eq!(err.to_string().lines().count(), 2, "{err}");
    std::fs::write(&path, "flushDiskType=ASYNC_FLUSH\nbrokerIP1=h\n").unwrap();
    let v = only_violation(load(Some(&path), &[]).unwrap_err());
    assert_eq!(
        (v.origin.as_str(), v.key.as_str()),
        (origin.as_str(), "brokerIP1")
    );
}

#[test]
fn conf_syntax_errors_name_file_and_line() {
    let (_dir, path) = temp_file(
        "broker.conf",
        b"# comment\nbrokerName = a\nbrokerClusterName = \\\n   C\\u00G1\n",
    );
    let err = load(Some(&path), &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:4: malformed \\uXXXX escape \"\\u00G1\": expected \\u followed by four hex digits",
            path.display()
        )
    );
    assert!(matches!(err, ConfigError::Source { .. }));

    let err = load(Some(Path::new("/nonexistent/broker.conf")), &[]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/broker.conf: cannot read: "),
        "{err}"
    );
}

#[test]
fn conf_duplicates_quotes_and_blanks() {
    let (_dir, path) = temp_file(
        "broker.conf",
        b"brokerName=a\nbrokerName=b\t \nbrokerClusterName=\"C\"\n  listenPort   20911   \n",
    );
    let origin = path.display().to_string();
    let loaded = load(Some(&path), &[]).unwrap();
    let c = &loaded.config;
    assert_eq!(c.broker.broker_name, "b", "the last one wins, trimmed");
    assert_eq!(
        c.broker.broker_cluster_name, "\"C\"",
        "quotes are data, as in Java"
    );
    assert_eq!(c.broker.listen_port, 20911);
    assert_eq!(
        loaded.warnings(),
        vec![
            format!(
                "{origin}: brokerName: set on line 1 and again on line 2; the last one wins (as in RocketMQ)"
            ),
            format!(
                "{origin}: brokerClusterName: value \"C\" on line 3 is in quotes; in a .properties \
                     file the quotes are part of the value (write brokerClusterName=C)"
            ),
        ]
    );
}

#[test]
fn conf_in_latin1_reads_as_java_does() {
    let (_dir, path) = temp_file("broker.properties", b"brokerName=caf\xe9\n");
    let c = load(Some(&path), &[]).unwrap().config;
    assert_eq!(c.broker.broker_name, "caf\u{e9}");
    let (_dir, path) = temp_file("broker.conf", "\u{feff}brokerName=café\n".as_bytes());
    let loaded = load(Some(&path), &[]).unwrap();
    assert_eq!(loaded.config.broker.broker_name, "café");
    assert!(loaded.warnings().is_empty());
}

#[test]
fn file_format_by_extension_then_content() {
    use ConfigFileFormat::*;
    for (name, want) in [
        ("broker.conf", Some(Properties)),
        ("BROKER.CONF", Some(Properties)),
        ("a/b.properties", Some(Properties)),
        ("broker.toml", Some(Toml)),
        ("broker.Toml", Some(Toml)),
        ("broker", None),
        ("broker.cfg", None),
    ] {
        assert_eq!(
            ConfigFileFormat::from_extension(Path::new(name)),
            want,
            "{name}"
        );
    }
    let other = Path::new("broker.cfg");
    assert_eq!(
        ConfigFileFormat::detect(Path::new("x.conf"), "a = \"b\""),
        Properties
    );
    assert_eq!(ConfigFileFormat::detect(Path::new("x.toml"), "a = b"), Toml);
    for (text, want) in [
        ("brokerName = broker-a\nlistenPort = 10911", Properties),
        ("brokerName: a", Properties),
        ("! comment\nlistenPort = 1", Properties),
        ("brokerName = \"broker-a\"\nlistenPort = 10911", Toml),
        ("listenPort = 10911\nautoCreateTopicEnable = true", Toml),
        ("[store]\nx = 1", Toml),
        ("brokerName = \"unterminated", Toml),
        ("", Toml),
    ] {
        assert_eq!(ConfigFileFormat::detect(other, text), want, "{text:?}");
    }

    // A file without a known extension loads in the detected format.
    let (_d1, props) = temp_file(
        "broker.cfg",
        b"brokerName = from-props\nlistenPort : 1234\n",
    );
    let (_d2, toml) = temp_file("broker", b"brokerName = \"from-toml\"\nlistenPort = 1234\n");
    let a = load(Some(&props), &[]).unwrap().config;
    let b = load(Some(&toml), &[]).unwrap().config;
    assert_eq!(
        (a.broker.broker_name.as_str(), a.broker.listen_port),
        ("from-props", 1234)
    );
    assert_eq!(
        (b.broker.broker_name.as_str(), b.broker.listen_port),
        ("from-toml", 1234)
    );
    // TOML syntax errors stay TOML errors.
    let (_d3, bad) = temp_file("broker", b"brokerName = \"x\nlistenPort = 1\n");
    assert!(matches!(
        load(Some(&bad), &[]),
        Err(ConfigError::Source { .. })
    ));
}
