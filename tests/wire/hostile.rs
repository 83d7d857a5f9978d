//! Hostile input on the remoting ports: the broker's and its embedded name server's listeners
//! must survive malformed frames sent by raw TCP peers while well-behaved clients keep working.
//!
//! Each test starts its own [`TestBroker`] (broker + embedded name server, 127.0.0.1, ephemeral
//! ports) and runs under a hard limit ([`run_bounded`]). While a well-behaved [`RemotingClient`]
//! keeps sending real requests, rounds of attacks run concurrently, each attack on its own raw
//! `TcpStream`:
//!
//! * malformed frames (length 0 / negative / over 16 MiB, header longer than the frame, empty,
//!   invalid, non-UTF-8, non-object or code-less JSON header, serialize type 7, truncated binary
//!   header, random garbage): the server must close that connection, and only that one, within
//!   [`CLOSE_LIMIT`], without being sent anything more;
//! * a frame cut in the middle, then our write side shut (the server must close too) or the socket
//!   dropped (only the other clients' health tells);
//! * well-formed requests the server cannot serve (an unknown request code, in JSON and binary
//!   headers; a SEND / PULL / route / register request missing a required field): they must get an
//!   error *response* (REQUEST_CODE_NOT_SUPPORTED with the code in the remark; an error naming the
//!   field) and the connection must stay usable.
//!
//! At the end the well-behaved client must have seen no error over at least [`MIN_REQUESTS`]
//! requests, and a fresh client must still be served (broker: send then pull back what it sent;
//! name server: route queries, including one for a topic created after the attacks, which also
//! proves the broker's own registration link to the name server survived).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actormq::remoting::client::RemotingClient;
use actormq_core::protocol::body::{parse_java_json, TopicRouteData};
use actormq_core::protocol::codec::{decode_frame, encode_frame, MAX_FRAME_BYTES};
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::{RemotingCommand, SerializeType};
use actormq_core::protocol::header::RegisterBrokerRequestHeader;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{
    describe_reply as describe, eventually, max_offset_request, pull_request, records,
    route_request, send_request, with_broker,
};

/// Hard upper bound of a whole test, broker start and clean stop included.
const TEST_LIMIT: Duration = Duration::from_secs(120);
/// Per-request timeout of the well-behaved clients.
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take to close a connection that sent a malformed frame, or to answer
/// a well-formed request on a raw connection.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);
/// Bound of every poll for something to happen (route registered, message pullable).
const WAIT_LIMIT: Duration = Duration::from_secs(10);
/// The well-behaved client must complete at least this many requests during the attacks.
const MIN_REQUESTS: usize = 200;
/// At least this many rounds of attacks run, whatever the request count.
const MIN_ROUNDS: usize = 3;
/// Random-garbage connections per round.
const GARBAGE_PER_ROUND: u64 = 4;
/// Request codes no RocketMQ server knows.
const UNKNOWN_CODE_JSON: i32 = 9999;
const UNKNOWN_CODE_BINARY: i32 = 4242;
/// Topic every broker has (the auto-creation template); its route is registered at start.
const DEFAULT_TOPIC: &str = "TBW102";

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Addrs {
    broker: String,
    namesrv: String,
}

/// Runs `body` against a fresh broker under [`TEST_LIMIT`], the broker's clean stop included
/// ([`with_broker`]).
fn run_bounded<F, Fut>(name: &'static str, body: F)
where
    F: FnOnce(Addrs) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    with_broker(name, TEST_LIMIT, &[], |b| {
        body(Addrs {
            broker: b.broker_addr.clone(),
            namesrv: b.namesrv_addr.clone(),
        })
    });
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// The producer group of every SEND ([`send_request`], from tests/common).
const PRODUCER: &str = "hostile-producer";

fn without(mut cmd: RemotingCommand, field: &str) -> RemotingCommand {
    assert!(
        cmd.ext_fields.remove(field).is_some(),
        "test bug: the request has no {field} to remove"
    );
    cmd
}

// ---------------------------------------------------------------------------------------------
// Raw frames
// ---------------------------------------------------------------------------------------------

/// A frame with an arbitrary serialize type byte and arbitrary header bytes.
fn frame(type_code: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + header.len() + body.len());
    f.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    f.extend_from_slice(&((u32::from(type_code) << 24) | header.len() as u32).to_be_bytes());
    f.extend_from_slice(header);
    f.extend_from_slice(body);
    f
}

fn encoded(cmd: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(cmd, &mut out);
    out.to_vec()
}

/// What the codec makes of `bytes` fed as a stream: `Some(whole frames before the error)` if it
/// hits a framing error, `None` if it ends waiting for more bytes.
fn codec_verdict(bytes: &[u8]) -> Option<usize> {
    let mut buf = BytesMut::from(bytes);
    let mut frames = 0;
    loop {
        match decode_frame(&mut buf, MAX_FRAME_BYTES) {
            Ok(Some(_)) => frames += 1,
            Ok(None) => return None,
            Err(_) => return Some(frames),
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift64*), so a failure can be replayed.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// Reads until the peer closes (EOF or a reset). `Ok(bytes received before the close)`, or
/// `Err` if the connection is still open after [`CLOSE_LIMIT`].
async fn wait_closed(s: &mut TcpStream) -> Result<usize, String> {
    let deadline = tokio::time::Instant::now() + CLOSE_LIMIT;
    let mut buf = [0u8; 4096];
    let mut received = 0;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => {
                return Err(format!(
                    "connection still open after {CLOSE_LIMIT:?} ({received} bytes received)"
                ))
            }
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(received),
            Ok(Ok(n)) => received += n,
        }
    }
}

/// Reads one reply frame on a raw connection.
async fn read_reply(s: &mut TcpStream, buf: &mut BytesMut) -> Result<RemotingCommand, String> {
    let deadline = tokio::time::Instant::now() + CLOSE_LIMIT;
    loop {
        match decode_frame(buf, MAX_FRAME_BYTES) {
            Ok(Some(cmd)) => return Ok(cmd),
            Ok(None) => {}
            Err(e) => return Err(format!("the server sent a malformed frame: {e}")),
        }
        match tokio::time::timeout_at(deadline, s.read_buf(buf)).await {
            Err(_) => return Err(format!("no reply within {CLOSE_LIMIT:?}")),
            Ok(Ok(0)) => return Err("the server closed the connection instead of replying".into()),
            Ok(Err(e)) => return Err(format!("the connection failed instead of replying: {e}")),
            Ok(Ok(_)) => {}
        }
    }
}

/// Sends `req` on a raw connection and reads the reply to it.
async fn raw_call(
    s: &mut TcpStream,
    buf: &mut BytesMut,
    req: &RemotingCommand,
) -> Result<RemotingCommand, String> {
    s.write_all(&encoded(req))
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    let reply = read_reply(s, buf).await?;
    if !reply.is_response() || reply.opaque != req.opaque {
        return Err(format!(
            "expected the response to opaque {}, got flag {} opaque {} ({})",
            req.opaque,
            reply.flag,
            reply.opaque,
            describe(&reply)
        ));
    }
    Ok(reply)
}

// ---------------------------------------------------------------------------------------------
// Attacks
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Broker,
    Namesrv,
}

#[derive(Clone, Debug)]
enum Expect {
    /// Malformed input: the server must close this connection without being sent anything more,
    /// and (if `silent`) without writing anything to it.
    Closed { silent: bool },
    /// Incomplete input, then our write side is shut: the server must close its side too.
    ClosedAfterHalfClose,
    /// The socket is dropped right after the bytes; only the other clients' health tells.
    Dropped,
    /// The socket is reset (SO_LINGER 0) right after the bytes; only the other clients' health
    /// tells.
    Reset,
    /// A well-formed request: this response code (`None` = any error, i.e. not SUCCESS) with a
    /// remark containing the text, and the connection stays open and usable.
    Reply {
        code: Option<i32>,
        remark_has: String,
    },
}

#[derive(Clone, Debug)]
struct Attack {
    name: String,
    bytes: Vec<u8>,
    expect: Expect,
}

impl Attack {
    fn new(name: impl Into<String>, bytes: Vec<u8>, expect: Expect) -> Self {
        Attack {
            name: name.into(),
            bytes,
            expect,
        }
    }

    fn malformed(name: &str, bytes: Vec<u8>) -> Self {
        // Guard the test itself: each of these must be a framing error for the codec.
        assert_eq!(
            codec_verdict(&bytes),
            Some(0),
            "test bug: {name} is not a malformed first frame for the codec"
        );
        Attack::new(name, bytes, Expect::Closed { silent: true })
    }

    fn request(name: &str, req: RemotingCommand, code: Option<i32>, remark_has: &str) -> Self {
        Attack::new(
            name,
            encoded(&req),
            Expect::Reply {
                code,
                remark_has: remark_has.to_owned(),
            },
        )
    }
}

/// A request the target must answer with SUCCESS; sent after an error reply on the same raw
/// connection to prove it is still usable.
fn probe(target: Target) -> RemotingCommand {
    match target {
        Target::Broker => max_offset_request(DEFAULT_TOPIC, 0),
        Target::Namesrv => route_request(DEFAULT_TOPIC),
    }
}

fn attacks(target: Target, round: u64) -> Vec<Attack> {
    let json_header = br#"{"code":34,"language":"JAVA","version":401,"opaque":1,"flag":0}"#;
    let valid =
        encoded(&send_request(PRODUCER, "HostileTruncated", 0, vec![b'x'; 300]).with_opaque(5));
    let half = valid.get(..valid.len() / 2).unwrap_or_default().to_vec();

    // One byte over the limit: refused from its first word, the rest never comes.
    let mut over_limit = ((MAX_FRAME_BYTES - 4 + 1) as i32).to_be_bytes().to_vec();
    over_limit.extend_from_slice(&(json_header.len() as u32).to_be_bytes());
    over_limit.extend_from_slice(json_header);
    // Exactly at the limit: legal, so the server waits for the rest, which never comes.
    let mut at_limit = ((MAX_FRAME_BYTES - 4) as i32).to_be_bytes().to_vec();
    at_limit.extend_from_slice(&(json_header.len() as u32).to_be_bytes());
    at_limit.extend_from_slice(json_header);
    at_limit.resize(at_limit.len() + 64 * 1024, b'b');
    assert_eq!(codec_verdict(&at_limit), None, "test bug: at_limit");
    let mut header_too_long = 100i32.to_be_bytes().to_vec();
    header_too_long.extend_from_slice(&200u32.to_be_bytes());
    header_too_long.extend_from_slice(&[b'{'; 96]);

    let mut list = vec![
        Attack::malformed("frame of length 0", 0i32.to_be_bytes().to_vec()),
        Attack::malformed("negative frame length", (-1i32).to_be_bytes().to_vec()),
        Attack::malformed("frame declaring 16 MiB + 1 byte", over_limit),
        Attack::malformed(
            "frame declaring i32::MAX bytes",
            i32::MAX.to_be_bytes().to_vec(),
        ),
        Attack::malformed("header length longer than the frame", header_too_long),
        Attack::malformed("empty header", frame(0, b"", b"")),
        Attack::malformed(
            "invalid JSON in the header",
            frame(0, br#"{"code":34,"opaque":1,,}"#, b"body"),
        ),
        Attack::malformed(
            "non-UTF-8 JSON header",
            frame(0, b"{\"code\":34,\"remark\":\"\xff\xfe\"}", b""),
        ),
        Attack::malformed(
            "JSON header that is not an object",
            frame(0, br#""code""#, b""),
        ),
        Attack::malformed(
            "JSON header without a code",
            frame(0, br#"{"opaque":1}"#, b""),
        ),
        Attack::malformed("serialize type 7", frame(7, json_header, b"")),
        Attack::malformed(
            "truncated ROCKETMQ binary header",
            frame(1, &[0, 34, 0], b""),
        ),
        Attack::new(
            "frame truncated mid-way, then half-close",
            half.clone(),
            Expect::ClosedAfterHalfClose,
        ),
        Attack::new(
            "frame truncated mid-way, then close",
            half.clone(),
            Expect::Dropped,
        ),
        Attack::new("frame truncated mid-way, then reset", half, Expect::Reset),
        Attack::new(
            "16 MiB frame with 64 KiB of its body, then half-close",
            at_limit,
            Expect::ClosedAfterHalfClose,
        ),
        Attack::request(
            "unknown request code (JSON header)",
            RemotingCommand::new_request(UNKNOWN_CODE_JSON).with_opaque(101),
            Some(rc::REQUEST_CODE_NOT_SUPPORTED),
            &UNKNOWN_CODE_JSON.to_string(),
        ),
        Attack::request(
            "unknown request code (ROCKETMQ binary header)",
            RemotingCommand::new_request(UNKNOWN_CODE_BINARY)
                .with_opaque(102)
                .with_serialize_type(SerializeType::RocketMq),
            Some(rc::REQUEST_CODE_NOT_SUPPORTED),
            &UNKNOWN_CODE_BINARY.to_string(),
        ),
    ];
    match target {
        Target::Broker => list.extend([
            Attack::request(
                "SEND without bornTimestamp",
                without(
                    send_request(PRODUCER, "HostileBad", 0, "b"),
                    "bornTimestamp",
                )
                .with_opaque(103),
                None,
                "bornTimestamp",
            ),
            Attack::request(
                "SEND without topic",
                without(send_request(PRODUCER, "HostileBad", 0, "b"), "topic").with_opaque(104),
                None,
                "topic",
            ),
            Attack::request(
                "SEND with a non-numeric queueId",
                send_request(PRODUCER, "HostileBad", 0, "b")
                    .with_ext("queueId", "zero")
                    .with_opaque(105),
                None,
                "queueId",
            ),
            Attack::request(
                "PULL without queueOffset",
                without(
                    pull_request("hostile-bad", "HostileBad", 0, 0),
                    "queueOffset",
                )
                .with_opaque(106),
                None,
                "queueOffset",
            ),
        ]),
        Target::Namesrv => {
            let mut register = RemotingCommand::new_request(rq::REGISTER_BROKER)
                .with_ext_fields(
                    RegisterBrokerRequestHeader {
                        broker_name: "hostile-b".into(),
                        broker_addr: "127.0.0.1:1".into(),
                        cluster_name: "HostileCluster".into(),
                        ha_server_addr: "127.0.0.1:2".into(),
                        broker_id: 0,
                        ..Default::default()
                    }
                    .to_ext_fields(),
                )
                .with_opaque(104);
            register.ext_fields.remove("brokerName");
            list.extend([
                Attack::request(
                    "GET_ROUTEINFO_BY_TOPIC without topic",
                    without(route_request(DEFAULT_TOPIC), "topic").with_opaque(103),
                    None,
                    "topic",
                ),
                Attack::request(
                    "REGISTER_BROKER without brokerName",
                    register,
                    None,
                    "brokerName",
                ),
            ])
        }
    }
    for i in 0..GARBAGE_PER_ROUND {
        let seed = round * 1000 + i;
        let bytes = garbage(seed, 64 + (seed as usize * 97) % 2000);
        // Random bytes may happen to start a plausible frame; then the server rightly waits for
        // the rest, and we shut our side to make the frame definitely truncated.
        let expect = match codec_verdict(&bytes) {
            // Frames decoded before the error may be answered.
            Some(frames) => Expect::Closed {
                silent: frames == 0,
            },
            None => Expect::ClosedAfterHalfClose,
        };
        list.push(Attack::new(
            format!("random garbage (seed {seed}, {} bytes)", bytes.len()),
            bytes,
            expect,
        ));
    }
    list
}

/// Runs one attack on its own connection; `Err` describes how the server misbehaved.
async fn run_attack(addr: String, target: Target, attack: Attack) -> Result<(), String> {
    let mut s = TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = s.set_nodelay(true);
    let write = s.write_all(&attack.bytes).await;
    match attack.expect {
        Expect::Closed { silent } => {
            // A write error means the server already closed (reset): what we want.
            if write.is_ok() {
                let received = wait_closed(&mut s).await?;
                if silent && received > 0 {
                    return Err(format!(
                        "the server wrote {received} bytes before closing; expected nothing"
                    ));
                }
            }
            Ok(())
        }
        Expect::ClosedAfterHalfClose => {
            if write.is_ok() && s.shutdown().await.is_ok() {
                wait_closed(&mut s).await?;
            }
            Ok(())
        }
        Expect::Dropped => {
            drop(s);
            Ok(())
        }
        Expect::Reset => {
            s.set_zero_linger()
                .map_err(|e| format!("cannot set SO_LINGER 0: {e}"))?;
            drop(s);
            Ok(())
        }
        Expect::Reply { code, remark_has } => {
            write.map_err(|e| format!("write failed: {e}"))?;
            let mut buf = BytesMut::new();
            let reply = read_reply(&mut s, &mut buf).await?;
            let code_ok = match code {
                Some(c) => reply.code == c,
                None => reply.code != rc::SUCCESS,
            };
            let remark_ok = reply
                .remark
                .as_deref()
                .is_some_and(|r| r.contains(&remark_has));
            if !reply.is_response() || !code_ok || !remark_ok {
                return Err(format!(
                    "expected a response with code {} and a remark naming {remark_has:?}, got \
                     flag {} ({})",
                    code.map_or("≠ SUCCESS".to_owned(), |c| c.to_string()),
                    reply.flag,
                    describe(&reply)
                ));
            }
            // The connection must still serve requests.
            let follow = raw_call(&mut s, &mut buf, &probe(target).with_opaque(900))
                .await
                .map_err(|e| format!("after the error reply: {e}"))?;
            if follow.code != rc::SUCCESS {
                return Err(format!(
                    "after the error reply, a valid request got {}",
                    describe(&follow)
                ));
            }
            Ok(())
        }
    }
}

/// What a well-behaved client saw.
#[derive(Debug, Default)]
struct LoadReport {
    requests: usize,
    errors: usize,
    first_errors: Vec<String>,
}

impl LoadReport {
    fn record(&mut self, what: &str, reply: Result<RemotingCommand, String>) {
        self.requests += 1;
        let failure = match reply {
            Ok(r) if r.code == rc::SUCCESS => return,
            Ok(r) => describe(&r),
            Err(e) => e,
        };
        self.errors += 1;
        if self.first_errors.len() < 10 {
            self.first_errors
                .push(format!("request {} ({what}): {failure}", self.requests));
        }
    }
}

/// The well-behaved client: keeps sending real requests until `stop` is set and at least
/// [`MIN_REQUESTS`] have completed; `done` counts completed requests for the attack driver.
async fn well_behaved_load(
    client: RemotingClient,
    target: Target,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
) -> LoadReport {
    const TOPIC: &str = "HostileLoad";
    let mut report = LoadReport::default();
    let mut i = 0u64;
    while !(stop.load(Ordering::Relaxed) && report.requests >= MIN_REQUESTS) {
        let (what, req) = match (target, i % 2) {
            (Target::Broker, 0) => (
                "SEND_MESSAGE",
                send_request(PRODUCER, TOPIC, 0, format!("load message {i}")),
            ),
            (Target::Broker, _) => ("GET_MAX_OFFSET", max_offset_request(TOPIC, 0)),
            (Target::Namesrv, _) => ("GET_ROUTEINFO_BY_TOPIC", route_request(DEFAULT_TOPIC)),
        };
        let reply = client
            .invoke(req, RPC_TIMEOUT)
            .await
            .map_err(|e| e.to_string());
        report.record(what, reply);
        done.store(report.requests, Ordering::Relaxed);
        i += 1;
    }
    report
}

/// Runs attack rounds (all attacks of a round concurrently, each on its own connection) while the
/// well-behaved client works, then checks both sides.
async fn attack_while_serving(target: Target, attack_addr: &str, load_client: RemotingClient) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let load = tokio::spawn(well_behaved_load(
        load_client,
        target,
        stop.clone(),
        done.clone(),
    ));

    let mut failures = Vec::new();
    let mut attacks_run = 0;
    let mut round = 0u64;
    loop {
        let tasks: Vec<_> = attacks(target, round)
            .into_iter()
            .map(|a| {
                let name = a.name.clone();
                let task = tokio::spawn(run_attack(attack_addr.to_owned(), target, a));
                (name, task)
            })
            .collect();
        for (name, task) in tasks {
            attacks_run += 1;
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("round {round}, {name}: {e}")),
                Err(e) => failures.push(format!("round {round}, {name}: attack task failed: {e}")),
            }
        }
        round += 1;
        if round as usize >= MIN_ROUNDS && done.load(Ordering::Relaxed) >= MIN_REQUESTS {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let report = load.await.expect("the well-behaved client task panicked");
    eprintln!(
        "{target:?}: {attacks_run} attacks in {round} rounds; the well-behaved client made {} \
         requests, {} errors",
        report.requests, report.errors
    );

    assert!(
        failures.is_empty(),
        "{target:?}: {} of {attacks_run} attacks were mishandled (first 20):\n  {}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(report.requests >= MIN_REQUESTS, "{report:?}");
    assert_eq!(
        report.errors, 0,
        "{target:?}: the well-behaved client saw {} errors in {} requests during {round} rounds of \
         attacks; first ones:\n  {}",
        report.errors,
        report.requests,
        report.first_errors.join("\n  ")
    );
}

/// The route of `topic` from the name server, once it lists `broker_addr`.
async fn route_with(client: &RemotingClient, topic: &str, broker_addr: &str) -> Result<(), String> {
    let r = client
        .invoke(route_request(topic), RPC_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if r.code != rc::SUCCESS {
        return Err(describe(&r));
    }
    let route: TopicRouteData =
        parse_java_json(&r.body).map_err(|e| format!("unparsable route body: {e}"))?;
    if route
        .broker_datas
        .iter()
        .any(|b| b.broker_addrs.values().any(|a| a == broker_addr))
    {
        Ok(())
    } else {
        Err(format!(
            "route of {topic} does not list {broker_addr}: {route:?}"
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn broker_port_survives_hostile_frames() {
    run_bounded("broker_port_survives_hostile_frames", |addrs| async move {
        let load_client = RemotingClient::connect(&addrs.broker)
            .await
            .expect("well-behaved client connects");
        attack_while_serving(Target::Broker, &addrs.broker, load_client).await;

        // A fresh client is served: it sends, then pulls back exactly what it sent.
        const TOPIC: &str = "HostileFresh";
        const COUNT: usize = 16;
        let client = RemotingClient::connect(&addrs.broker)
            .await
            .expect("fresh client connects");
        let bodies: Vec<Vec<u8>> = (0..COUNT)
            .map(|i| format!("after the storm #{i}: {}", "x".repeat(i * 37)).into_bytes())
            .collect();
        for (i, body) in bodies.iter().enumerate() {
            let r = client
                .invoke(send_request(PRODUCER, TOPIC, 0, body.clone()), RPC_TIMEOUT)
                .await
                .expect("fresh SEND answered");
            assert_eq!(r.code, rc::SUCCESS, "fresh SEND #{i}: {}", describe(&r));
            assert_eq!(r.ext("queueOffset"), Some(i.to_string().as_str()));
        }
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut offset = 0i64;
        let start = Instant::now();
        while got.len() < COUNT {
            let r = client
                .invoke(
                    pull_request("hostile-fresh-consumer", TOPIC, 0, offset),
                    RPC_TIMEOUT,
                )
                .await
                .expect("fresh PULL answered");
            if r.code == rc::SUCCESS {
                for rec in records(&r.body, true) {
                    assert_eq!((rec.topic, rec.queue_id), (TOPIC, 0));
                    assert_eq!(rec.queue_offset, got.len() as i64);
                    got.push(rec.body.to_vec());
                }
                offset = r
                    .ext("nextBeginOffset")
                    .and_then(|o| o.parse().ok())
                    .expect("pull response has nextBeginOffset");
            } else {
                assert!(
                    r.code == rc::PULL_NOT_FOUND || r.code == rc::PULL_RETRY_IMMEDIATELY,
                    "fresh PULL at offset {offset}: {}",
                    describe(&r)
                );
                assert!(
                    start.elapsed() < WAIT_LIMIT,
                    "only {} of {COUNT} messages pullable after {WAIT_LIMIT:?}: {}",
                    got.len(),
                    describe(&r)
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        assert_eq!(got, bodies, "pulled bodies differ from the sent ones");
        let r = client
            .invoke(max_offset_request(TOPIC, 0), RPC_TIMEOUT)
            .await
            .expect("GET_MAX_OFFSET answered");
        assert_eq!(r.ext("offset"), Some(COUNT.to_string().as_str()));
    });
}

#[test]
fn namesrv_port_survives_hostile_frames() {
    run_bounded("namesrv_port_survives_hostile_frames", |addrs| async move {
        let load_client = RemotingClient::connect(&addrs.namesrv)
            .await
            .expect("well-behaved client connects");
        // The broker registers at start; wait for it so route queries succeed from the start.
        eventually("the broker's first registration", WAIT_LIMIT, || {
            route_with(&load_client, DEFAULT_TOPIC, &addrs.broker)
        })
        .await;
        attack_while_serving(Target::Namesrv, &addrs.namesrv, load_client).await;

        // A fresh client still gets routes...
        let client = RemotingClient::connect(&addrs.namesrv)
            .await
            .expect("fresh client connects");
        route_with(&client, DEFAULT_TOPIC, &addrs.broker)
            .await
            .expect("route query after the attacks");
        // ...including for a topic created now, so the broker's registration link works too.
        const TOPIC: &str = "HostileRouted";
        let producer = RemotingClient::connect(&addrs.broker)
            .await
            .expect("producer connects");
        let r = producer
            .invoke(send_request(PRODUCER, TOPIC, 0, "new topic"), RPC_TIMEOUT)
            .await
            .expect("SEND answered");
        assert_eq!(r.code, rc::SUCCESS, "{}", describe(&r));
        eventually("the new topic's route", WAIT_LIMIT, || {
            route_with(&client, TOPIC, &addrs.broker)
        })
        .await;
    });
}
