//! What clients ask of the broker about themselves and their offsets: HEART_BEAT (34),
//! UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14),
//! UPDATE_CONSUMER_OFFSET (15), CONSUMER_SEND_MSG_BACK (36), LOCK_BATCH_MQ (41) and
//! UNLOCK_BATCH_MQ (42), as RocketMQ 4.9.4's ClientManageProcessor, ConsumerManageProcessor and
//! SendMessageProcessor answer them.
//!
//! Messages out ([`super::messages`]): to [`super::clients::ClientRegistry`] (heartbeats,
//! consumer lists, queue locks) and [`super::metadata::Metadata`] (groups, retry topics,
//! offsets); a message sent back
//! goes to the store as a new message of the retry or dead-letter topic.

use std::rc::Rc;

use actormq_core::format::java_order::{java_order, Op};
use actormq_core::format::properties::{self, keys};
use actormq_core::format::record::{self, body_crc, Check, NewMessage, RecordView};
use actormq_core::meta::{self, SubscriptionGroupConfig, PERM_READ, PERM_WRITE};
use actormq_core::offset::{PhyOffset, QueueOffset};
use actormq_core::protocol::body::{
    parse_java_json, to_json_bytes, ConsumerListBody, HeartbeatData, LockBatchRequestBody,
    LockBatchResponseBody, UnlockBatchRequestBody,
};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::faq;
use actormq_core::protocol::header::*;

use super::context::{header_or_reply, later, ok, reply, BrokerCore};
use super::messages;
use crate::remoting::server::{ConnInfo, Handled};

impl BrokerCore {
    pub(super) fn heartbeat(self: Rc<Self>, req: RemotingCommand, conn: &ConnInfo) -> Handled {
        let data: HeartbeatData = match parse_java_json(&req.body) {
            Ok(d) => d,
            Err(e) => {
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("invalid heartbeat body: {e}"),
                ))
            }
        };
        let conn = conn.clone();
        later(async move {
            for c in &data.consumer_data_set {
                let group = match self
                    .meta
                    .send(messages::EnsureGroup(c.group_name.clone()))
                    .await
                {
                    Ok(Ok(Some(g))) => g,
                    _ => continue,
                };
                let retry = meta::retry_topic(&c.group_name);
                let m = messages::EnsureTopic {
                    topic: retry,
                    queues: group.retry_queue_nums.max(1),
                    perm: PERM_READ | PERM_WRITE,
                };
                let _ = self.meta.send(m).await;
            }
            let hb = messages::Heartbeat {
                data,
                conn_id: conn.id,
                conn: conn.conn.clone(),
                addr: conn.peer.to_string(),
                language: req.language.name(),
                version: req.version,
            };
            let changed = self.clients.send(hb).await.unwrap_or(false);
            ok(&req).with_ext("IS_SUB_CHANGE", changed.to_string())
        })
    }

    pub(super) fn unregister_client(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(UnregisterClientRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            let m = messages::UnregisterClient {
                client_id: h.client_id,
                producer_group: h.producer_group,
                consumer_group: h.consumer_group,
            };
            let _ = clients.send(m).await;
            ok(&req)
        })
    }

    pub(super) fn consumer_list(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumerListByGroupRequestHeader, req);
        let clients = self.clients.clone();
        later(async move {
            let ids = clients
                .send(messages::GetConsumerList(h.consumer_group.clone()))
                .await
                .unwrap_or_default();
            if ids.is_empty() {
                return reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("no consumer for this group, {}", h.consumer_group),
                );
            }
            match to_json_bytes(&ConsumerListBody {
                consumer_id_list: ids,
            }) {
                Ok(b) => ok(&req).with_body(b),
                Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            }
        })
    }

    pub(super) fn query_consumer_offset(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(QueryConsumerOffsetRequestHeader, req);
        let meta = self.meta.clone();
        let reader = self.reader.clone();
        let hot_bytes = self.settings.load().hot_bytes;
        later(async move {
            let m = messages::QueryOffset {
                group: h.consumer_group.clone(),
                topic: h.topic.clone(),
                queue_id: h.queue_id,
            };
            // A negative offset stored by an older build counts as none, as in RocketMQ.
            match meta.send(m).await.ok().flatten().filter(|&o| o >= 0) {
                Some(off) => ok(&req).with_ext_fields(
                    QueryConsumerOffsetResponseHeader { offset: off }.to_ext_fields(),
                ),
                None => {
                    // RocketMQ 4.9.4 (ConsumerManageProcessor.queryConsumerOffset): 0 when the
                    // queue's min offset is ≤ 0 (-1 for a queue that does not exist) and offset 0
                    // is not "in disk" (DefaultMessageStore.checkInDiskByConsumeOffset: false
                    // without the queue or without a unit at 0, else whether the CommitLog's end
                    // is more than accessMessageInMemoryMaxRatio of memory past its record): a
                    // new group reads a young queue from its start, an empty or unknown one from
                    // 0. Otherwise the client decides (consumeFromWhere): a new group reading
                    // from the last offset must not be sent back over a long, cold history.
                    // setZeroIfNotFound=false (RocketMQ 5) always leaves it to the client.
                    let q = reader.queue(&h.topic, h.queue_id);
                    let min = q.as_ref().map_or(-1, |q| q.min_offset().0 as i64);
                    let in_disk = q
                        .filter(|q| q.min_offset().0 == 0)
                        .and_then(|q| q.unit(QueueOffset(0)))
                        .is_some_and(|u| {
                            let end = reader.commit_log().max_offset() as i64;
                            end.saturating_sub(u.phy_offset) > hot_bytes.min(i64::MAX as u64) as i64
                        });
                    if h.set_zero_if_not_found != Some(false) && min <= 0 && !in_disk {
                        ok(&req).with_ext_fields(
                            QueryConsumerOffsetResponseHeader { offset: 0 }.to_ext_fields(),
                        )
                    } else {
                        reply(
                            &req,
                            rc::QUERY_NOT_FOUND,
                            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                        )
                    }
                }
            }
        })
    }

    pub(super) fn update_consumer_offset(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(UpdateConsumerOffsetRequestHeader, req);
        if h.commit_offset < 0 {
            // Stored, it would be answered to QUERY_CONSUMER_OFFSET, and a client that gets a
            // negative offset cannot start the queue. The pull-commit path drops them alike.
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!("commitOffset {} is negative", h.commit_offset),
            ));
        }
        let meta = self.meta.clone();
        later(async move {
            let m = messages::CommitOffset {
                group: h.consumer_group,
                topic: h.topic,
                queue_id: h.queue_id,
                offset: h.commit_offset,
            };
            let _ = meta.send(m).await;
            ok(&req)
        })
    }

    /// CONSUMER_SEND_MSG_BACK: retry through `%RETRY%<group>` with the delay of the reconsume
    /// count, or `%DLQ%<group>` once the retries are used up.
    pub(super) fn send_back(self: Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(ConsumerSendMsgBackRequestHeader, req);
        later(async move {
            match self.send_back_now(&req, &h).await {
                Ok(answer) | Err(answer) => answer,
            }
        })
    }

    async fn send_back_now(
        &self,
        req: &RemotingCommand,
        h: &ConsumerSendMsgBackRequestHeader,
    ) -> Result<RemotingCommand, RemotingCommand> {
        let group = match self.meta.send(messages::EnsureGroup(h.group.clone())).await {
            Ok(Ok(Some(g))) => g,
            _ => {
                return Err(reply(
                    req,
                    rc::SUBSCRIPTION_GROUP_NOT_EXIST,
                    format!(
                        "subscription group not exist, {} {}",
                        h.group,
                        faq::suggest_todo(faq::SUBSCRIPTION_GROUP_NOT_EXIST)
                    ),
                ))
            }
        };
        if group.retry_queue_nums == 0 {
            return Ok(ok(req));
        }
        let Some(slice) = self.reader.record_at(PhyOffset(h.offset.max(0) as u64)) else {
            return Err(reply(
                req,
                rc::SYSTEM_ERROR,
                format!("look message by offset failed, {}", h.offset),
            ));
        };
        let Ok(Check::Record(orig)) = record::check(slice.as_bytes(), false) else {
            return Err(reply(
                req,
                rc::SYSTEM_ERROR,
                format!("the message at offset {} cannot be decoded", h.offset),
            ));
        };
        let (topic, queues, delay) = send_back_target(h, &group, orig.reconsume_times);
        let ensure = messages::EnsureTopic {
            topic: topic.clone(),
            queues,
            perm: PERM_READ | PERM_WRITE,
        };
        if let Err(e) = self
            .meta
            .send(ensure)
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
        {
            return Err(reply(
                req,
                rc::SYSTEM_ERROR,
                format!("cannot create {topic}: {e}"),
            ));
        }
        let queue_id = (self.stats.next() % queues as u64) as i32;
        match self
            .store
            .put(sent_back(&orig, topic, queue_id, delay))
            .await
        {
            Ok(a) => {
                self.stats.store.record_put(1, a.wrote_bytes);
                Ok(ok(req))
            }
            Err(e) => {
                self.stats.store.record_put_failed(1);
                Err(reply(
                    req,
                    rc::SYSTEM_ERROR,
                    format!("{:?}: {}", e.status, e.remark),
                ))
            }
        }
    }

    /// LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42), as 4.9.4's AdminBrokerProcessor
    /// `lockBatchMQ` / `unlockBatchMQ`: the two bodies are the same fields (group, client id,
    /// queues; a class each in 4.9.4), read alike — one that does not parse is SYSTEM_ERROR
    /// `invalid lock body: …` / `invalid unlock body: …`. A lock answers the queues the client
    /// holds now (none when the registry is gone), an unlock SUCCESS alone.
    pub(super) fn queue_locks(&self, req: RemotingCommand) -> Handled {
        let lock = req.code == rq::LOCK_BATCH_MQ;
        let body = if lock {
            parse_java_json::<LockBatchRequestBody>(&req.body)
                .map(|b| (b.consumer_group, b.client_id, b.mq_set))
        } else {
            parse_java_json::<UnlockBatchRequestBody>(&req.body)
                .map(|b| (b.consumer_group, b.client_id, b.mq_set))
        };
        let (group, client_id, mqs) = match body {
            Ok(b) => b,
            Err(e) => {
                let what = if lock { "lock" } else { "unlock" };
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("invalid {what} body: {e}"),
                ));
            }
        };
        let clients = self.clients.clone();
        later(async move {
            if lock {
                let m = messages::LockBatch {
                    group,
                    client_id,
                    mqs,
                };
                let locked = clients.send(m).await.unwrap_or_default();
                match to_json_bytes(&LockBatchResponseBody {
                    lock_ok_mq_set: locked,
                }) {
                    Ok(b) => ok(&req).with_body(b),
                    Err(e) => reply(&req, rc::SYSTEM_ERROR, e.to_string()),
                }
            } else {
                let m = messages::UnlockBatch {
                    group,
                    client_id,
                    mqs,
                };
                let _ = clients.send(m).await;
                ok(&req)
            }
        })
    }
}

/// Where a message sent back goes: (topic, its queues, delay level) — the group's DLQ once the
/// reconsume count reaches `maxReconsumeTimes` (the group's `retryMaxTimes` without it) or the
/// client asks (a negative level), else its retry topic with the client's level or 3 + the
/// reconsume count.
fn send_back_target(
    h: &ConsumerSendMsgBackRequestHeader,
    group: &SubscriptionGroupConfig,
    reconsume_times: i32,
) -> (String, u32, i32) {
    let max_times = h.max_reconsume_times.unwrap_or(group.retry_max_times);
    if reconsume_times >= max_times || h.delay_level < 0 {
        return (meta::dlq_topic(&h.group), 1, 0);
    }
    let delay = if h.delay_level == 0 {
        3 + reconsume_times
    } else {
        h.delay_level
    };
    (
        meta::retry_topic(&h.group),
        group.retry_queue_nums.max(1),
        delay,
    )
}

/// The new message a sent-back `orig` becomes.
fn sent_back(orig: &RecordView<'_>, topic: String, queue_id: i32, delay: i32) -> NewMessage {
    // 4.9.4's SendMessageProcessor.asyncConsumerSendMsgBack: RETRY_TOPIC kept or set to
    // the original topic, WAIT=false, DELAY set to the level (0 for the DLQ: written,
    // not removed), ORIGIN_MESSAGE_ID kept or set to the stored message's own (offset)
    // msgId — never the header's `originMsgId`, which 4.9.4 ignores (a client sends its
    // UNIQ_KEY there, 56 hex digits from an IPv6 host, so the stored size would differ).
    // Java's map drops an empty value, so an empty entry counts as absent. Put in
    // Java's order (ORIGIN_MESSAGE_ID last), written in its HashMap order.
    let absent = |k: &str| properties::find(&orig.properties, k).is_none_or(str::is_empty);
    let (origin, delay) = (orig.offset_msg_id(), delay.to_string());
    let mut ops = [Op::Remove(""); 4];
    let mut n = 0;
    for (add, op) in [
        (
            absent(keys::RETRY_TOPIC),
            Op::Put(keys::RETRY_TOPIC, orig.topic),
        ),
        (true, Op::Put(keys::WAIT, "false")),
        (true, Op::Put(keys::DELAY, &delay)),
        (
            absent(keys::ORIGIN_MESSAGE_ID),
            Op::Put(keys::ORIGIN_MESSAGE_ID, &origin),
        ),
    ] {
        if add {
            ops[n] = op;
            n += 1;
        }
    }
    let props = java_order(&orig.properties, &ops[..n]);
    let body = bytes::Bytes::copy_from_slice(orig.body);
    NewMessage {
        topic,
        queue_id,
        flag: orig.flag,
        sys_flag: orig.sys_flag,
        born_timestamp: orig.born_timestamp,
        born_host: orig.born_host,
        // The original's, as 4.9.4 copies it (msgExt.getStoreHost()).
        store_host: orig.store_host,
        reconsume_times: orig.reconsume_times + 1,
        prepared_tx_offset: 0,
        body_crc: body_crc(&body),
        body,
        properties: props,
        // Stored with WAIT=false (above), as RocketMQ does: no flush or slave to wait for.
        wait_store_msg_ok: false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use actormq_core::protocol::body::{
        parse_java_json, to_json_bytes, LockBatchRequestBody, LockBatchResponseBody, MessageQueue,
        UnlockBatchRequestBody,
    };
    use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
    use actormq_core::protocol::command::RemotingCommand;

    use crate::broker::testing::TestBroker;
    use crate::remoting::client::RemotingClient;

    fn mqs(ids: &[i32]) -> Vec<MessageQueue> {
        ids.iter()
            .map(|&queue_id| MessageQueue {
                broker_name: "broker-a".into(),
                queue_id,
                topic: "T".into(),
            })
            .collect()
    }

    fn lock(client_id: &str, ids: &[i32]) -> RemotingCommand {
        let body = LockBatchRequestBody {
            client_id: client_id.into(),
            consumer_group: "G".into(),
            mq_set: mqs(ids),
            only_this_broker: true,
        };
        RemotingCommand::new_request(rq::LOCK_BATCH_MQ).with_body(to_json_bytes(&body).unwrap())
    }

    fn unlock(client_id: &str, ids: &[i32]) -> RemotingCommand {
        let body = UnlockBatchRequestBody {
            client_id: client_id.into(),
            consumer_group: "G".into(),
            mq_set: mqs(ids),
            only_this_broker: true,
        };
        RemotingCommand::new_request(rq::UNLOCK_BATCH_MQ).with_body(to_json_bytes(&body).unwrap())
    }

    async fn call(c: &RemotingClient, req: RemotingCommand) -> RemotingCommand {
        c.invoke(req, Duration::from_secs(30))
            .await
            .expect("a response")
    }

    async fn locked(c: &RemotingClient, req: RemotingCommand) -> Vec<i32> {
        let resp = call(c, req).await;
        assert_eq!(resp.code, rc::SUCCESS, "{:?}", resp.remark);
        let body: LockBatchResponseBody = parse_java_json(&resp.body).unwrap();
        let mut ids: Vec<i32> = body.lock_ok_mq_set.iter().map(|q| q.queue_id).collect();
        ids.sort();
        ids
    }

    /// LOCK_BATCH_MQ and UNLOCK_BATCH_MQ through their one handler, over the wire: a lock
    /// answers the queues the client holds, an unlock SUCCESS without a body, and a body that
    /// does not parse SYSTEM_ERROR naming which request it was.
    #[actix_rt::test]
    async fn queue_locks_lock_unlock_and_refuse_a_bad_body() {
        let dir = tempfile::tempdir().unwrap();
        let b = TestBroker::start(dir.path(), &[]).unwrap();
        let c = RemotingClient::connect(&b.broker_addr).await.unwrap();
        assert_eq!(locked(&c, lock("A", &[0, 1])).await, [0, 1]);
        assert_eq!(locked(&c, lock("B", &[1, 2])).await, [2], "queue 1 is A's");
        let resp = call(&c, unlock("A", &[1])).await;
        assert_eq!((resp.code, resp.body.len()), (rc::SUCCESS, 0));
        assert_eq!(
            locked(&c, lock("B", &[1])).await,
            [1],
            "A let go of queue 1"
        );
        for (code, what) in [(rq::LOCK_BATCH_MQ, "lock"), (rq::UNLOCK_BATCH_MQ, "unlock")] {
            let bad = RemotingCommand::new_request(code).with_body(&b"[1"[..]);
            let resp = call(&c, bad).await;
            assert_eq!(resp.code, rc::SYSTEM_ERROR);
            let remark = resp.remark.unwrap_or_default();
            assert!(
                remark.starts_with(&format!("invalid {what} body: ")),
                "{remark}"
            );
        }
        b.stop();
    }
}
