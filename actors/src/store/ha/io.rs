//! The socket side of replication, shared by master and slave: bounded writes, and a read half
//! turned into a stream of parsed frames for an actor's `ctx.add_stream`.
//!
//! Every socket operation ends within `haHousekeepingInterval`: a write a peer does not take
//! (it stopped reading, or died) fails, and so does silence on the read half. The codecs are in
//! the core (`actormq_core::protocol::ha`).

use std::time::Duration;

use actormq_core::protocol::ha::{ReportReader, Transfer, TransferReader};
use bytes::BytesMut;
use futures_util::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::messages::Inbound;

/// A socket write that must end within `limit` (a peer that stopped reading, a dead peer).
pub async fn write_within(
    wr: &mut OwnedWriteHalf,
    bytes: &[u8],
    limit: Duration,
    to: &str,
) -> Result<(), String> {
    match tokio::time::timeout(limit, wr.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("writing to the {to}: {e}")),
        Err(_) => Err(format!(
            "the {to} took no bytes for {} ms (haHousekeepingInterval)",
            limit.as_millis()
        )),
    }
}

/// A socket read that must bring bytes within `limit` (`haHousekeepingInterval`): false when
/// the peer closed the connection.
async fn read_within(
    rd: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    limit: Duration,
    from: &str,
) -> Result<bool, String> {
    match tokio::time::timeout(limit, rd.read_buf(buf)).await {
        Ok(Ok(0)) => Ok(false),
        Ok(Ok(_)) => Ok(true),
        Ok(Err(e)) => Err(format!("reading from the {from}: {e}")),
        Err(_) => Err(format!(
            "nothing from the {from} for {} ms (haHousekeepingInterval)",
            limit.as_millis()
        )),
    }
}

/// A frame parser over a read buffer (the core's readers).
pub trait Frames: Unpin + 'static {
    type Item;
    fn buffer(&mut self) -> &mut BytesMut;
    /// The next frame in the buffer, if a whole one is there.
    fn next_frame(&mut self) -> Result<Option<Self::Item>, String>;
}

/// A slave's offset reports: only the newest in the buffer matters (each is a cumulative ack).
impl Frames for ReportReader {
    type Item = u64;
    fn buffer(&mut self) -> &mut BytesMut {
        ReportReader::buffer(self)
    }
    fn next_frame(&mut self) -> Result<Option<u64>, String> {
        self.last()
    }
}

/// A master's transfers, one by one.
impl Frames for TransferReader {
    type Item = Transfer;
    fn buffer(&mut self) -> &mut BytesMut {
        TransferReader::buffer(self)
    }
    fn next_frame(&mut self) -> Result<Option<Transfer>, String> {
        self.next_transfer()
    }
}

/// The read half as a stream: every frame as it is parsed, then one [`Inbound::Closed`] (the
/// peer closed, a malformed frame, or silence for `limit`), then the end.
pub fn inbound<F: Frames>(
    rd: OwnedReadHalf,
    frames: F,
    limit: Duration,
    from: &'static str,
) -> impl Stream<Item = Inbound<F::Item>> {
    futures_util::stream::unfold(Some((rd, frames)), move |open| async move {
        let (mut rd, mut frames) = open?;
        loop {
            match frames.next_frame() {
                Ok(Some(item)) => return Some((Inbound::Item(item), Some((rd, frames)))),
                Ok(None) => {}
                Err(e) => return Some((Inbound::Closed(Err(e)), None)),
            }
            match read_within(&mut rd, frames.buffer(), limit, from).await {
                Ok(true) => {}
                Ok(false) => return Some((Inbound::Closed(Ok(())), None)),
                Err(e) => return Some((Inbound::Closed(Err(e)), None)),
            }
        }
    })
}
