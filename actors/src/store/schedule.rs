//! `ScheduleDelivery` — delivers delayed messages when due (RocketMQ's ScheduleMessageService).
//!
//! Owns the per-level progress (next ConsumeQueue offset of `SCHEDULE_TOPIC_XXXX` queue
//! `level - 1`), persisted to `config/delayOffset.json` every `flushDelayOffsetInterval` and at
//! stop. In: ticks (every `tick`), [`GetDelayOffsets`]. Out: one `AppendBatch` per tick to the
//! CommitLog writer with every message that came due, levels in order; progress advances only for
//! messages the writer accepted, so a failure is retried on the next tick.
//!
//! Due-ness is decided by the injected clock, so tests move time instead of sleeping.

use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::format::record::{self, Check};
use actormq_core::offset::{PhyOffset, QueueOffset};
use actormq_core::store::reader::StoreReader;
use actormq_core::store::schedule::{message_for_delivery, DelayOffsets, SCHEDULE_TOPIC};

use super::writer::{AppendBatch, CommitLogWriter};
use crate::metered::{ActorRef, Metered, Reply, Serve, Service};

/// At most this many messages are delivered per tick (bounds one writer mailbox message).
const MAX_PER_TICK: usize = 1024;

pub struct GetDelayOffsets;
impl Message for GetDelayOffsets {
    type Result = DelayOffsets;
}

pub struct PersistDelayOffsets;
impl Message for PersistDelayOffsets {
    type Result = std::io::Result<()>;
}

pub struct ScheduleDelivery {
    reader: StoreReader,
    writer: ActorRef<CommitLogWriter>,
    clock: SharedClock,
    levels_ms: Vec<u64>,
    offsets: DelayOffsets,
    path: PathBuf,
    tick: Duration,
    persist_every: Duration,
    busy: bool,
}

impl ScheduleDelivery {
    /// Loads progress from `path` (missing file = start at 0; clamped into each queue's range).
    pub fn new(
        reader: StoreReader,
        writer: ActorRef<CommitLogWriter>,
        clock: SharedClock,
        levels_ms: Vec<u64>,
        path: PathBuf,
        tick: Duration,
        persist_every: Duration,
    ) -> std::io::Result<Self> {
        let offsets = match std::fs::read_to_string(&path) {
            Ok(text) => DelayOffsets::from_json(&text).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => DelayOffsets::default(),
            Err(e) => return Err(e),
        };
        let mut s = ScheduleDelivery {
            reader,
            writer,
            clock,
            levels_ms,
            offsets,
            path,
            tick,
            persist_every,
            busy: false,
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
        Ok(s)
    }

    pub fn persist(&self) -> std::io::Result<()> {
        crate::fsutil::write_atomically(&self.path, self.offsets.to_json().as_bytes())
    }

    /// Collects due messages of every level, in level order, from the recorded progress.
    fn collect_due(&self) -> Vec<(usize, QueueOffset, record::NewMessage)> {
        let now = self.clock.now_ms();
        let mut out = Vec::new();
        for (i, delay) in self.levels_ms.iter().enumerate() {
            let level = i + 1;
            let Some(q) = self.reader.queue(SCHEDULE_TOPIC, i as i32) else {
                continue;
            };
            let mut off = QueueOffset(self.offsets.0.get(&level).copied().unwrap_or(0));
            while off < q.max_offset() && out.len() < MAX_PER_TICK {
                let Some(unit) = q.unit(off) else { break };
                // Clock-skew guard: a delivery time further out than the level's delay means the
                // clock went back; deliver now rather than never.
                let mut due = unit.tags_code;
                if due > now + *delay as i64 {
                    due = now;
                }
                if due > now {
                    break;
                }
                let msg = self
                    .reader
                    .record_at(PhyOffset(unit.phy_offset as u64))
                    .and_then(|s| match record::check(s.as_bytes(), false) {
                        Ok(Check::Record(r)) => message_for_delivery(&r),
                        _ => None,
                    });
                match msg {
                    Some(m) => out.push((level, off, m)),
                    None => tracing::warn!(
                        level,
                        offset = off.0,
                        "delayed message unreadable or without REAL_TOPIC; skipped"
                    ),
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
        self.busy = true;
        let (meta, msgs): (Vec<_>, Vec<_>) = due.into_iter().map(|(l, o, m)| ((l, o), m)).unzip();
        let writer = self.writer.clone();
        let fut = async move { writer.send(AppendBatch(msgs)).await };
        ctx.wait(actix::fut::wrap_future::<_, Metered<Self>>(fut).map(move |res, act, _| {
            let act = &mut act.inner;
            act.busy = false;
            let Ok(results) = res else {
                tracing::warn!("CommitLog writer unavailable; delayed delivery retried next tick");
                return;
            };
            // Progress per level advances over the accepted prefix only, keeping order.
            let mut blocked = std::collections::HashSet::new();
            for ((level, off), r) in meta.into_iter().zip(results) {
                if blocked.contains(&level) {
                    continue;
                }
                match r {
                    Ok(_) => {
                        act.inner_offsets_set(level, off.0 + 1);
                    }
                    Err(e) => {
                        tracing::warn!(level, offset = off.0, error = %e, "delayed delivery refused; retried next tick");
                        blocked.insert(level);
                    }
                }
            }
        }));
    }

    fn inner_offsets_set(&mut self, level: usize, next: u64) {
        self.offsets.0.insert(level, next);
    }
}

impl Service for ScheduleDelivery {
    const NAME: &'static str = "schedule_delivery";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(self.tick, |act, ctx| act.inner.deliver(ctx));
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

impl Serve<PersistDelayOffsets> for ScheduleDelivery {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, _: PersistDelayOffsets, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.persist()
    }
}
