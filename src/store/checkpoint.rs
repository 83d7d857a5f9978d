//! The store's `checkpoint` file (RocketMQ's `StoreCheckpoint`,
//! store/src/main/java/org/apache/rocketmq/store/StoreCheckpoint.java): which store times and
//! offsets are known to be durable, so abnormal recovery knows how far back to re-dispatch.
//!
//! Owns: the file `${storePathRootDir}/checkpoint` and its byte layout — exactly one 4096-byte
//! page, big-endian `i64`s:
//!
//! | offset | field |
//! |---|---|
//! | 0  | physicMsgTimestamp (store time of CommitLog data known flushed) |
//! | 8  | logicsMsgTimestamp (store time of the last ConsumeQueue unit, persisted after a CQ flush) |
//! | 16 | indexMsgTimestamp (end time of the last fully flushed index file) |
//! | 24 | masterFlushedOffset (5.x) |
//! | 32 | confirmPhyOffset (5.x) |
//!
//! The rest of the page is never read or written by us (a 4.9.x file has zeros at 24..40, which
//! read as 0 — the right default for the 5.x fields).
//!
//! Invariants:
//! * a checkpoint file with a real name is always exactly 4096 bytes: it is created under a
//!   temporary name, sized and fsynced, then renamed (and the directory fsynced), so a crash during
//!   creation never leaves a short file that would block the next start;
//! * a file of any other size is refused with an error naming it (we do not guess what a foreign
//!   or damaged file meant); the store then moves it aside and recovers from the first CommitLog
//!   file, trusting no checkpointed time;
//! * values only reach the disk through [`Checkpoint::flush`], which writes all 40 field bytes and
//!   returns only after `fdatasync` succeeded.
//!
//! Single owner: setters take `&mut self` (positions travel in messages; whoever owns
//! the checkpoint applies updates and flushes).
//!
//! Why `pwrite` + `fdatasync` and not a mapping + `msync` (RocketMQ maps the page):
//! * errors come back from the call that caused them (`ENOSPC`/`EIO` from `pwrite` or
//!   `fdatasync`), never as a SIGBUS on a store into the mapping;
//! * every flush rewrites all 40 bytes from memory, so after a failed `fdatasync` (which on Linux
//!   may mark the dirty page clean, "fsyncgate") the next flush re-dirties the page with the full
//!   current values instead of trusting a page the kernel may have dropped;
//! * the 40 bytes sit inside the first 512-byte sector, so one small write is what the device
//!   sees — power loss leaves the old or the new header, not a mix of unrelated page contents;
//! * the file size never changes after creation, so `fdatasync` (no metadata) is enough.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Size of the checkpoint file: one OS page, as RocketMQ maps it.
pub const CHECKPOINT_FILE_SIZE: u64 = 4096;
/// Bytes of the page holding fields (five big-endian `i64`s).
pub const CHECKPOINT_FIELDS_LEN: usize = 40;
/// Safety margin RocketMQ subtracts from the checkpointed times before choosing where abnormal
/// recovery starts (`StoreCheckpoint.getMinTimestamp`): store times inside one flush cycle are not
/// ordered with the flush itself.
pub const MIN_TIMESTAMP_MARGIN_MS: i64 = 3000;

const PHYSIC_POS: usize = 0;
const LOGICS_POS: usize = 8;
const INDEX_POS: usize = 16;
const MASTER_FLUSHED_POS: usize = 24;
const CONFIRM_PHY_POS: usize = 32;

/// The five checkpointed values, as plain data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointData {
    pub physic_msg_timestamp: i64,
    pub logics_msg_timestamp: i64,
    pub index_msg_timestamp: i64,
    pub master_flushed_offset: i64,
    pub confirm_phy_offset: i64,
}

impl CheckpointData {
    /// The 40 field bytes, big-endian, in file order.
    pub fn encode(&self) -> [u8; CHECKPOINT_FIELDS_LEN] {
        let mut b = [0u8; CHECKPOINT_FIELDS_LEN];
        let mut put = |pos: usize, v: i64| b[pos..pos + 8].copy_from_slice(&v.to_be_bytes());
        put(PHYSIC_POS, self.physic_msg_timestamp);
        put(LOGICS_POS, self.logics_msg_timestamp);
        put(INDEX_POS, self.index_msg_timestamp);
        put(MASTER_FLUSHED_POS, self.master_flushed_offset);
        put(CONFIRM_PHY_POS, self.confirm_phy_offset);
        b
    }

    /// Reads the fields from the start of a checkpoint page (at least 40 bytes).
    pub fn decode(b: &[u8; CHECKPOINT_FIELDS_LEN]) -> CheckpointData {
        let get = |pos: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[pos..pos + 8]);
            i64::from_be_bytes(a)
        };
        CheckpointData {
            physic_msg_timestamp: get(PHYSIC_POS),
            logics_msg_timestamp: get(LOGICS_POS),
            index_msg_timestamp: get(INDEX_POS),
            master_flushed_offset: get(MASTER_FLUSHED_POS),
            confirm_phy_offset: get(CONFIRM_PHY_POS),
        }
    }

    /// `max(0, min(physic, logics) − 3000)`: no message stored at or before this time can be
    /// missing from both the flushed CommitLog and the ConsumeQueues.
    pub fn min_timestamp(&self) -> i64 {
        self.physic_msg_timestamp
            .min(self.logics_msg_timestamp)
            .saturating_sub(MIN_TIMESTAMP_MARGIN_MS)
            .max(0)
    }

    /// `min(min_timestamp, indexMsgTimestamp)`: the same bound when the index must also be
    /// rebuilt (`messageIndexEnable && messageIndexSafe`).
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp)
    }
}

/// A checkpoint file could not be used; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint file {path} is {len} bytes; a RocketMQ checkpoint is exactly {CHECKPOINT_FILE_SIZE} bytes (one page) — refusing to guess what it holds")]
    WrongSize { path: PathBuf, len: u64 },
    #[error("checkpoint file {path}: {op} failed: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> CheckpointError {
    let path = path.to_path_buf();
    move |source| CheckpointError::Io { path, op, source }
}

/// The open checkpoint file and the values last set (flushed or not).
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    file: File,
    data: CheckpointData,
}

impl Checkpoint {
    /// Opens the checkpoint at `path`, creating a zeroed 4096-byte file (durably) if none exists.
    /// A file of any other size is an error naming it.
    pub fn open(path: &Path) -> Result<Checkpoint, CheckpointError> {
        if !path.exists() {
            create_zeroed(path)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_err(path, "open"))?;
        let len = file.metadata().map_err(io_err(path, "stat"))?.len();
        if len != CHECKPOINT_FILE_SIZE {
            return Err(CheckpointError::WrongSize {
                path: path.to_path_buf(),
                len,
            });
        }
        let mut b = [0u8; CHECKPOINT_FIELDS_LEN];
        file.read_exact_at(&mut b, 0)
            .map_err(io_err(path, "read"))?;
        Ok(Checkpoint {
            path: path.to_path_buf(),
            file,
            data: CheckpointData::decode(&b),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Current values (including updates not yet flushed).
    pub fn data(&self) -> CheckpointData {
        self.data
    }

    pub fn physic_msg_timestamp(&self) -> i64 {
        self.data.physic_msg_timestamp
    }
    pub fn set_physic_msg_timestamp(&mut self, v: i64) {
        self.data.physic_msg_timestamp = v;
    }
    pub fn logics_msg_timestamp(&self) -> i64 {
        self.data.logics_msg_timestamp
    }
    pub fn set_logics_msg_timestamp(&mut self, v: i64) {
        self.data.logics_msg_timestamp = v;
    }
    pub fn index_msg_timestamp(&self) -> i64 {
        self.data.index_msg_timestamp
    }
    pub fn set_index_msg_timestamp(&mut self, v: i64) {
        self.data.index_msg_timestamp = v;
    }
    pub fn master_flushed_offset(&self) -> i64 {
        self.data.master_flushed_offset
    }
    pub fn set_master_flushed_offset(&mut self, v: i64) {
        self.data.master_flushed_offset = v;
    }
    pub fn confirm_phy_offset(&self) -> i64 {
        self.data.confirm_phy_offset
    }
    pub fn set_confirm_phy_offset(&mut self, v: i64) {
        self.data.confirm_phy_offset = v;
    }

    /// See [`CheckpointData::min_timestamp`].
    pub fn min_timestamp(&self) -> i64 {
        self.data.min_timestamp()
    }
    /// See [`CheckpointData::min_timestamp_index`].
    pub fn min_timestamp_index(&self) -> i64 {
        self.data.min_timestamp_index()
    }

    /// Writes all five fields at offset 0 and returns once `fdatasync` succeeded. On error the
    /// in-memory values are kept, so a later flush writes them again in full.
    pub fn flush(&self) -> Result<(), CheckpointError> {
        self.file
            .write_all_at(&self.data.encode(), 0)
            .map_err(io_err(&self.path, "write"))?;
        self.file
            .sync_data()
            .map_err(io_err(&self.path, "fdatasync"))
    }
}

/// Creates `path` as 4096 zero bytes without ever exposing a shorter file under that name.
fn create_zeroed(path: &Path) -> Result<(), CheckpointError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("checkpoint");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io_err(&tmp, "create"))?;
        f.write_all(&[0u8; CHECKPOINT_FILE_SIZE as usize])
            .map_err(io_err(&tmp, "write"))?;
        f.sync_all().map_err(io_err(&tmp, "fsync"))?;
        std::fs::rename(&tmp, path).map_err(io_err(path, "rename into place"))?;
        sync_dir(dir).map_err(io_err(dir, "fsync directory"))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Makes a directory's entries (a created, renamed or removed name) durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_read_back_as_plain_file_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let mut cp = Checkpoint::open(&p).unwrap();
        cp.set_physic_msg_timestamp(0x0102_0304_0506_0708);
        cp.set_logics_msg_timestamp(1_700_000_000_123);
        cp.set_index_msg_timestamp(-2);
        cp.set_master_flushed_offset(0x7FFF_FFFF_FFFF_FFFF);
        cp.set_confirm_phy_offset(4096);
        cp.flush().unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 4096);
        #[rustfmt::skip]
        let want: [u8; 40] = [
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
            // 1_700_000_000_123 = 0x0000_018B_CFE5_687B
            0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B,
            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
            0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
        ];
        assert_eq!(&raw[..40], &want);
        assert!(
            raw[40..].iter().all(|&b| b == 0),
            "rest of the page untouched"
        );
        // And a reopened checkpoint reads the same values.
        drop(cp);
        let cp = Checkpoint::open(&p).unwrap();
        assert_eq!(cp.physic_msg_timestamp(), 0x0102_0304_0506_0708);
        assert_eq!(cp.logics_msg_timestamp(), 1_700_000_000_123);
        assert_eq!(cp.index_msg_timestamp(), -2);
        assert_eq!(cp.master_flushed_offset(), i64::MAX);
        assert_eq!(cp.confirm_phy_offset(), 4096);
    }

    #[test]
    fn a_new_checkpoint_is_a_zeroed_page_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("store").join("checkpoint");
        let cp = Checkpoint::open(&p).unwrap();
        assert_eq!(cp.data(), CheckpointData::default());
        assert_eq!(std::fs::read(&p).unwrap(), vec![0u8; 4096]);
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["checkpoint"]);
    }

    #[test]
    fn a_rocketmq_file_written_elsewhere_is_read_and_its_tail_preserved() {
        // A 4.9.x checkpoint: three fields, then bytes we do not own (here: non-zero garbage).
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let mut page = vec![0xAAu8; 4096];
        page[..8].copy_from_slice(&10_000i64.to_be_bytes());
        page[8..16].copy_from_slice(&9_000i64.to_be_bytes());
        page[16..24].copy_from_slice(&5_000i64.to_be_bytes());
        page[24..40].fill(0);
        std::fs::write(&p, &page).unwrap();
        let mut cp = Checkpoint::open(&p).unwrap();
        assert_eq!(cp.min_timestamp(), 6_000);
        assert_eq!(cp.min_timestamp_index(), 5_000);
        assert_eq!(cp.master_flushed_offset(), 0);
        cp.set_logics_msg_timestamp(9_500);
        cp.flush().unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(&raw[8..16], &9_500i64.to_be_bytes());
        assert!(raw[40..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn min_timestamps_follow_rocketmq() {
        let d = |physic, logics, index| CheckpointData {
            physic_msg_timestamp: physic,
            logics_msg_timestamp: logics,
            index_msg_timestamp: index,
            ..CheckpointData::default()
        };
        assert_eq!(d(10_000, 20_000, 0).min_timestamp(), 7_000);
        assert_eq!(d(20_000, 10_000, 0).min_timestamp(), 7_000);
        assert_eq!(d(2_000, 20_000, 0).min_timestamp(), 0, "clamped at 0");
        assert_eq!(d(0, 0, 0).min_timestamp(), 0);
        assert_eq!(d(i64::MIN, 5, 0).min_timestamp(), 0, "no overflow");
        assert_eq!(d(10_000, 20_000, 4_000).min_timestamp_index(), 4_000);
        assert_eq!(d(10_000, 20_000, 9_000).min_timestamp_index(), 7_000);
    }

    #[test]
    fn wrong_size_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0usize, 40, 4095, 4097, 8192] {
            let p = dir.path().join(format!("checkpoint-{len}"));
            std::fs::write(&p, vec![0u8; len]).unwrap();
            let e = Checkpoint::open(&p).unwrap_err();
            assert!(matches!(e, CheckpointError::WrongSize { len: l, .. } if l == len as u64));
            let msg = e.to_string();
            assert!(msg.contains(&*p.to_string_lossy()), "{msg}");
            assert!(msg.contains("4096"), "{msg}");
            // The file is left as it was.
            assert_eq!(std::fs::metadata(&p).unwrap().len(), len as u64);
        }
    }
}
