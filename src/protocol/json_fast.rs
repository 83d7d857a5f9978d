//! The allocation-free decoder of the JSON header shape every real client sends.
//!
//! Owns: one pass over the header bytes that writes every `extFields` key and value straight into
//! one [`ExtFields`] buffer (a SEND's 14 fields cost two allocations, not 28 `String`s plus serde's
//! visitor machinery — a quarter of the broker's time per message before this existed).
//!
//! What it accepts: one object whose `code`/`version`/`opaque`/`flag` are plain JSON integers (or
//! `null`), `language` a plain string, `remark` a string or `null`, `extFields` `null` or an object
//! of string (or `null`) values with plain keys, other top-level fields scalar. Everything else —
//! numbers sent as strings, floats, booleans in `extFields`, nested vendor objects, surrogate
//! escapes, repeated fields, trailing bytes, malformed input — returns `None`, and the caller
//! reads the header with serde instead, which knows every leniency and names every error.
//!
//! Invariant: wherever this returns `Some`, serde returns the same parts (property-tested below
//! on generated headers and on arbitrary bytes). It never panics and never decides what is an
//! error.

use super::command::{ExtFields, HeaderParts, LanguageCode};

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

/// A string literal's plain run: the text up to its closing quote, a backslash or a raw control
/// character (which ends it), as `str`; `None` if the input ends first or the run is not UTF-8.
fn plain_run(b: &[u8]) -> Option<&str> {
    // Most runs are short (keys are one letter in a SEND V2 header, most values a few bytes): a
    // byte loop over the first bytes ends before a SIMD search would have set up. Longer runs go
    // on with memchr2, then branch-free folds the compiler vectorizes.
    const SHORT: usize = 16;
    let mut printable = true;
    for (i, &c) in b.iter().take(SHORT).enumerate() {
        if c == b'"' || c == b'\\' {
            return run_text(b.get(..i)?, printable);
        }
        // `c - 0x20` wraps the control characters to the top: one compare for both bounds.
        printable &= c.wrapping_sub(0x20) < 0x60;
    }
    let rest = b.get(SHORT..)?;
    let end = SHORT + memchr::memchr2(b'"', b'\\', rest)?;
    let run = b.get(..end)?;
    let tail = run.get(SHORT..)?;
    run_text(
        run,
        printable
            && tail
                .iter()
                .fold(true, |ok, &c| ok & (c.wrapping_sub(0x20) < 0x60)),
    )
}

/// `run` as text: `printable` (every byte in 0x20..0x80, checked by the caller) is ASCII as is; a
/// raw control character makes both callers give up (`None`), exactly as when it ended the run.
fn run_text(run: &[u8], printable: bool) -> Option<&str> {
    if printable {
        // SAFETY: every byte of `run` is in 0x20..0x80 (the caller checked), and ASCII is valid
        // UTF-8. Header text is nearly always ASCII; this skips the UTF-8 validation.
        return Some(unsafe { std::str::from_utf8_unchecked(run) });
    }
    if run.iter().any(|&c| c < 0x20) {
        return None;
    }
    std::str::from_utf8(run).ok()
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        let end = self.i.checked_add(word.len())?;
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// A plain JSON integer (no fraction, exponent or leading zero) that fits `i64`.
    fn int(&mut self) -> Option<i64> {
        self.ws();
        let neg = self.b.get(self.i) == Some(&b'-');
        if neg {
            self.i += 1;
        }
        let digits = self.i;
        // Accumulated as a negative number, so `i64::MIN` fits; overflow is `None` (serde's).
        let mut acc: i64 = 0;
        while let Some(&c) = self.b.get(self.i).filter(|c| c.is_ascii_digit()) {
            acc = acc.checked_mul(10)?.checked_sub(i64::from(c - b'0'))?;
            self.i += 1;
        }
        let n = self.i - digits;
        if n == 0 || (n > 1 && self.b.get(digits) == Some(&b'0')) {
            return None;
        }
        if matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        if neg {
            Some(acc)
        } else {
            acc.checked_neg()
        }
    }

    /// A string literal without escapes, borrowed from the input.
    fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let run = plain_run(self.b.get(self.i..)?)?;
        let end = self.i + run.len();
        if self.b.get(end) != Some(&b'"') {
            return None;
        }
        self.i = end + 1;
        Some(run)
    }

    /// A string literal, unescaped and appended to `out`.
    fn str_into(&mut self, out: &mut String) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let run = plain_run(self.b.get(self.i..)?)?;
            out.push_str(run);
            self.i += run.len();
            match self.b.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    let c = match self.b.get(self.i + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        // One BMP code point (the property separators \u0001 \u0002); surrogate
                        // pairs are left to serde (`char::from_u32` refuses a lone surrogate).
                        b'u' => {
                            let hex = self.b.get(self.i + 2..self.i + 6)?;
                            let mut v = 0u32;
                            for &h in hex {
                                v = v * 16 + char::from(h).to_digit(16)?;
                            }
                            self.i += 4;
                            char::from_u32(v)?
                        }
                        _ => return None,
                    };
                    self.i += 2;
                    out.push(c);
                }
                _ => return None, // a raw control character
            }
        }
    }

    /// Skips a scalar value (string, integer, `true`, `false`, `null`).
    fn skip_scalar(&mut self) -> Option<()> {
        match self.peek()? {
            // A plain string is skipped in place; only one with escapes is unescaped (and
            // allocates) on the way past.
            b'"' => {
                let save = self.i;
                if self.plain_str().is_some() {
                    return Some(());
                }
                self.i = save;
                self.str_into(&mut String::new())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.int().map(drop),
        }
    }

    fn ext_fields(&mut self) -> Option<ExtFields> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(ExtFields::new());
        }
        self.eat(b'{')?;
        // One buffer for every key and value; what is left of the header bounds their text.
        let mut ext = ExtFields::with_capacity_and_text(16, self.b.len() - self.i);
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(ext);
        }
        loop {
            let key = self.plain_str()?;
            self.eat(b':')?;
            if self.peek()? == b'n' {
                // A null value is "absent", as serde reads it.
                self.literal(b"null")?;
            } else {
                let mut ok = None;
                ext.push_wire_with(key, |out| ok = self.str_into(out));
                ok?;
            }
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    break;
                }
                _ => return None,
            }
        }
        ext.finish_wire();
        Some(ext)
    }
}

/// Decodes `header` (BOM and NUL padding already stripped), or `None` to defer to serde.
pub(crate) fn decode(header: &[u8]) -> Option<HeaderParts> {
    let mut s = Scan { b: header, i: 0 };
    let mut parts = HeaderParts {
        code: 0,
        language: LanguageCode::Other,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: ExtFields::new(),
    };
    // A bit per known field: serde refuses a repeated field, so those are left to it.
    let mut seen = 0u8;
    let mut first = |bit: u8| {
        let fresh = seen & bit == 0;
        seen |= bit;
        fresh.then_some(())
    };
    let mut has_code = false;
    s.eat(b'{')?;
    if s.peek()? != b'}' {
        loop {
            let key = s.plain_str()?;
            s.eat(b':')?;
            let null = s.peek()? == b'n';
            match key {
                "code" | "version" | "opaque" | "flag" => {
                    let (bit, slot) = match key {
                        "code" => (1, &mut parts.code),
                        "version" => (2, &mut parts.version),
                        "opaque" => (4, &mut parts.opaque),
                        _ => (8, &mut parts.flag),
                    };
                    first(bit)?;
                    if null {
                        s.literal(b"null")?;
                    } else {
                        *slot = i32::try_from(s.int()?).ok()?;
                        has_code |= bit == 1;
                    }
                }
                "language" => {
                    first(16)?;
                    if null {
                        s.literal(b"null")?;
                    } else {
                        parts.language = LanguageCode::from_name(s.plain_str()?);
                    }
                }
                "remark" => {
                    first(32)?;
                    if null {
                        s.literal(b"null")?;
                    } else {
                        let mut r = String::new();
                        s.str_into(&mut r)?;
                        parts.remark = Some(r);
                    }
                }
                "extFields" => {
                    first(64)?;
                    parts.ext_fields = s.ext_fields()?;
                }
                _ => s.skip_scalar()?,
            }
            match s.peek()? {
                b',' => s.i += 1,
                b'}' => break,
                _ => return None,
            }
        }
    }
    s.eat(b'}')?;
    s.ws();
    (s.i == header.len() && has_code).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::super::command::RemotingCommand;
    use super::super::json_header::{decode_with_serde, encode};
    use super::*;
    use bytes::BytesMut;
    use proptest::prelude::*;

    /// Wherever the fast decoder answers, it answers what serde does.
    fn same_as_serde(h: &[u8]) {
        if let Some(f) = decode(h) {
            let s = decode_with_serde(h).unwrap_or_else(|e| {
                panic!(
                    "fast accepted what serde refuses ({e}): {:?}",
                    String::from_utf8_lossy(h)
                )
            });
            assert_eq!(
                (
                    f.code,
                    f.language,
                    f.version,
                    f.opaque,
                    f.flag,
                    &f.remark,
                    &f.ext_fields
                ),
                (
                    s.code,
                    s.language,
                    s.version,
                    s.opaque,
                    s.flag,
                    &s.remark,
                    &s.ext_fields
                ),
                "{:?}",
                String::from_utf8_lossy(h)
            );
        }
    }

    #[test]
    fn runs_on_both_sides_of_the_short_loop_and_integers_at_the_limits_agree_with_serde() {
        // Strings of every length around the 16-byte byte loop, with a control character, a
        // non-ASCII character, an escape or nothing at each position.
        for len in 0..40 {
            for at in 0..len {
                for odd in [r"\u0001", r"\u00e9", "é", r#"\""#, r"\u0007", r"\u0000"] {
                    let mut v = "x".repeat(len);
                    v.replace_range(at..=at, odd);
                    let h = format!(
                        r#"{{"code":1,"extFields":{{"k":"{v}","{v}x":"1"}},"remark":"{v}"}}"#
                    );
                    // Keys with escapes are left to serde; values and remarks take the fast path.
                    let plain_keys =
                        format!(r#"{{"code":1,"extFields":{{"k":"{v}"}},"remark":"{v}"}}"#);
                    assert!(decode(plain_keys.as_bytes()).is_some(), "{plain_keys}");
                    same_as_serde(plain_keys.as_bytes());
                    same_as_serde(h.as_bytes());
                }
                // A raw control character: serde refuses, so must the fast path.
                let mut v = "x".repeat(len).into_bytes();
                v[at] = 0x01;
                let mut h = br#"{"code":1,"extFields":{"k":""#.to_vec();
                h.extend_from_slice(&v);
                h.extend_from_slice(br#""}}"#);
                assert!(decode(&h).is_none(), "{len} {at}");
            }
        }
        for n in [
            "0",
            "-0",
            "7",
            "-7",
            "2147483647",
            "-2147483648",
            "2147483648",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "-9223372036854775809",
            "01",
            "-01",
            "1.0",
            "1e3",
            "-",
            "99999999999999999999",
        ] {
            same_as_serde(format!(r#"{{"code":{n},"opaque":{n}}}"#).as_bytes());
        }
        assert_eq!(decode(br#"{"code":-2147483648}"#).unwrap().code, i32::MIN);
        assert!(decode(br#"{"code":9223372036854775808}"#).is_none());
    }

    #[test]
    fn the_common_shape_takes_the_fast_path_and_agrees_with_serde() {
        let send = br#"{"code":310,"flag":0,"language":"JAVA","opaque":7,"version":401,"serializeTypeCurrentRPC":"JSON","extFields":{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"3","f":"0","g":"1700000000000","h":"0","i":"TAGS\u0001TagA\u0002UNIQ_KEY\u0001AB\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"}}"#;
        let f = decode(send).expect("the common shape takes the fast path");
        assert_eq!(
            f.ext_fields.get("i"),
            Some("TAGS\u{1}TagA\u{2}UNIQ_KEY\u{1}AB\u{2}WAIT\u{1}true\u{2}")
        );
        assert_eq!((f.code, f.opaque, f.ext_fields.len()), (310, 7, 12));
        same_as_serde(send);
        // The encoder's own output takes the fast path too.
        let resp = RemotingCommand::new_request(10)
            .with_opaque(-5)
            .with_remark("a \"quoted\"\\ remark\n\u{1}é/")
            .with_ext("k", "v\u{2}");
        let mut out = BytesMut::new();
        encode(&resp, &mut out);
        assert!(decode(&out).is_some());
        same_as_serde(&out);
    }

    #[test]
    fn anything_unusual_is_left_to_serde() {
        for h in [
            &br#"{"code":"105"}"#[..],
            br#"{"code":1.0}"#,
            br#"{"code":01}"#,
            br#"{"code":1,"code":2}"#,
            br#"{"code":1,"extFields":{"q":3}}"#,
            br#"{"code":1,"vendor":{"x":[1]}}"#,
            br#"{"code":1,"remark":"\ud83d\ude00"}"#,
            br#"{"code":1,"extFields":{"k\"":"v"}}"#,
            br#"{"code":1} x"#,
            br#"{"opaque":1}"#,
            b"{\"code\":1,\"remark\":\"a\x01\"}",
        ] {
            assert!(decode(h).is_none(), "{:?}", String::from_utf8_lossy(h));
        }
    }

    proptest! {
        #[test]
        fn fast_and_serde_agree_on_generated_headers(
            code in any::<i64>(),
            opaque in -3i64..3,
            keys in proptest::collection::vec("[a-c\\\\\"]{0,3}", 0..5),
            values in proptest::collection::vec("[a\\\\\"\u{1}\u{e9}/]{0,4}", 0..5),
            remark in proptest::option::of("[a-z\"\\\\]{0,5}"),
            ws in "[ \t\n]{0,2}",
        ) {
            let esc = |t: &str| serde_json::to_string(t).unwrap();
            let ext: Vec<String> = keys
                .iter()
                .zip(values.iter())
                .map(|(k, v)| format!("{}:{ws}{}", esc(k), esc(v)))
                .collect();
            let h = format!(
                "{ws}{{\"code\":{code},{ws}\"opaque\":{opaque},\"remark\":{},\"extFields\":{{{}}}}}{ws}",
                remark.as_deref().map_or("null".to_string(), esc),
                ext.join(",")
            );
            same_as_serde(h.as_bytes());
        }

        #[test]
        fn never_panics_and_agrees_on_arbitrary_bytes(
            h in proptest::collection::vec(any::<u8>(), 0..64)
        ) {
            same_as_serde(&h);
        }

        #[test]
        fn agrees_on_mutated_real_headers(at in 0usize..200, byte in any::<u8>()) {
            let mut h = br#"{"code":310,"flag":0,"language":"JAVA","opaque":7,"remark":null,"extFields":{"a":"PG","i":"T\u0001x\u0002"}}"#.to_vec();
            let i = at % h.len();
            h[i] = byte;
            same_as_serde(&h);
        }
    }
}
