//! ConsumeQueue: the per-(topic, queue id) index of 20-byte units pointing into the CommitLog
//! (RocketMQ's `ConsumeQueue`, store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java),
//! stored in `consumequeue/<topic>/<queueId>/<20-digit byte offset>` files.
//!
//! * [`ConsumeQueueStore`] is owned by the `ConsumeQueueBuilder` actor: it creates queues, appends
//!   units (with RocketMQ's duplicate and gap rules, so reput can replay safely), recovers and
//!   truncates them.
//! * [`CqTable`] is the readers' side: a cloneable, lock-free map from (topic, queue id) to
//!   [`CqView`], republished (copy-on-write) only when a queue is created or removed. Readers see a
//!   unit only once its 20 bytes are published.
//!
//! Invariant: unit `n` of a queue lives at byte `n * 20`; `max_offset` is the number of published
//! units (the next offset to be written) and `min_offset` the first unit that is not a pre-blank.
//! A gap before a unit is filled with blank units only if the records it stands for could lie
//! between the last unit's record and the new one, and a queue's first unit (no last one yet)
//! only at an offset the CommitLog before its record could hold; a queue offset past either (a
//! damaged QUEUEOFFSET, which the body CRC does not cover) is refused and logged, never filled.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::mapped_file::{map_jobs, sync_dir, MappedFile, ParallelIo, Sequential, Warm};
use super::mapped_file_queue::{FileQueueView, MappedFileQueue};
use super::queue_table::{QueueEnds, QueueMaxTable};
use crate::format::cq_unit::{CqUnit, CQ_UNIT_SIZE};
use crate::offset::QueueOffset;

/// Shared, read-only handle on one queue.
pub struct CqView {
    pub topic: Box<str>,
    pub queue_id: i32,
    files: FileQueueView,
    /// First valid unit index (units below are pre-blanks or were deleted by retention).
    min_logic: AtomicU64,
}

impl CqView {
    /// Next queue offset to be written (= number of units, counting the deleted prefix).
    pub fn max_offset(&self) -> QueueOffset {
        QueueOffset(self.files.max_offset() / CQ_UNIT_SIZE as u64)
    }
    pub fn min_offset(&self) -> QueueOffset {
        let min_files = self.files.min_offset() / CQ_UNIT_SIZE as u64;
        QueueOffset(self.min_logic.load(Ordering::Acquire).max(min_files))
    }
    /// The unit at `offset`, if published.
    pub fn unit(&self, offset: QueueOffset) -> Option<CqUnit> {
        let s = self
            .files
            .read(offset.0 * CQ_UNIT_SIZE as u64, CQ_UNIT_SIZE)?;
        CqUnit::decode(s.as_bytes())
    }
    /// Up to `max` consecutive units starting at `offset`, all in one file (a caller wanting more
    /// asks again at the returned end). Empty if `offset` is not published.
    pub fn units_from(&self, offset: QueueOffset, max: usize, out: &mut Vec<CqUnit>) {
        let pos = offset.0 * CQ_UNIT_SIZE as u64;
        let Some(file) = self.files.find(pos) else {
            return;
        };
        let bytes = file.read_from(pos - file.file_from_offset());
        for chunk in bytes.chunks_exact(CQ_UNIT_SIZE).take(max) {
            if let Some(u) = CqUnit::decode(chunk) {
                out.push(u);
            }
        }
    }
    /// Start of the CQ file after the one containing `offset` (for OFFSET_FOUND_NULL).
    pub fn next_file_start(&self, offset: QueueOffset) -> QueueOffset {
        let size = self.files.file_size();
        let pos = offset.0 * CQ_UNIT_SIZE as u64;
        QueueOffset((pos - pos % size + size) / CQ_UNIT_SIZE as u64)
    }
    /// The queue offset for time `ts` (SEARCH_OFFSET_BY_TIMESTAMP, and resets by time), by
    /// RocketMQ 4.9.4's rules (store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java
    /// `getOffsetInQueueByTime`): one file is searched — the first whose last unit's message is
    /// at or after `ts` (RocketMQ: the first whose modification time is), else the last — by
    /// binary search from the queue's min offset; a message stored exactly at `ts` is the answer
    /// (any one of several), else the nearer of its two neighbours (the earlier one on a tie),
    /// the first unit if every message is later and the *last* unit (max − 1) if every one is
    /// earlier. Units whose record is below `log_min` (retention deleted it) count as earlier,
    /// without a time; if the search meets only those and no later unit, RocketMQ's answer is
    /// the unit before the file. No unit published: 0; a unit whose record cannot be read: 0.
    /// `store_time_of` reads a unit's message store time from the CommitLog.
    pub fn offset_by_time(
        &self,
        ts: i64,
        log_min: u64,
        store_time_of: impl Fn(&CqUnit) -> Option<i64>,
    ) -> QueueOffset {
        let unit_size = CQ_UNIT_SIZE as u64;
        let files = self.files.files();
        let filled: Vec<_> = files
            .iter()
            .filter(|f| f.readable_position() >= unit_size)
            .collect();
        let time_of = |u: &CqUnit| {
            if (u.phy_offset as u64) < log_min {
                None
            } else {
                store_time_of(u)
            }
        };
        let last_unit_of = |f: &&Arc<super::mapped_file::MappedFile>| {
            let last = f.file_from_offset() + f.readable_position() / unit_size * unit_size;
            self.unit(QueueOffset(last / unit_size - 1))
        };
        let Some(file) = filled
            .iter()
            .find(|f| {
                last_unit_of(f)
                    .and_then(|u| time_of(&u))
                    .is_some_and(|t| t >= ts)
            })
            .or(filled.last())
        else {
            return QueueOffset(0);
        };
        let first = file.file_from_offset() / unit_size;
        let min = self.min_logic.load(Ordering::Acquire);
        let mut lo = min.saturating_sub(first) as i64;
        let mut hi = (file.readable_position() / unit_size) as i64 - 1;
        let (mut left, mut right) = (-1i64, -1i64);
        let (mut left_time, mut right_time) = (None, None);
        let mut exact = None;
        while hi >= lo {
            let mid = (lo + hi) / 2;
            let Some(u) = self.unit(QueueOffset(first + mid as u64)) else {
                return QueueOffset(0);
            };
            if (u.phy_offset as u64) < log_min {
                lo = mid + 1;
                left = mid;
                continue;
            }
            let Some(t) = store_time_of(&u) else {
                return QueueOffset(0);
            };
            match t.cmp(&ts) {
                std::cmp::Ordering::Equal => {
                    exact = Some(mid);
                    break;
                }
                std::cmp::Ordering::Greater => {
                    hi = mid - 1;
                    right = mid;
                    right_time = Some(t);
                }
                std::cmp::Ordering::Less => {
                    lo = mid + 1;
                    left = mid;
                    left_time = Some(t);
                }
            }
        }
        let at = match (exact, left_time, right_time) {
            (Some(m), _, _) => m,
            (None, None, _) => right,
            (None, Some(_), None) => left,
            // Java's Math.abs on the wrapped difference, so extreme times compare as there.
            (None, Some(l), Some(r)) => {
                if ts.wrapping_sub(l).wrapping_abs() > ts.wrapping_sub(r).wrapping_abs() {
                    right
                } else {
                    left
                }
            }
        };
        // `at` is -1 only when the search met no later unit and no timed earlier one; RocketMQ
        // then divides (file start − 1 byte) by the unit size, truncating towards zero.
        let byte =
            first as i64 * CQ_UNIT_SIZE as i64 + at * if at < 0 { 1 } else { CQ_UNIT_SIZE as i64 };
        QueueOffset((byte / CQ_UNIT_SIZE as i64).max(0) as u64)
    }
}

type TopicMap = HashMap<Box<str>, HashMap<i32, Arc<CqView>>>;

/// Lock-free lookup of queues for readers.
#[derive(Clone, Default)]
pub struct CqTable {
    map: Arc<ArcSwap<TopicMap>>,
}

impl CqTable {
    pub fn get(&self, topic: &str, queue_id: i32) -> Option<Arc<CqView>> {
        self.map.load().get(topic)?.get(&queue_id).cloned()
    }
    /// Every queue of `topic`, sorted by queue id.
    pub fn queues_of(&self, topic: &str) -> Vec<Arc<CqView>> {
        let m = self.map.load();
        let mut v: Vec<_> = m
            .get(topic)
            .map(|q| q.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by_key(|q| q.queue_id);
        v
    }
    pub fn topics(&self) -> Vec<String> {
        self.map.load().keys().map(|k| k.to_string()).collect()
    }
    fn remove_topic(&self, topic: &str) {
        let cur = self.map.load();
        let mut next: TopicMap = (**cur).clone();
        next.remove(topic);
        self.map.store(Arc::new(next));
    }
    fn insert(&self, view: Arc<CqView>) {
        let cur = self.map.load();
        let mut next: TopicMap = (**cur).clone();
        next.entry(view.topic.clone())
            .or_default()
            .insert(view.queue_id, view);
        self.map.store(Arc::new(next));
    }
}

/// One queue, owner side.
pub struct ConsumeQueue {
    files: MappedFileQueue,
    view: Arc<CqView>,
    /// One past the last CommitLog byte referenced by a unit (for reput dedup and recovery).
    max_physic_offset: u64,
    /// Files made ahead of the units that need them ([`ConsumeQueueStore::prepare_files`]),
    /// taken by the unit that starts each one.
    spares: Vec<Arc<MappedFile>>,
    /// Starts of files planned for this queue and not yet made ([`ConsumeQueueStore::plan_file`]).
    planned: Vec<u64>,
}

impl ConsumeQueue {
    pub fn view(&self) -> &Arc<CqView> {
        &self.view
    }
    pub fn max_physic_offset(&self) -> u64 {
        self.max_physic_offset
    }

    /// Writes the unit for queue offset `offset` (`ConsumeQueue.putMessagePositionInfo`). Units at
    /// or below what is already written are duplicates from a replay and are ignored; a gap is
    /// filled with pre-blanks so that unit `n` always sits at byte `n * 20`.
    pub fn put(&mut self, unit: CqUnit, offset: QueueOffset) -> io::Result<()> {
        self.put_with(unit, offset, true, false).map(|_| ())
    }

    /// [`ConsumeQueue::put`]; with `create` false, a unit that needs a file neither existing nor
    /// made ahead (a spare) is not written and [`Put::NoFile`] comes back — the builder then
    /// makes the files of its whole batch at once. Blank units of a gap written before that
    /// stay: the retry finds them as written. With `repair`, a replay is checked against the
    /// unit already written ([`ConsumeQueue::repair`]).
    fn put_with(
        &mut self,
        unit: CqUnit,
        offset: QueueOffset,
        create: bool,
        repair: bool,
    ) -> io::Result<Put> {
        let end = unit.phy_offset as u64 + unit.size as u64;
        // The builder never asks for an offset past `i64::MAX / 20` (a damaged QUEUEOFFSET);
        // should anything else, it is refused, never wrapped into some other position.
        let want = offset
            .0
            .checked_mul(CQ_UNIT_SIZE as u64)
            .filter(|w| *w <= i64::MAX as u64)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "ConsumeQueue {}/{}: queue offset {} has no unit position (the most is {})",
                        self.view.topic,
                        self.view.queue_id,
                        offset.0,
                        i64::MAX / CQ_UNIT_SIZE as i64
                    ),
                )
            })?;
        if end <= self.max_physic_offset {
            if repair && want < self.files.max_offset() {
                return self.repair(unit, offset);
            }
            return Ok(Put::Written);
        }
        if self.files.is_empty() && Self::before_its_records(want, &unit) {
            tracing::error!(
                topic = %self.view.topic,
                queue = self.view.queue_id,
                queue_offset = offset.0,
                phy_offset = unit.phy_offset,
                "CommitLog record's QUEUEOFFSET is more than the records before it could hold \
                 (damaged?): not dispatched"
            );
            return Ok(Put::Skipped);
        }
        let size = self.files.file_size();
        let mut cur = self.files.max_offset();
        if self.files.is_empty() {
            // First file of a queue that starts mid-way (after retention or a replay).
            let from = want - want % size;
            if !self.new_file(from, create)? {
                return Ok(Put::NoFile);
            }
            cur = from;
            if want > from {
                self.view.min_logic.store(offset.0, Ordering::Release);
            }
        }
        if want < cur {
            if repair {
                return self.repair(unit, offset);
            }
            return Ok(Put::Written);
        }
        if self.impossible_gap(want, cur, &unit) {
            tracing::error!(
                topic = %self.view.topic,
                queue = self.view.queue_id,
                queue_offset = offset.0,
                at = cur / CQ_UNIT_SIZE as u64,
                phy_offset = unit.phy_offset,
                "CommitLog record's QUEUEOFFSET is past any the records before it could fill \
                 (damaged?): not dispatched"
            );
            return Ok(Put::Skipped);
        }
        while cur < want {
            tracing::warn!(topic = %self.view.topic, queue = self.view.queue_id, expected = want / 20, at = cur / 20, "ConsumeQueue gap filled with blank units");
            if !self.write_at(cur, &CqUnit::PRE_BLANK.encode(), create)? {
                return Ok(Put::NoFile);
            }
            cur += CQ_UNIT_SIZE as u64;
        }
        if !self.write_at(cur, &unit.encode(), create)? {
            return Ok(Put::NoFile);
        }
        self.max_physic_offset = end;
        Ok(Put::Written)
    }

    /// Whether the unit at byte `want` could not be where `unit`'s record is: each offset below
    /// it is a record of this queue stored before this one (CommitLog offsets count from the
    /// first byte ever written, whatever retention deleted since), and none is shorter than
    /// [`MIN_RECORD_BYTES`]. Checked only for a queue with no file yet, whose first file could
    /// otherwise start anywhere — and every later unit, below that start, would be taken for a
    /// replay and never be dispatched. Not for a queue that has files: a store whose CommitLog
    /// was replaced under kept ConsumeQueues continues their offsets at a low physical offset,
    /// and refusing those units would lose every new message of the queue.
    fn before_its_records(want: u64, unit: &CqUnit) -> bool {
        want / CQ_UNIT_SIZE as u64 > (unit.phy_offset.max(0) as u64) / MIN_RECORD_BYTES
    }

    /// Whether the units missing between the queue's end (byte `cur`) and `want` could not have
    /// records: each would be a record of this queue between the end of the last unit's record
    /// and `unit`'s, and none is shorter than [`MIN_RECORD_BYTES`]. Such a gap is a damaged
    /// QUEUEOFFSET (it is outside the body CRC), and filling it with blank units could make
    /// ConsumeQueue files until the disk is full. Not for a queue with no unit yet: see
    /// [`ConsumeQueue::before_its_records`].
    fn impossible_gap(&self, want: u64, cur: u64, unit: &CqUnit) -> bool {
        if self.max_physic_offset == 0 || want <= cur {
            return false;
        }
        let gap = (want - cur) / CQ_UNIT_SIZE as u64;
        let room =
            (unit.phy_offset as u64).saturating_sub(self.max_physic_offset) / MIN_RECORD_BYTES;
        gap > room
    }

    /// A replay during recovery after an abnormal stop: `unit` (made from its CommitLog record)
    /// for an offset the queue already holds. If the unit written there differs, it is written
    /// again in place, and its file's flushed position lowered so that the next flush writes it.
    /// A unit can survive an abnormal stop torn and still look valid — offset and size whole,
    /// tagsCode (or, on the schedule topic, the delivery time) not: a power loss keeps some
    /// 512-byte sectors of an unsynced page and not others, and a process killed in the middle
    /// of the 20-byte copy leaves half of it. Skipped as a replay (RocketMQ skips it), it would
    /// filter its message by a wrong tag for good. No reader exists during recovery, so the
    /// published bytes may change. An offset below the queue's first file (retention) is left.
    fn repair(&mut self, unit: CqUnit, offset: QueueOffset) -> io::Result<Put> {
        let global = offset.0 * CQ_UNIT_SIZE as u64;
        let Some(file) = self.files.view().find(global) else {
            return Ok(Put::Written);
        };
        let pos = global - file.file_from_offset();
        let have = file.read(pos, CQ_UNIT_SIZE).and_then(CqUnit::decode);
        if have == Some(unit) {
            return Ok(Put::Written);
        }
        tracing::debug!(topic = %self.view.topic, queue = self.view.queue_id, offset = offset.0, ?have, want = ?unit, "ConsumeQueue unit differs from its CommitLog record: written again");
        // SAFETY: this queue is the file's only writer, and recovery runs before any reader
        // exists, so no one looks at these published bytes while they change.
        unsafe { file.rewrite_published(pos, &unit.encode()) };
        // The queue's last unit may be the one repaired (a torn size made it end early).
        self.max_physic_offset = self
            .max_physic_offset
            .max(unit.phy_offset as u64 + unit.size as u64);
        Ok(Put::Repaired)
    }

    /// Appends the file starting at `from`: the spare made for it, or (with `create`) a new one.
    /// `false`: neither.
    fn new_file(&mut self, from: u64, create: bool) -> io::Result<bool> {
        if let Some(i) = self
            .spares
            .iter()
            .position(|f| f.file_from_offset() == from)
        {
            let f = self.spares.remove(i);
            self.files.push(f)?;
        } else if create {
            // Say which file: "No space left on device" alone does not tell an operator which
            // disk (the root's, when the CommitLog has its own) ran out.
            let size = self.files.file_size();
            self.files.create_and_push(from, Warm::No).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot create ConsumeQueue file {} ({size} bytes): {e}",
                        self.files.dir().join(format!("{from:020}")).display()
                    ),
                )
            })?;
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Plans, in order, every file the unit for `offset` would need that neither exists, nor is
    /// spare, nor planned: the one holding it, and those before it that only a gap's blank units
    /// fill (all of them, so that files made ahead never leave a hole between two files on disk,
    /// which the next start would refuse). Nothing for a duplicate. Returns whether it planned.
    fn plan_files_for(&mut self, unit: &CqUnit, offset: QueueOffset) -> bool {
        let end = unit.phy_offset as u64 + unit.size as u64;
        if end <= self.max_physic_offset {
            return false;
        }
        let size = self.files.file_size();
        // No position, no file to plan: `put_with` refuses that unit with the reason.
        let Some(want) = offset.0.checked_mul(CQ_UNIT_SIZE as u64) else {
            return false;
        };
        if (self.files.is_empty() && Self::before_its_records(want, unit))
            || self.impossible_gap(want, self.files.max_offset(), unit)
        {
            return false;
        }
        let from = want - want % size;
        // The first file to make: the one after the last known or planned (with none, the
        // unit's own: a queue's first file may start mid-way, as `put` makes it).
        let next = self
            .planned
            .last()
            .copied()
            .into_iter()
            .chain(self.spares.iter().map(|f| f.file_from_offset()))
            .chain(self.files.last().map(|f| f.file_from_offset()))
            .max()
            .map_or(from, |last| last + size);
        let before = self.planned.len();
        self.planned.extend((next..=from).step_by(size as usize));
        self.planned.len() > before
    }

    fn write_at(
        &mut self,
        global: u64,
        bytes: &[u8; CQ_UNIT_SIZE],
        create: bool,
    ) -> io::Result<bool> {
        let size = self.files.file_size();
        let mut file = match self.files.last() {
            Some(f) if global < f.file_from_offset() + size => f,
            _ => {
                if !self.new_file(global - global % size, create)? {
                    return Ok(false);
                }
                self.files.last().expect("just appended")
            }
        };
        if global < file.file_from_offset() {
            file = self.files.view().find(global).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "unit position before the queue",
                )
            })?;
        }
        let pos = global - file.file_from_offset();
        // SAFETY: this queue is the file's only writer and `pos` is its write position.
        unsafe { file.write_slice(pos, CQ_UNIT_SIZE).copy_from_slice(bytes) };
        file.publish_wrote(pos + CQ_UNIT_SIZE as u64);
        Ok(true)
    }

    /// Recovery (`ConsumeQueue.recover`): scan from the third-last file that holds a unit, stop at
    /// the first invalid unit, cut the queue there. Returns the number of valid units.
    ///
    /// RocketMQ scans from the third-last file. After a power loss a queue can end in more than
    /// two files whose units are all zeros: the files were created and sized on the device, their
    /// units were lost with the page cache (each holds 300,000 units by default, but
    /// `mappedFileSizeConsumeQueue` can make them small). Scanning from the third-last file would
    /// then start past the last unit that survived and count the zeros before it as units, and
    /// re-dispatch would skip those queue offsets as already written: holes a consumer cannot
    /// read. So trailing files whose first unit is zeros are left out when picking the start.
    pub fn recover(&mut self) -> io::Result<QueueOffset> {
        self.recover_with(None)
    }

    /// [`ConsumeQueue::recover`] after a crash: `unsynced_from` is where CommitLog recovery
    /// starts, the offset before which the checkpoint says every unit was flushed. Units of
    /// records from there on may be lost in any file that holds them, not only in the last
    /// three: the files of a killed process's last second are dirty in the page cache, the next
    /// start's cut syncs only the last one, and write-back order is the kernel's — a power loss
    /// then leaves files of zeros followed by one that is whole. So the scan also starts no later
    /// than the last file whose first unit points before `unsynced_from` (a binary search: one
    /// unit read per step). A valid-looking unit that starts before the previous one ends was
    /// torn too (its offset lost): the queue ends there. Units torn in their tagsCode or size
    /// still look right to the scan: re-dispatch checks each unit it replays and writes it again
    /// if it differs ([`ConsumeQueueStore::set_repairing`]).
    pub fn recover_with(&mut self, unsynced_from: Option<u64>) -> io::Result<QueueOffset> {
        let files = self.files.files();
        let size = self.files.file_size();
        let first_unit = |f: &Arc<super::mapped_file::MappedFile>| {
            f.read(0, CQ_UNIT_SIZE).and_then(CqUnit::decode)
        };
        let held = files
            .iter()
            .rposition(|f| first_unit(f).is_some_and(|u| u.is_valid() || u == CqUnit::PRE_BLANK))
            .map_or(0, |i| i + 1);
        let mut start = held.saturating_sub(3);
        if let Some(from) = unsynced_from {
            // Monotonic: the checkpoint counts a unit only once every unit before it is flushed
            // (`ConsumeQueueBuilder`), so files lost or torn after a crash hold only units of
            // records at or past `from`, and so do all files after them.
            let flushed = files[..held].partition_point(|f| {
                first_unit(f).is_some_and(|u| {
                    u == CqUnit::PRE_BLANK || (u.is_valid() && (u.phy_offset as u64) < from)
                })
            });
            start = start.min(flushed.saturating_sub(1));
        }
        let mut end = files.get(start).map(|f| f.file_from_offset()).unwrap_or(0);
        let mut max_phy = 0u64;
        'files: for f in &files[start..] {
            let mut pos = 0;
            while pos + CQ_UNIT_SIZE as u64 <= size {
                let u = f.read(pos, CQ_UNIT_SIZE).and_then(CqUnit::decode);
                match u {
                    // Units are written in CommitLog order, so each starts at or past the end of
                    // the one before. One that does not is torn (a power loss kept the sector
                    // with its size and tagsCode and lost the one with its offset, now zeros or
                    // half of it): the queue ends before it, like at a zero unit, and
                    // re-dispatch writes it again. Kept, it would point at another message —
                    // and survive even a CommitLog cut, which only looks at the queue's end.
                    Some(u) if u.is_valid() && (u.phy_offset as u64) < max_phy => {
                        end = f.file_from_offset() + pos;
                        break 'files;
                    }
                    Some(u) if u.is_valid() => {
                        max_phy = u.phy_offset as u64 + u.size as u64;
                        pos += CQ_UNIT_SIZE as u64;
                    }
                    Some(u) if u == CqUnit::PRE_BLANK => pos += CQ_UNIT_SIZE as u64,
                    _ => {
                        end = f.file_from_offset() + pos;
                        break 'files;
                    }
                }
            }
            end = f.file_from_offset() + size;
        }
        self.files.truncate_dirty(end)?;
        self.max_physic_offset = max_phy;
        Ok(QueueOffset(end / CQ_UNIT_SIZE as u64))
    }

    /// Drops units that point at or beyond CommitLog offset `phy` (the CommitLog was truncated).
    pub fn truncate_to_phy(&mut self, phy: u64) -> io::Result<()> {
        let view = self.files.view();
        let mut lo = self.view.min_offset().0;
        let mut hi = self.view.max_offset().0;
        // Units are in CommitLog order, so binary search the first unit with phy_offset >= phy.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let u = view
                .read(mid * CQ_UNIT_SIZE as u64, CQ_UNIT_SIZE)
                .and_then(|s| CqUnit::decode(s.as_bytes()));
            match u {
                Some(u) if u.size == i32::MAX || (u.phy_offset as u64) < phy => lo = mid + 1,
                _ => hi = mid,
            }
        }
        self.files.truncate_dirty(lo * CQ_UNIT_SIZE as u64)?;
        let last = lo
            .checked_sub(1)
            .and_then(|i| self.view.unit(QueueOffset(i)));
        self.max_physic_offset = last
            .filter(|u| u.is_valid())
            .map(|u| u.phy_offset as u64 + u.size as u64)
            .unwrap_or(0);
        Ok(())
    }

    /// Retention (RocketMQ's `ConsumeQueue.deleteExpiredFile` then `correctMinOffset`): deletes the
    /// files, oldest first and never the last, whose last unit points below CommitLog offset
    /// `min_phy` (the CommitLog's first byte after its own retention), stopping at the first
    /// that does not; then moves the queue's min offset to its first unit at or past `min_phy`,
    /// so consumers are told OFFSET_TOO_SMALL instead of reading units whose messages are gone.
    /// Returns how many files were deleted.
    pub fn delete_below(&mut self, min_phy: u64) -> io::Result<usize> {
        let files = self.files.files();
        let n = self.files_below(&files, min_phy);
        let deleted = self.files.delete_files(&files[..n])?;
        self.correct_min_offset(min_phy);
        Ok(deleted)
    }

    /// How many files, oldest first and never the last, have their last real unit pointing below
    /// `min_phy`: the ones retention deletes. Pre-blanks (a gap filled at a replay) decide
    /// nothing, and a file of blanks only counts too.
    fn files_below(&self, files: &[Arc<MappedFile>], min_phy: u64) -> usize {
        let size = self.files.file_size();
        let last_real_below = |f: &Arc<MappedFile>| {
            (0..size / CQ_UNIT_SIZE as u64)
                .rev()
                .filter_map(|i| f.read(i * CQ_UNIT_SIZE as u64, CQ_UNIT_SIZE))
                .filter_map(CqUnit::decode)
                .find(|u| *u != CqUnit::PRE_BLANK)
                .is_none_or(|u| u.is_valid() && (u.phy_offset as u64) < min_phy)
        };
        files[..files.len().saturating_sub(1)]
            .iter()
            .take_while(|f| last_real_below(f))
            .count()
    }

    /// Sets the min offset to the first unit whose message starts at or past `min_phy`, or to
    /// the end of the last file when none does. Never moves it back. The search skips the files
    /// retention would delete ([`files_below`](Self::files_below)) — at a start after a stop or
    /// crash between deleting CommitLog files and their ConsumeQueue files they are still there
    /// (RocketMQ looks in the first file only and would leave the min offset pointing at deleted
    /// messages) — then is a binary search over one file: units are in CommitLog order.
    pub fn correct_min_offset(&mut self, min_phy: u64) {
        let files = self.files.files();
        let Some(first) = files.get(self.files_below(&files, min_phy)).cloned() else {
            return;
        };
        let base = first.file_from_offset() / CQ_UNIT_SIZE as u64;
        let units = first.readable_position() / CQ_UNIT_SIZE as u64;
        // Whether unit `i` lies before the first real unit backed by the CommitLog: a pre-blank
        // is judged by the real unit before it (below, if none), so blanks keep the search sorted
        // and the min offset lands on a real unit, never on a blank.
        let below = |i: u64| {
            (0..=i)
                .rev()
                .filter_map(|j| first.read(j * CQ_UNIT_SIZE as u64, CQ_UNIT_SIZE))
                .filter_map(CqUnit::decode)
                .find(|u| *u != CqUnit::PRE_BLANK)
                .is_none_or(|u| (u.phy_offset as u64) < min_phy)
        };
        let (mut lo, mut hi) = (0, units);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.view.min_logic.fetch_max(base + lo, Ordering::AcqRel);
    }

    /// Flushes (RocketMQ's page rule, `MappedFile.isAbleToFlush`) and returns how many units are
    /// now on disk.
    pub fn flush(&self, least_pages: u64) -> io::Result<QueueOffset> {
        Ok(QueueOffset(
            self.files.flush(least_pages)? / CQ_UNIT_SIZE as u64,
        ))
    }
}

/// Where a retention pass over the ConsumeQueues is ([`ConsumeQueueStore::retention_pass`]).
pub struct RetentionPass {
    min_phy: u64,
    keys: Vec<(Box<str>, i32)>,
    next: usize,
    failed: Option<io::Error>,
}

impl RetentionPass {
    /// The CommitLog offset the pass deletes below.
    pub fn min_phy(&self) -> u64 {
        self.min_phy
    }

    /// Every queue of the pass has been worked on.
    pub fn is_done(&self) -> bool {
        self.next >= self.keys.len()
    }

    /// The pass's outcome: the last queue error, if any.
    pub fn finish(self) -> io::Result<()> {
        self.failed.map_or(Ok(()), Err)
    }
}

/// What a put did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Put {
    /// Written, or a replay of what is written.
    Written,
    /// A replay that differed from what was written, written again (recovery repair).
    Repaired,
    /// Not written: the unit's file is neither there nor made ahead (`create` false).
    NoFile,
    /// Not written, and never will be: its queue offset is impossible (see
    /// [`ConsumeQueue::impossible_gap`] and [`ConsumeQueue::before_its_records`]); the record is
    /// left out, as a damaged one.
    Skipped,
}

/// The shortest CommitLog record there is (v1, IPv4 hosts, a one-byte topic, no body, no
/// properties): a bound on how many records fit between two physical offsets.
const MIN_RECORD_BYTES: u64 =
    crate::format::record::record_len_parts(0, 1, 0, 0, crate::format::record::MessageVersion::V1)
        as u64;

/// Every ConsumeQueue of the store, owner side.
pub struct ConsumeQueueStore {
    root: PathBuf,
    file_size: u64,
    queues: HashMap<Box<str>, HashMap<i32, ConsumeQueue>>,
    table: CqTable,
    /// Queues with planned files ([`ConsumeQueueStore::plan_file`]).
    planning: Vec<(Box<str>, i32)>,
    /// Directories that gained a topic or queue directory since the last flush: synced by the
    /// next, before it counts any unit as on disk.
    new_dirs: Vec<PathBuf>,
    /// Recovery after an abnormal stop: a unit put again is compared with the one written, and
    /// rewritten if they differ ([`ConsumeQueue::repair`]); how many were.
    repairing: bool,
    repaired: u64,
    /// Queues cut at a gap at load, with the files after it (still on disk): see
    /// [`ConsumeQueueStore::take_cuts`]. `None` once taken: a queue opened later (at runtime)
    /// and cut deletes its later files at once.
    cuts: Option<Vec<CutQueue>>,
    /// How batches of file creations and syncs run ([`ConsumeQueueStore::set_parallel_io`]).
    io: Arc<dyn ParallelIo>,
}

/// A queue cut at load where a file was missing between two others (an operator, a disk fault):
/// it ends where its contiguous part does. The files after the gap are still on disk, and
/// `floor` is the unit count they show the queue had, so recovery can rebuild the queue from the
/// CommitLog up to there — gap included — whether or not the queue table knew the queue.
pub struct CutQueue {
    pub topic: String,
    pub queue_id: i32,
    /// Units the queue had on disk: past the last valid unit of the cut files.
    pub floor: u64,
    /// CommitLog offset of the newest unit in the cut files (to tell a deleted topic's leftover).
    pub last_phy: Option<u64>,
    files: Vec<Arc<MappedFile>>,
}

impl CutQueue {
    /// Deletes the cut files (the caller has recorded `floor` durably first); their paths.
    pub fn remove_files(self) -> io::Result<Vec<PathBuf>> {
        let mut removed = Vec::with_capacity(self.files.len());
        for f in self.files {
            let path = f.path().to_path_buf();
            // Unmapped first (the only reference), then unlinked. Gone already is fine: the
            // table holds the floor, so a start that died halfway redoes the rest.
            drop(f);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "removing ConsumeQueue file {} after a missing one: {e}",
                            path.display()
                        ),
                    ))
                }
            }
            removed.push(path);
        }
        Ok(removed)
    }
}

impl ConsumeQueueStore {
    /// Loads every `consumequeue/<topic>/<qid>/` directory (non-numeric queue dirs skipped).
    /// `file_size` is rounded up to a multiple of 20 as RocketMQ does.
    pub fn load(root: &Path, file_size: u64) -> io::Result<ConsumeQueueStore> {
        let file_size = file_size.div_ceil(CQ_UNIT_SIZE as u64) * CQ_UNIT_SIZE as u64;
        std::fs::create_dir_all(root)?;
        let mut store = ConsumeQueueStore {
            root: root.to_path_buf(),
            file_size,
            queues: HashMap::new(),
            table: CqTable::default(),
            planning: Vec::new(),
            new_dirs: Vec::new(),
            repairing: false,
            repaired: 0,
            cuts: Some(Vec::new()),
            io: Arc::new(Sequential),
        };
        for topic_dir in std::fs::read_dir(root)? {
            let topic_dir = topic_dir?;
            if !topic_dir.file_type()?.is_dir() {
                continue;
            }
            let Some(topic) = topic_dir.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            for q in std::fs::read_dir(topic_dir.path())? {
                let q = q?;
                let Some(qid) = q.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                store.open_queue(&topic, qid)?;
            }
        }
        Ok(store)
    }

    /// Runs batches of blocking file-system calls — the files of [`prepare_files`], the syncs of
    /// [`flush`] and [`sync_all`] — through `io` (the runtime overlaps them on threads); one
    /// after another until set.
    ///
    /// [`prepare_files`]: ConsumeQueueStore::prepare_files
    /// [`flush`]: ConsumeQueueStore::flush
    /// [`sync_all`]: ConsumeQueueStore::sync_all
    pub fn set_parallel_io(&mut self, io: Arc<dyn ParallelIo>) {
        self.io = io;
    }

    /// The queues cut at a gap at load (see [`CutQueue`]), handed over once.
    pub fn take_cuts(&mut self) -> Vec<CutQueue> {
        self.cuts.take().unwrap_or_default()
    }

    pub fn table(&self) -> CqTable {
        self.table.clone()
    }
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    fn open_queue(&mut self, topic: &str, queue_id: i32) -> io::Result<&mut ConsumeQueue> {
        let topic_dir = self.root.join(topic);
        let dir = topic_dir.join(queue_id.to_string());
        // A directory made here is named by an entry in its parent, which only a sync of the
        // parent makes durable (see `flush`).
        let (new_topic, new_queue) = (!topic_dir.exists(), !dir.exists());
        // Name the directory: on a full ext4 or xfs disk, the `mkdir` of a new queue is what
        // fails first (a directory needs a block), and the error alone names no path.
        // A file missing between two others (an operator, a disk fault) cuts the queue at the
        // gap: the later files go, and recovery finds the queue shorter than the queue table and
        // rebuilds it from the CommitLog (see `queue_table`), gap included.
        let (files, cut) = MappedFileQueue::load_cut_at_gap(&dir, self.file_size).map_err(|e| {
            if new_queue {
                io::Error::new(
                    e.kind(),
                    format!("cannot make ConsumeQueue directory {}: {e}", dir.display()),
                )
            } else {
                e
            }
        })?;
        if let Some(first) = cut.first() {
            // The unit count the files after the gap show: past the last valid (or blank-filler)
            // unit of each, counted from its start. An empty file counts up to its start: it was
            // made because the units before it were there.
            let (mut floor, mut last_phy) = (0u64, None);
            for f in &cut {
                let mut units = 0u64;
                for i in 0..self.file_size / CQ_UNIT_SIZE as u64 {
                    match f
                        .read(i * CQ_UNIT_SIZE as u64, CQ_UNIT_SIZE)
                        .and_then(CqUnit::decode)
                    {
                        Some(u) if u.is_valid() => {
                            last_phy = last_phy.max(Some(u.phy_offset as u64));
                            units += 1;
                        }
                        Some(u) if u == CqUnit::PRE_BLANK => units += 1,
                        _ => break,
                    }
                }
                floor = floor.max(f.file_from_offset() / CQ_UNIT_SIZE as u64 + units);
            }
            tracing::error!(
                dir = %dir.display(),
                missing_before = %first.path().display(),
                files_after_gap = cut.len(),
                units_on_disk = floor,
                "a ConsumeQueue file is missing between two others; the queue is cut at the gap \
                 and rebuilt from the CommitLog up to the units the later files show"
            );
            let c = CutQueue {
                topic: topic.to_string(),
                queue_id,
                floor,
                last_phy,
                files: cut,
            };
            match self.cuts.as_mut() {
                Some(cuts) => cuts.push(c),
                // Opened after the start's recovery (a directory left behind): nothing will
                // rebuild it from here, so it is served as far as it is contiguous.
                None => {
                    c.remove_files()?;
                }
            }
        }
        // RocketMQ makes ConsumeQueue files on demand: the last one on disk is the one units go on
        // in (see `MappedFileQueue::reserve_last`).
        files.reserve_last()?;
        if new_topic && !self.new_dirs.contains(&self.root) {
            self.new_dirs.push(self.root.clone());
        }
        if new_queue && !self.new_dirs.contains(&topic_dir) {
            self.new_dirs.push(topic_dir);
        }
        let view = Arc::new(CqView {
            topic: topic.into(),
            queue_id,
            files: files.view(),
            min_logic: AtomicU64::new(0),
        });
        self.table.insert(view.clone());
        let cq = ConsumeQueue {
            files,
            view,
            max_physic_offset: 0,
            spares: Vec::new(),
            planned: Vec::new(),
        };
        let per_topic = self.queues.entry(topic.into()).or_default();
        Ok(per_topic.entry(queue_id).or_insert(cq))
    }

    /// The queue, created on first use.
    pub fn queue_mut(&mut self, topic: &str, queue_id: i32) -> io::Result<&mut ConsumeQueue> {
        let exists = self
            .queues
            .get(topic)
            .is_some_and(|m| m.contains_key(&queue_id));
        if !exists {
            return self.open_queue(topic, queue_id);
        }
        Ok(self
            .queues
            .get_mut(topic)
            .and_then(|m| m.get_mut(&queue_id))
            .expect("checked above"))
    }

    pub fn put(
        &mut self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        unit: CqUnit,
    ) -> io::Result<()> {
        self.put_with(topic, queue_id, offset, unit, true)
            .map(|_| ())
    }

    fn put_with(
        &mut self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        unit: CqUnit,
        create: bool,
    ) -> io::Result<bool> {
        let repair = self.repairing;
        let q = self.queue_mut(topic, queue_id)?;
        let written = q.put_with(unit, offset, create, repair)?;
        if written == Put::Repaired {
            self.repaired += 1;
        }
        Ok(written != Put::NoFile)
    }

    /// Recovery after an abnormal stop (`on`): until turned off, a unit put at a queue offset
    /// that already holds one is compared with it and written again if they differ, instead of
    /// being skipped as a replay — a unit can survive the stop torn (see
    /// [`ConsumeQueue::repair`]). Only while no reader exists. Returns how many units were
    /// rewritten since the last call.
    pub fn set_repairing(&mut self, on: bool) -> u64 {
        self.repairing = on;
        std::mem::take(&mut self.repaired)
    }

    /// [`ConsumeQueueStore::put`] unless the unit needs a file not made yet: then nothing is
    /// written and `false` comes back (see [`ConsumeQueueStore::plan_file`]).
    pub fn put_if_file_ready(
        &mut self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        unit: CqUnit,
    ) -> io::Result<bool> {
        self.put_with(topic, queue_id, offset, unit, false)
    }

    /// Notes the file the unit for `offset` of `topic`/`queue_id` will need, if it is not made
    /// yet, for [`ConsumeQueueStore::prepare_files`]. The builder calls it for the rest of a
    /// batch once a unit found its file missing, so that a new topic's queues (1,000 files, two
    /// `fsync`s each) are made together instead of one after another on its thread.
    pub fn plan_file(
        &mut self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        unit: &CqUnit,
    ) -> io::Result<()> {
        let q = self.queue_mut(topic, queue_id)?;
        let listed = !q.planned.is_empty();
        if q.plan_files_for(unit, offset) && !listed {
            self.planning.push((topic.into(), queue_id));
        }
        Ok(())
    }

    /// Makes every planned file, queues side by side (one job each through the store's
    /// [`ParallelIo`]) and each queue's files in order, one after the other, stopping at its
    /// first failure: so
    /// on disk a queue's files never have a hole, whatever fails or wherever a crash cuts. Each
    /// becomes its queue's spare, taken by the unit that starts it. A file not made is left to
    /// [`ConsumeQueueStore::put`], which makes it when its unit comes and reports its error
    /// there. Returns how many files were made.
    pub fn prepare_files(&mut self) -> usize {
        let mut jobs = Vec::new();
        for (topic, queue_id) in std::mem::take(&mut self.planning) {
            let Some(q) = self.existing_mut(&topic, queue_id) else {
                continue;
            };
            if !q.planned.is_empty() {
                let dir = q.files.dir().to_path_buf();
                jobs.push((topic, queue_id, dir, std::mem::take(&mut q.planned)));
            }
        }
        let size = self.file_size;
        let made = map_jobs(&*self.io, &jobs, |(_, _, dir, froms)| {
            froms
                .iter()
                .map_while(|&from| MappedFile::create(dir, from, size, Warm::No).ok())
                .collect::<Vec<_>>()
        });
        let mut n = 0;
        for ((topic, queue_id, _, _), files) in jobs.into_iter().zip(made) {
            let Some(q) = self.existing_mut(&topic, queue_id) else {
                continue;
            };
            n += files.len();
            q.spares.extend(files.into_iter().map(Arc::new));
        }
        n
    }

    /// Drops every queue of `topic` (DELETE_TOPIC_IN_BROKER): readers stop finding them at once
    /// (a reader still holding a view keeps its mapping until it lets go), then the
    /// `consumequeue/<topic>` directory is removed. Returns how many queues there were.
    pub fn delete_topic(&mut self, topic: &str) -> io::Result<usize> {
        let n = self.queues.remove(topic).map_or(0, |m| m.len());
        self.table.remove_topic(topic);
        let dir = self.root.join(topic);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(n)
    }

    /// Recovers every queue; returns the highest CommitLog offset any unit references.
    pub fn recover(&mut self) -> io::Result<u64> {
        self.recover_with(None)
    }

    /// [`ConsumeQueueStore::recover`] after a crash, with CommitLog recovery starting at
    /// `unsynced_from` (see [`ConsumeQueue::recover_with`]).
    pub fn recover_with(&mut self, unsynced_from: Option<u64>) -> io::Result<u64> {
        let mut max = 0;
        for q in self.queues.values_mut().flat_map(|m| m.values_mut()) {
            q.recover_with(unsynced_from)?;
            max = max.max(q.max_physic_offset());
        }
        Ok(max)
    }

    pub fn truncate_to_phy(&mut self, phy: u64) -> io::Result<()> {
        for q in self.queues.values_mut().flat_map(|m| m.values_mut()) {
            if q.max_physic_offset() > phy {
                q.truncate_to_phy(phy)?;
            }
        }
        Ok(())
    }

    /// Retention of every queue below CommitLog offset `min_phy` ([`ConsumeQueue::delete_below`]);
    /// returns how many files were deleted. A queue that fails is reported after the others ran.
    pub fn delete_below(&mut self, min_phy: u64) -> io::Result<usize> {
        let mut pass = self.retention_pass(min_phy);
        let deleted = self.delete_below_step(&mut pass, false);
        pass.finish().map(|()| deleted)
    }

    /// A retention pass over every queue now loaded, in name order, to be worked through by
    /// [`delete_below_step`](Self::delete_below_step) — in steps, so that its owner can pause
    /// between queues (`deleteConsumeQueueFilesInterval`) and dispatch in between.
    pub fn retention_pass(&self, min_phy: u64) -> RetentionPass {
        let mut keys: Vec<(Box<str>, i32)> = self
            .queues
            .iter()
            .flat_map(|(t, m)| m.keys().map(move |q| (t.clone(), *q)))
            .collect();
        keys.sort_unstable();
        RetentionPass {
            min_phy,
            keys,
            next: 0,
            failed: None,
        }
    }

    /// Works through `pass`: each queue's files below its `min_phy` go
    /// ([`ConsumeQueue::delete_below`]). With `stop_after_deleting` it returns after the first
    /// queue that deleted a file; otherwise at the end. Returns the files deleted in this step.
    /// A queue removed since the pass began is skipped (its files went with it); one made since
    /// is not in the pass (its units are all newer than the CommitLog's first byte). A queue's
    /// error is kept for [`RetentionPass::finish`] and the pass goes on.
    pub fn delete_below_step(
        &mut self,
        pass: &mut RetentionPass,
        stop_after_deleting: bool,
    ) -> usize {
        let mut deleted = 0;
        while let Some((topic, queue)) = pass.keys.get(pass.next) {
            pass.next += 1;
            let Some(q) = self.queues.get_mut(topic).and_then(|m| m.get_mut(queue)) else {
                continue;
            };
            match q.delete_below(pass.min_phy) {
                Ok(n) => deleted += n,
                Err(e) => pass.failed = Some(e),
            }
            if stop_after_deleting && deleted > 0 {
                break;
            }
        }
        deleted
    }

    /// At load: every queue's min offset moved to its first unit whose message the CommitLog
    /// still holds (its first byte is `min_phy`), as RocketMQ's `correctMinOffset`.
    pub fn correct_min_offsets(&mut self, min_phy: u64) {
        for q in self.queues.values_mut().flat_map(|m| m.values_mut()) {
            q.correct_min_offset(min_phy);
        }
    }

    /// Next queue offset of every queue, for the CommitLog writer's topic-queue table.
    pub fn max_offsets(&self) -> Vec<(String, i32, QueueOffset)> {
        self.queues
            .iter()
            .flat_map(|(t, m)| {
                m.values()
                    .map(move |q| (t.to_string(), q.view.queue_id, q.view.max_offset()))
            })
            .collect()
    }

    pub fn max_physic_offset(&self) -> u64 {
        self.queues
            .values()
            .flat_map(|m| m.values())
            .map(|q| q.max_physic_offset())
            .max()
            .unwrap_or(0)
    }

    /// Flushes every queue; returns each queue's units now on disk — a lower bound of what a
    /// later start finds, persisted as the [`QueueMaxTable`] recovery checks against.
    ///
    /// First it syncs the directories that gained a topic or queue directory: a file's own sync
    /// makes its name durable in its queue directory, not that directory's name in the topic's
    /// (ext4 without a journal happens to sync new parents with the file; POSIX promises
    /// nothing). One `fsync` per new topic per flush, not per queue.
    pub fn flush(&mut self, least_pages: u64) -> io::Result<QueueMaxTable> {
        let dirs = std::mem::take(&mut self.new_dirs);
        // In any order: all of them are durable before any unit is counted.
        let synced = map_jobs(&*self.io, &dirs, |d| match sync_dir(d) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()), // a deleted topic's
            r => r.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", d.display()))),
        });
        if let Some(e) = synced.into_iter().find_map(Result::err) {
            self.new_dirs = dirs;
            return Err(e);
        }
        let mut on_disk = QueueMaxTable::default();
        for q in self.queues() {
            let units = q.flush(least_pages)?;
            on_disk.insert(&q.view.topic, q.view.queue_id, units.0);
        }
        Ok(on_disk)
    }

    /// `fdatasync` of every ConsumeQueue file, whatever the tracked flushed positions say. For
    /// recovery: units a crashed process wrote may still be dirty in the page cache, and a loaded
    /// file counts as flushed to its end, so [`ConsumeQueueStore::flush`] would not write them.
    /// Files are synced through the store's [`ParallelIo`]: a store of 1,000 queues has 1,000
    /// files or more, and this runs once per crashed start, before re-dispatch.
    pub fn sync_all(&self) -> io::Result<()> {
        let files: Vec<_> = self
            .queues()
            .flat_map(|q| q.files.files().iter().cloned().collect::<Vec<_>>())
            .collect();
        map_jobs(&*self.io, &files, |f| f.sync_data())
            .into_iter()
            .collect()
    }

    /// Every queue, in no particular order.
    pub fn queues(&self) -> impl Iterator<Item = &ConsumeQueue> {
        self.queues.values().flat_map(|m| m.values())
    }

    /// The queue, if it exists (never created here).
    fn existing_mut(&mut self, topic: &str, queue_id: i32) -> Option<&mut ConsumeQueue> {
        self.queues.get_mut(topic)?.get_mut(&queue_id)
    }

    /// The queue, if it exists.
    pub fn queue(&self, topic: &str, queue_id: i32) -> Option<&ConsumeQueue> {
        self.queues.get(topic)?.get(&queue_id)
    }
}

impl QueueEnds for ConsumeQueueStore {
    fn each_end(&self, f: &mut dyn FnMut(&str, i32, u64, u64)) {
        for q in self.queues() {
            let v = q.view();
            f(
                &v.topic,
                v.queue_id,
                v.max_offset().0,
                q.max_physic_offset(),
            );
        }
    }

    fn end_of(&self, topic: &str, queue_id: i32) -> Option<(u64, u64)> {
        self.queue(topic, queue_id)
            .map(|q| (q.view().max_offset().0, q.max_physic_offset()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 100-byte unit at `phy` (tags code 7); shared with the queue table's tests.
    pub(crate) fn unit(phy: i64) -> CqUnit {
        CqUnit {
            phy_offset: phy,
            size: 100,
            tags_code: 7,
        }
    }

    /// A start after a stop or crash that deleted CommitLog files but not yet their ConsumeQueue
    /// files: the min offset still lands on the first unit whose message is kept, past the files
    /// retention has yet to delete (not at the end of the first file).
    #[test]
    fn the_min_offset_is_corrected_past_files_retention_has_yet_to_delete() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap(); // 5 units per file
        for i in 0..17 {
            s.put("T", 0, QueueOffset(i as u64), unit(i * 100)).unwrap();
        }
        s.correct_min_offsets(1_250);
        assert_eq!(
            s.queue("T", 0).unwrap().view().min_offset(),
            QueueOffset(13)
        );
        s.correct_min_offsets(1_000_000);
        assert_eq!(
            s.queue("T", 0).unwrap().view().min_offset(),
            QueueOffset(17),
            "nothing kept: the end of the last file"
        );
    }

    /// Retention in steps (`deleteConsumeQueueFilesInterval`): a step ends after the first queue
    /// that deleted a file, queues go in name order, queues that delete nothing do not end a step,
    /// and a queue removed mid-pass is skipped.
    #[test]
    fn a_stepwise_retention_pass_stops_after_each_queue_that_deleted() {
        let dir = tempfile::tempdir().unwrap();
        // 5 units per file. A: 2 old files + 1; B: nothing old (its units start past min); C
        // and D: 1 old file each.
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        for i in 0..11 {
            s.put("A", 0, QueueOffset(i as u64), unit(i * 100)).unwrap();
        }
        for i in 0..6 {
            s.put("B", 0, QueueOffset(i as u64), unit(10_000 + i * 100))
                .unwrap();
            s.put("C", 0, QueueOffset(i as u64), unit(i * 100)).unwrap();
            s.put("D", 1, QueueOffset(i as u64), unit(i * 100)).unwrap();
        }
        let mut pass = s.retention_pass(5_000);
        assert_eq!(pass.min_phy(), 5_000);
        assert_eq!(s.delete_below_step(&mut pass, true), 2, "A's two old files");
        assert!(!pass.is_done());
        assert_eq!(
            s.delete_below_step(&mut pass, true),
            1,
            "B deletes nothing: then C"
        );
        s.delete_topic("D").unwrap();
        assert_eq!(s.delete_below_step(&mut pass, true), 0, "D went meanwhile");
        assert!(pass.is_done());
        pass.finish().unwrap();
        // Every unit left points below 5,000: the min offsets move to the queues' ends.
        assert_eq!(
            s.queue("A", 0).unwrap().view().min_offset(),
            QueueOffset(11)
        );
        assert_eq!(s.queue("B", 0).unwrap().view().min_offset(), QueueOffset(0));
        assert_eq!(s.queue("C", 0).unwrap().view().min_offset(), QueueOffset(6));
    }

    /// Retention: files whose last unit points below the CommitLog's new first byte go (never
    /// the last file), the min offset moves to the first unit still backed by the CommitLog, and
    /// a reload corrects it the same way.
    #[test]
    fn retention_deletes_files_below_the_commit_log_min_and_corrects_the_min_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap(); // 5 units per file
        for i in 0..17 {
            s.put("T", 0, QueueOffset(i as u64), unit(i * 100)).unwrap();
        }
        let q = s.queue("T", 0).unwrap().view().clone();
        assert_eq!(s.delete_below(0).unwrap(), 0);
        assert_eq!(q.min_offset(), QueueOffset(0));
        // Units 0..=6 point below 650: file 0 (units 0-4) goes, file 1 (5-9) stays, and the min
        // offset is unit 7, the first at or past 650.
        assert_eq!(s.delete_below(650).unwrap(), 1);
        assert_eq!(q.min_offset(), QueueOffset(7));
        assert!(!dir.path().join("T/0/00000000000000000000").exists());
        assert_eq!(q.unit(QueueOffset(7)).unwrap().phy_offset, 700);
        // Everything below the end: all but the last file (units 15, 16) go; min at unit 17 is
        // past the units there, so the min offset is the end of the first remaining file's units.
        assert_eq!(s.delete_below(1_000_000).unwrap(), 2);
        assert_eq!(q.min_offset(), QueueOffset(17));
        assert_eq!(q.max_offset(), QueueOffset(17));
        drop(s);
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        s.recover().unwrap();
        s.correct_min_offsets(1_550);
        let q = s.queue("T", 0).unwrap().view().clone();
        assert_eq!(
            (q.min_offset(), q.max_offset()),
            (QueueOffset(16), QueueOffset(17))
        );
    }

    /// Pre-blanks (a gap filled at a replay) decide nothing: a file whose last real unit is still
    /// backed stays even if it ends in blanks, and the min offset lands on the first real unit
    /// at or past the CommitLog's first byte, not on a blank before it.
    #[test]
    fn retention_looks_past_pre_blanks() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap(); // 5 units per file
                                                                       // Units 0-2 real, 3-6 blank (gap), 7.. real.
        for i in [0u64, 1, 2, 7, 8, 9, 10, 11, 12] {
            s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
        }
        let q = s.queue("T", 0).unwrap().view().clone();
        assert_eq!(q.unit(QueueOffset(4)), Some(CqUnit::PRE_BLANK));
        // File 0 (units 0-4) ends in blanks; its last real unit (200) is below 250: it goes.
        // File 1 (5-9) holds 700-900: it stays, and the min offset is its first real unit past
        // the blanks 5 and 6, not a blank.
        assert_eq!(s.delete_below(250).unwrap(), 1);
        assert_eq!(q.min_offset(), QueueOffset(7));
        // A gap inside the first file: the min offset skips the blanks to the unit at 700.
        let dir = tempfile::tempdir().unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 200).unwrap(); // 10 units per file
        for i in [0u64, 1, 5, 6, 12] {
            s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
        }
        s.correct_min_offsets(150);
        let q = s.queue("T", 0).unwrap().view().clone();
        assert_eq!(q.min_offset(), QueueOffset(5));
    }

    #[test]
    fn a_queue_offset_with_no_unit_position_is_refused_not_wrapped() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        s.put("T", 0, QueueOffset(0), unit(0)).unwrap();
        for bad in [u64::MAX, i64::MAX as u64 / 20 + 1] {
            // As a damaged QUEUEOFFSET of -1 reads, and the first that overflows a Java long.
            let e = s.put("T", 0, QueueOffset(bad), unit(100)).unwrap_err();
            assert!(e.to_string().contains("has no unit position"), "{e}");
            assert!(e.to_string().contains("T/0"), "{e}");
            assert_eq!(s.table().get("T", 0).unwrap().max_offset(), QueueOffset(1));
        }
        s.put("T", 0, QueueOffset(1), unit(100)).unwrap();
        assert_eq!(s.table().get("T", 0).unwrap().max_offset(), QueueOffset(2));
    }

    /// A gap is filled with blank units only if the records it stands for could exist: at most
    /// one per shortest record between the last unit's record and the new one. A QUEUEOFFSET
    /// damaged high (outside the CRC) is left out instead of making files until the disk is full.
    #[test]
    fn a_gap_no_records_could_fill_is_refused_not_filled() {
        let dir = tempfile::tempdir().unwrap();
        // 5 units per file.
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        for i in 0..4 {
            s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
        }
        let files = |s: &ConsumeQueueStore| s.table().get("T", 0).unwrap().max_offset();
        // The last record ends at 400: a record at 400 + MIN_RECORD_BYTES leaves room for one
        // missing record.
        let near = 400 + MIN_RECORD_BYTES as i64;
        s.put("T", 0, QueueOffset(1 << 30), unit(near)).unwrap();
        assert_eq!(files(&s), QueueOffset(4), "a bit-30 offset is left out");
        assert_eq!(
            std::fs::read_dir(dir.path().join("T/0")).unwrap().count(),
            1
        );
        s.put("T", 0, QueueOffset(6), unit(near)).unwrap();
        assert_eq!(
            files(&s),
            QueueOffset(4),
            "two missing records cannot fit in MIN_RECORD_BYTES"
        );
        // The planning walk (files made ahead of a batch) plans nothing for it either.
        s.plan_file("T", 0, QueueOffset(1 << 30), &unit(near))
            .unwrap();
        assert_eq!(s.prepare_files(), 0);
        s.put("T", 0, QueueOffset(5), unit(near)).unwrap();
        assert_eq!(
            files(&s),
            QueueOffset(6),
            "one missing record fits: a blank unit, then it"
        );
        let v = s.table().get("T", 0).unwrap();
        assert_eq!(v.unit(QueueOffset(4)), Some(CqUnit::PRE_BLANK));
        assert_eq!(v.unit(QueueOffset(5)), Some(unit(near)));
    }

    /// A queue with no unit yet has no last record to measure a gap from; what bounds its first
    /// offset is the CommitLog before the record. A damaged offset there would have started the
    /// queue's files far out, and every later unit, below that start, would never be dispatched.
    #[test]
    fn a_first_offset_more_than_the_log_before_it_could_hold_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        let at = 10 * MIN_RECORD_BYTES as i64;
        let files = || {
            std::fs::read_dir(dir.path().join("N/0"))
                .map(|d| d.count())
                .unwrap_or(0)
        };
        s.put("N", 0, QueueOffset(1 << 20), unit(at)).unwrap();
        assert_eq!(files(), 0, "no file is made for it");
        s.plan_file("N", 0, QueueOffset(1 << 20), &unit(at))
            .unwrap();
        assert_eq!(s.prepare_files(), 0, "nor planned ahead");
        s.put("N", 0, QueueOffset(11), unit(at)).unwrap();
        assert_eq!(files(), 0, "eleven records cannot fit");
        // Ten of the shortest records can lie before it: a queue may start there (retention).
        s.put("N", 0, QueueOffset(10), unit(at)).unwrap();
        let v = s.table().get("N", 0).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(11));
        assert_eq!(v.unit(QueueOffset(10)), Some(unit(at)));
        // A queue that has files keeps its offsets whatever the CommitLog says: one replaced
        // under kept ConsumeQueues (cut to nothing here) starts again at physical offset 0.
        s.truncate_to_phy(0).unwrap();
        assert_eq!(files(), 1);
        s.put("N", 0, QueueOffset(10), unit(0)).unwrap();
        let v = s.table().get("N", 0).unwrap();
        assert_eq!(
            v.unit(QueueOffset(10)),
            Some(unit(0)),
            "written, not refused"
        );
    }

    #[test]
    fn units_land_at_offset_times_twenty_and_roll_files() {
        let dir = tempfile::tempdir().unwrap();
        // 5 units per file
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        for i in 0..12 {
            s.put("T", 3, QueueOffset(i), unit(i as i64 * 100)).unwrap();
        }
        let v = s.table().get("T", 3).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(12));
        assert_eq!(v.unit(QueueOffset(7)), Some(unit(700)));
        let names: Vec<_> = {
            let mut n: Vec<_> = std::fs::read_dir(dir.path().join("T/3"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            n.sort();
            n
        };
        assert_eq!(
            names,
            [
                "00000000000000000000",
                "00000000000000000100",
                "00000000000000000200"
            ]
        );
        let raw = std::fs::read(dir.path().join("T/3/00000000000000000100")).unwrap();
        assert_eq!(&raw[0..20], &unit(500).encode());
        // duplicates from a replay are ignored
        s.put("T", 3, QueueOffset(5), unit(500)).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(12));
    }

    #[test]
    fn recover_cuts_at_first_invalid_unit_and_truncate_to_phy() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
            for i in 0..8 {
                s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
            }
        }
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        assert_eq!(s.recover().unwrap(), 800);
        let v = s.table().get("T", 0).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(8));
        s.truncate_to_phy(350).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(4));
        assert_eq!(s.max_physic_offset(), 400);
        s.put("T", 0, QueueOffset(4), unit(400)).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(5));
    }

    /// A power loss can leave a queue ending in several files of zeros (created and sized on the
    /// device, their units lost): recovery must end the queue at the last unit that survived,
    /// not at the third-last file, and re-dispatch must then write the lost offsets again.
    #[test]
    fn recover_ends_at_the_last_surviving_unit_before_trailing_files_of_zeros() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
            for i in 0..30 {
                s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
            }
        }
        // Units 12.. lost: files 2..5 (units 10..29) zeroed from unit 12 on.
        let qdir = dir.path().join("T/0");
        let zeros = |name: &str, from: usize| {
            let path = qdir.join(name);
            let mut raw = std::fs::read(&path).unwrap();
            raw[from..].fill(0);
            std::fs::write(&path, raw).unwrap();
        };
        zeros("00000000000000000200", 40);
        for name in [
            "00000000000000000300",
            "00000000000000000400",
            "00000000000000000500",
        ] {
            zeros(name, 0);
        }
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        assert_eq!(s.recover().unwrap(), 1200);
        let v = s.table().get("T", 0).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(12));
        assert_eq!(s.max_physic_offset(), 1200);
        // Re-dispatch writes the lost units again, at their offsets.
        for i in 12..30 {
            s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
        }
        assert_eq!(v.max_offset(), QueueOffset(30));
        assert_eq!(v.unit(QueueOffset(12)), Some(unit(1200)));
        assert_eq!(v.unit(QueueOffset(29)), Some(unit(2900)));
    }

    /// A power loss that keeps the sector holding a unit's size and tagsCode and loses the one
    /// holding its offset leaves a unit that looks valid and points at offset 0. Recovery ends
    /// the queue before it (units go in CommitLog order), wherever it is: kept as the last unit,
    /// it would hide the queue's true end from a CommitLog cut, and the units before it that
    /// point past the cut would stay and serve other messages.
    #[test]
    fn a_unit_that_starts_before_the_one_before_it_ends_the_queue() {
        for torn in [20u64, 29] {
            let dir = tempfile::tempdir().unwrap();
            {
                let mut s = ConsumeQueueStore::load(dir.path(), 20 * 100).unwrap();
                for i in 0..30 {
                    s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
                }
            }
            let path = dir.path().join("T/0/00000000000000000000");
            let mut raw = std::fs::read(&path).unwrap();
            raw[torn as usize * 20..torn as usize * 20 + 8].fill(0);
            std::fs::write(&path, raw).unwrap();
            let mut s = ConsumeQueueStore::load(dir.path(), 20 * 100).unwrap();
            s.recover_with(Some(0)).unwrap();
            let v = s.table().get("T", 0).unwrap();
            assert_eq!(v.max_offset(), QueueOffset(torn), "torn at {torn}");
            assert_eq!(s.max_physic_offset(), torn * 100);
            // The CommitLog lost its tail from 1500 on: the queue follows.
            s.truncate_to_phy(1500).unwrap();
            assert_eq!(v.max_offset(), QueueOffset(15), "torn at {torn}");
        }
    }

    /// A unit torn so that it still looks valid (here its tagsCode, in the middle of the queue)
    /// is kept by the recovery scan. Put again while repairing, it is written again in place,
    /// counted, and its file's flushed position goes back to it so the next flush writes it;
    /// equal replays and replays without repairing change nothing.
    #[test]
    fn a_replayed_unit_that_differs_is_written_again_only_while_repairing() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = ConsumeQueueStore::load(dir.path(), 20 * 100).unwrap();
            for i in 0..30 {
                s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
            }
            s.flush(0).unwrap();
        }
        let path = dir.path().join("T/0/00000000000000000000");
        let mut raw = std::fs::read(&path).unwrap();
        raw[10 * 20 + 12..10 * 20 + 20].fill(0xee);
        // The last unit's size torn smaller: it ends early, so its replay is not below the
        // queue's physical end and takes the other replay path.
        raw[29 * 20 + 8..29 * 20 + 12].copy_from_slice(&50i32.to_be_bytes());
        std::fs::write(&path, raw).unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 20 * 100).unwrap();
        s.recover_with(Some(0)).unwrap();
        let v = s.table().get("T", 0).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(30), "the torn unit looks valid");
        let torn = v.unit(QueueOffset(10)).unwrap();
        assert_ne!(torn, unit(1000));
        // Not repairing: a replay is skipped.
        s.put("T", 0, QueueOffset(10), unit(1000)).unwrap();
        assert_eq!(v.unit(QueueOffset(10)), Some(torn));
        s.set_repairing(true);
        s.flush(0).unwrap();
        let file = s.queue("T", 0).unwrap().files.files()[0].clone();
        assert_eq!(file.flushed_position(), 30 * 20);
        for i in 0..30 {
            s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
        }
        assert_eq!(v.unit(QueueOffset(10)), Some(unit(1000)), "written again");
        assert_eq!(v.unit(QueueOffset(29)), Some(unit(2900)), "written again");
        assert_eq!(s.max_physic_offset(), 3000);
        assert_eq!(v.max_offset(), QueueOffset(30));
        assert_eq!(file.flushed_position(), 10 * 20, "the next flush writes it");
        assert_eq!(s.set_repairing(false), 2, "two units differed");
        s.flush(0).unwrap();
        assert_eq!(file.flushed_position(), 30 * 20);
        drop(s);
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(raw[10 * 20..11 * 20], unit(1000).encode());
    }

    /// After a crash, a queue can hold files of zeros followed by a whole one (a killed
    /// process's unsynced files, the last of them synced by the next start's cut): recovery
    /// from the CommitLog's recovery start must end the queue at the first of them, however
    /// many whole files follow.
    #[test]
    fn recover_after_a_crash_ends_at_a_hole_before_the_last_three_files() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
            for i in 0..40 {
                s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
            }
        }
        // Files 3..=5 (units 15..30) lost; files 6 and 7 whole.
        let qdir = dir.path().join("T/0");
        for n in [300u64, 400, 500] {
            std::fs::write(qdir.join(format!("{n:020}")), [0u8; 100]).unwrap();
        }
        // The RocketMQ rule (the last three files) cuts at file 5 and keeps 3 and 4 as units...
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        s.recover().unwrap();
        assert_eq!(s.table().get("T", 0).unwrap().max_offset(), QueueOffset(25));
        drop(s);
        for n in [500u64, 600, 700] {
            let mut raw = vec![0u8; 100];
            if n > 500 {
                for (i, u) in raw.chunks_mut(20).enumerate() {
                    u.copy_from_slice(&unit((n as i64 / 20 + i as i64) * 100).encode());
                }
            }
            std::fs::write(qdir.join(format!("{n:020}")), raw).unwrap();
        }
        // ...a recovery told that units of records from byte 1200 on may be lost does.
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        assert_eq!(s.recover_with(Some(1200)).unwrap(), 1500);
        let v = s.table().get("T", 0).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(15));
        for i in 15..40 {
            s.put("T", 0, QueueOffset(i), unit(i as i64 * 100)).unwrap();
        }
        assert_eq!(v.max_offset(), QueueOffset(40));
        assert_eq!(v.unit(QueueOffset(20)), Some(unit(2000)));
    }

    #[test]
    fn queue_starting_mid_file_has_min_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        s.put("T", 1, QueueOffset(7), unit(7 * 100)).unwrap();
        let v = s.table().get("T", 1).unwrap();
        assert_eq!(v.min_offset(), QueueOffset(7));
        assert_eq!(v.max_offset(), QueueOffset(8));
        assert_eq!(v.unit(QueueOffset(5)), Some(CqUnit::PRE_BLANK));
    }

    /// The builder's batch path: a unit whose file is missing is refused untouched; the files
    /// planned for a batch are made at once, and the puts take them in order — including a queue
    /// that starts mid-way, whose first valid offset must still be set.
    #[test]
    fn files_planned_for_a_batch_are_made_together_and_taken_by_their_units() {
        let dir = tempfile::tempdir().unwrap();
        // 5 units per file: 8 units per queue need two files.
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        assert!(!s
            .put_if_file_ready("T", 0, QueueOffset(0), unit(0))
            .unwrap());
        assert_eq!(s.table().get("T", 0).unwrap().max_offset(), QueueOffset(0));
        let mut batch = Vec::new();
        for i in 0..8u64 {
            for q in 0..20 {
                batch.push((q, QueueOffset(i), unit(((i * 20 + q as u64) * 100) as i64)));
            }
        }
        for (q, off, u) in &batch {
            s.plan_file("T", *q, *off, u).unwrap();
        }
        // Starts at offset 7: its one file starts at unit 5.
        s.plan_file("M", 0, QueueOffset(7), &unit(1_000_000))
            .unwrap();
        assert_eq!(s.prepare_files(), 41);
        assert_eq!(s.prepare_files(), 0, "nothing is planned twice");
        for (q, off, u) in batch {
            assert!(s.put_if_file_ready("T", q, off, u).unwrap(), "{q}/{off:?}");
        }
        assert!(s
            .put_if_file_ready("M", 0, QueueOffset(7), unit(1_000_000))
            .unwrap());
        for q in 0..20 {
            let v = s.table().get("T", q).unwrap();
            assert_eq!(v.max_offset(), QueueOffset(8));
            assert_eq!(
                v.unit(QueueOffset(6)).unwrap().phy_offset,
                (6 * 20 + q as i64) * 100
            );
            let files = std::fs::read_dir(dir.path().join("T").join(q.to_string()))
                .unwrap()
                .count();
            assert_eq!(files, 2, "queue {q}: no temporary file is left behind");
        }
        let m = s.table().get("M", 0).unwrap();
        assert_eq!(
            (m.min_offset(), m.max_offset()),
            (QueueOffset(7), QueueOffset(8))
        );
        // The new topic and queue directories are named in directories only the next flush
        // syncs: the root (topics T and M) and each topic directory, once each.
        assert_eq!(s.new_dirs.len(), 3, "{:?}", s.new_dirs);
        s.flush(0).unwrap();
        assert!(s.new_dirs.is_empty());
        // A unit no plan covered still gets its file from the plain put.
        assert!(!s
            .put_if_file_ready("T", 0, QueueOffset(10), unit(9_000_000))
            .unwrap());
        s.put("T", 0, QueueOffset(10), unit(9_000_000)).unwrap();
        assert_eq!(s.table().get("T", 0).unwrap().max_offset(), QueueOffset(11));
    }

    /// A unit past a gap: every file up to its own is planned, so the files made ahead never
    /// leave a hole on disk (the next start refuses one); a queue's files are made in order and
    /// stop at the first that fails, so a failure leaves no hole either.
    #[test]
    fn files_made_ahead_never_leave_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let names = |q: &str| {
            let mut n: Vec<_> = std::fs::read_dir(dir.path().join("T").join(q))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            n.sort();
            n
        };
        let mut s = ConsumeQueueStore::load(dir.path(), 100).unwrap();
        s.put("T", 0, QueueOffset(0), unit(0)).unwrap();
        s.put("T", 1, QueueOffset(0), unit(100)).unwrap();
        // Unit 17 of each queue: file 300, after files 100 and 200 of blanks only.
        s.plan_file("T", 0, QueueOffset(17), &unit(100_000))
            .unwrap();
        s.plan_file("T", 1, QueueOffset(17), &unit(100_100))
            .unwrap();
        // Queue 1's file 200 cannot be made (a directory holds its name).
        std::fs::create_dir(dir.path().join("T/1/00000000000000000200")).unwrap();
        assert_eq!(s.prepare_files(), 3 + 1);
        assert_eq!(
            names("0"),
            [
                "00000000000000000000",
                "00000000000000000100",
                "00000000000000000200",
                "00000000000000000300"
            ]
        );
        assert_eq!(
            names("1"),
            [
                "00000000000000000000",
                "00000000000000000100",
                "00000000000000000200"
            ],
            "nothing after the file that failed"
        );
        assert!(s
            .put_if_file_ready("T", 0, QueueOffset(17), unit(100_000))
            .unwrap());
        let v = s.table().get("T", 0).unwrap();
        assert_eq!(v.max_offset(), QueueOffset(18));
        assert_eq!(v.unit(QueueOffset(9)), Some(CqUnit::PRE_BLANK));
        // Queue 1 stops at the file not made; the plain put then reports why.
        assert!(!s
            .put_if_file_ready("T", 1, QueueOffset(17), unit(100_100))
            .unwrap());
        assert!(s.put("T", 1, QueueOffset(17), unit(100_100)).is_err());
    }
}
