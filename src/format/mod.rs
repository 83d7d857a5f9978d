//! Byte layouts shared with Apache RocketMQ. Everything here is a pure function over byte slices:
//! no files, no time, no threads. All integers are big-endian.

pub mod cq_unit;
pub mod java;
pub mod java_order;
pub mod msg_id;
pub mod properties;
pub mod record;
