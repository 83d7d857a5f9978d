//! A store open that fails part-way stops the actors it had started. The test counts the
//! process's threads by name, which stores of tests running beside it would disturb, and arms a
//! fail point: it runs alone ([`crate::exclusive`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq::store::{PreviousRun, Store, StoreParams};
use actormq_core::clock::SystemClock;
use actormq_core::format::properties::keys;

use crate::common::store::msg;

/// Threads named after the actors that run during recovery's re-dispatch.
fn dispatch_threads() -> usize {
    const NAMES: [&str; 3] = ["consume_queue_b", "index_builder", "reput_dispatche"];
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|comm| NAMES.contains(&comm.trim()))
                .count()
        })
        .unwrap_or(0)
}

#[actix::test]
async fn an_open_failing_during_recovery_stops_the_actors_it_started() {
    // Counts the process's threads and arms a fail point: no other test of the process runs
    // meanwhile (tests/store/main.rs).
    let _exclusive = crate::exclusive().await;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(StoreParams::for_tests(dir.path()), Arc::new(SystemClock))
            .await
            .unwrap();
        for i in 0..50u32 {
            let m = msg("Fail", 0, &[1u8; 500], &[(keys::KEYS, &format!("k{i}"))]);
            store.put(m).await.unwrap();
        }
        store.shutdown().await.unwrap();
    }
    assert_eq!(
        dispatch_threads(),
        0,
        "a clean stop joins every actor thread"
    );
    // As after a crash before the first checkpoint: recovery re-dispatches everything and writes
    // a progress checkpoint, whose CommitLog sync the fail point makes fail.
    std::fs::write(dir.path().join("checkpoint"), vec![0u8; 4096]).unwrap();
    fail::cfg("recovery-progress-sync", "return").unwrap();
    let err = Store::open_with(
        StoreParams::for_tests(dir.path()),
        Arc::new(SystemClock),
        None,
        PreviousRun::Crashed,
    )
    .await
    .err()
    .expect("the open fails");
    fail::remove("recovery-progress-sync");
    assert!(err.to_string().contains("injected"), "{err}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while dispatch_threads() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} actor threads of the failed open still run after 10 s",
            dispatch_threads()
        );
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    // The store opens normally afterwards.
    let store = Store::open_with(
        StoreParams::for_tests(dir.path()),
        Arc::new(SystemClock),
        None,
        PreviousRun::Crashed,
    )
    .await
    .unwrap();
    assert_eq!(
        store
            .reader()
            .consume_queues()
            .get("Fail", 0)
            .unwrap()
            .max_offset()
            .0,
        50
    );
    store.shutdown().await.unwrap();
}
