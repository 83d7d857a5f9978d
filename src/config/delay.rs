//! `messageDelayLevel`: RocketMQ's default table and its parser (the syntax
//! Apache RocketMQ's `ScheduleMessageService.parseDelayLevel` reads).
//!
//! Owns no state. Invariants: level `n` is at index `n - 1`; every parsed delay fits an `i64`
//! of milliseconds; an error names the level, its text and the rule.

/// RocketMQ's default `messageDelayLevel`: 18 levels, level = 1-based position.
pub const DEFAULT_MESSAGE_DELAY_LEVEL: &str =
    "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Why a `messageDelayLevel` string is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelayLevelError {
    #[error("expected at least one level, e.g. \"1s 5s 10s 30s 1m\"")]
    Empty,
    #[error("level {level} {token:?}: expected a whole number followed by one unit of s, m, h, d (e.g. \"30s\", \"2h\")")]
    Malformed { level: usize, token: String },
    #[error("level {level} {token:?}: delay too large")]
    Overflow { level: usize, token: String },
}

/// Parses a RocketMQ `messageDelayLevel` string ("1s 5s 10s … 2h") into milliseconds per level
/// (level `n` at index `n - 1`). Levels are separated by whitespace; each is a whole number and
/// one unit `s`, `m`, `h` or `d` (lower case, as RocketMQ's table). Results fit an `i64`, so
/// `store time + delay` cannot overflow a Java timestamp type.
pub fn parse_delay_levels(s: &str) -> Result<Vec<u64>, DelayLevelError> {
    let mut out = Vec::new();
    for (i, token) in s.split_ascii_whitespace().enumerate() {
        let level = i + 1;
        let malformed = || DelayLevelError::Malformed {
            level,
            token: token.to_owned(),
        };
        let overflow = || DelayLevelError::Overflow {
            level,
            token: token.to_owned(),
        };
        let (unit_at, unit) = token.char_indices().last().ok_or_else(malformed)?;
        let unit_ms: u64 = match unit {
            's' => 1000,
            'm' => 60 * 1000,
            'h' => 60 * 60 * 1000,
            'd' => 24 * 60 * 60 * 1000,
            _ => return Err(malformed()),
        };
        let number = &token[..unit_at];
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed());
        }
        let n: u64 = number.parse().map_err(|_| overflow())?;
        let ms = n
            .checked_mul(unit_ms)
            .filter(|ms| *ms <= i64::MAX as u64)
            .ok_or_else(overflow)?;
        out.push(ms);
    }
    if out.is_empty() {
        return Err(DelayLevelError::Empty);
    }
    Ok(out)
}
