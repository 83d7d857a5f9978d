//! End-to-end tests of `actormq bench produce` / `bench consume` (issue #4) through the library
//! functions the CLI calls (`run_produce`, `run_consume`), against a `TestBroker` (broker and
//! embedded name server on 127.0.0.1 ephemeral ports, on its own thread).
//!
//! Each test starts its own broker in its own temp dir and runs on its own thread under a hard
//! limit (`common::run_bounded`), so a hung broker or client fails the test instead of hanging the
//! suite. Topics do not exist beforehand: the producer finds TBW102's route
//! and the broker auto-creates them, as with a real client. Every report also carries the
//! broker's CPU per message (`--broker-metrics`, `--broker-pid`, or discovered).

use std::time::Duration;

use crate::common::{broker, run_bounded, stop_broker};
use actormq::remoting::client::RemotingClient;
use actormq::tools::bench_cpu::{report_lines, BrokerProbe, BrokerUsage};
use actormq::tools::bench_wire::{
    run_consume, run_produce, ConsumeArgs, ConsumeReport, ErrorSource, ProduceArgs, ProduceReport,
};
use actormq_core::protocol::codes::{request_code, response_code};
use actormq_core::protocol::command::RemotingCommand;

async fn produce(namesrv: &str, topic: &str, extra: &[&str]) -> ProduceReport {
    let mut argv = vec![
        "-n",
        namesrv,
        "--topic",
        topic,
        "--quiet",
        "--timeout",
        "10",
    ];
    argv.extend_from_slice(extra);
    let args = ProduceArgs::parse(&argv).expect("produce args");
    run_produce(&args)
        .await
        .unwrap_or_else(|e| panic!("produce {argv:?}: {e:#}"))
}

/// Consumes `topic` until `expected` messages have arrived (or 10 s pass with none): dispatch
/// follows the acknowledgements asynchronously, so a short idle bound alone could stop early.
async fn consume(namesrv: &str, topic: &str, expected: u64) -> ConsumeReport {
    consume_with(namesrv, topic, expected, &[]).await
}

async fn consume_with(namesrv: &str, topic: &str, expected: u64, extra: &[&str]) -> ConsumeReport {
    let expected = expected.to_string();
    let mut argv = vec![
        "-n",
        namesrv,
        "--topic",
        topic,
        "--quiet",
        "--count",
        &expected,
        "--idle",
        "10",
        "--check-crc",
        "--batch-size",
        "32",
    ];
    argv.extend_from_slice(extra);
    let args = ConsumeArgs::parse(&argv).expect("consume args");
    let report = run_consume(&args)
        .await
        .unwrap_or_else(|e| panic!("consume {argv:?}: {e:#}"));
    // Stopping at the count would hide extra (say, duplicated) messages: the broker must hold
    // exactly that many.
    let client = RemotingClient::connect(&report.target.broker_addr)
        .await
        .expect("connect to the broker");
    let mut stored = 0u64;
    for q in 0..report.target.queues {
        let r = client
            .invoke(
                RemotingCommand::new_request(request_code::GET_MAX_OFFSET)
                    .with_ext("topic", topic)
                    .with_ext("queueId", q.to_string()),
                Duration::from_secs(10),
            )
            .await
            .expect("GET_MAX_OFFSET answered");
        stored += r
            .ext("offset")
            .and_then(|o| o.parse::<u64>().ok())
            .expect("offset");
    }
    assert_eq!(stored.to_string(), expected, "messages stored in {topic}");
    report
}

fn assert_clean_produce(r: &ProduceReport, n: u64) {
    assert!(r.errors.is_empty(), "produce errors: {:?}", r.errors);
    assert_eq!(r.sent, n, "sent");
    assert_eq!(r.acked, n, "acknowledged");
    let lat = r.latency.expect("latency recorded");
    assert!(lat.samples > 0 && lat.p50_us <= lat.p99_us && lat.p99_us <= lat.max_us);
}

fn assert_consumed_exactly(r: &ConsumeReport, n: u64, size: u64) {
    assert!(r.errors.is_empty(), "consume errors: {:?}", r.errors);
    assert_eq!(r.messages, n, "messages consumed");
    assert_eq!(r.body_bytes, n * size, "body bytes consumed");
    assert!(r.latency.is_some());
}

#[test]
fn async_and_batch_produce_are_all_acknowledged_and_consumed() {
    run_bounded("bench_async_and_batch", || async {
        let (_dir, b) = broker(&[]);
        let ns = b.namesrv_addr.clone();

        // Async, window 32, 4 connections: the topic is auto-created from TBW102's route.
        let r = produce(
            &ns,
            "BenchAsync",
            &[
                "--count", "2000", "--mode", "async", "--window", "32", "--size", "256",
            ],
        )
        .await;
        assert_clean_produce(&r, 2000);
        assert!(r.target.via_default_topic, "BenchAsync had no route yet");
        assert_eq!(r.target.queues, 4, "Java's defaultTopicQueueNums");
        assert_eq!(r.target.broker_addr, b.broker_addr);
        let c = consume(&ns, "BenchAsync", 2000).await;
        assert_consumed_exactly(&c, 2000, 256);
        assert_eq!(c.target.queues, 4);

        // Batches of 8 (SEND_BATCH_MESSAGE): 500 messages per connection = 62 batches of 8 and
        // one of 4, so 4 × 63 requests.
        let r = produce(
            &ns,
            "BenchBatch",
            &[
                "--count", "2000", "--window", "32", "--batch", "8", "--size", "100",
            ],
        )
        .await;
        assert_clean_produce(&r, 2000);
        assert_eq!(
            r.latency.map(|l| l.samples),
            Some(252),
            "one sample per request"
        );
        let c = consume(&ns, "BenchBatch", 2000).await;
        assert_consumed_exactly(&c, 2000, 100);

        // Sending again to the now-existing topic uses its own route, and consume sees both runs.
        let r = produce(&ns, "BenchAsync", &["--count", "500", "--size", "256"]).await;
        assert_clean_produce(&r, 500);
        assert!(!r.target.via_default_topic);
        let c = consume(&ns, "BenchAsync", 2500).await;
        assert_consumed_exactly(&c, 2500, 256);
        stop_broker(b);
    });
}

#[test]
fn sync_v1_binary_header_and_oneway_sends_are_consumed() {
    run_bounded("bench_sync_oneway", || async {
        let (_dir, b) = broker(&[]);
        let ns = b.namesrv_addr.clone();

        // SEND_MESSAGE (10) with long header names, ROCKETMQ binary header, one in flight.
        let r = produce(
            &ns,
            "BenchSync",
            &[
                "--count",
                "300",
                "--mode",
                "sync",
                "--v1",
                "--header",
                "rocketmq",
                "--connections",
                "2",
            ],
        )
        .await;
        assert_clean_produce(&r, 300);
        assert_eq!(r.latency.map(|l| l.samples), Some(300));

        // Oneway: nothing comes back, but every message must still be stored.
        let r = produce(&ns, "BenchSync", &["--count", "300", "--mode", "oneway"]).await;
        assert_eq!((r.sent, r.acked), (300, 300));
        assert!(r.latency.is_none() && r.errors.is_empty());
        let c = consume(&ns, "BenchSync", 600).await;
        assert_consumed_exactly(&c, 600, 1024);
        stop_broker(b);
    });
}

#[test]
fn broker_errors_are_counted_by_response_code_with_the_first_remark() {
    run_bounded("bench_errors", || async {
        let (_dir, b) = broker(&[]);
        let ns = b.namesrv_addr.clone();
        // The topic is created with min(16, TBW102's 8) = 8 queues, so every request to queues
        // 8..15 is refused with SYSTEM_ERROR; sync mode on one connection makes the split exact.
        let r = produce(
            &ns,
            "BenchErrors",
            &[
                "--count",
                "160",
                "--queues",
                "16",
                "--mode",
                "sync",
                "--connections",
                "1",
            ],
        )
        .await;
        assert_eq!(r.sent, 160);
        assert_eq!(r.acked, 80, "queues 0..7 accept");
        assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
        let e = &r.errors[0];
        assert_eq!(e.source, ErrorSource::Broker(response_code::SYSTEM_ERROR));
        assert_eq!((e.requests, e.messages), (80, 80));
        assert!(e.first_remark.contains("queueId"), "{}", e.first_remark);
        assert_eq!(r.failed_requests(), 80);

        // Consuming a topic nobody created fails with a clear message.
        let args = ConsumeArgs::parse(&["-n", &ns, "--topic", "NoSuchTopic", "--quiet"]).unwrap();
        let err = run_consume(&args).await.expect_err("no route");
        assert!(format!("{err:#}").contains("no route"), "{err:#}");
        stop_broker(b);
    });
}

/// The broker's CPU over a run (issue #34), from each source: its `/metrics` (`--broker-metrics`),
/// its `/proc/PID/stat` (`--broker-pid`; the `TestBroker` runs in this process) and discovery
/// through GET_BROKER_CONFIG, which finds port 0 here and says so instead of failing the run. A
/// pid with no `/proc` entry fails the bench before it sends anything. No timing is asserted: a
/// short run may use less than one clock tick.
#[test]
fn broker_cpu_is_measured_from_metrics_or_proc_and_unavailable_is_explained() {
    run_bounded("bench_broker_cpu", || async {
        let (_dir, b) = broker(&[]);
        let ns = b.namesrv_addr.clone();
        let pid = std::process::id().to_string();
        let base = ["--count", "200", "--mode", "sync", "--connections", "2"];
        let metrics = b.metrics_addr.clone();
        let r = produce(
            &ns,
            "BenchCpu",
            &[&base[..], &["--broker-metrics", &metrics]].concat(),
        )
        .await;
        assert_clean_produce(&r, 200);
        match &r.broker_cpu {
            BrokerUsage::Measured(c) => {
                assert_eq!(c.probe, BrokerProbe::Metrics(metrics.clone()));
                assert_eq!(c.messages, 200);
                assert!(c.cpu_seconds >= 0.0 && c.us_per_msg().is_finite());
                assert!(c.rss_before.is_some_and(|m| m > 0));
                assert!(c.rss_after.is_some_and(|m| m > 0));
            }
            other => panic!("no broker CPU from /metrics: {other:?}"),
        }

        let r = produce(
            &ns,
            "BenchCpu",
            &[&base[..], &["--broker-pid", &pid]].concat(),
        )
        .await;
        assert_clean_produce(&r, 200);
        let lines = report_lines(&r.broker_cpu);
        assert!(
            lines[0].starts_with("broker cpu: ")
                && lines[0].contains(" µs/msg (utime+stime ")
                && lines[0].contains(&format!("over 200 msgs; /proc/{pid}/stat)")),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("broker rss: "), "{lines:?}");

        let r = produce(&ns, "BenchCpu", &base).await;
        assert_clean_produce(&r, 200);
        match &r.broker_cpu {
            BrokerUsage::Unavailable(why) => {
                assert!(why.contains("metricsPromExporterPort is 0"), "{why}")
            }
            other => panic!("the TestBroker's port 0 cannot be discovered: {other:?}"),
        }

        let c = consume_with(&ns, "BenchCpu", 600, &["--broker-pid", &pid]).await;
        match &c.broker_cpu {
            BrokerUsage::Measured(cpu) => assert_eq!(cpu.messages, 600),
            other => panic!("no broker CPU for the consumer: {other:?}"),
        }

        let argv = [
            &base[..],
            &[
                "-n",
                &ns,
                "--topic",
                "BenchCpu",
                "--quiet",
                "--broker-pid",
                "0",
            ],
        ]
        .concat();
        let args = ProduceArgs::parse(&argv).expect("produce args");
        let err = run_produce(&args)
            .await
            .expect_err("pid 0 has no /proc entry");
        assert!(
            format!("{err:#}").contains("/proc/0/stat"),
            "the error names the entry: {err:#}"
        );
        assert!(
            ProduceArgs::parse(&["--broker-pid", "1", "--broker-metrics", "h:1"]).is_err(),
            "one source at a time"
        );
        stop_broker(b);
    });
}
