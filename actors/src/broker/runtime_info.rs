//! GET_BROKER_RUNTIME_INFO (28): the key set RocketMQ 4.9.4 sends (AdminBrokerProcessor's
//! `prepareRuntimeInfo` over DefaultMessageStore's and StoreStatsService's `getRuntimeInfo`),
//! which mqadmin `brokerStatus`/`clusterList` and the Dashboard read, plus 5.x's
//! `getTransferredTps` (see [`super::store_stats`]).
//!
//! Read from the store's published offsets and probes, the shared [`Stats`], every connection
//! thread's put latencies (merged by [`super::rates::SharedRates`]), the actors' mailbox probes
//! (the thread-pool-queue keys) and the schedule actor (`scheduleMessageOffset_<level>`). No
//! state of its own.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use actormq_core::offset::PhyOffset;
use actormq_core::protocol::body::{to_json_bytes, KvTable};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::store::reader::StoreReader;

use super::context::{later, ok, BrokerCore};
use super::store_stats::{human_bytes, java_disk_ratio, java_double, Stats};
use crate::remoting::server::Handled;
use crate::store::Store;

type Table = BTreeMap<String, String>;

fn put(t: &mut Table, k: &str, v: String) {
    t.insert(k.to_string(), v);
}

impl BrokerCore {
    /// GET_BROKER_RUNTIME_INFO: the table, with the put latencies and the delayed-delivery
    /// progress, which are asked for.
    pub(super) fn runtime_info(&self, req: RemotingCommand) -> Handled {
        let mut t = self.runtime_table();
        let (store, reader) = (self.store.clone(), self.reader.clone());
        let rates = self.all_rates.clone();
        later(async move {
            rates.fill_put_latency(&mut t).await;
            put_schedule_progress(&store, &reader, &mut t).await;
            let body = to_json_bytes(&KvTable { table: t }).unwrap_or_default();
            ok(&req).with_body(body)
        })
    }

    fn runtime_table(&self) -> Table {
        let mut t = Table::new();
        self.put_versions_and_totals(&mut t);
        self.put_commit_log(&mut t);
        let state = self.store.state();
        self.stats.store.fill_with_deliveries(
            state.delivered_msgs.load(Ordering::Relaxed),
            state.delivered_bytes.load(Ordering::Relaxed),
            &mut t,
        );
        self.put_disks(&mut t);
        self.put_queues(&mut t);
        t
    }

    fn put_versions_and_totals(&self, t: &mut Table) {
        put(
            t,
            "brokerVersionDesc",
            self.settings.load().version_desc.clone(),
        );
        put(t, "brokerVersion", "401".to_string());
        put(t, "bootTimestamp", self.boot_ms.to_string());
        put_totals(&self.stats, t);
    }

    /// The CommitLog's offsets, what is left to dispatch, flush and commit, and the write
    /// buffers.
    fn put_commit_log(&self, t: &mut Table) {
        let max = self.store.max_offset().0;
        put(t, "commitLogMaxOffset", max.to_string());
        // RocketMQ's CommitLog.getMinOffset: -1 while there is no CommitLog file.
        let log = self.reader.commit_log();
        let min = if log.files().is_empty() {
            "-1".to_string()
        } else {
            log.min_offset().to_string()
        };
        put(t, "commitLogMinOffset", min);
        let behind = max.saturating_sub(self.store.dispatched_offset().0);
        put(t, "dispatchBehindBytes", behind.to_string());
        let unflushed = max.saturating_sub(self.store.flushed_offset().0);
        put(t, "remainHowManyDataToFlush", human_bytes(unflushed));
        put(t, "pageCacheLockTimeMills", "0".to_string());
        // RocketMQ reports Integer.MAX_VALUE when the pool is off, and the bytes written but not
        // committed only when it is on.
        let pool = self.store.write_buffer_pool();
        let buffers = pool.map_or(i32::MAX as usize, |p| p.available());
        put(t, "remainTransientStoreBufferNumbs", buffers.to_string());
        if pool.is_some() {
            let uncommitted = log.max_wrote_offset().saturating_sub(log.max_offset());
            put(t, "remainHowManyDataToCommit", human_bytes(uncommitted));
        }
    }

    /// The earliest message's time and the disks' use.
    fn put_disks(&self, t: &mut Table) {
        // DefaultMessageStore.getEarliestMessageTime: the store time of the first record, read
        // as a block of 2 × maxMessageSize bytes from the first file, so -1 while that file holds
        // fewer bytes past it (and with no message stored) — what 4.9.4 reports, and mqadmin
        // `clusterList`'s #Hour is computed from.
        let config = self.live.config();
        let block = 2 * u64::from(config.store.max_message_size);
        let log = self.reader.commit_log();
        let earliest = log
            .files()
            .first()
            .filter(|f| f.readable_position() >= block)
            .and_then(|_| self.reader.store_time_at(PhyOffset(log.min_offset())));
        put(
            t,
            "earliestMessageTimeStamp",
            earliest.unwrap_or(-1).to_string(),
        );
        put(t, "startAcceptSendRequestTimeStamp", "0".to_string());
        // Each CommitLog path's ratio (RocketMQ's `commitLogDiskRatio_<path>`, -1 for a path
        // that does not exist) and the least of them; the paths as configured.
        let cl_dir = config.store.commitlog_dir();
        let cl_ratio = disk_ratio(&cl_dir);
        put(
            t,
            &format!("commitLogDiskRatio_{}", cl_dir.display()),
            java_double(cl_ratio),
        );
        put(t, "commitLogDiskRatio", java_double(cl_ratio));
        // The ConsumeQueues' disk (with `storePathCommitLog` elsewhere, another file system). A
        // directory not made yet (no message stored) is measured where it will be made.
        let cq_dir = config.store.consumequeue_dir();
        let cq_at = cq_dir.ancestors().find(|p| p.exists()).unwrap_or(&cq_dir);
        put(t, "consumeQueueDiskRatio", java_double(disk_ratio(cq_at)));
        // RocketMQ measures the root directory: total and usable (non-root) space.
        let root = &config.store.store_path_root_dir;
        if let Ok((total, _, usable)) = crate::fsutil::space_usable(root) {
            let capacity = format!(
                "Total : {}, Free : {}.",
                human_bytes(total),
                human_bytes(usable)
            );
            put(t, "commitLogDirCapacity", capacity);
        }
    }

    /// RocketMQ's thread-pool queues: the CommitLog writer's and PullHold's mailboxes stand for
    /// the send and pull pools.
    fn put_queues(&self, t: &mut Table) {
        let writer = self.store.writer().probe();
        put(t, "sendThreadPoolQueueSize", writer.depth.get().to_string());
        put(t, "sendThreadPoolQueueCapacity", "4096".to_string());
        let send_wait = writer.last_wait_us.load(Ordering::Relaxed) / 1000;
        put(
            t,
            "sendThreadPoolQueueHeadWaitTimeMills",
            send_wait.to_string(),
        );
        let pulls = self.pull_hold.probe();
        put(t, "pullThreadPoolQueueSize", pulls.depth.get().to_string());
        put(t, "pullThreadPoolQueueCapacity", "1024".to_string());
        let pull_wait = pulls.last_wait_us.load(Ordering::Relaxed) / 1000;
        put(
            t,
            "pullThreadPoolQueueHeadWaitTimeMills",
            pull_wait.to_string(),
        );
        // No such queues here: queries (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, …) are answered on the
        // connection thread that reads them, and there is no end-transaction pool. Nothing waits,
        // and nothing is bounded (Integer.MAX_VALUE, an unbounded Java queue's capacity).
        put(t, "queryThreadPoolQueueSize", "0".to_string());
        put(t, "queryThreadPoolQueueCapacity", i32::MAX.to_string());
        put(t, "queryThreadPoolQueueHeadWaitTimeMills", "0".to_string());
        put(t, "EndTransactionQueueSize", "0".to_string());
        put(
            t,
            "EndTransactionThreadPoolQueueCapacity",
            i32::MAX.to_string(),
        );
    }
}

/// Messages put and got since the start; RocketMQ's day and yesterday figures are not kept.
fn put_totals(stats: &Stats, t: &mut Table) {
    put(t, "msgPutTotalTodayNow", stats.put_msgs.get().to_string());
    put(t, "msgGetTotalTodayNow", stats.got_msgs.get().to_string());
    put(t, "msgPutTotalYesterdayMorning", "0".to_string());
    put(t, "msgGetTotalYesterdayMorning", "0".to_string());
    put(t, "msgPutTotalTodayMorning", "0".to_string());
    put(t, "msgGetTotalTodayMorning", "0".to_string());
}

/// RocketMQ's disk ratio of the file system `p` is on; -1 for a path that does not exist.
fn disk_ratio(p: &std::path::Path) -> f64 {
    if !p.exists() {
        return -1.0;
    }
    crate::fsutil::space_usable(p).map_or(-1.0, |(t, f, a)| java_disk_ratio(t, f, a))
}

/// "<delivered up to>,<queue max>" per level in RocketMQ's progress table
/// (ScheduleMessageService.buildRunningStats), which holds a level once a message was delayed at
/// it: here, a level with progress or with a schedule queue.
async fn put_schedule_progress(store: &Store, reader: &StoreReader, t: &mut Table) {
    use actormq_core::store::schedule::SCHEDULE_TOPIC;
    let Some(d) = store.delay_offsets().await else {
        return;
    };
    for (level, off) in &d.0 {
        let queue = (*level as i32).saturating_sub(1);
        if *off == 0 && reader.queue(SCHEDULE_TOPIC, queue).is_none() {
            continue;
        }
        let max = reader.max_offset(SCHEDULE_TOPIC, queue).0;
        put(
            t,
            &format!("scheduleMessageOffset_{level}"),
            format!("{off},{max}"),
        );
    }
}
