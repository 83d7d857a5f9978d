//! `MappedFileQueue`: the ordered list of equally sized [`MappedFile`]s that together form one
//! logical byte space (the CommitLog, or one ConsumeQueue). File `i` covers
//! `[from_i, from_i + file_size)` and consecutive files are adjacent.
//!
//! The owner (one actor) appends files and truncates; readers hold a [`FileQueueView`], which loads
//! the current list from an `ArcSwap` — publishing a new list never blocks a reader and a reader
//! never blocks the owner. Retention may drop files at the front from another thread through a
//! [`FileQueueRetention`]: appends and drops both update the list with `rcu` (compare and swap),
//! so neither loses the other's change, and the last file is never dropped. A file dropped from
//! the list stays mapped until its last reader drops its `Arc`.
//!
//! Queue-level positions are global offsets: [`FileQueueView::max_offset`] is the *readable* end
//! (committed bytes when files have write buffers), [`FileQueueView::max_wrote_offset`] the
//! written end; [`FileQueueView::commit`] moves the committed position file by file, in order.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::mapped_file::{MappedFile, Warm};

pub type FileList = Arc<Vec<Arc<MappedFile>>>;

pub struct MappedFileQueue {
    dir: PathBuf,
    file_size: u64,
    files: Arc<ArcSwap<Vec<Arc<MappedFile>>>>,
}

/// Read-only, cloneable view of a file queue for readers on any thread.
#[derive(Clone)]
pub struct FileQueueView {
    file_size: u64,
    files: Arc<ArcSwap<Vec<Arc<MappedFile>>>>,
}

impl MappedFileQueue {
    /// Loads every file in `dir` (sorted by name). A file whose length differs from `file_size`
    /// is an error naming it; a name that is not a 20-digit offset is skipped; a file missing
    /// between two others is an error naming both (the CommitLog: those bytes are gone). Positions
    /// are set to "full" as RocketMQ does; recovery then fixes the tail.
    pub fn load(dir: &Path, file_size: u64) -> io::Result<MappedFileQueue> {
        Ok(Self::load_with(dir, file_size, false)?.0)
    }

    /// [`MappedFileQueue::load`] for data that can be derived again (a ConsumeQueue, rebuilt
    /// from the CommitLog): a file missing between two others cuts the queue there instead — the
    /// queue ends where its contiguous part does, and the files after the gap are returned, still
    /// on disk: the caller records what they held before it deletes them.
    pub fn load_cut_at_gap(
        dir: &Path,
        file_size: u64,
    ) -> io::Result<(MappedFileQueue, Vec<Arc<MappedFile>>)> {
        Self::load_with(dir, file_size, true)
    }

    fn load_with(
        dir: &Path,
        file_size: u64,
        cut_at_gap: bool,
    ) -> io::Result<(MappedFileQueue, Vec<Arc<MappedFile>>)> {
        std::fs::create_dir_all(dir)?;
        let mut names: Vec<(u64, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
                // Leftover temp files of an interrupted creation are removed.
                if name.ends_with(".tmp") {
                    let _ = std::fs::remove_file(entry.path());
                }
                continue;
            }
            names.push((name.parse().unwrap_or(0), entry.path()));
        }
        names.sort();
        let mut files = Vec::with_capacity(names.len());
        for (i, (from, path)) in names.iter().enumerate() {
            let len = std::fs::metadata(path)?.len();
            if len == 0 && i + 1 == names.len() {
                // A zero-length last file is an interrupted creation (RocketMQ 5 deletes it).
                std::fs::remove_file(path)?;
                continue;
            }
            if from % file_size != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: start offset {from} is not a multiple of the file size {file_size}",
                        path.display()
                    ),
                ));
            }
            let f = MappedFile::open(path, file_size)?;
            f.set_positions(file_size);
            files.push(Arc::new(f));
        }
        let gap = files
            .windows(2)
            .position(|w| w[1].file_from_offset() != w[0].file_from_offset() + file_size);
        let mut cut = Vec::new();
        if let Some(i) = gap {
            if !cut_at_gap {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: not adjacent to {} (a file is missing between them)",
                        files[i + 1].path().display(),
                        files[i].path().display()
                    ),
                ));
            }
            cut = files.split_off(i + 1);
        }
        let q = MappedFileQueue {
            dir: dir.to_path_buf(),
            file_size,
            files: Arc::new(ArcSwap::from_pointee(files)),
        };
        Ok((q, cut))
    }

    /// Reserves the blocks of the last file, the one appends continue in. Ours are fully
    /// allocated when made, but a RocketMQ store's are sparse (it maps without allocating), and a
    /// write through the mapping into a hole on a full disk is a SIGBUS, not an error. One cheap
    /// syscall for a file that has its blocks. Called once the queue's last file is known: after
    /// recovery for the CommitLog (a crashed RocketMQ broker leaves an empty next file, which
    /// recovery deletes), at load for a ConsumeQueue.
    pub fn reserve_last(&self) -> io::Result<()> {
        let Some(last) = self.last() else {
            return Ok(());
        };
        last.allocate_blocks().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "{}: reserving the blocks of this file, which appends continue in, failed: \
                     {e} (a sparse file, as RocketMQ leaves them, cannot be written through its \
                     mapping safely without them; free space and start again)",
                    last.path().display()
                ),
            )
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn file_size(&self) -> u64 {
        self.file_size
    }
    pub fn view(&self) -> FileQueueView {
        FileQueueView {
            file_size: self.file_size,
            files: self.files.clone(),
        }
    }
    pub fn files(&self) -> FileList {
        self.files.load_full()
    }
    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.files.load().last().cloned()
    }
    pub fn is_empty(&self) -> bool {
        self.files.load().is_empty()
    }

    /// Appends a file created for this queue; it must start where the last one ends.
    pub fn push(&self, file: Arc<MappedFile>) -> io::Result<()> {
        let cur = self.files.load();
        if let Some(last) = cur.last() {
            if file.file_from_offset() != last.file_from_offset() + self.file_size {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: does not follow {}",
                        file.path().display(),
                        last.path().display()
                    ),
                ));
            }
        }
        if let Some(last) = cur.last() {
            // The writer moves on: the full file is only read from now on (read-ahead back on).
            last.advise_filled();
        }
        drop(cur);
        // `rcu`, not load-then-store: retention may drop files from the front at the same time
        // on its own thread (it never drops the last file, so the check above stays true).
        self.files.rcu(|cur| {
            let mut next = Vec::with_capacity(cur.len() + 1);
            next.extend(cur.iter().cloned());
            next.push(file.clone());
            next
        });
        Ok(())
    }

    /// Creates (synchronously) the file starting at `from` and appends it.
    pub fn create_and_push(&self, from: u64, warm: Warm) -> io::Result<Arc<MappedFile>> {
        let f = Arc::new(MappedFile::create(&self.dir, from, self.file_size, warm)?);
        self.push(f.clone())?;
        Ok(f)
    }

    /// Global offset one past the last published byte (0 when empty).
    pub fn max_offset(&self) -> u64 {
        self.view().max_offset()
    }

    pub fn min_offset(&self) -> u64 {
        self.view().min_offset()
    }

    /// Recovery: cut everything at and beyond global `offset`. Files starting after it are
    /// removed from disk; the file containing it gets its positions set to `offset % size` and
    /// its tail zeroed, so what was cut can never come back at a later recovery.
    pub fn truncate_dirty(&self, offset: u64) -> io::Result<()> {
        let cur = self.files.load_full();
        let mut keep = Vec::with_capacity(cur.len());
        for f in cur.iter() {
            let end = f.file_from_offset() + self.file_size;
            if end <= offset {
                keep.push(f.clone());
            } else if f.file_from_offset() <= offset {
                // `offset` lies inside (or at the start of) this file: cut and zero the tail.
                f.cut_at(offset - f.file_from_offset())?;
                keep.push(f.clone());
            } else {
                f.mark_unavailable();
                std::fs::remove_file(f.path())?;
            }
        }
        self.files.store(Arc::new(keep));
        super::mapped_file::sync_dir(&self.dir)
    }

    /// Removes every file, from the list and from disk (a slave whose files hold nothing, about
    /// to start where its master's stream does).
    pub fn remove_all(&self) -> io::Result<()> {
        let cur = self.files.load_full();
        self.files.store(Arc::new(Vec::new()));
        for f in cur.iter() {
            f.mark_unavailable();
            remove_if_there(f.path())?;
        }
        super::mapped_file::sync_dir(&self.dir)
    }

    /// Removes every file of this queue's directory named for an offset below `offset` that is
    /// not in the list (left by an earlier run or made ahead and given up).
    pub fn remove_strays_below(&self, offset: u64) -> io::Result<usize> {
        let listed: Vec<u64> = self
            .files
            .load()
            .iter()
            .map(|f| f.file_from_offset())
            .collect();
        let mut n = 0;
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(from) = name
                .to_str()
                .filter(|s| s.len() == 20)
                .and_then(|s| s.parse::<u64>().ok())
            else {
                continue;
            };
            if from < offset && !listed.contains(&from) {
                remove_if_there(&entry.path())?;
                n += 1;
            }
        }
        if n > 0 {
            super::mapped_file::sync_dir(&self.dir)?;
        }
        Ok(n)
    }

    /// Retention: see [`FileQueueRetention::delete_files`].
    pub fn delete_files(&self, doomed: &[Arc<MappedFile>]) -> io::Result<usize> {
        self.retention().delete_files(doomed)
    }

    /// A handle that deletes files at the front, for a retention actor beside the owner.
    pub fn retention(&self) -> FileQueueRetention {
        FileQueueRetention {
            files: self.files.clone(),
        }
    }

    /// Removes the first `n` files (never the last one) from the list and from disk.
    pub fn delete_first(&self, n: usize) -> io::Result<usize> {
        let cur = self.files.load_full();
        let n = n.min(cur.len().saturating_sub(1));
        self.delete_files(&cur[..n])
    }

    /// Flushes the file containing the lowest unflushed byte; returns the global flushed offset.
    pub fn flush(&self, least_pages: u64) -> io::Result<u64> {
        let files = self.files.load();
        let mut flushed = files.first().map(|f| f.file_from_offset()).unwrap_or(0);
        for f in files.iter() {
            let pos = f.flush(least_pages)?;
            flushed = f.file_from_offset() + pos;
            if pos < self.file_size {
                break;
            }
        }
        Ok(flushed)
    }
}

/// Retention's handle on a file queue: it lists the files and deletes them at the front, on
/// the retention actor's thread while the owner appends (both update the list with `rcu`).
#[derive(Clone)]
pub struct FileQueueRetention {
    files: Arc<ArcSwap<Vec<Arc<MappedFile>>>>,
}

impl FileQueueRetention {
    pub fn files(&self) -> FileList {
        self.files.load_full()
    }

    /// Removes `doomed` (files at the front, oldest first, never the last one) from disk and
    /// then from the list, one at a time. Safe beside the owner's [`MappedFileQueue::push`] on
    /// another thread (both update the list with `rcu`). A reader still holding one keeps its
    /// mapping until it drops it (an unlinked file's mapping stays valid). Returns how many were
    /// removed.
    ///
    /// Stops at the first file that cannot be unlinked and leaves it, and every later one, in
    /// the list: a file out of the list but still on disk would move the queue's first offset
    /// past data that is still there (and with it the ConsumeQueues' and index's cleanup), and a
    /// later file deleted after it would leave a gap the next start refuses.
    pub fn delete_files(&self, doomed: &[Arc<MappedFile>]) -> io::Result<usize> {
        let mut n = 0;
        for f in doomed {
            let cur = self.files.load();
            if cur.last().is_some_and(|l| Arc::ptr_eq(l, f)) {
                break; // the last file: kept
            }
            match std::fs::remove_file(f.path()) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot delete {}: {e}", f.path().display()),
                    ));
                }
            }
            f.mark_unavailable();
            self.files.rcu(|cur| {
                cur.iter()
                    .filter(|g| !Arc::ptr_eq(g, f))
                    .cloned()
                    .collect::<Vec<_>>()
            });
            n += 1;
        }
        Ok(n)
    }
}

/// `remove_file`, where a file already gone counts as removed.
fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

impl FileQueueView {
    pub fn file_size(&self) -> u64 {
        self.file_size
    }
    pub fn files(&self) -> FileList {
        self.files.load_full()
    }

    /// The file containing global `offset`, if any.
    pub fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = self.files.load();
        let first = files.first()?.file_from_offset();
        if offset < first {
            return None;
        }
        let idx = ((offset - first) / self.file_size) as usize;
        files.get(idx).filter(|f| f.is_available()).cloned()
    }

    /// `len` bytes at global `offset`, if published and inside one file.
    pub fn read(&self, offset: u64, len: usize) -> Option<ReadSlice> {
        let file = self.find(offset)?;
        let pos = offset - file.file_from_offset();
        file.read(pos, len)?;
        Some(ReadSlice { file, pos, len })
    }

    /// One past the last readable byte (RocketMQ's `getMaxOffset`, from read positions). With
    /// write buffers the newest file may have nothing committed while the one before it is still
    /// being committed: the readable end is then in that earlier file, not at the newest file's
    /// start.
    pub fn max_offset(&self) -> u64 {
        let files = self.files.load();
        for (i, f) in files.iter().enumerate().rev() {
            let r = f.readable_position();
            if r > 0 || i == 0 {
                return f.file_from_offset() + r;
            }
        }
        0
    }

    /// One past the last written byte (RocketMQ's `getMaxWrotePosition` as an offset): includes
    /// bytes still only in a write buffer.
    pub fn max_wrote_offset(&self) -> u64 {
        let files = self.files.load();
        files
            .last()
            .map(|f| f.file_from_offset() + f.wrote_position())
            .unwrap_or(0)
    }

    /// Committer: commits every file from the one holding global offset `from` (the committed
    /// position so far) onward, in order, with `least_pages` applied per file (RocketMQ's
    /// `MappedFileQueue.commit`); stops at the first file not fully committed. Returns the global
    /// committed offset. Unbuffered files count as committed up to their write position.
    pub fn commit(&self, from: u64, least_pages: u64) -> io::Result<u64> {
        let files = self.files.load();
        let mut upto = files.first().map(|f| f.file_from_offset()).unwrap_or(0);
        for f in files.iter() {
            let end = f.file_from_offset() + f.file_size();
            if end <= from && f.committed_position() >= f.file_size() {
                upto = end;
                continue;
            }
            let pos = f.commit(least_pages)?;
            upto = f.file_from_offset() + pos;
            if pos < f.file_size() {
                break;
            }
        }
        Ok(upto)
    }

    pub fn min_offset(&self) -> u64 {
        self.files
            .load()
            .first()
            .map(|f| f.file_from_offset())
            .unwrap_or(0)
    }
}

/// A zero-copy view of published bytes; keeps its file mapped while alive.
#[derive(Clone)]
pub struct ReadSlice {
    file: Arc<MappedFile>,
    pos: u64,
    len: usize,
}

impl ReadSlice {
    pub fn as_bytes(&self) -> &[u8] {
        // Checked published at construction; published bytes never shrink for a live reader.
        self.file.read(self.pos, self.len).unwrap_or(&[])
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn global_offset(&self) -> u64 {
        self.file.file_from_offset() + self.pos
    }
}

impl std::fmt::Debug for ReadSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadSlice({}+{})", self.global_offset(), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(f: &MappedFile, upto: u64) {
        let cur = f.wrote_position();
        unsafe { f.write_slice(cur, (upto - cur) as usize).fill(7) };
        f.publish_wrote(upto);
    }

    /// A RocketMQ store's files are sparse past what was written (it maps them without
    /// allocating): the last one, which appends continue in, gets its blocks; the others are only
    /// read and are left as they are.
    #[test]
    fn the_last_file_of_a_sparse_store_gets_its_blocks_reserved() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let size = 1u64 << 20;
        for from in [0, size] {
            let f = std::fs::File::create(dir.path().join(format!("{from:020}"))).unwrap();
            f.set_len(size).unwrap();
        }
        let allocated = |from: u64| {
            let m = std::fs::metadata(dir.path().join(format!("{from:020}"))).unwrap();
            m.blocks() * 512
        };
        assert_eq!(
            (allocated(0), allocated(size)),
            (0, 0),
            "sparse to begin with"
        );
        let q = MappedFileQueue::load(dir.path(), size).unwrap();
        assert_eq!(q.files().len(), 2);
        assert_eq!(allocated(size), 0, "loading alone changes nothing");
        q.reserve_last().unwrap();
        assert!(
            allocated(size) >= size,
            "the last file: {}",
            allocated(size)
        );
        assert_eq!(allocated(0), 0, "an older file is left sparse");
    }

    #[test]
    fn load_push_find_and_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096).unwrap();
        assert!(q.is_empty());
        let a = q.create_and_push(0, Warm::No).unwrap();
        fill(&a, 4096);
        let b = q.create_and_push(4096, Warm::No).unwrap();
        fill(&b, 100);
        assert_eq!(q.max_offset(), 4196);
        let v = q.view();
        assert_eq!(v.find(5000).unwrap().file_from_offset(), 4096);
        assert!(v.read(4190, 6).is_some());
        assert!(v.read(4190, 7).is_none());
        assert!(q.push(a.clone()).is_err(), "non-adjacent push refused");

        drop((a, b));
        let q2 = MappedFileQueue::load(dir.path(), 4096).unwrap();
        assert_eq!(q2.files().len(), 2);
        q2.truncate_dirty(1000).unwrap();
        assert_eq!(q2.files().len(), 1);
        assert_eq!(q2.max_offset(), 1000);
        assert!(!dir.path().join("00000000000000004096").exists());
    }

    #[test]
    fn load_refuses_a_gap_and_names_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096).unwrap();
        q.create_and_push(0, Warm::No).unwrap();
        MappedFile::create(dir.path(), 8192, 4096, Warm::No).unwrap();
        let e = MappedFileQueue::load(dir.path(), 4096).err().unwrap();
        assert!(e.to_string().contains("00000000000000008192"), "{e}");
        assert!(
            dir.path().join("00000000000000008192").exists(),
            "a refusal removes nothing"
        );
    }

    #[test]
    fn retention_stops_at_a_file_it_cannot_delete_so_no_gap_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096).unwrap();
        for from in [0, 4096, 8192, 12288] {
            q.create_and_push(from, Warm::No).unwrap();
        }
        let files = q.files();
        // A path that cannot be unlinked as a file: a directory now stands where file 1 was.
        let second = files[1].path().to_path_buf();
        std::fs::remove_file(&second).unwrap();
        std::fs::create_dir(&second).unwrap();
        let e = q.delete_files(&files[..3]).unwrap_err();
        assert!(e.to_string().contains("00000000000000004096"), "{e}");
        assert!(!files[0].path().exists(), "the one before is gone");
        assert!(
            files[2].path().exists(),
            "the one after stays: deleting it would leave a gap"
        );
        // What is still on disk is still in the list: the queue's first offset does not move
        // past data that is there, however many rounds fail.
        let first = |q: &MappedFileQueue| q.files().first().unwrap().file_from_offset();
        assert_eq!((first(&q), q.files().len()), (4096, 3));
        let now = q.files();
        assert!(q.delete_files(&now[..2]).is_err());
        assert_eq!((first(&q), q.files().len()), (4096, 3));
        drop((q, files, now));
        std::fs::remove_dir(&second).unwrap();
        MappedFile::create(dir.path(), 4096, 4096, Warm::No).unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096).expect("contiguous at the next start");
        assert_eq!(q.files().len(), 3);
    }

    #[test]
    fn load_cut_at_gap_keeps_the_contiguous_part_and_returns_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096).unwrap();
        q.create_and_push(0, Warm::No).unwrap();
        q.create_and_push(4096, Warm::No).unwrap();
        drop(q);
        for from in [12288, 16384] {
            MappedFile::create(dir.path(), from, 4096, Warm::No).unwrap();
        }
        let (q, cut) = MappedFileQueue::load_cut_at_gap(dir.path(), 4096).unwrap();
        assert_eq!(q.files().len(), 2);
        assert_eq!(q.max_offset(), 8192);
        let names: Vec<_> = cut
            .iter()
            .map(|f| f.path().file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["00000000000000012288", "00000000000000016384"]);
        assert!(cut.iter().all(|f| f.path().exists()), "left to the caller");
        for f in cut {
            let path = f.path().to_path_buf();
            drop(f);
            std::fs::remove_file(path).unwrap();
        }
        // Without a gap nothing is cut.
        drop(q);
        let (q, cut) = MappedFileQueue::load_cut_at_gap(dir.path(), 4096).unwrap();
        assert_eq!((q.files().len(), cut.len()), (2, 0));
    }
}
