//! Every message of the HA subsystem, in one place.
//!
//! To [`super::master::HaMaster`]: [`WaitReplicated`] (a SYNC_MASTER send, from the store's put
//! path), [`DataReady`] (the writer's or committer's coalesced wake: new readable CommitLog
//! bytes), [`Attach`]/[`Detach`] and [`Ack`] (from the per-slave connections), [`Close`] (the
//! broker is stopping).
//! To [`super::connection::HaConnection`]: [`Wake`] (fanned out by the master on `DataReady`).
//! Stream items (not mailbox messages): [`Inbound`], what a socket's read half yields to the
//! connection (slave reports) and to [`super::slave::HaSlave`] (master transfers).

use actix::prelude::*;
use actormq_core::store::status::PutStatus;

use crate::wake::Waker;

/// SYNC_MASTER (RocketMQ 4.x `handleHA`): answered once some slave's ack reaches `end`
/// (PUT_OK), at `deadline` (FLUSH_SLAVE_TIMEOUT), or at once with SLAVE_NOT_AVAILABLE when no
/// slave is connected, the acked offset is `max_gap` or more behind, or the master is closed.
pub struct WaitReplicated {
    pub end: u64,
    pub deadline: tokio::time::Instant,
    pub max_gap: u64,
}
impl Message for WaitReplicated {
    type Result = PutStatus;
}

/// New CommitLog bytes are readable (sent through the store's [`Waker`]).
pub struct DataReady;
impl Message for DataReady {
    type Result = ();
}

/// A slave's first report arrived: it counts as connected, and `wake` wakes its connection
/// when new bytes are readable.
pub struct Attach {
    pub id: u64,
    pub wake: Waker,
}
impl Message for Attach {
    type Result = ();
}

/// The connection `id` ended.
pub struct Detach {
    pub id: u64,
}
impl Message for Detach {
    type Result = ();
}

/// A slave reported it holds the CommitLog up to `offset` (RocketMQ's `push2SlaveMaxOffset`).
pub struct Ack {
    pub offset: u64,
}
impl Message for Ack {
    type Result = ();
}

/// The broker is stopping: the waiting sends are answered FLUSH_SLAVE_TIMEOUT now, later ones
/// SLAVE_NOT_AVAILABLE.
pub struct Close;
impl Message for Close {
    type Result = ();
}

/// New CommitLog bytes may be readable: look again (coalesced through the connection's flag).
pub struct Wake;
impl Message for Wake {
    type Result = ();
}

/// What a socket's read half yields: parsed items, then once how the stream ended (`Ok`: the
/// peer closed it; `Err`: why it was given up).
pub enum Inbound<T> {
    Item(T),
    Closed(Result<(), String>),
}
