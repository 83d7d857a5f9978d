//! Admin codes that change or show the broker's groups and store, as RocketMQ 4.9.4's
//! `AdminBrokerProcessor` answers them (broker/src/main/java/org/apache/rocketmq/broker/processor/
//! AdminBrokerProcessor.java): DELETE_SUBSCRIPTIONGROUP (207, mqadmin `deleteSubGroup`),
//! CLEAN_EXPIRED_CONSUMEQUEUE (306, `cleanExpiredCQ`), CLEAN_UNUSED_TOPIC (316,
//! `cleanUnusedTopic`) and QUERY_CONSUME_QUEUE (321, `queryCq`). DELETE_EXPIRED_COMMITLOG (329)
//! is `trigger_delete_files` in [`super::admin`].
//!
//! Owns no state: each handler reads the lock-free views (store reader, metadata snapshot,
//! subscription view) or sends one message to the owning actor — `Metadata` ([`DeleteGroup`]),
//! the store's ConsumeQueue builder (through `Store::clean_expired_consume_queues` and
//! `Store::delete_topic`) — and replies with RocketMQ's codes and remarks.
//!
//! Invariants: a slave refuses DELETE_SUBSCRIPTIONGROUP as RocketMQ does (its tables are its
//! master's); CLEAN_UNUSED_TOPIC never drops the queues of a topic in `topics.json`, of
//! `SCHEDULE_TOPIC_XXXX`, `RMQ_SYS_TRANS_OP_HALF_TOPIC` or an `%LMQ%` topic; QUERY_CONSUME_QUEUE
//! reads only published units, from one ConsumeQueue file, as RocketMQ's `getIndexBuffer` does.

use std::rc::Rc;

use actormq_core::offset::QueueOffset;
use actormq_core::protocol::admin::{ConsumeQueueData, QueryConsumeQueueResponseBody};
use actormq_core::protocol::codes::response_code as rc;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{
    DeleteSubscriptionGroupRequestHeader, QueryConsumeQueueRequestHeader,
};

use super::context::{header_or_reply, later, ok, reply, BrokerCore};
use super::messages::DeleteGroup;
use crate::remoting::server::Handled;

/// Topics whose queues CLEAN_UNUSED_TOPIC keeps though `topics.json` does not name them
/// (DefaultMessageStore.cleanUnusedTopic).
fn kept_without_config(topic: &str) -> bool {
    topic == "SCHEDULE_TOPIC_XXXX"
        || topic == "RMQ_SYS_TRANS_OP_HALF_TOPIC"
        || topic.starts_with("%LMQ%")
}

impl BrokerCore {
    /// DELETE_SUBSCRIPTIONGROUP: SUCCESS whether or not the group existed, as RocketMQ.
    pub(super) fn delete_group(self: Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        if self.store.params().broker_role.is_slave() {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                "Can't modify topic or subscription group from slave broker, please execute it from master broker.",
            ));
        }
        let h = header_or_reply!(DeleteSubscriptionGroupRequestHeader, req);
        tracing::info!(group = %h.group_name, remove_offset = h.remove_offset, caller = %peer, "deleting subscription group");
        later(async move {
            let m = DeleteGroup {
                group: h.group_name.clone(),
                remove_offset: h.remove_offset,
            };
            match self.meta.send(m).await {
                Ok(Ok(existed)) => {
                    if !existed {
                        tracing::warn!(group = %h.group_name, "delete subscription group: no such group");
                    }
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

    /// CLEAN_EXPIRED_CONSUMEQUEUE: one ConsumeQueue retention pass now (see
    /// `Store::clean_expired_consume_queues` for how it differs from RocketMQ's).
    pub(super) fn clean_expired_cq(self: Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        tracing::warn!(caller = %peer, "cleanExpiredCQ: ConsumeQueue retention pass");
        later(async move {
            match self.store.clean_expired_consume_queues().await {
                Ok(files) => {
                    tracing::warn!(files, "cleanExpiredCQ: done");
                    ok(&req)
                }
                Err(e) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("cleaning expired ConsumeQueues failed: {e}"),
                ),
            }
        })
    }

    /// CLEAN_UNUSED_TOPIC: drops the ConsumeQueues of every topic the store holds that
    /// `topics.json` no longer names (each as DELETE_TOPIC_IN_BROKER drops a topic's queues).
    pub(super) fn clean_unused_topics(self: Rc<Self>, req: RemotingCommand, peer: &str) -> Handled {
        tracing::warn!(caller = %peer, "cleanUnusedTopic: start");
        later(async move {
            let configured = self.meta_view.topics();
            let mut unused: Vec<String> = self
                .reader
                .consume_queues()
                .topics()
                .into_iter()
                .filter(|t| {
                    !configured.topic_config_table.contains_key(t) && !kept_without_config(t)
                })
                .collect();
            unused.sort();
            for topic in &unused {
                match self.store.delete_topic(topic).await {
                    Ok(queues) => {
                        tracing::info!(%topic, queues, "cleanUnusedTopic: topic destroyed")
                    }
                    Err(e) => {
                        return reply(
                            &req,
                            rc::SYSTEM_ERROR,
                            format!("cleanUnusedTopic: the queues of {topic} not removed: {e}"),
                        )
                    }
                }
            }
            tracing::warn!(topics = unused.len(), "cleanUnusedTopic: end");
            ok(&req)
        })
    }

    /// QUERY_CONSUME_QUEUE: the queue's range and up to `count` units from `index`, within the
    /// file that holds `index`. A unit not readable there is SUCCESS with a remark and no body,
    /// as RocketMQ answers.
    pub(super) fn query_consume_queue(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(QueryConsumeQueueRequestHeader, req);
        let Some(cq) = self.reader.queue(&h.topic, h.queue_id) else {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!("{}@{} is not exist!", h.queue_id, h.topic),
            ));
        };
        let (min, max) = (cq.min_offset().0 as i64, cq.max_offset().0 as i64);
        let mut body = QueryConsumeQueueResponseBody {
            max_queue_index: max,
            min_queue_index: min,
            ..Default::default()
        };
        if let Some(group) = &h.consumer_group {
            body.subscription_data = self.subs.get(group, &h.topic);
            body.filter_data = Some(match body.subscription_data {
                None => format!("{group}@{} is not online!", h.topic),
                // RocketMQ keeps a ConsumerFilterData only for SQL92 subscriptions, which
                // ActorMQ does not filter by: fastjson prints the missing one as `null`.
                Some(_) => "null".to_string(),
            });
        }
        if h.index < min || h.index >= max {
            return Handled::Reply(RemotingCommand::response_to(
                &req,
                rc::SUCCESS,
                Some(format!(
                    "Index {} of {}@{} is not exist!",
                    h.index, h.queue_id, h.topic
                )),
            ));
        }
        let mut units = Vec::new();
        let want = usize::try_from(h.count).unwrap_or(0);
        cq.units_from(QueueOffset(h.index as u64), want, &mut units);
        body.queue_data = Some(
            units
                .into_iter()
                .map(|u| ConsumeQueueData {
                    physic_offset: u.phy_offset,
                    physic_size: u.size,
                    tags_code: u.tags_code,
                    ..Default::default()
                })
                .collect(),
        );
        match serde_json::to_vec(&body) {
            // RocketMQ never clears the placeholder remark of its response here.
            Ok(b) => Handled::Reply(
                ok(&req)
                    .with_remark("not set any response code")
                    .with_body(b),
            ),
            Err(e) => Handled::Reply(reply(&req, rc::SYSTEM_ERROR, e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_and_lmq_topics_survive_clean_unused_topic() {
        assert!(kept_without_config("SCHEDULE_TOPIC_XXXX"));
        assert!(kept_without_config("RMQ_SYS_TRANS_OP_HALF_TOPIC"));
        assert!(kept_without_config("%LMQ%abc"));
        assert!(!kept_without_config("OldTopic"));
    }
}
