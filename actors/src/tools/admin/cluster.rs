//! mqadmin's cluster and broker commands: `clusterList` (106, then 28 per broker),
//! `brokerStatus` (28), `getBrokerConfig` (26), `updateBrokerConfig` (25) and
//! `deleteExpiredCommitLog` (27).
//!
//! Each command is its clap options and a `run` that prints mqadmin's lines (or nothing with
//! `--json`) and returns the JSON document.

use actormq_core::protocol::codes::request_code as rq;
use actormq_core::protocol::command::RemotingCommand;
use clap::Args;
use serde_json::{json, Value};

use super::client::AdminClient;
use super::show::{print_kv, Table};
use super::{ops, print_or_return, targets, to_each, Outcome, Target};

// `clusterList`.
#[derive(Args, Debug, Clone)]
pub struct ClusterList {
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

impl ClusterList {
    /// A row per broker of each cluster (or of `-c`'s), its figures from its runtime info; an
    /// unreachable broker is a row saying so.
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        let info = admin.cluster_info().await?;
        let mut t = Table::new(&[
            "Cluster Name",
            "Broker Name",
            "BID",
            "Addr",
            "Version",
            "InTPS(LOAD)",
            "OutTPS(LOAD)",
            "PCWait(ms)",
            "Hour",
            "SPACE",
        ]);
        let now = chrono::Utc::now().timestamp_millis();
        for (cluster, names) in &info.cluster_addr_table {
            if self.cluster.as_deref().is_some_and(|c| c != cluster) {
                continue;
            }
            for name in names {
                let Some(bd) = info.broker_addr_table.get(name) else {
                    continue;
                };
                for (id, addr) in &bd.broker_addrs {
                    let kv = admin.runtime_info(addr).await.unwrap_or_default();
                    let mut row = vec![cluster.clone(), name.clone(), id.to_string(), addr.clone()];
                    row.extend(broker_figures(&kv, now));
                    t.push(row);
                }
            }
        }
        print_or_return(t)
    }
}

/// `clusterList`'s columns from Version on, out of a broker's runtime info (empty when it did
/// not answer).
fn broker_figures(kv: &std::collections::BTreeMap<String, String>, now: i64) -> Vec<String> {
    let get = |k: &str| kv.get(k).cloned().unwrap_or_default();
    let first = |k: &str| {
        get(k)
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let earliest: i64 = get("earliestMessageTimeStamp").parse().unwrap_or(0);
    let hours = if earliest > 0 {
        format!("{:.2}", (now - earliest) as f64 / 3_600_000.0)
    } else {
        "0.00".into()
    };
    vec![
        if kv.is_empty() {
            "(unreachable)".into()
        } else {
            get("brokerVersionDesc")
        },
        format!("{:.2}", first("putTps")),
        // 4.x brokers send `getTransferedTps`, 5.x ones `getTransferredTps`.
        format!(
            "{:.2}",
            if kv.contains_key("getTransferedTps") {
                first("getTransferedTps")
            } else {
                first("getTransferredTps")
            }
        ),
        get("pageCacheLockTimeMills"),
        hours,
        get("commitLogDiskRatio"),
    ]
}

// `brokerStatus`.
#[derive(Args, Debug, Clone)]
pub struct BrokerStatus {
    #[command(flatten)]
    target: Target,
}

impl BrokerStatus {
    /// Each broker's runtime key/values, under a title per broker when there are several.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let mut all = serde_json::Map::new();
        let addrs = targets(admin, &self.target).await?;
        for addr in &addrs {
            let kv: Vec<(String, String)> = admin.runtime_info(addr).await?.into_iter().collect();
            let title = (addrs.len() > 1).then(|| format!("============{addr}============"));
            all.insert(addr.clone(), print_kv(title.as_deref(), &kv, json));
        }
        Ok(Some(Value::Object(all)))
    }
}

// `deleteExpiredCommitLog`.
#[derive(Args, Debug, Clone)]
pub struct DeleteExpiredCommitLog {
    #[command(flatten)]
    target: Target,
}

impl DeleteExpiredCommitLog {
    pub async fn run(self, admin: &AdminClient) -> Outcome {
        let cmd = RemotingCommand::new_request(rq::DELETE_EXPIRED_COMMITLOG);
        let done = to_each(admin, &self.target, cmd, "delete expired files on").await?;
        Ok(Some(json!({ "brokers": done })))
    }
}

// `getBrokerConfig`.
#[derive(Args, Debug, Clone)]
pub struct GetBrokerConfig {
    #[command(flatten)]
    target: Target,
}

impl GetBrokerConfig {
    /// Each broker's `key=value` configuration text as aligned lines under its address.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let mut all = serde_json::Map::new();
        for addr in targets(admin, &self.target).await? {
            let resp = admin
                .call(&addr, RemotingCommand::new_request(rq::GET_BROKER_CONFIG))
                .await?;
            let kv = ops::properties(&String::from_utf8_lossy(&resp.body));
            let title = format!("============{addr}============");
            all.insert(addr.clone(), print_kv(Some(&title), &kv, json));
        }
        Ok(Some(Value::Object(all)))
    }
}

// `updateBrokerConfig`.
#[derive(Args, Debug, Clone)]
pub struct UpdateBrokerConfig {
    #[command(flatten)]
    target: Target,
    #[arg(short = 'k', long)]
    key: String,
    #[arg(short = 'v', long)]
    value: String,
}

impl UpdateBrokerConfig {
    /// Sends `key=value` to each broker; a broker's remark is printed under its line.
    pub async fn run(self, admin: &AdminClient, json: bool) -> Outcome {
        let (key, value) = (&self.key, &self.value);
        let mut done = Vec::new();
        for addr in targets(admin, &self.target).await? {
            let cmd = RemotingCommand::new_request(rq::UPDATE_BROKER_CONFIG)
                .with_body(format!("{key}={value}\n").into_bytes());
            let resp = admin.call(&addr, cmd).await?;
            let note = resp.remark.unwrap_or_default();
            if !json {
                println!("update broker config success, {addr}");
                if !note.is_empty() {
                    println!("  {note}");
                }
            }
            done.push(json!({"broker": addr, "note": note}));
        }
        Ok(Some(json!({"key": key, "value": value, "brokers": done})))
    }
}
