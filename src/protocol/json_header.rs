//! The JSON header encoding (serialize type 0), both directions.
//!
//! Owns: turning header bytes into the header part of a [`RemotingCommand`] and back.
//!
//! Decoding is deliberately forgiving, because every client library writes this JSON its own way
//! and the protocol has no schema: any `language` string (unknown ones read as `OTHER`), any
//! version, `remark` null or absent, `extFields` null / absent / an object whose values are
//! strings, numbers or booleans (converted to the decimal / `true` text Java would have sent),
//! numbers for `code`/`opaque`/`flag`/`version` sent as strings, unknown top-level fields,
//! whitespace around the object, trailing NUL padding and a UTF-8 byte-order mark. It is strict
//! only where guessing would be wrong: the header must be one JSON object with a `code`, numbers
//! must fit 32 bits, and an `extFields` value may not be an object or array.
//!
//! Two decoders, one behaviour: [`json_fast`](super::json_fast) scans the shape every real
//! client sends straight into an [`ExtFields`] buffer, with no allocation per field; whatever it
//! is not sure about makes it give up, and the serde decoder below reads the header instead (and
//! names the error). A property test pins that both agree wherever the fast path answers.
//!
//! Encoding writes exactly the shape Java and the traced clients use:
//! `{"code":0,"language":"JAVA","version":401,"opaque":7,"flag":1,"remark":null,
//! "extFields":{"k":"v"},"serializeTypeCurrentRPC":"JSON"}` — empty `extFields` as `null`, as the
//! traced broker answers.

use std::fmt;

use bytes::BytesMut;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::command::{ExtFields, HeaderParts, LanguageCode, RemotingCommand};

/// Decodes a JSON header. The error text becomes `FrameError::InvalidHeader { reason }`.
pub(crate) fn decode(header: &[u8]) -> Result<HeaderParts, String> {
    let header = header.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(header);
    // Some C clients pad a header with NULs; serde_json already skips whitespace.
    let end = header
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    let header = header.get(..end).unwrap_or_default();
    if let Some(parts) = super::json_fast::decode(header) {
        return Ok(parts);
    }
    decode_with_serde(header)
}

/// The general decoder (every leniency, every error message).
pub(crate) fn decode_with_serde(header: &[u8]) -> Result<HeaderParts, String> {
    let wire: WireHeader =
        serde_json::from_slice(header).map_err(|e| format!("JSON header: {e}"))?;
    let code = wire
        .code
        .ok_or_else(|| "JSON header has no \"code\"".to_owned())?;
    Ok(HeaderParts {
        code: to_i32("code", code.0)?,
        language: wire.language.map_or(LanguageCode::Other, |l| l.0),
        version: to_i32("version", wire.version.map_or(0, |v| v.0))?,
        opaque: to_i32("opaque", wire.opaque.map_or(0, |v| v.0))?,
        flag: to_i32("flag", wire.flag.map_or(0, |v| v.0))?,
        remark: wire.remark.and_then(|r| r.0),
        ext_fields: wire.ext_fields.map(|e| e.0).unwrap_or_default(),
    })
}

fn to_i32(field: &str, value: i64) -> Result<i32, String> {
    i32::try_from(value).map_err(|_| format!("JSON header: {field} {value} does not fit 32 bits"))
}

/// Appends the JSON header of `cmd` to `out`.
pub(crate) fn encode(cmd: &RemotingCommand, out: &mut BytesMut) {
    out.reserve(
        128 + cmd
            .ext_fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>(),
    );
    // Pieces and `itoa`, not `write!`: every reply goes through here, and the formatting
    // machinery was most of this function's time.
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"{\"code\":");
    out.extend_from_slice(n.format(cmd.code).as_bytes());
    out.extend_from_slice(b",\"language\":\"");
    out.extend_from_slice(cmd.language.name().as_bytes());
    out.extend_from_slice(b"\",\"version\":");
    out.extend_from_slice(n.format(cmd.version).as_bytes());
    out.extend_from_slice(b",\"opaque\":");
    out.extend_from_slice(n.format(cmd.opaque).as_bytes());
    out.extend_from_slice(b",\"flag\":");
    out.extend_from_slice(n.format(cmd.flag).as_bytes());
    out.extend_from_slice(b",\"remark\":");
    match &cmd.remark {
        Some(remark) => write_json_string(out, remark),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"extFields\":");
    if cmd.ext_fields.is_empty() {
        out.extend_from_slice(b"null");
    } else {
        out.extend_from_slice(b"{");
        for (i, (k, v)) in cmd.ext_fields.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b",");
            }
            write_json_string(out, k);
            out.extend_from_slice(b":");
            write_json_string(out, v);
        }
        out.extend_from_slice(b"}");
    }
    out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\"}");
}

/// Writes `s` as a JSON string literal. Only `"`, `\` and control characters need escaping; the
/// property separators `\u0001`/`\u0002` inside `properties` come out as `\u0001`/`\u0002`, as
/// Java's fastjson writes them.
fn write_json_string(out: &mut BytesMut, s: &str) {
    out.extend_from_slice(b"\"");
    let bytes = s.as_bytes();
    // Nearly every header string needs no escape: one vectorized check, one copy.
    if !bytes.iter().fold(false, |esc, &b| {
        esc | (b < 0x20) | (b == b'"') | (b == b'\\')
    }) {
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\"");
        return;
    }
    // Room for the text and a few escapes up front, instead of growing per segment.
    out.reserve(bytes.len() + 32);
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x00..=0x1F => None,
            _ => continue,
        };
        out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => {
                // `\u00XX` from a table, not `write!`: the property separators are escaped
                // twice per property in every SEND a client writes.
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xF)],
                ]);
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    out.extend_from_slice(b"\"");
}

/// The JSON header as it may arrive. Missing and `null` fields both read as `None`; fields we do
/// not know (`serializeTypeCurrentRPC`, vendor extensions) are ignored.
#[derive(Deserialize)]
struct WireHeader {
    #[serde(default)]
    code: Option<LenientInt>,
    #[serde(default)]
    language: Option<LenientLanguage>,
    #[serde(default)]
    version: Option<LenientInt>,
    #[serde(default)]
    opaque: Option<LenientInt>,
    #[serde(default)]
    flag: Option<LenientInt>,
    #[serde(default)]
    remark: Option<ScalarText>,
    #[serde(default, rename = "extFields")]
    ext_fields: Option<WireExtFields>,
}

/// An integer sent as a JSON number or as a decimal string (some clients quote everything).
struct LenientInt(i64);

impl<'de> Deserialize<'de> for LenientInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LenientInt;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a decimal string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LenientInt, E> {
                Ok(LenientInt(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LenientInt, E> {
                i64::try_from(v)
                    .map(LenientInt)
                    .map_err(|_| E::custom(format!("{v} does not fit 64 bits")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LenientInt, E> {
                // `7.0` from a client that only has floats; anything fractional is wrong.
                if v.fract() == 0.0 && (-9.0e15..=9.0e15).contains(&v) {
                    Ok(LenientInt(v as i64))
                } else {
                    Err(E::custom(format!("{v} is not an integer")))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientInt, E> {
                v.trim()
                    .parse()
                    .map(LenientInt)
                    .map_err(|_| E::custom(format!("{v:?} is not an integer")))
            }
        }
        d.deserialize_any(V)
    }
}

/// `language` as a name (any case, unknown ⇒ `OTHER`) or, leniently, as its numeric code.
struct LenientLanguage(LanguageCode);

impl<'de> Deserialize<'de> for LenientLanguage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LenientLanguage;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a language name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::from_name(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LenientLanguage, E> {
                // JSON has no name for an unknown code: fold it into OTHER so that re-encoding
                // and decoding again gives the same command.
                let lang = u8::try_from(v)
                    .map(LanguageCode::from_code)
                    .unwrap_or(LanguageCode::Other);
                Ok(LenientLanguage(match lang {
                    LanguageCode::Unknown(_) => LanguageCode::Other,
                    known => known,
                }))
            }
            // The field is informational: no value of any type may fail the frame.
            fn visit_i64<E: de::Error>(self, _v: i64) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::Other))
            }
            fn visit_f64<E: de::Error>(self, _v: f64) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::Other))
            }
            fn visit_bool<E: de::Error>(self, _v: bool) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::Other))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<LenientLanguage, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(LenientLanguage(LanguageCode::Other))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LenientLanguage, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(LenientLanguage(LanguageCode::Other))
            }
        }
        d.deserialize_any(V)
    }
}

/// A scalar read as the text Java would have put in a string field: strings as they are,
/// integers in decimal, booleans as `true`/`false`. `null` is "absent".
struct ScalarText(Option<String>);

impl<'de> Deserialize<'de> for ScalarText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ScalarText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number, boolean or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ScalarText, E> {
                Ok(ScalarText(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<ScalarText, E> {
                Ok(ScalarText(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScalarText, E> {
                Ok(ScalarText(Some(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScalarText, E> {
                Ok(ScalarText(Some(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ScalarText, E> {
                // Rust prints `1.0` as `1`, which is what an integer field wants.
                Ok(ScalarText(Some(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ScalarText, E> {
                Ok(ScalarText(Some(
                    if v { "true" } else { "false" }.to_owned(),
                )))
            }
            fn visit_unit<E: de::Error>(self) -> Result<ScalarText, E> {
                Ok(ScalarText(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<ScalarText, E> {
                Ok(ScalarText(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// `extFields` object, read in arrival order; `null` values are dropped (Java never sends a
/// null-valued field, it omits it).
struct WireExtFields(ExtFields);

impl<'de> Deserialize<'de> for WireExtFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WireExtFields;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an extFields object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireExtFields, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some((key, value)) = map.next_entry::<String, ScalarText>()? {
                    if let Some(value) = value.0 {
                        entries.push((key, value));
                    }
                }
                Ok(WireExtFields(ExtFields::from_wire(entries)))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(cmd: &RemotingCommand) -> String {
        let mut out = BytesMut::new();
        encode(cmd, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn decodes_trace_send_header() {
        let h = br#"{"code": 10, "language": "RUST", "version": 474, "opaque": 2, "flag": 0, "remark": null, "extFields": {"batch": "false", "bname": "broker-a", "bornTimestamp": "1796016336504", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "flag": "0", "producerGroup": "harness_pg_1", "properties": "TAGS\u0001BenchTag\u0002WAIT\u0001true\u0002UNIQ_KEY\u0001C00002021F2BAC4C820C968286780000\u0002", "queueId": "1", "reconsumeTimes": "0", "sysFlag": "0", "topic": "capT1", "unitMode": "false"}, "serializeTypeCurrentRPC": "JSON"}"#;
        let p = decode(h).unwrap();
        assert_eq!((p.code, p.version, p.opaque, p.flag), (10, 474, 2, 0));
        assert_eq!(p.language, LanguageCode::Rust);
        assert_eq!(p.remark, None);
        assert_eq!(p.ext_fields.len(), 13);
        assert_eq!(
            p.ext_fields.get("properties"),
            Some("TAGS\u{1}BenchTag\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}C00002021F2BAC4C820C968286780000\u{2}")
        );
    }

    #[test]
    fn tolerates_numbers_bools_nulls_strings_and_unknown_fields() {
        let h = b"\n  {\"code\":\"105\",\"language\":\"DOTNET\",\"opaque\":\" 9 \",\"flag\":2.0,\
            \"extFields\":{\"queueId\":3,\"unitMode\":true,\"offset\":-1,\"gone\":null,\"t\":\"x\"},\
            \"vendor\":{\"nested\":[1,2]},\"remark\":null}\r\n\0\0";
        let p = decode(h).unwrap();
        assert_eq!((p.code, p.version, p.opaque, p.flag), (105, 0, 9, 2));
        assert_eq!(p.language, LanguageCode::DotNet);
        let fields: Vec<_> = p.ext_fields.iter().collect();
        assert_eq!(
            fields,
            vec![
                ("queueId", "3"),
                ("unitMode", "true"),
                ("offset", "-1"),
                ("t", "x")
            ]
        );
    }

    #[test]
    fn extfields_absent_null_or_empty_are_all_empty() {
        for h in [
            &br#"{"code":0}"#[..],
            br#"{"code":0,"extFields":null}"#,
            br#"{"code":0,"extFields":{}}"#,
        ] {
            assert!(decode(h).unwrap().ext_fields.is_empty());
        }
    }

    #[test]
    fn unknown_language_name_and_code_become_other() {
        let p = decode(br#"{"code":1,"language":"ZIG"}"#).unwrap();
        assert_eq!(p.language, LanguageCode::Other);
        let p = decode(br#"{"code":1,"language":200}"#).unwrap();
        assert_eq!(p.language, LanguageCode::Other);
        let p = decode(br#"{"code":1,"language":9}"#).unwrap();
        assert_eq!(p.language, LanguageCode::Go);
        for odd in ["true", "1.5", "-3", "[1]", "{\"a\":[]}"] {
            let h = format!(r#"{{"code":1,"language":{odd}}}"#);
            assert_eq!(
                decode(h.as_bytes()).unwrap().language,
                LanguageCode::Other,
                "{odd}"
            );
        }
    }

    #[test]
    fn rejects_what_cannot_be_a_header() {
        for h in [
            &b""[..],
            b"[]",
            b"null",
            b"{",
            br#"{"opaque":1}"#,
            br#"{"code":4294967296}"#,
            br#"{"code":"x"}"#,
            br#"{"code":1.5}"#,
            br#"{"code":1,"extFields":{"a":{"b":1}}}"#,
            br#"{"code":1,"extFields":[1]}"#,
            br#"{"code":1} trailing"#,
        ] {
            assert!(
                decode(h).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(h)
            );
        }
    }

    #[test]
    fn encodes_the_traced_response_shape() {
        let req = RemotingCommand::new_request(10).with_opaque(2);
        let mut resp = RemotingCommand::response_to(&req, 0, None);
        resp.ext_fields
            .insert("msgId", "7F00000100002A9F000000000000A244");
        resp.ext_fields.insert("queueId", "1");
        assert_eq!(
            enc(&resp),
            r#"{"code":0,"language":"JAVA","version":401,"opaque":2,"flag":1,"remark":null,"extFields":{"msgId":"7F00000100002A9F000000000000A244","queueId":"1"},"serializeTypeCurrentRPC":"JSON"}"#
        );
        let not_found =
            RemotingCommand::response_to(&req, 17, Some("Topic route was not found".into()));
        assert_eq!(
            enc(&not_found),
            r#"{"code":17,"language":"JAVA","version":401,"opaque":2,"flag":1,"remark":"Topic route was not found","extFields":null,"serializeTypeCurrentRPC":"JSON"}"#
        );
    }

    #[test]
    fn escapes_control_chars_quotes_and_backslashes() {
        let cmd = RemotingCommand::new_request(1)
            .with_ext("properties", "TAGS\u{1}A\u{2}")
            .with_remark("say \"hi\"\\\n");
        let json = enc(&cmd);
        assert!(
            json.contains(r#""properties":"TAGS\u0001A\u0002""#),
            "{json}"
        );
        assert!(json.contains(r#""remark":"say \"hi\"\\\n""#), "{json}");
        let back = decode(json.as_bytes()).unwrap();
        assert_eq!(back.ext_fields.get("properties"), Some("TAGS\u{1}A\u{2}"));
        assert_eq!(back.remark.as_deref(), Some("say \"hi\"\\\n"));
    }
}
