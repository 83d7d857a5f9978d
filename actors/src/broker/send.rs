//! The SEND path: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320), as
//! RocketMQ 4.9.4's SendMessageProcessor answers them, and the store half of the reply codes
//! ([`super::reply`]).
//!
//! A SEND is checked once here — the broker's permission, flow control (`[TIMEOUT_CLEAN_QUEUE]`,
//! `[PCBUSY_CLEAN_QUEUE]`), the topic's name and permission, the queue — then built into
//! [`NewMessage`]s with the properties Java would store, and handed on: a single message to this
//! thread's [`super::send_batch::SendBatcher`], a batch to the writer as one
//! `put_producer_batch`. Topics are created on the way when RocketMQ would (retry and DLQ
//! topics, `autoCreateTopicEnable`), and a consumer's own SEND to `%RETRY%<group>` goes to the
//! DLQ once its retries are used up. Every refusal carries a remark that says what was wrong and
//! which limit applies.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use actormq_core::format::java_order::{java_order, Op};
use actormq_core::format::msg_id::offset_msg_id;
use actormq_core::format::properties::{self, keys};
use actormq_core::format::record::{body_crc, sys_flag, NewMessage};
use actormq_core::meta::{self, TopicConfig, PERM_READ, PERM_WRITE};
use actormq_core::protocol::batch::decode_batch;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::faq;
use actormq_core::protocol::header::{SendHeaderRef, SendMessageResponseHeader};
use actormq_core::store::commit_log::AppendOk;
use actormq_core::store::status::{PutError, PutStatus};
use actormq_core::store::validate::check_send_topic;

use super::context::{header_or_reply, later, reply, BrokerCore};
use super::messages;
use super::store_stats::Stats;
use crate::metrics::MessageType;
use crate::remoting::server::{ConnInfo, Handled};

/// The answer a handled SEND comes to, for a SEND whose own answer is a future.
async fn settle(req: &RemotingCommand, handled: Handled) -> RemotingCommand {
    match handled {
        Handled::Reply(r) => r,
        Handled::Later(f) => f
            .await
            .unwrap_or_else(|| reply(req, rc::SYSTEM_ERROR, "the send produced no reply")),
        Handled::NoReply => reply(req, rc::SYSTEM_ERROR, "the send produced no reply"),
    }
}

fn put_error_reply(req: &RemotingCommand, e: &PutError) -> RemotingCommand {
    reply(req, e.status.response_code(), e.remark.clone())
}

impl BrokerCore {
    /// Finds the topic for a send, creating it the way RocketMQ does: retry topics always,
    /// others from the client's default topic (`TBW102`) when `autoCreateTopicEnable` is on.
    async fn topic_for_send(
        &self,
        topic: &str,
        default_topic: &str,
        default_queues: i32,
    ) -> Result<TopicConfig, (i32, String)> {
        if let Some(t) = self.meta_view.topic(topic) {
            return Ok(t);
        }
        let io = |e: std::io::Error| {
            (
                rc::SYSTEM_ERROR,
                format!("cannot create topic {topic}: {e}"),
            )
        };
        if topic.starts_with(meta::RETRY_GROUP_TOPIC_PREFIX)
            || topic.starts_with(meta::DLQ_GROUP_TOPIC_PREFIX)
        {
            let m = messages::EnsureTopic {
                topic: topic.to_string(),
                queues: 1,
                perm: PERM_READ | PERM_WRITE,
            };
            return self
                .meta
                .send(m)
                .await
                .map_err(|e| (rc::SYSTEM_ERROR, e.to_string()))?
                .map_err(io);
        }
        let default = self
            .meta_view
            .topic(default_topic)
            .filter(|d| self.settings.load().auto_create_topic && d.inheritable());
        let Some(default) = default else {
            return Err((
                rc::TOPIC_NOT_EXIST,
                format!(
                    "topic[{topic}] not exist, apply first please!{}",
                    faq::suggest_todo(faq::APPLY_TOPIC_URL)
                ),
            ));
        };
        let queues = (default_queues.max(1) as u32).min(default.write_queue_nums.max(1));
        let m = messages::EnsureTopic {
            topic: topic.to_string(),
            queues,
            perm: PERM_READ | PERM_WRITE,
        };
        self.meta
            .send(m)
            .await
            .map_err(|e| (rc::SYSTEM_ERROR, e.to_string()))?
            .map_err(io)
    }

    /// `[TIMEOUT_CLEAN_QUEUE]` flow control: refuse while the writer's head-of-line wait is over
    /// `waitTimeMillsInSendQueue`, instead of queueing without bound.
    fn writer_busy(&self) -> Option<String> {
        let settings = self.settings.load();
        if !settings.fast_failure {
            return None;
        }
        let probe = self.store.writer().probe();
        let depth = probe.depth.get();
        // A writer stuck in one append (a slow file creation, a wait for a write buffer) takes no
        // message, so the last wait below stays that of the message before: RocketMQ's
        // isOSPageCacheBusy, the time the append under way has held the CommitLog.
        if let Some(busy) = probe
            .busy_for()
            .filter(|b| *b > settings.os_page_cache_busy)
        {
            return Some(format!(
                "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, the CommitLog \
                 writer has been busy with one request for {}ms (osPageCacheBusyTimeOutMills: \
                 {}ms), size of queue: {depth}",
                busy.as_millis(),
                settings.os_page_cache_busy.as_millis()
            ));
        }
        let wait_us = probe.last_wait_us.load(Ordering::Relaxed);
        let limit = settings.wait_time_in_send_queue;
        (depth > 0 && Duration::from_micros(wait_us) > limit).then(|| {
            format!(
                "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {}ms, size of queue: {depth}, waitTimeMillsInSendQueue: {}ms",
                wait_us / 1000,
                limit.as_millis()
            )
        })
    }

    pub(super) fn send(self: Rc<Self>, req: RemotingCommand, conn: &ConnInfo) -> Handled {
        // The frame's handling start, read once by the connection for this request.
        let arrived = crate::metered::handling_since();
        let h = header_or_reply!(SendHeaderRef, req);
        let props = SendProps::scan(h.properties);
        if let Some(refused) = self.send_refused(&req, &h, &props) {
            return Handled::Reply(refused);
        }
        let born_host = conn.peer;
        if h.topic.starts_with(meta::RETRY_GROUP_TOPIC_PREFIX) {
            // A consumer's own retry send (the fallback when CONSUMER_SEND_MSG_BACK fails).
            if is_batch(&req, h.batch) {
                return Handled::Reply(reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("batch request does not support retry group {}", h.topic),
                ));
            }
            return later(self.send_retry(req, born_host, arrived));
        }
        if let Some(topic) = self.meta_view.with_topic(h.topic, SendTopic::of) {
            return self.send_to(&req, &h, &props, topic, born_host, arrived);
        }
        // A topic to create first (auto-creation, retry topics): off the hot path.
        let (topic, default_topic, default_queues) = (
            h.topic.to_owned(),
            h.default_topic.to_owned(),
            h.default_topic_queue_nums,
        );
        later(async move {
            let created = self
                .topic_for_send(&topic, &default_topic, default_queues)
                .await;
            let topic = match created {
                Ok(t) => SendTopic::of(&t),
                Err((code, remark)) => return reply(&req, code, remark),
            };
            let handled = match SendHeaderRef::from_command(&req) {
                Ok(h) => {
                    let props = SendProps::scan(h.properties);
                    self.send_to(&req, &h, &props, topic, born_host, arrived)
                }
                Err(e) => Handled::Reply(reply(&req, rc::SYSTEM_ERROR, e.to_string())),
            };
            settle(&req, handled).await
        })
    }

    /// Why a SEND is refused before its topic is looked at, in RocketMQ's order: the broker's
    /// permission, flow control, the topic's name, a transactional message.
    fn send_refused(
        &self,
        req: &RemotingCommand,
        h: &SendHeaderRef<'_>,
        props: &SendProps<'_>,
    ) -> Option<RemotingCommand> {
        let perm = self.settings.load().broker_perm;
        if perm & meta::PERM_WRITE == 0 {
            return Some(reply(
                req,
                rc::NO_PERMISSION,
                format!(
                    "the broker[{}] sending message is forbidden (brokerPermission {perm})",
                    self.store_host
                ),
            ));
        }
        if let Some(remark) = self.writer_busy() {
            return Some(reply(req, rc::SYSTEM_BUSY, remark));
        }
        if let Err(e) = check_send_topic(h.topic) {
            return Some(put_error_reply(req, &e));
        }
        if props.transaction {
            let why = if self.settings.load().reject_transaction {
                "the broker rejects transactional messages (rejectTransactionMessage=true)"
            } else {
                "transactional (half) messages are not supported by this broker yet"
            };
            return Some(reply(req, rc::NO_PERMISSION, why));
        }
        None
    }

    /// A SEND to `%RETRY%<group>` (RocketMQ's `handleRetryTopic`): the group must exist (or be
    /// created, with `autoCreateSubscriptionGroup`), and once the message's reconsume count has
    /// reached the request's `maxReconsumeTimes` (the group's `retryMaxTimes` without it) it goes
    /// to `%DLQ%<group>`, queue 0, without its DELAY. Otherwise a retry the consumer sends itself
    /// would be retried for ever, and never reach the dead-letter queue.
    async fn send_retry(
        self: Rc<Self>,
        req: RemotingCommand,
        born_host: SocketAddr,
        arrived: Instant,
    ) -> RemotingCommand {
        let h = match SendHeaderRef::from_command(&req) {
            Ok(h) => h,
            Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
        };
        let group_name = &h.topic[meta::RETRY_GROUP_TOPIC_PREFIX.len()..];
        let group = match self
            .meta
            .send(messages::EnsureGroup(group_name.to_string()))
            .await
        {
            Ok(Ok(Some(g))) => g,
            _ => {
                return reply(
                    &req,
                    rc::SUBSCRIPTION_GROUP_NOT_EXIST,
                    format!(
                        "subscription group not exist, {group_name} {}",
                        faq::suggest_todo(faq::SUBSCRIPTION_GROUP_NOT_EXIST)
                    ),
                )
            }
        };
        let max_times = h.max_reconsume_times.unwrap_or(group.retry_max_times);
        let dlq = (h.reconsume_times >= max_times).then(|| {
            (
                meta::dlq_topic(group_name),
                properties::remove(h.properties, keys::DELAY),
            )
        });
        let mut h = h;
        if let Some((topic, props)) = &dlq {
            h.topic = topic;
            h.queue_id = 0;
            h.properties = props;
        }
        let topic = match self
            .topic_for_send(h.topic, h.default_topic, h.default_topic_queue_nums)
            .await
        {
            Ok(t) => SendTopic::of(&t),
            Err((code, remark)) => return reply(&req, code, remark),
        };
        let props = SendProps::scan(h.properties);
        let handled = self.send_to(&req, &h, &props, topic, born_host, arrived);
        settle(&req, handled).await
    }

    /// A SEND to an existing topic: checks the topic and queue, builds the message(s) and hands
    /// them to the writer. The returned future holds only what the reply needs.
    fn send_to(
        self: &Rc<Self>,
        req: &RemotingCommand,
        h: &SendHeaderRef<'_>,
        props: &SendProps<'_>,
        topic: SendTopic,
        born_host: SocketAddr,
        arrived: Instant,
    ) -> Handled {
        let queue_id = match self.send_queue(h, &topic, born_host) {
            Ok(q) => q,
            Err((code, remark)) => return Handled::Reply(reply(req, code, remark)),
        };
        let mut sys_flag = h.sys_flag;
        if topic.multi_tag {
            sys_flag |= sys_flag::MULTI_TAGS_FLAG;
        }
        let draft = Draft {
            h,
            queue_id,
            sys_flag,
            born_host,
            store_host: self.store_host,
            wait_store_msg_ok: props.wait_store_msg_ok,
        };
        let cluster = &self.settings.load().cluster;
        if is_batch(req, h.batch) {
            self.send_batch(req, &draft, props, cluster, arrived)
        } else {
            self.send_one(req, &draft, props, cluster, arrived)
        }
    }

    /// The queue a SEND goes to: the header's, or one picked at random for -1; refused when the
    /// topic is not writable or the queue does not exist (the refusal's code and remark).
    fn send_queue(
        &self,
        h: &SendHeaderRef<'_>,
        topic: &SendTopic,
        born_host: SocketAddr,
    ) -> Result<i32, (i32, String)> {
        if !topic.writable {
            return Err((
                rc::NO_PERMISSION,
                format!(
                    "the topic[{}] sending is forbidden (perm {})",
                    h.topic, topic.perm
                ),
            ));
        }
        let queues = topic.write_queue_nums.max(topic.read_queue_nums) as i32;
        let queue_id = if h.queue_id < 0 {
            (self.stats.next() % topic.write_queue_nums.max(1) as u64) as i32
        } else {
            h.queue_id
        };
        if queue_id >= queues {
            return Err((
                rc::SYSTEM_ERROR,
                format!("queueId[{queue_id}] is illegal, topic:[{}] topicConfig.writeQueueNums:[{}] consumer:[{born_host}]", h.topic, topic.write_queue_nums),
            ));
        }
        Ok(queue_id)
    }

    /// A batch SEND: its elements stored in one `put_producer_batch`, answered with all their
    /// msgIds.
    fn send_batch(
        self: &Rc<Self>,
        req: &RemotingCommand,
        draft: &Draft<'_, '_>,
        props: &SendProps<'_>,
        cluster: &str,
        arrived: Instant,
    ) -> Handled {
        let items = match decode_batch(&req.body) {
            Ok(items) if !items.is_empty() => items,
            Ok(_) => return Handled::Reply(reply(req, rc::MESSAGE_ILLEGAL, "the batch is empty")),
            Err(e) => {
                return Handled::Reply(reply(
                    req,
                    rc::MESSAGE_ILLEGAL,
                    format!("malformed batch body: {e}"),
                ))
            }
        };
        // Each element keeps its own properties and gets the batch's after them, duplicates
        // included (a reader's last duplicate wins), as 4.9.4's MessageExtBatchEncoder
        // writes them: so stored sizes are Java's. The batch's keep `WAIT` and get
        // `CLUSTER` set, in Java's HashMap order (SendMessageProcessor.sendBatchMessage).
        let batch_props = java_order(draft.h.properties, &[Op::Put(keys::CLUSTER, cluster)]);
        let msgs: Vec<NewMessage> = items
            .into_iter()
            .map(|it| {
                let p = with_properties(&it.properties, &batch_props);
                draft.message(it.body, it.flag, p)
            })
            .collect();
        let (core, topic, to) = (self.clone(), draft.h.topic.to_owned(), ReplyTo::of(req));
        let (kind, queue_id) = (props.kind, draft.queue_id);
        later(async move {
            let n = msgs.len() as u64;
            let bytes: u64 = msgs.iter().map(|m| m.body.len() as u64).sum();
            let put = core.store.put_producer_batch(msgs).await;
            match &put {
                Ok((ok, _)) => core.stats.store.record_put(n, ok.wrote_bytes),
                Err(_) => core.stats.store.record_put_failed(n),
            }
            match put {
                Ok((ok, offsets)) => {
                    core.account_batch(&topic, kind, n, bytes, arrived);
                    let ids: Vec<String> = offsets
                        .iter()
                        .map(|o| offset_msg_id(core.store_host, o.0 as i64))
                        .collect();
                    let hdr = SendMessageResponseHeader::new(
                        ids.join(","),
                        queue_id,
                        ok.queue_offset.0 as i64,
                    );
                    to.response(ok.status.response_code(), None)
                        .with_ext_fields(hdr.to_ext_fields())
                }
                Err(e) => to.response(e.status.response_code(), Some(e.remark)),
            }
        })
    }

    /// Counters, TPS, put latency and `/metrics` of a stored batch SEND of `n` messages.
    fn account_batch(&self, topic: &str, kind: MessageType, n: u64, bytes: u64, arrived: Instant) {
        Stats::add(&self.stats.put_msgs, n);
        self.rates.put(topic, n);
        let now = Instant::now();
        let took = now.saturating_duration_since(arrived);
        self.rates.put_latency(took);
        self.stats.store.record_put_time_at(now, took);
        Stats::add(&self.stats.put_bytes, bytes);
        self.metrics.messages_in(topic, kind, n, bytes);
    }

    /// A single-message SEND: queued in this turn's batch ([`super::send_batch::SendBatcher`]),
    /// answered when stored.
    fn send_one(
        &self,
        req: &RemotingCommand,
        draft: &Draft<'_, '_>,
        props: &SendProps<'_>,
        cluster: &str,
        arrived: Instant,
    ) -> Handled {
        let h = draft.h;
        let template = SendOk::template(draft.queue_id, props.uniq);
        // A reply keeps the requester's properties exactly as sent, WAIT included and no
        // CLUSTER added (4.9.4 ReplyMessageProcessor sets the header's string as it is).
        let stored = if matches!(req.code, rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2) {
            h.properties.to_owned()
        } else {
            props.stored(h.properties, cluster)
        };
        let msg = draft.message(req.body.clone(), h.flag, stored);
        let rx = self.batcher.enqueue(msg, props.kind, arrived);
        let (store_host, to) = (self.store_host, ReplyTo::of(req));
        later(async move {
            match rx.await {
                Ok(Ok(ok)) => template.reply(&to, &ok, store_host),
                Ok(Err(e)) => to.response(e.status.response_code(), Some(e.remark)),
                Err(_) => to.response(
                    PutStatus::ServiceNotAvailable.response_code(),
                    Some("the broker is shutting down".into()),
                ),
            }
        })
    }
}

/// What every message of one SEND shares: the header, the queue, the flags and hosts.
struct Draft<'h, 'a> {
    h: &'h SendHeaderRef<'a>,
    queue_id: i32,
    sys_flag: i32,
    born_host: SocketAddr,
    store_host: SocketAddr,
    /// The header's WAIT: a batch's own (4.9.4 reads the MessageExtBatch's properties), a
    /// single message's whether or not it is stored.
    wait_store_msg_ok: bool,
}

impl Draft<'_, '_> {
    fn message(&self, body: bytes::Bytes, flag: i32, properties: String) -> NewMessage {
        NewMessage {
            topic: self.h.topic.to_owned(),
            queue_id: self.queue_id,
            flag,
            sys_flag: self.sys_flag,
            born_timestamp: self.h.born_timestamp,
            born_host: self.born_host,
            store_host: self.store_host,
            reconsume_times: self.h.reconsume_times,
            prepared_tx_offset: 0,
            body_crc: body_crc(&body),
            body,
            properties,
            wait_store_msg_ok: self.wait_store_msg_ok,
        }
    }
}

/// What the SEND path reads of a topic's config.
#[derive(Clone, Copy)]
struct SendTopic {
    writable: bool,
    perm: u32,
    read_queue_nums: u32,
    write_queue_nums: u32,
    multi_tag: bool,
}

impl SendTopic {
    fn of(t: &TopicConfig) -> SendTopic {
        SendTopic {
            writable: t.writable(),
            perm: t.perm,
            read_queue_nums: t.read_queue_nums,
            write_queue_nums: t.write_queue_nums,
            multi_tag: t.topic_filter_type == "MULTI_TAG",
        }
    }
}

/// What the SEND path needs from a message's properties, found in one pass with the parser's
/// rules (last duplicate wins).
struct SendProps<'a> {
    transaction: bool,
    /// `WAIT`'s value, if there (it is not stored, unless the message is delayed).
    wait: Option<&'a str>,
    /// Java's `isWaitStoreMsgOK`: `WAIT` absent or "true" in any case (`Boolean.parseBoolean`;
    /// "FALSE" or "no" do not wait). Carried beside the stored bytes as
    /// [`NewMessage::wait_store_msg_ok`], since `WAIT` is not stored.
    wait_store_msg_ok: bool,
    /// `DELAY` holds a level above 0: the message goes to SCHEDULE_TOPIC_XXXX first.
    delayed: bool,
    uniq: Option<&'a str>,
    kind: MessageType,
}

impl<'a> SendProps<'a> {
    fn scan(props: &'a str) -> SendProps<'a> {
        let (mut wait, mut delayed, mut uniq) = (None, false, None);
        let mut kind = crate::metrics::TypeScan::default();
        for (k, v) in properties::entries(props) {
            match k {
                keys::CLUSTER => {} // the broker puts its own
                keys::WAIT => wait = Some(v),
                keys::DELAY => {
                    delayed = v.parse::<i32>().is_ok_and(|level| level > 0);
                    kind.see(k, v)
                }
                keys::UNIQ_KEY => uniq = Some(v),
                _ => kind.see(k, v),
            }
        }
        SendProps {
            transaction: kind.transaction(),
            wait,
            wait_store_msg_ok: wait.is_none_or(|v| v.eq_ignore_ascii_case("true")),
            delayed,
            uniq,
            kind: kind.kind(),
        }
    }

    /// The properties a single message is stored with, as 4.9.4's SendMessageProcessor stores
    /// them: `CLUSTER` put (Java's putProperty replaces a client's own in its place), `WAIT`
    /// removed whatever its value ("to save 9 bytes"), in Java's HashMap order ([`java_order`]).
    /// A delayed message keeps `WAIT`, put back after `CLUSTER`: CommitLog re-encodes the map,
    /// where the processor had put it back, when it moves it to SCHEDULE_TOPIC_XXXX. Whether the
    /// append waits travels as [`SendProps::wait_store_msg_ok`], not in these bytes. One
    /// allocation.
    fn stored(&self, props: &str, cluster: &str) -> String {
        let put = Op::Put(keys::CLUSTER, cluster);
        match self.wait {
            Some(w) if self.delayed => java_order(
                props,
                &[put, Op::Remove(keys::WAIT), Op::Put(keys::WAIT, w)],
            ),
            Some(_) => java_order(props, &[put, Op::Remove(keys::WAIT)]),
            None => java_order(props, &[put]),
        }
    }
}

/// Whether a SEND's body is a batch. Apache RocketMQ 4.9.4 decides by the request code alone
/// (SendMessageProcessor.asyncProcessRequest), so a 4.x client's SEND_MESSAGE(_V2) with
/// `batch=true` — Apache's C++ client sends its batches so — is stored as one message whose body
/// is the encoded batch. 5.x brokers go by the header's `batch` flag; a client announcing 5.0 or
/// later in the command's `version` gets that.
fn is_batch(req: &RemotingCommand, header_batch: bool) -> bool {
    req.code == rq::SEND_BATCH_MESSAGE || (header_batch && req.version >= V5_0_0)
}

/// `MQVersion.Version.V5_0_0.ordinal()` (common/.../MQVersion.java).
const V5_0_0: i32 = 413;

/// `first` followed by `rest`, with a separator between them if `first` lacks its trailing one
/// (4.9.4 CommitLog.MessageExtBatchEncoder: `needAppendLastPropertySeparator`).
fn with_properties(first: &str, rest: &str) -> String {
    let mut out = String::with_capacity(first.len() + rest.len() + 1);
    out.push_str(first);
    if !first.is_empty() && !rest.is_empty() && !first.ends_with(properties::PROPERTY_SEPARATOR) {
        out.push(properties::PROPERTY_SEPARATOR);
    }
    out.push_str(rest);
    out
}

/// What a reply needs of its request, so a pending SEND does not hold the request.
struct ReplyTo {
    opaque: i32,
    serialize_type: actormq_core::protocol::command::SerializeType,
}

impl ReplyTo {
    fn of(req: &RemotingCommand) -> ReplyTo {
        ReplyTo {
            opaque: req.opaque,
            serialize_type: req.serialize_type,
        }
    }

    fn response(&self, code: i32, remark: Option<String>) -> RemotingCommand {
        let mut r = RemotingCommand::new_request(code);
        r.flag = actormq_core::protocol::command::RESPONSE_FLAG;
        r.opaque = self.opaque;
        r.serialize_type = self.serialize_type;
        r.remark = remark.filter(|s| !s.is_empty());
        r
    }
}

/// A stored single-message SEND's reply header (`SendMessageResponseHeader`, fields in its
/// order), written before the append where it does not depend on it — queueId, the client's
/// UNIQ_KEY as transactionId, the constants — and finished with msgId and queueOffset once
/// stored: no copy of the UNIQ_KEY is kept for the reply, and the header's text is one buffer.
/// Filled for SUCCESS and for FLUSH_DISK_TIMEOUT alike, as RocketMQ does for its "sendOK" codes.
struct SendOk(actormq_core::protocol::command::ExtFields);

impl SendOk {
    fn template(queue_id: i32, transaction_id: Option<&str>) -> SendOk {
        let text = 96 + transaction_id.map_or(0, str::len);
        let mut ext = actormq_core::protocol::command::ExtFields::with_capacity_and_text(6, text);
        ext.push_wire_with("queueId", |t| {
            t.push_str(itoa::Buffer::new().format(queue_id))
        });
        if let Some(id) = transaction_id {
            ext.push_wire_with("transactionId", |t| t.push_str(id));
        }
        ext.push_wire_with("MSG_REGION", |t| t.push_str("DefaultRegion"));
        ext.push_wire_with("TRACE_ON", |t| t.push_str("true"));
        SendOk(ext)
    }

    /// The header's fields, msgId first and queueOffset third; the keys are distinct.
    fn fields(
        self,
        store_host: SocketAddr,
        phy_offset: i64,
        queue_offset: i64,
    ) -> actormq_core::protocol::command::ExtFields {
        let mut ext = self.0;
        ext.push_wire_at(0, "msgId", |t| {
            let _ = actormq_core::format::msg_id::write_offset_msg_id(t, store_host, phy_offset);
        });
        ext.push_wire_at(2, "queueOffset", |t| {
            t.push_str(itoa::Buffer::new().format(queue_offset))
        });
        ext
    }

    /// The reply: the append's code (SUCCESS, or stored-but-not-durable such as
    /// FLUSH_DISK_TIMEOUT) and the finished header.
    fn reply(self, to: &ReplyTo, ok: &AppendOk, store_host: SocketAddr) -> RemotingCommand {
        to.response(ok.status.response_code(), None)
            .with_ext_fields(self.fields(
                store_host,
                ok.phy_offset.0 as i64,
                ok.queue_offset.0 as i64,
            ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(entries: &[(&str, &str)]) -> String {
        properties::encode(entries)
    }

    #[test]
    fn a_single_message_is_stored_without_wait_and_with_the_brokers_cluster() {
        // What the Java client sends, and what 4.9.4 stores, in its HashMap order (each
        // expected string printed by a JVM): no WAIT, CLUSTER set.
        let sent = props(&[("WAIT", "true"), ("TAGS", "A"), ("UNIQ_KEY", "U1")]);
        let stored = SendProps::scan(&sent).stored(&sent, "DefaultCluster");
        assert_eq!(
            stored,
            props(&[
                ("UNIQ_KEY", "U1"),
                ("CLUSTER", "DefaultCluster"),
                ("TAGS", "A")
            ])
        );
        // A client's own CLUSTER is replaced, as Java's putProperty replaces it.
        let sent = props(&[("CLUSTER", "theirs"), ("TAGS", "A")]);
        let stored = SendProps::scan(&sent).stored(&sent, "ours");
        assert_eq!(stored, props(&[("CLUSTER", "ours"), ("TAGS", "A")]));
        let sent = props(&[("TAGS", "A")]);
        assert_eq!(
            SendProps::scan(&sent).stored(&sent, "c"),
            props(&[("CLUSTER", "c"), ("TAGS", "A")])
        );
    }

    /// 4.9.4 removes `WAIT` whatever its value, and its message in memory keeps it for
    /// `isWaitStoreMsgOK`: a `WAIT=false` send is stored without it and still does not wait for
    /// a SYNC_FLUSH flush or a SYNC_MASTER slave; any other value than "true" (any case) is false.
    #[test]
    fn a_wait_false_send_is_stored_without_wait_and_does_not_wait() {
        let message = |sent: &str| {
            let scan = SendProps::scan(sent);
            let mut m = NewMessage::new(
                "T",
                0,
                bytes::Bytes::new(),
                scan.stored(sent, "c"),
                0,
                "127.0.0.1:1".parse().unwrap(),
                "127.0.0.1:2".parse().unwrap(),
            );
            m.wait_store_msg_ok = scan.wait_store_msg_ok;
            m
        };
        // Java's stored string for {WAIT=false, TAGS=A} with CLUSTER=c put and WAIT removed.
        let m = message(&props(&[("WAIT", "false"), ("TAGS", "A")]));
        assert_eq!(m.properties, props(&[("CLUSTER", "c"), ("TAGS", "A")]));
        assert!(!crate::store::writer::waits(&m));
        let m = message(&props(&[("WAIT", "FALSE"), ("TAGS", "A")]));
        assert!(!crate::store::writer::waits(&m));
        assert_eq!(properties::find(&m.properties, keys::WAIT), None);
        let m = message(&props(&[("WAIT", "no")]));
        assert!(!crate::store::writer::waits(&m));
        // Absent or "true" in any case waits; either way nothing of it is stored.
        for sent in [
            props(&[("TAGS", "A")]),
            props(&[("WAIT", "True"), ("TAGS", "A")]),
        ] {
            let m = message(&sent);
            assert!(crate::store::writer::waits(&m), "{sent:?}");
            assert_eq!(m.properties, props(&[("CLUSTER", "c"), ("TAGS", "A")]));
        }
        // A delayed WAIT=false keeps its entry in the stored bytes (as 4.9.4's re-encoded map
        // does) and still does not wait.
        let m = message(&props(&[("WAIT", "false"), ("DELAY", "3")]));
        assert_eq!(
            m.properties,
            props(&[("CLUSTER", "c"), ("DELAY", "3"), ("WAIT", "false")])
        );
        assert!(!crate::store::writer::waits(&m));
    }

    #[test]
    fn a_delayed_message_keeps_wait_as_4_9_4_stores_it() {
        let sent = props(&[("WAIT", "true"), ("DELAY", "3")]);
        let stored = SendProps::scan(&sent).stored(&sent, "c");
        assert_eq!(
            stored,
            props(&[("CLUSTER", "c"), ("DELAY", "3"), ("WAIT", "true")])
        );
        // Level 0 is no delay: WAIT goes.
        let sent = props(&[("WAIT", "true"), ("DELAY", "0")]);
        let stored = SendProps::scan(&sent).stored(&sent, "c");
        assert_eq!(stored, props(&[("CLUSTER", "c"), ("DELAY", "0")]));
    }

    #[test]
    fn batch_elements_get_the_batch_properties_appended_duplicates_included() {
        // Both as Java's clients and broker write them: no separator after the last entry.
        let batch = props(&[("WAIT", "true"), ("CLUSTER", "c")]);
        let element = props(&[("WAIT", "true"), ("TAGS", "C")]);
        assert_eq!(
            with_properties(&element, &batch),
            format!("{element}\u{2}{batch}")
        );
        // An element that ends in a separator gets no second one.
        assert_eq!(
            with_properties("TAGS\u{1}C\u{2}", &batch),
            format!("TAGS\u{1}C\u{2}{batch}")
        );
        assert_eq!(with_properties("", &batch), batch);
    }

    #[test]
    fn a_batch_is_told_by_its_request_code_unless_a_5_x_client_flags_it() {
        let mut req = RemotingCommand::new_request(rq::SEND_MESSAGE_V2);
        req.version = 401; // V4_9_4: Apache's C++ client and 4.x clients
        assert!(!is_batch(&req, true));
        req.version = V5_0_0;
        assert!(is_batch(&req, true));
        assert!(!is_batch(&req, false));
        req.code = rq::SEND_BATCH_MESSAGE;
        req.version = 401;
        assert!(is_batch(&req, false));
    }

    #[test]
    fn the_send_reply_header_is_the_typed_headers_bytes() {
        let host: SocketAddr = "10.1.2.3:10911".parse().unwrap();
        for tx in [None, Some("7F0000010001B4AAC26B1C7A1E0A0000")] {
            let mut typed = SendMessageResponseHeader::new(offset_msg_id(host, 123_456), 3, 42);
            typed.transaction_id = tx.map(str::to_owned);
            let fast = SendOk::template(3, tx).fields(host, 123_456, 42);
            let want: Vec<_> = typed
                .to_ext_fields()
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let got: Vec<_> = fast
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            assert_eq!(got, want);
        }
    }

    /// A SEND_OK frame, byte for byte as this broker wrote it before its header had a template
    /// (the frame a Java client reads: JSON header, fields in SendMessageResponseHeader's order).
    #[test]
    fn a_send_ok_frame_keeps_its_bytes() {
        use actormq_core::offset::{PhyOffset, QueueOffset};
        let host: SocketAddr = "10.1.2.3:10911".parse().unwrap();
        let frame = |status: PutStatus, opaque: i32, uniq: Option<&str>, q: (i32, u64, u64)| {
            let to = ReplyTo {
                opaque,
                serialize_type: actormq_core::protocol::command::SerializeType::Json,
            };
            let ok = AppendOk {
                phy_offset: PhyOffset(q.1),
                wrote_bytes: 1199,
                queue_offset: QueueOffset(q.2),
                msg_num: 1,
                store_timestamp: 1_700_000_000_000,
                rolled_into: None,
                status,
            };
            let mut out = bytes::BytesMut::new();
            actormq_core::protocol::codec::encode_frame(
                &SendOk::template(q.0, uniq).reply(&to, &ok, host),
                &mut out,
            );
            out.to_vec()
        };
        // The length word, the type word (JSON: 0, then the header's length), the header.
        let golden = |header: &str| {
            let len = header.len() as u32;
            let mut v = (len + 4).to_be_bytes().to_vec();
            v.extend_from_slice(&len.to_be_bytes());
            v.extend_from_slice(header.as_bytes());
            v
        };
        let uniq = "7F0000010001B4AAC26B1C7A1E0A0000";
        assert_eq!(
            frame(PutStatus::PutOk, 42, Some(uniq), (3, 123_456, 7)),
            golden(
                r#"{"code":0,"language":"JAVA","version":401,"opaque":42,"flag":1,"remark":null,"extFields":{"msgId":"0A01020300002A9F000000000001E240","queueId":"3","queueOffset":"7","transactionId":"7F0000010001B4AAC26B1C7A1E0A0000","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"serializeTypeCurrentRPC":"JSON"}"#
            )
        );
        // FLUSH_DISK_TIMEOUT (10) is a stored SEND's code too; no UNIQ_KEY, no transactionId;
        // the widest numbers. 287 bytes after the length word, 283 of them the header.
        let widest = frame(
            PutStatus::FlushDiskTimeout,
            i32::MIN,
            None,
            (i32::MAX, u64::MAX >> 1, u64::MAX >> 1),
        );
        assert_eq!(widest.get(..8), Some(&[0, 0, 1, 31, 0, 0, 1, 27][..]));
        assert_eq!(
            widest,
            golden(
                r#"{"code":10,"language":"JAVA","version":401,"opaque":-2147483648,"flag":1,"remark":null,"extFields":{"msgId":"0A01020300002A9F7FFFFFFFFFFFFFFF","queueId":"2147483647","queueOffset":"9223372036854775807","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"serializeTypeCurrentRPC":"JSON"}"#
            )
        );
    }

    #[test]
    fn one_pass_over_the_properties_reads_what_the_lookups_read() {
        let p = |entries: &[(&str, &str)]| properties::encode(entries);
        let cases = [
            String::new(),
            p(&[("UNIQ_KEY", "AB"), ("TAGS", "t")]),
            p(&[("TRAN_MSG", "true"), ("UNIQ_KEY", "A"), ("UNIQ_KEY", "B")]),
            p(&[("TRAN_MSG", "true"), ("TRAN_MSG", "false")]),
            p(&[("TRAN_MSG", "TRUE")]),
            p(&[("CLUSTER", "c1"), ("__SHARDINGKEY", "k")]),
            p(&[("DELAY", "3")]),
            p(&[("__STARTDELIVERTIME", "1700000000000")]),
            // A segment the parser drops (empty value) and no trailing separator.
            "UNIQ_KEY\u{1}\u{2}TAGS\u{1}x".to_string(),
        ];
        for props in &cases {
            let s = SendProps::scan(props);
            assert_eq!(s.uniq, properties::find(props, keys::UNIQ_KEY), "{props:?}");
            assert_eq!(
                s.transaction,
                properties::find(props, keys::TRAN_MSG)
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                "{props:?}"
            );
            assert_eq!(s.kind, crate::metrics::message_type(props), "{props:?}");
            assert_eq!(s.transaction, s.kind == MessageType::Transaction);
        }
    }
}
