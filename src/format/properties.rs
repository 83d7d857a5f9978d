//! The message properties string, exactly as RocketMQ stores it in a CommitLog record and sends
//! it in the SEND request header.
//!
//! Owns: the separators, the well-known key strings ([`keys`]), and the parser rules.
//!
//! Format: every entry is `name + '\u{1}' + value + '\u{2}'`. Parser rules (they must match the
//! Java broker's, because a key that Java ignores must be ignored here too, or dispatch/index
//! would differ between the two brokers on the same files):
//! * split on char 2; a missing trailing separator is tolerated;
//! * a segment is used only if its first char 1 is neither its first nor its last char — so
//!   empty names and **empty values are silently dropped** (this also implies the Java rule
//!   "segment ≥ 3 chars");
//! * the value is everything after the first char 1 (it may contain more char 1s);
//! * on duplicate names the last one wins.
//!
//! Invariant of the writers here ([`encode`], [`set`], [`remove`]): their output re-parses to
//! exactly the intended map, provided names contain neither separator and values contain no
//! char 2 (see [`is_valid_entry`]); like Java, nothing is escaped. They keep the order they are
//! given; the order 4.9.4's broker writes a map in (`HashMap` iteration) is
//! [`super::java_order`]'s.

use std::collections::HashMap;

/// Between a name and its value (Java `NAME_VALUE_SEPARATOR`).
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// After every entry (Java `PROPERTY_SEPARATOR`).
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// Joins several user keys inside the `KEYS` value (Java `KEY_SEPARATOR`).
pub const KEY_SEPARATOR: char = ' ';
/// The stored length is a signed 16-bit integer, so the UTF-8 string may not exceed this.
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// Well-known property names (Apache's `MessageConst`). Constants are named after the stored
/// string; the Java constant name is given as a doc alias where it differs.
pub mod keys {
    /// User keys, space separated; each one is indexed.
    pub const KEYS: &str = "KEYS";
    /// The tag; its Java hash is the ConsumeQueue tagsCode.
    pub const TAGS: &str = "TAGS";
    /// "true"/"false"; absent means true (wait for flush / replica).
    #[doc(alias = "WAIT_STORE_MSG_OK")]
    pub const WAIT: &str = "WAIT";
    /// Delay level (int).
    #[doc(alias = "DELAY_TIME_LEVEL")]
    pub const DELAY: &str = "DELAY";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// Original topic of a schedule / half / timer message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Original queue id of a schedule / half / timer message.
    #[doc(alias = "REAL_QUEUE_ID")]
    pub const REAL_QID: &str = "REAL_QID";
    /// "true" on transactional half messages.
    #[doc(alias = "TRANSACTION_PREPARED")]
    pub const TRAN_MSG: &str = "TRAN_MSG";
    #[doc(alias = "PRODUCER_GROUP")]
    pub const PGROUP: &str = "PGROUP";
    /// Set client-side on pulled messages.
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Set client-side on pulled messages.
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    /// Client-generated unique id; indexed.
    #[doc(alias = "UNIQ_CLIENT_MESSAGE_ID_KEYIDX")]
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    #[doc(alias = "CONSUME_START_TIMESTAMP")]
    pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
    /// Also returned as a SEND response extField.
    pub const MSG_REGION: &str = "MSG_REGION";
    /// Also returned as a SEND response extField.
    #[doc(alias = "TRACE_SWITCH")]
    pub const TRACE_ON: &str = "TRACE_ON";
    /// The broker adds its cluster name on every SEND.
    pub const CLUSTER: &str = "CLUSTER";
    pub const TRANSACTION_ID: &str = "__transactionId__";
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    pub const BUYER_ID: &str = "BUYER_ID";
    pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
    pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
    pub const MQ2_FLAG: &str = "MQ2_FLAG";
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    pub const TTL: &str = "TTL";
    pub const ARRIVE_TIME: &str = "ARRIVE_TIME";
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    pub const MSG_TYPE: &str = "MSG_TYPE";
    pub const INNER_NUM: &str = "INNER_NUM";
    pub const INNER_BASE: &str = "INNER_BASE";
    pub const DUP_INFO: &str = "DUP_INFO";
    pub const EXTEND_UNIQ_INFO: &str = "EXTEND_UNIQ_INFO";
    pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
    pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    /// 5.x delivery time of a timer message (epoch ms), read for the message type.
    pub const START_DELIVER_TIME: &str = "__STARTDELIVERTIME";
    /// 5.x optional whole-record CRC.
    pub const CRC32: &str = "__CRC32#";
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    /// Names starting with this are never persisted (5.x).
    pub const TRANSIENT_PREFIX: &str = "__RMQ.TRANSIENT.";
}

/// Splits one segment (between char 2s) into (name, value) if the parser would keep it.
#[inline]
fn split_entry(segment: &str) -> Option<(&str, &str)> {
    // Char 1 is ASCII, so its byte index is a char boundary and "last char" == "last byte".
    // A byte loop, not `str::find(char)`: segments are a few bytes, a searcher costs more.
    let sep = segment
        .bytes()
        .position(|b| b == NAME_VALUE_SEPARATOR as u8)?;
    if sep == 0 || sep + 1 >= segment.len() {
        return None; // empty name or empty value: dropped, as Java does
    }
    Some((&segment[..sep], &segment[sep + 1..]))
}

/// Every entry the parser keeps, in stored order, duplicates included (no allocation).
pub fn entries(props: &str) -> impl Iterator<Item = (&str, &str)> + '_ {
    props.split(PROPERTY_SEPARATOR).filter_map(split_entry)
}

/// Value of `key`, zero-allocation, with exactly the parser's rules (last duplicate wins).
pub fn find<'a>(props: &'a str, key: &str) -> Option<&'a str> {
    let k = key.as_bytes();
    // The parser never yields an empty name or one holding a separator, so such a key has no
    // value; for any other key, "this segment's name is `key`" is "the segment starts with `key`
    // followed by char 1", checked without looking for the segment's first char 1.
    if k.is_empty()
        || k.iter()
            .any(|&b| b == NAME_VALUE_SEPARATOR as u8 || b == PROPERTY_SEPARATOR as u8)
    {
        return None;
    }
    // Scanning from the end makes "last wins" a plain first match. Byte positions of the ASCII
    // separators are char boundaries, so the slicing below cannot fail; this runs several times
    // per message on the send and dispatch paths.
    let bytes = props.as_bytes();
    let mut end = bytes.len();
    loop {
        let start =
            memchr::memrchr(PROPERTY_SEPARATOR as u8, bytes.get(..end)?).map_or(0, |i| i + 1);
        let seg = bytes.get(start..end)?;
        // `> k.len() + 1`: an empty value is dropped by the parser.
        if seg.len() > k.len() + 1
            && seg.get(k.len()) == Some(&(NAME_VALUE_SEPARATOR as u8))
            && seg.get(..k.len()) == Some(k)
        {
            return props.get(start + k.len() + 1..end);
        }
        if start == 0 {
            return None;
        }
        end = start - 1;
    }
}

/// The property map in first-appearance order; a duplicate keeps its first position but takes
/// the last value (same lookups as Java's HashMap, deterministic order).
pub fn parse(props: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (k, v) in entries(props) {
        match index.get(k) {
            Some(&i) => v.clone_into(&mut out[i].1),
            None => {
                index.insert(k, out.len());
                out.push((k.to_owned(), v.to_owned()));
            }
        }
    }
    out
}

/// True if `name = value` survives an encode/parse round trip unchanged.
pub fn is_valid_entry(name: &str, value: &str) -> bool {
    !name.is_empty()
        && !value.is_empty()
        && !name.contains([NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR])
        && !value.contains(PROPERTY_SEPARATOR)
}

/// Appends one `name\1value\2` entry (no validation, like Java; see [`is_valid_entry`]).
#[inline]
pub fn push_entry(out: &mut String, name: &str, value: &str) {
    out.reserve(name.len() + value.len() + 2);
    out.push_str(name);
    out.push(NAME_VALUE_SEPARATOR);
    out.push_str(value);
    out.push(PROPERTY_SEPARATOR);
}

/// Serialises entries in the given order as Java's `MessageDecoder.messageProperties2String`
/// writes them (4.9.4): entries joined by char 2, no separator after the last one. Stored sizes
/// depend on it, and clients show them.
pub fn encode<K: AsRef<str>, V: AsRef<str>>(entries: &[(K, V)]) -> String {
    let cap = entries
        .iter()
        .map(|(k, v)| k.as_ref().len() + v.as_ref().len() + 2)
        .sum();
    let mut out = String::with_capacity(cap);
    for (k, v) in entries {
        push_entry(&mut out, k.as_ref(), v.as_ref());
    }
    finish(out)
}

/// Drops the separator [`push_entry`] left after the last entry (Java's form, see [`encode`]).
#[inline]
pub fn finish(mut out: String) -> String {
    if out.ends_with(PROPERTY_SEPARATOR) {
        out.pop();
    }
    out
}

/// `props` with `key` set to `value`: replaces the first occurrence in place (dropping later
/// duplicates), or appends; written in Java's form ([`encode`]). Segments the parser ignores are not carried over. An empty value
/// would be dropped by the parser anyway, so it removes the key.
pub fn set(props: &str, key: &str, value: &str) -> String {
    if value.is_empty() {
        return remove(props, key);
    }
    let mut out = String::with_capacity(props.len() + key.len() + value.len() + 2);
    let mut written = false;
    for (k, v) in entries(props) {
        if k != key {
            push_entry(&mut out, k, v);
        } else if !written {
            push_entry(&mut out, key, value);
            written = true;
        }
    }
    if !written {
        push_entry(&mut out, key, value);
    }
    finish(out)
}

/// `props` without any entry named `key` (used e.g. to drop `DELAY` when a scheduled message is
/// delivered), in Java's form ([`encode`]). Segments the parser ignores are not carried over.
pub fn remove(props: &str, key: &str) -> String {
    let mut out = String::with_capacity(props.len());
    for (k, v) in entries(props).filter(|(k, _)| *k != key) {
        push_entry(&mut out, k, v);
    }
    finish(out)
}

/// The individual user keys of a `KEYS` value: split on single spaces, empties skipped.
pub fn keys_of(value: &str) -> impl Iterator<Item = &str> {
    value.split(KEY_SEPARATOR).filter(|k| !k.is_empty())
}

/// Java `isWaitStoreMsgOK()`: absent ⇒ true, else `Boolean.parseBoolean` (case-insensitive
/// "true").
pub fn wait_store_msg_ok(props: &str) -> bool {
    find(props, keys::WAIT).is_none_or(|v| v.eq_ignore_ascii_case("true"))
}

/// The `DELAY` level, if present and a valid int.
pub fn delay_time_level(props: &str) -> Option<i32> {
    find(props, keys::DELAY).and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_string_is_empty_map() {
        assert!(parse("").is_empty());
        assert_eq!(find("", "A"), None);
        assert_eq!(entries("").count(), 0);
    }

    #[test]
    fn basic_and_missing_trailing_separator() {
        assert_eq!(parse("A\u{1}B\u{2}"), pairs(&[("A", "B")]));
        assert_eq!(parse("A\u{1}B"), pairs(&[("A", "B")]));
        assert_eq!(find("A\u{1}B", "A"), Some("B"));
        assert_eq!(find("K\u{1}v\u{2}TAGS\u{1}t\u{2}", keys::TAGS), Some("t"));
    }

    #[test]
    fn empty_values_and_names_are_dropped() {
        let p = "A\u{1}\u{2}\u{1}B\u{2}C\u{1}c\u{2}";
        assert_eq!(parse(p), pairs(&[("C", "c")]));
        assert_eq!(find(p, "A"), None);
        assert_eq!(find(p, ""), None);
        // Separator as the last char of an unterminated final segment: empty value.
        assert_eq!(find("C\u{1}c\u{2}A\u{1}", "A"), None);
    }

    #[test]
    fn segments_without_separator_or_too_short_are_dropped() {
        let p = "AB\u{2}\u{2}\u{2}X\u{2}\u{1}\u{2}K\u{1}v\u{2}";
        assert_eq!(parse(p), pairs(&[("K", "v")]));
        assert_eq!(find(p, "AB"), None);
    }

    #[test]
    fn value_keeps_further_name_value_separators() {
        let p = "A\u{1}B\u{1}C\u{2}";
        assert_eq!(find(p, "A"), Some("B\u{1}C"));
        assert_eq!(parse(p), pairs(&[("A", "B\u{1}C")]));
        // Value consisting only of a char 1 is non-empty, so it is kept.
        assert_eq!(find("A\u{1}\u{1}\u{2}", "A"), Some("\u{1}"));
    }

    #[test]
    fn duplicates_last_wins_first_position() {
        let p = "A\u{1}1\u{2}B\u{1}x\u{2}A\u{1}2\u{2}";
        assert_eq!(find(p, "A"), Some("2"));
        assert_eq!(parse(p), pairs(&[("A", "2"), ("B", "x")]));
        // A later *empty* duplicate is dropped, so the earlier value survives.
        assert_eq!(find("A\u{1}1\u{2}A\u{1}\u{2}", "A"), Some("1"));
    }

    #[test]
    fn unicode_names_and_values() {
        let p = encode(&[("键", "值😀"), ("K", "é")]);
        assert_eq!(find(&p, "键"), Some("值😀"));
        assert_eq!(parse(&p), pairs(&[("键", "值😀"), ("K", "é")]));
    }

    #[test]
    fn encode_matches_java_layout() {
        // 4.9.4 MessageDecoder.messageProperties2String: no separator after the last entry.
        let p = encode(&[(keys::TAGS, "TagA"), (keys::KEYS, "k1 k2")]);
        assert_eq!(p, "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2");
        assert_eq!(encode::<&str, &str>(&[]), "");
    }

    #[test]
    fn set_and_remove() {
        let p = "A\u{1}1\u{2}DELAY\u{1}3\u{2}B\u{1}2\u{2}DELAY\u{1}4\u{2}";
        assert_eq!(remove(p, keys::DELAY), "A\u{1}1\u{2}B\u{1}2");
        assert_eq!(
            set(p, keys::DELAY, "9"),
            "A\u{1}1\u{2}DELAY\u{1}9\u{2}B\u{1}2"
        );
        assert_eq!(
            set("A\u{1}1", keys::REAL_TOPIC, "T"),
            "A\u{1}1\u{2}REAL_TOPIC\u{1}T"
        );
        assert_eq!(set(p, "A", ""), remove(p, "A"));
        assert_eq!(set("", "A", "1"), "A\u{1}1");
        assert_eq!(remove("", "A"), "");
    }

    #[test]
    fn keys_split_on_single_spaces() {
        let v: Vec<&str> = keys_of(" k1  k2 k3 ").collect();
        assert_eq!(v, ["k1", "k2", "k3"]);
        assert_eq!(keys_of("").count(), 0);
        assert_eq!(keys_of("   ").count(), 0);
    }

    #[test]
    fn wait_and_delay() {
        assert!(wait_store_msg_ok(""));
        assert!(wait_store_msg_ok("WAIT\u{1}TRUE\u{2}"));
        assert!(!wait_store_msg_ok("WAIT\u{1}false\u{2}"));
        assert!(!wait_store_msg_ok("WAIT\u{1}yes\u{2}"));
        assert_eq!(delay_time_level("DELAY\u{1}3\u{2}"), Some(3));
        assert_eq!(delay_time_level("DELAY\u{1}x\u{2}"), None);
        assert_eq!(delay_time_level(""), None);
    }

    #[test]
    fn validity() {
        assert!(is_valid_entry("K", "v\u{1}w"));
        assert!(!is_valid_entry("", "v"));
        assert!(!is_valid_entry("K", ""));
        assert!(!is_valid_entry("K\u{1}", "v"));
        assert!(!is_valid_entry("K", "v\u{2}"));
    }

    /// Reference model of the parser: a plain map built segment by segment.
    fn model(props: &str) -> HashMap<String, String> {
        let mut m = HashMap::new();
        for seg in props.split('\u{2}') {
            let chars: Vec<char> = seg.chars().collect();
            if let Some(i) = chars.iter().position(|&c| c == '\u{1}') {
                if i > 0 && i + 1 < chars.len() {
                    let k: String = chars[..i].iter().collect();
                    let v: String = chars[i + 1..].iter().collect();
                    m.insert(k, v);
                }
            }
        }
        m
    }

    proptest! {
        #[test]
        fn find_and_parse_agree_with_model(p in "[ab\u{1}\u{2}é]{0,24}") {
            let m = model(&p);
            let parsed = parse(&p);
            prop_assert_eq!(parsed.len(), m.len());
            for (k, v) in &parsed {
                prop_assert_eq!(m.get(k), Some(v));
            }
            for key in ["a", "b", "ab", "ba", "aa", "é", "", "a\u{1}", "a\u{1}b", "\u{2}a", "\u{1}"] {
                prop_assert_eq!(find(&p, key), m.get(key).map(String::as_str));
            }
        }

        #[test]
        fn encode_parse_round_trip(
            m in proptest::collection::btree_map("[A-Za-z_é]{1,6}", "[ -~é\u{1}]{1,10}", 0..8)
        ) {
            let v: Vec<(String, String)> = m.into_iter().collect();
            let p = encode(&v);
            prop_assert_eq!(parse(&p), v.clone());
            for (k, val) in &v {
                prop_assert_eq!(find(&p, k), Some(val.as_str()));
                let (s, r) = (set(&p, k, "Z"), remove(&p, k));
                prop_assert_eq!(find(&s, k), Some("Z"));
                prop_assert_eq!(find(&r, k), None);
                prop_assert_eq!(parse(&r).len(), v.len() - 1);
            }
        }

        #[test]
        fn set_then_find_on_arbitrary_strings(p in "[ab\u{1}\u{2}]{0,24}", v in "[xy]{1,3}") {
            let s = set(&p, "a", &v);
            prop_assert_eq!(find(&s, "a"), Some(v.as_str()));
            prop_assert_eq!(find(&s, "b"), find(&p, "b"));
            let r = remove(&p, "a");
            prop_assert_eq!(find(&r, "a"), None);
            prop_assert_eq!(find(&r, "b"), find(&p, "b"));
        }
    }
}
