//! [`BrokerConfig`]: RocketMQ's `BrokerConfig` and `NettyServerConfig` keys that ActorMQ uses,
//! with RocketMQ's defaults (`BrokerConfig.java`, `NettyServerConfig.java`, and `listenPort`
//! as `BrokerStartup.java` sets it), plus the local host name `brokerName` defaults to.
//!
//! Owns no state beyond the values (the host name is read once). Invariants: every field's
//! serde name is RocketMQ's exact key; checks live in `validate.rs`, not here.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::values::de_opt_string;

/// RocketMQ `BrokerConfig` (and `NettyServerConfig`) keys ActorMQ uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerConfig {
    /// `listenPort`, default 10911 (as `BrokerStartup` sets it). 0 = ephemeral.
    pub listen_port: u16,
    /// `namesrvAddr`, `;`-separated `host:port` list; unset = standalone. See
    /// [`Self::namesrv_addrs`].
    #[serde(deserialize_with = "de_opt_string")]
    pub namesrv_addr: Option<String>,
    /// `brokerName`, default the local host name ("broker-a" if it cannot be read).
    pub broker_name: String,
    /// `brokerClusterName`, default "DefaultCluster".
    pub broker_cluster_name: String,
    /// `brokerId`: 0 = master, > 0 = slave.
    pub broker_id: u64,
    /// `brokerIP1`: address clients and message ids use; unset = a local address picked at startup.
    #[serde(rename = "brokerIP1", deserialize_with = "de_opt_string")]
    pub broker_ip1: Option<String>,
    /// `brokerIP2`: HA address a slave connects to; unset = same as brokerIP1.
    #[serde(rename = "brokerIP2", deserialize_with = "de_opt_string")]
    pub broker_ip2: Option<String>,
    /// `brokerPermission`, PermName bits (READ 4, WRITE 2, INHERIT 1), default 6.
    pub broker_permission: u32,
    /// `defaultTopicQueueNums`, queues of auto-created topics (TBW102), default 8.
    pub default_topic_queue_nums: u32,
    /// `autoCreateTopicEnable`, default true.
    pub auto_create_topic_enable: bool,
    /// `autoCreateSubscriptionGroup`, default true.
    pub auto_create_subscription_group: bool,
    /// `clusterTopicEnable`, default true (a topic named after the cluster).
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable`, default true (a topic named after the broker).
    pub broker_topic_enable: bool,
    /// `longPollingEnable`, default true.
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills`, default 1000 ms.
    #[serde(rename = "shortPollingTimeMills")]
    pub short_polling_time_ms: u64,
    /// `registerNameServerPeriod`, default 30 000 ms.
    #[serde(rename = "registerNameServerPeriod")]
    pub register_name_server_period_ms: u64,
    /// `registerBrokerTimeoutMills`, default 6000 ms.
    #[serde(rename = "registerBrokerTimeoutMills")]
    pub register_broker_timeout_ms: u64,
    /// `forceRegister`, default true.
    pub force_register: bool,
    /// `compressedRegister`, default false.
    pub compressed_register: bool,
    /// `flushConsumerOffsetInterval`, default 5000 ms.
    #[serde(rename = "flushConsumerOffsetInterval")]
    pub flush_consumer_offset_interval_ms: u64,
    /// `slaveReadEnable`, default false.
    pub slave_read_enable: bool,
    /// `rejectTransactionMessage`, default false.
    pub reject_transaction_message: bool,
    /// `transactionTimeOut`, default 6000 ms.
    #[serde(rename = "transactionTimeOut")]
    pub transaction_timeout_ms: u64,
    /// `transactionCheckMax`, default 15.
    pub transaction_check_max: u32,
    /// `transactionCheckInterval`, default 60 000 ms.
    #[serde(rename = "transactionCheckInterval")]
    pub transaction_check_interval_ms: u64,
    /// `brokerFastFailureEnable`, default true.
    pub broker_fast_failure_enable: bool,
    /// `waitTimeMillsInSendQueue`, default 200 ms.
    #[serde(rename = "waitTimeMillsInSendQueue")]
    pub wait_time_ms_in_send_queue: u64,
    /// `serverChannelMaxIdleTimeSeconds`, default 120 s.
    #[serde(rename = "serverChannelMaxIdleTimeSeconds")]
    pub server_channel_max_idle_time_secs: u64,
    /// `metricsPromExporterPort` (5.x), default 5557. 0 = ephemeral.
    pub metrics_prom_exporter_port: u16,
    /// `serverSelectorThreads`: threads that serve client connections (read, decode, handle,
    /// write); each connection stays on one. RocketMQ's default is 3 selector threads feeding
    /// separate worker pools; here the same threads do both, so the default, 0, means one per
    /// core.
    pub server_selector_threads: u32,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen_port: 10911,
            namesrv_addr: None,
            broker_name: local_host_name(),
            broker_cluster_name: "DefaultCluster".to_owned(),
            broker_id: 0,
            broker_ip1: None,
            broker_ip2: None,
            broker_permission: 6,
            default_topic_queue_nums: 8,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            cluster_topic_enable: true,
            broker_topic_enable: true,
            long_polling_enable: true,
            short_polling_time_ms: 1000,
            register_name_server_period_ms: 30_000,
            register_broker_timeout_ms: 6000,
            force_register: true,
            compressed_register: false,
            flush_consumer_offset_interval_ms: 5000,
            slave_read_enable: false,
            reject_transaction_message: false,
            transaction_timeout_ms: 6000,
            transaction_check_max: 15,
            transaction_check_interval_ms: 60_000,
            broker_fast_failure_enable: true,
            wait_time_ms_in_send_queue: 200,
            server_channel_max_idle_time_secs: 120,
            metrics_prom_exporter_port: 5557,
            server_selector_threads: 0,
        }
    }
}

impl BrokerConfig {
    /// The name server addresses of `namesrvAddr` (`;`-separated, blanks dropped).
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv_addr
            .as_deref()
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// The local host name: `gethostname(2)`, else `/etc/hostname`, else "broker-a". Read once.
pub fn local_host_name() -> String {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        sys_hostname()
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|s| s.trim().to_owned())
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "broker-a".to_owned())
    })
    .clone()
}

fn sys_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes; gethostname writes at most that
    // many and we only read up to the first NUL (or the whole buffer if truncated).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..len]).trim().to_owned();
    (!name.is_empty()).then_some(name)
}
