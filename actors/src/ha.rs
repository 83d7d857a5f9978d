//! Master/slave replication (RocketMQ's classic HA: `HAService`, `HAConnection`, `HAClient`;
//! spec §8). The wire format is in the core (`actormq_core::protocol::ha`).
//!
//! * Master: [`serve_master`] accepts slaves on `haListenPort`; one task per slave, in two
//!   halves side by side, reads its offset reports and streams CommitLog bytes from where it
//!   asks (an empty slave: from the master's last file), in transfers of at most
//!   `haTransferBatchSize` that never cross a file, a heartbeat (empty transfer) after
//!   `haSendHeartbeatInterval` without data. It reads through
//!   the store's read-only view, only bytes readers may see (committed), and never goes through a
//!   writer's mailbox. Acks raise [`HaState`]'s acked offset (`push2SlaveMaxOffset`), which
//!   SYNC_MASTER sends wait on ([`HaState::wait_replicated`]).
//! * Slave: [`run_slave`] connects to the master's HA address (`haMasterAddress`, else what the
//!   name server says), reports its CommitLog end at once and then after every transfer that
//!   moved it (and every `haSendHeartbeatInterval`), and hands each transfer to its own writer
//!   (`AppendReplicated`), which writes it at the same offset; reput builds the ConsumeQueues
//!   and index from it as on the master. A broken stream, a transfer that does not start where the
//!   slave ends, or silence for `haHousekeepingInterval` closes the connection; the slave
//!   connects again at once if the connection had lasted 5 s, else when 5 s have passed since
//!   it dialled.
//!
//! Invariants: a slave's CommitLog is a byte-identical prefix of its master's (each transfer is
//! written at its own offset, and only where the slave ends); a SYNC_MASTER `SEND_OK` is only
//! given once some slave has acknowledged the message's last byte.
//!
//! These are tasks on one thread of their own ("ha"), not actors: each owns one socket and
//! waits on it; there is nothing for a mailbox to carry.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq_core::config::StoreConfig;
use actormq_core::protocol::ha::{self, ReportReader, TransferReader};
use actormq_core::store::mapped_file_queue::FileQueueView;
use actormq_core::store::status::PutStatus;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::store::wake::Waker;
use crate::store::Store;

/// How long a slave waits before connecting again (RocketMQ's HAClient: 5 s).
const RECONNECT_WAIT: Duration = Duration::from_secs(5);
/// A master with nothing to send looks again at least this often (RocketMQ: 100 ms).
const IDLE_POLL: Duration = Duration::from_millis(100);
/// Largest transfer a slave accepts: RocketMQ's slave read buffer is 4 MiB.
const MAX_TRANSFER: usize = 4 << 20;

/// Replication settings (`haTransferBatchSize`, `haSendHeartbeatInterval`,
/// `haHousekeepingInterval`).
#[derive(Clone, Debug)]
pub struct HaParams {
    pub file_size: u64,
    pub batch: u64,
    pub heartbeat: Duration,
    pub housekeeping: Duration,
}

impl HaParams {
    pub fn from_config(c: &StoreConfig) -> HaParams {
        HaParams {
            file_size: c.mapped_file_size_commit_log,
            batch: u64::from(c.ha_transfer_batch_size.max(1)),
            heartbeat: Duration::from_millis(c.ha_send_heartbeat_interval_ms),
            housekeeping: Duration::from_millis(c.ha_housekeeping_interval_ms),
        }
    }
}

/// What the master knows of its slaves, shared by the connections, the store's SYNC_MASTER
/// waits and the writer's wake. Atomics (watermarks and counts) and two `Notify`s.
#[derive(Default)]
pub struct HaState {
    /// Highest CommitLog offset a slave has acknowledged (RocketMQ's `push2SlaveMaxOffset`).
    acked: AtomicU64,
    /// Slaves connected now (that have sent their first report).
    connections: AtomicUsize,
    /// Woken when `acked` grows.
    ack_changed: Notify,
    /// Set by the writer's wake, cleared by a connection before it looks for new bytes (the
    /// `Waker` protocol): a burst of appends wakes the connections once.
    data_flag: Arc<AtomicBool>,
    data: Notify,
    /// The broker is stopping ([`HaState::close`]): no slave will acknowledge anything more.
    closed: AtomicBool,
}

impl HaState {
    pub fn new() -> Arc<HaState> {
        Arc::new(HaState::default())
    }

    /// The wake the writer (or committer) sends when new CommitLog bytes are readable.
    pub fn data_waker(self: &Arc<Self>) -> Waker {
        let me = self.clone();
        Waker::from_fn(self.data_flag.clone(), move || {
            me.data.notify_waiters();
            true
        })
    }

    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Acquire)
    }

    /// The broker is stopping and its HA tasks with it: SYNC_MASTER waits end now
    /// (FLUSH_SLAVE_TIMEOUT: the message is stored, its replication unconfirmed) instead of at
    /// `slaveTimeout`, and later ones get SLAVE_NOT_AVAILABLE at once. A slave that only drops its connection does
    /// not end a wait: it may connect again and acknowledge within the timeout, as in RocketMQ.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ack_changed.notify_waiters();
    }

    fn ack(&self, offset: u64) {
        if self.acked.fetch_max(offset, Ordering::AcqRel) < offset {
            self.ack_changed.notify_waiters();
        }
    }

    /// SYNC_MASTER (RocketMQ 4.x `handleHA`): whether a slave has the bytes up to `end`.
    /// SLAVE_NOT_AVAILABLE at once when no slave is connected or the acked offset is `max_gap`
    /// or more behind; else waits up to `timeout` for an ack reaching `end`, then
    /// FLUSH_SLAVE_TIMEOUT. The message is stored either way.
    pub async fn wait_replicated(&self, end: u64, timeout: Duration, max_gap: u64) -> PutStatus {
        if self.closed.load(Ordering::Acquire)
            || self.connections() == 0
            || end.saturating_sub(self.acked()) >= max_gap
        {
            return PutStatus::SlaveNotAvailable;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.ack_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.acked() >= end {
                return PutStatus::PutOk;
            }
            if self.closed.load(Ordering::Acquire) {
                return PutStatus::FlushSlaveTimeout;
            }
            tokio::select! {
                _ = &mut changed => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return if self.acked() >= end {
                        PutStatus::PutOk
                    } else {
                        PutStatus::FlushSlaveTimeout
                    };
                }
            }
        }
    }
}

/// Master: accepts slaves on `listener` and serves each until it goes away. Runs until its
/// thread stops.
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
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a slave failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (view, state, p) = (view.clone(), state.clone(), p.clone());
        actix_rt::spawn(async move {
            tracing::info!(slave = %peer, "a slave connected to the HA port");
            match serve_slave(stream, &view, &state, &p).await {
                Ok(()) => tracing::info!(slave = %peer, "the slave closed its HA connection"),
                Err(e) => tracing::warn!(slave = %peer, reason = %e, "HA connection closed"),
            }
        });
    }
}

/// Counts a slave as connected while it lives (also when its task is dropped at a stop).
struct Connected<'a>(&'a HaState);

impl<'a> Connected<'a> {
    fn new(state: &'a HaState) -> Connected<'a> {
        state.connections.fetch_add(1, Ordering::AcqRel);
        Connected(state)
    }
}

impl Drop for Connected<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A socket write that must end within `limit` (a slave that stopped reading, a dead peer).
async fn write_within(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    bytes: &[u8],
    limit: Duration,
    to: &str,
) -> Result<(), String> {
    match tokio::time::timeout(limit, wr.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("writing to the {to}: {e}")),
        Err(_) => Err(format!(
            "the {to} took no bytes for {} ms (haHousekeepingInterval)",
            limit.as_millis()
        )),
    }
}

/// A socket read that must bring bytes within `limit` (`haHousekeepingInterval`): false when
/// the peer closed the connection.
async fn read_within(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    buf: &mut bytes::BytesMut,
    limit: Duration,
    from: &str,
) -> Result<bool, String> {
    match tokio::time::timeout(limit, rd.read_buf(buf)).await {
        Ok(Ok(0)) => Ok(false),
        Ok(Ok(_)) => Ok(true),
        Ok(Err(e)) => Err(format!("reading from the {from}: {e}")),
        Err(_) => Err(format!(
            "nothing from the {from} for {} ms (haHousekeepingInterval)",
            limit.as_millis()
        )),
    }
}

/// One slave: reports in, CommitLog bytes out — two halves running side by side, as RocketMQ's
/// ReadSocketService and WriteSocketService, so a long catch-up never stops the acks (nor the
/// housekeeping), and a slave that stops reading does not stop them either. The connection ends
/// when either half does.
async fn serve_slave(
    stream: TcpStream,
    view: &FileQueueView,
    state: &HaState,
    p: &HaParams,
) -> Result<(), String> {
    let (rd, wr) = stream.into_split();
    let (start_tx, start_rx) = tokio::sync::oneshot::channel::<u64>();
    let send = async move {
        let Ok(start) = start_rx.await else {
            return Ok(());
        };
        send_to_slave(wr, start, view, state, p).await
    };
    tokio::select! {
        r = read_reports(rd, view, state, p, start_tx) => r,
        r = send => r,
    }
}

/// The reading half: the slave's reports. The first says where to start (handed to the
/// sending half); every one is an ack. Silence for `haHousekeepingInterval` ends the connection.
async fn read_reports(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    view: &FileQueueView,
    state: &HaState,
    p: &HaParams,
    start: tokio::sync::oneshot::Sender<u64>,
) -> Result<(), String> {
    let mut reports = ReportReader::default();
    let mut start = Some(start);
    let mut _connected = None;
    loop {
        if !read_within(&mut rd, reports.buffer(), p.housekeeping, "slave").await? {
            return Ok(());
        }
        let Some(offset) = reports.last()? else {
            continue;
        };
        if let Some(tx) = start.take() {
            let readable = view.max_offset();
            let from = ha::start_offset(offset, readable, p.file_size);
            if from > readable {
                return Err(format!(
                    "the slave's CommitLog ends at {from}, beyond this master's end {readable}: \
                     the two have diverged (a master restarted without data the slave had); \
                     the slave's store must be rebuilt"
                ));
            }
            tracing::info!(from, slave_end = offset, "replicating to a slave");
            _connected = Some(Connected::new(state));
            let _ = tx.send(from);
        } else if offset > view.max_wrote_offset() {
            return Err(format!(
                "the slave acknowledged offset {offset}, beyond this master's CommitLog end {}",
                view.max_wrote_offset()
            ));
        }
        state.ack(offset);
    }
}

/// The sending half: CommitLog bytes from `at` as they become readable, a heartbeat after
/// `haSendHeartbeatInterval` without any.
async fn send_to_slave(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut at: u64,
    view: &FileQueueView,
    state: &HaState,
    p: &HaParams,
) -> Result<(), String> {
    let mut last_write = Instant::now();
    loop {
        loop {
            crate::store::wake::clear(&state.data_flag);
            let len = ha::chunk_len(at, view.max_offset(), p.file_size, p.batch);
            if len == 0 {
                break;
            }
            let bytes = view.read(at, len as usize).ok_or_else(|| {
                format!(
                    "the master no longer has the CommitLog bytes at offset {at} the slave \
                     needs (its oldest file starts at {}): the slave's store must be rebuilt \
                     from a copy of the master's",
                    view.min_offset()
                )
            })?;
            write_within(
                &mut wr,
                &ha::header(at, len as u32),
                p.housekeeping,
                "slave",
            )
            .await?;
            write_within(&mut wr, bytes.as_bytes(), p.housekeeping, "slave").await?;
            at += len;
            last_write = Instant::now();
        }
        if last_write.elapsed() >= p.heartbeat {
            write_within(&mut wr, &ha::header(at, 0), p.housekeeping, "slave").await?;
            last_write = Instant::now();
        }
        let woken = state.data.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        // Registered, then clear the pending-wake flag, then look once more: a wake from here
        // on notifies this registration. Clearing only before the sends let a wake be taken
        // as pending while nobody would act on it: one SYNC_MASTER send per 10 s run of
        // `bench produce --mode sync` waited out IDLE_POLL (max 101 ms in 4 runs of 4; no such
        // wait in 8 runs after; README, "Replication").
        crate::store::wake::clear(&state.data_flag);
        if view.max_offset() > at {
            continue;
        }
        tokio::select! {
            _ = &mut woken => {}
            _ = tokio::time::sleep(IDLE_POLL) => {}
        }
    }
}

/// Where a slave replicates from: `haMasterAddress`, else the HA address the name server last
/// gave for the master (`None` while unknown).
pub type MasterAddr = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Slave: replicates from the master for as long as its thread runs, connecting again after
/// every failure.
pub async fn run_slave(store: Arc<Store>, master: MasterAddr, p: HaParams) {
    let mut said_unknown = false;
    loop {
        let Some(addr) = master() else {
            if !said_unknown {
                tracing::warn!(
                    "no master to replicate from yet: set haMasterAddress, or the name server \
                     will name the master once it registers"
                );
                said_unknown = true;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        said_unknown = false;
        // At most one attempt every RECONNECT_WAIT: a connection that worked longer than that
        // and then dropped is dialled again at once, so a blip on the link costs SYNC_MASTER's
        // producers no more than the blip; one that failed sooner (refused, diverged, a master
        // still starting) waits out the rest. (RocketMQ's HAClient redials at once after any
        // close and waits 5 s only after a failed connect; a master that accepts and then
        // refuses would make that a tight loop.)
        let attempt = Instant::now();
        let outcome = replicate_from(&addr, &store, &p).await;
        let wait = RECONNECT_WAIT.saturating_sub(attempt.elapsed());
        match outcome {
            Ok(()) => tracing::info!(master = %addr, "the master closed the HA connection"),
            Err(e) => {
                tracing::warn!(master = %addr, reason = %e, again_in_ms = wait.as_millis() as u64, "replication stopped")
            }
        }
        tokio::time::sleep(wait).await;
    }
}

async fn replicate_from(addr: &str, store: &Store, p: &HaParams) -> Result<(), String> {
    let stream = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr))
        .await
        .map_err(|_| "connecting timed out after 3 s".to_string())?
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let end = store.replica_end().await?;
    tracing::info!(master = %addr, from = end, "replicating from the master");
    // The reading half moves `end`; the reporting half tells the master, at once on every move
    // (and on connecting: Java 4.9 waits a heartbeat interval, but the master sends nothing
    // before the first report), and every `haSendHeartbeatInterval`. Apart, so a master that
    // stops reading reports never stops the data, and the other way round.
    let (end_tx, end_rx) = tokio::sync::watch::channel(end);
    tokio::select! {
        r = receive_from_master(rd, store, p, end, end_tx) => r,
        r = report_to_master(wr, p, end_rx) => r,
    }
}

/// The reading half of a slave's connection: transfers in, appended where the slave ends.
async fn receive_from_master(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    store: &Store,
    p: &HaParams,
    mut end: u64,
    end_tx: tokio::sync::watch::Sender<u64>,
) -> Result<(), String> {
    let mut transfers = TransferReader::new(MAX_TRANSFER);
    loop {
        if !read_within(&mut rd, transfers.buffer(), p.housekeeping, "master").await? {
            return Ok(());
        }
        while let Some(t) = transfers.next_transfer()? {
            if t.body.is_empty() {
                // A heartbeat names where the master would continue: where this slave ends.
                if t.start != end && end != 0 {
                    return Err(format!(
                        "the master's heartbeat says offset {}, but this slave ends at {end}",
                        t.start
                    ));
                }
                continue;
            }
            let ok = store.append_replicated(t.start, t.body).await?;
            if ok.end.0 > end {
                end = ok.end.0;
                end_tx.send_replace(end);
            }
        }
    }
}

/// The reporting half of a slave's connection.
async fn report_to_master(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    p: &HaParams,
    mut end_rx: tokio::sync::watch::Receiver<u64>,
) -> Result<(), String> {
    loop {
        let end = *end_rx.borrow_and_update();
        write_within(&mut wr, &ha::report(end), p.housekeeping, "master").await?;
        // The next move, or the heartbeat interval.
        if let Ok(Err(_)) = tokio::time::timeout(p.heartbeat, end_rx.changed()).await {
            // The reading half is gone: so is the connection.
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SYNC_MASTER wait for an ack reaching `end`, on its own task.
    fn spawn_wait(
        state: &Arc<HaState>,
        end: u64,
        timeout: Duration,
    ) -> tokio::task::JoinHandle<PutStatus> {
        let state = state.clone();
        tokio::spawn(async move { state.wait_replicated(end, timeout, 1 << 30).await })
    }

    /// A stop answers the SYNC_MASTER waits at once; time is paused, so only `close` can end the
    /// wait before its 60 s.
    #[tokio::test(start_paused = true)]
    async fn closing_ends_the_waits_for_a_slave_and_refuses_new_ones() {
        let state = HaState::new();
        let _slave = Connected::new(&state);
        state.ack(100);
        let waiting = spawn_wait(&state, 200, Duration::from_secs(60));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits for an ack reaching 200");
        state.close();
        let status = tokio::time::timeout(Duration::from_millis(1), waiting)
            .await
            .expect("answered at once, not at the 60 s timeout")
            .unwrap();
        assert_eq!(status, PutStatus::FlushSlaveTimeout);
        assert_eq!(
            state
                .wait_replicated(100, Duration::from_secs(60), 1 << 30)
                .await,
            PutStatus::SlaveNotAvailable,
            "after the close no send waits"
        );
    }

    /// Without a close, a wait runs to its timeout, and an ack ends it.
    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_with_the_ack_or_the_timeout() {
        let state = HaState::new();
        let _slave = Connected::new(&state);
        let acked = spawn_wait(&state, 50, Duration::from_secs(3));
        // Paused time moves only once every task is parked: the wait is asleep when the ack
        // comes, 1 s in, and the ack's wake ends it then.
        let start = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!acked.is_finished(), "still waiting before the ack");
        state.ack(50);
        assert_eq!(acked.await.unwrap(), PutStatus::PutOk);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        let start = tokio::time::Instant::now();
        assert_eq!(
            state
                .wait_replicated(80, Duration::from_secs(3), 1 << 30)
                .await,
            PutStatus::FlushSlaveTimeout
        );
        assert_eq!(start.elapsed(), Duration::from_secs(3), "the whole timeout");
    }
}
