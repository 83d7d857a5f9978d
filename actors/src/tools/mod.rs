//! The operator's tools built into the `actormq` binary, apart from the runtime they talk to:
//!
//! * [`admin`] — `actormq admin`: mqadmin's commands over the remoting protocol to a name
//!   server and brokers (tables, or `--json`).
//! * [`bench`] — `actormq bench store`: the store alone, in process.
//! * [`bench_wire`] — `actormq bench produce` / `consume`: a load generator over the wire
//!   against any RocketMQ-compatible broker; [`bench_cpu`] — the broker's CPU per message over
//!   such a run.
//!
//! Tools use the runtime (the remoting client, the store, the metered mailboxes); the runtime
//! never imports a tool, so a tool can change or go without touching a broker or a name server.
//! Only `main.rs` and the tests reach them.

pub mod admin;
pub mod bench;
pub mod bench_cpu;
pub mod bench_wire;
