//! Small file-system helpers shared by the actors.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` so that a crash leaves either the old or the new content: temp file,
/// fsync, rename, fsync of the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// `(total, free)` bytes of the file system holding `path` (`statvfs`; free as Java's
/// `File.getFreeSpace`, which RocketMQ's `commitLogDiskRatio` uses).
pub fn space(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: all-zero is a valid `statvfs` (plain integers).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and an out-pointer to a live struct.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok((st.f_blocks as u64 * frsize, st.f_bfree as u64 * frsize))
}

/// Lowers the calling thread's CPU priority by `by` nice steps (Linux: `setpriority` on the
/// thread id affects that thread only), for background I/O work that must not take a core from
/// the request path in bursts. Relative, so a broker started with `nice` keeps its ordering.
pub fn lower_this_thread_priority(by: i32) -> std::io::Result<()> {
    // SAFETY: plain syscalls on the calling thread's id; errno is read right after each.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if now == -1 && *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::setpriority(libc::PRIO_PROCESS, tid, (now + by).min(19)) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Puts the calling thread's disk I/O in the idle class (`ioprio_set`, `IOPRIO_CLASS_IDLE`): the
/// block layer's scheduler (mq-deadline, bfq) dispatches it only while no other class has I/O
/// queued, so bulk background writes (zeroing new CommitLog files) wait for the group commit's
/// `fdatasync` instead of queueing it behind them. A scheduler without classes (`none`) ignores
/// it.
pub fn idle_io_priority_for_this_thread() -> std::io::Result<()> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_long = 13;
    // SAFETY: plain syscall; `who` 0 is the calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_long,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
