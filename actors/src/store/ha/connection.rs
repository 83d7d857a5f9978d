//! `HaConnection` — a master's side of one slave's connection (RocketMQ's `HAConnection`):
//! reads the slave's offset reports and streams CommitLog bytes from where the slave asks.
//!
//! In: the read half as a stream of reports ([`Inbound`]: the first says where to start — an
//! empty slave starts at the master's last file — every one is an ack); [`Wake`] from the
//! [`HaMaster`] when new bytes are readable; its own 100 ms tick (a lost wake, the heartbeat).
//! Out: [`Attach`] on the first report, [`Ack`] on every report, [`Detach`] when it ends; to the
//! slave, transfers of at most `haTransferBatchSize` that never cross a file, and a heartbeat
//! (an empty transfer) after `haSendHeartbeatInterval` without data.
//!
//! It reads through the store's read-only view, only bytes readers may see (committed), and
//! never goes through a writer's mailbox. A write holds the socket's write half while it runs
//! beside the mailbox (`ctx.spawn`), so a long catch-up or a slave that stopped reading never
//! stops the acks nor the housekeeping (RocketMQ's ReadSocketService and WriteSocketService);
//! one write at a time, each bounded by `haHousekeepingInterval`. The connection ends when the
//! slave closes it, a write or read fails or times out, or the slave's offsets make no sense.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::protocol::ha::{self, ReportReader};
use actormq_core::store::mapped_file_queue::{FileQueueView, ReadSlice};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use super::io::{inbound, write_within};
use super::master::{HaMaster, HaState};
use super::messages::{Ack, Attach, Detach, Inbound, Wake};
use super::HaParams;
use crate::metered::{start_local_with, ActorRef, Metered, Serve, ServeStream, Service};
use crate::wake::{self, Waker};

/// A connection with nothing to send looks again at least this often (RocketMQ: 100 ms).
const IDLE_POLL: Duration = Duration::from_millis(100);

/// Master: accepts slaves on `listener` and starts an [`HaConnection`] for each, on the current
/// thread. Runs until its thread stops.
pub async fn serve_master(
    listener: std::net::TcpListener,
    view: FileQueueView,
    state: Arc<HaState>,
    p: HaParams,
) {
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve the HA port (haListenPort)");
            return;
        }
    };
    for id in 0.. {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a slave failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tracing::info!(slave = %peer, "a slave connected to the HA port");
        let master = state.master.clone();
        HaConnection::start(id, stream, peer, view.clone(), master, p.clone());
    }
}

pub struct HaConnection {
    id: u64,
    peer: SocketAddr,
    view: FileQueueView,
    master: ActorRef<HaMaster>,
    p: HaParams,
    /// The [`Waker`] flag of [`Wake`], shared with the master's registry entry.
    woken: Arc<AtomicBool>,
    /// The write half; `None` while a write holds it.
    socket: Option<OwnedWriteHalf>,
    /// Where the next transfer starts; `None` until the first report.
    at: Option<u64>,
    last_write: Instant,
    ended: bool,
}

impl HaConnection {
    fn start(
        id: u64,
        stream: TcpStream,
        peer: SocketAddr,
        view: FileQueueView,
        master: ActorRef<HaMaster>,
        p: HaParams,
    ) -> ActorRef<HaConnection> {
        let (rd, wr) = stream.into_split();
        start_local_with(move |ctx: &mut Context<Metered<HaConnection>>| {
            ctx.add_stream(inbound(
                rd,
                ReportReader::default(),
                p.housekeeping,
                "slave",
            ));
            HaConnection {
                id,
                peer,
                view,
                master,
                p,
                woken: Arc::new(AtomicBool::new(false)),
                socket: Some(wr),
                at: None,
                last_write: Instant::now(),
                ended: false,
            }
        })
    }

    /// A report: the first attaches the slave and says where to start; every one is an ack.
    fn report(&mut self, offset: u64, ctx: &mut Context<Metered<Self>>) -> Result<(), String> {
        if self.at.is_none() {
            let readable = self.view.max_offset();
            let from = ha::start_offset(offset, readable, self.p.file_size);
            if from > readable {
                return Err(format!(
                    "the slave's CommitLog ends at {from}, beyond this master's end {readable}: \
                     the two have diverged (a master restarted without data the slave had); \
                     the slave's store must be rebuilt"
                ));
            }
            tracing::info!(from, slave_end = offset, "replicating to a slave");
            self.at = Some(from);
            let wake = Waker::new(ActorRef::of(ctx), self.woken.clone(), || Wake);
            self.master.notify(Attach { id: self.id, wake });
        } else if offset > self.view.max_wrote_offset() {
            return Err(format!(
                "the slave acknowledged offset {offset}, beyond this master's CommitLog end {}",
                self.view.max_wrote_offset()
            ));
        }
        // Not to be lost (a SYNC_MASTER send may wait for it); one per read of the socket.
        self.master.notify(Ack { offset });
        Ok(())
    }

    /// Starts the next write, unless one is under way (it pumps again when done): the bytes
    /// readable from where the slave is, else a heartbeat when one is due.
    fn pump(&mut self, ctx: &mut Context<Metered<Self>>) {
        let Some(at) = self.at else {
            return;
        };
        let Some(wr) = self.socket.take() else {
            return;
        };
        // Before reading the position: a wake from here on is not taken as still pending.
        wake::clear(&self.woken);
        let len = ha::chunk_len(at, self.view.max_offset(), self.p.file_size, self.p.batch);
        if len > 0 {
            let Some(bytes) = self.view.read(at, len as usize) else {
                let err = format!(
                    "the master no longer has the CommitLog bytes at offset {at} the slave \
                     needs (its oldest file starts at {}): the slave's store must be rebuilt \
                     from a copy of the master's",
                    self.view.min_offset()
                );
                return self.end(Err(err), ctx);
            };
            self.at = Some(at + len);
            self.write(wr, ha::header(at, len as u32), Some(bytes), ctx);
        } else if self.last_write.elapsed() >= self.p.heartbeat {
            self.write(wr, ha::header(at, 0), None, ctx);
        } else {
            self.socket = Some(wr);
        }
    }

    /// Writes a transfer beside the mailbox; gives the socket back and pumps again when done.
    fn write(
        &mut self,
        mut wr: OwnedWriteHalf,
        header: [u8; ha::HEADER_LEN],
        body: Option<ReadSlice>,
        ctx: &mut Context<Metered<Self>>,
    ) {
        let limit = self.p.housekeeping;
        let write = async move {
            let mut r = write_within(&mut wr, &header, limit, "slave").await;
            if let (Ok(()), Some(body)) = (&r, &body) {
                r = write_within(&mut wr, body.as_bytes(), limit, "slave").await;
            }
            (wr, r)
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Metered<Self>>(write).map(|(wr, r), act, ctx| {
                let act = &mut act.inner;
                match r {
                    Ok(()) => {
                        act.socket = Some(wr);
                        act.last_write = Instant::now();
                        act.pump(ctx);
                    }
                    Err(e) => act.end(Err(e), ctx),
                }
            }),
        );
    }

    fn end(&mut self, how: Result<(), String>, ctx: &mut Context<Metered<Self>>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        match how {
            Ok(()) => tracing::info!(slave = %self.peer, "the slave closed its HA connection"),
            Err(e) => tracing::warn!(slave = %self.peer, reason = %e, "HA connection closed"),
        }
        ctx.stop();
    }
}

impl Service for HaConnection {
    const NAME: &'static str = "ha_connection";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(IDLE_POLL, |act, ctx| act.inner.pump(ctx));
    }

    fn stopped(&mut self, _: &mut Context<Metered<Self>>) {
        if self.at.is_some() {
            self.master.notify(Detach { id: self.id });
        }
    }
}

impl ServeStream<Inbound<u64>> for HaConnection {
    fn serve_item(&mut self, item: Inbound<u64>, ctx: &mut Context<Metered<Self>>) {
        match item {
            Inbound::Item(offset) => match self.report(offset, ctx) {
                Ok(()) => self.pump(ctx),
                Err(e) => self.end(Err(e), ctx),
            },
            Inbound::Closed(how) => self.end(how, ctx),
        }
    }
}

impl Serve<Wake> for HaConnection {
    type Reply = ();
    /// The flag is cleared by `pump` when it looks (or by the pump after the write under way).
    fn serve(&mut self, _: Wake, ctx: &mut Context<Metered<Self>>) {
        self.pump(ctx);
    }
}
