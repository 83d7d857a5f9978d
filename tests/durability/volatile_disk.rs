//! `VolatileDisk`: a disk image with a volatile write cache, for the power-loss tests.
//!
//! What it owns: a FUSE file system (served by this test process, [`fuser`]) holding one file,
//! `disk.img`, whose bytes live in a sparse backing file on the real disk. The power-loss rig puts
//! a loop device on `disk.img` and ext4 on the loop device, so every write and every cache flush
//! the file system issues reaches this server: the loop driver writes the image with buffered
//! writes (FUSE passes each one through at once: no `writeback_cache`), and turns a flush
//! request — an `fsync` of the store, a journal commit's preflush, a FUA write the block layer
//! splits into a write and a flush, since loop has no FUA — into an `fsync` of `disk.img`.
//!
//! The model: a device whose cache may lose whatever it took since the last flush. Every 4 KiB
//! block written since the last `fsync` keeps its content as of that `fsync` (its *durable*
//! content) until the next one; [`VolatileDisk::lose_power`] writes the image as a power loss
//! now would leave it: each such block independently reached the media (its current content),
//! did not (its durable content), or was torn — a prefix of its 512-byte sectors written, the
//! rest not, as a drive with 512-byte sectors may leave it — the [`Fate`] chosen by the caller's
//! seeded coin. What was written before the last completed flush always survives. After that
//! copy the device is gone: every read, write and flush fails with EIO (pages the kernel has
//! cached are still read from its cache), so nothing the broker does after the power loss — a
//! flush completing, an acknowledgement resting on it — can rest on a flush the copy does not
//! hold. So the copy may be taken at any moment, with flushes in flight. Not modelled: a sector
//! torn inside itself (512 bytes are taken as atomic, as drives promise); a block written twice
//! since the flush reaching the media in its middle version; a tear other than a prefix of
//! sectors; block 0 torn (it holds the ext4 superblock, whose checksum a tear breaks: a real
//! boot would stop at the file system, before the broker — so block 0 is lost instead); and
//! reordering across a flush (a real cache may not do that either).
//!
//! Invariant: the undo map holds, for exactly the blocks written since the last `fsync`, their
//! content at that `fsync`; a copy is made under the same lock the server writes under, so no
//! write lands half in it.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, WriteFlags,
};

/// The unit the model keeps, loses or tears.
const BLOCK: u64 = 4096;
/// The unit a torn block is torn at: a sector, which a drive writes whole.
pub const SECTOR: usize = 512;
/// The only file.
pub const IMAGE_NAME: &str = "disk.img";
const IMAGE_INO: INodeNo = INodeNo(2);
/// How long a cache flush takes: a disk's `fdatasync` took 0.1–4 ms on this machine. Without it
/// the in-memory flush would be instant, and a power loss would almost never find the cache
/// holding anything.
const FLUSH_TIME: Duration = Duration::from_millis(1);
/// Attributes never change behind the kernel's back (the size is fixed).
const TTL: Duration = Duration::from_secs(3600);

/// What the server and the test share.
struct State {
    backing: File,
    size: u64,
    /// Durable content of every block written since the last `fsync` (module invariant).
    undo: HashMap<u64, Box<[u8]>>,
    /// `fsync`s seen: proof that flushes reach the model.
    flushes: u64,
    /// The power is off ([`VolatileDisk::lose_power`]): every request fails.
    dead: bool,
}

impl State {
    fn write(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        if self.dead {
            return Err(std::io::Error::other("the power is off"));
        }
        if data.is_empty() {
            return Ok(());
        }
        let end = offset + data.len() as u64;
        if end > self.size {
            return Err(std::io::Error::other("write past the end of the disk"));
        }
        let mut b = offset / BLOCK;
        while b * BLOCK < end {
            if !self.undo.contains_key(&b) {
                let mut old = vec![0u8; BLOCK.min(self.size - b * BLOCK) as usize];
                self.backing.read_exact_at(&mut old, b * BLOCK)?;
                self.undo.insert(b, old.into_boxed_slice());
            }
            b += 1;
        }
        self.backing.write_all_at(data, offset)
    }
}

struct Server(Arc<Mutex<State>>);

impl Server {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let (kind, size, perm, nlink) = match ino {
            INodeNo::ROOT => (FileType::Directory, 0, 0o755, 2),
            IMAGE_INO => (FileType::RegularFile, self.state().size, 0o600, 1),
            _ => return None,
        };
        let t = SystemTime::UNIX_EPOCH;
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: BLOCK as u32,
            flags: 0,
        })
    }
}

impl Filesystem for Server {
    fn lookup(&self, _: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match (parent, name.to_str()) {
            (INodeNo::ROOT, Some(IMAGE_NAME)) => {
                let attr = self.attr(IMAGE_INO).expect("the image's attributes");
                reply.entry(&TTL, &attr, Generation(0));
            }
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _: &Request, ino: INodeNo, _: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _: &Request,
        ino: INodeNo,
        _: Option<u32>,
        _: Option<u32>,
        _: Option<u32>,
        size: Option<u64>,
        _: Option<fuser::TimeOrNow>,
        _: Option<fuser::TimeOrNow>,
        _: Option<SystemTime>,
        _: Option<FileHandle>,
        _: Option<SystemTime>,
        _: Option<SystemTime>,
        _: Option<SystemTime>,
        _: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A disk does not change size; times are not kept.
        if size.is_some_and(|s| s != self.state().size) {
            return reply.error(Errno::EPERM);
        }
        match self.attr(ino) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _: &Request, _: INodeNo, _: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _: &Request,
        _: INodeNo,
        _: FileHandle,
        offset: u64,
        size: u32,
        _: OpenFlags,
        _: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let st = self.state();
        if st.dead {
            return reply.error(Errno::EIO);
        }
        let len = (size as u64).min(st.size.saturating_sub(offset)) as usize;
        let mut buf = vec![0u8; len];
        match st.backing.read_exact_at(&mut buf, offset) {
            Ok(()) => reply.data(&buf),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _: &Request,
        _: INodeNo,
        _: FileHandle,
        offset: u64,
        data: &[u8],
        _: WriteFlags,
        _: OpenFlags,
        _: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.state().write(offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn flush(&self, _: &Request, _: INodeNo, _: FileHandle, _: LockOwner, reply: ReplyEmpty) {
        // close(2): not a cache flush.
        reply.ok();
    }

    fn fsync(&self, _: &Request, _: INodeNo, _: FileHandle, _: bool, reply: ReplyEmpty) {
        // The cache flush: what was written before it is on the media once it completes. It
        // takes a disk's time, with the lock released so the power can go meanwhile; no write
        // comes in meanwhile (one event-loop thread serves the requests one at a time).
        if self.state().dead {
            return reply.error(Errno::EIO);
        }
        std::thread::sleep(FLUSH_TIME);
        let mut st = self.state();
        if st.dead {
            return reply.error(Errno::EIO);
        }
        st.undo.clear();
        st.flushes += 1;
        reply.ok();
    }

    fn readdir(
        &self,
        _: &Request,
        ino: INodeNo,
        _: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
            (IMAGE_INO, FileType::RegularFile, IMAGE_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _: &Request, _: INodeNo, reply: ReplyStatfs) {
        let blocks = self.state().size / BLOCK;
        reply.statfs(blocks, 0, 0, 1, 0, BLOCK as u32, 255, BLOCK as u32);
    }

    fn access(&self, _: &Request, _: INodeNo, _: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }
}

/// A mounted volatile disk (module docs). Unmounted (lazily) when dropped; whoever put a loop
/// device on the image detaches it first. The server's thread is not joined: it ends when the
/// kernel closes the mount's connection, once nothing holds the image open.
pub struct VolatileDisk {
    state: Arc<Mutex<State>>,
    mnt: PathBuf,
    /// The kernel's id of the mount's FUSE connection (the minor of its device number).
    connection: u32,
    session: Option<fuser::BackgroundSession>,
}

/// What a power loss does to one block written since the last flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It reached the media.
    Kept,
    /// It did not: its durable content stays.
    Lost,
    /// Its first this many sectors (1 to 7) reached the media, the rest did not. Block 0 is lost
    /// instead (module docs).
    Torn(usize),
}

/// What one [`VolatileDisk::lose_power`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLoss {
    /// Blocks written since the last flush that the copy keeps.
    pub kept: usize,
    /// Blocks written since the last flush that the copy takes back to their durable content.
    pub lost: usize,
    /// Blocks written since the last flush that the copy keeps a prefix of.
    pub torn: usize,
    /// Flushes the disk has seen so far.
    pub flushes: u64,
}

impl VolatileDisk {
    /// Serves `backing` (its current size is the disk's) as `mnt/disk.img`. As it is now, the
    /// backing file is taken as durable.
    pub fn mount(backing: &Path, mnt: &Path) -> std::io::Result<VolatileDisk> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(backing)?;
        let size = file.metadata()?.len();
        let state = Arc::new(Mutex::new(State {
            backing: file,
            size,
            undo: HashMap::new(),
            flushes: 0,
            dead: false,
        }));
        std::fs::create_dir_all(mnt)?;
        let mut config = fuser::Config::default();
        // One thread: requests are served one at a time, which `fsync` relies on.
        config.n_threads = Some(1);
        config.mount_options = vec![
            fuser::MountOption::FSName("actormq-volatile-disk".to_string()),
            fuser::MountOption::RW,
        ];
        let session = fuser::spawn_mount(Server(state.clone()), mnt, &config)?;
        // The FUSE super block's device: anonymous (major 0), its minor the id fusectl names
        // the connection by. `spawn_mount` returns after the kernel's INIT, so it is mounted.
        let connection = {
            use std::os::unix::fs::MetadataExt;
            let dev = std::fs::metadata(mnt)?.dev();
            if libc::major(dev) != 0 {
                return Err(std::io::Error::other(format!(
                    "{} is not a FUSE mount after mounting it (device {dev:#x})",
                    mnt.display()
                )));
            }
            libc::minor(dev)
        };
        Ok(VolatileDisk {
            state,
            mnt: mnt.to_path_buf(),
            connection,
            session: Some(session),
        })
    }

    /// The kernel's id of this mount's FUSE connection, for [`abort_connection`].
    pub fn connection(&self) -> u32 {
        self.connection
    }

    /// The image a loop device goes on.
    pub fn image(&self) -> PathBuf {
        self.mnt.join(IMAGE_NAME)
    }

    /// Cuts the power: writes the disk as the power loss leaves it to `to` (a sparse file) —
    /// blocks written before the last flush as they are, and each block written since as
    /// `fate()` says (in block order) — and from then on fails every read, write and flush. The
    /// copy is taken under the server's lock, so no request lands half in it; `while_locked` runs
    /// after it, still under the lock, while every request to the device waits.
    pub fn lose_power(
        &self,
        to: &Path,
        mut fate: impl FnMut() -> Fate,
        while_locked: impl FnOnce(),
    ) -> std::io::Result<CacheLoss> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.dead = true;
        let out = File::create(to)?;
        out.set_len(st.size)?;
        // Copy the allocated ranges only (SEEK_DATA / SEEK_HOLE), so the copy stays sparse.
        copy_sparse(&st.backing, &out, st.size)?;
        let mut blocks: Vec<_> = st.undo.iter().collect();
        blocks.sort_by_key(|(b, _)| **b);
        let mut loss = CacheLoss {
            kept: 0,
            lost: 0,
            torn: 0,
            flushes: st.flushes,
        };
        for (b, durable) in blocks {
            match fate() {
                Fate::Kept => loss.kept += 1,
                Fate::Torn(_) if *b == 0 => {
                    out.write_all_at(durable, 0)?;
                    loss.lost += 1;
                }
                Fate::Lost => {
                    out.write_all_at(durable, b * BLOCK)?;
                    loss.lost += 1;
                }
                Fate::Torn(sectors) => {
                    // The block's last one may be short (the disk's end); a tear past it keeps all.
                    let at = (sectors * SECTOR).min(durable.len());
                    out.write_all_at(&durable[at..], b * BLOCK + at as u64)?;
                    loss.torn += 1;
                }
            }
        }
        while_locked();
        Ok(loss)
    }
}

/// Aborts FUSE connection `connection` (`/sys/fs/fuse/connections/<id>/abort`, mounting the
/// control file system there first if it is not): every pending and later request on it fails
/// at once. For a test that timed out: see `Cleanup::emergency` in `main.rs`.
pub fn abort_connection(connection: u32) {
    let ctl = Path::new("/sys/fs/fuse/connections");
    let mounted = std::fs::read_to_string("/proc/mounts").is_ok_and(|m| {
        m.lines()
            .any(|l| l.split_whitespace().nth(2) == Some("fusectl"))
    });
    if !mounted {
        let _ = std::process::Command::new("mount")
            .args(["-t", "fusectl", "fusectl"])
            .arg(ctl)
            .status();
    }
    // Gone already (the connection ended) is fine: there is nothing left to abort.
    let _ = std::fs::write(ctl.join(connection.to_string()).join("abort"), "1");
}

/// Copies the data ranges of `from` (below `size`) into `to` at the same offsets.
fn copy_sparse(from: &File, to: &File, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = from.as_raw_fd();
    let mut at: u64 = 0;
    let mut buf = vec![0u8; 1 << 20];
    while at < size {
        // SAFETY: lseek(2) on our own open fd.
        let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                return Ok(()); // no data past `at`
            }
            return Err(e);
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (mut pos, end) = (data as u64, (hole as u64).min(size));
        while pos < end {
            let n = ((end - pos) as usize).min(buf.len());
            from.read_exact_at(&mut buf[..n], pos)?;
            to.write_all_at(&buf[..n], pos)?;
            pos += n as u64;
        }
        at = end;
    }
    Ok(())
}

impl Drop for VolatileDisk {
    fn drop(&mut self) {
        // Lazily: a loop device still closing its file would make a plain unmount fail.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.mnt)
            .status();
        drop(self.session.take());
    }
}
