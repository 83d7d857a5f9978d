//! The broker: remoting server, request handling, metadata, client registry, long polling, and the
//! embedded name server.

pub mod clients;
pub mod metadata;
pub mod pull_hold;
pub mod registrar;
pub mod testing;
