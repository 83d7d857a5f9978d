//! RocketMQ's defaults and key spellings, and `config/broker.toml`, which documents every key
//! once with its default.

use super::*;
use crate::config::keys::squash;
use crate::config::store::home_dir;
use std::collections::{BTreeMap, BTreeSet};

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
