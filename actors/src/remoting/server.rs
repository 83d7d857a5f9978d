//! The server side of the remoting transport: an accept loop and one `Connection` actor per TCP
//! connection (the broker and the name server each implement `RequestHandler`).
//!
//! A connection decodes frames, hands each request to its [`Processor`] and writes replies,
//! possibly out of order (clients match replies by `opaque`), through a [`FrameWriter`] (a
//! reply's body parts, a PULL's records, go to the socket uncopied). Oneway requests get no reply.
//! A malformed frame closes only its own connection, with one log line naming the peer and the
//! rule the frame broke. In: frames, [`Push`] (server-initiated requests such as
//! NOTIFY_CONSUMER_IDS_CHANGED), [`Call`] (a server-initiated request whose response the caller
//! awaits, such as GET_CONSUMER_RUNNING_INFO forwarded to a consumer), [`Resume`] (a parked
//! long-poll pull to run again), [`Close`]. A [`Call`] gets an opaque of this connection's own
//! sequence and waits in the connection's table of calls until the peer's response with that
//! opaque arrives (handed to the caller), its deadline passes or the connection closes (the
//! caller's receiver then reports the sender gone) — the table never outlives either.
//! Replies that come later (a store append, a long poll) are futures in one `FuturesUnordered`
//! the connection reads as a stream, so a wake polls only the futures that were woken.
//!
//! Threads: [`serve`] runs every connection on the current thread (the name server: its
//! requests are a few map lookups). [`ConnectionThreads`] spreads connections over N arbiters
//! (the broker: `serverSelectorThreads`): the accept loop hands each accepted socket round-robin
//! to one [`ConnectionHost`] per arbiter ([`Adopt`], through its bounded mailbox), and the
//! connection lives on that thread until it closes. Each host builds its own processor from a
//! `Send` [`ProcessorFactory`], so per-thread state (batchers, metric caches) needs no lock and
//! shared state sits behind `Arc`. Invariant: a connection's frames are decoded, handled and
//! answered on one thread, in arrival order (replies may still be reordered by `Later`).

use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};

use actix::io::WriteHandler;
use actix::prelude::*;
use actormq_core::protocol::command::RemotingCommand;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::FramedRead;

use super::frame_writer::FrameWriter;
use super::{CodecError, RemotingCodec};
use crate::metered::{
    start_local_on, start_local_with, ActorRef, Metered, Serve, ServeStream, Service,
};

/// What a processor does with a request.
pub enum Handled {
    Reply(RemotingCommand),
    /// The reply comes later (a store append, a suspended pull); `None` = no reply.
    Later(LocalBoxFuture<'static, Option<RemotingCommand>>),
    NoReply,
}

/// What [`Processor::replied`] learns about the request a reply answers.
#[derive(Clone, Copy)]
pub struct Replied {
    pub code: i32,
    pub oneway: bool,
    /// A long-poll pull run again ([`Resume`]): timed from the resume, not from its arrival
    /// (a parked pull's `NoReply` is never timed).
    pub resumed: bool,
    pub started: std::time::Instant,
}

/// Identity of a connection, passed to the processor with every request.
#[derive(Clone)]
pub struct ConnInfo {
    pub id: u64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub conn: ActorRef<Connection>,
}

/// The request logic behind a listener (the broker's, or the name server's).
pub trait Processor: 'static {
    /// `resumed` is true when a parked request (long polling) runs again.
    fn process(&self, req: RemotingCommand, conn: &ConnInfo, resumed: bool) -> Handled;
    /// Called as a reply to `request` is written (or dropped, for a oneway request), with the
    /// time its handling started: where request metrics are recorded, once per reply and
    /// without wrapping the reply's future.
    fn replied(&self, _request: &Replied, _resp: &RemotingCommand) {}
    fn connection_closed(&self, _conn: &ConnInfo) {}
}

/// A server-initiated request to write to this connection (e.g. NOTIFY_CONSUMER_IDS_CHANGED).
pub struct Push(pub RemotingCommand);
impl Message for Push {
    type Result = ();
}

/// A server-initiated request whose response is awaited: the connection gives `cmd` an opaque,
/// writes it, and sends the peer's response to `reply`. The entry is dropped after `timeout`
/// (the caller times out on its own and reports it) or when the connection closes.
pub struct Call {
    pub cmd: RemotingCommand,
    pub timeout: std::time::Duration,
    pub reply: tokio::sync::oneshot::Sender<RemotingCommand>,
}
impl Message for Call {
    type Result = ();
}

/// Run a parked request again (suspension disabled) and reply with whatever it gets.
pub struct Resume(pub RemotingCommand);
impl Message for Resume {
    type Result = ();
}

pub struct Close;
impl Message for Close {
    type Result = ();
}

pub struct Connection {
    info: Option<ConnInfo>,
    peer: SocketAddr,
    processor: Rc<dyn Processor>,
    /// Replies and pushes, in the order written; a reply's `body_parts` (a PULL's records) go
    /// from where they lie to the socket (`writev`), not copied.
    writer: FrameWriter<OwnedWriteHalf>,
    /// Replies still being worked out ([`Handled::Later`]).
    pending: PendingReplies,
    /// [`Call`]s waiting for the peer's response, by the opaque they were sent with.
    calls: std::collections::HashMap<i32, tokio::sync::oneshot::Sender<RemotingCommand>>,
    /// The opaque of the next [`Call`] (wraps; a wrapped value still in the table is skipped).
    next_call_opaque: i32,
}

/// A reply that was worked out later, with what metrics need of its request.
pub struct ReplyReady(Replied, Option<RemotingCommand>);

/// A processor's future with its request's metrics data (a struct, not another boxed future).
struct LaterReply {
    request: Replied,
    fut: LocalBoxFuture<'static, Option<RemotingCommand>>,
}

impl std::future::Future for LaterReply {
    type Output = ReplyReady;
    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<ReplyReady> {
        let request = self.request;
        self.fut.as_mut().poll(cx).map(|r| ReplyReady(request, r))
    }
}

/// The connection's replies in the making, as one stream its actor reads. Not one actix `spawn`
/// per request: actix polls every future spawned on an actor each time the actor wakes, and with
/// hundreds of SENDs in flight per connection that was a cost per message that grew with the
/// client's window. Here only the futures that were woken are polled. Never ends (an empty set
/// is `Pending`), so the stream lives as long as the connection.
#[derive(Clone, Default)]
struct PendingReplies(Rc<std::cell::RefCell<PendingSet>>);

#[derive(Default)]
struct PendingSet {
    futs: FuturesUnordered<LaterReply>,
    /// The reading task's waker, taken by the first push after a poll: a future pushed after the
    /// stream was polled in this turn must be polled in the next.
    waker: Option<Waker>,
}

impl PendingReplies {
    fn push(&self, f: LaterReply) {
        let mut set = self.0.borrow_mut();
        set.futs.push(f);
        if let Some(w) = set.waker.take() {
            w.wake();
        }
    }
}

impl futures_util::Stream for PendingReplies {
    type Item = ReplyReady;
    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<ReplyReady>> {
        let mut set = self.0.borrow_mut();
        match set.futs.poll_next_unpin(cx) {
            Poll::Ready(Some(r)) => Poll::Ready(Some(r)),
            Poll::Ready(None) | Poll::Pending => {
                set.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

/// A connection's read buffer. tokio-util's default 8 KiB held ≈4.7 SENDs of 1 KiB per
/// `recvfrom` from a pipelining producer; 64 KiB takes a window of them per read. Decoded
/// frames share the buffer, so while one is alive the next read gets a fresh buffer of this
/// size (`BytesMut` keeps its original capacity), into which only a partial frame is copied.
const READ_BUFFER: usize = 64 * 1024;

impl Connection {
    fn run(&mut self, req: RemotingCommand, resumed: bool) {
        // Borrowed, not cloned: a clone of the connection's address costs atomic operations on
        // every request.
        let Some(info) = self.info.as_ref() else {
            return;
        };
        let oneway = req.is_oneway();
        let request = Replied {
            code: req.code,
            oneway,
            resumed,
            // The frame's handling start (no clock read of its own).
            started: crate::metered::handling_since(),
        };
        tracing::trace!(
            peer = %self.peer,
            code = req.code,
            request = actormq_core::protocol::codes::request_code_name(req.code),
            opaque = req.opaque,
            ext = ?req.ext_fields,
            body = %String::from_utf8_lossy(&req.body[..req.body.len().min(1024)]),
            resumed,
            "request"
        );
        match self.processor.process(req, info, resumed) {
            Handled::Reply(resp) => {
                tracing::trace!(peer = %self.peer, code = resp.code, opaque = resp.opaque, remark = ?resp.remark, "reply");
                self.processor.replied(&request, &resp);
                if !oneway {
                    self.writer.write(resp);
                }
            }
            Handled::Later(fut) => {
                self.pending.push(LaterReply { request, fut });
            }
            Handled::NoReply => {}
        }
    }
}

impl Service for Connection {
    const NAME: &'static str = "connection";
    fn stopped(&mut self, _: &mut Context<Metered<Self>>) {
        // A request read before the peer closed is carried out even though nobody gets its
        // reply: a consumer's shutdown sends its offsets oneway (UPDATE_CONSUMER_OFFSET, 4.9.4's
        // RemoteBrokerOffsetStore.persistAll), unregisters and closes at once, and RocketMQ's
        // processors finish what they took from a closed channel. Dropping these futures lost
        // the commits whose actor message had not been sent yet.
        let futs = std::mem::take(&mut self.pending.0.borrow_mut().futs);
        if !futs.is_empty() {
            actix_rt::spawn(futs.for_each(|_| std::future::ready(())));
        }
        if let Some(info) = &self.info {
            self.processor.connection_closed(info);
        }
    }
}

impl ServeStream<Result<RemotingCommand, CodecError>> for Connection {
    fn serve_item(
        &mut self,
        item: Result<RemotingCommand, CodecError>,
        ctx: &mut Context<Metered<Self>>,
    ) {
        match item {
            Ok(cmd) if cmd.is_response() => {
                // A response to one of our [`Call`]s; any other (a late one, or to a push) is
                // dropped: nothing waits for it.
                if let Some(tx) = self.calls.remove(&cmd.opaque) {
                    let _ = tx.send(cmd);
                }
            }
            Ok(cmd) => self.run(cmd, false),
            Err(e) => {
                tracing::warn!(peer = %self.peer, error = %e, "closing connection: malformed input");
                ctx.stop();
            }
        }
    }
}

impl ServeStream<ReplyReady> for Connection {
    fn serve_item(&mut self, item: ReplyReady, _: &mut Context<Metered<Self>>) {
        let ReplyReady(request, resp) = item;
        if let Some(r) = resp {
            tracing::trace!(peer = %self.peer, code = r.code, opaque = r.opaque, remark = ?r.remark, "reply");
            self.processor.replied(&request, &r);
            if !request.oneway {
                self.writer.write(r);
            }
        }
    }
}

impl WriteHandler<CodecError> for Metered<Connection> {
    fn error(&mut self, err: CodecError, _: &mut Self::Context) -> Running {
        tracing::debug!(peer = %self.inner.peer, error = %err, "write failed; closing connection");
        Running::Stop
    }
}

impl Serve<Push> for Connection {
    type Reply = ();
    fn serve(&mut self, m: Push, _: &mut Context<Metered<Self>>) {
        self.writer.write(m.0);
    }
}

impl Serve<Call> for Connection {
    type Reply = ();
    fn serve(&mut self, m: Call, ctx: &mut Context<Metered<Self>>) {
        let mut opaque = self.next_call_opaque;
        while self.calls.contains_key(&opaque) {
            opaque = opaque.wrapping_add(1);
        }
        self.next_call_opaque = opaque.wrapping_add(1);
        self.calls.insert(opaque, m.reply);
        self.writer.write(m.cmd.with_opaque(opaque));
        ctx.run_later(m.timeout, move |act, _| {
            act.inner.calls.remove(&opaque);
        });
    }
}

impl Serve<Resume> for Connection {
    type Reply = ();
    fn serve(&mut self, m: Resume, _: &mut Context<Metered<Self>>) {
        self.run(m.0, true);
    }
}

impl Serve<Close> for Connection {
    type Reply = ();
    fn serve(&mut self, _: Close, ctx: &mut Context<Metered<Self>>) {
        ctx.stop();
    }
}

/// Starts the actor for one accepted socket.
pub fn accept(
    stream: TcpStream,
    processor: Rc<dyn Processor>,
) -> std::io::Result<ActorRef<Connection>> {
    let peer = stream.peer_addr()?;
    let local = stream.local_addr()?;
    stream.set_nodelay(true)?;
    let (read, write) = stream.into_split();
    Ok(start_local_with(
        move |ctx: &mut Context<Metered<Connection>>| {
            let info = ConnInfo {
                id: NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed),
                peer,
                local,
                conn: ActorRef::of(ctx),
            };
            ctx.add_stream(FramedRead::with_capacity(read, RemotingCodec, READ_BUFFER));
            let pending = PendingReplies::default();
            ctx.add_stream(pending.clone());
            let writer = FrameWriter::new::<Metered<Connection>, CodecError>(write, ctx);
            Connection {
                info: Some(info),
                peer,
                processor,
                writer,
                pending,
                calls: std::collections::HashMap::new(),
                next_call_opaque: 1,
            }
        },
    ))
}

/// Accepts connections forever on the current (actix) thread.
pub async fn serve(listener: TcpListener, processor: Rc<dyn Processor>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                if let Err(e) = accept(stream, processor.clone()) {
                    tracing::debug!(error = %e, "accepted socket closed before setup");
                }
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                actix_rt::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Builds the processor of one connection thread. Called once per thread, on that thread, so the
/// processor may keep thread-local state in `Rc`/`Cell`; what all threads share lives behind the
/// factory's `Arc`s.
pub trait ProcessorFactory: Send + Sync + 'static {
    fn build(&self) -> Rc<dyn Processor>;
}

/// Hand an accepted socket to a connection thread, which starts its [`Connection`] there.
pub struct Adopt(pub std::net::TcpStream);
impl Message for Adopt {
    type Result = ();
}

/// Owns one connection thread's processor and starts the connections handed to that thread.
pub struct ConnectionHost {
    processor: Rc<dyn Processor>,
}

impl Service for ConnectionHost {
    const NAME: &'static str = "connection_host";
}

impl Serve<Adopt> for ConnectionHost {
    type Reply = ();
    fn serve(&mut self, m: Adopt, _: &mut Context<Metered<Self>>) {
        // Registered with this thread's reactor: from here on the socket is polled only here.
        let stream =
            m.0.set_nonblocking(true)
                .and_then(|()| TcpStream::from_std(m.0));
        if let Err(e) = stream.and_then(|s| accept(s, self.processor.clone())) {
            tracing::debug!(error = %e, "accepted socket closed before setup");
        }
    }
}

/// N arbiters serving connections, each with its own processor (`serverSelectorThreads`).
pub struct ConnectionThreads {
    arbiters: Vec<Arbiter>,
    hosts: Vec<ActorRef<ConnectionHost>>,
}

impl ConnectionThreads {
    /// Starts `threads` (at least 1) arbiters, each building its processor from `factory`.
    pub fn start(threads: usize, factory: Arc<dyn ProcessorFactory>) -> ConnectionThreads {
        let mut arbiters = Vec::new();
        let mut hosts = Vec::new();
        for _ in 0..threads.max(1) {
            let arb = Arbiter::new();
            let f = factory.clone();
            hosts.push(start_local_on(&arb.handle(), "connections", move |_| {
                ConnectionHost {
                    processor: f.build(),
                }
            }));
            arbiters.push(arb);
        }
        ConnectionThreads { arbiters, hosts }
    }

    pub fn threads(&self) -> usize {
        self.hosts.len()
    }

    /// Accepts connections forever (on the current thread) and hands them out round-robin.
    pub fn serve(&self, listener: TcpListener) -> impl std::future::Future<Output = ()> + 'static {
        let hosts = self.hosts.clone();
        let next = AtomicUsize::new(0);
        async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let i = next.fetch_add(1, Ordering::Relaxed) % hosts.len();
                        let adopt = stream.into_std().map(Adopt);
                        match adopt {
                            // Waits while that thread's mailbox is full: accepting slows down
                            // instead of queueing sockets without bound.
                            Ok(a) => {
                                let _ = hosts[i].send(a).await;
                            }
                            Err(e) => tracing::debug!(error = %e, "accepted socket unusable"),
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        actix_rt::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        }
    }

    /// Stops every connection thread (their connections close) and waits for them to end.
    pub async fn stop(self) {
        for a in &self.arbiters {
            a.stop();
        }
        let arbiters = self.arbiters;
        let _ = tokio::task::spawn_blocking(move || {
            for a in arbiters {
                let _ = a.join();
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::remoting::client::RemotingClient;

    /// Answers every request with the id of the thread that handled it.
    struct WhichThread;
    impl Processor for WhichThread {
        fn process(&self, req: RemotingCommand, _: &ConnInfo, _: bool) -> Handled {
            let id = format!("{:?}", std::thread::current().id());
            Handled::Reply(RemotingCommand::response_to(&req, 0, Some(id)))
        }
    }

    #[derive(Default)]
    struct CountingFactory(AtomicUsize);
    impl ProcessorFactory for CountingFactory {
        fn build(&self) -> Rc<dyn Processor> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Rc::new(WhichThread)
        }
    }

    #[actix::test]
    async fn connections_go_round_robin_to_the_threads_and_each_stays_on_one() {
        let factory = Arc::new(CountingFactory::default());
        let threads = ConnectionThreads::start(3, factory.clone());
        assert_eq!(threads.threads(), 3);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accept = actix_rt::spawn(threads.serve(listener));
        let mut per_thread: HashMap<String, usize> = HashMap::new();
        for _ in 0..6 {
            let c = RemotingClient::connect(&addr).await.unwrap();
            let mut seen = std::collections::HashSet::new();
            for _ in 0..5 {
                let r = c
                    .invoke(RemotingCommand::new_request(1), Duration::from_secs(5))
                    .await
                    .unwrap();
                seen.insert(r.remark.unwrap());
            }
            assert_eq!(seen.len(), 1, "one connection, one thread: {seen:?}");
            *per_thread
                .entry(seen.into_iter().next().unwrap())
                .or_default() += 1;
        }
        assert_eq!(per_thread.len(), 3, "{per_thread:?}");
        assert!(per_thread.values().all(|&n| n == 2), "{per_thread:?}");
        let me = format!("{:?}", std::thread::current().id());
        assert!(
            !per_thread.contains_key(&me),
            "served on the accepting thread"
        );
        assert_eq!(
            factory.0.load(Ordering::Relaxed),
            3,
            "one processor per thread"
        );
        accept.abort();
        threads.stop().await;
    }

    /// Answers request code 11 with the records of `parts` as body parts (as a PULL_FOUND
    /// does), anything else with a small reply.
    struct Parts(Vec<bytes::Bytes>);
    impl Parts {
        fn answer(&self, req: &RemotingCommand) -> RemotingCommand {
            let resp = RemotingCommand::response_to(req, 0, Some("FOUND".into()))
                .with_ext("nextBeginOffset", "64");
            if req.code == 11 {
                resp.with_body_parts(self.0.clone())
            } else {
                resp.with_body(&b"small"[..])
            }
        }
    }
    impl Processor for Parts {
        fn process(&self, req: RemotingCommand, _: &ConnInfo, _: bool) -> Handled {
            Handled::Reply(self.answer(&req))
        }
    }

    /// The bytes on the socket are the frames as `encode_frame` copies them, in the order of the
    /// requests: replies with body parts written with `writev` (many MiB, so the socket fills
    /// and the writer resumes mid-part) between replies without.
    #[actix::test]
    async fn replies_with_body_parts_leave_as_the_copied_frames_in_order() {
        use actormq_core::protocol::codec::encode_frame;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let parts: Vec<bytes::Bytes> = (0..64u32)
            .map(|i| bytes::Bytes::from(vec![i as u8; 1199 * (1 + i as usize % 5) * 30]))
            .collect();
        let parts = Rc::new(Parts(parts));
        let processor: Rc<dyn Processor> = parts.clone();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = actix_rt::spawn(serve(listener, processor));
        let requests: Vec<RemotingCommand> = [11, 10, 11, 10, 10]
            .iter()
            .enumerate()
            .map(|(i, &code)| RemotingCommand::new_request(code).with_opaque(i as i32))
            .collect();
        let mut golden = bytes::BytesMut::new();
        let mut sent = bytes::BytesMut::new();
        for r in &requests {
            encode_frame(r, &mut sent);
            let want = parts.answer(r);
            let body: Vec<u8> = std::iter::once(&want.body)
                .chain(&want.body_parts)
                .flat_map(|p| p.iter().copied())
                .collect();
            let contiguous = want.clone().with_body_parts(Vec::new()).with_body(body);
            encode_frame(&contiguous, &mut golden);
        }
        let mut sock = TcpStream::connect(addr).await.unwrap();
        sock.write_all(&sent).await.unwrap();
        // Read slowly at first, so the broker's socket buffer fills.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut got = vec![0u8; golden.len()];
        tokio::time::timeout(Duration::from_secs(30), sock.read_exact(&mut got))
            .await
            .expect("all replies within 30 s")
            .unwrap();
        let first = got.iter().zip(golden.iter()).position(|(a, b)| a != b);
        assert!(
            first.is_none(),
            "bytes differ from the copied frames at {first:?} of {}: {:?} vs {:?}",
            golden.len(),
            &got[first.unwrap_or(0)..][..64.min(golden.len() - first.unwrap_or(0))],
            &golden[first.unwrap_or(0)..][..64.min(golden.len() - first.unwrap_or(0))]
        );
        server.abort();
    }
}
