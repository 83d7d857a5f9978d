//! The name server's configuration as mqadmin `getNamesrvConfig` / `updateNamesrvConfig` see it:
//! GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG (318), answered as RocketMQ 4.9.4's
//! `DefaultRequestProcessor.getConfig` / `updateConfig`
//! (namesrv/src/main/java/org/apache/rocketmq/namesrv/processor/DefaultRequestProcessor.java).
//!
//! Owns [`NamesrvConfig`]: the keys of RocketMQ's `NamesrvConfig` and `NettyServerConfig` with
//! ActorMQ's real values where it has them (`listenPort`, the one thread that serves every
//! connection, the accept backlog) and RocketMQ's defaults for the rest. Three keys are what the
//! name server really uses: `kvConfigPath` (where [`crate::namesrv::kv`] keeps the KV table,
//! default `${HOME}/namesrv/kvConfig.json`), `orderMessageEnable` (routes carry the topic's
//! `orderTopicConf`) and `configStorePath` (where an update is written, default
//! `${HOME}/namesrv/namesrv.properties`; `actormq namesrv -c <file>` makes it that file, as
//! RocketMQ's `NamesrvStartup -c` does). It lives in the name server's
//! [`crate::namesrv::RouteRegistry`] actor, beside the routes and the KV table it configures.
//!
//! Invariants: like RocketMQ's `Configuration.update`, an update changes only keys that exist
//! (others are ignored, and the reply is still SUCCESS); a value that does not parse as the
//! key's type leaves the old value (RocketMQ's `properties2Object` skips it the same way). An
//! update takes effect at once (the next route, the next KV write) and, as RocketMQ's
//! `Configuration.persist`, the whole table is then written to `configStorePath` (previous
//! version kept as `.bak`); a failed write is SYSTEM_ERROR naming the file.

use std::path::{Path, PathBuf};

use actormq_core::protocol::codes::response_code;
use actormq_core::protocol::command::RemotingCommand;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Int,
    Bool,
    Text,
}

/// The name server's configuration table (key → value text).
#[derive(Clone, Debug)]
pub struct NamesrvConfig {
    values: Vec<(&'static str, (Kind, String))>,
}

impl NamesrvConfig {
    /// The table of a name server listening on `listen_port`, its files under `$HOME/namesrv`
    /// (RocketMQ: `${user.home}/namesrv`).
    pub fn new(listen_port: u16) -> Self {
        let home = std::env::var("HOME").unwrap_or_default();
        Self::with_home(listen_port, Path::new(&home))
    }

    /// The table of a name server listening on `listen_port` whose `${user.home}` is `home`:
    /// `kvConfigPath` is `<home>/namesrv/kvConfig.json`, `configStorePath`
    /// `<home>/namesrv/namesrv.properties`.
    pub fn with_home(listen_port: u16, home: &Path) -> Self {
        let home = home.display().to_string();
        let int = |v: i64| (Kind::Int, v.to_string());
        let boolean = |v: bool| (Kind::Bool, v.to_string());
        let text = |v: String| (Kind::Text, v);
        // In the order mqadmin prints RocketMQ's own table (a Java `Properties` read back from
        // this text iterates in hash order; this order gives the same listing).
        let mut values = vec![
            // `tokio::net::TcpListener::bind` listens with mio's backlog, 128 on Linux.
            ("serverSocketBacklog", int(128)),
            ("writeBufferHighWaterMark", int(0)),
            // Every connection of ActorMQ's name server is served on one thread
            // (`remoting::server::serve`): one selector, no separate workers.
            ("serverWorkerThreads", int(1)),
            ("serverSelectorThreads", int(1)),
            ("serverChannelMaxIdleTimeSeconds", int(120)),
            ("writeBufferLowWaterMark", int(0)),
            ("serverSocketRcvBufSize", int(0)),
            ("serverAsyncSemaphoreValue", int(64)),
            (
                "kvConfigPath",
                text(format!("{home}/namesrv/kvConfig.json")),
            ),
            (
                "configStorePath",
                text(format!("{home}/namesrv/namesrv.properties")),
            ),
            ("clusterTest", boolean(false)),
            ("orderMessageEnable", boolean(false)),
            ("serverSocketSndBufSize", int(0)),
            ("serverOnewaySemaphoreValue", int(256)),
            ("serverCallbackExecutorThreads", int(0)),
            ("listenPort", int(listen_port.into())),
            ("productEnvName", text("center".into())),
            ("useEpollNativeSelector", boolean(false)),
            ("serverPooledByteBufAllocatorEnable", boolean(true)),
        ];
        // RocketMQ leaves a null value out: `rocketmqHome` only when ROCKETMQ_HOME is set.
        if let Ok(h) = std::env::var("ROCKETMQ_HOME") {
            let at = values.len() - 3;
            values.insert(at, ("rocketmqHome", text(h)));
        }
        NamesrvConfig { values }
    }

    /// `key=value` lines, as RocketMQ's `MixAll.properties2String`.
    pub fn to_properties(&self) -> String {
        self.values
            .iter()
            .map(|(k, (_, v))| format!("{k}={v}\n"))
            .collect()
    }

    /// `kvConfigPath`: the KV table's file.
    pub fn kv_config_path(&self) -> PathBuf {
        PathBuf::from(self.get("kvConfigPath").unwrap_or_default())
    }

    /// `configStorePath`: where an update writes the table.
    pub fn config_store_path(&self) -> PathBuf {
        PathBuf::from(self.get("configStorePath").unwrap_or_default())
    }

    /// `orderMessageEnable`: routes carry `orderTopicConf` from the KV table.
    pub fn order_message_enable(&self) -> bool {
        self.get("orderMessageEnable") == Some("true")
    }

    /// Sets a key the name server itself decides (its real port, the `-c` file as
    /// `configStorePath`), whatever a file said.
    pub fn set(&mut self, key: &str, value: &str) {
        if let Some((_, (_, slot))) = self.values.iter_mut().find(|(k, _)| *k == key) {
            *slot = value.to_owned();
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, (_, v))| v.as_str())
    }

    /// Applies Java properties text; returns the keys changed. Unknown keys and values of the
    /// wrong type are skipped, as RocketMQ does.
    pub fn update(&mut self, text: &str) -> Vec<String> {
        let mut changed = Vec::new();
        for (key, value) in parse_properties(text) {
            let Some((_, (kind, slot))) = self.values.iter_mut().find(|(k, _)| *k == key) else {
                continue;
            };
            let value = match kind {
                Kind::Int => match value.trim().parse::<i32>() {
                    Ok(n) => n.to_string(),
                    Err(_) => continue,
                },
                // Java's `Boolean.parseBoolean`: "true" in any case, anything else is false.
                Kind::Bool => value.trim().eq_ignore_ascii_case("true").to_string(),
                Kind::Text => value,
            };
            if *slot != value {
                *slot = value;
                changed.push(key);
            }
        }
        changed
    }

    /// Answers GET_NAMESRV_CONFIG: SUCCESS with the properties text as the body.
    pub fn get_config(&self, req: &RemotingCommand) -> RemotingCommand {
        RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(self.to_properties().into_bytes())
    }

    /// Answers UPDATE_NAMESRV_CONFIG: SUCCESS (also with no body, as RocketMQ); a body that is
    /// not UTF-8, or a table that cannot be written to `configStorePath`, is SYSTEM_ERROR.
    pub fn update_config(&mut self, req: &RemotingCommand, peer: &str) -> RemotingCommand {
        if !req.body.is_empty() {
            let Ok(text) = std::str::from_utf8(&req.body) else {
                return RemotingCommand::response_to(
                    req,
                    response_code::SYSTEM_ERROR,
                    Some("string2Properties error: the body is not UTF-8".into()),
                );
            };
            let changed = self.update(text);
            tracing::info!(caller = %peer, ?changed, "name server configuration updated");
            // RocketMQ's `Configuration.update` persists after every update, changed or not.
            let path = self.config_store_path();
            if let Err(e) = crate::fsutil::write_with_backup(&path, self.to_properties().as_bytes())
            {
                tracing::error!(file = %path.display(), error = %e,
                    "cannot persist the name server configuration");
                return RemotingCommand::response_to(
                    req,
                    response_code::SYSTEM_ERROR,
                    Some(format!(
                        "the configuration was updated in memory but cannot be written to {}: {e}",
                        path.display()
                    )),
                );
            }
        }
        RemotingCommand::response_to(req, response_code::SUCCESS, None)
    }
}

/// The `key=value` (or `key:value`) lines of Java properties text; `#`/`!` comments and blank
/// lines skipped, whitespace around keys and before values trimmed.
fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim_start)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(|l| match l.find(['=', ':']) {
            Some(i) => (
                l[..i].trim().to_string(),
                l[i + 1..].trim_start().to_string(),
            ),
            None => (l.trim().to_string(), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_rocketmq_keys_with_the_real_port() {
        let c = NamesrvConfig::new(41876);
        let text = c.to_properties();
        assert!(text.contains("listenPort=41876\n"), "{text}");
        for k in [
            "serverWorkerThreads",
            "serverSelectorThreads",
            "serverChannelMaxIdleTimeSeconds",
            "kvConfigPath",
            "configStorePath",
            "productEnvName",
            "clusterTest",
            "orderMessageEnable",
            "useEpollNativeSelector",
            "serverPooledByteBufAllocatorEnable",
        ] {
            assert!(text.contains(&format!("{k}=")), "{k} missing: {text}");
        }
    }

    #[test]
    fn updates_known_keys_only_and_keeps_bad_numbers_out() {
        let mut c = NamesrvConfig::new(9876);
        let changed = c.update("orderMessageEnable=TRUE\nnoSuchKey=1\nlistenPort=abc\n# x=y\n");
        assert_eq!(changed, vec!["orderMessageEnable".to_string()]);
        assert_eq!(c.get("orderMessageEnable"), Some("true"));
        assert_eq!(c.get("listenPort"), Some("9876"));
        assert_eq!(c.get("noSuchKey"), None);
        c.update("productEnvName = test\n");
        assert_eq!(c.get("productEnvName"), Some("test"));
    }
}
