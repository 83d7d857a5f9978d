//! `AdminClient`: the wire calls behind `actormq admin` — name-server lookups and broker admin
//! requests over the remoting protocol, one cached connection per address.
//!
//! Every call checks the response code; anything but SUCCESS becomes an [`AdminError`] naming
//! the address, the request, the response code (number and RocketMQ name) and the remark.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use actormq_core::protocol::body::{parse_java_json, ClusterInfo, KvTable, TopicRouteData};
use actormq_core::protocol::codes::{
    request_code as rq, request_code_name, response_code as rc, response_code_name,
};
use actormq_core::protocol::command::RemotingCommand;
use tokio::sync::Mutex;

use crate::remoting::client::RemotingClient;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{addr}: {request} failed: {code} ({name}) {remark}")]
    Refused {
        addr: String,
        request: &'static str,
        code: i32,
        name: &'static str,
        remark: String,
    },
    #[error("{0}")]
    Wire(#[from] crate::remoting::client::ClientError),
    #[error("{addr}: {request}: cannot read the response body: {why}")]
    Body {
        addr: String,
        request: &'static str,
        why: String,
    },
    #[error("{0}")]
    Other(String),
}

impl AdminError {
    /// The response code when the server refused.
    pub fn code(&self) -> Option<i32> {
        match self {
            AdminError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, AdminError>;

pub struct AdminClient {
    namesrv: Vec<String>,
    timeout: Duration,
    conns: Mutex<HashMap<String, RemotingClient>>,
}

impl AdminClient {
    /// `namesrv`: `host:port[;host:port…]`.
    pub fn new(namesrv: &str, timeout: Duration) -> AdminClient {
        AdminClient {
            namesrv: namesrv
                .split([';', ','])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            timeout,
            conns: Mutex::new(HashMap::new()),
        }
    }

    /// The name-server addresses of `-n`, in order.
    pub fn namesrv_addrs(&self) -> &[String] {
        &self.namesrv
    }

    async fn conn(&self, addr: &str) -> Result<RemotingClient> {
        let mut conns = self.conns.lock().await;
        if let Some(c) = conns.get(addr).filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = RemotingClient::connect(addr).await?;
        conns.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Sends `cmd` to `addr`; the raw response, whatever its code.
    pub async fn call_raw(&self, addr: &str, cmd: RemotingCommand) -> Result<RemotingCommand> {
        let c = self.conn(addr).await?;
        Ok(c.invoke(cmd, self.timeout).await?)
    }

    /// Sends `cmd` to `addr`; SUCCESS or an error naming the code and remark.
    pub async fn call(&self, addr: &str, cmd: RemotingCommand) -> Result<RemotingCommand> {
        let request = request_code_name(cmd.code);
        let resp = self.call_raw(addr, cmd).await?;
        if resp.code != rc::SUCCESS {
            return Err(AdminError::Refused {
                addr: addr.to_string(),
                request,
                code: resp.code,
                name: response_code_name(resp.code),
                remark: resp.remark.unwrap_or_default(),
            });
        }
        Ok(resp)
    }

    /// Asks the name servers in turn; the first answer (success or refusal) wins.
    pub async fn call_namesrv(&self, cmd: RemotingCommand) -> Result<RemotingCommand> {
        let mut last = AdminError::Other("no name server address (-n or NAMESRV_ADDR)".into());
        for ns in &self.namesrv {
            match self.call(ns, cmd.clone()).await {
                Ok(r) => return Ok(r),
                Err(e @ AdminError::Refused { .. }) => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn body<T: serde::de::DeserializeOwned>(
        resp: &RemotingCommand,
        addr: &str,
        request: &'static str,
    ) -> Result<T> {
        parse_java_json(&resp.body).map_err(|e| AdminError::Body {
            addr: addr.to_string(),
            request,
            why: e.to_string(),
        })
    }

    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let resp = self
            .call_namesrv(RemotingCommand::new_request(rq::GET_BROKER_CLUSTER_INFO))
            .await?;
        Self::body(&resp, "name server", "GET_BROKER_CLUSTER_INFO")
    }

    pub async fn route(&self, topic: &str) -> Result<TopicRouteData> {
        let resp = self
            .call_namesrv(
                RemotingCommand::new_request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic),
            )
            .await?;
        Self::body(&resp, "name server", "GET_ROUTEINFO_BY_TOPIC")
    }

    pub async fn runtime_info(&self, addr: &str) -> Result<BTreeMap<String, String>> {
        let resp = self
            .call(
                addr,
                RemotingCommand::new_request(rq::GET_BROKER_RUNTIME_INFO),
            )
            .await?;
        let kv: KvTable = Self::body(&resp, addr, "GET_BROKER_RUNTIME_INFO")?;
        Ok(kv.table)
    }

    /// Master addresses of a cluster (from the name server).
    pub async fn cluster_masters(&self, cluster: &str) -> Result<Vec<(String, String)>> {
        let info = self.cluster_info().await?;
        let Some(names) = info.cluster_addr_table.get(cluster) else {
            return Err(AdminError::Other(format!(
                "cluster {cluster} is not known to the name server (clusters: {})",
                info.cluster_addr_table
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let mut out = Vec::new();
        for n in names {
            if let Some(addr) = info
                .broker_addr_table
                .get(n)
                .and_then(|b| b.broker_addrs.get(&0))
            {
                out.push((n.clone(), addr.clone()));
            }
        }
        Ok(out)
    }

    /// Master address of a broker name (from the name server).
    pub async fn broker_addr(&self, broker_name: &str) -> Result<String> {
        let info = self.cluster_info().await?;
        info.broker_addr_table
            .get(broker_name)
            .and_then(|b| b.broker_addrs.get(&0).cloned())
            .ok_or_else(|| {
                AdminError::Other(format!(
                    "broker {broker_name} has no master registered with the name server"
                ))
            })
    }

    /// (broker name, master address) of every broker serving `topic`.
    pub async fn topic_masters(&self, topic: &str) -> Result<Vec<(String, String)>> {
        let route = self.route(topic).await?;
        Ok(route
            .broker_datas
            .iter()
            .filter_map(|b| {
                b.broker_addrs
                    .get(&0)
                    .map(|a| (b.broker_name.clone(), a.clone()))
            })
            .collect())
    }
}
