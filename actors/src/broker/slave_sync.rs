//! A slave's copy of its master's tables (RocketMQ's `SlaveSynchronize.syncAll`, every 10 s):
//! topics (GET_ALL_TOPIC_CONFIG), consumer offsets (GET_ALL_CONSUMER_OFFSET), delayed-delivery
//! progress (GET_ALL_DELAY_OFFSET) and subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
//! asked of the master's remoting address (`haMasterAddress`'s host is not it: the name server
//! says where the master is).
//!
//! In: nothing (a task on the replication thread). Out: [`FromMaster`] to `Metadata`,
//! `Store::set_delay_offsets`. A failed round is logged (once per stretch of failures) and the
//! next round tries again; what a slave already holds stays.
//!
//! Invariant: a slave restarted as master finds the topics, groups and offsets its master had
//! (at most one round old), so consumers resume where they were.

use std::sync::Arc;
use std::time::Duration;

use actormq_core::meta::{self, ConsumerOffsets, GroupTable, TopicTable};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::store::schedule::DelayOffsets;

use super::messages::FromMaster;
use super::metadata::Metadata;
use crate::metered::ActorRef;
use crate::remoting::client::RemotingClient;
use crate::store::Store;

/// RocketMQ's period (`BrokerController`: every 10 s, the first after 3 s).
const PERIOD: Duration = Duration::from_secs(10);
const FIRST: Duration = Duration::from_secs(3);
const TIMEOUT: Duration = Duration::from_secs(3);

/// The master's remoting address, as the name server last said (`None` while unknown).
pub type MasterRemoting = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Runs the rounds until its thread stops. `first` is the delay before the first round.
pub async fn run(
    master: MasterRemoting,
    meta: ActorRef<Metadata>,
    store: Arc<Store>,
    first: Duration,
) {
    tokio::time::sleep(first).await;
    let mut client: Option<(String, RemotingClient)> = None;
    let mut failing = false;
    loop {
        if let Some(addr) = master() {
            match round(&addr, &mut client, &meta, &store).await {
                Ok(()) => {
                    if failing {
                        tracing::info!(master = %addr, "copying the master's tables works again");
                    }
                    failing = false;
                }
                Err(e) => {
                    client = None;
                    if !failing {
                        tracing::warn!(master = %addr, error = %e, "cannot copy the master's tables; retrying every 10 s");
                    }
                    failing = true;
                }
            }
        }
        tokio::time::sleep(PERIOD).await;
    }
}

/// The default first delay (RocketMQ: 3 s).
pub fn first_delay() -> Duration {
    FIRST
}

async fn round(
    addr: &str,
    client: &mut Option<(String, RemotingClient)>,
    meta: &ActorRef<Metadata>,
    store: &Store,
) -> Result<(), String> {
    if client.as_ref().is_none_or(|(a, _)| a != addr) {
        let c = tokio::time::timeout(TIMEOUT, RemotingClient::connect(addr))
            .await
            .map_err(|_| "connecting timed out".to_string())?
            .map_err(|e| e.to_string())?;
        *client = Some((addr.to_string(), c));
    }
    let (_, c) = client.as_ref().expect("connected above");
    let body = |code: i32| async move {
        let r = c
            .invoke(RemotingCommand::new_request(code), TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        if r.code != rc::SUCCESS {
            return Err(format!(
                "request {code} answered {}: {}",
                r.code,
                r.remark.unwrap_or_default()
            ));
        }
        Ok::<_, String>(String::from_utf8_lossy(&r.body).into_owned())
    };
    let tell = |m: FromMaster| async move {
        meta.send(m)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    };
    let topics: TopicTable = meta::from_java_json(&body(rq::GET_ALL_TOPIC_CONFIG).await?)
        .map_err(|e| format!("the master's topic table: {e}"))?;
    tell(FromMaster::Topics(topics)).await?;
    let offsets: ConsumerOffsets = meta::from_java_json(&body(rq::GET_ALL_CONSUMER_OFFSET).await?)
        .map_err(|e| format!("the master's consumer offsets: {e}"))?;
    tell(FromMaster::Offsets(offsets)).await?;
    let delay = body(rq::GET_ALL_DELAY_OFFSET).await?;
    if !delay.trim().is_empty() {
        let d = DelayOffsets::from_json(&delay)
            .map_err(|e| format!("the master's delay offsets: {e}"))?;
        store
            .set_delay_offsets(d)
            .await
            .map_err(|e| format!("cannot keep the master's delay offsets: {e}"))?;
    }
    let groups: GroupTable =
        meta::from_java_json(&body(rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG).await?)
            .map_err(|e| format!("the master's subscription groups: {e}"))?;
    tell(FromMaster::Groups(groups)).await?;
    Ok(())
}
