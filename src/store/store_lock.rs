//! The store directory's `lock` and `abort` files (RocketMQ's `DefaultMessageStore`: `start` locks
//! `lock`, `createTempFile` makes `abort`, `shutdown` deletes it; in
//! store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java).
//!
//! Owns:
//! * `${storePathRootDir}/lock` — [`StoreLock`]: an exclusive, non-blocking write lock on the
//!   file's first byte, held for the life of the broker, content `lock`. A second broker on the
//!   same directory is refused instead of corrupting the store.
//! * `${storePathRootDir}/abort` — present while a broker runs, removed only on a clean shutdown;
//!   at startup its presence selects abnormal recovery. Its first line is the writer's PID in
//!   decimal (as RocketMQ 5.x writes it), which the lock error quotes; a second line,
//!   `boot_id=<id>`, names the kernel boot it ran on (`/proc/sys/kernel/random/boot_id`), so a
//!   start can tell a process that died ([`crashed_on_this_boot`]: every byte it wrote is still in
//!   the page cache) from a machine that went down. RocketMQ reads only the file's presence.
//!
//! Why an open-file-description (OFD) lock (`fcntl(F_OFD_SETLK)`) on byte 0 on Linux:
//! * it conflicts between two opens of the file even inside one process (a classic POSIX
//!   `F_SETLK` lock does not: it is per process, and closing *any* fd of the file drops it);
//! * it conflicts with a classic POSIX lock on the same range, which is what a Java RocketMQ
//!   broker takes (`FileChannel.tryLock(0, 1, false)`), so ActorMQ and a Java broker pointed at the
//!   same directory also exclude each other (`flock` would not: on Linux flock and fcntl locks
//!   are independent).
//!
//! On other Unix systems `flock(LOCK_EX | LOCK_NB)` is used (per open file description too).
//!
//! Invariants: the lock is released exactly when the [`StoreLock`] is dropped (its fd is never
//! duplicated); the lock file itself is never deleted (deleting it would let a third process lock
//! a fresh inode while the second still holds the old one). Abort-file creation and removal are
//! made durable (file and directory fsynced) because recovery's choice depends on them.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::checkpoint::sync_dir;

/// File name of the lock file inside the store root.
pub const LOCK_FILE: &str = "lock";
/// File name of the abort file inside the store root.
pub const ABORT_FILE: &str = "abort";

#[derive(Debug, thiserror::Error)]
pub enum StoreLockError {
    #[error("store directory {dir} is already in use by another broker (lock file {lock} is held{pid}); stop that broker or point this one at another storePathRootDir", pid = match pid { Some(p) => format!("; its abort file names PID {p}"), None => String::new() })]
    InUse {
        dir: PathBuf,
        lock: PathBuf,
        /// The PID in the abort file, if one was there (the running broker's, normally).
        pid: Option<u32>,
    },
    #[error("store lock file {path}: {op} failed: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

/// Exclusive ownership of a store directory, held until dropped.
#[derive(Debug)]
pub struct StoreLock {
    dir: PathBuf,
    path: PathBuf,
    /// Closing this fd releases the lock.
    _file: File,
}

impl StoreLock {
    /// Locks `${root}/lock` (creating the root and the file if needed) or fails at once with
    /// [`StoreLockError::InUse`] if another holder exists.
    pub fn acquire(root: &Path) -> Result<StoreLock, StoreLockError> {
        let io = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreLockError::Io { path, op, source }
        };
        std::fs::create_dir_all(root).map_err(io("create directory", root))?;
        let path = root.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io("open", &path))?;
        match try_lock_exclusive(&file) {
            Ok(true) => {}
            Ok(false) => {
                return Err(StoreLockError::InUse {
                    dir: root.to_path_buf(),
                    lock: path,
                    pid: read_abort_pid(root),
                })
            }
            Err(e) => return Err(io("lock", &path)(e)),
        }
        // As RocketMQ: lock first, then write the marker content.
        file.write_all_at(b"lock", 0)
            .and_then(|()| file.sync_data())
            .map_err(io("write", &path))?;
        Ok(StoreLock {
            dir: root.to_path_buf(),
            path,
            _file: file,
        })
    }

    /// The store root this lock guards.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `Ok(false)` when someone else holds a conflicting lock.
#[cfg(target_os = "linux")]
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: a zeroed `flock` is a valid value; every field we rely on is set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 1; // the first byte, the range Java's tryLock(0, 1, false) takes
    fl.l_pid = 0; // required for OFD locks
                  // SAFETY: plain fcntl on an fd we own with a valid `flock` pointer.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: plain flock on an fd we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

fn abort_path(root: &Path) -> PathBuf {
    root.join(ABORT_FILE)
}

/// True if `${root}/abort` exists: the last broker did not shut down cleanly (or is running).
pub fn abort_file_exists(root: &Path) -> bool {
    abort_path(root).exists()
}

/// The PID written in the abort file, if the file exists and holds one (RocketMQ 4.9.x writes an
/// empty file).
pub fn read_abort_pid(root: &Path) -> Option<u32> {
    std::fs::read_to_string(abort_path(root))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// This kernel boot's id, if the system has one (Linux: `/proc/sys/kernel/random/boot_id`).
pub fn current_boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_string())
}

/// The boot id the abort file records, if any (files of RocketMQ and of older ActorMQ have none).
pub fn read_abort_boot_id(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(abort_path(root)).ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("boot_id="))
        .map(str::to_string)
        .filter(|id| !id.is_empty())
}

/// True if an abort file is present and was written on this very boot: the broker process died
/// (kill -9, OOM, a panic) while the kernel kept running, so every byte it had written — through
/// a mapping or `pwrite` — is in the page cache, whole, though maybe not yet on disk. False when
/// either id is unknown: then a power loss or kernel crash must be assumed.
pub fn crashed_on_this_boot(root: &Path) -> bool {
    match (read_abort_boot_id(root), current_boot_id()) {
        (Some(was), Some(now)) => was == now,
        _ => false,
    }
}

/// Creates (or rewrites) `${root}/abort` holding this process's PID, and makes both the content
/// and the directory entry durable before returning: from now on a crash must lead to abnormal
/// recovery.
pub fn create_abort_file(root: &Path) -> io::Result<()> {
    std::fs::create_dir_all(root)?;
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(abort_path(root))?;
    let mut text = std::process::id().to_string();
    if let Some(id) = current_boot_id() {
        text.push_str("\nboot_id=");
        text.push_str(&id);
        text.push('\n');
    }
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    sync_dir(root)
}

/// Removes `${root}/abort` (clean shutdown) and makes the removal durable. Absent is fine.
pub fn remove_abort_file(root: &Path) -> io::Result<()> {
    match std::fs::remove_file(abort_path(root)) {
        Ok(()) => sync_dir(root),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Env var that turns [`child_tries_the_lock`] into a helper process.
    const CHILD_ENV: &str = "ACTORMQ_STORE_LOCK_CHILD_DIR";

    #[test]
    fn second_lock_in_the_same_process_is_refused_and_names_dir_and_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = StoreLock::acquire(dir.path()).unwrap();
        assert_eq!(std::fs::read(first.path()).unwrap(), b"lock");
        // Without an abort file: no PID in the message.
        let e = StoreLock::acquire(dir.path()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("already in use by another broker"), "{msg}");
        assert!(msg.contains(&*dir.path().to_string_lossy()), "{msg}");
        assert!(!msg.contains("PID"), "{msg}");
        // With an abort file: its PID is quoted.
        create_abort_file(dir.path()).unwrap();
        let e = StoreLock::acquire(dir.path()).unwrap_err();
        assert!(matches!(e, StoreLockError::InUse { pid: Some(p), .. } if p == std::process::id()));
        assert!(
            e.to_string()
                .contains(&format!("PID {}", std::process::id())),
            "{e}"
        );
        drop(first);
    }

    #[test]
    fn lock_is_released_on_drop_and_the_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let a = StoreLock::acquire(dir.path()).unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(path.exists(), "the lock file is never deleted");
        let b = StoreLock::acquire(dir.path()).unwrap();
        assert!(StoreLock::acquire(dir.path()).is_err());
        drop(b);
        StoreLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn another_open_of_the_file_does_not_release_the_lock() {
        // A classic POSIX lock would be dropped when any fd of the file is closed in the process.
        let dir = tempfile::tempdir().unwrap();
        let held = StoreLock::acquire(dir.path()).unwrap();
        let other = File::open(held.path()).unwrap();
        drop(other);
        assert!(StoreLock::acquire(dir.path()).is_err());
    }

    /// What a Java broker does (`FileChannel.tryLock(0, 1, false)` is a classic `F_SETLK` write
    /// lock on byte 0): while it holds it, we are refused — and the other way round.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_classic_posix_lock_like_javas_conflicts_both_ways() {
        fn posix_lock(f: &File, cmd: libc::c_int, ty: libc::c_int) -> i32 {
            let mut fl: libc::flock = unsafe { std::mem::zeroed() };
            fl.l_type = ty as libc::c_short;
            fl.l_whence = libc::SEEK_SET as libc::c_short;
            fl.l_start = 0;
            fl.l_len = 1;
            unsafe { libc::fcntl(f.as_raw_fd(), cmd, &fl) }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let java = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        assert_eq!(posix_lock(&java, libc::F_SETLK, libc::F_WRLCK), 0);
        assert!(matches!(
            StoreLock::acquire(dir.path()),
            Err(StoreLockError::InUse { .. })
        ));
        assert_eq!(posix_lock(&java, libc::F_SETLK, libc::F_UNLCK), 0);
        let ours = StoreLock::acquire(dir.path()).unwrap();
        assert_eq!(
            posix_lock(&java, libc::F_SETLK, libc::F_WRLCK),
            -1,
            "a Java-style lock must be refused while we hold the store"
        );
        drop(ours);
        assert_eq!(posix_lock(&java, libc::F_SETLK, libc::F_WRLCK), 0);
    }

    /// Runs only as the helper process spawned by the test below (a no-op otherwise): tries the
    /// lock and reports through its exit code.
    #[test]
    fn child_tries_the_lock() {
        let Ok(dir) = std::env::var(CHILD_ENV) else {
            return;
        };
        let code = match StoreLock::acquire(Path::new(&dir)) {
            Ok(_) => 0,
            Err(StoreLockError::InUse { pid, .. }) => {
                if pid == Some(std::os::unix::process::parent_id()) {
                    10
                } else {
                    11
                }
            }
            Err(_) => 12,
        };
        std::process::exit(code);
    }

    #[test]
    fn another_process_is_refused_while_held_and_admitted_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let run_child = || {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "store::store_lock::tests::child_tries_the_lock",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .code()
        };
        let held = StoreLock::acquire(dir.path()).unwrap();
        create_abort_file(dir.path()).unwrap();
        assert_eq!(run_child(), Some(10), "refused, quoting our PID");
        drop(held);
        assert_eq!(run_child(), Some(0), "admitted once released");
    }

    #[test]
    fn abort_file_lifecycle() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        assert!(!abort_file_exists(&root));
        assert_eq!(read_abort_pid(&root), None);
        remove_abort_file(&root).unwrap(); // absent is fine
        create_abort_file(&root).unwrap();
        assert!(abort_file_exists(&root));
        let text = std::fs::read_to_string(root.join("abort")).unwrap();
        assert_eq!(text.lines().next(), Some(&*std::process::id().to_string()));
        assert_eq!(read_abort_pid(&root), Some(std::process::id()));
        // Written on this boot, read on this boot (where the system has a boot id at all).
        assert_eq!(read_abort_boot_id(&root), current_boot_id());
        assert_eq!(crashed_on_this_boot(&root), current_boot_id().is_some());
        // Another boot's file, or one without an id (RocketMQ's, older ActorMQ's): the machine
        // may have gone down.
        std::fs::write(
            root.join("abort"),
            "4242\nboot_id=00000000-0000-0000-0000-000000000000\n",
        )
        .unwrap();
        assert_eq!(read_abort_pid(&root), Some(4242));
        assert!(!crashed_on_this_boot(&root));
        std::fs::write(root.join("abort"), "4242").unwrap();
        assert_eq!(read_abort_boot_id(&root), None);
        assert!(!crashed_on_this_boot(&root));
        create_abort_file(&root).unwrap();
        create_abort_file(&root).unwrap(); // rewriting is fine
        remove_abort_file(&root).unwrap();
        assert!(!abort_file_exists(&root));
        // A 4.9.x abort file is empty: present, but no PID.
        std::fs::write(root.join("abort"), b"").unwrap();
        assert!(abort_file_exists(&root));
        assert_eq!(read_abort_pid(&root), None);
    }
}
