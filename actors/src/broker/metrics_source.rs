//! What a `/metrics` scrape reads from the broker's actors: [`ActorSource`] implements
//! [`crate::metrics::BrokerSource`] with the metadata actor (committed offsets), the client
//! registry (connections) and the metadata snapshot (topic and group counts), so the metrics
//! module asks the broker without naming its types (broker → metrics, no circle).
//!
//! In: a scrape's calls. Out: [`GetOffsets`] to [`Metadata`], [`GetConnections`] to
//! [`ClientRegistry`]. *Invariant:* a dead actor answers `None` (the scrape leaves those series
//! out); the scrape bounds the wait.

use actormq_core::meta::ConsumerOffsets;
use futures_util::future::LocalBoxFuture;

use super::clients::ClientRegistry;
use super::messages::{GetConnections, GetOffsets};
use super::metadata::{MetaView, Metadata};
use crate::metered::ActorRef;
use crate::metrics::{BrokerSource, Connections};

/// The broker's actors and views a scrape reads.
pub struct ActorSource {
    pub meta: ActorRef<Metadata>,
    pub meta_view: MetaView,
    pub clients: ActorRef<ClientRegistry>,
}

impl BrokerSource for ActorSource {
    fn topic_count(&self) -> usize {
        self.meta_view.topics().topic_config_table.len()
    }

    fn group_count(&self) -> usize {
        self.meta_view.groups().subscription_group_table.len()
    }

    fn offsets(&self) -> LocalBoxFuture<'static, Option<ConsumerOffsets>> {
        let asked = self.meta.send(GetOffsets);
        Box::pin(async move { asked.await.ok() })
    }

    /// The registry's list counted by kind: a client registered as a consumer is a consumer,
    /// every other one a producer.
    fn connections(&self) -> LocalBoxFuture<'static, Option<Connections>> {
        let asked = self.clients.send(GetConnections);
        Box::pin(async move {
            let clients = asked.await.ok()?;
            let consumers = clients.iter().filter(|c| c.is_consumer).count();
            Some(Connections {
                producers: clients.len() - consumers,
                consumers,
            })
        })
    }
}
