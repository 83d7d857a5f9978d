//! Durability of the real `actormq broker` process, on a real file system and against power
//! losses: what a producer was told is stored must still be there after a `kill -9`, a power
//! loss (within what the flush type promises), a clean SIGTERM, a leftover `abort` file or a lost
//! ConsumeQueue file; a second process must not open a store in use; a full disk must refuse
//! writes (not crash) and accept them again once space returns.
//!
//! Power losses ([`LoopDisk`], [`PowerLossRig`]): the store sits on ext4 over a loop device; the
//! broker is frozen (SIGSTOP, every thread stopped), the loop device's image file is copied —
//! what the device holds, without the page cache — and the copy is mounted in its place (the
//! journal replays) with the abort file's boot id changed, as after a reboot.
//!
//! Harness:
//! * every test runs the binary (`CARGO_BIN_EXE_actormq`) on its own temp store, with an
//!   ephemeral broker port (`ACTORMQ_LISTENPORT=0`, found in the `broker started` log line) and an
//!   ephemeral embedded name server, small CommitLog / ConsumeQueue / index files;
//! * [`Broker`] owns one child process: its stdout/stderr are collected by reader threads, and it
//!   is killed (SIGKILL) and reaped by PID when dropped, also when the test panics; the child also
//!   gets `PR_SET_PDEATHSIG` so it cannot outlive the test thread that started it;
//! * [`bounded`] runs each test body on its own thread under a hard time limit; on timeout it
//!   kills every child and unmounts every file system the test registered, then fails;
//! * the checker follows the Jepsen / OpenChaos queue rules: a SEND answered with code 0 is
//!   *acknowledged* and must be read back over the wire (PULL_MESSAGE) at the queue and queue
//!   offset it was given, with the same msgId, its body intact (body CRC checked); any other
//!   outcome (a connection cut by the kill, an error code) is *indeterminate* and may or may not be
//!   there; nothing that was never sent may appear (no phantoms), nothing twice (no duplicates),
//!   and every queue reads back as contiguous offsets `0..max`;
//! * after the last stop, the store files are opened offline with the core API: every
//!   ConsumeQueue unit must point at a CommitLog record of its topic and queue carrying the unit's
//!   queue offset and size, and each queue's max offset must equal the number of its records in
//!   the CommitLog;
//! * random choices (kill delays, queues, body sizes) come from a printed seed;
//!   `ACTORMQ_TEST_SEED=<n>` replays one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actormq::remoting::client::{ClientError, RemotingClient};
use actormq_core::format::msg_id::decode_offset_msg_id;
use actormq_core::format::record::{self, Check};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::store::commit_log::{CommitLog, CommitLogConfig};
use actormq_core::store::consume_queue::ConsumeQueueStore;
use actormq_core::store::index_file::IndexStore;
use actormq_core::store::mapped_file::Warm;
use actormq_core::store::mapped_file_queue::MappedFileQueue;
use actormq_core::QueueOffset;

#[path = "../common/mod.rs"]
mod common;
mod volatile_disk;
use common::{
    commit_offset_request, create_topic, describe_reply as describe, max_offset_request,
    pull_request, query_offset_request, records, send_request, wait_caught_up,
};
use volatile_disk::{CacheLoss, Fate, VolatileDisk};

/// `mappedFileSizeCommitLog` of every test: small, so a test crosses file boundaries.
const CL_FILE_SIZE: u64 = 4 * 1024 * 1024;
/// `maxMessageSize` of every test.
const MAX_MESSAGE_SIZE: usize = 65536;
/// `mappedFileSizeConsumeQueue` of most tests: 200 units, so queues roll ConsumeQueue files.
const CQ_FILE_SIZE: u64 = 200 * 20;
/// Queues of the test topic (created on first send with `defaultTopicQueueNums`).
const QUEUES: i32 = 4;
const TOPIC: &str = "DurabilityTopic";
/// Concurrent producers (one connection each) of the load phases.
const SENDERS: usize = 4;
/// kill -9 / restart cycles of the crash tests.
const CYCLES: usize = 20;
/// Largest random filler appended to a body in the load phases.
const MAX_FILLER: u64 = 3000;
/// Bound of a broker start (until the `broker started` line) and of a clean stop.
const START_LIMIT: Duration = Duration::from_secs(30);
const STOP_LIMIT: Duration = Duration::from_secs(30);
/// Per-request timeout of the clients.
const RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound of polls for something to become visible.
const WAIT_LIMIT: Duration = Duration::from_secs(10);
/// What the broker logs when it finds the abort file (abnormal recovery).
const ABNORMAL_LOG: &str = "did not stop cleanly";

// ---------------------------------------------------------------------------------------------
// Seeded randomness
// ---------------------------------------------------------------------------------------------

/// SplitMix64: a tiny, well-known seedable generator. Enough to make kill delays, queue choices
/// and body sizes reproducible from a printed seed without adding a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// An independent generator for a sub-task.
    fn fork(&mut self) -> Rng {
        Rng(self.next_u64())
    }
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// `ACTORMQ_TEST_SEED` if set, else a fresh one; printed either way.
fn seed_for(test: &str) -> u64 {
    let seed = match std::env::var("ACTORMQ_TEST_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("ACTORMQ_TEST_SEED={s:?} is not a u64: {e}"))
        }
        Err(_) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            now ^ fnv1a(test) ^ u64::from(std::process::id())
        }
    };
    eprintln!("{test}: seed {seed} (replay with ACTORMQ_TEST_SEED={seed})");
    seed
}

// ---------------------------------------------------------------------------------------------
// Time limits and cleanup
// ---------------------------------------------------------------------------------------------

/// What must be undone even if a test body hangs: live children and mounted file systems.
#[derive(Default)]
struct Cleanup {
    pids: Mutex<Vec<i32>>,
    mounts: Mutex<Vec<PathBuf>>,
    /// FUSE connections this process serves ([`VolatileDisk::connection`]).
    fuse: Mutex<Vec<u32>>,
}

impl Cleanup {
    fn add_pid(&self, pid: i32) {
        self.pids.lock().unwrap().push(pid);
    }
    fn remove_pid(&self, pid: i32) {
        self.pids.lock().unwrap().retain(|p| *p != pid);
    }
    fn add_mount(&self, p: &Path) {
        self.mounts.lock().unwrap().push(p.to_path_buf());
    }
    fn remove_mount(&self, p: &Path) {
        self.mounts.lock().unwrap().retain(|m| m != p);
    }
    fn add_fuse(&self, connection: u32) {
        self.fuse.lock().unwrap().push(connection);
    }
    fn remove_fuse(&self, connection: u32) {
        self.fuse.lock().unwrap().retain(|c| *c != connection);
    }
    /// The timeout path: SIGKILL every registered (still unreaped) child, lazily unmount, and
    /// abort the FUSE connections this process serves. A lazy unmount keeps a connection alive
    /// while the loop device holds its file, and a thread of ours left waiting on it (through the
    /// loop device) would keep this process from ever exiting once the server thread is gone:
    /// aborted, every request fails at once.
    fn emergency(&self) {
        for pid in self.pids.lock().unwrap().iter() {
            // SAFETY: plain kill(2) on a child of ours that has not been reaped yet (a pid is
            // removed from the list before it is waited for), so it cannot be a recycled pid.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        // Aborted before the unmounts, while each id is still the connection it was taken from.
        for c in self.fuse.lock().unwrap().iter() {
            volatile_disk::abort_connection(*c);
        }
        for m in self.mounts.lock().unwrap().iter() {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

/// Runs `body` on its own thread; fails the test if it panics or outlives `limit` (then every
/// registered child is killed and every registered mount undone first).
fn bounded<F>(name: &'static str, limit: Duration, body: F)
where
    F: FnOnce(Arc<Cleanup>) + Send + 'static,
{
    let cleanup = Arc::new(Cleanup::default());
    let inner = cleanup.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| body(inner)));
            let _ = tx.send(outcome);
        })
        .expect("spawn the test thread");
    match rx.recv_timeout(limit) {
        Ok(Ok(())) => {
            let _ = worker.join();
        }
        Ok(Err(panic)) => {
            let _ = worker.join();
            std::panic::resume_unwind(panic)
        }
        Err(_) => {
            cleanup.emergency();
            panic!("{name}: did not finish within {limit:?}; its broker processes were killed");
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test tokio runtime")
}

// ---------------------------------------------------------------------------------------------
// The broker process
// ---------------------------------------------------------------------------------------------

/// The environment of a broker process: `ACTORMQ_<KEY>` settings on top of the test defaults.
#[derive(Clone)]
struct BrokerEnv {
    root: PathBuf,
    vars: Vec<(String, String)>,
}

impl BrokerEnv {
    fn new(root: &Path) -> BrokerEnv {
        let env = BrokerEnv {
            root: root.to_path_buf(),
            vars: Vec::new(),
        };
        env.set("STOREPATHROOTDIR", root.to_str().expect("UTF-8 temp path"))
            .set("LISTENPORT", "0")
            .set("BROKERIP1", "127.0.0.1")
            .set("MAPPEDFILESIZECOMMITLOG", &CL_FILE_SIZE.to_string())
            .set("MAXMESSAGESIZE", &MAX_MESSAGE_SIZE.to_string())
            .set("MAPPEDFILESIZECONSUMEQUEUE", &CQ_FILE_SIZE.to_string())
            // A small index (about 100 KiB per file instead of 420 MiB) so index files roll too.
            .set("MAXHASHSLOTNUM", "1024")
            .set("MAXINDEXNUM", "4096")
            // An ephemeral metrics port, so brokers of tests running in parallel do not collide.
            .set("METRICSPROMEXPORTERPORT", "0")
    }

    /// Sets `ACTORMQ_<key>`, replacing an earlier value.
    fn set(self, key: &str, value: &str) -> BrokerEnv {
        self.var(&format!("ACTORMQ_{key}"), value)
    }

    /// Sets the environment variable `name` as it is, replacing an earlier value.
    fn var(mut self, name: &str, value: &str) -> BrokerEnv {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), value.to_string()));
        self
    }
}

/// One `actormq broker` child process. Dropping it kills (SIGKILL) and reaps it if it still runs.
struct Broker {
    child: Child,
    pid: i32,
    /// `host:port` from the `broker started` line (empty until started).
    addr: String,
    /// stdout lines, and stderr lines prefixed with `[stderr] `, ANSI colours removed.
    lines: Arc<Mutex<Vec<String>>>,
    /// The reader threads; they end at EOF, once the process is gone.
    readers: Vec<std::thread::JoinHandle<()>>,
    /// The store directory (`storePathRootDir`).
    root: PathBuf,
    exited: Option<ExitStatus>,
    cleanup: Arc<Cleanup>,
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn collect_lines(
    src: impl Read + Send + 'static,
    prefix: &'static str,
    into: Arc<Mutex<Vec<String>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(src).lines() {
            let Ok(line) = line else { break };
            into.lock()
                .unwrap()
                .push(format!("{prefix}{}", strip_ansi(&line)));
        }
    })
}

impl Broker {
    /// Starts a broker process without waiting for it to be ready.
    fn spawn(cleanup: &Arc<Cleanup>, env: &BrokerEnv) -> Broker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_actormq"));
        cmd.args(["broker", "--namesrv-listen", "127.0.0.1:0"]);
        // Nothing from the test's own environment may change the broker's configuration.
        for (k, _) in std::env::vars() {
            if k.starts_with("ACTORMQ_")
                || k == "NAMESRV_ADDR"
                || k == "NOTIFY_SOCKET"
                || k == "FAILPOINTS"
            {
                cmd.env_remove(k);
            }
        }
        cmd.env("RUST_LOG", "info").env("NO_COLOR", "1");
        for (k, v) in &env.vars {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: the closure runs in the forked child before exec and only calls prctl(2), which
        // is async-signal-safe. It makes the kernel SIGKILL the broker if the test thread that
        // spawned it dies, so no broker outlives a crashed test run.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn the actormq binary");
        let pid = child.id() as i32;
        cleanup.add_pid(pid);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            collect_lines(
                child.stdout.take().expect("piped stdout"),
                "",
                lines.clone(),
            ),
            collect_lines(
                child.stderr.take().expect("piped stderr"),
                "[stderr] ",
                lines.clone(),
            ),
        ];
        Broker {
            child,
            pid,
            addr: String::new(),
            lines,
            readers,
            root: env.root.clone(),
            exited: None,
            cleanup: cleanup.clone(),
        }
    }

    /// Starts a broker and waits (at most [`START_LIMIT`]) until it logs `broker started`.
    fn start(cleanup: &Arc<Cleanup>, env: &BrokerEnv) -> Broker {
        let mut b = Broker::spawn(cleanup, env);
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let found = b
                .lines
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains("broker started"))
                .find_map(|l| {
                    let at = l.find(" broker=")? + " broker=".len();
                    Some(l[at..].split_whitespace().next()?.to_string())
                });
            if let Some(addr) = found {
                b.addr = addr;
                return b;
            }
            if let Some(st) = b.poll_exit() {
                panic!(
                    "the broker exited ({st}) before `broker started`; its output:\n{}",
                    b.output()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "no `broker started` line within {START_LIMIT:?}; output so far:\n{}",
                    b.output()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The last `n` lines of output, for failure messages.
    fn tail(&self, n: usize) -> String {
        let l = self.lines.lock().unwrap();
        l[l.len().saturating_sub(n)..].join("\n")
    }

    fn poll_exit(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.cleanup.remove_pid(self.pid);
                self.exited = Some(st);
            }
        }
        self.exited
    }

    /// Waits (bounded) for the process to exit; `None` if it is still running.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.poll_exit() {
                // Let the reader threads drain the pipes, so the output is complete (they end
                // at EOF, which comes once the process is gone; bounded for a starved machine).
                let drained = Instant::now() + WAIT_LIMIT;
                while self.readers.iter().any(|h| !h.is_finished()) && Instant::now() < drained {
                    std::thread::sleep(Duration::from_millis(2));
                }
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends `sig` to the process if it has not been reaped yet.
    fn signal(&mut self, sig: i32) {
        if self.poll_exit().is_none() {
            // SAFETY: kill(2) on our own child, not reaped yet, so the pid is still ours.
            unsafe { libc::kill(self.pid, sig) };
        }
    }

    /// SIGTERM, then asserts a clean stop: exit code 0 within [`STOP_LIMIT`], the `abort` file
    /// removed, `broker stopped cleanly` logged.
    fn stop_cleanly(&mut self) {
        self.signal(libc::SIGTERM);
        let st = self.wait_exit(STOP_LIMIT).unwrap_or_else(|| {
            panic!(
                "the broker did not exit within {STOP_LIMIT:?} of SIGTERM; output tail:\n{}",
                self.tail(40)
            )
        });
        assert_eq!(
            st.code(),
            Some(0),
            "SIGTERM must stop the broker with exit code 0, got {st}; output tail:\n{}",
            self.tail(40)
        );
        assert!(
            self.output().contains("broker stopped cleanly"),
            "no `broker stopped cleanly` line; output tail:\n{}",
            self.tail(40)
        );
        assert_no_abort_file(&self.root);
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if self.poll_exit().is_none() {
            // SAFETY: kill(2) on our own child that has not been reaped.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = self.child.wait();
            self.cleanup.remove_pid(self.pid);
        }
    }
}

fn assert_no_abort_file(root: &Path) {
    assert!(
        !root.join("abort").exists(),
        "the abort file must be gone after a clean stop"
    );
}

/// The start after a clean stop: normal recovery, and nothing to re-dispatch (the stop left the
/// ConsumeQueues complete), so the word "abnormal" appears nowhere in its log.
fn assert_normal_start(b: &Broker) {
    let out = b.output();
    assert!(
        !out.contains(ABNORMAL_LOG) && !out.to_lowercase().contains("abnormal"),
        "a start after a clean stop must take the normal recovery path; its log:\n{out}"
    );
}

/// Normal recovery (no abort file), which may still re-dispatch what a ConsumeQueue lacks.
fn assert_not_abnormal_start(b: &Broker) {
    let out = b.output();
    assert!(
        !out.contains(ABNORMAL_LOG) && !out.contains("abnormal=true"),
        "a start without an abort file must take the normal recovery path; its log:\n{out}"
    );
}

fn assert_abnormal_start(b: &Broker) {
    let out = b.output();
    assert!(
        out.contains(ABNORMAL_LOG),
        "a start with the abort file present must say so (`{ABNORMAL_LOG}`); its log:\n{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// SEND_MESSAGE (10) of `body` ([`send_request`], from tests/common), with the key the body
/// carries as the message's KEYS (so the index must find it, see [`assert_offline_matches`]); no
/// WAIT property, so under SYNC_FLUSH the reply waits for the flush.
fn send_with_key(topic: &str, queue_id: i32, body: Vec<u8>) -> RemotingCommand {
    send_delayed_request(topic, queue_id, body, None)
}

/// [`send_with_key`] with delay level `delay` (the `DELAY` property), if any.
fn send_delayed_request(
    topic: &str,
    queue_id: i32,
    body: Vec<u8>,
    delay: Option<u32>,
) -> RemotingCommand {
    let mut properties = key_of(&body)
        .map(|k| format!("KEYS\u{1}{k}\u{2}"))
        .unwrap_or_default();
    if let Some(level) = delay {
        properties.push_str(&format!("DELAY\u{1}{level}\u{2}"));
    }
    send_request("durability-producer", topic, queue_id, body)
        .with_ext("defaultTopicQueueNums", QUEUES.to_string())
        .with_ext("properties", properties)
}

/// PULL_MESSAGE of the checker ([`pull_request`], from tests/common): nothing committed.
fn checker_pull(topic: &str, queue_id: i32, offset: u64) -> RemotingCommand {
    pull_request("durability-checker", topic, queue_id, offset as i64)
}

/// A message key names its sender and sequence number and ends with `-L<filler length>`; the body
/// is the key, `|`, and a filler derived from the key, so any body can be re-derived from its key.
fn key(prefix: &str, filler: u64) -> String {
    format!("{prefix}-L{filler}")
}

fn body_of(key: &str) -> Vec<u8> {
    let len: usize = key
        .rsplit("-L")
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("test bug: key {key:?} has no -L<len>"));
    let h = fnv1a(key);
    let mut b = Vec::with_capacity(key.len() + 1 + len);
    b.extend_from_slice(key.as_bytes());
    b.push(b'|');
    b.extend((0..len as u64).map(|i| b'a' + (h.wrapping_add(i * 7) % 26) as u8));
    b
}

fn key_of(body: &[u8]) -> Option<&str> {
    let end = body.iter().position(|&c| c == b'|')?;
    std::str::from_utf8(&body[..end]).ok()
}

// ---------------------------------------------------------------------------------------------
// The history: what was sent and what the broker said
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
struct Ack {
    queue: i32,
    offset: u64,
    msg_id: String,
    /// When the reply arrived (T2b bounds losses by it).
    at: Instant,
}

#[derive(Debug)]
enum Outcome {
    Acked(Ack),
    /// An error code: indeterminate in general (the message may be stored).
    Code(i32, String),
    /// No reply (connection cut, timeout): indeterminate.
    NoReply(String),
}

fn outcome(reply: Result<RemotingCommand, ClientError>) -> Outcome {
    match reply {
        Ok(r) if r.code == rc::SUCCESS => {
            let field = |name: &str| {
                r.ext(name)
                    .unwrap_or_else(|| panic!("SEND reply lacks {name}: {}", describe(&r)))
                    .to_string()
            };
            Outcome::Acked(Ack {
                queue: field("queueId").parse().expect("numeric queueId"),
                offset: field("queueOffset").parse().expect("numeric queueOffset"),
                msg_id: field("msgId"),
                at: Instant::now(),
            })
        }
        Ok(r) => Outcome::Code(r.code, r.remark.clone().unwrap_or_default()),
        Err(e) => Outcome::NoReply(e.to_string()),
    }
}

#[derive(Default)]
struct Ledger {
    sent: HashSet<String>,
    acked: HashMap<String, Ack>,
    /// (queue, offset) → key: two acknowledgements never share a slot.
    slots: HashMap<(i32, u64), String>,
    /// Keys refused with a code that guarantees nothing was stored (checked where a test says so).
    refused: HashSet<String>,
    no_reply: usize,
    codes: BTreeMap<i32, usize>,
    /// The first few non-acknowledged outcomes, for the report.
    samples: Vec<String>,
}

impl Ledger {
    fn record(&mut self, key: String, queue: i32, o: Outcome) {
        assert!(
            self.sent.insert(key.clone()),
            "test bug: key {key} sent twice"
        );
        match o {
            Outcome::Acked(a) => {
                assert_eq!(a.queue, queue, "{key}: acknowledged on another queue");
                if let Some(other) = self.slots.insert((a.queue, a.offset), key.clone()) {
                    panic!(
                        "two acknowledged messages got queue {} offset {}: {other} and {key}",
                        a.queue, a.offset
                    );
                }
                self.acked.insert(key, a);
            }
            Outcome::Code(c, remark) => {
                *self.codes.entry(c).or_default() += 1;
                if self.samples.len() < 5 {
                    self.samples.push(format!("{key}: code {c} {remark:?}"));
                }
            }
            Outcome::NoReply(why) => {
                self.no_reply += 1;
                if self.samples.len() < 5 {
                    self.samples.push(format!("{key}: {why}"));
                }
            }
        }
    }

    fn record_all(&mut self, results: Vec<(String, i32, Outcome)>) -> usize {
        let before = self.acked.len();
        for (k, q, o) in results {
            self.record(k, q, o);
        }
        self.acked.len() - before
    }
}

/// Sends `n` messages to `queue` one after the other; every one must be acknowledged.
async fn send_n(
    client: &RemotingClient,
    ledger: &mut Ledger,
    prefix: &str,
    queue: i32,
    n: usize,
    filler: u64,
) {
    for i in 0..n {
        let k = key(&format!("{prefix}-q{queue}-{i}"), filler);
        let reply = client
            .invoke(send_with_key(TOPIC, queue, body_of(&k)), RPC_TIMEOUT)
            .await;
        let o = outcome(reply);
        assert!(matches!(o, Outcome::Acked(_)), "SEND {k}: {o:?}");
        ledger.record(k, queue, o);
    }
}

/// After space returned on a full disk: retries one SEND every 50 ms until it is accepted (each
/// refusal must be SERVICE_NOT_AVAILABLE; at most [`WAIT_LIMIT`], `context` says why in the
/// failure), then sends `n` more, which must take the next queue offsets of queue 0, and records
/// them all in `ledger`. Returns how long the sends were refused.
async fn sends_resume(
    client: &RemotingClient,
    ledger: &mut Ledger,
    n: usize,
    filler: u64,
    context: impl Fn() -> String,
) -> Duration {
    let started = Instant::now();
    let mut i = 0;
    loop {
        let k = key(&format!("retry-{i}"), 10);
        i += 1;
        let r = client
            .invoke(send_with_key(TOPIC, 0, body_of(&k)), RPC_TIMEOUT)
            .await
            .expect("SEND answered");
        if r.code == rc::SUCCESS {
            ledger.record(k, 0, outcome(Ok(r)));
            break;
        }
        assert_eq!(r.code, rc::SERVICE_NOT_AVAILABLE, "{}", describe(&r));
        ledger.sent.insert(k.clone());
        ledger.refused.insert(k);
        assert!(
            started.elapsed() < WAIT_LIMIT,
            "sends still refused {WAIT_LIMIT:?} after space returned: {}; {}",
            describe(&r),
            context()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waited = started.elapsed();
    let next = ledger.acked.iter().filter(|(_, a)| a.queue == 0).count() as u64;
    let mut l = Ledger::default();
    send_n(client, &mut l, "resumed", 0, n, filler).await;
    let mut offsets: Vec<u64> = l.acked.values().map(|a| a.offset).collect();
    offsets.sort_unstable();
    assert_eq!(
        offsets,
        (next..next + n as u64).collect::<Vec<_>>(),
        "sends after the refusal continue at the next offsets of queue 0"
    );
    for (k, a) in l.acked {
        ledger.sent.insert(k.clone());
        ledger.acked.insert(k, a);
    }
    waited
}

/// Runs [`load`] against `b` and kills it with SIGKILL a seeded 100–400 ms after the first
/// acknowledgement; the producers run into the kill. Returns the delay and the outcomes once
/// the process is reaped.
fn kill_under_load(
    rt: &tokio::runtime::Runtime,
    b: &mut Broker,
    tag: &str,
    rng: &mut Rng,
) -> (Duration, Vec<(String, i32, Outcome)>) {
    let delay = Duration::from_millis(rng.range(100, 400));
    let pid = b.pid;
    let results = rt.block_on(load(&b.addr, tag, rng.next_u64(), async move {
        tokio::time::sleep(delay).await;
        // SAFETY: kill(2) on our running, unreaped child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        false
    }));
    let st = b
        .wait_exit(WAIT_LIMIT)
        .expect("the broker exits after SIGKILL");
    assert_eq!(st.signal(), Some(libc::SIGKILL), "{tag}: {st}");
    (delay, results)
}

/// Runs [`SENDERS`] concurrent producers (one connection each, one request in flight each) that
/// send to random queues of [`TOPIC`] until their connection fails. Once the first message is
/// acknowledged (so every cycle has something to lose), `fault` runs; it returns whether the
/// producers should also be told to stop (a timed load) or left to run into the fault (a killed
/// or stopping broker closes their connections).
async fn load<F>(addr: &str, tag: &str, seed: u64, fault: F) -> Vec<(String, i32, Outcome)>
where
    F: Future<Output = bool>,
{
    load_into(addr, tag, seed, 0..QUEUES, fault).await
}

/// [`load`] into the queues `queues` of [`TOPIC`] only.
async fn load_into<F>(
    addr: &str,
    tag: &str,
    seed: u64,
    queues: std::ops::Range<i32>,
    fault: F,
) -> Vec<(String, i32, Outcome)>
where
    F: Future<Output = bool>,
{
    load_with(addr, tag, seed, queues, None, fault).await
}

/// [`load_into`], every message with delay level `delay` if given.
async fn load_with<F>(
    addr: &str,
    tag: &str,
    seed: u64,
    queues: std::ops::Range<i32>,
    delay: Option<u32>,
    fault: F,
) -> Vec<(String, i32, Outcome)>
where
    F: Future<Output = bool>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicUsize::new(0));
    let mut rng = Rng::new(seed);
    let mut tasks = Vec::new();
    for s in 0..SENDERS {
        let client = RemotingClient::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("producer {s} connects to {addr}: {e}"));
        let mut r = rng.fork();
        let stop = stop.clone();
        let acks = acks.clone();
        let prefix = format!("{tag}-s{s}");
        let queues = queues.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let q = queues.start + r.below((queues.end - queues.start) as u64) as i32;
                let k = key(&format!("{prefix}-{n}"), r.below(MAX_FILLER + 1));
                n += 1;
                let reply = client
                    .invoke(
                        send_delayed_request(TOPIC, q, body_of(&k), delay),
                        RPC_TIMEOUT,
                    )
                    .await;
                let failed = reply.is_err();
                let o = outcome(reply);
                if matches!(o, Outcome::Acked(_)) {
                    acks.fetch_add(1, Ordering::Relaxed);
                }
                out.push((k, q, o));
                if failed {
                    break;
                }
            }
            out
        }));
    }
    let started = Instant::now();
    while acks.load(Ordering::Relaxed) == 0 {
        if started.elapsed() > WAIT_LIMIT || tasks.iter().all(|t| t.is_finished()) {
            stop.store(true, Ordering::Relaxed);
            let mut outcomes = Vec::new();
            for t in tasks {
                outcomes.extend(t.await.expect("producer task panicked").into_iter().take(3));
            }
            panic!("no SEND acknowledged within {WAIT_LIMIT:?}; first outcomes: {outcomes:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    if fault.await {
        stop.store(true, Ordering::Relaxed);
    }
    // A killed broker cuts the connections at once; a stopping one when it exits. Bound it anyway.
    let watchdog = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(STOP_LIMIT).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("producer task panicked"));
    }
    watchdog.abort();
    all
}

// ---------------------------------------------------------------------------------------------
// Checking over the wire
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
struct Pulled {
    offset: u64,
    key: String,
    msg_id: String,
}

async fn max_offset(client: &RemotingClient, q: i32) -> u64 {
    let r = client
        .invoke(max_offset_request(TOPIC, q), RPC_TIMEOUT)
        .await
        .expect("GET_MAX_OFFSET answered");
    assert_eq!(r.code, rc::SUCCESS, "GET_MAX_OFFSET q{q}: {}", describe(&r));
    r.ext("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or_else(|| panic!("GET_MAX_OFFSET q{q} without offset: {}", describe(&r)))
}

/// The max offset of queue `q` once it is at least `at_least`. Dispatch to the ConsumeQueue
/// follows the acknowledgement asynchronously (as in RocketMQ), so right after the last
/// acknowledgement the queue may not have caught up yet; it must within `WAIT_LIMIT`.
async fn max_offset_reaching(client: &RemotingClient, q: i32, at_least: u64) -> u64 {
    let started = Instant::now();
    let mut max = max_offset(client, q).await;
    while max < at_least {
        assert!(
            started.elapsed() < WAIT_LIMIT,
            "q{q}: max offset {max} after {WAIT_LIMIT:?}, but offset {} was acknowledged",
            at_least - 1
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        max = max_offset(client, q).await;
    }
    max
}

/// Reads queue `q` from offset 0 to its max (at least `at_least`): every record must carry the expected topic, queue
/// and the next queue offset, pass the body CRC, and have exactly the body derived from its key.
async fn read_queue(client: &RemotingClient, q: i32, at_least: u64) -> Vec<Pulled> {
    let max = max_offset_reaching(client, q, at_least).await;
    // The PULL retries get a budget of their own, not what waiting for the max offset left.
    let started = Instant::now();
    let mut out: Vec<Pulled> = Vec::new();
    let mut offset = 0u64;
    while offset < max {
        let r = client
            .invoke(checker_pull(TOPIC, q, offset), RPC_TIMEOUT)
            .await
            .expect("PULL answered");
        if r.code != rc::SUCCESS {
            assert!(
                (r.code == rc::PULL_NOT_FOUND || r.code == rc::PULL_RETRY_IMMEDIATELY)
                    && started.elapsed() < WAIT_LIMIT,
                "PULL q{q} at {offset} (max {max}): {}",
                describe(&r)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        for rec in records(&r.body, true) {
            assert_eq!(
                (rec.topic, rec.queue_id, rec.queue_offset),
                (TOPIC, q, offset as i64),
                "pulled record at q{q} offset {offset}: wrong topic/queue/offset (a gap or a \
                 duplicate offset)"
            );
            let k = key_of(rec.body)
                .unwrap_or_else(|| panic!("q{q}@{offset}: body without a key"))
                .to_string();
            assert_eq!(
                rec.body,
                &body_of(&k)[..],
                "q{q}@{offset} {k}: body damaged"
            );
            out.push(Pulled {
                offset,
                key: k,
                msg_id: rec.offset_msg_id(),
            });
            offset += 1;
        }
        let next: u64 = r
            .ext("nextBeginOffset")
            .and_then(|o| o.parse().ok())
            .expect("PULL reply has nextBeginOffset");
        assert_eq!(next, offset, "q{q}: nextBeginOffset skips offsets");
    }
    out
}

/// Reads every queue of [`TOPIC`] and checks it against the ledger: every acknowledged message at
/// its queue and offset with its msgId; no phantom; no duplicate; no refused message. Returns the
/// queues' contents.
async fn verify(addr: &str, ledger: &Ledger, what: &str) -> BTreeMap<i32, Vec<Pulled>> {
    let client = RemotingClient::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{what}: checker connects to {addr}: {e}"));
    let mut seen: HashMap<String, (i32, u64)> = HashMap::new();
    let mut queues = BTreeMap::new();
    let mut unacked_present = 0;
    for q in 0..QUEUES {
        let at_least = ledger
            .acked
            .values()
            .filter(|a| a.queue == q)
            .map(|a| a.offset + 1)
            .max()
            .unwrap_or(0);
        let got = read_queue(&client, q, at_least).await;
        for p in &got {
            assert!(
                ledger.sent.contains(&p.key),
                "{what}: q{q}@{} holds {:?}, which was never sent (phantom)",
                p.offset,
                p.key
            );
            assert!(
                !ledger.refused.contains(&p.key),
                "{what}: q{q}@{} holds {:?}, whose SEND was refused",
                p.offset,
                p.key
            );
            if let Some(prev) = seen.insert(p.key.clone(), (q, p.offset)) {
                panic!(
                    "{what}: {} stored twice: q{}@{} and q{q}@{}",
                    p.key, prev.0, prev.1, p.offset
                );
            }
            match ledger.acked.get(&p.key) {
                Some(a) => {
                    assert_eq!(
                        (a.queue, a.offset, &a.msg_id),
                        (q, p.offset, &p.msg_id),
                        "{what}: {} read back elsewhere than acknowledged",
                        p.key
                    );
                }
                None => unacked_present += 1,
            }
        }
        queues.insert(q, got);
    }
    let mut lost: Vec<_> = ledger
        .acked
        .iter()
        .filter(|(k, _)| !seen.contains_key(*k))
        .map(|(k, a)| format!("{k} (q{}@{})", a.queue, a.offset))
        .collect();
    lost.sort();
    assert!(
        lost.is_empty(),
        "{what}: {} of {} acknowledged messages lost; first: {:?}",
        lost.len(),
        ledger.acked.len(),
        &lost[..lost.len().min(10)]
    );
    eprintln!(
        "{what}: {} acknowledged all present; {unacked_present} unacknowledged present; queue \
         sizes {:?}",
        ledger.acked.len(),
        queues.values().map(Vec::len).collect::<Vec<_>>()
    );
    queues
}

// ---------------------------------------------------------------------------------------------
// Checking the files offline (broker stopped)
// ---------------------------------------------------------------------------------------------

/// Where a CommitLog record is: physical offset, size, queue offset.
type RecordPos = (u64, u32, i64);

/// Opens the stopped store's files with the core API and checks that ConsumeQueues and CommitLog
/// agree: returns the number of records per (topic, queue).
fn offline_check(root: &Path, cq_file_size: u64) -> BTreeMap<(String, i32), u64> {
    // The CommitLog file size of the run (a test may set a smaller one): the first file's length.
    let cl_file_size = std::fs::read_dir(root.join("commitlog"))
        .expect("CommitLog directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().len() == 20)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .next()
        .unwrap_or(CL_FILE_SIZE);
    let files =
        MappedFileQueue::load(&root.join("commitlog"), cl_file_size).expect("load CommitLog");
    let mut log = CommitLog::new(
        CommitLogConfig {
            file_size: cl_file_size,
            max_message_size: MAX_MESSAGE_SIZE,
            warm: Warm::No,
        },
        files,
    );
    // (topic, queue) → [(physical offset, size, queue offset)] in CommitLog order.
    let mut records: BTreeMap<(String, i32), Vec<RecordPos>> = BTreeMap::new();
    let rep = log
        .recover(true, Some(0), |phy, r| {
            records
                .entry((r.topic.to_string(), r.queue_id))
                .or_default()
                .push((phy, r.total_size, r.queue_offset));
        })
        .expect("CommitLog recovery offline");
    assert!(
        rep.truncated_reason.is_none(),
        "the CommitLog of a cleanly stopped store has a corrupt tail: {:?}",
        rep.truncated_reason
    );
    let view = log.view();
    let mut cqs =
        ConsumeQueueStore::load(&root.join("consumequeue"), cq_file_size).expect("load CQs");
    cqs.recover().expect("ConsumeQueue recovery offline");
    let table = cqs.table();
    let mut counts = BTreeMap::new();
    let mut queues_seen = HashSet::new();
    for topic in table.topics() {
        for cq in table.queues_of(&topic) {
            let q = cq.queue_id;
            queues_seen.insert((topic.clone(), q));
            let max = cq.max_offset().0;
            assert_eq!(
                cq.min_offset().0,
                0,
                "{topic}/{q}: units deleted at the front"
            );
            let recs = records
                .get(&(topic.clone(), q))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for o in 0..max {
                let u = cq
                    .unit(QueueOffset(o))
                    .unwrap_or_else(|| panic!("{topic}/{q}: unit {o} unreadable"));
                assert!(
                    u.is_valid(),
                    "{topic}/{q}: unit {o} is a blank/invalid unit {u:?}"
                );
                let slice = view
                    .read(u.phy_offset as u64, u.size as usize)
                    .unwrap_or_else(|| {
                        panic!("{topic}/{q}: unit {o} {u:?} points past the CommitLog")
                    });
                match record::check(slice.as_bytes(), true) {
                    Ok(Check::Record(r)) => {
                        assert_eq!(
                            (
                                r.topic,
                                r.queue_id,
                                r.queue_offset,
                                r.total_size,
                                r.phy_offset
                            ),
                            (topic.as_str(), q, o as i64, u.size as u32, u.phy_offset),
                            "{topic}/{q}: unit {o} {u:?} points at another record"
                        );
                        assert_eq!(u.tags_code, r.tags_code(), "{topic}/{q}: unit {o} tagsCode");
                    }
                    other => panic!("{topic}/{q}: unit {o} {u:?} points at {other:?}"),
                }
                let expected = recs.get(o as usize).map(|r| (r.0, r.1, r.2));
                assert_eq!(
                    expected,
                    Some((u.phy_offset as u64, u.size as u32, o as i64)),
                    "{topic}/{q}: unit {o} is not the queue's {o}-th CommitLog record"
                );
            }
            assert_eq!(
                recs.len() as u64,
                max,
                "{topic}/{q}: ConsumeQueue max {max} but {} records in the CommitLog",
                recs.len()
            );
            counts.insert((topic.clone(), q), max);
        }
    }
    for (k, v) in &records {
        assert!(
            queues_seen.contains(k),
            "{} records of {}/{} in the CommitLog have no ConsumeQueue",
            v.len(),
            k.0,
            k.1
        );
    }
    eprintln!(
        "offline: CommitLog end {} ({} records), {} ConsumeQueues consistent",
        rep.end.0,
        rep.records,
        counts.len()
    );
    counts
}

/// The offline counts of [`TOPIC`] must equal what was read over the wire.
fn assert_offline_matches(root: &Path, cq_file_size: u64, wire: &BTreeMap<i32, Vec<Pulled>>) {
    assert_offline_counts(root, cq_file_size, wire);
    assert_keys_indexed(root, wire);
}

/// The offline check ([`offline_check`]), and each queue as long offline as PULL served it.
/// Without the index check: after a machine crash RocketMQ's recovery rebuilds the index only
/// from the recovery start (keys of older messages are lost unless `messageIndexSafe`).
fn assert_offline_counts(root: &Path, cq_file_size: u64, wire: &BTreeMap<i32, Vec<Pulled>>) {
    let counts = offline_check(root, cq_file_size);
    for (q, got) in wire {
        assert_eq!(
            counts.get(&(TOPIC.to_string(), *q)).copied().unwrap_or(0),
            got.len() as u64,
            "q{q}: offline ConsumeQueue size differs from what PULL served"
        );
    }
}

/// Every message PULL served is found by its key in the index files (the index of [`BrokerEnv`]):
/// a broker process killed on this boot leaves its index files whole, and recovery keeps them
/// and adds what they lack.
fn assert_keys_indexed(root: &Path, wire: &BTreeMap<i32, Vec<Pulled>>) {
    let index = IndexStore::open(&root.join("index"), 1024, 4096).expect("open the index");
    let reader = index.reader();
    let mut missing = Vec::new();
    let mut total = 0;
    for (q, got) in wire {
        for p in got {
            total += 1;
            let (_, phy) = decode_offset_msg_id(&p.msg_id).expect("an offset msgId");
            // Other keys with the same 32-bit hash may be answered too (the index stores hashes).
            let found = reader.query(TOPIC, &p.key, 64, 0, i64::MAX).phy_offsets;
            if !found.contains(&phy) {
                missing.push(format!("{}@q{q}/{}: {found:?}, not {phy}", p.key, p.offset));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {total} stored messages not found by key at their offset in the index; first: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    eprintln!("offline: all {total} stored messages found by key in the index");
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// T1/T2: [`CYCLES`] times: load from 4 producers, SIGKILL a random 100–400 ms after the first
/// acknowledgement, restart on the same store (abort file → abnormal recovery), check everything
/// acknowledged so far. After a check the restarted broker either stops with SIGTERM (the next
/// cycle starts from a clean store) or, chosen by the seed, takes the next cycle's load itself,
/// so crashes also hit a store that has just come out of abnormal recovery.
fn kill_minus_9_cycles(name: &'static str, flush: &'static str) {
    kill_minus_9_cycles_with(name, flush, &[], CYCLES);
}

/// [`kill_minus_9_cycles`] with extra `ACTORMQ_<key>` settings and a number of cycles.
fn kill_minus_9_cycles_with(
    name: &'static str,
    flush: &'static str,
    extra: &'static [(&'static str, &'static str)],
    cycles: usize,
) {
    bounded(name, Duration::from_secs(170), move |cleanup| {
        let seed = seed_for(name);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let mut env = BrokerEnv::new(&root).set("FLUSHDISKTYPE", flush);
        for (k, v) in extra {
            env = env.set(k, v);
        }
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut broker = Broker::start(&cleanup, &env);
        if extra.contains(&("TRANSIENTSTOREPOOLENABLE", "true")) {
            assert!(
                broker.output().contains("write buffers on"),
                "the broker uses its write buffers:\n{}",
                broker.tail(20)
            );
        }
        let mut per_cycle = Vec::new();
        let mut clean_stops = 0;
        let mut last = BTreeMap::new();
        for cycle in 0..cycles {
            let (delay, results) =
                kill_under_load(&rt, &mut broker, &format!("c{cycle}"), &mut rng);
            let acked = ledger.record_all(results);
            assert!(
                root.join("abort").exists(),
                "cycle {cycle}: a killed broker leaves its abort file"
            );
            per_cycle.push((delay.as_millis(), acked));
            broker = Broker::start(&cleanup, &env);
            assert_abnormal_start(&broker);
            // Killed on this boot: told apart from a machine crash by the abort file's boot id.
            assert!(
                broker.output().contains("previous_run=\"process died\""),
                "cycle {cycle}: {}",
                broker.tail(20)
            );
            last = rt.block_on(verify(
                &broker.addr,
                &ledger,
                &format!("{name} cycle {cycle} after kill -9"),
            ));
            if cycle + 1 == cycles || rng.below(2) == 0 {
                broker.stop_cleanly();
                clean_stops += 1;
                if cycle + 1 < cycles {
                    broker = Broker::start(&cleanup, &env);
                    assert_normal_start(&broker);
                }
            }
        }
        eprintln!(
            "{name}: {cycles} kill -9 cycles ({clean_stops} followed by a clean stop), {} acked, \
             {} without reply, error codes {:?} (e.g. {:?}); (delay ms, acked) per cycle: \
             {per_cycle:?}",
            ledger.acked.len(),
            ledger.no_reply,
            ledger.codes,
            ledger.samples
        );
        assert_offline_matches(&root, CQ_FILE_SIZE, &last);
    });
}

#[test]
fn kill_minus_9_under_sync_flush_loses_no_acknowledged_message() {
    kill_minus_9_cycles(
        "kill_minus_9_under_sync_flush_loses_no_acknowledged_message",
        "SYNC_FLUSH",
    );
}

/// SYNC_FLUSH with write buffers (`transientStorePoolEnable`; two buffers and 512 KiB CommitLog
/// files, so the load rolls files and buffers are recycled):
/// a message is acknowledged only after the group committer has committed it from its buffer
/// (`pwrite`) and fdatasynced the file, so kill -9 loses nothing acknowledged either.
#[test]
fn kill_minus_9_under_sync_flush_with_write_buffers_loses_no_acknowledged_message() {
    kill_minus_9_cycles_with(
        "kill_minus_9_under_sync_flush_with_write_buffers_loses_no_acknowledged_message",
        "SYNC_FLUSH",
        &[
            ("TRANSIENTSTOREPOOLENABLE", "true"),
            ("TRANSIENTSTOREPOOLSIZE", "2"),
            ("MAPPEDFILESIZECOMMITLOG", "524288"),
        ],
        8,
    );
}

/// Under ASYNC_FLUSH an acknowledged message may sit only in the page cache, which survives the
/// death of the process: a process crash loses nothing acknowledged either.
#[test]
fn kill_minus_9_under_async_flush_loses_no_acknowledged_message() {
    kill_minus_9_cycles(
        "kill_minus_9_under_async_flush_loses_no_acknowledged_message",
        "ASYNC_FLUSH",
    );
}

/// Kill -9 cycles for T2b: [`KILLS_T2B`] loads of 1.5–2.5 s under ASYNC_FLUSH with write
/// buffers, each cut by kill -9 (longer than the loss window, so an old loss cannot hide).
const KILLS_T2B: usize = 8;

/// Slack on top of `commitIntervalCommitLog` for T2b's loss window: the committer's tick, its
/// `pwrite`, and the reply's trip to the client all fall inside it. A loss older than that means
/// a message sat uncommitted in a write buffer for far longer than the committer allows. Generous,
/// because a committer's `pwrite` can be throttled by dirty-page write-back on a busy machine;
/// the writer wakes the committer after its appends, and the losses seen here were acknowledged
/// at most a few milliseconds before the kill.
const T2B_SLACK: Duration = Duration::from_millis(1000);

/// ASYNC_FLUSH with write buffers (`transientStorePoolEnable`). SEND_OK means
/// written into a buffer, so kill -9 may lose acknowledged messages: those the committer had not
/// yet copied into the files. The test measures them. Each cycle, every acknowledged message must
/// be present unless it was acknowledged within `commitIntervalCommitLog` (200 ms) plus
/// [`T2B_SLACK`] of the kill. In every queue the lost ones must form a suffix: nothing present
/// after a hole. The lost are then dropped from the ledger, since their queue offsets are given
/// to new messages after the restart. At the end the ConsumeQueues must agree with the CommitLog.
#[test]
fn kill_minus_9_with_async_write_buffers_loses_only_the_last_uncommitted_acknowledgements() {
    const NAME: &str =
        "kill_minus_9_with_async_write_buffers_loses_only_the_last_uncommitted_acknowledgements";
    bounded(NAME, Duration::from_secs(150), move |cleanup| {
        let seed = seed_for(NAME);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root)
            .set("FLUSHDISKTYPE", "ASYNC_FLUSH")
            .set("TRANSIENTSTOREPOOLENABLE", "true")
            .set("TRANSIENTSTOREPOOLSIZE", "2")
            .set("MAPPEDFILESIZECOMMITLOG", "1048576");
        let window = Duration::from_millis(200) + T2B_SLACK;
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut broker = Broker::start(&cleanup, &env);
        assert!(
            broker.output().contains("write buffers on"),
            "the broker uses its write buffers:\n{}",
            broker.tail(20)
        );
        let mut report = Vec::new();
        let mut wire = BTreeMap::new();
        for cycle in 0..KILLS_T2B {
            let delay = Duration::from_millis(rng.range(1500, 2500));
            let pid = broker.pid;
            let killed_at = Arc::new(Mutex::new(None));
            let k = killed_at.clone();
            let results = rt.block_on(load(
                &broker.addr,
                &format!("b{cycle}"),
                rng.next_u64(),
                async move {
                    tokio::time::sleep(delay).await;
                    *k.lock().unwrap() = Some(Instant::now());
                    // SAFETY: kill(2) on our running, unreaped child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    false
                },
            ));
            let killed_at = killed_at.lock().unwrap().expect("the kill ran");
            let acked = ledger.record_all(results);
            let st = broker
                .wait_exit(WAIT_LIMIT)
                .expect("the broker exits after SIGKILL");
            assert_eq!(st.signal(), Some(libc::SIGKILL), "cycle {cycle}: {st}");
            broker = Broker::start(&cleanup, &env);
            assert_abnormal_start(&broker);
            let (lost, oldest) = rt.block_on(settle_losses(
                &broker.addr,
                &mut ledger,
                killed_at,
                window,
                &format!("{NAME} cycle {cycle}"),
            ));
            report.push((acked, lost.len(), oldest.map(|d| d.as_millis())));
            if cycle + 1 == KILLS_T2B {
                wire = rt.block_on(verify(&broker.addr, &ledger, NAME));
            }
        }
        broker.stop_cleanly();
        eprintln!(
            "{NAME}: seed {seed}; per cycle (acknowledged, lost, oldest lost ack before the kill \
             in ms): {report:?}"
        );
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
    });
}

/// T2b's check after a restart: reads every queue, and for each acknowledged message not present
/// asserts it was acknowledged within `window` of `killed_at` and that no acknowledged message of
/// its queue is present after it (losses are a suffix per queue); present ones must be where they
/// were acknowledged. The lost are removed from `ledger` (their offsets are free again). Returns
/// the lost keys and how long before the kill the oldest of them was acknowledged.
async fn settle_losses(
    addr: &str,
    ledger: &mut Ledger,
    killed_at: Instant,
    window: Duration,
    what: &str,
) -> (Vec<String>, Option<Duration>) {
    let client = RemotingClient::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{what}: checker connects to {addr}: {e}"));
    let mut present: HashMap<String, (i32, u64)> = HashMap::new();
    for q in 0..QUEUES {
        for p in read_queue(&client, q, 0).await {
            assert!(
                ledger.sent.contains(&p.key),
                "{what}: q{q}@{} holds {:?}, which was never sent (phantom)",
                p.offset,
                p.key
            );
            present.insert(p.key, (q, p.offset));
        }
    }
    let mut lost: Vec<(String, Ack)> = ledger
        .acked
        .iter()
        .filter(|(k, _)| !present.contains_key(*k))
        .map(|(k, a)| (k.clone(), a.clone()))
        .collect();
    lost.sort_by_key(|(_, a)| (a.queue, a.offset));
    for (k, a) in ledger
        .acked
        .iter()
        .filter(|(k, _)| present.contains_key(*k))
    {
        assert_eq!(
            present[k],
            (a.queue, a.offset),
            "{what}: {k} read back elsewhere than acknowledged"
        );
    }
    let mut oldest = None;
    for (k, a) in &lost {
        let age = killed_at.saturating_duration_since(a.at);
        assert!(
            age <= window,
            "{what}: {k} (q{}@{}) was acknowledged {age:?} before the kill and is lost: only the \
             last {window:?} of acknowledgements may be",
            a.queue,
            a.offset
        );
        oldest = oldest.max(Some(age));
        let later_present = ledger
            .acked
            .iter()
            .filter(|(k2, b)| {
                b.queue == a.queue && b.offset > a.offset && present.contains_key(*k2)
            })
            .map(|(k2, b)| format!("{k2}@{}", b.offset))
            .next();
        assert!(
            later_present.is_none(),
            "{what}: q{}: {k}@{} lost while {} is present — a hole, not a suffix",
            a.queue,
            a.offset,
            later_present.unwrap_or_default()
        );
    }
    for (k, a) in &lost {
        ledger.acked.remove(k);
        ledger.slots.remove(&(a.queue, a.offset));
    }
    (lost.into_iter().map(|(k, _)| k).collect(), oldest)
}

/// Starts of the recovery test ([`kill_minus_9_during_recovery_loses_no_acknowledged_message`])
/// killed before they finish.
const RECOVERY_KILLS: usize = 10;

/// T6: kill -9 during recovery. A SYNC_FLUSH load of a random 1.5–2.5 s, cut by kill -9, leaves
/// several CommitLog files and ConsumeQueue files of every queue to recover. One whole start on a
/// copy of that store gives the length of a start; then the broker is started on the store
/// itself and killed again [`RECOVERY_KILLS`] times, the i-th kill a random moment in the i-th
/// tenth of that length (before, during and after recovery; at least one must land between the
/// "did not stop cleanly" line and `broker started`), and finally let start. Every interrupted
/// start must leave the `abort` file (the next start is abnormal again), and the last one must
/// serve every acknowledged message with contiguous queues whose ConsumeQueues agree with the
/// CommitLog — as if recovery had never been cut.
#[test]
fn kill_minus_9_during_recovery_loses_no_acknowledged_message() {
    const NAME: &str = "kill_minus_9_during_recovery_loses_no_acknowledged_message";
    bounded(NAME, Duration::from_secs(170), move |cleanup| {
        let seed = seed_for(NAME);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root).set("FLUSHDISKTYPE", "SYNC_FLUSH");
        let rt = runtime();
        let mut ledger = Ledger::default();

        let mut broker = Broker::start(&cleanup, &env);
        let load_ms = rng.range(1500, 2500);
        let acked = load_then_kill(&rt, &mut broker, &mut ledger, "t6", rng.next_u64(), load_ms);
        let cl_files = std::fs::read_dir(root.join("commitlog"))
            .expect("commitlog dir")
            .count();
        assert!(
            cl_files >= 2,
            "the load rolled CommitLog files ({cl_files})"
        );

        // How long one whole start takes on this store, to spread the kills over it — timed on
        // a copy, so that every killed start below finds the store as the crash left it, its
        // repair (cuts, re-dispatch) still to do.
        let copy = dir.path().join("timing");
        let cp = Command::new("cp")
            .arg("-a")
            .arg(&root)
            .arg(&copy)
            .status()
            .expect("cp runs");
        assert!(cp.success(), "copying the store: {cp}");
        let copy_env = BrokerEnv::new(&copy).set("FLUSHDISKTYPE", "SYNC_FLUSH");
        let t0 = Instant::now();
        let mut whole = Broker::start(&cleanup, &copy_env);
        let start_time = t0.elapsed();
        assert_abnormal_start(&whole);
        whole.signal(libc::SIGKILL);
        whole
            .wait_exit(WAIT_LIMIT)
            .expect("the broker exits after SIGKILL");

        let mut kills = Vec::new();
        let mut in_recovery = 0;
        for i in 0..RECOVERY_KILLS {
            // Stratified: the i-th kill lands in the i-th tenth of the start, so every phase of
            // it is hit whatever the seed.
            let slice = start_time.as_micros() as u64 / RECOVERY_KILLS as u64;
            let delay = Duration::from_micros(slice * i as u64 + rng.below(slice + 1));
            let mut b = Broker::spawn(&cleanup, &env);
            std::thread::sleep(delay);
            b.signal(libc::SIGKILL);
            let st = b
                .wait_exit(WAIT_LIMIT)
                .expect("the broker exits after SIGKILL");
            assert_eq!(
                st.signal(),
                Some(libc::SIGKILL),
                "start {i} ended by itself ({st}) before the kill {delay:?} into it:\n{}",
                b.output()
            );
            assert!(
                root.join("abort").exists(),
                "start {i}, killed {delay:?} into it, left no abort file: the next start would \
                 take the normal path over an unrecovered store; its output:\n{}",
                b.output()
            );
            let out = b.output();
            if out.contains(ABNORMAL_LOG) && !out.contains("broker started") {
                in_recovery += 1;
            }
            let last = b.tail(1);
            kills.push((
                delay.as_millis(),
                last.chars().take(100).collect::<String>(),
            ));
        }
        assert!(
            in_recovery > 0,
            "no kill landed between the start of recovery and `broker started` (a whole start \
             took {start_time:?}): {kills:#?}"
        );

        let mut broker = Broker::start(&cleanup, &env);
        assert_abnormal_start(&broker);
        let wire = rt.block_on(verify(
            &broker.addr,
            &ledger,
            &format!("{NAME} after {RECOVERY_KILLS} kills during recovery"),
        ));
        broker.stop_cleanly();
        eprintln!(
            "{NAME}: seed {seed}, {acked} acked in {load_ms} ms over {cl_files} CommitLog files; \
             a whole start took {start_time:?}; {in_recovery} of {RECOVERY_KILLS} kills during \
             recovery; kills (ms into the start, its last log line): {kills:#?}"
        );
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
    });
}

/// `key=value` in a log line (the value up to the next space).
fn log_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split_whitespace().next()
}

/// The number `key=` holds in a log line; panics naming the line if there is none.
fn log_number<T: std::str::FromStr>(line: &str, key: &str) -> T {
    log_field(line, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {key} in {line:?}"))
}

/// The first log line of `b` containing `what`.
fn log_line(b: &Broker, what: &str) -> Option<String> {
    b.lines
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains(what))
        .cloned()
}

/// How many CommitLog files under `root` hold data: a record starts each of them (the
/// allocator's next file is zeros).
fn commit_log_files_with_data(root: &Path) -> usize {
    std::fs::read_dir(root.join("commitlog"))
        .expect("commitlog dir")
        .filter(|e| {
            let mut head = [0u8; 4];
            let path = e.as_ref().expect("dir entry").path();
            std::fs::File::open(path)
                .and_then(|mut f| f.read_exact(&mut head))
                .is_ok()
                && head != [0; 4]
        })
        .count()
}

/// What a store logs at each recovery progress checkpoint.
const PROGRESS: &str = "recovery progress checkpointed";

/// Starts a broker whose `env` arms a fail point holding it at its `held`-th recovery progress
/// checkpoint, and waits (at most [`START_LIMIT`]) until that checkpoint's line is logged.
/// Returns the broker (still running, held) and the line.
fn start_held_at_progress(
    cleanup: &Arc<Cleanup>,
    env: &BrokerEnv,
    held: usize,
) -> (Broker, String) {
    let mut first = Broker::spawn(cleanup, env);
    let deadline = Instant::now() + START_LIMIT;
    loop {
        let progress: Vec<String> = first
            .lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(PROGRESS))
            .cloned()
            .collect();
        if progress.len() >= held {
            let line = progress[held - 1].clone();
            return (first, line);
        }
        if let Some(st) = first.poll_exit() {
            panic!("the first start exited ({st}):\n{}", first.output());
        }
        assert!(
            Instant::now() < deadline,
            "{} of {held} progress checkpoints within {START_LIMIT:?}:\n{}",
            progress.len(),
            first.tail(40)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// T6, recovery progress (apache/rocketmq#9587): a start killed during recovery resumes from the
/// last progress checkpoint instead of rescanning everything. Two loads 4 s apart — the gap
/// longer than the checkpoint's 3 s margin, so progress into the second can move the start past
/// the files of the first — the second cut by kill -9; the checkpoint is then zeroed (a crash
/// before any checkpoint), so the first start must scan and re-dispatch every file. A fail point
/// holds that start right after its progress checkpoint at the boundary into the last file —
/// inside recovery, before `broker started` — where it is killed. The next start must scan only
/// from the file that checkpoint named, and serve every acknowledged message with ConsumeQueues
/// that agree with the CommitLog.
#[test]
fn a_start_killed_during_recovery_resumes_from_its_progress_checkpoint() {
    const NAME: &str = "a_start_killed_during_recovery_resumes_from_its_progress_checkpoint";
    bounded(NAME, Duration::from_secs(150), move |cleanup| {
        let seed = seed_for(NAME);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root);
        let rt = runtime();
        let mut ledger = Ledger::default();

        let mut broker = Broker::start(&cleanup, &env);
        let early = rt.block_on(load(&broker.addr, "early", rng.next_u64(), async {
            tokio::time::sleep(Duration::from_millis(3000)).await;
            true
        }));
        let mut acked = ledger.record_all(early);
        std::thread::sleep(Duration::from_millis(4000));
        acked += load_then_kill(&rt, &mut broker, &mut ledger, "late", rng.next_u64(), 2000);
        let files = commit_log_files_with_data(&root);
        assert!(files >= 4, "the load filled {files} CommitLog files");
        std::fs::write(root.join("checkpoint"), vec![0u8; 4096]).expect("zero the checkpoint");

        // Progress checkpoints come at each file boundary dispatch passes, then at the end: the
        // (files - 1)-th is the boundary into the last file.
        let held = files - 1;
        let first_env = env.clone().var(
            "FAILPOINTS",
            &format!("recovery-progress-checkpoint={}*off->pause", held - 1),
        );
        let (mut first, last_progress) = start_held_at_progress(&cleanup, &first_env, held);
        // Give a start that ignored the fail point the chance to show it.
        std::thread::sleep(Duration::from_millis(200));
        first.signal(libc::SIGKILL);
        first
            .wait_exit(WAIT_LIMIT)
            .expect("the first start exits after SIGKILL");
        let out = first.output();
        assert!(
            out.contains(ABNORMAL_LOG) && !out.contains("broker started"),
            "the first start must be held inside recovery:\n{out}"
        );
        let redispatch = log_line(&first, "dispatching CommitLog records").unwrap_or_default();
        assert_eq!(
            log_field(&redispatch, "from"),
            Some("0"),
            "with a zeroed checkpoint the first start re-dispatches from the first byte: {redispatch}"
        );
        assert_eq!(
            out.matches(PROGRESS).count(),
            held,
            "held at its {held}-th progress checkpoint:\n{out}"
        );
        let next_start: usize = log_number(&last_progress, "next_start_file");
        assert!(
            next_start >= 1,
            "after dispatching into the last of {files} files, 4 s after the first load, the \
             checkpoint must move the next start past the first file: {last_progress}"
        );
        assert!(
            root.join("abort").exists(),
            "the killed start left the abort file"
        );

        let mut broker = Broker::start(&cleanup, &env);
        assert_abnormal_start(&broker);
        let recovered = log_line(&broker, "store recovered").expect("a `store recovered` line");
        let scan_from: u64 = log_number(&recovered, "scan_from");
        assert_eq!(
            scan_from,
            next_start as u64 * CL_FILE_SIZE,
            "the start after the killed one scans from file {next_start}, as its progress \
             checkpoint said: {recovered}"
        );
        let wire = rt.block_on(verify(&broker.addr, &ledger, NAME));
        broker.stop_cleanly();
        eprintln!(
            "{NAME}: seed {seed}, {acked} acked over {files} CommitLog files; held at progress \
             checkpoint {held}: {last_progress}; the next start: {recovered}"
        );
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
    });
}

/// Waits (at most the socket's read timeout) for the next datagram on the test's systemd notify
/// socket.
fn next_notification(sock: &std::os::unix::net::UnixDatagram, b: &Broker) -> String {
    let mut buf = [0u8; 512];
    let n = sock.recv(&mut buf).unwrap_or_else(|e| {
        panic!(
            "no systemd notification in time ({e}); broker output:\n{}",
            b.tail(30)
        )
    });
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The address in a `READY=1` notification's `STATUS=serving on <addr>`.
fn ready_address(ready: &str) -> String {
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    ready
        .lines()
        .find_map(|l| l.strip_prefix("STATUS=serving on "))
        .unwrap_or_else(|| panic!("READY=1 with the address in STATUS, got {ready:?}"))
        .to_string()
}

/// A [`load`] of `ms` milliseconds cut by SIGKILL: records every outcome in `ledger`, waits for
/// the process to exit, and returns how many were acknowledged.
fn load_then_kill(
    rt: &tokio::runtime::Runtime,
    broker: &mut Broker,
    ledger: &mut Ledger,
    tag: &str,
    seed: u64,
    ms: u64,
) -> usize {
    let pid = broker.pid;
    let results = rt.block_on(load(&broker.addr, tag, seed, async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        // SAFETY: kill(2) on our running, unreaped child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        false
    }));
    let acked = ledger.record_all(results);
    let st = broker
        .wait_exit(WAIT_LIMIT)
        .expect("the broker exits after SIGKILL");
    assert_eq!(st.signal(), Some(libc::SIGKILL), "{st}");
    acked
}

/// systemd readiness (`Type=notify`): the broker says READY=1 only once recovery
/// is done and it serves — after an abnormal stop too, where each queue's max offset, asked once
/// the moment READY arrives, must already cover every acknowledged message — and STOPPING=1 when
/// SIGTERM comes, before its clean stop.
#[test]
fn systemd_hears_ready_only_once_recovery_is_done_and_stopping_at_sigterm() {
    const NAME: &str = "systemd_hears_ready_only_once_recovery_is_done_and_stopping_at_sigterm";
    bounded(NAME, Duration::from_secs(120), move |cleanup| {
        let seed = seed_for(NAME);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let sock_path = dir.path().join("notify.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).expect("notify socket");
        sock.set_read_timeout(Some(START_LIMIT)).expect("timeout");
        let env = BrokerEnv::new(&root)
            .set("FLUSHDISKTYPE", "SYNC_FLUSH")
            .var(
                "NOTIFY_SOCKET",
                sock_path.to_str().expect("UTF-8 temp path"),
            );
        let rt = runtime();
        let mut ledger = Ledger::default();

        // Ready from a fresh store, serving on the address it names.
        let mut broker = Broker::spawn(&cleanup, &env);
        broker.addr = ready_address(&next_notification(&sock, &broker));
        // A load cut by kill -9: the next start recovers abnormally.
        let load_ms = rng.range(300, 800);
        let acked = load_then_kill(&rt, &mut broker, &mut ledger, "sd", rng.next_u64(), load_ms);

        let mut broker = Broker::spawn(&cleanup, &env);
        broker.addr = ready_address(&next_notification(&sock, &broker));
        // Asked once each, at once: every acknowledged offset is already readable when READY
        // comes (`verify` below would wait for stragglers).
        let mut need: BTreeMap<i32, u64> = BTreeMap::new();
        for a in ledger.acked.values() {
            let n = need.entry(a.queue).or_default();
            *n = (*n).max(a.offset + 1);
        }
        let served: BTreeMap<i32, u64> = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connects right after READY=1");
            let mut m = BTreeMap::new();
            for &q in need.keys() {
                m.insert(q, max_offset(&client, q).await);
            }
            m
        });
        for (q, n) in &need {
            assert!(
                served[q] >= *n,
                "queue {q}: max offset {} right after READY=1, but offset {} was acknowledged",
                served[q],
                n - 1
            );
        }
        // The `broker started` line may still be in the pipe when READY arrives.
        let deadline = Instant::now() + WAIT_LIMIT;
        while !broker.output().contains("broker started") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_abnormal_start(&broker);
        let wire = rt.block_on(verify(
            &broker.addr,
            &ledger,
            &format!("{NAME}: right after READY=1 of an abnormal start"),
        ));

        broker.signal(libc::SIGTERM);
        let stopping = next_notification(&sock, &broker);
        assert_eq!(stopping.trim_end(), "STOPPING=1", "at SIGTERM");
        broker.stop_cleanly();
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);

        // SIGTERM in the middle of an abnormal recovery (as `systemctl stop` during a long one):
        // recovery finishes, then the broker stops cleanly, exit 0, no abort file — not the
        // signal's default action, which would leave the store to be recovered again.
        let mut broker = Broker::start(&cleanup, &env);
        let _ = next_notification(&sock, &broker);
        broker.signal(libc::SIGKILL);
        broker
            .wait_exit(WAIT_LIMIT)
            .expect("the broker exits after SIGKILL");
        // Held inside recovery for 3 s, so the signal surely comes before the start is done
        // (this store recovers in milliseconds): a zeroed checkpoint makes it re-dispatch from
        // the first byte, which writes a progress checkpoint, where the fail point sleeps.
        std::fs::write(root.join("checkpoint"), vec![0u8; 4096]).expect("zero the checkpoint");
        let held_env = env
            .clone()
            .var("FAILPOINTS", "recovery-progress-checkpoint=1*sleep(3000)");
        let mut broker = Broker::spawn(&cleanup, &held_env);
        let deadline = Instant::now() + START_LIMIT;
        while !broker.output().contains(ABNORMAL_LOG) {
            assert!(
                Instant::now() < deadline && broker.poll_exit().is_none(),
                "no abnormal start began: {}",
                broker.tail(20)
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        broker.signal(libc::SIGTERM);
        let during = !broker.output().contains("broker started");
        assert!(
            during,
            "the signal came after the start: {}",
            broker.tail(20)
        );
        let stopping = next_notification(&sock, &broker);
        assert_eq!(
            stopping.trim_end(),
            "STOPPING=1",
            "SIGTERM during recovery is answered with STOPPING=1, not READY=1"
        );
        broker.stop_cleanly();
        let broker = Broker::start(&cleanup, &env);
        assert_normal_start(&broker);
        eprintln!(
            "{NAME}: seed {seed}, {acked} acked before the kill, all served after READY=1; a \
             SIGTERM during recovery stopped cleanly"
        );
    });
}

/// T5(e): an `abort` file left behind after a clean stop selects abnormal recovery, which must
/// serve everything and let new sends continue at the next offsets.
#[test]
fn leftover_abort_file_takes_abnormal_recovery_and_serves_everything() {
    let name = "leftover_abort_file_takes_abnormal_recovery_and_serves_everything";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        let seed = seed_for(name);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root);
        let rt = runtime();
        let mut ledger = Ledger::default();

        let mut broker = Broker::start(&cleanup, &env);
        let results = rt.block_on(load(&broker.addr, "before", rng.next_u64(), async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            true
        }));
        ledger.record_all(results);

        broker.stop_cleanly();

        // As RocketMQ 4.9 writes it: an empty file.
        std::fs::write(root.join("abort"), b"").expect("create abort by hand");
        let mut broker = Broker::start(&cleanup, &env);
        assert_abnormal_start(&broker);
        // No boot id in the file: the machine may have gone down (RocketMQ's recovery).
        assert!(
            broker.output().contains("previous_run=\"crashed\""),
            "{}",
            broker.tail(20)
        );
        rt.block_on(verify(&broker.addr, &ledger, "after a leftover abort file"));
        let results = rt.block_on(load(&broker.addr, "after", rng.next_u64(), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            true
        }));
        assert!(ledger.record_all(results) > 0);
        let wire = rt.block_on(verify(&broker.addr, &ledger, "after new sends"));
        broker.stop_cleanly();
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
    });
}

/// A config file of `root` (`<root>/config/<name>`).
fn config_file(root: &Path, name: &str) -> PathBuf {
    root.join("config").join(name)
}

/// The queue counts of `topic` and the committed offset of `group` on `topic` queue 3, as the
/// broker at `addr` answers GET_ALL_TOPIC_CONFIG and QUERY_CONSUMER_OFFSET.
async fn topic_queues_and_offset(addr: &str, topic: &str, group: &str) -> (String, i64) {
    let client = RemotingClient::connect(addr).await.expect("connect");
    let r = client
        .invoke(
            RemotingCommand::new_request(rq::GET_ALL_TOPIC_CONFIG),
            RPC_TIMEOUT,
        )
        .await
        .expect("GET_ALL_TOPIC_CONFIG answered");
    assert_eq!(
        r.code,
        rc::SUCCESS,
        "GET_ALL_TOPIC_CONFIG: {}",
        describe(&r)
    );
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("topic table JSON");
    let t = &v["topicConfigTable"][topic];
    let queues = match t.is_null() {
        true => "no such topic".to_string(),
        false => format!("{}/{}", t["readQueueNums"], t["writeQueueNums"]),
    };
    let r = client
        .invoke(query_offset_request(group, topic, 3), RPC_TIMEOUT)
        .await
        .expect("QUERY_CONSUMER_OFFSET answered");
    let offset = match r.code {
        rc::SUCCESS => r.ext("offset").and_then(|o| o.parse().ok()).unwrap_or(-2),
        _ => -1,
    };
    (queues, offset)
}

/// RocketMQ keeps `<file>.bak` beside each config file and loads it when the file is missing,
/// empty or damaged. A torn `topics.json` and a garbled `consumerOffset.json` (a disk that lied
/// about a flush, a bad copy of the store) must not lose the topics or the committed offsets: the
/// broker starts from the backups, says so naming the files, and moves the damaged ones aside.
/// With the backup damaged too it refuses to start, naming both, and changes nothing.
#[test]
fn damaged_config_files_fall_back_to_their_backups() {
    let name = "damaged_config_files_fall_back_to_their_backups";
    bounded(name, Duration::from_secs(120), move |cleanup| {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root);
        let rt = runtime();
        let (topic, group) = ("BackedUpTopic", "backed-up-group");

        let mut broker = Broker::start(&cleanup, &env);
        rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let create = create_topic(topic, 8);
            let r = client.invoke(create, RPC_TIMEOUT).await.expect("create");
            assert_eq!(r.code, rc::SUCCESS, "create {topic}: {}", describe(&r));
            let commit = commit_offset_request(group, topic, 3, 42);
            let r = client.invoke(commit, RPC_TIMEOUT).await.expect("commit");
            assert_eq!(r.code, rc::SUCCESS, "commit offset: {}", describe(&r));
        });
        broker.stop_cleanly();
        // A second run's stop writes every table again: each backup now holds the same tables.
        let mut broker = Broker::start(&cleanup, &env);
        let before = rt.block_on(topic_queues_and_offset(&broker.addr, topic, group));
        assert_eq!(before, ("8/8".to_string(), 42), "after a restart");
        broker.stop_cleanly();

        let topics = config_file(&root, "topics.json");
        let offsets = config_file(&root, "consumerOffset.json");
        for f in [&topics, &offsets] {
            assert!(
                fsutil_bak(f).exists(),
                "{} has no backup beside it",
                f.display()
            );
        }
        // A torn write: only the first half of topics.json; garbage in consumerOffset.json.
        let text = std::fs::read(&topics).expect("topics.json");
        std::fs::write(&topics, &text[..text.len() / 2]).expect("tear topics.json");
        std::fs::write(&offsets, b"\0\0\0\0 not json").expect("garble consumerOffset.json");

        let mut broker = Broker::start(&cleanup, &env);
        let after = rt.block_on(topic_queues_and_offset(&broker.addr, topic, group));
        assert_eq!(after, before, "from the backups; log:\n{}", broker.tail(30));
        let out = broker.output();
        for f in ["topics.json", "consumerOffset.json"] {
            assert!(
                out.lines().any(|l| l.contains("ERROR")
                    && l.contains("config file is empty or does not parse")
                    && l.contains(&format!("{f}.bak"))),
                "no ERROR naming {f} and its backup; log:\n{}",
                broker.tail(30)
            );
            let aside = config_file(&root, &format!("{f}.corrupt"));
            assert!(aside.exists(), "{} was not kept", aside.display());
        }
        broker.stop_cleanly();
        let after_stop = std::fs::read_to_string(&topics).expect("topics.json rewritten at stop");
        assert!(after_stop.contains(topic), "{after_stop}");

        // Both damaged: a refused start that names both files and moves nothing.
        std::fs::write(&topics, b"{\"topicConfigTable\":").expect("damage topics.json");
        std::fs::write(fsutil_bak(&topics), b"{").expect("damage topics.json.bak");
        let mut broker = Broker::spawn(&cleanup, &env);
        let st = broker.wait_exit(START_LIMIT).unwrap_or_else(|| {
            panic!(
                "a broker with no usable topics.json is still running; output:\n{}",
                broker.output()
            )
        });
        let out = broker.output();
        assert!(!st.success(), "exit {st}; output:\n{out}");
        assert!(
            out.contains(topics.to_str().unwrap())
                && out.contains(fsutil_bak(&topics).to_str().unwrap())
                && out.contains("is not usable either"),
            "the refusal must name topics.json and its backup; output:\n{out}"
        );
        assert_eq!(
            std::fs::read(&topics).expect("topics.json left in place"),
            b"{\"topicConfigTable\":"
        );
    });
}

/// `<file>.bak`.
fn fsutil_bak(f: &Path) -> PathBuf {
    PathBuf::from(format!("{}.bak", f.display()))
}

/// Newest file of `consumequeue/<TOPIC>/<q>/`.
fn last_cq_file(root: &Path, q: i32) -> PathBuf {
    let dir = root.join("consumequeue").join(TOPIC).join(q.to_string());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    files
        .pop()
        .unwrap_or_else(|| panic!("{}: no file", dir.display()))
}

fn cq_file_names(root: &Path, q: i32) -> Vec<String> {
    let dir = root.join("consumequeue").join(TOPIC).join(q.to_string());
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// T5(d): a clean stop, the newest ConsumeQueue file of two queues deleted (one of them its only
/// file) and a middle one of a third, a start: the queues are rebuilt from the CommitLog with the
/// same offsets and messages, and new sends continue at the next offset.
#[test]
fn deleted_last_or_middle_consume_queue_file_is_rebuilt_with_the_same_offsets() {
    let name = "deleted_last_or_middle_consume_queue_file_is_rebuilt_with_the_same_offsets";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        // 100 units per ConsumeQueue file.
        let cq_size = 100 * 20;
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root).set("MAPPEDFILESIZECONSUMEQUEUE", &cq_size.to_string());
        let rt = runtime();
        let mut ledger = Ledger::default();
        let counts = [250usize, 230, 30, 120];

        let mut broker = Broker::start(&cleanup, &env);
        let before = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            // Interleaved, so each queue's records are spread over the CommitLog.
            for round in 0..10 {
                for (q, n) in counts.iter().enumerate() {
                    send_n(
                        &client,
                        &mut ledger,
                        &format!("r{round}"),
                        q as i32,
                        n / 10,
                        100,
                    )
                    .await;
                }
            }
            verify(&broker.addr, &ledger, "before the deletion").await
        });
        broker.stop_cleanly();
        let names_before: Vec<_> = (0..QUEUES).map(|q| cq_file_names(&root, q)).collect();
        assert_eq!(
            names_before[0].len(),
            3,
            "queue 0 spans 3 ConsumeQueue files"
        );
        assert_eq!(
            names_before[2].len(),
            1,
            "queue 2 has a single ConsumeQueue file"
        );
        assert_eq!(
            names_before[1].len(),
            3,
            "queue 1 spans 3 ConsumeQueue files"
        );
        for q in [0, 2] {
            let f = last_cq_file(&root, q);
            std::fs::remove_file(&f).expect("delete the last ConsumeQueue file");
            eprintln!("deleted {}", f.display());
        }
        // Queue 1's middle file: the queue must not stop at the gap, nor refuse the start.
        let middle = root
            .join("consumequeue")
            .join(TOPIC)
            .join("1")
            .join(&names_before[1][1]);
        std::fs::remove_file(&middle).expect("delete a middle ConsumeQueue file");
        eprintln!("deleted {}", middle.display());

        let mut broker = Broker::start(&cleanup, &env);
        assert_not_abnormal_start(&broker);
        assert!(
            broker.output().contains("dispatching CommitLog records"),
            "the start must re-dispatch what the deleted files indexed; its log:\n{}",
            broker.output()
        );
        let after = rt.block_on(verify(&broker.addr, &ledger, "after the deletion"));
        assert_eq!(
            after, before,
            "the rebuilt queues differ from the originals"
        );
        // New sends continue at the next offsets.
        rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            for (q, n) in counts.iter().enumerate() {
                let mut l = Ledger::default();
                send_n(&client, &mut l, "new", q as i32, 10, 100).await;
                let mut offsets: Vec<u64> = l.acked.values().map(|a| a.offset).collect();
                offsets.sort_unstable();
                assert_eq!(
                    offsets,
                    (*n as u64..*n as u64 + 10).collect::<Vec<_>>(),
                    "q{q}: new sends must continue at offset {n}"
                );
                for (k, a) in l.acked {
                    ledger.sent.insert(k.clone());
                    ledger.slots.insert((a.queue, a.offset), k.clone());
                    ledger.acked.insert(k, a);
                }
            }
        });
        let wire = rt.block_on(verify(&broker.addr, &ledger, "after new sends"));
        broker.stop_cleanly();
        let names_after: Vec<_> = (0..QUEUES).map(|q| cq_file_names(&root, q)).collect();
        assert_eq!(
            names_after, names_before,
            "the deleted ConsumeQueue files are recreated under their names"
        );
        assert_offline_matches(&root, cq_size, &wire);
    });
}

/// T5(d), the far case: the lost ConsumeQueue file indexes records that lie in a CommitLog file
/// older than the three newest, which normal recovery does not re-scan. The queue must still be
/// rebuilt (here: found shorter than the persisted queue table says), never silently shortened
/// so that new sends reuse acknowledged offsets.
#[test]
fn consume_queue_file_lost_behind_the_last_three_commitlog_files_is_rebuilt() {
    let name = "consume_queue_file_lost_behind_the_last_three_commitlog_files_is_rebuilt";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        let cq_size = 100 * 20;
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root).set("MAPPEDFILESIZECONSUMEQUEUE", &cq_size.to_string());
        let rt = runtime();
        let mut ledger = Ledger::default();

        let mut broker = Broker::start(&cleanup, &env);
        let before = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            // Queue 0: 150 small messages, all in CommitLog file 0; ConsumeQueue files 0 and 1.
            send_n(&client, &mut ledger, "early", 0, 150, 100).await;
            // Queue 1: about 18 MiB of big messages, so the CommitLog has 5 files.
            send_n(&client, &mut ledger, "bulk", 1, 300, 60_000).await;
            verify(&broker.addr, &ledger, "before the deletion").await
        });
        broker.stop_cleanly();
        let cl_files = std::fs::read_dir(root.join("commitlog"))
            .expect("commitlog")
            .count();
        assert!(
            cl_files >= 5,
            "the CommitLog has {cl_files} files, expected at least 5"
        );
        let f = last_cq_file(&root, 0);
        std::fs::remove_file(&f).expect("delete the last ConsumeQueue file of queue 0");
        eprintln!("deleted {}", f.display());

        let mut broker = Broker::start(&cleanup, &env);
        let max0 = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            max_offset(&client, 0).await
        });
        assert_eq!(
            max0, 150,
            "queue 0 is served with max offset {max0} instead of 150 after losing its ConsumeQueue \
             file 00000000000000002000: the records of offsets 100..150 (CommitLog file 0) are not \
             re-dispatched, and the next SEND to queue 0 is acknowledged at offset {max0} again"
        );
        let after = rt.block_on(verify(&broker.addr, &ledger, "after the deletion"));
        assert_eq!(
            after, before,
            "the rebuilt queues differ from the originals"
        );
        rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let r = client
                .invoke(
                    send_with_key(TOPIC, 0, body_of(&key("late", 10))),
                    RPC_TIMEOUT,
                )
                .await
                .expect("SEND answered");
            assert_eq!(r.code, rc::SUCCESS, "{}", describe(&r));
            assert_eq!(r.ext("queueOffset"), Some("150"), "{}", describe(&r));
        });
        broker.stop_cleanly();
    });
}

/// A second broker process pointed at a store in use is refused with a message saying so, exits
/// non-zero, and does not disturb the first, which keeps serving.
#[test]
fn second_broker_on_the_same_store_is_refused_and_the_first_keeps_serving() {
    let name = "second_broker_on_the_same_store_is_refused_and_the_first_keeps_serving";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root);
        let rt = runtime();
        let mut ledger = Ledger::default();

        let mut first = Broker::start(&cleanup, &env);
        rt.block_on(async {
            let client = RemotingClient::connect(&first.addr).await.expect("connect");
            for q in 0..QUEUES {
                send_n(&client, &mut ledger, "first", q, 20, 500).await;
            }
        });
        let mut second = Broker::spawn(&cleanup, &env);
        let st = second.wait_exit(START_LIMIT).unwrap_or_else(|| {
            panic!(
                "the second broker is still running on a store in use; its output:\n{}",
                second.output()
            )
        });
        let out = second.output();
        eprintln!("second broker: {st}; output:\n{out}");
        assert!(
            !st.success(),
            "the second broker must exit non-zero, got {st}; output:\n{out}"
        );
        assert!(
            out.contains("in use") && out.contains(root.to_str().unwrap()),
            "the refusal must say the store directory {} is in use; output:\n{out}",
            root.display()
        );
        assert!(
            !out.contains("broker started"),
            "the second broker must not start; output:\n{out}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("abort"))
                .expect("abort file of the first")
                .lines()
                .next(),
            Some(&*first.pid.to_string()),
            "the abort file still names the first broker"
        );
        assert!(first.poll_exit().is_none(), "the first broker died");
        rt.block_on(async {
            verify(&first.addr, &ledger, "first broker after the refusal").await;
            let client = RemotingClient::connect(&first.addr).await.expect("connect");
            for q in 0..QUEUES {
                send_n(&client, &mut ledger, "after", q, 10, 500).await;
            }
        });
        let wire = rt.block_on(verify(&first.addr, &ledger, "first broker, new sends"));
        first.stop_cleanly();
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
    });
}

/// T14: SIGTERM while 4 producers send, a random 200–500 ms after the first acknowledgement:
/// exit code 0 within the limit, `broker stopped cleanly`, the abort file gone. With `strict`,
/// the stopped store's ConsumeQueues must already cover every CommitLog record (checked offline
/// before the restart) and the next start must have nothing to re-dispatch; without it, the next
/// start must take the normal path (no abnormal recovery). Either way it must serve every
/// acknowledged message.
fn sigterm_under_load(name: &'static str, strict: bool) {
    bounded(name, Duration::from_secs(90), move |cleanup| {
        let seed = seed_for(name);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let env = BrokerEnv::new(&root);
        let rt = runtime();
        let mut ledger = Ledger::default();

        let mut broker = Broker::start(&cleanup, &env);
        let pid = broker.pid;
        let delay = Duration::from_millis(rng.range(200, 500));
        let results = rt.block_on(load(&broker.addr, "term", rng.next_u64(), async move {
            tokio::time::sleep(delay).await;
            // SAFETY: kill(2) on our running, unreaped child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            false
        }));
        let acked = ledger.record_all(results);
        let st = broker.wait_exit(STOP_LIMIT).unwrap_or_else(|| {
            panic!(
                "no exit within {STOP_LIMIT:?} of SIGTERM; tail:\n{}",
                broker.tail(40)
            )
        });
        assert_eq!(
            st.code(),
            Some(0),
            "exit status {st}; tail:\n{}",
            broker.tail(40)
        );
        assert!(broker.output().contains("broker stopped cleanly"));
        assert_no_abort_file(&root);
        eprintln!(
            "SIGTERM after {delay:?}: {acked} acked, {} without reply, error codes {:?} (e.g. \
             {:?})",
            ledger.no_reply, ledger.codes, ledger.samples
        );
        if strict {
            // The clean stop itself must leave ConsumeQueues that index the whole CommitLog.
            offline_check(&root, CQ_FILE_SIZE);
        }

        let started = Instant::now();
        let mut broker = Broker::start(&cleanup, &env);
        eprintln!("normal start took {:?}", started.elapsed());
        if strict {
            assert_normal_start(&broker);
        } else {
            assert_not_abnormal_start(&broker);
        }
        let wire = rt.block_on(verify(&broker.addr, &ledger, "after SIGTERM under load"));
        broker.stop_cleanly();
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
    });
}

#[test]
fn sigterm_under_load_stops_cleanly_and_loses_nothing() {
    sigterm_under_load("sigterm_under_load_stops_cleanly_and_loses_nothing", false);
}

/// The strict half of T14: a clean stop completes what it acknowledged, so the next start takes
/// the normal path with nothing to re-dispatch (no "abnormal" anywhere in its log).
#[test]
fn sigterm_under_load_leaves_consume_queues_complete() {
    sigterm_under_load("sigterm_under_load_leaves_consume_queues_complete", true);
}

// ---------------------------------------------------------------------------------------------
// Disk full
// ---------------------------------------------------------------------------------------------

/// A small file system the test owns, unmounted on drop.
struct SmallFs {
    mnt: PathBuf,
    kind: &'static str,
    cleanup: Arc<Cleanup>,
}

impl SmallFs {
    /// tmpfs of `mib` MiB at `dir/mnt`, else a loop-mounted ext4 image; `Err` says why neither.
    fn mount(cleanup: &Arc<Cleanup>, dir: &Path, mib: u64) -> Result<SmallFs, String> {
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
        let run = |cmd: &mut Command| -> Result<(), String> {
            let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{cmd:?}: {} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        let tmpfs = run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={mib}m"))
            .arg("tmpfs")
            .arg(&mnt));
        let kind = match tmpfs {
            Ok(()) => "tmpfs",
            Err(e1) => {
                let img = dir.join("fs.img");
                let ext4 = std::fs::File::create(&img)
                    .and_then(|f| f.set_len(mib * 1024 * 1024))
                    .map_err(|e| e.to_string())
                    .and_then(|()| run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img)))
                    .and_then(|()| {
                        run(Command::new("mount")
                            .args(["-o", "loop"])
                            .arg(&img)
                            .arg(&mnt))
                    });
                match ext4 {
                    Ok(()) => "ext4 on a loop device",
                    Err(e2) => return Err(format!("tmpfs: {e1}; loop ext4: {e2}")),
                }
            }
        };
        cleanup.add_mount(&mnt);
        Ok(SmallFs {
            mnt,
            kind,
            cleanup: cleanup.clone(),
        })
    }
}

/// Unmounts `mnt` (lazily if it is busy) and forgets it in `cleanup`.
fn unmount(cleanup: &Cleanup, mnt: &Path) {
    let ok = Command::new("umount")
        .arg(mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let _ = Command::new("umount").arg("-l").arg(mnt).status();
    }
    cleanup.remove_mount(mnt);
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        unmount(&self.cleanup, &self.mnt);
    }
}

fn statvfs(path: &Path) -> libc::statvfs {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("path without NUL");
    // SAFETY: an all-zero statvfs is a valid value for this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a pointer to a live, writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    assert_eq!(
        rc,
        0,
        "statvfs {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    st
}

/// Used percentage of the file system holding `path`, computed as the broker does (`df`).
fn used_pct(path: &Path) -> f64 {
    let st = statvfs(path);
    let used = (st.f_blocks - st.f_bfree) as f64;
    let avail = st.f_bavail as f64;
    100.0 * used / (used + avail)
}

/// Size of the file system holding `path`, in bytes.
fn fs_bytes(path: &Path) -> u64 {
    let st = statvfs(path);
    st.f_blocks * st.f_frsize
}

/// Bytes available to us on the file system holding `path`.
fn fs_avail(path: &Path) -> u64 {
    let st = statvfs(path);
    st.f_bavail * st.f_frsize
}

/// T10: on a 64 MiB file system with 4 MiB CommitLog files, `diskSpaceWarningLevelRatio` 50 and
/// `diskSpaceCleanForciblyRatio` 45, a filler file brings usage just under the limit; sends then go
/// on until the next CommitLog file pushes usage over it. (The broker measures usage at most every
/// 500 ms, so a fast producer writes a few files past the limit before the refusal: the file
/// system leaves room for that, or the refusal would come from a real ENOSPC instead.) The
/// refusal must be SERVICE_NOT_AVAILABLE (14) with a remark naming the cause, the path, the usage and the limit;
/// the broker stays up and serves everything acknowledged; deleting the filler lets sends succeed
/// again without a restart, at the next queue offsets (refused sends stored nothing).
#[test]
#[ignore = "needs root: mounts a size-limited file system (tmpfs, else ext4 on a loop device)"]
fn disk_full_refuses_sends_with_service_not_available_and_recovers_when_space_returns() {
    let name = "disk_full_refuses_sends_with_service_not_available_and_recovers_when_space_returns";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        const FS_MIB: u64 = 64;
        const WARN: u32 = 50;
        const CLEAR: u32 = 45;
        let dir = tempfile::tempdir().expect("temp dir");
        let fs = match SmallFs::mount(&cleanup, dir.path(), FS_MIB) {
            Ok(fs) => fs,
            Err(why) => panic!("{name}: cannot create a size-limited file system: {why}"),
        };
        eprintln!(
            "{name}: store on a {FS_MIB} MiB {} at {}",
            fs.kind,
            fs.mnt.display()
        );
        let root = fs.mnt.join("store");
        let env = BrokerEnv::new(&root)
            // About refusals, not retention: forcible cleaning would delete what the test reads back.
            .set("CLEANFILEFORCIBLYENABLE", "false")
            .set("DISKSPACEWARNINGLEVELRATIO", &WARN.to_string())
            .set("DISKSPACECLEANFORCIBLYRATIO", &CLEAR.to_string());
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut broker = Broker::start(&cleanup, &env);

        // Fill to 5 points under the limit: the next CommitLog file (6.25 %) crosses it, and there
        // is still room for several more files before the file system is really full.
        let total = fs_bytes(&fs.mnt);
        let used0 = used_pct(&fs.mnt);
        let target = f64::from(WARN) - 5.0;
        assert!(
            used0 < target,
            "the fresh store already uses {used0:.1}% of the file system"
        );
        let filler_bytes = ((target - used0) / 100.0 * total as f64) as usize / 4096 * 4096;
        let filler = fs.mnt.join("filler");
        std::fs::write(&filler, vec![0x5Au8; filler_bytes]).expect("write the filler");
        let used1 = used_pct(&fs.mnt);
        eprintln!("usage: fresh store {used0:.1}%, with a {filler_bytes} B filler {used1:.1}%");
        assert!(
            used1 < f64::from(WARN),
            "the filler alone crosses the limit"
        );

        const BODY: u64 = 16 * 1024;
        let (refusal, refused_at) = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let started = Instant::now();
            let mut n = 0;
            loop {
                let k = key(&format!("fill-{n}"), BODY);
                n += 1;
                let r = client
                    .invoke(send_with_key(TOPIC, 0, body_of(&k)), RPC_TIMEOUT)
                    .await
                    .unwrap_or_else(|e| panic!("SEND {k} got no reply (did the broker die?): {e}"));
                if r.code == rc::SUCCESS {
                    ledger.record(k, 0, outcome(Ok(r)));
                } else {
                    ledger.sent.insert(k.clone());
                    ledger.refused.insert(k);
                    break (r, used_pct(&fs.mnt));
                }
                assert!(
                    started.elapsed() < Duration::from_secs(40),
                    "no refusal after {n} sends; usage {:.1}%",
                    used_pct(&fs.mnt)
                );
            }
        });
        let remark = refusal.remark.clone().unwrap_or_default();
        eprintln!(
            "refused after {} acknowledged sends at {refused_at:.1}% used: code {} remark {remark:?}",
            ledger.acked.len(),
            refusal.code
        );
        assert_eq!(
            refusal.code,
            rc::SERVICE_NOT_AVAILABLE,
            "a full disk must answer SERVICE_NOT_AVAILABLE: {}",
            describe(&refusal)
        );
        assert!(
            remark.contains("disk full")
                && remark.contains(&fs.mnt.to_string_lossy().to_string())
                && remark.contains('%')
                && remark.contains(&WARN.to_string()),
            "the remark must name the cause, the path, the usage and the limit: {remark:?}"
        );
        assert!(
            broker.poll_exit().is_none(),
            "the broker died on a full disk"
        );

        rt.block_on(async {
            // Still refused while full, and still serving reads.
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let k = key("still-full", 10);
            let r = client
                .invoke(send_with_key(TOPIC, 1, body_of(&k)), RPC_TIMEOUT)
                .await
                .expect("SEND answered");
            assert_eq!(r.code, rc::SERVICE_NOT_AVAILABLE, "{}", describe(&r));
            ledger.sent.insert(k.clone());
            ledger.refused.insert(k);
            verify(&broker.addr, &ledger, "while the disk is full").await;

            std::fs::remove_file(&filler).expect("delete the filler");
            eprintln!("filler deleted: usage {:.1}%", used_pct(&fs.mnt));
            let waited = sends_resume(&client, &mut ledger, 20, 1000, || {
                format!("{:.1}% used", used_pct(&fs.mnt))
            })
            .await;
            eprintln!("accepted again after {waited:?}");
        });
        let wire = rt.block_on(verify(&broker.addr, &ledger, "after space returned"));
        broker.stop_cleanly();
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
        drop(broker);
        drop(fs);
    });
}

/// T10, the hard case: the usage limit is off (`diskSpaceWarningLevelRatio` 100) and the file
/// system really runs out of space when the writer needs its next CommitLog file. CommitLog files
/// are fully allocated before they are mapped, so this must be a clean refusal
/// (SERVICE_NOT_AVAILABLE naming the cause), never a SIGBUS; everything acknowledged stays
/// readable and sends succeed again once space is freed, without a restart.
#[test]
#[ignore = "needs root: mounts a size-limited file system (tmpfs, else ext4 on a loop device)"]
fn physically_full_disk_refuses_sends_without_crashing_and_recovers() {
    let name = "physically_full_disk_refuses_sends_without_crashing_and_recovers";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        const FS_MIB: u64 = 32;
        let dir = tempfile::tempdir().expect("temp dir");
        let fs = match SmallFs::mount(&cleanup, dir.path(), FS_MIB) {
            Ok(fs) => fs,
            Err(why) => panic!("{name}: cannot create a size-limited file system: {why}"),
        };
        let root = fs.mnt.join("store");
        let env = BrokerEnv::new(&root)
            // About refusals, not retention: forcible cleaning would delete what the test reads back.
            .set("CLEANFILEFORCIBLYENABLE", "false")
            .set("DISKSPACEWARNINGLEVELRATIO", "100")
            .set("DISKSPACECLEANFORCIBLYRATIO", "100");
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut broker = Broker::start(&cleanup, &env);

        // Leave room for one more CommitLog file and a little metadata, not for two.
        let avail = fs_avail(&fs.mnt);
        let leave = CL_FILE_SIZE + CL_FILE_SIZE / 2;
        assert!(avail > leave, "only {avail} B free on a fresh store");
        let filler = fs.mnt.join("filler");
        std::fs::write(&filler, vec![0x5Au8; (avail - leave) as usize]).expect("write the filler");
        eprintln!("{name}: {} B free after the filler", fs_avail(&fs.mnt));

        const BODY: u64 = 16 * 1024;
        let refusal = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let started = Instant::now();
            let mut n = 0;
            loop {
                let k = key(&format!("fill-{n}"), BODY);
                n += 1;
                let reply = client
                    .invoke(send_with_key(TOPIC, 0, body_of(&k)), RPC_TIMEOUT)
                    .await;
                match reply {
                    Ok(r) if r.code == rc::SUCCESS => ledger.record(k, 0, outcome(Ok(r))),
                    Ok(r) => {
                        ledger.sent.insert(k.clone());
                        ledger.refused.insert(k);
                        break r;
                    }
                    Err(e) => panic!("SEND {k} got no reply (did the broker die?): {e}"),
                }
                assert!(
                    started.elapsed() < Duration::from_secs(40),
                    "no refusal after {n} sends; {} B free",
                    fs_avail(&fs.mnt)
                );
            }
        });
        eprintln!(
            "{name}: refused after {} acknowledged sends with {} B free: {}",
            ledger.acked.len(),
            fs_avail(&fs.mnt),
            describe(&refusal)
        );
        assert!(
            broker.poll_exit().is_none(),
            "the broker died on a full disk:\n{}",
            broker.tail(30)
        );
        assert_eq!(
            refusal.code,
            rc::SERVICE_NOT_AVAILABLE,
            "a full disk must answer SERVICE_NOT_AVAILABLE: {}",
            describe(&refusal)
        );
        rt.block_on(async {
            verify(&broker.addr, &ledger, "while the disk is full").await;
            std::fs::remove_file(&filler).expect("delete the filler");
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            sends_resume(&client, &mut ledger, 300, BODY, || {
                format!("broker log tail:\n{}", broker.tail(30))
            })
            .await;
        });
        let wire = rt.block_on(verify(&broker.addr, &ledger, "after space returned"));
        broker.stop_cleanly();
        assert_offline_matches(&root, CQ_FILE_SIZE, &wire);
        drop(broker);
        drop(fs);
    });
}

/// Sends `body`-sized messages round the queues `queues` until one is refused (recorded as sent
/// and refused) or `bound` passes (a failure naming `what`); returns the refusal.
async fn send_until_refused(
    client: &RemotingClient,
    ledger: &mut Ledger,
    queues: &[i32],
    body: u64,
    bound: Duration,
    what: impl Fn() -> String,
) -> RemotingCommand {
    let started = Instant::now();
    let mut n = 0;
    loop {
        let q = queues[n % queues.len()];
        let k = key(&format!("fill-{n}"), body);
        n += 1;
        let r = client
            .invoke(send_with_key(TOPIC, q, body_of(&k)), RPC_TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("SEND {k} got no reply (did the broker die?): {e}"));
        if r.code == rc::SUCCESS {
            ledger.record(k, q, outcome(Ok(r)));
        } else {
            ledger.sent.insert(k.clone());
            ledger.refused.insert(k);
            return r;
        }
        assert!(
            started.elapsed() < bound,
            "no refusal after {n} sends: {}",
            what()
        );
    }
}

/// Fills the file system holding `dir` to the last block with `dir/filler` (no space is left for
/// even one more small file); returns the filler's path.
fn fill_up(dir: &Path) -> PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).expect("create the filler");
    let chunk = vec![0x5Au8; 64 * 1024];
    let mut small = false;
    loop {
        let piece = if small { &chunk[..4096] } else { &chunk[..] };
        match f.write(piece) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && !small => small = true,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", filler.display()),
        }
    }
    let _ = f.sync_all();
    filler
}

/// T10 with the CommitLog on another disk (`storePathCommitLog`), as RocketMQ users put it on a
/// faster one: the ConsumeQueues' disk (`storePathRootDir`) runs out of space, with the usage
/// limit off, when a queue needs its first ConsumeQueue file. The CommitLog still has room, so the
/// append succeeds, but no consumer could see it: the broker must then refuse sends with
/// SERVICE_NOT_AVAILABLE and a remark saying that dispatch fails and why (the ENOSPC and the
/// queue), instead of acknowledging messages nobody can consume. Once space returns, dispatch
/// resumes without a restart, every acknowledged message becomes readable, and sends succeed.
#[test]
#[ignore = "needs root: mounts a size-limited file system (tmpfs, else ext4 on a loop device)"]
fn full_consume_queue_disk_refuses_sends_until_dispatch_resumes() {
    let name = "full_consume_queue_disk_refuses_sends_until_dispatch_resumes";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        let dir = tempfile::tempdir().expect("temp dir");
        let fs = match SmallFs::mount(&cleanup, dir.path(), 16) {
            Ok(fs) => fs,
            Err(why) => panic!("{name}: cannot create a size-limited file system: {why}"),
        };
        let root = fs.mnt.join("store");
        let cl_dir = dir.path().join("commitlog");
        let env = BrokerEnv::new(&root)
            // About refusals, not retention: forcible cleaning would delete what the test reads back.
            .set("CLEANFILEFORCIBLYENABLE", "false")
            .set(
                "STOREPATHCOMMITLOG",
                cl_dir.to_str().expect("UTF-8 temp path"),
            )
            .set("DISKSPACEWARNINGLEVELRATIO", "100")
            .set("DISKSPACECLEANFORCIBLYRATIO", "100");
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut broker = Broker::start(&cleanup, &env);
        rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            // The topic, queue 0's ConsumeQueue file and the index file exist before the disk
            // fills; queues 1-3 have no ConsumeQueue file yet.
            send_n(&client, &mut ledger, "before", 0, 5, 100).await;
            verify(&broker.addr, &ledger, "before the disk filled").await;
        });
        let filler = fill_up(&fs.mnt);
        eprintln!(
            "{name}: {} ({}) filled, {} B free",
            fs.mnt.display(),
            fs.kind,
            fs_avail(&fs.mnt)
        );
        let refusal = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            send_until_refused(
                &client,
                &mut ledger,
                &[1, 2, 3],
                100,
                Duration::from_secs(20),
                || format!("broker log tail:\n{}", broker.tail(20)),
            )
            .await
        });
        let remark = refusal.remark.clone().unwrap_or_default();
        eprintln!(
            "{name}: refused after {} acknowledged sends: code {} remark {remark:?}",
            ledger.acked.len(),
            refusal.code
        );
        assert!(
            broker.poll_exit().is_none(),
            "the broker died on a full disk:\n{}",
            broker.tail(30)
        );
        assert_eq!(
            refusal.code,
            rc::SERVICE_NOT_AVAILABLE,
            "{}",
            describe(&refusal)
        );
        assert!(
            remark.contains("dispatch to the ConsumeQueues and the index is failing")
                && remark.contains("No space left on device")
                && remark.contains(&format!("{}/consumequeue/{TOPIC}/", root.display())),
            "the remark must say that dispatch fails, at which file and why: {remark:?}"
        );
        rt.block_on(async {
            std::fs::remove_file(&filler).expect("delete the filler");
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let waited = sends_resume(&client, &mut ledger, 20, 100, || {
                format!("broker log tail:\n{}", broker.tail(20))
            })
            .await;
            eprintln!("{name}: accepted again after {waited:?}");
        });
        // Every acknowledged message, those whose dispatch failed included, is readable now.
        rt.block_on(verify(&broker.addr, &ledger, "after space returned"));
        // The reput thread logs `dispatch resumed` after it accepts writes again; the line may
        // still be on its way through the pipe.
        let logged = |b: &Broker| {
            let log = b.output();
            log.contains("dispatch failed; will retry") && log.contains("dispatch resumed")
        };
        let deadline = Instant::now() + WAIT_LIMIT;
        while !logged(&broker) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            logged(&broker),
            "the failing stretch is logged, and its end:\n{}",
            broker.tail(30)
        );
        broker.stop_cleanly();
        drop(broker);
        drop(fs);
    });
}

/// `diskSpaceWarningLevelRatio` watches the ConsumeQueues' disk as well as the CommitLog's (as
/// RocketMQ does): with the CommitLog on its own disk (`storePathCommitLog`) that has room, a
/// root disk over the limit refuses sends with a remark naming that disk, and space there again
/// accepts them without a restart.
#[test]
#[ignore = "needs root: mounts a size-limited file system (tmpfs, else ext4 on a loop device)"]
fn consume_queue_disk_over_the_usage_limit_refuses_sends_naming_it() {
    let name = "consume_queue_disk_over_the_usage_limit_refuses_sends_naming_it";
    bounded(name, Duration::from_secs(90), move |cleanup| {
        const WARN: u32 = 50;
        let (cl_tmp, root_tmp) = (
            tempfile::tempdir().expect("temp dir"),
            tempfile::tempdir().expect("temp dir"),
        );
        let mount = |d: &Path| SmallFs::mount(&cleanup, d, 32);
        let (cl_fs, root_fs) = match (mount(cl_tmp.path()), mount(root_tmp.path())) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(why), _) | (_, Err(why)) => {
                panic!("{name}: cannot create a size-limited file system: {why}")
            }
        };
        let root = root_fs.mnt.join("store");
        let env = BrokerEnv::new(&root)
            // About refusals, not retention: forcible cleaning would delete what the test reads back.
            .set("CLEANFILEFORCIBLYENABLE", "false")
            .set(
                "STOREPATHCOMMITLOG",
                cl_fs.mnt.join("commitlog").to_str().expect("UTF-8 path"),
            )
            .set("DISKSPACEWARNINGLEVELRATIO", &WARN.to_string())
            .set("DISKSPACECLEANFORCIBLYRATIO", "45");
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut broker = Broker::start(&cleanup, &env);
        rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            send_n(&client, &mut ledger, "before", 0, 5, 100).await;
        });
        // Over the limit on the root disk only.
        let total = fs_bytes(&root_fs.mnt);
        let need = ((f64::from(WARN) + 10.0 - used_pct(&root_fs.mnt)) / 100.0 * total as f64)
            as usize
            / 4096
            * 4096;
        let filler = root_fs.mnt.join("filler");
        std::fs::write(&filler, vec![0x5Au8; need]).expect("write the filler");
        eprintln!(
            "{name}: root disk {:.1}% used, CommitLog disk {:.1}%",
            used_pct(&root_fs.mnt),
            used_pct(&cl_fs.mnt)
        );
        let refusal = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            send_until_refused(
                &client,
                &mut ledger,
                &[0],
                100,
                Duration::from_secs(20),
                || format!("broker log tail:\n{}", broker.tail(20)),
            )
            .await
        });
        let remark = refusal.remark.clone().unwrap_or_default();
        eprintln!("{name}: code {} remark {remark:?}", refusal.code);
        assert_eq!(
            refusal.code,
            rc::SERVICE_NOT_AVAILABLE,
            "{}",
            describe(&refusal)
        );
        let cq_path = root.join("consumequeue");
        assert!(
            remark.contains("disk full")
                && remark.contains(&format!("{} (ConsumeQueue files)", cq_path.display()))
                && remark.contains(&format!("diskSpaceWarningLevelRatio {WARN}%")),
            "the remark must name the ConsumeQueue disk, its usage and the limit: {remark:?}"
        );
        rt.block_on(async {
            std::fs::remove_file(&filler).expect("delete the filler");
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            sends_resume(&client, &mut ledger, 20, 100, || {
                format!("{:.1}% used", used_pct(&root_fs.mnt))
            })
            .await;
        });
        rt.block_on(verify(&broker.addr, &ledger, "after space returned"));
        broker.stop_cleanly();
        drop(broker);
        drop((cl_fs, root_fs));
    });
}

// ---------------------------------------------------------------------------------------------
// Power loss
// ---------------------------------------------------------------------------------------------

/// Size of a [`LoopDisk`] (a sparse image: only what is written takes space): room for the
/// loads of a test — the delayed-message one writes every message twice — below the broker's
/// 90 % disk-space limit.
const DISK_MIB: u64 = 768;

/// What the broker logs when the abort file was written on another boot (a machine crash).
const CRASHED_LOG: &str = "previous_run=\"crashed\"";

/// The store's disk in the power-loss tests: ext4 on a loop device over an image file the test
/// owns. The image file holds what the file system has handed to the device; what sits only in
/// the page cache of the mounted file system (dirty data pages, metadata not yet written) is not
/// in it. A copy of the image taken while the broker is frozen is what a power loss at that
/// moment leaves, in a model where the device keeps every write it completed (no volatile disk
/// cache). Mounted `data=writeback,commit=60`: file data reaches the device only by an fsync or
/// page write-back, and the journal commits at an fsync or after 60 s, so nothing becomes
/// durable early on the journal's account (`data=ordered` would write newly allocated data at
/// every commit). A copy is mounted as a boot would mount it: the journal is replayed (or, on
/// [`Fs::NoJournal`], the copy is repaired with `e2fsck -fy` first).
///
/// With [`Cache::Volatile`] the device also has a volatile write cache: the loop device sits on
/// the image as a [`VolatileDisk`] serves it, and a copy keeps of what was written since the
/// device's last cache flush only a seeded random part (see [`PowerLossRig::cut_power`]).
struct LoopDisk {
    /// The image file on the real disk.
    img: PathBuf,
    mnt: PathBuf,
    fs: Fs,
    cleanup: Arc<Cleanup>,
    /// The cache model the loop device writes through ([`Cache::Volatile`]); `Drop::drop` takes
    /// it out and unmounts it after the file system.
    volatile: Option<(VolatileDisk, PathBuf)>,
}

/// The write cache of a [`LoopDisk`]'s device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cache {
    /// Every write the device completed survives a power loss.
    Kept,
    /// Writes since the device's last cache flush may be lost, each 4 KiB block on its own
    /// ([`VolatileDisk`]).
    Volatile,
}

/// The file system of a [`LoopDisk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fs {
    /// ext4 with a journal, mounted `data=writeback,commit=60`.
    Journaled,
    /// ext4 without a journal, as this machine's root file system: no journal commit makes a
    /// directory entry or a file size durable along with another file's `fsync`, so each must be
    /// synced by whoever depends on it.
    NoJournal,
}

/// Runs `cmd`; panics with its stderr if it fails.
fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{cmd:?}: {e} (the power-loss tests need root and loop devices)")
    });
    assert!(
        out.status.success(),
        "{cmd:?}: {} {} (the power-loss tests need root and loop devices)",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

impl LoopDisk {
    /// A new, empty file system of [`DISK_MIB`] in the image `img`, mounted at `mnt`.
    fn create(cleanup: &Arc<Cleanup>, img: &Path, mnt: &Path, fs: Fs, cache: Cache) -> LoopDisk {
        std::fs::File::create(img)
            .and_then(|f| f.set_len(DISK_MIB * 1024 * 1024))
            .unwrap_or_else(|e| panic!("create {}: {e}", img.display()));
        let mut mkfs = Command::new("mkfs.ext4");
        mkfs.args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]);
        if fs == Fs::NoJournal {
            mkfs.args(["-O", "^has_journal"]);
        }
        run_ok(mkfs.arg(img));
        LoopDisk::mount(cleanup, img, mnt, fs, cache)
    }

    /// Mounts the image `img` at `mnt`; a [`Fs::NoJournal`] image is first checked and repaired
    /// with `e2fsck -fy`, as a boot after a crash would (a clean image passes unchanged).
    fn mount(cleanup: &Arc<Cleanup>, img: &Path, mnt: &Path, fs: Fs, cache: Cache) -> LoopDisk {
        std::fs::create_dir_all(mnt).expect("mount point");
        let options = match fs {
            Fs::Journaled => "loop,data=writeback,commit=60",
            Fs::NoJournal => {
                let out = Command::new("e2fsck")
                    .args(["-f", "-y"])
                    .arg(img)
                    .output()
                    .expect("run e2fsck");
                // 0: clean; 1: errors corrected; 2: corrected, reboot advised (a root file
                // system). 4 and up: errors left, or e2fsck failed.
                assert!(
                    out.status.code().is_some_and(|c| c <= 2),
                    "e2fsck {}: {}\n{}",
                    img.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stdout)
                );
                "loop"
            }
        };
        // The image as it is now (checked, repaired) is what the device holds durably.
        let volatile = (cache == Cache::Volatile).then(|| {
            let at = img.with_extension("fuse");
            let disk = VolatileDisk::mount(img, &at)
                .unwrap_or_else(|e| panic!("serve {} over FUSE: {e}", img.display()));
            cleanup.add_mount(&at);
            cleanup.add_fuse(disk.connection());
            (disk, at)
        });
        let device = match &volatile {
            Some((disk, _)) => disk.image(),
            None => img.to_path_buf(),
        };
        run_ok(
            Command::new("mount")
                .args(["-o", options])
                .arg(&device)
                .arg(mnt),
        );
        cleanup.add_mount(mnt);
        LoopDisk {
            img: img.to_path_buf(),
            mnt: mnt.to_path_buf(),
            fs,
            cleanup: cleanup.clone(),
            volatile,
        }
    }

    /// Copies the image as the device holds it now to `to`: the disk after a power loss now.
    /// First waits (at most 2 s) until the loop device has no request in flight, so write-back
    /// submitted before the broker froze (its `sync_file_range`) has landed rather than landing
    /// during the copy. Write-back the kernel starts during the copy itself (pages dirty for
    /// 30 s, or memory pressure) can still mix into it; the tests keep their data young and
    /// small, and such a write only makes the copy keep more.
    ///
    /// A volatile disk is copied by [`VolatileDisk::lose_power`] instead, at once.
    fn power_loss_copy(&self, to: &Path) {
        if let Some(dev) = loop_device_of(&self.mnt) {
            let inflight = format!("/sys/block/{dev}/inflight");
            let deadline = Instant::now() + Duration::from_secs(2);
            while std::fs::read_to_string(&inflight)
                .is_ok_and(|s| s.split_whitespace().any(|n| n != "0"))
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        run_ok(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(&self.img)
                .arg(to),
        );
    }

    /// The cache model under the file system, with [`Cache::Volatile`].
    fn volatile(&self) -> Option<&VolatileDisk> {
        self.volatile.as_ref().map(|(disk, _)| disk)
    }
}

/// The loop device (`loopN`) mounted at `mnt`, from `/proc/mounts`.
fn loop_device_of(mnt: &Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    let mnt = mnt.to_str()?;
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (dev, at) = (f.next()?, f.next()?);
        if at == mnt {
            dev.strip_prefix("/dev/").map(str::to_string)
        } else {
            None
        }
    })
}

/// Why the power-loss tests cannot run here, if they cannot: they mount loop devices, which
/// needs root and `/dev/loop-control`. They are skipped then, loudly, as the disk-full tests are.
fn power_loss_unavailable(cache: Cache) -> Option<String> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: mounting a loop device needs it".to_string());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control".to_string());
    }
    if cache == Cache::Volatile && !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse: the volatile disk is served over FUSE".to_string());
    }
    if cache == Cache::Volatile && !Path::new("/sys/fs/fuse/connections").is_dir() {
        return Some(
            "no /sys/fs/fuse/connections: a timed-out test could not abort its FUSE server"
                .to_string(),
        );
    }
    None
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        unmount(&self.cleanup, &self.mnt);
        if let Some((disk, at)) = self.volatile.take() {
            self.cleanup.remove_fuse(disk.connection());
            drop(disk);
            self.cleanup.remove_mount(&at);
        }
    }
}

/// SIGSTOPs `pid` and waits (at most [`WAIT_LIMIT`]) until every thread of it has stopped. A
/// thread inside a system call (an `fdatasync`, a `pwrite`) stops only once the call returns, so
/// afterwards no call of the broker is under way (write-back it only started, by
/// `sync_file_range`, may be: [`LoopDisk::power_loss_copy`] waits for the device to go idle),
/// and every reply it has sent was sent before this returned. Returns the moment all threads
/// were stopped.
fn freeze(pid: i32) -> Instant {
    // SAFETY: kill(2) on our own child, not reaped yet (the caller holds its `Broker`).
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    wait_for_threads(pid, &["T", "t"])
}

/// Waits (at most [`WAIT_LIMIT`]) until every thread of `pid` is in one of the `/proc` states
/// `states`; returns the moment they were.
fn wait_for_threads(pid: i32, states: &[&str]) -> Instant {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/<pid>/task");
        let running: Vec<String> = tasks
            .filter_map(|t| {
                let stat = std::fs::read_to_string(t.ok()?.path().join("stat")).ok()?;
                // "tid (comm) S ...": the state follows the last ')' (comm may hold anything).
                let end = stat.rfind(')')? + 1;
                let state = stat[end..].split_whitespace().next()?;
                (!states.contains(&state)).then(|| stat[..end].to_string())
            })
            .collect();
        if running.is_empty() {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "threads of {pid} still not in {states:?} {WAIT_LIMIT:?} after SIGSTOP: {running:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What a reboot changes for the next start: the kernel's boot id. The abort file holds the boot
/// id of the start that wrote it; giving it another one makes the next start see a machine crash,
/// as it would after a real power loss.
fn as_if_rebooted(root: &Path) {
    let abort = root.join("abort");
    let text = std::fs::read_to_string(&abort).expect("the abort file survived the power loss");
    let pid = text.lines().next().unwrap_or("0");
    std::fs::write(
        &abort,
        format!("{pid}\nboot_id=00000000-0000-4000-8000-0000000000ff\n"),
    )
    .expect("rewrite the abort file");
}

/// The disk of a power-loss test and the images it goes through: `dir/disk-<n>.img`, mounted at
/// `dir/mnt`, so the store's path stays the same across power losses.
struct PowerLossRig {
    /// The test's, for the report.
    name: String,
    dir: PathBuf,
    mnt: PathBuf,
    disk: Option<LoopDisk>,
    images: usize,
    cleanup: Arc<Cleanup>,
    cache: Cache,
    /// [`Cache::Volatile`]: decides which cached blocks each power loss keeps.
    coin: Rng,
    /// [`Cache::Volatile`]: what each power loss kept and lost of the device's cache.
    losses: Vec<CacheLoss>,
    /// The temp dir holding the images; dropped after `disk` is unmounted (fields drop in order).
    _tmp: tempfile::TempDir,
}

impl Drop for PowerLossRig {
    fn drop(&mut self) {
        if self.cache == Cache::Volatile {
            eprintln!(
                "{}: the device's volatile cache at each power loss: {:?}",
                self.name, self.losses
            );
        }
    }
}

impl PowerLossRig {
    /// What every power-loss test starts with: the rig on a new temp dir, the test's seed and a
    /// generator from it. Panics, saying why, where loop devices cannot be mounted: these tests
    /// are `#[ignore]`d with what they need, and run explicitly where it is there (`.ci/run`).
    fn for_test(cleanup: &Arc<Cleanup>, name: &str, fs: Fs) -> (PowerLossRig, u64, Rng) {
        PowerLossRig::for_test_with(cleanup, name, fs, Cache::Kept)
    }

    /// [`PowerLossRig::for_test`] on a device with the given write cache.
    fn for_test_with(
        cleanup: &Arc<Cleanup>,
        name: &str,
        fs: Fs,
        cache: Cache,
    ) -> (PowerLossRig, u64, Rng) {
        if let Some(why) = power_loss_unavailable(cache) {
            panic!("{name}: cannot run here: {why}");
        }
        let seed = seed_for(name);
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        let mnt = dir.join("mnt");
        let disk = LoopDisk::create(cleanup, &dir.join("disk-0.img"), &mnt, fs, cache);
        let rig = PowerLossRig {
            name: name.to_string(),
            dir,
            mnt,
            disk: Some(disk),
            images: 1,
            cleanup: cleanup.clone(),
            cache,
            // Its own stream, so the test's own choices stay what they were for a seed.
            coin: Rng::new(seed ^ 0x5EED_CAC4E),
            losses: Vec::new(),
            _tmp: tmp,
        };
        (rig, seed, Rng::new(seed))
    }

    fn root(&self) -> PathBuf {
        self.mnt.join("store")
    }

    /// Freezes `pid` and copies the disk as it is then (the next image); returns the moment of the
    /// freeze. The caller kills the frozen process, then calls [`PowerLossRig::boot`].
    ///
    /// With a volatile cache the power goes first, at once, and the broker is frozen after (it
    /// sees every request fail meanwhile); the moment returned is the power loss. One power loss
    /// in three loses every block written since the last cache flush; the others keep, lose or
    /// tear (at a random sector) each such block, a third of the time each.
    fn cut_power(&mut self, pid: i32) -> Instant {
        let next = self.dir.join(format!("disk-{}.img", self.images));
        let disk = self.disk.as_ref().expect("a mounted disk");
        let Some(volatile) = disk.volatile() else {
            let at = freeze(pid);
            disk.power_loss_copy(&next);
            return at;
        };
        let coin = &mut self.coin;
        let lose_all = coin.below(3) == 0;
        let fate = || match coin.below(3) {
            _ if lose_all => Fate::Lost,
            0 => Fate::Kept,
            1 => Fate::Lost,
            _ => Fate::Torn(1 + coin.below(7) as usize),
        };
        let at = Instant::now();
        // The stop is sent while the dead device still holds every request, and the lock is let
        // go only once each thread has stopped or waits in the kernel (on the device, say): by
        // then the stop is pending on all of them, so a call the device now fails returns to a
        // thread that stops before it runs again. The broker never acts on the failures (no
        // read-only turn, no SIGBUS of a failed page fault to die of).
        let loss = volatile
            .lose_power(&next, fate, || {
                // SAFETY: kill(2) on our own child, not reaped yet (the caller holds its `Broker`).
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                wait_for_threads(pid, &["T", "t", "D"]);
            })
            .unwrap_or_else(|e| panic!("copy the volatile disk to {}: {e}", next.display()));
        wait_for_threads(pid, &["T", "t"]);
        // The model is wired: the file system's flushes reach it.
        assert!(
            loss.flushes > 0,
            "no cache flush reached the volatile disk since it was mounted: {loss:?}"
        );
        self.losses.push(loss);
        at
    }

    /// After the frozen broker is gone: unmounts the disk, deletes its image and mounts the copy
    /// [`PowerLossRig::cut_power`] made in its place, its abort file marked as from another boot.
    fn boot(&mut self) {
        let old = self.disk.take().expect("a mounted disk");
        let (old_img, fs) = (old.img.clone(), old.fs);
        drop(old);
        let _ = std::fs::remove_file(old_img);
        let img = self.dir.join(format!("disk-{}.img", self.images));
        self.images += 1;
        self.disk = Some(LoopDisk::mount(
            &self.cleanup,
            &img,
            &self.mnt,
            fs,
            self.cache,
        ));
        as_if_rebooted(&self.root());
    }
}

/// Starts a broker on the disk after [`PowerLossRig::boot`] and checks it took the machine-crash
/// path.
fn start_after_power_loss(cleanup: &Arc<Cleanup>, env: &BrokerEnv, what: &str) -> Broker {
    let broker = Broker::start(cleanup, env);
    assert_abnormal_start(&broker);
    assert!(
        broker.output().contains(CRASHED_LOG),
        "{what}: a start after a power loss must take the machine-crash path ({CRASHED_LOG}):\n{}",
        broker.tail(30)
    );
    broker
}

/// Power losses under load: [`POWER_LOSSES`] times, 4 producers load the broker, and a random
/// moment later the disk is cut as a power loss would leave it (see [`LoopDisk`]); the broker
/// starts on that disk, and `check` judges what it serves against the ledger. `settings` are
/// `ACTORMQ_<key>` values of the broker. Returns the seed and the per-cycle (acknowledged, lost)
/// counts.
#[allow(clippy::too_many_arguments)]
fn power_loss_cycles(
    name: &'static str,
    cleanup: &Arc<Cleanup>,
    fs: Fs,
    cache: Cache,
    settings: &[(&str, &str)],
    delay_ms: (u64, u64),
    mut check: impl FnMut(&tokio::runtime::Runtime, &Broker, &mut Ledger, Instant, usize) -> usize,
) -> (u64, Vec<(usize, usize)>) {
    let (mut rig, seed, mut rng) = PowerLossRig::for_test_with(cleanup, name, fs, cache);
    let root = rig.root();
    let mut env = BrokerEnv::new(&root);
    for (k, v) in settings {
        env = env.set(k, v);
    }
    let rt = runtime();
    let mut ledger = Ledger::default();
    let mut broker = Broker::start(cleanup, &env);
    let mut report = Vec::new();
    for cycle in 0..POWER_LOSSES {
        let delay = Duration::from_millis(rng.range(delay_ms.0, delay_ms.1));
        let pid = broker.pid;
        let mut cut_at = None;
        let results = rt.block_on(load(
            &broker.addr,
            &format!("p{cycle}"),
            rng.next_u64(),
            async {
                tokio::time::sleep(delay).await;
                cut_at = Some(rig.cut_power(pid));
                // SAFETY: kill(2) on our frozen, unreaped child: the power is off.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                false
            },
        ));
        let cut_at = cut_at.expect("the power was cut");
        let acked = ledger.record_all(results);
        let st = broker
            .wait_exit(WAIT_LIMIT)
            .expect("the broker exits after SIGKILL");
        assert_eq!(st.signal(), Some(libc::SIGKILL), "cycle {cycle}: {st}");
        drop(broker);
        rig.boot();
        broker = start_after_power_loss(cleanup, &env, &format!("{name} cycle {cycle}"));
        let lost = check(&rt, &broker, &mut ledger, cut_at, cycle);
        report.push((acked, lost));
    }
    let wire = rt.block_on(verify(&broker.addr, &ledger, name));
    broker.stop_cleanly();
    assert_offline_counts(&root, CQ_FILE_SIZE, &wire);
    if settings.contains(&("MESSAGEINDEXSAFE", "true")) {
        // RocketMQ's promise for `messageIndexSafe`: recovery starts early enough for the index
        // too, so a machine crash loses no key.
        assert_keys_indexed(&root, &wire);
    }
    drop(broker);
    drop(rig);
    (seed, report)
}

/// Power losses of [`power_loss_cycles`] per test.
const POWER_LOSSES: usize = 6;

/// SYNC_FLUSH on a real file system: it promises that an acknowledged message is on the
/// device, so a power loss — unlike kill -9, it takes the page cache with it — must lose nothing
/// acknowledged. [`POWER_LOSSES`] power losses under load, each at a random 0.3–1.5 s after the
/// first acknowledgement; after each, the broker on the disk the loss left must serve every
/// acknowledged message at its queue offset, with no phantom and no gap.
fn power_loss_loses_nothing_acknowledged(
    name: &'static str,
    fs: Fs,
    cache: Cache,
    settings: &'static [(&str, &str)],
) {
    bounded(name, Duration::from_secs(170), move |cleanup| {
        let (seed, report) = power_loss_cycles(
            name,
            &cleanup,
            fs,
            cache,
            settings,
            (300, 1500),
            |rt, broker, ledger, _, cycle| {
                rt.block_on(verify(
                    &broker.addr,
                    ledger,
                    &format!("{name} cycle {cycle}"),
                ));
                0
            },
        );
        eprintln!("{name}: seed {seed}; (acknowledged, lost) per power loss: {report:?}");
    });
}

#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_under_sync_flush_loses_no_acknowledged_message() {
    power_loss_loses_nothing_acknowledged(
        "power_loss_under_sync_flush_loses_no_acknowledged_message",
        Fs::Journaled,
        Cache::Kept,
        &[("FLUSHDISKTYPE", "SYNC_FLUSH")],
    );
}

/// The same on ext4 without a journal, as this machine's root file system: a new CommitLog,
/// ConsumeQueue or index file, and a config file's rename, survive only if their inode and
/// directory are synced; the copy is repaired by `e2fsck` before the next start, as at a boot.
/// With `messageIndexSafe`, so that after the last power loss every stored message must also be
/// found by its key in the index files (offline), as RocketMQ promises for that setting.
#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_without_a_journal_under_sync_flush_loses_no_acknowledged_message() {
    power_loss_loses_nothing_acknowledged(
        "power_loss_without_a_journal_under_sync_flush_loses_no_acknowledged_message",
        Fs::NoJournal,
        Cache::Kept,
        &[
            ("FLUSHDISKTYPE", "SYNC_FLUSH"),
            ("MESSAGEINDEXSAFE", "true"),
        ],
    );
}

/// The timeout path's way out ([`Cleanup::emergency`]): an aborted FUSE connection fails every
/// request at once, so nothing waiting on the volatile disk can hang this process's exit.
#[test]
#[ignore = "needs root, loop devices and FUSE (/dev/fuse, /sys/fs/fuse/connections)"]
fn an_aborted_volatile_disk_fails_every_request() {
    if let Some(why) = power_loss_unavailable(Cache::Volatile) {
        panic!("an_aborted_volatile_disk_fails_every_request: cannot run here: {why}");
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let backing = tmp.path().join("backing.img");
    std::fs::write(&backing, vec![7u8; 8192]).expect("backing file");
    let disk = VolatileDisk::mount(&backing, &tmp.path().join("fuse")).expect("serve over FUSE");
    let mut buf = [0u8; 16];
    let image = std::fs::File::open(disk.image()).expect("open the image");
    use std::os::unix::fs::FileExt;
    image.read_exact_at(&mut buf, 4096).expect("read it");
    assert_eq!(buf, [7u8; 16]);
    volatile_disk::abort_connection(disk.connection());
    let err = std::fs::OpenOptions::new()
        .write(true)
        .open(disk.image())
        .and_then(|f| f.write_all_at(&buf, 0))
        .expect_err("no request goes through an aborted connection");
    assert_eq!(
        err.raw_os_error(),
        Some(libc::ENOTCONN),
        "an aborted connection's error: {err}"
    );
    drop(image);
    drop(disk);
}

/// SYNC_FLUSH on a device with a volatile write cache ([`VolatileDisk`]): what the device took
/// since its last cache flush may or may not survive, block by block, so an acknowledgement is
/// only as good as the flushes behind it — the `fdatasync` of the group commit, the syncs of a
/// new file's inode and directory, and whatever recovery relies on (the checkpoint, the
/// ConsumeQueues, the abort file) having been flushed before it, or being rebuilt when it was
/// not. Blocks the file system wrote but never flushed go back to their old content in any
/// combination, which the kept-cache model never does. On ext4 with a journal, whose commits
/// flush the device before and after the commit block.
#[test]
#[ignore = "needs root, loop devices and FUSE (/dev/fuse, /sys/fs/fuse/connections)"]
fn power_loss_with_a_volatile_disk_cache_under_sync_flush_loses_no_acknowledged_message() {
    power_loss_loses_nothing_acknowledged(
        "power_loss_with_a_volatile_disk_cache_under_sync_flush_loses_no_acknowledged_message",
        Fs::Journaled,
        Cache::Volatile,
        &[("FLUSHDISKTYPE", "SYNC_FLUSH")],
    );
}

/// The same without a journal (this machine's root file system): every metadata block of a new
/// file or directory entry is durable only through the syncs the broker asks for, and `e2fsck`
/// repairs whatever else the lost cache left half-written. With `messageIndexSafe`, so the index
/// files must also hold every stored message's key after the last power loss.
#[test]
#[ignore = "needs root, loop devices and FUSE (/dev/fuse, /sys/fs/fuse/connections)"]
fn power_loss_with_a_volatile_disk_cache_and_no_journal_under_sync_flush_loses_no_acknowledged_message(
) {
    power_loss_loses_nothing_acknowledged(
        "power_loss_with_a_volatile_disk_cache_and_no_journal_under_sync_flush_loses_no_acknowledged_message",
        Fs::NoJournal,
        Cache::Volatile,
        &[
            ("FLUSHDISKTYPE", "SYNC_FLUSH"),
            ("MESSAGEINDEXSAFE", "true"),
        ],
    );
}

/// SYNC_FLUSH with write buffers (two, and 512 KiB CommitLog files, so buffers are recycled): a
/// message is acknowledged after the group committer's `pwrite` and `fdatasync`.
#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_under_sync_flush_with_write_buffers_loses_no_acknowledged_message() {
    power_loss_loses_nothing_acknowledged(
        "power_loss_under_sync_flush_with_write_buffers_loses_no_acknowledged_message",
        Fs::Journaled,
        Cache::Kept,
        &[
            ("FLUSHDISKTYPE", "SYNC_FLUSH"),
            ("TRANSIENTSTOREPOOLENABLE", "true"),
            ("TRANSIENTSTOREPOOLSIZE", "2"),
            ("MAPPEDFILESIZECOMMITLOG", "524288"),
        ],
    );
}

/// The same on a device with a volatile write cache ([`VolatileDisk`]): the group committer's
/// `pwrite` of a buffer reaches the device only with the `fdatasync` after it.
#[test]
#[ignore = "needs root, loop devices and FUSE (/dev/fuse, /sys/fs/fuse/connections)"]
fn power_loss_with_a_volatile_disk_cache_under_sync_flush_with_write_buffers_loses_no_acknowledged_message(
) {
    power_loss_loses_nothing_acknowledged(
        "power_loss_with_a_volatile_disk_cache_under_sync_flush_with_write_buffers_loses_no_acknowledged_message",
        Fs::Journaled,
        Cache::Volatile,
        &[
            ("FLUSHDISKTYPE", "SYNC_FLUSH"),
            ("TRANSIENTSTOREPOOLENABLE", "true"),
            ("TRANSIENTSTOREPOOLSIZE", "2"),
            ("MAPPEDFILESIZECOMMITLOG", "524288"),
        ],
    );
}

/// Slack on top of the flush (and commit) intervals for ASYNC_FLUSH's loss window: the flush
/// that follows an append may start up to one interval later and takes its own time, on a loop
/// device over a shared disk.
const ASYNC_SLACK: Duration = Duration::from_millis(1500);

/// ASYNC_FLUSH on a real file system: under it a power loss may lose acknowledged
/// messages, but only those of the last `window` (the flush interval, plus the commit interval
/// with write buffers, plus [`ASYNC_SLACK`]) before it, and in every queue the lost ones form a
/// suffix (nothing present after a hole). Everything older — flushed CommitLog, and
/// ConsumeQueue units the checkpoint counts as flushed — must be served. Loads of 2–3.5 s, so
/// each cut has acknowledgements older than the window.
fn power_loss_loses_only_the_window(
    name: &'static str,
    cache: Cache,
    settings: &'static [(&str, &str)],
    window: Duration,
) {
    bounded(name, Duration::from_secs(170), move |cleanup| {
        let mut oldest = Vec::new();
        let (seed, report) = power_loss_cycles(
            name,
            &cleanup,
            Fs::Journaled,
            cache,
            settings,
            (2000, 3500),
            |rt, broker, ledger, cut_at, cycle| {
                let (lost, old) = rt.block_on(settle_losses(
                    &broker.addr,
                    ledger,
                    cut_at,
                    window,
                    &format!("{name} cycle {cycle}"),
                ));
                oldest.push(old.map(|d| d.as_millis()));
                lost.len()
            },
        );
        eprintln!(
            "{name}: seed {seed}; per power loss (acknowledged, lost): {report:?}; oldest lost \
             acknowledgement before the cut, ms: {oldest:?}"
        );
    });
}

#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_under_async_flush_loses_only_the_last_flush_interval() {
    power_loss_loses_only_the_window(
        "power_loss_under_async_flush_loses_only_the_last_flush_interval",
        Cache::Kept,
        &[("FLUSHDISKTYPE", "ASYNC_FLUSH")],
        Duration::from_millis(500) + ASYNC_SLACK,
    );
}

/// The same on a device with a volatile write cache ([`VolatileDisk`]): what the flusher's
/// `fdatasync` covered is on the media, what it did not may be lost or torn block by block —
/// ConsumeQueue and index pages the kernel wrote back on its own too — and recovery must still
/// serve everything older than the window, with no hole.
#[test]
#[ignore = "needs root, loop devices and FUSE (/dev/fuse, /sys/fs/fuse/connections)"]
fn power_loss_with_a_volatile_disk_cache_under_async_flush_loses_only_the_last_flush_interval() {
    power_loss_loses_only_the_window(
        "power_loss_with_a_volatile_disk_cache_under_async_flush_loses_only_the_last_flush_interval",
        Cache::Volatile,
        &[("FLUSHDISKTYPE", "ASYNC_FLUSH")],
        Duration::from_millis(500) + ASYNC_SLACK,
    );
}

/// With write buffers (two, 1 MiB CommitLog files): SEND_OK means written into a buffer, so the
/// window adds `commitIntervalCommitLog` (200 ms) to the flush interval.
#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_under_async_flush_with_write_buffers_loses_only_the_last_intervals() {
    power_loss_loses_only_the_window(
        "power_loss_under_async_flush_with_write_buffers_loses_only_the_last_intervals",
        Cache::Kept,
        &[
            ("FLUSHDISKTYPE", "ASYNC_FLUSH"),
            ("TRANSIENTSTOREPOOLENABLE", "true"),
            ("TRANSIENTSTOREPOOLSIZE", "2"),
            ("MAPPEDFILESIZECOMMITLOG", "1048576"),
        ],
        Duration::from_millis(200 + 500) + ASYNC_SLACK,
    );
}

/// The address of the broker's `/metrics` endpoint, from its `broker started` line.
fn metrics_addr(broker: &Broker) -> String {
    let deadline = Instant::now() + START_LIMIT;
    loop {
        let found = broker.lines.lock().unwrap().iter().find_map(|l| {
            let l = l.split_once("broker started")?.1;
            let at = l.find(" metrics=")? + " metrics=".len();
            Some(l[at..].split_whitespace().next()?.to_string())
        });
        if let Some(addr) = found {
            return addr;
        }
        assert!(
            Instant::now() < deadline,
            "no `metrics=` in a `broker started` line; output:\n{}",
            broker.tail(30)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The value of the unlabelled-or-single series `name` on `GET /metrics` at `addr`.
async fn gauge(addr: &str, name: &str) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect to /metrics at {addr}: {e}"));
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write the scrape");
    let mut page = String::new();
    tokio::time::timeout(RPC_TIMEOUT, s.read_to_string(&mut page))
        .await
        .expect("the scrape answered in time")
        .expect("read the scrape");
    let values: Vec<f64> = page
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(values.len(), 1, "one {name} series expected in:\n{page}");
    values[0]
}

/// Cuts of the gauge test until this many lost something, at most [`GAUGE_CUTS_MAX`]. A cut
/// loses nothing only if a flush ran, whole, between the scrape and the cut (1 of 12 cuts in
/// the first runs), so six such in a row would mean the test no longer tests.
const GAUGE_CUTS_WITH_LOSS: usize = 3;
const GAUGE_CUTS_MAX: usize = 6;

/// The flush-behind gauge against a power loss: `rocketmq_storage_flush_behind_bytes` is what
/// an operator reads as "what a power loss would take now", so it must never be below it. Until three cuts lost
/// something (see [`GAUGE_CUTS_WITH_LOSS`]): a timed ASYNC_FLUSH load of 0.5–1.5 s ends, the
/// gauge is read, and the power is cut at once (no write comes in between, so what is unflushed
/// can only shrink after the scrape). The acknowledged messages lost — at least their bodies'
/// bytes, a lower bound of their records' — must fit in what the gauge showed.
#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_under_async_flush_loses_no_more_than_the_flush_behind_gauge() {
    const NAME: &str = "power_loss_under_async_flush_loses_no_more_than_the_flush_behind_gauge";
    bounded(NAME, Duration::from_secs(170), move |cleanup| {
        let (mut rig, seed, mut rng) = PowerLossRig::for_test(&cleanup, NAME, Fs::Journaled);
        let env = BrokerEnv::new(&rig.root()).set("FLUSHDISKTYPE", "ASYNC_FLUSH");
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut broker = Broker::start(&cleanup, &env);
        // (acknowledged, flush-behind bytes read, lost, their body bytes) per cut.
        let mut report: Vec<(usize, u64, usize, usize)> = Vec::new();
        for cycle in 0..GAUGE_CUTS_MAX {
            if report.iter().filter(|r| r.2 > 0).count() >= GAUGE_CUTS_WITH_LOSS {
                break;
            }
            let load_ms = rng.range(500, 1500);
            let results = rt.block_on(load(
                &broker.addr,
                &format!("g{cycle}"),
                rng.next_u64(),
                async move {
                    tokio::time::sleep(Duration::from_millis(load_ms)).await;
                    true
                },
            ));
            let acked = ledger.record_all(results);
            let behind = rt.block_on(gauge(
                &metrics_addr(&broker),
                "rocketmq_storage_flush_behind_bytes",
            ));
            let pid = broker.pid;
            let cut_at = rig.cut_power(pid);
            // SAFETY: kill(2) on our frozen, unreaped child: the power is off.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            broker
                .wait_exit(WAIT_LIMIT)
                .expect("the broker exits after SIGKILL");
            drop(broker);
            rig.boot();
            broker = start_after_power_loss(&cleanup, &env, &format!("{NAME} cycle {cycle}"));
            let (lost, _) = rt.block_on(settle_losses(
                &broker.addr,
                &mut ledger,
                cut_at,
                Duration::from_millis(500) + ASYNC_SLACK,
                &format!("{NAME} cycle {cycle}"),
            ));
            let lost_bytes: usize = lost.iter().map(|k| body_of(k).len()).sum();
            assert!(
                lost_bytes as f64 <= behind,
                "cycle {cycle}: {} acknowledged messages lost, at least {lost_bytes} bytes, but \
                 rocketmq_storage_flush_behind_bytes read {behind} just before the cut",
                lost.len()
            );
            report.push((acked, behind as u64, lost.len(), lost_bytes));
        }
        broker.stop_cleanly();
        eprintln!(
            "{NAME}: seed {seed}; per cut (acknowledged, flush-behind bytes read, lost, their \
             body bytes): {report:?}"
        );
        assert!(
            report.iter().any(|r| r.2 > 0),
            "no cut of {GAUGE_CUTS_MAX} lost anything: the gauge was never put to the test \
             ({report:?})"
        );
    });
}

/// T6 against a power loss: what a recovering start counts in its progress checkpoints must be
/// on the device. An early load goes to queues 0 and 1 only; 4 s later a 5 s load goes to queues
/// 2 and 3 and is cut by kill -9 (its last acknowledgements only in the page cache). Then the
/// checkpoint is zeroed, and the ConsumeQueues of queues 0 and 1 and the queue table are deleted
/// (a store RocketMQ wrote has no table): the next start must scan every file and rebuild those
/// two ConsumeQueues, in the page cache. A fail point holds it right after its progress
/// checkpoint into the last CommitLog file, and the power is cut there. The start on the disk
/// that leaves scans from where that checkpoint says, a file of late records, so it never meets
/// a record of queues 0 and 1: it serves them only if their rebuilt units were synced before the
/// checkpoint counted them. Every acknowledged message of all four queues must be served.
#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_during_recovery_resumes_from_a_durable_progress_checkpoint() {
    const NAME: &str = "power_loss_during_recovery_resumes_from_a_durable_progress_checkpoint";
    bounded(NAME, Duration::from_secs(170), move |cleanup| {
        let (mut rig, seed, mut rng) = PowerLossRig::for_test(&cleanup, NAME, Fs::Journaled);
        let root = rig.root();
        let env = BrokerEnv::new(&root);
        let rt = runtime();
        let mut ledger = Ledger::default();

        let mut broker = Broker::start(&cleanup, &env);
        let early = rt.block_on(load_into(
            &broker.addr,
            "early",
            rng.next_u64(),
            0..2,
            async {
                tokio::time::sleep(Duration::from_millis(2500)).await;
                true
            },
        ));
        let mut acked = ledger.record_all(early);
        // Longer than the checkpoint's 3 s margin: progress into the late files moves the next
        // start past the early ones.
        std::thread::sleep(Duration::from_millis(4000));
        let pid = broker.pid;
        // Long enough that the checkpoint's start, 3 s before the last file's records, is a file
        // of late records only: the scan after the power loss must not meet queues 0 and 1.
        let late = rt.block_on(load_into(
            &broker.addr,
            "late",
            rng.next_u64(),
            2..4,
            async {
                tokio::time::sleep(Duration::from_millis(5000)).await;
                // SAFETY: kill(2) on our running, unreaped child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                false
            },
        ));
        acked += ledger.record_all(late);
        broker
            .wait_exit(WAIT_LIMIT)
            .expect("the broker exits after SIGKILL");
        drop(broker);
        let files = commit_log_files_with_data(&root);
        assert!(files >= 4, "the loads filled {files} CommitLog files");
        let topic_dir = root.join("consumequeue").join(TOPIC);
        for q in ["0", "1"] {
            std::fs::remove_dir_all(topic_dir.join(q)).expect("delete a ConsumeQueue");
        }
        std::fs::remove_file(root.join("config/consumeQueueMaxOffsets.json"))
            .expect("delete the queue table");
        std::fs::write(root.join("checkpoint"), vec![0u8; 4096]).expect("zero the checkpoint");
        // These changes on the device (the journal commits them with the directories); nothing
        // else is synced, so what the killed process left in the page cache stays there.
        for f in [root.join("checkpoint"), root.join("config"), topic_dir] {
            std::fs::File::open(&f)
                .and_then(|f| f.sync_all())
                .unwrap_or_else(|e| panic!("sync {}: {e}", f.display()));
        }

        let held = files - 1;
        // The ConsumeQueue flush timer set far out, so that only the progress checkpoints flush
        // the rebuilt units: what is on the device at the cut is what they made durable.
        let first_env = env.clone().set("FLUSHINTERVALCONSUMEQUEUE", "600000").var(
            "FAILPOINTS",
            &format!("recovery-progress-checkpoint={}*off->pause", held - 1),
        );
        let (mut first, last_progress) = start_held_at_progress(&cleanup, &first_env, held);
        rig.cut_power(first.pid);
        first.signal(libc::SIGKILL);
        first
            .wait_exit(WAIT_LIMIT)
            .expect("the first start exits after SIGKILL");
        let out = first.output();
        assert!(
            out.contains("same_boot=true") && !out.contains("broker started"),
            "the first start recovers from a process death and is held inside recovery:\n{out}"
        );
        assert_eq!(
            out.matches(PROGRESS).count(),
            held,
            "held at its {held}-th progress checkpoint:\n{out}"
        );
        let next_start: usize = log_number(&last_progress, "next_start_file");
        assert!(
            next_start >= 1,
            "the checkpoint moves the next start past the first of {files} files: {last_progress}"
        );
        drop(first);

        rig.boot();
        let mut broker = start_after_power_loss(&cleanup, &env, NAME);
        let recovered = log_line(&broker, "store recovered").expect("a `store recovered` line");
        let scan_from: u64 = log_number(&recovered, "scan_from");
        assert_eq!(
            scan_from,
            next_start as u64 * CL_FILE_SIZE,
            "the start after the power loss scans from file {next_start}, as the progress \
             checkpoint on the device said: {recovered}"
        );
        // And re-dispatches from there only: no queue was found short (a rebuild from earlier
        // would bring queues 0 and 1 back whatever the checkpoint's units).
        let end: u64 = log_number(&recovered, "commit_log_end");
        assert_eq!(
            log_field(&recovered, "redispatched_bytes"),
            Some((end - scan_from).to_string().as_str()),
            "re-dispatch starts at the scan's start: {recovered}"
        );
        let wire = rt.block_on(verify(&broker.addr, &ledger, NAME));
        broker.stop_cleanly();
        eprintln!(
            "{NAME}: seed {seed}, {acked} acked over {files} CommitLog files; power cut at \
             progress checkpoint {held}: {last_progress}; the start after it: {recovered}"
        );
        assert_offline_counts(&root, CQ_FILE_SIZE, &wire);
        drop(broker);
        drop(rig);
    });
}

/// Delay levels of the delayed-message power-loss test (`messageDelayLevel`): level 1 is 3 s.
const TEST_DELAY_LEVELS: &str = "3s 5s 10s";

/// Delayed messages against a power loss, under ASYNC_FLUSH: every delayed message acknowledged
/// before the loss window (`flushIntervalCommitLog` plus [`ASYNC_SLACK`]) must be delivered to
/// its topic after the power comes back — at least once. Loads of 3.5–5 s send messages of delay
/// level 1 (3 s), so deliveries run while the power is cut; `flushDelayOffsetInterval` is 100 ms,
/// so the delivery progress is persisted often. A progress file that counts deliveries the
/// CommitLog had not flushed would skip their originals for ever: RocketMQ persists it so.
#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_under_async_flush_delivers_every_delayed_message() {
    power_loss_delivers_every_delayed_message(
        "power_loss_under_async_flush_delivers_every_delayed_message",
        Cache::Kept,
    );
}

/// The same on a device with a volatile write cache ([`VolatileDisk`]): the delivery progress
/// file (`delayOffset.json`, replaced every 100 ms) and the CommitLog both lose, or tear, what
/// the device took since its last flush.
#[test]
#[ignore = "needs root, loop devices and FUSE (/dev/fuse, /sys/fs/fuse/connections)"]
fn power_loss_with_a_volatile_disk_cache_under_async_flush_delivers_every_delayed_message() {
    power_loss_delivers_every_delayed_message(
        "power_loss_with_a_volatile_disk_cache_under_async_flush_delivers_every_delayed_message",
        Cache::Volatile,
    );
}

fn power_loss_delivers_every_delayed_message(name: &'static str, cache: Cache) {
    const CUTS: usize = 4;
    bounded(name, Duration::from_secs(170), move |cleanup| {
        let (mut rig, seed, mut rng) =
            PowerLossRig::for_test_with(&cleanup, name, Fs::Journaled, cache);
        let root = rig.root();
        let env = BrokerEnv::new(&root)
            .set("FLUSHDISKTYPE", "ASYNC_FLUSH")
            .set("MESSAGEDELAYLEVEL", TEST_DELAY_LEVELS)
            .set("FLUSHDELAYOFFSETINTERVAL", "100");
        let window = Duration::from_millis(500) + ASYNC_SLACK;
        let rt = runtime();
        // Keys that must be delivered, and every key sent.
        let mut owed: BTreeMap<String, i32> = BTreeMap::new();
        let mut sent = HashSet::new();
        let mut broker = Broker::start(&cleanup, &env);
        let mut report = Vec::new();
        for cycle in 0..CUTS {
            let delay = Duration::from_millis(rng.range(3500, 5000));
            let pid = broker.pid;
            let mut cut_at = None;
            let results = rt.block_on(load_with(
                &broker.addr,
                &format!("d{cycle}"),
                rng.next_u64(),
                0..QUEUES,
                Some(1),
                async {
                    tokio::time::sleep(delay).await;
                    cut_at = Some(rig.cut_power(pid));
                    // SAFETY: kill(2) on our frozen, unreaped child: the power is off.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    false
                },
            ));
            let cut_at = cut_at.expect("the power was cut");
            let (mut acked, mut old) = (0, 0);
            for (k, q, o) in results {
                assert!(sent.insert(k.clone()), "test bug: {k} sent twice");
                if let Outcome::Code(c, remark) = &o {
                    assert!(
                        !remark.contains("disk full"),
                        "test bug: the test's disk filled up ({DISK_MIB} MiB): {k}: {c} {remark}"
                    );
                }
                if let Outcome::Acked(a) = o {
                    acked += 1;
                    if cut_at.saturating_duration_since(a.at) > window {
                        old += 1;
                        owed.insert(k, q);
                    }
                }
            }
            broker
                .wait_exit(WAIT_LIMIT)
                .expect("the broker exits after SIGKILL");
            drop(broker);
            rig.boot();
            broker = start_after_power_loss(&cleanup, &env, &format!("{name} cycle {cycle}"));
            let delivered = rt.block_on(await_deliveries(
                &broker.addr,
                &owed,
                &sent,
                &format!("{name} cycle {cycle}"),
            ));
            report.push((acked, old, delivered));
        }
        broker.stop_cleanly();
        eprintln!(
            "{name}: seed {seed}; per power loss (acknowledged, of them owed, delivered messages in \
             the topic): {report:?}"
        );
        drop(broker);
        drop(rig);
    });
}

/// Reads every queue of [`TOPIC`] until each key of `owed` is there at its queue (polling, at
/// most 20 s: delay level 1 plus the time to deliver after a start); nothing may be there that
/// was not `sent`. Returns how many messages the queues hold (duplicates allowed: at-least-once).
async fn await_deliveries(
    addr: &str,
    owed: &BTreeMap<String, i32>,
    sent: &HashSet<String>,
    what: &str,
) -> usize {
    let client = RemotingClient::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{what}: checker connects to {addr}: {e}"));
    let started = Instant::now();
    loop {
        let mut present: HashMap<String, i32> = HashMap::new();
        let mut total = 0;
        for q in 0..QUEUES {
            for p in read_queue(&client, q, 0).await {
                assert!(
                    sent.contains(&p.key),
                    "{what}: q{q}@{} holds {:?}, which was never sent (phantom)",
                    p.offset,
                    p.key
                );
                present.insert(p.key, q);
                total += 1;
            }
        }
        let missing: Vec<_> = owed
            .iter()
            .filter(|(k, q)| present.get(*k) != Some(q))
            .map(|(k, q)| format!("{k} (q{q})"))
            .collect();
        if missing.is_empty() {
            return total;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what}: {} of {} delayed messages acknowledged before the loss window never \
             delivered; first: {:?}",
            missing.len(),
            owed.len(),
            &missing[..missing.len().min(10)]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A queue that went quiet must survive a power loss (the reviewer's scenario): 50 messages go
/// to queue 0 and are acknowledged under SYNC_FLUSH — their CommitLog records are on the device —
/// then at least 6 s of load (and 6 CommitLog files of 1 MiB) go to queues 1–3 only, and the
/// power is cut. Queue 0's ConsumeQueue holds one part-filled page, which
/// `flushConsumeQueueLeastPages` (2) leaves to write-back, so its units are lost with the page
/// cache; they must be rebuilt from the CommitLog. That holds only
/// if the checkpoint's logics time never counts units that were not flushed: otherwise recovery
/// starts after queue 0's records and never sees them.
#[test]
#[ignore = "needs root and loop devices"]
fn power_loss_keeps_the_messages_of_a_queue_that_went_quiet() {
    power_loss_keeps_a_quiet_queue(
        "power_loss_keeps_the_messages_of_a_queue_that_went_quiet",
        Cache::Kept,
    );
}

/// The same on a device with a volatile write cache ([`VolatileDisk`]): the checkpoint's logics
/// time may count only ConsumeQueue units a device flush has covered, not ones merely written.
#[test]
#[ignore = "needs root, loop devices and FUSE (/dev/fuse, /sys/fs/fuse/connections)"]
fn power_loss_with_a_volatile_disk_cache_keeps_the_messages_of_a_queue_that_went_quiet() {
    power_loss_keeps_a_quiet_queue(
        "power_loss_with_a_volatile_disk_cache_keeps_the_messages_of_a_queue_that_went_quiet",
        Cache::Volatile,
    );
}

fn power_loss_keeps_a_quiet_queue(name: &'static str, cache: Cache) {
    bounded(name, Duration::from_secs(120), move |cleanup| {
        let (mut rig, seed, mut rng) =
            PowerLossRig::for_test_with(&cleanup, name, Fs::Journaled, cache);
        let root = rig.root();
        // 1 MiB CommitLog files: the load passes several, so a recovery start taken from a
        // checkpoint that counted queue 0's unflushed units would lie past its records.
        let env = BrokerEnv::new(&root)
            .set("FLUSHDISKTYPE", "SYNC_FLUSH")
            .set("MAPPEDFILESIZECOMMITLOG", "1048576");
        let rt = runtime();
        let mut ledger = Ledger::default();
        let broker = Broker::start(&cleanup, &env);
        rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            send_n(&client, &mut ledger, "quiet", 0, 50, 100).await;
        });
        let pid = broker.pid;
        let mut broker = broker;
        let results = rt.block_on(load_into(
            &broker.addr,
            "busy",
            rng.next_u64(),
            1..QUEUES,
            async {
                // At least 6 s (twice the checkpoint's 3 s margin) and 6 CommitLog files.
                let started = Instant::now();
                while started.elapsed() < Duration::from_secs(6)
                    || (commit_log_files_with_data(&root) < 6
                        && started.elapsed() < Duration::from_secs(40))
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                rig.cut_power(pid);
                // SAFETY: kill(2) on our frozen, unreaped child: the power is off.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                false
            },
        ));
        let acked = ledger.record_all(results);
        broker
            .wait_exit(WAIT_LIMIT)
            .expect("the broker exits after SIGKILL");
        drop(broker);
        rig.boot();
        let mut broker = start_after_power_loss(&cleanup, &env, name);
        let recovered = log_line(&broker, "store recovered").unwrap_or_default();
        let files = commit_log_files_with_data(&root);
        assert!(
            files >= 6,
            "the load filled {files} CommitLog files of 1 MiB"
        );
        let wire = rt.block_on(verify(&broker.addr, &ledger, name));
        broker.stop_cleanly();
        eprintln!(
            "{name}: seed {seed}; 50 to queue 0, then {acked} to queues 1-3 over {files} files; \
             {recovered}"
        );
        assert_offline_counts(&root, CQ_FILE_SIZE, &wire);
        drop(broker);
        drop(rig);
    });
}

/// Bytes of every file under `dir`, recursively.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                    _ => e.metadata().map_or(0, |m| m.len()),
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The local hour of day, as the broker's `deleteWhen` reads it.
fn local_hour() -> u32 {
    use chrono::Timelike;
    chrono::Local::now().hour()
}

fn min_offset_request(topic: &str, queue_id: i32) -> RemotingCommand {
    RemotingCommand::new_request(rq::GET_MIN_OFFSET)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id.to_string())
}

/// T10 with retention: on a 64 MiB file system with 4 MiB CommitLog files, a producer writes
/// twice the file system's size. `diskSpaceCleanForciblyRatio` 50 (with `cleanFileForciblyEnable`,
/// the default) makes the cleaner delete the oldest CommitLog files, unexpired as they are, while
/// `diskSpaceWarningLevelRatio` 70 refuses writes only if it falls behind; a refused send is
/// retried. Every send is acknowledged in the end (twice what the disk holds: files were
/// deleted), the broker stays up, and
/// a consumer reading from the queue's new min offset gets every message still stored, intact,
/// at the offset it was acknowledged with; one from offset 0 is moved to that min offset.
#[test]
#[ignore = "needs root: mounts a size-limited file system (tmpfs, else ext4 on a loop device)"]
fn retention_keeps_a_broker_on_a_small_disk_writable_and_consumers_move_to_the_min_offset() {
    let name =
        "retention_keeps_a_broker_on_a_small_disk_writable_and_consumers_move_to_the_min_offset";
    bounded(name, Duration::from_secs(120), move |cleanup| {
        const FS_MIB: u64 = 64;
        const WARN: u32 = 70;
        const FORCE: u32 = 50;
        let dir = tempfile::tempdir().expect("temp dir");
        let fs = match SmallFs::mount(&cleanup, dir.path(), FS_MIB) {
            Ok(fs) => fs,
            Err(why) => panic!("{name}: cannot create a size-limited file system: {why}"),
        };
        let root = fs.mnt.join("store");
        let env = BrokerEnv::new(&root)
            .set("DISKSPACEWARNINGLEVELRATIO", &WARN.to_string())
            .set("DISKSPACECLEANFORCIBLYRATIO", &FORCE.to_string())
            .set("CLEANRESOURCEINTERVAL", "100")
            .set("DELETECOMMITLOGFILESINTERVAL", "0")
            // Not the hour to delete (twelve hours away): only the disk rules act.
            .set("DELETEWHEN", &format!("{:02}", (local_hour() + 12) % 24));
        let rt = runtime();
        let mut ledger = Ledger::default();
        let broker = Broker::start(&cleanup, &env);
        const BODY: u64 = 16 * 1024;
        let total = 2 * FS_MIB * 1024 * 1024 / BODY;
        let (refused, max_used) = rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let (mut refused, mut max_used) = (0u32, 0f64);
            for n in 0..total {
                let started = Instant::now();
                loop {
                    let k = key(&format!("ret-{n}-{refused}"), BODY);
                    let r = client
                        .invoke(send_with_key(TOPIC, 0, body_of(&k)), RPC_TIMEOUT)
                        .await
                        .unwrap_or_else(|e| panic!("SEND {k} got no reply: {e}"));
                    max_used = max_used.max(used_pct(&fs.mnt));
                    if r.code == rc::SUCCESS {
                        ledger.record(k, 0, outcome(Ok(r)));
                        break;
                    }
                    assert_eq!(r.code, rc::SERVICE_NOT_AVAILABLE, "{}", describe(&r));
                    ledger.sent.insert(k.clone());
                    ledger.refused.insert(k);
                    refused += 1;
                    assert!(
                        started.elapsed() < Duration::from_secs(60),
                        "a send still refused after 60 s: {}\n{}",
                        describe(&r),
                        broker.tail(20)
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            (refused, max_used)
        });
        eprintln!(
            "{name}: {} sends of {BODY} B acknowledged ({} MiB through a {FS_MIB} MiB file \
             system), {refused} refused and retried, usage peaked at {max_used:.1}%",
            ledger.acked.len(),
            (ledger.acked.len() as u64 * BODY) >> 20
        );
        assert_eq!(ledger.acked.len() as u64, total);
        let deleted = broker
            .lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("deleting CommitLog file"))
            .count();
        assert!(
            deleted > 0,
            "no CommitLog file deleted:\n{}",
            broker.tail(30)
        );
        rt.block_on(async {
            let client = RemotingClient::connect(&broker.addr)
                .await
                .expect("connect");
            let max = max_offset_reaching(&client, 0, total).await;
            assert_eq!(max, total, "every acknowledged send is in the queue, and no more");
            // Cleaning goes on until usage is back under the forcible level; then, with no more
            // writes, nothing else goes and the min offset stays where it is.
            let min_offset = || async {
                let r = client
                    .invoke(min_offset_request(TOPIC, 0), RPC_TIMEOUT)
                    .await
                    .expect("GET_MIN_OFFSET answered");
                r.ext("offset")
                    .and_then(|o| o.parse::<u64>().ok())
                    .expect("offset")
            };
            let settled = Instant::now();
            let mut min = min_offset().await;
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let now = min_offset().await;
                if now == min && used_pct(&fs.mnt) <= f64::from(FORCE) {
                    break;
                }
                min = now;
                assert!(
                    settled.elapsed() < Duration::from_secs(30),
                    "cleaning never settled: {:.1}% used, min offset {min}",
                    used_pct(&fs.mnt)
                );
            }
            assert!(min > 0 && min < max, "min offset {min} of {max}");
            // A consumer at offset 0 is moved to the min offset.
            let r = client
                .invoke(checker_pull(TOPIC, 0, 0), RPC_TIMEOUT)
                .await
                .expect("PULL answered");
            assert_eq!(
                (r.code, r.ext("nextBeginOffset")),
                (rc::PULL_OFFSET_MOVED, Some(min.to_string().as_str())),
                "{}",
                describe(&r)
            );
            // From the min offset on: every message, intact, where it was acknowledged.
            let mut offset = min;
            while offset < max {
                let r = client
                    .invoke(checker_pull(TOPIC, 0, offset), RPC_TIMEOUT)
                    .await
                    .expect("PULL answered");
                assert_eq!(r.code, rc::SUCCESS, "PULL at {offset}: {}", describe(&r));
                for rec in records(&r.body, true) {
                    let k = key_of(rec.body).expect("keyed body");
                    assert_eq!(rec.queue_offset as u64, offset);
                    assert_eq!(ledger.slots.get(&(0, offset)).map(String::as_str), Some(k));
                    assert_eq!(rec.body, &body_of(k)[..], "{k}: body damaged");
                    offset += 1;
                }
            }
            // What an operator reads as the store's size follows the deletions (T10: to within
            // one CommitLog file).
            let reported = gauge(&metrics_addr(&broker), "rocketmq_storage_size").await;
            let on_disk = dir_bytes(&root);
            assert!(
                (reported - on_disk as f64).abs() <= CL_FILE_SIZE as f64,
                "rocketmq_storage_size {reported} vs {on_disk} bytes of files in the store"
            );
            eprintln!("{name}: {deleted} CommitLog files deleted; min offset {min}, max {max}; read {} messages back; rocketmq_storage_size {reported}, files {on_disk} B", max - min);
        });
        drop(broker);
        drop(fs);
    });
}

/// Number of slave kills in [`kill_minus_9_of_a_slave_keeps_what_its_sync_master_acknowledged`].
const SLAVE_KILLS: usize = 5;

/// SYNC_MASTER under load while its slave is killed with SIGKILL at random moments and started
/// again, the load going on throughout: every send acknowledged before the new slave process
/// existed was on the killed slave (its recovered CommitLog reaches past it), sends are refused
/// only with replication codes (or SYSTEM_BUSY), and once the slave has caught up its CommitLog
/// is a byte-identical prefix of the master's and its ConsumeQueues count what the master's do.
#[test]
fn kill_minus_9_of_a_slave_keeps_what_its_sync_master_acknowledged() {
    let name = "kill_minus_9_of_a_slave_keeps_what_its_sync_master_acknowledged";
    bounded(name, Duration::from_secs(170), move |cleanup| {
        let seed = seed_for(name);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let (mroot, sroot) = (dir.path().join("master"), dir.path().join("slave"));
        let menv = BrokerEnv::new(&mroot)
            .set("BROKERROLE", "SYNC_MASTER")
            .set("HALISTENPORT", "0");
        let mut master = Broker::start(&cleanup, &menv);
        let started = log_line(&master, "broker started").expect("a start line");
        let ha = log_field(&started, "ha")
            .expect("the HA address")
            .to_string();
        let senv = BrokerEnv::new(&sroot)
            .set("BROKERROLE", "SLAVE")
            .set("BROKERID", "1")
            .set("HAMASTERADDRESS", &ha);
        let mut slave = Broker::start(&cleanup, &senv);
        let rt = runtime();
        let mut ledger = Ledger::default();
        let mut per_cycle = Vec::new();
        let mut away_codes = 0;
        for cycle in 0..SLAVE_KILLS {
            let delay = Duration::from_millis(rng.range(100, 400));
            let pid = slave.pid;
            // The load goes on while the slave is dead and while it starts again, and stops
            // 500 ms after the new slave process has started.
            let next: Arc<Mutex<Option<(Broker, Instant)>>> = Arc::new(Mutex::new(None));
            let (next_in, cleanup_in, senv_in) = (next.clone(), cleanup.clone(), senv.clone());
            let mut dead = slave;
            // `load` starts once a send is acknowledged: the slave is connected.
            let results = rt.block_on(load(
                &master.addr,
                &format!("c{cycle}"),
                rng.next_u64(),
                async move {
                    tokio::time::sleep(delay).await;
                    // SAFETY: kill(2) on our running, unreaped child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    tokio::task::spawn_blocking(move || {
                        let st = dead
                            .wait_exit(WAIT_LIMIT)
                            .expect("the slave exits after SIGKILL");
                        assert_eq!(st.signal(), Some(libc::SIGKILL), "{st}");
                        // Sends keep coming while it is away.
                        std::thread::sleep(Duration::from_millis(200));
                        let restarted_at = Instant::now();
                        let b = Broker::start(&cleanup_in, &senv_in);
                        *next_in.lock().unwrap() = Some((b, restarted_at));
                    })
                    .await
                    .expect("the slave restarts");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    true
                },
            ));
            let before = ledger.acked.len();
            let codes_before: usize = ledger.codes.values().sum();
            ledger.record_all(results);
            away_codes += ledger.codes.values().sum::<usize>() - codes_before;
            let (restarted, restarted_at) = next.lock().unwrap().take().expect("a new slave");
            slave = restarted;
            // Every send acknowledged before the new slave process existed was on the killed
            // one: its recovered CommitLog reaches past each of them.
            let newest = ledger
                .acked
                .values()
                .filter(|a| a.at < restarted_at)
                .map(|a| decode_offset_msg_id(&a.msg_id).expect("an offset msgId").1 as u64)
                .max()
                .expect("acknowledged sends");
            assert_abnormal_start(&slave);
            let recovered = log_line(&slave, "store recovered").expect("a recovery line");
            let end: u64 = log_number(&recovered, "commit_log_end");
            assert!(
                end > newest,
                "cycle {cycle}: the slave recovered its CommitLog to {end}, but the master \
                 acknowledged a message at {newest}:\n{}",
                slave.tail(20)
            );
            per_cycle.push((delay.as_millis(), ledger.acked.len() - before, end));
        }
        // Caught up (the load's last cycle left the master ahead): the queue ends agree.
        rt.block_on(wait_caught_up(
            &master.addr,
            &slave.addr,
            TOPIC,
            QUEUES,
            WAIT_LIMIT * 3,
        ));
        slave.stop_cleanly();
        master.stop_cleanly();
        // Sends in flight at a kill wait up to slaveTimeout and are acknowledged if the new
        // slave catches up in time; only sends that start while no slave is connected are sure
        // to be refused, so how many were depends on the moment of each kill.
        eprintln!(
            "{name}: seed {seed}, {SLAVE_KILLS} slave kills, {} acked, {away_codes} not \
             acknowledged during the kill cycles, {} without reply, error codes {:?} (e.g. \
             {:?}); (delay ms, acked, slave recovered end) per cycle: {per_cycle:?}",
            ledger.acked.len(),
            ledger.no_reply,
            ledger.codes,
            ledger.samples
        );
        assert_replicated(&ledger, &mroot, &sroot);
    });
}

/// The end of a master/slave kill test, both brokers stopped: sends were refused only with
/// replication codes (while the slave was away or reconnecting) or flow control, and the slave
/// is a prefix of the master ([`assert_slave_is_a_prefix`]).
fn assert_replicated(ledger: &Ledger, mroot: &Path, sroot: &Path) {
    assert!(
        ledger.codes.keys().all(|c| [
            rc::SLAVE_NOT_AVAILABLE,
            rc::FLUSH_SLAVE_TIMEOUT,
            rc::SYSTEM_BUSY
        ]
        .contains(c)),
        "only replication codes and flow control: {:?}",
        ledger.codes
    );
    assert_slave_is_a_prefix(mroot, sroot);
}

/// Both brokers stopped: every CommitLog file of the slave equals the master's file of the same
/// name byte for byte up to the slave's last non-zero byte, and both stores' ConsumeQueues agree
/// with their CommitLogs and count the same records.
fn assert_slave_is_a_prefix(mroot: &Path, sroot: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(sroot.join("commitlog"))
        .expect("slave CommitLog")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    for n in &names {
        let m = std::fs::read(mroot.join("commitlog").join(n)).expect("master file");
        let s = std::fs::read(sroot.join("commitlog").join(n)).expect("slave file");
        let end = s.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        assert!(m[..end] == s[..end], "{n:?}: the slave's bytes differ");
    }
    assert_eq!(
        offline_check(sroot, CQ_FILE_SIZE),
        offline_check(mroot, CQ_FILE_SIZE),
        "the slave's ConsumeQueues agree with its CommitLog and count what the master's do"
    );
}

/// Sends to queue 0 every 50 ms (at most [`WAIT_LIMIT`]) until a send is acknowledged, each
/// recorded in `ledger`: a SYNC_MASTER's slave is connected.
async fn probe_until_acked(addr: &str, ledger: &mut Ledger, tag: &str) {
    let client = RemotingClient::connect(addr).await.expect("master");
    let started = Instant::now();
    for i in 0.. {
        let k = key(&format!("{tag}-probe-{i}"), 0);
        let reply = client
            .invoke(send_with_key(TOPIC, 0, body_of(&k)), RPC_TIMEOUT)
            .await;
        let acked = matches!(&reply, Ok(r) if r.code == rc::SUCCESS);
        ledger.record(k, 0, outcome(reply));
        if acked {
            return;
        }
        assert!(
            started.elapsed() < WAIT_LIMIT,
            "{tag}: no SEND acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A port free now that no `bind` to port 0 can take while a killed broker restarts: below the
/// kernel's ephemeral range (`ip_local_port_range`), where the tests' own brokers never listen.
fn stable_free_port(rng: &mut Rng) -> u16 {
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let base = 20_000u16.min(ephemeral / 2);
    for _ in 0..1000 {
        let port = base + rng.below(u64::from(ephemeral - base)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {base}..{ephemeral}");
}

/// Number of master kills in
/// [`kill_minus_9_of_a_sync_master_leaves_every_acknowledged_message_on_its_slave`].
const MASTER_KILLS: usize = 5;

/// Master failover on one host: SYNC_MASTER under load is killed with SIGKILL at random moments.
/// With the master dead, every message it acknowledged is read back from the slave (RocketMQ's
/// SYNC_MASTER promise: SEND_OK means the slave has it), at its queue and offset, intact. The
/// master then restarts on the same HA port, the slave reconnects and catches up, and the load
/// goes on. At the end the master too holds every acknowledged message, and the slave's
/// CommitLog is a byte-identical prefix of the master's: a process crash loses nothing the
/// master wrote, so the master never recovers less than its slave holds and nothing diverges.
#[test]
fn kill_minus_9_of_a_sync_master_leaves_every_acknowledged_message_on_its_slave() {
    let name = "kill_minus_9_of_a_sync_master_leaves_every_acknowledged_message_on_its_slave";
    bounded(name, Duration::from_secs(170), move |cleanup| {
        let seed = seed_for(name);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let (mroot, sroot) = (dir.path().join("master"), dir.path().join("slave"));
        // The slave dials one fixed address, so the restarted master must listen where the
        // killed one did.
        let ha_port = stable_free_port(&mut rng);
        let menv = BrokerEnv::new(&mroot)
            .set("BROKERROLE", "SYNC_MASTER")
            .set("HALISTENPORT", &ha_port.to_string());
        let mut master = Broker::start(&cleanup, &menv);
        // The slave copies its master's topics through the master's name server (the first
        // master's embedded one: later masters get a new port, but the slave needs the tables
        // only once, before the first kill).
        let started = log_line(&master, "broker started").expect("a start line");
        let namesrv = log_field(&started, "name_servers")
            .expect("the name server address")
            .to_string();
        let senv = BrokerEnv::new(&sroot)
            .set("BROKERROLE", "SLAVE")
            .set("BROKERID", "1")
            .set("NAMESRVADDR", &namesrv)
            .set("HAMASTERADDRESS", &format!("127.0.0.1:{ha_port}"));
        let mut slave = Broker::start(&cleanup, &senv);
        let rt = runtime();
        let mut ledger = Ledger::default();
        // The topic exists on the master, and the slave has copied it (its first copy comes
        // 3 s after it starts): with the master dead, consumers read from the slave.
        rt.block_on(async {
            probe_until_acked(&master.addr, &mut ledger, "first").await;
            let s = RemotingClient::connect(&slave.addr).await.expect("slave");
            let deadline = Instant::now() + WAIT_LIMIT * 3;
            loop {
                let r = s
                    .invoke(checker_pull(TOPIC, 0, 0), RPC_TIMEOUT)
                    .await
                    .expect("PULL answered");
                if r.code != rc::TOPIC_NOT_EXIST {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the slave never copied the topic"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let mut per_cycle = Vec::new();
        for cycle in 0..MASTER_KILLS {
            // A restarted master answers SLAVE_NOT_AVAILABLE until the slave dials again (within
            // 5 s): probe at a walk until then rather than pile up refused messages.
            rt.block_on(probe_until_acked(
                &master.addr,
                &mut ledger,
                &format!("p{cycle}"),
            ));
            let (delay, results) =
                kill_under_load(&rt, &mut master, &format!("m{cycle}"), &mut rng);
            let acked = ledger.record_all(results);
            // The master is gone: the slave alone answers for every acknowledgement so far.
            let queues = rt.block_on(verify(
                &slave.addr,
                &ledger,
                &format!("slave, master killed in cycle {cycle}"),
            ));
            let held: usize = queues.values().map(Vec::len).sum();
            per_cycle.push((delay.as_millis(), acked, held));
            master = Broker::start(&cleanup, &menv);
            assert_abnormal_start(&master);
        }
        // The last restart's catch-up, then the master holds every acknowledgement too.
        rt.block_on(wait_caught_up(
            &master.addr,
            &slave.addr,
            TOPIC,
            QUEUES,
            WAIT_LIMIT * 3,
        ));
        rt.block_on(verify(
            &master.addr,
            &ledger,
            "master after its last restart",
        ));
        slave.stop_cleanly();
        master.stop_cleanly();
        eprintln!(
            "{name}: seed {seed}, {MASTER_KILLS} master kills, {} acked, {} without reply, \
             error codes {:?} (e.g. {:?}); (delay ms, acked, messages on the slave) per cycle: \
             {per_cycle:?}",
            ledger.acked.len(),
            ledger.no_reply,
            ledger.codes,
            ledger.samples
        );
        assert_replicated(&ledger, &mroot, &sroot);
    });
}
