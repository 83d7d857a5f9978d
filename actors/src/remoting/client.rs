//! A small async remoting client: one TCP connection, requests matched to replies by `opaque`.
//! Used by the broker to register with name servers, by `actormq bench` and `actormq admin`, and
//! by tests. Runs its socket in one tokio task; callers may share it (`Clone`).

use std::collections::HashMap;
use std::time::Duration;

use actormq_core::protocol::command::RemotingCommand;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::Framed;

use super::RemotingCodec;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("connection to {0} closed")]
    Closed(String),
    #[error("no reply from {addr} within {timeout_ms} ms")]
    Timeout { addr: String, timeout_ms: u64 },
}

type Pending = (RemotingCommand, Option<oneshot::Sender<RemotingCommand>>);

#[derive(Clone)]
pub struct RemotingClient {
    addr: String,
    tx: mpsc::Sender<Pending>,
}

impl RemotingClient {
    /// Connects to `addr` (`host:port`) and starts the connection's task.
    pub async fn connect(addr: &str) -> Result<RemotingClient, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ClientError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (tx, rx) = mpsc::channel::<Pending>(4096);
        tokio::spawn(run(Framed::new(stream, RemotingCodec), rx));
        Ok(RemotingClient {
            addr: addr.to_string(),
            tx,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends a request and waits for its reply (the client assigns the `opaque`).
    pub async fn invoke(
        &self,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let (otx, orx) = oneshot::channel();
        self.tx
            .send((cmd, Some(otx)))
            .await
            .map_err(|_| ClientError::Closed(self.addr.clone()))?;
        match tokio::time::timeout(timeout, orx).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(_)) => Err(ClientError::Closed(self.addr.clone())),
            Err(_) => Err(ClientError::Timeout {
                addr: self.addr.clone(),
                timeout_ms: timeout.as_millis() as u64,
            }),
        }
    }

    /// Sends a oneway request (flag bit 1); nothing comes back.
    pub async fn oneway(&self, cmd: RemotingCommand) -> Result<(), ClientError> {
        self.tx
            .send((cmd.with_oneway(), None))
            .await
            .map_err(|_| ClientError::Closed(self.addr.clone()))
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

async fn run(mut framed: Framed<TcpStream, RemotingCodec>, mut rx: mpsc::Receiver<Pending>) {
    let mut pending: HashMap<i32, oneshot::Sender<RemotingCommand>> = HashMap::new();
    let mut next_opaque: i32 = 1;
    loop {
        tokio::select! {
            req = rx.recv() => {
                let Some((mut cmd, reply)) = req else { break };
                cmd.opaque = next_opaque;
                next_opaque = next_opaque.wrapping_add(1);
                if let Some(r) = reply {
                    pending.insert(cmd.opaque, r);
                }
                if framed.send(cmd).await.is_err() {
                    break;
                }
            }
            frame = framed.next() => {
                match frame {
                    Some(Ok(cmd)) if cmd.is_response() => {
                        if let Some(r) = pending.remove(&cmd.opaque) {
                            let _ = r.send(cmd);
                        }
                    }
                    // Server-initiated requests (notifications) are not used by this client.
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "remoting client connection failed");
                        break;
                    }
                    None => break,
                }
            }
        }
    }
}
