//! The read side of the store: everything a consumer, a query or an admin tool asks, answered on
//! the caller's thread from published watermarks — never through a writer's mailbox
//! (ARCHITECTURE.md, "Shared state between actors").
//!
//! A [`StoreReader`] is cheap to clone and `Send + Sync`: it holds views of the CommitLog file
//! queue, the ConsumeQueue table and the index. Every answer only covers bytes that their owners
//! have published, so readers never block writers and never see a half-written record.
//!
//! Records leave as [`ReadSlice`]s of the mapped CommitLog, and a PULL's answer sends them as
//! they lie ([`mapped_bytes`]: a `Bytes` over the mapping, no copy). Invariant: such a view keeps
//! its file mapped until the last copy of it is dropped — after the socket took its bytes —
//! and the bytes it covers never change: they were published when it was made, and retention
//! only unlinks a file (`FileQueueRetention::delete_files`), whose mapping stays valid while
//! anything maps it; no one truncates or rewrites a published CommitLog byte while readers
//! exist (recovery cuts before any reader does).

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;

use super::consume_queue::{CqTable, CqView};
use super::mapped_file_queue::{FileQueueView, ReadSlice};
use crate::format::cq_unit::{CqUnit, CQ_UNIT_SIZE};
use crate::format::java::java_string_hash;
use crate::format::record::{self, Check};
use crate::offset::{PhyOffset, QueueOffset};

/// RocketMQ's `GetMessageStatus`
/// (store/src/main/java/org/apache/rocketmq/store/GetMessageStatus.java).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

/// The result of a pull-style read.
#[derive(Debug)]
pub struct GetResult {
    pub status: GetStatus,
    pub next_begin_offset: QueueOffset,
    pub min_offset: QueueOffset,
    pub max_offset: QueueOffset,
    /// Raw records, each exactly as stored (the pull response body is their concatenation).
    pub messages: Vec<ReadSlice>,
    /// Queue offset of each message in `messages`.
    pub queue_offsets: Vec<QueueOffset>,
    pub total_bytes: usize,
    /// The last ConsumeQueue unit looked at lies more than [`GetLimits::hot_bytes`] behind the
    /// CommitLog's end: the consumer reads from disk, not from the page cache, and RocketMQ's
    /// master then suggests the group's `whichBrokerWhenConsumeSlowly` (a slave) to it.
    pub suggest_pulling_from_slave: bool,
}

/// `slice` as [`Bytes`] without copying it: its bytes stay where they lie in the mapped file,
/// and the `Bytes` (every clone and sub-slice of it too) holds the file, so the file stays
/// mapped — even once retention deleted it — until the last of them is dropped. For a PULL's
/// records, written from the mapping to the socket (`writev`).
pub fn mapped_bytes(slice: ReadSlice) -> Bytes {
    Bytes::from_owner(Mapped(slice))
}

/// The owner behind [`mapped_bytes`]: `Bytes::from_owner` asks it for its bytes once, when the
/// `Bytes` is made (the slice's published range), and keeps it alive as long as the `Bytes`.
struct Mapped(ReadSlice);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl GetResult {
    /// Adds a record read at queue offset `at`; the first one sizes the lists for `max_msgs`,
    /// so a whole batch never regrows them.
    fn push(&mut self, slice: ReadSlice, at: QueueOffset, max_msgs: usize) {
        if self.messages.is_empty() {
            let n = max_msgs.min(1024);
            self.messages.reserve_exact(n);
            self.queue_offsets.reserve_exact(n);
        }
        self.total_bytes += slice.len();
        self.messages.push(slice);
        self.queue_offsets.push(at);
    }
}

/// Tag filter by hash, as the ConsumeQueue stores it. `None` = everything (`*`).
#[derive(Clone, Debug, Default)]
pub struct TagFilter {
    codes: Option<HashSet<i32>>,
}

impl TagFilter {
    pub fn all() -> TagFilter {
        TagFilter { codes: None }
    }
    /// From a subscription expression like `TagA || TagB`; `*`, empty or null means all.
    pub fn from_expression(expr: &str) -> TagFilter {
        let expr = expr.trim();
        if expr.is_empty() || expr == "*" {
            return TagFilter::all();
        }
        let codes = expr
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(java_string_hash)
            .collect();
        TagFilter { codes: Some(codes) }
    }
    pub fn from_codes(codes: impl IntoIterator<Item = i32>) -> TagFilter {
        TagFilter {
            codes: Some(codes.into_iter().collect()),
        }
    }
    #[inline]
    pub fn matches(&self, tags_code: i64) -> bool {
        match &self.codes {
            None => true,
            Some(set) => set.contains(&(tags_code as i32)),
        }
    }
}

/// Per-read limits: for records in memory (`max_*`: the request's caps with RocketMQ's
/// `maxTransfer*OnMessageInMemory`), and for records more than `hot_bytes` behind the CommitLog's
/// end (`*_on_disk`: the request's caps with `maxTransfer*OnMessageInDisk`;
/// `accessMessageInMemoryMaxRatio` of physical memory, RocketMQ's `checkInDiskByCommitOffset`). A
/// consumer far behind reads small batches, so it cannot push the page cache the producers and
/// the other consumers use out of memory.
#[derive(Clone, Copy, Debug)]
pub struct GetLimits {
    pub max_msgs: usize,
    pub max_bytes: usize,
    pub max_msgs_on_disk: usize,
    pub max_bytes_on_disk: usize,
    /// How far behind the CommitLog's end a record still counts as in memory.
    pub hot_bytes: u64,
}

impl Default for GetLimits {
    /// RocketMQ's defaults, with every record counted as in memory.
    fn default() -> Self {
        GetLimits {
            max_msgs: 32,
            max_bytes: 256 * 1024,
            max_msgs_on_disk: 8,
            max_bytes_on_disk: 64 * 1024,
            hot_bytes: u64::MAX,
        }
    }
}

impl GetLimits {
    /// RocketMQ's `isTheBatchFull`: may one more record of `size` bytes, `behind` bytes before
    /// the CommitLog's end, join `msgs` messages of `bytes` bytes? A first record always may.
    fn full(&self, msgs: usize, bytes: usize, size: usize, behind: u64) -> bool {
        if msgs == 0 || bytes == 0 {
            return false;
        }
        let (max_msgs, max_bytes) = if behind > self.hot_bytes {
            (self.max_msgs_on_disk, self.max_bytes_on_disk)
        } else {
            (self.max_msgs, self.max_bytes)
        };
        msgs >= max_msgs.max(1) || bytes + size > max_bytes
    }
}

#[derive(Clone)]
pub struct StoreReader {
    commit_log: FileQueueView,
    cqs: CqTable,
}

impl StoreReader {
    pub fn new(commit_log: FileQueueView, cqs: CqTable) -> StoreReader {
        StoreReader { commit_log, cqs }
    }
    pub fn commit_log(&self) -> &FileQueueView {
        &self.commit_log
    }
    pub fn consume_queues(&self) -> &CqTable {
        &self.cqs
    }
    pub fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<CqView>> {
        self.cqs.get(topic, queue_id)
    }

    /// One raw record by physical offset (VIEW_MESSAGE_BY_ID), if it is published and valid.
    pub fn record_at(&self, phy: PhyOffset) -> Option<ReadSlice> {
        let head = self.commit_log.read(phy.0, 4)?;
        let size = i32::from_be_bytes(head.as_bytes().try_into().ok()?);
        if size <= 0 {
            return None;
        }
        let s = self.commit_log.read(phy.0, size as usize)?;
        match record::check(s.as_bytes(), false) {
            Ok(Check::Record(_)) => Some(s),
            _ => None,
        }
    }

    /// Store time of the record at `phy` (reads only the header).
    pub fn store_time_at(&self, phy: PhyOffset) -> Option<i64> {
        let rec = self.record_at(phy)?;
        match record::check(rec.as_bytes(), false) {
            Ok(Check::Record(r)) => Some(r.store_timestamp),
            _ => None,
        }
    }

    pub fn max_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.queue(topic, queue_id)
            .map(|q| q.max_offset())
            .unwrap_or_default()
    }
    pub fn min_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.queue(topic, queue_id)
            .map(|q| q.min_offset())
            .unwrap_or_default()
    }

    /// Store time of the first message of the queue (GET_EARLIEST_MSG_STORETIME); `None` if empty.
    pub fn earliest_store_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let q = self.queue(topic, queue_id)?;
        let u = q.unit(q.min_offset())?;
        self.store_time_at(PhyOffset(u.phy_offset as u64))
    }

    /// Store time of the message at `offset` in (topic, queue); `None` if there is none.
    pub fn store_time_at_queue_offset(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> Option<i64> {
        let u = self.queue(topic, queue_id)?.unit(offset)?;
        self.store_time_at(PhyOffset(u.phy_offset as u64))
    }

    /// The queue offset for time `ts` (SEARCH_OFFSET_BY_TIMESTAMP, resets by time), by RocketMQ
    /// 4.9.4's rules (see [`CqView::offset_by_time`]): the message stored at `ts`, else the one
    /// nearest to it, the last one (max − 1) if every message is older, the first if every one
    /// is newer, 0 for an unknown or empty queue. Units whose message retention already deleted
    /// count as older than `ts` without a time of their own, as RocketMQ skips them: between the
    /// CommitLog's deletion and the queue's own cleanup they would otherwise end the search in the
    /// deleted prefix, and a consumer reset to a time would re-read the queue from its old start.
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, ts: i64) -> QueueOffset {
        let Some(q) = self.queue(topic, queue_id) else {
            return QueueOffset(0);
        };
        q.offset_by_time(ts, self.commit_log.min_offset(), |u| {
            self.store_time_at(PhyOffset(u.phy_offset as u64))
        })
    }

    /// Reads messages of (topic, queue) from `offset` (PULL), following RocketMQ's status and
    /// next-offset rules (`DefaultMessageStore.getMessage`): the next offset advances over every
    /// unit scanned, including tag-filtered ones.
    pub fn get_messages(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        limits: GetLimits,
        filter: &TagFilter,
    ) -> GetResult {
        let mut res = GetResult {
            status: GetStatus::NoMatchedLogicQueue,
            next_begin_offset: QueueOffset(0),
            min_offset: QueueOffset(0),
            max_offset: QueueOffset(0),
            messages: Vec::new(),
            queue_offsets: Vec::new(),
            total_bytes: 0,
            suggest_pulling_from_slave: false,
        };
        let Some(q) = self.queue(topic, queue_id) else {
            res.next_begin_offset = QueueOffset(0);
            return res;
        };
        let (min, max) = (q.min_offset(), q.max_offset());
        res.min_offset = min;
        res.max_offset = max;
        if max.0 == 0 {
            res.status = GetStatus::NoMessageInQueue;
            return res;
        }
        if offset < min {
            res.status = GetStatus::OffsetTooSmall;
            res.next_begin_offset = min;
            return res;
        }
        if offset == max {
            res.status = GetStatus::OffsetOverflowOne;
            res.next_begin_offset = offset;
            return res;
        }
        if offset > max {
            res.status = GetStatus::OffsetOverflowBadly;
            res.next_begin_offset = max;
            return res;
        }
        let max_msgs = limits.max_msgs.max(1);
        // RocketMQ scans at most max(16000, maxMsgNums * 20) ConsumeQueue bytes per pull.
        let max_scan_units = (16_000 / CQ_UNIT_SIZE).max(max_msgs);
        // Units are decoded in batches: first as many as a batch without filtered units needs
        // (one more than `max_msgs`: the unit that finds the batch full), then up to 1024 at a
        // time — not the whole scan budget (800 units) for a PULL that takes 32.
        let first_batch = max_msgs.saturating_add(1).min(1024);
        let mut units: Vec<CqUnit> = Vec::with_capacity(first_batch);
        let mut cur = offset;
        let mut scanned = 0usize;
        let mut removing = false;
        let log_end = self.commit_log.max_offset();
        // The physical offset of the last unit looked at, matched or not (RocketMQ's
        // `maxPhyOffsetPulling`), for the slave suggestion.
        let mut last_phy = 0u64;
        'scan: while scanned < max_scan_units && cur < max {
            units.clear();
            let batch = if scanned == 0 { first_batch } else { 1024 };
            q.units_from(cur, (max_scan_units - scanned).min(batch), &mut units);
            if units.is_empty() {
                if res.messages.is_empty() && scanned == 0 {
                    res.status = GetStatus::OffsetFoundNull;
                    res.next_begin_offset = q.next_file_start(cur).min(max);
                    return res;
                }
                break;
            }
            for u in &units {
                // A filler unit points at no record: it neither counts as on disk nor moves the
                // slave hint.
                let filler = u.size == i32::MAX;
                let phy = u.phy_offset as u64;
                if !filler {
                    last_phy = phy;
                }
                // Checked before the tag filter, as RocketMQ does: a full batch ends the scan
                // at this unit whether or not it would match.
                let size = if filler { 0 } else { u.size.max(0) as usize };
                let behind = if filler {
                    0
                } else {
                    log_end.saturating_sub(phy)
                };
                if limits.full(res.messages.len(), res.total_bytes, size, behind) {
                    break 'scan;
                }
                if filler || !filter.matches(u.tags_code) {
                    cur = cur.plus(1);
                    scanned += 1;
                    continue;
                }
                match self.commit_log.read(u.phy_offset as u64, u.size as usize) {
                    Some(slice) => res.push(slice, cur, max_msgs),
                    None => removing = true,
                }
                cur = cur.plus(1);
                scanned += 1;
            }
        }
        res.next_begin_offset = cur;
        res.suggest_pulling_from_slave = log_end.saturating_sub(last_phy) > limits.hot_bytes;
        res.status = if !res.messages.is_empty() {
            GetStatus::Found
        } else if removing {
            GetStatus::MessageWasRemoving
        } else {
            GetStatus::NoMatchedMessage
        };
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mapped_file::Warm;
    use crate::store::mapped_file_queue::MappedFileQueue;

    /// A record sent without a copy is still the record, byte for byte, when retention deletes
    /// its file between the read and the write (a reply queued behind a slow socket): the view
    /// keeps the unlinked file mapped, and the bytes it covers never change.
    #[test]
    fn mapped_bytes_outlive_a_file_deleted_by_retention() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096).unwrap();
        let first = q.create_and_push(0, Warm::No).unwrap();
        let record: Vec<u8> = (0..200u8).collect();
        unsafe { first.write_slice(0, 4096)[..200].copy_from_slice(&record) };
        first.publish_wrote(4096);
        let second = q.create_and_push(4096, Warm::No).unwrap();
        second.publish_wrote(0);
        let view = q.view();
        let bytes = mapped_bytes(view.read(0, 200).unwrap());
        let tail = bytes.slice(100..);
        assert_eq!(&bytes[..], &record[..]);
        let path = first.path().to_path_buf();
        drop(first);

        assert_eq!(q.delete_files(&q.files()[..1]).unwrap(), 1);
        assert!(!path.exists(), "unlinked");
        assert!(view.read(0, 200).is_none(), "no new view of a deleted file");
        assert_eq!(
            &bytes[..],
            &record[..],
            "the queued view reads the same bytes"
        );
        drop(bytes);
        assert_eq!(
            &tail[..],
            &record[100..],
            "a sub-slice keeps the file mapped too"
        );
    }
}
