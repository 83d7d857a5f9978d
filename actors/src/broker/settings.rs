//! `ProcessorSettings` — the request path's settings, derived from `BrokerConfig` and
//! `StoreConfig` at startup and rebuilt whole by `updateBrokerConfig`
//! ([`super::live_config::LiveConfig`]); every connection thread reads them through one
//! `ArcSwap`, so a change is seen by the next request everywhere and no request sees half of one.
//!
//! Owns no state of its own; no messages.

use std::time::Duration;

/// Broker settings the request handling needs (from `BrokerConfig`/`StoreConfig`).
#[derive(Clone, Debug)]
pub struct ProcessorSettings {
    pub cluster: String,
    pub broker_name: String,
    pub auto_create_topic: bool,
    pub long_polling: bool,
    pub short_polling: Duration,
    pub wait_time_in_send_queue: Duration,
    /// `osPageCacheBusyTimeOutMills`: a writer busy with one request longer than this refuses
    /// sends (SYSTEM_BUSY) until it is done.
    pub os_page_cache_busy: Duration,
    /// `brokerPermission` (PermName bits): without WRITE sends are refused, without READ pulls;
    /// the registrations carry it as every topic's perm (see `wiring::with_broker_permission`).
    pub broker_perm: u32,
    pub fast_failure: bool,
    pub reject_transaction: bool,
    pub max_transfer_count: usize,
    pub max_transfer_bytes: usize,
    pub max_transfer_count_on_disk: usize,
    pub max_transfer_bytes_on_disk: usize,
    /// `accessMessageInMemoryMaxRatio` % of physical memory: how far behind the CommitLog's end
    /// a record still counts as in the page cache.
    pub hot_bytes: u64,
    /// `slaveReadEnable`: PULL answers name the broker to read from next (a slave for a consumer
    /// far behind); without it they always name the master.
    pub slave_read_enable: bool,
    /// `offsetCheckInSlave`: whether a slave corrects a consumer's offset, as a master does.
    pub offset_check_in_slave: bool,
    pub max_msgs_num_batch: usize,
    pub default_query_max_num: usize,
    pub version_desc: String,
}

impl ProcessorSettings {
    /// The request-path settings of a configuration (also rebuilt by `updateBrokerConfig`).
    pub fn from_config(cfg: &actormq_core::config::Config) -> ProcessorSettings {
        let (b, sc) = (&cfg.broker, &cfg.store);
        ProcessorSettings {
            cluster: b.broker_cluster_name.clone(),
            broker_name: b.broker_name.clone(),
            auto_create_topic: b.auto_create_topic_enable,
            long_polling: b.long_polling_enable,
            short_polling: Duration::from_millis(b.short_polling_time_ms),
            wait_time_in_send_queue: Duration::from_millis(b.wait_time_ms_in_send_queue),
            os_page_cache_busy: Duration::from_millis(sc.os_page_cache_busy_timeout_ms),
            broker_perm: b.broker_permission,
            fast_failure: b.broker_fast_failure_enable,
            reject_transaction: b.reject_transaction_message,
            max_transfer_count: sc.max_transfer_count_on_message_in_memory as usize,
            max_transfer_bytes: sc.max_transfer_bytes_on_message_in_memory as usize,
            max_transfer_count_on_disk: sc.max_transfer_count_on_message_in_disk as usize,
            max_transfer_bytes_on_disk: sc.max_transfer_bytes_on_message_in_disk as usize,
            hot_bytes: physical_memory().map_or(u64::MAX, |m| {
                m / 100 * u64::from(sc.access_message_in_memory_max_ratio)
            }),
            slave_read_enable: b.slave_read_enable,
            offset_check_in_slave: sc.offset_check_in_slave,
            max_msgs_num_batch: sc.max_msgs_num_batch as usize,
            default_query_max_num: sc.default_query_max_num as usize,
            version_desc: format!("ActorMQ {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// The memory this broker may use, in bytes (RocketMQ's `TOTAL_PHYSICAL_MEMORY_SIZE`): the
/// machine's, or the container's limit where that is lower (a JVM with container support reads
/// the same), `None` where the kernel says neither: then every record counts as in memory, as on
/// a store smaller than its share.
fn physical_memory() -> Option<u64> {
    // SAFETY: sysinfo only writes the zeroed struct it is given.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    let machine = (unsafe { libc::sysinfo(&mut info) } == 0)
        .then(|| (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1))));
    // cgroup v2, else v1, as a container sees its own hierarchy; "max" or an absurd v1 value
    // means no limit.
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok());
    match (machine, limit) {
        (Some(m), Some(l)) => Some(m.min(l)),
        (m, l) => m.or(l),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_batches_are_judged_against_the_machines_memory_or_its_containers_limit() {
        let m = physical_memory().expect("Linux says how much memory there is");
        // SAFETY: sysinfo only writes the zeroed struct it is given.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::sysinfo(&mut info) }, 0);
        let machine = info.totalram as u64 * u64::from(info.mem_unit.max(1));
        assert!(m <= machine, "{m} > the machine's {machine}");
        assert!(m >= 64 << 20, "{m} bytes: a unit was lost");
    }
}
