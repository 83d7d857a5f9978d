//! Why an append was refused (RocketMQ's `PutMessageStatus`,
//! store/src/main/java/org/apache/rocketmq/store/PutMessageStatus.java), and the one mapping from
//! a refusal to a remoting response code (the broker's
//! `SendMessageProcessor.handlePutMessageResult`). Every refusal carries a remark that names the
//! limit that was hit, so a client sees *what* was wrong, not just a number.

use std::fmt;

/// RocketMQ's `PutMessageStatus`, plus two SEND-level checks the store also enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutStatus {
    PutOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
    ServiceNotAvailable,
    #[doc(alias = "CREATE_MAPEDFILE_FAILED")]
    CreateMappedFileFailed,
    MessageIllegal,
    PropertiesSizeExceeded,
    OsPageCacheBusy,
    UnknownError,
    /// Topic name breaks `^[%|a-zA-Z0-9_-]+$` or the length limit (SEND msgCheck).
    TopicIllegal,
    /// Producers may not write system topics such as `SCHEDULE_TOPIC_XXXX`.
    TopicForbidden,
    /// The writer's mailbox wait exceeded `waitTimeMillsInSendQueue`.
    SystemBusy,
}

/// Remoting response codes used by the store's answers (4.9.4's
/// common/src/main/java/org/apache/rocketmq/common/protocol/ResponseCode.java and, for 0-2,
/// remoting's `RemotingSysResponseCode`; INVALID_PARAMETER is 5.x's).
pub mod response_code {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const FLUSH_DISK_TIMEOUT: i32 = 10;
    pub const SLAVE_NOT_AVAILABLE: i32 = 11;
    pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
    pub const MESSAGE_ILLEGAL: i32 = 13;
    pub const SERVICE_NOT_AVAILABLE: i32 = 14;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const INVALID_PARAMETER: i32 = 29;
}

impl PutStatus {
    /// The SEND response code for this status (5.x's `SendMessageProcessor.handlePutMessageResult`:
    /// OS_PAGE_CACHE_BUSY is SYSTEM_BUSY there, SYSTEM_ERROR in 4.9.4).
    pub fn response_code(self) -> i32 {
        use response_code::*;
        match self {
            PutStatus::PutOk => SUCCESS,
            PutStatus::FlushDiskTimeout => FLUSH_DISK_TIMEOUT,
            PutStatus::FlushSlaveTimeout => FLUSH_SLAVE_TIMEOUT,
            PutStatus::SlaveNotAvailable => SLAVE_NOT_AVAILABLE,
            PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded => MESSAGE_ILLEGAL,
            PutStatus::ServiceNotAvailable => SERVICE_NOT_AVAILABLE,
            PutStatus::OsPageCacheBusy | PutStatus::SystemBusy => SYSTEM_BUSY,
            PutStatus::TopicIllegal => INVALID_PARAMETER,
            PutStatus::TopicForbidden => NO_PERMISSION,
            PutStatus::CreateMappedFileFailed | PutStatus::UnknownError => SYSTEM_ERROR,
        }
    }
    /// The statuses for which the message *was* stored and the SEND header is filled.
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            PutStatus::PutOk
                | PutStatus::FlushDiskTimeout
                | PutStatus::FlushSlaveTimeout
                | PutStatus::SlaveNotAvailable
        )
    }
}

/// A refused append: the status and a remark naming the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutError {
    pub status: PutStatus,
    pub remark: String,
}

impl PutError {
    pub fn new(status: PutStatus, remark: impl Into<String>) -> PutError {
        PutError {
            status,
            remark: remark.into(),
        }
    }
}

impl fmt::Display for PutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.status, self.remark)
    }
}

impl std::error::Error for PutError {}
