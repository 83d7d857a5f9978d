//! A broker with its embedded name server, started on ephemeral 127.0.0.1 ports on its own thread,
//! for end-to-end tests. `stop` shuts it down cleanly and joins the thread.
//!
//! Test defaults differ from production only where a test needs it: 127.0.0.1 only, ephemeral
//! ports, 64 MiB CommitLog files and small ConsumeQueue/index files (so a test store stays small),
//! offsets flushed every second. Any RocketMQ key can be overridden.
//!
//! `start` returns only once every name server has acknowledged the broker's registration (the
//! broker's start waits for the first answers; `registered` then checks they were SUCCESS, or
//! waits for an attempt still in flight, at most `REGISTER_LIMIT`): a client that sends at once
//! finds the routes, TBW102's among them, instead of "No topic route info in name server".

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actormq_core::clock::SystemClock;
use actormq_core::config::{load_layers, Layer};
use anyhow::Context as _;

use super::wiring::{start, BrokerHandle, BrokerOptions};

/// How long [`TestBroker::start`] waits, after the broker's start, for every name server to
/// have answered a registration with SUCCESS.
const REGISTER_LIMIT: Duration = Duration::from_secs(10);

/// Waits (at most [`REGISTER_LIMIT`]) until every name server of `b` answered a registration with
/// SUCCESS; the error names each one that has not, with its last error.
async fn registered(b: &BrokerHandle) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + REGISTER_LIMIT;
    loop {
        let missing: Vec<String> = b
            .registrations()
            .await
            .into_iter()
            .filter(|s| s.successes == 0)
            .map(|s| {
                format!(
                    "{} ({})",
                    s.addr,
                    s.last_error.as_deref().unwrap_or("no answer yet")
                )
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "the test broker did not register with its name server(s) within {} s: {}",
                REGISTER_LIMIT.as_secs(),
                missing.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub struct TestBroker {
    /// `127.0.0.1:<port>` of the embedded name server.
    pub namesrv_addr: String,
    /// `127.0.0.1:<port>` of the broker's remoting port.
    pub broker_addr: String,
    /// `127.0.0.1:<port>` of the broker's Prometheus endpoint (`GET /metrics`).
    pub metrics_addr: String,
    /// `127.0.0.1:<port>` where a master serves its slaves (empty on a slave).
    pub ha_addr: String,
    pub store_root: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl TestBroker {
    /// Starts a broker whose store lives under `root`; `overrides` are RocketMQ config keys
    /// (e.g. `("maxMessageSize", "1024")`). Returns once every name server acknowledged the
    /// broker's registration; an error after `REGISTER_LIMIT` (10 s) names the ones that did not.
    ///
    /// Set `ACTORMQ_TEST_LOG` (an env-filter such as `actormq=debug`) to see the broker's log.
    pub fn start(root: &Path, overrides: &[(&str, &str)]) -> anyhow::Result<TestBroker> {
        if let Ok(filter) = std::env::var("ACTORMQ_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        let root_s = root.display().to_string();
        let mut pairs: Vec<(String, String)> = vec![
            ("storePathRootDir".into(), root_s),
            ("listenPort".into(), "0".into()),
            ("haListenPort".into(), "0".into()),
            ("metricsPromExporterPort".into(), "0".into()),
            ("brokerIP1".into(), "127.0.0.1".into()),
            ("brokerName".into(), "broker-a".into()),
            ("mappedFileSizeCommitLog".into(), (64u64 << 20).to_string()),
            (
                "mappedFileSizeConsumeQueue".into(),
                (30_000 * 20).to_string(),
            ),
            ("maxHashSlotNum".into(), "50000".into()),
            ("maxIndexNum".into(), "200000".into()),
            ("flushConsumerOffsetInterval".into(), "1000".into()),
            // Tests must not fail because the machine's disk happens to be 90 % full.
            ("diskSpaceWarningLevelRatio".into(), "95".into()),
        ];
        for (k, v) in overrides {
            pairs.push((k.to_string(), v.to_string()));
        }
        let loaded = load_layers(vec![Layer::from_strings("test overrides", pairs)])?;
        let cfg = loaded.config;
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let ns_home = root.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("test-broker".into())
            .spawn(move || {
                actix_rt::System::new().block_on(async move {
                    let opts = BrokerOptions {
                        namesrv_listen: Some("127.0.0.1:0".parse()?),
                        no_embedded_namesrv: false,
                        // The name server's kvConfig.json beside the store, not in $HOME.
                        namesrv_home: Some(ns_home),
                    };
                    let b = match start(cfg, opts, Arc::new(SystemClock)).await {
                        Ok(b) => b,
                        Err(e) => {
                            let msg = format!("{e:#}");
                            let _ = addr_tx.send(Err(msg.clone()));
                            anyhow::bail!(msg);
                        }
                    };
                    if let Err(e) = registered(&b).await {
                        let msg = format!("{e:#}");
                        let _ = addr_tx.send(Err(msg.clone()));
                        b.stop().await.context(msg.clone())?;
                        anyhow::bail!(msg);
                    }
                    let ns = b
                        .namesrv
                        .as_ref()
                        .map(|n| n.local_addr.to_string())
                        .unwrap_or_default();
                    let metrics = b.metrics_addr.map(|a| a.to_string()).unwrap_or_default();
                    let ha = b.ha_addr.map(|a| a.to_string()).unwrap_or_default();
                    let _ = addr_tx.send(Ok((ns, b.broker_addr.to_string(), metrics, ha)));
                    let _ = stop_rx.await;
                    b.stop().await
                })
            })?;
        let (namesrv_addr, broker_addr, metrics_addr, ha_addr) = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .context("the test broker did not start within 30 s")?
            .map_err(anyhow::Error::msg)?;
        Ok(TestBroker {
            namesrv_addr,
            broker_addr,
            metrics_addr,
            ha_addr,
            store_root: root.to_path_buf(),
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Clean shutdown (flushes, removes the abort file), then joins the broker thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "test broker stopped with an error"),
                Err(_) => tracing::warn!("test broker thread panicked"),
            }
        }
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.shutdown();
    }
}
