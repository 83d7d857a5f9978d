//! `ScheduleDelivery` — delivers delayed messages when due (RocketMQ's ScheduleMessageService).
//!
//! Owns the per-level progress (next ConsumeQueue offset of `SCHEDULE_TOPIC_XXXX` queue
//! `level - 1`), persisted to `config/delayOffset.json` (keeping the version it replaces as
//! `delayOffset.json.bak`, loaded when the file is missing or damaged) every
//! `flushDelayOffsetInterval` and at stop. In: ticks (every `tick`), [`GetDelayOffsets`]. Out:
//! one `AppendBatch` per tick to the CommitLog writer with every message that came due, levels in
//! order; progress advances only for messages the writer accepted, so a failure is retried on the
//! next tick.
//!
//! Invariant: the persisted progress never counts a delivery the CommitLog has not flushed. The
//! writer accepts an append before it is on disk; RocketMQ persists the progress as it is, so a
//! power loss after a persist can take deliveries the file already counts, and those messages
//! are never delivered (the originals are skipped). Here a persist writes the progress now if
//! everything delivered is flushed, else an earlier snapshot whose deliveries are (one taken at
//! a persist and kept until the flushed position covers it), so under steady delivery the file
//! lags by up to two persist intervals. After a crash a delivery may come twice (at-least-once),
//! never not at all.
//!
//! A delivery the writer refuses (a full disk, a failing dispatch) is retried on the next tick;
//! a stretch of refusals is logged once, then at most every 10 s with a count. A delayed record
//! read back with a CRC that no longer matches its body (damaged on disk) is skipped with an ERROR
//! naming its offsets, not delivered: a record with a bad CRC is never served.
//!
//! Due-ness is decided by the injected clock, so tests move time instead of sleeping.
//!
//! On a slave (`brokerRole = SLAVE`) nothing is delivered: its schedule topic is a copy of the
//! master's, whose deliveries reach it by replication.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::format::record::{self, Check};
use actormq_core::offset::{PhyOffset, QueueOffset};
use actormq_core::store::reader::StoreReader;
use actormq_core::store::schedule::{message_for_delivery, DelayOffsets, SCHEDULE_TOPIC};
use actormq_core::store::status::PutStatus;

use super::messages::{AppendBatch, GetDelayOffsets, PersistDelayOffsets, SetDelayOffsets};
use super::state::StoreState;
use super::writer::CommitLogWriter;
use crate::metered::{ActorRef, Metered, Reply, Serve, Service};

/// At most this many messages are delivered per tick (bounds one writer mailbox message).
const MAX_PER_TICK: usize = 1024;

pub struct ScheduleDelivery {
    reader: StoreReader,
    writer: ActorRef<CommitLogWriter>,
    clock: SharedClock,
    levels_ms: Vec<u64>,
    offsets: DelayOffsets,
    /// The CommitLog end of the last accepted delivery.
    delivered_end: u64,
    /// What a persist may write.
    durable: DurableProgress,
    state: Arc<StoreState>,
    path: PathBuf,
    tick: Duration,
    persist_every: Duration,
    busy: bool,
    /// Refused deliveries in the current stretch of refusals (a full disk refuses every tick).
    refusals: Refusals,
    /// Levels whose last delivery was refused: each is offered one message per round until it
    /// is accepted, as RocketMQ retries the one message. Offering the level's whole due run
    /// again would append its later messages, accepted behind the refused one, once per tick.
    retrying: std::collections::HashSet<usize>,
    /// The level a round looks at first; it moves on each round, so that a level with more due
    /// than a round takes does not starve the levels after it.
    first_level: usize,
    /// Masters deliver; a slave only keeps its copy of the schedule topic (RocketMQ runs the
    /// delivery timers on the master only).
    delivers: bool,
}

/// Throttles the log of refused deliveries: the first of a stretch at WARN, then at most every
/// [`Refusals::LOG_EVERY`] with a count, and the end of the stretch at INFO — not a line per level
/// per tick while the store refuses writes.
#[derive(Default)]
struct Refusals {
    count: u64,
    logged_at: Option<std::time::Instant>,
}

impl Refusals {
    const LOG_EVERY: Duration = Duration::from_secs(10);

    fn refused(&mut self, level: usize, offset: u64, error: &dyn std::fmt::Display) {
        self.count += 1;
        let now = std::time::Instant::now();
        if self
            .logged_at
            .is_none_or(|t| now.duration_since(t) >= Self::LOG_EVERY)
        {
            self.logged_at = Some(now);
            tracing::warn!(level, offset, refused = self.count, error = %error, "delayed delivery refused; retried next tick");
        }
    }

    fn delivered(&mut self) {
        if self.count > 0 {
            tracing::info!(refused = self.count, "delayed delivery accepted again");
            *self = Refusals::default();
        }
    }
}

/// The delivery progress a persist may write: never counting a delivery beyond the flushed
/// CommitLog position.
#[derive(Default)]
struct DurableProgress {
    /// Progress whose deliveries are all flushed.
    durable: DelayOffsets,
    /// A snapshot and the CommitLog end it needs flushed. It waits until it is, rather than be
    /// replaced by a newer one: with persists more frequent than flushes, a snapshot replaced at
    /// every persist would never be flushed.
    pending: Option<(DelayOffsets, u64)>,
}

impl DurableProgress {
    /// The progress to persist now, given the progress `now`, the CommitLog end of its last
    /// delivery and the flushed position.
    fn advance(&mut self, now: &DelayOffsets, delivered_end: u64, flushed: u64) -> &DelayOffsets {
        if flushed >= delivered_end {
            self.durable = now.clone();
            self.pending = None;
        } else {
            match self.pending.take() {
                Some((snapshot, end)) if flushed >= end => self.durable = snapshot,
                Some(waiting) => {
                    self.pending = Some(waiting);
                    return &self.durable;
                }
                None => {}
            }
            self.pending = Some((now.clone(), delivered_end));
        }
        &self.durable
    }
}

impl ScheduleDelivery {
    /// Loads progress from `config/delayOffset.json` under the store root, or its `.bak` (neither
    /// = start at 0; clamped into each queue's range). Levels, tick and persist interval come from
    /// `params`; `state` gives the flushed position.
    pub fn new(
        reader: StoreReader,
        writer: ActorRef<CommitLogWriter>,
        clock: SharedClock,
        state: Arc<StoreState>,
        params: &super::StoreParams,
    ) -> std::io::Result<Self> {
        let path = params.root.join("config").join("delayOffset.json");
        let levels_ms = params.delay_levels_ms.clone();
        let (tick, persist_every) = (params.schedule_tick, params.flush_delay_offset_interval);
        let offsets = crate::fsutil::load_with_backup(&path, DelayOffsets::from_json)?
            .into_option()
            .unwrap_or_default();
        let mut s = ScheduleDelivery {
            reader,
            writer,
            clock,
            levels_ms,
            offsets,
            delivered_end: 0,
            durable: DurableProgress::default(),
            state,
            path,
            tick,
            persist_every,
            busy: false,
            refusals: Refusals::default(),
            retrying: std::collections::HashSet::new(),
            first_level: 0,
            delivers: params.broker_role.is_master(),
        };
        for level in 1..=s.levels_ms.len() {
            let qid = (level - 1) as i32;
            let (min, max) = (
                s.reader.min_offset(SCHEDULE_TOPIC, qid).0,
                s.reader.max_offset(SCHEDULE_TOPIC, qid).0,
            );
            let cur = s.offsets.0.entry(level).or_insert(min);
            *cur = (*cur).clamp(min, max.max(min));
        }
        s.durable.durable = s.offsets.clone();
        Ok(s)
    }

    /// Writes the progress whose deliveries are all flushed (see the module docs).
    pub fn persist(&mut self) -> std::io::Result<()> {
        let durable = self
            .durable
            .advance(&self.offsets, self.delivered_end, self.state.flushed());
        crate::fsutil::write_with_backup(&self.path, durable.to_json().as_bytes())
    }

    /// Collects due messages of every level, from `first_level` on, from the recorded progress
    /// (one for a level being retried); `None` for a unit whose message cannot be delivered
    /// (said in the log), which progress passes over.
    fn collect_due(&self) -> Vec<(usize, QueueOffset, Option<record::NewMessage>)> {
        let now = self.clock.now_ms();
        let mut out = Vec::new();
        let n = self.levels_ms.len();
        for i in (0..n).map(|k| (self.first_level + k) % n) {
            let delay = &self.levels_ms[i];
            let level = i + 1;
            let budget = if self.retrying.contains(&level) {
                (out.len() + 1).min(MAX_PER_TICK)
            } else {
                MAX_PER_TICK
            };
            let Some(q) = self.reader.queue(SCHEDULE_TOPIC, i as i32) else {
                continue;
            };
            let mut off = QueueOffset(self.offsets.0.get(&level).copied().unwrap_or(0));
            // Retention deleted the level's oldest units (their messages are gone with the
            // CommitLog files): go on from the first unit left, as RocketMQ does.
            off = off.max(q.min_offset());
            while off < q.max_offset() && out.len() < budget {
                let Some(unit) = q.unit(off) else { break };
                if !unit.is_valid() {
                    // A filler a replay put in a gap of the queue: it names no message.
                    tracing::warn!(
                        level,
                        offset = off.0,
                        "delayed queue unit names no message, passed over"
                    );
                    out.push((level, off, None));
                    off = off.plus(1);
                    continue;
                }
                // Clock-skew guard: a delivery time further out than the level's delay means the
                // clock went back; deliver now rather than never.
                let mut due = unit.tags_code;
                if due > now.saturating_add(*delay as i64) {
                    due = now;
                }
                if due > now {
                    break;
                }
                // With its CRC checked: a body damaged on disk since it was stored is not
                // delivered (a record with a bad CRC is never served), and is said so.
                let phy = unit.phy_offset;
                let msg = match self.reader.record_at(PhyOffset(phy as u64)) {
                    Some(s) => match record::check(s.as_bytes(), true) {
                        Ok(Check::Record(r)) => {
                            message_for_delivery(&r).ok_or("it has no REAL_TOPIC".to_string())
                        }
                        Ok(Check::Blank { .. }) => Err("its unit names a blank".to_string()),
                        Err(e) => Err(e.to_string()),
                    },
                    None => Err("no record at its offset (deleted by retention?)".to_string()),
                };
                match msg {
                    Ok(m) => out.push((level, off, Some(m))),
                    Err(why) => {
                        tracing::error!(
                            level,
                            offset = off.0,
                            phy_offset = phy,
                            "delayed message not delivered, skipped: {why}"
                        );
                        out.push((level, off, None));
                    }
                }
                off = off.plus(1);
            }
        }
        out
    }

    fn deliver(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.busy {
            return;
        }
        let due = self.collect_due();
        if due.is_empty() {
            return;
        }
        let n = self.levels_ms.len().max(1);
        self.first_level = (self.first_level + 1) % n;
        // A full round leaves more due: the next one follows at once instead of a tick later.
        let more = due.len() >= MAX_PER_TICK;
        let mut meta = Vec::with_capacity(due.len());
        let mut msgs = Vec::with_capacity(due.len());
        for (level, off, m) in due {
            meta.push((level, off, m.is_some()));
            msgs.extend(m);
        }
        if msgs.is_empty() {
            // Only skipped units: passed over, so that a level whose last message cannot be
            // delivered does not read (and report) it again on every tick.
            for (level, off, _) in meta {
                self.inner_offsets_set(level, off.0 + 1);
            }
            return;
        }
        self.busy = true;
        let writer = self.writer.clone();
        let fut = async move { super::writer::append(&writer, AppendBatch(msgs)).await };
        ctx.wait(
            actix::fut::wrap_future::<_, Metered<Self>>(fut).map(move |res, act, ctx| {
                if more {
                    // Not from inside this wait: timers and persists get their turn first.
                    ctx.run_later(Duration::ZERO, |act, ctx| act.inner.deliver(ctx));
                }
                let act = &mut act.inner;
                act.busy = false;
                let Ok(results) = res else {
                    tracing::warn!(
                        "CommitLog writer unavailable; delayed delivery retried next tick"
                    );
                    return;
                };
                // Progress per level advances over the accepted (or skipped) prefix only,
                // keeping order.
                let mut blocked = std::collections::HashSet::new();
                let mut results = results.into_iter();
                for (level, off, sent) in meta {
                    let r = sent.then(|| results.next());
                    if blocked.contains(&level) {
                        continue;
                    }
                    match r {
                        None => act.inner_offsets_set(level, off.0 + 1),
                        Some(Some(Ok(ok))) => {
                            act.state.delivered_msgs.fetch_add(1, Ordering::Relaxed);
                            act.state
                                .delivered_bytes
                                .fetch_add(ok.wrote_bytes, Ordering::Relaxed);
                            act.refusals.delivered();
                            act.retrying.remove(&level);
                            act.inner_offsets_set(level, off.0 + 1);
                            act.delivered_end =
                                act.delivered_end.max(ok.phy_offset.0 + ok.wrote_bytes);
                        }
                        Some(Some(Err(e)))
                            if matches!(
                                e.status,
                                PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded
                            ) =>
                        {
                            // Refused for what the message is (bigger than maxMessageSize, set
                            // lower since it was stored): no retry can store it, and retrying
                            // would hold up its level for good.
                            tracing::error!(
                                level,
                                offset = off.0,
                                error = %e,
                                "delayed message not delivered, skipped: the store refuses it as it is"
                            );
                            act.inner_offsets_set(level, off.0 + 1);
                        }
                        Some(Some(Err(e))) => {
                            act.refusals.refused(level, off.0, &e);
                            act.retrying.insert(level);
                            blocked.insert(level);
                        }
                        Some(None) => {
                            tracing::warn!(level, "the writer answered fewer deliveries than sent");
                            act.retrying.insert(level);
                            blocked.insert(level);
                        }
                    }
                }
            }),
        );
    }

    fn inner_offsets_set(&mut self, level: usize, next: u64) {
        self.offsets.0.insert(level, next);
    }
}

impl Service for ScheduleDelivery {
    const NAME: &'static str = "schedule_delivery";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        if self.delivers {
            ctx.run_interval(self.tick, |act, ctx| act.inner.deliver(ctx));
        }
        ctx.run_interval(self.persist_every, |act, _| {
            if let Err(e) = act.inner.persist() {
                tracing::error!(error = %e, "cannot persist delayOffset.json");
            }
        });
    }

    fn stopped(&mut self, _: &mut Context<Metered<Self>>) {
        if let Err(e) = self.persist() {
            tracing::error!(error = %e, "cannot persist delayOffset.json at stop");
        }
    }
}

impl Serve<GetDelayOffsets> for ScheduleDelivery {
    type Reply = Reply<GetDelayOffsets>;
    fn serve(&mut self, _: GetDelayOffsets, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.offsets.clone())
    }
}

impl Serve<SetDelayOffsets> for ScheduleDelivery {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, m: SetDelayOffsets, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let levels = self.levels_ms.len();
        let mut offsets = m.0;
        offsets.0.retain(|level, _| (1..=levels).contains(level));
        if offsets == self.offsets {
            return Ok(());
        }
        self.offsets = offsets;
        self.persist()
    }
}

impl Serve<PersistDelayOffsets> for ScheduleDelivery {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, _: PersistDelayOffsets, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.persist()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(pairs: &[(usize, u64)]) -> DelayOffsets {
        let mut o = DelayOffsets::default();
        for &(level, next) in pairs {
            o.0.insert(level, next);
        }
        o
    }

    /// The persisted progress follows the flushed position: everything delivered is flushed →
    /// the progress now; otherwise the last snapshot whose deliveries are flushed, a snapshot
    /// kept (not replaced) until it is.
    #[test]
    fn the_persisted_progress_counts_only_flushed_deliveries() {
        let mut d = DurableProgress {
            durable: offsets(&[(1, 10)]),
            pending: None,
        };
        // Delivered up to byte 500, flushed 400: the loaded progress stays; snapshot (12, 500).
        assert_eq!(
            d.advance(&offsets(&[(1, 12)]), 500, 400),
            &offsets(&[(1, 10)])
        );
        // Delivered more (up to 900), flushed 450: the snapshot waits; not replaced.
        assert_eq!(
            d.advance(&offsets(&[(1, 15)]), 900, 450),
            &offsets(&[(1, 10)])
        );
        // Flushed 600 covers the snapshot: it is persisted, and a new one (17, 1000) is taken.
        assert_eq!(
            d.advance(&offsets(&[(1, 17)]), 1000, 600),
            &offsets(&[(1, 12)])
        );
        // Everything flushed: the progress now.
        assert_eq!(
            d.advance(&offsets(&[(1, 18)]), 1100, 1100),
            &offsets(&[(1, 18)])
        );
        assert!(d.pending.is_none());
    }
}
