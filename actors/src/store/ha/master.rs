//! `HaMaster` — owns what a master knows of its slaves: the highest acknowledged CommitLog
//! offset (RocketMQ's `push2SlaveMaxOffset`), the registry of slave connections, and the
//! SYNC_MASTER sends waiting for an ack (RocketMQ's `GroupTransferService`).
//!
//! In: [`WaitReplicated`] (answered PUT_OK by the ack that covers it, FLUSH_SLAVE_TIMEOUT by
//! this actor's own timer at its deadline, SLAVE_NOT_AVAILABLE at once without a slave),
//! [`Ack`], [`Attach`]/[`Detach`] from the [`super::connection::HaConnection`]s, [`DataReady`]
//! from the store's writer or committer (fanned out as a [`super::messages::Wake`] to every
//! attached connection), [`Close`].
//! Out: the wait's answer; wakes to the connections.
//!
//! [`HaState`] is the handle the store, the broker and `/metrics` hold: the actor's address and
//! the two watermarks the actor publishes. It runs on the store's "ha" thread
//! (`Store::ha_arbiter`), beside the connections or the slave, so an ack and a wake stay on one
//! thread; SYNC_MASTER waits come to it from the connection threads.
//!
//! Invariants: the acked offset only grows; a wait is answered exactly once; a closed master
//! answers every wait at once (FLUSH_SLAVE_TIMEOUT for those already waiting: the message is
//! stored, its replication unconfirmed; SLAVE_NOT_AVAILABLE for later ones). A slave that only
//! drops its connection ends no wait: it may connect again and acknowledge within the timeout,
//! as in RocketMQ.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::store::status::PutStatus;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::messages::{Ack, Attach, Close, DataReady, Detach, WaitReplicated};
use crate::metered::{start_on, ActorRef, Metered, Serve, Service};
use crate::wake::{self, Waker};

/// What the store, the broker and `/metrics` hold of a master's replication.
pub struct HaState {
    pub(super) master: ActorRef<HaMaster>,
    published: Arc<Published>,
    /// The [`Waker`] flag of [`DataReady`], shared by the writer (or committer) and the actor.
    data_flag: Arc<AtomicBool>,
}

/// The master's watermarks as [`HaMaster`], their only writer, last published them, for
/// readers that cannot wait for a reply: `/metrics`' scrape runs synchronously on its HTTP
/// worker's thread (`metrics/scrape.rs`, `ScrapeSources`). Nothing decides on them: a SYNC_MASTER
/// send asks the actor.
#[derive(Default)]
struct Published {
    acked: AtomicU64,
    slaves: AtomicUsize,
}

impl HaState {
    /// Starts the [`HaMaster`] on the current thread.
    pub fn new() -> Arc<HaState> {
        HaState::new_on(None)
    }

    /// Starts the [`HaMaster`] on `arbiter` (the store's "ha" thread, where the connections and
    /// the slave run too: an ack reaches it, and its wakes reach them, without crossing threads).
    pub fn new_on(arbiter: Option<&actix::ArbiterHandle>) -> Arc<HaState> {
        let published = Arc::new(Published::default());
        // Raised while no slave is attached: the writer's wakes stop at the flag (see `DataReady`).
        let data_flag = Arc::new(AtomicBool::new(true));
        let master = start_on(arbiter, HaMaster::new(published.clone(), data_flag.clone()));
        Arc::new(HaState {
            master,
            published,
            data_flag,
        })
    }

    /// The wake the writer (or committer) sends when new CommitLog bytes are readable.
    pub fn data_waker(&self) -> Waker {
        Waker::new(self.master.clone(), self.data_flag.clone(), || DataReady)
    }

    /// The highest offset a slave acknowledged (as published; see [`Published`]).
    pub fn acked(&self) -> u64 {
        self.published.acked.load(Ordering::Acquire)
    }

    /// Slaves connected now, that have sent their first report (as published).
    pub fn connections(&self) -> usize {
        self.published.slaves.load(Ordering::Acquire)
    }

    /// The broker is stopping and its HA connections with it: the waiting SYNC_MASTER sends
    /// are answered now (FLUSH_SLAVE_TIMEOUT) instead of at `slaveTimeout`, and later ones get
    /// SLAVE_NOT_AVAILABLE at once.
    pub fn close(&self) {
        self.master.notify(Close);
    }

    /// SYNC_MASTER (RocketMQ 4.x `handleHA`): whether a slave has the bytes up to `end`.
    /// SLAVE_NOT_AVAILABLE at once when no slave is connected or the acked offset is `max_gap`
    /// or more behind; else waits up to `timeout` for an ack reaching `end`, then
    /// FLUSH_SLAVE_TIMEOUT. The message is stored either way.
    pub async fn wait_replicated(&self, end: u64, timeout: Duration, max_gap: u64) -> PutStatus {
        let wait = WaitReplicated {
            end,
            deadline: Instant::now() + timeout,
            max_gap,
        };
        // An error: the actor is gone with its runtime (the process is stopping).
        self.master
            .send(wait)
            .await
            .unwrap_or(PutStatus::SlaveNotAvailable)
    }
}

/// A waiting send: by the end it needs acknowledged, then arrival.
type WaitKey = (u64, u64);

pub struct HaMaster {
    published: Arc<Published>,
    data_flag: Arc<AtomicBool>,
    acked: u64,
    /// The attached connections, each with the wake for new bytes.
    slaves: HashMap<u64, Waker>,
    waiting: BTreeMap<WaitKey, oneshot::Sender<PutStatus>>,
    /// Every wait's deadline, earliest first; entries of waits already answered are skipped.
    deadlines: BinaryHeap<Reverse<(Instant, WaitKey)>>,
    /// The one timer: when it fires, and its handle.
    timer: Option<(Instant, SpawnHandle)>,
    arrivals: u64,
    closed: bool,
}

impl HaMaster {
    fn new(published: Arc<Published>, data_flag: Arc<AtomicBool>) -> HaMaster {
        HaMaster {
            published,
            data_flag,
            acked: 0,
            slaves: HashMap::new(),
            waiting: BTreeMap::new(),
            deadlines: BinaryHeap::new(),
            timer: None,
            arrivals: 0,
            closed: false,
        }
    }

    /// The answer a wait gets without waiting, if any.
    fn answer_now(&self, m: &WaitReplicated) -> Option<PutStatus> {
        if self.closed || self.slaves.is_empty() || m.end.saturating_sub(self.acked) >= m.max_gap {
            Some(PutStatus::SlaveNotAvailable)
        } else if self.acked >= m.end {
            Some(PutStatus::PutOk)
        } else {
            None
        }
    }

    fn ack(&mut self, offset: u64) {
        if offset <= self.acked {
            return;
        }
        self.acked = offset;
        self.published.acked.store(offset, Ordering::Release);
        let later = self.waiting.split_off(&(offset.saturating_add(1), 0));
        for (_, tx) in std::mem::replace(&mut self.waiting, later) {
            let _ = tx.send(PutStatus::PutOk);
        }
    }

    /// Sets the timer for the earliest deadline still waited on.
    fn arm(&mut self, ctx: &mut Context<Metered<Self>>) {
        while let Some(Reverse((_, key))) = self.deadlines.peek() {
            if self.waiting.contains_key(key) {
                break;
            }
            self.deadlines.pop();
        }
        let Some(&Reverse((at, _))) = self.deadlines.peek() else {
            return;
        };
        if self.timer.is_some_and(|(t, _)| t <= at) {
            return;
        }
        if let Some((_, h)) = self.timer.take() {
            ctx.cancel_future(h);
        }
        let h = ctx.run_later(at.saturating_duration_since(Instant::now()), |act, ctx| {
            act.inner.timer = None;
            act.inner.expire(ctx);
        });
        self.timer = Some((at, h));
    }

    /// Answers FLUSH_SLAVE_TIMEOUT to every wait whose deadline has come.
    fn expire(&mut self, ctx: &mut Context<Metered<Self>>) {
        let now = Instant::now();
        while let Some(&Reverse((at, key))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            if let Some(tx) = self.waiting.remove(&key) {
                let _ = tx.send(PutStatus::FlushSlaveTimeout);
            }
        }
        self.arm(ctx);
    }

    fn publish_slaves(&self) {
        self.published
            .slaves
            .store(self.slaves.len(), Ordering::Release);
    }
}

impl Service for HaMaster {
    const NAME: &'static str = "ha_master";
}

impl Serve<WaitReplicated> for HaMaster {
    type Reply = ResponseFuture<PutStatus>;
    fn serve(&mut self, m: WaitReplicated, ctx: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(status) = self.answer_now(&m) {
            return Box::pin(std::future::ready(status));
        }
        let (tx, rx) = oneshot::channel();
        let key = (m.end, self.arrivals);
        self.arrivals += 1;
        self.waiting.insert(key, tx);
        self.deadlines.push(Reverse((m.deadline, key)));
        self.arm(ctx);
        // Dropped unanswered only with the actor: the message is stored, unconfirmed.
        Box::pin(async move { rx.await.unwrap_or(PutStatus::FlushSlaveTimeout) })
    }
}

impl Serve<Ack> for HaMaster {
    type Reply = ();
    fn serve(&mut self, m: Ack, _: &mut Context<Metered<Self>>) {
        self.ack(m.offset);
    }
}

impl Serve<Attach> for HaMaster {
    type Reply = ();
    fn serve(&mut self, m: Attach, _: &mut Context<Metered<Self>>) {
        if self.slaves.is_empty() {
            // The first slave: the writer's wakes come through again. Bytes written before
            // reach it anyway: a connection streams from where its slave asks, on its own tick.
            wake::clear(&self.data_flag);
        }
        self.slaves.insert(m.id, m.wake);
        self.publish_slaves();
    }
}

impl Serve<Detach> for HaMaster {
    type Reply = ();
    fn serve(&mut self, m: Detach, _: &mut Context<Metered<Self>>) {
        self.slaves.remove(&m.id);
        if self.slaves.is_empty() {
            self.data_flag.store(true, Ordering::Release);
        }
        self.publish_slaves();
    }
}

impl Serve<DataReady> for HaMaster {
    type Reply = ();
    fn serve(&mut self, _: DataReady, _: &mut Context<Metered<Self>>) {
        if self.slaves.is_empty() {
            // Nobody to wake: the flag stays raised, so the writer sends no more `DataReady`
            // (a cross-thread wake per append burst on every broker without a slave) until a
            // slave attaches.
            return;
        }
        wake::clear(&self.data_flag);
        for w in self.slaves.values() {
            w.wake();
        }
    }
}

impl Serve<Close> for HaMaster {
    type Reply = ();
    fn serve(&mut self, _: Close, ctx: &mut Context<Metered<Self>>) {
        self.closed = true;
        for (_, tx) in std::mem::take(&mut self.waiting) {
            let _ = tx.send(PutStatus::FlushSlaveTimeout);
        }
        self.deadlines.clear();
        if let Some((_, h)) = self.timer.take() {
            ctx.cancel_future(h);
        }
    }
}
