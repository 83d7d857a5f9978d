//! The store without a broker: messages as the broker's SEND path hands them to the store,
//! opening a `Store` on a temp dir with an injected clock, waiting for dispatch, reading a queue
//! back, index lookups by key, a store directory's files, and cutting a CommitLog as a power
//! loss would.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actormq::store::{PreviousRun, Store, StoreParams};
use actormq_core::clock::ManualClock;
use actormq_core::format::properties::{self, keys};
use actormq_core::format::record::{self, Check, NewMessage};
use actormq_core::offset::QueueOffset;
use actormq_core::store::reader::{GetLimits, GetStatus, TagFilter};
use bytes::Bytes;

/// The born timestamp of every message, and the clock's start in most store tests.
pub const T0: i64 = 1_700_000_000_000;

/// The store host of every message.
pub fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

/// A message for `topic` queue `queue_id` with `props`, as the broker's SEND path hands it over:
/// the producer's WAIT decides whether the append waits for the flush, and is not stored (4.9.4
/// removes it whatever its value).
pub fn msg(topic: &str, queue_id: i32, body: &[u8], props: &[(&str, &str)]) -> NewMessage {
    let wait = properties::wait_store_msg_ok(&properties::encode(props));
    let stored: Vec<(&str, &str)> = props
        .iter()
        .copied()
        .filter(|(k, _)| *k != keys::WAIT)
        .collect();
    let mut m = NewMessage::new(
        topic,
        queue_id,
        Bytes::copy_from_slice(body),
        properties::encode(&stored),
        T0,
        "127.0.0.1:40000".parse().unwrap(),
        host(),
    );
    m.wait_store_msg_ok = wait;
    m
}

/// Opens a store on `root` with the test parameters changed by `tweak`, on `clock`.
pub async fn open(root: &Path, clock: &ManualClock, tweak: impl FnOnce(&mut StoreParams)) -> Store {
    let mut p = StoreParams::for_tests(root);
    tweak(&mut p);
    Store::open(p, Arc::new(clock.clone()))
        .await
        .expect("store opens")
}

/// Opens a store on `root` as after a previous run that ended as `previous` (whatever the abort
/// file says), with the test parameters changed by `tweak`, on `clock`.
pub async fn reopen(
    root: &Path,
    clock: &ManualClock,
    previous: impl Into<PreviousRun>,
    tweak: impl FnOnce(&mut StoreParams),
) -> Store {
    let mut p = StoreParams::for_tests(root);
    tweak(&mut p);
    Store::open_with(p, Arc::new(clock.clone()), None, previous)
        .await
        .expect("store opens")
}

/// Waits (at most 60 s, else fails) until everything appended so far is dispatched.
pub async fn settle(store: &Store) {
    assert!(
        store
            .wait_dispatched(store.max_offset(), Duration::from_secs(60))
            .await,
        "dispatch caught up"
    );
}

/// Every message of `topic` queue `q`, as (queue offset, body), read through the store's reader.
pub fn all(store: &Store, topic: &str, q: i32) -> Vec<(QueueOffset, Vec<u8>)> {
    let mut out = Vec::new();
    let mut off = QueueOffset(0);
    loop {
        let r = store
            .reader()
            .get_messages(topic, q, off, GetLimits::default(), &TagFilter::all());
        if r.status != GetStatus::Found {
            break;
        }
        for (m, o) in r.messages.iter().zip(&r.queue_offsets) {
            match record::check(m.as_bytes(), true).unwrap() {
                Check::Record(rec) => out.push((*o, rec.body.to_vec())),
                Check::Blank { .. } => panic!("blank served as a message"),
            }
        }
        off = r.next_begin_offset;
    }
    out
}

/// Which of the keys `k0`..`k{n-1}` of `topic` the index does not find.
pub fn keys_not_found(store: &Store, topic: &str, n: u32) -> Vec<u32> {
    let idx = store.index().expect("index enabled");
    (0..n)
        .filter(|i| {
            idx.query(topic, &format!("k{i}"), 4, 0, i64::MAX)
                .phy_offsets
                .is_empty()
        })
        .collect()
}

/// Cuts the CommitLog under `root` (files of `file_size` bytes) at byte `cut`, as a power loss
/// that kept nothing from there would: later files are removed, the file holding `cut` is zeroed
/// from it.
pub fn cut_commit_log(root: &Path, cut: u64, file_size: u64) {
    for e in std::fs::read_dir(root.join("commitlog")).unwrap() {
        let path = e.unwrap().path();
        let start: u64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        if start > cut {
            std::fs::remove_file(&path).unwrap();
        } else if start + file_size > cut {
            let mut b = std::fs::read(&path).unwrap();
            b[(cut - start) as usize..].fill(0);
            std::fs::write(&path, &b).unwrap();
        }
    }
}

/// The names of the files in `dir`, sorted (a store's file names sort as their offsets do). A
/// file being made under a temporary dot-name is listed too.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The paths of the files in `dir`, sorted by name ([`file_names`]).
pub fn files(dir: &Path) -> Vec<PathBuf> {
    file_names(dir).iter().map(|n| dir.join(n)).collect()
}
