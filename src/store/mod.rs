//! Single-owner store structures over memory-mapped files.

pub mod commit_log;
pub mod consume_queue;
pub mod index_file;
pub mod mapped_file;
pub mod mapped_file_queue;
pub mod reader;
pub mod schedule;
pub mod status;
pub mod validate;
