//! The remoting transport: the tokio codec over the core's frame codec, the server side (one
//! [`server::Connection`] actor per TCP connection, writing through a
//! [`frame_writer::FrameWriter`]) and a small async client.

pub mod client;
pub mod frame_writer;
pub mod server;

use actormq_core::protocol::codec::{decode_frame, encode_frame, FrameError, MAX_FRAME_BYTES};
use actormq_core::protocol::command::RemotingCommand;
use bytes::BytesMut;

/// Frames RemotingCommands on a byte stream (RocketMQ's 16 MiB frame cap).
#[derive(Clone, Copy, Debug, Default)]
pub struct RemotingCodec;

/// A framing error or an I/O error of the socket underneath.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("malformed frame: {0}")]
    Frame(#[from] FrameError),
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
}

impl tokio_util::codec::Decoder for RemotingCodec {
    type Item = RemotingCommand;
    type Error = CodecError;
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, CodecError> {
        Ok(decode_frame(src, MAX_FRAME_BYTES)?)
    }
}

impl tokio_util::codec::Encoder<RemotingCommand> for RemotingCodec {
    type Error = CodecError;
    fn encode(&mut self, item: RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode_frame(&item, dst);
        Ok(())
    }
}
