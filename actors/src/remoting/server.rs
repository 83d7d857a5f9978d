//! The server side of the remoting transport: an accept loop and one `Connection` actor per TCP
//! connection (DESIGN §3 `RequestHandler`).
//!
//! A connection decodes frames, hands each request to its [`Processor`] and writes replies,
//! possibly out of order (clients match replies by `opaque`). Oneway requests get no reply.
//! A malformed frame closes only its own connection, with one log line naming the peer and the
//! rule the frame broke. In: frames, [`Push`] (server-initiated requests such as
//! NOTIFY_CONSUMER_IDS_CHANGED), [`Resume`] (a parked long-poll pull to run again), [`Close`].

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use actix::io::{FramedWrite, WriteHandler};
use actix::prelude::*;
use actormq_core::protocol::command::RemotingCommand;
use futures_util::future::LocalBoxFuture;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::FramedRead;

use super::{CodecError, RemotingCodec};
use crate::metered::{start_local_with, ActorRef, Metered, Serve, ServeStream, Service};

/// What a processor does with a request.
pub enum Handled {
    Reply(RemotingCommand),
    /// The reply comes later (a store append, a suspended pull); `None` = no reply.
    Later(LocalBoxFuture<'static, Option<RemotingCommand>>),
    NoReply,
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
    fn connection_closed(&self, _conn: &ConnInfo) {}
}

/// A server-initiated request to write to this connection (e.g. NOTIFY_CONSUMER_IDS_CHANGED).
pub struct Push(pub RemotingCommand);
impl Message for Push {
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
    writer: FramedWrite<RemotingCommand, OwnedWriteHalf, RemotingCodec>,
}

static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

impl Connection {
    fn run(&mut self, req: RemotingCommand, resumed: bool, ctx: &mut Context<Metered<Self>>) {
        let Some(info) = self.info.clone() else {
            return;
        };
        let oneway = req.is_oneway();
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
        match self.processor.process(req, &info, resumed) {
            Handled::Reply(resp) => {
                tracing::trace!(peer = %self.peer, code = resp.code, opaque = resp.opaque, remark = ?resp.remark, "reply");
                if !oneway {
                    self.writer.write(resp);
                }
            }
            Handled::Later(fut) => {
                ctx.spawn(actix::fut::wrap_future::<_, Metered<Self>>(fut).map(
                    move |resp, act, _| {
                        if let Some(r) = &resp {
                        tracing::trace!(peer = %act.inner.peer, code = r.code, opaque = r.opaque, remark = ?r.remark, "reply");
                    }
                    if let (Some(resp), false) = (resp, oneway) {
                            act.inner.writer.write(resp);
                        }
                    },
                ));
            }
            Handled::NoReply => {}
        }
    }
}

impl Service for Connection {
    const NAME: &'static str = "connection";
    fn stopped(&mut self, _: &mut Context<Metered<Self>>) {
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
                // Replies to our own pushes are oneway-style notifications; nothing waits for them.
            }
            Ok(cmd) => self.run(cmd, false, ctx),
            Err(e) => {
                tracing::warn!(peer = %self.peer, error = %e, "closing connection: malformed input");
                ctx.stop();
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

impl Serve<Resume> for Connection {
    type Reply = ();
    fn serve(&mut self, m: Resume, ctx: &mut Context<Metered<Self>>) {
        self.run(m.0, true, ctx);
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
            ctx.add_stream(FramedRead::new(read, RemotingCodec));
            let writer = FramedWrite::new(write, RemotingCodec, ctx);
            Connection {
                info: Some(info),
                peer,
                processor,
                writer,
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
