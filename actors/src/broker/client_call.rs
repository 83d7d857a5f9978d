//! Requests the broker forwards to one client and answers with the client's response:
//! GET_CONSUMER_RUNNING_INFO (307, mqadmin `consumerStatus`, the Dashboard's consumer detail),
//! as RocketMQ 4.9.4's `AdminBrokerProcessor.callConsumer` does
//! (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java).
//!
//! Flow: the handler asks the `ClientRegistry` for the consumer's connection
//! ([`clients::FindConsumer`]), sends that `Connection` a [`Call`] with a copy of the request
//! (same code, extFields and body), and awaits the client's response on a oneshot channel for
//! [`CALL_CLIENT_TIMEOUT`]. The client's response is the admin's response (its code, remark,
//! extFields and body), with the admin request's opaque.
//!
//! Owns no state: the pending call lives in the consumer's `Connection` (its table of calls by
//! opaque), which drops it at the deadline or when the connection closes.
//!
//! Remarks as RocketMQ's: not online ⇒ SYSTEM_ERROR `The Consumer <g> <id> not online`; a client
//! older than V3_1_8_SNAPSHOT ⇒ SYSTEM_ERROR; no response in time ⇒ CONSUME_MSG_TIMEOUT
//! `consumer <g> <id> Timeout: …`; the connection gone ⇒ SYSTEM_ERROR `invoke consumer <g> <id>
//! Exception: …`.

use std::rc::Rc;
use std::time::Duration;

use actormq_core::protocol::codes::response_code as rc;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::GetConsumerRunningInfoRequestHeader;

use super::clients;
use super::processor::{header_or_reply, later, reply, BrokerCore};
use crate::remoting::server::{Call, Handled};

/// How long the broker waits for a client's response (RocketMQ's `Broker2Client.callClient`).
pub const CALL_CLIENT_TIMEOUT: Duration = Duration::from_millis(10_000);

/// `MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()`: older clients cannot answer.
const V3_1_8_SNAPSHOT: i32 = 62;

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
            let find = clients::FindConsumer {
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
}
