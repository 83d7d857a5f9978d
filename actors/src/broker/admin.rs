//! The admin request codes (RocketMQ's AdminBrokerProcessor parts that mqadmin, the Dashboard
//! and `actormq admin` use): GET_CONSUME_STATS (208), GET_TOPIC_STATS_INFO (202),
//! GET_CONSUMER_CONNECTION_LIST (203), DELETE_TOPIC_IN_BROKER (215),
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25),
//! INVOKE_BROKER_TO_RESET_OFFSET (222), DELETE_EXPIRED_COMMITLOG (329; not TRIGGER_DELETE_FILES 27,
//! which RocketMQ 4.9.4 refuses as unsupported), GET_PRODUCER_CONNECTION_LIST (204),
//! GET_ALL_PRODUCER_INFO (328), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305),
//! QUERY_TOPIC_CONSUME_BY_WHO (300), GET_BROKER_CONSUME_STATS (317), VIEW_BROKER_STATS_DATA (315),
//! and GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45) (the tables a slave copies);
//! it also routes the codes of [`super::admin_store`] and [`super::client_call`].
//!
//! The TPS figures come from [`super::rates`], merged over the connection threads; the
//! configuration from [`super::live_config`]. UPDATE_AND_CREATE_TOPIC (17) is answered here too.
//!
//! Invariants: see [`super::live_config::LiveConfig`] for updates. A reset moves the stored offsets before the
//! online consumers are told, so a consumer that misses the push still restarts from the new
//! offsets.

use std::collections::BTreeMap;
use std::rc::Rc;

use actormq_core::config::print_config_items;
use actormq_core::meta::{self, SubscriptionGroupConfig, TopicConfig};
use actormq_core::offset::QueueOffset;
use actormq_core::protocol::admin::{
    ConsumeStats, ConsumeStatsList, GroupList, OffsetWrapper, ProducerTableInfo, ResetOffsetBody,
    TopicOffset, TopicStatsTable,
};
use actormq_core::protocol::body::{parse_java_json, MessageQueue, TopicList};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use actormq_core::protocol::version::{version_desc, V3_0_7_SNAPSHOT};
use actormq_core::store::validate::{check_topic_name, FORBIDDEN_TOPICS};

use super::context::{header_or_reply, later, ok, reply, BrokerCore};
/// Where `updateBrokerConfig` keeps its keys (the binary reads it at startup).
pub use super::live_config::RUNTIME_FILE;
use super::messages;
use crate::remoting::server::Handled;

/// The request codes [`BrokerCore::admin`] answers.
pub const ADMIN_CODES: &[i32] = &[
    rq::GET_CONSUME_STATS,
    rq::GET_TOPIC_STATS_INFO,
    rq::GET_CONSUMER_CONNECTION_LIST,
    rq::DELETE_TOPIC_IN_BROKER,
    rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    rq::GET_BROKER_CONFIG,
    rq::UPDATE_BROKER_CONFIG,
    rq::INVOKE_BROKER_TO_RESET_OFFSET,
    rq::DELETE_EXPIRED_COMMITLOG,
    rq::GET_PRODUCER_CONNECTION_LIST,
    rq::GET_ALL_PRODUCER_INFO,
    rq::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    rq::QUERY_TOPIC_CONSUME_BY_WHO,
    rq::GET_BROKER_CONSUME_STATS,
    rq::GET_ALL_CONSUMER_OFFSET,
    rq::GET_ALL_DELAY_OFFSET,
    rq::VIEW_BROKER_STATS_DATA,
    // super::admin_store
    rq::DELETE_SUBSCRIPTIONGROUP,
    rq::CLEAN_EXPIRED_CONSUMEQUEUE,
    rq::CLEAN_UNUSED_TOPIC,
    rq::QUERY_CONSUME_QUEUE,
    // super::client_call
    rq::GET_CONSUMER_RUNNING_INFO,
    rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
    // ACL administration, refused: access control is not enabled (issue #37)
    rq::UPDATE_AND_CREATE_ACL_CONFIG,
    rq::DELETE_ACL_CONFIG,
    rq::GET_BROKER_CLUSTER_ACL_INFO,
    rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    rq::GET_BROKER_CLUSTER_ACL_CONFIG,
];

/// The answer to an ACL administration request on a broker without access control: the failure
/// code 4.9.4 answers with `aclEnable=false` (AdminBrokerProcessor: 209, 210, 211 for the
/// updates; SYSTEM_ERROR for the reads, which 4.9.4 leaves unanswered), with a remark that says
/// why instead of Java's NullPointerException text.
fn acl_disabled(req: &RemotingCommand) -> RemotingCommand {
    let code = match req.code {
        rq::UPDATE_AND_CREATE_ACL_CONFIG => rc::UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
        rq::DELETE_ACL_CONFIG => rc::DELETE_ACL_CONFIG_FAILED,
        rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => rc::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
        _ => rc::SYSTEM_ERROR,
    };
    reply(
        req,
        code,
        "access control is not enabled on this broker (aclEnable=false)",
    )
}

/// RocketMQ 4.9.4 configuration keys that ActorMQ has no setting for, with the value that
/// describes what ActorMQ does. GET_BROKER_CONFIG lists them because mqadmin's exportConfigs
/// (4.9.4 tools/.../command/export/ExportConfigsCommand.needBrokerProprties) copies each into a
/// `Properties`, which throws on a missing one.
pub const FIXED_CONFIG_ITEMS: &[(&str, &str)] = &[
    // No filter servers are started (4.9.4 BrokerConfig default 0).
    ("filterServerNums", "0"),
    // The name clients trace to by default; ActorMQ creates no trace topic itself.
    ("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC"),
    // Every send reply carries TRACE_ON=true (send.rs, reply.rs).
    ("traceOn", "true"),
    // 4.9.4 would create the trace topic at start; ActorMQ never does.
    ("traceTopicEnable", "false"),
    // The broker's outgoing connections (name servers, master) are plain TCP.
    ("useTLS", "false"),
];

/// [`FIXED_CONFIG_ITEMS`] not already in `listed` (a `key=value` text), as `key=value` lines
/// under their own heading.
fn fixed_config_items(listed: &str) -> String {
    let present = |k: &str| {
        listed
            .lines()
            .any(|l| l.split_once('=').is_some_and(|(lk, _)| lk == k))
    };
    let mut out = String::new();
    for (k, v) in FIXED_CONFIG_ITEMS.iter().filter(|(k, _)| !present(k)) {
        if out.is_empty() {
            out.push_str("\n# Fixed in ActorMQ\n");
        }
        out.push_str(&format!("{k}={v}\n"));
    }
    out
}

/// RocketMQ 4.9.4's system topic set as a broker answers GET_SYSTEM_TOPIC_LIST_FROM_BROKER:
/// common/.../topic/TopicValidator's fixed set plus what broker/.../topic/TopicConfigManager adds
/// at start (the cluster name, the broker name and the cluster's reply topic). Sorted.
pub fn system_topic_list(cluster: &str, broker_name: &str) -> Vec<String> {
    let mut out: Vec<String> = actormq_core::store::validate::SYSTEM_TOPICS
        .iter()
        .map(|t| t.to_string())
        .collect();
    out.extend([
        cluster.to_string(),
        broker_name.to_string(),
        format!("{cluster}_REPLY_TOPIC"),
    ]);
    out.sort();
    out.dedup();
    out
}

// ---------------------------------------------------------------------------------------------
// Handlers

fn mq(topic: &str, broker: &str, queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.to_string(),
        broker_name: broker.to_string(),
        queue_id,
    }
}

impl BrokerCore {
    /// Answers one of [`ADMIN_CODES`].
    pub fn admin(self: &Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        match req.code {
            rq::GET_CONSUME_STATS => self.clone().consume_stats(req),
            rq::GET_TOPIC_STATS_INFO => self.clone().topic_stats(req),
            rq::GET_CONSUMER_CONNECTION_LIST => self.consumer_connection(req),
            rq::DELETE_TOPIC_IN_BROKER => self.clone().delete_topic(req, peer),
            rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => self.update_group(req),
            rq::GET_BROKER_CONFIG => self.get_config(req),
            rq::UPDATE_BROKER_CONFIG => self.update_config(req, peer),
            rq::INVOKE_BROKER_TO_RESET_OFFSET => self.clone().reset_offset(req, peer),
            rq::DELETE_EXPIRED_COMMITLOG => self.trigger_delete_files(req, peer),
            rq::DELETE_SUBSCRIPTIONGROUP => self.clone().delete_group(req, peer),
            rq::CLEAN_EXPIRED_CONSUMEQUEUE => self.clone().clean_expired_cq(req, peer),
            rq::CLEAN_UNUSED_TOPIC => self.clone().clean_unused_topics(req, peer),
            rq::QUERY_CONSUME_QUEUE => self.query_consume_queue(req),
            rq::GET_CONSUMER_RUNNING_INFO => self.clone().consumer_running_info(req),
            rq::INVOKE_BROKER_TO_GET_CONSUMER_STATUS => self.clone().consumer_status(req),
            rq::UPDATE_AND_CREATE_ACL_CONFIG
            | rq::DELETE_ACL_CONFIG
            | rq::GET_BROKER_CLUSTER_ACL_INFO
            | rq::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
            | rq::GET_BROKER_CLUSTER_ACL_CONFIG => Handled::Reply(acl_disabled(&req)),
            rq::GET_PRODUCER_CONNECTION_LIST => self.producer_connection(req),
            rq::GET_ALL_PRODUCER_INFO => self.all_producers(req),
            rq::GET_SYSTEM_TOPIC_LIST_FROM_BROKER => self.system_topics(req),
            rq::QUERY_TOPIC_CONSUME_BY_WHO => self.topic_consumed_by(req),
            rq::GET_BROKER_CONSUME_STATS => self.clone().broker_consume_stats(req),
            rq::VIEW_BROKER_STATS_DATA => self.view_broker_stats(req),
            rq::GET_ALL_CONSUMER_OFFSET => self.all_consumer_offsets(req),
            rq::GET_ALL_DELAY_OFFSET => self.all_delay_offsets(req),
            code => Handled::Reply(reply(
                &req,
                rc::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            )),
        }
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_BROKER.
    fn system_topics(&self, req: RemotingCommand) -> Handled {
        let s = self.settings.load();
        let body = TopicList {
            broker_addr: None,
            topic_list: system_topic_list(&s.cluster, &s.broker_name),
        };
        Handled::Reply(match serde_json::to_vec(&body) {
            Ok(b) => ok(&req).with_body(b),
            Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
        })
    }

    /// VIEW_BROKER_STATS_DATA: one stats item, merged over the connection threads.
    fn view_broker_stats(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(ViewBrokerStatsDataRequestHeader, req);
        let cluster = self.settings.load().cluster.clone();
        let rates = self.all_rates.clone();
        later(async move {
            match rates.stats(&h.stats_name, &h.stats_key, &cluster).await {
                Some(d) => match serde_json::to_vec(&d) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                },
                None => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("The stats <{}> <{}> not exist", h.stats_name, h.stats_key),
                ),
            }
        })
    }

    /// GET_ALL_CONSUMER_OFFSET: what a slave copies from its master (RocketMQ's
    /// SlaveSynchronize), the table as its config file holds it.
    fn all_consumer_offsets(&self, req: RemotingCommand) -> Handled {
        let meta = self.meta.clone();
        later(async move {
            match meta.send(messages::GetOffsets).await {
                Ok(o) => ok(&req).with_body(meta::to_json(&o).into_bytes()),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// GET_ALL_DELAY_OFFSET: the delayed-delivery progress a slave copies, as its file holds it.
    fn all_delay_offsets(&self, req: RemotingCommand) -> Handled {
        let store = self.store.clone();
        later(async move {
            match store.delay_offsets().await {
                Some(d) => ok(&req).with_body(d.to_json().into_bytes()),
                None => reply(&req, rc::SYSTEM_ERROR, "No delay offset in this broker"),
            }
        })
    }

    fn consume_stats(self: Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumeStatsRequestHeader, req);
        later(async move {
            let offsets = match self.meta.send(messages::GetOffsets).await {
                Ok(o) => o,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            let group = h.consumer_group.as_str();
            let mut topics: Vec<String> = match h.topic.as_deref().filter(|t| !t.is_empty()) {
                Some(t) => vec![t.to_string()],
                None => offsets
                    .offset_table
                    .keys()
                    .filter_map(|k| k.rsplit_once('@'))
                    .filter(|(_, g)| *g == group)
                    .map(|(t, _)| t.to_string())
                    .collect(),
            };
            // As in RocketMQ: a group with online subscriptions reports only those topics.
            let subscribed: Vec<String> = match self
                .clients
                .send(messages::GetGroupConnection(group.to_string()))
                .await
            {
                Ok(Some(c)) => c.subscription_table.into_keys().collect(),
                _ => Vec::new(),
            };
            if !subscribed.is_empty() {
                topics.retain(|t| subscribed.contains(t));
                if h.topic.is_none() {
                    for t in subscribed {
                        if !topics.contains(&t) {
                            topics.push(t);
                        }
                    }
                }
            }
            topics.sort();
            let broker = self.settings.load().broker_name.clone();
            let mut stats = ConsumeStats::default();
            let mut counted = Vec::new();
            for topic in &topics {
                let Some(tc) = self.meta_view.topic(topic) else {
                    continue;
                };
                for q in 0..tc.read_queue_nums as i32 {
                    let o = self.offset_wrapper(&offsets, group, topic, q);
                    stats.offset_table.push((mq(topic, &broker, q), o));
                }
                counted.push((group.to_string(), topic.clone()));
            }
            for tps in self.all_rates.group_get_tps(counted).await {
                stats.consume_tps += tps;
            }
            ok(&req).with_body(stats.to_java_json().into_bytes())
        })
    }

    fn topic_stats(self: Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetTopicStatsInfoRequestHeader, req);
        let Some(tc) = self.meta_view.topic(&h.topic) else {
            return Handled::Reply(reply(
                &req,
                rc::TOPIC_NOT_EXIST,
                format!("topic[{}] not exist", h.topic),
            ));
        };
        let broker = self.settings.load().broker_name.clone();
        let queues = tc.read_queue_nums.max(tc.write_queue_nums) as i32;
        let mut t = TopicStatsTable::default();
        for q in 0..queues {
            let min = self.reader.min_offset(&h.topic, q).0 as i64;
            let max = self.reader.max_offset(&h.topic, q).0 as i64;
            let last = if max > 0 {
                self.reader
                    .store_time_at_queue_offset(&h.topic, q, QueueOffset(max as u64 - 1))
                    .unwrap_or(0)
            } else {
                0
            };
            t.offset_table.push((
                mq(&h.topic, &broker, q),
                TopicOffset {
                    last_update_timestamp: last,
                    max_offset: max,
                    min_offset: min,
                },
            ));
        }
        later(async move {
            t.topic_put_tps = self.all_rates.topic_put_tps(&h.topic).await;
            ok(&req).with_body(t.to_java_json().into_bytes())
        })
    }

    /// One queue of a group as GET_CONSUME_STATS reports it: the broker's and the group's
    /// offsets and the store time of the last message the group consumed.
    fn offset_wrapper(
        &self,
        offsets: &meta::ConsumerOffsets,
        group: &str,
        topic: &str,
        q: i32,
    ) -> OffsetWrapper {
        let broker_offset = self.reader.max_offset(topic, q).0 as i64;
        let consumer_offset = offsets.get(topic, group, q).unwrap_or(0).max(0);
        let last_timestamp = match consumer_offset {
            0 => 0,
            c => self
                .reader
                .store_time_at_queue_offset(topic, q, QueueOffset(c as u64 - 1))
                .unwrap_or(0),
        };
        OffsetWrapper {
            broker_offset,
            consumer_offset,
            last_timestamp,
            pull_offset: consumer_offset,
        }
    }

    fn producer_connection(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetProducerConnectionListRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            match clients
                .send(messages::GetProducerConnection(h.producer_group.clone()))
                .await
            {
                Ok(Some(p)) => match serde_json::to_vec(&p) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                },
                // RocketMQ's code and words for a group with no online producer.
                Ok(None) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("the producer group[{}] not exist", h.producer_group),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// Every producer connection by group (`mqadmin producer`), as 4.9.4's
    /// AdminBrokerProcessor.getAllProducerInfo: SUCCESS with an empty table when none is online.
    fn all_producers(&self, req: RemotingCommand) -> Handled {
        let clients = self.clients.clone();
        let now_ms = self.clock_ms();
        later(async move {
            match clients.send(messages::GetAllProducers { now_ms }).await {
                Ok(data) => match serde_json::to_vec(&ProducerTableInfo { data }) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                },
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// Groups with an online consumer subscribed to the topic, and groups with a stored offset
    /// for it (RocketMQ's answer: `topicList -c` lists them).
    fn topic_consumed_by(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(QueryTopicConsumeByWhoRequestHeader, req);
        let meta = self.meta.clone();
        let online = self.subs.groups_of_topic(&h.topic);
        later(async move {
            let stored = match meta.send(messages::GroupsOfTopic(h.topic.clone())).await {
                Ok(g) => g,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            let mut groups = GroupList::default();
            groups.group_list.extend(online);
            groups.group_list.extend(stored);
            match serde_json::to_vec(&groups) {
                Ok(b) => ok(&req).with_body(b),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    /// Every subscription group's consume stats on this broker (`brokerConsumeStats`), as
    /// RocketMQ's `fetchAllConsumeStatsInBroker`: per group, each topic it has offsets for that
    /// still exists (with `isOrder`, only ordered ones; with online consumers, only topics they
    /// subscribe to), every write queue's broker and consumer offsets, and Σ of the diffs.
    fn broker_consume_stats(self: Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumeStatsInBrokerHeader, req);
        later(async move {
            let offsets = match self.meta.send(messages::GetOffsets).await {
                Ok(o) => o,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (t, g) in offsets
                .offset_table
                .keys()
                .filter_map(|k| k.rsplit_once('@'))
            {
                by_group.entry(g).or_default().push(t);
            }
            let broker = self.settings.load().broker_name.clone();
            let mut list = ConsumeStatsList {
                broker_addr: self.store_host.to_string(),
                ..Default::default()
            };
            let mut counted = Vec::new();
            for group in self.meta_view.groups().subscription_group_table.keys() {
                let mut per_topic = Vec::new();
                let topics = by_group.get(group.as_str()).cloned().unwrap_or_default();
                for topic in topics {
                    let Some(tc) = self.meta_view.topic(topic) else {
                        continue;
                    };
                    if h.is_order && !tc.order {
                        continue;
                    }
                    if self.subs.get(group, topic).is_none() && self.subs.has_group(group) {
                        continue;
                    }
                    let mut stats = ConsumeStats::default();
                    // RocketMQ counts write queues here (and read queues in GET_CONSUME_STATS).
                    for q in 0..tc.write_queue_nums as i32 {
                        let o = self.offset_wrapper(&offsets, group, topic, q);
                        stats.offset_table.push((mq(topic, &broker, q), o));
                    }
                    counted.push((group.clone(), topic.to_string()));
                    list.total_diff += stats.total_diff();
                    per_topic.push(stats);
                }
                list.consume_stats_list.push((group.clone(), per_topic));
            }
            let mut tps = self.all_rates.group_get_tps(counted).await.into_iter();
            for (_, per_topic) in &mut list.consume_stats_list {
                for stats in per_topic {
                    stats.consume_tps = tps.next().unwrap_or(0.0);
                }
            }
            ok(&req).with_body(list.to_java_json().into_bytes())
        })
    }

    fn consumer_connection(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumerConnectionListRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            match clients
                .send(messages::GetGroupConnection(h.consumer_group.clone()))
                .await
            {
                Ok(Some(c)) if !c.connection_set.is_empty() => match serde_json::to_vec(&c) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                },
                Ok(_) => reply(
                    &req,
                    rc::CONSUMER_NOT_ONLINE,
                    format!("the consumer group[{}] not online", h.consumer_group),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    fn delete_topic(self: Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        let h = header_or_reply!(DeleteTopicRequestHeader, req);
        let topic = h.topic.trim().to_string();
        if topic.is_empty() {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                "The specified topic is blank.",
            ));
        }
        if is_system_topic(&topic) {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                format!("The topic[{topic}] is conflict with system topic."),
            ));
        }
        tracing::info!(%topic, caller = %peer, "deleting topic");
        later(async move {
            let existed = match self.meta.send(messages::DeleteTopic(topic.clone())).await {
                Ok(Ok(e)) => e,
                Ok(Err(e)) => {
                    return reply(
                        &req,
                        rc::SYSTEM_ERROR,
                        format!("cannot write topics.json: {e}"),
                    )
                }
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            match self.store.delete_topic(&topic).await {
                Ok(queues) => {
                    tracing::info!(%topic, existed, queues, "topic deleted");
                    ok(&req)
                }
                Err(e) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("topic {topic} removed from topics.json but its queues not: {e}"),
                ),
            }
        })
    }

    /// mqadmin `deleteExpiredCommitLog`: the next 20 retention rounds delete expired files
    /// whatever the hour and disk usage (RocketMQ's `executeDeleteFilesManually`).
    fn trigger_delete_files(&self, req: RemotingCommand, peer: &str) -> Handled {
        if self.store.trigger_delete_files() {
            tracing::info!(
                peer,
                "deleteExpiredCommitLog: expired files go in the next retention rounds"
            );
            Handled::Reply(ok(&req))
        } else {
            Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                "retention is not running in this broker",
            ))
        }
    }

    /// UPDATE_AND_CREATE_TOPIC: a topic made or updated (its attributes kept).
    pub(super) fn create_topic(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(CreateTopicRequestHeader, req);
        if let Err(e) = check_topic_name(&h.topic) {
            return Handled::Reply(reply(&req, rc::INVALID_PARAMETER, e.remark));
        }
        if h.read_queue_nums <= 0
            || h.write_queue_nums <= 0
            || h.read_queue_nums > 1024
            || h.write_queue_nums > 1024
        {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                "readQueueNums and writeQueueNums must be within 1..=1024",
            ));
        }
        let t = TopicConfig {
            topic_name: h.topic.clone(),
            read_queue_nums: h.read_queue_nums as u32,
            write_queue_nums: h.write_queue_nums as u32,
            perm: h.perm.clamp(0, 15) as u32,
            topic_filter_type: if h.topic_filter_type.is_empty() {
                "SINGLE_TAG".into()
            } else {
                h.topic_filter_type.clone()
            },
            topic_sys_flag: h.topic_sys_flag.unwrap_or(0).max(0) as u32,
            order: h.order,
            // An update keeps the topic's attributes (`Metadata`'s `CreateTopic` handler).
            attributes: Default::default(),
        };
        let meta = self.meta.clone();
        later(async move {
            match meta.send(messages::CreateTopic(t)).await {
                Ok(Ok(())) => ok(&req),
                Ok(Err(e)) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("cannot write topics.json: {e}"),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    fn update_group(&self, req: RemotingCommand) -> Handled {
        let g: SubscriptionGroupConfig = match parse_java_json(&req.body) {
            Ok(g) => g,
            Err(e) => {
                return Handled::Reply(reply(
                    &req,
                    rc::INVALID_PARAMETER,
                    format!("invalid SubscriptionGroupConfig body: {e}"),
                ))
            }
        };
        if g.group_name.trim().is_empty() {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                "the group name (groupName) is blank",
            ));
        }
        if let Err(e) = actormq_core::store::validate::check_topic_name(&g.group_name) {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                format!("invalid group name: {}", e.remark.replace("topic", "group")),
            ));
        }
        if g.retry_queue_nums > 1024 {
            return Handled::Reply(reply(
                &req,
                rc::INVALID_PARAMETER,
                format!("retryQueueNums {} is over 1024", g.retry_queue_nums),
            ));
        }
        let meta = self.meta.clone();
        later(async move {
            let name = g.group_name.clone();
            let retry = meta::retry_topic(&name);
            let queues = g.retry_queue_nums.max(1);
            match meta.send(messages::UpdateGroup(g)).await {
                Ok(Ok(())) => {
                    let m = messages::EnsureTopic {
                        topic: retry,
                        queues,
                        perm: meta::PERM_READ | meta::PERM_WRITE,
                    };
                    let _ = meta.send(m).await;
                    ok(&req)
                }
                Ok(Err(e)) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("cannot write subscriptionGroup.json: {e}"),
                ),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    fn get_config(&self, req: RemotingCommand) -> Handled {
        let mut text = print_config_items(&self.live.config(), false);
        text.push_str(&fixed_config_items(&text));
        let hdr = GetBrokerConfigResponseHeader {
            version: self.live.version_json(),
        };
        Handled::Reply(
            ok(&req)
                .with_ext_fields(hdr.to_ext_fields())
                .with_body(text.into_bytes()),
        )
    }

    fn update_config(&self, req: RemotingCommand, peer: &str) -> Handled {
        let body = match std::str::from_utf8(&req.body) {
            Ok(b) => b.to_string(),
            Err(_) => {
                return Handled::Reply(reply(
                    &req,
                    rc::INVALID_PARAMETER,
                    "the body is not UTF-8 key=value lines",
                ))
            }
        };
        let origin = format!("updateBrokerConfig from {peer}");
        let (live, now, peer) = (self.live.clone(), self.clock_ms(), peer.to_string());
        let meta = self.meta.clone();
        later(async move {
            // Validation and the fsync of the runtime file run on the blocking pool, never on
            // the connection thread.
            let update = {
                let body = body.clone();
                tokio::task::spawn_blocking(move || live.update(&body, &origin, now)).await
            };
            match update {
                Ok(Ok(restart)) => {
                    tracing::info!(caller = %peer, update = %body.trim().replace('\n', ", "), "broker configuration updated");
                    let perm_changed = body.lines().any(|l| {
                        l.split(['=', ':'])
                            .next()
                            .is_some_and(|k| k.trim().eq_ignore_ascii_case("brokerPermission"))
                    });
                    if perm_changed {
                        // As RocketMQ: a new topic-table version, registered at once, so the
                        // name servers take the topics' new perms.
                        match meta.send(messages::TouchTopics).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                tracing::error!(error = %e, "cannot write topics.json after a brokerPermission change")
                            }
                            Err(e) => {
                                tracing::error!(error = %e, "metadata unavailable after a brokerPermission change")
                            }
                        }
                    }
                    if restart.is_empty() {
                        ok(&req)
                    } else {
                        RemotingCommand::response_to(
                            &req,
                            rc::SUCCESS,
                            Some(format!(
                                "stored; takes effect at the next start: {}",
                                restart.join(", ")
                            )),
                        )
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(caller = %peer, error = %e, "broker configuration update refused");
                    reply(&req, rc::INVALID_PARAMETER, e)
                }
                Err(e) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("configuration update failed: {e}"),
                ),
            }
        })
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET, as 4.9.4's Broker2Client.resetOffset answers it: SYSTEM_ERROR
    /// for a topic this broker lacks or a group without an offset in one of the topic's write
    /// queues (existence is the offsets', not the subscription group's: a group made by
    /// cloneGroupOffset is reset too); per queue the offset at the timestamp (the queue's end for
    /// -1, 0 if negative), kept where the group already is unless that is forwards or `isForce`;
    /// CONSUMER_NOT_ONLINE (206) with no consumer of the group online, and then nothing changes
    /// (mqadmin falls back to its own UPDATE_CONSUMER_OFFSET reset); SYSTEM_ERROR if a consumer
    /// predates V3_0_7_SNAPSHOT. Otherwise RESET_CONSUMER_CLIENT_OFFSET goes one-way to every
    /// consumer (`ResetOffsetBodyForC` when the caller speaks CPP) and the answer carries the
    /// table. Unlike 4.9.4, which leaves the stored offsets to the consumers' next commit, the
    /// offsets are stored first (the module's invariant). A 5.x-style `queueId` with `offset`
    /// resets that one queue to that offset.
    fn reset_offset(self: Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        let h = header_or_reply!(ResetOffsetRequestHeader, req);
        let Some(tc) = self.meta_view.topic(&h.topic) else {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!(
                    "[reset-offset] reset offset failed, no topic in this broker. topic={}",
                    h.topic
                ),
            ));
        };
        let queues: Vec<i32> = if h.queue_id >= 0 {
            vec![h.queue_id]
        } else {
            (0..tc.write_queue_nums as i32).collect()
        };
        let for_c = req.language == actormq_core::protocol::command::LanguageCode::Cpp;
        tracing::info!(topic = %h.topic, group = %h.group, timestamp = h.timestamp, force = h.is_force, caller = %peer, "resetting consumer offsets");
        later(async move {
            let body = match self.reset_targets(&h, queues).await {
                Ok(body) => body,
                Err((code, remark)) => return reply(&req, code, remark),
            };
            if let Err((code, remark)) = self.consumers_can_reset(&h).await {
                return reply(&req, code, remark);
            }
            if let Err(e) = self.commit_reset(&h, &body).await {
                return reply(&req, rc::SYSTEM_ERROR, e);
            }
            let json = body.to_java_json();
            let told = self.push_reset(&h, &body, for_c).await;
            tracing::info!(topic = %h.topic, group = %h.group, queues = body.offset_table.len(), consumers_told = told, "consumer offsets reset");
            ok(&req).with_body(json.into_bytes())
        })
    }

    /// Each queue's new offset: `offset` for a 5.x-style one-queue reset (within the queue's
    /// range), else the queue's end for timestamp -1 or the offset at the timestamp; never
    /// forwards past where the group is unless forced. Fails for a queue the group has no offset
    /// in.
    async fn reset_targets(
        &self,
        h: &ResetOffsetRequestHeader,
        queues: Vec<i32>,
    ) -> Result<ResetOffsetBody, (i32, String)> {
        let offsets = self
            .meta
            .send(messages::GetOffsets)
            .await
            .map_err(|e| (rc::SYSTEM_ERROR, e.to_string()))?;
        let broker = self.settings.load().broker_name.clone();
        let mut body = ResetOffsetBody::default();
        for q in queues {
            let Some(current) = offsets.get(&h.topic, &h.group, q) else {
                return Err((
                    rc::SYSTEM_ERROR,
                    format!("THe consumer group <{}> not exist", h.group),
                ));
            };
            let max = self.reader.max_offset(&h.topic, q).0 as i64;
            let target = match h.offset.filter(|o| *o >= 0 && h.queue_id >= 0) {
                Some(o) => {
                    let min = self.reader.min_offset(&h.topic, q).0 as i64;
                    if o < min || o > max {
                        return Err((
                            rc::SYSTEM_ERROR,
                            format!("Target offset {o} not in consume queue range [{min}-{max}]"),
                        ));
                    }
                    o
                }
                None if h.timestamp == -1 => max,
                None => self.reader.offset_by_time(&h.topic, q, h.timestamp).0 as i64,
            };
            // Never moves a group forwards past where it is, unless forced.
            let target = target.max(0);
            let offset = if h.is_force || target < current {
                target
            } else {
                current
            };
            body.offset_table.push((mq(&h.topic, &broker, q), offset));
        }
        Ok(body)
    }

    /// CONSUMER_NOT_ONLINE with no consumer of the group online (mqadmin then resets by
    /// UPDATE_CONSUMER_OFFSET itself), SYSTEM_ERROR if one predates V3_0_7_SNAPSHOT.
    async fn consumers_can_reset(&self, h: &ResetOffsetRequestHeader) -> Result<(), (i32, String)> {
        let versions = self
            .clients
            .send(messages::ConsumerVersions {
                group: h.group.clone(),
            })
            .await
            .unwrap_or_default();
        if versions.is_empty() {
            let e = format!(
                "Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}",
                h.group, h.topic, h.timestamp
            );
            tracing::warn!("{e}");
            return Err((rc::CONSUMER_NOT_ONLINE, e));
        }
        match versions.into_iter().find(|v| *v < V3_0_7_SNAPSHOT) {
            Some(old) => Err((
                rc::SYSTEM_ERROR,
                format!(
                    "the client does not support this feature. version={}",
                    version_desc(old)
                ),
            )),
            None => Ok(()),
        }
    }

    /// Stores the new offsets (before the consumers are told: the module's invariant).
    async fn commit_reset(
        &self,
        h: &ResetOffsetRequestHeader,
        body: &ResetOffsetBody,
    ) -> Result<(), String> {
        for (mq, offset) in &body.offset_table {
            let m = messages::CommitOffset {
                group: h.group.clone(),
                topic: h.topic.clone(),
                queue_id: mq.queue_id,
                offset: *offset,
            };
            self.meta.send(m).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// RESET_CONSUMER_CLIENT_OFFSET, one-way, to every consumer of the group
    /// (`ResetOffsetBodyForC` for a CPP caller); how many were told.
    async fn push_reset(
        &self,
        h: &ResetOffsetRequestHeader,
        body: &ResetOffsetBody,
        for_c: bool,
    ) -> usize {
        let push_body = if for_c {
            body.to_java_json_for_c()
        } else {
            body.to_java_json()
        };
        let push = RemotingCommand::new_request(rq::RESET_CONSUMER_CLIENT_OFFSET)
            .with_ext_fields(
                ResetOffsetRequestHeader {
                    offset: None,
                    queue_id: -1,
                    is_force: false,
                    ..h.clone()
                }
                .to_ext_fields(),
            )
            .with_body(push_body.into_bytes())
            .with_oneway();
        self.clients
            .send(messages::PushToGroup {
                group: h.group.clone(),
                cmd: push,
            })
            .await
            .unwrap_or(0)
    }

    fn clock_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// Topics the broker owns: never deleted by an admin.
fn is_system_topic(topic: &str) -> bool {
    FORBIDDEN_TOPICS.contains(&topic)
        || topic == meta::AUTO_CREATE_TOPIC
        || topic.starts_with("rmq_sys_")
        || topic.starts_with("RMQ_SYS_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_topics_are_protected() {
        assert!(is_system_topic("TBW102"));
        assert!(is_system_topic("SCHEDULE_TOPIC_XXXX"));
        assert!(!is_system_topic("orders"));
    }
}
