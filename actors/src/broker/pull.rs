//! The PULL path: PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), as RocketMQ 4.9.4's
//! PullMessageProcessor answers them.
//!
//! A PULL is checked (permissions, queue, filter type), commits the offset it carries, reads the
//! queue from the lock-free store reader on the connection thread, and is answered at once (the
//! records as body parts over the mapped CommitLog, written to the socket uncopied) — or,
//! finding nothing, handed to [`super::pull_hold::PullHold`] (message out: `SuspendPull`), which resumes it when a
//! message arrives or its time is up (the connection re-runs it with `resumed`). A master answers
//! PULL_OFFSET_MOVED with an OffsetMovedEvent written in the background, as Java does.

use std::rc::Rc;
use std::time::{Duration, Instant};

use actormq_core::format::properties::{self, keys};
use actormq_core::format::record::{body_crc, NewMessage};
use actormq_core::meta;
use actormq_core::offset::QueueOffset;
use actormq_core::protocol::body::{MessageQueue, OffsetMovedEvent};
use actormq_core::protocol::codes::response_code as rc;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::faq;
use actormq_core::protocol::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use actormq_core::store::reader::{mapped_bytes, GetLimits, GetResult, GetStatus, TagFilter};

use super::context::{header_or_reply, reply, BrokerCore};
use super::messages::{self, SuspendPull};
use super::pull_hold::{hold, LONG_POLLING_RECHECK};
use super::settings::ProcessorSettings;
use super::store_stats::Stats;
use crate::remoting::server::{ConnInfo, Handled};

fn status_name(s: GetStatus) -> &'static str {
    match s {
        GetStatus::Found => "FOUND",
        GetStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
        GetStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
        GetStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
        GetStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
        GetStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
        GetStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
        GetStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
        GetStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
    }
}

/// `updateSubGroup -s false` (consumeEnable) stops a group's consumption, as in RocketMQ.
fn consumption_off(req: &RemotingCommand, group: &str) -> RemotingCommand {
    reply(
        req,
        rc::NO_PERMISSION,
        format!("subscription group no permission, {group}"),
    )
}

impl BrokerCore {
    pub(super) fn pull(
        self: Rc<Self>,
        req: RemotingCommand,
        conn: &ConnInfo,
        resumed: bool,
    ) -> Handled {
        let h = header_or_reply!(PullMessageRequestHeader, req);
        let consume_enable = self
            .meta_view
            .with_group(&h.consumer_group, |g| g.consume_enable);
        if consume_enable == Some(false) {
            return Handled::Reply(consumption_off(&req, &h.consumer_group));
        }
        if consume_enable.is_none() {
            // First pull of an unknown group: create it (autoCreateSubscriptionGroup), then pull.
            let conn = conn.clone();
            return Handled::Later(Box::pin(async move {
                match self
                    .meta
                    .send(messages::EnsureGroup(h.consumer_group.clone()))
                    .await
                {
                    Ok(Ok(Some(g))) if !g.consume_enable => {
                        return Some(consumption_off(&req, &h.consumer_group))
                    }
                    Ok(Ok(Some(_))) => {}
                    _ => {
                        return Some(reply(
                            &req,
                            rc::SUBSCRIPTION_GROUP_NOT_EXIST,
                            format!(
                                "subscription group [{}] does not exist, {}",
                                h.consumer_group,
                                faq::suggest_todo(faq::SUBSCRIPTION_GROUP_NOT_EXIST)
                            ),
                        ))
                    }
                }
                match self.pull_now(req, h, &conn, resumed) {
                    Handled::Reply(r) => Some(r),
                    Handled::Later(f) => f.await,
                    Handled::NoReply => None,
                }
            }));
        }
        self.pull_now(req, h, conn, resumed)
    }

    fn pull_now(
        &self,
        req: RemotingCommand,
        h: PullMessageRequestHeader,
        conn: &ConnInfo,
        resumed: bool,
    ) -> Handled {
        if let Some(refused) = self.pull_refused(&req, &h, conn) {
            return Handled::Reply(refused);
        }
        let filter = match self.pull_filter(&h) {
            Ok(f) => f,
            Err(remark) => return Handled::Reply(reply(&req, rc::SYSTEM_ERROR, remark)),
        };
        self.commit_with_pull(&h, resumed);
        let settings = self.settings.load();
        let offset = h.queue_offset.max(0) as u64;
        let mut r = self.read_queue(&h, &settings, &filter);
        let slave = self.store.params().broker_role.is_slave();
        // RocketMQ's `nextOffsetCorrection`: a slave may be behind its master, so unless
        // `offsetCheckInSlave` it never moves a consumer's offset; the consumer keeps it and goes
        // back to the master.
        let corrects = !slave || settings.offset_check_in_slave;
        if !corrects
            && !matches!(
                r.status,
                GetStatus::Found | GetStatus::NoMatchedMessage | GetStatus::MessageWasRemoving
            )
        {
            r.next_begin_offset = QueueOffset(offset);
        }
        let (code, suggest) = self.pull_code(&h, &r, &settings, corrects);
        if code == rc::PULL_OFFSET_MOVED && !slave {
            self.offset_moved_event(&h, r.next_begin_offset.0 as i64);
        }
        if code == rc::PULL_NOT_FOUND && h.has_suspend() && !resumed {
            self.suspend_pull(req, &h, conn, r.max_offset.0, &settings);
            return Handled::NoReply;
        }
        Handled::Reply(self.pull_answer(&req, &h, r, code, suggest))
    }

    /// The broker's and the topic's read permission and the queue, checked: the refusal, if
    /// any.
    fn pull_refused(
        &self,
        req: &RemotingCommand,
        h: &PullMessageRequestHeader,
        conn: &ConnInfo,
    ) -> Option<RemotingCommand> {
        let perm = self.settings.load().broker_perm;
        if perm & meta::PERM_READ == 0 {
            return Some(reply(
                req,
                rc::NO_PERMISSION,
                format!(
                    "the broker[{}] pulling message is forbidden (brokerPermission {perm})",
                    self.store_host
                ),
            ));
        }
        let Some(topic) = self.meta_view.topic(&h.topic) else {
            return Some(reply(
                req,
                rc::TOPIC_NOT_EXIST,
                format!(
                    "topic[{}] not exist, apply first please! {}",
                    h.topic,
                    faq::suggest_todo(faq::APPLY_TOPIC_URL)
                ),
            ));
        };
        if !topic.readable() {
            return Some(reply(
                req,
                rc::NO_PERMISSION,
                format!("the topic[{}] pulling is forbidden", h.topic),
            ));
        }
        if h.queue_id < 0 || h.queue_id as u32 >= topic.read_queue_nums {
            return Some(reply(
                req,
                rc::SYSTEM_ERROR,
                format!("queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]", h.queue_id, h.topic, topic.read_queue_nums, conn.peer),
            ));
        }
        None
    }

    /// The pull's tag filter: the request's subscription, else the one the group's heartbeat
    /// registered, else everything; the refusal's remark (SYSTEM_ERROR) for a filter type
    /// other than tags.
    fn pull_filter(&self, h: &PullMessageRequestHeader) -> Result<TagFilter, String> {
        // Only tag expressions are filtered here (enablePropertyFilter is not supported): a
        // SQL92 expression read as a tag would match nothing, and every message of the queue
        // would be skipped past as filtered. RocketMQ answers the same refusal.
        let stored = (!h.has_subscription())
            .then(|| self.subs.get(&h.consumer_group, &h.topic))
            .flatten();
        let expression_type = match &stored {
            Some(s) => Some(s.expression_type.as_str()),
            None => h.expression_type.as_deref(),
        };
        if let Some(t) = expression_type.filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("TAG"))
        {
            return Err(format!(
                "The broker does not support consumer to filter message by {t}"
            ));
        }
        if h.has_subscription() {
            return Ok(TagFilter::from_expression(
                h.subscription.as_deref().unwrap_or("*"),
            ));
        }
        // The hashes are computed here from the tag strings, not taken from the client's
        // `codeSet`: some clients (rocketmq-client-rust 1.0.0) send hashes that are not Java's
        // String.hashCode, which the ConsumeQueue stores, and every message would be filtered.
        Ok(match &stored {
            Some(s) if s.sub_string.trim() == "*" || s.sub_string.trim().is_empty() => {
                TagFilter::all()
            }
            Some(s) if !s.tags_set.is_empty() => TagFilter::from_expression(&s.tags_set.join("||")),
            Some(s) => TagFilter::from_expression(&s.sub_string),
            None => TagFilter::all(),
        })
    }

    /// The offset a PULL carries (`commitOffset`), committed in the background — not on a slave
    /// (RocketMQ's rule): its offsets are its master's, copied every 10 s.
    fn commit_with_pull(&self, h: &PullMessageRequestHeader, resumed: bool) {
        if h.has_commit_offset()
            && !resumed
            && h.commit_offset >= 0
            && !self.store.params().broker_role.is_slave()
        {
            let m = messages::CommitOffset {
                group: h.consumer_group.clone(),
                topic: h.topic.clone(),
                queue_id: h.queue_id,
                offset: h.commit_offset,
            };
            let meta = self.meta.clone();
            actix_rt::spawn(async move {
                let _ = meta.send(m).await;
            });
        }
    }

    /// Reads the queue within the request's and the store's caps, and counts the read.
    fn read_queue(
        &self,
        h: &PullMessageRequestHeader,
        settings: &ProcessorSettings,
        filter: &TagFilter,
    ) -> GetResult {
        // The request's caps with the store's, separately for records in memory and on disk
        // (RocketMQ's isTheBatchFull: the on-disk values alone apply on disk, whichever is
        // larger).
        let (want_msgs, want_bytes) = (
            h.max_msg_nums.max(1) as usize,
            h.max_msg_bytes.map_or(usize::MAX, |b| b.max(1) as usize),
        );
        let limits = GetLimits {
            max_msgs: want_msgs.min(settings.max_transfer_count.max(1)),
            max_bytes: want_bytes.min(settings.max_transfer_bytes),
            max_msgs_on_disk: want_msgs.min(settings.max_transfer_count_on_disk.max(1)),
            max_bytes_on_disk: want_bytes.min(settings.max_transfer_bytes_on_disk),
            hot_bytes: settings.hot_bytes,
        };
        let offset = h.queue_offset.max(0) as u64;
        let read_at = Instant::now();
        let mut r =
            self.reader
                .get_messages(&h.topic, h.queue_id, QueueOffset(offset), limits, filter);
        if h.queue_offset < 0 && r.max_offset.0 > 0 {
            // Below every offset, as RocketMQ's getMessage sees a negative one: OFFSET_TOO_SMALL,
            // to be corrected to the queue's min (not served from 0 as if asked for it).
            r.status = GetStatus::OffsetTooSmall;
            r.next_begin_offset = r.min_offset;
            r.messages.clear();
            r.queue_offsets.clear();
            r.total_bytes = 0;
        }
        // Every read counts, a held pull's re-checks too (each is a getMessage in RocketMQ).
        self.stats.store.record_get(
            r.status == GetStatus::Found,
            r.messages.len() as u64,
            read_at.elapsed(),
        );
        r
    }

    /// The answer's code for a read, and the broker the consumer should pull from next.
    fn pull_code(
        &self,
        h: &PullMessageRequestHeader,
        r: &GetResult,
        settings: &ProcessorSettings,
        corrects: bool,
    ) -> (i32, i64) {
        let (home, slowly) = self
            .meta_view
            .with_group(&h.consumer_group, |g| {
                (
                    g.broker_id as i64,
                    g.which_broker_when_consume_slowly as i64,
                )
            })
            .unwrap_or((0, 1));
        // PullMessageProcessor: with `slaveReadEnable` the answer names the group's
        // `whichBrokerWhenConsumeSlowly` to a consumer reading far behind, else the group's home
        // broker; without it, always the master.
        let suggest = match (settings.slave_read_enable, r.suggest_pulling_from_slave) {
            (false, _) => 0,
            (true, true) => slowly,
            (true, false) => home,
        };
        let code = match r.status {
            GetStatus::Found => rc::SUCCESS,
            GetStatus::NoMatchedLogicQueue | GetStatus::NoMessageInQueue => {
                if h.queue_offset != 0 {
                    rc::PULL_OFFSET_MOVED
                } else {
                    rc::PULL_NOT_FOUND
                }
            }
            GetStatus::OffsetOverflowOne | GetStatus::OffsetFoundNull => rc::PULL_NOT_FOUND,
            GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly => rc::PULL_OFFSET_MOVED,
            GetStatus::NoMatchedMessage | GetStatus::MessageWasRemoving => {
                rc::PULL_RETRY_IMMEDIATELY
            }
        };
        // A slave that does not correct offsets says "try again" (at the group's home broker)
        // where a master would say the offset moved.
        if code == rc::PULL_OFFSET_MOVED && !corrects {
            (rc::PULL_RETRY_IMMEDIATELY, home)
        } else {
            (code, suggest)
        }
    }

    /// Holds a PULL that found nothing until a message arrives or its time is up
    /// (`PullHold`): long polling, or `shortPollingTimeMills` without it.
    fn suspend_pull(
        &self,
        req: RemotingCommand,
        h: &PullMessageRequestHeader,
        conn: &ConnInfo,
        max_offset: u64,
        settings: &ProcessorSettings,
    ) {
        let (wait, recheck) = if settings.long_polling {
            (
                Duration::from_millis(h.suspend_timeout_millis.clamp(0, 30_000) as u64),
                LONG_POLLING_RECHECK,
            )
        } else {
            (settings.short_polling, settings.short_polling)
        };
        let offset = h.queue_offset.max(0) as u64;
        let (wake_above, wait) = hold(offset, max_offset, wait, recheck);
        let m = SuspendPull {
            topic: h.topic.clone(),
            queue_id: h.queue_id,
            offset: wake_above,
            deadline: Instant::now() + wait,
            request: req,
            conn: conn.conn.clone(),
        };
        let hold = self.pull_hold.clone();
        actix_rt::spawn(async move {
            let _ = hold.send(m).await;
        });
    }

    /// The PULL's answer: offsets in the header, and on SUCCESS the records, counted.
    fn pull_answer(
        &self,
        req: &RemotingCommand,
        h: &PullMessageRequestHeader,
        r: GetResult,
        code: i32,
        suggest: i64,
    ) -> RemotingCommand {
        let hdr = PullMessageResponseHeader {
            suggest_which_broker_id: suggest,
            next_begin_offset: r.next_begin_offset.0 as i64,
            min_offset: r.min_offset.0 as i64,
            max_offset: r.max_offset.0 as i64,
            ..Default::default()
        };
        let resp = reply(req, code, status_name(r.status)).with_ext_fields(hdr.to_ext_fields());
        if code != rc::SUCCESS {
            return resp;
        }
        let (n, bytes) = (r.messages.len() as u64, r.total_bytes as u64);
        Stats::add(&self.stats.got_msgs, n);
        self.rates.get(&h.consumer_group, &h.topic, n);
        Stats::add(&self.stats.got_bytes, bytes);
        self.metrics
            .messages_out(&h.topic, &h.consumer_group, n, bytes);
        // The records as they lie in the mapped CommitLog: the connection writes them to the
        // socket from there (no copy), and each keeps its file mapped until it is written.
        resp.with_body_parts(r.messages.into_iter().map(mapped_bytes).collect())
    }

    /// 4.9.4's PullMessageProcessor.generateOffsetMovedEvent: on every PULL_OFFSET_MOVED a master
    /// answers, an OffsetMovedEvent message goes to queue 0 of `OFFSET_MOVED_EVENT` — body the
    /// event's fastjson text, TAGS and KEYS the group, DELAY=0, flag and sysFlag 0, born and
    /// store host this broker. It takes CommitLog space as in Java, so later offsets match. (A
    /// slave with `offsetCheckInSlave` would try too, but its store refuses puts.) Written in the
    /// background: the pull's answer does not wait for it, and a failure is only logged.
    fn offset_moved_event(&self, h: &PullMessageRequestHeader, offset_new: i64) {
        let group = &h.consumer_group;
        let event = OffsetMovedEvent {
            consumer_group: group.clone(),
            message_queue: MessageQueue {
                topic: h.topic.clone(),
                broker_name: self.settings.load().broker_name.clone(),
                queue_id: h.queue_id,
            },
            offset_new,
            offset_request: h.queue_offset,
        };
        let Ok(body) = actormq_core::protocol::fastjson::to_vec(&event) else {
            return;
        };
        let body = bytes::Bytes::from(body);
        // Java's HashMap order for these three keys (bucket 7, 13, 14); sizes do not depend on it.
        let properties = properties::encode(&[
            (keys::KEYS, group.as_str()),
            (keys::DELAY, "0"),
            (keys::TAGS, group.as_str()),
        ]);
        let msg = NewMessage {
            topic: "OFFSET_MOVED_EVENT".to_string(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            born_host: self.store_host,
            store_host: self.store_host,
            reconsume_times: 0,
            prepared_tx_offset: 0,
            body_crc: body_crc(&body),
            body,
            properties,
            wait_store_msg_ok: true, // no WAIT in Java's map
        };
        // Straight to the writer: `Store::put` refuses system topics, as a SEND must.
        let (writer, stats) = (self.store.writer().clone(), self.stats.clone());
        actix_rt::spawn(async move {
            match crate::store::writer::append(&writer, crate::store::messages::AppendMessage(msg))
                .await
            {
                Ok(Ok(a)) => stats.store.record_put(1, a.wrote_bytes),
                Ok(Err(e)) => {
                    stats.store.record_put_failed(1);
                    tracing::warn!(status = ?e.status, remark = %e.remark, "OffsetMovedEvent not stored");
                }
                Err(e) => tracing::warn!(error = %e, "OffsetMovedEvent not stored"),
            }
        });
    }
}
