//! Small file-system helpers shared by the actors.
//!
//! Config files (`topics.json`, `subscriptionGroup.json`, `consumerOffset.json`,
//! `delayOffset.json`) keep RocketMQ's `<file>.bak` beside them ([`write_with_backup`],
//! [`load_with_backup`]): a RocketMQ store directory brought over keeps working, and a main file
//! damaged behind the broker's back (a torn copy, a disk that lied about a flush, an editor) falls
//! back to the previous version instead of stopping the broker or starting with empty tables.

use std::io::Write;
use std::path::{Path, PathBuf};

/// `<path>.suffix` (appended, not replacing the extension: `topics.json.bak`, as RocketMQ names
/// it).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The backup RocketMQ keeps beside a config file: `<file>.bak`.
pub fn backup_path(path: &Path) -> PathBuf {
    with_suffix(path, ".bak")
}

/// Where [`load_with_backup`] moves a main file it could not parse: `<file>.corrupt`.
pub fn corrupt_path(path: &Path) -> PathBuf {
    with_suffix(path, ".corrupt")
}

/// Writes `bytes` to `<path>.tmp` and fsyncs it; the caller renames it into place.
fn write_temp(path: &Path, bytes: &[u8]) -> std::io::Result<(PathBuf, PathBuf)> {
    let dir = path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&dir)?;
    let tmp = with_suffix(path, ".tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok((tmp, dir))
}

/// Writes `bytes` to `path` so that a crash leaves either the old or the new content: temp file,
/// fsync, rename, fsync of the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (tmp, dir) = write_temp(path, bytes)?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// [`write_atomically`], keeping the content it replaces as `<path>.bak` (RocketMQ's
/// `ConfigManager.persist`). Unlike RocketMQ, which moves the main file to the backup and then
/// writes a new one, the main file never goes missing: the old one is hard-linked as the backup
/// (no copy; renamed over the old backup so that is atomic too) before the new one is renamed
/// over it. One directory fsync covers both renames; a crash before it leaves an older but
/// complete pair. Where hard links are not supported the old content is copied.
pub fn write_with_backup(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with_backup_via(path, bytes, |from, to| std::fs::hard_link(from, to))
}

/// [`write_with_backup`] with the hard-link call given (tests take the copy path with it).
fn write_with_backup_via(
    path: &Path,
    bytes: &[u8],
    hard_link: impl Fn(&Path, &Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let (tmp, dir) = write_temp(path, bytes)?;
    let bak = backup_path(path);
    let bak_tmp = with_suffix(&bak, ".tmp");
    let _ = std::fs::remove_file(&bak_tmp);
    let linked = match hard_link(path, &bak_tmp) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(_) => {
            // No hard links here (some FUSE and network file systems): copy, and make the copy
            // durable before it replaces the old backup. Such a file system may say so before it
            // looks for the file: no main file yet is nothing to back up.
            match std::fs::copy(path, &bak_tmp) {
                Ok(_) => {
                    std::fs::File::open(&bak_tmp)?.sync_all()?;
                    true
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => return Err(e),
            }
        }
    };
    if linked {
        std::fs::rename(&bak_tmp, &bak)?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// What [`load_with_backup`] found.
#[derive(Debug, PartialEq)]
pub enum Loaded<T> {
    /// Neither file exists (a new store): start with empty tables.
    Nothing,
    /// The main file.
    Main(T),
    /// The backup, because the main file was missing, empty or unparsable (said in the log).
    Backup(T),
}

impl<T> Loaded<T> {
    pub fn into_option(self) -> Option<T> {
        match self {
            Loaded::Nothing => None,
            Loaded::Main(v) | Loaded::Backup(v) => Some(v),
        }
    }
}

/// A config file's text: `None` if it does not exist; an error that names the file if it cannot
/// be read; not UTF-8 is a parse error (`Err(Ok(reason))`).
fn read_config(path: &Path) -> Result<Option<String>, Result<String, std::io::Error>> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| Ok(format!("not UTF-8 text ({e})"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Err(std::io::Error::new(
            e.kind(),
            format!("cannot read {}: {e}", path.display()),
        ))),
    }
}

/// Loads a config file written by [`write_with_backup`] (or by RocketMQ), as RocketMQ's
/// `ConfigManager.load` does: the main file if it parses; otherwise (missing, empty, or
/// unparsable) its `<file>.bak`. Differences, both so that no table is lost silently:
///
/// - an empty or unparsable main file with no usable backup refuses the start (RocketMQ starts
///   with empty tables), with an error naming the file, what is wrong and the missing backup;
/// - an empty or unparsable main file is moved to `<file>.corrupt` rather than deleted
///   (RocketMQ), and only once the backup has parsed: a refused start leaves every file as it
///   was.
///
/// A backup that is empty or does not parse refuses the start (RocketMQ: only one that does not
/// parse). An unreadable file (not "missing") is an error too.
pub fn load_with_backup<T, E: std::fmt::Display>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, E>,
) -> std::io::Result<Loaded<T>> {
    let invalid = |msg: String| std::io::Error::new(std::io::ErrorKind::InvalidData, msg);
    // Why the main file is not used: `None` if it is missing, else what is wrong with it. An
    // empty file is damage too (neither RocketMQ nor this broker writes one): left in place, the
    // next write would make it the backup.
    let main_error = match read_config(path) {
        Ok(Some(text)) if !text.trim().is_empty() => match parse(&text) {
            Ok(v) => return Ok(Loaded::Main(v)),
            Err(e) => Some(e.to_string()),
        },
        Ok(Some(_)) => Some("the file is empty".to_string()),
        Ok(None) => None,
        Err(Ok(reason)) => Some(reason),
        Err(Err(e)) => return Err(e),
    };
    let bak = backup_path(path);
    // An empty backup is no table either: refused like an empty main file (RocketMQ starts with
    // empty tables; its own `string2File` can leave one, unsynced, at a power loss).
    let bak_text = match read_config(&bak) {
        Ok(Some(text)) if !text.trim().is_empty() => Ok(text),
        Ok(Some(_)) => Err(Some("the file is empty".to_string())),
        Ok(None) => Err(None),
        Err(Ok(reason)) => Err(Some(reason)),
        Err(Err(e)) => return Err(e),
    };
    let parsed = bak_text.and_then(|t| parse(&t).map_err(|e| Some(e.to_string())));
    match (main_error, parsed) {
        (None, Err(None)) => Ok(Loaded::Nothing),
        (None, Ok(v)) => {
            tracing::warn!(
                file = %path.display(),
                backup = %bak.display(),
                "config file missing; loaded its backup (the last version before it)"
            );
            Ok(Loaded::Backup(v))
        }
        (Some(main), Ok(v)) => {
            let aside = corrupt_path(path);
            std::fs::rename(path, &aside).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "{}: {main}; its backup {} is usable but the file cannot be moved to {}: {e}",
                        path.display(),
                        bak.display(),
                        aside.display()
                    ),
                )
            })?;
            tracing::error!(
                file = %path.display(),
                error = %main,
                backup = %bak.display(),
                moved_to = %aside.display(),
                "config file is empty or does not parse; loaded its backup (the last version \
                 before it) and moved the damaged file aside"
            );
            Ok(Loaded::Backup(v))
        }
        (None, Err(Some(b))) => Err(invalid(format!(
            "{} is missing and its backup {} is not usable: {b}; fix or remove the backup to \
             start",
            path.display(),
            bak.display()
        ))),
        (Some(main), Err(None)) => Err(invalid(format!(
            "{}: {main}; there is no backup ({} is missing) to fall back on; fix the file, or \
             remove it to start with an empty table",
            path.display(),
            bak.display()
        ))),
        (Some(main), Err(Some(b))) => Err(invalid(format!(
            "{}: {main}; its backup {} is not usable either: {b}; fix one of them, or remove \
             both to start with an empty table",
            path.display(),
            bak.display()
        ))),
    }
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

/// (total, free, available to non-root) bytes of the file system holding `path`: Java's
/// `File.getTotalSpace`, `getFreeSpace` and `getUsableSpace`, which RocketMQ's disk ratios use.
pub fn space_usable(path: &Path) -> std::io::Result<(u64, u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: all-zero is a valid `statvfs` (plain integers).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and an out-pointer to a live struct.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok((
        st.f_blocks as u64 * frsize,
        st.f_bfree as u64 * frsize,
        st.f_bavail as u64 * frsize,
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<u32, String> {
        s.trim()
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .ok_or_else(|| format!("not a {{number}}: {s:?}"))?
            .parse()
            .map_err(|e| format!("{e}"))
    }

    fn load(path: &Path) -> std::io::Result<Loaded<u32>> {
        load_with_backup(path, parse)
    }

    #[test]
    fn each_write_keeps_the_content_it_replaces_as_the_backup() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("config").join("topics.json");
        write_with_backup(&f, b"{1}").unwrap();
        assert!(
            !backup_path(&f).exists(),
            "nothing to back up on the first write"
        );
        write_with_backup(&f, b"{2}").unwrap();
        write_with_backup(&f, b"{3}").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "{3}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("config/topics.json.bak")).unwrap(),
            "{2}"
        );
        let mut names: Vec<_> = std::fs::read_dir(dir.path().join("config"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["topics.json", "topics.json.bak"],
            "no temp file left"
        );
        assert_eq!(load(&f).unwrap(), Loaded::Main(3));
    }

    #[test]
    fn without_hard_links_the_backup_is_a_copy_of_the_replaced_content() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("topics.json");
        let no_links =
            |_: &Path, _: &Path| Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
        write_with_backup_via(&f, b"{1}", no_links).unwrap();
        write_with_backup_via(&f, b"{2}", no_links).unwrap();
        write_with_backup_via(&f, b"{3}", no_links).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "{3}");
        assert_eq!(std::fs::read_to_string(backup_path(&f)).unwrap(), "{2}");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["topics.json", "topics.json.bak"],
            "no temp file left"
        );
    }

    #[test]
    fn a_damaged_main_file_falls_back_to_the_backup_and_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("consumerOffset.json");
        write_with_backup(&f, b"{7}").unwrap();
        write_with_backup(&f, b"{8}").unwrap();
        // A torn write: the first half of the file.
        std::fs::write(&f, b"{").unwrap();
        assert_eq!(load(&f).unwrap(), Loaded::Backup(7));
        assert!(!f.exists());
        assert_eq!(std::fs::read(corrupt_path(&f)).unwrap(), b"{");
        // The next write must not make the damaged file the backup: the good one stays.
        write_with_backup(&f, b"{9}").unwrap();
        assert_eq!(std::fs::read_to_string(backup_path(&f)).unwrap(), "{7}");
        assert_eq!(load(&f).unwrap(), Loaded::Main(9));
        // Not UTF-8 is damage too.
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert_eq!(load(&f).unwrap(), Loaded::Backup(7));
    }

    #[test]
    fn a_missing_main_file_takes_the_backup_and_neither_means_empty_tables() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("topics.json");
        assert_eq!(load(&f).unwrap(), Loaded::Nothing);
        // RocketMQ's persist moves the main file to the backup before writing the new one: a
        // crash in between leaves only the backup.
        std::fs::write(backup_path(&f), b"{5}").unwrap();
        assert_eq!(load(&f).unwrap(), Loaded::Backup(5));
        // An empty backup is no table: refused, not an empty one.
        std::fs::write(backup_path(&f), b"").unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(
            e.contains("is missing and its backup") && e.contains("the file is empty"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_main_file_is_damage_not_an_empty_table() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("delayOffset.json");
        std::fs::write(&f, b"  \n").unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(
            e.contains("the file is empty") && e.contains("no backup"),
            "{e}"
        );
        std::fs::write(backup_path(&f), b"{4}").unwrap();
        assert_eq!(load(&f).unwrap(), Loaded::Backup(4));
        assert!(!f.exists(), "moved aside");
        // So the next write keeps the good backup.
        write_with_backup(&f, b"{6}").unwrap();
        assert_eq!(std::fs::read_to_string(backup_path(&f)).unwrap(), "{4}");
    }

    #[test]
    fn no_usable_file_refuses_the_start_naming_both_and_moves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("subscriptionGroup.json");
        std::fs::write(&f, b"{x}").unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(
            e.contains("subscriptionGroup.json: invalid digit") && e.contains("no backup"),
            "{e}"
        );
        std::fs::write(backup_path(&f), b"{y").unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(
            e.contains("subscriptionGroup.json: invalid digit")
                && e.contains("subscriptionGroup.json.bak is not usable either: not a {number}"),
            "{e}"
        );
        assert_eq!(
            std::fs::read(&f).unwrap(),
            b"{x}",
            "a refused start moves nothing"
        );
        assert!(!corrupt_path(&f).exists());
        std::fs::remove_file(&f).unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(e.contains("is missing and its backup"), "{e}");
    }
}
