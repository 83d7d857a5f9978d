//! Java `.properties` files (RocketMQ's `broker.conf`), read and written the way
//! `java.util.Properties` does.
//!
//! Why our own parser rather than the `java-properties` crate: we need the line of every entry
//! (duplicate-key warnings, errors naming `file:line`) and Java's byte decoding fallback, and
//! the format is small and fully specified by `Properties.load`.
//!
//! Reading ([`parse`]) follows `Properties.load(Reader)`:
//!
//! * Lines end at `\n`, `\r` or `\r\n`. Leading blanks (space, tab, form feed) are skipped.
//! * A line whose first non-blank character is `#` or `!` is a comment; blank lines are skipped.
//!   A comment never continues onto the next line.
//! * A line ending in an odd number of `\` continues on the next line; that backslash, the line
//!   break and the next line's leading blanks are dropped (a trailing `\` at end of file is
//!   dropped too).
//! * The key ends at the first unescaped `=`, `:` or blank; then blanks, at most one `=`/`:`,
//!   and blanks again are skipped; the rest of the line is the value (trailing blanks included,
//!   as in Java — callers trim).
//! * Escapes in keys and values: `\t`, `\n`, `\r`, `\f`, `\uXXXX` (UTF-16 code units; a
//!   surrogate pair is two escapes), and `\c` = `c` for any other character (`\=`, `\:`, `\ `,
//!   `\#`, `\\`). A malformed `\u` escape is the one error Java knows; an unpaired surrogate is
//!   a second one here (a Rust string cannot hold it). Both name the line.
//! * The last of duplicate keys wins (each [`Entry`] keeps its line, so callers can warn).
//!
//! Decoding ([`decode`]): UTF-8, else ISO-8859-1 (what `Properties.load(InputStream)`, which
//! RocketMQ's `BrokerStartup` uses, always assumes). A UTF-8 byte-order mark is dropped.
//!
//! Writing ([`escape_key`], [`escape_value`]) follows `Properties.store`: the result reads back
//! to the same string in Java and here, and is pure ASCII (other characters become `\uXXXX`).

use std::borrow::Cow;
use std::fmt;

/// One `key=value` entry, unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    /// 1-based line on which the entry starts (continuations may span more lines).
    pub line: usize,
}

/// A `.properties` syntax error: the 1-based line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// File bytes as text: UTF-8 if they are valid UTF-8 (a leading byte-order mark dropped), else
/// ISO-8859-1, one character per byte, as Java's `Properties.load(InputStream)`.
pub fn decode(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s.strip_prefix('\u{feff}').unwrap_or(s)),
        Err(_) => Cow::Owned(bytes.iter().map(|&b| char::from(b)).collect()),
    }
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Splits `text` into natural lines: `(1-based line number, text without terminator)`.
fn natural_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text;
    let mut number = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        number += 1;
        let end = rest.find(['\n', '\r']).unwrap_or(rest.len());
        let line = &rest[..end];
        let after = &rest[end..];
        rest = if let Some(r) = after.strip_prefix("\r\n") {
            r
        } else if after.is_empty() {
            after
        } else {
            &after[1..]
        };
        Some((number, line))
    })
}

/// Whether `s` ends in an odd number of backslashes (the last one escapes the line break).
fn ends_with_continuation(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// A logical line: the joined text and, for error messages, where each natural line starts in it.
struct Logical {
    text: String,
    /// `(byte offset in text, 1-based natural line)`, ascending.
    starts: Vec<(usize, usize)>,
}

impl Logical {
    fn line_at(&self, offset: usize) -> usize {
        self.starts
            .iter()
            .rev()
            .find(|(start, _)| *start <= offset)
            .map_or(self.starts[0].1, |(_, line)| *line)
    }
}

/// Parses `.properties` text into entries in file order (duplicates kept; the last one wins).
pub fn parse(text: &str) -> Result<Vec<Entry>, ParseError> {
    let mut entries = Vec::new();
    let mut lines = natural_lines(text);
    while let Some((number, raw)) = lines.next() {
        let first = raw.trim_start_matches(is_blank);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = Logical {
            text: String::new(),
            starts: vec![(0, number)],
        };
        let mut part = first;
        loop {
            if !ends_with_continuation(part) {
                logical.text.push_str(part);
                break;
            }
            logical.text.push_str(&part[..part.len() - 1]);
            match lines.next() {
                Some((n, next)) => {
                    logical.starts.push((logical.text.len(), n));
                    part = next.trim_start_matches(is_blank);
                }
                // A continuation at end of file: the backslash is dropped, as in Java.
                None => break,
            }
        }
        entries.push(split_entry(&logical)?);
    }
    Ok(entries)
}

/// Splits a logical line into its unescaped key and value.
fn split_entry(logical: &Logical) -> Result<Entry, ParseError> {
    let line = logical.text.as_str();
    let mut key_end = line.len();
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => {
                key_end = i;
                value_start = i + 1;
                has_separator = true;
                break;
            }
            c if is_blank(c) => {
                key_end = i;
                value_start = i + c.len_utf8();
                break;
            }
            _ => {}
        }
    }
    // Blanks, then (if the key ended at a blank) at most one '=' or ':', then blanks.
    let mut rest = &line[value_start..];
    loop {
        let trimmed = rest.trim_start_matches(is_blank);
        match trimmed.strip_prefix(['=', ':']) {
            Some(after) if !has_separator => {
                has_separator = true;
                rest = after;
            }
            _ => {
                rest = trimmed;
                break;
            }
        }
    }
    let value_start = line.len() - rest.len();
    Ok(Entry {
        key: unescape(logical, 0, key_end)?,
        value: unescape(logical, value_start, line.len())?,
        line: logical.starts[0].1,
    })
}

/// Resolves the escapes of `logical.text[start..end]`.
fn unescape(logical: &Logical, start: usize, end: usize) -> Result<String, ParseError> {
    let s = &logical.text[start..end];
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else {
            // Only reachable for a backslash dropped at end of file; nothing to add.
            break;
        };
        match e {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'u' => {
                let at = start + i;
                let unit = hex4(&s[i + 2..]).ok_or_else(|| malformed(logical, at, &s[i..]))?;
                for _ in 0..4 {
                    chars.next();
                }
                let ch = match unit {
                    0xD800..=0xDBFF => {
                        // A high surrogate must be followed by `\u` + a low surrogate.
                        let next = i + 6;
                        let low = s[next..]
                            .strip_prefix("\\u")
                            .and_then(hex4)
                            .filter(|u| (0xDC00..=0xDFFF).contains(u));
                        let Some(low) = low else {
                            return Err(unpaired(logical, at, unit));
                        };
                        for _ in 0..6 {
                            chars.next();
                        }
                        let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(code).ok_or_else(|| unpaired(logical, at, unit))?
                    }
                    0xDC00..=0xDFFF => return Err(unpaired(logical, at, unit)),
                    _ => char::from_u32(unit).ok_or_else(|| unpaired(logical, at, unit))?,
                };
                out.push(ch);
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The value of exactly four hex digits at the start of `s`.
fn hex4(s: &str) -> Option<u32> {
    let digits = s.get(..4)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

fn malformed(logical: &Logical, at: usize, from: &str) -> ParseError {
    let shown: String = from.chars().take(6).collect();
    ParseError {
        line: logical.line_at(at),
        message: format!(
            "malformed \\uXXXX escape \"{shown}\": expected \\u followed by four hex digits"
        ),
    }
}

fn unpaired(logical: &Logical, at: usize, unit: u32) -> ParseError {
    ParseError {
        line: logical.line_at(at),
        message: format!(
            "unpaired UTF-16 surrogate \\u{unit:04X}: a character above U+FFFF is written as two \
             escapes, e.g. \\uD83D\\uDE00"
        ),
    }
}

fn escape(s: &str, is_key: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            ' ' if is_key || i == 0 => out.push_str("\\ "),
            '=' | ':' | '#' | '!' if is_key => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        }
    }
    out
}

/// `key` written so that it reads back unchanged (separators, blanks, comment characters and
/// non-ASCII escaped).
pub fn escape_key(key: &str) -> String {
    escape(key, true)
}

/// `value` written so that it reads back unchanged (a leading blank, backslashes, line breaks
/// and non-ASCII escaped).
pub fn escape_value(value: &str) -> String {
    escape(value, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect()
    }

    fn p(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn separators() {
        assert_eq!(
            pairs("a=1\nb:2\nc 3\nd\t=\t4\ne : 5\nf   6\ng\nh=\ni:=x\nj==y\nk = = z\n"),
            vec![
                p("a", "1"),
                p("b", "2"),
                p("c", "3"),
                p("d", "4"),
                p("e", "5"),
                p("f", "6"),
                p("g", ""),
                p("h", ""),
                p("i", "=x"),
                p("j", "=y"),
                p("k", "= z"),
            ]
        );
        // Only the first separator counts; the value keeps everything else, trailing blanks too.
        assert_eq!(pairs("url=a=b:c  "), vec![p("url", "a=b:c  ")]);
        assert_eq!(pairs("=v"), vec![p("", "v")]);
    }

    #[test]
    fn comments_and_blank_lines() {
        let text =
            "# comment\n! also a comment\n   # indented comment\n\n \t \nkey = v # not a comment\n";
        assert_eq!(pairs(text), vec![p("key", "v # not a comment")]);
        // A comment line never continues.
        assert_eq!(pairs("# a \\\nk=v"), vec![p("k", "v")]);
    }

    #[test]
    fn leading_whitespace_and_line_endings() {
        assert_eq!(
            pairs("  \t\u{c}a=1\r\nb=2\rc=3\n"),
            vec![p("a", "1"), p("b", "2"), p("c", "3")]
        );
        let e = parse("\n\r\n  x=1\r\n\ny=2").unwrap();
        assert_eq!(
            e.iter()
                .map(|e| (e.key.as_str(), e.line))
                .collect::<Vec<_>>(),
            vec![("x", 3), ("y", 5)]
        );
    }

    #[test]
    fn continuations() {
        let text = "levels = 1s 5s \\\n         10s \\\n\t30s\nnext=1\n";
        let e = parse(text).unwrap();
        assert_eq!(e[0].value, "1s 5s 10s 30s");
        assert_eq!((e[0].line, e[1].line), (1, 4));
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(
            pairs("a=x\\\\\nb=y\\\\\\\n  z"),
            vec![p("a", "x\\"), p("b", "y\\z")]
        );
        // The key itself may continue.
        assert_eq!(pairs("bro\\\n   kerName=a"), vec![p("brokerName", "a")]);
        // A continued line that looks like a comment is part of the value.
        assert_eq!(pairs("a=1\\\n# 2"), vec![p("a", "1# 2")]);
        // An empty continuation line ends the value; a continuation at end of file is dropped.
        assert_eq!(pairs("a=1\\\n\nb=2\\"), vec![p("a", "1"), p("b", "2")]);
        assert_eq!(pairs("a=1\\\r\n  2"), vec![p("a", "12")]);
    }

    #[test]
    fn escapes() {
        assert_eq!(
            pairs(r"a\ b\=c\:d = x\ty\nz\r\f\\\q\u0041\u00e9\u4E2D"),
            vec![p("a b=c:d", "x\ty\nz\r\u{c}\\qA\u{e9}\u{4e2d}")]
        );
        assert_eq!(pairs(r"k=\uD83D\uDE00"), vec![p("k", "\u{1F600}")]);
        assert_eq!(pairs(r"\#k=\!v"), vec![p("#k", "!v")]);
        assert_eq!(pairs("k=\\ \\ lead"), vec![p("k", "  lead")]);
    }

    #[test]
    fn malformed_unicode_escapes_name_the_line() {
        for bad in [r"\u12", r"\u12G4", r"\u", r"\uzzzz"] {
            let err = parse(&format!("# c\nok=1\nk={bad}\n")).unwrap_err();
            assert_eq!(err.line, 3, "{bad}");
            assert!(err.message.starts_with("malformed \\uXXXX escape"), "{err}");
        }
        // On a continuation line, the line of the escape is named.
        let err = parse("k=a \\\n  b \\\n  \\u00G0").unwrap_err();
        assert_eq!(err.line, 3);
        assert_eq!(
            err.to_string(),
            r#"line 3: malformed \uXXXX escape "\u00G0": expected \u followed by four hex digits"#
        );
        for bad in [r"\uD83D", r"\uD83Dx", r"\uDE00", r"\uD83D\u0041"] {
            let err = parse(&format!("k={bad}")).unwrap_err();
            assert!(
                err.message.starts_with("unpaired UTF-16 surrogate"),
                "{err}"
            );
        }
    }

    #[test]
    fn duplicates_are_kept_in_order() {
        let e = parse("a=1\nb=2\na=3").unwrap();
        assert_eq!(
            e.iter()
                .map(|e| (e.key.as_str(), e.value.as_str(), e.line))
                .collect::<Vec<_>>(),
            vec![("a", "1", 1), ("b", "2", 2), ("a", "3", 3)]
        );
    }

    #[test]
    fn decode_utf8_else_latin1() {
        assert_eq!(decode("\u{feff}k=é".as_bytes()), "k=é");
        assert_eq!(decode(b"k=\xe9"), "k=\u{e9}");
    }

    #[test]
    fn escaping_writes_ascii() {
        assert_eq!(escape_key("a b=c:d#!"), r"a\ b\=c\:d\#\!");
        assert_eq!(escape_value(" x y=z\\"), r"\ x y=z\\");
        assert_eq!(escape_value("é😀"), r"\u00E9\uD83D\uDE00");
    }

    proptest! {
        #[test]
        fn written_entries_read_back(key in "\\PC*", value in "\\PC*", k2 in "[ -~\t\n]*", v2 in "[ -~\t\n\r]*") {
            let text = format!(
                "{}={}\n{} : {}\n",
                escape_key(&key), escape_value(&value), escape_key(&k2), escape_value(&v2)
            );
            prop_assert!(text.is_ascii());
            prop_assert_eq!(pairs(&text), vec![(key, value), (k2, v2)]);
        }

        #[test]
        fn never_panics(text in "[ -~\t\n\r\\\\\u{e9}]*") {
            let _ = parse(&text);
        }
    }
}
