//! The store through its actors, one test binary (`cargo test -p actormq --test store`): a module
//! per subject, each opening its own `Store` on a temp dir.
//!
//! * [`store`] — what a RocketMQ user relies on: files, offsets, limits, delayed delivery, index,
//!   filters, recovery, write buffers, flushing, retention, the on-disk layout;
//! * [`flush_stall`] — SYNC_FLUSH answers FLUSH_DISK_TIMEOUT in time while a flush hangs;
//! * [`open_failure`] — an open failing part-way stops the actors it started;
//! * [`retention_after_cq_error`] — retention after a ConsumeQueue write-back error;
//! * [`interrupted_rebuild`] — a start stopped after it removed index files.
//!
//! One process, tests on parallel threads. What the process shares: the `fail` crate's fail
//! points (one registry per process: an armed point fires in every store of the process) and the
//! process's thread list (`/proc/self/task`, which `open_failure` counts). So a test that arms a
//! fail point or counts threads holds [`exclusive`], and every other test holds [`shared`]: the
//! others run in parallel as before, an exclusive one runs alone. A test's guard is dropped at
//! its end, when it fails too (a tokio lock has no poisoning).

#[path = "../common/mod.rs"]
mod common;
mod flush_stall;
mod interrupted_rebuild;
mod open_failure;
mod retention_after_cq_error;
mod store;

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Held shared by every test of this binary, exclusively by one that touches process-wide state.
static PROCESS: RwLock<()> = RwLock::const_new(());

/// For a test that neither arms a fail point nor counts the process's threads.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    PROCESS.read().await
}

/// For a test that arms a fail point or counts the process's threads: no other test runs
/// meanwhile.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    PROCESS.write().await
}
