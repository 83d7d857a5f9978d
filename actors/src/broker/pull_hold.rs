//! `PullHold` — parks long-poll pulls that found nothing and wakes them when messages arrive or
//! their time is up (RocketMQ's PullRequestHoldService).
//!
//! In (declared in [`super::messages`]): [`SuspendPull`] (from a connection),
//! [`MessagesArrived`] (from the ConsumeQueue builder, after each dispatched batch), and a 200 ms scan that checks deadlines and, as a safety net for
//! a dropped notification, the queues' current max offsets. Out: [`Resume`] to the connection that
//! owns the request, which runs it again with suspension disabled and replies.
//!
//! Invariant: every parked request is resumed exactly once — when its queue's max offset passes
//! its wake offset, or at its deadline. [`hold`] picks both, so that a pull is never parked with
//! its wake condition already true (it would be resumed at once; on a slave that keeps the
//! consumer's offset, its client, answered PULL_NOT_FOUND, would pull again without pause).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::store::reader::StoreReader;

use super::messages::{MessagesArrived, SuspendPull};
use crate::metered::{ActorRef, Metered, Serve, Service};
use crate::remoting::server::{Connection, Resume};

struct Parked {
    /// Resumed once the queue's max offset passes this.
    offset: u64,
    deadline: Instant,
    request: RemotingCommand,
    conn: ActorRef<Connection>,
}

/// How often RocketMQ's hold service re-checks its parked pulls with long polling
/// (`PullRequestHoldService`: every 5 s, else every `shortPollingTimeMills`).
pub const LONG_POLLING_RECHECK: Duration = Duration::from_secs(5);

/// For a pull that found nothing at `offset` in a queue whose max offset is `max_offset`, and may
/// wait `wait`: the offset whose passing wakes it, and how long it waits at most.
///
/// Usually the pull is at the max (nothing newer yet) and waits for the next message or `wait`.
/// But a pull below the max can find nothing too (OFFSET_FOUND_NULL: the units under it are gone,
/// say a ConsumeQueue file retention deleted under it). RocketMQ parks it like any other, and its
/// hold service resumes it at its next check (0–5 s later with long polling, as the checks run
/// on their own clock), since the queue is already past its offset. A master's answer then moves
/// the consumer to the next file; a slave without `offsetCheckInSlave` keeps its offset, so the
/// consumer asks again — once per check, not in a tight loop. Here it waits for a message beyond
/// the current max, or one whole re-check period `recheck` (if shorter than `wait`): the same
/// bound, without a free-running clock.
pub fn hold(offset: u64, max_offset: u64, wait: Duration, recheck: Duration) -> (u64, Duration) {
    if max_offset > offset {
        (max_offset, wait.min(recheck))
    } else {
        (offset, wait)
    }
}

pub struct PullHold {
    reader: StoreReader,
    parked: HashMap<(String, i32), Vec<Parked>>,
}

impl PullHold {
    pub fn new(reader: StoreReader) -> Self {
        PullHold {
            reader,
            parked: HashMap::new(),
        }
    }

    fn resume(p: Parked, ctx: &mut Context<Metered<Self>>) {
        let conn = p.conn;
        let req = p.request;
        // Awaited in the background: a busy connection delays the resume, never loses it.
        ctx.spawn(actix::fut::wrap_future(async move {
            let _ = conn.send(Resume(req)).await;
        }));
    }

    fn wake(
        &mut self,
        topic: &str,
        queue_id: i32,
        max_offset: u64,
        ctx: &mut Context<Metered<Self>>,
    ) {
        let key = (topic.to_string(), queue_id);
        let Some(list) = self.parked.get_mut(&key) else {
            return;
        };
        let (ready, keep): (Vec<_>, Vec<_>) = list.drain(..).partition(|p| max_offset > p.offset);
        *list = keep;
        if list.is_empty() {
            self.parked.remove(&key);
        }
        for p in ready {
            Self::resume(p, ctx);
        }
    }

    fn scan(&mut self, ctx: &mut Context<Metered<Self>>) {
        let now = Instant::now();
        let keys: Vec<_> = self.parked.keys().cloned().collect();
        for key in keys {
            let max = self.reader.max_offset(&key.0, key.1).0;
            let Some(list) = self.parked.get_mut(&key) else {
                continue;
            };
            let (ready, keep): (Vec<_>, Vec<_>) = list
                .drain(..)
                .partition(|p| max > p.offset || now >= p.deadline);
            *list = keep;
            if list.is_empty() {
                self.parked.remove(&key);
            }
            for p in ready {
                Self::resume(p, ctx);
            }
        }
    }
}

impl Service for PullHold {
    const NAME: &'static str = "pull_hold";
    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(Duration::from_millis(200), |act, ctx| act.inner.scan(ctx));
    }
}

impl Serve<SuspendPull> for PullHold {
    type Reply = ();
    fn serve(&mut self, m: SuspendPull, ctx: &mut Context<Metered<Self>>) {
        // A message may have arrived between the pull's read and this message: check once more.
        if self.reader.max_offset(&m.topic, m.queue_id).0 > m.offset {
            Self::resume(
                Parked {
                    offset: m.offset,
                    deadline: m.deadline,
                    request: m.request,
                    conn: m.conn,
                },
                ctx,
            );
            return;
        }
        self.parked
            .entry((m.topic, m.queue_id))
            .or_default()
            .push(Parked {
                offset: m.offset,
                deadline: m.deadline,
                request: m.request,
                conn: m.conn,
            });
    }
}

impl Serve<MessagesArrived> for PullHold {
    type Reply = ();
    fn serve(&mut self, m: MessagesArrived, ctx: &mut Context<Metered<Self>>) {
        for a in m.0 {
            self.wake(&a.topic, a.queue_id, a.max_offset, ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_at_the_max_waits_for_the_next_message_or_its_time() {
        let wait = Duration::from_secs(15);
        assert_eq!(hold(7, 7, wait, LONG_POLLING_RECHECK), (7, wait));
        // Past the max (OFFSET_OVERFLOW_BADLY is answered, not parked, but the rule holds).
        assert_eq!(hold(9, 7, wait, LONG_POLLING_RECHECK), (9, wait));
    }

    #[test]
    fn a_pull_below_the_max_that_found_nothing_waits_for_a_newer_message_or_the_recheck() {
        // Not `max > offset` at once: that would resume it at once and the client would loop.
        let (wake_above, waits) = hold(3, 7, Duration::from_secs(15), LONG_POLLING_RECHECK);
        assert_eq!(wake_above, 7);
        assert_eq!(waits, LONG_POLLING_RECHECK);
        // A shorter wait of the client's own is kept.
        assert_eq!(
            hold(3, 7, Duration::from_millis(300), LONG_POLLING_RECHECK),
            (7, Duration::from_millis(300))
        );
    }
}
