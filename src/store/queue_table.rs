//! The persisted queue table and the re-dispatch plan built from it at start: how recovery finds
//! a ConsumeQueue that lost units whose CommitLog records lie outside the range it scans.
//!
//! Normal recovery scans only the newest CommitLog files (the last three, as RocketMQ's
//! `CommitLog.recoverNormally` does), so a queue that lost its last ConsumeQueue file — or its
//! whole directory — to an operator or a disk fault would be served short, and new sends would be
//! given queue offsets that were already acknowledged.
//! Scanning the whole CommitLog on every start would catch it but makes start time grow with the
//! store. Instead the ConsumeQueue builder keeps a small table of (topic, queueId, units known
//! to be on disk) in `config/consumeQueueMaxOffsets.json` — ActorMQ's own file; RocketMQ does not
//! have it and ignores it. At start:
//!
//! * a queue whose recovered ConsumeQueue is shorter than its table entry lost units: it is
//!   re-dispatched from its last unit's physical end (from the CommitLog's first byte if it has
//!   no unit left), and only the CommitLog range that needs is read again;
//! * a record met in the scanned range whose queue offset is beyond its (existing, or tabled)
//!   queue's end is a hole whose records lie before the scan: same treatment;
//! * the first record in the scan that its ConsumeQueue does not hold yet (a crash before
//!   dispatch) is re-dispatched from, as before;
//! * a deleted topic leaves a tombstone (the CommitLog end at deletion): its older records are
//!   neither counted as undispatched here nor dispatched by the builder, so no restart brings
//!   the topic back, while a topic created again under the same name is served from its new
//!   records.
//!
//! Invariant: outside recovery the table only ever holds a lower bound of what each ConsumeQueue
//! has on disk — it is written with the *flushed* unit count of each queue, after that flush, and
//! an entry goes before its topic's directory does. A stale table (a crash after more units were
//! flushed) therefore never causes a rebuild that was not needed; a missing or unreadable table
//! only disables the check (nothing is rebuilt that the scan does not show). While a start's
//! re-dispatch runs, the builder holds each queue at least at the loaded table
//! ([`QueueMaxTable::raised_to`]): a start killed mid-rebuild must find the queue short again.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::format::record::{sys_flag, RecordView};

/// The table's file name, under `<storePathRootDir>/config/`.
pub const FILE_NAME: &str = "consumeQueueMaxOffsets.json";
const VERSION: u32 = 1;

/// (topic, queueId) → number of units known to be on disk (the next queue offset), and the
/// deleted topics: topic → CommitLog offset below which its records belong to the deleted
/// incarnation and must never be dispatched again (RocketMQ leaves them in the CommitLog until
/// retention; without the tombstone a restart that re-dispatches them would bring the topic
/// back).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueMaxTable {
    topics: BTreeMap<String, BTreeMap<i32, u64>>,
    deleted: BTreeMap<String, u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    topic: String,
    queue_id: i32,
    max_offset: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tombstone {
    topic: String,
    before_phy_offset: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    version: u32,
    queues: Vec<Entry>,
    #[serde(default)]
    deleted_topics: Vec<Tombstone>,
}

impl QueueMaxTable {
    pub fn insert(&mut self, topic: &str, queue_id: i32, max_offset: u64) {
        match self.topics.get_mut(topic) {
            Some(q) => {
                q.insert(queue_id, max_offset);
            }
            None => {
                self.topics
                    .insert(topic.to_string(), BTreeMap::from([(queue_id, max_offset)]));
            }
        }
    }
    pub fn get(&self, topic: &str, queue_id: i32) -> Option<u64> {
        self.topics.get(topic)?.get(&queue_id).copied()
    }
    /// A deleted topic: its entries go, and its records below `before_phy` (the CommitLog end
    /// when it was deleted) are dead from now on.
    pub fn delete_topic(&mut self, topic: &str, before_phy: u64) {
        self.topics.remove(topic);
        let at = self.deleted.entry(topic.to_string()).or_insert(0);
        *at = (*at).max(before_phy);
    }
    /// Whether the record of `topic` at CommitLog offset `phy` belongs to a deleted incarnation.
    pub fn is_dead(&self, topic: &str, phy: u64) -> bool {
        !self.deleted.is_empty() && self.deleted.get(topic).is_some_and(|&end| phy < end)
    }
    /// This table with the tombstones of `other` (a fresh table of queues carries them forward).
    pub fn with_tombstones_of(mut self, other: &QueueMaxTable) -> QueueMaxTable {
        for (t, &end) in &other.deleted {
            let at = self.deleted.entry(t.clone()).or_insert(0);
            *at = (*at).max(end);
        }
        self
    }
    /// This table with every queue of `floor` raised to at least its value there (tombstones
    /// are this table's): what a rebuild still under way must keep claiming.
    pub fn raised_to(mut self, floor: &QueueMaxTable) -> QueueMaxTable {
        for (topic, q, max) in floor.iter() {
            if self.get(topic, q).is_none_or(|now| now < max) {
                self.insert(topic, q, max);
            }
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.topics.is_empty() && self.deleted.is_empty()
    }
    /// Every entry, by topic then queue id.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, u64)> {
        self.topics
            .iter()
            .flat_map(|(t, q)| q.iter().map(move |(id, m)| (t.as_str(), *id, *m)))
    }

    pub fn encode(&self) -> Vec<u8> {
        let file = File {
            version: VERSION,
            queues: self
                .iter()
                .map(|(topic, queue_id, max_offset)| Entry {
                    topic: topic.to_string(),
                    queue_id,
                    max_offset,
                })
                .collect(),
            deleted_topics: self
                .deleted
                .iter()
                .map(|(topic, &before_phy_offset)| Tombstone {
                    topic: topic.clone(),
                    before_phy_offset,
                })
                .collect(),
        };
        serde_json::to_vec_pretty(&file).expect("plain structs serialize")
    }

    pub fn decode(bytes: &[u8]) -> Result<QueueMaxTable, String> {
        let file: File = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if file.version != VERSION {
            return Err(format!("version {} (expected {VERSION})", file.version));
        }
        let mut t = QueueMaxTable::default();
        for e in file.queues {
            t.insert(&e.topic, e.queue_id, e.max_offset);
        }
        for d in file.deleted_topics {
            t.deleted.insert(d.topic, d.before_phy_offset);
        }
        Ok(t)
    }

    /// Reads the table at `path`; an absent file is an empty table. A file that does not parse is
    /// an `InvalidData` error naming the file (the caller starts without the check).
    pub fn load(path: &Path) -> io::Result<QueueMaxTable> {
        match std::fs::read(path) {
            Ok(b) => QueueMaxTable::decode(&b).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(QueueMaxTable::default()),
            Err(e) => Err(e),
        }
    }
}

/// What [`RedispatchScan`] reads of the recovered ConsumeQueues: each queue's end, as (units,
/// one past the last CommitLog byte they reference). `ConsumeQueueStore` implements it, so this
/// module does not import `consume_queue`, which imports it.
pub trait QueueEnds {
    /// Calls `f(topic, queue id, units, physical end)` for every queue.
    fn each_end(&self, f: &mut dyn FnMut(&str, i32, u64, u64));
    /// One queue's (units, physical end), if it exists.
    fn end_of(&self, topic: &str, queue_id: i32) -> Option<(u64, u64)>;
}

/// What recovery knows of one queue while it scans.
#[derive(Clone, Copy, Debug, Default)]
struct Mark {
    max_offset: u64,
    /// One past the last CommitLog byte its units reference (the ConsumeQueue's own dedup line).
    max_phy: u64,
    /// The queue existed before the scan (a directory was loaded, or the table names it).
    known: bool,
    /// An undispatched record of this queue was already met.
    met: bool,
}

/// Watches the records of the recovery scan and decides where dispatch must start again.
pub struct RedispatchScan<'a> {
    marks: HashMap<Box<str>, HashMap<i32, Mark>>,
    persisted: &'a QueueMaxTable,
    first_undispatched: Option<u64>,
    /// Queues with a hole: the queue offset of their first undispatched record in the scan.
    holes: BTreeMap<(String, i32), u64>,
}

/// Why a queue is re-dispatched from its own end rather than from the scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The recovered ConsumeQueue has fewer units than the table says were on disk.
    ShorterThanTable { had: u64, table: u64 },
    /// A record in the scanned range has a queue offset beyond the queue's end.
    Hole { had: u64, met: u64 },
}

/// One queue to rebuild: re-dispatch from `from` (its last unit's end, or the CommitLog start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rebuild {
    pub topic: String,
    pub queue_id: i32,
    pub from: u64,
    pub damage: Damage,
}

/// Where dispatch starts again after recovery, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedispatchPlan {
    /// The lowest offset anything needs re-dispatching from; `None` if nothing does.
    pub from: Option<u64>,
    pub rebuilds: Vec<Rebuild>,
}

impl<'a> RedispatchScan<'a> {
    /// Takes each queue's end as recovered, before the CommitLog scan.
    pub fn new(cqs: &impl QueueEnds, persisted: &'a QueueMaxTable) -> RedispatchScan<'a> {
        let mut marks: HashMap<Box<str>, HashMap<i32, Mark>> = HashMap::new();
        cqs.each_end(&mut |topic, queue_id, max_offset, max_phy| {
            marks.entry(topic.into()).or_default().insert(
                queue_id,
                Mark {
                    max_offset,
                    max_phy,
                    known: true,
                    met: false,
                },
            );
        });
        RedispatchScan {
            marks,
            persisted,
            first_undispatched: None,
            holes: BTreeMap::new(),
        }
    }

    /// The recovery scan's callback: one valid record at CommitLog offset `phy`.
    pub fn observe(&mut self, phy: u64, r: &RecordView<'_>) {
        let t = r.sys_flag & sys_flag::TRANSACTION_TYPE_MASK;
        if t != sys_flag::TRANSACTION_NOT_TYPE && t != sys_flag::TRANSACTION_COMMIT_TYPE {
            // PREPARED and ROLLBACK records take no queue offset and have no unit.
            return;
        }
        if self.persisted.is_dead(r.topic, phy) {
            // A deleted topic's record: never dispatched again (the builder skips it too).
            return;
        }
        let mark = match self
            .marks
            .get_mut(r.topic)
            .and_then(|m| m.get_mut(&r.queue_id))
        {
            Some(m) => m,
            None => {
                let known = self.persisted.get(r.topic, r.queue_id).is_some();
                self.marks
                    .entry(r.topic.into())
                    .or_default()
                    .entry(r.queue_id)
                    .or_insert(Mark {
                        known,
                        ..Mark::default()
                    })
            }
        };
        if phy + r.total_size as u64 <= mark.max_phy {
            // Its ConsumeQueue has it (or, for a topic deleted and created again, ignores it).
            return;
        }
        self.first_undispatched.get_or_insert(phy);
        if mark.met {
            return;
        }
        mark.met = true;
        // The first record of this queue the ConsumeQueue lacks should carry the next offset;
        // a later one means the records in between lie before the scanned range. A queue that
        // neither exists nor is tabled is left alone: it may belong to a deleted topic, and its
        // records before the scan are not ours to bring back.
        let q = r.queue_offset.max(0) as u64;
        if q > mark.max_offset && mark.known {
            self.holes.insert((r.topic.to_string(), r.queue_id), q);
        }
    }

    /// The plan, once the scan is over and `cqs` has been cut to the recovered CommitLog end;
    /// `min_phy` is the CommitLog's first offset (where a queue with no unit left starts).
    pub fn plan(self, cqs: &impl QueueEnds, min_phy: u64) -> RedispatchPlan {
        let end_of = |topic: &str, qid: i32| cqs.end_of(topic, qid).unwrap_or((0, 0));
        let from_of = |max_phy: u64| if max_phy > 0 { max_phy } else { min_phy };
        let mut rebuilds = Vec::new();
        for (topic, qid, table) in self.persisted.iter() {
            let (had, max_phy) = end_of(topic, qid);
            if had < table {
                rebuilds.push(Rebuild {
                    topic: topic.to_string(),
                    queue_id: qid,
                    from: from_of(max_phy),
                    damage: Damage::ShorterThanTable { had, table },
                });
            }
        }
        for ((topic, qid), met) in self.holes {
            if rebuilds
                .iter()
                .any(|r| r.topic == topic && r.queue_id == qid)
            {
                continue;
            }
            let (had, max_phy) = end_of(&topic, qid);
            rebuilds.push(Rebuild {
                topic,
                queue_id: qid,
                from: from_of(max_phy),
                damage: Damage::Hole { had, met },
            });
        }
        let from = rebuilds
            .iter()
            .map(|r| r.from)
            .chain(self.first_undispatched)
            .min();
        RedispatchPlan { from, rebuilds }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::{check, encode_into, Check};
    use crate::offset::QueueOffset;
    use crate::store::consume_queue::tests::unit;
    use crate::store::consume_queue::ConsumeQueueStore;

    /// A ConsumeQueue store with queue `T/q` holding `n` units at physical offsets 0, 100, ...
    fn store_with(dir: &Path, queues: &[(i32, u64)]) -> ConsumeQueueStore {
        let mut s = ConsumeQueueStore::load(dir, 20 * 10).unwrap();
        for &(q, n) in queues {
            for i in 0..n {
                s.put("T", q, QueueOffset(i), unit(i as i64 * 100)).unwrap();
            }
        }
        s
    }

    /// The record of `topic/q` at queue offset `qoff`, as the recovery scan sees it.
    fn observe(scan: &mut RedispatchScan<'_>, topic: &str, q: i32, qoff: i64, phy: u64) {
        let m = crate::store::commit_log::tests::msg(topic, q, 1);
        let mut buf = vec![0u8; 512];
        let n = encode_into(&mut buf, &m, qoff, phy as i64, 2);
        match check(&buf[..n], true).unwrap() {
            Check::Record(r) => scan.observe(phy, &r),
            Check::Blank { .. } => unreachable!("a message encodes as a record"),
        }
    }

    #[test]
    fn table_round_trips_and_an_absent_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert_eq!(
            QueueMaxTable::load(&path).unwrap(),
            QueueMaxTable::default()
        );
        let mut t = QueueMaxTable::default();
        t.insert("A", 0, 150);
        t.insert("A", 3, 7);
        t.insert("%RETRY%g", 0, 1);
        std::fs::write(&path, t.encode()).unwrap();
        let back = QueueMaxTable::load(&path).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.get("A", 0), Some(150));
        assert_eq!(back.get("A", 1), None);
        t.delete_topic("A", 4096);
        assert_eq!(t.iter().collect::<Vec<_>>(), [("%RETRY%g", 0, 1)]);
        assert!(t.is_dead("A", 4095) && !t.is_dead("A", 4096) && !t.is_dead("%RETRY%g", 0));
        std::fs::write(&path, t.encode()).unwrap();
        assert_eq!(
            QueueMaxTable::load(&path).unwrap(),
            t,
            "tombstones round-trip"
        );
        let fresh = QueueMaxTable::default().with_tombstones_of(&t);
        assert!(
            fresh.is_dead("A", 0),
            "a fresh table carries the tombstones"
        );
    }

    #[test]
    fn an_unreadable_table_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, b"{\"version\":1,\"queues\":[{\"topic\":").unwrap();
        let e = QueueMaxTable::load(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains(FILE_NAME), "{e}");
        std::fs::write(&path, b"{\"version\":9,\"queues\":[]}").unwrap();
        assert!(QueueMaxTable::load(&path)
            .unwrap_err()
            .to_string()
            .contains("version 9"));
    }

    #[test]
    fn a_queue_shorter_than_its_table_entry_is_rebuilt_from_its_last_unit_only() {
        let dir = tempfile::tempdir().unwrap();
        // Queue 0 lost units 12..15, queue 1 is complete, queue 2 lost its directory, queue 3's
        // entry is stale (lower than what is on disk, as after a crash).
        let cqs = store_with(dir.path(), &[(0, 12), (1, 5), (3, 9)]);
        let mut table = QueueMaxTable::default();
        table.insert("T", 0, 15);
        table.insert("T", 1, 5);
        table.insert("T", 2, 4);
        table.insert("T", 3, 6);
        let plan = RedispatchScan::new(&cqs, &table).plan(&cqs, 4096);
        assert_eq!(
            plan.rebuilds,
            [
                Rebuild {
                    topic: "T".into(),
                    queue_id: 0,
                    from: 1200,
                    damage: Damage::ShorterThanTable { had: 12, table: 15 },
                },
                Rebuild {
                    topic: "T".into(),
                    queue_id: 2,
                    from: 4096,
                    damage: Damage::ShorterThanTable { had: 0, table: 4 },
                },
            ]
        );
        assert_eq!(plan.from, Some(1200));
    }

    #[test]
    fn a_healthy_store_needs_no_redispatch() {
        let dir = tempfile::tempdir().unwrap();
        let cqs = store_with(dir.path(), &[(0, 3)]);
        let mut table = QueueMaxTable::default();
        table.insert("T", 0, 3);
        let mut scan = RedispatchScan::new(&cqs, &table);
        for i in 0..3 {
            observe(&mut scan, "T", 0, i, i as u64 * 100);
        }
        assert_eq!(scan.plan(&cqs, 0), RedispatchPlan::default());
    }

    #[test]
    fn an_undispatched_tail_starts_at_its_first_record_without_a_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let cqs = store_with(dir.path(), &[(0, 3)]);
        let table = QueueMaxTable::default();
        let mut scan = RedispatchScan::new(&cqs, &table);
        observe(&mut scan, "T", 0, 2, 200);
        // Offsets 3 and 4 were written but not dispatched before a crash.
        observe(&mut scan, "T", 0, 3, 300);
        observe(&mut scan, "T", 0, 4, 400);
        let plan = scan.plan(&cqs, 0);
        assert_eq!(plan.rebuilds, []);
        assert_eq!(plan.from, Some(300));
    }

    #[test]
    fn a_record_beyond_its_queue_end_is_a_hole_rebuilt_from_the_queue_end() {
        let dir = tempfile::tempdir().unwrap();
        // The table is empty (lost, or written before these units): the scan alone finds it.
        let cqs = store_with(dir.path(), &[(0, 3)]);
        let table = QueueMaxTable::default();
        let mut scan = RedispatchScan::new(&cqs, &table);
        // Offsets 3..7 lie before the scanned range; the scan starts with offset 7.
        observe(&mut scan, "T", 0, 7, 9000);
        observe(&mut scan, "T", 0, 8, 9100);
        let plan = scan.plan(&cqs, 0);
        assert_eq!(
            plan.rebuilds,
            [Rebuild {
                topic: "T".into(),
                queue_id: 0,
                from: 300,
                damage: Damage::Hole { had: 3, met: 7 },
            }]
        );
        assert_eq!(plan.from, Some(300));
    }

    #[test]
    fn records_of_a_deleted_topic_are_not_redispatched_but_a_new_incarnation_is() {
        let dir = tempfile::tempdir().unwrap();
        let cqs = store_with(dir.path(), &[(0, 3)]);
        let mut table = QueueMaxTable::default();
        table.delete_topic("Gone", 6000);
        let mut scan = RedispatchScan::new(&cqs, &table);
        observe(&mut scan, "Gone", 0, 7, 5000);
        assert_eq!(scan.plan(&cqs, 0), RedispatchPlan::default());
        let mut scan = RedispatchScan::new(&cqs, &table);
        observe(&mut scan, "Gone", 0, 7, 5000);
        // Created again after the deletion: offsets start at 0 again.
        observe(&mut scan, "Gone", 0, 0, 6000);
        let plan = scan.plan(&cqs, 0);
        assert_eq!(plan.rebuilds, []);
        assert_eq!(plan.from, Some(6000));
    }

    #[test]
    fn records_of_a_queue_neither_on_disk_nor_tabled_are_not_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let cqs = store_with(dir.path(), &[(0, 3)]);
        let table = QueueMaxTable::default();
        let mut scan = RedispatchScan::new(&cqs, &table);
        // A deleted topic's records: no directory and no table entry, so the part of it before
        // the scan is not brought back (its dispatch from here is the old behaviour).
        observe(&mut scan, "Gone", 1, 40, 5000);
        let plan = scan.plan(&cqs, 0);
        assert_eq!(plan.rebuilds, []);
        assert_eq!(plan.from, Some(5000));
    }
}
