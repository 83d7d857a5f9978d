//! The one mechanism that instruments every actor (ARCHITECTURE.md, "Actor map"): mailbox depth,
//! messages handled, time waiting in the mailbox and time in the handler, per actor name.
//!
//! An actor is written as a [`Service`] and handles messages by implementing [`Serve<M>`]
//! instead of actix's `Handler<M>`. The actix actor that actually runs is [`Metered<S>`], which
//! wraps every message in an [`Envelope`] stamped at send time and measures around the call into
//! `Serve::serve`. Callers hold an [`ActorRef<S>`], whose `send` is the only way in — so there is
//! no path that skips the meter, and adding an actor gives it metrics with no extra code.
//!
//! Depth is counted when an envelope is created and uncounted when it is dropped (handled, or
//! dropped undelivered because the caller gave up or the actor stopped), so it never drifts.
//! `ActorRef` has no `do_send`: every send is bounded by the mailbox capacity (ARCHITECTURE.md,
//! "Actor map"). Handle time of an asynchronous reply covers only the synchronous part of the
//! handler. The instant a handler started is also the thread's [`handling_since`] while it runs,
//! so the request path times a request's arrival and a reply's sending without its own clock
//! read.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use actix::dev::{MessageResponse, Request, ToEnvelope};
use actix::prelude::*;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

/// Per-actor-name instruments. Leaked on first use: there is a small, fixed set of actor names.
pub struct Probe {
    pub name: &'static str,
    pub depth: IntGauge,
    pub messages: IntCounter,
    pub wait: Histogram,
    pub handle: Histogram,
    /// Mailbox wait of the most recently handled message, in µs: the head-of-line wait that flow
    /// control and `GET_BROKER_RUNTIME_INFO` report.
    pub last_wait_us: std::sync::atomic::AtomicU64,
    /// When the handler running now started, in µs since [`epoch`] plus one; 0 while the actor
    /// waits for a message. A handler stuck in a slow system call shows here (see
    /// [`Probe::busy_for`]) while `last_wait_us` still holds the wait of the message before it.
    pub busy_since_us: std::sync::atomic::AtomicU64,
}

thread_local! {
    /// When the handler running on this thread started: see [`handling_since`].
    static HANDLING_SINCE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// When the message or stream item this thread is handling reached its handler: the clock read
/// the handler takes anyway for its handle time, reused by the request path for a request's
/// arrival and a reply's sending (a SEND read the clock three more times otherwise). Outside a
/// handler, the time now.
pub fn handling_since() -> Instant {
    HANDLING_SINCE
        .with(std::cell::Cell::get)
        .unwrap_or_else(Instant::now)
}

/// The instant probe times count from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Probe {
    /// How long the handler running now has been running (`None`: none is).
    pub fn busy_for(&self) -> Option<std::time::Duration> {
        let since = self
            .busy_since_us
            .load(std::sync::atomic::Ordering::Relaxed);
        (since > 0).then(|| {
            let now = epoch().elapsed().as_micros() as u64 + 1;
            std::time::Duration::from_micros(now.saturating_sub(since))
        })
    }
}

struct Instruments {
    registry: Registry,
    depth: IntGaugeVec,
    messages: IntCounterVec,
    wait: HistogramVec,
    handle: HistogramVec,
    probes: Mutex<HashMap<&'static str, &'static Probe>>,
}

/// Exponential buckets from 1 µs to ~16 s: mailbox waits and handler times span that range.
fn time_buckets() -> Vec<f64> {
    prometheus::exponential_buckets(1e-6, 4.0, 13).expect("static bucket layout")
}

fn instruments() -> &'static Instruments {
    static I: OnceLock<Instruments> = OnceLock::new();
    I.get_or_init(|| {
        let registry = Registry::new();
        let depth = IntGaugeVec::new(
            Opts::new(
                "actormq_actor_mailbox_depth",
                "Messages sent to the actor and not yet handled",
            ),
            &["actor"],
        )
        .expect("valid metric");
        let messages = IntCounterVec::new(
            Opts::new(
                "actormq_actor_messages_total",
                "Messages handled by the actor",
            ),
            &["actor"],
        )
        .expect("valid metric");
        let wait = HistogramVec::new(
            HistogramOpts::new(
                "actormq_actor_mailbox_wait_seconds",
                "Time from send to the start of handling",
            )
            .buckets(time_buckets()),
            &["actor"],
        )
        .expect("valid metric");
        let handle = HistogramVec::new(
            HistogramOpts::new("actormq_actor_handle_seconds", "Time spent in the handler")
                .buckets(time_buckets()),
            &["actor"],
        )
        .expect("valid metric");
        for c in [
            Box::new(depth.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(messages.clone()),
            Box::new(wait.clone()),
            Box::new(handle.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Instruments {
            registry,
            depth,
            messages,
            wait,
            handle,
            probes: Mutex::new(HashMap::new()),
        }
    })
}

/// The registry every actor metric lives in (the `/metrics` endpoint renders it).
pub fn registry() -> &'static Registry {
    &instruments().registry
}

/// The probe of an actor name, created on first use.
pub fn probe(name: &'static str) -> &'static Probe {
    let _ = epoch();
    let ins = instruments();
    // Only touched when an actor starts or a ref is created, never per message.
    let mut probes = ins.probes.lock().unwrap_or_else(|e| e.into_inner());
    probes.entry(name).or_insert_with(|| {
        Box::leak(Box::new(Probe {
            name,
            depth: ins.depth.with_label_values(&[name]),
            messages: ins.messages.with_label_values(&[name]),
            wait: ins.wait.with_label_values(&[name]),
            handle: ins.handle.with_label_values(&[name]),
            last_wait_us: std::sync::atomic::AtomicU64::new(0),
            busy_since_us: std::sync::atomic::AtomicU64::new(0),
        }))
    })
}

/// A snapshot of one actor's instruments, for in-process readers (runtime info, tests, bench).
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSnapshot {
    pub name: &'static str,
    pub depth: i64,
    pub messages: u64,
    pub wait_count: u64,
    pub wait_sum_seconds: f64,
    pub handle_sum_seconds: f64,
}

pub fn snapshot() -> Vec<ProbeSnapshot> {
    let probes = instruments()
        .probes
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<_> = probes
        .values()
        .map(|p| ProbeSnapshot {
            name: p.name,
            depth: p.depth.get(),
            messages: p.messages.get(),
            wait_count: p.wait.get_sample_count(),
            wait_sum_seconds: p.wait.get_sample_sum(),
            handle_sum_seconds: p.handle.get_sample_sum(),
        })
        .collect();
    v.sort_by_key(|s| s.name);
    v
}

/// An actor's logic. `NAME` labels its metrics.
pub trait Service: Sized + Unpin + 'static {
    const NAME: &'static str;
    /// Bounded mailbox: senders wait (backpressure) beyond this many queued messages.
    const MAILBOX: usize = 1024;
    fn started(&mut self, _ctx: &mut Context<Metered<Self>>) {}
    fn stopped(&mut self, _ctx: &mut Context<Metered<Self>>) {}
}

/// How a [`Service`] handles message `M` (the metered counterpart of `actix::Handler`).
pub trait Serve<M: Message>: Service {
    type Reply: MessageResponse<Metered<Self>, Envelope<M>>;
    fn serve(&mut self, msg: M, ctx: &mut Context<Metered<Self>>) -> Self::Reply;
}

/// A plain-value reply to `M` through the meter (the counterpart of `actix::MessageResult`).
pub type Reply<M> = MessageResult<Envelope<M>>;

/// The actix actor that runs a [`Service`] and meters it.
pub struct Metered<S> {
    pub inner: S,
    probe: &'static Probe,
}

impl<S: Service> Actor for Metered<S> {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(S::MAILBOX);
        self.inner.started(ctx);
    }
    fn stopped(&mut self, ctx: &mut Self::Context) {
        self.inner.stopped(ctx);
    }
}

/// A message stamped with its send time; counted in the mailbox depth while it lives.
pub struct Envelope<M> {
    msg: Option<M>,
    sent: Instant,
    probe: &'static Probe,
}

impl<M> Drop for Envelope<M> {
    fn drop(&mut self) {
        self.probe.depth.dec();
    }
}

impl<M: Message> Message for Envelope<M> {
    type Result = M::Result;
}

impl<S, M> Handler<Envelope<M>> for Metered<S>
where
    S: Serve<M>,
    M: Message,
{
    type Result = S::Reply;

    fn handle(&mut self, mut env: Envelope<M>, ctx: &mut Context<Self>) -> S::Reply {
        let start = Instant::now();
        let waited = start - env.sent;
        self.probe.wait.observe(waited.as_secs_f64());
        self.probe.last_wait_us.store(
            waited.as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        let msg = env.msg.take().expect("an envelope is handled once");
        drop(env);
        let busy = &self.probe.busy_since_us;
        let since = start.saturating_duration_since(epoch()).as_micros() as u64 + 1;
        busy.store(since, std::sync::atomic::Ordering::Relaxed);
        let outer = HANDLING_SINCE.with(|h| h.replace(Some(start)));
        let reply = self.inner.serve(msg, ctx);
        HANDLING_SINCE.with(|h| h.set(outer));
        busy.store(0, std::sync::atomic::Ordering::Relaxed);
        self.probe.handle.observe(start.elapsed().as_secs_f64());
        self.probe.messages.inc();
        reply
    }
}

/// How a [`Service`] handles the items of a stream it was given with `ctx.add_stream` (frames of
/// a socket). Items are counted and timed like messages; they have no mailbox wait.
pub trait ServeStream<I>: Service {
    fn serve_item(&mut self, item: I, ctx: &mut Context<Metered<Self>>);
    fn stream_finished(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.stop();
    }
}

impl<S, I> StreamHandler<I> for Metered<S>
where
    S: ServeStream<I>,
{
    fn handle(&mut self, item: I, ctx: &mut Context<Self>) {
        let start = Instant::now();
        let outer = HANDLING_SINCE.with(|h| h.replace(Some(start)));
        self.inner.serve_item(item, ctx);
        HANDLING_SINCE.with(|h| h.set(outer));
        self.probe.handle.observe(start.elapsed().as_secs_f64());
        self.probe.messages.inc();
    }
    fn finished(&mut self, ctx: &mut Context<Self>) {
        self.inner.stream_finished(ctx);
    }
}

/// The address of a metered actor. Cloneable; the only way to send to it.
pub struct ActorRef<S: Service> {
    addr: Addr<Metered<S>>,
    probe: &'static Probe,
}

impl<S: Service> Clone for ActorRef<S> {
    fn clone(&self) -> Self {
        ActorRef {
            addr: self.addr.clone(),
            probe: self.probe,
        }
    }
}

impl<S: Service> ActorRef<S> {
    fn envelope<M>(&self, msg: M) -> Envelope<M> {
        self.probe.depth.inc();
        Envelope {
            msg: Some(msg),
            sent: Instant::now(),
            probe: self.probe,
        }
    }

    /// Sends and awaits the reply; waits while the mailbox is full (backpressure).
    pub fn send<M>(&self, msg: M) -> Request<Metered<S>, Envelope<M>>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        S: Serve<M>,
        Context<Metered<S>>: ToEnvelope<Metered<S>, Envelope<M>>,
    {
        self.addr.send(self.envelope(msg))
    }

    /// Sends without waiting for a reply; fails (returning nothing) when the mailbox is full or
    /// the actor is gone. For coalesced notifications whose loss is harmless by design.
    pub fn try_notify<M>(&self, msg: M) -> bool
    where
        M: Message + Send + 'static,
        M::Result: Send,
        S: Serve<M>,
        Context<Metered<S>>: ToEnvelope<Metered<S>, Envelope<M>>,
    {
        self.addr.try_send(self.envelope(msg)).is_ok()
    }

    /// Sends without waiting for a reply, past the mailbox bound (actix `do_send`): for a message
    /// that must not be lost, from a sender whose own load is bounded upstream (the writer's
    /// SYNC_FLUSH waits: one message per burst of its mailbox, one wait per append in flight,
    /// and appends are bounded by the writer's mailbox). If the actor is gone the message is dropped with whatever it carries.
    pub fn notify<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        S: Serve<M>,
        Context<Metered<S>>: ToEnvelope<Metered<S>, Envelope<M>>,
    {
        self.addr.do_send(self.envelope(msg))
    }

    /// The actor's own reference, from inside its context.
    pub fn of(ctx: &Context<Metered<S>>) -> ActorRef<S> {
        ActorRef {
            addr: ctx.address(),
            probe: probe(S::NAME),
        }
    }

    pub fn connected(&self) -> bool {
        self.addr.connected()
    }

    pub fn name(&self) -> &'static str {
        self.probe.name
    }

    /// This actor's instruments.
    pub fn probe(&self) -> &'static Probe {
        self.probe
    }
}

/// Starts `service` on `arbiter` (its own thread, for actors that block) or on the current one.
pub fn start_on<S: Service + Send>(arbiter: Option<&ArbiterHandle>, service: S) -> ActorRef<S> {
    let probe = probe(S::NAME);
    let actor = Metered {
        inner: service,
        probe,
    };
    let addr = match arbiter {
        Some(a) => {
            name_thread(a, S::NAME);
            Metered::start_in_arbiter(a, move |_| actor)
        }
        None => actor.start(),
    };
    ActorRef { addr, probe }
}

/// Starts a service on `arbiter`, a thread it shares with other actors (its name is the
/// arbiter's, set once by whoever made it).
pub fn start_beside<S: Service + Send>(arbiter: &ArbiterHandle, service: S) -> ActorRef<S> {
    let probe = probe(S::NAME);
    let actor = Metered {
        inner: service,
        probe,
    };
    let addr = Metered::start_in_arbiter(arbiter, move |_| actor);
    ActorRef { addr, probe }
}

/// Names a dedicated arbiter's thread after its actor, so `top -H`, `perf` and core dumps show
/// which subsystem a thread is (Linux keeps 15 bytes).
pub fn name_thread(arbiter: &ArbiterHandle, name: &'static str) {
    arbiter.spawn_fn(move || {
        let mut buf = [0u8; 16];
        let n = name.len().min(15);
        buf[..n].copy_from_slice(&name.as_bytes()[..n]);
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from `buf`.
        unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0) };
    });
}

/// Starts a service on the current thread, built inside its context (e.g. to attach a socket
/// stream). For services that are not `Send`, such as connections sharing broker state.
pub fn start_local_with<S: Service, F>(f: F) -> ActorRef<S>
where
    F: FnOnce(&mut Context<Metered<S>>) -> S,
{
    let probe = probe(S::NAME);
    let addr = Metered::create(move |ctx| Metered {
        inner: f(ctx),
        probe,
    });
    ActorRef { addr, probe }
}

/// Starts a service that is not `Send` (it holds `Rc` state) on `arbiter`: `f` runs on the
/// arbiter's thread and builds it there. Names the thread `thread_name`.
pub fn start_local_on<S: Service, F>(
    arbiter: &ArbiterHandle,
    thread_name: &'static str,
    f: F,
) -> ActorRef<S>
where
    F: FnOnce(&mut Context<Metered<S>>) -> S + Send + 'static,
{
    let probe = probe(S::NAME);
    name_thread(arbiter, thread_name);
    let addr = Metered::start_in_arbiter(arbiter, move |ctx| Metered {
        inner: f(ctx),
        probe,
    });
    ActorRef { addr, probe }
}

/// Like [`start_on`], for services built inside their context (to schedule timers at creation).
pub fn start_with<S: Service + Send, F>(arbiter: &ArbiterHandle, f: F) -> ActorRef<S>
where
    F: FnOnce(&mut Context<Metered<S>>) -> S + Send + 'static,
{
    let probe = probe(S::NAME);
    let addr = Metered::start_in_arbiter(arbiter, move |ctx| Metered {
        inner: f(ctx),
        probe,
    });
    ActorRef { addr, probe }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;
    impl Service for Echo {
        const NAME: &'static str = "test_echo";
    }
    struct Ping(u32);
    impl Message for Ping {
        type Result = u32;
    }
    impl Serve<Ping> for Echo {
        type Reply = u32;
        fn serve(&mut self, msg: Ping, _: &mut Context<Metered<Self>>) -> u32 {
            msg.0 + 1
        }
    }

    struct Stuck;
    impl Service for Stuck {
        const NAME: &'static str = "test_stuck";
    }
    struct Hold(std::sync::mpsc::Receiver<()>);
    impl Message for Hold {
        type Result = ();
    }
    impl Serve<Hold> for Stuck {
        type Reply = ();
        fn serve(&mut self, msg: Hold, _: &mut Context<Metered<Self>>) {
            // Blocks its thread, as a slow system call would.
            let _ = msg.0.recv();
        }
    }

    /// A handler that does not return shows as busy, with how long, from any thread; the last
    /// mailbox wait cannot show it (no message is taken meanwhile).
    #[actix::test]
    async fn a_handler_stuck_in_a_call_shows_how_long_it_has_been_busy() {
        let arbiter = actix::Arbiter::new();
        let r = start_on(Some(&arbiter.handle()), Stuck);
        let probe = r.probe();
        assert_eq!(probe.busy_for(), None);
        let (release, hold) = std::sync::mpsc::channel();
        let done = r.send(Hold(hold));
        let mut busy = None;
        for _ in 0..2_000 {
            busy = probe
                .busy_for()
                .filter(|b| *b >= std::time::Duration::from_millis(20));
            if busy.is_some() {
                break;
            }
            actix_rt::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(busy.is_some(), "never seen busy for 20 ms");
        release.send(()).unwrap();
        done.await.unwrap();
        assert_eq!(probe.busy_for(), None, "idle again");
        arbiter.stop();
    }

    #[actix::test]
    async fn a_new_service_is_metered_without_extra_code() {
        let r = start_on(None, Echo);
        for i in 0..10 {
            assert_eq!(r.send(Ping(i)).await.unwrap(), i + 1);
        }
        let s = snapshot()
            .into_iter()
            .find(|s| s.name == "test_echo")
            .unwrap();
        assert_eq!(s.messages, 10);
        assert_eq!(s.depth, 0);
        assert_eq!(s.wait_count, 10);
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry().gather())
            .unwrap();
        assert!(
            text.contains("actormq_actor_mailbox_depth{actor=\"test_echo\"} 0"),
            "{text}"
        );
        assert!(text.contains("actormq_actor_handle_seconds_count{actor=\"test_echo\"} 10"));
    }
}
