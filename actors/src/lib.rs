//! ActorMQ's runtime: the subsystem actors over the pure core, their wiring, and the `actormq`
//! binary's commands.
//!
//! * [`metered`] — the mechanism that gives every actor mailbox metrics.
//! * [`metrics`] — the broker's Prometheus `/metrics` endpoint (RocketMQ 5 names and labels),
//!   fed by the broker (which records into it and implements [`metrics::BrokerSource`]) and
//!   naming no broker type; [`metrics::proc_stat`] — a process's CPU, memory and threads from
//!   `/proc` (also read by the benches).
//! * [`store`] — the store actors (writer, allocator, flusher, committer for write buffers,
//!   reput, ConsumeQueue and index builders, schedule delivery) and the [`store::Store`] handle.
//! * [`remoting`] — the transport: one `Connection` actor per socket, the `Processor` trait, a
//!   small async client.
//! * [`broker`] — broker start/stop, request processing, metadata, client registry, long polling,
//!   name-server registration, and `TestBroker` for end-to-end tests.
//! * [`store::ha`] — master/slave replication, part of the store as in RocketMQ
//!   (`org.apache.rocketmq.store.ha`): the master's HA port, the slave's client.
//! * [`wake`] — the coalesced wake every actor uses to nudge another without flooding its
//!   mailbox.
//! * [`namesrv`] — the name server's route registry and request processing; [`namesrv::config`]
//!   its configuration table, [`namesrv::kv`] its KV config table (`kvConfig.json`).
//! * [`tools`] — not the runtime (which never imports it): `actormq admin` (mqadmin's commands
//!   over the wire) and the load generators `actormq bench store|produce|consume`.

pub mod broker;
pub mod fsutil;
pub mod metered;
pub mod metrics;
pub mod namesrv;
pub mod remoting;
pub mod store;
pub mod tools;
pub mod wake;
