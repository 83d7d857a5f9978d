//! How values are spelled: the RocketMQ enums ([`FlushDiskType`], [`BrokerRole`]) with their
//! exact Java names, and the serde helpers that read an empty optional string as unset.
//!
//! Owns no state. Invariants: an enum serializes to RocketMQ's spelling and parses it ignoring
//! case and surrounding blanks; a parse error is the rule text the loader reports
//! (`expected ASYNC_FLUSH or SYNC_FLUSH`).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

macro_rules! rocketmq_enum {
    ($(#[$meta:meta])* $name:ident, $expected:literal, { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// RocketMQ's spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text,)+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// Parses RocketMQ's spelling; surrounding whitespace and letter case are ignored.
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let s = s.trim();
                $(if s.eq_ignore_ascii_case($text) { return Ok(Self::$variant); })+
                Err($expected.to_owned())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

rocketmq_enum!(
    /// `flushDiskType`: when a put is acknowledged relative to the CommitLog flush.
    FlushDiskType, "expected ASYNC_FLUSH or SYNC_FLUSH", {
        /// Acknowledge after the append; a flush thread writes back every `flushIntervalCommitLog`.
        /// The default.
        #[default]
        AsyncFlush => "ASYNC_FLUSH",
        /// Acknowledge after the data is flushed (group commit), or `syncFlushTimeout` elapses.
        SyncFlush => "SYNC_FLUSH",
    }
);

rocketmq_enum!(
    /// `brokerRole`: replication role of this broker.
    BrokerRole, "expected ASYNC_MASTER, SYNC_MASTER or SLAVE", {
        /// Master; acknowledges before the slave has the data. The default.
        #[default]
        AsyncMaster => "ASYNC_MASTER",
        /// Master; acknowledges after a slave has the data.
        SyncMaster => "SYNC_MASTER",
        /// Replicates from `haMasterAddress` (or the address the name server reports).
        Slave => "SLAVE",
    }
);

impl BrokerRole {
    pub const fn is_slave(self) -> bool {
        matches!(self, BrokerRole::Slave)
    }
    pub const fn is_master(self) -> bool {
        !self.is_slave()
    }
}

/// Empty or blank strings mean "unset" (e.g. `NAMESRV_ADDR=`).
pub(super) fn de_opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.trim().is_empty()))
}

pub(super) fn de_opt_path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    Ok(de_opt_string(d)?.map(PathBuf::from))
}
