//! SYNC_FLUSH on a stalled disk: a producer whose flush does not come back within
//! `syncFlushTimeout` is answered FLUSH_DISK_TIMEOUT while the flush still hangs, and the store
//! carries on once it returns. A test binary of its own: the stall is a fail point, which holds
//! for the whole process.
//!
//! The group committer shares the writer's thread, so the stall blocks both; the answer must come
//! from the deadline watcher on another thread. The outcome, not a timing, says which: a watcher
//! on the blocked thread would see the flush succeed first, and the producer would get SEND_OK
//! after the whole stall.

use std::sync::Arc;
use std::time::Duration;

use actormq::store::{Store, StoreParams};
use actormq_core::clock::SystemClock;
use actormq_core::format::properties;
use actormq_core::format::record::{self, body_crc, Check, NewMessage};
use actormq_core::offset::QueueOffset;
use actormq_core::store::reader::{GetLimits, GetStatus, TagFilter};
use actormq_core::store::status::PutStatus;
use bytes::Bytes;

fn msg(body: &str) -> NewMessage {
    let body = Bytes::copy_from_slice(body.as_bytes());
    NewMessage {
        topic: "Stall".into(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 0,
        born_host: "127.0.0.1:40000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_tx_offset: 0,
        body_crc: body_crc(&body),
        body,
        properties: properties::encode(&[(properties::keys::WAIT, "true")]),
    }
}

#[actix::test]
async fn a_flush_that_stalls_past_the_timeout_answers_flush_disk_timeout_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = StoreParams::for_tests(dir.path());
    p.sync_flush = true;
    p.sync_flush_timeout = Duration::from_millis(200);
    let store = Store::open(p, Arc::new(SystemClock)).await.unwrap();
    let ok = store.put(msg("before")).await.unwrap();
    assert_eq!(ok.status, PutStatus::PutOk);

    // The next group commit blocks its thread for 4 s, twenty times the timeout.
    fail::cfg("group-commit-flush", "1*sleep(4000)").unwrap();
    let late = store.put(msg("stalled")).await.unwrap();
    assert_eq!(
        late.status,
        PutStatus::FlushDiskTimeout,
        "answered by the deadline, not by the flush that ended later"
    );
    assert!(
        store.flushed_offset() < late.end_offset(),
        "answered while the flush still hung"
    );
    fail::remove("group-commit-flush");

    // Once the flush returns, the store carries on: the stalled message is stored and flushed,
    // and the next one is acknowledged as usual.
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
        vec![b"before".to_vec(), b"stalled".to_vec(), b"after".to_vec()]
    );
    store.shutdown().await.unwrap();
}
