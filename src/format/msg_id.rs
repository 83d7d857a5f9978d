//! The broker-side "offset message id" (`msgId` in the SEND response, `offsetMsgId` in the
//! client's SendResult).
//!
//! Owns: its byte layout and hex form. Layout: store host IP (4 or 16 bytes) ++ store host port
//! as a big-endian i32 ++ CommitLog physical offset as a big-endian i64, rendered as
//! **upper-case** hex: 32 chars for IPv4, 56 for IPv6. Clients (VIEW_MESSAGE_BY_ID, admin tools)
//! decode the physical offset back out of it, so both directions must be exact.
//!
//! Invariant: the address family of the store host decides the length; nothing else is encoded.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

/// Hex length of an id whose store host is IPv4.
pub const IPV4_ID_LEN: usize = 32;
/// Hex length of an id whose store host is IPv6.
pub const IPV6_ID_LEN: usize = 56;

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Why a string is not a valid offset message id.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MsgIdError {
    #[error("offset message id must be {IPV4_ID_LEN} (IPv4) or {IPV6_ID_LEN} (IPv6) hex chars long, got {len} bytes")]
    BadLength { len: usize },
    #[error("offset message id has a non-hex character {found:?} at position {position}")]
    InvalidHex { position: usize, found: char },
    #[error("offset message id encodes port {port}, outside 0..=65535")]
    PortOutOfRange { port: i32 },
    #[error("offset message id encodes a negative CommitLog offset {offset}")]
    NegativeOffset { offset: i64 },
}

/// Hex length of the id for this store host.
#[inline]
pub fn offset_msg_id_len(store_host: SocketAddr) -> usize {
    match store_host {
        SocketAddr::V4(_) => IPV4_ID_LEN,
        SocketAddr::V6(_) => IPV6_ID_LEN,
    }
}

/// Writes the id without allocating (`out` may be a `String` or a `fmt::Formatter`).
pub fn write_offset_msg_id<W: fmt::Write + ?Sized>(
    out: &mut W,
    store_host: SocketAddr,
    phy_offset: i64,
) -> fmt::Result {
    // At most 16 + 4 + 8 raw bytes; assemble on the stack, then hex them in one pass.
    let mut raw = [0u8; 28];
    let n = match store_host.ip() {
        IpAddr::V4(ip) => {
            raw[..4].copy_from_slice(&ip.octets());
            4
        }
        IpAddr::V6(ip) => {
            raw[..16].copy_from_slice(&ip.octets());
            16
        }
    };
    raw[n..n + 4].copy_from_slice(&i32::from(store_host.port()).to_be_bytes());
    raw[n + 4..n + 12].copy_from_slice(&phy_offset.to_be_bytes());
    for b in &raw[..n + 12] {
        out.write_char(char::from(HEX_UPPER[usize::from(b >> 4)]))?;
        out.write_char(char::from(HEX_UPPER[usize::from(b & 0x0F)]))?;
    }
    Ok(())
}

/// The id as an owned upper-case hex string (32 chars IPv4, 56 chars IPv6).
pub fn offset_msg_id(store_host: SocketAddr, phy_offset: i64) -> String {
    let mut s = String::with_capacity(offset_msg_id_len(store_host));
    // Writing into a String cannot fail.
    let _ = write_offset_msg_id(&mut s, store_host, phy_offset);
    s
}

/// Parses an id back into (store host, physical offset). Hex digits may be either case (Java
/// upper-cases before decoding); the length alone selects IPv4 (32) or IPv6 (56).
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64), MsgIdError> {
    let ip_len = match id.len() {
        IPV4_ID_LEN => 4,
        IPV6_ID_LEN => 16,
        len => return Err(MsgIdError::BadLength { len }),
    };
    let mut raw = [0u8; 28];
    let bytes = id.as_bytes();
    for (i, out) in raw[..ip_len + 12].iter_mut().enumerate() {
        let hi = hex_digit(id, bytes, 2 * i)?;
        let lo = hex_digit(id, bytes, 2 * i + 1)?;
        *out = (hi << 4) | lo;
    }
    let ip = if ip_len == 4 {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(&raw[..16]);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    let port = i32::from_be_bytes([
        raw[ip_len],
        raw[ip_len + 1],
        raw[ip_len + 2],
        raw[ip_len + 3],
    ]);
    let port = u16::try_from(port).map_err(|_| MsgIdError::PortOutOfRange { port })?;
    let mut off = [0u8; 8];
    off.copy_from_slice(&raw[ip_len + 4..ip_len + 12]);
    let offset = i64::from_be_bytes(off);
    if offset < 0 {
        return Err(MsgIdError::NegativeOffset { offset });
    }
    Ok((SocketAddr::new(ip, port), offset))
}

/// Value of the hex digit at byte `pos`; every byte before `pos` is ASCII hex, so `pos` is a
/// char boundary and the reported char is the real offending one.
#[inline]
fn hex_digit(id: &str, bytes: &[u8], pos: usize) -> Result<u8, MsgIdError> {
    match bytes.get(pos) {
        Some(b @ b'0'..=b'9') => Ok(b - b'0'),
        Some(b @ b'A'..=b'F') => Ok(b - b'A' + 10),
        Some(b @ b'a'..=b'f') => Ok(b - b'a' + 10),
        _ => Err(MsgIdError::InvalidHex {
            position: pos,
            found: id.get(pos..).and_then(|s| s.chars().next()).unwrap_or('?'),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{SocketAddrV4, SocketAddrV6};

    #[test]
    fn golden_ipv4() {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let id = offset_msg_id(host, 0xA244);
        assert_eq!(id, "7F00000100002A9F000000000000A244");
        assert_eq!(id.len(), 32);
        assert_eq!(decode_offset_msg_id(&id), Ok((host, 0xA244)));
        // Lower case is accepted on input.
        assert_eq!(
            decode_offset_msg_id("7f00000100002a9f000000000000a244"),
            Ok((host, 0xA244))
        );
    }

    #[test]
    fn golden_ipv6() {
        let host: SocketAddr = "[::1]:10911".parse().unwrap();
        let id = offset_msg_id(host, 1);
        assert_eq!(
            id,
            "0000000000000000000000000000000100002A9F0000000000000001"
        );
        assert_eq!(id.len(), 56);
        assert_eq!(decode_offset_msg_id(&id), Ok((host, 1)));
    }

    #[test]
    fn write_into_formatter_and_string() {
        struct Id(SocketAddr, i64);
        impl fmt::Display for Id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_offset_msg_id(f, self.0, self.1)
            }
        }
        let host: SocketAddr = "10.1.2.3:65535".parse().unwrap();
        let mut s = String::from("x,");
        write_offset_msg_id(&mut s, host, i64::MAX).unwrap();
        assert_eq!(s, "x,0A0102030000FFFF7FFFFFFFFFFFFFFF");
        assert_eq!(Id(host, i64::MAX).to_string(), &s[2..]);
    }

    #[test]
    fn decode_errors_name_the_problem() {
        assert_eq!(
            decode_offset_msg_id("ABC"),
            Err(MsgIdError::BadLength { len: 3 })
        );
        assert_eq!(
            decode_offset_msg_id("7F000001G0002A9F000000000000A244"),
            Err(MsgIdError::InvalidHex {
                position: 8,
                found: 'G'
            })
        );
        // 'é' is 2 bytes: 30 ASCII + 'é' = 32 bytes.
        let id = format!("{}é", "0".repeat(30));
        assert_eq!(
            decode_offset_msg_id(&id),
            Err(MsgIdError::InvalidHex {
                position: 30,
                found: 'é'
            })
        );
        assert_eq!(
            decode_offset_msg_id("7F00000100012A9F000000000000A244"),
            Err(MsgIdError::PortOutOfRange { port: 0x12A9F })
        );
        assert_eq!(
            decode_offset_msg_id("7F00000100002A9F8000000000000000"),
            Err(MsgIdError::NegativeOffset { offset: i64::MIN })
        );
        let msg = MsgIdError::BadLength { len: 3 }.to_string();
        assert!(
            msg.contains("32") && msg.contains("56") && msg.contains('3'),
            "{msg}"
        );
    }

    proptest! {
        #[test]
        fn round_trip_v4(ip: [u8; 4], port: u16, off in 0i64..=i64::MAX) {
            let host = SocketAddr::V4(SocketAddrV4::new(ip.into(), port));
            let id = offset_msg_id(host, off);
            prop_assert_eq!(id.len(), IPV4_ID_LEN);
            prop_assert!(id.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
            prop_assert_eq!(decode_offset_msg_id(&id), Ok((host, off)));
        }

        #[test]
        fn round_trip_v6(ip: [u8; 16], port: u16, off in 0i64..=i64::MAX) {
            let host = SocketAddr::V6(SocketAddrV6::new(ip.into(), port, 0, 0));
            let id = offset_msg_id(host, off);
            prop_assert_eq!(id.len(), IPV6_ID_LEN);
            prop_assert_eq!(decode_offset_msg_id(&id), Ok((host, off)));
        }

        #[test]
        fn decode_never_panics(s in "\\PC{0,60}") {
            let _ = decode_offset_msg_id(&s);
        }
    }
}
