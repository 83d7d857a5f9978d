//! mqadmin 4.9.4's send checks: `sendMsgStatus -b <brokerName> [-s size] [-c count]`
//! (tools/…/command/broker/SendMsgStatusCommand.java) and `checkMsgSendRT -t <topic> [-a amount]
//! [-s size]` (tools/…/command/message/CheckMsgSendRTCommand.java).
//!
//! A small producer of its own, as far as the remoting client goes: the topic's route from the
//! name server (TBW102's, capped at 4 queues, when the topic has none: Java's auto-create
//! path), its writable queues in broker-name order, and SEND_MESSAGE_V2 (310) to the queue's
//! master with Java's header and a unique key made as Java's `MessageClientIDSetter` makes it
//! ([`actormq_core::uniq_id`]), which the result reports as `msgId`.
//!
//! `sendMsgStatus` sends one 22-byte warm-up message and then `count` messages to the topic
//! named after the broker, round-robin from a random queue with up to 3 attempts per message
//! (the next queue, another broker first, as Java's `sendDefaultImpl`), and prints `rt=<ms>ms,
//! SendResult=SendResult [...]` per message, Java's `SendResult.toString`. `checkMsgSendRT`
//! sends the same message `amount` times to queue `i % queues` (one attempt, as Java's selector
//! send), prints `#Broker Name #QID #Send Result #RT` rows and `Avg RT` over all but the first
//! send (so `NaN` for one message, as Java). Bodies as Java's: `hello jodie` repeated up to at
//! least `size` bytes, or `size` × `a`.
//!
//! Differences: no producer heartbeat or unregistration is sent, and bodies over 4 KiB go
//! uncompressed (Java zips them and sets the compressed flag).

use std::time::Instant;

use actormq_core::protocol::body::{MessageQueue, TopicRouteData, MASTER_ID};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc, response_code_name};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{
    SendHeaderNames, SendMessageRequestHeader, SendMessageResponseHeader,
};
use actormq_core::uniq_id::UniqIdGenerator;
use chrono::{Datelike, TimeZone};
use clap::Args;
use serde_json::{json, Value};

use super::client::{AdminClient, AdminError};
use super::Outcome;

/// The template topic of auto-created topics and how many queues a producer asks for.
const DEFAULT_TOPIC: &str = "TBW102";
const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;
/// `PermName.PERM_WRITE`.
const PERM_WRITE: i32 = 2;
/// `retryTimesWhenSendFailed` (2) + 1.
const SEND_ATTEMPTS: usize = 3;

/// A writable queue and its master's address.
#[derive(Debug, Clone)]
struct Target {
    mq: MessageQueue,
    addr: String,
}

/// Java's `SendResult`.
#[derive(Debug, Clone)]
struct Sent {
    status: &'static str,
    msg_id: String,
    offset_msg_id: String,
    mq: MessageQueue,
    queue_offset: i64,
}

impl Sent {
    /// `SendResult.toString()` (4.9.4).
    fn java_text(&self) -> String {
        format!(
            "SendResult [sendStatus={}, msgId={}, offsetMsgId={}, messageQueue=MessageQueue [topic={}, brokerName={}, queueId={}], queueOffset={}]",
            self.status, self.msg_id, self.offset_msg_id, self.mq.topic, self.mq.broker_name,
            self.mq.queue_id, self.queue_offset
        )
    }

    fn to_json(&self) -> Value {
        json!({"sendStatus": self.status, "msgId": self.msg_id, "offsetMsgId": self.offset_msg_id,
            "topic": self.mq.topic, "brokerName": self.mq.broker_name,
            "queueId": self.mq.queue_id, "queueOffset": self.queue_offset})
    }
}

/// One message to send: its body and the properties Java's `Message` carries besides
/// `UNIQ_KEY` (in Java's HashMap order, after `UNIQ_KEY`).
struct Outgoing<'a> {
    group: &'a str,
    topic: &'a str,
    body: Vec<u8>,
    /// `WAIT` (`new Message(topic, body)` sets it; `new Message()` does not).
    wait: bool,
    uniq_key: String,
}

impl Outgoing<'_> {
    /// Java's `messageProperties2String` of {UNIQ_KEY, WAIT}: buckets 12 and 13 of 16.
    fn properties(&self) -> String {
        let mut p = format!("UNIQ_KEY\u{1}{}", self.uniq_key);
        if self.wait {
            p.push_str("\u{2}WAIT\u{1}true");
        }
        p
    }

    fn request(&self, queue_id: i32) -> RemotingCommand {
        let h = SendMessageRequestHeader {
            producer_group: self.group.to_string(),
            topic: self.topic.to_string(),
            default_topic: DEFAULT_TOPIC.to_string(),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id,
            born_timestamp: chrono::Utc::now().timestamp_millis(),
            properties: self.properties(),
            ..Default::default()
        };
        RemotingCommand::new_request(rq::SEND_MESSAGE_V2)
            .with_ext_fields(h.to_ext_fields(SendHeaderNames::V2))
            .with_body(self.body.clone())
    }
}

/// Unique keys for this run, made as Java's client makes them.
fn uniq_ids() -> UniqIdGenerator {
    let nanos = chrono::Utc::now().timestamp_subsec_nanos() as i32;
    let pid = std::process::id();
    UniqIdGenerator::new(&local_ip(), pid, nanos ^ pid as i32)
}

/// The address the host would send from (Java prefers a public IPv4 interface address); Java's
/// fallback, the low 4 bytes of the current time in ms, when there is none.
fn local_ip() -> Vec<u8> {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| {
        s.connect("8.8.8.8:53")?;
        s.local_addr()
    });
    match probe {
        Ok(std::net::SocketAddr::V4(a)) if !a.ip().is_unspecified() => a.ip().octets().to_vec(),
        _ => (chrono::Utc::now().timestamp_millis() as u32)
            .to_be_bytes()
            .to_vec(),
    }
}

/// Milliseconds since the start of this month in local time (Java's `startTime`).
fn ms_since_month_start() -> i64 {
    let now = chrono::Local::now();
    let start = now
        .date_naive()
        .with_day(1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .and_then(|t| chrono::Local.from_local_datetime(&t).earliest());
    start.map_or(0, |s| (now - s).num_milliseconds())
}

/// The topic's writable queues (`topicRouteData2TopicPublishInfo`): queue data in broker-name
/// order, brokers with a master only. Without a route, TBW102's with at most 4 queues.
async fn publish_queues(admin: &AdminClient, topic: &str) -> anyhow::Result<Vec<Target>> {
    let route = match admin.route(topic).await {
        Ok(r) => r,
        Err(e) if e.code() == Some(rc::TOPIC_NOT_EXIST) => {
            let mut r = admin.route(DEFAULT_TOPIC).await.map_err(|_| {
                anyhow::anyhow!("No route info of this topic: {topic} (nor of {DEFAULT_TOPIC})")
            })?;
            for q in &mut r.queue_datas {
                q.read_queue_nums = q.read_queue_nums.min(DEFAULT_TOPIC_QUEUE_NUMS);
                q.write_queue_nums = q.read_queue_nums;
            }
            r
        }
        Err(e) => return Err(e.into()),
    };
    let queues = writable(&route, topic);
    if queues.is_empty() {
        anyhow::bail!("No route info of this topic: {topic} (no writable queue on a master)");
    }
    Ok(queues)
}

fn writable(route: &TopicRouteData, topic: &str) -> Vec<Target> {
    let mut qds = route.queue_datas.clone();
    qds.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    let mut out = Vec::new();
    for qd in qds.iter().filter(|q| q.perm & PERM_WRITE != 0) {
        let master = route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == qd.broker_name)
            .and_then(|b| b.broker_addrs.get(&MASTER_ID));
        let Some(addr) = master else { continue };
        for queue_id in 0..qd.write_queue_nums {
            let mq = MessageQueue {
                topic: topic.to_string(),
                broker_name: qd.broker_name.clone(),
                queue_id,
            };
            out.push(Target {
                mq,
                addr: addr.clone(),
            });
        }
    }
    out
}

/// `Validators.checkMessage`'s body rules (4 MiB: the client's default `maxMessageSize`).
fn check_body(body: &[u8]) -> Result<(), AdminError> {
    const MAX: usize = 4 * 1024 * 1024;
    match body.len() {
        0 => Err(AdminError::Other("the message body length is zero".into())),
        n if n > MAX => Err(AdminError::Other(format!(
            "the message body size over max value, MAX: {MAX}"
        ))),
        _ => Ok(()),
    }
}

/// One SEND_MESSAGE_V2 and Java's reading of its answer (`processSendResponse`).
async fn send_to(admin: &AdminClient, t: &Target, m: &Outgoing<'_>) -> Result<Sent, AdminError> {
    check_body(&m.body)?;
    let resp = admin.call_raw(&t.addr, m.request(t.mq.queue_id)).await?;
    let status = match resp.code {
        rc::SUCCESS => "SEND_OK",
        rc::FLUSH_DISK_TIMEOUT => "FLUSH_DISK_TIMEOUT",
        rc::FLUSH_SLAVE_TIMEOUT => "FLUSH_SLAVE_TIMEOUT",
        rc::SLAVE_NOT_AVAILABLE => "SLAVE_NOT_AVAILABLE",
        code => {
            return Err(AdminError::Refused {
                addr: t.addr.clone(),
                request: "SEND_MESSAGE_V2",
                code,
                name: response_code_name(code),
                remark: resp.remark.unwrap_or_default(),
            })
        }
    };
    let h = SendMessageResponseHeader::from_command(&resp).map_err(|e| AdminError::Body {
        addr: t.addr.clone(),
        request: "SEND_MESSAGE_V2",
        why: e.to_string(),
    })?;
    Ok(Sent {
        status,
        msg_id: m.uniq_key.clone(),
        offset_msg_id: h.msg_id,
        mq: MessageQueue {
            queue_id: h.queue_id,
            ..t.mq.clone()
        },
        queue_offset: h.queue_offset,
    })
}

/// Whether Java's `sendDefaultImpl` tries again after this error (never after a refused body:
/// Java checks the message before its loop).
fn retried(e: &AdminError) -> bool {
    match e.code() {
        None => !matches!(e, AdminError::Other(_)),
        Some(code) => [
            rc::TOPIC_NOT_EXIST,
            rc::SERVICE_NOT_AVAILABLE,
            rc::SYSTEM_ERROR,
            rc::NO_PERMISSION,
            rc::NO_BUYER_ID,
            rc::NOT_IN_CURRENT_UNIT,
        ]
        .contains(&code),
    }
}

/// Java's per-thread round-robin queue index (`ThreadLocalIndex`, random start).
struct Cursor(usize);

impl Cursor {
    fn new() -> Self {
        Cursor(chrono::Utc::now().timestamp_subsec_nanos() as usize)
    }

    /// `selectOneMessageQueue(lastBrokerName)`: the next queue, on another broker if one is left.
    fn pick<'a>(&mut self, queues: &'a [Target], avoid: Option<&str>) -> &'a Target {
        for _ in 0..queues.len() {
            self.0 = self.0.wrapping_add(1);
            let t = &queues[self.0 % queues.len()];
            if avoid.is_none_or(|b| b != t.mq.broker_name) {
                return t;
            }
        }
        self.0 = self.0.wrapping_add(1);
        &queues[self.0 % queues.len()]
    }
}

/// A send with Java's default retries.
async fn send_default(
    admin: &AdminClient,
    queues: &[Target],
    cursor: &mut Cursor,
    m: &Outgoing<'_>,
) -> anyhow::Result<Sent> {
    let mut last: Option<(String, AdminError)> = None;
    for _ in 0..SEND_ATTEMPTS {
        let t = cursor.pick(queues, last.as_ref().map(|(b, _)| b.as_str()));
        match send_to(admin, t, m).await {
            Ok(sent) => return Ok(sent),
            Err(e) if retried(&e) => last = Some((t.mq.broker_name.clone(), e)),
            Err(e) => return Err(e.into()),
        }
    }
    let why = last.map_or_else(String::new, |(_, e)| e.to_string());
    anyhow::bail!(
        "Send [{SEND_ATTEMPTS}] times, still failed, Topic: {}: {why}",
        m.topic
    )
}

/// `SendMsgStatusCommand.buildMessage`'s body: `hello jodie` once per 11 bytes of `size`.
fn jodie(size: i64) -> Vec<u8> {
    let n = usize::try_from(size.max(0)).unwrap_or(0).div_ceil(11);
    "hello jodie".repeat(n).into_bytes()
}

/// `sendMsgStatus`: a warm-up message, then `count` messages to the broker's own topic.
pub async fn send_msg_status(
    admin: &AdminClient,
    broker_name: &str,
    size: i32,
    count: i32,
    quiet: bool,
) -> anyhow::Result<Value> {
    let topic = broker_name.trim();
    let group = "PID_SMSC";
    let queues = publish_queues(admin, topic).await?;
    let ids = uniq_ids();
    let mut cursor = Cursor::new();
    let message = |size: i64| Outgoing {
        group,
        topic,
        body: jodie(size),
        wait: false,
        uniq_key: ids.next(ms_since_month_start()),
    };
    send_default(admin, &queues, &mut cursor, &message(16)).await?;
    let (mut lines, mut results) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let begin = Instant::now();
        let sent = send_default(admin, &queues, &mut cursor, &message(size.into())).await?;
        let line = format!(
            "rt={}ms, SendResult={}",
            begin.elapsed().as_millis(),
            sent.java_text()
        );
        if !quiet {
            println!("{line}");
        }
        lines.push(line);
        results.push(sent.to_json());
    }
    Ok(json!({"lines": lines, "results": results}))
}

/// `checkMsgSendRT`: `amount` sends of one message to queue `i % queues`, each timed.
pub async fn check_msg_send_rt(
    admin: &AdminClient,
    topic: &str,
    amount: i64,
    size: i64,
    quiet: bool,
) -> anyhow::Result<Value> {
    let topic = topic.trim();
    let group = chrono::Utc::now().timestamp_millis().to_string();
    // Java sends one Message object again and again: one unique key for all.
    let m = Outgoing {
        group: &group,
        topic,
        body: vec![b'a'; usize::try_from(size).unwrap_or(0)],
        wait: true,
        uniq_key: uniq_ids().next(ms_since_month_start()),
    };
    let mut lines = vec![rt_row("#Broker Name", "#QID", "#Send Result", "#RT")];
    // Without a route every send fails before a queue is chosen (Java: MQClientException).
    let queues = publish_queues(admin, topic).await.unwrap_or_default();
    let (mut broker, mut qid, mut elapsed) = (String::new(), 0, 0u128);
    for i in 0..amount {
        let start = Instant::now();
        let ok = match queues.get(usize::try_from(i).unwrap_or(0) % queues.len().max(1)) {
            Some(t) => {
                (broker, qid) = (t.mq.broker_name.clone(), t.mq.queue_id);
                send_to(admin, t, &m).await.is_ok()
            }
            None => false,
        };
        let rt = start.elapsed().as_millis();
        if i != 0 {
            elapsed += rt;
        }
        lines.push(rt_row(
            &broker,
            &qid.to_string(),
            &ok.to_string(),
            &rt.to_string(),
        ));
    }
    lines.push(format!(
        "Avg RT: {:.2}",
        elapsed as f64 / (amount - 1) as f64
    ));
    if !quiet {
        lines.iter().for_each(|l| println!("{l}"));
    }
    Ok(json!({"lines": lines}))
}

/// `%-32s  %-4s  %-20s    %s`.
fn rt_row(broker: &str, qid: &str, result: &str, rt: &str) -> String {
    format!("{broker:<32}  {qid:<4}  {result:<20}    {rt}")
}

// `sendMsgStatus`.
#[derive(Args, Debug, Clone)]
pub struct SendMsgStatus {
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    #[arg(short = 's', long = "messageSize", default_value_t = 128)]
    size: i32,
    #[arg(short = 'c', long = "count", default_value_t = 50)]
    count: i32,
}

impl SendMsgStatus {
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let v = send_msg_status(admin, &self.broker_name, self.size, self.count, json);
        Ok(Some(v.await?))
    }
}

// `checkMsgSendRT`.
#[derive(Args, Debug, Clone)]
pub struct CheckMsgSendRt {
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'a', long, default_value_t = 100)]
    amount: i64,
    #[arg(short = 's', long, default_value_t = 128)]
    size: i64,
}

impl CheckMsgSendRt {
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let v = check_msg_send_rt(admin, &self.topic, self.amount, self.size, json);
        Ok(Some(v.await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_and_rows_are_java_s() {
        assert_eq!(jodie(16).len(), 22);
        assert_eq!(jodie(128).len(), 132);
        assert!(jodie(0).is_empty());
        assert!(check_body(&jodie(-1)).is_err());
        assert!(check_body(&[b'a'; 4 * 1024 * 1024 + 1]).is_err());
        assert!(check_body(&jodie(128)).is_ok());
        // Golden: Apache mqadmin 4.9.4 checkMsgSendRT's header and a row.
        assert_eq!(
            rt_row("#Broker Name", "#QID", "#Send Result", "#RT"),
            "#Broker Name                      #QID  #Send Result            #RT"
        );
        assert_eq!(
            rt_row("broker-a", "0", "true", "264"),
            "broker-a                          0     true                    264"
        );
        assert_eq!(format!("Avg RT: {:.2}", f64::NAN), "Avg RT: NaN");
    }

    #[test]
    fn properties_are_in_java_hashmap_order() {
        let m = Outgoing {
            group: "g",
            topic: "t",
            body: Vec::new(),
            wait: true,
            uniq_key: "K".into(),
        };
        assert_eq!(m.properties(), "UNIQ_KEY\u{1}K\u{2}WAIT\u{1}true");
    }
}
