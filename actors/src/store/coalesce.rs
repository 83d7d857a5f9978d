//! Per-thread coalescing of appends: what the tasks of one thread hand the store during one turn
//! of its scheduler reaches the CommitLog writer as one `AppendBatch` — one mailbox hop, one
//! wake-up of the writer's thread and, in SYNC_FLUSH, one flush wait answered by one cross-thread
//! wake — instead of one of each per message. At 256 producers on one thread that is the
//! difference between ~150 writer messages and ~150 answers per group commit, and one of each.
//!
//! * [`TurnBatch`] — the mechanism: items pushed during a turn, drained together by the task the
//!   turn's first push spawns, after one `yield_now` (so every task already made ready in this
//!   turn pushes first). The broker's connection threads use it for SENDs
//!   (`broker::processor::SendBatcher`, which also accounts per batch).
//! * [`PutCoalescer`] — a per-thread front of [`Store::put`] built on it: each caller awaits its
//!   own result, the store sees `put_many`. `actormq bench store` uses it, so the benchmark's
//!   producers reach the store the way the broker's SENDs do.
//!
//! Invariants: one `TurnBatch` per thread (`!Sync`: its tasks share it through an `Rc`); at most
//! one drain is scheduled at a time; a caller waits at most one turn for company; a drain sends
//! at most [`MAX_BATCH`] messages per writer message, in push order. A turn with more than
//! `MAX_BATCH` items is sent in chunks one after another (each awaited: in SYNC_FLUSH, one
//! flush wait each), so the later chunks wait longer, and the next turn's drain may reach the
//! writer before them; order is kept within a chunk, not across turns.

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
                for chunk in chunks(me.batch.take()) {
                    let (msgs, replies): (Vec<_>, Vec<_>) = chunk.into_iter().unzip();
                    for (r, tx) in me.store.put_many(msgs).await.into_iter().zip(replies) {
                        let _ = tx.send(r);
                    }
                }
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
}
