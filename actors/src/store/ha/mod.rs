//! Master/slave replication (RocketMQ's classic HA: `HAService`, `HAConnection`, `HAClient`),
//! as actors. The wire format is in the core (`actormq_core::protocol::ha`).
//!
//! * [`master::HaMaster`] (one per master store): the acked offset, the registry of slave
//!   connections, the SYNC_MASTER sends waiting for an ack ([`HaState::wait_replicated`] sends it
//!   a [`messages::WaitReplicated`]).
//! * [`connection::HaConnection`] (one per slave, on the "ha" thread; [`serve_master`] accepts
//!   them on `haListenPort`): reads the slave's reports (acks to the master), streams CommitLog
//!   bytes from the store's read-only view, woken by the master when the writer appended.
//! * [`slave::HaSlave`] (on a slave, on the "ha" thread; [`run_slave`]): dials the master,
//!   appends what it sends through its own writer, reports, dials again.
//!
//! [`messages`] holds every message of the subsystem; [`io`] the bounded socket reads and writes.
//!
//! Invariants: a slave's CommitLog is a byte-identical prefix of its master's (each transfer is
//! written at its own offset, and only where the slave ends); a SYNC_MASTER `SEND_OK` is only
//! given once some slave has acknowledged the message's last byte.
//!
//! One shared state remains: the acked offset and the slave count that [`HaState`] publishes
//! for `/metrics` (written only by `HaMaster`; see `master.rs`), beside the coalescing flags of
//! the store's `Waker`s.

use std::time::Duration;

use actormq_core::config::StoreConfig;

pub mod connection;
mod io;
pub mod master;
pub mod messages;
pub mod slave;

pub use connection::serve_master;
pub use master::HaState;
pub use slave::{run_slave, MasterAddr};

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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use actormq_core::store::status::PutStatus;

    use super::messages::{Ack, Attach};
    use super::*;
    use crate::wake::Waker;

    /// A slave attached to `state`'s master, without a socket.
    async fn attach(state: &HaState) {
        let wake = Waker::from_fn(Arc::new(AtomicBool::new(false)), || true);
        state.master.send(Attach { id: 7, wake }).await.unwrap();
    }

    async fn ack(state: &HaState, offset: u64) {
        state.master.send(Ack { offset }).await.unwrap();
    }

    /// A SYNC_MASTER wait for an ack reaching `end`, on its own task.
    fn spawn_wait(
        state: &Arc<HaState>,
        end: u64,
        timeout: Duration,
    ) -> tokio::task::JoinHandle<PutStatus> {
        let state = state.clone();
        actix_rt::spawn(async move { state.wait_replicated(end, timeout, 1 << 30).await })
    }

    /// Runs `test` in an actix system on paused time from its start (timers fire at exact
    /// instants, and time moves only when every task waits for one).
    fn on_paused_time<F: std::future::Future<Output = ()>>(test: impl FnOnce() -> F) {
        actix_rt::System::with_tokio_rt(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .expect("a runtime")
        })
        .block_on(test());
    }

    /// Lets the actor and the waiting tasks run (paused time does not move meanwhile).
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// A stop answers the SYNC_MASTER waits at once; time is paused, so only `close` can end the
    /// wait before its 60 s.
    #[test]
    fn closing_ends_the_waits_for_a_slave_and_refuses_new_ones() {
        on_paused_time(|| async {
            let state = HaState::new();
            attach(&state).await;
            ack(&state, 100).await;
            let waiting = spawn_wait(&state, 200, Duration::from_secs(60));
            settle().await;
            assert!(!waiting.is_finished(), "waits for an ack reaching 200");
            state.close();
            let start = tokio::time::Instant::now();
            assert_eq!(waiting.await.unwrap(), PutStatus::FlushSlaveTimeout);
            assert_eq!(
                start.elapsed(),
                Duration::ZERO,
                "at once, not at the 60 s timeout"
            );
            assert_eq!(
                state
                    .wait_replicated(100, Duration::from_secs(60), 1 << 30)
                    .await,
                PutStatus::SlaveNotAvailable,
                "after the close no send waits"
            );
        });
    }

    /// Without a close, a wait runs to its timeout, and an ack ends it.
    #[test]
    fn a_wait_ends_with_the_ack_or_the_timeout() {
        on_paused_time(|| async {
            let state = HaState::new();
            attach(&state).await;
            let acked = spawn_wait(&state, 50, Duration::from_secs(3));
            // Paused time moves only once every task is parked: the wait is registered when the
            // ack comes, 1 s in, and the ack ends it then.
            let start = tokio::time::Instant::now();
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(!acked.is_finished(), "still waiting before the ack");
            ack(&state, 50).await;
            assert_eq!(acked.await.unwrap(), PutStatus::PutOk);
            assert_eq!(start.elapsed(), Duration::from_secs(1));
            assert_eq!((state.acked(), state.connections()), (50, 1), "published");
            let start = tokio::time::Instant::now();
            assert_eq!(
                state
                    .wait_replicated(80, Duration::from_secs(3), 1 << 30)
                    .await,
                PutStatus::FlushSlaveTimeout
            );
            assert_eq!(start.elapsed(), Duration::from_secs(3), "the whole timeout");
        });
    }

    /// No slave: SLAVE_NOT_AVAILABLE at once; nor when the slave is `max_gap` or more behind.
    #[test]
    fn without_a_slave_or_too_far_behind_a_send_does_not_wait() {
        on_paused_time(|| async {
            let state = HaState::new();
            let none = state.wait_replicated(10, Duration::from_secs(3), 1 << 30);
            assert_eq!(none.await, PutStatus::SlaveNotAvailable);
            attach(&state).await;
            ack(&state, 100).await;
            let start = tokio::time::Instant::now();
            let behind = state.wait_replicated(1100, Duration::from_secs(3), 1000);
            assert_eq!(behind.await, PutStatus::SlaveNotAvailable);
            let covered = state.wait_replicated(90, Duration::from_secs(3), 1000);
            assert_eq!(covered.await, PutStatus::PutOk);
            assert_eq!(start.elapsed(), Duration::ZERO);
        });
    }

    /// Waits with different ends and deadlines: each ack answers exactly the ones it covers,
    /// and the one timer answers the rest at their own deadlines.
    #[test]
    fn acks_answer_the_covered_waits_and_deadlines_the_others_in_order() {
        on_paused_time(|| async {
            let state = HaState::new();
            attach(&state).await;
            let a = spawn_wait(&state, 30, Duration::from_secs(5));
            let b = spawn_wait(&state, 10, Duration::from_secs(9));
            let c = spawn_wait(&state, 20, Duration::from_secs(2));
            settle().await;
            ack(&state, 20).await;
            settle().await;
            assert!(b.is_finished() && c.is_finished() && !a.is_finished());
            assert_eq!(b.await.unwrap(), PutStatus::PutOk);
            assert_eq!(c.await.unwrap(), PutStatus::PutOk);
            let start = tokio::time::Instant::now();
            let d = spawn_wait(&state, 40, Duration::from_secs(1));
            assert_eq!(d.await.unwrap(), PutStatus::FlushSlaveTimeout);
            assert_eq!(
                start.elapsed(),
                Duration::from_secs(1),
                "the earlier deadline first"
            );
            assert_eq!(a.await.unwrap(), PutStatus::FlushSlaveTimeout);
            assert_eq!(start.elapsed(), Duration::from_secs(5));
        });
    }
}
