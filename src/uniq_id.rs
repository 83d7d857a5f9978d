//! Message unique keys as RocketMQ 4.9.4's Java client makes them
//! (common/src/main/java/org/apache/rocketmq/common/message/MessageClientIDSetter.java
//! `createUniqID`): the `UNIQ_KEY` property a producer sets on each message, which it reports as
//! the send's `msgId`.
//!
//! Layout, upper-case hex: the client's IP (4 bytes, or 16 for IPv6), its PID as a 16-bit
//! number, a 32-bit per-process number (Java: its class loader's hash), then per key the
//! milliseconds since the start of the current month in local time (32 bits, Java's `(int)`
//! cast) and a 16-bit counter. 32 characters with an IPv4 address, 56 with IPv6.
//!
//! Owns no clock: the caller passes the milliseconds since the month's start, so a key is a
//! pure function of its inputs (tests pin it).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};

/// Makes unique keys for one process.
#[derive(Debug)]
pub struct UniqIdGenerator {
    /// Hex of IP, PID and the per-process number.
    prefix: String,
    counter: AtomicU32,
}

impl UniqIdGenerator {
    /// `ip`: 4 or 16 bytes (any other length is used as given); `pid` is kept to its low 16
    /// bits as Java's `(short)` cast keeps it.
    pub fn new(ip: &[u8], pid: u32, salt: i32) -> Self {
        let mut prefix = hex(ip);
        prefix.push_str(&hex(&(pid as u16).to_be_bytes()));
        prefix.push_str(&hex(&salt.to_be_bytes()));
        UniqIdGenerator {
            prefix,
            counter: AtomicU32::new(0),
        }
    }

    /// The next key; `ms_since_month_start` as Java computes it (`now - startOfMonth`). A small
    /// negative span (a clock stepped back by NTP, under 1000 s) is written as 0, as in Java.
    pub fn next(&self, ms_since_month_start: i64) -> String {
        let mut diff = ms_since_month_start as i32;
        if diff < 0 && diff > -1_000_000 {
            diff = 0;
        }
        let count = self.counter.fetch_add(1, Ordering::Relaxed) as u16;
        let mut id = self.prefix.clone();
        id.push_str(&hex(&diff.to_be_bytes()));
        id.push_str(&hex(&count.to_be_bytes()));
        id
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02X}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden: a key of Apache's 4.9.4 client (mqadmin sendMsgStatus on this machine, IPv6
    /// address fd00::2): `FD000000000000000000000000000002 61EF 5FFD2B27 21457C91 0001`.
    #[test]
    fn keys_are_laid_out_as_java_s() {
        let mut ip = [0u8; 16];
        ip[0] = 0xfd;
        ip[15] = 2;
        let g = UniqIdGenerator::new(&ip, 0x61ef, 0x5ffd_2b27);
        assert_eq!(
            g.next(0x2145_7c80),
            "FD00000000000000000000000000000261EF5FFD2B2721457C800000"
        );
        assert_eq!(
            g.next(0x2145_7c91),
            "FD00000000000000000000000000000261EF5FFD2B2721457C910001"
        );
    }

    #[test]
    fn ipv4_keys_are_32_characters_and_small_negative_spans_are_zero() {
        let g = UniqIdGenerator::new(&[127, 0, 0, 1], 0x1_0002, -1);
        let id = g.next(-5);
        assert_eq!(id, "7F0000010002FFFFFFFF000000000000");
        assert_eq!(id.len(), 32);
        assert!(g
            .next(-2_000_000)
            .starts_with("7F0000010002FFFFFFFFFFE17B80"));
    }
}
