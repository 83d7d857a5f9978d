//! The name server's KV config table, as RocketMQ 4.9.4's `KVConfigManager` keeps it
//! (namesrv/src/main/java/org/apache/rocketmq/namesrv/kvconfig/KVConfigManager.java): namespace →
//! key → value, served by PUT_KV_CONFIG (100), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102) and
//! GET_KVLIST_BY_NAMESPACE (219). The namespace `ORDER_TOPIC_CONFIG` (`NamesrvUtil`) holds each
//! ordered topic's `orderTopicConf` (`broker-a:4;broker-b:4`): routes carry it when
//! `orderMessageEnable` is on, and REGISTER_BROKER answers with that namespace's table.
//!
//! Owned by the name server's [`crate::namesrv::RouteRegistry`] actor, beside the routes; this
//! module is the table and its file, nothing else.
//!
//! The file (`kvConfigPath`, default `${HOME}/namesrv/kvConfig.json`) is
//! `KVConfigSerializeWrapper`'s JSON, `{"configTable":{"<ns>":{"<key>":"<value>"}}}`, compact as
//! fastjson writes it; namespaces and keys come out sorted (Java: hash order; both read either).
//! Invariants:
//! * The file is rewritten after every change (RocketMQ: `persist()` after each put and delete),
//!   through [`crate::fsutil::write_with_backup`]: the previous version stays as `.bak`, as
//!   RocketMQ's `MixAll.string2File` keeps it.
//! * A namespace whose last key is deleted stays, empty (RocketMQ keeps the inner map): its
//!   listing answers an empty table, not QUERY_NOT_FOUND.
//! * At start the file is loaded by [`crate::fsutil::load_with_backup`]: a damaged file falls
//!   back to its `.bak` or refuses the start with an error naming the file (RocketMQ's fastjson
//!   exception stops its name server too).

use std::collections::BTreeMap;
use std::path::Path;

use actormq_core::protocol::body::parse_java_json;
use serde::{Deserialize, Serialize};

/// `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`.
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// `KVConfigSerializeWrapper`: the file's layout.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Wrapper {
    #[serde(deserialize_with = "null_as_empty")]
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

/// `"configTable":null` (fastjson reads it as no table) is an empty table.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, D::Error> {
    Ok(Option::deserialize(d)?.unwrap_or_default())
}

/// namespace → key → value.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KvConfigTable {
    table: BTreeMap<String, BTreeMap<String, String>>,
}

impl KvConfigTable {
    /// Reads `kvConfig.json` text. A missing or `null` `configTable` is an empty table.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let w: Option<Wrapper> = parse_java_json(text.as_bytes())?;
        Ok(KvConfigTable {
            table: w.unwrap_or_default().config_table,
        })
    }

    /// `KVConfigSerializeWrapper.toJson()`: what the file holds.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Ref<'a> {
            config_table: &'a BTreeMap<String, BTreeMap<String, String>>,
        }
        serde_json::to_string(&Ref {
            config_table: &self.table,
        })
        .expect("string maps always serialise")
    }

    /// The table in `path` (and its `.bak`); empty when neither exists.
    pub fn load(path: &Path) -> std::io::Result<Self> {
        let loaded = crate::fsutil::load_with_backup(path, Self::from_json)?;
        let table = loaded.into_option().unwrap_or_default();
        if !table.table.is_empty() {
            tracing::info!(file = %path.display(), namespaces = table.table.len(),
                "KV config table loaded");
        }
        Ok(table)
    }

    /// Writes the table to `path`, keeping the previous file as `.bak`.
    pub fn persist(&self, path: &Path) -> std::io::Result<()> {
        crate::fsutil::write_with_backup(path, self.to_json().as_bytes())
    }

    /// Sets `key` in `namespace` (made if new); returns the value it replaced.
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) -> Option<String> {
        self.table
            .entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), value.to_owned())
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.table.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes `key` from `namespace`, which stays even when emptied; returns the old value.
    pub fn delete(&mut self, namespace: &str, key: &str) -> Option<String> {
        self.table.get_mut(namespace)?.remove(key)
    }

    /// Every key of `namespace`; `None` if the namespace was never made.
    pub fn list(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.table.get(namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `KVConfigSerializeWrapper.toJson()` of namespaces A (k1, k2), B (empty) and
    /// ORDER_TOPIC_CONFIG (CfSync), printed by Apache RocketMQ 4.9.4's own class (keys chosen
    /// so Java's hash order is the sorted order).
    const JAVA_KV_CONFIG: &str = r#"{"configTable":{"A":{"k1":"broker-a:4","k2":"a \"q\" \\ é\n\t"},"B":{},"ORDER_TOPIC_CONFIG":{"CfSync":"broker-a:4"}}}"#;

    fn sample() -> KvConfigTable {
        let mut t = KvConfigTable::default();
        t.put("A", "k1", "broker-a:4");
        t.put("A", "k2", "a \"q\" \\ é\n\t");
        t.put("B", "gone", "x");
        assert_eq!(t.delete("B", "gone").as_deref(), Some("x"));
        t.put(NAMESPACE_ORDER_TOPIC_CONFIG, "CfSync", "broker-a:4");
        t
    }

    #[test]
    fn writes_kvconfig_json_as_rocketmq_does() {
        assert_eq!(sample().to_json(), JAVA_KV_CONFIG);
        assert_eq!(KvConfigTable::default().to_json(), r#"{"configTable":{}}"#);
    }

    #[test]
    fn reads_rocketmq_s_file() {
        let t = KvConfigTable::from_json(JAVA_KV_CONFIG).unwrap();
        assert_eq!(t, sample());
        assert_eq!(t.list("B").map(|m| m.len()), Some(0));
        assert!(t.list("C").is_none());
        assert_eq!(KvConfigTable::from_json("{}").unwrap(), Default::default());
        assert_eq!(
            KvConfigTable::from_json(r#"{"configTable":null}"#).unwrap(),
            Default::default()
        );
        assert!(KvConfigTable::from_json("{\"configTable\":[1]}").is_err());
    }

    #[test]
    fn persists_and_loads_back_with_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv").join("kvConfig.json");
        assert_eq!(KvConfigTable::load(&path).unwrap(), Default::default());
        let mut t = sample();
        t.persist(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), JAVA_KV_CONFIG);
        t.put("A", "k3", "v");
        t.persist(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(crate::fsutil::backup_path(&path)).unwrap(),
            JAVA_KV_CONFIG
        );
        assert_eq!(KvConfigTable::load(&path).unwrap(), t);
        // A damaged main file falls back to the previous version.
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(KvConfigTable::load(&path).unwrap(), sample());
    }
}
