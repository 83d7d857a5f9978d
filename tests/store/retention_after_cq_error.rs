//! Retention after a ConsumeQueue write-back error. Such an error is reported by every later
//! ConsumeQueue flush (Linux reports it once; a later `fdatasync` would claim pages that never
//! reached the disk), and a retention round flushes the ConsumeQueues before it deletes
//! CommitLog files. Before, that flush's error ended every round until a restart, while the disk
//! filled; now the round deletes the files whose units an earlier flush put on disk, and keeps
//! those whose units may exist only in memory (a power loss would leave them nowhere to be
//! rebuilt from). The error is a fail point, which holds for the whole process: the test runs
//! alone ([`crate::exclusive`]).

use std::sync::Arc;
use std::time::Duration;

use actormq::store::{Store, StoreParams};
use actormq_core::clock::SystemClock;
use actormq_core::format::record::NewMessage;
use actormq_core::offset::QueueOffset;
use actormq_core::store::reader::{GetLimits, GetStatus, TagFilter};

use crate::common::until;

/// Message `i` of `Ret`: 1 KB.
fn msg(i: u32) -> NewMessage {
    crate::common::store::msg("Ret", 0, format!("{i:04}").repeat(256).as_bytes(), &[])
}

/// How long the store's progress may take in [`until`].
const UNTIL: Duration = Duration::from_secs(30);

#[actix::test]
async fn a_consume_queue_write_error_leaves_retention_deleting_what_its_units_cover() {
    // Arms a fail point: no other test of the process runs meanwhile (tests/store/main.rs).
    let _exclusive = crate::exclusive().await;
    let dir = tempfile::tempdir().unwrap();
    let file = 64 * 1024u64;
    let mut p = StoreParams::for_tests(dir.path());
    p.commit_log_file_size = file;
    p.cq_file_size = 10 * 20;
    p.cq_flush_interval = Duration::from_millis(5);
    p.retention = Some(actormq::store::cleaner::RetentionParams::immediate());
    let store = Store::open(p, Arc::new(SystemClock)).await.unwrap();
    let durable = || {
        store
            .state()
            .cq_durable
            .load(std::sync::atomic::Ordering::Acquire)
    };
    // Four files' worth of messages, their units flushed by the builder's timer.
    let mut i = 0u32;
    while store.max_offset().0 < 4 * file {
        store.put(msg(i)).await.unwrap();
        i += 1;
    }
    let first_end = store.max_offset().0;
    assert!(
        store
            .wait_dispatched(store.max_offset(), Duration::from_secs(30))
            .await
    );
    until("the units on disk", UNTIL, || durable() >= first_end).await;

    // From here every ConsumeQueue flush fails; three more files' worth of messages.
    fail::cfg("consume-queue-flush", "return").unwrap();
    while store.max_offset().0 < 7 * file {
        store.put(msg(i)).await.unwrap();
        i += 1;
    }
    let end = store.max_offset();
    assert!(store.wait_dispatched(end, Duration::from_secs(30)).await);
    until("the CommitLog flushed", UNTIL, || {
        store.flushed_offset() >= end
    })
    .await;
    let frozen = durable();
    assert!(
        (first_end..end.0).contains(&frozen),
        "no flush after the error counts: {frozen} in {first_end}..{}",
        end.0
    );

    let r = store.clean_now().await.expect("the round goes on");
    let covered = frozen / file;
    assert_eq!(
        r.commit_log_files as u64, covered,
        "every file below {frozen} and none past it: {r:?}"
    );
    assert_eq!(r.min_offset, covered * file);
    assert_eq!(store.reader().commit_log().min_offset(), covered * file);
    // The queue now starts at the first message retention kept, and every one from there on is
    // still served.
    let rd = store.reader();
    let min = rd.min_offset("Ret", 0);
    assert!(min > QueueOffset(0));
    let mut at = min;
    let mut served = 0u64;
    loop {
        let got = rd.get_messages("Ret", 0, at, GetLimits::default(), &TagFilter::all());
        if got.status != GetStatus::Found {
            break;
        }
        served += got.messages.len() as u64;
        at = got.next_begin_offset;
    }
    assert_eq!(min.0 + served, u64::from(i), "served from {min:?}");
    fail::remove("consume-queue-flush");
    // The stop reports the ConsumeQueue error it still sees; nothing more to check there.
    let _ = store.shutdown().await;
}
