//! Apache RocketMQ's remoting protocol, as pure functions and plain data (Apache's `remoting/`
//! module, and the headers and bodies of `common/…/protocol/`).
//!
//! * [`codec`] — the frame: `decode_frame` / `encode_frame` over a `BytesMut`, both header
//!   encodings (`json_header` with its allocation-free fast path `json_fast`,
//!   `rocketmq_header`), the fuzzing entry point.
//! * [`command`] — [`RemotingCommand`], its `extFields` map and typed accessors.
//! * [`codes`] — request and response code numbers and their names.
//! * [`header`] — typed request/response headers (SEND V1/V2, PULL, offsets, routes, …).
//! * [`body`] — JSON bodies (heartbeat, route data, broker registration, …) and
//!   [`parse_java_json`] for fastjson's unquoted integer keys.
//! * [`faq`] — RocketMQ's `FAQUrl.suggestTodo` suffix on remarks.
//! * [`fastjson`] — fastjson's leniencies when reading bodies and its bare integer keys when
//!   writing them.
//! * [`batch`] — the SEND_BATCH_MESSAGE body.
//! * [`consumer_status`] — what a consumer reports about itself (`consumerStatus`,
//!   `getConsumerStatus`).
//! * [`ha`] — the master/slave replication stream on `haListenPort` (not remoting frames).
//!
//! Invariants of the whole module: no I/O, no runtime, no shared state — a connection actor
//! feeds bytes in and gets commands out. Hostile bytes never panic; they become errors that say
//! what was wrong (`FrameError` closes the connection, `HeaderError` / `BatchError` become a
//! response remark). Decoding is tolerant of every client's dialect (Java, Go, C++, Python,
//! Rust…); encoding writes exactly what Java clients expect.

pub mod admin;
pub mod batch;
pub mod body;
pub mod codec;
pub mod codes;
pub mod command;
pub mod consumer_status;
pub mod faq;
pub mod fastjson;
pub mod ha;
pub mod header;
mod json_fast;
mod json_header;
mod rocketmq_header;
pub mod version;

pub use batch::{decode_batch, encode_batch, BatchError, BatchItem};
pub use body::parse_java_json;
pub use codec::{
    decode_frame, encode_frame, fuzz_decode, try_encode_frame, FrameError, MAX_FRAME_BYTES,
};
pub use codes::{request_code, request_code_name, response_code, response_code_name};
pub use command::{
    ExtFields, HeaderError, LanguageCode, RemotingCommand, SerializeType, ONEWAY_FLAG,
    RESPONSE_FLAG,
};
pub use header::CommandHeader;
