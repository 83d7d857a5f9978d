//! End-to-end tests of the store through its actors: what a RocketMQ user relies on — rolling
//! files, contiguous queue offsets, limits answering their status, delayed delivery, index
//! queries, tag filtering, reads of empty and unknown topics, reopening after a clean stop, and an
//! on-disk layout RocketMQ's own tools can read byte for byte.
//!
//! Deterministic: temp dirs, an injected clock, bounded waits (no sleeps to "let things happen").

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actormq::store::{PreviousRun, Store, StoreParams};
use actormq_core::clock::{Clock, ManualClock};
use actormq_core::format::java::java_string_hash;
use actormq_core::format::properties::{self, keys};
use actormq_core::format::record::{self, Check, NewMessage};
use actormq_core::offset::{PhyOffset, QueueOffset};
use actormq_core::store::reader::{GetLimits, GetStatus, TagFilter};
use actormq_core::store::schedule::SCHEDULE_TOPIC;
use actormq_core::store::status::PutStatus;

use crate::common::store::{
    all, cut_commit_log, file_names, files, keys_not_found, msg, open, reopen, settle, T0,
};
use crate::common::{poll, until};

/// How long a store's progress may take in [`until`].
const UNTIL: Duration = Duration::from_secs(10);

/// Many tasks of one thread appending through a `PutCoalescer` (one `AppendBatch` per turn, at
/// most 512 messages per writer message): each gets the result of its own message — whose queue
/// offset reads back its own body — in SYNC_FLUSH, and every queue's offsets are contiguous.
#[actix::test]
async fn coalesced_puts_answer_each_caller_with_its_own_message() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = std::rc::Rc::new(open(dir.path(), &clock, |p| p.sync_flush = true).await);
    let coalescer = actormq::store::coalesce::PutCoalescer::new(store.clone());
    // 1,100 in one turn: three writer messages (512 + 512 + 76).
    let tasks: Vec<_> = (0..1_100u32)
        .map(|i| {
            let c = coalescer.clone();
            actix_rt::spawn(async move {
                let body = format!("coalesced-{i}");
                let ok = c.put(msg("Co", (i % 4) as i32, body.as_bytes(), &[])).await;
                (i, ok)
            })
        })
        .collect();
    let mut got = std::collections::HashMap::new();
    for t in tasks {
        let (i, ok) = t.await.unwrap();
        let ok = ok.unwrap();
        assert_eq!(ok.status, PutStatus::PutOk);
        got.insert(((i % 4) as i32, ok.queue_offset), format!("coalesced-{i}"));
    }
    settle(&store).await;
    for q in 0..4 {
        let read = all(&store, "Co", q);
        assert_eq!(read.len(), 275, "q{q}");
        for (n, (off, body)) in read.iter().enumerate() {
            assert_eq!(off.0, n as u64, "q{q}: contiguous offsets");
            assert_eq!(
                got.get(&(q, *off)).map(String::as_bytes),
                Some(body.as_slice()),
                "q{q} offset {}: the caller told this offset sent this body",
                off.0
            );
        }
    }
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn messages_roll_across_files_and_all_read_back() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |p| p.commit_log_file_size = 64 * 1024).await;
    for i in 0..300u32 {
        let body = format!("{i:04}").repeat(256); // 1 KiB
        store
            .put(msg("RollTopic", (i % 3) as i32, body.as_bytes(), &[]))
            .await
            .unwrap();
    }
    settle(&store).await;
    let mut files = file_names(&dir.path().join("commitlog"));
    // The allocator may be creating the next file right now, under a temporary dot-name.
    files.retain(|n| !n.starts_with('.'));
    assert!(files.len() >= 5, "several files: {}", files.len());
    for (i, f) in files.iter().enumerate() {
        assert_eq!(*f, format!("{:020}", i as u64 * 65536));
        let len = std::fs::metadata(dir.path().join("commitlog").join(f))
            .unwrap()
            .len();
        assert_eq!(len, 65536);
    }
    let mut total = 0;
    for q in 0..3 {
        let got = all(&store, "RollTopic", q);
        for (k, (off, body)) in got.iter().enumerate() {
            assert_eq!(off.0, k as u64, "contiguous queue offsets");
            let i = k as u32 * 3 + q as u32;
            assert_eq!(body, format!("{i:04}").repeat(256).as_bytes());
        }
        total += got.len();
    }
    assert_eq!(total, 300);
    store.shutdown().await.unwrap();
}

/// Also the builder's batch path for new files (made together, then taken by their units): two
/// units per ConsumeQueue file, so each batch's units need 1,000 new files or none.
#[actix::test]
async fn queue_offsets_are_contiguous_across_1000_queues() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |p| p.cq_file_size = 40).await;
    for round in 0..3u64 {
        let batch: Vec<_> = (0..1000).map(|q| msg("Many", q, b"x", &[])).collect();
        for r in store.put_many(batch).await {
            assert_eq!(r.unwrap().queue_offset, QueueOffset(round));
        }
    }
    settle(&store).await;
    for q in 0..1000 {
        assert_eq!(store.reader().max_offset("Many", q), QueueOffset(3));
        let got = all(&store, "Many", q);
        assert_eq!(
            got.iter().map(|g| g.0 .0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(
            file_names(&dir.path().join(format!("consumequeue/Many/{q}"))),
            ["00000000000000000000", "00000000000000000040"],
            "queue {q}"
        );
    }
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn each_limit_answers_its_status_and_stores_nothing() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |p| p.max_message_size = 1024).await;
    let cases: Vec<(NewMessage, PutStatus, i32, &str)> = vec![
        (
            msg("T", 0, &[0; 1025], &[]),
            PutStatus::MessageIllegal,
            13,
            "maxMessageSize",
        ),
        (
            msg("T", 0, b"x", &[("BIG", &"v".repeat(33_000))]),
            PutStatus::PropertiesSizeExceeded,
            13,
            "32767",
        ),
        // The SEND-level topic rules (characters, blank, system topics) are the broker's, checked
        // once where the request arrives (tests/wire/client.rs); the store refuses only what
        // its record cannot hold.
        (
            msg(&"t".repeat(128), 0, b"x", &[]),
            PutStatus::MessageIllegal,
            13,
            "127",
        ),
        (
            msg("T", 70_000, b"x", &[]),
            PutStatus::MessageIllegal,
            13,
            "queue id",
        ),
    ];
    for (m, status, code, remark) in cases {
        let e = store.put(m).await.unwrap_err();
        assert_eq!(e.status, status, "{e}");
        assert_eq!(e.status.response_code(), code);
        assert!(
            e.remark.contains(remark),
            "remark {:?} names {remark:?}",
            e.remark
        );
    }
    assert_eq!(store.max_offset(), PhyOffset(0), "refusals write nothing");
    // A producer batch with a delay level is refused as a whole.
    let e = store
        .put_producer_batch(vec![
            msg("T", 0, b"a", &[]),
            msg("T", 0, b"b", &[(keys::DELAY, "1")]),
        ])
        .await
        .unwrap_err();
    assert_eq!(e.status, PutStatus::MessageIllegal);
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn delay_level_1_message_reaches_its_real_topic_after_one_second() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    let ok = store
        .put(msg(
            "RealTopic",
            2,
            b"later",
            &[(keys::DELAY, "1"), (keys::TAGS, "TagD")],
        ))
        .await
        .unwrap();
    assert_eq!(ok.queue_offset, QueueOffset(0));
    settle(&store).await;
    // Stored in SCHEDULE_TOPIC_XXXX queue 0 with tagsCode = store time + 1 s.
    let sq = store
        .reader()
        .queue(SCHEDULE_TOPIC, 0)
        .expect("schedule queue 0");
    assert_eq!(sq.unit(QueueOffset(0)).unwrap().tags_code, T0 + 1000);
    // Not due yet: several schedule ticks pass with the clock standing still.
    for _ in 0..5 {
        actix_rt::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(store.reader().max_offset("RealTopic", 2), QueueOffset(0));
    }
    clock.advance_ms(999);
    actix_rt::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(
        store.reader().max_offset("RealTopic", 2),
        QueueOffset(0),
        "999 ms is not enough"
    );
    clock.advance_ms(1);
    let delivered = poll(
        500,
        Duration::from_millis(10),
        || async { store.reader().max_offset("RealTopic", 2) },
        |max| *max == QueueOffset(1),
    )
    .await;
    assert_eq!(
        delivered,
        QueueOffset(1),
        "delivered within the bounded wait"
    );
    let r = store.reader().get_messages(
        "RealTopic",
        2,
        QueueOffset(0),
        GetLimits::default(),
        &TagFilter::from_expression("TagD"),
    );
    assert_eq!(r.status, GetStatus::Found);
    let Check::Record(rec) = record::check(r.messages[0].as_bytes(), true).unwrap() else {
        panic!()
    };
    assert_eq!(rec.body, b"later");
    assert_eq!(rec.topic, "RealTopic");
    assert!(rec.store_timestamp >= T0 + 1000);
    // The stored properties as they are, as RocketMQ 4.9.4's messageTimeup writes them.
    assert_eq!(rec.property(keys::DELAY), Some("1"));
    assert_eq!(rec.property(keys::REAL_TOPIC), Some("RealTopic"));
    assert_eq!(rec.property(keys::REAL_QID), Some("2"));
    assert_eq!(rec.property(keys::TAGS), Some("TagD"));
    // Progress is recorded and persisted at stop.
    assert_eq!(store.delay_offsets().await.unwrap().0.get(&1), Some(&1));
    store.shutdown().await.unwrap();
    let saved = std::fs::read_to_string(dir.path().join("config/delayOffset.json")).unwrap();
    assert!(saved.contains("\"1\":1"), "{saved}");
}

/// A delayed message whose body is damaged on disk while it waits is not delivered: it would
/// serve a corrupt body, and its copy at the live tail would make the next CRC-checked recovery cut
/// the CommitLog there. It is skipped, and its level's progress passes over it — with a message
/// after it (level 1) and without one (level 2: it must not be read again every tick).
#[actix::test]
async fn a_delayed_message_damaged_while_it_waits_is_skipped_not_delivered() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    for (body, level) in [
        ("damaged-while-waiting", "1"),
        ("intact-and-delivered", "1"),
        ("damaged-and-the-last", "2"),
    ] {
        store
            .put(msg(
                "RealTopic",
                0,
                body.as_bytes(),
                &[(keys::DELAY, level)],
            ))
            .await
            .unwrap();
    }
    settle(&store).await;
    // Flip one bit of each damaged body in the CommitLog file (the store reads it through its
    // mapping of the same page cache).
    let file = dir.path().join("commitlog").join(format!("{:020}", 0));
    let bytes = std::fs::read(&file).unwrap();
    for body in [&b"damaged-while-waiting"[..], b"damaged-and-the-last"] {
        let at = bytes.windows(body.len()).position(|w| w == body).unwrap();
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all_at(&[bytes[at] ^ 0x01], at as u64).unwrap();
    }
    // Level 1 (1 s) is due first, with a message after the damaged one; then level 2 (5 s),
    // alone in its tick with nothing to deliver.
    // (level 1, level 2) progress; a level not yet in the table is at 0.
    let progress = |want: (u64, u64)| {
        let store = &store;
        let levels = move || async move {
            let o = store.delay_offsets().await.unwrap().0;
            let at = |l| o.get(&l).copied().unwrap_or(0);
            (at(1), at(2))
        };
        poll(500, Duration::from_millis(10), levels, move |got| {
            *got == want
        })
    };
    clock.advance_ms(1000);
    assert_eq!(progress((2, 0)).await, (2, 0), "level 1 passed both units");
    clock.advance_ms(4000);
    assert_eq!(
        progress((2, 1)).await,
        (2, 1),
        "level 2 passed its only unit"
    );
    settle(&store).await;
    let delivered = all(&store, "RealTopic", 0);
    assert_eq!(
        delivered,
        vec![(QueueOffset(0), b"intact-and-delivered".to_vec())],
        "only the intact one reached its topic"
    );
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn index_query_by_keys_and_by_uniq_key() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    let a = store
        .put(msg(
            "IdxT",
            0,
            b"a",
            &[
                (keys::KEYS, "order-1 user-7"),
                (keys::UNIQ_KEY, "AC11000100002A9F0000000000000001"),
            ],
        ))
        .await
        .unwrap();
    clock.advance_ms(5000);
    let b = store
        .put(msg("IdxT", 1, b"b", &[(keys::KEYS, "order-2")]))
        .await
        .unwrap();
    store
        .put(msg("Other", 0, b"c", &[(keys::KEYS, "order-1")]))
        .await
        .unwrap();
    settle(&store).await;
    let idx = store.index().expect("index enabled");
    let q = |key: &str| idx.query("IdxT", key, 64, 0, i64::MAX).phy_offsets;
    assert_eq!(
        q("order-1"),
        vec![a.phy_offset.0 as i64],
        "topic-scoped: Other's order-1 not returned"
    );
    assert_eq!(q("user-7"), vec![a.phy_offset.0 as i64]);
    assert_eq!(q("order-2"), vec![b.phy_offset.0 as i64]);
    assert_eq!(
        q("AC11000100002A9F0000000000000001"),
        vec![a.phy_offset.0 as i64]
    );
    assert!(q("nope").is_empty());
    // The time range excludes a message stored before it.
    assert!(idx
        .query("IdxT", "order-1", 64, T0 + 1000, i64::MAX)
        .phy_offsets
        .is_empty());
    // And the record is served by physical offset (what VIEW_MESSAGE_BY_ID does).
    let rec = store.reader().record_at(a.phy_offset).unwrap();
    let Check::Record(r) = record::check(rec.as_bytes(), true).unwrap() else {
        panic!()
    };
    assert_eq!(r.body, b"a");
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn tag_filter_returns_matching_messages_and_advances_over_the_rest() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    for i in 0..10 {
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        store
            .put(msg(
                "TagT",
                0,
                format!("{i}").as_bytes(),
                &[(keys::TAGS, tag)],
            ))
            .await
            .unwrap();
    }
    store.put(msg("TagT", 0, b"none", &[])).await.unwrap();
    settle(&store).await;
    let cq = store.reader().queue("TagT", 0).unwrap();
    assert_eq!(
        cq.unit(QueueOffset(1)).unwrap().tags_code,
        java_string_hash("TagB") as i64
    );
    assert_eq!(cq.unit(QueueOffset(10)).unwrap().tags_code, 0);
    let r = store.reader().get_messages(
        "TagT",
        0,
        QueueOffset(0),
        GetLimits::default(),
        &TagFilter::from_expression("TagA"),
    );
    assert_eq!(r.status, GetStatus::Found);
    assert_eq!(
        r.queue_offsets,
        vec![
            QueueOffset(0),
            QueueOffset(2),
            QueueOffset(4),
            QueueOffset(6),
            QueueOffset(8)
        ]
    );
    assert_eq!(
        r.next_begin_offset,
        QueueOffset(11),
        "advances over every unit scanned"
    );
    let r = store.reader().get_messages(
        "TagT",
        0,
        QueueOffset(0),
        GetLimits::default(),
        &TagFilter::from_expression("TagA || TagB"),
    );
    assert_eq!(r.messages.len(), 10);
    let r = store.reader().get_messages(
        "TagT",
        0,
        QueueOffset(9),
        GetLimits::default(),
        &TagFilter::from_expression("TagC"),
    );
    assert_eq!(r.status, GetStatus::NoMatchedMessage);
    assert_eq!(r.next_begin_offset, QueueOffset(11));
    let r = store.reader().get_messages(
        "TagT",
        0,
        QueueOffset(0),
        GetLimits {
            max_msgs: 3,
            max_bytes: 1 << 20,
            ..GetLimits::default()
        },
        &TagFilter::all(),
    );
    assert_eq!(r.messages.len(), 3);
    assert_eq!(r.next_begin_offset, QueueOffset(3));
    // A batch that is full stops at the next unit whether or not it matches (RocketMQ checks
    // isTheBatchFull before the filter): room for one record, so the TagB unit at 1 ends it.
    let first = r.messages[0].len();
    let r = store.reader().get_messages(
        "TagT",
        0,
        QueueOffset(0),
        GetLimits {
            max_bytes: first,
            ..GetLimits::default()
        },
        &TagFilter::from_expression("TagA"),
    );
    assert_eq!(r.messages.len(), 1);
    assert_eq!(r.next_begin_offset, QueueOffset(1));
    store.shutdown().await.unwrap();
}

/// RocketMQ's `isTheBatchFull` with `checkInDiskByCommitOffset`: records further behind the
/// CommitLog's end than the hot share come in batches of `maxTransferCountOnMessageInDisk` /
/// `…BytesOnMessageInDisk`, and a read that ends there says the consumer should go to a slave.
#[actix::test]
async fn a_consumer_far_behind_the_log_end_reads_disk_sized_batches_and_is_sent_to_a_slave() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    let body = [7u8; 1000];
    let mut phys = Vec::new();
    for _ in 0..100 {
        phys.push(
            store
                .put(msg("Far", 0, &body, &[]))
                .await
                .unwrap()
                .phy_offset,
        );
    }
    settle(&store).await;
    let end = store.reader().commit_log().max_offset();
    let record = end - phys[99].0;
    // Records more than five records' bytes behind the end are "on disk".
    let hot = GetLimits {
        hot_bytes: 5 * record,
        ..GetLimits::default()
    };
    let read = |from: u64, limits: GetLimits, filter: &TagFilter| {
        store
            .reader()
            .get_messages("Far", 0, QueueOffset(from), limits, filter)
    };
    let r = read(0, hot, &TagFilter::all());
    assert_eq!(r.status, GetStatus::Found);
    assert_eq!(r.messages.len(), 8, "maxTransferCountOnMessageInDisk");
    assert_eq!(r.next_begin_offset, QueueOffset(8));
    assert!(r.suggest_pulling_from_slave);
    let r = read(
        0,
        GetLimits {
            max_bytes_on_disk: 3 * record as usize,
            ..hot
        },
        &TagFilter::all(),
    );
    assert_eq!(r.messages.len(), 3, "maxTransferBytesOnMessageInDisk");
    // On disk the on-disk limits alone apply, even above the in-memory ones (RocketMQ's
    // isTheBatchFull): a broker configured for 40 on disk and 32 in memory sends 40.
    let r = read(
        0,
        GetLimits {
            max_msgs_on_disk: 40,
            max_bytes_on_disk: 1 << 20,
            ..hot
        },
        &TagFilter::all(),
    );
    assert_eq!(
        r.messages.len(),
        40,
        "the on-disk count, not the in-memory 32"
    );
    // Near the end every record is hot: the in-memory limits, and no slave.
    let r = read(95, hot, &TagFilter::all());
    assert_eq!(r.messages.len(), 5);
    assert!(!r.suggest_pulling_from_slave);
    // Each record is judged where it lies: a batch from five records on disk into the hot ones
    // is not cut at eight.
    let r = read(90, hot, &TagFilter::all());
    assert_eq!(r.messages.len(), 10);
    assert!(!r.suggest_pulling_from_slave, "the last record read is hot");
    // The defaults count everything as hot (a store smaller than its share of memory).
    let r = read(0, GetLimits::default(), &TagFilter::all());
    assert_eq!(r.messages.len(), 32);
    assert!(!r.suggest_pulling_from_slave);
    // A filtered scan that reaches the hot end suggests nothing (a full batch stopping at a
    // unit that would not match is pinned in the tag filter test).
    let r = read(0, hot, &TagFilter::from_expression("Nope"));
    assert_eq!(r.status, GetStatus::NoMatchedMessage);
    assert_eq!(r.next_begin_offset, QueueOffset(100));
    assert!(
        !r.suggest_pulling_from_slave,
        "it scanned up to the last record"
    );
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn every_read_api_on_an_empty_store_and_an_unknown_topic() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    let rd = store.reader().clone();
    let check_unknown = |topic: &str| {
        let r = rd.get_messages(
            topic,
            0,
            QueueOffset(0),
            GetLimits::default(),
            &TagFilter::all(),
        );
        assert_eq!(r.status, GetStatus::NoMatchedLogicQueue);
        assert_eq!(r.next_begin_offset, QueueOffset(0));
        assert!(r.messages.is_empty());
        let r = rd.get_messages(
            topic,
            0,
            QueueOffset(5),
            GetLimits::default(),
            &TagFilter::all(),
        );
        assert_eq!(r.status, GetStatus::NoMatchedLogicQueue);
        assert_eq!(rd.max_offset(topic, 0), QueueOffset(0));
        assert_eq!(rd.min_offset(topic, 0), QueueOffset(0));
        assert_eq!(rd.offset_by_time(topic, 0, T0), QueueOffset(0));
        assert_eq!(rd.earliest_store_time(topic, 0), None);
        assert!(store
            .index()
            .unwrap()
            .query(topic, "k", 32, 0, i64::MAX)
            .phy_offsets
            .is_empty());
    };
    check_unknown("Nothing");
    assert!(rd.record_at(PhyOffset(0)).is_none());
    assert!(rd.record_at(PhyOffset(1 << 40)).is_none());
    // With data in another topic, an unknown topic still reads as unknown, and offsets of a known
    // queue answer their rules.
    store.put(msg("Known", 0, b"x", &[])).await.unwrap();
    clock.advance_ms(10);
    store.put(msg("Known", 0, b"y", &[])).await.unwrap();
    settle(&store).await;
    check_unknown("Nothing");
    let r = rd.get_messages(
        "Known",
        0,
        QueueOffset(2),
        GetLimits::default(),
        &TagFilter::all(),
    );
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetStatus::OffsetOverflowOne, QueueOffset(2))
    );
    let r = rd.get_messages(
        "Known",
        0,
        QueueOffset(9),
        GetLimits::default(),
        &TagFilter::all(),
    );
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetStatus::OffsetOverflowBadly, QueueOffset(2))
    );
    assert_eq!(rd.earliest_store_time("Known", 0), Some(T0));
    // RocketMQ 4.9.4's rules: halfway between two messages the earlier one, after the last one
    // the last one (max − 1), before the first one the first, exactly at one that one.
    assert_eq!(rd.offset_by_time("Known", 0, T0 + 5), QueueOffset(0));
    assert_eq!(rd.offset_by_time("Known", 0, T0 + 6), QueueOffset(1));
    assert_eq!(rd.offset_by_time("Known", 0, T0 + 50), QueueOffset(1));
    assert_eq!(rd.offset_by_time("Known", 0, T0 - 50), QueueOffset(0));
    assert_eq!(rd.offset_by_time("Known", 0, T0 + 10), QueueOffset(1));
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn the_store_reopened_after_a_clean_stop_serves_every_message_again() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| p.commit_log_file_size = 32 * 1024;
    let mut sent = Vec::new();
    {
        let store = open(dir.path(), &clock, tweak).await;
        for i in 0..200u32 {
            let topic = ["A", "B", "C"][i as usize % 3];
            let body = format!("message-{i}-").repeat(20);
            let ok = store
                .put(msg(
                    topic,
                    (i % 2) as i32,
                    body.as_bytes(),
                    &[(keys::KEYS, &format!("k{i}"))],
                ))
                .await
                .unwrap();
            sent.push((topic, (i % 2) as i32, ok.queue_offset, body, ok.phy_offset));
        }
        store.shutdown().await.unwrap();
    }
    let store = open(dir.path(), &clock, tweak).await;
    assert_eq!(store.report.truncated_reason, None);
    for (topic, q, off, body, phy) in &sent {
        let r = store.reader().get_messages(
            topic,
            *q,
            *off,
            GetLimits {
                max_msgs: 1,
                max_bytes: 1 << 20,
                ..GetLimits::default()
            },
            &TagFilter::all(),
        );
        assert_eq!(r.status, GetStatus::Found);
        let Check::Record(rec) = record::check(r.messages[0].as_bytes(), true).unwrap() else {
            panic!()
        };
        assert_eq!(rec.body, body.as_bytes());
        assert_eq!(rec.phy_offset as u64, phy.0);
    }
    assert_eq!(
        store
            .index()
            .unwrap()
            .query("A", "k0", 32, 0, i64::MAX)
            .phy_offsets,
        vec![sent[0].4 .0 as i64]
    );
    // Appends continue the queues where they stopped.
    let next = store.put(msg("A", 0, b"after", &[])).await.unwrap();
    let expected = sent.iter().filter(|s| s.0 == "A" && s.1 == 0).count() as u64;
    assert_eq!(next.queue_offset, QueueOffset(expected));
    store.shutdown().await.unwrap();
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

#[actix::test]
async fn the_store_directory_has_rocketmqs_layout_byte_for_byte() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    let a = store
        .put(msg(
            "LayoutT",
            3,
            b"hello",
            &[
                (keys::TAGS, "TagA"),
                (keys::KEYS, "K1"),
                (keys::UNIQ_KEY, "U1"),
            ],
        ))
        .await
        .unwrap();
    let b = store.put(msg("LayoutT", 3, b"world!", &[])).await.unwrap();
    store.shutdown().await.unwrap();

    // CommitLog: 00000000000000000000 of the configured size, records at their offsets.
    let cl = std::fs::read(dir.path().join("commitlog/00000000000000000000")).unwrap();
    assert_eq!(cl.len(), 1 << 20);
    let props = properties::encode(&[
        (keys::TAGS, "TagA"),
        (keys::KEYS, "K1"),
        (keys::UNIQ_KEY, "U1"),
    ]);
    let size = 91 + 5 + "LayoutT".len() + props.len();
    assert_eq!(be_i32(&cl, 0) as usize, size, "TOTALSIZE");
    assert_eq!(be_i32(&cl, 4) as u32, 0xDAA320A7, "MAGICCODE v1");
    assert_eq!(
        be_i32(&cl, 8) as u32,
        crc32fast::hash(b"hello") & 0x7FFF_FFFF,
        "BODYCRC"
    );
    assert_eq!(be_i32(&cl, 12), 3, "QUEUEID");
    assert_eq!(be_i64(&cl, 20), 0, "QUEUEOFFSET");
    assert_eq!(be_i64(&cl, 28), 0, "PHYSICALOFFSET");
    assert_eq!(be_i64(&cl, 40), T0, "BORNTIMESTAMP");
    assert_eq!(&cl[48..52], &[127, 0, 0, 1], "BORNHOST ip");
    assert_eq!(be_i32(&cl, 52), 40000, "BORNHOST port");
    assert_eq!(be_i64(&cl, 56), T0, "STORETIMESTAMP");
    assert_eq!(be_i32(&cl, 68), 10911, "STOREHOST port");
    assert_eq!(be_i32(&cl, 84), 5, "BODYLEN");
    assert_eq!(&cl[88..93], b"hello");
    assert_eq!(cl[93] as usize, 7, "TOPICLEN (1 byte, v1)");
    assert_eq!(&cl[94..101], b"LayoutT");
    assert_eq!(
        u16::from_be_bytes([cl[101], cl[102]]) as usize,
        props.len(),
        "PROPLEN"
    );
    assert_eq!(&cl[103..103 + props.len()], props.as_bytes());
    assert_eq!(b.phy_offset, PhyOffset(size as u64));
    assert_eq!(be_i64(&cl, size + 20), 1, "second record QUEUEOFFSET");
    assert_eq!(
        be_i64(&cl, size + 28),
        size as i64,
        "second record PHYSICALOFFSET"
    );

    // ConsumeQueue: consumequeue/LayoutT/3/00000000000000000000, 20-byte units.
    let cq = std::fs::read(
        dir.path()
            .join("consumequeue/LayoutT/3/00000000000000000000"),
    )
    .unwrap();
    assert_eq!(cq.len(), 30_000 * 20);
    assert_eq!(be_i64(&cq, 0), a.phy_offset.0 as i64);
    assert_eq!(be_i32(&cq, 8) as usize, size);
    assert_eq!(be_i64(&cq, 12), java_string_hash("TagA") as i64);
    assert_eq!(be_i64(&cq, 20), b.phy_offset.0 as i64);
    assert_eq!(be_i64(&cq, 32), 0, "no tag → tagsCode 0");
    assert_eq!(&cq[40..60], &[0u8; 20], "nothing beyond the last unit");

    // IndexFile: one file named yyyyMMddHHmmssSSS, 40-byte header, size from slot/index counts.
    let idx_files: Vec<_> = std::fs::read_dir(dir.path().join("index"))
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(idx_files.len(), 1);
    let name = idx_files[0].file_name().into_string().unwrap();
    assert_eq!(name.len(), 17);
    assert!(name.bytes().all(|c| c.is_ascii_digit()));
    let idx = std::fs::read(idx_files[0].path()).unwrap();
    assert_eq!(idx.len(), 40 + 1024 * 4 + 4096 * 20);
    assert_eq!(be_i64(&idx, 0), T0, "beginTimestamp");
    assert_eq!(be_i64(&idx, 8), T0, "endTimestamp");
    assert_eq!(be_i64(&idx, 16), 0, "beginPhyOffset");
    assert_eq!(be_i64(&idx, 24), 0, "endPhyOffset");
    assert_eq!(
        be_i32(&idx, 32),
        2,
        "hashSlotCount (two keys, assuming distinct slots)"
    );
    assert_eq!(
        be_i32(&idx, 36),
        3,
        "indexCount starts at 1 and counts 2 entries"
    );
}

#[actix::test]
async fn sync_flush_acknowledges_only_flushed_messages_and_dispatches_only_flushed_bytes() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |p| p.sync_flush = true).await;
    for i in 0..50 {
        let ok = store
            .put(msg("SyncT", i % 2, b"durable", &[]))
            .await
            .unwrap();
        assert_eq!(ok.status, PutStatus::PutOk);
        assert!(
            store.flushed_offset() >= ok.end_offset(),
            "acknowledged after the flush reached it"
        );
    }
    // WAIT=false is answered at once and flushed within the group committer's 10 ms tick.
    let ok = store
        .put(msg("SyncT", 0, b"no-wait", &[(keys::WAIT, "false")]))
        .await
        .unwrap();
    settle(&store).await;
    assert!(store.flushed_offset() >= ok.end_offset());
    assert!(store.dispatched_offset() <= store.flushed_offset());
    assert_eq!(store.reader().max_offset("SyncT", 0), QueueOffset(26));
    store.shutdown().await.unwrap();
}

/// Many producers at once, in SYNC_FLUSH with write rings and small files (so bursts of the
/// writer's mailbox cross file rolls): appends that wait are held for the end of their burst and
/// committed and handed to the group committer together. Whatever the mix — waiting and
/// `WAIT=false` singles, `put_many` batches — every waiting append is acknowledged only once the
/// flush has reached it, nothing is lost or served twice, and every queue's offsets are
/// contiguous and name the messages sent with them.
#[actix::test]
async fn sync_flush_bursts_of_mixed_appends_acknowledge_only_flushed_bytes_and_lose_nothing() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Arc::new(
        open(dir.path(), &clock, |p| {
            p.sync_flush = true;
            p.commit_log_file_size = 256 * 1024;
        })
        .await,
    );
    const PRODUCERS: u32 = 24;
    const EACH: u32 = 40;
    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        let store = store.clone();
        tasks.push(actix_rt::spawn(async move {
            let mut sent = Vec::new();
            for i in 0..EACH {
                let q = ((p + i) % 4) as i32;
                let body = format!("p{p}-m{i}-{}", "x".repeat((i as usize * 97) % 3000));
                let waits = i % 5 != 4;
                let props: &[(&str, &str)] = if waits { &[] } else { &[(keys::WAIT, "false")] };
                if i % 7 == 3 {
                    // Two in one writer mailbox message (a connection thread's batch).
                    let second = format!("{body}-b");
                    let oks = store
                        .put_many(vec![
                            msg("Burst", q, body.as_bytes(), props),
                            msg("Burst", q, second.as_bytes(), props),
                        ])
                        .await;
                    for (ok, b) in oks.into_iter().zip([body, second]) {
                        let ok = ok.unwrap();
                        assert_eq!(ok.status, PutStatus::PutOk);
                        if waits {
                            assert!(store.flushed_offset() >= ok.end_offset(), "{b}");
                        }
                        sent.push((q, ok.queue_offset, b.into_bytes()));
                    }
                } else {
                    let ok = store
                        .put(msg("Burst", q, body.as_bytes(), props))
                        .await
                        .unwrap();
                    assert_eq!(ok.status, PutStatus::PutOk);
                    if waits {
                        assert!(
                            store.flushed_offset() >= ok.end_offset(),
                            "{body}: acknowledged before its flush"
                        );
                    }
                    sent.push((q, ok.queue_offset, body.into_bytes()));
                }
            }
            sent
        }));
    }
    let mut by_queue: std::collections::BTreeMap<
        i32,
        std::collections::BTreeMap<QueueOffset, Vec<u8>>,
    > = Default::default();
    for t in tasks {
        for (q, off, body) in t.await.unwrap() {
            assert!(
                by_queue.entry(q).or_default().insert(off, body).is_none(),
                "queue {q} offset {off:?} handed out twice"
            );
        }
    }
    assert!(
        store.reader().commit_log().files().len() > 3,
        "the run crossed several file rolls"
    );
    settle(&store).await;
    let mut total = 0;
    for (q, sent) in &by_queue {
        let got: std::collections::BTreeMap<QueueOffset, Vec<u8>> =
            all(&store, "Burst", *q).into_iter().collect();
        assert_eq!(
            &got, sent,
            "queue {q}: contiguous, each offset its own message"
        );
        assert_eq!(
            sent.keys().next_back().map(|o| o.0 + 1),
            Some(sent.len() as u64),
            "queue {q}: no gap"
        );
        total += sent.len();
    }
    assert!(total > (PRODUCERS * EACH) as usize, "batches add messages");
    Arc::try_unwrap(store)
        .ok()
        .expect("every producer is done")
        .shutdown()
        .await
        .unwrap();
}

#[actix::test]
async fn a_deleted_last_consume_queue_file_is_rebuilt_with_the_same_offsets() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    // 10 units per ConsumeQueue file, so the queue spans several files.
    let tweak = |p: &mut StoreParams| p.cq_file_size = 200;
    let mut before = Vec::new();
    {
        let store = open(dir.path(), &clock, tweak).await;
        put_numbered(&store, "Rebuild", 35).await;
        settle(&store).await;
        before.extend(all(&store, "Rebuild", 0));
        store.shutdown().await.unwrap();
    }
    let qdir = dir.path().join("consumequeue/Rebuild/0");
    let files = files(&qdir);
    assert_eq!(files.len(), 4);
    std::fs::remove_file(files.last().unwrap()).unwrap();

    let store = open(dir.path(), &clock, tweak).await;
    settle(&store).await;
    assert_queue_kept(&store, "Rebuild", &before).await;
    store.shutdown().await.unwrap();
}

/// Appends `m0`..`m{n-1}` to queue 0 of `topic`.
async fn put_numbered(store: &Store, topic: &str, n: u32) {
    for i in 0..n {
        let m = msg(topic, 0, format!("m{i}").as_bytes(), &[]);
        store.put(m).await.unwrap();
    }
}

/// After a rebuild: queue 0 of `topic` serves `before` again, at the same offsets, and the next
/// message takes the next offset (none is handed out twice).
async fn assert_queue_kept(store: &Store, topic: &str, before: &[(QueueOffset, Vec<u8>)]) {
    assert_eq!(
        all(store, topic, 0),
        before,
        "same messages at the same offsets"
    );
    let next = store.put(msg(topic, 0, b"after", &[])).await.unwrap();
    assert_eq!(
        next.queue_offset,
        QueueOffset(before.len() as _),
        "no offset handed out twice"
    );
}

/// Fills the CommitLog (1 MiB files in these tests) with `files` files' worth of 100 KiB
/// messages to another queue, so what came before lies outside the 3 files normal recovery scans.
async fn push_back(store: &Store, files: usize) {
    let body = vec![b'b'; 100 * 1024];
    for _ in 0..files * 10 {
        store.put(msg("Bulk", 0, &body, &[])).await.unwrap();
    }
}

/// A middle ConsumeQueue file is lost after a clean stop (the queue's records lie behind the 3
/// CommitLog files normal recovery scans, and the queue table is gone too): the start neither
/// refuses nor serves the queue up to the gap only — it cuts the queue at the gap and rebuilds
/// the rest from the CommitLog up to the units the later files showed, gap included, with the
/// same offsets, and the files come back under their names.
#[actix::test]
async fn a_deleted_middle_consume_queue_file_is_rebuilt_with_the_same_offsets() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| p.cq_file_size = 200;
    let qdir = dir.path().join("consumequeue/Gap/0");
    let names = || file_names(&qdir);
    let before = {
        let store = open(dir.path(), &clock, tweak).await;
        put_numbered(&store, "Gap", 35).await;
        push_back(&store, 4).await;
        settle(&store).await;
        let before = all(&store, "Gap", 0);
        store.shutdown().await.unwrap();
        before
    };
    assert_eq!(before.len(), 35);
    let names_before = names();
    assert_eq!(names_before.len(), 4);
    std::fs::remove_file(qdir.join(&names_before[1])).unwrap();
    // And no queue table (a store from RocketMQ, or one whose table is gone): what the files
    // after the gap hold must be enough to rebuild the queue.
    std::fs::remove_file(dir.path().join("config/consumeQueueMaxOffsets.json")).unwrap();

    let store = open(dir.path(), &clock, tweak).await;
    settle(&store).await;
    assert_eq!(
        all(&store, "Gap", 0),
        before,
        "same messages at the same offsets"
    );
    assert_eq!(
        names(),
        names_before,
        "the files come back under their names"
    );
    let next = store.put(msg("Gap", 0, b"after", &[])).await.unwrap();
    assert_eq!(
        next.queue_offset,
        QueueOffset(35),
        "no offset handed out twice"
    );
    store.shutdown().await.unwrap();
}

/// A queue's whole ConsumeQueue directory is lost after a clean stop, and its records lie in a
/// CommitLog file older than the 3 newest: the persisted queue table says the queue had 25 units,
/// so it is rebuilt from the CommitLog's start with the same offsets, new sends continue at 25,
/// and the next start of the now healthy store re-dispatches nothing.
#[actix::test]
async fn a_lost_consume_queue_directory_behind_the_scanned_files_is_rebuilt_with_the_same_offsets()
{
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| p.cq_file_size = 200;
    let before = {
        let store = open(dir.path(), &clock, tweak).await;
        put_numbered(&store, "Far", 25).await;
        push_back(&store, 5).await;
        settle(&store).await;
        let before = all(&store, "Far", 0);
        store.shutdown().await.unwrap();
        before
    };
    assert_eq!(before.len(), 25);
    let files = std::fs::read_dir(dir.path().join("commitlog"))
        .unwrap()
        .count();
    assert!(files >= 5, "{files} CommitLog files");
    let table = std::fs::read_to_string(dir.path().join("config/consumeQueueMaxOffsets.json"))
        .expect("the clean stop wrote the queue table");
    assert!(table.contains("\"Far\""), "{table}");
    std::fs::remove_dir_all(dir.path().join("consumequeue/Far")).unwrap();

    {
        let store = open(dir.path(), &clock, tweak).await;
        assert_eq!(
            store.report.redispatch_bytes, store.report.commit_log_end,
            "a queue with no unit left is rebuilt from the CommitLog's start"
        );
        assert_queue_kept(&store, "Far", &before).await;
        settle(&store).await;
        store.shutdown().await.unwrap();
    }
    let store = open(dir.path(), &clock, tweak).await;
    assert_eq!(
        store.report.redispatch_bytes, 0,
        "a healthy store re-dispatches nothing at start"
    );
    assert_eq!(all(&store, "Far", 0).len(), 26);
    store.shutdown().await.unwrap();
}

/// The queue lost only its last ConsumeQueue file, whose records lie before the 3 newest
/// CommitLog files: only the CommitLog from the end of its last remaining unit on is read again.
#[actix::test]
async fn a_lost_last_consume_queue_file_is_rebuilt_from_the_queues_own_end_only() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    // 10 units per ConsumeQueue file.
    let tweak = |p: &mut StoreParams| p.cq_file_size = 200;
    let (before, resume_at) = {
        let store = open(dir.path(), &clock, tweak).await;
        push_back(&store, 1).await;
        put_numbered(&store, "Far", 25).await;
        push_back(&store, 4).await;
        settle(&store).await;
        let unit19 = store
            .reader()
            .consume_queues()
            .get("Far", 0)
            .unwrap()
            .unit(QueueOffset(19))
            .unwrap();
        let before = all(&store, "Far", 0);
        store.shutdown().await.unwrap();
        (before, unit19.phy_offset as u64 + unit19.size as u64)
    };
    let last = dir.path().join("consumequeue/Far/0/00000000000000000400");
    std::fs::remove_file(&last).unwrap();

    let store = open(dir.path(), &clock, tweak).await;
    assert_eq!(
        store.report.commit_log_end - store.report.redispatch_bytes,
        resume_at,
        "re-dispatch starts right after the queue's last remaining unit"
    );
    assert_queue_kept(&store, "Far", &before).await;
    store.shutdown().await.unwrap();
}

/// A deleted topic stays deleted across restarts, even though its records are still in the
/// CommitLog files a start scans (and, after a crash, re-dispatches): a clean start does not even
/// count them as undispatched, an abnormal one does not dispatch them; only a topic created again
/// under the same name comes back, from its new records, at offset 0.
#[actix::test]
async fn a_deleted_topic_stays_deleted_after_abnormal_and_clean_restarts() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    // As after a crash: abnormal recovery re-dispatches from the first CommitLog file here (no
    // first record is older than the checkpoint).
    let abnormal = || async {
        let store = reopen(dir.path(), &clock, true, |_| {}).await;
        settle(&store).await;
        store
    };
    {
        let store = open(dir.path(), &clock, |_| {}).await;
        for i in 0..5u32 {
            store
                .put(msg("Gone", 0, format!("old{i}").as_bytes(), &[]))
                .await
                .unwrap();
        }
        settle(&store).await;
        assert_eq!(store.delete_topic("Gone").await.unwrap(), 1);
        store.put(msg("Other", 0, b"x", &[])).await.unwrap();
        settle(&store).await;
        store.shutdown().await.unwrap();
    }
    {
        let store = abnormal().await;
        assert_eq!(store.report.redispatch_bytes, store.report.commit_log_end);
        assert_eq!(all(&store, "Gone", 0), [], "the deleted topic came back");
        assert!(!dir.path().join("consumequeue/Gone").exists());
        store.shutdown().await.unwrap();
    }
    {
        let store = open(dir.path(), &clock, |_| {}).await;
        assert_eq!(
            store.report.redispatch_bytes, 0,
            "the deleted topic's records are not undispatched ones"
        );
        assert_eq!(all(&store, "Gone", 0), []);
        let ok = store.put(msg("Gone", 0, b"new0", &[])).await.unwrap();
        assert_eq!(ok.queue_offset, QueueOffset(0), "a new topic starts at 0");
        settle(&store).await;
        store.shutdown().await.unwrap();
    }
    let store = abnormal().await;
    assert_eq!(all(&store, "Gone", 0), [(QueueOffset(0), b"new0".to_vec())]);
    assert_eq!(all(&store, "Other", 0).len(), 1);
    store.shutdown().await.unwrap();
}

/// A checkpoint of the wrong size (a foreign tool, a damaged file system) does not stop the
/// start, and is not trusted either: it is moved aside and replaced by an empty one, as if there
/// had been none. After a clean stop the start is a normal one; after a crash recovery starts at
/// the first CommitLog file, and every message and key is found again.
#[actix::test]
async fn a_checkpoint_of_the_wrong_size_is_replaced_as_if_there_had_been_none() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let before = {
        let store = open(dir.path(), &clock, |_| {}).await;
        for i in 0..20u32 {
            let key = format!("ck-{i}");
            store
                .put(msg("Ck", 0, key.as_bytes(), &[(keys::KEYS, &key)]))
                .await
                .unwrap();
        }
        push_back(&store, 4).await;
        settle(&store).await;
        let before = all(&store, "Ck", 0);
        store.shutdown().await.unwrap();
        before
    };
    let cp = dir.path().join("checkpoint");
    let corrupt = dir.path().join("checkpoint.corrupt");
    let keys_found = |store: &Store| {
        let idx = store.index().expect("index enabled");
        (0..20)
            .filter(|i| {
                idx.query("Ck", &format!("ck-{i}"), 64, 0, i64::MAX)
                    .phy_offsets
                    .len()
                    == 1
            })
            .count()
    };
    for previous in [PreviousRun::Clean, PreviousRun::Crashed] {
        let fields = std::fs::read(&cp).unwrap()[..40].to_vec();
        std::fs::write(&cp, &fields).unwrap();
        let store = Store::open_with(
            StoreParams::for_tests(dir.path()),
            Arc::new(clock.clone()),
            None,
            previous,
        )
        .await
        .unwrap_or_else(|e| panic!("{previous:?}: a short checkpoint refused the start: {e}"));
        settle(&store).await;
        assert_eq!(store.report.abnormal, previous != PreviousRun::Clean);
        if previous == PreviousRun::Crashed {
            assert_eq!(store.report.scan_from, 0, "from the first CommitLog file");
            assert_eq!(
                store.report.redispatch_bytes, store.report.commit_log_end,
                "everything dispatched again"
            );
        }
        assert_eq!(all(&store, "Ck", 0), before, "{previous:?}");
        assert_eq!(keys_found(&store), 20, "{previous:?}");
        assert_eq!(std::fs::read(&corrupt).unwrap(), fields, "{previous:?}");
        let now = std::fs::read(&cp).unwrap();
        assert_eq!(now.len(), 4096);
        // Not left at zero until new traffic: seeded with what the clean stop had flushed (a
        // crash before the next flush would otherwise recover from the first file and drop
        // every index file), or written by the recovery after a crash.
        let physic = i64::from_be_bytes(now[..8].try_into().unwrap());
        let logics = i64::from_be_bytes(now[8..16].try_into().unwrap());
        assert!(physic > 0 && logics > 0, "{previous:?}: {physic} {logics}");
        store.shutdown().await.unwrap();
    }
}

#[actix::test]
async fn abnormal_recovery_redispatches_from_the_checkpoint_and_writes_a_checkpoint() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    {
        let store = open(dir.path(), &clock, |_| {}).await;
        for i in 0..20u32 {
            clock.advance_ms(10);
            store
                .put(msg(
                    "Abn",
                    0,
                    format!("m{i}").as_bytes(),
                    &[(keys::KEYS, &format!("k{i}"))],
                ))
                .await
                .unwrap();
        }
        store.shutdown().await.unwrap();
    }
    // The checkpoint (RocketMQ layout) says what was flushed and dispatched.
    let cp = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert_eq!(cp.len(), 4096);
    let physic = i64::from_be_bytes(cp[0..8].try_into().unwrap());
    let logics = i64::from_be_bytes(cp[8..16].try_into().unwrap());
    assert_eq!(physic, T0 + 200, "store time of the last flushed record");
    assert_eq!(logics, T0 + 200, "store time of the last dispatched unit");
    // Lose the ConsumeQueue and the index, then start as after a crash.
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    let p = {
        let mut p = StoreParams::for_tests(dir.path());
        p.root = dir.path().to_path_buf();
        p
    };
    let store = Store::open_with(p, Arc::new(clock.clone()), None, true)
        .await
        .unwrap();
    settle(&store).await;
    let got = all(&store, "Abn", 0);
    assert_eq!(got.len(), 20);
    assert_eq!(got[19], (QueueOffset(19), b"m19".to_vec()));
    assert_eq!(
        store
            .index()
            .unwrap()
            .query("Abn", "k7", 32, 0, i64::MAX)
            .phy_offsets
            .len(),
        1
    );
    store.shutdown().await.unwrap();
}

/// A message whose body is RocketMQ's default `maxMessageSize` (4 MiB) makes a record longer
/// than the reput's largest multi-record range: it is dispatched alone, and the messages after
/// it reach their queues — at once, and again by re-dispatch after an abnormal stop (before,
/// dispatch stopped in front of it for good and such a start never finished).
#[actix_rt::test]
async fn a_message_at_the_default_size_limit_is_dispatched_and_so_is_everything_after_it() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| {
        p.commit_log_file_size = 16 << 20;
        p.max_message_size = 4 << 20;
    };
    let big: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    {
        let store = open(dir.path(), &clock, tweak).await;
        store.put(msg("Big", 0, b"before", &[])).await.unwrap();
        let ok = store.put(msg("Big", 0, &big, &[])).await.unwrap();
        assert_eq!(ok.status, PutStatus::PutOk);
        store.put(msg("Big", 1, b"after", &[])).await.unwrap();
        assert!(
            store
                .wait_dispatched(store.max_offset(), Duration::from_secs(20))
                .await,
            "dispatch passes the 4 MiB record"
        );
        let q0 = all(&store, "Big", 0);
        assert_eq!(q0.len(), 2);
        assert_eq!(q0[1], (QueueOffset(1), big.clone()));
        assert_eq!(
            all(&store, "Big", 1),
            vec![(QueueOffset(0), b"after".to_vec())]
        );
        store.shutdown().await.unwrap();
    }
    // The ConsumeQueues lost and a start as after a crash: re-dispatch crosses it too.
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    let mut p = StoreParams::for_tests(dir.path());
    tweak(&mut p);
    let started = tokio::time::timeout(
        Duration::from_secs(30),
        Store::open_with(p, Arc::new(clock.clone()), None, true),
    )
    .await
    .expect("the abnormal start finishes")
    .unwrap();
    let q0 = all(&started, "Big", 0);
    assert_eq!(q0.len(), 2);
    assert_eq!(q0[1].1.len(), 4 << 20);
    assert_eq!(
        all(&started, "Big", 1),
        vec![(QueueOffset(0), b"after".to_vec())]
    );
    started.shutdown().await.unwrap();
}

/// QUEUEOFFSET lies outside the body CRC, so a record whose offset field was damaged on disk
/// passes recovery. Read as -1 it names no queue position: re-dispatch leaves that record out
/// (and logs it) instead of overflowing the unit's byte position — the start finishes, the other
/// messages are served, and the next send takes the free offset.
#[actix_rt::test]
async fn a_record_whose_queue_offset_was_damaged_is_not_dispatched_and_the_start_finishes() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let mut offsets = Vec::new();
    {
        let store = open(dir.path(), &clock, |_| {}).await;
        for i in 0..5u32 {
            let ok = store
                .put(msg("Dmg", 0, format!("m{i}").as_bytes(), &[]))
                .await
                .unwrap();
            offsets.push(ok.phy_offset);
        }
        store.shutdown().await.unwrap();
    }
    // The last record's QUEUEOFFSET (bytes 20..28 of the record) set to -1.
    let file = dir.path().join("commitlog").join(format!("{:020}", 0));
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all_at(&[0xFF; 8], offsets[4].0 + 20).unwrap();
    }
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    let started = tokio::time::timeout(
        Duration::from_secs(30),
        Store::open_with(
            StoreParams::for_tests(dir.path()),
            Arc::new(clock.clone()),
            None,
            true,
        ),
    )
    .await
    .expect("the start finishes")
    .unwrap();
    let got: Vec<_> = all(&started, "Dmg", 0)
        .into_iter()
        .map(|(o, b)| (o.0, String::from_utf8(b).unwrap()))
        .collect();
    let want: Vec<_> = (0..4u64).map(|i| (i, format!("m{i}"))).collect();
    assert_eq!(got, want);
    let ok = started.put(msg("Dmg", 0, b"next", &[])).await.unwrap();
    assert_eq!(ok.queue_offset, QueueOffset(4));
    started.shutdown().await.unwrap();
}

/// A ConsumeQueue unit that survived an abnormal stop torn — offset and size whole, tagsCode
/// not (a power loss keeping some sectors of a page, a process killed in the middle of the unit's
/// copy) — looks valid to the recovery scan, and re-dispatch would skip it as a replay, leaving
/// its message filtered by a wrong tag for good. Re-dispatch after an abnormal stop checks each
/// unit it replays and writes those that differ again: the torn units in the middle and at the
/// end come back byte for byte, whatever the previous run was.
#[actix_rt::test]
async fn consume_queue_units_torn_before_an_abnormal_stop_are_written_again() {
    let _shared = crate::shared().await;
    for previous in [PreviousRun::ProcessDied, PreviousRun::Crashed] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        {
            let store = open(dir.path(), &clock, |_| {}).await;
            for i in 0..40u32 {
                clock.advance_ms(10);
                let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
                store
                    .put(msg(
                        "Torn",
                        0,
                        format!("m{i}").as_bytes(),
                        &[(keys::TAGS, tag)],
                    ))
                    .await
                    .unwrap();
            }
            store.shutdown().await.unwrap();
        }
        let cq = dir.path().join("consumequeue/Torn/0/00000000000000000000");
        let whole = std::fs::read(&cq).unwrap()[..40 * 20].to_vec();
        // Unit layout: phy offset (8 bytes), size (4), tagsCode (8). Tear the tagsCode of unit 12
        // (in the middle) and of unit 39 (the last).
        let mut torn = std::fs::read(&cq).unwrap();
        torn[12 * 20 + 12..12 * 20 + 20].fill(0xff);
        torn[39 * 20 + 16..39 * 20 + 20].fill(0);
        std::fs::write(&cq, &torn).unwrap();
        let store = reopen(dir.path(), &clock, previous, |_| {}).await;
        settle(&store).await;
        let now = std::fs::read(&cq).unwrap();
        let differ: Vec<usize> = (0..40)
            .filter(|u| now[u * 20..u * 20 + 20] != whole[u * 20..u * 20 + 20])
            .collect();
        assert!(
            differ.is_empty(),
            "{previous:?}: units {differ:?} differ from what was dispatched before the stop"
        );
        let got = all(&store, "Torn", 0);
        assert_eq!(got.len(), 40, "{previous:?}");
        let next = store
            .put(msg("Torn", 0, b"after", &[(keys::TAGS, "TagA")]))
            .await
            .unwrap();
        assert_eq!(next.queue_offset, QueueOffset(40), "{previous:?}");
        store.shutdown().await.unwrap();
    }
}

/// A record whose properties lost their end from a page boundary on is cut by recovery, whatever
/// stopped the previous run. After a machine crash the page never reached the disk; after a
/// process death on this boot the commit's `pwrite` stopped at that page: a buffered write that
/// SIGKILL (the OOM killer's too) interrupts returns short at a page boundary. Its body CRC
/// still holds, so without the check the message would be served with its keys cut off.
#[actix_rt::test]
async fn a_record_whose_properties_stop_at_a_page_boundary_is_cut_after_any_abnormal_stop() {
    let _shared = crate::shared().await;
    for previous in [PreviousRun::ProcessDied, PreviousRun::Crashed] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let long_key = "k".repeat(6000);
        let torn_at;
        {
            let store = open(dir.path(), &clock, |_| {}).await;
            for i in 0..9u32 {
                clock.advance_ms(10);
                let m = msg("TornProps", 0, format!("m{i}").as_bytes(), &[]);
                store.put(m).await.unwrap();
            }
            clock.advance_ms(10);
            let m = msg("TornProps", 0, b"last", &[(keys::KEYS, &long_key)]);
            let props = m.properties.len() as u64;
            let ok = store.put(m).await.unwrap();
            let (at, len) = (ok.phy_offset.0, ok.wrote_bytes);
            // The first page boundary inside the properties (they are longer than a page).
            torn_at = (at + len - props + 1).div_ceil(4096) * 4096;
            assert!(torn_at < at + len);
            store.shutdown().await.unwrap();
        }
        let cl = dir.path().join("commitlog/00000000000000000000");
        let mut bytes = std::fs::read(&cl).unwrap();
        let end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
        bytes[torn_at as usize..end].fill(0);
        std::fs::write(&cl, &bytes).unwrap();
        let store = reopen(dir.path(), &clock, previous, |_| {}).await;
        settle(&store).await;
        let got = all(&store, "TornProps", 0);
        assert_eq!(got.len(), 9, "{previous:?}: the torn record was served");
        let next = store.put(msg("TornProps", 0, b"after", &[])).await.unwrap();
        assert_eq!(next.queue_offset, QueueOffset(9), "{previous:?}");
        store.shutdown().await.unwrap();
    }
}

/// `messageIndexSafe` without `messageIndexEnable` changes nothing, as in RocketMQ: with no index
/// the checkpoint's index time is never written, and honouring it would start every abnormal
/// recovery at the first CommitLog file.
#[actix_rt::test]
async fn message_index_safe_without_an_index_keeps_the_recovery_start_at_the_checkpoint() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| {
        p.commit_log_file_size = 64 << 10;
        p.message_index_enable = false;
        p.message_index_safe = true;
    };
    {
        let store = open(dir.path(), &clock, tweak).await;
        for _ in 0..100u32 {
            clock.advance_ms(100);
            store
                .put(msg("NoIndex", 0, &[7u8; 2000], &[]))
                .await
                .unwrap();
        }
        store.shutdown().await.unwrap();
    }
    let store = reopen(dir.path(), &clock, PreviousRun::Crashed, tweak).await;
    settle(&store).await;
    assert!(
        store.report.scan_from > 0,
        "abnormal recovery scanned from the first file"
    );
    assert_eq!(all(&store, "NoIndex", 0).len(), 100);
    store.shutdown().await.unwrap();
}

/// A record whose properties are not UTF-8 is kept by recovery and served as it is stored. A
/// RocketMQ 4.9 broker stores a batch element's properties as the client sent them (a Go or C++
/// client can send GBK in a key), and recovery used to read such a record as corrupt: it cut the
/// CommitLog there, every later message with it.
#[actix_rt::test]
async fn recovery_keeps_a_record_whose_properties_are_not_utf8() {
    let _shared = crate::shared().await;
    for previous in [
        PreviousRun::Clean,
        PreviousRun::ProcessDied,
        PreviousRun::Crashed,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let mut at = Vec::new();
        {
            let store = open(dir.path(), &clock, |_| {}).await;
            for i in 0..5u32 {
                clock.advance_ms(10);
                let m = msg(
                    "Gbk",
                    0,
                    format!("m{i}").as_bytes(),
                    &[(keys::TAGS, "TagA")],
                );
                at.push(store.put(m).await.unwrap().phy_offset.0 as usize);
            }
            store.shutdown().await.unwrap();
        }
        // Record 2's TAGS value becomes "Tag" and a byte that is no UTF-8 (outside the body CRC).
        let cl = dir.path().join("commitlog/00000000000000000000");
        let mut bytes = std::fs::read(&cl).unwrap();
        let tag = at[2]
            + bytes[at[2]..at[3]]
                .windows(4)
                .position(|w| w == b"TagA")
                .unwrap();
        bytes[tag + 3] = 0xB9;
        std::fs::write(&cl, &bytes).unwrap();
        let store = reopen(dir.path(), &clock, previous, |_| {}).await;
        settle(&store).await;
        assert_eq!(store.report.truncated_reason, None, "{previous:?}");
        let got = all(&store, "Gbk", 0);
        assert_eq!(got.len(), 5, "{previous:?}: {got:?}");
        let r = store.reader().get_messages(
            "Gbk",
            0,
            QueueOffset(2),
            GetLimits::default(),
            &TagFilter::all(),
        );
        assert_eq!(
            r.messages[0].as_bytes(),
            &bytes[at[2]..at[3]],
            "{previous:?}"
        );
        let next = store.put(msg("Gbk", 0, b"after", &[])).await.unwrap();
        assert_eq!(next.queue_offset, QueueOffset(5), "{previous:?}");
        store.shutdown().await.unwrap();
    }
}

/// messageIndexSafe: the checkpoint's index time names only *full* index files, as RocketMQ's
/// `IndexService.flush` does — a clean stop must not raise it to the end of the file still being
/// filled. Otherwise, after the next start appends to that file and crashes, abnormal recovery
/// deletes the file (its end is now later than the checkpoint) but starts re-dispatching from the
/// raised time, past the file's first keys, and they are gone from the index.
#[actix::test]
async fn index_safe_recovery_after_a_clean_stop_and_a_crash_keeps_every_key() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| {
        p.commit_log_file_size = 64 << 10;
        p.message_index_safe = true;
    };
    async fn put(store: &Store, i: u32) {
        let m = msg("Safe", 0, &[7u8; 2000], &[(keys::KEYS, &format!("k{i}"))]);
        store.put(m).await.unwrap();
    }
    // 100 messages over 10 s of store time, across several CommitLog files; a clean stop.
    {
        let store = open(dir.path(), &clock, tweak).await;
        for i in 0..100u32 {
            clock.advance_ms(100);
            put(&store, i).await;
        }
        store.shutdown().await.unwrap();
    }
    let after_first_stop = std::fs::read(dir.path().join("checkpoint")).unwrap();

    // The next run appends to the same index file, then crashes: on disk, its checkpoint still
    // holds the index time the first stop wrote (an unfilled index file never changes it).
    {
        let store = open(dir.path(), &clock, tweak).await;
        for i in 100..110u32 {
            clock.advance_ms(100);
            put(&store, i).await;
        }
        store.shutdown().await.unwrap();
    }
    let mut cp = std::fs::read(dir.path().join("checkpoint")).unwrap();
    cp[16..24].copy_from_slice(&after_first_stop[16..24]);
    std::fs::write(dir.path().join("checkpoint"), &cp).unwrap();

    let store = reopen(dir.path(), &clock, true, tweak).await;
    settle(&store).await;
    let missing = keys_not_found(&store, "Safe", 110);
    assert_eq!(missing, Vec::<u32>::new(), "keys lost from the index");
    store.shutdown().await.unwrap();
}

/// After a crash, whether the index files survive depends on what crashed. A broker process
/// that died on this boot (`PreviousRun::ProcessDied`, told by the abort file's boot id) left its
/// index files whole in the page cache: they are kept, and every key stays queryable. When the
/// machine may have gone down (`Crashed`), RocketMQ's rule applies: files newer than the
/// checkpoint's index time are removed and rebuilt from the recovery start only, so without
/// messageIndexSafe the keys before that start are gone — here those of the first seconds.
#[actix::test]
async fn a_process_death_keeps_every_key_a_machine_crash_keeps_those_after_the_recovery_start() {
    let _shared = crate::shared().await;
    let tweak = |p: &mut StoreParams| p.commit_log_file_size = 64 << 10;
    let mut missing_after = Vec::new();
    // The third run: a process death, but index files that are not the dead process's own (the
    // newest entry's key hash altered): handled as after a machine crash.
    for (previous, foreign) in [
        (PreviousRun::ProcessDied, false),
        (PreviousRun::Crashed, false),
        (PreviousRun::ProcessDied, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        {
            // 100 keyed messages over 10 s of store time, across four CommitLog files and one
            // unfilled index file; stopped cleanly, so the checkpoint is recent.
            let store = open(dir.path(), &clock, tweak).await;
            for i in 0..100u32 {
                clock.advance_ms(100);
                let m = msg("Died", 0, &[7u8; 2000], &[(keys::KEYS, &format!("k{i}"))]);
                store.put(m).await.unwrap();
            }
            store.shutdown().await.unwrap();
        }
        if foreign {
            let index = std::fs::read_dir(dir.path().join("index"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            let mut b = std::fs::read(&index).unwrap();
            let count = i32::from_be_bytes(b[36..40].try_into().unwrap()) as usize;
            let last = 40 + 1024 * 4 + (count - 1) * 20;
            b[last] ^= 0x5A;
            std::fs::write(&index, &b).unwrap();
        }
        let store = reopen(dir.path(), &clock, previous, tweak).await;
        settle(&store).await;
        let missing = keys_not_found(&store, "Died", 100);
        // Re-dispatch after either kind of crash starts from the checkpoint, not the first file.
        assert!(
            store.report.scan_from > 0,
            "{previous:?}: scan from the checkpoint"
        );
        missing_after.push((previous, missing));
        store.shutdown().await.unwrap();
    }
    assert_eq!(
        missing_after[0],
        (PreviousRun::ProcessDied, Vec::new()),
        "a process death keeps every key"
    );
    let (_, lost) = &missing_after[1];
    assert!(
        !lost.is_empty() && lost[0] == 0,
        "a machine crash rebuilds the unfilled index file from the recovery start only: {lost:?}"
    );
    assert_eq!(
        &missing_after[2].1, lost,
        "index files that do not match the CommitLog are not kept"
    );
}

/// A machine crash can cut the CommitLog below the end of an index file that stays (its end time
/// is not past the checkpoint's: under ASYNC_FLUSH the index is flushed and checkpointed ahead of
/// the CommitLog). Such a file names records that are gone, and its end offset — the index's
/// replay bound — would make it skip every new record written over the cut. It is removed with
/// the newer ones and rebuilt by re-dispatch: keys before the cut, and keys of what is appended
/// after the restart, are all found.
#[actix::test]
async fn index_files_that_name_records_past_the_recovered_end_are_rebuilt() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| {
        p.commit_log_file_size = 64 << 10;
        p.max_index_num = 40;
    };
    let mut at = Vec::new();
    {
        let store = open(dir.path(), &clock, tweak).await;
        for i in 0..100u32 {
            clock.advance_ms(100);
            let m = msg("Cut", 0, &[7u8; 2000], &[(keys::KEYS, &format!("k{i}"))]);
            at.push(store.put(m).await.unwrap().phy_offset.0);
        }
        store.shutdown().await.unwrap();
    }
    // The crash: everything from message 70 on never reached the disk. Its file keeps zeros
    // from there, later files were never made. The second index file (messages 40-79, full, its
    // end time checkpointed) survives with entries past the cut.
    let cut = at[70];
    let file_size = 64u64 << 10;
    cut_commit_log(dir.path(), cut, file_size);
    let store = reopen(dir.path(), &clock, PreviousRun::Crashed, tweak).await;
    assert_eq!(store.max_offset().0, cut, "recovery ends at the cut");
    for i in 100..120u32 {
        clock.advance_ms(100);
        let m = msg("Cut", 0, &[8u8; 2000], &[(keys::KEYS, &format!("k{i}"))]);
        store.put(m).await.unwrap();
    }
    settle(&store).await;
    let missing = keys_not_found(&store, "Cut", 120);
    assert_eq!(
        missing,
        (70..100).collect::<Vec<u32>>(),
        "only the keys of the cut messages are gone"
    );
    store.shutdown().await.unwrap();
}

/// The names in `root/index.corrupt/`, sorted.
fn corrupt_dir(root: &Path) -> Vec<String> {
    file_names(&root.join("index.corrupt"))
}

/// The index files' names in `root/index`, oldest first, and the other files there.
fn index_dir(root: &Path) -> (Vec<String>, Vec<String>) {
    file_names(&root.join("index"))
        .into_iter()
        .partition(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// The index is derived data: an index file whose header breaks a rule, or whose size is wrong,
/// does not refuse the start. It is moved aside to `index.corrupt/` beside `index/`, the files
/// after it go, and the index is rebuilt from the CommitLog — every key is found again, and keys
/// appended afterwards too.
#[actix::test]
async fn a_damaged_index_file_is_rebuilt_from_the_commit_log() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| {
        p.commit_log_file_size = 64 << 10;
        p.max_index_num = 40;
    };
    async fn put_keyed(store: &Store, clock: &ManualClock, range: std::ops::Range<u32>) {
        for i in range {
            clock.advance_ms(100);
            let m = msg("Dmg", 0, &[5u8; 1500], &[(keys::KEYS, &format!("k{i}"))]);
            store.put(m).await.unwrap();
        }
    }
    {
        let store = open(dir.path(), &clock, tweak).await;
        put_keyed(&store, &clock, 0..100).await;
        store.shutdown().await.unwrap();
    }
    // 39 entries per file: keys 0-38, 39-77, 78-99. The middle file's indexCount goes negative.
    let (files, _) = index_dir(dir.path());
    assert_eq!(files.len(), 3, "{files:?}");
    let middle = dir.path().join("index").join(&files[1]);
    let mut b = std::fs::read(&middle).unwrap();
    b[36..40].copy_from_slice(&(-7i32).to_be_bytes());
    std::fs::write(&middle, &b).unwrap();
    clock.advance_ms(1000); // the rebuilt files' names differ from the removed ones'
    {
        let store = open(dir.path(), &clock, tweak).await;
        settle(&store).await;
        assert_eq!(keys_not_found(&store, "Dmg", 100), Vec::<u32>::new());
        let (now, other) = index_dir(dir.path());
        assert!(other.is_empty(), "{other:?}");
        assert_eq!(corrupt_dir(dir.path()), vec![files[1].clone()], "{now:?}");
        assert!(
            !dir.path().join("index.rebuild").exists(),
            "the marker goes"
        );
        assert_eq!(now[0], files[0], "the file before the damaged one is kept");
        assert!(
            !now.contains(&files[2]),
            "the file after it is rebuilt: {files:?} {now:?}"
        );
        put_keyed(&store, &clock, 100..120).await;
        settle(&store).await;
        assert_eq!(keys_not_found(&store, "Dmg", 120), Vec::<u32>::new());
        store.shutdown().await.unwrap();
    }
    // The newest file loses its tail (a truncated copy): the same, and the first one stays.
    let (files, _) = index_dir(dir.path());
    let last = dir.path().join("index").join(files.last().unwrap());
    let len = std::fs::metadata(&last).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let store = open(dir.path(), &clock, tweak).await;
    settle(&store).await;
    assert_eq!(keys_not_found(&store, "Dmg", 120), Vec::<u32>::new());
    let aside = corrupt_dir(dir.path());
    assert_eq!(aside.len(), 2, "both damaged files kept aside: {aside:?}");
    store.shutdown().await.unwrap();
}

/// The other half of the rule above: once index files fill, a clean stop writes the end time of
/// the newest *full* one (read back from its header) as the checkpoint's index time.
#[actix::test]
async fn a_clean_stop_checkpoints_the_end_of_the_newest_full_index_file() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |p| p.max_index_num = 40).await;
    for i in 0..100u32 {
        clock.advance_ms(100);
        let m = msg("Full", 0, b"x", &[(keys::KEYS, &format!("k{i}"))]);
        store.put(m).await.unwrap();
    }
    store.shutdown().await.unwrap();
    let files = files(&dir.path().join("index"));
    assert!(files.len() >= 2, "index files rolled: {files:?}");
    // IndexHeader: beginTimestamp, endTimestamp, ... (big-endian).
    let end_of = |path: &std::path::Path| {
        let b = std::fs::read(path).unwrap();
        i64::from_be_bytes(b[8..16].try_into().unwrap())
    };
    let newest_full = end_of(&files[files.len() - 2]);
    let unfilled = end_of(&files[files.len() - 1]);
    assert!(newest_full < unfilled);
    let cp = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert_eq!(
        i64::from_be_bytes(cp[16..24].try_into().unwrap()),
        newest_full,
        "indexMsgTimestamp: the newest full file's end, not the unfilled file's"
    );
}

// ---------------------------------------------------------------------------------------------
// Write buffers (transientStorePoolEnable) and the untimed flusher
// ---------------------------------------------------------------------------------------------

/// Write buffers on, with a committer that commits only when told (or when a file is full): the
/// interval, thorough interval and least pages are out of reach of the test.
fn pooled(p: &mut StoreParams, buffers: usize) {
    p.transient_store_pool_size = buffers;
    p.commit_interval = Duration::from_secs(3600);
    p.commit_thorough_interval = Duration::from_secs(3600);
    p.commit_least_pages = 1 << 30;
}

fn commitlog_bytes(root: &Path) -> Vec<(String, Vec<u8>)> {
    let dir = root.join("commitlog");
    file_names(&dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

#[actix::test]
async fn write_buffers_hide_uncommitted_messages_and_store_what_the_unbuffered_store_stores() {
    let _shared = crate::shared().await;
    let plain_dir = tempfile::tempdir().unwrap();
    let pool_dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let file_size = 64 * 1024;
    let plain = open(plain_dir.path(), &clock, |p| {
        p.commit_log_file_size = file_size
    })
    .await;
    // Two buffers for five or more files: rolls need the committer to give buffers back.
    let store = open(pool_dir.path(), &clock, |p| {
        p.commit_log_file_size = file_size;
        pooled(p, 2);
    })
    .await;
    assert_eq!(store.write_buffer_pool().unwrap().capacity(), 2);
    let body = |i: u32| format!("{i:04}").repeat(256); // 1 KiB

    // Appended but not committed: acknowledged (ASYNC_FLUSH), invisible to every reader.
    let mut acks = Vec::new();
    for i in 0..10u32 {
        let m = msg("PoolT", (i % 3) as i32, body(i).as_bytes(), &[]);
        let a = plain.put(m.clone()).await.unwrap();
        let b = store.put(m).await.unwrap();
        assert_eq!(a, b, "offsets identical to the unbuffered store");
        acks.push(b);
    }
    let end = acks.last().unwrap().end_offset();
    assert_eq!(store.max_wrote_offset(), end);
    assert_eq!(
        store.max_offset(),
        PhyOffset(0),
        "nothing readable before a commit"
    );
    assert!(store.reader().record_at(PhyOffset(0)).is_none());
    let r = store.reader().get_messages(
        "PoolT",
        0,
        QueueOffset(0),
        GetLimits::default(),
        &TagFilter::all(),
    );
    assert!(r.messages.is_empty(), "a pull sees no uncommitted message");
    assert_eq!(store.dispatched_offset(), PhyOffset(0), "nor does dispatch");

    // Committed: readable, dispatched, pulled.
    assert_eq!(store.commit_now().await.unwrap(), end.0);
    assert_eq!(store.max_offset(), end);
    settle(&store).await;
    assert_eq!(all(&store, "PoolT", 0).len(), 4);

    // Roll across several files with a pool smaller than the number of files.
    for i in 10..300u32 {
        let m = msg("PoolT", (i % 3) as i32, body(i).as_bytes(), &[]);
        let a = plain.put(m.clone()).await.unwrap();
        let b = store.put(m).await.unwrap();
        assert_eq!(a, b, "offsets identical to the unbuffered store");
    }
    store.commit_now().await.unwrap();
    settle(&store).await;
    settle(&plain).await;
    assert_eq!(store.max_offset(), plain.max_offset());
    for q in 0..3 {
        assert_eq!(
            all(&store, "PoolT", q),
            all(&plain, "PoolT", q),
            "queue {q}"
        );
    }
    let pool = store.write_buffer_pool().unwrap().clone();
    plain.shutdown().await.unwrap();
    store.shutdown().await.unwrap();
    // Files the allocator prepared ahead (all zeros) depend on its timing, not on the data.
    let written = |root: &Path| {
        let mut v = commitlog_bytes(root);
        v.retain(|(_, bytes)| bytes.iter().any(|&x| x != 0));
        v
    };
    let (a, b) = (written(plain_dir.path()), written(pool_dir.path()));
    assert!(b.len() >= 5, "several files: {}", b.len());
    assert_eq!(a.len(), b.len());
    for ((na, ba), (nb, bb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        assert!(
            ba == bb,
            "{nb}: bytes identical to the unbuffered store's file"
        );
    }
    drop(store);
    assert_eq!(pool.available(), 2, "every buffer went back to the pool");
}

#[actix::test]
async fn the_store_reopened_with_write_buffers_after_a_clean_stop_serves_everything() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| {
        p.commit_log_file_size = 32 * 1024;
        // The default committer timing: commits on its own.
        p.transient_store_pool_size = 2;
        // Warming pre-faults the buffers while the writer may already be writing into them.
        p.warm_mapped_files = true;
    };
    let mut sent: Vec<(&str, i32, QueueOffset, Vec<u8>)> = Vec::new();
    for round in 0..3u32 {
        let store = open(dir.path(), &clock, tweak).await;
        assert_eq!(store.report.truncated_reason, None, "round {round}");
        for (topic, q, off, body) in &sent {
            let r = store.reader().get_messages(
                topic,
                *q,
                *off,
                GetLimits {
                    max_msgs: 1,
                    max_bytes: 1 << 20,
                    ..GetLimits::default()
                },
                &TagFilter::all(),
            );
            assert_eq!(
                r.status,
                GetStatus::Found,
                "round {round}: {topic}/{q}@{off:?}"
            );
            let Check::Record(rec) = record::check(r.messages[0].as_bytes(), true).unwrap() else {
                panic!("a record")
            };
            assert_eq!(rec.body, body.as_slice());
        }
        // Appends continue where the last run stopped, in the unbuffered tail file and then in
        // new, buffered files.
        for i in 0..120u32 {
            let topic = ["A", "B"][i as usize % 2];
            let body = format!("r{round}-m{i}-").repeat(30).into_bytes();
            let ok = store.put(msg(topic, 0, &body, &[])).await.unwrap();
            let expected = sent.iter().filter(|s| s.0 == topic).count() as u64;
            assert_eq!(ok.queue_offset, QueueOffset(expected));
            sent.push((topic, 0, ok.queue_offset, body));
        }
        store.shutdown().await.unwrap();
    }
}

/// SYNC_FLUSH with write rings zero-writes the next CommitLog file ahead of the writer (direct
/// I/O) until the writer claims it. With 64 KiB files and eight producers the writer rolls every
/// few dozen appends, racing the zeroing of the file it rolls into (and its own fallback creation
/// racing the allocator's): every acknowledged message must still read back intact, before and
/// after a restart.
#[actix::test]
async fn sync_flush_rolls_through_files_zeroed_ahead_without_losing_a_byte() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tweak = |p: &mut StoreParams| {
        p.sync_flush = true;
        p.commit_log_file_size = 64 * 1024;
    };
    let store = std::rc::Rc::new(open(dir.path(), &clock, tweak).await);
    let mut tasks = Vec::new();
    for p in 0..8u8 {
        let store = store.clone();
        tasks.push(actix_rt::spawn(async move {
            for i in 0..60u32 {
                let body =
                    vec![p.wrapping_mul(31).wrapping_add(i as u8); 500 + (i as usize * 37) % 900];
                let ok = store
                    .put(msg("ZeroAhead", p as i32 % 4, &body, &[]))
                    .await
                    .unwrap();
                assert_eq!(ok.status, PutStatus::PutOk);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let store = std::rc::Rc::try_unwrap(store)
        .ok()
        .expect("producers are done");
    settle(&store).await;
    assert!(
        store.max_offset().0 > 6 * 64 * 1024,
        "the writer rolled through many files"
    );
    let expected = |store: &Store| {
        let mut n = 0;
        for q in 0..4 {
            for (_, body) in all(store, "ZeroAhead", q) {
                assert!(
                    body.len() >= 500,
                    "queue {q}: a body of {} bytes",
                    body.len()
                );
                assert!(
                    body.iter().all(|&b| b == body[0]),
                    "queue {q}: a body changed"
                );
                n += 1;
            }
        }
        n
    };
    assert_eq!(expected(&store), 480, "every message, intact");
    store.shutdown().await.unwrap();
    let store = open(dir.path(), &clock, tweak).await;
    settle(&store).await;
    assert_eq!(expected(&store), 480, "and after a restart");
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn sync_flush_with_write_buffers_acknowledges_only_flushed_messages() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |p| {
        p.sync_flush = true;
        p.commit_log_file_size = 16 * 1024;
        p.transient_store_pool_size = 2;
    })
    .await;
    for i in 0..60 {
        let ok = store
            .put(msg("SyncPool", i % 2, &[b'x'; 700], &[]))
            .await
            .unwrap();
        assert_eq!(ok.status, PutStatus::PutOk);
        assert!(
            store.flushed_offset() >= ok.end_offset(),
            "acknowledged after the flush reached it"
        );
        assert!(
            store.max_offset() >= ok.end_offset(),
            "and committed (readable)"
        );
    }
    settle(&store).await;
    assert!(store.dispatched_offset() <= store.flushed_offset());
    assert_eq!(store.reader().max_offset("SyncPool", 0), QueueOffset(30));
    store.shutdown().await.unwrap();
}

/// A SYNC_FLUSH store with one message stored, whose CommitLog file descriptor now points at
/// `/dev/null`: the ring's `pwrite` "succeeds" and every `fdatasync` fails (EINVAL). Returns the
/// descriptor's number and a copy of the real file's descriptor, to put it back.
async fn sync_store_whose_flushes_fail(
    root: &Path,
    clock: &ManualClock,
) -> (Store, std::os::fd::RawFd, std::os::fd::OwnedFd) {
    use std::os::fd::{AsRawFd, FromRawFd};
    let store = open(root, clock, |p| p.sync_flush = true).await;
    store.put(msg("T", 0, b"kept", &[])).await.unwrap();
    let file = store.reader().commit_log().files().last().cloned().unwrap();
    let fd = file.as_raw_fd();
    // SAFETY: a copy of the file's descriptor, owned by the caller; then /dev/null's swapped in
    // under the file's number, which the store keeps using.
    let saved = unsafe { std::os::fd::OwnedFd::from_raw_fd(libc::dup(fd)) };
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    assert!(unsafe { libc::dup2(null.as_raw_fd(), fd) } >= 0);
    (store, fd, saved)
}

/// SYNC_FLUSH: a flush that fails — here `/dev/null` in place of the CommitLog file's descriptor,
/// so the ring's `pwrite` "succeeds" and the `fdatasync` fails (EINVAL) — is never acknowledged:
/// the append is refused with SERVICE_NOT_AVAILABLE naming the file, the store turns read-only,
/// the flushed position does not move, and the clean stop stops every store thread, then reports
/// the failure (without waiting for dispatch to reach bytes that will never be flushed).
#[actix_rt::test]
async fn a_failed_sync_flush_refuses_the_append_and_turns_the_store_read_only() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let (store, _, _) = sync_store_whose_flushes_fail(dir.path(), &clock).await;
    let flushed = store.flushed_offset();

    let e = store
        .put(msg("T", 0, b"not durable", &[]))
        .await
        .expect_err("an append whose flush failed is not acknowledged");
    assert_eq!(e.status, PutStatus::ServiceNotAvailable);
    assert!(
        e.remark.contains("flushing") && e.remark.contains("00000000000000000000"),
        "{}",
        e.remark
    );
    let again = store.put(msg("T", 0, b"later", &[])).await.unwrap_err();
    assert!(again.remark.contains("read-only"), "{}", again.remark);
    assert_eq!(
        store.flushed_offset(),
        flushed,
        "the flushed position did not move"
    );
    // The 20 s is a hang guard (the stop used to wait 30 s for dispatch), not a speed target.
    let stop = tokio::time::timeout(Duration::from_secs(20), store.shutdown())
        .await
        .expect("the stop does not wait for bytes that will never be flushed")
        .expect_err("the stop reports the failed flush");
    assert!(stop.to_string().contains("flushing"), "{stop}");
}

/// SYNC_FLUSH: a message sent with `WAIT=false` appended in the same batch as one that waits
/// is answered as stored, whatever that other message's flush does — here it fails, and the
/// waiting message alone is refused (before, both were: the batch had one reply, and a producer
/// retrying its refused `WAIT=false` message would have stored it twice).
#[actix_rt::test]
async fn a_message_that_does_not_wait_never_takes_the_outcome_of_another_messages_flush() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let (store, _, _) = sync_store_whose_flushes_fail(dir.path(), &clock).await;
    let r = store
        .put_many(vec![
            msg("T", 0, b"waits", &[]),
            msg("T", 1, b"does not wait", &[(keys::WAIT, "false")]),
            msg("T", 0, b"waits too", &[(keys::WAIT, "true")]),
        ])
        .await;
    assert_eq!(r.len(), 3);
    assert_eq!(
        r[0].as_ref().unwrap_err().status,
        PutStatus::ServiceNotAvailable
    );
    let ok = r[1]
        .as_ref()
        .expect("stored, and not waiting for the flush");
    assert_eq!(
        (ok.status, ok.queue_offset),
        (PutStatus::PutOk, QueueOffset(0))
    );
    assert_eq!(
        r[2].as_ref().unwrap_err().status,
        PutStatus::ServiceNotAvailable
    );
    let _ = tokio::time::timeout(Duration::from_secs(20), store.shutdown()).await;
}

/// Linux reports a write-back error once: the `fdatasync` after a failed one returns 0 though
/// the pages that failed may be gone. So once a flush failed none is tried again — here the real
/// descriptor is put back after the failure (the next `fdatasync` would succeed), and still the
/// flushed position stays where it was and the clean stop reports the failure (the broker then
/// keeps the abort file: the next start recovers as after a crash).
#[actix_rt::test]
async fn a_flush_failure_is_kept_even_when_the_next_fdatasync_would_succeed() {
    let _shared = crate::shared().await;
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let (store, fd, saved) = sync_store_whose_flushes_fail(dir.path(), &clock).await;
    let flushed = store.flushed_offset();
    let e = store.put(msg("T", 0, b"lost?", &[])).await.unwrap_err();
    assert_eq!(e.status, PutStatus::ServiceNotAvailable);
    // SAFETY: the file's own descriptor back under its number (the failure has been reported).
    assert!(unsafe { libc::dup2(saved.as_raw_fd(), fd) } >= 0);
    drop(saved);
    let stop = tokio::time::timeout(Duration::from_secs(20), store.shutdown())
        .await
        .expect("the stop ends")
        .expect_err("the stop reports the kept flush failure");
    assert!(stop.to_string().contains("flushing"), "{stop}");
    assert_eq!(
        store.flushed_offset(),
        flushed,
        "no later flush moved the flushed position"
    );
}

/// ASYNC_FLUSH: the flusher's thread runs 10 nice steps below the process (its write-back bursts
/// must not take a core from the request path); the rest of the store keeps the process's.
#[actix_rt::test]
async fn the_async_flusher_runs_below_the_request_path() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |_| {}).await;
    store.put(msg("T", 0, b"x", &[])).await.unwrap();
    // Field 19 of /proc/<pid>/task/<tid>/stat is the nice value; the command name (field 2) has
    // no spaces for these threads.
    let nice_of = |comm: &str| -> Vec<i64> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
            .filter(|stat| stat.contains(&format!("({comm})")))
            .filter_map(|stat| {
                stat.rsplit(')')
                    .next()?
                    .split_whitespace()
                    .nth(16)?
                    .parse()
                    .ok()
            })
            .collect()
    };
    let me: i64 = std::fs::read_to_string("/proc/thread-self/stat")
        .unwrap()
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(16)
        .unwrap()
        .parse()
        .unwrap();
    // Polled: other tests in this process may be starting stores whose flushers have not yet
    // lowered themselves.
    until(
        "every flusher thread runs 10 nice steps down",
        UNTIL,
        || {
            let flushers = nice_of("commitlog_flush");
            !flushers.is_empty() && flushers.iter().all(|&n| n == (me + 10).min(19))
        },
    )
    .await;
    let writers = nice_of("commitlog_write");
    assert!(
        !writers.is_empty() && writers.iter().all(|&n| n == me),
        "{writers:?}"
    );
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn an_untimed_flusher_is_woken_by_appends() {
    let _shared = crate::shared().await;
    for buffered in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let store = open(dir.path(), &clock, |p| {
            // Neither the flusher's nor the committer's clock could move anything in this test.
            p.flush_interval = Duration::from_secs(3600);
            p.flush_thorough_interval = Duration::from_secs(3600);
            p.flush_least_pages = 1;
            p.flush_timed = false;
            if buffered {
                pooled(p, 2);
                p.commit_least_pages = 1;
            }
        })
        .await;
        let ok = store
            .put(msg("Untimed", 0, &[b'u'; 5000], &[]))
            .await
            .unwrap();
        until(
            &format!("buffered={buffered}: flushed by a wake"),
            UNTIL,
            || store.flushed_offset() >= ok.end_offset(),
        )
        .await;
        store.shutdown().await.unwrap();
    }
}

/// Write rings (the default write path): a commit that fails — here a read-only descriptor in
/// place of the CommitLog file's, so `pwrite` gets EBADF — is never acknowledged: the append is
/// refused with SERVICE_NOT_AVAILABLE naming the cause, the store turns read-only, and no reader
/// ever sees the record (it is in the ring, not in the file). In ASYNC_FLUSH the writer commits
/// after each append; in SYNC_FLUSH a waiting append's commit is held for the end of the writer's
/// burst, and the failure reaches the producer from there.
#[actix_rt::test]
async fn a_failed_write_ring_commit_is_refused_and_never_served() {
    let _shared = crate::shared().await;
    use std::os::fd::AsRawFd;
    for sync in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let store = open(dir.path(), &clock, |p| p.sync_flush = sync).await;
        assert!(
            store.write_buffer_pool().is_none(),
            "write rings, not transientStorePoolEnable"
        );
        let first = store.put(msg("T", 0, b"kept", &[])).await.unwrap();
        let file = store.reader().commit_log().files().last().cloned().unwrap();
        assert!(
            file.is_buffered(),
            "the file being written has a write ring"
        );
        let ro = std::fs::File::open(file.path()).unwrap();
        // SAFETY: swaps the file's descriptor for a read-only one; the store keeps using the
        // number.
        assert!(unsafe { libc::dup2(ro.as_raw_fd(), file.as_raw_fd()) } >= 0);

        let e = store
            .put(msg("T", 0, b"lost", &[]))
            .await
            .expect_err("an append whose commit failed is not acknowledged");
        assert_eq!(e.status, PutStatus::ServiceNotAvailable, "sync {sync}");
        assert!(
            e.remark.contains("committing CommitLog bytes"),
            "sync {sync}: {}",
            e.remark
        );
        let again = store.put(msg("T", 0, b"later", &[])).await.unwrap_err();
        assert!(again.remark.contains("read-only"), "{}", again.remark);
        assert_eq!(
            store.max_offset().0,
            first.end_offset().0,
            "sync {sync}: only the acknowledged record is readable"
        );
        settle(&store).await;
        let served: Vec<_> = all(&store, "T", 0).into_iter().map(|(_, b)| b).collect();
        assert_eq!(served, vec![b"kept".to_vec()], "sync {sync}");
        // The stop does not wait for dispatch to reach bytes that never left the ring (it would
        // give up only after its 30 s bound); the 20 s here is a hang guard, not a speed target.
        tokio::time::timeout(Duration::from_secs(20), store.shutdown())
            .await
            .expect("the stop does not wait for uncommitted bytes")
            .expect("the stop itself succeeds");
    }
}

/// `fastFailIfNoBufferInStorePool=true`, one write buffer, held by a file that is full but not
/// committed yet: the append that needs the next file is refused with CREATE_MAPEDFILE_FAILED and a
/// remark naming the pool, consumes no queue offset, and the next append succeeds once the
/// committer has given the buffer back.
#[actix::test]
async fn fast_fail_refuses_an_append_without_a_free_write_buffer_until_one_returns() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let file_size = 64 * 1024;
    let store = open(dir.path(), &clock, |p| {
        p.commit_log_file_size = file_size;
        pooled(p, 1);
        p.fast_fail_no_buffer = true;
    })
    .await;
    let pool = store.write_buffer_pool().unwrap().clone();
    // Three 20 KiB messages fill most of the first file (its one buffer).
    let body = vec![b'p'; 20 * 1024];
    for i in 0..3 {
        let ok = store.put(msg("Pool", 0, &body, &[])).await.unwrap();
        assert_eq!(ok.queue_offset, QueueOffset(i));
    }
    // The committer's mailbox is FIFO: once this answers, no wake is pending, so nothing commits
    // (and frees the buffer) while the next append rolls.
    store.commit_now().await.unwrap();
    assert_eq!(pool.available(), 0, "the first file holds the only buffer");

    let e = store.put(msg("Pool", 0, &body, &[])).await.unwrap_err();
    assert_eq!(e.status, PutStatus::CreateMappedFileFailed, "{}", e.remark);
    for needle in [
        "TransientStorePool",
        "transientStorePoolSize",
        "fastFailIfNoBufferInStorePool",
    ] {
        assert!(e.remark.contains(needle), "{needle}: {}", e.remark);
    }

    // The full first file is committed whole: its buffer returns and appends go on.
    store.commit_now().await.unwrap();
    assert_eq!(
        pool.available(),
        1,
        "the committed file gave its buffer back"
    );
    let ok = store.put(msg("Pool", 0, &body, &[])).await.unwrap();
    assert_eq!(
        ok.queue_offset,
        QueueOffset(3),
        "the refusal took no queue offset"
    );
    assert_eq!(ok.phy_offset, PhyOffset(file_size), "in the next file");
    store.commit_now().await.unwrap();
    settle(&store).await;
    let got: Vec<QueueOffset> = all(&store, "Pool", 0).into_iter().map(|(o, _)| o).collect();
    assert_eq!(got, (0..4).map(QueueOffset).collect::<Vec<_>>());
    store.shutdown().await.unwrap();
}

/// A clean stop whose final commit keeps failing (the CommitLog file's descriptor is swapped for a
/// read-only one, so every `pwrite` fails with EBADF): the stop still completes, then reports the
/// failure after its bounded retries, and nothing it could not commit became readable.
#[actix::test]
async fn a_clean_stop_retries_a_failing_final_commit_then_reports_it() {
    let _shared = crate::shared().await;
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = open(dir.path(), &clock, |p| {
        p.commit_log_file_size = 64 * 1024;
        pooled(p, 2);
    })
    .await;
    put_numbered(&store, "Stop", 3).await;
    assert!(store.max_wrote_offset().0 > 0);
    assert_eq!(store.max_offset(), PhyOffset(0), "written, not committed");
    let file = store.reader().commit_log().files()[0].clone();
    let ro = std::fs::File::open(file.path()).unwrap();
    // SAFETY: dup2 onto a descriptor the store owns and keeps open; only its target changes.
    assert!(unsafe { libc::dup2(ro.as_raw_fd(), file.as_raw_fd()) } >= 0);

    let e = store.shutdown().await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("the final commit failed after 10 attempts"),
        "{text}"
    );
    assert!(text.contains("committing CommitLog bytes"), "{text}");
    assert_eq!(store.max_offset(), PhyOffset(0), "nothing was committed");
    let why = store
        .state()
        .read_only
        .load_full()
        .expect("the failed commit is recorded");
    assert!(why.contains("committing CommitLog bytes"), "{why}");
    assert!(
        std::fs::read(file.path()).unwrap().iter().all(|&b| b == 0),
        "no byte reached the file"
    );
}

/// The checkpoint's logics time counts only ConsumeQueue units on disk: a queue's part-filled
/// page, which a flush with `flushConsumeQueueLeastPages` (2) leaves alone, holds it back until
/// a thorough flush (`flushConsumeQueueThoroughInterval`) writes that page. Published at
/// dispatch, a power loss could take the page while recovery started past its records.
#[actix::test]
async fn the_logics_time_waits_for_a_flush_that_leaves_every_unit_on_disk() {
    let _shared = crate::shared().await;
    use std::sync::atomic::Ordering;
    let clock = ManualClock::new(T0);
    let logics = |s: &Store| s.state().logics_ts.load(Ordering::Acquire);
    for (thorough, name) in [
        (Duration::from_secs(3600), "never"),
        (Duration::from_millis(300), "soon"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &clock, |p| {
            p.cq_flush_interval = Duration::from_millis(50);
            p.cq_flush_thorough_interval = thorough;
        })
        .await;
        for i in 0..5u32 {
            clock.advance_ms(10);
            store
                .put(msg("Quiet", 0, format!("q{i}").as_bytes(), &[]))
                .await
                .unwrap();
        }
        settle(&store).await;
        let last = clock.now_ms();
        if name == "never" {
            // Twenty timed flushes: none of them writes the one part-filled page.
            actix_rt::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(logics(&store), 0, "no thorough flush yet: nothing counted");
        } else {
            let started = std::time::Instant::now();
            while logics(&store) != last {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "the thorough flush publishes the last unit's time ({last}), got {}",
                    logics(&store)
                );
                actix_rt::time::sleep(Duration::from_millis(20)).await;
            }
        }
        store.shutdown().await.unwrap();
    }
}

/// What a consumer of `topic`/`q` reads from the queue's min offset on: (queue offset, body,
/// CommitLog offset) of every message.
fn from_min(store: &Store, topic: &str, q: i32) -> Vec<(u64, String, u64)> {
    let mut out = Vec::new();
    let mut off = store.reader().min_offset(topic, q);
    loop {
        let r = store
            .reader()
            .get_messages(topic, q, off, GetLimits::default(), &TagFilter::all());
        if r.status != GetStatus::Found {
            break;
        }
        for (m, o) in r.messages.iter().zip(&r.queue_offsets) {
            let Check::Record(rec) = record::check(m.as_bytes(), true).unwrap() else {
                panic!("blank served as a message")
            };
            // Offset, a short form of the body (a failure prints it), CommitLog offset.
            let b = String::from_utf8_lossy(rec.body);
            out.push((
                o.0,
                format!("{}.. ({} B)", &b[..8.min(b.len())], b.len()),
                rec.phy_offset as u64,
            ));
        }
        off = r.next_begin_offset;
    }
    out
}

/// Retention (Apache's `DefaultMessageStore.CleanCommitLogService`): with every file expired, one
/// round deletes every CommitLog file but the last, then the ConsumeQueue and index files that only
/// point into them. A consumer below the new min offset is told OFFSET_TOO_SMALL with the min as
/// its next offset, and from there reads every message still stored, intact, with its old queue
/// offset. Appends go on meanwhile. Clean and abnormal restarts keep the same min offsets
/// (`correctMinOffset` at load).
#[actix::test]
async fn retention_deletes_expired_files_and_consumers_resume_at_the_new_min_offset() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let file = 64 * 1024u64;
    let tweak = move |p: &mut StoreParams| {
        p.commit_log_file_size = file;
        p.cq_file_size = 10 * 20; // 10 units per ConsumeQueue file
        p.max_hash_slot_num = 64;
        p.max_index_num = 64; // a new index file every 64 keys
        let mut retention = actormq::store::cleaner::RetentionParams::immediate();
        // deleteConsumeQueueFilesInterval: one queue that deleted per step, a pause between;
        // every queue must still be cleaned in the round (checked below, queue by queue).
        retention.cq_delete_pause = Duration::from_millis(1);
        p.retention = Some(retention);
    };
    let store = open(dir.path(), &clock, tweak).await;
    let body = |i: u32| format!("{i:04}").repeat(256);
    let mut sent = Vec::new();
    for i in 0..300u32 {
        let k = format!("k{i}");
        let ok = store
            .put(msg(
                "Ret",
                (i % 3) as i32,
                body(i).as_bytes(),
                &[(keys::KEYS, &k)],
            ))
            .await
            .unwrap();
        sent.push((i, ok.queue_offset, ok.phy_offset));
    }
    settle(&store).await;
    let end = store.max_offset();
    until("everything flushed", UNTIL, || {
        store.flushed_offset() >= end
    })
    .await;
    let files = end.0.div_ceil(file);
    assert!(files >= 5, "{files} CommitLog files");

    let r = store.clean_now().await.unwrap();
    let min = (files - 1) * file;
    assert_eq!(r.commit_log_files as u64, files - 1, "{r:?}");
    assert_eq!(r.min_offset, min);
    assert!(r.consume_queue_files > 0 && r.index_files > 0, "{r:?}");
    assert_eq!(store.reader().commit_log().min_offset(), min);
    // The last file is left (and the next, which the allocator may have made ahead).
    let mut on_disk = file_names(&dir.path().join("commitlog"));
    on_disk.retain(|n| !n.starts_with('.'));
    assert_eq!(on_disk[0], format!("{min:020}"), "{on_disk:?}");
    assert_eq!(
        store
            .index()
            .unwrap()
            .query("Ret", "k0", 32, 0, i64::MAX)
            .phy_offsets,
        Vec::<i64>::new(),
        "the first key's index file went with its messages"
    );

    let check = |store: &Store, sent: &[(u32, QueueOffset, PhyOffset)], what: &str| {
        for q in 0..3 {
            let kept: Vec<_> = sent
                .iter()
                .filter(|(i, _, phy)| *i % 3 == q as u32 && phy.0 >= min)
                .collect();
            let first = kept[0].1;
            assert_eq!(
                store.reader().min_offset("Ret", q),
                first,
                "{what}: q{q} min"
            );
            let r = store.reader().get_messages(
                "Ret",
                q,
                QueueOffset(0),
                GetLimits::default(),
                &TagFilter::all(),
            );
            assert_eq!(
                (r.status, r.next_begin_offset),
                (GetStatus::OffsetTooSmall, first),
                "{what}: q{q} from 0"
            );
            let got = from_min(store, "Ret", q);
            let want: Vec<_> = kept
                .iter()
                .map(|(i, off, phy)| (off.0, format!("{}.. (1024 B)", &body(*i)[..8]), phy.0))
                .collect();
            assert_eq!(got, want, "{what}: q{q} reads every kept message");
        }
    };
    check(&store, &sent, "after the round");
    // A second round has nothing left to delete.
    assert_eq!(
        store.clean_now().await.unwrap(),
        actormq::store::cleaner::CleanReport {
            min_offset: min,
            ..Default::default()
        }
    );
    let next = store
        .put(msg("Ret", 0, body(300).as_bytes(), &[]))
        .await
        .unwrap();
    assert_eq!(next.queue_offset, QueueOffset(100));
    sent.push((300, next.queue_offset, next.phy_offset));
    store.shutdown().await.unwrap();

    let store = open(dir.path(), &clock, tweak).await;
    check(&store, &sent, "after a clean restart");
    store.shutdown().await.unwrap();
    // As after a machine crash: RocketMQ's abnormal recovery path.
    let store = reopen(dir.path(), &clock, PreviousRun::Crashed, tweak).await;
    settle(&store).await;
    assert!(store.report.abnormal);
    check(&store, &sent, "after an abnormal restart");
    store.shutdown().await.unwrap();
}

/// Between retention's deletion of CommitLog files and the cleanup of a queue (paused here by
/// `deleteConsumeQueueFilesInterval`), that queue's first units name deleted messages. A search
/// by time (SEARCH_OFFSET_BY_TIMESTAMP, a consumer reset to a time) counts them as older than any
/// time, as RocketMQ does, instead of ending in the deleted prefix and sending the consumer back
/// over every message from the queue's old start.
#[actix::test]
async fn a_search_by_time_skips_units_whose_messages_retention_deleted() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let file = 64 * 1024u64;
    let tweak = move |p: &mut StoreParams| {
        p.commit_log_file_size = file;
        p.cq_file_size = 10 * 20;
        let mut retention = actormq::store::cleaner::RetentionParams::immediate();
        retention.cq_delete_pause = Duration::from_secs(3600);
        p.retention = Some(retention);
    };
    let store = std::rc::Rc::new(open(dir.path(), &clock, tweak).await);
    let mut sent = Vec::new();
    for i in 0..300u32 {
        clock.advance_ms(10);
        let ok = store
            .put(msg("Late", (i % 3) as i32, &[b'x'; 1024], &[]))
            .await
            .unwrap();
        sent.push((
            i % 3,
            ok.queue_offset,
            ok.phy_offset,
            T0 + 10 * (i as i64 + 1),
        ));
    }
    settle(&store).await;
    let end = store.max_offset();
    until("everything flushed", UNTIL, || {
        store.flushed_offset() >= end
    })
    .await;
    let round = {
        let store = store.clone();
        actix_rt::spawn(async move { store.clean_now().await })
    };
    // Every CommitLog file but the last goes (the round deletes them without a pause).
    let min = (end.0.div_ceil(file) - 1) * file;
    assert!(min >= 3 * file, "{min}");
    until("CommitLog files deleted", UNTIL, || {
        store.reader().commit_log().min_offset() == min
    })
    .await;
    // A time before every remaining message: each queue's first unit at or past `min`.
    for q in 0..3u32 {
        let first_kept = sent
            .iter()
            .find(|(qq, _, phy, _)| *qq == q && phy.0 >= min)
            .map(|(_, off, _, _)| *off)
            .unwrap();
        let got = store.reader().offset_by_time("Late", q as i32, T0);
        assert_eq!(got, first_kept, "queue {q}: min {min}");
    }
    store.shutdown().await.unwrap();
    let _ = round.await;
}

/// A clean stop does not wait out `deleteConsumeQueueFilesInterval`: a retention round paused
/// between two ConsumeQueues stops at once, no later step runs, and the next start corrects every
/// queue's min offset to the CommitLog's first byte; its first round deletes the rest.
#[actix::test]
async fn a_stop_cuts_a_paused_retention_round_short_and_the_next_start_finishes_it() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let file = 64 * 1024u64;
    let tweak = |pause: Duration| {
        move |p: &mut StoreParams| {
            p.commit_log_file_size = file;
            p.cq_file_size = 10 * 20; // 10 units per ConsumeQueue file
            let mut retention = actormq::store::cleaner::RetentionParams::immediate();
            retention.cq_delete_pause = pause;
            p.retention = Some(retention);
        }
    };
    let store = open(dir.path(), &clock, tweak(Duration::from_secs(3600))).await;
    let mut first_kept = [None; 3];
    let body = vec![b'r'; 1024];
    let mut phys = Vec::new();
    for i in 0..300u32 {
        let ok = store
            .put(msg("Ret", (i % 3) as i32, &body, &[]))
            .await
            .unwrap();
        phys.push((i % 3, ok.queue_offset, ok.phy_offset));
    }
    settle(&store).await;
    let end = store.max_offset();
    until("everything flushed", UNTIL, || {
        store.flushed_offset() >= end
    })
    .await;
    let min = (end.0.div_ceil(file) - 1) * file;
    for (q, off, phy) in &phys {
        if phy.0 >= min && first_kept[*q as usize].is_none() {
            first_kept[*q as usize] = Some(*off);
        }
    }
    let cq_file = |q: i32| dir.path().join(format!("consumequeue/Ret/{q}/{:020}", 0));
    let (round, ()) = tokio::join!(store.clean_now(), async {
        until("queue 0's first ConsumeQueue file deleted", UNTIL, || {
            !cq_file(0).exists()
        })
        .await;
        // Hang detection only: the round now pauses an hour before queue 1.
        tokio::time::timeout(Duration::from_secs(60), store.shutdown())
            .await
            .expect("the stop does not wait out the pause")
            .unwrap();
    });
    let round = round.unwrap();
    assert!(round.commit_log_files > 0, "{round:?}");
    assert!(round.consume_queue_files > 0, "{round:?}");
    assert!(
        cq_file(1).exists() && cq_file(2).exists(),
        "queues 1 and 2 untouched"
    );
    drop(store);

    let store = open(dir.path(), &clock, tweak(Duration::ZERO)).await;
    settle(&store).await;
    for q in 0..3 {
        assert_eq!(
            Some(store.reader().min_offset("Ret", q)),
            first_kept[q as usize],
            "q{q}: min offset corrected at start"
        );
    }
    let r = store.clean_now().await.unwrap();
    assert!(r.consume_queue_files >= 2, "{r:?}");
    assert!(!cq_file(1).exists() && !cq_file(2).exists());
    store.shutdown().await.unwrap();
}

/// Retention takes delayed messages not yet due with their CommitLog files (RocketMQ does too).
/// The level's delivery then goes on from its queue's new min offset: a message delayed after the
/// round is delivered, although the level's progress still points into ConsumeQueue files that
/// are gone.
/// A delayed message the store can never take back (here bigger than `maxMessageSize`, lowered
/// since it was stored) is skipped with an error, and the messages behind it in its level are
/// delivered once each. Before, the level retried it on every tick together with everything
/// behind it, and each retry appended those again: duplicates by the thousand per second.
#[actix::test]
async fn a_delayed_message_the_store_refuses_for_good_is_skipped_and_the_rest_delivered_once() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    {
        let store = open(dir.path(), &clock, |_| {}).await;
        for (i, len) in [10usize, 3000, 10, 10].into_iter().enumerate() {
            let body = vec![b'a' + i as u8; len];
            store
                .put(msg("Due", 0, &body, &[(keys::DELAY, "1")]))
                .await
                .unwrap();
        }
        store.shutdown().await.unwrap();
    }
    let store = open(dir.path(), &clock, |p| p.max_message_size = 1024).await;
    settle(&store).await;
    clock.advance_ms(2_000);
    let progress = poll(
        3_000,
        Duration::from_millis(10),
        || async {
            store
                .delay_offsets()
                .await
                .and_then(|o| o.0.get(&1).copied())
        },
        |progress| *progress == Some(4),
    )
    .await;
    assert_eq!(
        progress,
        Some(4),
        "the level's progress past all four within 30 s"
    );
    // A few more rounds: nothing is delivered again.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    let got = from_min(&store, "Due", 0);
    let bodies: Vec<u8> = got.iter().map(|(_, b, _)| b.as_bytes()[0]).collect();
    assert_eq!(bodies, b"acd", "{got:?}");
    store.shutdown().await.unwrap();
}

#[actix::test]
async fn delayed_delivery_goes_on_after_retention_deleted_the_levels_oldest_units() {
    let _shared = crate::shared().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let file = 64 * 1024u64;
    let store = open(dir.path(), &clock, move |p| {
        p.commit_log_file_size = file;
        p.cq_file_size = 10 * 20; // 10 units per ConsumeQueue file
        p.retention = Some(actormq::store::cleaner::RetentionParams::immediate());
    })
    .await;
    // 15 level-1 messages (two ConsumeQueue files of the level's queue), not due: the clock
    // stands still.
    for i in 0..15 {
        let body = format!("early-{i}");
        store
            .put(msg("Late", 0, body.as_bytes(), &[(keys::DELAY, "1")]))
            .await
            .unwrap();
    }
    // Then enough to fill several CommitLog files, so the first ones can go.
    for i in 0..300u32 {
        let body = format!("{i:04}").repeat(256);
        store
            .put(msg("Filler", 0, body.as_bytes(), &[]))
            .await
            .unwrap();
    }
    settle(&store).await;
    let end = store.max_offset();
    until("everything flushed", UNTIL, || {
        store.flushed_offset() >= end
    })
    .await;
    let r = store.clean_now().await.unwrap();
    assert!(r.commit_log_files >= 4, "{r:?}");
    let sq = store
        .reader()
        .queue(SCHEDULE_TOPIC, 0)
        .expect("level 1 queue");
    assert!(
        sq.min_offset() >= QueueOffset(10),
        "the level's first ConsumeQueue file went: min {:?}",
        sq.min_offset()
    );
    let progress = store.delay_offsets().await.unwrap().0.get(&1).copied();
    assert_eq!(
        progress.unwrap_or(0),
        0,
        "nothing delivered: progress still in the gone file"
    );

    store
        .put(msg("Late", 0, b"after-retention", &[(keys::DELAY, "1")]))
        .await
        .unwrap();
    settle(&store).await;
    clock.advance_ms(1_000);
    until(
        "the message delayed after the round is delivered",
        UNTIL,
        || store.reader().max_offset("Late", 0) >= QueueOffset(1),
    )
    .await;
    let got = from_min(&store, "Late", 0);
    assert_eq!(
        got.len(),
        1,
        "only the message whose record is still stored: {got:?}"
    );
    assert!(got[0].1.starts_with("after-re"), "{got:?}");
    store.shutdown().await.unwrap();
}
