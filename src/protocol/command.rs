//! `RemotingCommand`: one request or response of RocketMQ's remoting protocol, decoded.
//!
//! Owns: the in-memory form of a frame (Apache's `RemotingCommand`) — code, sender language and
//! version, the request id (`opaque`), the flag bits, the optional remark, the `extFields` ("custom
//! header") and the body — plus the typed accessors every request handler uses to read `extFields`.
//!
//! Invariants:
//! * [`ExtFields`] never holds the same key twice. On the wire Java keeps them in a `HashMap`, so
//!   a repeated key means "last one wins"; every way into an `ExtFields` (insert, collect,
//!   decode) applies that rule, so a lookup can stop at the first match.
//! * `extFields` values are strings, as Java sends them (`"true"`, `"42"`). Decoders turn JSON
//!   numbers and booleans into that same text, so the typed getters have one input form.
//! * The body is a [`Bytes`] slice of the received frame: decoding never copies it. A command
//!   built to be sent may carry further body bytes in `body_parts` (a PULL's records: slices of
//!   the mapped CommitLog), sent after `body` as they lie; a decoded command has none.
//! * A getter error names the field and quotes (a bounded prefix of) the offending text, so the
//!   remark sent back tells the client exactly what was wrong.

use bytes::Bytes;
use thiserror::Error;

/// Flag bit 0: the command is a response.
pub const RESPONSE_FLAG: i32 = 0x1;
/// Flag bit 1: the request is oneway — the sender expects no response.
pub const ONEWAY_FLAG: i32 = 0x2;

/// `version` ActorMQ puts in the commands it builds: `MQVersion.V4_9_4` (401), the release line
/// `tests/conformance` compares this protocol against. Clients do not branch on a broker's version;
/// name servers do branch on a *request's* version (≥ 401 ⇒ standard JSON), so claiming 4.9.4 gets
/// the modern encodings from peers.
pub const OUR_VERSION: i32 = 401;

/// How the header of a frame is encoded (top byte of the frame's second word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// `0`: the header is a JSON object. What Java uses by default.
    #[default]
    Json,
    /// `1`: RocketMQ's own compact binary header (`rocketmq_header.rs`).
    RocketMq,
}

impl SerializeType {
    /// Wire value (`0` or `1`).
    pub const fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// Parses the wire value; `None` for anything but 0 and 1.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }
}

/// The sender's implementation language (`LanguageCode`). Informational only: nothing in the
/// protocol branches on it, so an unknown value must never make a frame invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LanguageCode {
    #[default]
    Java,
    Cpp,
    DotNet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    Rust,
    NodeJs,
    /// A binary header carried a byte no known language uses; kept so re-encoding is lossless.
    /// JSON has no name for it and writes `"OTHER"`.
    Unknown(u8),
}

/// Known languages by wire byte (the index) and JSON name.
const LANGUAGES: [(LanguageCode, &str); 14] = [
    (LanguageCode::Java, "JAVA"),
    (LanguageCode::Cpp, "CPP"),
    (LanguageCode::DotNet, "DOTNET"),
    (LanguageCode::Python, "PYTHON"),
    (LanguageCode::Delphi, "DELPHI"),
    (LanguageCode::Erlang, "ERLANG"),
    (LanguageCode::Ruby, "RUBY"),
    (LanguageCode::Other, "OTHER"),
    (LanguageCode::Http, "HTTP"),
    (LanguageCode::Go, "GO"),
    (LanguageCode::Php, "PHP"),
    (LanguageCode::Oms, "OMS"),
    (LanguageCode::Rust, "RUST"),
    (LanguageCode::NodeJs, "NODE_JS"),
];

impl LanguageCode {
    /// The language ActorMQ declares in the commands it builds. `JAVA`, not `RUST`: every client
    /// ever written knows `JAVA`, while older Java clients have no `RUST` constant.
    pub const OURS: LanguageCode = LanguageCode::Java;

    /// Byte used by the ROCKETMQ binary header.
    pub fn code(self) -> u8 {
        match self {
            LanguageCode::Unknown(code) => code,
            known => LANGUAGES
                .iter()
                .position(|(lang, _)| *lang == known)
                .and_then(|i| u8::try_from(i).ok())
                .unwrap_or(7),
        }
    }

    /// Inverse of [`code`](Self::code); unknown bytes are kept as [`LanguageCode::Unknown`].
    pub fn from_code(code: u8) -> Self {
        LANGUAGES
            .get(usize::from(code))
            .map_or(LanguageCode::Unknown(code), |(lang, _)| *lang)
    }

    /// Name used in JSON headers.
    pub fn name(self) -> &'static str {
        LANGUAGES
            .iter()
            .find(|(lang, _)| *lang == self)
            .map_or("OTHER", |(_, name)| name)
    }

    /// Parses a JSON name, ignoring ASCII case; a name we do not know becomes
    /// [`LanguageCode::Other`] rather than an error (the field is informational).
    pub fn from_name(name: &str) -> Self {
        let name = name.trim();
        LANGUAGES
            .iter()
            .find(|(_, known)| known.eq_ignore_ascii_case(name))
            .map_or(LanguageCode::Other, |(lang, _)| *lang)
    }
}

/// A typed header field was absent or unparsable. Becomes a response remark, so the text says
/// which field and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    #[error("missing required field {field}")]
    Missing { field: String },
    #[error("field {field}: expected {expected}, got {value:?}")]
    Invalid {
        field: String,
        expected: &'static str,
        value: String,
    },
}

/// Longest prefix of an offending value quoted in a [`HeaderError`]: a remark must stay small
/// even when a hostile client sends a megabyte of garbage in one field.
const MAX_QUOTED_VALUE: usize = 64;

impl HeaderError {
    pub fn missing(field: &str) -> Self {
        HeaderError::Missing {
            field: field.to_owned(),
        }
    }

    pub fn invalid(field: &str, expected: &'static str, value: &str) -> Self {
        let mut end = value.len().min(MAX_QUOTED_VALUE);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        let mut quoted = value.get(..end).unwrap_or_default().to_owned();
        if end < value.len() {
            quoted.push('…');
        }
        HeaderError::Invalid {
            field: field.to_owned(),
            expected,
            value: quoted,
        }
    }

    /// The field name the error reports.
    pub fn field(&self) -> &str {
        match self {
            HeaderError::Missing { field } | HeaderError::Invalid { field, .. } => field,
        }
    }

    /// Same error, reported under another field name (e.g. `"e (queueId)"` for a V2 header).
    pub fn with_field(self, label: String) -> Self {
        match self {
            HeaderError::Missing { .. } => HeaderError::Missing { field: label },
            HeaderError::Invalid {
                expected, value, ..
            } => HeaderError::Invalid {
                field: label,
                expected,
                value,
            },
        }
    }
}

/// Parses a decimal `i32` the way Java's `Integer.parseInt` would, plus surrounding whitespace.
pub fn parse_i32(field: &str, raw: &str) -> Result<i32, HeaderError> {
    plain_decimal(raw)
        .and_then(|v| i32::try_from(v).ok())
        .or_else(|| raw.trim().parse::<i32>().ok())
        .ok_or_else(|| HeaderError::invalid(field, "a 32-bit integer", raw))
}

/// Parses a decimal `i64` (Java `Long.parseLong`, plus surrounding whitespace).
pub fn parse_i64(field: &str, raw: &str) -> Result<i64, HeaderError> {
    plain_decimal(raw)
        .or_else(|| raw.trim().parse::<i64>().ok())
        .ok_or_else(|| HeaderError::invalid(field, "a 64-bit integer", raw))
}

/// The common spelling of a header number — an optional `-` and 1 to 18 ASCII digits, nothing
/// else — read in one pass (a SEND carries seven numbers). `None` sends anything else (a `+`,
/// whitespace, more digits, garbage) to `str::parse`, which decides.
fn plain_decimal(raw: &str) -> Option<i64> {
    let (neg, digits) = match raw.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        // 18 digits cannot overflow i64.
        v = v * 10 + i64::from(d);
    }
    Some(if neg { -v } else { v })
}

/// Parses a boolean: `true`/`false` in any case (Python sends `True`), or `1`/`0`.
/// Java's `Boolean.parseBoolean` silently reads anything else as `false`; we reject it instead,
/// because a typo in a flag like `unitMode` should be visible, not quietly change behaviour.
pub fn parse_bool(field: &str, raw: &str) -> Result<bool, HeaderError> {
    let t = raw.trim();
    if t.eq_ignore_ascii_case("true") || t == "1" {
        Ok(true)
    } else if t.eq_ignore_ascii_case("false") || t == "0" {
        Ok(false)
    } else {
        Err(HeaderError::invalid(field, "true or false", raw))
    }
}

/// The `extFields` of a command: string keys to string values, in arrival order, no duplicates.
///
/// Every key and value lives in one text buffer and the entries are ranges into it, so a header
/// costs two allocations however many fields it has (a SEND carries 14; a `String` each way was a
/// quarter of a broker's time per message). Replacing or removing a field leaves its old text in
/// the buffer until the `ExtFields` is dropped; that is bounded by what the holder inserts.
#[derive(Clone, Default)]
pub struct ExtFields {
    text: String,
    entries: Vec<Entry>,
}

/// One field: its key's [`tag`] and where key and value are in the text (the value starts where
/// the key ends).
#[derive(Clone, Copy)]
struct Entry {
    tag: u64,
    key: u32,
    value: u32,
    end: u32,
}

/// A key's length and first seven bytes in one word: equal tags mean equal keys for keys of up
/// to seven bytes (every SEND V2 key is one letter), so a lookup compares words, not strings; a
/// longer key compares its bytes only when the tags match.
fn tag(key: &str) -> u64 {
    let b = key.as_bytes();
    let head = b
        .iter()
        .take(7)
        .fold(0u64, |acc, &c| (acc << 8) | u64::from(c));
    head | ((b.len().min(255) as u64) << 56)
}

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        ExtFields {
            text: String::with_capacity(n * 16),
            entries: Vec::with_capacity(n),
        }
    }

    /// With room for `n` fields and `text` bytes of keys and values.
    pub fn with_capacity_and_text(n: usize, text: usize) -> Self {
        ExtFields {
            text: String::with_capacity(text),
            entries: Vec::with_capacity(n),
        }
    }

    fn key_of(&self, e: &Entry) -> &str {
        self.text
            .get(e.key as usize..e.value as usize)
            .unwrap_or_default()
    }

    fn value_of(&self, e: &Entry) -> &str {
        self.text
            .get(e.value as usize..e.end as usize)
            .unwrap_or_default()
    }

    fn is_key(&self, e: &Entry, key: &str, key_tag: u64) -> bool {
        e.tag == key_tag && (key.len() <= 7 || self.key_of(e) == key)
    }

    fn position(&self, key: &str) -> Option<usize> {
        let t = tag(key);
        self.entries.iter().position(|e| self.is_key(e, key, t))
    }

    /// Appends `key` and the text `write` appends, returning the entry for the caller to place.
    fn append_with(&mut self, key: &str, write: impl FnOnce(&mut String)) -> Entry {
        let k = self.text.len();
        self.text.push_str(key);
        let v = self.text.len();
        write(&mut self.text);
        Entry {
            tag: tag(key),
            key: offset(k),
            value: offset(v),
            end: offset(self.text.len()),
        }
    }

    /// Places `e` over an existing entry for the same key, else at the end.
    fn place(&mut self, at: Option<usize>, e: Entry) {
        match at.and_then(|i| self.entries.get_mut(i)) {
            Some(slot) => *slot = e,
            None => self.entries.push(e),
        }
    }

    /// Sets `key` to `value`, replacing (in place) an existing entry with the same key.
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        let at = self.position(key);
        let e = self.append_with(key, |t| t.push_str(value));
        self.place(at, e);
    }

    /// Like [`insert`](Self::insert) with the value written by `fmt::Display` straight into the
    /// buffer (numbers in a response header), no intermediate `String`.
    pub fn insert_display(&mut self, key: &str, value: impl std::fmt::Display) {
        use std::fmt::Write as _;
        self.insert_with(key, |t| {
            let _ = write!(t, "{value}");
        });
    }

    /// Inserts (or replaces) `key` with the text `write` appends — no intermediate `String`.
    pub fn insert_with(&mut self, key: &str, write: impl FnOnce(&mut String)) {
        let at = self.position(key);
        let e = self.append_with(key, write);
        self.place(at, e);
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let t = tag(key);
        self.entries
            .iter()
            .find(|e| self.is_key(e, key, t))
            .map(|e| self.value_of(e))
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key)?;
        let e = self.entries.remove(i);
        Some(self.value_of(&e).to_owned())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|e| (self.key_of(e), self.value_of(e)))
    }

    /// Builds from raw wire entries in O(n), applying "last occurrence wins" for repeated keys
    /// (each kept at its last position).
    pub fn from_wire(entries: Vec<(String, String)>) -> Self {
        let text = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
        let mut ext = ExtFields::with_capacity_and_text(entries.len(), text);
        for (k, v) in &entries {
            ext.push_wire_with(k, |t| t.push_str(v));
        }
        ext.finish_wire();
        ext
    }

    /// Decoders: append one wire entry; call [`finish_wire`](Self::finish_wire) after the last.
    /// `write` appends the value's text to the buffer it is given (e.g. while unescaping).
    pub fn push_wire_with(&mut self, key: &str, write: impl FnOnce(&mut String)) {
        let e = self.append_with(key, write);
        self.entries.push(e);
    }

    /// Like [`push_wire_with`](Self::push_wire_with), but the entry becomes the `index`th (the
    /// last, past the end): a header whose fields are not all known at once (a SEND's reply,
    /// before and after its append) is written in any order and read in field order.
    pub fn push_wire_at(&mut self, index: usize, key: &str, write: impl FnOnce(&mut String)) {
        let e = self.append_with(key, write);
        self.entries.insert(index.min(self.entries.len()), e);
    }

    /// Applies "last occurrence wins" to entries pushed with
    /// [`push_wire_with`](Self::push_wire_with).
    pub fn finish_wire(&mut self) {
        self.dedup_keep_last();
    }

    /// Drops earlier occurrences of repeated keys. Small headers (every real one) are checked
    /// pairwise on tags; large ones through a hash set, so a hostile header with a million fields
    /// is not quadratic.
    fn dedup_keep_last(&mut self) {
        const PAIRWISE_MAX: usize = 32;
        let n = self.entries.len();
        // A SEND V2 header's keys are single letters: a bit per byte value settles it in one
        // pass (its tag holds the whole key, so equal bits mean equal keys).
        let mut one_byte = [0u64; 4];
        let distinct_single = self.entries.iter().all(|e| {
            let b = (e.tag & 0xFF) as u8;
            let (word, bit) = (usize::from(b >> 6), 1u64 << (b & 63));
            let fresh = e.tag >> 56 == 1 && one_byte[word] & bit == 0;
            one_byte[word] |= bit;
            fresh
        });
        if distinct_single {
            return;
        }
        // Distinct tags mean distinct keys, so small headers (a SEND's 14 fields) first compare
        // tags alone — plain word compares; keys are compared only where two tags match.
        if n <= PAIRWISE_MAX
            && self
                .entries
                .iter()
                .enumerate()
                .all(|(i, a)| self.entries[i + 1..].iter().all(|b| b.tag != a.tag))
        {
            return;
        }
        let has_dups = if n <= PAIRWISE_MAX {
            (0..n).any(|i| {
                let a = self.entries[i];
                let k = self.key_of(&a);
                self.entries[i + 1..]
                    .iter()
                    .any(|b| self.is_key(b, k, a.tag))
            })
        } else {
            let mut seen = std::collections::HashSet::with_capacity(n);
            !self.entries.iter().all(|e| seen.insert(self.key_of(e)))
        };
        if !has_dups {
            return;
        }
        let mut seen = std::collections::HashSet::with_capacity(n);
        let mut kept = Vec::with_capacity(n);
        for e in self.entries.iter().rev() {
            if seen.insert(self.key_of(e)) {
                kept.push(*e);
            }
        }
        kept.reverse();
        self.entries = kept;
    }
}

/// A text offset. Frames are capped at 16 MiB, so a header's text always fits `u32`; anything
/// larger would be a bug upstream, and saturating keeps the ranges checked instead of wrapping.
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl std::fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut ext = ExtFields::new();
        for (k, v) in iter {
            ext.insert(k, v);
        }
        ext
    }
}

/// One remoting request or response (Java `RemotingCommand`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code ([`request_code`](super::codes::request_code)) or response code
    /// ([`response_code`](super::codes::response_code)).
    pub code: i32,
    pub language: LanguageCode,
    /// Sender's `MQVersion` ordinal.
    pub version: i32,
    /// Request id; a response carries its request's value.
    pub opaque: i32,
    /// [`RESPONSE_FLAG`] | [`ONEWAY_FLAG`] bits.
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    pub body: Bytes,
    /// More of the body, after `body`: on the wire the body is `body` then each part, in order.
    /// A server's connection writes the parts from where they lie (`writev`), without copying
    /// them; empty (no allocation) for every decoded command and most built ones.
    pub body_parts: Vec<Bytes>,
    /// How this command's header travels (decoded: how it arrived).
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request with `code`, opaque 0 (set it with [`with_opaque`](Self::with_opaque)), no
    /// fields, JSON header.
    pub fn new_request(code: i32) -> Self {
        RemotingCommand {
            code,
            language: LanguageCode::OURS,
            version: OUR_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            body_parts: Vec::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// The response to `req`: echoes its `opaque` (the client matches responses by it), sets the
    /// response bit and answers in the request's serialize type — the Java server would answer in
    /// its own configured type, but a client can always read the type it wrote itself.
    pub fn response_to(req: &RemotingCommand, code: i32, remark: Option<String>) -> Self {
        RemotingCommand {
            code,
            language: LanguageCode::OURS,
            version: OUR_VERSION,
            opaque: req.opaque,
            flag: RESPONSE_FLAG,
            remark,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            body_parts: Vec::new(),
            serialize_type: req.serialize_type,
        }
    }

    pub fn with_opaque(mut self, opaque: i32) -> Self {
        self.opaque = opaque;
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Body bytes sent after `body`, each from where it lies (see `body_parts`).
    pub fn with_body_parts(mut self, parts: Vec<Bytes>) -> Self {
        self.body_parts = parts;
        self
    }

    /// The body's length on the wire: `body` and every part.
    pub fn body_len(&self) -> usize {
        self.body.len() + self.body_parts.iter().map(Bytes::len).sum::<usize>()
    }

    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    pub fn with_ext_fields(mut self, ext: ExtFields) -> Self {
        self.ext_fields = ext;
        self
    }

    pub fn with_ext(mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.ext_fields.insert(key, value);
        self
    }

    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Marks a request oneway: the receiver sends nothing back.
    pub fn with_oneway(mut self) -> Self {
        self.flag |= ONEWAY_FLAG;
        self
    }

    pub fn is_response(&self) -> bool {
        self.flag & RESPONSE_FLAG != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & ONEWAY_FLAG != 0
    }

    /// Raw `extFields` value.
    pub fn ext(&self, name: &str) -> Option<&str> {
        self.ext_fields.get(name)
    }

    pub fn require_str(&self, name: &str) -> Result<&str, HeaderError> {
        self.ext(name).ok_or_else(|| HeaderError::missing(name))
    }

    pub fn ext_i32(&self, name: &str) -> Result<Option<i32>, HeaderError> {
        self.ext(name).map(|raw| parse_i32(name, raw)).transpose()
    }

    pub fn ext_i64(&self, name: &str) -> Result<Option<i64>, HeaderError> {
        self.ext(name).map(|raw| parse_i64(name, raw)).transpose()
    }

    pub fn ext_bool(&self, name: &str) -> Result<Option<bool>, HeaderError> {
        self.ext(name).map(|raw| parse_bool(name, raw)).transpose()
    }

    pub fn require_i32(&self, name: &str) -> Result<i32, HeaderError> {
        parse_i32(name, self.require_str(name)?)
    }

    pub fn require_i64(&self, name: &str) -> Result<i64, HeaderError> {
        parse_i64(name, self.require_str(name)?)
    }

    pub fn require_bool(&self, name: &str) -> Result<bool, HeaderError> {
        parse_bool(name, self.require_str(name)?)
    }
}

/// The header fields of a command (everything but body and serialize type), as every header
/// codec (`json_header`, `json_fast`, `rocketmq_header`) decodes them.
#[derive(Debug)]
pub(crate) struct HeaderParts {
    pub code: i32,
    pub language: LanguageCode,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_numbers_read_as_str_parse_reads_them() {
        for raw in [
            "0",
            "-0",
            "7",
            "-7",
            "+7",
            " 7",
            "7 ",
            "007",
            "",
            "-",
            "+",
            "--1",
            "1e3",
            "1.0",
            "x",
            "2147483647",
            "2147483648",
            "-2147483648",
            "-2147483649",
            "999999999999999999",
            "-999999999999999999",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "1234567890123456789",
            "١",
        ] {
            assert_eq!(
                parse_i32("f", raw).ok(),
                raw.trim().parse::<i32>().ok(),
                "{raw:?}"
            );
            assert_eq!(
                parse_i64("f", raw).ok(),
                raw.trim().parse::<i64>().ok(),
                "{raw:?}"
            );
        }
    }

    fn cmd_with(fields: &[(&str, &str)]) -> RemotingCommand {
        let ext: ExtFields = fields.iter().copied().collect();
        RemotingCommand::new_request(10).with_ext_fields(ext)
    }

    #[test]
    fn response_echoes_opaque_sets_response_bit_and_keeps_serialize_type() {
        let req = RemotingCommand::new_request(34)
            .with_opaque(846)
            .with_serialize_type(SerializeType::RocketMq);
        assert!(!req.is_response());
        let resp = RemotingCommand::response_to(&req, 17, Some("no route".into()));
        assert_eq!(resp.opaque, 846);
        assert_eq!(resp.flag, RESPONSE_FLAG);
        assert!(resp.is_response());
        assert!(!resp.is_oneway());
        assert_eq!(resp.serialize_type, SerializeType::RocketMq);
        assert_eq!(resp.remark.as_deref(), Some("no route"));
        assert_eq!(resp.code, 17);
    }

    #[test]
    fn oneway_flag_is_bit_one() {
        let req = RemotingCommand::new_request(15).with_oneway();
        assert_eq!(req.flag, 2);
        assert!(req.is_oneway());
        assert!(!req.is_response());
    }

    #[test]
    fn typed_getters_parse_strings_and_name_the_field() {
        let c = cmd_with(&[
            ("queueId", "3"),
            ("queueOffset", "-1"),
            ("unitMode", "True"),
            ("bad", "abc"),
        ]);
        assert_eq!(c.ext_i32("queueId"), Ok(Some(3)));
        assert_eq!(c.ext_i64("queueOffset"), Ok(Some(-1)));
        assert_eq!(c.ext_bool("unitMode"), Ok(Some(true)));
        assert_eq!(c.ext_i32("absent"), Ok(None));
        assert_eq!(c.require_i32("queueId"), Ok(3));
        let err = c.require_i32("bad").unwrap_err();
        assert_eq!(
            err.to_string(),
            "field bad: expected a 32-bit integer, got \"abc\""
        );
        assert_eq!(
            c.require_i64("absent").unwrap_err().to_string(),
            "missing required field absent"
        );
        assert!(c.require_bool("bad").is_err());
    }

    #[test]
    fn i32_overflow_is_an_error_not_a_wrap() {
        let c = cmd_with(&[("queueId", "4294967296")]);
        assert!(c.ext_i32("queueId").is_err());
        assert_eq!(c.ext_i64("queueId"), Ok(Some(4_294_967_296)));
    }

    #[test]
    fn error_quotes_only_a_bounded_prefix() {
        let long = "x".repeat(10_000);
        let err = HeaderError::invalid("topic", "a topic", &long);
        assert!(err.to_string().len() < 200);
        // Never cuts inside a multi-byte char.
        let wide = "é".repeat(100);
        let err = HeaderError::invalid("topic", "a topic", &wide);
        assert!(err.to_string().contains('…'));
    }

    #[test]
    fn ext_fields_insert_replaces_and_keeps_position() {
        let mut ext = ExtFields::new();
        ext.insert("a", "1");
        ext.insert("b", "2");
        ext.insert("a", "3");
        assert_eq!(ext.iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
        assert_eq!(ext.remove("a").as_deref(), Some("3"));
        assert_eq!(ext.len(), 1);
    }

    #[test]
    fn from_wire_keeps_last_occurrence_small_and_large() {
        let ext = ExtFields::from_wire(vec![
            ("a".into(), "1".into()),
            ("b".into(), "2".into()),
            ("a".into(), "3".into()),
        ]);
        assert_eq!(ext.iter().collect::<Vec<_>>(), vec![("b", "2"), ("a", "3")]);

        let mut many: Vec<(String, String)> =
            (0..100).map(|i| (format!("k{i}"), i.to_string())).collect();
        many.push(("k5".into(), "last".into()));
        let ext = ExtFields::from_wire(many);
        assert_eq!(ext.len(), 100);
        assert_eq!(ext.get("k5"), Some("last"));
    }

    /// One-byte keys (a SEND V2 header's) are told apart by their byte, in every 64-bit word
    /// of the bit set; a longer key among them takes the general path.
    #[test]
    fn one_byte_keys_dedup_like_any_other() {
        let wire = |keys: &[&str]| {
            ExtFields::from_wire(
                keys.iter()
                    .map(|k| (k.to_string(), k.to_string()))
                    .collect(),
            )
        };
        let keys: Vec<String> = ('a'..='n')
            .chain(['\u{1}', '@', '~'])
            .map(String::from)
            .collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        assert_eq!(wire(&keys).len(), keys.len());
        for dup in ["a", "\u{1}", "@", "~"] {
            let mut with = keys.clone();
            with.push(dup);
            let ext = wire(&with);
            assert_eq!(ext.len(), keys.len(), "{dup:?}");
            assert_eq!(ext.iter().last(), Some((dup, dup)));
        }
        assert_eq!(
            wire(&["a", "ab", "a"]).iter().collect::<Vec<_>>(),
            [("ab", "ab"), ("a", "a")]
        );
    }

    #[test]
    fn push_wire_at_places_an_entry_among_the_others() {
        let mut ext = ExtFields::new();
        ext.push_wire_with("b", |t| t.push('2'));
        ext.push_wire_with("d", |t| t.push('4'));
        ext.push_wire_at(0, "a", |t| t.push('1'));
        ext.push_wire_at(2, "c", |t| t.push('3'));
        ext.push_wire_at(99, "e", |t| t.push('5'));
        let got: Vec<_> = ext.iter().collect();
        assert_eq!(
            got,
            [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "5")]
        );
        assert_eq!(ext.get("c"), Some("3"));
    }

    #[test]
    fn language_codes_round_trip() {
        for code in 0..=255u8 {
            assert_eq!(LanguageCode::from_code(code).code(), code);
        }
        assert_eq!(LanguageCode::from_name("NODE_JS"), LanguageCode::NodeJs);
        assert_eq!(LanguageCode::from_name("rust"), LanguageCode::Rust);
        assert_eq!(LanguageCode::from_name("COBOL"), LanguageCode::Other);
        assert_eq!(LanguageCode::Go.code(), 9);
        assert_eq!(LanguageCode::Rust.code(), 12);
        assert_eq!(LanguageCode::Unknown(99).name(), "OTHER");
    }
}
