//! Single-owner store structures over memory-mapped files.

pub mod checkpoint;
pub mod commit_log;
pub mod consume_queue;
pub mod index_file;
pub mod mapped_file;
pub mod mapped_file_queue;
pub mod queue_table;
pub mod reader;
pub mod recovery;
pub mod ring_map;
pub mod schedule;
pub mod status;
pub mod store_lock;
pub mod transient_pool;
pub mod validate;
