//! Derived values: `messageDelayLevel` and its memo, the ConsumeQueue size rounding, the
//! TransientStorePool rule, `to_properties`; property tests of the value conversions.

use super::*;
use proptest::prelude::*;
use std::borrow::Cow;

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
