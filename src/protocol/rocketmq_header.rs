//! The ROCKETMQ binary header encoding (serialize type 1), both directions.
//!
//! Layout (big-endian, Apache's `RocketMQSerializable.rocketMQProtocolEncode`):
//! `i16 code | u8 language | i16 version | i32 opaque | i32 flag |
//!  i32 remarkLen + remark | i32 extLen + repeated(i16 keyLen + key, i32 valLen + val)`.
//! The fixed part is 21 bytes; a zero length means "null" (no remark, no extFields).
//!
//! Invariants:
//! * Decoding never panics: every read is bounds-checked, every length validated against the
//!   bytes actually present, and the header must be consumed exactly — a negative length, a
//!   length past the end, invalid UTF-8 or trailing bytes are errors naming the field.
//! * `code` and `version` are 16 bits here. Java writes `(short) code`; so do we, which means a
//!   code outside `i16` (e.g. the 4.9.x POP codes, 200050+) cannot travel in this encoding — the
//!   same limitation as Java's. An empty remark is indistinguishable from none (length 0).
//! * A key longer than `i16::MAX` bytes cannot be represented; the encoder drops such entries
//!   rather than writing a length that would corrupt the rest of the header.

use bytes::{BufMut, BytesMut};

use super::command::HeaderParts;
use super::command::{ExtFields, LanguageCode, RemotingCommand};

/// Size of the fixed part (code .. flag plus the remark length word).
pub(crate) const FIXED_LEN: usize = 2 + 1 + 2 + 4 + 4 + 4;

/// Bounds-checked big-endian reader over a header slice; errors name the field and offset.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&end| end <= self.buf.len());
        match end.and_then(|end| self.buf.get(self.pos..end).map(|s| (s, end))) {
            Some((slice, end)) => {
                self.pos = end;
                Ok(slice)
            }
            None => Err(format!(
                "ROCKETMQ header: {field} at byte {} needs {n} bytes, only {} left",
                self.pos,
                self.buf.len().saturating_sub(self.pos)
            )),
        }
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], String> {
        let slice = self.take(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn u8(&mut self, field: &str) -> Result<u8, String> {
        Ok(self.array::<1>(field)?[0])
    }

    fn i16(&mut self, field: &str) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i32(&mut self, field: &str) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    /// A length word: negative is an error (Java would misread everything after it).
    fn len_i32(&mut self, field: &str) -> Result<usize, String> {
        let at = self.pos;
        let v = self.i32(field)?;
        usize::try_from(v)
            .map_err(|_| format!("ROCKETMQ header: {field} at byte {at} is negative ({v})"))
    }

    fn len_i16(&mut self, field: &str) -> Result<usize, String> {
        let at = self.pos;
        let v = self.i16(field)?;
        usize::try_from(v)
            .map_err(|_| format!("ROCKETMQ header: {field} at byte {at} is negative ({v})"))
    }

    fn utf8(&mut self, n: usize, field: &str) -> Result<String, String> {
        self.str(n, field).map(str::to_owned)
    }

    /// Borrowed from the header: extFields go straight into the `ExtFields` buffer.
    fn str(&mut self, n: usize, field: &str) -> Result<&'a str, String> {
        let at = self.pos;
        let bytes = self.take(n, field)?;
        std::str::from_utf8(bytes)
            .map_err(|e| format!("ROCKETMQ header: {field} at byte {at} is not UTF-8: {e}"))
    }
}

/// Decodes a ROCKETMQ binary header. The error text becomes `FrameError::InvalidHeader`.
pub(crate) fn decode(header: &[u8]) -> Result<HeaderParts, String> {
    let mut r = Reader {
        buf: header,
        pos: 0,
    };
    let code = i32::from(r.i16("code")?);
    let language = LanguageCode::from_code(r.u8("language")?);
    let version = i32::from(r.i16("version")?);
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let remark_len = r.len_i32("remarkLen")?;
    let remark = match remark_len {
        0 => None,
        n => Some(r.utf8(n, "remark")?),
    };
    let ext_len = r.len_i32("extLen")?;
    let ext_start = r.pos;
    let ext_bytes = r.take(ext_len, "extFields")?;
    let mut ext = Reader {
        buf: ext_bytes,
        pos: 0,
    };
    let mut fields = ExtFields::with_capacity_and_text(16, ext_len);
    while ext.pos < ext.buf.len() {
        let key_len = ext.len_i16("extFields key length")?;
        let key = ext.str(key_len, "extFields key")?;
        let val_len = ext.len_i32("extFields value length")?;
        let val = ext.str(val_len, "extFields value")?;
        fields.push_wire_with(key, |out| out.push_str(val));
    }
    fields.finish_wire();
    if r.pos != header.len() {
        return Err(format!(
            "ROCKETMQ header: {} trailing bytes after extFields (which started at byte {ext_start})",
            header.len() - r.pos
        ));
    }
    Ok(HeaderParts {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields: fields,
    })
}

/// Appends the ROCKETMQ binary header of `cmd` to `out`.
pub(crate) fn encode(cmd: &RemotingCommand, out: &mut BytesMut) {
    let remark = cmd.remark.as_deref().unwrap_or_default().as_bytes();
    let encodable = |k: &str, v: &str| k.len() <= i16::MAX as usize && v.len() <= i32::MAX as usize;
    let ext_len: usize = cmd
        .ext_fields
        .iter()
        .filter(|(k, v)| encodable(k, v))
        .map(|(k, v)| 2 + k.len() + 4 + v.len())
        .sum();
    out.reserve(FIXED_LEN + remark.len() + 4 + ext_len);
    // Java casts to short; a code outside i16 is truncated exactly as a Java peer would.
    out.put_i16(cmd.code as i16);
    out.put_u8(cmd.language.code());
    out.put_i16(cmd.version as i16);
    out.put_i32(cmd.opaque);
    out.put_i32(cmd.flag);
    out.put_i32(len_word(remark.len()));
    out.put_slice(remark);
    out.put_i32(len_word(ext_len));
    for (k, v) in cmd.ext_fields.iter().filter(|(k, v)| encodable(k, v)) {
        out.put_i16(k.len() as i16);
        out.put_slice(k.as_bytes());
        out.put_i32(len_word(v.len()));
        out.put_slice(v.as_bytes());
    }
}

/// A length as an i32 word. Lengths here are bounded by the frame size (checked by the frame
/// encoder), so saturation only happens for commands that are rejected anyway.
fn len_word(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-built header: code 310, GO, version 401, opaque 7, flag 0, remark "hi",
    /// extFields {"a": "PG"}.
    fn golden() -> Vec<u8> {
        let mut h = vec![];
        h.extend_from_slice(&310i16.to_be_bytes());
        h.push(9); // GO
        h.extend_from_slice(&401i16.to_be_bytes());
        h.extend_from_slice(&7i32.to_be_bytes());
        h.extend_from_slice(&0i32.to_be_bytes());
        h.extend_from_slice(&2i32.to_be_bytes());
        h.extend_from_slice(b"hi");
        h.extend_from_slice(&(2 + 1 + 4 + 2i32).to_be_bytes());
        h.extend_from_slice(&1i16.to_be_bytes());
        h.extend_from_slice(b"a");
        h.extend_from_slice(&2i32.to_be_bytes());
        h.extend_from_slice(b"PG");
        h
    }

    #[test]
    fn decodes_and_encodes_golden_bytes() {
        let p = decode(&golden()).unwrap();
        assert_eq!((p.code, p.version, p.opaque, p.flag), (310, 401, 7, 0));
        assert_eq!(p.language, LanguageCode::Go);
        assert_eq!(p.remark.as_deref(), Some("hi"));
        assert_eq!(p.ext_fields.get("a"), Some("PG"));

        let mut cmd = RemotingCommand::new_request(310)
            .with_opaque(7)
            .with_remark("hi")
            .with_ext("a", "PG");
        cmd.language = LanguageCode::Go;
        let mut out = BytesMut::new();
        encode(&cmd, &mut out);
        assert_eq!(out.to_vec(), golden());
    }

    #[test]
    fn zero_lengths_mean_null() {
        let mut out = BytesMut::new();
        encode(&RemotingCommand::new_request(34), &mut out);
        assert_eq!(out.len(), FIXED_LEN + 4);
        let p = decode(&out).unwrap();
        assert_eq!(p.remark, None);
        assert!(p.ext_fields.is_empty());
    }

    #[test]
    fn negative_code_and_version_sign_extend() {
        let mut h = golden();
        h[0..2].copy_from_slice(&(-1i16).to_be_bytes());
        assert_eq!(decode(&h).unwrap().code, -1);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let h = golden();
        for cut in 0..h.len() {
            assert!(decode(&h[..cut]).is_err(), "accepted a header cut at {cut}");
        }
    }

    #[test]
    fn rejects_negative_lengths_bad_utf8_and_trailing_bytes() {
        let mut neg_remark = golden();
        neg_remark[13..17].copy_from_slice(&(-2i32).to_be_bytes());
        assert!(decode(&neg_remark).unwrap_err().contains("remarkLen"));

        let mut neg_key = golden();
        let key_at = FIXED_LEN + 2 + 4;
        neg_key[key_at..key_at + 2].copy_from_slice(&(-1i16).to_be_bytes());
        assert!(decode(&neg_key).unwrap_err().contains("key length"));

        let mut bad_utf8 = golden();
        bad_utf8[17] = 0xFF;
        assert!(decode(&bad_utf8).unwrap_err().contains("not UTF-8"));

        let mut trailing = golden();
        trailing.push(0);
        assert!(decode(&trailing).unwrap_err().contains("trailing"));
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let mut cmd = RemotingCommand::new_request(1);
        cmd.ext_fields.insert("k", "1");
        let mut out = BytesMut::new();
        encode(&cmd, &mut out);
        // Append a second "k" entry by hand and fix extLen.
        let mut h = out.to_vec();
        h.extend_from_slice(&1i16.to_be_bytes());
        h.extend_from_slice(b"k");
        h.extend_from_slice(&1i32.to_be_bytes());
        h.extend_from_slice(b"2");
        let ext_len: i32 = 2 * (2 + 1 + 4 + 1);
        h[FIXED_LEN..FIXED_LEN + 4].copy_from_slice(&ext_len.to_be_bytes());
        let p = decode(&h).unwrap();
        assert_eq!(p.ext_fields.len(), 1);
        assert_eq!(p.ext_fields.get("k"), Some("2"));
    }
}
