//! `BrokerCore` — the request path's state on one connection thread, which every request
//! handler (`send`, `pull`, `query`, `consumer`, `reply`, `admin`, `admin_store`, `client_call`,
//! `runtime_info`) is an `impl BrokerCore` block over — and the helpers they answer with
//! ([`reply`], [`ok`], [`later`], [`header_or_reply!`]).
//!
//! What every thread shares (store, actor refs, lock-free views, settings, [`Stats`]) is `Send +
//! Sync` and cloned into each thread's core by `processor::BrokerProcessorFactory`; the
//! [`SendBatcher`], the [`ThreadRates`] and the metric caches are the thread's own. The handlers
//! answer from the views where they can, and otherwise with a future that talks to the owning
//! actor (CommitLog writer, Metadata, ClientRegistry, PullHold). This module depends on no
//! handler: the handlers depend on it, and `processor` on them.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use actormq_core::protocol::codes::response_code as rc;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::store::reader::StoreReader;
use arc_swap::ArcSwap;

use super::clients::{ClientRegistry, SubscriptionView};
use super::live_config::LiveConfig;
use super::metadata::{MetaView, Metadata};
use super::pull_hold::PullHold;
use super::rates::{SharedRates, ThreadRates};
use super::send_batch::SendBatcher;
use super::settings::ProcessorSettings;
use super::store_stats::Stats;
use crate::metered::ActorRef;
use crate::remoting::server::Handled;
use crate::store::Store;

/// The request path's state on one connection thread.
pub struct BrokerCore {
    /// This thread's batcher: SENDs of one turn of this thread become one `AppendBatch`.
    pub batcher: Rc<SendBatcher>,
    pub store: Arc<Store>,
    pub reader: StoreReader,
    pub meta: ActorRef<Metadata>,
    pub meta_view: MetaView,
    pub clients: ActorRef<ClientRegistry>,
    pub subs: SubscriptionView,
    pub pull_hold: ActorRef<PullHold>,
    /// Swapped as a whole by `updateBrokerConfig` ([`LiveConfig`]).
    pub settings: Arc<ArcSwap<ProcessorSettings>>,
    pub live: Arc<LiveConfig>,
    /// This thread's put/get TPS windows and put latencies (recorded with no lock or atomic)…
    pub rates: ThreadRates,
    /// …and every thread's, asked for and merged when a runtime key or admin body reports them.
    pub all_rates: Arc<SharedRates>,
    /// `brokerIP1:listenPort`: written into every record and msgId.
    pub store_host: SocketAddr,
    pub boot_ms: i64,
    /// Shared by every connection thread.
    pub stats: Arc<Stats>,
    /// `/metrics` counters of the request path (messages and bytes in and out, RPC latency),
    /// through this thread's cache of labelled children.
    pub metrics: Rc<crate::metrics::RequestMeters>,
}

/// A response to `req` with `code` and `remark` (none when empty).
pub(super) fn reply(
    req: &RemotingCommand,
    code: i32,
    remark: impl Into<String>,
) -> RemotingCommand {
    let remark = remark.into();
    RemotingCommand::response_to(
        req,
        code,
        if remark.is_empty() {
            None
        } else {
            Some(remark)
        },
    )
}

/// SUCCESS, without a remark.
pub(super) fn ok(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(req, rc::SUCCESS, None)
}

/// An answer that comes when `f` is done (the connection keeps the request's place in line).
pub(super) fn later(f: impl std::future::Future<Output = RemotingCommand> + 'static) -> Handled {
    Handled::Later(Box::pin(async move { Some(f.await) }))
}

/// Decodes a typed header or returns SYSTEM_ERROR naming the field.
macro_rules! header_or_reply {
    ($ty:ty, $req:expr) => {
        match <$ty>::from_command(&$req) {
            Ok(h) => h,
            Err(e) => {
                return Handled::Reply(reply(
                    &$req,
                    rc::SYSTEM_ERROR,
                    format!("invalid request header: {e}"),
                ))
            }
        }
    };
}
pub(super) use header_or_reply;
