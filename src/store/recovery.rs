//! Recovery decisions that sit outside the CommitLog scan itself (RocketMQ's
//! `DefaultMessageStore.load` and `recover`, `CommitLog.recoverAbnormally`, in
//! store/src/main/java/org/apache/rocketmq/store/), and the crash-image tests that pin down what
//! recovery guarantees.
//!
//! Owns: the choice of where *abnormal* recovery (abort file present) starts re-dispatching —
//! [`abnormal_recovery_start_file`], from the checkpoint's minimum timestamp
//! ([`abnormal_recovery_min_timestamp`]). The scan and the cut are `CommitLog::recover`'s; the
//! ConsumeQueue cut is `ConsumeQueueStore::truncate_to_phy`'s.
//!
//! Guarantees the tests below hold the store to (crash images are built by editing the files as
//! plain bytes, then reopening):
//! * recovery ends on a record boundary, never after the first record whose length fields, magic,
//!   body CRC or body bytes were damaged, and never before the end of data that was flushed
//!   (`MappedFile::flush`) when the damage lies after it;
//! * every record below the recovered end decodes with the body CRC checked, and nothing at or
//!   past it is served (not by the view, not by `walk`);
//! * after the CommitLog is cut, no ConsumeQueue unit points at or past the cut;
//! * ConsumeQueue pages torn by 512-byte sector (units that keep their offset and size and lose
//!   their tagsCode, or lose half their offset) end, after the recovery scan and a re-dispatch
//!   that repairs (`ConsumeQueueStore::set_repairing`), with exactly their records' units;
//! * a cut is final: `MappedFileQueue::truncate_dirty` zeroes the tail of the file it cuts
//!   (`MappedFile::cut_at`), so a later recovery never reads cut records or units back, even once
//!   new appends end on an old record boundary (`a_commit_log_cut_is_not_undone_*`,
//!   `a_consume_queue_cut_is_not_undone_*`). RocketMQ leaves those bytes in place.
//!
//! Which ConsumeQueues lost units whose records lie before the scanned files is decided against
//! the persisted queue table, in `queue_table`.
//!
//! Known limit (the RocketMQ format's, not this code's): BODYCRC covers the body only. A flip in a
//! header field that no length depends on (queue id, offsets, timestamps, host IPs), inside the
//! properties (any bytes are valid there, as RocketMQ reads them), or inside the topic when it
//! stays valid UTF-8 passes every check and is recovered as is; see
//! `single_bit_flips_outside_the_crc_and_the_lengths_go_undetected`.

use std::sync::Arc;

use super::checkpoint::CheckpointData;
use super::mapped_file::MappedFile;
use crate::format::record::{self, MessageVersion};

/// Files normal recovery (abort file absent) re-scans, counted from the newest (4.9.x).
pub const NORMAL_RECOVERY_FILES: usize = 3;

/// The time bound abnormal recovery compares first-record store times against:
/// `minTimestampIndex` when the index must be rebuilt safely (`messageIndexEnable &&
/// messageIndexSafe`), `minTimestamp` otherwise.
pub fn abnormal_recovery_min_timestamp(cp: &CheckpointData, index_safe: bool) -> i64 {
    if index_safe {
        cp.min_timestamp_index()
    } else {
        cp.min_timestamp()
    }
}

/// STORETIMESTAMP of the record at the start of `file`, if that record has a valid v1/v2 magic and
/// a non-zero store time (RocketMQ's `isMappedFileMatchedRecover` reads just these two fields;
/// the record is not otherwise validated — the scan that follows does that). Only published bytes
/// are looked at.
pub fn first_record_store_timestamp(file: &MappedFile) -> Option<i64> {
    let head = file.read(0, record::SYS_FLAG_POS + 4)?;
    let magic = u32::from_be_bytes(
        head[record::MAGIC_POS..record::MAGIC_POS + 4]
            .try_into()
            .ok()?,
    );
    MessageVersion::from_magic(magic)?;
    let sys = i32::from_be_bytes(
        head[record::SYS_FLAG_POS..record::SYS_FLAG_POS + 4]
            .try_into()
            .ok()?,
    );
    // The store time's position depends on the born host's length (IPv4 or IPv6).
    let at = record::store_timestamp_pos(sys) as u64;
    let ts = i64::from_be_bytes(file.read(at, 8)?.try_into().ok()?);
    (ts != 0).then_some(ts)
}

/// Abnormal recovery's start file (`CommitLog.recoverAbnormally`, `isMappedFileMatchedRecover`):
/// from the newest file to the oldest, the first whose first record has a valid magic, a non-zero
/// store time and `storeTimestamp <= checkpoint_min_ts`. Every message stored after that time is
/// then re-dispatched (the ConsumeQueue and index drop duplicates). When no file qualifies — or
/// there are no files — the answer is 0, the oldest file.
pub fn abnormal_recovery_start_file(files: &[Arc<MappedFile>], checkpoint_min_ts: i64) -> usize {
    files
        .iter()
        .rposition(|f| first_record_store_timestamp(f).is_some_and(|ts| ts <= checkpoint_min_ts))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};
    use std::ops::Range;
    use std::path::{Path, PathBuf};

    use bytes::Bytes;
    use proptest::prelude::*;

    use crate::format::cq_unit::CqUnit;
    use crate::format::record::{sys_flag, Check, NewMessage};
    use crate::offset::{file_name_of, PhyOffset, QueueOffset};
    use crate::store::checkpoint::Checkpoint;
    use crate::store::commit_log::{walk, CommitLog, CommitLogConfig, RecoveryReport};
    use crate::store::consume_queue::ConsumeQueueStore;
    use crate::store::mapped_file::Warm;
    use crate::store::mapped_file_queue::MappedFileQueue;

    const PAGE: u64 = 4096;
    /// Store time of the first message; message `i` is stored at `T0 + i * TS_STEP`.
    const T0: i64 = 1_700_000_000_000;
    const TS_STEP: i64 = 1000;
    /// ConsumeQueue files of 5 units, so cuts cross CQ file boundaries too.
    const CQ_FILE: u64 = 100;

    fn mix(mut x: u64) -> u64 {
        // splitmix64: cheap, deterministic filler so bodies are non-zero and distinct.
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    #[derive(Clone, Debug)]
    struct Spec {
        topic: String,
        qid: i32,
        body: usize,
        props: usize,
        v6_store: bool,
    }

    fn spec(topic: &str, qid: i32, body: usize) -> Spec {
        Spec {
            topic: topic.into(),
            qid,
            body,
            props: 10,
            v6_store: false,
        }
    }

    fn message(s: &Spec, seed: u64) -> NewMessage {
        // Body bytes are never zero: zeroing any of them is a real change the CRC must see.
        let body: Vec<u8> = (0..s.body as u64)
            .map(|i| (mix(seed << 20 | i) as u8) | 1)
            .collect();
        let mut props = format!("TAGS\u{1}Tag{}\u{2}UNIQ_KEY\u{1}U{seed:08X}\u{2}", seed % 3);
        if s.props > 0 {
            props.push_str("P\u{1}");
            props.extend(std::iter::repeat_n('p', s.props));
            props.push('\u{2}');
        }
        let store = if s.v6_store {
            "[::1]:10911"
        } else {
            "127.0.0.1:10911"
        };
        NewMessage::new(
            s.topic.clone(),
            s.qid,
            Bytes::from(body),
            props,
            T0 - 5,
            "127.0.0.1:5000".parse().unwrap(),
            store.parse().unwrap(),
        )
    }

    fn open_log(dir: &Path, file_size: u64) -> CommitLog {
        CommitLog::new(
            CommitLogConfig {
                file_size,
                max_message_size: 1 << 16,
                warm: Warm::No,
            },
            MappedFileQueue::load(dir, file_size).unwrap(),
        )
    }

    /// One appended record as the writer reported it, with its original bytes.
    #[derive(Clone, Debug)]
    struct Rec {
        start: u64,
        len: u64,
        topic: String,
        qid: i32,
        qoff: u64,
        bytes: Vec<u8>,
    }

    impl Rec {
        fn end(&self) -> u64 {
            self.start + self.len
        }
    }

    /// What sits in the CommitLog, in order: records and END_OF_FILE blanks.
    #[derive(Clone, Copy, Debug)]
    enum Item {
        Rec(usize),
        Blank(u64),
    }

    /// A store written by [`write_store`]: `root/commitlog` and `root/consumequeue`.
    struct Image {
        root: PathBuf,
        file_size: u64,
        recs: Vec<Rec>,
        items: Vec<Item>,
        /// Everything below this was flushed (acknowledged under SYNC_FLUSH).
        synced: u64,
    }

    impl Image {
        fn cl_dir(&self) -> PathBuf {
            self.root.join("commitlog")
        }
        fn cq_dir(&self) -> PathBuf {
            self.root.join("consumequeue")
        }
        fn data_end(&self) -> u64 {
            self.recs.last().map_or(0, Rec::end)
        }
        fn item_at(&self, item: Item) -> u64 {
            match item {
                Item::Rec(i) => self.recs[i].start,
                Item::Blank(at) => at,
            }
        }
    }

    /// Appends one message per spec (message `i` stored at `T0 + i * TS_STEP`), writes its
    /// ConsumeQueue unit as dispatch would, and flushes everything after the first `sync_after`
    /// appends: those are the acknowledged-and-synced ones.
    fn write_store(root: &Path, file_size: u64, specs: &[Spec], sync_after: usize) -> Image {
        write_store_with(root, file_size, specs, sync_after, CQ_FILE)
    }

    /// [`write_store`] with ConsumeQueue files of `cq_file` bytes.
    fn write_store_with(
        root: &Path,
        file_size: u64,
        specs: &[Spec],
        sync_after: usize,
        cq_file: u64,
    ) -> Image {
        let mut cl = open_log(&root.join("commitlog"), file_size);
        let mut cq = ConsumeQueueStore::load(&root.join("consumequeue"), cq_file).unwrap();
        let (mut recs, mut items) = (Vec::new(), Vec::new());
        let mut synced = 0;
        let mut prev_end = 0;
        for i in 0..=specs.len() {
            if i == sync_after {
                synced = cl.files().flush(0).unwrap();
                assert_eq!(
                    synced,
                    cl.max_offset().0,
                    "a full flush reaches the write position"
                );
            }
            let Some(s) = specs.get(i) else { break };
            let ok = cl
                .append(&message(s, i as u64), T0 + i as i64 * TS_STEP)
                .unwrap();
            if ok.phy_offset.0 != prev_end {
                // The record did not fit: the writer left a BLANK and moved to the next file.
                assert_eq!(ok.phy_offset.0 % file_size, 0);
                items.push(Item::Blank(prev_end));
            }
            let bytes = cl
                .view()
                .read(ok.phy_offset.0, ok.wrote_bytes as usize)
                .unwrap()
                .as_bytes()
                .to_vec();
            let Ok(Check::Record(v)) = record::check(&bytes, true) else {
                panic!("freshly appended record does not decode")
            };
            let unit = CqUnit {
                phy_offset: ok.phy_offset.0 as i64,
                size: ok.wrote_bytes as i32,
                tags_code: v.tags_code(),
            };
            cq.put(&s.topic, s.qid, ok.queue_offset, unit).unwrap();
            items.push(Item::Rec(recs.len()));
            recs.push(Rec {
                start: ok.phy_offset.0,
                len: ok.wrote_bytes,
                topic: s.topic.clone(),
                qid: s.qid,
                qoff: ok.queue_offset.0,
                bytes,
            });
            prev_end = ok.end_offset().0;
        }
        Image {
            root: root.to_path_buf(),
            file_size,
            recs,
            items,
            synced,
        }
    }

    // ---- editing crash images as plain bytes ----

    fn disk(dir: &Path) -> BTreeMap<u64, Vec<u8>> {
        let mut m = BTreeMap::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if name.len() == 20 {
                m.insert(name.parse().unwrap(), std::fs::read(e.path()).unwrap());
            }
        }
        m
    }

    fn edit_file(dir: &Path, from: u64, f: impl FnOnce(&mut Vec<u8>)) {
        let p = dir.join(file_name_of(from));
        let mut b = std::fs::read(&p).unwrap();
        f(&mut b);
        std::fs::write(&p, &b).unwrap();
    }

    #[derive(Clone, Copy, Debug)]
    enum Crash {
        /// Power loss that drops every byte from here on; later files stay, all zeros (they were
        /// allocated, their data never reached the disk).
        ZeroFrom(u64),
        /// As `ZeroFrom`, but files starting at or after the point vanish (their creation was
        /// not durable).
        DropFrom(u64),
        /// One bit flipped.
        Flip { at: u64, bit: u8 },
        /// The 4 KiB page holding the point is overwritten with garbage.
        GarbagePage { at: u64, seed: u64 },
        /// From the point to the end of its page is zeroed (a torn page); later pages survive.
        ZeroPageTail(u64),
    }

    fn apply(img: &Image, crash: Crash) {
        let dir = img.cl_dir();
        let size = img.file_size;
        let froms: Vec<u64> = disk(&dir).into_keys().collect();
        match crash {
            Crash::ZeroFrom(c) | Crash::DropFrom(c) => {
                for from in froms {
                    if from >= c {
                        if matches!(crash, Crash::DropFrom(_)) {
                            std::fs::remove_file(dir.join(file_name_of(from))).unwrap();
                        } else {
                            edit_file(&dir, from, |b| b.fill(0));
                        }
                    } else if c < from + size {
                        edit_file(&dir, from, |b| b[(c - from) as usize..].fill(0));
                    }
                }
            }
            Crash::Flip { at, bit } => edit_file(&dir, at - at % size, |b| {
                b[(at % size) as usize] ^= 1 << bit;
            }),
            Crash::GarbagePage { at, seed } => edit_file(&dir, at - at % size, |b| {
                let page = (at % size - at % PAGE) as usize;
                for (i, x) in b[page..page + PAGE as usize].iter_mut().enumerate() {
                    *x = mix(seed ^ (i as u64) << 32) as u8;
                }
            }),
            Crash::ZeroPageTail(at) => edit_file(&dir, at - at % size, |b| {
                let pos = (at % size) as usize;
                let page_end = (at % size - at % PAGE + PAGE) as usize;
                b[pos..page_end].fill(0);
            }),
        }
    }

    /// Byte ranges of a record whose change the format is guaranteed to notice: TOTALSIZE, MAGIC,
    /// BODYCRC, BODYLEN + body (CRC), TOPICLEN, PROPLEN (lengths must add up to TOTALSIZE).
    fn covered(rec: &[u8]) -> [Range<usize>; 3] {
        let sys = i32::from_be_bytes(rec[36..40].try_into().unwrap());
        let magic = u32::from_be_bytes(rec[4..8].try_into().unwrap());
        let tls = MessageVersion::from_magic(magic).unwrap().topic_len_size();
        let bodylen_at =
            48 + sys_flag::born_host_len(sys) + 8 + sys_flag::store_host_len(sys) + 4 + 8;
        let body_len =
            i32::from_be_bytes(rec[bodylen_at..bodylen_at + 4].try_into().unwrap()) as usize;
        let topic_len_at = bodylen_at + 4 + body_len;
        let topic_len = match tls {
            1 => rec[topic_len_at] as usize,
            _ => u16::from_be_bytes([rec[topic_len_at], rec[topic_len_at + 1]]) as usize,
        };
        let proplen_at = topic_len_at + tls + topic_len;
        [
            0..12,
            bodylen_at..topic_len_at + tls,
            proplen_at..proplen_at + 2,
        ]
    }

    /// Bytes of the item at `at` on the (possibly edited) disk, `None` if its file is gone.
    fn bytes_at(d: &BTreeMap<u64, Vec<u8>>, size: u64, at: u64) -> Option<&[u8]> {
        d.get(&(at - at % size)).map(|b| &b[(at % size) as usize..])
    }

    /// Where the damage is, measured on the edited disk against the original bytes.
    #[derive(Debug)]
    struct Damage {
        /// Start of the first item (record or BLANK header) with any byte changed.
        first_changed: Option<u64>,
        /// Start of the first item with a change the format must detect.
        first_detectable: Option<u64>,
    }

    /// A record whose properties a torn page cut, stated independently of
    /// `record::torn_in_properties`: from some 4 KiB boundary at or after the start of its
    /// properties to its end, `now` is all zeros (its last byte included).
    fn torn(orig: &[u8], now: &[u8], at: u64) -> bool {
        let proplen_at = covered(orig)[2].start;
        let props_start = proplen_at + 2;
        (props_start..orig.len())
            .filter(|k| (at + *k as u64) % PAGE == 0)
            .any(|k| now[k..orig.len()].iter().all(|&b| b == 0))
            && props_start < orig.len()
    }

    fn damage(img: &Image, d: &BTreeMap<u64, Vec<u8>>, abnormal: bool) -> Damage {
        let mut out = Damage {
            first_changed: None,
            first_detectable: None,
        };
        for &item in &img.items {
            let at = img.item_at(item);
            let (changed, detectable) = match (item, bytes_at(d, img.file_size, at)) {
                (_, None) => (true, true),
                (Item::Blank(_), Some(now)) => {
                    let mut orig = [0u8; 8];
                    let remaining = (img.file_size - at % img.file_size) as u32;
                    record::encode_blank(&mut orig, remaining);
                    // Any BLANK header `check` still reads as a BLANK is equivalent to it.
                    let still_blank = matches!(record::check(now, true), Ok(Check::Blank { .. }));
                    (now[..8] != orig, !still_blank)
                }
                (Item::Rec(i), Some(now)) => {
                    let orig = &img.recs[i].bytes;
                    let now = &now[..orig.len()];
                    // A change the format must notice (covered bytes), or one that happens to
                    // break the record anyway (UTF-8, port range).
                    // Recovery also checks PHYSICALOFFSET against the record's position.
                    let decodes = matches!(record::check(now, true), Ok(Check::Record(v)) if v.total_size as usize == orig.len() && v.phy_offset as u64 == at);
                    let detectable = !decodes
                        || covered(orig)
                            .iter()
                            .any(|r| now[r.clone()] != orig[r.clone()])
                        || (abnormal && torn(orig, now, at));
                    (now != &orig[..], detectable)
                }
            };
            if changed && out.first_changed.is_none() {
                out.first_changed = Some(at);
            }
            if detectable {
                out.first_detectable = Some(at);
                break;
            }
        }
        out
    }

    /// An independent statement of recovery's rule, over the edited disk: walk the known items
    /// from `start`; a record counts if it still decodes (CRC checked) at its original length, a
    /// BLANK if it still reads as one and the next file exists; stop at the first that does not.
    fn expected_end(img: &Image, d: &BTreeMap<u64, Vec<u8>>, start: u64, abnormal: bool) -> u64 {
        let size = img.file_size;
        let mut end = start;
        for &item in img.items.iter().filter(|&&i| img.item_at(i) >= start) {
            let at = img.item_at(item);
            let Some(buf) = bytes_at(d, size, at) else {
                return end;
            };
            match (item, record::check(buf, true)) {
                (Item::Rec(i), Ok(Check::Record(v)))
                    if v.total_size as u64 == img.recs[i].len
                        && v.phy_offset as u64 == at
                        && !(abnormal && torn(&img.recs[i].bytes, buf, at)) =>
                {
                    end = img.recs[i].end()
                }
                (Item::Blank(_), Ok(Check::Blank { .. })) => {
                    let next = at - at % size + size;
                    if !d.contains_key(&next) {
                        return at;
                    }
                    end = next;
                }
                _ => return at,
            }
        }
        end
    }

    /// Reopens the CommitLog, recovers it (CRC checked) from file `start`, and checks the
    /// invariants that hold for every crash image. Returns the log and the report.
    fn recover_and_check(img: &Image, start: Option<usize>) -> (CommitLog, RecoveryReport) {
        let before = disk(&img.cl_dir());
        let dmg = damage(img, &before, start.is_some());
        let mut cl = open_log(&img.cl_dir(), img.file_size);
        // The harness's abnormal recoveries model a power loss.
        cl.expect_torn_pages(start.is_some());
        let start_from = {
            let files = cl.files().files();
            let idx = start
                .unwrap_or(files.len().saturating_sub(NORMAL_RECOVERY_FILES))
                .min(files.len().saturating_sub(1));
            files.get(idx).map_or(0, |f| f.file_from_offset())
        };
        let mut seen = Vec::new();
        let rep = cl
            .recover(true, start, |off, r| seen.push((off, r.total_size as u64)))
            .unwrap();
        let end = rep.end.0;

        // Exactly the end an independent reading of the image predicts.
        assert_eq!(
            end,
            expected_end(img, &before, start_from, start.is_some()),
            "damage {dmg:?}"
        );
        // A record boundary.
        assert!(
            end == start_from || img.recs.iter().any(|r| r.start == end || r.end() == end),
            "end {end} is not a record boundary"
        );
        // Never past detectable damage; never short of synced data when the damage is after it.
        if let Some(at) = dmg.first_detectable {
            assert!(end <= at, "end {end} is past damaged record at {at}");
        } else {
            assert_eq!(
                end,
                img.data_end().max(start_from),
                "nothing damaged, nothing lost"
            );
        }
        if dmg.first_changed.is_none_or(|c| c >= img.synced) && start_from <= img.synced {
            assert!(
                end >= img.synced,
                "end {end} lost synced data below {}",
                img.synced
            );
        }
        // The scan saw exactly the records below the end, each with its covered bytes intact.
        let want: Vec<(u64, u64)> = img
            .recs
            .iter()
            .filter(|r| r.start >= start_from && r.end() <= end)
            .map(|r| (r.start, r.len))
            .collect();
        assert_eq!(seen, want);
        for r in img.recs.iter().filter(|r| r.end() <= end) {
            let now = &bytes_at(&before, img.file_size, r.start).unwrap()[..r.len as usize];
            assert!(matches!(record::check(now, true), Ok(Check::Record(_))));
            for c in covered(&r.bytes) {
                assert_eq!(now[c.clone()], r.bytes[c]);
            }
        }
        // Nothing at or past the end is served: not by the view, not by walk.
        assert_eq!(cl.max_offset(), rep.end);
        let view = cl.view();
        for r in img.recs.iter().filter(|r| r.end() > end) {
            assert!(
                view.read(r.start, r.len as usize).is_none(),
                "{r:?} still readable"
            );
        }
        let mut walked = Vec::new();
        let stop = walk(
            &view,
            PhyOffset(view.min_offset()),
            cl.max_offset(),
            |off, r| {
                assert!(matches!(record::check(r.raw, true), Ok(Check::Record(_))));
                walked.push(off);
                true
            },
        )
        .unwrap();
        assert_eq!(stop, rep.end);
        let below: Vec<u64> = img
            .recs
            .iter()
            .filter(|r| r.start >= view.min_offset() && r.end() <= end)
            .map(|r| r.start)
            .collect();
        assert_eq!(walked, below);
        // A record with detectable damage never decodes.
        if let Some(at) = dmg.first_detectable {
            if let (Some(r), Some(now)) = (
                img.recs.iter().find(|r| r.start == at),
                bytes_at(&before, img.file_size, at),
            ) {
                // Served = decodes with its CRC *and* sits where it says (recovery checks both).
                // After a crash a torn record does not count either (`torn`).
                let served = matches!(record::check(now, true), Ok(Check::Record(v)) if v.total_size as u64 == r.len && v.phy_offset as u64 == at)
                    && !(start.is_some() && torn(&r.bytes, now, at));
                assert!(!served, "damaged record at {at} still decodes");
            }
        }
        (cl, rep)
    }

    /// After recovery: the ConsumeQueues, reloaded and recovered as at startup, are cut to the
    /// CommitLog end — every remaining unit points below it, and each queue holds exactly the
    /// units of its records below it. Returns the store for further appends.
    fn recover_cq_and_check(img: &Image, end: u64) -> ConsumeQueueStore {
        let mut cq = ConsumeQueueStore::load(&img.cq_dir(), CQ_FILE).unwrap();
        // As a start after a crash does, with the CommitLog recovered from its first byte.
        cq.recover_with(Some(0)).unwrap();
        cq.truncate_to_phy(end).unwrap();
        check_cq(img, &cq, end);
        cq
    }

    fn check_cq(img: &Image, cq: &ConsumeQueueStore, end: u64) {
        let mut per_queue: HashMap<(String, i32), Vec<&Rec>> = HashMap::new();
        for r in img.recs.iter().filter(|r| r.end() <= end) {
            per_queue
                .entry((r.topic.clone(), r.qid))
                .or_default()
                .push(r);
        }
        let table = cq.table();
        for topic in table.topics() {
            for q in table.queues_of(&topic) {
                let want = per_queue
                    .remove(&(topic.clone(), q.queue_id))
                    .unwrap_or_default();
                assert_eq!(
                    q.max_offset().0,
                    want.len() as u64,
                    "{topic}/{}",
                    q.queue_id
                );
                for (n, r) in want.iter().enumerate() {
                    assert_eq!(r.qoff, n as u64);
                    let u = q.unit(QueueOffset(n as u64)).unwrap();
                    assert_eq!((u.phy_offset as u64, u.size as u64), (r.start, r.len));
                    assert!(u.phy_offset as u64 + u.size as u64 <= end);
                }
                assert!(q.unit(QueueOffset(want.len() as u64)).is_none());
            }
        }
        assert!(
            per_queue.is_empty(),
            "queues missing: {:?}",
            per_queue.keys()
        );
        assert!(cq.max_physic_offset() <= end);
    }

    /// The store keeps working after recovery: queue offsets continue from the ConsumeQueues,
    /// the next record lands at the end (or the next file), and a second recovery finds it.
    fn append_after_recovery(img: &Image, mut cl: CommitLog, mut cq: ConsumeQueueStore, end: u64) {
        for (topic, qid, next) in cq.max_offsets() {
            cl.set_queue_offset(&topic, qid, next);
        }
        let s = spec("TopicA", 0, 300);
        let expect_q = cq.table().get("TopicA", 0).map_or(0, |q| q.max_offset().0);
        let ok = cl.append(&message(&s, 999), T0 + 999 * TS_STEP).unwrap();
        assert_eq!(ok.queue_offset.0, expect_q);
        let next_file = end - end % img.file_size + img.file_size;
        assert!(ok.phy_offset.0 == end || ok.phy_offset.0 == next_file);
        let unit = CqUnit {
            phy_offset: ok.phy_offset.0 as i64,
            size: ok.wrote_bytes as i32,
            tags_code: 0,
        };
        cq.put("TopicA", 0, ok.queue_offset, unit).unwrap();
        assert_eq!(
            cq.table().get("TopicA", 0).unwrap().max_offset().0,
            expect_q + 1
        );
        cl.files().flush(0).unwrap();
        drop(cl);
        let mut cl = open_log(&img.cl_dir(), img.file_size);
        let rep = cl.recover(true, Some(0), |_, _| {}).unwrap();
        // Exactly there: whatever a cut removed was zeroed, so nothing stale follows the new record
        // (see `a_commit_log_cut_is_not_undone_by_the_next_recovery`).
        assert_eq!(rep.end, ok.end_offset());
        let again = cl
            .view()
            .read(ok.phy_offset.0, ok.wrote_bytes as usize)
            .unwrap();
        assert!(
            matches!(record::check(again.as_bytes(), true), Ok(Check::Record(v)) if v.store_timestamp == T0 + 999 * TS_STEP)
        );
    }

    fn mixed_specs(n: usize) -> Vec<Spec> {
        (0..n)
            .map(|i| Spec {
                topic: ["TopicA", "TopicB", "T"][i % 3].into(),
                qid: (i % 2) as i32,
                body: 200 + (i * 397) % 1100,
                props: (i * 13) % 60,
                v6_store: i % 5 == 4,
            })
            .collect()
    }

    // ---- a) power loss drops unsynced bytes ----

    #[test]
    fn power_loss_keeps_every_synced_record_and_ends_at_the_last_one() {
        for drop_files in [false, true] {
            for sync_after in [0, 1, 9, 17, 29, 30] {
                let dir = tempfile::tempdir().unwrap();
                let img = write_store(dir.path(), 4096, &mixed_specs(30), sync_after);
                assert!(disk(&img.cl_dir()).len() >= 5, "spans several files");
                apply(
                    &img,
                    if drop_files {
                        Crash::DropFrom(img.synced)
                    } else {
                        Crash::ZeroFrom(img.synced)
                    },
                );
                let (cl, rep) = recover_and_check(&img, Some(0));
                assert_eq!(
                    rep.end.0, img.synced,
                    "drop_files={drop_files} sync_after={sync_after}"
                );
                assert!(
                    rep.truncated_reason.is_none(),
                    "a zero tail is the normal end of data"
                );
                assert_eq!(rep.records as usize, sync_after);
                let cq = recover_cq_and_check(&img, rep.end.0);
                append_after_recovery(&img, cl, cq, rep.end.0);
            }
        }
    }

    #[test]
    fn power_loss_with_default_normal_recovery_start() {
        // Normal recovery scans only the last three files; the end is the same.
        let dir = tempfile::tempdir().unwrap();
        let img = write_store(dir.path(), 4096, &mixed_specs(40), 33);
        apply(&img, Crash::ZeroFrom(img.synced));
        let (_cl, rep) = recover_and_check(&img, None);
        assert_eq!(rep.end.0, img.synced);
        assert!(rep.files_scanned <= NORMAL_RECOVERY_FILES as u64);
    }

    /// A power loss that kept the page with the start of a record's properties and lost the
    /// next leaves a record that still decodes (BODYCRC covers the body only) with its
    /// properties ending in zeros. After a crash recovery ends before it, saying why; it is
    /// never dispatched. A clean stop cannot tear a page, and normal recovery keeps the record.
    #[test]
    fn after_a_crash_a_record_with_torn_properties_ends_recovery() {
        for abnormal in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let specs: Vec<Spec> = (0..12)
                .map(|i| Spec {
                    props: 700,
                    ..spec("TopicT", i % 2, 300 + i as usize * 11)
                })
                .collect();
            // The first record whose properties hold a page boundary, and that boundary.
            let probe = write_store(dir.path(), 1 << 16, &specs, specs.len());
            let (victim, boundary) = probe
                .recs
                .iter()
                .enumerate()
                .find_map(|(i, r)| {
                    let props_start = r.start + covered(&r.bytes)[2].end as u64;
                    let b = props_start.div_ceil(PAGE) * PAGE;
                    (b < r.end() - 1).then_some((i, b))
                })
                .expect("some record's properties cross a page");
            drop(probe);
            let dir = tempfile::tempdir().unwrap();
            let img = write_store(dir.path(), 1 << 16, &specs, victim);
            apply(&img, Crash::ZeroFrom(boundary));
            let start = abnormal.then_some(0);
            let (_cl, rep) = recover_and_check(&img, start);
            let r = &img.recs[victim];
            if abnormal {
                assert_eq!(rep.end.0, r.start, "recovery ends before the torn record");
                let why = rep.truncated_reason.unwrap_or_default();
                assert!(why.contains("torn write"), "{why}");
                assert_eq!(rep.records as usize, victim);
            } else {
                assert_eq!(rep.end.0, r.end(), "normal recovery keeps it");
            }
        }
    }

    // ---- b) a torn last page ----

    #[test]
    fn a_torn_last_page_ends_recovery_on_a_boundary_before_the_tear() {
        for garbage in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let specs: Vec<Spec> = (0..14)
                .map(|i| spec("TopicA", i % 2, 900 + i as usize * 37))
                .collect();
            let img = write_store(dir.path(), 8192, &specs, 10);
            let last = img.data_end() - 1;
            let page = last - last % PAGE;
            let torn_from = if garbage { page } else { page + PAGE / 2 };
            apply(
                &img,
                if garbage {
                    Crash::GarbagePage { at: page, seed: 7 }
                } else {
                    Crash::ZeroPageTail(torn_from)
                },
            );
            let (cl, rep) = recover_and_check(&img, Some(0));
            let end = rep.end.0;
            // Every record wholly before the tear survives; the tear itself is cut (and
            // recover_and_check showed the end is the boundary before the first record whose
            // checked bytes the tear reached).
            let first_torn = img.recs.iter().find(|r| r.end() > torn_from).unwrap();
            assert!(end >= first_torn.start, "garbage={garbage}");
            assert!(end < img.data_end(), "garbage={garbage}");
            assert!(rep.truncated_reason.is_some());
            let cq = recover_cq_and_check(&img, end);
            append_after_recovery(&img, cl, cq, end);
        }
    }

    // ---- c) bit flips ----

    /// Field offsets within a record with IPv4 hosts and a v1 topic.
    fn field_offsets(r: &Rec) -> HashMap<&'static str, usize> {
        let c = covered(&r.bytes);
        let body_at = c[1].start + 4;
        let topic_len_at = c[1].end - 1;
        HashMap::from([
            ("TOTALSIZE", 3),
            ("TOTALSIZE_SIGN", 0),
            ("MAGICCODE", 5),
            ("BODYCRC", 11),
            ("QUEUEID", 15),
            ("QUEUEOFFSET", 27),
            ("PHYSICALOFFSET", 35),
            ("SYSFLAG_HOST_V6", 39),
            ("BORNTIMESTAMP", 47),
            ("BORNHOST_IP", 48),
            ("STORETIMESTAMP", 63),
            ("STOREHOST_IP", 64),
            ("RECONSUMETIMES", 75),
            ("PREPARED_TX_OFFSET", 83),
            ("BODYLEN", c[1].start + 3),
            ("BODY", body_at + 10),
            ("TOPICLEN", topic_len_at),
            ("TOPIC", topic_len_at + 1),
            ("PROPLEN", c[2].start + 1),
            ("PROPERTIES", c[2].end + 2),
        ])
    }

    fn flip_image(dir: &Path, field: &str, bit: u8) -> (Image, Rec) {
        let specs: Vec<Spec> = (0..6).map(|i| spec("TopicA", 0, 300 + i * 10)).collect();
        let img = write_store(dir, 1 << 16, &specs, 6);
        let victim = img.recs[3].clone();
        let at = victim.start + field_offsets(&victim)[field] as u64;
        apply(&img, Crash::Flip { at, bit });
        (img, victim)
    }

    #[test]
    fn a_flipped_bit_in_body_or_lengths_stops_recovery_before_that_record() {
        let cases = [
            ("BODY", 0, "BODYCRC"),
            ("BODY", 7, "BODYCRC"),
            ("BODYCRC", 0, "BODYCRC"),
            ("TOTALSIZE", 2, "TOTALSIZE"),
            ("TOTALSIZE_SIGN", 7, "TOTALSIZE"),
            ("MAGICCODE", 1, "MAGICCODE"),
            ("BODYLEN", 0, ""),
            ("BODYLEN", 6, ""),
            ("TOPICLEN", 0, ""),
            ("TOPICLEN", 7, "TOPICLEN"),
            ("PROPLEN", 0, ""),
            ("SYSFLAG_HOST_V6", 4, ""),
            ("SYSFLAG_HOST_V6", 5, ""),
        ];
        for (field, bit, reason) in cases {
            let dir = tempfile::tempdir().unwrap();
            let (img, victim) = flip_image(dir.path(), field, bit);
            let (_cl, rep) = recover_and_check(&img, Some(0));
            assert_eq!(rep.end.0, victim.start, "{field} bit {bit}");
            let why = rep.truncated_reason.unwrap();
            assert!(why.contains(reason), "{field} bit {bit}: {why}");
            // The corrupt record is never served: it does not decode with the CRC checked.
            let raw = std::fs::read(img.cl_dir().join(file_name_of(0))).unwrap();
            let at = victim.start as usize;
            assert!(
                !matches!(record::check(&raw[at..], true), Ok(Check::Record(v)) if v.total_size as u64 == victim.len),
                "{field} bit {bit}"
            );
            check_cq(&img, &recover_cq_and_check(&img, rep.end.0), rep.end.0);
        }
    }

    /// Documents a limit of the RocketMQ record format rather than of our code: BODYCRC covers
    /// only the body, so a flip in a field no length depends on — in the properties, or in the
    /// topic when the result is still UTF-8 — passes `check` and recovery keeps the record as it
    /// is now.
    /// (RocketMQ 5.x can add a whole-record CRC in the `__CRC32#` property; the store does not
    /// write it yet.)
    #[test]
    fn single_bit_flips_outside_the_crc_and_the_lengths_go_undetected() {
        let undetected = [
            ("QUEUEID", 0),
            ("QUEUEOFFSET", 0),
            ("BORNTIMESTAMP", 0),
            ("BORNHOST_IP", 0),
            ("STORETIMESTAMP", 0),
            ("STOREHOST_IP", 0),
            ("RECONSUMETIMES", 0),
            ("PREPARED_TX_OFFSET", 0),
            ("TOPIC", 0),
            ("PROPERTIES", 0),
            // Even a property byte turned into a lone UTF-8 continuation byte: properties are
            // read as Java reads them, any bytes (a RocketMQ store keeps a batch element's as
            // the client sent them, GBK included).
            ("PROPERTIES", 7),
        ];
        for (field, bit) in undetected {
            let dir = tempfile::tempdir().unwrap();
            let (img, victim) = flip_image(dir.path(), field, bit);
            let mut cl = open_log(&img.cl_dir(), img.file_size);
            let rep = cl.recover(true, Some(0), |_, _| {}).unwrap();
            assert_eq!(rep.end.0, img.data_end(), "{field}: kept");
            let served = cl.view().read(victim.start, victim.len as usize).unwrap();
            assert_ne!(
                served.as_bytes(),
                &victim.bytes[..],
                "{field}: served altered"
            );
        }
    }

    /// PHYSICALOFFSET is outside the CRC too, but recovery checks it against the record's actual
    /// position, so a flip there ends the valid data before the record.
    #[test]
    fn a_flipped_physical_offset_ends_recovery_before_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let (img, victim) = flip_image(dir.path(), "PHYSICALOFFSET", 3);
        let mut cl = open_log(&img.cl_dir(), img.file_size);
        let rep = cl.recover(true, Some(0), |_, _| {}).unwrap();
        assert_eq!(rep.end.0, victim.start);
        assert!(rep.truncated_reason.unwrap().contains("PHYSICALOFFSET"));
    }

    // ---- d) END_OF_FILE blanks, missing and zero files ----

    /// Appends 1000-byte-body messages until the log has rolled into a second file.
    fn two_file_image(dir: &Path) -> Image {
        let specs: Vec<Spec> = (0..5).map(|i| spec("TopicA", 0, 1000 + i)).collect();
        let img = write_store(dir, 4096, &specs, 5);
        assert!(matches!(img.items[3], Item::Blank(_)), "{:?}", img.items);
        assert_eq!(img.recs[3].start, 4096);
        img
    }

    #[test]
    fn a_blank_at_the_end_of_a_full_file_with_the_next_file_missing() {
        let dir = tempfile::tempdir().unwrap();
        let img = two_file_image(dir.path());
        let Item::Blank(blank_at) = img.items[3] else {
            unreachable!()
        };
        std::fs::remove_file(img.cl_dir().join(file_name_of(4096))).unwrap();
        let (mut cl, rep) = recover_and_check(&img, Some(0));
        // As RocketMQ: the end is the BLANK's position (the last record's end), not the file end.
        assert_eq!(rep.end.0, blank_at);
        assert_eq!(rep.end, PhyOffset(img.recs[2].end()));
        assert!(rep.truncated_reason.is_none());
        check_cq(&img, &recover_cq_and_check(&img, rep.end.0), rep.end.0);
        // The same message that did not fit still does not: the BLANK is rewritten and the log
        // rolls to the next file again.
        let ok = cl
            .append(&message(&spec("TopicA", 0, 1003), 3), T0)
            .unwrap();
        assert_eq!(ok.phy_offset, PhyOffset(4096));
        let raw = std::fs::read(img.cl_dir().join(file_name_of(0))).unwrap();
        let b = blank_at as usize;
        assert_eq!(&raw[b + 4..b + 8], &record::BLANK_MAGIC.to_be_bytes());
        assert_eq!(
            u32::from_be_bytes(raw[b..b + 4].try_into().unwrap()),
            4096 - blank_at as u32
        );
    }

    #[test]
    fn an_all_zero_next_file_ends_recovery_at_its_start() {
        // The allocator created file 2 (zeros), nothing reached it.
        let dir = tempfile::tempdir().unwrap();
        let img = two_file_image(dir.path());
        edit_file(&img.cl_dir(), 4096, |b| b.fill(0));
        let (cl, rep) = recover_and_check(&img, Some(0));
        assert_eq!(rep.end.0, 4096);
        assert!(rep.truncated_reason.is_none());
        assert_eq!(
            cl.files().files().len(),
            2,
            "the empty file is kept and reused"
        );
        let cq = recover_cq_and_check(&img, 4096);
        append_after_recovery(&img, cl, cq, 4096);
    }

    #[test]
    fn an_all_zero_middle_file_cuts_everything_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let img = write_store(dir.path(), 4096, &mixed_specs(20), 20);
        let n = disk(&img.cl_dir()).len() as u64;
        assert!(n >= 4);
        edit_file(&img.cl_dir(), 4096, |b| b.fill(0));
        let (cl, rep) = recover_and_check(&img, Some(0));
        assert_eq!(rep.end.0, 4096);
        assert_eq!(
            disk(&img.cl_dir()).into_keys().collect::<Vec<_>>(),
            [0, 4096],
            "files after the cut are deleted"
        );
        let cq = recover_cq_and_check(&img, 4096);
        append_after_recovery(&img, cl, cq, 4096);
    }

    #[test]
    fn a_single_all_zero_file_recovers_to_empty() {
        let dir = tempfile::tempdir().unwrap();
        let img = write_store(dir.path(), 4096, &mixed_specs(2), 0);
        edit_file(&img.cl_dir(), 0, |b| b.fill(0));
        let (cl, rep) = recover_and_check(&img, Some(0));
        assert_eq!(rep.end.0, 0);
        assert_eq!(rep.records, 0);
        let cq = recover_cq_and_check(&img, 0);
        append_after_recovery(&img, cl, cq, 0);
    }

    #[test]
    fn a_pre_allocated_file_past_the_data_is_removed() {
        // Data ends mid-file 0; the allocator had already made file 4096 (all zeros).
        let dir = tempfile::tempdir().unwrap();
        let img = write_store(dir.path(), 4096, &mixed_specs(2), 2);
        crate::store::mapped_file::MappedFile::create(&img.cl_dir(), 4096, 4096, Warm::No).unwrap();
        let (_cl, rep) = recover_and_check(&img, Some(0));
        assert_eq!(rep.end.0, img.data_end());
        assert_eq!(disk(&img.cl_dir()).len(), 1);
    }

    // ---- ConsumeQueue cut, in the running store (no reload) ----

    #[test]
    fn truncate_to_phy_in_place_leaves_no_unit_at_or_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let img = write_store(dir.path(), 4096, &mixed_specs(24), 24);
        let mut cq = ConsumeQueueStore::load(&img.cq_dir(), CQ_FILE).unwrap();
        cq.recover().unwrap();
        // Cut at every record boundary, largest first, on the same live store.
        for r in img.recs.iter().rev().step_by(3) {
            cq.truncate_to_phy(r.start).unwrap();
            check_cq(&img, &cq, r.start);
        }
        cq.truncate_to_phy(0).unwrap();
        check_cq(&img, &cq, 0);
    }

    // ---- abnormal recovery: start file from the checkpoint, re-dispatch, cut ----

    #[test]
    fn abnormal_recovery_redispatches_from_the_checkpoint_into_a_lagging_consume_queue() {
        let dir = tempfile::tempdir().unwrap();
        let specs = mixed_specs(40);
        let img = write_store(dir.path(), 4096, &specs, 34);
        // The ConsumeQueue lagged: its units stop after message 20 (as if dispatch was behind).
        let cq_last = 20usize;
        let cq_ts = T0 + cq_last as i64 * TS_STEP;
        // (Written from scratch with the first 21 units only: a ConsumeQueue as dispatch had left
        // it, not one cut by an earlier recovery.)
        std::fs::remove_dir_all(img.cq_dir()).unwrap();
        {
            let mut cq = ConsumeQueueStore::load(&img.cq_dir(), CQ_FILE).unwrap();
            for r in &img.recs[..=cq_last] {
                let unit = CqUnit {
                    phy_offset: r.start as i64,
                    size: r.len as i32,
                    tags_code: 0,
                };
                cq.put(&r.topic, r.qid, QueueOffset(r.qoff), unit).unwrap();
            }
            cq.flush(0).unwrap();
        }
        let mut cp = Checkpoint::open(&dir.path().join("checkpoint")).unwrap();
        cp.set_physic_msg_timestamp(T0 + 33 * TS_STEP); // last synced message
        cp.set_logics_msg_timestamp(cq_ts);
        cp.set_index_msg_timestamp(T0 + 5 * TS_STEP);
        cp.flush().unwrap();
        drop(cp);
        apply(&img, Crash::ZeroFrom(img.synced));

        // Startup order (`DefaultMessageStore.load`): checkpoint, ConsumeQueue recovery, CommitLog
        // abnormal recovery.
        let cp = Checkpoint::open(&dir.path().join("checkpoint")).unwrap();
        let min_ts = abnormal_recovery_min_timestamp(&cp.data(), false);
        assert_eq!(min_ts, cq_ts - 3000);
        let mut cq = ConsumeQueueStore::load(&img.cq_dir(), CQ_FILE).unwrap();
        cq.recover().unwrap();
        let mut cl = open_log(&img.cl_dir(), img.file_size);
        let files = cl.files().files();
        let start = abnormal_recovery_start_file(&files, min_ts);
        let first_ts = |i: usize| first_record_store_timestamp(&files[i]).unwrap();
        assert!(first_ts(start) <= min_ts);
        assert!(start + 1 == files.len() || first_ts(start + 1) > min_ts);
        assert!(start > 0, "the bound skips the oldest files");
        drop(files);
        let mut errors = Vec::new();
        let rep = cl
            .recover(true, Some(start), |off, r| {
                let unit = CqUnit {
                    phy_offset: off as i64,
                    size: r.total_size as i32,
                    tags_code: r.tags_code(),
                };
                if let Err(e) = cq.put(
                    r.topic,
                    r.queue_id,
                    QueueOffset(r.queue_offset as u64),
                    unit,
                ) {
                    errors.push(e.to_string());
                }
            })
            .unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(rep.end.0, img.synced);
        cq.truncate_to_phy(rep.end.0).unwrap();
        // Re-dispatch filled the lag exactly once (duplicates dropped), nothing past the end.
        check_cq(&img, &cq, rep.end.0);
        // With messageIndexSafe the older index time moves the start back.
        let start_idx = abnormal_recovery_start_file(
            &cl.files().files(),
            abnormal_recovery_min_timestamp(&cp.data(), true),
        );
        assert!(start_idx < start);
    }

    // ---- cuts must stay cut: stale bytes past a truncation ----

    /// A recovery cut must be final: the bytes after it were judged not to be part of the log
    /// (and the ConsumeQueues were cut to match), so a later recovery must never read them back.
    /// RocketMQ's `truncateDirtyFiles` only moves the positions ("tail bytes are not zeroed, new
    /// writes overwrite them"): when a new record ends exactly where an old one began, the old
    /// records after it would come back. Ours zeroes the cut tail; this pins it.
    #[test]
    fn a_commit_log_cut_is_not_undone_by_the_next_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let specs: Vec<Spec> = (0..6).map(|_| spec("TopicA", 0, 300)).collect();
        let img = write_store(dir.path(), 1 << 16, &specs, 6);
        let victim = img.recs[2].clone();
        let body = victim.start + covered(&victim.bytes)[1].start as u64 + 4;
        apply(&img, Crash::Flip { at: body, bit: 0 });
        // First start: the corrupt record and everything after it are cut.
        let (mut cl, rep) = recover_and_check(&img, Some(0));
        assert_eq!(rep.end.0, victim.start);
        let mut cq = recover_cq_and_check(&img, rep.end.0);
        for (topic, qid, next) in cq.max_offsets() {
            cl.set_queue_offset(&topic, qid, next);
        }
        // One new message of the same length (different content) is acknowledged and synced.
        let ok = cl
            .append(&message(&specs[2], 100), T0 + 100 * TS_STEP)
            .unwrap();
        assert_eq!(
            (ok.phy_offset.0, ok.wrote_bytes),
            (victim.start, victim.len)
        );
        assert_eq!(ok.queue_offset, QueueOffset(2));
        let unit = CqUnit {
            phy_offset: ok.phy_offset.0 as i64,
            size: ok.wrote_bytes as i32,
            tags_code: 0,
        };
        cq.put("TopicA", 0, ok.queue_offset, unit).unwrap();
        cl.files().flush(0).unwrap();
        cq.flush(0).unwrap();
        drop((cl, cq));
        // Second start (say, after a clean stop): the log must end after the new record.
        let mut cl = open_log(&img.cl_dir(), img.file_size);
        let mut seen = Vec::new();
        let rep = cl
            .recover(true, Some(0), |off, r| seen.push((off, r.queue_offset)))
            .unwrap();
        assert_eq!(
            rep.end,
            ok.end_offset(),
            "records cut by the first recovery came back: {seen:?}"
        );
    }

    /// The same for ConsumeQueues: were `truncate_to_phy` to move positions only, units past the
    /// cut of a queue that receives nothing new would be found valid again by the next
    /// `recover()` and — once the CommitLog has grown past them — point into other records.
    #[test]
    fn a_consume_queue_cut_is_not_undone_by_the_next_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let specs: Vec<Spec> = (0..10)
            .map(|i| spec(["TopicA", "TopicB"][i % 2], 0, 300))
            .collect();
        let img = write_store(dir.path(), 1 << 16, &specs, 6);
        apply(&img, Crash::ZeroFrom(img.synced));
        // First start: CommitLog cut after 6 records, queues cut to 3 units each.
        let (mut cl, rep) = recover_and_check(&img, Some(0));
        let mut cq = recover_cq_and_check(&img, rep.end.0);
        for (topic, qid, next) in cq.max_offsets() {
            cl.set_queue_offset(&topic, qid, next);
        }
        // Only TopicA receives new messages; they overwrite the CommitLog past the old data.
        for i in 0..8 {
            let ok = cl.append(&message(&specs[0], 200 + i), T0).unwrap();
            let unit = CqUnit {
                phy_offset: ok.phy_offset.0 as i64,
                size: ok.wrote_bytes as i32,
                tags_code: 0,
            };
            cq.put("TopicA", 0, ok.queue_offset, unit).unwrap();
        }
        cl.files().flush(0).unwrap();
        cq.flush(0).unwrap();
        drop((cl, cq));
        // Second start, in `DefaultMessageStore.load`'s order.
        let mut cq = ConsumeQueueStore::load(&img.cq_dir(), CQ_FILE).unwrap();
        cq.recover().unwrap();
        let mut cl = open_log(&img.cl_dir(), img.file_size);
        let rep = cl.recover(true, Some(0), |_, _| {}).unwrap();
        cq.truncate_to_phy(rep.end.0).unwrap();
        let b = cq.table().get("TopicB", 0).unwrap();
        let view = cl.view();
        for n in 0..b.max_offset().0 {
            let u = b.unit(QueueOffset(n)).unwrap();
            let rec = view.read(u.phy_offset as u64, u.size as usize).unwrap();
            let topic = match record::check(rec.as_bytes(), true) {
                Ok(Check::Record(v)) => v.topic.to_owned(),
                other => format!("{other:?}"),
            };
            assert_eq!(topic, "TopicB", "TopicB unit {n} -> {u:?}");
        }
        assert_eq!(b.max_offset(), QueueOffset(3), "TopicB units resurrected");
    }

    // ---- the start-file rule itself ----

    #[test]
    fn start_file_is_the_newest_whose_first_record_is_old_enough() {
        let dir = tempfile::tempdir().unwrap();
        let img = write_store(dir.path(), 4096, &mixed_specs(30), 30);
        let cl = open_log(&img.cl_dir(), 4096);
        let files = cl.files().files();
        let firsts: Vec<i64> = files
            .iter()
            .map(|f| first_record_store_timestamp(f).unwrap())
            .collect();
        assert!(firsts.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(firsts[0], T0);
        assert_eq!(
            abnormal_recovery_start_file(&files, 0),
            0,
            "none qualifies: the oldest"
        );
        assert_eq!(abnormal_recovery_start_file(&files, T0 - 1), 0);
        assert_eq!(abnormal_recovery_start_file(&files, T0), 0);
        assert_eq!(
            abnormal_recovery_start_file(&files, i64::MAX),
            files.len() - 1
        );
        for (i, &ts) in firsts.iter().enumerate().skip(1) {
            assert_eq!(
                abnormal_recovery_start_file(&files, ts),
                i,
                "inclusive bound"
            );
            assert_eq!(abnormal_recovery_start_file(&files, ts - 1), i - 1);
        }
        assert_eq!(abnormal_recovery_start_file(&[], 123), 0);
        drop((files, cl));

        // A newest file whose first record has a bad magic or a zero store time is passed over.
        let n = disk(&img.cl_dir()).len();
        let last_from = (n as u64 - 1) * 4096;
        edit_file(&img.cl_dir(), last_from, |b| b[record::MAGIC_POS] ^= 0xFF);
        let cl = open_log(&img.cl_dir(), 4096);
        assert_eq!(
            abnormal_recovery_start_file(&cl.files().files(), i64::MAX),
            n - 2
        );
        drop(cl);
        edit_file(&img.cl_dir(), last_from, |b| {
            b[record::MAGIC_POS] ^= 0xFF;
            let at = record::store_timestamp_pos(0);
            b[at..at + 8].fill(0);
        });
        let cl = open_log(&img.cl_dir(), 4096);
        assert_eq!(
            first_record_store_timestamp(&cl.files().files()[n - 1]),
            None
        );
        assert_eq!(
            abnormal_recovery_start_file(&cl.files().files(), i64::MAX),
            n - 2
        );
    }

    #[test]
    fn first_record_store_time_follows_an_ipv6_born_host() {
        let dir = tempfile::tempdir().unwrap();
        let mut cl = open_log(dir.path(), 4096);
        let mut m = message(&spec("T", 0, 10), 1);
        m.born_host = "[::1]:5000".parse().unwrap();
        m.fill_derived();
        cl.append(&m, 42).unwrap();
        assert_eq!(
            first_record_store_timestamp(&cl.files().files()[0]),
            Some(42)
        );
    }

    // ---- e) property: any N, sizes, sync point, crash kind and point ----

    fn spec_strategy() -> impl Strategy<Value = Spec> {
        (0usize..4, 0i32..3, 0usize..1400, 0usize..120, any::<bool>()).prop_map(
            |(t, qid, body, props, v6)| Spec {
                topic: [
                    "TopicA",
                    "T",
                    "B",
                    // > 127 bytes: a v2 record (2-byte topic length)
                    "%RETRY%group-with-a-rather-long-name-0123456789-0123456789-0123456789-0123456789-0123456789-0123456789-xyz",
                ][t]
                    .into(),
                qid,
                body,
                props,
                v6_store: v6,
            },
        )
    }

    #[derive(Clone, Debug)]
    enum Kind {
        ZeroFrom,
        DropFrom,
        /// A flip in a byte the format must notice (selector picks the byte and bit).
        FlipCovered(u32),
        /// A flip anywhere (may land in undetectable fields).
        FlipAnywhere(u8),
        Garbage(u64),
        ZeroPageTail,
    }

    fn kind_strategy() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::ZeroFrom),
            Just(Kind::DropFrom),
            any::<u32>().prop_map(Kind::FlipCovered),
            (0u8..8).prop_map(Kind::FlipAnywhere),
            any::<u64>().prop_map(Kind::Garbage),
            Just(Kind::ZeroPageTail),
        ]
    }

    /// Crash images per run: `PROPTEST_CASES` (a nightly run sets 100,000; a failing case
    /// prints its shrunk input), else 10,000 — the plan's T3 per-change figure, about 40 s of a
    /// debug build here, most of them on memory-backed files (`image_dir`).
    fn crash_image_cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000)
    }

    /// Where a crash image is built: one in ten on the real disk, the rest on tmpfs (`/dev/shm`)
    /// when there is one. An image stands for what a disk kept: the test drops, tears and flips
    /// bytes itself, so the `fdatasync`s of `write_store` only cost time on a real disk (12.5 s
    /// against 2.4 s for 1,000 images here). The disk's share keeps the production path of a cut
    /// (`FALLOC_FL_ZERO_RANGE`, which tmpfs refuses) under test.
    fn image_dir(on_disk: bool) -> tempfile::TempDir {
        if on_disk {
            return tempfile::tempdir().unwrap();
        }
        tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap()
    }

    proptest! {
        // No regression files: they would be written next to this source file.
        #![proptest_config(ProptestConfig { cases: crash_image_cases(), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_crash_image_recovers_to_a_valid_prefix(
            file_size in prop_oneof![Just(4096u64), Just(8192u64)],
            specs in prop::collection::vec(spec_strategy(), 1..40),
            sync_frac in 0.0f64..=1.0,
            point_frac in 0.0f64..1.0,
            kind in kind_strategy(),
            on_disk in prop::bool::weighted(0.1),
        ) {
            let dir = image_dir(on_disk);
            let sync_after = (sync_frac * specs.len() as f64) as usize;
            let img = write_store(dir.path(), file_size, &specs, sync_after);
            let point = (point_frac * img.data_end() as f64) as u64;
            let crash = match kind {
                Kind::ZeroFrom => Crash::ZeroFrom(point),
                Kind::DropFrom => Crash::DropFrom(point),
                Kind::FlipAnywhere(bit) => Crash::Flip { at: point, bit },
                Kind::FlipCovered(sel) => {
                    let r = img.recs.iter().find(|r| r.end() > point).unwrap();
                    let bytes: Vec<usize> = covered(&r.bytes).into_iter().flatten().collect();
                    let at = r.start + bytes[(sel >> 3) as usize % bytes.len()] as u64;
                    Crash::Flip { at, bit: (sel & 7) as u8 }
                }
                Kind::Garbage(seed) => Crash::GarbagePage { at: point, seed },
                Kind::ZeroPageTail => Crash::ZeroPageTail(point),
            };
            apply(&img, crash);
            if matches!(kind, Kind::FlipCovered(_)) {
                let d = damage(&img, &disk(&img.cl_dir()), true);
                prop_assert!(d.first_detectable.is_some(), "{crash:?} {d:?}");
            }
            let (cl, rep) = recover_and_check(&img, Some(0));
            let cq = recover_cq_and_check(&img, rep.end.0);
            append_after_recovery(&img, cl, cq, rep.end.0);
        }
    }

    // ---- ConsumeQueue pages torn by sector ----

    /// Tears the queues of topic `T` by `sector`: each queue's units from a point drawn from
    /// `case` on are unsynced, and each sector holding any of them is kept or lost (zeros past
    /// that point: what the disk held) by a draw from `case`.
    fn tear_by_sector(img: &Image, case: u64, sector: u64) {
        for qid in 0..2i32 {
            let units = img.recs.iter().filter(|r| r.qid == qid).count() as u64;
            // A third of the queues flushed up to unit 102, whose offset then sits in the last
            // unsynced bytes of a sector and its size in the next: lost and kept, it reads as a
            // valid unit at offset 0.
            let draw = mix((case << 8) | qid as u64);
            let flushed = if draw % 3 == 0 && units > 102 {
                102
            } else {
                draw % (units + 1)
            };
            let qdir = img.cq_dir().join("T").join(qid.to_string());
            for (base, mut bytes) in disk(&qdir) {
                let mut changed = false;
                for (i, chunk) in bytes.chunks_mut(sector as usize).enumerate() {
                    let at = base + i as u64 * sector;
                    let from = (flushed * 20).max(at);
                    let kept = mix((case << 16) | ((qid as u64) << 12) | (at / sector)) % 2 == 0;
                    if from >= at + chunk.len() as u64 || kept {
                        continue;
                    }
                    chunk[(from - at) as usize..].fill(0);
                    changed = true;
                }
                if changed {
                    std::fs::write(qdir.join(file_name_of(base)), bytes).unwrap();
                }
            }
        }
    }

    /// A power loss keeps each 512-byte sector of an unsynced page or not, independently. Every
    /// queue's units from a random point on (its flushed count) are in such pages: a lost sector
    /// holds what the disk had, the units before that point and zeros after. A 20-byte unit
    /// across two sectors can then keep its offset and size and lose its tagsCode — or lose the
    /// high half of its offset and keep the rest. Recovery scans the queues; re-dispatch, which
    /// after an abnormal stop replays every record from the recovery start while repairing,
    /// must leave each queue with exactly its records' units, tags included. Without repairing,
    /// torn units that look valid survive (checked too: the tear must be able to show).
    #[test]
    fn consume_queue_units_torn_by_sector_are_repaired_by_redispatch() {
        const SECTOR: u64 = 512;
        // 120 units a file: five sectors, whose boundaries fall 12, 4, 16 and 8 bytes into
        // units 25, 51, 76 and 102 — in the tagsCode, the offset's low half, the tagsCode and
        // between offset and size.
        const CQ_TORN_FILE: u64 = 20 * 120;
        let mut survived_without_repair = 0;
        for case in 0..48u64 {
            let n = 120 + (mix(case) % 240) as usize;
            let specs: Vec<Spec> = (0..n)
                .map(|i| spec("T", (i % 2) as i32, 100 + (i * 37) % 300))
                .collect();
            // The same torn image twice (all of it is deterministic): re-dispatched without
            // repairing, then with.
            let mut wrong_without = 0;
            for repairing in [false, true] {
                let dir = image_dir(false);
                let img = write_store_with(dir.path(), 4096, &specs, n, CQ_TORN_FILE);
                // In half the cases the CommitLog lost a tail too (ASYNC_FLUSH): the queues
                // are cut to its end and only the records below it are re-dispatched.
                let end = match mix(case ^ 0xc0ffee) % 4 {
                    0 | 1 => img.data_end(),
                    k => img.recs[img.recs.len() * (k as usize - 1) / 3].start,
                };
                tear_by_sector(&img, case, SECTOR);
                let mut cq = ConsumeQueueStore::load(&img.cq_dir(), CQ_TORN_FILE).unwrap();
                cq.recover_with(Some(0)).unwrap();
                cq.truncate_to_phy(end).unwrap();
                cq.set_repairing(repairing);
                let want = |r: &Rec| {
                    let Ok(Check::Record(v)) = record::check(&r.bytes, true) else {
                        unreachable!("an appended record decodes")
                    };
                    CqUnit {
                        phy_offset: r.start as i64,
                        size: r.len as i32,
                        tags_code: v.tags_code(),
                    }
                };
                for r in img.recs.iter().filter(|r| r.end() <= end) {
                    cq.put(&r.topic, r.qid, QueueOffset(r.qoff), want(r))
                        .unwrap();
                }
                let repaired = cq.set_repairing(false);
                let wrong: Vec<(i32, u64)> = img
                    .recs
                    .iter()
                    .filter(|r| r.end() <= end)
                    .filter(|r| {
                        let q = cq.table().get(&r.topic, r.qid).unwrap();
                        q.unit(QueueOffset(r.qoff)) != Some(want(r))
                    })
                    .map(|r| (r.qid, r.qoff))
                    .collect();
                if repairing {
                    assert!(wrong.is_empty(), "case {case}: units {wrong:?} still wrong");
                    check_cq(&img, &cq, end);
                    assert_eq!(repaired, wrong_without as u64, "case {case}");
                } else {
                    assert_eq!(repaired, 0);
                    wrong_without = wrong.len();
                    survived_without_repair += wrong.len();
                }
            }
        }
        assert!(
            survived_without_repair > 0,
            "no torn unit looked valid in any case: the tear was never put to the test"
        );
    }
}
