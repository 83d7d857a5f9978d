//! Java `String.hashCode()` as RocketMQ uses it on disk.
//!
//! Owns: the one hash that leaks into persisted bytes — the ConsumeQueue `tagsCode` (hash of the
//! whole `TAGS` value, sign-extended to i64) and the IndexFile key hash.
//!
//! Invariant: the result is bit-identical to the JVM's, i.e. `s[0]*31^(n-1) + … + s[n-1]` in
//! wrapping 32-bit arithmetic over **UTF-16 code units** (not bytes, not chars). A non-BMP char
//! therefore contributes two units (its surrogate pair). Getting this wrong silently breaks tag
//! filtering and key lookups against files written by a Java broker.

/// Java `String.hashCode()` of `s`: wrapping `h = 31*h + unit` over the UTF-16 encoding.
#[inline]
pub fn java_string_hash(s: &str) -> i32 {
    // Java caches and computes exactly this; `encode_utf16` yields surrogate pairs for chars
    // above U+FFFF, matching Java's internal representation.
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// ConsumeQueue tagsCode for a `TAGS` value: the Java hash sign-extended to i64, 0 for an empty
/// (or absent, pass `""`) tag. The multi-tag flag does not change this computation.
#[inline]
pub fn tags_code(tags: &str) -> i64 {
    if tags.is_empty() {
        0
    } else {
        i64::from(java_string_hash(tags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_zero() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(tags_code(""), 0);
    }

    #[test]
    fn golden_values() {
        // "TagA" = T(84)*31^3 + a(97)*31^2 + g(103)*31 + A(65)
        //        = 2_502_444 + 93_217 + 3_193 + 65 = 2_598_919
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(tags_code("TagA"), 2_598_919);
        // Single char: its code unit.
        assert_eq!(java_string_hash("a"), 97);
        // Well-known JVM value.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // Wrapping: this famous string hashes to Integer.MIN_VALUE on the JVM.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(tags_code("polygenelubricants"), i64::from(i32::MIN));
    }

    #[test]
    fn non_bmp_uses_two_utf16_units() {
        // U+1F600 = surrogates 0xD83D, 0xDE00: 0xD83D*31 + 0xDE00 = 1_716_067 + 56_832.
        assert_eq!(java_string_hash("😀"), 1_772_899);
        // A 2-byte UTF-8 char is still one unit: 'é' = U+00E9 = 233.
        assert_eq!(java_string_hash("é"), 233);
    }

    #[test]
    fn negative_hash_sign_extends() {
        // Long enough strings overflow to negative values; tagsCode keeps the sign.
        assert_eq!(java_string_hash("TagA||TagB||TagC"), -136_118_632);
        assert_eq!(tags_code("TagA||TagB||TagC"), -136_118_632i64);
    }
}
