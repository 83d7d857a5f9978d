//! Requests the broker answers by asking its clients: GET_CONSUMER_RUNNING_INFO (307, mqadmin
//! `consumerStatus`, the Dashboard's consumer detail), forwarded to one client as RocketMQ
//! 4.9.4's `AdminBrokerProcessor.callConsumer` does
//! (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java); and
//! INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, mqadmin `getConsumerStatus`), for which each
//! consumer of the group is asked GET_CONSUMER_STATUS_FROM_CLIENT (221) in turn, as
//! `Broker2Client.getConsumeStatus` does (broker/…/client/net/Broker2Client.java).
//!
//! Flow: the handler asks the `ClientRegistry` for the consumer's connection
//! ([`messages::FindConsumer`]), sends that `Connection` a [`Call`] with a copy of the request
//! (same code, extFields and body), and awaits the client's response on a oneshot channel for
//! [`CALL_CLIENT_TIMEOUT`]. The client's response is the admin's response (its code, remark,
//! extFields and body), with the admin request's opaque.
//!
//! Owns no state: the pending call lives in the consumer's `Connection` (its table of calls by
//! opaque), which drops it at the deadline or when the connection closes.
//!
//! 223, as 4.9.4: the 221 carries only `topic` and `group`; a consumer that does not answer
//! SUCCESS with a `GetConsumerStatusBody` within 5 s is left out; with `clientAddr` (a client
//! id) only that consumer is asked. The answer is SUCCESS with Java's untouched default remark
//! `not set any response code` and `{"consumerTable":{<clientId>:{<queue>:<offset>,…}},
//! "messageQueueTable":{}}` ([`consumer_status_json`]). A client older than V3_0_7_SNAPSHOT met
//! before the asked one ends it: SYSTEM_ERROR `the client does not support this feature.
//! version=<name>`. Consumers are taken in client-id order (Java: its channel table's hash
//! order). No consumer online ⇒ SYSTEM_ERROR `No Any Consumer online in the consumer group:
//! [<g>]`, the remark 4.9.4 writes for a known group without consumers; for a group it does not
//! know (ActorMQ forgets a group with its last consumer) 4.9.4 answers SYSTEM_ERROR with the
//! text of a NullPointerException instead.
//!
//! Remarks as RocketMQ's: not online ⇒ SYSTEM_ERROR `The Consumer <g> <id> not online`; a client
//! older than V3_1_8_SNAPSHOT ⇒ SYSTEM_ERROR; no response in time ⇒ CONSUME_MSG_TIMEOUT
//! `consumer <g> <id> Timeout: …`; the connection gone ⇒ SYSTEM_ERROR `invoke consumer <g> <id>
//! Exception: …`.

use std::rc::Rc;
use std::time::Duration;

use actormq_core::protocol::body::MessageQueue;
use actormq_core::protocol::codes::request_code as rq;
use actormq_core::protocol::codes::response_code as rc;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::consumer_status::{client_offsets, consumer_status_json};
use actormq_core::protocol::header::{
    GetConsumerRunningInfoRequestHeader, GetConsumerStatusRequestHeader,
};
use actormq_core::protocol::version::{version_desc, V3_0_7_SNAPSHOT};

use super::context::{header_or_reply, later, reply, BrokerCore};
use super::messages;
use crate::remoting::server::{Call, Handled};

/// How long the broker waits for a client's response (RocketMQ's `Broker2Client.callClient`).
pub const CALL_CLIENT_TIMEOUT: Duration = Duration::from_millis(10_000);

/// `MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()`: older clients cannot answer.
const V3_1_8_SNAPSHOT: i32 = 62;

/// How long the broker waits for each consumer's answer to GET_CONSUMER_STATUS_FROM_CLIENT
/// (`Broker2Client.getConsumeStatus`'s `invokeSync` timeout).
pub const CONSUMER_STATUS_TIMEOUT: Duration = Duration::from_millis(5_000);

/// Java's remark for a consumer too old for 223 (a negative ordinal, which Java cannot name,
/// is named by its number).
fn too_old(version: i32) -> String {
    format!(
        "the client does not support this feature. version={}",
        version_desc(version)
    )
}

/// One consumer's offsets as it reported them.
type ClientOffsets = (String, Vec<(MessageQueue, i64)>);

/// What became of a call to a client.
pub enum CallOutcome {
    Answered(RemotingCommand),
    /// No response within the timeout.
    TimedOut,
    /// The connection closed (or its mailbox was gone) before the response came.
    Gone(String),
}

/// Sends `cmd` to a client's connection and awaits its response for `timeout`.
pub async fn call_client(
    conn: &crate::metered::ActorRef<crate::remoting::server::Connection>,
    cmd: RemotingCommand,
    timeout: Duration,
) -> CallOutcome {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let call = Call {
        cmd,
        timeout,
        reply: tx,
    };
    if let Err(e) = conn.send(call).await {
        return CallOutcome::Gone(format!("the client's connection is closed: {e}"));
    }
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(resp)) => CallOutcome::Answered(resp),
        Ok(Err(_)) => CallOutcome::Gone("the client's connection closed before it answered".into()),
        Err(_) => CallOutcome::TimedOut,
    }
}

impl BrokerCore {
    /// GET_CONSUMER_RUNNING_INFO: forwarded to the consumer, its answer relayed.
    pub(super) fn consumer_running_info(self: Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumerRunningInfoRequestHeader, req);
        later(async move {
            let (group, id) = (h.consumer_group.as_str(), h.client_id.as_str());
            let find = messages::FindConsumer {
                group: group.to_string(),
                client_id: id.to_string(),
            };
            let ch = match self.clients.send(find).await {
                Ok(Some(ch)) => ch,
                Ok(None) => {
                    return reply(
                        &req,
                        rc::SYSTEM_ERROR,
                        format!("The Consumer <{group}> <{id}> not online"),
                    )
                }
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            if ch.version < V3_1_8_SNAPSHOT {
                return reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!(
                        "The Consumer <{id}> Version <{}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT",
                        ch.version
                    ),
                );
            }
            let fwd = RemotingCommand::new_request(req.code)
                .with_ext_fields(req.ext_fields.clone())
                .with_body(req.body.clone());
            match call_client(&ch.conn, fwd, CALL_CLIENT_TIMEOUT).await {
                CallOutcome::Answered(mut resp) => {
                    resp.opaque = req.opaque;
                    resp
                }
                CallOutcome::TimedOut => reply(
                    &req,
                    rc::CONSUME_MSG_TIMEOUT,
                    format!(
                        "consumer <{group}> <{id}> Timeout: org.apache.rocketmq.remoting.exception.RemotingTimeoutException: wait response on the channel <{}> timeout, {}(ms)",
                        ch.addr,
                        CALL_CLIENT_TIMEOUT.as_millis()
                    ),
                ),
                CallOutcome::Gone(why) => reply(
                    &req,
                    rc::SYSTEM_ERROR,
                    format!("invoke consumer <{group}> <{id}> Exception: {why}"),
                ),
            }
        })
    }

    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS: each consumer of the group asked for its offsets
    /// (221), the answers merged.
    pub(super) fn consumer_status(self: Rc<Self>, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetConsumerStatusRequestHeader, req);
        later(async move {
            let consumers = match self
                .clients
                .send(messages::GroupConsumers(h.group.clone()))
                .await
            {
                Ok(c) => c,
                Err(e) => return reply(&req, rc::SYSTEM_ERROR, e.to_string()),
            };
            if consumers.is_empty() {
                let remark = format!(
                    "No Any Consumer online in the consumer group: [{}]",
                    h.group
                );
                return reply(&req, rc::SYSTEM_ERROR, remark);
            }
            match collect_offsets(&h, consumers).await {
                Ok(table) => reply(&req, rc::SUCCESS, "not set any response code")
                    .with_body(consumer_status_json(table).into_bytes()),
                Err(remark) => reply(&req, rc::SYSTEM_ERROR, remark),
            }
        })
    }
}

/// Asks the consumers in turn (only the one `clientAddr` names, if any); Java's refusal when
/// an older client comes first.
async fn collect_offsets(
    h: &GetConsumerStatusRequestHeader,
    consumers: Vec<(String, messages::ClientChannel)>,
) -> Result<Vec<ClientOffsets>, String> {
    // UtilAll.isBlank: absent or only whitespace asks everyone; otherwise compared exactly.
    let origin = h.client_addr.as_deref().filter(|o| !o.trim().is_empty());
    let ask = GetConsumerStatusRequestHeader {
        topic: h.topic.clone(),
        group: h.group.clone(),
        client_addr: None,
    };
    let ask = RemotingCommand::new_request(rq::GET_CONSUMER_STATUS_FROM_CLIENT)
        .with_ext_fields(ask.to_ext_fields());
    let mut table = Vec::new();
    for (id, ch) in consumers {
        if ch.version < V3_0_7_SNAPSHOT {
            return Err(too_old(ch.version));
        }
        if origin.is_some_and(|o| o != id) {
            continue;
        }
        if let Some(offsets) = ask_offsets(&ch, ask.clone()).await {
            table.push((id, offsets));
        }
        if origin.is_some() {
            break;
        }
    }
    Ok(table)
}

/// One consumer's answer to GET_CONSUMER_STATUS_FROM_CLIENT; `None` (logged) when it did not
/// answer SUCCESS with a readable body in time.
async fn ask_offsets(
    ch: &messages::ClientChannel,
    ask: RemotingCommand,
) -> Option<Vec<(MessageQueue, i64)>> {
    let why = match call_client(&ch.conn, ask, CONSUMER_STATUS_TIMEOUT).await {
        CallOutcome::Answered(r) if r.code == rc::SUCCESS && !r.body.is_empty() => {
            match client_offsets(&r.body) {
                Ok(offsets) => return offsets,
                Err(e) => format!("unreadable body: {e}"),
            }
        }
        CallOutcome::Answered(r) => format!("answered {} without offsets", r.code),
        CallOutcome::TimedOut => "no answer in time".to_string(),
        CallOutcome::Gone(why) => why,
    };
    tracing::debug!(client = %ch.addr, "[get-consumer-status] left out: {why}");
    None
}
