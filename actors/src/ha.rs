//! Master/slave replication (RocketMQ's classic HA: `HAService`, `HAConnection`, `HAClient`;
//! spec §8). The wire format is in the core (`actormq_core::protocol::ha`).
//!
//! * Master: [`serve_master`] accepts slaves on `haListenPort`; one task per slave reads its
//!   offset reports and streams CommitLog bytes from where it asks (an empty slave: from the
//!   master's last file), in transfers of at most `haTransferBatchSize` that never cross a file,
//!   a heartbeat (empty transfer) after `haSendHeartbeatInterval` without data. It reads through
//!   the store's read-only view, only bytes readers may see (committed), and never goes through a
//!   writer's mailbox. Acks raise [`HaState`]'s acked offset (`push2SlaveMaxOffset`), which
//!   SYNC_MASTER sends wait on ([`HaState::wait_replicated`]).
//! * Slave: [`run_slave`] connects to the master's HA address (`haMasterAddress`, else what the
//!   name server says), reports its CommitLog end at once and then after every transfer that
//!   moved it (and every `haSendHeartbeatInterval`), and hands each transfer to its own writer
//!   (`AppendReplicated`), which writes it at the same offset; reput builds the ConsumeQueues
//!   and index from it as on the master. A broken stream, a transfer that does not start where the
//!   slave ends, or silence for `haHousekeepingInterval` closes the connection; the slave
//!   connects again after 5 s.
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
        if self.connections() == 0 || end.saturating_sub(self.acked()) >= max_gap {
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
            let mut counted = false;
            let end = serve_slave(stream, &view, &state, &p, &mut counted).await;
            if counted {
                state.connections.fetch_sub(1, Ordering::AcqRel);
            }
            match end {
                Ok(()) => tracing::info!(slave = %peer, "the slave closed its HA connection"),
                Err(e) => tracing::warn!(slave = %peer, reason = %e, "HA connection closed"),
            }
        });
    }
}

/// One slave: reports in, CommitLog bytes out. `counted` is set once the slave counts as
/// connected (its first report).
async fn serve_slave(
    stream: TcpStream,
    view: &FileQueueView,
    state: &HaState,
    p: &HaParams,
    counted: &mut bool,
) -> Result<(), String> {
    let (mut rd, mut wr) = stream.into_split();
    let mut reports = ReportReader::default();
    // The next byte to send; none until the slave's first report.
    let mut next: Option<u64> = None;
    let (mut last_read, mut last_write) = (Instant::now(), Instant::now());
    loop {
        if let Some(at) = next.as_mut() {
            loop {
                state.data_flag.store(false, Ordering::Release);
                let len = ha::chunk_len(*at, view.max_offset(), p.file_size, p.batch);
                if len == 0 {
                    break;
                }
                let bytes = view.read(*at, len as usize).ok_or_else(|| {
                    format!(
                        "the master no longer has the CommitLog bytes at offset {at} the slave \
                         needs (its oldest file starts at {}): the slave's store must be \
                         rebuilt from a copy of the master's",
                        view.min_offset()
                    )
                })?;
                wr.write_all(&ha::header(*at, len as u32))
                    .await
                    .map_err(|e| format!("writing to the slave: {e}"))?;
                wr.write_all(bytes.as_bytes())
                    .await
                    .map_err(|e| format!("writing to the slave: {e}"))?;
                *at += len;
                last_write = Instant::now();
            }
            if last_write.elapsed() >= p.heartbeat {
                wr.write_all(&ha::header(*at, 0))
                    .await
                    .map_err(|e| format!("writing to the slave: {e}"))?;
                last_write = Instant::now();
            }
        }
        if last_read.elapsed() > p.housekeeping {
            return Err(format!(
                "no offset report from the slave for {} ms (haHousekeepingInterval)",
                p.housekeeping.as_millis()
            ));
        }
        let woken = state.data.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if next.is_some_and(|at| view.max_offset() > at) {
            continue;
        }
        tokio::select! {
            r = rd.read_buf(reports.buffer()) => {
                match r {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(e) => return Err(format!("reading from the slave: {e}")),
                }
                last_read = Instant::now();
                let Some(offset) = reports.last()? else { continue };
                let readable = view.max_offset();
                if next.is_none() {
                    let start = ha::start_offset(offset, readable, p.file_size);
                    if start > readable {
                        return Err(format!(
                            "the slave's CommitLog ends at {start}, beyond this master's end \
                             {readable}: the two have diverged (a master restarted without \
                             data the slave had); the slave's store must be rebuilt"
                        ));
                    }
                    tracing::info!(from = start, slave_end = offset, "replicating to a slave");
                    next = Some(start);
                    *counted = true;
                    state.connections.fetch_add(1, Ordering::AcqRel);
                } else if offset > view.max_wrote_offset() {
                    return Err(format!(
                        "the slave acknowledged offset {offset}, beyond this master's CommitLog \
                         end {}",
                        view.max_wrote_offset()
                    ));
                }
                state.ack(offset);
            }
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
        match replicate_from(&addr, &store, &p).await {
            Ok(()) => tracing::info!(master = %addr, "the master closed the HA connection"),
            Err(e) => {
                tracing::warn!(master = %addr, reason = %e, "replication stopped; connecting again in 5 s")
            }
        }
        tokio::time::sleep(RECONNECT_WAIT).await;
    }
}

async fn replicate_from(addr: &str, store: &Store, p: &HaParams) -> Result<(), String> {
    let stream = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr))
        .await
        .map_err(|_| "connecting timed out after 3 s".to_string())?
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let mut reported = store.replica_end().await?;
    // At once, not after a heartbeat interval as Java 4.9 does: the master sends nothing before.
    wr.write_all(&ha::report(reported))
        .await
        .map_err(|e| format!("writing to the master: {e}"))?;
    tracing::info!(master = %addr, from = reported, "replicating from the master");
    let mut last_report = Instant::now();
    let mut last_read = Instant::now();
    let mut transfers = TransferReader::new(MAX_TRANSFER);
    loop {
        let report_due = tokio::time::Instant::from_std(last_report + p.heartbeat);
        let silent_for = tokio::time::Instant::from_std(last_read + p.housekeeping);
        tokio::select! {
            r = rd.read_buf(transfers.buffer()) => {
                match r {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(e) => return Err(format!("reading from the master: {e}")),
                }
                last_read = Instant::now();
                while let Some(t) = transfers.next_transfer()? {
                    if t.body.is_empty() {
                        continue;
                    }
                    let ok = store.append_replicated(t.start, t.body).await?;
                    if ok.end.0 > reported {
                        reported = ok.end.0;
                        wr.write_all(&ha::report(reported))
                            .await
                            .map_err(|e| format!("writing to the master: {e}"))?;
                        last_report = Instant::now();
                    }
                }
            }
            _ = tokio::time::sleep_until(report_due) => {
                wr.write_all(&ha::report(reported))
                    .await
                    .map_err(|e| format!("writing to the master: {e}"))?;
                last_report = Instant::now();
            }
            _ = tokio::time::sleep_until(silent_for) => {
                return Err(format!(
                    "nothing from the master for {} ms (haHousekeepingInterval)",
                    p.housekeeping.as_millis()
                ));
            }
        }
    }
}
