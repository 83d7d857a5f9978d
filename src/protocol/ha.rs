//! RocketMQ's classic master/slave replication wire (`HAService`, `HAConnection`,
//! `HAClient` of RocketMQ 4.x, also the default HA of 5.x): plain TCP on `haListenPort`, no
//! remoting frames, big-endian integers.
//!
//! * Slave → master: an offset report, exactly 8 bytes — the slave's CommitLog end (the next
//!   byte it needs). The master reads reports in 8-byte units and keeps only the last complete
//!   one it has ([`ReportReader`]).
//! * Master → slave: transfers, a 12-byte header (`i64` start offset, `i32` body size) followed
//!   by that many raw CommitLog bytes ([`TransferReader`]); a body size of 0 is a heartbeat. A
//!   transfer never crosses a CommitLog file boundary ([`chunk_len`]).
//!
//! Pure: the runtime (`actors/src/ha`) owns the sockets and feeds bytes through these.

use bytes::{Buf, BytesMut};

/// Length of a slave's offset report.
pub const REPORT_LEN: usize = 8;
/// Length of a transfer header.
pub const HEADER_LEN: usize = 12;

/// A slave's offset report.
pub fn report(offset: u64) -> [u8; REPORT_LEN] {
    (offset as i64).to_be_bytes()
}

/// A transfer header: `size` bytes from `start` follow.
pub fn header(start: u64, size: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&(start as i64).to_be_bytes());
    h[8..].copy_from_slice(&(size as i32).to_be_bytes());
    h
}

/// Master side: the slave's reports, read in 8-byte units as `HAConnection.ReadSocketService`
/// does. Bytes of an incomplete report wait for the rest.
#[derive(Default)]
pub struct ReportReader {
    buf: BytesMut,
}

impl ReportReader {
    /// Where bytes read from the socket go.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// The last complete report received so far, if any; earlier ones are superseded.
    /// A negative offset is an error (no slave reports one).
    pub fn last(&mut self) -> Result<Option<u64>, String> {
        let whole = self.buf.len() / REPORT_LEN * REPORT_LEN;
        if whole == 0 {
            return Ok(None);
        }
        let at = whole - REPORT_LEN;
        let v = i64::from_be_bytes(self.buf[at..whole].try_into().expect("8 bytes"));
        self.buf.advance(whole);
        if v < 0 {
            return Err(format!(
                "the slave reported a negative CommitLog offset {v}"
            ));
        }
        Ok(Some(v as u64))
    }
}

/// One transfer from the master.
#[derive(Debug, PartialEq, Eq)]
pub struct Transfer {
    pub start: u64,
    /// The CommitLog bytes; empty for a heartbeat.
    pub body: bytes::Bytes,
}

/// Slave side: splits the master's stream into [`Transfer`]s.
pub struct TransferReader {
    buf: BytesMut,
    /// Largest body accepted: a size above it is a broken stream, not a reason to buffer
    /// gigabytes.
    max_body: usize,
}

impl TransferReader {
    pub fn new(max_body: usize) -> TransferReader {
        TransferReader {
            buf: BytesMut::with_capacity(64 * 1024),
            max_body,
        }
    }

    /// Where bytes read from the socket go.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// The next complete transfer, if one has arrived.
    pub fn next_transfer(&mut self) -> Result<Option<Transfer>, String> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let start = i64::from_be_bytes(self.buf[..8].try_into().expect("8 bytes"));
        let size = i32::from_be_bytes(self.buf[8..12].try_into().expect("4 bytes"));
        if start < 0 || size < 0 || size as usize > self.max_body {
            return Err(format!(
                "the master sent a transfer header with offset {start} and size {size} (sizes \
                 above {} are refused)",
                self.max_body
            ));
        }
        let size = size as usize;
        if self.buf.len() < HEADER_LEN + size {
            self.buf.reserve(HEADER_LEN + size - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(HEADER_LEN);
        let body = self.buf.split_to(size).freeze();
        Ok(Some(Transfer {
            start: start as u64,
            body,
        }))
    }
}

/// Master side: where a slave's transfer starts. A slave that reports 0 has nothing and starts
/// at the beginning of the master's last CommitLog file, not at 0 (`HAConnection`'s
/// `WriteSocketService`).
pub fn start_offset(first_report: u64, master_max: u64, file_size: u64) -> u64 {
    if first_report == 0 {
        master_max - master_max % file_size
    } else {
        first_report
    }
}

/// Master side: how many bytes from `from` go in the next transfer, given the readable end
/// `readable`: at most `batch`, never past the end of `from`'s file.
pub fn chunk_len(from: u64, readable: u64, file_size: u64, batch: u64) -> u64 {
    let file_end = from - from % file_size + file_size;
    readable.min(file_end).saturating_sub(from).min(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden bytes: RocketMQ writes `putLong(offset)` and `putLong(offset); putInt(size)` with
    /// Java's big-endian `ByteBuffer`.
    #[test]
    fn reports_and_headers_are_big_endian_as_java_writes_them() {
        assert_eq!(report(0x0102_0304_0506_0708), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            header(1 << 30, 32_768),
            [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x80, 0]
        );
    }

    #[test]
    fn the_master_keeps_the_last_complete_report() {
        let mut r = ReportReader::default();
        assert_eq!(r.last(), Ok(None));
        r.buffer().extend_from_slice(&report(5));
        r.buffer().extend_from_slice(&report(9));
        r.buffer().extend_from_slice(&report(12)[..3]);
        assert_eq!(r.last(), Ok(Some(9)));
        assert_eq!(r.last(), Ok(None), "the partial report waits");
        r.buffer().extend_from_slice(&report(12)[3..]);
        assert_eq!(r.last(), Ok(Some(12)));
        r.buffer().extend_from_slice(&(-1i64).to_be_bytes());
        assert!(r.last().unwrap_err().contains("negative"));
    }

    #[test]
    fn the_slave_splits_the_stream_into_transfers_in_any_pieces() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&header(4096, 3));
        stream.extend_from_slice(b"abc");
        stream.extend_from_slice(&header(4099, 0));
        stream.extend_from_slice(&header(4099, 2));
        stream.extend_from_slice(b"de");
        for piece in [1, 5, 13, 100] {
            let mut r = TransferReader::new(1 << 20);
            let mut got = Vec::new();
            for part in stream.chunks(piece) {
                r.buffer().extend_from_slice(part);
                while let Some(t) = r.next_transfer().unwrap() {
                    got.push((t.start, t.body.to_vec()));
                }
            }
            assert_eq!(
                got,
                vec![
                    (4096, b"abc".to_vec()),
                    (4099, vec![]),
                    (4099, b"de".to_vec())
                ],
                "pieces of {piece}"
            );
        }
        let mut r = TransferReader::new(1000);
        r.buffer().extend_from_slice(&header(0, 1001));
        assert!(r.next_transfer().unwrap_err().contains("above 1000"));
        let mut r = TransferReader::new(1000);
        r.buffer().extend_from_slice(&header(0, u32::MAX));
        assert!(r.next_transfer().is_err(), "a negative size");
    }

    #[test]
    fn transfers_start_at_the_last_file_for_an_empty_slave_and_never_cross_a_file() {
        let gib = 1u64 << 30;
        assert_eq!(start_offset(0, 3 * gib + 500, gib), 3 * gib);
        assert_eq!(start_offset(0, 0, gib), 0);
        assert_eq!(start_offset(77, 3 * gib + 500, gib), 77);
        assert_eq!(chunk_len(100, 100_000, 4096, 32_768), 3996);
        assert_eq!(chunk_len(4096, 100_000, 4096, 1000), 1000);
        assert_eq!(chunk_len(4096, 4100, 4096, 1000), 4);
        assert_eq!(chunk_len(4100, 4100, 4096, 1000), 0);
        assert_eq!(
            chunk_len(5000, 4100, 4096, 1000),
            0,
            "a slave ahead gets nothing"
        );
    }
}
