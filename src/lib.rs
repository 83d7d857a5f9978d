//! ActorMQ's pure core: everything that can be reasoned about, tested and fuzzed without a runtime.
//!
//! * [`format`] — byte layouts shared with Apache RocketMQ (CommitLog record, properties string,
//!   message ids, ConsumeQueue unit). Pure functions over byte slices.
//! * [`store`] — synchronous single-owner structures over memory-mapped files (MappedFile,
//!   MappedFileQueue, ConsumeQueue, IndexFile, CommitLog append logic, readers).
//! * [`config`] — typed configuration with RocketMQ's key names and defaults.
//! * [`clock`] — the time seam, so tests inject time instead of sleeping.
//! * [`uniq_id`] — message unique keys (`UNIQ_KEY`, a producer's `msgId`) as the Java client
//!   makes them.
//!
//! Invariant of the whole crate: no actix, no tokio. The runtime crate (`actors/`) owns threads,
//! mailboxes and sockets; everything here is called from exactly one owner at a time, except the
//! read-side views, which only ever look at bytes below a published watermark.

pub mod clock;
pub mod config;
pub mod format;
pub mod meta;
pub mod offset;
pub mod protocol;
pub mod store;
pub mod uniq_id;

pub use offset::{PhyOffset, QueueOffset};
