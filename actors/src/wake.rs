//! `Waker`: a coalesced wake-up of another actor — at most one wake message sits in the
//! target's mailbox at a time, so a burst of appends costs the target one handler run, and the
//! sender never waits (`try_notify`; a full mailbox drops the wake, the target's own tick is the
//! safety net). RocketMQ's `ServiceThread.wakeup()` (common/.../ServiceThread.java) does the same with a flag and a
//! latch.
//!
//! Protocol: the sender publishes its new position, then sets the shared flag and sends only when
//! it was clear; the target clears the flag ([`clear`]) *before* it reads the position, so a wake
//! that arrives during the work is not lost. Both sides put a SeqCst fence between their store
//! and their load: it is the store-buffering pattern, and without the fences (on x86 a plain
//! `store(false)` is a `MOV` that later loads may pass) the target could read the old position
//! while the sender still saw the flag set, and the wake was lost until the target's own tick.

use std::sync::atomic::{fence, AtomicBool, Ordering};
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

    /// Wakes by calling `notify` (true: the wake is pending): for a target that is not an actor,
    /// and for tests.
    pub fn from_fn(flag: Arc<AtomicBool>, notify: impl Fn() -> bool + Send + 'static) -> Waker {
        Waker {
            flag,
            notify: Box::new(notify),
        }
    }

    /// Sends the wake unless one is already pending. No allocation, no lock. Called after the
    /// caller published what the target is to look at.
    #[inline]
    pub fn wake(&self) {
        // Orders the caller's publication before the read of the flag (see the module docs).
        fence(Ordering::SeqCst);
        if !self.flag.swap(true, Ordering::AcqRel) && !(self.notify)() {
            // Mailbox full or target gone: let the next wake try again.
            self.flag.store(false, Ordering::Release);
        }
    }
}

/// The target's side: clears its pending-wake flag, ordered before every load that follows (the
/// position it is about to read), so a wake sent after that read is not taken as still pending.
#[inline]
pub fn clear(flag: &AtomicBool) {
    flag.store(false, Ordering::Relaxed);
    fence(Ordering::SeqCst);
}
