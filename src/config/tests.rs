//! The configuration's unit tests: RocketMQ's defaults and key names, the documented
//! `config/broker.toml` and sample `.conf` files, layering and provenance, every error message
//! (origin, key, value, rule), `-p`/`-m` output, and property tests of the value conversions.

use super::keys::{registry, squash, Part};
use super::store::home_dir;
use super::*;
use proptest::prelude::*;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn toml(text: &str) -> Result<Loaded, ConfigError> {
    load_layers(vec![Layer::from_toml_str("config/broker.toml", text)?])
}

fn only_violation(err: ConfigError) -> Violation {
    let v = err.violations();
    assert_eq!(v.len(), 1, "expected one violation, got: {err}");
    v[0].clone()
}

fn doc_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/broker.toml")
}

/// `(key, line)` for every `#key = value` line of config/broker.toml.
fn doc_key_lines() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(doc_path()).expect("config/broker.toml");
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix('#')?;
            if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
                return None;
            }
            let (key, value) = rest.split_once('=')?;
            let key = key.trim();
            key.chars()
                .all(|c| c.is_ascii_alphanumeric())
                .then(|| (key.to_owned(), format!("{key} ={value}")))
        })
        .collect()
}

#[test]
fn defaults_match_rocketmq() {
    let c = Config::default();
    let s = &c.store;
    assert_eq!(s.store_path_root_dir, home_dir().join("store"));
    assert_eq!(s.store_path_commit_log, None);
    assert_eq!(s.mapped_file_size_commit_log, 1_073_741_824);
    assert_eq!(s.mapped_file_size_consume_queue, 6_000_000);
    assert_eq!(s.flush_disk_type, FlushDiskType::AsyncFlush);
    assert_eq!(s.broker_role, BrokerRole::AsyncMaster);
    assert_eq!(s.max_message_size, 4_194_304);
    assert_eq!(
        (
            s.flush_interval_commit_log_ms,
            s.commit_interval_commit_log_ms
        ),
        (500, 200)
    );
    assert_eq!(
        (
            s.flush_commit_log_least_pages,
            s.commit_commit_log_least_pages
        ),
        (4, 4)
    );
    assert_eq!(
        (
            s.flush_commit_log_thorough_interval_ms,
            s.commit_commit_log_thorough_interval_ms
        ),
        (10_000, 200)
    );
    assert!(s.flush_commit_log_timed);
    assert_eq!(
        (
            s.flush_interval_consume_queue_ms,
            s.flush_consume_queue_least_pages,
            s.flush_consume_queue_thorough_interval_ms
        ),
        (1000, 2, 60_000)
    );
    assert_eq!(s.sync_flush_timeout_ms, 5000);
    assert!(s.check_crc_on_recover);
    assert_eq!(
        (
            s.transient_store_pool_enable,
            s.transient_store_pool_size,
            s.fast_fail_if_no_buffer_in_store_pool
        ),
        (false, 5, false)
    );
    assert_eq!(
        (
            s.warm_mapped_file_enable,
            s.flush_least_pages_when_warm_mapped_file
        ),
        (false, 4096)
    );
    assert_eq!(s.os_page_cache_busy_timeout_ms, 1000);
    assert_eq!(s.file_reserved_time_hours, 72);
    assert_eq!(s.delete_when, "04");
    assert_eq!(s.delete_when_hours(), vec![4]);
    assert_eq!(s.disk_max_used_space_ratio, 75);
    assert_eq!(
        (
            s.disk_space_warning_level_ratio,
            s.disk_space_clean_forcibly_ratio
        ),
        (90, 85)
    );
    assert_eq!(s.clean_resource_interval_ms, 10_000);
    assert_eq!(
        (
            s.delete_commit_log_files_interval_ms,
            s.delete_consume_queue_files_interval_ms
        ),
        (100, 100)
    );
    assert_eq!(
        (
            s.destroy_mapped_file_interval_forcibly_ms,
            s.redelete_hanged_file_interval_ms
        ),
        (120_000, 120_000)
    );
    assert!(s.clean_file_forcibly_enable);
    assert_eq!(s.delete_file_batch_max, 10);
    assert_eq!(
        (s.message_index_enable, s.message_index_safe),
        (true, false)
    );
    assert_eq!(
        (s.max_hash_slot_num, s.max_index_num),
        (5_000_000, 20_000_000)
    );
    assert_eq!((s.max_msgs_num_batch, s.default_query_max_num), (64, 32));
    assert_eq!(
        (
            s.max_transfer_bytes_on_message_in_memory,
            s.max_transfer_count_on_message_in_memory
        ),
        (262_144, 32)
    );
    assert_eq!(
        (
            s.max_transfer_bytes_on_message_in_disk,
            s.max_transfer_count_on_message_in_disk
        ),
        (65_536, 8)
    );
    assert_eq!(s.access_message_in_memory_max_ratio, 40);
    assert_eq!(s.ha_listen_port, 10912);
    assert_eq!(
        (
            s.ha_send_heartbeat_interval_ms,
            s.ha_housekeeping_interval_ms
        ),
        (5000, 20_000)
    );
    assert_eq!(s.ha_transfer_batch_size, 32_768);
    assert_eq!(s.ha_slave_fallbehind_max, 268_435_456);
    assert_eq!(s.slave_timeout_ms, 3000);
    assert_eq!(s.ha_master_address, None);
    assert_eq!(
        s.message_delay_level,
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    );
    assert_eq!(s.flush_delay_offset_interval_ms, 10_000);
    assert_eq!(
        (
            s.max_topic_length,
            s.auto_message_version_on_topic_len,
            s.enabled_append_prop_crc
        ),
        (127, true, false)
    );
    assert!(!s.offset_check_in_slave);

    let b = &c.broker;
    assert_eq!(b.listen_port, 10911);
    assert_eq!(b.namesrv_addr, None);
    assert_eq!(b.broker_name, local_host_name());
    assert!(!b.broker_name.is_empty());
    assert_eq!(b.broker_cluster_name, "DefaultCluster");
    assert_eq!(b.broker_id, 0);
    assert_eq!(
        (b.broker_ip1.as_deref(), b.broker_ip2.as_deref()),
        (None, None)
    );
    assert_eq!(b.broker_permission, 6);
    assert_eq!(b.default_topic_queue_nums, 8);
    assert!(b.auto_create_topic_enable && b.auto_create_subscription_group);
    assert!(b.cluster_topic_enable && b.broker_topic_enable);
    assert_eq!(
        (b.long_polling_enable, b.short_polling_time_ms),
        (true, 1000)
    );
    assert_eq!(
        (
            b.register_name_server_period_ms,
            b.register_broker_timeout_ms
        ),
        (30_000, 6000)
    );
    assert_eq!((b.force_register, b.compressed_register), (true, false));
    assert_eq!(b.flush_consumer_offset_interval_ms, 5000);
    assert!(!b.slave_read_enable && !b.reject_transaction_message);
    assert_eq!(
        (
            b.transaction_timeout_ms,
            b.transaction_check_max,
            b.transaction_check_interval_ms
        ),
        (6000, 15, 60_000)
    );
    assert_eq!(
        (b.broker_fast_failure_enable, b.wait_time_ms_in_send_queue),
        (true, 200)
    );
    assert_eq!(b.server_channel_max_idle_time_secs, 120);
    assert_eq!(b.metrics_prom_exporter_port, 5557);

    c.validate().expect("defaults are valid");
}

#[test]
fn empty_load_equals_defaults() {
    let loaded = load(None, &[]).unwrap();
    assert_eq!(loaded.config, Config::default());
    assert!(loaded.origins.is_empty());
    assert_eq!(loaded.origin_of("flushDiskType"), DEFAULT_ORIGIN);
    assert!(loaded.warnings().is_empty());
}

#[test]
fn key_names_are_rocketmq_spellings() {
    let expected = [
        // MessageStoreConfig
        "storePathRootDir",
        "storePathCommitLog",
        "mappedFileSizeCommitLog",
        "mappedFileSizeConsumeQueue",
        "flushDiskType",
        "brokerRole",
        "maxMessageSize",
        "flushIntervalCommitLog",
        "commitIntervalCommitLog",
        "flushCommitLogLeastPages",
        "commitCommitLogLeastPages",
        "flushCommitLogThoroughInterval",
        "commitCommitLogThoroughInterval",
        "flushCommitLogTimed",
        "flushIntervalConsumeQueue",
        "flushConsumeQueueLeastPages",
        "flushConsumeQueueThoroughInterval",
        "syncFlushTimeout",
        "checkCRCOnRecover",
        "transientStorePoolEnable",
        "transientStorePoolSize",
        "fastFailIfNoBufferInStorePool",
        "warmMapedFileEnable",
        "flushLeastPagesWhenWarmMapedFile",
        "osPageCacheBusyTimeOutMills",
        "fileReservedTime",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "diskSpaceWarningLevelRatio",
        "diskSpaceCleanForciblyRatio",
        "cleanResourceInterval",
        "deleteCommitLogFilesInterval",
        "deleteConsumeQueueFilesInterval",
        "destroyMapedFileIntervalForcibly",
        "redeleteHangedFileInterval",
        "cleanFileForciblyEnable",
        "deleteFileBatchMax",
        "messageIndexEnable",
        "messageIndexSafe",
        "maxHashSlotNum",
        "maxIndexNum",
        "maxMsgsNumBatch",
        "defaultQueryMaxNum",
        "maxTransferBytesOnMessageInMemory",
        "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInDisk",
        "maxTransferCountOnMessageInDisk",
        "accessMessageInMemoryMaxRatio",
        "haListenPort",
        "haSendHeartbeatInterval",
        "haHousekeepingInterval",
        "haTransferBatchSize",
        "haSlaveFallbehindMax",
        "slaveTimeout",
        "haMasterAddress",
        "messageDelayLevel",
        "flushDelayOffsetInterval",
        "maxTopicLength",
        "autoMessageVersionOnTopicLen",
        "enabledAppendPropCRC",
        "offsetCheckInSlave",
        // BrokerConfig / NettyServerConfig
        "listenPort",
        "namesrvAddr",
        "brokerName",
        "brokerClusterName",
        "brokerId",
        "brokerIP1",
        "brokerIP2",
        "brokerPermission",
        "defaultTopicQueueNums",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "clusterTopicEnable",
        "brokerTopicEnable",
        "longPollingEnable",
        "shortPollingTimeMills",
        "registerNameServerPeriod",
        "registerBrokerTimeoutMills",
        "forceRegister",
        "compressedRegister",
        "flushConsumerOffsetInterval",
        "slaveReadEnable",
        "rejectTransactionMessage",
        "transactionTimeOut",
        "transactionCheckMax",
        "transactionCheckInterval",
        "brokerFastFailureEnable",
        "waitTimeMillsInSendQueue",
        "serverChannelMaxIdleTimeSeconds",
        "metricsPromExporterPort",
        "serverSelectorThreads",
    ];
    let expected: BTreeSet<&str> = expected.into_iter().collect();
    let actual: BTreeSet<&str> = known_keys().collect();
    assert_eq!(actual, expected);
    // Case/underscore-insensitive matching (environment) must be unambiguous, and no key
    // may be both ours and "RocketMQ only".
    let squashed: BTreeSet<String> = actual.iter().map(|k| squash(k)).collect();
    assert_eq!(squashed.len(), actual.len());
    for k in ROCKETMQ_ONLY_KEYS {
        assert!(
            !actual.contains(k),
            "{k} is both a known key and RocketMQ-only"
        );
    }
}

#[test]
fn broker_toml_documents_every_key_once() {
    let lines = doc_key_lines();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, _) in &lines {
        *count.entry(key.as_str()).or_default() += 1;
    }
    for key in known_keys() {
        assert_eq!(
            count.get(key),
            Some(&1),
            "config/broker.toml must document `{key}` exactly once"
        );
    }
    let stray: Vec<_> = count
        .keys()
        .filter(|k| !known_keys().any(|known| known == **k))
        .collect();
    assert!(
        stray.is_empty(),
        "config/broker.toml documents keys that do not exist: {stray:?}"
    );
}

#[test]
fn broker_toml_loads_to_defaults() {
    let loaded = load(Some(&doc_path()), &[]).unwrap();
    assert_eq!(loaded.config, Config::default());
    assert!(loaded.warnings().is_empty());
}

#[test]
fn broker_toml_documented_defaults_are_the_defaults() {
    // Uncomment every documented line and load it: the values must be the defaults, except
    // on lines marked `# example`, which must still be valid.
    let lines = doc_key_lines();
    let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let loaded = load_layers(vec![
        Layer::from_toml_str("uncommented broker.toml", &text).unwrap()
    ])
    .unwrap_or_else(|e| panic!("documented values must be valid: {e}"));
    assert!(loaded.warnings().is_empty());
    let got = loaded.config.to_properties();
    let want = Config::default().to_properties();
    for (key, line) in &lines {
        if line.contains("# example") {
            continue;
        }
        assert_eq!(
            got[key], want[key],
            "config/broker.toml documents a wrong default for `{key}`"
        );
    }
}

#[test]
fn derived_paths() {
    let mut s = StoreConfig {
        store_path_root_dir: PathBuf::from("/data/store"),
        ..Default::default()
    };
    assert_eq!(s.commitlog_dir(), Path::new("/data/store/commitlog"));
    assert_eq!(s.consumequeue_dir(), Path::new("/data/store/consumequeue"));
    assert_eq!(s.index_dir(), Path::new("/data/store/index"));
    assert_eq!(s.config_dir(), Path::new("/data/store/config"));
    assert_eq!(s.checkpoint_path(), Path::new("/data/store/checkpoint"));
    assert_eq!(s.abort_path(), Path::new("/data/store/abort"));
    assert_eq!(s.lock_path(), Path::new("/data/store/lock"));
    s.store_path_commit_log = Some(PathBuf::from("/fast/cl"));
    assert_eq!(s.commitlog_dir(), Path::new("/fast/cl"));
}

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

#[test]
fn delay_levels_default() {
    let s = StoreConfig::default();
    let levels = s.delay_levels_ms().unwrap();
    assert_eq!(
        &*levels,
        &[
            1000, 5000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
            420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
        ]
    );
    assert_eq!(s.max_delay_level(), 18);
    assert!(
        matches!(s.delay_levels_ms().unwrap(), Cow::Borrowed(_)),
        "second call is served from the cache"
    );
}

#[test]
fn delay_level_cache_is_never_stale() {
    let mut s = StoreConfig::default();
    assert_eq!(s.max_delay_level(), 18);
    s.message_delay_level = "1d 2h".to_owned();
    assert_eq!(&*s.delay_levels_ms().unwrap(), &[86_400_000, 7_200_000]);
    let clone = s.clone();
    assert_eq!(&*clone.delay_levels_ms().unwrap(), &[86_400_000, 7_200_000]);
    assert_eq!(
        s,
        StoreConfig {
            message_delay_level: "1d 2h".to_owned(),
            ..Default::default()
        }
    );
}

#[test]
fn parse_delay_levels_rules() {
    assert_eq!(
        parse_delay_levels("1s  2m\t3h 4d 0s").unwrap(),
        vec![1000, 120_000, 10_800_000, 345_600_000, 0]
    );
    for bad in [
        "", "   ", "5", "s", "-1s", "+1s", "1.5s", "1S", "1sec", "1µ", "1s 2w",
    ] {
        assert!(parse_delay_levels(bad).is_err(), "{bad:?} must be rejected");
    }
    assert_eq!(
        parse_delay_levels("1s 99999999999999999999s"),
        Err(DelayLevelError::Overflow {
            level: 2,
            token: "99999999999999999999s".to_owned()
        })
    );
    assert!(matches!(
        parse_delay_levels("999999999999999d"),
        Err(DelayLevelError::Overflow { .. })
    ));
}

#[test]
fn consume_queue_file_size_rounds_up() {
    let c = toml("mappedFileSizeConsumeQueue = 1000001").unwrap().config;
    assert_eq!(c.store.mapped_file_size_consume_queue, 1_000_020);
    let c = toml("mappedFileSizeConsumeQueue = 1").unwrap().config;
    assert_eq!(c.store.mapped_file_size_consume_queue, 20);
    let c = toml("mappedFileSizeConsumeQueue = 6000000").unwrap().config;
    assert_eq!(c.store.mapped_file_size_consume_queue, 6_000_000);
    let v = only_violation(toml("mappedFileSizeConsumeQueue = 0").unwrap_err());
    assert_eq!(v.key, "mappedFileSizeConsumeQueue");

    // Built in code: validate() refuses, normalize() fixes.
    let mut c = Config::default();
    c.store.mapped_file_size_consume_queue = 30;
    let v = only_violation(c.validate().unwrap_err());
    assert_eq!(v.origin, IN_MEMORY_ORIGIN);
    c.normalize();
    assert_eq!(c.store.mapped_file_size_consume_queue, 40);
    c.validate().unwrap();
}

#[test]
fn small_files_for_tests_are_allowed() {
    let c = toml("mappedFileSizeCommitLog = 4096\nmaxMessageSize = 1024\nmappedFileSizeConsumeQueue = 200\nlistenPort = 0\nmetricsPromExporterPort = 0")
        .unwrap()
        .config;
    assert_eq!(c.store.mapped_file_size_commit_log, 4096);
    assert_eq!(c.store.ha_listen_port, 0);
}

#[test]
fn transient_store_pool_on_masters_with_either_flush_type_as_rocketmq_5() {
    let mut s = StoreConfig {
        transient_store_pool_enable: true,
        ..Default::default()
    };
    assert!(s.transient_store_pool_effective());
    s.flush_disk_type = FlushDiskType::SyncFlush;
    assert!(s.transient_store_pool_effective());
    s.broker_role = BrokerRole::SyncMaster;
    assert!(s.transient_store_pool_effective());
    s.broker_role = BrokerRole::Slave;
    assert!(!s.transient_store_pool_effective());
    s.broker_role = BrokerRole::AsyncMaster;
    s.transient_store_pool_enable = false;
    assert!(!s.transient_store_pool_effective());
}

#[test]
fn to_properties_uses_rocketmq_names() {
    let p = Config::default().to_properties();
    assert_eq!(p["flushDiskType"], "ASYNC_FLUSH");
    assert_eq!(p["syncFlushTimeout"], "5000");
    assert_eq!(p["checkCRCOnRecover"], "true");
    assert_eq!(p["namesrvAddr"], "");
    assert_eq!(p.len(), known_keys().count());
}

// ---- Java properties files (broker.conf), CLI overrides, -p / -m ----------------------

fn manifest_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn cli(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    env(pairs)
}

/// Writes `text` to `<tempdir>/<name>`; returns the dir guard and the path.
fn temp_file(name: &str, text: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

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

#[test]
fn print_config_items_all_keys_and_reloads() {
    let loaded = load_with_overrides(
        Some(&manifest_path("config/broker.conf")),
        &[],
        &cli(&[
            ("namesrvAddr", "127.0.0.1:9876;10.0.0.1:9876"),
            ("storePathRootDir", "/data/my store"),
            ("brokerIP1", "10.0.0.5"),
        ]),
    )
    .unwrap();
    let cfg = &loaded.config;
    let out = print_config_items(cfg, false);

    let keys_in = |text: &str| -> Vec<String> {
        properties::parse(text)
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .collect()
    };
    let mut printed = keys_in(&out);
    let broker_first = printed.clone();
    printed.sort();
    let all: Vec<String> = known_keys().map(str::to_owned).collect();
    assert_eq!(printed, all, "-p prints every key exactly once");
    assert!(out.starts_with("# BrokerConfig\n"), "{out}");
    assert!(out.contains("\n\n# MessageStoreConfig\n"), "{out}");
    // Grouped, then sorted within each group.
    let split = broker_first
        .iter()
        .position(|k| registry().kind(k).0 == Part::Store)
        .unwrap();
    let (broker, store) = broker_first.split_at(split);
    assert!(broker.iter().all(|k| registry().kind(k).0 == Part::Broker));
    assert!(store.iter().all(|k| registry().kind(k).0 == Part::Store));
    assert!(broker.is_sorted() && store.is_sorted());

    for line in [
        "brokerName=broker-a",
        "namesrvAddr=127.0.0.1:9876;10.0.0.1:9876",
        "storePathRootDir=/data/my store",
        "fileReservedTime=48",
        "flushDiskType=ASYNC_FLUSH",
        "storePathCommitLog=",
        "messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }

    // The output is a broker.conf that loads back to the same settings.
    let again = load_layers(vec![Layer::from_properties_str("printed", &out).unwrap()]).unwrap();
    assert_eq!(&again.config, cfg);
    assert!(again.warnings().is_empty(), "{:?}", again.warnings());

    // -m: the important keys only.
    let important = print_config_items(cfg, true);
    let mut got = keys_in(&important);
    got.sort();
    let mut want: Vec<String> = IMPORTANT_KEYS.iter().map(|k| (*k).to_owned()).collect();
    want.sort();
    assert_eq!(got, want);
    for key in [
        "namesrvAddr",
        "brokerClusterName",
        "brokerName",
        "brokerId",
        "brokerRole",
        "flushDiskType",
        "listenPort",
        "storePathRootDir",
        "storePathCommitLog",
        "mappedFileSizeCommitLog",
        "deleteWhen",
        "fileReservedTime",
        "brokerIP1",
        "autoCreateTopicEnable",
    ] {
        assert!(got.iter().any(|k| k == key), "-m must print {key}");
    }
    for key in [
        "maxHashSlotNum",
        "haHousekeepingInterval",
        "compressedRegister",
    ] {
        assert!(!got.iter().any(|k| k == key), "-m must not print {key}");
    }
    assert!(important
        .lines()
        .all(|l| l.starts_with('#') || l.is_empty() || out.lines().any(|full| full == l)));
    assert!(important.len() < out.len());
}

#[test]
fn important_keys_are_known_and_unique() {
    let set: BTreeSet<&str> = IMPORTANT_KEYS.iter().copied().collect();
    assert_eq!(set.len(), IMPORTANT_KEYS.len());
    for key in IMPORTANT_KEYS {
        assert!(known_keys().any(|k| k == *key), "{key} is not a key");
    }
}

#[test]
fn printed_values_are_escaped() {
    let mut cfg = Config::default();
    cfg.broker.broker_name = " lead\\tab\tcafé\n".to_owned();
    let out = print_config_items(&cfg, true);
    assert!(out.is_ascii());
    assert!(
        out.contains("brokerName=\\ lead\\\\tab\\tcaf\\u00E9\\n\n"),
        "{out}"
    );
    let parsed = properties::parse(&out).unwrap();
    let name = parsed.iter().find(|e| e.key == "brokerName").unwrap();
    assert_eq!(name.value, cfg.broker.broker_name);
}

proptest! {
    #[test]
    fn delay_levels_roundtrip(levels in proptest::collection::vec((0u64..1_000_000, 0usize..4), 1..40)) {
        const UNITS: [(char, u64); 4] = [('s', 1000), ('m', 60_000), ('h', 3_600_000), ('d', 86_400_000)];
        let text = levels.iter().map(|(n, u)| format!("{n}{}", UNITS[*u].0)).collect::<Vec<_>>().join(" ");
        let want: Vec<u64> = levels.iter().map(|(n, u)| n * UNITS[*u].1).collect();
        prop_assert_eq!(parse_delay_levels(&text).unwrap(), want);
    }

    #[test]
    fn env_values_convert_like_file_values(n in 1u32..=4096) {
        let from_env = load(None, &env(&[("ACTORMQ_MAXMESSAGESIZE", &n.to_string())])).unwrap();
        let from_file = toml(&format!("maxMessageSize = {n}")).unwrap();
        prop_assert_eq!(from_env.config, from_file.config);
    }
}
