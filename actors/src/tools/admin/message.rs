//! mqadmin's message commands: `queryMsgById` (33), `queryMsgByKey` (12),
//! `queryMsgByUniqueKey` (12 with the unique-key flag), `queryMsgByOffset` (11) and `printMsg`
//! (31, 30, 29, then 11 per batch).
//!
//! Messages come back as stored records ([`records`]) and are printed as mqadmin's detail
//! block ([`message_detail`]). Each command is its clap options and a `run` that prints
//! mqadmin's lines (or nothing with `--json`) and returns the JSON document.

use actormq_core::format::msg_id::decode_offset_msg_id;
use actormq_core::format::record::{self, Check, RecordView};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use clap::Args;
use serde_json::Value;

use super::client::{AdminClient, AdminError, Result};
use super::show::{message_detail, parse_time, print_table, Table};
use super::Outcome;

// `queryMsgById`.
#[derive(Args, Debug, Clone)]
pub struct QueryMsgById {
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// Do not print the body.
    #[arg(long = "noBody")]
    no_body: bool,
}

impl QueryMsgById {
    /// VIEW_MESSAGE_BY_ID to the broker the offset msgId names, at the CommitLog offset it
    /// holds.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let msg_id = &self.msg_id;
        let (host, phy) =
            decode_offset_msg_id(msg_id).map_err(|e| anyhow::anyhow!("msgId {msg_id}: {e}"))?;
        let addr = host.to_string();
        let cmd = RemotingCommand::new_request(rq::VIEW_MESSAGE_BY_ID)
            .with_ext_fields(ViewMessageByIdRequestHeader { offset: phy }.to_ext_fields());
        let resp = admin.call(&addr, cmd).await?;
        let msgs = records(&resp.body)?;
        let Some(r) = msgs.first() else {
            anyhow::bail!("{addr}: no message at commit log offset {phy}");
        };
        let (text, v) = message_detail(r, !self.no_body);
        if !json {
            print!("{text}");
        }
        Ok(Some(v))
    }
}

// `queryMsgByKey`.
#[derive(Args, Debug, Clone)]
pub struct QueryMsgByKey {
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'k', long = "msgKey")]
    key: String,
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    #[arg(short = 'c', long = "maxNum", default_value_t = 64)]
    max: i32,
}

impl QueryMsgByKey {
    /// A row per message of the topic whose KEYS hold the key, from each master's index.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let (topic, key) = (&self.topic, &self.key);
        let begin = parse_bound(self.begin.as_deref())?;
        let end = parse_bound(self.end.as_deref())?;
        let mut t = Table::new(&["Message ID", "QID", "Offset"]);
        for (_, addr) in admin.topic_masters(topic).await? {
            let body = query(admin, &addr, topic, key, self.max, begin, end, false).await?;
            // As mqadmin: an index hit is a hash match; only messages of the topic whose
            // KEYS hold the key are shown.
            for r in records(&body)?
                .into_iter()
                .filter(|r| r.topic == topic.as_str() && r.keys().any(|k| k == key.as_str()))
            {
                t.push(vec![
                    r.offset_msg_id(),
                    r.queue_id.to_string(),
                    r.queue_offset.to_string(),
                ]);
            }
        }
        if !json {
            print_table(&t, false);
        }
        Ok(Some(t.to_json()))
    }
}

/// A `-b`/`-e` time bound (see [`parse_time`]), if given.
fn parse_bound(s: Option<&str>) -> anyhow::Result<Option<i64>> {
    s.map(parse_time).transpose().map_err(anyhow::Error::msg)
}

// `queryMsgByUniqueKey`.
#[derive(Args, Debug, Clone)]
pub struct QueryMsgByUniqueKey {
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
}

impl QueryMsgByUniqueKey {
    /// Every message of the topic with that UNIQ_KEY, from each master's index; none found is
    /// an error.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let (topic, msg_id) = (&self.topic, &self.msg_id);
        let mut found = Vec::new();
        for (_, addr) in admin.topic_masters(topic).await? {
            let body = query(admin, &addr, topic, msg_id, 32, None, None, true).await?;
            for r in records(&body)? {
                if r.uniq_key() == Some(msg_id.as_str()) {
                    let (text, v) = message_detail(&r, true);
                    if !json {
                        print!("{text}");
                    }
                    found.push(v);
                }
            }
        }
        if found.is_empty() {
            anyhow::bail!("no message with unique key {msg_id} in topic {topic}");
        }
        Ok(Some(Value::Array(found)))
    }
}

// `queryMsgByOffset`.
#[derive(Args, Debug, Clone)]
pub struct QueryMsgByOffset {
    #[arg(short = 't', long)]
    topic: String,
    #[arg(short = 'b', long = "brokerName")]
    broker: String,
    #[arg(short = 'i', long = "queueId")]
    queue: i32,
    #[arg(short = 'o', long)]
    offset: i64,
}

impl QueryMsgByOffset {
    /// One pull of one message at the queue offset, from the broker's master.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let (topic, queue, offset) = (&self.topic, self.queue, self.offset);
        let addr = admin.broker_addr(&self.broker).await?;
        let body = pull(admin, &addr, topic, queue, offset, 1, "*").await?;
        let msgs = match body {
            Some(b) => b,
            None => anyhow::bail!("{addr}: no message at {topic}/{queue} offset {offset}"),
        };
        let recs = records(&msgs)?;
        let Some(r) = recs.first() else {
            anyhow::bail!("{addr}: no message at {topic}/{queue} offset {offset}");
        };
        let (text, v) = message_detail(r, true);
        if !json {
            print!("{text}");
        }
        Ok(Some(v))
    }
}

// `printMsg`.
#[derive(Args, Debug, Clone)]
pub struct PrintMsg {
    #[arg(short = 't', long)]
    topic: String,
    /// Tag expression (`*`, `TagA || TagB`).
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    sub: String,
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    #[arg(short = 'd', long = "printBody", action = clap::ArgAction::Set, default_value_t = true)]
    print_body: bool,
    /// Stop after this many messages.
    #[arg(long, default_value_t = 10_000)]
    limit: usize,
}

impl PrintMsg {
    /// Each readable queue of each broker of the route in turn, from the begin bound (or the
    /// min offset) to the end bound (or the max), then the count.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let begin = parse_bound(self.begin.as_deref())?;
        let end = parse_bound(self.end.as_deref())?;
        let route = admin.route(&self.topic).await?;
        let mut out = Vec::new();
        'brokers: for qd in &route.queue_datas {
            let Some(addr) = route
                .broker_datas
                .iter()
                .find(|b| b.broker_name == qd.broker_name)
                .and_then(|b| b.broker_addrs.get(&0))
            else {
                continue;
            };
            for q in 0..qd.read_queue_nums {
                let from = bound(admin, addr, &self.topic, q, begin, rq::GET_MIN_OFFSET).await?;
                let to = bound(admin, addr, &self.topic, q, end, rq::GET_MAX_OFFSET).await?;
                if self
                    .print_queue(admin, addr, q, from..to, end, json, &mut out)
                    .await?
                {
                    break 'brokers;
                }
            }
        }
        if !json {
            println!("{} messages", out.len());
        }
        Ok(Some(Value::Array(out)))
    }

    /// Prints the messages of queue `q` in `range` stored no later than `end`, adding each to
    /// `out`; true once `out` holds `--limit` messages.
    #[allow(clippy::too_many_arguments)]
    async fn print_queue(
        &self,
        admin: &AdminClient,
        addr: &str,
        q: i32,
        range: std::ops::Range<i64>,
        end: Option<i64>,
        json: bool,
        out: &mut Vec<Value>,
    ) -> anyhow::Result<bool> {
        let mut at = range.start;
        while at < range.end {
            let Some(body) = pull(admin, addr, &self.topic, q, at, 32, &self.sub).await? else {
                break;
            };
            let recs = records(&body)?;
            if recs.is_empty() {
                break;
            }
            for r in &recs {
                at = r.queue_offset + 1;
                if r.queue_offset >= range.end {
                    break;
                }
                if end.is_some_and(|e| r.store_timestamp > e) {
                    continue;
                }
                let (text, v) = message_detail(r, self.print_body);
                if !json {
                    println!("{text}");
                }
                out.push(v);
                if out.len() >= self.limit {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// Every record in a response body (QUERY_MESSAGE, PULL_MESSAGE, VIEW_MESSAGE_BY_ID).
fn records(body: &[u8]) -> anyhow::Result<Vec<RecordView<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        match record::check(&body[at..], false) {
            Ok(Check::Record(r)) => {
                at += r.total_size as usize;
                out.push(r);
            }
            Ok(_) => break,
            Err(e) => anyhow::bail!("cannot decode a message at byte {at} of the response: {e}"),
        }
    }
    Ok(out)
}

/// QUERY_MESSAGE (by key, or by unique key) to one broker; no hit is an empty body.
#[allow(clippy::too_many_arguments)]
async fn query(
    admin: &AdminClient,
    addr: &str,
    topic: &str,
    key: &str,
    max: i32,
    begin: Option<i64>,
    end: Option<i64>,
    unique: bool,
) -> Result<bytes::Bytes> {
    let h = QueryMessageRequestHeader {
        topic: topic.into(),
        key: key.into(),
        max_num: max,
        begin_timestamp: begin.unwrap_or(0),
        end_timestamp: end.unwrap_or(i64::MAX),
        unique_key_query: unique,
    };
    let cmd = RemotingCommand::new_request(rq::QUERY_MESSAGE).with_ext_fields(h.to_ext_fields());
    match admin.call(addr, cmd).await {
        Ok(r) => Ok(r.body),
        Err(e) if e.code() == Some(rc::QUERY_NOT_FOUND) => Ok(bytes::Bytes::new()),
        Err(e) => Err(e),
    }
}

/// One pull without committing or suspending; `None` when the queue has nothing there.
async fn pull(
    admin: &AdminClient,
    addr: &str,
    topic: &str,
    queue: i32,
    offset: i64,
    max: i32,
    sub: &str,
) -> Result<Option<bytes::Bytes>> {
    let h = PullMessageRequestHeader {
        consumer_group: "TOOLS_CONSUMER".into(),
        topic: topic.into(),
        queue_id: queue,
        queue_offset: offset,
        max_msg_nums: max,
        sys_flag: 0,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some(sub.into()),
        sub_version: 0,
        ..Default::default()
    };
    let cmd = RemotingCommand::new_request(rq::PULL_MESSAGE).with_ext_fields(h.to_ext_fields());
    let resp = admin.call_raw(addr, cmd).await?;
    match resp.code {
        rc::SUCCESS => Ok(Some(resp.body)),
        rc::PULL_NOT_FOUND | rc::PULL_OFFSET_MOVED | rc::PULL_RETRY_IMMEDIATELY => Ok(None),
        code => Err(AdminError::Refused {
            addr: addr.into(),
            request: "PULL_MESSAGE",
            code,
            name: actormq_core::protocol::codes::response_code_name(code),
            remark: resp.remark.unwrap_or_default(),
        }),
    }
}

/// A queue offset for a time bound: the first message stored at or after `at`
/// (SEARCH_OFFSET_BY_TIMESTAMP), or without a bound the queue's min or max (`otherwise`:
/// GET_MIN_OFFSET / GET_MAX_OFFSET).
pub(super) async fn bound(
    admin: &AdminClient,
    addr: &str,
    topic: &str,
    queue: i32,
    at: Option<i64>,
    otherwise: i32,
) -> Result<i64> {
    let code = if at.is_some() {
        rq::SEARCH_OFFSET_BY_TIMESTAMP
    } else {
        otherwise
    };
    let mut cmd = RemotingCommand::new_request(code)
        .with_ext("topic", topic)
        .with_ext("queueId", queue.to_string());
    if let Some(ts) = at {
        cmd = cmd.with_ext("timestamp", ts.to_string());
    }
    let resp = admin.call(addr, cmd).await?;
    resp.ext("offset")
        .and_then(|o| o.parse().ok())
        .ok_or_else(|| AdminError::Other(format!("{addr}: no offset in the reply")))
}
