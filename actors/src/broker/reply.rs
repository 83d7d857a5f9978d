//! Request-reply: SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325), as RocketMQ 4.9.4's
//! `ReplyMessageProcessor` answers them
//! (broker/src/main/java/org/apache/rocketmq/broker/processor/ReplyMessageProcessor.java).
//!
//! A consumer answering a `DefaultMQProducer.request(...)` sends its reply message with one of
//! these codes. The broker pushes it to the requester — PUSH_REPLY_MESSAGE_TO_CLIENT (326,
//! header [`ReplyMessageRequestHeader`], body the message body) on the connection the client id
//! in the message's `REPLY_TO_CLIENT` property last sent a producer heartbeat through
//! ([`messages::FindClient`]), awaiting the requester's response through
//! [`super::client_call::call_client`] — and stores it (RocketMQ's `storeReplyMessageEnable`,
//! on by default and always on here) through the ordinary SEND path, so the reply topic's
//! consumers and queries see it.
//!
//! The answer, as RocketMQ's: the push decides the code — SUCCESS, or SYSTEM_ERROR with
//! RocketMQ's remark (`reply message properties[REPLY_TO_CLIENT] is null`, `push reply message
//! fail, channel of <id> not found.`, `push reply message to <id>fail.`); the store, when it
//! succeeds, fills in msgId, queueId and queueOffset (else msgId `0` and queueOffset 0 after a
//! push that worked). A request the SEND path refuses before storing (bad header, no write
//! permission, bad topic) is answered with the SEND path's refusal and nothing is pushed, as
//! RocketMQ's `msgCheck` answers before it pushes.
//!
//! Owns no state; the pending push lives in the requester's `Connection`.

use std::rc::Rc;

use actormq_core::format::java_order::{java_order, Op};
use actormq_core::format::properties::{self, keys as names};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{ReplyMessageRequestHeader, SendMessageRequestHeader};

use super::client_call::{call_client, CallOutcome, CALL_CLIENT_TIMEOUT};
use super::context::{header_or_reply, later, reply, BrokerCore};
use super::messages;
use crate::remoting::server::{ConnInfo, Handled};

impl BrokerCore {
    /// SEND_REPLY_MESSAGE / SEND_REPLY_MESSAGE_V2.
    pub(super) fn send_reply(self: Rc<Self>, req: RemotingCommand, conn: &ConnInfo) -> Handled {
        let h = header_or_reply!(SendMessageRequestHeader, req);
        let born = conn.peer;
        let now_ms = self.now_ms();
        // The store goes through the SEND path, which runs its checks now; a refusal there is
        // the answer and nothing is pushed.
        let stored = match self.clone().send(req.clone(), conn) {
            Handled::Reply(r) if r.code != rc::SUCCESS => return Handled::Reply(r),
            other => other,
        };
        later(async move {
            let pushed = self.push_reply(&h, &req, born, now_ms).await;
            let stored = match stored {
                Handled::Reply(r) => Some(r),
                Handled::Later(f) => f.await,
                Handled::NoReply => None,
            };
            let mut resp = match &pushed {
                Ok(()) => RemotingCommand::response_to(&req, rc::SUCCESS, None),
                Err(remark) => reply(&req, rc::SYSTEM_ERROR, remark.clone()),
            };
            match stored.filter(|s| s.code == rc::SUCCESS || is_flush_timeout(s.code)) {
                Some(s) => resp.ext_fields = s.ext_fields,
                None => {
                    if pushed.is_ok() {
                        resp = resp
                            .with_ext("msgId", "0")
                            .with_ext("queueId", h.queue_id.to_string())
                            .with_ext("queueOffset", "0");
                    }
                    resp = resp
                        .with_ext("MSG_REGION", "DefaultRegion")
                        .with_ext("TRACE_ON", "true");
                }
            }
            resp
        })
    }

    /// Pushes the reply to its requester's connection; `Err` is RocketMQ's remark.
    async fn push_reply(
        &self,
        h: &SendMessageRequestHeader,
        req: &RemotingCommand,
        born: std::net::SocketAddr,
        now_ms: i64,
    ) -> Result<(), String> {
        let Some(to) = properties::find(&h.properties, names::REPLY_TO_CLIENT).map(str::to_string)
        else {
            tracing::warn!("REPLY_TO_CLIENT is null, can not reply message");
            return Err(format!(
                "reply message properties[{}] is null",
                names::REPLY_TO_CLIENT
            ));
        };
        let ch = match self.clients.send(messages::FindClient(to.clone())).await {
            Ok(Some(ch)) => ch,
            _ => {
                let remark = format!("push reply message fail, channel of <{to}> not found.");
                tracing::warn!("{remark}");
                return Err(remark);
            }
        };
        let header = ReplyMessageRequestHeader {
            producer_group: h.producer_group.clone(),
            topic: h.topic.clone(),
            default_topic: h.default_topic.clone(),
            default_topic_queue_nums: h.default_topic_queue_nums,
            queue_id: h.queue_id,
            sys_flag: h.sys_flag,
            born_timestamp: h.born_timestamp,
            flag: h.flag,
            // ReplyMessageProcessor.pushReplyMessage: the parsed map with PUSH_REPLY_TIME put,
            // written in its HashMap order.
            properties: Some(java_order(
                &h.properties,
                &[Op::Put(names::PUSH_REPLY_TIME, &now_ms.to_string())],
            )),
            reconsume_times: Some(h.reconsume_times),
            unit_mode: h.unit_mode,
            born_host: format!("{}:{}", born.ip(), born.port()),
            store_host: format!("{}:{}", self.store_host.ip(), self.store_host.port()),
            store_timestamp: now_ms,
        };
        let push = RemotingCommand::new_request(rq::PUSH_REPLY_MESSAGE_TO_CLIENT)
            .with_ext_fields(header.to_ext_fields())
            .with_body(req.body.clone());
        let fail = || format!("push reply message to {to}fail.");
        match call_client(&ch.conn, push, CALL_CLIENT_TIMEOUT).await {
            CallOutcome::Answered(r) if r.code == rc::SUCCESS => Ok(()),
            CallOutcome::Answered(r) => {
                tracing::warn!(client = %to, remark = ?r.remark, "push reply message: the requester refused it");
                Err(fail())
            }
            CallOutcome::TimedOut | CallOutcome::Gone(_) => {
                tracing::warn!(client = %to, addr = %ch.addr, "push reply message failed");
                Err(fail())
            }
        }
    }

    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// RocketMQ counts a reply stored but not yet flushed or replicated as stored.
fn is_flush_timeout(code: i32) -> bool {
    code == rc::FLUSH_DISK_TIMEOUT
        || code == rc::FLUSH_SLAVE_TIMEOUT
        || code == rc::SLAVE_NOT_AVAILABLE
}
