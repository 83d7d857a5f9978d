//! `HaSlave` — a slave's replication from its master (RocketMQ's `HAClient`).
//!
//! It dials the master's HA address (`haMasterAddress`, else what the name server says), reports
//! its CommitLog end at once, then after every transfer that moved it and every
//! `haSendHeartbeatInterval`, and hands each transfer to its own writer
//! ([`crate::store::messages::AppendReplicated`]), which writes it at the same offset; reput
//! builds the ConsumeQueues and index from it as on the master.
//!
//! In: the read half as a stream of transfers ([`Inbound`]); its own timers (the heartbeat,
//! the redial). Out: appends to the store's writer, one at a time and in order (the actor waits
//! for each, `ctx.wait`, so the next transfer waits in the socket); reports to the master, one
//! write at a time beside the mailbox (`ctx.spawn`), the newest end after the write under way.
//!
//! A broken stream, a transfer that does not start where the slave ends, or silence for
//! `haHousekeepingInterval` closes the connection; the slave dials again at once if the
//! connection had lasted 5 s, else when 5 s have passed since it dialled.
//!
//! Invariant: the slave's CommitLog is a byte-identical prefix of its master's: each transfer
//! is written at its own offset, and only where the slave ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::protocol::ha::{self, Transfer, TransferReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use super::io::{inbound, write_within};
use super::messages::Inbound;
use super::HaParams;
use crate::metered::{start_local_with, Metered, ServeStream, Service};
use crate::store::Store;

/// How long a slave waits before connecting again (RocketMQ's HAClient: 5 s).
const RECONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long a dial may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a slave that does not know its master yet asks again.
const UNKNOWN_MASTER_POLL: Duration = Duration::from_secs(1);
/// Largest transfer a slave accepts: RocketMQ's slave read buffer is 4 MiB.
const MAX_TRANSFER: usize = 4 << 20;

/// Where a slave replicates from: `haMasterAddress`, else the HA address the name server last
/// gave for the master (`None` while unknown).
pub type MasterAddr = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Slave: starts the [`HaSlave`] on the current thread; it replicates from the master for as
/// long as the thread runs, connecting again after every failure.
pub async fn run_slave(store: Arc<Store>, master: MasterAddr, p: HaParams) {
    let _slave = start_local_with(move |_| HaSlave {
        store,
        master,
        p,
        said_unknown: false,
        link: None,
    });
    // Holds the address until the thread stops.
    std::future::pending::<()>().await;
}

pub struct HaSlave {
    store: Arc<Store>,
    master: MasterAddr,
    p: HaParams,
    said_unknown: bool,
    /// The connection now, if any.
    link: Option<Link>,
}

struct Link {
    addr: String,
    /// When it was dialled: the next dial is [`RECONNECT_WAIT`] after.
    dialled: Instant,
    /// Where this slave's CommitLog ends.
    end: u64,
    /// The write half; `None` while a report holds it.
    socket: Option<OwnedWriteHalf>,
    /// The end moved while a report was under way: report again after it.
    report_due: bool,
    reader: SpawnHandle,
    heartbeat: SpawnHandle,
    writing: Option<SpawnHandle>,
}

type Ctx = Context<Metered<HaSlave>>;

impl HaSlave {
    fn dial(&mut self, ctx: &mut Ctx) {
        let Some(addr) = (self.master)() else {
            if !self.said_unknown {
                tracing::warn!(
                    "no master to replicate from yet: set haMasterAddress, or the name server \
                     will name the master once it registers"
                );
                self.said_unknown = true;
            }
            ctx.run_later(UNKNOWN_MASTER_POLL, |act, ctx| act.inner.dial(ctx));
            return;
        };
        self.said_unknown = false;
        let dialled = Instant::now();
        let (store, to) = (self.store.clone(), addr.clone());
        let connect = async move {
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&to))
                .await
                .map_err(|_| "connecting timed out after 3 s".to_string())?
                .map_err(|e| format!("cannot connect: {e}"))?;
            let _ = stream.set_nodelay(true);
            let end = store.replica_end().await?;
            Ok::<_, String>((stream, end))
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Metered<Self>>(connect).map(move |r, act, ctx| match r {
                Ok((stream, end)) => act.inner.connected(addr, dialled, stream, end, ctx),
                Err(e) => act.inner.redial(&addr, dialled, Err(e), ctx),
            }),
        );
    }

    fn connected(
        &mut self,
        addr: String,
        dialled: Instant,
        stream: TcpStream,
        end: u64,
        ctx: &mut Ctx,
    ) {
        tracing::info!(master = %addr, from = end, "replicating from the master");
        let (rd, wr) = stream.into_split();
        let transfers = TransferReader::new(MAX_TRANSFER);
        let reader = ctx.add_stream(inbound(rd, transfers, self.p.housekeeping, "master"));
        let heartbeat = ctx.run_interval(self.p.heartbeat, |act, ctx| act.inner.report(ctx));
        self.link = Some(Link {
            addr,
            dialled,
            end,
            socket: Some(wr),
            report_due: false,
            reader,
            heartbeat,
            writing: None,
        });
        // At once (Java 4.9 waits a heartbeat interval, but the master sends nothing before
        // the first report).
        self.report(ctx);
    }

    /// A transfer: a heartbeat is checked, data is appended where this slave ends.
    fn transfer(&mut self, t: Transfer, ctx: &mut Ctx) {
        let Some(link) = &self.link else {
            return;
        };
        if t.body.is_empty() {
            // A heartbeat names where the master would continue: where this slave ends.
            if t.start != link.end && link.end != 0 {
                let e = format!(
                    "the master's heartbeat says offset {}, but this slave ends at {}",
                    t.start, link.end
                );
                self.ended(Err(e), ctx);
            }
            return;
        }
        let store = self.store.clone();
        let append = async move { store.append_replicated(t.start, t.body).await };
        ctx.wait(
            actix::fut::wrap_future::<_, Metered<Self>>(append).map(|r, act, ctx| match r {
                Ok(ok) => act.inner.appended(ok.end.0, ctx),
                Err(e) => act.inner.ended(Err(e), ctx),
            }),
        );
    }

    fn appended(&mut self, end: u64, ctx: &mut Ctx) {
        if let Some(link) = &mut self.link {
            if end > link.end {
                link.end = end;
                self.report(ctx);
            }
        }
    }

    /// Tells the master where this slave ends, unless a report is under way (then after it).
    fn report(&mut self, ctx: &mut Ctx) {
        let Some(link) = &mut self.link else {
            return;
        };
        let Some(mut wr) = link.socket.take() else {
            link.report_due = true;
            return;
        };
        let (bytes, limit) = (ha::report(link.end), self.p.housekeeping);
        let write = async move {
            let r = write_within(&mut wr, &bytes, limit, "master").await;
            (wr, r)
        };
        let h = ctx.spawn(
            actix::fut::wrap_future::<_, Metered<Self>>(write)
                .map(|(wr, r), act, ctx| act.inner.reported(wr, r, ctx)),
        );
        link.writing = Some(h);
    }

    fn reported(&mut self, wr: OwnedWriteHalf, r: Result<(), String>, ctx: &mut Ctx) {
        if let Err(e) = r {
            return self.ended(Err(e), ctx);
        }
        let Some(link) = &mut self.link else {
            return;
        };
        link.writing = None;
        link.socket = Some(wr);
        if std::mem::take(&mut link.report_due) {
            self.report(ctx);
        }
    }

    /// The connection ended: its reader, heartbeat and write go with it, and a dial follows.
    fn ended(&mut self, how: Result<(), String>, ctx: &mut Ctx) {
        let Some(link) = self.link.take() else {
            return;
        };
        ctx.cancel_future(link.reader);
        ctx.cancel_future(link.heartbeat);
        if let Some(w) = link.writing {
            ctx.cancel_future(w);
        }
        self.redial(&link.addr, link.dialled, how, ctx);
    }

    /// At most one attempt every RECONNECT_WAIT: a connection that worked longer than that and
    /// then dropped is dialled again at once, so a blip on the link costs SYNC_MASTER's
    /// producers no more than the blip; one that failed sooner (refused, diverged, a master
    /// still starting) waits out the rest. (RocketMQ's HAClient redials at once after any
    /// close and waits 5 s only after a failed connect; a master that accepts and then refuses
    /// would make that a tight loop.)
    fn redial(&mut self, addr: &str, dialled: Instant, how: Result<(), String>, ctx: &mut Ctx) {
        let wait = RECONNECT_WAIT.saturating_sub(dialled.elapsed());
        match how {
            Ok(()) => tracing::info!(master = %addr, "the master closed the HA connection"),
            Err(e) => {
                tracing::warn!(master = %addr, reason = %e, again_in_ms = wait.as_millis() as u64, "replication stopped")
            }
        }
        ctx.run_later(wait, |act, ctx| act.inner.dial(ctx));
    }
}

impl Service for HaSlave {
    const NAME: &'static str = "ha_slave";

    fn started(&mut self, ctx: &mut Ctx) {
        self.dial(ctx);
    }
}

impl ServeStream<Inbound<Transfer>> for HaSlave {
    fn serve_item(&mut self, item: Inbound<Transfer>, ctx: &mut Ctx) {
        match item {
            Inbound::Item(t) => self.transfer(t, ctx),
            Inbound::Closed(how) => self.ended(how, ctx),
        }
    }

    /// After its [`Inbound::Closed`]: the actor lives on to dial again.
    fn stream_finished(&mut self, _: &mut Ctx) {}
}
