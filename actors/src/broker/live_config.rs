//! `LiveConfig` — the broker's configuration in effect, changed at runtime by
//! UPDATE_BROKER_CONFIG (25): the `Config`, the request-path settings derived from it (swapped
//! whole into the `ArcSwap` every connection thread reads), and the keys changed at runtime,
//! which are written to `<storePathRootDir>/config/broker.runtime.properties` so a restart keeps
//! them (that file is a configuration layer between the `-c` file and the environment).
//!
//! Invariants: an update is validated as a whole against the running configuration (same rules
//! and messages as at startup) before anything changes; a refused update changes nothing;
//! updates are applied one at a time (the admin path's only lock, never taken by a SEND or a
//! PULL) and each bumps the data version GET_BROKER_CONFIG reports.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use actormq_core::config::{load_layers, Config, Layer};
use actormq_core::meta;
use arc_swap::ArcSwap;

use super::settings::ProcessorSettings;

/// Keys an `updateBrokerConfig` changes at once; every other key is stored and applies at the
/// next start (the reply's remark lists which).
pub const LIVE_KEYS: &[&str] = &[
    "autoCreateTopicEnable",
    "longPollingEnable",
    "shortPollingTimeMills",
    "waitTimeMillsInSendQueue",
    "brokerFastFailureEnable",
    "rejectTransactionMessage",
    "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInDisk",
    "maxTransferBytesOnMessageInDisk",
    "accessMessageInMemoryMaxRatio",
    "slaveReadEnable",
    "offsetCheckInSlave",
    "maxMsgsNumBatch",
    "defaultQueryMaxNum",
    "brokerPermission",
];

/// The file that keeps runtime updates across restarts.
pub const RUNTIME_FILE: &str = "broker.runtime.properties";

/// The configuration in effect and what was changed at runtime.
pub struct LiveConfig {
    config: ArcSwap<Config>,
    settings: Arc<ArcSwap<ProcessorSettings>>,
    runtime_file: PathBuf,
    /// Serialises updates (admin path only) and holds the keys changed so far.
    updates: Mutex<Updates>,
}

struct Updates {
    keys: BTreeMap<String, String>,
    version: meta::DataVersion,
}

impl LiveConfig {
    pub fn new(config: Config, settings: Arc<ArcSwap<ProcessorSettings>>, now_ms: i64) -> Self {
        let runtime_file = config.store.config_dir().join(RUNTIME_FILE);
        // Keys an earlier run stored stay "changed at runtime" so the next update keeps them.
        let keys = std::fs::read(&runtime_file)
            .ok()
            .and_then(|b| {
                Layer::from_properties_str(
                    runtime_file.display().to_string(),
                    &String::from_utf8_lossy(&b),
                )
                .ok()
            })
            .map(|l| {
                l.values
                    .into_iter()
                    .map(|(k, v)| (k, v.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let mut version = meta::DataVersion::default();
        version.next(now_ms);
        LiveConfig {
            config: ArcSwap::from_pointee(config),
            settings,
            runtime_file,
            updates: Mutex::new(Updates { keys, version }),
        }
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Applies `key=value` lines (Java properties). Returns the keys that only apply at the
    /// next start, or the reason nothing was changed.
    pub fn update(&self, body: &str, origin: &str, now_ms: i64) -> Result<Vec<String>, String> {
        let layer = Layer::from_properties_str(origin, body).map_err(|e| e.to_string())?;
        if layer.values.is_empty() {
            return Err("no key=value lines in the request body".into());
        }
        let mut u = self.updates.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.config.load_full();
        let loaded = load_layers(vec![
            Layer::from_strings("running configuration", current.to_properties()),
            layer.clone(),
        ])
        .map_err(|e| e.to_string())?;
        // An update names keys on purpose: a typo or a RocketMQ-only key is an error here, not
        // a warning as in a file.
        if let Some(k) = loaded.unknown.first().or(loaded.unsupported.first()) {
            return Err(format!("{}: {}", k.key, k.hint));
        }
        let new_cfg = loaded.config;
        let new_props = new_cfg.to_properties();
        // Record the canonical spelling of each changed key with its new value.
        let mut restart = Vec::new();
        for key in layer.values.keys() {
            let canonical = new_props
                .keys()
                .find(|k| k.eq_ignore_ascii_case(key))
                .cloned()
                .unwrap_or_else(|| key.clone());
            if let Some(v) = new_props.get(&canonical) {
                u.keys.insert(canonical.clone(), v.clone());
            }
            if !LIVE_KEYS.contains(&canonical.as_str()) {
                restart.push(canonical);
            }
        }
        let text: String = u.keys.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        crate::fsutil::write_atomically(&self.runtime_file, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", self.runtime_file.display()))?;
        let mut settings = ProcessorSettings::from_config(&new_cfg);
        settings.version_desc = self.settings.load().version_desc.clone();
        self.settings.store(Arc::new(settings));
        self.config.store(Arc::new(new_cfg));
        u.version.next(now_ms);
        Ok(restart)
    }

    pub(super) fn version_json(&self) -> String {
        let u = self.updates.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::to_string(&u.version).unwrap_or_default()
    }
}
