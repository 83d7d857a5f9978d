//! A start that removed index files — naming records past a cut CommitLog end, or damaged — and
//! was then stopped before re-dispatch rebuilt them (a kill during recovery), must leave the
//! checkpoint sending the next start back far enough to index those records again. It arms a
//! process-wide fail point, so its cases run one after the other in one test, and that test runs
//! alone ([`crate::exclusive`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actormq::store::{PreviousRun, Store, StoreParams};
use actormq_core::clock::ManualClock;
use actormq_core::format::properties::keys;
use actormq_core::format::record::NewMessage;

use crate::common::store::{files, keys_not_found, msg, open, reopen};

const FILE: u64 = 1 << 20;

/// 1 MiB CommitLog files and index files of 200 entries.
fn small(p: &mut StoreParams) {
    p.commit_log_file_size = FILE;
    p.max_index_num = 200;
}

fn params(root: &Path) -> StoreParams {
    let mut p = StoreParams::for_tests(root);
    small(&mut p);
    p
}

/// Message `i` of `Rebuild`: 30 KB, with the key `k{i}`.
fn keyed(i: u32) -> NewMessage {
    msg(
        "Rebuild",
        0,
        &[(i % 251) as u8 | 1; 30_000],
        &[(keys::KEYS, &format!("k{i}"))],
    )
}

#[actix::test]
async fn a_start_stopped_after_removing_index_files_is_followed_by_one_that_rebuilds_them() {
    // Arms a fail point: no other test of the process runs meanwhile (tests/store/main.rs).
    let _exclusive = crate::exclusive().await;
    cut_commit_log().await;
    damaged_index_file().await;
}

/// Damages the header of index file `file` (beginTimestamp), then starts the store and stops
/// the start right after it removed the damaged files.
async fn damage_and_stop_the_start(root: &Path, clock: &ManualClock, file: &Path) {
    let mut b = std::fs::read(file).unwrap();
    b[0..8].copy_from_slice(&(-1i64).to_be_bytes());
    std::fs::write(file, &b).unwrap();
    fail::cfg("recovery-index-cut", "return").unwrap();
    let err = Store::open(params(root), Arc::new(clock.clone()))
        .await
        .err()
        .expect("the start is stopped after removing the index files");
    fail::remove("recovery-index-cut");
    assert!(err.to_string().contains("injected"), "{err}");
}

/// The middle index file's header is damaged after a clean stop: the start that removes it and
/// the file after it is stopped at once. That start wrote no abort file, so the next one is a
/// normal start, which reads no checkpoint: the rebuild marker alone must make it index every
/// later key again.
async fn damaged_index_file() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    {
        let store = open(dir.path(), &clock, small).await;
        for i in 0..450u32 {
            clock.advance_ms(100);
            store.put(keyed(i)).await.unwrap();
        }
        store.shutdown().await.unwrap();
    }
    let files = files(&dir.path().join("index"));
    assert_eq!(files.len(), 3, "{files:?}");
    damage_and_stop_the_start(dir.path(), &clock, &files[1]).await;
    assert!(!files[1].exists() && !files[2].exists());
    assert!(dir.path().join("index.rebuild").exists());
    // Without the marker a normal start finds only the first file and nothing to do, and keys
    // from 199 on never come back.
    let store = open(dir.path(), &clock, small).await;
    assert_eq!(keys_not_found(&store, "Rebuild", 450), Vec::<u32>::new());
    assert!(
        !dir.path().join("index.rebuild").exists(),
        "the marker goes once the rebuild is done"
    );
    store.shutdown().await.unwrap();
    // The checkpoint is lowered too, for an abnormal start (a crash during the rebuild: the
    // running broker's abort file): with the marker taken away, the same start stopped again
    // and then one as after a kill on this boot still index every key.
    damage_and_stop_the_start(dir.path(), &clock, &files[0]).await;
    std::fs::remove_file(dir.path().join("index.rebuild")).unwrap();
    let store = reopen(dir.path(), &clock, PreviousRun::ProcessDied, small).await;
    assert_eq!(keys_not_found(&store, "Rebuild", 450), Vec::<u32>::new());
    store.shutdown().await.unwrap();
}

/// The CommitLog lost its tail in a power loss; the start that removes the index files naming
/// records past the new end is stopped at once.
async fn cut_commit_log() {
    let dir = tempfile::tempdir().unwrap();
    // 450 messages of 30 KB over 14 CommitLog files; index files of 200 entries: the second
    // (messages 200-399, from ~6 MB) is full, so a clean stop checkpoints its end time.
    // Store times 100 ms apart: the abnormal-recovery start is chosen by time, 3 s before the
    // checkpoint's (RocketMQ's margin), so 30 messages.
    let clock = ManualClock::new(1_700_000_000_000);
    let mut at = Vec::new();
    {
        let store = open(dir.path(), &clock, small).await;
        for i in 0..450u32 {
            clock.advance_ms(100);
            at.push(store.put(keyed(i)).await.unwrap().phy_offset.0);
        }
        store.shutdown().await.unwrap();
    }
    // A power loss took everything from message 380 on: the second index file, kept by its
    // checkpointed end time, names records past the end.
    let cut = at[380];
    crate::common::store::cut_commit_log(dir.path(), cut, FILE);
    fail::cfg("recovery-index-cut", "return").unwrap();
    let err = Store::open_with(
        params(dir.path()),
        Arc::new(clock.clone()),
        None,
        PreviousRun::Crashed,
    )
    .await
    .err()
    .expect("the start is stopped after removing the index files");
    fail::remove("recovery-index-cut");
    assert!(err.to_string().contains("injected"), "{err}");
    // The next start, as after a kill on the same boot. The rebuild marker would send it back
    // on its own; taken away, the lowered checkpoint must: without it the start would
    // re-dispatch only from the last file (the checkpoint's time, less 3 s) and the index's lag
    // bound (~4 MB before the end), and messages 199-237 (from ~6 MB) would never be indexed
    // again.
    std::fs::remove_file(dir.path().join("index.rebuild")).expect("the rebuild marker");
    let store = reopen(dir.path(), &clock, PreviousRun::ProcessDied, small).await;
    assert_eq!(store.max_offset().0, cut);
    assert!(
        store
            .wait_dispatched(store.max_offset(), Duration::from_secs(60))
            .await
    );
    assert_eq!(
        keys_not_found(&store, "Rebuild", 450),
        (380..450).collect::<Vec<u32>>()
    );
    store.shutdown().await.unwrap();
}
