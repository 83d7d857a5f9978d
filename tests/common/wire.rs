//! Raw frames and requests: a [`FakeClient`] that reads every frame itself (so it sees and
//! answers what the broker asks it), the requests the tests send as a RocketMQ client would (field
//! names and order as Java's request headers), a PULL answer's records, the `/metrics` page over
//! HTTP, and a slave's catch-up. Every wait here is bounded.

use actormq::remoting::client::RemotingClient;
use actormq_core::format::record::{self, Check, RecordView};
use actormq_core::protocol::body::{ConsumerData, HeartbeatData, SubscriptionData};
use actormq_core::protocol::codec::{decode_frame, encode_frame, MAX_FRAME_BYTES};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::now_millis;

/// How long a [`FakeClient`] waits for a frame: a guard against a hang, not a timing.
pub const FAKE_CLIENT_LIMIT: Duration = Duration::from_secs(30);

/// A raw client connection: sends requests and reads frames itself, so it sees (and answers)
/// the requests the broker sends it.
pub struct FakeClient {
    pub stream: tokio::net::TcpStream,
    buf: bytes::BytesMut,
    next_opaque: i32,
    /// Broker-initiated requests read while waiting for something else.
    queued: Vec<RemotingCommand>,
}

impl FakeClient {
    pub async fn connect(addr: &str) -> FakeClient {
        FakeClient {
            stream: tokio::net::TcpStream::connect(addr)
                .await
                .expect("connect to the broker"),
            buf: bytes::BytesMut::new(),
            next_opaque: 1000,
            queued: Vec::new(),
        }
    }

    pub async fn write(&mut self, cmd: &RemotingCommand) {
        let mut out = bytes::BytesMut::new();
        encode_frame(cmd, &mut out);
        self.stream.write_all(&out).await.expect("write a frame");
    }

    pub async fn read(&mut self) -> RemotingCommand {
        loop {
            if let Some(cmd) = decode_frame(&mut self.buf, MAX_FRAME_BYTES).expect("a valid frame")
            {
                return cmd;
            }
            let n = tokio::time::timeout(FAKE_CLIENT_LIMIT, self.stream.read_buf(&mut self.buf))
                .await
                .expect("a frame within the limit")
                .expect("read");
            assert!(n > 0, "the broker closed the connection");
        }
    }

    /// Sends a request and returns its response (queueing broker requests read meanwhile).
    pub async fn request(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        self.next_opaque += 1;
        let opaque = self.next_opaque;
        self.write(&cmd.with_opaque(opaque)).await;
        loop {
            let got = self.read().await;
            if got.is_response() && got.opaque == opaque {
                return got;
            }
            if !got.is_response() {
                self.queued.push(got);
            }
        }
    }

    /// The next request from the broker with `code` (others, e.g. NOTIFY_CONSUMER_IDS_CHANGED,
    /// are skipped).
    pub async fn next_request(&mut self, code: i32) -> RemotingCommand {
        if let Some(i) = self.queued.iter().position(|c| c.code == code) {
            return self.queued.remove(i);
        }
        loop {
            let got = self.read().await;
            if !got.is_response() && got.code == code {
                return got;
            }
        }
    }

    pub async fn heartbeat(&mut self, data: &HeartbeatData) {
        let body = serde_json::to_vec(data).unwrap();
        let resp = self
            .request(RemotingCommand::new_request(rq::HEART_BEAT).with_body(body))
            .await;
        assert_eq!(resp.code, rc::SUCCESS, "heartbeat: {:?}", resp.remark);
    }
}

/// UPDATE_AND_CREATE_TOPIC for `topic` with `queues` read and write queues, perm RW, as
/// mqadmin's updateTopic sends it.
pub fn create_topic(topic: &str, queues: u32) -> RemotingCommand {
    RemotingCommand::new_request(rq::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", queues.to_string())
        .with_ext("writeQueueNums", queues.to_string())
        .with_ext("perm", "6")
        .with_ext("topicFilterType", "SINGLE_TAG")
}

/// SEND_MESSAGE (10) with the long (V1) header names of Java's `SendMessageRequestHeader`, as
/// a producer sends it: from producer group `group`, to `topic` queue `queue_id`, the topic
/// created on first send from TBW102 with 4 queues, no properties. A test changes a field with
/// `.with_ext(key, value)`, which replaces it in place (the frame's field order stays).
pub fn send_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    body: impl Into<Vec<u8>>,
) -> RemotingCommand {
    RemotingCommand::new_request(rq::SEND_MESSAGE)
        .with_ext("producerGroup", group)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("defaultTopicQueueNums", "4")
        .with_ext("queueId", queue_id.to_string())
        .with_ext("sysFlag", "0")
        .with_ext("bornTimestamp", now_millis().to_string())
        .with_ext("flag", "0")
        .with_ext("properties", "")
        .with_body(body.into())
}

/// A [`send_request`] from producer group `P` to queue 0 of `topic` (a one-queue topic if it is
/// new) with `properties` (RocketMQ's `name\u{1}value\u{2}` string).
pub fn send_one_queue(topic: &str, properties: &str, body: impl Into<Vec<u8>>) -> RemotingCommand {
    send_request("P", topic, 0, body)
        .with_ext("defaultTopicQueueNums", "1")
        .with_ext("properties", properties)
}

/// PULL_MESSAGE (11) of up to 32 messages of `topic` queue `queue_id` from `offset` for consumer
/// group `group`, without the commit or suspend flags: nothing is committed, nothing parks.
pub fn pull_request(group: &str, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    RemotingCommand::new_request(rq::PULL_MESSAGE)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id.to_string())
        .with_ext("queueOffset", offset.to_string())
        .with_ext("maxMsgNums", "32")
        .with_ext("sysFlag", "0")
        .with_ext("commitOffset", "0")
        .with_ext("suspendTimeoutMillis", "0")
        .with_ext("subVersion", "0")
}

/// GET_MAX_OFFSET (30) of `topic` queue `queue_id`.
pub fn max_offset_request(topic: &str, queue_id: i32) -> RemotingCommand {
    RemotingCommand::new_request(rq::GET_MAX_OFFSET)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id.to_string())
}

/// QUERY_CONSUMER_OFFSET (14) of consumer group `group` for `topic` queue `queue_id`.
pub fn query_offset_request(group: &str, topic: &str, queue_id: i32) -> RemotingCommand {
    RemotingCommand::new_request(rq::QUERY_CONSUMER_OFFSET)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id.to_string())
}

/// UPDATE_CONSUMER_OFFSET (15): consumer group `group` has consumed `topic` queue `queue_id` up
/// to `offset`.
pub fn commit_offset_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> RemotingCommand {
    RemotingCommand::new_request(rq::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id.to_string())
        .with_ext("commitOffset", offset.to_string())
}

/// GET_ROUTEINFO_BY_TOPIC (105) of `topic`, to a name server, as the client sends it.
pub fn route_request(topic: &str) -> RemotingCommand {
    RemotingCommand::new_request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic)
}

/// A heartbeat of client `client_id` whose consumer group `group` subscribes to every tag of
/// `topic` (the body of HEART_BEAT, 34).
pub fn consumer_heartbeat(client_id: &str, group: &str, topic: &str) -> HeartbeatData {
    HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            subscription_data_set: vec![SubscriptionData {
                topic: topic.into(),
                sub_string: "*".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// One line describing a reply, for failure messages.
pub fn describe_reply(r: &RemotingCommand) -> String {
    format!(
        "code {} remark {:?} ext {:?}",
        r.code, r.remark, r.ext_fields
    )
}

/// The records of a PULL answer's body, in order, each checked (its body CRC too with
/// `check_crc`); fails naming the byte where something else starts.
pub fn records(body: &[u8], check_crc: bool) -> Vec<RecordView<'_>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        match record::check(&body[pos..], check_crc) {
            Ok(Check::Record(rec)) => {
                pos += rec.total_size as usize;
                out.push(rec);
            }
            other => panic!("pulled body at byte {pos}: {other:?}"),
        }
    }
    out
}

/// GET_MAX_OFFSET (30) of `topic` queue `queue_id`; `None` unless answered SUCCESS with an
/// offset.
pub async fn max_offset_of(client: &RemotingClient, topic: &str, queue_id: i32) -> Option<i64> {
    let r = client
        .invoke(max_offset_request(topic, queue_id), Duration::from_secs(5))
        .await
        .expect("GET_MAX_OFFSET answered");
    (r.code == rc::SUCCESS)
        .then(|| r.ext("offset").and_then(|o| o.parse().ok()))
        .flatten()
}

/// `GET /metrics` at `addr` over a plain TCP connection (HTTP/1.1, `Connection: close`), within
/// `limit` for the connect and again for the answer: the response's head and body.
pub async fn metrics_page(addr: &str, limit: Duration) -> (String, String) {
    let mut s = tokio::time::timeout(limit, tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect to /metrics in time")
        .expect("connect to /metrics");
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes())
        .await
        .expect("write the request");
    let mut raw = Vec::new();
    tokio::time::timeout(limit, s.read_to_end(&mut raw))
        .await
        .expect("the scrape answered in time")
        .expect("read the scrape");
    let raw = String::from_utf8(raw).expect("the scrape is UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_string(), body.to_string())
}

/// Waits, polling every 50 ms for at most `limit`, until the slave at `slave` has every queue of
/// `topic` in `0..queues` up to the max offset the master at `master` has (both read each time:
/// both dispatch on their own); fails naming the first queue that did not catch up.
pub async fn wait_caught_up(master: &str, slave: &str, topic: &str, queues: i32, limit: Duration) {
    let deadline = Instant::now() + limit;
    let m = RemotingClient::connect(master)
        .await
        .expect("connect to the master");
    let s = RemotingClient::connect(slave)
        .await
        .expect("connect to the slave");
    for q in 0..queues {
        loop {
            let want = max_offset_of(&m, topic, q).await;
            let got = max_offset_of(&s, topic, q).await;
            if want.is_some() && got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{topic} queue {q}: slave max offset {got:?}, master {want:?} after {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
