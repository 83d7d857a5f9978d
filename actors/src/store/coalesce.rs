//! Per-thread coalescing of appends: what the tasks of one thread hand the store during one turn
//! of its scheduler reaches the CommitLog writer as one `AppendBatch` — one mailbox hop, one
//! wake-up of the writer's thread and, in SYNC_FLUSH, one flush wait answered by one cross-thread
//! wake — instead of one of each per message. At 256 producers on one thread that is the
//! difference between ~150 writer messages and ~150 answers per group commit, and one of each.
//!
//! * [`TurnBatch`] — the mechanism: items pushed during a turn, drained together by the task the
//!   turn's first push spawns, after one `yield_now` (so every task already made ready in this
//!   turn pushes first). The broker's connection threads use it for SENDs
//!   (`broker::send_batch::SendBatcher`, which also accounts per batch).
//! * [`PutCoalescer`] — a per-thread front of [`Store::put`] built on it: each caller awaits its
//!   own result, the store sees `put_many`. `actormq bench store` uses it, so the benchmark's
//!   producers reach the store the way the broker's SENDs do.
//!
//! Invariants: one `TurnBatch` per thread (`!Sync`: its tasks share it through an `Rc`); at most
//! one drain is scheduled at a time; a caller waits at most one turn for company; a drain sends
//! at most [`MAX_BATCH`] messages per writer message, in push order. A turn with more than
//! `MAX_BATCH` items is sent as several writer messages at once ([`send_chunks`]: every chunk is
//! handed over before any answer is awaited), so in SYNC_FLUSH they normally reach the writer in
//! one burst and share one flush, rather than each waiting for the flush of the one before it.
//! The chunks enter the writer's mailbox in push order while it has room; when it is full,
//! waiting senders may enter in another order. Messages that do not wait for a flush
//! (`wait_store_msg_ok` false: the producer's `WAIT=false`) go in chunks of their own, ahead of
//! the others: the writer answers a chunk as a whole, after its flush if any message in it waits.
//! Order is promised within a chunk, not across chunks or turns — as between a RocketMQ broker's
//! connections.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use actormq_core::format::record::NewMessage;
use actormq_core::store::commit_log::AppendOk;
use actormq_core::store::status::{PutError, PutStatus};

use super::Store;

/// Most messages in one writer mailbox message.
pub const MAX_BATCH: usize = 512;

/// Items queued during one turn of a single-threaded executor, drained together at its end.
pub struct TurnBatch<T> {
    pending: RefCell<Vec<T>>,
    scheduled: Cell<bool>,
}

impl<T> Default for TurnBatch<T> {
    fn default() -> Self {
        Self {
            pending: RefCell::new(Vec::new()),
            scheduled: Cell::new(false),
        }
    }
}

impl<T> TurnBatch<T> {
    /// Queues `item`. True when it is the first of a turn: the caller then spawns the drain,
    /// which awaits [`end_of_turn`] and [`take`](Self::take)s.
    pub fn push(&self, item: T) -> bool {
        self.pending.borrow_mut().push(item);
        !self.scheduled.replace(true)
    }

    /// Everything queued so far, in push order; the next push starts a new turn.
    pub fn take(&self) -> Vec<T> {
        self.scheduled.set(false);
        std::mem::take(&mut *self.pending.borrow_mut())
    }
}

/// A turn's items as writer messages of at most [`MAX_BATCH`] each, in push order.
pub fn chunks<T>(mut all: Vec<T>) -> impl Iterator<Item = Vec<T>> {
    std::iter::from_fn(move || {
        if all.is_empty() {
            return None;
        }
        let rest = all.split_off(all.len().min(MAX_BATCH));
        Some(std::mem::replace(&mut all, rest))
    })
}

/// Sends a turn's items as writer messages of at most [`MAX_BATCH`] each (`send` stores one and
/// resolves once it is answered) and waits for all of them. Every chunk's `send` is started (polled
/// once, which hands it to the writer's mailbox) before any is awaited, so a later chunk does not
/// wait for the earlier ones' answers — in SYNC_FLUSH, for their flush. Items that do not wait
/// for a flush (`waits` false: the producer's `WAIT=false`) go in chunks of their own, first:
/// the writer answers a chunk as a whole, after the flush if any of its messages waits.
pub async fn send_chunks<T, F, Fut>(all: Vec<T>, waits: impl Fn(&T) -> bool, send: F)
where
    F: FnMut(Vec<T>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    // `join_all` polls its futures in order on its first poll: the mailbox sees push order.
    let waiting = all.iter().filter(|t| waits(t)).count();
    if waiting == 0 || waiting == all.len() {
        futures_util::future::join_all(chunks(all).map(send)).await;
    } else {
        let (later, now): (Vec<T>, Vec<T>) = all.into_iter().partition(|t| waits(t));
        futures_util::future::join_all(chunks(now).chain(chunks(later)).map(send)).await;
    }
}

/// Lets every task this turn has made ready run (and push) before the drain takes the batch.
pub async fn end_of_turn() {
    tokio::task::yield_now().await;
}

type Reply = tokio::sync::oneshot::Sender<Result<AppendOk, PutError>>;

/// [`Store::put`] for many tasks of one thread, one `AppendBatch` per turn (see the module).
pub struct PutCoalescer {
    store: Rc<Store>,
    batch: TurnBatch<(NewMessage, Reply)>,
}

impl PutCoalescer {
    pub fn new(store: Rc<Store>) -> Rc<Self> {
        Rc::new(Self {
            store,
            batch: TurnBatch::default(),
        })
    }

    /// Appends `msg` with the other messages of this turn; the same result `Store::put` gives.
    pub async fn put(self: &Rc<Self>, msg: NewMessage) -> Result<AppendOk, PutError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.batch.push((msg, tx)) {
            let me = self.clone();
            actix_rt::spawn(async move {
                end_of_turn().await;
                // Only SYNC_FLUSH and SYNC_MASTER answer later (after a flush, a slave's ack):
                // otherwise nothing is split.
                let sync = me.store.params().answers_later();
                let waits = |(m, _): &(NewMessage, Reply)| !sync || super::writer::waits(m);
                send_chunks(me.batch.take(), waits, |chunk| async {
                    let (msgs, replies): (Vec<_>, Vec<_>) = chunk.into_iter().unzip();
                    for (r, tx) in me.store.put_many(msgs).await.into_iter().zip(replies) {
                        let _ = tx.send(r);
                    }
                })
                .await;
            });
        }
        rx.await.unwrap_or_else(|_| {
            Err(PutError::new(
                PutStatus::ServiceNotAvailable,
                "the store stopped before the append was answered",
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn a_turn_is_scheduled_once_and_taken_in_push_order() {
        let b = TurnBatch::default();
        assert!(b.push(1), "the first push of a turn schedules the drain");
        assert!(!b.push(2));
        assert!(!b.push(3));
        assert_eq!(b.take(), vec![1, 2, 3]);
        assert!(b.push(4), "after a take the next push starts a new turn");
        assert_eq!(b.take(), vec![4]);
        assert!(b.take().is_empty());
    }

    #[test]
    fn a_large_turn_goes_in_chunks_of_at_most_max_batch_in_order() {
        let sizes: Vec<_> = chunks((0..1_100).collect()).map(|c| c.len()).collect();
        assert_eq!(sizes, vec![512, 512, 76]);
        let flat: Vec<i32> = chunks((0..1_100).collect()).flatten().collect();
        assert_eq!(flat, (0..1_100).collect::<Vec<_>>());
        assert_eq!(chunks(Vec::<i32>::new()).count(), 0);
    }

    #[test]
    fn every_chunk_of_a_turn_is_handed_over_before_any_answer_is_awaited() {
        // Each `send` records its chunk when first polled (where `Store::put_many` hands it to
        // the writer's mailbox) and is answered only when the test says so: a drain that
        // awaited each chunk's answer before sending the next would have sent one chunk here.
        let sent = Rc::new(RefCell::new(Vec::new()));
        let answers = Rc::new(RefCell::new(Vec::new()));
        let drain = send_chunks(
            (0..1_100).collect::<Vec<i32>>(),
            |_| true,
            |chunk| {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let sent = sent.clone();
                answers.borrow_mut().push(tx);
                async move {
                    sent.borrow_mut().push(chunk);
                    let _ = rx.await;
                }
            },
        );
        let mut drain = Box::pin(drain);
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(drain.as_mut().poll(&mut cx).is_pending());
        let lens: Vec<usize> = sent.borrow().iter().map(|c: &Vec<i32>| c.len()).collect();
        assert_eq!(
            lens,
            vec![512, 512, 76],
            "all chunks handed over, in push order"
        );
        let flat: Vec<i32> = sent.borrow().iter().flatten().copied().collect();
        assert_eq!(flat, (0..1_100).collect::<Vec<_>>());
        // The drain ends once every chunk is answered, whatever the order of the answers.
        let txs: Vec<_> = answers.borrow_mut().drain(..).collect();
        for tx in txs.into_iter().rev() {
            assert!(drain.as_mut().poll(&mut cx).is_pending());
            let _ = tx.send(());
        }
        assert!(drain.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn items_that_do_not_wait_go_first_in_chunks_of_their_own() {
        let sent = RefCell::new(Vec::new());
        // Odd items "wait": 550 of them (two chunks), 550 that do not (two chunks, sent first).
        let drain = send_chunks(
            (0..1_100).collect::<Vec<i32>>(),
            |i| i % 2 == 1,
            |chunk| {
                sent.borrow_mut().push(chunk);
                async {}
            },
        );
        futures_util::FutureExt::now_or_never(drain).expect("nothing to wait for");
        let sent = sent.into_inner();
        let lens: Vec<usize> = sent.iter().map(Vec::len).collect();
        assert_eq!(lens, vec![512, 38, 512, 38]);
        assert!(sent[..2].iter().flatten().all(|i| i % 2 == 0));
        assert!(sent[2..].iter().flatten().all(|i| i % 2 == 1));
        let evens: Vec<i32> = sent[..2].iter().flatten().copied().collect();
        assert_eq!(
            evens,
            (0..1_100).step_by(2).collect::<Vec<_>>(),
            "push order kept"
        );
        // All waiting, or none: one run of chunks, as before.
        let n = std::cell::Cell::new(0);
        let all = send_chunks(
            vec![1, 3, 5],
            |i| i % 2 == 1,
            |c| {
                n.set(n.get() + c.len());
                async {}
            },
        );
        futures_util::FutureExt::now_or_never(all).unwrap();
        assert_eq!(n.get(), 3);
    }
}
