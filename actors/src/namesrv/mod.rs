//! The name server (Apache's `namesrv/`): which brokers exist, where they listen, and which topics
//! they serve — what every RocketMQ client asks before it talks to a broker.
//!
//! * [`RouteRegistry`] (actor `route_registry`) owns the four tables of RocketMQ's
//!   `RouteInfoManager`: clusterAddrTable (cluster → broker names), brokerAddrTable (broker name →
//!   cluster, name, broker id → address), topicQueueTable (topic → broker name → [`QueueData`])
//!   and brokerLiveTable (broker address → last registration, dataVersion, HA address, the
//!   connection it registered through). Beside them it owns what configures and extends routes:
//!   the name server's configuration ([`crate::namesrv::config`]) and RocketMQ's KV config table
//!   ([`crate::namesrv::kv`], whose ORDER_TOPIC_CONFIG namespace gives a route its
//!   `orderTopicConf` when `orderMessageEnable` is on, as 4.9.4's `getRouteInfoByTopic`). In:
//!   the messages of [`messages`] (each declared there with the request it serves and what its
//!   reply means; handled here and, for 322, 224, 304 and 311–313, in [`queries`]) and its own
//!   scan tick. Out: replies only — it never sends anything. Its only blocking work
//!   is writing `kvConfig.json` after a KV change and the configuration after an update (rare
//!   admin requests; RocketMQ writes them under its lock the same way).
//! * [`NamesrvProcessor`] maps remoting requests (100, 101, 102, 103, 104, 105, 106, 205, 206,
//!   216, 217, 219, 318, 319, 327, and in [`queries`] 224, 304, 311, 312, 313, 322; everything
//!   else ⇒ REQUEST_CODE_NOT_SUPPORTED) onto those messages. It decodes and validates on the connection's thread and hands the registry
//!   already-parsed values, so the registry's handlers are table updates.
//! * [`start_namesrv`] loads the KV table and wires both onto the current actix system;
//!   [`NamesrvHandle`] is what the caller keeps.
//!
//! Invariants of the tables:
//! * An address appears under at most one broker id of its broker name: registering it under a
//!   new id first removes the old entry (a slave promoted to master).
//! * Queue data is written only by masters (broker id 0), and only when the registration's
//!   dataVersion differs from the one last seen from that address, or the broker is new — a
//!   steady 30 s heartbeat costs a table lookup, not a rewrite of every topic.
//! * A broker name with no address left is gone everywhere: from its cluster and from every
//!   topic's queue data (a topic left without queue data disappears). A master that expires while
//!   its slave lives keeps the queue data, so consumers can still read from the slave (RocketMQ
//!   does the same).
//! * A broker not re-registered within `expiry` is removed by the scan that runs every
//!   `scan_interval`; a broker whose registering connection closes is removed at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::format::record::body_crc;
use actormq_core::protocol::body::{
    parse_java_json, to_json_bytes, to_standard_json_bytes, BrokerData, ClusterInfo, DataVersion,
    KvTable, QueueData, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicList,
    TopicRouteData, MASTER_ID,
};
use actormq_core::protocol::codes::{request_code, response_code};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::faq;
use actormq_core::protocol::header::{
    DeleteTopicFromNamesrvRequestHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
};
use serde::Serialize;

use crate::metered::{start_on, ActorRef, Metered, Reply, Serve, Service};
use crate::namesrv::config::NamesrvConfig;
use crate::namesrv::kv::{KvConfigTable, NAMESPACE_ORDER_TOPIC_CONFIG};
use crate::remoting::server::{serve, ConnInfo, Handled, Processor};

/// The `Ok` value of a request's decode (a header's `from_command`, a field's `require_str`),
/// or — returned from the enclosing handler — a SYSTEM_ERROR reply whose remark is the decode
/// error's message. The name server's `from_command` and `require_str` reads all go through it
/// (the broker's header decodes through `broker/context.rs`'s `header_or_reply!`). Defined
/// before the submodules so that [`queries`] can use it.
macro_rules! or_system_error {
    ($decoded:expr, $req:expr) => {
        match $decoded {
            Ok(v) => v,
            Err(e) => return system_error($req, e.to_string()),
        }
    };
}

pub mod config;
pub mod kv;
pub mod messages;
mod queries;

use messages::{
    ConnectionClosed, DeleteKvConfig, DeleteTopic, GetAllTopics, GetClusterInfo, GetKvConfig,
    GetKvList, GetRoute, NamesrvConfigRequest, PutKvConfig, RegisterBroker, RegisterBrokerResult,
    RegisterTopic, SetWritePerm, UnregisterBroker,
};

/// RocketMQ's `scanNotActiveBrokerInterval` (5.x).
pub const DEFAULT_SCAN_INTERVAL: Duration = Duration::from_secs(5);
/// RocketMQ's `BROKER_CHANNEL_EXPIRED_TIME`.
pub const DEFAULT_BROKER_EXPIRY: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// The registry

/// One broker address's liveness record (RocketMQ's `BrokerLiveInfo`).
struct BrokerLive {
    last_update: Instant,
    data_version: DataVersion,
    ha_server_addr: String,
    conn_id: Option<u64>,
    broker_name: String,
    broker_id: i64,
}

/// The routing tables; see the module docs for their invariants.
pub struct RouteRegistry {
    /// cluster → broker names.
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    /// broker name → cluster, name and broker id → address.
    broker_addr_table: BTreeMap<String, BrokerData>,
    /// topic → broker name → queues. Never holds an empty inner map.
    topic_queue_table: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// broker address → liveness.
    broker_live_table: HashMap<String, BrokerLive>,
    scan_interval: Duration,
    expiry: Duration,
    /// GET/UPDATE_NAMESRV_CONFIG's table; `kvConfigPath` and `orderMessageEnable` are read from
    /// it at each use, so an update applies at once (RocketMQ reads its config object the same
    /// way).
    config: NamesrvConfig,
    /// The KV config table, written to `config`'s `kvConfigPath` after each change.
    kv: KvConfigTable,
}

impl RouteRegistry {
    /// `expiry`: a broker not registered again within it is removed; checked every
    /// `scan_interval` (RocketMQ: 120 s and 5 s, [`DEFAULT_BROKER_EXPIRY`],
    /// [`DEFAULT_SCAN_INTERVAL`]). The configuration is the default one (files under `$HOME`)
    /// and the KV table starts empty; [`RouteRegistry::with_config`] gives both.
    pub fn new(scan_interval: Duration, expiry: Duration) -> Self {
        Self::with_config(
            scan_interval,
            expiry,
            NamesrvConfig::new(0),
            KvConfigTable::default(),
        )
    }

    /// A registry with its configuration and the KV table loaded from `kvConfigPath`.
    pub fn with_config(
        scan_interval: Duration,
        expiry: Duration,
        config: NamesrvConfig,
        kv: KvConfigTable,
    ) -> Self {
        RouteRegistry {
            cluster_addr_table: BTreeMap::new(),
            broker_addr_table: BTreeMap::new(),
            topic_queue_table: BTreeMap::new(),
            broker_live_table: HashMap::new(),
            scan_interval,
            expiry,
            config,
            kv,
        }
    }

    /// Writes the KV table after a change; the remark for the reply if that fails.
    fn persist_kv(&self) -> Result<(), String> {
        let path = self.config.kv_config_path();
        self.kv.persist(&path).map_err(|e| {
            tracing::error!(file = %path.display(), error = %e, "cannot persist the KV config table");
            format!(
                "the KV config was changed in memory but cannot be written to {}: {e}",
                path.display()
            )
        })
    }

    fn register_broker(&mut self, msg: RegisterBroker, now: Instant) -> RegisterBrokerResult {
        let RegisterBroker {
            header,
            body,
            conn_id,
        } = msg;
        let addr = header.broker_addr;
        let name = header.broker_name;
        self.cluster_addr_table
            .entry(header.cluster_name.clone())
            .or_default()
            .insert(name.clone());

        let mut first = !self.broker_addr_table.contains_key(&name);
        let broker = self
            .broker_addr_table
            .entry(name.clone())
            .or_insert_with(|| BrokerData {
                cluster: header.cluster_name.clone(),
                broker_name: name.clone(),
                ..BrokerData::default()
            });
        // One address, one id: a slave promoted to master re-registers its address under id 0,
        // and the stale id-1 entry must not keep routing consumers to it as a slave.
        broker
            .broker_addrs
            .retain(|id, a| *a != addr || *id == header.broker_id);
        let old = broker.broker_addrs.insert(header.broker_id, addr.clone());
        first |= old.is_none();

        let wrapper = body.topic_config_serialize_wrapper;
        if header.broker_id == MASTER_ID {
            let changed = self
                .broker_live_table
                .get(&addr)
                .is_none_or(|live| live.data_version != wrapper.data_version);
            if changed || first {
                for config in wrapper.topic_config_table.values() {
                    self.topic_queue_table
                        .entry(config.topic_name.clone())
                        .or_default()
                        .insert(name.clone(), queue_data(&name, config));
                }
            }
        }

        self.broker_live_table.insert(
            addr,
            BrokerLive {
                last_update: now,
                data_version: wrapper.data_version,
                ha_server_addr: header.ha_server_addr,
                conn_id,
                broker_name: name.clone(),
                broker_id: header.broker_id,
            },
        );

        let mut result = RegisterBrokerResult {
            order_topic_config: self.kv.list(NAMESPACE_ORDER_TOPIC_CONFIG).cloned(),
            ..RegisterBrokerResult::default()
        };
        if header.broker_id != MASTER_ID {
            let master = self
                .broker_addr_table
                .get(&name)
                .and_then(|b| b.broker_addrs.get(&MASTER_ID));
            // Only a *live* master is worth pointing a slave's HA client at.
            if let Some((master, live)) =
                master.and_then(|m| self.broker_live_table.get(m).map(|l| (m, l)))
            {
                result.ha_server_addr = Some(live.ha_server_addr.clone());
                result.master_addr = Some(master.clone());
            }
        }
        result
    }

    fn unregister_broker(&mut self, h: &UnregisterBrokerRequestHeader) {
        self.broker_live_table.remove(&h.broker_addr);
        // RocketMQ removes by id alone; we also require the address to match, so a late
        // unregister from a broker that was already replaced under its id cannot evict the
        // replacement (identical for every consistent request).
        let emptied = match self.broker_addr_table.get_mut(&h.broker_name) {
            Some(b) => {
                if b.broker_addrs.get(&h.broker_id) == Some(&h.broker_addr) {
                    b.broker_addrs.remove(&h.broker_id);
                }
                b.broker_addrs.is_empty()
            }
            None => false,
        };
        if emptied {
            self.remove_broker_name(&h.broker_name);
        }
        tracing::info!(broker = %h.broker_name, addr = %h.broker_addr, id = h.broker_id,
            "broker unregistered");
    }

    /// Drops one broker address everywhere (expiry, connection closed), with the broker name
    /// and its queue data when it was the name's last address.
    fn remove_broker_addr(&mut self, addr: &str, why: &str) {
        let live = self.broker_live_table.remove(addr);
        // Scan every broker name rather than trusting the live record alone: the address may
        // have moved between names, and a stale entry anywhere would keep routing to it.
        let mut emptied = Vec::new();
        for (name, b) in &mut self.broker_addr_table {
            let before = b.broker_addrs.len();
            b.broker_addrs.retain(|_, a| a != addr);
            if b.broker_addrs.len() != before && b.broker_addrs.is_empty() {
                emptied.push(name.clone());
            }
        }
        for name in &emptied {
            self.remove_broker_name(name);
        }
        if let Some(live) = live {
            tracing::info!(addr, broker = %live.broker_name, id = live.broker_id, why,
                "broker removed from routes");
        }
    }

    fn remove_broker_name(&mut self, name: &str) {
        if let Some(b) = self.broker_addr_table.remove(name) {
            if let Some(names) = self.cluster_addr_table.get_mut(&b.cluster) {
                names.remove(name);
                if names.is_empty() {
                    self.cluster_addr_table.remove(&b.cluster);
                }
            }
        }
        // A broker name can appear in a cluster other than the one its data names if it moved
        // clusters; sweep them all so no cluster lists a broker that no longer exists.
        self.cluster_addr_table.retain(|_, names| {
            names.remove(name);
            !names.is_empty()
        });
        self.topic_queue_table.retain(|_, queues| {
            queues.remove(name);
            !queues.is_empty()
        });
    }

    fn scan_expired(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| now.saturating_duration_since(live.last_update) > self.expiry)
            .map(|(addr, _)| addr.clone())
            .collect();
        for addr in expired {
            tracing::warn!(addr = %addr, expiry_ms = self.expiry.as_millis() as u64,
                "broker expired: no registration within the expiry");
            self.remove_broker_addr(&addr, "expired");
        }
    }

    fn register_topic(&mut self, msg: RegisterTopic) {
        // Brokers that registered through the same connection as masters: the owners of a
        // queue data that names no broker.
        let own: Vec<String> = match msg.conn_id {
            Some(conn) => self
                .broker_live_table
                .values()
                .filter(|l| l.conn_id == Some(conn) && l.broker_id == MASTER_ID)
                .map(|l| l.broker_name.clone())
                .collect(),
            None => Vec::new(),
        };
        for qd in msg.queue_datas {
            let names = if qd.broker_name.is_empty() {
                own.clone()
            } else {
                vec![qd.broker_name.clone()]
            };
            for name in names {
                // As RocketMQ: queue data for a broker nobody registered would route clients to
                // a broker without an address.
                if !self.broker_addr_table.contains_key(&name) {
                    tracing::warn!(topic = %msg.topic, broker = %name,
                        "REGISTER_TOPIC_IN_NAMESRV for an unknown broker ignored");
                    continue;
                }
                self.topic_queue_table
                    .entry(msg.topic.clone())
                    .or_default()
                    .insert(
                        name.clone(),
                        QueueData {
                            broker_name: name,
                            ..qd.clone()
                        },
                    );
            }
        }
    }

    fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let broker_datas: Vec<BrokerData> = queues
            .keys()
            .filter_map(|name| self.broker_addr_table.get(name).cloned())
            .collect();
        // As RocketMQ's pickupTopicRouteData: queue data without any broker address is no route.
        if broker_datas.is_empty() {
            return None;
        }
        let order_topic_conf = if self.config.order_message_enable() {
            self.kv
                .get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
                .map(str::to_owned)
        } else {
            None
        };
        Some(TopicRouteData {
            queue_datas: queues.values().cloned().collect(),
            broker_datas,
            order_topic_conf,
            ..TopicRouteData::default()
        })
    }

    fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self
                .cluster_addr_table
                .iter()
                .map(|(c, names)| (c.clone(), names.iter().cloned().collect()))
                .collect(),
        }
    }
}

/// RocketMQ's `createAndUpdateQueueData`: what a route says about one topic on one broker.
fn queue_data(broker_name: &str, c: &TopicConfig) -> QueueData {
    QueueData {
        broker_name: broker_name.to_owned(),
        read_queue_nums: c.read_queue_nums,
        write_queue_nums: c.write_queue_nums,
        perm: c.perm,
        topic_sys_flag: c.topic_sys_flag,
    }
}

impl Service for RouteRegistry {
    const NAME: &'static str = "route_registry";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(self.scan_interval, |act, _| {
            act.inner.scan_expired(Instant::now())
        });
    }
}

impl Serve<RegisterBroker> for RouteRegistry {
    type Reply = Reply<RegisterBroker>;
    fn serve(&mut self, m: RegisterBroker, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.register_broker(m, Instant::now()))
    }
}

impl Serve<UnregisterBroker> for RouteRegistry {
    type Reply = ();
    fn serve(&mut self, m: UnregisterBroker, _: &mut Context<Metered<Self>>) {
        self.unregister_broker(&m.0);
    }
}

impl Serve<RegisterTopic> for RouteRegistry {
    type Reply = ();
    fn serve(&mut self, m: RegisterTopic, _: &mut Context<Metered<Self>>) {
        self.register_topic(m);
    }
}

impl Serve<ConnectionClosed> for RouteRegistry {
    type Reply = ();
    fn serve(&mut self, m: ConnectionClosed, _: &mut Context<Metered<Self>>) {
        let gone: Vec<String> = self
            .broker_live_table
            .iter()
            .filter(|(_, l)| l.conn_id == Some(m.0))
            .map(|(a, _)| a.clone())
            .collect();
        for addr in gone {
            self.remove_broker_addr(&addr, "connection closed");
        }
    }
}

impl Serve<GetRoute> for RouteRegistry {
    type Reply = Reply<GetRoute>;
    fn serve(&mut self, m: GetRoute, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.route(&m.0))
    }
}

impl Serve<GetClusterInfo> for RouteRegistry {
    type Reply = Reply<GetClusterInfo>;
    fn serve(&mut self, _: GetClusterInfo, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.cluster_info())
    }
}

impl Serve<DeleteTopic> for RouteRegistry {
    type Reply = Reply<DeleteTopic>;
    fn serve(&mut self, m: DeleteTopic, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let Some(per_broker) = self.topic_queue_table.get_mut(&m.topic) else {
            return MessageResult(0);
        };
        let before = per_broker.len();
        match m.cluster.as_deref().filter(|c| !c.is_empty()) {
            Some(cluster) => {
                let names = self.cluster_addr_table.get(cluster);
                per_broker.retain(|b, _| !names.is_some_and(|n| n.contains(b)));
            }
            None => per_broker.clear(),
        }
        let removed = before - per_broker.len();
        if per_broker.is_empty() {
            self.topic_queue_table.remove(&m.topic);
        }
        tracing::info!(topic = %m.topic, cluster = ?m.cluster, brokers = removed, "topic deleted from the name server");
        MessageResult(removed)
    }
}

impl Serve<SetWritePerm> for RouteRegistry {
    type Reply = Reply<SetWritePerm>;
    fn serve(&mut self, m: SetWritePerm, _: &mut Context<Metered<Self>>) -> Self::Reply {
        const READ: i32 = actormq_core::meta::PERM_READ as i32;
        const WRITE: i32 = actormq_core::meta::PERM_WRITE as i32;
        let mut changed = 0;
        for per_broker in self.topic_queue_table.values_mut() {
            if let Some(q) = per_broker.get_mut(&m.broker_name) {
                q.perm = if m.write {
                    READ | WRITE
                } else {
                    q.perm & !WRITE
                };
                changed += 1;
            }
        }
        tracing::info!(broker = %m.broker_name, write = m.write, topics = changed, "write permission of a broker changed on the name server");
        MessageResult(changed)
    }
}

impl Serve<GetAllTopics> for RouteRegistry {
    type Reply = Reply<GetAllTopics>;
    fn serve(&mut self, _: GetAllTopics, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.topic_queue_table.keys().cloned().collect())
    }
}

impl Serve<PutKvConfig> for RouteRegistry {
    type Reply = Reply<PutKvConfig>;
    fn serve(&mut self, m: PutKvConfig, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let prev = self.kv.put(&m.namespace, &m.key, &m.value);
        tracing::info!(namespace = %m.namespace, key = %m.key, value = %m.value,
            new = prev.is_none(), "KV config item set");
        MessageResult(self.persist_kv())
    }
}

impl Serve<GetKvConfig> for RouteRegistry {
    type Reply = Reply<GetKvConfig>;
    fn serve(&mut self, m: GetKvConfig, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.kv.get(&m.namespace, &m.key).map(str::to_owned))
    }
}

impl Serve<DeleteKvConfig> for RouteRegistry {
    type Reply = Reply<DeleteKvConfig>;
    fn serve(&mut self, m: DeleteKvConfig, _: &mut Context<Metered<Self>>) -> Self::Reply {
        match self.kv.delete(&m.namespace, &m.key) {
            Some(value) => {
                tracing::info!(namespace = %m.namespace, key = %m.key, %value, "KV config item deleted");
                MessageResult(self.persist_kv())
            }
            None => MessageResult(Ok(())),
        }
    }
}

impl Serve<GetKvList> for RouteRegistry {
    type Reply = Reply<GetKvList>;
    fn serve(&mut self, m: GetKvList, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.kv.list(&m.0).cloned())
    }
}

impl Serve<NamesrvConfigRequest> for RouteRegistry {
    type Reply = Reply<NamesrvConfigRequest>;
    fn serve(&mut self, m: NamesrvConfigRequest, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(if m.update {
            self.config.update_config(&m.req, &m.peer)
        } else {
            self.config.get_config(&m.req)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The request processor

/// Serves the name server's request codes over a remoting listener.
pub struct NamesrvProcessor {
    registry: ActorRef<RouteRegistry>,
}

impl NamesrvProcessor {
    pub fn new(registry: ActorRef<RouteRegistry>) -> Self {
        NamesrvProcessor { registry }
    }

    /// Sends `msg` to the registry now and builds the response from its reply later.
    ///
    /// The send is issued here, not inside the future: `Addr::send` enqueues at once when the
    /// mailbox has room, so the requests of one connection reach the registry in arrival order
    /// (a broker's REGISTER followed by its UNREGISTER must not be applied the other way round).
    fn ask<M, F>(&self, req: &RemotingCommand, msg: M, respond: F) -> Handled
    where
        M: Message + Send + 'static,
        M::Result: Send,
        RouteRegistry: Serve<M>,
        F: FnOnce(M::Result, RemotingCommand) -> RemotingCommand + 'static,
    {
        let pending = self.registry.send(msg);
        let template = RemotingCommand::response_to(req, response_code::SUCCESS, None);
        Handled::Later(Box::pin(async move {
            Some(match pending.await {
                Ok(result) => respond(result, template),
                Err(e) => error_from(template, format!("route registry unavailable: {e}")),
            })
        }))
    }

    fn register_broker(&self, req: &RemotingCommand, conn: &ConnInfo) -> Handled {
        let header = or_system_error!(RegisterBrokerRequestHeader::from_command(req), req);
        if header.body_crc32 != 0 {
            let crc = body_crc(&req.body);
            if i64::from(crc) != i64::from(header.body_crc32) {
                tracing::warn!(peer = %conn.peer, broker = %header.broker_name,
                    expected = header.body_crc32, actual = crc, "REGISTER_BROKER body crc32 mismatch");
                return system_error(req, "crc32 not match".to_owned());
            }
        }
        if header.compressed {
            return system_error(
                req,
                "compressed REGISTER_BROKER body is not supported by this name server; \
                 register with compressedRegister=false"
                    .to_owned(),
            );
        }
        // RocketMQ reads a missing body as "no topics, dataVersion 0/0".
        let body = if req.body.is_empty() {
            RegisterBrokerBody::default()
        } else {
            match parse_java_json::<RegisterBrokerBody>(&req.body) {
                Ok(b) => b,
                Err(e) => {
                    return system_error(req, format!("REGISTER_BROKER body is not valid: {e}"))
                }
            }
        };
        let msg = RegisterBroker {
            header,
            body,
            conn_id: Some(conn.id),
        };
        self.ask(req, msg, |result, resp| {
            let resp = resp.with_ext_fields(
                RegisterBrokerResponseHeader {
                    ha_server_addr: result.ha_server_addr,
                    master_addr: result.master_addr,
                }
                .to_ext_fields(),
            );
            match result.order_topic_config {
                Some(table) => with_json(resp, &KvTable { table }),
                None => resp,
            }
        })
    }

    /// PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE, as 4.9.4's
    /// `DefaultRequestProcessor` answers them: a missing header field is SYSTEM_ERROR (its
    /// `@CFNotNull`), an absent item QUERY_NOT_FOUND with 4.9.4's remark.
    fn kv_config(&self, req: &RemotingCommand) -> Handled {
        let namespace = or_system_error!(req.require_str("namespace"), req).to_owned();
        if req.code == request_code::GET_KVLIST_BY_NAMESPACE {
            return self.ask(
                req,
                GetKvList(namespace.clone()),
                move |table, resp| match table {
                    Some(table) => with_json(resp, &KvTable { table }),
                    None => not_found(resp, format!("No config item, Namespace: {namespace}")),
                },
            );
        }
        let key = or_system_error!(req.require_str("key"), req).to_owned();
        let done = |result: Result<(), String>, resp: RemotingCommand| match result {
            Ok(()) => resp,
            Err(remark) => error_from(resp, remark),
        };
        match req.code {
            request_code::PUT_KV_CONFIG => {
                let value = or_system_error!(req.require_str("value"), req).to_owned();
                let msg = PutKvConfig {
                    namespace,
                    key,
                    value,
                };
                self.ask(req, msg, done)
            }
            request_code::GET_KV_CONFIG => {
                let msg = GetKvConfig {
                    namespace: namespace.clone(),
                    key: key.clone(),
                };
                self.ask(req, msg, move |value, resp| match value {
                    Some(value) => resp.with_ext("value", value),
                    None => not_found(
                        resp,
                        format!("No config item, Namespace: {namespace} Key: {key}"),
                    ),
                })
            }
            _ => self.ask(req, DeleteKvConfig { namespace, key }, done),
        }
    }

    fn register_topic(&self, req: &RemotingCommand, conn: &ConnInfo) -> Handled {
        let topic = or_system_error!(req.require_str("topic"), req).to_owned();
        let queue_datas = or_system_error!(topic_queue_datas(&topic, req), req);
        let msg = RegisterTopic {
            topic,
            queue_datas,
            conn_id: Some(conn.id),
        };
        self.ask(req, msg, |(), resp| resp)
    }
}

/// Queue data of a REGISTER_TOPIC_IN_NAMESRV body. RocketMQ brokers send a `TopicRouteData` with
/// `queueDatas` (196 bytes in the trace); we also accept a broker's topic config wrapper, a
/// REGISTER_BROKER body or a bare `TopicConfig`, whose broker is the `brokerName` ext field or
/// else the master registered through the same connection.
fn topic_queue_datas(topic: &str, req: &RemotingCommand) -> Result<Vec<QueueData>, String> {
    if req.body.is_empty() {
        return Ok(Vec::new());
    }
    let value: serde_json::Value = parse_java_json(&req.body)
        .map_err(|e| format!("REGISTER_TOPIC_IN_NAMESRV body is not valid JSON: {e}"))?;
    let invalid = |e: serde_json::Error| format!("REGISTER_TOPIC_IN_NAMESRV body: {e}");
    let broker_name = req.ext("brokerName").unwrap_or_default().to_owned();
    let from_config = |c: &TopicConfig| queue_data(&broker_name, c);
    let from_wrapper = |w: TopicConfigSerializeWrapper| -> Vec<QueueData> {
        w.topic_config_table
            .get(topic)
            .map(from_config)
            .into_iter()
            .collect()
    };
    if value.get("queueDatas").is_some() {
        let route: TopicRouteData = serde_json::from_value(value).map_err(invalid)?;
        Ok(route.queue_datas)
    } else if value.get("topicConfigTable").is_some() {
        Ok(from_wrapper(
            serde_json::from_value(value).map_err(invalid)?,
        ))
    } else if value.get("topicConfigSerializeWrapper").is_some() {
        let body: RegisterBrokerBody = serde_json::from_value(value).map_err(invalid)?;
        Ok(from_wrapper(body.topic_config_serialize_wrapper))
    } else if value.get("topicName").is_some() {
        let config: TopicConfig = serde_json::from_value(value).map_err(invalid)?;
        Ok(vec![from_config(&config)])
    } else {
        Err("REGISTER_TOPIC_IN_NAMESRV body has neither queueDatas nor a topic config".to_owned())
    }
}

fn error_from(template: RemotingCommand, remark: String) -> RemotingCommand {
    let mut resp = template.with_remark(remark);
    resp.code = response_code::SYSTEM_ERROR;
    resp
}

fn not_found(template: RemotingCommand, remark: String) -> RemotingCommand {
    let mut resp = template.with_remark(remark);
    resp.code = response_code::QUERY_NOT_FOUND;
    resp
}

fn system_error(req: &RemotingCommand, remark: String) -> Handled {
    Handled::Reply(RemotingCommand::response_to(
        req,
        response_code::SYSTEM_ERROR,
        Some(remark),
    ))
}

/// A success response whose body is `value` as JSON.
fn with_json<T: Serialize>(resp: RemotingCommand, value: &T) -> RemotingCommand {
    match to_json_bytes(value) {
        Ok(body) => resp.with_body(body),
        Err(e) => error_from(resp, format!("cannot serialise the response: {e}")),
    }
}

impl Processor for NamesrvProcessor {
    fn process(&self, req: RemotingCommand, conn: &ConnInfo, _resumed: bool) -> Handled {
        match req.code {
            request_code::REGISTER_BROKER => self.register_broker(&req, conn),
            request_code::UNREGISTER_BROKER => {
                let h = or_system_error!(UnregisterBrokerRequestHeader::from_command(&req), &req);
                self.ask(&req, UnregisterBroker(h), |(), resp| resp)
            }
            request_code::GET_ROUTEINFO_BY_TOPIC => {
                let topic = or_system_error!(req.require_str("topic"), &req).to_owned();
                // As 4.9.4's name server: standard JSON (quoted broker ids) for a request of
                // version ≥ V4_9_4 (401) or with `acceptStandardJsonOnly`, else fastjson's bare
                // integer keys (DefaultRequestProcessor.getRouteInfoByTopic).
                let standard = req.version >= 401
                    || req
                        .ext("acceptStandardJsonOnly")
                        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
                self.ask(
                    &req,
                    GetRoute(topic.clone()),
                    move |route, resp| match route {
                        Some(route) if standard => match to_standard_json_bytes(&route) {
                            Ok(body) => resp.with_body(body),
                            Err(e) => error_from(resp, format!("cannot encode the route: {e}")),
                        },
                        Some(route) => with_json(resp, &route),
                        None => {
                            let mut resp = resp.with_remark(format!(
                                "No topic route info in name server for the topic: {topic}{}",
                                faq::suggest_todo(faq::APPLY_TOPIC_URL)
                            ));
                            resp.code = response_code::TOPIC_NOT_EXIST;
                            resp
                        }
                    },
                )
            }
            request_code::GET_BROKER_CLUSTER_INFO => {
                self.ask(&req, GetClusterInfo, |info, resp| with_json(resp, &info))
            }
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                self.ask(&req, GetAllTopics, |topics, resp| {
                    with_json(
                        resp,
                        &TopicList {
                            topic_list: topics,
                            broker_addr: None,
                        },
                    )
                })
            }
            request_code::REGISTER_TOPIC_IN_NAMESRV => self.register_topic(&req, conn),
            request_code::DELETE_TOPIC_IN_NAMESRV => {
                let h = or_system_error!(
                    DeleteTopicFromNamesrvRequestHeader::from_command(&req),
                    &req
                );
                let msg = DeleteTopic {
                    topic: h.topic,
                    cluster: h.cluster_name,
                };
                self.ask(&req, msg, |_, resp| resp)
            }
            code @ (request_code::WIPE_WRITE_PERM_OF_BROKER
            | request_code::ADD_WRITE_PERM_OF_BROKER) => {
                let Some(name) = req.ext("brokerName").filter(|n| !n.is_empty()) else {
                    return system_error(&req, "the request header has no brokerName".to_string());
                };
                let write = code == request_code::ADD_WRITE_PERM_OF_BROKER;
                let field = if write {
                    "addTopicCount"
                } else {
                    "wipeTopicCount"
                };
                self.ask(
                    &req,
                    SetWritePerm {
                        broker_name: name.to_string(),
                        write,
                    },
                    move |n, resp| resp.with_ext(field, n.to_string()),
                )
            }
            code @ (request_code::GET_NAMESRV_CONFIG | request_code::UPDATE_NAMESRV_CONFIG) => {
                let msg = NamesrvConfigRequest {
                    req: req.clone(),
                    peer: conn.peer.to_string(),
                    update: code == request_code::UPDATE_NAMESRV_CONFIG,
                };
                self.ask(&req, msg, |answer, _| answer)
            }
            request_code::QUERY_DATA_VERSION => self.query_data_version(&req),
            request_code::GET_TOPICS_BY_CLUSTER
            | request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS
            | request_code::GET_UNIT_TOPIC_LIST
            | request_code::GET_HAS_UNIT_SUB_TOPIC_LIST
            | request_code::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => self.topic_list_query(&req),
            request_code::PUT_KV_CONFIG
            | request_code::GET_KV_CONFIG
            | request_code::DELETE_KV_CONFIG
            | request_code::GET_KVLIST_BY_NAMESPACE => self.kv_config(&req),
            code => Handled::Reply(RemotingCommand::response_to(
                &req,
                response_code::REQUEST_CODE_NOT_SUPPORTED,
                Some(format!(" request type {code} not supported")),
            )),
        }
    }

    fn connection_closed(&self, conn: &ConnInfo) {
        // Best effort: if the mailbox is full the broker still expires on the scan.
        let _ = self.registry.try_notify(ConnectionClosed(conn.id));
    }
}

// ---------------------------------------------------------------------------------------------
// Wiring

/// A running name server.
#[derive(Clone)]
pub struct NamesrvHandle {
    /// Where it listens.
    pub local_addr: SocketAddr,
    registry: ActorRef<RouteRegistry>,
    accept: tokio::task::AbortHandle,
}

impl NamesrvHandle {
    /// `host:port` to hand to brokers and clients.
    pub fn addr(&self) -> String {
        self.local_addr.to_string()
    }

    pub fn registry(&self) -> &ActorRef<RouteRegistry> {
        &self.registry
    }

    /// The route clients would get for `topic` (`None` ⇒ they would get TOPIC_NOT_EXIST).
    pub async fn route(&self, topic: &str) -> Option<TopicRouteData> {
        self.registry
            .send(GetRoute(topic.to_owned()))
            .await
            .ok()
            .flatten()
    }

    pub async fn cluster_info(&self) -> Option<ClusterInfo> {
        self.registry.send(GetClusterInfo).await.ok()
    }

    /// Stops accepting connections. Open connections keep being served until they close (or
    /// the actix system stops).
    pub fn stop_accepting(&self) {
        self.accept.abort();
    }
}

/// How a name server is started: RocketMQ's expiry timings and where its files are.
#[derive(Clone, Debug)]
pub struct NamesrvOptions {
    /// How often expired brokers are looked for ([`DEFAULT_SCAN_INTERVAL`]).
    pub scan_interval: Duration,
    /// A broker not registered again within it is removed ([`DEFAULT_BROKER_EXPIRY`]).
    pub expiry: Duration,
    /// RocketMQ's `${user.home}`: `kvConfigPath` and `configStorePath` default to
    /// `<home>/namesrv/kvConfig.json` and `<home>/namesrv/namesrv.properties`. `None`: `$HOME`.
    pub home: Option<PathBuf>,
    /// A RocketMQ name server `-c` file (Java properties): its keys are applied over the
    /// defaults and it becomes `configStorePath`, as `NamesrvStartup` does.
    pub config_file: Option<PathBuf>,
}

impl Default for NamesrvOptions {
    fn default() -> Self {
        NamesrvOptions {
            scan_interval: DEFAULT_SCAN_INTERVAL,
            expiry: DEFAULT_BROKER_EXPIRY,
            home: None,
            config_file: None,
        }
    }
}

/// The configuration a name server listening on `listen_port` starts with under `opts`.
pub fn namesrv_config(opts: &NamesrvOptions, listen_port: u16) -> anyhow::Result<NamesrvConfig> {
    let mut config = match &opts.home {
        Some(home) => NamesrvConfig::with_home(listen_port, home),
        None => NamesrvConfig::new(listen_port),
    };
    if let Some(file) = &opts.config_file {
        let text = std::fs::read_to_string(file).map_err(|e| {
            anyhow::anyhow!("cannot read the name server config {}: {e}", file.display())
        })?;
        config.update(&text);
        config.set("configStorePath", &file.display().to_string());
    }
    // What the name server really listens on, whatever the file said.
    config.set("listenPort", &listen_port.to_string());
    Ok(config)
}

/// Starts a name server on the current actix system: its configuration from `opts`, the KV
/// table loaded from `kvConfigPath`, the [`RouteRegistry`] on the current arbiter (its handlers
/// are map updates, and a file write after a KV change or a configuration update) and the
/// accept loop on `listener`. Fails, before listening, on an unreadable `-c` file or a KV file
/// that neither it nor its `.bak` can be read from.
pub async fn start_namesrv(
    listener: tokio::net::TcpListener,
    opts: NamesrvOptions,
) -> anyhow::Result<NamesrvHandle> {
    let local_addr = listener.local_addr()?;
    let config = namesrv_config(&opts, local_addr.port())?;
    let kv_path = config.kv_config_path();
    let kv = KvConfigTable::load(&kv_path)
        .map_err(|e| anyhow::anyhow!("cannot load the KV config table: {e}"))?;
    let registry = start_on(
        None,
        RouteRegistry::with_config(opts.scan_interval, opts.expiry, config, kv),
    );
    let processor: Rc<dyn Processor> = Rc::new(NamesrvProcessor::new(registry.clone()));
    let accept = actix_rt::spawn(serve(listener, processor)).abort_handle();
    tracing::info!(addr = %local_addr, kv_config = %kv_path.display(), "name server listening");
    Ok(NamesrvHandle {
        local_addr,
        registry,
        accept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn header(name: &str, addr: &str, id: i64) -> RegisterBrokerRequestHeader {
        RegisterBrokerRequestHeader {
            broker_name: name.into(),
            broker_addr: addr.into(),
            cluster_name: "C".into(),
            ha_server_addr: format!("{addr}-ha"),
            broker_id: id,
            ..Default::default()
        }
    }

    fn body(topics: &[(&str, i32)], counter: i64) -> RegisterBrokerBody {
        let mut table = BTreeMap::new();
        for (t, q) in topics {
            table.insert(
                (*t).to_owned(),
                TopicConfig {
                    topic_name: (*t).to_owned(),
                    read_queue_nums: *q,
                    write_queue_nums: *q,
                    ..TopicConfig::default()
                },
            );
        }
        RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: table,
                data_version: DataVersion {
                    timestamp: 1,
                    counter,
                    state_version: None,
                },
            },
            filter_server_list: vec![],
        }
    }

    fn reg(r: &mut RouteRegistry, name: &str, addr: &str, id: i64, b: RegisterBrokerBody) {
        r.register_broker(
            RegisterBroker {
                header: header(name, addr, id),
                body: b,
                conn_id: Some(7),
            },
            Instant::now(),
        );
    }

    #[test]
    fn queue_data_only_changes_with_the_data_version() {
        let mut r = RouteRegistry::new(DEFAULT_SCAN_INTERVAL, DEFAULT_BROKER_EXPIRY);
        reg(&mut r, "b", "a:1", 0, body(&[("T", 4)], 1));
        reg(&mut r, "b", "a:1", 0, body(&[("T", 8)], 1));
        assert_eq!(r.route("T").unwrap().queue_datas[0].read_queue_nums, 4);
        reg(&mut r, "b", "a:1", 0, body(&[("T", 8)], 2));
        assert_eq!(r.route("T").unwrap().queue_datas[0].read_queue_nums, 8);
    }

    #[test]
    fn an_address_moving_to_another_id_leaves_its_old_id() {
        let mut r = RouteRegistry::new(DEFAULT_SCAN_INTERVAL, DEFAULT_BROKER_EXPIRY);
        reg(&mut r, "b", "s:1", 1, body(&[], 0));
        reg(&mut r, "b", "s:1", 0, body(&[("T", 2)], 1));
        let route = r.route("T").unwrap();
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, "s:1".to_owned())])
        );
    }

    #[test]
    fn expiry_drops_the_broker_and_its_topics() {
        let mut r = RouteRegistry::new(DEFAULT_SCAN_INTERVAL, Duration::from_millis(10));
        reg(&mut r, "b", "a:1", 0, body(&[("T", 2)], 1));
        r.scan_expired(Instant::now() + Duration::from_millis(50));
        assert!(r.route("T").is_none());
        assert!(r.cluster_info().cluster_addr_table.is_empty());
        assert!(r.broker_live_table.is_empty());
    }
}
