//! `-p` / `-m` output: every key grouped as RocketMQ prints it, important keys, escaping, and
//! that the printed text loads back to the same settings.

use super::*;
use crate::config::keys::{registry, Part};
use std::collections::BTreeSet;

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
