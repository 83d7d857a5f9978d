//! `Registrar` (actor `namesrv_registrar`): keeps this broker registered with every name server
//! as RocketMQ's `BrokerController.registerBrokerAll` does.
//!
//! Owns one [`RemotingClient`] per name server address and that server's registration status.
//! In: its own period tick and (declared in [`super::messages`]) [`RegisterNow`] (a topic was
//! created; optionally with a waiter), [`UnregisterAll`] (clean shutdown), [`GetRegistrations`].
//! Out: REGISTER_BROKER (103) / UNREGISTER_BROKER (104) requests.
//!
//! Invariants:
//! * Registers at start, then every `period`, then at once on [`RegisterNow`]. Each request
//!   carries a fresh snapshot of the topic table (the `topics` closure), its dataVersion, and
//!   `bodyCrc32` = crc32(body) & 0x7FFFFFFF; the body is never compressed.
//! * Name servers are independent: each has its own client, and the network work runs in
//!   futures spawned on the actor's context, so a name server that is down or slow never delays
//!   the others nor the actor's mailbox. At most one registration per name server is in flight;
//!   triggers arriving meanwhile collapse into one more registration when it ends (with the
//!   topics as they are then).
//! * A [`RegisterNow`] waiter is answered when every name server has answered (or failed) a
//!   registration that started after the trigger arrived, so it carries the table as it was
//!   then or newer — as RocketMQ's `updateAndCreateTopic` answers only after
//!   `registerIncrementBrokerData` (AdminBrokerProcessor.java), so a client that routes right
//!   after `mqadmin updateTopic` finds the topic.
//! * A failed request drops that server's client (the next attempt reconnects); a failure is
//!   logged once per failure streak, and the recovery once.
//! * After [`UnregisterAll`] nothing registers again: a tick must not resurrect a broker that
//!   announced its shutdown.
//! * [`register_and_wait`] is how a start waits for its first registration: bounded, and the
//!   registrar goes on (every period) if the bound passes first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::format::record::body_crc;
use actormq_core::meta::{TopicConfig as MetaTopicConfig, TopicTable};
use actormq_core::protocol::body::{
    to_json_bytes, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
    TopicFilterType,
};
use actormq_core::protocol::codes::{request_code, response_code};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
};

// Re-exported: tests drive the registrar through these paths.
pub use super::messages::{GetRegistrations, NamesrvStatus, RegisterNow, UnregisterAll};
use crate::metered::{ActorRef, Metered, Reply, Serve, Service};
use crate::remoting::client::RemotingClient;

/// RocketMQ's `registerNameServerPeriod`.
pub const DEFAULT_REGISTER_PERIOD: Duration = Duration::from_secs(30);
/// RocketMQ's `registerBrokerTimeoutMills`.
pub const DEFAULT_REGISTER_TIMEOUT: Duration = Duration::from_secs(6);

/// Who this broker is, as the name server records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub cluster: String,
    pub broker_name: String,
    /// 0 = master.
    pub broker_id: u64,
    /// `brokerIP1:listenPort`, where clients connect.
    pub broker_addr: String,
    /// `brokerIP2:haListenPort`, where slaves replicate from.
    pub ha_server_addr: String,
}

/// Source of the topic table to register (read at each registration).
pub type TopicSource = Arc<dyn Fn() -> TopicTable + Send + Sync>;

struct Target {
    client: Option<RemotingClient>,
    in_flight: bool,
    /// A trigger arrived while a registration was in flight.
    again: bool,
    /// Waiters for the registration in flight, and for the next one.
    waiting_now: Vec<Arc<Waiter>>,
    waiting_next: Vec<Arc<Waiter>>,
    status: NamesrvStatus,
}

/// One [`RegisterNow`] waiter, shared by every target: answered when the last target lets go of
/// it (its `Drop`).
struct Waiter(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

pub struct Registrar {
    identity: BrokerIdentity,
    topics: TopicSource,
    period: Duration,
    timeout: Duration,
    targets: Vec<Target>,
    unregistered: bool,
    /// A slave: where the master's HA address and remoting address go when a name server
    /// names them.
    master_ha: Option<Arc<arc_swap::ArcSwapOption<String>>>,
    master_addr: Option<Arc<arc_swap::ArcSwapOption<String>>>,
}

/// Outcome of one registration attempt: the client to keep (if the connection is usable) and
/// the response or the error.
type Attempt = (Option<RemotingClient>, Result<RemotingCommand, String>);

impl Registrar {
    /// `period`: between registrations (RocketMQ 30 s, [`DEFAULT_REGISTER_PERIOD`]); `timeout`:
    /// per connect and per request (RocketMQ 6 s, [`DEFAULT_REGISTER_TIMEOUT`]).
    pub fn new(
        namesrv_addrs: Vec<String>,
        identity: BrokerIdentity,
        topics: TopicSource,
        period: Duration,
        timeout: Duration,
    ) -> Self {
        let targets = namesrv_addrs
            .into_iter()
            .map(|addr| Target {
                client: None,
                in_flight: false,
                again: false,
                waiting_now: Vec::new(),
                waiting_next: Vec::new(),
                status: NamesrvStatus {
                    addr,
                    ..NamesrvStatus::default()
                },
            })
            .collect();
        Registrar {
            identity,
            topics,
            period,
            timeout,
            targets,
            unregistered: false,
            master_ha: None,
            master_addr: None,
        }
    }

    /// A slave: every HA address of the master a name server answers with is stored in `ha`
    /// (the slave's replication client reads it; RocketMQ's `updateHaMasterAddress`), and every
    /// remoting address in `addr` (its table copy reads it; `updateMasterAddress`). `None`:
    /// not wanted (`haMasterAddress` is set).
    pub fn with_master(
        mut self,
        ha: Option<Arc<arc_swap::ArcSwapOption<String>>>,
        addr: Arc<arc_swap::ArcSwapOption<String>>,
    ) -> Self {
        self.master_ha = ha;
        self.master_addr = Some(addr);
        self
    }

    fn broker_id(&self) -> i64 {
        i64::try_from(self.identity.broker_id).unwrap_or(i64::MAX)
    }

    /// A REGISTER_BROKER request with the topic table as it is now.
    fn register_request(&self) -> Result<RemotingCommand, String> {
        let table = (self.topics)();
        let body = RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: table
                    .topic_config_table
                    .iter()
                    .map(|(name, c)| (name.clone(), wire_topic_config(name, c)))
                    .collect(),
                data_version: DataVersion {
                    timestamp: table.data_version.timestamp,
                    counter: table.data_version.counter,
                    state_version: None,
                },
            },
            filter_server_list: Vec::new(),
        };
        let body = to_json_bytes(&body).map_err(|e| format!("cannot serialise topics: {e}"))?;
        let header = RegisterBrokerRequestHeader {
            broker_name: self.identity.broker_name.clone(),
            broker_addr: self.identity.broker_addr.clone(),
            cluster_name: self.identity.cluster.clone(),
            ha_server_addr: self.identity.ha_server_addr.clone(),
            broker_id: self.broker_id(),
            compressed: false,
            // Masked to 31 bits, so it always fits an i32.
            body_crc32: i32::try_from(body_crc(&body)).unwrap_or_default(),
            heartbeat_timeout_millis: None,
            enable_acting_master: None,
        };
        Ok(RemotingCommand::new_request(request_code::REGISTER_BROKER)
            .with_ext_fields(header.to_ext_fields())
            .with_body(body))
    }

    fn register_all(&mut self, ctx: &mut Context<Metered<Self>>) {
        self.register_all_for(None, ctx);
    }

    /// Registers with every target; `waiter` (if any) is answered when each has answered a
    /// registration started from here on (dropping the last clone answers it).
    fn register_all_for(&mut self, waiter: Option<Arc<Waiter>>, ctx: &mut Context<Metered<Self>>) {
        if self.unregistered {
            return;
        }
        if let Some(w) = waiter {
            for t in &mut self.targets {
                t.waiting_next.push(w.clone());
            }
        }
        let req = match self.register_request() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "cannot build REGISTER_BROKER");
                return;
            }
        };
        for i in 0..self.targets.len() {
            self.start(i, req.clone(), ctx);
        }
    }

    /// Starts registering with target `i`, or marks it to go again if one is in flight.
    fn start(&mut self, i: usize, req: RemotingCommand, ctx: &mut Context<Metered<Self>>) {
        let Some(t) = self.targets.get_mut(i) else {
            return;
        };
        if t.in_flight {
            t.again = true;
            return;
        }
        t.in_flight = true;
        t.waiting_now = std::mem::take(&mut t.waiting_next);
        let client = t.client.clone().filter(|c| !c.is_closed());
        let addr = t.status.addr.clone();
        let timeout = self.timeout;
        let attempt = async move { invoke(client, &addr, req, timeout).await };
        ctx.spawn(
            actix::fut::wrap_future::<_, Metered<Self>>(attempt)
                .map(move |outcome, act, ctx| act.inner.finish(i, outcome, ctx)),
        );
    }

    fn finish(&mut self, i: usize, (client, result): Attempt, ctx: &mut Context<Metered<Self>>) {
        let (master_ha, master_addr) = (self.master_ha.clone(), self.master_addr.clone());
        let Some(t) = self.targets.get_mut(i) else {
            return;
        };
        t.in_flight = false;
        t.client = client;
        t.waiting_now.clear();
        let s = &mut t.status;
        let error = match result {
            Ok(resp) if resp.code == response_code::SUCCESS => {
                let header = RegisterBrokerResponseHeader::from_command(&resp).unwrap_or_default();
                s.master_addr = header.master_addr;
                s.master_ha_server_addr = header.ha_server_addr;
                for (sink, said, what) in [
                    (&master_ha, &s.master_ha_server_addr, "HA address"),
                    (&master_addr, &s.master_addr, "address"),
                ] {
                    if let (Some(sink), Some(addr)) = (sink, said) {
                        if !addr.is_empty()
                            && sink.load().as_deref().map(String::as_str) != Some(addr.as_str())
                        {
                            tracing::info!(master = %addr, "the name server names the master's {what}");
                            sink.store(Some(Arc::new(addr.clone())));
                        }
                    }
                }
                None
            }
            Ok(resp) => Some(format!(
                "REGISTER_BROKER answered {}: {}",
                resp.code,
                resp.remark.unwrap_or_default()
            )),
            Err(e) => Some(e),
        };
        match error {
            None => {
                if s.failing {
                    tracing::info!(namesrv = %s.addr, failures = s.failures,
                        "registered with name server again");
                }
                s.successes += 1;
                s.failing = false;
                s.last_success = Some(Instant::now());
            }
            Some(e) => {
                // Once per streak: a name server down for hours must not flood the log every
                // period.
                if !s.failing {
                    tracing::warn!(namesrv = %s.addr, error = %e,
                        "cannot register with name server; retrying every period");
                }
                s.failures += 1;
                s.failing = true;
                s.last_error = Some(e);
            }
        }
        if std::mem::take(&mut t.again) && !self.unregistered {
            match self.register_request() {
                Ok(req) => self.start(i, req, ctx),
                Err(e) => tracing::error!(error = %e, "cannot build REGISTER_BROKER"),
            }
        }
    }
}

/// The broker's stored topic config in the wire form the name server reads.
fn wire_topic_config(name: &str, c: &MetaTopicConfig) -> TopicConfig {
    let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    TopicConfig {
        // The table key is authoritative; a config written without its name still registers.
        topic_name: name.to_owned(),
        read_queue_nums: int(c.read_queue_nums),
        write_queue_nums: int(c.write_queue_nums),
        perm: int(c.perm),
        topic_filter_type: if c.topic_filter_type == "MULTI_TAG" {
            TopicFilterType::MultiTag
        } else {
            TopicFilterType::SingleTag
        },
        topic_sys_flag: int(c.topic_sys_flag),
        order: c.order,
        attributes: c.attributes.clone(),
    }
}

/// Connects if needed (bounded by `timeout`), then sends `req` and waits for the reply.
async fn invoke(
    client: Option<RemotingClient>,
    addr: &str,
    req: RemotingCommand,
    timeout: Duration,
) -> Attempt {
    let client = match client {
        Some(c) => c,
        None => match tokio::time::timeout(timeout, RemotingClient::connect(addr)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return (None, Err(e.to_string())),
            Err(_) => {
                return (
                    None,
                    Err(format!(
                        "cannot connect to {addr} within {} ms",
                        timeout.as_millis()
                    )),
                )
            }
        },
    };
    match client.invoke(req, timeout).await {
        Ok(resp) => (Some(client), Ok(resp)),
        // Closed or timed out: the connection is suspect, so the next attempt reconnects.
        Err(e) => (None, Err(e.to_string())),
    }
}

/// Registers with every name server now and waits, at most `limit`, until each has answered or
/// failed that registration; false if `limit` passed first (the registration goes on). The
/// broker's start awaits it as Apache's `BrokerController.start` awaits `registerBrokerAll`
/// (`broker/src/main/java/org/apache/rocketmq/broker/out/BrokerOuterAPI.java`: a latch over the
/// name servers, at most `registerBrokerTimeoutMills`), so a client that routes as soon as the
/// broker is up finds it and its topics (TBW102 among them).
pub async fn register_and_wait(registrar: &ActorRef<Registrar>, limit: Duration) -> bool {
    let (tx, rx) = tokio::sync::oneshot::channel();
    if registrar.send(RegisterNow(Some(tx))).await.is_err() {
        return false;
    }
    matches!(tokio::time::timeout(limit, rx).await, Ok(Ok(())))
}

impl Service for Registrar {
    const NAME: &'static str = "namesrv_registrar";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        self.register_all(ctx);
        ctx.run_interval(self.period, |act, ctx| act.inner.register_all(ctx));
    }
}

impl Serve<RegisterNow> for Registrar {
    type Reply = ();
    fn serve(&mut self, m: RegisterNow, ctx: &mut Context<Metered<Self>>) {
        self.register_all_for(m.0.map(|tx| Arc::new(Waiter(Some(tx)))), ctx);
    }
}

impl Serve<GetRegistrations> for Registrar {
    type Reply = Reply<GetRegistrations>;
    fn serve(&mut self, _: GetRegistrations, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.targets.iter().map(|t| t.status.clone()).collect())
    }
}

impl Serve<UnregisterAll> for Registrar {
    type Reply = ResponseFuture<usize>;
    fn serve(&mut self, _: UnregisterAll, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.unregistered = true;
        let header = UnregisterBrokerRequestHeader {
            broker_name: self.identity.broker_name.clone(),
            broker_addr: self.identity.broker_addr.clone(),
            cluster_name: self.identity.cluster.clone(),
            broker_id: self.broker_id(),
        };
        let req = RemotingCommand::new_request(request_code::UNREGISTER_BROKER)
            .with_ext_fields(header.to_ext_fields());
        let timeout = self.timeout;
        let calls: Vec<_> = self
            .targets
            .iter()
            .map(|t| {
                let client = t.client.clone().filter(|c| !c.is_closed());
                let addr = t.status.addr.clone();
                let req = req.clone();
                async move {
                    match invoke(client, &addr, req, timeout).await.1 {
                        Ok(resp) if resp.code == response_code::SUCCESS => true,
                        Ok(resp) => {
                            tracing::warn!(namesrv = %addr, code = resp.code, remark = ?resp.remark,
                                "UNREGISTER_BROKER refused");
                            false
                        }
                        Err(e) => {
                            tracing::warn!(namesrv = %addr, error = %e, "cannot unregister");
                            false
                        }
                    }
                }
            })
            .collect();
        // Reply from a future, not the handler: the mailbox keeps moving while name servers
        // answer (or time out) in parallel.
        Box::pin(async move {
            futures_util::future::join_all(calls)
                .await
                .into_iter()
                .filter(|ok| *ok)
                .count()
        })
    }
}
