//! SYNC_FLUSH on a stalled disk: while the group committer hangs in its flush, sends are still
//! appended, and each producer is answered FLUSH_DISK_TIMEOUT once `syncFlushTimeout` has passed
//! — not when the flush comes back — and the store carries on once it does. RocketMQ's
//! GroupCommitService hangs alone in the same way; appends and the producer's timed wait go on.
//! The stall is a fail point, which holds for the whole process: the test runs alone
//! ([`crate::exclusive`]).
//!
//! The outcome, not a timing, says what happened: an answer that had to wait for the flush would
//! be SEND_OK, given after the whole stall.

use std::sync::Arc;
use std::time::Duration;

use actormq::store::{Store, StoreParams};
use actormq_core::clock::SystemClock;
use actormq_core::format::properties::keys;
use actormq_core::format::record::{self, Check, NewMessage};
use actormq_core::offset::QueueOffset;
use actormq_core::store::reader::{GetLimits, GetStatus, TagFilter};
use actormq_core::store::status::PutStatus;

/// A message to queue 0 of `Stall` whose producer waits for the flush (WAIT=true).
fn msg(body: &str) -> NewMessage {
    crate::common::store::msg("Stall", 0, body.as_bytes(), &[(keys::WAIT, "true")])
}

#[actix::test]
async fn sends_during_a_stalled_flush_are_stored_and_answered_flush_disk_timeout_in_time() {
    // Arms a fail point: no other test of the process runs meanwhile (tests/store/main.rs).
    let _exclusive = crate::exclusive().await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = StoreParams::for_tests(dir.path());
    p.sync_flush = true;
    // Long enough that an ordinary fdatasync on a loaded CI disk (the first one into a fresh
    // file, too) stays within it: "before" and "after" must be PUT_OK.
    p.sync_flush_timeout = Duration::from_secs(1);
    let store = Store::open(p, Arc::new(SystemClock)).await.unwrap();
    let ok = store.put(msg("before")).await.unwrap();
    assert_eq!(ok.status, PutStatus::PutOk);

    // The next group commit blocks its thread for 10 s, ten times the timeout.
    fail::cfg("group-commit-flush", "1*sleep(10000)").unwrap();
    let stalled = store.put(msg("stalled")).await.unwrap();
    assert_eq!(
        stalled.status,
        PutStatus::FlushDiskTimeout,
        "answered by the deadline, not by the flush that ended later"
    );
    // Sent during the stall: appended all the same (the writer does not wait for the group
    // committer), and answered in time too.
    let during = store.put(msg("during")).await.unwrap();
    assert_eq!(during.status, PutStatus::FlushDiskTimeout);
    // One batch with a `WAIT=false` message beside a waiting one: only the waiting one is told
    // about the flush; the other was stored and is PUT_OK, as when it comes alone.
    let mut no_wait = msg("no-wait");
    no_wait.wait_store_msg_ok = false;
    let mixed = store.put_many(vec![msg("waits"), no_wait]).await;
    let statuses: Vec<_> = mixed.iter().map(|r| r.as_ref().unwrap().status).collect();
    assert_eq!(
        statuses,
        vec![PutStatus::FlushDiskTimeout, PutStatus::PutOk]
    );
    let during = mixed[1].as_ref().unwrap().clone();
    assert!(during.phy_offset > stalled.phy_offset);
    assert!(
        store.flushed_offset() < stalled.end_offset(),
        "both answered while the flush still hung"
    );
    fail::remove("group-commit-flush");

    // Once the flush returns, the store carries on: what was stored during the stall is
    // flushed, and the next message is acknowledged as usual.
    let bound = std::time::Instant::now() + Duration::from_secs(60);
    while store.flushed_offset() < during.end_offset() {
        assert!(
            std::time::Instant::now() < bound,
            "the stall ended, yet nothing was flushed within 60 s"
        );
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    let after = store.put(msg("after")).await.unwrap();
    assert_eq!(after.status, PutStatus::PutOk);
    assert!(store.flushed_offset() >= after.end_offset());
    assert!(
        store
            .wait_dispatched(store.max_offset(), Duration::from_secs(60))
            .await
    );
    let got = store.reader().get_messages(
        "Stall",
        0,
        QueueOffset(0),
        GetLimits::default(),
        &TagFilter::all(),
    );
    assert_eq!(got.status, GetStatus::Found);
    let bodies: Vec<Vec<u8>> = got
        .messages
        .iter()
        .map(|m| match record::check(m.as_bytes(), true).unwrap() {
            Check::Record(r) => r.body.to_vec(),
            Check::Blank { .. } => panic!("blank served as a message"),
        })
        .collect();
    assert_eq!(
        bodies,
        vec![
            b"before".to_vec(),
            b"stalled".to_vec(),
            b"during".to_vec(),
            b"waits".to_vec(),
            b"no-wait".to_vec(),
            b"after".to_vec()
        ]
    );
    store.shutdown().await.unwrap();
}
