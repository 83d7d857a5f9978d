//! fastjson 1.2.69's dialect of JSON, the one Apache RocketMQ 4.9.4 reads and writes bodies in
//! (`RemotingSerializable.decode` = `JSON.parseObject`, `encode` = `JSON.toJSONString(obj, false)`,
//! remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RemotingSerializable.java).
//!
//! Owns: the reading helpers for `#[serde(deserialize_with = "…")]` in [`read`], the
//! [`java_enum!`](crate::java_enum) macro for Java enums, and [`to_vec`], which writes fastjson's
//! text.
//!
//! Reading (what fastjson accepts for a bean field, measured on 4.9.4's jars and pinned in
//! `body_tests.rs`): a number field takes a number, a string holding one (`"42"`, `"+5"`; not
//! `" 8"`, `"8.7"` or `"1e2"`), a float (truncated) or `null`/`""`/`"null"` (the default); a
//! string field takes any scalar (`123` ⇒ `"123"`); a boolean takes `true`/`false`, `1` (any
//! other number is false), or the strings `true`/`false` (any case), `1`/`0`, `Y`/`N`, `T`/`F`;
//! an enum takes its Java ordinal or its name in any case. Beyond fastjson, and on purpose: an
//! ordinal or name we do not know reads as the enum's `Unknown` instead of failing the body, and
//! booleans accept lower-case `y`/`n`/`t`/`f`. Not accepted (no client sends them): single quotes,
//! unquoted non-numeric field names, comments, objects or arrays where a scalar belongs.
//!
//! Writing: fastjson writes integer map keys unquoted (`{0:"127.0.0.1:10911"}` — not standard
//! JSON) and otherwise compact standard JSON. Field order (alphabetical) and omitted `null`s are
//! the serde types' business: their fields are declared in that order.

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Serialize;
use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::marker::PhantomData;

/// One JSON scalar as the deserializer hands it over; strings stay borrowed when unescaped.
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(Cow<'a, str>),
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, string, boolean or null")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::I64(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::F64(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> de::Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

impl Scalar<'_> {
    /// fastjson's integer: `None` for the field's default (`null`, `""`, `"null"`).
    fn integer<E: de::Error>(&self) -> Result<Option<i64>, E> {
        Ok(Some(match self {
            Scalar::Null => return Ok(None),
            Scalar::Bool(b) => i64::from(*b),
            Scalar::I64(v) => *v,
            Scalar::U64(v) => i64::try_from(*v)
                .map_err(|_| E::invalid_value(Unexpected::Unsigned(*v), &"a 64-bit integer"))?,
            // `as` truncates toward zero, as Java's `BigDecimal.longValue()` does; NaN and the
            // infinities cannot come out of a JSON parser.
            Scalar::F64(v) if v.abs() < 9.2e18 => *v as i64,
            Scalar::F64(v) => return Err(E::invalid_value(Unexpected::Float(*v), &"an integer")),
            Scalar::Str(s) if s.is_empty() || s.as_ref() == "null" => return Ok(None),
            Scalar::Str(s) => s
                .parse()
                .map_err(|_| E::invalid_value(Unexpected::Str(s), &"an integer"))?,
        }))
    }

    fn boolean<E: de::Error>(&self) -> Result<bool, E> {
        match self {
            Scalar::Null => Ok(false),
            Scalar::Bool(b) => Ok(*b),
            Scalar::I64(v) => Ok(*v == 1),
            Scalar::U64(v) => Ok(*v == 1),
            Scalar::F64(v) => Ok(*v as i64 == 1),
            Scalar::Str(s) => match s.as_bytes() {
                b"" | b"0" | b"N" | b"n" | b"F" | b"f" | b"null" => Ok(false),
                b"1" | b"Y" | b"y" | b"T" | b"t" => Ok(true),
                _ if s.eq_ignore_ascii_case("true") => Ok(true),
                _ if s.eq_ignore_ascii_case("false") => Ok(false),
                _ => Err(E::invalid_value(Unexpected::Str(s), &"a boolean")),
            },
        }
    }

    /// A string field's value; `None` for `null`.
    fn text(self) -> Option<String> {
        Some(match self {
            Scalar::Null => return None,
            Scalar::Bool(b) => b.to_string(),
            Scalar::I64(v) => v.to_string(),
            Scalar::U64(v) => v.to_string(),
            Scalar::F64(v) => v.to_string(),
            Scalar::Str(s) => s.into_owned(),
        })
    }
}

/// The `deserialize_with` helpers. Each reads one field the way fastjson would; `null` gives the
/// type's default (or `None`).
pub mod read {
    use super::*;
    use serde::de::Error as _;
    use serde::Deserialize;

    fn int_in<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D, default: T) -> Result<T, D::Error> {
        match Scalar::deserialize(d)?.integer()? {
            None => Ok(default),
            Some(v) => T::try_from(v)
                .map_err(|_| D::Error::invalid_value(Unexpected::Signed(v), &"a 32-bit integer")),
        }
    }

    /// Java `int`.
    pub fn i32<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        int_in(d, 0)
    }

    /// Java `int` whose default (a missing field, `null`, `""`) is `DEFAULT`.
    pub fn i32_or<'de, const DEFAULT: i32, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        int_in(d, DEFAULT)
    }

    /// Java `long`.
    pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        int_in(d, 0)
    }

    /// Java `Long` (nullable).
    pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        Scalar::deserialize(d)?.integer()
    }

    /// Java `boolean`.
    pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Scalar::deserialize(d)?.boolean()
    }

    /// Java `Boolean` (nullable).
    pub fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        match Scalar::deserialize(d)? {
            Scalar::Null => Ok(None),
            s => s.boolean().map(Some),
        }
    }

    /// Java `String`; `null` ⇒ empty.
    pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        Ok(Scalar::deserialize(d)?.text().unwrap_or_default())
    }

    /// Java `String` (nullable).
    pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(Scalar::deserialize(d)?.text())
    }

    /// An element type of [`strings`] / [`i32s`].
    trait Elem: Sized {
        fn from_scalar<E: de::Error>(s: Scalar) -> Result<Option<Self>, E>;
    }

    impl Elem for String {
        fn from_scalar<E: de::Error>(s: Scalar) -> Result<Option<Self>, E> {
            Ok(s.text())
        }
    }

    impl Elem for i32 {
        fn from_scalar<E: de::Error>(s: Scalar) -> Result<Option<Self>, E> {
            match s.integer()? {
                None => Ok(None),
                Some(v) => i32::try_from(v)
                    .map(Some)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &"a 32-bit integer")),
            }
        }
    }

    /// A collection of one scalar kind; `null` ⇒ empty, `null` elements are skipped.
    struct Elems<T>(PhantomData<T>);

    impl<'de, T: Elem> Visitor<'de> for Elems<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array or null")
        }
        fn visit_unit<E>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_none<E>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
            while let Some(s) = seq.next_element::<Scalar>()? {
                if let Some(v) = T::from_scalar(s)? {
                    out.push(v);
                }
            }
            Ok(out)
        }
    }

    /// `Set<String>` / `List<String>`: numbers and booleans become their text.
    pub fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_any(Elems(PhantomData))
    }

    /// `Set<Integer>`.
    pub fn i32s<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
        d.deserialize_any(Elems(PhantomData))
    }

    /// A Java enum constant: its ordinal (index into `table`, Java's declaration order) or its
    /// name in any case; `null` or `""` ⇒ `default`, anything else ⇒ `unknown`.
    pub fn java_enum<'de, D: Deserializer<'de>, T: Copy>(
        d: D,
        table: &[(T, &str)],
        default: T,
        unknown: T,
    ) -> Result<T, D::Error> {
        Ok(match Scalar::deserialize(d)? {
            Scalar::Null => default,
            Scalar::Str(s) if s.is_empty() => default,
            Scalar::Str(s) => table
                .iter()
                .find(|(_, name)| name.eq_ignore_ascii_case(&s))
                .map_or(unknown, |(v, _)| *v),
            Scalar::I64(i) => usize::try_from(i)
                .ok()
                .and_then(|i| table.get(i))
                .map_or(unknown, |(v, _)| *v),
            Scalar::U64(i) => usize::try_from(i)
                .ok()
                .and_then(|i| table.get(i))
                .map_or(unknown, |(v, _)| *v),
            Scalar::Bool(_) | Scalar::F64(_) => unknown,
        })
    }
}

/// Declares a Java enum: written as its name, read as fastjson reads it
/// ([`read::java_enum`]). List the constants in Java's declaration order — the order is the
/// ordinal; a trailing `Unknown` variant is added for values this version does not know.
#[macro_export]
macro_rules! java_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $java:literal,)*
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A name or ordinal this version does not know.
            Unknown,
        }

        impl $name {
            /// The constants with their Java names, in declaration order (index = ordinal).
            pub const JAVA: &'static [($name, &'static str)] = &[$(($name::$variant, $java)),*];

            /// The Java name (`UNKNOWN` for [`Self::Unknown`]).
            pub fn java_name(self) -> &'static str {
                match self {
                    $($name::$variant => $java,)*
                    $name::Unknown => "UNKNOWN",
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.java_name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::protocol::fastjson::read::java_enum(
                    d,
                    Self::JAVA,
                    Self::default(),
                    Self::Unknown,
                )
            }
        }
    };
}

/// Serialises `value` as fastjson does: compact, integer map keys unquoted.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, KeyFormatter::default());
    value.serialize(&mut ser)?;
    Ok(out)
}

/// Where the formatter is relative to an object key. serde_json writes an integer key as
/// `begin_string`, the number, `end_string`; the opening quote is held back until we know
/// whether text (quote it) or a number (leave it bare) follows.
#[derive(Default, PartialEq, Eq, Clone, Copy)]
enum Key {
    #[default]
    Outside,
    /// Inside a key, nothing written yet.
    Start,
    /// `begin_string` of a key seen, its quote not yet written.
    QuoteHeld,
    /// Writing a quoted key.
    Text,
    /// Writing a bare number key.
    Number,
}

#[derive(Default)]
struct KeyFormatter {
    key: Key,
}

macro_rules! bare_in_key {
    ($($f:ident: $t:ty),*) => {$(
        fn $f<W: ?Sized + Write>(&mut self, w: &mut W, v: $t) -> io::Result<()> {
            if self.key == Key::QuoteHeld {
                self.key = Key::Number;
            }
            serde_json::ser::CompactFormatter.$f(w, v)
        }
    )*};
}

impl KeyFormatter {
    fn release_quote<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.key == Key::QuoteHeld {
            self.key = Key::Text;
            w.write_all(b"\"")?;
        }
        Ok(())
    }
}

impl serde_json::ser::Formatter for KeyFormatter {
    bare_in_key!(write_bool: bool, write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64,
        write_i128: i128, write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64,
        write_u128: u128, write_f32: f32, write_f64: f64);

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.key = Key::Start;
        serde_json::ser::CompactFormatter.begin_object_key(w, first)
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.key = Key::Outside;
        Ok(())
    }

    fn begin_string<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.key == Key::Start {
            self.key = Key::QuoteHeld;
            return Ok(());
        }
        w.write_all(b"\"")
    }

    fn end_string<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        match self.key {
            Key::Number => Ok(()),
            // An empty key: nothing came between the quotes.
            Key::QuoteHeld => w.write_all(b"\"\""),
            _ => w.write_all(b"\""),
        }
    }

    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, s: &str) -> io::Result<()> {
        self.release_quote(w)?;
        w.write_all(s.as_bytes())
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        c: serde_json::ser::CharEscape,
    ) -> io::Result<()> {
        self.release_quote(w)?;
        serde_json::ser::CompactFormatter.write_char_escape(w, c)
    }
}
