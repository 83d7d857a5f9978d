//! The remoting frame codec: pure functions from a byte buffer to [`RemotingCommand`]s and back.
//!
//! Frame (Apache's `RemotingCommand.encode` and `NettyDecoder`, all big-endian):
//! ```text
//! [i32 frameLen = 4 + headerLen + bodyLen]
//! [i32 (serializeType << 24) | headerLen]      serializeType 0 = JSON, 1 = ROCKETMQ
//! [header: headerLen bytes]
//! [body:   the rest]
//! ```
//!
//! Invariants:
//! * [`decode_frame`] never panics, whatever the bytes: lengths are validated before use and all
//!   slicing is checked. `Ok(None)` means "not a whole frame yet" and consumes nothing; `Ok(Some)`
//!   consumes exactly one frame. On `Err` the connection must be closed, as Java's decoder does:
//!   errors in the two leading words (sizes, serialize type) consume nothing (the stream cannot be
//!   re-synchronised), errors inside the header consume that frame.
//! * The size limit counts the whole frame including the 4-byte length word, as Netty's
//!   `LengthFieldBasedFrameDecoder` does in Java (16 MiB, [`MAX_FRAME_BYTES`]). Oversized and
//!   malformed frames are rejected as soon as the first 8 bytes arrive, before anything is
//!   buffered for them.
//! * The decoded body is a zero-copy slice of the received frame.
//! * A command's `body_parts` are body bytes after its `body`: [`encode_frame`] copies them,
//!   [`encode_frame_head`] leaves them for the caller to send after the head; either way the
//!   bytes on the wire are the same.
//! * `decode(encode(c)) == c` for every command the encoding can represent (see the property
//!   tests; the ROCKETMQ header limits are listed in its module).

use bytes::{BufMut, BytesMut};
use thiserror::Error;

use super::command::{RemotingCommand, SerializeType};
use super::{json_header, rocketmq_header};

/// Largest frame accepted, counting the length word: 16 MiB, Java's default.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Largest header length the 24-bit field can express.
pub const MAX_HEADER_BYTES: usize = 0x00FF_FFFF;

const LENGTH_WORD: usize = 4;
const PREFIX: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// `len` counts the whole frame including its 4-byte length word.
    #[error("frame of {len} bytes exceeds the {max}-byte limit")]
    FrameTooLarge { len: usize, max: usize },
    /// The length word is below 4 (it must at least cover the serialize-type/header-length word).
    #[error("frame length {len} is below the minimum of 4")]
    FrameTooSmall { len: i64 },
    #[error("header length {header_len} exceeds the {frame_len} bytes left in the frame")]
    HeaderLengthExceedsFrame { header_len: usize, frame_len: usize },
    #[error("unknown serialize type {0} (0 = JSON, 1 = ROCKETMQ)")]
    UnknownSerializeType(u8),
    #[error("invalid header: {reason}")]
    InvalidHeader { reason: String },
}

fn word(buf: &[u8], at: usize) -> Option<[u8; 4]> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    let mut w = [0u8; 4];
    w.copy_from_slice(bytes);
    Some(w)
}

/// Decodes one frame from the front of `buf`.
///
/// Returns `Ok(None)` while `buf` holds less than a whole frame (read more and call again),
/// `Ok(Some(cmd))` after consuming exactly one frame. `max_frame` bounds the whole frame
/// including the length word; pass [`MAX_FRAME_BYTES`] unless configured otherwise.
pub fn decode_frame(
    buf: &mut BytesMut,
    max_frame: usize,
) -> Result<Option<RemotingCommand>, FrameError> {
    let Some(len_word) = word(buf, 0) else {
        return Ok(None);
    };
    let frame_len = i32::from_be_bytes(len_word);
    let frame_len = match usize::try_from(frame_len) {
        Ok(n) if n >= 4 => n,
        _ => {
            return Err(FrameError::FrameTooSmall {
                len: i64::from(frame_len),
            })
        }
    };
    // frame_len ≤ i32::MAX, so this cannot overflow on any supported target.
    let total = frame_len.saturating_add(LENGTH_WORD);
    if total > max_frame {
        return Err(FrameError::FrameTooLarge {
            len: total,
            max: max_frame,
        });
    }
    let Some(type_word) = word(buf, LENGTH_WORD) else {
        return Ok(None);
    };
    let type_word = u32::from_be_bytes(type_word);
    let type_code = (type_word >> 24) as u8;
    let serialize_type =
        SerializeType::from_code(type_code).ok_or(FrameError::UnknownSerializeType(type_code))?;
    let header_len = (type_word & 0x00FF_FFFF) as usize;
    let room = frame_len - 4;
    if header_len > room {
        return Err(FrameError::HeaderLengthExceedsFrame {
            header_len,
            frame_len: room,
        });
    }
    if buf.len() < total {
        return Ok(None);
    }

    let frame = buf.split_to(total).freeze();
    let header_end = PREFIX + header_len;
    let header = frame.get(PREFIX..header_end).unwrap_or_default();
    let parts = match serialize_type {
        SerializeType::Json => json_header::decode(header),
        SerializeType::RocketMq => rocketmq_header::decode(header),
    }
    .map_err(|reason| FrameError::InvalidHeader { reason })?;
    Ok(Some(RemotingCommand {
        code: parts.code,
        language: parts.language,
        version: parts.version,
        opaque: parts.opaque,
        flag: parts.flag,
        remark: parts.remark,
        ext_fields: parts.ext_fields,
        body: frame.slice(header_end..),
        body_parts: Vec::new(),
        serialize_type,
    }))
}

/// Appends `cmd` as one frame to `out`, its header in `cmd.serialize_type` (the body: `body`,
/// then each of `body_parts`, copied).
///
/// The caller bounds what it sends: a command whose header exceeds [`MAX_HEADER_BYTES`] or whose
/// frame exceeds `i32::MAX` cannot be framed (debug builds assert). Use [`try_encode_frame`] to
/// enforce a limit instead.
pub fn encode_frame(cmd: &RemotingCommand, out: &mut BytesMut) {
    let start = out.len();
    let header_len = write_prefix_and_header(cmd, out, cmd.body_len());
    debug_assert!(
        header_len <= MAX_HEADER_BYTES,
        "header of {header_len} bytes"
    );
    finish_frame(cmd, out, start, header_len, true);
}

/// Appends all of `cmd`'s frame but its `body_parts`: the two leading words (the length counting
/// the parts), the header and `body`. The caller sends the parts right after, in order — a
/// server's connection writes them from where they lie (`writev`) instead of copying them — so
/// the bytes on the wire are exactly [`encode_frame`]'s. Without parts this is [`encode_frame`].
///
/// The same bounds as [`encode_frame`] apply (debug builds assert).
pub fn encode_frame_head(cmd: &RemotingCommand, out: &mut BytesMut) {
    let start = out.len();
    let header_len = write_prefix_and_header(cmd, out, cmd.body.len());
    debug_assert!(
        header_len <= MAX_HEADER_BYTES,
        "header of {header_len} bytes"
    );
    finish_frame(cmd, out, start, header_len, false);
}

/// Like [`encode_frame`], but refuses (leaving `out` as it was) a frame larger than `max_frame`
/// bytes including the length word, or a header the 24-bit field cannot express. The header is
/// checked before the body is copied.
pub fn try_encode_frame(
    cmd: &RemotingCommand,
    out: &mut BytesMut,
    max_frame: usize,
) -> Result<(), FrameError> {
    let start = out.len();
    let body_len = cmd.body_len();
    let header_len = write_prefix_and_header(cmd, out, body_len);
    let total = PREFIX + header_len + body_len;
    let refusal = if header_len > MAX_HEADER_BYTES {
        Some(FrameError::InvalidHeader {
            reason: format!("header of {header_len} bytes exceeds the 24-bit length field"),
        })
    } else if total > max_frame || total - LENGTH_WORD > i32::MAX as usize {
        Some(FrameError::FrameTooLarge {
            len: total,
            max: max_frame,
        })
    } else {
        None
    };
    match refusal {
        Some(e) => {
            out.truncate(start);
            Err(e)
        }
        None => {
            finish_frame(cmd, out, start, header_len, true);
            Ok(())
        }
    }
}

/// Writes placeholder length/type words and the header, with room for `body` more bytes after
/// it; returns the header length.
fn write_prefix_and_header(cmd: &RemotingCommand, out: &mut BytesMut, body: usize) -> usize {
    let start = out.len();
    out.reserve(PREFIX + 256 + body);
    out.put_u64(0); // length and type words, patched by `finish_frame`
    match cmd.serialize_type {
        SerializeType::Json => json_header::encode(cmd, out),
        SerializeType::RocketMq => rocketmq_header::encode(cmd, out),
    }
    out.len() - start - PREFIX
}

/// Appends the body (`body`, and the parts if `with_parts`; else they follow on the wire) and
/// patches the two leading words of the frame that begins at `start`.
fn finish_frame(
    cmd: &RemotingCommand,
    out: &mut BytesMut,
    start: usize,
    header_len: usize,
    with_parts: bool,
) {
    out.extend_from_slice(&cmd.body);
    let mut frame_len = out.len() - start - LENGTH_WORD;
    for part in &cmd.body_parts {
        if with_parts {
            out.extend_from_slice(part);
        }
        frame_len += part.len();
    }
    debug_assert!(
        i32::try_from(frame_len).is_ok(),
        "frame of {frame_len} bytes"
    );
    let frame_word = i32::try_from(frame_len).unwrap_or(i32::MAX);
    let type_word =
        (u32::from(cmd.serialize_type.code()) << 24) | (header_len as u32 & 0x00FF_FFFF);
    if let Some(prefix) = out.get_mut(start..start + PREFIX) {
        prefix[..LENGTH_WORD].copy_from_slice(&frame_word.to_be_bytes());
        prefix[LENGTH_WORD..].copy_from_slice(&type_word.to_be_bytes());
    }
}

/// Fuzzing entry point: runs the decoder over arbitrary bytes, as a connection would, and checks
/// that every decoded command survives re-encoding. Panics only on a bug (a decoder panic or a
/// round-trip mismatch), never on bad input. Also feeds each body to the body/batch parsers, and
/// checks the SEND path's zero-allocation property lookup against the full properties parser.
pub fn fuzz_decode(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(cmd)) = decode_frame(&mut buf, MAX_FRAME_BYTES) {
        let mut out = BytesMut::new();
        // A re-encoded JSON header can be larger than the original (numbers become strings), so
        // a frame at the limit may not fit again; that is not a bug.
        if try_encode_frame(&cmd, &mut out, usize::MAX).is_ok() {
            let again = decode_frame(&mut out, usize::MAX);
            assert_eq!(
                again,
                Ok(Some(cmd.clone())),
                "re-encoded frame decodes differently"
            );
            assert!(out.is_empty(), "re-encoded frame left bytes behind");
        }
        if let Ok(h) = super::header::SendMessageRequestHeader::from_command(&cmd) {
            // The SEND path reads properties with `find`; it must agree with the full parser.
            for (k, v) in crate::format::properties::parse(&h.properties) {
                assert_eq!(
                    crate::format::properties::find(&h.properties, &k),
                    Some(v.as_str()),
                    "properties::find disagrees with properties::parse on {k:?}"
                );
            }
        }
        let _ = super::header::PullMessageRequestHeader::from_command(&cmd);
        let _ = super::batch::decode_batch(&cmd.body);
        let _ = super::body::parse_java_json::<super::body::HeartbeatData>(&cmd.body);
        let _ = super::body::parse_java_json::<super::body::TopicRouteData>(&cmd.body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::command::{ExtFields, LanguageCode};
    use bytes::Bytes;
    use proptest::prelude::*;

    fn frame(type_code: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
        f.extend_from_slice(&(((type_code as u32) << 24) | header.len() as u32).to_be_bytes());
        f.extend_from_slice(header);
        f.extend_from_slice(body);
        f
    }

    fn decode_all(bytes: &[u8]) -> Result<Option<RemotingCommand>, FrameError> {
        decode_frame(&mut BytesMut::from(bytes), MAX_FRAME_BYTES)
    }

    const TRACE_ROUTE_REQUEST: &str = r#"{"code": 105, "language": "RUST", "version": 474, "opaque": 0, "flag": 0, "remark": null, "extFields": {"topic": "capT1"}, "serializeTypeCurrentRPC": "JSON"}"#;

    #[test]
    fn decodes_traced_route_request_frame() {
        let f = frame(0, TRACE_ROUTE_REQUEST.as_bytes(), b"");
        let mut buf = BytesMut::from(&f[..]);
        buf.extend_from_slice(b"next"); // bytes of the next frame stay in the buffer
        let cmd = decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().unwrap();
        assert_eq!(&buf[..], b"next");
        assert_eq!(cmd.code, 105);
        assert_eq!(cmd.language, LanguageCode::Rust);
        assert_eq!(cmd.serialize_type, SerializeType::Json);
        assert_eq!(cmd.ext("topic"), Some("capT1"));
        assert!(cmd.body.is_empty());
    }

    #[test]
    fn json_golden_frame_bytes() {
        let cmd = RemotingCommand::new_request(34)
            .with_opaque(3)
            .with_body(Bytes::from_static(b"{}"));
        let header = br#"{"code":34,"language":"JAVA","version":401,"opaque":3,"flag":0,"remark":null,"extFields":null,"serializeTypeCurrentRPC":"JSON"}"#;
        let mut out = BytesMut::new();
        encode_frame(&cmd, &mut out);
        assert_eq!(out.to_vec(), frame(0, header, b"{}"));
        assert_eq!(decode_all(&out).unwrap().unwrap(), cmd);
    }

    #[test]
    fn rocketmq_golden_frame_bytes() {
        let cmd = RemotingCommand::new_request(11)
            .with_opaque(-5)
            .with_oneway()
            .with_ext("k", "v")
            .with_body(Bytes::from_static(b"BODY"))
            .with_serialize_type(SerializeType::RocketMq);
        #[rustfmt::skip]
        let header: &[u8] = &[
            0, 11,              // code
            0,                  // JAVA
            0x01, 0x91,         // version 401
            0xFF, 0xFF, 0xFF, 0xFB, // opaque -5
            0, 0, 0, 2,         // flag: oneway
            0, 0, 0, 0,         // no remark
            0, 0, 0, 8,         // extLen
            0, 1, b'k', 0, 0, 0, 1, b'v',
        ];
        let mut out = BytesMut::new();
        encode_frame(&cmd, &mut out);
        assert_eq!(out.to_vec(), frame(1, header, b"BODY"));
        let back = decode_all(&out).unwrap().unwrap();
        assert_eq!(back, cmd);
        assert!(back.is_oneway());
    }

    /// A PULL_FOUND answer as the broker builds it: PullMessageResponseHeader's fields, remark
    /// FOUND, and the records as body parts (each its own `Bytes`, as slices of the mapped
    /// CommitLog are).
    fn pull_found(serialize_type: SerializeType, records: &[&'static [u8]]) -> RemotingCommand {
        let req = RemotingCommand::new_request(11)
            .with_opaque(77)
            .with_serialize_type(serialize_type);
        let hdr = crate::protocol::header::PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: 35,
            min_offset: 0,
            max_offset: 4096,
            ..Default::default()
        };
        RemotingCommand::response_to(&req, 0, Some("FOUND".into()))
            .with_ext_fields(hdr.to_ext_fields())
            .with_body_parts(records.iter().map(|r| Bytes::from_static(r)).collect())
    }

    const RECORDS: [&[u8]; 3] = [b"first record", b"", b"third, after an empty part"];

    /// The bytes of a PULL_FOUND frame (JSON header) as the broker sent them when it copied the
    /// records into one body: whichever way the body travels — copied by `encode_frame`, or
    /// `encode_frame_head` followed by the parts as they lie — the wire bytes are these.
    #[test]
    fn pull_found_golden_frame_bytes_with_body_parts() {
        let header = br#"{"code":0,"language":"JAVA","version":401,"opaque":77,"flag":1,"remark":"FOUND","extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"35","minOffset":"0","maxOffset":"4096"},"serializeTypeCurrentRPC":"JSON"}"#;
        let golden = frame(0, header, &RECORDS.concat());
        let cmd = pull_found(SerializeType::Json, &RECORDS);
        assert_eq!(cmd.body_len(), RECORDS.concat().len());

        let mut copied = BytesMut::new();
        encode_frame(&cmd, &mut copied);
        assert_eq!(copied.to_vec(), golden, "encode_frame");

        let mut tried = BytesMut::new();
        try_encode_frame(&cmd, &mut tried, MAX_FRAME_BYTES).unwrap();
        assert_eq!(tried.to_vec(), golden, "try_encode_frame");

        let mut head = BytesMut::new();
        encode_frame_head(&cmd, &mut head);
        let mut sent = head.to_vec();
        assert_eq!(sent.len(), golden.len() - RECORDS.concat().len());
        for part in &cmd.body_parts {
            sent.extend_from_slice(part);
        }
        assert_eq!(sent, golden, "head, then the parts as they lie");

        // One contiguous body (the old path) gives the same bytes, and they decode to it.
        let contiguous = pull_found(SerializeType::Json, &[]).with_body(RECORDS.concat());
        let mut old = BytesMut::new();
        encode_frame(&contiguous, &mut old);
        assert_eq!(old.to_vec(), golden, "one body");
        assert_eq!(decode_all(&golden).unwrap().unwrap(), contiguous);
    }

    #[test]
    fn pull_found_rocketmq_header_with_body_parts_is_the_copied_frame() {
        let cmd = pull_found(SerializeType::RocketMq, &RECORDS)
            .with_body(Bytes::from_static(b"in body first; "));
        let whole = cmd
            .clone()
            .with_body_parts(Vec::new())
            .with_body([&b"in body first; "[..], &RECORDS.concat()].concat());
        let mut golden = BytesMut::new();
        encode_frame(&whole, &mut golden);
        let mut head = BytesMut::new();
        encode_frame_head(&cmd, &mut head);
        for part in &cmd.body_parts {
            head.extend_from_slice(part);
        }
        assert_eq!(head, golden);
        let mut copied = BytesMut::new();
        encode_frame(&cmd, &mut copied);
        assert_eq!(copied, golden);
        assert_eq!(decode_all(&golden).unwrap().unwrap(), whole);
    }

    #[test]
    fn try_encode_counts_body_parts_against_the_limit() {
        let cmd = pull_found(SerializeType::Json, &[&[0u8; 400], &[1u8; 400]]);
        let mut out = BytesMut::from(&b"prev"[..]);
        assert!(matches!(
            try_encode_frame(&cmd, &mut out, 700),
            Err(FrameError::FrameTooLarge { .. })
        ));
        assert_eq!(&out[..], b"prev");
    }

    #[test]
    fn partial_frames_need_more_bytes_and_consume_nothing() {
        let f = frame(0, TRACE_ROUTE_REQUEST.as_bytes(), b"body");
        for cut in 0..f.len() {
            let mut buf = BytesMut::from(&f[..cut]);
            assert_eq!(
                decode_frame(&mut buf, MAX_FRAME_BYTES),
                Ok(None),
                "cut {cut}"
            );
            assert_eq!(buf.len(), cut);
        }
        // Fed one byte at a time, it decodes exactly once, at the last byte.
        let mut buf = BytesMut::new();
        let mut decoded = 0;
        for b in &f {
            buf.put_u8(*b);
            if decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().is_some() {
                decoded += 1;
            }
        }
        assert_eq!(decoded, 1);
        assert!(buf.is_empty());
    }

    #[test]
    fn rejects_bad_lengths_early() {
        assert_eq!(
            decode_all(&0i32.to_be_bytes()),
            Err(FrameError::FrameTooSmall { len: 0 })
        );
        assert_eq!(
            decode_all(&3i32.to_be_bytes()),
            Err(FrameError::FrameTooSmall { len: 3 })
        );
        assert_eq!(
            decode_all(&(-1i32).to_be_bytes()),
            Err(FrameError::FrameTooSmall { len: -1 })
        );
        assert_eq!(
            decode_all(&i32::MIN.to_be_bytes()),
            Err(FrameError::FrameTooSmall {
                len: i64::from(i32::MIN)
            })
        );
        // Exactly at the limit (including the length word) is fine; one more byte is not.
        let at_limit = (MAX_FRAME_BYTES - 4) as i32;
        assert_eq!(decode_all(&at_limit.to_be_bytes()), Ok(None));
        assert_eq!(
            decode_all(&(at_limit + 1).to_be_bytes()),
            Err(FrameError::FrameTooLarge {
                len: MAX_FRAME_BYTES + 1,
                max: MAX_FRAME_BYTES
            })
        );
        assert!(matches!(
            decode_all(&i32::MAX.to_be_bytes()),
            Err(FrameError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn rejects_header_longer_than_frame_and_unknown_type_before_the_body_arrives() {
        let mut f = Vec::new();
        f.extend_from_slice(&100i32.to_be_bytes());
        f.extend_from_slice(&97u32.to_be_bytes()); // JSON, header 97 > 96
        assert_eq!(
            decode_all(&f),
            Err(FrameError::HeaderLengthExceedsFrame {
                header_len: 97,
                frame_len: 96
            })
        );
        let mut f = Vec::new();
        f.extend_from_slice(&100i32.to_be_bytes());
        f.extend_from_slice(&((7u32 << 24) | 10).to_be_bytes());
        assert_eq!(decode_all(&f), Err(FrameError::UnknownSerializeType(7)));
    }

    #[test]
    fn invalid_header_is_an_error_and_consumes_the_frame() {
        for (type_code, header) in [(0u8, &b"{not json"[..]), (0, b""), (1, b"\x00\x01")] {
            let f = frame(type_code, header, b"");
            let mut buf = BytesMut::from(&f[..]);
            let err = decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap_err();
            assert!(matches!(err, FrameError::InvalidHeader { .. }), "{err}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn whitespace_and_newline_around_json_header() {
        let header = format!("\r\n {TRACE_ROUTE_REQUEST}\n\n");
        let cmd = decode_all(&frame(0, header.as_bytes(), b""))
            .unwrap()
            .unwrap();
        assert_eq!(cmd.ext("topic"), Some("capT1"));
    }

    #[test]
    fn body_is_a_slice_of_the_frame() {
        let f = frame(0, br#"{"code":34}"#, b"payload");
        let mut buf = BytesMut::from(&f[..]);
        let before = buf.as_ptr() as usize;
        let cmd = decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().unwrap();
        assert_eq!(&cmd.body[..], b"payload");
        assert_eq!(cmd.body.as_ptr() as usize, before + f.len() - 7);
    }

    #[test]
    fn try_encode_refuses_oversized_frames_and_leaves_output_alone() {
        let cmd = RemotingCommand::new_request(11).with_body(vec![0u8; 1000]);
        let mut out = BytesMut::from(&b"prev"[..]);
        assert!(matches!(
            try_encode_frame(&cmd, &mut out, 500),
            Err(FrameError::FrameTooLarge { .. })
        ));
        assert_eq!(&out[..], b"prev");
        try_encode_frame(&cmd, &mut out, MAX_FRAME_BYTES).unwrap();
        let mut rest = out.split_off(4);
        assert_eq!(
            decode_frame(&mut rest, MAX_FRAME_BYTES).unwrap().unwrap(),
            cmd
        );
    }

    #[test]
    fn fuzz_entry_handles_hostile_inputs() {
        fuzz_decode(b"");
        fuzz_decode(&[0xFF; 64]);
        fuzz_decode(&frame(0, TRACE_ROUTE_REQUEST.as_bytes(), b"\0\0\0\x05"));
        fuzz_decode(&frame(1, &[0; 21], b""));
    }

    fn language() -> impl Strategy<Value = LanguageCode> {
        (0u8..14).prop_map(LanguageCode::from_code)
    }

    fn ext_fields() -> impl Strategy<Value = ExtFields> {
        prop::collection::vec(("\\PC{0,12}", "\\PC{0,24}"), 0..8)
            .prop_map(|kv| kv.into_iter().collect::<ExtFields>())
    }

    fn command() -> impl Strategy<Value = RemotingCommand> {
        (
            any::<bool>(),
            any::<i16>(),
            any::<i32>(),
            language(),
            any::<i16>(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
            prop::option::of("\\PC{1,40}"),
            ext_fields(),
            prop::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(
                |(
                    binary,
                    code16,
                    code32,
                    language,
                    version16,
                    version32,
                    opaque,
                    flag,
                    remark,
                    ext,
                    body,
                )| {
                    let (serialize_type, code, version, language) = if binary {
                        (
                            SerializeType::RocketMq,
                            i32::from(code16),
                            i32::from(version16),
                            language,
                        )
                    } else {
                        (SerializeType::Json, code32, version32, language)
                    };
                    RemotingCommand {
                        code,
                        language,
                        version,
                        opaque,
                        flag,
                        remark,
                        ext_fields: ext,
                        body: Bytes::from(body),
                        body_parts: Vec::new(),
                        serialize_type,
                    }
                },
            )
    }

    /// A JSON scalar of any kind, as text.
    fn json_scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            (-5i32..400).prop_map(|v| format!("\"{v}\"")),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|v| format!("{v:?}")),
            any::<bool>().prop_map(|b| b.to_string()),
            Just("null".to_owned()),
            "\\PC{0,10}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        ]
    }

    /// Mostly a valid 32-bit integer (as a number, a quoted string or null), sometimes anything.
    fn json_int() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => any::<i32>().prop_map(|v| v.to_string()),
            2 => any::<i32>().prop_map(|v| format!("\"{v}\"")),
            1 => Just("null".to_owned()),
            1 => json_scalar(),
        ]
    }

    proptest! {
        /// Structurally valid JSON headers with values of every type: whatever decodes must
        /// survive re-encoding (checked inside `fuzz_decode`).
        #[test]
        fn json_headers_with_any_scalar_types_never_panic(
            ints in prop::collection::vec(json_int(), 4),
            language in json_scalar(),
            remark in json_scalar(),
            ext in prop::collection::vec(("[a-z]{1,3}", json_scalar()), 0..6),
        ) {
            let fields: Vec<String> = ext
                .iter()
                .map(|(k, v)| format!("\"{k}\":{v}"))
                .collect();
            let header = format!(
                " {{\"code\":{},\"language\":{language},\"version\":{},\"opaque\":{},\"flag\":{},\"remark\":{remark},\"extFields\":{{{}}}}}\n",
                ints[0], ints[1], ints[2], ints[3], fields.join(",")
            );
            fuzz_decode(&frame(0, header.as_bytes(), b"x"));
        }

        #[test]
        fn encode_then_decode_round_trips(cmd in command(), unknown_lang in 14u8..=255) {
            let mut out = BytesMut::new();
            encode_frame(&cmd, &mut out);
            let back = decode_frame(&mut out, MAX_FRAME_BYTES).unwrap().unwrap();
            prop_assert!(out.is_empty());
            prop_assert_eq!(&back, &cmd);

            // Unknown language bytes survive the binary encoding.
            if cmd.serialize_type == SerializeType::RocketMq {
                let mut odd = cmd.clone();
                odd.language = LanguageCode::Unknown(unknown_lang);
                encode_frame(&odd, &mut out);
                prop_assert_eq!(decode_frame(&mut out, MAX_FRAME_BYTES).unwrap().unwrap(), odd);
            }
        }

        #[test]
        fn decode_never_panics_on_random_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
            fuzz_decode(&data);
        }

        #[test]
        fn decode_never_panics_on_random_headers(
            binary in any::<bool>(),
            header in prop::collection::vec(any::<u8>(), 0..128),
            body in prop::collection::vec(any::<u8>(), 0..32),
        ) {
            fuzz_decode(&frame(u8::from(binary), &header, &body));
        }

        #[test]
        fn corrupting_a_valid_frame_never_panics(cmd in command(), at in any::<usize>(), byte in any::<u8>()) {
            let mut out = BytesMut::new();
            encode_frame(&cmd, &mut out);
            let i = at % out.len();
            out[i] = byte;
            fuzz_decode(&out);
            fuzz_decode(&out[..i]);
        }
    }
}
