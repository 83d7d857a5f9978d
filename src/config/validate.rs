//! The rules a [`Config`] must meet ([`Config::validate`], [`Config::validate_with`]), one
//! function per group of keys.
//!
//! Owns no state. Messages in: a config and `origin_of(key)`; out: `Ok(())` or
//! [`ConfigError::Invalid`] with every [`Violation`] at once, in the order of [`RULE_GROUPS`].
//! Invariants: each violation names the origin, the key (RocketMQ spelling), the value as it is
//! shown (strings quoted) and the rule; port 0 ("ephemeral") passes every port rule. Stricter
//! than RocketMQ on purpose (see the module docs of `config`): out-of-range values are errors,
//! not clamped.

use std::fmt;
use std::net::IpAddr;

use super::{
    parse_delay_levels, Config, ConfigError, Violation, COMMIT_LOG_SIZE_GRANULE, CQ_UNIT_SIZE,
    MAX_COMMIT_LOG_FILE_SIZE, MAX_CONSUME_QUEUE_FILE_SIZE,
};

/// Origin reported by [`Config::validate`] (values built in code, no provenance).
pub const IN_MEMORY_ORIGIN: &str = "in-memory configuration";

impl Config {
    /// Checks every rule; all violations are reported at once. Origins are reported as
    /// [`IN_MEMORY_ORIGIN`]; [`Loaded::validate`](super::Loaded::validate) names the real
    /// sources.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(&|_| IN_MEMORY_ORIGIN.to_owned())
    }

    /// [`Self::validate`] with `origin_of(key)` naming where each key's value came from.
    pub fn validate_with(&self, origin_of: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        let mut c = Checker {
            origin_of,
            out: Vec::new(),
        };
        for group in RULE_GROUPS {
            group(self, &mut c);
        }
        if c.out.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(c.out))
        }
    }
}

/// The rule groups, in the order their violations are reported.
const RULE_GROUPS: &[fn(&Config, &mut Checker<'_>)] = &[
    store_layout,
    periods,
    counts,
    cleanup,
    index,
    delay_levels_and_topics,
    identity,
    addresses,
    ports,
];

/// The store root and the sizes of CommitLog and ConsumeQueue files and of a message.
fn store_layout(cfg: &Config, c: &mut Checker<'_>) {
    let s = &cfg.store;
    if s.store_path_root_dir.as_os_str().is_empty() {
        c.fail("storePathRootDir", q(""), "expected a directory path");
    }
    if s.mapped_file_size_commit_log % COMMIT_LOG_SIZE_GRANULE != 0
        || !(COMMIT_LOG_SIZE_GRANULE..=MAX_COMMIT_LOG_FILE_SIZE)
            .contains(&s.mapped_file_size_commit_log)
    {
        c.fail(
            "mappedFileSizeCommitLog",
            s.mapped_file_size_commit_log,
            format!("expected a multiple of 4096 in 4096..={MAX_COMMIT_LOG_FILE_SIZE} (bytes)"),
        );
    }
    if s.mapped_file_size_consume_queue % CQ_UNIT_SIZE != 0
        || !(CQ_UNIT_SIZE..=MAX_CONSUME_QUEUE_FILE_SIZE).contains(&s.mapped_file_size_consume_queue)
    {
        c.fail(
            "mappedFileSizeConsumeQueue",
            s.mapped_file_size_consume_queue,
            format!(
                "expected a multiple of 20 (the ConsumeQueue unit) in 20..={MAX_CONSUME_QUEUE_FILE_SIZE} \
                 (bytes; the loader rounds up, see Config::normalize)"
            ),
        );
    }
    if s.max_message_size == 0 || u64::from(s.max_message_size) > s.mapped_file_size_commit_log {
        c.fail(
            "maxMessageSize",
            s.max_message_size,
            format!(
                "expected 1..=mappedFileSizeCommitLog ({}) bytes",
                s.mapped_file_size_commit_log
            ),
        );
    }
}

/// Periods and timeouts must be positive.
fn periods(cfg: &Config, c: &mut Checker<'_>) {
    let (s, b) = (&cfg.store, &cfg.broker);
    for (key, v) in [
        ("flushIntervalCommitLog", s.flush_interval_commit_log_ms),
        ("commitIntervalCommitLog", s.commit_interval_commit_log_ms),
        (
            "flushCommitLogThoroughInterval",
            s.flush_commit_log_thorough_interval_ms,
        ),
        (
            "commitCommitLogThoroughInterval",
            s.commit_commit_log_thorough_interval_ms,
        ),
        (
            "flushIntervalConsumeQueue",
            s.flush_interval_consume_queue_ms,
        ),
        (
            "flushConsumeQueueThoroughInterval",
            s.flush_consume_queue_thorough_interval_ms,
        ),
        ("syncFlushTimeout", s.sync_flush_timeout_ms),
        ("slaveTimeout", s.slave_timeout_ms),
        (
            "osPageCacheBusyTimeOutMills",
            s.os_page_cache_busy_timeout_ms,
        ),
        ("cleanResourceInterval", s.clean_resource_interval_ms),
        ("haSendHeartbeatInterval", s.ha_send_heartbeat_interval_ms),
        ("haHousekeepingInterval", s.ha_housekeeping_interval_ms),
        ("flushDelayOffsetInterval", s.flush_delay_offset_interval_ms),
        ("shortPollingTimeMills", b.short_polling_time_ms),
        ("registerNameServerPeriod", b.register_name_server_period_ms),
        ("registerBrokerTimeoutMills", b.register_broker_timeout_ms),
        (
            "flushConsumerOffsetInterval",
            b.flush_consumer_offset_interval_ms,
        ),
        ("transactionTimeOut", b.transaction_timeout_ms),
        ("transactionCheckInterval", b.transaction_check_interval_ms),
        ("waitTimeMillsInSendQueue", b.wait_time_ms_in_send_queue),
    ] {
        c.positive(key, v, "ms");
    }
    c.positive(
        "serverChannelMaxIdleTimeSeconds",
        b.server_channel_max_idle_time_secs,
        "s",
    );
}

/// Counts and sizes that must be at least 1.
fn counts(cfg: &Config, c: &mut Checker<'_>) {
    let (s, b) = (&cfg.store, &cfg.broker);
    for (key, v) in [
        (
            "transientStorePoolSize",
            u64::from(s.transient_store_pool_size),
        ),
        (
            "flushLeastPagesWhenWarmMapedFile",
            u64::from(s.flush_least_pages_when_warm_mapped_file),
        ),
        ("deleteFileBatchMax", u64::from(s.delete_file_batch_max)),
        ("maxMsgsNumBatch", u64::from(s.max_msgs_num_batch)),
        ("defaultQueryMaxNum", u64::from(s.default_query_max_num)),
        (
            "maxTransferBytesOnMessageInMemory",
            s.max_transfer_bytes_on_message_in_memory,
        ),
        (
            "maxTransferCountOnMessageInMemory",
            u64::from(s.max_transfer_count_on_message_in_memory),
        ),
        (
            "maxTransferBytesOnMessageInDisk",
            s.max_transfer_bytes_on_message_in_disk,
        ),
        (
            "maxTransferCountOnMessageInDisk",
            u64::from(s.max_transfer_count_on_message_in_disk),
        ),
        ("haTransferBatchSize", u64::from(s.ha_transfer_batch_size)),
        (
            "defaultTopicQueueNums",
            u64::from(b.default_topic_queue_nums),
        ),
        ("transactionCheckMax", u64::from(b.transaction_check_max)),
    ] {
        c.positive(key, v, "");
    }
}

/// `deleteWhen` and the disk and memory ratios (percent).
fn cleanup(cfg: &Config, c: &mut Checker<'_>) {
    let s = &cfg.store;
    if s.delete_when
        .split(';')
        .any(|h| !matches!(h.trim().parse::<u8>(), Ok(0..=23)))
    {
        c.fail(
            "deleteWhen",
            q(&s.delete_when),
            "expected hours of day 0..=23 separated by ';', e.g. \"04\" or \"04;16\"",
        );
    }
    for (key, v, lo, hi) in [
        ("diskMaxUsedSpaceRatio", s.disk_max_used_space_ratio, 10, 95),
        (
            "diskSpaceWarningLevelRatio",
            s.disk_space_warning_level_ratio,
            0,
            100,
        ),
        (
            "diskSpaceCleanForciblyRatio",
            s.disk_space_clean_forcibly_ratio,
            0,
            100,
        ),
        (
            "accessMessageInMemoryMaxRatio",
            s.access_message_in_memory_max_ratio,
            0,
            100,
        ),
    ] {
        c.range(key, u64::from(v), lo, hi, " (percent)");
    }
}

/// The IndexFile geometry: IndexStore needs entry 0 unused, so at least 2 entries; Java sizes
/// are `int`s.
fn index(cfg: &Config, c: &mut Checker<'_>) {
    let s = &cfg.store;
    c.range(
        "maxHashSlotNum",
        u64::from(s.max_hash_slot_num),
        1,
        i32::MAX as u64,
        "",
    );
    c.range(
        "maxIndexNum",
        u64::from(s.max_index_num),
        2,
        i32::MAX as u64,
        " (entry 0 is unused)",
    );
    if s.index_file_size() > i32::MAX as u64 {
        c.fail(
            "maxIndexNum",
            s.max_index_num,
            format!(
                "index file size 40 + 4 × maxHashSlotNum ({}) + 20 × maxIndexNum = {} bytes exceeds 2147483647",
                s.max_hash_slot_num,
                s.index_file_size()
            ),
        );
    }
}

/// `messageDelayLevel` parses; `maxTopicLength` fits a Java `short`.
fn delay_levels_and_topics(cfg: &Config, c: &mut Checker<'_>) {
    let s = &cfg.store;
    if let Err(e) = parse_delay_levels(&s.message_delay_level) {
        c.fail(
            "messageDelayLevel",
            q(&s.message_delay_level),
            e.to_string(),
        );
    }
    c.range(
        "maxTopicLength",
        u64::from(s.max_topic_length),
        1,
        i16::MAX as u64,
        " (characters)",
    );
}

/// Names, the id that goes with the role (stricter than RocketMQ, which forces a master's id to
/// 0), and the permission bits.
fn identity(cfg: &Config, c: &mut Checker<'_>) {
    let (s, b) = (&cfg.store, &cfg.broker);
    if b.broker_name.trim().is_empty() {
        c.fail("brokerName", q(&b.broker_name), "expected a non-empty name");
    }
    if b.broker_cluster_name.trim().is_empty() {
        c.fail(
            "brokerClusterName",
            q(&b.broker_cluster_name),
            "expected a non-empty name",
        );
    }
    if s.broker_role.is_slave() && b.broker_id == 0 {
        c.fail(
            "brokerId",
            b.broker_id,
            "expected > 0 when brokerRole = SLAVE (0 is the master's id)",
        );
    }
    if s.broker_role.is_master() && b.broker_id != 0 {
        c.fail(
            "brokerId",
            b.broker_id,
            format!(
                "expected 0 when brokerRole = {} (slaves use ids > 0)",
                s.broker_role
            ),
        );
    }
    c.range(
        "brokerPermission",
        u64::from(b.broker_permission),
        0,
        7,
        " (PermName bits READ=4, WRITE=2, INHERIT=1)",
    );
}

/// Name servers and the HA master are `host:port`; `brokerIP1` is an IP address (it is encoded
/// into message ids).
fn addresses(cfg: &Config, c: &mut Checker<'_>) {
    let (s, b) = (&cfg.store, &cfg.broker);
    if let Some(addr) = &b.namesrv_addr {
        if let Some(bad) = addr
            .split(';')
            .map(str::trim)
            .find(|a| !a.is_empty() && !is_host_port(a))
        {
            c.fail(
                "namesrvAddr",
                q(addr),
                format!("expected host:port entries separated by ';', e.g. \"127.0.0.1:9876;192.168.0.1:9876\" (bad entry {bad:?})"),
            );
        }
    }
    if let Some(addr) = &s.ha_master_address {
        if !is_host_port(addr.trim()) {
            c.fail(
                "haMasterAddress",
                q(addr),
                "expected host:port, e.g. \"192.168.0.1:10912\"",
            );
        }
    }
    if let Some(ip) = &b.broker_ip1 {
        if ip.trim().parse::<IpAddr>().is_err() {
            c.fail(
                "brokerIP1",
                q(ip),
                "expected an IPv4 or IPv6 address (it is encoded into message ids)",
            );
        }
    }
}

/// Ports: 0 is "ephemeral"; two fixed ports must differ.
fn ports(cfg: &Config, c: &mut Checker<'_>) {
    let ports = [
        ("listenPort", cfg.broker.listen_port),
        ("haListenPort", cfg.store.ha_listen_port),
        (
            "metricsPromExporterPort",
            cfg.broker.metrics_prom_exporter_port,
        ),
    ];
    for (i, (key, port)) in ports.iter().enumerate() {
        if let Some((other, _)) = ports[..i].iter().find(|(_, p)| *p == *port && *port != 0) {
            c.fail(key, port, format!("port already used by {other}"));
        }
    }
}

fn is_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.trim().is_empty() && port.parse::<u16>().is_ok(),
        None => false,
    }
}

/// Renders a string value the way errors show it.
pub(super) fn q(s: &str) -> String {
    format!("{s:?}")
}

/// Collects violations, naming each value's origin.
struct Checker<'a> {
    origin_of: &'a dyn Fn(&str) -> String,
    out: Vec<Violation>,
}

impl Checker<'_> {
    fn fail(&mut self, key: &str, value: impl fmt::Display, rule: impl Into<String>) {
        self.out.push(Violation {
            origin: (self.origin_of)(key),
            key: key.to_owned(),
            value: value.to_string(),
            rule: rule.into(),
        });
    }
    fn positive(&mut self, key: &str, v: u64, unit: &str) {
        if v == 0 {
            let rule = if unit.is_empty() {
                "expected > 0".to_owned()
            } else {
                format!("expected > 0 ({unit})")
            };
            self.fail(key, v, rule);
        }
    }
    fn range(&mut self, key: &str, v: u64, lo: u64, hi: u64, note: &str) {
        if !(lo..=hi).contains(&v) {
            self.fail(key, v, format!("expected {lo}..={hi}{note}"));
        }
    }
}
