//! `SendBatcher` — one connection thread's batch of single-message SENDs: those that arrive in
//! one turn of the thread become one `AppendBatch` writer message (a [`TurnBatch`]), stored with
//! [`Store::put_many`], accounted once per run of one topic and answered one by one.
//!
//! Messages in: [`SendBatcher::enqueue`] from the SEND path ([`super::send`]). Out: one
//! `put_many` per chunk (the store splits nothing further), and each SEND's result on its own
//! oneshot. Invariants: a SEND waits at most one scheduler turn for company; every queued SEND is
//! answered (or its receiver closed, when the broker stops first); the accounting (counters,
//! TPS, put latency, `/metrics`) counts only what was stored.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use actormq_core::format::record::NewMessage;
use actormq_core::store::commit_log::AppendOk;
use actormq_core::store::status::PutError;

use super::rates::ThreadRates;
use super::store_stats::Stats;
use crate::metrics::{MessageType, RequestMeters};
use crate::store::coalesce::{end_of_turn, send_chunks, TurnBatch};
use crate::store::Store;

/// A SEND's result, when the writer has it.
pub type PutReply = tokio::sync::oneshot::Receiver<Result<AppendOk, PutError>>;

struct PendingSend {
    msg: NewMessage,
    kind: MessageType,
    arrived: Instant,
    tx: tokio::sync::oneshot::Sender<Result<AppendOk, PutError>>,
}

/// What the accounting needs of one stored SEND: (kind, arrival, body bytes).
type Accounted = (MessageType, Instant, u64);

/// See the module docs. One per connection thread.
pub struct SendBatcher {
    batch: TurnBatch<PendingSend>,
    store: Arc<Store>,
    stats: Arc<Stats>,
    rates: ThreadRates,
    metrics: Rc<RequestMeters>,
    /// [`topic_runs`]' list, kept between batches so its strings are not made again.
    runs: Cell<Vec<(String, usize)>>,
}

impl SendBatcher {
    pub fn new(
        store: Arc<Store>,
        stats: Arc<Stats>,
        rates: ThreadRates,
        metrics: Rc<RequestMeters>,
    ) -> SendBatcher {
        SendBatcher {
            batch: TurnBatch::default(),
            store,
            stats,
            rates,
            metrics,
            runs: Cell::default(),
        }
    }

    /// Queues `msg` for this turn's batch; its result arrives on the returned receiver (closed
    /// without a value only if the broker stops first).
    pub fn enqueue(
        self: &Rc<Self>,
        msg: NewMessage,
        kind: MessageType,
        arrived: Instant,
    ) -> PutReply {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let first = self.batch.push(PendingSend {
            msg,
            kind,
            arrived,
            tx,
        });
        if first {
            let me = self.clone();
            actix_rt::spawn(async move {
                // One turn of the thread: SENDs decoded from other sockets in this turn join in.
                end_of_turn().await;
                // Only SYNC_FLUSH and SYNC_MASTER answer later (after a flush, a slave's ack):
                // otherwise nothing is split.
                let sync = me.store.params().answers_later();
                let waits = |p: &PendingSend| !sync || crate::store::writer::waits(&p.msg);
                send_chunks(me.batch.take(), waits, |chunk| me.put_batch(chunk)).await;
            });
        }
        rx
    }

    /// Stores one batch of single-message SENDs, accounts for what was stored and answers each.
    async fn put_batch(&self, batch: Vec<PendingSend>) {
        let mut msgs = Vec::with_capacity(batch.len());
        let mut rest = Vec::with_capacity(batch.len());
        for p in batch {
            rest.push(((p.kind, p.arrived, p.msg.body.len() as u64), p.tx));
            msgs.push(p.msg);
        }
        // The run list (and its topic strings) of an earlier batch, reused; a batch put while
        // another is still waiting for the writer starts an empty one.
        let mut runs = self.runs.take();
        let n_runs = topic_runs(&msgs, &rest, &mut runs);
        let results = self.store.put_many(msgs).await;
        self.account(&results, &rest, runs.get(..n_runs).unwrap_or_default());
        self.runs.set(runs);
        for (res, (_, tx)) in results.into_iter().zip(rest) {
            let _ = tx.send(res);
        }
    }

    /// Counters, TPS, put latency and `/metrics` of a stored batch, once per run of one topic
    /// and kind; one clock read for the batch.
    fn account<T>(
        &self,
        results: &[Result<AppendOk, PutError>],
        meta: &[(Accounted, T)],
        runs: &[(String, usize)],
    ) {
        let now = Instant::now();
        let (mut stored, mut wrote, mut failed) = (0, 0, 0);
        for r in results {
            match r {
                Ok(ok) => {
                    stored += u64::from(ok.msg_num);
                    wrote += ok.wrote_bytes;
                }
                Err(_) => failed += 1,
            }
        }
        self.stats.store.record_put_at(now, stored, wrote);
        self.stats.store.record_put_failed(failed);
        for (r, (topic, start)) in runs.iter().enumerate() {
            let end = runs.get(r + 1).map_or(results.len(), |n| n.1);
            let items = results.get(*start..end).unwrap_or_default();
            let run = meta.get(*start..end).unwrap_or_default();
            let Some(kind) = run.first().map(|m| m.0 .0) else {
                continue;
            };
            let sizes = items
                .iter()
                .zip(run)
                .filter(|(res, _)| res.is_ok())
                .map(|(_, m)| m.0 .2);
            let (n, bytes) = sizes.clone().fold((0, 0), |(n, b), s| (n + 1, b + s));
            if n == 0 {
                continue;
            }
            Stats::add(&self.stats.put_msgs, n);
            Stats::add(&self.stats.put_bytes, bytes);
            self.rates.put(topic, n);
            self.metrics.messages_in_sizes(topic, kind, n, bytes, sizes);
        }
        let stored_at = || {
            results
                .iter()
                .zip(meta)
                .filter(|(res, _)| res.is_ok())
                .map(|(_, m)| now.saturating_duration_since(m.0 .1))
        };
        self.rates.put_latencies(stored_at());
        self.stats.store.record_put_times_at(now, stored_at());
    }
}

/// Runs of one topic and kind, for accounting once per run: (topic, first index), written over
/// `runs` from its start (a kept entry's topic string is reused); returns how many there are.
fn topic_runs<T>(
    msgs: &[NewMessage],
    rest: &[(Accounted, T)],
    runs: &mut Vec<(String, usize)>,
) -> usize {
    let mut n = 0;
    for (i, m) in msgs.iter().enumerate() {
        let same = n > 0
            && runs.get(n - 1).is_some_and(|(t, _)| *t == m.topic)
            && rest.get(i - 1).map(|r| r.0 .0) == rest.get(i).map(|r| r.0 .0);
        if same {
            continue;
        }
        match runs.get_mut(n) {
            Some((topic, start)) => {
                topic.clone_from(&m.topic);
                *start = i;
            }
            None => runs.push((m.topic.clone(), i)),
        }
        n += 1;
    }
    n
}
