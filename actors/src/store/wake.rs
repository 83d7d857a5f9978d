//! `Waker`: a coalesced wake-up of another store actor — at most one wake message sits in the
//! target's mailbox at a time, so a burst of appends costs the target one handler run, and the
//! sender never waits (`try_notify`; a full mailbox drops the wake, the target's own tick is the
//! safety net). RocketMQ's `ServiceThread.wakeup()` (spec §7.7) does the same with a flag and a
//! latch.
//!
//! Protocol: the sender sets the shared flag and sends only when it was clear; the target clears
//! the flag *before* doing its work, so a wake that arrives during the work is not lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use actix::dev::ToEnvelope;
use actix::prelude::*;

use crate::metered::{ActorRef, Envelope, Metered, Serve};

pub struct Waker {
    flag: Arc<AtomicBool>,
    notify: Box<dyn Fn() -> bool + Send>,
}

impl Waker {
    /// Wakes `target` with `msg()`; `flag` is shared with the target, which clears it on wake.
    pub fn new<S, M>(target: ActorRef<S>, flag: Arc<AtomicBool>, msg: fn() -> M) -> Waker
    where
        S: Serve<M>,
        M: Message<Result = ()> + Send + 'static,
        Context<Metered<S>>: ToEnvelope<Metered<S>, Envelope<M>>,
    {
        Waker {
            flag,
            notify: Box::new(move || target.try_notify(msg())),
        }
    }

    /// Wakes by calling `notify` (true: the wake is pending), for a target that is not an actor
    /// (the HA connections, woken through a `tokio::sync::Notify`).
    pub fn from_fn(flag: Arc<AtomicBool>, notify: impl Fn() -> bool + Send + 'static) -> Waker {
        Waker {
            flag,
            notify: Box::new(notify),
        }
    }

    /// Sends the wake unless one is already pending. No allocation, no lock.
    #[inline]
    pub fn wake(&self) {
        if !self.flag.swap(true, Ordering::AcqRel) && !(self.notify)() {
            // Mailbox full or target gone: let the next wake try again.
            self.flag.store(false, Ordering::Release);
        }
    }
}
