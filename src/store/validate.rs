//! SEND-level checks a producer's message passes before it reaches the CommitLog writer (the
//! broker's `AbstractSendMessageProcessor.msgCheck`): topic name rules and the system topics
//! producers may not write. Size limits are enforced by the writer itself (`commit_log`), because
//! they depend on the encoded length.

use super::status::{PutError, PutStatus};

/// RocketMQ's `TopicValidator` length limit.
pub const MAX_TOPIC_LENGTH: usize = 127;

/// RocketMQ 4.9.4's `TopicValidator` system topic set (common/.../topic/TopicValidator.java).
pub const SYSTEM_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// Topics only the broker itself writes.
pub const FORBIDDEN_TOPICS: &[&str] = &[
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// `^[%|a-zA-Z0-9_-]+$`, at most 127 characters.
pub fn check_topic_name(topic: &str) -> Result<(), PutError> {
    if topic.trim().is_empty() {
        return Err(PutError::new(
            PutStatus::TopicIllegal,
            "the topic name is blank",
        ));
    }
    if topic.len() > MAX_TOPIC_LENGTH {
        return Err(PutError::new(
            PutStatus::TopicIllegal,
            format!(
                "the topic name is {} characters; the limit is {MAX_TOPIC_LENGTH}",
                topic.len()
            ),
        ));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')))
    {
        return Err(PutError::new(
            PutStatus::TopicIllegal,
            format!("the topic name {topic:?} contains {c:?}; allowed characters are ^[%|a-zA-Z0-9_-]+$"),
        ));
    }
    Ok(())
}

/// Name rules plus the forbidden system topics.
pub fn check_send_topic(topic: &str) -> Result<(), PutError> {
    check_topic_name(topic)?;
    if FORBIDDEN_TOPICS.contains(&topic) {
        return Err(PutError::new(
            PutStatus::TopicForbidden,
            format!("sending to the system topic {topic} is forbidden"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_rules() {
        assert!(check_send_topic("Topic_A-1%|x").is_ok());
        assert_eq!(
            check_send_topic("").unwrap_err().status,
            PutStatus::TopicIllegal
        );
        assert_eq!(
            check_send_topic("a b").unwrap_err().status,
            PutStatus::TopicIllegal
        );
        assert_eq!(
            check_send_topic(&"a".repeat(128)).unwrap_err().status,
            PutStatus::TopicIllegal
        );
        let e = check_send_topic("SCHEDULE_TOPIC_XXXX").unwrap_err();
        assert_eq!(e.status, PutStatus::TopicForbidden);
        assert_eq!(e.status.response_code(), 16);
    }
}
