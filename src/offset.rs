//! Offset newtypes. RocketMQ has two kinds of offsets that are both `long` in Java and are mixed
//! up easily: a byte position in the CommitLog ("physical offset") and a unit index in a
//! ConsumeQueue ("queue offset", also called logical offset). They never cross a module line as a
//! bare integer.

use std::fmt;

/// A global byte position in the CommitLog (file start offset + position in the file).
#[doc(alias = "physicOffset")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhyOffset(pub u64);

/// An index into one ConsumeQueue (topic, queue id): the n-th message of that queue.
#[doc(alias = "logicOffset")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueOffset(pub u64);

impl PhyOffset {
    pub const ZERO: PhyOffset = PhyOffset(0);
    #[inline]
    pub fn get(self) -> u64 {
        self.0
    }
    #[inline]
    pub fn plus(self, bytes: u64) -> PhyOffset {
        PhyOffset(self.0 + bytes)
    }
}

impl QueueOffset {
    #[inline]
    pub fn get(self) -> u64 {
        self.0
    }
    #[inline]
    pub fn plus(self, n: u64) -> QueueOffset {
        QueueOffset(self.0 + n)
    }
}

impl fmt::Display for PhyOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for QueueOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The 20-digit zero-padded decimal file name RocketMQ gives CommitLog and ConsumeQueue files.
pub fn file_name_of(start: u64) -> String {
    format!("{start:020}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_twenty_digits() {
        assert_eq!(file_name_of(0), "00000000000000000000");
        assert_eq!(file_name_of(1_073_741_824), "00000000001073741824");
    }
}
