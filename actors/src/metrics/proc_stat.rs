//! A process's CPU time, memory and threads as Linux's `/proc` reports them: the one reader of
//! `/proc/<pid>/stat`, `/proc/<pid>/task/*/stat`, `/proc/<pid>/fd` and `/proc/stat`'s `btime`,
//! shared by the broker's `/metrics` (the Prometheus process-collector series and
//! `actormq_thread_cpu_seconds_total`) and the benches (`--broker-pid`: the broker's CPU per
//! message, whatever broker it is).
//!
//! *Invariants:* nothing here panics on what the kernel (or a caller) hands it: a missing entry or
//! an unexpected line is an [`ProcError`] naming the path and the field. The process name (`comm`)
//! may contain spaces and parentheses, so the fields are counted from the *last* `)` of the line,
//! as the kernel's own format requires. CPU time is `utime + stime` in clock ticks
//! (`sysconf(_SC_CLK_TCK)`), so it has tick resolution (10 ms at 100 Hz) and never decreases for
//! one process; a thread's time leaves the per-thread sums when the thread exits (the process
//! total keeps it).

use std::path::{Path, PathBuf};

/// What `/proc` could not tell.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: unexpected content ({what})")]
    Parse { path: PathBuf, what: String },
}

/// The fields of one `stat` line that are used here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The thread or process name (`comm`, at most 15 bytes as Linux keeps it).
    pub comm: String,
    /// State letter (`R`, `S`, `D`, `Z`, ...).
    pub state: char,
    /// User and system CPU time, clock ticks.
    pub utime: u64,
    pub stime: u64,
    pub num_threads: i64,
    /// Start time after boot, clock ticks.
    pub starttime: u64,
    /// Virtual memory size, bytes.
    pub vsize: u64,
    /// Resident set, pages.
    pub rss_pages: i64,
}

impl Stat {
    /// `utime + stime` in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        (self.utime.saturating_add(self.stime)) as f64 / clock_ticks() as f64
    }

    /// Resident set, bytes.
    pub fn rss_bytes(&self) -> u64 {
        (self.rss_pages.max(0) as u64).saturating_mul(page_size())
    }
}

/// The resident set by kind, bytes (`/proc/<pid>/status`: `RssAnon`, `RssFile`, `RssShmem`).
/// A broker's resident set is mostly the last two: pages of the mapped store files it has read
/// or written (page cache the kernel may take back) and shared memory (the CommitLog write
/// rings); `anon` is its own heap and stacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RssParts {
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
}

/// Parses the `Rss*` lines of a `/proc/<pid>/status` (values in kB).
pub fn parse_status_rss(text: &str) -> Result<RssParts, String> {
    let kb = |name: &str| -> Result<u64, String> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .ok_or_else(|| format!("no {name} line"))?;
        let v = line.trim().trim_end_matches("kB").trim();
        v.parse::<u64>()
            .map(|k| k * 1024)
            .map_err(|_| format!("{name} is {v:?}, not a number of kB"))
    };
    Ok(RssParts {
        anon: kb("RssAnon")?,
        file: kb("RssFile")?,
        shmem: kb("RssShmem")?,
    })
}

/// [`parse_status_rss`] of `/proc/<pid>/status` (this process's without a pid).
pub fn read_rss_parts(pid: Option<u32>) -> Result<RssParts, ProcError> {
    let path = proc_dir(pid).join("status");
    let text = read(&path)?;
    parse_status_rss(&text).map_err(|what| ProcError::Parse { path, what })
}

/// Parses one `/proc/<pid>/stat` (or `task/<tid>/stat`) line (`proc(5)`): `pid (comm) state ...`,
/// fields numbered from 1, counted after the last `)`.
pub fn parse_stat(line: &str) -> Result<Stat, String> {
    let open = line.find('(').ok_or("no '(' before the process name")?;
    let close = line.rfind(')').ok_or("no ')' after the process name")?;
    if close < open {
        return Err("')' before '('".into());
    }
    let comm = line[open + 1..close].to_string();
    // Field 3 (state) is the first after the name: field N is at index N - 3.
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<&str, String> {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| format!("field {n} missing ({} fields after the name)", rest.len()))
    };
    fn num<T: std::str::FromStr>(n: usize, v: &str) -> Result<T, String> {
        v.parse()
            .map_err(|_| format!("field {n} is {v:?}, not a number"))
    }
    let state = field(3)?.chars().next().ok_or("empty state field")?;
    Ok(Stat {
        comm,
        state,
        utime: num(14, field(14)?)?,
        stime: num(15, field(15)?)?,
        num_threads: num(20, field(20)?)?,
        starttime: num(22, field(22)?)?,
        vsize: num(23, field(23)?)?,
        rss_pages: num(24, field(24)?)?,
    })
}

fn read(path: &Path) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads and parses a `stat` file.
pub fn read_stat(path: &Path) -> Result<Stat, ProcError> {
    parse_stat(&read(path)?).map_err(|what| ProcError::Parse {
        path: path.to_path_buf(),
        what,
    })
}

/// `/proc/<pid>` (`/proc/self` for `None`).
pub fn proc_dir(pid: Option<u32>) -> PathBuf {
    match pid {
        Some(p) => PathBuf::from(format!("/proc/{p}")),
        None => PathBuf::from("/proc/self"),
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`; 100 if sysconf cannot tell).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads its argument.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Bytes per page (`sysconf(_SC_PAGESIZE)`; 4096 if sysconf cannot tell).
pub fn page_size() -> u64 {
    // SAFETY: sysconf only reads its argument.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// The boot time, seconds since the epoch (`btime` of `/proc/stat`).
pub fn boot_time() -> Result<u64, ProcError> {
    let path = Path::new("/proc/stat");
    let text = read(path)?;
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| ProcError::Parse {
            path: path.to_path_buf(),
            what: "no btime line".into(),
        })
}

/// Open file descriptors (entries of `/proc/<pid>/fd`).
pub fn open_fds(pid: Option<u32>) -> Result<u64, ProcError> {
    let path = proc_dir(pid).join("fd");
    let dir = std::fs::read_dir(&path).map_err(|source| ProcError::Read { path, source })?;
    Ok(dir.count() as u64)
}

/// This process's soft limit of open file descriptors (`RLIMIT_NOFILE`), if finite.
pub fn max_fds() -> Option<u64> {
    // SAFETY: getrlimit only writes the struct it is given.
    let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return None;
    }
    (l.rlim_cur != libc::RLIM_INFINITY).then_some(l.rlim_cur as u64)
}

/// CPU seconds (`utime + stime`) of the live threads of a process, summed by thread name, in
/// first-seen order. A thread that exits between listing and reading is skipped.
pub fn threads_by_name(pid: Option<u32>) -> Result<Vec<(String, f64)>, ProcError> {
    let path = proc_dir(pid).join("task");
    let tasks = std::fs::read_dir(&path).map_err(|source| ProcError::Read { path, source })?;
    let mut by_name: Vec<(String, f64)> = Vec::new();
    for t in tasks.flatten() {
        let Ok(s) = read_stat(&t.path().join("stat")) else {
            continue;
        };
        let secs = s.cpu_seconds();
        match by_name.iter_mut().find(|(n, _)| *n == s.comm) {
            Some((_, total)) => *total += secs,
            None => by_name.push((s.comm, secs)),
        }
    }
    Ok(by_name)
}

/// Linux keeps 15 bytes of a thread name: `comm` back to the one name in `known` it is a
/// truncation of (`commitlog_write` → `commitlog_writer`), else `comm` itself.
pub fn full_thread_name<'a>(comm: &'a str, known: &[&'a str]) -> &'a str {
    if comm.len() < 15 {
        return comm;
    }
    let mut found = known
        .iter()
        .filter(|k| k.len() > comm.len() && k.starts_with(comm));
    match (found.next(), found.next()) {
        (Some(k), None) => k,
        _ => comm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process whose name holds spaces and parentheses (a `comm` may be anything but NUL).
    const LINE: &str = "4242 (a (b) c) d) S 1 4242 4242 0 -1 4194560 1234 0 5 0 \
         321 123 0 0 20 0 17 0 98765 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 4096 \
         17416 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        let s = parse_stat(LINE).unwrap();
        assert_eq!(
            s,
            Stat {
                comm: "a (b) c) d".into(),
                state: 'S',
                utime: 321,
                stime: 123,
                num_threads: 17,
                starttime: 98765,
                vsize: 123456789,
                rss_pages: 2048,
            }
        );
        let ticks = clock_ticks() as f64;
        assert!((s.cpu_seconds() - 444.0 / ticks).abs() < 1e-9);
        assert_eq!(s.rss_bytes(), 2048 * page_size());
    }

    #[test]
    fn bad_lines_are_errors_not_panics() {
        for bad in [
            "",
            "4242",
            "4242 (x",
            "4242 x) (",
            "4242 (x) S 1 2",
            "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 lots 1 0 0 20 0 1 0 1 1 1",
            "4242 (x) ",
        ] {
            assert!(parse_stat(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn own_process_is_readable() {
        let s = read_stat(&proc_dir(None).join("stat")).unwrap();
        assert!(s.num_threads >= 1);
        assert!(s.rss_bytes() > 0);
        assert!(boot_time().unwrap() > 0);
        assert!(open_fds(None).unwrap() > 0);
        assert!(!threads_by_name(None).unwrap().is_empty());
        let missing = read_stat(Path::new("/proc/0/stat")).unwrap_err();
        assert!(missing.to_string().contains("/proc/0/stat"), "{missing}");
    }

    #[test]
    fn truncated_thread_names_map_back_to_one_actor() {
        let known = ["commitlog_writer", "commitlog_flusher", "metadata"];
        assert_eq!(
            full_thread_name("commitlog_write", &known),
            "commitlog_writer"
        );
        assert_eq!(
            full_thread_name("commitlog_flush", &known),
            "commitlog_flusher"
        );
        assert_eq!(full_thread_name("metadata", &known), "metadata");
        assert_eq!(
            full_thread_name("actix-rt|system", &known),
            "actix-rt|system"
        );
        let ambiguous = ["abcdefghijklmnoX", "abcdefghijklmnoY"];
        assert_eq!(
            full_thread_name("abcdefghijklmno", &ambiguous),
            "abcdefghijklmno"
        );
    }

    #[test]
    fn the_resident_set_by_kind_from_status() {
        let t = "Name:\tactormq\nVmRSS:\t  639668 kB\nRssAnon:\t   54548 kB\nRssFile:\t  287944 kB\nRssShmem:\t  297176 kB\n";
        assert_eq!(
            parse_status_rss(t),
            Ok(RssParts {
                anon: 54548 * 1024,
                file: 287944 * 1024,
                shmem: 297176 * 1024
            })
        );
        assert!(parse_status_rss("RssAnon: 1 kB\n")
            .unwrap_err()
            .contains("RssFile"));
        assert!(
            parse_status_rss("RssAnon: x kB\nRssFile: 1 kB\nRssShmem: 1 kB")
                .unwrap_err()
                .contains("RssAnon")
        );
        assert!(read_rss_parts(None).is_ok_and(|p| p.anon > 0));
    }
}
