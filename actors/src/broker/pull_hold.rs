//! `PullHold` — parks long-poll pulls that found nothing and wakes them when messages arrive or
//! their time is up (RocketMQ's PullRequestHoldService).
//!
//! In: [`SuspendPull`] (from a connection), [`MessagesArrived`] (from the ConsumeQueue builder,
//! after each dispatched batch), and a 200 ms scan that checks deadlines and, as a safety net for
//! a dropped notification, the queues' current max offsets. Out: [`Resume`] to the connection that
//! owns the request, which runs it again with suspension disabled and replies.
//!
//! Invariant: every parked request is resumed exactly once — when its queue's max offset passes
//! its offset, or at its deadline.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::store::reader::StoreReader;

use crate::metered::{ActorRef, Metered, Serve, Service};
use crate::remoting::server::{Connection, Resume};
use crate::store::cq_builder::Arrival;

struct Parked {
    offset: u64,
    deadline: Instant,
    request: RemotingCommand,
    conn: ActorRef<Connection>,
}

pub struct SuspendPull {
    pub topic: String,
    pub queue_id: i32,
    pub offset: u64,
    pub deadline: Instant,
    pub request: RemotingCommand,
    pub conn: ActorRef<Connection>,
}
impl Message for SuspendPull {
    type Result = ();
}

pub struct MessagesArrived(pub Vec<Arrival>);
impl Message for MessagesArrived {
    type Result = ();
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
