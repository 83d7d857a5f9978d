//! Arbitrary bytes as a remoting connection's input stream: the frame decoder must never panic,
//! every decoded command must survive re-encoding, and the body parsers must never panic
//! (`actormq_core::protocol::codec::fuzz_decode` asserts all of it).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    actormq_core::protocol::codec::fuzz_decode(data);
});
