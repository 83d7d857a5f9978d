//! The broker's CPU per message, as `actormq bench produce|consume` measure it (issue #34): the
//! broker process's `utime + stime` read just before the run's first request and just after its
//! last reply, divided by the messages stored (produce) or received (consume), plus its resident
//! set at both ends.
//!
//! Where the figure comes from ([`BrokerProbe`]), in this order:
//! * `--broker-pid PID`: `/proc/PID/stat` on this host ([`crate::metrics::proc_stat`]) — any broker,
//!   Apache RocketMQ 4.9.4's JVM included, so the same command measures both;
//! * `--broker-metrics HOST:PORT`: the broker's Prometheus page, `process_cpu_seconds_total` and
//!   `process_resident_memory_bytes` (the broker reads the same `/proc` fields, so both sources
//!   agree);
//! * neither: the broker's own configuration over the wire (GET_BROKER_CONFIG, 26) names its
//!   `metricsPromExporterPort`, scraped on the broker's host. A broker without one (RocketMQ 4.x)
//!   or with port 0 gives [`BrokerUsage::Unavailable`] with the reason; the run goes on.
//!
//! *Invariants:* an explicit probe that cannot be read before the run fails the bench at once (so
//! no run is wasted); anything that fails later becomes `Unavailable(reason)`, never a panic. The
//! figure is the broker's whole process over the run's wall time, background work (flush,
//! dispatch) included, so nothing is hidden on a thread the bench does not see; it has the
//! kernel's clock-tick resolution (10 ms at 100 Hz), so short runs are coarse.
//!
//! The scrape is one HTTP/1.0 GET with `Connection: close` over a tokio socket: the answer is read
//! to EOF with no chunking or keep-alive to handle, which does not justify an HTTP client crate.

use std::time::Duration;

use actormq_core::protocol::codes::{request_code, response_code};
use actormq_core::protocol::command::RemotingCommand;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::metrics::proc_stat;
use crate::remoting::client::RemotingClient;

/// The bench options that choose the probe (flattened into `bench produce` and `bench consume`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct BrokerCpuArgs {
    /// Read the broker's CPU from its Prometheus page at HOST:PORT (default: the
    /// `metricsPromExporterPort` of its configuration, on its host).
    #[arg(long, value_name = "HOST:PORT")]
    pub broker_metrics: Option<String>,
    /// Read the broker's CPU from /proc/PID/stat (a broker on this host without /metrics, such as
    /// Apache RocketMQ 4.x).
    #[arg(long, value_name = "PID", conflicts_with = "broker_metrics")]
    pub broker_pid: Option<u32>,
}

/// Bound of one scrape or configuration request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// A `/metrics` page larger than this is refused (a broker with many topics has a few 100 KiB).
const MAX_PAGE: usize = 64 << 20;

/// Where the broker's CPU time is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrokerProbe {
    /// `GET /metrics` at `host:port`.
    Metrics(String),
    /// `/proc/PID/stat` of a broker on this host.
    Pid(u32),
}

impl std::fmt::Display for BrokerProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BrokerProbe::Metrics(a) => write!(f, "/metrics of {a}"),
            BrokerProbe::Pid(p) => write!(f, "/proc/{p}/stat"),
        }
    }
}

/// The broker's counters at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BrokerSample {
    /// `utime + stime`, seconds.
    pub cpu_seconds: f64,
    /// Resident set, bytes (if the source gives it).
    pub rss_bytes: Option<u64>,
    /// The same by kind (`/proc/PID/status`; only with `--broker-pid`).
    pub rss_parts: Option<proc_stat::RssParts>,
}

/// The broker's CPU over one run.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerCpu {
    pub probe: BrokerProbe,
    /// `utime + stime` used during the run, seconds.
    pub cpu_seconds: f64,
    /// Messages the figure is divided by (stored for produce, received for consume).
    pub messages: u64,
    pub rss_before: Option<u64>,
    pub rss_after: Option<u64>,
    pub rss_after_parts: Option<proc_stat::RssParts>,
}

impl BrokerCpu {
    /// Broker CPU per message, microseconds.
    pub fn us_per_msg(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.messages.max(1) as f64
    }
}

/// What a run learnt about the broker's CPU.
#[derive(Clone, Debug, PartialEq)]
pub enum BrokerUsage {
    Measured(BrokerCpu),
    /// Why there is no figure.
    Unavailable(String),
}

impl BrokerProbe {
    /// Reads the broker's counters now.
    pub async fn sample(&self) -> Result<BrokerSample, String> {
        match self {
            BrokerProbe::Pid(pid) => {
                let s = proc_stat::read_stat(&proc_stat::proc_dir(Some(*pid)).join("stat"))
                    .map_err(|e| e.to_string())?;
                Ok(BrokerSample {
                    cpu_seconds: s.cpu_seconds(),
                    rss_bytes: Some(s.rss_bytes()),
                    rss_parts: proc_stat::read_rss_parts(Some(*pid)).ok(),
                })
            }
            BrokerProbe::Metrics(addr) => parse_metrics(&scrape(addr).await?),
        }
    }
}

/// `process_cpu_seconds_total` and `process_resident_memory_bytes` of a Prometheus text page.
pub fn parse_metrics(page: &str) -> Result<BrokerSample, String> {
    let value = |name: &str| -> Option<Result<f64, String>> {
        page.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?;
            // The name must end here: `process_cpu_seconds_total_x` is another series.
            let rest = match rest.strip_prefix('{') {
                Some(r) => &r[r.find('}')? + 1..],
                None if rest.starts_with([' ', '\t']) => rest,
                None => return None,
            };
            let v = rest.split_whitespace().next().unwrap_or("");
            Some(
                v.parse::<f64>()
                    .map_err(|_| format!("{name} is {v:?}, not a number")),
            )
        })
    };
    let cpu_seconds =
        value("process_cpu_seconds_total").ok_or("the page has no process_cpu_seconds_total")??;
    let rss_bytes = match value("process_resident_memory_bytes") {
        Some(Ok(v)) if v >= 0.0 => Some(v as u64),
        _ => None,
    };
    Ok(BrokerSample {
        cpu_seconds,
        rss_bytes,
        rss_parts: None,
    })
}

/// `GET /metrics` at `addr` (`host:port`): the body of a 200 answer.
async fn scrape(addr: &str) -> Result<String, String> {
    let get = async {
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        s.write_all(
            format!("GET /metrics HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .map_err(|e| format!("cannot write to {addr}: {e}"))?;
        let mut buf = Vec::new();
        (&mut s)
            .take(MAX_PAGE as u64 + 1)
            .read_to_end(&mut buf)
            .await
            .map_err(|e| format!("cannot read from {addr}: {e}"))?;
        if buf.len() > MAX_PAGE {
            return Err(format!("{addr}'s /metrics is over {MAX_PAGE} bytes"));
        }
        http_body(&String::from_utf8_lossy(&buf)).map(str::to_string)
    };
    tokio::time::timeout(PROBE_TIMEOUT, get)
        .await
        .map_err(|_| format!("GET /metrics at {addr}: no answer in {PROBE_TIMEOUT:?}"))?
}

/// The body of an HTTP/1.x answer with status 200.
pub fn http_body(answer: &str) -> Result<&str, String> {
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or("the HTTP answer has no end of headers")?;
    let status = head.lines().next().unwrap_or("");
    match status.split_whitespace().nth(1) {
        Some("200") if status.starts_with("HTTP/1.") => Ok(body),
        _ => Err(format!("HTTP answer {status:?}")),
    }
}

/// The `/metrics` port a broker's configuration (GET_BROKER_CONFIG's `key=value` lines) names.
pub fn metrics_port(config: &str) -> Result<u16, String> {
    let value = config
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "metricsPromExporterPort")
        .map(|(_, v)| v.trim())
        .ok_or(
            "the broker's configuration has no metricsPromExporterPort (no /metrics, as a \
             RocketMQ 4.x broker): pass --broker-pid for a broker on this host",
        )?;
    match value.parse::<u16>() {
        Ok(0) => Err(
            "the broker's metricsPromExporterPort is 0 (an ephemeral port it does \
                      not report): pass --broker-metrics HOST:PORT or --broker-pid"
                .into(),
        ),
        Ok(p) => Ok(p),
        Err(_) => Err(format!("the broker's metricsPromExporterPort is {value:?}")),
    }
}

/// The `/metrics` address of the broker at `broker_addr`, from its own configuration.
pub async fn discover(broker_addr: &str) -> Result<BrokerProbe, String> {
    let ask = async {
        let client = RemotingClient::connect(broker_addr)
            .await
            .map_err(|e| format!("cannot connect to {broker_addr}: {e}"))?;
        let resp = client
            .invoke(
                RemotingCommand::new_request(request_code::GET_BROKER_CONFIG),
                PROBE_TIMEOUT,
            )
            .await
            .map_err(|e| format!("GET_BROKER_CONFIG to {broker_addr}: {e}"))?;
        if resp.code != response_code::SUCCESS {
            return Err(format!(
                "GET_BROKER_CONFIG to {broker_addr} answered code {}",
                resp.code
            ));
        }
        let port = metrics_port(&String::from_utf8_lossy(&resp.body))?;
        let host = broker_addr.rsplit_once(':').map_or(broker_addr, |(h, _)| h);
        Ok(BrokerProbe::Metrics(format!("{host}:{port}")))
    };
    tokio::time::timeout(PROBE_TIMEOUT * 2, ask)
        .await
        .map_err(|_| format!("GET_BROKER_CONFIG to {broker_addr}: no answer"))?
}

/// One run's broker measurement: [`BrokerMeter::start`] before the first request,
/// [`BrokerMeter::finish`] after the last reply.
pub struct BrokerMeter {
    state: Result<(BrokerProbe, BrokerSample), String>,
}

impl BrokerMeter {
    /// Chooses the probe (`pid`, else `metrics`, else discovery at `broker_addr`) and samples it.
    /// An explicit probe that cannot be read is an error; a discovered one that cannot is noted.
    pub async fn start(
        metrics: Option<&str>,
        pid: Option<u32>,
        broker_addr: &str,
    ) -> anyhow::Result<BrokerMeter> {
        let explicit = match (pid, metrics) {
            (Some(p), _) => Some(BrokerProbe::Pid(p)),
            (None, Some(m)) => Some(BrokerProbe::Metrics(m.to_string())),
            (None, None) => None,
        };
        let state = match explicit {
            Some(probe) => {
                let first = probe
                    .sample()
                    .await
                    .map_err(|e| anyhow::anyhow!("broker CPU ({probe}): {e}"))?;
                Ok((probe, first))
            }
            None => match discover(broker_addr).await {
                Ok(probe) => match probe.sample().await {
                    Ok(first) => Ok((probe, first)),
                    Err(e) => Err(format!("{probe}: {e}")),
                },
                Err(e) => Err(e),
            },
        };
        Ok(BrokerMeter { state })
    }

    /// The broker's CPU since [`BrokerMeter::start`], over `messages`.
    pub async fn finish(self, messages: u64) -> BrokerUsage {
        let (probe, before) = match self.state {
            Ok(s) => s,
            Err(why) => return BrokerUsage::Unavailable(why),
        };
        match probe.sample().await {
            Ok(after) => BrokerUsage::Measured(BrokerCpu {
                probe,
                cpu_seconds: (after.cpu_seconds - before.cpu_seconds).max(0.0),
                messages,
                rss_before: before.rss_bytes,
                rss_after: after.rss_bytes,
                rss_after_parts: after.rss_parts,
            }),
            Err(e) => BrokerUsage::Unavailable(format!("{probe} after the run: {e}")),
        }
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes as MB (10^6), one decimal.
pub fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// The report's lines: `broker cpu: 13.2 µs/msg (utime+stime 1.32 s over 100,000 msgs; …)` and,
/// when known, `broker rss: 92.1 MB before, 140.3 MB after (anon 40.0 MB, file-backed 60.2 MB,
/// shmem 40.1 MB)` — the kernel's kinds, from `/proc` only: on ActorMQ file-backed is the mapped
/// store files' pages (page cache), shmem its CommitLog write rings.
pub fn report_lines(u: &BrokerUsage) -> Vec<String> {
    match u {
        BrokerUsage::Unavailable(why) => vec![format!("broker cpu: n/a ({why})")],
        BrokerUsage::Measured(c) => {
            let mut lines = vec![format!(
                "broker cpu: {:.1} µs/msg (utime+stime {:.2} s over {} msgs; {})",
                c.us_per_msg(),
                c.cpu_seconds,
                thousands(c.messages),
                c.probe
            )];
            if let (Some(b), Some(a)) = (c.rss_before, c.rss_after) {
                let mut line = format!("broker rss: {} before, {} after", mb(b), mb(a));
                if let Some(p) = c.rss_after_parts {
                    line += &format!(
                        " (anon {}, file-backed {}, shmem {})",
                        mb(p.anon),
                        mb(p.file),
                        mb(p.shmem)
                    );
                }
                lines.push(line);
            }
            lines
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_page_values_by_exact_name() {
        let page = "# HELP process_cpu_seconds_total x\n# TYPE process_cpu_seconds_total counter\n\
                    process_cpu_seconds_total_other 9\nprocess_cpu_seconds_total 12.34\n\
                    process_resident_memory_bytes{pid=\"1\"} 9.2e7\n";
        let s = parse_metrics(page).unwrap();
        assert_eq!(s.cpu_seconds, 12.34);
        assert_eq!(s.rss_bytes, Some(92_000_000));
        let s = parse_metrics("process_cpu_seconds_total 1\nprocess_resident_memory_bytes 9.2e7\n")
            .unwrap();
        assert_eq!(s.rss_bytes, Some(92_000_000));
        assert!(parse_metrics("").unwrap_err().contains("no process_cpu"));
        assert!(parse_metrics("process_cpu_seconds_total x\n")
            .unwrap_err()
            .contains("not a number"));
        assert_eq!(
            parse_metrics("process_cpu_seconds_total 3\n")
                .unwrap()
                .rss_bytes,
            None
        );
    }

    #[test]
    fn http_answers() {
        assert_eq!(
            http_body("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nab"),
            Ok("ab")
        );
        assert!(http_body("HTTP/1.1 404 Not Found\r\n\r\n").is_err());
        assert!(http_body("garbage").is_err());
        assert!(http_body("").is_err());
    }

    #[test]
    fn metrics_port_from_the_broker_config() {
        assert_eq!(
            metrics_port("listenPort=10911\nmetricsPromExporterPort=5557\n"),
            Ok(5557)
        );
        assert!(metrics_port("listenPort=10911\n")
            .unwrap_err()
            .contains("--broker-pid"));
        assert!(metrics_port("metricsPromExporterPort=0\n")
            .unwrap_err()
            .contains("--broker-metrics"));
        assert!(metrics_port("metricsPromExporterPort=x\n").is_err());
    }

    #[test]
    fn lines_print_micros_per_message_and_memory() {
        let u = BrokerUsage::Measured(BrokerCpu {
            probe: BrokerProbe::Pid(42),
            cpu_seconds: 1.32,
            messages: 100_000,
            rss_before: Some(92_100_000),
            rss_after: Some(140_340_000),
            rss_after_parts: Some(proc_stat::RssParts {
                anon: 40_000_000,
                file: 60_240_000,
                shmem: 40_100_000,
            }),
        });
        assert_eq!(
            report_lines(&u),
            [
                "broker cpu: 13.2 µs/msg (utime+stime 1.32 s over 100,000 msgs; /proc/42/stat)",
                "broker rss: 92.1 MB before, 140.3 MB after (anon 40.0 MB, file-backed 60.2 MB, shmem 40.1 MB)"
            ]
        );
        assert_eq!(
            report_lines(&BrokerUsage::Unavailable("why".into())),
            ["broker cpu: n/a (why)"]
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
