//! The one harness of the end-to-end test binaries (`tests/<binary>/main.rs` includes it with
//! `#[path = "../common/mod.rs"] mod common;`). What it owns:
//!
//! * here — the runners ([`run_bounded`]: a test body on its own thread and runtime under a hard
//!   limit; [`with_broker`]: the same around one `TestBroker` that must also stop in time), broker
//!   lifecycle ([`broker`], [`start_broker`], [`stop_broker`], a bare name server:
//!   [`start_namesrv_in`]), bounded waits ([`wait_until`], [`poll`], [`eventually`], [`until`]:
//!   each polls with a bound, none sleeps "to let things happen"), unique names and test data;
//! * [`wire`] — raw frames and requests: [`FakeClient`], the request builders (SEND, PULL, offsets,
//!   routes, heartbeats), a pull body's records, `/metrics` over HTTP, a slave's catch-up;
//! * [`store`] — the store API without a broker: messages, opening (after a given previous run),
//!   settling, reading back, directory listings, a CommitLog cut.
//!
//! `wire` is re-exported here (`use crate::common::*` brings it); `store` is named. The real
//! client (`rocketmq-client-rust` 1.0.0) set up the way every test needs it is `client.rs` beside
//! this file, included only by the binary that starts one (`wire`, as `crate::real_client`):
//! linking the client's crates more than doubles a test binary (231 → 542 MB for `store`). Each
//! binary uses a subset, hence the `dead_code` allowance. Invariant: nothing here changes process-wide state (environment, fail
//! points, ports), so tests of one binary can run on parallel threads.
#![allow(dead_code, unused_imports)]

pub mod store;
pub mod wire;

pub use wire::*;

use actormq::broker::testing::TestBroker;
use actormq::namesrv::{start_namesrv, NamesrvHandle, NamesrvOptions};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Hard upper bound of every test, broker start and stop included: a guard against a hang, not a
/// timing. Generous, because one test may spawn the debug binary dozens of times and wait on
/// consumers on a loaded 2-core machine (60 s was within reach of the admin test's own waits).
pub const TEST_LIMIT: Duration = Duration::from_secs(180);

/// A multi-thread Tokio runtime of two workers, as every test body runs on.
fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("test tokio runtime")
}

/// Runs one test body on its own thread and its own multi-thread Tokio runtime, and fails the
/// test if it has not finished within [`TEST_LIMIT`]. Blocking calls (broker start/stop) are
/// covered too, since the caller only waits on a channel.
pub fn run_bounded<F, Fut>(name: &'static str, body: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let rt = test_runtime();
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(body())));
            let _ = tx.send(outcome);
            rt.shutdown_timeout(Duration::from_secs(5));
        })
        .expect("spawn test thread");
    match rx.recv_timeout(TEST_LIMIT) {
        Ok(Ok(())) => {
            let _ = worker.join();
        }
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(RecvTimeoutError::Timeout) => {
            panic!("{name}: did not finish within {TEST_LIMIT:?} (client or broker hung)")
        }
        Err(RecvTimeoutError::Disconnected) => {
            panic!("{name}: test thread died without reporting")
        }
    }
}

/// Runs `body` against a `TestBroker` started with `settings` on a fresh temp dir, on its own
/// thread and runtime, and fails the test if the body has not finished within `limit` of the
/// start, or if the broker then does not stop within it (a connection that hangs the broker's
/// shutdown is a bug too). A panic — in the body or while starting the broker — fails the test
/// with its own message at once (the broker is still stopped, on the worker thread).
pub fn with_broker<F, Fut>(name: &str, limit: Duration, settings: &[(&str, &str)], body: F)
where
    F: FnOnce(&TestBroker) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    enum Phase {
        Body(std::thread::Result<()>),
        Stopped,
    }
    let started = Instant::now();
    let settings: Vec<(String, String)> = settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let dir = tempfile::tempdir().expect("temp dir");
            let settings: Vec<(&str, &str)> = settings
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let broker = match std::panic::catch_unwind(|| {
                TestBroker::start(dir.path(), &settings)
                    .unwrap_or_else(|e| panic!("TestBroker::start failed: {e:#}"))
            }) {
                Ok(b) => b,
                Err(p) => {
                    let _ = tx.send(Phase::Body(Err(p)));
                    return;
                }
            };
            let rt = test_runtime();
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(body(&broker))));
            rt.shutdown_timeout(Duration::from_secs(5));
            let _ = tx.send(Phase::Body(outcome));
            broker.stop();
            let _ = tx.send(Phase::Stopped);
        })
        .expect("spawn the test thread");
    let remaining = |what: &str| {
        limit
            .checked_sub(started.elapsed())
            .unwrap_or_else(|| panic!("{name}: out of time ({limit:?}) before {what}"))
    };
    match rx.recv_timeout(remaining("the test body")) {
        Ok(Phase::Body(Ok(()))) => {}
        Ok(Phase::Body(Err(panic))) => std::panic::resume_unwind(panic),
        Ok(Phase::Stopped) => unreachable!("stop reported before the body"),
        Err(_) => panic!("{name}: did not finish within {limit:?} (broker or client hung)"),
    }
    match rx.recv_timeout(remaining("the broker stopped")) {
        Ok(Phase::Stopped) => {
            let _ = worker.join();
        }
        _ => panic!("{name}: the broker did not stop cleanly within {limit:?} of the start"),
    }
}

/// A fresh broker (with its embedded name server) on a fresh temp dir.
pub fn broker(overrides: &[(&str, &str)]) -> (tempfile::TempDir, TestBroker) {
    let dir = tempfile::tempdir().expect("temp dir");
    let b = start_broker(dir.path(), overrides);
    (dir, b)
}

pub fn start_broker(root: &Path, overrides: &[(&str, &str)]) -> TestBroker {
    tokio::task::block_in_place(|| TestBroker::start(root, overrides))
        .unwrap_or_else(|e| panic!("TestBroker::start({}) failed: {e:#}", root.display()))
}

pub fn stop_broker(b: TestBroker) {
    tokio::task::block_in_place(|| b.stop());
}

/// A name server alone (no broker) on 127.0.0.1 port 0, in the caller's actix system, with
/// `home` as its `${user.home}` and the other options as `tweak` leaves RocketMQ's defaults.
pub async fn start_namesrv_in(
    home: &Path,
    tweak: impl FnOnce(&mut NamesrvOptions),
) -> NamesrvHandle {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut opts = NamesrvOptions {
        home: Some(home.to_path_buf()),
        ..NamesrvOptions::default()
    };
    tweak(&mut opts);
    start_namesrv(listener, opts).await.unwrap()
}

/// Polls `cond` every 50 ms for at most `limit`; true when it held.
pub async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asks `probe` up to `tries` times, `every` apart, until `done` holds for its answer, and
/// returns the last answer: the caller asserts on it, so a failure shows what was last seen.
pub async fn poll<T, F, Fut>(
    tries: usize,
    every: Duration,
    mut probe: F,
    done: impl Fn(&T) -> bool,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let mut last = probe().await;
    for _ in 1..tries {
        if done(&last) {
            break;
        }
        tokio::time::sleep(every).await;
        last = probe().await;
    }
    last
}

/// Polls `f` every 10 ms until it returns `Ok`, for at most `limit`; then fails naming `what`
/// and the last `Err`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) if start.elapsed() > limit => {
                panic!("timed out after {limit:?} waiting for {what}; last: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Polls `cond` every millisecond (a store's progress, seen without a broker) for at most
/// `limit`; then fails naming `what`.
pub async fn until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "{what}: not reached within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A topic/group name unique in this process and run.
pub fn unique(prefix: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("{prefix}_{millis}_{}", SEQ.fetch_add(1, Ordering::Relaxed))
}

/// Incompressible bytes (xorshift64*), so client-side compression cannot shrink them.
pub fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}
