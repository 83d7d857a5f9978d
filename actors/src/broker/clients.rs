//! `ClientRegistry` — the producers and consumers connected to this broker (RocketMQ's
//! ProducerManager, ConsumerManager and RebalanceLockManager).
//!
//! In (declared in [`super::messages`], with who sends them): [`Heartbeat`],
//! [`UnregisterClient`], [`ConnectionClosed`], [`GetConsumerList`], [`LockBatch`],
//! [`UnlockBatch`], [`GetConnections`], [`GetGroupConnection`], [`GetProducerConnection`],
//! [`GetAllProducers`], [`PushToGroup`], [`ConsumerVersions`], [`FindConsumer`],
//! [`GroupConsumers`], [`FindClient`], and a 10 s scan that drops clients silent for more than
//! 120 s. Out: replies (the connection of a consumer or requester that the broker forwards a
//! request to); NOTIFY_CONSUMER_IDS_CHANGED
//! pushed to every client of a consumer group whose membership changed; a published
//! [`SubscriptionView`] that pulls read lock-free to filter by the subscription a consumer
//! registered in its heartbeat.
//!
//! Invariant: an ordered-consumption lock on a queue belongs to at most one client of a group and
//! expires 60 s after its last renewal.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actormq_core::protocol::admin::{
    Connection as ClientConnection, ConsumerConnection, ProducerConnection, ProducerInfo,
};
use actormq_core::protocol::body::{
    ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue, SubscriptionData,
};
use actormq_core::protocol::codes::request_code;
use actormq_core::protocol::command::RemotingCommand;
use arc_swap::ArcSwap;

use super::messages::{
    ClientChannel, ClientInfo, ConnectionClosed, ConsumerVersions, FindClient, FindConsumer,
    GetAllProducers, GetConnections, GetConsumerList, GetGroupConnection, GetProducerConnection,
    GroupConsumers, Heartbeat, LockBatch, PushToGroup, UnlockBatch, UnregisterClient,
};
use crate::metered::{ActorRef, Metered, Reply, Serve, Service};
use crate::remoting::server::{Connection, Push};

pub const CLIENT_EXPIRY: Duration = Duration::from_secs(120);
pub const LOCK_EXPIRY: Duration = Duration::from_secs(60);

type SubTable = HashMap<String, HashMap<String, SubscriptionData>>;

/// group → topic → subscription, as the consumers last registered it.
#[derive(Clone, Default)]
pub struct SubscriptionView(Arc<ArcSwap<SubTable>>);

impl SubscriptionView {
    pub fn get(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.0.load().get(group)?.get(topic).cloned()
    }

    /// The groups with an online consumer subscribed to `topic` (RocketMQ's
    /// `ConsumerManager.queryTopicConsumeByWho`).
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        self.0
            .load()
            .iter()
            .filter(|(_, subs)| subs.contains_key(topic))
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// Whether `group` has an online consumer with any subscription.
    pub fn has_group(&self, group: &str) -> bool {
        self.0.load().get(group).is_some_and(|s| !s.is_empty())
    }
}

#[derive(Clone)]
struct Channel {
    conn_id: u64,
    conn: ActorRef<Connection>,
    addr: String,
    /// `LanguageCode` name and `MQVersion` ordinal from the heartbeat (admin listings).
    language: &'static str,
    version: i32,
    last_update: Instant,
}

#[derive(Default)]
struct ConsumerGroup {
    clients: HashMap<String, Channel>,
    subscriptions: HashMap<String, SubscriptionData>,
    consume_type: ConsumeType,
    message_model: MessageModel,
    consume_from_where: ConsumeFromWhere,
}

#[derive(Default)]
pub struct ClientRegistry {
    consumers: HashMap<String, ConsumerGroup>,
    producers: HashMap<String, HashMap<String, Channel>>,
    locks: HashMap<(String, MqKey), (String, Instant)>,
    view: SubscriptionView,
}

type MqKey = (String, String, i32);

fn mq_key(mq: &MessageQueue) -> MqKey {
    (mq.topic.clone(), mq.broker_name.clone(), mq.queue_id)
}

impl ClientRegistry {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn view(&self) -> SubscriptionView {
        self.view.clone()
    }

    fn publish(&self) {
        let table: SubTable = self
            .consumers
            .iter()
            .map(|(g, c)| (g.clone(), c.subscriptions.clone()))
            .collect();
        self.view.0.store(Arc::new(table));
    }

    fn notify_group(&self, group: &str) {
        let Some(g) = self.consumers.get(group) else {
            return;
        };
        for ch in g.clients.values() {
            let cmd = RemotingCommand::new_request(request_code::NOTIFY_CONSUMER_IDS_CHANGED)
                .with_ext("consumerGroup", group)
                .with_oneway();
            // A full mailbox drops the hint; consumers also rebalance on their own every 20 s.
            ch.conn.try_notify(Push(cmd));
        }
    }

    fn remove_where(&mut self, pred: impl Fn(&str, &Channel) -> bool) {
        let mut changed = Vec::new();
        for (group, g) in self.consumers.iter_mut() {
            let before = g.clients.len();
            g.clients.retain(|id, ch| !pred(id, ch));
            if g.clients.len() != before {
                changed.push(group.clone());
            }
        }
        self.consumers.retain(|_, g| !g.clients.is_empty());
        for p in self.producers.values_mut() {
            p.retain(|id, ch| !pred(id, ch));
        }
        self.producers.retain(|_, p| !p.is_empty());
        if !changed.is_empty() {
            self.publish();
            for g in changed {
                self.notify_group(&g);
            }
        }
    }
}

impl Service for ClientRegistry {
    const NAME: &'static str = "client_registry";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(Duration::from_secs(10), |act, _| {
            let now = Instant::now();
            act.inner
                .remove_where(|_, ch| now.duration_since(ch.last_update) > CLIENT_EXPIRY);
            act.inner
                .locks
                .retain(|_, (_, t)| now.duration_since(*t) <= LOCK_EXPIRY);
        });
    }
}

impl Serve<Heartbeat> for ClientRegistry {
    type Reply = Reply<Heartbeat>;
    fn serve(&mut self, m: Heartbeat, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let now = Instant::now();
        let ch = Channel {
            conn_id: m.conn_id,
            conn: m.conn,
            addr: m.addr,
            language: m.language,
            version: m.version,
            last_update: now,
        };
        let client_id = m.data.client_id.clone();
        for p in &m.data.producer_data_set {
            self.producers
                .entry(p.group_name.clone())
                .or_default()
                .insert(client_id.clone(), ch.clone());
        }
        let mut sub_changed = false;
        let mut members_changed = Vec::new();
        for c in m.data.consumer_data_set {
            let g = self.consumers.entry(c.group_name.clone()).or_default();
            if g.clients.insert(client_id.clone(), ch.clone()).is_none() {
                members_changed.push(c.group_name.clone());
            }
            g.consume_type = c.consume_type;
            g.message_model = c.message_model;
            g.consume_from_where = c.consume_from_where;
            for s in c.subscription_data_set {
                // Only a newer subscription replaces the one held (RocketMQ's
                // `updateSubscription`): in a rolling change of a group's tags, an instance
                // still on the old tags must not put them back, or the broker would filter the
                // new instances' pulls by them and their messages would be skipped.
                let newer = g
                    .subscriptions
                    .get(&s.topic)
                    .is_none_or(|old| s.sub_version > old.sub_version);
                if newer {
                    g.subscriptions.insert(s.topic.clone(), s);
                    sub_changed = true;
                }
            }
        }
        if sub_changed || !members_changed.is_empty() {
            self.publish();
        }
        for g in members_changed {
            self.notify_group(&g);
        }
        MessageResult(sub_changed)
    }
}

impl Serve<UnregisterClient> for ClientRegistry {
    type Reply = ();
    fn serve(&mut self, m: UnregisterClient, _: &mut Context<Metered<Self>>) {
        if let Some(pg) = &m.producer_group {
            if let Some(p) = self.producers.get_mut(pg) {
                p.remove(&m.client_id);
            }
        }
        if let Some(cg) = &m.consumer_group {
            let removed = self
                .consumers
                .get_mut(cg)
                .is_some_and(|g| g.clients.remove(&m.client_id).is_some());
            if self.consumers.get(cg).is_some_and(|g| g.clients.is_empty()) {
                self.consumers.remove(cg);
            }
            if removed {
                self.publish();
                self.notify_group(cg);
            }
        }
    }
}

impl Serve<ConnectionClosed> for ClientRegistry {
    type Reply = ();
    fn serve(&mut self, m: ConnectionClosed, _: &mut Context<Metered<Self>>) {
        self.remove_where(|_, ch| ch.conn_id == m.0);
    }
}

impl Serve<GetConsumerList> for ClientRegistry {
    type Reply = Reply<GetConsumerList>;
    fn serve(&mut self, m: GetConsumerList, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let mut ids: Vec<String> = self
            .consumers
            .get(&m.0)
            .map(|g| g.clients.keys().cloned().collect())
            .unwrap_or_default();
        ids.sort();
        MessageResult(ids)
    }
}

impl Serve<LockBatch> for ClientRegistry {
    type Reply = Reply<LockBatch>;
    fn serve(&mut self, m: LockBatch, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let now = Instant::now();
        let mut ok = Vec::new();
        for mq in m.mqs {
            let key = (m.group.clone(), mq_key(&mq));
            let free = match self.locks.get(&key) {
                None => true,
                Some((owner, t)) => *owner == m.client_id || now.duration_since(*t) > LOCK_EXPIRY,
            };
            if free {
                self.locks.insert(key, (m.client_id.clone(), now));
                ok.push(mq);
            }
        }
        MessageResult(ok)
    }
}

impl Serve<UnlockBatch> for ClientRegistry {
    type Reply = ();
    fn serve(&mut self, m: UnlockBatch, _: &mut Context<Metered<Self>>) {
        for mq in m.mqs {
            let key = (m.group.clone(), mq_key(&mq));
            if self
                .locks
                .get(&key)
                .is_some_and(|(owner, _)| *owner == m.client_id)
            {
                self.locks.remove(&key);
            }
        }
    }
}

impl Serve<GetConnections> for ClientRegistry {
    type Reply = Reply<GetConnections>;
    fn serve(&mut self, _: GetConnections, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let mut out = Vec::new();
        for (group, g) in &self.consumers {
            for (id, ch) in &g.clients {
                out.push(ClientInfo {
                    client_id: id.clone(),
                    group: group.clone(),
                    addr: ch.addr.clone(),
                    is_consumer: true,
                });
            }
        }
        for (group, p) in &self.producers {
            for (id, ch) in p {
                out.push(ClientInfo {
                    client_id: id.clone(),
                    group: group.clone(),
                    addr: ch.addr.clone(),
                    is_consumer: false,
                });
            }
        }
        MessageResult(out)
    }
}

/// A group's clients as admin bodies list them, by client id.
fn connection_set(clients: &HashMap<String, Channel>) -> Vec<ClientConnection> {
    let mut set: Vec<ClientConnection> = clients
        .iter()
        .map(|(id, ch)| ClientConnection {
            client_addr: ch.addr.clone(),
            client_id: id.clone(),
            language: ch.language.to_string(),
            version: ch.version,
        })
        .collect();
    set.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    set
}

impl Serve<GetGroupConnection> for ClientRegistry {
    type Reply = Reply<GetGroupConnection>;
    fn serve(&mut self, m: GetGroupConnection, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let out = self.consumers.get(&m.0).map(|g| ConsumerConnection {
            connection_set: connection_set(&g.clients),
            consume_from_where: g.consume_from_where,
            consume_type: g.consume_type,
            message_model: g.message_model,
            subscription_table: g
                .subscriptions
                .iter()
                .map(|(t, s)| (t.clone(), s.clone()))
                .collect(),
        });
        MessageResult(out)
    }
}

impl Serve<GetProducerConnection> for ClientRegistry {
    type Reply = Reply<GetProducerConnection>;
    fn serve(&mut self, m: GetProducerConnection, _: &mut Context<Metered<Self>>) -> Self::Reply {
        // A group whose last client unregistered stays until the sweep: not online either.
        let out = self
            .producers
            .get(&m.0)
            .filter(|p| !p.is_empty())
            .map(|p| ProducerConnection {
                connection_set: connection_set(p),
            });
        MessageResult(out)
    }
}

impl Serve<GetAllProducers> for ClientRegistry {
    type Reply = Reply<GetAllProducers>;
    fn serve(&mut self, m: GetAllProducers, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let now = Instant::now();
        let mut out = BTreeMap::new();
        for (group, clients) in &self.producers {
            let mut list: Vec<ProducerInfo> = clients
                .iter()
                .map(|(id, ch)| {
                    let age = now.saturating_duration_since(ch.last_update).as_millis();
                    ProducerInfo {
                        client_id: id.clone(),
                        language: ch.language.to_string(),
                        last_update_timestamp: m
                            .now_ms
                            .saturating_sub(i64::try_from(age).unwrap_or(i64::MAX)),
                        remote_ip: format!("/{}", ch.addr),
                        version: ch.version,
                    }
                })
                .collect();
            if list.is_empty() {
                continue;
            }
            list.sort_by(|a, b| a.client_id.cmp(&b.client_id));
            out.insert(group.clone(), list);
        }
        MessageResult(out)
    }
}

impl Serve<PushToGroup> for ClientRegistry {
    type Reply = Reply<PushToGroup>;
    fn serve(&mut self, m: PushToGroup, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let mut n = 0;
        if let Some(g) = self.consumers.get(&m.group) {
            for ch in g.clients.values() {
                if ch.conn.try_notify(Push(m.cmd.clone())) {
                    n += 1;
                }
            }
        }
        MessageResult(n)
    }
}

impl Serve<ConsumerVersions> for ClientRegistry {
    type Reply = Reply<ConsumerVersions>;
    fn serve(&mut self, m: ConsumerVersions, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let versions = self.consumers.get(&m.group).map_or_else(Vec::new, |g| {
            g.clients.values().map(|ch| ch.version).collect()
        });
        MessageResult(versions)
    }
}

impl Serve<FindConsumer> for ClientRegistry {
    type Reply = Reply<FindConsumer>;
    fn serve(&mut self, m: FindConsumer, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let ch = self
            .consumers
            .get(&m.group)
            .and_then(|g| g.clients.get(&m.client_id))
            .map(|ch| ClientChannel {
                conn: ch.conn.clone(),
                version: ch.version,
                addr: ch.addr.clone(),
            });
        MessageResult(ch)
    }
}

impl Serve<GroupConsumers> for ClientRegistry {
    type Reply = Reply<GroupConsumers>;
    fn serve(&mut self, m: GroupConsumers, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let mut all: Vec<(String, ClientChannel)> =
            self.consumers.get(&m.0).map_or_else(Vec::new, |g| {
                g.clients
                    .iter()
                    .map(|(id, ch)| {
                        let ch = ClientChannel {
                            conn: ch.conn.clone(),
                            version: ch.version,
                            addr: ch.addr.clone(),
                        };
                        (id.clone(), ch)
                    })
                    .collect()
            });
        all.sort_by(|a, b| a.0.cmp(&b.0));
        MessageResult(all)
    }
}

impl Serve<FindClient> for ClientRegistry {
    type Reply = Reply<FindClient>;
    fn serve(&mut self, m: FindClient, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let ch = self
            .producers
            .values()
            .filter_map(|p| p.get(&m.0))
            .max_by_key(|ch| ch.last_update)
            .map(|ch| ClientChannel {
                conn: ch.conn.clone(),
                version: ch.version,
                addr: ch.addr.clone(),
            });
        MessageResult(ch)
    }
}
