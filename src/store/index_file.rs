//! IndexFile: RocketMQ's `index/` directory — a hash index from `topic#key` / `topic#uniqKey` to
//! CommitLog physical offsets, used by QUERY_MESSAGE (by KEYS) and by message-id lookups
//! (by UNIQ_KEY). Byte-compatible with RocketMQ's `IndexFile`/`IndexHeader`. The Java methods
//! named below are theirs and `IndexService`'s, all in
//! store/src/main/java/org/apache/rocketmq/store/index/.
//!
//! # What it owns
//! [`IndexStore`] owns the directory and every index file in it. It is held by exactly one owner
//! (the `IndexBuilder` actor): all writes — puts, file creation, rolling, deletion, msync — go
//! through `&mut IndexStore` / `&IndexStore` on that one thread. [`IndexReader`]s are cheap clones
//! handed to any number of query threads; they never block the writer and never take a lock.
//!
//! # Calls in and out
//! * in (owner): [`IndexStore::open`] at startup (`IndexService.load`) — a file whose size or
//!   header breaks a rule is left out with every later file ([`IndexStore::damage`]; RocketMQ
//!   maps it as it is), and [`IndexStore::begin_rebuild`] takes them, and files naming records
//!   past the recovered end, off the disk behind a rebuild marker that [`finish_rebuild`]
//!   removes once re-dispatch is done — then, after an abnormal
//!   exit, [`IndexStore::destroy_newer_than`] when the machine may have gone down, or
//!   [`IndexStore::mark_all_unflushed`] when only the process died (files kept as the page cache
//!   holds them); [`IndexStore::put`] per dispatched
//!   record; [`IndexStore::flush`]; [`IndexStore::delete_files_below`] when the CommitLog min offset
//!   grows (`IndexService.deleteExpiredFile`). After a successful `flush`, the owner may
//!   checkpoint `indexMsgTimestamp = full_files_end_timestamp()` (RocketMQ checkpoints only full
//!   files, `IndexService.flush`).
//! * in (readers): [`IndexReader::query`] (`IndexService.queryOffset`). The caller applies the
//!   request cap (`min(maxNum, maxMsgsNumBatch)`) and reads the records at the returned offsets.
//! * out: nothing is sent; errors are [`IndexError`]s naming the file, field/offset and rule.
//!
//! # Layout (all big-endian)
//! `[0,40)` header: i64 beginTimestamp, i64 endTimestamp, i64 beginPhyOffset, i64 endPhyOffset,
//! i32 hashSlotCount, i32 indexCount. `[40, 40+4·slots)` slot table: i32 newest entry number of
//! the slot, 0 = empty. Then `indexNum` entries of 20 bytes: i32 keyHash, i64 phyOffset,
//! i32 timeDiff (seconds since beginTimestamp), i32 prevIndex. Entry 0 is never used, so
//! `indexCount` starts at 1 and the file is full when `indexCount >= indexNum`.
//!
//! # Concurrency invariant (replaces RocketMQ's read/write lock)
//! Each [`IndexFile`] keeps its published state in atomics: `index_count` (the published count),
//! begin values and a small ring of (endTimestamp, endPhyOffset) pairs. The writer, for entry `c`:
//! 1. writes the 20 entry bytes at `c` (no reader can reach `c` yet, see below);
//! 2. updates begin/hashSlotCount/end values (atomics);
//! 3. publishes `index_count = c + 1` with `Release`, and writes the on-disk header (count
//!    `c + 1`, end values);
//! 4. stores the slot (an `AtomicI32` over the 4 mapped bytes, big-endian value) with `Release`.
//!
//! Readers load the slot with `Acquire`, then the count with `Acquire`, and never follow an entry
//! number `>= count`. Entries below a published count are never written again, so every entry a
//! reader copies is complete and immutable. The count is published *before* the slot (rather than
//! after) so that a reader that sees a new slot value always sees a count above it — a valid chain
//! is never hidden. The on-disk header goes before the slot for the same reason across a process
//! death: a kill between the two leaves a counted entry no slot points to yet (its record is put
//! again, see [`IndexStore::put`]), never a slot at or beyond the header's count, which would cut
//! the chain behind it off. Such slot values, left by files of older builds, are refused by
//! readers and treated as empty by the writer. Readers never read header or slot bytes except
//! through these atomics; the on-disk header is written only for durability.
//! The file list is published through `ArcSwap`: rolling or deleting swaps in a new list; a reader
//! holding an old list keeps its files mapped (unlinking a mapped file is safe on Unix).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use memmap2::{MmapOptions, MmapRaw};

use super::mapped_file_queue::FileQueueView;
use crate::offset::PhyOffset;

/// `IndexHeader.INDEX_HEADER_SIZE`.
pub const INDEX_HEADER_SIZE: usize = 40;
/// Bytes per hash slot.
pub const HASH_SLOT_SIZE: usize = 4;
/// Bytes per index entry.
pub const INDEX_ENTRY_SIZE: usize = 20;
/// `maxHashSlotNum` default.
pub const DEFAULT_MAX_HASH_SLOT_NUM: u32 = 5_000_000;
/// `maxIndexNum` default.
pub const DEFAULT_MAX_INDEX_NUM: u32 = 20_000_000;

const BEGIN_TIMESTAMP_AT: usize = 0;
const END_TIMESTAMP_AT: usize = 8;
const BEGIN_PHY_OFFSET_AT: usize = 16;
const END_PHY_OFFSET_AT: usize = 24;
const HASH_SLOT_COUNT_AT: usize = 32;
const INDEX_COUNT_AT: usize = 36;
/// `yyyyMMddHHmmssSSS`.
const NAME_LEN: usize = 17;
/// Size of the (endTimestamp, endPhyOffset) ring; see [`IndexFile::end_pair`].
const END_RING: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index config hashSlotNum={slot_num} indexNum={index_num}: {rule}")]
    Config {
        slot_num: u32,
        index_num: u32,
        rule: &'static str,
    },
    #[error("index file {}: {op} failed: {source}", .file.display())]
    Io {
        file: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    #[error("index file {}: file size is {actual} bytes, expected {expected} (40 + hashSlotNum*4 + indexNum*20)", .file.display())]
    Size {
        file: PathBuf,
        actual: u64,
        expected: u64,
    },
    #[error("index file {}: file size is {actual} bytes, expected {expected} (40 + hashSlotNum*4 + indexNum*20), and no index file has that size: if maxHashSlotNum or maxIndexNum changed, restore them, or move the index files away and create an empty file index.rebuild beside the index directory to rebuild the index from the CommitLog", .file.display())]
    ConfigMismatch {
        file: PathBuf,
        actual: u64,
        expected: u64,
    },
    #[error("index file {}: header field {field} at offset {offset} is {value}: {rule}", .file.display())]
    Header {
        file: PathBuf,
        field: &'static str,
        offset: usize,
        value: i64,
        rule: &'static str,
    },
}

fn io_err(file: &Path, op: &'static str) -> impl FnOnce(io::Error) -> IndexError {
    let file = file.to_path_buf();
    move |source| IndexError::Io { file, op, source }
}

/// `IndexFile.indexKeyHashMethod`: `abs(String.hashCode())` with `Integer.MIN_VALUE` mapped to 0,
/// over the concatenation of `parts`. Java's hash is a left fold over UTF-16 units, so hashing the
/// parts in sequence equals hashing the joined string and `topic#key` is never allocated.
fn index_key_hash(parts: &[&str]) -> i32 {
    let h = parts
        .iter()
        .flat_map(|p| p.encode_utf16())
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    if h == i32::MIN {
        0
    } else {
        h.abs()
    }
}

fn file_size(slot_num: u32, index_num: u32) -> u64 {
    INDEX_HEADER_SIZE as u64
        + u64::from(slot_num) * HASH_SLOT_SIZE as u64
        + u64::from(index_num) * INDEX_ENTRY_SIZE as u64
}

/// File name for a creation instant: local time `yyyyMMddHHmmssSSS`, as RocketMQ names them.
fn name_for_ms(ms: i64) -> String {
    let utc = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    utc.with_timezone(&chrono::Local)
        .format("%Y%m%d%H%M%S%3f")
        .to_string()
}

/// The name one millisecond after `name` (used to keep names unique and increasing). Falls back
/// to numeric +1 if `name` is not a valid date, which still sorts after it.
fn name_after(name: &str) -> String {
    let num = |r: std::ops::Range<usize>| name.get(r).and_then(|s| s.parse::<u32>().ok());
    let parsed = (|| {
        let date = chrono::NaiveDate::from_ymd_opt(num(0..4)? as i32, num(4..6)?, num(6..8)?)?;
        date.and_hms_milli_opt(num(8..10)?, num(10..12)?, num(12..14)?, num(14..17)?)
    })();
    match parsed {
        Some(t) => (t + chrono::TimeDelta::milliseconds(1))
            .format("%Y%m%d%H%M%S%3f")
            .to_string(),
        None => format!("{:017}", name.parse::<u64>().unwrap_or(0) + 1),
    }
}

fn is_index_file_name(name: &str) -> bool {
    name.len() == NAME_LEN && name.bytes().all(|b| b.is_ascii_digit())
}

/// Fully allocates `size` bytes so later writes through the mapping cannot hit ENOSPC (SIGBUS).
fn allocate(file: &File, size: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on an fd that `file` keeps open for the whole call.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size as libc::off_t) };
        match rc {
            0 => Ok(()),
            // Filesystem cannot preallocate: a plain length is the best available.
            libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL => file.set_len(size),
            err => Err(io::Error::from_raw_os_error(err)),
        }
    }
    #[cfg(not(target_os = "linux"))]
    file.set_len(size)
}

/// Header values as plain numbers (creation and load).
#[derive(Clone, Copy)]
struct Header {
    begin_timestamp: i64,
    end_timestamp: i64,
    begin_phy_offset: i64,
    end_phy_offset: i64,
    hash_slot_count: i32,
    index_count: i32,
}

/// One mapped index file. Shared as `Arc<IndexFile>` between the writer and readers; only the
/// private writer methods, reachable from [`IndexStore`] alone, modify it.
#[doc(alias = "IndexHeader")]
pub struct IndexFile {
    path: PathBuf,
    name: String,
    slot_num: u32,
    index_num: u32,
    map: MmapRaw,
    _file: File,
    begin_timestamp: AtomicI64,
    begin_phy_offset: AtomicI64,
    /// The end pair after put `k` (entry `k`) lives at `end_ring[k % END_RING]`; the pair of a
    /// file with published count `c` is at `(c - 1) % END_RING`.
    end_ring: [(AtomicI64, AtomicI64); END_RING],
    hash_slot_count: AtomicI32,
    /// The published count: entries `1..index_count` are complete and immutable.
    index_count: AtomicI32,
    dirty: AtomicBool,
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("name", &self.name)
            .field("index_count", &self.index_count())
            .finish()
    }
}

impl IndexFile {
    fn from_parts(path: PathBuf, slots: u32, entries: u32, map: MmapRaw, file: File) -> Self {
        // Slots are used as AtomicI32: they must be 4-aligned; mmap returns page-aligned memory.
        assert_eq!(
            map.as_ptr() as usize % 4,
            0,
            "mapping is not 4-byte aligned"
        );
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        IndexFile {
            name: name.unwrap_or_default(),
            path,
            slot_num: slots,
            index_num: entries,
            map,
            _file: file,
            begin_timestamp: AtomicI64::new(0),
            begin_phy_offset: AtomicI64::new(0),
            end_ring: std::array::from_fn(|_| (AtomicI64::new(0), AtomicI64::new(0))),
            hash_slot_count: AtomicI32::new(0),
            index_count: AtomicI32::new(1),
            dirty: AtomicBool::new(false),
        }
    }

    /// Sets the in-memory state before the file is shared with any reader.
    fn set_header(&self, h: &Header) {
        self.begin_timestamp
            .store(h.begin_timestamp, Ordering::Relaxed);
        self.begin_phy_offset
            .store(h.begin_phy_offset, Ordering::Relaxed);
        let ring = &self.end_ring[(h.index_count - 1) as usize % END_RING];
        ring.0.store(h.end_timestamp, Ordering::Relaxed);
        ring.1.store(h.end_phy_offset, Ordering::Relaxed);
        self.hash_slot_count
            .store(h.hash_slot_count, Ordering::Relaxed);
        self.index_count.store(h.index_count, Ordering::Release);
    }

    /// Creates `dir/name` fully allocated, with a header inheriting the previous file's end
    /// values (`IndexService.getAndCreateLastIndexFile`). Built under a temporary name and linked
    /// last, so a file with a real name always has its full size and a header.
    fn create(
        dir: &Path,
        name: &str,
        slots: u32,
        entries: u32,
        prev_end: (i64, i64),
    ) -> Result<Self, IndexError> {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let _ = std::fs::remove_file(&tmp); // leftover of a creation interrupted by a crash
        let size = file_size(slots, entries);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp);
        let file = file.map_err(io_err(&path, "create"))?;
        let map = allocate(&file, size)
            .and_then(|()| MmapOptions::new().len(size as usize).map_raw(&file))
            .inspect(random_access);
        let map = match map {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(io_err(&path, "allocate and map")(e));
            }
        };
        let f = IndexFile::from_parts(path.clone(), slots, entries, map, file);
        let (end_timestamp, end_phy_offset) = prev_end;
        f.set_header(&Header {
            begin_timestamp: end_timestamp,
            end_timestamp,
            begin_phy_offset: end_phy_offset,
            end_phy_offset,
            hash_slot_count: 0,
            index_count: 1,
        });
        f.write_header();
        // Inode and header on the disk before a name points at them, and the name with them (as
        // `MappedFile`'s creation: without a journal, a power loss could otherwise leave the
        // name pointing at a stale inode, or lose it while the checkpoint counts the file).
        if let Err(e) = f._file.sync_all() {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err(&path, "sync")(e));
        }
        // hard_link never replaces an existing file (unlike rename).
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        linked.map_err(io_err(&path, "link"))?;
        super::mapped_file::sync_dir(dir).map_err(io_err(&path, "sync the directory of"))?;
        Ok(f)
    }

    /// Maps an existing file, validating its size and header (`IndexService.load` maps each file
    /// as it is).
    fn open(path: &Path, slots: u32, entries: u32) -> Result<Self, IndexError> {
        let file = OpenOptions::new().read(true).write(true).open(path);
        let file = file.map_err(io_err(path, "open"))?;
        let actual = file.metadata().map_err(io_err(path, "stat"))?.len();
        let expected = file_size(slots, entries);
        if actual != expected {
            return Err(IndexError::Size {
                file: path.to_path_buf(),
                actual,
                expected,
            });
        }
        let map = MmapOptions::new()
            .len(expected as usize)
            .map_raw(&file)
            .inspect(random_access);
        let f = IndexFile::from_parts(
            path.to_path_buf(),
            slots,
            entries,
            map.map_err(io_err(path, "mmap"))?,
            file,
        );
        // SAFETY: the file is not shared yet: no other thread can be writing the header.
        let raw: [u8; INDEX_HEADER_SIZE] = unsafe { f.read_bytes(0) };
        let i64_at = |at: usize| i64::from_be_bytes(raw[at..at + 8].try_into().unwrap());
        let i32_at = |at: usize| i32::from_be_bytes(raw[at..at + 4].try_into().unwrap());
        let bad = |field, offset, value, rule| IndexError::Header {
            file: path.to_path_buf(),
            field,
            offset,
            value,
            rule,
        };
        for (field, at) in [
            ("beginTimestamp", BEGIN_TIMESTAMP_AT),
            ("endTimestamp", END_TIMESTAMP_AT),
            ("beginPhyOffset", BEGIN_PHY_OFFSET_AT),
            ("endPhyOffset", END_PHY_OFFSET_AT),
        ] {
            if i64_at(at) < 0 {
                return Err(bad(field, at, i64_at(at), "must not be negative"));
            }
        }
        let hash_slot_count = i32_at(HASH_SLOT_COUNT_AT);
        if hash_slot_count < 0 {
            return Err(bad(
                "hashSlotCount",
                HASH_SLOT_COUNT_AT,
                hash_slot_count.into(),
                "must not be negative",
            ));
        }
        let index_count = i32_at(INDEX_COUNT_AT);
        if index_count < 0 || index_count as u32 > entries {
            return Err(bad(
                "indexCount",
                INDEX_COUNT_AT,
                index_count.into(),
                "must be within 0..=indexNum",
            ));
        }
        f.set_header(&Header {
            begin_timestamp: i64_at(BEGIN_TIMESTAMP_AT),
            end_timestamp: i64_at(END_TIMESTAMP_AT),
            begin_phy_offset: i64_at(BEGIN_PHY_OFFSET_AT),
            end_phy_offset: i64_at(END_PHY_OFFSET_AT),
            hash_slot_count,
            // RocketMQ writes the header only when flushing: 0 means "never flushed", read as 1.
            index_count: index_count.max(1),
        });
        Ok(f)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn begin_timestamp(&self) -> i64 {
        self.begin_timestamp.load(Ordering::Relaxed)
    }
    pub fn begin_phy_offset(&self) -> i64 {
        self.begin_phy_offset.load(Ordering::Relaxed)
    }
    pub fn end_timestamp(&self) -> i64 {
        self.end_pair().0
    }
    pub fn end_phy_offset(&self) -> i64 {
        self.end_pair().1
    }
    pub fn hash_slot_count(&self) -> i32 {
        self.hash_slot_count.load(Ordering::Relaxed)
    }
    /// The published indexCount (next entry number; starts at 1).
    pub fn index_count(&self) -> i32 {
        self.index_count.load(Ordering::Acquire)
    }
    pub fn is_full(&self) -> bool {
        self.index_count() >= self.index_num as i32
    }

    /// (endTimestamp, endPhyOffset) of one and the same put, without a lock: the pair is read
    /// from the ring slot of the count seen first, and accepted unless the writer could have
    /// started overwriting that slot meanwhile (it does so only after publishing 3 more counts;
    /// `put_key`'s `Release` fence makes such an overwrite visible as a larger count here).
    /// A retry therefore only happens when the writer made progress: lock-free.
    fn end_pair(&self) -> (i64, i64) {
        loop {
            let c1 = self.index_count.load(Ordering::Acquire);
            let ring = &self.end_ring[(c1 - 1) as usize % END_RING];
            let pair = (
                ring.0.load(Ordering::Relaxed),
                ring.1.load(Ordering::Relaxed),
            );
            fence(Ordering::Acquire);
            let c2 = self.index_count.load(Ordering::Relaxed);
            if c2 - c1 < END_RING as i32 - 1 {
                return pair;
            }
        }
    }

    fn entry_pos(&self, index: i32) -> usize {
        INDEX_HEADER_SIZE
            + self.slot_num as usize * HASH_SLOT_SIZE
            + index as usize * INDEX_ENTRY_SIZE
    }

    /// Copies `N` bytes at `pos` out of the mapping.
    ///
    /// # Safety
    /// No thread may write `pos..pos + N` concurrently: the caller reads either a file not yet
    /// shared, or an entry below a count it loaded with `Acquire` (immutable by the invariant).
    unsafe fn read_bytes<const N: usize>(&self, pos: usize) -> [u8; N] {
        assert!(pos + N <= self.map.len(), "index read beyond the mapping");
        let mut out = [0u8; N];
        // SAFETY: in bounds (asserted); the mapping lives as long as `self`; no concurrent
        // writer per this function's contract. Raw copy: no reference to shared bytes is made.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(pos), out.as_mut_ptr(), N) };
        out
    }

    /// Writes `bytes` at `pos`.
    ///
    /// # Safety
    /// Only the owning writer calls this, and only for bytes readers never read: the header
    /// (readers use the atomics) or an entry at or above the published count.
    unsafe fn write_bytes(&self, pos: usize, bytes: &[u8]) {
        assert!(
            pos + bytes.len() <= self.map.len(),
            "index write beyond the mapping"
        );
        // SAFETY: in bounds (asserted), single writer, no reader looks at these bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(pos),
                bytes.len(),
            )
        };
    }

    /// The 4 bytes of hash slot `slot` as an atomic holding a big-endian i32.
    fn slot(&self, slot: u32) -> &AtomicI32 {
        assert!(slot < self.slot_num, "hash slot out of range");
        let pos = INDEX_HEADER_SIZE + slot as usize * HASH_SLOT_SIZE;
        // SAFETY: `pos` is in bounds and 4-aligned (page-aligned mapping, checked in
        // `from_parts`, + 40 + 4k); the mapping outlives the returned `&self`-bound reference;
        // slot bytes are only ever accessed through this atomic view while the file is shared
        // (the writer stores, readers load), so there is no mixed atomic/plain access.
        unsafe { AtomicI32::from_ptr(self.map.as_mut_ptr().add(pos).cast::<i32>()) }
    }

    /// Writes the whole on-disk header from the atomics. Writer only.
    fn write_header(&self) {
        let (end_ts, end_phy) = self.end_pair();
        let mut h = [0u8; INDEX_HEADER_SIZE];
        h[0..8].copy_from_slice(&self.begin_timestamp().to_be_bytes());
        h[8..16].copy_from_slice(&end_ts.to_be_bytes());
        h[16..24].copy_from_slice(&self.begin_phy_offset().to_be_bytes());
        h[24..32].copy_from_slice(&end_phy.to_be_bytes());
        h[32..36].copy_from_slice(&self.hash_slot_count().to_be_bytes());
        h[36..40].copy_from_slice(&self.index_count().to_be_bytes());
        // SAFETY: header bytes are never read through the mapping by readers; writer only.
        unsafe { self.write_bytes(0, &h) };
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// `IndexFile.putKey`. Writer only; returns false when the file is full.
    fn put_key(&self, key_hash: i32, phy_offset: i64, store_timestamp: i64) -> bool {
        let count = self.index_count.load(Ordering::Relaxed); // only this thread stores it
        if count >= self.index_num as i32 {
            return false;
        }
        let slot = self.slot(key_hash as u32 % self.slot_num);
        let old = i32::from_be(slot.load(Ordering::Relaxed));
        let prev = if old > 0 && old < count {
            old
        } else if old == count {
            // A put killed after its slot but before its header (files of builds that stored the
            // slot first): the entry it wrote at `count` holds the slot's previous value. Its
            // record is put again (the replay rule), so that chain continues here.
            // SAFETY: entry `count` is at the published count: only this thread touches it.
            let e: [u8; INDEX_ENTRY_SIZE] = unsafe { self.read_bytes(self.entry_pos(count)) };
            let p = i32::from_be_bytes(e[16..20].try_into().unwrap());
            if p > 0 && p < count {
                p
            } else {
                0
            }
        } else {
            // Empty, or a value beyond the count: a leftover of a crash.
            0
        };
        let empty = prev == 0;
        let begin = self.begin_timestamp();
        let time_diff = if begin <= 0 {
            0
        } else {
            (store_timestamp.saturating_sub(begin) / 1000).clamp(0, i64::from(i32::MAX)) as i32
        };
        let mut entry = [0u8; INDEX_ENTRY_SIZE];
        entry[0..4].copy_from_slice(&key_hash.to_be_bytes());
        entry[4..12].copy_from_slice(&phy_offset.to_be_bytes());
        entry[12..16].copy_from_slice(&time_diff.to_be_bytes());
        entry[16..20].copy_from_slice(&prev.to_be_bytes());
        // SAFETY: entry `count` is at the published count: no reader follows it yet.
        unsafe { self.write_bytes(self.entry_pos(count), &entry) };
        if count <= 1 {
            // RocketMQ resets begin on the first entry, after computing its time diff.
            self.begin_phy_offset.store(phy_offset, Ordering::Relaxed);
            self.begin_timestamp
                .store(store_timestamp, Ordering::Relaxed);
        }
        if empty {
            self.hash_slot_count.fetch_add(1, Ordering::Relaxed);
        }
        // Orders the previous count publication before this ring write (see `end_pair`).
        fence(Ordering::Release);
        let ring = &self.end_ring[count as usize % END_RING];
        ring.0.store(store_timestamp, Ordering::Relaxed);
        ring.1.store(phy_offset, Ordering::Relaxed);
        // Publish: count first, then the slot (module docs explain the order). The file's header
        // is written before the slot too: a process killed between the two leaves an entry the
        // header counts but no slot points to yet — its key comes back when the record is put
        // again (the replay rule re-puts the last record) — never a slot the header does not
        // count, which would cut the whole chain behind it off.
        self.index_count.store(count + 1, Ordering::Release);
        self.write_header();
        slot.store(count.to_be(), Ordering::Release);
        true
    }

    /// `IndexFile.selectPhyOffset`: walks one slot chain. Reader-safe.
    fn select(&self, key_hash: i32, max_num: usize, begin: i64, end: i64, out: &mut Vec<i64>) {
        let head = i32::from_be(
            self.slot(key_hash as u32 % self.slot_num)
                .load(Ordering::Acquire),
        );
        let count = self.index_count.load(Ordering::Acquire);
        if count <= 1 || head <= 0 || head >= count {
            return;
        }
        // Loaded after the count: begin changes only with entry 1, which is published by now.
        let file_begin = self.begin_timestamp();
        let mut current = head;
        // A valid chain visits each entry at most once; the bound stops cycles in corrupt files.
        for _ in 0..count {
            if out.len() >= max_num {
                break;
            }
            // SAFETY: 0 < current < count, loaded with Acquire: entry is complete and immutable.
            let e: [u8; INDEX_ENTRY_SIZE] = unsafe { self.read_bytes(self.entry_pos(current)) };
            let hash = i32::from_be_bytes(e[0..4].try_into().unwrap());
            let phy = i64::from_be_bytes(e[4..12].try_into().unwrap());
            let time_diff = i32::from_be_bytes(e[12..16].try_into().unwrap());
            let prev = i32::from_be_bytes(e[16..20].try_into().unwrap());
            if time_diff < 0 {
                break;
            }
            let time = file_begin.saturating_add(i64::from(time_diff) * 1000);
            if hash == key_hash && time >= begin && time <= end {
                out.push(phy);
            }
            if prev <= 0 || prev >= count || prev == current || time < begin {
                break;
            }
            current = prev;
        }
    }

    /// Unlinks the file; readers still holding it keep a valid mapping until they drop it.
    fn unlink(&self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(file = %self.path.display(), error = %e, "cannot delete index file");
        }
    }
}

/// Result of [`IndexReader::query`]: phy offsets ascending (hash collisions included; the caller
/// re-checks keys), and the newest file's end values (`indexLastUpdateTimestamp/Phyoffset`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryResult {
    pub phy_offsets: Vec<i64>,
    pub last_update_timestamp: i64,
    pub last_update_phy_offset: i64,
}

type FileList = Arc<ArcSwap<Vec<Arc<IndexFile>>>>;

/// The writer's side of the `index/` directory. Exactly one owner.
#[doc(alias = "IndexService")]
pub struct IndexStore {
    dir: PathBuf,
    slot_num: u32,
    index_num: u32,
    /// The writer's list, oldest first (name order); `published` mirrors it for readers.
    files: Vec<Arc<IndexFile>>,
    published: FileList,
    damage: Option<IndexDamage>,
    /// New files are named after this one: the name of every file a rebuild removed, so a file
    /// of the rebuild is never taken for one the rebuild marker says to delete.
    name_floor: Option<String>,
    /// A rebuild began: its first entry goes into a new file (named after the floor), never
    /// into a kept one, which a start after a power loss could not tell from a torn one.
    roll_next: bool,
}

/// Index files [`IndexStore::open`] left out, to be taken off the disk and rebuilt: the first
/// whose size or header breaks a rule and every file after it, and what a rebuild marker left by
/// an interrupted start still names.
#[derive(Debug, Default)]
pub struct IndexDamage {
    /// Why, naming the file, field and rule (or the marker).
    pub reason: String,
    /// Files to delete (name order).
    pub delete: Vec<PathBuf>,
    /// The damaged file, moved to `<root>/index.corrupt/` for a look.
    pub corrupt: Option<PathBuf>,
    /// The start of an interrupted rebuild (a CommitLog offset): re-dispatch begins there at the
    /// latest.
    pub resume_from: Option<i64>,
}

/// `<root>/index.rebuild` (beside `index/`, where RocketMQ would take any file for an index
/// file and refuse to load): written (durably) before a rebuild removes index files, removed
/// once dispatch has indexed the whole CommitLog again and the index is flushed. A start that
/// finds it — the one before was stopped during the rebuild, cleanly, by a kill or by a power
/// loss — removes what it names and every file the rebuild made (named after `floor`), and
/// rebuilds from `from` again, whatever the checkpoint or the abort file say. An empty or
/// unreadable one means "rebuild everything from the first CommitLog file": the way to rebuild
/// an index whose files were moved away.
const REBUILD_MARKER: &str = "index.rebuild";

/// Where damaged index files are kept for a look: `<root>/index.corrupt/` (outside `index/`,
/// for the same reason).
const CORRUPT_DIR: &str = "index.corrupt";

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct RebuildMarker {
    from: i64,
    corrupt: Option<String>,
    delete: Vec<String>,
    /// The newest name in the directory when the rebuild began: files named after it are the
    /// rebuild's own.
    floor: Option<String>,
}

fn marker_path(dir: &Path) -> PathBuf {
    dir.with_file_name(REBUILD_MARKER)
}

/// The store root: the index directory's parent (`.` for a bare relative name).
fn root_of(dir: &Path) -> &Path {
    dir.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Whether `f` indexes a record at or past CommitLog offset `end` (its last entry's record).
fn names_past(f: &IndexFile, end: i64) -> bool {
    f.end_phy_offset() >= end
}

/// Refuses a geometry the files cannot have: RocketMQ's sizes and counts are Java `int`s, and
/// entry 0 is never used.
fn check_geometry(slot_num: u32, index_num: u32) -> Result<(), IndexError> {
    let config = |rule| IndexError::Config {
        slot_num,
        index_num,
        rule,
    };
    if slot_num == 0 || slot_num > i32::MAX as u32 {
        return Err(config("hashSlotNum must be within 1..=i32::MAX"));
    }
    if index_num < 2 || index_num > i32::MAX as u32 {
        return Err(config(
            "indexNum must be within 2..=i32::MAX (entry 0 is unused)",
        ));
    }
    if usize::try_from(file_size(slot_num, index_num)).is_err() {
        return Err(config("file size does not fit the address space"));
    }
    Ok(())
}

/// The index file names in `dir`, sorted. Removes what an interrupted creation of ours left
/// (`.*.tmp`); other files are logged and left alone.
fn list_index_files(dir: &Path) -> Result<Vec<String>, IndexError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir, "list directory"))? {
        let entry = entry.map_err(io_err(dir, "list directory"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry
            .file_type()
            .map_err(io_err(&entry.path(), "stat"))?
            .is_file()
        {
            continue;
        }
        if is_index_file_name(&name) {
            names.push(name);
        } else if name.starts_with('.') && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path()); // our interrupted creation
        } else {
            tracing::warn!(file = %entry.path().display(), "ignoring non-index file in index dir");
        }
    }
    names.sort();
    Ok(names)
}

/// The rebuild marker an interrupted start left beside `dir`, with its path, if there is one.
/// An empty or unreadable marker reads as the default one: rebuild everything from offset 0.
fn read_rebuild_marker(dir: &Path) -> Result<Option<(PathBuf, RebuildMarker)>, IndexError> {
    let path = marker_path(dir);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read(&path).map_err(io_err(&path, "read"))?;
    let marker = match serde_json::from_slice::<RebuildMarker>(&text) {
        Ok(m) => m,
        Err(e) => {
            if !text.is_empty() {
                tracing::error!(file = %path.display(), error = %e,
                    "unreadable index rebuild marker: rebuilding the whole index");
            }
            RebuildMarker::default() // from 0, every file a rebuild file
        }
    };
    Ok(Some((path, marker)))
}

/// Splits `names` by an interrupted rebuild's marker: the files it names and those the rebuild
/// made (named after its floor) go, as the returned damage; the rest are kept. Also returns the
/// name floor for new files: after every file there was.
fn apply_rebuild_marker(
    dir: &Path,
    (path, marker): (PathBuf, RebuildMarker),
    names: Vec<String>,
) -> (Vec<String>, IndexDamage, Option<String>) {
    // Only index file names: the marker never reaches outside `dir`.
    let listed = |n: &String| marker.delete.contains(n) || marker.corrupt.as_ref() == Some(n);
    let floor = marker.floor.as_ref().filter(|f| is_index_file_name(f));
    let (gone, kept): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|n| listed(n) || floor.is_none_or(|f| n > f));
    let name_floor = floor.cloned().max(gone.iter().max().cloned());
    let corrupt = marker
        .corrupt
        .filter(|n| gone.contains(n))
        .map(|n| dir.join(n));
    let damage = IndexDamage {
        reason: format!(
            "{}: a rebuild of the index from CommitLog offset {} did not finish",
            path.display(),
            marker.from
        ),
        delete: gone
            .iter()
            .map(|n| dir.join(n))
            .filter(|p| Some(p) != corrupt.as_ref())
            .collect(),
        corrupt,
        resume_from: Some(marker.from),
    };
    (kept, damage, name_floor)
}

/// Maps the files `names` in order, up to the first whose size or header breaks a rule: that
/// one and every later one are added to `damage` instead.
fn load_index_files(
    dir: &Path,
    names: &[String],
    slot_num: u32,
    index_num: u32,
    damage: &mut Option<IndexDamage>,
) -> Result<Vec<Arc<IndexFile>>, IndexError> {
    // A file of the wrong size is damage only if another file has the size the config asks
    // for; otherwise the config more likely changed (hashSlotNum, indexNum), and rebuilding
    // the whole index would destroy every file over a typo: refused.
    let expected = file_size(slot_num, index_num);
    let config_matches = names
        .iter()
        .any(|n| std::fs::metadata(dir.join(n)).is_ok_and(|m| m.len() == expected));
    let mut files = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        match IndexFile::open(&dir.join(n), slot_num, index_num) {
            Ok(f) => files.push(Arc::new(f)),
            Err(IndexError::Size {
                file,
                actual,
                expected,
            }) if !config_matches => {
                return Err(IndexError::ConfigMismatch {
                    file,
                    actual,
                    expected,
                })
            }
            // The index is derived from the CommitLog: a file whose size or header breaks a
            // rule (a truncated copy, a damaged disk) is rebuilt rather than refusing the
            // start. The files after it go too — the index is appended in CommitLog order,
            // so the damaged file's records could not be indexed again in front of them.
            Err(error @ (IndexError::Size { .. } | IndexError::Header { .. })) => {
                add_damage(damage, &error, dir, &names[i..]);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(files)
}

/// Adds to `damage` the file `rest[0]`, which broke a rule (`error`), and every file after it.
fn add_damage(damage: &mut Option<IndexDamage>, error: &IndexError, dir: &Path, rest: &[String]) {
    let d = damage.get_or_insert_with(IndexDamage::default);
    if !d.reason.is_empty() {
        d.reason.push_str("; ");
    }
    d.reason.push_str(&error.to_string());
    let damaged = dir.join(&rest[0]);
    if d.corrupt.is_none() {
        d.corrupt = Some(damaged);
    } else {
        d.delete.push(damaged);
    }
    d.delete.extend(rest[1..].iter().map(|n| dir.join(n)));
}

impl IndexStore {
    /// Opens (creating if needed) `dir` and loads its index files in name order, up to the first
    /// whose size or header breaks a rule (see [`damage`](Self::damage)). Other errors (I/O,
    /// config, and a wrong size when no file has the size the config gives) refuse.
    pub fn open(dir: &Path, slot_num: u32, index_num: u32) -> Result<IndexStore, IndexError> {
        check_geometry(slot_num, index_num)?;
        std::fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))?;
        let names = list_index_files(dir)?;
        let (names, mut damage, name_floor) = match read_rebuild_marker(dir)? {
            Some(marker) => {
                let (kept, damage, floor) = apply_rebuild_marker(dir, marker, names);
                (kept, Some(damage), floor)
            }
            None => (names, None, None),
        };
        let files = load_index_files(dir, &names, slot_num, index_num, &mut damage)?;
        // The last file takes new entries, anywhere in it (hash slots): a RocketMQ store's index
        // files are sparse, and a write into a hole on a full disk is a SIGBUS, so its blocks are
        // reserved now (one syscall for a file this store made, which has them).
        if let Some(last) = files.last() {
            allocate(&last._file, file_size(slot_num, index_num))
                .map_err(io_err(&last.path, "reserve the blocks (a sparse file) of"))?;
        }
        let published = Arc::new(ArcSwap::from_pointee(files.clone()));
        Ok(IndexStore {
            dir: dir.to_path_buf(),
            slot_num,
            index_num,
            files,
            published,
            damage,
            name_floor,
            roll_next: false,
        })
    }

    /// What [`open`](Self::open) left out to be rebuilt, if anything (the store serves without
    /// it until [`begin_rebuild`](Self::begin_rebuild)).
    pub fn damage(&self) -> Option<&IndexDamage> {
        self.damage.as_ref()
    }

    /// Before re-dispatch from CommitLog offset `from` rebuilds the index: writes the rebuild
    /// marker (durably) naming `from`, every file naming a record at or past `end` and the
    /// [`damage`](Self::damage), then deletes those files newest first and moves the damaged
    /// one to `<root>/index.corrupt/` (never over an earlier one). New files get names after
    /// every file there was. The caller has lowered the checkpoint first, and calls
    /// [`finish_rebuild`] once dispatch has caught up and the index is flushed. Returns how many
    /// files went.
    pub fn begin_rebuild(&mut self, from: i64, end: i64) -> Result<usize, IndexError> {
        let damage = self.damage.take().unwrap_or_default();
        let (past, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.files)
            .into_iter()
            .partition(|f| names_past(f, end));
        self.files = kept;
        self.publish(); // readers stop finding them before they disappear from the directory
        let mut delete: Vec<PathBuf> = past.iter().map(|f| f.path.clone()).collect();
        delete.extend(damage.delete);
        delete.sort();
        delete.dedup();
        let name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned());
        let mut marker = RebuildMarker {
            from,
            corrupt: damage.corrupt.as_ref().and_then(name),
            delete: delete.iter().filter_map(name).collect(),
            floor: None,
        };
        let newest = marker.delete.iter().chain(&marker.corrupt).max().cloned();
        let kept = self.files.last().map(|f| f.name().to_string());
        marker.floor = newest.max(kept).max(self.name_floor.clone());
        self.name_floor = marker.floor.clone();
        self.roll_next = true;
        let marker_path = marker_path(&self.dir);
        let tmp = marker_path.with_extension("rebuild.tmp");
        let json = serde_json::to_vec(&marker).expect("a marker serialises");
        std::fs::write(&tmp, json).map_err(io_err(&tmp, "write"))?;
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(io_err(&tmp, "sync"))?;
        std::fs::rename(&tmp, &marker_path).map_err(io_err(&tmp, "rename into place"))?;
        let root = root_of(&self.dir);
        super::mapped_file::sync_dir(root).map_err(io_err(root, "sync the directory"))?;
        let sync_dir = || {
            super::mapped_file::sync_dir(&self.dir).map_err(io_err(&self.dir, "sync the directory"))
        };
        for path in delete.iter().rev() {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(io_err(path, "delete (to rebuild it)")(e))
                }
                _ => {}
            }
        }
        sync_dir()?;
        if let Some(first) = &damage.corrupt {
            if first.exists() {
                let aside_dir = self.dir.with_file_name(CORRUPT_DIR);
                std::fs::create_dir_all(&aside_dir).map_err(io_err(&aside_dir, "create"))?;
                let file_name = first.file_name().unwrap_or_default().to_string_lossy();
                let aside = (0..)
                    .map(|i| match i {
                        0 => aside_dir.join(&*file_name),
                        i => aside_dir.join(format!("{file_name}.{i}")),
                    })
                    .find(|a| !a.exists())
                    .expect("a free name");
                super::mapped_file::sync_dir(root_of(&self.dir))
                    .map_err(io_err(&aside_dir, "sync the directory of"))?;
                if let Err(e) = std::fs::rename(first, &aside) {
                    // Another file system (index/ mounted or linked apart): the look is lost,
                    // the rebuild is not.
                    tracing::error!(file = %first.display(), error = %e,
                        "cannot move the damaged index file aside; deleting it");
                    std::fs::remove_file(first).map_err(io_err(first, "delete"))?;
                } else {
                    super::mapped_file::sync_dir(&aside_dir)
                        .map_err(io_err(&aside_dir, "sync the directory"))?;
                }
                sync_dir()?;
            }
        }
        Ok(delete.len() + usize::from(damage.corrupt.is_some()))
    }

    /// `IndexService.buildIndex` for one record: indexes `topic#uniqKey` (if any) then
    /// `topic#key` for each non-empty key. A record below the current end phy offset was indexed
    /// before (replay after recovery) and is skipped. Rolls to a new file (named from `now_ms`)
    /// when full. On error the record may be partly indexed; a retry re-adds those keys.
    pub fn put<'k>(
        &mut self,
        topic: &str,
        keys: impl Iterator<Item = &'k str>,
        uniq_key: Option<&str>,
        phy_offset: i64,
        store_timestamp: i64,
        now_ms: i64,
    ) -> Result<(), IndexError> {
        if phy_offset < self.last_end_phy_offset() {
            return Ok(());
        }
        if let Some(uniq) = uniq_key {
            self.put_key(
                index_key_hash(&[topic, "#", uniq]),
                phy_offset,
                store_timestamp,
                now_ms,
            )?;
        }
        for key in keys.filter(|k| !k.is_empty()) {
            self.put_key(
                index_key_hash(&[topic, "#", key]),
                phy_offset,
                store_timestamp,
                now_ms,
            )?;
        }
        Ok(())
    }

    fn put_key(
        &mut self,
        hash: i32,
        phy_offset: i64,
        timestamp: i64,
        now_ms: i64,
    ) -> Result<(), IndexError> {
        let file = match self.files.last() {
            Some(f) if !f.is_full() && !self.roll_next => Arc::clone(f),
            _ => self.roll(now_ms)?,
        };
        let done = file.put_key(hash, phy_offset, timestamp);
        debug_assert!(done, "a non-full index file refused a put");
        Ok(())
    }

    /// Creates the next file, inheriting the newest file's end values, and publishes the list.
    fn roll(&mut self, now_ms: i64) -> Result<Arc<IndexFile>, IndexError> {
        let prev_end = self.files.last().map_or((0, 0), |f| f.end_pair());
        // Load order is name order, so a new name must sort after the newest one and be unused.
        let mut name = name_for_ms(now_ms);
        let floor = self
            .files
            .last()
            .map(|f| f.name())
            .max(self.name_floor.as_deref());
        if let Some(floor) = floor {
            if name.as_str() <= floor {
                name = name_after(floor);
            }
        }
        while self.dir.join(&name).exists() || self.dir.join(format!(".{name}.tmp")).exists() {
            name = name_after(&name);
        }
        let file = Arc::new(IndexFile::create(
            &self.dir,
            &name,
            self.slot_num,
            self.index_num,
            prev_end,
        )?);
        self.files.push(Arc::clone(&file));
        self.roll_next = false;
        self.publish();
        Ok(file)
    }

    fn publish(&self) {
        self.published.store(Arc::new(self.files.clone()));
    }

    /// msyncs every file written since the last flush.
    pub fn flush(&self) -> io::Result<()> {
        for f in &self.files {
            if f.dirty.swap(false, Ordering::Relaxed) {
                if let Err(e) = f.map.flush() {
                    f.dirty.store(true, Ordering::Relaxed);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{}: msync: {e}", f.path.display()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether the newest entry names a record that `commit_log` holds below `end`, under one of
    /// that record's keys, at the newest file's end offset — true when nothing is indexed. A
    /// cheap check, before keeping files a dead broker process left, that they are the ones it
    /// wrote against this CommitLog (not, say, a copy restored beside a different one).
    pub fn tail_matches(&self, commit_log: &FileQueueView, end: u64) -> bool {
        let Some((hash, phy)) = self.last_entry() else {
            return true;
        };
        let Ok(at) = u64::try_from(phy) else {
            return false;
        };
        if phy != self.last_end_phy_offset() || at >= end {
            return false;
        }
        let mut matched = false;
        let walked = super::commit_log::walk(commit_log, PhyOffset(at), PhyOffset(end), |p, r| {
            matched = p == at
                && r.keys()
                    .chain(r.uniq_key())
                    .any(|k| index_key_hash(&[r.topic, "#", k]) == hash);
            false
        });
        walked.is_ok() && matched
    }

    /// The newest entry of the newest file, as (key hash, phy offset), if it has one.
    fn last_entry(&self) -> Option<(i32, i64)> {
        let f = self.files.last()?;
        let count = f.index_count();
        if count <= 1 {
            return None;
        }
        // SAFETY: owner side; entry `count - 1` is below the published count, complete and
        // immutable.
        let e: [u8; INDEX_ENTRY_SIZE] = unsafe { f.read_bytes(f.entry_pos(count - 1)) };
        Some((
            i32::from_be_bytes(e[0..4].try_into().unwrap()),
            i64::from_be_bytes(e[4..12].try_into().unwrap()),
        ))
    }

    /// Marks every file as unflushed, so the next [`IndexStore::flush`] syncs it. For files kept
    /// after a process death: the dead process may not have flushed them (a full file is flushed
    /// only after its roll), and a loaded file otherwise counts as flushed.
    pub fn mark_all_unflushed(&self) {
        for f in &self.files {
            f.dirty.store(true, Ordering::Relaxed);
        }
    }

    /// A lock-free query handle; it follows every later roll and deletion.
    pub fn reader(&self) -> IndexReader {
        IndexReader {
            files: Arc::clone(&self.published),
        }
    }

    /// Abnormal-exit recovery (`IndexService.load`): deletes every file whose endTimestamp is
    /// after `end_timestamp` (the checkpoint's indexMsgTimestamp). Returns how many.
    pub fn destroy_newer_than(&mut self, end_timestamp: i64) -> usize {
        let (doomed, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.files)
            .into_iter()
            .partition(|f| f.end_timestamp() > end_timestamp);
        self.files = kept;
        self.retire(doomed)
    }

    /// For a recovered CommitLog end `end` that cut records some files name: the lowest
    /// `beginPhyOffset` among those files — where re-dispatch must start to index again what
    /// they held below `end` — and the newest `endTimestamp` of the files that stay (0 if none).
    /// `None` if no file names a record at or past `end`.
    pub fn past(&self, end: i64) -> Option<(i64, i64)> {
        let begin = self
            .files
            .iter()
            .filter(|f| names_past(f, end))
            .map(|f| f.begin_phy_offset())
            .min()?;
        let kept_end_ts = self
            .files
            .iter()
            .filter(|f| !names_past(f, end))
            .map(|f| f.end_timestamp())
            .max()
            .unwrap_or(0);
        Some((begin, kept_end_ts))
    }

    /// Cleanup (`IndexService.deleteExpiredFile`): deletes the oldest files whose endPhyOffset <
    /// `min_phy_offset`, stopping at the first that is not, and never the newest file. Returns how
    /// many.
    pub fn delete_files_below(&mut self, min_phy_offset: i64) -> usize {
        let n = self.files[..self.files.len().saturating_sub(1)]
            .iter()
            .take_while(|f| f.end_phy_offset() < min_phy_offset)
            .count();
        let doomed = self.files.drain(..n).collect();
        self.retire(doomed)
    }

    fn retire(&mut self, doomed: Vec<Arc<IndexFile>>) -> usize {
        if !doomed.is_empty() {
            self.publish(); // readers stop finding them before they disappear from the directory
        }
        doomed.iter().for_each(|f| f.unlink());
        doomed.len()
    }

    /// Newest file's endTimestamp (0 without files).
    pub fn last_end_timestamp(&self) -> i64 {
        self.files.last().map_or(0, |f| f.end_timestamp())
    }
    /// Newest file's endPhyOffset (0 without files): the replay-dedup bound.
    pub fn last_end_phy_offset(&self) -> i64 {
        self.files.last().map_or(0, |f| f.end_phy_offset())
    }
    /// endTimestamp of the newest *full* file: what RocketMQ checkpoints as indexMsgTimestamp
    /// once that file is flushed.
    pub fn full_files_end_timestamp(&self) -> Option<i64> {
        self.files
            .iter()
            .rev()
            .find(|f| f.is_full())
            .map(|f| f.end_timestamp())
    }
    pub fn files(&self) -> &[Arc<IndexFile>] {
        &self.files
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Removes the rebuild marker of [`IndexStore::begin_rebuild`] for the index directory `dir`
/// (durably), once dispatch has indexed the whole CommitLog again and the index is flushed.
/// Absent is fine.
pub fn finish_rebuild(dir: &Path) -> io::Result<()> {
    let path = marker_path(dir);
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    match std::fs::remove_file(&path) {
        Ok(()) => super::mapped_file::sync_dir(root_of(dir)).map_err(named),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(named(e)),
    }
}

/// Read-side handle: clone freely, query from any thread, never blocks the writer.
#[derive(Clone)]
pub struct IndexReader {
    files: FileList,
}

impl IndexReader {
    /// `IndexService.queryOffset`: files newest → oldest; a file is searched when
    /// its [begin, end] overlaps [begin_ts, end_ts]; scanning stops at a file that begins before
    /// `begin_ts` or once `max_num` offsets are found. The caller caps `max_num`
    /// (`maxMsgsNumBatch`). Offsets are returned ascending.
    pub fn query(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ts: i64,
        end_ts: i64,
    ) -> QueryResult {
        let files = self.files.load();
        let mut result = QueryResult::default();
        if let Some(newest) = files.last() {
            (result.last_update_timestamp, result.last_update_phy_offset) = newest.end_pair();
        }
        let hash = index_key_hash(&[topic, "#", key]);
        for file in files.iter().rev() {
            let file_begin = file.begin_timestamp();
            if begin_ts <= file.end_timestamp() && end_ts >= file_begin {
                file.select(hash, max_num, begin_ts, end_ts, &mut result.phy_offsets);
            }
            if file_begin < begin_ts || result.phy_offsets.len() >= max_num {
                break;
            }
        }
        result.phy_offsets.sort_unstable();
        // The last record before a restart is put again (see `put`): one answer per message.
        result.phy_offsets.dedup();
        result
    }
}

/// Slots are hashed and entries chained backwards: every access is a random one, so a fault
/// reads (or, in a fresh file, zero-fills) its own page, not `read_ahead_kb` around it.
fn random_access(map: &MmapRaw) {
    super::mapped_file::advise(map, 0, map.len(), libc::MADV_RANDOM);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index directory of a test: a subdirectory, since the rebuild marker and the
    /// damaged files go beside it.
    fn idx_dir(d: &tempfile::TempDir) -> PathBuf {
        d.path().join("index")
    }
    use std::sync::atomic::AtomicBool;

    const SLOTS: u32 = 8;
    const ENTRIES: u32 = 32;
    const T0: i64 = 1_700_000_000_000;

    fn put(s: &mut IndexStore, keys: &[&str], uniq: Option<&str>, phy: i64, ts: i64) {
        s.put("T", keys.iter().copied(), uniq, phy, ts, T0).unwrap();
    }
    fn find(r: &IndexReader, key: &str) -> Vec<i64> {
        r.query("T", key, 64, 0, i64::MAX).phy_offsets
    }
    fn be_i64(b: &[u8], at: usize) -> i64 {
        i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
    }
    fn be_i32(b: &[u8], at: usize) -> i32 {
        i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn entry_at(n: usize) -> usize {
        INDEX_HEADER_SIZE + SLOTS as usize * 4 + n * INDEX_ENTRY_SIZE
    }

    #[test]
    fn key_hash_matches_java() {
        assert_eq!(index_key_hash(&["hello"]), 99_162_322);
        assert_eq!(index_key_hash(&["Aa"]), index_key_hash(&["BB"]));
        assert_eq!(index_key_hash(&["T", "#", "k1"]), index_key_hash(&["T#k1"]));
        // U+1F600 is two UTF-16 units: 0xD83D * 31 + 0xDE00.
        assert_eq!(index_key_hash(&["\u{1F600}"]), 0xD83D * 31 + 0xDE00);
        // Java: "polygenelubricants".hashCode() == Integer.MIN_VALUE, mapped to 0.
        assert_eq!(index_key_hash(&["polygenelubricants"]), 0);
        // abs of a negative hash: "hellohello".hashCode() is negative in Java.
        let neg = "hellohello"
            .encode_utf16()
            .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u.into()));
        assert!(neg < 0);
        assert_eq!(index_key_hash(&["hellohello"]), -neg);
        assert_eq!(
            index_key_hash(&["T#k1"]),
            crate::format::java::java_string_hash("T#k1").abs()
        );
    }

    /// A RocketMQ store's index files are sparse: the last, which takes new entries anywhere in
    /// it, gets its blocks when the store opens; older ones are only read and stay as they are.
    #[test]
    fn the_last_index_file_of_a_sparse_store_gets_its_blocks_at_open() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let size = file_size(SLOTS, ENTRIES);
        let names = ["20240101000000000", "20240102000000000"];
        std::fs::create_dir_all(idx_dir(&dir)).unwrap();
        for name in names {
            // A valid empty header (all zero) and nothing else allocated.
            std::fs::File::create(idx_dir(&dir).join(name))
                .unwrap()
                .set_len(size)
                .unwrap();
        }
        let blocks = |name: &str| {
            std::fs::metadata(idx_dir(&dir).join(name))
                .unwrap()
                .blocks()
                * 512
        };
        assert_eq!((blocks(names[0]), blocks(names[1])), (0, 0));
        let s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        assert_eq!(s.files().len(), 2);
        assert!(
            blocks(names[1]) >= size,
            "the last file: {}",
            blocks(names[1])
        );
        assert_eq!(blocks(names[0]), 0, "an older file is left sparse");
    }

    #[test]
    fn header_and_entry_golden_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        put(&mut s, &["k1", "", "k2"], Some("U1"), 100, T0 + 1500);
        put(&mut s, &["k1"], None, 300, T0 + 4200);
        s.flush().unwrap();
        let f = &s.files()[0];
        assert_eq!(f.name(), name_for_ms(T0));
        assert_eq!(f.name().len(), 17);
        let b = std::fs::read(f.path()).unwrap();
        assert_eq!(b.len(), 40 + 8 * 4 + 32 * 20);
        assert_eq!(be_i64(&b, 0), T0 + 1500, "beginTimestamp");
        assert_eq!(be_i64(&b, 8), T0 + 4200, "endTimestamp");
        assert_eq!(be_i64(&b, 16), 100, "beginPhyOffset");
        assert_eq!(be_i64(&b, 24), 300, "endPhyOffset");
        let slot_of = |k: &str| (index_key_hash(&["T#", k]) % 8) as usize;
        let used: std::collections::HashSet<_> = ["U1", "k1", "k2"].map(slot_of).into();
        assert_eq!(be_i32(&b, 32), used.len() as i32, "hashSlotCount");
        assert_eq!(be_i32(&b, 36), 5, "indexCount: starts at 1, four entries");
        // Entry 1: uniq key first, begin was 0 so timeDiff 0, no predecessor.
        let e = entry_at(1);
        assert_eq!(be_i32(&b, e), index_key_hash(&["T#U1"]));
        assert_eq!(
            (be_i64(&b, e + 4), be_i32(&b, e + 12), be_i32(&b, e + 16)),
            (100, 0, 0)
        );
        // Entry 4: second k1, 2.7 s after begin => 2 s, chained to entry 2 (or 3 if k2 shares).
        let e = entry_at(4);
        let prev = if slot_of("k2") == slot_of("k1") { 3 } else { 2 };
        assert_eq!(be_i32(&b, e), index_key_hash(&["T#k1"]));
        assert_eq!(
            (be_i64(&b, e + 4), be_i32(&b, e + 12), be_i32(&b, e + 16)),
            (300, 2, prev)
        );
        assert_eq!(
            be_i32(&b, 40 + slot_of("k1") * 4),
            4,
            "slot holds newest entry"
        );
        assert!(
            b[entry_at(0)..entry_at(1)].iter().all(|&x| x == 0),
            "entry 0 unused"
        );
    }

    #[test]
    fn query_by_key_and_uniq_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        let r = s.reader();
        assert_eq!(r.query("T", "k1", 64, 0, i64::MAX), QueryResult::default());
        put(&mut s, &["k1", "k2"], Some("U1"), 100, T0);
        put(&mut s, &["k1"], Some("U2"), 300, T0 + 1000);
        assert_eq!(find(&r, "k1"), vec![100, 300]);
        assert_eq!(find(&r, "k2"), vec![100]);
        assert_eq!(find(&r, "U2"), vec![300]);
        assert_eq!(
            r.query("Other", "k1", 64, 0, i64::MAX).phy_offsets,
            Vec::<i64>::new()
        );
        let q = r.query("T", "nope", 64, 0, i64::MAX);
        assert!(q.phy_offsets.is_empty());
        assert_eq!(
            (q.last_update_timestamp, q.last_update_phy_offset),
            (T0 + 1000, 300)
        );
        assert_eq!(
            r.query("T", "k1", 1, 0, i64::MAX).phy_offsets,
            vec![300],
            "newest first, capped"
        );
    }

    #[test]
    fn collisions_same_slot_filtered_same_hash_returned() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        let h0 = index_key_hash(&["T#c0"]);
        let other = (1..)
            .map(|i| format!("c{i}"))
            .find(|k| {
                let h = index_key_hash(&["T#", k]);
                h % 8 == h0 % 8 && h != h0
            })
            .unwrap();
        put(&mut s, &["c0"], None, 10, T0);
        put(&mut s, &[&other], None, 20, T0);
        put(&mut s, &["Aa"], None, 30, T0);
        put(&mut s, &["BB"], None, 40, T0); // same Java hash as "Aa"
        let r = s.reader();
        assert_eq!(find(&r, "c0"), vec![10]);
        assert_eq!(find(&r, &other), vec![20]);
        assert_eq!(
            find(&r, "Aa"),
            vec![30, 40],
            "collisions are returned; the client re-checks"
        );
    }

    #[test]
    fn time_range_filters_entries_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        for (i, phy) in [1, 2, 3].into_iter().enumerate() {
            put(&mut s, &["k"], None, phy, T0 + i as i64 * 10_000);
        }
        let r = s.reader();
        assert_eq!(
            r.query("T", "k", 64, T0 + 5_000, T0 + 15_000).phy_offsets,
            vec![2]
        );
        assert_eq!(
            r.query("T", "k", 64, T0, T0 + 10_000).phy_offsets,
            vec![1, 2]
        );
        assert_eq!(
            r.query("T", "k", 64, T0 + 20_000, i64::MAX).phy_offsets,
            vec![3]
        );
        assert!(r
            .query("T", "k", 64, T0 + 30_000, i64::MAX)
            .phy_offsets
            .is_empty());
        assert!(r.query("T", "k", 64, 0, T0 - 1).phy_offsets.is_empty());
    }

    /// 4 entries per file = 3 usable (entry 0 unused).
    fn rolled_store(dir: &Path) -> IndexStore {
        let mut s = IndexStore::open(dir, SLOTS, 4).unwrap();
        for i in 0..7 {
            put(&mut s, &["k"], None, i * 10, T0 + i * 1000);
        }
        s
    }

    #[test]
    fn rolls_when_full_and_queries_span_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = rolled_store(&idx_dir(&dir));
        let names: Vec<_> = s.files().iter().map(|f| f.name().to_string()).collect();
        assert_eq!(names.len(), 3);
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "unique, increasing names: {names:?}"
        );
        assert!(names.iter().all(|n| is_index_file_name(n)));
        assert!(s.files()[0].is_full() && !s.files()[2].is_full());
        assert_eq!(s.full_files_end_timestamp(), Some(T0 + 5000));
        let second = &s.files()[1];
        assert_eq!(
            (second.begin_phy_offset(), second.end_phy_offset()),
            (30, 50)
        );
        // The new file started from the previous end (T0+2000): first diff is (3000-2000)/1000.
        s.flush().unwrap();
        let b = std::fs::read(second.path()).unwrap();
        assert_eq!(be_i32(&b, entry_at(1) + 12), 1);
        assert_eq!(be_i32(&b, 36), 4, "full: indexCount == indexNum");
        assert_eq!(find(&s.reader(), "k"), vec![0, 10, 20, 30, 40, 50, 60]);
        assert_eq!(
            s.reader().query("T", "k", 2, 0, i64::MAX).phy_offsets,
            vec![50, 60]
        );
    }

    fn dir_names(dir: &Path) -> Vec<String> {
        let mut left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        left
    }

    /// A damaged file is left out with every later one; `begin_rebuild` writes the marker
    /// beside the index directory, deletes the later files and moves the damaged one to
    /// `index.corrupt/`, and new files are named after every file there was. A start stopped at
    /// any point of that finds the marker and leaves out (and removes) the same files again —
    /// the rebuild's own files too (after a power loss they may be torn), and the damaged oldest
    /// file of a wrong size alone, which without the marker reads as a changed config — until
    /// `finish_rebuild`. An empty marker rebuilds everything.
    #[test]
    fn a_damaged_file_is_left_out_with_the_files_after_it_until_the_rebuild_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let idx = idx_dir(&dir);
        let paths: Vec<PathBuf> = {
            let s = rolled_store(&idx);
            s.files().iter().map(|f| f.path().to_path_buf()).collect()
        };
        let name = |p: &PathBuf| p.file_name().unwrap().to_str().unwrap().to_string();
        // The last file loses its tail: its neighbours have the configured size, so it is damage.
        let len = std::fs::metadata(&paths[2]).unwrap().len();
        let f = OpenOptions::new().write(true).open(&paths[2]).unwrap();
        f.set_len(len - 20).unwrap();
        drop(f);
        let s = IndexStore::open(&idx, SLOTS, 4).unwrap();
        let d = s.damage().expect("damage");
        assert!(d.reason.contains("file size"), "{}", d.reason);
        assert_eq!((d.corrupt.as_ref(), d.delete.len()), (Some(&paths[2]), 0));
        assert_eq!(s.files().len(), 2);
        drop(s);
        // The middle file's header: it and the last one are left out.
        let mut b = std::fs::read(&paths[1]).unwrap();
        b[24..32].copy_from_slice(&(-1i64).to_be_bytes()); // endPhyOffset
        std::fs::write(&paths[1], &b).unwrap();
        let mut s = IndexStore::open(&idx, SLOTS, 4).unwrap();
        let d = s.damage().expect("damage");
        assert!(d.reason.contains("endPhyOffset"), "{}", d.reason);
        assert_eq!(
            (d.corrupt.as_ref(), &d.delete[..]),
            (Some(&paths[1]), &paths[2..])
        );
        assert_eq!(find(&s.reader(), "k"), vec![0, 10, 20]);
        assert_eq!(s.begin_rebuild(20, i64::MAX).unwrap(), 2);
        assert!(s.damage().is_none());
        assert_eq!(dir_names(&idx), vec![name(&paths[0])]);
        assert_eq!(
            dir_names(dir.path()),
            vec!["index", CORRUPT_DIR, REBUILD_MARKER]
        );
        assert_eq!(
            dir_names(&dir.path().join(CORRUPT_DIR)),
            vec![name(&paths[1])]
        );
        // The rebuild's files are named after the removed ones, whatever the clock says.
        put(&mut s, &["k"], None, 30, T0 + 3000);
        put(&mut s, &["k"], None, 40, T0 + 4000);
        let rebuilt = s.files()[1].name().to_string();
        assert!(rebuilt.as_str() > name(&paths[2]).as_str(), "{rebuilt}");
        drop(s);
        // Stopped before the rebuild finished: the next open leaves out the rebuild's own file
        // too and resumes from the marker's offset.
        let mut s = IndexStore::open(&idx, SLOTS, 4).unwrap();
        let d = s.damage().expect("the marker");
        assert_eq!(d.resume_from, Some(20));
        assert_eq!(d.delete, vec![idx.join(&rebuilt)]);
        assert_eq!(s.files().len(), 1);
        s.begin_rebuild(20, i64::MAX).unwrap();
        assert_eq!(dir_names(&idx), vec![name(&paths[0])]);
        put(&mut s, &["k"], None, 30, T0 + 3000);
        assert!(s.files()[1].name() > rebuilt.as_str());
        drop(s);
        finish_rebuild(&idx).unwrap();
        let s = IndexStore::open(&idx, SLOTS, 4).unwrap();
        assert!(s.damage().is_none() && s.files().len() == 2);
        drop(s);
        // An empty marker: every file goes, the rebuild starts at the first CommitLog file.
        std::fs::write(dir.path().join(REBUILD_MARKER), b"").unwrap();
        let s = IndexStore::open(&idx, SLOTS, 4).unwrap();
        let d = s.damage().expect("the marker");
        assert_eq!((d.resume_from, d.delete.len()), (Some(0), 2));
        assert!(s.files().is_empty());
        drop(s);

        // A rebuild never writes into a kept file, even one not full: a new one takes it.
        let dir = tempfile::tempdir().unwrap();
        let idx = idx_dir(&dir);
        let mut s = rolled_store(&idx);
        assert!(!s.files()[2].is_full());
        s.begin_rebuild(60, i64::MAX).unwrap();
        put(&mut s, &["k"], None, 70, T0 + 7000);
        assert_eq!(s.files().len(), 4);
        put(&mut s, &["k"], None, 80, T0 + 8000);
        assert_eq!(s.files().len(), 4, "then it fills the new file as usual");
        drop(s);

        // The oldest file truncated, and the removal stopped after the deletes: alone, of the
        // wrong size, it would be refused as a config change; the marker names it.
        let dir = tempfile::tempdir().unwrap();
        let idx = idx_dir(&dir);
        let paths: Vec<PathBuf> = {
            let s = rolled_store(&idx);
            s.files().iter().map(|f| f.path().to_path_buf()).collect()
        };
        let f = OpenOptions::new().write(true).open(&paths[0]).unwrap();
        f.set_len(100).unwrap();
        drop(f);
        let s = IndexStore::open(&idx, SLOTS, 4).unwrap();
        let d = s.damage().expect("damage");
        assert_eq!(
            (d.corrupt.as_ref(), &d.delete[..]),
            (Some(&paths[0]), &paths[1..])
        );
        drop(s);
        let marker = RebuildMarker {
            from: 0,
            corrupt: Some(name(&paths[0])),
            delete: paths[1..].iter().map(name).collect(),
            floor: Some(name(&paths[2])),
        };
        std::fs::write(
            dir.path().join(REBUILD_MARKER),
            serde_json::to_vec(&marker).unwrap(),
        )
        .unwrap();
        std::fs::remove_file(&paths[2]).unwrap();
        std::fs::remove_file(&paths[1]).unwrap();
        let mut s = IndexStore::open(&idx, SLOTS, 4).unwrap();
        let d = s.damage().expect("the marker");
        assert_eq!(
            (d.corrupt.as_ref(), d.resume_from),
            (Some(&paths[0]), Some(0))
        );
        assert!(s.files().is_empty());
        s.begin_rebuild(0, i64::MAX).unwrap();
        assert!(dir_names(&idx).is_empty());
        assert_eq!(
            dir_names(&dir.path().join(CORRUPT_DIR)),
            vec![name(&paths[0])]
        );
        // Without a marker, the same lone file of the wrong size is refused, naming the config.
        drop(s);
        std::fs::remove_file(dir.path().join(REBUILD_MARKER)).unwrap();
        std::fs::rename(
            dir.path().join(CORRUPT_DIR).join(name(&paths[0])),
            &paths[0],
        )
        .unwrap();
        let err = IndexStore::open(&idx, SLOTS, 4).err().unwrap().to_string();
        assert!(err.contains("maxIndexNum"), "{err}");
    }

    #[test]
    fn reopen_finds_everything_and_continues() {
        let dir = tempfile::tempdir().unwrap();
        drop(rolled_store(&idx_dir(&dir)));
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, 4).unwrap();
        assert_eq!(s.files().len(), 3);
        assert_eq!(
            (s.last_end_timestamp(), s.last_end_phy_offset()),
            (T0 + 6000, 60)
        );
        assert_eq!(find(&s.reader(), "k"), vec![0, 10, 20, 30, 40, 50, 60]);
        put(&mut s, &["k"], None, 70, T0 + 7000);
        assert_eq!(s.files().len(), 3, "continues in the last, non-full file");
        assert_eq!(find(&s.reader(), "k").len(), 8);
        assert!(
            IndexStore::open(&idx_dir(&dir), SLOTS, 5).is_err(),
            "size mismatch with config"
        );
    }

    /// A process killed inside a put, in either order of its last two writes, loses no key of
    /// the slot's chain once the interrupted record is put again (as re-dispatch does: the
    /// header's end is the record before it).
    #[test]
    fn a_put_killed_between_slot_and_header_loses_no_chain() {
        let hash = index_key_hash(&["T", "#", "k"]);
        let slot_pos = INDEX_HEADER_SIZE + (hash as u32 % SLOTS) as usize * 4;
        for slot_first in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let path = {
                let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
                put(&mut s, &["k"], None, 10, T0);
                put(&mut s, &["k"], None, 20, T0 + 1000);
                s.flush().unwrap();
                s.files()[0].path.clone()
            };
            // The interrupted put of the record at 30: entry 3 written (prev = 2), then either
            // the slot (older builds) or the header (this one), not the other.
            let mut b = std::fs::read(&path).unwrap();
            let mut e = [0u8; INDEX_ENTRY_SIZE];
            e[0..4].copy_from_slice(&hash.to_be_bytes());
            e[4..12].copy_from_slice(&30i64.to_be_bytes());
            e[12..16].copy_from_slice(&2i32.to_be_bytes());
            e[16..20].copy_from_slice(&2i32.to_be_bytes());
            b[entry_at(3)..entry_at(4)].copy_from_slice(&e);
            if slot_first {
                b[slot_pos..slot_pos + 4].copy_from_slice(&3i32.to_be_bytes());
            } else {
                b[36..40].copy_from_slice(&4i32.to_be_bytes());
                b[24..32].copy_from_slice(&30i64.to_be_bytes());
            }
            std::fs::write(&path, &b).unwrap();

            let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
            put(&mut s, &["k"], None, 30, T0 + 2000);
            put(&mut s, &["k"], None, 40, T0 + 3000);
            assert_eq!(
                find(&s.reader(), "k"),
                vec![10, 20, 30, 40],
                "slot written first: {slot_first}"
            );
        }
    }

    #[test]
    fn replayed_records_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        put(&mut s, &["k"], Some("U"), 100, T0);
        put(&mut s, &["k"], None, 200, T0 + 1000);
        let count = s.files()[0].index_count();
        put(&mut s, &["k"], Some("U"), 100, T0); // replay after recovery
        put(&mut s, &["k"], None, 150, T0);
        assert_eq!(s.files()[0].index_count(), count);
        assert_eq!(find(&s.reader(), "k"), vec![100, 200]);
    }

    #[test]
    fn invalid_files_are_errors_naming_file_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        put(&mut s, &["k"], None, 1, T0);
        let path = s.files()[0].path().to_path_buf();
        let name = s.files()[0].name().to_string();
        drop(s);
        let good = std::fs::read(&path).unwrap();
        // The only file of the wrong size: no file shows the config is the store's, so the
        // start is refused (a changed hashSlotNum or indexNum must not rebuild the index).
        let mut bytes = good.clone();
        bytes.truncate(100);
        std::fs::write(&path, &bytes).unwrap();
        let msg = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES)
            .err()
            .unwrap()
            .to_string();
        assert!(msg.contains(&name) && msg.contains("file size"), "{msg}");
        // A header breaking a rule: left out as damage, naming file and field.
        type Damage = fn(&mut Vec<u8>);
        let cases: [(&str, Damage); 2] = [
            ("indexCount", |b| {
                b[36..40].copy_from_slice(&33i32.to_be_bytes())
            }),
            ("beginTimestamp", |b| {
                b[0..8].copy_from_slice(&(-5i64).to_be_bytes())
            }),
        ];
        for (what, damage) in cases {
            let mut bytes = good.clone();
            damage(&mut bytes);
            std::fs::write(&path, &bytes).unwrap();
            let s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
            assert!(s.files().is_empty());
            let d = s.damage().expect("damage");
            assert_eq!(d.corrupt.as_ref(), Some(&path));
            assert!(d.delete.is_empty() && d.resume_from.is_none());
            let msg = &d.reason;
            assert!(msg.contains(&name) && msg.contains(what), "{what}: {msg}");
        }
        // A header never flushed by RocketMQ (all zero) loads with indexCount 1.
        std::fs::write(&path, vec![0u8; good.len()]).unwrap();
        let s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        assert_eq!(s.files()[0].index_count(), 1);
        assert!(IndexStore::open(&idx_dir(&dir), 0, ENTRIES).is_err());
    }

    #[test]
    fn reader_never_sees_torn_results_while_writer_puts() {
        const N: i64 = 300;
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexStore::open(&idx_dir(&dir), SLOTS, ENTRIES).unwrap();
        let reader = s.reader();
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut seen = 0;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let r = reader.query("T", "k", 1000, 0, i64::MAX);
                    // Every put is (phy i*10, ts T0 + i*1000): results are a prefix, the end
                    // pair belongs to one put, and nothing ever disappears.
                    let prefix: Vec<i64> =
                        (0..r.phy_offsets.len() as i64).map(|i| i * 10).collect();
                    assert_eq!(r.phy_offsets, prefix);
                    let (ts, phy) = (r.last_update_timestamp, r.last_update_phy_offset);
                    assert!(
                        (ts, phy) == (0, 0) || ts == T0 + phy * 100,
                        "torn end: {ts} {phy}"
                    );
                    assert!(r.phy_offsets.len() >= seen);
                    seen = r.phy_offsets.len();
                    if finished {
                        assert_eq!(seen, N as usize);
                        break;
                    }
                }
            });
            for i in 0..N {
                let uniq = format!("u{i}");
                s.put(
                    "T",
                    ["k", "x"].into_iter(),
                    Some(&uniq),
                    i * 10,
                    T0 + i * 1000,
                    T0,
                )
                .unwrap();
            }
            done.store(true, Ordering::Release);
        });
        assert!(s.files().len() > 10, "the reader raced with rolls too");
    }

    #[test]
    fn destroy_newer_than_and_delete_files_below() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = rolled_store(&idx_dir(&dir));
        let r = s.reader();
        let paths: Vec<_> = s.files().iter().map(|f| f.path().to_path_buf()).collect();
        assert_eq!(s.destroy_newer_than(T0 + 2000), 2);
        assert!(paths[0].exists() && !paths[1].exists() && !paths[2].exists());
        assert_eq!(find(&r, "k"), vec![0, 10, 20]);
        put(&mut s, &["k"], None, 30, T0 + 3000); // rebuilt by re-dispatch
        assert_eq!(s.files().len(), 2);
        assert_eq!(s.files()[1].begin_phy_offset(), 30);

        let dir = tempfile::tempdir().unwrap();
        let mut s = rolled_store(&idx_dir(&dir));
        assert_eq!(s.delete_files_below(0), 0);
        assert_eq!(s.delete_files_below(25), 1, "first file ends at 20");
        assert_eq!(s.delete_files_below(i64::MAX), 1, "never the newest file");
        assert_eq!(s.files().len(), 1);
        assert_eq!(find(&s.reader(), "k"), vec![60]);
        assert_eq!(std::fs::read_dir(idx_dir(&dir)).unwrap().count(), 1);
    }
}
