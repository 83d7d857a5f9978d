//! The broker: remoting server, request handling, metadata, client registry, long polling, the
//! embedded name server and the registration with name servers.
//!
//! [`start`] ([`wiring`]) brings a broker up and [`BrokerHandle::stop`] takes it down. The
//! modules, by layer — each uses only those of the layers above it, and none uses a module that
//! uses it back:
//!
//! - [`messages`]: every message of the broker's actors (and the data their replies carry), by
//!   the actor that handles it — the broker's protocol in one file; it uses no other module here;
//! - actors and shared state: [`metadata`], [`clients`], [`pull_hold`], [`registrar`] (each
//!   keeps its handlers and imports its messages), [`slave_sync`], [`settings`],
//!   [`live_config`], [`rates`], [`store_stats`], [`send_batch`];
//! - the request path's per-thread state and reply helpers: [`context`] (`BrokerCore`);
//! - the handlers, each an `impl BrokerCore` block: [`send`], [`pull`], [`query`], [`consumer`],
//!   [`client_call`], [`reply`] (uses `send`, `client_call`), [`admin_store`], [`runtime_info`],
//!   [`admin`] (routes `admin_store` and `client_call` codes);
//! - [`processor`]: each request code to its handler;
//! - [`wiring`]: start and stop (with [`metrics_source`]: what `/metrics` reads from the
//!   actors); [`testing`]: a broker for tests.

pub mod admin;
pub mod admin_store;
pub mod client_call;
pub mod clients;
pub mod consumer;
pub mod context;
pub mod live_config;
pub mod messages;
pub mod metadata;
pub mod metrics_source;
pub mod processor;
pub mod pull;
pub mod pull_hold;
pub mod query;
pub mod rates;
pub mod registrar;
pub mod reply;
pub mod runtime_info;
pub mod send;
pub mod send_batch;
pub mod settings;
pub mod slave_sync;
pub mod store_stats;
pub mod testing;
pub mod wiring;

pub use wiring::{start, BrokerHandle, BrokerOptions};
