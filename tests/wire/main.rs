//! Brokers and name servers over the wire, one test binary (`cargo test -p actormq --test wire`):
//! a module per subject, each test starting its own `TestBroker` or name server on 127.0.0.1
//! ephemeral ports and a temp dir.
//!
//! * [`client`] — a real RocketMQ client (`rocketmq-client-rust` 1.0.0): sends, consumers,
//!   queries, delays, retries, offsets, permissions;
//! * [`admin`] — the `actormq admin` binary as a child process; [`admin_codes`] — the admin and
//!   store request codes RocketMQ 4.9.4 answers;
//! * [`namesrv`], [`namesrv_codes`] — the name server: registrations, routes, expiry, KV config,
//!   the topic-list and data-version codes;
//! * [`hostile`] — malformed frames on both ports while well-behaved clients keep working;
//! * [`metrics`] — the Prometheus endpoint; [`bench_wire`] — `actormq bench`;
//! * [`threads`] — connections on several threads; [`ha`] — master/slave replication.
//!
//! One process, tests on parallel threads (as many as before, when each file was a binary: the
//! test harness's default). Nothing here changes process-wide state: no fail points, no
//! environment variables, no fixed ports; what the brokers of one process share — the actor
//! mailbox series of `/metrics` (`metered::registry`) and the client's runtime owner
//! (`real_client::client_owner`) — is only ever checked for presence or lower bounds, not counted.
// The real client's builder types nest deeply: the default 128 is not enough to compile them.
#![recursion_limit = "512"]

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/client.rs"]
mod real_client;

mod admin;
mod admin_codes;
mod bench_wire;
mod client;
mod ha;
mod hostile;
mod metrics;
mod namesrv;
mod namesrv_codes;
mod threads;
