//! `MappedFile`: one fixed-size, fully allocated, memory-mapped file of a file queue (a CommitLog
//! or ConsumeQueue segment), named by the 20-digit global offset of its first byte.
//!
//! Ownership (ARCHITECTURE.md): exactly one owner writes a file — the actor holding the file queue —
//! while any number of readers look at it through `Arc<MappedFile>`. The owner appends at
//! `wrote` and then *publishes* the new position with a `Release` store; readers load it with
//! `Acquire` and never look at bytes at or beyond it. Bytes below a published position never
//! change again (except by recovery — truncation, and the repair of a torn ConsumeQueue unit,
//! [`MappedFile::rewrite_published`] — which happens before any reader exists). That
//! single rule is what replaces RocketMQ's put lock for readers.
//!
//! Three positions (RocketMQ's `MappedFile` wrotePosition, committedPosition, flushedPosition,
//! store/src/main/java/org/apache/rocketmq/store/MappedFile.java), `wrote ≥ committed ≥ flushed`:
//! * **wrote** — bytes the owner has appended;
//! * **committed** — bytes in the file's page cache. Without a write buffer that is `wrote`
//!   itself (the owner writes through the mapping). With a buffer from the
//!   [`TransientStorePool`](super::transient_pool::TransientStorePool) the owner appends into the
//!   buffer and the committer copies `buffer[committed..wrote]` into the file with `pwrite`
//!   ([`MappedFile::commit`]);
//! * **flushed** — bytes on disk (`msync` of the mapping, or `fdatasync` of the fd for a buffered
//!   file, which is the point of the buffer: a `pwrite` + `fdatasync` does not pay the
//!   write-protect fault and journal commit that `msync` of a dirtied mapping does).
//!
//! Readers see the **readable** limit: `committed` for a buffered file, `wrote` otherwise — a
//! reader must never see bytes that are only in the buffer, because it reads the mapping.
//!
//! Files are created under a temporary name, fully allocated with `posix_fallocate` (a write into a
//! sparse mapping on a full disk is a SIGBUS, not an error), optionally pre-faulted, and only then
//! linked under their real name — so a file with a real name is always complete, and two creators
//! (the allocator and the writer's fallback) can race without clobbering each other. The new
//! inode is synced before the link and the directory after it: a name on the disk always points
//! at the file's own inode, also on a file system without a journal.
//!
//! Zero-written files (SYNC_FLUSH CommitLogs, [`ZeroAhead`]): `fallocate` reserves blocks as
//! *unwritten* extents, and on ext4 every `fdatasync` that covers freshly written blocks there
//! must also convert the extent and write that metadata synchronously — measured on this project's
//! VM, it doubled the time of a small group commit's `fdatasync` (~240 → ~130 µs for 8 KiB). So
//! the next SYNC_FLUSH CommitLog file is zero-written with direct I/O (no page cache: buffered
//! zeros left large folios whose buffer heads every later small `pwrite` walked) ahead of its
//! owner, and `fdatasync`s over the zeroed part write data only. Direct I/O never races the owner:
//! a file being zeroed is a [`ZeroAhead`], which owns it — no other handle on it exists in the
//! process — until [`ZeroAhead::into_file`] hands it over, so every zeroing write has returned
//! before its owner can write. Opening the same name again while it is being zeroed is the one way
//! around that, and the runtime never does it: the writer asks the allocator for the file before
//! it creates one itself (actors/src/store/allocator.rs). The price is on the page cache side: a
//! partial-page `pwrite` into a written block that is not cached must first *read* that block (an
//! unwritten one is known to be zero), so a commit to a zero-written ring page no earlier commit
//! touched extends the write with zeros to the page's end ([`MappedFile::commit`]) — the content
//! is the same zeros, and the page is then cached for the appends that follow.
//!
//! Read-around: a page fault on a file mapping reads `read_ahead_kb` around the faulting page
//! (8 MiB on this project's machines). For the part of a file its owner is still filling there
//! is nothing to read — every such page is zero-filled — so one fault of the writer would
//! zero-fill megabytes at once: a 5–60 ms stall every few MiB, the whole tail of a send's latency.
//! A fresh file is therefore advised `MADV_RANDOM` ([`MappedFile::advise_filling`]: one page per
//! fault, the same total work spread evenly), and back to `MADV_NORMAL` once its queue moves on
//! to the next file ([`MappedFile::advise_filled`]), so that a consumer catching up on old data
//! still gets read-ahead.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use memmap2::{MmapOptions, MmapRaw};

use super::transient_pool::BufferLease;
use crate::offset::file_name_of;

/// OS page size assumed by RocketMQ's flush/commit page arithmetic.
pub const OS_PAGE_SIZE: u64 = 4096;
/// How far ahead of its writes the owner maps a write ring's pages (`ring_room`): 256 page-table
/// entries per call, ≈ 900 1 KiB messages apart.
pub const RING_MAP_AHEAD: u64 = 1 << 20;

pub struct MappedFile {
    path: PathBuf,
    file_from_offset: u64,
    file_size: u64,
    map: MmapRaw,
    _file: File,
    /// Bytes written by the owner (position within the file); visible to readers unless the file
    /// has a write buffer.
    wrote: AtomicU64,
    /// Buffered files: bytes copied from the buffer into the file (the readable limit). Moved
    /// only by the committer.
    committed: AtomicU64,
    /// Bytes known to be on disk (position within the file).
    flushed: AtomicU64,
    /// The write buffer lent by the pool, set once by the owner before its first append; given
    /// back (`release`) once the file is full and fully committed.
    write_buffer: OnceLock<BufferLease>,
    /// Ring files, owner only: the write ring's pages are mapped up to here (`ring_room`).
    ring_mapped_upto: AtomicU64,
    /// Ring files, owner only: the ring's pages are unmapped below here (`ring_room`).
    ring_unmapped_upto: AtomicU64,
    /// Set when the file is being retired; readers stop handing out new views of it.
    unavailable: AtomicBool,
    /// Bytes from the start known zero-written (see the module docs): what a [`ZeroAhead`] got
    /// done before it handed the file over; 0 for every other file (one opened from disk may have
    /// unwritten blocks). Fixed once the file is shared.
    zeroed_upto: u64,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("from", &self.file_from_offset)
            .field("wrote", &self.wrote_position())
            .field("buffered", &self.is_buffered())
            .finish()
    }
}

/// How to treat the pages of a freshly created file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warm {
    /// Leave pages to be faulted in by the first write.
    No,
    /// Pre-fault every page for writing (`MADV_POPULATE_WRITE`, falling back to touching one
    /// byte per page) so the writer never takes a page fault on this file.
    Populate,
}

impl MappedFile {
    /// Creates `dir/<20-digit offset>` of `file_size` bytes, fully allocated, and maps it.
    /// If the file already exists (someone else created it first), it is opened instead.
    pub fn create(
        dir: &Path,
        file_from_offset: u64,
        file_size: u64,
        warm: Warm,
    ) -> io::Result<MappedFile> {
        Self::create_with(dir, file_from_offset, file_size, warm).map(|(f, _)| f)
    }

    /// Bytes from the start that are zero-written.
    pub fn zeroed_upto(&self) -> u64 {
        self.zeroed_upto
    }

    /// As [`MappedFile::create`]; `true` when this call made the file (linked its name), `false`
    /// when it opened one that existed.
    fn create_with(
        dir: &Path,
        file_from_offset: u64,
        file_size: u64,
        warm: Warm,
    ) -> io::Result<(MappedFile, bool)> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(file_name_of(file_from_offset));
        if path.exists() {
            return Ok((MappedFile::open(&path, file_size)?, false));
        }
        // Unique temporary name per creator so racing creators never share a temp file.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            file_name_of(file_from_offset),
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let prepared = allocate(&file, file_size).and_then(|()| {
            let map = MmapOptions::new().len(file_size as usize).map_raw(&file)?;
            advise(&map, 0, file_size as usize, libc::MADV_RANDOM);
            if warm == Warm::Populate {
                populate_write(&map);
            }
            Ok(map)
        });
        // The inode (its size and extents) reaches the disk before any directory entry names
        // it: on ext4 without a journal a synced entry can otherwise point, after a power loss,
        // at an inode whose on-disk copy is still a deleted file's (seen: a 4000-byte
        // ConsumeQueue file found 423 bytes long, which stops the next start).
        let prepared = prepared.and_then(|map| file.sync_all().map(|()| map));
        let map = match prepared {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        // `link` fails if the real name exists: the first complete file wins, never clobbered.
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked.and_then(|()| {
            // The new name must survive a power loss like the data written into it.
            sync_dir(dir)
        }) {
            Ok(()) => Ok((
                MappedFile::from_parts(path, file_from_offset, file_size, map, file),
                true,
            )),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                drop(map);
                // The name may be one an earlier try linked and could not make durable (its
                // directory sync failed): synced now, before anything is acknowledged in it.
                sync_dir(dir)?;
                Ok((MappedFile::open(&path, file_size)?, false))
            }
            Err(e) => Err(e),
        }
    }

    /// Reserves every block of the file not yet allocated (`posix_fallocate`; nothing to do for a
    /// file this store made). For an existing file that writes will go on in.
    pub fn allocate_blocks(&self) -> io::Result<()> {
        allocate(&self._file, self.file_size)
    }

    /// Maps an existing file. Its length must equal `file_size` (RocketMQ refuses to start
    /// otherwise). Positions start at 0; recovery sets them.
    pub fn open(path: &Path, file_size: u64) -> io::Result<MappedFile> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let from: u64 = name.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: file name is not a 20-digit offset", path.display()),
            )
        })?;
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        if len != file_size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: length {len} differs from the configured file size {file_size}",
                    path.display()
                ),
            ));
        }
        let map = MmapOptions::new().len(file_size as usize).map_raw(&file)?;
        Ok(MappedFile::from_parts(
            path.to_path_buf(),
            from,
            file_size,
            map,
            file,
        ))
    }

    fn from_parts(path: PathBuf, from: u64, size: u64, map: MmapRaw, file: File) -> MappedFile {
        MappedFile {
            path,
            file_from_offset: from,
            file_size: size,
            map,
            _file: file,
            wrote: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
            write_buffer: OnceLock::new(),
            ring_mapped_upto: AtomicU64::new(0),
            ring_unmapped_upto: AtomicU64::new(0),
            unavailable: AtomicBool::new(false),
            zeroed_upto: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn file_from_offset(&self) -> u64 {
        self.file_from_offset
    }
    pub fn file_size(&self) -> u64 {
        self.file_size
    }
    /// Published write position within the file.
    #[inline]
    pub fn wrote_position(&self) -> u64 {
        self.wrote.load(Ordering::Acquire)
    }
    pub fn flushed_position(&self) -> u64 {
        self.flushed.load(Ordering::Acquire)
    }
    /// Bytes in the file's page cache: the committed position of a buffered file, the write
    /// position otherwise.
    #[inline]
    pub fn committed_position(&self) -> u64 {
        if self.is_buffered() {
            self.committed.load(Ordering::Acquire)
        } else {
            self.wrote_position()
        }
    }
    /// What readers may look at (RocketMQ's `getReadPosition`): see the module docs.
    #[inline]
    pub fn readable_position(&self) -> u64 {
        self.committed_position()
    }
    /// Whether appends go to a write buffer (and reach the file only by [`MappedFile::commit`]).
    #[inline]
    pub fn is_buffered(&self) -> bool {
        self.write_buffer.get().is_some()
    }

    /// Owner only, before the first append: appends go to `buffer` from now on. Refused (the
    /// lease is handed back) when the file already holds data or a buffer — a file half written
    /// through the mapping stays unbuffered, as RocketMQ leaves files loaded at start. A ring
    /// buffer (which holds no earlier bytes anyway) is taken at any write position: everything
    /// written so far counts as committed, and appends continue in the ring.
    pub fn attach_write_buffer(&self, buffer: BufferLease) -> Result<(), BufferLease> {
        let wrote = self.wrote_position();
        let ring = buffer.ring_size().is_some();
        if buffer.len() as u64 != self.file_size
            || (wrote != 0 && !ring)
            || self.write_buffer.get().is_some()
        {
            return Err(buffer);
        }
        // Before the buffer is visible: a reader that sees the file buffered reads `committed`.
        self.committed.store(wrote, Ordering::Release);
        self.write_buffer.set(buffer)?;
        if ring {
            // The writer no longer faults on the mapping, only readers do, on pages the commits
            // put in the page cache: fault-around (off under MADV_RANDOM) maps 16 at a time.
            self.advise_filled();
        }
        Ok(())
    }

    /// Owner only, before writing `len` bytes at `pos` of a ring-buffered file: commits what is
    /// published when those bytes would reach past the ring from the committed position (they
    /// would overwrite bytes not yet in the file). A no-op for other files.
    ///
    /// It also maps the ring's pages ahead of the write, [`RING_MAP_AHEAD`] at a time, so the
    /// writer takes no page fault in the ring's later windows (`RingMap::populate`), and unmaps
    /// them more than a ring (and a step) behind it, where no commit reads any more, so the
    /// resident set counts the ring once, not once per window (`RingMap::unmap`).
    pub fn ring_room(&self, pos: u64, len: u64) -> io::Result<()> {
        let Some((buf, ring)) = self
            .write_buffer
            .get()
            .and_then(|b| Some((b, b.ring_size()?)))
        else {
            return Ok(());
        };
        let mapped = self.ring_mapped_upto.load(Ordering::Relaxed);
        if pos + len > mapped {
            let from = mapped.max(pos);
            let to = (pos + len + RING_MAP_AHEAD).min(self.file_size);
            // Best effort: without the advice the pages fault on first write, as before.
            buf.prefault(from as usize, (to - from) as usize);
            self.ring_mapped_upto.store(to, Ordering::Relaxed);
            let behind = pos.saturating_sub(ring as u64 + RING_MAP_AHEAD) & !(OS_PAGE_SIZE - 1);
            let unmapped = self.ring_unmapped_upto.load(Ordering::Relaxed);
            if behind > unmapped {
                buf.unmap_ring_pages(unmapped as usize, (behind - unmapped) as usize);
                self.ring_unmapped_upto.store(behind, Ordering::Relaxed);
            }
        }
        if pos + len > self.committed.load(Ordering::Acquire) + ring as u64 {
            self.commit(0)?;
            if pos + len > self.committed.load(Ordering::Acquire) + ring as u64 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: {len} bytes at {pos} do not fit the {ring}-byte write ring",
                        self.path.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Committer only: copies `buffer[committed..wrote]` into the file with positional writes
    /// when at least `least_pages` pages are pending (or the file is full, or `least_pages == 0`
    /// and anything is pending), then publishes the committed position. When the file is full and
    /// fully committed its buffer goes back to the pool. Returns the committed position; an error
    /// leaves it where it was (the bytes stay in the buffer for a retry). Unbuffered files have
    /// nothing to commit: the write position is returned.
    pub fn commit(&self, least_pages: u64) -> io::Result<u64> {
        let Some(buf) = self.write_buffer.get() else {
            return Ok(self.wrote_position());
        };
        let committed = self.committed.load(Ordering::Acquire);
        if buf.is_released() {
            return Ok(committed);
        }
        let wrote = self.wrote_position();
        if wrote > committed {
            if !able(wrote, committed, least_pages, self.file_size) {
                return Ok(committed);
            }
            // SAFETY: [committed, wrote) lies below the published write position, so the owner no
            // longer writes it (module invariant), and inside the buffer (wrote <= file_size ==
            // buffer length, checked at attach); the lease is not released (checked above) and
            // only the committer releases it.
            let end = self.commit_end(committed, wrote, buf.ring_size());
            if end > wrote {
                // SAFETY: [wrote, end) lies inside the buffer (end <= file_size) at or beyond the
                // write position, so no reader looks at it; for a ring, commits run on the owner's
                // thread (the writer commits its own appends), so the owner is not writing there
                // now, and `commit_end` keeps end - committed within the ring, so the ring bytes
                // zeroed alias file bytes already committed.
                unsafe {
                    std::ptr::write_bytes(
                        buf.as_mut_ptr().add(wrote as usize),
                        0,
                        (end - wrote) as usize,
                    )
                };
            }
            let src = unsafe {
                std::slice::from_raw_parts(
                    buf.as_mut_ptr().add(committed as usize),
                    (end - committed) as usize,
                )
            };
            self._file.write_all_at(src, committed)?;
            self.committed.store(wrote, Ordering::Release);
        }
        let committed = committed.max(wrote);
        if committed >= self.file_size {
            buf.release();
        }
        Ok(committed)
    }
    /// Where a commit of `[committed, wrote)` ends: `wrote`, or for a ring file whose range reaches
    /// into a zero-written page no earlier commit touched, that page's end (clamped to the file
    /// and to the ring), so the kernel overwrites the whole page instead of reading it first. The
    /// bytes past `wrote` are zeros, as the file already holds there; the next commit starts at
    /// `wrote` again and overwrites them with what the owner appends.
    fn commit_end(&self, committed: u64, wrote: u64, ring: Option<usize>) -> u64 {
        let Some(ring) = ring else { return wrote };
        if wrote % OS_PAGE_SIZE == 0 {
            return wrote;
        }
        let last_page = wrote / OS_PAGE_SIZE;
        let touched = committed.div_ceil(OS_PAGE_SIZE);
        let end = ((last_page + 1) * OS_PAGE_SIZE).min(self.file_size);
        if last_page < touched || end - committed > ring as u64 || end > self.zeroed_upto() {
            return wrote;
        }
        end
    }

    pub fn is_full(&self) -> bool {
        self.wrote_position() >= self.file_size
    }
    pub fn is_available(&self) -> bool {
        !self.unavailable.load(Ordering::Acquire)
    }
    pub fn mark_unavailable(&self) {
        self.unavailable.store(true, Ordering::Release);
    }

    /// Readers: `len` bytes at `pos` if they lie wholly below the readable limit.
    #[inline]
    pub fn read(&self, pos: u64, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len as u64)?;
        if end > self.readable_position() {
            return None;
        }
        // SAFETY: [pos, end) is inside the mapping (wrote <= file_size) and below the readable
        // limit, so no one writes these bytes of the mapping while the returned borrow lives
        // (module invariant: the owner, or the committer for a buffered file, writes only at or
        // beyond it); the mapping lives as long as `self`.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(pos as usize), len) })
    }

    /// Readers: everything from `pos` up to the readable limit.
    pub fn read_from(&self, pos: u64) -> &[u8] {
        let wrote = self.readable_position();
        if pos >= wrote {
            return &[];
        }
        self.read(pos, (wrote - pos) as usize).unwrap_or(&[])
    }

    /// Owner only: the writable bytes `[pos, pos+len)`, which must lie at or beyond the published
    /// write position.
    ///
    /// # Safety
    /// The caller must be the file's single owner (no other `&mut` to these bytes exists) and
    /// `pos >= wrote_position()`, so no reader can be looking at them.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn write_slice(&self, pos: u64, len: usize) -> &mut [u8] {
        debug_assert!(pos >= self.wrote.load(Ordering::Relaxed));
        debug_assert!(pos + len as u64 <= self.file_size);
        // Buffered: the bytes go to the write buffer; the committer copies them to the file.
        let base = match self.write_buffer.get() {
            Some(b) => {
                debug_assert!(!b.is_released(), "append into a returned write buffer");
                b.as_mut_ptr()
            }
            None => self.map.as_mut_ptr(),
        };
        std::slice::from_raw_parts_mut(base.add(pos as usize), len)
    }

    /// Recovery only (the owner, before readers exist): overwrites `bytes` at `pos`, below the
    /// published write position, and lowers the flushed position to `pos` so that the next
    /// flush writes them. For an unbuffered file (written through the mapping).
    ///
    /// # Safety
    /// The caller must be the file's single owner, no reader may look at these bytes while they
    /// change, and `[pos, pos + bytes.len())` must lie in the file.
    pub unsafe fn rewrite_published(&self, pos: u64, bytes: &[u8]) {
        debug_assert!(
            self.write_buffer.get().is_none(),
            "a buffered file is written by pwrite"
        );
        debug_assert!(pos + bytes.len() as u64 <= self.file_size);
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            self.map.as_mut_ptr().add(pos as usize),
            bytes.len(),
        );
        self.flushed.fetch_min(pos, Ordering::AcqRel);
    }

    /// Owner only: publishes a new write position (bytes below it are now visible).
    #[inline]
    pub fn publish_wrote(&self, pos: u64) {
        debug_assert!(pos <= self.file_size);
        self.wrote.store(pos, Ordering::Release);
    }

    /// Recovery only (before readers exist): sets every position, e.g. after truncation.
    pub fn set_positions(&self, pos: u64) {
        self.wrote.store(pos, Ordering::Release);
        self.committed.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
    }

    /// Recovery only: cuts the file at `pos` — positions move there and every byte from `pos` to
    /// the end becomes zero on disk. Without the zeroing, records beyond a cut would come back at
    /// the next recovery as soon as new appends end on an old record boundary (RocketMQ leaves
    /// them; we do not). Uses `FALLOC_FL_ZERO_RANGE` (no data written, extents reset), falling
    /// back to writing zeros through the mapping.
    pub fn cut_at(&self, pos: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let pos = pos.min(self.file_size);
        self.set_positions(pos);
        let len = self.file_size - pos;
        if len == 0 {
            return Ok(());
        }
        let mode = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: plain syscall on our own fd; the range is inside the file.
        let rc = unsafe {
            libc::fallocate(
                self._file.as_raw_fd(),
                mode,
                pos as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            // SAFETY: recovery runs before any reader exists and we are the file's only owner.
            unsafe {
                std::ptr::write_bytes(self.map.as_mut_ptr().add(pos as usize), 0, len as usize)
            };
            self.map.flush_range(pos as usize, len as usize)?;
        }
        self._file.sync_data()
    }

    /// Starts write-back of the committed whole pages in `[from, committed)` without waiting for
    /// it (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), when they are at least `least` bytes or end
    /// the file. Returns where the next call should start: the end of what was submitted, or
    /// `from` rounded down to its page when nothing was.
    ///
    /// What it buys: an `fdatasync` after a long interval writes back everything dirtied since
    /// the last one in a single burst of CPU (page walking, block mapping, I/O submission);
    /// started in small steps as the bytes arrive, the same work is spread evenly and the flush
    /// finds little left to do. It promises nothing — the flush still decides durability — and it
    /// never waits for the I/O: waiting would consume a write-back error that the next
    /// `fdatasync` must report (`SYNC_FILE_RANGE_WAIT_AFTER` checks and advances the file's error
    /// cursor), and a flush error must never be swallowed.
    pub fn write_behind(&self, from: u64, least: u64) -> io::Result<u64> {
        use std::os::fd::AsRawFd;
        let from = from.min(self.file_size);
        let from = from - from % OS_PAGE_SIZE;
        let committed = self.committed_position();
        // A partial last page would be dirtied again by the next append and written twice.
        let to = if committed == self.file_size {
            committed
        } else {
            committed - committed % OS_PAGE_SIZE
        };
        if to <= from || (to - from < least && to < self.file_size) {
            return Ok(from);
        }
        // SAFETY: plain syscall on our own fd; the range is inside the file.
        let rc = unsafe {
            libc::sync_file_range(
                self._file.as_raw_fd(),
                from as libc::off64_t,
                (to - from) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(to)
    }

    /// Flushes committed-but-unflushed bytes when at least `least_pages` pages are pending (or
    /// the file is full, or `least_pages == 0` and anything is pending): `fdatasync` of the fd
    /// for a buffered file (its bytes arrived by `pwrite`), `msync` of the dirty range otherwise.
    /// Returns the new flushed position. An error leaves the flushed position where it was.
    pub fn flush(&self, least_pages: u64) -> io::Result<u64> {
        // Loaded before the flush starts: everything below it is in the page cache now.
        let target = self.committed_position();
        let flushed = self.flushed_position();
        if target <= flushed {
            return Ok(flushed);
        }
        if !able(target, flushed, least_pages, self.file_size) {
            return Ok(flushed);
        }
        if self.is_buffered() {
            self._file.sync_data()?;
        } else {
            let start = flushed - flushed % OS_PAGE_SIZE;
            self.map
                .flush_range(start as usize, (target - start) as usize)?;
        }
        self.flushed.store(target, Ordering::Release);
        Ok(target)
    }
}

impl MappedFile {
    /// `fdatasync` of the whole file, whatever the tracked flushed position says. For recovery:
    /// a crashed process's bytes may still be dirty in the page cache, and the positions a
    /// recovered file starts with only say where its data ends.
    pub fn sync_data(&self) -> io::Result<()> {
        self._file.sync_data()
    }
}

impl std::os::fd::AsRawFd for MappedFile {
    /// The file's descriptor (diagnostics, and tests that inject I/O errors).
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self._file.as_raw_fd()
    }
}

impl MappedFile {
    /// No read-around for `[from, end)`, the part the owner still fills (module docs): the
    /// writer's faults there zero-fill one page each instead of `read_ahead_kb` at once.
    pub fn advise_filling(&self, from: u64) {
        let start = (from - from % OS_PAGE_SIZE).min(self.file_size);
        advise(
            &self.map,
            start as usize,
            (self.file_size - start) as usize,
            libc::MADV_RANDOM,
        );
    }

    /// Normal read-ahead again once the file is full: later reads are a consumer catching up.
    pub fn advise_filled(&self) {
        advise(&self.map, 0, self.file_size as usize, libc::MADV_NORMAL);
    }

    /// Pre-faults `[start, start+len)` for writing while the owner may already be writing other
    /// pages of the file: `MADV_POPULATE_WRITE` never changes content. On kernels without it, the
    /// pages are read-touched instead (content untouched; the zero-fill still happens here rather
    /// than on the writer's thread).
    pub fn prefault(&self, start: u64, len: u64) {
        let start = start.min(self.file_size);
        let len = len.min(self.file_size - start) as usize;
        if len == 0 {
            return;
        }
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        // SAFETY: advice on a sub-range of our own mapping; page aligned because `start` is a
        // multiple of the page size in every caller (checked below) and the mapping is aligned.
        let p = unsafe { self.map.as_mut_ptr().add(start as usize) };
        debug_assert_eq!(start % OS_PAGE_SIZE, 0);
        let rc = unsafe { libc::madvise(p.cast(), len, MADV_POPULATE_WRITE) };
        if rc != 0 {
            let mut i = 0;
            while i < len {
                // SAFETY: inside the mapping; a read never races with the owner's writes in a
                // way that matters (the value is discarded).
                unsafe { std::ptr::read_volatile(p.add(i)) };
                i += OS_PAGE_SIZE as usize;
            }
        }
    }
}

/// RocketMQ's page rule for flush and commit (`MappedFile.isAbleToFlush`, `isAbleToCommit`): with
/// `least_pages > 0`, act only when `ahead/4096 − behind/4096 ≥ least_pages` or the file is full;
/// with 0, whenever anything is pending.
fn able(ahead: u64, behind: u64, least_pages: u64, file_size: u64) -> bool {
    if least_pages == 0 {
        return ahead > behind;
    }
    ahead / OS_PAGE_SIZE - behind / OS_PAGE_SIZE >= least_pages || ahead >= file_size
}

/// How a batch of blocking file-system calls runs — making many ConsumeQueue files at once,
/// syncing every one at a crashed start — whose latency, not CPU, is the cost. The core never
/// starts a thread: it hands the batch to its caller's implementation ([`map_jobs`]). Without
/// one the calls run one after another ([`Sequential`]); the runtime's overlaps them on threads
/// (actors/src/store/parallel_io.rs).
pub trait ParallelIo: Send + Sync {
    /// Runs `job(i)` once for every `i` in `0..jobs`, in any order and on any threads, and
    /// returns once every call has returned. A panic in `job` is passed on.
    fn run(&self, jobs: usize, job: &(dyn Fn(usize) + Sync));
}

/// One call after another, on the calling thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sequential;

impl ParallelIo for Sequential {
    fn run(&self, jobs: usize, job: &(dyn Fn(usize) + Sync)) {
        (0..jobs).for_each(job);
    }
}

/// `f` of every job, run through `io`; the results come back in the jobs' order. A job `io` did
/// not run (an implementation that broke its promise) runs here, on the calling thread.
pub fn map_jobs<J: Sync, T: Send + Sync>(
    io: &dyn ParallelIo,
    jobs: &[J],
    f: impl Fn(&J) -> T + Sync,
) -> Vec<T> {
    let done: Vec<OnceLock<T>> = jobs.iter().map(|_| OnceLock::new()).collect();
    io.run(jobs.len(), &|i| {
        if let (Some(job), Some(slot)) = (jobs.get(i), done.get(i)) {
            // A second call for the same job would change nothing: the first result stays.
            let _ = slot.set(f(job));
        }
    });
    done.into_iter()
        .zip(jobs)
        .map(|(slot, job)| slot.into_inner().unwrap_or_else(|| f(job)))
        .collect()
}

/// Makes directory entries (a created, renamed or removed file) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Reserves every block of the file so later writes through the mapping cannot hit ENOSPC.
fn allocate(file: &File, size: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscall on an fd we own.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size as libc::off_t) };
    match rc {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(size),
        err => Err(io::Error::from_raw_os_error(err)),
    }
}

/// A new file zero-written ahead of its owner with direct I/O, in steps (see the module docs).
/// It owns the file — no other handle on it exists in the process — until
/// [`ZeroAhead::into_file`] hands it over, so no zeroing write is in flight, and none can follow,
/// once the owner has it. The allocator holds one for the next CommitLog file, writes a step
/// after each small group commit (when the disk has just finished a flush and the next has not
/// started) and larger steps when no group commits come, one [`ZeroAhead::WRITE`] per turn of
/// its mailbox, and hands the file to the writer when the writer rolls into it.
pub struct ZeroAhead {
    file: MappedFile,
    dio: File,
    zeros: memmap2::MmapMut,
}

/// What [`ZeroAhead::create`] made.
pub enum Prepared {
    /// A new file, to be zeroed ahead.
    Zeroing(ZeroAhead),
    /// A file not to be zeroed, ready for its owner: its name existed already (another creator's
    /// file, which may hold data), or the file system does no direct I/O (tmpfs). With the
    /// error when opening it for direct I/O failed otherwise (only the speed-up is lost).
    Plain(MappedFile, Option<io::Error>),
}

impl ZeroAhead {
    /// Largest single write: a group commit's `fdatasync` that arrives while one is on the device
    /// waits for it (~60 µs for 64 KiB here), and so does the owner taking the file.
    pub const WRITE: u64 = 64 << 10;

    /// Creates `dir/<20-digit offset>` as [`MappedFile::create`] does (not warmed) and opens it
    /// for zeroing ahead, if this call made it and direct I/O works there.
    pub fn create(dir: &Path, file_from_offset: u64, file_size: u64) -> io::Result<Prepared> {
        use std::os::unix::fs::OpenOptionsExt;
        let (file, made_here) =
            MappedFile::create_with(dir, file_from_offset, file_size, Warm::No)?;
        if !made_here {
            return Ok(Prepared::Plain(file, None));
        }
        let dio = match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(file.path())
        {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                return Ok(Prepared::Plain(file, None))
            }
            Err(e) => return Ok(Prepared::Plain(file, Some(e))),
        };
        // Page-aligned and zero, as direct I/O needs.
        match memmap2::MmapMut::map_anon(Self::WRITE as usize) {
            Ok(zeros) => Ok(Prepared::Zeroing(ZeroAhead { file, dio, zeros })),
            Err(e) => Ok(Prepared::Plain(file, Some(e))),
        }
    }

    /// The file being zeroed (its path, offset and [`MappedFile::zeroed_upto`]).
    pub fn file(&self) -> &MappedFile {
        &self.file
    }

    /// Zero-writes up to `len` more bytes (whole pages, in writes of at most
    /// [`ZeroAhead::WRITE`]) after what is done; `Ok(false)` once there is nothing more to do
    /// (the whole file is zeroed, or the file system refused a direct write). An error leaves
    /// `zeroed_upto` at the end of the last write that succeeded.
    pub fn step(&mut self, len: u64) -> io::Result<bool> {
        let whole = self.file.file_size - self.file.file_size % OS_PAGE_SIZE;
        let end = (self.file.zeroed_upto + len - len % OS_PAGE_SIZE).min(whole);
        while self.file.zeroed_upto < end {
            let pos = self.file.zeroed_upto;
            let n = (end - pos).min(Self::WRITE);
            match self.dio.write_all_at(&self.zeros[..n as usize], pos) {
                Ok(()) => self.file.zeroed_upto = pos + n,
                // Some file systems accept O_DIRECT at open and refuse the write.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(end < whole)
    }

    /// Ends the zeroing and hands the file to its owner, with what was zeroed (the owner's
    /// commits pad pages below [`MappedFile::zeroed_upto`]). The direct-I/O handle closes here:
    /// nothing writes zeros into the file from now on.
    pub fn into_file(self) -> MappedFile {
        self.file
    }
}

/// Paging advice for `[start, start+len)` of `map`. Advice is a hint: a failure changes no
/// content and no result, so it is not an error (a kernel without the advice keeps read-around).
pub(crate) fn advise(map: &MmapRaw, start: usize, len: usize, advice: libc::c_int) {
    if len == 0 {
        return;
    }
    debug_assert_eq!(start as u64 % OS_PAGE_SIZE, 0);
    // SAFETY: a page-aligned sub-range of a mapping we own; advice never changes its content.
    unsafe { libc::madvise(map.as_mut_ptr().add(start).cast(), len, advice) };
}

/// Pre-faults every page of a fresh mapping for writing.
fn populate_write(map: &MmapRaw) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    // SAFETY: advice on a mapping we own; on kernels without POPULATE_WRITE it fails harmlessly.
    let rc = unsafe { libc::madvise(map.as_mut_ptr().cast(), map.len(), MADV_POPULATE_WRITE) };
    if rc != 0 {
        // Older kernel: touch one byte per page. The file is fresh (all zero), so writing zero is
        // a no-op for content but faults the page in writable.
        let p = map.as_mut_ptr();
        let mut i = 0;
        while i < map.len() {
            // SAFETY: i < len, inside our private-to-the-owner fresh mapping.
            unsafe { std::ptr::write_volatile(p.add(i), 0) };
            i += OS_PAGE_SIZE as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::transient_pool::TransientStorePool;
    use std::sync::Arc;

    #[test]
    fn map_jobs_answers_every_job_in_order() {
        let jobs: Vec<u64> = (0..1000).collect();
        let out = map_jobs(&Sequential, &jobs, |j| j * 2);
        assert_eq!(out, jobs.iter().map(|j| j * 2).collect::<Vec<_>>());
        assert_eq!(map_jobs(&Sequential, &jobs[..1], |j| j + 1), vec![1]);
        assert!(map_jobs(&Sequential, &jobs[..0], |j| *j).is_empty());

        // Backwards, and skipping every third job: each result still lands in its job's place,
        // and a job the implementation left out runs on the caller's thread.
        struct Sloppy;
        impl ParallelIo for Sloppy {
            fn run(&self, jobs: usize, job: &(dyn Fn(usize) + Sync)) {
                (0..jobs).rev().filter(|i| i % 3 != 0).for_each(job);
            }
        }
        let ran = std::sync::atomic::AtomicUsize::new(0);
        let out = map_jobs(&Sloppy, &jobs, |j| {
            ran.fetch_add(1, Ordering::Relaxed);
            j * 3
        });
        assert_eq!(out, jobs.iter().map(|j| j * 3).collect::<Vec<_>>());
        assert_eq!(ran.load(Ordering::Relaxed), 1000, "each job ran once");
    }

    #[test]
    fn create_is_fully_allocated_and_named_by_offset() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::create(dir.path(), 8192, 8192, Warm::Populate).unwrap();
        assert_eq!(f.path().file_name().unwrap(), "00000000000000008192");
        let meta = std::fs::metadata(f.path()).unwrap();
        assert_eq!(meta.len(), 8192);
        use std::os::unix::fs::MetadataExt;
        assert!(
            meta.blocks() * 512 >= 8192,
            "blocks are reserved, not sparse"
        );
        // no temp files left behind
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// `VmFlags` of every mapping (VMA) of `[start, start+len)`, from /proc/self/smaps: `rr` is
    /// the kernel's mark for `MADV_RANDOM` (no read-around on faults).
    fn vm_flags(start: usize, len: usize) -> Vec<(usize, String)> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut out = Vec::new();
        let mut cur: Option<usize> = None;
        for line in smaps.lines() {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                if let Some(lo) = cur.take() {
                    out.push((lo, flags.trim().to_string()));
                }
            } else if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        cur = (lo < start + len && hi > start).then_some(lo);
                    }
                }
            }
        }
        out
    }

    fn random_read(f: &MappedFile, from: u64) -> Vec<bool> {
        let base = f.map.as_ptr() as usize;
        vm_flags(base + from as usize, (f.file_size - from) as usize)
            .into_iter()
            .map(|(_, flags)| flags.split(' ').any(|x| x == "rr"))
            .collect()
    }

    #[test]
    fn the_part_being_filled_has_no_read_around_and_a_full_file_gets_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let size = 16 * OS_PAGE_SIZE;
        let q = super::super::mapped_file_queue::MappedFileQueue::load(dir.path(), size).unwrap();
        let a = q.create_and_push(0, Warm::No).unwrap();
        assert_eq!(random_read(&a, 0), vec![true], "a fresh file: MADV_RANDOM");
        let b = q.create_and_push(size, Warm::No).unwrap();
        assert_eq!(
            random_read(&a, 0),
            vec![false],
            "left behind: read-ahead again"
        );
        assert_eq!(random_read(&b, 0), vec![true]);
        // Reopened (recovery): only the unwritten tail of the file being filled.
        drop(q);
        let c = MappedFile::open(b.path(), size).unwrap();
        assert_eq!(random_read(&c, 0), vec![false]);
        c.advise_filling(5 * OS_PAGE_SIZE + 100);
        assert_eq!(
            random_read(&c, 0),
            vec![false, true],
            "[0, 5 pages) normal, the rest random"
        );
        assert_eq!(random_read(&c, 5 * OS_PAGE_SIZE), vec![true]);
    }

    #[test]
    fn readers_see_only_published_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::create(dir.path(), 0, 4096, Warm::No).unwrap();
        unsafe { f.write_slice(0, 4).copy_from_slice(b"abcd") };
        assert_eq!(f.read(0, 4), None);
        f.publish_wrote(4);
        assert_eq!(f.read(0, 4), Some(&b"abcd"[..]));
        assert_eq!(f.read(2, 4), None);
        assert_eq!(f.read_from(1), b"bcd");
        assert_eq!(f.flush(0).unwrap(), 4);
        assert_eq!(f.flushed_position(), 4);
    }

    fn buffered(dir: &Path, size: u64) -> (Arc<TransientStorePool>, MappedFile) {
        let pool = TransientStorePool::new(1, size as usize).unwrap();
        let f = MappedFile::create(dir, 0, size, Warm::No).unwrap();
        f.attach_write_buffer(pool.borrow().unwrap()).unwrap();
        (pool, f)
    }

    fn append(f: &MappedFile, bytes: &[u8]) {
        let at = f.wrote_position();
        // SAFETY: the test is the file's only writer, appending at its write position.
        unsafe { f.write_slice(at, bytes.len()).copy_from_slice(bytes) };
        f.publish_wrote(at + bytes.len() as u64);
    }

    /// Blocks of `f` the file system reports as unwritten extents (FIEMAP), or `None` where
    /// FIEMAP is not supported.
    fn unwritten_blocks(f: &File) -> Option<u64> {
        use std::os::fd::AsRawFd;
        const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
        const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
        const FIEMAP_EXTENT_LAST: u32 = 0x1;
        const N: usize = 64;
        // struct fiemap (32 bytes) followed by N struct fiemap_extent (56 bytes each), as u64s.
        let mut buf = vec![0u64; (32 + 56 * N) / 8];
        let mut start = 0u64;
        let mut unwritten = 0u64;
        loop {
            buf.fill(0);
            buf[0] = start;
            buf[1] = u64::MAX - start;
            // fm_extent_count, the third u32 after the two u64s.
            buf[3] = N as u64;
            // SAFETY: the buffer has room for N extents, as fm_extent_count says.
            let rc = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) };
            if rc != 0 {
                return None;
            }
            let mapped = (buf[2] >> 32) as usize;
            if mapped == 0 {
                return Some(unwritten);
            }
            for i in 0..mapped {
                let e = &buf[4 + 7 * i..4 + 7 * (i + 1)];
                let (logical, len, flags) = (e[0], e[2], e[5] as u32);
                if flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
                    unwritten += len / 4096;
                }
                start = logical + len;
                if flags & FIEMAP_EXTENT_LAST != 0 {
                    return Some(unwritten);
                }
            }
        }
    }

    #[test]
    fn a_file_zeroed_ahead_has_written_zero_blocks_and_an_allocated_one_has_unwritten_ones() {
        let dir = tempfile::tempdir().unwrap();
        let size = 64 * OS_PAGE_SIZE;
        let z = match ZeroAhead::create(dir.path(), 0, size).unwrap() {
            Prepared::Zeroing(mut ahead) => {
                assert!(!ahead.step(size).unwrap(), "done in one step");
                ahead.into_file()
            }
            Prepared::Plain(f, _) => f,
        };
        let a = MappedFile::create(dir.path(), size, size, Warm::No).unwrap();
        assert_eq!(std::fs::read(z.path()).unwrap(), vec![0u8; size as usize]);
        assert_eq!(a.zeroed_upto(), 0);
        match (unwritten_blocks(&z._file), unwritten_blocks(&a._file)) {
            (Some(zu), Some(au)) if au > 0 => {
                assert!(
                    z.zeroed_upto() == size,
                    "direct I/O works where extents can be unwritten"
                );
                assert_eq!(zu, 0, "every block of the zeroed file is written");
            }
            other => eprintln!(
                "this file system keeps no unwritten extents here ({other:?}); only the content \
                 was checked"
            ),
        }
        let reopened = MappedFile::open(z.path(), size).unwrap();
        assert!(
            reopened.zeroed_upto() == 0,
            "a file from disk is not assumed zeroed"
        );
    }

    #[test]
    fn zeroing_ahead_goes_in_steps_and_ends_when_the_file_is_handed_over() {
        let dir = tempfile::tempdir().unwrap();
        let size = 64 * OS_PAGE_SIZE;
        let plain = MappedFile::create(dir.path(), 0, size, Warm::No).unwrap();
        append(&plain, b"data");
        assert!(
            matches!(
                ZeroAhead::create(dir.path(), 0, size).unwrap(),
                Prepared::Plain(_, None)
            ),
            "a name that exists (another creator's file, maybe holding data) is never zeroed"
        );
        let Prepared::Zeroing(mut z) = ZeroAhead::create(dir.path(), size, size).unwrap() else {
            eprintln!("no direct I/O on this file system; nothing to zero ahead");
            return;
        };
        let before = unwritten_blocks(&z.file()._file);
        assert!(z.step(4 * OS_PAGE_SIZE).unwrap(), "more to do");
        assert_eq!(z.file().zeroed_upto(), 4 * OS_PAGE_SIZE);
        if let (Some(b), Some(a)) = (before, unwritten_blocks(&z.file()._file)) {
            if b > 0 {
                assert_eq!(a, b - 4, "the four zeroed blocks are written now");
            }
        }
        assert!(
            !z.step(100 * OS_PAGE_SIZE).unwrap(),
            "the rest, clamped to the file"
        );
        assert_eq!(z.file().zeroed_upto(), size);

        // Handed over part-way: the owner gets what was zeroed, and holds the only handle.
        let Prepared::Zeroing(mut z) = ZeroAhead::create(dir.path(), 2 * size, size).unwrap()
        else {
            unreachable!("direct I/O worked for the file before")
        };
        assert!(z.step(2 * OS_PAGE_SIZE).unwrap());
        let g = z.into_file();
        assert_eq!(g.zeroed_upto(), 2 * OS_PAGE_SIZE, "what was done before");
        let ring = 4 * OS_PAGE_SIZE as usize;
        assert_eq!(g.commit_end(0, 100, Some(ring)), OS_PAGE_SIZE);
        assert_eq!(g.commit_end(4096, 8000, Some(ring)), 2 * OS_PAGE_SIZE);
        assert_eq!(
            g.commit_end(8192, 8200, Some(ring)),
            8200,
            "past the zeroed part: no padding (the block is unwritten, nothing to read)"
        );
        // The owner's bytes stay as written: nothing zeroes the file after the handover.
        append(&g, &[7u8; 3 * OS_PAGE_SIZE as usize]);
        g.flush(0).unwrap();
        let disk = std::fs::read(g.path()).unwrap();
        assert!(disk[..3 * OS_PAGE_SIZE as usize].iter().all(|&b| b == 7));
        assert!(disk[3 * OS_PAGE_SIZE as usize..].iter().all(|&b| b == 0));
    }

    #[test]
    fn commits_to_a_zeroed_ring_file_fill_new_pages_and_keep_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let size = 16 * OS_PAGE_SIZE;
        let ring = 4 * OS_PAGE_SIZE as usize;
        let rings = TransientStorePool::new_rings(1, size as usize, ring).unwrap();
        let mut f = MappedFile::create(dir.path(), 0, size, Warm::No).unwrap();
        // The padding rule, whatever this file system does with direct I/O.
        f.zeroed_upto = size;
        f.attach_write_buffer(rings.borrow().unwrap()).unwrap();
        let on_disk = |f: &MappedFile| std::fs::read(f.path()).unwrap();

        append(&f, &[1u8; 100]);
        assert_eq!(f.commit(0).unwrap(), 100, "committed is what was written");
        assert_eq!(f.read_from(0), &[1u8; 100][..]);
        assert_eq!(
            f.commit_end(0, 100, Some(ring)),
            OS_PAGE_SIZE,
            "the new page is filled"
        );
        assert_eq!(
            f.commit_end(100, 5000, Some(ring)),
            2 * OS_PAGE_SIZE,
            "reaching into page 1"
        );
        assert_eq!(
            f.commit_end(5000, 5100, Some(ring)),
            5100,
            "page 1 is in the cache"
        );
        assert_eq!(
            f.commit_end(100, 4096, Some(ring)),
            4096,
            "ends on a page boundary"
        );
        assert_eq!(
            f.commit_end(100, 100 + 4 * 4096 - 50, Some(ring)),
            100 + 4 * 4096 - 50,
            "the padding would pass the ring: not padded"
        );
        assert_eq!(
            f.commit_end(size - 100, size - 10, Some(ring)),
            size - 10,
            "the last page was touched before"
        );
        assert_eq!(
            f.commit_end(size - 4096, size - 10, Some(ring)),
            size,
            "clamped to the file"
        );
        assert_eq!(f.commit_end(0, 100, None), 100, "no ring, no padding");

        // Appends of many sizes through the ring, each committed: the file holds exactly the
        // appended bytes, then zeros.
        let mut want = vec![1u8; 100];
        let lens = [5000usize, 10, 4086, 4096, 3, 8000, 16384, 1, 12000, 7];
        for (n, len) in (2u8..).zip(lens) {
            let at = f.wrote_position();
            if at + len as u64 > size {
                break;
            }
            f.ring_room(at, len as u64).unwrap();
            let bytes = vec![n; len];
            append(&f, &bytes);
            want.extend_from_slice(&bytes);
            assert_eq!(f.commit(0).unwrap(), at + len as u64);
            assert_eq!(
                f.read_from(0),
                &want[..],
                "readers see every byte, in order"
            );
            let disk = on_disk(&f);
            assert_eq!(&disk[..want.len()], &want[..]);
            assert!(
                disk[want.len()..].iter().all(|&b| b == 0),
                "zeros past the data"
            );
        }
        assert!(want.len() > 3 * ring, "the ring wrapped");
    }

    #[test]
    fn buffered_appends_are_readable_only_once_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (_pool, f) = buffered(dir.path(), 4 * 4096);
        append(&f, b"abcd");
        assert_eq!(f.wrote_position(), 4);
        assert_eq!(f.committed_position(), 0);
        assert_eq!(f.read(0, 4), None, "only in the buffer: not readable");
        assert_eq!(f.read_from(0), b"");
        assert_eq!(
            std::fs::read(f.path()).unwrap()[..4],
            [0; 4],
            "not in the file yet"
        );
        assert_eq!(
            f.flush(0).unwrap(),
            0,
            "nothing committed, nothing to flush"
        );

        assert_eq!(f.commit(0).unwrap(), 4);
        assert_eq!(f.read(0, 4), Some(&b"abcd"[..]));
        assert_eq!(
            &std::fs::read(f.path()).unwrap()[..4],
            b"abcd",
            "pwrite reached the file"
        );
        append(&f, b"ef");
        assert_eq!(
            f.read_from(0),
            b"abcd",
            "the readable limit is the committed position"
        );
        assert_eq!(
            f.flush(0).unwrap(),
            4,
            "flush reaches the committed position, not wrote"
        );
        assert_eq!(f.flushed_position(), 4);
        assert!(f.wrote_position() >= f.committed_position());
        assert!(f.committed_position() >= f.flushed_position());
    }

    #[test]
    fn write_behind_starts_whole_committed_pages_and_leaves_the_flushed_position() {
        let dir = tempfile::tempdir().unwrap();
        let page = OS_PAGE_SIZE as usize;
        let (_pool, f) = buffered(dir.path(), 8 * OS_PAGE_SIZE);
        append(&f, &[1u8; 6144]);
        assert_eq!(f.write_behind(0, 0).unwrap(), 0, "nothing committed yet");
        f.commit(0).unwrap();
        assert_eq!(
            f.write_behind(0, 0).unwrap(),
            OS_PAGE_SIZE,
            "the partial second page waits for the appends that complete it"
        );
        append(&f, &[2u8; 3 * 4096 + 2048]);
        f.commit(0).unwrap();
        assert_eq!(f.committed_position(), 5 * OS_PAGE_SIZE);
        assert_eq!(
            f.write_behind(OS_PAGE_SIZE, 5 * OS_PAGE_SIZE).unwrap(),
            OS_PAGE_SIZE,
            "4 pages pending, 5 asked for: nothing started"
        );
        assert_eq!(
            f.write_behind(OS_PAGE_SIZE + 100, 4 * OS_PAGE_SIZE)
                .unwrap(),
            5 * OS_PAGE_SIZE,
            "a start inside a page starts at that page"
        );
        append(&f, &[3u8; 3 * 4096 - 10]);
        f.commit(0).unwrap();
        assert_eq!(
            f.write_behind(5 * OS_PAGE_SIZE, 1 << 30).unwrap(),
            5 * OS_PAGE_SIZE,
            "the file is not full: the tail waits"
        );
        append(&f, &[4u8; 10]);
        f.commit(0).unwrap();
        assert_eq!(
            f.write_behind(5 * OS_PAGE_SIZE, 1 << 30).unwrap(),
            8 * OS_PAGE_SIZE,
            "a full file's tail goes however small"
        );
        assert_eq!(f.flushed_position(), 0, "only a flush moves it");
        assert_eq!(f.flush(0).unwrap(), 8 * OS_PAGE_SIZE);
        let on_disk = std::fs::read(f.path()).unwrap();
        let mut want = vec![1u8; 6144];
        want.extend_from_slice(&[2u8; 3 * 4096 + 2048]);
        want.extend_from_slice(&[3u8; 3 * 4096 - 10]);
        want.extend_from_slice(&[4u8; 10]);
        assert_eq!(on_disk.len(), 8 * page);
        assert!(on_disk == want, "the bytes are the ones appended");
    }

    #[test]
    fn commit_waits_for_least_pages_unless_the_file_is_full() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, f) = buffered(dir.path(), 4 * 4096);
        append(&f, &[1u8; 4096]);
        assert_eq!(f.commit(2).unwrap(), 0, "one page pending, two required");
        append(&f, &[2u8; 4096]);
        assert_eq!(f.commit(2).unwrap(), 8192, "two pages pending");
        append(&f, &[3u8; 100]);
        assert_eq!(f.commit(2).unwrap(), 8192);
        assert_eq!(
            f.commit(0).unwrap(),
            8292,
            "least pages 0 commits whatever is pending"
        );
        // The same rule for flush: 2 pages committed since... none flushed yet.
        assert_eq!(f.flush(3).unwrap(), 0, "two pages pending, three required");
        assert_eq!(f.flush(2).unwrap(), 8292);

        assert_eq!(pool.available(), 0);
        append(&f, &vec![4u8; 4 * 4096 - 8292]);
        assert_eq!(
            f.commit(4).unwrap(),
            4 * 4096,
            "a full file commits at any page count"
        );
        assert_eq!(
            pool.available(),
            1,
            "a full, fully committed file returns its buffer"
        );
        assert_eq!(f.commit(0).unwrap(), 4 * 4096, "nothing more to commit");
        assert_eq!(f.read(4 * 4096 - 1, 1), Some(&[4u8][..]));
    }

    #[test]
    fn a_failed_commit_leaves_the_committed_position_and_keeps_the_bytes_for_a_retry() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let (_pool, f) = buffered(dir.path(), 4096);
        append(&f, b"abcd");
        // Swap the file's descriptor for a read-only one: pwrite fails with EBADF.
        let fd = f.as_raw_fd();
        let saved = unsafe { libc::dup(fd) };
        let ro = std::fs::File::open(f.path()).unwrap();
        assert!(unsafe { libc::dup2(ro.as_raw_fd(), fd) } >= 0);
        assert!(f.commit(0).is_err(), "the write error is returned");
        assert_eq!(f.committed_position(), 0, "committed did not move");
        assert_eq!(f.read(0, 4), None);
        // The descriptor works again: the retry commits the same bytes from the buffer.
        assert!(unsafe { libc::dup2(saved, fd) } >= 0);
        unsafe { libc::close(saved) };
        assert_eq!(f.commit(0).unwrap(), 4);
        assert_eq!(f.read(0, 4), Some(&b"abcd"[..]));
    }

    #[test]
    fn an_unbuffered_file_is_committed_up_to_its_write_position() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::create(dir.path(), 0, 4096, Warm::No).unwrap();
        append(&f, b"xy");
        assert!(!f.is_buffered());
        assert_eq!(f.commit(4).unwrap(), 2);
        assert_eq!(f.committed_position(), 2);
        assert_eq!(f.read_from(0), b"xy");
    }

    #[test]
    fn a_file_holding_data_refuses_a_write_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let pool = TransientStorePool::new(1, 4096).unwrap();
        let f = MappedFile::create(dir.path(), 0, 4096, Warm::No).unwrap();
        append(&f, b"x");
        assert!(f.attach_write_buffer(pool.borrow().unwrap()).is_err());
        assert_eq!(pool.available(), 1, "the refused lease went back");
        assert!(!f.is_buffered());
    }

    #[test]
    fn second_creator_opens_the_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = MappedFile::create(dir.path(), 0, 4096, Warm::No).unwrap();
        unsafe { a.write_slice(0, 1).copy_from_slice(b"x") };
        a.publish_wrote(1);
        let b = MappedFile::create(dir.path(), 0, 4096, Warm::No).unwrap();
        b.publish_wrote(1);
        assert_eq!(b.read(0, 1), Some(&b"x"[..]));
    }

    #[test]
    fn open_rejects_wrong_length_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("00000000000000000000");
        std::fs::write(&p, b"short").unwrap();
        let e = MappedFile::open(&p, 4096).unwrap_err();
        assert!(e.to_string().contains("00000000000000000000"), "{e}");
        assert!(e.to_string().contains("4096"), "{e}");
    }
}
